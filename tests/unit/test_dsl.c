/* Unit tests of the text form: the printer (ir/print.c) and the DSL parser
 * (frontends/dsl). The key property is print(parse(print(g))) == print(g) byte for byte;
 * it is checked on hand-written canonical files and on graphs built through the builder
 * with random names (any byte), every dtype with random element bits, symbolic dims,
 * scalars, every constant init and node origins. Errors are checked by substring and by
 * their file:line:col prefix. Runs with the repository root as working directory. */
#include "frontends/frontends.h"
#include "tests/unit/check.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>



static Graph *parse(const char *text, Diag *d) {
  memset(d, 0, sizeof *d);
  return dsl_parse("t.gir", text, strlen(text), d);
}

/* print(parse(text)), or NULL with the error on stderr. */
static char *reprint(const char *text) {
  Diag d;
  Graph *g = parse(text, &d);
  if (!g) {
    fprintf(stderr, "unexpected error:\n%s\n", d.msg);
    return NULL;
  }
  char *s = ir_print_str(g);
  graph_free(g);
  return s;
}

/* The text is canonical: it prints back as itself. */
static void check_canonical(const char *text) {
  char *p = reprint(text);
  CHECK(p && !strcmp(p, text));
  if (p && strcmp(p, text))
    fprintf(stderr, "--- want\n%s--- got\n%s", text, p);
  free(p);
}

/* Any text: print(parse(print(parse(text)))) == print(parse(text)). */
static void check_roundtrip(const char *text) {
  char *a = reprint(text);
  char *b = a ? reprint(a) : NULL;
  CHECK(a && b && !strcmp(a, b));
  if (a && b && strcmp(a, b))
    fprintf(stderr, "--- first\n%s--- second\n%s", a, b);
  free(a);
  free(b);
}

/* Parsing fails with `want` in the message, at t.gir:line:col. */
static void check_error(const char *text, int line, int col, const char *want) {
  Diag d;
  Graph *g = parse(text, &d);
  CHECK(!g && d.failed);
  char where[64];
  snprintf(where, sizeof where, "t.gir:%d:%d: error: ", line, col);
  bool ok = !g && !strncmp(d.msg, where, strlen(where)) && strstr(d.msg, want);
  CHECK(ok);
  if (!ok)
    fprintf(stderr, "want %s...%s\ngot  %s\n", where, want, g ? "(parsed)" : d.msg);
  graph_free(g);
}

/* ---------------------------------------------------------------- canonical files */

static void test_canonical(void) {
  check_canonical(
      "graph mlp(%x: f32[N, 784]) {\n"
      "  %w1 = const f32[784, 128] random(seed = 1, scale = 0.05)\n"
      "  %b1 = const f32[128] zeros\n"
      "  %c = const f32[2, 2] [[1, 2], [3, 4.5]]\n"
      "  %s = const f32[] 3\n"
      "  %o = const i32[2, 0] [[], []]\n"
      "  %f = const bf16[3] full(-inf)\n"
      "  %e = const f16[1] ones\n"
      "  %h: f32[N, 128] = matmul(%x, %w1)\n"
      "  %a: f32[N, 64], %b: f32[N, 64] = split(%h) {axis = 1, split = [64, 64]}\n"
      "  %y: f32[N, 64] = softmax(%a) {axis = -1} @\"onnx-node-name\"\n"
      "  %l: f32[N, 64] = leaky_relu(%b) {alpha = 1e-300}\n"
      "  %k: f32[N, 64] = clip(%l) {min = -1.0, max = 100.0}\n"
      "  %z: f32[N, 64] = add(%k, %s)\n"
      "  return %y, %b, %z, %o, %c, %f, %e\n"
      "}\n");
  check_canonical(
      "graph \"torch-jit:export\"(%\"input:1\": f32[\"batch size\", 3], %\"\\x01\\x7f\\xff\": i64[]) {\n"
      "  %\"onnx::Add_7\" = const f32[3] [0.1, -0, 3.4028235e+38]\n"
      "  %\"q\\\"b\\\\s\\n\\t\" = const f32[] nan\n"
      "  %0: f32[\"batch size\", 3] = add(%\"input:1\", %\"onnx::Add_7\") @\"\\x1fx\"\n"
      "  %1: f32[\"batch size\", 3] = mul(%0, %\"q\\\"b\\\\s\\n\\t\")\n"
      "  %2: f32[\"batch size\", 3] = slice(%1) {starts = [0], ends = [9223372036854775807], "
      "axes = [-1], steps = [1]}\n"
      "  %3: f32[\"batch size\", 3] = slice(%2) {starts = [-9223372036854775808], ends = [3], axes = [1]}\n"
      "  return %3, %\"\\x01\\x7f\\xff\"\n"
      "}\n");
}

/* Sugar, values used before their definition, numeric names the source defines later. */
static void test_sugar(void) {
  const char *text =
      "graph s(%x: f32[4], %w: f32[4, 4]) {\n"
      "  %y = relu(%x @ %w + %x) * -%x\n"
      "  %z = %u\n"
      "  %u = (%y - %x) / %y\n"
      "  %3 = %x - %x - %x\n"
      "  return %z, %3\n"
      "}\n";
  char *p = reprint(text);
  CHECK(p && strstr(p, "  %3: f32[4] = sub(%"));
  CHECK(p && strstr(p, "= matmul(%x, %w)\n"));
  CHECK(p && strstr(p, "  %z: f32[4] = identity(%u)\n"));
  /* %u is sorted before its use. */
  CHECK(p && strstr(p, "%u: f32[4]") && strstr(p, "%u: f32[4]") < strstr(p, "%z: f32[4]"));
  free(p);
  check_roundtrip(text);
}

/* ---------------------------------------------------------------- numbers */

static void check_double(double v, const char *want) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ir_print_double(f, v);
  fclose(f);
  CHECK(!strcmp(buf, want));
  if (strcmp(buf, want))
    fprintf(stderr, "ir_print_double: want %s, got %s\n", want, buf);
  free(buf);
}

static void test_numbers(void) {
  check_double(1, "1.0");
  check_double(-2.5, "-2.5");
  check_double(0.05, "0.05");
  check_double(0.1, "0.1");
  check_double(10, "10.0");
  check_double(1e16, "1e+16");
  check_double(1e-5, "1e-05");
  check_double(1e23, "1e+23");
  check_double(5e-324, "5e-324");
  check_double(-0.0, "-0.0");
  check_double(INFINITY, "inf");
  check_double(-INFINITY, "-inf");
  check_double(NAN, "nan");
  check_double(0.1 + 0.2, "0.30000000000000004");
  /* every double of a sample reads back exactly */
  uint64_t s = 12345;
  for (int i = 0; i < 20000; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    double v;
    uint64_t bits = s ^ (s >> 29);
    memcpy(&v, &bits, 8);
    if (isnan(v))
      continue;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ir_print_double(f, v);
    fclose(f);
    double r = strtod(buf, NULL);
    CHECK(memcmp(&r, &v, 8) == 0);
    CHECK(strpbrk(buf, ".en") != NULL);
    free(buf);
  }
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ir_print_float32(f, 0.1f);
  fputc(' ', f);
  ir_print_float32(f, 16777216.0f);
  fclose(f);
  CHECK(!strcmp(buf, "0.1 16777216.0"));
  free(buf);
}

/* ---------------------------------------------------------------- builder graphs */

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* A random name of any bytes but NUL, sometimes plain. */
static void random_name(char *buf, int salt) {
  int n = 1 + (int)(next_rand() % 6);
  bool plain = next_rand() % 2;
  for (int i = 0; i < n; i++)
    buf[i] = plain ? "abcXYZ_.09"[next_rand() % 10] : (char)(1 + next_rand() % 255);
  snprintf(buf + n, 16, "%d", salt);
}

static Tensor *random_tensor(Arena *a, DType dt, int rank, const int64_t *dims) {
  Tensor *t = tensor_in_arena(a, dt, rank, dims);
  unsigned char *p = t->data;
  for (size_t i = 0; i < tensor_nbytes(t); i++)
    p[i] = (unsigned char)next_rand();
  if (dt == DT_BOOL)
    for (size_t i = 0; i < tensor_nbytes(t); i++)
      p[i] &= 1;
  return t;
}

/* Element bits equal, NaNs aside (a NaN prints as nan whatever its payload). */
static bool same_data(const Tensor *a, const Tensor *b) {
  if (a->dtype != b->dtype || tensor_numel(a) != tensor_numel(b))
    return false;
  size_t es = dtype_size(a->dtype);
  for (int64_t i = 0; i < tensor_numel(a); i++) {
    const char *x = (const char *)a->data + (size_t)i * es, *y = (const char *)b->data + (size_t)i * es;
    if (dtype_is_float(a->dtype) && isnan(dtype_load_f64(a->dtype, x)))
      continue;
    if (memcmp(x, y, es))
      return false;
  }
  return true;
}

static void test_builder_roundtrip(int seed) {
  rng += (uint64_t)seed * 0x9E3779B97F4A7C15ull;
  char name[32];
  random_name(name, seed);
  Graph *g = graph_new(name);
  const char *syms[] = {"N", "batch", "seq len", "inf", "2x", "a.b"};
  int salt = 0;
  for (int dt = 0; dt < DT_COUNT; dt++) {
    int rank = (int)(next_rand() % 4);
    int64_t dims[IR_MAX_RANK];
    Type ty = {(DType)dt, {rank, {{0, NULL}}}};
    for (int i = 0; i < rank; i++) {
      dims[i] = (int64_t)(next_rand() % 4);
      ty.shape.dims[i] = next_rand() % 3 ? (Dim){dims[i], NULL}
                                         : (Dim){-1, syms[next_rand() % 6]};
    }
    random_name(name, salt++);
    Value *in = graph_add_input(g, name, ty);
    random_name(name, salt++);
    Value *c = graph_add_const(g, name, random_tensor(g->arena, (DType)dt, rank, dims));
    int k = (int)(next_rand() % 5);
    c->init = (ConstInit)k; /* the printer writes what init says; the data follows */
    if (k == CI_ZEROS)
      tensor_fill_value(c->data, 0);
    else if (k == CI_ONES)
      tensor_fill_value(c->data, 1);
    else if (k == CI_FULL) {
      c->fill = (double)(int64_t)(next_rand() % 200) / 8 - 10;
      tensor_fill_value(c->data, c->fill);
    } else if (k == CI_RANDOM) {
      c->seed = next_rand();
      c->scale = (double)(next_rand() % 1000) / 64;
      tensor_fill_random(c->data, c->seed, c->scale);
    }
    Value *ins[1] = {in};
    random_name(name, salt++);
    const char *names[1] = {name};
    Node *n = graph_add_node(g, OP_IDENTITY, ins, 1, NULL, 0, names, 1);
    if (next_rand() % 2) {
      random_name(name, salt++);
      n->origin = arena_strdup(g->arena, name);
    }
    graph_add_output(g, n->out[0]);
    graph_add_output(g, c);
    if (dtype_is_float((DType)dt)) {
      double v;
      uint64_t bits = next_rand();
      memcpy(&v, &bits, 8);
      if (isnan(v))
        v = INFINITY;
      Attr a = attr_make_float("alpha", v);
      ins[0] = n->out[0];
      random_name(name, salt++);
      Node *m = graph_add_node(g, OP_LEAKY_RELU, ins, 1, &a, 1, names, 1);
      graph_add_output(g, m->out[0]);
    }
  }
  Diag d = {0};
  CHECK(ir_infer(g, &d) == 0);
  char *a = ir_print_str(g);
  Graph *h = dsl_parse("r.gir", a, strlen(a), &d);
  CHECK(h != NULL);
  if (!h) {
    fprintf(stderr, "%s\n", d.msg);
  } else {
    char *b = ir_print_str(h);
    CHECK(!strcmp(a, b));
    if (strcmp(a, b))
      fprintf(stderr, "--- first\n%s--- second\n%s", a, b);
    free(b);
    CHECK(h->nconsts == g->nconsts);
    for (int i = 0; i < g->nconsts && i < h->nconsts; i++)
      CHECK(same_data(g->consts[i]->data, h->consts[i]->data));
  }
  /* graph_clone: the same text */
  Graph *c = graph_clone(g);
  char *cs = c ? ir_print_str(c) : NULL;
  CHECK(cs && !strcmp(a, cs));
  free(cs);
  graph_free(c);
  free(a);
  graph_free(h);
  graph_free(g);
}

/* Attribute kinds no op has yet (tensors, float lists) print and parse; ir_check_attrs
 * then names them as unknown, which shows the parser took them. */
/* graph_clone keeps the ranges and what the loader bound. */
static void test_clone_ranges(void) {
  const char *text = "graph g(%x: f32[batch, seq, 4]) dims(batch = 1..8, seq = 1, 3..16) {\n"
                     "  %y = softmax(%x) {axis = 1}\n"
                     "  return %y\n"
                     "}\n";
  Diag d = {0};
  Graph *g = parse(text, &d);
  CHECK(g != NULL);
  if (!g)
    return;
  graph_note_bound(g, "n", 5, 0, 2);
  Graph *c = graph_clone(g);
  char *a = ir_print_str(g), *b = c ? ir_print_str(c) : NULL;
  CHECK(b && !strcmp(a, b));
  CHECK(c && c->nranges == 2 && c->nbound == 1 && c->bound[0].size == 5 && c->bound[0].axis == 2);
  free(a);
  free(b);
  graph_free(c);
  graph_free(g);
}

static void test_unusual_attrs(void) {
  Graph *g = graph_new("u");
  Type t = {DT_F32, {1, {{2, NULL}}}};
  Value *x = graph_add_input(g, "x", t);
  int64_t dims[1] = {2};
  Tensor *tt = tensor_in_arena(g->arena, DT_F32, 1, dims);
  ((float *)tt->data)[0] = 1;
  ((float *)tt->data)[1] = 2.5f;
  double fl[2] = {1, 0.5};
  Attr attrs[3] = {{.name = "value", .kind = AK_TENSOR}, {.name = "scales", .kind = AK_FLOATS, .n = 2},
                   {.name = "none", .kind = AK_FLOATS}};
  attrs[0].t = tt;
  attrs[1].floats = fl;
  attrs[2].floats = fl;
  Node *n = graph_add_node(g, OP_RELU, &x, 1, attrs, 3, NULL, 1);
  graph_add_output(g, n->out[0]);
  char *s = ir_print_str(g);
  CHECK(strstr(s, "= relu(%x) {value = f32[2] [1, 2.5], scales = [1.0, 0.5], none = []}\n"));
  Diag d;
  Graph *h = parse(s, &d);
  CHECK(!h && strstr(d.msg, "value") && !strstr(d.msg, "expected"));
  graph_free(h);
  free(s);
  graph_free(g);
}

/* ---------------------------------------------------------------- files */

static void test_load(void) {
  const char *text =
      "graph l(%x: f32[2, 3]) {\n"
      "  %w = const f32[2, 3] load(\"../data/small.npy\")\n"
      "  %y = add(%x, %w)\n"
      "  return %y\n"
      "}\n";
  Diag d = {0};
  Graph *g = dsl_parse("tests/unit/l.gir", text, strlen(text), &d);
  CHECK(g != NULL);
  if (!g) {
    fprintf(stderr, "%s\n", d.msg);
    return;
  }
  const Value *w = g->consts[0];
  CHECK(w->init == CI_FILE && w->path && w->path[0] == '/' && !w->key);
  CHECK(strstr(w->path, "/tests/data/small.npy") != NULL);
  CHECK(((const float *)w->data->data)[5] == -2.5f);
  char *s = ir_print_str(g);
  Graph *h = dsl_parse("elsewhere/x.gir", s, strlen(s), &d); /* absolute: found anywhere */
  CHECK(h != NULL);
  char *s2 = h ? ir_print_str(h) : NULL;
  CHECK(s2 && !strcmp(s, s2));
  free(s);
  free(s2);
  graph_free(h);
  graph_free(g);

  const char *bad = "graph l(%x: f32[2, 3]) {\n"
                    "  %w = const f32[3, 2] load(\"tests/data/small.npy\")\n"
                    "  return %w\n"
                    "}\n";
  check_error(bad, 2, 24, "f32[2, 3]");

  memset(&d, 0, sizeof d);
  CHECK(dsl_parse_file("tests/unit/no-such-file.gir", &d) == NULL);
  CHECK(strstr(d.msg, "cannot open 'tests/unit/no-such-file.gir': No such file or directory"));
}

/* ---------------------------------------------------------------- errors */

static void test_errors(void) {
  check_error("graph g(%x: f32[4]) {\n  %y = relux(%x)\n  return %y\n}\n", 2, 8,
              "unknown op 'relux'");
  check_error("graph g(%x: f32[4]) {\n  %y = add(%x, %x, %x)\n  return %y\n}\n", 2, 8,
              "op 'add' takes 2 inputs, got 3");
  check_error("graph g(%x: f32[4]) {\n  %y = relu(%q)\n  return %y\n}\n", 2, 13,
              "use of undefined value '%q'");
  check_error("graph g(%x: f32[4]) {\n  %y = relu(%x)\n  return %z\n}\n", 3, 10,
              "use of undefined value '%z'");
  check_error("graph g(%x: f32[4]) {\n  %h = relu(%x)\n  %h = neg(%x)\n  return %h\n}\n", 3, 3,
              "value '%h' is defined twice");
  {
    Diag d;
    Graph *g = parse("graph g(%x: f32[4]) {\n  %h = relu(%x)\n  %h = neg(%x)\n  return %h\n}\n", &d);
    CHECK(!g && strstr(d.msg, "t.gir:2:3: note:"));
  }
  check_error("graph g(%x: f32[4]) {\n  %a, %a = split(%x) {split = [2, 2]}\n  return %a\n}\n",
              2, 7, "defined twice");
  check_error("graph g(%x: f32[N, 784]) {\n  %w = const f32[784, 128] zeros\n"
              "  %h: f32[N, 64] = matmul(%x, %w)\n  return %h\n}\n",
              3, 20, "type mismatch");
  check_error("graph g(%x: f32[4]) {\n  %a = add(%x, %c)\n  %b = relu(%a)\n  %c = neg(%b)\n"
              "  return %c\n}\n", 2, 8, "cycle");
  check_error("graph g(%x: f32[4]) {\n  %y = relu(%x)  /* never\n  ends\n}\n", 2, 18,
              "unterminated comment");
  check_error("graph g(%x: f32[4]) {\n  %y = gelu(%x) {approximate = \"tanh}\n  return %y\n}\n",
              2, 32, "unterminated string");
  check_error("graph g(%\"a\\qb\": f32[4]) {\n  return %\"a\\qb\"\n}\n", 1, 12, "bad escape");
  check_error("graph g(%x: f32[4]) {\n  %y = relu(%x) $\n  return %y\n}\n", 2, 17, "'$'");
  check_error("graph g(%x: f32[99999999999999999999]) {\n  return %x\n}\n", 1, 17,
              "integer literal out of range");
  check_error("graph g(%x: f32[2]) {\n  %c = const i64[2] [1, 9223372036854775808]\n"
              "  return %c\n}\n", 2, 25, "integer literal out of range");
  check_error("graph g(%x: f32[4294967296, 4294967296]) {\n  return %x\n}\n", 1, 29,
              "the shape has more than 2^48 elements");
  check_error("graph g(%x: f32[0, 281474976710657]) {\n  return %x\n}\n", 1, 20,
              "dim 281474976710657 is larger than 2^48");
  check_error("graph g(%x: f32[-1]) {\n  return %x\n}\n", 1, 17, "negative dim");
  check_error("graph g(%x: f33[4]) {\n  return %x\n}\n", 1, 13, "unknown dtype 'f33'");
  check_error("graph g(%x: f32[4]) {\n  %y = relu(%x)\n}\n", 3, 1, "missing 'return'");
  check_error("graph g(%x: f32[4]) {\n  return %x\n  %y = relu(%x)\n}\n", 2, 3,
              "'return' must be the last statement");
  check_error("graph g(%x: f32[2, 2]) {\n  %c = const f32[2, 2] [1, 2, 3]\n  return %c\n}\n", 2,
              24, "expected 4 elements for f32[2, 2], got 3");
  check_error("graph g(%x: f32[2, 2]) {\n  %c = const f32[2, 2] [1, 2, 3, 4]\n  return %c\n}\n",
              2, 24, "expected a list of 2 for dim 0");
  check_error("graph g(%x: f32[N]) {\n  %c = const f32[N] zeros\n  return %c\n}\n", 2, 14,
              "static");
  check_error("graph g(%x: f32[2]) {\n  %c = const u8[2] [1, 256]\n  return %c\n}\n", 2, 24,
              "out of range for u8");
  check_error("graph g(%x: f32[2]) {\n  %y = %x * 2\n  return %y\n}\n", 2, 13,
              "a number in an expression must be declared as a const");
  check_error("graph g(%x: f32[2]) {\n  %y = relu(%x\n  return %y\n}\n", 3, 3,
              "expected ')' or ',' but found 'return'");
  check_error("graph g(%x f32[2]) {\n  return %x\n}\n", 1, 12, "expected ':' but found 'f32'");
  check_error("graph g(%x: f32[2]) {\n  %y = relu(%x)\n  return %y\n", 4, 1,
              "unexpected end of file");
  check_error("graph g(%x: f32[2]) {\n  %c = const f32[2] bogus\n  return %c\n}\n", 2, 21,
              "unknown initializer 'bogus'");
  check_error("graph g(%x: f32[2]) {\n  %y, %z = relu(%x)\n  return %y\n}\n", 2, 3,
              "op 'relu' has 1 result, but 2 are named");
  check_error("graph g(%x: f32[2]) {\n  %y = cast(%x) {to = \"f99\"}\n  return %y\n}\n", 2, 18,
              "unknown dtype 'f99'");
  check_error("graph g(%x: f32[2]) {\n  %y = softmax(%x) {axes = [1]}\n  return %y\n}\n", 2, 8,
              "axes");
  {
    const char text[] = "graph g(%x: f32[1]) {\n  return %x\0\n}\n";
    Diag d = {0};
    Graph *g = dsl_parse("t.gir", text, sizeof text - 1, &d);
    CHECK(!g && !strncmp(d.msg, "t.gir:2:12: error: NUL byte in source", 37));
  }
}

/* Nesting far past the parser's stack is an error; long flat chains are fine. */
static void test_deep(void) {
  enum { DEEP = 100000 };
  size_t cap = 7 * DEEP + 256;
  char *buf = malloc(cap);
  const char *forms[][3] = {{"  %y = ", "(", ")"}, {"  %y = ", "-", ""},
                            {"  %y = const f32[1] ", "[", "]"}, {"  %y = ", "relu(", ")"}};
  for (int f = 0; f < 4; f++) {
    size_t at = (size_t)snprintf(buf, cap, "graph g(%%x: f32[1]) {\n%s", forms[f][0]);
    for (int i = 0; i < DEEP; i++)
      at += (size_t)snprintf(buf + at, cap - at, "%s", forms[f][1]);
    at += (size_t)snprintf(buf + at, cap - at, "%s", f == 2 ? "1" : "%x");
    for (int i = 0; i < DEEP; i++)
      at += (size_t)snprintf(buf + at, cap - at, "%s", forms[f][2]);
    snprintf(buf + at, cap - at, "\n  return %%y\n}\n");
    Diag d;
    Graph *g = parse(buf, &d);
    CHECK(!g && strstr(d.msg, "nested too deeply") && !strncmp(d.msg, "t.gir:2:", 8));
  }
  enum { LONG = 20000 };
  size_t at = (size_t)snprintf(buf, cap, "graph g(%%x: f32[1]) {\n  %%y = %%x");
  for (int i = 0; i < LONG; i++)
    at += (size_t)snprintf(buf + at, cap - at, " + %%x");
  snprintf(buf + at, cap - at, "\n  return %%y\n}\n");
  Diag d;
  Graph *g = parse(buf, &d);
  CHECK(g && g->nnodes == LONG);
  graph_free(g);
  free(buf);
}

int main(void) {
  test_canonical();
  test_sugar();
  test_numbers();
  for (int i = 0; i < 50; i++)
    test_builder_roundtrip(i);
  test_clone_ranges();
  test_unusual_attrs();
  test_load();
  test_errors();
  test_deep();
  if (failures)
    fprintf(stderr, "%d check(s) failed\n", failures);
  return failures != 0;
}
