/* gemm.c: matmul as GEMM steps for cuBLASLt (no kernel of ours; integers excepted, see
 * int_matmul). numpy semantics: a
 * 1-D operand is a row (left) or a column (right), leading dims broadcast as batch dims.
 * The batch is expressed in cuBLASLt's strided-batch form, with stride 0 for an operand
 * that is broadcast; batch dims that no single stride can walk become several steps.
 * A right operand shared by the whole batch folds the batch into the rows of one GEMM
 * (X[B, M, K] @ W[K, N] is one [B*M, K] @ [K, N]), which cuBLASLt runs better.
 * transpose_b = 1 (weights [N, K]) is cuBLASLt's op(A) = A^T, and scale its alpha; an
 * e4m3 matmul (quantize.c) is such a GEMM of rows times weights, the "TN" layout that
 * cuBLASLt's fp8 kernels take.
 * See GemmStep in codegen.h for the row-major to column-major mapping. */
#include "codegen/cg-impl.h"

#include <inttypes.h>

enum { MAX_GEMM_STEPS = 4096 };

/* Batch strides (in matrices) of an operand with batch dims `bd` of rank `br` walked
 * over the output's batch dims `od` of rank `obr`; 0 where it broadcasts. */
static void batch_strides(const int64_t *bd, int br, int obr, int64_t *st) {
  int64_t cs[IR_MAX_RANK];
  contiguous_strides(br, bd, cs);
  for (int i = 0; i < obr; i++) {
    int j = i - (obr - br);
    st[i] = j < 0 || bd[j] == 1 ? 0 : cs[j];
  }
}

static void add_gemm(Cg *cg, const Node *n, const GemmStep *g) {
  Step *s = cg_add_step(cg, STEP_GEMM, n);
  s->gemm = *g;
}

/* Integer (and bool) matmul has no cuBLASLt path: a direct kernel, a thread per output,
 * accumulating in wrapping int64 like eval_matmul. It is for the small integer matmuls
 * of shape arithmetic, not for speed. */
static int int_matmul(Cg *cg, const Node *n, int64_t M, int64_t K, int64_t N, int obr,
                      const int64_t *od, const int64_t *sa, const int64_t *sb) {
  const Value *a = n->in[0], *b = n->in[1], *y = n->out[0];
  int64_t numel = cg_numel(y), ea[IR_MAX_RANK], eb[IR_MAX_RANK];
  for (int i = 0; i < obr; i++) {
    ea[i] = sa[i] * M * K;
    eb[i] = sb[i] * K * N;
  }
  Space s;
  space_init(&s, obr, od);
  space_add_strides(&s, ea, 0);
  space_add_strides(&s, eb, 0);
  space_coalesce(&s);
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "integers: a thread per output, %" PRId64 " wrapping products each", K));
  Buf *buf = &cg->src;
  cg_loop_begin(cg, n, numel);
  buf_printf(buf, "    const idx_t col = i %% %" PRId64 ", row = i / %" PRId64 " %% %" PRId64 ", bi = i / %" PRId64 ";\n",
             N, N, M, M * N);
  space_emit_offsets(cg, &s, "bi", "bo", "    ");
  buf_puts(buf, "    long long acc = 0;\n");
  buf_printf(buf, "    for (idx_t k = 0; k < %" PRId64 "; k++)\n", K);
  buf_printf(buf, "      acc = gc_iadd(acc, gc_imul(%s, %s));\n",
             cg_load(cg, a->type.dtype, DOM_I64, cg_fmt(cg, "in0[bo0 + row * %" PRId64 " + k]", K)),
             cg_load(cg, b->type.dtype, DOM_I64, cg_fmt(cg, "in1[bo1 + k * %" PRId64 " + col]", N)));
  buf_printf(buf, "    out0[i] = %s;\n", cg_store(cg, y->type.dtype, DOM_I64, "acc"));
  cg_loop_end(cg, n, name, numel);
  return 0;
}

/* ---------------------------------------------------------------- f32 GEMMs on tensor cores
 *
 * cuBLASLt's f32 GEMMs run on CUDA cores, and with few rows (a transformer at batch 1)
 * they split K into a second kernel. An f32 linear layer whose weights are stored [N, K]
 * (transpose_b = 1: passes/layout.c arranges it) runs instead as this kernel, one launch:
 *
 * - A block computes a BM x BN tile of the output (each 32 or 64), walking K in steps of
 *   32 taps. Three stages of shared memory are in flight: cp.async copies step s + 2's
 *   rows of A and B while the warps multiply step s's, with no registers on the way. A
 *   row's 16-byte chunk c is stored at chunk c ^ (row & 7), so that ldmatrix's eight rows
 *   and the copies' stores fall in distinct banks.
 * - Warp w multiplies the (BM / 2) x (BN / 2) quarter w & 3 of the tile over taps
 *   16 (w >> 2) .. +16 of each step, so both halves of K run at once; the halves' tiles
 *   are summed as the tile is stored.
 * - 3xTF32: each fragment value is split into its TF32 rounding and the exact rest
 *   (gc_tf32_parts), and the cross terms and the big parts' product make each product to
 *   within about 2^-21 of f32's. A step's products are summed apart and added to the
 *   accumulators by f32 adds: tensor cores truncate as they accumulate (see codegen/nn.c's
 *   implicit GEMM).
 * - On a target with clusters (sm_90), the S blocks of a thread block cluster may share a
 *   tile's K steps and sum their partial tiles through distributed shared memory, in rank
 *   order (results repeat from run to run).
 * - An inf or NaN input makes the split parts NaN; a NaN sum is computed again in f32 by
 *   the thread that stores it, so non-finite inputs give f32's answer.
 * The group's epilogue (bias, residual, activation: any pointwise chain) is applied as
 * each element is stored.
 *
 * Which tile and split run fastest depends on the shape and the GPU, so the GEMM is a
 * family of variants, with cuBLASLt's GEMM the last of them, that the runtime times on
 * the GPU at create (a choice step; tc_family says which). */
enum {
  TC_BK = 32, TC_STAGES = 3,
  TC_WARPS = 8, /* the kernel is written for 8 warps: 2 x 2 over the tile, 2 halves of K */
  TC_THREADS = TC_WARPS * 32,
  TC_RESIDENT = 2,    /* blocks an SM runs at once: __launch_bounds__' minimum, which caps
                         a thread's registers to fit them (128 of 64 Ki on every target) */
  TC_MAX_KERNELS = 7, /* kernel variants of a GEMM at most (cuBLASLt's besides) */
};

/* One kernel of the family: BM x BN tiles, K split over S blocks of a cluster. */
typedef struct TcConfig {
  int bm, bn;
  int64_t split;
} TcConfig;

/* The tiles the family tries: 64 x 64 reads each loaded value for the most products;
 * the narrower ones make more blocks of a small output. */
static const int tc_tiles[][2] = {{64, 64}, {64, 32}, {32, 64}, {32, 32}};

static int64_t tc_tile_count(int64_t M, int64_t N, int bm, int bn) {
  return (M + bm - 1) / bm * ((N + bn - 1) / bn);
}

/* K split so that `tiles` tiles' blocks make at least `blocks` blocks, each block at least
 * TC_STAGES steps (one of fewer never fills its pipeline); 1 without clusters. */
static int64_t tc_split(const Cg *cg, int64_t tiles, int64_t blocks, int64_t steps) {
  int64_t want = tiles < blocks ? (blocks + tiles - 1) / tiles : 1;
  return cg_cluster_split(cg, want, cg->target->cluster_max, steps, TC_STAGES);
}

/* The default, variant 0 (what GPUCC_TUNE=0 runs): 64 x 64 tiles, a side of 32 where the
 * output's is at most 32; K split over as many blocks of a cluster as bring the tiles'
 * blocks up to one an SM. A rule of the GPU's size only: which variant is fastest for a
 * shape is measured, not fitted. */
static TcConfig tc_default(const Cg *cg, int64_t M, int64_t N, int64_t K) {
  TcConfig c = {.bm = M <= 32 ? 32 : 64, .bn = N <= 32 ? 32 : 64};
  c.split = tc_split(cg, tc_tile_count(M, N, c.bm, c.bn), cg->target->sms,
                     (K + TC_BK - 1) / TC_BK);
  return c;
}

/* The kernels of the family into c[] (at most TC_MAX_KERNELS), the default first; then,
 * for each tile of tc_tiles that the output fills (no side of 64 where the output's is
 * at most 32), K unsplit and split to make one block an SM and to fill every SM's block
 * slots (TC_RESIDENT an SM); the default's tile also split 2, 3, 4, 6 and 8 ways up to
 * that last split (the time of a split K has its optimum between the tiles' fill and
 * the partial tiles' sum, which no rule of the GPU's size places). The tiles narrower
 * than the default's only while its blocks leave slots idle: once they fill the GPU,
 * narrower tiles only read more. Each configuration once. A short GEMM, whose tiles' blocks all run at once, each over at
 * most 2 * TC_STAGES steps of K (K <= 192), keeps its default alone: its time is its launch and
 * a load or two, which no tile or split shortens much, and NVRTC's time for more kernels
 * is not worth it. */
static int tc_family(const Cg *cg, int64_t M, int64_t N, int64_t K, TcConfig *c) {
  const Target *t = cg->target;
  int64_t steps = (K + TC_BK - 1) / TC_BK, slots = t->sms * TC_RESIDENT;
  int nc = 0;
  c[nc++] = tc_default(cg, M, N, K);
  int64_t tiles = tc_tile_count(M, N, c[0].bm, c[0].bn);
  if (tiles <= slots && steps <= 2 * TC_STAGES)
    return nc;
  bool idle = tiles < slots;
  for (int i = -1; i < (int)(sizeof tc_tiles / sizeof tc_tiles[0]); i++) {
    /* the default's tile first (i = -1), then the others */
    int bm = i < 0 ? c[0].bm : tc_tiles[i][0], bn = i < 0 ? c[0].bn : tc_tiles[i][1];
    if ((i >= 0 && bm == c[0].bm && bn == c[0].bn) || (bm > 32 && M <= 32) ||
        (bn > 32 && N <= 32) || (!idle && (bm < c[0].bm || bn < c[0].bn)))
      continue;
    tiles = tc_tile_count(M, N, bm, bn);
    static const int64_t ways[] = {2, 3, 4, 6, 8};
    int64_t fill = tc_split(cg, tiles, slots, steps), split[8] = {1};
    int ns = 1;
    for (size_t w = 0; bm == c[0].bm && bn == c[0].bn && w < 5 && ways[w] <= fill; w++)
      split[ns++] = cg_cluster_split(cg, ways[w], t->cluster_max, steps, TC_STAGES);
    split[ns++] = tc_split(cg, tiles, t->sms, steps);
    split[ns++] = fill;
    for (int k = 0; k < ns && nc < TC_MAX_KERNELS; k++) {
      bool seen = false;
      for (int j = 0; j < nc; j++)
        seen = seen || (c[j].bm == bm && c[j].bn == bn && c[j].split == split[k]);
      if (!seen)
        c[nc++] = (TcConfig){bm, bn, split[k]};
    }
  }
  return nc;
}

/* Whether matmul n (rows [M, K] times b, its batch folded into M) runs as tc_gemm: f32
 * with f32's accuracy, weights [N, K], rows of K a multiple of 4 that start 16 bytes apart
 * (ld and offset in elements: the rows of a view, or K and 0). */
static bool tc_gemm_fits(const Node *n, int64_t K, bool tb, bool rows, int64_t ld, int64_t off) {
  const Value *a = n->in[0], *b = n->in[1], *y = n->out[0];
  return tb && rows && a->type.dtype == DT_F32 && y->type.dtype == DT_F32 &&
         !attr_int(n, "tf32") && b->type.shape.rank == 2 && K % 4 == 0 && K > 0 &&
         ld % 4 == 0 && off % 4 == 0;
}

/* The kernel of configuration c; rows m of A: in0[off + m * ld + k] */
static int tc_gemm(Cg *cg, const Node *n, int64_t M, int64_t N, int64_t K, int64_t ld,
                   int64_t off, const TcConfig *c) {
  const int BM = c->bm, BN = c->bn, MI = BM / 32, NJ = BN / 16; /* a warp's fragments */
  int64_t MT = (M + BM - 1) / BM, NT = (N + BN - 1) / BN, tiles = MT * NT;
  int64_t steps = (K + TC_BK - 1) / TC_BK, S = c->split;
  int64_t KS = (steps + S - 1) / S * TC_BK; /* rank r sums the taps [r KS, (r + 1) KS) */
  double scale = attr_float(n, "scale");
  const char *offs = off ? cg_fmt(cg, "%" PRId64 " + ", off) : "";
  const char *note = cg_fmt(cg, "GEMM on tensor cores, 3xTF32 (f32 accuracy): %" PRId64 " x %" PRId64
                            " x %" PRId64 " in %d x %d tiles, 3 cp.async stages%s", M, N, K, BM, BN,
                            S > 1 ? cg_fmt(cg, ", K split over the %" PRId64 " blocks of a cluster", S) : "");
  cg->min_blocks = TC_RESIDENT;
  cg->cluster = (int)S;
  cg->threads = TC_THREADS;
  const char *name = cg_kernel_begin(cg, n, note);
  Buf *b = &cg->src;
  int64_t span = off + M * ld; /* A's elements as read (a view's base may be larger) */
  int64_t most = cg_max_numel(n) > span ? cg_max_numel(n) : span;
  buf_printf(b, "  typedef %s idx_t;\n", cg_idx_type(cg, most));
  buf_printf(b,
      "  /* three stages of A's and B's 32 taps of the tile's rows (chunk c of row r at c ^ (r & 7)),\n"
      "   * then the tile of each half of K */\n"
      "  typedef union alignas(128) { struct { float a[%d][32], b[%d][32]; } st[3]; float c[2][%d][%d]; } gc_smem;\n"
      "  GC_BLOCK_SHARED(gc_smem, sm);\n"
      "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;\n"
      "  const int wm = (warp & 1) * %d, wn = (warp >> 1 & 1) * %d, kh = warp >> 2;\n"
      "  const int lr = lane & 7, lm = lane >> 3; /* the row this lane gives ldmatrix, of matrix lm */\n",
      BM, BN, BM, BN + 4, BM / 2, BN / 2);
  if (S > 1)
    buf_printf(b,
        "  const int rank = (int)(blockIdx.x %% %" PRId64 "), kb = rank * %" PRId64 ", ke = kb + %" PRId64 " < %" PRId64 " ? kb + %" PRId64 " : %" PRId64 ";\n",
        S, KS, KS, K, KS, K);
  else
    buf_printf(b, "  const int rank = 0, kb = 0, ke = %" PRId64 ";\n", K);
  buf_printf(b,
      "  const int nk = (ke - kb + 31) / 32;\n"
      "  for (idx_t tile = blockIdx.x / %" PRId64 "; tile < %" PRId64 "; tile += gridDim.x / %" PRId64 ") {\n"
      "    const idx_t m0 = tile %% %" PRId64 " * %d;\n"
      "    const int n0 = (int)(tile / %" PRId64 ") * %d;\n"
      "    auto load = [&](int s, int k0) { /* taps k0 .. k0 + 31 of the tile's rows into stage s */\n"
      "#pragma unroll\n"
      "      for (int q = 0; q < %d; q++) {\n"
      "        const int e = tid + %d * q, r = e >> 3, c = e & 7, k = k0 + 4 * c;\n"
      "        gc_cp16(&sm.st[s].a[r][(c ^ (r & 7)) * 4], in0, %s(m0 + r) * %" PRId64 " + k, m0 + r < %" PRId64 " && k < ke);\n"
      "      }\n"
      "#pragma unroll\n"
      "      for (int q = 0; q < %d; q++) {\n"
      "        const int e = tid + %d * q, r = e >> 3, c = e & 7, k = k0 + 4 * c;\n"
      "        gc_cp16(&sm.st[s].b[r][(c ^ (r & 7)) * 4], in1, (idx_t)(n0 + r) * %" PRId64 " + k, n0 + r < %" PRId64 " && k < ke);\n"
      "      }\n"
      "    };\n"
      "    float acc[%d][%d][4] = {};\n"
      "    load(0, kb);\n"
      "    gc_cp_commit();\n"
      "    if (nk > 1) load(1, kb + 32);\n"
      "    gc_cp_commit();\n"
      "    for (int it = 0; it < nk; it++) {\n"
      "      gc_cp_wait<1>(); /* this thread's copies of step it have landed */\n"
      "      __syncthreads(); /* everyone's; and step it - 1's stage is free again */\n"
      "      if (it + 2 < nk) load((it + 2) %% 3, kb + 32 * (it + 2));\n"
      "      gc_cp_commit();\n"
      "      const auto &s = sm.st[it %% 3];\n"
      "      float p[%d][%d][4] = {}; /* this step's products */\n"
      "#pragma unroll\n"
      "      for (int h = 0; h < 2; h++) { /* 8 taps, one mma.m16n8k8 */\n"
      "        const int kc = kh * 4 + h * 2; /* the taps' first chunk */\n"
      "        unsigned fa[%d][4], fb[%d][2], la[%d][4], lb[%d][2];\n"
      "#pragma unroll\n"
      "        for (int i = 0; i < %d; i++) {\n"
      "          const int r = wm + i * 16 + lr + (lm & 1) * 8, c = kc + (lm >> 1);\n"
      "          gc_ldsm4(fa[i], &s.a[r][(c ^ (r & 7)) * 4]);\n"
      "        }\n"
      "#pragma unroll\n"
      "        for (int j = 0; j < %d; j += 2) {\n"
      "          const int r = wn + j * 8 + lr + (lm >> 1) * 8, c = kc + (lm & 1);\n"
      "          unsigned u[4];\n"
      "          gc_ldsm4(u, &s.b[r][(c ^ (r & 7)) * 4]);\n"
      "          fb[j][0] = u[0]; fb[j][1] = u[1]; fb[j + 1][0] = u[2]; fb[j + 1][1] = u[3];\n"
      "        }\n"
      "#pragma unroll\n"
      "        for (int e = 0; e < %d; e++) la[e >> 2][e & 3] = gc_tf32_parts(fa[e >> 2][e & 3]);\n"
      "#pragma unroll\n"
      "        for (int e = 0; e < %d; e++) lb[e >> 1][e & 1] = gc_tf32_parts(fb[e >> 1][e & 1]);\n"
      "#pragma unroll\n"
      "        for (int i = 0; i < %d; i++)\n"
      "#pragma unroll\n"
      "          for (int j = 0; j < %d; j++) {\n"
      "            gc_mma_tf32(p[i][j], la[i], fb[j]);\n"
      "            gc_mma_tf32(p[i][j], fa[i], lb[j]);\n"
      "            gc_mma_tf32(p[i][j], fa[i], fb[j]);\n"
      "          }\n"
      "      }\n"
      "#pragma unroll\n"
      "      for (int e = 0; e < %d; e++) acc[e / %d][e / 4 %% %d][e & 3] += p[e / %d][e / 4 %% %d][e & 3];\n"
      "    }\n"
      "    gc_cp_wait<0>();\n"
      "    __syncthreads(); /* the stages are the tile's memory too */\n"
      "#pragma unroll\n"
      "    for (int i = 0; i < %d; i++)\n"
      "#pragma unroll\n"
      "      for (int j = 0; j < %d; j++) {\n"
      "        const int r = wm + i * 16 + g, c = wn + j * 8 + 2 * t4;\n"
      "        sm.c[kh][r][c] = acc[i][j][0]; sm.c[kh][r][c + 1] = acc[i][j][1];\n"
      "        sm.c[kh][r + 8][c] = acc[i][j][2]; sm.c[kh][r + 8][c + 1] = acc[i][j][3];\n"
      "      }\n",
      S, tiles, S, MT, BM, MT, BN,
      BM / 32, TC_THREADS, offs, ld, M,
      BN / 32, TC_THREADS, K, N,
      MI, NJ, MI, NJ, MI, NJ, MI, NJ, MI, NJ, MI * 4, NJ * 2, MI, NJ,
      MI * NJ * 4, NJ * 4, NJ, NJ * 4, NJ, MI, NJ);
  /* a cluster's blocks read each other's tiles: they wait for every one stored, and none
   * goes on to overwrite its own until all have read */
  const char *sync = S > 1 ? "gc_cluster_sync()" : "__syncthreads()";
  buf_printf(b, "    %s;\n", sync);
  if (S > 1)
    buf_printf(b,
        "    const float *part[%" PRId64 "]; /* the blocks' tiles, by rank */\n"
        "#pragma unroll\n"
        "    for (int r = 0; r < %" PRId64 "; r++) part[r] = gc_cluster_map(&sm.c[0][0][0], r);\n",
        S, S);
  else
    buf_puts(b, "    const float *part[1] = {&sm.c[0][0][0]};\n");
  buf_printf(b,
      "    for (int e = tid + rank * %d; e < %d; e += %" PRId64 ") { /* 4 neighbouring outputs a thread */\n"
      "      const int lm = e / %d, ln = e %% %d * 4;\n"
      "      gc_vec<float, 4> v4 = {};\n"
      "#pragma unroll\n"
      "      for (int r = 0; r < %" PRId64 "; r++)\n"
      "#pragma unroll\n"
      "        for (int h = 0; h < 2; h++) {\n"
      "          const gc_vec<float, 4> w = *(const gc_vec<float, 4> *)&part[r][(h * %d + lm) * %d + ln];\n"
      "#pragma unroll\n"
      "          for (int q = 0; q < 4; q++) v4.e[q] += w.e[q];\n"
      "        }\n"
      "      const idx_t m = m0 + lm;\n"
      "#pragma unroll\n"
      "      for (int q = 0; q < 4; q++) {\n"
      "        const int n = n0 + ln + q;\n"
      "        if (m >= %" PRId64 " || n >= %" PRId64 ") continue;\n"
      "        float v = v4.e[q];\n"
      "        if (v != v) { /* an inf or NaN input: the sum again, in f32 */\n"
      "          v = 0.0f;\n"
      "          for (int k = 0; k < %" PRId64 "; k++) v = fmaf(in0[%sm * %" PRId64 " + k], in1[(idx_t)n * %" PRId64 " + k], v);\n"
      "        }\n"
      "%s"
      "        const idx_t i = m * %" PRId64 " + n;\n",
      TC_THREADS, BM * BN / 4, S * TC_THREADS, BN / 4, BN / 4, S, BM, BN + 4, M, N, K, offs, ld, K,
      scale != 1 ? cg_fmt(cg, "        v *= %s;\n", cg_lit(cg, scale, DOM_F32)) : "", N);
  cg_store_out(cg, n, "i", "v", "        ");
  buf_printf(b, "      }\n    }\n    %s;\n  }\n}\n", sync);
  int64_t clusters = cg->target->max_blocks / S;
  clusters = tiles < clusters ? tiles : clusters;
  cg_kernel_step(cg, n, name, (unsigned)(clusters * S), TC_THREADS);
  return 0;
}

/* The matmul n as one cuBLASLt GEMM of `rows` rows of A (its batch folded in), read
 * through the view av when there is one (rows ld elements apart), with the group's
 * epilogue. */
static int gemm_rows(Cg *cg, const Node *n, GemmStep *g, const View *av, int64_t rows,
                     int64_t ld) {
  DType dt = g->dtype;
  g->n = rows; /* the rows of every batch are one tall matrix */
  const char *what = "", *how = "";
  if (av) {
    g->b = av->base;
    g->ldb = ld;
    g->offset_b = av->offset;
    how = cg_fmt(cg, ", B read from %%%s (ldb %" PRId64 ", offset %" PRId64 ")",
                 av->base->name, ld, av->offset);
  }
  if (cg_epilogue_of(cg, n)) {
    cg_gemm_epilogue(cg, n, g);
    what = g->gelu    ? " with a GELU (tanh) and bias epilogue"
           : !g->bias ? " with the residual as C (beta 1)"
                      : cg_fmt(cg, " with a bias epilogue%s%s", g->c ? ", the residual as C" : "",
                               g->relu ? ", then ReLU" : "");
  }
  if (g->dtype_d != dt)
    what = cg_fmt(cg, "%s, D in %s", what, dtype_name(g->dtype_d));
  if (g->trans_a)
    what = cg_fmt(cg, "%s, A (%s weights [N, K]) transposed", what, dtype_name(dt));
  if (g->alpha != 1)
    what = cg_fmt(cg, "%s, alpha %.9g", what, g->alpha);
  add_gemm(cg, n, g);
  buf_printf(&cg->src, "\n/* node %d: matmul: one cuBLASLt GEMM step (m %" PRId64 ", n %" PRId64
             ", k %" PRId64 ")%s%s, no kernel */\n", n->id, g->m, g->n, g->k, what, how);
  return 0;
}

/* The matmul n (rows x N x K, A read through av when there is one) as a choice among
 * tc_family's kernels and cuBLASLt's GEMM g, the last variant, which the runtime times;
 * with --variants=1 the default kernel alone. */
static int tc_choice(Cg *cg, const Node *n, GemmStep *g, const View *av, int64_t rows,
                     int64_t N, int64_t K, int64_t ld) {
  TcConfig c[TC_MAX_KERNELS];
  int nc = tc_family(cg, rows, N, K, c), ch = -1;
  nc = nc < cg->variants - 1 ? nc : cg->variants > 1 ? cg->variants - 1 : 1;
  if (cg->variants > 1) {
    const char *label = cg_fmt(cg, "node %d: GEMM %" PRId64 " x %" PRId64 " x %" PRId64
                               ", variants (tile/K split):", n->id, rows, N, K);
    for (int k = 0; k < nc; k++)
      label = cg_fmt(cg, "%s %dx%d/%" PRId64 ",", label, c[k].bm, c[k].bn, c[k].split);
    ch = cg_choice_begin(cg, n, cg_fmt(cg, "%s cuBLASLt", label));
  }
  /* the kernels read A's base buffer (av) and B as they are */
  View vs[2];
  if (av) {
    vs[0] = *av;
    view_init(&vs[1], g->a);
    cg->viewed = n;
    cg->views = vs;
  }
  int rc = 0;
  for (int k = 0; k < nc && !rc; k++) {
    if (ch >= 0)
      cg_variant_begin(cg, ch);
    rc = tc_gemm(cg, n, rows, N, K, ld, av ? av->offset : 0, &c[k]);
    if (ch >= 0)
      cg_variant_end(cg, ch);
  }
  cg->viewed = NULL;
  if (rc || ch < 0)
    return rc;
  cg_variant_begin(cg, ch);
  rc = gemm_rows(cg, n, g, av, rows, ld);
  cg_variant_end(cg, ch);
  cg_choice_end(cg, ch);
  return rc;
}

/* The matmul n; av non-NULL: its first input is read through that view of another
 * buffer (a fuse group's view nodes before it), which must be a matrix of rows. */
static int matmul(Cg *cg, const Node *n, const View *av) {
  const Value *a = n->in[0], *b = n->in[1], *y = n->out[0];
  DType dt = a->type.dtype;
  bool f8 = dt == DT_F8E4M3, tb = attr_int(n, "transpose_b") != 0;
  bool fl = dt == DT_F32 || dt == DT_F16 || dt == DT_BF16 || dt == DT_F64 || f8;
  if (!fl && dtype_is_float(dt))
    return cg_error(cg, n, "op matmul (node %d) on %s has no GPU kernel yet", n->id,
                    dtype_name(dt));
  int ar = a->type.shape.rank, br = b->type.shape.rank;
  int64_t M = ar == 1 ? 1 : cg_dim(a, ar - 2), K = cg_dim(a, ar - 1);
  int64_t N = br == 1 ? 1 : cg_dim(b, br - (tb ? 2 : 1));
  if (K == 0 && fl)
    return cg_error(cg, n, "op matmul (node %d) with an empty inner dim has no GPU kernel yet",
                    n->id);
  int abr = ar > 2 ? ar - 2 : 0, bbr = br > 2 ? br - 2 : 0;
  int obr = abr > bbr ? abr : bbr;
  int64_t ad[IR_MAX_RANK] = {0}, bd[IR_MAX_RANK] = {0}, od[IR_MAX_RANK] = {0};
  for (int i = 0; i < abr; i++)
    ad[i] = cg_dim(a, i);
  for (int i = 0; i < bbr; i++)
    bd[i] = cg_dim(b, i);
  for (int i = 0; i < obr; i++) {
    int ia = i - (obr - abr), ib = i - (obr - bbr);
    int64_t da = ia < 0 ? 1 : ad[ia], db = ib < 0 ? 1 : bd[ib];
    od[i] = da == 1 ? db : da;
  }
  int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK], sy[IR_MAX_RANK], nbatch = 1;
  batch_strides(ad, abr, obr, sa);
  batch_strides(bd, bbr, obr, sb);
  batch_strides(od, obr, obr, sy);
  if (!fl)
    return int_matmul(cg, n, M, K, N, obr, od, sa, sb);
  bool b_shared = true, a_full = true;
  for (int i = 0; i < obr; i++) {
    nbatch *= od[i];
    b_shared = b_shared && (sb[i] == 0 || od[i] == 1);
    a_full = a_full && (i >= obr - abr && ad[i - (obr - abr)] == od[i]);
  }
  GemmStep g = {.a = b, .b = a, .d = y, .dtype = dt, .dtype_d = y->type.dtype,
                .compute = dt == DT_F64 ? DT_F64 : DT_F32, .tf32 = attr_int(n, "tf32") != 0,
                .trans_a = tb, .m = N, .n = M, .k = K, .lda = tb ? K : N, .ldb = K, .ldc = N,
                .batch = 1, .alpha = attr_float(n, "scale"), .beta = 0};
  if (f8 && (!tb || !b_shared || !a_full || av))
    return cg_error(cg, n, "an f8e4m3 matmul (node %d) runs only as one cuBLASLt GEMM of rows "
                    "times weights [N, K] (transpose_b = 1) read directly", n->id);
  if ((cg_epilogue_of(cg, n) || av) && (!(b_shared && a_full) || dt == DT_F64))
    return cg_error(cg, n, "fuse group %lld: a matmul takes an epilogue or an input view only "
                    "as one f32, f16 or bf16 GEMM with shared weights",
                    (long long)node_fuse_group(n));
  int64_t rows = M * nbatch, ld = K; /* A's rows, read ld elements apart */
  if (av && (!view_rows(av, &rows, &ld) || rows != M * nbatch || av->dims[av->rank - 1] != K))
    return cg_error(cg, n, "fuse group %lld: the matmul's input view is no matrix of %" PRId64
                    " rows of %" PRId64, (long long)node_fuse_group(n), M * nbatch, K);
  if (rows > 0 && N > 0 && tc_gemm_fits(n, K, tb, b_shared && a_full, ld, av ? av->offset : 0))
    return tc_choice(cg, n, &g, av, rows, N, K, ld);
  if (b_shared && a_full)
    return gemm_rows(cg, n, &g, av, rows, ld);
  /* Strides in elements, then merge batch dims every operand walks alike. */
  Space s;
  space_init(&s, obr, od);
  int64_t ea[IR_MAX_RANK], eb[IR_MAX_RANK], ey[IR_MAX_RANK];
  for (int i = 0; i < obr; i++) {
    ea[i] = sa[i] * M * K;
    eb[i] = sb[i] * K * N;
    ey[i] = sy[i] * M * N;
  }
  space_add_strides(&s, eb, 0); /* cuBLASLt's A */
  space_add_strides(&s, ea, 0); /* B */
  space_add_strides(&s, ey, 0); /* D */
  space_coalesce(&s);
  int inner = s.rank - 1;
  g.batch = inner >= 0 ? s.dims[inner] : 1;
  g.stride_a = inner >= 0 ? s.stride[0][inner] : 0;
  g.stride_b = inner >= 0 ? s.stride[1][inner] : 0;
  g.stride_d = inner >= 0 ? s.stride[2][inner] : 0;
  int64_t nouter = nbatch / g.batch;
  if (nouter > MAX_GEMM_STEPS)
    return cg_error(cg, n, "matmul (node %d) would need %" PRId64 " GEMM steps for its batch "
                    "broadcasting; at most %d are supported", n->id, nouter, MAX_GEMM_STEPS);
  for (int64_t q = 0; q < nouter; q++) {
    /* the outer batch dims: one step each, at its offsets */
    int64_t r = q;
    g.offset_a = g.offset_b = g.offset_d = 0;
    for (int d = inner - 1; d >= 0; d--) {
      int64_t c = r % s.dims[d];
      r /= s.dims[d];
      g.offset_a += c * s.stride[0][d];
      g.offset_b += c * s.stride[1][d];
      g.offset_d += c * s.stride[2][d];
    }
    add_gemm(cg, n, &g);
  }
  buf_printf(&cg->src, "\n/* node %d: matmul: %" PRId64 " cuBLASLt GEMM step%s (m %" PRId64
             ", n %" PRId64 ", k %" PRId64 ", batch %" PRId64 ")%s, no kernel */\n",
             n->id, nouter, nouter == 1 ? "" : "s", g.m, g.n, g.k, g.batch,
             g.dtype_d != dt ? cg_fmt(cg, ", D in %s", dtype_name(g.dtype_d)) : "");
  return 0;
}

int cg_matmul(Cg *cg, const Node *n) { return matmul(cg, n, NULL); }

int cg_gemm_group(Cg *cg, const GroupPlan *p) {
  if (p->nepilogue && cg_epilogue_begin(cg, p))
    return -1;
  int rc = matmul(cg, p->anchor, p->nview ? &p->operand[0] : NULL);
  return (p->nepilogue && cg_epilogue_end(cg)) || rc ? -1 : 0;
}

/* ---------------------------------------------------------------- det */

enum { DET_MAX = 32 };

/* A thread per matrix: Gaussian elimination with partial pivoting in double, in the
 * thread's own (local) memory, the reference's det_lu step for step, so the result is
 * its bits. Matrices up to DET_MAX square; larger ones keep the clear error. */
int cg_det(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *y = n->out[0];
  int r = x->type.shape.rank;
  int64_t m = cg_dim(x, r - 1), nmat = cg_numel(y);
  if (m > DET_MAX)
    return cg_error(cg, n, "op det (node %d) of %" PRId64 " x %" PRId64 " matrices has no GPU kernel yet: "
                    "at most %d x %d", n->id, m, m, DET_MAX, DET_MAX);
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "a thread per %" PRId64 " x %" PRId64 " matrix, LU in double", m, m));
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, nmat);
  buf_printf(b, "    double a[%" PRId64 "];\n", m * m > 0 ? m * m : 1);
  buf_printf(b, "    for (int e = 0; e < %" PRId64 "; e++) a[e] = %s;\n", m * m,
             cg_load(cg, x->type.dtype, DOM_F64, cg_fmt(cg, "in0[i * %" PRId64 " + e]", m * m)));
  buf_puts(b, "    double det = 1;\n");
  buf_printf(b, "    for (int k = 0; k < %" PRId64 "; k++) {\n", m);
  buf_puts(b, "      int p = k;\n");
  buf_printf(b, "      for (int r = k + 1; r < %" PRId64 "; r++) if (fabs(a[r * %" PRId64 " + k]) > fabs(a[p * %" PRId64 " + k])) p = r;\n", m, m, m);
  buf_printf(b, "      if (a[p * %" PRId64 " + k] == 0) { det = 0; break; }\n", m);
  buf_puts(b, "      if (p != k) {\n");
  buf_printf(b, "        for (int c = 0; c < %" PRId64 "; c++) { const double t = a[k * %" PRId64 " + c]; a[k * %" PRId64 " + c] = a[p * %" PRId64 " + c]; a[p * %" PRId64 " + c] = t; }\n", m, m, m, m, m);
  buf_puts(b, "        det = -det;\n      }\n");
  buf_printf(b, "      det *= a[k * %" PRId64 " + k];\n", m);
  buf_printf(b, "      for (int r = k + 1; r < %" PRId64 "; r++) {\n", m);
  buf_printf(b, "        const double f = a[r * %" PRId64 " + k] / a[k * %" PRId64 " + k];\n", m, m);
  buf_printf(b, "        for (int c = k; c < %" PRId64 "; c++) a[r * %" PRId64 " + c] -= f * a[k * %" PRId64 " + c];\n", m, m, m);
  buf_puts(b, "      }\n    }\n");
  buf_printf(b, "    out0[i] = %s;\n", cg_store(cg, y->type.dtype, DOM_F64, "det"));
  cg_loop_end(cg, n, name, nmat);
  return 0;
}
