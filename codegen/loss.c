/* loss.c: kernels for nll_loss and softmax_cross_entropy (eval_loss).
 *
 * The input is viewed as [N, C, D] and the target as [N, D]. Reduction none is a thread
 * per (n, d); sum and mean are one block that strides over every (n, d) and adds the
 * losses and the weights applied through gc_block_reduce (a loss is small work; one
 * block keeps the sum in one place). softmax_cross_entropy first writes log_softmax over
 * the classes to its second output (a thread per (n, d), the reference's three passes:
 * max ignoring NaN, no shift when that max is infinite, sum of exp), then reads it back
 * as nll_loss's input. A target outside [0, C) that is not ignore_index, which the
 * reference reports, adds nothing. */
#include "codegen/cg-impl.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

/* The statements that set `ok`, `lp` (the log-probability picked) and `wt` (its weight)
 * for (n, d) position `p` of the target, reading log-probabilities from `src`. */
static void emit_pick(Cg *cg, const Node *n, const char *src, const char *p, int64_t C,
                      int64_t D, const char *ind) {
  Buf *b = &cg->src;
  const Value *x = n->in[0], *t = n->in[1], *w = n->nin > 2 ? n->in[2] : NULL;
  Dom dom = cg_dom(x->type.dtype);
  const char *T = cg_dom_type(dom);
  const Attr *ig = attr_find(n, "ignore_index");
  buf_printf(b, "%sconst long long tv = %s;\n", ind, cg_load(cg, t->type.dtype, DOM_I64, cg_fmt(cg, "in1[%s]", p)));
  buf_printf(b, "%sconst bool ok = %stv >= 0 && tv < %" PRId64 ";\n", ind,
             ig ? cg_fmt(cg, "tv != %" PRId64 "LL && ", ig->i) : "", C);
  buf_printf(b, "%sconst %s wt = ok ? %s : (%s)0;\n", ind, T,
             w ? cg_load(cg, w->type.dtype, dom, "in2[tv]") : cg_fmt(cg, "(%s)1", T), T);
  const char *at = cg_fmt(cg, "%s[(%s / %" PRId64 " * %" PRId64 " + tv) * %" PRId64 " + %s %% %" PRId64 "]",
                          src, p, D, C, D, p, D);
  buf_printf(b, "%sconst %s lp = ok ? %s : (%s)0;\n", ind, T, cg_load(cg, x->type.dtype, dom, at), T);
}

/* log_softmax over dim 1 of x [N, C, D] into out1, a thread per (n, d). */
static void log_softmax_kernel(Cg *cg, const Node *n, int64_t N, int64_t C, int64_t D) {
  const Value *x = n->in[0], *ls = n->out[1];
  Dom dom = cg_dom(x->type.dtype);
  const char *T = cg_dom_type(dom);
  Buf *b = &cg->src;
  const char *name = cg_kernel_begin_part(cg, n, "log_softmax", cg_fmt(cg, "log_softmax over %" PRId64 " classes, a thread per (n, d)", C));
  cg_loop_begin(cg, n, N * D);
  buf_printf(b, "    const idx_t base = i / %" PRId64 " * %" PRId64 " + i %% %" PRId64 ";\n", D, C * D, D);
  const char *v = cg_load(cg, x->type.dtype, dom, cg_fmt(cg, "in0[base + c * %" PRId64 "]", D));
  buf_printf(b, "    %s m = %s;\n", T, cg_lit(cg, -INFINITY, dom));
  buf_printf(b, "    for (idx_t c = 0; c < %" PRId64 "; c++) m = fmax(m, %s);\n", C, v);
  buf_printf(b, "    if (isinf(m)) m = 0;\n    %s s = 0;\n", T);
  buf_printf(b, "    for (idx_t c = 0; c < %" PRId64 "; c++) s += exp(%s - m);\n", C, v);
  buf_printf(b, "    const %s ls = log(s);\n", T);
  buf_printf(b, "    for (idx_t c = 0; c < %" PRId64 "; c++) out1[base + c * %" PRId64 "] = %s;\n", C, D,
             cg_store(cg, ls->type.dtype, dom, cg_fmt(cg, "%s - m - ls", v)));
  cg_loop_end(cg, n, name, N * D);
}

int cg_loss(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *y = n->out[0];
  int64_t N = cg_dim(x, 0), C = cg_dim(x, 1), D = 1;
  for (int i = 2; i < x->type.shape.rank; i++)
    D *= cg_dim(x, i);
  bool sce = n->op == OP_SOFTMAX_CROSS_ENTROPY;
  if (sce && N * D > 0)
    log_softmax_kernel(cg, n, N, C, D);
  const char *src = sce ? "out1" : "in0";
  const char *red = attr_string(n, "reduction");
  Dom dom = cg_dom(x->type.dtype);
  const char *T = cg_dom_type(dom);
  Buf *b = &cg->src;
  const char *stage = sce ? "loss" : NULL;
  if (!strcmp(red, "none")) {
    if (N * D <= 0)
      return 0;
    const char *name = cg_kernel_begin_part(cg, n, stage, "reduction none: a thread per (n, d)");
    cg_loop_begin(cg, n, N * D);
    emit_pick(cg, n, src, "i", C, D, "    ");
    buf_printf(b, "    out0[i] = %s;\n", cg_store(cg, y->type.dtype, dom, "ok ? -lp * wt : 0"));
    cg_loop_end(cg, n, name, N * D);
    return 0;
  }
  bool mean = !strcmp(red, "mean");
  const char *name = cg_kernel_begin_part(cg, n, stage, cg_fmt(cg, "reduction %s: one block over the %" PRId64 " targets", red, N * D));
  buf_printf(b, "  typedef %s idx_t;\n", cg_idx_type(cg, cg_max_numel(n)));
  buf_printf(b, "  %s total = 0, wsum = 0;\n", T);
  buf_printf(b, "  for (idx_t i = threadIdx.x; i < %" PRId64 "; i += blockDim.x) {\n", N * D);
  emit_pick(cg, n, src, "i", C, D, "    ");
  buf_puts(b, "    if (ok) {\n      total += -lp * wt;\n      wsum += wt;\n    }\n  }\n");
  buf_printf(b, "  total = gc_block_reduce(total, gc_add(), (%s)0);\n", T);
  if (mean)
    buf_printf(b, "  wsum = gc_block_reduce(wsum, gc_add(), (%s)0);\n", T);
  buf_printf(b, "  if (threadIdx.x == 0) out0[0] = %s;\n}\n",
             cg_store(cg, y->type.dtype, dom, mean ? "total / wsum" : "total"));
  cg_kernel_step(cg, n, name, 1, cg->target->block);
  return 0;
}
