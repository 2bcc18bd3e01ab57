/* test_runtime.c: the runtime on a GPU, against values computed here on the CPU.
 *
 * A kernel compiled with NVRTC in the test (the runtime itself never sees NVRTC), a
 * cuBLASLt GEMM with a broadcast batch, a copy and a memset, run through the model API
 * with device pointers and with host buffers; the PTX path and the PTX fallback for a
 * cubin of another architecture; GPUCC_RUNTIME_DEBUG, GPUCC_GEMM_TUNE=0 and =fewest; the kernels
 * per inference; the clean errors: wrong input shape, a kernel name the module lacks
 * (everything freed), an arena too big for the GPU; and the device's properties.
 *
 *   test_runtime            the tests; exit 77 ("SKIPPED") without a driver or device
 *   test_runtime --fault    a kernel that faults, in debug mode: the error must name it.
 *                           Separate because a fault ruins the process's context (and
 *                           because compute-sanitizer runs should leave it out).
 */
#include "runtime/cuda-impl.h"
#include "../unit/check.h"

#include <dirent.h>
#include <math.h>
#include <nvrtc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const CuApi *cu;
static CUdevice dev;
static int cc_major, cc_minor;

static const char *kernel_src =
    "extern \"C\" __global__ void k_affine(const float *x, float *y, long long n, double a) {\n"
    "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = x[i] * (float)a + 1.0f;\n"
    "}\n"
    "extern \"C\" __global__ void k_fault(float *p) { p[threadIdx.x] = 1.0f; }\n"
    /* Two variants of k_affine for the tuner, told apart by what they add: a slow one
     * (a spin of about a millisecond first) and a fast one. */
    "extern \"C\" __global__ void k_slow(const float *x, float *y, long long n, double a) {\n"
    "  long long t0 = clock64();\n"
    "  while (clock64() - t0 < 2000000) {}\n"
    "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = x[i] * (float)a + 2.0f;\n"
    "}\n"
    "extern \"C\" __global__ void k_fast(const float *x, float *y, long long n, double a) {\n"
    "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = x[i] * (float)a + 3.0f;\n"
    "}\n";

/* NVRTC output for arch ("compute_90": PTX, "sm_90": a cubin). malloc'd; NULL on error. */
static char *nvrtc(const char *arch, bool cubin, size_t *len) {
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, kernel_src, "test.cu", 0, NULL, NULL) != NVRTC_SUCCESS) return NULL;
  char opt[64];
  snprintf(opt, sizeof opt, "--gpu-architecture=%s", arch);
  const char *opts[] = {opt};
  char *out = NULL;
  if (nvrtcCompileProgram(prog, 1, opts) != NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    char *log = malloc(n + 1);
    nvrtcGetProgramLog(prog, log);
    fprintf(stderr, "NVRTC (%s) failed:\n%s\n", arch, log);
    free(log);
  } else if (cubin) {
    nvrtcGetCUBINSize(prog, len);
    out = malloc(*len);
    nvrtcGetCUBIN(prog, out);
  } else {
    nvrtcGetPTXSize(prog, len);
    out = malloc(*len);
    nvrtcGetPTX(prog, out); /* NUL-terminated; *len counts the NUL */
  }
  nvrtcDestroyProgram(&prog);
  return out;
}

/* ---------------------------------------------------------------- the plan */

/* Arena layout (bytes): x f32[8] @0, y f32[8] @256, a f32[2,2,3] @512, c f32[2,2,4] @1024,
 * y copy @1280, m u8[16] @1536. Weights: b f32[3,4] @0. */
enum { N = 8, M = 2, K = 3, NN = 4, BATCH = 2 };
static const float weights_b[K * NN] = {1, 2, 3, 4, -1, 0.5f, 0, 2, 3, -2, 1, 0.25f};

typedef enum Module { MOD_CUBIN, MOD_PTX, MOD_WRONG_CUBIN_AND_PTX } Module;

/* The plan: the kernel, a GEMM, a copy and a memset. With alt, the kernel step is a choice
 * between kernel (variant 0) and alt. */
static void *make_plan_choice(Module mod, const char *kernel, const char *alt, uint64_t arena,
                              size_t *len) {
  GpuccPlan *p = gpucc_plan_new(arena, sizeof weights_b, 1 << 22);
  char sm[16], compute[16], other[16];
  snprintf(sm, sizeof sm, "sm_%d%d", cc_major, cc_minor);
  snprintf(compute, sizeof compute, "compute_%d%d", cc_major, cc_minor);
  snprintf(other, sizeof other, "sm_%d0", cc_major == 8 ? 9 : 8); /* not this GPU's */
  size_t cubin_len = 0, ptx_len = 0;
  char *cubin = mod == MOD_PTX ? NULL : nvrtc(mod == MOD_CUBIN ? sm : other, true, &cubin_len);
  char *ptx = mod == MOD_CUBIN ? NULL : nvrtc(compute, false, &ptx_len);
  CHECK(mod == MOD_PTX || cubin);
  CHECK(mod == MOD_CUBIN || ptx);
  gpucc_plan_set_module(p, cubin, cubin_len, ptx);
  free(cubin);
  free(ptx);

  int64_t xd[] = {N}, ad[] = {BATCH, M, K}, cd[] = {BATCH, M, NN}, md[] = {16};
  gpucc_plan_add_input(p, "x", GPUCC_DT_F32, 1, xd, 0);
  gpucc_plan_add_input(p, "a", GPUCC_DT_F32, 3, ad, 512);
  gpucc_plan_add_output(p, "y", GPUCC_DT_F32, 1, xd, 1280);
  gpucc_plan_add_output(p, "c", GPUCC_DT_F32, 3, cd, 1024);
  gpucc_plan_add_output(p, "m", GPUCC_DT_U8, 1, md, 1536);

  double two = 2.0;
  uint64_t two_bits;
  memcpy(&two_bits, &two, sizeof two_bits);
  GpuccArg args[] = {gpucc_ptr_arg(gpucc_arena_ptr(0)), gpucc_ptr_arg(gpucc_arena_ptr(256)),
                     gpucc_scalar_arg(N), gpucc_scalar_arg(two_bits)};
  uint32_t grid[3] = {1, 1, 1}, block[3] = {128, 1, 1};
  if (alt) {
    uint32_t count[2] = {1, 1};
    gpucc_plan_add_choice(p, "k_affine", 2, count);
  }
  gpucc_plan_add_kernel(p, kernel, grid, block, 0, args, 4);
  if (alt) gpucc_plan_add_kernel(p, alt, grid, block, 0, args, 4);

  /* Row-major c_i[2x4] = a_i[2x3] @ b[3x4] as column-major c^T = b^T a^T: cuBLASLt's A is
   * the weights b (broadcast: stride 0), its B is a, m = 4, n = 2, k = 3. */
  GpuccGemm g = {0};
  g.a = gpucc_weights_ptr(0);
  g.b = gpucc_arena_ptr(512);
  g.c = g.d = gpucc_arena_ptr(1024);
  g.a_type = g.b_type = g.cd_type = GPUCC_DT_F32;
  g.compute = GPUCC_COMPUTE_32F;
  g.m = NN, g.n = M, g.k = K, g.lda = NN, g.ldb = K, g.ldc = NN, g.ldd = NN;
  g.batch = BATCH, g.stride_a = 0, g.stride_b = M * K, g.stride_c = g.stride_d = M * NN;
  g.alpha = 1.0, g.beta = 0.0;
  gpucc_plan_add_gemm(p, &g);
  gpucc_plan_add_copy(p, gpucc_arena_ptr(1280), gpucc_arena_ptr(256), N * sizeof(float));
  gpucc_plan_add_memset(p, gpucc_arena_ptr(1536), 16, 7);

  void *bytes = NULL;
  GpuccStatus st = gpucc_plan_serialize(p, &bytes, len);
  if (st) fprintf(stderr, "serialize: %s\n", gpucc_last_error());
  CHECK(st == GPUCC_OK);
  gpucc_plan_free(p);
  return bytes;
}

static void *make_plan(Module mod, const char *kernel, uint64_t arena, size_t *len) {
  return make_plan_choice(mod, kernel, NULL, arena, len);
}

/* ---------------------------------------------------------------- checking results */

typedef struct Data {
  float x[N], a[BATCH * M * K];
  float y[N], c[BATCH * M * NN];
  unsigned char m[16];
} Data;

static void fill_inputs(Data *d, float seed) {
  for (int i = 0; i < N; i++) d->x[i] = seed + (float)i * 0.5f;
  for (int i = 0; i < BATCH * M * K; i++) d->a[i] = (float)((i * 5) % 7) - 3.0f + seed;
}

static bool near(float got, double want) { return fabs(got - want) <= 1e-5 + 1e-5 * fabs(want); }

/* The expected values, from the definitions: y = 2x + 1; c_i = a_i @ b; m = 7. */
static void check_outputs(const Data *d, const char *what) {
  int bad = 0;
  for (int i = 0; i < N; i++) bad += !near(d->y[i], 2.0 * d->x[i] + 1.0);
  for (int b = 0; b < BATCH; b++)
    for (int i = 0; i < M; i++)
      for (int j = 0; j < NN; j++) {
        double s = 0;
        for (int k = 0; k < K; k++) s += (double)d->a[(b * M + i) * K + k] * weights_b[k * NN + j];
        bad += !near(d->c[(b * M + i) * NN + j], s);
      }
  for (int i = 0; i < 16; i++) bad += d->m[i] != 7;
  if (bad) fprintf(stderr, "%s: %d wrong values (y[0]=%g c[0]=%g m[0]=%d)\n", what, bad, d->y[0],
                   d->c[0], d->m[0]);
  CHECK(bad == 0);
}

static void run_host_and_check(GpuccModel *m, float seed, const char *what) {
  Data d;
  memset(&d, 0, sizeof d);
  fill_inputs(&d, seed);
  const void *in[] = {d.x, d.a};
  void *out[] = {d.y, d.c, d.m};
  GpuccStatus st = gpucc_model_run_host(m, in, out, NULL);
  if (st) fprintf(stderr, "%s: %s\n", what, gpucc_last_error());
  CHECK(st == GPUCC_OK);
  if (!st) check_outputs(&d, what);
}

static void run_device_and_check(GpuccModel *m, float seed) {
  Data d;
  memset(&d, 0, sizeof d);
  fill_inputs(&d, seed);
  CUdeviceptr dx = 0, da = 0, dy = 0, dc = 0, dm = 0; /* a failed CHECK goes on */
  CUstream s;
  CHECK(cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  CHECK(cu->cuMemAlloc(&dx, sizeof d.x) == CUDA_SUCCESS && cu->cuMemAlloc(&da, sizeof d.a) == CUDA_SUCCESS);
  CHECK(cu->cuMemAlloc(&dy, sizeof d.y) == CUDA_SUCCESS && cu->cuMemAlloc(&dc, sizeof d.c) == CUDA_SUCCESS);
  CHECK(cu->cuMemAlloc(&dm, sizeof d.m) == CUDA_SUCCESS);
  CHECK(cu->cuMemcpyHtoD(dx, d.x, sizeof d.x) == CUDA_SUCCESS);
  CHECK(cu->cuMemcpyHtoD(da, d.a, sizeof d.a) == CUDA_SUCCESS);
  const void *in[] = {(void *)(uintptr_t)dx, (void *)(uintptr_t)da};
  void *out[] = {(void *)(uintptr_t)dy, (void *)(uintptr_t)dc, (void *)(uintptr_t)dm};
  GpuccStatus st = gpucc_model_run(m, in, out, s);
  if (st) fprintf(stderr, "run: %s\n", gpucc_last_error());
  CHECK(st == GPUCC_OK);
  CHECK(cu->cuStreamSynchronize(s) == CUDA_SUCCESS);
  CHECK(cu->cuMemcpyDtoH(d.y, dy, sizeof d.y) == CUDA_SUCCESS);
  CHECK(cu->cuMemcpyDtoH(d.c, dc, sizeof d.c) == CUDA_SUCCESS);
  CHECK(cu->cuMemcpyDtoH(d.m, dm, sizeof d.m) == CUDA_SUCCESS);
  check_outputs(&d, "run with device pointers");
  cu->cuMemFree(dx), cu->cuMemFree(da), cu->cuMemFree(dy), cu->cuMemFree(dc), cu->cuMemFree(dm);
  cu->cuStreamDestroy(s);
}

/* ---------------------------------------------------------------- tests */

static GpuccModel *create(const void *plan, size_t len) {
  GpuccModel *m = NULL;
  GpuccStatus st = gpucc_model_create(plan, len, weights_b, sizeof weights_b, 0, &m);
  if (st) fprintf(stderr, "create: %s\n", gpucc_last_error());
  CHECK(st == GPUCC_OK && m);
  return m;
}

static void test_model(void) {
  size_t len;
  void *plan = make_plan(MOD_CUBIN, "k_affine", 4096, &len);
  GpuccModel *m = create(plan, len);
  free(plan);
  if (!m) return;
  CHECK(gpucc_model_num_inputs(m) == 2 && gpucc_model_num_outputs(m) == 3);
  CHECK(!strcmp(gpucc_model_input_name(m, 1), "a") && gpucc_model_input_rank(m, 1) == 3);
  CHECK(gpucc_model_input_dims(m, 1)[2] == K && gpucc_model_input_bytes(m, 1) == sizeof(float) * 12);
  CHECK(gpucc_model_output_dtype(m, 2) == GPUCC_DT_U8 && gpucc_model_output_bytes(m, 2) == 16);
  CHECK(gpucc_model_input_name(m, 2) == NULL && gpucc_model_output_rank(m, -1) == -1);
  /* The kernel and the GEMM (one to three kernels of cuBLASLt's); the copy and the
   * memset are no kernels. */
  int kernels = gpucc_model_kernels(m);
  if (kernels < 2 || kernels > 4) fprintf(stderr, "%d kernels per inference\n", kernels);
  CHECK(kernels >= 2 && kernels <= 4);
  CHECK(gpucc_model_kernels(NULL) == -1);

  /* Several runs with different inputs: the graph must read the new ones each time. */
  run_host_and_check(m, 1.0f, "run_host 1");
  run_device_and_check(m, -2.0f);
  run_host_and_check(m, 3.5f, "run_host 2");

  /* The checks a caller with typed tensors runs first. */
  int64_t wrong[] = {7};
  CHECK(gpucc_model_check_input(m, 0, GPUCC_DT_F32, 1, wrong) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(!strcmp(gpucc_last_error(), "input 'x': expected f32[8], got f32[7]"));
  int64_t right[] = {N};
  CHECK(gpucc_model_check_input(m, 0, GPUCC_DT_F32, 1, right) == GPUCC_OK);
  CHECK(gpucc_model_check_input(m, 0, GPUCC_DT_F16, 1, right) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(!strcmp(gpucc_last_error(), "input 'x': expected f32[8], got f16[8]"));
  CHECK(gpucc_model_find_input(m, "a") == 1 && gpucc_model_find_input(m, "z") == -1);
  CHECK(strstr(gpucc_last_error(), "no input named 'z' (its inputs: 'x', 'a')") != NULL);
  CHECK(gpucc_model_check_num_inputs(m, 3) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(!strcmp(gpucc_last_error(), "the model takes 2 inputs, got 3"));
  /* NULL buffers are refused before anything is enqueued. */
  const void *in[] = {NULL, NULL};
  void *out[3] = {NULL, NULL, NULL};
  CHECK(gpucc_model_run_host(m, in, out, NULL) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(strstr(gpucc_last_error(), "input 0 'x' is NULL") != NULL);
  gpucc_model_destroy(m);
}

static void test_modules_and_debug(void) {
  size_t len;
  void *plan = make_plan(MOD_PTX, "k_affine", 4096, &len);
  GpuccModel *m = create(plan, len);
  if (m) run_host_and_check(m, 0.25f, "PTX only");
  gpucc_model_destroy(m);
  free(plan);

  plan = make_plan(MOD_WRONG_CUBIN_AND_PTX, "k_affine", 4096, &len);
  m = create(plan, len);
  if (m) run_host_and_check(m, -1.0f, "cubin of another GPU, PTX fallback");
  gpucc_model_destroy(m);
  free(plan);

  /* The heuristic's first GEMM algorithm, untimed. */
  setenv("GPUCC_GEMM_TUNE", "0", 1);
  plan = make_plan(MOD_CUBIN, "k_affine", 4096, &len);
  m = create(plan, len);
  if (m) run_host_and_check(m, 1.5f, "GPUCC_GEMM_TUNE=0");
  gpucc_model_destroy(m);
  free(plan);

  /* The fastest one-kernel candidate (a split K given up where cuBLASLt has the GEMM
   * whole): the kernel and the GEMM, two kernels. */
  setenv("GPUCC_GEMM_TUNE", "fewest", 1);
  plan = make_plan(MOD_CUBIN, "k_affine", 4096, &len);
  m = create(plan, len);
  if (m) {
    run_host_and_check(m, 0.5f, "GPUCC_GEMM_TUNE=fewest");
    CHECK(gpucc_model_kernels(m) == 2);
  }
  gpucc_model_destroy(m);
  free(plan);
  unsetenv("GPUCC_GEMM_TUNE");

  setenv("GPUCC_RUNTIME_DEBUG", "1", 1);
  plan = make_plan(MOD_CUBIN, "k_affine", 4096, &len);
  m = create(plan, len);
  if (m) {
    run_host_and_check(m, 2.0f, "GPUCC_RUNTIME_DEBUG=1");
    run_device_and_check(m, 4.0f);
    CHECK(gpucc_model_kernels(m) == -1); /* no graph */
  }
  gpucc_model_destroy(m);
  free(plan);
  unsetenv("GPUCC_RUNTIME_DEBUG");
}

/* ---------------------------------------------------------------- choices */

/* Which variant of make_plan_choice's kernel ran: what it added to 2x (1: k_affine, 2:
 * k_slow, 3: k_fast), or -1. */
static int which_variant(GpuccModel *m) {
  Data d;
  memset(&d, 0, sizeof d);
  fill_inputs(&d, 1.0f);
  const void *in[] = {d.x, d.a};
  void *out[] = {d.y, d.c, d.m};
  if (gpucc_model_run_host(m, in, out, NULL)) {
    fprintf(stderr, "run: %s\n", gpucc_last_error());
    return -1;
  }
  for (int add = 1; add <= 3; add++) {
    bool all = true;
    for (int i = 0; i < N; i++) all = all && near(d.y[i], 2.0 * d.x[i] + add);
    if (all) return add;
  }
  return -1;
}

/* Creates the slow-or-fast plan with GPUCC_TUNE=tune (NULL: unset) and says which ran. */
static int chosen_with(const char *tune) {
  if (tune) setenv("GPUCC_TUNE", tune, 1);
  else unsetenv("GPUCC_TUNE");
  size_t len;
  void *plan = make_plan_choice(MOD_CUBIN, "k_slow", "k_fast", 4096, &len);
  GpuccModel *m = create(plan, len);
  free(plan);
  int v = m ? which_variant(m) : -1;
  gpucc_model_destroy(m);
  unsetenv("GPUCC_TUNE");
  return v;
}

/* The cache folder's one file, read into buf; its path into path. */
static bool read_cache(const char *dir, char *path, size_t n, char *buf, size_t cap) {
  char sub[512];
  snprintf(sub, sizeof sub, "%s/tune", dir);
  DIR *d = opendir(sub);
  if (!d) return false;
  struct dirent *e;
  int files = 0;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') {
      snprintf(path, n, "%s/%s", sub, e->d_name);
      files++;
    }
  closedir(d);
  FILE *f = files == 1 ? fopen(path, "r") : NULL;
  if (!f) return false;
  size_t got = fread(buf, 1, cap - 1, f);
  buf[got] = 0;
  fclose(f);
  return true;
}

static void test_choices(void) {
  char dir[] = "/tmp/gpucc-test-choice-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  setenv("GPUCC_CACHE_DIR", dir, 1);
  /* Timed: the fast variant, and the decision lands in the cache (the choice is step 0:
   * "0 1"). */
  CHECK(chosen_with(NULL) == 3);
  char path[1024], text[4096];
  CHECK(read_cache(dir, path, sizeof path, text, sizeof text));
  CHECK(strstr(text, "\n0 1\n") != NULL);
  /* GPUCC_TUNE=0: the default, variant 0, untimed. */
  CHECK(chosen_with("0") == 2);
  /* The cache is what the next create follows: told variant 0, it runs variant 0. */
  char *at = strstr(text, "\n0 1\n");
  if (at) {
    at[3] = '0';
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0);
    if (f) fclose(f);
    CHECK(chosen_with(NULL) == 2);
    CHECK(chosen_with("log") == 2);
  }
  /* fresh: timed again, the cache rewritten. */
  CHECK(chosen_with("fresh") == 3);
  CHECK(read_cache(dir, path, sizeof path, text, sizeof text) && strstr(text, "\n0 1\n"));
  /* A damaged cache is a miss: timed again. A variant the choice lacks, too. */
  FILE *f = fopen(path, "w");
  CHECK(f && fputs("gpucc-tune 1\ngarbage\n", f) >= 0);
  if (f) fclose(f);
  CHECK(chosen_with(NULL) == 3);
  CHECK(read_cache(dir, path, sizeof path, text, sizeof text));
  if ((at = strstr(text, "\n0 1\n"))) {
    at[3] = '5';
    f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0);
    if (f) fclose(f);
    CHECK(chosen_with(NULL) == 3);
  }
  /* An unknown setting is an error, not a guess. */
  setenv("GPUCC_TUNE", "fastest", 1);
  size_t len;
  void *plan = make_plan_choice(MOD_CUBIN, "k_slow", "k_fast", 4096, &len);
  GpuccModel *m = NULL;
  CHECK(gpucc_model_create(plan, len, weights_b, sizeof weights_b, 0, &m) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(m == NULL && strstr(gpucc_last_error(), "GPUCC_TUNE=fastest") != NULL);
  unsetenv("GPUCC_TUNE");
  /* Debug mode runs the chosen variant alone, step by step. */
  setenv("GPUCC_RUNTIME_DEBUG", "1", 1);
  m = create(plan, len);
  if (m) CHECK(which_variant(m) == 3);
  gpucc_model_destroy(m);
  unsetenv("GPUCC_RUNTIME_DEBUG");
  free(plan);
  unlink(path);
  char sub[512];
  snprintf(sub, sizeof sub, "%s/tune", dir);
  rmdir(sub);
  rmdir(dir);
  unsetenv("GPUCC_CACHE_DIR");
}

static size_t free_memory(void) {
  size_t fr = 0, total = 0;
  cu->cuMemGetInfo(&fr, &total);
  return fr;
}

static void test_errors(void) {
  /* A kernel the module does not have: a clean error, and the 256 MiB arena (allocated
   * before the kernel is looked up) freed again. */
  size_t len;
  void *plan = make_plan(MOD_CUBIN, "k_missing", 256u << 20, &len);
  size_t before = free_memory();
  GpuccModel *m = (GpuccModel *)1;
  GpuccStatus st = gpucc_model_create(plan, len, weights_b, sizeof weights_b, 0, &m);
  size_t after = free_memory();
  CHECK(st == GPUCC_ERR_BAD_PLAN && m == NULL);
  CHECK(strstr(gpucc_last_error(), "step 0 (kernel 'k_missing'): the module has no kernel named "
                                   "'k_missing'") != NULL);
  if (after + (16u << 20) < before)
    fprintf(stderr, "free memory %zu before create, %zu after its failure\n", before, after);
  CHECK(after + (16u << 20) >= before);
  free(plan);

  /* An arena no GPU has. */
  plan = make_plan(MOD_CUBIN, "k_affine", 1ull << 42, &len); /* 4 TiB */
  st = gpucc_model_create(plan, len, weights_b, sizeof weights_b, 0, &m);
  CHECK(st == GPUCC_ERR_OUT_OF_MEMORY && m == NULL);
  CHECK(strstr(gpucc_last_error(), "out of GPU memory: cuMemAlloc of the arena") != NULL);
  after = free_memory();
  CHECK(after + (16u << 20) >= before);

  /* Weights of the wrong size, a device that does not exist, a damaged plan. */
  st = gpucc_model_create(plan, len, weights_b, 4, 0, &m);
  CHECK(st == GPUCC_ERR_INVALID_ARGUMENT && strstr(gpucc_last_error(), "weights: 4 bytes given"));
  free(plan);
  plan = make_plan(MOD_CUBIN, "k_affine", 4096, &len);
  st = gpucc_model_create(plan, len, weights_b, sizeof weights_b, 1000, &m);
  CHECK(st == GPUCC_ERR_NO_DEVICE && strstr(gpucc_last_error(), "no CUDA device 1000"));
  ((unsigned char *)plan)[len / 2] ^= 1;
  st = gpucc_model_create(plan, len, weights_b, sizeof weights_b, 0, &m);
  CHECK(st == GPUCC_ERR_BAD_PLAN && strstr(gpucc_last_error(), "checksum"));
  free(plan);
}

/* gpucc_device_properties (what the compiler's target takes from a device) against the
 * driver's attributes read here, and the limits of every GPU gpucc targets (compute
 * capability 8.0 on: 48 KiB of static shared memory a block, more opted in, 64 Ki
 * registers an SM, 1,024 threads a block; clusters from 9.0). */
static void test_device_properties(void) {
  GpuccDeviceProperties p;
  CHECK(gpucc_device_properties(0, &p) == GPUCC_OK);
  int sms = 0, l2 = 0;
  CHECK(cu->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) == 0);
  CHECK(cu->cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev) == 0);
  CHECK(p.sms == sms && p.l2_bytes == l2 && p.cc_major == cc_major && p.cc_minor == cc_minor);
  CHECK(p.name[0] != 0 && strlen(p.name) < sizeof p.name);
  if (cc_major >= 8) {
    CHECK(p.smem_block == 48 * 1024 && p.regs_sm == 64 * 1024 && p.threads_block == 1024);
    CHECK(p.smem_block_optin > p.smem_block && p.smem_sm > p.smem_block_optin);
    CHECK(p.threads_sm >= p.threads_block && p.blocks_sm >= 16);
  }
  CHECK(!p.cluster_launch || cc_major >= 9);
  CHECK(gpucc_device_properties(0, NULL) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(gpucc_device_properties(1000, &p) == GPUCC_ERR_NO_DEVICE &&
        strstr(gpucc_last_error(), "no CUDA device 1000"));
}

/* A kernel writing through a NULL pointer, in debug mode: run must fail naming it. */
static void test_fault(void) {
  setenv("GPUCC_RUNTIME_DEBUG", "1", 1);
  GpuccPlan *p = gpucc_plan_new(256, 0, 0);
  size_t n = 0;
  char *ptx = nvrtc("compute_75", false, &n);
  gpucc_plan_set_module(p, NULL, 0, ptx);
  free(ptx);
  GpuccArg null_arg = gpucc_scalar_arg(0); /* a 0 pointer, passed as 8 bytes */
  uint32_t grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
  gpucc_plan_add_kernel(p, "k_fault", grid, block, 0, &null_arg, 1);
  void *bytes = NULL;
  size_t len = 0;
  CHECK(gpucc_plan_serialize(p, &bytes, &len) == GPUCC_OK);
  gpucc_plan_free(p);
  GpuccModel *m = NULL;
  CHECK(gpucc_model_create(bytes, len, NULL, 0, 0, &m) == GPUCC_OK);
  free(bytes);
  if (!m) return;
  GpuccStatus st = gpucc_model_run_host(m, NULL, NULL, NULL);
  CHECK(st == GPUCC_ERR_CUDA);
  CHECK(strstr(gpucc_last_error(), "step 0 (kernel 'k_fault') failed") != NULL);
  fprintf(stderr, "fault reported as: %s\n", gpucc_last_error());
  gpucc_model_destroy(m); /* must not crash on a dead context */
}

int main(int argc, char **argv) {
  GpuccStatus st;
  if (!(cu = gpucc_cuda(&st))) {
    printf("SKIPPED: no CUDA device (%s)\n", gpucc_last_error());
    return 77;
  }
  int count = 0;
  if (cu->cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  CUcontext ctx;
  CHECK(cu->cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
  CHECK(cu->cuDeviceGetAttribute(&cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) == 0);
  CHECK(cu->cuDeviceGetAttribute(&cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) == 0);
  CHECK(cu->cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
  CHECK(cu->cuCtxPushCurrent(ctx) == CUDA_SUCCESS);
  if (argc > 1 && !strcmp(argv[argc - 1], "--fault")) {
    test_fault();
  } else {
    test_model();
    test_modules_and_debug();
    test_choices();
    test_errors();
    test_device_properties();
  }
  if (failures) fprintf(stderr, "test_runtime: %d checks failed\n", failures);
  else printf("test_runtime: all passed on sm_%d%d\n", cc_major, cc_minor);
  return failures ? 1 : 0;
}
