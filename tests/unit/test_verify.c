/* Unit tests of ir/verify.c: the attribute checker, the topological sort (stability,
 * cycles, large graphs) and the verifier, each broken invariant on a graph built with the
 * builder API and then damaged the way a buggy pass would. */
#include "ir/ir.h"

#include <string.h>

static int failures;

#define FAIL(...)                                        \
  do {                                                   \
    fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);      \
    fprintf(stderr, __VA_ARGS__);                        \
    fputc('\n', stderr);                                 \
    failures++;                                          \
  } while (0)

/* rc must be 0 (want NULL) or -1 with want in the message. */
static void expect(int line, int rc, const Diag *d, const char *want) {
  if (!want && rc != 0)
    fprintf(stderr, "%s:%d: want success, got '%s'\n", __FILE__, line, d->msg), failures++;
  else if (want && (rc == 0 || !strstr(d->msg, want)))
    fprintf(stderr, "%s:%d: want error containing '%s', got %s'%s'\n", __FILE__, line, want,
            rc == 0 ? "success " : "", d->msg), failures++;
}

#define EXPECT(call, want)           \
  do {                               \
    Diag d_ = {0};                   \
    int rc_ = (call);                \
    expect(__LINE__, rc_, &d_, want); \
  } while (0)
/* `call` refers to the diag as &d_ */

static Type ty(DType dt, int rank, const int64_t *dims) {
  Type t = type_unknown();
  t.dtype = dt;
  t.shape.rank = rank;
  for (int i = 0; i < rank; i++)
    t.shape.dims[i] = (Dim){dims[i], NULL};
  return t;
}

static Node *node(Graph *g, Op op, Value **in, int nin, const char *out) {
  const char *names[1] = {out};
  return graph_add_node(g, op, in, nin, NULL, 0, names, 1);
}

/* x: f32[N, 4]; w: const f32[4, 4]; a = x @ w; b = relu(a); c = add(a, b); returns c */
static Graph *small_graph(void) {
  Graph *g = graph_new("small");
  Type tx = ty(DT_F32, 2, (int64_t[]){0, 4});
  tx.shape.dims[0] = (Dim){-1, "N"};
  Value *x = graph_add_input(g, "x", tx);
  Value *w = graph_add_const(g, "w", tensor_in_arena(g->arena, DT_F32, 2, (int64_t[]){4, 4}));
  Node *a = node(g, OP_MATMUL, (Value *[]){x, w}, 2, "a");
  Node *b = node(g, OP_RELU, a->out, 1, "b");
  Node *c = node(g, OP_ADD, (Value *[]){a->out[0], b->out[0]}, 2, "c");
  graph_add_output(g, c->out[0]);
  Diag d = {0};
  if (ir_infer(g, &d))
    FAIL("small_graph: %s", d.msg);
  return g;
}

static void test_check_attrs(void) {
  Graph *g = graph_new("attrs");
  Value *x = graph_add_input(g, "x", ty(DT_F32, 2, (int64_t[]){2, 3}));
  Attr bad_name[] = {attr_make_ints("axes", (int64_t[]){1}, 1)};
  Node *n = graph_add_node(g, OP_SOFTMAX, &x, 1, bad_name, 1, NULL, 1);
  EXPECT(ir_check_attrs(n, &d_), "softmax has no attribute 'axes' (it has: axis)");
  Attr slice_bad[] = {attr_make_ints("begin", (int64_t[]){1}, 1)};
  n = graph_add_node(g, OP_SLICE, &x, 1, slice_bad, 1, NULL, 1);
  EXPECT(ir_check_attrs(n, &d_), "(it has: starts, ends, axes, steps)");
  Attr dup[] = {attr_make_int("axis", 1), attr_make_int("axis", 0)};
  n = graph_add_node(g, OP_SOFTMAX, &x, 1, dup, 2, NULL, 1);
  EXPECT(ir_check_attrs(n, &d_), "attribute 'axis' of softmax is given twice");
  Attr kind[] = {attr_make_float("axis", 1)};
  n = graph_add_node(g, OP_SOFTMAX, &x, 1, kind, 1, NULL, 1);
  EXPECT(ir_check_attrs(n, &d_), "attribute 'axis' of softmax must be int, got float");
  n = graph_add_node(g, OP_RESHAPE, &x, 1, NULL, 0, NULL, 1);
  EXPECT(ir_check_attrs(n, &d_), "reshape needs attribute 'shape'");
  Attr ok[] = {attr_make_ints("starts", (int64_t[]){0}, 1), attr_make_ints("ends", (int64_t[]){1}, 1)};
  n = graph_add_node(g, OP_SLICE, &x, 1, ok, 2, NULL, 1);
  EXPECT(ir_check_attrs(n, &d_), NULL);
  /* the position of the node is where the error points */
  n->attrs[0].kind = AK_INT;
  n->loc = (SrcLoc){"a.gir", NULL, 7, 3};
  EXPECT(ir_check_attrs(n, &d_), "a.gir:7:3: error: attribute 'starts' of slice must be ints, got int");
  graph_free(g);
}

static const char *order_str(const Graph *g, char *buf, size_t cap) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < g->nnodes && at < cap; i++)
    at += (size_t)snprintf(buf + at, cap - at, "%s%s", i ? " " : "", g->nodes[i]->out[0]->name);
  return buf;
}

static void test_toposort(void) {
  char buf[256];
  /* Already valid: unchanged, even where another valid order exists. */
  Graph *g = graph_new("t");
  Value *x = graph_add_input(g, "x", ty(DT_F32, 1, (int64_t[]){4}));
  Node *p = node(g, OP_RELU, &x, 1, "p");
  Node *q = node(g, OP_NEG, &x, 1, "q");
  Node *r = node(g, OP_ADD, (Value *[]){p->out[0], q->out[0]}, 2, "r");
  Node *s = node(g, OP_EXP, &x, 1, "s");
  Node *t = node(g, OP_MUL, (Value *[]){r->out[0], s->out[0]}, 2, "t");
  graph_add_output(g, t->out[0]);
  EXPECT(ir_toposort(g, &d_), NULL);
  if (strcmp(order_str(g, buf, sizeof buf), "p q r s t"))
    FAIL("valid order changed: %s", buf);
  /* Out of order: only what must move moves; the rest keeps its relative order. */
  Node *perm[] = {t, r, s, p, q};
  memcpy(g->nodes, perm, sizeof perm);
  EXPECT(ir_verify(g, &d_), "%r is used by mul before it is defined");
  EXPECT(ir_toposort(g, &d_), NULL);
  if (strcmp(order_str(g, buf, sizeof buf), "s p q r t"))
    FAIL("toposort order: %s", buf);
  Diag d = {0};
  if (ir_infer(g, &d) || ir_verify(g, &d))
    FAIL("after toposort: %s", d.msg);
  /* A cycle: p = relu(t) closes p -> r -> t -> p. */
  p->in[0] = t->out[0];
  p->loc = (SrcLoc){"c.gir", NULL, 3, 3};
  EXPECT(ir_toposort(g, &d_), "c.gir:3:3: error: cycle: %p -> %r -> %t -> %p");
  EXPECT(ir_verify(g, &d_), "before it is defined");
  /* A self loop. */
  p->in[0] = p->out[0];
  EXPECT(ir_toposort(g, &d_), "cycle: %p -> %p");
  /* A value no node defines (the parser reports those): no crash, no reordering. */
  Graph *other = graph_new("o");
  Value *stray = graph_add_input(other, "stray", ty(DT_F32, 1, (int64_t[]){4}));
  p->in[0] = stray;
  EXPECT(ir_toposort(g, &d_), NULL);
  EXPECT(ir_verify(g, &d_), "%stray, used by relu, does not belong to graph t");
  graph_free(other);
  graph_free(g);

  /* A long chain given in reverse: sorting must stay fast (heap, CSR). */
  enum { LEN = 200000 };
  g = graph_new("chain");
  Value *v = graph_add_input(g, "x", ty(DT_F32, 1, (int64_t[]){1}));
  for (int i = 0; i < LEN; i++)
    v = node(g, i % 2 ? OP_RELU : OP_NEG, &v, 1, NULL)->out[0];
  graph_add_output(g, v);
  for (int i = 0; i < LEN / 2; i++) {
    Node *tmp = g->nodes[i];
    g->nodes[i] = g->nodes[LEN - 1 - i];
    g->nodes[LEN - 1 - i] = tmp;
  }
  d = (Diag){0};
  if (ir_toposort(g, &d) || ir_infer(g, &d) || ir_verify(g, &d))
    FAIL("chain: %s", d.msg);
  for (int i = 1; i < LEN; i++)
    if (g->nodes[i]->in[0] != g->nodes[i - 1]->out[0]) {
      FAIL("chain not sorted at %d", i);
      break;
    }
  graph_free(g);
}

static void test_verify(void) {
  Graph *g = small_graph();
  EXPECT(ir_verify(g, &d_), NULL);
  Node *b = g->nodes[1], *c = g->nodes[2];

  /* a wrong recorded type */
  Type saved = b->out[0]->type;
  b->out[0]->type.shape.dims[1].n = 5;
  EXPECT(ir_verify(g, &d_), "type of %b is recorded as f32[N, 5] but relu gives f32[N, 4] (in node relu -> %b)");
  b->out[0]->type = type_unknown();
  EXPECT(ir_verify(g, &d_), "%b has no type (in node relu -> %b)");
  b->out[0]->type = saved;

  /* a node from outside the DSL names its origin */
  b->origin = "onnx::Relu_3";
  b->attrs = (Attr[]){attr_make_int("alpha", 1)};
  b->nattr = 1;
  EXPECT(ir_verify(g, &d_), "relu has no attribute 'alpha'");
  EXPECT(ir_verify(g, &d_), "note: in node relu -> %b (from \"onnx::Relu_3\")");
  b->nattr = 0;
  EXPECT(ir_verify(g, &d_), NULL);

  /* node ids are unique */
  int saved_id = c->id;
  c->id = b->id;
  EXPECT(ir_verify(g, &d_), "node id 1 appears twice");
  c->id = saved_id;

  /* arity */
  c->nin = 1;
  EXPECT(ir_verify(g, &d_), "op 'add' takes 2 inputs, got 1");
  c->nin = 2;

  /* NULL inputs: only trailing optional ones */
  Value *keep = c->in[0];
  c->in[0] = NULL;
  EXPECT(ir_verify(g, &d_), "input 0 of add is missing");
  c->in[0] = keep;

  /* def / def_index consistency */
  b->out[0]->def_index = 1;
  EXPECT(ir_verify(g, &d_), "%b does not record relu output 0 as its definition");
  b->out[0]->def_index = 0;

  /* a value defined twice */
  c->out[0] = b->out[0];
  EXPECT(ir_verify(g, &d_), "%b is defined more than once");
  c->out[0] = graph_find_value(g, "c");

  /* a node dropped while still used */
  bool keep_node[3] = {true, false, true};
  graph_retain(g, keep_node, NULL);
  EXPECT(ir_verify(g, &d_), "%b, used by add, is not defined in the graph");
  graph_free(g);

  /* graph outputs must be defined */
  g = small_graph();
  bool keep2[3] = {true, true, false};
  graph_retain(g, keep2, NULL);
  EXPECT(ir_verify(g, &d_), "graph output %c is not defined");
  graph_free(g);

  /* constant data must match its type */
  g = small_graph();
  Value *w = graph_find_value(g, "w");
  w->type.shape.dims[0].n = 8;
  EXPECT(ir_verify(g, &d_), "constant %w has type f32[8, 4] but its data is f32[4, 4]");
  w->type.shape.dims[0].n = 4;
  w->data->dtype = DT_F16;
  EXPECT(ir_verify(g, &d_), "constant %w has type f32[4, 4] but its data is f16[4, 4]");
  w->data->dtype = DT_F32;
  EXPECT(ir_verify(g, &d_), NULL);

  /* an input listed that is not of the input kind, and one with no type */
  g->inputs[0]->kind = VK_CONST;
  EXPECT(ir_verify(g, &d_), "%x is listed as a graph input but is a constant");
  g->inputs[0]->kind = VK_INPUT;
  Value *u = graph_add_input(g, "u", type_unknown());
  u->loc = (SrcLoc){"u.gir", NULL, 1, 12};
  EXPECT(ir_verify(g, &d_), "u.gir:1:12: error: %u has no type");
  graph_free(g);

  /* a node position goes into the message */
  g = small_graph();
  g->nodes[0]->loc = (SrcLoc){"m.gir", "graph m() {\n  %a = %x @ %w\n}", 2, 3};
  g->nodes[0]->in[1] = g->nodes[0]->in[0];
  EXPECT(ir_verify(g, &d_), "m.gir:2:3: error: matmul: inner dims differ: f32[N, 4] @ f32[N, 4]\n    %a = %x @ %w\n    ^");
  graph_free(g);

  /* layer_norm's trailing optional bias may be NULL */
  g = graph_new("ln");
  Value *x = graph_add_input(g, "x", ty(DT_F32, 2, (int64_t[]){2, 8}));
  Value *sc = graph_add_const(g, "s", tensor_in_arena(g->arena, DT_F32, 1, (int64_t[]){8}));
  Diag d = {0};
  Value *y = graph_op(g, &d, OP_LAYER_NORM, (Value *[]){x, sc, NULL}, 3, NULL, 0, "y");
  if (!y)
    FAIL("layer_norm: %s", d.msg);
  else
    graph_add_output(g, y);
  EXPECT(ir_verify(g, &d_), NULL);
  g->nodes[0]->in[1] = NULL;
  EXPECT(ir_verify(g, &d_), "input 1 of layer_norm is missing");
  graph_free(g);

  /* split: several outputs, each checked */
  g = graph_new("sp");
  x = graph_add_input(g, "x", ty(DT_F32, 2, (int64_t[]){2, 8}));
  Attr sa[] = {attr_make_int("axis", 1), attr_make_ints("split", (int64_t[]){3, 5}, 2)};
  const char *names[] = {"lo", "hi"};
  Node *sp = graph_add_node(g, OP_SPLIT, &x, 1, sa, 2, names, 2);
  graph_add_output(g, sp->out[1]);
  d = (Diag){0};
  if (ir_infer(g, &d))
    FAIL("split: %s", d.msg);
  EXPECT(ir_verify(g, &d_), NULL);
  sp->out[1]->type.shape.dims[1].n = 3;
  EXPECT(ir_verify(g, &d_), "type of %hi is recorded as f32[2, 3] but split gives f32[2, 5]");
  graph_free(g);
}

int main(void) {
  test_check_attrs();
  test_toposort();
  test_verify();
  if (failures) {
    fprintf(stderr, "test_verify: %d failure(s)\n", failures);
    return 1;
  }
  printf("test_verify: ok\n");
  return 0;
}
