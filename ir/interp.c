/* interp.c: the reference executor. It defines what every op of ops.def means.
 *
 * It is the oracle for the passes and the GPU path, so it is kept simple and obviously
 * right: plain loops over row-major tensors, floating point computed in double and
 * rounded once to the output type, integers in int64 with wrapping arithmetic done in
 * uint64 (no UB). Output shapes come from ir_infer_node, the same shape logic the
 * compiler uses, applied to the concrete shapes of the inputs.
 */
#include "ir/ir.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_OPERANDS 4

/* ---------------------------------------------------------------- helpers */

static int node_error(const Node *n, Diag *d, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int node_error(const Node *n, Diag *d, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *out = n->nout > 0 && n->out && n->out[0] ? n->out[0]->name : NULL;
  if (out)
    return diag_error(d, n->loc, "%%%s = %s: %s", out, op_info[n->op].name, msg);
  return diag_error(d, n->loc, "%s: %s", op_info[n->op].name, msg);
}

/* Counts, offsets and strides below are plain int64 arithmetic: ir_eval_node infers every
 * output first, and inference holds each value to IR_MAX_BYTES (2^48) bytes with every
 * dim included, so products of one tensor's dims, strides and coordinates, and sums of a
 * few, cannot overflow. Attributes are another matter (a window's size, a scale): those
 * are clipped before they bound a loop or become an index. */
static char *elem(const Tensor *t, int64_t i) {
  return (char *)t->data + (size_t)i * dtype_size(t->dtype);
}

static int64_t norm_axis(int64_t axis, int rank) { return axis < 0 ? axis + rank : axis; }

/* One walker over an index space of `rank` dims that keeps, for each operand, the
 * element offset of the current index. Strides are per operand and may be 0 (numpy
 * broadcasting, reductions) or negative (slices with negative steps). Every op that
 * maps indices to offsets uses it. */
typedef struct Walk {
  int rank;
  int64_t dims[IR_MAX_RANK];
  int nops;
  int64_t stride[MAX_OPERANDS][IR_MAX_RANK];
  int64_t idx[IR_MAX_RANK];
  int64_t off[MAX_OPERANDS];
} Walk;

static void walk_init(Walk *w, int rank, const int64_t *dims) {
  memset(w, 0, sizeof *w);
  w->rank = rank;
  for (int i = 0; i < rank; i++)
    w->dims[i] = dims[i];
}

/* An operand addressed through explicit strides from a base offset. */
static void walk_add_strides(Walk *w, const int64_t *strides, int64_t base) {
  int k = w->nops++;
  for (int i = 0; i < w->rank; i++)
    w->stride[k][i] = strides[i];
  w->off[k] = base;
}

/* A contiguous tensor broadcast (numpy rules: aligned at the right, size-1 dims
 * repeat) to the walker's shape. */
static void walk_add_bcast(Walk *w, int rank, const int64_t *dims) {
  int64_t cs[IR_MAX_RANK], st[IR_MAX_RANK];
  contiguous_strides(rank, dims, cs);
  for (int i = 0; i < w->rank; i++) {
    int j = i - (w->rank - rank);
    st[i] = j < 0 || dims[j] == 1 ? 0 : cs[j];
  }
  walk_add_strides(w, st, 0);
}

static void walk_next(Walk *w) {
  for (int i = w->rank - 1; i >= 0; i--) {
    if (++w->idx[i] < w->dims[i]) {
      for (int k = 0; k < w->nops; k++)
        w->off[k] += w->stride[k][i];
      return;
    }
    w->idx[i] = 0;
    for (int k = 0; k < w->nops; k++)
      w->off[k] -= w->stride[k][i] * (w->dims[i] - 1);
  }
}

static int64_t walk_numel(const Walk *w) {
  int64_t n = 1;
  for (int i = 0; i < w->rank; i++)
    n *= w->dims[i];
  return n;
}

/* Wrapping int64 arithmetic without UB. */
static int64_t wrap(uint64_t v) {
  return v <= (uint64_t)INT64_MAX ? (int64_t)v : -(int64_t)(~v) - 1;
}
static int64_t iadd(int64_t a, int64_t b) { return wrap((uint64_t)a + (uint64_t)b); }
static int64_t isub(int64_t a, int64_t b) { return wrap((uint64_t)a - (uint64_t)b); }
static int64_t imul(int64_t a, int64_t b) { return wrap((uint64_t)a * (uint64_t)b); }
static int64_t ineg(int64_t a) { return wrap(0 - (uint64_t)a); }
/* Truncating division like C, ONNX and CUDA; by zero gives 0; INT64_MIN / -1 wraps. */
static int64_t idiv(int64_t a, int64_t b) {
  if (b == 0)
    return 0;
  if (b == -1)
    return ineg(a);
  return a / b;
}

/* ---------------------------------------------------------------- unary pointwise */

typedef struct UnaryParams {
  double alpha, beta, gamma, bias, lambd, lo, hi;
  bool gelu_tanh, inf_neg, inf_pos;
} UnaryParams;

static double sigmoid(double x) {
  if (x >= 0)
    return 1 / (1 + exp(-x));
  double e = exp(x);
  return e / (1 + e);
}

static double clamp01(double v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

static double unary_f(Op op, double x, const UnaryParams *p) {
  switch (op) {
  case OP_IDENTITY: return x;
  case OP_NEG: return -x;
  case OP_ABS: return fabs(x);
  case OP_SIGN: return x > 0 ? 1 : x < 0 ? -1 : x; /* keeps 0, -0 and NaN */
  case OP_EXP: return exp(x);
  case OP_LOG: return log(x);
  case OP_SQRT: return sqrt(x);
  case OP_RSQRT: return 1 / sqrt(x);
  case OP_RECIP: return 1 / x;
  case OP_FLOOR: return floor(x);
  case OP_CEIL: return ceil(x);
  case OP_ROUND: return nearbyint(x); /* the default rounding mode: half to even */
  case OP_SIN: return sin(x);
  case OP_COS: return cos(x);
  case OP_TANH: return tanh(x);
  case OP_ERF: return erf(x);
  case OP_SIGMOID: return sigmoid(x);
  case OP_RELU: return x < 0 ? 0 : x; /* NaN stays NaN */
  case OP_GELU:
    if (p->gelu_tanh)
      return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + erf(x / sqrt(2.0)));
  case OP_SILU: return x * sigmoid(x);
  case OP_SOFTPLUS: return softplus(x);
  case OP_LEAKY_RELU: return x < 0 ? p->alpha * x : x;
  case OP_ELU: return x < 0 ? p->alpha * (exp(x) - 1) : x;
  /* plain comparisons rather than fmin/fmax, which would swallow a NaN */
  case OP_HARD_SIGMOID: return clamp01(p->alpha * x + p->beta);
  case OP_HARD_SWISH: return x * clamp01(x / 6 + 0.5);
  case OP_CLIP: return x < p->lo ? p->lo : x > p->hi ? p->hi : x;
  case OP_NOT: return x == 0;
  case OP_IS_NAN: return isnan(x);
  case OP_IS_INF: return isinf(x) && (x < 0 ? p->inf_neg : p->inf_pos);
  case OP_TAN: return tan(x);
  case OP_ASIN: return asin(x);
  case OP_ACOS: return acos(x);
  case OP_ATAN: return atan(x);
  case OP_SINH: return sinh(x);
  case OP_COSH: return cosh(x);
  case OP_ASINH: return asinh(x);
  case OP_ACOSH: return acosh(x);
  case OP_ATANH: return atanh(x);
  case OP_SOFTSIGN: return x / (1 + fabs(x));
  case OP_MISH: return x * tanh(softplus(x));
  /* max(0, x) + min(0, alpha (exp(x / alpha) - 1)), written so that a NaN stays NaN */
  case OP_CELU: {
    double e = p->alpha * (exp(x / p->alpha) - 1);
    return isnan(x) ? x : (x > 0 ? x : 0) + (e < 0 ? e : 0);
  }
  case OP_SELU: return p->gamma * (x > 0 ? x : p->alpha * (exp(x) - 1));
  case OP_THRESHOLDED_RELU: return x > p->alpha ? x : 0;
  case OP_SHRINK: return x < -p->lambd ? x + p->bias : x > p->lambd ? x - p->bias : 0;
  default: return NAN;
  }
}

/* The ops that have a meaning on integers; the float-only ones are rejected by
 * inference and never get here with integer inputs. */
static int64_t unary_i(Op op, int64_t x, int64_t lo, int64_t hi) {
  switch (op) {
  case OP_NEG: return ineg(x);
  case OP_ABS: return x < 0 ? ineg(x) : x;
  case OP_SIGN: return x > 0 ? 1 : x < 0 ? -1 : 0;
  case OP_RELU: return x < 0 ? 0 : x;
  case OP_CLIP: return x < lo ? lo : x > hi ? hi : x;
  case OP_NOT: return x == 0;
  case OP_BITWISE_NOT: return wrap(~(uint64_t)x); /* the store truncates to the type */
  default: return x;
  }
}

static int eval_unary(const Node *n, const Tensor *x, Tensor *y, Diag *d) {
  UnaryParams p = {0};
  if (n->op == OP_GELU) {
    const char *a = attr_string(n, "approximate");
    if (a && !strcmp(a, "tanh"))
      p.gelu_tanh = true;
    else if (!a || strcmp(a, "none"))
      return node_error(n, d, "approximate must be \"none\" or \"tanh\", not \"%s\"",
                        a ? a : "");
  }
  p.alpha = attr_float(n, "alpha");
  p.beta = attr_float(n, "beta");
  p.gamma = attr_float(n, "gamma");
  p.bias = attr_float(n, "bias");
  p.lambd = attr_float(n, "lambd");
  if (n->op == OP_IS_INF) {
    p.inf_neg = attr_int(n, "detect_negative") != 0;
    p.inf_pos = attr_int(n, "detect_positive") != 0;
  }
  if (n->op == OP_CLIP) {
    p.lo = attr_float(n, "min");
    p.hi = attr_float(n, "max");
  }
  /* clip's float bounds converted to integers the way a cast does (saturating) */
  int64_t ilo = 0, ihi = 0;
  dtype_store_f64(DT_I64, &ilo, p.lo);
  dtype_store_f64(DT_I64, &ihi, p.hi);
  int64_t numel = tensor_numel(x);
  bool fl = dtype_is_float(x->dtype);
  /* shrink's float attributes apply to integers too: through double, stored like a cast */
  bool via_f = fl || n->op == OP_SHRINK;
  for (int64_t i = 0; i < numel; i++) {
    if (n->op == OP_CAST) {
      /* Through double for floats, through int64 otherwise: exact both ways, float to
       * int truncates toward zero, anything to bool is "nonzero". */
      if (fl)
        dtype_store_f64(y->dtype, elem(y, i), dtype_load_f64(x->dtype, elem(x, i)));
      else
        dtype_store_i64(y->dtype, elem(y, i), dtype_load_i64(x->dtype, elem(x, i)));
    } else if (via_f) {
      double v = unary_f(n->op, dtype_load_f64(x->dtype, elem(x, i)), &p);
      dtype_store_f64(y->dtype, elem(y, i), v);
    } else {
      int64_t v = unary_i(n->op, dtype_load_i64(x->dtype, elem(x, i)), ilo, ihi);
      dtype_store_i64(y->dtype, elem(y, i), v);
    }
  }
  return 0;
}

/* ---------------------------------------------------------------- binary and ternary pointwise */

static double binary_f(Op op, double a, double b) {
  switch (op) {
  case OP_ADD: return a + b;
  case OP_SUB: return a - b;
  case OP_MUL: return a * b;
  case OP_DIV: return a / b;
  case OP_POW: return pow(a, b);
  /* like numpy.maximum/minimum: a NaN on either side wins */
  case OP_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
  case OP_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
  case OP_EQUAL: return a == b;
  case OP_LESS: return a < b;
  case OP_LESS_EQUAL: return a <= b;
  case OP_GREATER: return a > b;
  case OP_GREATER_EQUAL: return a >= b;
  case OP_AND: return a != 0 && b != 0;
  case OP_OR: return a != 0 || b != 0;
  case OP_XOR: return (a != 0) != (b != 0);
  case OP_PRELU: return a < 0 ? a * b : a;
  default: return NAN;
  }
}

static int64_t binary_i(Op op, int64_t a, int64_t b) {
  switch (op) {
  case OP_ADD: return iadd(a, b);
  case OP_SUB: return isub(a, b);
  case OP_MUL: return imul(a, b);
  case OP_DIV: return idiv(a, b);
  case OP_POW: { /* float-only in the table; saturating like a cast if it ever gets here */
    int64_t r;
    dtype_store_f64(DT_I64, &r, pow((double)a, (double)b));
    return r;
  }
  case OP_MAX: return a > b ? a : b;
  case OP_MIN: return a < b ? a : b;
  case OP_EQUAL: return a == b;
  case OP_LESS: return a < b;
  case OP_LESS_EQUAL: return a <= b;
  case OP_GREATER: return a > b;
  case OP_GREATER_EQUAL: return a >= b;
  case OP_AND: return a != 0 && b != 0;
  case OP_OR: return a != 0 || b != 0;
  case OP_XOR: return (a != 0) != (b != 0);
  case OP_BITWISE_AND: return wrap((uint64_t)a & (uint64_t)b);
  case OP_BITWISE_OR: return wrap((uint64_t)a | (uint64_t)b);
  case OP_BITWISE_XOR: return wrap((uint64_t)a ^ (uint64_t)b);
  default: return 0;
  }
}

/* mod with the sign of the divisor (Python), or of the dividend (C fmod) when c_fmod. */
static double mod_f(double a, double b, bool c_fmod) {
  double r = fmod(a, b);
  if (!c_fmod && r != 0 && (r < 0) != (b < 0))
    r += b;
  return r;
}

/* Integer mod; a divisor of 0 gives 0 like div, and INT64_MIN % -1 is 0. */
static int64_t mod_i(int64_t a, int64_t b, bool c_fmod) {
  if (b == 0 || b == -1)
    return 0;
  int64_t r = a % b;
  if (!c_fmod && r != 0 && (r < 0) != (b < 0))
    r += b;
  return r;
}

static int eval_nary(const Node *n, Tensor *const *in, Tensor *y) {
  Walk w;
  walk_init(&w, y->rank, y->dims);
  for (int k = 0; k < n->nin; k++)
    walk_add_bcast(&w, in[k]->rank, in[k]->dims);
  int64_t numel = walk_numel(&w);
  if (n->op == OP_WHERE) {
    const Tensor *c = in[0], *a = in[1], *b = in[2];
    bool fl = dtype_is_float(y->dtype);
    for (int64_t i = 0; i < numel; i++, walk_next(&w)) {
      bool take_a = dtype_load_i64(c->dtype, elem(c, w.off[0])) != 0;
      const Tensor *src = take_a ? a : b;
      int64_t off = take_a ? w.off[1] : w.off[2];
      if (fl)
        dtype_store_f64(y->dtype, elem(y, i), dtype_load_f64(src->dtype, elem(src, off)));
      else
        dtype_store_i64(y->dtype, elem(y, i), dtype_load_i64(src->dtype, elem(src, off)));
    }
    return 0;
  }
  const Tensor *a = in[0], *b = in[1];
  bool fl = dtype_is_float(a->dtype) || dtype_is_float(b->dtype);
  if (n->op == OP_BIT_SHIFT) {
    /* unsigned operands (inference checks); the store truncates a left shift to the type */
    const char *dir = attr_string(n, "direction");
    bool left = dir && !strcmp(dir, "LEFT");
    for (int64_t i = 0; i < numel; i++, walk_next(&w)) {
      uint64_t va = (uint64_t)dtype_load_i64(a->dtype, elem(a, w.off[0]));
      uint64_t sh = (uint64_t)dtype_load_i64(b->dtype, elem(b, w.off[1]));
      uint64_t v = sh >= 64 ? 0 : left ? va << sh : va >> sh;
      dtype_store_i64(y->dtype, elem(y, i), wrap(v));
    }
    return 0;
  }
  if (n->op == OP_MOD) {
    bool c_fmod = attr_int(n, "fmod") != 0;
    for (int64_t i = 0; i < numel; i++, walk_next(&w)) {
      if (fl)
        dtype_store_f64(y->dtype, elem(y, i),
                        mod_f(dtype_load_f64(a->dtype, elem(a, w.off[0])),
                              dtype_load_f64(b->dtype, elem(b, w.off[1])), c_fmod));
      else
        dtype_store_i64(y->dtype, elem(y, i),
                        mod_i(dtype_load_i64(a->dtype, elem(a, w.off[0])),
                              dtype_load_i64(b->dtype, elem(b, w.off[1])), c_fmod));
    }
    return 0;
  }
  for (int64_t i = 0; i < numel; i++, walk_next(&w)) {
    if (fl) {
      double v = binary_f(n->op, dtype_load_f64(a->dtype, elem(a, w.off[0])),
                          dtype_load_f64(b->dtype, elem(b, w.off[1])));
      if (dtype_is_float(y->dtype))
        dtype_store_f64(y->dtype, elem(y, i), v);
      else
        dtype_store_i64(y->dtype, elem(y, i), v != 0); /* a comparison's bool */
    } else {
      int64_t v = binary_i(n->op, dtype_load_i64(a->dtype, elem(a, w.off[0])),
                           dtype_load_i64(b->dtype, elem(b, w.off[1])));
      dtype_store_i64(y->dtype, elem(y, i), v);
    }
  }
  return 0;
}

/* ---------------------------------------------------------------- matmul */

/* Elements [off, off + n) of t as doubles in dst; with `transpose` the n elements are a
 * rows x cols matrix that lands transposed (dst[c * rows + r]). */
static void load_f64(const Tensor *t, int64_t off, int64_t rows, int64_t cols, bool transpose,
                     double *dst) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++)
      dst[transpose ? c * rows + r : r * cols + c] =
          dtype_load_f64(t->dtype, elem(t, off + r * cols + c));
}

/* Rows [r0, r1) of one float matrix product: y[i, j] = scale * sum_k am[i, k] * bt[j, k],
 * summed in k's order. Each output element is one thread's, so how many threads share
 * the rows changes no bit of the result. */
typedef struct MatmulRows {
  const double *am, *bt;
  Tensor *y;
  int64_t yo, r0, r1, K, N;
  double scale;
} MatmulRows;

static void *matmul_rows(void *arg) {
  const MatmulRows *w = arg;
  for (int64_t i = w->r0; i < w->r1; i++)
    for (int64_t j = 0; j < w->N; j++) {
      const double *ra = w->am + i * w->K, *rb = w->bt + j * w->K;
      double acc = 0;
      for (int64_t k = 0; k < w->K; k++)
        acc += ra[k] * rb[k];
      dtype_store_f64(w->y->dtype, elem(w->y, w->yo + i * w->N + j), acc * w->scale);
    }
  return NULL;
}

enum { MATMUL_MAX_THREADS = 64 };
#define MATMUL_MIN_WORK 4e6 /* multiply-adds below which one thread does a matrix */

/* One M x N float product, its rows shared by up to the host's cores when it is large
 * (calibrating fp8 runs whole models through here). */
static void matmul_matrix(const double *am, const double *bt, Tensor *y, int64_t yo, int64_t M,
                          int64_t K, int64_t N, double scale) {
  /* the core count only for a large product: a batch of small ones asks nothing */
  long cores = (double)M * (double)N * (double)K < MATMUL_MIN_WORK ? 1
                                                                   : sysconf(_SC_NPROCESSORS_ONLN);
  int nt = cores < 2 ? 1 : cores > MATMUL_MAX_THREADS ? MATMUL_MAX_THREADS : (int)cores;
  if (nt > M)
    nt = (int)M;
  MatmulRows w[MATMUL_MAX_THREADS];
  pthread_t th[MATMUL_MAX_THREADS];
  bool started[MATMUL_MAX_THREADS] = {false};
  for (int t = 0; t < nt; t++) {
    w[t] = (MatmulRows){am, bt, y, yo, M * t / nt, M * (t + 1) / nt, K, N, scale};
    started[t] = t > 0 && pthread_create(&th[t], NULL, matmul_rows, &w[t]) == 0;
  }
  for (int t = 0; t < nt; t++)
    if (!started[t])
      matmul_rows(&w[t]); /* the caller's share, and any a thread could not take */
  for (int t = 1; t < nt; t++)
    if (started[t])
      pthread_join(th[t], NULL);
}

static int eval_matmul(const Node *n, const Tensor *a, const Tensor *b, Tensor *y, Diag *d) {
  /* numpy.matmul: a 1-D operand gets a dim of 1 (prepended for a, appended for b) that
   * the output then drops; the leading dims broadcast as batch dims. */
  int ar = a->rank, br = b->rank;
  bool tb = attr_int(n, "transpose_b") != 0; /* b's matrices are [N, K] */
  int64_t M = ar == 1 ? 1 : a->dims[ar - 2], K = a->dims[ar - 1];
  int64_t N = br == 1 ? 1 : b->dims[br - (tb ? 2 : 1)];
  double scale = attr_float(n, "scale");
  int abr = ar > 2 ? ar - 2 : 0, bbr = br > 2 ? br - 2 : 0;
  int batch_rank = abr > bbr ? abr : bbr;
  int64_t bdims[IR_MAX_RANK];
  for (int i = 0; i < batch_rank; i++) {
    int ia = i - (batch_rank - abr), ib = i - (batch_rank - bbr);
    int64_t da = ia < 0 ? 1 : a->dims[ia], db = ib < 0 ? 1 : b->dims[ib];
    bdims[i] = da == 1 ? db : da;
  }
  Walk w;
  walk_init(&w, batch_rank, bdims);
  walk_add_bcast(&w, abr, a->dims); /* offsets count whole matrices */
  walk_add_bcast(&w, bbr, b->dims);
  int64_t nbatch = walk_numel(&w);
  bool fl = dtype_is_float(y->dtype);
  /* Floating point: each matrix is read into doubles once, b transposed, so every dot
   * product runs over two contiguous rows. */
  double *am = fl ? malloc(sizeof(double) * (size_t)(M * K + 1)) : NULL;
  double *bt = fl ? malloc(sizeof(double) * (size_t)(K * N + 1)) : NULL;
  if (fl && (!am || !bt)) {
    free(am), free(bt);
    return node_error(n, d, "out of memory");
  }
  int64_t yo = 0, last_a = -1, last_b = -1;
  for (int64_t bi = 0; bi < nbatch; bi++, walk_next(&w)) {
    int64_t ao = w.off[0] * M * K, bo = w.off[1] * K * N;
    if (fl && ao != last_a)
      load_f64(a, last_a = ao, M, K, false, am);
    if (fl && bo != last_b)
      load_f64(b, last_b = bo, tb ? N : K, tb ? K : N, !tb, bt);
    if (fl) {
      matmul_matrix(am, bt, y, yo, M, K, N, scale);
      yo += M * N;
      continue;
    }
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++, yo++) {
        int64_t acc = 0;
        for (int64_t k = 0; k < K; k++)
          acc = iadd(acc, imul(dtype_load_i64(a->dtype, elem(a, ao + i * K + k)),
                               dtype_load_i64(b->dtype, elem(b, bo + (tb ? j * K + k : k * N + j)))));
        dtype_store_i64(y->dtype, elem(y, yo), acc);
      }
  }
  free(am), free(bt);
  return 0;
}

/* ---------------------------------------------------------------- reductions */

/* Marks the reduced axes; empty axes means all. */
static int reduced_axes(const Node *n, int rank, bool *red, Diag *d) {
  int na;
  const int64_t *axes = attr_ints(n, "axes", &na);
  for (int i = 0; i < rank; i++)
    red[i] = na == 0;
  for (int i = 0; i < na; i++) {
    int64_t a = norm_axis(axes[i], rank);
    if (a < 0 || a >= rank)
      return node_error(n, d, "axis %lld is out of range for rank %d", (long long)axes[i],
                        rank);
    red[a] = true;
  }
  return 0;
}

static int eval_reduce(const Node *n, const Tensor *x, Tensor *y, Diag *d) {
  bool red[IR_MAX_RANK];
  if (reduced_axes(n, x->rank, red, d))
    return -1;
  /* Walk x; the accumulator index is x's index with the reduced dims dropped. */
  int64_t odims[IR_MAX_RANK], ostr[IR_MAX_RANK], ast[IR_MAX_RANK], xst[IR_MAX_RANK];
  for (int i = 0; i < x->rank; i++)
    odims[i] = red[i] ? 1 : x->dims[i];
  contiguous_strides(x->rank, odims, ostr);
  contiguous_strides(x->rank, x->dims, xst);
  for (int i = 0; i < x->rank; i++)
    ast[i] = red[i] ? 0 : ostr[i];
  int64_t nout = tensor_numel(y);
  double *accf = calloc((size_t)nout + 1, sizeof(double));
  int64_t *acci = calloc((size_t)nout + 1, sizeof(int64_t));
  int64_t *count = calloc((size_t)nout + 1, sizeof(int64_t));
  double *mx = calloc((size_t)nout + 1, sizeof(double)); /* log_sum_exp's running max */
  if (!accf || !acci || !count || !mx) {
    free(accf), free(acci), free(count), free(mx);
    return node_error(n, d, "out of memory");
  }
  bool fl = dtype_is_float(x->dtype);
  Op op = n->op;
  for (int64_t o = 0; o < nout; o++) {
    accf[o] = op == OP_REDUCE_PROD ? 1 : op == OP_REDUCE_MAX ? -INFINITY
              : op == OP_REDUCE_MIN ? INFINITY : 0;
    acci[o] = op == OP_REDUCE_PROD ? 1 : 0;
    mx[o] = -INFINITY;
  }
  Walk w;
  walk_init(&w, x->rank, x->dims);
  walk_add_strides(&w, xst, 0);
  walk_add_strides(&w, ast, 0);
  int64_t numel = walk_numel(&w);
  for (int64_t i = 0; i < numel; i++, walk_next(&w)) {
    int64_t o = w.off[1];
    const char *p = elem(x, w.off[0]);
    if (fl) {
      double v = dtype_load_f64(x->dtype, p);
      double *acc = &accf[o];
      switch (op) {
      case OP_REDUCE_SUM: case OP_REDUCE_MEAN: *acc += v; break;
      case OP_REDUCE_PROD: *acc *= v; break;
      /* like numpy: a NaN anywhere makes the max/min NaN */
      case OP_REDUCE_MAX: if (isnan(v) || v > *acc) *acc = isnan(*acc) ? *acc : v; break;
      case OP_REDUCE_MIN: if (isnan(v) || v < *acc) *acc = isnan(*acc) ? *acc : v; break;
      case OP_REDUCE_L1: *acc += fabs(v); break;
      case OP_REDUCE_L2: case OP_REDUCE_SUM_SQUARE: *acc += v * v; break;
      case OP_REDUCE_LOG_SUM_EXP:
        /* sum of exp(v - mx), rescaled when the max grows, so nothing overflows */
        if (isnan(v))
          *acc = NAN;
        else if (v > mx[o]) {
          *acc = *acc * exp(mx[o] - v) + 1;
          mx[o] = v;
        } else if (v != -INFINITY && mx[o] != INFINITY)
          *acc += exp(v - mx[o]);
        break;
      default: break;
      }
    } else {
      int64_t v = dtype_load_i64(x->dtype, p);
      int64_t *acc = &acci[o];
      switch (op) {
      case OP_REDUCE_SUM: case OP_REDUCE_MEAN: *acc = iadd(*acc, v); break;
      case OP_REDUCE_PROD: *acc = imul(*acc, v); break;
      case OP_REDUCE_MAX: if (!count[o] || v > *acc) *acc = v; break;
      case OP_REDUCE_MIN: if (!count[o] || v < *acc) *acc = v; break;
      case OP_REDUCE_L1: *acc = iadd(*acc, v < 0 ? ineg(v) : v); break;
      case OP_REDUCE_SUM_SQUARE: *acc = iadd(*acc, imul(v, v)); break;
      default: break;
      }
    }
    count[o]++;
  }
  for (int64_t o = 0; o < nout; o++) {
    if (fl || op == OP_REDUCE_MEAN) {
      double v = fl ? accf[o] : (double)acci[o];
      if (op == OP_REDUCE_MEAN)
        v /= (double)count[o]; /* NaN for an empty reduction, like numpy */
      else if (op == OP_REDUCE_L2)
        v = sqrt(v);
      else if (op == OP_REDUCE_LOG_SUM_EXP)
        v = mx[o] + log(v); /* -inf when empty or all -inf */
      dtype_store_f64(y->dtype, elem(y, o), v);
    } else {
      dtype_store_i64(y->dtype, elem(y, o), acci[o]);
    }
  }
  free(accf), free(acci), free(count), free(mx);
  return 0;
}

/* outer, len, inner: x viewed as [outer, len, inner] around `axis`. */
static void split_at_axis(const Tensor *x, int axis, int64_t *outer, int64_t *len,
                          int64_t *inner) {
  *outer = *inner = 1;
  for (int i = 0; i < axis; i++)
    *outer *= x->dims[i];
  for (int i = axis + 1; i < x->rank; i++)
    *inner *= x->dims[i];
  *len = x->dims[axis];
}

/* argmax and argmin. */
static int eval_argmax(const Node *n, const Tensor *x, Tensor *y, Diag *d) {
  bool want_min = n->op == OP_ARGMIN, last = attr_int(n, "select_last_index") != 0;
  int64_t axis = norm_axis(attr_int(n, "axis"), x->rank);
  if (axis < 0 || axis >= x->rank)
    return node_error(n, d, "axis %lld is out of range for rank %d",
                      (long long)attr_int(n, "axis"), x->rank);
  int64_t outer, len, inner;
  split_at_axis(x, (int)axis, &outer, &len, &inner);
  bool fl = dtype_is_float(x->dtype);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      int64_t best = 0;
      double bf = 0;
      int64_t bi = 0;
      for (int64_t k = 0; k < len; k++) {
        const char *p = elem(x, (o * len + k) * inner + in);
        if (fl) {
          double v = dtype_load_f64(x->dtype, p);
          /* the first NaN is the max, like numpy.argmax */
          bool better = want_min ? v < bf || (last && v == bf) : v > bf || (last && v == bf);
          if (k == 0 || (!isnan(bf) && (isnan(v) || better))) {
            bf = v;
            best = k;
          }
        } else {
          int64_t v = dtype_load_i64(x->dtype, p);
          if (k == 0 || (want_min ? v < bi : v > bi) || (last && v == bi)) {
            bi = v;
            best = k;
          }
        }
      }
      dtype_store_i64(y->dtype, elem(y, o * inner + in), best);
    }
  return 0;
}

static int eval_softmax(const Node *n, const Tensor *x, Tensor *y, Diag *d) {
  int64_t axis = norm_axis(attr_int(n, "axis"), x->rank);
  if (axis < 0 || axis >= x->rank)
    return node_error(n, d, "axis %lld is out of range for rank %d",
                      (long long)attr_int(n, "axis"), x->rank);
  int64_t outer, len, inner;
  split_at_axis(x, (int)axis, &outer, &len, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      int64_t base = o * len * inner + in;
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < len; k++)
        mx = fmax(mx, dtype_load_f64(x->dtype, elem(x, base + k * inner)));
      if (isinf(mx))
        mx = 0; /* all -inf (or +inf present): no shift keeps inf - inf out of it */
      for (int64_t k = 0; k < len; k++)
        sum += exp(dtype_load_f64(x->dtype, elem(x, base + k * inner)) - mx);
      for (int64_t k = 0; k < len; k++) {
        double v = dtype_load_f64(x->dtype, elem(x, base + k * inner)) - mx;
        v = n->op == OP_SOFTMAX ? exp(v) / sum : v - log(sum);
        dtype_store_f64(y->dtype, elem(y, base + k * inner), v);
      }
    }
  return 0;
}

/* hardmax: 1 at the first max along the axis, where the first NaN counts as the max. */
static int eval_hardmax(const Node *n, const Tensor *x, Tensor *y, Diag *d) {
  int64_t axis = norm_axis(attr_int(n, "axis"), x->rank);
  if (axis < 0 || axis >= x->rank)
    return node_error(n, d, "axis %lld is out of range for rank %d",
                      (long long)attr_int(n, "axis"), x->rank);
  int64_t outer, len, inner;
  split_at_axis(x, (int)axis, &outer, &len, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      int64_t base = o * len * inner + in, best = 0;
      double bv = 0;
      for (int64_t k = 0; k < len; k++) {
        double v = dtype_load_f64(x->dtype, elem(x, base + k * inner));
        if (k == 0 || (!isnan(bv) && (isnan(v) || v > bv))) {
          bv = v;
          best = k;
        }
      }
      for (int64_t k = 0; k < len; k++)
        dtype_store_f64(y->dtype, elem(y, base + k * inner), k == best ? 1 : 0);
    }
  return 0;
}

/* scale or bias broadcast to x.shape[axis:], as inner doubles. */
static double *expand_param(const Tensor *p, const Tensor *x, int axis, int64_t inner) {
  double *v = malloc(sizeof(double) * (size_t)(inner ? inner : 1));
  if (!v)
    return NULL;
  Walk w;
  walk_init(&w, x->rank - axis, x->dims + axis);
  walk_add_bcast(&w, p->rank, p->dims);
  for (int64_t i = 0; i < inner; i++, walk_next(&w))
    v[i] = dtype_load_f64(p->dtype, elem(p, w.off[0]));
  return v;
}

/* layer_norm, and rms_norm: the same without the mean (x / sqrt(mean(x^2) + eps)) and
 * with an optional scale. */
static int eval_layer_norm(const Node *n, Tensor *const *in, Tensor *y, Diag *d) {
  const Tensor *x = in[0];
  bool rms = n->op == OP_RMS_NORM;
  int64_t axis = norm_axis(attr_int(n, "axis"), x->rank);
  if (axis < 0 || axis >= x->rank)
    return node_error(n, d, "axis %lld is out of range for rank %d",
                      (long long)attr_int(n, "axis"), x->rank);
  for (int k = 1; k < n->nin; k++)
    if (in[k] && in[k]->rank > x->rank - axis)
      return node_error(n, d, "%s has rank %d, more than the %d normalized dims",
                        k == 1 ? "scale" : "bias", in[k]->rank, (int)(x->rank - axis));
  double eps = attr_float(n, "epsilon");
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; i++)
    outer *= x->dims[i];
  for (int i = (int)axis; i < x->rank; i++)
    inner *= x->dims[i];
  double *scale = n->nin > 1 && in[1] ? expand_param(in[1], x, (int)axis, inner) : NULL;
  double *bias = n->nin > 2 && in[2] ? expand_param(in[2], x, (int)axis, inner) : NULL;
  if ((n->nin > 1 && in[1] && !scale) || (n->nin > 2 && in[2] && !bias)) {
    free(scale), free(bias);
    return node_error(n, d, "out of memory");
  }
  for (int64_t o = 0; o < outer; o++) {
    int64_t base = o * inner;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner && !rms; i++)
      mean += dtype_load_f64(x->dtype, elem(x, base + i));
    mean /= (double)inner;
    for (int64_t i = 0; i < inner; i++) {
      double c = dtype_load_f64(x->dtype, elem(x, base + i)) - mean;
      var += c * c;
    }
    var /= (double)inner;
    double rstd = 1 / sqrt(var + eps);
    for (int64_t i = 0; i < inner; i++) {
      double v = (dtype_load_f64(x->dtype, elem(x, base + i)) - mean) * rstd;
      if (scale)
        v *= scale[i];
      if (bias)
        v += bias[i];
      dtype_store_f64(y->dtype, elem(y, base + i), v);
    }
  }
  free(scale), free(bias);
  return 0;
}

/* ---------------------------------------------------------------- layout */

/* Copies element src[so] to dst[dof], converting if the types differ. */
static void copy_elem(const Tensor *src, int64_t so, Tensor *dst, int64_t dof) {
  if (src->dtype == dst->dtype)
    memcpy(elem(dst, dof), elem(src, so), dtype_size(dst->dtype));
  else if (dtype_is_float(src->dtype))
    dtype_store_f64(dst->dtype, elem(dst, dof), dtype_load_f64(src->dtype, elem(src, so)));
  else
    dtype_store_i64(dst->dtype, elem(dst, dof), dtype_load_i64(src->dtype, elem(src, so)));
}

/* Element j of an index tensor as a position along `axis` of size `size`: negative
 * counts from the end; anything else outside [0, size) is an error naming the node. */
static int index_at(const Node *n, Diag *d, const Tensor *idx, int64_t j, int axis,
                    int64_t size, int64_t *at) {
  int64_t raw = dtype_load_i64(idx->dtype, elem(idx, j));
  *at = raw < 0 ? raw + size : raw;
  if (*at < 0 || *at >= size)
    return node_error(n, d, "index %lld is out of range for axis %d of size %lld",
                      (long long)raw, axis, (long long)size);
  return 0;
}

/* to[j * to_step] = from[j * from_step] for j < n, elements of es bytes, with the copy's
 * size known to the compiler for the common sizes. */
static void copy_strided(char *to, int64_t to_step, const char *from, int64_t from_step,
                         int64_t n, size_t es) {
#define COPY_AS(T)                                                                         \
  for (int64_t j = 0; j < n; j++)                                                          \
    memcpy(to + (size_t)(j * to_step) * sizeof(T), from + (size_t)(j * from_step) * sizeof(T), \
           sizeof(T));                                                                     \
  return
  switch (es) {
  case 1: COPY_AS(uint8_t);
  case 2: COPY_AS(uint16_t);
  case 4: COPY_AS(uint32_t);
  case 8: COPY_AS(uint64_t);
  }
#undef COPY_AS
  for (int64_t j = 0; j < n; j++)
    memcpy(to + (size_t)(j * to_step) * es, from + (size_t)(j * from_step) * es, es);
}

/* y[i] = x[offset of walker operand 0 at i], for every i in y's row-major order. Of one
 * type, a row (the innermost axis) at a time: a layout pass permutes every weight. */
static void gather_walk(Walk *w, const Tensor *x, Tensor *y) {
  int64_t numel = walk_numel(w);
  if (x->dtype != y->dtype || w->rank == 0) {
    for (int64_t i = 0; i < numel; i++, walk_next(w))
      copy_elem(x, w->off[0], y, i);
    return;
  }
  int last = w->rank - 1;
  int64_t row = w->dims[last], step = w->stride[0][last];
  size_t es = dtype_size(x->dtype);
  for (int64_t i = 0; row && i < numel; i += row) {
    char *to = elem(y, i);
    const char *from = elem(x, w->off[0]);
    if (step == 1)
      memcpy(to, from, (size_t)row * es);
    else
      copy_strided(to, 1, from, step, row, es);
    /* to the last element of the row, then on to the next row */
    w->idx[last] = row - 1;
    for (int k = 0; k < w->nops; k++)
      w->off[k] += w->stride[k][last] * (row - 1);
    walk_next(w);
  }
}

static int eval_transpose(const Node *n, const Tensor *x, Tensor *y, Diag *d) {
  int np;
  const int64_t *perm = attr_ints(n, "perm", &np);
  int64_t xs[IR_MAX_RANK], st[IR_MAX_RANK];
  contiguous_strides(x->rank, x->dims, xs);
  if (perm && np != x->rank)
    return node_error(n, d, "perm has %d entries for rank %d", np, x->rank);
  for (int i = 0; i < x->rank; i++) {
    int64_t p = perm ? norm_axis(perm[i], x->rank) : x->rank - 1 - i;
    if (p < 0 || p >= x->rank)
      return node_error(n, d, "perm entry %lld is out of range", (long long)perm[i]);
    st[i] = xs[p];
  }
  Walk w;
  walk_init(&w, y->rank, y->dims);
  walk_add_strides(&w, st, 0);
  gather_walk(&w, x, y);
  return 0;
}

static int eval_slice(const Node *n, const Tensor *x, Tensor *y, Diag *d) {
  int ns, ne, na, nst;
  const int64_t *starts = attr_ints(n, "starts", &ns);
  const int64_t *ends = attr_ints(n, "ends", &ne);
  const int64_t *axes = attr_ints(n, "axes", &na);
  const int64_t *steps = attr_ints(n, "steps", &nst);
  if (ne != ns || (axes && na != ns) || (steps && nst != ns))
    return node_error(n, d, "starts, ends, axes and steps must have the same length");
  int64_t start[IR_MAX_RANK], step[IR_MAX_RANK], xs[IR_MAX_RANK], st[IR_MAX_RANK];
  for (int i = 0; i < x->rank; i++) {
    start[i] = 0;
    step[i] = 1;
  }
  for (int i = 0; i < ns; i++) {
    int64_t a = axes ? norm_axis(axes[i], x->rank) : i;
    if (a < 0 || a >= x->rank)
      return node_error(n, d, "slice axis %lld is out of range for rank %d",
                        (long long)(axes ? axes[i] : i), x->rank);
    int64_t dim = x->dims[a], s = starts[i], e = ends[i], k = steps ? steps[i] : 1;
    if (k == 0)
      return node_error(n, d, "slice step must not be 0");
    /* ONNX: negative counts from the end, then clamp; [0, dim] going forward,
     * [-1, dim - 1] going backward (so -1 as an end means "through index 0"). */
    if (s < 0)
      s = s < -dim ? 0 : s + dim;
    if (e < 0)
      e = e < -dim ? -1 : e + dim;
    if (k > 0) {
      s = s > dim ? dim : s;
      e = e > dim ? dim : e < 0 ? 0 : e;
    } else {
      s = s > dim - 1 ? dim - 1 : s;
      e = e > dim - 1 ? dim - 1 : e;
    }
    /* in uint64: a step of INT64_MIN has no int64 negation */
    uint64_t mag = k > 0 ? (uint64_t)k : 0 - (uint64_t)k;
    int64_t span = k > 0 ? e - s : s - e;
    int64_t count = span > 0 ? (int64_t)(((uint64_t)span - 1) / mag + 1) : 0;
    if (count != y->dims[a])
      return node_error(n, d, "slice of axis %lld has %lld elements but inference says %lld",
                        (long long)a, (long long)count, (long long)y->dims[a]);
    start[a] = count ? s : 0;
    step[a] = count > 1 ? k : 1; /* a huge step taken once must not overflow a stride */
  }
  contiguous_strides(x->rank, x->dims, xs);
  int64_t base = 0;
  for (int i = 0; i < x->rank; i++) {
    base += start[i] * xs[i];
    st[i] = step[i] * xs[i];
  }
  Walk w;
  walk_init(&w, y->rank, y->dims);
  walk_add_strides(&w, st, base);
  gather_walk(&w, x, y);
  return 0;
}

static int eval_concat(const Node *n, Tensor *const *in, Tensor *y) {
  int64_t axis = norm_axis(attr_int(n, "axis"), y->rank);
  int64_t outer, len, inner;
  split_at_axis(y, (int)axis, &outer, &len, &inner);
  int64_t at = 0; /* position along axis */
  for (int k = 0; k < n->nin; k++) {
    const Tensor *x = in[k];
    int64_t xl = x->dims[axis];
    for (int64_t o = 0; o < outer; o++)
      for (int64_t j = 0; j < xl * inner; j++)
        copy_elem(x, o * xl * inner + j, y, (o * len + at) * inner + j);
    at += xl;
  }
  return 0;
}

static int eval_split(const Node *n, const Tensor *x, Tensor **out, Diag *d) {
  int64_t axis = norm_axis(attr_int(n, "axis"), x->rank);
  if (axis < 0 || axis >= x->rank)
    return node_error(n, d, "axis %lld is out of range for rank %d",
                      (long long)attr_int(n, "axis"), x->rank);
  int64_t outer, len, inner;
  split_at_axis(x, (int)axis, &outer, &len, &inner);
  int64_t at = 0;
  for (int k = 0; k < n->nout; k++) {
    Tensor *y = out[k];
    int64_t yl = y->dims[axis];
    if (at + yl > len)
      return node_error(n, d, "split sizes add up to more than %lld", (long long)len);
    for (int64_t o = 0; o < outer; o++)
      for (int64_t j = 0; j < yl * inner; j++)
        copy_elem(x, (o * len + at) * inner + j, y, o * yl * inner + j);
    at += yl;
  }
  return 0;
}

static int eval_gather(const Node *n, const Tensor *x, const Tensor *idx, Tensor *y,
                       Diag *d) {
  int64_t axis = norm_axis(attr_int(n, "axis"), x->rank);
  if (axis < 0 || axis >= x->rank)
    return node_error(n, d, "axis %lld is out of range for rank %d",
                      (long long)attr_int(n, "axis"), x->rank);
  int64_t outer, len, inner;
  split_at_axis(x, (int)axis, &outer, &len, &inner);
  int64_t ni = tensor_numel(idx);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < ni; j++) {
      int64_t i;
      if (index_at(n, d, idx, j, (int)axis, len, &i))
        return -1;
      for (int64_t k = 0; k < inner; k++)
        copy_elem(x, (o * len + i) * inner + k, y, (o * ni + j) * inner + k);
    }
  return 0;
}

/* ---------------------------------------------------------------- neural-network ops */

/* Row-major coordinates of flat index i in a space of k dims. */
static void unravel(int64_t i, int k, const int64_t *dims, int64_t *coord) {
  for (int j = k - 1; j >= 0; j--) {
    coord[j] = dims[j] ? i % dims[j] : 0;
    i = dims[j] ? i / dims[j] : 0;
  }
}

/* The flat index of row-major coordinates: unravel's inverse. */
static int64_t ravel(int k, const int64_t *dims, const int64_t *coord) {
  int64_t off = 0;
  for (int j = 0; j < k; j++)
    off = off * dims[j] + coord[j];
  return off;
}

static int64_t prod(int k, const int64_t *dims) {
  int64_t p = 1;
  for (int j = 0; j < k; j++)
    p *= dims[j];
  return p;
}

/* A list attribute of `want` entries, or dflt for each when empty (inference has
 * checked the lengths). */
static void list_or(const Node *n, const char *name, int want, int64_t dflt, int64_t *dst) {
  int len;
  const int64_t *v = attr_ints(n, name, &len);
  for (int i = 0; i < want; i++)
    dst[i] = len ? v[i] : dflt;
}

/* Strides, dilations and begin pads of a window op over k spatial dims. */
typedef struct Window {
  int64_t stride[IR_MAX_RANK], dil[IR_MAX_RANK], pad[2 * IR_MAX_RANK];
} Window;

static void window_read(const Node *n, int k, Window *w) {
  list_or(n, "strides", k, 1, w->stride);
  list_or(n, "dilations", k, 1, w->dil);
  list_or(n, "pads", 2 * k, 0, w->pad);
}

/* The offset of x[b, c, p...] in a [B, C, spatial...] tensor. */
static int64_t nchw_off(const Tensor *t, int64_t b, int64_t c, const int64_t *p) {
  int64_t off = b * t->dims[1] + c;
  for (int j = 2; j < t->rank; j++)
    off = off * t->dims[j] + p[j - 2];
  return off;
}

static double ld(const Tensor *t, int64_t i) { return dtype_load_f64(t->dtype, elem(t, i)); }

static int eval_conv(const Node *n, Tensor *const *in, Tensor *y, Diag *d) {
  const Tensor *x = in[0], *w = in[1], *b = n->nin > 2 ? in[2] : NULL;
  int k = x->rank - 2;
  Window win;
  window_read(n, k, &win);
  int64_t group = attr_int(n, "group"), batch = x->dims[0], m_all = y->dims[1];
  int64_t cg = w->dims[1], mg = m_all / group;
  int64_t nout = prod(k, y->dims + 2), nker = prod(k, w->dims + 2), nin = prod(k, x->dims + 2);
  /* x and w read into doubles once, and each kernel tap's coordinates computed once. */
  int64_t nx = tensor_numel(x), nw = tensor_numel(w);
  double *xd = malloc(sizeof(double) * (size_t)(nx + 1));
  double *wd = malloc(sizeof(double) * (size_t)(nw + 1));
  int64_t *taps = malloc(sizeof(int64_t) * (size_t)(nker * k + 1));
  if (!xd || !wd || !taps) {
    free(xd), free(wd), free(taps);
    return node_error(n, d, "out of memory");
  }
  load_f64(x, 0, 1, nx, false, xd);
  load_f64(w, 0, 1, nw, false, wd);
  for (int64_t ki = 0; ki < nker; ki++)
    unravel(ki, k, w->dims + 2, taps + ki * k);
  int64_t o[IR_MAX_RANK];
  for (int64_t nb = 0; nb < batch; nb++)
    for (int64_t m = 0; m < m_all; m++)
      for (int64_t oi = 0; oi < nout; oi++) {
        unravel(oi, k, y->dims + 2, o);
        double acc = b ? ld(b, m) : 0;
        for (int64_t ci = 0; ci < cg; ci++) {
          const double *xc = xd + (nb * x->dims[1] + m / mg * cg + ci) * nin;
          const double *wc = wd + (m * cg + ci) * nker;
          for (int64_t ki = 0; ki < nker; ki++) {
            const int64_t *kk = taps + ki * k;
            int64_t off = 0;
            bool inside = true;
            for (int j = 0; j < k && inside; j++) {
              int64_t p = o[j] * win.stride[j] - win.pad[j] + kk[j] * win.dil[j];
              inside = p >= 0 && p < x->dims[2 + j];
              off = off * x->dims[2 + j] + p;
            }
            if (inside)
              acc += xc[off] * wc[ki];
          }
        }
        dtype_store_f64(y->dtype, elem(y, nchw_off(y, nb, m, o)), acc);
      }
  free(xd), free(wd), free(taps);
  return 0;
}

/* Every input element scatters into the output windows it belongs to. */
static int eval_conv_transpose(const Node *n, Tensor *const *in, Tensor *y, Diag *d) {
  const Tensor *x = in[0], *w = in[1], *b = n->nin > 2 ? in[2] : NULL;
  int k = x->rank - 2;
  Window win;
  window_read(n, k, &win);
  int64_t group = attr_int(n, "group"), batch = x->dims[0], c_all = x->dims[1];
  int64_t cg = c_all / group, mg = w->dims[1], m_all = y->dims[1];
  int64_t nin = prod(k, x->dims + 2), nker = prod(k, w->dims + 2);
  int64_t numel = tensor_numel(y);
  double *acc = calloc((size_t)numel + 1, sizeof(double));
  if (!acc)
    return node_error(n, d, "out of memory");
  int64_t p[IR_MAX_RANK], kk[IR_MAX_RANK], o[IR_MAX_RANK];
  for (int64_t nb = 0; nb < batch; nb++)
    for (int64_t c = 0; c < c_all; c++)
      for (int64_t mi = 0; mi < mg; mi++) {
        int64_t m = c / cg * mg + mi;
        for (int64_t pi = 0; pi < nin; pi++) {
          unravel(pi, k, x->dims + 2, p);
          double xv = ld(x, nchw_off(x, nb, c, p));
          for (int64_t ki = 0; ki < nker; ki++) {
            unravel(ki, k, w->dims + 2, kk);
            bool inside = true;
            for (int j = 0; j < k; j++) {
              o[j] = p[j] * win.stride[j] - win.pad[j] + kk[j] * win.dil[j];
              inside = inside && o[j] >= 0 && o[j] < y->dims[2 + j];
            }
            if (inside)
              acc[nchw_off(y, nb, m, o)] += xv * ld(w, nchw_off(w, c, mi, kk));
          }
        }
      }
  int64_t plane = prod(k, y->dims + 2);
  for (int64_t i = 0; i < numel; i++) {
    double v = acc[i] + (b ? ld(b, i / plane % m_all) : 0);
    dtype_store_f64(y->dtype, elem(y, i), v);
  }
  free(acc);
  return 0;
}

static int eval_pool(const Node *n, const Tensor *x, Tensor *y) {
  int k = x->rank - 2;
  bool global = n->op == OP_GLOBAL_AVERAGE_POOL || n->op == OP_GLOBAL_MAX_POOL;
  bool is_max = n->op == OP_MAX_POOL || n->op == OP_GLOBAL_MAX_POOL;
  Window win;
  int64_t kernel[IR_MAX_RANK];
  if (global) {
    for (int j = 0; j < k; j++) {
      win.stride[j] = win.dil[j] = 1;
      win.pad[j] = win.pad[k + j] = 0;
      kernel[j] = x->dims[2 + j];
    }
  } else {
    window_read(n, k, &win);
    list_or(n, "kernel_shape", k, 1, kernel);
  }
  bool include_pad = n->op == OP_AVERAGE_POOL && attr_int(n, "count_include_pad") != 0;
  bool fl = dtype_is_float(x->dtype);
  int64_t planes = x->dims[0] * x->dims[1], nout = prod(k, y->dims + 2);
  int64_t nx = prod(k, x->dims + 2), nker = prod(k, kernel);
  int64_t o[IR_MAX_RANK], kk[IR_MAX_RANK], p[IR_MAX_RANK];
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t oi = 0; oi < nout; oi++) {
      unravel(oi, k, y->dims + 2, o);
      double sum = 0, best = -INFINITY;
      int64_t ibest = 0, n_in = 0, n_padded = 0;
      for (int64_t ki = 0; ki < nker; ki++) {
        unravel(ki, k, kernel, kk);
        bool inside = true, padded = true;
        int64_t off = 0;
        for (int j = 0; j < k; j++) {
          p[j] = o[j] * win.stride[j] - win.pad[j] + kk[j] * win.dil[j];
          inside = inside && p[j] >= 0 && p[j] < x->dims[2 + j];
          padded = padded && p[j] >= -win.pad[j] && p[j] < x->dims[2 + j] + win.pad[k + j];
          off = off * x->dims[2 + j] + p[j];
        }
        n_padded += padded;
        if (!inside)
          continue;
        off += pl * nx;
        if (fl) {
          double v = ld(x, off);
          /* like reduce_max: a NaN in the window makes the max NaN */
          if (isnan(v) || v > best)
            best = isnan(best) ? best : v;
          sum += v;
        } else {
          int64_t v = dtype_load_i64(x->dtype, elem(x, off));
          if (!n_in || v > ibest)
            ibest = v;
        }
        n_in++;
      }
      int64_t yo = pl * nout + oi;
      if (is_max && !fl)
        dtype_store_i64(y->dtype, elem(y, yo), ibest);
      else
        dtype_store_f64(y->dtype, elem(y, yo),
                        is_max ? best : sum / (double)(include_pad ? n_padded : n_in));
    }
  return 0;
}

/* batch_norm, instance_norm and lrn: x is [N, C, rest...] seen as planes of `inner`. */
static int eval_norm(const Node *n, Tensor *const *in, Tensor *y) {
  const Tensor *x = in[0];
  int64_t batch = x->dims[0], ch = x->dims[1], inner = prod(x->rank - 2, x->dims + 2);
  double eps = n->op == OP_LRN ? 0 : attr_float(n, "epsilon");
  for (int64_t b = 0; b < batch; b++)
    for (int64_t c = 0; c < ch; c++) {
      int64_t base = (b * ch + c) * inner;
      double mean = 0, var = 0;
      if (n->op == OP_BATCH_NORM) {
        mean = ld(in[3], c);
        var = ld(in[4], c);
      } else if (n->op == OP_INSTANCE_NORM) {
        for (int64_t i = 0; i < inner; i++)
          mean += ld(x, base + i);
        mean /= (double)inner;
        for (int64_t i = 0; i < inner; i++)
          var += (ld(x, base + i) - mean) * (ld(x, base + i) - mean);
        var /= (double)inner;
      }
      for (int64_t i = 0; i < inner; i++) {
        double v = ld(x, base + i);
        if (n->op == OP_LRN) {
          int64_t size = attr_int(n, "size");
          double sq = 0;
          /* the window clipped to the channels first: size may be any positive int64 */
          int64_t lo = c - (size - 1) / 2, hi = size / 2 < ch - c ? c + size / 2 : ch - 1;
          for (int64_t c2 = lo < 0 ? 0 : lo; c2 <= hi; c2++)
            sq += ld(x, (b * ch + c2) * inner + i) * ld(x, (b * ch + c2) * inner + i);
          v /= pow(attr_float(n, "bias") + attr_float(n, "alpha") / (double)size * sq,
                   attr_float(n, "beta"));
        } else {
          v = (v - mean) / sqrt(var + eps) * ld(in[1], c) + ld(in[2], c);
        }
        dtype_store_f64(y->dtype, elem(y, base + i), v);
      }
    }
  return 0;
}

static int eval_pad(const Node *n, const Tensor *x, Tensor *y, Diag *d) {
  int r = x->rank, len;
  const int64_t *pads = attr_ints(n, "pads", &len);
  const char *mode = attr_string(n, "mode");
  bool reflect = !strcmp(mode, "reflect"), edge = !strcmp(mode, "edge");
  Tensor *fill = tensor_new(y->dtype, 0, NULL); /* the constant, converted once */
  if (!fill)
    return node_error(n, d, "out of memory");
  dtype_store_f64(y->dtype, fill->data, attr_float(n, "value"));
  int64_t numel = tensor_numel(y), o[IR_MAX_RANK];
  for (int64_t i = 0; i < numel; i++) {
    unravel(i, r, y->dims, o);
    int64_t off = 0;
    bool outside = false;
    for (int j = 0; j < r; j++) {
      int64_t p = o[j] - pads[j], dim = x->dims[j];
      if (p < 0 || p >= dim) {
        if (reflect)
          p = p < 0 ? -p : 2 * (dim - 1) - p;
        else if (edge)
          p = p < 0 ? 0 : dim - 1;
        else
          outside = true;
      }
      off = off * dim + p;
    }
    if (outside)
      copy_elem(fill, 0, y, i);
    else
      copy_elem(x, off, y, i);
  }
  tensor_free(fill);
  return 0;
}

/* The input coordinate of output coordinate xo on one dim (the ONNX formulas). Given
 * scales, align_corners divides by the unrounded output length in * scale, as the ONNX
 * reference implementation (and so the conformance data) does. */
static double resize_coord(const char *mode, double xo, int64_t in, int64_t out, double scale,
                           bool scaled) {
  if (!strcmp(mode, "asymmetric"))
    return xo / scale;
  if (!strcmp(mode, "align_corners")) {
    double len = scaled ? scale * (double)in : (double)out;
    return len == 1 ? 0 : xo * (double)(in - 1) / (len - 1);
  }
  if (!strcmp(mode, "pytorch_half_pixel"))
    return out > 1 ? (xo + 0.5) / scale - 0.5 : 0;
  if (!strcmp(mode, "half_pixel_symmetric")) {
    double adjust = (double)out / (scale * (double)in);
    return (double)in / 2 * (1 - adjust) + (xo + 0.5) / scale - 0.5;
  }
  return (xo + 0.5) / scale - 0.5; /* half_pixel */
}

static double cubic_coeff(double s, double a) {
  s = fabs(s);
  if (s <= 1)
    return ((a + 2) * s - (a + 3)) * s * s + 1;
  if (s < 2)
    return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a;
  return 0;
}

static int eval_resize(const Node *n, const Tensor *x, Tensor *y) {
  int r = x->rank;
  const char *mode = attr_string(n, "mode");
  const char *coord = attr_string(n, "coordinate_transformation_mode");
  const char *nm = attr_string(n, "nearest_mode");
  const Attr *sc = attr_find(n, "scales");
  double a = attr_float(n, "cubic_coeff_a");
  bool exclude = attr_int(n, "exclude_outside") != 0;
  bool nearest = !strcmp(mode, "nearest"), linear = !strcmp(mode, "linear");
  /* per dim: up to 4 source indices and their weights */
  int64_t idx[IR_MAX_RANK][4], o[IR_MAX_RANK], corner[IR_MAX_RANK];
  double wt[IR_MAX_RANK][4];
  int64_t cnt[IR_MAX_RANK];
  int64_t numel = tensor_numel(y);
  for (int64_t i = 0; i < numel; i++) {
    unravel(i, r, y->dims, o);
    for (int j = 0; j < r; j++) {
      int64_t in = x->dims[j], out = y->dims[j];
      double scale = sc ? sc->floats[j] : (double)out / (double)in;
      double xi = resize_coord(coord, (double)o[j], in, out, scale, sc != NULL);
      if (nearest) {
        double f = floor(xi);
        bool half = xi - f == 0.5;
        double v = !strcmp(nm, "floor") ? f : !strcmp(nm, "ceil") ? ceil(xi)
                 : half ? (!strcmp(nm, "round_prefer_ceil") ? f + 1 : f) : floor(xi + 0.5);
        /* a NaN coordinate (a scale so small that inf - inf appears) takes element 0,
         * as the kernel's conversion does */
        idx[j][0] = !(v >= 0) ? 0 : v > (double)(in - 1) ? in - 1 : (int64_t)v;
        wt[j][0] = 1;
        cnt[j] = 1;
        continue;
      }
      /* beyond a few elements outside, every tap clamps to the edge: the clamp keeps the
       * int64 conversion defined for absurd scales */
      xi = xi < -8 ? -8 : xi > (double)in + 8 ? (double)in + 8 : xi;
      double f = floor(xi), t = xi - f;
      int64_t i0 = isnan(f) ? 0 : (int64_t)f; /* NaN weights then make the result NaN */
      double total = 0;
      cnt[j] = linear ? 2 : 4;
      for (int q = 0; q < cnt[j]; q++) {
        int64_t at = linear ? i0 + q : i0 - 1 + q;
        wt[j][q] = linear ? (q ? t : 1 - t) : cubic_coeff(t - (double)(at - i0), a);
        if (exclude && (at < 0 || at >= in))
          wt[j][q] = 0;
        total += wt[j][q];
        idx[j][q] = at < 0 ? 0 : at >= in ? in - 1 : at;
      }
      if (exclude)
        for (int q = 0; q < cnt[j]; q++)
          wt[j][q] /= total;
    }
    /* the weighted sum over every combination of the dims' source indices */
    double acc = 0;
    int64_t ncorner = prod(r, cnt);
    for (int64_t ci = 0; ci < ncorner; ci++) {
      unravel(ci, r, cnt, corner);
      double w = 1;
      int64_t off = 0;
      for (int j = 0; j < r; j++) {
        w *= wt[j][corner[j]];
        off = off * x->dims[j] + idx[j][corner[j]];
      }
      if (nearest) {
        copy_elem(x, off, y, i);
        break;
      }
      acc += w * ld(x, off);
    }
    if (!nearest)
      dtype_store_f64(y->dtype, elem(y, i), acc);
  }
  return 0;
}

/* ---------------------------------------------------------------- sorting, scans and indexing */

typedef struct TopkItem {
  double f;
  int64_t i, idx;
} TopkItem;

/* Does a come before b: larger (or smaller) first, a NaN as the largest, ties by index. */
static bool topk_before(const TopkItem *a, const TopkItem *b, bool fl, bool largest) {
  if (fl && (isnan(a->f) || isnan(b->f))) {
    if (isnan(a->f) != isnan(b->f))
      return isnan(a->f) == largest;
  } else {
    bool gt = fl ? a->f > b->f : a->i > b->i, lt = fl ? a->f < b->f : a->i < b->i;
    if (gt || lt)
      return largest ? gt : lt;
  }
  return a->idx < b->idx;
}

/* A stable merge sort of items[0, len) by topk_before, through tmp. */
static void topk_sort(TopkItem *items, TopkItem *tmp, int64_t len, bool fl, bool largest) {
  for (int64_t w = 1; w < len; w *= 2) {
    for (int64_t lo = 0; lo < len; lo += 2 * w) {
      int64_t mid = lo + w < len ? lo + w : len, hi = lo + 2 * w < len ? lo + 2 * w : len;
      int64_t a = lo, b = mid, k = lo;
      while (a < mid || b < hi)
        tmp[k++] = b >= hi || (a < mid && !topk_before(&items[b], &items[a], fl, largest))
                       ? items[a++] : items[b++];
    }
    memcpy(items, tmp, sizeof *items * (size_t)len);
  }
}

static int eval_topk(const Node *n, const Tensor *x, Tensor **out, Diag *d) {
  int axis = (int)norm_axis(attr_int(n, "axis"), x->rank);
  int64_t k = attr_int(n, "k");
  bool largest = attr_int(n, "largest") != 0, fl = dtype_is_float(x->dtype);
  int64_t outer, len, inner;
  split_at_axis(x, axis, &outer, &len, &inner);
  TopkItem *items = malloc(sizeof *items * (size_t)(len + 1));
  TopkItem *tmp = malloc(sizeof *tmp * (size_t)(len + 1));
  if (!items || !tmp) {
    free(items), free(tmp);
    return node_error(n, d, "out of memory");
  }
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      for (int64_t j = 0; j < len; j++) {
        int64_t off = (o * len + j) * inner + in;
        items[j] = (TopkItem){fl ? ld(x, off) : 0, fl ? 0 : dtype_load_i64(x->dtype, elem(x, off)), j};
      }
      topk_sort(items, tmp, len, fl, largest);
      for (int64_t j = 0; j < k; j++) {
        int64_t yo = (o * k + j) * inner + in;
        copy_elem(x, (o * len + items[j].idx) * inner + in, out[0], yo);
        dtype_store_i64(DT_I64, elem(out[1], yo), items[j].idx);
      }
    }
  free(items), free(tmp);
  return 0;
}

static int eval_cumsum(const Node *n, const Tensor *x, Tensor *y) {
  int axis = (int)norm_axis(attr_int(n, "axis"), x->rank);
  bool excl = attr_int(n, "exclusive") != 0, rev = attr_int(n, "reverse") != 0;
  bool fl = dtype_is_float(x->dtype);
  int64_t outer, len, inner;
  split_at_axis(x, axis, &outer, &len, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      double accf = 0;
      int64_t acci = 0;
      for (int64_t s = 0; s < len; s++) {
        int64_t j = rev ? len - 1 - s : s, off = (o * len + j) * inner + in;
        double vf = fl ? ld(x, off) : 0;
        int64_t vi = fl ? 0 : dtype_load_i64(x->dtype, elem(x, off));
        if (!excl) {
          accf += vf;
          acci = iadd(acci, vi);
        }
        if (fl)
          dtype_store_f64(y->dtype, elem(y, off), accf);
        else
          dtype_store_i64(y->dtype, elem(y, off), acci);
        if (excl) {
          accf += vf;
          acci = iadd(acci, vi);
        }
      }
    }
  return 0;
}

static int eval_trilu(const Node *n, const Tensor *x, Tensor *y) {
  bool upper = attr_int(n, "upper") != 0;
  int64_t k = attr_int(n, "k"), rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
  int64_t numel = tensor_numel(x);
  for (int64_t i = 0; i < numel; i++) {
    int64_t c = i % cols, r = i / cols % rows;
    /* j - i compared with k, in double: k may be anything int64 holds */
    double diag = (double)c - (double)r;
    if (upper ? diag >= (double)k : diag <= (double)k)
      copy_elem(x, i, y, i);
    else
      memset(elem(y, i), 0, dtype_size(y->dtype));
  }
  return 0;
}

static int eval_tile(const Tensor *x, Tensor *y) {
  int64_t numel = tensor_numel(y), o[IR_MAX_RANK];
  for (int64_t i = 0; i < numel; i++) {
    unravel(i, y->rank, y->dims, o);
    int64_t off = 0;
    for (int j = 0; j < x->rank; j++)
      off = off * x->dims[j] + o[j] % x->dims[j];
    copy_elem(x, off, y, i);
  }
  return 0;
}

static int eval_gather_elements(const Node *n, const Tensor *x, const Tensor *idx, Tensor *y,
                                Diag *d) {
  int axis = (int)norm_axis(attr_int(n, "axis"), x->rank);
  int64_t numel = tensor_numel(y), o[IR_MAX_RANK];
  for (int64_t i = 0; i < numel; i++) {
    unravel(i, y->rank, y->dims, o);
    if (index_at(n, d, idx, i, axis, x->dims[axis], &o[axis]))
      return -1;
    int64_t off = ravel(x->rank, x->dims, o);
    copy_elem(x, off, y, i);
  }
  return 0;
}

/* y[off] = u[i], or combined with it by reduction add, mul, max or min (a NaN wins). */
static void scatter_one(const char *red, const Tensor *u, int64_t i, Tensor *y, int64_t off) {
  if (!strcmp(red, "none")) {
    copy_elem(u, i, y, off);
  } else if (dtype_is_float(y->dtype)) {
    double a = ld(y, off), b = ld(u, i);
    double v = !strcmp(red, "add") ? a + b : !strcmp(red, "mul") ? a * b
             : !strcmp(red, "max") ? (isnan(a) || isnan(b) ? NAN : a > b ? a : b)
             : (isnan(a) || isnan(b) ? NAN : a < b ? a : b);
    dtype_store_f64(y->dtype, elem(y, off), v);
  } else {
    int64_t a = dtype_load_i64(y->dtype, elem(y, off)), b = dtype_load_i64(u->dtype, elem(u, i));
    int64_t v = !strcmp(red, "add") ? iadd(a, b) : !strcmp(red, "mul") ? imul(a, b)
              : !strcmp(red, "max") ? (a > b ? a : b) : (a < b ? a : b);
    dtype_store_i64(y->dtype, elem(y, off), v);
  }
}

static int eval_scatter_elements(const Node *n, Tensor *const *in, Tensor *y, Diag *d) {
  const Tensor *x = in[0], *idx = in[1], *u = in[2];
  int axis = (int)norm_axis(attr_int(n, "axis"), x->rank);
  const char *red = attr_string(n, "reduction");
  memcpy(y->data, x->data, tensor_nbytes(x));
  int64_t numel = tensor_numel(u), o[IR_MAX_RANK];
  for (int64_t i = 0; i < numel; i++) {
    unravel(i, u->rank, u->dims, o);
    if (index_at(n, d, idx, i, axis, x->dims[axis], &o[axis]))
      return -1;
    scatter_one(red, u, i, y, ravel(x->rank, x->dims, o));
  }
  return 0;
}

static int eval_range(Tensor *const *in, Tensor *y) {
  bool fl = dtype_is_float(y->dtype);
  int64_t numel = tensor_numel(y);
  for (int64_t i = 0; i < numel; i++) {
    if (fl)
      dtype_store_f64(y->dtype, elem(y, i), ld(in[0], 0) + (double)i * ld(in[2], 0));
    else
      dtype_store_i64(y->dtype, elem(y, i),
                      iadd(dtype_load_i64(in[0]->dtype, in[0]->data),
                           imul(i, dtype_load_i64(in[2]->dtype, in[2]->data))));
  }
  return 0;
}

/* depth_to_space and space_to_depth: each output element names its source directly. */
static int eval_space_depth(const Node *n, const Tensor *x, Tensor *y) {
  int64_t b = attr_int(n, "blocksize"), numel = tensor_numel(y), o[4];
  const char *mode = attr_string(n, "mode");
  bool crd = mode && !strcmp(mode, "CRD");
  for (int64_t i = 0; i < numel; i++) {
    unravel(i, 4, y->dims, o);
    int64_t src[4];
    if (n->op == OP_DEPTH_TO_SPACE) {
      int64_t bi = o[2] % b, bj = o[3] % b, c = y->dims[1];
      src[0] = o[0];
      src[1] = crd ? (o[1] * b + bi) * b + bj : (bi * b + bj) * c + o[1];
      src[2] = o[2] / b;
      src[3] = o[3] / b;
    } else {
      int64_t c = x->dims[1], blk = o[1] / c;
      src[0] = o[0];
      src[1] = o[1] % c;
      src[2] = o[2] * b + blk / b;
      src[3] = o[3] * b + blk % b;
    }
    copy_elem(x, ravel(4, x->dims, src), y, i);
  }
  return 0;
}

static int eval_one_hot(const Node *n, const Tensor *idx, const Tensor *vals, Tensor *y) {
  int axis = (int)norm_axis(attr_int(n, "axis"), y->rank);
  int64_t depth = attr_int(n, "depth"), numel = tensor_numel(y), o[IR_MAX_RANK];
  bool fl = dtype_is_float(idx->dtype);
  for (int64_t i = 0; i < numel; i++) {
    unravel(i, y->rank, y->dims, o);
    int64_t k = o[axis];
    /* the index's coordinates are the output's without the axis */
    for (int j = axis; j + 1 < y->rank; j++)
      o[j] = o[j + 1];
    int64_t at = ravel(idx->rank, idx->dims, o), v;
    if (fl) {
      double dv = trunc(dtype_load_f64(idx->dtype, elem(idx, at)));
      /* NaN and anything outside [-depth, depth): no class */
      v = dv >= -(double)depth && dv < (double)depth ? (int64_t)dv : depth;
    } else {
      v = dtype_load_i64(idx->dtype, elem(idx, at));
    }
    if (v < 0 && v >= -depth)
      v += depth;
    copy_elem(vals, v == k, y, i);
  }
  return 0;
}

/* nll_loss, and softmax_cross_entropy as nll_loss of log_softmax over axis 1. x is viewed
 * as [N, C, D] and the target as [N, D]. */
static int eval_loss(const Node *n, Tensor *const *in, Tensor **out, Diag *d) {
  const Tensor *x = in[0], *t = in[1], *w = n->nin > 2 ? in[2] : NULL;
  int64_t N = x->dims[0], C = x->dims[1], D = 1;
  for (int i = 2; i < x->rank; i++)
    D *= x->dims[i];
  const char *red = attr_string(n, "reduction");
  const Attr *ig = attr_find(n, "ignore_index");
  double *lp = malloc(sizeof(double) * (size_t)(N * C * D + 1));
  if (!lp)
    return node_error(n, d, "out of memory");
  for (int64_t i = 0; i < N * C * D; i++)
    lp[i] = ld(x, i);
  if (n->op == OP_SOFTMAX_CROSS_ENTROPY) {
    for (int64_t b = 0; b < N; b++)
      for (int64_t j = 0; j < D; j++) {
        double *row = lp + b * C * D + j, mx = -INFINITY, sum = 0;
        for (int64_t c = 0; c < C; c++)
          mx = fmax(mx, row[c * D]);
        if (isinf(mx))
          mx = 0; /* as in softmax: no inf - inf */
        for (int64_t c = 0; c < C; c++)
          sum += exp(row[c * D] - mx);
        for (int64_t c = 0; c < C; c++) {
          row[c * D] = row[c * D] - mx - log(sum);
          dtype_store_f64(out[1]->dtype, elem(out[1], (b * C + c) * D + j), row[c * D]);
        }
      }
  }
  double total = 0, wsum = 0;
  for (int64_t b = 0; b < N; b++)
    for (int64_t j = 0; j < D; j++) {
      int64_t tv = dtype_load_i64(t->dtype, elem(t, b * D + j));
      double loss = 0;
      if (!ig || tv != ig->i) {
        if (tv < 0 || tv >= C) {
          free(lp);
          return node_error(n, d, "target %lld is out of range for %lld classes",
                            (long long)tv, (long long)C);
        }
        double wt = w ? ld(w, tv) : 1;
        loss = -lp[(b * C + tv) * D + j] * wt;
        wsum += wt;
      }
      total += loss;
      if (!strcmp(red, "none"))
        dtype_store_f64(out[0]->dtype, elem(out[0], b * D + j), loss);
    }
  if (!strcmp(red, "sum"))
    dtype_store_f64(out[0]->dtype, out[0]->data, total);
  else if (!strcmp(red, "mean"))
    dtype_store_f64(out[0]->dtype, out[0]->data, total / wsum); /* NaN when all ignored */
  free(lp);
  return 0;
}

/* ---------------------------------------------------------------- gather_nd to mean_variance_norm */

/* The flat offset in data (of dims[from, from + k)) that index tuple t of idx names, each
 * entry checked like gather's. */
static int nd_offset(const Node *n, Diag *d, const Tensor *idx, int64_t t, int64_t k,
                     const int64_t *dims, int from, int64_t *off) {
  *off = 0;
  for (int64_t j = 0; j < k; j++) {
    int64_t at;
    if (index_at(n, d, idx, t * k + j, from + (int)j, dims[from + j], &at))
      return -1;
    *off = *off * dims[from + j] + at;
  }
  return 0;
}

/* gather_nd: data seen as [batch, tuple space, slice], indices as [batch, tuples, k]. */
static int eval_gather_nd(const Node *n, const Tensor *x, const Tensor *idx, Tensor *y,
                          Diag *d) {
  int b = (int)attr_int(n, "batch_dims"), q = idx->rank, r = x->rank;
  int64_t k = idx->dims[q - 1];
  int64_t nbatch = prod(b, x->dims), ntup = prod(q - 1 - b, idx->dims + b);
  int64_t slice = prod(r - b - (int)k, x->dims + b + k), per_batch = prod(r - b, x->dims + b);
  for (int64_t bi = 0; bi < nbatch; bi++)
    for (int64_t t = bi * ntup; t < (bi + 1) * ntup; t++) {
      int64_t off;
      if (nd_offset(n, d, idx, t, k, x->dims, b, &off))
        return -1;
      for (int64_t e = 0; e < slice; e++)
        copy_elem(x, bi * per_batch + off * slice + e, y, t * slice + e);
    }
  return 0;
}

static int eval_scatter_nd(const Node *n, Tensor *const *in, Tensor *y, Diag *d) {
  const Tensor *x = in[0], *idx = in[1], *u = in[2];
  const char *red = attr_string(n, "reduction");
  int64_t k = idx->dims[idx->rank - 1];
  int64_t ntup = prod(idx->rank - 1, idx->dims), slice = prod(x->rank - (int)k, x->dims + k);
  memcpy(y->data, x->data, tensor_nbytes(x));
  for (int64_t t = 0; t < ntup; t++) {
    int64_t off;
    if (nd_offset(n, d, idx, t, k, x->dims, 0, &off))
      return -1;
    for (int64_t e = 0; e < slice; e++)
      scatter_one(red, u, t * slice + e, y, off * slice + e);
  }
  return 0;
}

/* Reflects x by the nearer border until it lies in [lo, hi] (the ONNX reference's
 * GsReflect). A dim of one pixel with align_corners has lo == hi. */
static double gs_reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0)
    return lo;
  if (x >= lo && x <= hi)
    return x;
  bool below = x < lo;
  double dx = below ? lo - x : x - hi, times = floor(dx / range), rest = dx - times * range;
  bool even = fmod(times, 2) == 0;
  return below == even ? lo + rest : hi - rest;
}

/* The taps of grid_sample along one dim of size `in` for normalized coordinate v: up to 4
 * source indices with weights; an index of -1 is a zero (outside, padding zeros). */
typedef struct GsTaps {
  int cnt;
  int64_t at[4];
  double w[4];
} GsTaps;

static void gs_taps(double v, int64_t in, int nspatial, const char *mode, const char *pad,
                    bool align, GsTaps *t) {
  double x = align ? (v + 1) / 2 * (double)(in - 1) : ((v + 1) * (double)in - 1) / 2;
  double lo = align ? 0 : -0.5, hi = align ? (double)in - 1 : (double)in - 0.5;
  bool nearest = !strcmp(mode, "nearest");
  bool cubic = !strcmp(mode, "cubic") || !strcmp(mode, "bicubic");
  bool border = !strcmp(pad, "border"), reflect = !strcmp(pad, "reflection");
  /* like PyTorch: nearbyint (half to even), but std::round in 3-D */
  if (nearest)
    x = nspatial == 3 ? round(x) : nearbyint(x);
  if (x < lo || x > hi) {
    if (border)
      x = x < 0 ? 0 : x > (double)in - 1 ? (double)in - 1 : x;
    else if (reflect)
      x = gs_reflect(x, lo, hi);
  }
  /* beyond a few pixels outside every tap is outside too: the clamp keeps the int64
   * conversions below defined, a NaN included (its sample is NaN anyway) */
  x = !(x >= -4) ? -4 : x > (double)in + 3 ? (double)in + 3 : x;
  double f = floor(x);
  int64_t i0 = (int64_t)f;
  t->cnt = nearest ? 1 : cubic ? 4 : 2;
  for (int q = 0; q < t->cnt; q++) {
    int64_t at = nearest ? i0 : cubic ? i0 - 1 + q : i0 + q;
    t->w[q] = nearest ? 1 : cubic ? cubic_coeff(x - (double)at, -0.75) : q ? x - f : 1 - (x - f);
    if (at < 0 || at >= in) {
      if (border)
        at = at < 0 ? 0 : in - 1;
      else if (reflect)
        at = (int64_t)gs_reflect((double)at, lo, hi);
      else
        at = -1;
      at = at >= in ? in - 1 : at; /* only for a reflection that rounds past the end */
    }
    t->at[q] = at;
  }
}

static int eval_grid_sample(const Node *n, const Tensor *x, const Tensor *grid, Tensor *y) {
  const char *mode = attr_string(n, "mode"), *pad = attr_string(n, "padding_mode");
  bool align = attr_int(n, "align_corners") != 0, nearest = !strcmp(mode, "nearest");
  int r = x->rank - 2;
  int64_t N = x->dims[0], C = x->dims[1], npos = prod(r, grid->dims + 1);
  int64_t nx = prod(r, x->dims + 2), cnt[IR_MAX_RANK], corner[IR_MAX_RANK];
  GsTaps taps[IR_MAX_RANK];
  for (int64_t b = 0; b < N; b++)
    for (int64_t p = 0; p < npos; p++) {
      /* the grid lists the innermost dim's coordinate first */
      bool nan = false;
      for (int j = 0; j < r; j++) {
        double v = ld(grid, (b * npos + p) * r + (r - 1 - j));
        nan = nan || isnan(v);
        gs_taps(v, x->dims[2 + j], r, mode, pad, align, &taps[j]);
        cnt[j] = taps[j].cnt;
      }
      int64_t ncorner = prod(r, cnt);
      for (int64_t c = 0; c < C; c++) {
        int64_t yo = (b * C + c) * npos + p, base = (b * C + c) * nx;
        double acc = 0;
        for (int64_t ci = 0; ci < ncorner && !nan; ci++) {
          unravel(ci, r, cnt, corner);
          double w = 1;
          int64_t off = 0;
          bool zero = false;
          for (int j = 0; j < r; j++) {
            const GsTaps *t = &taps[j];
            w *= t->w[corner[j]];
            zero = zero || t->at[corner[j]] < 0;
            off = off * x->dims[2 + j] + t->at[corner[j]];
          }
          if (nearest && !zero)
            copy_elem(x, base + off, y, yo); /* exact for any type */
          else if (nearest)
            memset(elem(y, yo), 0, dtype_size(y->dtype));
          else if (!zero)
            acc += w * ld(x, base + off);
        }
        if (nan)
          dtype_store_f64(y->dtype, elem(y, yo), NAN);
        else if (!nearest)
          dtype_store_f64(y->dtype, elem(y, yo), acc);
      }
    }
  return 0;
}

static int eval_reverse_sequence(const Node *n, const Tensor *x, const Tensor *lens, Tensor *y,
                                 Diag *d) {
  int ba = (int)attr_int(n, "batch_axis"), ta = (int)attr_int(n, "time_axis");
  int64_t steps = x->dims[ta], numel = tensor_numel(x), o[IR_MAX_RANK];
  for (int64_t b = 0; b < x->dims[ba]; b++) {
    int64_t len = dtype_load_i64(lens->dtype, elem(lens, b));
    if (len < 0 || len > steps)
      return node_error(n, d, "sequence_lens[%lld] = %lld is out of range for %lld steps",
                        (long long)b, (long long)len, (long long)steps);
  }
  for (int64_t i = 0; i < numel; i++) {
    unravel(i, x->rank, x->dims, o);
    int64_t len = dtype_load_i64(lens->dtype, elem(lens, o[ba]));
    if (o[ta] < len)
      o[ta] = len - 1 - o[ta];
    copy_elem(x, ravel(x->rank, x->dims, o), y, i);
  }
  return 0;
}

/* One bilinear sample of an H x W plane at (py, px) the way roi_align takes it (the
 * pre-calculation of onnxruntime and the ONNX reference): 0 beyond one pixel outside, the
 * edge past the last pixel; the four weighted corners summed, or their max. */
static double roi_sample(const Tensor *x, int64_t base, int64_t H, int64_t W, double py,
                         double px, bool max) {
  /* written so that a NaN coordinate counts as outside */
  if (H == 0 || W == 0 || !(py >= -1 && py <= (double)H && px >= -1 && px <= (double)W))
    return 0;
  py = py < 0 ? 0 : py;
  px = px < 0 ? 0 : px;
  int64_t y0 = (int64_t)py, x0 = (int64_t)px, y1 = y0 + 1, x1 = x0 + 1;
  if (y0 >= H - 1) {
    y0 = y1 = H - 1;
    py = (double)y0;
  }
  if (x0 >= W - 1) {
    x0 = x1 = W - 1;
    px = (double)x0;
  }
  double ly = py - (double)y0, lx = px - (double)x0, hy = 1 - ly, hx = 1 - lx;
  double v[4] = {hy * hx * ld(x, base + y0 * W + x0), hy * lx * ld(x, base + y0 * W + x1),
                 ly * hx * ld(x, base + y1 * W + x0), ly * lx * ld(x, base + y1 * W + x1)};
  if (!max)
    return v[0] + v[1] + v[2] + v[3];
  return fmax(fmax(v[0], v[1]), fmax(v[2], v[3]));
}

/* Samples per bin side: sampling_ratio, or ceil(roi side / bins); -1 when absurd. */
static int64_t roi_grid(int64_t ratio, double side, int64_t bins) {
  if (ratio > 0)
    return ratio;
  double g = ceil(side / (double)bins);
  return !(g > 0) ? 0 : g > 1e6 ? -1 : (int64_t)g;
}

static int eval_roi_align(const Node *n, Tensor *const *in, Tensor *y, Diag *d) {
  const Tensor *x = in[0], *rois = in[1], *bidx = in[2];
  bool max = !strcmp(attr_string(n, "mode"), "max");
  bool half = !strcmp(attr_string(n, "coordinate_transformation_mode"), "half_pixel");
  double scale = attr_float(n, "spatial_scale"), shift = half ? 0.5 : 0;
  int64_t C = x->dims[1], H = x->dims[2], W = x->dims[3], OH = y->dims[2], OW = y->dims[3];
  for (int64_t r = 0; r < y->dims[0]; r++) {
    int64_t b = dtype_load_i64(bidx->dtype, elem(bidx, r));
    if (b < 0 || b >= x->dims[0])
      return node_error(n, d, "batch index %lld of roi %lld is out of range for %lld images",
                        (long long)b, (long long)r, (long long)x->dims[0]);
    double x0 = ld(rois, r * 4) * scale - shift, y0 = ld(rois, r * 4 + 1) * scale - shift;
    double rw = ld(rois, r * 4 + 2) * scale - shift - x0;
    double rh = ld(rois, r * 4 + 3) * scale - shift - y0;
    if (!half) { /* output_half_pixel: at least one pixel */
      rw = rw > 1 ? rw : 1;
      rh = rh > 1 ? rh : 1;
    }
    double bw = rw / (double)OW, bh = rh / (double)OH;
    int64_t gw = roi_grid(attr_int(n, "sampling_ratio"), rw, OW);
    int64_t gh = roi_grid(attr_int(n, "sampling_ratio"), rh, OH);
    if (gw < 0 || gh < 0 || (double)gw * (double)gh > 1e8)
      return node_error(n, d, "roi %lld is too large to sample", (long long)r);
    double count = gw * gh > 0 ? (double)(gw * gh) : 1;
    for (int64_t c = 0; c < C; c++)
      for (int64_t ph = 0; ph < OH; ph++)
        for (int64_t pw = 0; pw < OW; pw++) {
          double acc = 0;
          for (int64_t iy = 0; iy < gh; iy++)
            for (int64_t ix = 0; ix < gw; ix++) {
              double sy = y0 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
              double sx = x0 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
              double v = roi_sample(x, (b * C + c) * H * W, H, W, sy, sx, max);
              acc = !max ? acc + v : iy == 0 && ix == 0 ? v : fmax(acc, v);
            }
          int64_t yo = ((r * C + c) * OH + ph) * OW + pw;
          dtype_store_f64(y->dtype, elem(y, yo), max ? acc : acc / count);
        }
  }
  return 0;
}

/* Indices count over the default output (max_pool's); output_shape only adds zeros at
 * the end of the spatial dims, so an index moves by its coordinates. */
static int eval_max_unpool(const Node *n, const Tensor *x, const Tensor *idx, Tensor *y,
                           Diag *d) {
  int k = x->rank - 2;
  int64_t kernel[IR_MAX_RANK], stride[IR_MAX_RANK], pads[2 * IR_MAX_RANK];
  int64_t dflt[IR_MAX_RANK], c[IR_MAX_RANK];
  list_or(n, "kernel_shape", k, 1, kernel);
  list_or(n, "strides", k, 1, stride);
  list_or(n, "pads", 2 * k, 0, pads);
  dflt[0] = x->dims[0];
  dflt[1] = x->dims[1];
  for (int j = 0; j < k; j++)
    dflt[2 + j] = (x->dims[2 + j] - 1) * stride[j] + kernel[j] - pads[j] - pads[k + j];
  int64_t numel = tensor_numel(x), total = prod(x->rank, dflt);
  for (int64_t i = 0; i < numel; i++) { /* y starts zeroed */
    int64_t at = dtype_load_i64(idx->dtype, elem(idx, i));
    if (at < 0 || at >= total)
      return node_error(n, d, "index %lld is out of range for an unpooled output of %lld "
                        "elements", (long long)at, (long long)total);
    unravel(at, x->rank, dflt, c);
    copy_elem(x, i, y, ravel(y->rank, y->dims, c));
  }
  return 0;
}

/* The determinant of the m x m matrix a (destroyed): Gaussian elimination with partial
 * pivoting, the product of the pivots and the sign of the row swaps. */
static double det_lu(double *a, int64_t m) {
  double det = 1;
  for (int64_t k = 0; k < m; k++) {
    int64_t p = k;
    for (int64_t i = k + 1; i < m; i++)
      if (fabs(a[i * m + k]) > fabs(a[p * m + k]))
        p = i;
    if (a[p * m + k] == 0)
      return 0;
    if (p != k) {
      for (int64_t j = 0; j < m; j++) {
        double t = a[k * m + j];
        a[k * m + j] = a[p * m + j];
        a[p * m + j] = t;
      }
      det = -det;
    }
    det *= a[k * m + k];
    for (int64_t i = k + 1; i < m; i++) {
      double f = a[i * m + k] / a[k * m + k];
      for (int64_t j = k; j < m; j++)
        a[i * m + j] -= f * a[k * m + j];
    }
  }
  return det;
}

static int eval_det(const Node *n, const Tensor *x, Tensor *y, Diag *d) {
  int64_t m = x->dims[x->rank - 1], nmat = tensor_numel(y);
  double *a = malloc(sizeof(double) * (size_t)(m * m + 1));
  if (!a)
    return node_error(n, d, "out of memory");
  for (int64_t b = 0; b < nmat; b++) {
    for (int64_t i = 0; i < m * m; i++)
      a[i] = ld(x, b * m * m + i);
    dtype_store_f64(y->dtype, elem(y, b), det_lu(a, m));
  }
  free(a);
  return 0;
}

static int eval_lp_norm(const Node *n, const Tensor *x, Tensor *y) {
  int axis = (int)norm_axis(attr_int(n, "axis"), x->rank);
  bool p1 = attr_int(n, "p") == 1;
  int64_t outer, len, inner;
  split_at_axis(x, axis, &outer, &len, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      int64_t base = o * len * inner + in;
      double norm = 0;
      for (int64_t k = 0; k < len; k++) {
        double v = ld(x, base + k * inner);
        norm += p1 ? fabs(v) : v * v;
      }
      norm = p1 ? norm : sqrt(norm);
      for (int64_t k = 0; k < len; k++) {
        double v = ld(x, base + k * inner);
        dtype_store_f64(y->dtype, elem(y, base + k * inner), norm != 0 ? v / norm : 0);
      }
    }
  return 0;
}

/* mean_variance_norm: walks x three times, with each element's group (its index with the
 * normalized dims dropped) as the second walker operand: the means, the variances, the
 * result. */
static int eval_mvn(const Node *n, const Tensor *x, Tensor *y, Diag *d) {
  bool red[IR_MAX_RANK];
  if (reduced_axes(n, x->rank, red, d))
    return -1;
  int64_t gdims[IR_MAX_RANK], gst[IR_MAX_RANK], ast[IR_MAX_RANK], xst[IR_MAX_RANK];
  for (int i = 0; i < x->rank; i++)
    gdims[i] = red[i] ? 1 : x->dims[i];
  contiguous_strides(x->rank, gdims, gst);
  contiguous_strides(x->rank, x->dims, xst);
  for (int i = 0; i < x->rank; i++)
    ast[i] = red[i] ? 0 : gst[i];
  int64_t ngroup = prod(x->rank, gdims), numel = tensor_numel(x);
  double per = ngroup ? (double)(numel / ngroup) : 1;
  double *mean = calloc((size_t)ngroup + 1, sizeof(double));
  double *var = calloc((size_t)ngroup + 1, sizeof(double));
  if (!mean || !var) {
    free(mean), free(var);
    return node_error(n, d, "out of memory");
  }
  for (int pass = 0; pass < 3; pass++) {
    Walk w;
    walk_init(&w, x->rank, x->dims);
    walk_add_strides(&w, xst, 0);
    walk_add_strides(&w, ast, 0);
    for (int64_t i = 0; i < numel; i++, walk_next(&w)) {
      double v = ld(x, w.off[0]);
      int64_t g = w.off[1];
      if (pass == 0)
        mean[g] += v / per;
      else if (pass == 1)
        var[g] += (v - mean[g]) * (v - mean[g]) / per;
      else /* ONNX's function body adds its epsilon to the standard deviation */
        dtype_store_f64(y->dtype, elem(y, w.off[0]), (v - mean[g]) / (sqrt(var[g]) + 1e-9));
    }
  }
  free(mean), free(var);
  return 0;
}

/* ---------------------------------------------------------------- one node */

/* y = x permuted (st: x's stride along each of y's axes) where x's innermost axis is y's
 * axis a, not y's last: in tiles of the two axes. Walking y in order would read x a cache
 * line per element (a transposed weight of 768 x 3072 floats, every layer of a model, at
 * every shape class); a tile reads and writes a few lines, which stay in cache. */
static void permute_tiled(const Tensor *x, const int64_t *st, int a, Tensor *y) {
  enum { TILE = 32 };
  int r = y->rank, last = r - 1;
  int64_t ys[IR_MAX_RANK], idx[IR_MAX_RANK] = {0}, outer = 1;
  contiguous_strides(r, y->dims, ys);
  for (int i = 0; i < r; i++)
    if (i != a && i != last)
      outer *= y->dims[i];
  size_t es = dtype_size(x->dtype);
  for (int64_t o = 0; o < outer; o++) {
    int64_t from = 0, to = 0;
    for (int i = 0; i < r; i++) {
      from += idx[i] * st[i];
      to += idx[i] * ys[i];
    }
    for (int64_t i0 = 0; i0 < y->dims[a]; i0 += TILE)
      for (int64_t j0 = 0; j0 < y->dims[last]; j0 += TILE) {
        int64_t ni = y->dims[a] - i0 < TILE ? y->dims[a] - i0 : TILE;
        int64_t nj = y->dims[last] - j0 < TILE ? y->dims[last] - j0 : TILE;
        for (int64_t i = i0; i < i0 + ni; i++)
          copy_strided(elem(y, to + i * ys[a] + j0), 1, elem(x, from + i + j0 * st[last]),
                       st[last], nj, es);
      }
    /* the next index of the other axes, the last of them fastest */
    for (int i = last - 1; i >= 0; i--) {
      if (i == a)
        continue;
      if (++idx[i] < y->dims[i])
        break;
      idx[i] = 0;
    }
  }
}

void tensor_permute(const Tensor *x, const int64_t *perm, Tensor *y) {
  int64_t xs[IR_MAX_RANK], st[IR_MAX_RANK];
  contiguous_strides(x->rank, x->dims, xs);
  for (int i = 0; i < x->rank; i++)
    st[i] = xs[perm[i]];
  int inner = -1; /* y's axis that is x's innermost */
  for (int i = 0; i < y->rank && x->rank > 1; i++)
    if (perm[i] == x->rank - 1 && x->dims[x->rank - 1] > 1)
      inner = i;
  if (x->dtype == y->dtype && inner >= 0 && inner < y->rank - 1 && y->dims[y->rank - 1] > 1) {
    permute_tiled(x, st, inner, y);
    return;
  }
  Walk w;
  walk_init(&w, y->rank, y->dims);
  walk_add_strides(&w, st, 0);
  gather_walk(&w, x, y);
}

/* A new tensor: x with its dims in the order perm; NULL when out of memory. */
static Tensor *permuted(const Tensor *x, const int64_t *perm) {
  int64_t dims[IR_MAX_RANK];
  for (int i = 0; i < x->rank; i++)
    dims[i] = x->dims[perm[i]];
  Tensor *y = tensor_new(x->dtype, x->rank, dims);
  if (y)
    tensor_permute(x, perm, y);
  return y;
}

static int eval_compute(const Node *n, Tensor *const *in, Tensor **out, Diag *d);

/* A channels-last conv or pool: its channels-first twin over permuted copies of x (and
 * conv's w), the result permuted back into y. */
static int eval_channels_last(const Node *n, Tensor *const *in, Tensor *y, Diag *d) {
  int r = y->rank, nt = n->op == OP_CONV ? 2 : 1;
  int64_t first[IR_MAX_RANK], last[IR_MAX_RANK];
  channels_last_perms(r, first, last);
  Tensor *cin[3] = {in[0], n->nin > 1 ? in[1] : NULL, n->nin > 2 ? in[2] : NULL};
  Tensor *cy = permuted(y, first); /* only its dims matter: it is overwritten */
  int rc = cy ? 0 : -1;
  for (int i = 0; i < nt && !rc; i++)
    rc = (cin[i] = permuted(in[i], first)) ? 0 : -1;
  Node t = *n;
  Attr attrs[16];
  t.nattr = 0;
  for (int i = 0; i < n->nattr && t.nattr < 16; i++)
    if (strcmp(n->attrs[i].name, "channels_last"))
      attrs[t.nattr++] = n->attrs[i];
  t.attrs = attrs;
  if (rc)
    rc = node_error(n, d, "out of memory");
  else if (!(rc = eval_compute(&t, cin, &cy, d)))
    tensor_permute(cy, last, y);
  for (int i = 0; i < nt; i++)
    if (cin[i] != in[i])
      tensor_free(cin[i]);
  tensor_free(cy);
  return rc;
}

static int eval_compute(const Node *n, Tensor *const *in, Tensor **out, Diag *d) {
  Op op = n->op;
  if ((op == OP_CONV || op == OP_MAX_POOL || op == OP_AVERAGE_POOL ||
       op == OP_GLOBAL_AVERAGE_POOL || op == OP_GLOBAL_MAX_POOL) &&
      attr_int(n, "channels_last"))
    return eval_channels_last(n, in, out[0], d);
  switch (op) {
  case OP_MATMUL: return eval_matmul(n, in[0], in[1], out[0], d);
  case OP_REDUCE_SUM: case OP_REDUCE_MEAN: case OP_REDUCE_MAX: case OP_REDUCE_MIN:
  case OP_REDUCE_PROD: case OP_REDUCE_L1: case OP_REDUCE_L2: case OP_REDUCE_SUM_SQUARE:
  case OP_REDUCE_LOG_SUM_EXP:
    return eval_reduce(n, in[0], out[0], d);
  case OP_ARGMAX: case OP_ARGMIN: return eval_argmax(n, in[0], out[0], d);
  case OP_SOFTMAX: case OP_LOG_SOFTMAX: return eval_softmax(n, in[0], out[0], d);
  case OP_LAYER_NORM: case OP_RMS_NORM: return eval_layer_norm(n, in, out[0], d);
  case OP_RESHAPE: case OP_FLATTEN: case OP_SQUEEZE: case OP_UNSQUEEZE:
    if (tensor_numel(in[0]) != tensor_numel(out[0]))
      return node_error(n, d, "element count changes from %lld to %lld",
                        (long long)tensor_numel(in[0]), (long long)tensor_numel(out[0]));
    for (int64_t i = 0; i < tensor_numel(in[0]); i++)
      copy_elem(in[0], i, out[0], i);
    return 0;
  case OP_TRANSPOSE: return eval_transpose(n, in[0], out[0], d);
  case OP_EXPAND: {
    Walk w;
    walk_init(&w, out[0]->rank, out[0]->dims);
    walk_add_bcast(&w, in[0]->rank, in[0]->dims);
    gather_walk(&w, in[0], out[0]);
    return 0;
  }
  case OP_CONCAT: return eval_concat(n, in, out[0]);
  case OP_SLICE: return eval_slice(n, in[0], out[0], d);
  case OP_SPLIT: return eval_split(n, in[0], out, d);
  case OP_GATHER: return eval_gather(n, in[0], in[1], out[0], d);
  case OP_CONV: return eval_conv(n, in, out[0], d);
  case OP_CONV_TRANSPOSE: return eval_conv_transpose(n, in, out[0], d);
  case OP_MAX_POOL: case OP_AVERAGE_POOL: case OP_GLOBAL_AVERAGE_POOL: case OP_GLOBAL_MAX_POOL:
    return eval_pool(n, in[0], out[0]);
  case OP_BATCH_NORM: case OP_INSTANCE_NORM: case OP_LRN: return eval_norm(n, in, out[0]);
  case OP_PAD: return eval_pad(n, in[0], out[0], d);
  case OP_RESIZE: return eval_resize(n, in[0], out[0]);
  case OP_TOPK: return eval_topk(n, in[0], out, d);
  case OP_CUMSUM: return eval_cumsum(n, in[0], out[0]);
  case OP_TRILU: return eval_trilu(n, in[0], out[0]);
  case OP_TILE: return eval_tile(in[0], out[0]);
  case OP_GATHER_ELEMENTS: return eval_gather_elements(n, in[0], in[1], out[0], d);
  case OP_RANGE: return eval_range(in, out[0]);
  case OP_SCATTER_ELEMENTS: return eval_scatter_elements(n, in, out[0], d);
  case OP_HARDMAX: return eval_hardmax(n, in[0], out[0], d);
  case OP_DEPTH_TO_SPACE: case OP_SPACE_TO_DEPTH: return eval_space_depth(n, in[0], out[0]);
  case OP_ONE_HOT: return eval_one_hot(n, in[0], in[1], out[0]);
  case OP_NLL_LOSS: case OP_SOFTMAX_CROSS_ENTROPY: return eval_loss(n, in, out, d);
  case OP_GATHER_ND: return eval_gather_nd(n, in[0], in[1], out[0], d);
  case OP_SCATTER_ND: return eval_scatter_nd(n, in, out[0], d);
  case OP_GRID_SAMPLE: return eval_grid_sample(n, in[0], in[1], out[0]);
  case OP_REVERSE_SEQUENCE: return eval_reverse_sequence(n, in[0], in[1], out[0], d);
  case OP_ROI_ALIGN: return eval_roi_align(n, in, out[0], d);
  case OP_MAX_UNPOOL: return eval_max_unpool(n, in[0], in[1], out[0], d);
  case OP_DET: return eval_det(n, in[0], out[0], d);
  case OP_LP_NORM: return eval_lp_norm(n, in[0], out[0]);
  case OP_MEAN_VARIANCE_NORM: return eval_mvn(n, in[0], out[0], d);
  default: break;
  }
  if (op_info[op].flags & OPF_POINTWISE) {
    if (n->nin == 1)
      return eval_unary(n, in[0], out[0], d);
    return eval_nary(n, in, out[0]);
  }
  return node_error(n, d, "the reference executor does not know this op");
}

static double type_numel(const Type *t) {
  double e = 1;
  for (int i = 0; i < t->shape.rank; i++)
    e *= t->shape.dims[i].sym ? INFINITY : (double)t->shape.dims[i].n;
  return t->shape.rank < 0 ? INFINITY : e;
}

double ir_eval_work(const Node *n, const Type *out) {
  double in_el = 0, out_el = 0, per_out = 0;
  const Type *x = n->nin > 0 && n->in[0] ? &n->in[0]->type : NULL;
  const Type *w = n->nin > 1 && n->in[1] ? &n->in[1]->type : NULL;
  for (int i = 0; i < n->nin; i++)
    if (n->in[i])
      in_el += type_numel(&n->in[i]->type);
  for (int i = 0; i < n->nout; i++)
    out_el += type_numel(out ? &out[i] : &n->out[i]->type);
  /* The ops whose work grows faster than their inputs and outputs: per output element,
   * the taps or terms each sums. */
  switch (n->op) {
  case OP_MATMUL:
    if (x && x->shape.rank >= 1) { /* K */
      Dim k = x->shape.dims[x->shape.rank - 1];
      per_out = k.sym ? INFINITY : (double)k.n;
    }
    break;
  case OP_CONV:
  case OP_CONV_TRANSPOSE: /* x [N, C, ...] by w [M, C/group, k...] (either layout) */
    if (w && w->shape.rank >= 1)
      per_out = type_numel(w) / fmax(1, (double)w->shape.dims[0].n);
    if (n->op == OP_CONV_TRANSPOSE && x) /* each input element scatters its taps */
      return in_el + out_el + type_numel(x) * per_out;
    break;
  case OP_MAX_POOL:
  case OP_AVERAGE_POOL: {
    int len;
    const int64_t *k = attr_ints(n, "kernel_shape", &len);
    per_out = 1;
    for (int i = 0; i < len; i++)
      per_out *= (double)k[i];
    break;
  }
  case OP_LRN: /* the window is clipped to the channels */
    per_out = x && x->shape.rank >= 2 ? fmin((double)attr_int(n, "size"), type_numel(x)) : 1;
    break;
  case OP_RESIZE:
  case OP_GRID_SAMPLE: per_out = x ? pow(4, x->shape.rank) : 1; break; /* cubic's taps */
  case OP_DET:
    if (x && x->shape.rank >= 1)
      per_out = pow((double)x->shape.dims[x->shape.rank - 1].n, 3);
    break;
  case OP_TOPK:
    per_out = x ? log2(in_el + 2) * in_el / fmax(1, out_el) : 1;
    break;
  case OP_ROI_ALIGN: return INFINITY; /* samples per bin follow the boxes' values */
  default: break;
  }
  return in_el + out_el + out_el * per_out;
}

int ir_eval_node(const Node *n, Tensor *const *in, Tensor **out, Diag *d) {
  int nin = n->nin, nout = n->nout;
  for (int k = 0; k < nout; k++)
    out[k] = NULL;
  /* A probe node over temporary values whose types are the inputs' concrete shapes, so
   * the output shapes come from the compiler's own shape rules. */
  Value *vin = calloc((size_t)nin + 1, sizeof *vin);
  Value **pin = calloc((size_t)nin + 1, sizeof *pin);
  Value *vout = calloc((size_t)nout + 1, sizeof *vout);
  Value **pout = calloc((size_t)nout + 1, sizeof *pout);
  Type *types = calloc((size_t)nout + 1, sizeof *types);
  int rc = -1;
  if (!vin || !pin || !vout || !pout || !types) {
    node_error(n, d, "out of memory");
    goto done;
  }
  for (int k = 0; k < nin; k++) {
    if (!in[k])
      continue; /* an omitted optional input */
    if (in[k]->rank < 0 || in[k]->rank > IR_MAX_RANK) {
      node_error(n, d, "input %d has bad rank %d", k, in[k]->rank);
      goto done;
    }
    /* constants, with their data: range's size depends on it */
    vin[k] = (Value){.id = -1, .name = n->in && n->in[k] ? n->in[k]->name : "",
                     .kind = VK_CONST, .data = in[k]};
    vin[k].type.dtype = in[k]->dtype;
    vin[k].type.shape.rank = in[k]->rank;
    for (int i = 0; i < in[k]->rank; i++)
      vin[k].type.shape.dims[i] = (Dim){in[k]->dims[i], NULL};
    pin[k] = &vin[k];
  }
  for (int k = 0; k < nout; k++) {
    vout[k] = (Value){.id = -1, .name = n->out && n->out[k] ? n->out[k]->name : "",
                      .kind = VK_NODE, .type = type_unknown(), .def_index = k};
    pout[k] = &vout[k];
  }
  Node probe = *n;
  probe.in = pin;
  probe.out = pout;
  for (int k = 0; k < nout; k++)
    vout[k].def = &probe;
  if (ir_infer_node(&probe, types, d))
    goto done;
  for (int k = 0; k < nout; k++) {
    if (!type_is_known(&types[k]) || !shape_is_static(&types[k].shape)) {
      char buf[128];
      node_error(n, d, "output %d has no concrete type (%s)", k,
                 type_str(&types[k], buf, sizeof buf));
      goto done;
    }
    int64_t dims[IR_MAX_RANK];
    for (int i = 0; i < types[k].shape.rank; i++)
      dims[i] = types[k].shape.dims[i].n;
    out[k] = tensor_new(types[k].dtype, types[k].shape.rank, dims);
    if (!out[k]) {
      node_error(n, d, "out of memory for a %s", type_str(&types[k], (char[128]){0}, 128));
      goto done;
    }
  }
  rc = eval_compute(n, in, out, d);
done:
  if (rc)
    for (int k = 0; k < nout; k++) {
      tensor_free(out[k]);
      out[k] = NULL;
    }
  free(vin), free(pin), free(vout), free(pout), free(types);
  return rc;
}

/* ---------------------------------------------------------------- the graph */

/* Symbol bindings: each symbolic dim gets its size from the first input that has it. */
typedef struct Binding {
  const char *sym;
  int64_t n;
  const char *where; /* the input it came from */
} Binding;

static Binding *find_binding(Binding *b, int nb, const char *sym) {
  for (int i = 0; i < nb; i++)
    if (!strcmp(b[i].sym, sym))
      return &b[i];
  return NULL;
}

static Tensor *tensor_copy(const Tensor *t) {
  Tensor *c = tensor_new(t->dtype, t->rank, t->dims);
  if (c)
    memcpy(c->data, t->data, tensor_nbytes(t));
  return c;
}

/* Checks an input tensor against its declared type and binds its symbols. */
static int bind_input(const Value *v, const Tensor *t, Binding *b, int *nb, Diag *d) {
  const Type *ty = &v->type;
  char want[256], got[256];
  if (!t || !tensor_fits(t, ty)) {
    Type tt = t ? tensor_type(t) : type_unknown();
    return diag_error(d, v->loc, "input %%%s: expected %s, got %s", v->name,
                      type_str(ty, want, sizeof want),
                      t ? type_str(&tt, got, sizeof got) : "nothing");
  }
  for (int i = 0; i < t->rank; i++) {
    const char *sym = ty->shape.dims[i].sym;
    if (!sym)
      continue;
    Binding *e = find_binding(b, *nb, sym);
    if (!e) {
      b[(*nb)++] = (Binding){sym, t->dims[i], v->name};
    } else if (e->n != t->dims[i]) {
      return diag_error(d, v->loc, "input %%%s: dim %s is %lld here but %lld in %%%s",
                        v->name, sym, (long long)t->dims[i], (long long)e->n, e->where);
    }
  }
  return 0;
}

int ir_eval(const Graph *g, Tensor *const *inputs, Tensor **outputs, Diag *d) {
  return ir_eval_seen(g, inputs, outputs, NULL, NULL, d);
}

int ir_eval_seen(const Graph *g, Tensor *const *inputs, Tensor **outputs, IrEvalSeen seen,
                 void *arg, Diag *d) {
  for (int i = 0; i < g->noutputs; i++)
    outputs[i] = NULL;
  int nv = g->next_value_id;
  Tensor **env = calloc((size_t)nv + 1, sizeof *env);
  bool *owned = calloc((size_t)nv + 1, sizeof *owned);
  int *last = malloc(sizeof(int) * ((size_t)nv + 1));
  Binding *binds = calloc((size_t)g->ninputs * IR_MAX_RANK + 1, sizeof *binds);
  Tensor **nin = NULL, **nout = NULL;
  int maxin = 1, maxout = 1, nb = 0, rc = -1;
  if (!env || !owned || !last || !binds) {
    diag_error(d, g->loc, "out of memory");
    goto done;
  }
  for (int i = 0; i < g->ninputs; i++) {
    if (bind_input(g->inputs[i], inputs[i], binds, &nb, d))
      goto done;
    env[g->inputs[i]->id] = inputs[i];
    if (seen)
      seen(g->inputs[i], inputs[i], arg);
  }
  for (int i = 0; i < g->nconsts; i++)
    env[g->consts[i]->id] = g->consts[i]->data;
  /* last[v]: the index of the last node reading v; graph outputs live to the end. */
  for (int i = 0; i < nv; i++)
    last[i] = -1;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    maxin = n->nin > maxin ? n->nin : maxin;
    maxout = n->nout > maxout ? n->nout : maxout;
    for (int k = 0; k < n->nin; k++)
      if (n->in[k])
        last[n->in[k]->id] = i;
  }
  for (int i = 0; i < g->noutputs; i++)
    last[g->outputs[i]->id] = g->nnodes;
  nin = calloc((size_t)maxin, sizeof *nin);
  nout = calloc((size_t)maxout, sizeof *nout);
  if (!nin || !nout) {
    diag_error(d, g->loc, "out of memory");
    goto done;
  }
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    for (int k = 0; k < n->nin; k++) {
      nin[k] = n->in[k] ? env[n->in[k]->id] : NULL;
      if (n->in[k] && !nin[k]) {
        node_error(n, d, "operand %%%s has no value (used before it is defined)",
                   n->in[k]->name);
        goto done;
      }
    }
    if (ir_eval_node(n, nin, nout, d))
      goto done;
    for (int k = 0; k < n->nout; k++) {
      int id = n->out[k]->id;
      if (owned[id])
        tensor_free(env[id]); /* a value defined twice: the verifier forbids it */
      env[id] = nout[k];
      owned[id] = true;
      if (seen)
        seen(n->out[k], nout[k], arg);
    }
    /* Free what no later node needs: inputs read for the last time here, and outputs
     * that nothing reads. */
    for (int k = 0; k < n->nin + n->nout; k++) {
      const Value *v = k < n->nin ? n->in[k] : n->out[k - n->nin];
      if (v && owned[v->id] && last[v->id] <= i) {
        tensor_free(env[v->id]);
        env[v->id] = NULL;
        owned[v->id] = false;
      }
    }
  }
  for (int i = 0; i < g->noutputs; i++) {
    const Value *v = g->outputs[i];
    if (!env[v->id]) {
      diag_error(d, v->loc, "output %%%s has no value", v->name);
      goto done;
    }
    /* Always a copy, so the caller may free every output and input independently. */
    outputs[i] = tensor_copy(env[v->id]);
    if (!outputs[i]) {
      diag_error(d, v->loc, "out of memory for output %%%s", v->name);
      goto done;
    }
  }
  rc = 0;
done:
  if (rc)
    for (int i = 0; i < g->noutputs; i++) {
      tensor_free(outputs[i]);
      outputs[i] = NULL;
    }
  if (env && owned)
    for (int i = 0; i < nv; i++)
      if (owned[i])
        tensor_free(env[i]);
  free(env), free(owned), free(last), free(binds), free(nin), free(nout);
  return rc;
}
