/* libcall_overhead.so: gpucc_model_run called from C in a loop, the baseline that
 * bench/binding_overhead.py holds the Python binding's calls to, in the same process, on
 * the same model, buffers and stream, taking turns with them.
 *
 *   double call_overhead_burst(run, model, inputs, outputs, stream, calls)
 *
 * calls `run` (a model's gpucc_model_run, as the binding's ctypes found it) `calls` times
 * and returns the host time per call in microseconds, or -1 if a call failed. Nothing
 * is waited for: the caller synchronizes after the burst, outside the timing.
 */
#include "runtime/runtime.h"

#include <time.h>

typedef GpuccStatus (*RunFn)(GpuccModel *, const void *const *, void *const *, void *);

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

__attribute__((visibility("default"))) double call_overhead_burst(void *run, GpuccModel *m,
                                                                  const void *const *inputs,
                                                                  void *const *outputs,
                                                                  void *stream, int calls) {
  RunFn fn;
  *(void **)&fn = run; /* ISO C has no cast from void * to a function pointer */
  double t0 = now_us();
  for (int c = 0; c < calls; c++)
    if (fn(m, inputs, outputs, stream))
      return -1;
  return (now_us() - t0) / (calls > 0 ? calls : 1);
}
