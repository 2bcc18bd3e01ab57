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
static const Value *bias_add(const Graph *g, const Users *u, const Node *m, const Node **add) {
  const Value *y = m->out[0];
  int uses;
  const int *at = users_of(u, y, &uses);
  const Node *user = uses == 1 && !u->outputs[y->id] ? g->nodes[at[0]] : NULL;
  const Value *b = user ? node_other_input(user, y) : NULL;
  if (!b || user->op != OP_ADD || b->kind != VK_CONST || !b->data ||
      b->type.dtype != y->type.dtype || tensor_numel(b->data) != m->in[1]->type.shape.dims[1].n ||
      b->type.shape.rank < 1 ||
      b->type.shape.dims[b->type.shape.rank - 1].n != m->in[1]->type.shape.dims[1].n)
    return NULL;
  *add = user;
  return b;
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

/* A matmul that may join others: its input, its weights' K and type, and whether its
 * output is only a bias add's (the add and bias, else NULL). */
typedef struct Cand {
  Node *m;
  const Node *add;
  const Value *bias;
  int at; /* position in g->nodes */
} Cand;

static int cand_key_cmp(const Cand *a, const Cand *b) {
  const Value *wa = a->m->in[1], *wb = b->m->in[1];
  if (a->m->in[0]->id != b->m->in[0]->id)
    return a->m->in[0]->id < b->m->in[0]->id ? -1 : 1;
  if (wa->type.shape.dims[0].n != wb->type.shape.dims[0].n)
    return wa->type.shape.dims[0].n < wb->type.shape.dims[0].n ? -1 : 1;
  if (wa->type.dtype != wb->type.dtype)
    return wa->type.dtype < wb->type.dtype ? -1 : 1;
  return (a->bias != NULL) - (b->bias != NULL);
}

static int by_key_then_position(const void *pa, const void *pb) {
  const Cand *a = pa, *b = pb;
  int c = cand_key_cmp(a, b);
  return c ? c : (a->at > b->at) - (a->at < b->at);
}

/* A join: its matmuls' candidates (consecutive in the sorted list), and the node its new
 * nodes go in front of. */
typedef struct Join {
  int from, n;
  const Node *before;
  Node *nodes[3]; /* the matmul, the add (or NULL), the split */
} Join;

/* Makes join j's nodes: one matmul over the weights side by side, one add of the biases
 * side by side (when biased), and a split; repl[old value id] = its split output. */
static int make_join(Graph *g, const Cand *c, Join *j, Value **repl) {
  const Value *ws[MAX_JOIN], *bs[MAX_JOIN];
  int64_t split[MAX_JOIN];
  bool biased = c[0].bias != NULL;
  for (int i = 0; i < j->n; i++) {
    ws[i] = c[i].m->in[1];
    split[i] = ws[i]->type.shape.dims[1].n;
    bs[i] = c[i].bias;
  }
  char name[256];
  snprintf(name, sizeof name, "%s.concat", ws[0]->name);
  Value *w = concat_const(g, ws, j->n, name);
  Value *in[2] = {c[0].m->in[0], w};
  snprintf(name, sizeof name, "%s.concat", c[0].m->out[0]->name);
  const char *yn[1] = {graph_find_value(g, name) ? NULL : name};
  Node *mm = graph_add_node(g, OP_MATMUL, in, 2, NULL, 0, yn, 1);
  Value *y = mm->out[0];
  j->nodes[0] = mm;
  j->nodes[1] = NULL;
  if (biased) {
    snprintf(name, sizeof name, "%s.concat", bs[0]->name);
    Value *b = concat_const(g, bs, j->n, name);
    Value *ain[2] = {y, b};
    snprintf(name, sizeof name, "%s.concat", c[0].add->out[0]->name);
    const char *an[1] = {graph_find_value(g, name) ? NULL : name};
    j->nodes[1] = graph_add_node(g, OP_ADD, ain, 2, NULL, 0, an, 1);
    y = j->nodes[1]->out[0];
  }
  Attr attrs[2] = {attr_make_int("axis", -1), attr_make_ints("split", split, j->n)};
  const char *sn[MAX_JOIN] = {0};
  char names[MAX_JOIN][256];
  for (int i = 0; i < j->n; i++) {
    const Value *old = biased ? c[i].add->out[0] : c[i].m->out[0];
    snprintf(names[i], sizeof names[i], "%s.split", old->name);
    sn[i] = graph_find_value(g, names[i]) ? NULL : names[i];
  }
  Node *sp = graph_add_node(g, OP_SPLIT, &y, 1, attrs, 2, sn, j->n);
  j->nodes[2] = sp;
  for (int i = 0; i < j->n; i++)
    repl[(biased ? c[i].add->out[0] : c[i].m->out[0])->id] = sp->out[i];
  return 0;
}

/* Matmuls join the first of them: the first matmul at or after each matmul (in node
 * order) with its input, K, type and bias form, up to MAX_JOIN of them, where that
 * leaves two or more; a matmul that cannot join itself (its output the graph's) starts
 * such joins again as long as they form. The candidates are sorted by that key once and
 * the joins all made before the graph is rewritten, in one pass over it: the same joins
 * as one at a time, in the nodes' order, without looking over the graph for each. */
static int run_concat_gemms(Graph *g, PassContext *ctx) {
  Users u;
  int nc = 0, njoins = 0, gemms = 0, rc = -1, nid = g->next_value_id;
  Cand *cand = malloc(sizeof *cand * (size_t)(g->nnodes + 1));
  Join *joins = malloc(sizeof *joins * (size_t)(g->nnodes + 1));
  int *bucket_at = malloc(sizeof *bucket_at * (size_t)(g->nnodes + 1));
  int *bucket_end = malloc(sizeof *bucket_end * (size_t)(g->nnodes + 1));
  Value **repl = calloc((size_t)g->next_value_id + 1, sizeof *repl);
  bool *joined = calloc((size_t)g->next_node_id + 1, sizeof *joined);
  if (users_build(g, &u)) {
    free(cand), free(joins), free(bucket_at), free(bucket_end), free(repl), free(joined);
    return diag_error(ctx->diag, g->loc, "concat_gemms: out of memory");
  }
  if (!cand || !joins || !bucket_at || !bucket_end || !repl || !joined)
    goto oom;
  for (int i = 0; i < g->nnodes; i++) {
    Node *m = g->nodes[i];
    const Node *add = NULL;
    if (!const_weights(m))
      continue;
    const Value *b = bias_add(g, &u, m, &add);
    /* a graph output's name is the model's interface, which a split output would rename */
    if (!u.outputs[(b ? add->out[0] : m->out[0])->id])
      cand[nc++] = (Cand){m, b ? add : NULL, b, i};
  }
  qsort(cand, (size_t)nc, sizeof *cand, by_key_then_position);
  /* bucket_at[first of a key]: its first candidate not joined yet; bucket_end[k]: the end
   * of k's key */
  for (int k = nc - 1; k >= 0; k--) {
    bucket_at[k] = k;
    bucket_end[k] = k + 1 < nc && !cand_key_cmp(&cand[k], &cand[k + 1]) ? bucket_end[k + 1] : k + 1;
  }
  for (int i = 0; i < g->nnodes; i++) {
    Node *m = g->nodes[i];
    const Node *add = NULL;
    if (!const_weights(m) || joined[m->id])
      continue; /* a matmul joined already is gone */
    const Value *b = bias_add(g, &u, m, &add);
    Cand key = {m, add, b, -1};
    /* the first candidate of m's key (binary search), its bucket's cursor */
    int lo = 0, hi = nc;
    while (lo < hi) {
      int mid = lo + (hi - lo) / 2;
      if (cand_key_cmp(&cand[mid], &key) < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo == nc || cand_key_cmp(&cand[lo], &key) != 0)
      continue;
    int *at = &bucket_at[lo], end = bucket_end[lo];
    for (;;) {
      while (*at < end && cand[*at].at < i)
        ++*at; /* joined already (or left alone: no others after it) */
      int n = end - *at < MAX_JOIN ? end - *at : MAX_JOIN;
      if (n < 2)
        break;
      joins[njoins++] = (Join){*at, n, m, {0}};
      for (int k = 0; k < n; k++)
        joined[cand[*at + k].m->id] = true;
      *at += n;
      gemms += n;
      if (cand[*at - n].m == m)
        break; /* m joined: it is gone */
    }
  }
  if (!njoins) {
    rc = 0;
    goto out;
  }
  /* the new nodes, in the order of the joins, as one at a time would name them */
  for (int k = 0; k < njoins; k++)
    make_join(g, cand + joins[k].from, &joins[k], repl);
  /* their readers read the splits; the joined matmuls and adds go; the new nodes go in
   * front of the node each join was made at */
  bool *gone = calloc((size_t)g->next_node_id + 1, sizeof *gone);
  int *first_join = malloc(sizeof *first_join * (size_t)(g->next_node_id + 1));
  int *next_join = malloc(sizeof *next_join * (size_t)(njoins + 1));
  Node **order = malloc(sizeof *order * (size_t)(g->nnodes + 1));
  if (!gone || !first_join || !next_join || !order) {
    free(gone), free(first_join), free(next_join), free(order);
    goto oom;
  }
  for (int k = 0; k < njoins; k++)
    for (int i = 0; i < joins[k].n; i++) {
      const Cand *c = &cand[joins[k].from + i];
      gone[c->m->id] = true;
      if (c->add)
        gone[c->add->id] = true;
    }
  for (int id = 0; id < g->next_node_id; id++)
    first_join[id] = -1;
  for (int k = njoins - 1; k >= 0; k--) {
    next_join[k] = first_join[joins[k].before->id];
    first_join[joins[k].before->id] = k;
  }
  int n = 0, old_count = g->nnodes;
  for (int k = 0; k < njoins; k++)
    old_count -= 2 + (joins[k].nodes[1] != NULL); /* the new nodes are at the end */
  for (int i = 0; i < old_count; i++) {
    Node *nd = g->nodes[i];
    for (int k = first_join[nd->id]; k >= 0; k = next_join[k])
      for (int e = 0; e < 3; e++)
        if (joins[k].nodes[e])
          order[n++] = joins[k].nodes[e];
    if (!gone[nd->id])
      order[n++] = nd;
  }
  memcpy(g->nodes, order, sizeof *order * (size_t)n);
  g->nnodes = n;
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i]->nin; k++)
      if (g->nodes[i]->in[k] && g->nodes[i]->in[k]->id < nid && repl[g->nodes[i]->in[k]->id])
        g->nodes[i]->in[k] = repl[g->nodes[i]->in[k]->id];
  /* the weights and biases joined: gone unless something else reads them */
  int *uses = calloc((size_t)g->next_value_id + 1, sizeof *uses);
  bool *keep_const = malloc((size_t)g->next_value_id + 1);
  bool *keep = malloc((size_t)g->next_node_id + 1);
  if (!uses || !keep_const || !keep) {
    free(gone), free(first_join), free(next_join), free(order), free(uses), free(keep_const);
    free(keep);
    goto oom;
  }
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i]->nin; k++)
      if (g->nodes[i]->in[k])
        uses[g->nodes[i]->in[k]->id]++;
  for (int i = 0; i < g->noutputs; i++)
    uses[g->outputs[i]->id]++;
  memset(keep_const, 1, (size_t)g->next_value_id + 1);
  memset(keep, 1, (size_t)g->next_node_id + 1);
  for (int k = 0; k < njoins; k++)
    for (int i = 0; i < joins[k].n; i++) {
      const Cand *c = &cand[joins[k].from + i];
      keep_const[c->m->in[1]->id] = uses[c->m->in[1]->id] > 0;
      if (c->bias)
        keep_const[c->bias->id] = uses[c->bias->id] > 0;
    }
  graph_retain(g, keep, keep_const);
  free(gone), free(first_join), free(next_join), free(order), free(uses), free(keep_const);
  free(keep);
  ctx->changes += gemms;
  if (ir_infer(g, ctx->diag))
    goto out;
  snprintf(ctx->note, sizeof ctx->note, "%d matmuls reading one input became %d", gemms,
           njoins);
  rc = 0;
  goto out;
oom:
  rc = diag_error(ctx->diag, g->loc, "concat_gemms: out of memory");
out:
  users_free(&u);
  free(cand), free(joins), free(bucket_at), free(bucket_end), free(repl), free(joined);
  return rc;
}

const Pass pass_concat_gemms = {
    .name = "concat_gemms",
    .summary = "matmuls that read one input with constant weights (Q, K and V) become one "
               "over the weights concatenated at compile time, and a split",
    .run = run_concat_gemms,
    .fusion = true,
};
