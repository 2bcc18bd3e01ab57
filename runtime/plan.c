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

/* Appends to buf[0 .. n), where *used bytes are written, as far as it fits. */
static void appendf(char *buf, size_t n, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void appendf(char *buf, size_t n, size_t *used, const char *fmt, ...) {
  if (*used >= n) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *used, n - *used, fmt, ap);
  va_end(ap);
  *used += k > 0 ? (size_t)k : 0;
}

void gpucc_format_sizes(char *buf, size_t n, const GpuccSymbol *s) {
  size_t used = 0;
  buf[0] = 0;
  for (int k = 0; k < s->npieces; k++) {
    appendf(buf, n, &used, "%s%lld", k ? ", " : "", (long long)s->lo[k]);
    if (s->hi[k] != s->lo[k]) appendf(buf, n, &used, "..%lld", (long long)s->hi[k]);
  }
}

void gpucc_format_type(char *buf, size_t n, GpuccDType t, int rank, const int64_t *dims,
                       const int8_t *sym, const GpuccSymbol *syms) {
  size_t used = 0;
  appendf(buf, n, &used, "%s[", gpucc_dtype_name(t));
  for (int i = 0; i < rank; i++) {
    const char *sep = i ? ", " : "";
    if (!sym || sym[i] < 0) {
      appendf(buf, n, &used, "%s%lld", sep, (long long)dims[i]);
      continue;
    }
    const GpuccSymbol *s = &syms[sym[i]];
    char sizes[512];
    gpucc_format_sizes(sizes, sizeof sizes, s);
    appendf(buf, n, &used, s->npieces > 1 ? "%s%s={%s}" : "%s%s=%s", sep, s->name, sizes);
  }
  appendf(buf, n, &used, "]");
}

void gpucc_format_class(char *buf, size_t n, const GpuccPlan *p, int c) {
  size_t used = 0;
  appendf(buf, n, &used, "class %d (", c);
  for (int k = 0; k < p->nsyms; k++)
    appendf(buf, n, &used, "%s%s=%lld", k ? ", " : "", p->syms[k].name,
            (long long)p->classes[c].bound[k]);
  appendf(buf, n, &used, ")");
}

bool gpucc_symbol_has(const GpuccSymbol *s, int64_t size) {
  for (int k = 0; k < s->npieces; k++)
    if (size >= s->lo[k] && size <= s->hi[k]) return true;
  return false;
}

void gpucc_dims_at(const GpuccTensorInfo *t, const int64_t *size, int64_t *dims) {
  for (int d = 0; d < t->rank; d++) dims[d] = t->sym[d] < 0 ? t->dims[d] : size[t->sym[d]];
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

static void free_steps(GpuccStep *steps, int n) {
  for (int i = 0; i < n; i++) free_step(&steps[i]);
  free(steps);
}

static void free_modules(GpuccPlan *p) {
  for (int i = 0; i < p->nmodules; i++) {
    free(p->modules[i].cubin);
    free(p->modules[i].ptx);
  }
  p->nmodules = 0;
}

void gpucc_plan_free(GpuccPlan *p) {
  if (!p) return;
  free_modules(p);
  free(p->modules);
  for (int i = 0; i < p->ninputs; i++) free(p->inputs[i].name);
  for (int i = 0; i < p->noutputs; i++) free(p->outputs[i].name);
  free_steps(p->steps, p->nsteps);
  for (int k = 0; k < p->nsyms; k++) free(p->syms[k].name);
  for (int c = 0; c < p->nclasses; c++) {
    GpuccClass *cl = &p->classes[c];
    free(cl->input_offset);
    free(cl->output_offset);
    free_steps(cl->steps, cl->nsteps);
  }
  free(p->inputs);
  free(p->outputs);
  free(p->syms);
  free(p->classes);
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

/* A copy of a cubin and a PTX (an empty PTX as none). */
static GpuccStatus copy_module(const void *cubin, size_t cubin_len, const char *ptx,
                               GpuccModule *out) {
  size_t xlen = ptx ? strlen(ptx) : 0;
  GpuccModule m = {.cubin_len = cubin_len, .ptx_len = xlen};
  if ((cubin_len && !(m.cubin = malloc(cubin_len))) || (xlen && !(m.ptx = malloc(xlen + 1)))) {
    free(m.cubin);
    return oom();
  }
  if (cubin_len) memcpy(m.cubin, cubin, cubin_len);
  if (xlen) memcpy(m.ptx, ptx, xlen + 1);
  *out = m;
  return GPUCC_OK;
}

GpuccStatus gpucc_plan_set_module(GpuccPlan *p, const void *cubin, size_t cubin_len,
                                  const char *ptx) {
  if (!p || (cubin_len && !cubin))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_set_module: NULL argument");
  if (!cubin_len && !(ptx && ptx[0])) {
    free_modules(p);
    return GPUCC_OK;
  }
  /* Copied before the old ones go, so that a failure leaves the plan as it was. */
  GpuccModule m;
  GpuccStatus st = copy_module(cubin, cubin_len, ptx, &m);
  if (!st && (st = grow((void **)&p->modules, &p->cap_modules_, 0, sizeof *p->modules))) {
    free(m.cubin);
    free(m.ptx);
  }
  if (st) return st;
  free_modules(p);
  p->modules[0] = m;
  p->nmodules = 1;
  return GPUCC_OK;
}

GpuccStatus gpucc_plan_add_module(GpuccPlan *p, const void *cubin, size_t cubin_len,
                                  const char *ptx) {
  if (!p || (cubin_len && !cubin))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_add_module: NULL argument");
  if (!cubin_len && !(ptx && ptx[0]))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "plan: module %d has neither cubin nor PTX",
                      p->nmodules);
  if (p->nmodules >= GPUCC_MAX_MODULES)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "plan: more than %d modules",
                      GPUCC_MAX_MODULES);
  GpuccStatus st = grow((void **)&p->modules, &p->cap_modules_, p->nmodules, sizeof *p->modules);
  if (!st) st = copy_module(cubin, cubin_len, ptx, &p->modules[p->nmodules]);
  if (!st) p->nmodules++;
  return st;
}

/* Classes copy one offset per input and output and one bound per symbol. */
static GpuccStatus before_classes(const GpuccPlan *p, const char *what) {
  if (!p->nclasses) return GPUCC_OK;
  return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT,
                    "plan: %s added after a class (inputs, outputs and symbols come first)", what);
}

static GpuccStatus add_tensor(GpuccPlan *p, bool input, const char *name, GpuccDType dtype,
                              int rank, const int64_t *dims, uint64_t offset) {
  const char *what = input ? "input" : "output";
  if (!p) return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_add_%s: NULL plan", what);
  GpuccStatus st = before_classes(p, what);
  if (st) return st;
  if (rank < 0 || rank > GPUCC_MAX_RANK || (rank && !dims))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "plan: %s '%s': rank %d (0 to %d)", what,
                      name ? name : "?", rank, GPUCC_MAX_RANK);
  GpuccTensorInfo **arr = input ? &p->inputs : &p->outputs;
  int *n = input ? &p->ninputs : &p->noutputs;
  int *cap = input ? &p->cap_inputs_ : &p->cap_outputs_;
  if ((st = grow((void **)arr, cap, *n, sizeof **arr))) return st;
  GpuccTensorInfo t = {.dtype = dtype, .rank = rank, .offset = offset};
  if ((st = copy_name(name, what, &t.name))) return st;
  for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
  memset(t.sym, -1, sizeof t.sym);
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

/* Appends to the plan's steps, or after a class to that class's. */
static GpuccStatus add_step(GpuccPlan *p, const GpuccStep *s) {
  if (!p) return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_add_*: NULL plan");
  GpuccClass *c = p->nclasses ? &p->classes[p->nclasses - 1] : NULL;
  GpuccStep **steps = c ? &c->steps : &p->steps;
  int *n = c ? &c->nsteps : &p->nsteps;
  GpuccStatus st = grow((void **)steps, c ? &c->cap_steps_ : &p->cap_steps_, *n, sizeof **steps);
  if (st) return st;
  (*steps)[(*n)++] = *s;
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

GpuccStatus gpucc_plan_add_symbol(GpuccPlan *p, const char *name, int npieces,
                                  const int64_t *lo, const int64_t *hi) {
  if (!p || !lo || !hi)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_add_symbol: NULL argument");
  GpuccStatus st = before_classes(p, "symbol");
  if (st) return st;
  if (p->nsyms >= GPUCC_MAX_SYMBOLS)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "plan: symbol '%s': more than %d symbols",
                      name ? name : "?", GPUCC_MAX_SYMBOLS);
  if (npieces < 1 || npieces > GPUCC_MAX_PIECES)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "plan: symbol '%s': %d pieces (1 to %d)",
                      name ? name : "?", npieces, GPUCC_MAX_PIECES);
  if ((st = grow((void **)&p->syms, &p->cap_syms_, p->nsyms, sizeof *p->syms))) return st;
  GpuccSymbol s = {.npieces = npieces};
  if ((st = copy_name(name, "symbol", &s.name))) return st;
  memcpy(s.lo, lo, (size_t)npieces * sizeof *lo);
  memcpy(s.hi, hi, (size_t)npieces * sizeof *hi);
  p->syms[p->nsyms++] = s;
  return GPUCC_OK;
}

GpuccStatus gpucc_plan_set_symbol_flags(GpuccPlan *p, int sym, uint32_t flags) {
  if (!p) return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_set_symbol_flags: NULL plan");
  if (sym < 0 || sym >= p->nsyms)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "plan: flags of symbol %d (the plan has %d)",
                      sym, p->nsyms);
  p->syms[sym].flags = flags;
  return GPUCC_OK;
}

GpuccStatus gpucc_plan_set_axis_symbol(GpuccPlan *p, int output, int i, int axis, int sym) {
  if (!p) return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_set_axis_symbol: NULL plan");
  const char *what = output ? "output" : "input";
  int n = output ? p->noutputs : p->ninputs;
  if (i < 0 || i >= n)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "plan: %s %d of %d", what, i, n);
  GpuccTensorInfo *t = output ? &p->outputs[i] : &p->inputs[i];
  if (axis < 0 || axis >= t->rank || sym < -1 || sym >= p->nsyms)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT,
                      "plan: %s '%s': axis %d (rank %d) as symbol %d (the plan has %d)", what,
                      t->name, axis, t->rank, sym, p->nsyms);
  t->sym[axis] = (int8_t)sym;
  return GPUCC_OK;
}

GpuccStatus gpucc_plan_add_class(GpuccPlan *p, const int64_t *bound, uint64_t arena_bytes,
                                 const uint64_t *input_offset, const uint64_t *output_offset,
                                 const uint64_t *size_offset) {
  if (!p || !bound || !size_offset || (p->ninputs && !input_offset) ||
      (p->noutputs && !output_offset))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_add_class: NULL argument");
  if (!p->nsyms)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT,
                      "plan: a class in a plan without symbols (add the symbols first)");
  GpuccStatus st = grow((void **)&p->classes, &p->cap_classes_, p->nclasses, sizeof *p->classes);
  if (st) return st;
  GpuccClass c = {.arena_bytes = arena_bytes};
  size_t in = (size_t)p->ninputs * sizeof *input_offset,
         out = (size_t)p->noutputs * sizeof *output_offset;
  if ((in && !(c.input_offset = malloc(in))) || (out && !(c.output_offset = malloc(out)))) {
    free(c.input_offset);
    return oom();
  }
  if (in) memcpy(c.input_offset, input_offset, in);
  if (out) memcpy(c.output_offset, output_offset, out);
  memcpy(c.bound, bound, (size_t)p->nsyms * sizeof *bound);
  memcpy(c.size_offset, size_offset, (size_t)p->nsyms * sizeof *size_offset);
  p->classes[p->nclasses++] = c;
  return GPUCC_OK;
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

/* What a list of steps and slots is checked against: the regions' sizes (a class's arena
 * is its part of the model's), and what the messages call it. */
enum { WHERE_BYTES = 320 };
typedef struct Scope {
  char where[WHERE_BYTES]; /* "plan", "plan: class 3 (batch=4, seq=128)" */
  uint64_t arena_bytes, weights_bytes;
} Scope;

/* A label: the scope's name and up to a name's worth after it. */
enum { LABEL_BYTES = WHERE_BYTES + GPUCC_MAX_NAME + 96 };

static const char *region_name(GpuccRegion r) {
  return r == GPUCC_REGION_ARENA ? "arena" : r == GPUCC_REGION_WEIGHTS ? "weights" : "?";
}

static bool region_ok(GpuccRegion r) {
  return r == GPUCC_REGION_ARENA || r == GPUCC_REGION_WEIGHTS;
}

/* Whether [ptr.offset, ptr.offset + bytes) lies in ptr's region; else an error that
 * starts with `what`. */
static GpuccStatus check_range(const Scope *sc, const char *what, GpuccPtr ptr, uint64_t bytes) {
  if (!region_ok(ptr.region)) return bad("%s: region %d is not arena or weights", what, (int)ptr.region);
  uint64_t size = ptr.region == GPUCC_REGION_ARENA ? sc->arena_bytes : sc->weights_bytes;
  if (ptr.offset > size || bytes > size - ptr.offset)
    return bad("%s: %llu bytes at %s offset %llu run past the %s (%llu bytes)", what,
               (unsigned long long)bytes, region_name(ptr.region),
               (unsigned long long)ptr.offset, region_name(ptr.region),
               (unsigned long long)size);
  return GPUCC_OK;
}

/* A tensor's slot: its bytes inside the arena, at an offset its elements align to. */
static GpuccStatus check_slot(const Scope *sc, const char *label, uint64_t offset, GpuccDType t,
                              uint64_t bytes) {
  GpuccStatus st = check_range(sc, label, gpucc_arena_ptr(offset), bytes);
  if (st) return st;
  if (offset % gpucc_dtype_size(t))
    return bad("%s: arena offset %llu is not a multiple of %zu", label,
               (unsigned long long)offset, gpucc_dtype_size(t));
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

/* Bytes of t at dims (checked for overflow). */
static bool tensor_bytes_at(const GpuccTensorInfo *t, const int64_t *dims, uint64_t *bytes) {
  uint64_t numel;
  return gpucc_numel(dims, t->rank, &numel) &&
         !__builtin_mul_overflow(numel, gpucc_dtype_size(t->dtype), bytes);
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* No two of the tensors ts[0..n) share a name: found by sorting the names, since a plan
 * from a hostile file may hold a million tensors. */
static GpuccStatus check_names_unique(const GpuccTensorInfo *ts, int n, const char *what) {
  const char **names = malloc(((size_t)n + 1) * sizeof *names);
  if (!names) return gpucc_fail(GPUCC_ERR_OUT_OF_MEMORY, "out of host memory");
  for (int i = 0; i < n; i++) names[i] = ts[i].name;
  qsort(names, (size_t)n, sizeof *names, by_name);
  for (int i = 1; i < n; i++)
    if (!strcmp(names[i - 1], names[i])) {
      GpuccStatus st = bad("plan: two %ss named '%s'", what, names[i]);
      free(names);
      return st;
    }
  free(names);
  return GPUCC_OK;
}

/* The tensors and their axes. A fixed plan's tensors lie in its arena; a ranged plan's
 * lie where each class places them (check_class), so their offset here is 0. */
static GpuccStatus check_tensors(const GpuccPlan *p, const GpuccTensorInfo *ts, int n,
                                 const char *what) {
  Scope sc = {"plan", p->arena_bytes, p->weights_bytes};
  for (int i = 0; i < n; i++) {
    const GpuccTensorInfo *t = &ts[i];
    if (!name_ok(t->name)) return bad("plan: %s %d has an empty or overlong name", what, i);
    if (!dtype_ok(t->dtype)) return bad("plan: %s '%s': bad dtype %d", what, t->name, (int)t->dtype);
    if (t->rank < 0 || t->rank > GPUCC_MAX_RANK)
      return bad("plan: %s '%s': rank %d (0 to %d)", what, t->name, t->rank, GPUCC_MAX_RANK);
    for (int d = 0; d < t->rank; d++) {
      int s = t->sym[d];
      if (s < -1 || s >= p->nsyms)
        return bad("plan: %s '%s': axis %d is symbol %d; the plan has %d", what, t->name, d, s,
                   p->nsyms);
      if (s >= 0 && t->dims[d] != gpucc_symbol_largest(&p->syms[s]))
        return bad("plan: %s '%s': dim %d is %lld, not the largest size of its symbol '%s' "
                   "(%lld)", what, t->name, d, (long long)t->dims[d], p->syms[s].name,
                   (long long)gpucc_symbol_largest(&p->syms[s]));
    }
    uint64_t bytes;
    if (!tensor_bytes_at(t, t->dims, &bytes))
      return bad("plan: %s '%s': negative dim or size overflow", what, t->name);
    char label[GPUCC_MAX_NAME + 64];
    snprintf(label, sizeof label, "plan: %s '%s'", what, t->name);
    GpuccStatus st;
    if (p->nsyms && t->offset)
      return bad("%s: arena offset %llu in a ranged plan (its classes place it: 0 here)", label,
                 (unsigned long long)t->offset);
    if (!p->nsyms && (st = check_slot(&sc, label, t->offset, t->dtype, bytes))) return st;
  }
  return check_names_unique(ts, n, what);
}

static GpuccStatus check_symbols(const GpuccPlan *p) {
  if (p->nsyms < 0 || p->nsyms > GPUCC_MAX_SYMBOLS)
    return bad("plan: %d symbols (0 to %d)", p->nsyms, GPUCC_MAX_SYMBOLS);
  for (int k = 0; k < p->nsyms; k++) {
    const GpuccSymbol *s = &p->syms[k];
    if (!name_ok(s->name)) return bad("plan: symbol %d has an empty or overlong name", k);
    for (int j = 0; j < k; j++)
      if (!strcmp(p->syms[j].name, s->name)) return bad("plan: two symbols named '%s'", s->name);
    if (s->flags & ~GPUCC_SYMBOL_ROWS)
      return bad("plan: symbol '%s': flags 0x%x (the one flag is GPUCC_SYMBOL_ROWS, 0x%x)",
                 s->name, (unsigned)s->flags, GPUCC_SYMBOL_ROWS);
    if (s->npieces < 1 || s->npieces > GPUCC_MAX_PIECES)
      return bad("plan: symbol '%s': %d pieces (1 to %d)", s->name, s->npieces, GPUCC_MAX_PIECES);
    for (int i = 0; i < s->npieces; i++)
      if (s->lo[i] < 1 || s->lo[i] > s->hi[i] || s->hi[i] > GPUCC_MAX_SIZE ||
          (i && s->lo[i] <= s->hi[i - 1]))
        return bad("plan: symbol '%s': piece %d is %lld..%lld (pieces ascend, disjoint, within "
                   "1..%lld)", s->name, i, (long long)s->lo[i], (long long)s->hi[i],
                   (long long)GPUCC_MAX_SIZE);
  }
  return GPUCC_OK;
}

/* A run learns each symbol's size from the dims of its inputs (after check_tensors). */
static GpuccStatus check_symbols_are_input_axes(const GpuccPlan *p) {
  for (int k = 0; k < p->nsyms; k++) {
    bool seen = false;
    for (int i = 0; i < p->ninputs && !seen; i++)
      for (int d = 0; d < p->inputs[i].rank && !seen; d++) seen = p->inputs[i].sym[d] == k;
    if (!seen) return bad("plan: symbol '%s' is no axis of any input", p->syms[k].name);
  }
  return GPUCC_OK;
}

/* A run cuts a rows symbol's size into chunks (runtime.h): each output gets a chunk's
 * result at an offset along the one axis the symbol is, each input gives a slice along the
 * one it is (or is whole). Called after check_tensors. */
static GpuccStatus check_rows_axes(const GpuccPlan *p, int k, const GpuccTensorInfo *ts, int n,
                                   bool output) {
  const char *what = output ? "output" : "input";
  for (int i = 0; i < n; i++) {
    int first = -1, second = -1;
    for (int d = ts[i].rank - 1; d >= 0; d--)
      if (ts[i].sym[d] == k) {
        second = first;
        first = d;
      }
    const char *rule =
        output ? "exactly one axis of every output" : "at most one axis of each input";
    if (second >= 0)
      return bad("plan: rows symbol '%s' is axes %d and %d of %s '%s' (a rows symbol is %s)",
                 p->syms[k].name, first, second, what, ts[i].name, rule);
    if (first < 0 && output)
      return bad("plan: rows symbol '%s' is no axis of output '%s' (a rows symbol is %s)",
                 p->syms[k].name, ts[i].name, rule);
  }
  return GPUCC_OK;
}

static GpuccStatus check_rows(const GpuccPlan *p) {
  for (int k = 0; k < p->nsyms; k++) {
    GpuccStatus st;
    if ((p->syms[k].flags & GPUCC_SYMBOL_ROWS) &&
        ((st = check_rows_axes(p, k, p->outputs, p->noutputs, true)) ||
         (st = check_rows_axes(p, k, p->inputs, p->ninputs, false))))
      return st;
  }
  return GPUCC_OK;
}

static GpuccStatus check_kernel(const Scope *sc, int i, const GpuccKernel *k) {
  if (!ident_ok(k->name)) return bad("%s: step %d: kernel name is not a C identifier", sc->where, i);
  char label[LABEL_BYTES];
  snprintf(label, sizeof label, "%s: step %d (kernel '%s')", sc->where, i, k->name);
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
    char alabel[LABEL_BYTES + 32];
    snprintf(alabel, sizeof alabel, "%s argument %d", label, a);
    GpuccStatus st = check_range(sc, alabel, arg->ptr, 0);
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
static GpuccStatus check_matrix(const Scope *sc, const char *label, char which, GpuccPtr ptr,
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
  char mlabel[WHERE_BYTES + 192];
  snprintf(mlabel, sizeof mlabel, "%s: %c [%lldx%lld, ld %lld, batch %lld, stride %lld]", label,
           which, (long long)rows, (long long)cols, (long long)ld, (long long)batch,
           (long long)stride);
  GpuccStatus st = check_range(sc, mlabel, ptr, bytes);
  if (st) return st;
  if (ptr.offset % e) return bad("%s: offset not a multiple of %llu", mlabel, (unsigned long long)e);
  return GPUCC_OK;
}

static GpuccStatus check_gemm(const Scope *sc, int i, const GpuccGemm *g) {
  char label[WHERE_BYTES + 64];
  snprintf(label, sizeof label, "%s: step %d (gemm)", sc->where, i);
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
  if ((st = check_matrix(sc, label, 'A', g->a, g->a_type, g->trans_a ? g->k : g->m,
                         g->trans_a ? g->m : g->k, g->lda, g->batch, g->stride_a)) ||
      (st = check_matrix(sc, label, 'B', g->b, g->b_type, g->trans_b ? g->n : g->k,
                         g->trans_b ? g->k : g->n, g->ldb, g->batch, g->stride_b)) ||
      (st = check_matrix(sc, label, 'C', g->c, g->cd_type, g->m, g->n, g->ldc, g->batch,
                         g->stride_c)) ||
      (st = check_matrix(sc, label, 'D', g->d, g->cd_type, g->m, g->n, g->ldd, g->batch,
                         g->stride_d)))
    return st;
  if (g->epilogue < GPUCC_EPILOGUE_NONE || g->epilogue > GPUCC_EPILOGUE_LAST)
    return bad("%s: epilogue must be 0 to %d", label, GPUCC_EPILOGUE_LAST);
  if (g->epilogue != GPUCC_EPILOGUE_NONE) {
    char blabel[WHERE_BYTES + 96];
    uint64_t e = gpucc_dtype_size(g->cd_type);
    snprintf(blabel, sizeof blabel, "%s: bias [%lld]", label, (long long)g->m);
    if ((st = check_range(sc, blabel, g->bias, (uint64_t)g->m * e)))
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
 * than the list has left, and only kernels and GEMMs (a choice among copies would choose
 * nothing, and a choice within a choice is not a plan codegen writes). */
static GpuccStatus check_choice(const Scope *sc, const GpuccStep *steps, int n, int i,
                                const GpuccChoice *c) {
  if (!name_ok(c->label)) return bad("%s: step %d: choice has an empty or overlong label", sc->where, i);
  char label[LABEL_BYTES];
  snprintf(label, sizeof label, "%s: step %d (choice '%s')", sc->where, i, c->label);
  if (c->nvariants < 1 || c->nvariants > GPUCC_MAX_VARIANTS)
    return bad("%s: %d variants (1 to %d)", label, c->nvariants, GPUCC_MAX_VARIANTS);
  int64_t nvar = 0;
  for (int v = 0; v < c->nvariants; v++) {
    if (c->count[v] < 1) return bad("%s: variant %d has no steps", label, v);
    nvar += c->count[v];
  }
  if (nvar > n - i - 1)
    return bad("%s: its variants hold %lld steps, %d follow it", label, (long long)nvar, n - i - 1);
  for (int j = i + 1; j <= i + nvar; j++)
    if (steps[j].kind != GPUCC_STEP_KERNEL && steps[j].kind != GPUCC_STEP_GEMM)
      return bad("%s: step %d of its variants is not a kernel or a GEMM", label, j);
  return GPUCC_OK;
}

static GpuccStatus check_step(const Scope *sc, const GpuccStep *steps, int n, int i) {
  const GpuccStep *s = &steps[i];
  char label[WHERE_BYTES + 64];
  switch (s->kind) {
  case GPUCC_STEP_KERNEL: return check_kernel(sc, i, &s->kernel);
  case GPUCC_STEP_GEMM: return check_gemm(sc, i, &s->gemm);
  case GPUCC_STEP_COPY: {
    const GpuccCopy *c = &s->copy;
    GpuccStatus st;
    snprintf(label, sizeof label, "%s: step %d (copy) destination", sc->where, i);
    if (c->dst.region != GPUCC_REGION_ARENA) return bad("%s is not in the arena", label);
    if ((st = check_range(sc, label, c->dst, c->bytes))) return st;
    snprintf(label, sizeof label, "%s: step %d (copy) source", sc->where, i);
    if ((st = check_range(sc, label, c->src, c->bytes))) return st;
    if (c->src.region == c->dst.region && c->bytes && c->src.offset < c->dst.offset + c->bytes &&
        c->dst.offset < c->src.offset + c->bytes)
      return bad("%s: step %d (copy): source and destination overlap", sc->where, i);
    return GPUCC_OK;
  }
  case GPUCC_STEP_MEMSET:
    snprintf(label, sizeof label, "%s: step %d (memset)", sc->where, i);
    if (s->fill.dst.region != GPUCC_REGION_ARENA) return bad("%s: destination is not in the arena", label);
    return check_range(sc, label, s->fill.dst, s->fill.bytes);
  case GPUCC_STEP_CHOICE: return check_choice(sc, steps, n, i, &s->choice);
  }
  return bad("%s: step %d has kind %d", sc->where, i, (int)s->kind);
}

/* Every step of a list; *kernels set when one is a kernel. */
static GpuccStatus check_steps(const Scope *sc, const GpuccStep *steps, int n, bool *kernels) {
  for (int i = 0; i < n; i++) {
    GpuccStatus st = check_step(sc, steps, n, i);
    if (st) return st;
    *kernels |= steps[i].kind == GPUCC_STEP_KERNEL;
  }
  return GPUCC_OK;
}

/* The slots of one class's inputs or outputs, at the class's dims. */
static GpuccStatus check_class_slots(const GpuccPlan *p, const Scope *sc, const GpuccClass *c,
                                     bool input) {
  const GpuccTensorInfo *ts = input ? p->inputs : p->outputs;
  const uint64_t *offset = input ? c->input_offset : c->output_offset;
  for (int i = 0, n = input ? p->ninputs : p->noutputs; i < n; i++) {
    int64_t dims[GPUCC_MAX_RANK];
    gpucc_dims_at(&ts[i], c->bound, dims);
    uint64_t bytes = 0;
    tensor_bytes_at(&ts[i], dims, &bytes); /* no more than at the largest dims, checked */
    char label[LABEL_BYTES];
    snprintf(label, sizeof label, "%s: %s '%s'", sc->where, input ? "input" : "output", ts[i].name);
    GpuccStatus st = check_slot(sc, label, offset[i], ts[i].dtype, bytes);
    if (st) return st;
  }
  return GPUCC_OK;
}

/* Class c: its bounds, its part of the arena, its slots, the sizes it reads, its steps. */
static GpuccStatus check_class(const GpuccPlan *p, int c, bool *kernels) {
  const GpuccClass *cl = &p->classes[c];
  Scope sc = {"", cl->arena_bytes, p->weights_bytes};
  size_t at = (size_t)snprintf(sc.where, sizeof sc.where, "plan: ");
  gpucc_format_class(sc.where + at, sizeof sc.where - at, p, c);
  for (int k = 0; k < p->nsyms; k++)
    if (!gpucc_symbol_has(&p->syms[k], cl->bound[k])) {
      char sizes[512];
      gpucc_format_sizes(sizes, sizeof sizes, &p->syms[k]);
      return bad("%s: '%s' bound at %lld, not one of its sizes %s", sc.where, p->syms[k].name,
                 (long long)cl->bound[k], sizes);
    }
  for (int j = 0; j < c; j++)
    if (!memcmp(p->classes[j].bound, cl->bound, (size_t)p->nsyms * sizeof *cl->bound))
      return bad("%s: the same bounds as class %d", sc.where, j);
  if (cl->arena_bytes > p->arena_bytes)
    return bad("%s: an arena of %llu bytes, more than the plan's %llu", sc.where,
               (unsigned long long)cl->arena_bytes, (unsigned long long)p->arena_bytes);
  GpuccStatus st;
  if ((st = check_class_slots(p, &sc, cl, true)) || (st = check_class_slots(p, &sc, cl, false)))
    return st;
  for (int k = 0; k < p->nsyms; k++) {
    uint64_t off = cl->size_offset[k];
    if (off == GPUCC_NO_OFFSET) continue;
    char label[WHERE_BYTES + GPUCC_MAX_NAME + 32];
    snprintf(label, sizeof label, "%s: size of '%s'", sc.where, p->syms[k].name);
    if (off % 8)
      return bad("%s: arena offset %llu is not a multiple of 8", label, (unsigned long long)off);
    if ((st = check_range(&sc, label, gpucc_arena_ptr(off), 8))) return st;
  }
  return check_steps(&sc, cl->steps, cl->nsteps, kernels);
}

/* A ranged plan's classes: each valid, and one with every symbol at its largest size (what
 * gpucc_model_run runs, and what holds any sizes). A fixed plan has none. */
static GpuccStatus check_classes(const GpuccPlan *p, bool *kernels) {
  if (!p->nsyms) {
    if (p->nclasses) return bad("plan: %d classes but no symbols", p->nclasses);
    return GPUCC_OK;
  }
  if (p->nclasses < 1 || p->nclasses > GPUCC_MAX_CLASSES)
    return bad("plan: %d classes (1 to %d in a plan with symbols)", p->nclasses, GPUCC_MAX_CLASSES);
  if (p->nsteps)
    return bad("plan: %d top-level step%s in a ranged plan (its classes hold the steps)",
               p->nsteps, p->nsteps == 1 ? "" : "s");
  bool largest = false;
  for (int c = 0; c < p->nclasses; c++) {
    GpuccStatus st = check_class(p, c, kernels);
    if (st) return st;
    bool all = true;
    for (int k = 0; k < p->nsyms; k++)
      all = all && p->classes[c].bound[k] == gpucc_symbol_largest(&p->syms[k]);
    largest |= all;
  }
  if (!largest) return bad("plan: no class has every symbol at its largest size");
  return GPUCC_OK;
}

/* Each module: its lengths what its bytes are, and a cubin or a PTX. */
static GpuccStatus check_modules(const GpuccPlan *p) {
  if (p->nmodules < 0 || p->nmodules > GPUCC_MAX_MODULES || (p->nmodules && !p->modules))
    return bad("plan: %d modules (0 to %d)", p->nmodules, GPUCC_MAX_MODULES);
  for (int i = 0; i < p->nmodules; i++) {
    const GpuccModule *m = &p->modules[i];
    if ((m->cubin_len && !m->cubin) || (m->ptx_len && (!m->ptx || strlen(m->ptx) != m->ptx_len)))
      return bad("plan: module %d: inconsistent cubin or PTX length", i);
    if (!m->cubin_len && !m->ptx_len) return bad("plan: module %d has neither cubin nor PTX", i);
  }
  return GPUCC_OK;
}

GpuccStatus gpucc_plan_validate(const GpuccPlan *p) {
  if (!p) return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_plan_validate: NULL plan");
  Scope top = {"plan", p->arena_bytes, p->weights_bytes};
  bool kernels = false;
  GpuccStatus st;
  if ((st = check_modules(p)) || (st = check_symbols(p)) ||
      (st = check_tensors(p, p->inputs, p->ninputs, "input")) ||
      (st = check_tensors(p, p->outputs, p->noutputs, "output")) ||
      (st = check_symbols_are_input_axes(p)) || (st = check_rows(p)) ||
      (st = check_steps(&top, p->steps, p->nsteps, &kernels)) ||
      (st = check_classes(p, &kernels)))
    return st;
  if (kernels && !p->nmodules)
    return bad("plan: kernel steps but no module (neither cubin nor PTX)");
  return GPUCC_OK;
}

/* ---------------------------------------------------------------- writing bytes */

/* A fixed plan has the sections up to STEPS, a ranged plan all of them. */
enum { TAG_SIZES = 1, TAG_MODULE, TAG_INPUTS, TAG_OUTPUTS, TAG_STEPS, TAG_SYMBOLS, TAG_CLASSES, TAG_COUNT };
enum { FIXED_SECTIONS = TAG_STEPS, RANGED_SECTIONS = TAG_CLASSES };
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

static void put_modules(Buf *b, const GpuccPlan *p) {
  put32(b, (uint32_t)p->nmodules);
  for (int i = 0; i < p->nmodules; i++) {
    const GpuccModule *m = &p->modules[i];
    put64(b, m->cubin_len);
    putbytes(b, m->cubin, m->cubin_len);
    put64(b, m->ptx_len);
    putbytes(b, m->ptx, m->ptx_len);
  }
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

static void put_steps(Buf *b, const GpuccStep *steps, int n) {
  put32(b, (uint32_t)n);
  for (int i = 0; i < n; i++) put_step(b, &steps[i]);
}

static void put_axis_symbols(Buf *b, const GpuccTensorInfo *ts, int n) {
  for (int i = 0; i < n; i++)
    for (int d = 0; d < ts[i].rank; d++) put32(b, (uint32_t)(int32_t)ts[i].sym[d]);
}

static void put_symbols(Buf *b, const GpuccPlan *p) {
  put32(b, (uint32_t)p->nsyms);
  for (int k = 0; k < p->nsyms; k++) {
    const GpuccSymbol *s = &p->syms[k];
    putstr(b, s->name);
    put32(b, s->flags);
    put32(b, (uint32_t)s->npieces);
    for (int i = 0; i < s->npieces; i++) {
      put64(b, (uint64_t)s->lo[i]);
      put64(b, (uint64_t)s->hi[i]);
    }
  }
  put_axis_symbols(b, p->inputs, p->ninputs);
  put_axis_symbols(b, p->outputs, p->noutputs);
}

static void put_classes(Buf *b, const GpuccPlan *p) {
  put32(b, (uint32_t)p->nclasses);
  for (int c = 0; c < p->nclasses; c++) {
    const GpuccClass *cl = &p->classes[c];
    for (int k = 0; k < p->nsyms; k++) put64(b, (uint64_t)cl->bound[k]);
    put64(b, cl->arena_bytes);
    for (int i = 0; i < p->ninputs; i++) put64(b, cl->input_offset[i]);
    for (int i = 0; i < p->noutputs; i++) put64(b, cl->output_offset[i]);
    for (int k = 0; k < p->nsyms; k++) put64(b, cl->size_offset[k]);
    put_steps(b, cl->steps, cl->nsteps);
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
  put32(&b, p->nsyms ? RANGED_SECTIONS : FIXED_SECTIONS);
  put64(&b, 0); /* body length and checksum, filled in below */
  put64(&b, 0);

  size_t at = begin_section(&b, TAG_SIZES);
  put64(&b, p->arena_bytes);
  put64(&b, p->weights_bytes);
  put64(&b, p->workspace_bytes);
  end_section(&b, at);

  at = begin_section(&b, TAG_MODULE);
  put_modules(&b, p);
  end_section(&b, at);

  at = begin_section(&b, TAG_INPUTS);
  put_tensors(&b, p->inputs, p->ninputs);
  end_section(&b, at);
  at = begin_section(&b, TAG_OUTPUTS);
  put_tensors(&b, p->outputs, p->noutputs);
  end_section(&b, at);

  at = begin_section(&b, TAG_STEPS);
  put_steps(&b, p->steps, p->nsteps);
  end_section(&b, at);

  if (p->nsyms) {
    at = begin_section(&b, TAG_SYMBOLS);
    put_symbols(&b, p);
    end_section(&b, at);
    at = begin_section(&b, TAG_CLASSES);
    put_classes(&b, p);
    end_section(&b, at);
  }

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

/* One module's bytes, u64 cubin_len, cubin  u64 ptx_len, ptx: the cubin where it lies in
 * the plan, the PTX copied NUL-terminated (NULL when empty), as the builder wants them. */
static GpuccStatus get_module(Reader *r, const unsigned char **cubin, size_t *cubin_len,
                              char **ptx) {
  *ptx = NULL;
  uint64_t n = get64(r);
  *cubin = r->failed || n > SIZE_MAX ? NULL : take(r, (size_t)n);
  if (r->failed || (n && !*cubin)) return reader_fail(r, "cubin of %llu bytes", (unsigned long long)n);
  uint64_t m = get64(r);
  const unsigned char *x = r->failed || m > SIZE_MAX ? NULL : take(r, (size_t)m);
  if (r->failed || (m && !x)) return reader_fail(r, "PTX of %llu bytes", (unsigned long long)m);
  if (m && memchr(x, 0, (size_t)m)) return reader_fail(r, "PTX holds a NUL byte");
  *cubin_len = (size_t)n;
  if (!m) return GPUCC_OK;
  if (!(*ptx = malloc((size_t)m + 1))) return oom();
  memcpy(*ptx, x, (size_t)m);
  (*ptx)[m] = 0;
  return GPUCC_OK;
}

/* Versions 4 and 5: one module without a count, both lengths 0 when there is none. */
static GpuccStatus read_old_module(Reader *r, GpuccPlan *p) {
  const unsigned char *cubin;
  size_t cubin_len;
  char *ptx;
  GpuccStatus st = get_module(r, &cubin, &cubin_len, &ptx);
  if (!st) st = gpucc_plan_set_module(p, cubin, cubin_len, ptx);
  free(ptx);
  return st;
}

static GpuccStatus read_modules(Reader *r, GpuccPlan *p) {
  int n = getcount(r, 8 + 8 + 1, "modules"); /* two lengths and a byte of cubin or PTX */
  if (n > GPUCC_MAX_MODULES) return reader_fail(r, "%d modules (0 to %d)", n, GPUCC_MAX_MODULES);
  for (int i = 0; i < n; i++) {
    const unsigned char *cubin;
    size_t cubin_len;
    char *ptx;
    GpuccStatus st = get_module(r, &cubin, &cubin_len, &ptx);
    if (!st && !cubin_len && !ptx) st = reader_fail(r, "module %d has neither cubin nor PTX", i);
    if (!st) st = gpucc_plan_add_module(p, cubin, cubin_len, ptx);
    free(ptx);
    if (st) return st;
  }
  return r->failed ? GPUCC_ERR_BAD_PLAN : GPUCC_OK;
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

/* Per input, then per output, each axis's symbol (after the symbols themselves). */
static GpuccStatus read_axis_symbols(Reader *r, GpuccPlan *p, bool output) {
  const GpuccTensorInfo *ts = output ? p->outputs : p->inputs;
  for (int i = 0, n = output ? p->noutputs : p->ninputs; i < n; i++)
    for (int d = 0; d < ts[i].rank; d++) {
      int32_t sym = (int32_t)get32(r);
      if (r->failed) return GPUCC_ERR_BAD_PLAN;
      if (sym < -1 || sym >= p->nsyms)
        return reader_fail(r, "%s '%s': axis %d is symbol %d of %d", output ? "output" : "input",
                           ts[i].name, d, (int)sym, p->nsyms);
      GpuccStatus st = gpucc_plan_set_axis_symbol(p, output, i, d, sym);
      if (st) return st;
    }
  return GPUCC_OK;
}

static GpuccStatus read_symbols(Reader *r, GpuccPlan *p) {
  uint32_t n = get32(r);
  if (!r->failed && (n < 1 || n > GPUCC_MAX_SYMBOLS))
    return reader_fail(r, "%u symbols (1 to %d)", n, GPUCC_MAX_SYMBOLS);
  for (uint32_t k = 0; k < n && !r->failed; k++) {
    const char *name = getstr(r);
    uint32_t flags = get32(r), npieces = get32(r); /* flags: validation checks them */
    if (!r->failed && (npieces < 1 || npieces > GPUCC_MAX_PIECES))
      return reader_fail(r, "symbol %u has %u pieces (1 to %d)", k, npieces, GPUCC_MAX_PIECES);
    int64_t lo[GPUCC_MAX_PIECES], hi[GPUCC_MAX_PIECES];
    for (uint32_t i = 0; i < npieces && !r->failed; i++) {
      lo[i] = (int64_t)get64(r);
      hi[i] = (int64_t)get64(r);
    }
    if (r->failed) break;
    GpuccStatus st = gpucc_plan_add_symbol(p, name, (int)npieces, lo, hi);
    if (!st) st = gpucc_plan_set_symbol_flags(p, p->nsyms - 1, flags);
    if (st) return st;
  }
  if (r->failed) return GPUCC_ERR_BAD_PLAN;
  GpuccStatus st = read_axis_symbols(r, p, false);
  return st ? st : read_axis_symbols(r, p, true);
}

/* Each class, then its steps (add_step puts them in the class just added). */
static GpuccStatus read_classes(Reader *r, GpuccPlan *p) {
  size_t words = 2 * (size_t)p->nsyms + 1 + (size_t)p->ninputs + (size_t)p->noutputs;
  int n = getcount(r, 8 * words + 4, "classes");
  uint64_t *in = calloc((size_t)p->ninputs + 1, sizeof *in),
           *out = calloc((size_t)p->noutputs + 1, sizeof *out);
  GpuccStatus st = in && out ? GPUCC_OK : oom();
  for (int c = 0; c < n && !st && !r->failed; c++) {
    int64_t bound[GPUCC_MAX_SYMBOLS];
    uint64_t size[GPUCC_MAX_SYMBOLS];
    for (int k = 0; k < p->nsyms; k++) bound[k] = (int64_t)get64(r);
    uint64_t arena = get64(r);
    for (int i = 0; i < p->ninputs; i++) in[i] = get64(r);
    for (int i = 0; i < p->noutputs; i++) out[i] = get64(r);
    for (int k = 0; k < p->nsyms; k++) size[k] = get64(r);
    if (!r->failed && !(st = gpucc_plan_add_class(p, bound, arena, in, out, size)))
      st = read_steps(r, p);
  }
  free(in);
  free(out);
  return st ? st : r->failed ? GPUCC_ERR_BAD_PLAN : GPUCC_OK;
}

static const char *const tag_names[TAG_COUNT] = {"?",       "SIZES", "MODULE",  "INPUTS",
                                                 "OUTPUTS", "STEPS", "SYMBOLS", "CLASSES"};

static GpuccStatus read_section(Reader *r, GpuccPlan *p, uint32_t tag, uint32_t version) {
  switch (tag) {
  case TAG_SIZES: return read_sizes(r, p);
  case TAG_MODULE: return version < 6 ? read_old_module(r, p) : read_modules(r, p);
  case TAG_INPUTS: return read_tensors(r, p, true);
  case TAG_OUTPUTS: return read_tensors(r, p, false);
  case TAG_STEPS: return read_steps(r, p);
  case TAG_SYMBOLS: return read_symbols(r, p);
  case TAG_CLASSES: return read_classes(r, p);
  }
  return bad("plan: unknown section tag %u", tag);
}

/* Section s has tag s + 1: each once, in the order of their tags, so that the symbols
 * are read after the tensors whose axes they name, and the classes after both. */
static GpuccStatus parse_body(const unsigned char *b, size_t len, uint32_t version,
                              uint32_t nsections, GpuccPlan *p) {
  size_t pos = 0;
  for (uint32_t s = 0; s < nsections; s++) {
    if (len - pos < SECTION_HEADER_BYTES) return bad("plan: truncated before section %u", s);
    uint32_t tag = gpucc_rd32(b + pos), zero = gpucc_rd32(b + pos + 4);
    uint64_t n = gpucc_rd64(b + pos + 8);
    pos += SECTION_HEADER_BYTES;
    if (tag != s + 1 || zero)
      return bad("plan: section %u has tag %u, not %u (%s): the sections come once each, in "
                 "the order of their tags", s, tag, s + 1, tag_names[s + 1]);
    if (n > len - pos)
      return bad("plan: section %s claims %llu bytes, %zu left", tag_names[tag],
                 (unsigned long long)n, len - pos);
    Reader r = {b + pos, (size_t)n, 0, tag_names[tag], false};
    GpuccStatus st = read_section(&r, p, tag, version);
    if (st) return st;
    if (r.pos != r.len)
      return bad("plan: section %s has %zu bytes left over", tag_names[tag], r.len - r.pos);
    pos += (size_t)n;
  }
  if (pos != len) return bad("plan: %zu bytes after the last section", len - pos);
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
  /* Version 4 is version 5 without shape classes; version 5 is version 6 with one module
   * in MODULE, without its count (read_old_module). */
  if (version < 4 || version > GPUCC_PLAN_VERSION)
    return bad("plan: format version %u; this runtime reads versions 4 to %u", version,
               GPUCC_PLAN_VERSION);
  uint64_t body = gpucc_rd64(b + 16);
  if (body != len - HEADER_BYTES)
    return bad("plan: header says %llu bytes follow it, %zu do (truncated or padded)",
               (unsigned long long)body, len - HEADER_BYTES);
  if (gpucc_rd64(b + 24) != gpucc_fnv1a64(b + HEADER_BYTES, len - HEADER_BYTES))
    return bad("plan: checksum mismatch: the plan is damaged");
  if (nsections != FIXED_SECTIONS && (version < 5 || nsections != RANGED_SECTIONS))
    return bad("plan: %u sections; version %u has %d%s", nsections, version, FIXED_SECTIONS,
               version < 5 ? "" : " (a ranged plan 7)");
  GpuccPlan *p = gpucc_plan_new(0, 0, 0);
  if (!p) return oom();
  GpuccStatus st = parse_body(b + HEADER_BYTES, len - HEADER_BYTES, version, nsections, p);
  if (!st) st = gpucc_plan_validate(p);
  if (st) {
    gpucc_plan_free(p);
    return st;
  }
  *out = p;
  return GPUCC_OK;
}
