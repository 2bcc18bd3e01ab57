/* test_runtime.c: the runtime on a GPU, against values computed here on the CPU.
 *
 * A kernel compiled with NVRTC in the test (the runtime itself never sees NVRTC), a
 * cuBLASLt GEMM with a broadcast batch, a copy and a memset, run through the model API
 * with device pointers and with host buffers; the PTX path and the PTX fallback for a
 * cubin of another architecture; a plan of three modules, each kernel found in its own;
 * GPUCC_RUNTIME_DEBUG, GPUCC_GEMM_TUNE=0 and =fewest; the kernels per inference; the
 * clean errors: wrong input shape, a kernel name the module lacks (everything freed) or
 * every module lacks, an arena too big for the GPU; and the device's properties. A ranged
 * plan (shape classes) built here runs at every size through run_dims and run_dims_host:
 * the inputs padded into the class's slots (strided where the ranged axis is not the
 * outermost), the size read from the arena, only the real part of each output copied out.
 * A plan whose batch is rows runs each batch as chunks of classes (each row's result says
 * which chunk ran it): by padded work with GPUCC_TUNE=0 and in debug mode (batch 3: 2 rows,
 * then 1), by the classes' timed costs without; gpucc_model_time replays the chunks.
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
    "}\n"
    /* The ranged plan's: each over a whole class slot, the size read from the arena. */
    "extern \"C\" __global__ void k_add_size(const float *x, float *y, const long long *size,\n"
    "                                         long long n) {\n"
    "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = x[i] + (float)*size;\n"
    "}\n"
    /* The rows plan's: y = x + c + the batch size the class reads, c repeating per row. */
    "extern \"C\" __global__ void k_add_row(const float *x, const float *c, float *y,\n"
    "                                        const long long *size, long long n) {\n"
    "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = x[i] + c[i % 4] + (float)*size;\n"
    "}\n"
    "extern \"C\" __global__ void k_twice(const float *w, float *v, long long n) {\n"
    "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "  if (i < n) v[i] = 2.0f * w[i];\n"
    "}\n"
    "extern \"C\" __global__ void k_sums(const float *x, long long xn, const float *w,\n"
    "                                     long long wn, float *sums) {\n"
    "  if (threadIdx.x) return;\n"
    "  float a = 0.0f, b = 0.0f;\n"
    "  for (long long i = 0; i < xn; i++) a += x[i];\n"
    "  for (long long i = 0; i < wn; i++) b += w[i];\n"
    "  sums[0] = a;\n"
    "  sums[1] = b;\n"
    "}\n";

/* A plan of several modules puts kernel_src second, between these two translation units:
 * one without any of the plan's kernels, one with k_affine's twin under another name. */
static const char *unused_src = "extern \"C\" __global__ void k_unused(float *p) { p[0] = 0; }\n";
static const char *twin_src =
    "extern \"C\" __global__ void k_affine3(const float *x, float *y, long long n, double a) {\n"
    "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = x[i] * (float)a + 1.0f;\n"
    "}\n";

/* NVRTC output of src for arch ("compute_90": PTX, "sm_90": a cubin). malloc'd; NULL on
 * error. */
static char *nvrtc_of(const char *src, const char *arch, bool cubin, size_t *len) {
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, src, "test.cu", 0, NULL, NULL) != NVRTC_SUCCESS) return NULL;
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

static char *nvrtc(const char *arch, bool cubin, size_t *len) {
  return nvrtc_of(kernel_src, arch, cubin, len);
}

/* ---------------------------------------------------------------- the plan */

/* Arena layout (bytes): x f32[8] @0, y f32[8] @256, a f32[2,2,3] @512, c f32[2,2,4] @1024,
 * y copy @1280, m u8[16] @1536. Weights: b f32[3,4] @0. */
enum { N = 8, M = 2, K = 3, NN = 4, BATCH = 2 };
static const float weights_b[K * NN] = {1, 2, 3, 4, -1, 0.5f, 0, 2, 3, -2, 1, 0.25f};

/* MOD_SEVERAL: three modules, unused_src's cubin, kernel_src's PTX, then twin_src's cubin
 * of another GPU and its PTX. */
typedef enum Module { MOD_CUBIN, MOD_PTX, MOD_WRONG_CUBIN_AND_PTX, MOD_SEVERAL } Module;

/* Serializes p (freeing it) into *len bytes. */
static void *bytes_of(GpuccPlan *p, size_t *len) {
  void *bytes = NULL;
  GpuccStatus st = gpucc_plan_serialize(p, &bytes, len);
  if (st) fprintf(stderr, "serialize: %s\n", gpucc_last_error());
  CHECK(st == GPUCC_OK);
  gpucc_plan_free(p);
  return bytes;
}

/* src compiled as mod says (one module: not MOD_SEVERAL), added to p's modules. */
static void add_module_of(GpuccPlan *p, const char *src, Module mod) {
  char sm[16], compute[16], other[16];
  snprintf(sm, sizeof sm, "sm_%d%d", cc_major, cc_minor);
  snprintf(compute, sizeof compute, "compute_%d%d", cc_major, cc_minor);
  snprintf(other, sizeof other, "sm_%d0", cc_major == 8 ? 9 : 8); /* not this GPU's */
  size_t cubin_len = 0, ptx_len = 0;
  char *cubin =
      mod == MOD_PTX ? NULL : nvrtc_of(src, mod == MOD_CUBIN ? sm : other, true, &cubin_len);
  char *ptx = mod == MOD_CUBIN ? NULL : nvrtc_of(src, compute, false, &ptx_len);
  CHECK(mod == MOD_PTX || cubin);
  CHECK(mod == MOD_CUBIN || ptx);
  CHECK(gpucc_plan_add_module(p, cubin, cubin_len, ptx) == GPUCC_OK);
  free(cubin);
  free(ptx);
}

/* The plan: the kernel, a GEMM, a copy and a memset. With alt, the kernel step is a choice
 * between kernel (variant 0) and alt. */
static void *make_plan_choice(Module mod, const char *kernel, const char *alt, uint64_t arena,
                              size_t *len) {
  GpuccPlan *p = gpucc_plan_new(arena, sizeof weights_b, 1 << 22);
  if (mod == MOD_SEVERAL) {
    add_module_of(p, unused_src, MOD_CUBIN);
    add_module_of(p, kernel_src, MOD_PTX);
    add_module_of(p, twin_src, MOD_WRONG_CUBIN_AND_PTX);
  } else {
    add_module_of(p, kernel_src, mod);
  }

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

  return bytes_of(p, len);
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
  /* A fixed model: no symbols, one class, and run_dims at exactly its dims. */
  CHECK(gpucc_model_num_symbols(m) == 0 && gpucc_model_num_classes(m) == 1);
  CHECK(gpucc_model_class_kernels(m, 0) == kernels && gpucc_model_class_bounds(m, 0, NULL) == GPUCC_OK);
  /* One class: nothing timed, every run that class. */
  int cls[2] = {-1, -1};
  CHECK(gpucc_model_class_ms(m, 0) == -1 && gpucc_model_class_ms(NULL, 0) == -1);
  CHECK(gpucc_model_last_chunks(m, cls, 2) == 1 && cls[0] == 0 && cls[1] == -1);
  CHECK(gpucc_model_last_chunks(NULL, cls, 2) == 0);
  int64_t lo = 0, hi = 0;
  CHECK(gpucc_model_input_range(m, 1, 2, &lo, &hi) == GPUCC_OK && lo == K && hi == K);
  {
    Data d;
    memset(&d, 0, sizeof d);
    fill_inputs(&d, 0.75f);
    int64_t xd[] = {N}, ad[] = {BATCH, M, K}, yd[1], cd[3], md[1];
    const int64_t *dims[] = {xd, ad};
    int64_t *odims[] = {yd, cd, md};
    const void *hin[] = {d.x, d.a};
    void *hout[] = {d.y, d.c, d.m};
    CHECK(gpucc_model_run_dims_host(m, hin, dims, hout, odims, NULL) == GPUCC_OK);
    check_outputs(&d, "run_dims_host of a fixed model");
    CHECK(yd[0] == N && cd[0] == BATCH && cd[1] == M && cd[2] == NN && md[0] == 16);
    ad[2] = K + 1;
    CHECK(gpucc_model_run_dims_host(m, hin, dims, hout, odims, NULL) == GPUCC_ERR_INVALID_ARGUMENT);
    CHECK(!strcmp(gpucc_last_error(), "input 'a': dim 2 is 4, expected 3"));
  }
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

  /* Several modules: each kernel from the first module that has it, k_affine from the
   * second, k_affine3 from the third (its PTX: the cubin is not for this GPU). */
  plan = make_plan(MOD_SEVERAL, "k_affine", 4096, &len);
  m = create(plan, len);
  if (m) run_host_and_check(m, 0.75f, "several modules, the kernel in the second");
  gpucc_model_destroy(m);
  free(plan);
  plan = make_plan(MOD_SEVERAL, "k_affine3", 4096, &len);
  m = create(plan, len);
  if (m) run_host_and_check(m, -0.5f, "several modules, the kernel in the third");
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

/* ---------------------------------------------------------------- shape classes */

/* A ranged plan: batch = 1..4 and seq = 1 or 3..5 (a point and a range). Inputs
 * x f32[batch, 4] and w f32[batch, 2, 3, seq]; outputs y = x + batch (the size k_add_size
 * reads from the arena), v = 2w, and sums f32[2], the sums of x's and w's whole class
 * slots, padding included (padding that is not 0 shows in them). The classes, at (batch,
 * seq), reading the batch size only: */
enum { BMAX = 4, SMAX = 5, XN = BMAX * 4, WN = BMAX * 2 * 3 * SMAX, NCLASSES = 4 };
static const int64_t bounds[NCLASSES][2] = {{1, 5}, {2, 5}, {4, 5}, {4, 3}};
static const float sentinel = -12345.0f;

/* The next 256-aligned slot of `bytes` at *at. */
static uint64_t slot(uint64_t *at, uint64_t bytes) {
  uint64_t here = *at;
  *at = (here + bytes + 255) / 256 * 256;
  return here;
}

static void *make_ranged_plan(size_t *len) {
  GpuccPlan *p = gpucc_plan_new(1 << 16, 0, 0);
  add_module_of(p, kernel_src, MOD_CUBIN);
  int64_t xd[] = {BMAX, 4}, wd[] = {BMAX, 2, 3, SMAX}, sd[] = {2};
  gpucc_plan_add_input(p, "x", GPUCC_DT_F32, 2, xd, 0);
  gpucc_plan_add_input(p, "w", GPUCC_DT_F32, 4, wd, 0);
  gpucc_plan_add_output(p, "y", GPUCC_DT_F32, 2, xd, 0);
  gpucc_plan_add_output(p, "v", GPUCC_DT_F32, 4, wd, 0);
  gpucc_plan_add_output(p, "sums", GPUCC_DT_F32, 1, sd, 0);
  int64_t blo[] = {1}, bhi[] = {BMAX}, slo[] = {1, 3}, shi[] = {1, SMAX};
  gpucc_plan_add_symbol(p, "batch", 1, blo, bhi);
  gpucc_plan_add_symbol(p, "seq", 2, slo, shi);
  for (int out = 0; out < 2; out++) {
    gpucc_plan_set_axis_symbol(p, out, 0, 0, 0);
    gpucc_plan_set_axis_symbol(p, out, 1, 0, 0);
    gpucc_plan_set_axis_symbol(p, out, 1, 3, 1);
  }
  uint32_t grid[3] = {1, 1, 1}, block[3] = {128, 1, 1};
  for (int c = 0; c < NCLASSES; c++) {
    int64_t b = bounds[c][0], xn = b * 4, wn = b * 2 * 3 * bounds[c][1];
    uint64_t at = 0, x = slot(&at, xn * 4), w = slot(&at, wn * 4), y = slot(&at, xn * 4),
             v = slot(&at, wn * 4), sums = slot(&at, 8), size = slot(&at, 8);
    uint64_t in[] = {x, w}, out[] = {y, v, sums}, sizes[] = {size, GPUCC_NO_OFFSET};
    gpucc_plan_add_class(p, bounds[c], at, in, out, sizes);
    GpuccArg add[] = {gpucc_ptr_arg(gpucc_arena_ptr(x)), gpucc_ptr_arg(gpucc_arena_ptr(y)),
                      gpucc_ptr_arg(gpucc_arena_ptr(size)), gpucc_scalar_arg((uint64_t)xn)};
    GpuccArg twice[] = {gpucc_ptr_arg(gpucc_arena_ptr(w)), gpucc_ptr_arg(gpucc_arena_ptr(v)),
                        gpucc_scalar_arg((uint64_t)wn)};
    GpuccArg sum[] = {gpucc_ptr_arg(gpucc_arena_ptr(x)), gpucc_scalar_arg((uint64_t)xn),
                      gpucc_ptr_arg(gpucc_arena_ptr(w)), gpucc_scalar_arg((uint64_t)wn),
                      gpucc_ptr_arg(gpucc_arena_ptr(sums))};
    gpucc_plan_add_kernel(p, "k_add_size", grid, block, 0, add, 4);
    gpucc_plan_add_kernel(p, "k_twice", grid, block, 0, twice, 3);
    gpucc_plan_add_kernel(p, "k_sums", grid, block, 0, sum, 5);
  }
  return bytes_of(p, len);
}

/* One run's buffers, at the largest dims: the real part first, then sentinels. */
typedef struct Ranged {
  float x[XN], w[WN];
  float y[XN], v[WN], sums[2];
  int64_t yd[2], vd[4], sd[1];
} Ranged;

static void fill_ranged(Ranged *d, int64_t b, int64_t s) {
  for (int i = 0; i < XN; i++) d->x[i] = i < b * 4 ? (float)(i + 10 * b) : sentinel;
  for (int i = 0; i < WN; i++) d->w[i] = i < b * 6 * s ? (float)(i % 7 - 3 + s) : sentinel;
  for (int i = 0; i < XN; i++) d->y[i] = sentinel;
  for (int i = 0; i < WN; i++) d->v[i] = sentinel;
  d->sums[0] = d->sums[1] = sentinel;
  d->yd[0] = d->yd[1] = d->vd[0] = d->vd[3] = d->sd[0] = -1;
}

/* y = x + b, v = 2w and the sums at (b, s), sentinels past the real part: nothing of the
 * padding reached an output, and the padding the kernels saw was 0. */
static void check_ranged(const Ranged *d, int64_t b, int64_t s, const char *what) {
  int bad = 0;
  float sx = 0, sw = 0;
  for (int i = 0; i < XN; i++) {
    bad += d->y[i] != (i < b * 4 ? d->x[i] + (float)b : sentinel);
    sx += i < b * 4 ? d->x[i] : 0;
  }
  for (int i = 0; i < WN; i++) {
    bad += d->v[i] != (i < b * 6 * s ? 2 * d->w[i] : sentinel);
    sw += i < b * 6 * s ? d->w[i] : 0;
  }
  bad += d->sums[0] != sx || d->sums[1] != sw;
  bad += d->yd[0] != b || d->yd[1] != 4 || d->vd[0] != b || d->vd[1] != 2 || d->vd[2] != 3 ||
         d->vd[3] != s || d->sd[0] != 2;
  if (bad)
    fprintf(stderr, "%s at batch %lld, seq %lld: %d wrong (y[0]=%g v[0]=%g sums %g %g, want %g %g)\n",
            what, (long long)b, (long long)s, bad, d->y[0], d->v[0], d->sums[0], d->sums[1], sx, sw);
  CHECK(bad == 0);
}

/* run_dims_host of the host buffers buf[0 .. nin) (the inputs, at dims) and buf[nin ..
 * nin + nout) (the outputs), or run_dims through device copies of them, each of bytes[k]
 * (the largest dims'), copied back after it. */
enum { MAX_BUFS = 8 };
static GpuccStatus run_buffers(GpuccModel *m, int nin, int nout, void *const *buf,
                               const size_t *bytes, const int64_t *const *dims,
                               int64_t *const *odims, bool host) {
  if (host) return gpucc_model_run_dims_host(m, (const void *const *)buf, dims, buf + nin, odims, NULL);
  CUdeviceptr dbuf[MAX_BUFS] = {0};
  void *dptr[MAX_BUFS];
  for (int k = 0; k < nin + nout; k++) {
    CHECK(cu->cuMemAlloc(&dbuf[k], bytes[k]) == CUDA_SUCCESS);
    CHECK(cu->cuMemcpyHtoD(dbuf[k], buf[k], bytes[k]) == CUDA_SUCCESS);
    dptr[k] = (void *)(uintptr_t)dbuf[k];
  }
  CUstream st;
  CHECK(cu->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  GpuccStatus r = gpucc_model_run_dims(m, (const void *const *)dptr, dims, dptr + nin, odims, st);
  CHECK(cu->cuStreamSynchronize(st) == CUDA_SUCCESS);
  for (int k = nin; k < nin + nout; k++)
    CHECK(cu->cuMemcpyDtoH(buf[k], dbuf[k], bytes[k]) == CUDA_SUCCESS);
  for (int k = 0; k < nin + nout; k++) cu->cuMemFree(dbuf[k]);
  cu->cuStreamDestroy(st);
  return r;
}

/* run_buffers of d's buffers at input dims (xd, wd). */
static GpuccStatus run_at(GpuccModel *m, Ranged *d, const int64_t *xd, const int64_t *wd,
                          bool host) {
  const int64_t *dims[] = {xd, wd};
  int64_t *odims[] = {d->yd, d->vd, d->sd};
  void *const buf[] = {d->x, d->w, d->y, d->v, d->sums};
  const size_t bytes[] = {sizeof d->x, sizeof d->w, sizeof d->y, sizeof d->v, sizeof d->sums};
  return run_buffers(m, 2, 3, buf, bytes, dims, odims, host);
}

static GpuccStatus run_ranged(GpuccModel *m, Ranged *d, int64_t b, int64_t s, bool host) {
  int64_t xd[] = {b, 4}, wd[] = {b, 2, 3, s};
  return run_at(m, d, xd, wd, host);
}

static const int64_t seqs[] = {5, 4, 3, 1};

/* Every size, largest first, so that a class runs smaller after it ran larger: stale
 * inputs in its slots would show in the sums. */
static void run_every_size(GpuccModel *m, const char *what) {
  for (int host = 0; host < 2; host++)
    for (int64_t b = BMAX; b >= 1; b--)
      for (size_t k = 0; k < sizeof seqs / sizeof *seqs; k++) {
        Ranged d;
        fill_ranged(&d, b, seqs[k]);
        GpuccStatus st = run_ranged(m, &d, b, seqs[k], host);
        if (st) fprintf(stderr, "%s: %s\n", what, gpucc_last_error());
        CHECK(st == GPUCC_OK);
        if (!st) check_ranged(&d, b, seqs[k], host ? what : "run_dims");
      }
}

/* A dims error: the message, and the outputs untouched (nothing was enqueued). */
static void expect_dims_error(GpuccModel *m, int64_t xb, int64_t wb, int64_t w1, int64_t s,
                              bool host, const char *want) {
  Ranged d;
  fill_ranged(&d, 1, 1);
  int64_t xd[] = {xb, 4}, wd[] = {wb, w1, 3, s};
  GpuccStatus st = run_at(m, &d, xd, wd, host);
  CHECK(st == GPUCC_ERR_INVALID_ARGUMENT);
  if (strcmp(gpucc_last_error(), want))
    fprintf(stderr, "dims error: '%s', wanted '%s'\n", gpucc_last_error(), want);
  CHECK(!strcmp(gpucc_last_error(), want));
  int touched = d.yd[0] != -1 || d.vd[0] != -1 || d.sd[0] != -1;
  for (int i = 0; i < XN; i++) touched += d.y[i] != sentinel;
  for (int i = 0; i < WN; i++) touched += d.v[i] != sentinel;
  touched += d.sums[0] != sentinel || d.sums[1] != sentinel;
  CHECK(touched == 0);
}

static void test_shape_classes(void) {
  size_t len;
  void *plan = make_ranged_plan(&len);
  GpuccModel *m = NULL;
  GpuccStatus st = gpucc_model_create(plan, len, NULL, 0, 0, &m);
  if (st) fprintf(stderr, "create: %s\n", gpucc_last_error());
  CHECK(st == GPUCC_OK && m);
  if (!m) {
    free(plan);
    return;
  }

  /* What the model says about its symbols and classes. */
  CHECK(gpucc_model_num_symbols(m) == 2 && gpucc_model_num_classes(m) == NCLASSES);
  CHECK(!strcmp(gpucc_model_symbol_name(m, 1), "seq") && gpucc_model_symbol_name(m, 2) == NULL);
  for (int c = 0; c < NCLASSES; c++) {
    int64_t b[2] = {0, 0};
    CHECK(gpucc_model_class_bounds(m, c, b) == GPUCC_OK && b[0] == bounds[c][0] && b[1] == bounds[c][1]);
    CHECK(gpucc_model_class_kernels(m, c) == 3);
  }
  int64_t b[2];
  CHECK(gpucc_model_class_bounds(m, NCLASSES, b) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(gpucc_model_class_kernels(m, -1) == -1 && gpucc_model_kernels(m) == 3);
  int64_t lo = 0, hi = 0;
  CHECK(gpucc_model_input_range(m, 0, 0, &lo, &hi) == GPUCC_OK && lo == 1 && hi == BMAX);
  CHECK(gpucc_model_input_range(m, 1, 3, &lo, &hi) == GPUCC_OK && lo == 1 && hi == SMAX);
  CHECK(gpucc_model_input_range(m, 1, 1, &lo, &hi) == GPUCC_OK && lo == 2 && hi == 2);
  CHECK(gpucc_model_input_range(m, 1, 4, &lo, &hi) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(gpucc_model_input_dims(m, 1)[3] == SMAX && gpucc_model_input_bytes(m, 1) == sizeof(float) * WN);

  /* Output dims for given input dims, with no GPU work. */
  int64_t xd[] = {3, 4}, wd[] = {3, 2, 3, 4}, yd[2], vd[4], sd[1];
  const int64_t *dims[] = {xd, wd};
  int64_t *odims[] = {yd, vd, sd};
  CHECK(gpucc_model_output_dims_for(m, dims, odims) == GPUCC_OK);
  CHECK(yd[0] == 3 && yd[1] == 4 && vd[0] == 3 && vd[1] == 2 && vd[2] == 3 && vd[3] == 4 && sd[0] == 2);

  /* The typed checks take any size in the ranges. */
  CHECK(gpucc_model_check_input(m, 1, GPUCC_DT_F32, 4, wd) == GPUCC_OK);
  int64_t w2[] = {3, 2, 3, 2};
  CHECK(gpucc_model_check_input(m, 1, GPUCC_DT_F32, 4, w2) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(!strcmp(gpucc_last_error(), "input 'w': dim 3 ('seq') is 2, outside its range 1, 3..5"));
  CHECK(gpucc_model_check_input(m, 1, GPUCC_DT_F16, 4, wd) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(!strcmp(gpucc_last_error(),
                "input 'w': expected f32[batch=1..4, 2, 3, seq={1, 3..5}], got f16[3, 2, 3, 4]"));
  CHECK(gpucc_model_check_input(m, 0, GPUCC_DT_F32, 1, xd) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(!strcmp(gpucc_last_error(), "input 'x': expected f32[batch=1..4, 4], got f32[3]"));

  /* Every size, on both paths, then errors that must enqueue nothing. */
  run_every_size(m, "run_dims_host");
  for (int host = 0; host < 2; host++) {
    expect_dims_error(m, 5, 5, 2, 5, host, "input 'x': dim 0 ('batch') is 5, outside its range 1..4");
    expect_dims_error(m, 2, 2, 2, 2, host, "input 'w': dim 3 ('seq') is 2, outside its range 1, 3..5");
    expect_dims_error(m, 3, 2, 2, 3, host, "input 'w': dim 0 ('batch') is 2, but input 'x' has 3");
    expect_dims_error(m, 3, 3, 3, 3, host, "input 'w': dim 1 is 3, expected 2");
  }

  /* Without a rows symbol a run is one class; each class's graph was timed at create. */
  int cls[2] = {-1, -1};
  CHECK(gpucc_model_last_chunks(m, cls, 2) == 1 && cls[0] == 0); /* batch 1, seq 1: (1, 5) */
  for (int c = 0; c < NCLASSES; c++) CHECK(gpucc_model_class_ms(m, c) > 0);

  /* run: the largest class at the largest dims; then time the class the last run took. */
  Ranged d;
  fill_ranged(&d, BMAX, SMAX);
  d.yd[0] = BMAX, d.yd[1] = 4, d.vd[0] = BMAX, d.vd[1] = 2, d.vd[2] = 3, d.vd[3] = SMAX, d.sd[0] = 2;
  const void *in[] = {d.x, d.w};
  void *out[] = {d.y, d.v, d.sums};
  CHECK(gpucc_model_run_host(m, in, out, NULL) == GPUCC_OK);
  check_ranged(&d, BMAX, SMAX, "run_host");
  float ms = -1;
  CHECK(gpucc_model_time(m, 1, 3, NULL, &ms) == GPUCC_OK && ms >= 0);
  gpucc_model_destroy(m);

  /* Debug mode runs a class's steps one by one, after the sizes. */
  setenv("GPUCC_RUNTIME_DEBUG", "1", 1);
  m = NULL;
  CHECK(gpucc_model_create(plan, len, NULL, 0, 0, &m) == GPUCC_OK && m);
  if (m) {
    run_every_size(m, "run_dims_host (GPUCC_RUNTIME_DEBUG)");
    CHECK(gpucc_model_kernels(m) == -1 && gpucc_model_class_kernels(m, 0) == -1);
  }
  gpucc_model_destroy(m);
  unsetenv("GPUCC_RUNTIME_DEBUG");
  free(plan);
}

/* ---------------------------------------------------------------- chunks of rows */

/* A plan whose batch is rows (GPUCC_SYMBOL_ROWS): batch = 1..4 and seq = 1..3, classes
 * batch {1, 2, 4} by seq {3, 1}. Inputs x f32[batch, 4], w f32[2, batch, seq] (the rows
 * a middle axis, padded along seq too) and c f32[4] (no rows: whole in every chunk);
 * outputs y = x + c + the batch size the class reads, which is the chunk's rows (so y
 * tells the chunks apart), and v = 2w. Each kernel runs over its class's whole slot. */
enum { RB = 4, RS = 3, RXN = RB * 4, RWN = 2 * RB * RS, RCLASSES = 6 };
static const int64_t row_bounds[RCLASSES][2] = {{1, 3}, {2, 3}, {4, 3}, {1, 1}, {2, 1}, {4, 1}};

static void *make_rows_plan(size_t *len) {
  GpuccPlan *p = gpucc_plan_new(1 << 16, 0, 0);
  add_module_of(p, kernel_src, MOD_CUBIN);
  int64_t xd[] = {RB, 4}, wd[] = {2, RB, RS}, cd[] = {4};
  gpucc_plan_add_input(p, "x", GPUCC_DT_F32, 2, xd, 0);
  gpucc_plan_add_input(p, "w", GPUCC_DT_F32, 3, wd, 0);
  gpucc_plan_add_input(p, "c", GPUCC_DT_F32, 1, cd, 0);
  gpucc_plan_add_output(p, "y", GPUCC_DT_F32, 2, xd, 0);
  gpucc_plan_add_output(p, "v", GPUCC_DT_F32, 3, wd, 0);
  int64_t blo[] = {1}, bhi[] = {RB}, slo[] = {1}, shi[] = {RS};
  gpucc_plan_add_symbol(p, "batch", 1, blo, bhi);
  gpucc_plan_add_symbol(p, "seq", 1, slo, shi);
  CHECK(gpucc_plan_set_symbol_flags(p, 0, GPUCC_SYMBOL_ROWS) == GPUCC_OK);
  for (int out = 0; out < 2; out++) {
    gpucc_plan_set_axis_symbol(p, out, 0, 0, 0);
    gpucc_plan_set_axis_symbol(p, out, 1, 1, 0);
    gpucc_plan_set_axis_symbol(p, out, 1, 2, 1);
  }
  uint32_t grid[3] = {1, 1, 1}, block[3] = {128, 1, 1};
  for (int c = 0; c < RCLASSES; c++) {
    int64_t xn = row_bounds[c][0] * 4, wn = 2 * row_bounds[c][0] * row_bounds[c][1];
    uint64_t at = 0, x = slot(&at, xn * 4), w = slot(&at, wn * 4), cc = slot(&at, 16),
             y = slot(&at, xn * 4), v = slot(&at, wn * 4), size = slot(&at, 8);
    uint64_t in[] = {x, w, cc}, out[] = {y, v}, sizes[] = {size, GPUCC_NO_OFFSET};
    gpucc_plan_add_class(p, row_bounds[c], at, in, out, sizes);
    GpuccArg add[] = {gpucc_ptr_arg(gpucc_arena_ptr(x)), gpucc_ptr_arg(gpucc_arena_ptr(cc)),
                      gpucc_ptr_arg(gpucc_arena_ptr(y)), gpucc_ptr_arg(gpucc_arena_ptr(size)),
                      gpucc_scalar_arg((uint64_t)xn)};
    GpuccArg twice[] = {gpucc_ptr_arg(gpucc_arena_ptr(w)), gpucc_ptr_arg(gpucc_arena_ptr(v)),
                        gpucc_scalar_arg((uint64_t)wn)};
    gpucc_plan_add_kernel(p, "k_add_row", grid, block, 0, add, 5);
    gpucc_plan_add_kernel(p, "k_twice", grid, block, 0, twice, 3);
  }
  return bytes_of(p, len);
}

/* One run's buffers, at the largest dims: the real part first, then sentinels. */
typedef struct Rows {
  float x[RXN], w[RWN], c[4];
  float y[RXN], v[RWN];
  int64_t yd[2], vd[3];
} Rows;

static void fill_rows(Rows *d, int64_t b, int64_t s) {
  for (int i = 0; i < RXN; i++) d->x[i] = i < b * 4 ? (float)(100 * b + i) : sentinel;
  for (int i = 0; i < RWN; i++) d->w[i] = i < 2 * b * s ? (float)(i % 11 - 5) + 0.5f * (float)s : sentinel;
  for (int j = 0; j < 4; j++) d->c[j] = 0.25f * (float)(j + 1);
  for (int i = 0; i < RXN; i++) d->y[i] = sentinel;
  for (int i = 0; i < RWN; i++) d->v[i] = sentinel;
  d->yd[0] = d->yd[1] = d->vd[0] = d->vd[1] = d->vd[2] = -1;
}

/* A run at (b, s), then the chunks it says it took into cls[] and their rows' bounds into
 * rows[] (each chunk's class's batch bound): their count, -1 when the run failed. The
 * chunks are checked: each a class at the seq bound that holds s (3 unless s is 1), the
 * most rows first, together exactly b rows with the last alone short of its bound. */
static int run_rows(GpuccModel *m, Rows *d, int64_t b, int64_t s, bool host, int *cls,
                    int64_t *rows) {
  int64_t xd[] = {b, 4}, wd[] = {2, b, s}, cd[] = {4};
  const int64_t *dims[] = {xd, wd, cd};
  int64_t *odims[] = {d->yd, d->vd};
  void *const buf[] = {d->x, d->w, d->c, d->y, d->v};
  const size_t bytes[] = {sizeof d->x, sizeof d->w, sizeof d->c, sizeof d->y, sizeof d->v};
  GpuccStatus st = run_buffers(m, 3, 2, buf, bytes, dims, odims, host);
  if (st) fprintf(stderr, "rows at batch %lld, seq %lld: %s\n", (long long)b, (long long)s,
                  gpucc_last_error());
  CHECK(st == GPUCC_OK);
  if (st) return -1;
  int n = gpucc_model_last_chunks(m, cls, RB);
  CHECK(n >= 1 && n <= b);
  if (n < 1 || n > b) return -1;
  int64_t covered = 0, bound[2] = {0, 0};
  for (int k = 0; k < n && k < RB; k++) {
    CHECK(gpucc_model_class_bounds(m, cls[k], bound) == GPUCC_OK);
    rows[k] = bound[0];
    CHECK(bound[1] == (s == 1 ? 1 : 3));
    CHECK(k == 0 || rows[k] <= rows[k - 1]);
    CHECK(k == n - 1 || covered + rows[k] < b);
    covered += rows[k];
  }
  CHECK(covered >= b && covered - rows[n - 1] < b);
  return n;
}

/* y = x + c + the rows of each row's chunk (chunks of rows[0 .. n) in order, each taking
 * min(its bound, the rows left)), v = 2w, sentinels past the real part. */
static void check_rows(const Rows *d, int64_t b, int64_t s, const int64_t *rows, int n,
                       const char *what) {
  int64_t len[RB] = {0}; /* of each row's chunk */
  for (int k = 0, r = 0; k < n && r < b; k++) {
    int64_t take = rows[k] < b - r ? rows[k] : b - r;
    for (int64_t i = 0; i < take; i++) len[r + i] = take;
    r += (int)take;
  }
  int bad = 0;
  for (int r = 0; r < RB; r++)
    for (int j = 0; j < 4; j++)
      bad += d->y[r * 4 + j] != (r < b ? d->x[r * 4 + j] + d->c[j] + (float)len[r] : sentinel);
  for (int i = 0; i < RWN; i++) bad += d->v[i] != (i < 2 * b * s ? 2 * d->w[i] : sentinel);
  bad += d->yd[0] != b || d->yd[1] != 4 || d->vd[0] != 2 || d->vd[1] != b || d->vd[2] != s;
  if (bad)
    fprintf(stderr, "%s at batch %lld, seq %lld in %d chunks: %d wrong (y[0]=%g v[0]=%g)\n", what,
            (long long)b, (long long)s, n, bad, d->y[0], d->v[0]);
  CHECK(bad == 0);
}

/* Every size on both run_dims paths, largest first (so a class runs fewer rows after it
 * ran more: stale rows in its slots would show). With want (costs by padded work), the
 * chunks' rows must be want[b]'s. */
static void run_rows_everywhere(GpuccModel *m, const int64_t (*want)[RB], const char *what) {
  static const int64_t row_seqs[] = {3, 2, 1};
  for (int host = 0; host < 2; host++)
    for (int64_t b = RB; b >= 1; b--)
      for (size_t k = 0; k < sizeof row_seqs / sizeof *row_seqs; k++) {
        Rows d;
        int cls[RB];
        int64_t rows[RB] = {0};
        fill_rows(&d, b, row_seqs[k]);
        int n = run_rows(m, &d, b, row_seqs[k], host, cls, rows);
        if (n < 1) continue;
        check_rows(&d, b, row_seqs[k], rows, n, host ? what : "run_dims");
        for (int i = 0; want && i < RB; i++) {
          if ((i < n ? rows[i] : 0) != want[b][i])
            fprintf(stderr, "%s at batch %lld: chunk %d has %lld rows, wanted %lld\n", what,
                    (long long)b, i, (long long)(i < n ? rows[i] : 0), (long long)want[b][i]);
          CHECK((i < n ? rows[i] : 0) == want[b][i]);
        }
      }
}

/* Times what the last run launched: after a run of b rows at seq 3. */
static void time_after_rows(GpuccModel *m, int64_t b, int chunks) {
  Rows d;
  int cls[RB];
  int64_t rows[RB];
  fill_rows(&d, b, 3);
  int n = run_rows(m, &d, b, 3, true, cls, rows);
  CHECK(chunks < 0 || n == chunks);
  float ms = -1;
  CHECK(gpucc_model_time(m, 1, 3, NULL, &ms) == GPUCC_OK && ms >= 0);
  /* The replays leave the outputs alone, and the next run is right. */
  fill_rows(&d, b, 3);
  if ((n = run_rows(m, &d, b, 3, false, cls, rows)) > 0) check_rows(&d, b, 3, rows, n, "after timing");
}

static void test_rows(void) {
  size_t len;
  void *plan = make_rows_plan(&len);
  /* By padded work (the product of a class's bounds, the same for every load): the
   * fewest chunks that pad nothing. Batch 3: 2 rows, then 1. */
  static const int64_t by_work[RB + 1][RB] = {{0}, {1}, {2}, {2, 1}, {4}};
  GpuccModel *m = NULL;
  setenv("GPUCC_TUNE", "0", 1);
  GpuccStatus st = gpucc_model_create(plan, len, NULL, 0, 0, &m);
  if (st) fprintf(stderr, "create (rows): %s\n", gpucc_last_error());
  CHECK(st == GPUCC_OK && m);
  if (m) {
    int cls[RB] = {-1};
    CHECK(gpucc_model_last_chunks(m, cls, RB) == 1 && cls[0] == 2); /* before any run */
    for (int c = 0; c < RCLASSES; c++) CHECK(gpucc_model_class_ms(m, c) == -1);
    run_rows_everywhere(m, by_work, "rows, GPUCC_TUNE=0");
    time_after_rows(m, 3, 2);
    CHECK(gpucc_model_last_chunks(m, cls, 1) == 2 && cls[0] == 1); /* max 1: one written */
    CHECK(gpucc_model_last_chunks(m, NULL, 0) == 2);
  }
  gpucc_model_destroy(m);

  /* Timed: each class's graph has a cost, the chunks follow them, the results do not. */
  unsetenv("GPUCC_TUNE");
  m = NULL;
  CHECK(gpucc_model_create(plan, len, NULL, 0, 0, &m) == GPUCC_OK && m);
  if (m) {
    for (int c = 0; c < RCLASSES; c++) {
      float ms = gpucc_model_class_ms(m, c);
      if (!(ms > 0)) fprintf(stderr, "class %d measured %g ms\n", c, ms);
      CHECK(ms > 0);
    }
    CHECK(gpucc_model_class_ms(m, RCLASSES) == -1 && gpucc_model_class_ms(m, -1) == -1);
    run_rows_everywhere(m, NULL, "rows, timed");
    time_after_rows(m, 3, -1);
  }
  gpucc_model_destroy(m);

  /* Debug mode: no graphs, so nothing timed; the chunks of padded work, step by step. */
  setenv("GPUCC_RUNTIME_DEBUG", "1", 1);
  m = NULL;
  CHECK(gpucc_model_create(plan, len, NULL, 0, 0, &m) == GPUCC_OK && m);
  if (m) {
    CHECK(gpucc_model_class_ms(m, 0) == -1);
    run_rows_everywhere(m, by_work, "rows (GPUCC_RUNTIME_DEBUG)");
    time_after_rows(m, 3, 2);
  }
  gpucc_model_destroy(m);
  unsetenv("GPUCC_RUNTIME_DEBUG");
  free(plan);
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
  plan = make_plan(MOD_SEVERAL, "k_missing", 4096, &len);
  st = gpucc_model_create(plan, len, weights_b, sizeof weights_b, 0, &m);
  CHECK(st == GPUCC_ERR_BAD_PLAN && m == NULL);
  CHECK(strstr(gpucc_last_error(), "step 0 (kernel 'k_missing'): none of the 3 modules has a "
                                   "kernel named 'k_missing'") != NULL);
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
    test_shape_classes();
    test_rows();
    test_errors();
    test_device_properties();
  }
  if (failures) fprintf(stderr, "test_runtime: %d checks failed\n", failures);
  else printf("test_runtime: all passed on sm_%d%d\n", cc_major, cc_minor);
  return failures ? 1 : 0;
}
