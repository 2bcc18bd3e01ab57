/* reduce.c: kernels for reductions (reduce_*, argmax, argmin) and the row-wise ops
 * softmax, log_softmax, layer_norm and rms_norm.
 *
 * Two shapes of kernel, chosen by whether the innermost dim of the input is reduced:
 *   row     lanes share an output: a warp per output (a whole block when the rows are
 *           longer than ROW_BLOCK_MIN), each lane striding through the row, then
 *           __shfl_xor_sync butterflies (and a block reduction through shared memory);
 *           neighbouring lanes read neighbouring elements.
 *   column  a thread per output walking its elements in order; neighbouring threads
 *           read neighbouring elements of the kept innermost dim. When those threads
 *           would not fill the GPU once (an image's mean over its pixels in channels
 *           last, a few channels at batch 1: a thread walked 12,544 pixels alone), a
 *           block takes 32 neighbouring outputs instead, its warps striding through the
 *           elements as lanes, and sums the 8 lanes' partials through shared memory
 *           (column split). On a target with clusters, when those blocks would still
 *           not fill the SMs (32 channels: one block), the blocks of a cluster share
 *           each output's elements too, and every block sums all their partials, in rank
 *           order, through distributed shared memory.
 * f16 and bf16 accumulate in f32. The results are ir/interp.c's (eval_reduce,
 * eval_argmax, eval_softmax, eval_layer_norm) up to the order of float additions. */
#include "codegen/cg-impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { ROW_BLOCK_MIN = 2048 };

typedef enum Mode { COLUMN, COLUMN_SPLIT, ROW_WARP, ROW_BLOCK } Mode;

/* Column split: a block of 32 neighbouring outputs by COLUMN_LANES lanes (its warps);
 * the blocks of a cluster split further while each lane keeps COLUMN_SPLIT_MIN_STEPS
 * elements. */
enum { COLUMN_LANES = 8, COLUMN_SPLIT_MIN_LEN = 64, COLUMN_SPLIT_MIN_STEPS = 16 };

/* The kernel's loop over outputs; defines o (the output), lane and the lane count. */
typedef struct Loop {
  Mode mode;
  int64_t nout, len;
  unsigned grid, block;
  int cluster; /* column split: the blocks of a cluster sharing 32 outputs (1: none) */
} Loop;

static Loop make_loop(const Cg *cg, bool row, int64_t nout, int64_t len) {
  Loop l = {.mode = !row ? COLUMN : len > ROW_BLOCK_MIN ? ROW_BLOCK : ROW_WARP,
            .nout = nout, .len = len, .block = (unsigned)cg->target->block, .cluster = 1};
  l.grid = l.mode == COLUMN     ? cg_blocks(cg, nout, l.block)
           : l.mode == ROW_WARP ? cg_blocks(cg, nout, l.block / 32)
                                : cg_blocks(cg, nout, 1);
  return l;
}

/* A column reduction's loop: column split when a thread per output would leave the GPU
 * mostly idle and each has enough elements to share out. */
static Loop column_loop(const Cg *cg, int64_t nout, int64_t len) {
  const Target *t = cg->target;
  Loop l = make_loop(cg, false, nout, len);
  if (len >= COLUMN_SPLIT_MIN_LEN && nout < (int64_t)t->sms * t->block &&
      t->block == 32 * COLUMN_LANES) {
    l.mode = COLUMN_SPLIT;
    int64_t blocks = (nout + 31) / 32, fill = t->sms / blocks;
    int64_t s = cg_cluster_split(cg, fill, t->cluster_max, len / COLUMN_LANES,
                                 COLUMN_SPLIT_MIN_STEPS);
    l.cluster = (int)s;
    l.grid = (unsigned)(cg_blocks(cg, nout, 32 * (unsigned)s) * s);
  }
  return l;
}

static const char *mode_note(Cg *cg, const Loop *l) {
  return l->mode == COLUMN ? cg_fmt(cg, "a thread per output, %" PRId64 " elements each", l->len)
         : l->mode == COLUMN_SPLIT && l->cluster > 1
             ? cg_fmt(cg, "32 outputs a cluster of %d blocks, their %d warps sharing each one's %"
                      PRId64 " elements", l->cluster, COLUMN_LANES * l->cluster, l->len)
         : l->mode == COLUMN_SPLIT
             ? cg_fmt(cg, "32 outputs a block, its %d warps sharing each one's %" PRId64 " elements",
                      COLUMN_LANES, l->len)
         : l->mode == ROW_WARP ? cg_fmt(cg, "a warp per output row of %" PRId64, l->len)
                               : cg_fmt(cg, "a block per output row of %" PRId64, l->len);
}

static void loop_begin(Cg *cg, const Loop *l, bool lanes) {
  Buf *b = &cg->src;
  buf_printf(b, "  typedef %s idx_t;\n", cg_idx_type(cg, l->nout * (l->len ? l->len : 1)));
  switch (l->mode) {
  case COLUMN:
    if (lanes)
      buf_puts(b, "  const int lane = 0, lanes = 1;\n");
    buf_printf(b, "  for (idx_t o = (idx_t)blockIdx.x * blockDim.x + threadIdx.x; o < %" PRId64 "; o += (idx_t)gridDim.x * blockDim.x) {\n", l->nout);
    break;
  case COLUMN_SPLIT: /* o clamped for reading; `live` says whether it is this thread's */
    if (l->cluster > 1) { /* a cluster's blocks are lanes rank * 8 .. */
      buf_printf(b, "  const int rank = (int)(blockIdx.x %% %d), cl = threadIdx.x & 31, lane = (threadIdx.x >> 5) + rank * %d, lanes = %d;\n",
                 l->cluster, COLUMN_LANES, COLUMN_LANES * l->cluster);
      buf_printf(b, "  for (idx_t ob = (idx_t)(blockIdx.x / %d) * 32; ob < %" PRId64 "; ob += (idx_t)(gridDim.x / %d) * 32) {\n",
                 l->cluster, l->nout, l->cluster);
    } else {
      buf_printf(b, "  const int cl = threadIdx.x & 31, lane = threadIdx.x >> 5, lanes = %d;\n", COLUMN_LANES);
      buf_printf(b, "  for (idx_t ob = (idx_t)blockIdx.x * 32; ob < %" PRId64 "; ob += (idx_t)gridDim.x * 32) {\n", l->nout);
    }
    buf_printf(b, "    const bool live = ob + cl < %" PRId64 ";\n", l->nout);
    buf_printf(b, "    const idx_t o = live ? ob + cl : %" PRId64 ";\n", l->nout - 1);
    break;
  case ROW_WARP:
    buf_puts(b, "  const int lane = threadIdx.x & 31, lanes = 32;\n");
    buf_printf(b, "  for (idx_t o = (idx_t)blockIdx.x * %u + (threadIdx.x >> 5); o < %" PRId64 "; o += (idx_t)gridDim.x * %u) {\n", l->block / 32, l->nout, l->block / 32);
    break;
  case ROW_BLOCK:
    buf_printf(b, "  const int lane = threadIdx.x, lanes = %u;\n", l->block);
    buf_printf(b, "  for (idx_t o = blockIdx.x; o < %" PRId64 "; o += gridDim.x) {\n", l->nout);
    break;
  }
}

/* "var = <combined over the lanes>;" (every lane gets it) */
static void emit_combine(Cg *cg, const Loop *l, const char *T, const char *var,
                         const char *functor, const char *ident) {
  if (l->mode == COLUMN_SPLIT && l->cluster > 1) /* every block combines all lanes, in order */
    buf_printf(&cg->src,
               "    {\n"
               "      typedef %s gc_part[%d][32];\n"
               "      GC_BLOCK_SHARED(gc_part, part);\n"
               "      part[threadIdx.x >> 5][cl] = %s;\n"
               "      gc_cluster_sync();\n"
               "      %s = (*gc_cluster_map(&part, 0u))[0][cl];\n"
               "      for (int r = 0; r < %d; r++) {\n"
               "        const gc_part *p = gc_cluster_map(&part, (unsigned)r);\n"
               "        for (int k = r ? 0 : 1; k < %d; k++) %s = %s()(%s, (*p)[k][cl]);\n"
               "      }\n"
               "      gc_cluster_sync(); /* before the next pass or output writes part again */\n"
               "    }\n",
               T, COLUMN_LANES, var, var, l->cluster, COLUMN_LANES, var, functor, var);
  else if (l->mode == COLUMN_SPLIT) /* every thread combines its column's lanes, in order */
    buf_printf(&cg->src,
               "    {\n"
               "      __shared__ %s part[%d][32];\n"
               "      part[lane][cl] = %s;\n"
               "      __syncthreads();\n"
               "      %s = part[0][cl];\n"
               "      for (int k = 1; k < %d; k++) %s = %s()(%s, part[k][cl]);\n"
               "      __syncthreads(); /* before the next pass or output writes part again */\n"
               "    }\n",
               T, COLUMN_LANES, var, var, COLUMN_LANES, var, functor, var);
  else if (l->mode == ROW_WARP)
    buf_printf(&cg->src, "    %s = gc_warp_reduce(%s, %s());\n", var, var, functor);
  else if (l->mode == ROW_BLOCK)
    buf_printf(&cg->src, "    %s = gc_block_reduce(%s, %s(), %s);\n", var, var, functor, ident);
}

/* One pass over this lane's share of the elements of output o:
 *   T var = ident; for each element j (value v): var = functor()(var, elem); combine.
 * `at` is the element's offset expression given j ("xo0 + ro0"), after `offsets`. */
static void emit_pass(Cg *cg, const Loop *l, const char *T, const char *var, const char *ident,
                      const char *functor, const char *elem, const char *offsets,
                      const char *v_load) {
  Buf *b = &cg->src;
  buf_printf(b, "    %s %s = %s;\n", T, var, ident);
  /* a column split's lane walks few outputs' long columns: unrolled, several of its
   * loads are in flight at once (one at a time, EfficientNet-B0's pools of 3,136 pixels
   * took 25 to 50 us each on an H200, a memory latency a step) */
  if (l->mode == COLUMN_SPLIT)
    buf_puts(b, "#pragma unroll 8\n");
  buf_printf(b, "    for (idx_t j = lane; j < %" PRId64 "; j += lanes) {\n", l->len);
  buf_puts(b, offsets);
  buf_printf(b, "      const %s v = %s;\n", T, v_load);
  buf_printf(b, "      %s = %s()(%s, %s);\n", var, functor, var, elem);
  buf_puts(b, "    }\n");
  emit_combine(cg, l, T, var, functor, ident);
}

/* ---------------------------------------------------------------- reduce_*, argmax */

/* The input split into the kept dims (walked by output index o: prefix xo) and the reduced
 * dims (walked by j: prefix ro), as x offsets. *row: the innermost non-1 dim is reduced. */
static void split_dims(const Value *x, const bool *red, Space *kept, Space *rs, bool *row) {
  int r = x->type.shape.rank;
  int64_t xd[IR_MAX_RANK] = {0}, xs[IR_MAX_RANK], kd[IR_MAX_RANK], ks[IR_MAX_RANK];
  int64_t rd[IR_MAX_RANK], rst[IR_MAX_RANK];
  int nk = 0, nr = 0;
  for (int i = 0; i < r; i++)
    xd[i] = cg_dim(x, i);
  contiguous_strides(r, xd, xs);
  *row = false;
  for (int i = 0; i < r; i++) {
    if (red[i]) {
      rd[nr] = xd[i];
      rst[nr++] = xs[i];
    } else {
      kd[nk] = xd[i];
      ks[nk++] = xs[i];
    }
    if (xd[i] > 1)
      *row = red[i];
  }
  space_init(kept, nk, kd);
  space_add_strides(kept, ks, 0);
  space_coalesce(kept);
  space_init(rs, nr, rd);
  space_add_strides(rs, rst, 0);
  space_coalesce(rs);
}

/* What one reduction op does, as C text in domain T. */
typedef struct RedOp {
  const char *ident, *functor, *elem, *final;
  Dom final_dom;
} RedOp;

static RedOp red_op(Cg *cg, Op op, Dom dom, int64_t len) {
  const char *T = cg_dom_type(dom);
  bool fl = dom != DOM_I64;
  RedOp r = {.ident = cg_fmt(cg, "(%s)0", T), .functor = fl ? "gc_add" : "gc_wadd",
             .elem = "v", .final = "acc", .final_dom = dom};
  switch (op) {
  case OP_REDUCE_MEAN:
    r.final = fl ? cg_fmt(cg, "acc / (%s)%" PRId64, T, len)
                 : cg_fmt(cg, "(double)acc / (double)%" PRId64, len);
    r.final_dom = fl ? dom : DOM_F64;
    break;
  case OP_REDUCE_MAX: case OP_REDUCE_MIN: {
    bool mx = op == OP_REDUCE_MAX;
    r.functor = mx ? "gc_max" : "gc_min";
    r.ident = fl ? cg_lit(cg, mx ? -INFINITY : INFINITY, dom)
                 : mx ? "(-9223372036854775807LL - 1)" : "9223372036854775807LL";
    if (!fl && len == 0)
      r.final = "0LL"; /* the reference executor's empty integer max */
    break;
  }
  case OP_REDUCE_PROD:
    r.ident = cg_fmt(cg, "(%s)1", T);
    r.functor = fl ? "gc_mul" : "gc_wmul";
    break;
  case OP_REDUCE_L1: r.elem = fl ? "fabs(v)" : "(v < 0 ? gc_ineg(v) : v)"; break;
  case OP_REDUCE_L2: r.elem = "v * v"; r.final = "sqrt(acc)"; break;
  case OP_REDUCE_SUM_SQUARE: r.elem = fl ? "v * v" : "gc_imul(v, v)"; break;
  case OP_REDUCE_LOG_SUM_EXP:
    /* sum of exp(v - max) after a max pass; inf, -inf and NaN maxima are the answer */
    r.elem = "exp(v - m)";
    r.final = cg_fmt(cg, "(m != m || isinf(m) ? m : m + log(acc))");
    break;
  default: break;
  }
  return r;
}

/* Node n reduces x over the dims red[] the way reduction op `op` does. */
static int reduce_over(Cg *cg, const Node *n, const bool *red, Op op) {
  const Value *x = n->in[0], *y = n->out[0];
  int rank = x->type.shape.rank;
  bool arg = op == OP_ARGMAX || op == OP_ARGMIN;
  Space kept, rs;
  bool row;
  split_dims(x, red, &kept, &rs, &row);
  int64_t nout = cg_numel(y), len = 1;
  for (int i = 0; i < rank; i++)
    if (red[i])
      len *= cg_dim(x, i);
  Loop l = row ? make_loop(cg, row, nout, len) : column_loop(cg, nout, len);
  Dom dom = cg_dom(x->type.dtype);
  const char *T = cg_dom_type(dom);
  cg->cluster = l.cluster;
  const char *name = cg_kernel_begin(cg, n, mode_note(cg, &l));
  const char *mine = l.mode == COLUMN_SPLIT ? "lane == 0 && live" : "lane == 0";
  Buf *b = &cg->src;
  loop_begin(cg, &l, true);
  space_emit_offsets(cg, &kept, "o", "xo", "    ");
  Buf off = {0};
  Cg sub = *cg; /* the element offsets are written once and pasted into every pass */
  sub.src = off;
  space_emit_offsets(&sub, &rs, "j", "ro", "      ");
  off = sub.src;
  const char *v_load = cg_load(cg, x->type.dtype, dom, "in0[xo0 + ro0]");
  if (arg) {
    const char *A = cg_fmt(cg, "gc_arg<%s>", T);
    const char *f = cg_fmt(cg, "gc_argbest<%s, %s>", op == OP_ARGMIN ? "true" : "false",
                           attr_int(n, "select_last_index") ? "true" : "false");
    buf_printf(b, "    %s best = %s{0, -1};\n", A, A);
    buf_printf(b, "    for (idx_t j = lane; j < %" PRId64 "; j += lanes) {\n", len);
    buf_puts(b, off.s);
    buf_printf(b, "      best = %s()(best, %s{%s, (long long)j});\n", f, A, v_load);
    buf_puts(b, "    }\n");
    emit_combine(cg, &l, A, "best", f, cg_fmt(cg, "%s{0, -1}", A));
    buf_printf(b, "    if (%s) out0[o] = best.i < 0 ? 0 : best.i;\n", mine);
  } else {
    RedOp r = red_op(cg, op, dom, len);
    if (op == OP_REDUCE_LOG_SUM_EXP)
      emit_pass(cg, &l, T, "m", cg_lit(cg, -INFINITY, dom), "gc_max", "v", off.s, v_load);
    emit_pass(cg, &l, T, "acc", r.ident, r.functor, r.elem, off.s, v_load);
    buf_printf(b, "    if (%s) out0[o] = %s;\n", mine,
               cg_store(cg, y->type.dtype, r.final_dom, r.final));
  }
  free(off.s);
  buf_puts(b, "  }\n}\n");
  cg_kernel_step(cg, n, name, l.grid, l.block);
  return 0;
}

int cg_reduce(Cg *cg, const Node *n) {
  int rank = n->in[0]->type.shape.rank;
  bool red[IR_MAX_RANK];
  if (n->op == OP_ARGMAX || n->op == OP_ARGMIN) {
    int64_t ax = attr_int(n, "axis");
    ax = ax < 0 ? ax + rank : ax;
    for (int i = 0; i < rank; i++)
      red[i] = i == ax;
  } else {
    int na;
    const int64_t *axes = attr_ints(n, "axes", &na);
    for (int i = 0; i < rank; i++)
      red[i] = na == 0;
    for (int i = 0; i < na; i++)
      red[axes[i] < 0 ? axes[i] + rank : axes[i]] = true;
  }
  return reduce_over(cg, n, red, n->op);
}

/* global_average_pool and global_max_pool are reduce_mean and reduce_max over the
 * spatial dims (the reference's eval_pool with a window of the whole plane: the same
 * sum over the count, the same NaN-wins max, 0 for an empty integer plane): a warp per
 * (n, c) plane, or a block for planes longer than ROW_BLOCK_MIN. */
int cg_global_pool(Cg *cg, const Node *n) {
  bool red[IR_MAX_RANK];
  int r = n->in[0]->type.shape.rank;
  bool cl = attr_int(n, "channels_last") != 0; /* [N, spatial..., C] */
  for (int i = 0; i < r; i++)
    red[i] = cl ? i >= 1 && i < r - 1 : i >= 2;
  return reduce_over(cg, n, red, n->op == OP_GLOBAL_MAX_POOL ? OP_REDUCE_MAX : OP_REDUCE_MEAN);
}

/* ---------------------------------------------------------------- softmax */

/* The axis not innermost: a thread per (outer, inner) position, three passes in order. */
static int softmax_column(Cg *cg, const Node *n, int64_t outer, int64_t len, int64_t inner) {
  const Value *x = n->in[0], *y = n->out[0];
  Dom dom = cg_dom(x->type.dtype);
  const char *T = cg_dom_type(dom);
  bool log_sm = n->op == OP_LOG_SOFTMAX;
  int64_t nout = outer * inner;
  Loop l = make_loop(cg, false, nout, len);
  const char *name = cg_kernel_begin(cg, n, mode_note(cg, &l));
  Buf *b = &cg->src;
  loop_begin(cg, &l, false);
  buf_printf(b, "    const idx_t base = o / %" PRId64 " * %" PRId64 " + o %% %" PRId64 ";\n", inner,
             len * inner, inner);
  const char *v = cg_load(cg, x->type.dtype, dom, cg_fmt(cg, "in0[base + j * %" PRId64 "]", inner));
  buf_printf(b, "    %s m = %s;\n", T, cg_lit(cg, -INFINITY, dom));
  buf_printf(b, "    for (idx_t j = 0; j < %" PRId64 "; j++) m = fmax(m, %s);\n", len, v);
  buf_printf(b, "    if (isinf(m)) m = 0;\n    %s s = 0;\n", T);
  buf_printf(b, "    for (idx_t j = 0; j < %" PRId64 "; j++) s += exp(%s - m);\n", len, v);
  if (log_sm)
    buf_printf(b, "    const %s ls = log(s);\n", T);
  const char *res = log_sm ? cg_fmt(cg, "%s - m - ls", v) : cg_fmt(cg, "exp(%s - m) / s", v);
  buf_printf(b, "    for (idx_t j = 0; j < %" PRId64 "; j++) out0[base + j * %" PRId64 "] = %s;\n",
             len, inner, cg_store(cg, y->type.dtype, dom, res));
  buf_puts(b, "  }\n}\n");
  cg_kernel_step(cg, n, name, l.grid, l.block);
  return 0;
}

int cg_softmax(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *y = n->out[0];
  int rank = x->type.shape.rank;
  int64_t axis = attr_int(n, "axis");
  axis = axis < 0 ? axis + rank : axis;
  int64_t outer = 1, len = cg_dim(x, (int)axis), inner = 1;
  for (int i = 0; i < axis; i++)
    outer *= cg_dim(x, i);
  for (int i = (int)axis + 1; i < rank; i++)
    inner *= cg_dim(x, i);
  if (inner > 1)
    return softmax_column(cg, n, outer, len, inner);
  Dom dom = cg_dom(x->type.dtype);
  const char *T = cg_dom_type(dom);
  Loop l = make_loop(cg, true, outer, len);
  const char *name = cg_kernel_begin(cg, n, mode_note(cg, &l));
  Buf *b = &cg->src;
  loop_begin(cg, &l, true);
  const char *at = cg_fmt(cg, "in0[o * %" PRId64 " + j]", len);
  const char *v = cg_load(cg, x->type.dtype, dom, at);
  /* the shift ignores NaN (fmax) and is 0 when the max is infinite, like the reference */
  emit_pass(cg, &l, T, "m", cg_lit(cg, -INFINITY, dom), "gc_fmax", "v", "", v);
  buf_puts(b, "    if (isinf(m)) m = 0;\n");
  emit_pass(cg, &l, T, "s", cg_fmt(cg, "(%s)0", T), "gc_add", "exp(v - m)", "", v);
  const char *res;
  if (n->op == OP_LOG_SOFTMAX) {
    buf_printf(b, "    const %s ls = log(s);\n", T);
    res = cg_fmt(cg, "%s - m - ls", v);
  } else {
    buf_printf(b, "    const %s rs = (%s)1 / s;\n", T, T);
    res = cg_fmt(cg, "exp(%s - m) * rs", v);
  }
  buf_printf(b, "    for (idx_t j = lane; j < %" PRId64 "; j += lanes) {\n", len);
  cg_store_out(cg, n, cg_fmt(cg, "(o * %" PRId64 " + j)", len),
               cg_store(cg, y->type.dtype, dom, res), "      ");
  buf_puts(b, "    }\n  }\n}\n");
  cg_kernel_step(cg, n, name, l.grid, l.block);
  return 0;
}

/* ---------------------------------------------------------------- layer_norm */

/* layer_norm, and rms_norm (no mean: x * rstd of the mean square; the scale optional) */
int cg_layer_norm(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *y = n->out[0];
  const Value *scale = n->nin > 1 ? n->in[1] : NULL, *bias = n->nin > 2 ? n->in[2] : NULL;
  bool rms = n->op == OP_RMS_NORM;
  int rank = x->type.shape.rank;
  int64_t axis = attr_int(n, "axis");
  axis = axis < 0 ? axis + rank : axis;
  int64_t outer = 1, len = 1, tail[IR_MAX_RANK];
  for (int i = 0; i < axis; i++)
    outer *= cg_dim(x, i);
  for (int i = (int)axis; i < rank; i++)
    len *= tail[i - axis] = cg_dim(x, i);
  /* scale and bias broadcast over x.shape[axis:]: offsets p0, p1 of tail index j */
  Space ps;
  space_init(&ps, rank - (int)axis, tail);
  if (scale)
    space_add_bcast(&ps, &scale->type.shape);
  if (bias)
    space_add_bcast(&ps, &bias->type.shape);
  space_coalesce(&ps);
  Dom dom = cg_dom(x->type.dtype);
  const char *T = cg_dom_type(dom);
  Loop l = make_loop(cg, true, outer, len);
  const char *name = cg_kernel_begin(cg, n, mode_note(cg, &l));
  Buf *b = &cg->src;
  loop_begin(cg, &l, true);
  const char *v = cg_load(cg, x->type.dtype, dom, cg_fmt(cg, "in0[o * %" PRId64 " + j]", len));
  if (rms) {
    emit_pass(cg, &l, T, "sq", cg_fmt(cg, "(%s)0", T), "gc_add", "v * v", "", v);
  } else {
    emit_pass(cg, &l, T, "sum", cg_fmt(cg, "(%s)0", T), "gc_add", "v", "", v);
    buf_printf(b, "    const %s mean = sum / (%s)%" PRId64 ";\n", T, T, len);
    emit_pass(cg, &l, T, "sq", cg_fmt(cg, "(%s)0", T), "gc_add", "(v - mean) * (v - mean)", "", v);
  }
  buf_printf(b, "    const %s rstd = (%s)1 / sqrt(sq / (%s)%" PRId64 " + %s);\n", T, T, T, len,
             cg_lit(cg, attr_float(n, "epsilon"), dom));
  buf_printf(b, "    for (idx_t j = lane; j < %" PRId64 "; j += lanes) {\n", len);
  space_emit_offsets(cg, &ps, "j", "p", "      ");
  const char *res = cg_fmt(cg, rms ? "%s * rstd" : "(%s - mean) * rstd", v);
  if (scale)
    res = cg_fmt(cg, "%s * %s", res, cg_load(cg, scale->type.dtype, dom, "in1[p0]"));
  if (bias)
    res = cg_fmt(cg, "%s + %s", res, cg_load(cg, bias->type.dtype, dom, "in2[p1]"));
  cg_store_out(cg, n, cg_fmt(cg, "(o * %" PRId64 " + j)", len),
               cg_store(cg, y->type.dtype, dom, res), "      ");
  buf_puts(b, "    }\n  }\n}\n");
  cg_kernel_step(cg, n, name, l.grid, l.block);
  return 0;
}

/* ---------------------------------------------------------------- instance_norm */

/* Each (n, c) plane of x [N, C, spatial...] is a row: its mean, then its variance around
 * that mean, then (x - mean) / sqrt(var + epsilon) * scale[c] + bias[c], as eval_norm. */
int cg_instance_norm(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *y = n->out[0];
  int64_t ch = cg_dim(x, 1), planes = cg_dim(x, 0) * ch, len = cg_numel(x) / (planes ? planes : 1);
  Dom dom = cg_dom(x->type.dtype);
  const char *T = cg_dom_type(dom);
  Loop l = make_loop(cg, true, planes, len);
  const char *name = cg_kernel_begin(cg, n, mode_note(cg, &l));
  Buf *b = &cg->src;
  loop_begin(cg, &l, true);
  const char *v = cg_load(cg, x->type.dtype, dom, cg_fmt(cg, "in0[o * %" PRId64 " + j]", len));
  emit_pass(cg, &l, T, "sum", cg_fmt(cg, "(%s)0", T), "gc_add", "v", "", v);
  buf_printf(b, "    const %s mean = sum / (%s)%" PRId64 ";\n", T, T, len);
  emit_pass(cg, &l, T, "sq", cg_fmt(cg, "(%s)0", T), "gc_add", "(v - mean) * (v - mean)", "", v);
  buf_printf(b, "    const %s sd = sqrt(sq / (%s)%" PRId64 " + %s);\n", T, T, len,
             cg_lit(cg, attr_float(n, "epsilon"), dom));
  buf_printf(b, "    const idx_t c = o %% %" PRId64 ";\n", ch);
  buf_printf(b, "    const %s sc = %s, bi = %s;\n", T, cg_load(cg, n->in[1]->type.dtype, dom, "in1[c]"),
             cg_load(cg, n->in[2]->type.dtype, dom, "in2[c]"));
  const char *res = cg_fmt(cg, "(%s - mean) / sd * sc + bi", v);
  buf_printf(b, "    for (idx_t j = lane; j < %" PRId64 "; j += lanes) {\n", len);
  cg_store_out(cg, n, cg_fmt(cg, "(o * %" PRId64 " + j)", len),
               cg_store(cg, y->type.dtype, dom, res), "      ");
  buf_puts(b, "    }\n  }\n}\n");
  cg_kernel_step(cg, n, name, l.grid, l.block);
  return 0;
}

/* ---------------------------------------------------------------- hardmax */

/* 1 at the first max along the axis (the first NaN counts as the max: argmax's rule,
 * gc_argbest), 0 elsewhere. Rows (the axis innermost) take a warp or a block each; an
 * axis with inner dims after it takes a thread per (outer, inner) position. */
int cg_hardmax(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *y = n->out[0];
  int rank = x->type.shape.rank;
  int64_t axis = attr_int(n, "axis");
  axis = axis < 0 ? axis + rank : axis;
  int64_t outer = 1, len = cg_dim(x, (int)axis), inner = 1;
  for (int i = 0; i < axis; i++)
    outer *= cg_dim(x, i);
  for (int i = (int)axis + 1; i < rank; i++)
    inner *= cg_dim(x, i);
  Dom dom = cg_dom(x->type.dtype);
  const char *T = cg_dom_type(dom);
  Loop l = make_loop(cg, inner == 1, outer * inner, len);
  const char *name = cg_kernel_begin(cg, n, mode_note(cg, &l));
  Buf *b = &cg->src;
  loop_begin(cg, &l, true);
  buf_printf(b, "    const idx_t base = o / %" PRId64 " * %" PRId64 " + o %% %" PRId64 ";\n", inner,
             len * inner, inner);
  const char *at = cg_fmt(cg, "base + j * %" PRId64, inner);
  const char *A = cg_fmt(cg, "gc_arg<%s>", T);
  buf_printf(b, "    %s best = %s{0, -1};\n", A, A);
  buf_printf(b, "    for (idx_t j = lane; j < %" PRId64 "; j += lanes)\n", len);
  buf_printf(b, "      best = gc_argbest<false, false>()(best, %s{%s, (long long)j});\n", A,
             cg_load(cg, x->type.dtype, dom, cg_fmt(cg, "in0[%s]", at)));
  emit_combine(cg, &l, A, "best", "gc_argbest<false, false>", cg_fmt(cg, "%s{0, -1}", A));
  DType dt = y->type.dtype;
  buf_printf(b, "    for (idx_t j = lane; j < %" PRId64 "; j += lanes) out0[%s] = j == best.i ? %s : %s;\n",
             len, at, cg_const_of(cg, dt, 1), cg_const_of(cg, dt, 0));
  buf_puts(b, "  }\n}\n");
  cg_kernel_step(cg, n, name, l.grid, l.block);
  return 0;
}

/* ---------------------------------------------------------------- lp_norm, mean_variance_norm */

/* x / (sum |x|) or x / sqrt(sum x^2) along the axis, 0 where that norm is 0 (eval_lp_norm);
 * laid out like hardmax. */
int cg_lp_norm(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *y = n->out[0];
  int rank = x->type.shape.rank;
  int64_t axis = attr_int(n, "axis");
  axis = axis < 0 ? axis + rank : axis;
  bool p1 = attr_int(n, "p") == 1;
  int64_t outer = 1, len = cg_dim(x, (int)axis), inner = 1;
  for (int i = 0; i < axis; i++)
    outer *= cg_dim(x, i);
  for (int i = (int)axis + 1; i < rank; i++)
    inner *= cg_dim(x, i);
  Dom dom = cg_dom(x->type.dtype);
  const char *T = cg_dom_type(dom);
  Loop l = make_loop(cg, inner == 1, outer * inner, len);
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "p %d; %s", p1 ? 1 : 2, mode_note(cg, &l)));
  Buf *b = &cg->src;
  loop_begin(cg, &l, true);
  buf_printf(b, "    const idx_t base = o / %" PRId64 " * %" PRId64 " + o %% %" PRId64 ";\n", inner,
             len * inner, inner);
  const char *at = cg_fmt(cg, "base + j * %" PRId64, inner);
  const char *v = cg_load(cg, x->type.dtype, dom, cg_fmt(cg, "in0[%s]", at));
  emit_pass(cg, &l, T, "norm", cg_fmt(cg, "(%s)0", T), "gc_add", p1 ? "fabs(v)" : "v * v", "", v);
  if (!p1)
    buf_puts(b, "    norm = sqrt(norm);\n");
  buf_printf(b, "    for (idx_t j = lane; j < %" PRId64 "; j += lanes) out0[%s] = %s;\n", len, at,
             cg_store(cg, y->type.dtype, dom, cg_fmt(cg, "norm != 0 ? %s / norm : (%s)0", v, T)));
  buf_puts(b, "  }\n}\n");
  cg_kernel_step(cg, n, name, l.grid, l.block);
  return 0;
}

/* (x - mean) / (sqrt(var) + 1e-9) over the axes (all when empty), as eval_mvn: each group
 * of elements that differ only in the normalized dims is one output of reduce_over's
 * loop, walked three times. */
int cg_mean_variance_norm(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *y = n->out[0];
  int rank = x->type.shape.rank, na;
  const int64_t *axes = attr_ints(n, "axes", &na);
  bool red[IR_MAX_RANK] = {false};
  for (int i = 0; i < rank; i++)
    red[i] = na == 0;
  for (int i = 0; i < na; i++)
    red[axes[i] < 0 ? axes[i] + rank : axes[i]] = true;
  Space kept, rs;
  bool row;
  split_dims(x, red, &kept, &rs, &row);
  int64_t len = 1;
  for (int i = 0; i < rank; i++)
    if (red[i])
      len *= cg_dim(x, i);
  int64_t ngroup = cg_numel(x) / (len ? len : 1);
  Loop l = make_loop(cg, row, ngroup, len);
  Dom dom = cg_dom(x->type.dtype);
  const char *T = cg_dom_type(dom);
  const char *name = cg_kernel_begin(cg, n, mode_note(cg, &l));
  Buf *b = &cg->src;
  loop_begin(cg, &l, true);
  space_emit_offsets(cg, &kept, "o", "xo", "    ");
  Buf off = {0};
  Cg sub = *cg;
  sub.src = off;
  space_emit_offsets(&sub, &rs, "j", "ro", "      ");
  off = sub.src;
  const char *v = cg_load(cg, x->type.dtype, dom, "in0[xo0 + ro0]");
  emit_pass(cg, &l, T, "sum", cg_fmt(cg, "(%s)0", T), "gc_add", "v", off.s, v);
  buf_printf(b, "    const %s mean = sum / (%s)%" PRId64 ";\n", T, T, len);
  emit_pass(cg, &l, T, "sq", cg_fmt(cg, "(%s)0", T), "gc_add", "(v - mean) * (v - mean)", off.s, v);
  buf_printf(b, "    const %s sd = sqrt(sq / (%s)%" PRId64 ") + (%s)1e-9;\n", T, T, len, T);
  buf_printf(b, "    for (idx_t j = lane; j < %" PRId64 "; j += lanes) {\n", len);
  buf_puts(b, off.s);
  buf_printf(b, "      out0[xo0 + ro0] = %s;\n", cg_store(cg, y->type.dtype, dom, cg_fmt(cg, "(%s - mean) / sd", v)));
  buf_puts(b, "    }\n  }\n}\n");
  free(off.s);
  cg_kernel_step(cg, n, name, l.grid, l.block);
  return 0;
}
