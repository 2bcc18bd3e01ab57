/* sink_reshapes.c: the exporters write a linear layer on a [B, S, E] tensor as a reshape
 * to [B*S, E], the GEMM and its bias add, and a reshape back to [B, S, N], and put the
 * activation and the residual add after that reshape. A GEMM applies its bias, a tanh
 * GELU and a residual add itself (passes/fuse.c), but only to nodes that read its output
 * directly. So a reshape of a GEMM's output (or of the adds and GELU after it) moves
 * below the one node that reads it when that is an add or a gelu of the reshape's shape:
 *     r = reshape(y); z = add(r, s)   ->   z' = add(y, reshape(s)); z = reshape(z')
 * z keeps its name and type. The other addend is reshaped to y's shape, unless it is a
 * scalar or a bias along a last dim that the reshape keeps: those broadcast alike either
 * way. A reshape costs nothing (an alias of its input's buffer), so no copy appears; the
 * old reshape goes.
 *
 * A transpose that keeps the last dim (it moves whole rows: torchvision's [B, S, E] ->
 * [S, B, E] before its attention's input projection) moves below the GEMM that reads it
 * and its bias add the same way, matmul(transpose(x), W) = transpose(matmul(x, W)): the
 * attention after them reads the GEMM's output through the transpose as a view
 * (passes/fuse.c), so the transpose costs no kernel.
 *
 * Reshapes that only regroup the batch dims (the last two kept) move out of the region
 * between an attention's two matmuls, so the matmuls, the mask and the softmax share one
 * shape, which makes them one attention (passes/fuse.c): a split moves up, into a
 * matmul's operands (unflatten: attention as a 3-D bmm over [B*H, S, D], DeBERTa's and
 * BART's) or above a pointwise node (hoist_split: Swin's scores reshaped to [B, windows,
 * H, N, N] for the windows' mask); a merge moves down, below a softmax or a matmul that
 * reads a computed value through it (lower_merge: the same mask, merged back for the
 * softmax). Splits only go up and merges only down, so the moves end; a reshape of a
 * reshape becomes one, or none where it gives back its source's shape (compose). */
#include "passes/passes-impl.h"

#include <stdlib.h>
#include <string.h>

/* Whether v comes from a linear layer's GEMM: a matmul with 2-D weights, maybe through
 * the adds and gelus after it. */
static bool from_gemm(const Value *v) {
  for (int depth = 0; depth < 8 && v && v->kind == VK_NODE; depth++) {
    const Node *d = v->def;
    if (d->op == OP_MATMUL)
      return d->in[1]->type.shape.rank == 2;
    if (d->op != OP_ADD && d->op != OP_GELU)
      return false;
    const Value *next = NULL;
    for (int k = 0; k < d->nin && !next; k++)
      if (d->in[k]->kind == VK_NODE && pass_same_shape(&d->in[k]->type.shape, &v->type.shape))
        next = d->in[k];
    v = next;
  }
  return false;
}

/* The only node that reads v (as one input), when v is no graph output; NULL otherwise. */
static Node *only_user(Edit *e, const Value *v) {
  int cursor = -1;
  return pass_edit_count(e, v) == 1 && !pass_edit_is_output(e, v)
             ? pass_edit_next_user(e, v, &cursor)
             : NULL;
}

/* Whether s broadcasts the same way onto x (the reshape's output) and onto y (its
 * input): a scalar, or a vector along a last dim the two share. */
static bool broadcasts_alike(const Value *s, const Value *x, const Value *y) {
  const Shape *ss = &s->type.shape, *xs = &x->type.shape, *ys = &y->type.shape;
  if (ss->rank > ys->rank || ss->rank > xs->rank)
    return false;
  for (int i = 0; i < ss->rank - 1; i++)
    if (ss->dims[i].sym || ss->dims[i].n != 1)
      return false;
  if (ss->rank == 0)
    return true;
  Dim last = ss->dims[ss->rank - 1];
  return (!last.sym && last.n == 1) ||
         (dim_eq(last, xs->dims[xs->rank - 1]) && dim_eq(last, ys->dims[ys->rank - 1]));
}

/* A transpose that keeps the last dim in place: it moves whole rows, which commutes
 * with a matmul by 2-D weights and with a bias along the last dim. */
static bool moves_rows(const Node *t) {
  int np = 0, r = t->in[0]->type.shape.rank;
  const int64_t *perm = attr_ints(t, "perm", &np);
  return t->op == OP_TRANSPOSE && r >= 2 && perm && np == r && perm[r - 1] == r - 1;
}

/* n goes when the round ends (gone): it reads nothing from now on. */
static int drop(Edit *e, Node *n, bool *gone) {
  for (int k = 0; k < n->nin; k++)
    pass_edit_set_input(e, n, k, NULL);
  gone[n->id] = true;
  return 1;
}

/* t = transpose(x) moving rows, read only by m = matmul(t, W) with 2-D weights:
 * m' = matmul(x, W), m = transpose(m'). 1: moved, 0: not, -1: error. */
static int through_matmul(Edit *e, Node *t, bool *gone, Diag *d) {
  Value *x = t->in[0];
  Node *m = only_user(e, t->out[0]);
  if (!m || !moves_rows(t) || node_fuse_group(t) || node_fuse_group(m) || !pass_plain_matmul(m) ||
      m->in[0] != t->out[0] || m->in[1]->type.shape.rank != 2)
    return 0;
  Value *in[2] = {x, m->in[1]};
  Value *pre = pass_edit_insert_before(e, m, OP_MATMUL, in, 2, NULL, 0, m->out[0]->name, "pre",
                                       d);
  if (!pre)
    return -1;
  pass_edit_rewrite(e, m, OP_TRANSPOSE, &pre, 1, t->attrs, t->nattr);
  return drop(e, t, gone);
}

/* The shape attribute of a reshape to static shape sh (shape: its storage). */
static Attr shape_attr(const Shape *sh, int64_t *shape) {
  for (int j = 0; j < sh->rank; j++)
    shape[j] = sh->dims[j].n;
  return attr_make_ints("shape", shape, sh->rank);
}

/* Operand v of `user` regrouped to static shape `to`: a new reshape of v before `before`,
 * or the input of v's own reshape when that reshape is read by `user` alone and its input
 * has `to`'s shape already (*src: that reshape, which the caller drops). NULL: error. */
static Value *regrouped(Edit *e, Value *v, const Shape *to, Node *user, Node *before,
                        Node **src, Diag *d) {
  *src = NULL;
  if (v->kind == VK_NODE && v->def->op == OP_RESHAPE && only_user(e, v) == user &&
      pass_same_shape(&v->def->in[0]->type.shape, to)) {
    *src = v->def;
    return v->def->in[0];
  }
  int64_t shape[IR_MAX_RANK];
  Attr a = shape_attr(to, shape);
  return pass_edit_insert_before(e, before, OP_RESHAPE, &v, 1, &a, 1, v->name, "heads", d);
}

/* r = reshape(y), y = matmul(a, b) of batched operands whose batch dims are y's (none
 * broadcast), r keeping y's last two dims and splitting the batch into more dims (heads
 * flattened into the batch for a 3-D bmm, BART's and DeBERTa's attention, and split
 * again after it): r = matmul(reshape(a), reshape(b)), each operand's batch reshaped to
 * r's, so the matmul works on the unflattened heads the nodes around it use (the
 * attention's softmax and mask: passes/fuse.c). The reshapes are views; an operand
 * flattened from those heads by a reshape read nowhere else is that reshape's input.
 * 1: moved, 0: not, -1: error. */
static int unflatten(Edit *e, Node *r, bool *gone, Diag *d) {
  Value *y = r->in[0], *x = r->out[0];
  if (y->kind != VK_NODE || node_fuse_group(r))
    return 0;
  Node *m = y->def;
  const Shape *ys = &y->type.shape, *xs = &x->type.shape;
  int ry = ys->rank, rx = xs->rank;
  if (!pass_plain_matmul(m) || node_fuse_group(m) || only_user(e, y) != r || ry < 3 ||
      rx <= ry || !shape_is_static(ys) || !shape_is_static(xs) ||
      !dim_eq(ys->dims[ry - 1], xs->dims[rx - 1]) || !dim_eq(ys->dims[ry - 2], xs->dims[rx - 2]))
    return 0;
  for (int k = 0; k < 2; k++) {
    const Shape *os = &m->in[k]->type.shape;
    if (os->rank != ry || !shape_is_static(os))
      return 0;
    for (int j = 0; j < ry - 2; j++)
      if (!dim_eq(os->dims[j], ys->dims[j]))
        return 0;
  }
  Value *in[2];
  Node *src[2];
  for (int k = 0; k < 2; k++) {
    Shape to = *xs; /* r's batch, the operand's rows and columns */
    to.dims[rx - 2] = m->in[k]->type.shape.dims[ry - 2];
    to.dims[rx - 1] = m->in[k]->type.shape.dims[ry - 1];
    if (!(in[k] = regrouped(e, m->in[k], &to, m, r, &src[k], d)))
      return -1;
  }
  pass_edit_rewrite(e, r, OP_MATMUL, in, 2, m->attrs, m->nattr);
  for (int k = 0; k < 2; k++) /* (one reshape read by m alone is no two operands) */
    if (src[k])
      drop(e, src[k], gone);
  return drop(e, m, gone);
}

/* r = reshape(y), y = reshape(w) read by r alone: r reads w (one reshape), or, where r
 * gives back w's shape and is no graph output, r's readers read w (none). Keeps the pairs
 * the moves below leave (a merge moved below a matmul, then the split that followed the
 * matmul) from hiding the nodes on either side from each other. 1: done, 0: not. */
static int compose(Edit *e, Node *r, bool *gone) {
  Value *y = r->in[0];
  if (r->op != OP_RESHAPE || y->kind != VK_NODE || y->def->op != OP_RESHAPE ||
      node_fuse_group(r) || node_fuse_group(y->def) || only_user(e, y) != r)
    return 0;
  Node *q = y->def;
  Value *w = q->in[0];
  if (pass_same_shape(&w->type.shape, &r->out[0]->type.shape) && shape_is_static(&w->type.shape) &&
      !pass_edit_is_output(e, r->out[0])) {
    pass_edit_replace_uses(e, r->out[0], w);
    drop(e, q, gone);
    return drop(e, r, gone);
  }
  pass_edit_set_input(e, r, 0, w);
  return drop(e, q, gone);
}

/* How many last dims reshape r keeps as they are, when it only regroups the batch: both
 * shapes static, of rank 3 or more, the last two dims kept; 0 otherwise. */
static int regroup_suffix(const Node *r) {
  if (r->op != OP_RESHAPE)
    return 0;
  const Shape *a = &r->in[0]->type.shape, *b = &r->out[0]->type.shape;
  if (a->rank < 3 || b->rank < 3 || !shape_is_static(a) || !shape_is_static(b))
    return 0;
  int n = 0;
  while (n < a->rank && n < b->rank && a->dims[a->rank - 1 - n].n == b->dims[b->rank - 1 - n].n)
    n++;
  return n >= 2 ? n : 0;
}

/* r = reshape(z) splitting z's batch into more dims (regroup_suffix), z a pointwise node
 * read by r alone: z's op on its inputs regrouped alike, an input of z's shape reshaped to
 * r's, one that spans only the kept last dims (leading 1s) as it is. The split moves up,
 * towards the matmul it may unflatten (Swin's shifted windows: the scores plus their
 * position bias, reshaped to [B, windows, H, N, N] for the mask). 1: moved, 0: not, -1:
 * error. */
static int hoist_split(Edit *e, Node *r, bool *gone, Diag *d) {
  Value *x = r->in[0];
  int keep = regroup_suffix(r);
  if (!keep || x->kind != VK_NODE || node_fuse_group(r) ||
      r->out[0]->type.shape.rank <= x->type.shape.rank)
    return 0;
  Node *z = x->def;
  if (!(op_info[z->op].flags & OPF_POINTWISE) || z->nout != 1 || node_fuse_group(z) ||
      only_user(e, x) != r || z->nin > 8 || from_gemm(x))
    return 0; /* (a linear layer's adds: sink moves its reshapes the other way) */
  const Shape *to = &r->out[0]->type.shape;
  bool full[8];
  for (int k = 0; k < z->nin; k++) {
    const Value *u = z->in[k];
    full[k] = u && pass_same_shape(&u->type.shape, &x->type.shape);
    if (!u || full[k])
      continue;
    const Shape *us = &u->type.shape;
    if (!shape_is_static(us) || us->rank > x->type.shape.rank)
      return 0;
    for (int j = 0; j < us->rank - keep; j++)
      if (us->dims[j].n != 1)
        return 0;
  }
  Value *in[8];
  Node *src[8];
  for (int k = 0; k < z->nin; k++) {
    src[k] = NULL;
    in[k] = z->in[k];
    if (full[k] && !(in[k] = regrouped(e, z->in[k], to, z, r, &src[k], d)))
      return -1;
  }
  pass_edit_rewrite(e, r, z->op, in, z->nin, z->attrs, z->nattr);
  for (int k = 0; k < z->nin; k++) /* (a reshape read by z alone is one input of it) */
    if (src[k])
      drop(e, src[k], gone);
  return drop(e, z, gone);
}

/* r = reshape(x) merging x's batch dims (regroup_suffix), read only by a softmax along the
 * last dim or by a batched matmul: the softmax or the matmul works on x's batch instead
 * (the matmul's other operand regrouped alike, its batch dims r's), and the merge moves
 * below it, away from the attention it would split. 1: moved, 0: not, -1: error. */
static int lower_merge(Edit *e, Node *r, bool *gone, Diag *d) {
  Value *x = r->in[0], *y = r->out[0];
  int keep = regroup_suffix(r);
  Node *u = only_user(e, y);
  if (!keep || !u || node_fuse_group(r) || node_fuse_group(u) || u->nout != 1 ||
      y->type.shape.rank >= x->type.shape.rank)
    return 0;
  const Shape *xs = &x->type.shape, *ys = &y->type.shape;
  Value *in[2] = {x, NULL};
  Node *src = NULL;
  int nin = 1;
  Attr attrs[1];
  const Attr *at = u->attrs;
  int nat = u->nattr;
  if (u->op == OP_SOFTMAX) {
    int64_t axis = attr_int(u, "axis");
    if (axis != -1 && axis != ys->rank - 1)
      return 0;
    attrs[0] = attr_make_int("axis", -1);
    at = attrs;
    nat = 1;
  } else if (pass_plain_matmul(u) && x->kind == VK_NODE &&
             (x->def->op == OP_SOFTMAX || (op_info[x->def->op].flags & OPF_POINTWISE))) {
    /* (a computed operand; a view's merge stays, read through strides: GQA's repeat) */
    int k = u->in[0] == y ? 0 : 1;
    Value *o = u->in[1 - k];
    const Shape *os = &o->type.shape;
    if (u->in[k] != y || o == y || os->rank != ys->rank || !shape_is_static(os))
      return 0;
    for (int j = 0; j < ys->rank - 2; j++)
      if (os->dims[j].n != ys->dims[j].n)
        return 0;
    Shape to = *xs;
    to.dims[xs->rank - 2] = os->dims[os->rank - 2];
    to.dims[xs->rank - 1] = os->dims[os->rank - 1];
    in[k] = x;
    if (!(in[1 - k] = regrouped(e, o, &to, u, u, &src, d)))
      return -1;
    nin = 2;
  } else {
    return 0;
  }
  Value *pre = pass_edit_insert_before(e, u, u->op, in, nin, at, nat, u->out[0]->name, "pre", d);
  if (!pre)
    return -1;
  int64_t shape[IR_MAX_RANK];
  Attr a = shape_attr(&u->out[0]->type.shape, shape);
  pass_edit_rewrite(e, u, OP_RESHAPE, &pre, 1, &a, 1);
  if (src)
    drop(e, src, gone);
  return drop(e, r, gone);
}

/* Moves reshape (or row-moving transpose) r below its user, if it may. 1: moved, 0: not,
 * -1: error. */
static int sink(Edit *e, Node *r, bool *gone, Diag *d) {
  Value *y = r->in[0], *x = r->out[0];
  Node *z = only_user(e, x);
  bool tr = r->op == OP_TRANSPOSE;
  if (!z || node_fuse_group(r) || node_fuse_group(z) || !from_gemm(y) || z->nout != 1 ||
      !pass_same_shape(&z->out[0]->type.shape, &x->type.shape) ||
      (z->op != OP_ADD && z->op != OP_GELU) || (tr && !moves_rows(r)))
    return 0;
  int64_t back[IR_MAX_RANK], fwd[IR_MAX_RANK];
  if (!tr && !pass_reshape_attr(y, &z->out[0]->type, back))
    return 0;
  Value *in[2] = {y, NULL};
  int at = 0;
  if (z->op == OP_ADD) {
    at = z->in[0] == x ? 0 : 1;
    Value *s = z->in[1 - at];
    in[at] = y;
    /* an addend that is a GEMM's output in the add's shape already lets that GEMM take
     * the add; moving r would make it a reshape of a GEMM's output, which the next round
     * would move back (two GEMMs' outputs of different groupings: Swin's windows) */
    if (s == x || from_gemm(s))
      return 0;
    if (broadcasts_alike(s, x, y)) {
      in[1 - at] = s;
    } else if (!tr && pass_same_shape(&s->type.shape, &x->type.shape) &&
               pass_reshape_attr(s, &(Type){s->type.dtype, y->type.shape}, fwd)) {
      Attr a = attr_make_ints("shape", fwd, y->type.shape.rank);
      if (!(in[1 - at] = pass_edit_insert_before(e, z, OP_RESHAPE, &s, 1, &a, 1, s->name, "view",
                                                 d)))
        return -1;
    } else {
      return 0;
    }
  }
  Value *pre = pass_edit_insert_before(e, z, z->op, in, z->nin, z->attrs, z->nattr,
                                       z->out[0]->name, "pre", d);
  if (!pre)
    return -1;
  Attr a = attr_make_ints("shape", back, z->out[0]->type.shape.rank);
  if (tr)
    pass_edit_rewrite(e, z, OP_TRANSPOSE, &pre, 1, r->attrs, r->nattr);
  else
    pass_edit_rewrite(e, z, OP_RESHAPE, &pre, 1, &a, 1);
  return drop(e, r, gone);
}

/* Rounds until nothing moves: each looks at the nodes of its start, in order, through an
 * edit (the nodes it adds go in front of the node they were made for when it ends, and
 * are looked at the next round; the nodes moved below their user go then too). */
static int run_sink_reshapes(Graph *g, PassContext *ctx) {
  int moved = 0, rc = 0;
  /* each move takes a reshape past one node, in one direction for its kind; the bound
   * only guards against a graph where that would not end (every round leaves a valid one) */
  bool again = true;
  for (int round = 0; again && !rc && round < 256; round++) {
    again = false;
    Edit e;
    pass_edit_begin(&e, g);
    int nid = g->next_node_id; /* gone[]: the nodes of the round's start */
    bool *gone = calloc((size_t)nid + 1, sizeof *gone);
    if (!gone) {
      pass_edit_end(&e);
      return diag_error(ctx->diag, g->loc, "sink_reshapes: out of memory");
    }
    for (int i = 0; i < e.norig && !rc; i++) {
      Node *r = g->nodes[i];
      if (gone[r->id] || (r->op != OP_RESHAPE && r->op != OP_TRANSPOSE))
        continue;
      rc = compose(&e, r, gone);
      if (rc == 0)
        rc = sink(&e, r, gone, ctx->diag);
      if (rc == 0 && r->op == OP_TRANSPOSE)
        rc = through_matmul(&e, r, gone, ctx->diag);
      if (rc == 0 && r->op == OP_RESHAPE)
        rc = unflatten(&e, r, gone, ctx->diag);
      if (rc == 0 && r->op == OP_RESHAPE)
        rc = hoist_split(&e, r, gone, ctx->diag);
      if (rc == 0 && r->op == OP_RESHAPE)
        rc = lower_merge(&e, r, gone, ctx->diag);
      if (rc > 0) {
        moved++;
        again = true;
        rc = 0;
      }
    }
    pass_edit_end(&e);
    bool *keep = malloc((size_t)g->next_node_id + 1);
    if (keep) {
      for (int id = 0; id < g->next_node_id; id++)
        keep[id] = id >= nid || !gone[id];
      graph_retain(g, keep, NULL);
    }
    free(keep);
    free(gone);
    if (!keep && !rc)
      rc = diag_error(ctx->diag, g->loc, "sink_reshapes: out of memory");
  }
  ctx->changes += moved;
  return rc < 0 ? -1 : 0;
}

const Pass pass_sink_reshapes = {
    .name = "sink_reshapes",
    .summary = "a reshape after a linear layer's GEMM moves below the add or gelu that "
               "reads it, so the GEMM's epilogue can take them; a transpose of rows before "
               "a GEMM moves below it and its bias; reshapes that regroup the batch move "
               "out of an attention (splits up, merges down)",
    .run = run_sink_reshapes,
    .fusion = true,
};
