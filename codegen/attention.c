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
 * become strides, its scalar multiplies a scale applied as each element is loaded).
 *
 * One block computes BR query rows of one batch entry (a head): the queries go to shared
 * memory; the keys pass through it BC rows at a time, each warp computing one row's
 * scores for BC keys (a lane per key); the whole row of SK scores stays in shared
 * memory, where the softmax and the post nodes turn it into probabilities; then the
 * values pass through the same tile buffer and each thread accumulates outputs. The
 * SQ x SK matrix never reaches global memory. The operands are f32, f16 or bf16 (one type
 * for the group); the math is f32 with the sums in the reference's order up to the order
 * of additions, and every value a node would store (a scaled operand, a score, a
 * probability, the output) is rounded to its type where the node would round it. */
#include "codegen/cg-impl.h"

#include <inttypes.h>
#include <string.h>

enum {
  BC = 32,                  /* keys (or values) per tile: one per lane */
  SMEM_FLOATS = 48 * 1024 / 4, /* static shared memory */
  MAX_ACC = 8,              /* outputs per thread */
};

bool cg_is_attention(const Node *const *nodes, int n) {
  int mm = 0, sm = 0;
  for (int i = 0; i < n; i++) {
    mm += nodes[i]->op == OP_MATMUL;
    sm += nodes[i]->op == OP_SOFTMAX;
  }
  return mm == 2 && sm == 1;
}

static bool member(const Node *const *nodes, int n, const Node *m) {
  for (int i = 0; i < n; i++)
    if (nodes[i] == m)
      return true;
  return false;
}

enum { MAX_SCALES = 8 };

/* An operand read through a view of an outside buffer, scaled as it loads. */
typedef struct Operand {
  View view;
  const char *scale[MAX_SCALES]; /* f32 literals multiplying each element, in order */
  int nscale;
  bool chain[64];    /* per member: on this operand's chain */
} Operand;

/* f32 expression e as a value of type t would hold it (rounded to t). */
static const char *rounded(Cg *cg, DType t, const char *e) {
  return t == DT_F32 ? e : cg_load(cg, t, DOM_F32, cg_store(cg, t, DOM_F32, e));
}

static int operand(Cg *cg, const Node *const *nodes, int n, const Value *v, Operand *o) {
  const Node *chain[64];
  const Value *at[64];
  int len = 0;
  memset(o, 0, sizeof *o);
  while (v->kind == VK_NODE && member(nodes, n, v->def) && len < 64) {
    at[len] = v;
    chain[len++] = v->def;
    const Node *d = v->def;
    const Value *c = view_scale_factor(d);
    v = c ? node_other_input(d, c) : d->in[0];
  }
  view_init(&o->view, v);
  for (int i = len - 1; i >= 0; i--) {
    const Node *d = chain[i];
    for (int m = 0; m < n; m++)
      o->chain[m] = o->chain[m] || nodes[m] == d;
    const Value *c = view_scale_factor(d);
    if (c) {
      if (o->nscale == MAX_SCALES)
        return cg_error(cg, d, "fuse group %lld: more than %d scales of one attention operand",
                        (long long)node_fuse_group(d), MAX_SCALES);
      o->scale[o->nscale++] =
          cg_fmt(cg, "%.9gf", dtype_load_f64(c->type.dtype, c->data->data));
      continue;
    }
    View next;
    if (!view_through(d, at[i]->def_index, &o->view, &next))
      return cg_error(cg, d, "fuse group %lld: %%%s is no strided view of %%%s; the attention "
                      "kernel reads its operands through strides",
                      (long long)node_fuse_group(d), at[i]->name, o->view.base->name);
    o->view = next;
  }
  DType t = o->view.base->type.dtype;
  if (t != DT_F32 && t != DT_F16 && t != DT_BF16)
    return cg_error(cg, nodes[n - 1], "fuse group %lld: the attention kernel reads f32, f16 "
                    "and bf16, not %s", (long long)node_fuse_group(nodes[n - 1]), dtype_name(t));
  return 0;
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
  buf_printf(b, "      for (int e = tid; e < %" PRId64 "; e += %d) {\n", BC * width, CODEGEN_BLOCK);
  buf_printf(b, "        const int c = e / %" PRId64 ", t = e %% %" PRId64 ";\n", width, width);
  buf_printf(b, "        kv[c][t] = j0 + c < %" PRId64 " ? %s : 0.f;\n", sk, load(cg, o, param, at));
  buf_puts(b, "      }\n      __syncthreads();\n");
}

/* sc[r][j] = the f32 value val (a score or a probability: the output of node v) after
 * the chain k, if any, each rounded to its type; at is the element's flat index in the
 * scores. */
static void store_score(Cg *cg, const PwKernel *k, const Node *v, const char *at,
                        const char *val) {
  Buf *b = &cg->src;
  DType t = v->out[0]->type.dtype;
  if (!k) {
    buf_printf(b, "        sc[r][j] = %s;\n", rounded(cg, t, val));
    return;
  }
  const Value *const *ext, *const *out;
  const Node *const *nodes;
  int next, n;
  cg_epilogue_operands(k, &ext, &next, &out, &nodes, &n);
  DType o = out[0]->type.dtype;
  if (t == DT_F32 && o == DT_F32) {
    cg_chain_emit(cg, k, at, val, "sc[r][j]", "        ");
    return;
  }
  buf_printf(b, "        {\n          %s sv;\n", cg_ctype(o));
  cg_chain_emit(cg, k, at, cg_store(cg, t, DOM_F32, val), "sv", "          ");
  buf_printf(b, "          sc[r][j] = %s;\n        }\n", cg_load(cg, o, DOM_F32, "sv"));
}

int cg_attention(Cg *cg, const Node *const *nodes, int n) {
  const Node *sm = NULL, *m1 = NULL, *m2 = NULL, *root = nodes[n - 1];
  for (int i = 0; i < n; i++)
    if (nodes[i]->op == OP_SOFTMAX)
      sm = nodes[i];
  /* the first matmul feeds the softmax through the pre nodes; the second reads it */
  const Value *v = sm->in[0];
  while (v->kind == VK_NODE && v->def->op != OP_MATMUL && member(nodes, n, v->def)) {
    const Node *d = v->def;
    const Value *next = NULL;
    for (int k = 0; k < d->nin && !next; k++)
      if (d->in[k]->kind == VK_NODE && member(nodes, n, d->in[k]->def) &&
          cg_numel(d->in[k]) == cg_numel(sm->in[0]))
        next = d->in[k];
    if (!next)
      break;
    v = next;
  }
  if (v->kind == VK_NODE && v->def->op == OP_MATMUL)
    m1 = v->def;
  for (int i = 0; i < n; i++)
    if (nodes[i]->op == OP_MATMUL && nodes[i] != m1)
      m2 = nodes[i];
  if (!m1 || !m2 || (root != m2 && (root->op != OP_TRANSPOSE || root->in[0] != m2->out[0])))
    return cg_error(cg, root, "fuse group %lld: not an attention codegen knows (matmul, "
                    "pointwise, softmax, pointwise, matmul, maybe a transpose)",
                    (long long)node_fuse_group(root));
  Operand q, k, val;
  if (operand(cg, nodes, n, m1->in[0], &q) || operand(cg, nodes, n, m1->in[1], &k) ||
      operand(cg, nodes, n, m2->in[1], &val))
    return -1;
  /* the pre and post nodes: pointwise members off the operand chains */
  const Node **pre = arena_alloc(cg->arena, sizeof *pre * (size_t)n);
  const Node **post = arena_alloc(cg->arena, sizeof *post * (size_t)n);
  int npre = 0, npost = 0;
  bool after = false;
  for (int i = 0; i < n; i++) {
    const Node *m = nodes[i];
    after = after || m == sm;
    if (m == sm || m == m1 || m == m2 || m == root || q.chain[i] || k.chain[i] || val.chain[i])
      continue;
    if (!(op_info[m->op].flags & OPF_POINTWISE))
      return cg_error(cg, m, "fuse group %lld: node %d (%s) is neither a view of an operand "
                      "nor pointwise", (long long)node_fuse_group(m), m->id, op_info[m->op].name);
    if (after)
      post[npost++] = m;
    else
      pre[npre++] = m;
  }
  if ((npre && pre[npre - 1]->out[0] != sm->in[0]) || (!npre && sm->in[0] != m1->out[0]) ||
      (npost && post[npost - 1]->out[0] != m2->in[0]) || (!npost && m2->in[0] != sm->out[0]))
    return cg_error(cg, root, "fuse group %lld: the nodes around the softmax do not lead from "
                    "the first matmul to the second", (long long)node_fuse_group(root));

  const Value *s = m1->out[0], *y = root->out[0];
  int rank = s->type.shape.rank, nb = rank - 2;
  int64_t sq = cg_dim(s, rank - 2), sk = cg_dim(s, rank - 1);
  int64_t d = q.view.dims[q.view.rank - 1], dv = val.view.dims[val.view.rank - 1];
  int64_t batch = 1;
  for (int i = 0; i < nb; i++)
    batch *= cg_dim(s, i);
  int64_t kd = d > dv ? d : dv, skp = (sk + BC - 1) / BC * BC;
  /* BR: rows per block, as many as fit while the grid still fills the GPU */
  int64_t br = 0;
  for (int64_t c = 32; c >= 1; c /= 2) {
    bool fits = c * d + BC * (kd + 1) + c * skp <= SMEM_FLOATS && c * dv <= MAX_ACC * CODEGEN_BLOCK;
    if (!fits)
      continue;
    br = c;
    if (batch * ((sq + c - 1) / c) >= 264 || c == 4)
      break;
  }
  if (!br)
    return cg_error(cg, root, "fuse group %lld: attention of %" PRId64 " keys and head size "
                    "%" PRId64 " does not fit the kernel's shared memory",
                    (long long)node_fuse_group(root), sk, kd);
  int64_t tiles = batch * ((sq + br - 1) / br);
  int64_t nacc = (br * dv + CODEGEN_BLOCK - 1) / CODEGEN_BLOCK;

  /* parameters: in0 queries, in1 keys, in2 values, then the pre and post nodes' inputs */
  const PwKernel *pk = npre ? cg_chain_plan(cg, m1, pre, npre, 3, "s") : NULL;
  if (npre && !pk)
    return -1;
  const Value *const *pext = NULL, *const *xo;
  int npext = 0, xn;
  const Node *const *xnodes;
  if (pk)
    cg_epilogue_operands(pk, &pext, &npext, &xo, &xnodes, &xn);
  const PwKernel *qk = npost ? cg_chain_plan(cg, sm, post, npost, 3 + npext, "p") : NULL;
  if (npost && !qk)
    return -1;
  const Value *const *qext = NULL;
  int nqext = 0;
  if (qk)
    cg_epilogue_operands(qk, &qext, &nqext, &xo, &xnodes, &xn);
  int nin = 3 + npext + nqext;
  const Value **in = arena_alloc(cg->arena, sizeof *in * (size_t)nin);
  in[0] = q.view.base;
  in[1] = k.view.base;
  in[2] = val.view.base;
  for (int e = 0; e < npext; e++)
    in[3 + e] = pext[e];
  for (int e = 0; e < nqext; e++)
    in[3 + npext + e] = qext[e];

  /* output strides of O's dims: y is O or its transpose */
  int64_t ydims[IR_MAX_RANK], ystr[IR_MAX_RANK], ostr[IR_MAX_RANK];
  for (int i = 0; i < rank; i++)
    ydims[i] = cg_dim(y, i);
  contiguous_strides(rank, ydims, ystr);
  if (root == m2) {
    memcpy(ostr, ystr, sizeof ostr);
  } else {
    int np = 0;
    const int64_t *perm = attr_ints(root, "perm", &np);
    for (int i = 0; i < rank; i++)
      ostr[perm && np == rank ? perm[i] : rank - 1 - i] = ystr[i];
  }

  const char *head = cg_fmt(cg, "fuse group %lld = attention, nodes %d (scores) .. %d: ",
                            (long long)node_fuse_group(root), m1->id, root->id);
  const char *note = cg_fmt(cg, "%" PRId64 " heads x %" PRId64 " queries x %" PRId64
                            " keys, head size %" PRId64 "/%" PRId64 "; %" PRId64
                            " query rows per block", batch, sq, sk, d, dv, br);
  const char *name = cg_kernel_begin_values(cg, root, "attention", head, in, nin, &y, 1, note);
  Buf *b = &cg->src;
  const char *I = cg_idx_type(cg_numel(s) > cg_numel(y) ? cg_numel(s) : cg_numel(y));
  buf_printf(b, "  typedef %s idx_t;\n", I);
  buf_printf(b, "  __shared__ float qs[%" PRId64 "][%" PRId64 "];\n", br, d);
  buf_printf(b, "  __shared__ float kv[%d][%" PRId64 "];\n", BC, kd + 1);
  buf_printf(b, "  __shared__ float sc[%" PRId64 "][%" PRId64 "];\n", br, skp);
  buf_puts(b, "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n");
  buf_printf(b, "  for (int tile = blockIdx.x; tile < %" PRId64 "; tile += gridDim.x) {\n", tiles);
  buf_printf(b, "    const int z = tile / %" PRId64 ", i0 = tile %% %" PRId64 " * %" PRId64 ";\n",
             (sq + br - 1) / br, (sq + br - 1) / br, br);
  /* the batch entry's base offsets in the three operands and the output */
  buf_printf(b, "    idx_t qb = %" PRId64 ", kb = %" PRId64 ", vb = %" PRId64 ", ob = 0;\n",
             q.view.offset, k.view.offset, val.view.offset);
  if (nb) {
    buf_puts(b, "    {\n      idx_t zr = z, c;\n");
    for (int i = nb - 1; i >= 0; i--) {
      buf_printf(b, "      c = zr %% %" PRId64 "; zr /= %" PRId64 ";\n", cg_dim(s, i), cg_dim(s, i));
      buf_printf(b, "      qb += c * %" PRId64 "; kb += c * %" PRId64 "; vb += c * %" PRId64
                 "; ob += c * %" PRId64 ";\n", batch_stride(&q.view, i, nb),
                 batch_stride(&k.view, i, nb), batch_stride(&val.view, i, nb), ostr[i]);
    }
    buf_puts(b, "    }\n");
  }
  const View *qv = &q.view, *kvw = &k.view, *vv = &val.view;
  int64_t qsi = qv->stride[qv->rank - 2], qsd = qv->stride[qv->rank - 1];
  int64_t ksd = kvw->stride[kvw->rank - 2], ksj = kvw->stride[kvw->rank - 1];
  int64_t vsj = vv->stride[vv->rank - 2], vsd = vv->stride[vv->rank - 1];
  /* element (i, j) of the batch entry's scores, for the pre and post nodes' inputs */
  const char *at = cg_fmt(cg, "(((idx_t)z * %" PRId64 " + i) * %" PRId64 " + j)", sq, sk);
  /* the queries */
  buf_printf(b, "    for (int e = tid; e < %" PRId64 "; e += %d) {\n", br * d, CODEGEN_BLOCK);
  buf_printf(b, "      const int r = e / %" PRId64 ", c = e %% %" PRId64 ";\n", d, d);
  buf_printf(b, "      qs[r][c] = i0 + r < %" PRId64 " ? %s : 0.f;\n", sq,
             load(cg, &q, 0, cg_fmt(cg, "qb + (idx_t)(i0 + r) * %" PRId64 " + (idx_t)c * %" PRId64,
                                    qsi, qsd)));
  buf_puts(b, "    }\n");
  /* the scores, BC keys at a time: warp w computes rows w, w + 8, ...; lane c key j0 + c */
  buf_printf(b, "    for (int j0 = 0; j0 < %" PRId64 "; j0 += %d) {\n", sk, BC);
  emit_tile(cg, &k, 1, d, sk,
            cg_fmt(cg, "kb + (idx_t)t * %" PRId64 " + (idx_t)(j0 + c) * %" PRId64, ksd, ksj));
  buf_printf(b, "      for (int r = warp; r < %" PRId64 "; r += %d) {\n", br, CODEGEN_BLOCK / 32);
  buf_printf(b, "        const int i = i0 + r, j = j0 + lane;\n");
  buf_printf(b, "        if (i >= %" PRId64 " || j >= %" PRId64 ") continue;\n", sq, sk);
  buf_puts(b, "        float acc = 0.f;\n");
  buf_printf(b, "#pragma unroll 8\n        for (int t = 0; t < %" PRId64 "; t++) acc = fmaf(qs[r][t], kv[lane][t], acc);\n", d);
  store_score(cg, pk, m1, at, "acc");
  buf_puts(b, "      }\n    }\n    __syncthreads();\n");
  /* the softmax of each row, as codegen's softmax kernel computes it, then the post nodes */
  buf_printf(b, "    for (int r = warp; r < %" PRId64 "; r += %d) {\n", br, CODEGEN_BLOCK / 32);
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
  store_score(cg, qk, sm, at, "prob");
  buf_puts(b, "      }\n    }\n");
  /* the output: thread tid accumulates elements tid, tid + 256, ... of the BR x DV tile */
  buf_printf(b, "    float out[%" PRId64 "];\n#pragma unroll\n", nacc);
  buf_printf(b, "    for (int a = 0; a < %" PRId64 "; a++) out[a] = 0.f;\n", nacc);
  buf_printf(b, "    for (int j0 = 0; j0 < %" PRId64 "; j0 += %d) {\n", sk, BC);
  emit_tile(cg, &val, 2, dv, sk,
            cg_fmt(cg, "vb + (idx_t)(j0 + c) * %" PRId64 " + (idx_t)t * %" PRId64, vsj, vsd));
  buf_printf(b, "      const int nj = %" PRId64 " - j0 < %d ? %" PRId64 " - j0 : %d;\n", sk, BC, sk, BC);
  buf_printf(b, "#pragma unroll\n      for (int a = 0; a < %" PRId64 "; a++) {\n", nacc);
  buf_printf(b, "        const int e = tid + a * %d, r = e / %" PRId64 ", t = e %% %" PRId64 ";\n",
             CODEGEN_BLOCK, dv, dv);
  buf_printf(b, "        if (r >= %" PRId64 ") break;\n", br);
  buf_puts(b, "        for (int c = 0; c < nj; c++) out[a] = fmaf(sc[r][j0 + c], kv[c][t], out[a]);\n");
  buf_puts(b, "      }\n    }\n");
  buf_printf(b, "#pragma unroll\n    for (int a = 0; a < %" PRId64 "; a++) {\n", nacc);
  buf_printf(b, "      const int e = tid + a * %d, r = e / %" PRId64 ", t = e %% %" PRId64 ";\n",
             CODEGEN_BLOCK, dv, dv);
  buf_printf(b, "      if (r < %" PRId64 " && i0 + r < %" PRId64 ")\n", br, sq);
  buf_printf(b, "        out0[ob + (idx_t)(i0 + r) * %" PRId64 " + (idx_t)t * %" PRId64 "] = %s;\n",
             ostr[rank - 2], ostr[rank - 1], cg_store(cg, y->type.dtype, DOM_F32, "out[a]"));
  buf_puts(b, "    }\n    __syncthreads();\n  }\n}\n");
  cg_kernel_step_values(cg, root, name, cg_blocks(tiles * CODEGEN_BLOCK, CODEGEN_BLOCK),
                        CODEGEN_BLOCK, in, nin, &y, 1);
  return 0;
}
