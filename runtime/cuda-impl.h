/* cuda-impl.h: the CUDA driver and cuBLASLt entry points the runtime uses, as tables of
 * function pointers filled by dlopen/dlsym (driver.c). Nothing links libcuda or
 * libcublasLt: a program holding the runtime starts without them, and a model.so needs
 * nothing beyond libc until it is created.
 *
 * Members are declared with cuda.h's own names, so `cu->cuMemAlloc(...)` expands to the
 * same _v2 entry point that a direct call would (cuda.h #defines cuMemAlloc as
 * cuMemAlloc_v2), and each is looked up by that expanded name.
 */
#ifndef GPUCC_CUDA_IMPL_H
#define GPUCC_CUDA_IMPL_H

#include "runtime/runtime-impl.h"

#include <cublasLt.h>
#include <cuda.h>

#define GPUCC_CU_FUNCS(X)                                                                    \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)        \
  X(cuDeviceGetAttribute)                                                                    \
  X(cuGetErrorName) X(cuGetErrorString) X(cuDevicePrimaryCtxRetain)                          \
  X(cuDevicePrimaryCtxRelease) X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuCtxSynchronize)     \
  X(cuMemAlloc) X(cuMemFree) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemGetInfo)              \
  X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemsetD8) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)      \
  X(cuMemcpyDtoDAsync) X(cuMemcpy3DAsync) X(cuMemsetD8Async) X(cuMemsetD32Async)            \
  X(cuModuleLoadDataEx) X(cuModuleUnload)                                                    \
  X(cuModuleGetFunction) X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuStreamCreate)           \
  X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamBeginCapture) X(cuStreamEndCapture)    \
  X(cuGraphInstantiate) X(cuGraphUpload) X(cuGraphLaunch) X(cuGraphExecDestroy)              \
  X(cuGraphDestroy) X(cuGraphGetNodes) X(cuGraphNodeGetType) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)                    \
  X(cuEventSynchronize) X(cuEventElapsedTime)

#define GPUCC_LT_FUNCS(X)                                                                    \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtGetStatusString)      \
  X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) \
  X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)                               \
  X(cublasLtMatrixLayoutSetAttribute) X(cublasLtMatmulPreferenceCreate)                      \
  X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)                 \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul) X(cublasLtMatmulAlgoConfigGetAttribute)  \
  X(cublasLtMatmulAlgoConfigSetAttribute) X(cublasLtMatmulAlgoCheck)

#define GPUCC_MEMBER(f) __typeof__(&f) f;

typedef struct CuApi {
  GPUCC_CU_FUNCS(GPUCC_MEMBER)
} CuApi;

typedef struct LtApi {
  GPUCC_LT_FUNCS(GPUCC_MEMBER)
} LtApi;

/* The tables, loaded once per process (never unloaded). NULL with the reason in
 * gpucc_last_error() and *status set: GPUCC_ERR_NO_DRIVER when the library or one of its
 * functions is missing. cuInit is called by gpucc_cuda(). */
const CuApi *gpucc_cuda(GpuccStatus *status);
const LtApi *gpucc_cublaslt(GpuccStatus *status);

/* A failed CUresult as a status and message: "<what>: CUDA_ERROR_X: <description>". */
GpuccStatus gpucc_cu_fail(const CuApi *cu, CUresult r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
