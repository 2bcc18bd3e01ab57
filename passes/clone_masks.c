/* clone_masks.c: a transformer's attention mask is computed once from the model's inputs
 * (a cast of attention_mask, an and with the causal triangle, a where that turns it into
 * 0 and -inf) and read by the attention of every layer. The attention kernel can compute
 * a mask made for it alone as it computes the scores (passes/fuse.c), at the cost of a
 * few operations per score; a mask shared by every layer instead takes kernels of its
 * own. So pointwise nodes computed from inputs and constants alone, through pointwise
 * nodes and reshapes, that are read by several pointwise nodes leading to a softmax, are
 * computed again for each reader: the copies take the original's name with .1, .2, ...
 * Nodes are visited from the last, so a copy's inputs are copied in turn.
 *
 * Cost: the readers of each value are kept as the copies are made, whether a value
 * reaches a softmax is worked out once per value and depth, and each copy is placed just
 * before its reader only when the pass ends (in one pass over the nodes), so the pass
 * takes about the size of the graph and of the copies it makes. */
#include "passes/passes-impl.h"

#include <stdlib.h>
#include <string.h>

enum { MASK_DEPTH = 4 }; /* pointwise steps from the mask to the softmax */

/* A growing list of the nodes reading a value: one entry per input that reads it, so a
 * node reading it twice comes twice in a row. */
typedef struct Readers {
  Node **node;
  int n, cap;
} Readers;

typedef struct Clone {
  Graph *g;
  PassContext *ctx;
  Node **orig;    /* the nodes as the pass found them, in order */
  int norig;
  int *pos;       /* by id of those nodes: the position */
  /* By node id, for every node: the first and last of the copies placed just before it
   * (in the order they were placed) and the next one placed before the same node; for a
   * copy, the node of orig it ends up in front of (with the copies around it). */
  int *kid, *last_kid, *sibling, *owner;
  int node_cap;
  Readers *readers;       /* by value id */
  signed char (*feeds)[MASK_DEPTH]; /* by value id and depth: -1 not known yet, 0, 1 */
  bool *output;           /* by value id: a graph output */
  int value_cap;
} Clone;

static bool alias_op(Op op) { return op_info[op].flags & OPF_ALIAS; }

static bool pointwise(const Node *n) {
  return (op_info[n->op].flags & OPF_POINTWISE) && n->nout == 1;
}

/* Room in the tables for every node and value id of the graph. */
static int grow(Clone *c) {
  if (c->g->next_node_id > c->node_cap) {
    int cap = c->g->next_node_id * 2;
    int *t[4] = {c->kid, c->last_kid, c->sibling, c->owner};
    for (int k = 0; k < 4; k++) {
      int *p = realloc(t[k], sizeof *p * (size_t)cap);
      if (!p)
        return -1;
      for (int i = c->node_cap; i < cap; i++)
        p[i] = -1;
      t[k] = p;
    }
    c->kid = t[0], c->last_kid = t[1], c->sibling = t[2], c->owner = t[3];
    c->node_cap = cap;
  }
  if (c->g->next_value_id > c->value_cap) {
    int cap = c->g->next_value_id * 2;
    Readers *r = realloc(c->readers, sizeof *r * (size_t)cap);
    if (r)
      c->readers = r;
    signed char(*f)[MASK_DEPTH] = realloc(c->feeds, sizeof *f * (size_t)cap);
    if (f)
      c->feeds = f;
    bool *o = realloc(c->output, sizeof *o * (size_t)cap);
    if (o)
      c->output = o;
    if (!r || !f || !o)
      return -1;
    memset(r + c->value_cap, 0, sizeof *r * (size_t)(cap - c->value_cap));
    memset(f + c->value_cap, -1, sizeof *f * (size_t)(cap - c->value_cap));
    memset(o + c->value_cap, 0, sizeof *o * (size_t)(cap - c->value_cap));
    c->value_cap = cap;
  }
  return 0;
}

static int add_reader(Clone *c, const Value *v, Node *u) {
  Readers *r = &c->readers[v->id];
  if (r->n == r->cap) {
    int cap = r->cap ? 2 * r->cap : 4;
    Node **p = realloc(r->node, sizeof *p * (size_t)cap);
    if (!p)
      return -1;
    r->node = p;
    r->cap = cap;
  }
  r->node[r->n++] = u;
  return 0;
}

/* Whether v reaches a softmax through at most `depth` pointwise nodes. A copy changes
 * the answer only for the value it copies, which no earlier question reached: the
 * answers are kept. */
static bool feeds_softmax(Clone *c, const Value *v, int depth) {
  signed char *known = &c->feeds[v->id][depth];
  if (*known >= 0)
    return *known;
  const Readers *r = &c->readers[v->id];
  bool yes = false;
  for (int i = 0; i < r->n && !yes; i++) {
    const Node *u = r->node[i];
    yes = u->op == OP_SOFTMAX ||
          (depth > 0 && pointwise(u) && feeds_softmax(c, u->out[0], depth - 1));
  }
  *known = yes;
  return yes;
}

/* Whether every reader of v is a pointwise node leading to a softmax, and there are at
 * least two (v no graph output). */
static bool shared_mask(Clone *c, const Value *v) {
  const Readers *r = &c->readers[v->id];
  int users = 0;
  for (int i = 0; i < r->n; i++) {
    const Node *u = r->node[i];
    if (!pointwise(u) || !feeds_softmax(c, u->out[0], MASK_DEPTH - 1))
      return false;
    users += i == 0 || r->node[i - 1] != u;
  }
  return users >= 2 && !c->output[v->id];
}

/* The node ids in front of node id `at` and the node itself, in their final order, into
 * out[*n...]: the copies placed before it in the order they came, each with the copies
 * placed before it in front of it. */
static void emit_before(const Clone *c, int at, int *stack, int *out, int *n) {
  /* stack: node ids whose copies are being emitted, each the next of its parent's */
  int depth = 0;
  stack[depth++] = at;
  int k = c->kid[at];
  for (;;) {
    if (k >= 0) {
      stack[depth++] = k; /* its own copies first */
      k = c->kid[k];
      continue;
    }
    int done = stack[--depth];
    out[(*n)++] = done;
    if (!depth)
      return;
    k = c->sibling[done];
  }
}

/* Where node u stands among the nodes that read one value: the position of the node of
 * orig it is in front of (or is), then its place among that node's copies. */
typedef struct Key {
  int pos, sub;
  Node *node;
} Key;

static int by_key(const void *pa, const void *pb) {
  const Key *a = pa, *b = pb;
  if (a->pos != b->pos)
    return a->pos < b->pos ? -1 : 1;
  return (a->sub > b->sub) - (a->sub < b->sub);
}

/* scratch: room for any node's copies and itself (their stack too) */
static Key key_of(const Clone *c, Node *u, int *scratch, int *stack) {
  int at = c->owner[u->id] >= 0 ? c->owner[u->id] : u->id, n = 0;
  emit_before(c, at, stack, scratch, &n);
  int sub = 0;
  while (scratch[sub] != u->id)
    sub++;
  return (Key){c->pos[at], sub, u};
}

/* Gives every reader of n's output but the first a copy of n of its own, placed just
 * before that reader. Returns the number of copies, or -1. */
static int clone_for_readers(Clone *c, Node *n, int *scratch, int *stack) {
  Graph *g = c->g;
  Value *v = n->out[0];
  Readers *r = &c->readers[v->id];
  Key *keys = malloc(sizeof *keys * (size_t)(r->n + 1));
  if (!keys)
    return -1;
  int nk = 0;
  for (int i = 0; i < r->n; i++)
    if (i == 0 || r->node[i - 1] != r->node[i])
      keys[nk++] = key_of(c, r->node[i], scratch, stack);
  qsort(keys, (size_t)nk, sizeof *keys, by_key);
  int copies = 0, rc = 0;
  for (int i = 1; i < nk && !rc; i++) {
    Node *u = keys[i].node;
    char suffix[16];
    snprintf(suffix, sizeof suffix, "%d", ++copies);
    Value *cv = pass_add_node(g, n->op, n->in, n->nin, n->attrs, n->nattr, v->name, suffix,
                              c->ctx->diag);
    if (!cv || grow(c)) {
      rc = cv ? diag_error(c->ctx->diag, g->loc, "clone_masks: out of memory") : -1;
      break;
    }
    Node *cn = cv->def;
    cn->origin = n->origin;
    for (int k = 0; k < cn->nin && !rc; k++)
      rc = cn->in[k] ? add_reader(c, cn->in[k], cn) : 0;
    for (int k = 0; k < u->nin && !rc; k++)
      if (u->in[k] == v) {
        u->in[k] = cv;
        rc = add_reader(c, cv, u);
      }
    /* just before u: after the copies placed before it so far */
    c->owner[cn->id] = c->owner[u->id] >= 0 ? c->owner[u->id] : u->id;
    if (c->kid[u->id] < 0)
      c->kid[u->id] = cn->id;
    else
      c->sibling[c->last_kid[u->id]] = cn->id;
    c->last_kid[u->id] = cn->id;
  }
  /* the first reader keeps n's output */
  int keep = 0;
  Node *first = nk ? keys[0].node : NULL;
  for (int i = 0; i < r->n; i++)
    if (r->node[i] == first)
      r->node[keep++] = first;
  r->n = keep;
  free(keys);
  if (rc && !c->ctx->diag->failed)
    diag_error(c->ctx->diag, g->loc, "clone_masks: out of memory");
  return rc ? -1 : copies;
}

/* g->nodes in their final order: each node of orig with the copies placed before it. */
static int place_copies(Clone *c, int *stack) {
  Graph *g = c->g;
  int *ids = malloc(sizeof *ids * (size_t)(g->nnodes + 1));
  Node **by_id = malloc(sizeof *by_id * (size_t)(g->next_node_id + 1));
  if (!ids || !by_id) {
    free(ids);
    free(by_id);
    return diag_error(c->ctx->diag, g->loc, "clone_masks: out of memory");
  }
  for (int i = 0; i < g->nnodes; i++)
    by_id[g->nodes[i]->id] = g->nodes[i];
  int n = 0;
  for (int i = 0; i < c->norig; i++)
    emit_before(c, c->orig[i]->id, stack, ids, &n);
  for (int i = 0; i < n; i++)
    g->nodes[i] = by_id[ids[i]];
  free(ids);
  free(by_id);
  return 0;
}

static void clone_free(Clone *c) {
  for (int i = 0; c->readers && i < c->value_cap; i++)
    free(c->readers[i].node);
  free(c->orig), free(c->pos), free(c->kid), free(c->last_kid), free(c->sibling);
  free(c->owner), free(c->readers), free(c->feeds), free(c->output);
}

static int run_clone_masks(Graph *g, PassContext *ctx) {
  Clone c = {.g = g, .ctx = ctx, .norig = g->nnodes};
  c.orig = malloc(sizeof *c.orig * (size_t)(g->nnodes + 1));
  c.pos = malloc(sizeof *c.pos * (size_t)(g->next_node_id + 1));
  /* by node id: rooted, a pointwise node outside fuse groups computed from inputs and
   * constants alone, through pointwise nodes and reshapes; from, whether its output is
   * (for a reshape, whether its input is) */
  bool *rooted = calloc((size_t)g->next_node_id + 1, sizeof *rooted);
  bool *from = calloc((size_t)g->next_node_id + 1, sizeof *from);
  int *scratch = NULL, *stack = NULL;
  int rc = 0, copies = 0, masks = 0;
  if (!c.orig || !c.pos || !rooted || !from || grow(&c)) {
    rc = diag_error(ctx->diag, g->loc, "clone_masks: out of memory");
    goto out;
  }
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    c.orig[i] = n;
    c.pos[n->id] = i;
    for (int k = 0; k < n->nin && !rc; k++)
      rc = n->in[k] ? add_reader(&c, n->in[k], n) : 0;
    bool ok = pointwise(n) && !node_fuse_group(n);
    for (int k = 0; k < n->nin && ok; k++)
      ok = n->in[k] && (n->in[k]->kind != VK_NODE || from[n->in[k]->def->id]);
    rooted[n->id] = ok;
    const Value *x = n->in[0];
    from[n->id] = !alias_op(n->op) ? ok : !x || x->kind != VK_NODE || from[x->def->id];
  }
  for (int i = 0; i < g->noutputs; i++)
    c.output[g->outputs[i]->id] = true;
  /* the copies in front of one node (and of the copies) stay few: each is of a reader's
   * input, within MASK_DEPTH steps of a softmax; room for any node count anyway */
  scratch = malloc(sizeof *scratch * (size_t)(g->nnodes + 1));
  stack = malloc(sizeof *stack * (size_t)(g->nnodes + 1));
  if (rc || !scratch || !stack) {
    rc = diag_error(ctx->diag, g->loc, "clone_masks: out of memory");
    goto out;
  }
  for (int i = c.norig - 1; i >= 0 && !rc; i--) {
    Node *n = c.orig[i];
    if (!rooted[n->id] || !shared_mask(&c, n->out[0]))
      continue;
    /* the copies make the graph grow: the scratch lists must hold it */
    int *s = realloc(scratch, sizeof *s * (size_t)(g->nnodes + c.readers[n->out[0]->id].n + 1));
    int *t = s ? realloc(stack, sizeof *t * (size_t)(g->nnodes + c.readers[n->out[0]->id].n + 1))
               : NULL;
    scratch = s ? s : scratch;
    stack = t ? t : stack;
    if (!s || !t) {
      rc = diag_error(ctx->diag, g->loc, "clone_masks: out of memory");
      break;
    }
    int k = clone_for_readers(&c, n, scratch, stack);
    if (k < 0)
      rc = -1;
    copies += k > 0 ? k : 0;
    masks++;
  }
  if (!rc && copies)
    rc = place_copies(&c, stack);
  ctx->changes += copies;
  if (!rc && copies)
    snprintf(ctx->note, sizeof ctx->note, "%d mask nodes computed again for %d more readers",
             masks, copies);
out:
  clone_free(&c);
  free(rooted);
  free(from);
  free(scratch);
  free(stack);
  return rc;
}

const Pass pass_clone_masks = {
    .name = "clone_masks",
    .summary = "mask nodes computed from the inputs alone and read by several attentions "
               "are computed again for each, so each attention's kernel makes its own",
    .run = run_clone_masks,
    .fusion = true,
};
