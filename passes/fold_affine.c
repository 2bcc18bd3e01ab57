/* fold_affine.c: a per-channel scale and shift after a convolution or a linear layer,
 * folded into its weights and bias. An exporter that does not fold BatchNormalization
 * (torch.onnx.export(do_constant_folding=False), many model-zoo files) leaves a
 * batch_norm after every convolution: a kernel of its own, and (channels last) two
 * transposes around it. Folded, the convolution computes the same with nothing after it.
 *
 *   conv(x, w, b) then u, u one of
 *     batch_norm(y, gamma, beta, mean, var)   s = gamma / sqrt(var + eps), t = beta - mean s
 *     y * c, c * y, y / c                     s = c or 1 / c, t = 0
 *     y + c, c + y, y - c                     s = 1, t = c or -c
 *   with every constant one value per output channel (dim 1 of y; a single element
 *   counts for all) becomes conv(x, w', b'), w'[m] = w[m] s[m], b' = b s + t;
 *   a linear layer y = x @ W (+ b), W constant [K, N], the channels its last dim (a
 *   batch_norm: y is [rows, N]), becomes x @ W' (+ b'), W'[:, n] = W[:, n] s[n].
 * The folded constants are computed in f64 from the originals and rounded once to their
 * type, as the reference executor rounds each node's result, so the folded graph agrees
 * with the original to that rounding. Only a convolution or GEMM whose output u alone
 * reads, and whose weights (and bias) it alone reads, folds: the new constants replace
 * the old ones, which dce removes, so the weights never grow (a tied weight stays).
 *
 * A batch_norm with no such producer (after an add, a pool, a concat) becomes y * s + t,
 * a mul and an add of per-channel constants: pointwise, so they join the kernels around
 * them (fuse.c) where a batch_norm is a kernel of its own.
 *
 * One walk in node order: u, rewritten in place into the folded node, is the producer
 * the node after it sees, so a chain (a batch_norm, then a mul) folds in the same walk. */
#include "passes/passes-impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Per-channel y' = y s + t, c channels. */
typedef struct Affine {
  double *s, *t;
  int64_t c;
} Affine;

static void affine_free(Affine *a) {
  free(a->s), free(a->t);
  a->s = a->t = NULL;
}

/* Whether v is a float constant of y's type holding one value per channel of y (dim ch),
 * or one element: its dims aligned right against y's are 1 but for the channel dim. */
static bool per_channel(const Value *v, const Value *y, int ch) {
  const Shape *vs = &v->type.shape, *ys = &y->type.shape;
  if (v->kind != VK_CONST || !v->data || v->type.dtype != y->type.dtype || vs->rank > ys->rank)
    return false;
  for (int i = 0; i < vs->rank; i++) {
    int j = ys->rank - vs->rank + i;
    if (vs->dims[i].sym ||
        (vs->dims[i].n != 1 && (j != ch || !dim_eq(vs->dims[i], ys->dims[j]))))
      return false;
  }
  return true;
}

/* Element c of per-channel constant v (one element: the same for every channel). */
static double channel(const Value *v, int64_t c) {
  int64_t k = tensor_numel(v->data) == 1 ? 0 : c;
  return dtype_load_f64(v->type.dtype, (const char *)v->data->data + (size_t)k * dtype_size(v->type.dtype));
}

/* The scale and shift that node u applies to y (channels along dim ch, nch of them), or
 * false when u is none of the affine nodes above. */
static bool affine_of(const Node *u, const Value *y, int ch, int64_t nch, Affine *a) {
  *a = (Affine){NULL, NULL, nch};
  if (!type_eq(&u->out[0]->type, &y->type) || u->nout != 1 || node_fuse_group(u))
    return false;
  if (u->op == OP_BATCH_NORM) {
    if (u->in[0] != y || ch != 1)
      return false;
    for (int k = 1; k < 5; k++) {
      const Value *p = u->in[k];
      if (p->kind != VK_CONST || !p->data || p->type.dtype != y->type.dtype ||
          p->data->rank != 1 || p->data->dims[0] != nch)
        return false;
    }
  } else if (u->op == OP_MUL || u->op == OP_ADD || u->op == OP_DIV || u->op == OP_SUB) {
    int k = u->in[0] == y ? 1 : 0;
    if (u->in[1 - k] != y || u->in[k] == y || !per_channel(u->in[k], y, ch) ||
        ((u->op == OP_DIV || u->op == OP_SUB) && k != 1))
      return false;
  } else {
    return false;
  }
  a->s = malloc(sizeof *a->s * (size_t)(nch + 1));
  a->t = malloc(sizeof *a->t * (size_t)(nch + 1));
  if (!a->s || !a->t)
    abort(); /* like arena_alloc */
  double eps = u->op == OP_BATCH_NORM ? attr_float(u, "epsilon") : 0;
  for (int64_t c = 0; c < nch; c++) {
    double s = 1, t = 0;
    switch (u->op) {
    case OP_BATCH_NORM: {
      double g = channel(u->in[1], c), b = channel(u->in[2], c);
      double m = channel(u->in[3], c), v = channel(u->in[4], c);
      s = g / sqrt(v + eps);
      t = b - m * s;
      break;
    }
    case OP_MUL: s = channel(u->in[u->in[0] == y], c); break;
    case OP_DIV: s = 1 / channel(u->in[1], c); break;
    case OP_ADD: t = channel(u->in[u->in[0] == y], c); break;
    case OP_SUB: t = -channel(u->in[1], c); break;
    default: break;
    }
    a->s[c] = s, a->t[c] = t;
  }
  return true;
}

/* A constant <like>.weight: w's elements times s of their channel, dim `dim` of w. */
static Value *scaled(Graph *g, const Value *w, int dim, const Affine *a, const char *like) {
  const Tensor *t = w->data;
  Tensor *o = tensor_in_arena(g->arena, t->dtype, t->rank, t->dims);
  int64_t n = tensor_numel(t), inner = 1;
  for (int i = dim + 1; i < t->rank; i++)
    inner *= t->dims[i];
  size_t es = dtype_size(t->dtype);
  for (int64_t i = 0; i < n; i++) {
    int64_t c = inner ? i / inner % t->dims[dim] : 0;
    double v = dtype_load_f64(t->dtype, (const char *)t->data + (size_t)i * es);
    dtype_store_f64(t->dtype, (char *)o->data + (size_t)i * es, v * a->s[c]);
  }
  return pass_add_const(g, like, "weight", o);
}

/* The bias b s + t as a constant <like>.bias [c] of type dt (b NULL: 0). NULL when it
 * would be all zeros, there was no bias and `keep` is false: a batch norm folds into a
 * bias even when that is zero (a fresh model's), as the exporters fold it, since a GEMM
 * takes its epilogue (a ReLU) with a bias add (fuse.c). */
static Value *shifted(Graph *g, const Value *b, DType dt, const char *like, const Affine *a,
                      bool keep) {
  bool zero = !keep;
  for (int64_t c = 0; c < a->c; c++)
    zero = zero && a->t[c] == 0;
  if (!b && zero)
    return NULL;
  Tensor *o = tensor_in_arena(g->arena, dt, 1, &a->c);
  for (int64_t c = 0; c < a->c; c++) {
    double v = (b ? channel(b, c) * a->s[c] : 0) + a->t[c];
    dtype_store_f64(dt, (char *)o->data + (size_t)c * dtype_size(dt), v);
  }
  return pass_add_const(g, like, "bias", o);
}

/* Whether constant v is read by one node (maybe as several of its inputs) alone. */
static bool only_reader(Edit *e, const Value *v, const Node *n) {
  return v->kind == VK_CONST && v->data && pass_edit_sole_user(e, v) == n;
}

/* u reads the output of convolution c: folded into it. 1 when folded, else 0. */
static int fold_into_conv(Edit *e, Node *c, Node *u) {
  Value *x = c->in[0], *w = c->in[1], *b = c->nin > 2 ? c->in[2] : NULL, *y = c->out[0];
  if (attr_int(c, "channels_last") || !only_reader(e, w, c) || (b && !only_reader(e, b, c)) ||
      w->type.dtype != y->type.dtype || (b && b->type.dtype != y->type.dtype) ||
      y->type.shape.rank < 2 || y->type.shape.dims[1].sym)
    return 0;
  Affine a;
  if (!affine_of(u, y, 1, y->type.shape.dims[1].n, &a))
    return 0;
  if (w->data->rank < 1 || w->data->dims[0] != a.c || (b && tensor_numel(b->data) != a.c)) {
    affine_free(&a);
    return 0;
  }
  const char *name = u->out[0]->name;
  Value *in[3] = {x, scaled(e->g, w, 0, &a, name),
                   shifted(e->g, b, y->type.dtype, name, &a, u->op == OP_BATCH_NORM)};
  pass_edit_rewrite(e, u, OP_CONV, in, in[2] ? 3 : 2, c->attrs, c->nattr);
  affine_free(&a);
  return 1;
}

/* u reads y, the output of a linear layer: matmul m (y = x @ W), or its bias add (y = m +
 * b). Folded into it: 1, else 0 (-1 on an error). */
static int fold_into_linear(Edit *e, Node *m, Node *badd, Node *u, Diag *d) {
  Value *x = m->in[0], *w = m->in[1], *y = badd ? badd->out[0] : m->out[0];
  Value *b = badd ? (Value *)node_other_input(badd, m->out[0]) : NULL;
  int r = y->type.shape.rank;
  const Dim nd = y->type.shape.dims[r - 1];
  if (!only_reader(e, w, m) || (b && !only_reader(e, b, badd)) || w->type.dtype != y->type.dtype ||
      nd.sym || (u->op == OP_BATCH_NORM && r != 2))
    return 0;
  /* a bias add of a bias-less GEMM is the canonical form already */
  if (!badd && (u->op == OP_ADD || u->op == OP_SUB))
    return 0;
  Affine a;
  if (!affine_of(u, y, r - 1, nd.n, &a))
    return 0;
  if (w->data->rank != 2 || w->data->dims[1] != a.c || (b && tensor_numel(b->data) != a.c)) {
    affine_free(&a);
    return 0;
  }
  const char *name = u->out[0]->name;
  Value *win[2] = {x, scaled(e->g, w, 1, &a, name)};
  Value *bias = shifted(e->g, b, y->type.dtype, name, &a, u->op == OP_BATCH_NORM);
  affine_free(&a);
  if (!bias) {
    pass_edit_rewrite(e, u, OP_MATMUL, win, 2, m->attrs, m->nattr);
    return 1;
  }
  Value *mm = pass_edit_insert_before(e, u, OP_MATMUL, win, 2, m->attrs, m->nattr, name,
                                      "gemm", d);
  if (!mm)
    return -1;
  Value *ain[2] = {mm, bias};
  pass_edit_rewrite(e, u, OP_ADD, ain, 2, NULL, 0);
  return 1;
}

/* The linear layer whose output is v, read by u alone: its matmul into *m and its bias add
 * (or NULL) into *badd. */
static bool linear_of(Edit *e, Value *v, const Node *u, Node **m, Node **badd) {
  if (v->kind != VK_NODE || node_fuse_group(v->def) || pass_edit_sole_user(e, v) != u)
    return false;
  Node *n = v->def;
  *badd = NULL;
  if (n->op == OP_ADD) {
    for (int k = 0; k < 2; k++) {
      Value *mv = n->in[k];
      if (mv->kind == VK_NODE && mv->def->op == OP_MATMUL && !node_fuse_group(mv->def) &&
          pass_edit_sole_user(e, mv) == n && n->in[1 - k]->kind == VK_CONST &&
          pass_along_last(n->in[1 - k], v) && n->in[1 - k]->type.shape.rank == 1) {
        *badd = n;
        n = mv->def;
        break;
      }
    }
    if (!*badd)
      return false;
  }
  *m = n;
  return n->op == OP_MATMUL && pass_linear_layer(n) && n->out[0]->type.shape.rank >= 1;
}

/* A batch_norm left: y * s + t, with s and t constants [C, 1, ...] of x's type. */
static int bn_to_pointwise(Edit *e, Node *u, Diag *d) {
  Value *x = u->in[0];
  const Shape *xs = &x->type.shape;
  if (node_fuse_group(u) || xs->rank < 2 || xs->dims[1].sym || !dtype_is_float(x->type.dtype))
    return 0;
  Affine a;
  if (!affine_of(u, x, 1, xs->dims[1].n, &a))
    return 0;
  int64_t dims[IR_MAX_RANK];
  dims[0] = a.c;
  for (int i = 1; i < xs->rank - 1; i++)
    dims[i] = 1;
  Tensor *st = tensor_in_arena(e->g->arena, x->type.dtype, xs->rank - 1, dims);
  Tensor *tt = tensor_in_arena(e->g->arena, x->type.dtype, xs->rank - 1, dims);
  size_t es = dtype_size(x->type.dtype);
  for (int64_t c = 0; c < a.c; c++) {
    dtype_store_f64(x->type.dtype, (char *)st->data + (size_t)c * es, a.s[c]);
    dtype_store_f64(x->type.dtype, (char *)tt->data + (size_t)c * es, a.t[c]);
  }
  affine_free(&a);
  const char *name = u->out[0]->name;
  Value *min[2] = {x, pass_add_const(e->g, name, "scale", st)};
  Value *scaled_x = pass_edit_insert_before(e, u, OP_MUL, min, 2, NULL, 0, name, "scaled", d);
  if (!scaled_x)
    return -1;
  Value *ain[2] = {scaled_x, pass_add_const(e->g, name, "shift", tt)};
  pass_edit_rewrite(e, u, OP_ADD, ain, 2, NULL, 0);
  return 1;
}

static int fold_node(Edit *e, Node *u, Diag *d) {
  if (node_fuse_group(u) || u->nout != 1 || u->nin < 1)
    return 0;
  bool affine = u->op == OP_BATCH_NORM || u->op == OP_MUL || u->op == OP_ADD ||
                u->op == OP_DIV || u->op == OP_SUB;
  if (!affine || !dtype_is_float(u->out[0]->type.dtype))
    return 0;
  for (int k = 0; k < (u->op == OP_BATCH_NORM ? 1 : u->nin); k++) {
    Value *y = u->in[k];
    if (y->kind != VK_NODE || node_fuse_group(y->def) || pass_edit_sole_user(e, y) != u)
      continue;
    int rc = 0;
    Node *m, *badd;
    if (y->def->op == OP_CONV && y->def->nout == 1)
      rc = fold_into_conv(e, y->def, u);
    else if (linear_of(e, y, u, &m, &badd))
      rc = fold_into_linear(e, m, badd, u, d);
    if (rc)
      return rc;
  }
  return u->op == OP_BATCH_NORM ? bn_to_pointwise(e, u, d) : 0;
}

static int run_fold_affine(Graph *g, PassContext *ctx) {
  Edit e;
  pass_edit_begin(&e, g);
  int changed = 0, rc = 0;
  for (int i = 0; i < e.norig && rc >= 0; i++) {
    rc = fold_node(&e, g->nodes[i], ctx->diag);
    changed += rc > 0;
  }
  pass_edit_end(&e);
  if (rc < 0)
    return -1;
  PassContext quiet = {.diag = ctx->diag};
  if (changed && pass_dce.run(g, &quiet))
    return -1;
  ctx->changes += changed;
  return 0;
}

const Pass pass_fold_affine = {
    .name = "fold_affine",
    .summary = "batch norms and per-channel scales and shifts after a convolution or a "
               "linear layer folded into its weights and bias; other batch norms a "
               "pointwise scale and shift",
    .run = run_fold_affine,
};
