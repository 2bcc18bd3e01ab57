/* rewrite.c: the helpers of passes-impl.h. */
#include "passes/passes-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool pass_is_output(const Graph *g, const Value *v) {
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i] == v)
      return true;
  return false;
}

bool pass_same_shape(const Shape *a, const Shape *b) {
  if (a->rank != b->rank)
    return false;
  for (int i = 0; i < a->rank; i++)
    if (!dim_eq(a->dims[i], b->dims[i]))
      return false;
  return true;
}

bool pass_along_last(const Value *v, const Value *y) {
  const Shape *b = &v->type.shape, *s = &y->type.shape;
  if (b->rank < 1 || b->rank > s->rank || !dim_eq(b->dims[b->rank - 1], s->dims[s->rank - 1]))
    return false;
  for (int i = 0; i < b->rank - 1; i++)
    if (b->dims[i].sym || b->dims[i].n != 1)
      return false;
  return true;
}

bool pass_single_element(const Value *v) { return shape_numel(&v->type.shape) == 1; }

bool pass_all_ones(const Value *v) {
  if (!v || v->kind != VK_CONST || !v->data || !dtype_is_float(v->type.dtype))
    return false;
  int64_t k = tensor_numel(v->data);
  size_t es = dtype_size(v->type.dtype);
  for (int64_t i = 0; i < k; i++)
    if (dtype_load_f64(v->type.dtype, (const char *)v->data->data + (size_t)i * es) != 1)
      return false;
  return true;
}

Node *pass_sole_user(const Graph *g, const Value *v) {
  Node *u = NULL;
  if (pass_is_output(g, v))
    return NULL;
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i]->nin; k++)
      if (g->nodes[i]->in[k] == v) {
        if (u && u != g->nodes[i])
          return NULL;
        u = g->nodes[i];
      }
  return u;
}

bool pass_plain_matmul(const Node *n) {
  return n->op == OP_MATMUL && !attr_int(n, "transpose_b") && attr_float(n, "scale") == 1;
}

bool pass_linear_layer(const Node *n) {
  return pass_plain_matmul(n) && n->in[1]->kind == VK_CONST && n->in[1]->type.shape.rank == 2;
}

void pass_rewrite(Graph *g, Node *n, Op op, Value *const *in, int nin, const Attr *attrs,
                  int nattr) {
  Value **ins = arena_alloc(g->arena, sizeof *ins * (size_t)nin);
  memcpy(ins, in, sizeof *ins * (size_t)nin);
  /* never NULL, like graph_add_node's: code may memcpy from it */
  Attr *as = arena_alloc(g->arena, sizeof *as * (size_t)(nattr ? nattr : 1));
  for (int i = 0; i < nattr; i++) {
    as[i] = attrs[i];
    as[i].name = arena_strdup(g->arena, attrs[i].name);
    if (as[i].kind == AK_STRING)
      as[i].s = arena_strdup(g->arena, attrs[i].s);
    if (as[i].kind == AK_INTS)
      as[i].ints = arena_memdup(g->arena, attrs[i].ints, sizeof *as[i].ints * (size_t)as[i].n);
  }
  n->op = op;
  n->in = ins;
  n->nin = nin;
  n->attrs = as;
  n->nattr = nattr;
}

Value *pass_add_node(Graph *g, Op op, Value **in, int nin, const Attr *attrs, int nattr,
                     const char *like, const char *suffix, Diag *d) {
  char name[512];
  snprintf(name, sizeof name, "%s.%s", like, suffix);
  const char *names[1] = {graph_find_value(g, name) ? NULL : name};
  Node *n = graph_add_node(g, op, in, nin, attrs, nattr, names, 1);
  Type t;
  if (ir_infer_node(n, &t, d))
    return NULL;
  n->out[0]->type = t;
  return n->out[0];
}

Value *pass_insert_before(Graph *g, const Node *before, Op op, Value **in, int nin,
                          const Attr *attrs, int nattr, const char *like, const char *suffix,
                          Diag *d) {
  Value *v = pass_add_node(g, op, in, nin, attrs, nattr, like, suffix, d);
  if (!v)
    return NULL;
  int at = 0;
  while (g->nodes[at] != before)
    at++;
  memmove(g->nodes + at + 1, g->nodes + at, sizeof *g->nodes * (size_t)(g->nnodes - 1 - at));
  g->nodes[at] = v->def;
  return v;
}

Value *pass_add_const(Graph *g, const char *like, const char *suffix, Tensor *t) {
  char name[512];
  snprintf(name, sizeof name, "%s.%s", like, suffix);
  for (int k = 1; graph_find_value(g, name); k++)
    snprintf(name, sizeof name, "%s.%s%d", like, suffix, k);
  return graph_add_const(g, name, t);
}

bool pass_reshape_attr(const Value *x, const Type *to, int64_t *shape) {
  const Shape *s = &to->shape;
  for (int i = 0; i < s->rank; i++) {
    Dim d = s->dims[i];
    if (!d.sym && d.n == 0)
      return false; /* 0 would copy x's dim */
    shape[i] = !d.sym ? d.n
               : i < x->type.shape.rank && dim_eq(x->type.shape.dims[i], d) ? 0
                                                                              : -1;
  }
  /* inference on a probe node decides whether the attribute gives back `to` */
  Attr a = attr_make_ints("shape", shape, s->rank);
  Value *in[1] = {(Value *)x};
  Node probe = {.op = OP_RESHAPE, .nin = 1, .nout = 1, .in = in, .nattr = 1, .attrs = &a};
  Type t;
  Diag ignored = {0};
  return !ir_infer_node(&probe, &t, &ignored) && type_eq(&t, to);
}

/* ---------------------------------------------------------------- the editor */

struct EditUse {
  Node *node;
  int slot, next;
};

static void *edit_grow(void *p, size_t n, size_t elem) {
  void *q = realloc(p, n * elem);
  if (!q)
    abort(); /* like arena_alloc: out of memory is not an error a pass can report */
  return q;
}

/* Room in the tables for every value and node id of the graph. */
static void edit_room(Edit *e) {
  Graph *g = e->g;
  if (g->next_value_id > e->nval) {
    int cap = 2 * g->next_value_id + 16;
    e->uses = edit_grow(e->uses, (size_t)cap, sizeof *e->uses);
    e->outs = edit_grow(e->outs, (size_t)cap, sizeof *e->outs);
    e->head = edit_grow(e->head, (size_t)cap, sizeof *e->head);
    for (int i = e->nval; i < cap; i++)
      e->uses[i] = e->outs[i] = 0, e->head[i] = -1;
    e->nval = cap;
  }
  if (g->next_node_id > e->nnode) {
    int cap = 2 * g->next_node_id + 16;
    e->kid = edit_grow(e->kid, (size_t)cap, sizeof *e->kid);
    e->last_kid = edit_grow(e->last_kid, (size_t)cap, sizeof *e->last_kid);
    e->sibling = edit_grow(e->sibling, (size_t)cap, sizeof *e->sibling);
    for (int i = e->nnode; i < cap; i++)
      e->kid[i] = e->last_kid[i] = e->sibling[i] = -1;
    e->nnode = cap;
  }
}

/* Input k of n reads v: one use more. */
static void edit_note(Edit *e, Node *n, int k) {
  const Value *v = n->in[k];
  if (!v)
    return;
  if (e->nuse == e->capuse) {
    e->capuse = 2 * e->capuse + 64;
    e->use = edit_grow(e->use, (size_t)e->capuse, sizeof *e->use);
  }
  e->use[e->nuse] = (EditUse){n, k, e->head[v->id]};
  e->head[v->id] = e->nuse++;
  e->uses[v->id]++;
}

void pass_edit_begin(Edit *e, Graph *g) {
  *e = (Edit){.g = g, .norig = g->nnodes};
  edit_room(e);
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i]->nin; k++)
      edit_note(e, g->nodes[i], k);
  for (int i = 0; i < g->noutputs; i++) {
    e->uses[g->outputs[i]->id]++;
    e->outs[g->outputs[i]->id]++;
  }
}

int pass_rewrite_rounds(Graph *g, PassContext *ctx, int max_rounds,
                        int (*rule)(Edit *e, Node *n, Diag *d)) {
  int changed = 0;
  bool again = true;
  for (int round = 0; again && round < max_rounds; round++) {
    again = false;
    Edit e;
    pass_edit_begin(&e, g);
    int rc = 0;
    for (int i = 0; i < e.norig && rc >= 0; i++) {
      rc = rule(&e, g->nodes[i], ctx->diag);
      changed += rc > 0;
      again = again || rc > 0;
    }
    pass_edit_end(&e);
    if (rc < 0)
      return -1;
    PassContext quiet = {.diag = ctx->diag, .target = ctx->target};
    if (again && pass_dce.run(g, &quiet))
      return -1;
  }
  return changed;
}

void pass_edit_end(Edit *e) {
  Graph *g = e->g;
  if (g->nnodes > e->norig) {
    /* each node of the start, with the nodes added before it in front: a walk that
     * goes down the first added node's own added ones first */
    Node **by_id = edit_grow(NULL, (size_t)e->nnode, sizeof *by_id);
    Node **order = edit_grow(NULL, (size_t)g->nnodes + 1, sizeof *order);
    int *stack = edit_grow(NULL, (size_t)g->nnodes + 1, sizeof *stack);
    for (int i = 0; i < g->nnodes; i++)
      by_id[g->nodes[i]->id] = g->nodes[i];
    int n = 0;
    for (int i = 0; i < e->norig; i++) {
      int depth = 0, k = e->kid[g->nodes[i]->id];
      stack[depth++] = g->nodes[i]->id;
      for (;;) {
        if (k >= 0) {
          stack[depth++] = k;
          k = e->kid[k];
          continue;
        }
        int done = stack[--depth];
        order[n++] = by_id[done];
        if (!depth)
          break;
        k = e->sibling[done];
      }
    }
    memcpy(g->nodes, order, sizeof *order * (size_t)n);
    free(by_id);
    free(order);
    free(stack);
  }
  free(e->uses), free(e->outs), free(e->head), free(e->use);
  free(e->kid), free(e->last_kid), free(e->sibling);
  memset(e, 0, sizeof *e);
}

int pass_edit_count(const Edit *e, const Value *v) { return e->uses[v->id]; }

bool pass_edit_is_output(const Edit *e, const Value *v) { return e->outs[v->id] > 0; }

Node *pass_edit_next_user(Edit *e, const Value *v, int *cursor) {
  int *link = *cursor < 0 ? &e->head[v->id] : &e->use[*cursor].next;
  while (*link >= 0) {
    EditUse *u = &e->use[*link];
    if (u->slot < u->node->nin && u->node->in[u->slot] == v) {
      *cursor = *link;
      return u->node;
    }
    *link = u->next; /* stale: dropped */
  }
  return NULL;
}

Node *pass_edit_sole_user(Edit *e, const Value *v) {
  if (e->outs[v->id])
    return NULL;
  int c = -1;
  Node *u = pass_edit_next_user(e, v, &c), *w;
  while (u && (w = pass_edit_next_user(e, v, &c)))
    if (w != u)
      return NULL;
  return u;
}

void pass_edit_replace_uses(Edit *e, Value *old, Value *repl) {
  if (old == repl)
    return;
  for (int c = e->head[old->id]; c >= 0;) {
    EditUse *u = &e->use[c];
    int next = u->next;
    if (u->slot < u->node->nin && u->node->in[u->slot] == old) {
      u->node->in[u->slot] = repl;
      e->uses[old->id]--;
      edit_note(e, u->node, u->slot);
    }
    c = next;
  }
  e->head[old->id] = -1;
  if (e->outs[old->id]) {
    for (int i = 0; i < e->g->noutputs; i++)
      if (e->g->outputs[i] == old) {
        e->g->outputs[i] = repl;
        e->uses[repl->id]++, e->outs[repl->id]++;
      }
    e->uses[old->id] -= e->outs[old->id];
    e->outs[old->id] = 0;
  }
}

void pass_edit_set_input(Edit *e, Node *n, int k, Value *v) {
  if (n->in[k])
    e->uses[n->in[k]->id]--;
  n->in[k] = v;
  edit_note(e, n, k);
}

void pass_edit_rewrite(Edit *e, Node *n, Op op, Value *const *in, int nin, const Attr *attrs,
                       int nattr) {
  for (int k = 0; k < n->nin; k++)
    if (n->in[k])
      e->uses[n->in[k]->id]--;
  pass_rewrite(e->g, n, op, in, nin, attrs, nattr);
  for (int k = 0; k < n->nin; k++)
    edit_note(e, n, k);
}

/* Notes the uses of node n, just added at the end of g->nodes, and places it before
 * `before` when the edit ends. */
static void edit_place(Edit *e, const Node *before, Node *n) {
  edit_room(e);
  for (int k = 0; k < n->nin; k++)
    edit_note(e, n, k);
  if (e->kid[before->id] < 0)
    e->kid[before->id] = n->id;
  else
    e->sibling[e->last_kid[before->id]] = n->id;
  e->last_kid[before->id] = n->id;
}

Value *pass_edit_insert_before(Edit *e, const Node *before, Op op, Value **in, int nin,
                               const Attr *attrs, int nattr, const char *like,
                               const char *suffix, Diag *d) {
  Value *v = pass_add_node(e->g, op, in, nin, attrs, nattr, like, suffix, d);
  Node *n = e->g->nodes[e->g->nnodes - 1];
  if (!v) {
    edit_room(e);
    for (int k = 0; k < n->nin; k++)
      edit_note(e, n, k);
    return NULL;
  }
  edit_place(e, before, n);
  return v;
}

Node *pass_edit_insert_node_before(Edit *e, const Node *before, Op op, Value **in, int nin,
                                   const Attr *attrs, int nattr, int nout, const char *like,
                                   const char *suffix, Diag *d) {
  char (*names)[512] = calloc((size_t)nout + 1, sizeof *names);
  const char **np = calloc((size_t)nout + 1, sizeof *np);
  Type *types = calloc((size_t)nout + 1, sizeof *types);
  if (!names || !np || !types)
    abort(); /* like arena_alloc */
  for (int k = 0; k < nout; k++) {
    snprintf(names[k], sizeof names[k], "%s.%s%d", like, suffix, k);
    np[k] = graph_find_value(e->g, names[k]) ? NULL : names[k];
  }
  Node *n = graph_add_node(e->g, op, in, nin, attrs, nattr, np, nout);
  int rc = ir_infer_node(n, types, d);
  for (int k = 0; k < nout && !rc; k++)
    n->out[k]->type = types[k];
  free(names), free(np), free(types);
  edit_place(e, before, n);
  return rc ? NULL : n;
}

/* ---------------------------------------------------------------- constants made once */

Value *pass_made_get(const Made *m, const Value *src) {
  return src->id < m->n ? m->by_source[src->id] : NULL;
}

Value *pass_made_put(Made *m, const Value *src, Value *made) {
  if (src->id >= m->n) {
    int n = 2 * src->id + 16;
    m->by_source = edit_grow(m->by_source, (size_t)n, sizeof *m->by_source);
    memset(m->by_source + m->n, 0, sizeof *m->by_source * (size_t)(n - m->n));
    m->n = n;
  }
  return m->by_source[src->id] = made;
}

void pass_made_free(Made *m) {
  free(m->by_source);
  memset(m, 0, sizeof *m);
}
