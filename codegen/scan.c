/* scan.c: kernels for the ops that need a row in order: cumsum and topk.
 *
 * cumsum along the innermost dim takes a warp per row, 32 elements at a time: a
 * __shfl_up_sync scan of the chunk plus the carry of the chunks before (float sums in
 * that tree order, not the reference's left to right; integers wrap, so they are exact).
 * Along any other dim, neighbouring threads take neighbouring lines and walk them in
 * order, which keeps reads coalesced. topk takes a block per row and sorts it in shared
 * memory with a bitonic network over the reference's strict order (topk_before: value,
 * NaN as the largest, then index), so the result is the reference's stable sort's. */
#include "codegen/cg-impl.h"

#include <inttypes.h>

static void outer_len_inner(const Value *x, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
  *outer = *inner = 1;
  for (int i = 0; i < axis; i++)
    *outer *= cg_dim(x, i);
  for (int i = axis + 1; i < x->type.shape.rank; i++)
    *inner *= cg_dim(x, i);
  *len = cg_dim(x, axis);
}

/* ---------------------------------------------------------------- cumsum */

static int gen_cumsum(Cg *cg, const Node *n) {
  const Value *x = n->in[0];
  int rank = x->type.shape.rank;
  int axis = (int)attr_int(n, "axis");
  axis = axis < 0 ? axis + rank : axis;
  bool excl = attr_int(n, "exclusive") != 0, rev = attr_int(n, "reverse") != 0;
  int64_t outer, len, inner;
  outer_len_inner(x, axis, &outer, &len, &inner);
  DType dt = x->type.dtype;
  Dom dom = cg_dom(dt);
  const char *T = cg_dom_type(dom);
  bool fl = dom != DOM_I64;
  const char *add = fl ? "%s + %s" : "gc_iadd(%s, %s)";
  const char *dir = cg_fmt(cg, "%s%s", excl ? "exclusive" : "inclusive", rev ? ", reversed" : "");
  Buf *b = &cg->src;
  if (inner > 1) {
    int64_t lines = outer * inner;
    const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "%s: a thread per line of %" PRId64 ", in order", dir, len));
    cg_loop_begin(cg, n, lines);
    buf_printf(b, "    const idx_t base = i / %" PRId64 " * %" PRId64 " + i %% %" PRId64 ";\n", inner, len * inner, inner);
    buf_printf(b, "    %s acc = (%s)0;\n", T, T);
    buf_printf(b, "    for (idx_t s = 0; s < %" PRId64 "; s++) {\n", len);
    buf_printf(b, "      const idx_t at = base + %s * %" PRId64 ";\n", rev ? cg_fmt(cg, "(%" PRId64 " - s)", len - 1) : "s", inner);
    buf_printf(b, "      const %s v = %s;\n", T, cg_load(cg, dt, dom, "in0[at]"));
    const char *step = cg_fmt(cg, "      acc = %s;\n", cg_fmt(cg, add, "acc", "v"));
    if (!excl)
      buf_puts(b, step);
    buf_printf(b, "      out0[at] = %s;\n", cg_store(cg, dt, dom, "acc"));
    if (excl)
      buf_puts(b, step);
    buf_puts(b, "    }\n");
    cg_loop_end(cg, n, name, lines);
    return 0;
  }
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "%s: a warp per row of %" PRId64 ", 32 at a time", dir, len));
  buf_printf(b, "  typedef %s idx_t;\n", cg_idx_type(cg, cg_numel(x)));
  buf_puts(b, "  const int lane = threadIdx.x & 31;\n");
  int warps = cg->target->block / 32;
  buf_printf(b, "  for (idx_t row = (idx_t)blockIdx.x * %d + (threadIdx.x >> 5); row < %" PRId64 "; row += (idx_t)gridDim.x * %d) {\n",
             warps, outer, warps);
  buf_printf(b, "    %s carry = (%s)0;\n", T, T);
  buf_printf(b, "    for (idx_t s0 = 0; s0 < %" PRId64 "; s0 += 32) {\n", len);
  buf_printf(b, "      const idx_t s = s0 + lane, at = row * %" PRId64 " + %s;\n", len,
             rev ? cg_fmt(cg, "%" PRId64 " - s", len - 1) : "s");
  buf_printf(b, "      %s inc = s < %" PRId64 " ? %s : (%s)0;\n", T, len, cg_load(cg, dt, dom, "in0[at]"), T);
  buf_puts(b, "#pragma unroll\n      for (int d = 1; d < 32; d <<= 1) {\n");
  buf_printf(b, "        const %s u = __shfl_up_sync(0xffffffffu, inc, d);\n", T);
  buf_printf(b, "        if (lane >= d) inc = %s;\n      }\n", cg_fmt(cg, add, "u", "inc"));
  const char *mine = "inc";
  if (excl) {
    buf_printf(b, "      %s ex = __shfl_up_sync(0xffffffffu, inc, 1);\n", T);
    buf_printf(b, "      if (lane == 0) ex = (%s)0;\n", T);
    mine = "ex";
  }
  buf_printf(b, "      if (s < %" PRId64 ") out0[at] = %s;\n", len, cg_store(cg, dt, dom, cg_fmt(cg, add, "carry", mine)));
  buf_printf(b, "      carry = %s;\n", cg_fmt(cg, add, "carry", "__shfl_sync(0xffffffffu, inc, 31)"));
  buf_puts(b, "    }\n  }\n}\n");
  cg_kernel_step(cg, n, name, cg_blocks(cg, outer, warps), (unsigned)cg->target->block);
  return 0;
}

/* ---------------------------------------------------------------- topk */

static int gen_topk(Cg *cg, const Node *n) {
  const Value *x = n->in[0];
  int rank = x->type.shape.rank;
  int axis = (int)attr_int(n, "axis");
  axis = axis < 0 ? axis + rank : axis;
  int64_t outer, len, inner, k = attr_int(n, "k");
  outer_len_inner(x, axis, &outer, &len, &inner);
  bool largest = attr_int(n, "largest") != 0;
  DType dt = x->type.dtype;
  Dom dom = cg_dom(dt);
  const char *K = cg_dom_type(dom);
  int64_t p = 1;
  while (p < len)
    p *= 2;
  /* the keys and their indices in the static shared memory of a block */
  int64_t key_size = dom == DOM_F32 ? 4 : 8, room = cg->target->smem_block / (key_size + 4);
  if (p > room) {
    int64_t most = 1;
    while (most * 2 <= room)
      most *= 2;
    return cg_error(cg, n, "op topk (node %d) along an axis of %" PRId64 " elements has no GPU kernel yet: "
                    "rows of at most %" PRId64 " are sorted in shared memory", n->id, len, most);
  }
  int64_t rows = outer * inner;
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "a block per row of %" PRId64 ": bitonic sort of %" PRId64 " in shared memory, the first %" PRId64 " kept",
                                                   len, p, k));
  Buf *b = &cg->src;
  buf_printf(b, "  typedef %s idx_t;\n", cg_idx_type(cg, cg_numel(x)));
  buf_printf(b, "  __shared__ %s key[%" PRId64 "];\n  __shared__ int id[%" PRId64 "];\n", K, p, p);
  buf_printf(b, "  for (idx_t row = blockIdx.x; row < %" PRId64 "; row += gridDim.x) {\n", rows);
  buf_printf(b, "    const idx_t base = row / %" PRId64 " * %" PRId64 " + row %% %" PRId64 ";\n", inner, len * inner, inner);
  buf_puts(b, "    __syncthreads(); // the previous row is written out\n");
  buf_printf(b, "    for (int j = threadIdx.x; j < %" PRId64 "; j += blockDim.x) {\n", p);
  buf_printf(b, "      key[j] = j < %" PRId64 " ? %s : (%s)0;\n", len,
             cg_load(cg, dt, dom, cg_fmt(cg, "in0[base + j * %" PRId64 "]", inner)), K);
  buf_puts(b, "      id[j] = j;\n    }\n");
  buf_printf(b, "    for (int size = 2; size <= %" PRId64 "; size <<= 1)\n", p);
  buf_puts(b, "      for (int stride = size >> 1; stride > 0; stride >>= 1) {\n");
  buf_puts(b, "        __syncthreads();\n");
  buf_printf(b, "        for (int t = threadIdx.x; t < %" PRId64 "; t += blockDim.x) {\n", p / 2);
  buf_puts(b, "          const int lo = 2 * t - (t & (stride - 1)), hi = lo + stride;\n");
  buf_puts(b, "          // ascending (in topk's order) where bit `size` of lo is clear\n");
  buf_printf(b, "          if (gc_topk_before<%s>(key[hi], id[hi], key[lo], id[lo], %" PRId64 ") == ((lo & size) == 0)) {\n",
             largest ? "true" : "false", len);
  buf_printf(b, "            const %s tk = key[lo];\n            const int ti = id[lo];\n", K);
  buf_puts(b, "            key[lo] = key[hi]; id[lo] = id[hi]; key[hi] = tk; id[hi] = ti;\n");
  buf_puts(b, "          }\n        }\n      }\n    __syncthreads();\n");
  buf_printf(b, "    for (int j = threadIdx.x; j < %" PRId64 "; j += blockDim.x) {\n", k);
  buf_printf(b, "      const idx_t at = (row / %" PRId64 " * %" PRId64 " + j) * %" PRId64 " + row %% %" PRId64 ";\n", inner, k, inner, inner);
  buf_printf(b, "      out0[at] = in0[base + (idx_t)id[j] * %" PRId64 "];\n", inner);
  buf_puts(b, "      out1[at] = id[j];\n    }\n  }\n}\n");
  cg_kernel_step(cg, n, name, cg_blocks(cg, rows, 1), (unsigned)cg->target->block);
  return 0;
}

int cg_scan(Cg *cg, const Node *n) {
  if (n->op == OP_CUMSUM)
    return gen_cumsum(cg, n);
  return gen_topk(cg, n);
}
