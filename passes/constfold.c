/* constfold.c: constant folding. A node whose inputs are all constants is evaluated by
 * the reference executor, the same code that defines what the op means, so folding can
 * never disagree with running the graph. Its outputs become constants in place: same
 * Value, same name and type, so every user sees the change without rewiring. Nodes are
 * visited in topological order, so a folded result makes its users foldable in the same
 * run. The constants that fed folded nodes are left for dce to remove. Results past
 * FOLD_MAX_ELEMENTS stay nodes, except a gather whose indices repeat over their first
 * dim, which folds as one row (fold_gather_row). */
#include "passes/passes-impl.h"

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

/* A gather of constants whose result is too big to fold but whose indices repeat along
 * their first dim (BERT's token types at batch > 1: one row of zeros expanded over the
 * batch) is the gather of one row, folded while it has at most FOLD_MAX_ROW_ELEMENTS
 * (as a constant it costs its bytes once; as a node, a kernel every inference), then an
 * expand to n's shape, which simplify lets the broadcasting nodes after it skip. n
 * becomes that expand; the folded gather goes before it. Returns 1 when rewritten, 0
 * when n is no such gather, -1 on an error. */
enum { FOLD_MAX_ROW_ELEMENTS = 1 << 20 };

static int fold_gather_row(Graph *g, Node *n, PassContext *ctx) {
  const Tensor *idx = n->nin == 2 ? n->in[1]->data : NULL;
  const Type *yt = &n->out[0]->type;
  int64_t numel = shape_numel(&yt->shape);
  if (n->op != OP_GATHER || !idx || idx->rank < 1 || idx->dims[0] < 2 ||
      !shape_is_static(&yt->shape) || numel / idx->dims[0] > FOLD_MAX_ROW_ELEMENTS)
    return 0;
  size_t row = tensor_nbytes(idx) / (size_t)idx->dims[0];
  for (int64_t r = 1; r < idx->dims[0]; r++)
    if (memcmp((const char *)idx->data + row * (size_t)r, idx->data, row))
      return 0;
  int64_t dims[IR_MAX_RANK];
  memcpy(dims, idx->dims, sizeof *dims * (size_t)idx->rank);
  dims[0] = 1;
  Tensor *first = tensor_in_arena(g->arena, idx->dtype, idx->rank, dims);
  memcpy(first->data, idx->data, row);
  int64_t shape[IR_MAX_RANK];
  for (int i = 0; i < yt->shape.rank; i++)
    shape[i] = yt->shape.dims[i].n;
  char name[512];
  snprintf(name, sizeof name, "%s.row", n->in[1]->name);
  Value *in[2] = {n->in[0], graph_add_const(g, graph_find_value(g, name) ? NULL : name, first)};
  Value *gathered = pass_insert_before(g, n, OP_GATHER, in, 2, n->attrs, n->nattr,
                                       n->out[0]->name, "row", ctx->diag);
  if (!gathered)
    return -1;
  int r = fold_node(g, gathered->def, ctx);
  if (r <= 0) /* one row of a gather the executor can run: declining it is gpucc's bug */
    return r < 0 ? -1 : diag_error(ctx->diag, n->loc, "constfold: internal error: the "
                                   "executor declined one row of %%%s", n->out[0]->name);
  Attr a = attr_make_ints("shape", shape, yt->shape.rank);
  pass_rewrite(g, n, OP_EXPAND, &gathered, 1, &a, 1);
  return 1;
}

static int run_constfold(Graph *g, PassContext *ctx) {
  bool *keep = malloc(((size_t)g->next_node_id + 1) * sizeof *keep);
  if (!keep)
    return diag_error(ctx->diag, g->loc, "constfold: out of memory");
  for (int i = 0; i < g->next_node_id; i++)
    keep[i] = true;
  int folded = 0, too_big = 0, costly = 0, declined = 0;
  double spent = 0; /* ir_eval_work of what this run evaluated */
  /* make_const only appends to g->consts; g->nodes stays as it is until graph_retain. */
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (!all_inputs_const(n))
      continue;
    double work = ir_eval_work(n, NULL);
    if (!(work <= IR_FOLD_NODE_WORK && work <= IR_FOLD_TOTAL_WORK - spent)) {
      costly++;
      continue;
    }
    spent += work;
    bool small = outputs_small(n);
    int r = small ? fold_node(g, n, ctx) : fold_gather_row(g, n, ctx);
    if (r == 0) {
      if (small)
        declined++;
      else
        too_big++;
      continue;
    }
    if (r > 0 && !small) {
      /* the row's gather, a new node now folded, sits at position i; n (the expand,
       * kept) after it */
      bool *grown = realloc(keep, ((size_t)g->next_node_id + 1) * sizeof *keep);
      if (!grown)
        r = diag_error(ctx->diag, g->loc, "constfold: out of memory");
      else
        keep = grown;
    }
    if (r < 0) {
      free(keep);
      return -1;
    }
    keep[g->nodes[i]->id] = false;
    i += !small;
    folded++;
  }
  graph_retain(g, keep, NULL);
  free(keep);
  ctx->changes += folded;
  /* "not folded: " and a clause for each reason there was */
  char big[80] = "", cost[80] = "", rej[80] = "";
  if (too_big)
    snprintf(big, sizeof big, "%d node(s) with more than %d output elements", too_big,
             FOLD_MAX_ELEMENTS);
  if (costly)
    snprintf(cost, sizeof cost, "%s%d too costly to evaluate at compile time",
             too_big ? ", " : "", costly);
  if (declined)
    snprintf(rej, sizeof rej, "%s%d the executor rejected", too_big || costly ? ", " : "",
             declined);
  if (too_big || costly || declined)
    snprintf(ctx->note, sizeof ctx->note, "not folded: %s%s%s", big, cost, rej);
  return 0;
}

const Pass pass_constfold = {
    .name = "constfold",
    .summary = "evaluate nodes whose inputs are all constants into constants",
    .run = run_constfold,
};
