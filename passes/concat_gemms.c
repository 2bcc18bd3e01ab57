/* concat_gemms.c: matmuls that read the same input with constant 2-D weights (a
 * transformer's Q, K and V projections) become one matmul over the weights concatenated
 * along N, prepared here at compile time, and their bias adds one add of the
 * concatenated biases; a split along the last dim hands each former output its columns.
 * One GEMM of N1 + N2 + N3 columns fills the GPU better than three, and the split is a
 * view that the attention kernel reads through (passes/fuse.c), so it costs no kernel.
 *
 * Matmuls join the first of them when their weights have the same K and dtype, and
 * either each of them, like the first, has its output used only by an add of a constant
 * bias of its N (the linear layers' form), or none does. The new nodes take the place of
 * the first old matmul. */
#include "passes/passes-impl.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_JOIN = 16 };

/* Empty weights join nothing: their columns would be a split of size 0, and with K = 0
 * concat_const would divide by it. */
static bool const_weights(const Node *m) {
  const Value *w = m->in[1];
  return pass_linear_layer(m) && w->data && m->in[0]->type.shape.rank >= 1 &&
         dtype_is_float(w->type.dtype) && tensor_numel(w->data) > 0;
}

/* The add that is the only user of m's output, with a constant bias of m's N: the bias,
 * and the add through *add. NULL when there is none. */
static const Value *bias_add(const Graph *g, const Node *m, const Node **add) {
  const Value *y = m->out[0];
  const Node *user = NULL;
  int uses = 0;
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i]->nin; k++)
      if (g->nodes[i]->in[k] == y) {
        uses++;
        user = g->nodes[i];
      }
  for (int i = 0; i < g->noutputs; i++)
    uses += g->outputs[i] == y ? 2 : 0;
  const Value *b = uses == 1 ? node_other_input(user, y) : NULL;
  if (!b || user->op != OP_ADD || b->kind != VK_CONST || !b->data ||
      b->type.dtype != y->type.dtype || tensor_numel(b->data) != m->in[1]->type.shape.dims[1].n ||
      b->type.shape.rank < 1 ||
      b->type.shape.dims[b->type.shape.rank - 1].n != m->in[1]->type.shape.dims[1].n)
    return NULL;
  *add = user;
  return b;
}

/* Whether v is a graph output: its name is the model's interface, which a split output
 * would rename. */
static bool is_output(const Graph *g, const Value *v) {
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i] == v)
      return true;
  return false;
}

/* Moves the last k nodes of g to position at, keeping their order. */
static void move_last_to(Graph *g, int k, int at) {
  Node *tmp[3];
  memcpy(tmp, g->nodes + g->nnodes - k, sizeof *tmp * (size_t)k);
  memmove(g->nodes + at + k, g->nodes + at, sizeof *g->nodes * (size_t)(g->nnodes - k - at));
  memcpy(g->nodes + at, tmp, sizeof *tmp * (size_t)k);
}

/* A constant of rank 1 or 2: the tensors ts[0..n) side by side along the last dim. */
static Value *concat_const(Graph *g, const Value *const *ts, int n, const char *name) {
  const Tensor *t0 = ts[0]->data;
  int64_t rows = t0->rank == 2 ? t0->dims[0] : 1, cols = 0;
  for (int i = 0; i < n; i++)
    cols += tensor_numel(ts[i]->data) / rows;
  int64_t dims[2] = {rows, cols};
  Tensor *t = tensor_in_arena(g->arena, t0->dtype, t0->rank == 2 ? 2 : 1,
                              t0->rank == 2 ? dims : dims + 1);
  size_t es = dtype_size(t0->dtype);
  char *dst = t->data;
  for (int64_t r = 0; r < rows; r++)
    for (int i = 0; i < n; i++) {
      int64_t c = tensor_numel(ts[i]->data) / rows;
      memcpy(dst, (const char *)ts[i]->data->data + (size_t)(r * c) * es, (size_t)c * es);
      dst += (size_t)c * es;
    }
  char buf[256];
  snprintf(buf, sizeof buf, "%s", name);
  Value *v = graph_add_const(g, graph_find_value(g, buf) ? NULL : buf, t);
  v->init = CI_DATA;
  return v;
}

/* Joins ms[0..n) into one matmul at node position first. */
static int join(Graph *g, Node **ms, int n, bool biased, int first, PassContext *ctx) {
  const Value *ws[MAX_JOIN], *bs[MAX_JOIN];
  const Node *adds[MAX_JOIN];
  int64_t split[MAX_JOIN];
  for (int i = 0; i < n; i++) {
    ws[i] = ms[i]->in[1];
    split[i] = ws[i]->type.shape.dims[1].n;
    bs[i] = biased ? bias_add(g, ms[i], &adds[i]) : NULL;
  }
  char name[256];
  snprintf(name, sizeof name, "%s.concat", ws[0]->name);
  Value *w = concat_const(g, ws, n, name);
  Value *x = ms[0]->in[0];
  Value *in[2] = {x, w};
  snprintf(name, sizeof name, "%s.concat", ms[0]->out[0]->name);
  const char *yn[1] = {graph_find_value(g, name) ? NULL : name};
  Node *mm = graph_add_node(g, OP_MATMUL, in, 2, NULL, 0, yn, 1);
  Value *y = mm->out[0];
  int added = 1;
  if (biased) {
    snprintf(name, sizeof name, "%s.concat", bs[0]->name);
    Value *b = concat_const(g, bs, n, name);
    Value *ain[2] = {y, b};
    snprintf(name, sizeof name, "%s.concat", adds[0]->out[0]->name);
    const char *an[1] = {graph_find_value(g, name) ? NULL : name};
    y = graph_add_node(g, OP_ADD, ain, 2, NULL, 0, an, 1)->out[0];
    added++;
  }
  Attr attrs[2] = {attr_make_int("axis", -1), attr_make_ints("split", split, n)};
  const char *sn[MAX_JOIN] = {0};
  char names[MAX_JOIN][256];
  for (int i = 0; i < n; i++) {
    const Value *old = biased ? adds[i]->out[0] : ms[i]->out[0];
    snprintf(names[i], sizeof names[i], "%s.split", old->name);
    sn[i] = graph_find_value(g, names[i]) ? NULL : names[i];
  }
  Node *sp = graph_add_node(g, OP_SPLIT, &y, 1, attrs, 2, sn, n);
  added++;
  move_last_to(g, added, first);
  bool *keep = malloc((size_t)g->next_node_id + 1);
  if (!keep)
    return diag_error(ctx->diag, g->loc, "concat_gemms: out of memory");
  memset(keep, 1, (size_t)g->next_node_id + 1);
  for (int i = 0; i < n; i++) {
    Value *old = biased ? adds[i]->out[0] : ms[i]->out[0];
    graph_replace_uses(g, old, sp->out[i]);
    keep[ms[i]->id] = false;
    if (biased)
      keep[adds[i]->id] = false;
  }
  bool *keep_const = malloc((size_t)g->next_value_id + 1);
  if (!keep_const) {
    free(keep);
    return diag_error(ctx->diag, g->loc, "concat_gemms: out of memory");
  }
  graph_retain(g, keep, NULL);
  /* the weights and biases joined: gone unless something else reads them */
  memset(keep_const, 1, (size_t)g->next_value_id + 1);
  for (int i = 0; i < n; i++) {
    keep_const[ws[i]->id] = graph_count_uses(g, ws[i]) > 0;
    if (biased)
      keep_const[bs[i]->id] = graph_count_uses(g, bs[i]) > 0;
  }
  memset(keep, 1, (size_t)g->next_node_id + 1);
  graph_retain(g, keep, keep_const);
  free(keep);
  free(keep_const);
  ctx->changes += n;
  return 0;
}

static int run_concat_gemms(Graph *g, PassContext *ctx) {
  int joined = 0, gemms = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *m = g->nodes[i];
    const Node *add;
    if (!const_weights(m))
      continue;
    bool biased = bias_add(g, m, &add) != NULL;
    Node *ms[MAX_JOIN];
    int n = 0;
    for (int j = i; j < g->nnodes && n < MAX_JOIN; j++) {
      Node *o = g->nodes[j];
      if (!const_weights(o) || o->in[0] != m->in[0] ||
          o->in[1]->type.dtype != m->in[1]->type.dtype ||
          o->in[1]->type.shape.dims[0].n != m->in[1]->type.shape.dims[0].n ||
          (bias_add(g, o, &add) != NULL) != biased ||
          is_output(g, biased ? add->out[0] : o->out[0]))
        continue;
      ms[n++] = o;
    }
    if (n < 2)
      continue;
    if (join(g, ms, n, biased, i, ctx))
      return -1;
    joined++;
    gemms += n;
  }
  if (joined && ir_infer(g, ctx->diag))
    return -1;
  if (joined)
    snprintf(ctx->note, sizeof ctx->note, "%d matmuls reading one input became %d", gemms,
             joined);
  return 0;
}

const Pass pass_concat_gemms = {
    .name = "concat_gemms",
    .summary = "matmuls that read one input with constant weights (Q, K and V) become one "
               "over the weights concatenated at compile time, and a split",
    .run = run_concat_gemms,
    .fusion = true,
};
