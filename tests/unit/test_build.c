/* Unit tests of gpucc_build's options (compiler/build.c), which the JIT API and
 * examples/jit pass through: --precision as GpuccCompileOptions.precision, the target as
 * arch or target, and a device's figures over a table entry (compiler/jit.c). No GPU: the
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

/* The target gpucc_build compiled for: arch's table entry, or the caller's target (whose
 * arch wins), checked before anything is compiled. */
static void test_target(void) {
  static const struct {
    const char *arch;
    int sms; /* 0: the table's */
    const char *want_arch;
    int want_sms;
  } cases[] = {{NULL, 0, "sm_90", 132}, {"sm_86", 0, "sm_86", 72}, {"sm_80", 50, "sm_80", 50}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    Diag d = {0};
    Graph *g = dsl_parse("b.gir", src, strlen(src), &d);
    CHECK(g != NULL);
    if (!g)
      return;
    Target t;
    CHECK(target_for_arch(cases[i].arch, &t, &d) == 0);
    t.sms = cases[i].sms ? cases[i].sms : t.sms;
    GpuccCompileOptions o = {.no_cache = true};
    if (cases[i].sms) {
      o.target = &t;
      o.arch = "sm_90a"; /* ignored beside a target */
    } else {
      o.arch = cases[i].arch;
    }
    GpuccBuild out;
    CHECK(gpucc_build(g, &o, &out, &d) == 0);
    CHECK(!strcmp(out.arch, cases[i].want_arch) && !strcmp(out.target.arch, cases[i].want_arch));
    CHECK(out.target.sms == cases[i].want_sms);
    gpucc_build_free(&out);
    graph_free(g);
  }
  Diag d = {0};
  Graph *g = dsl_parse("b.gir", src, strlen(src), &d);
  Target t = *target_default();
  t.block = 48; /* not whole warps */
  GpuccBuild out;
  CHECK(gpucc_build(g, &(GpuccCompileOptions){.target = &t, .no_cache = true}, &out, &d) == -1);
  CHECK(strstr(d.msg, "target sm_90: block is out of range") != NULL);
  graph_free(g);
}

/* A device's figures over its arch's entry: an H100 PCIe's 114 SMs and name; a figure
 * the driver gave as 0 keeps the table's; no cluster launch, no clusters. */
static void test_device_over_table(void) {
  Target t;
  Diag d = {0};
  CHECK(target_for_arch("sm_90", &t, &d) == 0);
  GpuccDeviceProperties p = {.name = "NVIDIA H100 PCIe", .cc_major = 9, .sms = 114,
                             .smem_block = 48 << 10, .smem_block_optin = 227 << 10,
                             .smem_sm = 228 << 10, .regs_sm = 64 << 10, .threads_block = 1024,
                             .threads_sm = 2048, .blocks_sm = 32, .l2_bytes = 50 << 20,
                             .cluster_launch = 1};
  gpucc_target_over_device(&t, &p);
  CHECK(t.sms == 114 && !strcmp(t.gpu, "NVIDIA H100 PCIe") && !strcmp(t.source, "device"));
  CHECK(!strcmp(t.arch, "sm_90") && t.clusters && t.cluster_max == 8);
  CHECK(target_check(&t, &d) == 0);
  char line[256];
  target_describe(&t, line, sizeof line);
  CHECK(!strcmp(line, "sm_90, 114 SMs, 227 KiB shared memory a block, clusters of 8 "
                      "(device: NVIDIA H100 PCIe)"));
  CHECK(target_for_arch("sm_90", &t, &d) == 0);
  gpucc_target_over_device(&t, &(GpuccDeviceProperties){.name = "odd", .sms = 16});
  CHECK(t.sms == 16 && t.smem_block_optin == 227 << 10 && t.l2_bytes == 50 << 20);
  CHECK(!t.clusters && t.cluster_max == 1);
}

int main(void) {
  test_target();
  test_device_over_table();
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
