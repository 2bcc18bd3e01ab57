/* error.c: status names and the thread-local message of the last failure. Every public
 * function that fails goes through gpucc_fail, so the message is always the failing
 * call's own. */
#include "runtime/runtime-impl.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[2048];

GpuccStatus gpucc_vfail(GpuccStatus s, const char *fmt, va_list ap) {
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  return s;
}

GpuccStatus gpucc_fail(GpuccStatus s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gpucc_vfail(s, fmt, ap);
  va_end(ap);
  return s;
}

const char *gpucc_last_error(void) { return last_error; }

const char *gpucc_status_name(GpuccStatus s) {
  switch (s) {
  case GPUCC_OK: return "ok";
  case GPUCC_ERR_INVALID_ARGUMENT: return "invalid argument";
  case GPUCC_ERR_BAD_PLAN: return "bad plan";
  case GPUCC_ERR_NO_DRIVER: return "no CUDA driver";
  case GPUCC_ERR_NO_DEVICE: return "no CUDA device";
  case GPUCC_ERR_OUT_OF_MEMORY: return "out of memory";
  case GPUCC_ERR_CUDA: return "CUDA error";
  case GPUCC_ERR_CUBLAS: return "cuBLASLt error";
  case GPUCC_ERR_IO: return "I/O error";
  }
  return "unknown status";
}

uint64_t gpucc_fnv1a64(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}
