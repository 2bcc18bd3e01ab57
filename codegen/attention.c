/* attention.c: the kernel of an attention fuse group (passes/fuse.c):
 *
 *   S = matmul(A, B)        A: queries [.., SQ, D], B: keys transposed [.., D, SK]
 *   S' = pre(S, ...)        pointwise nodes: a scale, a mask add
 *   P = softmax(S', -1)
 *   P' = post(P, ...)       pointwise nodes: the exporters' NaN masking
 *   O = matmul(P', V)       V: values [.., SK, DV]
 *   maybe transpose(O)      the group's output
 *
 * with A, B and V read from the buffers they were cut out of (the group's layout nodes
 * become strides, its scalar multiplies a scale applied as each element is loaded). The
 * SQ x SK matrix never reaches global memory. Every value a node would store (a scaled
 * operand, a score, a probability, the output) is rounded to its type where the node
 * would round it; the math is f32, the sums in the reference's order up to the order of
 * additions. Two kernels:
 *
 * - 16-bit operands (bf16, f16; head sizes a multiple of 16) run on tensor cores
 *   (mma.m16n8k16, f32 accumulators). A warp owns 16 query rows, their queries in
 *   registers; the keys pass through shared memory BC at a time, twice: the first pass
 *   finds each row's max and sum of exponentials (the sum rescaled when the max grows),
 *   the second recomputes the scores, makes the probabilities as the softmax would and
 *   multiplies them, straight from the accumulators, by the values' tile. No row of
 *   scores is kept anywhere, so any number of keys fits.
 * - Otherwise (f32, odd head sizes) a block computes BR query rows of one head on CUDA
 *   cores: the queries go to shared memory; the keys pass through it BC rows at a time,
 *   each warp computing one row's scores for BC keys (a lane per key); the whole row of
 *   SK scores stays in shared memory, where the softmax and the post nodes turn it into
 *   probabilities; then the values pass through the same tile buffer and each thread
 *   accumulates outputs. */
#include "codegen/cg-impl.h"

#include <inttypes.h>
#include <string.h>

enum {
  BC = 32,                  /* keys (or values) per tile: one per lane */
  MAX_ACC = 8,              /* outputs per thread */
};

/* An operand read through a view of an outside buffer, scaled as it loads (the plan's
 * GroupOperand, its scales as literals). */
typedef struct Operand {
  View view;
  const char *scale[GROUP_MAX_SCALES]; /* f32 literals multiplying each element, in order */
  int nscale;
} Operand;

/* f32 expression e as a value of type t would hold it (rounded to t). */
static const char *rounded(Cg *cg, DType t, const char *e) {
  return t == DT_F32 ? e : cg_load(cg, t, DOM_F32, cg_store(cg, t, DOM_F32, e));
}

static void operand(Cg *cg, const GroupOperand *g, Operand *o) {
  memset(o, 0, sizeof *o);
  o->view = g->view;
  for (int i = 0; i < g->nscale; i++) {
    const Value *c = g->scale[i];
    o->scale[o->nscale++] = cg_lit(cg, dtype_load_f64(c->type.dtype, c->data->data), DOM_F32);
  }
}

/* The stride of batch dim k (of nb) of the scores in view o ([.., rows, cols]): 0 where
 * o broadcasts. */
static int64_t batch_stride(const View *o, int k, int nb) {
  int kx = k - (nb - (o->rank - 2));
  return kx < 0 || o->dims[kx] == 1 ? 0 : o->stride[kx];
}

/* The element of operand o at offset e, in f32 (a C expression): (x * c1) * c2, each
 * product rounded to the operand's type, as the nodes would. */
static const char *load(Cg *cg, const Operand *o, int param, const char *e) {
  DType t = o->view.base->type.dtype;
  const char *x = cg_load(cg, t, DOM_F32, cg_fmt(cg, "in%d[%s]", param, e));
  for (int i = 0; i < o->nscale; i++)
    x = rounded(cg, t, cg_fmt(cg, "(%s * %s)", x, o->scale[i]));
  return x;
}

/* Loads BC rows of `width` elements of operand o into the tile kv: row c is key j0 + c,
 * its element t at offset `at` (an expression of c and t); rows past the last key are
 * zeros. */
static void emit_tile(Cg *cg, const Operand *o, int param, int64_t width, int64_t sk,
                      const char *at) {
  Buf *b = &cg->src;
  buf_puts(b, "      __syncthreads();\n");
  buf_printf(b, "      for (int e = tid; e < %" PRId64 "; e += %d) {\n", BC * width, cg->target->block);
  buf_printf(b, "        const int c = e / %" PRId64 ", t = e %% %" PRId64 ";\n", width, width);
  buf_printf(b, "        kv[c][t] = j0 + c < %" PRId64 " ? %s : 0.f;\n", sk, load(cg, o, param, at));
  buf_puts(b, "      }\n      __syncthreads();\n");
}

/* dst = the f32 value val (a score or a probability: the output of node v) after the
 * chain k, if any, each rounded to its type; at is the element's flat index in the
 * scores. */
static void store_score(Cg *cg, const PwKernel *k, const Node *v, const char *at,
                        const char *val, const char *dst, const char *ind) {
  Buf *b = &cg->src;
  DType t = v->out[0]->type.dtype;
  if (!k) {
    buf_printf(b, "%s%s = %s;\n", ind, dst, rounded(cg, t, val));
    return;
  }
  const Value *const *ext, *const *out;
  const Node *const *nodes;
  int next, n;
  cg_epilogue_operands(k, &ext, &next, &out, &nodes, &n);
  DType o = out[0]->type.dtype;
  if (t == DT_F32 && o == DT_F32) {
    cg_chain_emit(cg, k, at, val, dst, ind);
    return;
  }
  buf_printf(b, "%s{\n%s  %s sv;\n", ind, ind, cg_ctype(o));
  cg_chain_emit(cg, k, at, cg_store(cg, t, DOM_F32, val), "sv", cg_fmt(cg, "%s  ", ind));
  buf_printf(b, "%s  %s = %s;\n%s}\n", ind, dst, cg_load(cg, o, DOM_F32, "sv"), ind);
}

/* An attention group, read: its nodes, operands, chains, sizes and the kernel's
 * parameters. */
typedef struct Attn {
  const Node *m1, *m2, *sm, *root;
  Operand q, k, v;
  const PwKernel *pre, *post; /* the pointwise chains after S and after P, or NULL */
  const Value *s, *y;         /* the scores, the group's output */
  const Value **in;           /* parameters: Q, K and V's buffers, then the chains' inputs */
  int nin, rank, nb;
  int64_t sq, sk, d, dv, batch;
  int64_t ostr[IR_MAX_RANK]; /* the output's strides in O's dims (y is O or its transpose) */
  const char *at;            /* the flat index of score (z, i, j), for the chains */
} Attn;

/* The kernel's view of attention plan p: its roles, operands and chains. */
static int read_attention(Cg *cg, const GroupPlan *p, Attn *a) {
  const Node *m1 = p->scores, *m2 = p->values, *root = p->root;
  *a = (Attn){.m1 = m1, .m2 = m2, .sm = p->softmax, .root = root};
  if (p->q.nscale > GROUP_MAX_SCALES || p->k.nscale > GROUP_MAX_SCALES ||
      p->v.nscale > GROUP_MAX_SCALES)
    return cg_error(cg, root, "fuse group %lld: more than %d scales of an attention operand",
                    (long long)node_fuse_group(root), GROUP_MAX_SCALES);
  operand(cg, &p->q, &a->q);
  operand(cg, &p->k, &a->k);
  operand(cg, &p->v, &a->v);
  const Node *const *pre = p->pre, *const *post = p->post;
  int npre = p->npre, npost = p->npost;
  const Node *sm = p->softmax;

  const Value *s = m1->out[0], *y = root->out[0];
  a->s = s;
  a->y = y;
  a->rank = s->type.shape.rank;
  a->nb = a->rank - 2;
  a->sq = cg_dim(s, a->rank - 2);
  a->sk = cg_dim(s, a->rank - 1);
  a->d = a->q.view.dims[a->q.view.rank - 1];
  a->dv = a->v.view.dims[a->v.view.rank - 1];
  a->batch = 1;
  for (int i = 0; i < a->nb; i++)
    a->batch *= cg_dim(s, i);

  /* parameters: in0 queries, in1 keys, in2 values, then the pre and post nodes' inputs */
  const Value *const *pext = NULL, *const *qext = NULL, *const *xo;
  int npext = 0, nqext = 0, xn;
  const Node *const *xnodes;
  if (npre) {
    if (!(a->pre = cg_chain_plan(cg, m1, pre, npre, 3, "s")))
      return -1;
    cg_epilogue_operands(a->pre, &pext, &npext, &xo, &xnodes, &xn);
  }
  if (npost) {
    if (!(a->post = cg_chain_plan(cg, sm, post, npost, 3 + npext, "p")))
      return -1;
    cg_epilogue_operands(a->post, &qext, &nqext, &xo, &xnodes, &xn);
  }
  a->nin = 3 + npext + nqext;
  a->in = arena_alloc(cg->arena, sizeof *a->in * (size_t)a->nin);
  a->in[0] = a->q.view.base;
  a->in[1] = a->k.view.base;
  a->in[2] = a->v.view.base;
  for (int e = 0; e < npext; e++)
    a->in[3 + e] = pext[e];
  for (int e = 0; e < nqext; e++)
    a->in[3 + npext + e] = qext[e];

  int64_t ydims[IR_MAX_RANK], ystr[IR_MAX_RANK];
  for (int i = 0; i < a->rank; i++)
    ydims[i] = cg_dim(y, i);
  contiguous_strides(a->rank, ydims, ystr);
  if (root == m2) {
    memcpy(a->ostr, ystr, sizeof a->ostr);
  } else {
    int np = 0;
    const int64_t *perm = attr_ints(root, "perm", &np);
    for (int i = 0; i < a->rank; i++)
      a->ostr[perm && np == a->rank ? perm[i] : a->rank - 1 - i] = ystr[i];
  }
  a->at = cg_fmt(cg, "(((idx_t)z * %" PRId64 " + i) * %" PRId64 " + j)", a->sq, a->sk);
  return 0;
}

/* The kernel's comment and index type; `how` ends its note. */
static const char *begin_kernel(Cg *cg, const Attn *a, const char *how) {
  const char *head = cg_fmt(cg, "fuse group %lld = attention, nodes %d (scores) .. %d: ",
                            (long long)node_fuse_group(a->root), a->m1->id, a->root->id);
  const char *note = cg_fmt(cg, "%" PRId64 " heads x %" PRId64 " queries x %" PRId64
                            " keys, head size %" PRId64 "/%" PRId64 "; %s", a->batch, a->sq,
                            a->sk, a->d, a->dv, how);
  const char *name = cg_kernel_begin_values(cg, a->root, "attention", head, a->in, a->nin,
                                            &a->y, 1, note);
  int64_t s = cg_numel(a->s), y = cg_numel(a->y);
  buf_printf(&cg->src, "  typedef %s idx_t;\n", cg_idx_type(cg, s > y ? s : y));
  return name;
}

/* The loop over tiles of `rows` query rows of one head: the head z, the tile's first row
 * i0, and z's base offsets in the operands and the output (qb, kb, vb, ob). */
static void begin_tiles(Cg *cg, const Attn *a, int64_t rows) {
  Buf *b = &cg->src;
  int64_t per = (a->sq + rows - 1) / rows;
  buf_printf(b, "  for (int tile = blockIdx.x; tile < %" PRId64 "; tile += gridDim.x) {\n",
             a->batch * per);
  buf_printf(b, "    const int z = tile / %" PRId64 ", i0 = tile %% %" PRId64 " * %" PRId64 ";\n",
             per, per, rows);
  buf_printf(b, "    idx_t qb = %" PRId64 ", kb = %" PRId64 ", vb = %" PRId64 ", ob = 0;\n",
             a->q.view.offset, a->k.view.offset, a->v.view.offset);
  if (!a->nb)
    return;
  buf_puts(b, "    {\n      idx_t zr = z, c;\n");
  for (int i = a->nb - 1; i >= 0; i--) {
    int64_t n = cg_dim(a->s, i);
    buf_printf(b, "      c = zr %% %" PRId64 "; zr /= %" PRId64 ";\n", n, n);
    buf_printf(b, "      qb += c * %" PRId64 "; kb += c * %" PRId64 "; vb += c * %" PRId64
               "; ob += c * %" PRId64 ";\n", batch_stride(&a->q.view, i, a->nb),
               batch_stride(&a->k.view, i, a->nb), batch_stride(&a->v.view, i, a->nb),
               a->ostr[i]);
  }
  buf_puts(b, "    }\n");
}

/* ---------------------------------------------------------------- on tensor cores */

enum {
  MMA_BC = 64,  /* keys per tile */
  MMA_KEEP = 4,  /* key tiles whose scores stay in registers between the passes */
  MMA_WARPS = 8, /* a block's warps: the kernel is written for 8 (row groups x column slices) */
  MMA_THREADS = MMA_WARPS * 32,
};

/* The tensor-core kernel's rows per block (8 warps: 16 rows each, or 2, 4 warps to a row
 * group splitting the output's columns), or 0 when it does not run a: it needs 16-bit
 * operands of one type, probabilities of that type (they go to the second product as
 * the accumulators hold them), and head sizes that are multiples of 16, up to 128. */
static int64_t mma_rows(const Cg *cg, const Attn *a) {
  DType t = a->q.view.base->type.dtype;
  if ((t != DT_BF16 && t != DT_F16) || a->k.view.base->type.dtype != t ||
      a->v.view.base->type.dtype != t || a->m2->in[0]->type.dtype != t || a->d % 16 ||
      a->dv % 16 || a->d > 128 || a->dv > 128)
    return 0;
  int64_t br = 128;
  /* halved while the tiles would not fill the SMs twice over */
  while (br > 32 && a->dv % (8 * MMA_THREADS / br) == 0 &&
         (br / 2 >= a->sq || a->batch * ((a->sq + br - 1) / br) < 2 * cg->target->sms))
    br /= 2;
  return br;
}

/* Whether operand o's rows load as 16-byte vectors of 8 elements along dim cd: stride 1
 * there, and every row's first element at a multiple of 8 (the buffers are 256-byte
 * aligned). */
static bool vec8(const Operand *o, int cd) {
  const View *v = &o->view;
  if (v->stride[cd] != 1 || v->dims[cd] % 8 || v->offset % 8)
    return false;
  for (int i = 0; i < v->rank; i++)
    if (i != cd && v->dims[i] > 1 && v->stride[i] % 8)
      return false;
  return true;
}

/* For an operand with scales: a lambda `fn(u)`, the 16 bits u of the operand's element
 * after them, each product rounded to the type as its node would round it. */
static void emit_scaler(Cg *cg, const Operand *o, const char *fn) {
  if (!o->nscale)
    return;
  DType t = o->view.base->type.dtype;
  const char *x = cg_load(cg, t, DOM_F32, cg_fmt(cg, "%s{(unsigned short)u}", cg_ctype(t)));
  for (int i = 0; i + 1 < o->nscale; i++)
    x = rounded(cg, t, cg_fmt(cg, "(%s * %s)", x, o->scale[i]));
  x = cg_store(cg, t, DOM_F32, cg_fmt(cg, "(%s * %s)", x, o->scale[o->nscale - 1]));
  buf_printf(&cg->src, "  auto %s = [](unsigned u) -> unsigned { return %s.bits; };\n", fn, x);
}

/* The 16 bits u (an unsigned expression) of operand o's element after its scales. */
static const char *scaled(Cg *cg, const Operand *o, const char *fn, const char *u) {
  return o->nscale ? cg_fmt(cg, "%s(%s)", fn, u) : u;
}

/* Loads `rows` rows of operand o (param p, scaler sc) into the pairs dst[r][c / 2]: row r
 * is element first + r of the dim of stride rs, column c of the dim cd of stride cs, up
 * to `width` columns; rows from `limit` on are zeros. */
static void emit_rows(Cg *cg, const Operand *o, int p, const char *sc, int cd, int64_t rows,
                      int64_t width, const char *base, const char *first, int64_t limit,
                      int64_t rs, const char *dst, const char *ind) {
  Buf *b = &cg->src;
  int64_t cs = o->view.stride[cd];
  bool vec = vec8(o, cd);
  int per = vec ? 8 : 2; /* elements a thread loads at once */
  buf_printf(b, "%sfor (int e = tid; e < %" PRId64 "; e += %d) {\n", ind, rows * width / per,
             MMA_THREADS);
  buf_printf(b, "%s  const int r = e / %" PRId64 ", c = e %% %" PRId64 " * %d;\n", ind,
             width / per, width / per, per);
  if (vec) {
    buf_printf(b, "%s  gc_vec<unsigned, 4> u = {};\n", ind);
    buf_printf(b, "%s  if (%s + r < %" PRId64 ") u = *(const gc_vec<unsigned, 4> *)(in%d + %s + "
               "(idx_t)(%s + r) * %" PRId64 " + c);\n", ind, first, limit, p, base, first, rs);
    if (o->nscale)
      buf_printf(b, "%s  for (int h = 0; h < 4; h++) u.e[h] = %s | %s << 16;\n", ind,
                 scaled(cg, o, sc, "u.e[h] & 0xffffu"), scaled(cg, o, sc, "u.e[h] >> 16"));
    buf_printf(b, "%s  *(gc_vec<unsigned, 4> *)&%s[r][c / 2] = u;\n%s}\n", ind, dst, ind);
    return;
  }
  const char *el = scaled(cg, o, sc, cg_fmt(cg, "(unsigned)in%d[%s + (idx_t)(%s + r) * %" PRId64
                                            " + (idx_t)(c + %%d) * %" PRId64 "].bits",
                                            p, base, first, rs, cs));
  buf_printf(b, "%s  %s[r][c / 2] = %s + r < %" PRId64 " ? %s | %s << 16 : 0u;\n%s}\n", ind, dst,
             first, limit, cg_fmt(cg, el, 0), cg_fmt(cg, el, 1), ind);
}

/* The values' tile, keys j0.. as pairs of rows: sm.kv.v[t][jp] holds column t of
 * keys j0 + 2 jp and j0 + 2 jp + 1 (the B operand of P V), zeros past the last key. A warp
 * stores eight columns of all 32 pairs (each lane loading 16 bytes of two rows), so that
 * its stores fall in 32 banks, as the fragments' loads do. */
static void emit_values(Cg *cg, const Attn *a) {
  Buf *b = &cg->src;
  const Operand *o = &a->v;
  int cd = o->view.rank - 1;
  int64_t rs = o->view.stride[cd - 1], cs = o->view.stride[cd], dv = a->dv;
  if (vec8(o, cd)) {
    buf_printf(b, "      for (int e = tid; e < %" PRId64 "; e += %d) {\n", MMA_BC / 2 * dv / 8,
               MMA_THREADS);
    buf_printf(b, "        const int jp = e %% %d, c = e / %d * 8, j = j0 + 2 * jp;\n", MMA_BC / 2,
               MMA_BC / 2);
    buf_puts(b, "        gc_vec<unsigned, 4> u0 = {}, u1 = {};\n");
    for (int h = 0; h < 2; h++)
      buf_printf(b, "        if (j + %d < %" PRId64 ") u%d = *(const gc_vec<unsigned, 4> *)(in2 + vb + "
                 "(idx_t)(j + %d) * %" PRId64 " + c);\n", h, a->sk, h, h, rs);
    buf_puts(b, "        for (int h = 0; h < 4; h++) {\n");
    for (int h = 0; h < 2 && o->nscale; h++)
      buf_printf(b, "          u%d.e[h] = %s | %s << 16;\n", h,
                 scaled(cg, o, "scv", cg_fmt(cg, "u%d.e[h] & 0xffffu", h)),
                 scaled(cg, o, "scv", cg_fmt(cg, "u%d.e[h] >> 16", h)));
    buf_puts(b, "          sm.kv.v[c + 2 * h][jp] = (u0.e[h] & 0xffffu) | u1.e[h] << 16;\n"
                "          sm.kv.v[c + 2 * h + 1][jp] = u0.e[h] >> 16 | (u1.e[h] & 0xffff0000u);\n"
                "        }\n      }\n");
    return;
  }
  const char *el = scaled(cg, o, "scv", cg_fmt(cg, "(unsigned)in2[vb + (idx_t)(j + %%d) * %" PRId64
                                               " + (idx_t)t * %" PRId64 "].bits", rs, cs));
  buf_printf(b, "      for (int e = tid; e < %" PRId64 "; e += %d) {\n", MMA_BC / 2 * dv, MMA_THREADS);
  buf_printf(b, "        const int t = e %% %" PRId64 ", jp = e / %" PRId64 ", j = j0 + 2 * jp;\n",
             dv, dv);
  buf_printf(b, "        sm.kv.v[t][jp] = (j < %" PRId64 " ? %s : 0u) | (j + 1 < %" PRId64
             " ? %s : 0u) << 16;\n      }\n", a->sk, cg_fmt(cg, el, 0), a->sk, cg_fmt(cg, el, 1));
}

/* The element (i, j) of the scores that accumulator e of n8 tile nt holds, clamped into
 * the scores (so that the chains read inside their inputs), and ok: whether it is one. */
static void emit_element(Cg *cg, const Attn *a, const char *ind) {
  buf_printf(&cg->src,
             "%sconst int ie = ia + (e >> 1) * 8, je = j0 + nt * 8 + 2 * t4 + (e & 1);\n"
             "%sconst bool ok = ie < %" PRId64 " && je < %" PRId64 ";\n"
             "%sconst int i = min(ie, %" PRId64 "), j = min(je, %" PRId64 ");\n",
             ind, ind, a->sq, a->sk, ind, a->sq - 1, a->sk - 1);
}

/* One key tile's scores of the warp's 16 rows: s[nt][e] for key j0 + nt * 8 + 2 t4 + (e & 1)
 * of row ia + (e >> 1) * 8, after the pre nodes; -inf outside the scores. */
static void emit_scores(Cg *cg, const Attn *a, const char *mma) {
  Buf *b = &cg->src;
  buf_printf(b, "      float s[%d][4] = {};\n", MMA_BC / 8);
  buf_printf(b, "#pragma unroll\n      for (int kk = 0; kk < %" PRId64 "; kk++)\n", a->d / 16);
  buf_printf(b, "#pragma unroll\n        for (int nt = 0; nt < %d; nt++) {\n", MMA_BC / 8);
  buf_puts(b, "          const unsigned fb[2] = {sm.kv.k[nt * 8 + g][kk * 8 + t4], "
              "sm.kv.k[nt * 8 + g][kk * 8 + 4 + t4]};\n");
  buf_printf(b, "          %s(s[nt], qf[kk], fb);\n        }\n", mma);
  buf_printf(b, "#pragma unroll\n      for (int nt = 0; nt < %d; nt++)\n", MMA_BC / 8);
  buf_puts(b, "#pragma unroll\n        for (int e = 0; e < 4; e++) {\n");
  emit_element(cg, a, "          ");
  buf_puts(b, "          float x;\n");
  store_score(cg, a->pre, a->m1, a->at, "s[nt][e]", "x", "          ");
  buf_puts(b, "          s[nt][e] = ok ? x : -GC_INF;\n        }\n");
}

/* The running max and sum of exponentials of the lane's two rows, over tile s. */
static void emit_stats(Cg *cg) {
  buf_printf(&cg->src,
      "#pragma unroll\n"
      "      for (int h = 0; h < 2; h++) {\n"
      "        float m = mx[h];\n"
      "#pragma unroll\n"
      "        for (int nt = 0; nt < %d; nt++) m = fmax(m, fmax(s[nt][2 * h], s[nt][2 * h + 1]));\n"
      "        m = fmax(m, __shfl_xor_sync(0xffffffffu, m, 1));\n"
      "        m = fmax(m, __shfl_xor_sync(0xffffffffu, m, 2));\n"
      "        const float ref = isinf(m) ? 0.f : m, rl = ref * L2E;\n"
      "        float l = isinf(mx[h]) ? 0.f : sum[h] * exp2f(fmaf(mx[h], L2E, -rl));\n"
      "#pragma unroll\n"
      "        for (int nt = 0; nt < %d; nt++) l += exp2f(fmaf(s[nt][2 * h], L2E, -rl)) + exp2f(fmaf(s[nt][2 * h + 1], L2E, -rl));\n"
      "        mx[h] = m;\n"
      "        sum[h] = l;\n"
      "      }\n",
      MMA_BC / 8, MMA_BC / 8);
}

/* The probabilities of tile s (the scores), as the softmax and the post nodes make them,
 * times the values' tile, into the accumulators o. */
static void emit_probs(Cg *cg, const Attn *a, const char *mma, int64_t dvw) {
  Buf *b = &cg->src;
  DType t = a->q.view.base->type.dtype;
  buf_printf(b, "#pragma unroll\n      for (int nt = 0; nt < %d; nt++)\n", MMA_BC / 8);
  buf_puts(b, "#pragma unroll\n        for (int e = 0; e < 4; e++) {\n");
  emit_element(cg, a, "          ");
  buf_puts(b, "          const float prob = exp2f(fmaf(s[nt][e], L2E, -mxl[e >> 1])) * rs[e >> 1];\n"
              "          float x;\n");
  store_score(cg, a->post, a->sm, a->at, "prob", "x", "          ");
  const char *bits = cg_fmt(cg, "(unsigned)%s.bits", cg_store(cg, t, DOM_F32, "%s"));
  buf_printf(b,
      "          s[nt][e] = ok ? x : 0.f;\n        }\n"
      "#pragma unroll\n"
      "      for (int kk = 0; kk < %d; kk++) {\n"
      "        /* the accumulators of keys kk * 16.. are the A fragment of those keys */\n"
      "        const unsigned fa[4] = {%s | %s << 16, %s | %s << 16,\n"
      "                                %s | %s << 16, %s | %s << 16};\n"
      "#pragma unroll\n"
      "        for (int nt = 0; nt < %" PRId64 "; nt++) {\n"
      "          const int c = cs * %" PRId64 " + nt * 8 + g;\n"
      "          const unsigned fb[2] = {sm.kv.v[c][kk * 8 + t4], sm.kv.v[c][kk * 8 + 4 + t4]};\n"
      "          %s(o[nt], fa, fb);\n"
      "        }\n"
      "      }\n",
      MMA_BC / 16, cg_fmt(cg, bits, "s[2 * kk][0]"), cg_fmt(cg, bits, "s[2 * kk][1]"),
      cg_fmt(cg, bits, "s[2 * kk][2]"), cg_fmt(cg, bits, "s[2 * kk][3]"),
      cg_fmt(cg, bits, "s[2 * kk + 1][0]"), cg_fmt(cg, bits, "s[2 * kk + 1][1]"),
      cg_fmt(cg, bits, "s[2 * kk + 1][2]"), cg_fmt(cg, bits, "s[2 * kk + 1][3]"), dvw / 8, dvw,
      mma);
}

static int emit_mma(Cg *cg, const Attn *a, int64_t br) {
  DType t = a->q.view.base->type.dtype;
  const char *mma = t == DT_BF16 ? "gc_mma_bf16" : "gc_mma_f16";
  int64_t rg = br / 16, cs = 8 / rg, dvw = a->dv / cs, dw = a->d / 2;
  int64_t tiles = a->batch * ((a->sq + br - 1) / br), nkt = (a->sk + MMA_BC - 1) / MMA_BC;
  /* the scores of the first pass stay in registers for the second, as pairs of 16-bit
   * values, when they are stored in the operands' type and there are few tiles of them;
   * otherwise the second pass computes them again */
  bool keep = a->sm->in[0]->type.dtype == t && nkt <= MMA_KEEP;
  cg->min_blocks = 2; /* 128 registers: two blocks of 8 warps on an SM */
  cg->threads = MMA_THREADS;
  const char *name = begin_kernel(cg, a, cg_fmt(cg, "on tensor cores, %" PRId64 " query rows "
                                                "per block, %d keys per tile%s", br, MMA_BC,
                                                keep ? ", the scores kept in registers" : ""));
  Buf *b = &cg->src;
  buf_printf(b,
      "  /* pairs of 16-bit values: the queries' tile, then the keys' and the values' */\n"
      "  __shared__ union alignas(16) { unsigned q[%" PRId64 "][%" PRId64 "]; struct { "
      "unsigned k[%d][%" PRId64 "]; unsigned v[%" PRId64 "][%d]; } kv; } sm;\n",
      br, dw + 4, MMA_BC, dw + 4, a->dv, MMA_BC / 2 + 4);
  buf_puts(b, "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, "
              "t4 = lane & 3;\n"
              "  const float L2E = 1.44269504f; /* exp(x) = 2^(x log2(e)) */\n");
  buf_printf(b, "  /* warp: rows rg * 16.., output columns cs * %" PRId64 ".. */\n", dvw);
  if (cs == 1) /* constant: the fragments' addresses too */
    buf_puts(b, "  const int rg = warp, cs = 0;\n");
  else
    buf_printf(b, "  const int rg = warp %% %" PRId64 ", cs = warp / %" PRId64 ";\n", rg, rg);
  emit_scaler(cg, &a->q, "scq");
  emit_scaler(cg, &a->k, "sck");
  emit_scaler(cg, &a->v, "scv");
  begin_tiles(cg, a, br);
  int r = a->rank;
  buf_puts(b, "    __syncthreads();\n");
  emit_rows(cg, &a->q, 0, "scq", r - 1, br, a->d, "qb", "i0", a->sq, a->q.view.stride[r - 2],
            "sm.q", "    ");
  buf_printf(b,
      "    __syncthreads();\n"
      "    unsigned qf[%" PRId64 "][4];\n"
      "#pragma unroll\n"
      "    for (int kk = 0; kk < %" PRId64 "; kk++) {\n"
      "      const int r = rg * 16 + g;\n"
      "      qf[kk][0] = sm.q[r][kk * 8 + t4]; qf[kk][1] = sm.q[r + 8][kk * 8 + t4];\n"
      "      qf[kk][2] = sm.q[r][kk * 8 + 4 + t4]; qf[kk][3] = sm.q[r + 8][kk * 8 + 4 + t4];\n"
      "    }\n"
      "    const int ia = i0 + rg * 16 + g; /* this lane's rows: ia and ia + 8 */\n"
      "    float mx[2] = {-GC_INF, -GC_INF}, sum[2] = {0.f, 0.f};\n",
      a->d / 16, a->d / 16);
  const char *keys = keep ? cg_fmt(cg, "#pragma unroll\n"
                                       "    for (int jt = 0; jt < %" PRId64 "; jt++) {\n"
                                       "      const int j0 = jt * %d;\n"
                                       "      __syncthreads();\n", nkt, MMA_BC)
                          : cg_fmt(cg, "    for (int j0 = 0; j0 < %" PRId64 "; j0 += %d) {\n"
                                       "      __syncthreads();\n", a->sk, MMA_BC);
  const char *pack = cg_fmt(cg, "(unsigned)%s.bits | (unsigned)%s.bits << 16",
                            cg_store(cg, t, DOM_F32, "s[nt][%d]"), cg_store(cg, t, DOM_F32, "s[nt][%d]"));
  const char *half = cg_load(cg, t, DOM_F32, cg_fmt(cg, "%s{(unsigned short)(%%s)}", cg_ctype(t)));
  if (keep)
    buf_printf(b, "    unsigned sp[%" PRId64 "][%d][2]; /* the scores, kept */\n", nkt, MMA_BC / 8);
  buf_puts(b, "    /* pass 1: each row's max and its sum of exponentials, rescaled as the max grows */\n");
  buf_puts(b, keys);
  emit_rows(cg, &a->k, 1, "sck", r - 2, MMA_BC, a->d, "kb", "j0", a->sk, a->k.view.stride[r - 1],
            "sm.kv.k", "      ");
  buf_puts(b, "      __syncthreads();\n");
  emit_scores(cg, a, mma);
  emit_stats(cg);
  if (keep)
    buf_printf(b, "#pragma unroll\n"
               "      for (int nt = 0; nt < %d; nt++) {\n"
               "        sp[jt][nt][0] = %s;\n        sp[jt][nt][1] = %s;\n      }\n",
               MMA_BC / 8, cg_fmt(cg, pack, 0, 1), cg_fmt(cg, pack, 2, 3));
  buf_printf(b,
      "    }\n"
      "    float rs[2], mxl[2]; /* 1 / the sum, the max times log2(e) */\n"
      "#pragma unroll\n"
      "    for (int h = 0; h < 2; h++) {\n"
      "      float l = sum[h];\n"
      "      l += __shfl_xor_sync(0xffffffffu, l, 1);\n"
      "      l += __shfl_xor_sync(0xffffffffu, l, 2);\n"
      "      rs[h] = 1.f / l;\n"
      "      mxl[h] = isinf(mx[h]) ? 0.f : mx[h] * L2E;\n"
      "    }\n"
      "    /* pass 2: the probabilities, as the softmax makes them, times the values */\n"
      "    float o[%" PRId64 "][4] = {};\n", dvw / 8);
  buf_puts(b, keys);
  if (!keep)
    emit_rows(cg, &a->k, 1, "sck", r - 2, MMA_BC, a->d, "kb", "j0", a->sk,
              a->k.view.stride[r - 1], "sm.kv.k", "      ");
  emit_values(cg, a);
  buf_puts(b, "      __syncthreads();\n");
  if (keep)
    buf_printf(b, "      float s[%d][4];\n"
               "#pragma unroll\n"
               "      for (int nt = 0; nt < %d; nt++)\n"
               "#pragma unroll\n"
               "        for (int e = 0; e < 4; e++) s[nt][e] = %s;\n",
               MMA_BC / 8, MMA_BC / 8,
               cg_fmt(cg, half, "sp[jt][nt][e >> 1] >> (e & 1) * 16 & 0xffffu"));
  else
    emit_scores(cg, a, mma);
  emit_probs(cg, a, mma, dvw);
  /* the output: a lane's two neighbouring columns as one store where they are adjacent */
  bool pairs = a->ostr[r - 1] == 1;
  for (int i = 0; i < r - 1; i++)
    pairs = pairs && a->ostr[i] % 2 == 0;
  const char *T = cg_ctype(a->y->type.dtype);
  buf_printf(b, "    }\n#pragma unroll\n    for (int nt = 0; nt < %" PRId64 "; nt++)\n", dvw / 8);
  if (pairs)
    buf_printf(b,
        "#pragma unroll\n"
        "      for (int h = 0; h < 2; h++) {\n"
        "        const int i = ia + h * 8, c = cs * %" PRId64 " + nt * 8 + 2 * t4;\n"
        "        if (i < %" PRId64 ") *(gc_vec<%s, 2> *)(out0 + ob + (idx_t)i * %" PRId64 " + c) = {%s, %s};\n"
        "      }\n",
        dvw, a->sq, T, a->ostr[r - 2], cg_store(cg, a->y->type.dtype, DOM_F32, "o[nt][2 * h]"),
        cg_store(cg, a->y->type.dtype, DOM_F32, "o[nt][2 * h + 1]"));
  else
    buf_printf(b,
        "#pragma unroll\n"
        "      for (int e = 0; e < 4; e++) {\n"
        "        const int i = ia + (e >> 1) * 8, c = cs * %" PRId64 " + nt * 8 + 2 * t4 + (e & 1);\n"
        "        if (i < %" PRId64 ") out0[ob + (idx_t)i * %" PRId64 " + (idx_t)c * %" PRId64 "] = %s;\n"
        "      }\n",
        dvw, a->sq, a->ostr[r - 2], a->ostr[r - 1],
        cg_store(cg, a->y->type.dtype, DOM_F32, "o[nt][e]"));
  buf_puts(b, "  }\n}\n");
  cg_kernel_step_values(cg, a->root, name, cg_blocks(cg, tiles, 1), MMA_THREADS, a->in, a->nin,
                        &a->y, 1);
  return 0;
}

/* ---------------------------------------------------------------- on CUDA cores */

static int emit_simt(Cg *cg, const Attn *a) {
  int64_t sq = a->sq, sk = a->sk, d = a->d, dv = a->dv, batch = a->batch;
  int64_t kd = d > dv ? d : dv, skp = (sk + BC - 1) / BC * BC;
  /* BR: rows per block, as many as fit in static shared memory while the grid still fills
   * the SMs twice over */
  int block = cg->target->block;
  int64_t br = 0;
  for (int64_t c = 32; c >= 1; c /= 2) {
    bool fits = (c * d + BC * (kd + 1) + c * skp) * 4 <= cg->target->smem_block &&
                c * dv <= MAX_ACC * block;
    if (!fits)
      continue;
    br = c;
    if (batch * ((sq + c - 1) / c) >= 2 * cg->target->sms || c == 4)
      break;
  }
  if (!br)
    return cg_error(cg, a->root, "fuse group %lld: attention of %" PRId64 " keys and head size "
                    "%" PRId64 " does not fit the kernel's shared memory",
                    (long long)node_fuse_group(a->root), sk, kd);
  int64_t tiles = batch * ((sq + br - 1) / br);
  int64_t nacc = (br * dv + block - 1) / block;
  const char *name = begin_kernel(cg, a, cg_fmt(cg, "on CUDA cores, %" PRId64 " query rows per block", br));
  Buf *b = &cg->src;
  buf_printf(b, "  __shared__ float qs[%" PRId64 "][%" PRId64 "];\n", br, d);
  buf_printf(b, "  __shared__ float kv[%d][%" PRId64 "];\n", BC, kd + 1);
  buf_printf(b, "  __shared__ float sc[%" PRId64 "][%" PRId64 "];\n", br, skp);
  buf_puts(b, "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n");
  begin_tiles(cg, a, br);
  const View *qv = &a->q.view, *kvw = &a->k.view, *vv = &a->v.view;
  int64_t qsi = qv->stride[qv->rank - 2], qsd = qv->stride[qv->rank - 1];
  int64_t ksd = kvw->stride[kvw->rank - 2], ksj = kvw->stride[kvw->rank - 1];
  int64_t vsj = vv->stride[vv->rank - 2], vsd = vv->stride[vv->rank - 1];
  /* the queries */
  buf_printf(b, "    for (int e = tid; e < %" PRId64 "; e += %d) {\n", br * d, block);
  buf_printf(b, "      const int r = e / %" PRId64 ", c = e %% %" PRId64 ";\n", d, d);
  buf_printf(b, "      qs[r][c] = i0 + r < %" PRId64 " ? %s : 0.f;\n", sq,
             load(cg, &a->q, 0, cg_fmt(cg, "qb + (idx_t)(i0 + r) * %" PRId64 " + (idx_t)c * %" PRId64,
                                       qsi, qsd)));
  buf_puts(b, "    }\n");
  /* the scores, BC keys at a time: warp w computes rows w, w + 8, ...; lane c key j0 + c */
  buf_printf(b, "    for (int j0 = 0; j0 < %" PRId64 "; j0 += %d) {\n", sk, BC);
  emit_tile(cg, &a->k, 1, d, sk,
            cg_fmt(cg, "kb + (idx_t)t * %" PRId64 " + (idx_t)(j0 + c) * %" PRId64, ksd, ksj));
  buf_printf(b, "      for (int r = warp; r < %" PRId64 "; r += %d) {\n", br, block / 32);
  buf_printf(b, "        const int i = i0 + r, j = j0 + lane;\n");
  buf_printf(b, "        if (i >= %" PRId64 " || j >= %" PRId64 ") continue;\n", sq, sk);
  buf_puts(b, "        float acc = 0.f;\n");
  buf_printf(b, "#pragma unroll 8\n        for (int t = 0; t < %" PRId64 "; t++) acc = fmaf(qs[r][t], kv[lane][t], acc);\n", d);
  store_score(cg, a->pre, a->m1, a->at, "acc", "sc[r][j]", "        ");
  buf_puts(b, "      }\n    }\n    __syncthreads();\n");
  /* the softmax of each row, as codegen's softmax kernel computes it, then the post nodes */
  buf_printf(b, "    for (int r = warp; r < %" PRId64 "; r += %d) {\n", br, block / 32);
  buf_printf(b, "      const int i = i0 + r;\n      if (i >= %" PRId64 ") continue;\n", sq);
  buf_puts(b, "      float m = -GC_INF;\n");
  buf_printf(b, "      for (int j = lane; j < %" PRId64 "; j += 32) m = fmax(m, sc[r][j]);\n", sk);
  buf_puts(b, "      for (int w = 16; w; w >>= 1) m = fmax(m, __shfl_xor_sync(0xffffffffu, m, w));\n");
  buf_puts(b, "      if (isinf(m)) m = 0;\n      float sum = 0.f;\n");
  buf_printf(b, "      for (int j = lane; j < %" PRId64 "; j += 32) sum += exp(sc[r][j] - m);\n", sk);
  buf_puts(b, "      for (int w = 16; w; w >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, w);\n");
  buf_puts(b, "      const float rs = 1.f / sum;\n");
  buf_printf(b, "      for (int j = lane; j < %" PRId64 "; j += 32) {\n", sk);
  buf_puts(b, "        const float prob = exp(sc[r][j] - m) * rs;\n");
  store_score(cg, a->post, a->sm, a->at, "prob", "sc[r][j]", "        ");
  buf_puts(b, "      }\n    }\n");
  /* the output: thread tid accumulates elements tid, tid + block, ... of the BR x DV tile */
  buf_printf(b, "    float out[%" PRId64 "];\n#pragma unroll\n", nacc);
  buf_printf(b, "    for (int a = 0; a < %" PRId64 "; a++) out[a] = 0.f;\n", nacc);
  buf_printf(b, "    for (int j0 = 0; j0 < %" PRId64 "; j0 += %d) {\n", sk, BC);
  emit_tile(cg, &a->v, 2, dv, sk,
            cg_fmt(cg, "vb + (idx_t)(j0 + c) * %" PRId64 " + (idx_t)t * %" PRId64, vsj, vsd));
  buf_printf(b, "      const int nj = %" PRId64 " - j0 < %d ? %" PRId64 " - j0 : %d;\n", sk, BC, sk, BC);
  buf_printf(b, "#pragma unroll\n      for (int a = 0; a < %" PRId64 "; a++) {\n", nacc);
  buf_printf(b, "        const int e = tid + a * %d, r = e / %" PRId64 ", t = e %% %" PRId64 ";\n",
             block, dv, dv);
  buf_printf(b, "        if (r >= %" PRId64 ") break;\n", br);
  buf_puts(b, "        for (int c = 0; c < nj; c++) out[a] = fmaf(sc[r][j0 + c], kv[c][t], out[a]);\n");
  buf_puts(b, "      }\n    }\n");
  buf_printf(b, "#pragma unroll\n    for (int a = 0; a < %" PRId64 "; a++) {\n", nacc);
  buf_printf(b, "      const int e = tid + a * %d, r = e / %" PRId64 ", t = e %% %" PRId64 ";\n",
             block, dv, dv);
  buf_printf(b, "      if (r < %" PRId64 " && i0 + r < %" PRId64 ")\n", br, sq);
  buf_printf(b, "        out0[ob + (idx_t)(i0 + r) * %" PRId64 " + (idx_t)t * %" PRId64 "] = %s;\n",
             a->ostr[a->rank - 2], a->ostr[a->rank - 1],
             cg_store(cg, a->y->type.dtype, DOM_F32, "out[a]"));
  buf_puts(b, "    }\n    __syncthreads();\n  }\n}\n");
  cg_kernel_step_values(cg, a->root, name, cg_blocks(cg, tiles * block, block),
                        block, a->in, a->nin, &a->y, 1);
  return 0;
}

int cg_attention(Cg *cg, const GroupPlan *p) {
  Attn a;
  if (read_attention(cg, p, &a))
    return -1;
  int64_t br = mma_rows(cg, &a);
  return br ? emit_mma(cg, &a, br) : emit_simt(cg, &a);
}
