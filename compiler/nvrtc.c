/* nvrtc.c: generated CUDA C to a cubin and PTX with NVRTC, with an on-disk cache.
 *
 * One compile per translation unit: --gpu-architecture=sm_XX gives the cubin the runtime
 * loads on the target and the PTX it was made from, which the driver can JIT on a newer
 * GPU; an arch-specific target (sm_90a, whose features do not carry forward) compiles
 * compute_90 for that PTX. The cache is a folder of <key>.cubin and <key>.ptx files
 * written through a temporary name and renamed, so readers never see half a file; a cache
 * that cannot be read or written is skipped, never an error.
 *
 * NVRTC is loaded (dlopen) when the first kernel is compiled, not with gpucc: most runs
 * (--emit=ir, run --cpu, --check-ops) never need it, and loading its hundred megabytes
 * costs every process tens of milliseconds, three times that under AddressSanitizer. */
#include "compiler/nvrtc.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- loading NVRTC */

/* The functions gpucc calls, as nvrtc.h declares them. */
#define NVRTC_FUNCTIONS(X)                                                                 \
  X(const char *, nvrtcGetErrorString, (nvrtcResult))                                      \
  X(nvrtcResult, nvrtcVersion, (int *, int *))                                             \
  X(nvrtcResult, nvrtcCreateProgram, (nvrtcProgram *, const char *, const char *, int,     \
                                      const char *const *, const char *const *))           \
  X(nvrtcResult, nvrtcDestroyProgram, (nvrtcProgram *))                                    \
  X(nvrtcResult, nvrtcCompileProgram, (nvrtcProgram, int, const char *const *))            \
  X(nvrtcResult, nvrtcGetPTXSize, (nvrtcProgram, size_t *))                                \
  X(nvrtcResult, nvrtcGetPTX, (nvrtcProgram, char *))                                      \
  X(nvrtcResult, nvrtcGetCUBINSize, (nvrtcProgram, size_t *))                              \
  X(nvrtcResult, nvrtcGetCUBIN, (nvrtcProgram, char *))                                    \
  X(nvrtcResult, nvrtcGetProgramLogSize, (nvrtcProgram, size_t *))                         \
  X(nvrtcResult, nvrtcGetProgramLog, (nvrtcProgram, char *))

static struct {
#define FIELD(ret, name, args) ret(*name) args;
  NVRTC_FUNCTIONS(FIELD)
#undef FIELD
} api;
static char load_error[512]; /* why NVRTC could not be loaded; empty once it was */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* By its soname first (the library path, LD_LIBRARY_PATH, the system's), then where the
 * build found it (CMakeLists.txt defines both). */
static void load_nvrtc(void) {
  const char *names[] = {GPUCC_NVRTC_SONAME, GPUCC_NVRTC_PATH};
  void *lib = NULL;
  for (int i = 0; i < 2 && !lib; i++)
    lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    snprintf(load_error, sizeof load_error, "cannot load NVRTC (%s or %s): %s",
             GPUCC_NVRTC_SONAME, GPUCC_NVRTC_PATH, why ? why : "not found");
    return;
  }
#define LOAD(ret, name, args)                                                              \
  if (!(*(void **)&api.name = dlsym(lib, #name))) {                                        \
    snprintf(load_error, sizeof load_error, "NVRTC (%s) has no %s", GPUCC_NVRTC_SONAME,    \
             #name);                                                                       \
    return;                                                                                \
  }
  NVRTC_FUNCTIONS(LOAD)
#undef LOAD
}

/* 0 once NVRTC is loaded; else -1 with d saying why. */
static int need_nvrtc(Diag *d) {
  pthread_once(&load_once, load_nvrtc);
  return load_error[0] ? diag_error(d, (SrcLoc){0}, "%s", load_error) : 0;
}

/* The archs are the target table's (ir.h). */
int nvrtc_check_arch(const char *arch, Diag *d) {
  Target t;
  return target_for_arch(arch, &t, d);
}

void nvrtc_output_free(NvrtcOutput *o) {
  free(o->cubin);
  free(o->ptx);
  memset(o, 0, sizeof *o);
}

/* ---------------------------------------------------------------- errors */

/* Appends up to `cap` bytes of s to buf (at *at). */
static void append(char *buf, size_t cap, size_t *at, const char *s, size_t n) {
  if (*at + 1 >= cap)
    return;
  if (n > cap - 1 - *at)
    n = cap - 1 - *at;
  memcpy(buf + *at, s, n);
  *at += n;
  buf[*at] = 0;
}

/* The source lines lo..hi (1-based), numbered, with '>' at `mark`. */
static void append_lines(char *buf, size_t cap, size_t *at, const char *src, int lo, int hi,
                         int mark) {
  int line = 1;
  for (const char *p = src; *p && line <= hi; line++) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (line >= lo) {
      char head[32];
      int k = snprintf(head, sizeof head, "\n  %c%5d | ", line == mark ? '>' : ' ', line);
      append(buf, cap, at, head, (size_t)k);
      append(buf, cap, at, p, len > 200 ? 200 : len);
    }
    p = e ? e + 1 : p + len;
  }
}

/* "NAME(LINE): error" lines of the log, each with the source around it (at most 4). */
static int compile_error(const char *source, const char *name, const char *what,
                         const char *log, Diag *d) {
  char msg[sizeof d->msg];
  size_t at = 0;
  msg[0] = 0;
  append(msg, sizeof msg, &at, log, strlen(log));
  while (at && (msg[at - 1] == '\n' || msg[at - 1] == ' '))
    msg[--at] = 0;
  size_t nlen = strlen(name);
  int shown = 0, last = -1;
  for (const char *p = log; p && *p && shown < 4; p = strchr(p, '\n'), p = p ? p + 1 : p) {
    if (strncmp(p, name, nlen) != 0 || p[nlen] != '(')
      continue;
    int line = atoi(p + nlen + 1);
    const char *close = strchr(p + nlen, ')');
    if (line <= 0 || line == last || !close || strncmp(close, "): error", 8) != 0)
      continue;
    char head[64];
    int k = snprintf(head, sizeof head, "\n%s around line %d:", name, line);
    append(msg, sizeof msg, &at, head, (size_t)k);
    append_lines(msg, sizeof msg, &at, source, line - 2, line + 2, line);
    last = line;
    shown++;
  }
  return diag_error(d, (SrcLoc){0}, "NVRTC could not compile the generated CUDA C (%s):\n%s",
                    what, msg);
}

/* ---------------------------------------------------------------- compiling */

static char *program_log(nvrtcProgram prog) {
  size_t n = 0;
  if (api.nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n == 0)
    n = 1;
  char *log = calloc(n, 1);
  if (log && n > 1)
    api.nvrtcGetProgramLog(prog, log);
  return log;
}

/* One compile for --gpu-architecture=arch: the cubin when cubin is set (a real arch),
 * and the PTX when ptx is (a real arch gives the PTX it was made from too). */
static int compile_one(const char *source, const char *name, const char *arch, void **cubin,
                       size_t *cubin_size, void **ptx, size_t *ptx_size, Diag *d) {
  nvrtcProgram prog;
  nvrtcResult r = api.nvrtcCreateProgram(&prog, source, name, 0, NULL, NULL);
  if (r != NVRTC_SUCCESS)
    return diag_error(d, (SrcLoc){0}, "NVRTC: %s", api.nvrtcGetErrorString(r));
  char archopt[64];
  snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
  const char *opts[] = {archopt, "-std=c++17"};
  r = api.nvrtcCompileProgram(prog, 2, opts);
  int rc = 0;
  if (r != NVRTC_SUCCESS) {
    char *log = program_log(prog);
    rc = compile_error(source, name, arch, log ? log : api.nvrtcGetErrorString(r), d);
    free(log);
  }
  for (int k = 0; k < 2 && !rc; k++) {
    bool is_cubin = k == 0;
    void **data = is_cubin ? cubin : ptx;
    size_t *size = is_cubin ? cubin_size : ptx_size;
    if (!data)
      continue;
    r = is_cubin ? api.nvrtcGetCUBINSize(prog, size) : api.nvrtcGetPTXSize(prog, size);
    *data = r == NVRTC_SUCCESS ? malloc(*size ? *size : 1) : NULL;
    if (*data)
      r = is_cubin ? api.nvrtcGetCUBIN(prog, *data) : api.nvrtcGetPTX(prog, *data);
    if (r != NVRTC_SUCCESS || !*data) {
      free(*data);
      *data = NULL;
      rc = diag_error(d, (SrcLoc){0}, "NVRTC: cannot get the %s: %s",
                      is_cubin ? "cubin" : "PTX",
                      r != NVRTC_SUCCESS ? api.nvrtcGetErrorString(r) : "out of memory");
    }
  }
  api.nvrtcDestroyProgram(&prog);
  return rc;
}

/* ---------------------------------------------------------------- the cache */

/* Two independent 64-bit FNV-1a-style hashes with a final avalanche, 128 bits in all. */
typedef struct Hash {
  uint64_t h[2];
} Hash;

static void hash_bytes(Hash *h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) {
    h->h[0] = (h->h[0] ^ b[i]) * 0x100000001b3ull;
    h->h[1] = (h->h[1] ^ b[i]) * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  }
  /* a separator, so ("ab", "c") and ("a", "bc") differ */
  h->h[0] = (h->h[0] ^ 0xff) * 0x100000001b3ull;
  h->h[1] = (h->h[1] ^ 0xff) * 0x9e3779b97f4a7c15ull;
}

static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static char *cache_folder(const NvrtcOptions *opt) {
  const char *dir = opt->cache_dir ? opt->cache_dir : getenv("GPUCC_CACHE_DIR");
  char buf[4096];
  if (dir && *dir)
    return strdup(dir);
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (xdg && *xdg)
    snprintf(buf, sizeof buf, "%s/gpucc", xdg);
  else if (home && *home)
    snprintf(buf, sizeof buf, "%s/.cache/gpucc", home);
  else
    return NULL;
  return strdup(buf);
}

static void *read_all(const char *path, size_t *size) {
  char why[256];
  FILE *f = fopen_regular(path, NULL, why, sizeof why); /* a FIFO there must not hang us */
  if (!f)
    return NULL;
  char *data = NULL;
  long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (n > 0 && fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)n))) {
    if (fread(data, 1, (size_t)n, f) != (size_t)n) {
      free(data);
      data = NULL;
    }
  }
  fclose(f);
  *size = data ? (size_t)n : 0;
  return data;
}

static void write_all(const char *path, const void *data, size_t size) {
  Diag d = {0};
  OutFile o;
  FILE *f = outfile_open(&o, path, &d);
  if (!f)
    return;
  if (fwrite(data, 1, size, f) != size) {
    outfile_abort(&o);
    return;
  }
  outfile_commit(&o, &d);
}

/* <dir>/<key>.cubin and .ptx; NULL when there is no cache folder. */
static char *cache_path(const char *dir, const Hash *key, const char *ext) {
  size_t n = strlen(dir) + 48;
  char *p = malloc(n);
  if (p)
    snprintf(p, n, "%s/%016" PRIx64 "%016" PRIx64 ".%s", dir, mix(key->h[0]), mix(key->h[1]), ext);
  return p;
}

static bool cache_read(const char *dir, const Hash *key, NvrtcOutput *out) {
  char *cp = cache_path(dir, key, "cubin"), *pp = cache_path(dir, key, "ptx");
  if (cp && pp) {
    out->cubin = read_all(cp, &out->cubin_size);
    out->ptx = read_all(pp, &out->ptx_size);
  }
  free(cp);
  free(pp);
  /* the PTX is stored with its NUL: a file without one is not ours */
  if (!out->cubin || !out->ptx || out->ptx[out->ptx_size - 1] != 0) {
    nvrtc_output_free(out);
    return false;
  }
  out->from_cache = true;
  return true;
}

static void cache_write(const char *dir, const Hash *key, const NvrtcOutput *out) {
  Diag d = {0};
  if (make_dirs(dir, &d))
    return;
  char *cp = cache_path(dir, key, "cubin"), *pp = cache_path(dir, key, "ptx");
  /* the PTX first: a reader wants both, and finds the cubin last */
  if (cp && pp) {
    write_all(pp, out->ptx, out->ptx_size);
    write_all(cp, out->cubin, out->cubin_size);
  }
  free(cp);
  free(pp);
}

/* ---------------------------------------------------------------- the entry point */

int nvrtc_compile(const char *source, const char *name, const NvrtcOptions *opt,
                  NvrtcOutput *out, Diag *d) {
  NvrtcOptions none = {0};
  opt = opt ? opt : &none;
  memset(out, 0, sizeof *out);
  const char *arch = opt->arch ? opt->arch : NVRTC_DEFAULT_ARCH;
  if (nvrtc_check_arch(arch, d) || need_nvrtc(d))
    return -1;
  char virt[16];
  snprintf(virt, sizeof virt, "compute_%.2s", arch + 3); /* sm_90a: compute_90 */
  int major = 0, minor = 0;
  api.nvrtcVersion(&major, &minor);
  Hash key = {{0xcbf29ce484222325ull, 0x84222325cbf29ce4ull}};
  char meta[128];
  snprintf(meta, sizeof meta, "nvrtc %d.%d; %s %s; -std=c++17", major, minor, arch, virt);
  hash_bytes(&key, meta, strlen(meta));
  hash_bytes(&key, source, strlen(source));
  char *dir = opt->no_cache ? NULL : cache_folder(opt);
  if (dir && cache_read(dir, &key, out)) {
    free(dir);
    return 0;
  }
  /* The PTX of sm_XX is that of compute_XX, so one compile gives both; an arch-specific
   * target (sm_90a) makes PTX for that chip alone, so the portable PTX is a second
   * compile for the virtual arch. */
  void *ptx = NULL;
  bool specific = strlen(arch) > 5;
  if (compile_one(source, name, arch, &out->cubin, &out->cubin_size, specific ? NULL : &ptx,
                  &out->ptx_size, d) ||
      (specific && compile_one(source, name, virt, NULL, NULL, &ptx, &out->ptx_size, d))) {
    free(ptx);
    nvrtc_output_free(out);
    free(dir);
    return -1;
  }
  out->ptx = ptx;
  if (dir)
    cache_write(dir, &key, out);
  free(dir);
  return 0;
}

/* ---------------------------------------------------------------- several units */

/* The units of one nvrtc_compile_units call (parallel_for's). */
typedef struct Units {
  const char *const *sources;
  int n;
  const char *name;
  const NvrtcOptions *opt;
  NvrtcOutput *outs;
  Diag *diags;
  int *rcs;
  int done;
  pthread_mutex_t lock; /* done, and the progress calls */
} Units;

static void unit_one(void *arg, int i) {
  Units *u = arg;
  char name[300];
  snprintf(name, sizeof name, "%s.%d.cu", u->name, i);
  u->rcs[i] = nvrtc_compile(u->sources[i], name, u->opt, &u->outs[i], &u->diags[i]);
  pthread_mutex_lock(&u->lock);
  u->done++;
  if (u->opt->progress)
    u->opt->progress(u->opt->progress_arg, "nvrtc", u->done, u->n);
  pthread_mutex_unlock(&u->lock);
}

int nvrtc_compile_units(const char *const *sources, int n, const char *name,
                        const NvrtcOptions *opt, NvrtcOutput *outs, Diag *d) {
  memset(outs, 0, (size_t)n * sizeof *outs);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  Units u = {sources, n, name, opt, outs, calloc((size_t)n + 1, sizeof *u.diags),
             calloc((size_t)n + 1, sizeof *u.rcs), 0, PTHREAD_MUTEX_INITIALIZER};
  if (!u.diags || !u.rcs) {
    free(u.diags);
    free(u.rcs);
    return diag_error(d, (SrcLoc){0}, "out of memory");
  }
  /* NVRTC itself is loaded once, before the threads start */
  int rc = need_nvrtc(d);
  if (!rc && opt->progress)
    opt->progress(opt->progress_arg, "nvrtc", 0, n);
  if (!rc)
    parallel_for(n, cpus < 1 ? 1 : (int)cpus, unit_one, &u);
  /* the first unit's failure, whatever order the threads finished in */
  for (int i = 0; i < n && !rc; i++)
    if (u.rcs[i]) {
      *d = u.diags[i];
      rc = -1;
    }
  if (rc)
    for (int i = 0; i < n; i++)
      nvrtc_output_free(&outs[i]);
  free(u.diags);
  free(u.rcs);
  return rc;
}
