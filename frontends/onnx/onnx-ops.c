/* onnx-ops.c: the ONNX op table. Each row maps an ONNX op to a builder that adds one
 * or more IR nodes for a node of the model; onnx_unsupported says, before any work, why a
 * node cannot be compiled. docs/onnx.md lists what is supported. */
#include "onnx-impl.h"

#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- attributes */

static const Onnx__AttributeProto *find_attr(const Onnx__NodeProto *np, const char *name) {
  for (size_t i = 0; i < np->n_attribute; i++)
    if (!strcmp(S(np->attribute[i]->name), name))
      return np->attribute[i];
  return NULL;
}

/* The attribute's kind: its declared type, or for models that leave it out (IR version
 * 1), whichever field is set. */
static int attr_type(const Onnx__AttributeProto *a) {
  if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
    return a->type;
  if (a->has_f)
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
  if (a->has_i)
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  if (a->has_s)
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
  if (a->t)
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
  if (a->n_ints)
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
  if (a->n_floats)
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
  return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

static int get_int(Loader *L, const Onnx__NodeProto *np, const char *name, int64_t def,
                   int64_t *out) {
  const Onnx__AttributeProto *a = find_attr(np, name);
  *out = def;
  if (!a)
    return 0;
  if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
    return FAIL("attribute '%s' must be an int", name);
  *out = a->i;
  return 0;
}

static int need_int(Loader *L, const Onnx__NodeProto *np, const char *name, int64_t *out) {
  if (!find_attr(np, name))
    return FAIL("missing attribute '%s'", name);
  return get_int(L, np, name, 0, out);
}

static int get_float(Loader *L, const Onnx__NodeProto *np, const char *name, double def,
                     double *out) {
  const Onnx__AttributeProto *a = find_attr(np, name);
  *out = def;
  if (!a)
    return 0;
  if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT)
    return FAIL("attribute '%s' must be a float", name);
  *out = a->f;
  return 0;
}

/* ints attribute; *n = -1 when absent. */
static int get_ints(Loader *L, const Onnx__NodeProto *np, const char *name, const int64_t **v,
                    int *n) {
  const Onnx__AttributeProto *a = find_attr(np, name);
  *v = NULL;
  *n = -1;
  if (!a)
    return 0;
  int t = attr_type(a);
  if (t != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS &&
      !(t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED && !a->n_ints))
    return FAIL("attribute '%s' must be a list of ints", name);
  if (a->n_ints > INT_MAX / 16)
    return FAIL("attribute '%s' is too long", name);
  *v = a->ints;
  *n = (int)a->n_ints;
  return 0;
}

/* ---------------------------------------------------------------- building blocks */

static Value *input(Loader *L, const Onnx__NodeProto *np, size_t i) {
  if (i >= np->n_input || !np->input[i] || !*np->input[i])
    return NULL;
  return graph_find_value(L->g, np->input[i]);
}

/* A name for an intermediate value of a node that becomes several IR nodes: the node's
 * first output with a suffix, clashing with nothing in the graph or in the model. Names
 * are never given back while loading, so the suffixes count on from the last one taken
 * (a Sum of 20,000 inputs tries each once): per node, and across the nodes that have no
 * output name. A first output longer than the buffer is cut and tagged with the node's
 * index, so that nodes whose names share a long prefix do not count through each
 * other's temporaries. */
static const char *tmp_name(Loader *L, const Onnx__NodeProto *np, char *buf, size_t n) {
  const char *base = output_name(np, 0);
  if (L->tmp_node != np) {
    L->tmp_node = np;
    L->tmp_next = 1;
  }
  int *next = base ? &L->tmp_next : &L->tmp_anon;
  if (*next < 1)
    *next = 1;
  for (;; ++*next) {
    if (!base)
      snprintf(buf, n, "tmp.%d", *next);
    else if (strlen(base) > 200)
      snprintf(buf, n, "%.200s~%d.%d", base, L->cur, *next);
    else
      snprintf(buf, n, "%s.%d", base, *next);
    if (!graph_find_value(L->g, buf) && !onnx_map_get(&L->producers, buf)) {
      ++*next;
      return buf;
    }
  }
}

static void mark_node(Loader *L, Node *n) {
  n->origin = L->origin;
  n->loc = (SrcLoc){.file = L->path};
}

/* Folding at load keeps shape computations out of the graph; it gives up on a result
 * much bigger than its inputs (a ConstantOfShape the size of an activation), which then
 * stays a node, and once the folded bytes reach the weight limit. */
enum { FOLD_GROWTH_BYTES = 1 << 20 };

/* Evaluates `probe` on its constant inputs and adds its outputs as constants named nm[].
 * Returns 1 when folded, 0 when the node should be built instead, -1 on error. */
static int fold(Loader *L, const Node *probe, const Type *types, const char *const *nm,
                Value **outs) {
  uint64_t in_bytes = 0, out_bytes = 0;
  for (int i = 0; i < probe->nin; i++) {
    if (probe->in[i] && probe->in[i]->kind != VK_CONST)
      return 0;
    if (probe->in[i])
      in_bytes += tensor_nbytes(probe->in[i]->data);
  }
  for (int i = 0; i < probe->nout; i++) {
    int64_t numel = shape_numel(&types[i].shape);
    if (numel < 0)
      return 0;
    out_bytes += (uint64_t)numel * dtype_size(types[i].dtype);
  }
  /* Folded results count against their own budget, the size of the weight limit, so a
   * model cannot make the loader allocate without bound by folding; and the work of
   * evaluating them against the executor's budget, so it cannot stall the loader. */
  double work = ir_eval_work(probe, types);
  if (!probe->nin || out_bytes > in_bytes + FOLD_GROWTH_BYTES ||
      out_bytes > L->weight_limit - L->folded_bytes || !(work <= IR_FOLD_NODE_WORK) ||
      !(work <= IR_FOLD_TOTAL_WORK - L->folded_work))
    return 0;
  L->folded_bytes += out_bytes;
  L->folded_work += work;
  Tensor **in = calloc((size_t)probe->nin + (size_t)probe->nout + 1, sizeof *in);
  Tensor **out = in ? in + probe->nin : NULL;
  Diag local = {0};
  if (!in)
    return FAIL("out of memory");
  for (int i = 0; i < probe->nin; i++)
    in[i] = probe->in[i] ? probe->in[i]->data : NULL;
  if (ir_eval_node(probe, in, out, &local)) {
    free(in);
    return FAIL("%s", bare_message(&local));
  }
  int rc = 1;
  for (int i = 0; i < probe->nout && rc == 1; i++) {
    Tensor *t = tensor_in_arena(L->g->arena, out[i]->dtype, out[i]->rank, out[i]->dims);
    memcpy(t->data, out[i]->data, tensor_nbytes(t));
    Value *v = graph_add_const(L->g, nm[i], t);
    if (!v)
      rc = FAIL("value '%s' is already defined", nm[i]);
    else if (outs)
      outs[i] = v;
  }
  for (int i = 0; i < probe->nout; i++)
    tensor_free(out[i]);
  free(in);
  return rc;
}

/* Adds one IR node with nout outputs; names NULL give intermediates. Types are inferred
 * before the node joins the graph, so a failure leaves the graph as it was. A node whose
 * inputs are all constants becomes constants instead. */
static int emit_multi(Loader *L, const Onnx__NodeProto *np, Op op, Value **in, int nin,
                      const Attr *at, int na, const char *const *names, int nout,
                      Value **outs) {
  Node probe = {.id = -1, .op = op, .nin = nin, .in = in, .nout = nout, .nattr = na,
                .attrs = (Attr *)at, .loc = {.file = L->path}};
  Diag local = {0};
  /* The types, names and each temporary's name buffer, in one block: the graph owns a
   * name once the node is added, so a temporary's buffer is needed only until then. */
  typedef char NameBuf[256];
  size_t each = sizeof(Type) + sizeof(const char *) + sizeof(NameBuf);
  char *block = malloc(each * (size_t)(nout > 0 ? nout : 1));
  if (!block)
    return FAIL("out of memory");
  Type *types = (Type *)(void *)block;
  NameBuf *bufs = (NameBuf *)(void *)(types + nout);
  const char **nm = (const char **)(void *)(bufs + nout);
  int rc = 0;
  if (ir_infer_node(&probe, types, &local)) {
    free(block);
    return FAIL("%s", bare_message(&local));
  }
  for (int i = 0; i < nout; i++) {
    nm[i] = names ? names[i] : NULL;
    if (!nm[i])
      nm[i] = tmp_name(L, np, bufs[i], sizeof bufs[i]);
  }
  int folded = fold(L, &probe, types, nm, outs);
  Node *n = folded ? NULL : graph_add_node(L->g, op, in, nin, at, na, nm, nout);
  if (folded) {
    rc = folded < 0 ? -1 : 0;
  } else if (!n) {
    rc = FAIL("an output name is already defined");
  } else {
    mark_node(L, n);
    for (int i = 0; i < nout; i++) {
      n->out[i]->type = types[i];
      if (outs)
        outs[i] = n->out[i];
    }
  }
  free(block);
  return rc;
}

static Value *emit(Loader *L, const Onnx__NodeProto *np, Op op, Value **in, int nin,
                   const Attr *at, int na, const char *name) {
  Value *v = NULL;
  const char *names[1] = {name};
  return emit_multi(L, np, op, in, nin, at, na, names, 1, &v) ? NULL : v;
}

static Value *scalar_const(Loader *L, const Onnx__NodeProto *np, DType dt, double x) {
  char buf[256];
  Tensor *t = tensor_in_arena(L->g->arena, dt, 0, NULL);
  dtype_store_f64(dt, t->data, x);
  return graph_add_const(L->g, tmp_name(L, np, buf, sizeof buf), t);
}

/* The elements of constant input i as int64 (for shapes, axes, starts...). *n = -1 when
 * the optional input is absent. */
static int const_ints(Loader *L, const Onnx__NodeProto *np, size_t i, const char *what,
                      int64_t **out, int *n) {
  Value *v = input(L, np, i);
  *out = NULL;
  *n = -1;
  if (!v)
    return 0;
  if (v->kind != VK_CONST)
    return FAIL("input '%s' (%s) must be a constant: gpucc does not compute %s at run time",
                v->name, what, what);
  if (!dtype_is_int(v->data->dtype) || v->data->rank > 1)
    return FAIL("input '%s' (%s) must be a 1-D integer tensor", v->name, what);
  int64_t cnt = tensor_numel(v->data);
  if (cnt > 4096)
    return FAIL("input '%s' (%s) has too many elements (%" PRId64 ")", v->name, what, cnt);
  *out = arena_alloc(L->g->arena, sizeof(int64_t) * (size_t)(cnt ? cnt : 1));
  for (int64_t k = 0; k < cnt; k++)
    (*out)[k] = dtype_load_i64(v->data->dtype, (char *)v->data->data + k * (int64_t)dtype_size(v->data->dtype));
  *n = (int)cnt;
  return 0;
}

static int const_scalar(Loader *L, const Onnx__NodeProto *np, size_t i, const char *what,
                        double *out) {
  Value *v = input(L, np, i);
  if (!v)
    return 0;
  if (v->kind != VK_CONST || tensor_numel(v->data) != 1)
    return FAIL("input '%s' (%s) must be a constant scalar; a computed %s is not supported",
                v->name, what, what);
  *out = dtype_load_f64(v->data->dtype, v->data->data);
  return 0;
}

/* Every input present, with as many as the IR op takes. */
static int plain_inputs(Loader *L, const Onnx__NodeProto *np, Op op, Value **in, int max) {
  int n = (int)np->n_input;
  int lo = op_info[op].min_in, hi = op_info[op].max_in;
  if (n < lo || (hi >= 0 && n > hi) || n > max)
    return FAIL("expects %d%s inputs, got %d", lo, hi == lo ? "" : " or more", n);
  for (int i = 0; i < n; i++)
    if (!(in[i] = input(L, np, (size_t)i)))
      return FAIL("input %d is missing", i);
  return n;
}

/* ---------------------------------------------------------------- op builders */

/* Attributes of old op versions that change nothing here: consumed_inputs told the
 * runtimes of opsets 1 to 5 which inputs an op could overwrite. */
static const char *const ignored_attrs = "consumed_inputs";

static bool in_list(const char *list, const char *name);

/* Attribute defaults of old op versions that differ from the IR op's (which are the
 * newest version's): b_simple passes them when the node leaves the attribute out. */
static const struct {
  const char *op, *attr;
  int before; /* the versions before this one had the default */
  double value;
} old_defaults[] = {
    {"Selu", "alpha", 6, 1.67320001125335693359375}, /* 1.6732f */
    {"Selu", "gamma", 6, 1.0506999492645263671875},  /* 1.0507f */
};

/* Ops that map one to one, copying the attributes the table lists by the same name. */
static int b_simple(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *in[8];
  int nin = plain_inputs(L, np, e->op, in, 8);
  if (nin < 0)
    return -1;
  Attr at[4];
  int na = 0;
  for (size_t k = 0; k < sizeof old_defaults / sizeof *old_defaults && na < 4; k++)
    if (!strcmp(S(np->op_type), old_defaults[k].op) && L->ver < old_defaults[k].before &&
        !find_attr(np, old_defaults[k].attr))
      at[na++] = attr_make_float(old_defaults[k].attr, old_defaults[k].value);
  for (size_t i = 0; i < np->n_attribute && na < 4; i++) {
    const Onnx__AttributeProto *a = np->attribute[i];
    if (in_list(ignored_attrs, S(a->name)))
      continue;
    const char *name = arena_strdup(L->g->arena, S(a->name));
    switch (attr_type(a)) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: at[na++] = attr_make_float(name, a->f); break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: at[na++] = attr_make_int(name, a->i); break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
      at[na++] = attr_make_string(name, arena_strndup(L->g->arena, (const char *)a->s.data, a->s.len));
      break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS: {
      int64_t *v = arena_alloc(L->g->arena, sizeof(int64_t) * (a->n_ints + 1));
      if (a->n_ints) /* protobuf-c leaves an empty list NULL, which memcpy must not see */
        memcpy(v, a->ints, sizeof(int64_t) * a->n_ints);
      at[na++] = attr_make_ints(name, v, (int)a->n_ints);
      break;
    }
    default: return FAIL("attribute '%s' has a kind gpucc does not read here", name);
    }
  }
  return emit(L, np, e->op, in, nin, at, na, output_name(np, 0)) ? 0 : -1;
}

/* Versions before 7 of the binary ops broadcast only with broadcast=1, and then B onto
 * A: by suffix (numpy's rule, which the IR applies), or with `axis`, B's dims matching A's
 * from that axis on, so B gets trailing dims of 1. Without broadcast=1 the shapes must
 * agree, which numpy's rule accepts too. Returns B as the IR should take it. */
static Value *legacy_broadcast(Loader *L, const Onnx__NodeProto *np, Value *a, Value *b) {
  int64_t bc, axis;
  if (L->ver >= 7 || !find_attr(np, "axis"))
    return b;
  if (get_int(L, np, "broadcast", 0, &bc) || get_int(L, np, "axis", 0, &axis))
    return NULL;
  if (!bc)
    return b;
  int ra = a->type.shape.rank, rb = b->type.shape.rank;
  if (axis < -ra || axis >= ra || (axis < 0 ? axis + ra : axis) + rb > ra) {
    FAIL("broadcast axis %" PRId64 ": B of rank %d does not fit into A of rank %d there",
         axis, rb, ra);
    return NULL;
  }
  int n = ra - rb - (int)(axis < 0 ? axis + ra : axis);
  int64_t axes[IR_MAX_RANK];
  for (int i = 0; i < n; i++)
    axes[i] = rb + i;
  Attr at = attr_make_ints("axes", axes, n);
  return n ? emit(L, np, OP_UNSQUEEZE, &b, 1, &at, 1, NULL) : b;
}

/* Add, Sub, Mul, Div, the comparisons and the logical ops. */
static int b_binary(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *in[2];
  if (plain_inputs(L, np, e->op, in, 2) < 0 || !(in[1] = legacy_broadcast(L, np, in[0], in[1])))
    return -1;
  return emit(L, np, e->op, in, 2, NULL, 0, output_name(np, 0)) ? 0 : -1;
}

/* PRelu before version 7 has one slope per channel (dim 1 of X) or one for all; from 7 the
 * slope broadcasts onto X by numpy's rule, which would put a 1-D slope on the last dim. */
static int b_prelu(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *in[2];
  if (plain_inputs(L, np, e->op, in, 2) < 0)
    return -1;
  int r = in[0]->type.shape.rank;
  if (L->ver < 7 && in[1]->type.shape.rank == 1 && r > 2) {
    int64_t axes[IR_MAX_RANK];
    for (int i = 0; i < r - 2; i++)
      axes[i] = i + 1;
    Attr at = attr_make_ints("axes", axes, r - 2);
    if (!(in[1] = emit(L, np, OP_UNSQUEEZE, &in[1], 1, &at, 1, NULL)))
      return -1;
  }
  return emit(L, np, e->op, in, 2, NULL, 0, output_name(np, 0)) ? 0 : -1;
}

/* v as dtype dt: v itself, or a cast node named `name` (NULL: a fresh name). */
static Value *cast_to(Loader *L, const Onnx__NodeProto *np, Value *v, DType dt,
                      const char *name) {
  if (v->type.dtype == dt && !name)
    return v;
  Attr to = attr_make_string("to", dtype_name(dt));
  return emit(L, np, OP_CAST, &v, 1, &to, 1, name);
}

/* Pow: ONNX lets the exponent's type differ from the base's and allows integer bases;
 * the IR's pow takes one floating-point type. The exponent is cast to the base's type;
 * an integer base is raised in f64 and the result cast back, which is exact for every
 * result the integer type can hold. */
static int b_pow(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0), *y = input(L, np, 1);
  if (!x || !y)
    return FAIL("expects 2 inputs");
  if (!(y = legacy_broadcast(L, np, x, y)))
    return -1;
  DType dt = x->type.dtype, ct = dtype_is_float(dt) ? dt : DT_F64;
  Value *in[2] = {cast_to(L, np, x, ct, NULL), cast_to(L, np, y, ct, NULL)};
  if (!in[0] || !in[1])
    return -1;
  if (ct == dt)
    return emit(L, np, e->op, in, 2, NULL, 0, output_name(np, 0)) ? 0 : -1;
  Value *p = emit(L, np, e->op, in, 2, NULL, 0, NULL);
  return p && cast_to(L, np, p, dt, output_name(np, 0)) ? 0 : -1;
}

/* Max, Min, Sum: variadic in ONNX, binary in the IR: a chain. */
static int b_variadic(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  if (np->n_input < 1)
    return FAIL("expects at least one input");
  Value *acc = input(L, np, 0);
  if (!acc)
    return FAIL("input 0 is missing");
  if (np->n_input == 1)
    return emit(L, np, OP_IDENTITY, &acc, 1, NULL, 0, output_name(np, 0)) ? 0 : -1;
  for (size_t i = 1; i < np->n_input; i++) {
    Value *in[2] = {acc, input(L, np, i)};
    if (!in[1])
      return FAIL("input %zu is missing", i);
    acc = emit(L, np, e->op, in, 2, NULL, 0, i + 1 == np->n_input ? output_name(np, 0) : NULL);
    if (!acc)
      return -1;
  }
  return 0;
}

static int static_dims(Loader *L, const Value *v, int64_t *dims, const char *why);

static int b_identity(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  (void)e;
  Value *x = input(L, np, 0);
  if (!x)
    return FAIL("input 0 is missing");
  bool dropout = !strcmp(S(np->op_type), "Dropout");
  if (dropout && L->ver >= 12) {
    double training = 0;
    if (const_scalar(L, np, 2, "training_mode", &training))
      return -1;
    if (training != 0)
      return FAIL("training_mode=true is not supported: gpucc compiles inference only");
  }
  if (!emit(L, np, OP_IDENTITY, &x, 1, NULL, 0, output_name(np, 0)))
    return -1;
  if (!output_name(np, 1))
    return 0;
  /* Dropout's mask in inference: all kept, of the input's (static) shape; bool from
   * version 10, the input's type before. */
  int64_t dims[IR_MAX_RANK];
  if (static_dims(L, x, dims, "Dropout's mask output"))
    return -1;
  Value *t = scalar_const(L, np, dropout && L->ver < 10 ? x->type.dtype : DT_BOOL, 1);
  Attr at = attr_make_ints("shape", dims, x->type.shape.rank);
  return emit(L, np, OP_EXPAND, &t, 1, &at, 1, output_name(np, 1)) ? 0 : -1;
}

static int b_clip_computed(Loader *L, const Onnx__NodeProto *np, Value *x);

/* Whether input i is absent or a constant in the graph built so far. */
static bool input_const(Loader *L, const Onnx__NodeProto *np, size_t i) {
  Value *v = input(L, np, i);
  return !v || v->kind == VK_CONST;
}

static int b_clip(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  if (!x)
    return FAIL("input 0 is missing");
  double lo = -INFINITY, hi = INFINITY;
  if (L->ver < 11) { /* attributes; version 6 gave them float's limits as defaults */
    double lim = L->ver >= 6 ? FLT_MAX : INFINITY;
    if (get_float(L, np, "min", -lim, &lo) || get_float(L, np, "max", lim, &hi))
      return -1;
  } else if (!input_const(L, np, 1) || !input_const(L, np, 2)) {
    return b_clip_computed(L, np, x);
  } else if (const_scalar(L, np, 1, "min", &lo) || const_scalar(L, np, 2, "max", &hi)) {
    return -1;
  }
  Attr at[2] = {attr_make_float("min", lo), attr_make_float("max", hi)};
  return emit(L, np, e->op, &x, 1, at, 2, output_name(np, 0)) ? 0 : -1;
}

/* Cast's target, a TensorProto DataType: an int attribute from version 6, the type's
 * name ("FLOAT") in version 1. -1 when absent or not a type. */
static int64_t cast_type(const Onnx__NodeProto *np, int ver) {
  const Onnx__AttributeProto *a = find_attr(np, "to");
  if (!a)
    return -1;
  if (ver >= 6)
    return attr_type(a) == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT ? a->i : -1;
  if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)
    return -1;
  for (int32_t t = 1; t < 64; t++) {
    const char *nm = onnx_type_name(t);
    if (strlen(nm) == a->s.len && !memcmp(nm, a->s.data, a->s.len))
      return t;
  }
  return -1;
}

static int b_cast(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  DType dt;
  Value *x = input(L, np, 0);
  if (!x)
    return FAIL("input 0 is missing");
  if (!find_attr(np, "to"))
    return FAIL("missing attribute 'to'");
  int64_t to = cast_type(np, L->ver);
  if (to < 0)
    return FAIL("attribute 'to' must be %s", L->ver >= 6 ? "an int" : "the name of a type");
  if (to > INT32_MAX || dtype_from_onnx((int32_t)to, &dt))
    return FAIL("cast to %s is not supported", onnx_type_name((int32_t)to));
  Attr at = attr_make_string("to", dtype_name(dt));
  return emit(L, np, e->op, &x, 1, &at, 1, output_name(np, 0)) ? 0 : -1;
}

/* Before version 13, Softmax flattens its input to 2-D at axis, normalizes each row and
 * reshapes back: the same as a plain softmax only when axis is the last dim. */
static int b_softmax(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  int64_t axis;
  if (!x)
    return FAIL("input 0 is missing");
  if (get_int(L, np, "axis", L->ver >= 13 ? -1 : 1, &axis))
    return -1;
  int r = x->type.shape.rank;
  int64_t a = axis < 0 ? axis + r : axis;
  if (L->ver >= 13 || (r > 0 && a == r - 1)) {
    Attr at = attr_make_int("axis", L->ver >= 13 ? axis : -1);
    return emit(L, np, e->op, &x, 1, &at, 1, output_name(np, 0)) ? 0 : -1;
  }
  if (a < 0 || a >= r)
    return FAIL("axis %" PRId64 " is out of range for rank %d", axis, r);
  int64_t shape[IR_MAX_RANK];
  int nsym = 0;
  for (int i = 0; i < r; i++) {
    Dim dm = x->type.shape.dims[i];
    shape[i] = dm.sym ? -1 : dm.n;
    nsym += dm.sym != NULL;
  }
  if (nsym > 1)
    return FAIL("softmax before version 13 over axis %" PRId64 " needs at most one symbolic dim",
                axis);
  Attr fa = attr_make_int("axis", a), sa = attr_make_int("axis", -1);
  Attr ra = attr_make_ints("shape", shape, r);
  Value *f = emit(L, np, OP_FLATTEN, &x, 1, &fa, 1, NULL);
  Value *s = f ? emit(L, np, e->op, &f, 1, &sa, 1, NULL) : NULL;
  return s && emit(L, np, OP_RESHAPE, &s, 1, &ra, 1, output_name(np, 0)) ? 0 : -1;
}

/* Ops whose ints attribute became a constant input in some version of the op (before
 * it, the attribute of the same name). */
static int ints_arg(Loader *L, const Onnx__NodeProto *np, int input_from_version, size_t i,
                    const char *name, const int64_t **v, int *n) {
  if (L->ver >= input_from_version) {
    int64_t *c;
    int rc = const_ints(L, np, i, name, &c, n);
    *v = c;
    return rc;
  }
  return get_ints(L, np, name, v, n);
}

static int b_reshape(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  const int64_t *shape;
  int n;
  if (!x)
    return FAIL("input 0 is missing");
  /* Reshape-1 takes the shape as an attribute; Expand always as an input */
  bool attr = e->op == OP_RESHAPE && L->ver < 5;
  if (ints_arg(L, np, attr ? INT32_MAX : 0, 1, "shape", &shape, &n))
    return -1;
  if (n < 0)
    return FAIL(attr ? "missing attribute 'shape'" : "input 'shape' is missing");
  int64_t allowzero = 0;
  if (e->op == OP_RESHAPE && get_int(L, np, "allowzero", 0, &allowzero))
    return -1;
  bool has_zero = false;
  for (int i = 0; allowzero && i < n; i++)
    has_zero |= shape[i] == 0;
  if (has_zero) { /* a literal 0: the result is empty, so a constant */
    char buf[256];
    const char *out = output_name(np, 0);
    for (int i = 0; i < n; i++)
      if (shape[i] < 0)
        return FAIL("allowzero=1 with both 0 and -1 in the shape is ambiguous");
    if (n > IR_MAX_RANK)
      return FAIL("the shape has rank %d; gpucc supports at most %d", n, IR_MAX_RANK);
    if (shape_numel(&x->type.shape) != 0)
      return FAIL("reshape of '%s' to an empty shape: the element counts differ", x->name);
    /* no elements, but each dim may still be a loop bound or a stride later */
    if (!dims_size(n, shape, x->type.dtype, NULL, NULL))
      return FAIL("the shape is too large: leaving out its 0s, it has more than 2^48 bytes");
    Tensor *t = tensor_in_arena(L->g->arena, x->type.dtype, n, shape);
    return graph_add_const(L->g, out ? out : tmp_name(L, np, buf, sizeof buf), t)
               ? 0 : FAIL("value '%s' is already defined", out);
  }
  Attr at = attr_make_ints("shape", shape, n);
  return emit(L, np, e->op, &x, 1, &at, 1, output_name(np, 0)) ? 0 : -1;
}

static int b_expand(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  return b_reshape(L, np, e); /* the same shape: a constant second input */
}

static int b_transpose(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  const int64_t *perm;
  int n;
  if (!x)
    return FAIL("input 0 is missing");
  if (get_ints(L, np, "perm", &perm, &n))
    return -1;
  Attr at = attr_make_ints("perm", perm, n);
  return emit(L, np, e->op, &x, 1, &at, n >= 0, output_name(np, 0)) ? 0 : -1;
}

static int b_squeeze(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  const int64_t *axes;
  int n;
  if (!x)
    return FAIL("input 0 is missing");
  if (ints_arg(L, np, 13, 1, "axes", &axes, &n))
    return -1;
  if (n < 0 && e->op == OP_UNSQUEEZE)
    return FAIL(L->ver >= 13 ? "input 'axes' is missing" : "missing attribute 'axes'");
  int64_t ones[IR_MAX_RANK];
  if (n < 0) { /* every dim of size 1, which must then be known */
    n = 0;
    for (int i = 0; i < x->type.shape.rank; i++) {
      Dim dm = x->type.shape.dims[i];
      if (dm.sym)
        return FAIL("squeeze without axes needs static dims, but dim %d is '%s'", i, dm.sym);
      if (dm.n == 1)
        ones[n++] = i;
    }
    axes = ones;
  }
  Attr at = attr_make_ints("axes", axes, n);
  return emit(L, np, e->op, &x, 1, &at, 1, output_name(np, 0)) ? 0 : -1;
}

static int b_axis_op(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e, bool required,
                     int64_t def) {
  Value *in[1024];
  int nin = plain_inputs(L, np, e->op, in, 1024);
  int64_t axis;
  if (nin < 0)
    return -1;
  if (required ? need_int(L, np, "axis", &axis) : get_int(L, np, "axis", def, &axis))
    return -1;
  Attr at = attr_make_int("axis", axis);
  return emit(L, np, e->op, in, nin, &at, 1, output_name(np, 0)) ? 0 : -1;
}

static int b_flatten(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  return b_axis_op(L, np, e, false, 1);
}
static int b_gather(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  return b_axis_op(L, np, e, false, 0);
}
/* Concat's axis is required from version 4; before, it defaults to 1. */
static int b_concat(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  return b_axis_op(L, np, e, L->ver >= 4, 1);
}

static int b_slice(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  const int64_t *v[4] = {0};
  int n[4] = {-1, -1, -1, -1};
  static const char *const names[4] = {"starts", "ends", "axes", "steps"};
  if (!x)
    return FAIL("input 0 is missing");
  for (int i = 0; i < (L->ver >= 10 ? 4 : 3); i++)
    if (ints_arg(L, np, 10, (size_t)i + 1, names[i], &v[i], &n[i]))
      return -1;
  if (n[0] < 0 || n[1] < 0)
    return FAIL("%s 'starts' and 'ends' are required", L->ver >= 10 ? "inputs" : "attributes");
  Attr at[4];
  int na = 0;
  for (int i = 0; i < 4; i++)
    if (n[i] >= 0)
      at[na++] = attr_make_ints(names[i], v[i], n[i]);
  return emit(L, np, e->op, &x, 1, at, na, output_name(np, 0)) ? 0 : -1;
}

static int const_floats(Loader *L, const Onnx__NodeProto *np, size_t i, const char *what,
                        double **out, int *n);

/* The parts of one Split: each is an output, whose value and kernel parameter cost a
 * few hundred bytes; codegen splits a node of many parts into several kernels. */
enum { SPLIT_MAX_OUTPUTS = 1 << 16 };

static int b_split(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  int64_t axis, parts = -1;
  const int64_t *split;
  int n;
  if (!x)
    return FAIL("input 0 is missing");
  if (np->n_output < 1 || np->n_output > SPLIT_MAX_OUTPUTS)
    return FAIL("has %zu outputs; gpucc supports 1 to %d", np->n_output, SPLIT_MAX_OUTPUTS);
  int nout = (int)np->n_output;
  if (get_int(L, np, "axis", 0, &axis))
    return -1;
  /* the sizes: an input from version 13, an attribute from 2 to 11, and either in 1,
   * whose input has the data's type */
  if (L->ver < 2 && input(L, np, 1)) {
    double *f;
    if (const_floats(L, np, 1, "split", &f, &n))
      return -1;
    int64_t *sz = arena_alloc(L->g->arena, sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++) {
      if (!(f[i] >= 0 && f[i] <= INT32_MAX && f[i] == floor(f[i])))
        return FAIL("split size %g is not a whole number of elements", f[i]);
      sz[i] = (int64_t)f[i];
    }
    split = sz;
  } else if (ints_arg(L, np, L->ver >= 13 ? 0 : INT32_MAX, 1, "split", &split, &n)) {
    return -1;
  }
  if (L->ver >= 18 && get_int(L, np, "num_outputs", -1, &parts))
    return -1;
  int64_t *sizes = arena_alloc(L->g->arena, sizeof *sizes * (size_t)nout);
  if (n < 0) { /* equal parts; from version 18 the last may be smaller */
    int r = x->type.shape.rank;
    int64_t a = axis < 0 ? axis + r : axis;
    if (a < 0 || a >= r)
      return FAIL("axis %" PRId64 " is out of range for rank %d", axis, r);
    Dim dm = x->type.shape.dims[a];
    if (dm.sym)
      return FAIL("splitting symbolic dim '%s' needs explicit split sizes", dm.sym);
    if (parts < 0)
      parts = nout;
    if (parts != nout)
      return FAIL("num_outputs is %" PRId64 ", but the node has %d outputs", parts, nout);
    int64_t chunk = L->ver >= 18 ? (dm.n + parts - 1) / parts : dm.n / parts;
    if (L->ver < 18 && dm.n % parts)
      return FAIL("dim %" PRId64 " of size %" PRId64 " does not split into %" PRId64
                  " equal parts", a, dm.n, parts);
    for (int i = 0; i < nout; i++)
      sizes[i] = i + 1 < nout ? chunk : dm.n - chunk * (nout - 1);
    split = sizes;
    n = nout;
  }
  if (n != nout)
    return FAIL("split has %d sizes, but the node has %d outputs", n, nout);
  /* Parts of size 0 are empty constants; the IR splits into the others. */
  const char **names = arena_alloc(L->g->arena, sizeof *names * (size_t)nout);
  int64_t *parts_left = arena_alloc(L->g->arena, sizeof *parts_left * (size_t)nout);
  int m = 0;
  for (int i = 0; i < nout; i++) {
    if (split[i] != 0) {
      parts_left[m] = split[i];
      names[m++] = output_name(np, (size_t)i);
      continue;
    }
    int64_t dims[IR_MAX_RANK];
    int r = x->type.shape.rank;
    int64_t a = axis < 0 ? axis + r : axis;
    if (a < 0 || a >= r)
      return FAIL("axis %" PRId64 " is out of range for rank %d", axis, r);
    if (static_dims(L, x, dims, "an empty part of Split"))
      return -1;
    dims[a] = 0;
    char buf[256];
    const char *nm = output_name(np, (size_t)i);
    Tensor *t = tensor_in_arena(L->g->arena, x->type.dtype, r, dims);
    if (!graph_add_const(L->g, nm ? nm : tmp_name(L, np, buf, sizeof buf), t))
      return FAIL("value '%s' is already defined", nm);
  }
  if (m == 1)
    return emit(L, np, OP_IDENTITY, &x, 1, NULL, 0, names[0]) ? 0 : -1;
  Attr at[2] = {attr_make_int("axis", axis), attr_make_ints("split", parts_left, m)};
  return emit_multi(L, np, e->op, &x, 1, at, 2, names, m, NULL);
}

/* Y = alpha * A' B' + beta * C, with A' and B' transposed when asked. */
static int b_gemm(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  (void)e;
  Value *a = input(L, np, 0), *b = input(L, np, 1), *c = input(L, np, 2);
  int64_t ta, tb;
  double alpha, beta;
  if (!a || !b)
    return FAIL("inputs A and B are required");
  if (get_int(L, np, "transA", 0, &ta) || get_int(L, np, "transB", 0, &tb) ||
      get_float(L, np, "alpha", 1, &alpha) || get_float(L, np, "beta", 1, &beta))
    return -1;
  const char *out = output_name(np, 0);
  if (ta && !(a = emit(L, np, OP_TRANSPOSE, &a, 1, NULL, 0, NULL)))
    return -1;
  if (tb && !(b = emit(L, np, OP_TRANSPOSE, &b, 1, NULL, 0, NULL)))
    return -1;
  Value *in[2] = {a, b};
  Value *y = emit(L, np, OP_MATMUL, in, 2, NULL, 0, alpha == 1 && !c ? out : NULL);
  if (y && alpha != 1) {
    Value *m[2] = {y, scalar_const(L, np, y->type.dtype, alpha)};
    y = emit(L, np, OP_MUL, m, 2, NULL, 0, c ? NULL : out);
  }
  if (y && c && beta != 1) {
    Value *m[2] = {c, scalar_const(L, np, c->type.dtype, beta)};
    c = emit(L, np, OP_MUL, m, 2, NULL, 0, NULL);
    if (!c)
      return -1;
  }
  if (y && c) {
    Value *s[2] = {y, c};
    y = emit(L, np, OP_ADD, s, 2, NULL, 0, out);
  }
  return y ? 0 : -1;
}

static int b_constant(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  (void)e;
  const char *out = output_name(np, 0);
  if (!out || np->n_attribute != 1)
    return FAIL("a Constant needs one output and exactly one attribute");
  const Onnx__AttributeProto *a = np->attribute[0];
  const char *name = S(a->name);
  Tensor *t = NULL;
  char what[512];
  snprintf(what, sizeof what, "constant '%.400s'", out);
  if (!strcmp(name, "value")) {
    if (!a->t)
      return FAIL("attribute 'value' must be a tensor");
    t = onnx_tensor_from_proto(L, a->t, what);
  } else {
    bool is_float = !strcmp(name, "value_float") || !strcmp(name, "value_floats");
    bool is_list = !strcmp(name, "value_floats") || !strcmp(name, "value_ints");
    size_t cnt = is_list ? (is_float ? a->n_floats : a->n_ints) : 1;
    int64_t dim = (int64_t)cnt;
    DType dt = is_float ? DT_F32 : DT_I64;
    if (!is_list && !(is_float ? a->has_f : a->has_i))
      return FAIL("attribute '%s' has no value", name);
    if (onnx_charge_weights(L, what, cnt * dtype_size(dt)))
      return -1;
    t = tensor_in_arena(L->g->arena, dt, is_list, &dim);
    for (size_t i = 0; i < cnt; i++) {
      char *p = (char *)t->data + i * dtype_size(dt);
      if (is_float)
        dtype_store_f64(dt, p, is_list ? a->floats[i] : a->f);
      else
        dtype_store_i64(dt, p, is_list ? a->ints[i] : a->i);
    }
  }
  if (!t)
    return -1;
  if (!graph_add_const(L->g, out, t))
    return FAIL("value '%s' is already defined", out);
  return 0;
}

/* ---------------------------------------------------------------- more attribute readers */

/* A string attribute into buf (def when absent). */
static int get_string(Loader *L, const Onnx__NodeProto *np, const char *name, const char *def,
                      char *buf, size_t n) {
  const Onnx__AttributeProto *a = find_attr(np, name);
  snprintf(buf, n, "%s", def);
  if (!a)
    return 0;
  if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)
    return FAIL("attribute '%s' must be a string", name);
  /* An empty string (Einsum's equation "") has no data pointer at all: memchr and
   * memcpy must not see it. */
  if (a->s.len >= n || (a->s.len && memchr(a->s.data, 0, a->s.len)))
    return FAIL("attribute '%s' is not a valid name", name);
  if (a->s.len)
    memcpy(buf, a->s.data, a->s.len);
  buf[a->s.len] = 0;
  return 0;
}

/* floats attribute; *n = -1 when absent. */
static int get_floats(Loader *L, const Onnx__NodeProto *np, const char *name, const float **v,
                      int *n) {
  const Onnx__AttributeProto *a = find_attr(np, name);
  *v = NULL;
  *n = -1;
  if (!a)
    return 0;
  if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS || a->n_floats > 4096)
    return FAIL("attribute '%s' must be a list of at most 4096 floats", name);
  *v = a->floats;
  *n = (int)a->n_floats;
  return 0;
}

/* The elements of constant input i as doubles; *n = -1 when absent. */
static int const_floats(Loader *L, const Onnx__NodeProto *np, size_t i, const char *what,
                        double **out, int *n) {
  Value *v = input(L, np, i);
  *out = NULL;
  *n = -1;
  if (!v)
    return 0;
  if (v->kind != VK_CONST)
    return FAIL("input '%s' (%s) must be a constant: gpucc does not compute %s at run time",
                v->name, what, what);
  int64_t cnt = tensor_numel(v->data);
  if (v->data->rank > 1 || cnt > 4096)
    return FAIL("input '%s' (%s) must be a 1-D tensor of at most 4096 elements", v->name, what);
  *out = arena_alloc(L->g->arena, sizeof(double) * (size_t)(cnt ? cnt : 1));
  for (int64_t k = 0; k < cnt; k++)
    (*out)[k] = dtype_load_f64(v->data->dtype,
                               (char *)v->data->data + k * (int64_t)dtype_size(v->data->dtype));
  *n = (int)cnt;
  return 0;
}

/* A constant int64 tensor of the given elements, named `name` (NULL: a fresh name). */
static Value *ints_const(Loader *L, const Onnx__NodeProto *np, const int64_t *v, int n,
                         int rank, const char *name) {
  char buf[256];
  int64_t dim = n;
  Tensor *t = tensor_in_arena(L->g->arena, DT_I64, rank, &dim);
  for (int i = 0; i < n; i++)
    ((int64_t *)t->data)[i] = v[i];
  Value *c = graph_add_const(L->g, name ? name : tmp_name(L, np, buf, sizeof buf), t);
  if (!c)
    FAIL("value '%s' is already defined", name);
  return c;
}

/* The static dims of v, or an error naming the symbolic one and the flag that binds it. */
static int static_dims(Loader *L, const Value *v, int64_t *dims, const char *why) {
  for (int i = 0; i < v->type.shape.rank; i++) {
    Dim dm = v->type.shape.dims[i];
    if (dm.sym)
      return FAIL("%s needs the shape of '%s', whose dim %d is symbolic ('%s'): bind it with "
                  "--dim %s=<size>", why, v->name, i, dm.sym, dm.sym);
    dims[i] = dm.n;
  }
  return 0;
}

/* ---------------------------------------------------------------- shapes known at load */

static int b_shape(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  (void)e;
  Value *x = input(L, np, 0);
  int64_t dims[IR_MAX_RANK], start = 0, end;
  if (!x)
    return FAIL("input 0 is missing");
  int r = x->type.shape.rank;
  if (get_int(L, np, "start", 0, &start) || get_int(L, np, "end", r, &end))
    return -1;
  start = start < 0 ? start + r : start;
  end = end < 0 ? end + r : end;
  start = start < 0 ? 0 : start > r ? r : start;
  end = end < start ? start : end > r ? r : end;
  for (int64_t i = start; i < end; i++) {
    Dim dm = x->type.shape.dims[i];
    if (dm.sym)
      return FAIL("the shape of '%s' has symbolic dim %" PRId64 " ('%s'): bind it with --dim "
                  "%s=<size>", x->name, i, dm.sym, dm.sym);
    dims[i - start] = dm.n;
  }
  return ints_const(L, np, dims, (int)(end - start), 1, output_name(np, 0)) ? 0 : -1;
}

static int b_size(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  (void)e;
  Value *x = input(L, np, 0);
  int64_t dims[IR_MAX_RANK], n;
  if (!x)
    return FAIL("input 0 is missing");
  if (static_dims(L, x, dims, "Size"))
    return -1;
  if (!dims_size(x->type.shape.rank, dims, x->type.dtype, &n, NULL))
    return FAIL("input '%s' is too large (more than 2^48 bytes)", x->name);
  return ints_const(L, np, &n, 1, 0, output_name(np, 0)) ? 0 : -1;
}

/* A scalar constant taken from a one-element tensor attribute (def: f32 0). */
static Value *attr_scalar(Loader *L, const Onnx__NodeProto *np, const char *name) {
  const Onnx__AttributeProto *a = find_attr(np, name);
  if (!a)
    return scalar_const(L, np, DT_F32, 0);
  if (!a->t) {
    FAIL("attribute '%s' must be a tensor", name);
    return NULL;
  }
  Tensor *t = onnx_tensor_from_proto(L, a->t, "attribute 'value'");
  if (!t)
    return NULL;
  if (tensor_numel(t) != 1) {
    FAIL("attribute '%s' must hold one element", name);
    return NULL;
  }
  char buf[256];
  t->rank = 0;
  return graph_add_const(L->g, tmp_name(L, np, buf, sizeof buf), t);
}

static int b_constant_of_shape(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  (void)e;
  int64_t *shape;
  int n;
  if (const_ints(L, np, 0, "shape", &shape, &n))
    return -1;
  if (n < 0)
    return FAIL("input 'shape' is missing");
  Value *v = attr_scalar(L, np, "value");
  Attr at = attr_make_ints("shape", shape, n);
  return v && emit(L, np, OP_EXPAND, &v, 1, &at, 1, output_name(np, 0)) ? 0 : -1;
}

static int b_eye_like(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  (void)e;
  Value *x = input(L, np, 0);
  int64_t dims[IR_MAX_RANK], k, dt_onnx;
  DType dt;
  char buf[256];
  if (!x)
    return FAIL("input 0 is missing");
  if (x->type.shape.rank != 2)
    return FAIL("input must be 2-D, not rank %d", x->type.shape.rank);
  if (static_dims(L, x, dims, "EyeLike") || get_int(L, np, "k", 0, &k) ||
      get_int(L, np, "dtype", -1, &dt_onnx))
    return -1;
  if (dt_onnx < 0)
    dt = x->type.dtype;
  else if (dt_onnx > INT32_MAX || dtype_from_onnx((int32_t)dt_onnx, &dt))
    return FAIL("dtype %s is not supported", onnx_type_name((int32_t)dt_onnx));
  int64_t nbytes;
  if (!dims_size(2, dims, dt, NULL, &nbytes))
    return FAIL("EyeLike of %" PRId64 " x %" PRId64 " %s is too large (more than 2^48 bytes)",
                dims[0], dims[1], dtype_name(dt));
  if (onnx_charge_weights(L, "EyeLike", (uint64_t)nbytes))
    return -1;
  Tensor *t = tensor_in_arena(L->g->arena, dt, 2, dims);
  /* The ones are at (i, i + k) for the rows i where that column exists. k may be any
   * int64: past the matrix there are none, and within it, it is small enough to add. */
  int64_t first = 0, end = 0;
  if (k < dims[1] && k > -dims[0]) {
    first = k < 0 ? -k : 0;
    end = dims[1] - k < dims[0] ? dims[1] - k : dims[0];
  }
  for (int64_t i = first; i < end; i++)
    dtype_store_f64(dt, (char *)t->data + (i * dims[1] + i + k) * (int64_t)dtype_size(dt), 1);
  const char *out = output_name(np, 0);
  return graph_add_const(L->g, out ? out : tmp_name(L, np, buf, sizeof buf), t)
             ? 0 : FAIL("value '%s' is already defined", out);
}

/* HannWindow, HammingWindow, BlackmanWindow: constants of the given size. */
static int b_window(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  (void)e;
  double size;
  int64_t periodic, dt_onnx;
  DType dt;
  char buf[256];
  size = -1;
  if (const_scalar(L, np, 0, "size", &size) || get_int(L, np, "periodic", 1, &periodic) ||
      get_int(L, np, "output_datatype", 1, &dt_onnx))
    return -1;
  if (!(size >= 0 && size <= (1 << 24)))
    return FAIL("size must be between 0 and 2^24");
  if (dt_onnx > INT32_MAX || dtype_from_onnx((int32_t)dt_onnx, &dt))
    return FAIL("output_datatype %s is not supported", onnx_type_name((int32_t)dt_onnx));
  /* size is at most 2^24, so the byte count cannot fail; charged like any weight. */
  int64_t n = (int64_t)size, bytes = 0;
  dims_size(1, &n, dt, NULL, &bytes);
  if (onnx_charge_weights(L, S(np->op_type), (uint64_t)bytes))
    return -1;
  Tensor *t = tensor_in_arena(L->g->arena, dt, 1, &n);
  double den = periodic ? (double)n : (double)(n - 1), pi = 3.14159265358979323846;
  const char *op = S(np->op_type);
  for (int64_t i = 0; i < n; i++) {
    double c1 = den > 0 ? cos(2 * pi * (double)i / den) : 1, c2 = den > 0 ? cos(4 * pi * (double)i / den) : 1;
    double w = !strcmp(op, "HannWindow")      ? 0.5 - 0.5 * c1
               : !strcmp(op, "HammingWindow") ? 25.0 / 46 - 21.0 / 46 * c1
                                              : 0.42 - 0.5 * c1 + 0.08 * c2;
    dtype_store_f64(dt, (char *)t->data + i * (int64_t)dtype_size(dt), w);
  }
  const char *out = output_name(np, 0);
  return graph_add_const(L->g, out ? out : tmp_name(L, np, buf, sizeof buf), t)
             ? 0 : FAIL("value '%s' is already defined", out);
}

/* ---------------------------------------------------------------- more op builders */

static int b_cast_like(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  (void)e;
  Value *x = input(L, np, 0), *like = input(L, np, 1);
  if (!x || !like)
    return FAIL("inputs 'input' and 'target_type' are required");
  return cast_to(L, np, x, like->type.dtype, output_name(np, 0)) ? 0 : -1;
}

/* Mean: a sum divided by the count. */
static int b_mean(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  (void)e;
  Value *acc = input(L, np, 0);
  if (!acc)
    return FAIL("input 0 is missing");
  for (size_t i = 1; i < np->n_input && acc; i++) {
    Value *in[2] = {acc, input(L, np, i)};
    if (!in[1])
      return FAIL("input %zu is missing", i);
    acc = emit(L, np, OP_ADD, in, 2, NULL, 0, NULL);
  }
  if (!acc)
    return -1;
  Value *in[2] = {acc, scalar_const(L, np, acc->type.dtype, (double)np->n_input)};
  return emit(L, np, OP_DIV, in, 2, NULL, 0, output_name(np, 0)) ? 0 : -1;
}

/* Clip with bounds computed at run time: max(min(x, hi), lo). */
static int b_clip_computed(Loader *L, const Onnx__NodeProto *np, Value *x) {
  Value *lo = input(L, np, 1), *hi = input(L, np, 2);
  Value *y = x;
  if (hi) {
    Value *in[2] = {y, hi};
    y = emit(L, np, OP_MIN, in, 2, NULL, 0, lo ? NULL : output_name(np, 0));
  }
  if (y && lo) {
    Value *in[2] = {y, lo};
    y = emit(L, np, OP_MAX, in, 2, NULL, 0, output_name(np, 0));
  }
  return y ? 0 : -1;
}

/* The reduce family: axes from an attribute, or from a constant input from version 18
 * (ReduceSum: 13). ReduceLogSum is the log of a ReduceSum. */
static int b_reduce(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  if (!x)
    return FAIL("input 0 is missing");
  bool log_sum = !strcmp(S(np->op_type), "ReduceLogSum");
  Op op = log_sum ? OP_REDUCE_SUM : e->op;
  bool axes_input = L->ver >= (!strcmp(S(np->op_type), "ReduceSum") ? 13 : 18);
  int64_t keepdims, noop;
  const int64_t *axes;
  int n;
  if (ints_arg(L, np, axes_input ? 0 : INT32_MAX, 1, "axes", &axes, &n))
    return -1;
  if (get_int(L, np, "keepdims", 1, &keepdims) ||
      get_int(L, np, "noop_with_empty_axes", 0, &noop))
    return -1;
  const char *out = output_name(np, 0);
  if (n <= 0 && noop)
    return emit(L, np, OP_IDENTITY, &x, 1, NULL, 0, out) ? 0 : -1;
  Attr at[2] = {attr_make_int("keepdims", keepdims), attr_make_ints("axes", axes, n)};
  Value *y = emit(L, np, op, &x, 1, at, n > 0 ? 2 : 1, log_sum ? NULL : out);
  if (y && log_sum)
    y = emit(L, np, OP_LOG, &y, 1, NULL, 0, out);
  return y ? 0 : -1;
}

static int b_argmax(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  int64_t axis, keepdims, last;
  if (!x)
    return FAIL("input 0 is missing");
  if (get_int(L, np, "axis", 0, &axis) || get_int(L, np, "keepdims", 1, &keepdims) ||
      get_int(L, np, "select_last_index", 0, &last))
    return -1;
  Attr at[3] = {attr_make_int("axis", axis), attr_make_int("keepdims", keepdims),
                attr_make_int("select_last_index", last)};
  return emit(L, np, e->op, &x, 1, at, 3, output_name(np, 0)) ? 0 : -1;
}

/* LayerNormalization whose Mean or InvStdDev output is used: spelled out, in the
 * stash type (f32) like ONNX's function body. */
static int b_layer_norm_parts(Loader *L, const Onnx__NodeProto *np, Value **in, int nin,
                              int64_t axis, double eps) {
  Value *x = in[0];
  int r = x->type.shape.rank;
  int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= r)
    return FAIL("axis %" PRId64 " is out of range for rank %d", axis, r);
  int64_t axes[IR_MAX_RANK];
  for (int64_t i = a; i < r; i++)
    axes[i - a] = i;
  DType dt = x->type.dtype;
  Attr red[2] = {attr_make_int("keepdims", 1), attr_make_ints("axes", axes, (int)(r - a))};
  Value *xf = cast_to(L, np, x, DT_F32, NULL);
  Value *mean = xf ? emit(L, np, OP_REDUCE_MEAN, &xf, 1, red, 2, output_name(np, 1)) : NULL;
  Value *d2[2] = {xf, mean};
  Value *dv = mean ? emit(L, np, OP_SUB, d2, 2, NULL, 0, NULL) : NULL;
  Value *sq[2] = {dv, dv};
  Value *dd = dv ? emit(L, np, OP_MUL, sq, 2, NULL, 0, NULL) : NULL;
  Value *var = dd ? emit(L, np, OP_REDUCE_MEAN, &dd, 1, red, 2, NULL) : NULL;
  Value *ve[2] = {var, var ? scalar_const(L, np, DT_F32, eps) : NULL};
  Value *vpe = var ? emit(L, np, OP_ADD, ve, 2, NULL, 0, NULL) : NULL;
  Value *inv = vpe ? emit(L, np, OP_RSQRT, &vpe, 1, NULL, 0, output_name(np, 2)) : NULL;
  Value *ni[2] = {dv, inv};
  Value *y = inv ? emit(L, np, OP_MUL, ni, 2, NULL, 0, NULL) : NULL;
  y = y ? cast_to(L, np, y, dt, NULL) : NULL;
  Value *ys[2] = {y, in[1]};
  y = y ? emit(L, np, OP_MUL, ys, 2, NULL, 0, nin > 2 ? NULL : output_name(np, 0)) : NULL;
  if (y && nin > 2) {
    Value *yb[2] = {y, in[2]};
    y = emit(L, np, OP_ADD, yb, 2, NULL, 0, output_name(np, 0));
  }
  return y ? 0 : -1;
}

static bool output_used(const Loader *L, const Onnx__NodeProto *np, size_t i);

static int b_layer_norm(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *in[3];
  int64_t axis;
  double eps;
  int nin = plain_inputs(L, np, e->op, in, 3);
  if (nin < 0)
    return -1;
  if (get_int(L, np, "axis", -1, &axis) || get_float(L, np, "epsilon", 1e-5, &eps))
    return -1;
  if (output_used(L, np, 1) || output_used(L, np, 2))
    return b_layer_norm_parts(L, np, in, nin, axis, eps);
  Attr at[2] = {attr_make_int("axis", axis), attr_make_float("epsilon", eps)};
  return emit(L, np, e->op, in, nin, at, 2, output_name(np, 0)) ? 0 : -1;
}

/* ---------------------------------------------------------------- convolutions and pools */

/* Spatial attributes shared by Conv, ConvTranspose and the pools, with auto_pad turned
 * into explicit pads (which needs static spatial dims). */
typedef struct Window {
  int nsp;                       /* spatial dims */
  int64_t kernel[IR_MAX_RANK], strides[IR_MAX_RANK], dil[IR_MAX_RANK];
  int64_t pads[2 * IR_MAX_RANK]; /* begins, then ends */
} Window;

static int window_ints(Loader *L, const Onnx__NodeProto *np, const char *name, int nsp,
                       int64_t def, int64_t *out, int want) {
  const int64_t *v;
  int n;
  if (get_ints(L, np, name, &v, &n))
    return -1;
  for (int i = 0; i < want; i++)
    out[i] = n < 0 ? def : 0;
  if (n < 0)
    return 0;
  if (n != want)
    return FAIL("attribute '%s' has %d values; %d spatial dims need %d", name, n, nsp, want);
  for (int i = 0; i < n; i++)
    out[i] = v[i];
  return 0;
}

/* The length dil * (kernel - 1) + 1 that the window of spatial dim i covers, for the
 * padding rules of auto_pad and output_shape (`why`), which divide by the stride: the
 * stride, dilation and kernel must be at least 1 before any of that arithmetic. */
static int window_span(Loader *L, const Window *win, int i, const char *why, int64_t *span) {
  int64_t k = win->kernel[i], s = win->strides[i], dl = win->dil[i];
  if (k < 1 || s < 1 || dl < 1)
    return FAIL("%s needs kernel sizes, strides and dilations of at least 1, but spatial dim "
                "%d has kernel %" PRId64 ", stride %" PRId64 " and dilation %" PRId64, why, i,
                k, s, dl);
  if (!size_mul(dl, k - 1, span) || !size_add(*span, 1, span))
    return FAIL("%s: the window of spatial dim %d (kernel %" PRId64 ", dilation %" PRId64
                ") overflows int64", why, i, k, dl);
  return 0;
}

/* kernel: the weight's spatial dims for convolutions (NULL for pools: the attribute). */
static int read_window(Loader *L, const Onnx__NodeProto *np, const Value *x, const Value *w,
                       bool transpose, Window *win) {
  int r = x->type.shape.rank;
  if (r < 3)
    return FAIL("input must be [N, C, spatial...], not rank %d", r);
  int nsp = win->nsp = r - 2;
  const int64_t *ks;
  int nk;
  if (get_ints(L, np, "kernel_shape", &ks, &nk))
    return -1;
  if (nk >= 0 && nk != nsp)
    return FAIL("kernel_shape has %d values for %d spatial dims", nk, nsp);
  for (int i = 0; i < nsp; i++) {
    if (nk >= 0)
      win->kernel[i] = ks[i];
    else if (w && w->type.shape.rank == r && !w->type.shape.dims[i + 2].sym)
      win->kernel[i] = w->type.shape.dims[i + 2].n;
    else
      return FAIL("attribute 'kernel_shape' is required");
  }
  if (window_ints(L, np, "strides", nsp, 1, win->strides, nsp) ||
      window_ints(L, np, "dilations", nsp, 1, win->dil, nsp) ||
      window_ints(L, np, "pads", nsp, 0, win->pads, 2 * nsp))
    return -1;
  char ap[32];
  if (get_string(L, np, "auto_pad", "NOTSET", ap, sizeof ap))
    return -1;
  if (!strcmp(ap, "NOTSET"))
    return 0;
  if (find_attr(np, "pads"))
    return FAIL("attributes 'pads' and 'auto_pad' %s exclude each other", ap);
  if (!strcmp(ap, "VALID")) {
    memset(win->pads, 0, sizeof win->pads);
    return 0;
  }
  bool upper = !strcmp(ap, "SAME_UPPER");
  if (!upper && strcmp(ap, "SAME_LOWER") != 0)
    return FAIL("auto_pad '%s' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", ap);
  if (transpose)
    return 0; /* ConvTranspose computes its own, from the output shape */
  char why[48];
  snprintf(why, sizeof why, "auto_pad %s", ap);
  for (int i = 0; i < nsp; i++) {
    Dim dm = x->type.shape.dims[i + 2];
    int64_t span, need, total = 0;
    if (dm.sym)
      return FAIL("auto_pad %s needs static spatial dims, but dim %d is '%s'", ap, i + 2, dm.sym);
    if (window_span(L, win, i, why, &span))
      return -1;
    /* ONNX: out = ceil(in / stride) windows, which need (out - 1) * stride + span of
     * input; whatever of that is not there is padding. An empty dim gets none (and no
     * window fits it, which inference reports). */
    int64_t out = dm.n / win->strides[i] + (dm.n % win->strides[i] != 0);
    if (out > 0) {
      if (!size_mul(out - 1, win->strides[i], &need) || !size_add(need, span, &need))
        return FAIL("auto_pad %s: the padding of spatial dim %d overflows int64 (stride %"
                    PRId64 ", window %" PRId64 ")", ap, i, win->strides[i], span);
      total = need > dm.n ? need - dm.n : 0;
    }
    win->pads[i] = upper ? total / 2 : total - total / 2;
    win->pads[i + nsp] = total - win->pads[i];
  }
  return 0;
}

static int b_conv(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *in[3];
  int64_t group;
  Window w;
  int nin = plain_inputs(L, np, e->op, in, 3);
  if (nin < 0 || read_window(L, np, in[0], in[1], false, &w) ||
      get_int(L, np, "group", 1, &group))
    return -1;
  Attr at[4] = {attr_make_ints("strides", w.strides, w.nsp), attr_make_ints("pads", w.pads, 2 * w.nsp),
                attr_make_ints("dilations", w.dil, w.nsp), attr_make_int("group", group)};
  return emit(L, np, e->op, in, nin, at, 4, output_name(np, 0)) ? 0 : -1;
}

static int b_conv_transpose(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *in[3];
  int64_t group, outpad[IR_MAX_RANK], oshape[IR_MAX_RANK];
  Window w;
  int nin = plain_inputs(L, np, e->op, in, 3);
  if (nin < 0 || read_window(L, np, in[0], in[1], true, &w) ||
      get_int(L, np, "group", 1, &group) ||
      window_ints(L, np, "output_padding", w.nsp, 0, outpad, w.nsp))
    return -1;
  const int64_t *os;
  int nos;
  char ap[32];
  if (get_ints(L, np, "output_shape", &os, &nos) ||
      get_string(L, np, "auto_pad", "NOTSET", ap, sizeof ap))
    return -1;
  bool same = !strncmp(ap, "SAME_", 5);
  if (nos >= 0 || same) {
    /* ONNX's rule: the padding that gives output_shape (for SAME: input x stride), split
     * with the odd one at the end for SAME_UPPER and at the start otherwise. */
    if (nos >= 0 && nos != w.nsp && nos != w.nsp + 2)
      return FAIL("output_shape has %d values for %d spatial dims", nos, w.nsp);
    char why[48];
    if (nos >= 0)
      snprintf(why, sizeof why, "output_shape");
    else
      snprintf(why, sizeof why, "auto_pad %s", ap);
    for (int i = 0; i < w.nsp; i++) {
      Dim dm = in[0]->type.shape.dims[i + 2];
      int64_t span, full;
      if (dm.sym)
        return FAIL("output_shape and auto_pad need static spatial dims, but dim %d is '%s'",
                    i + 2, dm.sym);
      if (window_span(L, &w, i, why, &span))
        return -1;
      /* full: the output the windows reach, stride * (in - 1) + output_padding + span */
      oshape[i] = nos >= 0 ? os[nos - w.nsp + i] : -1;
      if (dm.n < 1 || outpad[i] < 0 || (nos < 0 && !size_mul(dm.n, w.strides[i], &oshape[i])) ||
          oshape[i] < 0 || !size_mul(w.strides[i], dm.n - 1, &full) ||
          !size_add(full, outpad[i], &full) || !size_add(full, span, &full))
        return FAIL("%s: the output size of spatial dim %d is out of range (input %" PRId64
                    ", stride %" PRId64 ", output_padding %" PRId64 ", window %" PRId64 ")",
                    why, i, dm.n, w.strides[i], outpad[i], span);
      int64_t total = full - oshape[i]; /* both non-negative: no overflow */
      if (total < 0) { /* a bigger output than the kernel reaches: extra output padding */
        outpad[i] -= total;
        total = 0;
      }
      bool upper = !strcmp(ap, "SAME_UPPER");
      w.pads[i] = upper ? total / 2 : total - total / 2;
      w.pads[i + w.nsp] = total - w.pads[i];
    }
  }
  Attr at[5] = {attr_make_ints("strides", w.strides, w.nsp), attr_make_ints("pads", w.pads, 2 * w.nsp),
                attr_make_ints("dilations", w.dil, w.nsp), attr_make_int("group", group),
                attr_make_ints("output_padding", outpad, w.nsp)};
  return emit(L, np, e->op, in, nin, at, 5, output_name(np, 0)) ? 0 : -1;
}

static int b_pool(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  int64_t ceil_mode, cip, storage;
  Window w;
  if (!x)
    return FAIL("input 0 is missing");
  if (read_window(L, np, x, NULL, false, &w) || get_int(L, np, "ceil_mode", 0, &ceil_mode) ||
      get_int(L, np, "count_include_pad", 0, &cip) || get_int(L, np, "storage_order", 0, &storage))
    return -1;
  if (storage)
    return FAIL("storage_order=1 (column-major indices) is not supported");
  Attr at[6] = {attr_make_ints("kernel_shape", w.kernel, w.nsp),
                attr_make_ints("strides", w.strides, w.nsp),
                attr_make_ints("pads", w.pads, 2 * w.nsp), attr_make_ints("dilations", w.dil, w.nsp),
                attr_make_int("ceil_mode", ceil_mode), attr_make_int("count_include_pad", cip)};
  return emit(L, np, e->op, &x, 1, at, e->op == OP_AVERAGE_POOL ? 6 : 5, output_name(np, 0))
             ? 0 : -1;
}

static int b_batch_norm(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *in[5];
  double eps;
  int64_t training, spatial;
  if (plain_inputs(L, np, e->op, in, 5) < 0 || get_float(L, np, "epsilon", 1e-5, &eps) ||
      get_int(L, np, "training_mode", 0, &training) || get_int(L, np, "spatial", 1, &spatial))
    return -1;
  if (training)
    return FAIL("training_mode=1 is not supported: gpucc compiles inference only");
  if (!spatial)
    return FAIL("spatial=0 is not supported");
  Attr at = attr_make_float("epsilon", eps);
  return emit(L, np, e->op, in, 5, &at, 1, output_name(np, 0)) ? 0 : -1;
}

/* ---------------------------------------------------------------- tensors */

static int b_pad(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  char mode[32];
  if (!x)
    return FAIL("input 0 is missing");
  int r = x->type.shape.rank;
  const int64_t *pads;
  int n;
  double value = 0;
  if (get_string(L, np, "mode", "constant", mode, sizeof mode))
    return -1;
  if (L->ver < 11) { /* attributes; Pad-1 names the pads `paddings` (the same layout) */
    if (get_ints(L, np, L->ver < 2 ? "paddings" : "pads", &pads, &n) ||
        get_float(L, np, "value", 0, &value))
      return -1;
  } else {
    int64_t *p, *axes;
    int na;
    if (const_ints(L, np, 1, "pads", &p, &n) || const_scalar(L, np, 2, "constant_value", &value) ||
        const_ints(L, np, 3, "axes", &axes, &na))
      return -1;
    pads = p;
    if (na >= 0) { /* pads for the listed axes only: spread them over every dim */
      if (n != 2 * na)
        return FAIL("pads has %d values for %d axes", n, na);
      int64_t *full = arena_alloc(L->g->arena, sizeof(int64_t) * (size_t)(2 * r + 1));
      memset(full, 0, sizeof(int64_t) * (size_t)(2 * r));
      for (int i = 0; i < na; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
        if (a < 0 || a >= r)
          return FAIL("axis %" PRId64 " is out of range for rank %d", axes[i], r);
        full[a] = p[i];
        full[a + r] = p[i + na];
      }
      pads = full;
      n = 2 * r;
    }
  }
  if (n != 2 * r)
    return FAIL("pads has %d values; rank %d needs %d", n < 0 ? 0 : n, r, 2 * r);
  if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge"))
    return FAIL("mode '%s' is not supported (constant, reflect, edge are)", mode);
  Attr at[3] = {attr_make_ints("pads", pads, n), attr_make_string("mode", arena_strdup(L->g->arena, mode)),
                attr_make_float("value", value)};
  return emit(L, np, e->op, &x, 1, at, 3, output_name(np, 0)) ? 0 : -1;
}

/* Resize, and Upsample (7 and 9) before it: output sizes from `sizes` or from the scales
 * (floor(in x scale)). Upsample and Resize-10 take asymmetric coordinates, and nearest
 * rounds down. */
static int b_resize(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  if (!x)
    return FAIL("input 0 is missing");
  int r = x->type.shape.rank;
  bool upsample = !strcmp(S(np->op_type), "Upsample");
  bool old = upsample || L->ver < 11;
  double *scales = NULL;
  int ns = -1, nz = -1;
  int64_t *sizes = NULL;
  if (upsample && L->ver < 9) { /* Upsample-7: scales is an attribute */
    const float *f;
    if (get_floats(L, np, "scales", &f, &ns))
      return -1;
    scales = arena_alloc(L->g->arena, sizeof(double) * (size_t)(ns > 0 ? ns : 1));
    for (int i = 0; i < ns; i++)
      scales[i] = f[i];
  } else if (old) {
    if (const_floats(L, np, 1, "scales", &scales, &ns))
      return -1;
  } else {
    if (const_floats(L, np, 2, "scales", &scales, &ns) ||
        const_ints(L, np, 3, "sizes", &sizes, &nz))
      return -1;
  }
  if (ns == 0)
    ns = -1; /* an empty scales input stands for "absent" */
  if ((ns < 0) == (nz < 0))
    return FAIL("exactly one of 'scales' and 'sizes' must be given");
  const int64_t *axes = NULL;
  int na = -1;
  if (!old && get_ints(L, np, "axes", &axes, &na))
    return -1;
  int cnt = ns >= 0 ? ns : nz;
  if ((na >= 0 ? na : r) != cnt)
    return FAIL("%s has %d values for %d %s", ns >= 0 ? "scales" : "sizes", cnt,
                na >= 0 ? na : r, na >= 0 ? "axes" : "dims");
  int64_t osz[IR_MAX_RANK];
  double osc[IR_MAX_RANK];
  for (int i = 0; i < r; i++) {
    osz[i] = -1;
    osc[i] = 1;
  }
  for (int k = 0; k < cnt; k++) {
    int64_t a = na >= 0 ? (axes[k] < 0 ? axes[k] + r : axes[k]) : k;
    if (a < 0 || a >= r)
      return FAIL("axis %" PRId64 " is out of range for rank %d", axes[k], r);
    Dim dm = x->type.shape.dims[a];
    if (ns >= 0) {
      if (!(scales[k] > 0))
        return FAIL("scale %g must be positive", scales[k]);
      osc[a] = scales[k];
      if (dm.sym && scales[k] != 1)
        return FAIL("resizing symbolic dim '%s' needs it bound: --dim %s=<size>", dm.sym, dm.sym);
      if (!dm.sym && !double_to_i64(floor((double)dm.n * scales[k]), 0, IR_MAX_BYTES, &osz[a]))
        return FAIL("scale %g on dim %" PRId64 " (of size %" PRId64 ") gives a size out of "
                    "range", scales[k], a, dm.n);
    } else {
      if (dm.sym)
        return FAIL("resizing symbolic dim '%s' needs it bound: --dim %s=<size>", dm.sym, dm.sym);
      osz[a] = sizes[k];
      osc[a] = dm.n ? (double)sizes[k] / (double)dm.n : 1;
    }
  }
  char mode[32], coord[40], nearest[40], policy[32];
  double cubic_a, extrap;
  int64_t exclude, antialias;
  if (get_string(L, np, "mode", "nearest", mode, sizeof mode) ||
      get_string(L, np, "coordinate_transformation_mode", old ? "asymmetric" : "half_pixel",
                 coord, sizeof coord) ||
      get_string(L, np, "nearest_mode", old ? "floor" : "round_prefer_floor", nearest,
                 sizeof nearest) ||
      get_string(L, np, "keep_aspect_ratio_policy", "stretch", policy, sizeof policy) ||
      get_float(L, np, "cubic_coeff_a", -0.75, &cubic_a) ||
      get_float(L, np, "extrapolation_value", 0, &extrap) ||
      get_int(L, np, "exclude_outside", 0, &exclude) || get_int(L, np, "antialias", 0, &antialias))
    return -1;
  if (!strcmp(mode, "bilinear") || !strcmp(mode, "trilinear"))
    strcpy(mode, "linear");
  if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "cubic"))
    return FAIL("mode '%s' is not supported", mode);
  if (!strcmp(coord, "tf_crop_and_resize"))
    return FAIL("coordinate_transformation_mode 'tf_crop_and_resize' is not supported");
  if (antialias)
    return FAIL("antialias=1 is not supported");
  if (strcmp(policy, "stretch") != 0)
    return FAIL("keep_aspect_ratio_policy '%s' is not supported", policy);
  Attr at[7] = {attr_make_ints("sizes", osz, r),
                attr_make_string("mode", arena_strdup(L->g->arena, mode)),
                attr_make_string("coordinate_transformation_mode", arena_strdup(L->g->arena, coord)),
                attr_make_string("nearest_mode", arena_strdup(L->g->arena, nearest)),
                attr_make_float("cubic_coeff_a", cubic_a), attr_make_int("exclude_outside", exclude),
                {0}};
  int nat = 6;
  if (ns >= 0) {
    double *sc = arena_alloc(L->g->arena, sizeof(double) * (size_t)r);
    memcpy(sc, osc, sizeof(double) * (size_t)r);
    at[nat++] = attr_make_floats("scales", sc, r);
  }
  return emit(L, np, e->op, &x, 1, at, nat, output_name(np, 0)) ? 0 : -1;
}

static int b_topk(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  int64_t k, axis, largest, sorted;
  if (!x)
    return FAIL("input 0 is missing");
  if (L->ver < 10) {
    if (need_int(L, np, "k", &k))
      return -1;
  } else {
    int64_t *kv;
    int n;
    if (const_ints(L, np, 1, "K", &kv, &n))
      return -1;
    if (n != 1)
      return FAIL("input 'K' must hold one value");
    k = kv[0];
  }
  if (get_int(L, np, "axis", -1, &axis) || get_int(L, np, "largest", 1, &largest) ||
      get_int(L, np, "sorted", 1, &sorted))
    return -1;
  Attr at[4] = {attr_make_int("k", k), attr_make_int("axis", axis),
                attr_make_int("largest", largest), attr_make_int("sorted", sorted)};
  const char *names[2] = {output_name(np, 0), output_name(np, 1)};
  return emit_multi(L, np, e->op, &x, 1, at, 4, names, 2, NULL);
}

/* An int attribute that later opsets take as a constant scalar input i. */
static int scalar_arg(Loader *L, const Onnx__NodeProto *np, size_t i, const char *what,
                      int64_t def, int64_t *out) {
  double v = (double)def;
  *out = def;
  if (const_scalar(L, np, i, what, &v))
    return -1;
  if (!(fabs(v) < 9e15))
    return FAIL("input '%s' is out of range", what);
  *out = (int64_t)v;
  return 0;
}

static int b_cumsum(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  int64_t axis, excl, rev;
  if (!x)
    return FAIL("input 0 is missing");
  if (!input(L, np, 1))
    return FAIL("input 'axis' is required");
  if (scalar_arg(L, np, 1, "axis", 0, &axis) || get_int(L, np, "exclusive", 0, &excl) ||
      get_int(L, np, "reverse", 0, &rev))
    return -1;
  Attr at[3] = {attr_make_int("axis", axis), attr_make_int("exclusive", excl),
                attr_make_int("reverse", rev)};
  return emit(L, np, e->op, &x, 1, at, 3, output_name(np, 0)) ? 0 : -1;
}

static int b_trilu(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  int64_t k, upper;
  if (!x)
    return FAIL("input 0 is missing");
  if (scalar_arg(L, np, 1, "k", 0, &k) || get_int(L, np, "upper", 1, &upper))
    return -1;
  Attr at[2] = {attr_make_int("upper", upper), attr_make_int("k", k)};
  return emit(L, np, e->op, &x, 1, at, 2, output_name(np, 0)) ? 0 : -1;
}

static int b_tile(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  int64_t *rep;
  int n;
  if (!x)
    return FAIL("input 0 is missing");
  if (L->ver < 6) { /* Tile-1: `tiles` copies along one `axis` */
    int64_t tiles, axis;
    int r = x->type.shape.rank;
    if (!input(L, np, 1) || !input(L, np, 2))
      return FAIL("inputs 'tiles' and 'axis' are required");
    if (scalar_arg(L, np, 1, "tiles", 1, &tiles) || scalar_arg(L, np, 2, "axis", 0, &axis))
      return -1;
    if (axis < -r || axis >= r)
      return FAIL("axis %" PRId64 " is out of range for rank %d", axis, r);
    rep = arena_alloc(L->g->arena, sizeof(int64_t) * (size_t)(r ? r : 1));
    for (int i = 0; i < r; i++)
      rep[i] = 1;
    rep[axis < 0 ? axis + r : axis] = tiles;
    n = r;
  } else if (const_ints(L, np, 1, "repeats", &rep, &n)) {
    return -1;
  }
  if (n < 0)
    return FAIL("input 'repeats' is required");
  Attr at = attr_make_ints("repeats", rep, n);
  return emit(L, np, e->op, &x, 1, &at, 1, output_name(np, 0)) ? 0 : -1;
}

static int b_one_hot(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *idx = input(L, np, 0), *vals = input(L, np, 2);
  int64_t depth, axis;
  if (!idx || !vals || !input(L, np, 1))
    return FAIL("inputs 'indices', 'depth' and 'values' are required");
  if (scalar_arg(L, np, 1, "depth", 0, &depth) || get_int(L, np, "axis", -1, &axis))
    return -1;
  if (L->ver < 11) { /* OneHot-9: a negative index is out of range (all off), not wrapped */
    DType wide = dtype_is_float(idx->type.dtype) ? DT_F64 : DT_I64;
    Value *lt[2] = {cast_to(L, np, idx, wide, NULL), scalar_const(L, np, wide, 0)};
    Value *neg = lt[0] ? emit(L, np, OP_LESS, lt, 2, NULL, 0, NULL) : NULL;
    Value *w[3] = {neg, scalar_const(L, np, wide, (double)depth), lt[0]};
    if (!neg || !(idx = emit(L, np, OP_WHERE, w, 3, NULL, 0, NULL)))
      return -1;
  }
  Attr at[2] = {attr_make_int("depth", depth), attr_make_int("axis", axis)};
  Value *in[2] = {idx, vals};
  return emit(L, np, e->op, in, 2, at, 2, output_name(np, 0)) ? 0 : -1;
}

static int b_scatter_elements(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *in[3];
  int64_t axis;
  char red[16];
  if (plain_inputs(L, np, e->op, in, 3) < 0 || get_int(L, np, "axis", 0, &axis) ||
      get_string(L, np, "reduction", "none", red, sizeof red))
    return -1;
  Attr at[2] = {attr_make_int("axis", axis),
                attr_make_string("reduction", arena_strdup(L->g->arena, red))};
  return emit(L, np, e->op, in, 3, at, 2, output_name(np, 0)) ? 0 : -1;
}

/* SoftmaxCrossEntropyLoss: the loss, and the log-probabilities when asked for. */
static int b_sce(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *in[3];
  int nin = plain_inputs(L, np, e->op, in, 3);
  char red[16];
  int64_t ignore;
  if (nin < 0 || get_string(L, np, "reduction", "mean", red, sizeof red))
    return -1;
  Attr at[2] = {attr_make_string("reduction", arena_strdup(L->g->arena, red)), {0}};
  int na = 1;
  if (find_attr(np, "ignore_index")) {
    if (get_int(L, np, "ignore_index", 0, &ignore))
      return -1;
    at[na++] = attr_make_int("ignore_index", ignore);
  }
  const char *names[2] = {output_name(np, 0), output_name(np, 1)};
  return emit_multi(L, np, e->op, in, nin, at, na, names, e->op == OP_NLL_LOSS ? 1 : 2, NULL);
}

/* Compress along an axis (or of the flattened input) with a constant condition: a
 * gather of the indices where it holds. */
static int b_compress(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  (void)e;
  Value *x = input(L, np, 0), *c = input(L, np, 1);
  if (!x || !c)
    return FAIL("inputs 'input' and 'condition' are required");
  if (c->kind != VK_CONST || c->data->rank != 1)
    return FAIL("input 'condition' must be a 1-D constant: gpucc does not compute output "
                "shapes at run time");
  int64_t n = tensor_numel(c->data), m = 0, axis;
  if (n > INT32_MAX) /* the indices become a constant of at most INT_MAX elements */
    return FAIL("input 'condition' has %" PRId64 " elements; gpucc supports at most 2^31 - 1",
                n);
  int64_t *idx = arena_alloc(L->g->arena, sizeof(int64_t) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++)
    if (dtype_load_f64(c->data->dtype, (char *)c->data->data + i * (int64_t)dtype_size(c->data->dtype)))
      idx[m++] = i;
  bool flat = !find_attr(np, "axis");
  if (get_int(L, np, "axis", 0, &axis))
    return -1;
  if (flat) {
    int64_t all = -1;
    Attr ra = attr_make_ints("shape", &all, 1);
    if (!(x = emit(L, np, OP_RESHAPE, &x, 1, &ra, 1, NULL)))
      return -1;
  }
  Value *iv = ints_const(L, np, idx, (int)m, 1, NULL);
  Value *in[2] = {x, iv};
  Attr at = attr_make_int("axis", axis);
  return iv && emit(L, np, OP_GATHER, in, 2, &at, 1, output_name(np, 0)) ? 0 : -1;
}

/* RoiAlign before version 16 has no coordinate_transformation_mode and behaves as
 * output_half_pixel; from 16 the default is half_pixel. */
static int b_roi_align(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *in[3];
  char mode[16], coord[32];
  int64_t oh, ow, ratio;
  double scale;
  if (plain_inputs(L, np, e->op, in, 3) < 0 || get_string(L, np, "mode", "avg", mode, sizeof mode) ||
      get_string(L, np, "coordinate_transformation_mode",
                 L->ver >= 16 ? "half_pixel" : "output_half_pixel", coord, sizeof coord) ||
      get_int(L, np, "output_height", 1, &oh) || get_int(L, np, "output_width", 1, &ow) ||
      get_int(L, np, "sampling_ratio", 0, &ratio) || get_float(L, np, "spatial_scale", 1, &scale))
    return -1;
  Attr at[6] = {attr_make_string("mode", arena_strdup(L->g->arena, mode)),
                attr_make_int("output_height", oh), attr_make_int("output_width", ow),
                attr_make_int("sampling_ratio", ratio), attr_make_float("spatial_scale", scale),
                attr_make_string("coordinate_transformation_mode", arena_strdup(L->g->arena, coord))};
  return emit(L, np, e->op, in, 3, at, 6, output_name(np, 0)) ? 0 : -1;
}

/* MaxUnpool: the optional output_shape input (a constant) becomes the attribute. */
static int b_max_unpool(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *in[2] = {input(L, np, 0), input(L, np, 1)};
  int64_t *oshape;
  int no;
  Window w;
  if (!in[0] || !in[1])
    return FAIL("inputs 'X' and 'I' are required");
  if (read_window(L, np, in[0], NULL, false, &w) || const_ints(L, np, 2, "output_shape", &oshape, &no))
    return -1;
  Attr at[4] = {attr_make_ints("kernel_shape", w.kernel, w.nsp),
                attr_make_ints("strides", w.strides, w.nsp),
                attr_make_ints("pads", w.pads, 2 * w.nsp), {0}};
  if (no >= 0)
    at[3] = attr_make_ints("output_shape", oshape, no);
  return emit(L, np, e->op, in, 2, at, no >= 0 ? 4 : 3, output_name(np, 0)) ? 0 : -1;
}

/* ---------------------------------------------------------------- Einsum */

/* Einsum in its matmul-like forms: one operand (a transpose and a sum over the labels
 * that leave), or two, where labels in both operands and the output are batch dims,
 * labels in both operands only are contracted, and the others belong to one side. The
 * two sides become [batch, M, K] and [batch, K, N] by transposes and reshapes, one
 * matmul, and a reshape and transpose to the output's order. Repeated labels in one
 * operand (diagonals) are not supported. */
typedef struct Term {
  char lab[IR_MAX_RANK + 1]; /* one label per dim */
  int n;
} Term;

/* The number of letters in an operand's labels, and whether it holds "...". */
static int einsum_letters(const char *s, size_t len, bool *ellipsis) {
  int n = 0;
  *ellipsis = false;
  for (size_t i = 0; i < len; i++) {
    n += (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z');
    *ellipsis |= s[i] == '.';
  }
  return n;
}

/* Parses one term's labels. "..." stands for e dims, labelled by digits so that the
 * ellipsis dims of all operands align to the right (ell: the most of them). rank < 0
 * for the output. */
static int einsum_term(Loader *L, const char *s, size_t len, int rank, int e, int ell, Term *t) {
  bool has_ell = false;
  t->n = 0;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    if (c == ' ')
      continue;
    if (c == '.') {
      if (has_ell || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.')
        return FAIL("equation: a malformed '...'");
      has_ell = true;
      i += 2;
      for (int k = 0; k < e; k++) {
        if (t->n >= IR_MAX_RANK)
          return FAIL("equation: too many dims");
        t->lab[t->n++] = (char)('0' + ell - e + k);
      }
      continue;
    }
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
      return FAIL("equation: unexpected character '%c'", c);
    if (t->n >= IR_MAX_RANK)
      return FAIL("equation: too many dims");
    t->lab[t->n++] = c;
  }
  t->lab[t->n] = 0;
  if (rank >= 0 && t->n != rank)
    return FAIL("equation: an operand has %d labels but rank %d", t->n, rank);
  for (int i = 0; i < t->n; i++)
    if (strchr(t->lab + i + 1, t->lab[i]))
      return FAIL("equation: label '%c' repeats in one term (a diagonal), which is not "
                  "supported", t->lab[i]);
  return 0;
}

/* Transposes v (labels `from`) so its labels read `to` (a permutation of them). */
static Value *einsum_permute(Loader *L, const Onnx__NodeProto *np, Value *v, const char *from,
                             const char *to, const char *name) {
  int r = (int)strlen(from);
  int64_t perm[IR_MAX_RANK];
  bool identity = true;
  for (int i = 0; i < r; i++) {
    perm[i] = strchr(from, to[i]) - from;
    identity &= perm[i] == i;
  }
  if (identity)
    return name ? emit(L, np, OP_IDENTITY, &v, 1, NULL, 0, name) : v;
  int64_t *p = arena_alloc(L->g->arena, sizeof(int64_t) * (size_t)(r ? r : 1));
  memcpy(p, perm, sizeof(int64_t) * (size_t)r);
  Attr at = attr_make_ints("perm", p, r);
  return emit(L, np, OP_TRANSPOSE, &v, 1, &at, 1, name);
}

/* Sums v over the labels of `lab` that are not in `keep`; *lab is updated. */
static Value *einsum_sum_out(Loader *L, const Onnx__NodeProto *np, Value *v, char *lab,
                             const char *keep) {
  int64_t axes[IR_MAX_RANK];
  int na = 0, r = (int)strlen(lab);
  char left[IR_MAX_RANK + 1];
  int nl = 0;
  for (int i = 0; i < r; i++) {
    if (strchr(keep, lab[i]))
      left[nl++] = lab[i];
    else
      axes[na++] = i;
  }
  left[nl] = 0;
  if (!na)
    return v;
  int64_t *p = arena_alloc(L->g->arena, sizeof(int64_t) * (size_t)na);
  memcpy(p, axes, sizeof(int64_t) * (size_t)na);
  Attr at[2] = {attr_make_int("keepdims", 0), attr_make_ints("axes", p, na)};
  strcpy(lab, left);
  return emit(L, np, OP_REDUCE_SUM, &v, 1, at, 2, NULL);
}

static Value *einsum_reshape(Loader *L, const Onnx__NodeProto *np, Value *v, const int64_t *dims,
                             int r) {
  int64_t *p = arena_alloc(L->g->arena, sizeof(int64_t) * (size_t)(r ? r : 1));
  memcpy(p, dims, sizeof(int64_t) * (size_t)r);
  Attr at = attr_make_ints("shape", p, r);
  return emit(L, np, OP_RESHAPE, &v, 1, &at, 1, NULL);
}

static int b_einsum(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  (void)e;
  char eq[256];
  if (get_string(L, np, "equation", "", eq, sizeof eq))
    return -1;
  if (np->n_input < 1 || np->n_input > 2)
    return FAIL("Einsum with %zu operands is not supported (1 or 2 are)", np->n_input);
  Value *in[2] = {input(L, np, 0), np->n_input > 1 ? input(L, np, 1) : NULL};
  int nin = (int)np->n_input;
  for (int i = 0; i < nin; i++)
    if (!in[i])
      return FAIL("input %d is missing", i);
  const char *arrow = strstr(eq, "->");
  size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
  const char *comma = memchr(eq, ',', lhs_len);
  if ((nin == 2) != (comma != NULL) || (comma && memchr(comma + 1, ',', lhs_len - (size_t)(comma - eq) - 1)))
    return FAIL("equation '%s' does not have %d operands", eq, nin);
  Term t[2], out;
  const char *start[2] = {eq, comma ? comma + 1 : NULL};
  size_t len[2] = {comma ? (size_t)(comma - eq) : lhs_len, comma ? lhs_len - (size_t)(comma - eq) - 1 : 0};
  int ell = 0, es[2] = {0, 0};
  for (int i = 0; i < nin; i++) {
    bool has;
    es[i] = in[i]->type.shape.rank - einsum_letters(start[i], len[i], &has);
    if (!has)
      es[i] = 0;
    if (es[i] < 0)
      return FAIL("equation: operand %d has more labels than its rank %d", i,
                  in[i]->type.shape.rank);
    ell = es[i] > ell ? es[i] : ell;
  }
  for (int i = 0; i < nin; i++)
    if (einsum_term(L, start[i], len[i], in[i]->type.shape.rank, es[i], ell, &t[i]))
      return -1;
  if (arrow) {
    if (einsum_term(L, arrow + 2, strlen(arrow + 2), -1, ell, ell, &out))
      return -1;
  } else { /* implicit output: "..." first, then the labels used once, sorted */
    out.n = 0;
    for (int k = 0; k < ell; k++)
      out.lab[out.n++] = (char)('0' + k);
    for (int c = 'A'; c <= 'z'; c++) {
      int cnt = 0;
      for (int i = 0; i < nin; i++)
        cnt += strchr(t[i].lab, c) != NULL && c != 0;
      if (cnt == 1 && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
        out.lab[out.n++] = (char)c;
    }
    out.lab[out.n] = 0;
  }
  for (int i = 0; i < out.n; i++)
    if (!strchr(t[0].lab, out.lab[i]) && (nin < 2 || !strchr(t[1].lab, out.lab[i])))
      return FAIL("equation: output label '%c' is in no operand", out.lab[i]);
  const char *name = output_name(np, 0);
  if (nin == 1) {
    Value *v = einsum_sum_out(L, np, in[0], t[0].lab, out.lab);
    return v && einsum_permute(L, np, v, t[0].lab, out.lab, name) ? 0 : -1;
  }
  /* Labels only in one operand and not in the output are summed out first. */
  char keep0[2 * IR_MAX_RANK + 2], keep1[2 * IR_MAX_RANK + 2];
  snprintf(keep0, sizeof keep0, "%s%s", out.lab, t[1].lab);
  snprintf(keep1, sizeof keep1, "%s%s", out.lab, t[0].lab);
  Value *a = einsum_sum_out(L, np, in[0], t[0].lab, keep0);
  Value *b = a ? einsum_sum_out(L, np, in[1], t[1].lab, keep1) : NULL;
  if (!b)
    return -1;
  char batch[IR_MAX_RANK + 1] = "", m[IR_MAX_RANK + 1] = "", k[IR_MAX_RANK + 1] = "",
       n[IR_MAX_RANK + 1] = "";
  int cb = 0, cm = 0, ck = 0, cn = 0;
  for (const char *c = t[0].lab; *c; c++) {
    if (!strchr(t[1].lab, *c))
      m[cm++] = *c;
    else if (strchr(out.lab, *c))
      batch[cb++] = *c;
    else
      k[ck++] = *c;
  }
  for (const char *c = t[1].lab; *c; c++)
    if (!strchr(t[0].lab, *c))
      n[cn++] = *c;
  batch[cb] = m[cm] = k[ck] = n[cn] = 0;
  /* dims by label, static except batch labels */
  int64_t size[128];
  for (int i = 0; i < 128; i++)
    size[i] = -1;
  for (int s = 0; s < 2; s++) {
    Value *v = s ? b : a;
    for (int i = 0; i < t[s].n; i++) {
      Dim dm = v->type.shape.dims[i];
      unsigned char c = (unsigned char)t[s].lab[i];
      if (dm.sym && !strchr(batch, c))
        return FAIL("Einsum needs static dims outside the batch labels; '%c' is '%s'", c,
                    dm.sym);
      if (!dm.sym && (size[c] < 0 || size[c] == 1))
        size[c] = dm.n;
    }
  }
  char la[3 * IR_MAX_RANK + 1], lb[3 * IR_MAX_RANK + 1];
  snprintf(la, sizeof la, "%s%s%s", batch, m, k);
  snprintf(lb, sizeof lb, "%s%s%s", batch, k, n);
  a = einsum_permute(L, np, a, t[0].lab, la, NULL);
  b = a ? einsum_permute(L, np, b, t[1].lab, lb, NULL) : NULL;
  if (!b)
    return -1;
  int nb = (int)strlen(batch);
  int64_t dims[IR_MAX_RANK + 2], pm = 1, pk = 1, pn = 1;
  for (const char *c = m; *c; c++)
    pm *= size[(unsigned char)*c];
  for (const char *c = k; *c; c++)
    pk *= size[(unsigned char)*c];
  for (const char *c = n; *c; c++)
    pn *= size[(unsigned char)*c];
  for (int i = 0; i < nb; i++)
    dims[i] = 0; /* keep the batch dims as they are */
  dims[nb] = pm;
  dims[nb + 1] = pk;
  if (!(a = einsum_reshape(L, np, a, dims, nb + 2)))
    return -1;
  dims[nb] = pk;
  dims[nb + 1] = pn;
  if (!(b = einsum_reshape(L, np, b, dims, nb + 2)))
    return -1;
  Value *ab[2] = {a, b};
  Value *y = emit(L, np, OP_MATMUL, ab, 2, NULL, 0, NULL);
  if (!y)
    return -1;
  char ly[3 * IR_MAX_RANK + 1];
  snprintf(ly, sizeof ly, "%s%s%s", batch, m, n);
  int r = 0;
  for (int i = 0; i < nb; i++)
    dims[r++] = 0;
  for (const char *c = m; *c; c++)
    dims[r++] = size[(unsigned char)*c];
  for (const char *c = n; *c; c++)
    dims[r++] = size[(unsigned char)*c];
  if (r > IR_MAX_RANK)
    return FAIL("Einsum's result has rank %d; gpucc supports at most %d", r, IR_MAX_RANK);
  if (!(y = einsum_reshape(L, np, y, dims, r)))
    return -1;
  return einsum_permute(L, np, y, ly, out.lab, name) ? 0 : -1;
}

/* ---------------------------------------------------------------- the op table */

/* Each row names the op's versions its builder implements, as since_versions of
 * onnx-versions.inc: a node of a version outside [first, last] is reported as
 * unsupported. A version that ONNX adds later is thus refused until someone checks what
 * it changed and raises `last`. */
#define SIMPLE(onnx, op, first, last) {onnx, op, first, last, b_simple, ""}
#define REDUCE(onnx, op, last) {onnx, op, 1, last, b_reduce, "axes,keepdims,noop_with_empty_axes"}
/* Binary ops whose versions before 7 broadcast B onto A by the legacy rule. */
#define BINARY(onnx, op, last) {onnx, op, 1, last, b_binary, "axis,broadcast"}
static const OnnxOp onnx_ops[] = {
    /* pointwise */
    SIMPLE("Neg", OP_NEG, 1, 13), SIMPLE("Abs", OP_ABS, 1, 13), SIMPLE("Sign", OP_SIGN, 9, 13),
    SIMPLE("Exp", OP_EXP, 1, 13), SIMPLE("Log", OP_LOG, 1, 13), SIMPLE("Sqrt", OP_SQRT, 1, 13),
    SIMPLE("Reciprocal", OP_RECIP, 1, 13), SIMPLE("Floor", OP_FLOOR, 1, 13),
    SIMPLE("Ceil", OP_CEIL, 1, 13), SIMPLE("Round", OP_ROUND, 11, 22),
    SIMPLE("Sin", OP_SIN, 7, 22), SIMPLE("Cos", OP_COS, 7, 22), SIMPLE("Tan", OP_TAN, 7, 22),
    SIMPLE("Asin", OP_ASIN, 7, 22), SIMPLE("Acos", OP_ACOS, 7, 22),
    SIMPLE("Atan", OP_ATAN, 7, 22), SIMPLE("Sinh", OP_SINH, 9, 22),
    SIMPLE("Cosh", OP_COSH, 9, 22), SIMPLE("Asinh", OP_ASINH, 9, 22),
    SIMPLE("Acosh", OP_ACOSH, 9, 22), SIMPLE("Atanh", OP_ATANH, 9, 22),
    SIMPLE("Tanh", OP_TANH, 1, 13), SIMPLE("Erf", OP_ERF, 9, 13),
    SIMPLE("Sigmoid", OP_SIGMOID, 1, 13), SIMPLE("Relu", OP_RELU, 1, 14),
    SIMPLE("Softplus", OP_SOFTPLUS, 1, 22), SIMPLE("Softsign", OP_SOFTSIGN, 1, 22),
    SIMPLE("Not", OP_NOT, 1, 1), SIMPLE("IsNaN", OP_IS_NAN, 9, 20),
    BINARY("Add", OP_ADD, 14), BINARY("Sub", OP_SUB, 14), BINARY("Mul", OP_MUL, 14),
    BINARY("Div", OP_DIV, 14), BINARY("Equal", OP_EQUAL, 19), BINARY("Less", OP_LESS, 13),
    BINARY("Greater", OP_GREATER, 13), BINARY("And", OP_AND, 7), BINARY("Or", OP_OR, 7),
    BINARY("Xor", OP_XOR, 7),
    SIMPLE("LessOrEqual", OP_LESS_EQUAL, 12, 16),
    SIMPLE("GreaterOrEqual", OP_GREATER_EQUAL, 12, 16), SIMPLE("Where", OP_WHERE, 9, 16),
    {"PRelu", OP_PRELU, 1, 16, b_prelu, ""},
    SIMPLE("MatMul", OP_MATMUL, 1, 13), SIMPLE("Mish", OP_MISH, 18, 22),
    SIMPLE("BitwiseNot", OP_BITWISE_NOT, 18, 18), SIMPLE("BitwiseAnd", OP_BITWISE_AND, 18, 18),
    SIMPLE("BitwiseOr", OP_BITWISE_OR, 18, 18), SIMPLE("BitwiseXor", OP_BITWISE_XOR, 18, 18),
    {"BitShift", OP_BIT_SHIFT, 11, 11, b_simple, "direction"},
    {"Mod", OP_MOD, 10, 13, b_simple, "fmod"},
    {"IsInf", OP_IS_INF, 10, 20, b_simple, "detect_negative,detect_positive"},
    SIMPLE("HardSwish", OP_HARD_SWISH, 14, 22),
    {"Gelu", OP_GELU, 20, 20, b_simple, "approximate"},
    {"LeakyRelu", OP_LEAKY_RELU, 1, 16, b_simple, "alpha"},
    {"Elu", OP_ELU, 1, 22, b_simple, "alpha"},
    {"Celu", OP_CELU, 12, 12, b_simple, "alpha"},
    {"Selu", OP_SELU, 1, 22, b_simple, "alpha,gamma"},
    {"ThresholdedRelu", OP_THRESHOLDED_RELU, 10, 22, b_simple, "alpha"},
    {"Shrink", OP_SHRINK, 9, 9, b_simple, "bias,lambd"},
    {"HardSigmoid", OP_HARD_SIGMOID, 1, 22, b_simple, "alpha,beta"},
    {"Pow", OP_POW, 1, 15, b_pow, "axis,broadcast"},
    {"Max", OP_MAX, 1, 13, b_variadic, ""},
    {"Min", OP_MIN, 1, 13, b_variadic, ""},
    {"Sum", OP_ADD, 1, 13, b_variadic, ""},
    {"Mean", OP_ADD, 1, 13, b_mean, ""},
    {"Identity", OP_IDENTITY, 1, 24, b_identity, ""},
    {"Dropout", OP_IDENTITY, 1, 22, b_identity, "is_test,ratio,seed"},
    {"Clip", OP_CLIP, 1, 13, b_clip, "min,max"},
    {"Cast", OP_CAST, 1, 24, b_cast, "round_mode,saturate,to"},
    {"CastLike", OP_CAST, 15, 24, b_cast_like, "round_mode,saturate"},
    /* reductions and normalizations */
    REDUCE("ReduceSum", OP_REDUCE_SUM, 13), REDUCE("ReduceMean", OP_REDUCE_MEAN, 18),
    REDUCE("ReduceMax", OP_REDUCE_MAX, 20), REDUCE("ReduceMin", OP_REDUCE_MIN, 20),
    REDUCE("ReduceProd", OP_REDUCE_PROD, 18), REDUCE("ReduceL1", OP_REDUCE_L1, 18),
    REDUCE("ReduceL2", OP_REDUCE_L2, 18), REDUCE("ReduceSumSquare", OP_REDUCE_SUM_SQUARE, 18),
    REDUCE("ReduceLogSumExp", OP_REDUCE_LOG_SUM_EXP, 18),
    REDUCE("ReduceLogSum", OP_REDUCE_SUM, 18),
    {"ArgMax", OP_ARGMAX, 1, 13, b_argmax, "axis,keepdims,select_last_index"},
    {"ArgMin", OP_ARGMIN, 1, 13, b_argmax, "axis,keepdims,select_last_index"},
    {"Softmax", OP_SOFTMAX, 1, 13, b_softmax, "axis"},
    {"LogSoftmax", OP_LOG_SOFTMAX, 1, 13, b_softmax, "axis"},
    {"Hardmax", OP_HARDMAX, 1, 13, b_softmax, "axis"},
    {"LayerNormalization", OP_LAYER_NORM, 17, 17, b_layer_norm, "axis,epsilon,stash_type"},
    {"RMSNormalization", OP_RMS_NORM, 23, 23, b_layer_norm, "axis,epsilon,stash_type"},
    {"BatchNormalization", OP_BATCH_NORM, 1, 15, b_batch_norm,
     "epsilon,is_test,momentum,spatial,training_mode"},
    {"InstanceNormalization", OP_INSTANCE_NORM, 1, 22, b_simple, "epsilon"},
    {"LRN", OP_LRN, 1, 13, b_simple, "alpha,beta,bias,size"},
    {"LpNormalization", OP_LP_NORM, 1, 22, b_simple, "axis,p"},
    {"MeanVarianceNormalization", OP_MEAN_VARIANCE_NORM, 9, 13, b_simple, "axes"},
    {"NegativeLogLikelihoodLoss", OP_NLL_LOSS, 12, 22, b_sce, "reduction,ignore_index"},
    {"SoftmaxCrossEntropyLoss", OP_SOFTMAX_CROSS_ENTROPY, 12, 13, b_sce,
     "reduction,ignore_index"},
    /* convolutions and pools */
    {"Conv", OP_CONV, 1, 22, b_conv, "auto_pad,dilations,group,kernel_shape,pads,strides"},
    {"ConvTranspose", OP_CONV_TRANSPOSE, 1, 22, b_conv_transpose,
     "auto_pad,dilations,group,kernel_shape,output_padding,output_shape,pads,strides"},
    {"MaxPool", OP_MAX_POOL, 1, 22, b_pool,
     "auto_pad,ceil_mode,dilations,kernel_shape,pads,storage_order,strides"},
    {"AveragePool", OP_AVERAGE_POOL, 1, 22, b_pool,
     "auto_pad,ceil_mode,count_include_pad,dilations,kernel_shape,pads,strides"},
    SIMPLE("GlobalAveragePool", OP_GLOBAL_AVERAGE_POOL, 1, 22),
    SIMPLE("GlobalMaxPool", OP_GLOBAL_MAX_POOL, 1, 22),
    /* shapes and layout */
    {"Reshape", OP_RESHAPE, 1, 24, b_reshape, "allowzero,shape"},
    {"Transpose", OP_TRANSPOSE, 1, 24, b_transpose, "perm"},
    {"Squeeze", OP_SQUEEZE, 1, 24, b_squeeze, "axes"},
    {"Unsqueeze", OP_UNSQUEEZE, 1, 24, b_squeeze, "axes"},
    {"Flatten", OP_FLATTEN, 1, 24, b_flatten, "axis"},
    {"Expand", OP_EXPAND, 8, 13, b_expand, ""},
    {"Concat", OP_CONCAT, 1, 13, b_concat, "axis"},
    {"Slice", OP_SLICE, 1, 13, b_slice, "starts,ends,axes"},
    {"Split", OP_SPLIT, 1, 18, b_split, "axis,split,num_outputs"},
    {"Gather", OP_GATHER, 1, 13, b_gather, "axis"},
    {"GatherElements", OP_GATHER_ELEMENTS, 11, 13, b_gather, "axis"},
    {"ScatterElements", OP_SCATTER_ELEMENTS, 11, 18, b_scatter_elements, "axis,reduction"},
    {"GatherND", OP_GATHER_ND, 11, 13, b_simple, "batch_dims"},
    {"ScatterND", OP_SCATTER_ND, 11, 18, b_simple, "reduction"},
    {"ReverseSequence", OP_REVERSE_SEQUENCE, 10, 10, b_simple, "batch_axis,time_axis"},
    {"GridSample", OP_GRID_SAMPLE, 16, 22, b_simple, "align_corners,mode,padding_mode"},
    {"RoiAlign", OP_ROI_ALIGN, 10, 22, b_roi_align,
     "coordinate_transformation_mode,mode,output_height,output_width,sampling_ratio,spatial_scale"},
    {"MaxUnpool", OP_MAX_UNPOOL, 9, 22, b_max_unpool, "kernel_shape,pads,strides"},
    {"Scatter", OP_SCATTER_ELEMENTS, 9, 9, b_scatter_elements, "axis"},
    {"Compress", OP_GATHER, 9, 11, b_compress, "axis"},
    {"Tile", OP_TILE, 1, 13, b_tile, ""},
    {"Pad", OP_PAD, 1, 24, b_pad, "mode,paddings,pads,value"},
    {"Resize", OP_RESIZE, 10, 19, b_resize,
     "antialias,axes,coordinate_transformation_mode,cubic_coeff_a,exclude_outside,"
     "extrapolation_value,keep_aspect_ratio_policy,mode,nearest_mode"},
    /* Upsample-1 (height_scale, width_scale) was experimental, never in a released opset */
    {"Upsample", OP_RESIZE, 7, 9, b_resize, "mode,scales"},
    {"DepthToSpace", OP_DEPTH_TO_SPACE, 1, 13, b_simple, "blocksize,mode"},
    {"SpaceToDepth", OP_SPACE_TO_DEPTH, 1, 13, b_simple, "blocksize"},
    {"TopK", OP_TOPK, 1, 24, b_topk, "axis,k,largest,sorted"},
    {"CumSum", OP_CUMSUM, 11, 14, b_cumsum, "exclusive,reverse"},
    {"Trilu", OP_TRILU, 14, 14, b_trilu, "upper"},
    {"OneHot", OP_ONE_HOT, 9, 11, b_one_hot, "axis"},
    {"Range", OP_RANGE, 11, 11, b_simple, ""},
    {"Gemm", OP_MATMUL, 1, 13, b_gemm, "alpha,beta,broadcast,transA,transB"},
    {"Einsum", OP_MATMUL, 12, 12, b_einsum, "equation"},
    {"Det", OP_DET, 11, 22, b_simple, ""},
    /* values known at load */
    {"Constant", OP_COUNT, 1, 24, b_constant,
     "value,value_float,value_floats,value_int,value_ints"},
    {"Shape", OP_COUNT, 1, 24, b_shape, "start,end"},
    {"Size", OP_COUNT, 1, 24, b_size, ""},
    {"ConstantOfShape", OP_EXPAND, 9, 24, b_constant_of_shape, "value"},
    {"EyeLike", OP_COUNT, 9, 22, b_eye_like, "dtype,k"},
    {"HannWindow", OP_COUNT, 17, 17, b_window, "output_datatype,periodic"},
    {"HammingWindow", OP_COUNT, 17, 17, b_window, "output_datatype,periodic"},
    {"BlackmanWindow", OP_COUNT, 17, 17, b_window, "output_datatype,periodic"},
};
#undef BINARY
#undef REDUCE
#undef SIMPLE

const OnnxOp *onnx_find_op(const char *name) {
  for (size_t i = 0; i < sizeof onnx_ops / sizeof *onnx_ops; i++)
    if (!strcmp(onnx_ops[i].name, name))
      return &onnx_ops[i];
  return NULL;
}

const OnnxOp *onnx_op_table(size_t *n) {
  *n = sizeof onnx_ops / sizeof *onnx_ops;
  return onnx_ops;
}

/* ---------------------------------------------------------------- op versions */

#include "onnx-versions.inc"

_Static_assert(ONNX_VERSIONS_OPSET_MAX == OPSET_MAX,
               "onnx-versions.inc must cover the opsets gpucc reads (gen_versions.py --max-opset)");

/* The rows of op `op` in onnx_versions (sorted by op, then since_version); *n = 0 when
 * ONNX's default domain has no such op. */
static const OnnxVersion *op_history(const char *op, size_t *n) {
  size_t lo = 0, hi = sizeof onnx_versions / sizeof *onnx_versions, end;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (strcmp(onnx_versions[mid].op, op) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (end = lo; end < sizeof onnx_versions / sizeof *onnx_versions &&
                 !strcmp(onnx_versions[end].op, op); end++)
    ;
  *n = end - lo;
  return &onnx_versions[lo];
}

const OnnxVersion *onnx_op_version(const char *op, int64_t opset) {
  size_t n;
  const OnnxVersion *h = op_history(op, &n), *v = NULL;
  for (size_t i = 0; i < n && h[i].since <= opset; i++)
    v = &h[i];
  return v && v->status != VS_DEPRECATED ? v : NULL;
}

const OnnxVersion *onnx_versions_table(size_t *n) {
  *n = sizeof onnx_versions / sizeof *onnx_versions;
  return onnx_versions;
}

static bool in_list(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    size_t k = strcspn(p, ",");
    if (k == n && !strncmp(p, name, n))
      return true;
    p += k + (p[k] == ',');
  }
  return false;
}

static bool input_is_const(const Loader *L, const Onnx__NodeProto *np, size_t i) {
  return i >= np->n_input || onnx_value_is_const(L, np->input[i]);
}

/* Appends to why (at offset at) the graph inputs that value `name` is computed from, as
 * the --const flags that would make it a constant; *found counts them. Returns the new
 * offset. */
static int const_blockers(const Loader *L, const char *name, char *why, size_t n, int at,
                          int *found) {
  size_t nn = L->gp->n_node, cap = 1024, top = 0;
  bool *seen = calloc(nn + 1, sizeof *seen);
  const char **stack = malloc(cap * sizeof *stack);
  if (seen && stack)
    stack[top++] = name;
  while (top && at > 0 && (size_t)at < n) {
    const char *v = stack[--top];
    if (onnx_value_is_const(L, v))
      continue;
    const int *p = onnx_map_get(&L->producers, v);
    if (p && *p == -1) {
      char flag[128];
      snprintf(flag, sizeof flag, " --const %.100s=", v);
      if (!strstr(why, flag)) /* each input once */
        at += snprintf(why + at, n - (size_t)at, "%s --const %.100s=FILE.npy",
                       (*found)++ ? "" : ": give graph inputs values with", v);
      continue;
    }
    if (!p || *p < 0 || seen[*p])
      continue;
    seen[*p] = true;
    const Onnx__NodeProto *q = L->gp->node[*p];
    for (size_t j = 0; j < q->n_input && top < cap; j++)
      stack[top++] = q->input[j];
  }
  free(seen);
  free(stack);
  return at;
}

/* The attribute values gpucc supports, where it does not support them all. */
static const struct {
  const char *op, *attr, *allowed;
} attr_values[] = {
    {"LayerNormalization", "stash_type", "1"},
    {"RMSNormalization", "stash_type", "1"},
    {"Cast", "saturate", "1"},
    {"CastLike", "saturate", "1"},
    {"Gelu", "approximate", "none,tanh"},
    {"Resize", "coordinate_transformation_mode",
     "half_pixel,half_pixel_symmetric,pytorch_half_pixel,align_corners,asymmetric"},
    {"Resize", "mode", "nearest,linear,cubic"},
    {"Resize", "antialias", "0"},
    {"Resize", "keep_aspect_ratio_policy", "stretch"},
    {"Upsample", "mode", "nearest,linear,bilinear"},
    {"Pad", "mode", "constant,reflect,edge"},
    {"MaxPool", "storage_order", "0"},
    {"BatchNormalization", "training_mode", "0"},
    {"BatchNormalization", "spatial", "1"},
};

/* The first input of op `op` that must be constant from its version `from` on, and the
 * last. */
static const struct {
  const char *op;
  int from, first, last;
} const_inputs[] = {
    {"Reshape", 5, 1, 1},    {"Expand", 8, 1, 1},      {"Squeeze", 13, 1, 1},
    {"Unsqueeze", 13, 1, 1}, {"Slice", 10, 1, 4},      {"Split", 1, 1, 1},
    {"ReduceSum", 13, 1, 1}, {"ReduceMean", 18, 1, 1}, {"ReduceMax", 18, 1, 1},
    {"ReduceMin", 18, 1, 1}, {"ReduceProd", 18, 1, 1}, {"ReduceL1", 18, 1, 1},
    {"ReduceL2", 18, 1, 1},  {"ReduceSumSquare", 18, 1, 1}, {"ReduceLogSum", 18, 1, 1},
    {"ReduceLogSumExp", 18, 1, 1}, {"Dropout", 12, 1, 2}, {"Pad", 11, 1, 3},
    {"Resize", 10, 1, 3},    {"Upsample", 9, 1, 1},    {"TopK", 10, 1, 1},
    {"CumSum", 11, 1, 1},    {"Trilu", 14, 1, 1},      {"Tile", 1, 1, 2},
    {"OneHot", 9, 1, 1},     {"ConstantOfShape", 9, 0, 0}, {"Range", 11, 0, 2},
    {"Compress", 9, 1, 1},   {"HannWindow", 17, 0, 0}, {"HammingWindow", 17, 0, 0},
    {"BlackmanWindow", 17, 0, 0}, {"MaxUnpool", 9, 2, 2},
};

static bool output_used(const Loader *L, const Onnx__NodeProto *np, size_t i) {
  const char *o = output_name(np, i);
  const int *u = o ? onnx_map_get(&L->uses, o) : NULL;
  return u && *u > 0;
}

/* Why a BatchNormalization or Dropout node of version `ver` runs in training mode, which
 * gpucc does not compile; NULL in inference mode. Before version 7 both say so with
 * is_test, 0 (training) by default, though a Dropout of ratio 0 changes nothing either
 * way; BatchNormalization 7 to 9 trains when it has outputs beyond Y. Later versions
 * take a training_mode attribute (attr_values) or input (its builder). */
static const char *training(const Onnx__NodeProto *np, const char *op, int ver) {
  bool bn = !strcmp(op, "BatchNormalization");
  if (!bn && strcmp(op, "Dropout") != 0)
    return NULL;
  if (ver < 7) {
    const Onnx__AttributeProto *t = find_attr(np, "is_test"), *r = find_attr(np, "ratio");
    if ((t && t->i) || (!bn && r && r->f == 0))
      return NULL;
    return "is_test=0";
  }
  for (size_t i = 1; bn && ver < 14 && i < np->n_output; i++)
    if (output_name(np, i))
      return "outputs beyond Y";
  return NULL;
}

/* Why op `op`, which gpucc knows, does not exist at `opset`. */
static const char *absent_op(const char *op, int64_t opset, char *why, size_t n) {
  size_t nh;
  const OnnxVersion *h = op_history(op, &nh);
  int gone = 0;
  for (size_t i = 0; i < nh && h[i].since <= opset; i++)
    gone = h[i].status == VS_DEPRECATED ? h[i].since : 0;
  if (gone)
    snprintf(why, n, "op %s does not exist in opset %" PRId64 " (ONNX deprecated it in opset %d)",
             op, opset, gone);
  else if (nh)
    snprintf(why, n, "op %s does not exist in opset %" PRId64 " (ONNX added it in opset %d)", op,
             opset, h[0].since);
  else
    snprintf(why, n, "op %s is not an op of ONNX's default domain", op);
  return why;
}

/* Why a node cannot be compiled, in a few words naming the op ("op Conv is not
 * supported", "op ArgMax with select_last_index=1 ..."); NULL when it can. The text is
 * also the grouping key of onnx_check_ops. */
const char *onnx_unsupported(const Loader *L, const Onnx__NodeProto *np, char *why,
                               size_t n) {
  const char *op = S(np->op_type);
  if (!is_default_domain(np->domain)) {
    snprintf(why, n, "op %s of domain '%s' (gpucc reads only the default domain)", op,
             np->domain);
    return why;
  }
  const OnnxOp *e = onnx_find_op(op);
  if (!e) {
    snprintf(why, n, "op %s is not supported", op);
    return why;
  }
  const OnnxVersion *v = onnx_op_version(op, L->opset);
  if (!v)
    return absent_op(op, L->opset, why, n);
  if (v->since < e->first_version || v->since > e->last_version) {
    snprintf(why, n, "op %s version %d is not supported (gpucc implements versions %d to %d)",
             op, v->since, e->first_version, e->last_version);
    return why;
  }
  for (size_t i = 0; i < np->n_attribute; i++) {
    const Onnx__AttributeProto *a = np->attribute[i];
    if (!in_list(v->attrs, S(a->name))) {
      snprintf(why, n, "op %s version %d has no attribute '%s'", op, v->since, S(a->name));
      return why;
    }
    if (in_list(ignored_attrs, S(a->name)))
      continue;
    if (!in_list(e->attrs, S(a->name))) {
      snprintf(why, n, "op %s with attribute '%s' is not supported", op, S(a->name));
      return why;
    }
    int t = attr_type(a);
    char val[48];
    if (t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)
      snprintf(val, sizeof val, "%.*s", (int)(a->s.len > 40 ? 40 : a->s.len),
               a->s.len ? (const char *)a->s.data : "");
    else if (t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
      snprintf(val, sizeof val, "%" PRId64, a->i);
    else
      continue;
    for (size_t k = 0; k < sizeof attr_values / sizeof *attr_values; k++)
      if (!strcmp(op, attr_values[k].op) && !strcmp(a->name, attr_values[k].attr) &&
          (strlen(val) != strnlen(val, 40) || !in_list(attr_values[k].allowed, val))) {
        snprintf(why, n, "op %s with %s=%s is not supported", op, a->name, val);
        return why;
      }
  }
  const char *train = training(np, op, v->since);
  if (train) {
    snprintf(why, n, "op %s in training mode (%s) is not supported", op, train);
    return why;
  }
  if (!strcmp(op, "Cast") && find_attr(np, "to")) {
    int64_t to = cast_type(np, v->since);
    DType dt;
    if (to < 0 || to > INT32_MAX || dtype_from_onnx((int32_t)to, &dt)) {
      snprintf(why, n, "op Cast to %s is not supported",
               onnx_type_name(to < 0 || to > 64 ? -1 : (int32_t)to));
      return why;
    }
  }
  for (size_t k = 0; k < sizeof const_inputs / sizeof *const_inputs; k++) {
    if (strcmp(op, const_inputs[k].op) != 0 || v->since < const_inputs[k].from)
      continue;
    int first = -1, found = 0, at = 0;
    for (int i = const_inputs[k].first; i <= const_inputs[k].last; i++) {
      if (input_is_const(L, np, (size_t)i))
        continue;
      if (first < 0)
        at = snprintf(why, n, "op %s with input %d computed at run time is not supported (it "
                      "must be a constant", op, first = i);
      at = const_blockers(L, np->input[i], why, n, at, &found);
    }
    if (first >= 0) {
      if (at > 0 && (size_t)at < n)
        snprintf(why + at, n - (size_t)at, ")");
      return why;
    }
  }
  if (!strcmp(op, "Einsum")) {
    const Onnx__AttributeProto *a = find_attr(np, "equation");
    const char *s = a ? (const char *)a->s.data : "";
    size_t len = a ? a->s.len : 0, term = 0;
    if (np->n_input > 2) {
      snprintf(why, n, "op Einsum with %zu operands is not supported (1 or 2 are)", np->n_input);
      return why;
    }
    for (size_t i = 0; i < len; i++) { /* a label twice in one term: a diagonal */
      if (s[i] == ',' || s[i] == '-') {
        term = i + 1;
        continue;
      }
      bool letter = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z');
      if (letter && memchr(s + term, s[i], i - term)) {
        snprintf(why, n, "op Einsum with a repeated label in one term (a diagonal) is not "
                 "supported");
        return why;
      }
    }
  }
  if (!strcmp(op, "MaxPool") && output_used(L, np, 1)) {
    snprintf(why, n, "op MaxPool with its Indices output used is not supported");
    return why;
  }
  if (!strcmp(op, "BatchNormalization") && (output_used(L, np, 1) || output_used(L, np, 2))) {
    snprintf(why, n, "op BatchNormalization with its running statistics outputs used is not "
             "supported (training)");
    return why;
  }
  return NULL;
}

/* Ops whose result is random, or depends on more than the values of their inputs. */
static bool never_folded(const char *op) {
  static const char *const ops[] = {"RandomUniform", "RandomNormal", "RandomUniformLike",
                                    "RandomNormalLike", "Bernoulli", "Multinomial"};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(op, ops[i]))
      return true;
  return false;
}

bool onnx_node_foldable(const Loader *L, const Onnx__NodeProto *np, const bool *in_const) {
  const char *op = S(np->op_type);
  const OnnxOp *e = is_default_domain(np->domain) ? onnx_find_op(op) : NULL;
  if (!e || never_folded(op))
    return false;
  /* The shape of a tensor is known once its input shapes are (the loader then reports
   * a symbolic dim it cannot fold, naming the flag that binds it). */
  if (!strcmp(op, "Shape") || !strcmp(op, "Size") || !strcmp(op, "Constant"))
    return true;
  (void)L;
  for (size_t i = 0; i < np->n_input; i++)
    if (!in_const[i])
      return false;
  return np->n_input > 0;
}
