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

GpuccStatus gpucc_compile_graph(Graph *g, const GpuccCompileOptions *opt, int device,
                                GpuccModel **out, Diag *d) {
  *out = NULL;
  GpuccCompileOptions o = {0};
  if (opt)
    o = *opt;
  char arch[16];
  if (!o.arch) {
    /* Asking the device first also means no compile for a machine without one. */
    GpuccStatus st = gpucc_device_arch(device, arch, sizeof arch, d);
    if (st)
      return st;
    o.arch = arch;
  }
  GpuccBuild b;
  if (gpucc_build(g, &o, &b, d))
    return GPUCC_ERR_INVALID_ARGUMENT;
  GpuccStatus st = gpucc_model_create(b.plan, b.plan_len, b.weights, b.weights_len, device, out);
  gpucc_build_free(&b);
  return st ? runtime_error(st, d) : GPUCC_OK;
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

/* ONNX binds dims at load (shapes of the nodes depend on them), so the compile options'
 * dims become the loader's and are not bound again. */
GpuccStatus gpucc_compile_onnx(const void *bytes, size_t len, const char *name,
                               const GpuccCompileOptions *opt, int device, GpuccModel **out,
                               Diag *d) {
  *out = NULL;
  GpuccCompileOptions o = {0};
  if (opt)
    o = *opt;
  OnnxOptions lo = {0};
  if (o.onnx)
    lo = *o.onnx;
  OnnxBinding *dims = calloc((size_t)o.ndims + 1, sizeof *dims);
  char (*vals)[24] = calloc((size_t)o.ndims + 1, sizeof *vals);
  if (!dims || !vals) {
    free(dims);
    free(vals);
    diag_error(d, (SrcLoc){0}, "out of memory");
    return GPUCC_ERR_OUT_OF_MEMORY;
  }
  for (int i = 0; i < o.ndims; i++) {
    snprintf(vals[i], sizeof vals[i], "%lld", (long long)o.dim_sizes[i]);
    dims[i] = (OnnxBinding){o.dim_names[i], vals[i]};
  }
  lo.dims = dims;
  lo.ndims = o.ndims;
  o.ndims = 0;
  Graph *g = onnx_load_bytes(bytes, len, name, &lo, d);
  free(dims);
  free(vals);
  if (!g)
    return GPUCC_ERR_INVALID_ARGUMENT;
  GpuccStatus st = gpucc_compile_graph(g, &o, device, out, d);
  graph_free(g);
  return st;
}
