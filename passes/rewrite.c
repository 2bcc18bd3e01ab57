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

int users_build(const Graph *g, Users *u) {
  int nid = g->next_value_id;
  size_t nedges = 0;
  for (int i = 0; i < g->nnodes; i++)
    nedges += (size_t)g->nodes[i]->nin;
  *u = (Users){calloc((size_t)nid + 2, sizeof *u->start), malloc((nedges + 1) * sizeof *u->at),
               calloc((size_t)nid + 1, sizeof *u->outputs), nid};
  if (!u->start || !u->at || !u->outputs) {
    users_free(u);
    return -1;
  }
  /* counts at start[id + 2], prefix sums, then each reader placed at start[id + 1]++ */
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i]->nin; k++)
      if (g->nodes[i]->in[k])
        u->start[g->nodes[i]->in[k]->id + 2]++;
  for (int id = 2; id <= nid + 1; id++)
    u->start[id] += u->start[id - 1];
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i]->nin; k++)
      if (g->nodes[i]->in[k])
        u->at[u->start[g->nodes[i]->in[k]->id + 1]++] = i;
  for (int i = 0; i < g->noutputs; i++)
    u->outputs[g->outputs[i]->id]++;
  return 0;
}

void users_free(Users *u) {
  free(u->start);
  free(u->at);
  free(u->outputs);
  memset(u, 0, sizeof *u);
}

const int *users_of(const Users *u, const Value *v, int *n) {
  *n = u->start[v->id + 1] - u->start[v->id];
  return u->at + u->start[v->id];
}

int users_count(const Users *u, const Value *v) {
  return u->start[v->id + 1] - u->start[v->id] + u->outputs[v->id];
}
