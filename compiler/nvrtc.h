/* nvrtc.h: compiling generated CUDA C with NVRTC (internal to compiler/).
 *
 * One translation unit becomes a cubin for the target architecture and PTX for the
 * virtual architecture under it, which the driver can JIT for newer GPUs. Results are
 * cached on disk by a hash of the source, the options and NVRTC's version. Errors come
 * back in a Diag holding NVRTC's log and the generated source lines around each error;
 * nothing is printed. */
#ifndef GPUCC_NVRTC_H
#define GPUCC_NVRTC_H

#include "ir/ir.h"

#define NVRTC_DEFAULT_ARCH TARGET_DEFAULT_ARCH

typedef struct NvrtcOptions {
  const char *arch;      /* sm_80, sm_86, sm_89, sm_90 or sm_90a; NULL: sm_90 */
  bool no_cache;         /* neither read nor write the cache */
  const char *cache_dir; /* NULL: $GPUCC_CACHE_DIR, else $XDG_CACHE_HOME/gpucc, else
                          * ~/.cache/gpucc */
  /* nvrtc_compile_units: called ("nvrtc", units done, units) as each unit is compiled,
   * one call at a time (GpuccCompileOptions.progress). NULL: none. */
  void (*progress)(void *arg, const char *what, int done, int total);
  void *progress_arg;
} NvrtcOptions;

typedef struct NvrtcOutput {
  void *cubin; /* malloc'd */
  size_t cubin_size;
  char *ptx; /* malloc'd, NUL-terminated; ptx_size counts the NUL */
  size_t ptx_size;
  bool from_cache;
} NvrtcOutput;

/* 0 when arch is one gpucc targets (an entry of the target table); else -1 with the list
 * of them in d. */
int nvrtc_check_arch(const char *arch, Diag *d);
/* Compiles source (named `name` in messages, e.g. "model.cu"). 0, or -1 with d set. */
int nvrtc_compile(const char *source, const char *name, const NvrtcOptions *opt,
                  NvrtcOutput *out, Diag *d);
/* Compiles n translation units (named NAME.0.cu, NAME.1.cu, ... in messages) into
 * outs[0..n), as nvrtc_compile compiles each, on as many threads as there are CPUs
 * online: the outputs do not depend on the threads. 0, or -1 with the first failing
 * unit's error in d (and every out empty). */
int nvrtc_compile_units(const char *const *sources, int n, const char *name,
                        const NvrtcOptions *opt, NvrtcOutput *outs, Diag *d);
void nvrtc_output_free(NvrtcOutput *o);

#endif
