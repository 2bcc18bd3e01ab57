/* pad_mask.c: a graph bound at a class's sizes, run on inputs whose ranged axes hold an
 * actual size s and padding after it, gives the results of the graph bound at s in the
 * positions that are not padding (docs/dynamic-shapes.md, section 3).
 *
 * Each ranged symbol gets an input %<sym>.size (i64, a scalar): the actual size. dyn_axes
 * (ir/dynaxes.c) lists the nodes that combine elements along a ranged axis; before each,
 * the input it combines along is replaced by
 *     where(mask, x, neutral)   mask[p] = ((p / c) % M < s) for every symbol the axis carries
 * along that axis, the neutral element of what the node does: 0 for sums and a matmul's
 * K (both operands: 0 * NaN is NaN), -inf for max and softmax, +inf for min, 1 for a
 * product. A mean becomes a sum divided by the count of real positions. The masks are
 * selects, so padding that holds inf or NaN stays out. The other nodes leave padding in
 * padding: a pointwise op, a matmul's rows, a norm over another axis.
 *
 * A node the analysis cannot make exact (a concat along a ranged axis, a norm over it,
 * an op it does not know) is an error that names it. */
#include "passes/passes-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct PadMask {
  Graph *g;
  const DynAxes *a;
  Edit e;
  Value *size[DYN_MAX_SYMS]; /* the %<sym>.size inputs */
  Diag *d;
} PadMask;

/* An i64 constant [ext] of the symbols' indices (p / c) % M along an axis with tag t. */
static Value *index_const(PadMask *P, const Value *like, DynTag t, int64_t ext) {
  Tensor *x = tensor_in_arena(P->g->arena, DT_I64, 1, &ext);
  int64_t *v = x->data, M = P->a->size[t.sym];
  for (int64_t p = 0; p < ext; p++)
    v[p] = p / t.stride % M;
  return pass_add_const(P->g, like->name, "pos", x);
}

/* The mask of axis `axis` of x, shaped to broadcast onto x: bool [ext, 1, ..., 1]. */
static Value *axis_mask(PadMask *P, const Node *before, const Value *x, int axis) {
  const DynAxis *t = dyn_axis(P->a, x, axis);
  int r = x->type.shape.rank;
  int64_t ext = x->type.shape.dims[axis].n;
  Value *mask = NULL;
  for (int k = 0; t && k < DYN_AXIS_SYMS && t->t[k].sym >= 0; k++) {
    Value *in[2] = {index_const(P, x, t->t[k], ext), P->size[t->t[k].sym]};
    Value *m = pass_edit_insert_before(&P->e, before, OP_LESS, in, 2, NULL, 0, x->name, "valid", P->d);
    if (!m)
      return NULL;
    if (mask) {
      Value *both[2] = {mask, m};
      if (!(m = pass_edit_insert_before(&P->e, before, OP_AND, both, 2, NULL, 0, x->name, "valid", P->d)))
        return NULL;
    }
    mask = m;
  }
  if (!mask || axis == r - 1)
    return mask;
  int64_t shape[IR_MAX_RANK];
  shape[0] = ext;
  for (int j = 1; j < r - axis; j++)
    shape[j] = 1;
  Attr sh = attr_make_ints("shape", shape, r - axis);
  return pass_edit_insert_before(&P->e, before, OP_RESHAPE, &mask, 1, &sh, 1, x->name, "valid", P->d);
}

/* Node n's input k with its padding along `axis` replaced by v; tags: the value the
 * analysis saw there (the input may be masked already, along another axis). */
static int mask_input(PadMask *P, Node *n, int k, int axis, double v, const Value *tags) {
  Value *x = n->in[k];
  Value *mask = axis_mask(P, n, tags, axis);
  if (!mask)
    return P->d->failed ? -1
                        : diag_error(P->d, n->loc, "ranged dims: %%%s's axis %d has no ranged dim to "
                                     "mask", tags->name, axis);
  Tensor *c = tensor_in_arena(P->g->arena, x->type.dtype, 0, NULL);
  tensor_fill_value(c, v);
  Value *in[3] = {mask, x, pass_add_const(P->g, x->name, "pad", c)};
  Value *y = pass_edit_insert_before(&P->e, n, OP_WHERE, in, 3, NULL, 0, x->name, "masked", P->d);
  if (!y)
    return -1;
  pass_edit_set_input(&P->e, n, k, y);
  return 0;
}

/* reduce_mean n of x: the sum over the reduced axes, its input's padding 0, divided by
 * the real positions among them: (ext / M) * s over each ranged axis, ext over the rest. */
static int exact_mean(PadMask *P, Node *n) {
  Value *x = n->in[0];
  int r = x->type.shape.rank;
  bool red[IR_MAX_RANK];
  dyn_reduced_axes(n, r, red);
  int64_t fixed = 1;
  Value *count = NULL;
  Value *sum = pass_edit_insert_before(&P->e, n, OP_REDUCE_SUM, &x, 1, n->attrs, n->nattr,
                                       n->out[0]->name, "sum", P->d);
  if (!sum)
    return -1;
  for (int j = 0; j < r; j++) {
    if (!red[j])
      continue;
    int64_t ext = x->type.shape.dims[j].n;
    const DynAxis *t = dyn_axis(P->a, x, j);
    if (dyn_tagged(t) && mask_input(P, sum->def, 0, j, 0, x))
      return -1;
    for (int k = 0; t && k < DYN_AXIS_SYMS && t->t[k].sym >= 0; k++) {
      ext /= P->a->size[t->t[k].sym];
      Value *s = P->size[t->t[k].sym];
      if (count) {
        Value *in[2] = {count, s};
        if (!(count = pass_edit_insert_before(&P->e, n, OP_MUL, in, 2, NULL, 0, x->name, "count", P->d)))
          return -1;
      } else {
        count = s;
      }
    }
    fixed *= ext;
  }
  if (!count)
    return diag_error(P->d, n->loc, "ranged dims: the mean %%%s reduces no ranged axis",
                      n->out[0]->name);
  Tensor *f = tensor_in_arena(P->g->arena, DT_I64, 0, NULL);
  ((int64_t *)f->data)[0] = fixed;
  Value *in[2] = {count, pass_add_const(P->g, x->name, "fixed", f)};
  if (!(count = pass_edit_insert_before(&P->e, n, OP_MUL, in, 2, NULL, 0, x->name, "count", P->d)))
    return -1;
  Attr to = attr_make_string("to", dtype_name(n->out[0]->type.dtype));
  if (!(count = pass_edit_insert_before(&P->e, n, OP_CAST, &count, 1, &to, 1, x->name, "count", P->d)))
    return -1;
  Value *div[2] = {sum, count};
  pass_edit_rewrite(&P->e, n, OP_DIV, div, 2, NULL, 0);
  return 0;
}

static double neutral(DynNeed need) {
  return need == DYN_MASK_NEG_INF ? -INFINITY
         : need == DYN_MASK_POS_INF ? INFINITY
         : need == DYN_MASK_ONE     ? 1
                                    : 0;
}

/* Whether x's padding along `axis` is exactly 0 already: x is a softmax over that axis
 * whose input pad_mask masks with -inf there (exp(-inf) = 0, in a row whose real
 * scores are finite; a row of padding stays in padding). */
static bool zero_padded(const PadMask *P, const Value *x, int axis) {
  const Node *s = x->kind == VK_NODE ? x->def : NULL;
  if (!s || s->op != OP_SOFTMAX)
    return false;
  int64_t ax = attr_int(s, "axis");
  if ((ax < 0 ? ax + x->type.shape.rank : ax) != axis)
    return false;
  for (int i = 0; i < P->a->nmix; i++)
    if (P->a->mix[i].node == s && P->a->mix[i].axis == axis && P->a->mix[i].need == DYN_MASK_NEG_INF)
      return true;
  return false;
}

/* The matmul n's K axes masked with 0, both (the padding of one operand may be NaN, and
 * 0 * NaN is NaN), but for a masked softmax's output, whose padding is 0 already (so an
 * attention's probabilities go to the second matmul as they are). */
static int mask_matmul(PadMask *P, Node *n) {
  const Value *x = n->in[0], *b = n->in[1];
  int ra = x->type.shape.rank, rb = b->type.shape.rank;
  int kb = rb == 1 ? 0 : attr_int(n, "transpose_b") ? rb - 1 : rb - 2;
  if (!dyn_tagged(dyn_axis(P->a, x, ra - 1)) || !dyn_tagged(dyn_axis(P->a, b, kb)))
    return diag_error(P->d, n->loc, "ranged dims: the matmul %%%s has a ranged K in one "
                      "operand only, which is not supported yet", n->out[0]->name);
  return (!zero_padded(P, x, ra - 1) && mask_input(P, n, 0, ra - 1, 0, x)) ||
         (!zero_padded(P, b, kb) && mask_input(P, n, 1, kb, 0, b));
}

int pass_pad_mask(Graph *g, const DynAxes *a, Diag *d) {
  PadMask P = {.g = g, .a = a, .d = d};
  for (int s = 0; s < a->nsyms; s++) {
    char name[256];
    snprintf(name, sizeof name, "%s.size", a->syms[s]);
    Type t = {DT_I64, {0}};
    t.shape.rank = 0;
    if (!(P.size[s] = graph_add_input(g, name, t)))
      return diag_error(d, g->loc, "ranged dims: the graph already has a value named %%%s", name);
  }
  for (int i = 0; i < a->nmix; i++) {
    const DynMix *m = &a->mix[i];
    if (m->need == DYN_UNSUPPORTED)
      return diag_error(d, m->node->loc, "ranged dim '%s': node %%%s (%s): %s, which is not "
                        "supported yet", a->syms[m->sym], m->node->out[0]->name,
                        op_info[m->node->op].name, m->why);
  }
  pass_edit_begin(&P.e, g);
  int rc = 0;
  for (int i = 0; i < a->nmix && !rc; i++) {
    const DynMix *m = &a->mix[i];
    /* one mask an input axis, whatever symbols it carries; a matmul's operands and a
     * mean's axes all at once */
    bool seen = false;
    for (int k = 0; k < i && !seen; k++)
      seen = a->mix[k].node == m->node &&
             (m->node->op == OP_MATMUL || m->need == DYN_MEAN ||
              (a->mix[k].input == m->input && a->mix[k].axis == m->axis));
    if (seen)
      continue;
    Node *n = (Node *)m->node;
    rc = n->op == OP_MATMUL   ? mask_matmul(&P, n)
         : m->need == DYN_MEAN ? exact_mean(&P, n)
                               : mask_input(&P, n, m->input, m->axis, neutral(m->need), m->value);
  }
  pass_edit_end(&P.e);
  return rc ? -1 : 0;
}
