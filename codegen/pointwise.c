/* pointwise.c: kernels for the pointwise ops of ops.def (unary, binary with numpy
 * broadcasting, where, clip, cast, comparisons). One thread per output element in a
 * grid-stride loop; when every operand is contiguous and unbroadcast and the element
 * count divides, each thread moves 128 bits of the widest operand at a time instead.
 * The meaning of each op is ir/interp.c's: the expressions below mirror unary_f,
 * unary_i, binary_f and binary_i, computed in f32 for f32/f16/bf16, in f64 for f64
 * and in wrapping int64 for integers and bool. */
#include "codegen/cg-impl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The domain node n computes in: its first input's, except that shrink takes integers
 * through double like the reference executor. */
static Dom op_domain(const Node *n) {
  DType t = n->in[0]->type.dtype;
  if (n->op == OP_SHRINK && !dtype_is_float(t))
    return DOM_F64;
  return cg_dom(t);
}

/* The value of a float attribute in domain dom. */
static const char *fattr(Cg *cg, const Node *n, const char *name, Dom dom) {
  return cg_lit(cg, attr_float(n, name), dom);
}

/* Unary op on x (a variable of domain dom). NULL when the op has no meaning there. */
static const char *unary_expr(Cg *cg, const Node *n, Dom dom, const char *x) {
  const char *T = cg_dom_type(dom);
  if (dom == DOM_I64) {
    switch (n->op) {
    case OP_IDENTITY: case OP_CAST: return x;
    case OP_NEG: return cg_fmt(cg, "gc_ineg(%s)", x);
    case OP_ABS: return cg_fmt(cg, "(%s < 0 ? gc_ineg(%s) : %s)", x, x, x);
    case OP_SIGN: return cg_fmt(cg, "(%s > 0 ? 1LL : %s < 0 ? -1LL : 0LL)", x, x);
    case OP_RELU: return cg_fmt(cg, "(%s < 0 ? 0LL : %s)", x, x);
    case OP_CLIP: {
      /* the float bounds become integers the way a cast does (saturating) */
      int64_t lo = 0, hi = 0;
      dtype_store_f64(DT_I64, &lo, attr_float(n, "min"));
      dtype_store_f64(DT_I64, &hi, attr_float(n, "max"));
      const char *l = lo == INT64_MIN ? "(-9223372036854775807LL - 1)" : cg_fmt(cg, "%" PRId64 "LL", lo);
      const char *h = cg_fmt(cg, "%" PRId64 "LL", hi);
      return cg_fmt(cg, "(%s < %s ? %s : %s > %s ? %s : %s)", x, l, l, x, h, h, x);
    }
    case OP_NOT: return cg_fmt(cg, "(long long)(%s == 0)", x);
    case OP_BITWISE_NOT: return cg_fmt(cg, "(long long)~(unsigned long long)%s", x);
    default: return NULL;
    }
  }
  const char *one = cg_fmt(cg, "(%s)1", T), *zero = cg_fmt(cg, "(%s)0", T);
  switch (n->op) {
  case OP_IDENTITY: case OP_CAST: return x;
  case OP_NEG: return cg_fmt(cg, "(-%s)", x);
  case OP_ABS: return cg_fmt(cg, "fabs(%s)", x);
  case OP_SIGN: return cg_fmt(cg, "(%s > 0 ? %s : %s < 0 ? -%s : %s)", x, one, x, one, x);
  case OP_EXP: case OP_LOG: case OP_SQRT: case OP_FLOOR: case OP_CEIL: case OP_SIN:
  case OP_COS: case OP_TANH: case OP_ERF: case OP_TAN: case OP_ASIN: case OP_ACOS:
  case OP_ATAN: case OP_SINH: case OP_COSH: case OP_ASINH: case OP_ACOSH: case OP_ATANH:
    return cg_fmt(cg, "%s(%s)", op_info[n->op].name, x);
  case OP_RSQRT: return cg_fmt(cg, "rsqrt(%s)", x);
  case OP_RECIP: return cg_fmt(cg, "(%s / %s)", one, x);
  case OP_ROUND: return cg_fmt(cg, "rint(%s)", x); /* half to even */
  case OP_SIGMOID: return cg_fmt(cg, "gc_sigmoid(%s)", x);
  case OP_RELU: return cg_fmt(cg, "(%s < 0 ? %s : %s)", x, zero, x);
  case OP_GELU:
    if (!strcmp(attr_string(n, "approximate"), "tanh"))
      return cg_fmt(cg, "((%s)0.5 * %s * (%s + tanh((%s)0.79788456080286535588 * (%s + (%s)0.044715 * %s * %s * %s))))",
                    T, x, one, T, x, T, x, x, x);
    return cg_fmt(cg, "((%s)0.5 * %s * (%s + erf(%s * (%s)0.70710678118654752440)))", T, x, one, x, T);
  case OP_SILU: return cg_fmt(cg, "(%s * gc_sigmoid(%s))", x, x);
  case OP_SOFTPLUS: return cg_fmt(cg, "gc_softplus(%s)", x);
  case OP_LEAKY_RELU:
    return cg_fmt(cg, "(%s < 0 ? %s * %s : %s)", x, fattr(cg, n, "alpha", dom), x, x);
  case OP_ELU:
    return cg_fmt(cg, "(%s < 0 ? %s * expm1(%s) : %s)", x, fattr(cg, n, "alpha", dom), x, x);
  case OP_HARD_SIGMOID:
    return cg_fmt(cg, "gc_clamp01(%s * %s + %s)", fattr(cg, n, "alpha", dom), x,
                  fattr(cg, n, "beta", dom));
  case OP_HARD_SWISH: return cg_fmt(cg, "(%s * gc_clamp01(%s / (%s)6 + (%s)0.5))", x, x, T, T);
  case OP_CLIP: {
    const char *lo = fattr(cg, n, "min", dom), *hi = fattr(cg, n, "max", dom);
    return cg_fmt(cg, "(%s < %s ? %s : %s > %s ? %s : %s)", x, lo, lo, x, hi, hi, x);
  }
  case OP_IS_NAN: return cg_fmt(cg, "(%s != %s)", x, x);
  case OP_IS_INF: {
    bool neg = attr_int(n, "detect_negative") != 0, pos = attr_int(n, "detect_positive") != 0;
    return cg_fmt(cg, "(isinf(%s) && (%s < 0 ? %s : %s))", x, x, neg ? "true" : "false",
                  pos ? "true" : "false");
  }
  case OP_SOFTSIGN: return cg_fmt(cg, "(%s / (%s + fabs(%s)))", x, one, x);
  case OP_MISH: return cg_fmt(cg, "(%s * tanh(gc_softplus(%s)))", x, x);
  case OP_CELU: return cg_fmt(cg, "gc_celu(%s, %s)", x, fattr(cg, n, "alpha", dom));
  case OP_SELU:
    return cg_fmt(cg, "(%s * (%s > 0 ? %s : %s * expm1(%s)))", fattr(cg, n, "gamma", dom), x, x,
                  fattr(cg, n, "alpha", dom), x);
  case OP_THRESHOLDED_RELU:
    return cg_fmt(cg, "(%s > %s ? %s : %s)", x, fattr(cg, n, "alpha", dom), x, zero);
  case OP_SHRINK: {
    const char *l = fattr(cg, n, "lambd", dom), *b = fattr(cg, n, "bias", dom);
    return cg_fmt(cg, "(%s < -%s ? %s + %s : %s > %s ? %s - %s : %s)", x, l, x, b, x, l, x, b,
                  zero);
  }
  default: return NULL;
  }
}

static const char *binary_expr(Cg *cg, const Node *n, Dom dom, const char *a, const char *b) {
  const char *cmp = NULL;
  switch (n->op) {
  case OP_EQUAL: cmp = "=="; break;
  case OP_LESS: cmp = "<"; break;
  case OP_LESS_EQUAL: cmp = "<="; break;
  case OP_GREATER: cmp = ">"; break;
  case OP_GREATER_EQUAL: cmp = ">="; break;
  case OP_AND: return cg_fmt(cg, "(%s != 0 && %s != 0)", a, b);
  case OP_OR: return cg_fmt(cg, "(%s != 0 || %s != 0)", a, b);
  case OP_XOR: return cg_fmt(cg, "((%s != 0) != (%s != 0))", a, b);
  case OP_MAX: return cg_fmt(cg, "gc_max()(%s, %s)", a, b);
  case OP_MIN: return cg_fmt(cg, "gc_min()(%s, %s)", a, b);
  case OP_MOD: {
    bool c = attr_int(n, "fmod") != 0;
    return cg_fmt(cg, "%s(%s, %s, %s)", dom == DOM_I64 ? "gc_imod" : "gc_fmod", a, b,
                  c ? "true" : "false");
  }
  default: break;
  }
  if (cmp)
    return cg_fmt(cg, "(%s %s %s)", a, cmp, b);
  if (dom == DOM_I64) {
    switch (n->op) {
    case OP_ADD: return cg_fmt(cg, "gc_iadd(%s, %s)", a, b);
    case OP_SUB: return cg_fmt(cg, "gc_isub(%s, %s)", a, b);
    case OP_MUL: return cg_fmt(cg, "gc_imul(%s, %s)", a, b);
    case OP_DIV: return cg_fmt(cg, "gc_idiv(%s, %s)", a, b);
    case OP_BITWISE_AND: return cg_fmt(cg, "(%s & %s)", a, b);
    case OP_BITWISE_OR: return cg_fmt(cg, "(%s | %s)", a, b);
    case OP_BITWISE_XOR: return cg_fmt(cg, "(%s ^ %s)", a, b);
    case OP_BIT_SHIFT: {
      /* unsigned operands; a shift by 64 or more gives 0; the store truncates */
      bool left = !strcmp(attr_string(n, "direction"), "LEFT");
      return cg_fmt(cg, "((unsigned long long)%s >= 64 ? 0LL : (long long)((unsigned long long)%s %s (unsigned long long)%s))",
                    b, a, left ? "<<" : ">>", b);
    }
    default: return NULL;
    }
  }
  switch (n->op) {
  case OP_ADD: return cg_fmt(cg, "(%s + %s)", a, b);
  case OP_SUB: return cg_fmt(cg, "(%s - %s)", a, b);
  case OP_MUL: return cg_fmt(cg, "(%s * %s)", a, b);
  case OP_DIV: return cg_fmt(cg, "(%s / %s)", a, b);
  case OP_POW: return cg_fmt(cg, "pow(%s, %s)", a, b);
  case OP_PRELU: return cg_fmt(cg, "(%s < 0 ? %s * %s : %s)", a, a, b, a);
  default: return NULL;
  }
}

/* The output expression of n for operands x[0..] (domain variables, or raw stored
 * values for where, which only moves them). */
static const char *result_expr(Cg *cg, const Node *n, Dom dom, const char *const *x) {
  if (n->op == OP_WHERE)
    return cg_fmt(cg, "(%s ? %s : %s)", x[0], x[1], x[2]);
  if (n->nin == 1)
    return unary_expr(cg, n, dom, x[0]);
  return binary_expr(cg, n, dom, x[0], x[1]);
}

/* A node id and where a kernel's node[] has it. */
struct IdAt {
  int id, j;
};

/* What one kernel of pointwise nodes computes: the nodes in order (a fuse group, or one
 * node), the last one's output being the kernel's; the values they read from outside,
 * in kernel-parameter order (in0, in1, ...). */
struct PwKernel {
  const Node *const *node;
  int n;
  struct IdAt *by_id; /* node[]'s ids and indices, by id (member_of) */
  const Node *anchor; /* an epilogue's: the node whose kernel computes the value the
                         nodes start from (a conv); NULL in a pointwise kernel */
  const Value *ext[CG_MAX_OPS];
  int next;
  int base;           /* ext[e] is kernel parameter in<base + e> */
  const Value *out;
  const Value *side;  /* an epilogue's: the anchor's output, which the kernel stores too
                         as out1 (read outside the group: fuse.c's side outputs), or NULL */
  const Value *outs[2]; /* out, then side */
  const char *pre;    /* prefix of the generated variables ("" or "f": no clash with the
                         anchor kernel's own) */
  bool stored;        /* an epilogue: the anchor's kernel called cg_store_out */
};
typedef struct PwKernel PwKernel;

static int ext_index(const PwKernel *k, const Value *v) {
  for (int e = 0; e < k->next; e++)
    if (k->ext[e] == v)
      return e;
  return -1;
}

/* The member that defines v inside the kernel, -2 for the anchor's output, or -1: a
 * binary search by node id, since a group may hold any number of nodes. */
static int member_of(const PwKernel *k, const Value *v) {
  if (k->anchor && v == k->anchor->out[0])
    return -2;
  if (v->kind != VK_NODE)
    return -1;
  int lo = 0, hi = k->n;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (k->by_id[mid].id < v->def->id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < k->n && k->node[k->by_id[lo].j] == v->def ? k->by_id[lo].j : -1;
}

static int by_id(const void *pa, const void *pb) {
  const struct IdAt *a = pa, *b = pb;
  return (a->id > b->id) - (a->id < b->id);
}

/* The statements of one output element: every node in order, its operands loaded from
 * the kernel's inputs (ext_src[e] for input e, or where that is NULL, ext_fmt with the
 * input's index twice: "in%d[o%d]") or
 * from an earlier node's variable t<j> (which holds the value as memory would: rounding
 * to the node's dtype is the same fused or not), the last stored to dst. A lone node's
 * operands are x0, x1...; in a group, node j's are xj_0, xj_1... */
static void emit_elements(Cg *cg, const PwKernel *k, const char *ext_fmt,
                          const char *const *ext_src, const char *dst, const char *indent) {
  Buf *b = &cg->src;
  for (int j = 0; j < k->n; j++) {
    const Node *n = k->node[j];
    Dom dom = op_domain(n);
    const char *x[3];
    for (int a = 0; a < n->nin; a++) {
      const Value *v = n->in[a];
      int m = member_of(k, v), e = ext_index(k, v);
      const char *src = m >= 0 ? cg_fmt(cg, "%st%d", k->pre, m)
                        : m == -2 ? cg_fmt(cg, "%sa", k->pre)
                        : ext_src ? ext_src[e]
                                  : cg_fmt(cg, ext_fmt, k->base + e, e);
      DType t = v->type.dtype;
      x[a] = k->n == 1 && !k->anchor ? cg_fmt(cg, "x%d", a) : cg_fmt(cg, "%sx%d_%d", k->pre, j, a);
      if (n->op == OP_WHERE)
        buf_printf(b, "%sconst %s %s = %s;\n", indent, cg_ctype(t), x[a], src);
      else
        buf_printf(b, "%sconst %s %s = %s;\n", indent, cg_dom_type(dom), x[a], cg_load(cg, t, dom, src));
    }
    const char *expr = result_expr(cg, n, dom, x);
    DType out = n->out[0]->type.dtype;
    const char *val = n->op == OP_WHERE ? expr
                      : (op_info[n->op].flags & OPF_BOOL_OUT) ? cg_fmt(cg, "(gc_bool)%s", expr)
                                                              : cg_store(cg, out, dom, expr);
    if (j == k->n - 1)
      buf_printf(b, "%s%s = %s;\n", indent, dst, val);
    else
      buf_printf(b, "%sconst %s %st%d = %s;\n", indent, cg_ctype(out), k->pre, j, val);
  }
}

/* The vector width of a kernel over index space s (coalesced, the output's): 16 bytes of
 * the widest operand read as vectors, when the innermost dim divides by it and every input
 * either runs along it contiguously, each of its vectors aligned, or is constant
 * along it (one element for the whole vector); else 1. vec[e]: whether input e is read
 * as vectors. */
static int vector_width(const PwKernel *k, const Space *s, bool vec[CG_MAX_OPS]) {
  int64_t numel = cg_numel(k->out);
  if (s->rank == 0 || numel < 2)
    return 1;
  int d = s->rank - 1;
  size_t widest = dtype_size(k->out->type.dtype);
  for (int e = 0; e < k->next; e++) {
    vec[e] = s->stride[e][d] == 1;
    if (s->stride[e][d] > 1 || s->stride[e][d] < 0)
      return 1;
    size_t z = dtype_size(k->ext[e]->type.dtype);
    widest = vec[e] && z > widest ? z : widest;
  }
  for (int v = (int)(16 / widest); v > 1; v /= 2) {
    bool ok = s->dims[d] % v == 0;
    for (int e = 0; e < k->next && ok; e++)
      for (int dd = 0; dd < d && vec[e]; dd++)
        ok = ok && s->stride[e][dd] % v == 0;
    for (int e = 0; e < k->next && ok; e++)
      ok = !vec[e] || s->base[e] % v == 0;
    if (ok)
      return v;
  }
  return 1;
}

/* Checks what codegen fuses (passes/fuse.c makes nothing else, but a hand-written fuse
 * attribute can ask for more) and collects the kernel's inputs. */
static int plan_kernel(Cg *cg, PwKernel *k) {
  const Node *root = k->node[k->n - 1];
  k->out = k->outs[0] = root->out[0];
  if (!k->pre)
    k->pre = "";
  k->by_id = arena_alloc(cg->arena, sizeof *k->by_id * (size_t)(k->n + 1));
  for (int j = 0; j < k->n; j++)
    k->by_id[j] = (struct IdAt){k->node[j]->id, j};
  qsort(k->by_id, (size_t)k->n, sizeof *k->by_id, by_id);
  for (int j = 0; j < k->n; j++) {
    const Node *n = k->node[j];
    if (!(op_info[n->op].flags & OPF_POINTWISE) || n->nout != 1)
      return cg_error(cg, n, "fuse group %lld: node %d (%s) is not pointwise; codegen fuses "
                      "pointwise nodes only", (long long)node_fuse_group(n), n->id,
                      op_info[n->op].name);
    /* a node of a group is computed at the output's index: its inputs broadcast to its
     * own shape, so to the output's too (broadcasting composes) */
    if (!shape_broadcasts_to(&n->out[0]->type.shape, &k->out->type.shape))
      return cg_error(cg, n, "fuse group %lld: %%%s does not broadcast to the group's output "
                      "%%%s", (long long)node_fuse_group(n), n->out[0]->name, k->out->name);
    for (int a = 0; a < n->nin; a++) {
      const Value *v = n->in[a];
      if (member_of(k, v) != -1 || ext_index(k, v) >= 0)
        continue;
      if (k->next == CG_MAX_OPS - 1)
        return cg_error(cg, root, "fuse group %lld reads more than %d values from outside; a "
                        "kernel takes at most %d", (long long)node_fuse_group(root),
                        CG_MAX_OPS - 1, CG_MAX_OPS - 1);
      k->ext[k->next++] = v;
    }
    const char *x[3] = {"x0", "x1", "x2"};
    if (!result_expr(cg, n, op_domain(n), x))
      return cg_error(cg, n, "op %s (node %d) on %s has no GPU kernel yet", op_info[n->op].name,
                      n->id, dtype_name(n->in[0]->type.dtype));
  }
  return 0;
}

/* The kernel's name and signature: a lone node's as every node's (cg_kernel_begin), a
 * group's named for every op in it, its comment listing the nodes. */
static const char *begin_kernel(Cg *cg, const PwKernel *k, const char *note) {
  const Node *root = k->node[k->n - 1];
  if (k->n == 1)
    return cg_kernel_begin(cg, root, note);
  char ops[160] = "";
  size_t at = 0;
  for (int j = 0; j < k->n && j < 6; j++)
    at += (size_t)snprintf(ops + at, sizeof ops - at, "%s%s", j ? "_" : "", op_info[k->node[j]->op].name);
  if (k->n > 6)
    snprintf(ops + at, sizeof ops - at, "_etc");
  Buf head = {0};
  buf_printf(&head, "fuse group %lld = nodes", (long long)node_fuse_group(root));
  for (int j = 0; j < k->n; j++)
    buf_printf(&head, "%s %d %s", j ? "," : "", k->node[j]->id, op_info[k->node[j]->op].name);
  buf_puts(&head, ": ");
  const char *h = arena_strdup(cg->arena, head.s);
  free(head.s);
  return cg_kernel_begin_values(cg, root, ops, h, k->ext, k->next, &k->out, 1, note);
}

static void kernel_step(Cg *cg, const PwKernel *k, const char *name, int64_t threads) {
  const Node *root = k->node[k->n - 1];
  if (k->n == 1)
    cg_kernel_step(cg, root, name, cg_blocks(cg, threads, cg->target->block), cg->target->block);
  else
    cg_kernel_step_values(cg, root, name, cg_blocks(cg, threads, cg->target->block), cg->target->block,
                          k->ext, k->next, &k->out, 1);
}

/* Whether the output may overwrite input v: v has its element count and element size,
 * so it is read at the output's own index only (it cannot broadcast), and every input
 * element is loaded before the element of that index is stored. */
static bool inplace_ok(const PwKernel *k, const Value *v) {
  return cg_numel(v) == cg_numel(k->out) &&
         dtype_size(v->type.dtype) == dtype_size(k->out->type.dtype);
}

/* KernelStep.inplace of kernel k: bits by parameter, which for a lone node is its input
 * position (an input read twice is two parameters), for a group its outside value. */
static uint64_t inplace_inputs(const PwKernel *k) {
  uint64_t m = 0;
  if (k->n == 1) {
    const Node *n = k->node[0];
    for (int j = 0; j < n->nin && j < 64; j++)
      m |= inplace_ok(k, n->in[j]) ? 1ull << j : 0;
    return m;
  }
  for (int e = 0; e < k->next && e < 64; e++)
    m |= inplace_ok(k, k->ext[e]) ? 1ull << e : 0;
  return m;
}

/* One kernel for nodes[0..n): a fuse group in node order, or one pointwise node. */
int cg_pointwise_group(Cg *cg, const Node *const *nodes, int n) {
  PwKernel k = {.node = nodes, .n = n};
  if (plan_kernel(cg, &k))
    return -1;
  cg->inplace = inplace_inputs(&k);
  const Value *y = k.out;
  int64_t numel = cg_numel(y);
  Buf *b = &cg->src;
  /* Broadcasting through baked strides, after merging dims every operand walks alike. */
  Space s;
  int64_t dims[IR_MAX_RANK];
  for (int i = 0; i < y->type.shape.rank; i++)
    dims[i] = cg_dim(y, i);
  space_init(&s, y->type.shape.rank, dims);
  for (int e = 0; e < k.next; e++)
    space_add_bcast(&s, &k.ext[e]->type.shape);
  space_coalesce(&s);
  bool vec[CG_MAX_OPS] = {false};
  int v = vector_width(&k, &s, vec);
  if (v > 1) {
    /* a thread per vector of v outputs; an input along them read as one vector, or one
     * element for all of them */
    int64_t nvec = numel / v;
    bool flat = true;
    for (int e = 0; e < k.next; e++)
      flat = flat && space_is_identity(&s, e);
    const char *name = begin_kernel(cg, &k, cg_fmt(cg, "%s: %" PRId64 " vectors of %d elements",
                                                   flat ? "contiguous" : "broadcast", nvec, v));
    buf_printf(b, "  typedef %s idx_t;\n", cg_idx_type(cg, numel));
    const char **src = arena_alloc(cg->arena, sizeof *src * (size_t)(k.next ? k.next : 1));
    for (int e = 0; e < k.next; e++)
      if (vec[e])
        buf_printf(b, "  typedef gc_vec<%s, %d> v%d_t;\n", cg_ctype(k.ext[e]->type.dtype), v, e);
    buf_printf(b, "  typedef gc_vec<%s, %d> w_t;\n", cg_ctype(y->type.dtype), v);
    buf_printf(b, "  for (idx_t i = (idx_t)blockIdx.x * blockDim.x + threadIdx.x; i < %" PRId64 "; i += (idx_t)gridDim.x * blockDim.x) {\n", nvec);
    if (!flat)
      space_emit_offsets(cg, &s, cg_fmt(cg, "(i * %d)", v), "o", "    ");
    for (int e = 0; e < k.next; e++) {
      if (vec[e] && flat)
        buf_printf(b, "    const v%d_t a%d = ((const v%d_t *)in%d)[i];\n", e, e, e, e);
      else if (vec[e])
        buf_printf(b, "    const v%d_t a%d = *(const v%d_t *)(in%d + o%d);\n", e, e, e, e, e);
      else
        buf_printf(b, "    const %s a%d = in%d[o%d];\n", cg_ctype(k.ext[e]->type.dtype), e, e, e);
      src[e] = cg_fmt(cg, vec[e] ? "a%d.e[j]" : "a%d", e);
    }
    buf_puts(b, "    w_t w;\n#pragma unroll\n");
    buf_printf(b, "    for (int j = 0; j < %d; j++) {\n", v);
    emit_elements(cg, &k, NULL, src, "w.e[j]", "      ");
    buf_puts(b, "    }\n    ((w_t *)out0)[i] = w;\n  }\n}\n");
    kernel_step(cg, &k, name, nvec);
    return 0;
  }
  const char *name = begin_kernel(cg, &k, NULL);
  buf_printf(b, "  typedef %s idx_t;\n", cg_idx_type(cg, numel));
  buf_printf(b, "  for (idx_t i = (idx_t)blockIdx.x * blockDim.x + threadIdx.x; i < %" PRId64 "; i += (idx_t)gridDim.x * blockDim.x) {\n", numel);
  space_emit_offsets(cg, &s, "i", "o", "    ");
  emit_elements(cg, &k, "in%d[o%d]", NULL, "out0[i]", "    ");
  buf_puts(b, "  }\n}\n");
  kernel_step(cg, &k, name, numel);
  return 0;
}

int cg_pointwise(Cg *cg, const Node *n) { return cg_pointwise_group(cg, &n, 1); }

/* ---------------------------------------------------------------- epilogues
 *
 * A fuse group that starts with a node of another kind (a conv) is that node's kernel
 * with the group's pointwise nodes applied to each output element before it is stored:
 * the anchor's generator calls cg_store_out where it would write out0[i]. */

int cg_epilogue_begin(Cg *cg, const GroupPlan *p) {
  PwKernel *k = arena_alloc(cg->arena, sizeof *k);
  *k = (PwKernel){.node = p->epilogue, .n = p->nepilogue, .anchor = p->anchor,
                  .base = p->anchor->nin, .pre = "f"};
  if (plan_kernel(cg, k))
    return -1;
  /* the anchor's output read outside the group, or a graph output, is stored too (the
   * verifier has checked that its readers come after the group's kernel) */
  if (p->side)
    k->side = k->outs[1] = p->side;
  cg->epi = k;
  return 0;
}

int cg_epilogue_end(Cg *cg) {
  PwKernel *k = cg->epi;
  cg->epi = NULL;
  if (k && !k->stored)
    return cg_error(cg, k->anchor, "fuse group %lld: codegen has no epilogue for op %s",
                    (long long)node_fuse_group(k->anchor), op_info[k->anchor->op].name);
  return 0;
}

const PwKernel *cg_epilogue_of(const Cg *cg, const Node *n) {
  return cg->epi && cg->epi->anchor == n ? cg->epi : NULL;
}

int cg_epilogue_nout(const PwKernel *k) { return k->side ? 2 : 1; }

void cg_epilogue_operands(const PwKernel *k, const Value *const **ext, int *next,
                          const Value *const **out, const Node *const **nodes, int *n) {
  *ext = k->ext;
  *next = k->next;
  *out = k->outs;
  *nodes = k->node;
  *n = k->n;
}

void cg_gemm_epilogue(Cg *cg, const Node *mm, GemmStep *gs) {
  const GroupPlan *p = cg->plan;
  (void)mm;
  cg->epi->stored = true;
  gs->bias = p->bias;
  gs->c = p->residual;
  gs->beta = p->residual ? 1 : 0;
  gs->gelu = p->gelu;
  gs->relu = p->relu;
  gs->d = cg->epi->out;
}

/* The statements of chain k for the anchor's element val at flat index idx of k's
 * output, the result stored to dst. */
static void emit_chain(Cg *cg, const PwKernel *k, const char *idx, const char *val,
                       const char *dst, const char *indent, const char *what) {
  Buf *b = &cg->src;
  const Value *y = k->out;
  buf_printf(b, "%s{ /* %s */\n", indent, what);
  const char *in2 = cg_fmt(cg, "%s  ", indent);
  buf_printf(b, "%sconst %s %sa = %s;\n", in2, cg_ctype(k->anchor->out[0]->type.dtype), k->pre,
             val);
  if (k->side)
    buf_printf(b, "%sout1[%s] = %sa; /* the anchor's output, read outside the group too */\n",
               in2, idx, k->pre);
  if (k->next) {
    Space s;
    int64_t dims[IR_MAX_RANK];
    for (int i = 0; i < y->type.shape.rank; i++)
      dims[i] = cg_dim(y, i);
    space_init(&s, y->type.shape.rank, dims);
    for (int e = 0; e < k->next; e++)
      space_add_bcast(&s, &k->ext[e]->type.shape);
    space_coalesce(&s);
    space_emit_offsets(cg, &s, idx, cg_fmt(cg, "%se", k->pre), in2);
  }
  emit_elements(cg, k, cg_fmt(cg, "in%%d[%se%%d]", k->pre), NULL, dst, in2);
  buf_printf(b, "%s}\n", indent);
}

void cg_store_out(Cg *cg, const Node *n, const char *idx, const char *val, const char *indent) {
  PwKernel *k = cg->epi && cg->epi->anchor == n ? cg->epi : NULL;
  if (!k) {
    buf_printf(&cg->src, "%sout0[%s] = %s;\n", indent, idx, val);
    return;
  }
  k->stored = true;
  emit_chain(cg, k, idx, val, cg_fmt(cg, "out0[%s]", idx), indent, "the epilogue");
}

const PwKernel *cg_chain_plan(Cg *cg, const Node *anchor, const Node *const *nodes, int n,
                              int base, const char *pre) {
  PwKernel *k = arena_alloc(cg->arena, sizeof *k);
  *k = (PwKernel){.node = nodes, .n = n, .anchor = anchor, .base = base, .pre = pre};
  return plan_kernel(cg, k) ? NULL : k;
}

void cg_chain_emit(Cg *cg, const PwKernel *k, const char *idx, const char *val,
                   const char *dst, const char *indent) {
  emit_chain(cg, k, idx, val, dst, indent, cg_fmt(cg, "nodes %d..%d", k->node[0]->id,
                                                   k->node[k->n - 1]->id));
}
