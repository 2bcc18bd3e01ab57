/* canonicalize.c: norms and activations that exporters write out node by node, rewritten
 * into the one op the IR has for each, so that fusion and codegen see the same graph
 * whoever exported the model (an older exporter writes nn.LayerNorm as seven nodes and
 * nn.GELU as five; ONNX has had LayerNormalization only since opset 17, Gelu since 20,
 * and has no SiLU or RMSNorm before 23):
 *   - layer norm: (x - m) / sqrt(mean((x - m)^2) + eps), m = mean(x) over trailing axes,
 *     the square as pow(d, 2) or d * d, the division as a div, a reciprocal, an rsqrt or
 *     1 / sqrt: layer_norm(x, ones); then a layer_norm of unit scale times w is
 *     layer_norm(x, w), and a layer_norm without bias plus b is layer_norm(x, w, b);
 *   - RMS norm: the same without the mean, x / sqrt(mean(x^2) + eps) (Llama's and T5's
 *     RMSNorm): rms_norm(x), and rms_norm(x) times w is rms_norm(x, w);
 *   - GELU: x * 0.5 * (1 + erf(x / sqrt 2)), the three factors in any association and
 *     order, x / sqrt 2 also as x * (1 / sqrt 2): gelu(x); its tanh approximation (GPT-2's
 *     "gelu_new"), 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), x^3 as pow(x, 3) or
 *     products: gelu(x) {approximate = "tanh"}, which a GEMM applies as its epilogue;
 *   - SiLU: x * sigmoid(x): silu(x);
 *   - hard sigmoid and hard swish: relu6(x + 3) / 6 (relu6 as a clip to [0, 6] or as
 *     min and max, / 6 also as * (1 / 6)): hard_sigmoid(x) {alpha = 1/6}; x times
 *     that, or times hard_sigmoid(x) {alpha = 1/6, beta = 0.5}: hard_swish(x);
 *   - softmax: exp(x - max(x)) / sum(exp(...)) over one axis (also without the max, or
 *     times the reciprocal of the sum): softmax(x) {axis}; a softmax over the last
 *     axis between two transposes that cancel: the softmax over the axis it moved;
 *   - slices that cut one axis into pieces (dynamo's Q, K and V): one split, as the
 *     TorchScript exporter writes it;
 *   - last, a mean over H and W of an image [N, C, H, W] (dynamo's adaptive average
 *     pool): global_average_pool, as TorchScript writes it.
 * A pattern matches only when every intermediate value is read by the pattern alone (no
 * other node, no graph output: it would have to be computed anyway), the reductions keep
 * their dims, the axes agree, and each constant is the one the formula has, within
 * CANON_RTOL relative (an exporter writes 1 / sqrt 2 as 0.7071067690849304, sqrt 2 as
 * 1.4142135381698608: f32 roundings) or, for 16-bit float constants, four steps of their
 * type. The rewritten node keeps the value, name and origin of the pattern's last node;
 * the rest is left to dce. The new ops compute in f64 what the chain computed in steps
 * rounded to its type, so the reference executor's results agree to that rounding.
 * Like simplify, the pass repeats until nothing changes (a layer norm, then its scale,
 * then its bias), removing dead nodes between rounds. */
#include "passes/passes-impl.h"

#include <math.h>
#include <string.h>

enum { CANON_MAX_ROUNDS = 8 };
#define CANON_RTOL 1e-6

/* ---------------------------------------------------------------- matching */

/* How near a constant of type t must be to the formula's: CANON_RTOL, or four steps of a
 * 16-bit float type (which rounds 1/6 or 1/sqrt 2 that far). */
static double rtol_of(DType t) {
  return t == DT_BF16 ? 4.0 / 128 : t == DT_F16 ? 4.0 / 1024 : CANON_RTOL;
}

static bool near(double x, double c, double rtol) { return fabs(x - c) <= rtol * fabs(c); }

/* Whether constant v has one element, of a float type, near c. */
static bool is_const_near(const Value *v, double c) {
  if (!v || v->kind != VK_CONST || !v->data || tensor_numel(v->data) != 1 ||
      !dtype_is_float(v->type.dtype))
    return false;
  double x = dtype_load_f64(v->type.dtype, v->data->data);
  return near(x, c, rtol_of(v->type.dtype)) || x == c;
}

/* The element of constant v of one float element into *c. */
static bool const_scalar(const Value *v, double *c) {
  if (!v || v->kind != VK_CONST || !v->data || tensor_numel(v->data) != 1 ||
      !dtype_is_float(v->type.dtype))
    return false;
  *c = dtype_load_f64(v->type.dtype, v->data->data);
  return true;
}

/* The node defining v when it is op `op`, outside any fuse group, and v is read exactly
 * `uses` times (an input slot each), none of them as a graph output. */
static Node *def_n(const Edit *e, const Value *v, Op op, int uses) {
  if (!v || v->kind != VK_NODE || v->def->op != op || v->def->nout != 1 ||
      node_fuse_group(v->def) || pass_edit_count(e, v) != uses || pass_edit_is_output(e, v))
    return NULL;
  return v->def;
}

static Node *def1(const Edit *e, const Value *v, Op op) { return def_n(e, v, op, 1); }

/* For v = op(x, c) (or op(c, x) when op commutes), c a constant near `c`, read once: x. */
static Value *with_const(const Edit *e, const Value *v, Op op, double c) {
  const Node *n = def1(e, v, op);
  if (!n || n->nin != 2)
    return NULL;
  if (is_const_near(n->in[1], c))
    return n->in[0];
  if ((op_info[op].flags & OPF_COMMUTATIVE) && is_const_near(n->in[0], c))
    return n->in[1];
  return NULL;
}

/* A product: the non-constant factors of a tree of muls (and divisions by constants)
 * and the product k of its one-element constants. */
enum { MAX_FACTORS = 4 };
typedef struct Product {
  Value *f[MAX_FACTORS];
  int n;
  double k, rtol; /* rtol: how near k must be to the formula's (rtol_of its constants) */
  bool ok; /* false: more factors than fit, or a division by a non-constant */
} Product;

static void add_factor(Product *p, Value *v) {
  double c;
  if (const_scalar(v, &c))
    p->k *= c, p->rtol = fmax(p->rtol, rtol_of(v->type.dtype));
  else if (p->n < MAX_FACTORS)
    p->f[p->n++] = v;
  else
    p->ok = false;
}

/* The factors of node n (a mul or div), opening the muls and divisions by constants below
 * it that only it reads, `depth` levels down. */
static void open_product(const Edit *e, const Node *n, Product *p, int depth) {
  for (int k = 0; k < 2 && p->ok; k++) {
    Value *v = n->in[k];
    double c;
    if (n->op == OP_DIV && k == 1) {
      if (!const_scalar(v, &c) || c == 0)
        p->ok = false;
      else
        p->k /= c, p->rtol = fmax(p->rtol, rtol_of(v->type.dtype));
      continue;
    }
    const Node *m = depth > 0 ? def1(e, v, OP_MUL) : NULL;
    if (!m && depth > 0)
      m = def1(e, v, OP_DIV);
    if (m && m->out[0]->type.dtype == n->out[0]->type.dtype)
      open_product(e, m, p, depth - 1);
    else
      add_factor(p, v);
  }
}

static Product product_of(const Edit *e, const Node *n) {
  Product p = {.k = 1, .rtol = CANON_RTOL, .ok = true};
  if ((n->op == OP_MUL || n->op == OP_DIV) && n->nin == 2)
    open_product(e, n, &p, 2);
  else
    p.ok = false;
  return p;
}

/* ---------------------------------------------------------------- activations */

/* x of a gelu ending in n: the factors x and 1 + erf(x / sqrt 2), times 0.5. */
static Value *erf_gelu(const Edit *e, const Node *n) {
  Product p = product_of(e, n);
  if (!p.ok || p.n != 2 || !near(p.k, 0.5, p.rtol))
    return NULL;
  for (int k = 0; k < 2; k++) {
    Value *x = p.f[k];
    const Value *t = with_const(e, p.f[1 - k], OP_ADD, 1);
    const Node *er = t ? def1(e, t, OP_ERF) : NULL;
    if (!er)
      continue;
    if (with_const(e, er->in[0], OP_DIV, 1.41421356237309504880) == x ||
        with_const(e, er->in[0], OP_MUL, 0.70710678118654752440) == x)
      return x;
  }
  return NULL;
}

/* Whether v is x^3: pow(x, 3), x * (x * x) or (x * x) * x, each node read once. */
static bool is_cube(const Edit *e, const Value *v, const Value *x) {
  if (with_const(e, v, OP_POW, 3) == x)
    return true;
  const Node *m = def1(e, v, OP_MUL);
  for (int k = 0; m && k < 2; k++) {
    const Node *sq = def1(e, m->in[1 - k], OP_MUL);
    if (m->in[k] == x && sq && sq->in[0] == x && sq->in[1] == x)
      return true;
  }
  return false;
}

/* Whether v is 1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)), every node of it read once. */
static bool is_one_plus_tanh(const Edit *e, const Value *v, const Value *x) {
  const Value *t = with_const(e, v, OP_ADD, 1);
  const Node *th = t ? def1(e, t, OP_TANH) : NULL;
  const Value *s = th ? with_const(e, th->in[0], OP_MUL, 0.79788456080286535588) : NULL;
  const Node *a = s ? def1(e, s, OP_ADD) : NULL;
  for (int k = 0; a && k < 2; k++) {
    const Value *cube = a->in[k] == x ? with_const(e, a->in[1 - k], OP_MUL, 0.044715) : NULL;
    if (cube && is_cube(e, cube, x))
      return true;
  }
  return false;
}

/* x of a tanh gelu ending in n: the factors x and 1 + tanh(...), times 0.5. */
static Value *tanh_gelu(const Edit *e, const Node *n) {
  Product p = product_of(e, n);
  if (!p.ok || p.n != 2 || !near(p.k, 0.5, p.rtol))
    return NULL;
  for (int k = 0; k < 2; k++)
    if (is_one_plus_tanh(e, p.f[1 - k], p.f[k]))
      return p.f[k];
  return NULL;
}

/* y of relu6(y) read once: a clip to [0, 6], max(min(y, 6), 0) or min(max(y, 0), 6). */
static Value *relu6_of(const Edit *e, const Value *v) {
  const Node *c = def1(e, v, OP_CLIP);
  if (c)
    return attr_float(c, "min") == 0 && attr_float(c, "max") == 6 ? c->in[0] : NULL;
  const Value *inner = with_const(e, v, OP_MAX, 0);
  if (inner)
    return with_const(e, inner, OP_MIN, 6);
  inner = with_const(e, v, OP_MIN, 6);
  return inner ? with_const(e, inner, OP_MAX, 0) : NULL;
}

/* x of relu6(x + 3) in v. */
static Value *relu6_plus3(const Edit *e, const Value *v) {
  const Value *y = relu6_of(e, v);
  return y ? with_const(e, y, OP_ADD, 3) : NULL;
}

/* One activation rewrite of n (a mul or div): 1, or 0 when none applies. */
static int activation(Edit *e, Node *n) {
  if (n->nout != 1 || !dtype_is_float(n->out[0]->type.dtype))
    return 0;
  const Type *yt = &n->out[0]->type;
  Value *x = erf_gelu(e, n);
  Op op = OP_COUNT;
  Attr a[2];
  int na = 0;
  if (x) {
    op = OP_GELU;
  } else if ((x = tanh_gelu(e, n))) {
    op = OP_GELU;
    a[na++] = attr_make_string("approximate", "tanh");
  } else {
    Product p = product_of(e, n);
    if (!p.ok)
      return 0;
    if (p.n == 2 && p.k == 1) {
      for (int k = 0; k < 2 && op == OP_COUNT; k++) {
        x = p.f[k];
        const Node *s = def1(e, p.f[1 - k], OP_SIGMOID);
        const Node *h = def1(e, p.f[1 - k], OP_HARD_SIGMOID);
        if (s && s->in[0] == x)
          op = OP_SILU;
        else if (h && h->in[0] == x && near(attr_float(h, "alpha"), 1.0 / 6, CANON_RTOL) &&
                 near(attr_float(h, "beta"), 0.5, CANON_RTOL))
          op = OP_HARD_SWISH;
      }
    } else if (near(p.k, 1.0 / 6, p.rtol) && p.n == 2) {
      for (int k = 0; k < 2 && op == OP_COUNT; k++)
        if (relu6_plus3(e, p.f[1 - k]) == p.f[k])
          x = p.f[k], op = OP_HARD_SWISH;
    } else if (near(p.k, 1.0 / 6, p.rtol) && p.n == 1 && (x = relu6_plus3(e, p.f[0]))) {
      op = OP_HARD_SIGMOID;
      a[na++] = attr_make_float("alpha", 1.0 / 6);
      a[na++] = attr_make_float("beta", 0.5);
    }
  }
  if (op == OP_COUNT || !x || !type_eq(&x->type, yt))
    return 0;
  pass_edit_rewrite(e, n, op, &x, 1, a, na);
  return 1;
}

/* ---------------------------------------------------------------- softmax */

/* The one axis (>= 0) that reduction r reduces, keeping dims; -1 when it is no such. */
static int64_t one_axis(const Node *r) {
  int na = 0;
  const int64_t *axes = attr_ints(r, "axes", &na);
  int rank = r->in[0]->type.shape.rank;
  if (!attr_int(r, "keepdims"))
    return -1;
  if (na == 0) /* every axis: one when the rank is 1 */
    return rank == 1 ? 0 : -1;
  if (na != 1)
    return -1;
  int64_t a = axes[0] < 0 ? axes[0] + rank : axes[0];
  return a >= 0 && a < rank ? a : -1;
}

/* n = exp(x - max(x)) / sum(exp(...)), or times 1 / sum: softmax(x) over their axis. */
static int softmax(Edit *e, Node *n) {
  Value *ev = n->in[0], *sv = n->in[1];
  if (n->op == OP_MUL) {
    sv = NULL;
    for (int k = 0; k < 2 && !sv; k++) {
      const Node *rc = def1(e, n->in[k], OP_RECIP);
      if (rc)
        ev = n->in[1 - k], sv = rc->in[0];
    }
  }
  const Node *ex = def_n(e, ev, OP_EXP, 2);
  const Node *s = def1(e, sv, OP_REDUCE_SUM);
  if (!ex || !s || s->in[0] != ev || !dtype_is_float(ev->type.dtype))
    return 0;
  int64_t axis = one_axis(s);
  Value *x = ex->in[0];
  const Node *sub = def1(e, x, OP_SUB);
  const Node *mx = sub ? def1(e, sub->in[1], OP_REDUCE_MAX) : NULL;
  if (mx && mx->in[0] == sub->in[0] && one_axis(mx) == axis)
    x = sub->in[0];
  if (axis < 0 || !type_eq(&x->type, &n->out[0]->type))
    return 0;
  Attr a = attr_make_int("axis", axis);
  pass_edit_rewrite(e, n, OP_SOFTMAX, &x, 1, &a, 1);
  return 1;
}

/* Transpose n's perm at i (none: the axes reversed). */
static int64_t perm_at(const Node *n, int rank, int i) {
  int np = 0;
  const int64_t *p = attr_ints(n, "perm", &np);
  return p && np == rank ? p[i] : rank - 1 - i;
}

/* n = transpose(softmax(transpose(x)) over the last axis) whose transposes cancel (the
 * TorchScript exporter's softmax over another axis before opset 13): softmax(x) over
 * the axis the inner transpose moved last. */
static int softmax_transposed(Edit *e, Node *n) {
  const Node *s = def1(e, n->in[0], OP_SOFTMAX);
  const Node *t = s ? def1(e, s->in[0], OP_TRANSPOSE) : NULL;
  if (!t)
    return 0;
  Value *x = t->in[0];
  int r = x->type.shape.rank;
  int64_t a = attr_int(s, "axis");
  a = a < 0 ? a + r : a;
  for (int j = 0; j < r; j++) {
    int64_t k = perm_at(n, r, j);
    if (k < 0 || k >= r || perm_at(t, r, (int)k) != j)
      return 0;
  }
  if (a < 0 || a >= r || !type_eq(&x->type, &n->out[0]->type))
    return 0;
  Attr at = attr_make_int("axis", perm_at(t, r, (int)a));
  pass_edit_rewrite(e, n, OP_SOFTMAX, &x, 1, &at, 1);
  return 1;
}

/* ---------------------------------------------------------------- slices */

enum { MAX_PIECES = 64 };

/* v as an index into a dim of d elements, clamped to [0, d] (ONNX Slice's rule). */
static int64_t clamp_index(int64_t v, int64_t d) {
  if (v < 0)
    v = v < -d ? 0 : v + d;
  return v > d ? d : v;
}

/* Whether n is a slice of one static axis, step 1, not empty: *axis (>= 0), [*b, *e). */
static bool slice_piece(const Node *n, int64_t *axis, int64_t *b, int64_t *e) {
  const Value *x = n->in[0];
  int r = x->type.shape.rank, ns = 0, ne = 0, na = 0, nst = 0;
  const int64_t *st = attr_ints(n, "starts", &ns), *en = attr_ints(n, "ends", &ne);
  const int64_t *ax = attr_ints(n, "axes", &na), *sp = attr_ints(n, "steps", &nst);
  if (n->op != OP_SLICE || node_fuse_group(n) || n->nout != 1 || ns != 1 || ne != 1 ||
      (ax && na != 1) || (sp && (nst != 1 || sp[0] != 1)))
    return false;
  int64_t a = ax ? ax[0] : 0;
  a = a < 0 ? a + r : a;
  if (a < 0 || a >= r || x->type.shape.dims[a].sym)
    return false;
  int64_t d = x->type.shape.dims[a].n;
  *axis = a, *b = clamp_index(st[0], d), *e = clamp_index(en[0], d);
  return *b < *e;
}

/* Slices of one value that cut one axis into pieces, each read and none a graph output
 * (the dynamo exporter's Q, K and V, where TorchScript writes a Split): one split, whose
 * outputs the slices' readers read instead. n is the first of them in node order (the
 * first the walk meets). 1 when rewritten, 0 when not, -1 on an error. */
static int slices_to_split(Edit *e, Node *n, Diag *d) {
  Value *x = n->in[0];
  int64_t axis, b, en;
  if (!slice_piece(n, &axis, &b, &en))
    return 0;
  Node *piece[MAX_PIECES];
  int64_t start[MAX_PIECES], end[MAX_PIECES];
  int np = 0, cursor = -1;
  for (Node *u; (u = pass_edit_next_user(e, x, &cursor));) {
    int64_t a, ub, ue;
    if (!slice_piece(u, &a, &ub, &ue) || a != axis)
      continue;
    if (np == MAX_PIECES || !pass_edit_count(e, u->out[0]) || pass_edit_is_output(e, u->out[0]))
      return 0;
    int k = np++; /* insertion by start */
    for (; k > 0 && start[k - 1] > ub; k--)
      piece[k] = piece[k - 1], start[k] = start[k - 1], end[k] = end[k - 1];
    piece[k] = u, start[k] = ub, end[k] = ue;
  }
  int64_t dim = x->type.shape.dims[axis].n, sizes[MAX_PIECES];
  if (np < 2 || start[0] != 0 || end[np - 1] != dim)
    return 0;
  for (int k = 0; k < np; k++) {
    if (k && start[k] != end[k - 1])
      return 0;
    sizes[k] = end[k] - start[k];
  }
  Attr a[2] = {attr_make_int("axis", axis), attr_make_ints("split", sizes, np)};
  Node *sp = pass_edit_insert_node_before(e, n, OP_SPLIT, &x, 1, a, 2, np, x->name, "part", d);
  if (!sp)
    return -1;
  for (int k = 0; k < np; k++)
    pass_edit_replace_uses(e, piece[k]->out[0], sp->out[k]);
  return 1;
}

/* n = the mean over both spatial dims of an image [N, C, H, W], keeping them (the dynamo
 * exporter's adaptive_avg_pool2d(x, 1)): global_average_pool(x), as TorchScript writes
 * it, which the layout pass runs in channels last. Only once the norms are made (a norm
 * over H and W starts with such a mean), and only for rank 4: a mean over the last dim
 * of [B, S, E] is no pool of channels S. */
static int mean_as_pool(Edit *e, Node *n) {
  const Value *x = n->in[0];
  int r = x->type.shape.rank, na = 0;
  const int64_t *axes = attr_ints(n, "axes", &na);
  if (n->op != OP_REDUCE_MEAN || node_fuse_group(n) || r != 4 || na != 2 ||
      !attr_int(n, "keepdims") || !dtype_is_float(x->type.dtype))
    return 0;
  bool seen[IR_MAX_RANK] = {false};
  for (int i = 0; i < na; i++) {
    int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
    if (a < 2 || a >= r || seen[a])
      return 0;
    seen[a] = true;
  }
  Value *in = n->in[0];
  pass_edit_rewrite(e, n, OP_GLOBAL_AVERAGE_POOL, &in, 1, NULL, 0);
  return 1;
}

/* ---------------------------------------------------------------- norms */

/* The first axis of the trailing axes [a, rank) that reduction r reduces, keeping dims;
 * -1 when its axes are not such a range. */
static int64_t trailing_axes(const Node *r) {
  int na = 0, rank = r->in[0]->type.shape.rank;
  const int64_t *axes = attr_ints(r, "axes", &na);
  if (!attr_int(r, "keepdims") || rank < 1)
    return -1;
  if (na == 0)
    return 0;
  bool seen[IR_MAX_RANK] = {false};
  for (int i = 0; i < na; i++) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank || seen[a])
      return -1;
    seen[a] = true;
  }
  for (int i = rank - na; i < rank; i++)
    if (!seen[i])
      return -1;
  return rank - na;
}

/* What a normalization ending in n divides by: n = d / sqrt(v + eps), or d times
 * 1 / sqrt(...), reciprocal(sqrt(...)) or rsqrt(v + eps), where v = mean(d^2) over
 * trailing axes (d^2 as pow(d, 2) or d * d). *d, *eps, *axis, and *squares: how many
 * times the square reads d. */
typedef struct Norm {
  Value *d;
  double eps;
  int64_t axis;
  int squares;
} Norm;

static bool normalizes(const Edit *e, const Node *n, Norm *out) {
  if (n->nin != 2)
    return false;
  Value *d = NULL, *ve = NULL;
  if (n->op == OP_DIV) {
    const Node *sq = def1(e, n->in[1], OP_SQRT);
    d = n->in[0], ve = sq ? sq->in[0] : NULL;
  } else if (n->op == OP_MUL) {
    for (int k = 0; k < 2 && !ve; k++) {
      const Value *r = n->in[k];
      const Node *rs = def1(e, r, OP_RSQRT), *rc = def1(e, r, OP_RECIP);
      const Node *dv = def1(e, r, OP_DIV);
      const Node *sq = rc ? def1(e, rc->in[0], OP_SQRT)
                       : dv && is_const_near(dv->in[0], 1) ? def1(e, dv->in[1], OP_SQRT) : NULL;
      ve = rs ? rs->in[0] : sq ? sq->in[0] : NULL;
      d = n->in[1 - k];
    }
  }
  const Node *add = ve ? def1(e, ve, OP_ADD) : NULL;
  if (!add)
    return false;
  int ek = add->in[1]->kind == VK_CONST ? 1 : 0;
  double eps;
  if (!const_scalar(add->in[ek], &eps) || !(eps >= 0))
    return false;
  const Node *mean = def1(e, add->in[1 - ek], OP_REDUCE_MEAN);
  const Node *pw = mean ? def1(e, mean->in[0], OP_POW) : NULL;
  const Node *mul = mean ? def1(e, mean->in[0], OP_MUL) : NULL;
  int squares = pw && pw->in[0] == d && is_const_near(pw->in[1], 2) ? 1
                : mul && mul->in[0] == d && mul->in[1] == d ? 2 : 0;
  int64_t axis = squares ? trailing_axes(mean) : -1;
  if (axis < 0 || (d == n->in[0] && d == n->in[1]) ||
      !type_eq(&d->type, &n->out[0]->type) || !dtype_is_float(d->type.dtype))
    return false;
  *out = (Norm){d, eps, axis, squares};
  return true;
}

/* A constant of ones shaped like x's dims [axis, rank), or NULL when one is symbolic. */
static Value *ones_like_tail(Graph *g, const Value *x, int64_t axis) {
  const Shape *s = &x->type.shape;
  int64_t dims[IR_MAX_RANK];
  for (int i = (int)axis; i < s->rank; i++) {
    if (s->dims[i].sym)
      return NULL;
    dims[i - axis] = s->dims[i].n;
  }
  Tensor *t = tensor_in_arena(g->arena, x->type.dtype, s->rank - (int)axis, dims);
  tensor_fill_value(t, 1);
  return pass_add_const(g, x->name, "ones", t);
}

/* n ends a normalization: a layer norm when d = x - mean(x) over the same axes, read by
 * this pattern alone; else an RMS norm of d. */
static int norm(Edit *e, Node *n) {
  Norm m;
  if (!normalizes(e, n, &m))
    return 0;
  Attr a[2] = {attr_make_int("axis", m.axis), attr_make_float("epsilon", m.eps)};
  const Node *sub = def_n(e, m.d, OP_SUB, m.squares + 1);
  const Node *mean = sub ? def1(e, sub->in[1], OP_REDUCE_MEAN) : NULL;
  if (mean && mean->in[0] == sub->in[0] && trailing_axes(mean) == m.axis) {
    Value *in[2] = {sub->in[0], ones_like_tail(e->g, sub->in[0], m.axis)};
    if (!in[1])
      return 0;
    pass_edit_rewrite(e, n, OP_LAYER_NORM, in, 2, a, 2);
    return 1;
  }
  pass_edit_rewrite(e, n, OP_RMS_NORM, &m.d, 1, a, 2);
  return 1;
}

/* Whether p can be the scale or bias of a norm of x over [axis, rank): x's type, at most
 * that many dims, each x's or 1 (never widening x). */
static bool fits_tail(const Value *p, const Value *x, int64_t axis) {
  const Shape *ps = &p->type.shape, *xs = &x->type.shape;
  if (p->type.dtype != x->type.dtype || ps->rank > xs->rank - axis)
    return false;
  for (int i = 0; i < ps->rank; i++) {
    Dim pd = ps->dims[ps->rank - 1 - i], xd = xs->dims[xs->rank - 1 - i];
    if (!dim_eq(pd, xd) && (pd.sym || pd.n != 1))
      return false;
  }
  return true;
}

/* n = norm * w (layer_norm of unit scale and no bias, rms_norm of no scale) or norm + b
 * (layer_norm without bias): the norm with w or b. */
static int norm_affine(Edit *e, Node *n) {
  if (n->nin != 2)
    return 0;
  for (int k = 0; k < 2; k++) {
    Value *p = n->in[1 - k];
    Node *ln = def1(e, n->in[k], OP_LAYER_NORM), *rn = def1(e, n->in[k], OP_RMS_NORM);
    Node *m = ln ? ln : rn;
    if (!m || p == n->in[k])
      continue;
    Value *x = m->in[0];
    int64_t axis = attr_int(m, "axis");
    axis = axis < 0 ? axis + x->type.shape.rank : axis;
    if (!fits_tail(p, x, axis) || !type_eq(&n->out[0]->type, &m->out[0]->type))
      continue;
    Value *in[3] = {x, m->nin > 1 ? m->in[1] : NULL, p};
    int nin;
    if (n->op == OP_MUL && ln && m->nin == 2 && pass_all_ones(m->in[1]))
      in[1] = p, nin = 2;
    else if (n->op == OP_MUL && rn && m->nin == 1)
      in[1] = p, nin = 2;
    else if (n->op == OP_ADD && ln && (m->nin == 2 || !m->in[2]))
      nin = 3;
    else
      continue;
    pass_edit_rewrite(e, n, m->op, in, nin, m->attrs, m->nattr);
    return 1;
  }
  return 0;
}

/* ---------------------------------------------------------------- the pass */

static int canonicalize_node(Edit *e, Node *n, Diag *d) {
  if (node_fuse_group(n) || n->nout != 1 || n->nin < 1)
    return 0;
  if (n->op == OP_TRANSPOSE)
    return softmax_transposed(e, n);
  if (n->op == OP_SLICE)
    return slices_to_split(e, n, d);
  if (n->nin != 2)
    return 0;
  switch (n->op) {
  case OP_MUL: {
    int rc = norm_affine(e, n);
    if (!rc)
      rc = norm(e, n);
    if (!rc)
      rc = softmax(e, n);
    return rc ? rc : activation(e, n);
  }
  case OP_DIV: {
    int rc = norm(e, n);
    if (!rc)
      rc = softmax(e, n);
    return rc ? rc : activation(e, n);
  }
  case OP_ADD:
    return norm_affine(e, n);
  default:
    return 0;
  }
}

static int run_canonicalize(Graph *g, PassContext *ctx) {
  int changed = pass_rewrite_rounds(g, ctx, CANON_MAX_ROUNDS, canonicalize_node);
  if (changed < 0)
    return -1;
  Edit e;
  pass_edit_begin(&e, g);
  for (int i = 0; i < e.norig; i++)
    changed += mean_as_pool(&e, g->nodes[i]);
  pass_edit_end(&e);
  ctx->changes += changed;
  return 0;
}

const Pass pass_canonicalize = {
    .name = "canonicalize",
    .summary = "written-out layer norms, RMS norms, erf and tanh GELUs, SiLUs, hard "
               "sigmoids and swishes and softmaxes become the one op each, slices that cut "
               "an axis into pieces one split",
    .run = run_canonicalize,
};
