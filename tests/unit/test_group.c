/* Unit tests of ir/group.c, the recognizer of fuse groups: the plan it gives each kind
 * (the roles the fuse pass, the verifier and codegen rely on), why it refuses (the reason
 * the fuse pass's report counts), and the limits it checks only when given them. */
#include "ir/ir.h"

#include <string.h>

static int failures;

#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                     \
    }                                                                 \
  } while (0)

static Type f32(int rank, const int64_t *dims) {
  Type t = type_unknown();
  t.dtype = DT_F32;
  t.shape.rank = rank;
  for (int i = 0; i < rank; i++)
    t.shape.dims[i] = (Dim){dims[i], NULL};
  return t;
}

static Node *node(Graph *g, Op op, Value **in, int nin, const char *out) {
  const char *names[1] = {out};
  return graph_add_node(g, op, in, nin, NULL, 0, names, 1);
}

static void infer(Graph *g) {
  Diag d = {0};
  if (ir_infer(g, &d))
    fprintf(stderr, "infer: %s\n", d.msg), failures++;
}

/* y = relu(x @ w + b + r): a GEMM with cuBLASLt's bias, residual and relu; as pointwise,
 * no plan. */
static void test_gemm(void) {
  Graph *g = graph_new("gemm");
  Value *x = graph_add_input(g, "x", f32(2, (int64_t[]){4, 8}));
  Value *r = graph_add_input(g, "r", f32(2, (int64_t[]){4, 8}));
  Value *w = graph_add_const(g, "w", tensor_in_arena(g->arena, DT_F32, 2, (int64_t[]){8, 8}));
  Value *b = graph_add_const(g, "b", tensor_in_arena(g->arena, DT_F32, 1, (int64_t[]){8}));
  Node *m = node(g, OP_MATMUL, (Value *[]){x, w}, 2, "m");
  Node *a = node(g, OP_ADD, (Value *[]){m->out[0], b}, 2, "a");
  Node *s = node(g, OP_ADD, (Value *[]){a->out[0], r}, 2, "s");
  Node *y = node(g, OP_RELU, s->out, 1, "y");
  graph_add_output(g, y->out[0]);
  infer(g);
  Users u;
  CHECK(!users_build(g, &u));
  const Node *members[] = {m, a, s, y};
  GroupPlan p;
  char why[256];
  CHECK(group_guess_kind(members, 4) == GROUP_GEMM);
  CHECK(!group_plan(g, &u, members, 4, GROUP_NONE, &group_limits_default, &p, why, sizeof why));
  CHECK(p.kind == GROUP_GEMM && p.anchor == m && p.root == y && p.out == y->out[0]);
  CHECK(p.nepilogue == 3 && p.epilogue[0] == a && p.epilogue[2] == y);
  CHECK(p.bias == b && p.residual == r && p.relu && !p.gelu && !p.side && !p.nview);
  CHECK(p.nin == 4 && p.in[0] == x && p.in[1] == w && p.in[2] == b && p.in[3] == r);
  group_plan_free(&p);
  CHECK(group_plan(g, &u, members, 4, GROUP_POINTWISE, NULL, &p, why, sizeof why));
  CHECK(p.fail == GROUP_FAIL_SHAPE && strstr(why, "node 0 (matmul) is not pointwise"));
  group_plan_free(&p);
  /* a relu straight after the matmul: no epilogue cuBLASLt applies, no GEMM */
  const Node *two[] = {m, y};
  CHECK(group_plan(g, &u, two, 2, GROUP_GEMM, NULL, &p, why, sizeof why));
  CHECK(strstr(why, "(relu) is no add to the matmul"));
  group_plan_free(&p);
  users_free(&u);
  graph_free(g);
}

/* A transpose whose output a relu in its group and a neg after it read: an epilogue that
 * stores the transpose's output too; a chain that reads too many values, or has too many
 * nodes, for the limits given, and fits without them. */
static void test_epilogue_and_limits(void) {
  Graph *g = graph_new("epi");
  Value *x = graph_add_input(g, "x", f32(2, (int64_t[]){4, 8}));
  Node *t = node(g, OP_TRANSPOSE, &x, 1, "t");
  Node *e = node(g, OP_RELU, t->out, 1, "e");
  Node *o = node(g, OP_NEG, t->out, 1, "o");
  Value *v = e->out[0];
  Node *chain[9];
  int n = 0;
  chain[n++] = e;
  for (int i = 0; i < 8; i++) {
    char name[16];
    snprintf(name, sizeof name, "i%d", i);
    Value *in = graph_add_input(g, name, f32(2, (int64_t[]){8, 4}));
    Node *add = node(g, OP_ADD, (Value *[]){v, in}, 2, name + 1);
    v = add->out[0];
    if (n < 9)
      chain[n++] = add;
  }
  graph_add_output(g, v);
  graph_add_output(g, o->out[0]);
  infer(g);
  Users u;
  CHECK(!users_build(g, &u));
  const Node *members[10] = {t};
  for (int i = 0; i < n; i++)
    members[i + 1] = chain[i];
  GroupPlan p;
  char why[256];
  CHECK(!group_plan(g, &u, members, 2, GROUP_NONE, &group_limits_default, &p, why, sizeof why));
  CHECK(p.kind == GROUP_EPILOGUE && p.anchor == t && p.side == t->out[0] && p.nepilogue == 1);
  group_plan_free(&p);
  /* relu then 8 adds of 8 inputs: the epilogue reads 8 values from outside */
  CHECK(group_plan(g, &u, members, 10, GROUP_NONE, &group_limits_default, &p, why, sizeof why));
  CHECK(p.fail == GROUP_FAIL_INPUTS && strstr(why, "8 values"));
  group_plan_free(&p);
  CHECK(!group_plan(g, &u, members, 10, GROUP_NONE, NULL, &p, why, sizeof why));
  group_plan_free(&p);
  GroupLimits few = group_limits_default;
  few.nodes = 2;
  CHECK(group_plan(g, &u, members + 1, 3, GROUP_POINTWISE, &few, &p, why, sizeof why));
  CHECK(p.fail == GROUP_FAIL_NODES);
  group_plan_free(&p);
  /* the relu alone with the first add, without the transpose: pointwise, no side */
  CHECK(!group_plan(g, &u, members + 1, 2, GROUP_NONE, &few, &p, why, sizeof why));
  CHECK(p.kind == GROUP_POINTWISE && !p.anchor && !p.side && p.nepilogue == 2 && p.nin == 2);
  group_plan_free(&p);
  users_free(&u);
  graph_free(g);
}

/* A node of one output and integer-list attribute `attr` (NULL: none). */
static Node *node_ints(Graph *g, Op op, Value *in, const char *attr, const int64_t *v, int n,
                       const char *out) {
  const char *names[1] = {out};
  Attr a = attr_make_ints(attr ? attr : "", v, n);
  return graph_add_node(g, op, &in, 1, &a, attr ? 1 : 0, names, 1);
}

/* Views (ir/view.c) through GQA's repeat of kv heads: unsqueeze, expand (a dim of stride
 * 0), reshape merging it into the heads (one dim of div 3: head h reads kv head h / 3),
 * which a transpose carries and a reshape keeps only whole; a slice's offset and stride. */
static void test_views(void) {
  Graph *g = graph_new("views");
  Value *x = graph_add_input(g, "x", f32(4, (int64_t[]){2, 4, 5, 8}));
  Node *u = node_ints(g, OP_UNSQUEEZE, x, "axes", (int64_t[]){2}, 1, "u");
  Node *e = node_ints(g, OP_EXPAND, u->out[0], "shape", (int64_t[]){2, 4, 3, 5, 8}, 5, "e");
  Node *r = node_ints(g, OP_RESHAPE, e->out[0], "shape", (int64_t[]){2, 12, 5, 8}, 4, "r");
  Node *t = node_ints(g, OP_TRANSPOSE, r->out[0], "perm", (int64_t[]){0, 1, 3, 2}, 4, "t");
  Node *rows = node_ints(g, OP_RESHAPE, r->out[0], "shape", (int64_t[]){2, 12, 40}, 3, "rows");
  Node *all = node_ints(g, OP_RESHAPE, r->out[0], "shape", (int64_t[]){24, 5, 8}, 3, "all");
  Node *back = node_ints(g, OP_RESHAPE, r->out[0], "shape", (int64_t[]){2, 4, 3, 5, 8}, 5, "back");
  Node *sl = graph_add_node(g, OP_SLICE, &x, 1,
                            (Attr[]){attr_make_ints("starts", (int64_t[]){1}, 1),
                                     attr_make_ints("ends", (int64_t[]){5}, 1),
                                     attr_make_ints("axes", (int64_t[]){3}, 1),
                                     attr_make_ints("steps", (int64_t[]){2}, 1)},
                            4, (const char *[]){"sl"}, 1);
  graph_add_output(g, t->out[0]);
  infer(g);
  View v0, v1, v2, v3, w;
  view_init(&v0, x);
  CHECK(!view_through(e, 0, &v0, &w)); /* an expand is no alias */
  CHECK(view_through(u, 0, &v0, &v1) && view_through_reads(e, 0, &v1, &v2));
  CHECK(v2.rank == 5 && v2.stride[1] == 40 && v2.stride[2] == 0 && !view_divides(&v2));
  CHECK(view_through(r, 0, &v2, &v3) && v3.rank == 4 && v3.dims[1] == 12 &&
        v3.stride[1] == 40 && v3.div[1] == 3 && view_divides(&v3));
  CHECK(view_through(t, 0, &v3, &w) && w.div[1] == 3 && w.stride[2] == 1 && w.stride[3] == 8);
  CHECK(view_through(rows, 0, &v3, &w) && w.div[1] == 3 && w.stride[2] == 1 && !w.div[2]);
  CHECK(!view_through(all, 0, &v3, &w));  /* the repeated heads merged with the batch */
  CHECK(!view_through(back, 0, &v3, &w)); /* split again: not kept whole */
  int64_t n, ld;
  CHECK(!view_rows(&v3, &n, &ld));
  CHECK(view_through_reads(sl, 0, &v0, &w) && w.offset == 1 && w.stride[3] == 2 &&
        w.dims[3] == 2);
  graph_free(g);
}

static void test_names(void) {
  for (int k = GROUP_NONE + 1; k < GROUP_KIND_COUNT; k++)
    CHECK(group_kind_from_name(group_kind_name((GroupKind)k)) == (GroupKind)k);
  CHECK(group_kind_from_name("fancy") == GROUP_NONE && group_kind_from_name(NULL) == GROUP_NONE);
  CHECK(!strcmp(group_kind_name(GROUP_ATTENTION), "attention"));
}

int main(void) {
  test_gemm();
  test_epilogue_and_limits();
  test_views();
  test_names();
  if (failures)
    fprintf(stderr, "%d failures\n", failures);
  return failures != 0;
}
