/* Unit tests of ir/infer.c: the shape rule of every op category, on graphs built with the
 * builder API, including symbolic dims and broadcasting, and the messages of bad nodes.
 * Types are written as text ("f32[N, 784]") and compared as text, so a failure prints
 * both sides. */
#include "ir/ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static Graph *g;

/* "f32[N, 784]" -> Type; symbols are interned by graph_add_input. */
static Type parse_type(const char *s) {
  Type t = type_unknown();
  char name[16];
  size_t k = strcspn(s, "[");
  memcpy(name, s, k);
  name[k] = 0;
  if (dtype_from_name(name, &t.dtype)) {
    fprintf(stderr, "test bug: bad type '%s'\n", s);
    exit(2);
  }
  t.shape.rank = 0;
  const char *p = s + k + 1;
  while (*p && *p != ']') {
    while (*p == ' ' || *p == ',')
      p++;
    if (*p >= '0' && *p <= '9') {
      t.shape.dims[t.shape.rank++] = (Dim){strtoll(p, (char **)&p, 10), NULL};
    } else {
      size_t n = strcspn(p, ",]");
      t.shape.dims[t.shape.rank++] = (Dim){-1, graph_intern(g, arena_strndup(g->arena, p, n))};
      p += n;
    }
  }
  return t;
}

static Value *in(const char *type) { return graph_add_input(g, NULL, parse_type(type)); }

/* Runs inference on a fresh node; want is the expected type of output `which`, or "!msg"
 * for an error whose message contains msg. */
static void check_node(int line, Op op, Value **ins, int nin, const Attr *attrs, int nattr,
                       int nout, int which, const char *want) {
  Node *n = graph_add_node(g, op, ins, nin, attrs, nattr, NULL, nout);
  Type out[8];
  Diag d = {0};
  int rc = ir_infer_node(n, out, &d);
  char got[sizeof d.msg + 2];
  if (rc)
    snprintf(got, sizeof got, "!%s", d.msg);
  else
    type_str(&out[which], got, sizeof got);
  bool ok = want[0] == '!' ? rc != 0 && strstr(d.msg, want + 1) != NULL
                           : rc == 0 && !strcmp(got, want);
  if (!ok) {
    fprintf(stderr, "%s:%d: %s: want '%s', got '%s'\n", __FILE__, line, op_info[op].name,
            want, got);
    failures++;
  }
}

#define V(...) ((Value *[]){__VA_ARGS__})
#define NV(...) (int)(sizeof((Value *[]){__VA_ARGS__}) / sizeof(Value *))
#define A(...) ((Attr[]){__VA_ARGS__})
#define NA(...) (int)(sizeof((Attr[]){__VA_ARGS__}) / sizeof(Attr))
#define I64S(...) ((int64_t[]){__VA_ARGS__})
#define INTS(name, ...) attr_make_ints(name, I64S(__VA_ARGS__), (int)(sizeof(I64S(__VA_ARGS__)) / sizeof(int64_t)))
#define INT(name, v) attr_make_int(name, v)
/* CHECK(op, inputs..., want) without attributes; CHECKA with them. */
#define CHECK(op, ins, want) check_node(__LINE__, op, ins, (int)(sizeof(ins) / sizeof(Value *)), NULL, 0, 1, 0, want)
#define CHECKA(op, ins, attrs, want) \
  check_node(__LINE__, op, ins, (int)(sizeof(ins) / sizeof(Value *)), attrs, (int)(sizeof(attrs) / sizeof(Attr)), 1, 0, want)

static void test_unary(void) {
  Value *x = in("f32[N, 3]"), *i = in("i32[4]"), *b = in("bool[2]");
  CHECK(OP_RELU, V(x), "f32[N, 3]");
  CHECK(OP_NEG, V(i), "i32[4]");
  CHECK(OP_EXP, V(x), "f32[N, 3]");
  CHECK(OP_EXP, V(i), "!exp: needs a floating-point type, got i32");
  CHECK(OP_NOT, V(b), "bool[2]");
  CHECK(OP_NOT, V(x), "!not: needs a bool input, got f32");
  CHECKA(OP_CAST, V(x), A(attr_make_string("to", "f16")), "f16[N, 3]");
  CHECKA(OP_CAST, V(x), A(attr_make_string("to", "float")), "!cast: 'to' must be an element type");
  CHECKA(OP_GELU, V(x), A(attr_make_string("approximate", "tanh")), "f32[N, 3]");
  CHECKA(OP_GELU, V(x), A(attr_make_string("approximate", "fast")), "!approximate must be");
  CHECKA(OP_LEAKY_RELU, V(x), A(attr_make_float("alpha", 0.2)), "f32[N, 3]");
  CHECK(OP_RELU, V(x, x), "!op 'relu' takes 1 input, got 2");
}

static void test_binary(void) {
  Value *a = in("f32[N, 1, 3]"), *b = in("f32[4, 1]"), *h = in("f16[4, 1]");
  Value *n = in("f32[N]"), *m = in("f32[M]"), *s3 = in("f32[3]"), *one = in("f32[1]");
  Value *sc = in("f32[]"), *bl = in("bool[N, 1]"), *i = in("i32[3]");
  CHECK(OP_ADD, V(a, b), "f32[N, 4, 3]");
  CHECK(OP_MUL, V(b, a), "f32[N, 4, 3]");
  CHECK(OP_ADD, V(n, n), "f32[N]");
  CHECK(OP_ADD, V(n, one), "f32[N]");
  CHECK(OP_SUB, V(one, n), "f32[N]");
  CHECK(OP_ADD, V(n, sc), "f32[N]");
  CHECK(OP_ADD, V(sc, sc), "f32[]");
  CHECK(OP_ADD, V(n, m), "!add: cannot broadcast f32[N] and f32[M]");
  CHECK(OP_ADD, V(n, s3), "!cannot broadcast f32[N] and f32[3]");
  CHECK(OP_ADD, V(s3, in("f32[4]")), "!cannot broadcast");
  CHECK(OP_ADD, V(b, h), "!add: operand types differ: f32 and f16");
  CHECK(OP_ADD, V(a, b, b), "!op 'add' takes 2 inputs, got 3");
  CHECK(OP_LESS, V(a, b), "bool[N, 4, 3]");
  CHECK(OP_EQUAL, V(i, i), "bool[3]");
  CHECK(OP_AND, V(bl, bl), "bool[N, 1]");
  CHECK(OP_AND, V(n, n), "!and: needs bool inputs, got f32");
  CHECK(OP_POW, V(i, i), "!pow: needs a floating-point type");
  CHECK(OP_MAX, V(i, i), "i32[3]");
  CHECK(OP_WHERE, V(bl, s3, one), "f32[N, 3]");
  CHECK(OP_WHERE, V(n, s3, s3), "!where: condition must be bool, got f32");
  CHECK(OP_WHERE, V(bl, s3, i), "!where: operand types differ: f32 and i32");
  CHECK(OP_WHERE, V(bl, in("f32[2, 4]"), s3), "!where: cannot broadcast");
}

static void test_matmul(void) {
  Value *x = in("f32[N, 784]"), *w1 = in("f32[784, 128]"), *w2 = in("f32[128, 10]");
  CHECK(OP_MATMUL, V(x, w1), "f32[N, 128]");
  CHECK(OP_MATMUL, V(x, w2), "!matmul: inner dims differ: f32[N, 784] @ f32[128, 10]");
  CHECK(OP_MATMUL, V(in("f32[3]"), in("f32[3, 4]")), "f32[4]");
  CHECK(OP_MATMUL, V(in("f32[2, 3]"), in("f32[3]")), "f32[2]");
  CHECK(OP_MATMUL, V(in("f32[3]"), in("f32[3]")), "f32[]");
  CHECK(OP_MATMUL, V(in("f32[K]"), in("f32[B, K, 5]")), "f32[B, 5]");
  CHECK(OP_MATMUL, V(in("f32[B, 1, 2, 3]"), in("f32[5, 3, 4]")), "f32[B, 5, 2, 4]");
  CHECK(OP_MATMUL, V(in("f32[B, 2, K]"), in("f32[B, K, 4]")), "f32[B, 2, 4]");
  CHECK(OP_MATMUL, V(in("f32[2, 2, 3]"), in("f32[4, 3, 4]")), "!cannot broadcast batch dims");
  CHECK(OP_MATMUL, V(in("f16[2, 3]"), in("f32[3, 4]")), "!operand types differ: f16 and f32");
  CHECK(OP_MATMUL, V(in("bool[2, 3]"), in("bool[3, 4]")), "!bool");
  CHECK(OP_MATMUL, V(in("f32[]"), in("f32[3, 4]")), "!at least 1-D");
  CHECK(OP_MATMUL, V(in("i8[2, 3]"), in("i8[3, 4]")), "i8[2, 4]");
}

static void test_reductions(void) {
  Value *x = in("f32[2, 3, 4]"), *s = in("f32[N, S, 64]"), *i = in("i32[2, 3]");
  CHECKA(OP_REDUCE_SUM, V(x), A(INTS("axes", 1, -1), INT("keepdims", 0)), "f32[2]");
  CHECKA(OP_REDUCE_SUM, V(x), A(INTS("axes", 1, -1)), "f32[2, 1, 1]");
  CHECK(OP_REDUCE_MAX, V(x), "f32[1, 1, 1]");
  CHECKA(OP_REDUCE_MAX, V(x), A(INT("keepdims", 0)), "f32[]");
  CHECKA(OP_REDUCE_SUM, V(s), A(INTS("axes", -1)), "f32[N, S, 1]");
  CHECKA(OP_REDUCE_SUM, V(x), A(INTS("axes", 1, -2)), "!reduce_sum: axis -2 appears twice");
  CHECKA(OP_REDUCE_SUM, V(x), A(INTS("axes", 3)), "!reduce_sum: axis 3 is out of range for f32[2, 3, 4]");
  CHECKA(OP_REDUCE_SUM, V(x), A(INTS("axes", -4)), "!out of range");
  CHECK(OP_REDUCE_MEAN, V(i), "!reduce_mean: needs a floating-point type, got i32");
  CHECKA(OP_REDUCE_PROD, V(i), A(INTS("axes", 0)), "i32[1, 3]");
  CHECKA(OP_ARGMAX, V(x), A(INT("axis", 1), INT("keepdims", 0)), "i64[2, 4]");
  CHECKA(OP_ARGMAX, V(s), A(INT("axis", -1)), "i64[N, S, 1]");
  CHECKA(OP_ARGMAX, V(x), A(INT("axis", 3)), "!argmax: axis 3 is out of range");
  CHECK(OP_SOFTMAX, V(s), "f32[N, S, 64]");
  CHECKA(OP_LOG_SOFTMAX, V(s), A(INT("axis", 1)), "f32[N, S, 64]");
  CHECKA(OP_SOFTMAX, V(i), A(INT("axis", 1)), "!softmax: needs a floating-point type");
  CHECKA(OP_SOFTMAX, V(x), A(INT("axis", -4)), "!softmax: axis -4 is out of range");
  Value *g64 = in("f32[64]"), *g32 = in("f32[32]"), *g164 = in("f32[1, 64]");
  CHECK(OP_LAYER_NORM, V(s, g64), "f32[N, S, 64]");
  CHECK(OP_LAYER_NORM, V(s, g64, g64), "f32[N, S, 64]");
  CHECK(OP_LAYER_NORM, V(s, g64, NULL), "f32[N, S, 64]");
  CHECK(OP_LAYER_NORM, V(s, g32), "!layer_norm: scale f32[32] does not broadcast");
  CHECK(OP_LAYER_NORM, V(s, g64, g32), "!layer_norm: bias f32[32] does not broadcast");
  CHECK(OP_LAYER_NORM, V(s, g164), "!does not broadcast");
  CHECKA(OP_LAYER_NORM, V(s, g164), A(INT("axis", -2)), "f32[N, S, 64]");
  CHECKA(OP_LAYER_NORM, V(s, in("f32[S, 64]")), A(INT("axis", 1)), "f32[N, S, 64]");
  CHECK(OP_LAYER_NORM, V(s, in("f16[64]")), "!operand types differ");
  CHECK(OP_LAYER_NORM, V(s), "!op 'layer_norm' takes 2 to 3 inputs, got 1");
  CHECK(OP_RMS_NORM, V(s), "f32[N, S, 64]");
  CHECK(OP_RMS_NORM, V(s, g64), "f32[N, S, 64]");
  CHECK(OP_RMS_NORM, V(s, g32), "!rms_norm: scale f32[32] does not broadcast");
  CHECK(OP_RMS_NORM, V(s, g64, g64), "!op 'rms_norm' takes 1 to 2 inputs, got 3");
}

static void test_reshape(void) {
  Value *s = in("f32[N, 4, 32]"), *x = in("f32[2, 3, 4]");
  CHECKA(OP_RESHAPE, V(s), A(INTS("shape", -1, 4, 32)), "f32[N, 4, 32]");
  CHECKA(OP_RESHAPE, V(s), A(INTS("shape", 0, 128)), "f32[N, 128]");
  CHECKA(OP_RESHAPE, V(s), A(INTS("shape", 0, -1)), "f32[N, 128]");
  CHECKA(OP_RESHAPE, V(s), A(INTS("shape", -1, 128)), "f32[N, 128]");
  CHECKA(OP_RESHAPE, V(s), A(INTS("shape", 0, 4, 8, 4)), "f32[N, 4, 8, 4]");
  CHECKA(OP_RESHAPE, V(s), A(INTS("shape", -1, 64)), "!reshape: cannot reshape f32[N, 4, 32] to [-1, 64]: use 0 to copy symbolic dims");
  CHECKA(OP_RESHAPE, V(s), A(INTS("shape", 4, 32, -1)), "f32[4, 32, N]");
  CHECKA(OP_RESHAPE, V(s), A(INTS("shape", 128, 1)), "!use 0 to copy symbolic dims");
  CHECKA(OP_RESHAPE, V(x), A(INTS("shape", 4, -1)), "f32[4, 6]");
  CHECKA(OP_RESHAPE, V(x), A(INTS("shape", 24)), "f32[24]");
  CHECKA(OP_RESHAPE, V(x), A(INTS("shape", 0, 0, 0)), "f32[2, 3, 4]");
  CHECKA(OP_RESHAPE, V(x), A(INTS("shape", 5, -1)), "!element counts do not divide");
  CHECKA(OP_RESHAPE, V(x), A(INTS("shape", 4, 5)), "!reshape: element counts differ: f32[2, 3, 4] has 24, shape [4, 5] has 20");
  CHECKA(OP_RESHAPE, V(x), A(INTS("shape", -1, -1)), "!more than one -1");
  CHECKA(OP_RESHAPE, V(x), A(INTS("shape", 2, 3, 4, 0)), "!copies dim 3 with 0");
  CHECKA(OP_RESHAPE, V(x), A(INTS("shape", -2, 12)), "!negative size");
  CHECK(OP_RESHAPE, V(x), "!reshape needs attribute 'shape'");
  CHECKA(OP_RESHAPE, V(in("f32[]")), A(INTS("shape", 1, 1)), "f32[1, 1]");
  Value *one = in("f32[1]");
  check_node(__LINE__, OP_RESHAPE, V(one), 1, A(attr_make_ints("shape", NULL, 0)), 1, 1, 0, "f32[]");
}

static void test_layout(void) {
  Value *x = in("f32[N, 3, 4]"), *q = in("f32[N, 1, 3, 1]");
  CHECK(OP_TRANSPOSE, V(x), "f32[4, 3, N]");
  CHECKA(OP_TRANSPOSE, V(x), A(INTS("perm", 0, 2, 1)), "f32[N, 4, 3]");
  CHECKA(OP_TRANSPOSE, V(x), A(INTS("perm", 0, 0, 1)), "!transpose: perm [0, 0, 1] is not a permutation");
  CHECKA(OP_TRANSPOSE, V(x), A(INTS("perm", 1, 0)), "!perm [1, 0] has 2 entries");
  CHECKA(OP_SQUEEZE, V(q), A(INTS("axes", 1, -1)), "f32[N, 3]");
  CHECKA(OP_SQUEEZE, V(q), A(INTS("axes", 0)), "!squeeze: dim 0 of f32[N, 1, 3, 1] is N, not 1");
  CHECKA(OP_SQUEEZE, V(q), A(INTS("axes", 2)), "!dim 2 of f32[N, 1, 3, 1] is 3, not 1");
  CHECKA(OP_SQUEEZE, V(q), A(INTS("axes", 1, -3)), "!appears twice");
  CHECKA(OP_UNSQUEEZE, V(in("f32[A, B]")), A(INTS("axes", 0, 2)), "f32[1, A, 1, B]");
  CHECKA(OP_UNSQUEEZE, V(in("f32[A, B]")), A(INTS("axes", -1)), "f32[A, B, 1]");
  CHECKA(OP_UNSQUEEZE, V(in("f32[A, B]")), A(INTS("axes", 3)), "!out of range for the result rank 3");
  CHECKA(OP_UNSQUEEZE, V(in("f32[1, 2, 3, 4, 5, 6, 7]")), A(INTS("axes", 0, 1)), "!exceeds 8");
  CHECK(OP_FLATTEN, V(x), "f32[N, 12]");
  CHECKA(OP_FLATTEN, V(in("f32[2, 3, 4]")), A(INT("axis", 2)), "f32[6, 4]");
  CHECKA(OP_FLATTEN, V(in("f32[2, 3, 4]")), A(INT("axis", -1)), "f32[6, 4]");
  CHECKA(OP_FLATTEN, V(in("f32[2, 3, 4]")), A(INT("axis", 0)), "f32[1, 24]");
  CHECKA(OP_FLATTEN, V(in("f32[2, 3, 4]")), A(INT("axis", 3)), "f32[24, 1]");
  CHECKA(OP_FLATTEN, V(in("f32[N, 1, 4]")), A(INT("axis", 2)), "f32[N, 4]");
  CHECKA(OP_FLATTEN, V(x), A(INT("axis", 0)), "!flatten: cannot flatten f32[N, 3, 4] at axis 0");
  CHECKA(OP_FLATTEN, V(x), A(INT("axis", 4)), "!axis 4 is out of range");
  CHECKA(OP_EXPAND, V(in("f32[N, 1]")), A(INTS("shape", 1, 5)), "f32[N, 5]");
  CHECKA(OP_EXPAND, V(in("f32[3]")), A(INTS("shape", 2, 3)), "f32[2, 3]");
  CHECKA(OP_EXPAND, V(in("f32[3]")), A(INTS("shape", 4)), "!expand: cannot broadcast f32[3] to shape [4]");
  CHECKA(OP_EXPAND, V(in("f32[1]")), A(INTS("shape", 1 << 30, 1 << 30, 1 << 30)), "!too large");
}

static void test_concat_slice_split_gather(void) {
  Value *a = in("f32[N, 3]"), *b = in("f32[N, 5]"), *h = in("f16[N, 5]");
  CHECKA(OP_CONCAT, V(a, b), A(INT("axis", 1)), "f32[N, 8]");
  CHECKA(OP_CONCAT, V(a, b, a), A(INT("axis", -1)), "f32[N, 11]");
  CHECKA(OP_CONCAT, V(a), A(INT("axis", 0)), "f32[N, 3]");
  CHECKA(OP_CONCAT, V(a, a), A(INT("axis", 0)), "!symbolic; concat needs static sizes");
  CHECKA(OP_CONCAT, V(a, h), A(INT("axis", 1)), "!operand types differ: f32 and f16");
  CHECKA(OP_CONCAT, V(a, in("f32[N, 3, 1]")), A(INT("axis", 1)), "!differ outside axis 1");
  CHECKA(OP_CONCAT, V(a, in("f32[M, 5]")), A(INT("axis", 1)), "!differ outside axis 1");
  CHECK(OP_CONCAT, V(a, b), "!concat needs attribute 'axis'");
  check_node(__LINE__, OP_CONCAT, NULL, 0, A(INT("axis", 0)), 1, 1, 0, "!op 'concat' takes at least 1 input, got 0");

  Value *x = in("f32[10, 20]"), *s = in("f32[N, 20]");
  CHECKA(OP_SLICE, V(x), A(INTS("starts", 2), INTS("ends", -1)), "f32[7, 20]");
  CHECKA(OP_SLICE, V(x), A(INTS("starts", 0), INTS("ends", 100), INTS("steps", 3)), "f32[4, 20]");
  CHECKA(OP_SLICE, V(x), A(INTS("starts", -1), INTS("ends", -INT64_MAX), INTS("axes", 1), INTS("steps", -1)), "f32[10, 20]");
  CHECKA(OP_SLICE, V(x), A(INTS("starts", 5), INTS("ends", 2), INTS("axes", -1), INTS("steps", -2)), "f32[10, 2]");
  CHECKA(OP_SLICE, V(x), A(INTS("starts", 5), INTS("ends", 2)), "f32[0, 20]");
  CHECKA(OP_SLICE, V(x), A(INTS("starts", 1, 2), INTS("ends", 3, 4), INTS("axes", 1, 0)), "f32[2, 2]");
  CHECKA(OP_SLICE, V(s), A(INTS("starts", 0, 4), INTS("ends", INT64_MAX, 8)), "f32[N, 4]");
  CHECKA(OP_SLICE, V(s), A(INTS("starts", 1), INTS("ends", INT64_MAX)), "!slice: cannot slice symbolic dim N of f32[N, 20] on axis 0");
  CHECKA(OP_SLICE, V(x), A(INTS("starts", 0), INTS("ends", 1), INTS("steps", 0)), "!step on axis 0 is 0");
  CHECKA(OP_SLICE, V(x), A(INTS("starts", 0), INTS("ends", 1, 2)), "!starts has 1 entries but ends has 2");
  CHECKA(OP_SLICE, V(x), A(INTS("starts", 0, 0), INTS("ends", 1, 1), INTS("axes", 0, -2)), "!sliced twice");
  CHECKA(OP_SLICE, V(x), A(INTS("starts", 0), INTS("ends", 1), INTS("axes", 2)), "!axis 2 is out of range");

  Value *y = in("f32[N, 128]");
  Attr sp[] = {INT("axis", 1), INTS("split", 64, 32, 32)};
  check_node(__LINE__, OP_SPLIT, V(y), 1, sp, 2, 3, 0, "f32[N, 64]");
  check_node(__LINE__, OP_SPLIT, V(y), 1, sp, 2, 3, 2, "f32[N, 32]");
  check_node(__LINE__, OP_SPLIT, V(y), 1, sp, 2, 2, 0, "!split: the node has 2 outputs but split lists 3 sizes");
  Attr sp0[] = {INTS("split", 1, 1)};
  check_node(__LINE__, OP_SPLIT, V(y), 1, sp0, 1, 2, 0, "!dim 0 of f32[N, 128] is symbolic");
  Attr sp2[] = {INT("axis", -1), INTS("split", 64, 60)};
  check_node(__LINE__, OP_SPLIT, V(y), 1, sp2, 2, 2, 0, "!split sizes add up to 124, but dim 1 of f32[N, 128] is 128");
  Attr sp3[] = {INT("axis", -1), INTS("split", 128, 0)};
  check_node(__LINE__, OP_SPLIT, V(y), 1, sp3, 2, 2, 0, "!split sizes must be positive");

  Value *emb = in("f32[V, 64]"), *ids = in("i64[N, S]"), *fid = in("f32[N]");
  CHECK(OP_GATHER, V(emb, ids), "f32[N, S, 64]");
  CHECKA(OP_GATHER, V(emb, in("i32[]")), A(INT("axis", 1)), "f32[V]");
  CHECKA(OP_GATHER, V(in("f32[2, 3, 4]"), in("i32[5, 6]")), A(INT("axis", -2)), "f32[2, 5, 6, 4]");
  CHECK(OP_GATHER, V(emb, fid), "!gather: indices must be i32 or i64, got f32");
  CHECKA(OP_GATHER, V(emb, ids), A(INT("axis", 2)), "!axis 2 is out of range");
}

#define STR(name, v) attr_make_string(name, v)
#define FLT(name, v) attr_make_float(name, v)

/* conv, the pools and the norms: N passes through symbolic, C and spatial dims are checked. */
static void test_nn(void) {
  Value *x = in("f32[N, 3, 224, 224]"), *w = in("f32[64, 3, 7, 7]"), *b = in("f32[64]");
  CHECKA(OP_CONV, V(x, w, b), A(INTS("strides", 2, 2), INTS("pads", 3, 3, 3, 3)), "f32[N, 64, 112, 112]");
  CHECK(OP_CONV, V(x, w), "f32[N, 64, 218, 218]");
  CHECKA(OP_CONV, V(x, w), A(INTS("dilations", 2, 1), INTS("pads", 0, 1, 2, 3)), "f32[N, 64, 214, 222]");
  Value *xg = in("f32[N, 32, 10]"), *wg = in("f32[64, 8, 3]");
  CHECKA(OP_CONV, V(xg, wg), A(INT("group", 4)), "f32[N, 64, 8]");
  CHECKA(OP_CONV, V(xg, wg), A(INT("group", 2)), "!x f32[N, 32, 10] has 32 channels, but w f32[64, 8, 3] with group 2 expects 16");
  CHECKA(OP_CONV, V(xg, in("f32[6, 8, 3]")), A(INT("group", 4)), "!output channels 6 are not divisible by group 4");
  CHECK(OP_CONV, V(in("f32[N, 4, 10]"), wg), "!has 4 channels, but w f32[64, 8, 3] with group 1 expects 8");
  CHECK(OP_CONV, V(in("f32[1, C, 10]"), wg), "!the channel dim of f32[1, C, 10] is symbolic");
  CHECK(OP_CONV, V(in("f32[1, 8, H]"), wg), "!spatial dim 0 of f32[1, 8, H] is symbolic");
  CHECK(OP_CONV, V(in("f32[1, 8, 2]"), wg), "!the kernel (3 with dilation 1) is bigger than the padded input (2)");
  CHECKA(OP_CONV, V(in("f32[1, 8, 2]"), wg), A(INTS("pads", 1, 0)), "f32[1, 64, 1]");
  CHECKA(OP_CONV, V(xg, wg), A(INT("group", 4), INTS("pads", 1, 1, 1)), "!pads [1, 1, 1] has 3 entries, expected 2");
  CHECKA(OP_CONV, V(xg, wg), A(INT("group", 4), INTS("strides", 0)), "!strides [0]: entry 0 is out of range");
  CHECKA(OP_CONV, V(xg, wg), A(INT("group", 4), INTS("pads", -1, 0)), "!out of range");
  CHECKA(OP_CONV, V(xg, wg, in("f32[32]")), A(INT("group", 4)), "!bias f32[32] must be [64]");
  CHECK(OP_CONV, V(in("f32[8, 10]"), wg), "!x must be [N, C, spatial...]");
  CHECK(OP_CONV, V(xg, in("f32[64, 8]")), "!must have the rank of x");
  CHECK(OP_CONV, V(in("i32[1, 8, 5]"), in("i32[4, 8, 3]")), "!needs a floating-point type");
  /* conv_transpose: w is [C, M/group, k...] */
  Value *xt = in("f32[N, 8, 5, 5]"), *wt = in("f32[8, 3, 3, 3]");
  CHECKA(OP_CONV_TRANSPOSE, V(xt, wt), A(INTS("strides", 2, 2)), "f32[N, 3, 11, 11]");
  CHECKA(OP_CONV_TRANSPOSE, V(xt, wt, in("f32[6]")), A(INTS("strides", 2, 2), INTS("pads", 1, 1, 1, 1), INTS("output_padding", 1, 0), INT("group", 2)), "f32[N, 6, 10, 9]");
  CHECK(OP_CONV_TRANSPOSE, V(in("f32[1, 4, 5, 5]"), wt), "!has 4 channels, but w f32[8, 3, 3, 3] with group 1 expects 8");
  CHECKA(OP_CONV_TRANSPOSE, V(xt, wt), A(INTS("pads", 5, 5, 5, 5)), "!pads remove more than the whole output");

  /* pools */
  Value *p = in("f32[N, 64, 112, 112]");
  CHECKA(OP_MAX_POOL, V(p), A(INTS("kernel_shape", 3, 3), INTS("strides", 2, 2), INTS("pads", 1, 1, 1, 1)), "f32[N, 64, 56, 56]");
  CHECKA(OP_AVERAGE_POOL, V(in("f32[1, 2, 5, 5]")), A(INTS("kernel_shape", 2, 2), INTS("strides", 2, 2)), "f32[1, 2, 2, 2]");
  CHECKA(OP_AVERAGE_POOL, V(in("f32[1, 2, 5, 5]")), A(INTS("kernel_shape", 2, 2), INTS("strides", 2, 2), INT("ceil_mode", 1)), "f32[1, 2, 3, 3]");
  /* ceil_mode: a last window that would start in the end padding is dropped */
  CHECKA(OP_MAX_POOL, V(in("f32[1, 1, 6]")), A(INTS("kernel_shape", 2), INTS("strides", 2), INTS("pads", 1, 1), INT("ceil_mode", 1)), "f32[1, 1, 4]");
  CHECKA(OP_MAX_POOL, V(in("i8[1, 1, 7]")), A(INTS("kernel_shape", 2), INTS("dilations", 3)), "i8[1, 1, 4]");
  CHECKA(OP_MAX_POOL, V(p), A(INTS("kernel_shape", 3)), "!kernel_shape [3] has 1 entries, expected 2");
  CHECKA(OP_MAX_POOL, V(in("f32[1, 1, 2, 2]")), A(INTS("kernel_shape", 3, 3)), "!the kernel (3 with dilation 1) is bigger than the padded input (2) on spatial dim 0");
  CHECKA(OP_MAX_POOL, V(in("f32[1, 1, 8]")), A(INTS("kernel_shape", 2), INTS("pads", 2, 0)), "!is not smaller than the window");
  CHECKA(OP_AVERAGE_POOL, V(in("i32[1, 1, 8]")), A(INTS("kernel_shape", 2)), "!needs a floating-point type");
  CHECK(OP_MAX_POOL, V(p), "!max_pool needs attribute 'kernel_shape'");
  CHECK(OP_GLOBAL_AVERAGE_POOL, V(p), "f32[N, 64, 1, 1]");
  CHECK(OP_GLOBAL_MAX_POOL, V(in("f32[N, C, 7]")), "f32[N, C, 1]");
  CHECK(OP_GLOBAL_MAX_POOL, V(in("f32[N, 7]")), "!x must be [N, C, spatial...]");

  /* norms */
  Value *c64 = in("f32[64]");
  CHECK(OP_BATCH_NORM, V(p, c64, c64, c64, c64), "f32[N, 64, 112, 112]");
  CHECK(OP_BATCH_NORM, V(in("f32[N, 64]"), c64, c64, c64, c64), "f32[N, 64]");
  CHECK(OP_BATCH_NORM, V(p, c64, c64, in("f32[32]"), c64), "!mean f32[32] must be [C] for x f32[N, 64, 112, 112]");
  CHECK(OP_BATCH_NORM, V(p, c64, c64, c64, in("f16[64]")), "!operand types differ");
  CHECK(OP_BATCH_NORM, V(p, c64, c64, c64), "!op 'batch_norm' takes 5 inputs, got 4");
  CHECK(OP_INSTANCE_NORM, V(p, c64, c64), "f32[N, 64, 112, 112]");
  CHECK(OP_INSTANCE_NORM, V(p, c64, in("f32[1, 64]")), "!bias f32[1, 64] must be [C]");
  CHECKA(OP_LRN, V(p), A(INT("size", 5)), "f32[N, 64, 112, 112]");
  CHECKA(OP_LRN, V(p), A(INT("size", 0)), "!size must be positive");
  CHECK(OP_LRN, V(p), "!lrn needs attribute 'size'");
}

static void test_nn_layout(void) {
  Value *x = in("f32[N, 3, 4]"), *i = in("i32[2, 3]");
  /* pad */
  CHECKA(OP_PAD, V(x), A(INTS("pads", 0, 1, -1, 0, 2, 1)), "f32[N, 6, 4]");
  CHECKA(OP_PAD, V(x), A(INTS("pads", 1, 0, 0, 0, 0, 0)), "!dim 0 of f32[N, 3, 4] is symbolic");
  CHECKA(OP_PAD, V(x), A(INTS("pads", 0, 1, 0, 0)), "!pads [0, 1, 0, 0] has 4 entries, but f32[N, 3, 4] needs 6");
  CHECKA(OP_PAD, V(i), A(INTS("pads", 0, 2, 0, 0), STR("mode", "reflect")), "i32[2, 5]");
  CHECKA(OP_PAD, V(i), A(INTS("pads", 0, 3, 0, 0), STR("mode", "reflect")), "!reflect pads [0, 3, 0, 0] are larger than dim 1");
  CHECKA(OP_PAD, V(i), A(INTS("pads", 0, 0, 0, -4)), "!crop more than dim 1");
  CHECKA(OP_PAD, V(i), A(INTS("pads", 0, 0, 0, 0), STR("mode", "wrap")), "!mode must be 'constant', 'reflect' or 'edge', got 'wrap'");
  CHECKA(OP_PAD, V(in("f32[0, 2]")), A(INTS("pads", 1, 0, 0, 0), STR("mode", "edge")), "!edge padding needs a non-empty dim 0");
  /* resize */
  Value *r = in("f32[N, 3, 8, 8]");
  CHECKA(OP_RESIZE, V(r), A(INTS("sizes", -1, -1, 16, 4)), "f32[N, 3, 16, 4]");
  CHECKA(OP_RESIZE, V(r), A(INTS("sizes", 2, 3, 16, 4)), "!dim 0 of f32[N, 3, 8, 8] is symbolic: write -1 in sizes to keep it");
  CHECKA(OP_RESIZE, V(r), A(INTS("sizes", -1, -1, 16)), "!sizes [-1, -1, 16] must have one entry per dim");
  double sc[4] = {1, 1, 2, 0.5};
  Attr scales = {.name = "scales", .kind = AK_FLOATS, .n = 4, .floats = sc};
  CHECKA(OP_RESIZE, V(r), A(INTS("sizes", -1, -1, 16, 4), scales, STR("mode", "linear")), "f32[N, 3, 16, 4]");
  CHECKA(OP_RESIZE, V(r), A(INTS("sizes", -1, 3, 16, -1), scales), "!sizes keeps dim 3 (-1), but its scale is 0.5, not 1");
  CHECKA(OP_RESIZE, V(r), A(INTS("sizes", -1, -1, 16, 4), STR("mode", "area")), "!mode must be 'nearest', 'linear' or 'cubic'");
  CHECKA(OP_RESIZE, V(r), A(INTS("sizes", -1, -1, 16, 4), STR("coordinate_transformation_mode", "tf_crop_and_resize")), "!coordinate_transformation_mode 'tf_crop_and_resize' is not supported");
  CHECKA(OP_RESIZE, V(i), A(INTS("sizes", 4, 6), STR("mode", "cubic")), "!needs a floating-point type");
  CHECKA(OP_RESIZE, V(i), A(INTS("sizes", 4, 6)), "i32[4, 6]");
  /* topk */
  Attr tk[] = {INT("k", 2)};
  check_node(__LINE__, OP_TOPK, V(x), 1, tk, 1, 2, 0, "f32[N, 3, 2]");
  check_node(__LINE__, OP_TOPK, V(x), 1, tk, 1, 2, 1, "i64[N, 3, 2]");
  Attr tk5[] = {INT("k", 5)}, tk0[] = {INT("k", 1), INT("axis", 0)};
  check_node(__LINE__, OP_TOPK, V(x), 1, tk5, 1, 2, 0, "!k 5 is out of range for dim 2 of f32[N, 3, 4]");
  check_node(__LINE__, OP_TOPK, V(x), 1, tk0, 2, 2, 0, "!dim 0 of f32[N, 3, 4] is symbolic");
  check_node(__LINE__, OP_TOPK, V(x), 1, tk, 1, 1, 0, "!op 'topk' has 2 outputs, got 1");
  /* cumsum, trilu, tile, gather_elements */
  CHECKA(OP_CUMSUM, V(x), A(INT("axis", 1)), "f32[N, 3, 4]");
  CHECKA(OP_CUMSUM, V(x), A(INT("axis", 3)), "!axis 3 is out of range");
  CHECK(OP_TRILU, V(x), "f32[N, 3, 4]");
  CHECK(OP_TRILU, V(in("f32[4]")), "!needs at least 2 dims");
  CHECKA(OP_TILE, V(x), A(INTS("repeats", 1, 2, 0)), "f32[N, 6, 0]");
  CHECKA(OP_TILE, V(x), A(INTS("repeats", 2, 1, 1)), "!dim 0 of f32[N, 3, 4] is symbolic");
  CHECKA(OP_TILE, V(x), A(INTS("repeats", 1, 1)), "!repeats [1, 1] has 2 entries");
  CHECKA(OP_GATHER_ELEMENTS, V(x, in("i64[N, 5, 2]")), A(INT("axis", 1)), "f32[N, 5, 2]");
  CHECKA(OP_GATHER_ELEMENTS, V(x, in("i64[N, 5, 5]")), A(INT("axis", 1)), "!dim 2 of indices i64[N, 5, 5] exceeds that of data");
  CHECK(OP_GATHER_ELEMENTS, V(x, in("i64[5, 5]")), "!must have the rank of data");
  CHECK(OP_GATHER_ELEMENTS, V(x, in("f32[N, 3, 4]")), "!indices must be i32 or i64");
  Value *ix = in("i64[N, 2, 4]");
  CHECK(OP_SCATTER_ELEMENTS, V(x, ix, in("f32[N, 2, 4]")), "f32[N, 3, 4]");
  CHECK(OP_SCATTER_ELEMENTS, V(x, ix, in("f32[N, 2, 3]")), "!updates f32[N, 2, 3] must have the shape of indices i64[N, 2, 4]");
  CHECK(OP_SCATTER_ELEMENTS, V(x, ix, in("f16[N, 2, 4]")), "!operand types differ");
  CHECKA(OP_SCATTER_ELEMENTS, V(x, ix, in("f32[N, 2, 4]")), A(STR("reduction", "sum")), "!reduction must be");
  /* pointwise additions */
  CHECK(OP_MOD, V(i, in("i32[3]")), "i32[2, 3]");
  CHECK(OP_MOD, V(i, in("i64[3]")), "!operand types differ");
  CHECK(OP_IS_NAN, V(x), "bool[N, 3, 4]");
  CHECK(OP_IS_INF, V(i), "!needs a floating-point type");
  CHECK(OP_PRELU, V(x, in("f32[3, 1]")), "f32[N, 3, 4]");
  CHECK(OP_PRELU, V(in("f32[3]"), in("f32[2, 3]")), "!slope f32[2, 3] does not broadcast to x f32[3]");
  CHECKA(OP_REDUCE_L2, V(x), A(INTS("axes", 2)), "f32[N, 3, 1]");
  CHECK(OP_REDUCE_LOG_SUM_EXP, V(i), "!needs a floating-point type");
  CHECKA(OP_REDUCE_SUM_SQUARE, V(i), A(INT("keepdims", 0)), "i32[]");
  CHECKA(OP_ARGMIN, V(x), A(INT("axis", -1)), "i64[N, 3, 1]");
}

/* The second batch of ONNX ops: math, bitwise, hardmax, depth/space, one_hot, losses. */
static void test_onnx_ops(void) {
  Value *x = in("f32[N, 3, 4]"), *i = in("i32[2, 3]"), *u = in("u8[2, 3]");
  CHECK(OP_ACOSH, V(x), "f32[N, 3, 4]");
  CHECK(OP_MISH, V(i), "!needs a floating-point type, got i32");
  CHECKA(OP_SELU, V(x), A(attr_make_float("gamma", 2)), "f32[N, 3, 4]");
  CHECK(OP_SHRINK, V(i), "i32[2, 3]");
  CHECK(OP_SHRINK, V(in("bool[2]")), "!bool inputs are not supported");
  CHECK(OP_BITWISE_NOT, V(u), "u8[2, 3]");
  CHECK(OP_BITWISE_NOT, V(x), "!needs an integer type, got f32");
  CHECK(OP_BITWISE_AND, V(i, in("i32[3]")), "i32[2, 3]");
  CHECK(OP_BITWISE_XOR, V(in("bool[3]"), in("bool[3]")), "!needs integer inputs, got bool");
  CHECK(OP_BITWISE_OR, V(i, u), "!operand types differ");
  CHECKA(OP_BIT_SHIFT, V(u, in("u8[1]")), A(STR("direction", "LEFT")), "u8[2, 3]");
  CHECKA(OP_BIT_SHIFT, V(i, i), A(STR("direction", "RIGHT")), "!needs unsigned integer inputs, got i32");
  CHECKA(OP_BIT_SHIFT, V(u, u), A(STR("direction", "left")), "!direction must be 'LEFT' or 'RIGHT'");
  CHECK(OP_BIT_SHIFT, V(u, u), "!bit_shift needs attribute 'direction'");
  /* hardmax */
  CHECK(OP_HARDMAX, V(x), "f32[N, 3, 4]");
  CHECKA(OP_HARDMAX, V(x), A(INT("axis", 3)), "!axis 3 is out of range");
  CHECK(OP_HARDMAX, V(i), "!needs a floating-point type");
  /* depth_to_space, space_to_depth */
  Value *img = in("f32[N, 8, 3, 5]");
  CHECKA(OP_DEPTH_TO_SPACE, V(img), A(INT("blocksize", 2)), "f32[N, 2, 6, 10]");
  CHECKA(OP_DEPTH_TO_SPACE, V(img), A(INT("blocksize", 2), STR("mode", "CRD")), "f32[N, 2, 6, 10]");
  CHECKA(OP_DEPTH_TO_SPACE, V(img), A(INT("blocksize", 3)), "!dim 1 of f32[N, 8, 3, 5] is not divisible by 9");
  CHECKA(OP_DEPTH_TO_SPACE, V(img), A(INT("blocksize", 2), STR("mode", "RCD")), "!mode must be 'DCR' or 'CRD'");
  CHECKA(OP_SPACE_TO_DEPTH, V(in("i8[1, 3, 4, 6]")), A(INT("blocksize", 2)), "i8[1, 12, 2, 3]");
  CHECKA(OP_SPACE_TO_DEPTH, V(img), A(INT("blocksize", 3)), "!dim 3 of f32[N, 8, 3, 5] is not divisible by 3");
  CHECKA(OP_SPACE_TO_DEPTH, V(in("f32[1, 2, H, 4]")), A(INT("blocksize", 2)), "!dim 2 of f32[1, 2, H, 4] is symbolic");
  CHECKA(OP_SPACE_TO_DEPTH, V(x), A(INT("blocksize", 1)), "!x must be [N, C, H, W]");
  CHECKA(OP_SPACE_TO_DEPTH, V(img), A(INT("blocksize", 0)), "!blocksize must be positive");
  /* one_hot */
  Value *idx = in("i64[N, 5]"), *vals = in("f32[2]");
  CHECKA(OP_ONE_HOT, V(idx, vals), A(INT("depth", 10)), "f32[N, 5, 10]");
  CHECKA(OP_ONE_HOT, V(idx, vals), A(INT("depth", 10), INT("axis", 0)), "f32[10, N, 5]");
  CHECKA(OP_ONE_HOT, V(idx, vals), A(INT("depth", 10), INT("axis", -2)), "f32[N, 10, 5]");
  CHECKA(OP_ONE_HOT, V(idx, vals), A(INT("depth", 10), INT("axis", 3)), "!axis 3 is out of range for the result rank 3");
  CHECKA(OP_ONE_HOT, V(idx, in("f32[3]")), A(INT("depth", 10)), "!values f32[3] must be [2]");
  CHECKA(OP_ONE_HOT, V(idx, vals), A(INT("depth", 0)), "!depth must be positive");
  CHECK(OP_ONE_HOT, V(idx, vals), "!one_hot needs attribute 'depth'");
  /* nll_loss, softmax_cross_entropy */
  Value *sc = in("f32[N, 5, 7]"), *tg = in("i64[N, 7]"), *w5 = in("f32[5]");
  CHECK(OP_NLL_LOSS, V(sc, tg), "f32[]");
  CHECKA(OP_NLL_LOSS, V(sc, tg, w5), A(STR("reduction", "none"), INT("ignore_index", -1)), "f32[N, 7]");
  CHECKA(OP_NLL_LOSS, V(sc, tg), A(STR("reduction", "avg")), "!reduction must be 'none', 'sum' or 'mean', got 'avg'");
  CHECK(OP_NLL_LOSS, V(sc, in("i64[N, 5]")), "!target i64[N, 5] must be input f32[N, 5, 7] without its dim 1");
  CHECK(OP_NLL_LOSS, V(sc, in("f32[N, 7]")), "!target must be i32 or i64, got f32");
  CHECK(OP_NLL_LOSS, V(sc, tg, in("f32[7]")), "!weight f32[7] must be [C] for input f32[N, 5, 7]");
  CHECK(OP_NLL_LOSS, V(in("f32[5]"), in("i64[]")), "!input must be [N, C, d...]");
  check_node(__LINE__, OP_SOFTMAX_CROSS_ENTROPY, V(sc, tg, w5), 3, NULL, 0, 2, 0, "f32[]");
  check_node(__LINE__, OP_SOFTMAX_CROSS_ENTROPY, V(sc, tg), 2, A(STR("reduction", "none")), 1, 2, 0, "f32[N, 7]");
  check_node(__LINE__, OP_SOFTMAX_CROSS_ENTROPY, V(sc, tg), 2, NULL, 0, 2, 1, "f32[N, 5, 7]");
  check_node(__LINE__, OP_SOFTMAX_CROSS_ENTROPY, V(sc, tg), 2, NULL, 0, 1, 0, "!op 'softmax_cross_entropy' has 2 outputs, got 1");
  check_node(__LINE__, OP_SOFTMAX_CROSS_ENTROPY, V(in("i32[2, 3]"), in("i64[2]")), 2, NULL, 0, 2, 0, "!needs a floating-point type");
}

/* The third batch of ONNX ops: gather_nd to mean_variance_norm. */
static void test_onnx_ops3(void) {
  Value *x = in("f32[N, 3, 4]"), *d234 = in("f32[2, 3, 4]");
  /* gather_nd */
  CHECKA(OP_GATHER_ND, V(x, in("i64[N, 5, 2]")), A(INT("batch_dims", 1)), "f32[N, 5]");
  CHECK(OP_GATHER_ND, V(d234, in("i32[5, 1]")), "f32[5, 3, 4]");
  CHECK(OP_GATHER_ND, V(d234, in("i64[2, 6, 3]")), "f32[2, 6]");
  CHECK(OP_GATHER_ND, V(d234, in("i64[5, 4]")), "!the last dim of indices i64[5, 4] must be 1 to 3: the rank of data f32[2, 3, 4] minus batch_dims 0");
  CHECK(OP_GATHER_ND, V(d234, in("i64[5, K]")), "!the last dim of indices i64[5, K] is symbolic");
  CHECKA(OP_GATHER_ND, V(d234, in("i64[2, 1]")), A(INT("batch_dims", 2)), "!batch_dims 2 must be at least 0 and less than the ranks");
  CHECKA(OP_GATHER_ND, V(d234, in("i64[3, 1]")), A(INT("batch_dims", 1)), "!batch dim 0 of data f32[2, 3, 4] and indices i64[3, 1] differs");
  CHECK(OP_GATHER_ND, V(d234, in("f32[5, 1]")), "!indices must be i32 or i64, got f32");
  CHECK(OP_GATHER_ND, V(d234, in("i64[]")), "!must be at least 1-D");
  /* scatter_nd */
  Value *ix = in("i64[2, 2]");
  CHECK(OP_SCATTER_ND, V(x, ix, in("f32[2, 4]")), "f32[N, 3, 4]");
  CHECKA(OP_SCATTER_ND, V(d234, in("i32[5, 3]"), in("f32[5]")), A(STR("reduction", "max")), "f32[2, 3, 4]");
  CHECK(OP_SCATTER_ND, V(x, ix, in("f32[2, 3]")), "!updates f32[2, 3] must be indices.shape[:-1] + data.shape[2:], f32[2, 4]");
  CHECK(OP_SCATTER_ND, V(x, ix, in("f16[2, 4]")), "!operand types differ: f32 and f16");
  CHECKA(OP_SCATTER_ND, V(x, ix, in("f32[2, 4]")), A(STR("reduction", "sum")), "!reduction must be 'none', 'add', 'mul', 'max' or 'min', got 'sum'");
  CHECKA(OP_SCATTER_ND, V(in("bool[3]"), in("i64[1, 1]"), in("bool[1]")), A(STR("reduction", "add")), "!bool data takes no reduction");
  /* grid_sample */
  Value *img = in("f32[N, 3, 8, 8]");
  CHECK(OP_GRID_SAMPLE, V(img, in("f32[N, 5, 6, 2]")), "f32[N, 3, 5, 6]");
  CHECK(OP_GRID_SAMPLE, V(in("f32[1, 2, 4, 4, 4]"), in("f16[1, 3, 2, 5, 3]")), "f32[1, 2, 3, 2, 5]");
  CHECK(OP_GRID_SAMPLE, V(in("f64[2, 1, 9]"), in("f64[2, 4, 1]")), "f64[2, 1, 4]");
  CHECKA(OP_GRID_SAMPLE, V(in("i32[1, 1, 2, 2]"), in("f32[1, 3, 3, 2]")), A(STR("mode", "nearest")), "i32[1, 1, 3, 3]");
  CHECKA(OP_GRID_SAMPLE, V(img, in("f32[N, 5, 6, 2]")), A(STR("mode", "bicubic"), STR("padding_mode", "reflection")), "f32[N, 3, 5, 6]");
  CHECK(OP_GRID_SAMPLE, V(img, in("f32[N, 5, 6, 3]")), "!grid f32[N, 5, 6, 3] must be [N, D1..D2, 2] for x f32[N, 3, 8, 8]");
  CHECK(OP_GRID_SAMPLE, V(img, in("f32[2, 5, 6, 2]")), "!grid f32[2, 5, 6, 2] and x f32[N, 3, 8, 8] differ in N");
  CHECK(OP_GRID_SAMPLE, V(img, in("i32[N, 5, 6, 2]")), "!grid must be floating point, got i32");
  CHECK(OP_GRID_SAMPLE, V(in("i32[1, 1, 2, 2]"), in("f32[1, 3, 3, 2]")), "!needs a floating-point type, got i32");
  CHECK(OP_GRID_SAMPLE, V(in("f32[2, 3]"), in("f32[2, 3]")), "!x must be [N, C, spatial...]");
  CHECKA(OP_GRID_SAMPLE, V(img, in("f32[N, 5, 6, 2]")), A(STR("mode", "area")), "!mode must be 'linear', 'nearest' or 'cubic', got 'area'");
  CHECKA(OP_GRID_SAMPLE, V(img, in("f32[N, 5, 6, 2]")), A(STR("padding_mode", "wrap")), "!padding_mode must be 'zeros', 'border' or 'reflection', got 'wrap'");
  /* reverse_sequence */
  Value *seq = in("f32[5, B, 4]");
  CHECK(OP_REVERSE_SEQUENCE, V(seq, in("i64[B]")), "f32[5, B, 4]");
  CHECKA(OP_REVERSE_SEQUENCE, V(seq, in("i32[5]")), A(INT("batch_axis", 0), INT("time_axis", 1)), "f32[5, B, 4]");
  CHECK(OP_REVERSE_SEQUENCE, V(seq, in("i64[5]")), "!sequence_lens i64[5] must be [batch], dim 1 of x f32[5, B, 4]");
  CHECKA(OP_REVERSE_SEQUENCE, V(seq, in("i64[5]")), A(INT("batch_axis", 0)), "!batch_axis 0 and time_axis 0 must be 0 and 1, one each");
  CHECKA(OP_REVERSE_SEQUENCE, V(seq, in("i64[B]")), A(INT("time_axis", 2)), "!must be 0 and 1");
  CHECK(OP_REVERSE_SEQUENCE, V(seq, in("f32[B]")), "!sequence_lens must be i32 or i64, got f32");
  CHECK(OP_REVERSE_SEQUENCE, V(in("f32[5]"), in("i64[5]")), "!x must have at least 2 dims");
  /* roi_align */
  Value *rois = in("f32[R, 4]"), *bidx = in("i64[R]");
  CHECKA(OP_ROI_ALIGN, V(img, rois, bidx), A(INT("output_height", 7), INT("output_width", 5)), "f32[R, 3, 7, 5]");
  CHECK(OP_ROI_ALIGN, V(img, rois, in("i32[R]")), "f32[R, 3, 1, 1]");
  CHECK(OP_ROI_ALIGN, V(img, in("f32[R, 5]"), bidx), "!rois f32[R, 5] must be [R, 4]");
  CHECK(OP_ROI_ALIGN, V(img, rois, in("i64[S]")), "!batch_indices i64[S] must be [R] for rois f32[R, 4]");
  CHECK(OP_ROI_ALIGN, V(img, rois, in("f32[R]")), "!batch_indices must be i32 or i64, got f32");
  CHECK(OP_ROI_ALIGN, V(img, in("f16[R, 4]"), bidx), "!operand types differ: f32 and f16");
  CHECK(OP_ROI_ALIGN, V(x, rois, bidx), "!x must be [N, C, H, W], got f32[N, 3, 4]");
  CHECKA(OP_ROI_ALIGN, V(img, rois, bidx), A(STR("mode", "sum")), "!mode must be 'avg' or 'max', got 'sum'");
  CHECKA(OP_ROI_ALIGN, V(img, rois, bidx), A(STR("coordinate_transformation_mode", "asymmetric")), "!coordinate_transformation_mode must be");
  CHECKA(OP_ROI_ALIGN, V(img, rois, bidx), A(INT("sampling_ratio", -1)), "!sampling_ratio must be 0 (adaptive) or positive, got -1");
  CHECKA(OP_ROI_ALIGN, V(img, rois, bidx), A(INT("output_height", 0)), "!output_height 0 and output_width 1 must be positive");
  /* max_unpool */
  Value *pooled = in("f32[N, 3, 2, 3]"), *pidx = in("i64[N, 3, 2, 3]");
  Attr k22[] = {INTS("kernel_shape", 2, 2), INTS("strides", 2, 2)};
  CHECKA(OP_MAX_UNPOOL, V(pooled, pidx), k22, "f32[N, 3, 4, 6]");
  CHECKA(OP_MAX_UNPOOL, V(pooled, pidx), A(k22[0], k22[1], INTS("output_shape", -1, 3, 5, 7)), "f32[N, 3, 5, 7]");
  CHECKA(OP_MAX_UNPOOL, V(pooled, pidx), A(k22[0], k22[1], INTS("output_shape", -1, 3, 3, 7)), "!output_shape [-1, 3, 3, 7] is smaller than the unpooled size 4 on spatial dim 0");
  CHECKA(OP_MAX_UNPOOL, V(pooled, pidx), A(k22[0], k22[1], INTS("output_shape", 2, 3, 5, 7)), "!output_shape [2, 3, 5, 7] must keep dim 0 of x f32[N, 3, 2, 3] (or say -1)");
  CHECKA(OP_MAX_UNPOOL, V(pooled, pidx), A(k22[0], k22[1], INTS("output_shape", -1, 3, 5)), "!output_shape [-1, 3, 5] has 3 entries, but x f32[N, 3, 2, 3] has rank 4");
  CHECKA(OP_MAX_UNPOOL, V(in("f32[1, 1, 3]"), in("i32[1, 1, 3]")), A(INTS("kernel_shape", 3), INTS("strides", 2), INTS("pads", 1, 0)), "f32[1, 1, 6]");
  CHECKA(OP_MAX_UNPOOL, V(pooled, in("i64[N, 3, 3, 2]")), k22, "!indices i64[N, 3, 3, 2] must have the shape of x f32[N, 3, 2, 3]");
  CHECKA(OP_MAX_UNPOOL, V(pooled, in("f32[N, 3, 2, 3]")), k22, "!indices must be i32 or i64, got f32");
  CHECKA(OP_MAX_UNPOOL, V(pooled, pidx), A(INTS("kernel_shape", 2)), "!kernel_shape has 1 entries, expected 2");
  CHECK(OP_MAX_UNPOOL, V(pooled, pidx), "!max_unpool needs attribute 'kernel_shape'");
  /* det */
  CHECK(OP_DET, V(in("f32[N, 3, 3]")), "f32[N]");
  CHECK(OP_DET, V(in("f64[M, M]")), "f64[]");
  CHECK(OP_DET, V(in("f32[3, 4]")), "!x must be [..., M, M] (square in its last two dims), got f32[3, 4]");
  CHECK(OP_DET, V(in("f32[3]")), "!x must be [..., M, M]");
  CHECK(OP_DET, V(in("i32[2, 2]")), "!det: needs a floating-point type, got i32");
  /* lp_norm, mean_variance_norm */
  CHECK(OP_LP_NORM, V(x), "f32[N, 3, 4]");
  CHECKA(OP_LP_NORM, V(x), A(INT("axis", 0), INT("p", 1)), "f32[N, 3, 4]");
  CHECKA(OP_LP_NORM, V(x), A(INT("p", 3)), "!p must be 1 or 2, got 3");
  CHECKA(OP_LP_NORM, V(x), A(INT("axis", 3)), "!axis 3 is out of range for f32[N, 3, 4]");
  CHECK(OP_LP_NORM, V(in("i64[3]")), "!needs a floating-point type, got i64");
  CHECK(OP_MEAN_VARIANCE_NORM, V(img), "f32[N, 3, 8, 8]");
  CHECKA(OP_MEAN_VARIANCE_NORM, V(x), A(INTS("axes", -1)), "f32[N, 3, 4]");
  CHECK(OP_MEAN_VARIANCE_NORM, V(x), "!mean_variance_norm: axis 3 is out of range for f32[N, 3, 4]");
  CHECKA(OP_MEAN_VARIANCE_NORM, V(x), A(INTS("axes", 1, -2)), "!axis -2 appears twice in axes");
  CHECK(OP_MEAN_VARIANCE_NORM, V(in("i32[2, 3, 4, 5]")), "!needs a floating-point type, got i32");
}

/* range needs constants: its size is their arithmetic. */
static Value *scalar(DType dt, double v) {
  Tensor *t = tensor_in_arena(g->arena, dt, 0, NULL);
  dtype_store_f64(dt, t->data, v);
  Value *c = graph_add_const(g, NULL, t);
  return c;
}

static void test_range(void) {
  CHECK(OP_RANGE, V(scalar(DT_F32, 1.5), scalar(DT_F32, -2), scalar(DT_F32, -0.75)), "f32[5]");
  CHECK(OP_RANGE, V(scalar(DT_I64, -3), scalar(DT_I64, 10), scalar(DT_I64, 4)), "i64[4]");
  CHECK(OP_RANGE, V(scalar(DT_I32, 5), scalar(DT_I32, 1), scalar(DT_I32, 1)), "i32[0]");
  CHECK(OP_RANGE, V(scalar(DT_I64, -9e18), scalar(DT_I64, 9e18), scalar(DT_I64, 9e18)), "i64[2]");
  CHECK(OP_RANGE, V(scalar(DT_I32, 0), scalar(DT_I32, 1), scalar(DT_I32, 0)), "!delta is 0");
  CHECK(OP_RANGE, V(scalar(DT_F32, 0), scalar(DT_F32, 1e30), scalar(DT_F32, 1)), "!too long");
  CHECK(OP_RANGE, V(in("i64[]"), scalar(DT_I64, 1), scalar(DT_I64, 1)), "!range needs constant inputs");
  CHECK(OP_RANGE, V(scalar(DT_I64, 0), scalar(DT_I32, 1), scalar(DT_I64, 1)), "!operand types differ");
}

/* Sizes at their edges, op by op: zero dims, dims and attributes up to INT64_MAX, products
 * that would wrap, and the 2^48-byte bound on every value. Each is a result or one
 * error, never arithmetic that wraps (the sanitizer build would stop at it). */
static void test_sizes(void) {
  /* 2^48 bytes is the most a value may have, and no dim may be longer, even when another
   * dim is 0 (loops and strides would still count to it) */
  CHECK(OP_RELU, V(in("u8[281474976710656]")), "u8[281474976710656]");
  CHECK(OP_RELU, V(in("f32[281474976710656]")), "!relu: result f32[281474976710656] is too large (more than 2^48 bytes)");
  CHECK(OP_RELU, V(in("f32[0, 281474976710657]")), "!too large");
  CHECK(OP_RELU, V(in("f32[0, 4]")), "f32[0, 4]");
  CHECK(OP_ADD, V(in("f64[35184372088832, 1]"), in("f64[1, 2]")), "!too large");
  CHECK(OP_MATMUL, V(in("f32[2147483648, 2]"), in("f32[2, 2147483648]")), "!too large");
  /* reshape: the products of the shape and of the input */
  Value *x = in("f32[2, 3]"), *e = in("f32[0]");
  CHECKA(OP_RESHAPE, V(x), A(INTS("shape", INT64_MAX, INT64_MAX)), "!shape [9223372036854775807, 9223372036854775807] has too many elements");
  CHECKA(OP_RESHAPE, V(e), A(INTS("shape", INT64_MAX, -1)), "!too large");
  CHECKA(OP_RESHAPE, V(e), A(INTS("shape", 0, -1)), "!element counts do not divide");
  CHECKA(OP_RESHAPE, V(e), A(INTS("shape", 3, 0, 5)), "!copies dim 1 with 0");
  CHECKA(OP_RESHAPE, V(in("f32[0, 5]")), A(INTS("shape", 0, 7)), "f32[0, 7]");
  CHECKA(OP_EXPAND, V(in("f32[1]")), A(INTS("shape", INT64_MAX)), "!too large");
  CHECKA(OP_EXPAND, V(in("f32[1]")), A(INTS("shape", 0, INT64_MAX)), "!too large");
  CHECKA(OP_EXPAND, V(in("f32[3]")), A(INTS("shape", 0, 3)), "f32[0, 3]");
  CHECKA(OP_TILE, V(in("f32[2]")), A(INTS("repeats", (int64_t)1 << 62)), "!repeats [4611686018427387904] overflow dim 0");
  CHECKA(OP_TILE, V(in("f32[2]")), A(INTS("repeats", (int64_t)1 << 47)), "!too large");
  CHECKA(OP_TILE, V(in("f32[0]")), A(INTS("repeats", INT64_MAX)), "f32[0]");
  CHECKA(OP_TILE, V(in("f32[2]")), A(INTS("repeats", -1)), "!negative entry");
  /* concat, split and slice along an axis */
  Value *half = in("u8[4611686018427387904]");
  CHECKA(OP_CONCAT, V(half, half), A(INT("axis", 0)), "!the sizes on axis 0 overflow");
  Attr sp[] = {INTS("split", INT64_MAX, 1)};
  check_node(__LINE__, OP_SPLIT, V(in("f32[8]")), 1, sp, 1, 2, 0, "!split sizes overflow");
  Value *s10 = in("f32[10]");
  CHECKA(OP_SLICE, V(s10), A(INTS("starts", -1), INTS("ends", -INT64_MAX), INTS("steps", INT64_MIN)), "f32[1]");
  CHECKA(OP_SLICE, V(s10), A(INTS("starts", INT64_MIN), INTS("ends", INT64_MAX), INTS("steps", INT64_MAX)), "f32[1]");
  CHECKA(OP_SLICE, V(s10), A(INTS("starts", INT64_MAX), INTS("ends", INT64_MIN)), "f32[0]");
  CHECKA(OP_SLICE, V(in("f32[0]")), A(INTS("starts", 0), INTS("ends", 1)), "f32[0]");
  /* pad */
  CHECKA(OP_PAD, V(in("f32[2]")), A(INTS("pads", INT64_MAX, 0)), "!pads [9223372036854775807, 0] are out of range");
  CHECKA(OP_PAD, V(in("f32[2]")), A(INTS("pads", INT64_MIN, 0)), "!out of range");
  CHECKA(OP_PAD, V(in("f32[2]")), A(INTS("pads", 2147483647, 2147483647)), "f32[4294967296]");
  /* the windows: strides, dilations, kernels, groups and pads past WINDOW_MAX, and spans
   * that do not fit */
  Value *x1 = in("f32[1, 1, 10]"), *w3 = in("f32[1, 1, 3]");
  CHECKA(OP_CONV, V(x1, w3), A(INTS("strides", 0)), "!strides [0]: entry 0 is out of range (1 to 2147483647)");
  CHECKA(OP_CONV, V(x1, w3), A(INTS("strides", INT64_MAX)), "!strides [9223372036854775807]: entry 9223372036854775807 is out of range");
  CHECKA(OP_CONV, V(x1, w3), A(INTS("strides", 2147483647)), "f32[1, 1, 1]");
  CHECKA(OP_CONV, V(x1, w3), A(INTS("dilations", 2147483647)), "!the kernel (3 with dilation 2147483647) is bigger than the padded input (10)");
  CHECKA(OP_CONV, V(x1, w3), A(INTS("dilations", -1)), "!out of range");
  CHECKA(OP_CONV, V(x1, w3), A(INTS("pads", INT64_MAX, 0)), "!out of range");
  CHECKA(OP_CONV, V(x1, w3), A(INT("group", INT64_MAX)), "!group must be positive");
  CHECKA(OP_CONV, V(x1, w3), A(INT("group", 0)), "!group must be positive");
  CHECK(OP_CONV, V(x1, in("f32[1, 1, 2147483648]")), "!kernel dim 0 of w f32[1, 1, 2147483648] is out of range");
  CHECK(OP_CONV, V(in("f32[1, 0, 10]"), in("f32[4, 0, 3]")), "f32[1, 4, 8]");
  CHECK(OP_CONV, V(in("f32[1, 1, 0]"), w3), "!bigger than the padded input (0)");
  CHECK(OP_CONV, V(in("f32[1, 1, 1099511627776]"), w3), "f32[1, 1, 1099511627774]");
  Value *xt = in("f32[1, 1, 1099511627776]");
  CHECKA(OP_CONV_TRANSPOSE, V(xt, w3), A(INTS("strides", 2147483647)), "!spatial dim 0 of f32[1, 1, 1099511627776] is out of range");
  CHECKA(OP_CONV_TRANSPOSE, V(in("f32[1, 1, 1048576]"), w3), A(INTS("strides", 2147483647)), "!too large");
  CHECKA(OP_CONV_TRANSPOSE, V(in("f32[1, 1, 0]"), w3), A(INTS("strides", 2)), "!spatial dim 0 of f32[1, 1, 0] is out of range");
  CHECKA(OP_CONV_TRANSPOSE, V(in("f32[1, 1, 1]"), w3), A(INTS("pads", 2, 1)), "f32[1, 1, 0]");
  CHECKA(OP_CONV_TRANSPOSE, V(in("f32[1, 1, 1]"), w3), A(INTS("pads", 2, 2)), "!pads remove more than the whole output");
  CHECKA(OP_CONV_TRANSPOSE, V(in("f32[1, 1, 2]"), w3), A(INTS("dilations", 2147483647)), "f32[1, 1, 4294967296]");
  CHECKA(OP_CONV_TRANSPOSE, V(in("f32[1, 1, 2]"), w3), A(INTS("output_padding", INT64_MAX)), "!out of range");
  CHECKA(OP_MAX_POOL, V(in("f32[1, 1, 5]")), A(INTS("kernel_shape", 2), INTS("strides", 2147483647), INTS("pads", 0, 1), INT("ceil_mode", 1)), "f32[1, 1, 1]");
  CHECKA(OP_MAX_POOL, V(in("f32[1, 1, 5]")), A(INTS("kernel_shape", INT64_MAX)), "!kernel_shape [9223372036854775807]: entry 9223372036854775807 is out of range");
  CHECKA(OP_MAX_POOL, V(in("f32[1, 1, 5]")), A(INTS("kernel_shape", 0)), "!out of range");
  CHECKA(OP_AVERAGE_POOL, V(in("f32[1, 1, 5]")), A(INTS("kernel_shape", 2147483647), INTS("pads", 2147483646, 2147483646)), "f32[1, 1, 2147483651]");
  CHECKA(OP_AVERAGE_POOL, V(in("f32[1, 1, 0]")), A(INTS("kernel_shape", 1)), "!bigger than the padded input (0)");
  CHECKA(OP_MAX_UNPOOL, V(xt, in("i64[1, 1, 1099511627776]")), A(INTS("kernel_shape", 2), INTS("strides", 2147483647)), "!spatial dim 0 of f32[1, 1, 1099511627776] is out of range");
  CHECKA(OP_MAX_UNPOOL, V(in("f32[1, 1, 1048576]"), in("i64[1, 1, 1048576]")), A(INTS("kernel_shape", 2), INTS("strides", 2147483647)), "!too large");
  CHECKA(OP_MAX_UNPOOL, V(in("f32[1, 1, 0]"), in("i64[1, 1, 0]")), A(INTS("kernel_shape", 2)), "!spatial dim 0 of f32[1, 1, 0] is out of range");
  CHECKA(OP_MAX_UNPOOL, V(in("f32[1, 1, 1]"), in("i64[1, 1, 1]")), A(INTS("kernel_shape", 2), INTS("pads", 1, 2)), "!pads remove more than the whole output");
  /* resize: the scales divide coordinates, so they are finite; sizes are the output */
  Value *r4 = in("f32[1, 1, 2, 2]");
  CHECKA(OP_RESIZE, V(r4), A(INTS("sizes", -1, -1, 4, 4), attr_make_floats("scales", (double[]){1, 1, INFINITY, 2}, 4)), "!scales must be positive and finite, got inf on dim 2");
  CHECKA(OP_RESIZE, V(r4), A(INTS("sizes", -1, -1, 4, 4), attr_make_floats("scales", (double[]){1, 1, NAN, 2}, 4)), "!scales must be positive and finite");
  CHECKA(OP_RESIZE, V(r4), A(INTS("sizes", -1, -1, 4, 4), attr_make_floats("scales", (double[]){1, 1, 1e-310, 2}, 4)), "f32[1, 1, 4, 4]");
  CHECKA(OP_RESIZE, V(r4), A(INTS("sizes", -1, -1, INT64_MAX, 4)), "!too large");
  CHECKA(OP_RESIZE, V(in("f32[1, 1, 0, 2]")), A(INTS("sizes", -1, -1, 0, 4)), "f32[1, 1, 0, 4]");
  /* the rest, where an attribute sets a size */
  Value *d4 = in("f32[1, 4, 2147483647, 2147483647]");
  CHECKA(OP_SPACE_TO_DEPTH, V(d4), A(INT("blocksize", 2147483647)), "!dim 1 of f32[1, 4, 2147483647, 2147483647] times 4611686014132420609 overflows");
  CHECKA(OP_DEPTH_TO_SPACE, V(in("f32[1, 4, 2, 2]")), A(INT("blocksize", 2147483647)), "!is not divisible by 4611686014132420609");
  CHECKA(OP_DEPTH_TO_SPACE, V(in("f32[1, 4, 2, 2]")), A(INT("blocksize", INT64_MAX)), "!blocksize must be positive");
  Value *oh = in("i64[2]"), *ov = in("f32[2]");
  Attr oh_big[] = {INT("depth", INT64_MAX)};
  check_node(__LINE__, OP_ONE_HOT, V(oh, ov), 2, oh_big, 1, 1, 0, "!too large");
  Attr tk[] = {INT("k", INT64_MAX)};
  check_node(__LINE__, OP_TOPK, V(in("f32[5]")), 1, tk, 1, 2, 0, "!k 9223372036854775807 is out of range");
  CHECKA(OP_TRILU, V(in("f32[3, 3]")), A(INT("k", INT64_MIN)), "f32[3, 3]");
  CHECKA(OP_ROI_ALIGN, V(in("f32[1, 1, 4, 4]"), in("f32[2, 4]"), in("i64[2]")), A(INT("output_height", INT64_MAX)), "!must be positive");
  CHECKA(OP_ROI_ALIGN, V(in("f32[1, 1, 4, 4]"), in("f32[2, 4]"), in("i64[2]")), A(INT("sampling_ratio", INT64_MAX)), "!sampling_ratio must be 0");
  CHECKA(OP_LRN, V(in("f32[1, 3, 2]")), A(INT("size", INT64_MAX)), "f32[1, 3, 2]");
  CHECK(OP_RANGE, V(scalar(DT_I64, INT64_MIN), scalar(DT_I64, INT64_MAX), scalar(DT_I64, 1)), "!the range is too long");
  CHECK(OP_RANGE, V(scalar(DT_F64, 0), scalar(DT_F64, INFINITY), scalar(DT_F64, 1)), "!too long");
  CHECK(OP_RANGE, V(scalar(DT_F64, 0), scalar(DT_F64, 1), scalar(DT_F64, NAN)), "!too long");
  CHECK(OP_RANGE, V(scalar(DT_F64, 0), scalar(DT_F64, 1), scalar(DT_F64, 1e-300)), "!too long");
}

static void test_attrs_and_inputs(void) {
  Value *x = in("f32[2, 3]");
  CHECKA(OP_SOFTMAX, V(x), A(INTS("axes", 1)), "!softmax has no attribute 'axes' (it has: axis)");
  CHECKA(OP_RELU, V(x), A(INT("axis", 1)), "!relu has no attribute 'axis' (it has: none)");
  CHECKA(OP_SOFTMAX, V(x), A(attr_make_float("axis", 1)), "!attribute 'axis' of softmax must be int, got float");
  CHECKA(OP_SOFTMAX, V(x), A(INT("axis", 1), INT("axis", 0)), "!attribute 'axis' of softmax is given twice");
  /* a value that nothing has typed yet */
  Value *w = in("f32[3, 4]");
  const char *nm[] = {"h"};
  Node *n = graph_add_node(g, OP_RELU, V(w), 1, NULL, 0, nm, 1);
  n->out[0]->type = type_unknown();
  CHECK(OP_MATMUL, V(x, n->out[0]), "!input %h of matmul has no type");
  CHECK(OP_ADD, V(x, NULL), "!input 1 of add is missing");
}

/* ir_infer over a whole graph: types are filled in, and a declared type must agree. */
static void test_graph(void) {
  Graph *saved = g;
  g = graph_new("t");
  Value *x = graph_add_input(g, "x", parse_type("f32[N, 784]"));
  Tensor *wt = tensor_in_arena(g->arena, DT_F32, 2, (int64_t[]){784, 128});
  Value *w = graph_add_const(g, "w", wt);
  const char *hn[] = {"h"}, *yn[] = {"y"};
  Node *mm = graph_add_node(g, OP_MATMUL, V(x, w), 2, NULL, 0, hn, 1);
  Node *sm = graph_add_node(g, OP_SOFTMAX, mm->out, 1, NULL, 0, yn, 1);
  Diag d = {0};
  char buf[256];
  if (ir_infer(g, &d) || strcmp(type_str(&sm->out[0]->type, buf, sizeof buf), "f32[N, 128]")) {
    fprintf(stderr, "%s:%d: ir_infer: %s %s\n", __FILE__, __LINE__, d.msg, buf);
    failures++;
  }
  /* the symbol of the result is the graph's interned one */
  if (sm->out[0]->type.shape.dims[0].sym != graph_intern(g, "N")) {
    fprintf(stderr, "%s:%d: symbol not reused\n", __FILE__, __LINE__);
    failures++;
  }
  mm->out[0]->type = parse_type("f32[N, 64]");
  mm->loc = (SrcLoc){"t.gir", "graph t(%x: f32[N, 784]) {\n  %h: f32[N, 64] = %x @ %w\n}", 2, 22};
  d = (Diag){0};
  const char *want = "t.gir:2:22: error: type mismatch: %h is declared f32[N, 64] but matmul gives f32[N, 128]";
  if (ir_infer(g, &d) == 0 || strncmp(d.msg, want, strlen(want)) || !strstr(d.msg, "                     ^")) {
    fprintf(stderr, "%s:%d: ir_infer mismatch: got '%s'\n", __FILE__, __LINE__, d.msg);
    failures++;
  }
  /* an untyped input */
  Graph *g2 = graph_new("u");
  graph_add_input(g2, "x", type_unknown());
  d = (Diag){0};
  if (ir_infer(g2, &d) == 0 || !strstr(d.msg, "input %x has no type")) {
    fprintf(stderr, "%s:%d: want untyped input error, got '%s'\n", __FILE__, __LINE__, d.msg);
    failures++;
  }
  graph_free(g2);
  /* graph_op infers at once and leaves the graph untouched on failure */
  d = (Diag){0};
  int before = g->nnodes;
  Value *bad = graph_op(g, &d, OP_ADD, V(x, w), 2, NULL, 0, NULL);
  if (bad || g->nnodes != before || !strstr(d.msg, "cannot broadcast f32[N, 784] and f32[784, 128]")) {
    fprintf(stderr, "%s:%d: graph_op: '%s'\n", __FILE__, __LINE__, d.msg);
    failures++;
  }
  graph_free(g);
  g = saved;
}

int main(void) {
  g = graph_new("test");
  test_unary();
  test_binary();
  test_matmul();
  test_reductions();
  test_reshape();
  test_layout();
  test_concat_slice_split_gather();
  test_nn();
  test_nn_layout();
  test_range();
  test_sizes();
  test_onnx_ops();
  test_onnx_ops3();
  test_attrs_and_inputs();
  test_graph();
  graph_free(g);
  if (failures) {
    fprintf(stderr, "test_infer: %d failure(s)\n", failures);
    return 1;
  }
  printf("test_infer: ok\n");
  return 0;
}
