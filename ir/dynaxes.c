/* dynaxes.c: where ranged symbols lie in a graph bound at a class's sizes
 * (docs/dynamic-shapes.md, section 2).
 *
 * The graph is concrete: each ranged symbol S is bound at its class's bound M, and the
 * seeds say which input axes were S. From them, every value's axes get tags: axis a
 * carries S with stride c when position p along a is S-index (p / c) % M, so that p is
 * padding at a run of actual size s when that index is >= s. An axis that is S itself
 * has c = 1; [B, S, H] reshaped to [B*S, H] gives the rows S with c = 1 (the padding
 * rows inside each b's block), [S, H] to [S*H] gives S with c = H. An axis may carry two
 * symbols (batch and sequence merged into rows).
 *
 * The walk follows the nodes in order. Pointwise ops and the row and column axes of a
 * matmul pass tags through; a reshape moves them with the row-major order of its
 * elements; a gather along a tagged axis passes where its indices are a constant that
 * sends each position to itself; the nodes that combine elements along a tagged axis are
 * listed (a reduction or softmax over it, a matmul's K along it, a convolution or pool
 * across it), each with what would keep the padding out of real results, or why nothing
 * can yet. */
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static DynAxis *axes_of(DynAxes *a, const Value *v) {
  return v && v->id >= 0 && v->id < a->nvalues ? &a->axes[(size_t)v->id * IR_MAX_RANK] : NULL;
}

const DynAxis *dyn_axis(const DynAxes *a, const Value *v, int axis) {
  if (!v || v->id < 0 || v->id >= a->nvalues || axis < 0 || axis >= IR_MAX_RANK)
    return NULL;
  return &a->axes[(size_t)v->id * IR_MAX_RANK + axis];
}

bool dyn_tagged(const DynAxis *x) { return x && x->t[0].sym >= 0; }

static void clear_axis(DynAxis *x) {
  for (int k = 0; k < DYN_AXIS_SYMS; k++)
    x->t[k] = (DynTag){-1, 0};
}

static bool same_axis(const DynAxis *x, const DynAxis *y) {
  for (int k = 0; k < DYN_AXIS_SYMS; k++)
    if (x->t[k].sym != y->t[k].sym || (x->t[k].sym >= 0 && x->t[k].stride != y->t[k].stride))
      return false;
  return true;
}

/* Adds tag t to axis x; false when x has no room. */
static bool add_tag(DynAxis *x, DynTag t) {
  for (int k = 0; k < DYN_AXIS_SYMS; k++)
    if (x->t[k].sym < 0) {
      x->t[k] = t;
      return true;
    }
  return false;
}

static int mixes(DynAxes *a, const Node *n, int input, int sym, int axis, DynNeed need,
                 const char *why) {
  const Value *v = n->in[input];
  DynMix *m = realloc(a->mix, (size_t)(a->nmix + 1) * sizeof *m);
  if (!m)
    return -1;
  a->mix = m;
  m[a->nmix++] = (DynMix){n, input, v, sym, axis, need, why};
  return 0;
}

/* Records node n as mixing along axis `axis` of its input x (every symbol the axis
 * carries). */
static int mixes_axis(DynAxes *a, const Node *n, const Value *x, int axis, DynNeed need,
                      const char *why) {
  const DynAxis *t = dyn_axis(a, x, axis);
  int input = 0;
  while (input < n->nin - 1 && n->in[input] != x)
    input++;
  for (int k = 0; t && k < DYN_AXIS_SYMS; k++)
    if (t->t[k].sym >= 0 && mixes(a, n, input, t->t[k].sym, axis, need, why))
      return -1;
  return 0;
}

/* Records n as unsupported for every tagged axis of its inputs. */
static int unsupported(DynAxes *a, const Node *n, const char *why) {
  for (int i = 0; i < n->nin; i++) {
    const Value *x = n->in[i];
    for (int j = 0; x && j < x->type.shape.rank; j++)
      if (dyn_tagged(dyn_axis(a, x, j)) && mixes_axis(a, n, x, j, DYN_UNSUPPORTED, why))
        return -1;
  }
  return 0;
}

/* Output y of a broadcasting elementwise node: axis j takes the tags of the inputs'
 * axes aligned with it that are not broadcast (extent equal to y's). Inputs that tag one
 * axis differently make the node unsupported. */
static int broadcast(DynAxes *a, const Node *n, const Value *y, int first, int count) {
  DynAxis *out = axes_of(a, y);
  int r = y->type.shape.rank;
  for (int j = 0; out && j < r; j++) {
    bool set = false;
    for (int i = first; i < first + count && i < n->nin; i++) {
      const Value *x = n->in[i];
      int rx = x ? x->type.shape.rank : 0, k = j - (r - rx);
      if (k < 0 || x->type.shape.dims[k].n != y->type.shape.dims[j].n)
        continue;
      const DynAxis *t = dyn_axis(a, x, k);
      if (!dyn_tagged(t))
        continue;
      if (set && !same_axis(&out[j], t))
        return unsupported(a, n, "its inputs place a ranged dim differently");
      out[j] = *t;
      set = true;
    }
  }
  return 0;
}

/* Reshape: both shapes cut into the shortest groups of axes whose extents multiply to the
 * same number; within a group the flat position f is the same on both sides. An input
 * axis i of the group with tag (S, c) has S-index (f / (inner_i * c)) % M, inner_i the
 * product of the extents after i in the group; it lands on the output axis o whose
 * stride range holds that: inner_o divides inner_i * c, and o's extent is a multiple of
 * the index's period there, inner_i * c / inner_o * M. */
static int reshape(DynAxes *a, const Node *n, const Value *x, const Value *y) {
  const Shape *xs = &x->type.shape, *ys = &y->type.shape;
  const DynAxis *xt = dyn_axis(a, x, 0);
  DynAxis *yt = axes_of(a, y);
  if (!xt || !yt)
    return 0;
  int i = 0, o = 0;
  while (i < xs->rank || o < ys->rank) {
    /* the next group: an axis from each side that has one, then more from the side
     * whose product is smaller until they agree (size-1 axes make groups of their own) */
    int i0 = i, o0 = o;
    int64_t pi = 1, po = 1;
    if (i < xs->rank)
      pi *= xs->dims[i++].n;
    if (o < ys->rank)
      po *= ys->dims[o++].n;
    while (pi != po) {
      if (pi < po && i < xs->rank)
        pi *= xs->dims[i++].n;
      else if (po < pi && o < ys->rank)
        po *= ys->dims[o++].n;
      else
        return unsupported(a, n, "a reshape whose shapes this analysis cannot match");
    }
    for (int k = i0; k < i; k++) {
      for (int s = 0; s < DYN_AXIS_SYMS; s++) {
        DynTag t = xt[k].t[s];
        if (t.sym < 0)
          continue;
        int64_t inner = 1;
        for (int q = k + 1; q < i; q++)
          inner *= xs->dims[q].n;
        int64_t period = inner * t.stride, M = a->size[t.sym];
        if (M == 1)
          continue; /* a class of size 1 has no padding to follow (and no tag) */
        int at = -1;
        int64_t ino = 1;
        for (int q = o - 1; q >= o0 && at < 0; q--) {
          int64_t ext = ys->dims[q].n;
          if (period % ino == 0 && ext % (period / ino * M) == 0)
            at = q;
          else
            ino *= ext;
        }
        if (at < 0)
          return mixes_axis(a, n, x, k, DYN_UNSUPPORTED,
                            "the reshape splits the ranged dim across two axes");
        if (!add_tag(&yt[at], (DynTag){t.sym, period / ino}))
          return mixes_axis(a, n, x, k, DYN_UNSUPPORTED, "the reshape merges too many ranged dims");
      }
    }
  }
  return 0;
}

/* Whether gather indices idx, read along x's axis ax, send each of their positions to the
 * same coordinates of every symbol that axis carries, and the axis is nothing but those
 * symbols (its extent their sizes' product): then each real output reads the real input
 * the exact-size model reads, and the padding reads padding. Exporters write this for
 * a mask indexed by batch and key position, flattened: indices b * S + s, folded from the
 * sizes into a constant. */
static bool gather_in_place(const DynAxes *a, const Value *x, int ax, const Value *idx) {
  const Tensor *t = idx->kind == VK_CONST ? idx->data : NULL;
  if (!t || (t->dtype != DT_I64 && t->dtype != DT_I32) || t->rank != idx->type.shape.rank)
    return false;
  const DynAxis *xt = dyn_axis(a, x, ax);
  int64_t ext = x->type.shape.dims[ax].n, prod = 1;
  int at[DYN_AXIS_SYMS], nt = 0;
  int64_t c[DYN_AXIS_SYMS];
  for (; nt < DYN_AXIS_SYMS && xt->t[nt].sym >= 0; nt++) {
    prod *= a->size[xt->t[nt].sym];
    at[nt] = -1;
    for (int j = 0; j < t->rank; j++) {
      const DynAxis *it = dyn_axis(a, idx, j);
      for (int q = 0; q < DYN_AXIS_SYMS; q++)
        if (it->t[q].sym == xt->t[nt].sym) {
          if (at[nt] >= 0)
            return false;
          at[nt] = j;
          c[nt] = it->t[q].stride;
        }
    }
    if (at[nt] < 0)
      return false;
  }
  if (prod != ext)
    return false;
  for (int64_t e = 0, n = tensor_numel(t); e < n; e++) {
    int64_t v = t->dtype == DT_I64 ? ((const int64_t *)t->data)[e] : ((const int32_t *)t->data)[e];
    v = v < 0 ? v + ext : v;
    if (v < 0 || v >= ext)
      return false;
    int64_t pos[IR_MAX_RANK], r = e;
    for (int j = t->rank - 1; j >= 0; j--) {
      pos[j] = r % t->dims[j];
      r /= t->dims[j];
    }
    for (int k = 0; k < nt; k++) {
      int64_t m = a->size[xt->t[k].sym];
      if (v / xt->t[k].stride % m != pos[at[k]] / c[k] % m)
        return false;
    }
  }
  return true;
}

static int add_exact(DynAxes *a, const Value *v) {
  for (int k = 0; k < a->nexact; k++)
    if (a->exact[k] == v)
      return 0;
  const Value **e = realloc(a->exact, (size_t)(a->nexact + 1) * sizeof *e);
  if (!e)
    return -1;
  a->exact = e;
  e[a->nexact++] = v;
  return 0;
}

void dyn_reduced_axes(const Node *n, int rank, bool *red) {
  int len = 0;
  const int64_t *ax = attr_ints(n, "axes", &len);
  for (int j = 0; j < rank; j++)
    red[j] = !ax || len == 0;
  for (int k = 0; ax && k < len; k++) {
    int64_t j = ax[k] < 0 ? ax[k] + rank : ax[k];
    if (j >= 0 && j < rank)
      red[j] = true;
  }
}

static int one_node(DynAxes *a, const Node *n) {
  const Value *x = n->nin ? n->in[0] : NULL, *y = n->nout ? n->out[0] : NULL;
  if (!y)
    return 0;
  DynAxis *yt = axes_of(a, y);
  if (!yt)
    return 0;
  int rx = x ? x->type.shape.rank : 0, ry = y->type.shape.rank;
  if (op_info[n->op].flags & OPF_POINTWISE)
    return broadcast(a, n, y, 0, n->nin);
  switch (n->op) {
  case OP_RESHAPE: case OP_FLATTEN: case OP_SQUEEZE: case OP_UNSQUEEZE:
    return reshape(a, n, x, y);
  case OP_TRANSPOSE: {
    int len = 0;
    const int64_t *perm = attr_ints(n, "perm", &len);
    for (int j = 0; j < ry; j++) {
      int64_t from = perm && len == ry ? perm[j] : ry - 1 - j;
      const DynAxis *t = dyn_axis(a, x, (int)from);
      if (t)
        yt[j] = *t;
    }
    return 0;
  }
  case OP_MATMUL: {
    const Value *b = n->in[1];
    int rb = b->type.shape.rank;
    bool tb = attr_int(n, "transpose_b") != 0;
    int ka = rx - 1, kb = rb == 1 ? 0 : tb ? rb - 1 : rb - 2;
    if (mixes_axis(a, n, x, ka, DYN_MASK_ZERO, "a matmul's K: both operands' padding as 0") ||
        mixes_axis(a, n, b, kb, DYN_MASK_ZERO, "a matmul's K: both operands' padding as 0"))
      return -1;
    /* rows from A, columns from B, the batch dims before them broadcast */
    int oa = rx >= 2, ob = rb >= 2, nbo = ry - oa - ob;
    if (oa)
      yt[nbo] = *dyn_axis(a, x, rx - 2);
    if (ob)
      yt[ry - 1] = *dyn_axis(a, b, tb ? rb - 2 : rb - 1);
    for (int j = 0; j < nbo; j++)
      for (int s = 0; s < 2; s++) {
        const Value *v = s ? b : x;
        int nbv = v->type.shape.rank - 2, k = j - (nbo - nbv);
        if (nbv > 0 && k >= 0 && v->type.shape.dims[k].n == y->type.shape.dims[j].n &&
            dyn_tagged(dyn_axis(a, v, k)))
          yt[j] = *dyn_axis(a, v, k);
      }
    return 0;
  }
  case OP_REDUCE_SUM: case OP_REDUCE_MEAN: case OP_REDUCE_MAX: case OP_REDUCE_MIN:
  case OP_REDUCE_PROD: case OP_REDUCE_L1: case OP_REDUCE_L2: case OP_REDUCE_SUM_SQUARE:
  case OP_REDUCE_LOG_SUM_EXP: case OP_ARGMAX: case OP_ARGMIN: {
    bool red[IR_MAX_RANK];
    if (n->op == OP_ARGMAX || n->op == OP_ARGMIN) {
      int64_t ax = attr_int(n, "axis");
      for (int j = 0; j < rx; j++)
        red[j] = j == (ax < 0 ? ax + rx : ax);
    } else {
      dyn_reduced_axes(n, rx, red);
    }
    DynNeed need = n->op == OP_REDUCE_MEAN ? DYN_MEAN
                   : n->op == OP_REDUCE_MAX || n->op == OP_REDUCE_LOG_SUM_EXP || n->op == OP_ARGMAX
                       ? DYN_MASK_NEG_INF
                   : n->op == OP_REDUCE_MIN || n->op == OP_ARGMIN ? DYN_MASK_POS_INF
                   : n->op == OP_REDUCE_PROD                       ? DYN_MASK_ONE
                                                                   : DYN_MASK_ZERO;
    bool keep = attr_int(n, "keepdims") != 0;
    for (int j = 0, o = 0; j < rx; j++) {
      if (red[j]) {
        if (mixes_axis(a, n, x, j, need, "a reduction over it"))
          return -1;
        o += keep;
      } else {
        yt[o++] = *dyn_axis(a, x, j);
      }
    }
    return 0;
  }
  case OP_SOFTMAX: case OP_LOG_SOFTMAX: case OP_HARDMAX: {
    int64_t ax = attr_int(n, "axis");
    ax = ax < 0 ? ax + rx : ax;
    for (int j = 0; j < rx; j++) {
      yt[j] = *dyn_axis(a, x, j);
      if (j == ax && mixes_axis(a, n, x, j, DYN_MASK_NEG_INF, "a softmax over it"))
        return -1;
    }
    return 0;
  }
  case OP_LAYER_NORM: case OP_RMS_NORM: {
    int64_t ax = attr_int(n, "axis");
    ax = ax < 0 ? ax + rx : ax;
    for (int j = 0; j < rx; j++) {
      yt[j] = *dyn_axis(a, x, j);
      if (j >= ax && mixes_axis(a, n, x, j, DYN_UNSUPPORTED, "a norm over it"))
        return -1;
    }
    return 0;
  }
  case OP_CUMSUM: case OP_TRILU: case OP_BATCH_NORM: {
    /* a prefix sum reads earlier positions only (a reversed one, later ones: the padding
     * as 0); trilu and an inference batch norm are pointwise in position */
    int64_t ax = n->op == OP_CUMSUM ? attr_int(n, "axis") : -1;
    ax = ax < 0 && n->op == OP_CUMSUM ? ax + rx : ax;
    if (n->op == OP_CUMSUM && attr_int(n, "reverse") &&
        mixes_axis(a, n, x, (int)ax, DYN_MASK_ZERO, "a reversed cumulative sum along it"))
      return -1;
    for (int j = 0; j < rx && j < ry; j++)
      yt[j] = *dyn_axis(a, x, j);
    return 0;
  }
  case OP_EXPAND:
    return broadcast(a, n, y, 0, 1);
  case OP_GATHER: {
    const Value *idx = n->in[1];
    int64_t ax = attr_int(n, "axis");
    ax = ax < 0 ? ax + rx : ax;
    int ri = idx->type.shape.rank;
    if (dyn_tagged(dyn_axis(a, x, (int)ax))) {
      if (!gather_in_place(a, x, (int)ax, idx)) {
        if (mixes_axis(a, n, x, (int)ax, DYN_UNSUPPORTED, "a gather along it"))
          return -1;
      } else if (add_exact(a, idx)) {
        return -1;
      }
    }
    for (int j = 0; j < ry; j++) {
      const DynAxis *t = j < ax ? dyn_axis(a, x, j)
                         : j < ax + ri ? dyn_axis(a, idx, (int)(j - ax))
                                       : dyn_axis(a, x, (int)(j - ri + 1));
      if (t)
        yt[j] = *t;
    }
    return 0;
  }
  case OP_CONV: case OP_MAX_POOL: case OP_AVERAGE_POOL: case OP_CONV_TRANSPOSE:
  case OP_GLOBAL_AVERAGE_POOL: case OP_GLOBAL_MAX_POOL: case OP_INSTANCE_NORM: case OP_LRN: {
    /* the batch axis passes; the channels and the spatial axes combine */
    yt[0] = *dyn_axis(a, x, 0);
    for (int j = 1; j < rx; j++)
      if (mixes_axis(a, n, x, j, DYN_UNSUPPORTED, "a convolution, pool or norm across it"))
        return -1;
    for (int i = 1; i < n->nin; i++)
      for (int j = 0; n->in[i] && j < n->in[i]->type.shape.rank; j++)
        if (mixes_axis(a, n, n->in[i], j, DYN_UNSUPPORTED, "a ranged weight"))
          return -1;
    return 0;
  }
  case OP_CONCAT: case OP_SLICE: case OP_SPLIT: case OP_PAD: case OP_TILE: {
    /* the axis they join or split, and any whose extent they change or whose order a
     * slice reverses, must not be ranged; the others pass */
    int join = -1, len = 0;
    if (n->op == OP_CONCAT || n->op == OP_SPLIT) {
      int64_t ax = attr_int(n, "axis");
      join = (int)(ax < 0 ? ax + rx : ax);
    }
    /* a concat of one input that is not empty along the axis (a key cache with no past
     * yet) is that input */
    const Value *only = NULL;
    for (int i = 0; n->op == OP_CONCAT && i < n->nin; i++)
      if (n->in[i] && n->in[i]->type.shape.rank == ry && n->in[i]->type.shape.dims[join].n)
        only = only ? y : n->in[i];
    if (only && only != y) {
      for (int j = 0; j < ry; j++)
        yt[j] = *dyn_axis(a, only, j);
      return 0;
    }
    const int64_t *steps = n->op == OP_SLICE ? attr_ints(n, "steps", &len) : NULL;
    for (int j = 0; j < rx; j++) {
      bool cut = j == join || (n->op != OP_CONCAT && n->op != OP_SPLIT &&
                               x->type.shape.dims[j].n != y->type.shape.dims[j].n);
      for (int k = 0; steps && k < len; k++)
        cut = cut || steps[k] < 0;
      for (int i = 0; i < (n->op == OP_CONCAT ? n->nin : 1); i++)
        if (cut && mixes_axis(a, n, n->in[i], j, DYN_UNSUPPORTED,
                              "it joins, cuts, pads or reverses along it"))
          return -1;
    }
    if (n->op == OP_CONCAT)
      return broadcast(a, n, y, 0, n->nin);
    for (int k = 0; k < n->nout; k++)
      for (int j = 0; j < n->out[k]->type.shape.rank && j < rx; j++)
        if (j != join && n->out[k]->type.shape.dims[j].n == x->type.shape.dims[j].n)
          axes_of(a, n->out[k])[j] = *dyn_axis(a, x, j);
    return 0;
  }
  default:
    return unsupported(a, n, "an op this analysis does not know");
  }
}

int dyn_axes(const Graph *g, const DynSeed *seeds, int nseeds, DynAxes *out, Diag *d) {
  memset(out, 0, sizeof *out);
  out->nvalues = g->next_value_id;
  out->axes = malloc(((size_t)out->nvalues + 1) * IR_MAX_RANK * sizeof *out->axes);
  if (!out->axes)
    return diag_error(d, g->loc, "out of memory");
  for (size_t i = 0; i < ((size_t)out->nvalues + 1) * IR_MAX_RANK; i++)
    clear_axis(&out->axes[i]);
  for (int k = 0; k < nseeds; k++) {
    const DynSeed *s = &seeds[k];
    int sym = 0;
    while (sym < out->nsyms && strcmp(out->syms[sym], s->sym))
      sym++;
    if (sym == out->nsyms) {
      if (out->nsyms == DYN_MAX_SYMS) {
        dyn_axes_free(out);
        return diag_error(d, g->loc, "more than %d ranged dims", DYN_MAX_SYMS);
      }
      out->syms[sym] = s->sym;
      out->size[sym] = s->size;
      out->nsyms++;
    }
    const Value *v = s->value                                 ? s->value
                     : s->input >= 0 && s->input < g->ninputs ? g->inputs[s->input]
                                                              : NULL;
    if (!v || s->axis < 0 || s->axis >= v->type.shape.rank ||
        v->type.shape.dims[s->axis].n != s->size || s->size < 1 || v->id >= out->nvalues) {
      dyn_axes_free(out);
      return diag_error(d, g->loc, "ranged dim '%s': no %s axis %d of size %lld to start from",
                        s->sym, s->value ? "constant" : "input", s->axis, (long long)s->size);
    }
    DynAxis *t = &axes_of(out, v)[s->axis];
    clear_axis(t);
    if (s->size > 1) /* a class of size 1 has no padding: nothing to follow */
      t->t[0] = (DynTag){(int8_t)sym, 1};
  }
  for (int i = 0; i < g->nnodes; i++)
    if (one_node(out, g->nodes[i])) {
      dyn_axes_free(out);
      return diag_error(d, g->loc, "out of memory");
    }
  return 0;
}

void dyn_axes_free(DynAxes *a) {
  free(a->axes);
  free(a->mix);
  free(a->exact);
  memset(a, 0, sizeof *a);
}

const char *dyn_need_str(DynNeed need) {
  switch (need) {
  case DYN_MASK_ZERO: return "padding as 0";
  case DYN_MASK_NEG_INF: return "padding as -inf";
  case DYN_MASK_POS_INF: return "padding as +inf";
  case DYN_MASK_ONE: return "padding as 1";
  case DYN_MEAN: return "padding as 0, divided by the actual size";
  case DYN_UNSUPPORTED: return "not supported yet";
  }
  return "?";
}
