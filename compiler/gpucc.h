/* gpucc.h: the one public header of gpucc's compiler layer: the JIT C API.
 *
 * A graph (ONNX bytes, DSL text, or a Graph made with the builder of ir/ir.h) is compiled
 * in-process into the runtime's model object, the same GpuccModel that a model.so's
 * gpucc_model_load gives, run with the same calls (runtime/runtime.h):
 *
 *   Diag d = {0};
 *   GpuccModel *m;
 *   if (gpucc_compile_dsl(text, len, "mlp.gir", NULL, 0, &m, &d)) { puts(d.msg); ... }
 *   gpucc_model_run_host(m, inputs, outputs, NULL);
 *   gpucc_model_destroy(m);
 *
 * Compiling is one pipeline, the same the `gpucc` command runs (compiler/build.h): bind
 * symbolic dims, run the passes, codegen, plan memory, NVRTC (cubin for the target plus
 * PTX), write the plan. gpucc_build stops there and hands back the plan bytes and the
 * weights blob: for the same graph and options, the bytes `gpucc X -o model.so` appends
 * to the runtime stub.
 *
 * Errors: compile errors come back in the Diag, runtime errors (no device, out of GPU
 * memory) too, copied from gpucc_last_error(); nothing prints or exits.
 */
#ifndef GPUCC_GPUCC_H
#define GPUCC_GPUCC_H

#include "frontends/frontends.h"
#include "ir/ir.h"
#include "runtime/runtime.h"

typedef struct GpuccCompileOptions {
  /* sm_80, sm_86, sm_89, sm_90 or sm_90a. NULL: the device's own (the nearest of those at
   * or below its compute capability) when compiling for a device, else sm_90. */
  const char *arch;
  /* The GPU compiled for, every machine fact codegen and the passes use (ir.h); arch is
   * then ignored. NULL: arch's entry of the target table for gpucc_build, the device's
   * figures over it for gpucc_compile_* (gpucc_device_target). */
  const Target *target;
  /* Symbolic dims to bind (`--dim N=8`), before the passes (an ONNX model's: at load);
   * every symbol left is an error at codegen. */
  const char *const *dim_names;
  const int64_t *dim_sizes;
  int ndims;
  /* Ranges of symbolic dims (`--dim N=1..64`, docs/dynamic-shapes.md), set on the graph
   * before dims are bound: a range the graph has (a DSL dims(...) clause) is replaced.
   * A model.so for a range of sizes is not built yet: a ranged dim left unbound is an
   * error at codegen that names its range. */
  const DimRange *ranges;
  int nranges;
  /* "constfold,dce"; "" runs none; NULL the default pipeline. */
  const char *passes;
  /* With passes NULL: the default pipeline without the passes that only serve fusion
   * (`--no-fuse`: one kernel or GEMM per node). */
  bool no_fuse;
  /* "fp32" (also NULL), "tf32", "bf16", "fp16" or "fp8": what the precision pass lowers
   * f32 math to (`--precision`; passes/precision.c). Not fp32 needs that pass in `passes`
   * (fp8 the quantize pass after it too). */
  const char *precision;
  /* fp8: a calibration value for each graph input, by name (`--calibrate NAME=FILE.npy`;
   * passes/quantize.c). Read during the call only. */
  const char *const *calib_names;
  Tensor *const *calib_inputs;
  int ncalib;
  /* ONNX only: --shape, --const, max weight bytes, base_dir (its dims are ignored: use
   * dim_names). NULL: none. */
  const OnnxOptions *onnx;
  /* The variants a group carries at most (`--variants=N`; codegen.h's ChoiceStep), which
   * the runtime times at create: 1 gives only each group's default, no choice (the
   * shortest NVRTC time); 0 all of codegen's families. */
  int variants;
  bool no_cache;         /* NVRTC's on-disk cache: neither read nor write */
  const char *cache_dir; /* NULL: compiler/nvrtc.h's default */
  /* What the pass manager shows (passes/passes.h), each NULL for nothing: the IR before
   * and after every pass (`--print-after-all`), DIR/00-input.gir, DIR/01-<pass>.gir, ...
   * (`--dump-ir=DIR`), and a line per pass on what it did (`-v`). */
  FILE *print_after_all;
  const char *dump_dir;
  FILE *report;
  /* How a compile goes, for a progress display (`gpucc`'s line on stderr): what it is
   * doing ("passes", "codegen", "classes", "nvrtc") and how many of total steps of that
   * are done, called as each starts (done 0) and as steps finish; one call at a time,
   * perhaps from a thread of the compile's. NULL: none. */
  void (*progress)(void *arg, const char *what, int done, int total);
  void *progress_arg;
} GpuccCompileOptions;

/* What gpucc_build makes: the plan's byte form and the weights blob, both malloc'd. */
typedef struct GpuccBuild {
  void *plan;
  size_t plan_len;
  void *weights;
  size_t weights_len;
  char arch[16];        /* the target it was compiled for */
  Target target;        /* all of it (ir.h) */
  int nkernels;         /* launches per inference: kernel and GEMM steps */
  int nsteps;           /* every step of the plan, copies included */
  uint64_t arena_bytes; /* device memory for inputs, outputs and intermediates */
  uint64_t arena_lower_bound; /* no plan of this schedule needs less (build.h) */
  uint64_t arena_naive_bytes; /* every buffer a place of its own */
  int in_place;               /* kernels that write over a dying input (build.h) */
} GpuccBuild;

/* The workspace every plan with GEMMs gets for cuBLASLt. */
#define GPUCC_GEMM_WORKSPACE (32u << 20)

/* Compiles g (modified in place: dims bound, passes run) into *out. 0, or -1 with d set
 * (and *out empty). */
int gpucc_build(Graph *g, const GpuccCompileOptions *opt, GpuccBuild *out, Diag *d);
void gpucc_build_free(GpuccBuild *b);
/* The same for an ONNX model in memory, as gpucc_compile_onnx compiles it: opt's dims
 * are bound by the loader (opt->onnx: its other options; base_dir, the folder of any
 * external data). name: the model in messages ("<memory>" when NULL). */
int gpucc_build_onnx(const void *bytes, size_t len, const char *name,
                     const GpuccCompileOptions *opt, GpuccBuild *out, Diag *d);

/* The arch gpucc_build would pick for device: "sm_90" for 9.0, the highest target at or
 * below the device's compute capability. NO_DRIVER/NO_DEVICE (message in d) when there is
 * no such device. */
GpuccStatus gpucc_device_arch(int device, char *arch, size_t n, Diag *d);
/* The target for compiling for device: arch's table entry (NULL: gpucc_device_arch's),
 * with the device's own SM count, shared memory, registers, L2 size and name over the
 * table's, and no clusters where the device cannot launch them. */
GpuccStatus gpucc_device_target(int device, const char *arch, Target *out, Diag *d);
/* What gpucc_device_target does once it has the device's properties p: t, a table entry,
 * gets p's figures (those p has: a zero keeps t's), p's name, source "device", and no
 * clusters unless p can launch them. */
void gpucc_target_over_device(Target *t, const GpuccDeviceProperties *p);

/* Compile and create on CUDA device `device`. GPUCC_OK, or a status with d set: a compile
 * error is GPUCC_ERR_INVALID_ARGUMENT; the runtime's own statuses pass through
 * (GPUCC_ERR_NO_DRIVER and GPUCC_ERR_NO_DEVICE before anything is compiled). opt may be
 * NULL. compile_graph modifies g like gpucc_build. */
GpuccStatus gpucc_compile_graph(Graph *g, const GpuccCompileOptions *opt, int device,
                                GpuccModel **out, Diag *d);
/* name: the file name in messages and the folder of relative load(...) paths. */
GpuccStatus gpucc_compile_dsl(const char *text, size_t len, const char *name,
                              const GpuccCompileOptions *opt, int device, GpuccModel **out,
                              Diag *d);
GpuccStatus gpucc_compile_onnx(const void *bytes, size_t len, const char *name,
                               const GpuccCompileOptions *opt, int device, GpuccModel **out,
                               Diag *d);

/* The JIT API for bindings that cannot fill GpuccCompileOptions (the Python package's
 * ctypes): a model's bytes, DSL text or ONNX told by content as `gpucc` tells a file's (by
 * name's .onnx where the bytes do not say), and the options as `gpucc`'s flags spell
 * them, without the dashes: "precision=bf16", "arch=sm_90", "passes=constfold,dce",
 * "dim=batch=8" or "dim=batch=1..64" (one each), "variants=1", "cache-dir=DIR",
 * "base-dir=DIR" (an ONNX model's external data), "no-fuse", "no-cache". Statuses as
 * gpucc_compile_onnx's; an unknown or malformed flag is GPUCC_ERR_INVALID_ARGUMENT. */
GpuccStatus gpucc_compile_flags(const void *bytes, size_t len, const char *name,
                                const char *const *flags, int nflags, int device,
                                GpuccModel **out, Diag *d);

#endif
