/* Unit tests of ir/interp.c, the reference executor: for a representative op of each
 * family, a tiny graph built with the builder API, evaluated with ir_eval and compared
 * with values derived by hand; and the errors ir_eval must report (inputs that disagree
 * with the graph, gather indices out of range). */
#include "ir/ir.h"
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>



static Tensor *tens(DType dt, int rank, const int64_t *dims, const double *vals) {
  Tensor *t = tensor_new(dt, rank, dims);
  for (int64_t i = 0; i < tensor_numel(t); i++)
    dtype_store_f64(dt, (char *)t->data + i * (int64_t)dtype_size(dt), vals[i]);
  return t;
}

static Type type_of(const Tensor *t) {
  Type ty = {.dtype = t->dtype};
  ty.shape.rank = t->rank;
  for (int i = 0; i < t->rank; i++)
    ty.shape.dims[i] = (Dim){t->dims[i], NULL};
  return ty;
}

/* One node over graph inputs shaped like ins[], evaluated with ir_eval. NULL on error,
 * with the message in *d. The inputs are freed. */
static Tensor *run_op(Op op, int nin, Tensor **ins, const Attr *attrs, int nattr, Diag *d) {
  Graph *g = graph_new("t");
  Value *vin[8];
  for (int k = 0; k < nin; k++) {
    char name[16];
    snprintf(name, sizeof name, "x%d", k);
    vin[k] = graph_add_input(g, name, type_of(ins[k]));
  }
  Tensor *out = NULL;
  Value *y = graph_op(g, d, op, vin, nin, attrs, nattr, "y");
  if (y) {
    graph_add_output(g, y);
    if (ir_eval(g, ins, &out, d))
      out = NULL;
  }
  for (int k = 0; k < nin; k++)
    tensor_free(ins[k]);
  graph_free(g);
  return out;
}

/* Compares t with the expected dtype, dims and values (tol 0: exact). Frees t. */
static void expect(int line, Tensor *t, DType dt, int rank, const int64_t *dims,
                   const double *want, double tol) {
  if (!t) {
    fprintf(stderr, "%s:%d: no result\n", __FILE__, line);
    failures++;
    return;
  }
  bool ok = t->dtype == dt && t->rank == rank;
  for (int i = 0; ok && i < rank; i++)
    ok = t->dims[i] == dims[i];
  if (!ok) {
    char buf[64];
    Type ty = type_of(t);
    fprintf(stderr, "%s:%d: got %s\n", __FILE__, line, type_str(&ty, buf, sizeof buf));
    failures++;
  }
  for (int64_t i = 0; ok && i < tensor_numel(t); i++) {
    double v = dtype_load_f64(dt, (char *)t->data + i * (int64_t)dtype_size(dt));
    bool same = isnan(want[i]) ? isnan(v) : fabs(v - want[i]) <= tol;
    if (!same) {
      fprintf(stderr, "%s:%d: element %lld is %.17g, expected %.17g\n", __FILE__, line,
              (long long)i, v, want[i]);
      failures++;
    }
  }
  tensor_free(t);
}

#define EXPECT(t, dt, rank, dims, want, tol) expect(__LINE__, t, dt, rank, dims, want, tol)

static void test_unary(void) {
  Diag d = {0};
  int64_t n4[1] = {4};
  Tensor *x = tens(DT_F32, 1, n4, (double[]){-1, 0, 2, NAN});
  EXPECT(run_op(OP_RELU, 1, &x, NULL, 0, &d), DT_F32, 1, n4, ((double[]){0, 0, 2, NAN}), 0);
  x = tens(DT_F32, 1, n4, (double[]){0.5, 1.5, 2.5, -0.5});
  EXPECT(run_op(OP_ROUND, 1, &x, NULL, 0, &d), DT_F32, 1, n4, ((double[]){0, 2, 2, -0.0}), 0);
  x = tens(DT_F64, 1, n4, (double[]){0, 1000, -1000, 1});
  EXPECT(run_op(OP_SIGMOID, 1, &x, NULL, 0, &d), DT_F64, 1, n4,
         ((double[]){0.5, 1, 0, 1 / (1 + exp(-1.0))}), 1e-15);
  x = tens(DT_F64, 1, n4, (double[]){0, 1000, -1000, 1});
  EXPECT(run_op(OP_SOFTPLUS, 1, &x, NULL, 0, &d), DT_F64, 1, n4,
         ((double[]){log(2.0), 1000, 0, log(1 + exp(1.0))}), 1e-12);
  /* gelu(1) = 0.5 (1 + erf(1/sqrt 2)) = 0.841344746... */
  Attr tanh_a = attr_make_string("approximate", "tanh");
  x = tens(DT_F64, 1, n4, (double[]){1, 0, -1, 3});
  Tensor *g = run_op(OP_GELU, 1, &x, NULL, 0, &d);
  EXPECT(g, DT_F64, 1, n4, ((double[]){0.8413447460685429, 0, -0.15865525393145707,
                                       2.99595030590511}), 1e-12);
  x = tens(DT_F64, 1, n4, (double[]){1, 0, -1, 3});
  EXPECT(run_op(OP_GELU, 1, &x, &tanh_a, 1, &d), DT_F64, 1, n4,
         ((double[]){0.8411919906082768, 0, -0.15880800939172324, 2.996362607918227}), 1e-12);
  Attr bad_a = attr_make_string("approximate", "fast");
  x = tens(DT_F64, 1, n4, (double[]){1, 0, -1, 3});
  Diag d2 = {0};
  CHECK(run_op(OP_GELU, 1, &x, &bad_a, 1, &d2) == NULL && d2.failed);
  /* clip on ints converts its float bounds; neg wraps INT64_MIN */
  Attr clip[2] = {attr_make_float("min", -2.5), attr_make_float("max", 3)};
  x = tens(DT_I32, 1, n4, (double[]){-10, -2, 2, 10});
  EXPECT(run_op(OP_CLIP, 1, &x, clip, 2, &d), DT_I32, 1, n4, ((double[]){-2, -2, 2, 3}), 0);
  int64_t one = 1;
  Tensor *m = tensor_new(DT_I64, 1, &one);
  ((int64_t *)m->data)[0] = INT64_MIN;
  Tensor *r = run_op(OP_NEG, 1, &m, NULL, 0, &d);
  CHECK(r && ((int64_t *)r->data)[0] == INT64_MIN);
  tensor_free(r);
  /* cast: float to int truncates toward zero; anything nonzero is true */
  Attr to_i32 = attr_make_string("to", "i32"), to_bool = attr_make_string("to", "bool");
  x = tens(DT_F32, 1, n4, (double[]){-1.7, 2.9, 0.2, -0.0});
  EXPECT(run_op(OP_CAST, 1, &x, &to_i32, 1, &d), DT_I32, 1, n4, ((double[]){-1, 2, 0, 0}), 0);
  x = tens(DT_F32, 1, n4, (double[]){-1.7, 2.9, 0.2, -0.0});
  EXPECT(run_op(OP_CAST, 1, &x, &to_bool, 1, &d), DT_BOOL, 1, n4, ((double[]){1, 1, 1, 0}), 0);
  CHECK(!d.failed);
  if (d.failed)
    fprintf(stderr, "%s\n", d.msg);
}

static void test_binary(void) {
  Diag d = {0};
  /* numpy broadcasting: [2, 1] + [3] -> [2, 3] */
  int64_t c21[2] = {2, 1}, r3[1] = {3}, o23[2] = {2, 3};
  Tensor *in[3] = {tens(DT_F32, 2, c21, (double[]){10, 20}),
                   tens(DT_F32, 1, r3, (double[]){1, 2, 3})};
  EXPECT(run_op(OP_ADD, 2, in, NULL, 0, &d), DT_F32, 2, o23,
         ((double[]){11, 12, 13, 21, 22, 23}), 0);
  /* integer division truncates; by zero gives 0; INT64_MIN / -1 wraps */
  int64_t n4[1] = {4};
  in[0] = tens(DT_I64, 1, n4, (double[]){7, -7, 5, -9223372036854775808.0});
  in[1] = tens(DT_I64, 1, n4, (double[]){2, 2, 0, -1});
  Tensor *q = run_op(OP_DIV, 2, in, NULL, 0, &d);
  CHECK(q && ((int64_t *)q->data)[0] == 3 && ((int64_t *)q->data)[1] == -3 &&
        ((int64_t *)q->data)[2] == 0 && ((int64_t *)q->data)[3] == INT64_MIN);
  tensor_free(q);
  /* max propagates NaN like numpy.maximum */
  in[0] = tens(DT_F32, 1, n4, (double[]){1, NAN, 3, -1});
  in[1] = tens(DT_F32, 1, n4, (double[]){2, 0, NAN, -2});
  EXPECT(run_op(OP_MAX, 2, in, NULL, 0, &d), DT_F32, 1, n4, ((double[]){2, NAN, NAN, -1}), 0);
  in[0] = tens(DT_I32, 1, n4, (double[]){1, 2, 3, 4});
  in[1] = tens(DT_I32, 1, (int64_t[]){1}, (double[]){3});
  EXPECT(run_op(OP_LESS, 2, in, NULL, 0, &d), DT_BOOL, 1, n4, ((double[]){1, 1, 0, 0}), 0);
  /* where broadcasts all three */
  in[0] = tens(DT_BOOL, 2, c21, (double[]){1, 0});
  in[1] = tens(DT_F32, 1, r3, (double[]){1, 2, 3});
  in[2] = tens(DT_F32, 0, NULL, (double[]){-1});
  EXPECT(run_op(OP_WHERE, 3, in, NULL, 0, &d), DT_F32, 2, o23,
         ((double[]){1, 2, 3, -1, -1, -1}), 0);
  CHECK(!d.failed);
  if (d.failed)
    fprintf(stderr, "%s\n", d.msg);
}

static void test_matmul(void) {
  Diag d = {0};
  int64_t s22[2] = {2, 2}, s3[1] = {3}, s23[2] = {2, 3}, s2[1] = {2};
  Tensor *in[2] = {tens(DT_F32, 2, s22, (double[]){1, 2, 3, 4}),
                   tens(DT_F32, 2, s22, (double[]){5, 6, 7, 8})};
  EXPECT(run_op(OP_MATMUL, 2, in, NULL, 0, &d), DT_F32, 2, s22,
         ((double[]){19, 22, 43, 50}), 0);
  /* 1-D on the right: [2, 3] @ [3] -> [2] */
  in[0] = tens(DT_F32, 2, s23, (double[]){1, 2, 3, 4, 5, 6});
  in[1] = tens(DT_F32, 1, s3, (double[]){1, 0, -1});
  EXPECT(run_op(OP_MATMUL, 2, in, NULL, 0, &d), DT_F32, 1, s2, ((double[]){-2, -2}), 0);
  /* 1-D @ 1-D -> scalar */
  in[0] = tens(DT_F64, 1, s3, (double[]){1, 2, 3});
  in[1] = tens(DT_F64, 1, s3, (double[]){4, 5, 6});
  EXPECT(run_op(OP_MATMUL, 2, in, NULL, 0, &d), DT_F64, 0, NULL, ((double[]){32}), 0);
  /* batch broadcasting: [2, 1, 2] @ [2, 1] -> [2, 1, 1] */
  int64_t b212[3] = {2, 1, 2}, b21[2] = {2, 1}, o211[3] = {2, 1, 1};
  in[0] = tens(DT_F32, 3, b212, (double[]){1, 2, 3, 4});
  in[1] = tens(DT_F32, 2, b21, (double[]){10, 1});
  EXPECT(run_op(OP_MATMUL, 2, in, NULL, 0, &d), DT_F32, 3, o211, ((double[]){12, 34}), 0);
  CHECK(!d.failed);
  if (d.failed)
    fprintf(stderr, "%s\n", d.msg);
}

static void test_reductions(void) {
  Diag d = {0};
  int64_t s23[2] = {2, 3}, s2[1] = {2}, s11[2] = {1, 1}, s12[2] = {1, 2};
  const double v[6] = {1, 2, 3, 4, 5, 6};
  int64_t ax1[1] = {1};
  Attr sum_a[2] = {attr_make_ints("axes", ax1, 1), attr_make_int("keepdims", 0)};
  Tensor *x = tens(DT_F32, 2, s23, v);
  EXPECT(run_op(OP_REDUCE_SUM, 1, &x, sum_a, 2, &d), DT_F32, 1, s2, ((double[]){6, 15}), 0);
  x = tens(DT_F32, 2, s23, v);
  EXPECT(run_op(OP_REDUCE_MAX, 1, &x, NULL, 0, &d), DT_F32, 2, s11, ((double[]){6}), 0);
  x = tens(DT_F32, 2, s23, v);
  EXPECT(run_op(OP_REDUCE_MEAN, 1, &x, NULL, 0, &d), DT_F32, 2, s11, ((double[]){3.5}), 0);
  x = tens(DT_I32, 2, s23, v);
  EXPECT(run_op(OP_REDUCE_PROD, 1, &x, sum_a, 2, &d), DT_I32, 1, s2, ((double[]){6, 120}), 0);
  /* argmax: the first max; a NaN is the max */
  Attr am[2] = {attr_make_int("axis", 1), attr_make_int("keepdims", 0)};
  x = tens(DT_F32, 2, s23, (double[]){3, 1, 3, 0, NAN, 9});
  EXPECT(run_op(OP_ARGMAX, 1, &x, am, 2, &d), DT_I64, 1, s2, ((double[]){0, 1}), 0);
  /* softmax of [0, ln 2] is [1/3, 2/3]; log_softmax is its log */
  x = tens(DT_F64, 2, s12, (double[]){0, log(2.0)});
  EXPECT(run_op(OP_SOFTMAX, 1, &x, NULL, 0, &d), DT_F64, 2, s12,
         ((double[]){1.0 / 3, 2.0 / 3}), 1e-15);
  x = tens(DT_F64, 2, s12, (double[]){1000, 1000 + log(2.0)}); /* stable */
  EXPECT(run_op(OP_LOG_SOFTMAX, 1, &x, NULL, 0, &d), DT_F64, 2, s12,
         ((double[]){log(1.0 / 3), log(2.0 / 3)}), 1e-12);
  /* layer_norm of [1, 3]: mean 2, var 1 -> [-1, 1], then * 2 + 1 */
  Attr eps = attr_make_float("epsilon", 0);
  Tensor *in[3] = {tens(DT_F64, 2, s12, (double[]){1, 3}),
                   tens(DT_F64, 1, (int64_t[]){1}, (double[]){2}),
                   tens(DT_F64, 1, s2, (double[]){1, 0})};
  EXPECT(run_op(OP_LAYER_NORM, 3, in, &eps, 1, &d), DT_F64, 2, s12, ((double[]){-1, 2}), 1e-15);
  /* rms_norm of [3, 4]: mean square 12.5 -> [3, 4] / sqrt(12.5), then * 2; no scale */
  Tensor *rin[2] = {tens(DT_F64, 2, s12, (double[]){3, 4}),
                    tens(DT_F64, 1, (int64_t[]){1}, (double[]){2})};
  EXPECT(run_op(OP_RMS_NORM, 2, rin, &eps, 1, &d), DT_F64, 2, s12,
         ((double[]){6 / sqrt(12.5), 8 / sqrt(12.5)}), 1e-15);
  rin[0] = tens(DT_F64, 2, s12, (double[]){3, 4});
  EXPECT(run_op(OP_RMS_NORM, 1, rin, &eps, 1, &d), DT_F64, 2, s12,
         ((double[]){3 / sqrt(12.5), 4 / sqrt(12.5)}), 1e-15);
  CHECK(!d.failed);
  if (d.failed)
    fprintf(stderr, "%s\n", d.msg);
}

static void test_nn(void) {
  Diag d = {0};
  int64_t s1133[4] = {1, 1, 3, 3}, s1122[4] = {1, 1, 2, 2}, s114[3] = {1, 1, 4};
  const double nine[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  /* a 2x2 box filter over 1..9: each output sums a 2x2 block, plus the bias 1 */
  Tensor *cv[3] = {tens(DT_F32, 4, s1133, nine), tens(DT_F32, 4, s1122, (double[]){1, 1, 1, 1}),
                   tens(DT_F32, 1, (int64_t[]){1}, (double[]){1})};
  EXPECT(run_op(OP_CONV, 3, cv, NULL, 0, &d), DT_F32, 4, s1122, ((double[]){13, 17, 25, 29}), 0);
  /* the same kernel transposed scatters every input over a 2x2 block: corners stay */
  Tensor *ct[2] = {tens(DT_F32, 4, s1122, (double[]){1, 2, 3, 4}),
                   tens(DT_F32, 4, s1122, (double[]){1, 1, 1, 1})};
  EXPECT(run_op(OP_CONV_TRANSPOSE, 2, ct, NULL, 0, &d), DT_F32, 4, s1133,
         ((double[]){1, 3, 2, 4, 10, 6, 3, 7, 4}), 0);
  int64_t k2[1] = {2}, st2[1] = {2}, p11[2] = {1, 1};
  Attr mp[2] = {attr_make_ints("kernel_shape", k2, 1), attr_make_ints("strides", st2, 1)};
  Tensor *x = tens(DT_F32, 3, s114, (double[]){1, 3, 2, 5});
  EXPECT(run_op(OP_MAX_POOL, 1, &x, mp, 2, &d), DT_F32, 3, ((int64_t[]){1, 1, 2}),
         ((double[]){3, 5}), 0);
  /* windows [pad, 1], [3, 2], [5, pad]: padding is left out of the mean, or counted */
  Attr ap[4] = {mp[0], mp[1], attr_make_ints("pads", p11, 2), attr_make_int("count_include_pad", 1)};
  x = tens(DT_F32, 3, s114, (double[]){1, 3, 2, 5});
  EXPECT(run_op(OP_AVERAGE_POOL, 1, &x, ap, 3, &d), DT_F32, 3, ((int64_t[]){1, 1, 3}),
         ((double[]){1, 2.5, 5}), 0);
  x = tens(DT_F32, 3, s114, (double[]){1, 3, 2, 5});
  EXPECT(run_op(OP_AVERAGE_POOL, 1, &x, ap, 4, &d), DT_F32, 3, ((int64_t[]){1, 1, 3}),
         ((double[]){0.5, 2.5, 2.5}), 0);
  /* batch_norm with mean 1, var 3, eps 1: (x - 1) / 2 * 2 + 1 = x */
  Tensor *bn[5] = {tens(DT_F32, 3, s114, (double[]){1, 3, 2, 5}),
                   tens(DT_F32, 1, (int64_t[]){1}, (double[]){2}),
                   tens(DT_F32, 1, (int64_t[]){1}, (double[]){1}),
                   tens(DT_F32, 1, (int64_t[]){1}, (double[]){1}),
                   tens(DT_F32, 1, (int64_t[]){1}, (double[]){3})};
  Attr eps = attr_make_float("epsilon", 1);
  EXPECT(run_op(OP_BATCH_NORM, 5, bn, &eps, 1, &d), DT_F32, 3, s114, ((double[]){1, 3, 2, 5}), 1e-6);
  CHECK(!d.failed);
  if (d.failed)
    fprintf(stderr, "%s\n", d.msg);
}

static void test_nn_layout(void) {
  Diag d = {0};
  int64_t s3[1] = {3}, s2[1] = {2}, s4[1] = {4};
  /* reflect mirrors without repeating the edge; edge repeats it */
  int64_t p21[2] = {2, 1};
  Attr refl[2] = {attr_make_ints("pads", p21, 2), attr_make_string("mode", "reflect")};
  Tensor *x = tens(DT_I32, 1, s3, (double[]){1, 2, 3});
  EXPECT(run_op(OP_PAD, 1, &x, refl, 2, &d), DT_I32, 1, ((int64_t[]){6}),
         ((double[]){3, 2, 1, 2, 3, 2}), 0);
  refl[1] = attr_make_string("mode", "edge");
  x = tens(DT_I32, 1, s3, (double[]){1, 2, 3});
  EXPECT(run_op(OP_PAD, 1, &x, refl, 2, &d), DT_I32, 1, ((int64_t[]){6}),
         ((double[]){1, 1, 1, 2, 3, 3}), 0);
  /* linear half_pixel 2 -> 4: input coords -0.25 (clamped), 0.25, 0.75, 1.25 (clamped) */
  int64_t sz4[1] = {4};
  Attr rs[2] = {attr_make_ints("sizes", sz4, 1), attr_make_string("mode", "linear")};
  x = tens(DT_F32, 1, s2, (double[]){0, 1});
  EXPECT(run_op(OP_RESIZE, 1, &x, rs, 2, &d), DT_F32, 1, s4, ((double[]){0, 0.25, 0.75, 1}), 0);
  /* nearest, round_prefer_floor: coords -0.25, 0.25, 0.75, 1.25 round to 0, 0, 1, 1 */
  x = tens(DT_F32, 1, s2, (double[]){7, 9});
  EXPECT(run_op(OP_RESIZE, 1, &x, rs, 1, &d), DT_F32, 1, s4, ((double[]){7, 7, 9, 9}), 0);
  Attr cs[2] = {attr_make_int("axis", 0), attr_make_int("exclusive", 1)};
  x = tens(DT_I64, 1, s3, (double[]){1, 2, 3});
  EXPECT(run_op(OP_CUMSUM, 1, &x, cs, 2, &d), DT_I64, 1, s3, ((double[]){0, 1, 3}), 0);
  /* mod: Python's sign of the divisor, or C's of the dividend */
  Tensor *mi[2] = {tens(DT_I32, 1, s2, (double[]){-7, 7}), tens(DT_I32, 1, s2, (double[]){3, -3})};
  EXPECT(run_op(OP_MOD, 2, mi, NULL, 0, &d), DT_I32, 1, s2, ((double[]){2, -2}), 0);
  Attr fm = attr_make_int("fmod", 1);
  Tensor *mf[2] = {tens(DT_F32, 1, s2, (double[]){-7, 7}), tens(DT_F32, 1, s2, (double[]){3, -3})};
  EXPECT(run_op(OP_MOD, 2, mf, &fm, 1, &d), DT_F32, 1, s2, ((double[]){-1, 1}), 0);
  Attr up = attr_make_int("upper", 0);
  x = tens(DT_F32, 2, ((int64_t[]){2, 2}), (double[]){1, 2, 3, 4});
  EXPECT(run_op(OP_TRILU, 1, &x, &up, 1, &d), DT_F32, 2, ((int64_t[]){2, 2}),
         ((double[]){1, 0, 3, 4}), 0);
  CHECK(!d.failed);
  if (d.failed)
    fprintf(stderr, "%s\n", d.msg);
  /* gather_elements checks every index */
  Tensor *ge[2] = {tens(DT_F32, 1, s3, (double[]){1, 2, 3}), tens(DT_I64, 1, s2, (double[]){-3, 3})};
  Diag d2 = {0};
  CHECK(run_op(OP_GATHER_ELEMENTS, 2, ge, NULL, 0, &d2) == NULL);
  CHECK(strstr(d2.msg, "index 3 is out of range for axis 0 of size 3") != NULL);
}

/* Attributes at the edges of their range: the executor's loops and conversions stay
 * bounded and defined. */
static void test_sizes(void) {
  Diag d = {0};
  int64_t s3[3] = {1, 3, 1}, s2[1] = {2}, s4[1] = {4};
  /* lrn over more channels than there are: the window is clipped before it is walked
   * (it used to count to size); alpha / size = 1, so y = x / the sum of squares, 14 */
  Attr lrn[4] = {attr_make_int("size", INT64_MAX), attr_make_float("alpha", 9223372036854775807.0),
                 attr_make_float("beta", 1), attr_make_float("bias", 0)};
  Tensor *x = tens(DT_F64, 3, s3, (double[]){1, 2, 3});
  EXPECT(run_op(OP_LRN, 1, &x, lrn, 4, &d), DT_F64, 3, s3, ((double[]){1.0 / 14, 2.0 / 14, 3.0 / 14}), 1e-15);
  /* resize with a scale so small that half_pixel_symmetric's coordinate is inf - inf: a
   * NaN, which must not be converted to an index (nearest takes element 0, as the kernel's
   * conversion does; linear's weights are NaN) */
  int64_t sz4[1] = {4};
  double tiny[1] = {1e-310};
  Attr rs[4] = {attr_make_ints("sizes", sz4, 1), attr_make_floats("scales", tiny, 1),
                attr_make_string("coordinate_transformation_mode", "half_pixel_symmetric"),
                attr_make_string("mode", "nearest")};
  x = tens(DT_F32, 1, s2, (double[]){7, 9});
  EXPECT(run_op(OP_RESIZE, 1, &x, rs, 4, &d), DT_F32, 1, s4, ((double[]){7, 7, 7, 7}), 0);
  rs[3] = attr_make_string("mode", "linear");
  x = tens(DT_F32, 1, s2, (double[]){7, 9});
  EXPECT(run_op(OP_RESIZE, 1, &x, rs, 4, &d), DT_F32, 1, s4, ((double[]){NAN, NAN, NAN, NAN}), 0);
  CHECK(!d.failed);
  if (d.failed)
    fprintf(stderr, "%s\n", d.msg);
}

/* topk has two outputs and range constant operands: whole graphs. */
static void test_topk_range(void) {
  Graph *g = graph_new("t");
  Diag d = {0};
  Value *x = graph_add_input(g, "x", type_of(&(Tensor){.dtype = DT_F32, .rank = 1, .dims = {5}}));
  Attr k = attr_make_int("k", 3);
  const char *names[2] = {"v", "i"};
  Node *n = graph_add_node(g, OP_TOPK, &x, 1, &k, 1, names, 2);
  Value *cv[3];
  const double rv[3] = {0, 7, 2.5};
  for (int i = 0; i < 3; i++) {
    Tensor *t = tensor_in_arena(g->arena, DT_F32, 0, NULL);
    dtype_store_f64(DT_F32, t->data, rv[i]);
    cv[i] = graph_add_const(g, NULL, t);
  }
  Value *r = graph_op(g, &d, OP_RANGE, cv, 3, NULL, 0, "r");
  CHECK(r != NULL && ir_infer(g, &d) == 0);
  if (r && !d.failed) {
    graph_add_output(g, n->out[0]);
    graph_add_output(g, n->out[1]);
    graph_add_output(g, r);
    Tensor *in = tens(DT_F32, 1, (int64_t[]){5}, (double[]){2, 9, 2, 9, 4});
    Tensor *out[3];
    CHECK(ir_eval(g, &in, out, &d) == 0);
    if (!d.failed) {
      /* ties: the lower index first */
      EXPECT(out[0], DT_F32, 1, ((int64_t[]){3}), ((double[]){9, 9, 4}), 0);
      EXPECT(out[1], DT_I64, 1, ((int64_t[]){3}), ((double[]){1, 3, 4}), 0);
      EXPECT(out[2], DT_F32, 1, ((int64_t[]){3}), ((double[]){0, 2.5, 5}), 0);
    }
    tensor_free(in);
  }
  if (d.failed)
    fprintf(stderr, "%s\n", d.msg);
  graph_free(g);
}

/* The second batch of ONNX ops, with values worked out by hand. */
static void test_onnx_ops(void) {
  Diag d = {0};
  int64_t s3[1] = {3}, s4[1] = {4}, s23[2] = {2, 3};
  Attr left = attr_make_string("direction", "LEFT"), right = attr_make_string("direction", "RIGHT");
  /* a left shift drops the bits past the type; 8 or more shifts everything out */
  Tensor *sh[2] = {tens(DT_U8, 1, s3, (double[]){200, 1, 255}), tens(DT_U8, 1, s3, (double[]){1, 8, 4})};
  EXPECT(run_op(OP_BIT_SHIFT, 2, sh, &left, 1, &d), DT_U8, 1, s3, ((double[]){144, 0, 240}), 0);
  sh[0] = tens(DT_U8, 1, s3, (double[]){200, 255, 255});
  sh[1] = tens(DT_U8, 1, s3, (double[]){3, 8, 1});
  EXPECT(run_op(OP_BIT_SHIFT, 2, sh, &right, 1, &d), DT_U8, 1, s3, ((double[]){25, 0, 127}), 0);
  Tensor *x = tens(DT_I8, 1, s4, (double[]){0, -1, 5, 127});
  EXPECT(run_op(OP_BITWISE_NOT, 1, &x, NULL, 0, &d), DT_I8, 1, s4, ((double[]){-1, 0, -6, -128}), 0);
  Tensor *bw[2] = {tens(DT_I16, 1, s3, (double[]){-1, 12, -8}), tens(DT_I16, 1, s3, (double[]){255, 10, 7})};
  EXPECT(run_op(OP_BITWISE_XOR, 2, bw, NULL, 0, &d), DT_I16, 1, s3, ((double[]){-256, 6, -1}), 0);
  /* shrink on integers goes through double and stores like a cast */
  Attr shr[2] = {attr_make_float("bias", 1.5), attr_make_float("lambd", 2)};
  x = tens(DT_I32, 1, s4, (double[]){-5, -2, 2, 7});
  EXPECT(run_op(OP_SHRINK, 1, &x, shr, 2, &d), DT_I32, 1, s4, ((double[]){-3, 0, 0, 5}), 0);
  /* hardmax: the first of tied maxima; a NaN is the max */
  x = tens(DT_F32, 2, s23, (double[]){1, 3, 3, NAN, 2, NAN});
  EXPECT(run_op(OP_HARDMAX, 1, &x, NULL, 0, &d), DT_F32, 2, s23, ((double[]){0, 1, 0, 1, 0, 0}), 0);
  /* depth_to_space on [1, 8, 1, 1]: DCR takes channel (i * 2 + j) * 2 + c, CRD c * 4 + i * 2 + j */
  int64_t c8[4] = {1, 8, 1, 1}, o2[4] = {1, 2, 2, 2};
  const double iota8[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  Attr b2 = attr_make_int("blocksize", 2);
  Attr crd[2] = {b2, attr_make_string("mode", "CRD")};
  x = tens(DT_F32, 4, c8, iota8);
  EXPECT(run_op(OP_DEPTH_TO_SPACE, 1, &x, &b2, 1, &d), DT_F32, 4, o2, ((double[]){0, 2, 4, 6, 1, 3, 5, 7}), 0);
  x = tens(DT_F32, 4, c8, iota8);
  EXPECT(run_op(OP_DEPTH_TO_SPACE, 1, &x, crd, 2, &d), DT_F32, 4, o2, iota8, 0);
  /* space_to_depth undoes DCR */
  x = tens(DT_F32, 4, o2, (double[]){0, 2, 4, 6, 1, 3, 5, 7});
  EXPECT(run_op(OP_SPACE_TO_DEPTH, 1, &x, &b2, 1, &d), DT_F32, 4, c8, iota8, 0);
  /* one_hot: -1 is the last class; 3 and -4 are outside [-3, 3): all off */
  Attr depth = attr_make_int("depth", 3);
  Tensor *oh[2] = {tens(DT_I64, 1, s4, (double[]){0, -1, 3, -4}), tens(DT_F32, 1, (int64_t[]){2}, (double[]){0, 5})};
  EXPECT(run_op(OP_ONE_HOT, 2, oh, &depth, 1, &d), DT_F32, 2, ((int64_t[]){4, 3}),
         ((double[]){5, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0}), 0);
  /* nll_loss: losses 3 * 3 and 4 * 1; mean divides by the weights applied (3 + 1) */
  const double lp[6] = {-1, -2, -3, -4, -5, -6}, wt[3] = {1, 2, 3};
  Tensor *nl[3] = {tens(DT_F32, 2, s23, lp), tens(DT_I64, 1, (int64_t[]){2}, (double[]){2, 0}), tens(DT_F32, 1, s3, wt)};
  EXPECT(run_op(OP_NLL_LOSS, 3, nl, NULL, 0, &d), DT_F32, 0, NULL, ((double[]){3.25}), 1e-6);
  /* ignoring class 0: its loss is 0 and its weight leaves the mean */
  Attr ig0 = attr_make_int("ignore_index", 0);
  nl[0] = tens(DT_F32, 2, s23, lp);
  nl[1] = tens(DT_I64, 1, (int64_t[]){2}, (double[]){2, 0});
  nl[2] = tens(DT_F32, 1, s3, wt);
  EXPECT(run_op(OP_NLL_LOSS, 3, nl, &ig0, 1, &d), DT_F32, 0, NULL, ((double[]){3}), 1e-6);
  Attr none_ig[2] = {attr_make_string("reduction", "none"), ig0};
  nl[0] = tens(DT_F32, 2, s23, lp);
  nl[1] = tens(DT_I32, 1, (int64_t[]){2}, (double[]){2, 0});
  EXPECT(run_op(OP_NLL_LOSS, 2, nl, none_ig, 2, &d), DT_F32, 1, ((int64_t[]){2}), ((double[]){3, 0}), 0);
  nl[0] = tens(DT_F32, 2, s23, lp);
  nl[1] = tens(DT_I64, 1, (int64_t[]){2}, (double[]){3, 0});
  Diag d2 = {0};
  CHECK(run_op(OP_NLL_LOSS, 2, nl, NULL, 0, &d2) == NULL);
  CHECK(strstr(d2.msg, "target 3 is out of range for 3 classes") != NULL);
  /* softmax_cross_entropy: two equal scores, log_prob -ln 2 each, loss ln 2 */
  Graph *g = graph_new("t");
  Value *vin[2] = {graph_add_input(g, "s", type_of(&(Tensor){.dtype = DT_F32, .rank = 2, .dims = {1, 2}})),
                   graph_add_input(g, "l", type_of(&(Tensor){.dtype = DT_I64, .rank = 1, .dims = {1}}))};
  const char *names[2] = {"loss", "lp"};
  Node *n = graph_add_node(g, OP_SOFTMAX_CROSS_ENTROPY, vin, 2, NULL, 0, names, 2);
  CHECK(ir_infer(g, &d) == 0);
  graph_add_output(g, n->out[0]);
  graph_add_output(g, n->out[1]);
  Tensor *ins[2] = {tens(DT_F32, 2, (int64_t[]){1, 2}, (double[]){0, 0}), tens(DT_I64, 1, (int64_t[]){1}, (double[]){1})};
  Tensor *out[2];
  CHECK(ir_eval(g, ins, out, &d) == 0);
  if (!d.failed) {
    EXPECT(out[0], DT_F32, 0, NULL, ((double[]){log(2.0)}), 1e-6);
    EXPECT(out[1], DT_F32, 2, ((int64_t[]){1, 2}), ((double[]){-log(2.0), -log(2.0)}), 1e-6);
  } else {
    fprintf(stderr, "%s\n", d.msg);
  }
  tensor_free(ins[0]), tensor_free(ins[1]);
  graph_free(g);
}

/* The third batch of ONNX ops, with values worked out by hand (several are ONNX's own
 * examples). */
static void test_onnx_ops3(void) {
  Diag d = {0};
  int64_t s2[1] = {2}, s22[2] = {2, 2}, s222[3] = {2, 2, 2}, s8[1] = {8};
  const double m22[4] = {0, 1, 2, 3};
  /* gather_nd: whole elements, slices, a negative index, and per batch */
  Tensor *g[2] = {tens(DT_F32, 2, s22, m22), tens(DT_I64, 2, s22, (double[]){0, 0, 1, 1})};
  EXPECT(run_op(OP_GATHER_ND, 2, g, NULL, 0, &d), DT_F32, 1, s2, ((double[]){0, 3}), 0);
  g[0] = tens(DT_I32, 2, s22, m22);
  g[1] = tens(DT_I64, 2, ((int64_t[]){2, 1}), (double[]){1, -2});
  EXPECT(run_op(OP_GATHER_ND, 2, g, NULL, 0, &d), DT_I32, 2, s22, ((double[]){2, 3, 0, 1}), 0);
  Attr bd = attr_make_int("batch_dims", 1);
  g[0] = tens(DT_F32, 3, s222, (double[]){0, 1, 2, 3, 4, 5, 6, 7});
  g[1] = tens(DT_I64, 2, ((int64_t[]){2, 1}), (double[]){1, 0});
  EXPECT(run_op(OP_GATHER_ND, 2, g, &bd, 1, &d), DT_F32, 2, s22, ((double[]){2, 3, 4, 5}), 0);
  g[0] = tens(DT_F32, 2, s22, m22);
  g[1] = tens(DT_I64, 2, ((int64_t[]){1, 2}), (double[]){1, 2});
  Diag d2 = {0};
  CHECK(run_op(OP_GATHER_ND, 2, g, NULL, 0, &d2) == NULL);
  CHECK(strstr(d2.msg, "index 2 is out of range for axis 1 of size 2") != NULL);
  /* scatter_nd: ONNX's example, then duplicates that add up */
  Tensor *sc[3] = {tens(DT_F32, 1, s8, (double[]){1, 2, 3, 4, 5, 6, 7, 8}),
                   tens(DT_I64, 2, ((int64_t[]){4, 1}), (double[]){4, 3, 1, 7}),
                   tens(DT_F32, 1, ((int64_t[]){4}), (double[]){9, 10, 11, 12})};
  EXPECT(run_op(OP_SCATTER_ND, 3, sc, NULL, 0, &d), DT_F32, 1, s8,
         ((double[]){1, 11, 3, 10, 9, 6, 7, 12}), 0);
  Attr add = attr_make_string("reduction", "add");
  sc[0] = tens(DT_I32, 2, s22, m22);
  sc[1] = tens(DT_I64, 2, ((int64_t[]){2, 1}), (double[]){-1, 1});
  sc[2] = tens(DT_I32, 2, s22, (double[]){5, 6, 7, 8});
  EXPECT(run_op(OP_SCATTER_ND, 3, sc, &add, 1, &d), DT_I32, 2, s22, ((double[]){0, 1, 14, 17}), 0);
  /* grid_sample on [[1, 2], [3, 4]]: the centre (0, 0) lies between all four pixels */
  int64_t x1122[4] = {1, 1, 2, 2}, g1112[4] = {1, 1, 1, 2}, y1111[4] = {1, 1, 1, 1};
  const double px[4] = {1, 2, 3, 4};
  Tensor *gs[2] = {tens(DT_F32, 4, x1122, px), tens(DT_F32, 4, g1112, (double[]){0, 0})};
  EXPECT(run_op(OP_GRID_SAMPLE, 2, gs, NULL, 0, &d), DT_F32, 4, y1111, ((double[]){2.5}), 0);
  /* (-1, -1) is the corner of pixel (0, 0), half a pixel out: zeros weighs in 3/4 of 0;
   * border and reflection read pixel (0, 0) there */
  const char *pads[3] = {"zeros", "border", "reflection"};
  const double corner[3] = {0.25, 1, 1};
  for (int k = 0; k < 3; k++) {
    Attr pm = attr_make_string("padding_mode", pads[k]);
    gs[0] = tens(DT_F32, 4, x1122, px);
    gs[1] = tens(DT_F32, 4, g1112, (double[]){-1, -1});
    EXPECT(run_op(OP_GRID_SAMPLE, 2, gs, &pm, 1, &d), DT_F32, 4, y1111, &corner[k], 0);
  }
  /* nearest: (0, 0) is pixel coordinate (0.5, 0.5), which rounds half to even: pixel (0, 0) */
  Attr nearest = attr_make_string("mode", "nearest");
  gs[0] = tens(DT_I32, 4, x1122, px);
  gs[1] = tens(DT_F32, 4, g1112, (double[]){0, 0});
  EXPECT(run_op(OP_GRID_SAMPLE, 2, gs, &nearest, 1, &d), DT_I32, 4, y1111, ((double[]){1}), 0);
  /* align_corners: (1, -1) is the centre of the top right pixel */
  Attr al[2] = {attr_make_int("align_corners", 1), attr_make_string("mode", "cubic")};
  gs[0] = tens(DT_F32, 4, x1122, px);
  gs[1] = tens(DT_F32, 4, g1112, (double[]){1, -1});
  EXPECT(run_op(OP_GRID_SAMPLE, 2, gs, al, 2, &d), DT_F32, 4, y1111, ((double[]){2}), 1e-12);
  /* cubic (a = -0.75) halfway, 1-D: the weights are -3/32, 19/32, 19/32, -3/32, so the
   * squares 0, 1, 4, 9 give 2.125 */
  gs[0] = tens(DT_F64, 3, ((int64_t[]){1, 1, 4}), (double[]){0, 1, 4, 9});
  gs[1] = tens(DT_F64, 3, ((int64_t[]){1, 1, 1}), (double[]){0});
  EXPECT(run_op(OP_GRID_SAMPLE, 2, gs, &al[1], 1, &d), DT_F64, 3, ((int64_t[]){1, 1, 1}),
         ((double[]){2.125}), 1e-12);
  /* a NaN coordinate gives NaN */
  gs[0] = tens(DT_F32, 4, x1122, px);
  gs[1] = tens(DT_F32, 4, g1112, (double[]){0, NAN});
  EXPECT(run_op(OP_GRID_SAMPLE, 2, gs, NULL, 0, &d), DT_F32, 4, y1111, ((double[]){NAN}), 0);
  /* reverse_sequence: ONNX's example, time on axis 0 */
  int64_t s44[2] = {4, 4};
  Tensor *rs[2] = {tens(DT_F32, 2, s44, (double[]){0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}),
                   tens(DT_I64, 1, ((int64_t[]){4}), (double[]){4, 3, 2, 1})};
  EXPECT(run_op(OP_REVERSE_SEQUENCE, 2, rs, NULL, 0, &d), DT_F32, 2, s44,
         ((double[]){3, 6, 9, 12, 2, 5, 8, 13, 1, 4, 10, 14, 0, 7, 11, 15}), 0);
  rs[0] = tens(DT_F32, 2, s22, m22);
  rs[1] = tens(DT_I32, 1, s2, (double[]){1, 3});
  d2 = (Diag){0};
  CHECK(run_op(OP_REVERSE_SEQUENCE, 2, rs, NULL, 0, &d2) == NULL);
  CHECK(strstr(d2.msg, "sequence_lens[1] = 3 is out of range for 2 steps") != NULL);
  /* roi_align on x[y][x] = 4y + x, linear, so every bilinear sample is 4 sy + sx. The roi
   * (0, 0)-(4, 4) shifts by -0.5; 2 x 2 bins of one sample each sit at 0.5 and 2.5 */
  Attr ra[3] = {attr_make_int("output_height", 2), attr_make_int("output_width", 2),
                attr_make_int("sampling_ratio", 1)};
  int64_t x1144[4] = {1, 1, 4, 4};
  const double ramp[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  Tensor *ro[3] = {tens(DT_F32, 4, x1144, ramp), tens(DT_F32, 2, ((int64_t[]){1, 4}), (double[]){0, 0, 4, 4}),
                   tens(DT_I64, 1, ((int64_t[]){1}), (double[]){0})};
  EXPECT(run_op(OP_ROI_ALIGN, 3, ro, ra, 3, &d), DT_F32, 4, ((int64_t[]){1, 1, 2, 2}),
         ((double[]){2.5, 4.5, 10.5, 12.5}), 1e-6);
  /* max mode takes the largest weighted corner: at (1.5, 1.5) 0.25 * 10 */
  Attr rmax[2] = {attr_make_int("sampling_ratio", 1), attr_make_string("mode", "max")};
  ro[0] = tens(DT_F32, 4, x1144, ramp);
  ro[1] = tens(DT_F32, 2, ((int64_t[]){1, 4}), (double[]){0, 0, 4, 4});
  ro[2] = tens(DT_I64, 1, ((int64_t[]){1}), (double[]){0});
  EXPECT(run_op(OP_ROI_ALIGN, 3, ro, rmax, 2, &d), DT_F32, 4, y1111, ((double[]){2.5}), 1e-6);
  /* output_half_pixel makes an empty roi one pixel: one sample at (1.5, 1.5) */
  Attr ohp = attr_make_string("coordinate_transformation_mode", "output_half_pixel");
  ro[0] = tens(DT_F32, 4, x1144, ramp);
  ro[1] = tens(DT_F32, 2, ((int64_t[]){1, 4}), (double[]){1, 1, 1, 1});
  ro[2] = tens(DT_I64, 1, ((int64_t[]){1}), (double[]){0});
  EXPECT(run_op(OP_ROI_ALIGN, 3, ro, &ohp, 1, &d), DT_F32, 4, y1111, ((double[]){7.5}), 1e-6);
  ro[0] = tens(DT_F32, 4, x1144, ramp);
  ro[1] = tens(DT_F32, 2, ((int64_t[]){1, 4}), (double[]){1, 1, 1, 1});
  ro[2] = tens(DT_I64, 1, ((int64_t[]){1}), (double[]){1});
  d2 = (Diag){0};
  CHECK(run_op(OP_ROI_ALIGN, 3, ro, NULL, 0, &d2) == NULL);
  CHECK(strstr(d2.msg, "batch index 1 of roi 0 is out of range for 1 images") != NULL);
  /* max_unpool: ONNX's example; output_shape pads the end */
  Attr mu[3] = {attr_make_ints("kernel_shape", s22, 2), attr_make_ints("strides", s22, 2),
                attr_make_ints("output_shape", ((int64_t[]){1, 1, 5, 5}), 4)};
  Tensor *un[2] = {tens(DT_F32, 4, x1122, (double[]){5, 6, 7, 8}),
                   tens(DT_I64, 4, x1122, (double[]){5, 7, 13, 15})};
  double want16[16] = {0}, want25[25] = {0};
  want16[5] = want25[6] = 5, want16[7] = want25[8] = 6;
  want16[13] = want25[16] = 7, want16[15] = want25[18] = 8;
  EXPECT(run_op(OP_MAX_UNPOOL, 2, un, mu, 2, &d), DT_F32, 4, x1144, want16, 0);
  un[0] = tens(DT_F32, 4, x1122, (double[]){5, 6, 7, 8});
  un[1] = tens(DT_I64, 4, x1122, (double[]){5, 7, 13, 15});
  EXPECT(run_op(OP_MAX_UNPOOL, 2, un, mu, 3, &d), DT_F32, 4, ((int64_t[]){1, 1, 5, 5}), want25, 0);
  un[0] = tens(DT_F32, 4, x1122, (double[]){5, 6, 7, 8});
  un[1] = tens(DT_I64, 4, x1122, (double[]){5, 7, 13, 16});
  d2 = (Diag){0};
  CHECK(run_op(OP_MAX_UNPOOL, 2, un, mu, 3, &d2) == NULL);
  CHECK(strstr(d2.msg, "index 16 is out of range for an unpooled output of 16 elements") != NULL);
  /* det: plain, after a row swap, singular, and a diagonal; batched */
  int64_t s322[3] = {3, 2, 2};
  Tensor *x = tens(DT_F64, 3, s322, (double[]){1, 2, 3, 4, 0, 1, 1, 0, 1, 2, 2, 4});
  EXPECT(run_op(OP_DET, 1, &x, NULL, 0, &d), DT_F64, 1, ((int64_t[]){3}), ((double[]){-2, -1, 0}), 1e-12);
  x = tens(DT_F32, 2, ((int64_t[]){3, 3}), (double[]){0, 0, 4, 0, 3, 0, 2, 0, 0});
  EXPECT(run_op(OP_DET, 1, &x, NULL, 0, &d), DT_F32, 0, NULL, ((double[]){-24}), 0);
  /* lp_norm: 3-4-5; a zero norm gives 0; p = 1 */
  x = tens(DT_F32, 2, s22, (double[]){3, 4, 0, 0});
  EXPECT(run_op(OP_LP_NORM, 1, &x, NULL, 0, &d), DT_F32, 2, s22, ((double[]){0.6, 0.8, 0, 0}), 1e-7);
  Attr p1[2] = {attr_make_int("p", 1), attr_make_int("axis", 0)};
  x = tens(DT_F64, 2, s22, (double[]){1, 2, -3, 0});
  EXPECT(run_op(OP_LP_NORM, 1, &x, p1, 2, &d), DT_F64, 2, s22, ((double[]){0.25, 1, -0.75, 0}), 1e-15);
  /* mean_variance_norm over (0, 2, 3): channel 0 has mean 2 and deviation 1, channel 1
   * mean 12 and deviation 2; ONNX adds 1e-9 to the deviation */
  int64_t s1212[4] = {1, 2, 1, 2};
  x = tens(DT_F64, 4, s1212, (double[]){1, 3, 10, 14});
  double e1 = 1 / (1 + 1e-9), e2 = 2 / (2 + 1e-9);
  EXPECT(run_op(OP_MEAN_VARIANCE_NORM, 1, &x, NULL, 0, &d), DT_F64, 4, s1212,
         ((double[]){-e1, e1, -e2, e2}), 1e-15);
  CHECK(!d.failed);
  if (d.failed)
    fprintf(stderr, "%s\n", d.msg);
}

static void test_layout(void) {
  Diag d = {0};
  int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
  const double v[6] = {1, 2, 3, 4, 5, 6};
  Tensor *x = tens(DT_F32, 2, s23, v);
  EXPECT(run_op(OP_TRANSPOSE, 1, &x, NULL, 0, &d), DT_F32, 2, s32,
         ((double[]){1, 4, 2, 5, 3, 6}), 0);
  /* slice with a negative step and clamping: x[:, ::-2] */
  int64_t st[1] = {-1}, en[1] = {INT64_MIN}, ax[1] = {1}, sp[1] = {-2}, s22[2] = {2, 2};
  Attr sl[4] = {attr_make_ints("starts", st, 1), attr_make_ints("ends", en, 1),
                attr_make_ints("axes", ax, 1), attr_make_ints("steps", sp, 1)};
  x = tens(DT_I16, 2, s23, v);
  EXPECT(run_op(OP_SLICE, 1, &x, sl, 4, &d), DT_I16, 2, s22, ((double[]){3, 1, 6, 4}), 0);
  /* concat along axis 1 */
  Attr cat = attr_make_int("axis", 1);
  int64_t s21[2] = {2, 1}, s24[2] = {2, 4};
  Tensor *in[2] = {tens(DT_F32, 2, s23, v), tens(DT_F32, 2, s21, (double[]){7, 8})};
  EXPECT(run_op(OP_CONCAT, 2, in, &cat, 1, &d), DT_F32, 2, s24,
         ((double[]){1, 2, 3, 7, 4, 5, 6, 8}), 0);
  /* expand [3] to [2, 3] */
  Attr ex = attr_make_ints("shape", s23, 2);
  x = tens(DT_F32, 1, (int64_t[]){3}, (double[]){1, 2, 3});
  EXPECT(run_op(OP_EXPAND, 1, &x, &ex, 1, &d), DT_F32, 2, s23, ((double[]){1, 2, 3, 1, 2, 3}), 0);
  /* reshape with 0 and -1 */
  int64_t shp[2] = {-1, 2};
  Attr rs = attr_make_ints("shape", shp, 2);
  x = tens(DT_F32, 2, s23, v);
  EXPECT(run_op(OP_RESHAPE, 1, &x, &rs, 1, &d), DT_F32, 2, s32, v, 0);
  /* gather rows with a negative index */
  Attr ga = attr_make_int("axis", 0);
  in[0] = tens(DT_F32, 2, s23, v);
  in[1] = tens(DT_I64, 1, (int64_t[]){2}, (double[]){-1, 0});
  EXPECT(run_op(OP_GATHER, 2, in, &ga, 1, &d), DT_F32, 2, s23, ((double[]){4, 5, 6, 1, 2, 3}), 0);
  CHECK(!d.failed);
  if (d.failed)
    fprintf(stderr, "%s\n", d.msg);
  /* an index out of range is an error naming the node and the index */
  in[0] = tens(DT_F32, 2, s23, v);
  in[1] = tens(DT_I32, 1, (int64_t[]){2}, (double[]){0, 2});
  Diag d2 = {0};
  CHECK(run_op(OP_GATHER, 2, in, &ga, 1, &d2) == NULL);
  CHECK(strstr(d2.msg, "index 2") && strstr(d2.msg, "gather") && strstr(d2.msg, "%y"));

  /* split has several outputs: through ir_eval_node directly */
  Graph *g = graph_new("s");
  Tensor *xs = tens(DT_F32, 2, s23, v), *outs[2] = {0};
  Value *xv = graph_add_input(g, "x", type_of(xs));
  int64_t parts[2] = {1, 2};
  Attr sa[2] = {attr_make_int("axis", 1), attr_make_ints("split", parts, 2)};
  const char *names[2] = {"a", "b"};
  Node *n = graph_add_node(g, OP_SPLIT, &xv, 1, sa, 2, names, 2);
  CHECK(ir_eval_node(n, &xs, outs, &d) == 0);
  EXPECT(outs[0], DT_F32, 2, s21, ((double[]){1, 4}), 0);
  EXPECT(outs[1], DT_F32, 2, s22, ((double[]){2, 3, 5, 6}), 0);
  tensor_free(xs);
  graph_free(g);
}

static void test_graph(void) {
  /* x: f32[N, 2] -> y = relu(x @ w + x @ w), with the intermediate freed on the way,
   * plus the input itself as a second output (a copy the caller owns). */
  Graph *g = graph_new("g");
  Type tx = {.dtype = DT_F32};
  tx.shape.rank = 2;
  tx.shape.dims[0] = (Dim){-1, "N"}; /* graph_add_input interns it */
  tx.shape.dims[1] = (Dim){2, NULL};
  Value *x = graph_add_input(g, "x", tx);
  Tensor *w = tensor_in_arena(g->arena, DT_F32, 2, (int64_t[]){2, 2});
  ((float *)w->data)[0] = 1, ((float *)w->data)[1] = -1;
  ((float *)w->data)[2] = 1, ((float *)w->data)[3] = 1;
  Value *wv = graph_add_const(g, "w", w);
  Diag d = {0};
  Value *mm = graph_op(g, &d, OP_MATMUL, (Value *[]){x, wv}, 2, NULL, 0, "mm");
  Value *s = mm ? graph_op(g, &d, OP_ADD, (Value *[]){mm, mm}, 2, NULL, 0, "s") : NULL;
  Value *y = s ? graph_op(g, &d, OP_RELU, &s, 1, NULL, 0, "y") : NULL;
  CHECK(y != NULL);
  if (!y) {
    fprintf(stderr, "%s\n", d.msg);
    graph_free(g);
    return;
  }
  graph_add_output(g, y);
  graph_add_output(g, x);
  int64_t s32[2] = {3, 2};
  Tensor *in = tens(DT_F32, 2, s32, (double[]){1, 2, 3, 1, -1, -1});
  Tensor *out[2];
  CHECK(ir_eval(g, &in, out, &d) == 0);
  EXPECT(out[0], DT_F32, 2, s32, ((double[]){6, 2, 8, 0, 0, 0}), 0);
  EXPECT(out[1], DT_F32, 2, s32, ((double[]){1, 2, 3, 1, -1, -1}), 0);
  tensor_free(in);

  /* inputs that disagree with the graph */
  Tensor *bad = tens(DT_F32, 2, (int64_t[]){2, 3}, (double[]){0, 0, 0, 0, 0, 0});
  Diag d2 = {0};
  CHECK(ir_eval(g, &bad, out, &d2) == -1);
  CHECK(strstr(d2.msg, "input %x: expected f32[N, 2], got f32[2, 3]") != NULL);
  tensor_free(bad);
  bad = tens(DT_F64, 2, (int64_t[]){1, 2}, (double[]){0, 0});
  Diag d3 = {0};
  CHECK(ir_eval(g, &bad, out, &d3) == -1 && strstr(d3.msg, "got f64[1, 2]"));
  tensor_free(bad);
  graph_free(g);

  /* the same symbol must have one size */
  g = graph_new("h");
  Value *a = graph_add_input(g, "a", tx);
  Value *b = graph_add_input(g, "b", tx);
  Value *sum = graph_op(g, &d, OP_ADD, (Value *[]){a, b}, 2, NULL, 0, "sum");
  CHECK(sum != NULL);
  if (sum) {
    graph_add_output(g, sum);
    Tensor *ins[2] = {tens(DT_F32, 2, (int64_t[]){3, 2}, (double[]){0, 0, 0, 0, 0, 0}),
                      tens(DT_F32, 2, (int64_t[]){4, 2}, (double[]){0, 0, 0, 0, 0, 0, 0, 0})};
    Diag d4 = {0};
    CHECK(ir_eval(g, ins, out, &d4) == -1);
    CHECK(strstr(d4.msg, "input %b: dim N is 4 here but 3 in %a") != NULL);
    if (!strstr(d4.msg, "dim N"))
      fprintf(stderr, "%s\n", d4.msg);
    tensor_free(ins[0]), tensor_free(ins[1]);
  }
  graph_free(g);
}

/* tensor_permute against the definition, element by element: the tiled path (x's
 * innermost axis moved inward, tiles cut at odd sizes) and the walking one, at every
 * element size. */
static void test_permute(void) {
  static const struct {
    int rank;
    int64_t dims[4], perm[4];
  } cases[] = {
      {2, {33, 70}, {1, 0}},          {2, {1, 5}, {1, 0}},
      {3, {3, 37, 65}, {0, 2, 1}},    {3, {5, 6, 7}, {2, 0, 1}},
      {4, {2, 3, 33, 4}, {0, 3, 1, 2}}, {4, {2, 35, 3, 40}, {3, 1, 0, 2}},
      {3, {4, 5, 6}, {1, 0, 2}},      {2, {64, 64}, {0, 1}},
  };
  static const DType types[] = {DT_U8, DT_F16, DT_F32, DT_I64};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
      int r = cases[c].rank;
      int64_t ydims[4], xs[4] = {0}, ys[4] = {0};
      for (int i = 0; i < r; i++)
        ydims[i] = cases[c].dims[cases[c].perm[i]];
      Tensor *x = tensor_new(types[t], r, cases[c].dims), *y = tensor_new(types[t], r, ydims);
      size_t es = dtype_size(types[t]);
      int64_t n = tensor_numel(x);
      for (int64_t i = 0; i < n * (int64_t)es; i++)
        ((unsigned char *)x->data)[i] = (unsigned char)(i * 7 + i / 251);
      tensor_permute(x, cases[c].perm, y);
      xs[r - 1] = ys[r - 1] = 1;
      for (int i = r - 2; i >= 0; i--) {
        xs[i] = xs[i + 1] * cases[c].dims[i + 1];
        ys[i] = ys[i + 1] * ydims[i + 1];
      }
      int bad = 0;
      for (int64_t i = 0; i < n; i++) { /* y's element i is x's at the permuted index */
        int64_t from = 0;
        for (int k = 0; k < r; k++)
          from += i / ys[k] % ydims[k] * xs[cases[c].perm[k]];
        bad += memcmp((char *)y->data + i * (int64_t)es, (char *)x->data + from * (int64_t)es,
                      es) != 0;
      }
      CHECK(bad == 0);
      tensor_free(x);
      tensor_free(y);
    }
}

int main(void) {
  test_unary();
  test_permute();
  test_binary();
  test_matmul();
  test_reductions();
  test_layout();
  test_nn();
  test_nn_layout();
  test_topk_range();
  test_sizes();
  test_onnx_ops();
  test_onnx_ops3();
  test_graph();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("test_interp: ok\n");
  return 0;
}
