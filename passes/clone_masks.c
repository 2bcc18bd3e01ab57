/* clone_masks.c: a transformer's attention mask is computed once from the model's inputs
 * (a cast of attention_mask, an and with the causal triangle, a where that turns it into
 * 0 and -inf) and read by the attention of every layer. The attention kernel can compute
 * a mask made for it alone as it computes the scores (passes/fuse.c), at the cost of a
 * few operations per score; a mask shared by every layer instead takes kernels of its
 * own. So pointwise nodes computed from inputs and constants alone, through pointwise
 * nodes and reshapes, that are read by several pointwise nodes leading to a softmax, are
 * computed again for each reader: the copies take the original's name with .1, .2, ...
 * Nodes are visited from the last, so a copy's inputs are copied in turn. */
#include "passes/passes-impl.h"

#include <stdlib.h>
#include <string.h>

enum { MASK_DEPTH = 4 }; /* pointwise steps from the mask to the softmax */

static bool alias_op(Op op) { return op_info[op].flags & OPF_ALIAS; }

static bool pointwise(const Node *n) {
  return (op_info[n->op].flags & OPF_POINTWISE) && n->nout == 1;
}

/* Whether v is computed from inputs and constants alone, through pointwise nodes and
 * reshapes (rooted[] holds the answer for the nodes before). */
static bool from_inputs(const Value *v, const bool *rooted) {
  while (v->kind == VK_NODE && alias_op(v->def->op))
    v = v->def->in[0];
  return v->kind != VK_NODE || rooted[v->def->id];
}

/* Whether v reaches a softmax through at most `depth` pointwise nodes. */
static bool feeds_softmax(const Graph *g, const Value *v, int depth) {
  for (int i = 0; i < g->nnodes; i++) {
    const Node *u = g->nodes[i];
    for (int k = 0; k < u->nin; k++) {
      if (u->in[k] != v)
        continue;
      if (u->op == OP_SOFTMAX ||
          (depth > 0 && pointwise(u) && feeds_softmax(g, u->out[0], depth - 1)))
        return true;
    }
  }
  return false;
}

/* Whether every reader of v is a pointwise node leading to a softmax, and there are at
 * least two (v no graph output). */
static bool shared_mask(const Graph *g, const Value *v) {
  int users = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *u = g->nodes[i];
    bool reads = false;
    for (int k = 0; k < u->nin; k++)
      reads = reads || u->in[k] == v;
    if (!reads)
      continue;
    if (!pointwise(u) || !feeds_softmax(g, u->out[0], MASK_DEPTH - 1))
      return false;
    users++;
  }
  return users >= 2 && !pass_is_output(g, v);
}

/* Gives every reader of n's output but the first a copy of n of its own. */
static int clone_for_readers(Graph *g, Node *n, PassContext *ctx) {
  Value *v = n->out[0];
  int copies = 0;
  bool first = true;
  for (int i = 0; i < g->nnodes; i++) {
    Node *u = g->nodes[i];
    bool reads = false;
    for (int k = 0; k < u->nin; k++)
      reads = reads || u->in[k] == v;
    if (!reads || u == n)
      continue;
    if (first) {
      first = false;
      continue;
    }
    char suffix[16];
    snprintf(suffix, sizeof suffix, "%d", ++copies);
    Value *c = pass_insert_before(g, u, n->op, n->in, n->nin, n->attrs, n->nattr, v->name,
                                  suffix, ctx->diag);
    if (!c)
      return -1;
    c->def->origin = n->origin;
    for (int k = 0; k < u->nin; k++)
      if (u->in[k] == v)
        u->in[k] = c;
    i++; /* the copy took u's place; u moved one on */
  }
  return copies;
}

static int run_clone_masks(Graph *g, PassContext *ctx) {
  bool *rooted = calloc((size_t)g->next_node_id + 1, sizeof *rooted);
  if (!rooted)
    return diag_error(ctx->diag, g->loc, "clone_masks: out of memory");
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    bool ok = pointwise(n) && !node_fuse_group(n);
    for (int k = 0; k < n->nin && ok; k++)
      ok = n->in[k] && from_inputs(n->in[k], rooted);
    rooted[n->id] = ok;
  }
  int copies = 0, masks = 0;
  for (int i = g->nnodes - 1; i >= 0; i--) {
    Node *n = g->nodes[i]; /* copies go in after n: the nodes before i are as they were */
    if (!rooted[n->id] || !shared_mask(g, n->out[0]))
      continue;
    int c = clone_for_readers(g, n, ctx);
    if (c < 0) {
      free(rooted);
      return -1;
    }
    copies += c;
    masks++;
  }
  free(rooted);
  ctx->changes += copies;
  if (copies)
    snprintf(ctx->note, sizeof ctx->note, "%d mask nodes computed again for %d more readers",
             masks, copies);
  return 0;
}

const Pass pass_clone_masks = {
    .name = "clone_masks",
    .summary = "mask nodes computed from the inputs alone and read by several attentions "
               "are computed again for each, so each attention's kernel makes its own",
    .run = run_clone_masks,
    .fusion = true,
};
