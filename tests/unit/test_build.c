/* Unit tests of gpucc_build's options (compiler/build.c), which the JIT API and
 * examples/jit pass through: --precision as GpuccCompileOptions.precision. No GPU: the
 * build stops at the plan (NVRTC compiles without one). */
#include "compiler/gpucc.h"
#include "tests/unit/check.h"

#include <string.h>

static const char src[] = "graph b(%x: f32[4, 8]) {\n"
                          "  %w = const f32[8, 16] random(seed = 3, scale = 0.5)\n"
                          "  %c = const f32[16] random(seed = 4, scale = 0.5)\n"
                          "  %m = matmul(%x, %w)\n"
                          "  %h = add(%m, %c)\n"
                          "  %y = relu(%h)\n"
                          "  %v = const f32[16, 16] random(seed = 5, scale = 0.5)\n"
                          "  %o = matmul(%y, %v)\n"
                          "  return %o\n"
                          "}\n";

/* Builds src with the given options: gpucc_build's result, the diagnostic in d, the
 * weights' bytes in *weights. */
static int build(const GpuccCompileOptions *opt, Diag *d, size_t *weights) {
  Graph *g = dsl_parse("b.gir", src, strlen(src), d);
  CHECK(g != NULL);
  if (!g)
    return -1;
  GpuccCompileOptions o = *opt;
  o.no_cache = true;
  GpuccBuild out;
  int rc = gpucc_build(g, &o, &out, d);
  *weights = out.weights_len;
  gpucc_build_free(&out);
  graph_free(g);
  return rc;
}

int main(void) {
  Diag d = {0};
  size_t f32 = 0, bf16 = 0, tf32 = 0;
  CHECK(build(&(GpuccCompileOptions){0}, &d, &f32) == 0);
  d = (Diag){0};
  CHECK(build(&(GpuccCompileOptions){.precision = "tf32"}, &d, &tf32) == 0);
  d = (Diag){0};
  CHECK(build(&(GpuccCompileOptions){.precision = "bf16"}, &d, &bf16) == 0);
  /* the weights are converted once, at compile time: half the bytes (plus alignment) */
  CHECK(f32 > 0 && tf32 == f32 && bf16 < f32 * 3 / 4);

  d = (Diag){0};
  size_t w;
  CHECK(build(&(GpuccCompileOptions){.precision = "int4"}, &d, &w) == -1);
  CHECK(strstr(d.msg, "unknown precision 'int4' (known: fp32, tf32, bf16, fp16, fp8)") != NULL);
  d = (Diag){0};
  CHECK(build(&(GpuccCompileOptions){.precision = "fp16", .passes = "constfold,dce"}, &d,
              &w) == -1);
  CHECK(strstr(d.msg, "--precision=fp16 needs the precision pass, which the pass list leaves "
                      "out") != NULL);
  if (failures) fprintf(stderr, "test_build: %d checks failed\n", failures);
  return failures ? 1 : 0;
}
