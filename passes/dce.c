/* dce.c: dead-code elimination. A node is live when one of its outputs feeds a live node
 * or is a graph output; everything else goes, and so do constants nothing live reads.
 * Because nodes are in topological order, one walk from the last node to the first sees
 * every user of a value before the value's definition, so liveness settles in one pass.
 * Graph inputs always stay: they are the graph's interface, used or not. */
#include "passes/passes.h"

#include <stdlib.h>

static int run_dce(Graph *g, PassContext *ctx) {
  bool *live_value = calloc((size_t)g->next_value_id + 1, sizeof *live_value);
  bool *keep_node = calloc((size_t)g->next_node_id + 1, sizeof *keep_node);
  if (!live_value || !keep_node) {
    free(live_value);
    free(keep_node);
    return diag_error(ctx->diag, g->loc, "dce: out of memory");
  }
  for (int i = 0; i < g->noutputs; i++)
    live_value[g->outputs[i]->id] = true;
  for (int i = g->nnodes - 1; i >= 0; i--) {
    Node *n = g->nodes[i];
    for (int j = 0; j < n->nout && !keep_node[n->id]; j++)
      keep_node[n->id] = live_value[n->out[j]->id];
    if (!keep_node[n->id])
      continue;
    for (int j = 0; j < n->nin; j++)
      if (n->in[j])
        live_value[n->in[j]->id] = true;
  }
  int removed = 0;
  for (int i = 0; i < g->nnodes; i++)
    removed += !keep_node[g->nodes[i]->id];
  for (int i = 0; i < g->nconsts; i++)
    removed += !live_value[g->consts[i]->id];
  /* live_value doubles as the constants' keep mask: a constant is kept iff it is read. */
  graph_retain(g, keep_node, live_value);
  ctx->changes += removed;
  free(live_value);
  free(keep_node);
  return 0;
}

const Pass pass_dce = {
    .name = "dce",
    .summary = "remove nodes whose results are never used, and constants nothing reads",
    .run = run_dce,
};
