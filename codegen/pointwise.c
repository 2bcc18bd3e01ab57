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

/* The sigmoid of node n (a sigmoid or SiLU): gc_sigmoid16, with the GPU's fast
 * exponential, where the result is rounded to 16 bits (its error is far below their
 * rounding); gc_sigmoid, exact to f32, otherwise. */
static const char *sigmoid_fn(const Node *n, Dom dom) {
  DType t = n->out[0]->type.dtype;
  return dom == DOM_F32 && (t == DT_BF16 || t == DT_F16) ? "gc_sigmoid16" : "gc_sigmoid";
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
  case OP_SIGMOID: return cg_fmt(cg, "%s(%s)", sigmoid_fn(n, dom), x);
  case OP_RELU: return cg_fmt(cg, "(%s < 0 ? %s : %s)", x, zero, x);
  case OP_GELU:
    if (!strcmp(attr_string(n, "approximate"), "tanh"))
      return cg_fmt(cg, "((%s)0.5 * %s * (%s + tanh((%s)0.79788456080286535588 * (%s + (%s)0.044715 * %s * %s * %s))))",
                    T, x, one, T, x, T, x, x, x);
    return cg_fmt(cg, "((%s)0.5 * %s * (%s + erf(%s * (%s)0.70710678118654752440)))", T, x, one, x, T);
  case OP_SILU: return cg_fmt(cg, "(%s * %s(%s))", x, sigmoid_fn(n, dom), x);
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
  const View *view;   /* a loop group's kernel whose remapping nodes are views of its
                         inputs (loop_views): ext[e] is read as view[e] of its buffer
                         arg[e] where view[e].base is set; NULL otherwise */
  const Value *arg[CG_MAX_OPS];
  const Node *const *all; /* with view: every member of the group, for the name */
  int nall;
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

/* k->by_id for k->node[0..k->n), which member_of searches. */
static void index_members(Cg *cg, PwKernel *k) {
  k->by_id = arena_alloc(cg->arena, sizeof *k->by_id * (size_t)(k->n + 1));
  for (int j = 0; j < k->n; j++)
    k->by_id[j] = (struct IdAt){k->node[j]->id, j};
  qsort(k->by_id, (size_t)k->n, sizeof *k->by_id, by_id);
}

/* v, read by a member, as the kernel's next input when it comes from outside and is not
 * one yet: 1 when added, 0 when not, -1 with the error when the kernel already takes as
 * many as it may. */
static int add_ext(Cg *cg, PwKernel *k, const Node *root, const Value *v) {
  if (member_of(k, v) != -1 || ext_index(k, v) >= 0)
    return 0;
  if (k->next == CG_MAX_OPS - 1)
    return cg_error(cg, root, "fuse group %lld reads more than %d values from outside; a "
                    "kernel takes at most %d", (long long)node_fuse_group(root),
                    CG_MAX_OPS - 1, CG_MAX_OPS - 1);
  k->ext[k->next++] = v;
  return 1;
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
  index_members(cg, k);
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
    for (int a = 0; a < n->nin; a++)
      if (add_ext(cg, k, root, n->in[a]) < 0)
        return -1;
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
  if (k->n == 1 && !k->view)
    return cg_kernel_begin(cg, root, note);
  /* named for every member, the views' nodes too */
  const Node *const *node = k->view ? k->all : k->node;
  int n = k->view ? k->nall : k->n;
  char ops[160] = "";
  size_t at = 0;
  for (int j = 0; j < n && j < 6; j++)
    at += (size_t)snprintf(ops + at, sizeof ops - at, "%s%s", j ? "_" : "", op_info[node[j]->op].name);
  if (n > 6)
    snprintf(ops + at, sizeof ops - at, "_etc");
  Buf head = {0};
  buf_printf(&head, "fuse group %lld = nodes", (long long)node_fuse_group(root));
  for (int j = 0; j < n; j++)
    buf_printf(&head, "%s %d %s", j ? "," : "", node[j]->id, op_info[node[j]->op].name);
  buf_puts(&head, ": ");
  const char *h = arena_strdup(cg->arena, head.s);
  free(head.s);
  return cg_kernel_begin_values(cg, root, ops, h, k->view ? k->arg : k->ext, k->next, &k->out,
                                1, note);
}

static void kernel_step(Cg *cg, const PwKernel *k, const char *name, int64_t threads) {
  const Node *root = k->node[k->n - 1];
  if (k->n == 1 && !k->view)
    cg_kernel_step(cg, root, name, cg_blocks(cg, threads, cg->target->block), cg->target->block);
  else
    cg_kernel_step_values(cg, root, name, cg_blocks(cg, threads, cg->target->block), cg->target->block,
                          k->view ? k->arg : k->ext, k->next, &k->out, 1);
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

static int flat_kernel(Cg *cg, const PwKernel *kp);

/* One kernel for nodes[0..n): a fuse group in node order, or one pointwise node. */
int cg_pointwise_group(Cg *cg, const Node *const *nodes, int n) {
  PwKernel k = {.node = nodes, .n = n};
  if (plan_kernel(cg, &k))
    return -1;
  cg->inplace = inplace_inputs(&k);
  return flat_kernel(cg, &k);
}

/* The flat-index kernel of k: a thread per element (or vector of them) of its output, its
 * inputs read through strides. */
static int flat_kernel(Cg *cg, const PwKernel *kp) {
  PwKernel k = *kp;
  const Value *y = k.out;
  int64_t numel = cg_numel(y);
  Buf *b = &cg->src;
  /* Broadcasting through baked strides, after merging dims every operand walks alike. */
  Space s;
  int64_t dims[IR_MAX_RANK];
  for (int i = 0; i < y->type.shape.rank; i++)
    dims[i] = cg_dim(y, i);
  space_init(&s, y->type.shape.rank, dims);
  for (int e = 0; e < k.next; e++) {
    const View *w = k.view && k.view[e].base ? &k.view[e] : NULL;
    if (!w) {
      space_add_bcast(&s, &k.ext[e]->type.shape);
      continue;
    }
    int64_t st[IR_MAX_RANK]; /* the view broadcast to the output, numpy's way */
    for (int i = 0; i < s.rank; i++) {
      int j = i - (s.rank - w->rank);
      st[i] = j < 0 || w->dims[j] == 1 ? 0 : w->stride[j];
    }
    space_add_strides(&s, st, w->offset);
  }
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
  cg_store_out_to(cg, n, idx, val, cg_fmt(cg, "out0[%s]", idx), indent);
}

void cg_store_out_to(Cg *cg, const Node *n, const char *idx, const char *val, const char *dst,
                     const char *indent) {
  PwKernel *k = cg->epi && cg->epi->anchor == n ? cg->epi : NULL;
  if (!k) {
    buf_printf(&cg->src, "%s%s = %s;\n", indent, dst, val);
    return;
  }
  k->stored = true;
  emit_chain(cg, k, idx, val, dst, indent, "the epilogue");
}

DType cg_out_dtype(const Cg *cg, const Node *n) {
  const PwKernel *k = cg->epi && cg->epi->anchor == n ? cg->epi : NULL;
  return k ? k->out->type.dtype : n->out[0]->type.dtype;
}

const PwKernel *cg_chain_plan(Cg *cg, const Node *anchor, const Node *const *nodes, int n,
                              int base, const char *pre) {
  PwKernel *k = arena_alloc(cg->arena, sizeof *k);
  *k = (PwKernel){.node = nodes, .n = n, .anchor = anchor, .base = base, .pre = pre};
  return plan_kernel(cg, k) ? NULL : k;
}

/* What chain k computes, for a comment in the kernel: its ops in order, up to 8 (no node
 * ids, which would make the kernels of a transformer's layers differ and NVRTC compile
 * each: dedup_kernel in codegen.c shares one code among them). */
static const char *chain_ops(Cg *cg, const PwKernel *k) {
  const char *s = "";
  for (int j = 0; j < k->n && j < 8; j++)
    s = cg_fmt(cg, "%s%s%s", s, j ? ", " : "", op_info[k->node[j]->op].name);
  return k->n > 8 ? cg_fmt(cg, "%s, ...", s) : s;
}

void cg_chain_emit(Cg *cg, const PwKernel *k, const char *idx, const char *val,
                   const char *dst, const char *indent) {
  emit_chain(cg, k, idx, val, dst, indent, chain_ops(cg, k));
}

/* Input e's stride along dim d of chain k's output (numpy broadcasting: 0 where it
 * broadcasts). */
static int64_t chain_stride(const PwKernel *k, int e, int d) {
  const Shape *x = &k->ext[e]->type.shape;
  int r = k->out->type.shape.rank, j = d - (r - x->rank);
  if (j < 0 || x->dims[j].n == 1)
    return 0;
  int64_t st = 1;
  for (int i = x->rank - 1; i > j; i--)
    st *= x->dims[i].n;
  return st;
}

/* The sum of coord[d] times input e's stride along d, for d in [from, to): "" when
 * every term is 0. */
static const char *chain_terms(Cg *cg, const PwKernel *k, int e, int from, int to,
                               const char *const *coord) {
  const char *sum = "";
  for (int d = from; d < to; d++) {
    int64_t st = chain_stride(k, e, d);
    if (st == 1)
      sum = cg_fmt(cg, "%s%s(idx_t)%s", sum, *sum ? " + " : "", coord[d]);
    else if (st)
      sum = cg_fmt(cg, "%s%s(idx_t)%s * %" PRId64, sum, *sum ? " + " : "", coord[d], st);
  }
  return sum;
}

bool cg_chain_coords_ok(const PwKernel *k) { return !k->side; }

void cg_chain_bases(Cg *cg, const PwKernel *k, int lead, const char *const *coord,
                    const char *indent) {
  for (int e = 0; e < k->next; e++) {
    const char *t = chain_terms(cg, k, e, 0, lead, coord);
    buf_printf(&cg->src, "%sconst idx_t %sb%d = %s;\n", indent, k->pre, e, *t ? t : "0");
  }
}

void cg_chain_emit_coords(Cg *cg, const PwKernel *k, int lead, const char *const *coord,
                          const char *val, const char *dst, const char *indent) {
  Buf *b = &cg->src;
  int r = k->out->type.shape.rank;
  buf_printf(b, "%s{ /* %s */\n", indent, chain_ops(cg, k));
  const char *in2 = cg_fmt(cg, "%s  ", indent);
  buf_printf(b, "%sconst %s %sa = %s;\n", in2, cg_ctype(k->anchor->out[0]->type.dtype), k->pre,
             val);
  for (int e = 0; e < k->next; e++) {
    const char *t = chain_terms(cg, k, e, lead, r, coord);
    buf_printf(b, "%sconst idx_t %se%d = %sb%d%s%s;\n", in2, k->pre, e, k->pre, e,
               *t ? " + " : "", t);
  }
  emit_elements(cg, k, cg_fmt(cg, "in%%d[%se%%d]", k->pre), NULL, dst, in2);
  buf_printf(b, "%s}\n", indent);
}

/* ---------------------------------------------------------------- loops
 *
 * A loop group (ir.h's GROUP_LOOP) computes its root's element at each output index
 * vector, XLA's loop fusion: a member's element at an index vector is an expression of
 * its inputs' elements at remapped index vectors (a transpose permutes them, a slice
 * scales and shifts one, an expand drops the broadcast ones, a reshape re-splits only
 * the runs of dims it merges or splits), and a concat picks the one input the index
 * along its axis falls in by a branch, computing none of the others. A value read twice
 * at one index vector (in one branch) is computed once; the values from outside are
 * loaded at their own index vectors. Plain pointwise groups keep the flat-index kernel
 * above, with its vectors, and so does a loop group whose remapping nodes only make
 * views of its inputs for its pointwise nodes (loop_views: SwiGLU's halves of one
 * projection, a transposed input scaled): that kernel reads them through strides. */

typedef struct LoopMemo {
  const Value *v;
  const char *key; /* the index vector, "q0,u3,0" */
  const char *var;
} LoopMemo;

typedef struct Loop {
  Cg *cg;
  PwKernel k;
  LoopMemo *memo;
  int nmemo, cap;
  int nvar;
} Loop;

static const char *loop_key(Cg *cg, const char *const *idx, int rank) {
  Buf b = {0};
  buf_puts(&b, "");
  for (int j = 0; j < rank; j++)
    buf_printf(&b, "%s%s", j ? "," : "", idx[j]);
  const char *s = arena_strdup(cg->arena, b.s);
  free(b.s);
  return s;
}

/* expr as an index: itself when a name or a literal, else a new variable holding it. */
static const char *loop_index(Loop *L, const char *expr, const char *indent) {
  bool simple = true;
  for (const char *c = expr; *c && simple; c++)
    simple = (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
             *c == '_';
  if (simple)
    return expr;
  const char *u = cg_fmt(L->cg, "u%d", L->nvar++);
  buf_printf(&L->cg->src, "%sconst idx_t %s = %s;\n", indent, u, expr);
  return u;
}

static void loop_remember(Loop *L, const Value *v, const char *key, const char *var) {
  if (L->nmemo == L->cap) {
    L->cap = L->cap ? 2 * L->cap : 32;
    LoopMemo *m = arena_alloc(L->cg->arena, sizeof *m * (size_t)L->cap);
    if (L->nmemo)
      memcpy(m, L->memo, sizeof *m * (size_t)L->nmemo);
    L->memo = m;
  }
  L->memo[L->nmemo++] = (LoopMemo){v, key, var};
}

static int64_t loop_dim(const Value *v, int i) { return v->type.shape.dims[i].n; }

/* idx (an index vector of a value of rank `rank` and dims `dims`) broadcast to the
 * value u, numpy's way: right-aligned, 0 along u's dims of 1. */
static void loop_bcast(const Value *u, const char *const *idx, int rank, const char **out) {
  int ru = u->type.shape.rank;
  for (int j = 0; j < ru; j++)
    out[j] = loop_dim(u, j) == 1 ? "0" : idx[j + rank - ru];
}

static const char *loop_value(Loop *L, const Value *v, const char *const *idx,
                              const char *indent);

/* The index vector of x (a reshape's input, rank rx) that the output's index vector idx
 * (rank ry) reads: each run of dims whose sizes multiply alike on both sides is one
 * linear index, split again into x's dims of the run; dims of 1 are 0. */
static void loop_reshape(Loop *L, const Value *x, const Value *y, const char *const *idx,
                         const char **in, const char *indent) {
  Cg *cg = L->cg;
  int rx = x->type.shape.rank, ry = y->type.shape.rank;
  int xi[IR_MAX_RANK], yi[IR_MAX_RANK], nx = 0, ny = 0;
  for (int j = 0; j < rx; j++) {
    in[j] = "0";
    if (loop_dim(x, j) != 1)
      xi[nx++] = j;
  }
  for (int j = 0; j < ry; j++)
    if (loop_dim(y, j) != 1)
      yi[ny++] = j;
  int a = 0, b = 0;
  while (a < nx && b < ny) {
    int a0 = a, b0 = b;
    int64_t px = loop_dim(x, xi[a++]), py = loop_dim(y, yi[b++]);
    while (px != py && (a < nx || b < ny)) {
      if (px < py && a < nx)
        px *= loop_dim(x, xi[a++]);
      else if (b < ny)
        py *= loop_dim(y, yi[b++]);
      else
        break;
    }
    /* the run's linear index from y's side */
    const char *lin = NULL;
    int64_t st = 1;
    for (int j = b - 1; j >= b0; j--) {
      const char *t = st == 1 ? idx[yi[j]] : cg_fmt(cg, "%s * %" PRId64, idx[yi[j]], st);
      lin = lin ? cg_fmt(cg, "%s + %s", t, lin) : t;
      st *= loop_dim(y, yi[j]);
    }
    if (a - a0 == 1) {
      in[xi[a0]] = loop_index(L, lin, indent);
      continue;
    }
    lin = loop_index(L, lin, indent);
    st = 1;
    for (int j = a - 1; j >= a0; j--) {
      int64_t d = loop_dim(x, xi[j]);
      const char *q = st == 1 ? lin : cg_fmt(cg, "%s / %" PRId64, lin, st);
      in[xi[j]] = loop_index(L, j == a0 ? q : cg_fmt(cg, "(%s) %% %" PRId64, q, d), indent);
      st *= d;
    }
  }
}

/* The element of member n's output `oi` at idx: its input's element at the index vector
 * that reads it (NULL when n computes instead). */
static const char *loop_remap(Loop *L, const Node *n, int oi, const char *const *idx,
                              const char *indent) {
  Cg *cg = L->cg;
  const Value *x = n->in[0], *y = n->out[oi];
  int rx = x->type.shape.rank, ry = y->type.shape.rank;
  const char *in[IR_MAX_RANK];
  switch (n->op) {
  case OP_RESHAPE: case OP_FLATTEN: case OP_SQUEEZE: case OP_UNSQUEEZE: case OP_IDENTITY:
    loop_reshape(L, x, y, idx, in, indent);
    break;
  case OP_TRANSPOSE: {
    int np = 0;
    const int64_t *perm = attr_ints(n, "perm", &np);
    for (int j = 0; j < ry; j++) {
      int64_t q = perm && np == ry ? (perm[j] + ry) % ry : ry - 1 - j;
      in[q] = idx[j];
    }
    break;
  }
  case OP_EXPAND:
    loop_bcast(x, idx, ry, in);
    break;
  case OP_SPLIT: {
    int64_t axis = attr_int(n, "axis"), off = 0;
    if (axis < 0)
      axis += rx;
    for (int k = 0; k < oi; k++)
      off += loop_dim(n->out[k], (int)axis);
    for (int j = 0; j < rx; j++)
      in[j] = idx[j];
    if (off)
      in[axis] = loop_index(L, cg_fmt(cg, "%s + %" PRId64, idx[axis], off), indent);
    break;
  }
  case OP_SLICE: {
    /* the start and step of every dim, as eval_slice computes them (layout.c's gen_slice) */
    int ns, na, nst;
    const int64_t *starts = attr_ints(n, "starts", &ns);
    const int64_t *axes = attr_ints(n, "axes", &na);
    const int64_t *steps = attr_ints(n, "steps", &nst);
    for (int j = 0; j < rx; j++)
      in[j] = idx[j];
    for (int i = 0; i < ns; i++) {
      int64_t a = axes ? (axes[i] < 0 ? axes[i] + rx : axes[i]) : i;
      int64_t dim = loop_dim(x, (int)a), s0 = starts[i], k = steps ? steps[i] : 1;
      if (s0 < 0)
        s0 = s0 < -dim ? 0 : s0 + dim;
      s0 = k > 0 ? (s0 > dim ? dim : s0) : (s0 > dim - 1 ? dim - 1 : s0);
      if (loop_dim(y, (int)a) == 0)
        continue;
      if (loop_dim(y, (int)a) == 1)
        in[a] = cg_fmt(cg, "%" PRId64, s0);
      else if (k == 1)
        in[a] = s0 ? loop_index(L, cg_fmt(cg, "%s + %" PRId64, idx[a], s0), indent) : idx[a];
      else
        in[a] = loop_index(L, cg_fmt(cg, "%s * (%" PRId64 ") + %" PRId64, idx[a], k, s0), indent);
    }
    break;
  }
  case OP_GATHER: {
    int64_t axis = attr_int(n, "axis"), c = dtype_load_i64(n->in[1]->data->dtype, n->in[1]->data->data);
    if (axis < 0)
      axis += rx;
    if (c < 0)
      c += loop_dim(x, (int)axis);
    bool drop = n->in[1]->type.shape.rank == 0;
    for (int j = 0, o = 0; j < rx; j++) {
      if (j == axis) {
        in[j] = cg_fmt(cg, "%" PRId64, c);
        o += !drop;
      } else {
        in[j] = idx[o++];
      }
    }
    break;
  }
  case OP_CONCAT: {
    /* a branch per input along the axis: only the one the index falls in is computed */
    int64_t axis = attr_int(n, "axis"), at = 0;
    if (axis < 0)
      axis += ry;
    const char *var = cg_fmt(cg, "v%d", L->nvar++);
    Buf *b = &cg->src;
    buf_printf(b, "%s%s %s;\n", indent, cg_ctype(y->type.dtype), var);
    const char *in2 = cg_fmt(cg, "%s  ", indent);
    int last = n->nin - 1;
    while (last > 0 && loop_dim(n->in[last], (int)axis) == 0)
      last--;
    bool first = true;
    for (int k = 0; k <= last; k++) {
      int64_t len = loop_dim(n->in[k], (int)axis);
      if (len == 0)
        continue;
      if (k == last)
        buf_printf(b, first ? "%s{\n" : "%s} else {\n", indent);
      else
        buf_printf(b, "%s%sif (%s < %" PRId64 ") {\n", indent, first ? "" : "} else ",
                   idx[axis], at + len);
      first = false;
      int mark = L->nmemo;
      const char *sub[IR_MAX_RANK];
      for (int j = 0; j < ry; j++)
        sub[j] = idx[j];
      if (at)
        sub[axis] = loop_index(L, cg_fmt(cg, "%s - %" PRId64, idx[axis], at), in2);
      const char *e = loop_value(L, n->in[k], sub, in2);
      buf_printf(b, "%s%s = %s;\n", in2, var, e);
      L->nmemo = mark; /* what the branch computed is out of scope after it */
      at += len;
    }
    buf_printf(b, "%s}\n", indent);
    return var;
  }
  default:
    return NULL;
  }
  return loop_value(L, x, in, indent);
}

/* v's element at index vector idx (rank v's): an expression of its stored type. */
static const char *loop_value(Loop *L, const Value *v, const char *const *idx,
                              const char *indent) {
  Cg *cg = L->cg;
  Buf *b = &cg->src;
  int rank = v->type.shape.rank;
  const char *key = loop_key(cg, idx, rank);
  for (int i = L->nmemo - 1; i >= 0; i--)
    if (L->memo[i].v == v && !strcmp(L->memo[i].key, key))
      return L->memo[i].var;
  const char *var;
  int m = member_of(&L->k, v);
  if (m < 0) {
    /* from outside: loaded at its own index vector */
    const char *off = NULL;
    int64_t st = 1;
    for (int j = rank - 1; j >= 0; j--) {
      int64_t d = loop_dim(v, j);
      if (d != 1) {
        const char *t = st == 1 ? idx[j] : cg_fmt(cg, "%s * %" PRId64, idx[j], st);
        off = off ? cg_fmt(cg, "%s + %s", t, off) : t;
      }
      st *= d;
    }
    var = cg_fmt(cg, "l%d", L->nvar++);
    buf_printf(b, "%sconst %s %s = in%d[%s];\n", indent, cg_ctype(v->type.dtype), var,
               ext_index(&L->k, v), off ? off : "0");
  } else {
    const Node *n = v->def;
    if (!(var = loop_remap(L, n, v->def_index, idx, indent))) {
      Dom dom = op_domain(n);
      int j = L->nvar++;
      const char *x[3];
      for (int a = 0; a < n->nin; a++) {
        const char *bi[IR_MAX_RANK];
        loop_bcast(n->in[a], idx, rank, bi);
        const char *src = loop_value(L, n->in[a], bi, indent);
        DType t = n->in[a]->type.dtype;
        x[a] = cg_fmt(cg, "x%d_%d", j, a);
        if (n->op == OP_WHERE)
          buf_printf(b, "%sconst %s %s = %s;\n", indent, cg_ctype(t), x[a], src);
        else
          buf_printf(b, "%sconst %s %s = %s;\n", indent, cg_dom_type(dom), x[a],
                     cg_load(cg, t, dom, src));
      }
      const char *expr = result_expr(cg, n, dom, x);
      DType out = v->type.dtype;
      const char *val = n->op == OP_WHERE ? expr
                        : (op_info[n->op].flags & OPF_BOOL_OUT) ? cg_fmt(cg, "(gc_bool)%s", expr)
                                                                : cg_store(cg, out, dom, expr);
      var = cg_fmt(cg, "v%d", j);
      buf_printf(b, "%sconst %s %s = %s;\n", indent, cg_ctype(out), var, val);
    }
  }
  loop_remember(L, v, key, var);
  return var;
}

/* Whether loop group p is a pointwise kernel over strided inputs: its root and every
 * pointwise member of an output that broadcasts to the root's, and its remapping members
 * between values from outside and pointwise members, each chain a view of the value it
 * starts from (a projection's split read by SwiGLU, a transpose read by a scale). Then k
 * is that kernel: the pointwise members, each chain's end read through its view, which
 * the flat-index kernel walks with strides, as vectors where they allow. */
static bool loop_views(Cg *cg, const GroupPlan *p, PwKernel *k) {
  const Node **pw = arena_alloc(cg->arena, sizeof *pw * (size_t)(p->n + 1));
  int npw = 0;
  const Value *out = p->root->out[0];
  if (!(op_info[p->root->op].flags & OPF_POINTWISE))
    return false;
  for (int i = 0; i < p->n; i++) {
    const Node *n = p->node[i];
    if (!(op_info[n->op].flags & OPF_POINTWISE))
      continue;
    if (!shape_broadcasts_to(&n->out[0]->type.shape, &out->type.shape))
      return false;
    pw[npw++] = n;
  }
  /* the values the pointwise members read from outside them, at most a kernel's */
  PwKernel t = {.node = pw, .n = npw, .pre = ""};
  index_members(cg, &t);
  for (int j = 0; j < npw; j++)
    for (int a = 0; a < pw[j]->nin; a++) {
      const Value *v = pw[j]->in[a];
      if (member_of(&t, v) != -1 || ext_index(&t, v) >= 0)
        continue;
      if (t.next == CG_MAX_OPS - 1)
        return false;
      t.ext[t.next++] = v;
    }
  /* each one made by a remapping member: the chain back to a value from outside */
  PwKernel all = {.node = p->node, .n = p->n};
  index_members(cg, &all);
  View *view = arena_alloc(cg->arena, sizeof *view * CG_MAX_OPS);
  memset(view, 0, sizeof *view * CG_MAX_OPS);
  for (int e = 0; e < t.next; e++) {
    const Value *v = t.ext[e];
    t.arg[e] = v;
    if (member_of(&all, v) < 0)
      continue;
    const Value *at[GROUP_MAX_NODES + 1];
    int len = 0;
    for (; member_of(&all, v) >= 0 && len <= GROUP_MAX_NODES; v = v->def->in[0]) {
      if (op_info[v->def->op].flags & OPF_POINTWISE)
        return false; /* a remapping of a computed value: index vectors */
      at[len++] = v;
    }
    if (member_of(&all, v) >= 0 || !shape_is_static(&v->type.shape))
      return false;
    View w;
    view_init(&w, v);
    for (int j = len - 1; j >= 0; j--) {
      View next;
      if (!view_through_reads(at[j]->def, at[j]->def_index, &w, &next))
        return false;
      w = next;
    }
    if (view_divides(&w))
      return false; /* the flat-index kernel walks strides alone */
    view[e] = w;
    t.arg[e] = v;
  }
  if (plan_kernel(cg, &t))
    return false;
  t.view = view;
  t.all = p->node;
  t.nall = p->n;
  *k = t;
  return true;
}

int cg_loop_group(Cg *cg, const GroupPlan *p) {
  PwKernel flat;
  if (loop_views(cg, p, &flat)) {
    cg->inplace = 0; /* an input is read at other indices than the output's */
    return flat_kernel(cg, &flat);
  }
  Loop L = {.cg = cg, .k = {.node = p->node, .n = p->n, .pre = ""}};
  PwKernel *k = &L.k;
  const Node *root = p->root;
  k->out = k->outs[0] = root->out[0];
  index_members(cg, k);
  int64_t numel = cg_numel(k->out), most = numel;
  for (int j = 0; j < k->n; j++) {
    const Node *n = k->node[j];
    for (int a = 0; a < n->nin; a++) {
      const Value *v = n->in[a];
      if (!v || (n->op == OP_GATHER && a == 1))
        continue;
      int added = add_ext(cg, k, root, v);
      if (added < 0)
        return -1;
      if (added)
        most = cg_numel(v) > most ? cg_numel(v) : most;
    }
    if (op_info[n->op].flags & OPF_POINTWISE) {
      const char *x[3] = {"x0", "x1", "x2"};
      if (!result_expr(cg, n, op_domain(n), x))
        return cg_error(cg, n, "op %s (node %d) on %s has no GPU kernel yet",
                        op_info[n->op].name, n->id, dtype_name(n->in[0]->type.dtype));
    }
  }
  cg->inplace = 0; /* an input is read at other indices than the output's */
  Buf *b = &cg->src;
  const char *name = begin_kernel(cg, k, cg_fmt(cg, "a loop: each element from its index "
                                                    "vector"));
  buf_printf(b, "  typedef %s idx_t;\n", cg_idx_type(cg, most));
  buf_printf(b, "  for (idx_t i = (idx_t)blockIdx.x * blockDim.x + threadIdx.x; i < %" PRId64 "; i += (idx_t)gridDim.x * blockDim.x) {\n", numel);
  const Value *y = k->out;
  int rank = y->type.shape.rank, outer = -1;
  const char *idx[IR_MAX_RANK];
  for (int j = 0; j < rank; j++)
    if (loop_dim(y, j) != 1 && outer < 0)
      outer = j;
  buf_puts(b, "    idx_t r_ = i;\n");
  for (int j = rank - 1; j >= 0; j--) {
    int64_t d = loop_dim(y, j);
    idx[j] = d == 1 ? "0" : cg_fmt(cg, "q%d", j);
    if (d == 1)
      continue;
    if (j == outer)
      buf_printf(b, "    const idx_t q%d = r_;\n", j);
    else
      buf_printf(b, "    const idx_t q%d = r_ %% %" PRId64 ";\n    r_ /= %" PRId64 ";\n", j, d, d);
  }
  const char *val = loop_value(&L, y, idx, "    ");
  buf_printf(b, "    out0[i] = %s;\n  }\n}\n", val);
  kernel_step(cg, k, name, numel);
  return 0;
}
