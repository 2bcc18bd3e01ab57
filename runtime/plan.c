/* plan.c: the plan, in memory and as bytes. Pure C, no CUDA: the compiler links it to
 * write plans, the runtime to read them.
 *
 * A plan comes from a file the user hands to a model.so loader, so the reader trusts
 * nothing: every length is checked against the bytes left before anything is allocated
 * from it, and a parsed plan goes through the same validation as a built one. Validation
 * is the runtime's only defense against a kernel or GEMM writing outside its memory, so
 * it checks the exact extent of every GEMM operand and every copy, not just its start.
 */
#include "runtime/runtime-impl.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- element types */

static const struct {
  const char *name;
  size_t size;
} dtypes[GPUCC_DT_COUNT] = {
    [GPUCC_DT_INVALID] = {"?", 0},      [GPUCC_DT_F32] = {"f32", 4},
    [GPUCC_DT_F16] = {"f16", 2},        [GPUCC_DT_BF16] = {"bf16", 2},
    [GPUCC_DT_F64] = {"f64", 8},        [GPUCC_DT_I64] = {"i64", 8},
    [GPUCC_DT_I32] = {"i32", 4},        [GPUCC_DT_I16] = {"i16", 2},
    [GPUCC_DT_I8] = {"i8", 1},          [GPUCC_DT_U8] = {"u8", 1},
    [GPUCC_DT_BOOL] = {"bool", 1},      [GPUCC_DT_F8E4M3] = {"f8e4m3", 1},
    [GPUCC_DT_F8E5M2] = {"f8e5m2", 1},
};

static bool dtype_ok(GpuccDType t) { return t > GPUCC_DT_INVALID && t < GPUCC_DT_COUNT; }

const char *gpucc_dtype_name(GpuccDType t) { return dtype_ok(t) ? dtypes[t].name : "?"; }
size_t gpucc_dtype_size(GpuccDType t) { return dtype_ok(t) ? dtypes[t].size : 0; }

bool gpucc_numel(const int64_t *dims, int rank, uint64_t *out) {
  uint64_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0 || __builtin_mul_overflow(n, (uint64_t)dims[i], &n) || n > INT64_MAX)
      return false;
  }
  *out = n;
  return true;
}

void gpucc_format_type(char *buf, size_t n, GpuccDType t, int rank, const int64_t *dims) {
  size_t used = (size_t)snprintf(buf, n, "%s[", gpucc_dtype_name(t));
  for (int i = 0; i < rank && used < n; i++)
    used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? "," : "", (long long)dims[i]);
  if (used < n) snprintf(buf + used, n - used, "]");
}

/* ---------------------------------------------------------------- builder */

GpuccPlan *gpucc_plan_new(uint64_t arena_bytes, uint64_t weights_bytes,
                          uint64_t workspace_bytes) {
  GpuccPlan *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->arena_bytes = arena_bytes;
  p->weights_bytes = weights_bytes;
  p->workspace_bytes = workspace_bytes;
  return p;
}

static void free_step(GpuccStep *s) {
  if (s->kind == GPUCC_STEP_KERNEL) {
    free(s->kernel.name);
    free(s->kernel.args);
  } else if (s->kind == GPUCC_STEP_CHOICE) {
    free(s->choice.label);
  }
}

void gpucc_plan_free(GpuccPlan *p) {
  if (!p) return;
  free(p->cubin);
  free(p->ptx);
  for (int i = 0; i < p->ninputs; i++) free(p->inputs[i].name);
  for (int i = 0; i < p->noutputs; i++) free(p->outputs[i].name);
  for (int i = 0; i < p->nsteps; i++) free_step(&p->steps[i]);
  free(p->inputs);
  free(p->outputs);
  free(p->steps);
  free(p);
}

static GpuccStatus oom(void) { return gpucc_fail(GPUCC_ERR_OUT_OF_MEMORY, "out of host memory"); }

/* Makes room for one more element of an array of `size`-byte elements. */
static GpuccStatus grow(void **arr, int *cap, int n, size_t size) {
  if (n < *cap) return GPUCC_OK;
  if (n >= INT_MAX / 2) return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "plan: too many entries");
  int ncap = *cap ? *cap * 2 : 8;
  void *a = realloc(*arr, (size_t)ncap * size);
  if (!a) return oom();
  *arr = a;
  *cap = ncap;
  return GPUCC_OK;
}

static GpuccStatus copy_name(const char *name, const char *what, char **out) {
  if (!name) return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "plan: %s has no name", what);
  size_t n = strlen(name);
  if (n == 0 || n > GPUCC_MAX_NAME)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "plan: %s name of %zu bytes (1 to %d)", what,
                      n, GPUCC_MAX_NAME);
  if (!(*out = malloc(n + 1))) return oom();
  memcpy(*out, name, n + 1);
  return GPUCC_OK;
}

GpuccStatus gpucc_plan_set_module(GpuccPlan *p, const void *cubin, size_t cubin_len,
                                  const char *ptx) {
  if (!p || (cubin_len && !cubin))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_set_module: NULL argument");
  unsigned char *c = NULL;
  char *x = NULL;
  size_t xlen = ptx ? strlen(ptx) : 0;
  if ((cubin_len && !(c = malloc(cubin_len))) || (xlen && !(x = malloc(xlen + 1)))) {
    free(c);
    return oom();
  }
  if (cubin_len) memcpy(c, cubin, cubin_len);
  if (xlen) memcpy(x, ptx, xlen + 1);
  free(p->cubin);
  free(p->ptx);
  p->cubin = c;
  p->cubin_len = cubin_len;
  p->ptx = x;
  p->ptx_len = xlen;
  return GPUCC_OK;
}

static GpuccStatus add_tensor(GpuccPlan *p, bool input, const char *name, GpuccDType dtype,
                              int rank, const int64_t *dims, uint64_t offset) {
  const char *what = input ? "input" : "output";
  if (!p) return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_add_%s: NULL plan", what);
  if (rank < 0 || rank > GPUCC_MAX_RANK || (rank && !dims))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "plan: %s '%s': rank %d (0 to %d)", what,
                      name ? name : "?", rank, GPUCC_MAX_RANK);
  GpuccTensorInfo **arr = input ? &p->inputs : &p->outputs;
  int *n = input ? &p->ninputs : &p->noutputs;
  int *cap = input ? &p->cap_inputs_ : &p->cap_outputs_;
  GpuccStatus st = grow((void **)arr, cap, *n, sizeof **arr);
  if (st) return st;
  GpuccTensorInfo t = {.dtype = dtype, .rank = rank, .offset = offset};
  if ((st = copy_name(name, what, &t.name))) return st;
  for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
  (*arr)[(*n)++] = t;
  return GPUCC_OK;
}

GpuccStatus gpucc_plan_add_input(GpuccPlan *p, const char *name, GpuccDType dtype, int rank,
                                 const int64_t *dims, uint64_t offset) {
  return add_tensor(p, true, name, dtype, rank, dims, offset);
}

GpuccStatus gpucc_plan_add_output(GpuccPlan *p, const char *name, GpuccDType dtype, int rank,
                                  const int64_t *dims, uint64_t offset) {
  return add_tensor(p, false, name, dtype, rank, dims, offset);
}

static GpuccStatus add_step(GpuccPlan *p, const GpuccStep *s) {
  if (!p) return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_add_*: NULL plan");
  GpuccStatus st = grow((void **)&p->steps, &p->cap_steps_, p->nsteps, sizeof *p->steps);
  if (st) return st;
  p->steps[p->nsteps++] = *s;
  return GPUCC_OK;
}

GpuccStatus gpucc_plan_add_kernel(GpuccPlan *p, const char *name, const uint32_t grid[3],
                                  const uint32_t block[3], uint32_t shared_bytes,
                                  const GpuccArg *args, int nargs) {
  if (!p || !grid || !block || (nargs && !args))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_add_kernel: NULL argument");
  if (nargs < 0 || nargs > GPUCC_MAX_KERNEL_ARGS)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "plan: kernel '%s': %d arguments (0 to %d)",
                      name ? name : "?", nargs, GPUCC_MAX_KERNEL_ARGS);
  GpuccStep s = {.kind = GPUCC_STEP_KERNEL};
  GpuccKernel *k = &s.kernel;
  GpuccStatus st = copy_name(name, "kernel", &k->name);
  if (st) return st;
  if (nargs && !(k->args = malloc((size_t)nargs * sizeof *args))) {
    free(k->name);
    return oom();
  }
  if (nargs) memcpy(k->args, args, (size_t)nargs * sizeof *args);
  k->nargs = nargs;
  k->shared_bytes = shared_bytes;
  memcpy(k->grid, grid, sizeof k->grid);
  memcpy(k->block, block, sizeof k->block);
  if ((st = add_step(p, &s))) free_step(&s);
  return st;
}

GpuccStatus gpucc_plan_add_gemm(GpuccPlan *p, const GpuccGemm *g) {
  if (!g) return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_add_gemm: NULL gemm");
  GpuccStep s = {.kind = GPUCC_STEP_GEMM, .gemm = *g};
  return add_step(p, &s);
}

GpuccStatus gpucc_plan_add_copy(GpuccPlan *p, GpuccPtr dst, GpuccPtr src, uint64_t bytes) {
  GpuccStep s = {.kind = GPUCC_STEP_COPY, .copy = {dst, src, bytes}};
  return add_step(p, &s);
}

GpuccStatus gpucc_plan_add_memset(GpuccPlan *p, GpuccPtr dst, uint64_t bytes, uint8_t value) {
  GpuccStep s = {.kind = GPUCC_STEP_MEMSET, .fill = {dst, bytes, value}};
  return add_step(p, &s);
}

GpuccStatus gpucc_plan_add_choice(GpuccPlan *p, const char *label, int nvariants,
                                  const uint32_t *count) {
  if (!count) return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_add_choice: NULL count");
  if (nvariants < 1 || nvariants > GPUCC_MAX_VARIANTS)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "plan: choice '%s': %d variants (1 to %d)",
                      label ? label : "?", nvariants, GPUCC_MAX_VARIANTS);
  GpuccStep s = {.kind = GPUCC_STEP_CHOICE};
  GpuccStatus st = copy_name(label, "choice", &s.choice.label);
  if (st) return st;
  s.choice.nvariants = nvariants;
  memcpy(s.choice.count, count, (size_t)nvariants * sizeof *count);
  if ((st = add_step(p, &s))) free_step(&s);
  return st;
}

/* ---------------------------------------------------------------- validation */

static GpuccStatus bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static GpuccStatus bad(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gpucc_vfail(GPUCC_ERR_BAD_PLAN, fmt, ap);
  va_end(ap);
  return GPUCC_ERR_BAD_PLAN;
}

static const char *region_name(GpuccRegion r) {
  return r == GPUCC_REGION_ARENA ? "arena" : r == GPUCC_REGION_WEIGHTS ? "weights" : "?";
}

static uint64_t region_size(const GpuccPlan *p, GpuccRegion r) {
  return r == GPUCC_REGION_ARENA ? p->arena_bytes : p->weights_bytes;
}

static bool region_ok(GpuccRegion r) {
  return r == GPUCC_REGION_ARENA || r == GPUCC_REGION_WEIGHTS;
}

/* Whether [ptr.offset, ptr.offset + bytes) lies in ptr's region; else an error that
 * starts with `what`. */
static GpuccStatus check_range(const GpuccPlan *p, const char *what, GpuccPtr ptr,
                               uint64_t bytes) {
  if (!region_ok(ptr.region)) return bad("%s: region %d is not arena or weights", what, (int)ptr.region);
  uint64_t size = region_size(p, ptr.region);
  if (ptr.offset > size || bytes > size - ptr.offset)
    return bad("%s: %llu bytes at %s offset %llu run past the %s (%llu bytes)", what,
               (unsigned long long)bytes, region_name(ptr.region),
               (unsigned long long)ptr.offset, region_name(ptr.region),
               (unsigned long long)size);
  return GPUCC_OK;
}

static bool name_ok(const char *s) { return s && s[0] && strlen(s) <= GPUCC_MAX_NAME; }

/* A kernel name is a C identifier: what an extern "C" __global__ function is called. */
static bool ident_ok(const char *s) {
  if (!name_ok(s) || (s[0] >= '0' && s[0] <= '9')) return false;
  for (; *s; s++) {
    char c = *s;
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
      return false;
  }
  return true;
}

static GpuccStatus check_tensors(const GpuccPlan *p, const GpuccTensorInfo *ts, int n,
                                 const char *what) {
  for (int i = 0; i < n; i++) {
    const GpuccTensorInfo *t = &ts[i];
    if (!name_ok(t->name)) return bad("plan: %s %d has an empty or overlong name", what, i);
    if (!dtype_ok(t->dtype)) return bad("plan: %s '%s': bad dtype %d", what, t->name, (int)t->dtype);
    if (t->rank < 0 || t->rank > GPUCC_MAX_RANK)
      return bad("plan: %s '%s': rank %d (0 to %d)", what, t->name, t->rank, GPUCC_MAX_RANK);
    uint64_t numel, bytes;
    if (!gpucc_numel(t->dims, t->rank, &numel) ||
        __builtin_mul_overflow(numel, gpucc_dtype_size(t->dtype), &bytes))
      return bad("plan: %s '%s': negative dim or size overflow", what, t->name);
    char label[GPUCC_MAX_NAME + 64];
    snprintf(label, sizeof label, "plan: %s '%s'", what, t->name);
    GpuccStatus st = check_range(p, label, gpucc_arena_ptr(t->offset), bytes);
    if (st) return st;
    if (t->offset % gpucc_dtype_size(t->dtype))
      return bad("%s: arena offset %llu is not a multiple of %zu", label,
                 (unsigned long long)t->offset, gpucc_dtype_size(t->dtype));
    for (int j = 0; j < i; j++)
      if (!strcmp(ts[j].name, t->name)) return bad("plan: two %ss named '%s'", what, t->name);
  }
  return GPUCC_OK;
}

static GpuccStatus check_kernel(const GpuccPlan *p, int i, const GpuccKernel *k) {
  if (!ident_ok(k->name)) return bad("plan: step %d: kernel name is not a C identifier", i);
  char label[GPUCC_MAX_NAME + 64];
  snprintf(label, sizeof label, "plan: step %d (kernel '%s')", i, k->name);
  if (!k->grid[0] || !k->grid[1] || !k->grid[2] || k->grid[0] > INT_MAX ||
      k->grid[1] > 65535 || k->grid[2] > 65535)
    return bad("%s: grid (%u,%u,%u) out of range", label, k->grid[0], k->grid[1], k->grid[2]);
  uint64_t threads = (uint64_t)k->block[0] * k->block[1] * k->block[2];
  if (!threads || threads > 1024 || k->block[2] > 64)
    return bad("%s: block (%u,%u,%u) out of range", label, k->block[0], k->block[1], k->block[2]);
  if (k->nargs < 0 || k->nargs > GPUCC_MAX_KERNEL_ARGS || (k->nargs && !k->args))
    return bad("%s: %d arguments", label, k->nargs);
  for (int a = 0; a < k->nargs; a++) {
    const GpuccArg *arg = &k->args[a];
    if (arg->kind == GPUCC_ARG_SCALAR) continue;
    if (arg->kind != GPUCC_ARG_PTR) return bad("%s: argument %d has kind %d", label, a, (int)arg->kind);
    /* A pointer argument carries no size: only its start is checked. A pointer at the
     * very end of a region is allowed for empty tensors. */
    char alabel[GPUCC_MAX_NAME + 96];
    snprintf(alabel, sizeof alabel, "%s argument %d", label, a);
    GpuccStatus st = check_range(p, alabel, arg->ptr, 0);
    if (st) return st;
  }
  return GPUCC_OK;
}

static bool gemm_types_ok(const GpuccGemm *g) {
  GpuccDType a = g->a_type, cd = g->cd_type;
  if (g->b_type != a) return false;
  switch (g->compute) {
  case GPUCC_COMPUTE_64F: return a == GPUCC_DT_F64 && cd == GPUCC_DT_F64;
  case GPUCC_COMPUTE_32F_FAST_TF32: return a == GPUCC_DT_F32 && cd == GPUCC_DT_F32;
  case GPUCC_COMPUTE_32F:
    if (a == GPUCC_DT_F32) return cd == GPUCC_DT_F32;
    /* e4m3: cuBLASLt's fp8 GEMMs take only op(A) = A^T, op(B) = B (the "TN" layout) */
    if (a == GPUCC_DT_F8E4M3)
      return g->trans_a == 1 && g->trans_b == 0 &&
             (cd == GPUCC_DT_F32 || cd == GPUCC_DT_BF16 || cd == GPUCC_DT_F16);
    return (a == GPUCC_DT_F16 || a == GPUCC_DT_BF16) && (cd == a || cd == GPUCC_DT_F32);
  }
  return false;
}

/* One GEMM operand: a rows x cols column-major matrix with leading dim ld, batch times,
 * stride elements apart. Checks ld and that its last byte is inside its region. */
static GpuccStatus check_matrix(const GpuccPlan *p, const char *label, char which, GpuccPtr ptr,
                                GpuccDType t, int64_t rows, int64_t cols, int64_t ld,
                                int64_t batch, int64_t stride) {
  if (ld < rows)
    return bad("%s: ld%c %lld is less than its %lld rows", label, which + 32, (long long)ld,
               (long long)rows);
  if (stride < 0) return bad("%s: stride_%c %lld is negative", label, which + 32, (long long)stride);
  uint64_t last, e = gpucc_dtype_size(t), tmp, bytes;
  /* last element = (batch-1)*stride + (cols-1)*ld + rows-1; bytes = (last+1)*e */
  if (__builtin_mul_overflow((uint64_t)(batch - 1), (uint64_t)stride, &last) ||
      __builtin_mul_overflow((uint64_t)(cols - 1), (uint64_t)ld, &tmp) ||
      __builtin_add_overflow(last, tmp, &last) || __builtin_add_overflow(last, (uint64_t)rows, &last) ||
      __builtin_mul_overflow(last, e, &bytes))
    return bad("%s: %c's extent overflows", label, which);
  char mlabel[128];
  snprintf(mlabel, sizeof mlabel, "%s: %c [%lldx%lld, ld %lld, batch %lld, stride %lld]", label,
           which, (long long)rows, (long long)cols, (long long)ld, (long long)batch,
           (long long)stride);
  GpuccStatus st = check_range(p, mlabel, ptr, bytes);
  if (st) return st;
  if (ptr.offset % e) return bad("%s: offset not a multiple of %llu", mlabel, (unsigned long long)e);
  return GPUCC_OK;
}

static GpuccStatus check_gemm(const GpuccPlan *p, int i, const GpuccGemm *g) {
  char label[64];
  snprintf(label, sizeof label, "plan: step %d (gemm)", i);
  if (!gemm_types_ok(g))
    return bad("%s: unsupported types a=%s b=%s c/d=%s with compute %d (trans %d %d)", label,
               gpucc_dtype_name(g->a_type), gpucc_dtype_name(g->b_type),
               gpucc_dtype_name(g->cd_type), (int)g->compute, g->trans_a, g->trans_b);
  if ((g->trans_a != 0 && g->trans_a != 1) || (g->trans_b != 0 && g->trans_b != 1))
    return bad("%s: trans_a/trans_b must be 0 or 1", label);
  if (g->m < 1 || g->n < 1 || g->k < 1 || g->m > INT32_MAX || g->n > INT32_MAX || g->k > INT32_MAX)
    return bad("%s: m=%lld n=%lld k=%lld (each 1 to 2^31-1)", label, (long long)g->m,
               (long long)g->n, (long long)g->k);
  if (g->batch < 1 || g->batch > INT32_MAX)
    return bad("%s: batch %lld (1 to 2^31-1)", label, (long long)g->batch);
  if (g->d.region != GPUCC_REGION_ARENA) return bad("%s: D must be in the arena", label);
  GpuccStatus st;
  if ((st = check_matrix(p, label, 'A', g->a, g->a_type, g->trans_a ? g->k : g->m,
                         g->trans_a ? g->m : g->k, g->lda, g->batch, g->stride_a)) ||
      (st = check_matrix(p, label, 'B', g->b, g->b_type, g->trans_b ? g->n : g->k,
                         g->trans_b ? g->k : g->n, g->ldb, g->batch, g->stride_b)) ||
      (st = check_matrix(p, label, 'C', g->c, g->cd_type, g->m, g->n, g->ldc, g->batch,
                         g->stride_c)) ||
      (st = check_matrix(p, label, 'D', g->d, g->cd_type, g->m, g->n, g->ldd, g->batch,
                         g->stride_d)))
    return st;
  if (g->epilogue < GPUCC_EPILOGUE_NONE || g->epilogue > GPUCC_EPILOGUE_LAST)
    return bad("%s: epilogue must be 0 to %d", label, GPUCC_EPILOGUE_LAST);
  if (g->epilogue != GPUCC_EPILOGUE_NONE) {
    char blabel[96];
    uint64_t e = gpucc_dtype_size(g->cd_type);
    snprintf(blabel, sizeof blabel, "%s: bias [%lld]", label, (long long)g->m);
    if ((st = check_range(p, blabel, g->bias, (uint64_t)g->m * e)))
      return st;
    if (g->bias.offset % e)
      return bad("%s: offset not a multiple of %llu", blabel, (unsigned long long)e);
  }
  int64_t dsize;
  if (g->batch > 1 && (__builtin_mul_overflow(g->ldd, g->n, &dsize) || g->stride_d < dsize))
    return bad("%s: stride_d %lld makes D's batches overlap (ldd %lld * n %lld)", label,
               (long long)g->stride_d, (long long)g->ldd, (long long)g->n);
  return GPUCC_OK;
}

/* A choice's variants are the steps after it: each at least one step, together no more
 * than the plan has left, and only kernels and GEMMs (a choice among copies would choose
 * nothing, and a choice within a choice is not a plan codegen writes). */
static GpuccStatus check_choice(const GpuccPlan *p, int i, const GpuccChoice *c) {
  if (!name_ok(c->label)) return bad("plan: step %d: choice has an empty or overlong label", i);
  if (c->nvariants < 1 || c->nvariants > GPUCC_MAX_VARIANTS)
    return bad("plan: step %d (choice '%s'): %d variants (1 to %d)", i, c->label, c->nvariants,
               GPUCC_MAX_VARIANTS);
  int64_t steps = 0;
  for (int v = 0; v < c->nvariants; v++) {
    if (c->count[v] < 1)
      return bad("plan: step %d (choice '%s'): variant %d has no steps", i, c->label, v);
    steps += c->count[v];
  }
  if (steps > p->nsteps - i - 1)
    return bad("plan: step %d (choice '%s'): its variants hold %lld steps, %d follow it", i,
               c->label, (long long)steps, p->nsteps - i - 1);
  for (int j = i + 1; j <= i + steps; j++)
    if (p->steps[j].kind != GPUCC_STEP_KERNEL && p->steps[j].kind != GPUCC_STEP_GEMM)
      return bad("plan: step %d (choice '%s'): step %d of its variants is not a kernel or a "
                 "GEMM", i, c->label, j);
  return GPUCC_OK;
}

static GpuccStatus check_step(const GpuccPlan *p, int i, const GpuccStep *s) {
  char label[96];
  switch (s->kind) {
  case GPUCC_STEP_KERNEL: return check_kernel(p, i, &s->kernel);
  case GPUCC_STEP_GEMM: return check_gemm(p, i, &s->gemm);
  case GPUCC_STEP_COPY: {
    const GpuccCopy *c = &s->copy;
    GpuccStatus st;
    snprintf(label, sizeof label, "plan: step %d (copy) destination", i);
    if (c->dst.region != GPUCC_REGION_ARENA) return bad("%s is not in the arena", label);
    if ((st = check_range(p, label, c->dst, c->bytes))) return st;
    snprintf(label, sizeof label, "plan: step %d (copy) source", i);
    if ((st = check_range(p, label, c->src, c->bytes))) return st;
    if (c->src.region == c->dst.region && c->bytes && c->src.offset < c->dst.offset + c->bytes &&
        c->dst.offset < c->src.offset + c->bytes)
      return bad("plan: step %d (copy): source and destination overlap", i);
    return GPUCC_OK;
  }
  case GPUCC_STEP_MEMSET:
    snprintf(label, sizeof label, "plan: step %d (memset)", i);
    if (s->fill.dst.region != GPUCC_REGION_ARENA) return bad("%s: destination is not in the arena", label);
    return check_range(p, label, s->fill.dst, s->fill.bytes);
  case GPUCC_STEP_CHOICE: return check_choice(p, i, &s->choice);
  }
  return bad("plan: step %d has kind %d", i, (int)s->kind);
}

GpuccStatus gpucc_plan_validate(const GpuccPlan *p) {
  if (!p) return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_validate: NULL plan");
  if ((p->cubin_len && !p->cubin) || (p->ptx_len && (!p->ptx || strlen(p->ptx) != p->ptx_len)))
    return bad("plan: module: inconsistent cubin or PTX length");
  GpuccStatus st;
  if ((st = check_tensors(p, p->inputs, p->ninputs, "input")) ||
      (st = check_tensors(p, p->outputs, p->noutputs, "output")))
    return st;
  bool kernels = false;
  for (int i = 0; i < p->nsteps; i++) {
    if ((st = check_step(p, i, &p->steps[i]))) return st;
    kernels |= p->steps[i].kind == GPUCC_STEP_KERNEL;
  }
  if (kernels && !p->cubin_len && !p->ptx_len)
    return bad("plan: kernel steps but no module (neither cubin nor PTX)");
  return GPUCC_OK;
}

/* ---------------------------------------------------------------- writing bytes */

enum { TAG_SIZES = 1, TAG_MODULE, TAG_INPUTS, TAG_OUTPUTS, TAG_STEPS, TAG_COUNT };
enum { HEADER_BYTES = 32, SECTION_HEADER_BYTES = 16 };

typedef struct Buf {
  unsigned char *p;
  size_t len, cap;
  bool oom;
} Buf;

static unsigned char *buf_room(Buf *b, size_t n) {
  if (b->oom) return NULL;
  if (b->cap - b->len < n) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) {
      if (cap > SIZE_MAX / 2) return b->oom = true, NULL;
      cap *= 2;
    }
    unsigned char *p = realloc(b->p, cap);
    if (!p) return b->oom = true, NULL;
    b->p = p;
    b->cap = cap;
  }
  unsigned char *at = b->p + b->len;
  b->len += n;
  return at;
}

static void put32(Buf *b, uint32_t v) {
  unsigned char *p = buf_room(b, 4);
  if (p) gpucc_wr32(p, v);
}
static void put64(Buf *b, uint64_t v) {
  unsigned char *p = buf_room(b, 8);
  if (p) gpucc_wr64(p, v);
}
static void putbytes(Buf *b, const void *src, size_t n) {
  unsigned char *p = buf_room(b, n);
  if (p && n) memcpy(p, src, n);
}
static void putstr(Buf *b, const char *s) {
  size_t n = strlen(s);
  put32(b, (uint32_t)n);
  putbytes(b, s, n + 1);
}
static void putptr(Buf *b, GpuccPtr p) {
  put32(b, (uint32_t)p.region);
  put32(b, 0);
  put64(b, p.offset);
}
static void putf64(Buf *b, double d) {
  uint64_t v;
  memcpy(&v, &d, sizeof v);
  put64(b, v);
}

/* Starts a section; returns where its length goes. */
static size_t begin_section(Buf *b, uint32_t tag) {
  put32(b, tag);
  put32(b, 0);
  size_t at = b->len;
  put64(b, 0);
  return at;
}
static void end_section(Buf *b, size_t at) {
  if (!b->oom) gpucc_wr64(b->p + at, b->len - at - 8);
}

static void put_tensors(Buf *b, const GpuccTensorInfo *ts, int n) {
  put32(b, (uint32_t)n);
  for (int i = 0; i < n; i++) {
    putstr(b, ts[i].name);
    put32(b, (uint32_t)ts[i].dtype);
    put32(b, (uint32_t)ts[i].rank);
    for (int d = 0; d < ts[i].rank; d++) put64(b, (uint64_t)ts[i].dims[d]);
    put64(b, ts[i].offset);
  }
}

static void put_step(Buf *b, const GpuccStep *s) {
  put32(b, (uint32_t)s->kind);
  switch (s->kind) {
  case GPUCC_STEP_KERNEL: {
    const GpuccKernel *k = &s->kernel;
    putstr(b, k->name);
    for (int i = 0; i < 3; i++) put32(b, k->grid[i]);
    for (int i = 0; i < 3; i++) put32(b, k->block[i]);
    put32(b, k->shared_bytes);
    put32(b, (uint32_t)k->nargs);
    for (int i = 0; i < k->nargs; i++) {
      const GpuccArg *a = &k->args[i];
      put32(b, (uint32_t)a->kind);
      put32(b, a->kind == GPUCC_ARG_PTR ? (uint32_t)a->ptr.region : 0);
      put64(b, a->kind == GPUCC_ARG_PTR ? a->ptr.offset : a->scalar);
    }
    break;
  }
  case GPUCC_STEP_GEMM: {
    const GpuccGemm *g = &s->gemm;
    putptr(b, g->a);
    putptr(b, g->b);
    putptr(b, g->c);
    putptr(b, g->d);
    const uint32_t u[] = {g->a_type, g->b_type, g->cd_type, g->compute,
                          (uint32_t)g->trans_a, (uint32_t)g->trans_b};
    for (size_t i = 0; i < sizeof u / sizeof *u; i++) put32(b, u[i]);
    const int64_t v[] = {g->m,     g->n,        g->k,        g->lda,      g->ldb,     g->ldc,
                         g->ldd,   g->batch,    g->stride_a, g->stride_b, g->stride_c,
                         g->stride_d};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) put64(b, (uint64_t)v[i]);
    putf64(b, g->alpha);
    putf64(b, g->beta);
    put32(b, (uint32_t)g->epilogue);
    putptr(b, g->bias); /* as it is, so a plan read back serializes to the same bytes */
    break;
  }
  case GPUCC_STEP_COPY:
    putptr(b, s->copy.dst);
    putptr(b, s->copy.src);
    put64(b, s->copy.bytes);
    break;
  case GPUCC_STEP_MEMSET:
    putptr(b, s->fill.dst);
    put64(b, s->fill.bytes);
    put32(b, s->fill.value);
    break;
  case GPUCC_STEP_CHOICE:
    putstr(b, s->choice.label);
    put32(b, (uint32_t)s->choice.nvariants);
    for (int v = 0; v < s->choice.nvariants; v++) put32(b, s->choice.count[v]);
    break;
  }
}

GpuccStatus gpucc_plan_serialize(const GpuccPlan *p, void **out, size_t *out_len) {
  if (!out || !out_len)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_serialize: NULL argument");
  GpuccStatus st = gpucc_plan_validate(p);
  if (st) return st;
  Buf b = {0};
  putbytes(&b, GPUCC_PLAN_MAGIC, 8);
  put32(&b, GPUCC_PLAN_VERSION);
  put32(&b, TAG_COUNT - 1);
  put64(&b, 0); /* body length and checksum, filled in below */
  put64(&b, 0);

  size_t at = begin_section(&b, TAG_SIZES);
  put64(&b, p->arena_bytes);
  put64(&b, p->weights_bytes);
  put64(&b, p->workspace_bytes);
  end_section(&b, at);

  at = begin_section(&b, TAG_MODULE);
  put64(&b, p->cubin_len);
  putbytes(&b, p->cubin, p->cubin_len);
  put64(&b, p->ptx_len);
  putbytes(&b, p->ptx, p->ptx_len);
  end_section(&b, at);

  at = begin_section(&b, TAG_INPUTS);
  put_tensors(&b, p->inputs, p->ninputs);
  end_section(&b, at);
  at = begin_section(&b, TAG_OUTPUTS);
  put_tensors(&b, p->outputs, p->noutputs);
  end_section(&b, at);

  at = begin_section(&b, TAG_STEPS);
  put32(&b, (uint32_t)p->nsteps);
  for (int i = 0; i < p->nsteps; i++) put_step(&b, &p->steps[i]);
  end_section(&b, at);

  if (b.oom) {
    free(b.p);
    return oom();
  }
  gpucc_wr64(b.p + 16, b.len - HEADER_BYTES);
  gpucc_wr64(b.p + 24, gpucc_fnv1a64(b.p + HEADER_BYTES, b.len - HEADER_BYTES));
  *out = b.p;
  *out_len = b.len;
  return GPUCC_OK;
}

/* ---------------------------------------------------------------- reading bytes */

/* A cursor over one section. The first failure sets the error; later reads return zeros
 * and fail too, so parsing code reads a whole record and checks once. */
typedef struct Reader {
  const unsigned char *p;
  size_t len, pos;
  const char *section;
  bool failed;
} Reader;

static const unsigned char *take(Reader *r, size_t n) {
  if (r->failed) return NULL;
  if (n > r->len - r->pos) {
    r->failed = true;
    bad("plan: section %s is truncated: %zu bytes wanted at byte %zu of %zu", r->section, n,
        r->pos, r->len);
    return NULL;
  }
  const unsigned char *at = r->p + r->pos;
  r->pos += n;
  return at;
}

static uint32_t get32(Reader *r) {
  const unsigned char *p = take(r, 4);
  return p ? gpucc_rd32(p) : 0;
}
static uint64_t get64(Reader *r) {
  const unsigned char *p = take(r, 8);
  return p ? gpucc_rd64(p) : 0;
}
static double getf64(Reader *r) {
  uint64_t v = get64(r);
  double d;
  memcpy(&d, &v, sizeof d);
  return d;
}

static GpuccStatus reader_fail(Reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static GpuccStatus reader_fail(Reader *r, const char *fmt, ...) {
  if (!r->failed) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    bad("plan: section %s at byte %zu: %s", r->section, r->pos, msg);
  }
  r->failed = true;
  return GPUCC_ERR_BAD_PLAN;
}

/* A string: u32 len, len bytes without a NUL, then a NUL. Points into the plan. */
static const char *getstr(Reader *r) {
  uint32_t n = get32(r);
  if (r->failed) return NULL;
  if (n == 0 || n > GPUCC_MAX_NAME) {
    reader_fail(r, "name of %u bytes (1 to %d)", n, GPUCC_MAX_NAME);
    return NULL;
  }
  const unsigned char *s = take(r, (size_t)n + 1);
  if (!s) return NULL;
  if (s[n] != 0 || memchr(s, 0, n)) {
    reader_fail(r, "name is not NUL-terminated or holds a NUL");
    return NULL;
  }
  return (const char *)s;
}

/* A u32 count of records of at least min_bytes each, bounded by the bytes left. */
static int getcount(Reader *r, size_t min_bytes, const char *what) {
  uint32_t n = get32(r);
  if (r->failed) return -1;
  if (n > INT_MAX || n > (r->len - r->pos) / min_bytes) {
    reader_fail(r, "%u %s cannot fit in the %zu bytes left", n, what, r->len - r->pos);
    return -1;
  }
  return (int)n;
}

static GpuccPtr getptr(Reader *r) {
  uint32_t region = get32(r), zero = get32(r);
  uint64_t off = get64(r);
  if (!r->failed && (!region_ok((GpuccRegion)region) || zero))
    reader_fail(r, "pointer with region %u and reserved word %u", region, zero);
  return (GpuccPtr){region == GPUCC_REGION_WEIGHTS ? GPUCC_REGION_WEIGHTS : GPUCC_REGION_ARENA, off};
}

static GpuccDType getdtype(Reader *r) {
  uint32_t t = get32(r);
  if (!r->failed && !dtype_ok((GpuccDType)t)) {
    reader_fail(r, "dtype %u", t);
    return GPUCC_DT_INVALID;
  }
  return (GpuccDType)t;
}

static GpuccStatus read_sizes(Reader *r, GpuccPlan *p) {
  p->arena_bytes = get64(r);
  p->weights_bytes = get64(r);
  p->workspace_bytes = get64(r);
  return r->failed ? GPUCC_ERR_BAD_PLAN : GPUCC_OK;
}

static GpuccStatus read_module(Reader *r, GpuccPlan *p) {
  uint64_t n = get64(r);
  const unsigned char *cubin = r->failed || n > SIZE_MAX ? NULL : take(r, (size_t)n);
  if (r->failed || (n && !cubin)) return reader_fail(r, "cubin of %llu bytes", (unsigned long long)n);
  uint64_t m = get64(r);
  const unsigned char *ptx = r->failed || m > SIZE_MAX ? NULL : take(r, (size_t)m);
  if (r->failed || (m && !ptx)) return reader_fail(r, "PTX of %llu bytes", (unsigned long long)m);
  if (m && memchr(ptx, 0, (size_t)m)) return reader_fail(r, "PTX holds a NUL byte");
  /* set_module wants a NUL-terminated PTX string. */
  char *x = malloc((size_t)m + 1);
  if (!x) return oom();
  if (m) memcpy(x, ptx, (size_t)m);
  x[m] = 0;
  GpuccStatus st = gpucc_plan_set_module(p, cubin, (size_t)n, m ? x : NULL);
  free(x);
  return st;
}

static GpuccStatus read_tensors(Reader *r, GpuccPlan *p, bool input) {
  int n = getcount(r, 4 + 2 + 4 + 4 + 8, input ? "inputs" : "outputs");
  for (int i = 0; i < n; i++) {
    const char *name = getstr(r);
    GpuccDType t = getdtype(r);
    uint32_t rank = get32(r);
    if (r->failed) return GPUCC_ERR_BAD_PLAN;
    if (rank > GPUCC_MAX_RANK) return reader_fail(r, "rank %u", rank);
    int64_t dims[GPUCC_MAX_RANK];
    for (uint32_t d = 0; d < rank; d++) dims[d] = (int64_t)get64(r);
    uint64_t off = get64(r);
    if (r->failed) return GPUCC_ERR_BAD_PLAN;
    GpuccStatus st = add_tensor(p, input, name, t, (int)rank, dims, off);
    if (st) return st;
  }
  return r->failed ? GPUCC_ERR_BAD_PLAN : GPUCC_OK;
}

static GpuccStatus read_kernel(Reader *r, GpuccPlan *p) {
  const char *name = getstr(r);
  uint32_t grid[3], block[3];
  for (int i = 0; i < 3; i++) grid[i] = get32(r);
  for (int i = 0; i < 3; i++) block[i] = get32(r);
  uint32_t shared = get32(r);
  int nargs = getcount(r, 16, "kernel arguments");
  if (r->failed) return GPUCC_ERR_BAD_PLAN;
  if (nargs < 0 || nargs > GPUCC_MAX_KERNEL_ARGS) return reader_fail(r, "%d kernel arguments", nargs);
  GpuccArg *args = nargs ? malloc((size_t)nargs * sizeof *args) : NULL;
  if (nargs && !args) return oom();
  for (int i = 0; i < nargs && !r->failed; i++) {
    uint32_t kind = get32(r), region = get32(r);
    uint64_t v = get64(r);
    if (kind == GPUCC_ARG_SCALAR && region == 0)
      args[i] = gpucc_scalar_arg(v);
    else if (kind == GPUCC_ARG_PTR && region_ok((GpuccRegion)region))
      args[i] = gpucc_ptr_arg((GpuccPtr){(GpuccRegion)region, v});
    else
      reader_fail(r, "kernel argument %d has kind %u, region %u", i, kind, region);
  }
  GpuccStatus st = r->failed ? GPUCC_ERR_BAD_PLAN
                             : gpucc_plan_add_kernel(p, name, grid, block, shared, args, nargs);
  free(args);
  return st;
}

static GpuccStatus read_gemm(Reader *r, GpuccPlan *p) {
  GpuccGemm g = {0};
  g.a = getptr(r);
  g.b = getptr(r);
  g.c = getptr(r);
  g.d = getptr(r);
  g.a_type = getdtype(r);
  g.b_type = getdtype(r);
  g.cd_type = getdtype(r);
  uint32_t compute = get32(r), ta = get32(r), tb = get32(r);
  if (r->failed) return GPUCC_ERR_BAD_PLAN;
  if (compute < GPUCC_COMPUTE_32F || compute > GPUCC_COMPUTE_64F || ta > 1 || tb > 1)
    return reader_fail(r, "gemm compute %u, trans %u %u", compute, ta, tb);
  g.compute = (GpuccCompute)compute;
  g.trans_a = (int)ta;
  g.trans_b = (int)tb;
  int64_t *v[] = {&g.m,     &g.n,        &g.k,        &g.lda,      &g.ldb,      &g.ldc,
                  &g.ldd,   &g.batch,    &g.stride_a, &g.stride_b, &g.stride_c, &g.stride_d};
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) *v[i] = (int64_t)get64(r);
  g.alpha = getf64(r);
  g.beta = getf64(r);
  uint32_t epilogue = get32(r);
  g.bias = getptr(r);
  if (!r->failed && epilogue > GPUCC_EPILOGUE_LAST)
    return reader_fail(r, "gemm epilogue %u", epilogue);
  g.epilogue = (GpuccEpilogue)epilogue;
  return r->failed ? GPUCC_ERR_BAD_PLAN : gpucc_plan_add_gemm(p, &g);
}

static GpuccStatus read_steps(Reader *r, GpuccPlan *p) {
  int n = getcount(r, 4 + 24, "steps"); /* the smallest step is a memset */
  for (int i = 0; i < n && !r->failed; i++) {
    uint32_t kind = get32(r);
    GpuccStatus st = GPUCC_OK;
    if (r->failed) break;
    switch (kind) {
    case GPUCC_STEP_KERNEL: st = read_kernel(r, p); break;
    case GPUCC_STEP_GEMM: st = read_gemm(r, p); break;
    case GPUCC_STEP_COPY: {
      GpuccPtr dst = getptr(r), src = getptr(r);
      uint64_t bytes = get64(r);
      if (!r->failed) st = gpucc_plan_add_copy(p, dst, src, bytes);
      break;
    }
    case GPUCC_STEP_MEMSET: {
      GpuccPtr dst = getptr(r);
      uint64_t bytes = get64(r);
      uint32_t value = get32(r);
      if (!r->failed && value > 255) return reader_fail(r, "memset value %u", value);
      if (!r->failed) st = gpucc_plan_add_memset(p, dst, bytes, (uint8_t)value);
      break;
    }
    case GPUCC_STEP_CHOICE: {
      const char *label = getstr(r);
      uint32_t nv = get32(r), count[GPUCC_MAX_VARIANTS];
      if (!r->failed && (nv < 1 || nv > GPUCC_MAX_VARIANTS))
        return reader_fail(r, "choice of %u variants", nv);
      for (uint32_t v = 0; v < nv && !r->failed; v++) count[v] = get32(r);
      if (!r->failed) st = gpucc_plan_add_choice(p, label, (int)nv, count);
      break;
    }
    default: return reader_fail(r, "step %d has kind %u", i, kind);
    }
    if (st) return st;
  }
  return r->failed ? GPUCC_ERR_BAD_PLAN : GPUCC_OK;
}

static const char *const tag_names[TAG_COUNT] = {"?", "SIZES", "MODULE", "INPUTS", "OUTPUTS", "STEPS"};

static GpuccStatus read_section(Reader *r, GpuccPlan *p, uint32_t tag) {
  switch (tag) {
  case TAG_SIZES: return read_sizes(r, p);
  case TAG_MODULE: return read_module(r, p);
  case TAG_INPUTS: return read_tensors(r, p, true);
  case TAG_OUTPUTS: return read_tensors(r, p, false);
  case TAG_STEPS: return read_steps(r, p);
  }
  return bad("plan: unknown section tag %u", tag);
}

static GpuccStatus parse_body(const unsigned char *b, size_t len, uint32_t nsections,
                              GpuccPlan *p) {
  bool seen[TAG_COUNT] = {false};
  size_t pos = 0;
  for (uint32_t s = 0; s < nsections; s++) {
    if (len - pos < SECTION_HEADER_BYTES) return bad("plan: truncated before section %u", s);
    uint32_t tag = gpucc_rd32(b + pos), zero = gpucc_rd32(b + pos + 4);
    uint64_t n = gpucc_rd64(b + pos + 8);
    pos += SECTION_HEADER_BYTES;
    if (tag == 0 || tag >= TAG_COUNT || zero) return bad("plan: section %u has tag %u", s, tag);
    if (seen[tag]) return bad("plan: section %s appears twice", tag_names[tag]);
    seen[tag] = true;
    if (n > len - pos)
      return bad("plan: section %s claims %llu bytes, %zu left", tag_names[tag],
                 (unsigned long long)n, len - pos);
    Reader r = {b + pos, (size_t)n, 0, tag_names[tag], false};
    GpuccStatus st = read_section(&r, p, tag);
    if (st) return st;
    if (r.pos != r.len)
      return bad("plan: section %s has %zu bytes left over", tag_names[tag], r.len - r.pos);
    pos += (size_t)n;
  }
  if (pos != len) return bad("plan: %zu bytes after the last section", len - pos);
  for (int t = 1; t < TAG_COUNT; t++)
    if (!seen[t]) return bad("plan: section %s is missing", tag_names[t]);
  return GPUCC_OK;
}

GpuccStatus gpucc_plan_parse(const void *bytes, size_t len, GpuccPlan **out) {
  if (!out || (len && !bytes))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_parse: NULL argument");
  *out = NULL;
  const unsigned char *b = bytes;
  if (len < HEADER_BYTES || memcmp(b, GPUCC_PLAN_MAGIC, 8))
    return bad("plan: not a gpucc plan (no GPUCCPLN header)");
  uint32_t version = gpucc_rd32(b + 8), nsections = gpucc_rd32(b + 12);
  if (version != GPUCC_PLAN_VERSION)
    return bad("plan: format version %u; this runtime reads version %u", version,
               GPUCC_PLAN_VERSION);
  uint64_t body = gpucc_rd64(b + 16);
  if (body != len - HEADER_BYTES)
    return bad("plan: header says %llu bytes follow it, %zu do (truncated or padded)",
               (unsigned long long)body, len - HEADER_BYTES);
  if (gpucc_rd64(b + 24) != gpucc_fnv1a64(b + HEADER_BYTES, len - HEADER_BYTES))
    return bad("plan: checksum mismatch: the plan is damaged");
  if (nsections != TAG_COUNT - 1)
    return bad("plan: %u sections; version %u has %d", nsections, version, TAG_COUNT - 1);
  GpuccPlan *p = gpucc_plan_new(0, 0, 0);
  if (!p) return oom();
  GpuccStatus st = parse_body(b + HEADER_BYTES, len - HEADER_BYTES, nsections, p);
  if (!st) st = gpucc_plan_validate(p);
  if (st) {
    gpucc_plan_free(p);
    return st;
  }
  *out = p;
  return GPUCC_OK;
}
