/* simplify.c: nodes that change nothing, or only how elements are named, written as
 * what they are, so that later passes see through them and codegen gives them no kernel:
 *   - a cast to its input's type, an expand to its input's shape, a reshape (squeeze,
 *     unsqueeze, flatten) to its input's shape, a product of x and constant ones or a
 *     quotient of x by them, of x's type (ones that neither widen nor cast x; x * 1 is x
 *     for every x, inf, NaN and -0 too): identity (Whisper's exporter scales its queries
 *     and keys by 1);
 *   - an expand read only by nodes that broadcast anyway (an add of it and a value of
 *     the add's shape, say): they read its input;
 *   - a transpose that moves only dims of size 1 (the exporters' [B, S, E] <-> [S, B, E]
 *     at batch 1): a reshape;
 *   - a gather of the constant indices 0, 1, ..., n-1 along a whole axis of size n, or a
 *     gather_nd of every index tuple in order: a reshape (the exporters' way of writing
 *     "every position");
 *   - a transpose of a reshape that merges dims its input keeps apart: the transpose of
 *     the finest dims of both (below), which a view can follow; a transpose of a
 *     transpose: one transpose; a transpose of rows after a linear layer, before a
 *     residual add: the rows moved before the GEMM (transpose_above_gemm);
 *   - a reshape (squeeze, unsqueeze, flatten) of a cast: the cast of the reshape, so that
 *     the cast meets the pointwise nodes after it (an attention mask's cast and and);
 *   - a reshape (squeeze, unsqueeze, flatten) of such a node: one reshape of the first
 *     node's input;
 *   - a concat's inputs of no elements along its axis (an empty past key-value cache):
 *     dropped, a concat of one input an identity;
 *   - an identity: its users read its input (it stays only as a graph output).
 * (Activations and norms written out are canonicalize's.)
 * Rewritten nodes keep their output value (its name and type) and their origin. After
 * each round of rewrites the nodes without users go (dce), since the rules count uses. Nodes already in a fuse group are left alone:
 * their group decides how they run. The pass repeats until nothing changes (at most
 * SIMPLIFY_MAX_ROUNDS times). A round keeps the uses of every value as it goes (Edit),
 * and the nodes it adds go in front of the nodes they were made for when it ends. */
#include "passes/passes-impl.h"

/* Rewrites n as a reshape of x to n's output type, if a shape attribute can say it. */
static bool to_reshape(Edit *e, Node *n, Value *x) {
  int64_t shape[IR_MAX_RANK];
  if (!pass_reshape_attr(x, &n->out[0]->type, shape))
    return false;
  Attr a = attr_make_ints("shape", shape, n->out[0]->type.shape.rank);
  pass_edit_rewrite(e, n, OP_RESHAPE, &x, 1, &a, 1);
  return true;
}

static void to_identity(Edit *e, Node *n) {
  Value *x = n->in[0];
  pass_edit_rewrite(e, n, OP_IDENTITY, &x, 1, NULL, 0);
}

static bool renames(Op op) {
  return op == OP_RESHAPE || op == OP_SQUEEZE || op == OP_UNSQUEEZE || op == OP_FLATTEN;
}

/* A transpose whose dims other than static 1s keep their order. */
static bool moves_only_ones(const Node *n) {
  const Shape *x = &n->in[0]->type.shape;
  int np = 0;
  const int64_t *perm = attr_ints(n, "perm", &np);
  int64_t last = -1;
  for (int i = 0; i < x->rank; i++) {
    int64_t p = perm && np == x->rank ? perm[i] : x->rank - 1 - i;
    if (!x->dims[p].sym && x->dims[p].n == 1)
      continue;
    if (p < last)
      return false;
    last = p;
  }
  return true;
}

/* A gather of the constant indices 0, 1, ..., n-1 (in row-major order, negative ones
 * counted from the end) along an axis of static size n. */
static bool gathers_all(const Node *n) {
  const Value *x = n->in[0], *iv = n->in[1];
  int64_t axis = attr_int(n, "axis");
  if (axis < 0)
    axis += x->type.shape.rank;
  if (iv->kind != VK_CONST || !iv->data || axis < 0 || axis >= x->type.shape.rank)
    return false;
  Dim d = x->type.shape.dims[axis];
  int64_t cnt = tensor_numel(iv->data);
  if (d.sym || cnt != d.n)
    return false;
  size_t es = dtype_size(iv->data->dtype);
  for (int64_t i = 0; i < cnt; i++) {
    int64_t k = dtype_load_i64(iv->data->dtype, (const char *)iv->data->data + (size_t)i * es);
    if ((k < 0 ? k + d.n : k) != i)
      return false;
  }
  return true;
}

/* A gather_nd (batch_dims 0) of constant index tuples that list every position of x's
 * first k dims in row-major order: the elements of x in their order. */
static bool gathers_all_nd(const Node *n) {
  const Value *x = n->in[0], *iv = n->in[1];
  const Shape *xs = &x->type.shape, *is = &iv->type.shape;
  if (attr_int(n, "batch_dims") != 0 || iv->kind != VK_CONST || !iv->data || is->rank < 1)
    return false;
  int64_t k = is->dims[is->rank - 1].n, count = 1;
  if (k < 1 || k > xs->rank)
    return false;
  for (int i = 0; i < k; i++) {
    if (xs->dims[i].sym)
      return false;
    count *= xs->dims[i].n;
  }
  if (tensor_numel(iv->data) != count * k)
    return false;
  size_t es = dtype_size(iv->data->dtype);
  for (int64_t t = 0; t < count; t++) {
    int64_t rest = t;
    for (int64_t j = k - 1; j >= 0; j--) {
      int64_t d = xs->dims[j].n, want = rest % d;
      rest /= d;
      int64_t v = dtype_load_i64(iv->data->dtype, (const char *)iv->data->data + (size_t)(t * k + j) * es);
      if ((v < 0 ? v + d : v) != want)
        return false;
    }
  }
  return true;
}

/* t = transpose(a), a = reshape(x) merging dims that x keeps apart (torchvision's
 * [S, B, E] -> [S, B*H, D] before moving the heads to the front): the transpose of the
 * finest dims of both shapes, t = reshape(transpose(reshape(x, F), perm over F)). Every
 * dim of F then has one stride, so the chain stays a view (ir/view.c) where the merged
 * dim, two strides in one, made it none. 1: rewritten, 0: not, -1: error. */
static int transpose_fine(Edit *e, Node *t, Diag *d) {
  Value *a = t->in[0];
  if (a->kind != VK_NODE || a->def->op != OP_RESHAPE || node_fuse_group(a->def) ||
      pass_edit_count(e, a) != 1 || pass_edit_is_output(e, a) ||
      !shape_is_static(&a->type.shape) || !shape_is_static(&a->def->in[0]->type.shape))
    return 0;
  Value *x = a->def->in[0];
  const Shape *xs = &x->type.shape, *as = &a->type.shape;
  /* the partial products of both shapes, merged: F's boundaries */
  int64_t bound[2 * IR_MAX_RANK + 1], fine[IR_MAX_RANK];
  int nb = 0, i = 0, j = 0;
  int64_t px = 1, pa = 1;
  bound[nb++] = 1;
  while (i < xs->rank || j < as->rank) {
    int64_t nx = i < xs->rank ? px * xs->dims[i].n : INT64_MAX;
    int64_t na = j < as->rank ? pa * as->dims[j].n : INT64_MAX;
    int64_t next = nx < na ? nx : na;
    if (next == 0)
      return 0;
    if (nx == next)
      px = nx, i++;
    if (na == next)
      pa = na, j++;
    if (next != bound[nb - 1])
      bound[nb++] = next;
  }
  int nf = nb - 1;
  if (nf > IR_MAX_RANK)
    return 0;
  for (int k = 0; k < nf; k++) {
    if (bound[k + 1] % bound[k])
      return 0; /* no common refinement */
    fine[k] = bound[k + 1] / bound[k];
  }
  /* a's dims as runs of F's; the transpose's order of them */
  int first[IR_MAX_RANK], count[IR_MAX_RANK], at = 0;
  pa = 1;
  for (int k = 0; k < as->rank; k++) {
    first[k] = at;
    pa *= as->dims[k].n;
    while (at < nf && bound[at + 1] <= pa)
      at++;
    count[k] = at - first[k];
  }
  int np = 0, nonone = 0;
  for (int k = 0; k < as->rank; k++)
    nonone += count[k] > 0;
  if (nf == nonone)
    return 0; /* a merges nothing: it is as fine already */
  const int64_t *perm = attr_ints(t, "perm", &np);
  int64_t fperm[IR_MAX_RANK], fshape[IR_MAX_RANK];
  int nfp = 0;
  for (int k = 0; k < as->rank; k++) {
    int64_t p = perm && np == as->rank ? perm[k] : as->rank - 1 - k;
    for (int c = 0; c < count[p]; c++)
      fperm[nfp++] = first[p] + c;
  }
  for (int k = 0; k < nf; k++)
    fshape[k] = fine[k];
  Attr sa = attr_make_ints("shape", fshape, nf);
  Value *r = pass_edit_insert_before(e, t, OP_RESHAPE, &x, 1, &sa, 1, a->name, "fine", d);
  if (!r)
    return -1;
  Attr pa_ = attr_make_ints("perm", fperm, nf);
  Value *tf = pass_edit_insert_before(e, t, OP_TRANSPOSE, &r, 1, &pa_, 1, t->out[0]->name,
                                      "fine", d);
  if (!tf)
    return -1;
  return to_reshape(e, t, tf);
}

/* t = transpose(transpose(x)), the inner one used only here: one transpose of x. */
static bool transpose_twice(Edit *e, Node *t) {
  Value *a = t->in[0];
  if (a->kind != VK_NODE || a->def->op != OP_TRANSPOSE || node_fuse_group(a->def) ||
      pass_edit_count(e, a) != 1 || pass_edit_is_output(e, a))
    return false;
  int r = t->out[0]->type.shape.rank, n1 = 0, n2 = 0;
  const int64_t *p1 = attr_ints(a->def, "perm", &n1), *p2 = attr_ints(t, "perm", &n2);
  int64_t perm[IR_MAX_RANK];
  for (int i = 0; i < r; i++) {
    int64_t k = p2 && n2 == r ? p2[i] : r - 1 - i;
    perm[i] = p1 && n1 == r ? p1[k] : r - 1 - k;
  }
  Value *x = a->def->in[0];
  Attr pa = attr_make_ints("perm", perm, r);
  pass_edit_rewrite(e, t, OP_TRANSPOSE, &x, 1, &pa, 1);
  return true;
}

/* The node defining v when it is op `op`, v has one use and is no graph output. */
static Node *single(const Edit *e, Value *v, Op op) {
  return v->kind == VK_NODE && v->def->op == op && !node_fuse_group(v->def) &&
                 pass_edit_count(e, v) == 1 && !pass_edit_is_output(e, v)
             ? v->def
             : NULL;
}

/* t = transpose(reshape(add(matmul(z, W), bias))) moving whole rows, whose only user is
 * a residual add (torchvision's [S, B, E] -> [B, S, E] after its attention's output
 * projection): the rows are moved before the GEMM instead,
 *   t = add(matmul(transpose(reshape(z, [d.., K])), W), bias),
 * so the residual add reads the GEMM's output directly and joins its epilogue, and the
 * transpose meets the attention's own (transpose_twice), which its kernel writes. */
static int transpose_above_gemm(Edit *e, Node *t, Diag *d) {
  const Shape *ts = &t->out[0]->type.shape;
  int r = ts->rank, np = 0;
  const int64_t *perm = attr_ints(t, "perm", &np);
  /* an empty t moves nothing (and its last dim divides below) */
  if (!perm || np != r || r < 2 || perm[r - 1] != r - 1 || !shape_is_static(ts) ||
      shape_numel(ts) == 0 || pass_edit_is_output(e, t->out[0]))
    return 0;
  int uses = pass_edit_count(e, t->out[0]), cursor = -1;
  Node *u = uses == 1 ? pass_edit_next_user(e, t->out[0], &cursor) : NULL;
  const Value *res = uses == 1 && u->op == OP_ADD ? node_other_input(u, t->out[0]) : NULL;
  if (!res || !pass_same_shape(&res->type.shape, ts))
    return 0;
  Value *v = t->in[0];
  Node *rs = single(e, v, OP_RESHAPE);
  Node *a = single(e, rs ? rs->in[0] : v, OP_ADD);
  if (!a)
    return 0;
  int gi = a->in[0]->kind == VK_NODE && a->in[0]->def->op == OP_MATMUL ? 0 : 1;
  Node *m = single(e, a->in[gi], OP_MATMUL);
  Value *bias = a->in[1 - gi];
  if (!m || !pass_plain_matmul(m) || m->in[1]->type.shape.rank != 2 || bias->type.shape.rank > 1 ||
      !shape_is_static(&m->in[0]->type.shape))
    return 0;
  /* t's input as [d.., N] and z as [d.., K] */
  Value *z = m->in[0];
  int64_t k = z->type.shape.dims[z->type.shape.rank - 1].n, zshape[IR_MAX_RANK];
  for (int i = 0; i < r - 1; i++)
    zshape[i] = v->type.shape.dims[i].n;
  zshape[r - 1] = k;
  if (shape_numel(&z->type.shape) != shape_numel(&v->type.shape) / ts->dims[r - 1].n * k)
    return 0;
  Attr sa = attr_make_ints("shape", zshape, r);
  Value *zr = pass_edit_insert_before(e, t, OP_RESHAPE, &z, 1, &sa, 1, t->out[0]->name, "rows",
                                      d);
  Value *zt = zr ? pass_edit_insert_before(e, t, OP_TRANSPOSE, &zr, 1, t->attrs, t->nattr,
                                           t->out[0]->name, "moved", d)
                 : NULL;
  Value *min[2] = {zt, m->in[1]};
  Value *mm = zt ? pass_edit_insert_before(e, t, OP_MATMUL, min, 2, NULL, 0, m->out[0]->name,
                                           "moved", d)
                 : NULL;
  if (!mm)
    return -1;
  Value *ain[2];
  ain[gi] = mm;
  ain[1 - gi] = bias;
  pass_edit_rewrite(e, t, OP_ADD, ain, 2, NULL, 0);
  return 1;
}

/* ---------------------------------------------------------------- the pass */

/* n = reshape(cast(x)) -> cast(reshape(x)), when the cast has no other use. */
static int cast_last(Edit *e, Node *n, Diag *d) {
  Value *c = n->in[0];
  const Node *cn = c->kind == VK_NODE ? c->def : NULL;
  if (!cn || cn->op != OP_CAST || node_fuse_group(cn) || pass_edit_count(e, c) != 1 ||
      pass_edit_is_output(e, c))
    return 0;
  Value *x = cn->in[0];
  int64_t shape[IR_MAX_RANK];
  Type t = {x->type.dtype, n->out[0]->type.shape};
  if (!pass_reshape_attr(x, &t, shape))
    return 0;
  Attr a = attr_make_ints("shape", shape, t.shape.rank);
  Value *r = pass_edit_insert_before(e, n, OP_RESHAPE, &x, 1, &a, 1, n->out[0]->name, "pre", d);
  if (!r)
    return -1;
  Attr to = attr_make_string("to", attr_string(cn, "to"));
  pass_edit_rewrite(e, n, OP_CAST, &r, 1, &to, 1);
  return 1;
}

/* One rewrite of n, if one applies: 1, else 0; -1 on error. */
/* Whether op broadcasts all its inputs against each other (ONNX's multidirectional
 * broadcasting), so an input may be smaller than the output in any dim. */
static bool broadcasts_all(Op op) {
  switch (op) {
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_POW: case OP_MAX: case OP_MIN:
  case OP_EQUAL: case OP_AND: case OP_OR: case OP_WHERE:
    return true;
  default:
    return false;
  }
}

/* An expand whose every user broadcasts anyway: each is such a node with another input
 * of its own output's shape, so reading the expand's input gives the same result and no
 * expanded copy is made (BERT's token-type row, the same for every sequence of the
 * batch). */
static int expand_into_users(Edit *e, Node *n) {
  Value *x = n->in[0], *y = n->out[0];
  if (pass_edit_is_output(e, y) || !pass_edit_count(e, y))
    return 0;
  int cursor = -1;
  for (const Node *u; (u = pass_edit_next_user(e, y, &cursor));) {
    bool full = false;
    for (int k = 0; k < u->nin; k++)
      if (u->in[k] != y && u->in[k] && pass_same_shape(&u->in[k]->type.shape, &u->out[0]->type.shape))
        full = true;
    if (!broadcasts_all(u->op) || node_fuse_group(u) || !full ||
        !shape_broadcasts_to(&x->type.shape, &u->out[0]->type.shape))
      return 0;
  }
  pass_edit_replace_uses(e, y, x);
  return 1;
}

/* A concat's inputs of no elements along its axis (an empty past key-value cache before
 * the new keys) add nothing: the concat of the others, or the one other itself. */
static int concat_of_empties(Edit *e, Node *n) {
  int r = n->out[0]->type.shape.rank;
  int64_t axis = attr_int(n, "axis");
  axis = axis < 0 ? axis + r : axis;
  if (axis < 0 || axis >= r || n->nin < 2 || !shape_is_static(&n->out[0]->type.shape) ||
      shape_numel(&n->out[0]->type.shape) == 0)
    return 0;
  Value **keep = arena_alloc(e->g->arena, sizeof *keep * (size_t)n->nin);
  int nk = 0;
  for (int k = 0; k < n->nin; k++) {
    const Shape *s = &n->in[k]->type.shape;
    if (s->rank != r || s->dims[axis].sym || s->dims[axis].n != 0)
      keep[nk++] = n->in[k];
  }
  if (nk == n->nin || nk == 0)
    return 0;
  if (nk == 1) {
    if (!type_eq(&keep[0]->type, &n->out[0]->type))
      return 0;
    pass_edit_rewrite(e, n, OP_IDENTITY, keep, 1, NULL, 0);
  } else {
    Attr a = attr_make_int("axis", axis);
    pass_edit_rewrite(e, n, OP_CONCAT, keep, nk, &a, 1);
  }
  return 1;
}

static int simplify_node(Edit *e, Node *n, Diag *d) {
  if (node_fuse_group(n) || n->nout != 1 || n->nin < 1 || !n->in[0])
    return 0;
  Value *x = n->in[0], *y = n->out[0];
  const Type *xt = &x->type, *yt = &y->type;
  switch (n->op) {
  case OP_EXPAND:
    if (!type_eq(xt, yt))
      return expand_into_users(e, n);
    to_identity(e, n);
    return 1;
  case OP_CAST:
    if (!type_eq(xt, yt))
      return 0;
    to_identity(e, n);
    return 1;
  case OP_RESHAPE: case OP_SQUEEZE: case OP_UNSQUEEZE: case OP_FLATTEN:
    if (type_eq(xt, yt)) {
      to_identity(e, n);
      return 1;
    }
    if (x->kind == VK_NODE && renames(x->def->op))
      return to_reshape(e, n, x->def->in[0]);
    return cast_last(e, n, d);
  case OP_TRANSPOSE: {
    if (moves_only_ones(n))
      return to_reshape(e, n, x);
    if (transpose_twice(e, n))
      return 1;
    int rc = transpose_fine(e, n, d);
    return rc ? rc : transpose_above_gemm(e, n, d);
  }
  case OP_MUL: case OP_DIV: {
    int k = n->nin != 2 ? -1 : pass_all_ones(n->in[1]) ? 0 : n->op == OP_MUL && pass_all_ones(x) ? 1 : -1;
    if (k < 0 || !type_eq(&n->in[k]->type, yt))
      return 0;
    if (k == 1)
      pass_edit_rewrite(e, n, OP_IDENTITY, &n->in[1], 1, NULL, 0);
    else
      to_identity(e, n);
    return 1;
  }
  case OP_CONCAT:
    return concat_of_empties(e, n);
  case OP_GATHER:
    return gathers_all(n) && to_reshape(e, n, x);
  case OP_GATHER_ND:
    return gathers_all_nd(n) && to_reshape(e, n, x);
  case OP_IDENTITY: {
    if (pass_edit_is_output(e, y) || !pass_edit_count(e, y))
      return 0;
    pass_edit_replace_uses(e, y, x);
    return 1;
  }
  default:
    return 0;
  }
}

/* Rounds until nothing changes: a few for real models (every test model: at most 4, the
 * last changing nothing). A chain that moves a reshape up one cast per round (cast,
 * reshape, cast, reshape, ...) would take as many rounds as the chain is long: it stops
 * after SIMPLIFY_MAX_ROUNDS, each of which costs about the size of the graph. */
enum { SIMPLIFY_MAX_ROUNDS = 32 };

static int run_simplify(Graph *g, PassContext *ctx) {
  int changed = pass_rewrite_rounds(g, ctx, SIMPLIFY_MAX_ROUNDS, simplify_node);
  if (changed < 0)
    return -1;
  ctx->changes += changed;
  return 0;
}

const Pass pass_simplify = {
    .name = "simplify",
    .summary = "casts, expands and reshapes that change nothing become identities (and "
               "expands that nodes broadcasting anyway read go), transposes of size-1 dims "
               "and gathers of every index reshapes",
    .run = run_simplify,
};
