/* codegen.c: the driver of the codegen layer. It checks that the graph can be compiled
 * (concrete shapes, supported dtypes), writes the preamble, hands each node to the file of
 * its op family, and keeps the step list. It also holds the helpers every family uses:
 * the text buffer, dtype conversions as C expressions, and index spaces. */
#include "codegen/cg-impl.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- text */

static void buf_grow(Buf *b, size_t need) {
  if (b->len + need + 1 <= b->cap)
    return;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + need + 1)
    cap *= 2;
  char *s = realloc(b->s, cap);
  if (!s)
    abort(); /* like arena_alloc: out of memory is not an error we can report */
  b->s = s;
  b->cap = cap;
}

void buf_puts(Buf *b, const char *s) {
  size_t n = strlen(s);
  buf_grow(b, n);
  memcpy(b->s + b->len, s, n + 1);
  b->len += n;
}

void buf_printf(Buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  buf_grow(b, (size_t)n);
  va_start(ap, fmt);
  vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

char *cg_fmt(Cg *cg, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = arena_alloc(cg->arena, (size_t)(n < 0 ? 0 : n) + 1);
  va_start(ap, fmt);
  vsnprintf(s, (size_t)(n < 0 ? 0 : n) + 1, fmt, ap);
  va_end(ap);
  return s;
}

int cg_error(Cg *cg, const Node *n, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  diag_error(cg->d, n ? n->loc : cg->g->loc, "codegen: %s", msg);
  if (n)
    ir_note_node(cg->d, n);
  return -1;
}

/* ---------------------------------------------------------------- dtypes */

Dom cg_dom(DType t) {
  if (t == DT_F64)
    return DOM_F64;
  return dtype_is_float(t) ? DOM_F32 : DOM_I64;
}

const char *cg_dom_type(Dom d) {
  return d == DOM_F32 ? "float" : d == DOM_F64 ? "double" : "long long";
}

const char *cg_ctype(DType t) {
  switch (t) {
  case DT_F64: return "gc_f64";
  case DT_F32: return "gc_f32";
  case DT_F16: return "gc_f16";
  case DT_BF16: return "gc_bf16";
  case DT_F8E4M3: return "gc_f8e4m3";
  case DT_I64: return "gc_i64";
  case DT_I32: return "gc_i32";
  case DT_I16: return "gc_i16";
  case DT_I8: return "gc_i8";
  case DT_U8: return "gc_u8";
  case DT_BOOL: return "gc_bool";
  default: return NULL; /* f8e5m2: rejected before any kernel is written */
  }
}

const char *cg_load(Cg *cg, DType t, Dom dom, const char *e) {
  if (t == DT_BOOL)
    return cg_load(cg, DT_I64, dom, cg_fmt(cg, "(long long)(%s != 0)", e));
  if (!dtype_is_float(t)) {
    const char *i = t == DT_I64 ? e : cg_fmt(cg, "(long long)%s", e);
    return dom == DOM_I64 ? i : dom == DOM_F64 ? cg_fmt(cg, "(double)%s", i)
                                               : cg_fmt(cg, "(float)(double)%s", i);
  }
  /* a float type: its natural domain first */
  const char *f = t == DT_F16      ? cg_fmt(cg, "gc_h2f(%s)", e)
                  : t == DT_BF16   ? cg_fmt(cg, "gc_bf2f(%s)", e)
                  : t == DT_F8E4M3 ? cg_fmt(cg, "gc_e4m32f(%s)", e)
                                   : e;
  Dom nat = cg_dom(t);
  if (dom == nat)
    return f;
  if (dom == DOM_I64)
    return cg_fmt(cg, "gc_f2ll(%s)", f);
  return cg_fmt(cg, dom == DOM_F64 ? "(double)%s" : "(float)%s", f);
}

/* v as an operand of a cast: in parentheses unless it is one token or a call. */
static const char *cast_operand(Cg *cg, const char *v) {
  return strchr(v, ' ') ? cg_fmt(cg, "(%s)", v) : v;
}

const char *cg_store(Cg *cg, DType t, Dom dom, const char *v) {
  const char *pv = cast_operand(cg, v); /* v where a cast or an operator applies to it */
  if (t == DT_BOOL)
    return cg_fmt(cg, "(gc_bool)(%s != 0)", pv);
  if (!dtype_is_float(t)) {
    const char *i = dom == DOM_I64 ? v : cg_fmt(cg, "gc_f2ll(%s)", v);
    return t == DT_I64 ? i : cg_fmt(cg, "(%s)%s", cg_ctype(t), cast_operand(cg, i));
  }
  /* integers become floats through double, like dtype_store_i64 */
  if (dom == DOM_I64) {
    v = pv = cg_fmt(cg, "(double)%s", pv);
    dom = DOM_F64;
  }
  switch (t) {
  case DT_F64: return dom == DOM_F64 ? v : cg_fmt(cg, "(double)%s", pv);
  case DT_F32: return dom == DOM_F32 ? v : cg_fmt(cg, "(float)%s", pv);
  case DT_F16: return cg_fmt(cg, dom == DOM_F32 ? "gc_f2h(%s)" : "gc_d2h(%s)", v);
  case DT_F8E4M3: return cg_fmt(cg, dom == DOM_F32 ? "gc_f2e4m3(%s)" : "gc_d2e4m3(%s)", v);
  default: return cg_fmt(cg, dom == DOM_F32 ? "gc_f2bf(%s)" : "gc_d2bf(%s)", v);
  }
}

const char *cg_lit(Cg *cg, double v, Dom dom) {
  const char *ty = cg_dom_type(dom);
  if (dom == DOM_I64) { /* converted like a cast in the executor: saturating, NaN 0 */
    int64_t i;
    dtype_store_f64(DT_I64, &i, v);
    return i == INT64_MIN ? "(-9223372036854775807LL - 1)" : cg_fmt(cg, "(%" PRId64 "LL)", i);
  }
  if (v != v)
    return cg_fmt(cg, "((%s)GC_NAN)", ty);
  /* past float's range an f32 literal is inf, which NVRTC warns about as a literal (and
   * C leaves (float)v undefined: the executor's rounding says where it is inf) */
  float f;
  dtype_store_f64(DT_F32, &f, v);
  if (dom == DOM_F32 ? isinf(f) : isinf(v))
    return cg_fmt(cg, "((%s)%sGC_INF)", ty, v < 0 ? "-" : "");
  /* A double literal always, never "1f" (no literal at all) or "1" (an integer, which
   * drops the sign of -0): the shortest that reads back as v rounded to the domain, which
   * the cast then does exactly as the executor rounds. */
  char buf[64];
  ir_format_float(buf, sizeof buf, v, dom == DOM_F32 ? DT_F32 : DT_F64);
  return cg_fmt(cg, "((%s)%s)", ty, buf);
}

const char *cg_const_of(Cg *cg, DType t, double v) {
  unsigned char b[8] = {0};
  dtype_store_f64(t, b, v);
  uint64_t u = 0;
  memcpy(&u, b, dtype_size(t)); /* little-endian: the low bytes */
  switch (t) {
  case DT_F64: return cg_fmt(cg, "__longlong_as_double(0x%016" PRIx64 "LL)", u);
  case DT_F32: return cg_fmt(cg, "__int_as_float(0x%08" PRIx64 ")", u);
  case DT_F16: return cg_fmt(cg, "gc_f16{0x%04" PRIx64 "}", u);
  case DT_BF16: return cg_fmt(cg, "gc_bf16{0x%04" PRIx64 "}", u);
  case DT_F8E4M3: return cg_fmt(cg, "gc_f8e4m3{0x%02" PRIx64 "}", u);
  default: {
    int64_t i = dtype_load_i64(t, b);
    if (i == INT64_MIN)
      return "(gc_i64)(-9223372036854775807LL - 1)";
    return cg_fmt(cg, "(%s)%" PRId64 "LL", cg_ctype(t), i);
  }
  }
}

/* ---------------------------------------------------------------- launch geometry */

const char *cg_idx_type(const Cg *cg, int64_t n) {
  /* a grid-stride step adds at most a grid of the largest blocks to an index below n */
  int64_t step = (int64_t)cg->target->max_blocks * cg->target->threads_block;
  return n + step < INT32_MAX ? "int" : "long long";
}

unsigned cg_blocks(const Cg *cg, int64_t n, int64_t per_block) {
  int64_t b = (n + per_block - 1) / per_block, most = cg->target->max_blocks;
  return (unsigned)(b < 1 ? 1 : b > most ? most : b);
}

int64_t cg_cluster_split(const Cg *cg, int64_t want, int64_t most, int64_t steps,
                         int64_t min_steps) {
  int64_t s = want < most ? want : most;
  s = s < cg->target->cluster_max ? s : cg->target->cluster_max;
  s = s < steps / min_steps ? s : steps / min_steps;
  if (!cg->target->clusters || s < 2)
    return 1;
  int64_t per = (steps + s - 1) / s;
  return (steps + per - 1) / per;
}

/* ---------------------------------------------------------------- index spaces */

void space_init(Space *s, int rank, const int64_t *dims) {
  memset(s, 0, sizeof *s);
  s->rank = rank;
  for (int i = 0; i < rank; i++)
    s->dims[i] = dims[i];
}

int space_add_strides(Space *s, const int64_t *strides, int64_t base) {
  int k = s->nops++;
  for (int i = 0; i < s->rank; i++)
    s->stride[k][i] = strides[i];
  s->base[k] = base;
  return k;
}

int space_add_bcast(Space *s, const Shape *shape) {
  int64_t dims[IR_MAX_RANK], cs[IR_MAX_RANK], st[IR_MAX_RANK];
  for (int i = 0; i < shape->rank; i++)
    dims[i] = shape->dims[i].n;
  contiguous_strides(shape->rank, dims, cs);
  for (int i = 0; i < s->rank; i++) {
    int j = i - (s->rank - shape->rank);
    st[i] = j < 0 || dims[j] == 1 ? 0 : cs[j];
  }
  return space_add_strides(s, st, 0);
}

void space_coalesce(Space *s) {
  Space t = *s;
  t.rank = 0;
  for (int i = 0; i < s->rank; i++) {
    if (s->dims[i] == 1)
      continue;
    int r = t.rank;
    bool merge = r > 0;
    for (int k = 0; merge && k < s->nops; k++)
      merge = t.stride[k][r - 1] == s->stride[k][i] * s->dims[i];
    if (merge) {
      t.dims[r - 1] *= s->dims[i];
      for (int k = 0; k < s->nops; k++)
        t.stride[k][r - 1] = s->stride[k][i];
      continue;
    }
    t.dims[r] = s->dims[i];
    for (int k = 0; k < s->nops; k++)
      t.stride[k][r] = s->stride[k][i];
    t.rank++;
  }
  *s = t;
}

bool space_is_identity(const Space *s, int op) {
  if (s->base[op])
    return false;
  int64_t want = 1;
  for (int i = s->rank - 1; i >= 0; i--) {
    if (s->stride[op][i] != want)
      return false;
    want *= s->dims[i];
  }
  return true;
}

void space_emit_offsets(Cg *cg, const Space *s, const char *i, const char *p,
                        const char *indent) {
  Buf *b = &cg->src;
  bool all_identity = true;
  for (int k = 0; k < s->nops; k++)
    all_identity = all_identity && space_is_identity(s, k);
  if (all_identity || s->rank <= 1) {
    for (int k = 0; k < s->nops; k++) {
      int64_t st = s->rank ? s->stride[k][0] : 0;
      if (space_is_identity(s, k))
        buf_printf(b, "%sconst idx_t %s%d = %s;\n", indent, p, k, i);
      else if (!st)
        buf_printf(b, "%sconst idx_t %s%d = %" PRId64 ";\n", indent, p, k, s->base[k]);
      else if (!s->base[k])
        buf_printf(b, "%sconst idx_t %s%d = %s * %" PRId64 ";\n", indent, p, k, i, st);
      else
        buf_printf(b, "%sconst idx_t %s%d = %" PRId64 " + %s * %" PRId64 ";\n", indent, p, k,
                   s->base[k], i, st);
    }
    return;
  }
  /* Unravel i from the innermost dim out; each coordinate adds its stride per operand
   * (an operand walked like the output is i itself). */
  for (int k = 0; k < s->nops; k++)
    if (space_is_identity(s, k))
      buf_printf(b, "%sconst idx_t %s%d = %s;\n", indent, p, k, i);
  buf_printf(b, "%sidx_t %s_r = %s, %s_c;\n", indent, p, i, p);
  for (int k = 0; k < s->nops; k++)
    if (!space_is_identity(s, k))
      buf_printf(b, "%sidx_t %s%d = %" PRId64 ";\n", indent, p, k, s->base[k]);
  for (int d = s->rank - 1; d >= 0; d--) {
    bool used = false;
    for (int k = 0; k < s->nops; k++)
      used = used || (s->stride[k][d] && !space_is_identity(s, k));
    if (d > 0)
      buf_printf(b, "%s%s_c = %s_r %% %" PRId64 "; %s_r /= %" PRId64 ";", indent, p, p, s->dims[d],
                 p, s->dims[d]);
    else if (used)
      buf_printf(b, "%s%s_c = %s_r;", indent, p, p);
    else
      continue; /* the outermost coordinate moves no operand */
    for (int k = 0; k < s->nops; k++)
      if (s->stride[k][d] && !space_is_identity(s, k))
        buf_printf(b, " %s%d += %s_c * %" PRId64 ";", p, k, p, s->stride[k][d]);
    buf_puts(b, "\n");
  }
}

/* ---------------------------------------------------------------- kernels and steps */

Step *cg_add_step(Cg *cg, StepKind kind, const Node *n) {
  if (cg->nsteps == cg->cap) {
    int cap = cg->cap ? 2 * cg->cap : 32;
    Step *s = arena_alloc(cg->arena, sizeof *s * (size_t)cap);
    if (cg->nsteps)
      memcpy(s, cg->steps, sizeof *s * (size_t)cg->nsteps);
    cg->steps = s;
    cg->cap = cap;
  }
  Step *s = &cg->steps[cg->nsteps++];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->node = n;
  return s;
}

int cg_choice_begin(Cg *cg, const Node *n, const char *label) {
  cg_add_step(cg, STEP_CHOICE, n)->choice.label = label;
  return cg->nsteps - 1;
}

void cg_variant_begin(Cg *cg, int choice) {
  cg->variant = cg->steps[choice].choice.nvariants;
  cg->variant_first = cg->nsteps;
  cg->variant_src = cg->src.len;
}

void cg_variant_end(Cg *cg, int choice) {
  ChoiceStep *c = &cg->steps[choice].choice;
  if (c->nvariants < CODEGEN_MAX_VARIANTS) {
    c->source_bytes[c->nvariants] = cg->src.len - cg->variant_src;
    c->count[c->nvariants++] = cg->nsteps - cg->variant_first;
  }
  cg->variant = -1;
}

void cg_choice_end(Cg *cg, int choice) {
  for (int i = choice + 1; i < cg->nsteps; i++)
    if (cg->steps[i].kind == STEP_KERNEL)
      cg->steps[i].kernel.inplace = 0;
}

const char *step_kind_name(StepKind k) {
  return k == STEP_KERNEL ? "kernel" : k == STEP_GEMM ? "gemm" : k == STEP_ALIAS ? "alias" : "choice";
}

/* Keeps [A-Za-z0-9_] of a model's name, at most 32 of them: a C identifier part. */
static void ident_part(const char *name, char *out, size_t cap) {
  size_t n = 0;
  for (const char *p = name; *p && n + 1 < cap && n < 32; p++) {
    char c = *p;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (ok || c == '_')
      out[n++] = c;
    else if (n && out[n - 1] != '_')
      out[n++] = '_';
  }
  out[n] = 0;
}

/* A name in a comment: [A-Za-z0-9_.-] as they are, any other byte as \xNN, so no
 * name can end the comment or splice a line. */
static void comment_name(Buf *b, const char *name) {
  buf_puts(b, "%");
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
    unsigned char c = *p;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (ok)
      buf_printf(b, "%c", c);
    else
      buf_printf(b, "\\x%02x", c);
  }
}

static void comment_value(Buf *b, const Value *v) {
  char ts[256];
  comment_name(b, v->name);
  buf_printf(b, ": %s", type_str(&v->type, ts, sizeof ts));
}

const char *cg_kernel_begin(Cg *cg, const Node *n, const char *note) {
  return cg_kernel_begin_part(cg, n, NULL, note);
}

/* The comment's operand list and the kernel's signature: reads are const __restrict__
 * in0.., writes out0..., but for the reads the output may overwrite (cg->inplace) and
 * that output. */
static const char *kernel_begin(Cg *cg, const char *name, const char *head,
                                const Value *const *in, int nin, const Value *const *out,
                                int nout, const char *note) {
  Buf *b = &cg->src;
  if (cg->variant >= 0)
    name = cg_fmt(cg, "%s_v%d", name, cg->variant);
  if (cg->prefix)
    name = cg_fmt(cg, "%s%s", cg->prefix, name);
  buf_printf(b, "\n/* %s(", head);
  for (int k = 0; k < nin; k++) {
    if (k)
      buf_puts(b, ", ");
    if (in[k])
      comment_value(b, in[k]);
  }
  buf_puts(b, ") -> ");
  for (int k = 0; k < nout; k++) {
    if (k)
      buf_puts(b, ", ");
    comment_value(b, out[k]);
  }
  if (note)
    buf_printf(b, "\n * %s", note);
  buf_puts(b, " */\n");
  cg->open_at = b->len;
  buf_printf(b, "extern \"C\" __global__ void __launch_bounds__(%d",
             cg->threads ? cg->threads : cg->target->block);
  if (cg->min_blocks)
    buf_printf(b, ", %d", cg->min_blocks);
  buf_puts(b, ")");
  if (cg->cluster > 1)
    buf_printf(b, " __cluster_dims__(%d, 1, 1)", cg->cluster);
  buf_printf(b, " %s(", name);
  cg->open_name = name;
  cg->min_blocks = cg->cluster = cg->threads = 0;
  int a = 0;
  for (int k = 0; k < nin; k++)
    if (in[k])
      buf_printf(b, "%sconst %s *%sin%d", a++ ? ", " : "", cg_ctype(in[k]->type.dtype),
                 k < 64 && cg->inplace >> k & 1 ? "" : "__restrict__ ", k);
  for (int k = 0; k < nout; k++)
    buf_printf(b, "%s%s *%sout%d", a++ ? ", " : "", cg_ctype(out[k]->type.dtype),
               cg->inplace ? "" : "__restrict__ ", k);
  buf_puts(b, ") {\n");
  return name;
}

/* k<id>_<ops>_<first output's name>. */
static const char *kernel_name(Cg *cg, const Node *n, const char *ops) {
  char part[40];
  ident_part(n->nout ? n->out[0]->name : "", part, sizeof part);
  return part[0] ? cg_fmt(cg, "k%d_%s_%s", n->id, ops, part) : cg_fmt(cg, "k%d_%s", n->id, ops);
}

/* n's inputs followed by its epilogue's (when one is active), and the outputs. */
static void kernel_operands(Cg *cg, const Node *n, const Value *const **in, int *nin,
                            const Value *const **out, int *nout) {
  const PwKernel *k = cg_epilogue_of(cg, n);
  *in = (const Value *const *)n->in;
  *nin = n->nin;
  *out = (const Value *const *)n->out;
  *nout = n->nout;
  if (cg->viewed == n) {
    const Value **bases = arena_alloc(cg->arena, sizeof *bases * (size_t)n->nin);
    for (int i = 0; i < n->nin; i++)
      bases[i] = cg->views[i].base;
    *in = bases;
  }
  if (cg->pro && n->in[0] == cg->pro->prologue[cg->pro->nprologue - 1]->out[0]) {
    const Value **ins = arena_alloc(cg->arena, sizeof *ins * (size_t)n->nin);
    memcpy(ins, *in, sizeof *ins * (size_t)n->nin);
    ins[0] = cg->pro->prologue_src;
    *in = ins;
  }
  if (!k)
    return;
  const Value *const *ext;
  const Node *const *nodes;
  int next, nn;
  cg_epilogue_operands(k, &ext, &next, out, &nodes, &nn);
  *nout = cg_epilogue_nout(k);
  const Value **all = arena_alloc(cg->arena, sizeof *all * (size_t)(n->nin + next + 1));
  memcpy(all, *in, sizeof *all * (size_t)n->nin);
  memcpy(all + n->nin, ext, sizeof *all * (size_t)next);
  *in = all;
  *nin = n->nin + next;
}

const char *cg_kernel_begin_part(Cg *cg, const Node *n, const char *stage, const char *note) {
  const Value *const *in, *const *out;
  int nin, nout;
  kernel_operands(cg, n, &in, &nin, &out, &nout);
  const char *ops = op_info[n->op].name, *head = cg_fmt(cg, "node %d: %s", n->id, ops);
  const Node *named = n;
  const PwKernel *k = cg_epilogue_of(cg, n);
  if (k || cg->pro) {
    /* k<id of the group's last node>_cast_conv_add_relu_<its output>, like a pointwise
     * group */
    head = cg_fmt(cg, "fuse group %lld = nodes ", (long long)node_fuse_group(n));
    const char *pre = "";
    for (int j = 0; cg->pro && j < cg->pro->nprologue; j++) {
      const char *op = op_info[cg->pro->prologue[j]->op].name;
      head = cg_fmt(cg, "%s%d %s, ", head, cg->pro->prologue[j]->id, op);
      pre = cg_fmt(cg, "%s%s_", pre, op);
    }
    ops = cg_fmt(cg, "%s%s", pre, ops);
    const Value *const *ext;
    const Node *const *nodes = NULL;
    int next, nn = 0;
    if (k)
      cg_epilogue_operands(k, &ext, &next, &out, &nodes, &nn);
    Buf h = {0}; /* an epilogue may hold any number of nodes: no cg_fmt per node */
    buf_printf(&h, "%s%d %s", head, n->id, op_info[n->op].name);
    for (int j = 0; j < nn; j++) {
      buf_printf(&h, ", %d %s", nodes[j]->id, op_info[nodes[j]->op].name);
      if (j < 5)
        ops = cg_fmt(cg, "%s_%s", ops, op_info[nodes[j]->op].name);
    }
    buf_puts(&h, ": ");
    head = arena_strdup(cg->arena, h.s);
    free(h.s);
    named = nn ? nodes[nn - 1] : n;
  }
  const char *name = kernel_name(cg, named, ops);
  if (stage)
    name = cg_fmt(cg, "%s_%s", name, stage);
  return kernel_begin(cg, name, head, in, nin, out, nout, note);
}

const char *cg_kernel_begin_values(Cg *cg, const Node *n, const char *ops, const char *head,
                                   const Value *const *in, int nin, const Value *const *out,
                                   int nout, const char *note) {
  return kernel_begin(cg, kernel_name(cg, n, ops), head, in, nin, out, nout, note);
}

/* The most elements of any operand of n: offsets into a big input must fit idx_t even
 * when the output (a slice, a gather) is small. */
int64_t cg_max_numel(const Node *n) {
  int64_t m = 0;
  for (int k = 0; k < n->nin; k++)
    if (n->in[k] && cg_numel(n->in[k]) > m)
      m = cg_numel(n->in[k]);
  for (int k = 0; k < n->nout; k++)
    if (cg_numel(n->out[k]) > m)
      m = cg_numel(n->out[k]);
  return m;
}

void cg_loop_begin(Cg *cg, const Node *n, int64_t count) {
  int64_t m = cg_max_numel(n);
  buf_printf(&cg->src, "  typedef %s idx_t;\n", cg_idx_type(cg, m > count ? m : count));
  buf_printf(&cg->src, "  for (idx_t i = (idx_t)blockIdx.x * blockDim.x + threadIdx.x; i < %" PRId64 "; i += (idx_t)gridDim.x * blockDim.x) {\n", count);
}

void cg_loop_end(Cg *cg, const Node *n, const char *name, int64_t count) {
  buf_puts(&cg->src, "  }\n}\n");
  cg_kernel_step(cg, n, name, cg_blocks(cg, count, cg->target->block), (unsigned)cg->target->block);
}

/* A kernel's code with its name made "@", and the name of the kernel that has it. */
typedef struct CgCode {
  uint64_t hash;
  const char *code, *name;
} CgCode;

/* The kernel just written, `name`, when no earlier kernel has its code (its text from the
 * signature on, the name aside); else that kernel's name, its text dropped from the
 * source but the comment, which says what it launches. NVRTC compiles each code once:
 * a transformer's layers, or the variants of groups of one shape, are many launches of
 * few kernels. */
static const char *dedup_kernel(Cg *cg, const char *name) {
  Buf *b = &cg->src;
  if (name != cg->open_name || cg->open_at >= b->len)
    return name; /* not the kernel just written */
  cg->open_name = NULL;
  const char *text = b->s + cg->open_at, *at = strstr(text, name);
  size_t nlen = strlen(name);
  if (!at)
    return name;
  char *code = cg_fmt(cg, "%.*s@%s", (int)(at - text), text, at + nlen);
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char *c = code; *c; c++)
    h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
  for (int i = 0; i < cg->ncodes; i++)
    if (cg->codes[i].hash == h && !strcmp(cg->codes[i].code, code)) {
      b->len = cg->open_at;
      b->s[b->len] = 0;
      buf_printf(b, "/* launches %s: the same code */\n", cg->codes[i].name);
      return cg->codes[i].name;
    }
  if (cg->ncodes == cg->codes_cap) {
    cg->codes_cap = cg->codes_cap ? 2 * cg->codes_cap : 64;
    CgCode *grown = realloc(cg->codes, (size_t)cg->codes_cap * sizeof *grown);
    if (!grown)
      abort(); /* out of memory aborts, like arena_alloc */
    cg->codes = grown;
  }
  cg->codes[cg->ncodes++] = (CgCode){h, code, name};
  return name;
}

void cg_kernel_step_values(Cg *cg, const Node *n, const char *name, unsigned grid,
                           unsigned block, const Value *const *in, int nin,
                           const Value *const *out, int nout) {
  name = dedup_kernel(cg, name);
  int params = nout;
  for (int i = 0; i < nin; i++)
    params += in[i] != NULL;
  if (params > CODEGEN_MAX_PARAMS) {
    cg_error(cg, n, "%s (node %d): its kernel %s would take %d parameters (%d bytes); CUDA "
             "allows a kernel %d bytes of parameters (%d pointers)", op_info[n->op].name,
             n->id, name, params, params * 8, CODEGEN_MAX_PARAM_BYTES, CODEGEN_MAX_PARAMS);
    cg->failed = true;
  }
  Step *s = cg_add_step(cg, STEP_KERNEL, n);
  KernelStep *k = &s->kernel;
  k->name = name;
  k->grid[0] = grid;
  k->grid[1] = k->grid[2] = 1;
  k->block[0] = block;
  k->block[1] = k->block[2] = 1;
  k->args = arena_alloc(cg->arena, sizeof *k->args * (size_t)(nin + nout));
  for (int i = 0; i < nin; i++)
    if (in[i])
      k->args[k->nargs++] = in[i];
  k->nread = k->nargs;
  for (int i = 0; i < nout; i++)
    k->args[k->nargs++] = out[i];
  k->inplace = cg->inplace;
  cg->inplace = 0;
  k->shared_bytes = cg->shared_bytes;
  cg->shared_bytes = 0;
}

void cg_kernel_step(Cg *cg, const Node *n, const char *name, unsigned grid, unsigned block) {
  const Value *const *in, *const *out;
  int nin, nout;
  kernel_operands(cg, n, &in, &nin, &out, &nout);
  cg_kernel_step_values(cg, n, name, grid, block, in, nin, out, nout);
}

/* ---------------------------------------------------------------- the preamble */

/* NVRTC has no built-in cuda_fp16.h or cuda_bf16.h (CUDA 13 checked), and a compile
 * must not depend on where the toolkit's headers are, so 16-bit floats are their bit
 * patterns here, converted with PTX cvt (round to nearest even, like the reference
 * executor). Everything is inline or a template: unused helpers cost nothing. */
static const char *const preamble[] = {
    "// Generated by gpucc: one kernel per IR node, shapes and strides as constants.\n"
    "typedef double gc_f64;\n"
    "typedef float gc_f32;\n"
    "struct gc_f16 { unsigned short bits; };\n"
    "struct gc_bf16 { unsigned short bits; };\n"
    "struct gc_f8e4m3 { unsigned char bits; };\n"
    "typedef long long gc_i64;\n"
    "typedef int gc_i32;\n"
    "typedef short gc_i16;\n"
    "typedef signed char gc_i8;\n"
    "typedef unsigned char gc_u8;\n"
    "typedef unsigned char gc_bool;\n"
    "#define GC_INF __int_as_float(0x7f800000)\n"
    "#define GC_NAN __int_as_float(0x7fffffff)\n"
    "\n"
    "__device__ __forceinline__ float gc_h2f(gc_f16 h) { float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h.bits)); return f; }\n"
    "__device__ __forceinline__ gc_f16 gc_f2h(float f) { gc_f16 h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h.bits) : \"f\"(f)); return h; }\n"
    "// two floats to a pair of 16-bit values, lo in the low half, each rounded as gc_f2bf and\n"
    "// gc_f2h round it, in one instruction\n"
    "__device__ __forceinline__ unsigned gc_f2bf2(float lo, float hi) { unsigned u; asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\" : \"=r\"(u) : \"f\"(hi), \"f\"(lo)); return u; }\n"
    "__device__ __forceinline__ unsigned gc_f2h2(float lo, float hi) { unsigned u; asm(\"cvt.rn.f16x2.f32 %0, %1, %2;\" : \"=r\"(u) : \"f\"(hi), \"f\"(lo)); return u; }\n"
    "__device__ __forceinline__ gc_f16 gc_d2h(double f) { gc_f16 h; asm(\"cvt.rn.f16.f64 %0, %1;\" : \"=h\"(h.bits) : \"d\"(f)); return h; }\n"
    "__device__ __forceinline__ float gc_bf2f(gc_bf16 h) { return __uint_as_float((unsigned)h.bits << 16); }\n"
    "__device__ __forceinline__ gc_bf16 gc_f2bf(float f) { gc_bf16 h; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h.bits) : \"f\"(f)); return h; }\n"
    "// float to integer like the reference's f64_to_i64: toward zero, saturating, NaN to 0\n"
    "// (__float2ll_rz alone gives INT64_MIN for NaN)\n"
    "__device__ __forceinline__ long long gc_f2ll(float x) { return x != x ? 0 : __float2ll_rz(x); }\n"
    "__device__ __forceinline__ long long gc_f2ll(double x) { return x != x ? 0 : __double2ll_rz(x); }\n"
    "// double to bf16 rounded once: to odd into float (its 24 bits keep the sticky bit), then to nearest even\n"
    "__device__ __forceinline__ gc_bf16 gc_d2bf(double d) {\n"
    "  float f = __double2float_rz(d);\n"
    "  if ((double)f != d && f == f) f = __uint_as_float(__float_as_uint(f) | 1u);\n"
    "  return gc_f2bf(f);\n"
    "}\n"
    "// e4m3 (\"fn\": no inf, S.1111.111 is NaN), exponent bias 7, subnormals m * 2^-9\n"
    "__device__ __forceinline__ float gc_e4m32f(gc_f8e4m3 h) {\n"
    "  const unsigned s = (h.bits & 0x80u) << 24, e = (h.bits >> 3) & 15u, m = h.bits & 7u;\n"
    "  if (e == 15u && m == 7u) return __uint_as_float(s | 0x7fc00000u);\n"
    "  const float f = e ? __uint_as_float(((e + 120u) << 23) | (m << 20)) : (float)m * 0x1p-9f;\n"
    "  return __uint_as_float(__float_as_uint(f) | s);\n"
    "}\n"
    "// to nearest even, saturating: beyond +-448 (inf too) is +-448, NaN stays NaN\n"
    "__device__ __forceinline__ gc_f8e4m3 gc_f2e4m3(float f) {\n"
    "  gc_f8e4m3 r;\n"
    "#if __CUDA_ARCH__ >= 890\n"
    "  unsigned short h;\n"
    "  asm(\"cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\" : \"=h\"(h) : \"f\"(0.0f), \"f\"(f));\n"
    "  r.bits = (unsigned char)h;\n"
    "#else\n"
    "  const float a = fabsf(f);\n"
    "  unsigned b;\n"
    "  if (a != a) b = 0x7fu;\n"
    "  else if (a > 448.0f) b = 0x7eu;\n"
    "  else if (a < 0x1p-6f) b = (unsigned)rintf(a * 512.0f);\n"
    "  else {\n"
    "    const int e = (int)((__float_as_uint(a) >> 23) & 0xffu) - 127;\n"
    "    b = (unsigned)((e + 6) * 8) + (unsigned)rintf(ldexpf(a, 3 - e));\n"
    "  }\n"
    "  r.bits = (unsigned char)(((__float_as_uint(f) >> 24) & 0x80u) | b);\n"
    "#endif\n"
    "  return r;\n"
    "}\n"
    "__device__ __forceinline__ gc_f8e4m3 gc_d2e4m3(double d) {\n"
    "  float f = __double2float_rz(d);\n"
    "  if ((double)f != d && f == f) f = __uint_as_float(__float_as_uint(f) | 1u);\n"
    "  return gc_f2e4m3(f);\n"
    "}\n"
    "\n",
    "// D += A B on tensor cores for one warp: A 16x16 (row-major fragment a[4]), B 16x8\n"
    "// (column-major fragment b[2]) of bf16 or f16 pairs, D 16x8 in f32 (c[4]); the\n"
    "// fragments' layout is PTX's for mma.m16n8k16\n"
    "__device__ __forceinline__ void gc_mma_bf16(float *c, const unsigned *a, const unsigned *b) { asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\" : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3]) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n"
    "__device__ __forceinline__ void gc_mma_f16(float *c, const unsigned *a, const unsigned *b) { asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\" : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3]) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n"
    "// the same with A 16x8 and B 8x8 of TF32 values (f32 bits, rounded by gc_tf32): mma.m16n8k8\n"
    "__device__ __forceinline__ void gc_mma_tf32(float *c, const unsigned *a, const unsigned *b) { asm volatile(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\" : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3]) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1])); }\n"
    "// 2^x, flushing subnormal results to zero (one instruction where exp2f takes four)\n"
    "__device__ __forceinline__ float gc_ex2(float x) { float r; asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(r) : \"f\"(x)); return r; }\n"
    "// p's 32-bit shared-memory address, converted where the compiler sees it (not inside the asm\n"
    "// that uses it): it then adds the constant offsets of neighbouring addresses to one register\n"
    "__device__ __forceinline__ unsigned gc_smem(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }\n"
    "// ldmatrix.x4: four 8x8 matrices of 16-bit values (8 rows of 16 bytes: four 32-bit slots),\n"
    "// lanes 8i..8i+7 giving matrix i's rows; r[i] gets row lane / 4, slot lane % 4 of matrix i\n"
    "__device__ __forceinline__ void gc_ldsm4(unsigned *r, const void *p) { asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\" : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(gc_smem(p))); }\n"
    "// ... and transposed (ldmatrix.trans): r[i] gets matrix i's elements (2 (lane % 4), lane / 4)\n"
    "// and (2 (lane % 4) + 1, lane / 4), low and high half\n"
    "__device__ __forceinline__ void gc_ldsm4t(unsigned *r, const void *p) { asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\" : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(gc_smem(p))); }\n"
    "// p as a value the compiler cannot see into: a pointer a thread computes once stays in its\n"
    "// registers, where the compiler would fold it back into each address made from it (and\n"
    "// load the kernel's parameter again for each)\n"
    "template <class T> __device__ __forceinline__ const T *gc_keep(const T *p) { asm(\"\" : \"+l\"(p)); return p; }\n"
    "// the f32 of bits x rounded to TF32 (10-bit mantissa, to nearest, ties away from zero)\n"
    "__device__ __forceinline__ unsigned gc_tf32(unsigned x) { unsigned r; asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(r) : \"f\"(__uint_as_float(x))); return r; }\n"
    "// x rounded to TF32 in place; returns the rest rounded to TF32 (0 for inf and NaN), so\n"
    "// that x's big part times y's plus the cross terms is x * y to about 2^-21 (3xTF32)\n"
    "__device__ __forceinline__ unsigned gc_tf32_split(unsigned &x) {\n"
    "  const unsigned hi = gc_tf32(x);\n"
    "  const unsigned lo = (hi & 0x7f800000u) == 0x7f800000u ? 0u : gc_tf32(__float_as_uint(__uint_as_float(x) - __uint_as_float(hi)));\n"
    "  x = hi;\n"
    "  return lo;\n"
    "}\n"
    "\n",
    "// thread block clusters (sm_90): a block's shared memory is declared by GC_BLOCK_SHARED\n"
    "// (tests/lit's emulator keeps one copy per block of a cluster); gc_cluster_sync is a\n"
    "// barrier of the cluster's threads that orders their shared memory writes before its\n"
    "// reads; gc_cluster_map is p's place in the shared memory of the cluster's block rank\n"
    "#ifndef GC_BLOCK_SHARED\n"
    "#define GC_BLOCK_SHARED(T, name) __shared__ T name\n"
    "#endif\n"
    "// a block's shared memory of the launch's dynamic size (KernelStep.shared_bytes), which may\n"
    "// exceed the 48 KiB a static declaration may have\n"
    "#ifndef GC_DYN_SHARED\n"
    "#define GC_DYN_SHARED(T, name) extern __shared__ __align__(128) unsigned char gc_dyn_shared[]; T &name = *reinterpret_cast<T *>(gc_dyn_shared)\n"
    "#endif\n"
    "__device__ __forceinline__ void gc_cluster_sync() { asm volatile(\"barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;\" ::: \"memory\"); }\n"
    "template <class T> __device__ __forceinline__ T *gc_cluster_map(T *p, unsigned rank) { unsigned long long r; asm(\"mapa.u64 %0, %1, %2;\" : \"=l\"(r) : \"l\"(p), \"r\"(rank)); return (T *)r; }\n"
    "\n",
    "// cp.async (sm_80): 16 bytes from base + at (16-byte aligned) to shared memory dst when ok,\n"
    "// else 16 zeros (a copy of no bytes), in flight until gc_cp_wait<N> leaves at most N of\n"
    "// the groups that gc_cp_commit closes unfinished\n"
    "template <class T, class I> __device__ __forceinline__ void gc_cp16(void *dst, const T *base, I at, bool ok) { asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(gc_smem(dst)), \"l\"(base + (ok ? at : 0)), \"r\"(ok ? 16 : 0) : \"memory\"); }\n"
    "__device__ __forceinline__ void gc_cp_commit() { asm volatile(\"cp.async.commit_group;\" ::: \"memory\"); }\n"
    "template <int N> __device__ __forceinline__ void gc_cp_wait() { asm volatile(\"cp.async.wait_group %0;\" :: \"n\"(N) : \"memory\"); }\n"
    "// x rounded to TF32 in place (half a step up in magnitude: an integer add and mask, where\n"
    "// cvt.rna is slow); returns the rest, exact in f32, of which mma reads the top 11 bits:\n"
    "// x's big part times y's plus the cross terms is x * y to about 2^-21 (3xTF32). The rest\n"
    "// of an inf (or of a value that rounds up to inf) is NaN, and a NaN may round to -0 with\n"
    "// a NaN rest: callers recompute NaN sums in f32.\n"
    "__device__ __forceinline__ unsigned gc_tf32_parts(unsigned &x) {\n"
    "  const unsigned hi = (x + 0x1000u) & 0xffffe000u;\n"
    "  const float lo = __uint_as_float(x) - __uint_as_float(hi);\n"
    "  x = hi;\n"
    "  return __float_as_uint(lo);\n"
    "}\n"
    "\n",
    "// 128-bit (or narrower) vectors of contiguous elements\n"
    "template <class T, int V> struct alignas(sizeof(T) * V) gc_vec { T e[V]; };\n"
    "// W 32-bit slots from base + at (aligned to their size) when ok, else zeros\n"
    "template <int W, class T, class I> __device__ __forceinline__ void gc_load_slots(unsigned *dst, const T *base, I at, bool ok) {\n"
    "  gc_vec<unsigned, W> u = {};\n"
    "  if (ok) u = *(const gc_vec<unsigned, W> *)(base + at);\n"
    "#pragma unroll\n"
    "  for (int e = 0; e < W; e++) dst[e] = u.e[e];\n"
    "}\n"
    "\n"
    "// integers wrap like the reference executor's (no undefined overflow)\n"
    "__device__ __forceinline__ long long gc_iadd(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }\n"
    "__device__ __forceinline__ long long gc_isub(long long a, long long b) { return (long long)((unsigned long long)a - (unsigned long long)b); }\n"
    "__device__ __forceinline__ long long gc_imul(long long a, long long b) { return (long long)((unsigned long long)a * (unsigned long long)b); }\n"
    "__device__ __forceinline__ long long gc_ineg(long long a) { return (long long)(0ull - (unsigned long long)a); }\n"
    "__device__ __forceinline__ long long gc_idiv(long long a, long long b) { return b == 0 ? 0 : b == -1 ? gc_ineg(a) : a / b; }\n"
    "__device__ __forceinline__ long long gc_imod(long long a, long long b, bool c_fmod) {\n"
    "  if (b == 0 || b == -1) return 0;\n"
    "  long long r = a % b;\n"
    "  return !c_fmod && r != 0 && (r < 0) != (b < 0) ? r + b : r;\n"
    "}\n"
    "template <class T> __device__ __forceinline__ T gc_fmod(T a, T b, bool c_fmod) {\n"
    "  T r = fmod(a, b);\n"
    "  return !c_fmod && r != 0 && (r < 0) != (b < 0) ? r + b : r;\n"
    "}\n"
    "template <class T> __device__ __forceinline__ T gc_sigmoid(T x) {\n"
    "  if (x >= 0) return (T)1 / ((T)1 + exp(-x));\n"
    "  T e = exp(x);\n"
    "  return e / ((T)1 + e);\n"
    "}\n"
    "// a sigmoid whose result is rounded to 16 bits (bf16, f16): __expf's error, 2 + 1.16|x|\n"
    "// ulps of f32, stays under 2^-16 of the result wherever 16 bits hold it other than 0\n"
    "// or 1, below bf16's and f16's half ulp (2^-9, 2^-11); the reciprocal is rounded\n"
    "__device__ __forceinline__ float gc_sigmoid16(float x) { return __frcp_rn(1.0f + __expf(-x)); }\n"
    "template <class T> __device__ __forceinline__ T gc_softplus(T x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }\n"
    "template <class T> __device__ __forceinline__ T gc_clamp01(T v) { return v < 0 ? (T)0 : v > 1 ? (T)1 : v; }\n"
    "template <class T> __device__ __forceinline__ T gc_celu(T x, T alpha) {\n"
    "  T e = alpha * (exp(x / alpha) - (T)1);\n"
    "  return x != x ? x : (x > 0 ? x : (T)0) + (e < 0 ? e : (T)0);\n"
    "}\n"
    "// topk's order (the reference's topk_before): larger (smaller) first, a NaN as the\n"
    "// largest, ties by index; ids of n and above are padding, after everything\n"
    "template <bool LARGEST, class T> __device__ __forceinline__ bool gc_topk_before(T a, int ia, T b, int ib, int n) {\n"
    "  if (ia >= n || ib >= n) return ia < ib;\n"
    "  bool an = a != a, bn = b != b;\n"
    "  if (an || bn) {\n"
    "    if (an != bn) return an == LARGEST;\n"
    "  } else if (a != b) {\n"
    "    return LARGEST ? a > b : a < b;\n"
    "  }\n"
    "  return ia < ib;\n"
    "}\n"
    "// grid_sample's reflection (the reference's gs_reflect): x folded into [lo, hi] by the\n"
    "// nearer border; __dmul_rn keeps the product out of a fused multiply-add, like the host\n"
    "__device__ __forceinline__ double gc_reflect(double x, double lo, double hi) {\n"
    "  double range = hi - lo;\n"
    "  if (range <= 0) return lo;\n"
    "  if (x >= lo && x <= hi) return x;\n"
    "  bool below = x < lo;\n"
    "  double dx = below ? lo - x : x - hi, times = floor(dx / range), rest = dx - __dmul_rn(times, range);\n"
    "  bool even = fmod(times, 2.0) == 0;\n"
    "  return below == even ? lo + rest : hi - rest;\n"
    "}\n"
    "// resize's cubic convolution weight at distance s (the reference's cubic_coeff)\n"
    "__device__ __forceinline__ double gc_cubic(double s, double a) {\n"
    "  s = fabs(s);\n"
    "  if (s <= 1) return ((a + 2) * s - (a + 3)) * s * s + 1;\n"
    "  if (s < 2) return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a;\n"
    "  return 0;\n"
    "}\n"
    "\n",
    "// reductions: a NaN wins max and min (numpy), except gc_fmax (softmax's shift)\n"
    "struct gc_add { template <class T> __device__ T operator()(T a, T b) const { return a + b; } };\n"
    "struct gc_mul { template <class T> __device__ T operator()(T a, T b) const { return a * b; } };\n"
    "struct gc_wadd { __device__ long long operator()(long long a, long long b) const { return gc_iadd(a, b); } };\n"
    "struct gc_wmul { __device__ long long operator()(long long a, long long b) const { return gc_imul(a, b); } };\n"
    "struct gc_max { template <class T> __device__ T operator()(T a, T b) const { return a != a ? a : b != b ? b : a > b ? a : b; } };\n"
    "struct gc_min { template <class T> __device__ T operator()(T a, T b) const { return a != a ? a : b != b ? b : a < b ? a : b; } };\n"
    "struct gc_fmax { template <class T> __device__ T operator()(T a, T b) const { return fmax(a, b); } };\n"
    "template <class T> struct gc_arg { T v; long long i; }; // i < 0: no element yet\n"
    "// argmax/argmin: the first NaN wins; ties go to the lower index (the higher with LAST)\n"
    "template <bool MIN, bool LAST> struct gc_argbest {\n"
    "  template <class T> __device__ gc_arg<T> operator()(gc_arg<T> a, gc_arg<T> b) const {\n"
    "    if (b.i < 0) return a;\n"
    "    if (a.i < 0) return b;\n"
    "    bool an = a.v != a.v, bn = b.v != b.v;\n"
    "    if (an || bn) return an && bn ? (a.i < b.i ? a : b) : an ? a : b;\n"
    "    if (a.v == b.v) return (LAST ? a.i > b.i : a.i < b.i) ? a : b;\n"
    "    return (MIN ? a.v < b.v : a.v > b.v) ? a : b;\n"
    "  }\n"
    "};\n"
    "template <class T> __device__ __forceinline__ T gc_shfl(T v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }\n"
    "template <class T> __device__ __forceinline__ gc_arg<T> gc_shfl(gc_arg<T> a, int m) {\n"
    "  a.v = __shfl_xor_sync(0xffffffffu, a.v, m);\n"
    "  a.i = __shfl_xor_sync(0xffffffffu, a.i, m);\n"
    "  return a;\n"
    "}\n"
    "// every lane gets the warp's total (butterfly)\n"
    "template <class T, class F> __device__ __forceinline__ T gc_warp_reduce(T v, F f) {\n"
    "#pragma unroll\n"
    "  for (int m = 16; m > 0; m >>= 1) v = f(v, gc_shfl(v, m));\n"
    "  return v;\n"
    "}\n"
    "// every thread gets the block's total; blockDim.x is a multiple of 32\n"
    "template <class T, class F> __device__ __forceinline__ T gc_block_reduce(T v, F f, T ident) {\n"
    "  __shared__ T part[32];\n"
    "  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;\n"
    "  v = gc_warp_reduce(v, f);\n"
    "  __syncthreads(); // part[] may still be read by a previous call\n"
    "  if (lane == 0) part[warp] = v;\n"
    "  __syncthreads();\n"
    "  return gc_warp_reduce(lane < nwarps ? part[lane] : ident, f);\n"
    "}\n",
    NULL};

/* ---------------------------------------------------------------- checks */

static int check_value(Cg *cg, const Node *n, const Value *v) {
  char ts[256];
  if (!shape_is_static(&v->type.shape)) {
    const char *sym = "N";
    for (int i = 0; i < v->type.shape.rank; i++)
      if (v->type.shape.dims[i].sym) {
        sym = v->type.shape.dims[i].sym;
        break;
      }
    const DimRange *r = graph_range(cg->g, sym);
    char rs[128];
    diag_error(cg->d, v->loc.line ? v->loc : n ? n->loc : cg->g->loc,
               "codegen: %%%s has the symbolic shape %s; %s%s%sbind %s with --dim %s=SIZE",
               v->name, type_str(&v->type, ts, sizeof ts), r ? "its range " : "",
               r ? range_str(r, rs, sizeof rs) : "",
               r ? " does not compile to one program yet (docs/dynamic-shapes.md): " : "", sym,
               sym);
    if (n)
      ir_note_node(cg->d, n);
    return -1;
  }
  if (!cg_ctype(v->type.dtype))
    return cg_error(cg, n, "%%%s is %s, which has no GPU support yet", v->name,
                    dtype_name(v->type.dtype));
  return 0;
}

static int check_graph(Cg *cg) {
  const Graph *g = cg->g;
  for (int i = 0; i < g->ninputs; i++)
    if (check_value(cg, NULL, g->inputs[i]))
      return -1;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] && check_value(cg, n, n->in[k]))
        return -1;
    for (int k = 0; k < n->nout; k++)
      if (check_value(cg, n, n->out[k]))
        return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------- the driver */

static int gen_op(Cg *cg, const Node *n);

/* The tables of Cg that say where each node's group and each value's readers are. */
static int index_graph(Cg *cg) {
  const Graph *g = cg->g;
  cg->group_first = arena_alloc(cg->arena, sizeof(int) * (size_t)(g->nnodes + 1));
  cg->group_next = arena_alloc(cg->arena, sizeof(int) * (size_t)(g->nnodes + 1));
  if (ir_fuse_groups(g, cg->group_first, cg->group_next) || users_build(g, &cg->users))
    return diag_error(cg->d, g->loc, "out of memory");
  return 0;
}

/* A fuse group's kernel, at its root (the group's last node, at position `at`); the
 * other nodes of the group have nothing of their own. The recognizer gives the group's
 * plan, of the kind its root names (the verifier has checked that it has one), within
 * what one kernel takes; the plan's kind says which generator renders it. */
static int gen_group(Cg *cg, int at) {
  const Graph *g = cg->g;
  const Node *root = g->nodes[at];
  if (cg->group_next[at] >= 0)
    return 0; /* not the root */
  int n = 0;
  for (int i = cg->group_first[at]; i >= 0; i = cg->group_next[i])
    n++;
  const Node **members = arena_alloc(cg->arena, sizeof *members * (size_t)n);
  n = 0;
  for (int i = cg->group_first[at]; i >= 0; i = cg->group_next[i])
    members[n++] = g->nodes[i];
  GroupPlan p;
  char why[512];
  int rc = -1;
  if (group_plan(g, &cg->users, members, n, node_group_kind(root), &cg->lim, &p, why,
                 sizeof why)) {
    cg_error(cg, root, "fuse group %lld (%s) is no kernel codegen makes: %s",
             (long long)node_fuse_group(root), group_kind_name(p.kind), why);
    group_plan_free(&p);
    return -1;
  }
  cg->plan = &p;
  switch (p.kind) {
  case GROUP_POINTWISE: rc = cg_pointwise_group(cg, members, n); break;
  case GROUP_ATTENTION: rc = cg_attention(cg, &p); break;
  case GROUP_GEMM: rc = cg_gemm_group(cg, &p); break;
  case GROUP_CONCAT: rc = cg_concat_group(cg, &p); break;
  case GROUP_LOOP: rc = cg_loop_group(cg, &p); break;
  default: /* an anchor, maybe a convolution's prologue, maybe an epilogue */
    cg->pro = p.nprologue ? &p : NULL;
    rc = (p.nepilogue && cg_epilogue_begin(cg, &p)) || gen_op(cg, p.anchor);
    rc = cg_epilogue_end(cg) || rc ? -1 : 0;
    cg->pro = NULL;
    break;
  }
  cg->plan = NULL;
  group_plan_free(&p);
  return rc;
}

static int gen_node(Cg *cg, int at) {
  const Node *n = cg->g->nodes[at];
  bool empty = true;
  for (int k = 0; k < n->nout; k++)
    empty = empty && cg_numel(n->out[k]) == 0;
  if (empty) {
    buf_printf(&cg->src, "\n/* node %d: %s has empty outputs: nothing to do */\n", n->id,
               op_info[n->op].name);
    return 0;
  }
  if (node_fuse_group(n))
    return gen_group(cg, at);
  return gen_op(cg, n);
}

/* The kernels, GEMMs or alias of one node. */
static int gen_op(Cg *cg, const Node *n) {
  if (op_info[n->op].flags & OPF_ALIAS) {
    Step *s = cg_add_step(cg, STEP_ALIAS, n);
    s->alias.in = n->in[0];
    s->alias.out = n->out[0];
    return 0;
  }
  switch (n->op) {
  case OP_MATMUL: return cg_matmul(cg, n);
  case OP_REDUCE_SUM: case OP_REDUCE_MEAN: case OP_REDUCE_MAX: case OP_REDUCE_MIN:
  case OP_REDUCE_PROD: case OP_REDUCE_L1: case OP_REDUCE_L2: case OP_REDUCE_SUM_SQUARE:
  case OP_REDUCE_LOG_SUM_EXP: case OP_ARGMAX: case OP_ARGMIN:
    return cg_reduce(cg, n);
  case OP_SOFTMAX: case OP_LOG_SOFTMAX: return cg_softmax(cg, n);
  case OP_LAYER_NORM: case OP_RMS_NORM: return cg_layer_norm(cg, n);
  case OP_TRANSPOSE: case OP_EXPAND: case OP_CONCAT: case OP_SLICE: case OP_SPLIT:
  case OP_GATHER: case OP_PAD:
    return cg_layout(cg, n);
  case OP_GLOBAL_AVERAGE_POOL: case OP_GLOBAL_MAX_POOL: return cg_global_pool(cg, n);
  case OP_INSTANCE_NORM: return cg_instance_norm(cg, n);
  case OP_HARDMAX: return cg_hardmax(cg, n);
  case OP_LP_NORM: return cg_lp_norm(cg, n);
  case OP_MEAN_VARIANCE_NORM: return cg_mean_variance_norm(cg, n);
  case OP_CONV: case OP_CONV_TRANSPOSE: case OP_MAX_POOL: case OP_AVERAGE_POOL:
  case OP_BATCH_NORM: case OP_LRN: case OP_RESIZE: case OP_GRID_SAMPLE: case OP_ROI_ALIGN:
    return cg_nn(cg, n);
  case OP_TILE: case OP_TRILU: case OP_GATHER_ELEMENTS: case OP_GATHER_ND:
  case OP_SCATTER_ELEMENTS: case OP_SCATTER_ND: case OP_RANGE: case OP_ONE_HOT:
  case OP_DEPTH_TO_SPACE: case OP_SPACE_TO_DEPTH: case OP_REVERSE_SEQUENCE: case OP_MAX_UNPOOL:
    return cg_index(cg, n);
  case OP_DET: return cg_det(cg, n);
  case OP_CUMSUM: case OP_TOPK: return cg_scan(cg, n);
  case OP_NLL_LOSS: case OP_SOFTMAX_CROSS_ENTROPY: return cg_loss(cg, n);
  default: break;
  }
  if (op_info[n->op].flags & OPF_POINTWISE)
    return cg_pointwise(cg, n);
  return cg_error(cg, n, "op %s (node %d) has no GPU kernel yet", op_info[n->op].name, n->id);
}

struct CodegenShared {
  Arena *arena; /* the codes' strings */
  CgCode *codes;
  int ncodes, codes_cap;
  int programs; /* written so far: the first has the preamble */
};

size_t codegen_preamble_size(void) {
  size_t n = 0;
  for (int i = 0; preamble[i]; i++)
    n += strlen(preamble[i]);
  return n;
}

CodegenShared *codegen_shared_new(void) {
  CodegenShared *s = calloc(1, sizeof *s);
  if (s)
    s->arena = arena_new();
  return s;
}

void codegen_shared_free(CodegenShared *s) {
  if (!s)
    return;
  free(s->codes);
  arena_free(s->arena);
  free(s);
}

/* cg's codes back to the group: the ones this program added, copied out of its arena
 * (which the program owns), when it succeeded; dropped when it failed. */
static void codes_done(Cg *cg, CodegenShared *s, int first, bool ok) {
  if (!s) {
    free(cg->codes);
    return;
  }
  if (!ok)
    cg->ncodes = first;
  for (int i = first; i < cg->ncodes; i++) {
    cg->codes[i].code = arena_strdup(s->arena, cg->codes[i].code);
    cg->codes[i].name = arena_strdup(s->arena, cg->codes[i].name);
  }
  s->codes = cg->codes;
  s->ncodes = cg->ncodes;
  s->codes_cap = cg->codes_cap;
  s->programs += ok;
}

Program *codegen_graph(const Graph *g, const CodegenOptions *opt, Diag *d) {
  /* What its kernels take on the target. A group's node count is the fuse pass's choice
   * for NVRTC's time, not a kernel's limit: a group written by hand may be longer. */
  Cg cg = {.g = g, .arena = arena_new(), .d = d,
           .target = opt && opt->target ? opt->target : target_default(), .variant = -1};
  cg.variants = opt && opt->variants > 0 && opt->variants < CODEGEN_MAX_VARIANTS
                    ? opt->variants : CODEGEN_MAX_VARIANTS;
  cg.lim = group_limits_for(cg.target);
  cg.lim.nodes = INT_MAX;
  CodegenShared *shared = opt ? opt->shared : NULL;
  cg.prefix = opt ? opt->prefix : NULL;
  if (target_check(cg.target, d) || ir_verify(g, d) || check_graph(&cg) || index_graph(&cg)) {
    users_free(&cg.users);
    arena_free(cg.arena);
    return NULL;
  }
  int first_code = 0;
  if (shared) {
    cg.codes = shared->codes;
    cg.ncodes = first_code = shared->ncodes;
    cg.codes_cap = shared->codes_cap;
  }
  for (int i = 0; preamble[i] && (!shared || !shared->programs); i++)
    buf_puts(&cg.src, preamble[i]);
  size_t *cuts = arena_alloc(cg.arena, sizeof *cuts * (size_t)(g->nnodes + 1));
  int ncuts = 0;
  for (int i = 0; i < g->nnodes; i++) {
    if (gen_node(&cg, i) || cg.failed) {
      users_free(&cg.users);
      free(cg.src.s);
      codes_done(&cg, shared, first_code, false);
      arena_free(cg.arena);
      return NULL;
    }
    if (!ncuts || cuts[ncuts - 1] < cg.src.len)
      cuts[ncuts++] = cg.src.len;
  }
  users_free(&cg.users);
  Program *p = arena_alloc(cg.arena, sizeof *p);
  p->cuts = cuts;
  p->ncuts = ncuts;
  p->arena_ = cg.arena;
  p->source = arena_memdup(cg.arena, cg.src.s, cg.src.len + 1);
  p->source_len = cg.src.len;
  p->steps = cg.steps;
  p->nsteps = cg.nsteps;
  free(cg.src.s);
  codes_done(&cg, shared, first_code, true);
  return p;
}

void program_free(Program *p) {
  if (p)
    arena_free(p->arena_);
}
