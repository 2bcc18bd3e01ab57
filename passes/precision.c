/* precision.c: --precision, the numeric type f32 math runs in.
 *
 *   fp32  nothing changes: the reference's answer up to f32 rounding.
 *   tf32  every f32 matmul and convolution gets tf32 = 1: cuBLASLt or the implicit GEMM
 *         forms the products on TF32 tensor cores (inputs rounded to 10-bit mantissas) and
 *         sums them in f32. Everything else stays f32.
 *   bf16, fp16
 *         the graph's f32 tensors are stored in the lower type: activations, and weights
 *         converted here once (rounded to nearest even; finite values beyond the type's
 *         range saturate to its largest, so a mask constant such as -3.4e38 stays a very
 *         negative number in fp16 instead of becoming -inf). Kernels load the lower type,
 *         compute in f32 (matmuls and convolutions accumulate in f32; softmax, the norms
 *         and every reduction sum in f32) and round once when they store. Graph inputs
 *         and outputs keep their types: a cast follows each f32 input and precedes each
 *         f32 output. At the edges, f32 stays where it saves a kernel: the pointwise
 *         nodes that only lead to f32 outputs (a classifier's bias add) compute in f32
 *         (output_tail), and a matmul read only in f32 writes f32 from its lowered
 *         operands (to = "f32", f32_readers).
 *         A lowered gelu computes its tanh approximation (approximate = "tanh"), which
 *         a GEMM before it applies in its epilogue (cuBLASLt's GELU_BIAS), where the
 *         erf form costs a pass over the hidden layer's activations. The two differ by
 *         at most 4.8e-4, under half a bf16 step for outputs of magnitude 1/8 and more;
 *         on normal inputs 2e-4 by norm, a tenth of bf16's own rounding (docs/precision.md).
 *   fp8   bf16 here; the quantize pass (quantize.c) then runs the linear layers on e4m3.
 *
 * A node is lowered when its op takes only data tensors (its parameters are attributes)
 * and its GPU kernel computes f16 and bf16 data in f32: the pointwise and layout ops,
 * matmul, conv, the reductions, softmax, the norms, pools, pad, resize. Other nodes
 * (range, cumsum, topk, one_hot, the losses...) and nodes that touch another float type
 * keep f32: their lowered inputs get a cast back to f32. A cast from f32 to an integer
 * keeps its f32 input too, since such a cast computes an index more often than data.
 * The lowered graph is a graph like any other: the reference executor runs it with
 * `gpucc run --cpu --precision=bf16`, rounding where the GPU rounds. */
#include "passes/passes-impl.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Each mode with the documented bound of its float outputs (docs/precision.md): the
 * relative error by norm, ||got - want|| / ||want||, against the fp32 answer. The one
 * copy of these numbers: `gpucc run --compare` takes its default --rtol from here, and
 * tests/precision.py reads this table for the Python tests. */
static const struct {
  const char *name;
  Precision p;
  double rel_by_norm;
} precisions[] = {
    {"fp32", PRECISION_FP32, 1e-4},   /* fp32 rounding only (issue 3's bound) */
    {"tf32", PRECISION_TF32, 1e-2},   /* products of 10-bit mantissas, sums in f32 */
    {"bf16", PRECISION_BF16, 5e-2},   /* 7-bit mantissas stored, f32 math and sums */
    {"fp16", PRECISION_FP16, 1e-2},   /* 10-bit mantissas stored, f32 math and sums */
    {"fp8", PRECISION_FP8, 1.5e-1},   /* e4m3 GEMM operands (3-bit mantissas, ~4% each),
                                         bf16 elsewhere */
};

int precision_parse(const char *s, Precision *out, Diag *d) {
  for (size_t i = 0; i < sizeof precisions / sizeof *precisions; i++)
    if (!strcmp(s, precisions[i].name)) {
      *out = precisions[i].p;
      return 0;
    }
  return diag_error(d, (SrcLoc){0}, "unknown precision '%s' (known: fp32, tf32, bf16, fp16, fp8)", s);
}

const char *precision_name(Precision p) {
  for (size_t i = 0; i < sizeof precisions / sizeof *precisions; i++)
    if (precisions[i].p == p)
      return precisions[i].name;
  return "?";
}

double precision_rel_bound(Precision p) {
  for (size_t i = 0; i < sizeof precisions / sizeof *precisions; i++)
    if (precisions[i].p == p)
      return precisions[i].rel_by_norm;
  return precisions[0].rel_by_norm;
}

int precision_check_passes(Precision p, const Pass *const *passes, int n, Diag *d) {
  int lowers = -1, quantizes = -1;
  for (int i = 0; i < n; i++) {
    if (passes[i] == &pass_precision && lowers < 0)
      lowers = i;
    if (passes[i] == &pass_quantize)
      quantizes = i;
  }
  if (p == PRECISION_FP32)
    return 0;
  if (lowers < 0)
    return diag_error(d, (SrcLoc){0}, "--precision=%s needs the precision pass, which the "
                      "pass list leaves out", precision_name(p));
  if (p == PRECISION_FP8 && quantizes < lowers)
    return diag_error(d, (SrcLoc){0}, "--precision=fp8 needs the quantize pass after the "
                      "precision pass in the pass list");
  return 0;
}

/* Ops whose tensor inputs are all data and whose kernels compute f16/bf16 in f32. */
static bool op_lowers(Op op) {
  if (op_info[op].flags & (OPF_POINTWISE | OPF_LAYOUT))
    return true;
  switch (op) {
  case OP_MATMUL: case OP_CONV: case OP_CONV_TRANSPOSE:
  case OP_REDUCE_SUM: case OP_REDUCE_MEAN: case OP_REDUCE_MAX: case OP_REDUCE_MIN:
  case OP_REDUCE_L1: case OP_REDUCE_L2: case OP_REDUCE_SUM_SQUARE: case OP_REDUCE_LOG_SUM_EXP:
  case OP_ARGMAX: case OP_ARGMIN: case OP_SOFTMAX: case OP_LOG_SOFTMAX: case OP_LAYER_NORM:
  case OP_RMS_NORM:
  case OP_MAX_POOL: case OP_AVERAGE_POOL: case OP_GLOBAL_AVERAGE_POOL: case OP_GLOBAL_MAX_POOL:
  case OP_BATCH_NORM: case OP_INSTANCE_NORM: case OP_PAD: case OP_RESIZE: case OP_TRILU:
    return true;
  default:
    return false;
  }
}

/* Whether node n runs in the lower type: an op that lowers, touching f32 and no other
 * float type; a cast only when it makes f32 (its `to` becomes the lower type). */
static bool lowers(const Node *n) {
  if (!op_lowers(n->op))
    return false;
  bool f32 = false;
  for (int i = 0; i < n->nin + n->nout; i++) {
    const Value *v = i < n->nin ? n->in[i] : n->out[i - n->nin];
    if (!v)
      continue;
    DType t = v->type.dtype;
    f32 = f32 || t == DT_F32;
    if (dtype_is_float(t) && t != DT_F32 && !(n->op == OP_CAST && i == 0))
      return false;
  }
  if (n->op == OP_CAST)
    return n->out[0]->type.dtype == DT_F32;
  return f32;
}

/* Whether lowered node n is part of an output tail: pointwise, making one f32 value
 * that only f32 graph outputs and other tail nodes read (tail, by node id, filled from
 * the graph's end). A tail computes in f32 from its lowered inputs: the output needs f32
 * anyway, the rounding to the lower type in between is saved, and a matmul's bias add
 * in the tail stays a bias epilogue of a GEMM that writes f32 (fuse.c). */
static bool output_tail(const Graph *g, const Users *u, int at, const bool *tail) {
  const Node *n = g->nodes[at];
  if (!(op_info[n->op].flags & OPF_POINTWISE) || n->nout != 1 || n->out[0]->type.dtype != DT_F32)
    return false;
  const Value *y = n->out[0];
  int nr;
  const int *r = users_of(u, y, &nr);
  for (int k = 0; k < nr; k++)
    if (!tail[g->nodes[r[k]]->id])
      return false;
  return nr || u->outputs[y->id];
}

/* Whether the f32 output of node n (at position at) is read only by nodes that keep f32
 * (low_node false: an output tail, an op that does not lower) and graph outputs: a
 * lowered matmul then writes f32 itself (to = "f32": cuBLASLt's D in f32 from 16-bit
 * operands), instead of rounding to the lower type and casting back. */
static bool f32_readers(const Graph *g, const Users *u, int at, const bool *low_node) {
  int nr;
  const int *r = users_of(u, g->nodes[at]->out[0], &nr);
  for (int k = 0; k < nr; k++)
    if (low_node[g->nodes[r[k]]->id])
      return false;
  return true;
}

/* The largest finite value of the lower type. */
static double type_max(DType t) { return t == DT_F16 ? 65504.0 : 0x1.fep127; }

typedef struct Lowering {
  Graph *g;
  DType low;
  const char *low_name;
  Value **low_of; /* by value id: the value's lower-type twin (a cast or a converted constant) */
  Value **f32_of; /* by value id: a lowered value's cast back to f32 */
  int casts, consts;
} Lowering;

/* "<base>.<suffix>", or a fresh numbered name when that is taken. */
static const char *twin_name(const Graph *g, const char *base, const char *suffix, char *buf,
                             size_t n) {
  snprintf(buf, n, "%s.%s", base, suffix);
  return graph_find_value(g, buf) ? NULL : buf;
}

static Value *add_cast(Lowering *L, Value *x, DType to) {
  char name[512];
  Attr a = attr_make_string("to", dtype_name(to));
  const char *nm[1] = {twin_name(L->g, x->name, dtype_name(to), name, sizeof name)};
  Node *c = graph_add_node(L->g, OP_CAST, &x, 1, &a, 1, nm, 1);
  c->out[0]->type = x->type;
  c->out[0]->type.dtype = to;
  L->casts++;
  return c->out[0];
}

/* Constant c in the lower type, saturating finite values beyond its range. */
static Value *convert_const(Lowering *L, const Value *c) {
  Tensor *t = tensor_in_arena(L->g->arena, L->low, c->data->rank, c->data->dims);
  int64_t n = tensor_numel(t);
  double max = type_max(L->low);
  const float *x = (const float *)c->data->data;
  if (L->low == DT_BF16) { /* a model's weights: f32's upper half, rounded */
    uint16_t *y = (uint16_t *)t->data;
    for (int64_t i = 0; i < n; i++)
      y[i] = f32_to_bf16(isfinite(x[i]) && fabs(x[i]) > max ? (float)copysign(max, x[i]) : x[i]);
  } else {
    for (int64_t i = 0; i < n; i++) {
      double v = dtype_load_f64(DT_F32, x + i);
      if (isfinite(v) && fabs(v) > max)
        v = copysign(max, v);
      dtype_store_f64(L->low, (char *)t->data + (size_t)i * dtype_size(L->low), v);
    }
  }
  char name[512];
  Value *v = graph_add_const(L->g, twin_name(L->g, c->name, L->low_name, name, sizeof name), t);
  L->consts++;
  return v;
}

/* v (f32) as the lowered node's input: a lowered node's output already is; otherwise
 * its twin, made once. */
static Value *low_input(Lowering *L, Value *v) {
  if (v->type.dtype != DT_F32) /* not f32, or lowered already */
    return v;
  if (L->low_of[v->id])
    return L->low_of[v->id];
  Value *t = v->kind == VK_CONST ? convert_const(L, v) : add_cast(L, v, L->low);
  L->low_of[v->id] = t;
  return t;
}

/* v (a lowered node's output) for a node that keeps f32: a cast back, made once. */
static Value *f32_input(Lowering *L, Value *v) {
  if (!L->f32_of[v->id])
    L->f32_of[v->id] = add_cast(L, v, DT_F32);
  return L->f32_of[v->id];
}

/* A graph output made by a node that will be lowered keeps its name and f32: the node
 * makes "<name>.<low>" instead (lowered with the node), and a cast placed right after
 * the node makes the output from it (so the cast can join the node's kernel before the
 * node's other readers run: fuse's side outputs). Every reader takes the new value;
 * readers that keep f32 will take the output itself (f32_of). */
static void keep_output(Lowering *L, const Users *u, Value *y) {
  Graph *g = L->g;
  char name[512];
  const char *nm[1] = {twin_name(g, y->name, L->low_name, name, sizeof name)};
  Attr a = attr_make_string("to", "f32");
  Node *c = graph_add_node(g, OP_CAST, &y, 1, &a, 1, nm, 1);
  Value *low = c->out[0];
  int nr;
  const int *r = users_of(u, y, &nr); /* positions of the graph before any cast was added */
  for (int k = 0; k < nr; k++)
    for (int j = 0; j < g->nodes[r[k]]->nin; j++)
      if (g->nodes[r[k]]->in[j] == y)
        g->nodes[r[k]]->in[j] = low;
  /* swap the two values' places: y's node makes `low`, the cast reads it and makes y */
  Node *p = y->def;
  low->def = p;
  low->def_index = y->def_index;
  low->type = y->type;
  p->out[y->def_index] = low;
  c->in[0] = low;
  c->out[0] = y;
  y->def = c;
  y->def_index = 0;
  L->f32_of[low->id] = y;
  L->casts++;
}

/* Moves each graph output's cast made by keep_output (appended) to just after the node
 * that makes its input (a later output's cast in front of an earlier one's); toposort
 * keeps it there. One pass over the nodes. */
static int place_output_casts(Graph *g, int ids) {
  Node **order = malloc(sizeof *order * (size_t)(g->nnodes + 1));
  int *first = malloc(sizeof *first * (size_t)(g->next_node_id + 1));
  int *next = malloc(sizeof *next * (size_t)(g->noutputs + 1));
  bool *moved = calloc((size_t)g->next_node_id + 1, sizeof *moved);
  if (!order || !first || !next || !moved) {
    free(order), free(first), free(next), free(moved);
    return -1;
  }
  for (int id = 0; id < g->next_node_id; id++)
    first[id] = -1;
  for (int i = 0; i < g->noutputs; i++) {
    Node *c = g->outputs[i]->kind == VK_NODE ? g->outputs[i]->def : NULL;
    if (!c || c->id < ids || c->op != OP_CAST || c->in[0]->kind != VK_NODE || moved[c->id])
      continue;
    moved[c->id] = true; /* an output listed twice: its cast once */
    next[i] = first[c->in[0]->def->id];
    first[c->in[0]->def->id] = i;
  }
  int n = 0;
  for (int i = 0; i < g->nnodes; i++) {
    if (moved[g->nodes[i]->id])
      continue;
    order[n++] = g->nodes[i];
    for (int k = first[g->nodes[i]->id]; k >= 0; k = next[k])
      order[n++] = g->outputs[k]->def;
  }
  if (n) /* g->nodes is NULL in a graph of no nodes */
    memcpy(g->nodes, order, sizeof *order * (size_t)n);
  free(order), free(first), free(next), free(moved);
  return 0;
}

static int lower_graph(Graph *g, PassContext *ctx, DType low) {
  Lowering L = {.g = g, .low = low, .low_name = dtype_name(low)};
  /* ids of the twins made below stay under this bound: at most one cast or constant per
   * value and kind, and one per output */
  size_t cap = (size_t)g->next_value_id * 3 + (size_t)g->noutputs + 1;
  L.low_of = calloc(cap, sizeof *L.low_of);
  L.f32_of = calloc(cap, sizeof *L.f32_of);
  bool *low_node = calloc((size_t)g->next_node_id + 1, sizeof *low_node);
  bool *tail = calloc((size_t)g->next_node_id + 1, sizeof *tail);
  bool *wide = calloc((size_t)g->next_node_id + 1, sizeof *wide);
  if (!L.low_of || !L.f32_of || !low_node || !tail || !wide) {
    free(L.low_of);
    free(L.f32_of);
    free(low_node);
    free(tail);
    free(wide);
    return diag_error(ctx->diag, g->loc, "precision: out of memory");
  }
  Users u;
  if (users_build(g, &u)) {
    free(L.low_of), free(L.f32_of), free(low_node), free(tail), free(wide);
    return diag_error(ctx->diag, g->loc, "precision: out of memory");
  }
  for (int i = 0; i < g->nnodes; i++)
    low_node[g->nodes[i]->id] = lowers(g->nodes[i]);
  for (int i = g->nnodes - 1; i >= 0; i--)
    if (low_node[g->nodes[i]->id] && output_tail(g, &u, i, tail)) {
      tail[g->nodes[i]->id] = true;
      low_node[g->nodes[i]->id] = false;
    }
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    wide[n->id] = n->op == OP_MATMUL && low_node[n->id] && n->out[0]->type.dtype == DT_F32 &&
                  f32_readers(g, &u, i, low_node);
  }
  int nodes = g->nnodes, lowered = 0, gelus = 0, ids = g->next_node_id;
  for (int i = 0; i < g->noutputs; i++) {
    Value *y = g->outputs[i];
    /* once, even when y is listed twice (its node is the cast after the first) */
    if (y->kind == VK_NODE && y->def->id < ids && low_node[y->def->id] &&
        !wide[y->def->id] && y->type.dtype == DT_F32)
      keep_output(&L, &u, y);
  }
  users_free(&u);
  for (int i = 0; i < nodes; i++) {
    Node *n = g->nodes[i];
    if (!low_node[n->id]) {
      /* keeps f32: inputs a lowered node made come back as f32 */
      for (int j = 0; j < n->nin; j++) {
        Value *v = n->in[j];
        if (v && L.low_of[v->id] == v)
          n->in[j] = f32_input(&L, v);
      }
      continue;
    }
    lowered++;
    for (int j = 0; j < n->nin; j++)
      if (n->in[j] && n->op != OP_CAST) /* a cast converts whatever it reads */
        n->in[j] = low_input(&L, n->in[j]);
    if (wide[n->id])
      node_set_attr(g, n, attr_make_string("to", "f32"));
    for (int j = 0; j < n->nout && !wide[n->id]; j++)
      if (n->out[j]->type.dtype == DT_F32) {
        n->out[j]->type.dtype = low;
        L.low_of[n->out[j]->id] = n->out[j]; /* marks it lowered */
      }
    if (n->op == OP_CAST)
      node_set_attr(g, n, attr_make_string("to", L.low_name));
    if (n->op == OP_MATMUL || n->op == OP_CONV)
      node_remove_attr(n, "tf32");
    if (n->op == OP_GELU && strcmp(attr_string(n, "approximate"), "tanh")) {
      node_set_attr(g, n, attr_make_string("approximate", "tanh"));
      gelus++;
    }
  }
  /* converted constants leave their f32 originals unused unless a node kept them */
  bool *keep_const = malloc((size_t)g->next_value_id + 1);
  bool *keep = malloc((size_t)g->next_node_id + 1);
  int rc = 0;
  if (!keep_const || !keep) {
    rc = diag_error(ctx->diag, g->loc, "precision: out of memory");
  } else {
    memset(keep, 1, (size_t)g->next_node_id + 1);
    /* keep_const[id]: read by a node or the graph's outputs, for the f32 constants */
    memset(keep_const, 0, (size_t)g->next_value_id + 1);
    for (int i = 0; i < g->nnodes; i++)
      for (int k = 0; k < g->nodes[i]->nin; k++)
        if (g->nodes[i]->in[k])
          keep_const[g->nodes[i]->in[k]->id] = true;
    for (int i = 0; i < g->noutputs; i++)
      keep_const[g->outputs[i]->id] = true;
    for (int i = 0; i < g->nconsts; i++)
      if (g->consts[i]->type.dtype != DT_F32)
        keep_const[g->consts[i]->id] = true;
    graph_retain(g, keep, keep_const);
    /* the other casts were appended: toposort moves each before its first reader */
    rc = place_output_casts(g, ids) ? diag_error(ctx->diag, g->loc, "precision: out of memory")
         : ir_toposort(g, ctx->diag) || ir_infer(g, ctx->diag) ? -1 : 0;
  }
  free(keep_const);
  free(keep);
  free(L.low_of);
  free(L.f32_of);
  free(low_node);
  free(tail);
  free(wide);
  ctx->changes += lowered + L.casts;
  if (!rc)
    snprintf(ctx->note, sizeof ctx->note,
             "%s: %d nodes lowered, %d constants converted, %d casts, %d gelus to tanh",
             precision_name(ctx->precision), lowered, L.consts, L.casts, gelus);
  return rc;
}

static int mark_tf32(Graph *g, PassContext *ctx) {
  int mm = 0, conv = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *m = g->nodes[i];
    if ((m->op == OP_MATMUL || m->op == OP_CONV) && m->in[0]->type.dtype == DT_F32 &&
        !attr_int(m, "tf32")) {
      node_set_attr(g, m, attr_make_int("tf32", 1));
      *(m->op == OP_MATMUL ? &mm : &conv) += 1;
    }
  }
  ctx->changes += mm + conv;
  snprintf(ctx->note, sizeof ctx->note, "tf32: %d matmuls, %d convolutions", mm, conv);
  return 0;
}

static int run_precision(Graph *g, PassContext *ctx) {
  switch (ctx->precision) {
  case PRECISION_FP32: return 0;
  case PRECISION_TF32: return mark_tf32(g, ctx);
  case PRECISION_BF16: return lower_graph(g, ctx, DT_BF16);
  case PRECISION_FP16: return lower_graph(g, ctx, DT_F16);
  case PRECISION_FP8: return lower_graph(g, ctx, DT_BF16); /* then quantize.c */
  }
  return 0;
}

const Pass pass_precision = {
    .name = "precision",
    .summary = "f32 math in the type --precision names: tf32 matmuls and convolutions, or "
               "bf16/fp16 tensors with f32 accumulation (weights converted at compile time)",
    .run = run_precision,
};
