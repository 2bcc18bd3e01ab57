/* nn.c: kernels for the neural-network ops on [N, C, spatial...] tensors: conv,
 * conv_transpose, max_pool, average_pool, batch_norm, lrn, resize, grid_sample and
 * roi_align.
 *
 * A convolution of one group over one or two spatial dims in f32, bf16 or f16 is an
 * implicit GEMM on tensor cores (below). Every other kernel is one thread per output
 * element in a grid-stride loop, written from the output's side so that writes are
 * coalesced and no two threads write one element. The sliding windows walk every
 * spatial dim with its stride, begin pad and dilation baked in; any number of spatial
 * dims. The direct conv kernel (groups, depthwise, f64, three spatial dims and more):
 * in NCHW neighbouring threads are neighbouring output columns, reading neighbouring
 * input columns, while the weights of one output channel are the same for the whole
 * warp; in channels last they are neighbouring channels. Float math is in f32 for
 * f32/f16/bf16 data and f64 for f64, accumulating in that domain; the meaning of each
 * op is ir/interp.c's (eval_conv, eval_conv_transpose, eval_pool, eval_norm,
 * eval_resize), up to the order of float additions. */
#include "codegen/cg-impl.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

/* The window of a conv or pool over k spatial dims, the defaults of empty lists applied
 * (like the reference's window_read and list_or). */
typedef struct Win {
  int k;
  int64_t kernel[IR_MAX_RANK], stride[IR_MAX_RANK], dil[IR_MAX_RANK];
  int64_t pad[IR_MAX_RANK], pad_end[IR_MAX_RANK];
} Win;

static void list_or(const Node *n, const char *name, int want, int64_t dflt, int64_t *dst) {
  int len;
  const int64_t *v = attr_ints(n, name, &len);
  for (int i = 0; i < want; i++)
    dst[i] = len ? v[i] : dflt;
}

static void read_win(const Node *n, int k, Win *w) {
  int64_t pads[2 * IR_MAX_RANK];
  w->k = k;
  list_or(n, "strides", k, 1, w->stride);
  list_or(n, "dilations", k, 1, w->dil);
  list_or(n, "pads", 2 * k, 0, pads);
  for (int j = 0; j < k; j++) {
    w->pad[j] = pads[j];
    w->pad_end[j] = pads[k + j];
  }
}

/* "a * s + c" for variable a, without the "* 1" and "+ 0". */
static const char *affine(Cg *cg, const char *a, int64_t s, int64_t c) {
  const char *t = s == 1 ? a : cg_fmt(cg, "%s * %" PRId64, a, s);
  if (c == 0)
    return t;
  return cg_fmt(cg, "%s %c %" PRId64, t, c < 0 ? '-' : '+', c < 0 ? -c : c);
}

/* Unravels the flat output index i of y [N, C, spatial...]: o0.. (spatial), then
 * `chan` and `batch` (or, with chan NULL, the plane index `batch` = n * C + c). With cl,
 * y is [N, spatial..., C]: `chan` first, then o0.., then `batch`. */
static void emit_unravel(Cg *cg, const Value *y, bool cl, const char *chan, const char *batch) {
  Buf *b = &cg->src;
  int r = y->type.shape.rank;
  buf_puts(b, "    idx_t r = i;\n");
  if (cl)
    buf_printf(b, "    const idx_t %s = r %% %" PRId64 "; r /= %" PRId64 ";\n", chan,
               cg_dim(y, r - 1), cg_dim(y, r - 1));
  for (int j = r - 1 - cl; j >= 2 - cl; j--)
    buf_printf(b, "    const idx_t o%d = r %% %" PRId64 "; r /= %" PRId64 ";\n", j - 2 + cl,
               cg_dim(y, j), cg_dim(y, j));
  if (chan && !cl)
    buf_printf(b, "    const idx_t %s = r %% %" PRId64 ", %s = r / %" PRId64 ";\n", chan,
               cg_dim(y, 1), batch, cg_dim(y, 1));
  else
    buf_printf(b, "    const idx_t %s = r;\n", batch);
}

/* The row-major offset of (p0, .., p{k-1}) in the spatial dims of x, as text. */
static const char *spatial_offset(Cg *cg, const Value *x, const char *p) {
  int r = x->type.shape.rank;
  int64_t dims[IR_MAX_RANK] = {0}, st[IR_MAX_RANK];
  for (int j = 2; j < r; j++)
    dims[j - 2] = cg_dim(x, j);
  contiguous_strides(r - 2, dims, st);
  const char *s = NULL;
  for (int j = 0; j < r - 2; j++) {
    const char *t = st[j] == 1 ? cg_fmt(cg, "%s%d", p, j) : cg_fmt(cg, "%s%d * %" PRId64, p, j, st[j]);
    s = s ? cg_fmt(cg, "%s + %s", s, t) : t;
  }
  return s;
}

static int64_t spatial_numel(const Value *v) {
  int64_t p = 1;
  for (int j = 2; j < v->type.shape.rank; j++)
    p *= cg_dim(v, j);
  return p;
}

static void indent(Buf *b, int depth) {
  for (int i = 0; i < depth; i++)
    buf_puts(b, "  ");
}

/* ---------------------------------------------------------------- conv as an implicit GEMM
 *
 * A convolution of one group over one or two spatial dims is a GEMM of
 *   M = N * OH * OW output pixels by COUT channels over K = C * KH * KW taps,
 * A[m][k] the input under tap k of pixel m (zero in the padding), B[k][n] = w[n][k] (the
 * weights are that matrix as stored). Nothing is unfolded in memory: a block computes a
 * BM x BN tile of the output on tensor cores with f32 accumulators, loading 32 taps of A
 * and B at a time into shared memory, the next 32 into registers while the warps
 * multiply (then into the other of two buffers, where they fit), taps that come one at a
 * time located through a table of the step's taps. Shared memory holds 32-bit slots: two
 * taps of bf16/f16 data for mma.m16n8k16, one tap of f32 data for mma.m16n8k8 on TF32; the
 * fragments' layouts then read the same slots. f32 data is rounded to TF32 as it is stored when the node
 * says tf32 = 1 (--precision=tf32); otherwise each value is split into a TF32 part and
 * the TF32 rounding of the rest, and three products (the two parts' cross terms and the
 * big parts', "3xTF32") make each product to within about 2^-21 of f32's. Tensor cores
 * add into their accumulators rounding toward zero, an error that grows with every mma
 * of a chain (sums of 4608 taps came out 4e-5 low, ResNet-50's output 1.2e-4 off); so
 * the three products of 8 taps are summed apart and added to the accumulator by an f32
 * add. In NCHW
 * neighbouring threads load neighbouring pixels; in channels last (K over (kh, kw, c)) a
 * thread loads 16 bytes of contiguous channels at once. The tile goes through shared
 * memory on its way out, so that the stores coalesce, the bias and the epilogue applied
 * as each element is stored. The group's prologue (cg->pro: a cast of an f32 input to
 * 16 bits, a transpose) is read through strides and rounded as it is loaded. */

/* A convolution's operands in channels-first order of dims whatever their layout: x as
 * [N, C, spatial...], w as [M, C/group, k...], y as [N, M, spatial...], with the strides
 * (in elements) of the buffers the kernel reads and writes. x is read from the
 * prologue's source when the group has one (through its transposes' strides). */
typedef struct ConvView {
  int k; /* spatial dims */
  int64_t xd[IR_MAX_RANK], xs[IR_MAX_RANK], wd[IR_MAX_RANK], ws[IR_MAX_RANK];
  int64_t yd[IR_MAX_RANK];
  DType src; /* the type x is stored in: x's, or the prologue source's */
  bool cl;   /* channels_last: w's taps before its channels */
} ConvView;

/* dims and strides of a tensor stored as dims[], seen in channels-first order. */
static void channels_first(int r, const int64_t *dims, const int64_t *st, bool cl,
                           int64_t *od, int64_t *os) {
  int64_t first[IR_MAX_RANK], last[IR_MAX_RANK];
  channels_last_perms(r, first, last);
  for (int j = 0; j < r; j++) {
    int64_t from = cl ? first[j] : j;
    od[j] = dims[from];
    os[j] = st[from];
  }
}

static void conv_view(const Cg *cg, const Node *n, ConvView *v) {
  const Value *x = n->in[0], *w = n->in[1], *y = n->out[0];
  int r = x->type.shape.rank;
  int64_t d[IR_MAX_RANK], st[IR_MAX_RANK], xs[IR_MAX_RANK];
  v->k = r - 2;
  v->cl = attr_int(n, "channels_last") != 0;
  const Value *src = cg->pro ? cg->pro->prologue_src : x;
  v->src = src->type.dtype;
  for (int j = 0; j < r; j++)
    d[j] = cg_dim(src, j);
  contiguous_strides(r, d, st);
  for (int j = 0; j < r; j++) { /* x's dim j is the source's dim perm[j] */
    xs[j] = st[cg->pro ? cg->pro->prologue_perm[j] : j];
    d[j] = cg_dim(x, j);
  }
  channels_first(r, d, xs, v->cl, v->xd, v->xs);
  for (int j = 0; j < r; j++)
    d[j] = cg_dim(w, j);
  contiguous_strides(r, d, st);
  channels_first(r, d, st, v->cl, v->wd, v->ws);
  for (int j = 0; j < r; j++)
    d[j] = cg_dim(y, j);
  contiguous_strides(r, d, st);
  channels_first(r, d, st, v->cl, v->yd, xs); /* y's dims; its strides are not needed */
}

/* conv_mma's sizes: a 1-d convolution as 2-d of height 1. */
typedef struct ConvGeom {
  int64_t nb, c, h, w, cout, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t xn, xc, xh, xw; /* x's strides */
} ConvGeom;

/* n's geometry into *q, any group: false unless one or two spatial dims, with K and the
 * channels small enough for int arithmetic. */
static bool conv_geom_fill(const Node *n, const ConvView *v, ConvGeom *q) {
  if (v->k != 1 && v->k != 2)
    return false;
  Win win;
  read_win(n, v->k, &win);
  int s = v->k == 2; /* the index of the width in the window's lists */
  *q = (ConvGeom){.nb = v->xd[0], .c = v->xd[1], .h = s ? v->xd[2] : 1, .w = v->xd[2 + s],
                  .cout = v->yd[1], .oh = s ? v->yd[2] : 1, .ow = v->yd[2 + s],
                  .kh = s ? v->wd[2] : 1, .kw = v->wd[2 + s],
                  .sh = s ? win.stride[0] : 1, .sw = win.stride[s], .ph = s ? win.pad[0] : 0,
                  .pw = win.pad[s], .dh = s ? win.dil[0] : 1, .dw = win.dil[s],
                  .xn = v->xs[0], .xc = v->xs[1], .xh = s ? v->xs[2] : 0, .xw = v->xs[2 + s]};
  return q->c * q->kh * q->kw < INT32_MAX / 2 && q->cout < INT32_MAX / 2 &&
         q->c * q->h * q->w < INT32_MAX / 2;
}

/* n's geometry, or false when n is no convolution that conv_mma runs: one group, one or
 * two spatial dims, f32 or 16-bit data and weights (16-bit x read as such or from f32),
 * with K and the channels small enough for int arithmetic. */
static bool conv_geom(const Node *n, const ConvView *v, ConvGeom *q) {
  const Value *w = n->in[1], *y = n->out[0];
  DType t = y->type.dtype;
  bool sixteen = t == DT_BF16 || t == DT_F16;
  if ((!sixteen && t != DT_F32) || w->type.dtype != t ||
      (v->src != t && (!sixteen || v->src != DT_F32)) || attr_int(n, "group") != 1 ||
      !conv_geom_fill(n, v, q))
    return false;
  /* conv_mma marks a tap or a pixel outside every image by a place 2^29 above it, and
   * adds a window corner's offset (negative in the padding) to a tap's: both in int */
  int64_t spanh = q->ph + q->sh * q->oh + q->dh * q->kh, spanw = q->pw + q->sw * q->ow + q->dw * q->kw;
  return spanh < (1 << 28) && spanw < (1 << 28) &&
         spanh * q->xh + spanw * q->xw + q->c * q->xc < INT32_MAX / 2;
}

enum {
  MMA_BK = 32,
  MMA_WARPS = 8, /* the kernel is written for 8 warps, 4 x 2 over the tile */
  MMA_THREADS = MMA_WARPS * 32,
  MMA_RESIDENT = 2,    /* blocks an SM runs at once (3xTF32's __launch_bounds__) */
  MMA_MIN_STEPS = 4,   /* K steps a block of a split K at least */
  MMA_MAX_KERNELS = 6, /* kernel variants of a convolution at most */
  ASYNC_BK = 64,       /* taps a K step of the pipelined kernel: 8 chunks of 16 bytes a row */
  ASYNC_MAX_STAGES = 4,
};

/* One kernel of the implicit GEMM's family: BM x BN tiles, K split over S blocks of a
 * cluster; the register kernel (stages 0: BM 64 or 128, BN 32 or 64, K steps of MMA_BK)
 * or the pipelined one (stages > 1 of ASYNC_BK taps in flight through cp.async). */
typedef struct MmaConfig {
  int64_t bm, bn, split, stages;
} MmaConfig;

/* (the register kernel's last tile only where it loads A's taps one at a time: its rows'
 * taps, loaded for twice the columns, cost half as much a product) */
static const int64_t mma_tiles[][2] = {{128, 64}, {64, 64}, {128, 32}, {64, 32}, {64, 128}};
static const int64_t async_tiles[][2] = {{128, 128}, {128, 64}, {64, 128}, {64, 64},
                                         {128, 32}, {64, 32}};

/* Whether the pipelined kernel runs q: 16-bit data in channels last whose taps come as
 * 16-byte chunks of 8 channels of one pixel (the channels a multiple of 8, x read as
 * stored), on a target with cp.async. */
static bool async_fits(const Cg *cg, const ConvView *v, const ConvGeom *q, DType t) {
  return (t == DT_BF16 || t == DT_F16) && v->src == t && v->cl && q->xc == 1 && q->c % 8 == 0 &&
         (cg->target->insn & TARGET_CP_ASYNC);
}

/* Stages of `stage` bytes a pipelined kernel may keep in flight: as many as fit (up to
 * ASYNC_MAX_STAGES) in a block's share of an SM's shared memory at MMA_RESIDENT blocks an
 * SM (the SM's memory less what it reserves for each block) beside `fixed` bytes, the
 * epilogue's `tile` of floats reusing them; 0 where fewer than 2 fit. */
static int64_t pipeline_stages(const Cg *cg, int64_t stage, int64_t tile, int64_t fixed) {
  const Target *t = cg->target;
  int64_t budget = t->smem_sm / MMA_RESIDENT - (t->smem_sm - t->smem_block_optin);
  budget = (budget > t->smem_block_optin ? t->smem_block_optin : budget) - fixed;
  int64_t n = budget / stage;
  n = n > ASYNC_MAX_STAGES ? ASYNC_MAX_STAGES : n;
  return n >= 2 && tile <= budget ? n : 0;
}

/* The pipelined kernel's stages for a BM x BN tile (pipeline_stages). */
static int64_t async_stages(const Cg *cg, int64_t bm, int64_t bn) {
  return pipeline_stages(cg, (bm + bn) * ASYNC_BK * 2, bn * (bm + 4) * 4, 0);
}

/* Bytes of the pipelined kernel's shared memory: its stages, or the epilogue's tile. */
static int64_t async_smem(const MmaConfig *c) {
  int64_t st = c->stages * (c->bm + c->bn) * ASYNC_BK * 2, tile = c->bn * (c->bm + 4) * 4;
  return st > tile ? st : tile;
}

/* The blocks that share a tile's K steps: 1, or on a target with clusters the blocks of a
 * thread block cluster, which sum their partial tiles through distributed shared memory:
 * `want` of them, at most the target's (portable) cluster size and at least
 * MMA_MIN_STEPS steps each; then as few as give each that many steps. */
static int64_t k_splits(const Cg *cg, int64_t want, int64_t steps) {
  return cg_cluster_split(cg, want, cg->target->cluster_max, steps, MMA_MIN_STEPS);
}

/* The default, variant 0 (what GPUCC_TUNE=0 runs), by grid fill. The register kernel: BN
 * 32 for narrow layers and where 64 x 64 tiles would not fill half the SMs, BM 64 when 128
 * rows would leave block slots idle. The pipelined one: BN the output's channels up to
 * 128 (32, 64, 128), halved while the tiles would not fill half the SMs, BM 64 when 128
 * rows would leave block slots idle. Both split K about as many ways as the tiles' blocks
 * go into every SM's slots. */
static MmaConfig mma_default(const Cg *cg, int64_t M, int64_t cout, int64_t K, bool async) {
  int64_t sms = cg->target->sms, slots = sms * MMA_RESIDENT;
  MmaConfig c = {0};
  if (async) {
    c.bn = cout <= 32 ? 32 : cout <= 64 ? 64 : 128;
    while (c.bn > 32 && ((M + 63) / 64 * ((cout + c.bn - 1) / c.bn) < sms / 2 ||
                         !async_stages(cg, 64, c.bn)))
      c.bn /= 2;
  } else {
    bool few = (M + 63) / 64 * ((cout + 63) / 64) < sms / 2;
    c.bn = cout <= 32 || few ? 32 : 64;
  }
  int64_t NT = (cout + c.bn - 1) / c.bn, bk = async ? ASYNC_BK : MMA_BK;
  c.bm = (M + 127) / 128 * NT >= slots && (!async || async_stages(cg, 128, c.bn)) ? 128 : 64;
  c.stages = async ? async_stages(cg, c.bm, c.bn) : 0;
  c.split = k_splits(cg, slots / ((M + c.bm - 1) / c.bm * NT), (K + bk - 1) / bk);
  return c;
}

/* The kernels of the family into c[] (at most MMA_MAX_KERNELS), the default first; then,
 * for each tile of the kernel's list (mma_tiles, async_tiles) that the output fills (BM
 * 128 only over more than 64 rows, BN 64 over more than 32 channels and 128 over more
 * than 64) and whose stages fit, K unsplit and split to make one block an SM and to fill
 * every SM's slots, the default's tile also 2, 3, 4, 6 and 8 ways up to that last (as
 * gemm.c's tc_family); the tiles smaller than the default's on a side (the register
 * kernel's: narrower or of fewer outputs) only while its blocks leave slots idle. The
 * register kernel's 64 x 128 tile only where `taps` (it loads A's taps one at a time).
 * Each configuration once. A short convolution, whose tiles' blocks all run
 * at once, each over at most 2 * MMA_MIN_STEPS steps of K, keeps its default alone: its
 * time is its launch and a few loads, and NVRTC's time for more kernels is not worth it. */
static int mma_family(const Cg *cg, int64_t M, int64_t cout, int64_t K, bool async, bool taps,
                      MmaConfig *c) {
  int64_t sms = cg->target->sms, slots = sms * MMA_RESIDENT;
  int64_t steps = (K + (async ? ASYNC_BK : MMA_BK) - 1) / (async ? ASYNC_BK : MMA_BK);
  int nc = 0;
  c[nc++] = mma_default(cg, M, cout, K, async);
  int64_t tiles = (M + c[0].bm - 1) / c[0].bm * ((cout + c[0].bn - 1) / c[0].bn);
  if (tiles <= slots && steps <= 2 * MMA_MIN_STEPS)
    return nc;
  bool idle = tiles < slots;
  const int64_t(*list)[2] = async ? async_tiles : mma_tiles;
  int nlist = async ? (int)(sizeof async_tiles / sizeof async_tiles[0])
                    : (int)(sizeof mma_tiles / sizeof mma_tiles[0]) - !taps;
  for (int i = -1; i < nlist; i++) {
    /* the default's tile first (i = -1), then the others */
    int64_t bm = i < 0 ? c[0].bm : list[i][0], bn = i < 0 ? c[0].bn : list[i][1];
    int64_t stages = async ? async_stages(cg, bm, bn) : 0;
    if ((i >= 0 && bm == c[0].bm && bn == c[0].bn) || (bm > 64 && M <= 64) ||
        (bn > 32 && cout <= 32) || (bn > 64 && cout <= 64) || (async && !stages) ||
        (!idle && (bn < c[0].bn || (async ? bm < c[0].bm : bm * bn < c[0].bm * c[0].bn))))
      continue;
    tiles = (M + bm - 1) / bm * ((cout + bn - 1) / bn);
    static const int64_t ways[] = {2, 3, 4, 6, 8};
    int64_t fill = k_splits(cg, (slots + tiles - 1) / tiles, steps), split[8] = {1};
    int ns = 1;
    for (size_t w = 0; bm == c[0].bm && bn == c[0].bn && w < 5 && ways[w] <= fill; w++)
      split[ns++] = k_splits(cg, ways[w], steps);
    split[ns++] = k_splits(cg, (sms + tiles - 1) / tiles, steps);
    split[ns++] = fill;
    for (int k = 0; k < ns && nc < MMA_MAX_KERNELS; k++) {
      bool seen = false;
      for (int j = 0; j < nc; j++)
        seen = seen || (c[j].bm == bm && c[j].bn == bn && c[j].split == split[k]);
      if (!seen)
        c[nc++] = (MmaConfig){bm, bn, split[k], stages};
    }
  }
  return nc;
}

/* The statements that store slots src[0..count) at row[at..] in shared memory, as 16-byte
 * (or narrower) vectors, each rounded to TF32 first when tf32. */
static const char *store_slots(Cg *cg, const char *row, const char *at, const char *src,
                               int64_t count, bool tf32) {
  int64_t w = count < 4 ? count : 4;
  const char *list = "";
  for (int64_t i = 0; i < w; i++) {
    const char *e = cg_fmt(cg, "%s[%" PRId64 " * q + %" PRId64 "]", src, w, i);
    list = cg_fmt(cg, "%s%s%s", list, i ? ", " : "", tf32 ? cg_fmt(cg, "gc_tf32(%s)", e) : e);
  }
  return cg_fmt(cg,
      "#pragma unroll\n"
      "      for (int q = 0; q < %" PRId64 "; q++) *(gc_vec<unsigned, %" PRId64 "> *)&%s[%s + %" PRId64 " * q] = {{%s}};\n",
      count / w, w, row, at, w, list);
}

/* The loop that fills slots dst[0..count) from ld(from + tap): a tap a slot (wide), or
 * two 16-bit taps, the second in the high half. */
static const char *load_slots(Cg *cg, const char *dst, const char *ld, const char *from,
                              int64_t count, bool wide) {
  const char *slot = wide ? cg_fmt(cg, "%s(%s + j)", ld, from)
                          : cg_fmt(cg, "%s(%s + 2 * j) | %s(%s + 2 * j + 1) << 16", ld, from, ld, from);
  return cg_fmt(cg, "      for (int j = 0; j < %" PRId64 "; j++) %s[j] = %s;\n", count, dst, slot);
}

/* The end of an implicit GEMM's kernel (name), from its accumulators acc[MI][NJ][4] (the
 * warp's rows wm + 16 i + g (+ 8), columns wn + 8 j + 2 t4 (+ 1), as mma leaves them) after
 * its last K step: the tile through shared memory (sm.c, [BN][BM + 4] floats), summed
 * over the cluster's blocks for a split K, the bias and the epilogue, the stores; then
 * the kernel's step. */
static int conv_mma_epilogue(Cg *cg, const Node *n, const ConvView *v, const ConvGeom *q,
                             const MmaConfig *cf, const char *name, int64_t MI, int64_t NJ) {
  const Value *bias = n->nin > 2 ? n->in[2] : NULL;
  DType t = n->out[0]->type.dtype;
  int64_t M = q->nb * q->oh * q->ow, OHW = q->oh * q->ow, BM = cf->bm, BN = cf->bn, S = cf->split;
  int64_t MT = (M + BM - 1) / BM, NT = (q->cout + BN - 1) / BN;
  Buf *b = &cg->src;
  /* a cluster's blocks read each other's tiles: they wait for every one stored, and
   * none goes on to overwrite its own until all have read */
  const char *sync = S > 1 ? "gc_cluster_sync()" : "__syncthreads()";
  buf_printf(b,
      "    /* the tile through shared memory: the stores below are coalesced */\n"
      "#pragma unroll\n"
      "    for (int i = 0; i < %" PRId64 "; i++)\n"
      "#pragma unroll\n"
      "      for (int j = 0; j < %" PRId64 "; j++) {\n"
      "        const int r = wm + i * 16 + g, c = wn + j * 8 + 2 * t4;\n"
      "        sm.c[c][r] = acc[i][j][0]; sm.c[c + 1][r] = acc[i][j][1];\n"
      "        sm.c[c][r + 8] = acc[i][j][2]; sm.c[c + 1][r + 8] = acc[i][j][3];\n"
      "      }\n"
      "    %s;\n"
      "%s",
      MI, NJ, sync,
      S > 1 ? cg_fmt(cg, "    const float *part[%" PRId64 "]; /* the blocks' tiles, by rank */\n"
                         "#pragma unroll\n"
                         "    for (int r = 0; r < %" PRId64 "; r++) part[r] = gc_cluster_map(&sm.c[0][0], r);\n", S, S)
            : "");
  /* the tile's element (lm, ln + u) summed over the cluster's tiles, as `float v` */
  const char *tile = S > 1 ? cg_fmt(cg, "float v = part[0][(ln + u) * %" PRId64 " + lm];\n"
                                        "#pragma unroll\n"
                                        "        for (int r = 1; r < %" PRId64 "; r++) v += part[r][(ln + u) * %" PRId64 " + lm]",
                                    BM + 4, S, BM + 4)
                           : "float v = sm.c[ln + u][lm]";
  const char *add_bias = bias ? cg_fmt(cg, "        v += %s;\n", cg_load(cg, bias->type.dtype, DOM_F32, "in2[n + u]"))
                              : "";
  /* In channels last a thread stores V neighbouring channels of a pixel as one vector
   * (16 bytes of the GEMM's type), G threads a pixel's neighbouring vectors and the next
   * threads the next pixels (the tile's reads of shared memory conflict at most G ways),
   * where that leaves none of the cluster's threads idle; else a thread an element,
   * neighbouring threads neighbouring outputs. */
  int64_t V = 16 / (int64_t)dtype_size(t), G = BN / V >= 2 ? 2 : 1;
  if (v->cl && q->cout % V == 0 && BN % (V * G) == 0 && BM * BN / V >= S * MMA_THREADS) {
    buf_printf(b,
        "    for (int e = tid%s; e < %" PRId64 "; e += %" PRId64 ") { /* %" PRId64 " outputs of a pixel a thread */\n"
        "      const int lm = e / %" PRId64 " %% %" PRId64 ", ln = (e / %" PRId64 " * %" PRId64 " + e %% %" PRId64 ") * %" PRId64 ";\n"
        "      const idx_t m = m0 + lm;\n"
        "      const int n = n0 + ln;\n"
        "      if (m >= %" PRId64 " || n >= %" PRId64 ") continue;\n"
        "      const idx_t at = m * %" PRId64 " + n;\n"
        "      gc_vec<%s, %" PRId64 "> ov;\n"
        "#pragma unroll\n"
        "      for (int u = 0; u < %" PRId64 "; u++) {\n"
        "        %s;\n"
        "%s"
        "        const idx_t i = at + u;\n",
        S > 1 ? cg_fmt(cg, " + rank * %d", MMA_THREADS) : "", BM * BN / V, S * MMA_THREADS, V,
        G, BM, G * BM, G, G, V, M, q->cout, q->cout, cg_ctype(cg_out_dtype(cg, n)), V, V, tile,
        add_bias);
    cg_store_out_to(cg, n, "i", cg_store(cg, t, DOM_F32, "v"), "ov.e[u]", "        ");
    buf_printf(b, "      }\n      *(gc_vec<%s, %" PRId64 "> *)(out0 + at) = ov;\n    }\n    %s;\n  }\n}\n",
               cg_ctype(cg_out_dtype(cg, n)), V, sync);
  } else {
    buf_printf(b,
        "    for (int e = tid%s; e < %" PRId64 "; e += %" PRId64 ") { /* neighbouring threads: neighbouring outputs */\n"
        "      const int lm = %s, ln = %s, u = 0;\n"
        "      const idx_t m = m0 + lm;\n"
        "      const int n = n0 + ln;\n"
        "      if (m >= %" PRId64 " || n >= %" PRId64 ") continue;\n"
        "      const idx_t i = %s;\n"
        "      %s;\n"
        "%s",
        S > 1 ? cg_fmt(cg, " + rank * %d", MMA_THREADS) : "", BM * BN, S * MMA_THREADS,
        v->cl ? cg_fmt(cg, "e / %" PRId64, BN) : cg_fmt(cg, "e %% %" PRId64, BM),
        v->cl ? cg_fmt(cg, "e %% %" PRId64, BN) : cg_fmt(cg, "e / %" PRId64, BM), M, q->cout,
        v->cl ? cg_fmt(cg, "m * %" PRId64 " + n", q->cout)
              : cg_fmt(cg, "m / %" PRId64 " * %" PRId64 " + (idx_t)n * %" PRId64 " + m %% %" PRId64, OHW, q->cout * OHW, OHW, OHW),
        tile, add_bias);
    cg_store_out(cg, n, "i", cg_store(cg, t, DOM_F32, "v"), "      ");
    buf_printf(b, "    }\n    %s;\n  }\n}\n", sync);
  }
  int64_t clusters = cg->target->max_blocks / S;
  clusters = MT * NT < clusters ? MT * NT : clusters;
  cg_kernel_step(cg, n, name, (unsigned)(clusters * S), MMA_THREADS);
  return 0;
}

/* The loop over an implicit GEMM's tiles: with K split over the S blocks of a cluster,
 * each block's share of the taps [kb, ke) (KS a block) and the tiles a cluster at a time;
 * unsplit (with `bounds`, kb = 0 and ke = K declared too) a tile a block. */
static void mma_tile_loop(Cg *cg, int64_t S, int64_t KS, int64_t K, int64_t tiles, bool bounds) {
  Buf *b = &cg->src;
  if (S > 1)
    buf_printf(b,
        "  /* the cluster's blocks: rank r sums the taps [r * %" PRId64 ", (r + 1) * %" PRId64 ") and stores\n"
        "   * the r-th share of the tile, the partial tiles summed in rank order */\n"
        "  const int rank = (int)(blockIdx.x %% %" PRId64 "), kb = rank * %" PRId64 ", ke = kb + %" PRId64 " < %" PRId64 " ? kb + %" PRId64 " : %" PRId64 ";\n"
        "  for (idx_t tile = blockIdx.x / %" PRId64 "; tile < %" PRId64 "; tile += gridDim.x / %" PRId64 ") {\n",
        KS, KS, S, KS, KS, K, KS, K, S, tiles, S);
  else
    buf_printf(b, "%s  for (idx_t tile = blockIdx.x; tile < %" PRId64 "; tile += gridDim.x) {\n",
               bounds ? cg_fmt(cg, "  const int kb = 0, ke = %" PRId64 ";\n", K) : "", tiles);
}

/* Whether conv_mma loads A's taps as 16-byte vectors: in channels last, K runs over (kh, kw,
 * c), and 4 f32 or 8 16-bit channels of a pixel are one load when they are contiguous and
 * stored in the GEMM's type t; else one at a time, through a table. */
static bool mma_vectors(const ConvView *v, const ConvGeom *q, DType t) {
  return v->cl && q->xc == 1 && q->c % (t == DT_F32 ? 4 : 8) == 0 && v->src == t;
}

/* conv_mma's calls of its lambdas load(k, s) (step k's taps into registers, through table
 * s unless vec: then load(k)) and taps(k, s) (table s of step k; none when `none`: no
 * tables, or tables filled once) */
static const char *reg_load(Cg *cg, bool vec, const char *k, const char *s) {
  return vec ? cg_fmt(cg, "load(%s)", k) : cg_fmt(cg, "load(%s, %s)", k, s);
}

static const char *reg_taps(Cg *cg, bool none, const char *k, const char *s) {
  return none ? "" : cg_fmt(cg, "taps(%s, %s); ", k, s);
}

/* The kernel of configuration cf. A K step's taps come into registers while the warps
 * multiply the step before (a thread's KPT consecutive taps of row am of A, its pixel,
 * and EPB of row bn of B), then go to shared memory: into the other of two buffers where
 * two fit a block's static shared memory (the target's; one barrier a step), else into
 * the one buffer between two barriers. Taps that come one at a time (no vectors of VC
 * channels: the stems' 3 channels, NCHW, a prologue's f32 read through its transposes)
 * are read through a table of the step's taps in shared memory, each one's offset from a
 * pixel's window corner and its place in the window, which a warp fills a step ahead: a
 * tap then costs a table read, two adds, two compares and its load, where dividing out
 * its place (or walking to it) cost some twenty instructions. */
static int conv_mma(Cg *cg, const Node *n, const ConvView *v, const ConvGeom *q,
                    const MmaConfig *cf) {
  const Value *y = n->out[0];
  DType t = y->type.dtype, xt = v->src;
  int64_t M = q->nb * q->oh * q->ow, K = q->c * q->kh * q->kw, OHW = q->oh * q->ow;
  /* 8 warps as 4 x 2 over the tile */
  int64_t BN = cf->bn, NT = (q->cout + BN - 1) / BN, BM = cf->bm, MT = (M + BM - 1) / BM;
  int64_t MI = BM / 64, NJ = BN / 16, TPM = MMA_THREADS / BM, KPT = MMA_BK / TPM;
  int64_t EPB = BN * MMA_BK / MMA_THREADS, BPR = MMA_BK / EPB;
  /* split K: block rank r of a cluster of S sums the taps [r KS, (r + 1) KS) */
  int64_t steps = (K + MMA_BK - 1) / MMA_BK, S = cf->split;
  int64_t KS = (steps + S - 1) / S * MMA_BK;
  /* f32 on TF32: one tap a slot, rounded as stored (tf32 = 1) or split at the fragments */
  bool wide = t == DT_F32, split = wide && !attr_int(n, "tf32");
  int64_t P = wide ? 1 : 2, SL = MMA_BK / P, VC = 4 * P; /* taps a slot, slots a row, taps a vector */
  bool vec = mma_vectors(v, q, t);
  /* A's and B's buffers (rows padded by 4 slots), which the tile reuses, and the tap
   * tables: two buffers where they fit a block's static shared memory (two such blocks fit
   * every target's SM). The tables of a block whose taps are two steps at most (the stems'
   * 3x3 and 4x4 windows over 3 channels) are every tile's: filled once. */
  int64_t buf = (BM + BN) * (SL + 4) * 4, tile = BN * (BM + 4) * 4, table = vec ? 0 : 2 * MMA_BK * 16;
  int64_t NB = (2 * buf > tile ? 2 * buf : tile) + table <= cg->target->smem_block ? 2 : 1;
  const char *kend = S > 1 ? "ke" : cg_fmt(cg, "%" PRId64, K);
  bool fixed = !vec && S == 1 && steps <= 2, notaps = vec || fixed;
  const char *kind = !wide ? "" : split ? ", 3xTF32 (f32 accuracy)" : ", TF32";
  const char *note = cg_fmt(cg, "implicit GEMM on tensor cores: %" PRId64 " x %" PRId64 " x %" PRId64
                            " in %" PRId64 " x %" PRId64 " tiles%s%s%s%s", M, q->cout, K, BM, BN, kind,
                            v->cl ? ", channels last" : "", xt == t ? "" : ", the input rounded as loaded",
                            S > 1 ? cg_fmt(cg, ", K split over the %" PRId64 " blocks of a cluster", S) : "");
  if (split)
    cg->min_blocks = MMA_RESIDENT; /* at most 128 registers (3xTF32 needs ~140 unbounded) */
  cg->cluster = (int)S;
  cg->threads = MMA_THREADS;
  const char *name = cg_kernel_begin(cg, n, note);
  Buf *b = &cg->src;
  buf_printf(b, "  typedef %s idx_t;\n", cg_idx_type(cg, cg_max_numel(n)));
  buf_printf(b,
      "  typedef %s { struct { unsigned a[%" PRId64 "][%" PRId64 "][%" PRId64 "]; unsigned b[%" PRId64 "][%" PRId64 "][%" PRId64 "]; } ab; "
      "float c[%" PRId64 "][%" PRId64 "]; }%s gc_smem; /* A and B as 32-bit slots; the tile%s */\n"
      "  GC_BLOCK_SHARED(gc_smem, sm);\n",
      vec ? "union alignas(16)" : "struct alignas(16) { union", NB, BM, SL + 4, NB, BN, SL + 4, BN, BM + 4,
      vec ? "" : cg_fmt(cg, "; gc_vec<int, 4> tap[2][%d]; }", MMA_BK), vec ? "" : "; two steps' taps");
  buf_printf(b,
      "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;\n"
      "  const int wm = warp %% 4 * %" PRId64 ", wn = warp / 4 * %" PRId64 ";\n"
      "  const int am = tid %% %" PRId64 ", ak = tid / %" PRId64 " * %" PRId64 ", bn = tid / %" PRId64 ", bk = tid %% %" PRId64 " * %" PRId64 ";\n"
      "  const int lr = lane & 7, lm = lane >> 3; /* the row this lane gives ldmatrix, of matrix lm */\n",
      BM / 4, BN / 2, BM, BM, KPT, BPR, BPR, EPB);
  /* tap k (k0 + tid) into sm.tap[s][tid]: its channel c and its place r in the window
   * (channels last orders K as (kh, kw, c), NCHW as (c, kh, kw)), its offset in an image
   * from a pixel's window corner; a tap past the block's taps a place above every image */
  int64_t KHW = q->kh * q->kw;
  const char *tap = v->cl ? cg_fmt(cg, "c = k %% %" PRId64 ", r = k / %" PRId64, q->c, q->c)
                          : cg_fmt(cg, "c = k / %" PRId64 ", r = k %% %" PRId64, KHW, KHW);
  const char *ind = fixed ? "      " : "        ";
  const char *fill = cg_fmt(cg,
      "%sconst int k = k0 + tid, %s, dh = r / %" PRId64 " * %" PRId64 ", dw = r %% %" PRId64 " * %" PRId64 ";\n"
      "%ssm.tap[s][tid] = k < %s ? gc_vec<int, 4>{{%s + %s + %s, dh, dw, 0}} : gc_vec<int, 4>{{0, -(1 << 29), 0, 0}};\n",
      ind, tap, q->kw, q->dh, q->kw, q->dw, ind, kend,
      affine(cg, "c", q->xc, 0), affine(cg, "dh", q->xh, 0), affine(cg, "dw", q->xw, 0));
  if (fixed)
    buf_printf(b,
        "  /* the taps of both steps, every tile's (by a warp) */\n"
        "  if (tid < %d)\n"
        "    for (int s = 0, k0 = 0; s < 2; s++, k0 += %d) {\n"
        "%s"
        "    }\n"
        "  __syncthreads();\n",
        MMA_BK, MMA_BK, fill);
  mma_tile_loop(cg, S, KS, K, MT * NT, false);
  buf_printf(b,
      "    const idx_t m0 = tile %% %" PRId64 " * %" PRId64 ";\n"
      "    const int n0 = (int)(tile / %" PRId64 ") * %" PRId64 ";\n"
      "    /* the pixel whose taps this thread loads (row am of A), the weights' row bn */\n"
      "    const idx_t pm = m0 + am;\n"
      "    const bool mok = pm < %" PRId64 ", nok = n0 + bn < %" PRId64 ";\n"
      "    const int pr = mok ? (int)(pm %% %" PRId64 ") : 0;\n"
      "    const int ih0 = pr / %" PRId64 " * %" PRId64 " - %" PRId64 ", iw0 = pr %% %" PRId64 " * %" PRId64 " - %" PRId64 ";\n"
      "    const %s *xb = in0 + (mok ? pm / %" PRId64 " : 0) * %" PRId64 ";\n"
      "    const %s *wr = in1 + (idx_t)(nok ? n0 + bn : 0) * %" PRId64 ";\n",
      MT, BM, MT, BN, M, q->cout, OHW, q->ow, q->sh, q->ph, q->ow, q->sw, q->pw, cg_ctype(xt),
      OHW, q->xn, cg_ctype(t), K);
  const char *kbeg = S > 1 ? "kb" : "0";
  const char *ra;
  if (vec) {
    const char *at = cg_fmt(cg, "%s + %s + %s", affine(cg, "(idx_t)c", q->xc, 0),
                            affine(cg, "ih", q->xh, 0), affine(cg, "iw", q->xw, 0));
    buf_printf(b,
        "    /* %" PRId64 " channels of one tap (k a multiple of %" PRId64 ") as four slots, or zeros */\n"
        "    auto ldxv = [&](int k, unsigned *dst) {\n"
        "      const int %s, ih = ih0 + r / %" PRId64 " * %" PRId64 ", iw = iw0 + r %% %" PRId64 " * %" PRId64 ";\n"
        "      gc_load_slots<4>(dst, xb, %s, mok && k < %" PRId64 " && (unsigned)ih < %" PRId64 "u && (unsigned)iw < %" PRId64 "u);\n"
        "    };\n",
        VC, VC, tap, q->kw, q->dh, q->kw, q->dw, at, K, q->h, q->w);
    ra = cg_fmt(cg, "#pragma unroll\n      for (int j = 0; j < %" PRId64 "; j++) ldxv(k0 + ak + %" PRId64 " * j, ra + 4 * j);\n", KPT / VC, VC);
  } else {
    /* the value of a tap as loaded (f32, or 16-bit bits), and a pair's or a tap's slot */
    const char *vt = xt == t && !wide ? "unsigned" : "float";
    const char *ld = xt == t && !wide ? "xp[e.e[0]].bits" : "xp[e.e[0]]";
    const char *slot = wide ? "__float_as_uint(u[j])"
                     : xt != t ? cg_fmt(cg, "gc_f2%s2(u[2 * j], u[2 * j + 1])", t == DT_BF16 ? "bf" : "h")
                     : "u[2 * j] | u[2 * j + 1] << 16";
    if (!fixed)
      buf_printf(b,
          "    /* the taps k0 .. k0 + %d into table s (by a warp): each one's offset in an image from a\n"
          "     * pixel's window corner, and its place in the window; a tap past the block's taps a\n"
          "     * place above every image */\n"
          "    auto taps = [&](int k0, int s) {\n"
          "      if (tid < %d) {\n"
          "%s"
          "      }\n"
          "    };\n",
          MMA_BK - 1, MMA_BK, fill);
    buf_printf(b,
        "    /* the window corner (in the padding, before the image; a row past M's above every\n"
        "     * image), which the taps' offsets are from */\n"
        "    const %s *xp = gc_keep(xb + (%s + %s));\n"
        "    const int ihm = mok ? ih0 : -(1 << 29);\n"
        "    /* this thread's taps of table s (ak .. ak + %" PRId64 ") as slots, zeros outside the image and past K */\n"
        "    auto ldxs = [&](int s, unsigned *dst) {\n"
        "      %s u[%" PRId64 "];\n"
        "#pragma unroll\n"
        "      for (int j = 0; j < %" PRId64 "; j++) {\n"
        "        const gc_vec<int, 4> e = sm.tap[s][ak + j];\n"
        "        const int ih = ihm + e.e[1], iw = iw0 + e.e[2];\n"
        "        u[j] = (unsigned)ih < %" PRId64 "u && (unsigned)iw < %" PRId64 "u ? %s : 0;\n"
        "      }\n"
        "#pragma unroll\n"
        "      for (int j = 0; j < %" PRId64 "; j++) dst[j] = %s;\n"
        "    };\n",
        cg_ctype(xt), affine(cg, "ih0", q->xh, 0), affine(cg, "iw0", q->xw, 0), KPT - 1, vt, KPT, KPT, q->h, q->w, ld,
        KPT / P, slot);
    ra = "      ldxs(s, ra);\n";
  }
  /* a weight row's EPB taps as 16-byte (or 8-byte) vectors when K keeps them aligned */
  int64_t BW = EPB / P < 4 ? EPB / P : 4; /* slots a vector */
  bool wvec = K % EPB == 0;
  if (!wvec)
    buf_printf(b, "    auto ldw = [&](int k) -> unsigned { return nok && k < %" PRId64 " ? (unsigned)%s : 0u; };\n",
               K, wide ? "__float_as_uint(wr[k])" : "wr[k].bits");
  const char *rb = wvec ? cg_fmt(cg, "      for (int j = 0, k = k0 + bk; j < %" PRId64 "; j++, k += %" PRId64 ") "
                                     "gc_load_slots<%" PRId64 ">(rb + %" PRId64 " * j, wr, k, nok && k < %" PRId64 ");\n",
                                 EPB / P / BW, BW * P, BW, BW, K)
                        : load_slots(cg, "rb", "ldw", "k0 + bk", EPB / P, wide);
  /* load(k0, s): step k0's taps into registers (s: the table of its taps); store(sb): the
   * registers into buffer sb; taps(k0, s) fills a table */
  const char *cur = NB > 1 ? "s" : "0";
  buf_printf(b,
      "    unsigned ra[%" PRId64 "], rb[%" PRId64 "];\n"
      "    auto load = [&](int k0%s) {\n"
      "%s"
      "#pragma unroll\n"
      "%s"
      "    };\n"
      "    auto store = [&](int sb) {\n"
      "%s"
      "%s"
      "    };\n"
      "    float acc[%" PRId64 "][%" PRId64 "][4] = {};\n",
      KPT / P, EPB / P, vec ? "" : ", int s", ra, rb,
      store_slots(cg, "sm.ab.a[sb][am]", wide ? "ak" : "ak / 2", "ra", KPT / P, wide && !split),
      store_slots(cg, "sm.ab.b[sb][bn]", wide ? "bk" : "bk / 2", "rb", EPB / P, wide && !split),
      MI, NJ);
  const char *next = cg_fmt(cg, "k0 + %d", MMA_BK), *after = cg_fmt(cg, "k0 + %d", 2 * MMA_BK);
  /* step(k0, s): the products of step k0 (its taps in buffer s, its parity), the next
   * step's taps loaded meanwhile; two steps a turn of the loop, so that s is a constant
   * in each (the buffers' addresses too) */
  if (NB > 1) /* step k0 + 1's registers go to the other buffer after step k0's products */
    buf_printf(b,
        "    auto step = [&](int k0, int s) {\n"
        "      if (%s < %s) %s;\n",
        next, kend, reg_load(cg, vec, next, "s ^ 1"));
  else
    buf_printf(b,
        "    auto step = [&](int k0, int s) {\n"
        "      %sstore(0);\n"
        "      __syncthreads();\n"
        "      if (%s < %s) %s;\n",
        reg_taps(cg, notaps, next, "s ^ 1"), next, kend, reg_load(cg, vec, next, "s ^ 1"));
  buf_printf(b,
      "#pragma unroll\n"
      "      for (int kk = 0; kk < %" PRId64 "; kk += 8) { /* %s */\n"
      "        /* the fragments by ldmatrix: A's 16 rows as (rows, slots) +(0, 0) +(8, 0) +(0, 4)\n"
      "         * +(8, 4), two of B's 8 columns as +(0, 0) +(0, 4) +(8, 0) +(8, 4) */\n"
      "        unsigned fa[%" PRId64 "][4], fb[%" PRId64 " * 2]; /* B's column j: fb + 2 * j */\n"
      "#pragma unroll\n"
      "        for (int i = 0; i < %" PRId64 "; i++) gc_ldsm4(fa[i], &sm.ab.a[%s][wm + i * 16 + lr + (lm & 1) * 8][kk + (lm >> 1) * 4]);\n"
      "#pragma unroll\n"
      "        for (int j = 0; j < %" PRId64 "; j += 2) gc_ldsm4(fb + 2 * j, &sm.ab.b[%s][wn + j * 8 + lr + (lm >> 1) * 8][kk + (lm & 1) * 4]);\n",
      SL, wide ? "8 taps, one mma.m16n8k8" : "16 taps as 8 pairs, one mma.m16n8k16", MI, NJ, MI,
      cur, NJ, cur);
  if (split)
    buf_printf(b,
        "        /* each value as its TF32 rounding (in place) and the rest's (B's a column at a time) */\n"
        "        unsigned la[%" PRId64 "][4];\n"
        "#pragma unroll\n"
        "        for (int i = 0; i < %" PRId64 "; i++)\n"
        "#pragma unroll\n"
        "          for (int e = 0; e < 4; e++) la[i][e] = gc_tf32_split(fa[i][e]);\n",
        MI, MI);
  const char *mma = !wide ? cg_fmt(cg, "gc_mma_%s(acc[i][j], fa[i], fb + 2 * j);", t == DT_BF16 ? "bf16" : "f16")
                  : !split ? "gc_mma_tf32(acc[i][j], fa[i], fb + 2 * j);"
                  : "{\n"
                    "            float p[4] = {};\n"
                    "            gc_mma_tf32(p, la[i], fb + 2 * j); gc_mma_tf32(p, fa[i], lb); gc_mma_tf32(p, fa[i], fb + 2 * j);\n"
                    "            acc[i][j][0] += p[0]; acc[i][j][1] += p[1]; acc[i][j][2] += p[2]; acc[i][j][3] += p[3];\n"
                    "          }";
  buf_printf(b,
      "#pragma unroll\n"
      "        for (int j = 0; j < %" PRId64 "; j++) {\n"
      "%s"
      "#pragma unroll\n"
      "          for (int i = 0; i < %" PRId64 "; i++) %s\n"
      "        }\n"
      "      }\n"
      "%s"
      "      __syncthreads();\n"
      "    };\n",
      NJ, split ? "          const unsigned lb[2] = {gc_tf32_split(fb[2 * j]), gc_tf32_split(fb[2 * j + 1])};\n" : "",
      MI, mma,
      NB > 1 ? cg_fmt(cg, "      if (%s < %s) { store(s ^ 1); %s}\n", next, kend, reg_taps(cg, notaps, after, "s")) : "");
  if (!notaps)
    buf_printf(b, "    taps(%s, 0);\n    __syncthreads();\n", kbeg);
  buf_printf(b, "    %s;\n", reg_load(cg, vec, kbeg, "0"));
  if (NB > 1)
    buf_printf(b, "    %sstore(0);\n    __syncthreads();\n", reg_taps(cg, notaps, cg_fmt(cg, "%s + %d", kbeg, MMA_BK), "1"));
  buf_printf(b,
      "    for (int k0 = %s; k0 < %s; k0 += %d) {\n"
      "      step(k0, 0);\n"
      "      if (%s < %s) step(%s, 1);\n"
      "    }\n",
      kbeg, kend, 2 * MMA_BK, next, kend, next);
  return conv_mma_epilogue(cg, n, v, q, cf, name, MI, NJ);
}

/* The K steps of a pipelined kernel (its lambda load(stage, k) copies a step's tiles by
 * cp.async): steps 0 .. stages - 2 issued first, then for each step `it` of nk its copies
 * waited for and the block synchronized (the stage of step it - 1 free again), the copies
 * of step it + stages - 1 issued, and the step's body reading stage `st`, which the caller
 * writes before mma_pipeline_end. `k` formats load's second argument from a step's number
 * (one %s). */
static void mma_pipeline_begin(Cg *cg, int64_t stages, const char *nk, const char *k) {
  buf_printf(&cg->src,
      "#pragma unroll\n"
      "    for (int s = 0; s < %" PRId64 "; s++) {\n"
      "      if (s < %s) load(s, %s);\n"
      "      gc_cp_commit();\n"
      "    }\n"
      "    for (int it = 0; it < %s; it++) {\n"
      "      gc_cp_wait<%" PRId64 ">(); /* this thread's copies of step it have landed */\n"
      "      __syncthreads(); /* everyone's; and step it - 1's stage is free again */\n"
      "      if (it + %" PRId64 " < %s) load((it + %" PRId64 ") %% %" PRId64 ", %s);\n"
      "      gc_cp_commit();\n"
      "      const auto &st = sm.st[it %% %" PRId64 "];\n",
      stages - 1, nk, cg_fmt(cg, k, "s"), nk, stages - 2, stages - 1, nk, stages - 1, stages,
      cg_fmt(cg, k, cg_fmt(cg, "it + %" PRId64, stages - 1)), stages);
}

/* The end of mma_pipeline_begin's loop; the stages free for the epilogue's tile. */
static void mma_pipeline_end(Cg *cg) {
  buf_puts(&cg->src, "    }\n"
                     "    gc_cp_wait<0>();\n"
                     "    __syncthreads(); /* the stages are the tile's memory too */\n");
}

/* The pipelined kernel of configuration cf (async_fits): A's and B's tiles of ASYNC_BK
 * taps copied by cp.async, cf->stages steps in flight, into rows of 8 chunks of 16 bytes
 * (chunk c of row r at c ^ (r & 7), so that ldmatrix's 8 rows of a chunk hit every bank
 * once); 8 warps, WM x WN over the tile. A thread copies chunk tid % 8 of rows tid / 8 +
 * 32 j of each tile, the chunk's 8 channels of one tap of the row's pixel (the channels
 * a multiple of 8, no chunk spans two taps), zeros outside the image and past K. One
 * barrier a step: the step's copies waited for, the stage of the step before free again
 * for the copies of the step stages - 1 ahead. */
static int conv_mma_async(Cg *cg, const Node *n, const ConvView *v, const ConvGeom *q,
                          const MmaConfig *cf) {
  DType t = n->out[0]->type.dtype;
  int64_t M = q->nb * q->oh * q->ow, K = q->c * q->kh * q->kw, OHW = q->oh * q->ow;
  int64_t BM = cf->bm, BN = cf->bn, S = cf->split, ST = cf->stages;
  int64_t MT = (M + BM - 1) / BM, NT = (q->cout + BN - 1) / BN;
  int64_t WN = BN >= 128 || (BN == 64 && BM == 64) ? 4 : 2, WM = MMA_WARPS / WN;
  int64_t MI = BM / WM / 16, NJ = BN / WN / 8; /* a warp's m16 and n8 fragments */
  int64_t steps = (K + ASYNC_BK - 1) / ASYNC_BK, KS = (steps + S - 1) / S * ASYNC_BK;
  const char *note = cg_fmt(cg, "implicit GEMM on tensor cores: %" PRId64 " x %" PRId64 " x %" PRId64
                            " in %" PRId64 " x %" PRId64 " tiles, %" PRId64 " cp.async stages, channels last%s",
                            M, q->cout, K, BM, BN, ST,
                            S > 1 ? cg_fmt(cg, ", K split over the %" PRId64 " blocks of a cluster", S) : "");
  cg->min_blocks = MMA_RESIDENT;
  cg->cluster = (int)S;
  cg->threads = MMA_THREADS;
  const char *name = cg_kernel_begin(cg, n, note);
  Buf *b = &cg->src;
  buf_printf(b, "  typedef %s idx_t;\n", cg_idx_type(cg, cg_max_numel(n)));
  buf_printf(b,
      "  /* the stages of A's and B's %d taps as 32-bit slots (pairs); the tile */\n"
      "  typedef union alignas(128) { struct { unsigned a[%" PRId64 "][%d], b[%" PRId64 "][%d]; } st[%" PRId64 "]; "
      "float c[%" PRId64 "][%" PRId64 "]; } gc_smem;\n"
      "  GC_DYN_SHARED(gc_smem, sm);\n"
      "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;\n"
      "  const int wm = warp %% %" PRId64 " * %" PRId64 ", wn = warp / %" PRId64 " * %" PRId64 ";\n"
      "  const int lr = lane & 7, lm = lane >> 3; /* the row this lane gives ldmatrix, of matrix lm */\n"
      "  const int ck = tid & 7, cr = tid >> 3; /* the chunk and the first row this thread copies */\n",
      ASYNC_BK, BM, ASYNC_BK / 2, BN, ASYNC_BK / 2, ST, BN, BM + 4, WM, BM / WM, WM, BN / WN);
  mma_tile_loop(cg, S, KS, K, MT * NT, true);
  int64_t AQ = BM / 32, BQ = BN / 32;
  buf_printf(b,
      "    const idx_t m0 = tile %% %" PRId64 " * %" PRId64 ";\n"
      "    const int n0 = (int)(tile / %" PRId64 ") * %" PRId64 ";\n"
      "    /* the pixels of the rows cr + 32 j of A this thread copies: their windows' corners, their images' offsets */\n"
      "    int ih0[%" PRId64 "], iw0[%" PRId64 "];\n"
      "    idx_t xb[%" PRId64 "];\n"
      "#pragma unroll\n"
      "    for (int j = 0; j < %" PRId64 "; j++) {\n"
      "      const idx_t pm = m0 + cr + 32 * j;\n"
      "      const int pr = pm < %" PRId64 " ? (int)(pm %% %" PRId64 ") : 0;\n"
      "      ih0[j] = pm < %" PRId64 " ? pr / %" PRId64 " * %" PRId64 " - %" PRId64 " : -(1 << 30); /* past M: outside */\n"
      "      iw0[j] = pr %% %" PRId64 " * %" PRId64 " - %" PRId64 ";\n"
      "      xb[j] = (pm < %" PRId64 " ? pm / %" PRId64 " : 0) * %" PRId64 ";\n"
      "    }\n",
      MT, BM, MT, BN, AQ, AQ, AQ, AQ, M, OHW, M, q->ow, q->sh, q->ph, q->ow, q->sw,
      q->pw, M, OHW, q->xn);
  buf_printf(b,
      "    /* taps k0 .. k0 + %d into stage s: this thread's chunk is tap r's channels c .. c + 7 */\n"
      "    auto load = [&](int s, int k0) {\n"
      "      const int k = k0 + 8 * ck, c = k %% %" PRId64 ", r = k / %" PRId64 ";\n"
      "      const int dh = r / %" PRId64 " * %" PRId64 ", dw = r %% %" PRId64 " * %" PRId64 ";\n"
      "#pragma unroll\n"
      "      for (int j = 0; j < %" PRId64 "; j++) {\n"
      "        const int row = cr + 32 * j, ih = ih0[j] + dh, iw = iw0[j] + dw;\n"
      "        gc_cp16(&sm.st[s].a[row][(ck ^ (row & 7)) * 4], in0, xb[j] + %s + %s + c,\n"
      "                k < ke && (unsigned)ih < %" PRId64 "u && (unsigned)iw < %" PRId64 "u);\n"
      "      }\n"
      "#pragma unroll\n"
      "      for (int j = 0; j < %" PRId64 "; j++) {\n"
      "        const int row = cr + 32 * j;\n"
      "        gc_cp16(&sm.st[s].b[row][(ck ^ (row & 7)) * 4], in1, (idx_t)(n0 + row) * %" PRId64 " + k, n0 + row < %" PRId64 " && k < ke);\n"
      "      }\n"
      "    };\n",
      ASYNC_BK, q->c, q->c, q->kw, q->dh, q->kw, q->dw, AQ,
      affine(cg, "(idx_t)ih", q->xh, 0), affine(cg, "iw", q->xw, 0), q->h, q->w, BQ, K, q->cout);
  buf_printf(b,
      "    float acc[%" PRId64 "][%" PRId64 "][4] = {};\n"
      "    const int nk = (ke - kb + %d) / %d;\n",
      MI, NJ, ASYNC_BK - 1, ASYNC_BK);
  mma_pipeline_begin(cg, ST, "nk", cg_fmt(cg, "kb + %d * (%%s)", ASYNC_BK));
  buf_printf(b,
      "#pragma unroll\n"
      "      for (int kk = 0; kk < %d; kk++) { /* 16 taps as 8 pairs (chunks 2 kk, 2 kk + 1), one mma.m16n8k16 */\n"
      "        unsigned fa[%" PRId64 "][4], fb[%" PRId64 " * 2]; /* B's column j: fb + 2 * j */\n"
      "#pragma unroll\n"
      "        for (int i = 0; i < %" PRId64 "; i++) {\n"
      "          const int r = wm + i * 16 + lr + (lm & 1) * 8, c = 2 * kk + (lm >> 1);\n"
      "          gc_ldsm4(fa[i], &st.a[r][(c ^ (r & 7)) * 4]);\n"
      "        }\n"
      "#pragma unroll\n"
      "        for (int j = 0; j < %" PRId64 "; j += 2) {\n"
      "          const int r = wn + j * 8 + lr + (lm >> 1) * 8, c = 2 * kk + (lm & 1);\n"
      "          gc_ldsm4(fb + 2 * j, &st.b[r][(c ^ (r & 7)) * 4]);\n"
      "        }\n"
      "#pragma unroll\n"
      "        for (int j = 0; j < %" PRId64 "; j++)\n"
      "#pragma unroll\n"
      "          for (int i = 0; i < %" PRId64 "; i++) gc_mma_%s(acc[i][j], fa[i], fb + 2 * j);\n"
      "      }\n",
      ASYNC_BK / 16, MI, NJ, MI, NJ, NJ, MI, t == DT_BF16 ? "bf16" : "f16");
  mma_pipeline_end(cg);
  cg->shared_bytes = (unsigned)async_smem(cf);
  return conv_mma_epilogue(cg, n, v, q, cf, name, MI, NJ);
}

/* The implicit GEMM as a choice among mma_family's kernels, which the runtime times;
 * with --variants=1 (or a family of one) the default alone. */
static int gen_conv_mma(Cg *cg, const Node *n, const ConvView *v, const ConvGeom *q) {
  MmaConfig c[MMA_MAX_KERNELS];
  int64_t M = q->nb * q->oh * q->ow, K = q->c * q->kh * q->kw;
  /* (a target whose shared memory holds no two stages of the smallest tile keeps the
   * register kernel) */
  bool async = async_fits(cg, v, q, n->out[0]->type.dtype) && async_stages(cg, 64, 32);
  int nc = mma_family(cg, M, q->cout, K, async, !async && !mma_vectors(v, q, n->out[0]->type.dtype), c);
  nc = nc < cg->variants ? nc : cg->variants;
  if (nc == 1)
    return async ? conv_mma_async(cg, n, v, q, &c[0]) : conv_mma(cg, n, v, q, &c[0]);
  const char *label = cg_fmt(cg, "node %d: implicit GEMM %" PRId64 " x %" PRId64 " x %" PRId64
                             ", variants (tile/K split):", n->id, M, q->cout, K);
  for (int k = 0; k < nc; k++)
    label = cg_fmt(cg, "%s%s %" PRId64 "x%" PRId64 "/%" PRId64, label, k ? "," : "", c[k].bm,
                   c[k].bn, c[k].split);
  int ch = cg_choice_begin(cg, n, label), rc = 0;
  for (int k = 0; k < nc && !rc; k++) {
    cg_variant_begin(cg, ch);
    rc = async ? conv_mma_async(cg, n, v, q, &c[k]) : conv_mma(cg, n, v, q, &c[k]);
    cg_variant_end(cg, ch);
  }
  if (!rc)
    cg_choice_end(cg, ch);
  return rc;
}

/* ---------------------------------------------------------------- conv */

/* The loops over a convolution's taps for output pixel (o0, ..), `depth` levels in: q_j
 * over the kernel's dim j < dims, p_j = o_j * stride - pad + q_j * dilation, the taps
 * outside x skipped. *xoff gains each p_j times x's stride, *woff (unless NULL) each q_j
 * times w's. conv_taps_end closes them. */
static void conv_taps(Cg *cg, const ConvView *v, const Win *win, int dims, int depth,
                      const char **xoff, const char **woff) {
  Buf *b = &cg->src;
  for (int j = 0; j < dims; j++) {
    indent(b, depth + j);
    buf_printf(b, "for (idx_t q%d = 0; q%d < %" PRId64 "; q%d++) {\n", j, j, win->kernel[j], j);
    indent(b, depth + 1 + j);
    buf_printf(b, "const idx_t p%d = %s + %s;\n", j,
               affine(cg, cg_fmt(cg, "o%d", j), win->stride[j], -win->pad[j]),
               affine(cg, cg_fmt(cg, "q%d", j), win->dil[j], 0));
    indent(b, depth + 1 + j);
    buf_printf(b, "if (p%d < 0 || p%d >= %" PRId64 ") continue;\n", j, j, v->xd[2 + j]);
    *xoff = cg_fmt(cg, "%s + %s", *xoff, affine(cg, cg_fmt(cg, "p%d", j), v->xs[2 + j], 0));
    if (woff)
      *woff = cg_fmt(cg, "%s + %s", *woff, affine(cg, cg_fmt(cg, "q%d", j), v->ws[2 + j], 0));
  }
}

static void conv_taps_end(Buf *b, int k, int depth) {
  for (int j = k - 1; j >= 0; j--) {
    indent(b, depth + j);
    buf_puts(b, "}\n");
  }
}

/* A grouped convolution in channels last whose groups' channels come in 16-byte vectors
 * (RegNetY's groups of 16), when no implicit GEMM runs it: a thread computes a strip of
 * TW neighbouring outputs along the last spatial dim for one output channel, its group's
 * input channels and its weights' row (channels innermost too) loaded 16 bytes at a time,
 * V channels a load (8 in bf16/f16, 4 in f32), each weight vector loaded once for the
 * strip. Threads of neighbouring output channels (a group's) read the same input vectors.
 * The strip's width is a family timed at create (1: a thread per output, which fills the
 * GPU best at batch 1). conv_vec_fits says whether the convolution is of that form. */
static bool conv_vec_fits(const Node *n, const ConvView *v, int64_t group) {
  const Value *w = n->in[1], *y = n->out[0];
  DType t = y->type.dtype, xt = n->in[0]->type.dtype;
  int64_t V = t == DT_F32 ? 4 : 8;
  if (!v->cl || group == 1 || (t != DT_F32 && t != DT_BF16 && t != DT_F16) || xt != t ||
      w->type.dtype != t || v->src != t || v->xs[1] != 1 || v->ws[1] != 1 || v->wd[1] % V ||
      v->xs[0] % V || v->ws[0] % V || v->k < 1 || cg_numel(y) < 1)
    return false;
  for (int j = 0; j < v->k; j++)
    if (v->xs[2 + j] % V || v->ws[2 + j] % V)
      return false;
  return true;
}

static int gen_conv_vec(Cg *cg, const Node *n, const ConvView *v, const Win *win,
                        int64_t group, int64_t tw) {
  const Value *bias = n->nin > 2 ? n->in[2] : NULL, *y = n->out[0];
  DType t = y->type.dtype;
  int k = v->k, last = k - 1;
  int64_t M = v->yd[1], CG = v->wd[1], MG = M / group, V = t == DT_F32 ? 4 : 8, NKER = 1;
  int64_t OW = v->yd[2 + last], W = v->xd[2 + last], nstrip = (OW + tw - 1) / tw;
  int64_t KW = win->kernel[last], st = win->stride[last], dl = win->dil[last];
  for (int j = 0; j < k; j++)
    NKER *= win->kernel[j];
  Dom dom = cg_dom(t);
  const char *T = cg_dom_type(dom);
  int64_t count = cg_numel(y) / OW * nstrip;
  const char *note = cg_fmt(cg, "direct: a thread %" PRId64 " output%s, %" PRId64 " channels x %"
                            PRId64 " taps each, %" PRId64 " channels a load, channels last",
                            tw, tw == 1 ? "" : "s along the last dim", CG, NKER, V);
  const char *name = cg_kernel_begin(cg, n, note);
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, count);
  buf_printf(b, "    idx_t r = i;\n    const idx_t m = r %% %" PRId64 "; r /= %" PRId64 ";\n",
             M, M);
  buf_printf(b, "    const idx_t ow0 = r %% %" PRId64 " * %" PRId64 ", row = r / %" PRId64
             ";\n    r = row;\n", nstrip, tw, nstrip);
  for (int j = last - 1; j >= 0; j--)
    buf_printf(b, "    const idx_t o%d = r %% %" PRId64 "; r /= %" PRId64 ";\n", j, v->yd[2 + j],
               v->yd[2 + j]);
  buf_printf(b, "    typedef gc_vec<%s, %" PRId64 "> vec_t;\n", cg_ctype(t), V);
  buf_printf(b, "    %s acc[%" PRId64 "];\n", T, tw);
  buf_printf(b, "#pragma unroll\n    for (int s = 0; s < %" PRId64 "; s++) acc[s] = %s;\n", tw,
             bias ? cg_load(cg, bias->type.dtype, dom, "in2[m]") : cg_fmt(cg, "(%s)0", T));
  buf_printf(b, "    const idx_t xb = r * %" PRId64 " + %s, wb = m * %" PRId64 ";\n", v->xs[0],
             affine(cg, MG == 1 ? "m" : cg_fmt(cg, "m / %" PRId64, MG), CG, 0), v->ws[0]);
  const char *xoff = "xb", *woff = "wb";
  conv_taps(cg, v, win, last, 2, &xoff, &woff);
  const char *in = cg_fmt(cg, "%*s", 2 * (2 + last), "");
  buf_printf(b, "%sfor (idx_t q = 0; q < %" PRId64 "; q++) {\n", in, KW);
  buf_printf(b, "%s  for (idx_t c = 0; c < %" PRId64 "; c += %" PRId64 ") {\n", in, CG, V);
  buf_printf(b, "%s    const vec_t wv = *(const vec_t *)(in1 + %s + %s + c);\n", in, woff,
             affine(cg, "q", v->ws[2 + last], 0));
  buf_printf(b, "%s    %s wf[%" PRId64 "];\n#pragma unroll\n%s    for (int u = 0; u < %" PRId64
             "; u++) wf[u] = %s;\n", in, T, V, in, V, cg_load(cg, t, dom, "wv.e[u]"));
  buf_printf(b, "#pragma unroll\n%s    for (int s = 0; s < %" PRId64 "; s++) {\n", in, tw);
  buf_printf(b, "%s      const idx_t p = %s + %s;\n", in,
             affine(cg, "(ow0 + s)", st, -win->pad[last]), affine(cg, "q", dl, 0));
  buf_printf(b, "%s      if (p < 0 || p >= %" PRId64 ") continue;\n", in, W);
  buf_printf(b, "%s      const vec_t xv = *(const vec_t *)(in0 + %s + %s + c);\n", in, xoff,
             affine(cg, "p", v->xs[2 + last], 0));
  buf_printf(b, "#pragma unroll\n%s      for (int u = 0; u < %" PRId64 "; u++) acc[s] += %s * wf[u];\n",
             in, V, cg_load(cg, t, dom, "xv.e[u]"));
  buf_printf(b, "%s    }\n%s  }\n%s}\n", in, in, in);
  conv_taps_end(b, last, 2);
  buf_printf(b, "#pragma unroll\n    for (int s = 0; s < %" PRId64 "; s++) {\n", tw);
  buf_printf(b, "      if (ow0 + s >= %" PRId64 ") break;\n", OW);
  buf_printf(b, "      const idx_t o = (row * %" PRId64 " + ow0 + s) * %" PRId64 " + m;\n", OW, M);
  cg_store_out(cg, n, "o", cg_store(cg, t, dom, "acc[s]"), "      ");
  buf_puts(b, "    }\n");
  cg_loop_end(cg, n, name, count);
  return 0;
}

/* A depthwise convolution in channels last (a channel a group, one output channel each:
 * MobileNet's, EfficientNet's and ConvNeXt's), when no implicit GEMM runs it. A thread
 * computes a strip of TW neighbouring outputs along the last spatial dim for V
 * neighbouring channels (16 bytes of them where the channels and x's strides allow): it
 * loads each input pixel under the strip's window once, V channels a load, and adds it
 * into every output of the strip that one of the taps reaches from it (the taps known
 * when the kernel is written, the loops unrolled), and stores its V outputs of a pixel as
 * one vector. The weights are [C, taps...], a channel's taps together, which a warp of
 * neighbouring channels would read a cache line a lane (ConvNeXt-T's 7 x 7 layers at
 * batch 32 took 600 us each on an H200 that way): a block takes CB vectors of
 * neighbouring channels, copies their weights into shared memory as f32, reading them in
 * their order (a lane a tap: copied a tap a lane, a block's loads of EfficientNet's 5 x 5
 * weights touched a sector each and made its layers 10x slower than their bytes), tap by
 * tap; a thread reads a row of taps' V weights as vectors into registers, where each
 * serves the strip's outputs (read from shared memory for each output, they made
 * ConvNeXt-T's 7 x 7 layers bound by shared memory). Its threads are CB channel vectors
 * by strips. The strip's width is the family gen_conv times at create (1 is a thread per
 * output pixel; wider shares more loads with fewer threads). */
enum { DW_MAX_COLS = 32 }; /* input pixels a strip's window spans at most */

typedef struct DwConfig {
  int64_t V, CV, chunks, CB, SPB, tw, nker;
} DwConfig;

static bool depthwise_config(const Cg *cg, const Node *n, const ConvView *v, const Win *win,
                             int64_t group, int64_t tw, int64_t vbytes, DwConfig *c) {
  DType t = n->out[0]->type.dtype;
  int64_t C = v->xd[1], M = v->yd[1], size = (int64_t)dtype_size(t);
  if (!v->cl || group != C || M != C || v->wd[1] != 1 || v->src != n->in[0]->type.dtype ||
      (t != DT_F32 && t != DT_BF16 && t != DT_F16) || n->in[1]->type.dtype != t ||
      n->in[0]->type.dtype != t || v->xs[1] != 1 || v->k < 1 || cg->target->block < 32 ||
      cg_numel(n->out[0]) < 1)
    return false;
  *c = (DwConfig){.V = vbytes / size > 0 ? vbytes / size : 1, .tw = tw, .nker = 1};
  for (int j = 0; j < v->k; j++)
    c->nker *= win->kernel[j];
  for (;;) { /* the widest vector that the channels and x's strides keep aligned */
    bool ok = C % c->V == 0 && v->xs[0] % c->V == 0;
    for (int j = 0; j < v->k; j++)
      ok = ok && v->xs[2 + j] % c->V == 0;
    if (ok || c->V == 1)
      break;
    c->V /= 2;
  }
  /* the strip's window is an unrolled loop, a row of taps registers: both short */
  int last = v->k - 1;
  int64_t kw = win->kernel[last], st = win->stride[last], dl = win->dil[last];
  if (kw > DW_MAX_COLS || st > DW_MAX_COLS || dl > DW_MAX_COLS ||
      (tw - 1) * st + (kw - 1) * dl + 1 > DW_MAX_COLS)
    return false;
  /* chunks of at most 32 channel vectors whose weights fit half the shared memory */
  c->CV = C / c->V;
  int64_t most = cg->target->smem_block / 2 / (int64_t)sizeof(float) / c->nker / c->V;
  if (most < 1)
    return false;
  c->chunks = (c->CV + 31) / 32;
  if (c->chunks < (c->CV + most - 1) / most)
    c->chunks = (c->CV + most - 1) / most;
  c->CB = (c->CV + c->chunks - 1) / c->chunks;
  c->SPB = cg->target->block / c->CB;
  return true;
}

static int gen_conv_depthwise(Cg *cg, const Node *n, const ConvView *v, const Win *win,
                              const DwConfig *c) {
  const Value *w = n->in[1], *bias = n->nin > 2 ? n->in[2] : NULL, *y = n->out[0];
  DType t = y->type.dtype, ot = cg_out_dtype(cg, n);
  int k = v->k, last = k - 1;
  int64_t M = v->yd[1], V = c->V, CB = c->CB, SPB = c->SPB, TW = c->tw;
  int64_t OW = v->yd[2 + last], W = v->xd[2 + last], nstrip = (OW + TW - 1) / TW;
  int64_t KW = win->kernel[last], st = win->stride[last], dl = win->dil[last];
  int64_t cols = (TW - 1) * st + (KW - 1) * dl + 1, strips = v->yd[0] * nstrip;
  for (int j = 0; j < last; j++)
    strips *= v->yd[2 + j];
  Dom dom = cg_dom(t);
  const char *T = cg_dom_type(dom);
  /* at most a wave of blocks (each then copies its weights once for more strips) */
  int64_t wave = (int64_t)cg->target->sms * (cg->target->threads_sm / cg->target->block);
  if (wave > cg->target->max_blocks)
    wave = cg->target->max_blocks;
  int64_t groups = (strips + SPB - 1) / SPB, most = wave / c->chunks;
  int64_t grid = c->chunks * (groups < most ? groups : most > 0 ? most : 1);
  const char *note = cg_fmt(cg, "direct, depthwise: a thread %" PRId64 " output%s of %" PRId64
                            " channels, a block %" PRId64 " channel vectors by %" PRId64
                            " strips, their %" PRId64 " taps' weights in shared memory, "
                            "channels last", TW, TW == 1 ? "" : "s along the last dim",
                            V, CB, SPB, c->nker);
  const char *name = cg_kernel_begin(cg, n, note);
  Buf *b = &cg->src;
  int64_t numel = cg_numel(y), top = numel > cg_max_numel(n) ? numel : cg_max_numel(n);
  buf_printf(b, "  typedef %s idx_t;\n", cg_idx_type(cg, top));
  buf_printf(b, "  typedef gc_vec<%s, %" PRId64 "> vec_t;\n", cg_ctype(t), V);
  buf_printf(b, "  typedef gc_vec<%s, %" PRId64 "> ovec_t;\n", cg_ctype(ot), V);
  buf_printf(b, "  __shared__ gc_vec<float, %" PRId64 "> wsm[%" PRId64 "][%" PRId64 "];\n", V,
             c->nker, CB);
  buf_printf(b, "  const int cl = threadIdx.x %% %" PRId64 ", sl = threadIdx.x / %" PRId64 ";\n",
             CB, CB);
  buf_puts(b, "  idx_t loaded = -1;\n");
  /* jobs of CB channel vectors by SPB strips, grid-stride; the grid (a multiple of the
   * chunks) keeps a block on one chunk, whose weights it copies once */
  buf_printf(b, "  for (idx_t job = blockIdx.x; job < %" PRId64 "; job += gridDim.x) {\n",
             c->chunks * groups);
  buf_printf(b, "    const idx_t chunk = job %% %" PRId64 ", sg = job / %" PRId64 " * %" PRId64
             " + sl, cv = chunk * %" PRId64 " + cl;\n", c->chunks, c->chunks, SPB, CB);
  buf_puts(b, "    if (chunk != loaded) { /* the taps' weights, tap q's channels a row */\n");
  buf_puts(b, "      __syncthreads();\n");
  buf_printf(b, "      for (int e = threadIdx.x; e < %" PRId64 "; e += blockDim.x) {\n",
             c->nker * CB * V);
  /* a channel's taps by neighbouring threads: the weights as stored, read in order */
  buf_printf(b, "        const int ch = e / %" PRId64 ", t = e %% %" PRId64 ";\n        int q = t;\n"
             "        const idx_t m = chunk * %" PRId64 " + ch;\n        idx_t wo = m * %" PRId64
             ";\n", c->nker, c->nker, CB * V, v->ws[0]);
  for (int j = k - 1; j >= 0; j--)
    buf_printf(b, "        wo += q %% %" PRId64 " * %" PRId64 "; q /= %" PRId64 ";\n",
               win->kernel[j], v->ws[2 + j], win->kernel[j]);
  buf_printf(b, "        wsm[t][ch / %" PRId64 "].e[ch %% %" PRId64 "] = m < %" PRId64
             " ? %s : 0.0f;\n", V, V, M, cg_load(cg, w->type.dtype, DOM_F32, "in1[wo]"));
  buf_puts(b, "      }\n      __syncthreads();\n      loaded = chunk;\n    }\n");
  buf_printf(b, "    if (sl >= %" PRId64 " || cv >= %" PRId64 " || sg >= %" PRId64 ") continue;\n",
             SPB, c->CV, strips);
  buf_printf(b, "    const idx_t m0 = cv * %" PRId64 ", ow0 = sg %% %" PRId64 " * %" PRId64
             ", row = sg / %" PRId64 ";\n    idx_t r = row;\n", V, nstrip, TW, nstrip);
  for (int j = last - 1; j >= 0; j--)
    buf_printf(b, "    const idx_t o%d = r %% %" PRId64 "; r /= %" PRId64 ";\n", j, v->yd[2 + j],
               v->yd[2 + j]);
  buf_printf(b, "    %s acc[%" PRId64 "][%" PRId64 "];\n", T, TW, V);
  buf_printf(b, "#pragma unroll\n    for (int u = 0; u < %" PRId64 "; u++) {\n", V);
  buf_printf(b, "      const %s b0 = %s;\n", T,
             bias ? cg_load(cg, bias->type.dtype, dom, "in2[m0 + u]") : cg_fmt(cg, "(%s)0", T));
  buf_printf(b, "#pragma unroll\n      for (int s = 0; s < %" PRId64 "; s++) acc[s][u] = b0;\n    }\n",
             TW);
  buf_printf(b, "    const idx_t xb = r * %" PRId64 " + m0;\n", v->xs[0]);
  const char *xoff = "xb", *tap = "0"; /* the row of wsm of the outer taps, times KW */
  conv_taps(cg, v, win, last, 2, &xoff, NULL);
  for (int j = 0; j < last; j++)
    tap = cg_fmt(cg, "(%s + q%d) * %" PRId64, j ? tap : "0", j, win->kernel[j + 1]);
  const char *in = cg_fmt(cg, "%*s", 2 * (2 + last), "");
  /* the row's weights in registers: each serves the strip's TW outputs */
  buf_printf(b, "%sgc_vec<float, %" PRId64 "> wr[%" PRId64 "];\n", in, V, KW);
  buf_printf(b, "#pragma unroll\n%sfor (int q = 0; q < %" PRId64 "; q++) wr[q] = wsm[%s + q][cl];\n",
             in, KW, tap);
  buf_printf(b, "#pragma unroll\n%sfor (int j = 0; j < %" PRId64 "; j++) {\n", in, cols);
  buf_printf(b, "%s  const idx_t p = %s + j;\n", in,
             affine(cg, "ow0", st, -win->pad[last]));
  buf_printf(b, "%s  if (p < 0 || p >= %" PRId64 ") continue;\n", in, W);
  buf_printf(b, "%s  const vec_t xv = *(const vec_t *)(in0 + %s + %s);\n", in, xoff,
             affine(cg, "p", v->xs[2 + last], 0));
  buf_printf(b, "%s  %s xf[%" PRId64 "];\n#pragma unroll\n%s  for (int u = 0; u < %" PRId64
             "; u++) xf[u] = %s;\n", in, T, V, in, V, cg_load(cg, t, dom, "xv.e[u]"));
  buf_printf(b, "#pragma unroll\n%s  for (int s = 0; s < %" PRId64 "; s++) {\n", in, TW);
  buf_printf(b, "%s    const int d = j - s * %" PRId64 ";\n", in, st);
  buf_printf(b, "%s    if (d < 0 || d %% %" PRId64 " || d / %" PRId64 " >= %" PRId64 ") continue;\n",
             in, dl, dl, KW);
  buf_printf(b, "#pragma unroll\n%s    for (int u = 0; u < %" PRId64 "; u++) acc[s][u] += xf[u] * "
             "wr[d / %" PRId64 "].e[u];\n", in, V, dl);
  buf_printf(b, "%s  }\n%s}\n", in, in);
  conv_taps_end(b, last, 2);
  buf_printf(b, "#pragma unroll\n    for (int s = 0; s < %" PRId64 "; s++) {\n", TW);
  buf_printf(b, "      if (ow0 + s >= %" PRId64 ") break;\n", OW);
  buf_printf(b, "      const idx_t at = (row * %" PRId64 " + ow0 + s) * %" PRId64 " + m0;\n", OW, M);
  buf_puts(b, "      ovec_t ov;\n");
  buf_printf(b, "#pragma unroll\n      for (int u = 0; u < %" PRId64 "; u++) {\n", V);
  buf_puts(b, "        const idx_t i = at + u;\n");
  cg_store_out_to(cg, n, "i", cg_store(cg, t, dom, "acc[s][u]"), "ov.e[u]", "        ");
  buf_puts(b, "      }\n      *(ovec_t *)(out0 + at) = ov;\n    }\n  }\n}\n");
  cg_kernel_step(cg, n, name, (unsigned)grid, (unsigned)cg->target->block);
  return 0;
}

/* A depthwise convolution of 16-bit data in channels last over one or two spatial dims,
 * tiled: the strips above read their windows' rows from global memory (L1), a row's
 * loads waiting on the last row's math, which left ConvNeXt-T's 7 x 7 layers at batch 32
 * ~10x off both the bytes and the FMAs (an H100: the FMA pipe at ~23%, warps stalled on
 * those loads). Here a block takes a job, a tile of TH x TW outputs of one image for a
 * chunk of CH channels: it copies the tile's input, with the windows' halo, into shared
 * memory by cp.async, 16 bytes of channels a copy and zeros outside x (the padding: no
 * bounds in the math), every copy of the tile in flight at once; then each thread
 * computes a patch of RH x RW outputs (several patches where the tile has more than the
 * block's workers) of VT neighbouring channels from shared memory, every one of its
 * channels' taps' weights in registers as f32 (copied once a chunk through the same
 * shared memory, read in their order), each input vector read once for the patch and
 * added into every output of the patch that a tap reaches from it (the loops unrolled,
 * the taps known when the kernel is written), f32 accumulators, its VT outputs of a pixel
 * stored as one vector through the epilogue. A block's threads are CL channel lanes (VT
 * channels each) by P workers; the blocks, at most DW_RESIDENT an SM (their registers:
 * weights and accumulators), walk the jobs chunk by chunk in a grid-stride loop, a grid
 * of a multiple of the chunks keeping a block on one chunk. VT (8, 4, 2 or 1: its taps'
 * weights at most half a thread's registers at that residency), the patch (its
 * accumulators at most `acc` registers: a quarter or an eighth of them, the family's two
 * variants) and the tile (the larger of its input and the chunk's weights in a block's
 * share of the SM's shared memory, dynamic) are those of the lowest cost below, a count
 * of a thread's instructions: the waves of jobs times a job's copies and each worker's
 * patches' shared memory loads, conversions, FMAs and stores (not fitted to timings: the
 * family's timing at create chooses among the strips and these). */
enum {
  DW_RESIDENT = 2,  /* blocks of the tiled depthwise kernel an SM runs at once */
  DW_TILE_MAX = 16, /* patches along a tile's side at most */
  DW_PATCH_MAX = 8, /* outputs along a patch's side at most */
};

typedef struct DwTile {
  int64_t KH, KW, SH, SW, DH, DWL, PH, PW, H, W, OH, OW, XH, XW; /* 1-d: H = OH = KH = 1 */
  int64_t VT, CL, CH, chunks, P;  /* channels a thread, lanes, a chunk's channels, workers */
  int64_t RH, RW, PHN, PWN;       /* a patch's outputs, a tile's patches */
  int64_t TH, TW, IH, IW, tiles_h, tiles_w, smem, grid;
} DwTile;

/* The registers a thread of the tiled depthwise kernel may have at DW_RESIDENT blocks an
 * SM. */
static int64_t dw_thread_regs(const Target *tg) {
  int64_t regs = tg->regs_sm / DW_RESIDENT / tg->block;
  return regs < tg->regs_thread ? regs : tg->regs_thread;
}

/* The input rows and columns a patch of c's outputs reads: its windows' extent. */
static void dw_patch_extent(const DwTile *c, int64_t *rows, int64_t *cols) {
  *rows = (c->RH - 1) * c->SH + (c->KH - 1) * c->DH + 1;
  *cols = (c->RW - 1) * c->SW + (c->KW - 1) * c->DWL + 1;
}

/* The instructions of a thread for the convolution with c's patch and tile (the cost the
 * tile is chosen by), or -1 where the tile does not fit shared memory. */
static int64_t dw_tile_cost(const Cg *cg, const DwTile *c, int64_t nb, int64_t budget) {
  int64_t tile = c->IH * c->IW * c->CH * 2, wts = c->KH * c->KW * c->CH * 4;
  if ((tile > wts ? tile : wts) > budget)
    return -1;
  int64_t slots = (int64_t)cg->target->sms * DW_RESIDENT, block = cg->target->block;
  int64_t jobs = nb * c->tiles_h * c->tiles_w * c->chunks, waves = (jobs + slots - 1) / slots;
  int64_t np = c->PHN * c->PWN, rounds = (np + c->P - 1) / c->P;
  int64_t rows, cols;
  dw_patch_extent(c, &rows, &cols);
  int64_t patch = rows * cols * (1 + c->VT) + c->RH * c->RW * c->VT * (c->KH * c->KW + 2);
  int64_t copies = (c->IH * c->IW * (c->CH / 8) + block - 1) / block;
  return waves * (rounds * patch + copies * 32 + 256);
}

static bool dw_tile_config(const Cg *cg, const Node *n, const ConvView *v, const Win *win,
                           int64_t group, int64_t acc, DwTile *c) {
  DType t = n->out[0]->type.dtype;
  int64_t C = v->xd[1], M = v->yd[1];
  const Target *tg = cg->target;
  if (!v->cl || group != C || M != C || v->wd[1] != 1 || v->src != t || (t != DT_BF16 && t != DT_F16) ||
      n->in[1]->type.dtype != t || n->in[0]->type.dtype != t || v->xs[1] != 1 || v->k < 1 ||
      v->k > 2 || C % 8 || v->xs[0] % 8 || !(tg->insn & TARGET_CP_ASYNC) || cg_numel(n->out[0]) < 1 ||
      tg->block < 32 || (int64_t)tg->block * DW_RESIDENT > tg->threads_sm)
    return false;
  for (int j = 0; j < v->k; j++)
    if (v->xs[2 + j] % 8)
      return false;
  int a = v->k - 1; /* the last spatial dim; a 1-d convolution's rows are one */
  *c = (DwTile){.KH = 1, .SH = 1, .DH = 1, .H = 1, .OH = 1};
  if (v->k == 2) {
    c->KH = win->kernel[0], c->SH = win->stride[0], c->DH = win->dil[0], c->PH = win->pad[0];
    c->H = v->xd[2], c->OH = v->yd[2], c->XH = v->xs[2];
  }
  c->KW = win->kernel[a], c->SW = win->stride[a], c->DWL = win->dil[a], c->PW = win->pad[a];
  c->W = v->xd[2 + a], c->OW = v->yd[2 + a], c->XW = v->xs[2 + a];
  /* half of a thread's registers for the weights */
  int64_t regs = dw_thread_regs(tg), taps = c->KH * c->KW;
  if (taps > regs / 2)
    return false;
  /* a block's share of the SM's shared memory at DW_RESIDENT blocks an SM (less what the
   * SM reserves for each), up to what a block may have */
  int64_t budget = tg->smem_sm / DW_RESIDENT - (tg->smem_sm - tg->smem_block_optin);
  budget = budget < tg->smem_block_optin ? budget : tg->smem_block_optin;
  int64_t best = -1;
  DwTile b = *c;
  for (int64_t vt = 8; vt >= 1; vt /= 2) {
    if (vt * taps > regs / 2 || vt > acc)
      continue;
    /* lanes of VT channels: whole chunks of at most a warp's lanes, a chunk's channels
     * whole 16-byte vectors */
    DwTile l = *c;
    int64_t lanes = C / vt, per = 8 / vt;
    l.VT = vt;
    l.chunks = (lanes + 31) / 32;
    l.CL = (lanes + l.chunks - 1) / l.chunks;
    l.CL = (l.CL + per - 1) / per * per;
    l.chunks = (lanes + l.CL - 1) / l.CL;
    l.CH = l.CL * vt;
    l.P = tg->block / l.CL;
    for (int64_t rh = 1; rh <= DW_PATCH_MAX && rh <= l.OH; rh++)
      for (int64_t rw = 1; rw <= DW_PATCH_MAX && rw <= l.OW; rw++) {
        if (rh * rw * vt > acc)
          continue;
        for (int64_t ph = 1; ph <= DW_TILE_MAX && (ph - 1) * rh < l.OH; ph++)
          for (int64_t pw = 1; pw <= DW_TILE_MAX && (pw - 1) * rw < l.OW && ph * pw <= 4 * l.P; pw++) {
            DwTile e = l;
            e.RH = rh, e.RW = rw, e.PHN = ph, e.PWN = pw, e.TH = ph * rh, e.TW = pw * rw;
            e.IH = (e.TH - 1) * e.SH + (e.KH - 1) * e.DH + 1;
            e.IW = (e.TW - 1) * e.SW + (e.KW - 1) * e.DWL + 1;
            e.tiles_h = (e.OH + e.TH - 1) / e.TH, e.tiles_w = (e.OW + e.TW - 1) / e.TW;
            int64_t cost = dw_tile_cost(cg, &e, v->yd[0], budget);
            if (cost >= 0 && (best < 0 || cost < best))
              best = cost, b = e;
          }
      }
  }
  if (best < 0)
    return false;
  *c = b;
  int64_t tile = c->IH * c->IW * c->CH * 2, wts = taps * c->CH * 4;
  c->smem = ((tile > wts ? tile : wts) + 15) / 16 * 16;
  int64_t jobs = v->yd[0] * c->tiles_h * c->tiles_w, slots = (int64_t)tg->sms * DW_RESIDENT / c->chunks;
  slots = slots > 0 ? slots : 1;
  c->grid = c->chunks * (jobs < slots ? jobs : slots);
  if (c->grid > tg->max_blocks) /* still a multiple of the chunks where one fits */
    c->grid = tg->max_blocks >= c->chunks ? tg->max_blocks / c->chunks * c->chunks : tg->max_blocks;
  return true;
}

static int gen_conv_dwtile(Cg *cg, const Node *n, const ConvView *v, const DwTile *c) {
  const Value *w = n->in[1], *bias = n->nin > 2 ? n->in[2] : NULL, *y = n->out[0];
  DType t = y->type.dtype, ot = cg_out_dtype(cg, n);
  int64_t M = v->yd[1], VT = c->VT, CL = c->CL, CH = c->CH, taps = c->KH * c->KW;
  int64_t np = c->PHN * c->PWN, jobs = c->chunks * v->yd[0] * c->tiles_h * c->tiles_w;
  int64_t rows, cols;
  dw_patch_extent(c, &rows, &cols);
  const char *in = v->k == 2 ? cg_fmt(cg, "%" PRId64 " x %" PRId64 " ", c->TH, c->TW)
                              : cg_fmt(cg, "%" PRId64 " ", c->TW);
  const char *note = cg_fmt(cg, "direct, depthwise, tiled: a block %soutputs of %" PRId64
                            " channels, their input (%" PRId64 " x %" PRId64 " pixels) in "
                            "shared memory by cp.async; a thread %" PRId64 " x %" PRId64
                            " outputs of %" PRId64 " channel%s, its %" PRId64 " taps' "
                            "weights in registers, channels last", in, CH, c->IH, c->IW,
                            c->RH, c->RW, VT, VT == 1 ? "" : "s", taps);
  cg->min_blocks = DW_RESIDENT;
  const char *name = cg_kernel_begin(cg, n, note);
  Buf *b = &cg->src;
  int64_t numel = cg_numel(y), top = numel > cg_max_numel(n) ? numel : cg_max_numel(n);
  const char *ct = cg_ctype(t);
  buf_printf(b, "  typedef %s idx_t;\n", cg_idx_type(cg, top));
  buf_printf(b, "  typedef gc_vec<%s, %" PRId64 "> vec_t;\n", ct, VT);
  buf_printf(b, "  typedef gc_vec<%s, %" PRId64 "> ovec_t;\n", cg_ctype(ot), VT);
  buf_printf(b, "  /* a chunk's weights [taps][%" PRId64 "] as f32, then a job's input [%" PRId64
             "][%" PRId64 "][%" PRId64 "] */\n", CH, c->IH, c->IW, CH);
  buf_printf(b, "  typedef struct { gc_vec<float, 4> v[%" PRId64 "]; } gc_smem;\n", c->smem / 16);
  buf_printf(b, "  GC_DYN_SHARED(gc_smem, sm);\n  float *const wsm = (float *)sm.v;\n  %s *const tile "
             "= (%s *)sm.v;\n", ct, ct);
  buf_printf(b, "  const int cl = threadIdx.x %% %" PRId64 ", wk = threadIdx.x / %" PRId64 ";\n",
             CL, CL);
  buf_printf(b, "  float wr[%" PRId64 "][%" PRId64 "];\n  idx_t loaded = -1;\n", taps, VT);
  buf_printf(b, "  for (idx_t job = blockIdx.x; job < %" PRId64 "; job += gridDim.x) {\n", jobs);
  buf_printf(b, "    const idx_t chunk = job %% %" PRId64 ", tj = job / %" PRId64 ", c0 = chunk * %"
             PRId64 ";\n", c->chunks, c->chunks, CH);
  buf_printf(b, "    const int ow0 = (int)(tj %% %" PRId64 ") * %" PRId64 ", oh0 = (int)(tj / %"
             PRId64 " %% %" PRId64 ") * %" PRId64 ";\n", c->tiles_w, c->TW, c->tiles_w,
             c->tiles_h, c->TH);
  buf_printf(b, "    const idx_t img = tj / %" PRId64 ";\n", c->tiles_w * c->tiles_h);
  buf_puts(b, "    __syncthreads(); /* the last job's reads of shared memory are done */\n");
  buf_puts(b, "    if (chunk != loaded) { /* the chunk's weights, read in their order */\n");
  buf_printf(b, "      for (int e = threadIdx.x; e < %" PRId64 "; e += blockDim.x) {\n", CH * taps);
  buf_printf(b, "        const int ch = e / %" PRId64 ", q = e %% %" PRId64 ";\n", taps, taps);
  buf_puts(b, "        const idx_t m = c0 + ch;\n");
  buf_printf(b, "        wsm[q * %" PRId64 " + ch] = m < %" PRId64 " ? %s : 0.0f;\n", CH, M,
             cg_load(cg, w->type.dtype, DOM_F32,
                     cg_fmt(cg, "in1[m * %" PRId64 " + %s%s]", v->ws[0],
                            v->k == 2 ? cg_fmt(cg, "q / %" PRId64 " * %" PRId64 " + ", c->KW, v->ws[2]) : "",
                            affine(cg, v->k == 2 ? cg_fmt(cg, "q %% %" PRId64, c->KW) : "q", v->ws[1 + v->k], 0))));
  buf_puts(b, "      }\n      __syncthreads();\n");
  buf_printf(b, "#pragma unroll\n      for (int q = 0; q < %" PRId64 "; q++)\n#pragma unroll\n"
             "        for (int u = 0; u < %" PRId64 "; u++) wr[q][u] = wsm[q * %" PRId64
             " + cl * %" PRId64 " + u];\n", taps, VT, CH, VT);
  buf_puts(b, "      __syncthreads();\n      loaded = chunk;\n    }\n");
  buf_printf(b, "    /* the input under the tile: rows from oh0 * %" PRId64 " - %" PRId64
             ", columns from ow0 * %" PRId64 " - %" PRId64 ", zeros outside x */\n",
             c->SH, c->PH, c->SW, c->PW);
  buf_printf(b, "    for (int e = threadIdx.x; e < %" PRId64 "; e += blockDim.x) {\n",
             c->IH * c->IW * (CH / 8));
  buf_printf(b, "      const int cv = e %% %" PRId64 ", px = e / %" PRId64 ";\n", CH / 8, CH / 8);
  buf_printf(b, "      const int ih = %s, iw = %s;\n",
             affine(cg, cg_fmt(cg, "oh0 * %" PRId64 " + px / %" PRId64, c->SH, c->IW), 1, -c->PH),
             affine(cg, cg_fmt(cg, "ow0 * %" PRId64 " + px %% %" PRId64, c->SW, c->IW), 1, -c->PW));
  buf_puts(b, "      const idx_t ch = c0 + cv * 8;\n");
  buf_printf(b, "      gc_cp16(tile + e * 8, in0, img * %" PRId64 " + %s%s + ch, ch < %" PRId64
             " && (unsigned)ih < %" PRId64 "u && (unsigned)iw < %" PRId64 "u);\n", v->xs[0],
             v->k == 2 ? cg_fmt(cg, "(idx_t)ih * %" PRId64 " + ", c->XH) : "",
             affine(cg, "(idx_t)iw", c->XW, 0), M, c->H, c->W);
  buf_puts(b, "    }\n    gc_cp_commit();\n    gc_cp_wait<0>();\n    __syncthreads();\n");
  buf_printf(b, "    const idx_t m0 = c0 + cl * %" PRId64 ";\n", VT);
  buf_printf(b, "    if (wk >= %" PRId64 " || m0 >= %" PRId64 ") continue;\n", c->P, M);
  buf_printf(b, "    for (int pi = wk; pi < %" PRId64 "; pi += %" PRId64 ") {\n", np, c->P);
  buf_printf(b, "      const int pr = pi / %" PRId64 " * %" PRId64 ", pc = pi %% %" PRId64 " * %"
             PRId64 "; /* the patch's first output in the tile */\n", c->PWN, c->RH, c->PWN, c->RW);
  buf_printf(b, "      float acc[%" PRId64 "][%" PRId64 "][%" PRId64 "];\n", c->RH, c->RW, VT);
  buf_printf(b, "#pragma unroll\n      for (int u = 0; u < %" PRId64 "; u++) {\n", VT);
  buf_printf(b, "        const float b0 = %s;\n",
             bias ? cg_load(cg, bias->type.dtype, DOM_F32, "in2[m0 + u]") : "0.0f");
  buf_printf(b, "#pragma unroll\n        for (int r = 0; r < %" PRId64 "; r++)\n#pragma unroll\n"
             "          for (int s = 0; s < %" PRId64 "; s++) acc[r][s][u] = b0;\n      }\n",
             c->RH, c->RW);
  buf_printf(b, "      const vec_t *const px = (const vec_t *)tile + (%s * %" PRId64 " + %s) * %"
             PRId64 " + cl;\n", affine(cg, "pr", c->SH, 0), c->IW, affine(cg, "pc", c->SW, 0),
             CH / VT);
  buf_printf(b, "#pragma unroll\n      for (int ir = 0; ir < %" PRId64 "; ir++)\n", rows);
  buf_printf(b, "#pragma unroll\n        for (int j = 0; j < %" PRId64 "; j++) {\n", cols);
  buf_printf(b, "          const vec_t xv = px[(ir * %" PRId64 " + j) * %" PRId64 "];\n", c->IW,
             CH / VT);
  buf_printf(b, "          float xf[%" PRId64 "];\n#pragma unroll\n          for (int u = 0; u < %"
             PRId64 "; u++) xf[u] = %s;\n", VT, VT, cg_load(cg, t, DOM_F32, "xv.e[u]"));
  buf_printf(b, "#pragma unroll\n          for (int r = 0; r < %" PRId64 "; r++) {\n", c->RH);
  buf_printf(b, "            const int dr = ir - r * %" PRId64 ";\n", c->SH);
  buf_printf(b, "            if (dr < 0 || dr %% %" PRId64 " || dr / %" PRId64 " >= %" PRId64
             ") continue;\n", c->DH, c->DH, c->KH);
  buf_printf(b, "#pragma unroll\n            for (int s = 0; s < %" PRId64 "; s++) {\n", c->RW);
  buf_printf(b, "              const int d = j - s * %" PRId64 ";\n", c->SW);
  buf_printf(b, "              if (d < 0 || d %% %" PRId64 " || d / %" PRId64 " >= %" PRId64
             ") continue;\n", c->DWL, c->DWL, c->KW);
  buf_printf(b, "#pragma unroll\n              for (int u = 0; u < %" PRId64 "; u++) acc[r][s][u]"
             " += xf[u] * wr[dr / %" PRId64 " * %" PRId64 " + d / %" PRId64 "][u];\n", VT, c->DH,
             c->KW, c->DWL);
  buf_puts(b, "            }\n          }\n        }\n");
  buf_printf(b, "#pragma unroll\n      for (int r = 0; r < %" PRId64 "; r++) {\n", c->RH);
  buf_printf(b, "        const int oh = oh0 + pr + r;\n        if (oh >= %" PRId64 ") break;\n",
             c->OH);
  buf_printf(b, "#pragma unroll\n        for (int s = 0; s < %" PRId64 "; s++) {\n", c->RW);
  buf_printf(b, "          const int ow = ow0 + pc + s;\n          if (ow >= %" PRId64 ") break;\n",
             c->OW);
  buf_printf(b, "          const idx_t at = ((img * %" PRId64 " + oh) * %" PRId64 " + ow) * %" PRId64
             " + m0;\n", c->OH, c->OW, M);
  buf_puts(b, "          ovec_t ov;\n");
  buf_printf(b, "#pragma unroll\n          for (int u = 0; u < %" PRId64 "; u++) {\n", VT);
  buf_puts(b, "            const idx_t i = at + u;\n");
  cg_store_out_to(cg, n, "i", cg_store(cg, t, DOM_F32, "acc[r][s][u]"), "ov.e[u]", "            ");
  buf_puts(b, "          }\n          *(ovec_t *)(out0 + at) = ov;\n        }\n      }\n    }\n  }\n}\n");
  cg->shared_bytes = (unsigned)c->smem;
  cg_kernel_step(cg, n, name, (unsigned)c->grid, (unsigned)cg->target->block);
  return 0;
}

/* y[b, m, o] = bias[m] + sum over the group's channels c and the taps q of
 * x[b, g * CG + c, o * stride - pad + q * dilation] * w[m, c, q], taps outside x
 * skipped: a thread per output. */
static int conv_direct(Cg *cg, const Node *n, const ConvView *v, const Win *win,
                       int64_t group) {
  const Value *w = n->in[1], *bias = n->nin > 2 ? n->in[2] : NULL, *y = n->out[0];
  int k = v->k;
  int64_t C = v->xd[1], M = v->yd[1], CG = v->wd[1], MG = M / group, NKER = 1;
  for (int j = 0; j < k; j++)
    NKER *= win->kernel[j];
  Dom dom = cg_dom(y->type.dtype);
  const char *T = cg_dom_type(dom);
  int64_t numel = cg_numel(y);
  const char *note = cg_fmt(cg, "direct: a thread per output, %" PRId64 " channel%s x %" PRId64 " taps each%s%s",
                            CG, CG == 1 ? "" : "s", NKER, group == C && CG == 1 ? " (depthwise)" : "",
                            v->cl ? ", channels last" : "");
  const char *name = cg_kernel_begin(cg, n, note);
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, numel);
  emit_unravel(cg, y, v->cl, "m", "b");
  buf_printf(b, "    %s acc = %s;\n", T, bias ? cg_load(cg, bias->type.dtype, dom, "in2[m]") : cg_fmt(cg, "(%s)0", T));
  buf_printf(b, "    const idx_t xb = b * %" PRId64 "%s, wb = m * %" PRId64 ";\n", v->xs[0],
             group == 1 ? "" : cg_fmt(cg, " + %s", affine(cg, MG == 1 ? "m" : cg_fmt(cg, "m / %" PRId64, MG), CG * v->xs[1], 0)),
             v->ws[0]);
  buf_printf(b, "    for (idx_t c = 0; c < %" PRId64 "; c++) {\n", CG);
  const char *xoff = cg_fmt(cg, "xb + %s", affine(cg, "c", v->xs[1], 0));
  const char *woff = cg_fmt(cg, "wb + %s", affine(cg, "c", v->ws[1], 0));
  conv_taps(cg, v, win, k, 3, &xoff, &woff);
  DType xt = n->in[0]->type.dtype;
  const char *xe = cg_fmt(cg, "in0[%s]", xoff);
  if (v->src != xt) /* the prologue's cast: the source rounded to x's type */
    xe = cg_store(cg, xt, dom, cg_load(cg, v->src, dom, xe));
  indent(b, 3 + k);
  buf_printf(b, "acc += %s * %s;\n", cg_load(cg, xt, dom, xe),
             cg_load(cg, w->type.dtype, dom, cg_fmt(cg, "in1[%s]", woff)));
  conv_taps_end(b, k, 3);
  buf_puts(b, "    }\n");
  cg_store_out(cg, n, "i", cg_store(cg, y->type.dtype, dom, "acc"), "    ");
  cg_loop_end(cg, n, name, numel);
  return 0;
}

/* ---------------------------------------------------------------- grouped, on tensor cores */

/* A grouped convolution in channels last on tensor cores: each group an implicit GEMM of
 * its Cg input and Cog output channels, a block's BN output channels BN / Cog whole
 * groups. A K step is one tap: A's tile the block's pixels times its groups' CB = BN /
 * Cog * Cg input channels at that tap, B's its BN outputs' Cg weights there; a warp's
 * columns take the A fragments of their group's channels. Copied by cp.async, stages in
 * flight as conv_mma_async, rows padded by 16 bytes (ldmatrix's 8 rows in 8 bank groups).
 * The pixels' windows (base, corner) are computed once a tile into shared memory. Needs
 * 16-bit data read as stored, Cg and Cog multiples of 16, weights [cout][taps][Cg]. */
static bool grouped_fits(const Cg *cg, const Node *n, const ConvView *v, int64_t group,
                         ConvGeom *q) {
  DType t = n->out[0]->type.dtype;
  if ((t != DT_BF16 && t != DT_F16) || group < 2 || !conv_vec_fits(n, v, group) ||
      !(cg->target->insn & TARGET_CP_ASYNC) || !conv_geom_fill(n, v, q))
    return false;
  int64_t cg_in = q->c / group, cog = q->cout / group, taps = q->kh * q->kw;
  bool packed = v->ws[0] == taps * cg_in &&
                (v->k == 1 ? v->ws[2] == cg_in : v->ws[3] == cg_in && v->ws[2] == q->kw * cg_in);
  return cg_in % 16 == 0 && cog % 16 == 0 && cog <= 128 && packed && q->xc == 1;
}

/* The grouped kernel's stages for a BM x BN tile (pipeline_stages). */
static int64_t grouped_stages(const Cg *cg, int64_t bm, int64_t bn, int64_t cgi, int64_t cog) {
  int64_t cb = bn / cog * cgi; /* and the pixels' table, 16 bytes a row */
  return pipeline_stages(cg, bm * (cb + 8) * 2 + bn * (cgi + 8) * 2, bn * (bm + 4) * 4, bm * 16);
}

static int64_t grouped_smem(const MmaConfig *c, int64_t cgi, int64_t cog) {
  int64_t cb = c->bn / cog * cgi;
  int64_t st = c->stages * (c->bm * (cb + 8) * 2 + c->bn * (cgi + 8) * 2);
  int64_t tile = c->bn * (c->bm + 4) * 4;
  return (st > tile ? st : tile) + c->bm * 16;
}

/* The grouped kernels' family into c[] (at most `most`): tiles of BM 128 or 64 by BN 128,
 * 64 or 32 (a multiple of Cog, and BN 32 only with BM 128: a warp's 32 columns), the
 * default first: BN the smallest that covers the output channels or 128, BM 128 where its
 * tiles fill every SM's two slots; then the others that fit. */
static int grouped_family(const Cg *cg, const ConvGeom *q, int64_t group, MmaConfig *c,
                          int most) {
  static const int64_t tiles[][2] = {{128, 128}, {64, 128}, {128, 64}, {64, 64}, {128, 32}};
  int64_t cgi = q->c / group, cog = q->cout / group, M = q->nb * q->oh * q->ow;
  int64_t slots = cg->target->sms * MMA_RESIDENT;
  int nc = 0;
  int64_t bn = 128;
  while (bn / 2 >= cog && bn / 2 >= q->cout && bn > 32)
    bn /= 2;
  int64_t bm = (M + 127) / 128 * ((q->cout + bn - 1) / bn) >= slots ? 128 : 64;
  if (bn == 32)
    bm = 128;
  MmaConfig d = {bm, bn, 1, grouped_stages(cg, bm, bn, cgi, cog)};
  if (bn % cog == 0 && d.stages)
    c[nc++] = d;
  for (size_t i = 0; i < sizeof tiles / sizeof tiles[0] && nc < most; i++) {
    MmaConfig e = {tiles[i][0], tiles[i][1], 1, grouped_stages(cg, tiles[i][0], tiles[i][1], cgi, cog)};
    if (e.bn % cog || !e.stages || (e.bm == d.bm && e.bn == d.bn) || (e.bn > 32 && q->cout <= e.bn / 2) ||
        (e.bm > 64 && M <= 64))
      continue;
    c[nc++] = e;
  }
  return nc;
}

static int conv_grouped_mma(Cg *cg, const Node *n, const ConvView *v, const ConvGeom *q,
                            int64_t group, const MmaConfig *cf) {
  DType t = n->out[0]->type.dtype;
  int64_t M = q->nb * q->oh * q->ow, OHW = q->oh * q->ow, taps = q->kh * q->kw;
  int64_t cgi = q->c / group, cog = q->cout / group, BM = cf->bm, BN = cf->bn, ST = cf->stages;
  int64_t CB = BN / cog * cgi, MT = (M + BM - 1) / BM, NT = (q->cout + BN - 1) / BN;
  int64_t WN = BN / 32, WM = MMA_WARPS / WN, WC = BN / WN; /* a warp's 32 columns */
  int64_t MI = BM / WM / 16, NJ = WC / 8, GW = WC >= cog ? WC / cog : 1, NJG = NJ / GW;
  int64_t CPR = CB / 8, CPB = cgi / 8; /* 16-byte chunks of a row of A, of B */
  int64_t AQ = (BM * CPR + MMA_THREADS - 1) / MMA_THREADS, BQ = (BN * CPB + MMA_THREADS - 1) / MMA_THREADS;
  const char *note = cg_fmt(cg, "grouped implicit GEMM on tensor cores: %" PRId64 " groups of %" PRId64 " x %" PRId64
                            " x %" PRId64 " in %" PRId64 " x %" PRId64 " tiles (%" PRId64 " groups a tile), a tap a step, %" PRId64
                            " cp.async stages, channels last", group, M, cog, taps * cgi, BM, BN, BN / cog, ST);
  cg->min_blocks = MMA_RESIDENT;
  cg->threads = MMA_THREADS;
  const char *name = cg_kernel_begin(cg, n, note);
  Buf *b = &cg->src;
  buf_printf(b, "  typedef %s idx_t;\n", cg_idx_type(cg, cg_max_numel(n)));
  buf_printf(b,
      "  /* the stages of A (pixels x the tile's groups' %" PRId64 " channels of a tap) and B (outputs x their\n"
      "   * group's %" PRId64 " weights there) as pairs, rows padded by 16 bytes; the tile; each pixel's\n"
      "   * image offset and window corner (h, w), or h far outside past the last pixel */\n"
      "  typedef struct { union alignas(128) { struct { unsigned a[%" PRId64 "][%" PRId64 "], b[%" PRId64 "][%" PRId64 "]; } st[%" PRId64 "]; "
      "float c[%" PRId64 "][%" PRId64 "]; }; int4 px[%" PRId64 "]; } gc_smem;\n"
      "  GC_DYN_SHARED(gc_smem, sm);\n"
      "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;\n"
      "  const int wm = warp %% %" PRId64 " * %" PRId64 ", wn = warp / %" PRId64 " * %" PRId64 ";\n"
      "  const int lr = lane & 7, lm = lane >> 3; /* the row this lane gives ldmatrix, of matrix lm */\n"
      "  for (idx_t tile = blockIdx.x; tile < %" PRId64 "; tile += gridDim.x) {\n"
      "    const idx_t m0 = tile %% %" PRId64 " * %" PRId64 ";\n"
      "    const int n0 = (int)(tile / %" PRId64 ") * %" PRId64 ", c0 = n0 / %" PRId64 " * %" PRId64 "; /* the tile's first input channel */\n"
      "    for (int r = tid; r < %" PRId64 "; r += %d) {\n"
      "      const idx_t pm = m0 + r;\n"
      "      const int pr = pm < %" PRId64 " ? (int)(pm %% %" PRId64 ") : 0;\n"
      "      sm.px[r] = make_int4((int)((pm < %" PRId64 " ? pm / %" PRId64 " : 0) * %" PRId64 "), pm < %" PRId64 " ? pr / %" PRId64 " * %" PRId64 " - %" PRId64 " : -(1 << 30),\n"
      "                           pr %% %" PRId64 " * %" PRId64 " - %" PRId64 ", 0);\n"
      "    }\n"
      "    __syncthreads();\n",
      CB, cgi, BM, CB / 2 + 4, BN, cgi / 2 + 4, ST, BN, BM + 4, BM,
      WM, BM / WM, WM, WC, MT * NT, MT, BM, MT, BN, cog, cgi, BM, MMA_THREADS,
      M, OHW, M, OHW, q->xn, M, q->ow, q->sh, q->ph, q->ow, q->sw, q->pw);
  buf_printf(b,
      "    /* tap s's A and B into stage st: chunk e of A is row e / %" PRId64 ", channels 8 (e %% %" PRId64 ") on */\n"
      "    auto load = [&](int st, int s) {\n"
      "      const int dh = s / %" PRId64 " * %" PRId64 ", dw = s %% %" PRId64 " * %" PRId64 ";\n"
      "#pragma unroll\n"
      "      for (int j = 0; j < %" PRId64 "; j++) {\n"
      "        const int e = tid + %d * j, row = e / %" PRId64 ", ch = e %% %" PRId64 " * 8;\n"
      "        if (row >= %" PRId64 ") break;\n"
      "        const int4 p = sm.px[row];\n"
      "        const int ih = p.y + dh, iw = p.z + dw;\n"
      "        gc_cp16(&sm.st[st].a[row][ch / 2], in0, (idx_t)p.x + %s + %s + c0 + ch,\n"
      "                c0 + ch < %" PRId64 " && (unsigned)ih < %" PRId64 "u && (unsigned)iw < %" PRId64 "u);\n"
      "      }\n"
      "#pragma unroll\n"
      "      for (int j = 0; j < %" PRId64 "; j++) {\n"
      "        const int e = tid + %d * j, row = e / %" PRId64 ", ch = e %% %" PRId64 " * 8;\n"
      "        if (row >= %" PRId64 ") break;\n"
      "        gc_cp16(&sm.st[st].b[row][ch / 2], in1, (idx_t)(n0 + row) * %" PRId64 " + s * %" PRId64 " + ch, n0 + row < %" PRId64 ");\n"
      "      }\n"
      "    };\n",
      CPR, CPR, q->kw, q->dh, q->kw, q->dw, AQ, MMA_THREADS, CPR, CPR, BM,
      affine(cg, "(idx_t)ih", q->xh, 0), affine(cg, "iw", q->xw, 0), q->c, q->h, q->w,
      BQ, MMA_THREADS, CPB, CPB, BN, taps * cgi, cgi, q->cout);
  buf_printf(b,
      "    float acc[%" PRId64 "][%" PRId64 "][4] = {};\n", MI, NJ);
  mma_pipeline_begin(cg, ST, cg_fmt(cg, "%" PRId64, taps), "%s");
  buf_printf(b,
      "#pragma unroll\n"
      "      for (int kk = 0; kk < %" PRId64 "; kk++) /* 16 channels of the group, one mma.m16n8k16 */\n"
      "#pragma unroll\n"
      "        for (int q = 0; q < %" PRId64 "; q++) { /* the warp's groups */\n"
      "          const int gl = (wn + q * %" PRId64 ") / %" PRId64 "; /* the group's place in the tile */\n"
      "          unsigned fa[%" PRId64 "][4];\n"
      "#pragma unroll\n"
      "          for (int i = 0; i < %" PRId64 "; i++)\n"
      "            gc_ldsm4(fa[i], &st.a[wm + i * 16 + lr + (lm & 1) * 8][(gl * %" PRId64 " + kk * 16 + (lm >> 1) * 8) / 2]);\n"
      "#pragma unroll\n"
      "          for (int j = 0; j < %" PRId64 "; j += 2) {\n"
      "            unsigned fb[4];\n"
      "            gc_ldsm4(fb, &st.b[wn + (q * %" PRId64 " + j) * 8 + lr + (lm >> 1) * 8][(kk * 16 + (lm & 1) * 8) / 2]);\n"
      "#pragma unroll\n"
      "            for (int i = 0; i < %" PRId64 "; i++) {\n"
      "              gc_mma_%s(acc[i][q * %" PRId64 " + j], fa[i], fb);\n"
      "              gc_mma_%s(acc[i][q * %" PRId64 " + j + 1], fa[i], fb + 2);\n"
      "            }\n"
      "          }\n"
      "        }\n",
      cgi / 16, GW,
      WC / GW, cog, MI, MI, cgi, NJG, NJG, MI, t == DT_BF16 ? "bf16" : "f16", NJG,
      t == DT_BF16 ? "bf16" : "f16", NJG);
  mma_pipeline_end(cg);
  cg->shared_bytes = (unsigned)grouped_smem(cf, cgi, cog);
  return conv_mma_epilogue(cg, n, v, q, cf, name, MI, NJ);
}

/* A convolution: an implicit GEMM (gen_conv_mma) where one runs it, else a direct kernel:
 * a choice of gen_conv_vec's strips, a choice of gen_conv_depthwise's strips,
 * gen_conv_dwtile's tiles and conv_direct's, or conv_direct's. */
static int gen_conv(Cg *cg, const Node *n) {
  ConvView v;
  ConvGeom q;
  conv_view(cg, n, &v);
  if (conv_geom(n, &v, &q))
    return gen_conv_mma(cg, n, &v, &q);
  Win win;
  read_win(n, v.k, &win);
  int64_t group = attr_int(n, "group");
  for (int j = 0; j < v.k; j++)
    win.kernel[j] = v.wd[2 + j];
  int rc = 0;
  if (conv_vec_fits(n, &v, group)) {
    /* on tensor cores (grouped_family, the default first), then strips of 1, 2 and 4
     * outputs */
    MmaConfig mc[MMA_MAX_KERNELS];
    int nmc = grouped_fits(cg, n, &v, group, &q) ? grouped_family(cg, &q, group, mc, 3) : 0;
    nmc = nmc < cg->variants ? nmc : cg->variants;
    int nvec = cg->variants - nmc < 3 ? cg->variants - nmc : 3;
    if (nmc + nvec < 2)
      return nmc ? conv_grouped_mma(cg, n, &v, &q, group, &mc[0]) : gen_conv_vec(cg, n, &v, &win, group, 1);
    const char *what = "";
    for (int i = 0; i < nmc; i++)
      what = cg_fmt(cg, "%s%" PRId64 "x%" PRId64 " tiles on tensor cores, ", what, mc[i].bm, mc[i].bn);
    int ch = cg_choice_begin(cg, n, cg_fmt(cg, "node %d: grouped convolution, variants: %sstrips "
                                           "of 1, 2, 4 outputs", n->id, what));
    for (int i = 0; i < nmc && !rc; i++) {
      cg_variant_begin(cg, ch);
      rc = conv_grouped_mma(cg, n, &v, &q, group, &mc[i]);
      cg_variant_end(cg, ch);
    }
    for (int i = 0; i < nvec && !rc; i++) {
      cg_variant_begin(cg, ch);
      rc = gen_conv_vec(cg, n, &v, &win, group, (int64_t)1 << i);
      cg_variant_end(cg, ch);
    }
    if (!rc)
      cg_choice_end(cg, ch);
    return rc;
  }
  /* the depthwise kernel's strips of 2, 4 and 1 outputs of 16 bytes of channels, and of
   * 1 output of 4 bytes (four times the threads: small images at batch 1), then the
   * tiled kernel's patches of at most a quarter and an eighth of a thread's registers,
   * as many as the variants allow; then the thread per output */
  static const int64_t widths[][2] = {{2, 16}, {4, 16}, {1, 16}, {1, 4}};
  DwConfig dw[4];
  DwTile dt[2];
  int ndw = 0, ndt = 0;
  for (int i = 0; i < 4 && ndw < cg->variants; i++)
    if (depthwise_config(cg, n, &v, &win, group, widths[i][0], widths[i][1], &dw[ndw]) &&
        (!ndw || dw[ndw].V != dw[ndw - 1].V || dw[ndw].tw != dw[ndw - 1].tw))
      ndw++;
  for (int i = 0; i < 2 && ndw + ndt < cg->variants; i++) {
    if (dw_tile_config(cg, n, &v, &win, group, dw_thread_regs(cg->target) / (4 << i), &dt[ndt]) &&
        (!ndt || dt[ndt].RH != dt[0].RH || dt[ndt].RW != dt[0].RW || dt[ndt].TH != dt[0].TH ||
         dt[ndt].TW != dt[0].TW))
      ndt++;
  }
  if (!ndw && !ndt)
    return conv_direct(cg, n, &v, &win, group);
  if (cg->variants < 2)
    return ndw ? gen_conv_depthwise(cg, n, &v, &win, &dw[0]) : gen_conv_dwtile(cg, n, &v, &dt[0]);
  const char *what = ndw ? "strips of outputs x channels " : "";
  for (int i = 0; i < ndw; i++)
    what = cg_fmt(cg, "%s%s%" PRId64 "x%" PRId64, what, i ? ", " : "", dw[i].tw, dw[i].V);
  for (int i = 0; i < ndt; i++)
    what = cg_fmt(cg, "%s%stiles of %" PRId64 "x%" PRId64 " outputs (%" PRId64 "x%" PRId64
                  "x%" PRId64 " a thread)", what, ndw || i ? ", " : "", dt[i].TH, dt[i].TW,
                  dt[i].RH, dt[i].RW, dt[i].VT);
  int ch = cg_choice_begin(cg, n, cg_fmt(cg, "node %d: depthwise convolution, variants: "
                                         "%s, a thread per output", n->id, what));
  for (int i = 0; i < ndw && !rc; i++) {
    cg_variant_begin(cg, ch);
    rc = gen_conv_depthwise(cg, n, &v, &win, &dw[i]);
    cg_variant_end(cg, ch);
  }
  for (int i = 0; i < ndt && !rc; i++) {
    cg_variant_begin(cg, ch);
    rc = gen_conv_dwtile(cg, n, &v, &dt[i]);
    cg_variant_end(cg, ch);
  }
  if (!rc && ndw + ndt < cg->variants) {
    cg_variant_begin(cg, ch);
    rc = conv_direct(cg, n, &v, &win, group);
    cg_variant_end(cg, ch);
  }
  if (!rc)
    cg_choice_end(cg, ch);
  return rc;
}

/* conv_transpose from the output's side: input position p reaches output o through tap
 * q when o = p * stride - pad + q * dilation, so each output gathers, over the input
 * channels c of its group and the taps q, x[b, c, (o + pad - q * dilation) / stride] *
 * w[c, m % MG, q] where that division is exact and lands inside x; then adds bias[m]. */
static int gen_conv_transpose(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *w = n->in[1], *bias = n->nin > 2 ? n->in[2] : NULL;
  const Value *y = n->out[0];
  int k = x->type.shape.rank - 2;
  Win win;
  read_win(n, k, &win);
  int64_t group = attr_int(n, "group"), C = cg_dim(x, 1), CG = C / group;
  int64_t MG = cg_dim(w, 1), NIN = spatial_numel(x), NKER = spatial_numel(w);
  for (int j = 0; j < k; j++)
    win.kernel[j] = cg_dim(w, 2 + j);
  Dom dom = cg_dom(x->type.dtype);
  const char *T = cg_dom_type(dom);
  int64_t numel = cg_numel(y);
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "gathered from the output's side: a thread per output, %" PRId64 " channels x %" PRId64 " taps each", CG, NKER));
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, numel);
  emit_unravel(cg, y, false, "m", "b");
  buf_printf(b, "    const idx_t g = m / %" PRId64 ", mi = m %% %" PRId64 ";\n", MG, MG);
  buf_printf(b, "    %s acc = (%s)0;\n", T, T);
  buf_printf(b, "    for (idx_t c = g * %" PRId64 "; c < (g + 1) * %" PRId64 "; c++) {\n", CG, CG);
  for (int j = 0; j < k; j++) {
    indent(b, 3 + j);
    buf_printf(b, "for (idx_t q%d = 0; q%d < %" PRId64 "; q%d++) {\n", j, j, win.kernel[j], j);
    indent(b, 4 + j);
    buf_printf(b, "const idx_t t%d = %s - %s;\n", j, affine(cg, cg_fmt(cg, "o%d", j), 1, win.pad[j]),
               affine(cg, cg_fmt(cg, "q%d", j), win.dil[j], 0));
    indent(b, 4 + j);
    if (win.stride[j] == 1) {
      buf_printf(b, "const idx_t p%d = t%d;\n", j, j);
      indent(b, 4 + j);
      buf_printf(b, "if (p%d < 0 || p%d >= %" PRId64 ") continue;\n", j, j, cg_dim(x, 2 + j));
    } else {
      buf_printf(b, "if (t%d < 0 || t%d %% %" PRId64 " != 0) continue;\n", j, j, win.stride[j]);
      indent(b, 4 + j);
      buf_printf(b, "const idx_t p%d = t%d / %" PRId64 ";\n", j, j, win.stride[j]);
      indent(b, 4 + j);
      buf_printf(b, "if (p%d >= %" PRId64 ") continue;\n", j, cg_dim(x, 2 + j));
    }
  }
  int64_t kst[IR_MAX_RANK];
  contiguous_strides(k, win.kernel, kst);
  const char *qoff = NULL;
  for (int j = 0; j < k; j++) {
    const char *t = kst[j] == 1 ? cg_fmt(cg, "q%d", j) : cg_fmt(cg, "q%d * %" PRId64, j, kst[j]);
    qoff = qoff ? cg_fmt(cg, "%s + %s", qoff, t) : t;
  }
  const char *xv = cg_load(cg, x->type.dtype, dom, cg_fmt(cg, "in0[(b * %" PRId64 " + c) * %" PRId64 " + %s]", C, NIN, spatial_offset(cg, x, "p")));
  const char *wv = cg_load(cg, w->type.dtype, dom, cg_fmt(cg, "in1[(c * %" PRId64 " + mi) * %" PRId64 " + %s]", MG, NKER, qoff));
  indent(b, 3 + k);
  buf_printf(b, "acc += %s * %s;\n", xv, wv);
  for (int j = k - 1; j >= 0; j--) {
    indent(b, 3 + j);
    buf_puts(b, "}\n");
  }
  buf_puts(b, "    }\n");
  const char *res = bias ? cg_fmt(cg, "acc + %s", cg_load(cg, bias->type.dtype, dom, "in2[m]")) : "acc";
  buf_printf(b, "    out0[i] = %s;\n", cg_store(cg, y->type.dtype, dom, res));
  cg_loop_end(cg, n, name, numel);
  return 0;
}

/* ---------------------------------------------------------------- pools */

/* max_pool and average_pool, as eval_pool: padding never takes part in a max; a float
 * max is NaN once a NaN is in the window (-inf for a window of padding only), an integer
 * max is the first inside element's then the larger (0 for none); the average divides
 * by the elements inside x, or with count_include_pad by those inside the padded x. */
static int gen_pool(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *y = n->out[0];
  int k = x->type.shape.rank - 2;
  bool cl = attr_int(n, "channels_last") != 0;
  /* channels last: x [N, spatial..., C], the spatial dims from 1 */
  int64_t sd[IR_MAX_RANK], sst[IR_MAX_RANK], C = cg_dim(x, cl ? k + 1 : 1);
  for (int j = 0; j < k; j++)
    sd[j] = cg_dim(x, j + (cl ? 1 : 2));
  contiguous_strides(k, sd, sst);
  Win win;
  read_win(n, k, &win);
  list_or(n, "kernel_shape", k, 1, win.kernel);
  bool is_max = n->op == OP_MAX_POOL;
  bool include_pad = !is_max && attr_int(n, "count_include_pad") != 0;
  bool fl = dtype_is_float(x->type.dtype);
  Dom dom = cg_dom(x->type.dtype);
  const char *T = cg_dom_type(dom);
  int64_t numel = cg_numel(y), NX = 1, nker = 1;
  for (int j = 0; j < k; j++)
    NX *= sd[j];
  for (int j = 0; j < k; j++)
    nker *= win.kernel[j];
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "a thread per output, a window of %" PRId64 "%s%s", nker,
                                                   include_pad ? "; count_include_pad" : "",
                                                   cl ? ", channels last" : ""));
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, numel);
  emit_unravel(cg, y, cl, cl ? "ch" : NULL, "pl"); /* cl: pl the batch, ch the channel */
  if (is_max && fl)
    buf_printf(b, "    %s best = %s;\n", T, cg_lit(cg, -INFINITY, dom));
  else if (is_max)
    buf_puts(b, "    long long best = 0;\n    bool any = false;\n");
  else
    buf_printf(b, "    %s sum = (%s)0;\n    int count = 0;\n", T, T);
  for (int j = 0; j < k; j++) {
    int64_t in = sd[j];
    indent(b, 2 + j);
    buf_printf(b, "for (idx_t q%d = 0; q%d < %" PRId64 "; q%d++) {\n", j, j, win.kernel[j], j);
    indent(b, 3 + j);
    buf_printf(b, "const idx_t p%d = %s + %s;\n", j, affine(cg, cg_fmt(cg, "o%d", j), win.stride[j], -win.pad[j]),
               affine(cg, cg_fmt(cg, "q%d", j), win.dil[j], 0));
    indent(b, 3 + j);
    if (include_pad) {
      /* every tap inside the padded input counts, whether it is inside x or not */
      buf_printf(b, "const bool ix%d = %sp%d >= 0 && p%d < %" PRId64 ";\n", j,
                 j ? cg_fmt(cg, "ix%d && ", j - 1) : "", j, j, in);
      indent(b, 3 + j);
      buf_printf(b, "if (p%d < %" PRId64 " || p%d >= %" PRId64 ") continue;\n", j, -win.pad[j], j,
                 in + win.pad_end[j]);
    } else {
      buf_printf(b, "if (p%d < 0 || p%d >= %" PRId64 ") continue;\n", j, j, in);
    }
  }
  const char *soff = NULL;
  for (int j = 0; j < k; j++) {
    const char *t = affine(cg, cg_fmt(cg, "p%d", j), sst[j], 0);
    soff = soff ? cg_fmt(cg, "%s + %s", soff, t) : t;
  }
  const char *at = cl ? cg_fmt(cg, "in0[(pl * %" PRId64 " + %s) * %" PRId64 " + ch]", NX, soff, C)
                      : cg_fmt(cg, "in0[pl * %" PRId64 " + %s]", NX, soff);
  indent(b, 2 + k);
  if (include_pad) {
    buf_printf(b, "count++;\n");
    indent(b, 2 + k);
    buf_printf(b, "if (ix%d) sum += %s;\n", k - 1, cg_load(cg, x->type.dtype, dom, at));
  } else if (!is_max) {
    buf_printf(b, "sum += %s;\n", cg_load(cg, x->type.dtype, dom, at));
    indent(b, 2 + k);
    buf_puts(b, "count++;\n");
  } else if (fl) {
    buf_printf(b, "const %s v = %s;\n", T, cg_load(cg, x->type.dtype, dom, at));
    indent(b, 2 + k);
    buf_puts(b, "if (v != v || v > best) best = best != best ? best : v;\n");
  } else {
    buf_printf(b, "const long long v = %s;\n", cg_load(cg, x->type.dtype, DOM_I64, at));
    indent(b, 2 + k);
    buf_puts(b, "if (!any || v > best) best = v;\n");
    indent(b, 2 + k);
    buf_puts(b, "any = true;\n");
  }
  for (int j = k - 1; j >= 0; j--) {
    indent(b, 2 + j);
    buf_puts(b, "}\n");
  }
  const char *res = !is_max ? cg_fmt(cg, "sum / (%s)count", T) : "best";
  buf_printf(b, "    out0[i] = %s;\n", cg_store(cg, y->type.dtype, is_max && !fl ? DOM_I64 : dom, res));
  cg_loop_end(cg, n, name, numel);
  return 0;
}

/* ---------------------------------------------------------------- batch_norm, lrn */

/* (x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + bias[c]. When the elements of one
 * channel come in whole 128-bit vectors, a thread takes a vector at a time. */
static int gen_batch_norm(Cg *cg, const Node *n) {
  const Value *x = n->in[0];
  DType dt = x->type.dtype;
  Dom dom = cg_dom(dt);
  const char *T = cg_dom_type(dom);
  int64_t C = cg_dim(x, 1), inner = cg_numel(x) / (cg_dim(x, 0) * C);
  int v = (int)(16 / dtype_size(dt));
  if (inner % v)
    v = 1;
  int64_t count = cg_numel(x) / v;
  const char *name = cg_kernel_begin(cg, n, v > 1 ? cg_fmt(cg, "%" PRId64 " vectors of %d elements", count, v) : NULL);
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, count);
  buf_printf(b, "    const idx_t c = i / %" PRId64 " %% %" PRId64 ";\n", inner / v, C);
  buf_printf(b, "    const %s mean = %s, sd = sqrt(%s + %s);\n", T, cg_load(cg, dt, dom, "in3[c]"),
             cg_load(cg, dt, dom, "in4[c]"), cg_lit(cg, attr_float(n, "epsilon"), dom));
  buf_printf(b, "    const %s sc = %s, bi = %s;\n", T, cg_load(cg, dt, dom, "in1[c]"), cg_load(cg, dt, dom, "in2[c]"));
  if (v == 1) {
    buf_printf(b, "    out0[i] = %s;\n",
               cg_store(cg, dt, dom, cg_fmt(cg, "(%s - mean) / sd * sc + bi", cg_load(cg, dt, dom, "in0[i]"))));
  } else {
    buf_printf(b, "    typedef gc_vec<%s, %d> v_t;\n", cg_ctype(dt), v);
    buf_puts(b, "    const v_t a = ((const v_t *)in0)[i];\n    v_t w;\n#pragma unroll\n");
    buf_printf(b, "    for (int j = 0; j < %d; j++) w.e[j] = %s;\n", v,
               cg_store(cg, dt, dom, cg_fmt(cg, "(%s - mean) / sd * sc + bi", cg_load(cg, dt, dom, "a.e[j]"))));
    buf_puts(b, "    ((v_t *)out0)[i] = w;\n");
  }
  cg_loop_end(cg, n, name, count);
  return 0;
}

/* x / (bias + alpha / size * sum of x^2 over channels [c - (size - 1) / 2, c + size / 2]
 * inside [0, C)) ^ beta. */
static int gen_lrn(Cg *cg, const Node *n) {
  const Value *x = n->in[0];
  DType dt = x->type.dtype;
  Dom dom = cg_dom(dt);
  const char *T = cg_dom_type(dom);
  int64_t C = cg_dim(x, 1), inner = cg_numel(x) / (cg_dim(x, 0) * C), size = attr_int(n, "size");
  int64_t numel = cg_numel(x);
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "a thread per element, a window of %" PRId64 " channels", size));
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, numel);
  buf_printf(b, "    const idx_t c = i / %" PRId64 " %% %" PRId64 ", base = i - c * %" PRId64 ";\n", inner, C, inner);
  buf_printf(b, "    const idx_t lo = c - %" PRId64 " < 0 ? 0 : c - %" PRId64 ";\n", (size - 1) / 2, (size - 1) / 2);
  buf_printf(b, "    const idx_t hi = c + %" PRId64 " > %" PRId64 " ? %" PRId64 " : c + %" PRId64 ";\n", size / 2, C - 1, C - 1, size / 2);
  buf_printf(b, "    %s sq = (%s)0;\n", T, T);
  buf_puts(b, "    for (idx_t c2 = lo; c2 <= hi; c2++) {\n");
  buf_printf(b, "      const %s v = %s;\n", T, cg_load(cg, dt, dom, cg_fmt(cg, "in0[base + c2 * %" PRId64 "]", inner)));
  buf_puts(b, "      sq += v * v;\n    }\n");
  buf_printf(b, "    out0[i] = %s;\n",
             cg_store(cg, dt, dom, cg_fmt(cg, "%s / pow(%s + %s * sq, %s)", cg_load(cg, dt, dom, "in0[i]"),
                                          cg_lit(cg, attr_float(n, "bias"), dom),
                                          cg_lit(cg, attr_float(n, "alpha") / (double)size, dom),
                                          cg_lit(cg, attr_float(n, "beta"), dom))));
  cg_loop_end(cg, n, name, numel);
  return 0;
}

/* ---------------------------------------------------------------- resize */

/* The input coordinate of output coordinate o{j} on one dim, in double like the
 * reference's resize_coord (so that nearest picks the same element), with the scale and
 * the sizes baked in. */
static const char *resize_coord(Cg *cg, const char *mode, int j, int64_t in, int64_t out,
                                double scale, bool scaled) {
  const char *xo = cg_fmt(cg, "(double)o%d", j), *s = cg_lit(cg, scale, DOM_F64);
  if (!strcmp(mode, "asymmetric"))
    return cg_fmt(cg, "%s / %s", xo, s);
  if (!strcmp(mode, "align_corners")) {
    double len = scaled ? scale * (double)in : (double)out;
    if (len == 1)
      return "0.0";
    return cg_fmt(cg, "%s * %s / %s", xo, cg_lit(cg, (double)(in - 1), DOM_F64), cg_lit(cg, len - 1, DOM_F64));
  }
  if (!strcmp(mode, "pytorch_half_pixel") && out <= 1)
    return "0.0";
  if (!strcmp(mode, "half_pixel_symmetric")) {
    double adjust = (double)out / (scale * (double)in);
    double c0 = (double)in / 2 * (1 - adjust);
    return cg_fmt(cg, "%s + (%s + 0.5) / %s - 0.5", cg_lit(cg, c0, DOM_F64), xo, s);
  }
  return cg_fmt(cg, "(%s + 0.5) / %s - 0.5", xo, s); /* half_pixel, pytorch_half_pixel */
}

/* Per dim: the source index (nearest) or the 2 (linear) or 4 (cubic) clamped source
 * indices and weights of eval_resize; then the weighted sum over every combination of
 * the dims' taps. A dim that keeps its size with scale 1 maps o to o exactly, so it
 * takes the one tap of weight 1 (the reference also multiplies its neighbours by a
 * weight of 0, which only matters when a neighbour is inf or NaN). */
static int gen_resize(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *y = n->out[0];
  int r = x->type.shape.rank;
  const char *mode = attr_string(n, "mode");
  const char *coord = attr_string(n, "coordinate_transformation_mode");
  const char *nm = attr_string(n, "nearest_mode");
  const Attr *sc = attr_find(n, "scales");
  double a = attr_float(n, "cubic_coeff_a");
  bool exclude = attr_int(n, "exclude_outside") != 0;
  bool nearest = !strcmp(mode, "nearest"), linear = !strcmp(mode, "linear");
  int cnt = nearest ? 1 : linear ? 2 : 4;
  DType dt = x->type.dtype;
  Dom dom = cg_dom(dt);
  const char *T = cg_dom_type(dom);
  int64_t numel = cg_numel(y), xd[IR_MAX_RANK], xs[IR_MAX_RANK];
  bool same[IR_MAX_RANK];
  for (int j = 0; j < r; j++)
    xd[j] = cg_dim(x, j);
  contiguous_strides(r, xd, xs);
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "mode %s, coordinates %s%s", mode, coord,
                                                   nearest ? cg_fmt(cg, ", %s", nm) : ""));
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, numel);
  buf_puts(b, "    idx_t r = i;\n");
  for (int j = r - 1; j >= 0; j--)
    buf_printf(b, "    const idx_t o%d = r %% %" PRId64 "; r /= %" PRId64 ";\n", j, cg_dim(y, j), cg_dim(y, j));
  for (int j = 0; j < r; j++) {
    int64_t in = xd[j], out = cg_dim(y, j);
    double scale = sc ? sc->floats[j] : (double)out / (double)in;
    same[j] = in == out && scale == 1;
    if (same[j])
      continue;
    buf_printf(b, "    // dim %d: %" PRId64 " -> %" PRId64 "\n", j, in, out);
    buf_printf(b, "    const double x%d = %s;\n", j, resize_coord(cg, coord, j, in, out, scale, sc != NULL));
    if (nearest) {
      const char *v = !strcmp(nm, "floor") ? cg_fmt(cg, "f%d", j)
                      : !strcmp(nm, "ceil") ? cg_fmt(cg, "ceil(x%d)", j)
                      : cg_fmt(cg, "x%d - f%d == 0.5 ? f%d%s : floor(x%d + 0.5)", j, j, j,
                               !strcmp(nm, "round_prefer_ceil") ? " + 1" : "", j);
      buf_printf(b, "    const double f%d = floor(x%d), v%d = %s;\n", j, j, j, v);
      buf_printf(b, "    const idx_t i%d = v%d < 0 ? 0 : v%d > %" PRId64 " ? %" PRId64 " : (idx_t)v%d;\n", j, j, j,
                 in - 1, in - 1, j);
      continue;
    }
    /* beyond a few elements outside every tap clamps to the edge; the clamp keeps the
     * conversion to an integer defined */
    buf_printf(b, "    const double c%d = x%d < -8 ? -8 : x%d > %" PRId64 " ? %" PRId64 " : x%d;\n", j, j, j,
               in + 8, in + 8, j);
    buf_printf(b, "    const double f%d = floor(c%d), t%d = c%d - f%d;\n", j, j, j, j, j);
    buf_printf(b, "    const idx_t b%d = (idx_t)f%d;\n", j, j);
    buf_printf(b, "    idx_t i%d[%d];\n    double w%d[%d], tot%d = 0;\n", j, cnt, j, cnt, j);
    buf_printf(b, "    for (int q = 0; q < %d; q++) {\n", cnt);
    buf_printf(b, "      const idx_t at = b%d + q%s;\n", j, linear ? "" : " - 1");
    if (linear)
      buf_printf(b, "      w%d[q] = q ? t%d : 1 - t%d;\n", j, j, j);
    else
      buf_printf(b, "      w%d[q] = gc_cubic(t%d - (double)(at - b%d), %s);\n", j, j, j, cg_lit(cg, a, DOM_F64));
    if (exclude)
      buf_printf(b, "      if (at < 0 || at >= %" PRId64 ") w%d[q] = 0;\n", in, j);
    buf_printf(b, "      tot%d += w%d[q];\n", j, j);
    buf_printf(b, "      i%d[q] = at < 0 ? 0 : at >= %" PRId64 " ? %" PRId64 " : at;\n", j, in, in - 1);
    buf_puts(b, "    }\n");
    if (exclude)
      buf_printf(b, "    for (int q = 0; q < %d; q++) w%d[q] /= tot%d;\n", cnt, j, j);
    else
      buf_printf(b, "    (void)tot%d;\n", j);
  }
  /* the source offset of one combination of taps */
  const char *off = NULL, *w = NULL;
  for (int j = 0; j < r; j++) {
    const char *ix = same[j] ? cg_fmt(cg, "o%d", j) : nearest ? cg_fmt(cg, "i%d", j) : cg_fmt(cg, "i%d[q%d]", j, j);
    const char *t = xs[j] == 1 ? ix : cg_fmt(cg, "%s * %" PRId64, ix, xs[j]);
    off = off ? cg_fmt(cg, "%s + %s", off, t) : t;
    if (!same[j] && !nearest)
      w = w ? cg_fmt(cg, "%s * w%d[q%d]", w, j, j) : cg_fmt(cg, "w%d[q%d]", j, j);
  }
  if (nearest) {
    buf_printf(b, "    out0[i] = in0[%s];\n", off ? off : "0");
    cg_loop_end(cg, n, name, numel);
    return 0;
  }
  buf_printf(b, "    %s acc = (%s)0;\n", T, T);
  int depth = 0;
  for (int j = 0; j < r; j++)
    if (!same[j]) {
      indent(b, 2 + depth++);
      buf_printf(b, "for (int q%d = 0; q%d < %d; q%d++)\n", j, j, cnt, j);
    }
  indent(b, 2 + depth);
  const char *v = cg_load(cg, dt, dom, cg_fmt(cg, "in0[%s]", off ? off : "0"));
  buf_printf(b, "acc += %s * %s;\n", w ? cg_fmt(cg, "(%s)(%s)", T, w) : cg_fmt(cg, "(%s)1", T), v);
  buf_printf(b, "    out0[i] = %s;\n", cg_store(cg, dt, dom, "acc"));
  cg_loop_end(cg, n, name, numel);
  return 0;
}

/* ---------------------------------------------------------------- grid_sample */

/* The taps of one spatial dim (the reference's gs_taps) for the grid coordinate at
 * `g`: a{j}[q] the source index (-1: a zero of padding zeros), w{j}[q] its weight. The
 * coordinate arithmetic is in double, as the reference's, with no fused multiply-add. */
static void emit_gs_taps(Cg *cg, int j, const char *g, int64_t in, int nsp, int cnt,
                         const char *mode, const char *pad, bool align) {
  Buf *b = &cg->src;
  bool nearest = !strcmp(mode, "nearest"), cubic = cnt == 4;
  bool border = !strcmp(pad, "border"), reflect = !strcmp(pad, "reflection");
  double lo = align ? 0 : -0.5, hi = align ? (double)in - 1 : (double)in - 0.5;
  const char *L = cg_lit(cg, lo, DOM_F64), *H = cg_lit(cg, hi, DOM_F64);
  buf_printf(b, "    long long a%d[%d];\n    double w%d[%d];\n    {\n", j, cnt, j, cnt);
  buf_printf(b, "      const double v = %s;\n      nan = nan || v != v;\n", g);
  if (align)
    buf_printf(b, "      double x = (v + 1) / 2 * %s;\n", cg_lit(cg, (double)(in - 1), DOM_F64));
  else
    buf_printf(b, "      double x = (__dmul_rn(v + 1, %s) - 1) / 2;\n", cg_lit(cg, (double)in, DOM_F64));
  if (nearest)
    buf_printf(b, "      x = %s(x);\n", nsp == 3 ? "round" : "rint");
  if (border)
    buf_printf(b, "      if (x < %s || x > %s) x = x < 0 ? 0 : x > %s ? %s : x;\n", L, H,
               cg_lit(cg, (double)(in - 1), DOM_F64), cg_lit(cg, (double)(in - 1), DOM_F64));
  else if (reflect)
    buf_printf(b, "      if (x < %s || x > %s) x = gc_reflect(x, %s, %s);\n", L, H, L, H);
  buf_printf(b, "      x = !(x >= -4) ? -4 : x > %s ? %s : x;\n", cg_lit(cg, (double)in + 3, DOM_F64),
             cg_lit(cg, (double)in + 3, DOM_F64));
  buf_puts(b, "      const double f = floor(x);\n      const long long i0 = (long long)f;\n");
  buf_printf(b, "      for (int q = 0; q < %d; q++) {\n", cnt);
  buf_printf(b, "        long long at = %s;\n", nearest ? "i0" : cubic ? "i0 - 1 + q" : "i0 + q");
  buf_printf(b, "        w%d[q] = %s;\n", j, nearest ? "1" : cubic ? "gc_cubic(x - (double)at, -0.75)" : "q ? x - f : 1 - (x - f)");
  buf_printf(b, "        if (at < 0 || at >= %" PRId64 ") {\n", in);
  if (border)
    buf_printf(b, "          at = at < 0 ? 0 : %" PRId64 ";\n", in - 1);
  else if (reflect)
    buf_printf(b, "          at = (long long)gc_reflect((double)at, %s, %s);\n", L, H);
  else
    buf_puts(b, "          at = -1;\n");
  buf_printf(b, "          at = at >= %" PRId64 " ? %" PRId64 " : at;\n        }\n", in, in - 1);
  buf_printf(b, "        a%d[q] = at;\n      }\n    }\n", j);
}

/* A thread per output (n, c, position): the taps of every spatial dim from the grid,
 * then the weighted sum over their combinations, taps of padding zeros left out; a NaN
 * coordinate gives NaN. nearest copies the one tap's element (any dtype). */
static int gen_grid_sample(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *grid = n->in[1], *y = n->out[0];
  const char *mode = attr_string(n, "mode"), *pad = attr_string(n, "padding_mode");
  bool align = attr_int(n, "align_corners") != 0, nearest = !strcmp(mode, "nearest");
  bool cubic = !strcmp(mode, "cubic") || !strcmp(mode, "bicubic");
  int r = x->type.shape.rank - 2, cnt = nearest ? 1 : cubic ? 4 : 2;
  int64_t C = cg_dim(x, 1), npos = spatial_numel(y), nx = spatial_numel(x), numel = cg_numel(y);
  DType dt = x->type.dtype;
  Dom dom = cg_dom(dt);
  const char *T = cg_dom_type(dom);
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "mode %s, padding %s%s", mode, pad, align ? ", align_corners" : ""));
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, numel);
  buf_printf(b, "    const idx_t p = i %% %" PRId64 ", bc = i / %" PRId64 ", bn = bc / %" PRId64 ";\n", npos, npos, C);
  buf_puts(b, "    bool nan = false;\n");
  for (int j = 0; j < r; j++) {
    const char *g = cg_load(cg, grid->type.dtype, DOM_F64,
                            cg_fmt(cg, "in1[(bn * %" PRId64 " + p) * %d + %d]", npos, r, r - 1 - j));
    emit_gs_taps(cg, j, g, cg_dim(x, 2 + j), r, cnt, mode, pad, align);
  }
  const char *off = spatial_offset(cg, x, "t");
  const char *at = cg_fmt(cg, "in0[bc * %" PRId64 " + %s]", nx, off);
  const char *nan_out = cg_store(cg, y->type.dtype, DOM_F64, "(double)GC_NAN");
  if (nearest) {
    for (int j = 0; j < r; j++)
      buf_printf(b, "    const long long t%d = a%d[0];\n", j, j);
    buf_puts(b, "    const bool zero = ");
    for (int j = 0; j < r; j++)
      buf_printf(b, "%st%d < 0", j ? " || " : "", j);
    buf_printf(b, ";\n    out0[i] = nan ? %s : zero ? %s{} : %s;\n", nan_out, cg_ctype(y->type.dtype), at);
    cg_loop_end(cg, n, name, numel);
    return 0;
  }
  buf_printf(b, "    %s acc = (%s)0;\n", T, T);
  for (int j = 0; j < r; j++) {
    indent(b, 2 + j);
    buf_printf(b, "for (int q%d = 0; q%d < %d; q%d++) {\n", j, j, cnt, j);
    indent(b, 3 + j);
    buf_printf(b, "const long long t%d = a%d[q%d];\n", j, j, j);
    indent(b, 3 + j);
    buf_printf(b, "if (t%d < 0) continue;\n", j);
  }
  const char *w = NULL;
  for (int j = 0; j < r; j++)
    w = w ? cg_fmt(cg, "%s * w%d[q%d]", w, j, j) : cg_fmt(cg, "w%d[q%d]", j, j);
  indent(b, 2 + r);
  buf_printf(b, "acc += (%s)(%s) * %s;\n", T, w, cg_load(cg, dt, dom, at));
  for (int j = r - 1; j >= 0; j--) {
    indent(b, 2 + j);
    buf_puts(b, "}\n");
  }
  buf_printf(b, "    out0[i] = nan ? %s : %s;\n", nan_out, cg_store(cg, y->type.dtype, dom, "acc"));
  cg_loop_end(cg, n, name, numel);
  return 0;
}

/* ---------------------------------------------------------------- roi_align */

/* A thread per output (roi, c, bin row, bin col), as eval_roi_align: the roi's corner
 * and size in input units (minus half a pixel with half_pixel; at least 1 x 1 with
 * output_half_pixel), a grid of samples per bin (sampling_ratio, or ceil(side / bins)),
 * each sample bilinear the reference's way (roi_sample: 0 beyond a pixel outside, the
 * edge past the last pixel), then their average or max. Coordinates in double with no
 * fused multiply-add, values in the data's domain. A batch index out of range or a roi
 * too large to sample, which the reference reports, gives 0. */
static int gen_roi_align(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *rois = n->in[1], *bidx = n->in[2], *y = n->out[0];
  bool max = !strcmp(attr_string(n, "mode"), "max");
  bool half = !strcmp(attr_string(n, "coordinate_transformation_mode"), "half_pixel");
  int64_t ratio = attr_int(n, "sampling_ratio");
  int64_t N = cg_dim(x, 0), C = cg_dim(x, 1), H = cg_dim(x, 2), W = cg_dim(x, 3);
  int64_t OH = cg_dim(y, 2), OW = cg_dim(y, 3), numel = cg_numel(y);
  DType dt = x->type.dtype;
  Dom dom = cg_dom(dt);
  const char *T = cg_dom_type(dom);
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "mode %s, %s: a thread per output bin", max ? "max" : "avg",
                                                   half ? "half_pixel" : "output_half_pixel"));
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, numel);
  buf_printf(b, "    const idx_t pw = i %% %" PRId64 ", ph = i / %" PRId64 " %% %" PRId64 ", c = i / %" PRId64 " %% %" PRId64 ", r = i / %" PRId64 ";\n",
             OW, OW, OH, OW * OH, C, OW * OH * C);
  buf_printf(b, "    const long long bi = %s;\n", cg_load(cg, bidx->type.dtype, DOM_I64, "in2[r]"));
  buf_printf(b, "    if (bi < 0 || bi >= %" PRId64 ") { out0[i] = %s{}; continue; }\n", N, cg_ctype(y->type.dtype));
  const char *sc = cg_lit(cg, attr_float(n, "spatial_scale"), DOM_F64), *sh = half ? " - 0.5" : "";
  for (int k = 0; k < 4; k++)
    buf_printf(b, "    const double e%d = %s * %s%s;\n", k,
               cg_load(cg, rois->type.dtype, DOM_F64, cg_fmt(cg, "in1[r * 4 + %d]", k)), sc, sh);
  buf_puts(b, "    double rw = e2 - e0, rh = e3 - e1;\n");
  if (!half)
    buf_puts(b, "    rw = rw > 1 ? rw : 1;\n    rh = rh > 1 ? rh : 1;\n");
  buf_printf(b, "    const double bw = rw / %" PRId64 ", bh = rh / %" PRId64 ";\n", OW, OH);
  if (ratio > 0) {
    buf_printf(b, "    const long long gw = %" PRId64 ", gh = %" PRId64 ";\n", ratio, ratio);
  } else {
    buf_printf(b, "    const double cw = ceil(rw / %" PRId64 "), ch = ceil(rh / %" PRId64 ");\n", OW, OH);
    buf_puts(b, "    const long long gw = !(cw > 0) ? 0 : cw > 1e6 ? -1 : (long long)cw;\n");
    buf_puts(b, "    const long long gh = !(ch > 0) ? 0 : ch > 1e6 ? -1 : (long long)ch;\n");
  }
  buf_printf(b, "    if (gw < 0 || gh < 0 || (double)gw * (double)gh > 1e8) { out0[i] = %s{}; continue; }\n",
             cg_ctype(y->type.dtype));
  buf_printf(b, "    const idx_t base = (bi * %" PRId64 " + c) * %" PRId64 ";\n", C, H * W);
  buf_printf(b, "    %s acc = (%s)0;\n", T, T);
  buf_puts(b, "    for (long long iy = 0; iy < gh; iy++)\n      for (long long ix = 0; ix < gw; ix++) {\n");
  buf_puts(b, "        double py = e1 + __dmul_rn((double)ph, bh) + __dmul_rn((double)iy + 0.5, bh) / (double)gh;\n");
  buf_puts(b, "        double px = e0 + __dmul_rn((double)pw, bw) + __dmul_rn((double)ix + 0.5, bw) / (double)gw;\n");
  buf_printf(b, "        %s v = 0;\n", T);
  buf_printf(b, "        if (py >= -1 && py <= %" PRId64 " && px >= -1 && px <= %" PRId64 ") {\n", H, W);
  buf_puts(b, "          py = py < 0 ? 0 : py;\n          px = px < 0 ? 0 : px;\n");
  buf_puts(b, "          long long y0 = (long long)py, x0 = (long long)px, y1 = y0 + 1, x1 = x0 + 1;\n");
  buf_printf(b, "          if (y0 >= %" PRId64 ") { y0 = y1 = %" PRId64 "; py = (double)y0; }\n", H - 1, H - 1);
  buf_printf(b, "          if (x0 >= %" PRId64 ") { x0 = x1 = %" PRId64 "; px = (double)x0; }\n", W - 1, W - 1);
  buf_puts(b, "          const double ly = py - (double)y0, lx = px - (double)x0, hy = 1 - ly, hx = 1 - lx;\n");
  const char *q[4] = {"hy * hx", "hy * lx", "ly * hx", "ly * lx"};
  const char *at[4] = {"y0 * %" PRId64 " + x0", "y0 * %" PRId64 " + x1", "y1 * %" PRId64 " + x0", "y1 * %" PRId64 " + x1"};
  for (int k = 0; k < 4; k++)
    buf_printf(b, "          const %s v%d = (%s)(%s) * %s;\n", T, k, T, q[k],
               cg_load(cg, dt, dom, cg_fmt(cg, "in0[base + %s]", cg_fmt(cg, at[k], W))));
  buf_printf(b, "          v = %s;\n        }\n", max ? "fmax(fmax(v0, v1), fmax(v2, v3))" : "v0 + v1 + v2 + v3");
  buf_printf(b, "        acc = %s;\n      }\n", max ? "iy == 0 && ix == 0 ? v : fmax(acc, v)" : "acc + v");
  const char *res = max ? "acc" : cg_fmt(cg, "acc / (%s)(gw * gh > 0 ? (double)(gw * gh) : 1.0)", T);
  buf_printf(b, "    out0[i] = %s;\n", cg_store(cg, y->type.dtype, dom, res));
  cg_loop_end(cg, n, name, numel);
  return 0;
}

int cg_nn(Cg *cg, const Node *n) {
  switch (n->op) {
  case OP_CONV: return gen_conv(cg, n);
  case OP_CONV_TRANSPOSE: return gen_conv_transpose(cg, n);
  case OP_MAX_POOL: case OP_AVERAGE_POOL: return gen_pool(cg, n);
  case OP_BATCH_NORM: return gen_batch_norm(cg, n);
  case OP_LRN: return gen_lrn(cg, n);
  case OP_RESIZE: return gen_resize(cg, n);
  case OP_GRID_SAMPLE: return gen_grid_sample(cg, n);
  case OP_ROI_ALIGN: return gen_roi_align(cg, n);
  default: return cg_error(cg, n, "op %s (node %d) has no GPU kernel yet", op_info[n->op].name, n->id);
  }
}
