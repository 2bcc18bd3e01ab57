/* index.c: kernels for the ops that compute where elements go: tile, trilu,
 * gather_elements, gather_nd, scatter_elements, scatter_nd, range, one_hot,
 * depth_to_space, space_to_depth, reverse_sequence and max_unpool.
 *
 * Gathers are one thread per output element (grid-stride, coalesced writes), copying
 * the bits. The reference executor reports an index outside its axis as an error; a
 * kernel cannot, so a gather gives 0 there and a scatter skips that update. Scatters
 * copy data to the output first (a second kernel of the node, named ..._copy), then
 * apply the updates: with reduction none, scatter_nd takes a thread per update element
 * (ONNX leaves duplicate indices undefined); everything else keeps the reference's
 * order where updates can meet (see each kernel). Meanings are ir/interp.c's. */
#include "codegen/cg-impl.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

static void value_dims(const Value *v, int64_t *dims) {
  for (int i = 0; i < v->type.shape.rank; i++)
    dims[i] = cg_dim(v, i);
}

/* An int64 as a C literal (INT64_MIN has none). */
static const char *i64_lit(Cg *cg, int64_t v) {
  if (v == INT64_MIN)
    return "(-9223372036854775807LL - 1)";
  return cg_fmt(cg, "%" PRId64 "LL", v);
}

/* "const idx_t <p>J = ...;" for every dim J of dims, from the flat index `var`; unless
 * `all`, not for dim `skip` (-1: none) and dims of size 1, which no offset uses. */
static void emit_coords(Cg *cg, int rank, const int64_t *dims, const char *var, const char *p,
                        int skip, bool all) {
  Buf *b = &cg->src;
  buf_printf(b, "    idx_t r = %s;\n", var);
  for (int j = rank - 1; j >= 0; j--) {
    bool used = all || (j != skip && dims[j] != 1);
    if (j && used)
      buf_printf(b, "    const idx_t %s%d = r %% %" PRId64 "; r /= %" PRId64 ";\n", p, j, dims[j], dims[j]);
    else if (j && dims[j] != 1)
      buf_printf(b, "    r /= %" PRId64 ";\n", dims[j]);
    else if (!j && used)
      buf_printf(b, "    const idx_t %s0 = r;\n", p);
  }
}

/* "a0 * s0 + a1 * s1 + ..." over the dims of `rank`, leaving out dim `skip` (-1: none)
 * and strides of size-1 dims. "0" when nothing is left. */
static const char *dot(Cg *cg, int rank, const char *p, const int64_t *st, const int64_t *dims, int skip) {
  const char *s = NULL;
  for (int j = 0; j < rank; j++) {
    if (j == skip || dims[j] == 1)
      continue;
    const char *t = st[j] == 1 ? cg_fmt(cg, "%s%d", p, j) : cg_fmt(cg, "%s%d * %" PRId64, p, j, st[j]);
    s = s ? cg_fmt(cg, "%s + %s", s, t) : t;
  }
  return s ? s : "0";
}

/* "long long <var> = index at <e> (of idx's dtype), negative counting from the end of
 * size" and "bool ok<var>" for whether it lies in [0, size). */
static void emit_index(Cg *cg, const Value *idx, const char *e, const char *var, int64_t size,
                       const char *ind) {
  buf_printf(&cg->src, "%slong long %s = %s;\n", ind, var, cg_load(cg, idx->type.dtype, DOM_I64, e));
  buf_printf(&cg->src, "%sif (%s < 0) %s += %" PRId64 ";\n", ind, var, var, size);
  buf_printf(&cg->src, "%sconst bool ok_%s = %s >= 0 && %s < %" PRId64 ";\n", ind, var, var, var, size);
}

/* ---------------------------------------------------------------- tile, trilu */

static int gen_tile(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *y = n->out[0];
  int r = y->type.shape.rank;
  int64_t xd[IR_MAX_RANK], xs[IR_MAX_RANK], numel = cg_numel(y);
  value_dims(x, xd);
  contiguous_strides(r, xd, xs);
  const char *name = cg_kernel_begin(cg, n, NULL);
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, numel);
  buf_puts(b, "    idx_t r = i, c, off = 0;\n");
  for (int j = r - 1; j >= 0; j--) {
    int64_t yd = cg_dim(y, j);
    if (j)
      buf_printf(b, "    c = r %% %" PRId64 "; r /= %" PRId64 ";", yd, yd);
    else
      buf_puts(b, "    c = r;");
    if (xd[j] == 1)
      buf_puts(b, " // repeats one element\n");
    else if (xd[j] == yd)
      buf_printf(b, " off += c * %" PRId64 ";\n", xs[j]);
    else
      buf_printf(b, " off += c %% %" PRId64 " * %" PRId64 ";\n", xd[j], xs[j]);
  }
  buf_puts(b, "    out0[i] = in0[off];\n");
  cg_loop_end(cg, n, name, numel);
  return 0;
}

/* Keeps element (row, col) of every matrix where col - row >= k (upper) or <= k. */
static int gen_trilu(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *y = n->out[0];
  int r = x->type.shape.rank;
  int64_t rows = cg_dim(x, r - 2), cols = cg_dim(x, r - 1), k = attr_int(n, "k");
  bool upper = attr_int(n, "upper") != 0;
  /* col - row lies in (-rows, cols): a k beyond that keeps all or nothing the same way */
  k = k < -rows - 1 ? -rows - 1 : k > cols + 1 ? cols + 1 : k;
  int64_t numel = cg_numel(y);
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "%s triangle from diagonal %" PRId64, upper ? "upper" : "lower", k));
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, numel);
  buf_printf(b, "    const idx_t col = i %% %" PRId64 ", row = i / %" PRId64 " %% %" PRId64 ";\n", cols, cols, rows);
  buf_printf(b, "    out0[i] = col - row %s %" PRId64 " ? in0[i] : %s{};\n", upper ? ">=" : "<=", k,
             cg_ctype(y->type.dtype));
  cg_loop_end(cg, n, name, numel);
  return 0;
}

/* ---------------------------------------------------------------- gathers */

/* y[o] = x[o with o[axis] replaced by indices[o]]; indices has y's shape. */
static int gen_gather_elements(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *idx = n->in[1], *y = n->out[0];
  int r = x->type.shape.rank;
  int axis = (int)attr_int(n, "axis");
  axis = axis < 0 ? axis + r : axis;
  int64_t xd[IR_MAX_RANK], xs[IR_MAX_RANK], yd[IR_MAX_RANK], numel = cg_numel(y);
  value_dims(x, xd);
  value_dims(y, yd);
  contiguous_strides(r, xd, xs);
  const char *name = cg_kernel_begin(cg, n, "an index outside the axis gives 0 (the reference executor reports it)");
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, numel);
  emit_coords(cg, r, yd, "i", "c", axis, false);
  emit_index(cg, idx, "in1[i]", "at", xd[axis], "    ");
  buf_printf(b, "    out0[i] = ok_at ? in0[%s + at * %" PRId64 "] : %s{};\n", dot(cg, r, "c", xs, yd, axis),
             xs[axis], cg_ctype(y->type.dtype));
  cg_loop_end(cg, n, name, numel);
  return 0;
}

/* The flat offset `off` in dims [from, from + k) of data that index tuple `t` names, and
 * whether every entry was inside its dim (`ok`). */
static void emit_tuple(Cg *cg, const Value *x, const Value *idx, int from, int k, const char *t,
                       const char *ind) {
  Buf *b = &cg->src;
  buf_printf(b, "%sidx_t off = 0;\n%sbool ok = true;\n", ind, ind);
  for (int j = 0; j < k; j++) {
    int64_t dim = cg_dim(x, from + j);
    buf_printf(b, "%s{\n", ind);
    emit_index(cg, idx, cg_fmt(cg, "in1[%s * %d + %d]", t, k, j), "a", dim, cg_fmt(cg, "%s  ", ind));
    buf_printf(b, "%s  ok = ok && ok_a;\n%s  off = off * %" PRId64 " + a;\n%s}\n", ind, ind, dim, ind);
  }
}

/* Each k-tuple of indices (within its batch) picks a slice of data. */
static int gen_gather_nd(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *idx = n->in[1], *y = n->out[0];
  int bd = (int)attr_int(n, "batch_dims"), q = idx->type.shape.rank, r = x->type.shape.rank;
  int k = (int)cg_dim(idx, q - 1);
  int64_t ntup = 1, slice = 1, per_batch = 1, numel = cg_numel(y);
  for (int j = bd; j < q - 1; j++)
    ntup *= cg_dim(idx, j);
  for (int j = bd + k; j < r; j++)
    slice *= cg_dim(x, j);
  for (int j = bd; j < r; j++)
    per_batch *= cg_dim(x, j);
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "tuples of %d indices pick slices of %" PRId64 "; an index outside its dim gives 0", k, slice));
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, numel);
  buf_printf(b, "    const idx_t t = i / %" PRId64 ", e = i %% %" PRId64 ";\n", slice, slice);
  emit_tuple(cg, x, idx, bd, k, "t", "    ");
  const char *base = bd ? cg_fmt(cg, "t / %" PRId64 " * %" PRId64 " + ", ntup, per_batch) : "";
  buf_printf(b, "    out0[i] = ok ? in0[%soff * %" PRId64 " + e] : %s{};\n", base, slice, cg_ctype(y->type.dtype));
  cg_loop_end(cg, n, name, numel);
  return 0;
}

/* ---------------------------------------------------------------- scatters */

/* out0 = in0, 128 bits at a time when the size divides: the first kernel of a scatter. */
static void copy_kernel(Cg *cg, const Node *n) {
  const Value *y = n->out[0];
  int64_t numel = cg_numel(y);
  int v = (int)(16 / dtype_size(y->type.dtype));
  if (numel % v)
    v = 1;
  const char *name = cg_kernel_begin_part(cg, n, "copy", "the data, before the updates");
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, numel / v);
  if (v > 1) {
    buf_printf(b, "    typedef gc_vec<%s, %d> v_t;\n", cg_ctype(y->type.dtype), v);
    buf_puts(b, "    ((v_t *)out0)[i] = ((const v_t *)in0)[i];\n");
  } else {
    buf_puts(b, "    out0[i] = in0[i];\n");
  }
  cg_loop_end(cg, n, name, numel / v);
}

/* The statement that combines update in2[u] into out0[o] by reduction red, as
 * scatter_one: none writes it; add, mul, max and min combine (a NaN wins max and min;
 * integers wrap). */
static const char *combine(Cg *cg, const Node *n, const char *red, const char *o, const char *u) {
  DType dt = n->out[0]->type.dtype;
  const char *dst = cg_fmt(cg, "out0[%s]", o), *src = cg_fmt(cg, "in2[%s]", u);
  if (!strcmp(red, "none"))
    return cg_fmt(cg, "%s = %s;", dst, src);
  Dom dom = cg_dom(dt);
  const char *T = cg_dom_type(dom);
  const char *v;
  if (!strcmp(red, "add"))
    v = dom == DOM_I64 ? "gc_iadd(a, b)" : "a + b";
  else if (!strcmp(red, "mul"))
    v = dom == DOM_I64 ? "gc_imul(a, b)" : "a * b";
  else {
    const char *cmp = !strcmp(red, "max") ? ">" : "<";
    v = dom == DOM_I64 ? cg_fmt(cg, "a %s b ? a : b", cmp)
                       : cg_fmt(cg, "a != a || b != b ? %s : a %s b ? a : b", cg_lit(cg, NAN, dom), cmp);
  }
  return cg_fmt(cg, "{ const %s a = %s, b = %s; %s = %s; }", T, cg_load(cg, dt, dom, dst),
                cg_load(cg, dt, dom, src), dst, cg_store(cg, dt, dom, v));
}

/* Two updates can only meet when they agree on every coordinate but the axis, so a
 * thread takes one line of updates along the axis and applies it in order: the
 * reference's sequential result, duplicates and all. */
static int gen_scatter_elements(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *idx = n->in[1], *u = n->in[2];
  int r = x->type.shape.rank;
  int axis = (int)attr_int(n, "axis");
  axis = axis < 0 ? axis + r : axis;
  const char *red = attr_string(n, "reduction");
  int64_t xd[IR_MAX_RANK], xs[IR_MAX_RANK], ud[IR_MAX_RANK], us[IR_MAX_RANK];
  value_dims(x, xd);
  value_dims(u, ud);
  contiguous_strides(r, xd, xs);
  contiguous_strides(r, ud, us);
  copy_kernel(cg, n);
  int64_t len = ud[axis], lines = len ? cg_numel(u) / len : 0;
  if (lines == 0) /* no updates: the copy is the result */
    return 0;
  /* the lines: the update dims without the axis */
  int64_t ld[IR_MAX_RANK];
  memcpy(ld, ud, sizeof ld);
  ld[axis] = 1;
  const char *name = cg_kernel_begin_part(cg, n, "update", cg_fmt(cg, "reduction %s: a thread per line of %" PRId64 " updates along axis %d, in order; an index outside the axis is skipped", red, len, axis));
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, lines);
  emit_coords(cg, r, ld, "i", "c", axis, false);
  buf_printf(b, "    const idx_t ub = %s, xb = %s;\n", dot(cg, r, "c", us, ld, axis), dot(cg, r, "c", xs, ld, axis));
  buf_printf(b, "    for (idx_t j = 0; j < %" PRId64 "; j++) {\n", len);
  buf_printf(b, "      const idx_t ui = ub + j * %" PRId64 ";\n", us[axis]);
  emit_index(cg, idx, "in1[ui]", "at", xd[axis], "      ");
  buf_puts(b, "      if (!ok_at) continue;\n");
  buf_printf(b, "      %s\n    }\n", combine(cg, n, red, cg_fmt(cg, "xb + at * %" PRId64, xs[axis]), "ui"));
  cg_loop_end(cg, n, name, lines);
  return 0;
}

/* Index tuple t writes (or combines) update slice t at the slice of data it names. With
 * a reduction, a thread takes one element e of the slice and walks the tuples in order,
 * so updates that meet combine in the reference's order. */
static int gen_scatter_nd(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *idx = n->in[1];
  int q = idx->type.shape.rank, r = x->type.shape.rank;
  int k = (int)cg_dim(idx, q - 1);
  const char *red = attr_string(n, "reduction");
  bool none = !strcmp(red, "none");
  int64_t ntup = 1, slice = 1;
  for (int j = 0; j < q - 1; j++)
    ntup *= cg_dim(idx, j);
  for (int j = k; j < r; j++)
    slice *= cg_dim(x, j);
  copy_kernel(cg, n);
  if (ntup == 0)
    return 0;
  Buf *b = &cg->src;
  const char *name;
  if (none) {
    name = cg_kernel_begin_part(cg, n, "update", cg_fmt(cg, "reduction none: a thread per update element (%" PRId64 " tuples of %d indices, slices of %" PRId64 "); an index outside its dim is skipped", ntup, k, slice));
    cg_loop_begin(cg, n, ntup * slice);
    buf_printf(b, "    const idx_t t = i / %" PRId64 ", e = i %% %" PRId64 ";\n", slice, slice);
    emit_tuple(cg, x, idx, 0, k, "t", "    ");
    buf_printf(b, "    if (ok) out0[off * %" PRId64 " + e] = in2[i];\n", slice);
    cg_loop_end(cg, n, name, ntup * slice);
    return 0;
  }
  name = cg_kernel_begin_part(cg, n, "update", cg_fmt(cg, "reduction %s: a thread per slice element, the %" PRId64 " tuples of %d indices in order; an index outside its dim is skipped", red, ntup, k));
  cg_loop_begin(cg, n, slice);
  buf_printf(b, "    for (idx_t t = 0; t < %" PRId64 "; t++) {\n", ntup);
  emit_tuple(cg, x, idx, 0, k, "t", "      ");
  buf_printf(b, "      if (ok) %s\n    }\n",
             combine(cg, n, red, cg_fmt(cg, "off * %" PRId64 " + i", slice), cg_fmt(cg, "t * %" PRId64 " + i", slice)));
  cg_loop_end(cg, n, name, slice);
  return 0;
}

/* ---------------------------------------------------------------- range, one_hot */

/* start + i * delta, with start and delta the constants inference read: floats in
 * double, integers wrapping, each rounded once to the output type, like eval_range. */
static int gen_range(Cg *cg, const Node *n) {
  const Value *y = n->out[0];
  DType dt = y->type.dtype;
  const Tensor *s = n->in[0]->data, *d = n->in[2]->data;
  if (!s || !d)
    return cg_error(cg, n, "range (node %d) needs constant start and delta", n->id);
  int64_t numel = cg_numel(y);
  const char *name = cg_kernel_begin(cg, n, "the constants start and delta baked in");
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, numel);
  if (dtype_is_float(dt)) {
    const char *v = cg_fmt(cg, "%s + (double)i * %s", cg_lit(cg, dtype_load_f64(s->dtype, s->data), DOM_F64),
                           cg_lit(cg, dtype_load_f64(d->dtype, d->data), DOM_F64));
    buf_printf(b, "    out0[i] = %s;\n", cg_store(cg, dt, DOM_F64, v));
  } else {
    const char *v = cg_fmt(cg, "gc_iadd(%s, gc_imul((long long)i, %s))", i64_lit(cg, dtype_load_i64(s->dtype, s->data)),
                           i64_lit(cg, dtype_load_i64(d->dtype, d->data)));
    buf_printf(b, "    out0[i] = %s;\n", cg_store(cg, dt, DOM_I64, v));
  }
  cg_loop_end(cg, n, name, numel);
  return 0;
}

/* y[pre, k, post] = values[index[pre, post] == k] (off 0, on 1), the index truncated,
 * negative counting from the end; outside [-depth, depth) it matches no k. */
static int gen_one_hot(Cg *cg, const Node *n) {
  const Value *idx = n->in[0], *y = n->out[0];
  int r = y->type.shape.rank;
  int axis = (int)attr_int(n, "axis");
  axis = axis < 0 ? axis + r : axis;
  int64_t depth = attr_int(n, "depth"), post = 1, numel = cg_numel(y);
  for (int j = axis + 1; j < r; j++)
    post *= cg_dim(y, j);
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "depth %" PRId64 " on axis %d", depth, axis));
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, numel);
  buf_printf(b, "    const idx_t p = i %% %" PRId64 ", k = i / %" PRId64 " %% %" PRId64 ", at = i / %" PRId64 " * %" PRId64 " + p;\n",
             post, post, depth, post * depth, post);
  if (dtype_is_float(idx->type.dtype)) {
    buf_printf(b, "    const double dv = trunc(%s);\n", cg_load(cg, idx->type.dtype, DOM_F64, "in0[at]"));
    buf_printf(b, "    long long v = dv >= %s && dv < %s ? (long long)dv : %" PRId64 "LL;\n",
               cg_lit(cg, -(double)depth, DOM_F64), cg_lit(cg, (double)depth, DOM_F64), depth);
  } else {
    buf_printf(b, "    long long v = %s;\n", cg_load(cg, idx->type.dtype, DOM_I64, "in0[at]"));
  }
  buf_printf(b, "    if (v < 0 && v >= -%" PRId64 "LL) v += %" PRId64 ";\n", depth, depth);
  buf_puts(b, "    out0[i] = in1[v == k ? 1 : 0];\n");
  cg_loop_end(cg, n, name, numel);
  return 0;
}

/* ---------------------------------------------------------------- space/depth, reverse */

static int gen_space_depth(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *y = n->out[0];
  int64_t bs = attr_int(n, "blocksize"), yd[4], xd[4], xs[4], numel = cg_numel(y);
  value_dims(y, yd);
  value_dims(x, xd);
  contiguous_strides(4, xd, xs);
  bool d2s = n->op == OP_DEPTH_TO_SPACE;
  bool crd = d2s && !strcmp(attr_string(n, "mode"), "CRD");
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "blocksize %" PRId64 "%s", bs, d2s ? (crd ? ", CRD" : ", DCR") : ""));
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, numel);
  emit_coords(cg, 4, yd, "i", "o", -1, true);
  if (d2s) {
    buf_printf(b, "    const idx_t bi = o2 %% %" PRId64 ", bj = o3 %% %" PRId64 ";\n", bs, bs);
    if (crd)
      buf_printf(b, "    const idx_t c = (o1 * %" PRId64 " + bi) * %" PRId64 " + bj;\n", bs, bs);
    else
      buf_printf(b, "    const idx_t c = (bi * %" PRId64 " + bj) * %" PRId64 " + o1;\n", bs, yd[1]);
    buf_printf(b, "    out0[i] = in0[o0 * %" PRId64 " + c * %" PRId64 " + o2 / %" PRId64 " * %" PRId64 " + o3 / %" PRId64 "];\n",
               xs[0], xs[1], bs, xs[2], bs);
  } else {
    buf_printf(b, "    const idx_t blk = o1 / %" PRId64 ";\n", xd[1]);
    buf_printf(b, "    out0[i] = in0[o0 * %" PRId64 " + o1 %% %" PRId64 " * %" PRId64 " + (o2 * %" PRId64 " + blk / %" PRId64 ") * %" PRId64 " + o3 * %" PRId64 " + blk %% %" PRId64 "];\n",
               xs[0], xd[1], xs[1], bs, bs, xs[2], bs, bs);
  }
  cg_loop_end(cg, n, name, numel);
  return 0;
}

/* The first sequence_lens[b] steps of batch b reversed along the time axis (axes 0 and
 * 1). A length outside [0, steps], which the reference reports, reverses nothing. */
static int gen_reverse_sequence(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *lens = n->in[1];
  int ba = (int)attr_int(n, "batch_axis"), ta = (int)attr_int(n, "time_axis");
  int64_t d1 = cg_dim(x, 1), steps = cg_dim(x, ta), inner = 1, numel = cg_numel(x);
  for (int j = 2; j < x->type.shape.rank; j++)
    inner *= cg_dim(x, j);
  int64_t tstride = ta == 0 ? d1 * inner : inner;
  const char *name = cg_kernel_begin(cg, n, cg_fmt(cg, "batch axis %d, time axis %d", ba, ta));
  Buf *b = &cg->src;
  cg_loop_begin(cg, n, numel);
  buf_printf(b, "    const idx_t c0 = i / %" PRId64 ", c1 = i / %" PRId64 " %% %" PRId64 ";\n", d1 * inner, inner, d1);
  buf_printf(b, "    long long len = %s;\n", cg_load(cg, lens->type.dtype, DOM_I64, cg_fmt(cg, "in1[c%d]", ba)));
  buf_printf(b, "    if (len < 0 || len > %" PRId64 ") len = 0;\n", steps);
  buf_printf(b, "    const idx_t t = c%d, src = t < len ? i + ((idx_t)len - 1 - 2 * t) * %" PRId64 " : i;\n", ta, tstride);
  buf_puts(b, "    out0[i] = in0[src];\n");
  cg_loop_end(cg, n, name, numel);
  return 0;
}

/* ---------------------------------------------------------------- max_unpool */

/* A zeroed output, then each element of x lands at its index: a flat position in the
 * default output [N, C, (in - 1) * stride + kernel - pads...], moved by its coordinates
 * into y (which output_shape may make larger). An index outside the default output,
 * which the reference reports, is skipped; duplicates (ONNX leaves them undefined) land
 * in any order. */
static int gen_max_unpool(Cg *cg, const Node *n) {
  const Value *x = n->in[0], *idx = n->in[1], *y = n->out[0];
  int r = x->type.shape.rank, k = r - 2;
  int64_t kernel[IR_MAX_RANK], stride[IR_MAX_RANK], pads[2 * IR_MAX_RANK], dflt[IR_MAX_RANK];
  int64_t ys[IR_MAX_RANK], yd[IR_MAX_RANK], total = 1;
  int len;
  const int64_t *v = attr_ints(n, "kernel_shape", &len);
  for (int j = 0; j < k; j++)
    kernel[j] = len ? v[j] : 1;
  v = attr_ints(n, "strides", &len);
  for (int j = 0; j < k; j++)
    stride[j] = len ? v[j] : 1;
  v = attr_ints(n, "pads", &len);
  for (int j = 0; j < 2 * k; j++)
    pads[j] = len ? v[j] : 0;
  dflt[0] = cg_dim(x, 0);
  dflt[1] = cg_dim(x, 1);
  for (int j = 0; j < k; j++)
    dflt[2 + j] = (cg_dim(x, 2 + j) - 1) * stride[j] + kernel[j] - pads[j] - pads[k + j];
  for (int j = 0; j < r; j++)
    total *= dflt[j];
  value_dims(y, yd);
  contiguous_strides(r, yd, ys);
  Buf *b = &cg->src;
  int64_t ny = cg_numel(y), nx = cg_numel(x);
  const char *name = cg_kernel_begin_part(cg, n, "zero", NULL);
  cg_loop_begin(cg, n, ny);
  buf_printf(b, "    out0[i] = %s{};\n", cg_ctype(y->type.dtype));
  cg_loop_end(cg, n, name, ny);
  name = cg_kernel_begin_part(cg, n, "scatter", "a thread per element of x; an index outside the default output is skipped");
  cg_loop_begin(cg, n, nx);
  buf_printf(b, "    const long long at = %s;\n", cg_load(cg, idx->type.dtype, DOM_I64, "in1[i]"));
  buf_printf(b, "    if (at < 0 || at >= %" PRId64 "LL) continue;\n", total);
  emit_coords(cg, r, dflt, "(idx_t)at", "c", -1, false);
  buf_printf(b, "    out0[%s] = in0[i];\n", dot(cg, r, "c", ys, dflt, -1));
  cg_loop_end(cg, n, name, nx);
  return 0;
}

int cg_index(Cg *cg, const Node *n) {
  switch (n->op) {
  case OP_TILE: return gen_tile(cg, n);
  case OP_TRILU: return gen_trilu(cg, n);
  case OP_GATHER_ELEMENTS: return gen_gather_elements(cg, n);
  case OP_GATHER_ND: return gen_gather_nd(cg, n);
  case OP_SCATTER_ELEMENTS: return gen_scatter_elements(cg, n);
  case OP_SCATTER_ND: return gen_scatter_nd(cg, n);
  case OP_RANGE: return gen_range(cg, n);
  case OP_ONE_HOT: return gen_one_hot(cg, n);
  case OP_DEPTH_TO_SPACE: case OP_SPACE_TO_DEPTH: return gen_space_depth(cg, n);
  case OP_REVERSE_SEQUENCE: return gen_reverse_sequence(cg, n);
  case OP_MAX_UNPOOL: return gen_max_unpool(cg, n);
  default: return cg_error(cg, n, "op %s (node %d) has no GPU kernel yet", op_info[n->op].name, n->id);
  }
}
