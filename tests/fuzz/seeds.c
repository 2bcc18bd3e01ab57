/* seeds.c: writes seed inputs for the plan and trailer fuzzers, made with the runtime's
 * own builder and model.so writer so that they follow the formats when those change.
 *
 *   fuzz_seeds DIR   writes DIR/plan/<name>.plan and DIR/trailer/<name>.so (a 64-byte
 *                    stand-in for the ELF stub, the plan, the weights and the trailer;
 *                    <name>-ext.so names its weights file instead of carrying them)
 *
 * The plans between them hold every step kind, every epilogue and both argument kinds,
 * and one is ranged: symbols (one of them rows), axes and shape classes. */
#include "runtime/runtime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void die(const char *what) {
  fprintf(stderr, "fuzz_seeds: %s: %s\n", what, gpucc_last_error());
  exit(1);
}

#define OK(call)                                                                   \
  do {                                                                             \
    if ((call) != GPUCC_OK)                                                        \
      die(#call);                                                                  \
  } while (0)

static GpuccPlan *plan_every_step(void) {
  static const unsigned char cubin[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0xff};
  GpuccPlan *p = gpucc_plan_new(4096, 1024, 1 << 20);
  if (!p) die("gpucc_plan_new");
  OK(gpucc_plan_set_module(p, cubin, sizeof cubin, ".version 8.0\n.target sm_90\n"));
  int64_t xdims[] = {2, 3}, ydims[] = {2, 2, 4};
  OK(gpucc_plan_add_input(p, "x", GPUCC_DT_F32, 2, xdims, 0));
  OK(gpucc_plan_add_input(p, "ids", GPUCC_DT_I64, 0, NULL, 1024));
  OK(gpucc_plan_add_output(p, "y", GPUCC_DT_F32, 3, ydims, 512));
  GpuccArg args[] = {gpucc_ptr_arg(gpucc_arena_ptr(0)), gpucc_ptr_arg(gpucc_weights_ptr(1024)),
                     gpucc_scalar_arg(0x3ff0000000000000ull)};
  uint32_t grid[3] = {7, 2, 1}, block[3] = {256, 1, 1};
  OK(gpucc_plan_add_kernel(p, "k0_scale", grid, block, 64, args, 3));
  GpuccGemm g = {0};
  g.a = gpucc_weights_ptr(64);
  g.b = gpucc_arena_ptr(256);
  g.c = g.d = gpucc_arena_ptr(512);
  g.a_type = g.b_type = g.cd_type = GPUCC_DT_F32;
  g.compute = GPUCC_COMPUTE_32F;
  g.m = 4, g.n = 2, g.k = 3;
  g.lda = 4, g.ldb = 3, g.ldc = 4, g.ldd = 4;
  g.batch = 2, g.stride_a = 0, g.stride_b = 6, g.stride_c = 8, g.stride_d = 8;
  g.alpha = 1.5, g.beta = -0.25;
  g.epilogue = GPUCC_EPILOGUE_GELU_BIAS, g.bias = gpucc_weights_ptr(128);
  OK(gpucc_plan_add_gemm(p, &g));
  OK(gpucc_plan_add_copy(p, gpucc_arena_ptr(2048), gpucc_weights_ptr(0), 128));
  OK(gpucc_plan_add_memset(p, gpucc_arena_ptr(3000), 96, 0xab));
  return p;
}

/* A half-precision linear layer with a ReLU epilogue and a residual, PTX only. */
static GpuccPlan *plan_gemm(void) {
  GpuccPlan *p = gpucc_plan_new(1 << 16, 8192, 1 << 20);
  if (!p) die("gpucc_plan_new");
  OK(gpucc_plan_set_module(p, NULL, 0, ".version 8.0\n.target sm_80\n"));
  int64_t dims[] = {16, 64};
  OK(gpucc_plan_add_input(p, "x", GPUCC_DT_F16, 2, dims, 0));
  OK(gpucc_plan_add_output(p, "y", GPUCC_DT_F16, 2, dims, 4096));
  GpuccGemm g = {0};
  g.a = gpucc_weights_ptr(0);
  g.b = gpucc_arena_ptr(0);
  g.c = gpucc_arena_ptr(0);
  g.d = gpucc_arena_ptr(4096);
  g.a_type = g.b_type = g.cd_type = GPUCC_DT_F16;
  g.compute = GPUCC_COMPUTE_32F;
  g.m = 64, g.n = 16, g.k = 64;
  g.lda = 64, g.ldb = 64, g.ldc = 64, g.ldd = 64;
  g.batch = 1;
  g.alpha = 1, g.beta = 1;
  g.epilogue = GPUCC_EPILOGUE_RELU_BIAS, g.bias = gpucc_weights_ptr(8192 - 128);
  OK(gpucc_plan_add_gemm(p, &g));
  return p;
}

/* The least a plan can be: an output copied from the weights. */
static GpuccPlan *plan_copy(void) {
  GpuccPlan *p = gpucc_plan_new(256, 16, 0);
  if (!p) die("gpucc_plan_new");
  int64_t dims[] = {4};
  OK(gpucc_plan_add_output(p, "c", GPUCC_DT_F32, 1, dims, 0));
  OK(gpucc_plan_add_copy(p, gpucc_arena_ptr(0), gpucc_weights_ptr(0), 16));
  return p;
}

/* A ranged plan: batch = 1..4 (rows) and seq = 1, 8..16; ids i64[batch, seq] in,
 * y f32[batch, seq] out; classes (1, 1), reading only the seq size, and (4, 16). */
static GpuccPlan *plan_ranged(void) {
  GpuccPlan *p = gpucc_plan_new(2048, 0, 0);
  if (!p) die("gpucc_plan_new");
  OK(gpucc_plan_set_module(p, NULL, 0, ".version 8.0\n.target sm_90\n"));
  int64_t dims[] = {4, 16};
  OK(gpucc_plan_add_input(p, "ids", GPUCC_DT_I64, 2, dims, 0));
  OK(gpucc_plan_add_output(p, "y", GPUCC_DT_F32, 2, dims, 0));
  int64_t blo[] = {1}, bhi[] = {4}, slo[] = {1, 8}, shi[] = {1, 16};
  OK(gpucc_plan_add_symbol(p, "batch", 1, blo, bhi));
  OK(gpucc_plan_add_symbol(p, "seq", 2, slo, shi));
  OK(gpucc_plan_set_symbol_flags(p, 0, GPUCC_SYMBOL_ROWS));
  for (int out = 0; out < 2; out++)
    for (int axis = 0; axis < 2; axis++) OK(gpucc_plan_set_axis_symbol(p, out, 0, axis, axis));
  int64_t b0[] = {1, 1}, b1[] = {4, 16};
  uint64_t in0[] = {0}, out0[] = {256}, size0[] = {GPUCC_NO_OFFSET, 512};
  uint64_t in1[] = {0}, out1[] = {512}, size1[] = {768, 776};
  uint32_t grid[3] = {1, 1, 1}, block[3] = {64, 1, 1};
  GpuccArg args[] = {gpucc_ptr_arg(gpucc_arena_ptr(0)), gpucc_ptr_arg(gpucc_arena_ptr(256)),
                     gpucc_ptr_arg(gpucc_arena_ptr(512))};
  OK(gpucc_plan_add_class(p, b0, 1024, in0, out0, size0));
  OK(gpucc_plan_add_kernel(p, "k0_embed", grid, block, 0, args, 3));
  OK(gpucc_plan_add_class(p, b1, 2048, in1, out1, size1));
  OK(gpucc_plan_add_kernel(p, "k0_embed", grid, block, 0, args, 3));
  OK(gpucc_plan_add_memset(p, gpucc_arena_ptr(512), 256, 0));
  return p;
}

static void write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
    fprintf(stderr, "fuzz_seeds: cannot write %s: %s\n", path, strerror(errno));
    exit(1);
  }
}

static void make_dir(const char *path) {
  if (mkdir(path, 0755) && errno != EEXIST) {
    fprintf(stderr, "fuzz_seeds: cannot make %s: %s\n", path, strerror(errno));
    exit(1);
  }
}

static void write_seeds(const char *dir, const char *name, GpuccPlan *p) {
  void *bytes;
  size_t len;
  OK(gpucc_plan_serialize(p, &bytes, &len));
  char path[4096];
  snprintf(path, sizeof path, "%s/plan/%s.plan", dir, name);
  write_file(path, bytes, len);

  unsigned char stub[64] = {0x7f, 'E', 'L', 'F'};
  size_t wlen = (size_t)p->weights_bytes;
  unsigned char *weights = malloc(wlen ? wlen : 1);
  if (!weights) die("malloc");
  for (size_t i = 0; i < wlen; i++)
    weights[i] = (unsigned char)(i * 37);
  char err[512];
  snprintf(path, sizeof path, "%s/trailer/%s.so", dir, name);
  if (gpucc_write_model_so(stub, sizeof stub, path, bytes, len, weights, wlen, NULL, SIZE_MAX, err,
                           sizeof err))
    die(err);
  /* The same with the weights in a file beside it, which the harness never opens. */
  snprintf(path, sizeof path, "%s/trailer/%s-ext.so", dir, name);
  if (gpucc_write_model_so(stub, sizeof stub, path, bytes, len, weights, wlen, NULL, 0, err,
                           sizeof err))
    die(err);
  snprintf(path, sizeof path, "%s/trailer/%s-ext.so.weights", dir, name);
  unlink(path);
  free(weights);
  free(bytes);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  char path[4096];
  make_dir(argv[1]);
  snprintf(path, sizeof path, "%s/plan", argv[1]);
  make_dir(path);
  snprintf(path, sizeof path, "%s/trailer", argv[1]);
  make_dir(path);
  struct {
    const char *name;
    GpuccPlan *(*make)(void);
  } plans[] = {{"every_step", plan_every_step}, {"gemm", plan_gemm}, {"copy", plan_copy},
               {"ranged", plan_ranged}};
  for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) {
    GpuccPlan *p = plans[i].make();
    write_seeds(argv[1], plans[i].name, p);
    gpucc_plan_free(p);
  }
  return 0;
}
