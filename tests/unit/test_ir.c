/* Unit tests of ir/ir.c: element type conversions, the documented random generator, the
 * op table's attribute schemas and the graph builder. Expected values come from numpy
 * (float16) and from the formats' definitions, never from gpucc itself. */
#include "ir/ir.h"
#include "tests/unit/check.h"

#include <math.h>
#include <string.h>

static void test_f16(void) {
  /* numpy: np.float16(v).view(np.uint16) */
  CHECK(f32_to_f16(1.0f) == 0x3C00);
  CHECK(f32_to_f16(65504.0f) == 0x7BFF);
  CHECK(f32_to_f16(65519.0f) == 0x7BFF);
  CHECK(f32_to_f16(65520.0f) == 0x7C00);  /* rounds to inf */
  CHECK(f32_to_f16(0x1p-24f) == 0x0001);  /* smallest subnormal */
  CHECK(f32_to_f16(0x1p-25f) == 0x0000);  /* tie to even */
  CHECK(f32_to_f16(0x1.8p-25f) == 0x0001);
  CHECK(f32_to_f16(0.1f) == 0x2E66);
  CHECK(f32_to_f16(-2.5f) == 0xC100);
  CHECK(f32_to_f16(-0.0f) == 0x8000);
  CHECK((f32_to_f16(NAN) & 0x7C00) == 0x7C00 && (f32_to_f16(NAN) & 0x3FF));
  /* every non-NaN encoding decodes and re-encodes to itself */
  for (unsigned b = 0; b < 0x10000; b++) {
    float f = f16_to_f32((uint16_t)b);
    if (!isnan(f))
      CHECK(f32_to_f16(f) == b);
  }
}

static void test_bf16(void) {
  CHECK(f32_to_bf16(1.0f) == 0x3F80);
  CHECK(f32_to_bf16(-2.0f) == 0xC000);
  CHECK(f32_to_bf16(0x1.01p0f) == 0x3F80);  /* half way: to even, down */
  CHECK(f32_to_bf16(0x1.03p0f) == 0x3F82);  /* half way: to even, up */
  CHECK(f32_to_bf16(0x1.018p0f) == 0x3F81); /* past half way: up */
  CHECK(f32_to_bf16(INFINITY) == 0x7F80);
  for (unsigned b = 0; b < 0x10000; b++) {
    float f = bf16_to_f32((uint16_t)b);
    if (!isnan(f))
      CHECK(f32_to_bf16(f) == b);
  }
  /* the bit-level rounding against the general encoder (dtype_store_f64): every f32 whose
   * lower half is near a tie or a carry, and a stride through all others (NaNs, infs,
   * subnormals, the largest finite values included) */
  static const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
  int bad = 0;
  for (uint64_t hi = 0; hi < 0x10000; hi++)
    for (size_t k = 0; k < sizeof lows / sizeof lows[0] + 1; k++) {
      uint32_t u = (uint32_t)hi << 16 | (k < 6 ? lows[k] : (uint32_t)(hi * 40503u) & 0xffffu);
      float f;
      memcpy(&f, &u, 4);
      uint16_t want;
      dtype_store_f64(DT_BF16, &want, f);
      bad += f32_to_bf16(f) != want;
    }
  CHECK(bad == 0);
}

static void test_f8(void) {
  /* e4m3fn: bias 7, no inf, 0x7F is NaN, 448 the largest finite */
  CHECK(f32_to_f8e4m3(1.0f) == 0x38);
  CHECK(f32_to_f8e4m3(448.0f) == 0x7E);
  CHECK(f32_to_f8e4m3(1000.0f) == 0x7E);
  CHECK(f32_to_f8e4m3(-INFINITY) == 0xFE);
  CHECK((f32_to_f8e4m3(NAN) & 0x7F) == 0x7F);
  CHECK(f32_to_f8e4m3(0x1p-9f) == 0x01);
  CHECK(f8e4m3_to_f32(0x01) == 0x1p-9f);
  CHECK(f8e4m3_to_f32(0x7E) == 448.0f);
  CHECK(isnan(f8e4m3_to_f32(0x7F)));
  /* e5m2: IEEE-like, bias 15 */
  CHECK(f32_to_f8e5m2(1.0f) == 0x3C);
  CHECK(f32_to_f8e5m2(57344.0f) == 0x7B);
  CHECK(f32_to_f8e5m2(INFINITY) == 0x7C);
  CHECK(f8e5m2_to_f32(0x01) == 0x1p-16f);
  for (unsigned b = 0; b < 0x100; b++) {
    float f = f8e4m3_to_f32((uint8_t)b);
    if (!isnan(f))
      CHECK(f32_to_f8e4m3(f) == b);
    f = f8e5m2_to_f32((uint8_t)b);
    if (!isnan(f))
      CHECK(f32_to_f8e5m2(f) == b);
  }
}

static void test_int_stores(void) {
  unsigned char buf[8];
  dtype_store_f64(DT_I32, buf, -3.7);
  CHECK(dtype_load_i64(DT_I32, buf) == -3);
  dtype_store_f64(DT_I64, buf, 1e30); /* saturates, no UB */
  CHECK(dtype_load_i64(DT_I64, buf) == INT64_MAX);
  dtype_store_f64(DT_I64, buf, NAN);
  CHECK(dtype_load_i64(DT_I64, buf) == 0);
  dtype_store_i64(DT_I8, buf, 300); /* wraps like a C cast */
  CHECK(dtype_load_i64(DT_I8, buf) == 44);
  dtype_store_f64(DT_BOOL, buf, 0.5);
  CHECK(dtype_load_i64(DT_BOOL, buf) == 1);
  dtype_store_f64(DT_F32, buf, 1e300);
  CHECK(isinf(dtype_load_f64(DT_F32, buf)));
}

static void test_random(void) {
  /* The generator reimplemented in Python (see tensor_fill_random's comment), seed 1,
   * scale 0.5, rounded to float32. */
  static const float want[4] = {0.06656157225370407f, 0.2457817643880844f,
                                0.4710027575492859f, -0.05564078316092491f};
  int64_t dims[1] = {4};
  Tensor *t = tensor_new(DT_F32, 1, dims);
  tensor_fill_random(t, 1, 0.5);
  for (int i = 0; i < 4; i++)
    CHECK(((float *)t->data)[i] == want[i]);
  tensor_free(t);
}

static void test_schemas(void) {
  int n;
  const AttrSpec *s = op_attr_specs(OP_SOFTMAX, &n);
  CHECK(n == 1 && !strcmp(s[0].name, "axis") && s[0].kind == AK_INT && s[0].has_default &&
        s[0].def.i == -1);
  s = op_attr_specs(OP_LAYER_NORM, &n);
  CHECK(n == 2 && s[1].kind == AK_FLOAT && s[1].def.f == 1e-5);
  s = op_attr_specs(OP_TRANSPOSE, &n);
  CHECK(n == 1 && !s[0].required && !s[0].has_default);
  s = op_attr_specs(OP_RESHAPE, &n);
  CHECK(n == 1 && s[0].required && s[0].kind == AK_INTS);
  s = op_attr_specs(OP_CLIP, &n);
  CHECK(n == 2 && isinf(s[0].def.f) && s[0].def.f < 0);
  s = op_attr_specs(OP_REDUCE_SUM, &n);
  CHECK(n == 2 && s[0].has_default && s[0].def.n == 0);
  Op op;
  CHECK(op_from_name("layer_norm", &op) == 0 && op == OP_LAYER_NORM);
  CHECK(op_from_name("nope", &op) == -1);
  DType dt;
  CHECK(dtype_from_name("bf16", &dt) == 0 && dt == DT_BF16 && dtype_size(dt) == 2);
}

static void test_builder(void) {
  Graph *g = graph_new("t");
  Type t = type_unknown();
  t.dtype = DT_F32;
  t.shape.rank = 2;
  t.shape.dims[0] = (Dim){-1, "N"};
  t.shape.dims[1] = (Dim){4, NULL};
  Value *x = graph_add_input(g, "x", t);
  CHECK(x && graph_find_value(g, "x") == x);
  CHECK(graph_add_input(g, "x", t) == NULL); /* duplicate name */
  CHECK(x->type.shape.dims[0].sym == graph_intern(g, "N"));
  Value *ins[2] = {x, x};
  Node *n = graph_add_node(g, OP_ADD, ins, 2, NULL, 0, NULL, 1);
  CHECK(n && n->out[0]->def == n && !strcmp(n->out[0]->name, "1"));
  const char *names[1] = {"x"};
  CHECK(graph_add_node(g, OP_ADD, ins, 2, NULL, 0, names, 1) == NULL);
  graph_add_output(g, n->out[0]);
  CHECK(graph_count_uses(g, x) == 2 && graph_count_uses(g, n->out[0]) == 1);
  char buf[64];
  CHECK(!strcmp(type_str(&x->type, buf, sizeof buf), "f32[N, 4]"));
  /* many values: the name table grows */
  for (int i = 0; i < 1000; i++)
    CHECK(graph_add_node(g, OP_RELU, &x, 1, NULL, 0, NULL, 1) != NULL);
  CHECK(g->nvalues == 1002 && graph_find_value(g, "500") != NULL);
  graph_free(g);
}

static void test_diag(void) {
  Diag d = {0};
  const char *src = "graph g() {\n  %y = relux(%x)\n}\n";
  diag_error(&d, (SrcLoc){"t.gir", src, 2, 8}, "unknown op '%s'", "relux");
  CHECK(d.failed);
  CHECK(!strcmp(d.msg, "t.gir:2:8: error: unknown op 'relux'\n    %y = relux(%x)\n         ^"));
  diag_error(&d, (SrcLoc){0}, "second");
  CHECK(!strstr(d.msg, "second")); /* the first error is kept */
}

/* The checked size helpers: each edge that plain int64 arithmetic would wrap. */
static void test_checked_sizes(void) {
  int64_t r = 7;
  CHECK(size_add(INT64_MAX - 1, 1, &r) && r == INT64_MAX);
  CHECK(!size_add(INT64_MAX, 1, &r) && r == INT64_MAX);
  CHECK(!size_add(-1, 1, &r));
  CHECK(size_mul(0, INT64_MAX, &r) && r == 0);
  CHECK(size_mul((int64_t)1 << 31, (int64_t)1 << 31, &r) && r == (int64_t)1 << 62);
  CHECK(!size_mul((int64_t)1 << 32, (int64_t)1 << 31, &r));
  CHECK(!size_mul(-2, 3, &r));

  int64_t n = -1, b = -1;
  int64_t d1[] = {2, 3, 4};
  CHECK(dims_size(3, d1, DT_F32, &n, &b) && n == 24 && b == 96);
  CHECK(dims_size(0, d1, DT_F64, &n, &b) && n == 1 && b == 8);
  int64_t wraps[] = {(int64_t)1 << 62, 8}; /* 2^65 elements: wraps to 0 unchecked */
  CHECK(!dims_size(2, wraps, DT_F32, &n, &b));
  int64_t bytes_wrap[] = {(int64_t)1 << 61}; /* elements fit, f64 bytes do not */
  CHECK(!dims_size(1, bytes_wrap, DT_F64, &n, &b));
  int64_t at_max[] = {(int64_t)1 << 46};
  CHECK(dims_size(1, at_max, DT_F32, &n, &b) && b == IR_MAX_BYTES);
  CHECK(!dims_size(1, at_max, DT_F64, &n, &b));
  int64_t zero_huge[] = {0, INT64_MAX}; /* no elements, but a dim no loop may count to */
  CHECK(!dims_size(2, zero_huge, DT_F32, &n, &b));
  int64_t zero[] = {0, 5};
  CHECK(dims_size(2, zero, DT_F32, &n, &b) && n == 0 && b == 0);
  int64_t neg[] = {3, -1};
  CHECK(!dims_size(2, neg, DT_F32, &n, &b));
  CHECK(tensor_new(DT_F32, 2, wraps) == NULL);

  Shape s = {.rank = 2, .dims = {{-1, "N"}, {(int64_t)1 << 47, NULL}}};
  CHECK(shape_size(&s, DT_U8, &n, NULL) && n == (int64_t)1 << 47);
  CHECK(!shape_size(&s, DT_F32, &n, NULL));
  s.rank = -1;
  CHECK(!shape_size(&s, DT_F32, &n, NULL));

  /* conv and pool output lengths, as infer.c's window rule computes them */
  CHECK(window_len(9, 3, 2, 2, 1, 2, false, &r) && r == 4);   /* (12 - 5) / 2 + 1 */
  CHECK(window_len(10, 3, 2, 1, 0, 0, true, &r) && r == 5);   /* ceil(7 / 2) + 1 */
  CHECK(window_len(5, 2, 2, 1, 0, 1, true, &r) && r == 3);
  CHECK(window_len(4, 2, 2, 1, 0, 1, true, &r) && r == 2);    /* would start in the end pad */
  CHECK(window_len(2, 5, 1, 1, 0, 0, false, &r) && r == 0);   /* longer than the input */
  CHECK(!window_len(9, 3, 0, 1, 0, 0, false, &r));            /* stride 0: no division */
  CHECK(!window_len(9, 3, 1, 0, 0, 0, false, &r));
  CHECK(!window_len(9, 0, 1, 1, 0, 0, false, &r));
  CHECK(!window_len(9, 3, 1, 1, -1, 0, false, &r));
  CHECK(!window_len(9, INT64_MAX, 1, 2, 0, 0, false, &r));    /* the dilated span wraps */
  CHECK(!window_len(INT64_MAX, 1, 1, 1, 1, 0, false, &r));    /* the padded input wraps */
  CHECK(window_len(INT64_MAX - 2, 1, INT64_MAX, 1, 1, 1, true, &r) && r == 1); /* no wrap */

  CHECK(double_to_i64(-3.9, INT64_MIN, INT64_MAX, &r) && r == -3);
  CHECK(double_to_i64(-9223372036854775808.0, INT64_MIN, INT64_MAX, &r) && r == INT64_MIN);
  CHECK(!double_to_i64(9223372036854775808.0, INT64_MIN, INT64_MAX, &r));
  CHECK(!double_to_i64(NAN, INT64_MIN, INT64_MAX, &r));
  CHECK(!double_to_i64(INFINITY, INT64_MIN, INT64_MAX, &r));
  CHECK(!double_to_i64(1e10, 0, INT32_MAX, &r));
  CHECK(double_to_i64(2147483647.5, 0, INT32_MAX, &r) && r == INT32_MAX);
}

/* Ranges of symbolic dims: the text form, the checks and the shape classes
 * (docs/dynamic-shapes.md, sections 1 and 4). */
static void test_ranges(void) {
  DimRange r = {0};
  char buf[160];
  CHECK(range_parse("1,7,128..512", &r, buf, sizeof buf) == 0);
  CHECK(r.nseg == 3 && r.lo[0] == 1 && r.hi[0] == 1 && r.lo[2] == 128 && r.hi[2] == 512);
  CHECK(!strcmp(range_str(&r, buf, sizeof buf), "1, 7, 128..512"));
  CHECK(range_has(&r, 7) && range_has(&r, 300) && !range_has(&r, 8) && !range_has(&r, 513));
  CHECK(range_max(&r) == 512);
  int64_t b[32];
  /* 1, 7 (a point: its own class), 128, 256 (the powers of two in 128..511), 512 */
  CHECK(range_classes(&r, 1, b, 32) == 5);
  CHECK(b[0] == 1 && b[1] == 7 && b[2] == 128 && b[3] == 256 && b[4] == 512);
  CHECK(range_parse("1..64", &r, buf, sizeof buf) == 0 && range_classes(&r, 1, b, 32) == 7);
  CHECK(b[0] == 1 && b[5] == 32 && b[6] == 64);
  CHECK(range_parse("7..512", &r, buf, sizeof buf) == 0 && range_classes(&r, 1, b, 32) == 7);
  CHECK(b[0] == 8 && b[6] == 512); /* 7 runs in the class of 8 */
  CHECK(range_parse("129..200", &r, buf, sizeof buf) == 0 && range_classes(&r, 1, b, 32) == 1);
  CHECK(b[0] == 200);
  CHECK(range_parse("1..2147483648", &r, buf, sizeof buf) == 0);
  CHECK(range_classes(&r, 1, b, 32) == 32 && range_classes(&r, 1, b, 31) == -1);
  /* two steps an octave, at 2^(1/2) rounded up (three from 128 up, at 2^(1/3)): a size
   * pads by 1.44x at most, and by 1.31x from 128 up */
  CHECK(range_parse("1..64", &r, buf, sizeof buf) == 0 && range_classes(&r, 2, b, 32) == 12);
  CHECK(b[0] == 1 && b[1] == 2 && b[2] == 3 && b[3] == 4 && b[4] == 6 && b[6] == 12 &&
        b[8] == 23 && b[9] == 32 && b[10] == 46 && b[11] == 64);
  CHECK(range_parse("1,7,100..300", &r, buf, sizeof buf) == 0 && range_classes(&r, 2, b, 32) == 7);
  CHECK(b[0] == 1 && b[1] == 7 && b[2] == 128 && b[3] == 168 && b[4] == 208 && b[5] == 256 &&
        b[6] == 300);
  for (int64_t size = 100; size <= 300; size++) {
    int k = 2;
    while (b[k] < size)
      k++;
    CHECK(b[k] * 100 <= size * 131);
  }
  /* 1; 2, 4, ..., 64 and a step each; 128, ..., 32768 and two steps each; 65536 */
  int64_t bb[64];
  CHECK(range_parse("1..65536", &r, buf, sizeof buf) == 0 && range_classes(&r, 2, bb, 64) == 41);
  CHECK(range_classes(&r, 2, bb, 40) == -1);
  int n3 = range_classes(&r, 3, bb, 64);
  CHECK(n3 > 41);
  for (int64_t size = 1; size <= 65536; size += size / 7 + 1) { /* steps strictly rise */
    int k = 0;
    while (bb[k] < size)
      k++;
    CHECK(k < n3 && bb[k] * 100 <= size * 144 && (k == 0 || bb[k - 1] < bb[k]));
  }
  /* refused: descending, overlapping, zero, too large, not numbers */
  CHECK(range_parse("8..2", &r, buf, sizeof buf) == -1 && strstr(buf, "ends before it starts"));
  CHECK(range_parse("1..8,4", &r, buf, sizeof buf) == -1 && strstr(buf, "does not come after"));
  CHECK(range_parse("0..4", &r, buf, sizeof buf) == -1);
  CHECK(range_parse("1..2147483649", &r, buf, sizeof buf) == -1);
  CHECK(range_parse("1..", &r, buf, sizeof buf) == -1 && range_parse("", &r, buf, sizeof buf) == -1);
  CHECK(range_parse("1,,2", &r, buf, sizeof buf) == -1 && range_parse("a", &r, buf, sizeof buf) == -1);
}

int main(void) {
  test_ranges();
  test_f16();
  test_bf16();
  test_f8();
  test_int_stores();
  test_random();
  test_schemas();
  test_builder();
  test_diag();
  test_checked_sizes();
  if (failures) {
    fprintf(stderr, "test_ir: %d checks failed\n", failures);
    return 1;
  }
  printf("test_ir: all checks passed\n");
  return 0;
}
