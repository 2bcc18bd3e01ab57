/* infer.c: shape and type inference. One rule per op category computes a node's output
 * types from its input types and attributes, and rejects everything the op cannot mean:
 * the executor, the passes and codegen rely on a node that infers being well formed.
 * There is no implicit type promotion anywhere: mixed dtypes are an error. Symbolic dims
 * in results reuse the input dims' pointers, which are interned per graph. */
#include "ir/ir.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { TSTR = 256 };

/* An error at the node, prefixed with the op's name so the user knows which rule spoke. */
static int fail(const Node *n, Diag *d, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(const Node *n, Diag *d, const char *fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return diag_error(d, n->loc, "%s: %s", op_info[n->op].name, buf);
}

static const char *ts(const Type *t, char *buf) { return type_str(t, buf, TSTR); }

static const Type *in_type(const Node *n, int i) {
  return i < n->nin && n->in[i] ? &n->in[i]->type : NULL;
}

/* Maps a possibly negative axis into [0, rank); false when out of range. */
static bool norm_axis(int64_t axis, int rank, int *out) {
  if (axis < -(int64_t)rank || axis >= rank)
    return false;
  *out = (int)(axis < 0 ? axis + rank : axis);
  return true;
}

static int bad_axis(const Node *n, Diag *d, int64_t axis, const Type *t) {
  char b[TSTR];
  return fail(n, d, "axis %" PRId64 " is out of range for %s", axis, ts(t, b));
}

/* numpy broadcasting of two shapes, aligned right. A symbol broadcasts with a static 1
 * or with the same symbol; anything else unequal is incompatible. */
static bool broadcast(const Shape *a, const Shape *b, Shape *out) {
  int r = a->rank > b->rank ? a->rank : b->rank;
  Shape s;
  s.rank = r;
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->rank), ib = i - (r - b->rank);
    Dim da = ia >= 0 ? a->dims[ia] : (Dim){1, NULL};
    Dim db = ib >= 0 ? b->dims[ib] : (Dim){1, NULL};
    if (dim_eq(da, db))
      s.dims[i] = da;
    else if (!da.sym && da.n == 1)
      s.dims[i] = db;
    else if (!db.sym && db.n == 1)
      s.dims[i] = da;
    else
      return false;
  }
  *out = s;
  return true;
}

static int need_float(const Node *n, Diag *d, const Type *t) {
  if (dtype_is_float(t->dtype))
    return 0;
  return fail(n, d, "needs a floating-point type, got %s", dtype_name(t->dtype));
}

static int same_dtype(const Node *n, Diag *d, const Type *a, const Type *b) {
  if (a->dtype == b->dtype)
    return 0;
  return fail(n, d, "operand types differ: %s and %s", dtype_name(a->dtype),
              dtype_name(b->dtype));
}

/* ---------------------------------------------------------------- pointwise */

static int infer_unary(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  *out = *x;
  if ((op_info[n->op].flags & OPF_FLOAT_ONLY) && need_float(n, d, x))
    return -1;
  if (op_info[n->op].flags & OPF_BOOL_OUT)
    out->dtype = DT_BOOL;
  switch (n->op) {
  case OP_NOT:
    if (x->dtype != DT_BOOL)
      return fail(n, d, "needs a bool input, got %s", dtype_name(x->dtype));
    break;
  case OP_CAST: {
    const char *to = attr_string(n, "to");
    DType dt;
    if (!to || dtype_from_name(to, &dt))
      return fail(n, d, "'to' must be an element type name (f32, i64, ...), got '%s'",
                  to ? to : "");
    out->dtype = dt;
    break;
  }
  case OP_GELU: {
    const char *a = attr_string(n, "approximate");
    if (!a || (strcmp(a, "none") && strcmp(a, "tanh")))
      return fail(n, d, "approximate must be 'none' or 'tanh', got '%s'", a ? a : "");
    break;
  }
  case OP_SHRINK:
    if (x->dtype == DT_BOOL)
      return fail(n, d, "bool inputs are not supported");
    break;
  case OP_BITWISE_NOT:
    if (!dtype_is_int(x->dtype))
      return fail(n, d, "needs an integer type, got %s", dtype_name(x->dtype));
    break;
  default: break;
  }
  return 0;
}

static int infer_binary(const Node *n, Type *out, Diag *d) {
  const Type *a = in_type(n, 0), *b = in_type(n, 1);
  char ba[TSTR], bb[TSTR];
  if (same_dtype(n, d, a, b))
    return -1;
  unsigned fl = op_info[n->op].flags;
  if ((fl & OPF_FLOAT_ONLY) && need_float(n, d, a))
    return -1;
  if ((n->op == OP_AND || n->op == OP_OR || n->op == OP_XOR) && a->dtype != DT_BOOL)
    return fail(n, d, "needs bool inputs, got %s", dtype_name(a->dtype));
  if (n->op == OP_MOD && a->dtype == DT_BOOL)
    return fail(n, d, "bool operands are not supported");
  if ((n->op == OP_BITWISE_AND || n->op == OP_BITWISE_OR || n->op == OP_BITWISE_XOR) &&
      !dtype_is_int(a->dtype))
    return fail(n, d, "needs integer inputs, got %s", dtype_name(a->dtype));
  if (n->op == OP_BIT_SHIFT) {
    const char *dir = attr_string(n, "direction");
    if (!dir || (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT")))
      return fail(n, d, "direction must be 'LEFT' or 'RIGHT', got '%s'", dir ? dir : "");
    /* ONNX defines BitShift on unsigned integers only */
    if (dtype_is_signed(a->dtype) || !dtype_is_int(a->dtype))
      return fail(n, d, "needs unsigned integer inputs, got %s", dtype_name(a->dtype));
  }
  out->dtype = fl & OPF_BOOL_OUT ? DT_BOOL : a->dtype;
  if (!broadcast(&a->shape, &b->shape, &out->shape))
    return fail(n, d, "cannot broadcast %s and %s", ts(a, ba), ts(b, bb));
  /* prelu's slope broadcasts to x, never the other way */
  if (n->op == OP_PRELU && !type_eq(out, a))
    return fail(n, d, "slope %s does not broadcast to x %s", ts(b, bb), ts(a, ba));
  return 0;
}

static int infer_where(const Node *n, Type *out, Diag *d) {
  const Type *c = in_type(n, 0), *x = in_type(n, 1), *y = in_type(n, 2);
  char bc[TSTR], bx[TSTR], by[TSTR];
  if (c->dtype != DT_BOOL)
    return fail(n, d, "condition must be bool, got %s", dtype_name(c->dtype));
  if (same_dtype(n, d, x, y))
    return -1;
  Shape s;
  if (!broadcast(&c->shape, &x->shape, &s) || !broadcast(&s, &y->shape, &out->shape))
    return fail(n, d, "cannot broadcast %s, %s and %s", ts(c, bc), ts(x, bx), ts(y, by));
  out->dtype = x->dtype;
  return 0;
}

/* ---------------------------------------------------------------- matmul */

/* numpy.matmul: a 1-D operand is promoted to a matrix (a row on the left, a column on the
 * right) and the added dim is dropped from the result; batch dims broadcast. */
static int infer_matmul(const Node *n, Type *out, Diag *d) {
  const Type *a = in_type(n, 0), *b = in_type(n, 1);
  char ba[TSTR], bb[TSTR];
  if (same_dtype(n, d, a, b))
    return -1;
  if (a->dtype == DT_BOOL)
    return fail(n, d, "bool operands are not supported");
  if (attr_int(n, "tf32") && a->dtype != DT_F32)
    return fail(n, d, "tf32 = 1 is for f32 operands, not %s", dtype_name(a->dtype));
  const char *to = attr_string(n, "to");
  bool wide = strcmp(to, "same") != 0, f8 = a->dtype == DT_F8E4M3 || a->dtype == DT_F8E5M2;
  DType out_dtype = a->dtype;
  if (f8 && (!wide || dtype_from_name(to, &out_dtype) ||
             (out_dtype != DT_F32 && out_dtype != DT_BF16 && out_dtype != DT_F16)))
    return fail(n, d, "%s operands need to = \"f32\", \"bf16\" or \"f16\", not \"%s\"",
                dtype_name(a->dtype), to);
  if (wide && !f8 && (strcmp(to, "f32") || (a->dtype != DT_F16 && a->dtype != DT_BF16)))
    return fail(n, d, "to = \"%s\" on %s operands: only f16 and bf16 operands take to = "
                "\"f32\" (an f32 output)", to, dtype_name(a->dtype));
  if (wide && !f8)
    out_dtype = DT_F32;
  if (a->shape.rank < 1 || b->shape.rank < 1)
    return fail(n, d, "operands must be at least 1-D: %s @ %s", ts(a, ba), ts(b, bb));
  if (attr_float(n, "scale") != 1 && !dtype_is_float(a->dtype))
    return fail(n, d, "scale is for float operands, not %s", dtype_name(a->dtype));
  if (attr_int(n, "transpose_b") && b->shape.rank < 2)
    return fail(n, d, "transpose_b = 1 needs a second operand of at least 2 dims, not %s",
                ts(b, bb));
  Shape sa = a->shape, sb = b->shape;
  if (attr_int(n, "transpose_b")) {
    Dim t = sb.dims[sb.rank - 1];
    sb.dims[sb.rank - 1] = sb.dims[sb.rank - 2];
    sb.dims[sb.rank - 2] = t;
  }
  if (sa.rank == 1) {
    sa.rank = 2;
    sa.dims[1] = sa.dims[0];
    sa.dims[0] = (Dim){1, NULL};
  }
  if (sb.rank == 1) {
    sb.rank = 2;
    sb.dims[1] = (Dim){1, NULL};
  }
  if (!dim_eq(sa.dims[sa.rank - 1], sb.dims[sb.rank - 2]))
    return fail(n, d, "inner dims differ: %s @ %s", ts(a, ba), ts(b, bb));
  Shape ba_s = sa, bb_s = sb, batch;
  ba_s.rank -= 2;
  bb_s.rank -= 2;
  if (!broadcast(&ba_s, &bb_s, &batch))
    return fail(n, d, "cannot broadcast batch dims: %s @ %s", ts(a, ba), ts(b, bb));
  out->dtype = out_dtype;
  out->shape = batch;
  if (a->shape.rank > 1)
    out->shape.dims[out->shape.rank++] = sa.dims[sa.rank - 2];
  if (b->shape.rank > 1)
    out->shape.dims[out->shape.rank++] = sb.dims[sb.rank - 1];
  return 0;
}

/* ---------------------------------------------------------------- reductions */

/* Marks the axes of list[] in red[]; empty means every axis. */
static int reduce_axes(const Node *n, Diag *d, const Type *x, const int64_t *list, int len,
                       bool *red) {
  int r = x->shape.rank;
  for (int i = 0; i < r; i++)
    red[i] = len == 0;
  for (int i = 0; i < len; i++) {
    int ax;
    if (!norm_axis(list[i], r, &ax))
      return bad_axis(n, d, list[i], x);
    if (red[ax])
      return fail(n, d, "axis %" PRId64 " appears twice in axes", list[i]);
    red[ax] = true;
  }
  return 0;
}

static void reduce_shape(const Type *x, const bool *red, bool keepdims, Type *out) {
  out->dtype = x->dtype;
  out->shape.rank = 0;
  for (int i = 0; i < x->shape.rank; i++) {
    if (!red[i])
      out->shape.dims[out->shape.rank++] = x->shape.dims[i];
    else if (keepdims)
      out->shape.dims[out->shape.rank++] = (Dim){1, NULL};
  }
}

static int infer_reduce(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  bool red[IR_MAX_RANK];
  if ((op_info[n->op].flags & OPF_FLOAT_ONLY) && need_float(n, d, x))
    return -1;
  if (n->op == OP_ARGMAX || n->op == OP_ARGMIN) {
    int ax;
    int64_t axis = attr_int(n, "axis");
    if (!norm_axis(axis, x->shape.rank, &ax))
      return bad_axis(n, d, axis, x);
    for (int i = 0; i < x->shape.rank; i++)
      red[i] = i == ax;
    reduce_shape(x, red, attr_int(n, "keepdims") != 0, out);
    out->dtype = DT_I64;
    return 0;
  }
  int len;
  const int64_t *axes = attr_ints(n, "axes", &len);
  if (reduce_axes(n, d, x, axes, len, red))
    return -1;
  reduce_shape(x, red, attr_int(n, "keepdims") != 0, out);
  return 0;
}

static int infer_softmax(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  int ax;
  if (need_float(n, d, x))
    return -1;
  int64_t axis = attr_int(n, "axis");
  if (!norm_axis(axis, x->shape.rank, &ax))
    return bad_axis(n, d, axis, x);
  *out = *x;
  return 0;
}

/* scale and bias apply to x.shape[axis:], broadcasting towards it but never widening it. */
static int infer_layer_norm(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  char bx[TSTR], bp[TSTR];
  int ax;
  if (need_float(n, d, x))
    return -1;
  int64_t axis = attr_int(n, "axis");
  if (!norm_axis(axis, x->shape.rank, &ax))
    return bad_axis(n, d, axis, x);
  int tail = x->shape.rank - ax;
  for (int k = 1; k < 3; k++) {
    const Type *p = in_type(n, k);
    const char *what = k == 1 ? "scale" : "bias";
    if (!p)
      continue;
    if (same_dtype(n, d, x, p))
      return -1;
    bool ok = p->shape.rank <= tail;
    for (int i = 0; ok && i < p->shape.rank; i++) {
      Dim pd = p->shape.dims[p->shape.rank - 1 - i];
      Dim xd = x->shape.dims[x->shape.rank - 1 - i];
      ok = dim_eq(pd, xd) || (!pd.sym && pd.n == 1);
    }
    if (!ok)
      return fail(n, d, "%s %s does not broadcast to the normalized dims of %s (axis %d)",
                  what, ts(p, bp), ts(x, bx), ax);
  }
  *out = *x;
  return 0;
}

/* ---------------------------------------------------------------- layout */

static void ints_str(const int64_t *v, int len, char *buf, size_t cap) {
  size_t at = 0;
  buf[0] = 0;
  at += (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < len && at < cap; i++)
    at += (size_t)snprintf(buf + at, cap - at, "%s%" PRId64, i ? ", " : "", v[i]);
  if (at < cap)
    snprintf(buf + at, cap - at, "]");
}

/* reshape: 0 copies the input dim at that index, -1 takes what is left. Symbolic dims
 * survive only when copied, or when the -1 stands for exactly one of them. */
static int infer_reshape(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  char bx[TSTR], bs[600];
  int len;
  const int64_t *shape = attr_ints(n, "shape", &len);
  ints_str(shape, len, bs, sizeof bs);
  if (len > IR_MAX_RANK)
    return fail(n, d, "shape %s has more than %d dims", bs, IR_MAX_RANK);
  bool copied[IR_MAX_RANK] = {false};
  int infer_at = -1;
  int64_t out_static = 1, in_static = 1;
  out->dtype = x->dtype;
  out->shape.rank = len;
  for (int i = 0; i < len; i++) {
    int64_t s = shape[i];
    if (s == -1) {
      if (infer_at >= 0)
        return fail(n, d, "shape %s has more than one -1", bs);
      infer_at = i;
      continue;
    }
    if (s < -1)
      return fail(n, d, "shape %s has a negative size %" PRId64, bs, s);
    Dim dm = {s, NULL};
    if (s == 0) {
      if (i >= x->shape.rank)
        return fail(n, d, "shape %s copies dim %d with 0, but the input %s has rank %d", bs,
                    i, ts(x, bx), x->shape.rank);
      dm = x->shape.dims[i];
      copied[i] = true;
    }
    out->shape.dims[i] = dm;
    if (!dm.sym && !size_mul(out_static, dm.n, &out_static))
      return fail(n, d, "shape %s has too many elements", bs);
  }
  int nsym = 0;
  Dim sym = {0, NULL};
  for (int i = 0; i < x->shape.rank; i++) {
    Dim dm = x->shape.dims[i];
    if (dm.sym) {
      if (!copied[i]) {
        nsym++;
        sym = dm;
      }
    } else if (!size_mul(in_static, dm.n, &in_static)) {
      return fail(n, d, "input %s has too many elements", ts(x, bx));
    }
  }
  if (nsym > 0) {
    if (infer_at >= 0 && nsym == 1 && in_static == out_static) {
      out->shape.dims[infer_at] = sym;
      return 0;
    }
    return fail(n, d, "cannot reshape %s to %s: use 0 to copy symbolic dims", ts(x, bx), bs);
  }
  if (infer_at >= 0) {
    if (out_static == 0 || in_static % out_static)
      return fail(n, d, "cannot reshape %s to %s: element counts do not divide", ts(x, bx),
                  bs);
    out->shape.dims[infer_at] = (Dim){in_static / out_static, NULL};
    return 0;
  }
  if (in_static != out_static)
    return fail(n, d, "element counts differ: %s has %" PRId64 ", shape %s has %" PRId64,
                ts(x, bx), in_static, bs, out_static);
  return 0;
}

static int infer_transpose(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  char bx[TSTR], bp[600];
  int r = x->shape.rank;
  int64_t perm[IR_MAX_RANK];
  const Attr *a = attr_find(n, "perm");
  if (!a) {
    for (int i = 0; i < r; i++)
      perm[i] = r - 1 - i;
  } else {
    ints_str(a->ints, a->n, bp, sizeof bp);
    if (a->n != r)
      return fail(n, d, "perm %s has %d entries, but the input %s has rank %d", bp, a->n,
                  ts(x, bx), r);
    bool seen[IR_MAX_RANK] = {false};
    for (int i = 0; i < r; i++) {
      int64_t p = a->ints[i];
      if (p < 0 || p >= r || seen[p])
        return fail(n, d, "perm %s is not a permutation of 0..%d", bp, r - 1);
      seen[p] = true;
      perm[i] = p;
    }
  }
  out->dtype = x->dtype;
  out->shape.rank = r;
  for (int i = 0; i < r; i++)
    out->shape.dims[i] = x->shape.dims[perm[i]];
  return 0;
}

/* squeeze removes exactly the listed axes (an empty list removes nothing). */
static int infer_squeeze(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  char bx[TSTR];
  int len;
  const int64_t *axes = attr_ints(n, "axes", &len);
  bool drop[IR_MAX_RANK] = {false};
  for (int i = 0; i < len; i++) {
    int ax;
    if (!norm_axis(axes[i], x->shape.rank, &ax))
      return bad_axis(n, d, axes[i], x);
    if (drop[ax])
      return fail(n, d, "axis %" PRId64 " appears twice in axes", axes[i]);
    Dim dm = x->shape.dims[ax];
    if (dm.sym || dm.n != 1) {
      char bd[64];
      if (dm.sym)
        snprintf(bd, sizeof bd, "%s", dm.sym);
      else
        snprintf(bd, sizeof bd, "%" PRId64, dm.n);
      return fail(n, d, "dim %d of %s is %s, not 1", ax, ts(x, bx), bd);
    }
    drop[ax] = true;
  }
  out->dtype = x->dtype;
  out->shape.rank = 0;
  for (int i = 0; i < x->shape.rank; i++)
    if (!drop[i])
      out->shape.dims[out->shape.rank++] = x->shape.dims[i];
  return 0;
}

/* unsqueeze: the axes index the output (ONNX), so [0, 2] on [A, B] gives [1, A, 1, B]. */
static int infer_unsqueeze(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  char bx[TSTR];
  int len;
  const int64_t *axes = attr_ints(n, "axes", &len);
  int r = x->shape.rank + len;
  if (r > IR_MAX_RANK)
    return fail(n, d, "result rank %d of unsqueezing %s exceeds %d", r, ts(x, bx), IR_MAX_RANK);
  bool ins[IR_MAX_RANK] = {false};
  for (int i = 0; i < len; i++) {
    int ax;
    if (!norm_axis(axes[i], r, &ax))
      return fail(n, d, "axis %" PRId64 " is out of range for the result rank %d", axes[i], r);
    if (ins[ax])
      return fail(n, d, "axis %" PRId64 " appears twice in axes", axes[i]);
    ins[ax] = true;
  }
  out->dtype = x->dtype;
  out->shape.rank = r;
  for (int i = 0, k = 0; i < r; i++)
    out->shape.dims[i] = ins[i] ? (Dim){1, NULL} : x->shape.dims[k++];
  return 0;
}

/* The product of dims[from:to] as one dim: static, or the one symbol among static 1s. */
static bool fold_dims(const Shape *s, int from, int to, Dim *out) {
  Dim r = {1, NULL};
  for (int i = from; i < to; i++) {
    Dim dm = s->dims[i];
    if (dm.sym) {
      if (r.sym)
        return false;
      r.sym = dm.sym;
    } else if (!size_mul(r.n, dm.n, &r.n)) {
      return false;
    }
  }
  if (r.sym) {
    if (r.n != 1)
      return false;
    r.n = -1;
  }
  *out = r;
  return true;
}

static int infer_flatten(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  char bx[TSTR];
  int r = x->shape.rank;
  int64_t axis = attr_int(n, "axis");
  if (axis < -(int64_t)r || axis > r)
    return bad_axis(n, d, axis, x);
  int ax = (int)(axis < 0 ? axis + r : axis);
  out->dtype = x->dtype;
  out->shape.rank = 2;
  if (!fold_dims(&x->shape, 0, ax, &out->shape.dims[0]) ||
      !fold_dims(&x->shape, ax, r, &out->shape.dims[1]))
    return fail(n, d, "cannot flatten %s at axis %d: a symbolic dim must be the only "
                "factor of its side", ts(x, bx), ax);
  return 0;
}

static int infer_expand(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  char bx[TSTR], bs[600];
  int len;
  const int64_t *shape = attr_ints(n, "shape", &len);
  ints_str(shape, len, bs, sizeof bs);
  if (len > IR_MAX_RANK)
    return fail(n, d, "shape %s has more than %d dims", bs, IR_MAX_RANK);
  Shape s;
  s.rank = len;
  for (int i = 0; i < len; i++) {
    if (shape[i] < 0)
      return fail(n, d, "shape %s has a negative size", bs);
    s.dims[i] = (Dim){shape[i], NULL};
  }
  out->dtype = x->dtype;
  if (!broadcast(&x->shape, &s, &out->shape))
    return fail(n, d, "cannot broadcast %s to shape %s", ts(x, bx), bs);
  return 0;
}

static int infer_concat(const Node *n, Type *out, Diag *d) {
  const Type *a = in_type(n, 0);
  char ba[TSTR], bb[TSTR];
  int ax;
  int64_t axis = attr_int(n, "axis");
  if (!norm_axis(axis, a->shape.rank, &ax))
    return bad_axis(n, d, axis, a);
  *out = *a;
  for (int k = 1; k < n->nin; k++) {
    const Type *b = in_type(n, k);
    if (same_dtype(n, d, a, b))
      return -1;
    bool ok = b->shape.rank == a->shape.rank;
    for (int i = 0; ok && i < a->shape.rank; i++)
      ok = i == ax || dim_eq(a->shape.dims[i], b->shape.dims[i]);
    if (!ok)
      return fail(n, d, "inputs %s and %s differ outside axis %d", ts(a, ba), ts(b, bb), ax);
  }
  if (n->nin == 1)
    return 0;
  int64_t sum = 0;
  for (int k = 0; k < n->nin; k++) {
    const Type *b = in_type(n, k);
    Dim dm = b->shape.dims[ax];
    if (dm.sym)
      return fail(n, d, "dim %d of input %%%s (%s) is symbolic; concat needs static sizes "
                  "on its axis", ax, n->in[k]->name, ts(b, bb));
    if (!size_add(sum, dm.n, &sum))
      return fail(n, d, "the sizes on axis %d overflow", ax);
  }
  out->shape.dims[ax] = (Dim){sum, NULL};
  return 0;
}

/* The length of x[start:end:step] on a dim of size dim, with ONNX Slice's clamping. */
static int64_t slice_len(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (dim == 0)
    return 0;
  if (start < 0)
    start += dim;
  if (end < 0)
    end += dim;
  if (step > 0) {
    start = start < 0 ? 0 : start > dim ? dim : start;
    end = end < 0 ? 0 : end > dim ? dim : end;
    return end > start ? (end - start - 1) / step + 1 : 0;
  }
  start = start < 0 ? 0 : start > dim - 1 ? dim - 1 : start;
  end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
  /* -INT64_MIN overflows; any step that large takes one element anyway. */
  return start > end ? (start - end - 1) / (step == INT64_MIN ? INT64_MAX : -step) + 1 : 0;
}

static int infer_slice(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  char bx[TSTR];
  int r = x->shape.rank, ns, ne;
  const int64_t *starts = attr_ints(n, "starts", &ns);
  const int64_t *ends = attr_ints(n, "ends", &ne);
  const Attr *axes = attr_find(n, "axes"), *steps = attr_find(n, "steps");
  if (ns != ne)
    return fail(n, d, "starts has %d entries but ends has %d", ns, ne);
  if (axes && axes->n != ns)
    return fail(n, d, "axes has %d entries but starts has %d", axes->n, ns);
  if (steps && steps->n != ns)
    return fail(n, d, "steps has %d entries but starts has %d", steps->n, ns);
  if (!axes && ns > r)
    return fail(n, d, "starts has %d entries, more than the rank of %s", ns, ts(x, bx));
  *out = *x;
  bool seen[IR_MAX_RANK] = {false};
  for (int i = 0; i < ns; i++) {
    int ax = i;
    if (axes && !norm_axis(axes->ints[i], r, &ax))
      return bad_axis(n, d, axes->ints[i], x);
    if (seen[ax])
      return fail(n, d, "axis %d is sliced twice", ax);
    seen[ax] = true;
    int64_t step = steps ? steps->ints[i] : 1;
    if (step == 0)
      return fail(n, d, "step on axis %d is 0", ax);
    Dim dm = x->shape.dims[ax];
    if (dm.sym) {
      if (starts[i] == 0 && ends[i] >= INT64_MAX / 2 && step == 1)
        continue;
      return fail(n, d, "cannot slice symbolic dim %s of %s on axis %d (only the whole dim, "
                  "start 0 to the end with step 1)", dm.sym, ts(x, bx), ax);
    }
    out->shape.dims[ax] = (Dim){slice_len(dm.n, starts[i], ends[i], step), NULL};
  }
  return 0;
}

static int infer_split(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  char bx[TSTR];
  int ax, len;
  int64_t axis = attr_int(n, "axis");
  if (!norm_axis(axis, x->shape.rank, &ax))
    return bad_axis(n, d, axis, x);
  const int64_t *sizes = attr_ints(n, "split", &len);
  Dim dm = x->shape.dims[ax];
  if (dm.sym)
    return fail(n, d, "dim %d of %s is symbolic; split needs a static dim", ax, ts(x, bx));
  int64_t sum = 0;
  for (int i = 0; i < len; i++) {
    if (sizes[i] <= 0)
      return fail(n, d, "split sizes must be positive, got %" PRId64, sizes[i]);
    if (!size_add(sum, sizes[i], &sum))
      return fail(n, d, "split sizes overflow");
  }
  if (sum != dm.n)
    return fail(n, d, "split sizes add up to %" PRId64 ", but dim %d of %s is %" PRId64, sum,
                ax, ts(x, bx), dm.n);
  for (int i = 0; i < len; i++) {
    out[i] = *x;
    out[i].shape.dims[ax] = (Dim){sizes[i], NULL};
  }
  return 0;
}

/* The indices of gather-like ops are i32 or i64, and their `axis` is one of x's. */
static int index_operand(const Node *n, Diag *d, const Type *x, const Type *idx, int *ax) {
  *ax = 0;
  if (idx->dtype != DT_I32 && idx->dtype != DT_I64)
    return fail(n, d, "indices must be i32 or i64, got %s", dtype_name(idx->dtype));
  int64_t axis = attr_int(n, "axis");
  if (!norm_axis(axis, x->shape.rank, ax))
    return bad_axis(n, d, axis, x);
  return 0;
}

static int infer_gather(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0), *idx = in_type(n, 1);
  char bx[TSTR], bi[TSTR];
  int ax;
  if (index_operand(n, d, x, idx, &ax))
    return -1;
  int r = x->shape.rank - 1 + idx->shape.rank;
  if (r > IR_MAX_RANK)
    return fail(n, d, "result rank %d of gathering %s with %s exceeds %d", r, ts(x, bx),
                ts(idx, bi), IR_MAX_RANK);
  out->dtype = x->dtype;
  out->shape.rank = 0;
  for (int i = 0; i < ax; i++)
    out->shape.dims[out->shape.rank++] = x->shape.dims[i];
  for (int i = 0; i < idx->shape.rank; i++)
    out->shape.dims[out->shape.rank++] = idx->shape.dims[i];
  for (int i = ax + 1; i < x->shape.rank; i++)
    out->shape.dims[out->shape.rank++] = x->shape.dims[i];
  return 0;
}

/* ---------------------------------------------------------------- neural-network ops */

/* The sliding-window parameters of conv, conv_transpose and the pools over k spatial
 * dims, with the defaults of empty lists applied. */
typedef struct Window {
  int k;
  int64_t kernel[IR_MAX_RANK], stride[IR_MAX_RANK], dil[IR_MAX_RANK];
  int64_t pad_begin[IR_MAX_RANK], pad_end[IR_MAX_RANK], out_pad[IR_MAX_RANK];
} Window;

/* Window sizes past this are nonsense; the bound keeps the arithmetic below in int64. */
#define WINDOW_MAX INT32_MAX

/* Reads list attribute `name` of `want` entries into dst, dflt for every entry when the
 * list is empty (or absent); entries must lie in [lo, WINDOW_MAX]. */
static int window_list(const Node *n, Diag *d, const char *name, int want, int64_t dflt,
                       int64_t lo, int64_t *dst) {
  int len;
  const int64_t *v = attr_ints(n, name, &len);
  char bv[600];
  for (int i = 0; i < want; i++)
    dst[i] = dflt;
  if (len == 0)
    return 0;
  ints_str(v, len, bv, sizeof bv);
  if (len != want)
    return fail(n, d, "%s %s has %d entries, expected %d", name, bv, len, want);
  for (int i = 0; i < len; i++) {
    if (v[i] < lo || v[i] > WINDOW_MAX)
      return fail(n, d, "%s %s: entry %" PRId64 " is out of range (%" PRId64 " to %d)", name,
                  bv, v[i], lo, WINDOW_MAX);
    dst[i] = v[i];
  }
  return 0;
}

static int window_params(const Node *n, Diag *d, int k, Window *w) {
  w->k = k;
  if (window_list(n, d, "strides", k, 1, 1, w->stride) ||
      window_list(n, d, "dilations", k, 1, 1, w->dil))
    return -1;
  int64_t pads[2 * IR_MAX_RANK];
  if (window_list(n, d, "pads", 2 * k, 0, 0, pads))
    return -1;
  for (int i = 0; i < k; i++) {
    w->pad_begin[i] = pads[i];
    w->pad_end[i] = pads[k + i];
    w->out_pad[i] = 0;
  }
  if (n->op == OP_CONV_TRANSPOSE)
    return window_list(n, d, "output_padding", k, 0, 0, w->out_pad);
  return 0;
}

/* The number of window positions over a padded dim; false when the window does not fit
 * (a window longer than the padded input has no position at all). */
static bool window_out(const Window *w, int i, int64_t in, bool ceil_mode, int64_t *out) {
  return window_len(in, w->kernel[i], w->stride[i], w->dil[i], w->pad_begin[i],
                    w->pad_end[i], ceil_mode, out) && *out > 0;
}

/* x must be [N, C, spatial...] with at least one spatial dim. */
static int need_nchw(const Node *n, Diag *d, const Type *x) {
  char bx[TSTR];
  if (x->shape.rank >= 3)
    return 0;
  return fail(n, d, "x must be [N, C, spatial...] with at least one spatial dim, got %s",
              ts(x, bx));
}

static int static_spatial(const Node *n, Diag *d, const Type *x, int i) {
  char bx[TSTR];
  if (!x->shape.dims[2 + i].sym)
    return 0;
  return fail(n, d, "spatial dim %d of %s is symbolic; %s needs static spatial dims", i,
              ts(x, bx), op_info[n->op].name);
}

static int infer_conv(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0), *w = in_type(n, 1), *b = in_type(n, 2);
  char bx[TSTR], bw[TSTR];
  bool tr = n->op == OP_CONV_TRANSPOSE;
  if (need_float(n, d, x) || same_dtype(n, d, x, w) || (b && same_dtype(n, d, x, b)) ||
      need_nchw(n, d, x))
    return -1;
  if (attr_int(n, "tf32") && x->dtype != DT_F32)
    return fail(n, d, "tf32 = 1 is for f32 operands, not %s", dtype_name(x->dtype));
  int r = x->shape.rank, k = r - 2;
  if (w->shape.rank != r)
    return fail(n, d, "w %s must have the rank of x %s", ts(w, bw), ts(x, bx));
  if (!shape_is_static(&w->shape))
    return fail(n, d, "w %s must have static dims", ts(w, bw));
  int64_t group = attr_int(n, "group");
  if (group < 1 || group > WINDOW_MAX)
    return fail(n, d, "group must be positive, got %" PRId64, group);
  Dim c = x->shape.dims[1];
  if (c.sym)
    return fail(n, d, "the channel dim of %s is symbolic; %s needs it static", ts(x, bx),
                op_info[n->op].name);
  /* conv: w is [M, C/group, k...]; conv_transpose: w is [C, M/group, k...] */
  int64_t want_c, m;
  if (tr) {
    want_c = w->shape.dims[0].n;
    if (!size_mul(w->shape.dims[1].n, group, &m))
      return fail(n, d, "w %s with group %" PRId64 " has too many channels", ts(w, bw), group);
  } else {
    m = w->shape.dims[0].n;
    if (!size_mul(w->shape.dims[1].n, group, &want_c))
      return fail(n, d, "w %s with group %" PRId64 " has too many channels", ts(w, bw), group);
  }
  if (c.n != want_c)
    return fail(n, d, "x %s has %" PRId64 " channels, but w %s with group %" PRId64
                " expects %" PRId64, ts(x, bx), c.n, ts(w, bw), group, want_c);
  if ((tr ? c.n : m) % group)
    return fail(n, d, "%s channels %" PRId64 " are not divisible by group %" PRId64,
                tr ? "input" : "output", tr ? c.n : m, group);
  if (b && (b->shape.rank != 1 || !dim_eq(b->shape.dims[0], (Dim){m, NULL})))
    return fail(n, d, "bias %s must be [%" PRId64 "]", ts(b, bw), m);
  Window win;
  if (window_params(n, d, k, &win))
    return -1;
  out->dtype = x->dtype;
  out->shape.rank = r;
  out->shape.dims[0] = x->shape.dims[0];
  out->shape.dims[1] = (Dim){m, NULL};
  for (int i = 0; i < k; i++) {
    if (static_spatial(n, d, x, i))
      return -1;
    int64_t in = x->shape.dims[2 + i].n, o;
    win.kernel[i] = w->shape.dims[2 + i].n;
    if (win.kernel[i] < 1 || win.kernel[i] > WINDOW_MAX)
      return fail(n, d, "kernel dim %d of w %s is out of range", i, ts(w, bw));
    if (tr) {
      /* stride (in - 1) + output_padding + dil (kernel - 1) + 1, less the pads; the pads
       * are at most WINDOW_MAX each, so their sum does not overflow */
      int64_t span, pads = win.pad_begin[i] + win.pad_end[i];
      if (in < 1 || !size_mul(win.stride[i], in - 1, &o) ||
          !size_mul(win.dil[i], win.kernel[i] - 1, &span) || !size_add(o, span, &o) ||
          !size_add(o, win.out_pad[i] + 1, &o))
        return fail(n, d, "spatial dim %d of %s is out of range", i, ts(x, bx));
      if (o < pads)
        return fail(n, d, "pads remove more than the whole output on spatial dim %d", i);
      o -= pads;
    } else if (!window_out(&win, i, in, false, &o)) {
      return fail(n, d, "the kernel (%" PRId64 " with dilation %" PRId64 ") is bigger than "
                  "the padded input (%" PRId64 ") on spatial dim %d", win.kernel[i],
                  win.dil[i], in + win.pad_begin[i] + win.pad_end[i], i);
    }
    out->shape.dims[2 + i] = (Dim){o, NULL};
  }
  return 0;
}

static int infer_pool(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  bool avg = n->op == OP_AVERAGE_POOL || n->op == OP_GLOBAL_AVERAGE_POOL;
  if (x->dtype == DT_BOOL)
    return fail(n, d, "bool inputs are not supported");
  if ((avg && need_float(n, d, x)) || need_nchw(n, d, x))
    return -1;
  int k = x->shape.rank - 2;
  *out = *x;
  if (n->op == OP_GLOBAL_AVERAGE_POOL || n->op == OP_GLOBAL_MAX_POOL) {
    for (int i = 0; i < k; i++)
      out->shape.dims[2 + i] = (Dim){1, NULL};
    return 0;
  }
  Window win;
  if (window_list(n, d, "kernel_shape", k, 1, 1, win.kernel) || window_params(n, d, k, &win))
    return -1;
  int len;
  attr_ints(n, "kernel_shape", &len);
  if (len != k)
    return fail(n, d, "kernel_shape has %d entries, expected %d", len, k);
  bool ceil_mode = attr_int(n, "ceil_mode") != 0;
  for (int i = 0; i < k; i++) {
    if (static_spatial(n, d, x, i))
      return -1;
    int64_t in = x->shape.dims[2 + i].n, o;
    if (!window_out(&win, i, in, ceil_mode, &o))
      return fail(n, d, "the kernel (%" PRId64 " with dilation %" PRId64 ") is bigger than "
                  "the padded input (%" PRId64 ") on spatial dim %d", win.kernel[i],
                  win.dil[i], in + win.pad_begin[i] + win.pad_end[i], i);
    for (int s = 0; s < 2; s++) {
      int64_t p = s ? win.pad_end[i] : win.pad_begin[i];
      if (p >= win.dil[i] * (win.kernel[i] - 1) + 1)
        return fail(n, d, "pad %" PRId64 " on spatial dim %d is not smaller than the "
                    "window, so a window could hold only padding", p, i);
    }
    out->shape.dims[2 + i] = (Dim){o, NULL};
  }
  return 0;
}

/* A channels-last conv or pool (x [N, spatial..., C], conv's w [M, k..., C/group]) is
 * inferred as its channels-first twin, over the same values with their dims moved. */
static int infer_window_op(const Node *n, Type *out, Diag *d) {
  bool conv = n->op == OP_CONV || n->op == OP_CONV_TRANSPOSE;
  if (!attr_int(n, "channels_last"))
    return conv ? infer_conv(n, out, d) : infer_pool(n, out, d);
  Value v[2];
  Value *in[3] = {n->in[0], n->nin > 1 ? n->in[1] : NULL, n->nin > 2 ? n->in[2] : NULL};
  for (int i = 0; i < (conv ? 2 : 1); i++) {
    v[i] = *n->in[i];
    int r = v[i].type.shape.rank;
    if (r < 3)
      return fail(n, d, "%s with channels_last needs [N, spatial..., C] operands of rank 3 "
                  "or more", op_info[n->op].name);
    int64_t first[IR_MAX_RANK], last[IR_MAX_RANK];
    channels_last_perms(r, first, last);
    for (int j = 0; j < r; j++)
      v[i].type.shape.dims[j] = n->in[i]->type.shape.dims[first[j]];
    in[i] = &v[i];
  }
  Node t = *n;
  t.in = in;
  int rc = conv ? infer_conv(&t, out, d) : infer_pool(&t, out, d);
  if (rc)
    return rc;
  Shape cf = out->shape;
  int64_t first[IR_MAX_RANK], last[IR_MAX_RANK];
  channels_last_perms(cf.rank, first, last);
  for (int j = 0; j < cf.rank; j++)
    out->shape.dims[j] = cf.dims[last[j]];
  return 0;
}

/* Per-channel parameters of the norms: rank 1, the channel dim of x. */
static int channel_params(const Node *n, Diag *d, const Type *x, int from) {
  char bx[TSTR], bp[TSTR];
  static const char *const names[] = {"x", "scale", "bias", "mean", "var"};
  for (int k = from; k < n->nin; k++) {
    const Type *p = in_type(n, k);
    if (same_dtype(n, d, x, p))
      return -1;
    if (p->shape.rank != 1 || !dim_eq(p->shape.dims[0], x->shape.dims[1]))
      return fail(n, d, "%s %s must be [C] for x %s", names[k], ts(p, bp), ts(x, bx));
  }
  return 0;
}

static int infer_norm(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  char bx[TSTR];
  if (need_float(n, d, x))
    return -1;
  /* batch_norm also takes [N, C]; the others need spatial dims */
  if (n->op == OP_BATCH_NORM && x->shape.rank < 2)
    return fail(n, d, "x must be [N, C, ...], got %s", ts(x, bx));
  if (n->op != OP_BATCH_NORM && need_nchw(n, d, x))
    return -1;
  if (n->op == OP_LRN) {
    int64_t size = attr_int(n, "size");
    if (size < 1)
      return fail(n, d, "size must be positive, got %" PRId64, size);
  } else if (channel_params(n, d, x, 1)) {
    return -1;
  }
  *out = *x;
  return 0;
}

static int infer_pad(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  char bx[TSTR], bp[600];
  int r = x->shape.rank, len;
  const int64_t *pads = attr_ints(n, "pads", &len);
  ints_str(pads, len, bp, sizeof bp);
  if (len != 2 * r)
    return fail(n, d, "pads %s has %d entries, but %s needs %d (begin of each dim, then end)",
                bp, len, ts(x, bx), 2 * r);
  const char *mode = attr_string(n, "mode");
  bool reflect = !strcmp(mode, "reflect"), edge = !strcmp(mode, "edge");
  if (!reflect && !edge && strcmp(mode, "constant"))
    return fail(n, d, "mode must be 'constant', 'reflect' or 'edge', got '%s'", mode);
  *out = *x;
  for (int i = 0; i < r; i++) {
    int64_t pb = pads[i], pe = pads[r + i];
    Dim dm = x->shape.dims[i];
    if (pb == 0 && pe == 0)
      continue;
    if (dm.sym)
      return fail(n, d, "dim %d of %s is symbolic; pad needs it static to pad it", i,
                  ts(x, bx));
    if (pb < -WINDOW_MAX || pb > WINDOW_MAX || pe < -WINDOW_MAX || pe > WINDOW_MAX ||
        dm.n > INT64_MAX / 2)
      return fail(n, d, "pads %s are out of range", bp);
    int64_t o = dm.n + pb + pe;
    if (o < 0)
      return fail(n, d, "pads %s crop more than dim %d of %s", bp, i, ts(x, bx));
    /* the source positions must exist: within the kept part of the input */
    int64_t lo = pb < 0 ? -pb : 0, hi = pe < 0 ? dm.n + pe : dm.n;
    if ((reflect || edge) && (pb > 0 || pe > 0) && hi - lo < 1)
      return fail(n, d, "%s padding needs a non-empty dim %d in %s", mode, i, ts(x, bx));
    if (reflect && (pb > dm.n - 1 || pe > dm.n - 1))
      return fail(n, d, "reflect pads %s are larger than dim %d of %s minus 1", bp, i,
                  ts(x, bx));
    out->shape.dims[i] = (Dim){o, NULL};
  }
  return 0;
}

static bool str_in(const char *s, const char *const *list) {
  for (; *list; list++)
    if (!strcmp(s, *list))
      return true;
  return false;
}

static int infer_resize(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  char bx[TSTR], bs[600];
  int r = x->shape.rank, len;
  static const char *const modes[] = {"nearest", "linear", "cubic", NULL};
  static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "asymmetric",
                                       "align_corners", "half_pixel_symmetric", NULL};
  static const char *const nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                        "ceil", NULL};
  const char *mode = attr_string(n, "mode");
  const char *coord = attr_string(n, "coordinate_transformation_mode");
  const char *nm = attr_string(n, "nearest_mode");
  if (!str_in(mode, modes))
    return fail(n, d, "mode must be 'nearest', 'linear' or 'cubic', got '%s'", mode);
  if (!str_in(coord, coords))
    return fail(n, d, "coordinate_transformation_mode '%s' is not supported", coord);
  if (!str_in(nm, nearest))
    return fail(n, d, "nearest_mode '%s' is not supported", nm);
  if (x->dtype == DT_BOOL)
    return fail(n, d, "bool inputs are not supported");
  if (strcmp(mode, "nearest") && need_float(n, d, x))
    return -1;
  const int64_t *sizes = attr_ints(n, "sizes", &len);
  ints_str(sizes, len, bs, sizeof bs);
  if (r < 1 || len != r)
    return fail(n, d, "sizes %s must have one entry per dim of %s", bs, ts(x, bx));
  const Attr *sc = attr_find(n, "scales");
  if (sc && sc->n != r)
    return fail(n, d, "scales has %d entries, but %s has rank %d", sc->n, ts(x, bx), r);
  *out = *x;
  for (int i = 0; i < r; i++) {
    Dim dm = x->shape.dims[i];
    /* the executor and the kernels divide coordinates by the scale */
    if (sc && !(sc->floats[i] > 0 && sc->floats[i] < INFINITY))
      return fail(n, d, "scales must be positive and finite, got %g on dim %d", sc->floats[i],
                  i);
    if (sizes[i] == -1) {
      if (sc && sc->floats[i] != 1)
        return fail(n, d, "sizes keeps dim %d (-1), but its scale is %g, not 1", i,
                    sc->floats[i]);
      continue;
    }
    if (sizes[i] < 0)
      return fail(n, d, "sizes %s has a negative size", bs);
    if (dm.sym)
      return fail(n, d, "dim %d of %s is symbolic: write -1 in sizes to keep it", i,
                  ts(x, bx));
    if (dm.n == 0 && sizes[i] > 0)
      return fail(n, d, "cannot resize the empty dim %d of %s", i, ts(x, bx));
    out->shape.dims[i] = (Dim){sizes[i], NULL};
  }
  return 0;
}

static int infer_topk(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  char bx[TSTR];
  int ax;
  if (x->dtype == DT_BOOL)
    return fail(n, d, "bool inputs are not supported");
  int64_t axis = attr_int(n, "axis"), k = attr_int(n, "k");
  if (!norm_axis(axis, x->shape.rank, &ax))
    return bad_axis(n, d, axis, x);
  Dim dm = x->shape.dims[ax];
  if (dm.sym)
    return fail(n, d, "dim %d of %s is symbolic; topk needs its axis static", ax, ts(x, bx));
  if (k < 0 || k > dm.n)
    return fail(n, d, "k %" PRId64 " is out of range for dim %d of %s", k, ax, ts(x, bx));
  out[0] = *x;
  out[0].shape.dims[ax] = (Dim){k, NULL};
  out[1] = out[0];
  out[1].dtype = DT_I64;
  return 0;
}

static int infer_cumsum_trilu(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  char bx[TSTR];
  int ax;
  if (x->dtype == DT_BOOL && n->op == OP_CUMSUM)
    return fail(n, d, "bool inputs are not supported");
  if (n->op == OP_CUMSUM) {
    int64_t axis = attr_int(n, "axis");
    if (!norm_axis(axis, x->shape.rank, &ax))
      return bad_axis(n, d, axis, x);
  } else if (x->shape.rank < 2) {
    return fail(n, d, "needs at least 2 dims, got %s", ts(x, bx));
  }
  *out = *x;
  return 0;
}

static int infer_tile(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  char bx[TSTR], br[600];
  int len;
  const int64_t *rep = attr_ints(n, "repeats", &len);
  ints_str(rep, len, br, sizeof br);
  if (len != x->shape.rank)
    return fail(n, d, "repeats %s has %d entries, but %s has rank %d", br, len, ts(x, bx),
                x->shape.rank);
  *out = *x;
  for (int i = 0; i < len; i++) {
    Dim dm = x->shape.dims[i];
    if (rep[i] < 0)
      return fail(n, d, "repeats %s has a negative entry", br);
    if (rep[i] == 1)
      continue;
    if (dm.sym)
      return fail(n, d, "dim %d of %s is symbolic; tile can only repeat it once", i,
                  ts(x, bx));
    if (!size_mul(dm.n, rep[i], &out->shape.dims[i].n))
      return fail(n, d, "repeats %s overflow dim %d of %s", br, i, ts(x, bx));
  }
  return 0;
}

static int infer_gather_elements(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0), *idx = in_type(n, 1);
  char bx[TSTR], bi[TSTR];
  int ax;
  if (index_operand(n, d, x, idx, &ax))
    return -1;
  if (idx->shape.rank != x->shape.rank)
    return fail(n, d, "indices %s must have the rank of data %s", ts(idx, bi), ts(x, bx));
  for (int i = 0; i < x->shape.rank; i++) {
    Dim a = x->shape.dims[i], b = idx->shape.dims[i];
    if (i == ax || dim_eq(a, b) || (!a.sym && !b.sym && b.n <= a.n))
      continue;
    return fail(n, d, "dim %d of indices %s exceeds that of data %s", i, ts(idx, bi),
                ts(x, bx));
  }
  out->dtype = x->dtype;
  out->shape = idx->shape;
  return 0;
}

static int infer_scatter_elements(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0), *idx = in_type(n, 1), *u = in_type(n, 2);
  char bi[TSTR], bu[TSTR];
  static const char *const reductions[] = {"none", "add", "mul", "max", "min", NULL};
  const char *red = attr_string(n, "reduction");
  if (!str_in(red, reductions))
    return fail(n, d, "reduction must be 'none', 'add', 'mul', 'max' or 'min', got '%s'", red);
  if (same_dtype(n, d, x, u))
    return -1;
  if (x->dtype == DT_BOOL && strcmp(red, "none"))
    return fail(n, d, "bool data takes no reduction");
  /* the indices are checked like gather_elements' */
  if (infer_gather_elements(n, out, d))
    return -1;
  if (!type_eq(&(Type){idx->dtype, u->shape}, idx))
    return fail(n, d, "updates %s must have the shape of indices %s", ts(u, bu), ts(idx, bi));
  *out = *x;
  return 0;
}

static int infer_range(const Node *n, Type *out, Diag *d) {
  const Type *s = in_type(n, 0);
  char bt[TSTR];
  double v[3];
  int64_t iv[3];
  for (int k = 0; k < 3; k++) {
    const Type *t = in_type(n, k);
    if (same_dtype(n, d, s, t))
      return -1;
    if (shape_numel(&t->shape) != 1 || t->shape.rank > 1)
      return fail(n, d, "inputs must be scalars, got %s", ts(t, bt));
  }
  if (s->dtype == DT_BOOL)
    return fail(n, d, "bool inputs are not supported");
  for (int k = 0; k < 3; k++) {
    const Value *c = n->in[k];
    if (c->kind != VK_CONST || !c->data)
      return fail(n, d, "range needs constant inputs (%%%s is not)", c->name);
    v[k] = dtype_load_f64(c->data->dtype, c->data->data);
    iv[k] = dtype_load_i64(c->data->dtype, c->data->data);
  }
  int64_t count;
  if (dtype_is_float(s->dtype)) {
    if (v[2] == 0)
      return fail(n, d, "delta is 0");
    double c = ceil((v[1] - v[0]) / v[2]);
    if (c != c || c > 1e15)
      return fail(n, d, "the range from %g to %g by %g is too long", v[0], v[1], v[2]);
    count = c > 0 ? (int64_t)c : 0;
  } else {
    if (iv[2] == 0)
      return fail(n, d, "delta is 0");
    bool up = iv[2] > 0;
    if (up ? iv[1] <= iv[0] : iv[1] >= iv[0]) {
      count = 0;
    } else {
      /* in uint64: the distance of two int64s always fits there */
      uint64_t dist = up ? (uint64_t)iv[1] - (uint64_t)iv[0] : (uint64_t)iv[0] - (uint64_t)iv[1];
      uint64_t mag = up ? (uint64_t)iv[2] : 0 - (uint64_t)iv[2];
      uint64_t c = dist / mag + (dist % mag != 0);
      if (c > (uint64_t)1e15)
        return fail(n, d, "the range is too long");
      count = (int64_t)c;
    }
  }
  out->dtype = s->dtype;
  out->shape.rank = 1;
  out->shape.dims[0] = (Dim){count, NULL};
  return 0;
}

/* depth_to_space moves C / b^2 channel blocks into b x b spatial tiles; space_to_depth
 * does the reverse. The dims it divides or multiplies must be static. */
static int infer_space_depth(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  char bx[TSTR];
  bool d2s = n->op == OP_DEPTH_TO_SPACE;
  if (x->shape.rank != 4)
    return fail(n, d, "x must be [N, C, H, W], got %s", ts(x, bx));
  int64_t b = attr_int(n, "blocksize"), bb;
  if (b < 1 || b > WINDOW_MAX)
    return fail(n, d, "blocksize must be positive, got %" PRId64, b);
  bb = b * b;
  if (d2s) {
    const char *mode = attr_string(n, "mode");
    if (strcmp(mode, "DCR") && strcmp(mode, "CRD"))
      return fail(n, d, "mode must be 'DCR' or 'CRD', got '%s'", mode);
  }
  *out = *x;
  for (int i = 1; i < 4; i++) {
    Dim dm = x->shape.dims[i];
    if (dm.sym)
      return fail(n, d, "dim %d of %s is symbolic; %s needs C, H and W static", i, ts(x, bx),
                  op_info[n->op].name);
    /* channels divide on depth_to_space, spatial dims on space_to_depth */
    bool divide = d2s == (i == 1);
    int64_t by = i == 1 ? bb : b;
    if (divide) {
      if (dm.n % by)
        return fail(n, d, "dim %d of %s is not divisible by %" PRId64, i, ts(x, bx), by);
      out->shape.dims[i].n = dm.n / by;
    } else if (!size_mul(dm.n, by, &out->shape.dims[i].n)) {
      return fail(n, d, "dim %d of %s times %" PRId64 " overflows", i, ts(x, bx), by);
    }
  }
  return 0;
}

static int infer_one_hot(const Node *n, Type *out, Diag *d) {
  const Type *idx = in_type(n, 0), *v = in_type(n, 1);
  char bi[TSTR], bv[TSTR];
  int r = idx->shape.rank, ax;
  if (idx->dtype == DT_BOOL)
    return fail(n, d, "indices must be numeric, got bool");
  if (v->shape.rank != 1 || !dim_eq(v->shape.dims[0], (Dim){2, NULL}))
    return fail(n, d, "values %s must be [2]: off, on", ts(v, bv));
  int64_t depth = attr_int(n, "depth"), axis = attr_int(n, "axis");
  if (depth < 1)
    return fail(n, d, "depth must be positive, got %" PRId64, depth);
  if (r + 1 > IR_MAX_RANK)
    return fail(n, d, "result rank %d of one_hot on %s exceeds %d", r + 1, ts(idx, bi),
                IR_MAX_RANK);
  if (!norm_axis(axis, r + 1, &ax))
    return fail(n, d, "axis %" PRId64 " is out of range for the result rank %d", axis, r + 1);
  out->dtype = v->dtype;
  out->shape.rank = r + 1;
  for (int i = 0, k = 0; i <= r; i++)
    out->shape.dims[i] = i == ax ? (Dim){depth, NULL} : idx->shape.dims[k++];
  return 0;
}

/* nll_loss and softmax_cross_entropy: x [N, C, d...], target [N, d...], weight [C]. */
static int infer_loss(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0), *t = in_type(n, 1), *w = in_type(n, 2);
  char bx[TSTR], bt[TSTR];
  static const char *const reductions[] = {"none", "sum", "mean", NULL};
  const char *red = attr_string(n, "reduction");
  if (!str_in(red, reductions))
    return fail(n, d, "reduction must be 'none', 'sum' or 'mean', got '%s'", red);
  if (need_float(n, d, x))
    return -1;
  if (x->shape.rank < 2)
    return fail(n, d, "input must be [N, C, d...], got %s", ts(x, bx));
  if (t->dtype != DT_I32 && t->dtype != DT_I64)
    return fail(n, d, "target must be i32 or i64, got %s", dtype_name(t->dtype));
  bool ok = t->shape.rank == x->shape.rank - 1;
  for (int i = 0; ok && i < t->shape.rank; i++)
    ok = dim_eq(t->shape.dims[i], x->shape.dims[i ? i + 1 : 0]);
  if (!ok)
    return fail(n, d, "target %s must be input %s without its dim 1", ts(t, bt), ts(x, bx));
  if (w) {
    if (same_dtype(n, d, x, w))
      return -1;
    if (w->shape.rank != 1 || !dim_eq(w->shape.dims[0], x->shape.dims[1]))
      return fail(n, d, "weight %s must be [C] for input %s", ts(w, bt), ts(x, bx));
  }
  out[0].dtype = x->dtype;
  out[0].shape = strcmp(red, "none") ? (Shape){.rank = 0} : t->shape;
  if (n->op == OP_SOFTMAX_CROSS_ENTROPY)
    out[1] = *x;
  return 0;
}

/* ---------------------------------------------------------------- gather_nd to mean_variance_norm */

/* The index tuples of gather_nd and scatter_nd: i32 or i64 of rank >= 1, whose last dim
 * k must be static and name between 1 and rank(data) - b dims. */
static int nd_indices(const Node *n, Diag *d, const Type *x, const Type *idx, int b, int *k) {
  char bx[TSTR], bi[TSTR];
  Dim kd = idx->shape.dims[idx->shape.rank - 1];
  if (kd.sym)
    return fail(n, d, "the last dim of indices %s is symbolic; it must be static",
                ts(idx, bi));
  if (kd.n < 1 || kd.n > x->shape.rank - b)
    return fail(n, d, "the last dim of indices %s must be 1 to %d: the rank of data %s minus "
                "batch_dims %d", ts(idx, bi), x->shape.rank - b, ts(x, bx), b);
  *k = (int)kd.n;
  return 0;
}

static int nd_operands(const Node *n, Diag *d, const Type *x, const Type *idx) {
  char bx[TSTR], bi[TSTR];
  if (idx->dtype != DT_I32 && idx->dtype != DT_I64)
    return fail(n, d, "indices must be i32 or i64, got %s", dtype_name(idx->dtype));
  if (x->shape.rank < 1 || idx->shape.rank < 1)
    return fail(n, d, "data %s and indices %s must be at least 1-D", ts(x, bx), ts(idx, bi));
  return 0;
}

static int infer_gather_nd(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0), *idx = in_type(n, 1);
  char bx[TSTR], bi[TSTR];
  int r = x->shape.rank, q = idx->shape.rank, k;
  if (nd_operands(n, d, x, idx))
    return -1;
  int64_t b = attr_int(n, "batch_dims");
  if (b < 0 || b >= q || b >= r)
    return fail(n, d, "batch_dims %" PRId64 " must be at least 0 and less than the ranks of "
                "data %s and indices %s", b, ts(x, bx), ts(idx, bi));
  if (nd_indices(n, d, x, idx, (int)b, &k))
    return -1;
  for (int i = 0; i < b; i++)
    if (!dim_eq(x->shape.dims[i], idx->shape.dims[i]))
      return fail(n, d, "batch dim %d of data %s and indices %s differs", i, ts(x, bx),
                  ts(idx, bi));
  int rank = q - 1 + r - (int)b - k;
  if (rank > IR_MAX_RANK)
    return fail(n, d, "result rank %d of gathering %s with %s exceeds %d", rank, ts(x, bx),
                ts(idx, bi), IR_MAX_RANK);
  out->dtype = x->dtype;
  out->shape.rank = 0;
  for (int i = 0; i < q - 1; i++)
    out->shape.dims[out->shape.rank++] = idx->shape.dims[i];
  for (int i = (int)b + k; i < r; i++)
    out->shape.dims[out->shape.rank++] = x->shape.dims[i];
  return 0;
}

static int infer_scatter_nd(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0), *idx = in_type(n, 1), *u = in_type(n, 2);
  char bu[TSTR], bw[TSTR];
  static const char *const reductions[] = {"none", "add", "mul", "max", "min", NULL};
  const char *red = attr_string(n, "reduction");
  int k;
  if (!str_in(red, reductions))
    return fail(n, d, "reduction must be 'none', 'add', 'mul', 'max' or 'min', got '%s'", red);
  if (same_dtype(n, d, x, u) || nd_operands(n, d, x, idx) || nd_indices(n, d, x, idx, 0, &k))
    return -1;
  if (x->dtype == DT_BOOL && strcmp(red, "none"))
    return fail(n, d, "bool data takes no reduction");
  /* updates: one slice data.shape[k:] per index tuple */
  Type want = {x->dtype, {.rank = 0}};
  for (int i = 0; i < idx->shape.rank - 1; i++)
    want.shape.dims[want.shape.rank++] = idx->shape.dims[i];
  for (int i = k; i < x->shape.rank && want.shape.rank < IR_MAX_RANK; i++)
    want.shape.dims[want.shape.rank++] = x->shape.dims[i];
  if (idx->shape.rank - 1 + x->shape.rank - k > IR_MAX_RANK || !type_eq(u, &want))
    return fail(n, d, "updates %s must be indices.shape[:-1] + data.shape[%d:], %s", ts(u, bu),
                k, ts(&want, bw));
  *out = *x;
  return 0;
}

static int infer_grid_sample(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0), *g = in_type(n, 1);
  char bx[TSTR], bg[TSTR];
  static const char *const modes[] = {"linear", "nearest", "cubic", "bilinear", "bicubic", NULL};
  static const char *const paddings[] = {"zeros", "border", "reflection", NULL};
  const char *mode = attr_string(n, "mode"), *pad = attr_string(n, "padding_mode");
  if (!str_in(mode, modes))
    return fail(n, d, "mode must be 'linear', 'nearest' or 'cubic', got '%s'", mode);
  if (!str_in(pad, paddings))
    return fail(n, d, "padding_mode must be 'zeros', 'border' or 'reflection', got '%s'", pad);
  if (x->dtype == DT_BOOL)
    return fail(n, d, "bool inputs are not supported");
  if ((strcmp(mode, "nearest") && need_float(n, d, x)) || need_nchw(n, d, x))
    return -1;
  if (!dtype_is_float(g->dtype))
    return fail(n, d, "grid must be floating point, got %s", dtype_name(g->dtype));
  int r = x->shape.rank - 2;
  if (g->shape.rank != r + 2 || !dim_eq(g->shape.dims[r + 1], (Dim){r, NULL}))
    return fail(n, d, "grid %s must be [N, D1..D%d, %d] for x %s", ts(g, bg), r, r, ts(x, bx));
  if (!dim_eq(g->shape.dims[0], x->shape.dims[0]))
    return fail(n, d, "grid %s and x %s differ in N", ts(g, bg), ts(x, bx));
  out->dtype = x->dtype;
  out->shape = x->shape;
  for (int i = 0; i < r; i++)
    out->shape.dims[2 + i] = g->shape.dims[1 + i];
  return 0;
}

static int infer_reverse_sequence(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0), *len = in_type(n, 1);
  char bx[TSTR], bl[TSTR];
  int64_t ba = attr_int(n, "batch_axis"), ta = attr_int(n, "time_axis");
  if (x->shape.rank < 2)
    return fail(n, d, "x must have at least 2 dims, got %s", ts(x, bx));
  if ((ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
    return fail(n, d, "batch_axis %" PRId64 " and time_axis %" PRId64 " must be 0 and 1, "
                "one each", ba, ta);
  if (len->dtype != DT_I32 && len->dtype != DT_I64)
    return fail(n, d, "sequence_lens must be i32 or i64, got %s", dtype_name(len->dtype));
  if (len->shape.rank != 1 || !dim_eq(len->shape.dims[0], x->shape.dims[ba]))
    return fail(n, d, "sequence_lens %s must be [batch], dim %" PRId64 " of x %s", ts(len, bl),
                ba, ts(x, bx));
  *out = *x;
  return 0;
}

static int infer_roi_align(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0), *rois = in_type(n, 1), *bi = in_type(n, 2);
  char bx[TSTR], br[TSTR], bb[TSTR];
  static const char *const modes[] = {"avg", "max", NULL};
  static const char *const coords[] = {"half_pixel", "output_half_pixel", NULL};
  const char *mode = attr_string(n, "mode");
  const char *coord = attr_string(n, "coordinate_transformation_mode");
  if (!str_in(mode, modes))
    return fail(n, d, "mode must be 'avg' or 'max', got '%s'", mode);
  if (!str_in(coord, coords))
    return fail(n, d, "coordinate_transformation_mode must be 'half_pixel' or "
                "'output_half_pixel', got '%s'", coord);
  if (need_float(n, d, x) || same_dtype(n, d, x, rois))
    return -1;
  if (x->shape.rank != 4)
    return fail(n, d, "x must be [N, C, H, W], got %s", ts(x, bx));
  if (rois->shape.rank != 2 || !dim_eq(rois->shape.dims[1], (Dim){4, NULL}))
    return fail(n, d, "rois %s must be [R, 4]", ts(rois, br));
  if (bi->dtype != DT_I32 && bi->dtype != DT_I64)
    return fail(n, d, "batch_indices must be i32 or i64, got %s", dtype_name(bi->dtype));
  if (bi->shape.rank != 1 || !dim_eq(bi->shape.dims[0], rois->shape.dims[0]))
    return fail(n, d, "batch_indices %s must be [R] for rois %s", ts(bi, bb), ts(rois, br));
  int64_t oh = attr_int(n, "output_height"), ow = attr_int(n, "output_width");
  int64_t sr = attr_int(n, "sampling_ratio");
  if (oh < 1 || ow < 1 || oh > WINDOW_MAX || ow > WINDOW_MAX)
    return fail(n, d, "output_height %" PRId64 " and output_width %" PRId64 " must be positive",
                oh, ow);
  if (sr < 0 || sr > WINDOW_MAX)
    return fail(n, d, "sampling_ratio must be 0 (adaptive) or positive, got %" PRId64, sr);
  out->dtype = x->dtype;
  out->shape.rank = 4;
  out->shape.dims[0] = rois->shape.dims[0];
  out->shape.dims[1] = x->shape.dims[1];
  out->shape.dims[2] = (Dim){oh, NULL};
  out->shape.dims[3] = (Dim){ow, NULL};
  return 0;
}

/* max_unpool's output_shape: -1 keeps x's N or C (a symbolic batch dim passes that way),
 * any other entry there must be x's; spatial entries may only grow the default. */
static int unpool_output_shape(const Node *n, Diag *d, const Type *x, const Attr *os,
                               Type *out) {
  char bx[TSTR], bs[600];
  int r = x->shape.rank;
  ints_str(os->ints, os->n, bs, sizeof bs);
  if (os->n != r)
    return fail(n, d, "output_shape %s has %d entries, but x %s has rank %d", bs, os->n,
                ts(x, bx), r);
  for (int i = 0; i < r; i++) {
    int64_t v = os->ints[i];
    if (i < 2 && v != -1 && !dim_eq(x->shape.dims[i], (Dim){v, NULL}))
      return fail(n, d, "output_shape %s must keep dim %d of x %s (or say -1)", bs, i,
                  ts(x, bx));
    if (i >= 2 && v < out->shape.dims[i].n)
      return fail(n, d, "output_shape %s is smaller than the unpooled size %" PRId64
                  " on spatial dim %d", bs, out->shape.dims[i].n, i - 2);
    if (i >= 2)
      out->shape.dims[i] = (Dim){v, NULL};
  }
  return 0;
}

static int infer_max_unpool(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0), *idx = in_type(n, 1);
  char bx[TSTR], bi[TSTR];
  if (x->dtype == DT_BOOL)
    return fail(n, d, "bool inputs are not supported");
  if (need_nchw(n, d, x))
    return -1;
  if (idx->dtype != DT_I32 && idx->dtype != DT_I64)
    return fail(n, d, "indices must be i32 or i64, got %s", dtype_name(idx->dtype));
  if (!type_eq(&(Type){idx->dtype, x->shape}, idx))
    return fail(n, d, "indices %s must have the shape of x %s", ts(idx, bi), ts(x, bx));
  int k = x->shape.rank - 2, len;
  Window win;
  attr_ints(n, "kernel_shape", &len);
  if (len != k)
    return fail(n, d, "kernel_shape has %d entries, expected %d", len, k);
  int64_t pads[2 * IR_MAX_RANK];
  if (window_list(n, d, "kernel_shape", k, 1, 1, win.kernel) ||
      window_list(n, d, "strides", k, 1, 1, win.stride) ||
      window_list(n, d, "pads", 2 * k, 0, 0, pads))
    return -1;
  *out = *x;
  for (int i = 0; i < k; i++) {
    if (static_spatial(n, d, x, i))
      return -1;
    int64_t in = x->shape.dims[2 + i].n, o;
    if (in < 1 || !size_mul(win.stride[i], in - 1, &o) || !size_add(o, win.kernel[i], &o))
      return fail(n, d, "spatial dim %d of %s is out of range", i, ts(x, bx));
    if (o < pads[i] + pads[k + i]) /* each pad at most WINDOW_MAX */
      return fail(n, d, "pads remove more than the whole output on spatial dim %d", i);
    o -= pads[i] + pads[k + i];
    out->shape.dims[2 + i] = (Dim){o, NULL};
  }
  const Attr *os = attr_find(n, "output_shape");
  return os ? unpool_output_shape(n, d, x, os, out) : 0;
}

static int infer_det(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  char bx[TSTR];
  int r = x->shape.rank;
  if (need_float(n, d, x))
    return -1;
  if (r < 2 || !dim_eq(x->shape.dims[r - 2], x->shape.dims[r - 1]))
    return fail(n, d, "x must be [..., M, M] (square in its last two dims), got %s",
                ts(x, bx));
  *out = *x;
  out->shape.rank = r - 2;
  return 0;
}

static int infer_lp_mvn(const Node *n, Type *out, Diag *d) {
  const Type *x = in_type(n, 0);
  if (need_float(n, d, x))
    return -1;
  if (n->op == OP_LP_NORM) {
    int ax;
    int64_t axis = attr_int(n, "axis"), p = attr_int(n, "p");
    if (!norm_axis(axis, x->shape.rank, &ax))
      return bad_axis(n, d, axis, x);
    if (p != 1 && p != 2)
      return fail(n, d, "p must be 1 or 2, got %" PRId64, p);
  } else {
    bool red[IR_MAX_RANK];
    int len;
    const int64_t *axes = attr_ints(n, "axes", &len);
    if (reduce_axes(n, d, x, axes, len, red))
      return -1;
  }
  *out = *x;
  return 0;
}

/* ---------------------------------------------------------------- the entry points */

static bool type_well_formed(const Type *t) {
  if (t->dtype >= DT_COUNT || t->shape.rank < 0 || t->shape.rank > IR_MAX_RANK)
    return false;
  for (int i = 0; i < t->shape.rank; i++)
    if (!t->shape.dims[i].sym && t->shape.dims[i].n < 0)
      return false;
  return true;
}

/* Arity, presence and types of the inputs: what every rule below takes for granted. */
static int check_inputs(const Node *n, Diag *d) {
  const OpInfo *oi = &op_info[n->op];
  if (n->nin < oi->min_in || (oi->max_in >= 0 && n->nin > oi->max_in)) {
    if (oi->max_in == oi->min_in)
      return diag_error(d, n->loc, "op '%s' takes %d input%s, got %d", oi->name, oi->min_in,
                        oi->min_in == 1 ? "" : "s", n->nin);
    if (oi->max_in < 0)
      return diag_error(d, n->loc, "op '%s' takes at least %d input%s, got %d", oi->name,
                        oi->min_in, oi->min_in == 1 ? "" : "s", n->nin);
    return diag_error(d, n->loc, "op '%s' takes %d to %d inputs, got %d", oi->name,
                      oi->min_in, oi->max_in, n->nin);
  }
  for (int i = 0; i < n->nin; i++) {
    const Value *v = n->in[i];
    if (!v) {
      if (i < oi->min_in)
        return diag_error(d, n->loc, "input %d of %s is missing", i, oi->name);
      continue;
    }
    if (!type_is_known(&v->type))
      return diag_error(d, n->loc, "input %%%s of %s has no type", v->name, oi->name);
    if (!type_well_formed(&v->type))
      return diag_error(d, n->loc, "input %%%s of %s has a malformed type", v->name, oi->name);
  }
  int nout = oi->n_out;
  if (nout < 0) {
    attr_ints(n, "split", &nout);
    if (n->nout != nout)
      return diag_error(d, n->loc, "%s: the node has %d output%s but split lists %d sizes",
                        oi->name, n->nout, n->nout == 1 ? "" : "s", nout);
  } else if (n->nout != nout) {
    return diag_error(d, n->loc, "op '%s' has %d output%s, got %d", oi->name, nout,
                      nout == 1 ? "" : "s", n->nout);
  }
  return 0;
}

static int check_result(const Node *n, const Type *t, Diag *d) {
  if (t->shape.rank > IR_MAX_RANK)
    return fail(n, d, "result rank %d exceeds %d", t->shape.rank, IR_MAX_RANK);
  if (!shape_size(&t->shape, t->dtype, NULL, NULL)) {
    char b[TSTR];
    return fail(n, d, "result %s is too large (more than 2^48 bytes)", ts(t, b));
  }
  return 0;
}

int ir_infer_node(const Node *n, Type *out, Diag *d) {
  if ((unsigned)n->op >= OP_COUNT)
    return diag_error(d, n->loc, "unknown op %d", (int)n->op);
  if (ir_check_attrs(n, d) || check_inputs(n, d))
    return -1;
  for (int i = 0; i < n->nout; i++)
    out[i] = type_unknown();
  int rc;
  unsigned fl = op_info[n->op].flags;
  switch (n->op) {
  case OP_WHERE: rc = infer_where(n, out, d); break;
  case OP_MATMUL: rc = infer_matmul(n, out, d); break;
  case OP_SOFTMAX:
  case OP_LOG_SOFTMAX:
  case OP_HARDMAX: rc = infer_softmax(n, out, d); break;
  case OP_LAYER_NORM: case OP_RMS_NORM: rc = infer_layer_norm(n, out, d); break;
  case OP_RESHAPE: rc = infer_reshape(n, out, d); break;
  case OP_TRANSPOSE: rc = infer_transpose(n, out, d); break;
  case OP_SQUEEZE: rc = infer_squeeze(n, out, d); break;
  case OP_UNSQUEEZE: rc = infer_unsqueeze(n, out, d); break;
  case OP_FLATTEN: rc = infer_flatten(n, out, d); break;
  case OP_EXPAND: rc = infer_expand(n, out, d); break;
  case OP_CONCAT: rc = infer_concat(n, out, d); break;
  case OP_SLICE: rc = infer_slice(n, out, d); break;
  case OP_SPLIT: rc = infer_split(n, out, d); break;
  case OP_GATHER: rc = infer_gather(n, out, d); break;
  case OP_CONV:
  case OP_CONV_TRANSPOSE:
  case OP_MAX_POOL:
  case OP_AVERAGE_POOL:
  case OP_GLOBAL_AVERAGE_POOL:
  case OP_GLOBAL_MAX_POOL: rc = infer_window_op(n, out, d); break;
  case OP_BATCH_NORM:
  case OP_INSTANCE_NORM:
  case OP_LRN: rc = infer_norm(n, out, d); break;
  case OP_PAD: rc = infer_pad(n, out, d); break;
  case OP_RESIZE: rc = infer_resize(n, out, d); break;
  case OP_TOPK: rc = infer_topk(n, out, d); break;
  case OP_CUMSUM:
  case OP_TRILU: rc = infer_cumsum_trilu(n, out, d); break;
  case OP_TILE: rc = infer_tile(n, out, d); break;
  case OP_GATHER_ELEMENTS: rc = infer_gather_elements(n, out, d); break;
  case OP_RANGE: rc = infer_range(n, out, d); break;
  case OP_SCATTER_ELEMENTS: rc = infer_scatter_elements(n, out, d); break;
  case OP_DEPTH_TO_SPACE:
  case OP_SPACE_TO_DEPTH: rc = infer_space_depth(n, out, d); break;
  case OP_ONE_HOT: rc = infer_one_hot(n, out, d); break;
  case OP_NLL_LOSS:
  case OP_SOFTMAX_CROSS_ENTROPY: rc = infer_loss(n, out, d); break;
  case OP_GATHER_ND: rc = infer_gather_nd(n, out, d); break;
  case OP_SCATTER_ND: rc = infer_scatter_nd(n, out, d); break;
  case OP_GRID_SAMPLE: rc = infer_grid_sample(n, out, d); break;
  case OP_REVERSE_SEQUENCE: rc = infer_reverse_sequence(n, out, d); break;
  case OP_ROI_ALIGN: rc = infer_roi_align(n, out, d); break;
  case OP_MAX_UNPOOL: rc = infer_max_unpool(n, out, d); break;
  case OP_DET: rc = infer_det(n, out, d); break;
  case OP_LP_NORM:
  case OP_MEAN_VARIANCE_NORM: rc = infer_lp_mvn(n, out, d); break;
  default:
    if (fl & OPF_REDUCTION)
      rc = infer_reduce(n, out, d);
    else if ((fl & OPF_POINTWISE) && op_info[n->op].min_in == 1)
      rc = infer_unary(n, out, d);
    else if ((fl & OPF_POINTWISE) && op_info[n->op].min_in == 2)
      rc = infer_binary(n, out, d);
    else
      rc = diag_error(d, n->loc, "no shape rule for op '%s'", op_info[n->op].name);
    break;
  }
  for (int i = 0; rc == 0 && i < n->nout; i++)
    rc = check_result(n, &out[i], d);
  return rc;
}


int ir_infer(Graph *g, Diag *d) {
  for (int i = 0; i < g->ninputs; i++)
    if (!type_is_known(&g->inputs[i]->type))
      return diag_error(d, g->inputs[i]->loc, "input %%%s has no type", g->inputs[i]->name);
  for (int i = 0; i < g->nconsts; i++)
    if (!type_is_known(&g->consts[i]->type))
      return diag_error(d, g->consts[i]->loc, "constant %%%s has no type", g->consts[i]->name);
  Type small[8], *out = small;
  int cap = 8;
  int rc = 0;
  for (int i = 0; i < g->nnodes && rc == 0; i++) {
    const Node *n = g->nodes[i];
    if (n->nout > cap) {
      if (out != small)
        free(out);
      cap = n->nout;
      out = malloc(sizeof *out * (size_t)cap);
      if (!out)
        return diag_error(d, n->loc, "out of memory");
    }
    if (ir_infer_node(n, out, d)) {
      ir_note_node(d, n);
      rc = -1;
      break;
    }
    for (int k = 0; k < n->nout; k++) {
      Value *v = n->out[k];
      if (!v)
        continue;
      if (type_is_known(&v->type) && !type_eq(&v->type, &out[k])) {
        char bd[TSTR], bg[TSTR];
        rc = diag_error(d, n->loc, "type mismatch: %%%s is declared %s but %s gives %s",
                        v->name, ts(&v->type, bd), op_info[n->op].name, ts(&out[k], bg));
        ir_note_node(d, n);
        break;
      }
      v->type = out[k];
    }
  }
  if (out != small)
    free(out);
  return rc;
}
