/* layout.c: kernels for the ops that move data and compute nothing: transpose, expand,
 * slice, concat, split, gather and pad. Each is written from the output's side (one
 * thread per output element, grid-stride), so writes are coalesced, and elements are
 * copied as their bits (the dtype never changes). Transpose, concat and gather store
 * through cg_store_out, so the pointwise nodes after them can be their epilogue. A transpose that moves the innermost
 * dim goes through 32x33 shared-memory tiles so that reads are coalesced too. The
 * index arithmetic is ir/interp.c's, with the sizes baked in. */
#include "codegen/cg-impl.h"

#include <inttypes.h>
#include <string.h>

static void value_dims(const Value *v, int64_t *dims) {
  for (int i = 0; i < v->type.shape.rank; i++)
    dims[i] = cg_dim(v, i);
}

/* y[i] = x[offset of operand 0 at i]: transpose without tiles, expand, slice. */
static int strided_copy(Cg *cg, const Node *n, Space *s, const char *note) {
  int64_t numel = cg_numel(n->out[0]);
  space_coalesce(s);
  const char *name = cg_kernel_begin(cg, n, note);
  cg_loop_begin(cg, n, numel);
  space_emit_offsets(cg, s, "i", "o", "    ");
  cg_store_out(cg, n, "i", "in0[o0]", "    ");
  cg_loop_end(cg, n, name, numel);
  return 0;
}

/* ---------------------------------------------------------------- transpose */

/* A transpose whose innermost output dim is not the input's innermost: tiles of 32 x 32
 * (33 wide in shared memory, so the column reads hit distinct banks). Dim A is the
 * input's innermost (stride 1), dim B the output's innermost; the other dims are a batch
 * walked by blockIdx.z. */
static int tiled_transpose(Cg *cg, const Node *n, const Space *s) {
  int r = s->rank, A = -1, B = r - 1;
  for (int i = 0; i < r; i++)
    if (s->stride[0][i] == 1)
      A = i;
  int64_t ys[IR_MAX_RANK];
  contiguous_strides(r, s->dims, ys);
  int64_t nA = s->dims[A], nB = s->dims[B];
  Space batch;
  int64_t bdims[IR_MAX_RANK], bx[IR_MAX_RANK], by[IR_MAX_RANK];
  int nb = 0;
  for (int i = 0; i < r; i++)
    if (i != A && i != B) {
      bdims[nb] = s->dims[i];
      bx[nb] = s->stride[0][i];
      by[nb++] = ys[i];
    }
  space_init(&batch, nb, bdims);
  space_add_strides(&batch, bx, 0);
  space_add_strides(&batch, by, 0);
  int64_t nbatch = 1;
  for (int i = 0; i < nb; i++)
    nbatch *= bdims[i];
  const char *T = cg_ctype(n->out[0]->type.dtype);
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "tiled through shared memory: %" PRId64 " x %" PRId64 " matrices, %" PRId64 " of them", nA, nB, nbatch));
  Buf *b = &cg->src;
  buf_printf(b, "  typedef %s idx_t;\n", cg_idx_type(cg, cg_max_numel(n)));
  buf_printf(b, "  __shared__ %s tile[32][33];\n", T);
  buf_puts(b, "  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;\n");
  buf_puts(b, "  const idx_t a0 = (idx_t)blockIdx.y * 32, b0 = (idx_t)blockIdx.x * 32;\n");
  buf_printf(b, "  for (idx_t z = blockIdx.z; z < %" PRId64 "; z += gridDim.z) {\n", nbatch);
  space_emit_offsets(cg, &batch, "z", "o", "    ");
  buf_puts(b, "    // read along the input's contiguous dim\n");
  buf_printf(b, "    for (int j = ty; j < 32; j += %d) {\n", cg->target->block / 32);
  buf_puts(b, "      const idx_t a = a0 + tx, bb = b0 + j;\n");
  buf_printf(b, "      if (a < %" PRId64 " && bb < %" PRId64 ") tile[j][tx] = in0[o0 + a + bb * %" PRId64 "];\n", nA, nB, s->stride[0][B]);
  buf_puts(b, "    }\n    __syncthreads();\n");
  buf_puts(b, "    // write along the output's contiguous dim\n");
  buf_printf(b, "    for (int j = ty; j < 32; j += %d) {\n", cg->target->block / 32);
  buf_puts(b, "      const idx_t a = a0 + j, bb = b0 + tx;\n");
  buf_printf(b, "      if (a < %" PRId64 " && bb < %" PRId64 ") {\n", nA, nB);
  cg_store_out(cg, n, cg_fmt(cg, "(o1 + a * %" PRId64 " + bb)", ys[A]), "tile[tx][j]", "        ");
  buf_puts(b, "      }\n    }\n    __syncthreads();\n  }\n}\n");
  cg_kernel_step(cg, n, name, 1, cg->target->block);
  KernelStep *k = &cg->steps[cg->nsteps - 1].kernel;
  k->grid[0] = (unsigned)((nB + 31) / 32);
  k->grid[1] = (unsigned)((nA + 31) / 32);
  k->grid[2] = (unsigned)(nbatch < 65535 ? nbatch : 65535);
  return 0;
}

static int gen_transpose(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *y = n->out[0];
  int r = x->type.shape.rank, np;
  const int64_t *perm = attr_ints(n, "perm", &np);
  int64_t xd[IR_MAX_RANK], xs[IR_MAX_RANK], yd[IR_MAX_RANK], st[IR_MAX_RANK];
  value_dims(x, xd);
  value_dims(y, yd);
  contiguous_strides(r, xd, xs);
  for (int i = 0; i < r; i++)
    st[i] = xs[perm ? perm[i] : r - 1 - i];
  Space s;
  space_init(&s, r, yd);
  space_add_strides(&s, st, 0);
  space_coalesce(&s);
  /* grid.y holds the A tiles: at most 65535 of them */
  if (s.rank >= 2 && s.stride[0][s.rank - 1] != 1) {
    int64_t nA = 0;
    for (int i = 0; i < s.rank; i++)
      if (s.stride[0][i] == 1)
        nA = s.dims[i];
    if (nA && (nA + 31) / 32 <= 65535)
      return tiled_transpose(cg, n, &s);
  }
  return strided_copy(cg, n, &s, "the innermost dim stays: a strided copy");
}

/* ---------------------------------------------------------------- expand, slice */

static int gen_expand(Cg *cg, const Node *n) {
  const Value *y = n->out[0];
  int64_t yd[IR_MAX_RANK];
  value_dims(y, yd);
  Space s;
  space_init(&s, y->type.shape.rank, yd);
  space_add_bcast(&s, &n->in[0]->type.shape);
  return strided_copy(cg, n, &s, NULL);
}

/* The start and step of every dim, as eval_slice computes them (ONNX clamping). */
static int gen_slice(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *y = n->out[0];
  int r = x->type.shape.rank, ns, na, nst;
  const int64_t *starts = attr_ints(n, "starts", &ns);
  const int64_t *axes = attr_ints(n, "axes", &na);
  const int64_t *steps = attr_ints(n, "steps", &nst);
  int64_t start[IR_MAX_RANK], step[IR_MAX_RANK], xd[IR_MAX_RANK], xs[IR_MAX_RANK];
  int64_t yd[IR_MAX_RANK], st[IR_MAX_RANK];
  value_dims(x, xd);
  value_dims(y, yd);
  for (int i = 0; i < r; i++) {
    start[i] = 0;
    step[i] = 1;
  }
  for (int i = 0; i < ns; i++) {
    int64_t a = axes ? (axes[i] < 0 ? axes[i] + r : axes[i]) : i;
    /* the end only decides the count, which inference already put in y's dims */
    int64_t dim = xd[a], s0 = starts[i], k = steps ? steps[i] : 1;
    if (s0 < 0)
      s0 = s0 < -dim ? 0 : s0 + dim;
    s0 = k > 0 ? (s0 > dim ? dim : s0) : (s0 > dim - 1 ? dim - 1 : s0);
    start[a] = yd[a] ? s0 : 0;
    step[a] = yd[a] > 1 ? k : 1;
  }
  contiguous_strides(r, xd, xs);
  int64_t base = 0;
  for (int i = 0; i < r; i++) {
    base += start[i] * xs[i];
    st[i] = step[i] * xs[i];
  }
  Space s;
  space_init(&s, r, yd);
  space_add_strides(&s, st, base);
  return strided_copy(cg, n, &s, NULL);
}

/* ---------------------------------------------------------------- concat, split */

static void outer_len_inner(const Value *v, int axis, int64_t *outer, int64_t *len,
                            int64_t *inner) {
  *outer = *inner = 1;
  for (int i = 0; i < axis; i++)
    *outer *= cg_dim(v, i);
  for (int i = axis + 1; i < v->type.shape.rank; i++)
    *inner *= cg_dim(v, i);
  *len = cg_dim(v, axis);
}

/* "k = i % inner; ax = ...; o = ..." for a tensor viewed as [outer, len, inner]. */
static void emit_oli(Cg *cg, int64_t len, int64_t inner) {
  buf_printf(&cg->src, "    const idx_t k = i %% %" PRId64 ", t = i / %" PRId64 ";\n", inner, inner);
  buf_printf(&cg->src, "    const idx_t ax = t %% %" PRId64 ", o = t / %" PRId64 ";\n", len, len);
}

/* One operand of a part (below): where its elements are along the axis. */
typedef struct PartOperand {
  int param;
  int64_t at, len;
} PartOperand;

/* Statements that set p, a and l to the parameter, first axis index and length of the
 * operand holding axis index ax: a balanced tree of comparisons over ops[0..n), so that
 * neither NVRTC's time nor a thread's grows with n as a chain's would. */
static void emit_pick(Cg *cg, const PartOperand *ops, int n, const char *p, const char *ind) {
  Buf *b = &cg->src;
  if (n == 1) {
    buf_printf(b, "%sp = %s%d, a = %" PRId64 ", l = %" PRId64 ";\n", ind, p, ops[0].param,
               ops[0].at, ops[0].len);
    return;
  }
  const char *in2 = cg_fmt(cg, "%s  ", ind);
  buf_printf(b, "%sif (ax < %" PRId64 ") {\n", ind, ops[n / 2].at);
  emit_pick(cg, ops, n / 2, p, in2);
  buf_printf(b, "%s} else {\n", ind);
  emit_pick(cg, ops + n / 2, n - n / 2, p, in2);
  buf_printf(b, "%s}\n", ind);
}

/* A concat or split of more than CODEGEN_PART_OPERANDS inputs or outputs: one kernel per
 * part of that many of them, over the elements of the slab [at, at + span) of the axis
 * that they fill. The many operands are the inputs of a concat, the outputs of a split. */
static void gen_parts(Cg *cg, const Node *n, int axis, int64_t outer, int64_t len,
                      int64_t inner) {
  bool concat = n->op == OP_CONCAT;
  const Value *const *many = (const Value *const *)(concat ? n->in : n->out);
  const Value *one = concat ? n->out[0] : n->in[0];
  int count = concat ? n->nin : n->nout, per = CODEGEN_PART_OPERANDS;
  Buf *b = &cg->src;
  PartOperand ops[CODEGEN_PART_OPERANDS];
  int64_t at = 0;
  for (int k0 = 0, part = 0; k0 < count; k0 += per, part++) {
    int k1 = count - k0 > per ? k0 + per : count, nops = 0;
    int64_t start = at;
    for (int k = k0; k < k1; k++) {
      int64_t l = cg_dim(many[k], axis);
      if (l) /* an empty operand holds no index */
        ops[nops++] = (PartOperand){k - k0, at, l};
      at += l;
    }
    int64_t span = at - start;
    if (!span)
      continue; /* empty operands: nothing to move */
    int64_t elems = outer * span * inner;
    const char *ops_name = cg_fmt(cg, "%s_part%d", op_info[n->op].name, part);
    const char *head = cg_fmt(cg, "node %d: %s", n->id, op_info[n->op].name);
    const char *note = cg_fmt(cg, "part %d: %s %d..%d of %d, elements %" PRId64 "..%" PRId64
                              " of axis %d", part, concat ? "inputs" : "outputs", k0, k1 - 1,
                              count, start, at - 1, axis);
    const char *name = concat ? cg_kernel_begin_values(cg, n, ops_name, head, many + k0,
                                                       k1 - k0, &one, 1, note)
                              : cg_kernel_begin_values(cg, n, ops_name, head, &one, 1,
                                                       many + k0, k1 - k0, note);
    buf_printf(b, "  typedef %s idx_t;\n", cg_idx_type(cg, cg_numel(one)));
    buf_printf(b, "  for (idx_t i = (idx_t)blockIdx.x * blockDim.x + threadIdx.x; i < %" PRId64 "; i += (idx_t)gridDim.x * blockDim.x) {\n", elems);
    buf_printf(b, "    const idx_t k = i %% %" PRId64 ", t = i / %" PRId64 ";\n", inner, inner);
    buf_printf(b, "    const idx_t ax = %" PRId64 " + t %% %" PRId64 ", o = t / %" PRId64 ";\n",
               start, span, span);
    buf_printf(b, "    %s%s *p;\n    idx_t a, l;\n", concat ? "const " : "",
               cg_ctype(one->type.dtype));
    emit_pick(cg, ops, nops, concat ? "in" : "out", "    ");
    if (concat)
      buf_printf(b, "    out0[(o * %" PRId64 " + ax) * %" PRId64 " + k] = p[(o * l + ax - a) * %" PRId64 " + k];\n",
                 len, inner, inner);
    else
      buf_printf(b, "    p[(o * l + ax - a) * %" PRId64 " + k] = in0[(o * %" PRId64 " + ax) * %" PRId64 " + k];\n",
                 inner, len, inner);
    buf_puts(b, "  }\n}\n");
    unsigned grid = cg_blocks(cg, elems, cg->target->block);
    if (concat)
      cg_kernel_step_values(cg, n, name, grid, cg->target->block, many + k0, k1 - k0, &one, 1);
    else
      cg_kernel_step_values(cg, n, name, grid, cg->target->block, &one, 1, many + k0, k1 - k0);
  }
}

static int gen_concat(Cg *cg, const Node *n) {
  const Value *y = n->out[0];
  int r = y->type.shape.rank;
  int64_t axis = attr_int(n, "axis");
  axis = axis < 0 ? axis + r : axis;
  int64_t outer, len, inner, numel = cg_numel(y);
  outer_len_inner(y, (int)axis, &outer, &len, &inner);
  if (n->nin > CODEGEN_PART_OPERANDS && cg->viewed != n && !cg_epilogue_of(cg, n)) {
    gen_parts(cg, n, (int)axis, outer, len, inner);
    return 0;
  }
  /* Inputs read as they are, no epilogue, and every input's rows a whole number of
   * 16-byte vectors (a channels-last concat of convolutions' outputs): a vector a thread. */
  int64_t V = 16 / (int64_t)dtype_size(y->type.dtype);
  bool vec = !cg->viewed && !cg_epilogue_of(cg, n) && V > 1 && (len * inner) % V == 0;
  for (int k = 0; k < n->nin && vec; k++)
    vec = (cg_dim(n->in[k], (int)axis) * inner) % V == 0;
  if (vec) {
    const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "%" PRId64 " elements a thread", V));
    const char *T = cg_fmt(cg, "gc_vec<%s, %" PRId64 ">", cg_ctype(y->type.dtype), V);
    int64_t row = len * inner / V;
    cg_loop_begin(cg, n, numel / V);
    buf_printf(&cg->src, "    const idx_t c = i %% %" PRId64 ", o = i / %" PRId64 ";\n    %s v;\n",
               row, row, T);
    int64_t at = 0;
    bool first = true;
    for (int k = 0; k < n->nin; k++) {
      int64_t l = cg_dim(n->in[k], (int)axis) * inner / V;
      if (!l)
        continue;
      buf_printf(&cg->src, "    %s", first ? "" : "else ");
      if (at + l != row)
        buf_printf(&cg->src, "if (c < %" PRId64 ") ", at + l);
      buf_printf(&cg->src, "v = ((const %s *)in%d)[o * %" PRId64 " + c - %" PRId64 "];\n", T, k, l, at);
      first = false;
      at += l;
    }
    buf_printf(&cg->src, "    ((%s *)out0)[i] = v;\n", T);
    cg_loop_end(cg, n, name, numel / V);
    return 0;
  }
  const char *name = cg_kernel_begin(cg, n, NULL);
  cg_loop_begin(cg, n, numel);
  emit_oli(cg, len, inner);
  /* the element, then one store (which an epilogue may extend) */
  buf_printf(&cg->src, "    %s v;\n", cg_ctype(y->type.dtype));
  int64_t at = 0;
  bool first = true;
  for (int k = 0; k < n->nin; k++) {
    int64_t l = cg_dim(n->in[k], (int)axis);
    if (!l)
      continue;
    bool last = at + l == len;
    buf_printf(&cg->src, "    %s", first ? "" : "else ");
    if (!last)
      buf_printf(&cg->src, "if (ax < %" PRId64 ") ", at + l);
    const View *vw = cg->viewed == n ? &cg->views[k] : NULL;
    if (!vw || vw->base == n->in[k]) {
      buf_printf(&cg->src, "v = in%d[(o * %" PRId64 " + ax - %" PRId64 ") * %" PRId64 " + k];\n",
                 k, l, at, inner);
    } else {
      /* the input's element index, walked through its view's strides */
      Space s;
      space_init(&s, vw->rank, vw->dims);
      space_add_strides(&s, vw->stride, vw->offset);
      space_coalesce(&s);
      buf_printf(&cg->src, "{\n      const idx_t j%d = (o * %" PRId64 " + ax - %" PRId64 ") * %" PRId64 " + k;\n",
                 k, l, at, inner);
      space_emit_offsets(cg, &s, cg_fmt(cg, "j%d", k), cg_fmt(cg, "c%d_", k), "      ");
      buf_printf(&cg->src, "      v = in%d[c%d_0];\n    }\n", k, k);
    }
    first = false;
    at += l;
  }
  cg_store_out(cg, n, "i", "v", "    ");
  cg_loop_end(cg, n, name, numel);
  return 0;
}

int cg_concat_group(Cg *cg, const GroupPlan *p) {
  if (p->nepilogue && cg_epilogue_begin(cg, p))
    return -1;
  cg->viewed = p->anchor;
  cg->views = p->operand;
  int rc = gen_concat(cg, p->anchor);
  cg->viewed = NULL;
  cg->views = NULL;
  return (p->nepilogue && cg_epilogue_end(cg)) || rc ? -1 : 0;
}

static int gen_split(Cg *cg, const Node *n) {
  const Value *x = n->in[0];
  int r = x->type.shape.rank;
  int64_t axis = attr_int(n, "axis");
  axis = axis < 0 ? axis + r : axis;
  int64_t outer, len, inner, numel = cg_numel(x);
  outer_len_inner(x, (int)axis, &outer, &len, &inner);
  if (n->nout > CODEGEN_PART_OPERANDS) {
    gen_parts(cg, n, (int)axis, outer, len, inner);
    return 0;
  }
  const char *name = cg_kernel_begin(cg, n, "one pass over the input, each element to its output");
  cg_loop_begin(cg, n, numel);
  emit_oli(cg, len, inner);
  int64_t at = 0;
  bool first = true;
  for (int k = 0; k < n->nout; k++) {
    int64_t l = cg_dim(n->out[k], (int)axis);
    if (!l)
      continue;
    buf_printf(&cg->src, "    %sif (ax < %" PRId64 ") out%d[(o * %" PRId64 " + ax - %" PRId64 ") * %" PRId64 " + k] = in0[i];\n",
               first ? "" : "else ", at + l, k, l, at, inner);
    first = false;
    at += l;
  }
  cg_loop_end(cg, n, name, numel);
  /* the loop runs over the input, not the (first) output */
  return 0;
}

/* ---------------------------------------------------------------- gather, pad */

static int gen_gather(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *idx = n->in[1], *y = n->out[0];
  int r = x->type.shape.rank;
  int64_t axis = attr_int(n, "axis");
  axis = axis < 0 ? axis + r : axis;
  int64_t outer, len, inner, ni = cg_numel(idx), numel = cg_numel(y);
  outer_len_inner(x, (int)axis, &outer, &len, &inner);
  const char *name = cg_kernel_begin(cg, n, "an index outside the axis gives 0 (the reference executor reports it)");
  cg_loop_begin(cg, n, numel);
  emit_oli(cg, ni, inner);
  buf_printf(&cg->src, "    long long j = %s;\n", cg_load(cg, idx->type.dtype, DOM_I64, "in1[ax]"));
  buf_printf(&cg->src, "    if (j < 0) j += %" PRId64 ";\n", len);
  buf_printf(&cg->src, "    const %s v = j >= 0 && j < %" PRId64 " ? in0[(o * %" PRId64 " + j) * %" PRId64 " + k] : %s{};\n",
             cg_ctype(y->type.dtype), len, len, inner, cg_ctype(y->type.dtype));
  cg_store_out(cg, n, "i", "v", "    ");
  cg_loop_end(cg, n, name, numel);
  return 0;
}

static int gen_pad(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *y = n->out[0];
  int r = x->type.shape.rank, np;
  const int64_t *pads = attr_ints(n, "pads", &np);
  const char *mode = attr_string(n, "mode");
  bool reflect = !strcmp(mode, "reflect"), edge = !strcmp(mode, "edge");
  int64_t xd[IR_MAX_RANK], xs[IR_MAX_RANK], numel = cg_numel(y);
  value_dims(x, xd);
  contiguous_strides(r, xd, xs);
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "mode %s", mode));
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, numel);
  buf_puts(b, "    idx_t r = i, c, off = 0;\n    bool outside = false;\n");
  for (int d = r - 1; d >= 0; d--) {
    int64_t yd = cg_dim(y, d), pb = pads[d], pe = pads[r + d];
    buf_printf(b, "    c = r %% %" PRId64 "; r /= %" PRId64 ";\n", yd, yd);
    if (pb || pe) {
      buf_printf(b, "    c -= %" PRId64 ";\n", pb);
      if (reflect)
        buf_printf(b, "    c = c < 0 ? -c : c >= %" PRId64 " ? %" PRId64 " - c : c;\n", xd[d], 2 * (xd[d] - 1));
      else if (edge)
        buf_printf(b, "    c = c < 0 ? 0 : c >= %" PRId64 " ? %" PRId64 " : c;\n", xd[d], xd[d] - 1);
      else
        buf_printf(b, "    outside = outside || c < 0 || c >= %" PRId64 ";\n", xd[d]);
    }
    buf_printf(b, "    off += c * %" PRId64 ";\n", xs[d]);
  }
  buf_printf(b, "    out0[i] = outside ? %s : in0[off];\n",
             cg_const_of(cg, y->type.dtype, attr_float(n, "value")));
  cg_loop_end(cg, n, name, numel);
  return 0;
}

int cg_layout(Cg *cg, const Node *n) {
  switch (n->op) {
  case OP_TRANSPOSE: return gen_transpose(cg, n);
  case OP_EXPAND: return gen_expand(cg, n);
  case OP_SLICE: return gen_slice(cg, n);
  case OP_CONCAT: return gen_concat(cg, n);
  case OP_SPLIT: return gen_split(cg, n);
  case OP_GATHER: return gen_gather(cg, n);
  case OP_PAD: return gen_pad(cg, n);
  default: return cg_error(cg, n, "op %s (node %d) has no GPU kernel yet", op_info[n->op].name, n->id);
  }
}
