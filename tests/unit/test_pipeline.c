/* The command line and the JIT API compile alike (compiler/build.h: one pipeline). For
 * each case, the plan and weights that `gpucc F ARGS -o model.so` appends to the runtime
 * stub (read back with the runtime's own trailer reader) equal, byte for byte, those
 * gpucc_build (gpucc_build_onnx for a model) makes of the same file with the same
 * options: what gpucc_compile_dsl and gpucc_compile_onnx hand to the device. Each side
 * runs NVRTC afresh (gpucc with an empty cache folder, the JIT with no_cache), so this
 * also holds NVRTC's output to being deterministic.
 *
 * $GPUCC is the gpucc binary, $PYTHON a Python 3 for tests/onnx/make_models.py and
 * $TEST_TMP a scratch folder (ctest sets all three); run from the repository root. No
 * GPU. */
#include "compiler/gpucc.h"
#include "tests/unit/check.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs argv (NULL-terminated) and waits: its exit status, or -1. */
static int run(char *const *argv) {
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    execvp(argv[0], argv);
    _exit(127);
  }
  int status;
  if (waitpid(pid, &status, 0) != pid)
    return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *buf = NULL;
  size_t cap = 0;
  *len = 0;
  for (;;) {
    if (*len == cap) {
      char *p = realloc(buf, cap = cap ? 2 * cap : 1 << 16);
      if (!p)
        break;
      buf = p;
    }
    size_t n = fread(buf + *len, 1, cap - *len, f);
    if (!n)
      break;
    *len += n;
  }
  fclose(f);
  return buf;
}

typedef struct Case {
  const char *file;
  const char *args[6]; /* gpucc's options besides the file and -o */
  GpuccCompileOptions opt; /* the same for the JIT */
} Case;

static const char *const dim_n[] = {"N"}, *const dim_batch[] = {"batch"};
static const int64_t size_2[] = {2}, size_3[] = {3}, size_4[] = {4}, size_5[] = {5};

static const char *tmp;
static int ncase;

/* The JIT's build of c (into *b), checking it succeeds. */
static int jit_build(const Case *c, GpuccBuild *b) {
  GpuccCompileOptions opt = c->opt;
  opt.no_cache = true;
  Diag d = {0};
  int rc = -1;
  size_t n = strlen(c->file);
  if (n > 5 && !strcmp(c->file + n - 5, ".onnx")) {
    size_t len;
    void *bytes = read_all(c->file, &len);
    CHECK(bytes != NULL);
    if (bytes)
      rc = gpucc_build_onnx(bytes, len, c->file, &opt, b, &d);
    free(bytes);
  } else {
    Graph *g = dsl_parse_file(c->file, &d);
    CHECK(g != NULL);
    if (g)
      rc = gpucc_build(g, &opt, b, &d);
    graph_free(g);
  }
  if (rc)
    fprintf(stderr, "test_pipeline: %s: the JIT's build failed: %s\n", c->file, d.msg);
  return rc;
}

/* `gpucc` on c into a model.so; its plan and weights compared with the JIT's. Returns
 * whether they are the same (false after a failure too). */
static bool same_plan(const Case *c) {
  char so[4096], cache[4096];
  int k = ncase++;
  snprintf(so, sizeof so, "%s/case%d.so", tmp, k);
  snprintf(cache, sizeof cache, "%s/cache%d", tmp, k); /* fresh: a new name per case */
  const char *argv[16] = {getenv("GPUCC"), c->file};
  int argc = 2;
  for (int i = 0; c->args[i]; i++)
    argv[argc++] = c->args[i];
  argv[argc++] = "-o";
  argv[argc++] = so;
  setenv("GPUCC_CACHE_DIR", cache, 1);
  int st = run((char *const *)argv);
  CHECK(st == 0);
  GpuccBuild b = {0};
  int jit = jit_build(c, &b);
  CHECK(jit == 0);
  if (st || jit)
    return false;
  size_t len = 0;
  unsigned char *f = read_all(so, &len);
  GpuccTrailer t;
  bool ok = f && gpucc_trailer_parse(f, len, &t) == GPUCC_OK;
  CHECK(ok);
  CHECK(b.plan_len > 0);
  bool same = ok && t.plan_len == b.plan_len && !memcmp(f + t.plan_offset, b.plan, b.plan_len) &&
              t.weights_len == b.weights_len && !t.weights_file[0] &&
              (!b.weights_len || !memcmp(f + t.weights_offset, b.weights, b.weights_len));
  free(f);
  gpucc_build_free(&b);
  return same;
}

/* A case whose plans differ says which. */
static void check_same(const Case *c) {
  if (!same_plan(c)) {
    fprintf(stderr, "test_pipeline: %s", c->file);
    for (int i = 0; c->args[i]; i++)
      fprintf(stderr, " %s", c->args[i]);
    fprintf(stderr, ": the model.so's plan differs from the JIT's\n");
    failures++;
  }
}

int main(void) {
  tmp = getenv("TEST_TMP");
  const char *python = getenv("PYTHON");
  if (!tmp || !getenv("GPUCC") || !python) {
    fprintf(stderr, "test_pipeline: set GPUCC, PYTHON and TEST_TMP (ctest does)\n");
    return 1;
  }
  Diag d = {0};
  CHECK(make_dirs(tmp, &d) == 0);
  char onnx[4096];
  snprintf(onnx, sizeof onnx, "%s/mlp.onnx", tmp);
  /* y = relu(x @ w + b) with x: f32[batch, 2] */
  char *make[] = {(char *)python, "tests/onnx/make_models.py", "mlp", onnx, NULL};
  CHECK(run(make) == 0);

  /* A .gir whose symbolic dim --dim binds: the passes see N = 3 on both paths. */
  check_same(&(Case){"examples/mlp.gir", {"--dim", "N=3"},
                     {.dim_names = dim_n, .dim_sizes = size_3, .ndims = 1}});
  check_same(&(Case){"examples/transformer_block.gir", {"--dim", "N=2", "--precision=bf16"},
                     {.dim_names = dim_n, .dim_sizes = size_2, .ndims = 1,
                      .precision = "bf16"}});
  check_same(&(Case){"examples/mlp.gir", {"--dim=N=4", "--no-fuse", "--arch=sm_80"},
                     {.dim_names = dim_n, .dim_sizes = size_4, .ndims = 1, .no_fuse = true,
                      .arch = "sm_80"}});
  check_same(&(Case){"examples/transformer_block.gir",
                     {"--dim", "N=2", "--passes=constfold,simplify,dce,fuse"},
                     {.dim_names = dim_n, .dim_sizes = size_2, .ndims = 1,
                      .passes = "constfold,simplify,dce,fuse"}});
  /* An ONNX model binds --dim at load, on both paths. */
  check_same(&(Case){onnx, {"--dim", "batch=5"},
                     {.dim_names = dim_batch, .dim_sizes = size_5, .ndims = 1}});
  check_same(&(Case){onnx, {"--dim", "batch=5", "--precision=bf16"},
                     {.dim_names = dim_batch, .dim_sizes = size_5, .ndims = 1,
                      .precision = "bf16"}});

  /* Ranged dims: one plan of shape classes, for a .gir and for a model, whose class
   * graphs the ONNX path loads at each class's sizes. */
  static const DimRange n_1_8 = {.sym = "N", .nseg = 1, .lo = {1}, .hi = {8}};
  static const DimRange batch_1_8 = {.sym = "batch", .nseg = 1, .lo = {1}, .hi = {8}};
  static const DimRange attn[] = {{.sym = "batch", .nseg = 2, .lo = {1, 3}, .hi = {1, 4}},
                                  {.sym = "seq", .nseg = 1, .lo = {1}, .hi = {16}}};
  char masked[4096];
  snprintf(masked, sizeof masked, "%s/mask.onnx", tmp);
  char *make_masked[] = {(char *)python, "tests/onnx/make_models.py", "attention_mask_dynamic",
                         masked, NULL};
  CHECK(run(make_masked) == 0);
  check_same(&(Case){"examples/mlp.gir", {"--dim", "N=1..8"}, {.ranges = &n_1_8, .nranges = 1}});
  check_same(&(Case){onnx, {"--dim", "batch=1..8"}, {.ranges = &batch_1_8, .nranges = 1}});
  check_same(&(Case){masked, {"--dim", "batch=1,3..4", "--dim", "seq=1..16"},
                     {.ranges = attn, .nranges = 2}});

  /* The comparison can fail: another size is another plan. */
  CHECK(!same_plan(&(Case){"examples/mlp.gir", {"--dim", "N=3"},
                           {.dim_names = dim_n, .dim_sizes = size_4, .ndims = 1}}));

  if (failures)
    fprintf(stderr, "test_pipeline: %d checks failed\n", failures);
  return failures ? 1 : 0;
}
