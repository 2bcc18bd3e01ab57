/* quantize.c: --precision=fp8, linear layers on e4m3 tensor cores.
 *
 * precision has lowered the graph to bf16 (fp8 is bf16 everywhere else). Here each
 * linear layer y = matmul(x, w), w a constant [K, N], becomes
 *
 *   x.scaled = mul(x, 2^-e)                                  sx = 2^e, per tensor
 *   x.f8e4m3 = cast(x.scaled, to = "f8e4m3")                 saturating at +-448
 *   y        = matmul(x.f8e4m3, w.f8e4m3) {transpose_b = 1, scale = sx * sw, to = "bf16"}
 *
 * w.f8e4m3, made here once, is w^T [N, K] / sw rounded to e4m3, sw = amax(w) / 448 so the
 * largest weight lands on e4m3's largest finite value; [N, K] is the "TN" layout that
 * cuBLASLt's fp8 kernels need, and scale becomes its alpha, applied to the f32 sums before
 * the bias epilogue. sx is the power of two at or above amax(x) / 448, where amax(x) is
 * the largest magnitude x took when the reference executor ran the graph (as it is here,
 * in bf16) on the calibration inputs (--calibrate NAME=FILE.npy, one per graph input).
 * A power of two keeps the multiply exact in bf16 and costs at most one of e4m3's 17
 * binades at the top; values beyond the calibrated range saturate. x's mul and cast are
 * pointwise: fuse puts them into the kernel that makes x (a layer norm's, say), which then
 * writes x in fp8 beside, or instead of, bf16; where x is a reshape of a computed value
 * (GPT-2's Conv1D views its input as rows), that value is quantized and its e4m3 copy
 * reshaped, so the kernel that computes it still writes the copy. Linear layers that read
 * one x share one quantized x.
 *
 * Left in bf16: matmuls without constant 2-D weights (attention's), those whose K or N is
 * no multiple of 16 (fp8 GEMMs need 16-byte leading dims; pad has made N one where it
 * paid), and those whose input was zero or not finite throughout the calibration run. */
#include "passes/passes-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FP8_MULTIPLE = 16 };
static const double E4M3_MAX = 448.0;

/* Whether m is a linear layer that quantize handles, apart from its dims. */
static bool linear_bf16(const Node *m) {
  return pass_linear_layer(m) && m->in[1]->type.dtype == DT_BF16 &&
         m->in[0]->type.dtype == DT_BF16 && m->in[0]->kind != VK_CONST && !attr_int(m, "tf32");
}

static bool fp8_dims(const Node *m) {
  const Tensor *w = m->in[1]->data;
  return w->dims[0] % FP8_MULTIPLE == 0 && w->dims[1] % FP8_MULTIPLE == 0 && w->dims[0] > 0;
}

/* The largest magnitude of t's elements, NaN left out. */
static double amax_of(const Tensor *t) {
  double m = 0;
  int64_t n = tensor_numel(t);
  size_t es = dtype_size(t->dtype);
  for (int64_t i = 0; i < n; i++)
    m = fmax(m, fabs(dtype_load_f64(t->dtype, (const char *)t->data + (size_t)i * es)));
  return m;
}

typedef struct Calibration {
  const bool *want; /* by value id */
  double *amax;     /* by value id */
} Calibration;

static void seen(const Value *v, const Tensor *t, void *arg) {
  Calibration *c = arg;
  if (c->want[v->id])
    c->amax[v->id] = amax_of(t);
}

/* The calibration input of each graph input, by name, into in[] (g->inputs' order). */
static int calibration_inputs(const Graph *g, const PassContext *ctx, Tensor **in) {
  for (int j = 0; j < ctx->ncalib; j++) {
    int i = 0;
    while (i < g->ninputs && strcmp(g->inputs[i]->name, ctx->calib_names[j]))
      i++;
    if (i == g->ninputs)
      return diag_error(ctx->diag, g->loc, "quantize: --calibrate %s: graph %s has no input "
                        "named so", ctx->calib_names[j], g->name);
    const Tensor *t = ctx->calib_inputs[j];
    if (!tensor_fits(t, &g->inputs[i]->type)) {
      char want[128], got[128];
      Type tt = tensor_type(t);
      return diag_error(ctx->diag, g->inputs[i]->loc, "quantize: --calibrate %s: expected %s, "
                        "got %s", ctx->calib_names[j], type_str(&g->inputs[i]->type, want,
                        sizeof want), type_str(&tt, got, sizeof got));
    }
    in[i] = ctx->calib_inputs[j];
  }
  for (int i = 0; i < g->ninputs; i++)
    if (!in[i])
      return diag_error(ctx->diag, g->inputs[i]->loc, "quantize: --precision=fp8 needs a "
                        "calibration input for %%%s (--calibrate %s=FILE.npy): the scales of "
                        "the fp8 GEMMs' inputs come from running the graph on it",
                        g->inputs[i]->name, g->inputs[i]->name);
  return 0;
}

/* Runs g on the calibration inputs, filling amax[] for the values want[] names. */
static int calibrate(const Graph *g, PassContext *ctx, const bool *want, double *amax) {
  Tensor **in = calloc((size_t)g->ninputs + 1, sizeof *in);
  Tensor **out = calloc((size_t)g->noutputs + 1, sizeof *out);
  int rc = -1;
  if (!in || !out) {
    diag_error(ctx->diag, g->loc, "quantize: out of memory");
  } else if (!calibration_inputs(g, ctx, in)) {
    Calibration c = {want, amax};
    rc = ir_eval_seen(g, in, out, seen, &c, ctx->diag);
    for (int i = 0; i < g->noutputs; i++)
      tensor_free(out[i]);
  }
  free(in);
  free(out);
  return rc;
}

typedef struct Quantizer {
  Graph *g;
  PassContext *ctx;
  Value **twin;       /* by value id: its quantized twin, made once */
  int gemms, values;
  int64_t weight_bytes;
} Quantizer;

/* w [K, N] (bf16) as w^T / sw in e4m3, [N, K]; *sw its scale. */
static Value *quantized_weights(Quantizer *q, const Value *w, double *sw) {
  const Tensor *t = w->data;
  int64_t K = t->dims[0], N = t->dims[1], dims[2] = {N, K};
  double amax = amax_of(t);
  *sw = amax > 0 && isfinite(amax) ? amax / E4M3_MAX : 1;
  Tensor *p = tensor_in_arena(q->g->arena, DT_F8E4M3, 2, dims);
  const char *src = t->data;
  unsigned char *dst = p->data;
  size_t es = dtype_size(t->dtype);
  for (int64_t k = 0; k < K; k++)
    for (int64_t n = 0; n < N; n++)
      dtype_store_f64(DT_F8E4M3, dst + n * K + k,
                      dtype_load_f64(t->dtype, src + (size_t)(k * N + n) * es) / *sw);
  q->weight_bytes += (int64_t)tensor_nbytes(p);
  return pass_add_const(q->g, w->name, "f8e4m3", p);
}

/* The exponent e of an input's scale sx = 2^e, the power of two at or above amax / 448,
 * into *e; false when there is none (amax zero or not finite, or 2^-e beyond bf16). */
static bool input_exponent(double amax, int *e) {
  if (!(amax > 0) || !isfinite(amax))
    return false;
  *e = (int)ceil(log2(amax / E4M3_MAX));
  return ldexp(1, -*e) <= 0x1.fep127;
}

/* x in e4m3 at the scale 2^e, placed before m; NULL with the diag set on failure. */
static Value *quantized_input(Quantizer *q, Node *m, Value *x, int e) {
  if (q->twin[x->id])
    return q->twin[x->id];
  Tensor *c = tensor_in_arena(q->g->arena, DT_BF16, 0, NULL);
  dtype_store_f64(DT_BF16, c->data, ldexp(1, -e));
  Value *in[2] = {x, pass_add_const(q->g, x->name, "f8scale", c)};
  Value *scaled = pass_insert_before(q->g, m, OP_MUL, in, 2, NULL, 0, x->name, "scaled",
                                     q->ctx->diag);
  Attr to = attr_make_string("to", "f8e4m3");
  Value *f8 = scaled ? pass_insert_before(q->g, m, OP_CAST, &scaled, 1, &to, 1, x->name,
                                          "f8e4m3", q->ctx->diag)
                     : NULL;
  if (f8) {
    q->twin[x->id] = f8;
    q->values++;
  }
  return f8;
}

/* x quantized: through the reshapes that make it, when a reshape of the quantized value
 * can give x's shape in e4m3. */
static Value *quantized_view(Quantizer *q, Node *m, Value *x, int e) {
  if (q->twin[x->id])
    return q->twin[x->id];
  Value *src = x;
  while (src->kind == VK_NODE && src->def->op == OP_RESHAPE)
    src = src->def->in[0];
  int64_t shape[IR_MAX_RANK];
  Type to = x->type;
  to.dtype = DT_F8E4M3;
  Type from = src->type;
  from.dtype = DT_F8E4M3;
  Value probe = {.type = from};
  if (src == x || src->kind == VK_CONST || !pass_reshape_attr(&probe, &to, shape))
    return quantized_input(q, m, x, e);
  Value *f8 = quantized_input(q, m, src, e);
  Attr a = attr_make_ints("shape", shape, to.shape.rank);
  Value *view = f8 ? pass_insert_before(q->g, m, OP_RESHAPE, &f8, 1, &a, 1, x->name, "f8e4m3",
                                        q->ctx->diag)
                   : NULL;
  if (view)
    q->twin[x->id] = view;
  return view;
}

/* m on e4m3, its input at the scale 2^e. */
static int quantize_gemm(Quantizer *q, Node *m, int e) {
  Value *x = m->in[0];
  Value *xq = quantized_view(q, m, x, e);
  if (!xq)
    return -1;
  double sw;
  Value *in[2] = {xq, quantized_weights(q, m->in[1], &sw)};
  Attr a[3] = {attr_make_string("to", dtype_name(m->out[0]->type.dtype)),
               attr_make_int("transpose_b", 1),
               attr_make_float("scale", ldexp(1, e) * sw)};
  pass_rewrite(q->g, m, OP_MATMUL, in, 2, a, 3);
  q->gemms++;
  return 0;
}

static int run_quantize(Graph *g, PassContext *ctx) {
  if (ctx->precision != PRECISION_FP8)
    return 0;
  int nv = g->next_value_id + 1, nlinear = 0, odd = 0, flat = 0, rc = 0;
  bool *want = calloc((size_t)nv, sizeof *want);
  double *amax = calloc((size_t)nv, sizeof *amax);
  Node **mms = malloc(sizeof *mms * (size_t)(g->nnodes + 1));
  Quantizer q = {g, ctx, NULL, 0, 0, 0};
  if (!want || !amax || !mms) {
    rc = diag_error(ctx->diag, g->loc, "quantize: out of memory");
    goto done;
  }
  for (int i = 0; i < g->nnodes; i++) {
    Node *m = g->nodes[i];
    if (!linear_bf16(m))
      continue;
    nlinear++;
    if (!fp8_dims(m)) {
      odd++;
      continue;
    }
    want[m->in[0]->id] = true;
    mms[q.gemms++] = m;
  }
  int ncand = q.gemms;
  q.gemms = 0;
  if (!ncand)
    goto done;
  if (calibrate(g, ctx, want, amax)) {
    rc = -1;
    goto done;
  }
  q.twin = calloc((size_t)nv, sizeof *q.twin); /* by the ids of values there before */
  if (!q.twin) {
    rc = diag_error(ctx->diag, g->loc, "quantize: out of memory");
    goto done;
  }
  for (int i = 0; i < ncand && !rc; i++) {
    int e;
    if (!input_exponent(amax[mms[i]->in[0]->id], &e)) {
      flat++;
      continue;
    }
    rc = quantize_gemm(&q, mms[i], e);
  }
  if (!rc && q.gemms)
    rc = pass_dce.run(g, ctx) || ir_infer(g, ctx->diag) ? -1 : 0;
done:
  if (!rc) {
    ctx->changes += q.gemms;
    snprintf(ctx->note, sizeof ctx->note, "fp8: %d of %d linear layers on e4m3 (%lld bytes "
             "of weights), %d values quantized; left in bf16: %d with K or N no multiple of "
             "%d, %d whose input was zero or not finite in calibration",
             q.gemms, nlinear, (long long)q.weight_bytes, q.values, odd, FP8_MULTIPLE, flat);
  }
  free(want);
  free(amax);
  free(mms);
  free(q.twin);
  return rc;
}

const Pass pass_quantize = {
    .name = "quantize",
    .summary = "with --precision=fp8, linear layers on e4m3 with per-tensor scales: the "
               "weights' made here, the inputs' from a calibration run (--calibrate)",
    .run = run_quantize,
};
