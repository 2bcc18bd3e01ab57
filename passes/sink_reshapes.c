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
 * (passes/fuse.c), so the transpose costs no kernel. */
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

/* The only node that reads v, when v is no graph output; NULL otherwise. */
static Node *only_user(const Graph *g, const Value *v) {
  Node *user = NULL;
  int uses = 0;
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i]->nin; k++)
      if (g->nodes[i]->in[k] == v) {
        uses++;
        user = g->nodes[i];
      }
  return uses == 1 && !pass_is_output(g, v) ? user : NULL;
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

static int drop(Graph *g, const Node *n, Diag *d) {
  bool *keep = malloc((size_t)g->next_node_id + 1);
  if (!keep)
    return diag_error(d, g->loc, "sink_reshapes: out of memory");
  memset(keep, 1, (size_t)g->next_node_id + 1);
  keep[n->id] = false;
  graph_retain(g, keep, NULL);
  free(keep);
  return 1;
}

/* t = transpose(x) moving rows, read only by m = matmul(t, W) with 2-D weights:
 * m' = matmul(x, W), m = transpose(m'). 1: moved, 0: not, -1: error. */
static int through_matmul(Graph *g, Node *t, Diag *d) {
  Value *x = t->in[0];
  Node *m = only_user(g, t->out[0]);
  if (!m || !moves_rows(t) || node_fuse_group(t) || node_fuse_group(m) || !pass_plain_matmul(m) ||
      m->in[0] != t->out[0] || m->in[1]->type.shape.rank != 2)
    return 0;
  Value *in[2] = {x, m->in[1]};
  Value *pre = pass_insert_before(g, m, OP_MATMUL, in, 2, NULL, 0, m->out[0]->name, "pre", d);
  if (!pre)
    return -1;
  pass_rewrite(g, m, OP_TRANSPOSE, &pre, 1, t->attrs, t->nattr);
  return drop(g, t, d);
}

/* Moves reshape (or row-moving transpose) r below its user, if it may. 1: moved, 0: not,
 * -1: error. */
static int sink(Graph *g, Node *r, Diag *d) {
  Value *y = r->in[0], *x = r->out[0];
  Node *z = only_user(g, x);
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
      if (!(in[1 - at] = pass_insert_before(g, z, OP_RESHAPE, &s, 1, &a, 1, s->name, "view", d)))
        return -1;
    } else {
      return 0;
    }
  }
  Value *pre = pass_insert_before(g, z, z->op, in, z->nin, z->attrs, z->nattr, z->out[0]->name,
                                  "pre", d);
  if (!pre)
    return -1;
  Attr a = attr_make_ints("shape", back, z->out[0]->type.shape.rank);
  if (tr)
    pass_rewrite(g, z, OP_TRANSPOSE, &pre, 1, r->attrs, r->nattr);
  else
    pass_rewrite(g, z, OP_RESHAPE, &pre, 1, &a, 1);
  return drop(g, r, d);
}

static int run_sink_reshapes(Graph *g, PassContext *ctx) {
  int moved = 0;
  for (bool again = true; again;) {
    again = false;
    for (int i = 0; i < g->nnodes; i++) {
      Node *r = g->nodes[i];
      if (r->op != OP_RESHAPE && r->op != OP_TRANSPOSE)
        continue;
      int rc = sink(g, r, ctx->diag);
      if (rc == 0 && r->op == OP_TRANSPOSE)
        rc = through_matmul(g, r, ctx->diag);
      if (rc < 0)
        return -1;
      if (rc) {
        moved++;
        again = true;
        i--; /* r is gone: the next node took its place */
      }
    }
  }
  ctx->changes += moved;
  return 0;
}

const Pass pass_sink_reshapes = {
    .name = "sink_reshapes",
    .summary = "a reshape after a linear layer's GEMM moves below the add or gelu that "
               "reads it, so the GEMM's epilogue can take them; a transpose of rows before "
               "a GEMM moves below it and its bias",
    .run = run_sink_reshapes,
    .fusion = true,
};
