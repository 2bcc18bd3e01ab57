/* Unit tests of compiler/compare.c, the halves of `gpucc run --compare` that are not a run:
 *   - compare_outputs on outputs made here: equal ones, one element off (its index and both
 *     values shown), NaN and infinities on one side or both, an all-zero reference,
 *     integers compared exactly, --atol, the summary line, the columns aligned, and the
 *     outputs that do not correspond (a name on one side only, another dtype or shape),
 *     which are errors naming the output and print nothing;
 *   - onnxruntime_run's protocol with stand-ins for python3 (shell scripts): one that
 *     cannot be started, one whose import fails, one whose model fails, one that answers
 *     with the input as its output; the private temporary folder is gone after each.
 * onnxruntime itself runs in tests/lit/driver/compare-onnxruntime.gir. */
#include "compiler/build.h"
#include "tests/unit/check.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static Tensor *f32(int rank, const int64_t *dims, const float *v) {
  Tensor *t = tensor_new(DT_F32, rank, dims);
  memcpy(t->data, v, tensor_nbytes(t));
  return t;
}

static Tensor *i64(int rank, const int64_t *dims, const int64_t *v) {
  Tensor *t = tensor_new(DT_I64, rank, dims);
  memcpy(t->data, v, tensor_nbytes(t));
  return t;
}

/* want: one output per tensor, named names[i] (the tensors are taken over). */
static NamedTensors named(int n, const char *const *names, Tensor **t) {
  NamedTensors nt = {n, calloc((size_t)n, sizeof(char *)), calloc((size_t)n, sizeof(Tensor *))};
  for (int i = 0; i < n; i++) {
    nt.names[i] = strdup(names[i]);
    nt.t[i] = t[i];
  }
  return nt;
}

/* compare_outputs of got against want into *text (malloc'd); its result. */
static int run_compare(const char *const *names, Tensor *const *got, int n,
                       const NamedTensors *want, double rtol, double atol, char **text,
                       Diag *d) {
  size_t len;
  FILE *f = open_memstream(text, &len);
  int r = compare_outputs(names, got, n, want, "onnxruntime", rtol, atol, f, d);
  fclose(f);
  return r;
}

static void test_floats(void) {
  int64_t dims[] = {2, 2};
  float a[] = {1, 2, 3, 4}, b[] = {1, 2, 3, 4.5f};
  const char *names[] = {"y"};
  Tensor *got[] = {f32(2, dims, a)};
  Tensor *w[] = {f32(2, dims, a)};
  NamedTensors want = named(1, names, w);
  Diag d = {0};
  char *text = NULL;
  CHECK(run_compare(names, got, 1, &want, 1e-4, -1, &text, &d) == 0);
  CHECK(!strcmp(text, "y  [2,2]  f32  max abs 0  rel 0  ok\n1 output within rtol 1e-04\n"));
  free(text);
  /* one element off by 0.5: ||d|| / ||w|| = 0.5 / sqrt(1 + 4 + 9 + 20.25) */
  memcpy(want.t[0]->data, b, sizeof b);
  CHECK(run_compare(names, got, 1, &want, 1e-4, -1, &text, &d) == 1);
  CHECK(!strcmp(text, "y  [2,2]  f32  max abs 5.0e-01 at [1,1] (got 4, want 4.5)  rel 8.5e-02  "
                      "beyond\n1 of 1 output beyond rtol 1e-04\n"));
  free(text);
  /* within rtol 0.1, beyond atol 0.25; within both at 0.5 */
  CHECK(run_compare(names, got, 1, &want, 0.1, 0.25, &text, &d) == 1);
  CHECK(strstr(text, "beyond rtol 1e-01 or atol 2.5e-01\n"));
  free(text);
  CHECK(run_compare(names, got, 1, &want, 0.1, 0.5, &text, &d) == 0);
  CHECK(strstr(text, "  ok\n1 output within rtol 1e-01 and atol 5e-01\n"));
  free(text);
  tensor_free(got[0]);
  named_tensors_free(&want);
}

static void test_non_finite(void) {
  int64_t dims[] = {3};
  float nan = NAN, inf = INFINITY;
  const char *names[] = {"y"};
  struct {
    float got[3], want[3];
    const char *line; /* NULL: within */
  } cases[] = {
      {{nan, 1, inf}, {nan, 1, inf}, NULL},          /* the same non-finite values */
      {{nan, 1, 2}, {0.5f, 1, 2}, "max abs inf at [0] (got nan, want 0.5)  rel inf  beyond"},
      {{1, 2, inf}, {1, 2, -inf}, "max abs inf at [2] (got inf, want -inf)  rel inf  beyond"},
      {{1, 2, 3}, {1, 2, inf}, "max abs inf at [2] (got 3, want inf)  rel inf  beyond"},
      /* an all-zero reference: the error is the largest difference */
      {{0, 0, 0}, {0, 0, 0}, NULL},
      {{0, 1e-6f, 0}, {0, 0, 0}, "max abs 1.0e-06 at [1] (got 9.99999997e-07, want 0)  rel "
                                 "1.0e-06  ok"},
      {{0, 1e-3f, 0}, {0, 0, 0}, "rel 1.0e-03  beyond"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    Tensor *got[] = {f32(1, dims, cases[k].got)}, *w[] = {f32(1, dims, cases[k].want)};
    NamedTensors want = named(1, names, w);
    Diag d = {0};
    char *text = NULL;
    int r = run_compare(names, got, 1, &want, 1e-4, -1, &text, &d);
    bool beyond = cases[k].line && strstr(cases[k].line, "beyond");
    CHECK(r == (beyond ? 1 : 0));
    if (cases[k].line && !strstr(text, cases[k].line)) {
      fprintf(stderr, "case %zu: expected '%s' in:\n%s", k, cases[k].line, text);
      failures++;
    }
    free(text);
    tensor_free(got[0]);
    named_tensors_free(&want);
  }
}

/* Integers exactly; two outputs, each column as wide as its widest cell. */
static void test_integers_and_columns(void) {
  int64_t dims[] = {4}, sdims[] = {1};
  int64_t a[] = {1, 2, 3, 4}, b[] = {1, 2, 5, 7};
  float s[] = {2};
  const char *names[] = {"indices", "s"};
  Tensor *got[] = {i64(1, dims, a), f32(1, sdims, s)};
  Tensor *w[] = {i64(1, dims, b), f32(1, sdims, s)};
  NamedTensors want = named(2, names, w);
  Diag d = {0};
  char *text = NULL;
  CHECK(run_compare(names, got, 2, &want, 1e-4, -1, &text, &d) == 1);
  CHECK(!strcmp(text,
                "indices  [4]  i64  mismatches 2 of 4, first at [2] (got 3, want 5)  beyond\n"
                "s        [1]  f32  max abs 0  rel 0                                 ok\n"
                "1 of 2 outputs beyond rtol 1e-04\n"));
  free(text);
  tensor_free(got[0]);
  tensor_free(got[1]);
  named_tensors_free(&want);
}

/* Outputs that do not correspond: an error naming the output, nothing printed. */
static void test_mismatched_outputs(void) {
  int64_t d2[] = {2}, d3[] = {3};
  float v[] = {1, 2, 3};
  int64_t iv[] = {1, 2};
  const char *names[] = {"y"}, *other[] = {"z"};
  struct {
    Tensor *want;
    const char **want_names;
    const char *msg;
  } cases[] = {
      {f32(1, d2, v), other, "output 'y' of gpucc's run is not one of onnxruntime's ('z')"},
      {f32(1, d3, v), names, "output 'y': gpucc's run gives f32[2], onnxruntime's f32[3]"},
      {i64(1, d2, iv), names, "output 'y': gpucc's run gives f32[2], onnxruntime's i64[2]"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    Tensor *got[] = {f32(1, d2, v)};
    Tensor *w[] = {cases[k].want};
    NamedTensors want = named(1, cases[k].want_names, w);
    Diag d = {0};
    char *text = NULL;
    CHECK(run_compare(names, got, 1, &want, 1e-4, -1, &text, &d) == -1);
    CHECK(!strcmp(text, ""));
    if (!strstr(d.msg, cases[k].msg)) {
      fprintf(stderr, "case %zu: expected '%s', got '%s'\n", k, cases[k].msg, d.msg);
      failures++;
    }
    free(text);
    tensor_free(got[0]);
    named_tensors_free(&want);
  }
  /* one more output on the other side */
  Tensor *got[] = {f32(1, d2, v)};
  const char *two[] = {"y", "extra"};
  Tensor *w[] = {f32(1, d2, v), f32(1, d2, v)};
  NamedTensors want = named(2, two, w);
  Diag d = {0};
  char *text = NULL;
  CHECK(run_compare(names, got, 1, &want, 1e-4, -1, &text, &d) == -1);
  CHECK(strstr(d.msg, "output 'extra' of onnxruntime's run is not one of gpucc's"));
  free(text);
  tensor_free(got[0]);
  named_tensors_free(&want);
}

/* ---------------------------------------------------------------- onnxruntime_run */

/* A stand-in for python3: a shell script given $1 = -c, $2 = the script, $3 = the model,
 * $4 = the folder, then the input names. */
static const char *stand_in(const char *name, const char *body) {
  static char path[8][256];
  static int k;
  char *p = path[k++ % 8];
  snprintf(p, 256, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  fprintf(f, "#!/bin/sh\n%s\n", body);
  fclose(f);
  chmod(p, 0700);
  return p;
}

/* Whether the temporary folders' parent (TMPDIR) is empty again. */
static bool tmp_empty(const char *tmp) {
  DIR *d = opendir(tmp);
  struct dirent *e;
  int n = 0;
  while (d && (e = readdir(d)))
    n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  if (d)
    closedir(d);
  return d && n == 0;
}

static char tmpdir[128]; /* TMPDIR for onnxruntime_run */
static volatile sig_atomic_t sigints;

/* The temporary folder must be gone by the time the held SIGINT comes. (opendir is not
 * async-signal-safe; the signal comes where onnxruntime_run lets it through, or, were it
 * not held, while the test waits for the script: never inside malloc.) */
static void on_sigint(int sig) {
  (void)sig;
  sigints += tmp_empty(tmpdir) ? 1 : 100;
}

static void test_onnxruntime_run(void) {
  char *tmp = tmpdir;
  snprintf(tmp, sizeof tmpdir, "%s/tmp", dir);
  mkdir(tmp, 0700);
  setenv("TMPDIR", tmp, 1);
  int64_t dims[] = {2};
  float v[] = {1.5f, -2};
  Tensor *in[] = {f32(1, dims, v)};
  const char *names[] = {"x"};
  NamedTensors out;
  Diag d = {0};
  char missing[160];
  snprintf(missing, sizeof missing, "%s/no-such-python", dir);
  CHECK(onnxruntime_run(missing, "m.onnx", names, in, 1, &out, &d) == ONNXRUNTIME_MISSING);
  CHECK(strstr(d.msg, "no-such-python' for --compare=onnxruntime: No such file or directory"));
  CHECK(tmp_empty(tmp));

  const char *no_ort = stand_in("no-ort", "echo 'missing: onnxruntime' >&2; exit 3");
  d = (Diag){0};
  CHECK(onnxruntime_run(no_ort, "m.onnx", names, in, 1, &out, &d) == ONNXRUNTIME_MISSING);
  CHECK(strstr(d.msg, "no-ort cannot import onnxruntime, which --compare=onnxruntime needs"));
  CHECK(tmp_empty(tmp));

  const char *fails = stand_in("fails", "echo 'a warning'; echo 'InvalidGraph: bad model' >&2; "
                                        "exit 1");
  d = (Diag){0};
  CHECK(onnxruntime_run(fails, "m.onnx", names, in, 1, &out, &d) == -1);
  CHECK(strstr(d.msg, "m.onnx: error: onnxruntime: InvalidGraph: bad model"));
  CHECK(tmp_empty(tmp));

  /* the input comes back as output "y"; the script and the model are passed along */
  const char *echo = stand_in("echo", "[ \"$1\" = -c ] && [ \"$3\" = m.onnx ] && [ \"$5\" = x ] "
                                      "|| exit 9\ncase \"$2\" in *onnxruntime*) ;; *) exit 9;; esac\n"
                                      "cp \"$4/in_0.npy\" \"$4/out_0.npy\" && printf 'y\\000' > "
                                      "\"$4/names\"");
  d = (Diag){0};
  CHECK(onnxruntime_run(echo, "m.onnx", names, in, 1, &out, &d) == 0);
  CHECK(out.n == 1 && !strcmp(out.names[0], "y") && out.t[0]->dtype == DT_F32 &&
        out.t[0]->rank == 1 && out.t[0]->dims[0] == 2 &&
        !memcmp(out.t[0]->data, v, sizeof v));
  named_tensors_free(&out);
  CHECK(tmp_empty(tmp));

  /* names for outputs it did not write */
  const char *short_ = stand_in("short", "printf 'y\\000z\\000' > \"$4/names\"; cp \"$4/in_0.npy\" "
                                         "\"$4/out_0.npy\"");
  d = (Diag){0};
  CHECK(onnxruntime_run(short_, "m.onnx", names, in, 1, &out, &d) == -1);
  CHECK(strstr(d.msg, "out_1.npy"));
  CHECK(tmp_empty(tmp));

  /* Ctrl-C reaches both processes: the script ends, and the SIGINT held for the caller
   * comes through once the folder is gone */
  const char *ctrl_c = stand_in("ctrl-c", "kill -INT $PPID; kill -INT $$; sleep 5");
  struct sigaction sa = {.sa_handler = on_sigint}, old;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old);
  d = (Diag){0};
  CHECK(onnxruntime_run(ctrl_c, "m.onnx", names, in, 1, &out, &d) == -1);
  CHECK(strstr(d.msg, "ended by signal 2"));
  CHECK(sigints == 1);
  CHECK(tmp_empty(tmp));
  sigaction(SIGINT, &old, NULL);

  /* an input numpy cannot hold is refused before anything runs */
  Tensor *bf = tensor_new(DT_BF16, 1, dims);
  d = (Diag){0};
  CHECK(onnxruntime_run(echo, "m.onnx", names, &bf, 1, &out, &d) == -1);
  CHECK(strstr(d.msg, "input 'x' is bf16"));
  CHECK(tmp_empty(tmp));
  tensor_free(bf);
  tensor_free(in[0]);
  rmdir(tmp);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/gpucc_compare_XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_floats();
  test_non_finite();
  test_integers_and_columns();
  test_mismatched_outputs();
  test_onnxruntime_run();
  const char *scripts[] = {"no-ort", "fails", "echo", "short"};
  for (size_t i = 0; i < sizeof scripts / sizeof *scripts; i++) {
    char p[160];
    snprintf(p, sizeof p, "%s/%s", dir, scripts[i]);
    unlink(p);
  }
  rmdir(dir);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("test_compare: ok\n");
  return 0;
}
