/* runtime.c: creating and running a model (see the model section of runtime.h).
 *
 * Everything that can be decided or allocated is done in gpucc_model_create, so that a
 * run is a handful of async calls on the caller's stream. A fixed plan is run as one
 * shape class without symbols, so that create, tuning, capture, run and timing have one
 * path over classes. Each CUDA and cuBLASLt call is checked; its failure becomes a
 * status and a message naming the call and the step (and, for a launch, the kernel). A failure part-way through create goes through the same
 * gpucc_model_destroy as a finished model, which frees whatever exists so far.
 *
 * The model works in the device's primary context (the one the CUDA runtime uses too, so
 * the caller's cudaStream_t and device pointers are valid here), pushed around each call
 * and popped before returning, so the caller's current context is left alone.
 */
#include "runtime/cuda-impl.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A kernel step, resolved: its function and its parameter array. */
typedef struct Launch {
  CUfunction fn;
  uint64_t *vals;  /* each parameter's 8 bytes: a device address or a scalar */
  void **params;   /* params[i] = &vals[i], as cuLaunchKernel wants */
} Launch;

/* cuBLASLt's heuristic ranks algorithms without running them. Its first choice is often
 * not the fastest here, and may run as two or three kernels (a split-K reduction, or an
 * epilogue its main kernel lacks), so create asks for its best TUNE_MAX, adds each one
 * that splits K once more with K whole (one kernel, where cuBLASLt takes that), and times
 * them all (tune_gemm). */
enum { TUNE_MAX = 8, TUNE_CANDS = 2 * TUNE_MAX };

/* A GEMM step, resolved: descriptors, layouts (A, B, C, D) and the chosen algorithm.
 * alpha and beta live here because cuBLASLt reads them through pointers. */
typedef struct Gemm {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t layout[4];
  cublasLtMatmulAlgo_t algo;
  size_t workspace;
  cublasLtMatmulHeuristicResult_t *cand; /* the heuristic's candidates, until one is chosen */
  int ncand;
  union {
    float f;
    double d;
  } alpha, beta;
} Gemm;

/* A step of some class, resolved. The steps of all classes are numbered in class order
 * (as the tuning cache numbers them), so a class's steps are consecutive. */
typedef struct Step {
  const GpuccStep *s;
  int cls, index; /* its class, and its index among the class's steps */
  Launch launch;  /* a kernel step's */
  Gemm gemm;      /* a GEMM step's */
  int chosen;     /* a choice's variant (0 until tuned) */
  bool skip;      /* in a variant not chosen, so never run */
} Step;

/* A class as it runs: its steps m->steps[first .. first + nsteps), its graph, and what a
 * launch of it costs when a run chooses chunks (cost_classes). */
typedef struct Class {
  int first, nsteps;
  CUgraph graph;
  CUgraphExec exec;
  int kernels; /* kernel nodes in the graph: kernels per inference */
  float ms;    /* the median replay of its graph at create; -1: not timed */
  double cost; /* ms when timed, else the product of its bounds */
} Class;

/* What a run found in its input dims: each symbol's size, and the class it takes. */
typedef struct Shape {
  int64_t size[GPUCC_MAX_SYMBOLS];
  int cls;
} Shape;

/* One graph launch of a run: class cls on rows [r0, r0 + len) of the rows symbol's axes.
 * A run without a rows symbol is one chunk (its len unused). */
typedef struct Chunk {
  int cls;
  int64_t r0, len;
} Chunk;

/* The rows a chunking's table covers at most: above, rows are counted in units of
 * several (choose_chunks). */
enum { CHUNK_CELLS = 4096 };

struct GpuccModel {
  GpuccPlan *plan; /* a fixed plan made one class (as_one_class) */
  const CuApi *cu;
  const LtApi *lt;
  CUdevice dev;
  CUcontext ctx; /* the retained primary context; NULL until retained */
  CUdeviceptr arena, weights, workspace;
  CUmodule *modules; /* per plan module; NULL until loaded */
  cublasLtHandle_t lt_handle;
  Step *steps;     /* every class's, in class order */
  int nsteps;
  Class *classes;  /* per plan class */
  int largest;     /* the class of every symbol's largest size: what run runs */
  int rows;        /* the first rows symbol (GPUCC_SYMBOL_ROWS); -1: runs are one chunk */
  Shape last;      /* the last run's sizes ... */
  Chunk *chunks;   /* ... and its chunks, nchunks of them: what gpucc_model_time replays */
  int nchunks;
  Chunk *next;     /* room for the next run's chunks (swapped with chunks when it runs) */
  int cells;       /* entries of chunks, next and the table: min(CHUNK_CELLS, rows' largest) + 1 */
  double *dp_cost; /* choose_chunks' table: per number of units, the least cost, */
  int *dp_count, *dp_pick; /* its chunks and the class of its first chunk */
  const int64_t **largest_dims; /* per input: its dims at the largest sizes (run's) */
  CUstream stream; /* internal: captures the graphs */
  unsigned char *pinned; /* run_host's staging: inputs, then outputs */
  uint64_t *stage_in, *stage_out;
  bool debug;  /* GPUCC_RUNTIME_DEBUG: no graph, steps one by one */
  uint64_t plan_hash; /* of the plan's bytes: the tuning cache's key */
};

#define DEBUG_HINT "; set GPUCC_RUNTIME_DEBUG=1 to run the steps one by one and name the failing one"

/* A label: a class's, a kernel's name and the words around them. */
enum { LABEL_BYTES = GPUCC_MAX_NAME + 512 };

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* The median of ms[0 .. n), n >= 1 (sorting them). */
static float median(float *ms, int n) {
  qsort(ms, (size_t)n, sizeof *ms, cmp_float);
  return n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
}

/* t's bytes at dims no larger than its own. */
static uint64_t bytes_at(const GpuccTensorInfo *t, const int64_t *dims) {
  uint64_t n = 0;
  gpucc_numel(dims, t->rank, &n); /* cannot fail: the plan is validated */
  return n * gpucc_dtype_size(t->dtype);
}

/* At its dims: a ranged model's largest. */
static uint64_t tensor_bytes(const GpuccTensorInfo *t) { return bytes_at(t, t->dims); }

static CUdeviceptr dev_addr(const GpuccModel *m, GpuccPtr p) {
  return (p.region == GPUCC_REGION_WEIGHTS ? m->weights : m->arena) + p.offset;
}

/* cuBLASLt takes device addresses as pointers. */
static void *dev_ptr(CUdeviceptr p) { return (void *)(uintptr_t)p; }

/* "class 2 (batch=4): " in a ranged model, "" in a fixed one: what messages about
 * class c start with. */
static const char *class_label(const GpuccModel *m, int c, char *buf, size_t n) {
  buf[0] = 0;
  if (m->plan->nsyms) {
    gpucc_format_class(buf, n, m->plan, c);
    size_t at = strlen(buf);
    snprintf(buf + at, n - at, ": ");
  }
  return buf;
}

/* "step 3 (kernel 'k3_add')", after its class_label: step 3 of its class. */
static const char *step_label(const GpuccModel *m, int i, char *buf, size_t n) {
  const GpuccStep *s = m->steps[i].s;
  int k = m->steps[i].index;
  size_t at = strlen(class_label(m, m->steps[i].cls, buf, n));
  buf += at;
  n -= at;
  switch (s->kind) {
  case GPUCC_STEP_KERNEL: snprintf(buf, n, "step %d (kernel '%s')", k, s->kernel.name); break;
  case GPUCC_STEP_GEMM:
    snprintf(buf, n, "step %d (gemm m=%lld n=%lld k=%lld batch=%lld)", k, (long long)s->gemm.m,
             (long long)s->gemm.n, (long long)s->gemm.k, (long long)s->gemm.batch);
    break;
  case GPUCC_STEP_COPY: snprintf(buf, n, "step %d (copy)", k); break;
  case GPUCC_STEP_MEMSET: snprintf(buf, n, "step %d (memset)", k); break;
  case GPUCC_STEP_CHOICE: snprintf(buf, n, "step %d (choice '%s')", k, s->choice.label); break;
  }
  return buf - at;
}

static GpuccStatus lt_fail(const GpuccModel *m, cublasStatus_t s, const char *what, int step) {
  char label[LABEL_BYTES];
  return gpucc_fail(GPUCC_ERR_CUBLAS, "%s: %s failed: %s", step_label(m, step, label, sizeof label),
                    what, m->lt->cublasLtGetStatusString(s));
}

/* Of the classes whose bounds hold the sizes, the one whose bounds have the least product
 * (the least padded work), the first of equals; -1 if none does (the plan's largest class
 * holds any sizes its symbols take). A fixed plan's one class holds all. */
static int pick_class(const GpuccPlan *p, const int64_t *size) {
  int best = -1;
  uint64_t least = 0;
  for (int c = 0; c < p->nclasses; c++) {
    const int64_t *b = p->classes[c].bound;
    uint64_t work = 1;
    bool holds = true;
    for (int k = 0; k < p->nsyms; k++) {
      holds = holds && b[k] >= size[k];
      if (__builtin_mul_overflow(work, (uint64_t)b[k], &work)) work = UINT64_MAX;
    }
    if (holds && (best < 0 || work < least)) {
      best = c;
      least = work;
    }
  }
  return best;
}

/* ---------------------------------------------------------------- create: memory and modules */

static GpuccStatus alloc_device(GpuccModel *m, CUdeviceptr *p, uint64_t bytes, const char *what) {
  if (!bytes) return GPUCC_OK; /* cuMemAlloc refuses 0 */
  CUresult r = m->cu->cuMemAlloc(p, bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY)
    return gpucc_fail(GPUCC_ERR_OUT_OF_MEMORY,
                      "out of GPU memory: cuMemAlloc of the %s (%llu bytes) failed", what,
                      (unsigned long long)bytes);
  if (r) return gpucc_cu_fail(m->cu, r, "cuMemAlloc of the %s (%llu bytes)", what,
                              (unsigned long long)bytes);
  return GPUCC_OK;
}

static GpuccStatus alloc_memory(GpuccModel *m, const void *weights) {
  const GpuccPlan *p = m->plan;
  const CuApi *cu = m->cu;
  GpuccStatus st;
  CUresult r;
  if ((st = alloc_device(m, &m->arena, p->arena_bytes, "arena")) ||
      (st = alloc_device(m, &m->weights, p->weights_bytes, "weights")) ||
      (st = alloc_device(m, &m->workspace, p->workspace_bytes, "cuBLASLt workspace")))
    return st;
  if (p->weights_bytes && (r = cu->cuMemcpyHtoD(m->weights, weights, p->weights_bytes)))
    return gpucc_cu_fail(cu, r, "cuMemcpyHtoD of the weights (%llu bytes)",
                         (unsigned long long)p->weights_bytes);

  /* run_host's staging buffers, each slot 256-byte aligned. */
  uint64_t total = 0;
  if (!(m->stage_in = calloc((size_t)p->ninputs + 1, sizeof *m->stage_in)) ||
      !(m->stage_out = calloc((size_t)p->noutputs + 1, sizeof *m->stage_out)))
    return gpucc_fail(GPUCC_ERR_OUT_OF_MEMORY, "out of host memory");
  for (int i = 0; i < p->ninputs; i++) {
    m->stage_in[i] = total;
    total += align_up(tensor_bytes(&p->inputs[i]), 256);
  }
  for (int i = 0; i < p->noutputs; i++) {
    m->stage_out[i] = total;
    total += align_up(tensor_bytes(&p->outputs[i]), 256);
  }
  if (total) {
    void *h = NULL;
    if ((r = cu->cuMemHostAlloc(&h, total, CU_MEMHOSTALLOC_PORTABLE)))
      return gpucc_cu_fail(cu, r, "cuMemHostAlloc of %llu bytes of pinned staging memory",
                           (unsigned long long)total);
    m->pinned = h;
  }
  return GPUCC_OK;
}

/* A zeroed arena makes a first run deterministic, and index-reading kernels safe, even if
 * a plan reads a slot before writing it. Waited for: cuMemsetD8 of device memory returns
 * before it is done, and the streams that use the arena next do not wait for the legacy
 * stream (ours and, maybe, the caller's are non-blocking). */
static GpuccStatus zero_arena(GpuccModel *m) {
  CUresult r;
  if (m->plan->arena_bytes && ((r = m->cu->cuMemsetD8(m->arena, 0, m->plan->arena_bytes)) ||
                               (r = m->cu->cuCtxSynchronize())))
    return gpucc_cu_fail(m->cu, r, "cuMemsetD8 of the arena");
  return GPUCC_OK;
}

/* "module 2: " before a message about module i when the plan has several, else "". */
static void module_label(const GpuccModel *m, int i, char *buf, size_t n) {
  buf[0] = 0;
  if (m->plan->nmodules > 1) snprintf(buf, n, "module %d: ", i);
}

/* Module i: the cubin when the driver takes it; the PTX when the driver says the cubin is
 * not for this GPU (a newer architecture than the compile target) or when there is no
 * cubin. */
static GpuccStatus load_module(GpuccModel *m, int i) {
  const GpuccModule *mod = &m->plan->modules[i];
  const CuApi *cu = m->cu;
  char which[32];
  module_label(m, i, which, sizeof which);
  CUresult r = CUDA_ERROR_NO_BINARY_FOR_GPU;
  if (mod->cubin_len) {
    r = cu->cuModuleLoadDataEx(&m->modules[i], mod->cubin, 0, NULL, NULL);
    if (r == CUDA_SUCCESS) return GPUCC_OK;
    if ((r != CUDA_ERROR_NO_BINARY_FOR_GPU && r != CUDA_ERROR_INVALID_IMAGE) || !mod->ptx_len)
      return gpucc_cu_fail(cu, r, "%scuModuleLoadDataEx of the cubin (%zu bytes)%s", which,
                           mod->cubin_len,
                           mod->ptx_len ? "" : " (and the module has no PTX to fall back on)");
  }
  char log[4096] = "";
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[] = {log, (void *)(uintptr_t)sizeof log};
  r = cu->cuModuleLoadDataEx(&m->modules[i], mod->ptx, 2, opts, vals);
  if (r == CUDA_SUCCESS) return GPUCC_OK;
  log[sizeof log - 1] = 0;
  return gpucc_cu_fail(cu, r, "%scuModuleLoadDataEx of the PTX%s%s%s", which,
                       mod->cubin_len ? " (the cubin is not for this GPU)" : "",
                       log[0] ? "; JIT log:\n" : "", log);
}

static GpuccStatus load_modules(GpuccModel *m) {
  int n = m->plan->nmodules;
  if (n && !(m->modules = calloc((size_t)n, sizeof *m->modules)))
    return gpucc_fail(GPUCC_ERR_OUT_OF_MEMORY, "out of host memory");
  for (int i = 0; i < n; i++) {
    GpuccStatus st = load_module(m, i);
    if (st) return st;
  }
  return GPUCC_OK;
}

/* ---------------------------------------------------------------- create: steps */

/* The kernel called name in the first module that has it, that module's index in *mod.
 * CUDA_ERROR_NOT_FOUND when none has it (a plan validated with kernels has a module). */
static CUresult find_kernel(const GpuccModel *m, const char *name, CUfunction *fn, int *mod) {
  CUresult r = CUDA_ERROR_NOT_FOUND;
  for (int i = 0; i < m->plan->nmodules && r == CUDA_ERROR_NOT_FOUND; i++) {
    r = m->cu->cuModuleGetFunction(fn, m->modules[i], name);
    *mod = i;
  }
  return r;
}

static GpuccStatus prepare_kernel(GpuccModel *m, int i) {
  const GpuccKernel *k = &m->steps[i].s->kernel;
  Launch *l = &m->steps[i].launch;
  char label[LABEL_BYTES];
  step_label(m, i, label, sizeof label);
  int mod = 0;
  CUresult r = find_kernel(m, k->name, &l->fn, &mod);
  if (r == CUDA_ERROR_NOT_FOUND && m->plan->nmodules > 1)
    return gpucc_fail(GPUCC_ERR_BAD_PLAN, "%s: none of the %d modules has a kernel named '%s'",
                      label, m->plan->nmodules, k->name);
  if (r == CUDA_ERROR_NOT_FOUND)
    return gpucc_fail(GPUCC_ERR_BAD_PLAN, "%s: the module has no kernel named '%s'", label, k->name);
  char which[32];
  module_label(m, mod, which, sizeof which);
  if (r) return gpucc_cu_fail(m->cu, r, "%s: %scuModuleGetFunction", label, which);
  if (k->shared_bytes > 48 * 1024 &&
      (r = m->cu->cuFuncSetAttribute(l->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     (int)k->shared_bytes)))
    return gpucc_cu_fail(m->cu, r, "%s: cuFuncSetAttribute(%u bytes of dynamic shared memory)",
                         label, k->shared_bytes);
  if (!k->nargs) return GPUCC_OK;
  if (!(l->vals = calloc((size_t)k->nargs, sizeof *l->vals)) ||
      !(l->params = calloc((size_t)k->nargs, sizeof *l->params)))
    return gpucc_fail(GPUCC_ERR_OUT_OF_MEMORY, "out of host memory");
  for (int a = 0; a < k->nargs; a++) {
    const GpuccArg *arg = &k->args[a];
    l->vals[a] = arg->kind == GPUCC_ARG_PTR ? (uint64_t)dev_addr(m, arg->ptr) : arg->scalar;
    l->params[a] = &l->vals[a];
  }
  return GPUCC_OK;
}

static cudaDataType_t lt_type(GpuccDType t) {
  switch (t) {
  case GPUCC_DT_F64: return CUDA_R_64F;
  case GPUCC_DT_F16: return CUDA_R_16F;
  case GPUCC_DT_BF16: return CUDA_R_16BF;
  case GPUCC_DT_F8E4M3: return CUDA_R_8F_E4M3;
  default: return CUDA_R_32F; /* validation allows no other GEMM type */
  }
}

/* The largest power of two (up to 256) dividing an address: what cuBLASLt may assume. */
static uint32_t alignment_of(CUdeviceptr p) {
  uint32_t a = 256;
  while (a > 1 && p % a) a /= 2;
  return a;
}

static GpuccStatus lt_layout(GpuccModel *m, int i, cublasLtMatrixLayout_t *out, GpuccDType t,
                             int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                             int64_t stride) {
  const LtApi *lt = m->lt;
  cublasStatus_t s = lt->cublasLtMatrixLayoutCreate(out, lt_type(t), (uint64_t)rows,
                                                    (uint64_t)cols, ld);
  if (s) return lt_fail(m, s, "cublasLtMatrixLayoutCreate", i);
  if (batch > 1) {
    int32_t count = (int32_t)batch;
    if ((s = lt->cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                  sizeof count)) ||
        (s = lt->cublasLtMatrixLayoutSetAttribute(
             *out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride)))
      return lt_fail(m, s, "cublasLtMatrixLayoutSetAttribute(batch)", i);
  }
  return GPUCC_OK;
}

/* The candidates res[0..n) that split K, each again with K whole (SPLITK_NUM 1, no
 * reduction: one kernel), where cuBLASLt takes it with at most ws bytes of workspace:
 * written to out, their count returned. */
static int whole_k_twins(const GpuccModel *m, int i, const cublasLtMatmulHeuristicResult_t *res,
                         int n, uint64_t ws, cublasLtMatmulHeuristicResult_t *out) {
  const LtApi *lt = m->lt;
  const Gemm *G = &m->steps[i].gemm;
  int count = 0;
  for (int j = 0; j < n; j++) {
    int32_t splits = 1, one = 1;
    uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
    cublasLtMatmulHeuristicResult_t t = res[j];
    if (lt->cublasLtMatmulAlgoConfigGetAttribute(&t.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                 &splits, sizeof splits, NULL) ||
        splits <= 1 ||
        lt->cublasLtMatmulAlgoConfigSetAttribute(&t.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one,
                                                 sizeof one) ||
        lt->cublasLtMatmulAlgoConfigSetAttribute(&t.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                 &none, sizeof none) ||
        lt->cublasLtMatmulAlgoCheck(m->lt_handle, G->desc, G->layout[0], G->layout[1],
                                    G->layout[2], G->layout[3], &t.algo, &t) ||
        t.state != CUBLAS_STATUS_SUCCESS || t.workspaceSize > ws)
      continue;
    out[count++] = t;
  }
  return count;
}

static GpuccStatus prepare_gemm(GpuccModel *m, int i) {
  const GpuccGemm *g = &m->steps[i].s->gemm;
  Gemm *G = &m->steps[i].gemm;
  GpuccStatus st;
  if (!m->lt) {
    if (!(m->lt = gpucc_cublaslt(&st))) return st;
    cublasStatus_t s = m->lt->cublasLtCreate(&m->lt_handle);
    if (s) return gpucc_fail(GPUCC_ERR_CUBLAS, "cublasLtCreate failed: %s",
                             m->lt->cublasLtGetStatusString(s));
  }
  const LtApi *lt = m->lt;
  bool f64 = g->compute == GPUCC_COMPUTE_64F;
  cublasComputeType_t ct = f64 ? CUBLAS_COMPUTE_64F
                           : g->compute == GPUCC_COMPUTE_32F_FAST_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                       : CUBLAS_COMPUTE_32F;
  if (f64) {
    G->alpha.d = g->alpha;
    G->beta.d = g->beta;
  } else {
    G->alpha.f = (float)g->alpha;
    G->beta.f = (float)g->beta;
  }
  cublasStatus_t s = lt->cublasLtMatmulDescCreate(&G->desc, ct, f64 ? CUDA_R_64F : CUDA_R_32F);
  if (s) return lt_fail(m, s, "cublasLtMatmulDescCreate", i);
  int32_t ta = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  if ((s = lt->cublasLtMatmulDescSetAttribute(G->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) ||
      (s = lt->cublasLtMatmulDescSetAttribute(G->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)))
    return lt_fail(m, s, "cublasLtMatmulDescSetAttribute(transpose)", i);
  if (g->epilogue != GPUCC_EPILOGUE_NONE) {
    /* The bias pointer is part of the descriptor: the weights and arena never move. */
    int32_t epi = g->epilogue == GPUCC_EPILOGUE_GELU_BIAS   ? CUBLASLT_EPILOGUE_GELU_BIAS
                  : g->epilogue == GPUCC_EPILOGUE_RELU_BIAS ? CUBLASLT_EPILOGUE_RELU_BIAS
                                                            : CUBLASLT_EPILOGUE_BIAS;
    CUdeviceptr bias = dev_addr(m, g->bias);
    void *bias_ptr = dev_ptr(bias);
    int64_t bias_stride = 0; /* one bias for every batch */
    if ((s = lt->cublasLtMatmulDescSetAttribute(G->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi)) ||
        (s = lt->cublasLtMatmulDescSetAttribute(G->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr,
                                                sizeof bias_ptr)) ||
        (s = lt->cublasLtMatmulDescSetAttribute(G->desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE,
                                                &bias_stride, sizeof bias_stride)))
      return lt_fail(m, s, "cublasLtMatmulDescSetAttribute(bias epilogue)", i);
  }
  if ((st = lt_layout(m, i, &G->layout[0], g->a_type, g->trans_a ? g->k : g->m,
                      g->trans_a ? g->m : g->k, g->lda, g->batch, g->stride_a)) ||
      (st = lt_layout(m, i, &G->layout[1], g->b_type, g->trans_b ? g->n : g->k,
                      g->trans_b ? g->k : g->n, g->ldb, g->batch, g->stride_b)) ||
      (st = lt_layout(m, i, &G->layout[2], g->cd_type, g->m, g->n, g->ldc, g->batch, g->stride_c)) ||
      (st = lt_layout(m, i, &G->layout[3], g->cd_type, g->m, g->n, g->ldd, g->batch, g->stride_d)))
    return st;

  /* One algorithm, chosen now for these exact shapes, workspace and pointer alignments. */
  cublasLtMatmulPreference_t pref = NULL;
  if ((s = lt->cublasLtMatmulPreferenceCreate(&pref)))
    return lt_fail(m, s, "cublasLtMatmulPreferenceCreate", i);
  uint64_t ws = m->plan->workspace_bytes;
  const CUdeviceptr ptrs[4] = {dev_addr(m, g->a), dev_addr(m, g->b), dev_addr(m, g->c),
                               dev_addr(m, g->d)};
  const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  s = lt->cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                               sizeof ws);
  for (int j = 0; j < 4 && !s; j++) {
    uint32_t a = alignment_of(ptrs[j]);
    s = lt->cublasLtMatmulPreferenceSetAttribute(pref, align_attr[j], &a, sizeof a);
  }
  cublasLtMatmulHeuristicResult_t res[TUNE_CANDS]; /* the heuristic's, then their twins */
  memset(res, 0, sizeof res);
  int nres = 0;
  if (!s)
    s = lt->cublasLtMatmulAlgoGetHeuristic(m->lt_handle, G->desc, G->layout[0], G->layout[1],
                                           G->layout[2], G->layout[3], pref, TUNE_MAX, res,
                                           &nres);
  lt->cublasLtMatmulPreferenceDestroy(pref);
  if (s) return lt_fail(m, s, "cublasLtMatmulAlgoGetHeuristic", i);
  int n = 0;
  for (int j = 0; j < nres; j++)
    if (res[j].state == CUBLAS_STATUS_SUCCESS) res[n++] = res[j];
  if (!n) {
    char label[LABEL_BYTES];
    return gpucc_fail(GPUCC_ERR_CUBLAS,
                      "%s: cuBLASLt has no algorithm for a=%s b=%s c/d=%s with %llu bytes of "
                      "workspace", step_label(m, i, label, sizeof label),
                      gpucc_dtype_name(g->a_type), gpucc_dtype_name(g->b_type),
                      gpucc_dtype_name(g->cd_type), (unsigned long long)ws);
  }
  G->algo = res[0].algo;
  G->workspace = res[0].workspaceSize;
  n += whole_k_twins(m, i, res, n, ws, res + n);
  if (n > 1) {
    if (!(G->cand = malloc((size_t)n * sizeof *G->cand)))
      return gpucc_fail(GPUCC_ERR_OUT_OF_MEMORY, "out of host memory");
    memcpy(G->cand, res, (size_t)n * sizeof *G->cand);
    G->ncand = n;
  }
  return GPUCC_OK;
}

/* Every class's steps, numbered in class order, each kernel's function and parameters and
 * each GEMM's descriptors and candidates made. */
static GpuccStatus prepare_steps(GpuccModel *m) {
  const GpuccPlan *p = m->plan;
  int n = 0;
  for (int c = 0; c < p->nclasses; c++) {
    if (p->classes[c].nsteps > INT_MAX - 1 - n)
      return gpucc_fail(GPUCC_ERR_BAD_PLAN, "plan: more than %d steps in all", INT_MAX - 1);
    n += p->classes[c].nsteps;
  }
  if (!(m->classes = calloc((size_t)p->nclasses, sizeof *m->classes)) ||
      !(m->steps = calloc((size_t)n + 1, sizeof *m->steps)))
    return gpucc_fail(GPUCC_ERR_OUT_OF_MEMORY, "out of host memory");
  for (int c = 0; c < p->nclasses; c++) {
    const GpuccClass *cl = &p->classes[c];
    m->classes[c] = (Class){.first = m->nsteps, .nsteps = cl->nsteps};
    for (int i = 0; i < cl->nsteps; i++)
      m->steps[m->nsteps++] = (Step){.s = &cl->steps[i], .cls = c, .index = i};
  }
  for (int i = 0; i < n; i++) {
    GpuccStatus st = GPUCC_OK;
    switch (m->steps[i].s->kind) {
    case GPUCC_STEP_KERNEL: st = prepare_kernel(m, i); break;
    case GPUCC_STEP_GEMM: st = prepare_gemm(m, i); break;
    default: break; /* copies and memsets need nothing */
    }
    if (st) return st;
  }
  return GPUCC_OK;
}

/* ---------------------------------------------------------------- enqueueing steps */

static cublasStatus_t matmul(GpuccModel *m, int i, const cublasLtMatmulAlgo_t *algo,
                             size_t workspace, CUstream s) {
  const GpuccGemm *g = &m->steps[i].s->gemm;
  Gemm *G = &m->steps[i].gemm;
  return m->lt->cublasLtMatmul(m->lt_handle, G->desc, &G->alpha, dev_ptr(dev_addr(m, g->a)),
                               G->layout[0], dev_ptr(dev_addr(m, g->b)), G->layout[1], &G->beta,
                               dev_ptr(dev_addr(m, g->c)), G->layout[2],
                               dev_ptr(dev_addr(m, g->d)), G->layout[3], algo,
                               dev_ptr(m->workspace), workspace, s);
}

static GpuccStatus enqueue_step(GpuccModel *m, int i, CUstream s) {
  const GpuccStep *st = m->steps[i].s;
  const CuApi *cu = m->cu;
  char label[LABEL_BYTES];
  CUresult r = CUDA_SUCCESS;
  switch (st->kind) {
  case GPUCC_STEP_KERNEL: {
    const GpuccKernel *k = &st->kernel;
    const Launch *l = &m->steps[i].launch;
    r = cu->cuLaunchKernel(l->fn, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1],
                           k->block[2], k->shared_bytes, s, l->params, NULL);
    if (r) return gpucc_cu_fail(cu, r, "%s: cuLaunchKernel", step_label(m, i, label, sizeof label));
    return GPUCC_OK;
  }
  case GPUCC_STEP_GEMM: {
    const Gemm *G = &m->steps[i].gemm;
    cublasStatus_t ls = matmul(m, i, &G->algo, G->workspace, s);
    return ls ? lt_fail(m, ls, "cublasLtMatmul", i) : GPUCC_OK;
  }
  case GPUCC_STEP_COPY:
    if (st->copy.bytes)
      r = cu->cuMemcpyDtoDAsync(dev_addr(m, st->copy.dst), dev_addr(m, st->copy.src),
                                st->copy.bytes, s);
    break;
  case GPUCC_STEP_MEMSET:
    if (st->fill.bytes)
      r = cu->cuMemsetD8Async(dev_addr(m, st->fill.dst), st->fill.value, st->fill.bytes, s);
    break;
  case GPUCC_STEP_CHOICE: break; /* its chosen variant's steps follow it */
  }
  if (r) return gpucc_cu_fail(cu, r, "%s", step_label(m, i, label, sizeof label));
  return GPUCC_OK;
}

/* Each size class c reads, written where it reads it: an i64 as two 32-bit memsets (low
 * word first: the arena is little-endian), enqueued on s, so no host memory is involved
 * and nothing waits. */
static GpuccStatus write_sizes(const GpuccModel *m, int c, const int64_t *size, CUstream s) {
  const GpuccPlan *p = m->plan;
  const CuApi *cu = m->cu;
  for (int k = 0; k < p->nsyms; k++) {
    uint64_t off = p->classes[c].size_offset[k], v = (uint64_t)size[k];
    CUresult r;
    if (off != GPUCC_NO_OFFSET &&
        ((r = cu->cuMemsetD32Async(m->arena + off, (unsigned)v, 1, s)) ||
         (r = cu->cuMemsetD32Async(m->arena + off + 4, (unsigned)(v >> 32), 1, s)))) {
      char label[LABEL_BYTES];
      return gpucc_cu_fail(cu, r, "%swriting the size of '%s'",
                           class_label(m, c, label, sizeof label), p->syms[k].name);
    }
  }
  return GPUCC_OK;
}

/* ---------------------------------------------------------------- choosing GEMM algorithms
 *
 * Each GEMM's candidates run as the model's graph will run them: TUNE_REPS calls captured
 * into a graph, replayed, the least time of TUNE_ROUNDS replays kept. The fastest wins,
 * unless one within TUNE_SLACK of it runs fewer kernels: a launch saved is worth more to
 * the whole graph than a difference inside the noise. GPUCC_GEMM_TUNE=fewest at create
 * takes the fastest of those that run as the fewest kernels, however slow: every GEMM one
 * kernel of the graph wherever cuBLASLt has one for it (f32 GEMMs of few rows then give up
 * their split K, at up to 4x the time: docs/perf.md). A GEMM the same as an earlier one in
 * everything but its addresses' offsets (types, shapes, strides, epilogue, beta,
 * alignments) takes that one's choice. GPUCC_GEMM_TUNE=0 keeps the heuristic's first
 * choice; =log prints each GEMM's candidates and the choice to stderr. */

enum { TUNE_REPS = 4, TUNE_ROUNDS = 5 };
#define TUNE_SLACK 0.03

/* The kernel nodes of graph g. */
static GpuccStatus count_kernels(const CuApi *cu, CUgraph g, int *out) {
  size_t n = 0;
  CUresult r = cu->cuGraphGetNodes(g, NULL, &n);
  if (r) return gpucc_cu_fail(cu, r, "cuGraphGetNodes");
  CUgraphNode *nodes = malloc((n ? n : 1) * sizeof *nodes);
  if (!nodes) return gpucc_fail(GPUCC_ERR_OUT_OF_MEMORY, "out of host memory");
  if ((r = cu->cuGraphGetNodes(g, nodes, &n))) {
    free(nodes);
    return gpucc_cu_fail(cu, r, "cuGraphGetNodes");
  }
  int k = 0;
  for (size_t j = 0; j < n && !r; j++) {
    CUgraphNodeType t;
    if (!(r = cu->cuGraphNodeGetType(nodes[j], &t))) k += t == CU_GRAPH_NODE_TYPE_KERNEL;
  }
  free(nodes);
  if (r) return gpucc_cu_fail(cu, r, "cuGraphNodeGetType");
  *out = k;
  return GPUCC_OK;
}

typedef struct Trial {
  float us;    /* per call; INFINITY when cuBLASLt refuses the candidate */
  int kernels; /* per call */
} Trial;

/* One replay of exec between two events: its milliseconds. */
static GpuccStatus time_graph(const GpuccModel *m, CUgraphExec exec, CUevent ev[2], float *ms) {
  const CuApi *cu = m->cu;
  CUstream s = m->stream;
  CUresult r;
  if ((r = cu->cuEventRecord(ev[0], s)) || (r = cu->cuGraphLaunch(exec, s)) ||
      (r = cu->cuEventRecord(ev[1], s)) || (r = cu->cuEventSynchronize(ev[1])) ||
      (r = cu->cuEventElapsedTime(ms, ev[0], ev[1])))
    return gpucc_cu_fail(cu, r, "timing a graph replay");
  return GPUCC_OK;
}

/* Candidate h as TUNE_REPS calls captured and instantiated: *exec, and t's kernels per
 * call; *exec stays NULL when cuBLASLt refuses the candidate. */
static GpuccStatus capture_algo(GpuccModel *m, int i, const cublasLtMatmulHeuristicResult_t *h,
                                Trial *t, CUgraphExec *exec) {
  const CuApi *cu = m->cu;
  t->us = INFINITY;
  t->kernels = 0;
  *exec = NULL;
  CUresult r = cu->cuStreamBeginCapture(m->stream, CU_STREAM_CAPTURE_MODE_RELAXED);
  if (r) return gpucc_cu_fail(cu, r, "cuStreamBeginCapture");
  cublasStatus_t ls = CUBLAS_STATUS_SUCCESS;
  for (int k = 0; k < TUNE_REPS && !ls; k++)
    ls = matmul(m, i, &h->algo, h->workspaceSize, m->stream);
  CUgraph graph = NULL;
  r = cu->cuStreamEndCapture(m->stream, &graph);
  GpuccStatus st = GPUCC_OK;
  if (ls) /* refused: not a candidate (a refused call may also invalidate the capture) */
    st = GPUCC_OK;
  else if (r)
    st = gpucc_cu_fail(cu, r, "cuStreamEndCapture of a GEMM candidate");
  else if (!(st = count_kernels(cu, graph, &t->kernels))) {
    t->kernels /= TUNE_REPS;
    if ((r = cu->cuGraphInstantiate(exec, graph, 0))) {
      *exec = NULL;
      st = gpucc_cu_fail(cu, r, "cuGraphInstantiate of a GEMM candidate");
    }
  }
  if (graph) cu->cuGraphDestroy(graph);
  return st;
}

/* The time of each of the n captured candidates exec[] (a NULL one keeps t's INFINITY):
 * the least of TUNE_ROUNDS replays after a warm-up one, per call, the candidates taking
 * turns so that a slow spell of the GPU falls on all of them. Destroys exec[], after a
 * failure too; st is a failure of the captures before (then nothing is timed). */
static GpuccStatus time_rounds(GpuccModel *m, CUgraphExec *exec, int n, CUevent ev[2],
                               Trial *t, GpuccStatus st) {
  for (int round = 0; round <= TUNE_ROUNDS && !st; round++)
    for (int c = 0; c < n && !st; c++) {
      float ms;
      if (exec[c] && !(st = time_graph(m, exec[c], ev, &ms)) && round &&
          ms * 1000 / TUNE_REPS < t[c].us)
        t[c].us = ms * 1000 / TUNE_REPS;
    }
  for (int c = 0; c < n; c++)
    if (exec[c]) m->cu->cuGraphExecDestroy(exec[c]);
  return st;
}

/* Every GEMM candidate's time (time_rounds). */
static GpuccStatus time_algos(GpuccModel *m, int i, CUevent ev[2], Trial *t) {
  const Gemm *G = &m->steps[i].gemm;
  CUgraphExec exec[TUNE_CANDS] = {NULL};
  GpuccStatus st = GPUCC_OK;
  for (int c = 0; c < G->ncand && !st; c++) st = capture_algo(m, i, &G->cand[c], &t[c], &exec[c]);
  return time_rounds(m, exec, G->ncand, ev, t, st);
}

/* Step j < i (of any class) whose GEMM is step i's but for where its operands lie; -1 if
 * none. */
static int same_gemm(const GpuccModel *m, int i) {
  const GpuccGemm *g = &m->steps[i].s->gemm;
  for (int j = 0; j < i; j++) {
    const GpuccGemm *h = &m->steps[j].s->gemm;
#define SAME(f) (g->f == h->f)
    if (m->steps[j].s->kind != GPUCC_STEP_GEMM || !m->steps[j].gemm.ncand ||
        !(SAME(a_type) && SAME(b_type) && SAME(cd_type) && SAME(compute) && SAME(trans_a) &&
          SAME(trans_b) && SAME(m) && SAME(n) && SAME(k) && SAME(lda) && SAME(ldb) &&
          SAME(ldc) && SAME(ldd) && SAME(batch) && SAME(stride_a) && SAME(stride_b) &&
          SAME(stride_c) && SAME(stride_d) && SAME(alpha) && SAME(beta) && SAME(epilogue)))
      continue;
#undef SAME
    const GpuccPtr p[5] = {g->a, g->b, g->c, g->d, g->bias};
    const GpuccPtr q[5] = {h->a, h->b, h->c, h->d, h->bias};
    bool same = true;
    for (int k = 0; k < 5 && same; k++)
      same = alignment_of(dev_addr(m, p[k])) == alignment_of(dev_addr(m, q[k]));
    if (same) return j;
  }
  return -1;
}

/* The trial to keep among t[0 .. n): the fastest, unless one within TUNE_SLACK of it (or,
 * with fewest, any) runs fewer kernels; the faster of equals, the first of ties. -1 when
 * none ran. */
static int pick_trial(const Trial *t, int n, bool fewest) {
  int best = -1;
  for (int c = 0; c < n; c++)
    if (isfinite(t[c].us) && (best < 0 || t[c].us < t[best].us)) best = c;
  if (best < 0) return -1;
  int pick = best;
  for (int c = 0; c < n; c++) {
    bool fewer = t[c].kernels < t[pick].kernels,
         equal = t[c].kernels == t[pick].kernels && t[c].us < t[pick].us;
    if (isfinite(t[c].us) && (fewest || t[c].us <= t[best].us * (1 + TUNE_SLACK)) &&
        (fewer || equal))
      pick = c;
  }
  return pick;
}

static GpuccStatus tune_gemm(GpuccModel *m, int i, CUevent ev[2], bool fewest, bool log) {
  Gemm *G = &m->steps[i].gemm;
  int j = same_gemm(m, i);
  if (j >= 0) {
    G->algo = m->steps[j].gemm.algo;
    G->workspace = m->steps[j].gemm.workspace;
    return GPUCC_OK;
  }
  Trial t[TUNE_CANDS];
  GpuccStatus st = time_algos(m, i, ev, t);
  if (st) return st;
  int pick = pick_trial(t, G->ncand, fewest);
  if (pick < 0) return GPUCC_OK; /* none ran alone: keep the heuristic's first */
  G->algo = G->cand[pick].algo;
  G->workspace = G->cand[pick].workspaceSize;
  if (log) {
    char label[LABEL_BYTES];
    fprintf(stderr, "gpucc runtime: %s:", step_label(m, i, label, sizeof label));
    for (int c = 0; c < G->ncand; c++) {
      int32_t splits = 1;
      uint32_t scheme = 0;
      m->lt->cublasLtMatmulAlgoConfigGetAttribute(&G->cand[c].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                  &splits, sizeof splits, NULL);
      m->lt->cublasLtMatmulAlgoConfigGetAttribute(
          &G->cand[c].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme, NULL);
      fprintf(stderr, " %s%.1fus/%dk(s%d/r%u)", c == pick ? "*" : "", t[c].us, t[c].kernels,
              splits, scheme);
    }
    fprintf(stderr, "\n");
  }
  return GPUCC_OK;
}

/* ---------------------------------------------------------------- choosing variants
 *
 * Each variant of a choice runs as the model's graph will run it: its steps TUNE_REPS
 * times captured into a graph, replayed, the least of TUNE_ROUNDS replays kept; the pick
 * is pick_trial's. A variant that cannot be launched on this GPU (a launch refused while
 * capturing) is no candidate; a choice none of whose variants launches is an error. */

/* Steps [first, first + n) TUNE_REPS times as a graph: *exec, and t's kernels per run.
 * On a refused launch, *exec stays NULL and the status says why. */
static GpuccStatus capture_steps(GpuccModel *m, int first, int n, Trial *t, CUgraphExec *exec) {
  const CuApi *cu = m->cu;
  t->us = INFINITY;
  t->kernels = 0;
  *exec = NULL;
  CUresult r = cu->cuStreamBeginCapture(m->stream, CU_STREAM_CAPTURE_MODE_RELAXED);
  if (r) return gpucc_cu_fail(cu, r, "cuStreamBeginCapture");
  GpuccStatus st = GPUCC_OK;
  for (int k = 0; k < TUNE_REPS && !st; k++)
    for (int j = first; j < first + n && !st; j++) st = enqueue_step(m, j, m->stream);
  CUgraph graph = NULL;
  r = cu->cuStreamEndCapture(m->stream, &graph); /* even after a failure: the stream lives on */
  if (!st && r) st = gpucc_cu_fail(cu, r, "cuStreamEndCapture of a variant");
  if (!st && !(st = count_kernels(cu, graph, &t->kernels))) {
    t->kernels /= TUNE_REPS;
    if ((r = cu->cuGraphInstantiate(exec, graph, 0))) {
      *exec = NULL;
      st = gpucc_cu_fail(cu, r, "cuGraphInstantiate of a variant");
    }
  }
  if (graph) cu->cuGraphDestroy(graph);
  return st;
}

static GpuccStatus tune_choice(GpuccModel *m, int i, CUevent ev[2], bool log) {
  const GpuccChoice *c = &m->steps[i].s->choice;
  Trial t[GPUCC_MAX_VARIANTS];
  CUgraphExec exec[GPUCC_MAX_VARIANTS] = {NULL};
  int first[GPUCC_MAX_VARIANTS];
  char why[512] = "";
  GpuccStatus refused = GPUCC_OK, st = GPUCC_OK;
  for (int v = 0, at = i + 1; v < c->nvariants; at += (int)c->count[v++]) {
    first[v] = at;
    GpuccStatus r = capture_steps(m, at, (int)c->count[v], &t[v], &exec[v]);
    if (r && !refused) {
      refused = r;
      snprintf(why, sizeof why, "%s", gpucc_last_error());
    }
  }
  if ((st = time_rounds(m, exec, c->nvariants, ev, t, GPUCC_OK))) return st;
  int pick = pick_trial(t, c->nvariants, false);
  char label[LABEL_BYTES];
  if (pick < 0)
    return gpucc_fail(refused, "%s: no variant can be launched on this GPU; the first says: %s",
                      step_label(m, i, label, sizeof label), why);
  m->steps[i].chosen = pick;
  if (log) {
    fprintf(stderr, "gpucc runtime: %s:", step_label(m, i, label, sizeof label));
    for (int v = 0; v < c->nvariants; v++) {
      const GpuccStep *s = m->steps[first[v]].s;
      fprintf(stderr, " %s%s %.1fus/%dk", v == pick ? "*" : "",
              s->kind == GPUCC_STEP_KERNEL ? s->kernel.name : "cublaslt", t[v].us, t[v].kernels);
    }
    fprintf(stderr, "\n");
  }
  return GPUCC_OK;
}

/* skip[] from chosen[]: the steps of every variant not chosen. */
static void apply_choices(GpuccModel *m) {
  for (int i = 0; i < m->nsteps; i++) {
    if (m->steps[i].s->kind != GPUCC_STEP_CHOICE) continue;
    const GpuccChoice *c = &m->steps[i].s->choice;
    for (int v = 0, at = i + 1; v < c->nvariants; at += (int)c->count[v++])
      for (int j = at; j < at + (int)c->count[v]; j++) m->steps[j].skip = v != m->steps[i].chosen;
  }
}

/* ---------------------------------------------------------------- the tuning cache
 *
 * What timing decided is kept on disk (tunecache.c) under a key of everything that could
 * change it: the plan's bytes, the GPU (name, compute capability, SMs), the driver, the
 * cuBLASLt version and the GEMM policy (GPUCC_GEMM_TUNE). */

typedef struct Tuning {
  bool gemms;  /* GEMM algorithms are timed */
  bool fewest; /* GPUCC_GEMM_TUNE=fewest */
  bool log;    /* each decision printed to stderr */
  bool fresh;  /* the cache is not read (but written) */
} Tuning;

static GpuccStatus tune_key(const GpuccModel *m, const Tuning *t, char *key, size_t n) {
  const CuApi *cu = m->cu;
  char name[128] = "";
  int major = 0, minor = 0, sms = 0, driver = 0;
  CUresult r;
  if ((r = cu->cuDeviceGetName(name, (int)sizeof name, m->dev)) ||
      (r = cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, m->dev)) ||
      (r = cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, m->dev)) ||
      (r = cu->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, m->dev)) ||
      (r = cu->cuDriverGetVersion(&driver)))
    return gpucc_cu_fail(cu, r, "querying the device for the tuning cache's key");
  for (char *c = name; *c; c++)
    if (*c < 0x20 || *c > 0x7e) *c = '?'; /* the key is one line of text */
  /* cuBLASLt is loaded only for a plan with GEMMs (a plan of kernels and choices has
   * none to key on) */
  snprintf(key, n, "plan %016llx gpu %s cc %d.%d sms %d driver %d cublaslt %zu gemm %s",
           (unsigned long long)m->plan_hash, name, major, minor, sms, driver,
           m->lt ? m->lt->cublasLtGetVersion() : (size_t)0,
           !t->gemms ? "heuristic" : t->fewest ? "fewest" : "fastest");
  return GPUCC_OK;
}

/* Whether step i's decision is timed: a choice of several variants, a GEMM of several
 * candidates when GEMMs are timed. */
static bool tuned_step(const GpuccModel *m, const Tuning *t, int i) {
  const GpuccStep *s = m->steps[i].s;
  return (s->kind == GPUCC_STEP_CHOICE && s->choice.nvariants > 1) ||
         (s->kind == GPUCC_STEP_GEMM && t->gemms && m->steps[i].gemm.ncand);
}

/* Takes the cache's decisions when there is one for every timed step and each still
 * holds: a variant the choice has, an algorithm cuBLASLt accepts for the GEMM with the
 * workspace the plan has. An algorithm among the GEMM's candidates (prepare_gemm's,
 * which cuBLASLt has checked) holds as it is; any other is checked again
 * (cublasLtMatmulAlgoCheck, tens of microseconds each: BERT's 73 GEMMs made a load from
 * the cache 1.2x one with tuning off). */
static bool use_cached(GpuccModel *m, const Tuning *t, const GpuccTuneEntry *e) {
  const GpuccPlan *p = m->plan;
  for (int i = 0; i < m->nsteps; i++) {
    if (!tuned_step(m, t, i)) {
      if (e[i].nwords) return false;
      continue;
    }
    const GpuccStep *s = m->steps[i].s;
    if (s->kind == GPUCC_STEP_CHOICE) {
      if (e[i].nwords != 1 || e[i].w[0] >= (uint64_t)s->choice.nvariants) return false;
      continue;
    }
    const Gemm *G = &m->steps[i].gemm;
    cublasLtMatmulAlgo_t algo;
    _Static_assert(sizeof algo.data == 8 * sizeof(uint64_t), "cuBLASLt's algo is 8 words");
    if (e[i].nwords != 9 || e[i].w[8] > p->workspace_bytes) return false;
    memcpy(algo.data, e[i].w, sizeof algo.data);
    bool known = false;
    for (int j = 0; j < G->ncand && !known; j++)
      known = !memcmp(G->cand[j].algo.data, algo.data, sizeof algo.data) &&
              G->cand[j].workspaceSize <= e[i].w[8];
    cublasLtMatmulHeuristicResult_t res;
    if (!known &&
        (m->lt->cublasLtMatmulAlgoCheck(m->lt_handle, G->desc, G->layout[0], G->layout[1],
                                        G->layout[2], G->layout[3], &algo, &res) ||
         res.workspaceSize > e[i].w[8]))
      return false;
  }
  for (int i = 0; i < m->nsteps; i++) {
    if (!e[i].nwords) continue;
    Step *s = &m->steps[i];
    if (s->s->kind == GPUCC_STEP_CHOICE) {
      s->chosen = (int)e[i].w[0];
    } else {
      memcpy(s->gemm.algo.data, e[i].w, sizeof s->gemm.algo.data);
      s->gemm.workspace = (size_t)e[i].w[8];
    }
  }
  return true;
}

/* The two events a timing brackets its replays with; ev[] NULL where not made. */
static GpuccStatus events_create(const CuApi *cu, CUevent ev[2]) {
  CUresult r;
  ev[0] = ev[1] = NULL;
  if ((r = cu->cuEventCreate(&ev[0], CU_EVENT_DEFAULT)) ||
      (r = cu->cuEventCreate(&ev[1], CU_EVENT_DEFAULT)))
    return gpucc_cu_fail(cu, r, "cuEventCreate");
  return GPUCC_OK;
}

static void events_destroy(const CuApi *cu, CUevent ev[2]) {
  for (int k = 0; k < 2; k++)
    if (ev[k]) cu->cuEventDestroy(ev[k]);
}

/* Times every timed step: GEMM algorithms first (the variants that hold GEMMs are timed
 * with their chosen algorithms), then choices; records the decisions in e. A class's
 * sizes are written (at its bounds: the class at its largest) before its steps are
 * timed, and again after another class's steps ran, since those may write where this
 * class reads its sizes: the classes share the arena. */
static GpuccStatus time_all(GpuccModel *m, const Tuning *t, GpuccTuneEntry *e) {
  const CuApi *cu = m->cu;
  CUevent ev[2];
  GpuccStatus st = events_create(cu, ev);
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0, sized = -1; i < m->nsteps && !st; i++) {
      Step *s = &m->steps[i];
      if (!tuned_step(m, t, i) || (s->s->kind == GPUCC_STEP_CHOICE) != (pass == 1)) continue;
      if (s->cls != sized &&
          (st = write_sizes(m, s->cls, m->plan->classes[s->cls].bound, m->stream)))
        break;
      sized = s->cls;
      if (pass == 0) {
        st = tune_gemm(m, i, ev, t->fewest, t->log);
        e[i].nwords = 9;
        memcpy(e[i].w, s->gemm.algo.data, sizeof s->gemm.algo.data);
        e[i].w[8] = s->gemm.workspace;
      } else {
        st = tune_choice(m, i, ev, t->log);
        e[i].nwords = 1;
        e[i].w[0] = (uint64_t)s->chosen;
      }
    }
  events_destroy(cu, ev);
  return st;
}

/* GPUCC_TUNE and GPUCC_GEMM_TUNE (runtime.h), read at create. */
static GpuccStatus tuning_of_env(Tuning *t, bool *off) {
  const char *env = getenv("GPUCC_TUNE"), *gemm = getenv("GPUCC_GEMM_TUNE");
  if (env && *env && strcmp(env, "0") && strcmp(env, "1") && strcmp(env, "log") && strcmp(env, "fresh"))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT,
                      "GPUCC_TUNE=%s: expected 0 (no timing), 1 (the default), log or fresh", env);
  *off = env && !strcmp(env, "0");
  *t = (Tuning){.gemms = !*off && !(gemm && !strcmp(gemm, "0")),
                .fewest = gemm && !strcmp(gemm, "fewest"),
                .log = (env && !strcmp(env, "log")) || (gemm && !strcmp(gemm, "log")),
                .fresh = env && !strcmp(env, "fresh")};
  return GPUCC_OK;
}

/* The decisions of every timed step (t, from tuning_of_env; off: GPUCC_TUNE=0): from the
 * cache, else timed and cached. */
static GpuccStatus tune(GpuccModel *m, const Tuning *t, bool off) {
  GpuccStatus st;
  bool any = false;
  for (int i = 0; i < m->nsteps && !off; i++) any = any || tuned_step(m, t, i);
  if (!any) {
    apply_choices(m);
    return GPUCC_OK;
  }
  char key[512];
  if ((st = tune_key(m, t, key, sizeof key))) return st;
  char *path = gpucc_tune_path(key);
  GpuccTuneEntry *e = calloc((size_t)m->nsteps + 1, sizeof *e);
  if (!e) {
    free(path);
    return gpucc_fail(GPUCC_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  if (!t->fresh && path && gpucc_tune_read(path, key, e, m->nsteps) && use_cached(m, t, e)) {
    if (t->log) fprintf(stderr, "gpucc runtime: decisions from the cache %s\n", path);
  } else {
    memset(e, 0, (size_t)m->nsteps * sizeof *e);
    if (!(st = time_all(m, t, e)) && path && !gpucc_tune_write(path, key, e, m->nsteps) && t->log)
      fprintf(stderr, "gpucc runtime: could not write the tuning cache %s\n", path);
  }
  free(path);
  free(e);
  apply_choices(m);
  return st;
}

/* Every step of class c, in order, captured from the internal stream into its graph. */
static GpuccStatus capture_graph(GpuccModel *m, int c) {
  const CuApi *cu = m->cu;
  Class *k = &m->classes[c];
  char label[LABEL_BYTES];
  class_label(m, c, label, sizeof label);
  CUresult r = cu->cuStreamBeginCapture(m->stream, CU_STREAM_CAPTURE_MODE_RELAXED);
  if (r) return gpucc_cu_fail(cu, r, "%scuStreamBeginCapture", label);
  GpuccStatus st = GPUCC_OK;
  for (int i = k->first; i < k->first + k->nsteps && !st; i++)
    if (!m->steps[i].skip) st = enqueue_step(m, i, m->stream);
  /* End the capture even after a failure, so the stream is usable and destroyable. */
  r = cu->cuStreamEndCapture(m->stream, &k->graph);
  if (st) return st;
  if (r) return gpucc_cu_fail(cu, r, "%scuStreamEndCapture" DEBUG_HINT, label);
  if ((st = count_kernels(cu, k->graph, &k->kernels))) return st;
  if ((r = cu->cuGraphInstantiate(&k->exec, k->graph, 0)))
    return gpucc_cu_fail(cu, r, "%scuGraphInstantiate" DEBUG_HINT, label);
  if ((r = cu->cuGraphUpload(k->exec, m->stream)))
    return gpucc_cu_fail(cu, r, "%scuGraphUpload" DEBUG_HINT, label);
  if ((r = cu->cuStreamSynchronize(m->stream)))
    return gpucc_cu_fail(cu, r, "%scuStreamSynchronize after cuGraphUpload" DEBUG_HINT, label);
  return GPUCC_OK;
}

/* ---------------------------------------------------------------- the cost of a class
 *
 * What choose_chunks weighs: each class's graph replayed after capture with its sizes at
 * its bounds (as tuning times its steps), COST_WARMUP replays then the median of
 * COST_REPLAYS, each between two events. Unlike tuning's decisions these are not cached
 * on disk: seven replays of each graph take well under a second per model (the classes'
 * work falls with their bounds, so all of them together take a few times the largest).
 * With GPUCC_TUNE=0 (so that every load chooses the same chunks), in debug mode (no
 * graphs) and in a fixed model (one class: nothing to choose) nothing is timed, and a
 * class costs the product of its bounds: its padded work. */
enum { COST_WARMUP = 2, COST_REPLAYS = 5 };

static GpuccStatus cost_classes(GpuccModel *m, bool timed, bool log) {
  const GpuccPlan *p = m->plan;
  for (int c = 0; c < p->nclasses; c++) {
    double work = 1;
    for (int k = 0; k < p->nsyms; k++) work *= (double)p->classes[c].bound[k];
    m->classes[c].cost = work;
    m->classes[c].ms = -1;
  }
  if (!timed || m->debug || !p->nsyms) return GPUCC_OK;
  const CuApi *cu = m->cu;
  CUevent ev[2];
  GpuccStatus st = events_create(cu, ev);
  for (int c = 0; c < p->nclasses && !st; c++) {
    Class *k = &m->classes[c];
    float ms[COST_WARMUP + COST_REPLAYS] = {0}; /* a class without steps costs nothing */
    if (k->exec && !(st = write_sizes(m, c, p->classes[c].bound, m->stream)))
      for (int i = 0; i < COST_WARMUP + COST_REPLAYS && !st; i++)
        st = time_graph(m, k->exec, ev, &ms[i]);
    if (st) break;
    k->ms = median(ms + COST_WARMUP, COST_REPLAYS);
    k->cost = k->ms;
    if (log) {
      char label[LABEL_BYTES];
      fprintf(stderr, "gpucc runtime: %s%.4f ms a replay\n", class_label(m, c, label, sizeof label),
              (double)k->ms);
    }
  }
  events_destroy(cu, ev);
  return st ? st : zero_arena(m); /* the replays wrote into it */
}

/* ---------------------------------------------------------------- create and destroy */

static GpuccStatus push_ctx(const GpuccModel *m) {
  CUresult r = m->cu->cuCtxPushCurrent(m->ctx);
  return r ? gpucc_cu_fail(m->cu, r, "cuCtxPushCurrent") : GPUCC_OK;
}

static void pop_ctx(const GpuccModel *m) {
  CUcontext c;
  m->cu->cuCtxPopCurrent(&c);
}

/* CUDA device number `device`, or NO_DEVICE saying how many there are. */
static GpuccStatus get_device(const CuApi *cu, int device, CUdevice *dev) {
  int count = 0;
  CUresult r = cu->cuDeviceGetCount(&count);
  if (r) return gpucc_cu_fail(cu, r, "cuDeviceGetCount");
  if (count == 0) return gpucc_fail(GPUCC_ERR_NO_DEVICE, "no CUDA device: the driver sees none");
  if (device < 0 || device >= count)
    return gpucc_fail(GPUCC_ERR_NO_DEVICE, "no CUDA device %d: the driver sees %d (0 to %d)",
                      device, count, count - 1);
  if ((r = cu->cuDeviceGet(dev, device))) return gpucc_cu_fail(cu, r, "cuDeviceGet(%d)", device);
  return GPUCC_OK;
}

static GpuccStatus open_device(GpuccModel *m, int device) {
  const CuApi *cu = m->cu;
  CUresult r;
  GpuccStatus st = get_device(cu, device, &m->dev);
  if (st) return st;
  if ((r = cu->cuDevicePrimaryCtxRetain(&m->ctx, m->dev))) {
    m->ctx = NULL;
    return gpucc_cu_fail(cu, r, "cuDevicePrimaryCtxRetain(device %d)", device);
  }
  return GPUCC_OK;
}

/* A fixed plan as one class without symbols (its steps, its arena, its tensors' offsets),
 * so that everything after create's start has one path over classes. */
static GpuccStatus as_one_class(GpuccPlan *p) {
  GpuccClass *c = calloc(1, sizeof *c);
  uint64_t *in = calloc((size_t)p->ninputs + 1, sizeof *in),
           *out = calloc((size_t)p->noutputs + 1, sizeof *out);
  if (!c || !in || !out) {
    free(c);
    free(in);
    free(out);
    return gpucc_fail(GPUCC_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  for (int i = 0; i < p->ninputs; i++) in[i] = p->inputs[i].offset;
  for (int i = 0; i < p->noutputs; i++) out[i] = p->outputs[i].offset;
  *c = (GpuccClass){.arena_bytes = p->arena_bytes, .input_offset = in, .output_offset = out,
                    .steps = p->steps, .nsteps = p->nsteps, .cap_steps_ = p->cap_steps_};
  p->steps = NULL;
  p->nsteps = p->cap_steps_ = 0;
  p->classes = c;
  p->nclasses = p->cap_classes_ = 1;
  return GPUCC_OK;
}

/* The classes as create and run see them: a fixed plan's one, the largest class (what
 * run runs, and what gpucc_model_time times before any run), and the dims run takes. */
static GpuccStatus init_classes(GpuccModel *m) {
  GpuccPlan *p = m->plan;
  GpuccStatus st;
  if (!p->nsyms && (st = as_one_class(p))) return st;
  int64_t largest[GPUCC_MAX_SYMBOLS] = {0};
  for (int k = 0; k < p->nsyms; k++) largest[k] = gpucc_symbol_largest(&p->syms[k]);
  m->largest = pick_class(p, largest);
  m->rows = -1;
  for (int k = 0; k < p->nsyms && m->rows < 0; k++)
    if (p->syms[k].flags & GPUCC_SYMBOL_ROWS) m->rows = k;
  /* A run's chunks cover one unit of rows each at least (choose_chunks). */
  int64_t most = m->rows < 0 ? 1 : largest[m->rows];
  m->cells = (int)(most < CHUNK_CELLS ? most : CHUNK_CELLS) + 1;
  if (!(m->largest_dims = calloc((size_t)p->ninputs + 1, sizeof *m->largest_dims)) ||
      !(m->chunks = calloc((size_t)m->cells, sizeof *m->chunks)) ||
      !(m->next = calloc((size_t)m->cells, sizeof *m->next)) ||
      (m->rows >= 0 && (!(m->dp_cost = calloc((size_t)m->cells, sizeof *m->dp_cost)) ||
                        !(m->dp_count = calloc((size_t)m->cells, sizeof *m->dp_count)) ||
                        !(m->dp_pick = calloc((size_t)m->cells, sizeof *m->dp_pick)))))
    return gpucc_fail(GPUCC_ERR_OUT_OF_MEMORY, "out of host memory");
  for (int i = 0; i < p->ninputs; i++) m->largest_dims[i] = p->inputs[i].dims;
  /* Before any run, gpucc_model_time times the largest class. */
  m->last.cls = m->largest;
  memcpy(m->last.size, largest, sizeof largest);
  m->chunks[0] = (Chunk){m->largest, 0, m->rows < 0 ? 0 : largest[m->rows]};
  m->nchunks = 1;
  return GPUCC_OK;
}

/* Everything after the context: run with it current. */
static GpuccStatus build(GpuccModel *m, const void *weights) {
  GpuccStatus st;
  CUresult r;
  if ((st = alloc_memory(m, weights)) || (st = load_modules(m)) || (st = prepare_steps(m)))
    return st;
  if ((r = m->cu->cuStreamCreate(&m->stream, CU_STREAM_NON_BLOCKING)))
    return gpucc_cu_fail(m->cu, r, "cuStreamCreate");
  Tuning t = {0};
  bool off = false;
  if ((st = tuning_of_env(&t, &off)) || (st = tune(m, &t, off))) return st;
  /* Zeroed after the GEMM candidates wrote into it (and again after cost_classes'
   * replays, which read it: no index a kernel reads is garbage). */
  if ((st = zero_arena(m))) return st;
  for (int c = 0; c < m->plan->nclasses && !m->debug; c++)
    if (m->classes[c].nsteps && (st = capture_graph(m, c))) return st;
  return cost_classes(m, !off, t.log);
}

GpuccStatus gpucc_model_create(const void *plan, size_t plan_len, const void *weights,
                               size_t weights_len, int device, GpuccModel **out) {
  if (!out || !plan || (weights_len && !weights))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_model_create: NULL argument");
  *out = NULL;
  GpuccModel *m = calloc(1, sizeof *m);
  if (!m) return gpucc_fail(GPUCC_ERR_OUT_OF_MEMORY, "out of host memory");
  GpuccStatus st = gpucc_plan_parse(plan, plan_len, &m->plan);
  m->plan_hash = gpucc_fnv1a64(plan, plan_len);
  if (!st) st = init_classes(m);
  if (!st && weights_len != m->plan->weights_bytes)
    st = gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "weights: %zu bytes given, the plan needs %llu",
                    weights_len, (unsigned long long)m->plan->weights_bytes);
  if (!st) m->cu = gpucc_cuda(&st); /* NULL with st and the message set */
  if (!st) st = open_device(m, device);
  if (!st) {
    const char *dbg = getenv("GPUCC_RUNTIME_DEBUG");
    m->debug = dbg && dbg[0] && strcmp(dbg, "0");
    if (!(st = push_ctx(m))) {
      st = build(m, weights);
      pop_ctx(m);
    }
  }
  if (st) {
    gpucc_model_destroy(m);
    return st;
  }
  *out = m;
  return GPUCC_OK;
}

void gpucc_model_destroy(GpuccModel *m) {
  if (!m) return;
  const CuApi *cu = m->cu;
  /* Errors are ignored: after a sticky device error every call fails, and destroy must
   * still free host memory and release the context. */
  if (m->ctx && cu->cuCtxPushCurrent(m->ctx) == CUDA_SUCCESS) {
    cu->cuCtxSynchronize(); /* a run may still be using the arena */
    for (int c = 0; m->classes && c < m->plan->nclasses; c++) {
      if (m->classes[c].exec) cu->cuGraphExecDestroy(m->classes[c].exec);
      if (m->classes[c].graph) cu->cuGraphDestroy(m->classes[c].graph);
    }
    for (int i = 0; i < m->nsteps; i++) {
      Gemm *G = &m->steps[i].gemm;
      for (int j = 0; j < 4; j++)
        if (G->layout[j]) m->lt->cublasLtMatrixLayoutDestroy(G->layout[j]);
      if (G->desc) m->lt->cublasLtMatmulDescDestroy(G->desc);
    }
    if (m->lt_handle) m->lt->cublasLtDestroy(m->lt_handle);
    for (int i = 0; m->modules && i < m->plan->nmodules; i++)
      if (m->modules[i]) cu->cuModuleUnload(m->modules[i]);
    if (m->stream) cu->cuStreamDestroy(m->stream);
    if (m->arena) cu->cuMemFree(m->arena);
    if (m->weights) cu->cuMemFree(m->weights);
    if (m->workspace) cu->cuMemFree(m->workspace);
    if (m->pinned) cu->cuMemFreeHost(m->pinned);
    pop_ctx(m);
  }
  if (m->ctx) cu->cuDevicePrimaryCtxRelease(m->dev);
  for (int i = 0; i < m->nsteps; i++) {
    free(m->steps[i].launch.vals);
    free(m->steps[i].launch.params);
    free(m->steps[i].gemm.cand);
  }
  free(m->modules);
  free(m->steps);
  free(m->classes);
  free(m->largest_dims);
  free(m->chunks);
  free(m->next);
  free(m->dp_cost);
  free(m->dp_count);
  free(m->dp_pick);
  free(m->stage_in);
  free(m->stage_out);
  gpucc_plan_free(m->plan);
  free(m);
}

/* ---------------------------------------------------------------- metadata and checks */

static const GpuccTensorInfo *tensor(const GpuccModel *m, bool input, int i) {
  if (!m) return NULL;
  int n = input ? m->plan->ninputs : m->plan->noutputs;
  if (i < 0 || i >= n) return NULL;
  return input ? &m->plan->inputs[i] : &m->plan->outputs[i];
}

int gpucc_model_num_inputs(const GpuccModel *m) { return m ? m->plan->ninputs : 0; }
int gpucc_model_num_outputs(const GpuccModel *m) { return m ? m->plan->noutputs : 0; }

#define ACCESSORS(kind, input)                                                                \
  const char *gpucc_model_##kind##_name(const GpuccModel *m, int i) {                        \
    const GpuccTensorInfo *t = tensor(m, input, i);                                           \
    return t ? t->name : NULL;                                                                \
  }                                                                                           \
  GpuccDType gpucc_model_##kind##_dtype(const GpuccModel *m, int i) {                        \
    const GpuccTensorInfo *t = tensor(m, input, i);                                           \
    return t ? t->dtype : GPUCC_DT_INVALID;                                                   \
  }                                                                                           \
  int gpucc_model_##kind##_rank(const GpuccModel *m, int i) {                                \
    const GpuccTensorInfo *t = tensor(m, input, i);                                           \
    return t ? t->rank : -1;                                                                  \
  }                                                                                           \
  const int64_t *gpucc_model_##kind##_dims(const GpuccModel *m, int i) {                     \
    const GpuccTensorInfo *t = tensor(m, input, i);                                           \
    return t ? t->dims : NULL;                                                                \
  }                                                                                           \
  size_t gpucc_model_##kind##_bytes(const GpuccModel *m, int i) {                            \
    const GpuccTensorInfo *t = tensor(m, input, i);                                           \
    return t ? (size_t)tensor_bytes(t) : 0;                                                   \
  }
ACCESSORS(input, true)
ACCESSORS(output, false)
#undef ACCESSORS

int gpucc_model_num_symbols(const GpuccModel *m) { return m ? m->plan->nsyms : 0; }

const char *gpucc_model_symbol_name(const GpuccModel *m, int k) {
  return m && k >= 0 && k < m->plan->nsyms ? m->plan->syms[k].name : NULL;
}

int gpucc_model_num_classes(const GpuccModel *m) { return m ? m->plan->nclasses : 0; }

GpuccStatus gpucc_model_class_bounds(const GpuccModel *m, int c, int64_t *bound) {
  if (!m || (!bound && m->plan->nsyms))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_model_class_bounds: NULL argument");
  if (c < 0 || c >= m->plan->nclasses)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "class %d out of range (the model has %d)", c,
                      m->plan->nclasses);
  for (int k = 0; k < m->plan->nsyms; k++) bound[k] = m->plan->classes[c].bound[k];
  return GPUCC_OK;
}

int gpucc_model_class_kernels(const GpuccModel *m, int c) {
  return m && !m->debug && c >= 0 && c < m->plan->nclasses ? m->classes[c].kernels : -1;
}

int gpucc_model_kernels(const GpuccModel *m) { return m ? gpucc_model_class_kernels(m, m->largest) : -1; }

GpuccStatus gpucc_model_input_range(const GpuccModel *m, int i, int axis, int64_t *lo,
                                    int64_t *hi) {
  const GpuccTensorInfo *t = tensor(m, true, i);
  if (!m || !lo || !hi)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_model_input_range: NULL argument");
  if (!t)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "input index %d out of range (the model has %d)",
                      i, m->plan->ninputs);
  if (axis < 0 || axis >= t->rank)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "input '%s': axis %d out of range (rank %d)",
                      t->name, axis, t->rank);
  if (t->sym[axis] < 0) {
    *lo = *hi = t->dims[axis];
  } else {
    const GpuccSymbol *s = &m->plan->syms[t->sym[axis]];
    *lo = s->lo[0];
    *hi = gpucc_symbol_largest(s);
  }
  return GPUCC_OK;
}

GpuccStatus gpucc_model_check_num_inputs(const GpuccModel *m, int n) {
  if (!m) return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_model_check_num_inputs: NULL model");
  if (n != m->plan->ninputs)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "the model takes %d input%s, got %d",
                      m->plan->ninputs, m->plan->ninputs == 1 ? "" : "s", n);
  return GPUCC_OK;
}

int gpucc_model_find_input(const GpuccModel *m, const char *name) {
  if (!m || !name) {
    gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_model_find_input: NULL argument");
    return -1;
  }
  for (int i = 0; i < m->plan->ninputs; i++)
    if (!strcmp(m->plan->inputs[i].name, name)) return i;
  char list[1024] = "";
  size_t used = 0;
  for (int i = 0; i < m->plan->ninputs && used < sizeof list; i++)
    used += (size_t)snprintf(list + used, sizeof list - used, "%s'%s'", i ? ", " : "",
                             m->plan->inputs[i].name);
  gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "the model has no input named '%s' (its inputs: %s)",
             name, m->plan->ninputs ? list : "none");
  return -1;
}

/* Input i's dims, axis by axis: a fixed axis must be its dim, a ranged one a size of its
 * symbol k and, when an input gave k a size before (from[k] is not -1), the same size;
 * else the size is recorded in size[k] and from[k]. */
static GpuccStatus check_axes(const GpuccModel *m, int i, const int64_t *dims, int64_t *size,
                              int *from) {
  const GpuccPlan *p = m->plan;
  const GpuccTensorInfo *t = &p->inputs[i];
  for (int d = 0; d < t->rank; d++) {
    int k = t->sym[d];
    long long v = dims[d];
    if (k < 0) {
      if (v != t->dims[d])
        return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "input '%s': dim %d is %lld, expected %lld",
                          t->name, d, v, (long long)t->dims[d]);
      continue;
    }
    const GpuccSymbol *s = &p->syms[k];
    if (!gpucc_symbol_has(s, v)) {
      char sizes[512];
      gpucc_format_sizes(sizes, sizeof sizes, s);
      return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT,
                        "input '%s': dim %d ('%s') is %lld, outside its range %s", t->name, d,
                        s->name, v, sizes);
    }
    if (from[k] >= 0 && v != size[k])
      return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT,
                        "input '%s': dim %d ('%s') is %lld, but input '%s' has %lld", t->name, d,
                        s->name, v, p->inputs[from[k]].name, (long long)size[k]);
    if (from[k] < 0) {
      from[k] = i;
      size[k] = v;
    }
  }
  return GPUCC_OK;
}

GpuccStatus gpucc_model_check_input(const GpuccModel *m, int i, GpuccDType dtype, int rank,
                                    const int64_t *dims) {
  const GpuccTensorInfo *t = tensor(m, true, i);
  if (!t)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "input index %d out of range (the model has %d)",
                      i, gpucc_model_num_inputs(m));
  /* A fixed model's dims are part of the type it names; a ranged model's are checked axis
   * by axis, as run_dims checks them. */
  bool same = dtype == t->dtype && rank == t->rank && (rank == 0 || dims);
  for (int d = 0; same && !m->plan->nsyms && d < rank; d++) same = dims[d] == t->dims[d];
  if (same) {
    int64_t size[GPUCC_MAX_SYMBOLS] = {0};
    int from[GPUCC_MAX_SYMBOLS];
    for (int k = 0; k < GPUCC_MAX_SYMBOLS; k++) from[k] = -1;
    return check_axes(m, i, dims, size, from);
  }
  char want[1024], got[256];
  gpucc_format_type(want, sizeof want, t->dtype, t->rank, t->dims, t->sym, m->plan->syms);
  if (rank < 0 || rank > GPUCC_MAX_RANK || (rank && !dims))
    snprintf(got, sizeof got, "%s of rank %d", gpucc_dtype_name(dtype), rank);
  else
    gpucc_format_type(got, sizeof got, dtype, rank, dims, NULL, NULL);
  return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "input '%s': expected %s, got %s", t->name, want, got);
}

/* The sizes the inputs' dims give the symbols (each symbol is an axis of an input), and
 * the class a run at them takes. */
static GpuccStatus shape_of(const GpuccModel *m, const int64_t *const *input_dims,
                            const char *fn, Shape *sh) {
  const GpuccPlan *p = m->plan;
  if (p->ninputs && !input_dims)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "%s: NULL input_dims", fn);
  int from[GPUCC_MAX_SYMBOLS];
  for (int k = 0; k < GPUCC_MAX_SYMBOLS; k++) from[k] = -1;
  for (int i = 0; i < p->ninputs; i++) {
    if (p->inputs[i].rank && !input_dims[i])
      return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "%s: the dims of input %d '%s' are NULL", fn,
                        i, p->inputs[i].name);
    GpuccStatus st = check_axes(m, i, input_dims[i], sh->size, from);
    if (st) return st;
  }
  sh->cls = pick_class(p, sh->size);
  return GPUCC_OK;
}

/* Each output's dims at the run's sizes, into dims[j] (a NULL entry skipped). */
static void put_output_dims(const GpuccModel *m, const Shape *sh, int64_t *const *dims) {
  for (int j = 0; j < m->plan->noutputs; j++)
    if (dims[j]) gpucc_dims_at(&m->plan->outputs[j], sh->size, dims[j]);
}

GpuccStatus gpucc_model_output_dims_for(const GpuccModel *m, const int64_t *const *input_dims,
                                        int64_t *const *output_dims) {
  const char *fn = "gpucc_model_output_dims_for";
  if (!m || (m->plan->noutputs && !output_dims))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "%s: NULL argument", fn);
  Shape sh;
  GpuccStatus st = shape_of(m, input_dims, fn, &sh);
  if (!st) put_output_dims(m, &sh, output_dims);
  return st;
}

/* ---------------------------------------------------------------- run */

/* A tensor's bytes are 0 at every size when they are at the largest: sizes are 1 or more. */
static GpuccStatus check_buffers(const GpuccModel *m, const void *const *in, void *const *out,
                                 const char *fn) {
  if (!m) return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "%s: NULL model", fn);
  const GpuccPlan *p = m->plan;
  if ((p->ninputs && !in) || (p->noutputs && !out))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "%s: NULL input or output array", fn);
  for (int i = 0; i < p->ninputs; i++)
    if (!in[i] && tensor_bytes(&p->inputs[i]))
      return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "%s: input %d '%s' is NULL", fn, i, p->inputs[i].name);
  for (int i = 0; i < p->noutputs; i++)
    if (!out[i] && tensor_bytes(&p->outputs[i]))
      return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "%s: output %d '%s' is NULL", fn, i,
                        p->outputs[i].name);
  return GPUCC_OK;
}

/* The steps of class c on the caller's stream: its graph, or in debug mode one by one
 * with a synchronization after each so that an asynchronous fault is pinned on its step. */
static GpuccStatus launch(GpuccModel *m, int c, CUstream s) {
  const CuApi *cu = m->cu;
  const Class *k = &m->classes[c];
  CUresult r;
  if (!m->debug) {
    char label[LABEL_BYTES];
    if (k->exec && (r = cu->cuGraphLaunch(k->exec, s)))
      return gpucc_cu_fail(cu, r, "%scuGraphLaunch" DEBUG_HINT, class_label(m, c, label, sizeof label));
    return GPUCC_OK;
  }
  for (int i = k->first; i < k->first + k->nsteps; i++) {
    if (m->steps[i].skip) continue;
    GpuccStatus st = enqueue_step(m, i, s);
    if (st) return st;
    if ((r = cu->cuStreamSynchronize(s))) {
      char label[LABEL_BYTES];
      return gpucc_cu_fail(cu, r, "%s failed (GPUCC_RUNTIME_DEBUG)", step_label(m, i, label, sizeof label));
    }
  }
  return GPUCC_OK;
}

/* One side of a copy: a tensor dense at dims, in device memory or (host not NULL) in
 * pinned host memory. The box copied starts at its origin, or with `at` at index at of
 * axis `axis` (a chunk's rows in the caller's tensor). */
typedef struct Side {
  CUdeviceptr dev;
  unsigned char *host;
  const int64_t *dims;
  int axis;
  int64_t at;
} Side;

/* Side s moved to the start of its box: a box at index `at` of an axis is the box at the
 * origin of the tensor that starts `at` of that axis's strides later. */
static Side box_start(Side s, const uint64_t *stride) {
  uint64_t shift = (uint64_t)s.at * stride[s.axis];
  if (s.host) s.host += shift;
  else s.dev += shift;
  s.at = 0;
  return s;
}

/* Copies the box real[0 .. rank) at each side's start (box_start) from a tensor dense at
 * src.dims into one dense at dst.dims (each side at least the box), in elements of e
 * bytes. Let k be the innermost axis at which either side is larger than the box: inside
 * it both sides are the box, so each index of axes 0 .. k-1 holds one contiguous run of
 * bytes on each side. The runs over axes k-1 and k-2 are one 3D copy, axes further out a
 * loop of them. When k is 0 (the box is both sides' first bytes) or there is no such
 * axis, one flat copy. */
static CUresult copy_box(const CuApi *cu, Side dst, Side src, int rank, const int64_t *real,
                         size_t e, CUstream s) {
  int k = rank - 1;
  while (k >= 0 && real[k] == src.dims[k] && real[k] == dst.dims[k]) k--;
  uint64_t sstride[GPUCC_MAX_RANK] = {0}, dstride[GPUCC_MAX_RANK] = {0}, bytes = e; /* per index of an axis */
  for (int d = rank - 1; d >= 0; d--) {
    sstride[d] = d == rank - 1 ? e : sstride[d + 1] * (uint64_t)src.dims[d + 1];
    dstride[d] = d == rank - 1 ? e : dstride[d + 1] * (uint64_t)dst.dims[d + 1];
    bytes *= (uint64_t)real[d];
  }
  if (src.at) src = box_start(src, sstride);
  if (dst.at) dst = box_start(dst, dstride);
  if (k <= 0) {
    if (src.host) return cu->cuMemcpyHtoDAsync(dst.dev, src.host, bytes, s);
    if (dst.host) return cu->cuMemcpyDtoHAsync(dst.host, src.dev, bytes, s);
    return cu->cuMemcpyDtoDAsync(dst.dev, src.dev, bytes, s);
  }
  CUDA_MEMCPY3D c;
  memset(&c, 0, sizeof c);
  c.srcMemoryType = src.host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  c.dstMemoryType = dst.host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  c.WidthInBytes = (size_t)((uint64_t)real[k] * sstride[k]);
  c.Height = (size_t)real[k - 1];
  c.Depth = k >= 2 ? (size_t)real[k - 2] : 1;
  c.srcPitch = (size_t)sstride[k - 1];
  c.dstPitch = (size_t)dstride[k - 1];
  c.srcHeight = (size_t)src.dims[k - 1];
  c.dstHeight = (size_t)dst.dims[k - 1];
  int64_t idx[GPUCC_MAX_RANK] = {0}; /* of axes 0 .. k-3, row-major */
  for (;;) {
    uint64_t so = 0, dof = 0;
    for (int d = 0; d < k - 2; d++) {
      so += (uint64_t)idx[d] * sstride[d];
      dof += (uint64_t)idx[d] * dstride[d];
    }
    if (src.host) c.srcHost = src.host + so;
    else c.srcDevice = src.dev + so;
    if (dst.host) c.dstHost = dst.host + dof;
    else c.dstDevice = dst.dev + dof;
    CUresult r = cu->cuMemcpy3DAsync(&c, s);
    if (r) return r;
    int d = k - 3;
    while (d >= 0 && ++idx[d] == real[d]) idx[d--] = 0;
    if (d < 0) return CUDA_SUCCESS;
  }
}

/* The sizes chunk ch of a run at sh runs at: the run's, but the rows symbol's, which is
 * the chunk's rows. */
static void chunk_sizes(const GpuccModel *m, const Shape *sh, const Chunk *ch, int64_t *size) {
  memcpy(size, sh->size, sizeof sh->size);
  if (m->rows >= 0) size[m->rows] = ch->len;
}

/* Tensor t between its slot at offset in chunk ch's class and theirs, where it is dense at
 * the run's dims: into the slot for an input, zeroing the slot first when the chunk's dims
 * are not the class's (so the padding is 0), out of it for an output. The chunk's part of
 * theirs is its rows along t's rows axis; a tensor without one is whole in every chunk. */
static CUresult move_tensor(const GpuccModel *m, const Shape *sh, const Chunk *ch,
                            const GpuccTensorInfo *t, uint64_t offset, Side theirs, bool input,
                            CUstream s) {
  int64_t size[GPUCC_MAX_SYMBOLS], real[GPUCC_MAX_RANK], whole[GPUCC_MAX_RANK],
      full[GPUCC_MAX_RANK];
  chunk_sizes(m, sh, ch, size);
  gpucc_dims_at(t, size, real);
  gpucc_dims_at(t, sh->size, whole);
  gpucc_dims_at(t, m->plan->classes[ch->cls].bound, full);
  Side slot = {.dev = m->arena + offset, .dims = full};
  theirs.dims = whole;
  for (int d = 0; d < t->rank; d++)
    if (m->rows >= 0 && t->sym[d] == m->rows) {
      theirs.axis = d;
      theirs.at = ch->r0;
    }
  size_t e = gpucc_dtype_size(t->dtype);
  if (!input) return copy_box(m->cu, theirs, slot, t->rank, real, e, s);
  CUresult r;
  if (memcmp(real, full, (size_t)t->rank * sizeof *real) &&
      (r = m->cu->cuMemsetD8Async(slot.dev, 0, bytes_at(t, full), s)))
    return r;
  return copy_box(m->cu, slot, theirs, t->rank, real, e, s);
}

/* The caller's buffer of input (or output) i as a side of a copy: their device memory, or
 * with host the pinned staging it passes through. */
static Side their_side(const GpuccModel *m, bool input, int i, const void *buf, bool host) {
  if (host) return (Side){.host = m->pinned + (input ? m->stage_in : m->stage_out)[i]};
  return (Side){.dev = (CUdeviceptr)(uintptr_t)buf};
}

/* Chunk ch of a run at sh on stream s: its class's sizes written, the inputs' parts into
 * its slots, its steps, the outputs' real boxes out to the chunk's rows of theirs. */
static GpuccStatus enqueue_chunk(GpuccModel *m, const Shape *sh, const Chunk *ch,
                                 const void *const *in, void *const *out, CUstream s,
                                 bool host) {
  const GpuccPlan *p = m->plan;
  const GpuccClass *cl = &p->classes[ch->cls];
  int64_t size[GPUCC_MAX_SYMBOLS], dims[GPUCC_MAX_RANK];
  CUresult r;
  chunk_sizes(m, sh, ch, size);
  GpuccStatus st = write_sizes(m, ch->cls, size, s);
  if (st) return st;
  for (int i = 0; i < p->ninputs; i++) {
    const GpuccTensorInfo *t = &p->inputs[i];
    gpucc_dims_at(t, size, dims);
    if (bytes_at(t, dims) &&
        (r = move_tensor(m, sh, ch, t, cl->input_offset[i], their_side(m, true, i, in[i], host),
                         true, s)))
      return gpucc_cu_fail(m->cu, r, "copying input '%s' into the arena", t->name);
  }
  if ((st = launch(m, ch->cls, s))) return st;
  for (int j = 0; j < p->noutputs; j++) {
    const GpuccTensorInfo *t = &p->outputs[j];
    gpucc_dims_at(t, size, dims);
    if (bytes_at(t, dims) &&
        (r = move_tensor(m, sh, ch, t, cl->output_offset[j],
                         their_side(m, false, j, out[j], host), false, s)))
      return gpucc_cu_fail(m->cu, r, "copying output '%s' out of the arena", t->name);
  }
  return GPUCC_OK;
}

/* A run at sh as chunks[0 .. n), one after the other on stream s. With host, in[] and
 * out[] are host memory and pass through the pinned staging: the inputs are copied into
 * it here, once for all chunks; the outputs are left in it (run_host takes them out after
 * synchronizing). */
static GpuccStatus enqueue_run(GpuccModel *m, const Shape *sh, const Chunk *chunks, int n,
                               const void *const *in, void *const *out, CUstream s, bool host) {
  int64_t dims[GPUCC_MAX_RANK];
  for (int i = 0; host && i < m->plan->ninputs; i++) {
    const GpuccTensorInfo *t = &m->plan->inputs[i];
    gpucc_dims_at(t, sh->size, dims);
    uint64_t bytes = bytes_at(t, dims);
    if (bytes) memcpy(m->pinned + m->stage_in[i], in[i], bytes);
  }
  GpuccStatus st = GPUCC_OK;
  for (int k = 0; k < n && !st; k++) st = enqueue_chunk(m, sh, &chunks[k], in, out, s, host);
  return st;
}

static GpuccStatus run_host(GpuccModel *m, const Shape *sh, const Chunk *chunks, int n,
                            const void *const *in, void *const *out, CUstream s) {
  GpuccStatus st = enqueue_run(m, sh, chunks, n, in, out, s, true);
  if (st) return st;
  CUresult r = m->cu->cuStreamSynchronize(s);
  if (r) return gpucc_cu_fail(m->cu, r, "cuStreamSynchronize after the run" DEBUG_HINT);
  int64_t dims[GPUCC_MAX_RANK];
  for (int j = 0; j < m->plan->noutputs; j++) {
    const GpuccTensorInfo *t = &m->plan->outputs[j];
    gpucc_dims_at(t, sh->size, dims);
    uint64_t bytes = bytes_at(t, dims);
    if (bytes) memcpy(out[j], m->pinned + m->stage_out[j], bytes);
  }
  return GPUCC_OK;
}

/* The more rows first (len holds a chunk's r_c here); the candidates' r_c differ, so
 * equal rows are the same class. */
static int cmp_rows_first(const void *a, const void *b) {
  const Chunk *x = a, *y = b;
  return (x->len < y->len) - (x->len > y->len);
}

/* The chunks a run at sh launches, into out (m->cells of room); their count. Without a
 * rows symbol: one, the class sh takes. Else the cover of the rows symbol's size b of
 * least cost (runtime.h, "Chunks") by the candidates, the classes that differ from sh's
 * only in the rows bound r_c:
 *   cost[0] = 0,  cost[n] = min over candidates c of cost_c + cost[max(0, n - r_c)]
 * ties to fewer chunks, then to the earlier class; pick[n] is the c taken.
 *
 * sh's class is a candidate, so b is at most the largest r_c: no chunks of the largest
 * class need taking greedily before the table. But b may be up to GPUCC_MAX_SIZE, so
 * above CHUNK_CELLS rows the table counts units of q = ceil(b / CHUNK_CELLS) rows, a
 * class credited with the floor(r_c / q) whole units it holds: never more rows than it
 * has, so the chunks still cover b.
 *
 * The chunks run the most rows first, each taking min(r_c, the rows left): only the last
 * may be padded. None is left without rows, as the cover of least cost holds no smaller
 * cover (costs are positive); but counted in units, a chunk credited less than its rows
 * may leave nothing to the last one, which is then dropped. */
static int choose_chunks(GpuccModel *m, const Shape *sh, Chunk *out) {
  const GpuccPlan *p = m->plan;
  int k = m->rows;
  if (k < 0) {
    out[0] = (Chunk){sh->cls, 0, 0};
    return 1;
  }
  int cand[GPUCC_MAX_CLASSES], ncand = 0;
  for (int c = 0; c < p->nclasses; c++) {
    bool same = true;
    for (int j = 0; j < p->nsyms; j++)
      same = same && (j == k || p->classes[c].bound[j] == p->classes[sh->cls].bound[j]);
    if (same) cand[ncand++] = c;
  }
  int64_t b = sh->size[k], q = (b + CHUNK_CELLS - 1) / CHUNK_CELLS;
  int need = (int)((b + q - 1) / q);
  double *cost = m->dp_cost;
  int *count = m->dp_count, *pick = m->dp_pick;
  cost[0] = 0;
  count[0] = 0;
  for (int n = 1; n <= need; n++) {
    pick[n] = -1;
    for (int i = 0; i < ncand; i++) {
      int c = cand[i];
      int64_t units = p->classes[c].bound[k] / q;
      if (!units) continue;
      int rest = units >= n ? 0 : n - (int)units;
      double v = m->classes[c].cost + cost[rest];
      if (pick[n] < 0 || v < cost[n] || (v == cost[n] && count[rest] + 1 < count[n])) {
        cost[n] = v;
        count[n] = count[rest] + 1;
        pick[n] = c;
      }
    }
  }
  int nchunks = 0;
  for (int n = need; n > 0; nchunks++) {
    int c = pick[n];
    int64_t units = p->classes[c].bound[k] / q;
    out[nchunks] = (Chunk){c, 0, p->classes[c].bound[k]}; /* len: r_c, until the rows are dealt */
    n = units >= n ? 0 : n - (int)units;
  }
  qsort(out, (size_t)nchunks, sizeof *out, cmp_rows_first);
  int used = 0;
  for (int64_t r0 = 0; used < nchunks && r0 < b; used++) {
    int64_t len = out[used].len < b - r0 ? out[used].len : b - r0;
    out[used].r0 = r0;
    out[used].len = len;
    r0 += len;
  }
  return used;
}

/* What every run function does: check the buffers and the dims, write the output dims,
 * run the chunks the dims take (through the pinned staging with host). */
static GpuccStatus run(GpuccModel *m, const void *const *in, const int64_t *const *input_dims,
                       void *const *out, int64_t *const *output_dims, void *cuda_stream,
                       bool host, const char *fn) {
  Shape sh;
  GpuccStatus st = check_buffers(m, in, out, fn);
  if (st || (st = shape_of(m, input_dims, fn, &sh))) return st;
  if (output_dims) put_output_dims(m, &sh, output_dims);
  int n = choose_chunks(m, &sh, m->next);
  if ((st = push_ctx(m))) return st;
  CUstream s = (CUstream)cuda_stream;
  st = host ? run_host(m, &sh, m->next, n, in, out, s)
            : enqueue_run(m, &sh, m->next, n, in, out, s, false);
  pop_ctx(m);
  if (!st) { /* what gpucc_model_time replays */
    Chunk *last = m->chunks;
    m->chunks = m->next;
    m->next = last;
    m->nchunks = n;
    m->last = sh;
  }
  return st;
}

GpuccStatus gpucc_model_run(GpuccModel *m, const void *const *inputs, void *const *outputs,
                            void *cuda_stream) {
  return run(m, inputs, m ? m->largest_dims : NULL, outputs, NULL, cuda_stream, false,
             "gpucc_model_run");
}

GpuccStatus gpucc_model_run_host(GpuccModel *m, const void *const *inputs, void *const *outputs,
                                 void *cuda_stream) {
  return run(m, inputs, m ? m->largest_dims : NULL, outputs, NULL, cuda_stream, true,
             "gpucc_model_run_host");
}

GpuccStatus gpucc_model_run_dims(GpuccModel *m, const void *const *inputs,
                                 const int64_t *const *input_dims, void *const *outputs,
                                 int64_t *const *output_dims, void *cuda_stream) {
  return run(m, inputs, input_dims, outputs, output_dims, cuda_stream, false,
             "gpucc_model_run_dims");
}

GpuccStatus gpucc_model_run_dims_host(GpuccModel *m, const void *const *inputs,
                                      const int64_t *const *input_dims, void *const *outputs,
                                      int64_t *const *output_dims, void *cuda_stream) {
  return run(m, inputs, input_dims, outputs, output_dims, cuda_stream, true,
             "gpucc_model_run_dims_host");
}

/* ---------------------------------------------------------------- timing and devices */

/* Each replay between its own pair of events, waited for before the next: the median of
 * one replay's GPU time, not of a queue of them. */
/* What the last run launched, on s: its class's graph, or each chunk's after the chunk's
 * sizes (the classes share the arena: one chunk's class may write where the next reads
 * its sizes, while a class leaves its own sizes alone). No copies. */
static GpuccStatus replay_last(GpuccModel *m, CUstream s) {
  for (int k = 0; k < m->nchunks; k++) {
    const Chunk *ch = &m->chunks[k];
    int64_t size[GPUCC_MAX_SYMBOLS];
    chunk_sizes(m, &m->last, ch, size);
    GpuccStatus st;
    if ((m->nchunks > 1 && (st = write_sizes(m, ch->cls, size, s))) || (st = launch(m, ch->cls, s)))
      return st;
  }
  return GPUCC_OK;
}

static GpuccStatus time_replays(GpuccModel *m, int warmup, int iters, CUstream s, float *ms,
                                CUevent ev[2]) {
  const CuApi *cu = m->cu;
  CUresult r;
  GpuccStatus st;
  for (int i = 0; i < warmup; i++)
    if ((st = replay_last(m, s))) return st;
  for (int i = 0; i < iters; i++) {
    if ((r = cu->cuEventRecord(ev[0], s))) return gpucc_cu_fail(cu, r, "cuEventRecord");
    if ((st = replay_last(m, s))) return st;
    if ((r = cu->cuEventRecord(ev[1], s))) return gpucc_cu_fail(cu, r, "cuEventRecord");
    if ((r = cu->cuEventSynchronize(ev[1])))
      return gpucc_cu_fail(cu, r, "cuEventSynchronize after replay %d" DEBUG_HINT, i);
    if ((r = cu->cuEventElapsedTime(&ms[i], ev[0], ev[1])))
      return gpucc_cu_fail(cu, r, "cuEventElapsedTime");
  }
  return GPUCC_OK;
}

GpuccStatus gpucc_model_time(GpuccModel *m, int warmup, int iters, void *cuda_stream,
                             float *median_ms) {
  if (!m || !median_ms) return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_model_time: NULL argument");
  if (warmup < 0 || iters < 1)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_model_time: %d warm-up runs and %d timed "
                      "runs (0 or more, 1 or more)", warmup, iters);
  float *ms = calloc((size_t)iters, sizeof *ms);
  if (!ms) return gpucc_fail(GPUCC_ERR_OUT_OF_MEMORY, "out of host memory");
  GpuccStatus st = push_ctx(m);
  if (st) {
    free(ms);
    return st;
  }
  const CuApi *cu = m->cu;
  CUevent ev[2];
  if (!(st = events_create(cu, ev)))
    st = time_replays(m, warmup, iters, (CUstream)cuda_stream, ms, ev);
  events_destroy(cu, ev);
  pop_ctx(m);
  if (!st) *median_ms = median(ms, iters);
  free(ms);
  return st;
}

int gpucc_model_last_chunks(const GpuccModel *m, int *classes, int max) {
  if (!m) return 0;
  for (int k = 0; classes && k < m->nchunks && k < max; k++) classes[k] = m->chunks[k].cls;
  return m->nchunks;
}

float gpucc_model_class_ms(const GpuccModel *m, int c) {
  return m && c >= 0 && c < m->plan->nclasses ? m->classes[c].ms : -1;
}

GpuccStatus gpucc_device_properties(int device, GpuccDeviceProperties *out) {
  if (!out)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_device_properties: NULL argument");
  memset(out, 0, sizeof *out);
  GpuccStatus st;
  const CuApi *cu = gpucc_cuda(&st);
  if (!cu) return st;
  CUdevice dev;
  CUresult r;
  if ((st = get_device(cu, device, &dev))) return st;
  if ((r = cu->cuDeviceGetName(out->name, (int)sizeof out->name, dev)))
    return gpucc_cu_fail(cu, r, "cuDeviceGetName");
  static const struct {
    CUdevice_attribute attr;
    size_t at;
    const char *what;
  } attrs[] = {
#define A(a, f) {CU_DEVICE_ATTRIBUTE_##a, offsetof(GpuccDeviceProperties, f), #a}
      A(COMPUTE_CAPABILITY_MAJOR, cc_major),
      A(COMPUTE_CAPABILITY_MINOR, cc_minor),
      A(MULTIPROCESSOR_COUNT, sms),
      A(MAX_SHARED_MEMORY_PER_BLOCK, smem_block),
      A(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, smem_block_optin),
      A(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, smem_sm),
      A(MAX_REGISTERS_PER_MULTIPROCESSOR, regs_sm),
      A(MAX_THREADS_PER_BLOCK, threads_block),
      A(MAX_THREADS_PER_MULTIPROCESSOR, threads_sm),
      A(MAX_BLOCKS_PER_MULTIPROCESSOR, blocks_sm),
      A(L2_CACHE_SIZE, l2_bytes),
      A(CLUSTER_LAUNCH, cluster_launch),
#undef A
  };
  for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
    if ((r = cu->cuDeviceGetAttribute((int *)((char *)out + attrs[i].at), attrs[i].attr, dev)))
      return gpucc_cu_fail(cu, r, "cuDeviceGetAttribute(%s)", attrs[i].what);
  return GPUCC_OK;
}

GpuccStatus gpucc_device_compute_capability(int device, int *major, int *minor) {
  if (!major || !minor)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_device_compute_capability: NULL argument");
  GpuccStatus st;
  const CuApi *cu = gpucc_cuda(&st);
  if (!cu) return st;
  CUdevice dev;
  CUresult r;
  if ((st = get_device(cu, device, &dev))) return st;
  if ((r = cu->cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)) ||
      (r = cu->cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)))
    return gpucc_cu_fail(cu, r, "cuDeviceGetAttribute(compute capability)");
  return GPUCC_OK;
}
