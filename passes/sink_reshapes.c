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
 * A reshape that splits a batched matmul's batch back into heads (attention as a 3-D
 * bmm over [B*H, S, D]) moves into the matmul's operands (unflatten), so the mask and
 * the softmax between the two matmuls and the matmuls themselves share one shape, which
 * makes them one attention. */
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
  Value *in[2];
  Node *src[2];
  for (int k = 0; k < 2; k++) {
    Value *o = m->in[k];
    const Shape *os = &o->type.shape;
    if (os->rank != ry || !shape_is_static(os))
      return 0;
    for (int j = 0; j < ry - 2; j++)
      if (!dim_eq(os->dims[j], ys->dims[j]))
        return 0;
    Type t = o->type;
    t.shape = *xs;
    t.shape.dims[rx - 2] = os->dims[ry - 2];
    t.shape.dims[rx - 1] = os->dims[ry - 1];
    int64_t shape[IR_MAX_RANK];
    if (!pass_reshape_attr(o, &t, shape))
      return 0;
    src[k] = NULL;
    if (o->kind == VK_NODE && o->def->op == OP_RESHAPE && only_user(e, o) == m &&
        pass_same_shape(&o->def->in[0]->type.shape, &t.shape))
      src[k] = o->def; /* a flattening reshape: the operand is its input */
    Attr a = attr_make_ints("shape", shape, rx);
    if (src[k])
      in[k] = src[k]->in[0];
    else if (!(in[k] = pass_edit_insert_before(e, r, OP_RESHAPE, &o, 1, &a, 1, o->name, "heads",
                                               d)))
      return -1;
  }
  pass_edit_rewrite(e, r, OP_MATMUL, in, 2, m->attrs, m->nattr);
  for (int k = 0; k < 2; k++)
    if (src[k] && (k == 0 || src[1] != src[0]))
      drop(e, src[k], gone);
  return drop(e, m, gone);
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
    if (s == x)
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
  for (bool again = true; again && !rc;) {
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
      rc = sink(&e, r, gone, ctx->diag);
      if (rc == 0 && r->op == OP_TRANSPOSE)
        rc = through_matmul(&e, r, gone, ctx->diag);
      if (rc == 0 && r->op == OP_RESHAPE)
        rc = unflatten(&e, r, gone, ctx->diag);
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
               "a GEMM moves below it and its bias; a reshape that splits a batched "
               "matmul's batch into heads moves into its operands",
    .run = run_sink_reshapes,
    .fusion = true,
};
