/* driver.c: loading libcuda and libcublasLt at run time (see cuda-impl.h). */
#include "runtime/cuda-impl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x) /* expands cuda.h's macros first: "cuMemAlloc_v2" */

/* Looks up every name; the first missing one is the error. memcpy, because ISO C has no
 * conversion from dlsym's void * to a function pointer. */
static bool load_sym(void *lib, const char *libname, const char *name, void *fn, size_t size,
                     char *err, size_t errlen) {
  void *sym = dlsym(lib, name);
  if (!sym) {
    snprintf(err, errlen, "%s has no %s: the library is too old for this runtime", libname, name);
    return false;
  }
  memcpy(fn, &sym, size);
  return true;
}

static CuApi cu_api;
static GpuccStatus cu_status;
static char cu_error[512];
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void load_cuda(void) {
  const char *name = "libcuda.so.1";
  void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    cu_status = GPUCC_ERR_NO_DRIVER;
    snprintf(cu_error, sizeof cu_error, "no CUDA driver: cannot load %s (%s)", name, dlerror());
    return;
  }
#define LOAD(f)                                                                               \
  if (!load_sym(lib, name, STR(f), &cu_api.f, sizeof cu_api.f, cu_error, sizeof cu_error)) { \
    cu_status = GPUCC_ERR_NO_DRIVER;                                                          \
    return;                                                                                   \
  }
  GPUCC_CU_FUNCS(LOAD)
#undef LOAD
  CUresult r = cu_api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char *ename = "?", *estr = "?";
    cu_api.cuGetErrorName(r, &ename);
    cu_api.cuGetErrorString(r, &estr);
    cu_status = r == CUDA_ERROR_NO_DEVICE ? GPUCC_ERR_NO_DEVICE : GPUCC_ERR_NO_DRIVER;
    snprintf(cu_error, sizeof cu_error, "%s: cuInit failed: %s: %s",
             r == CUDA_ERROR_NO_DEVICE ? "no CUDA device" : "CUDA driver unusable", ename, estr);
  }
}

const CuApi *gpucc_cuda(GpuccStatus *status) {
  pthread_once(&cu_once, load_cuda);
  *status = cu_status;
  if (cu_status) {
    gpucc_fail(cu_status, "%s", cu_error);
    return NULL;
  }
  return &cu_api;
}

static LtApi lt_api;
static GpuccStatus lt_status;
static char lt_error[512];
static pthread_once_t lt_once = PTHREAD_ONCE_INIT;

static void load_cublaslt(void) {
  static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so"};
  void *lib = NULL;
  const char *name = NULL;
  char why[256] = "";
  for (size_t i = 0; i < sizeof names / sizeof *names && !lib; i++) {
    name = names[i];
    if (!(lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) && !why[0])
      snprintf(why, sizeof why, "%s", dlerror());
  }
  if (!lib) {
    lt_status = GPUCC_ERR_NO_DRIVER;
    snprintf(lt_error, sizeof lt_error,
             "cannot load cuBLASLt (libcublasLt.so.13 or libcublasLt.so): %s; the model has "
             "GEMM steps and needs it on the library path", why);
    return;
  }
#define LOAD(f)                                                                               \
  if (!load_sym(lib, name, STR(f), &lt_api.f, sizeof lt_api.f, lt_error, sizeof lt_error)) { \
    lt_status = GPUCC_ERR_NO_DRIVER;                                                          \
    return;                                                                                   \
  }
  GPUCC_LT_FUNCS(LOAD)
#undef LOAD
}

const LtApi *gpucc_cublaslt(GpuccStatus *status) {
  pthread_once(&lt_once, load_cublaslt);
  *status = lt_status;
  if (lt_status) {
    gpucc_fail(lt_status, "%s", lt_error);
    return NULL;
  }
  return &lt_api;
}

GpuccStatus gpucc_cu_fail(const CuApi *cu, CUresult r, const char *fmt, ...) {
  char what[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  const char *ename = "?", *estr = "?";
  cu->cuGetErrorName(r, &ename);
  cu->cuGetErrorString(r, &estr);
  GpuccStatus s = r == CUDA_ERROR_OUT_OF_MEMORY ? GPUCC_ERR_OUT_OF_MEMORY
                  : r == CUDA_ERROR_NO_DEVICE   ? GPUCC_ERR_NO_DEVICE
                                                : GPUCC_ERR_CUDA;
  return gpucc_fail(s, "%s: %s: %s", what, ename, estr);
}
