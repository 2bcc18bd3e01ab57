/* reduce.c: kernels for reductions (reduce_*, argmax, argmin) and the row-wise ops
 * softmax, log_softmax, layer_norm and rms_norm.
 *
 * Two shapes of kernel, chosen by whether the innermost dim of the input is reduced:
 *   row     lanes share an output: a warp per output (a whole block when the rows are
 *           longer than ROW_BLOCK_MIN), each lane striding through the row, then
 *           __shfl_xor_sync butterflies (and a block reduction through shared memory);
 *           neighbouring lanes read neighbouring elements.
 *   column  neighbouring threads read neighbouring elements of the kept innermost dim. A
 *           reduction's is a family that the runtime times at create (reduce_columns):
 *           column vectors (colvec_kernel: a thread loads 16 bytes of neighbouring
 *           outputs' elements, a warp several rows at once, the blocks of a cluster
 *           sharing a group of columns' rows where the groups would not fill the SMs), and
 *           the kernel before it: a thread per output walking its elements in order;
 *           when those threads would not fill the GPU once (an image's mean over its
 *           pixels in channels last, a few channels at batch 1: a thread walked 12,544
 *           pixels alone), a block takes 32 neighbouring outputs instead, its warps
 *           striding through the elements as lanes, and sums the 8 lanes' partials
 *           through shared memory (column split); on a target with clusters, when those
 *           blocks would still not fill the SMs (32 channels: one block), the blocks of a
 *           cluster share each output's elements too, and every block sums all their
 *           partials, in rank order, through distributed shared memory. softmax, hardmax
 *           and the norms along a non-innermost axis take a thread per output alone.
 * layer_norm and rms_norm keep each row in registers instead (norm_rows: a few threads or
 * warps a row load it once in 16-byte vectors, a family timed at create), the row kernel
 * only for rows longer than a block's registers hold.
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

/* The kernel of a Loop for node n, which reduces x over the dims red[] the way reduction
 * op `op` does: a row mode, or a column reduction's COLUMN or COLUMN_SPLIT. */
static int reduce_loop(Cg *cg, const Node *n, const bool *red, Op op, const Loop *lp) {
  const Value *x = n->in[0], *y = n->out[0];
  bool arg = op == OP_ARGMAX || op == OP_ARGMIN;
  Space kept, rs;
  bool row;
  split_dims(x, red, &kept, &rs, &row);
  Loop l = *lp;
  int64_t len = l.len;
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

/* ---------------------------------------------------------------- column vectors */

/* A column reduction in vectors (the family's kernel where the rows are long enough to
 * share out: a channels-last global pool, a reduce over a non-innermost axis). x is seen
 * as [outer kept..., rows..., C]: C contiguous kept columns (the kept dims inside the
 * innermost reduced one), `len` rows of them (the reduced dims) for each of A outer
 * positions (the other kept dims), every row and outer offset a multiple of C.
 *
 * A thread loads V contiguous columns at once (16 bytes of them where C allows: 8 bf16 or
 * f16, 4 f32; narrower where C is no multiple, or where V accumulators would take more
 * than COLVEC_ACC_BYTES), and G lanes (a power of two, at most a warp) cover a group of
 * G * V columns, so a warp reads 32 / G rows of a group at once: 512 bytes of 16-bit data
 * a load where G * V columns are a row (the rows contiguous in a global pool). The column
 * split's warps read 64 bytes a load (a lane a column of bf16), and EfficientNet-B0's
 * first pool ran at 130 GB/s that way. A block's B / G slots (lane groups) walk the group's rows, each
 * COLVEC_UNROLL loads in flight (loaded first, then summed in row order); where the groups
 * would not fill the SMs, the S blocks of a thread block cluster share a group's rows
 * (slot k of rank r takes rows r * B / G + k, stepping S * B / G).
 *
 * The partials combine in a fixed order, so the results are the same on every run: the
 * slots of a warp by butterflies over the lanes of a column (every G-th), the warps in
 * order through shared memory, then the blocks of the cluster in rank order through
 * distributed shared memory; each block writes the outputs of its share of the columns.
 * Accumulation is in the op's domain (f32 for f16 and bf16), and every op keeps its
 * meaning: the functors of red_op (NaN wins max and min, argmax's ties by index), the mean
 * divided once at the end, log_sum_exp's two passes (the max combined and shared back to
 * every lane of the column before the sum of exp(v - max)). */
enum { COLVEC_BYTES = 16, COLVEC_ACC_BYTES = 32, COLVEC_UNROLL = 8, COLVEC_MIN_STEPS = 8 };
/* __launch_bounds__'s blocks an SM: the family asks for at most two. Without it ptxas kept
 * 2 of a 16-bit kernel's 8 loads in flight (32 registers, converting each vector as it
 * came); with it, all 8 (62 registers) */
enum { COLVEC_RESIDENT = 2 };

typedef struct ColShape {
  int64_t C, A, len, nout;
  Space outer, rs; /* the offsets in x of outer position a (xo0) and row j (ro0) */
} ColShape;

typedef struct ColVec {
  int64_t V, G, S; /* elements a load, lanes a group's row, blocks of a cluster a group */
} ColVec;

static void col_shape(const Value *x, const bool *red, ColShape *s) {
  int r = x->type.shape.rank, inner = r, no = 0, nr = 0;
  int64_t xd[IR_MAX_RANK] = {0}, xs[IR_MAX_RANK], od[IR_MAX_RANK], os[IR_MAX_RANK];
  int64_t rd[IR_MAX_RANK], rst[IR_MAX_RANK];
  for (int i = 0; i < r; i++)
    xd[i] = cg_dim(x, i);
  contiguous_strides(r, xd, xs);
  s->C = 1;
  while (inner > 0 && (!red[inner - 1] || xd[inner - 1] == 1))
    s->C *= xd[--inner];
  s->A = s->len = 1;
  for (int i = 0; i < inner; i++) {
    if (red[i]) {
      s->len *= rd[nr] = xd[i];
      rst[nr++] = xs[i];
    } else {
      s->A *= od[no] = xd[i];
      os[no++] = xs[i];
    }
  }
  s->nout = s->A * s->C;
  space_init(&s->outer, no, od);
  space_add_strides(&s->outer, os, 0);
  space_coalesce(&s->outer);
  space_init(&s->rs, nr, rd);
  space_add_strides(&s->rs, rst, 0);
  space_coalesce(&s->rs);
}

/* The lanes a row for v vectors a row: the power of two from 8 to 32 (or the one above v,
 * when that is less) that leaves the fewest lanes past the row's end, the wider on a tie;
 * or, with wide, the widest (at most a warp: 512 bytes of a row a warp load). */
static int64_t colvec_lanes(int64_t nv, bool wide) {
  int64_t p = 1;
  while (p < nv && p < 32)
    p *= 2;
  if (wide || p <= 8)
    return p;
  int64_t best = p;
  for (int64_t g = p / 2; g >= 8; g /= 2)
    if (g * ((nv + g - 1) / g) < best * ((nv + best - 1) / best))
      best = g;
  return best;
}

/* The vector width for sh's columns with accumulators of acc bytes: 0 when the block has
 * no whole warps or the shared memory cannot hold the partials. */
static int64_t colvec_width(const Cg *cg, const ColShape *sh, int64_t esize, int64_t acc) {
  const Target *t = cg->target;
  int64_t V = COLVEC_BYTES / esize;
  while (V > 1 && (sh->C % V || V * acc > COLVEC_ACC_BYTES))
    V /= 2;
  /* part (a warp's row of each column), tot and fin (a block's): at most a row of 32 */
  while (V > 1 && (t->block / 32 + 2) * 32 * V * acc > t->smem_block)
    V /= 2;
  if (t->block % 32 || (t->block / 32 + 2) * 32 * V * acc > t->smem_block)
    return 0;
  return V < 1 ? 1 : V;
}

/* The cluster split of groups of g lanes that makes `per_sm` blocks an SM, each slot at
 * least COLVEC_MIN_STEPS rows. */
static int64_t colvec_split(const Cg *cg, const ColShape *sh, int64_t V, int64_t G,
                            int64_t per_sm) {
  int64_t nv = sh->C / V, ng = sh->A * ((nv + G - 1) / G), slots = cg->target->block / G;
  int64_t want = cg->target->sms * per_sm / (ng ? ng : 1);
  return cg_cluster_split(cg, want, cg->target->cluster_max, (sh->len + slots - 1) / slots,
                          COLVEC_MIN_STEPS);
}

/* The blocks of groups of G lanes, split to make a block an SM. */
static int64_t colvec_blocks(const Cg *cg, const ColShape *sh, int64_t V, int64_t G) {
  int64_t nv = sh->C / V;
  return sh->A * ((nv + G - 1) / G) * colvec_split(cg, sh, V, G, 1);
}

static const char *colvec_note(Cg *cg, const ColShape *sh, const ColVec *c) {
  int64_t B = cg->target->block;
  const char *note = cg_fmt(cg, "column vectors: %" PRId64 " element%s a load, %" PRId64
                            " lane%s a row of %" PRId64 " columns, %" PRId64 " rows at once a "
                            "block", c->V, c->V == 1 ? "" : "s", c->G, c->G == 1 ? "" : "s",
                            c->G * c->V, B / c->G);
  if (c->S > 1)
    note = cg_fmt(cg, "%s, a cluster of %" PRId64 " blocks a group", note, c->S);
  return cg_fmt(cg, "%s; %" PRId64 " outputs of %" PRId64 " rows", note, sh->nout, sh->len);
}

/* stmt with each "@X" replaced by x */
static const char *subst(Cg *cg, const char *stmt, const char *x) {
  const char *out = "", *p = stmt, *q;
  while ((q = strstr(p, "@X"))) {
    out = cg_fmt(cg, "%s%.*s%s", out, (int)(q - p), p, x);
    p = q + 2;
  }
  return cg_fmt(cg, "%s%s", out, p);
}

/* One pass of the column-vector kernel: acc[V] (of type A) from ident over this thread's
 * rows. `stmt` adds element e of a vector loaded at row jr: "@X" stands for the stored
 * element. */
static void colvec_rows(Cg *cg, const ColVec *c, int64_t len, const char *A, const char *acc,
                        const char *ident, const char *stmt, const char *const *roffs,
                        const char *load) {
  Buf *b = &cg->src;
  int64_t step = c->S * (cg->target->block / c->G);
  buf_printf(b, "    %s %s[%" PRId64 "];\n", A, acc, c->V);
  buf_printf(b, "#pragma unroll\n    for (int e = 0; e < %" PRId64 "; e++) %s[e] = %s;\n", c->V, acc, ident);
  buf_puts(b, "    if (live) {\n");
  buf_puts(b, "      idx_t j = s;\n");
  /* COLVEC_UNROLL rows' loads issued before their sums: that many in flight a thread */
  buf_printf(b, "      for (; j + %" PRId64 " < %" PRId64 "; j += %" PRId64 ") {\n",
             (int64_t)(COLVEC_UNROLL - 1) * step, len, (int64_t)COLVEC_UNROLL * step);
  buf_printf(b, "        vec_t xv[%d];\n", COLVEC_UNROLL);
  buf_printf(b, "#pragma unroll\n        for (int k = 0; k < %d; k++) {\n", COLVEC_UNROLL);
  buf_printf(b, "          const idx_t jr = j + (idx_t)k * %" PRId64 ";\n", step);
  buf_puts(b, roffs[0]);
  buf_printf(b, "          xv[k] = %s;\n", load);
  buf_puts(b, "        }\n");
  buf_printf(b, "#pragma unroll\n        for (int k = 0; k < %d; k++) {\n", COLVEC_UNROLL);
  if (strstr(stmt, "jr")) /* argmax's index */
    buf_printf(b, "          const idx_t jr = j + (idx_t)k * %" PRId64 ";\n", step);
  buf_printf(b, "#pragma unroll\n          for (int e = 0; e < %" PRId64 "; e++) {\n", c->V);
  buf_printf(b, "            %s\n", subst(cg, stmt, "xv[k].e[e]"));
  buf_puts(b, "          }\n        }\n      }\n");
  buf_printf(b, "      for (; j < %" PRId64 "; j += %" PRId64 ") {\n", len, step);
  buf_puts(b, "        const idx_t jr = j;\n");
  buf_puts(b, roffs[1]);
  buf_printf(b, "        const vec_t x1 = %s;\n", load);
  buf_printf(b, "#pragma unroll\n        for (int e = 0; e < %" PRId64 "; e++) {\n", c->V);
  buf_printf(b, "          %s\n", subst(cg, stmt, "x1.e[e]"));
  buf_puts(b, "        }\n      }\n    }\n");
}

/* acc[] combined over the slots, warps and blocks of the group (every rank computes every
 * column, in the same order); then `each` for every column col (0 .. G * V) whose total is
 * p, on the block's threads in turn: a column's output (by one rank), or fin[col]. */
static void colvec_combine(Cg *cg, const ColVec *c, const char *A, const char *acc,
                           const char *functor, const char *each) {
  Buf *b = &cg->src;
  int64_t B = cg->target->block, W = B / 32, GV = c->G * c->V;
  const char *sync = c->S > 1 ? "gc_cluster_sync()" : "__syncthreads()";
  buf_printf(b, "#pragma unroll\n    for (int e = 0; e < %" PRId64 "; e++) {\n", c->V);
  if (c->G < 32)
    buf_printf(b, "      for (int mk = %" PRId64 "; mk < 32; mk <<= 1) %s[e] = %s()(%s[e], gc_shfl(%s[e], mk));\n",
               c->G, acc, functor, acc, acc);
  buf_printf(b, "      if ((threadIdx.x & 31) < %" PRId64 ") sm.part[threadIdx.x >> 5][u * %" PRId64 " + e] = %s[e];\n",
             c->G, c->V, acc);
  buf_puts(b, "    }\n");
  /* in a cluster, the barrier also orders the other ranks' reads of tot in the last
   * combine before this one writes it again */
  buf_printf(b, "    %s;\n", sync);
  buf_printf(b, "    for (int col = threadIdx.x; col < %" PRId64 "; col += %" PRId64 ") {\n", GV, B);
  buf_printf(b, "      %s p = sm.part[0][col];\n", A);
  buf_printf(b, "      for (int w = 1; w < %" PRId64 "; w++) p = %s()(p, sm.part[w][col]);\n", W, functor);
  buf_puts(b, "      sm.tot[col] = p;\n    }\n");
  /* tot's writes before the other ranks read them */
  buf_printf(b, "    %s;\n", sync);
  buf_printf(b, "    for (int col = threadIdx.x; col < %" PRId64 "; col += %" PRId64 ") {\n", GV, B);
  if (c->S > 1) {
    buf_printf(b, "      %s p = gc_cluster_map(&sm, 0u)->tot[col];\n", A);
    buf_printf(b, "      for (int r = 1; r < %" PRId64 "; r++) p = %s()(p, gc_cluster_map(&sm, (unsigned)r)->tot[col]);\n",
               c->S, functor);
  } else {
    buf_printf(b, "      const %s p = sm.tot[col];\n", A);
  }
  buf_puts(b, each);
  buf_puts(b, "    }\n");
}

/* The column-vector kernel c for node n (colvec: the comment above). */
static int colvec_kernel(Cg *cg, const Node *n, Op op, const ColShape *sh, const ColVec *c) {
  const Value *x = n->in[0], *y = n->out[0];
  int64_t B = cg->target->block, V = c->V, G = c->G, S = c->S, W = B / 32, GV = G * V;
  int64_t nv = sh->C / V, ngc = (nv + G - 1) / G, ng = sh->A * ngc, len = sh->len;
  bool arg = op == OP_ARGMAX || op == OP_ARGMIN, lse = op == OP_REDUCE_LOG_SUM_EXP;
  Dom dom = cg_dom(x->type.dtype);
  const char *T = cg_dom_type(dom);
  const char *A = arg ? cg_fmt(cg, "gc_arg<%s>", T) : T;
  cg->cluster = (int)S;
  cg->min_blocks = COLVEC_RESIDENT;
  const char *name = cg_kernel_begin(cg, n, colvec_note(cg, sh, c));
  Buf *b = &cg->src;
  buf_printf(b, "  typedef %s idx_t;\n", cg_idx_type(cg, cg_numel(x)));
  buf_printf(b, "  typedef gc_vec<%s, %" PRId64 "> vec_t;\n", cg_ctype(x->type.dtype), V);
  /* a warp's partial of each column, the block's, and (log_sum_exp) the max shared back */
  buf_printf(b, "  struct gc_colsm { %s part[%" PRId64 "][%" PRId64 "]; %s tot[%" PRId64 "];%s };\n",
             A, W, GV, A, GV, lse ? cg_fmt(cg, " %s fin[%" PRId64 "];", T, GV) : "");
  if (S > 1) /* a cluster's: tot is read by the other ranks */
    buf_printf(b, "  const int rank = (int)(blockIdx.x %% %" PRId64 ");\n"
               "  GC_BLOCK_SHARED(gc_colsm, sm);\n", S);
  else
    buf_puts(b, "  const int rank = 0;\n  __shared__ gc_colsm sm;\n");
  /* u: the thread's lane of a group's row; s: its first row */
  buf_printf(b, "  const int u = (int)(threadIdx.x %% %" PRId64 ");\n", G);
  buf_printf(b, "  const idx_t s = (idx_t)(threadIdx.x / %" PRId64 ") + (idx_t)rank * %" PRId64 ";\n",
             G, B / G);
  buf_printf(b, "  for (idx_t g = blockIdx.x / %" PRId64 "; g < %" PRId64 "; g += gridDim.x / %" PRId64 ") {\n",
             S, ng, S);
  if (ngc > 1)
    buf_printf(b, "    const idx_t a = g / %" PRId64 ", c0 = g %% %" PRId64 " * %" PRId64 ";\n", ngc,
               ngc, GV);
  else
    buf_puts(b, "    const idx_t a = g, c0 = 0;\n");
  buf_printf(b, "    const bool live = c0 + u * %" PRId64 " < %" PRId64 ";\n", V, sh->C);
  space_emit_offsets(cg, &sh->outer, "a", "xo", "    ");
  const char *off[2]; /* the row offsets, written once for the loops of every pass */
  for (int k = 0; k < 2; k++) {
    Cg sub = *cg;
    sub.src = (Buf){0};
    space_emit_offsets(&sub, &sh->rs, "jr", "ro", k ? "        " : "          ");
    off[k] = arena_strdup(cg->arena, sub.src.s);
    free(sub.src.s);
  }
  const char *load = cg_fmt(cg, "*(const vec_t *)(in0 + (xo0 + ro0 + c0 + u * %" PRId64 "))", V);
  const char *xe = cg_load(cg, x->type.dtype, dom, "@X"); /* colvec_rows puts the element */
  const char *out_at = cg_fmt(cg, "a * %" PRId64 " + c0 + col", sh->C);
  const char *mine = cg_fmt(cg, "c0 + col < %" PRId64 "%s", sh->C,
                            S > 1 ? cg_fmt(cg, " && col %% %" PRId64 " == rank", S) : "");
  if (arg) {
    const char *f = cg_fmt(cg, "gc_argbest<%s, %s>", op == OP_ARGMIN ? "true" : "false",
                           attr_int(n, "select_last_index") ? "true" : "false");
    colvec_rows(cg, c, len, A, "best", cg_fmt(cg, "%s{0, -1}", A),
                cg_fmt(cg, "best[e] = %s()(best[e], %s{%s, (long long)jr});", f, A, xe), off, load);
    colvec_combine(cg, c, A, "best", f, cg_fmt(cg, "      if (%s) out0[%s] = p.i < 0 ? 0 : p.i;\n", mine, out_at));
  } else {
    RedOp r = red_op(cg, op, dom, len);
    if (lse) {
      colvec_rows(cg, c, len, T, "mx", cg_lit(cg, -INFINITY, dom),
                  cg_fmt(cg, "mx[e] = gc_max()(mx[e], %s);", xe), off, load);
      colvec_combine(cg, c, T, "mx", "gc_max", "      sm.fin[col] = p;\n");
      buf_printf(b, "    __syncthreads();\n    %s mv[%" PRId64 "];\n", T, V);
      buf_printf(b, "#pragma unroll\n    for (int e = 0; e < %" PRId64 "; e++) mv[e] = sm.fin[u * %" PRId64 " + e];\n", V, V);
    }
    const char *stmt = cg_fmt(cg, "{ const %s v = %s;%s acc[e] = %s()(acc[e], %s); }", T, xe,
                              lse ? cg_fmt(cg, " const %s m = mv[e];", T) : "", r.functor, r.elem);
    colvec_rows(cg, c, len, T, "acc", r.ident, stmt, off, load);
    colvec_combine(cg, c, T, "acc", r.functor,
                   cg_fmt(cg, "      if (%s) {\n        const %s acc = p;%s\n        out0[%s] = %s;\n      }\n",
                          mine, T, lse ? cg_fmt(cg, " const %s m = sm.fin[col];", T) : "", out_at,
                          cg_store(cg, y->type.dtype, r.final_dom, r.final)));
  }
  buf_puts(b, "  }\n");
  if (S > 1) /* no block leaves while another may still read its tot */
    buf_puts(b, "  gc_cluster_sync();\n");
  buf_puts(b, "}\n");
  unsigned clusters = cg_blocks(cg, ng, 1);
  if ((int64_t)clusters * S > cg->target->max_blocks)
    clusters = (unsigned)(cg->target->max_blocks / S);
  cg_kernel_step(cg, n, name, clusters * (unsigned)S, (unsigned)B);
  return 0;
}

/* A column reduction: a family of column-vector kernels and the column split (or a
 * thread per output), which the runtime times at create. Variants, default first:
 *   - lanes by colvec_lanes (the fewest past the row's end; the widest where the
 *     slots would have fewer than COLVEC_UNROLL rows each), the cluster split that makes
 *     a block an SM (none on a target without clusters or where the groups fill the SMs);
 *   - the same split to make two blocks an SM, where that differs;
 *   - the other lanes rule, split to make a block an SM, where that differs;
 *   - fewer lanes a row (the halving that makes the most blocks, each slot keeping
 *     COLVEC_MIN_STEPS rows), split to make a block an SM, where even the cluster split
 *     leaves SMs idle;
 *   - the kernel before the family (column_loop's), the default instead where a block's
 *     slots would outnumber the rows or the data allows no vector kernel. */
static int reduce_columns(Cg *cg, const Node *n, const bool *red, Op op, int64_t nout,
                          int64_t len) {
  const Value *x = n->in[0];
  bool arg = op == OP_ARGMAX || op == OP_ARGMIN;
  Loop old = column_loop(cg, nout, len);
  ColShape sh;
  col_shape(x, red, &sh);
  Dom dom = cg_dom(x->type.dtype);
  int64_t acc = arg ? 16 : dom == DOM_F32 ? 4 : 8; /* gc_arg<T>: T and a long long */
  int64_t V = colvec_width(cg, &sh, (int64_t)dtype_size(x->type.dtype), acc);
  ColVec cv[4];
  int nc = 0;
  bool vec_first = false;
  if (V && sh.nout == nout && len > 0) {
    int64_t nv = sh.C / V, B = cg->target->block;
    int64_t Gn = colvec_lanes(nv, false), Gw = colvec_lanes(nv, true);
    bool few = (len + B / Gn - 1) / (B / Gn) < COLVEC_UNROLL;
    int64_t G = few ? Gw : Gn, Go = few ? Gn : Gw;
    cv[nc++] = (ColVec){V, G, colvec_split(cg, &sh, V, G, 1)};
    int64_t S2 = colvec_split(cg, &sh, V, G, 2);
    if (S2 != cv[0].S)
      cv[nc++] = (ColVec){V, G, S2};
    if (Go != G)
      cv[nc++] = (ColVec){V, Go, colvec_split(cg, &sh, V, Go, 1)};
    /* where the groups, split as far as a cluster goes, would leave SMs idle (a batch of
     * 1, a target without clusters): fewer lanes a row make more groups; the lanes that
     * make the most blocks while each slot keeps COLVEC_MIN_STEPS rows */
    int64_t Gf = G, most = colvec_blocks(cg, &sh, V, G);
    for (int64_t g = G / 2; g >= 1 && most < cg->target->sms && len >= B / g * COLVEC_MIN_STEPS;
         g /= 2) {
      int64_t nb = colvec_blocks(cg, &sh, V, g);
      if (nb > most) {
        most = nb;
        Gf = g;
      }
    }
    if (Gf != G && Gf != Go && nc < 3)
      cv[nc++] = (ColVec){V, Gf, colvec_split(cg, &sh, V, Gf, 1)};
    vec_first = len >= B / G;
  }
  int total = nc + 1, most = cg->variants < total ? cg->variants : total;
  if (most < 2) {
    if (vec_first)
      return colvec_kernel(cg, n, op, &sh, &cv[0]);
    return reduce_loop(cg, n, red, op, &old);
  }
  const char *label = cg_fmt(cg, "node %d: column reduction of %" PRId64 " outputs of %" PRId64
                             " rows, variants (elements a load x lanes a row / blocks a group):",
                             n->id, nout, len);
  const char *oldname = old.mode == COLUMN_SPLIT ? "column split" : "a thread an output";
  for (int k = 0, i = 0; k < most; k++) {
    bool isold = vec_first ? k == nc : k == 0;
    if (isold) {
      label = cg_fmt(cg, "%s%s %s", label, k ? "," : "", oldname);
    } else {
      const ColVec *c = &cv[i++];
      label = cg_fmt(cg, "%s%s %" PRId64 "x%" PRId64 "/%" PRId64, label, k ? "," : "", c->V,
                     c->G, c->S);
    }
  }
  int ch = cg_choice_begin(cg, n, label), rc = 0;
  for (int k = 0, i = 0; k < most && !rc; k++) {
    bool isold = vec_first ? k == nc : k == 0;
    cg_variant_begin(cg, ch);
    rc = isold ? reduce_loop(cg, n, red, op, &old) : colvec_kernel(cg, n, op, &sh, &cv[i++]);
    cg_variant_end(cg, ch);
  }
  if (!rc)
    cg_choice_end(cg, ch);
  return rc;
}

/* Node n reduces x over the dims red[] the way reduction op `op` does. */
static int reduce_over(Cg *cg, const Node *n, const bool *red, Op op) {
  const Value *x = n->in[0], *y = n->out[0];
  int rank = x->type.shape.rank;
  Space kept, rs;
  bool row;
  split_dims(x, red, &kept, &rs, &row);
  int64_t nout = cg_numel(y), len = 1;
  for (int i = 0; i < rank; i++)
    if (red[i])
      len *= cg_dim(x, i);
  if (!row)
    return reduce_columns(cg, n, red, op, nout, len);
  Loop l = make_loop(cg, row, nout, len);
  return reduce_loop(cg, n, red, op, &l);
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

/* layer_norm and rms_norm see x as rows of len contiguous elements (the dims from the
 * axis on) and compute as eval_layer_norm does, in f32 (f64 for f64): each row's mean,
 * then the mean square of x - mean around it (rms_norm: of x, no mean), then
 * (x - mean) * rstd * scale + bias, stored through the fuse group's epilogue.
 *
 * Rows in registers (norm_rows): T threads a row load its V-element vectors once (16
 * bytes where len allows: 8 bf16 or f16, 4 f32; narrower where it is no multiple), NV
 * vectors a thread (vector k * T + t for thread t, so neighbouring threads read
 * neighbouring vectors), and keep them in registers for both sums and the stores, which
 * write vectors too. T is a power of two up to a warp (32 / T rows a warp, each row's
 * sums by butterflies among its T lanes) or whole warps (a block a row, its warps' sums
 * through shared memory). A block takes RPB rows: as many as the target's default block
 * holds while the blocks still fill the SMs, one where T is more than a warp: 128 rows of
 * 768 bf16 (96 vectors) are 128 blocks of a warp, not 16 of 8. The earlier kernel, a warp
 * or a block a row reading the row from memory in each of three passes an element at a
 * time (GPT-2's [128, 768] layer norms took 7 us each on an H100), stays for rows longer
 * than a block's registers hold (norm_threads).
 *
 * A family timed at create (docs/variants.md), default first: T for at most
 * NORM_DEFAULT_VECS vectors a thread (the fewest threads that keep each thread's loads
 * few: shuffles and barriers are the kernel's cost beside its one load); the next wider T
 * (fewer vectors a thread) and the next narrower (more, at most NORM_MAX_VECS), where
 * there are; the widest, a vector a thread. Each with its rows a block by the rule above. */
enum { NORM_VEC_BYTES = 16, NORM_MAX_VECS = 8, NORM_DEFAULT_VECS = 4, NORM_VARIANTS = 4 };
/* 32-bit registers a thread needs beside its row's elements (indices, sums, a scale and a
 * bias vector), for the bound a block's threads share (norm_threads) */
enum { NORM_SPARE = 32 };

typedef struct NormRows {
  int64_t V, nvec;    /* elements a vector, vectors a row */
  int64_t T, NV, RPB; /* threads a row, vectors a thread, rows a block */
} NormRows;

/* How a scale or bias is read for an output vector: as a vector of its own (it runs
 * along the row), one element for the vector (constant along it), or element by element. */
typedef enum NormParam { NORM_PARAM_VEC, NORM_PARAM_ONE, NORM_PARAM_ELEM } NormParam;

static NormParam norm_param(const Space *ps, int op, int64_t V) {
  if (ps->rank == 0)
    return NORM_PARAM_ONE;
  int64_t inner = ps->dims[ps->rank - 1], st = ps->stride[op][ps->rank - 1];
  if (inner % V)
    return NORM_PARAM_ELEM;
  return st == 1 ? NORM_PARAM_VEC : st == 0 ? NORM_PARAM_ONE : NORM_PARAM_ELEM;
}

/* The threads a row of nvec vectors of `words` 32-bit registers each (f32 values: f64
 * takes two) for at most nv vectors a thread: a power of two up to a warp, else whole
 * warps; 0 past a block's most threads, or where the row's elements and NORM_SPARE would
 * pass the registers a thread of such a block may have (1024 threads: 64 each). */
static int64_t norm_threads(const Cg *cg, int64_t nvec, int64_t nv, int64_t words) {
  const Target *tg = cg->target;
  int64_t want = (nvec + nv - 1) / nv, T = 1;
  if (want > 32)
    T = (want + 31) / 32 * 32;
  else
    while (T < want)
      T *= 2;
  int64_t B = T > tg->block ? T : tg->block, regs = tg->regs_sm / B;
  if (regs > tg->regs_thread)
    regs = tg->regs_thread;
  if (T > tg->threads_block || (nvec + T - 1) / T * words + NORM_SPARE > regs)
    return 0;
  return T;
}

/* Rows a block for T threads a row: one where T is more than a warp; else whole warps,
 * doubled while the target's default block holds them and the blocks still fill the SMs. */
static int64_t norm_rows_a_block(const Cg *cg, int64_t rows, int64_t T) {
  if (T > 32)
    return 1;
  int64_t p = 32 / T;
  while (2 * p * T <= cg->target->block && (rows + 2 * p - 1) / (2 * p) >= cg->target->sms)
    p *= 2;
  return p;
}

/* The family for rows of nvec vectors of V (of `words` registers), default first: its
 * size (0: no T holds the row in registers). */
static int norm_family(const Cg *cg, int64_t rows, int64_t V, int64_t words, int64_t nvec,
                       NormRows c[NORM_VARIANTS]) {
  int64_t ts[NORM_MAX_VECS]; /* the distinct T, ascending */
  int nt = 0;
  for (int64_t nv = NORM_MAX_VECS; nv >= 1; nv--) {
    int64_t T = norm_threads(cg, nvec, nv, words);
    if (T && (!nt || ts[nt - 1] != T))
      ts[nt++] = T;
  }
  if (!nt)
    return 0;
  /* the default: T for NORM_DEFAULT_VECS, or the widest where a block's most threads
   * cannot take the row at that */
  int64_t T0 = norm_threads(cg, nvec, NORM_DEFAULT_VECS, words);
  int d = nt - 1;
  for (int k = 0; k < nt; k++)
    if (ts[k] == T0)
      d = k;
  int pick[NORM_VARIANTS], np = 0;
  pick[np++] = d;
  if (d + 1 < nt)
    pick[np++] = d + 1;
  if (d > 0)
    pick[np++] = d - 1;
  if (nt - 1 > d + 1)
    pick[np++] = nt - 1;
  for (int k = 0; k < np; k++) {
    int64_t T = ts[pick[k]];
    c[k] = (NormRows){.V = V, .nvec = nvec, .T = T, .NV = (nvec + T - 1) / T,
                      .RPB = norm_rows_a_block(cg, rows, T)};
  }
  return np;
}

/* One sum over this thread's elements of its row, combined over the row's threads:
 * "D var = sum of elem over v (the element)", in every thread of the row. */
static void norm_sum(Cg *cg, const Node *n, const NormRows *c, const char *guard,
                     const char *var, const char *elem) {
  Buf *b = &cg->src;
  Dom dom = cg_dom(n->in[0]->type.dtype);
  const char *D = cg_dom_type(dom);
  buf_printf(b, "    %s %s = 0;\n", D, var);
  buf_printf(b, "#pragma unroll\n    for (int k = 0; k < %" PRId64 "; k++) {\n", c->NV);
  if (*guard && strstr(guard, "c <"))
    buf_printf(b, "      const idx_t c = (idx_t)k * %" PRId64 " + t;\n", c->T);
  if (*guard)
    buf_printf(b, "      if (!(%s)) continue;\n", guard);
  buf_printf(b, "#pragma unroll\n      for (int e = 0; e < %" PRId64 "; e++) {\n", c->V);
  buf_printf(b, "        const %s v = %s;\n", D, cg_load(cg, n->in[0]->type.dtype, dom, "xv[k].e[e]"));
  buf_printf(b, "        %s += %s;\n      }\n    }\n", var, elem);
  if (c->T > 32)
    buf_printf(b, "    %s = gc_block_reduce(%s, gc_add(), (%s)0);\n", var, var, D);
  else if (c->T == 32)
    buf_printf(b, "    %s = gc_warp_reduce(%s, gc_add());\n", var, var);
  else if (c->T > 1)
    buf_printf(b, "#pragma unroll\n    for (int m = %" PRId64 "; m > 0; m >>= 1) %s += gc_shfl(%s, m);\n",
               c->T / 2, var, var);
}

/* The rows-in-registers kernel c of a layer_norm or rms_norm n over rows of len, its
 * scale and bias offsets (ops 0 and 1 of those there are) by ps. */
static int norm_rows(Cg *cg, const Node *n, int64_t rows, int64_t len, const Space *ps,
                     const NormRows *c) {
  const Value *x = n->in[0], *y = n->out[0];
  const Value *par[2] = {n->nin > 1 ? n->in[1] : NULL, n->nin > 2 ? n->in[2] : NULL};
  bool rms = n->op == OP_RMS_NORM;
  int64_t V = c->V, T = c->T, NV = c->NV, RPB = c->RPB, nvec = c->nvec;
  Dom dom = cg_dom(x->type.dtype);
  const char *D = cg_dom_type(dom);
  cg->threads = (int)(T * RPB);
  const char *name = cg_kernel_begin(
      cg, n, cg_fmt(cg, "rows in registers: %" PRId64 " thread%s a row of %" PRId64 " vector%s of %"
                    PRId64 ", %" PRId64 " vector%s a thread, %" PRId64 " row%s a block; %" PRId64
                    " rows", T, T == 1 ? "" : "s", nvec, nvec == 1 ? "" : "s", V, NV,
                    NV == 1 ? "" : "s", RPB, RPB == 1 ? "" : "s", rows));
  Buf *b = &cg->src;
  int64_t numel = cg_numel(y), top = numel > cg_max_numel(n) ? numel : cg_max_numel(n);
  buf_printf(b, "  typedef %s idx_t;\n", cg_idx_type(cg, top));
  buf_printf(b, "  typedef gc_vec<%s, %" PRId64 "> vec_t;\n", cg_ctype(x->type.dtype), V);
  buf_printf(b, "  typedef gc_vec<%s, %" PRId64 "> ovec_t;\n", cg_ctype(cg_out_dtype(cg, n)), V);
  /* t: the thread's place in its row; a block's rows start at rb */
  if (RPB > 1)
    buf_printf(b, "  const int t = (int)(threadIdx.x %% %" PRId64 "), g = (int)(threadIdx.x / %" PRId64 ");\n",
               T, T);
  else
    buf_puts(b, "  const int t = (int)threadIdx.x;\n");
  /* the loop's bound is the block's, so that a warp's lanes shuffle together */
  if (RPB > 1)
    buf_printf(b, "  for (idx_t rb = (idx_t)blockIdx.x * %" PRId64 "; rb < %" PRId64 "; rb += (idx_t)gridDim.x * %" PRId64 ") {\n",
               RPB, rows, RPB);
  else
    buf_printf(b, "  for (idx_t rb = blockIdx.x; rb < %" PRId64 "; rb += gridDim.x) {\n", rows);
  buf_printf(b, "    const idx_t row = %s;\n", RPB > 1 ? "rb + g" : "rb");
  bool live = rows % RPB != 0, part = T * NV != nvec;
  if (live)
    buf_printf(b, "    const bool live = row < %" PRId64 ";\n", rows);
  const char *guard = cg_fmt(cg, "%s%s%s", live ? "live" : "", live && part ? " && " : "",
                             part ? cg_fmt(cg, "c < %" PRId64, nvec) : "");
  const char *load = cg_fmt(cg, "*(const vec_t *)(in0 + (row * %" PRId64 " + c * %" PRId64 "))", len, V);
  buf_printf(b, "    vec_t xv[%" PRId64 "];\n", NV);
  buf_printf(b, "#pragma unroll\n    for (int k = 0; k < %" PRId64 "; k++) {\n", NV);
  buf_printf(b, "      const idx_t c = (idx_t)k * %" PRId64 " + t;\n", T);
  if (*guard)
    buf_printf(b, "      xv[k] = %s ? %s : vec_t{};\n    }\n", guard, load);
  else
    buf_printf(b, "      xv[k] = %s;\n    }\n", load);
  if (rms) {
    norm_sum(cg, n, c, guard, "sq", "v * v");
  } else {
    norm_sum(cg, n, c, guard, "sum", "v");
    buf_printf(b, "    const %s mean = sum / (%s)%" PRId64 ";\n", D, D, len);
    norm_sum(cg, n, c, guard, "sq", "(v - mean) * (v - mean)");
  }
  buf_printf(b, "    const %s rstd = (%s)1 / sqrt(sq / (%s)%" PRId64 " + %s);\n", D, D, D, len,
             cg_lit(cg, attr_float(n, "epsilon"), dom));
  /* the outputs: scale and bias (ops 0 and 1 of ps, in1 and in2) as the vector's, or an
   * element's, offsets p / q */
  NormParam how[2];
  bool by_vec = false, by_elem = false;
  for (int k = 0, op = 0; k < 2; k++)
    if (par[k]) {
      how[k] = norm_param(ps, op++, V);
      by_vec = by_vec || how[k] != NORM_PARAM_ELEM;
      by_elem = by_elem || how[k] == NORM_PARAM_ELEM;
    }
  buf_printf(b, "#pragma unroll\n    for (int k = 0; k < %" PRId64 "; k++) {\n", NV);
  buf_printf(b, "      const idx_t c = (idx_t)k * %" PRId64 " + t;\n", T);
  if (*guard)
    buf_printf(b, "      if (!(%s)) continue;\n", guard);
  buf_printf(b, "      const idx_t at = row * %" PRId64 " + c * %" PRId64 ";\n", len, V);
  if (by_vec)
    space_emit_offsets(cg, ps, cg_fmt(cg, "(c * %" PRId64 ")", V), "p", "      ");
  const char *res = rms ? "v * rstd" : "(v - mean) * rstd";
  for (int k = 0, op = 0; k < 2; k++) {
    if (!par[k])
      continue;
    DType pt = par[k]->type.dtype;
    const char *pv;
    if (how[k] == NORM_PARAM_VEC) {
      buf_printf(b, "      const gc_vec<%s, %" PRId64 "> pv%d = *(const gc_vec<%s, %" PRId64 "> *)(in%d + p%d);\n",
                 cg_ctype(pt), V, k, cg_ctype(pt), V, k + 1, op);
      pv = cg_load(cg, pt, dom, cg_fmt(cg, "pv%d.e[e]", k));
    } else if (how[k] == NORM_PARAM_ONE) {
      buf_printf(b, "      const %s pv%d = %s;\n", D, k, cg_load(cg, pt, dom, cg_fmt(cg, "in%d[p%d]", k + 1, op)));
      pv = cg_fmt(cg, "pv%d", k);
    } else {
      pv = cg_load(cg, pt, dom, cg_fmt(cg, "in%d[q%d]", k + 1, op));
    }
    res = cg_fmt(cg, k ? "%s + %s" : "%s * %s", res, pv);
    op++;
  }
  buf_printf(b, "      ovec_t ov;\n#pragma unroll\n      for (int e = 0; e < %" PRId64 "; e++) {\n", V);
  if (by_elem)
    space_emit_offsets(cg, ps, cg_fmt(cg, "(c * %" PRId64 " + e)", V), "q", "        ");
  const PwKernel *ep = cg_epilogue_of(cg, n);
  if (ep) { /* the index its inputs from outside and its side output are at */
    const Value *const *ext, *const *outs;
    const Node *const *nodes;
    int next, nn;
    cg_epilogue_operands(ep, &ext, &next, &outs, &nodes, &nn);
    if (next || cg_epilogue_nout(ep) > 1)
      buf_puts(b, "        const idx_t i = at + e;\n");
  }
  buf_printf(b, "        const %s v = %s;\n", D, cg_load(cg, x->type.dtype, dom, "xv[k].e[e]"));
  cg_store_out_to(cg, n, "i", cg_store(cg, y->type.dtype, dom, res), "ov.e[e]", "        ");
  buf_puts(b, "      }\n      *(ovec_t *)(out0 + at) = ov;\n    }\n  }\n}\n");
  cg_kernel_step(cg, n, name, cg_blocks(cg, rows, RPB), (unsigned)(T * RPB));
  return 0;
}

/* The kernel before the rows in registers: a warp or a block a row (make_loop), three
 * passes over the row from memory. */
static int norm_loop(Cg *cg, const Node *n, int64_t outer, int64_t len, const Space *ps) {
  const Value *x = n->in[0], *y = n->out[0];
  const Value *scale = n->nin > 1 ? n->in[1] : NULL, *bias = n->nin > 2 ? n->in[2] : NULL;
  bool rms = n->op == OP_RMS_NORM;
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
  space_emit_offsets(cg, ps, "j", "p", "      ");
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

/* layer_norm, and rms_norm (no mean: x * rstd of the mean square; the scale optional) */
int cg_layer_norm(Cg *cg, const Node *n) {
  const Value *x = n->in[0];
  const Value *scale = n->nin > 1 ? n->in[1] : NULL, *bias = n->nin > 2 ? n->in[2] : NULL;
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
  int64_t V = NORM_VEC_BYTES / (int64_t)dtype_size(x->type.dtype);
  while (V > 1 && len % V)
    V /= 2;
  NormRows c[NORM_VARIANTS];
  int64_t words = V * (dtype_size(x->type.dtype) > 4 ? 2 : 1);
  int nc = len > 0 && V > 0 ? norm_family(cg, outer, V, words, len / V, c) : 0;
  if (!nc)
    return norm_loop(cg, n, outer, len, &ps);
  int most = cg->variants < nc ? cg->variants : nc;
  if (most < 2)
    return norm_rows(cg, n, outer, len, &ps, &c[0]);
  const char *label = cg_fmt(cg, "node %d: %s of %" PRId64 " rows of %" PRId64 ", variants "
                             "(threads a row x vectors a thread / rows a block):", n->id,
                             op_info[n->op].name, outer, len);
  for (int k = 0; k < most; k++)
    label = cg_fmt(cg, "%s%s %" PRId64 "x%" PRId64 "/%" PRId64, label, k ? "," : "", c[k].T,
                   c[k].NV, c[k].RPB);
  int ch = cg_choice_begin(cg, n, label), rc = 0;
  for (int k = 0; k < most && !rc; k++) {
    cg_variant_begin(cg, ch);
    rc = norm_rows(cg, n, outer, len, &ps, &c[k]);
    cg_variant_end(cg, ch);
  }
  if (!rc)
    cg_choice_end(cg, ch);
  return rc;
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
