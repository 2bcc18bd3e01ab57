/* jit.c: the JIT half of gpucc.h: a graph, DSL text or ONNX bytes compiled in-process and
 * created on a device as the runtime's GpuccModel (the same object a model.so loads). */
#include "compiler/gpucc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The runtime's message of its last failure, as this layer's Diag. */
static GpuccStatus runtime_error(GpuccStatus st, Diag *d) {
  diag_error(d, (SrcLoc){0}, "%s", gpucc_last_error());
  return st;
}

GpuccStatus gpucc_device_arch(int device, char *arch, size_t n, Diag *d) {
  int major = 0, minor = 0;
  GpuccStatus st = gpucc_device_compute_capability(device, &major, &minor);
  if (st)
    return runtime_error(st, d);
  int cc = major * 10 + minor;
  if (cc < 80) {
    diag_error(d, (SrcLoc){0},
               "CUDA device %d has compute capability %d.%d; gpucc targets 8.0 and later", device,
               major, minor);
    return GPUCC_ERR_NO_DEVICE;
  }
  /* A newer GPU than sm_90 runs the compute_90 PTX the driver JIT-compiles. */
  snprintf(arch, n, "%s", cc >= 90 ? "sm_90" : cc >= 89 ? "sm_89" : cc >= 86 ? "sm_86" : "sm_80");
  return GPUCC_OK;
}

/* The options with their arch: the device's own unless opt names one. Asking the device
 * first also means no compile for a machine without one. */
static GpuccStatus with_arch(const GpuccCompileOptions *opt, int device, GpuccCompileOptions *o,
                             char *arch, size_t n, Diag *d) {
  *o = opt ? *opt : (GpuccCompileOptions){0};
  if (o->arch)
    return GPUCC_OK;
  o->arch = arch;
  return gpucc_device_arch(device, arch, n, d);
}

/* The built plan and weights as a model on device (b freed). */
static GpuccStatus create(GpuccBuild *b, int device, GpuccModel **out, Diag *d) {
  GpuccStatus st = gpucc_model_create(b->plan, b->plan_len, b->weights, b->weights_len, device, out);
  gpucc_build_free(b);
  return st ? runtime_error(st, d) : GPUCC_OK;
}

GpuccStatus gpucc_compile_graph(Graph *g, const GpuccCompileOptions *opt, int device,
                                GpuccModel **out, Diag *d) {
  *out = NULL;
  GpuccCompileOptions o;
  char arch[16];
  GpuccStatus st = with_arch(opt, device, &o, arch, sizeof arch, d);
  if (st)
    return st;
  GpuccBuild b;
  if (gpucc_build(g, &o, &b, d))
    return GPUCC_ERR_INVALID_ARGUMENT;
  return create(&b, device, out, d);
}

GpuccStatus gpucc_compile_dsl(const char *text, size_t len, const char *name,
                              const GpuccCompileOptions *opt, int device, GpuccModel **out,
                              Diag *d) {
  *out = NULL;
  Graph *g = dsl_parse(name ? name : "<memory>", text, len, d);
  if (!g)
    return GPUCC_ERR_INVALID_ARGUMENT;
  GpuccStatus st = gpucc_compile_graph(g, opt, device, out, d);
  graph_free(g);
  return st;
}

/* ONNX binds dims at load (shapes of the nodes depend on them): gpucc_build_onnx. */
GpuccStatus gpucc_compile_onnx(const void *bytes, size_t len, const char *name,
                               const GpuccCompileOptions *opt, int device, GpuccModel **out,
                               Diag *d) {
  *out = NULL;
  GpuccCompileOptions o;
  char arch[16];
  GpuccStatus st = with_arch(opt, device, &o, arch, sizeof arch, d);
  if (st)
    return st;
  GpuccBuild b;
  if (gpucc_build_onnx(bytes, len, name, &o, &b, d))
    return GPUCC_ERR_INVALID_ARGUMENT;
  return create(&b, device, out, d);
}
