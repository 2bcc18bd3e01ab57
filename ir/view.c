/* view.c: strided views. Many layout ops only rename elements: a reshape of a dense
 * tensor, a transpose, a squeeze, one output of a split, a gather of one constant index.
 * Their output is their input's buffer read through other strides, so a kernel that
 * consumes such a chain can read the first buffer directly (index arithmetic) and the
 * chain needs no kernel of its own. view_through follows one such node. */
#include "ir/ir.h"

#include <string.h>

void view_init(View *v, const Value *base) {
  const Shape *s = &base->type.shape;
  memset(v, 0, sizeof *v);
  v->base = base;
  v->rank = s->rank;
  int64_t st = 1;
  for (int i = s->rank - 1; i >= 0; i--) {
    v->dims[i] = s->dims[i].n;
    v->stride[i] = st;
    st *= s->dims[i].n;
  }
}

/* The strides of `in` read as `rank` dims `dims` (same element count), if some exist:
 * each run of input dims that merges into, or splits from, output dims must be laid out
 * as one block (PyTorch's rule for view()). Dims of size 1 take any stride. */
static bool restride(const View *in, int rank, const int64_t *dims, int64_t *stride) {
  int64_t numel = 1;
  for (int i = 0; i < rank; i++)
    numel *= dims[i];
  if (numel == 0 || in->rank == 0) {
    for (int i = 0; i < rank; i++)
      stride[i] = 1;
    return true;
  }
  int vd = rank - 1;
  int64_t base = in->stride[in->rank - 1], tnumel = 1, vnumel = 1;
  for (int td = in->rank - 1; td >= 0; td--) {
    tnumel *= in->dims[td];
    if (td == 0 || (in->dims[td - 1] != 1 && in->stride[td - 1] != tnumel * base)) {
      while (vd >= 0 && (vnumel < tnumel || dims[vd] == 1)) {
        stride[vd] = vnumel * base;
        vnumel *= dims[vd];
        vd--;
      }
      if (vnumel != tnumel)
        return false;
      if (td > 0) {
        base = in->stride[td - 1];
        tnumel = vnumel = 1;
      }
    }
  }
  return vd == -1;
}

bool view_divides(const View *v) {
  for (int i = 0; i < v->rank; i++)
    if (v->div[i] > 1)
      return true;
  return false;
}

/* The view `in` read as `rank` dims `dims` (same element count), if it can be: restride,
 * or where a broadcast dim (stride 0) lies inside a dim that does not broadcast, each such
 * pair (and the dims of div above 1) as one dim of div above 1, which the reshape must
 * keep whole: its size and the elements inside it alike in `dims` (repeat_kv's [kv heads,
 * rep] merged into the heads). */
static bool reshape_view(const View *in, int rank, const int64_t *dims, View *res) {
  if (!view_divides(in) && restride(in, rank, dims, res->stride)) {
    memset(res->div, 0, sizeof res->div);
    return true;
  }
  View f = *in;
  f.rank = 0;
  bool folded = false;
  for (int i = 0; i < in->rank; i++) {
    int64_t n = in->dims[i], d = in->div[i] > 1 ? in->div[i] : 1;
    if (n == 1)
      continue; /* carries nothing */
    if (in->stride[i] == 0 && d == 1 && f.rank > 0 && f.stride[f.rank - 1] != 0) {
      int64_t pd = f.div[f.rank - 1] > 1 ? f.div[f.rank - 1] : 1;
      if (f.dims[f.rank - 1] > INT64_MAX / n || pd > INT64_MAX / n)
        return false;
      f.dims[f.rank - 1] *= n;
      f.div[f.rank - 1] = pd * n;
      folded = true;
      continue;
    }
    f.dims[f.rank] = n;
    f.stride[f.rank] = in->stride[i];
    f.div[f.rank++] = d;
    folded = folded || d > 1;
  }
  if (!folded || !restride(&f, rank, dims, res->stride))
    return false;
  memset(res->div, 0, sizeof res->div);
  int64_t inner = 1;
  for (int j = f.rank - 1; j >= 0; inner *= f.dims[j--]) {
    if (f.div[j] <= 1)
      continue;
    int64_t oin = 1;
    int o = rank - 1;
    for (; o >= 0 && oin < inner; o--)
      oin *= dims[o];
    while (o >= 0 && dims[o] == 1)
      o--;
    if (o < 0 || oin != inner || dims[o] != f.dims[j] || res->stride[o] != f.stride[j])
      return false;
    res->div[o] = f.div[j];
  }
  return true;
}

/* The single element of integer constant v, if it is one. */
static bool const_index(const Value *v, int64_t *out) {
  if (!v || v->kind != VK_CONST || !v->data || tensor_numel(v->data) != 1 ||
      !dtype_is_int(v->data->dtype))
    return false;
  *out = dtype_load_i64(v->data->dtype, v->data->data);
  return true;
}

bool view_through(const Node *n, int out, const View *in, View *res) {
  const Value *y = n->out[out];
  const Shape *ys = &y->type.shape;
  if (!shape_is_static(ys) || n->nin < 1 || in->rank != n->in[0]->type.shape.rank)
    return false;
  *res = *in;
  res->rank = ys->rank;
  int64_t dims[IR_MAX_RANK];
  for (int i = 0; i < ys->rank; i++)
    dims[i] = ys->dims[i].n;
  switch (n->op) {
  case OP_IDENTITY: case OP_RESHAPE: case OP_SQUEEZE: case OP_UNSQUEEZE: case OP_FLATTEN:
    memcpy(res->dims, dims, sizeof dims);
    return reshape_view(in, ys->rank, dims, res);
  case OP_TRANSPOSE: {
    int np = 0;
    const int64_t *perm = attr_ints(n, "perm", &np);
    for (int i = 0; i < ys->rank; i++) {
      int64_t p = perm && np == ys->rank ? perm[i] : ys->rank - 1 - i;
      res->dims[i] = in->dims[p];
      res->stride[i] = in->stride[p];
      res->div[i] = in->div[p];
    }
    return true;
  }
  case OP_SPLIT: {
    int64_t axis = attr_int(n, "axis");
    if (axis < 0)
      axis += in->rank;
    if (in->div[axis] > 1)
      return false;
    for (int k = 0; k < out; k++)
      res->offset += n->out[k]->type.shape.dims[axis].n * in->stride[axis];
    res->dims[axis] = dims[axis];
    return true;
  }
  case OP_GATHER: {
    int64_t axis = attr_int(n, "axis"), idx;
    if (axis < 0)
      axis += in->rank;
    const Value *iv = n->in[1];
    if (!const_index(iv, &idx) || iv->type.shape.rank > 1)
      return false;
    if (idx < 0)
      idx += in->dims[axis];
    if (idx < 0 || idx >= in->dims[axis] || in->div[axis] > 1)
      return false;
    res->offset += idx * in->stride[axis];
    int r = 0;
    for (int i = 0; i < in->rank; i++) {
      if (i == axis && iv->type.shape.rank == 0)
        continue; /* a scalar index drops the axis */
      res->dims[r] = i == axis ? 1 : in->dims[i];
      res->div[r] = i == axis ? 0 : in->div[i];
      res->stride[r++] = in->stride[i];
    }
    return r == ys->rank;
  }
  default:
    return false;
  }
}

bool view_through_reads(const Node *n, int out, const View *in, View *res) {
  if (n->op != OP_EXPAND && n->op != OP_SLICE)
    return view_through(n, out, in, res);
  const Value *y = n->out[out];
  const Shape *ys = &y->type.shape;
  int ry = ys->rank;
  if (!shape_is_static(ys) || n->nin < 1 || in->rank != n->in[0]->type.shape.rank ||
      ry < in->rank)
    return false;
  *res = *in;
  res->rank = ry;
  for (int j = 0; j < ry; j++)
    res->dims[j] = ys->dims[j].n;
  if (n->op == OP_EXPAND) {
    for (int j = 0; j < ry; j++) {
      int jj = j - (ry - in->rank);
      bool bcast = jj < 0 || (in->dims[jj] == 1 && res->dims[j] != 1);
      res->stride[j] = bcast ? 0 : in->stride[jj];
      res->div[j] = bcast ? 0 : in->div[jj];
    }
    return true;
  }
  int ns, na, nst;
  const int64_t *starts = attr_ints(n, "starts", &ns);
  const int64_t *axes = attr_ints(n, "axes", &na);
  const int64_t *steps = attr_ints(n, "steps", &nst);
  if (ry != in->rank || !starts || (axes && na != ns) || (steps && nst != ns))
    return false;
  for (int i = 0; i < ns; i++) {
    int64_t a = axes ? (axes[i] < 0 ? axes[i] + in->rank : axes[i]) : i;
    if (a < 0 || a >= in->rank)
      return false;
    int64_t dim = in->dims[a], s0 = starts[i], k = steps ? steps[i] : 1;
    if (s0 < 0)
      s0 = s0 < -dim ? 0 : s0 + dim;
    s0 = k > 0 ? (s0 > dim ? dim : s0) : (s0 > dim - 1 ? dim - 1 : s0);
    if (res->dims[a] == 0)
      continue;
    if (in->div[a] > 1)
      return false;
    res->offset += s0 * in->stride[a];
    res->stride[a] = in->stride[a] * k;
  }
  return true;
}

bool view_rows(const View *v, int64_t *rows, int64_t *ld) {
  if (v->rank < 1 || view_divides(v))
    return false;
  int64_t k = v->dims[v->rank - 1], n = 1, stride = 0;
  if (k > 1 && v->stride[v->rank - 1] != 1)
    return false;
  /* from the innermost row dim out: each dim of more than one element continues the
   * previous one's rows */
  for (int i = v->rank - 2; i >= 0; i--) {
    if (v->dims[i] == 1)
      continue;
    if (n > 1 && v->stride[i] != stride * n)
      return false;
    if (n == 1)
      stride = v->stride[i];
    n *= v->dims[i];
  }
  *rows = n;
  *ld = n > 1 ? stride : k;
  return *ld >= k;
}

const Value *view_scale_factor(const Node *n) {
  DType t = n->out[0]->type.dtype;
  if ((n->op != OP_MUL && n->op != OP_DIV) || n->nin != 2 || n->in[0] == n->in[1] ||
      (t != DT_F32 && t != DT_F16 && t != DT_BF16))
    return NULL;
  for (int k = n->op == OP_DIV; k < 2; k++) { /* a division's divisor only */
    const Value *c = n->in[k];
    if (c->kind == VK_CONST && c->data && tensor_numel(c->data) == 1 &&
        c->type.dtype == t && type_eq(&n->in[1 - k]->type, &n->out[0]->type))
      return c;
  }
  return NULL;
}
