/* constfold.c: constant folding. A node whose inputs are all constants is evaluated by
 * the reference executor, the same code that defines what the op means, so folding can
 * never disagree with running the graph. Its outputs become constants in place: same
 * Value, same name and type, so every user sees the change without rewiring. Nodes are
 * visited in topological order, so a folded result makes its users foldable in the same
 * run. The constants that fed folded nodes are left for dce to remove. */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

/* Folded results print inline; past this many elements the text form stops being
 * something a person reads, and the node is cheaper to keep than to print. */
enum { FOLD_MAX_ELEMENTS = 65536 };

static bool all_inputs_const(const Node *n) {
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] && n->in[i]->kind != VK_CONST)
      return false;
  return n->nin > 0;
}

static bool outputs_small(const Node *n) {
  for (int i = 0; i < n->nout; i++) {
    int64_t numel = shape_numel(&n->out[i]->type.shape);
    if (numel < 0 || numel > FOLD_MAX_ELEMENTS)
      return false;
  }
  return true;
}

static bool tensor_has_type(const Tensor *t, const Type *ty) {
  if (t->dtype != ty->dtype || t->rank != ty->shape.rank)
    return false;
  for (int i = 0; i < t->rank; i++)
    if (ty->shape.dims[i].sym || ty->shape.dims[i].n != t->dims[i])
      return false;
  return true;
}

/* Turns output v into a constant holding t (copied into the graph's arena). */
static void make_const(Graph *g, Value *v, const Tensor *t) {
  Tensor *data = tensor_in_arena(g->arena, t->dtype, t->rank, t->dims);
  memcpy(data->data, t->data, tensor_nbytes(t));
  graph_make_const(g, v, data);
}

/* Evaluates n and, on success, turns its outputs into constants. Returns 1 if folded,
 * 0 if the executor declined, -1 on an internal error. */
static int fold_node(Graph *g, Node *n, PassContext *ctx) {
  Tensor **in = calloc((size_t)n->nin + 1, sizeof *in);
  Tensor **out = calloc((size_t)n->nout + 1, sizeof *out);
  if (!in || !out) {
    free(in);
    free(out);
    return diag_error(ctx->diag, g->loc, "constfold: out of memory");
  }
  for (int i = 0; i < n->nin; i++)
    in[i] = n->in[i] ? n->in[i]->data : NULL;
  Diag ignored = {0};
  int status = ir_eval_node(n, in, out, &ignored) == 0 ? 1 : 0;
  for (int i = 0; i < n->nout && status == 1; i++)
    if (!out[i] || !tensor_has_type(out[i], &n->out[i]->type)) {
      char want[128];
      diag_error(ctx->diag, n->loc,
                 "constfold: the executor's result for %%%s of %s does not have its type %s",
                 n->out[i]->name, op_info[n->op].name,
                 type_str(&n->out[i]->type, want, sizeof want));
      status = -1;
    }
  /* Outputs are converted only after all of them were checked, so a failure leaves the
   * node whole. */
  for (int i = 0; i < n->nout && status == 1; i++)
    make_const(g, n->out[i], out[i]);
  for (int i = 0; i < n->nout; i++)
    tensor_free(out[i]);
  free(in);
  free(out);
  return status;
}

static int run_constfold(Graph *g, PassContext *ctx) {
  bool *keep = malloc(((size_t)g->next_node_id + 1) * sizeof *keep);
  if (!keep)
    return diag_error(ctx->diag, g->loc, "constfold: out of memory");
  for (int i = 0; i < g->next_node_id; i++)
    keep[i] = true;
  int folded = 0, too_big = 0, declined = 0;
  /* make_const only appends to g->consts; g->nodes stays as it is until graph_retain. */
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (!all_inputs_const(n))
      continue;
    if (!outputs_small(n)) {
      too_big++;
      continue;
    }
    int r = fold_node(g, n, ctx);
    if (r < 0) {
      free(keep);
      return -1;
    }
    if (r == 0) {
      declined++;
      continue;
    }
    keep[n->id] = false;
    folded++;
  }
  graph_retain(g, keep, NULL);
  free(keep);
  ctx->changes += folded;
  if (too_big && declined)
    snprintf(ctx->note, sizeof ctx->note,
             "not folded: %d node(s) with more than %d output elements, %d the executor "
             "rejected",
             too_big, FOLD_MAX_ELEMENTS, declined);
  else if (too_big)
    snprintf(ctx->note, sizeof ctx->note,
             "not folded: %d node(s) with more than %d output elements", too_big,
             FOLD_MAX_ELEMENTS);
  else if (declined)
    snprintf(ctx->note, sizeof ctx->note, "not folded: %d node(s) the executor rejected",
             declined);
  return 0;
}

const Pass pass_constfold = {
    .name = "constfold",
    .summary = "evaluate nodes whose inputs are all constants into constants",
    .run = run_constfold,
};
