/* compare.c: the two halves of `gpucc run FILE --compare=onnxruntime|reference` that are
 * not the run itself (compiler/main.c runs gpucc and the reference executor):
 *   - onnxruntime's run of an ONNX model, in a Python child process (the script below,
 *     started with an argv, no shell) that talks to gpucc through .npy files in a private
 *     temporary folder, removed again on every path;
 *   - the comparison of two runs' outputs, output by output: for floats the largest
 *     absolute error, where it is and both values there, and the relative error by norm
 *     ||got - want|| / ||want|| that the tolerance judges (docs/precision.md's measure);
 *     integers and bools exactly. */
#include "compiler/build.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

void named_tensors_free(NamedTensors *nt) {
  for (int i = 0; i < nt->n; i++) {
    free(nt->names ? nt->names[i] : NULL);
    tensor_free(nt->t ? nt->t[i] : NULL);
  }
  free(nt->names);
  free(nt->t);
  memset(nt, 0, sizeof *nt);
}

/* ---------------------------------------------------------------- onnxruntime
 *
 * argv: MODEL FOLDER NAME... ; input K (named NAME K) is FOLDER/in_K.npy. Output K of
 * the model goes to FOLDER/out_K.npy and its name to FOLDER/names, each followed by a
 * NUL. Exit 3 with "missing: MODULE" when numpy or onnxruntime does not import; exit 1
 * with one line saying why when the model does not load or run, or an output is not an
 * array .npy and gpucc hold. */
static const char ort_script[] =
    "import os, sys\n"
    "try:\n"
    "    import numpy as np\n"
    "    import onnxruntime as ort\n"
    "except ImportError as e:\n"
    "    sys.stderr.write('missing: %s\\n' % (e.name or e))\n"
    "    sys.exit(3)\n"
    "model, folder, names = sys.argv[1], sys.argv[2], sys.argv[3:]\n"
    "try:\n"
    "    so = ort.SessionOptions()\n"
    "    so.log_severity_level = 3\n"
    "    s = ort.InferenceSession(model, so, providers=['CPUExecutionProvider'])\n"
    "    feed = {n: np.load(os.path.join(folder, 'in_%d.npy' % i), allow_pickle=False)\n"
    "            for i, n in enumerate(names)}\n"
    "    outs = s.run(None, feed)\n"
    "except Exception as e:\n"
    "    sys.stderr.write(' '.join(('%s: %s' % (type(e).__name__, e)).split()) + '\\n')\n"
    "    sys.exit(1)\n"
    "kinds = ('float64', 'float32', 'float16', 'int64', 'int32', 'int16', 'int8', 'uint8',\n"
    "         'bool')\n"
    "with open(os.path.join(folder, 'names'), 'wb') as f:\n"
    "    for i, (o, v) in enumerate(zip(s.get_outputs(), outs)):\n"
    "        if not isinstance(v, np.ndarray) or str(v.dtype) not in kinds:\n"
    "            sys.stderr.write(\"output '%s' is %s, which gpucc cannot compare\\n\"\n"
    "                             % (o.name, v.dtype if isinstance(v, np.ndarray) else\n"
    "                                type(v).__name__))\n"
    "            sys.exit(1)\n"
    "        np.save(os.path.join(folder, 'out_%d.npy' % i), np.ascontiguousarray(v))\n"
    "        f.write(o.name.encode() + b'\\0')\n";

/* FOLDER/NAME into buf (n bytes); false when it does not fit. */
static bool in_folder(char *buf, size_t n, const char *folder, const char *fmt, int k) {
  int a = snprintf(buf, n, "%s/", folder);
  return a > 0 && (size_t)a < n && snprintf(buf + a, n - (size_t)a, fmt, k) < (int)(n - (size_t)a);
}

/* Removes the files of the temporary folder (the script makes no subfolders) and it. */
static void remove_folder(const char *folder) {
  DIR *dir = opendir(folder);
  struct dirent *e;
  char path[4096];
  while (dir && (e = readdir(dir)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
        snprintf(path, sizeof path, "%s/%s", folder, e->d_name) < (int)sizeof path)
      unlink(path);
  if (dir)
    closedir(dir);
  rmdir(folder);
}

/* The last line of the child's output (its own message comes last), or a default. */
static void last_line(const char *log, char *buf, size_t n) {
  char tmp[4096];
  FILE *f = fopen(log, "r");
  snprintf(buf, n, "no message");
  while (f && fgets(tmp, sizeof tmp, f)) {
    size_t len = strcspn(tmp, "\n");
    if (len >= n)
      len = n - 1;
    if (len) {
      memcpy(buf, tmp, len);
      buf[len] = 0;
    }
  }
  if (f)
    fclose(f);
}

/* Runs the script in `folder` (the inputs written there). 0, ONNXRUNTIME_MISSING or -1,
 * with d set. */
static int run_script(const char *python, const char *model, const char *folder,
                      const char *const *names, int nin, const sigset_t *mask, Diag *d) {
  const char **argv = calloc((size_t)nin + 6, sizeof *argv);
  char log[4096];
  if (!argv || !in_folder(log, sizeof log, folder, "log", 0)) {
    free(argv);
    return diag_error(d, (SrcLoc){0}, "out of memory");
  }
  argv[0] = python;
  argv[1] = "-c";
  argv[2] = ort_script;
  argv[3] = model;
  argv[4] = folder;
  for (int i = 0; i < nin; i++)
    argv[5 + i] = names[i];
  /* its standard output and error go to the log: gpucc's standard output is the
   * comparison, and onnxruntime's warnings are not gpucc's messages */
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  int err = posix_spawnattr_init(&attr);
  if (err) {
    free(argv);
    return diag_error(d, (SrcLoc){0}, "cannot start '%s': %s", python, strerror(err));
  }
  /* the child runs with the signal mask gpucc had before it held the terminal's */
  err = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  if (!err)
    err = posix_spawnattr_setsigmask(&attr, mask);
  if (!err)
    err = posix_spawn_file_actions_init(&fa);
  if (!err)
    err = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (!err)
    err = posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (!err)
    err = posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  if (!err)
    err = posix_spawnp(&pid, python, &fa, &attr, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  free(argv);
  if (err == ENOENT || err == EACCES || err == ENOEXEC || err == ENOTDIR) {
    diag_error(d, (SrcLoc){0}, "cannot run '%s' for --compare=onnxruntime: %s (set "
               "GPUCC_PYTHON to a Python 3 that has numpy and onnxruntime)", python,
               strerror(err));
    return ONNXRUNTIME_MISSING;
  }
  if (err)
    return diag_error(d, (SrcLoc){0}, "cannot start '%s': %s", python, strerror(err));
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return diag_error(d, (SrcLoc){0}, "waiting for '%s': %s", python, strerror(errno));
  char why[1024];
  last_line(log, why, sizeof why);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3 && !strncmp(why, "missing: ", 9)) {
    diag_error(d, (SrcLoc){0}, "%s cannot import %s, which --compare=onnxruntime needs (pip "
               "install onnxruntime numpy, or set GPUCC_PYTHON to a Python that has them)",
               python, why + 9);
    return ONNXRUNTIME_MISSING;
  }
  if (WIFSIGNALED(status))
    return diag_error(d, (SrcLoc){model, NULL, 0, 0}, "onnxruntime's run (%s) ended by signal %d",
                      python, WTERMSIG(status));
  if (!WIFEXITED(status) || WEXITSTATUS(status))
    return diag_error(d, (SrcLoc){model, NULL, 0, 0}, "onnxruntime: %s", why);
  return 0;
}

/* The script's outputs back: FOLDER/names and each FOLDER/out_K.npy. */
static int read_results(const char *folder, NamedTensors *out, Diag *d) {
  char path[4096];
  if (!in_folder(path, sizeof path, folder, "names", 0))
    return diag_error(d, (SrcLoc){0}, "out of memory");
  uint64_t size;
  char why[256];
  FILE *f = fopen_regular(path, &size, why, sizeof why);
  if (!f)
    return diag_error(d, (SrcLoc){0}, "onnxruntime's run wrote no output names: %s", why);
  char *names = malloc((size_t)size + 1);
  bool ok = names && fread(names, 1, (size_t)size, f) == size;
  fclose(f);
  if (!ok) {
    free(names);
    return diag_error(d, (SrcLoc){0}, "cannot read onnxruntime's output names");
  }
  names[size] = 0;
  int n = 0;
  for (uint64_t i = 0; i < size; i++)
    n += names[i] == 0;
  out->names = calloc((size_t)n + 1, sizeof *out->names);
  out->t = calloc((size_t)n + 1, sizeof *out->t);
  int rc = out->names && out->t ? 0 : diag_error(d, (SrcLoc){0}, "out of memory");
  const char *s = names;
  for (int k = 0; k < n && !rc; k++, s += strlen(s) + 1) {
    out->n = k + 1;
    if (!(out->names[k] = strdup(s)))
      rc = diag_error(d, (SrcLoc){0}, "out of memory");
    else if (!in_folder(path, sizeof path, folder, "out_%d.npy", k))
      rc = diag_error(d, (SrcLoc){0}, "out of memory");
    else if (!(out->t[k] = npy_read(path, d)))
      rc = -1;
  }
  free(names);
  if (rc)
    named_tensors_free(out);
  return rc;
}

int onnxruntime_run(const char *python, const char *model, const char *const *names,
                    Tensor *const *in, int nin, NamedTensors *out, Diag *d) {
  memset(out, 0, sizeof *out);
  for (int i = 0; i < nin; i++)
    if (in[i]->dtype == DT_BF16 || in[i]->dtype == DT_F8E4M3 || in[i]->dtype == DT_F8E5M2)
      return diag_error(d, (SrcLoc){0}, "input '%s' is %s, which numpy and so onnxruntime's "
                        "run cannot take", names[i], dtype_name(in[i]->dtype));
  const char *tmp = getenv("TMPDIR");
  char folder[4096], path[4096];
  if (snprintf(folder, sizeof folder, "%s/gpucc-compare-XXXXXX", tmp && *tmp ? tmp : "/tmp") >=
      (int)sizeof folder)
    return diag_error(d, (SrcLoc){0}, "TMPDIR is too long");
  /* The terminal's interrupts (Ctrl-C, Ctrl-\, a hangup) go to the whole foreground
   * process group, onnxruntime's Python included. gpucc holds them while the folder
   * exists, so that they end the script, and then gpucc, once the folder is removed:
   * unheld, a pending one ends gpucc as it would have. */
  sigset_t held, mask;
  sigemptyset(&held);
  sigaddset(&held, SIGINT);
  sigaddset(&held, SIGQUIT);
  sigaddset(&held, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &held, &mask);
  int rc = 0;
  if (!mkdtemp(folder)) {
    rc = diag_error(d, (SrcLoc){0}, "cannot make a temporary folder %s: %s", folder,
                    strerror(errno));
  } else {
    for (int i = 0; i < nin && !rc; i++)
      if (!in_folder(path, sizeof path, folder, "in_%d.npy", i))
        rc = diag_error(d, (SrcLoc){0}, "out of memory");
      else
        rc = npy_write(path, in[i], d);
    if (!rc)
      rc = run_script(python, model, folder, names, nin, &mask, d);
    if (!rc)
      rc = read_results(folder, out, d);
    remove_folder(folder);
  }
  pthread_sigmask(SIG_SETMASK, &mask, NULL);
  return rc;
}

/* ---------------------------------------------------------------- the comparison */

/* What one output pair gives. */
typedef struct Diff {
  bool exact;        /* integers and bools: compared exactly */
  int64_t at;        /* the worst element (floats) or the first that differs; -1: none */
  double max_abs;    /* floats: the largest |got - want|, infinite where only one side is
                        finite or the two differ in a non-finite value */
  double rel;        /* floats: ||got - want|| / ||want||, over the elements finite on both
                        sides (infinite when some are not); max_abs when ||want|| is 0 */
  int64_t mismatches; /* exact: the elements that differ */
  bool ok;
} Diff;

static Diff diff_of(const Tensor *got, const Tensor *want, double rtol, double atol) {
  Diff r = {.exact = !dtype_is_float(want->dtype), .at = -1};
  int64_t n = tensor_numel(want);
  size_t gs = dtype_size(got->dtype), ws = dtype_size(want->dtype);
  const char *g = got->data, *w = want->data;
  if (r.exact) {
    for (int64_t i = 0; i < n; i++)
      if (dtype_load_i64(got->dtype, g + (size_t)i * gs) !=
          dtype_load_i64(want->dtype, w + (size_t)i * ws) && !r.mismatches++)
        r.at = i;
    r.ok = r.mismatches == 0;
    return r;
  }
  /* long double: squares of f64 values beyond 1e154 stay finite */
  long double dd = 0, ww = 0;
  bool odd = false;
  for (int64_t i = 0; i < n; i++) {
    double a = dtype_load_f64(got->dtype, g + (size_t)i * gs);
    double b = dtype_load_f64(want->dtype, w + (size_t)i * ws);
    double e;
    if (isfinite(a) && isfinite(b)) {
      e = fabs(a - b);
      dd += (long double)(a - b) * (a - b);
      ww += (long double)b * b;
    } else {
      bool same = (isnan(a) && isnan(b)) || a == b;
      e = same ? 0 : INFINITY;
      odd |= !same;
    }
    if (r.at < 0 || e > r.max_abs) {
      r.at = i;
      r.max_abs = e;
    }
  }
  r.rel = odd ? INFINITY : ww > 0 ? (double)sqrtl(dd / ww) : r.max_abs;
  r.ok = r.rel <= rtol && (atol < 0 || r.max_abs <= atol);
  return r;
}

/* v[0..n) as "[0,417]". */
static void list_str(const int64_t *v, int n, char *buf, size_t len) {
  size_t at = (size_t)snprintf(buf, len, "[");
  for (int k = 0; k < n && at < len; k++)
    at += (size_t)snprintf(buf + at, len - at, "%s%" PRId64, k ? "," : "", v[k]);
  if (at < len)
    snprintf(buf + at, len - at, "]");
}

/* Element `flat` of t's shape as "[0,417]". */
static void index_str(const Tensor *t, int64_t flat, char *buf, size_t n) {
  int64_t idx[IR_MAX_RANK];
  for (int k = t->rank - 1; k >= 0; k--) {
    idx[k] = t->dims[k] ? flat % t->dims[k] : 0;
    flat = t->dims[k] ? flat / t->dims[k] : 0;
  }
  list_str(idx, t->rank, buf, n);
}

/* Element i of t as print_elements writes it (f64 with all its digits). */
static void value_str(const Tensor *t, int64_t i, char *buf, size_t n) {
  const char *p = (const char *)t->data + (size_t)i * dtype_size(t->dtype);
  if (dtype_is_float(t->dtype))
    snprintf(buf, n, t->dtype == DT_F64 ? "%.17g" : "%.9g", dtype_load_f64(t->dtype, p));
  else
    snprintf(buf, n, "%" PRId64, dtype_load_i64(t->dtype, p));
}

/* An error as "3.1e-06" ("0" and "inf" as such). */
static void error_str(double v, char *buf, size_t n) {
  snprintf(buf, n, v == 0 || !isfinite(v) ? "%g" : "%.1e", v);
}

/* A tolerance as "1e-04" or "1.5e-01". */
static void tol_str(double v, char *buf, size_t n) {
  snprintf(buf, n, "%.1e", v);
  char *e = strchr(buf, 'e');
  if (e && e - buf >= 2 && !strncmp(e - 2, ".0", 2))
    memmove(e - 2, e, strlen(e) + 1);
}

/* A name as the line shows it: bytes that are not printable ASCII as \xNN. */
static void name_str(const char *s, char *buf, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p && at + 5 < n; p++)
    at += (size_t)snprintf(buf + at, n - at, *p > ' ' && *p < 0x7f ? "%c" : "\\x%02x", *p);
}

/* The outputs of want that match got's, by name (the k-th of a name with the k-th):
 * match[i] for got's output i. -1 with d naming the first output on one side only, or
 * whose dtype or shape differs. */
static int match_outputs(const char *const *names, Tensor *const *got, int n,
                         const NamedTensors *want, const char *who, int *match, Diag *d) {
  bool *used = calloc((size_t)want->n + 1, sizeof *used);
  char list[1024] = "";
  size_t at = 0;
  for (int j = 0; j < want->n && at < sizeof list; j++)
    at += (size_t)snprintf(list + at, sizeof list - at, "%s'%s'", j ? ", " : "", want->names[j]);
  int rc = used ? 0 : diag_error(d, (SrcLoc){0}, "out of memory");
  for (int i = 0; i < n && !rc; i++) {
    match[i] = -1;
    for (int j = 0; j < want->n && match[i] < 0; j++)
      if (!used[j] && !strcmp(names[i], want->names[j]))
        match[i] = j;
    if (match[i] < 0) {
      rc = diag_error(d, (SrcLoc){0}, "output '%s' of gpucc's run is not one of %s's (%s)",
                      names[i], who, want->n ? list : "none");
      break;
    }
    used[match[i]] = true;
    const Tensor *w = want->t[match[i]];
    bool same = got[i]->dtype == w->dtype && got[i]->rank == w->rank;
    for (int k = 0; same && k < w->rank; k++)
      same = got[i]->dims[k] == w->dims[k];
    if (!same) {
      char a[256], b[256];
      Type ta = tensor_type(got[i]), tb = tensor_type(w);
      rc = diag_error(d, (SrcLoc){0}, "output '%s': gpucc's run gives %s, %s's %s", names[i],
                      type_str(&ta, a, sizeof a), who, type_str(&tb, b, sizeof b));
    }
  }
  for (int j = 0; j < want->n && !rc; j++)
    if (!used[j])
      rc = diag_error(d, (SrcLoc){0}, "output '%s' of %s's run is not one of gpucc's",
                      want->names[j], who);
  free(used);
  return rc;
}

enum { COLS = 4 }; /* name, shape, dtype, what was measured; then ok or beyond */

int compare_outputs(const char *const *names, Tensor *const *got, int n,
                    const NamedTensors *want, const char *who, double rtol, double atol,
                    FILE *f, Diag *d) {
  int *match = calloc((size_t)n + 1, sizeof *match);
  char(*cell)[COLS][512] = calloc((size_t)n + 1, sizeof *cell);
  bool *ok = calloc((size_t)n + 1, sizeof *ok);
  if (!match || !cell || !ok) {
    free(match);
    free(cell);
    free(ok);
    return diag_error(d, (SrcLoc){0}, "out of memory");
  }
  int rc = match_outputs(names, got, n, want, who, match, d);
  int width[COLS] = {0}, beyond = 0;
  for (int i = 0; i < n && !rc; i++) {
    const Tensor *w = want->t[match[i]];
    Diff r = diff_of(got[i], w, rtol, atol);
    char at[400] = "", a[64], b[64];
    if (r.at >= 0 && (r.exact || r.max_abs > 0)) { /* a worst element there is */
      char ix[200];
      index_str(w, r.at, ix, sizeof ix);
      value_str(got[i], r.at, a, sizeof a);
      value_str(w, r.at, b, sizeof b);
      snprintf(at, sizeof at, " at %s (got %s, want %s)", ix, a, b);
    }
    name_str(names[i], cell[i][0], sizeof cell[i][0]);
    list_str(w->dims, w->rank, cell[i][1], sizeof cell[i][1]);
    snprintf(cell[i][2], sizeof cell[i][2], "%s", dtype_name(w->dtype));
    if (r.exact)
      snprintf(cell[i][3], sizeof cell[i][3], "mismatches %" PRId64 " of %" PRId64 "%s%s",
               r.mismatches, tensor_numel(w), r.mismatches ? ", first" : "",
               r.mismatches ? at : "");
    else {
      error_str(r.max_abs, a, sizeof a);
      error_str(r.rel, b, sizeof b);
      snprintf(cell[i][3], sizeof cell[i][3], "max abs %s%s  rel %s", a, at, b);
    }
    ok[i] = r.ok;
    beyond += !r.ok;
    for (int k = 0; k < COLS; k++) {
      int len = (int)strlen(cell[i][k]);
      width[k] = len > width[k] ? len : width[k];
    }
  }
  if (!rc) {
    for (int i = 0; i < n; i++) {
      for (int k = 0; k < COLS; k++)
        fprintf(f, "%-*s  ", width[k], cell[i][k]);
      fprintf(f, "%s\n", ok[i] ? "ok" : "beyond");
    }
    char rt[32], at[32] = "";
    tol_str(rtol, rt, sizeof rt);
    if (atol >= 0)
      tol_str(atol, at, sizeof at);
    if (beyond)
      fprintf(f, "%d of %d output%s beyond rtol %s%s%s\n", beyond, n, n == 1 ? "" : "s", rt,
              atol >= 0 ? " or atol " : "", at);
    else
      fprintf(f, "%d output%s within rtol %s%s%s\n", n, n == 1 ? "" : "s", rt,
              atol >= 0 ? " and atol " : "", at);
  }
  free(match);
  free(cell);
  free(ok);
  return rc ? -1 : beyond;
}
