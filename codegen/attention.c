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
 * become strides, its multiplies and divisions by scalars scales applied as each element
 * is loaded; GQA's repeat of K and V, an expand merged into the heads, a batch dim whose
 * index is divided by the repeat: query head h reads kv head h / rep, and nothing writes
 * the copies). The SQ x SK matrix never reaches global memory. Every value a node would
 * store (a scaled operand, a score, a probability, the output) is rounded to its type
 * where the node would round it; the math is f32, the sums in the reference's order up to
 * the order of additions. Two kernels:
 *
 * - 16-bit operands (bf16, f16; head sizes a multiple of 16, up to 128) run on tensor
 *   cores (mma.m16n8k16, f32 accumulators). A block of 8 warps owns up to 128 query rows,
 *   a warp 16 of them (or 256 and 32 in a variant: two fragments of 16 rows that share
 *   each key and value fragment the warp reads), their queries in registers (ldmatrix).
 *   The keys and the values pass through shared memory a tile of 64 (32 for large
 *   heads) at a time, copied by cp.async in two stages: tile jt + 1 is in flight while
 *   tile jt is multiplied, its fragments read by ldmatrix (.trans for the values, which
 *   stay rows of keys as in memory). Rows
 *   of 16-byte vectors are copied (scaled in place after they arrive); others go through
 *   registers. Where the blocks would leave SMs idle (few heads, long sequences: Whisper's
 *   8 x 1500), a block takes fewer rows and its warps split every tile's keys into 2 or 4
 *   slices, their maxima, sums and outputs combined through shared memory at the end.
 *   A warp takes its slice 32 keys at a time (the scores' registers). The work on each
 *   score is what dominates, not the products: one ex2 (flushing subnormals), no masking
 *   but in a partial last tile (rows past the last query compute what no one stores), and
 *   the probabilities rounded once, two in one instruction, straight into the A
 *   fragment's pairs. The pre and post nodes read their inputs at the score's
 *   coordinates (the head's terms once a tile, then i and j times their strides, no
 *   division), so that the compiler loads a key's padding mask once for the lane's rows
 *   and a scalar once.
 *   Two ways over the keys, by a rule (untimed; a choice step could time both):
 *   - Two passes where the scores fit in registers (up to 256 keys a warp) or the post
 *     nodes are other than the exporters' NaN masking: the first finds each row's max and
 *     sum of exponentials (the sum rescaled when the max grows), the second makes the
 *     probabilities exactly as the softmax node would (exp(s - max) / sum, rounded to its
 *     type), applies the post nodes and multiplies them, straight from the accumulators,
 *     by the values' tile. The scores are computed again in the second pass unless kept.
 *   - Otherwise one pass, an online softmax (FlashAttention), which saves the scores'
 *     second product: each tile raises the rows' running max, rescales the outputs and
 *     the sums so far to it (the outputs only where some row of the warp's max grew: after
 *     the first tiles it seldom does), and multiplies exp(s - the running max), rounded to the
 *     operands' type, by the values; the end divides by the sum (key slices: the slices'
 *     maxima, sums and outputs combined first). A row whose sum is not finite and
 *     positive (every score -inf, a NaN or a +inf among them) is one where the softmax
 *     node's probabilities hold a NaN: its output is NaN, or 0 under the NaN masking
 *     (where(is_nan(P), Z, P), Z a constant of zeros), as the unfused nodes give. The
 *     probabilities that meet the values are rounded before the division, not the
 *     softmax's: each output moves by about sqrt(2/3) of a rounding (u: 2^-8 in bf16)
 *     times the outputs' root mean square where the unfused nodes agree with the two
 *     passes to ties: on emulate.py's cases 2e-3 by norm in bf16, 3e-4 in fp16
 *     (docs/precision.md allows 5e-2 and 1e-2 for a model), 0.2-3% of the elements beyond
 *     two steps of the type; those cases allow 4u times the outputs' rms.
 *   Both take the exponents as 2^(s c - m c), c = log2(e), one fma a score; a row whose
 *   max m is below -1e38 (every key hidden by a finite mask near the type's largest value)
 *   takes c = 2^-64 instead, as m log2(e) would overflow (row_factor).
 *   No row of scores is kept anywhere, so any number of keys fits.
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
  const char *scale[GROUP_MAX_SCALES]; /* f32 literals applied to each element, in order */
  const char *op[GROUP_MAX_SCALES];    /* "*" or "/": multiplying or dividing by scale[i] */
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
    o->op[o->nscale] = g->divide[i] ? "/" : "*";
    o->scale[o->nscale++] = cg_lit(cg, dtype_load_f64(c->type.dtype, c->data->data), DOM_F32);
  }
}

/* The offset in view o ([.., rows, cols]) of index c (a C variable) along batch dim k
 * (of nb) of the scores: c * stride, c / div * stride where o's dim repeats each head div
 * times (grouped-query attention's K and V: ir/view.c), "" where o broadcasts. */
static const char *batch_term(Cg *cg, const View *o, int k, int nb, const char *c) {
  int kx = k - (nb - (o->rank - 2));
  if (kx < 0 || o->dims[kx] == 1 || o->stride[kx] == 0)
    return "";
  if (o->div[kx] > 1)
    return cg_fmt(cg, "%s / %" PRId64 " * %" PRId64, c, o->div[kx], o->stride[kx]);
  return cg_fmt(cg, "%s * %" PRId64, c, o->stride[kx]);
}

/* The element of operand o at offset e, in f32 (a C expression): (x * c1) / c2 ..., each
 * result rounded to the operand's type, as the nodes would. */
static const char *load(Cg *cg, const Operand *o, int param, const char *e) {
  DType t = o->view.base->type.dtype;
  const char *x = cg_load(cg, t, DOM_F32, cg_fmt(cg, "in%d[%s]", param, e));
  for (int i = 0; i < o->nscale; i++)
    x = rounded(cg, t, cg_fmt(cg, "(%s %s %s)", x, o->op[i], o->scale[i]));
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

typedef struct Attn Attn;
static void chain_emit(Cg *cg, const Attn *a, const PwKernel *k, const char *val,
                       const char *dst, const char *ind);

/* dst = the f32 value val (a score or a probability: the output of node v) after the
 * chain k, if any, each rounded to its type; the element is score (z, i, j). */
static void store_score(Cg *cg, const Attn *a, const PwKernel *k, const Node *v,
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
    chain_emit(cg, a, k, val, dst, ind);
    return;
  }
  buf_printf(b, "%s{\n%s  %s sv;\n", ind, ind, cg_ctype(o));
  chain_emit(cg, a, k, cg_store(cg, t, DOM_F32, val), "sv", cg_fmt(cg, "%s  ", ind));
  buf_printf(b, "%s  %s = %s;\n%s}\n", ind, dst, cg_load(cg, o, DOM_F32, "sv"), ind);
}

/* An attention group, read: its nodes, operands, chains, sizes and the kernel's
 * parameters. */
struct Attn {
  const Node *m1, *m2, *sm, *root;
  Operand q, k, v;
  const PwKernel *pre, *post; /* the pointwise chains after S and after P, or NULL */
  const Value *s, *y;         /* the scores, the group's output */
  const Value **in;           /* parameters: Q, K and V's buffers, then the chains' inputs */
  int nin, rank, nb;
  int64_t sq, sk, d, dv, batch;
  int64_t ostr[IR_MAX_RANK]; /* the output's strides in O's dims (y is O or its transpose) */
  const char *at;            /* the flat index of score (z, i, j), for the chains */
  /* or (coords) the score's coordinates, z's batch dims zc0.. then i and j: the chains'
   * inputs read at the sums of coordinates times strides (cg_chain_emit_coords) */
  bool coords;
  const char *coord[IR_MAX_RANK];
  bool nan_mask;             /* the post nodes are where(is_nan(P), 0, P) (a constant 0) */
};

/* Whether chain k (NULL: none) can read its inputs at the scores' coordinates: its
 * output has the scores' shape and it stores nothing beside. */
static bool chain_coords(const PwKernel *k, const Value *s) {
  if (!k)
    return true;
  const Value *const *ext, *const *out;
  const Node *const *nodes;
  int next, n;
  cg_epilogue_operands(k, &ext, &next, &out, &nodes, &n);
  const Shape *x = &out[0]->type.shape, *y = &s->type.shape;
  if (!cg_chain_coords_ok(k) || x->rank != y->rank)
    return false;
  for (int i = 0; i < x->rank; i++)
    if (x->dims[i].n != y->dims[i].n)
      return false;
  return true;
}

static void chain_emit(Cg *cg, const Attn *a, const PwKernel *k, const char *val,
                       const char *dst, const char *ind) {
  if (a->coords)
    cg_chain_emit_coords(cg, k, a->nb, a->coord, val, dst, ind);
  else
    cg_chain_emit(cg, k, a->at, val, dst, ind);
}

/* Whether nodes post (after softmax sm) are the exporters' NaN masking, where(is_nan(P),
 * Z, P) with Z a constant of zeros: what a row of probabilities that are not all finite
 * (a fully masked row's 0 / 0) becomes, where the kernel of one pass knows the row only
 * at the end. */
static bool is_nan_mask(const Node *sm, const Node *const *post, int npost) {
  if (npost != 2 || post[0]->op != OP_IS_NAN || post[1]->op != OP_WHERE ||
      post[0]->in[0] != sm->out[0] || post[1]->in[0] != post[0]->out[0] ||
      post[1]->in[2] != sm->out[0])
    return false;
  const Value *z = post[1]->in[1];
  if (z->kind != VK_CONST || !z->data || !z->data->data)
    return false;
  int64_t n = tensor_numel(z->data);
  size_t es = dtype_size(z->data->dtype);
  for (int64_t i = 0; i < n; i++)
    if (dtype_load_f64(z->data->dtype, (const char *)z->data->data + (size_t)i * es) != 0)
      return false;
  return n > 0;
}

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
  a->nan_mask = is_nan_mask(sm, post, npost);

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
  a->coords = chain_coords(a->pre, s) && chain_coords(a->post, s);
  for (int i = 0; i < a->nb; i++)
    a->coord[i] = cg_fmt(cg, "zc%d", i);
  a->coord[a->nb] = "i";
  a->coord[a->nb + 1] = "j";
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
  /* the operands' buffers too: a view may read a larger one (a projection's slice) */
  int64_t s = cg_numel(a->s), y = cg_numel(a->y);
  const Value *in[3] = {a->q.view.base, a->k.view.base, a->v.view.base};
  for (int i = 0; i < 3; i++)
    y = cg_numel(in[i]) > y ? cg_numel(in[i]) : y;
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
  bool zc = a->coords && (a->pre || a->post) && a->nb;
  if (zc) {
    buf_puts(b, "    int");
    for (int i = 0; i < a->nb; i++)
      buf_printf(b, "%s zc%d", i ? "," : "", i);
    buf_puts(b, "; /* z's coordinates, for the chains */\n");
  }
  if (a->nb)
    buf_puts(b, "    {\n      idx_t zr = z, c;\n");
  for (int i = a->nb - 1; i >= 0; i--) {
    int64_t n = cg_dim(a->s, i);
    buf_printf(b, "      c = zr %% %" PRId64 "; zr /= %" PRId64 ";\n", n, n);
    const View *w[3] = {&a->q.view, &a->k.view, &a->v.view};
    const char *base[3] = {"qb", "kb", "vb"};
    buf_puts(b, "     ");
    for (int o = 0; o < 3; o++) {
      const char *t = batch_term(cg, w[o], i, a->nb, "c");
      if (*t)
        buf_printf(b, " %s += %s;", base[o], t);
    }
    buf_printf(b, " ob += c * %" PRId64 ";", a->ostr[i]);
    buf_printf(b, zc ? " zc%d = (int)c;\n" : "\n", i);
  }
  if (a->nb)
    buf_puts(b, "    }\n");
  if (a->coords) { /* the chains' inputs' offsets at z */
    if (a->pre)
      cg_chain_bases(cg, a->pre, a->nb, a->coord, "    ");
    if (a->post)
      cg_chain_bases(cg, a->post, a->nb, a->coord, "    ");
  }
}

/* dst = the 16 bits of probability val (an f32 expression) as the post nodes, if any,
 * make it, each node's value rounded to its type (the last is the values' type: the second
 * product's operand); the chain's element is at (i, j). */
static void store_prob_bits(Cg *cg, const Attn *a, const char *val, const char *dst,
                            const char *ind) {
  Buf *b = &cg->src;
  DType t = a->sm->out[0]->type.dtype;
  if (!a->post) {
    buf_printf(b, "%s%s = %s.bits;\n", ind, dst, cg_store(cg, t, DOM_F32, val));
    return;
  }
  buf_printf(b, "%s{\n%s  %s sv;\n", ind, ind, cg_ctype(a->m2->in[0]->type.dtype));
  chain_emit(cg, a, a->post, cg_store(cg, t, DOM_F32, val), "sv", cg_fmt(cg, "%s  ", ind));
  buf_printf(b, "%s  %s = sv.bits;\n%s}\n", ind, dst, ind);
}

/* ---------------------------------------------------------------- on tensor cores */

enum {
  MMA_WARPS = 8, /* a block's warps: the kernel is written for 8 (row groups x key slices) */
  MMA_THREADS = MMA_WARPS * 32,
  MMA_TILE = 64, /* keys a tile at most (halved while two stages do not fit) */
  MMA_PAD = 4,   /* pairs (8 elements) after each row of a shared tile: the 16-byte rows that
                    ldmatrix reads at once then fall in different banks */
  MMA_KEEP = 256, /* keys a warp may keep the scores of in registers between the passes */
  ATTN_MAX_SHAPES = 5, /* a family's shapes: row groups of 8, 4 and 2, one pass, two
                          fragments of rows a warp */
};

/* The tensor-core kernel's shape: rg row groups of 16 queries times ks key slices (a warp
 * each, rg * ks = 8), tiles of tk keys, a slice kc = tk / ks of every tile to a warp, which
 * takes kw keys of it at a time (32 at most: the scores' registers). */
typedef struct MmaShape {
  int64_t rg, ks, tk, kc, kw, nkt; /* ... and nkt tiles */
  int64_t mr;                  /* m16 fragments of rows a warp: 1, or 2 (one pass, no key
                                  slices), each fragment of keys and values it reads then
                                  serving two of rows (half the shared-memory reads) */
  bool keep;                   /* the first pass's scores stay in registers for the second */
  bool online;                 /* one pass, an online softmax (no keep) */
} MmaShape;

/* Bytes of the kernel's shared memory: a union of the queries' tile, two stages of the
 * keys' and the values' tiles and (key slices) the slices' outputs, then their statistics. */
static int64_t mma_smem(const Attn *a, int64_t rg, int64_t ks, int64_t tk, int64_t mr) {
  int64_t q = rg * 16 * mr * (a->d / 2 + MMA_PAD) * 4;
  int64_t st = 2 * tk * (a->d / 2 + MMA_PAD + a->dv / 2 + MMA_PAD) * 4;
  int64_t part = ks > 1 ? rg * 16 * a->dv * 4 : 0;
  int64_t u = q > st ? q : st;
  return (u > part ? u : part) + (ks > 1 ? ks * rg * 16 * 2 * 4 : 0);
}

/* The shape of rg row groups (ks = MMA_WARPS / rg key slices) over tiles of tk keys into
 * *m, the tiles halved while a tile would hold only keys past the end; false where the
 * kernel cannot take it: key slices need at least 2 row groups, 16 keys a slice and keys
 * in every slice, and the shared memory must fit. */
static bool mma_finish(const Attn *a, int64_t rg, int64_t tk, int64_t smem, MmaShape *m) {
  int64_t ks = MMA_WARPS / rg;
  if (rg < 1 || ks * rg != MMA_WARPS ||
      (ks > 1 && (rg < 2 || tk / ks < 16 || 16 * (ks - 1) >= a->sk)) ||
      mma_smem(a, rg, ks, tk, 1) > smem)
    return false;
  *m = (MmaShape){.rg = rg, .ks = ks, .tk = tk, .mr = 1};
  while (m->tk / 2 >= a->sk && m->tk / 2 >= 16 * m->ks) /* no tile of keys only past the end */
    m->tk /= 2;
  m->kc = m->tk / m->ks;
  m->kw = m->kc < 32 ? m->kc : 32;
  m->nkt = (a->sk + m->tk - 1) / m->tk;
  m->keep = a->sm->in[0]->type.dtype == a->q.view.base->type.dtype && m->nkt * m->kc <= MMA_KEEP;
  /* one pass where two would compute the scores twice, if the post nodes allow it: none,
   * or the NaN masking, which the end of the pass applies to whole rows */
  m->online = !m->keep && (!a->post || a->nan_mask);
  return true;
}

/* The tensor-core kernel's default shape for a (variant 0), or false when it does not run
 * a: it needs 16-bit operands of one type, probabilities of that type (they go to the
 * second product as the accumulators hold them), and head sizes that are multiples of
 * 16, up to 128. *tk gets the tile the shapes start from: MMA_TILE keys, halved while two
 * stages of 8 row groups' tiles do not fit. */
static bool mma_shape(const Cg *cg, const Attn *a, MmaShape *m, int64_t *tk) {
  DType t = a->q.view.base->type.dtype;
  if ((t != DT_BF16 && t != DT_F16) || a->k.view.base->type.dtype != t ||
      a->v.view.base->type.dtype != t || a->m2->in[0]->type.dtype != t || a->d % 16 ||
      a->dv % 16 || a->d > 128 || a->dv > 128)
    return false;
  int smem = cg->target->smem_block;
  *tk = MMA_TILE;
  while (*tk > 16 && mma_smem(a, MMA_WARPS, 1, *tk, 1) > smem)
    *tk /= 2;
  if (mma_smem(a, MMA_WARPS, 1, *tk, 1) > smem)
    return false;
  /* warps to key slices (fewer rows a block) while a block's rows would cover a head's
   * queries twice over or the blocks would leave SMs without one, and every slice has
   * keys: Whisper's 8 heads of 1500 queries make 96 blocks of 128 rows, 192 of 64. The
   * default of the family below, which the runtime times against the other shapes:
   * fewer rows a block fill the SMs more evenly but read the keys and values from L2 more
   * often. */
  int64_t rg = MMA_WARPS;
  for (;;) {
    int64_t half = rg / 2, rows = rg * 16;
    MmaShape probe;
    bool want = half * 16 >= a->sq || a->batch * ((a->sq + rows - 1) / rows) < cg->target->sms;
    if (!want || !mma_finish(a, half, *tk, smem, &probe))
      break;
    rg = half;
  }
  return mma_finish(a, rg, *tk, smem, m);
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
    x = rounded(cg, t, cg_fmt(cg, "(%s %s %s)", x, o->op[i], o->scale[i]));
  x = cg_store(cg, t, DOM_F32, cg_fmt(cg, "(%s %s %s)", x, o->op[o->nscale - 1],
                                      o->scale[o->nscale - 1]));
  buf_printf(&cg->src, "  auto %s = [](unsigned u) -> unsigned { return %s.bits; };\n", fn, x);
}

/* The 16 bits u (an unsigned expression) of operand o's element after its scales. */
static const char *scaled(Cg *cg, const Operand *o, const char *fn, const char *u) {
  return o->nscale ? cg_fmt(cg, "%s(%s)", fn, u) : u;
}

/* Rows of an operand bound for a shared tile: operand o (parameter p, scaler sc), `rows`
 * rows of `width` elements, row r element first + r of the dim of stride rs (rows from
 * limit on are zeros), column c of dim cd, into the pairs dst[r][c / 2]. */
typedef struct TileLoad {
  const Operand *o;
  int p, cd;
  const char *sc, *base, *first, *dst;
  int64_t rows, width, limit, rs;
} TileLoad;

/* The loop header that gives the block's threads elements e of n, each thread its
 * elements tid, tid + MMA_THREADS, ...: a count known when the kernel is written, the
 * loop unrolled (a loop from tid, whose trips the compiler cannot know, made more
 * instructions than the copies). Its body follows, indented by ind and two spaces. */
static void for_elements(Cg *cg, const char *ind, int64_t n) {
  int64_t trips = (n + MMA_THREADS - 1) / MMA_THREADS;
  buf_printf(&cg->src, "#pragma unroll\n%sfor (int ei = 0; ei < %" PRId64 "; ei++) {\n"
             "%s  const int e = tid + ei * %d;\n", ind, trips, ind, MMA_THREADS);
  if (n % MMA_THREADS)
    buf_printf(&cg->src, "%s  if (e >= %" PRId64 ") break;\n", ind, n);
}

/* Starts tile load l: rows of 16-byte vectors by cp.async (16 bytes of zeros past the
 * limit), in flight until the caller waits for them, others through registers, scaled on
 * the way. */
static void emit_load(Cg *cg, const TileLoad *l, const char *ind) {
  Buf *b = &cg->src;
  const Operand *o = l->o;
  if (vec8(o, l->cd)) {
    for_elements(cg, ind, l->rows * l->width / 8);
    buf_printf(b, "%s  const int r = e / %" PRId64 ", c = e %% %" PRId64 " * 8;\n", ind,
               l->width / 8, l->width / 8);
    buf_printf(b, "%s  gc_cp16(&%s[r][c / 2], in%d, %s + (idx_t)(%s + r) * %" PRId64 " + c, "
               "%s + r < %" PRId64 ");\n%s}\n", ind, l->dst, l->p, l->base, l->first, l->rs,
               l->first, l->limit, ind);
    return;
  }
  int64_t cs = o->view.stride[l->cd];
  const char *el = scaled(cg, o, l->sc, cg_fmt(cg, "(unsigned)in%d[%s + (idx_t)(%s + r) * %" PRId64
                                               " + (idx_t)(c + %%d) * %" PRId64 "].bits",
                                               l->p, l->base, l->first, l->rs, cs));
  for_elements(cg, ind, l->rows * l->width / 2);
  buf_printf(b, "%s  const int r = e / %" PRId64 ", c = e %% %" PRId64 " * 2;\n", ind,
             l->width / 2, l->width / 2);
  buf_printf(b, "%s  %s[r][c / 2] = %s + r < %" PRId64 " ? %s | %s << 16 : 0u;\n%s}\n", ind,
             l->dst, l->first, l->limit, cg_fmt(cg, el, 0), cg_fmt(cg, el, 1), ind);
}

/* Once tile load l has arrived: the scales of the rows it copied by cp.async, applied in
 * place by the threads that copied them (the copies a thread waited for are its own). */
static void emit_load_scale(Cg *cg, const TileLoad *l, const char *ind) {
  const Operand *o = l->o;
  if (!o->nscale || !vec8(o, l->cd))
    return;
  for_elements(cg, ind, l->rows * l->width / 8);
  buf_printf(&cg->src,
             "%s  const int r = e / %" PRId64 ", c = e %% %" PRId64 " * 8;\n"
             "%s  unsigned *u = &%s[r][c / 2];\n"
             "%s  if (%s + r < %" PRId64 ")\n"
             "%s    for (int h = 0; h < 4; h++) u[h] = %s | %s << 16;\n"
             "%s}\n",
             ind, l->width / 8, l->width / 8, ind, l->dst, ind, l->first, l->limit, ind, scaled(cg, o, l->sc, "u[h] & 0xffffu"),
             scaled(cg, o, l->sc, "u[h] >> 16"), ind);
}

/* The keys' (k) and the values' (v) tile loads of the key tile starting at key `first`
 * into stage `stage`. */
static int tile_loads(Cg *cg, const Attn *a, const MmaShape *m, bool k, bool v,
                      const char *first, const char *stage, TileLoad *l) {
  int r = a->rank, n = 0;
  if (k)
    l[n++] = (TileLoad){.o = &a->k, .p = 1, .cd = r - 2, .sc = "sck", .base = "kb",
                        .first = first, .dst = cg_fmt(cg, "sm.st[%s].k", stage), .rows = m->tk,
                        .width = a->d, .limit = a->sk, .rs = a->k.view.stride[r - 1]};
  if (v)
    l[n++] = (TileLoad){.o = &a->v, .p = 2, .cd = r - 1, .sc = "scv", .base = "vb",
                        .first = first, .dst = cg_fmt(cg, "sm.st[%s].v", stage), .rows = m->tk,
                        .width = a->dv, .limit = a->sk, .rs = a->v.view.stride[r - 2]};
  return n;
}

static void indent_from(Cg *cg, size_t from);

/* The function that rounds two f32 values to 16-bit type t, a pair in one word (one
 * instruction: the preamble's). */
static const char *pack2(DType t) { return t == DT_BF16 ? "gc_f2bf2" : "gc_f2h2"; }

/* A per-row array of the warp (name, or name[mi]: its fragment mi of rows, two or more). */
static const char *ar(Cg *cg, const MmaShape *m, const char *name) {
  return m->mr > 1 ? cg_fmt(cg, "%s[mi]", name) : name;
}

/* The first row of the lane's fragment of rows (ia, or ia + mi * 16). */
static const char *row0(const MmaShape *m) { return m->mr > 1 ? "(ia + mi * 16)" : "ia"; }

/* A loop over the warp's fragments of rows, unrolled, when there are several: what follows
 * up to mi_end is indented by two more spaces. */
static size_t mi_begin(Cg *cg, const MmaShape *m, const char *ind) {
  if (m->mr > 1)
    buf_printf(&cg->src, "#pragma unroll\n%sfor (int mi = 0; mi < %" PRId64 "; mi++) {\n", ind,
               m->mr);
  return cg->src.len;
}

static void mi_end(Cg *cg, const MmaShape *m, size_t from, const char *ind) {
  if (m->mr > 1) {
    indent_from(cg, from);
    buf_printf(&cg->src, "%s}\n", ind);
  }
}

/* The kept scores of the warp's keys jw.. (registers: constant indices in unrolled loops) */
static const char *kept(Cg *cg, const MmaShape *m) {
  return m->kw < m->kc ? cg_fmt(cg, "sp[jt * %" PRId64 " + kh]", m->kc / m->kw) : "sp[jt]";
}

/* Indents what the kernel's source holds from offset `from` on by two more spaces. */
static void indent_from(Cg *cg, size_t from) {
  Buf *b = &cg->src;
  const char *text = cg_fmt(cg, "%s", b->s + from);
  b->len = from;
  b->s[from] = '\0';
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n');
    int n = nl ? (int)(nl - p) + 1 : (int)strlen(p);
    buf_printf(b, "%s%.*s", *p == '#' || *p == '\n' ? "" : "  ", n, p);
    p += n;
  }
}

/* A pass over the key tiles, two stages in flight: tile jt + 1's copies start before tile
 * jt's math, which `body` emits (keys j0.. of stage st; the warp's slice from jw). */
static void emit_pass(Cg *cg, const Attn *a, const MmaShape *m, bool k, bool v,
                      void (*body)(Cg *, const Attn *, const MmaShape *)) {
  Buf *b = &cg->src;
  TileLoad l[2];
  int n = tile_loads(cg, a, m, k, v, "jn", "sn", l);
  buf_puts(b, "    {\n      const int jn = 0, sn = 0;\n");
  for (int i = 0; i < n; i++)
    emit_load(cg, &l[i], "      ");
  buf_puts(b, "      gc_cp_commit();\n    }\n");
  if (m->keep)
    buf_puts(b, "#pragma unroll\n");
  buf_printf(b, "    for (int jt = 0; jt < %" PRId64 "; jt++) {\n"
             "      const int j0 = jt * %" PRId64 ", st = jt & 1;\n"
             "      if (jt + 1 < %" PRId64 ") {\n"
             "        const int jn = j0 + %" PRId64 ", sn = st ^ 1;\n",
             m->nkt, m->tk, m->nkt, m->tk);
  for (int i = 0; i < n; i++)
    emit_load(cg, &l[i], "        ");
  buf_puts(b, "      }\n      gc_cp_commit();\n      gc_cp_wait<1>();\n");
  n = tile_loads(cg, a, m, k, v, "j0", "st", l);
  for (int i = 0; i < n; i++)
    emit_load_scale(cg, &l[i], "      ");
  buf_puts(b, "      __syncthreads();\n");
  if (m->kw == m->kc) {
    buf_printf(b, "      const int jw = j0 + ks * %" PRId64 "; /* the warp's keys */\n", m->kc);
    body(cg, a, m);
  } else {
    buf_printf(b, "#pragma unroll\n"
               "      for (int kh = 0; kh < %" PRId64 "; kh++) {\n"
               "        const int jw = j0 + ks * %" PRId64 " + kh * %" PRId64 "; /* the warp's keys */\n",
               m->kc / m->kw, m->kc, m->kw);
    size_t from = b->len;
    body(cg, a, m);
    indent_from(cg, from);
    buf_puts(b, "      }\n");
  }
  buf_puts(b, "      __syncthreads();\n    }\n");
}

/* For chain k: the element (i, j) of the scores that accumulator e of n8 tile nt holds,
 * clamped into the scores (so that the chain reads inside its inputs: rows past the last
 * query compute what no one stores, keys past the last are masked after). */
static void emit_element(Cg *cg, const Attn *a, const MmaShape *m, const PwKernel *k,
                         const char *ind) {
  if (k)
    buf_printf(&cg->src,
               "%sconst int i = min(%s + (e >> 1) * 8, %" PRId64 "), "
               "j = min(jw + nt * 8 + 2 * t4 + (e & 1), %" PRId64 ");\n",
               ind, row0(m), a->sq - 1, a->sk - 1);
}

/* Where the last tile is partial: statement `stmt` for the warp's elements e of n8 tile nt
 * past the last key. */
static void emit_tail(Cg *cg, const Attn *a, const MmaShape *m, const char *stmt) {
  if (a->sk % m->tk == 0)
    return;
  buf_printf(&cg->src, "      if (j0 + %" PRId64 " > %" PRId64 ") /* the last tile: keys past the end */\n",
             m->tk, a->sk);
  const char *in = m->mr > 1 ? "  " : "";
  if (m->mr > 1)
    buf_printf(&cg->src, "#pragma unroll\n        for (int mi = 0; mi < %" PRId64 "; mi++)\n", m->mr);
  buf_printf(&cg->src,
             "#pragma unroll\n"
             "%s        for (int nt = 0; nt < %" PRId64 "; nt++)\n"
             "#pragma unroll\n"
             "%s          for (int e = 0; e < 4; e++)\n"
             "%s            if (jw + nt * 8 + 2 * t4 + (e & 1) >= %" PRId64 ") %s;\n",
             in, m->kw / 8, in, in, a->sk, stmt);
}

/* The warp's scores of its slice of the tile: s[nt][e] for key jw + nt * 8 + 2 t4 + (e & 1)
 * of row ia + (e >> 1) * 8, after the pre nodes; -inf past the last key. The keys'
 * fragments by ldmatrix: two n8 tiles' of 16 dims at a time. */
static void emit_scores(Cg *cg, const Attn *a, const MmaShape *m) {
  Buf *b = &cg->src;
  const char *mma = a->q.view.base->type.dtype == DT_BF16 ? "gc_mma_bf16" : "gc_mma_f16";
  if (m->mr > 1)
    buf_printf(b, "      float s[%" PRId64 "][%" PRId64 "][4] = {};\n", m->mr, m->kw / 8);
  else
    buf_printf(b, "      float s[%" PRId64 "][4] = {};\n", m->kw / 8);
  buf_printf(b, "#pragma unroll\n      for (int kk = 0; kk < %" PRId64 "; kk++)\n", a->d / 16);
  buf_printf(b, "#pragma unroll\n        for (int nt = 0; nt < %" PRId64 "; nt += 2) {\n"
             "          unsigned fb[4];\n"
             "          gc_ldsm4(fb, &sm.st[st].k[jw - j0 + nt * 8 + (lm >> 1) * 8 + lr][kk * 8 + "
             "(lm & 1) * 4]);\n", m->kw / 8);
  if (m->mr > 1)
    buf_printf(b, "#pragma unroll\n"
               "          for (int mi = 0; mi < %" PRId64 "; mi++) {\n"
               "            %s(s[mi][nt], qf[mi][kk], fb);\n"
               "            %s(s[mi][nt + 1], qf[mi][kk], fb + 2);\n"
               "          }\n        }\n", m->mr, mma, mma);
  else
    buf_printf(b, "          %s(s[nt], qf[kk], fb);\n"
               "          %s(s[nt + 1], qf[kk], fb + 2);\n        }\n", mma, mma);
  size_t from = mi_begin(cg, m, "      ");
  const char *S = ar(cg, m, "s");
  buf_printf(b, "#pragma unroll\n      for (int nt = 0; nt < %" PRId64 "; nt++)\n", m->kw / 8);
  if (!a->pre && a->m1->out[0]->type.dtype == DT_BF16) {
    /* rounded to bf16 a pair at a time: a bf16 is the high half of the f32 it widens to */
    buf_printf(b, "#pragma unroll\n        for (int h = 0; h < 2; h++) {\n"
                  "          const unsigned u = gc_f2bf2(%s[nt][2 * h], %s[nt][2 * h + 1]);\n"
                  "          %s[nt][2 * h] = __uint_as_float(u << 16);\n"
                  "          %s[nt][2 * h + 1] = __uint_as_float(u & 0xffff0000u);\n"
                  "        }\n", S, S, S, S);
  } else {
    const char *el = cg_fmt(cg, "%s[nt][e]", S);
    buf_puts(b, "#pragma unroll\n        for (int e = 0; e < 4; e++) {\n");
    emit_element(cg, a, m, a->pre, "          ");
    store_score(cg, a, a->pre, a->m1, el, el, "          ");
    buf_puts(b, "        }\n");
  }
  mi_end(cg, m, from, "      ");
  emit_tail(cg, a, m, cg_fmt(cg, "%s[nt][e] = -GC_INF", m->mr > 1 ? "s[mi]" : "s"));
}

/* The factor of a row's exponents, 2^((s - m) c) for max m: log2(e), or where m * log2(e)
 * would overflow f32 (m below -1e38: every key of the row hidden by a finite mask such as
 * bf16's -3.39e38) 2^-64, which gives the keys at the max 1 and the others, a step of
 * the scores' type below at least (2^103 in f32), 0 as exp does. */
static const char *row_factor(Cg *cg, const char *m) {
  return cg_fmt(cg, "(%s < -1e38f ? 5.42101086e-20f : L2E)", m);
}

/* The statements that make `float var` row h's max: the running max mx[h] and the lane's
 * scores of the tile (ntiles of 8 keys), over the row's four threads. */
static const char *row_max(Cg *cg, const MmaShape *m, const char *var, int64_t ntiles) {
  const char *S = ar(cg, m, "s");
  return cg_fmt(cg,
      "        float %s = %s[h];\n"
      "#pragma unroll\n"
      "        for (int nt = 0; nt < %" PRId64 "; nt++) %s = fmax(%s, fmax(%s[nt][2 * h], %s[nt][2 * h + 1]));\n"
      "        %s = fmax(%s, __shfl_xor_sync(0xffffffffu, %s, 1));\n"
      "        %s = fmax(%s, __shfl_xor_sync(0xffffffffu, %s, 2));\n",
      var, ar(cg, m, "mx"), ntiles, var, var, S, S, var, var, var, var, var, var);
}

/* Pass 1's tile: the scores, the running max and sum of exponentials of the lane's two
 * rows, and (keep) the scores packed in the operands' type. */
static void emit_stats(Cg *cg, const Attn *a, const MmaShape *m) {
  Buf *b = &cg->src;
  emit_scores(cg, a, m);
  buf_printf(b,
      "#pragma unroll\n"
      "      for (int h = 0; h < 2; h++) {\n"
      "%s"
      "        const float ref = isinf(m) ? 0.f : m, c = %s, rl = ref * c;\n"
      "        float l = isinf(mx[h]) ? 0.f : sum[h] * gc_ex2(fmaf(mx[h], c, -rl));\n"
      "#pragma unroll\n"
      "        for (int nt = 0; nt < %" PRId64 "; nt++) l += gc_ex2(fmaf(s[nt][2 * h], c, -rl)) + gc_ex2(fmaf(s[nt][2 * h + 1], c, -rl));\n"
      "        mx[h] = m;\n"
      "        sum[h] = l;\n"
      "      }\n",
      row_max(cg, m, "m", m->kw / 8), row_factor(cg, "m"), m->kw / 8);
  if (!m->keep)
    return;
  const char *pack = pack2(a->q.view.base->type.dtype);
  buf_printf(b, "#pragma unroll\n"
             "      for (int nt = 0; nt < %" PRId64 "; nt++) {\n"
             "        %s[nt][0] = %s(s[nt][0], s[nt][1]);\n"
             "        %s[nt][1] = %s(s[nt][2], s[nt][3]);\n      }\n",
             m->kw / 8, kept(cg, m), pack, kept(cg, m), pack);
}

static void emit_pv(Cg *cg, const Attn *a, const MmaShape *m);

/* Pass 2's tile: the scores (kept or computed again), the probabilities as the softmax and
 * the post nodes make them, times the values' tile into the accumulators o. */
static void emit_probs(Cg *cg, const Attn *a, const MmaShape *m) {
  Buf *b = &cg->src;
  DType t = a->q.view.base->type.dtype;
  if (m->keep) {
    const char *half = cg_load(cg, t, DOM_F32, cg_fmt(cg, "%s{(unsigned short)(%%s)}", cg_ctype(t)));
    buf_printf(b, "      float s[%" PRId64 "][4];\n"
               "#pragma unroll\n"
               "      for (int nt = 0; nt < %" PRId64 "; nt++)\n"
               "#pragma unroll\n"
               "        for (int e = 0; e < 4; e++) s[nt][e] = %s;\n",
               m->kw / 8, m->kw / 8, cg_fmt(cg, half, cg_fmt(cg, "%s[nt][e >> 1] >> (e & 1) * 16 & 0xffffu", kept(cg, m))));
  } else {
    emit_scores(cg, a, m);
  }
  buf_printf(b, "      unsigned pp[%" PRId64 "][2]; /* the probabilities, pairs of 16 bits */\n", m->kw / 8);
  buf_printf(b, "#pragma unroll\n      for (int nt = 0; nt < %" PRId64 "; nt++)\n", m->kw / 8);
  buf_puts(b, "#pragma unroll\n        for (int e = 0; e < 4; e++) {\n");
  emit_element(cg, a, m, a->post, "          ");
  buf_puts(b, "          const float prob = gc_ex2(fmaf(s[nt][e], cl[e >> 1], -mxl[e >> 1])) * rs[e >> 1];\n");
  buf_puts(b, "          unsigned x;\n");
  store_prob_bits(cg, a, "prob", "x", "          ");
  buf_puts(b, "          pp[nt][e >> 1] = e & 1 ? pp[nt][e >> 1] | x << 16 : x;\n        }\n");
  emit_tail(cg, a, m, "pp[nt][e >> 1] &= e & 1 ? 0xffffu : 0xffff0000u");
  emit_pv(cg, a, m);
}

/* The probabilities pp (pairs of 16 bits, the warp's keys jw..) times the values' tile of
 * stage st into the accumulators o; the values' fragments by ldmatrix.trans, two n8 tiles'
 * of 16 keys at a time. */
static void emit_pv(Cg *cg, const Attn *a, const MmaShape *m) {
  const char *mma = a->q.view.base->type.dtype == DT_BF16 ? "gc_mma_bf16" : "gc_mma_f16";
  if (m->mr > 1) {
    buf_printf(&cg->src,
        "#pragma unroll\n"
        "      for (int kk = 0; kk < %" PRId64 "; kk++)\n"
        "#pragma unroll\n"
        "        for (int nt = 0; nt < %" PRId64 "; nt += 2) {\n"
        "          unsigned fb[4];\n"
        "          gc_ldsm4t(fb, &sm.st[st].v[jw - j0 + kk * 16 + (lm & 1) * 8 + lr][nt * 4 + (lm >> 1) * 4]);\n"
        "#pragma unroll\n"
        "          for (int mi = 0; mi < %" PRId64 "; mi++) {\n"
        "            /* the accumulators of keys kk * 16.. are the A fragment of those keys */\n"
        "            const unsigned fa[4] = {pp[mi][2 * kk][0], pp[mi][2 * kk][1], pp[mi][2 * kk + 1][0], pp[mi][2 * kk + 1][1]};\n"
        "            %s(o[mi][nt], fa, fb);\n"
        "            %s(o[mi][nt + 1], fa, fb + 2);\n"
        "          }\n"
        "        }\n",
        m->kw / 16, a->dv / 8, m->mr, mma, mma);
    return;
  }
  buf_printf(&cg->src,
      "#pragma unroll\n"
      "      for (int kk = 0; kk < %" PRId64 "; kk++) {\n"
      "        /* the accumulators of keys kk * 16.. are the A fragment of those keys */\n"
      "        const unsigned fa[4] = {pp[2 * kk][0], pp[2 * kk][1], pp[2 * kk + 1][0], pp[2 * kk + 1][1]};\n"
      "#pragma unroll\n"
      "        for (int nt = 0; nt < %" PRId64 "; nt += 2) {\n"
      "          unsigned fb[4];\n"
      "          gc_ldsm4t(fb, &sm.st[st].v[jw - j0 + kk * 16 + (lm & 1) * 8 + lr][nt * 4 + (lm >> 1) * 4]);\n"
      "          %s(o[nt], fa, fb);\n"
      "          %s(o[nt + 1], fa, fb + 2);\n"
      "        }\n"
      "      }\n",
      m->kw / 16, a->dv / 8, mma, mma);
}

/* The one pass's tile: the scores, each row's running max (the outputs and the sum
 * rescaled where it grows), exp(s - the running max) rounded to the operands' type times
 * the values' tile into the accumulators o, and (unrounded) into the lane's sum. */
static void emit_online(Cg *cg, const Attn *a, const MmaShape *m) {
  Buf *b = &cg->src;
  emit_scores(cg, a, m);
  if (m->mr > 1)
    buf_printf(b, "      unsigned pp[%" PRId64 "][%" PRId64 "][2]; /* exp(s - the running max), pairs of 16 bits */\n",
               m->mr, m->kw / 8);
  size_t from = mi_begin(cg, m, "      ");
  const char *MX = ar(cg, m, "mx"), *SUM = ar(cg, m, "sum"), *MXL = ar(cg, m, "mxl");
  const char *CL = ar(cg, m, "cl"), *O = ar(cg, m, "o"), *S = ar(cg, m, "s"), *PP = ar(cg, m, "pp");
  buf_printf(b,
      "      float al[2]; /* what the outputs and sums so far are multiplied by */\n"
      "#pragma unroll\n"
      "      for (int h = 0; h < 2; h++) {\n"
      "%s"
      "        const float c = %s, rl = isinf(mt) ? 0.f : mt * c;\n"
      "        al[h] = mt == %s[h] ? 1.f : isinf(%s[h]) ? 0.f : gc_ex2(fmaf(%s[h], c, -rl));\n"
      "        %s[h] = mt;\n"
      "        %s[h] = rl;\n"
      "        %s[h] = c;\n"
      "        %s[h] *= al[h];\n"
      "      }\n"
      "      if (__any_sync(0xffffffffu, al[0] != 1.f || al[1] != 1.f)) /* a max grew */\n"
      "#pragma unroll\n"
      "        for (int nt = 0; nt < %" PRId64 "; nt++)\n"
      "#pragma unroll\n"
      "          for (int e = 0; e < 4; e++) %s[nt][e] *= al[e >> 1];\n"
      "%s"
      "#pragma unroll\n"
      "      for (int nt = 0; nt < %" PRId64 "; nt++)\n"
      "#pragma unroll\n"
      "        for (int h = 0; h < 2; h++) {\n"
      "          const float x0 = gc_ex2(fmaf(%s[nt][2 * h], %s[h], -%s[h]));\n"
      "          const float x1 = gc_ex2(fmaf(%s[nt][2 * h + 1], %s[h], -%s[h]));\n"
      "          %s[h] += x0;\n"
      "          %s[h] += x1;\n"
      "          %s[nt][h] = %s(x0, x1);\n"
      "        }\n",
      row_max(cg, m, "mt", m->kw / 8), row_factor(cg, "mt"), MX, MX, MX, MX, MXL, CL, SUM,
      a->dv / 8, O,
      m->mr > 1 ? "" : cg_fmt(cg, "      unsigned pp[%" PRId64 "][2]; /* exp(s - the running max), pairs of 16 bits */\n", m->kw / 8),
      m->kw / 8, S, CL, MXL, S, CL, MXL, SUM, SUM, PP, pack2(a->q.view.base->type.dtype));
  mi_end(cg, m, from, "      ");
  emit_pv(cg, a, m);
}

/* One pass's end: each row's sum over the lane's four threads, (key slices) the slices'
 * maxima and sums combined through shared memory and each slice's outputs rescaled to the
 * row's max. */
static void emit_online_stats(Cg *cg, const MmaShape *m, int64_t dv) {
  Buf *b = &cg->src;
  if (m->mr > 1) { /* no key slices */
    buf_printf(b, "#pragma unroll\n"
                  "    for (int mi = 0; mi < %" PRId64 "; mi++)\n"
                  "#pragma unroll\n"
                  "      for (int h = 0; h < 2; h++) {\n"
                  "        sum[mi][h] += __shfl_xor_sync(0xffffffffu, sum[mi][h], 1);\n"
                  "        sum[mi][h] += __shfl_xor_sync(0xffffffffu, sum[mi][h], 2);\n"
                  "      }\n", m->mr);
    return;
  }
  buf_puts(b, "#pragma unroll\n"
              "    for (int h = 0; h < 2; h++) {\n"
              "      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);\n"
              "      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);\n");
  if (m->ks == 1) {
    buf_puts(b, "    }\n");
    return;
  }
  buf_printf(b, "      if (t4 == 0) {\n"
             "        stat[ks][rg * 16 + g + h * 8][0] = mx[h];\n"
             "        stat[ks][rg * 16 + g + h * 8][1] = sum[h];\n"
             "      }\n"
             "    }\n"
             "    __syncthreads();\n"
             "    /* the slices' maxima and sums of each row combined; this slice's outputs to the row's max */\n"
             "    float al[2];\n"
             "#pragma unroll\n"
             "    for (int h = 0; h < 2; h++) {\n"
             "      const int row = rg * 16 + g + h * 8;\n"
             "      float mr = -GC_INF, l = 0.f;\n"
             "      for (int k = 0; k < %" PRId64 "; k++) mr = fmax(mr, stat[k][row][0]);\n"
             "      for (int k = 0; k < %" PRId64 "; k++) {\n"
             "        const float mk = stat[k][row][0];\n"
             "        l += stat[k][row][1] * (mk == mr ? 1.f : isinf(mk) ? 0.f : gc_ex2((mk - mr) * L2E));\n"
             "      }\n"
             "      al[h] = mx[h] == mr ? 1.f : isinf(mx[h]) ? 0.f : gc_ex2((mx[h] - mr) * L2E);\n"
             "      sum[h] = l;\n"
             "    }\n"
             "#pragma unroll\n"
             "    for (int nt = 0; nt < %" PRId64 "; nt++)\n"
             "#pragma unroll\n"
             "      for (int e = 0; e < 4; e++) o[nt][e] *= al[e >> 1];\n",
             m->ks, m->ks, dv / 8);
}

/* The two passes (the probabilities exactly as the softmax and the post nodes make them):
 * each row's max and sum of exponentials, then the probabilities times the values. */
static void emit_two_passes(Cg *cg, const Attn *a, const MmaShape *m) {
  Buf *b = &cg->src;
  int64_t ks = m->ks, dv = a->dv;
  if (m->keep)
    buf_printf(b, "    unsigned sp[%" PRId64 "][%" PRId64 "][2]; /* the scores, kept */\n",
               m->nkt * (m->kc / m->kw), m->kw / 8);
  buf_puts(b, "    /* pass 1: each row's max and its sum of exponentials, rescaled as the max grows */\n");
  emit_pass(cg, a, m, true, false, emit_stats);
  buf_puts(b, "    float rs[2], mxl[2], cl[2]; /* 1 / the sum, the max times the exponents' factor, the factor */\n"
              "#pragma unroll\n"
              "    for (int h = 0; h < 2; h++) {\n"
              "      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);\n"
              "      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);\n");
  if (ks > 1) {
    buf_puts(b, "      if (t4 == 0) {\n"
                "        stat[ks][rg * 16 + g + h * 8][0] = mx[h];\n"
                "        stat[ks][rg * 16 + g + h * 8][1] = sum[h];\n"
                "      }\n"
                "    }\n"
                "    __syncthreads();\n"
                "    /* the slices' statistics of each row combined */\n"
                "#pragma unroll\n"
                "    for (int h = 0; h < 2; h++) {\n"
                "      const int row = rg * 16 + g + h * 8;\n"
                "      float m = -GC_INF, l = 0.f;\n");
    buf_printf(b, "      for (int k = 0; k < %" PRId64 "; k++) m = fmax(m, stat[k][row][0]);\n"
               "      const float c = %s, rl = isinf(m) ? 0.f : m * c;\n"
               "      for (int k = 0; k < %" PRId64 "; k++)\n"
               "        if (!isinf(stat[k][row][0])) l += stat[k][row][1] * gc_ex2(fmaf(stat[k][row][0], c, -rl));\n"
               "      mx[h] = m;\n"
               "      sum[h] = l;\n", ks, row_factor(cg, "m"), ks);
  }
  buf_printf(b, "      rs[h] = 1.f / sum[h];\n"
             "      cl[h] = %s;\n"
             "      mxl[h] = isinf(mx[h]) ? 0.f : mx[h] * cl[h];\n"
             "    }\n"
             "    /* pass 2: the probabilities, as the softmax makes them, times the values */\n"
             "    float o[%" PRId64 "][4] = {};\n", row_factor(cg, "mx[h]"), dv / 8);
  emit_pass(cg, a, m, !m->keep, true, emit_probs);
}

static int emit_mma(Cg *cg, const Attn *a, const MmaShape *m) {
  int64_t rows = m->rg * 16 * m->mr, dv = a->dv, ks = m->ks, mr = m->mr;
  int64_t tiles = a->batch * ((a->sq + rows - 1) / rows);
  /* 128 registers: two blocks of 8 warps on an SM; a warp of two fragments of rows holds
   * twice the queries, scores and outputs: one block, up to 255 */
  cg->min_blocks = mr > 1 ? 1 : 2;
  cg->threads = MMA_THREADS;
  const char *name = begin_kernel(cg, a, cg_fmt(cg, "on tensor cores, %" PRId64 " query rows "
                                                "per block%s, %" PRId64 " keys per tile%s%s", rows,
                                                mr > 1 ? cg_fmt(cg, " (%" PRId64 " a warp)", 16 * mr) : "",
                                                m->tk, ks > 1 ? cg_fmt(cg, " in %" PRId64
                                                " slices", ks) : "",
                                                m->keep ? ", the scores kept in registers" :
                                                m->online ? ", one pass (online softmax)" : ""));
  Buf *b = &cg->src;
  int64_t dp = a->d / 2 + MMA_PAD, vp = dv / 2 + MMA_PAD;
  buf_puts(b, "  /* pairs of 16-bit values, each row padded by 16 bytes: the queries' tile, then\n"
              "   * two stages of the keys' and the values' tiles");
  buf_puts(b, ks > 1 ? "; the key slices' outputs, summed */\n" : " */\n");
  buf_printf(b, "  __shared__ union alignas(16) {\n"
             "    unsigned q[%" PRId64 "][%" PRId64 "];\n"
             "    struct { unsigned k[%" PRId64 "][%" PRId64 "]; unsigned v[%" PRId64 "][%" PRId64 "]; } st[2];\n",
             rows, dp, m->tk, dp, m->tk, vp);
  if (ks > 1)
    buf_printf(b, "    float part[%" PRId64 "][%" PRId64 "];\n", rows, dv);
  buf_puts(b, "  } sm;\n");
  if (ks > 1)
    buf_printf(b, "  __shared__ float stat[%" PRId64 "][%" PRId64 "][2]; /* each slice's max and sum of a row */\n",
               ks, rows);
  buf_puts(b, "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, "
              "t4 = lane & 3;\n"
              "  const int lr = lane & 7, lm = lane >> 3; /* the row this lane gives ldmatrix, of matrix lm */\n"
              "  const float L2E = 1.44269504f; /* exp(x) = 2^(x log2(e)) */\n");
  buf_printf(b, "  /* warp: rows rg * 16.., keys ks * %" PRId64 ".. of each tile */\n", m->kc);
  if (ks == 1) /* constant: the fragments' addresses too */
    buf_puts(b, "  const int rg = warp, ks = 0;\n");
  else
    buf_printf(b, "  const int rg = warp %% %" PRId64 ", ks = warp / %" PRId64 ";\n", m->rg, m->rg);
  emit_scaler(cg, &a->q, "scq");
  emit_scaler(cg, &a->k, "sck");
  emit_scaler(cg, &a->v, "scv");
  begin_tiles(cg, a, rows);
  int r = a->rank;
  TileLoad ql = {.o = &a->q, .p = 0, .cd = r - 1, .sc = "scq", .base = "qb", .first = "i0",
                 .dst = "sm.q", .rows = rows, .width = a->d, .limit = a->sq,
                 .rs = a->q.view.stride[r - 2]};
  buf_puts(b, "    __syncthreads();\n");
  emit_load(cg, &ql, "    ");
  buf_puts(b, "    gc_cp_commit();\n    gc_cp_wait<0>();\n");
  emit_load_scale(cg, &ql, "    ");
  if (mr > 1)
    buf_printf(b,
        "    __syncthreads();\n"
        "    unsigned qf[%" PRId64 "][%" PRId64 "][4];\n"
        "#pragma unroll\n"
        "    for (int mi = 0; mi < %" PRId64 "; mi++)\n"
        "#pragma unroll\n"
        "      for (int kk = 0; kk < %" PRId64 "; kk++)\n"
        "        gc_ldsm4(qf[mi][kk], &sm.q[(rg * %" PRId64 " + mi) * 16 + (lm & 1) * 8 + lr][kk * 8 + (lm >> 1) * 4]);\n"
        "    __syncthreads();\n"
        "    const int ia = i0 + rg * %" PRId64 " + g; /* this lane's rows: ia + mi * 16 and ia + mi * 16 + 8 */\n"
        "    float mx[%" PRId64 "][2], sum[%" PRId64 "][2] = {};\n"
        "#pragma unroll\n"
        "    for (int mi = 0; mi < %" PRId64 "; mi++) mx[mi][0] = mx[mi][1] = -GC_INF;\n",
        mr, a->d / 16, mr, a->d / 16, mr, 16 * mr, mr, mr, mr);
  else
    buf_printf(b,
        "    __syncthreads();\n"
        "    unsigned qf[%" PRId64 "][4];\n"
        "#pragma unroll\n"
        "    for (int kk = 0; kk < %" PRId64 "; kk++)\n"
        "      gc_ldsm4(qf[kk], &sm.q[rg * 16 + (lm & 1) * 8 + lr][kk * 8 + (lm >> 1) * 4]);\n"
        "    __syncthreads();\n"
        "    const int ia = i0 + rg * 16 + g; /* this lane's rows: ia and ia + 8 */\n"
        "    float mx[2] = {-GC_INF, -GC_INF}, sum[2] = {0.f, 0.f};\n",
        a->d / 16, a->d / 16);
  if (m->online) {
    if (mr > 1)
      buf_printf(b, "    float mxl[%" PRId64 "][2], cl[%" PRId64 "][2], o[%" PRId64 "][%" PRId64 "][4] = {}; /* the running max times the exponents' factor, the factor; the outputs */\n"
                 "    /* one pass: the outputs of exp(s - the running max), rescaled as it grows */\n", mr, mr, mr, dv / 8);
    else
      buf_printf(b, "    float mxl[2], cl[2], o[%" PRId64 "][4] = {}; /* the running max times the exponents' factor, the factor; the outputs */\n"
                 "    /* one pass: the outputs of exp(s - the running max), rescaled as it grows */\n", dv / 8);
    emit_pass(cg, a, m, true, true, emit_online);
    emit_online_stats(cg, m, dv);
  } else {
    emit_two_passes(cg, a, m);
  }
  const char *el = "const int row = rg * 16 + g + (e >> 1) * 8, c = nt * 8 + 2 * t4 + (e & 1);\n";
  if (ks > 1)
    buf_printf(b, "    /* the slices' outputs: slice 1's stored, the others' added in turn, then to slice 0's */\n"
               "    for (int k = 1; k < %" PRId64 "; k++) {\n"
               "      if (ks == k)\n"
               "#pragma unroll\n"
               "        for (int nt = 0; nt < %" PRId64 "; nt++)\n"
               "#pragma unroll\n"
               "          for (int e = 0; e < 4; e++) {\n            %s"
               "            sm.part[row][c] = k == 1 ? o[nt][e] : sm.part[row][c] + o[nt][e];\n"
               "          }\n"
               "      __syncthreads();\n"
               "    }\n"
               "    if (ks != 0) continue;\n"
               "#pragma unroll\n"
               "    for (int nt = 0; nt < %" PRId64 "; nt++)\n"
               "#pragma unroll\n"
               "      for (int e = 0; e < 4; e++) {\n        %s"
               "        o[nt][e] += sm.part[row][c];\n"
               "      }\n", ks, dv / 8, el, dv / 8, el);
  size_t from = mi_begin(cg, m, "    ");
  const char *O = ar(cg, m, "o"), *SUM = ar(cg, m, "sum");
  if (m->online)
    buf_printf(b, "    /* the outputs divided by the sum; where it is not finite and positive (every score -inf,\n"
               "     * or a NaN or +inf among them) the softmax has a NaN in the row: the output is %s */\n"
               "#pragma unroll\n"
               "    for (int h = 0; h < 2; h++) {\n"
               "      const bool fin = %s[h] > 0.f && %s[h] < GC_INF;\n"
               "      const float rs = 1.f / %s[h];\n"
               "#pragma unroll\n"
               "      for (int nt = 0; nt < %" PRId64 "; nt++) {\n"
               "        %s[nt][2 * h] = fin ? %s[nt][2 * h] * rs : %s;\n"
               "        %s[nt][2 * h + 1] = fin ? %s[nt][2 * h + 1] * rs : %s;\n"
               "      }\n"
               "    }\n",
               a->nan_mask ? "0, as the NaN masking makes it" : "NaN", SUM, SUM, SUM, dv / 8,
               O, O, a->nan_mask ? "0.f" : "GC_NAN", O, O, a->nan_mask ? "0.f" : "GC_NAN");
  /* the output: a lane's two neighbouring columns as one store where they are adjacent */
  bool pairs = a->ostr[r - 1] == 1;
  for (int i = 0; i < r - 1; i++)
    pairs = pairs && a->ostr[i] % 2 == 0;
  const char *T = cg_ctype(a->y->type.dtype);
  buf_printf(b, "#pragma unroll\n    for (int nt = 0; nt < %" PRId64 "; nt++)\n", dv / 8);
  if (pairs)
    buf_printf(b,
        "#pragma unroll\n"
        "      for (int h = 0; h < 2; h++) {\n"
        "        const int i = %s + h * 8, c = nt * 8 + 2 * t4;\n"
        "        if (i < %" PRId64 ") *(gc_vec<%s, 2> *)(out0 + ob + (idx_t)i * %" PRId64 " + c) = {%s, %s};\n"
        "      }\n",
        row0(m), a->sq, T, a->ostr[r - 2],
        cg_store(cg, a->y->type.dtype, DOM_F32, cg_fmt(cg, "%s[nt][2 * h]", O)),
        cg_store(cg, a->y->type.dtype, DOM_F32, cg_fmt(cg, "%s[nt][2 * h + 1]", O)));
  else
    buf_printf(b,
        "#pragma unroll\n"
        "      for (int e = 0; e < 4; e++) {\n"
        "        const int i = %s + (e >> 1) * 8, c = nt * 8 + 2 * t4 + (e & 1);\n"
        "        if (i < %" PRId64 ") out0[ob + (idx_t)i * %" PRId64 " + (idx_t)c * %" PRId64 "] = %s;\n"
        "      }\n",
        row0(m), a->sq, a->ostr[r - 2], a->ostr[r - 1],
        cg_store(cg, a->y->type.dtype, DOM_F32, cg_fmt(cg, "%s[nt][e]", O)));
  mi_end(cg, m, from, "    ");
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
  store_score(cg, a, a->pre, a->m1, "acc", "sc[r][j]", "        ");
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
  store_score(cg, a, a->post, a->sm, "prob", "sc[r][j]", "        ");
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

/* An attention group's kernel: on tensor cores a family of shapes, the default (the
 * rule's) first; where it keeps the scores for a second pass and one pass may run, the
 * default's shape in one pass (no kept scores: fewer registers, one exponential a score
 * instead of two, the probabilities rounded before the division); then the other row
 * groups of 8, 4 and 2 (key slices 1, 2 and 4) that the kernel takes, timed at create
 * (docs/variants.md); else on CUDA cores. */
int cg_attention(Cg *cg, const GroupPlan *p) {
  Attn a;
  if (read_attention(cg, p, &a))
    return -1;
  MmaShape m[ATTN_MAX_SHAPES];
  int64_t tk;
  if (!mma_shape(cg, &a, &m[0], &tk))
    return emit_simt(cg, &a);
  int nm = 1;
  if (m[0].keep && (!a.post || a.nan_mask) && nm < cg->variants) {
    m[nm] = m[0];
    m[nm].keep = false;
    m[nm++].online = true;
  }
  /* two fragments of rows a warp, one pass, no key slices: where one pass may run and the
   * queries' tile of twice the rows fits */
  if ((!a.post || a.nan_mask) && nm < cg->variants && a.sq > MMA_WARPS * 16 &&
      mma_smem(&a, MMA_WARPS, 1, tk, 2) <= cg->target->smem_block &&
      mma_finish(&a, MMA_WARPS, tk, cg->target->smem_block, &m[nm])) {
    m[nm].mr = 2;
    m[nm].keep = false;
    m[nm++].online = true;
  }
  static const int64_t groups[] = {MMA_WARPS, MMA_WARPS / 2, MMA_WARPS / 4};
  for (size_t i = 0; i < sizeof groups / sizeof groups[0] && nm < cg->variants && nm < ATTN_MAX_SHAPES; i++)
    if (groups[i] != m[0].rg && mma_finish(&a, groups[i], tk, cg->target->smem_block, &m[nm]))
      nm++;
  if (nm == 1)
    return emit_mma(cg, &a, &m[0]);
  const char *label = cg_fmt(cg, "fuse group %lld: attention, variants (query rows a block / key slices):",
                             (long long)node_fuse_group(a.root));
  for (int i = 0; i < nm; i++)
    label = cg_fmt(cg, "%s%s %" PRId64 "/%" PRId64 "%s", label, i ? "," : "",
                   m[i].rg * 16 * m[i].mr, m[i].ks, m[i].online ? " one pass" : "");
  int ch = cg_choice_begin(cg, a.root, label), rc = 0;
  for (int i = 0; i < nm && !rc; i++) {
    cg_variant_begin(cg, ch);
    rc = emit_mma(cg, &a, &m[i]);
    cg_variant_end(cg, ch);
  }
  if (!rc)
    cg_choice_end(cg, ch);
  return rc;
}
