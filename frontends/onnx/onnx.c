/* onnx.c: the ONNX frontend. Reads a ModelProto with protobuf-c (the bindings are
 * generated at build time from onnx.proto beside this file) and builds an IR graph:
 *   1. read and unpack the model; find the opset of the default domain,
 *   2. scan every node for support, so an unsupported op or attribute value is reported
 *      before any other work (and onnx_check_ops can list them all at once),
 *   3. check the names (each value defined once, every input defined) and order the
 *      nodes topologically: ONNX requires sorted nodes, but exporters and hand-edited
 *      models get it wrong, and sorting costs little, so unsorted models load,
 *   4. initializers become constants, the other graph inputs become inputs,
 *   5. each node becomes one or more IR nodes through the op table below, with types
 *      inferred as the nodes are added.
 * Errors name the model file and, for a node, its name, index, op type and opset. */
/* realpath() is X/Open, beyond the POSIX level the build asks for. */
#define _XOPEN_SOURCE 700

#include "frontends/frontends.h"
#include "onnx.pb-c.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "raw_data is little-endian; this reader copies it as it is"
#endif

enum { OPSET_MIN = 7, OPSET_MAX = 21 };
/* protobuf messages are limited to 2 GiB; bigger models keep weights in external data. */
#define MODEL_MAX_BYTES ((size_t)INT32_MAX)

#define S(x) ((x) ? (x) : "")

/* ---------------------------------------------------------------- name maps */

/* An open-addressing map from value names (borrowed from the unpacked model) to ints. */
typedef struct NameMap {
  const char **keys;
  int *vals;
  size_t cap, n;
} NameMap;

static uint64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static size_t map_slot(const NameMap *m, const char *k) {
  size_t i = (size_t)name_hash(k) & (m->cap - 1);
  while (m->keys[i] && strcmp(m->keys[i], k) != 0)
    i = (i + 1) & (m->cap - 1);
  return i;
}

static int map_init(NameMap *m, size_t n) {
  m->cap = 16;
  while (m->cap < 2 * n + 2)
    m->cap *= 2;
  m->n = 0;
  m->keys = calloc(m->cap, sizeof *m->keys);
  m->vals = calloc(m->cap, sizeof *m->vals);
  return m->keys && m->vals ? 0 : -1;
}

static void map_free(NameMap *m) {
  free(m->keys);
  free(m->vals);
}

static int *map_get(const NameMap *m, const char *k) {
  size_t i = map_slot(m, k);
  return m->keys[i] ? &m->vals[i] : NULL;
}

/* Inserts k with value v unless it is there; returns the entry. The map is sized for
 * every name up front, so it never fills. */
static int *map_put(NameMap *m, const char *k, int v) {
  size_t i = map_slot(m, k);
  if (!m->keys[i]) {
    m->keys[i] = k;
    m->vals[i] = v;
    m->n++;
  }
  return &m->vals[i];
}

/* ---------------------------------------------------------------- the loader */

typedef struct Loader Loader;
typedef struct OnnxOp OnnxOp;
typedef int (*BuildFn)(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e);

/* One row of the op table: the ONNX op, the IR op it maps to (when one does), the
 * opsets it exists in here, its builder and the attributes gpucc understands (any other
 * attribute makes the node unsupported). */
struct OnnxOp {
  const char *name;
  Op op;
  int min_opset;
  BuildFn build;
  const char *attrs; /* comma-separated */
};

struct Loader {
  const char *path; /* the model, for messages */
  char *dir;        /* folder of external data; NULL when there is none */
  const OnnxOptions *opt;
  Diag *d;
  Onnx__ModelProto *model;
  Onnx__GraphProto *gp;
  int64_t opset;
  Graph *g;
  size_t model_bytes;
  uint64_t weight_bytes, weight_limit, external_bytes;
  NameMap producers; /* value name -> index of the node defining it; -1 input, -2 initializer */
  NameMap uses;      /* value name -> uses by nodes and graph outputs */
  int cur;           /* the node being built (-1: none), for messages */
  const char *origin;
};

static const char *node_label(const Onnx__NodeProto *np, int idx, char *buf, size_t n) {
  if (np->name && *np->name)
    return np->name;
  snprintf(buf, n, "%s#%d", S(np->op_type), idx);
  return buf;
}

static int model_error(Loader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int model_error(Loader *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_verror(L->d, (SrcLoc){.file = L->path}, fmt, ap);
  va_end(ap);
  return -1;
}

static int node_error(Loader *L, int idx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int node_error(Loader *L, int idx, const char *fmt, ...) {
  char msg[3072], lb[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const Onnx__NodeProto *np = L->gp->node[idx];
  return model_error(L, "node '%s' (#%d, %s, opset %" PRId64 "): %s",
                     node_label(np, idx, lb, sizeof lb), idx, S(np->op_type), L->opset, msg);
}

/* Errors while building a node name it; others name only the model. */
#define FAIL(...) (L->cur >= 0 ? node_error(L, L->cur, __VA_ARGS__) : model_error(L, __VA_ARGS__))

/* ---------------------------------------------------------------- element types */

static const char *const onnx_type_names[] = {
    "UNDEFINED", "FLOAT",     "UINT8",      "INT8",     "UINT16",         "INT16",
    "INT32",     "INT64",     "STRING",     "BOOL",     "FLOAT16",        "DOUBLE",
    "UINT32",    "UINT64",    "COMPLEX64",  "COMPLEX128", "BFLOAT16",     "FLOAT8E4M3FN",
    "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4"};

static const char *onnx_type_name(int32_t t) {
  if (t >= 0 && (size_t)t < sizeof onnx_type_names / sizeof *onnx_type_names)
    return onnx_type_names[t];
  return "an unknown type";
}

static int dtype_from_onnx(int32_t t, DType *out) {
  switch (t) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: *out = DT_F32; return 0;
  case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: *out = DT_F64; return 0;
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: *out = DT_F16; return 0;
  case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: *out = DT_BF16; return 0;
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E4M3FN: *out = DT_F8E4M3; return 0;
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E5M2: *out = DT_F8E5M2; return 0;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *out = DT_I64; return 0;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *out = DT_I32; return 0;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: *out = DT_I16; return 0;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: *out = DT_I8; return 0;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: *out = DT_U8; return 0;
  case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: *out = DT_BOOL; return 0;
  default: return -1;
  }
}

/* ---------------------------------------------------------------- weights */

/* Counts bytes of constant data against the limit before they are allocated. */
static int charge_weights(Loader *L, const char *what, uint64_t nbytes) {
  if (nbytes > L->weight_limit || L->weight_bytes > L->weight_limit - nbytes)
    return FAIL("%s needs %" PRIu64 " bytes, which takes the weights past the limit of %" PRIu64
                " bytes (--max-weight-bytes)",
                what, nbytes, L->weight_limit);
  L->weight_bytes += nbytes;
  return 0;
}

static int parse_i64(const char *s, int64_t *out) {
  if (!s || !*s || *s == '-' || *s == '+')
    return -1;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (*end || errno)
    return -1;
  *out = v;
  return 0;
}

/* Reads `nbytes` of external data for tensor `what` into dst. The location must stay
 * inside the model's folder: no absolute path, no "..", and no symlink leading out. */
static int read_external(Loader *L, const Onnx__TensorProto *tp, const char *what, void *dst,
                         uint64_t nbytes) {
  const char *loc = NULL;
  int64_t offset = 0, length = -1;
  for (size_t i = 0; i < tp->n_external_data; i++) {
    const Onnx__StringStringEntryProto *e = tp->external_data[i];
    const char *k = S(e->key), *v = S(e->value);
    if (!strcmp(k, "location"))
      loc = v;
    else if (!strcmp(k, "offset") && parse_i64(v, &offset))
      return FAIL("%s: external data offset '%s' is not a non-negative integer", what, v);
    else if (!strcmp(k, "length") && parse_i64(v, &length))
      return FAIL("%s: external data length '%s' is not a non-negative integer", what, v);
  }
  if (!loc || !*loc)
    return FAIL("%s: external data has no location", what);
  if (!L->dir)
    return FAIL("%s: external data '%s' needs the model's folder, and this model was not "
                "read from a file",
                what, loc);
  if (loc[0] == '/')
    return FAIL("%s: external data location '%s' is an absolute path; it must be relative to "
                "the model's folder",
                what, loc);
  for (const char *p = loc; *p;) {
    size_t n = strcspn(p, "/\\");
    if (n == 2 && p[0] == '.' && p[1] == '.')
      return FAIL("%s: external data location '%s' contains '..'; it must stay inside the "
                  "model's folder",
                  what, loc);
    p += n;
    while (*p == '/' || *p == '\\')
      p++;
  }
  size_t plen = strlen(L->dir) + strlen(loc) + 2;
  char *path = malloc(plen);
  char *real_dir = realpath(L->dir, NULL);
  char *real = NULL;
  FILE *f = NULL;
  int rc = -1;
  if (!path || !real_dir) {
    FAIL("%s: cannot resolve the model's folder '%s': %s", what, L->dir, strerror(errno));
    goto out;
  }
  snprintf(path, plen, "%s/%s", L->dir, loc);
  real = realpath(path, NULL);
  if (!real) {
    FAIL("%s: cannot open external data '%s': %s", what, path, strerror(errno));
    goto out;
  }
  size_t dn = strlen(real_dir);
  if (strncmp(real, real_dir, dn) != 0 || (real[dn] != '/' && strcmp(real_dir, "/") != 0)) {
    FAIL("%s: external data '%s' resolves to '%s', outside the model's folder", what, loc,
         real);
    goto out;
  }
  f = fopen(real, "rb");
  struct stat st;
  if (!f || fstat(fileno(f), &st) != 0) {
    FAIL("%s: cannot open external data '%s': %s", what, path, strerror(errno));
    goto out;
  }
  if (!S_ISREG(st.st_mode)) {
    FAIL("%s: external data '%s' is not a regular file", what, path);
    goto out;
  }
  int64_t size = (int64_t)st.st_size;
  if (length < 0)
    length = offset <= size ? size - offset : 0;
  if (offset > size || length > size - offset) {
    FAIL("%s: external data '%s' has %" PRId64 " bytes, but offset %" PRId64 " + length %" PRId64
         " goes past its end",
         what, path, size, offset, length);
    goto out;
  }
  if ((uint64_t)length != nbytes) {
    FAIL("%s: external data length is %" PRId64 " bytes, but the tensor's type needs %" PRIu64,
         what, length, nbytes);
    goto out;
  }
  if (!L->opt->max_weight_bytes)
    L->weight_limit += nbytes; /* the default limit includes the external data */
  if (charge_weights(L, what, nbytes))
    goto out;
  if (fseeko(f, (off_t)offset, SEEK_SET) != 0 || fread(dst, 1, nbytes, f) != nbytes) {
    FAIL("%s: cannot read external data '%s': %s", what, path,
         ferror(f) ? strerror(errno) : "unexpected end of file");
    goto out;
  }
  rc = 0;
out:
  if (f)
    fclose(f);
  free(real);
  free(real_dir);
  free(path);
  return rc;
}

/* Stores element i of a typed field into t. int32_data carries every type narrower than
 * 32 bits, floats of 16 and 8 bits as their bit patterns. */
static void store_int32_field(Tensor *t, int64_t i, int32_t v) {
  char *p = (char *)t->data + (size_t)i * dtype_size(t->dtype);
  switch (t->dtype) {
  case DT_F16:
  case DT_BF16: {
    uint16_t b = (uint16_t)(v & 0xffff);
    memcpy(p, &b, 2);
    break;
  }
  case DT_F8E4M3:
  case DT_F8E5M2: *(uint8_t *)p = (uint8_t)(v & 0xff); break;
  case DT_BOOL: *(uint8_t *)p = v != 0; break;
  default: dtype_store_i64(t->dtype, p, v); break;
  }
}

/* Decodes a TensorProto (an initializer or a Constant's value) into a tensor in the
 * graph's arena. `what` names it in messages. */
static Tensor *tensor_from_proto(Loader *L, const Onnx__TensorProto *tp, const char *what) {
  DType dt;
  if (!tp->has_data_type || dtype_from_onnx(tp->data_type, &dt)) {
    FAIL("%s has element type %s, which gpucc does not support", what,
         tp->has_data_type ? onnx_type_name(tp->data_type) : "UNDEFINED");
    return NULL;
  }
  if (tp->n_dims > IR_MAX_RANK) {
    FAIL("%s has rank %zu; gpucc supports at most %d", what, tp->n_dims, IR_MAX_RANK);
    return NULL;
  }
  int64_t numel = 1;
  for (size_t i = 0; i < tp->n_dims; i++) {
    int64_t n = tp->dims[i];
    if (n < 0) {
      FAIL("%s has a negative dim (%" PRId64 ")", what, n);
      return NULL;
    }
    if (n && numel > INT64_MAX / n) {
      FAIL("%s: the element count of its dims overflows", what);
      return NULL;
    }
    numel *= n;
  }
  size_t es = dtype_size(dt);
  if (numel > (int64_t)(SIZE_MAX / 2 / es)) {
    FAIL("%s: its byte size overflows", what);
    return NULL;
  }
  uint64_t nbytes = (uint64_t)numel * es;
  bool external = tp->has_data_location &&
                  tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  size_t typed = tp->n_float_data + tp->n_int32_data + tp->n_int64_data + tp->n_double_data +
                 tp->n_uint64_data + tp->n_string_data;
  if (tp->has_raw_data && typed) {
    FAIL("%s has both raw_data and typed data fields", what);
    return NULL;
  }
  if (tp->has_raw_data && tp->raw_data.len != nbytes) {
    FAIL("%s: raw_data has %zu bytes, but %s with %" PRId64 " elements needs %" PRIu64, what,
         tp->raw_data.len, dtype_name(dt), numel, nbytes);
    return NULL;
  }
  if (!external && charge_weights(L, what, nbytes))
    return NULL;
  int64_t dims[IR_MAX_RANK];
  for (size_t i = 0; i < tp->n_dims; i++)
    dims[i] = tp->dims[i];
  Tensor *t = tensor_in_arena(L->g->arena, dt, (int)tp->n_dims, dims);
  if (external)
    return read_external(L, tp, what, t->data, nbytes) ? NULL : t;
  if (tp->has_raw_data) {
    if (nbytes)
      memcpy(t->data, tp->raw_data.data, nbytes);
    if (dt == DT_BOOL)
      for (int64_t i = 0; i < numel; i++)
        ((uint8_t *)t->data)[i] = ((uint8_t *)t->data)[i] != 0;
    return t;
  }
  const char *field;
  size_t have;
  switch (dt) {
  case DT_F32: field = "float_data"; have = tp->n_float_data; break;
  case DT_F64: field = "double_data"; have = tp->n_double_data; break;
  case DT_I64: field = "int64_data"; have = tp->n_int64_data; break;
  default: field = "int32_data"; have = tp->n_int32_data; break;
  }
  if (have != (uint64_t)numel || typed != have) {
    FAIL("%s: %s has %zu elements, but its dims need %" PRId64 "%s", what, field, have, numel,
         typed != have ? " (and the data is in another field)" : "");
    return NULL;
  }
  for (int64_t i = 0; i < numel; i++) {
    char *p = (char *)t->data + (size_t)i * es;
    switch (dt) {
    case DT_F32: memcpy(p, &tp->float_data[i], 4); break;
    case DT_F64: memcpy(p, &tp->double_data[i], 8); break;
    case DT_I64: memcpy(p, &tp->int64_data[i], 8); break;
    default: store_int32_field(t, i, tp->int32_data[i]); break;
    }
  }
  return t;
}

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

static const char *output_name(const Onnx__NodeProto *np, size_t i) {
  return i < np->n_output && np->output[i] && *np->output[i] ? np->output[i] : NULL;
}

/* A name for an intermediate value of a node that becomes several IR nodes: the node's
 * first output with a suffix, clashing with nothing in the graph or in the model. */
static const char *tmp_name(Loader *L, const Onnx__NodeProto *np, char *buf, size_t n) {
  const char *base = output_name(np, 0) ? output_name(np, 0) : "tmp";
  for (int k = 1;; k++) {
    snprintf(buf, n, "%.200s.%d", base, k);
    if (!graph_find_value(L->g, buf) && !map_get(&L->producers, buf))
      return buf;
  }
}

/* Strips the "error: " that a located-nowhere Diag message starts with. */
static const char *bare_message(const Diag *d) {
  return strncmp(d->msg, "error: ", 7) ? d->msg : d->msg + 7;
}

static void mark_node(Loader *L, Node *n) {
  n->origin = L->origin;
  n->loc = (SrcLoc){.file = L->path};
}

/* Adds one IR node with nout outputs; names NULL give intermediates. Types are inferred
 * before the node joins the graph, so a failure leaves the graph as it was. */
static int emit_multi(Loader *L, const Onnx__NodeProto *np, Op op, Value **in, int nin,
                      const Attr *at, int na, const char *const *names, int nout,
                      Value **outs) {
  Node probe = {.id = -1, .op = op, .nin = nin, .in = in, .nout = nout, .nattr = na,
                .attrs = (Attr *)at};
  Type types[64];
  Diag local = {0};
  if (nout > 64)
    return FAIL("too many outputs (%d)", nout);
  if (ir_infer_node(&probe, types, &local))
    return FAIL("%s", bare_message(&local));
  char bufs[64][256];
  const char *nm[64];
  for (int i = 0; i < nout; i++) {
    nm[i] = names ? names[i] : NULL;
    /* The graph owns the name once the node is added, so each temporary needs its own
     * buffer only until then. */
    if (!nm[i])
      nm[i] = tmp_name(L, np, bufs[i], sizeof bufs[i]);
  }
  Node *n = graph_add_node(L->g, op, in, nin, at, na, nm, nout);
  if (!n)
    return FAIL("an output name is already defined");
  mark_node(L, n);
  for (int i = 0; i < nout; i++) {
    n->out[i]->type = types[i];
    if (outs)
      outs[i] = n->out[i];
  }
  return 0;
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

/* Ops that map one to one, copying the attributes the table lists by the same name. */
static int b_simple(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *in[8];
  int nin = plain_inputs(L, np, e->op, in, 8);
  if (nin < 0)
    return -1;
  Attr at[4];
  int na = 0;
  for (size_t i = 0; i < np->n_attribute && na < 4; i++) {
    const Onnx__AttributeProto *a = np->attribute[i];
    const char *name = arena_strdup(L->g->arena, S(a->name));
    switch (attr_type(a)) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: at[na++] = attr_make_float(name, a->f); break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: at[na++] = attr_make_int(name, a->i); break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
      at[na++] = attr_make_string(name, arena_strndup(L->g->arena, (const char *)a->s.data, a->s.len));
      break;
    default: return FAIL("attribute '%s' has a kind gpucc does not read here", name);
    }
  }
  return emit(L, np, e->op, in, nin, at, na, output_name(np, 0)) ? 0 : -1;
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

static int b_identity(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  (void)e;
  Value *x = input(L, np, 0);
  if (!x)
    return FAIL("input 0 is missing");
  if (!strcmp(S(np->op_type), "Dropout") && L->opset >= 12) {
    double training = 0;
    if (const_scalar(L, np, 2, "training_mode", &training))
      return -1;
    if (training != 0)
      return FAIL("training_mode is true; gpucc compiles inference only");
  }
  return emit(L, np, OP_IDENTITY, &x, 1, NULL, 0, output_name(np, 0)) ? 0 : -1;
}

static int b_clip(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  if (!x)
    return FAIL("input 0 is missing");
  double lo = -INFINITY, hi = INFINITY;
  if (L->opset < 11) {
    if (get_float(L, np, "min", -INFINITY, &lo) || get_float(L, np, "max", INFINITY, &hi))
      return -1;
  } else if (const_scalar(L, np, 1, "min", &lo) || const_scalar(L, np, 2, "max", &hi)) {
    return -1;
  }
  Attr at[2] = {attr_make_float("min", lo), attr_make_float("max", hi)};
  return emit(L, np, e->op, &x, 1, at, 2, output_name(np, 0)) ? 0 : -1;
}

static int b_cast(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  int64_t to;
  DType dt;
  Value *x = input(L, np, 0);
  if (!x)
    return FAIL("input 0 is missing");
  if (need_int(L, np, "to", &to))
    return -1;
  if (to < INT32_MIN || to > INT32_MAX || dtype_from_onnx((int32_t)to, &dt))
    return FAIL("cast to %s is not supported", onnx_type_name((int32_t)to));
  Attr at = attr_make_string("to", dtype_name(dt));
  return emit(L, np, e->op, &x, 1, &at, 1, output_name(np, 0)) ? 0 : -1;
}

static int b_reduce(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  if (!x)
    return FAIL("input 0 is missing");
  bool axes_input = e->op == OP_REDUCE_SUM ? L->opset >= 13 : L->opset >= 18;
  int64_t keepdims, noop;
  const int64_t *axes;
  int64_t *caxes;
  int n;
  if (axes_input) {
    if (const_ints(L, np, 1, "axes", &caxes, &n))
      return -1;
    axes = caxes;
  } else if (get_ints(L, np, "axes", &axes, &n)) {
    return -1;
  }
  if (get_int(L, np, "keepdims", 1, &keepdims) ||
      get_int(L, np, "noop_with_empty_axes", 0, &noop))
    return -1;
  if (n <= 0 && noop)
    return emit(L, np, OP_IDENTITY, &x, 1, NULL, 0, output_name(np, 0)) ? 0 : -1;
  Attr at[2] = {attr_make_int("keepdims", keepdims), attr_make_ints("axes", axes, n)};
  return emit(L, np, e->op, &x, 1, at, n > 0 ? 2 : 1, output_name(np, 0)) ? 0 : -1;
}

static int b_argmax(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  int64_t axis, keepdims;
  if (!x)
    return FAIL("input 0 is missing");
  if (get_int(L, np, "axis", 0, &axis) || get_int(L, np, "keepdims", 1, &keepdims))
    return -1;
  Attr at[2] = {attr_make_int("axis", axis), attr_make_int("keepdims", keepdims)};
  return emit(L, np, e->op, &x, 1, at, 2, output_name(np, 0)) ? 0 : -1;
}

/* Before opset 13, Softmax flattens its input to 2-D at axis, normalizes each row and
 * reshapes back: the same as a plain softmax only when axis is the last dim. */
static int b_softmax(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  int64_t axis;
  if (!x)
    return FAIL("input 0 is missing");
  if (get_int(L, np, "axis", L->opset >= 13 ? -1 : 1, &axis))
    return -1;
  int r = x->type.shape.rank;
  int64_t a = axis < 0 ? axis + r : axis;
  if (L->opset >= 13 || (r > 0 && a == r - 1)) {
    Attr at = attr_make_int("axis", L->opset >= 13 ? axis : -1);
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
    return FAIL("softmax before opset 13 over axis %" PRId64 " needs at most one symbolic dim",
                axis);
  Attr fa = attr_make_int("axis", a), sa = attr_make_int("axis", -1);
  Attr ra = attr_make_ints("shape", shape, r);
  Value *f = emit(L, np, OP_FLATTEN, &x, 1, &fa, 1, NULL);
  Value *s = f ? emit(L, np, e->op, &f, 1, &sa, 1, NULL) : NULL;
  return s && emit(L, np, OP_RESHAPE, &s, 1, &ra, 1, output_name(np, 0)) ? 0 : -1;
}

static int b_layer_norm(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *in[3];
  int64_t axis;
  double eps;
  int nin = plain_inputs(L, np, e->op, in, 3);
  if (nin < 0)
    return -1;
  if (get_int(L, np, "axis", -1, &axis) || get_float(L, np, "epsilon", 1e-5, &eps))
    return -1;
  Attr at[2] = {attr_make_int("axis", axis), attr_make_float("epsilon", eps)};
  return emit(L, np, e->op, in, nin, at, 2, output_name(np, 0)) ? 0 : -1;
}

/* Ops whose ints attribute comes from a constant input from some opset on (before it,
 * from the attribute of the same name). */
static int ints_arg(Loader *L, const Onnx__NodeProto *np, int input_from_opset, size_t i,
                    const char *name, const int64_t **v, int *n) {
  if (L->opset >= input_from_opset) {
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
  if (ints_arg(L, np, 0, 1, "shape", &shape, &n))
    return -1;
  if (n < 0)
    return FAIL("input 'shape' is missing");
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
    return FAIL(L->opset >= 13 ? "input 'axes' is missing" : "missing attribute 'axes'");
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
static int b_concat(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  return b_axis_op(L, np, e, true, 0);
}

static int b_slice(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  const int64_t *v[4] = {0};
  int n[4] = {-1, -1, -1, -1};
  static const char *const names[4] = {"starts", "ends", "axes", "steps"};
  if (!x)
    return FAIL("input 0 is missing");
  for (int i = 0; i < (L->opset >= 10 ? 4 : 3); i++)
    if (ints_arg(L, np, 10, (size_t)i + 1, names[i], &v[i], &n[i]))
      return -1;
  if (n[0] < 0 || n[1] < 0)
    return FAIL("%s 'starts' and 'ends' are required", L->opset >= 10 ? "inputs" : "attributes");
  Attr at[4];
  int na = 0;
  for (int i = 0; i < 4; i++)
    if (n[i] >= 0)
      at[na++] = attr_make_ints(names[i], v[i], n[i]);
  return emit(L, np, e->op, &x, 1, at, na, output_name(np, 0)) ? 0 : -1;
}

static int b_split(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e) {
  Value *x = input(L, np, 0);
  int64_t axis, parts = -1;
  const int64_t *split;
  int n;
  if (!x)
    return FAIL("input 0 is missing");
  int nout = (int)np->n_output;
  if (nout < 1 || nout > 64)
    return FAIL("has %d outputs; gpucc supports 1 to 64", nout);
  if (get_int(L, np, "axis", 0, &axis) || ints_arg(L, np, 13, 1, "split", &split, &n))
    return -1;
  if (L->opset >= 18 && get_int(L, np, "num_outputs", -1, &parts))
    return -1;
  int64_t sizes[64];
  if (n < 0) { /* equal parts; from opset 18 the last may be smaller */
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
    int64_t chunk = L->opset >= 18 ? (dm.n + parts - 1) / parts : dm.n / parts;
    if (L->opset < 18 && dm.n % parts)
      return FAIL("dim %" PRId64 " of size %" PRId64 " does not split into %" PRId64
                  " equal parts", a, dm.n, parts);
    for (int i = 0; i < nout; i++)
      sizes[i] = i + 1 < nout ? chunk : dm.n - chunk * (nout - 1);
    split = sizes;
    n = nout;
  }
  if (n != nout)
    return FAIL("split has %d sizes, but the node has %d outputs", n, nout);
  Attr at[2] = {attr_make_int("axis", axis), attr_make_ints("split", split, n)};
  const char *names[64];
  for (int i = 0; i < nout; i++)
    names[i] = output_name(np, (size_t)i);
  return emit_multi(L, np, e->op, &x, 1, at, 2, names, nout, NULL);
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
    t = tensor_from_proto(L, a->t, what);
  } else {
    bool is_float = !strcmp(name, "value_float") || !strcmp(name, "value_floats");
    bool is_list = !strcmp(name, "value_floats") || !strcmp(name, "value_ints");
    size_t cnt = is_list ? (is_float ? a->n_floats : a->n_ints) : 1;
    int64_t dim = (int64_t)cnt;
    DType dt = is_float ? DT_F32 : DT_I64;
    if (!is_list && !(is_float ? a->has_f : a->has_i))
      return FAIL("attribute '%s' has no value", name);
    if (charge_weights(L, what, cnt * dtype_size(dt)))
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

/* ---------------------------------------------------------------- the op table */

/* An op that maps one to one, with no attributes, from opset 1. */
#define SIMPLE(onnx, op) {onnx, op, 1, b_simple, ""}
static const OnnxOp onnx_ops[] = {
    SIMPLE("Neg", OP_NEG), SIMPLE("Abs", OP_ABS), SIMPLE("Sign", OP_SIGN), SIMPLE("Exp", OP_EXP),
    SIMPLE("Log", OP_LOG), SIMPLE("Sqrt", OP_SQRT), SIMPLE("Reciprocal", OP_RECIP),
    SIMPLE("Floor", OP_FLOOR), SIMPLE("Ceil", OP_CEIL), SIMPLE("Round", OP_ROUND),
    SIMPLE("Sin", OP_SIN), SIMPLE("Cos", OP_COS), SIMPLE("Tanh", OP_TANH), SIMPLE("Erf", OP_ERF),
    SIMPLE("Sigmoid", OP_SIGMOID), SIMPLE("Relu", OP_RELU), SIMPLE("Softplus", OP_SOFTPLUS),
    SIMPLE("Not", OP_NOT), SIMPLE("Add", OP_ADD), SIMPLE("Sub", OP_SUB), SIMPLE("Mul", OP_MUL),
    SIMPLE("Div", OP_DIV), SIMPLE("Equal", OP_EQUAL),
    SIMPLE("Less", OP_LESS), SIMPLE("LessOrEqual", OP_LESS_EQUAL),
    SIMPLE("Greater", OP_GREATER), SIMPLE("GreaterOrEqual", OP_GREATER_EQUAL),
    SIMPLE("And", OP_AND), SIMPLE("Or", OP_OR), SIMPLE("Xor", OP_XOR), SIMPLE("Where", OP_WHERE),
    SIMPLE("MatMul", OP_MATMUL),
    {"HardSwish", OP_HARD_SWISH, 14, b_simple, ""},
    {"Gelu", OP_GELU, 20, b_simple, "approximate"},
    {"LeakyRelu", OP_LEAKY_RELU, 1, b_simple, "alpha"},
    {"Elu", OP_ELU, 1, b_simple, "alpha"},
    {"HardSigmoid", OP_HARD_SIGMOID, 1, b_simple, "alpha,beta"},
    {"Pow", OP_POW, 1, b_pow, ""},
    {"Max", OP_MAX, 1, b_variadic, ""},
    {"Min", OP_MIN, 1, b_variadic, ""},
    {"Sum", OP_ADD, 1, b_variadic, ""},
    {"Identity", OP_IDENTITY, 1, b_identity, ""},
    {"Dropout", OP_IDENTITY, 1, b_identity, "ratio,seed"},
    {"Clip", OP_CLIP, 1, b_clip, "min,max"},
    {"Cast", OP_CAST, 1, b_cast, "to,saturate"},
    {"ReduceSum", OP_REDUCE_SUM, 1, b_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceMean", OP_REDUCE_MEAN, 1, b_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceMax", OP_REDUCE_MAX, 1, b_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceMin", OP_REDUCE_MIN, 1, b_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceProd", OP_REDUCE_PROD, 1, b_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ArgMax", OP_ARGMAX, 1, b_argmax, "axis,keepdims,select_last_index"},
    {"Softmax", OP_SOFTMAX, 1, b_softmax, "axis"},
    {"LogSoftmax", OP_LOG_SOFTMAX, 1, b_softmax, "axis"},
    {"LayerNormalization", OP_LAYER_NORM, 17, b_layer_norm, "axis,epsilon,stash_type"},
    {"Reshape", OP_RESHAPE, 1, b_reshape, "allowzero"},
    {"Transpose", OP_TRANSPOSE, 1, b_transpose, "perm"},
    {"Squeeze", OP_SQUEEZE, 1, b_squeeze, "axes"},
    {"Unsqueeze", OP_UNSQUEEZE, 1, b_squeeze, "axes"},
    {"Flatten", OP_FLATTEN, 1, b_flatten, "axis"},
    {"Expand", OP_EXPAND, 1, b_expand, ""},
    {"Concat", OP_CONCAT, 1, b_concat, "axis"},
    {"Slice", OP_SLICE, 1, b_slice, "starts,ends,axes"},
    {"Split", OP_SPLIT, 1, b_split, "axis,split,num_outputs"},
    {"Gather", OP_GATHER, 1, b_gather, "axis"},
    {"Gemm", OP_MATMUL, 1, b_gemm, "alpha,beta,transA,transB"},
    {"Constant", OP_COUNT, 1, b_constant, "value,value_float,value_floats,value_int,value_ints"},
};
#undef SIMPLE

static const OnnxOp *find_op(const char *name) {
  for (size_t i = 0; i < sizeof onnx_ops / sizeof *onnx_ops; i++)
    if (!strcmp(onnx_ops[i].name, name))
      return &onnx_ops[i];
  return NULL;
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

static bool is_default_domain(const char *d) { return !d || !*d || !strcmp(d, "ai.onnx"); }

/* Whether input i is absent or a constant (an initializer or a Constant node's output):
 * what the ops that read shapes, axes and bounds from inputs need. */
static bool input_is_const(const Loader *L, const Onnx__NodeProto *np, size_t i) {
  if (i >= np->n_input || !np->input[i] || !*np->input[i])
    return true;
  const int *p = map_get(&L->producers, np->input[i]);
  if (!p || *p == -2)
    return true; /* undefined inputs are reported later, with their own message */
  return *p >= 0 && !strcmp(S(L->gp->node[*p]->op_type), "Constant");
}

/* The first input of op `op` that must be constant from opset `from`, and the last. */
static const struct {
  const char *op;
  int from, first, last;
} const_inputs[] = {
    {"Clip", 11, 1, 2},      {"Reshape", 1, 1, 1},    {"Expand", 1, 1, 1},
    {"Squeeze", 13, 1, 1},   {"Unsqueeze", 13, 1, 1}, {"Slice", 10, 1, 4},
    {"Split", 13, 1, 1},     {"ReduceSum", 13, 1, 1}, {"ReduceMean", 18, 1, 1},
    {"ReduceMax", 18, 1, 1}, {"ReduceMin", 18, 1, 1}, {"ReduceProd", 18, 1, 1},
    {"Dropout", 12, 1, 2},
};

static bool output_used(const Loader *L, const Onnx__NodeProto *np, size_t i) {
  const char *o = output_name(np, i);
  const int *u = o ? map_get(&L->uses, o) : NULL;
  return u && *u > 0;
}

/* Why a node cannot be compiled, in a few words naming the op ("op Conv is not
 * supported", "op ArgMax with select_last_index=1 ..."); NULL when it can. The text is
 * also the grouping key of onnx_check_ops. */
static const char *unsupported(const Loader *L, const Onnx__NodeProto *np, char *why,
                               size_t n) {
  const char *op = S(np->op_type);
  if (!is_default_domain(np->domain)) {
    snprintf(why, n, "op %s of domain '%s' (gpucc reads only the default domain)", op,
             np->domain);
    return why;
  }
  const OnnxOp *e = find_op(op);
  if (!e) {
    snprintf(why, n, "op %s is not supported", op);
    return why;
  }
  if (L->opset < e->min_opset) {
    snprintf(why, n, "op %s does not exist before opset %d", op, e->min_opset);
    return why;
  }
  for (size_t i = 0; i < np->n_attribute; i++) {
    const Onnx__AttributeProto *a = np->attribute[i];
    if (!in_list(e->attrs, S(a->name))) {
      snprintf(why, n, "op %s with attribute '%s' is not supported", op, S(a->name));
      return why;
    }
    int t = attr_type(a);
    int64_t iv = a->i;
    if (!strcmp(op, "ArgMax") && !strcmp(a->name, "select_last_index") && iv != 0)
      snprintf(why, n, "op ArgMax with select_last_index=%" PRId64 " is not supported", iv);
    else if (!strcmp(op, "LayerNormalization") && !strcmp(a->name, "stash_type") && iv != 1)
      snprintf(why, n, "op LayerNormalization with stash_type=%" PRId64 " is not supported", iv);
    else if (!strcmp(op, "Reshape") && !strcmp(a->name, "allowzero") && iv != 0)
      snprintf(why, n, "op Reshape with allowzero=%" PRId64 " is not supported", iv);
    else if (!strcmp(op, "Cast") && !strcmp(a->name, "saturate") && iv != 1)
      snprintf(why, n, "op Cast with saturate=%" PRId64 " is not supported", iv);
    else if (!strcmp(op, "Gelu") && t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING &&
             !(a->s.len == 4 && (!memcmp(a->s.data, "none", 4) || !memcmp(a->s.data, "tanh", 4))))
      snprintf(why, n, "op Gelu with approximate='%.*s' is not supported",
               (int)(a->s.len > 40 ? 40 : a->s.len), (const char *)a->s.data);
    else
      continue;
    return why;
  }
  if (!strcmp(op, "Cast")) {
    const Onnx__AttributeProto *a = find_attr(np, "to");
    DType dt;
    if (a && (a->i < INT32_MIN || a->i > INT32_MAX || dtype_from_onnx((int32_t)a->i, &dt))) {
      snprintf(why, n, "op Cast to %s is not supported",
               onnx_type_name(a->i < 0 || a->i > 64 ? -1 : (int32_t)a->i));
      return why;
    }
  }
  for (size_t k = 0; k < sizeof const_inputs / sizeof *const_inputs; k++) {
    if (strcmp(op, const_inputs[k].op) != 0 || L->opset < const_inputs[k].from)
      continue;
    for (int i = const_inputs[k].first; i <= const_inputs[k].last; i++)
      if (!input_is_const(L, np, (size_t)i)) {
        snprintf(why, n, "op %s with a computed input %d is not supported (it must be a "
                 "constant)", op, i);
        return why;
      }
  }
  if (!strcmp(op, "Dropout") && output_used(L, np, 1)) {
    snprintf(why, n, "op Dropout with its mask output used is not supported");
    return why;
  }
  if (!strcmp(op, "LayerNormalization") && (output_used(L, np, 1) || output_used(L, np, 2))) {
    snprintf(why, n, "op LayerNormalization with its Mean or InvStdDev output used is not "
             "supported");
    return why;
  }
  return NULL;
}

/* ---------------------------------------------------------------- model and names */

static int read_model(Loader *L, const void *data, size_t len) {
  if (len == 0)
    return model_error(L, "the file is empty: not an ONNX model");
  if (len > MODEL_MAX_BYTES)
    return model_error(L, "the file has %zu bytes, more than the 2 GiB a protobuf may have: "
                       "not an ONNX model", len);
  L->model = onnx__model_proto__unpack(NULL, len, data);
  if (!L->model)
    return model_error(L, "not an ONNX model (the protobuf does not parse)");
  if (!L->model->graph || !L->model->has_ir_version)
    return model_error(L, "not an ONNX model (it has no %s)",
                       L->model->graph ? "ir_version" : "graph");
  L->gp = L->model->graph;
  bool found = false;
  for (size_t i = 0; i < L->model->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = L->model->opset_import[i];
    if (is_default_domain(o->domain)) {
      L->opset = o->version;
      found = true;
    }
  }
  if (!found)
    return model_error(L, "the model imports no opset of the default ONNX domain");
  if (L->opset < OPSET_MIN || L->opset > OPSET_MAX)
    return model_error(L, "opset %" PRId64 " of the default domain is not supported (gpucc "
                       "reads opsets %d to %d)", L->opset, OPSET_MIN, OPSET_MAX);
  for (size_t i = 0; i < L->gp->n_node; i++)
    if (!L->gp->node[i]) /* protobuf-c never leaves holes; be sure anyway */
      return model_error(L, "node #%zu is empty", i);
  return 0;
}

/* The value names of the model: who defines each (each once) and how often each is used. */
static int index_names(Loader *L) {
  const Onnx__GraphProto *gp = L->gp;
  size_t total = gp->n_input + gp->n_initializer + gp->n_output;
  for (size_t i = 0; i < gp->n_node; i++)
    total += gp->node[i]->n_input + gp->node[i]->n_output;
  if (map_init(&L->producers, total) || map_init(&L->uses, total))
    return model_error(L, "out of memory");
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const char *nm = S(gp->initializer[i]->name);
    if (!*nm)
      return model_error(L, "initializer #%zu has no name", i);
    if (map_get(&L->producers, nm))
      return model_error(L, "initializer '%s' is defined twice", nm);
    map_put(&L->producers, nm, -2);
  }
  for (size_t i = 0; i < gp->n_input; i++) {
    const char *nm = S(gp->input[i]->name);
    if (!*nm)
      return model_error(L, "graph input #%zu has no name", i);
    map_put(&L->producers, nm, -1); /* an input may have a default initializer */
  }
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    for (size_t j = 0; j < np->n_output; j++) {
      const char *o = output_name(np, j);
      if (!o)
        continue;
      int *p = map_get(&L->producers, o);
      if (p) {
        char lb[300];
        if (*p < 0)
          return node_error(L, (int)i, "output '%s' is already a graph input or initializer", o);
        const Onnx__NodeProto *first = gp->node[*p];
        return node_error(L, (int)i, "output '%s' is already defined by node '%s' (#%d)", o,
                          node_label(first, *p, lb, sizeof lb), *p);
      }
      map_put(&L->producers, o, (int)i);
    }
    for (size_t j = 0; j < np->n_input; j++)
      if (np->input[j] && *np->input[j])
        ++*map_put(&L->uses, np->input[j], 0);
  }
  for (size_t i = 0; i < gp->n_output; i++)
    ++*map_put(&L->uses, S(gp->output[i]->name), 0);
  return 0;
}

/* A min-heap of node indices, so the sort keeps the model's order wherever it is valid. */
static void heap_push(int *h, int *n, int v) {
  int i = (*n)++;
  while (i > 0 && h[(i - 1) / 2] > v) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = v;
}

static int heap_pop(int *h, int *n) {
  int top = h[0], v = h[--*n], i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= *n)
      break;
    if (c + 1 < *n && h[c + 1] < h[c])
      c++;
    if (h[c] >= v)
      break;
    h[i] = h[c];
    i = c;
  }
  if (*n)
    h[i] = v;
  return top;
}

/* Orders the nodes so each comes after the producers of its inputs (into order[]). */
static int sort_nodes(Loader *L, int *order) {
  const Onnx__GraphProto *gp = L->gp;
  int n = (int)gp->n_node, rc = -1;
  int *pending = calloc((size_t)n + 1, sizeof *pending);
  int *first = calloc((size_t)n + 2, sizeof *first); /* CSR: consumers of each node */
  int *heap = calloc((size_t)n + 1, sizeof *heap);
  size_t nedges = 0;
  for (int i = 0; i < n; i++)
    nedges += gp->node[i]->n_input;
  int *edges = calloc(nedges + 1, sizeof *edges);
  if (!pending || !first || !heap || !edges) {
    model_error(L, "out of memory");
    goto out;
  }
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < n; i++) {
      const Onnx__NodeProto *np = gp->node[i];
      for (size_t j = 0; j < np->n_input; j++) {
        if (!np->input[j] || !*np->input[j])
          continue;
        const int *p = map_get(&L->producers, np->input[j]);
        if (!p) {
          node_error(L, i, "input '%s' is not defined by any node, initializer or graph input",
                     np->input[j]);
          goto out;
        }
        if (*p < 0)
          continue;
        if (pass == 0) {
          first[*p + 1]++;
          pending[i]++;
        } else {
          edges[first[*p]++] = i;
        }
      }
    }
    if (pass == 0)
      for (int i = 0; i < n; i++)
        first[i + 1] += first[i];
  }
  /* The second pass advanced each start to the next node's: shift back. */
  for (int i = n; i > 0; i--)
    first[i] = first[i - 1];
  first[0] = 0;
  int hn = 0, done = 0;
  for (int i = 0; i < n; i++)
    if (!pending[i])
      heap_push(heap, &hn, i);
  while (hn) {
    int i = heap_pop(heap, &hn);
    order[done++] = i;
    for (int k = first[i]; k < first[i + 1]; k++)
      if (--pending[edges[k]] == 0)
        heap_push(heap, &hn, edges[k]);
  }
  if (done < n) {
    char names[1024];
    size_t at = 0;
    int listed = 0;
    names[0] = 0;
    for (int i = 0; i < n && listed < 4 && at < sizeof names - 1; i++) {
      if (!pending[i])
        continue;
      const char *o = output_name(gp->node[i], 0);
      int k = snprintf(names + at, sizeof names - at, "%s'%s'", listed ? ", " : "", S(o));
      at = k > 0 && at + (size_t)k < sizeof names ? at + (size_t)k : sizeof names - 1;
      listed++;
    }
    model_error(L, "the graph has a cycle: %d nodes wait on each other, through the values %s%s",
                n - done, names, n - done > listed ? ", ..." : "");
    goto out;
  }
  rc = 0;
out:
  free(pending);
  free(first);
  free(heap);
  free(edges);
  return rc;
}

/* ---------------------------------------------------------------- inputs and initializers */

static const OnnxBinding *find_binding(const OnnxBinding *b, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(b[i].name, name))
      return &b[i];
  return NULL;
}

/* "1x3x224x224" into dims; returns the rank or -1. */
static int parse_shape(const char *s, int64_t *dims) {
  int r = 0;
  if (!strcmp(s, "scalar"))
    return 0;
  for (;;) {
    if (r == IR_MAX_RANK || !(*s >= '0' && *s <= '9'))
      return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno)
      return -1;
    dims[r++] = v;
    if (!*end)
      return r;
    if (*end != 'x')
      return -1;
    s = end + 1;
  }
}

static int add_input(Loader *L, const Onnx__ValueInfoProto *vi, bool *dim_used) {
  const char *name = S(vi->name);
  const Onnx__TypeProto__Tensor *tt =
      vi->type && vi->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE
          ? vi->type->tensor_type : NULL;
  if (!tt)
    return model_error(L, "graph input '%s' is not a tensor", name);
  Type t = {.shape.rank = -1};
  if (!tt->has_elem_type || dtype_from_onnx(tt->elem_type, &t.dtype))
    return model_error(L, "graph input '%s' has element type %s, which gpucc does not support",
                       name, onnx_type_name(tt->has_elem_type ? tt->elem_type : 0));
  const OnnxBinding *sb = find_binding(L->opt->shapes, L->opt->nshapes, name);
  int64_t given[IR_MAX_RANK];
  int grank = -1;
  if (sb && (grank = parse_shape(sb->value, given)) < 0)
    return model_error(L, "--shape %s=%s: expected sizes like 1x3x224x224", sb->name, sb->value);
  if (tt->shape) {
    if (tt->shape->n_dim > IR_MAX_RANK)
      return model_error(L, "graph input '%s' has rank %zu; gpucc supports at most %d", name,
                         tt->shape->n_dim, IR_MAX_RANK);
    t.shape.rank = (int)tt->shape->n_dim;
    if (sb && grank != t.shape.rank)
      return model_error(L, "--shape %s=%s has rank %d, but the model's input has rank %d",
                         sb->name, sb->value, grank, t.shape.rank);
    for (int i = 0; i < t.shape.rank; i++) {
      const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[i];
      Dim *o = &t.shape.dims[i];
      if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
        if (dm->dim_value < 0)
          return model_error(L, "graph input '%s' has a negative dim (%" PRId64 ")", name,
                             dm->dim_value);
        *o = (Dim){dm->dim_value, NULL};
        if (sb && given[i] != dm->dim_value)
          return model_error(L, "--shape %s=%s: dim %d is %" PRId64 " in the model", sb->name,
                             sb->value, i, dm->dim_value);
      } else if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                 dm->dim_param && *dm->dim_param) {
        *o = (Dim){-1, graph_intern(L->g, dm->dim_param)};
      } else {
        char sym[300];
        snprintf(sym, sizeof sym, "%.200s_dim%d", name, i);
        *o = (Dim){-1, graph_intern(L->g, sym)};
      }
      if (sb) {
        *o = (Dim){given[i], NULL};
        continue;
      }
      for (int k = 0; o->sym && k < L->opt->ndims; k++) {
        if (strcmp(L->opt->dims[k].name, o->sym) != 0)
          continue;
        int64_t v;
        if (parse_i64(L->opt->dims[k].value, &v))
          return model_error(L, "--dim %s=%s: the size must be a non-negative integer",
                             L->opt->dims[k].name, L->opt->dims[k].value);
        dim_used[k] = true;
        *o = (Dim){v, NULL};
      }
    }
  } else if (sb) {
    t.shape.rank = grank;
    for (int i = 0; i < grank; i++)
      t.shape.dims[i] = (Dim){given[i], NULL};
  } else {
    return model_error(L, "graph input '%s' has no shape; give it with --shape %s=AxBxC", name,
                       name);
  }
  if (!graph_add_input(L->g, name, t))
    return model_error(L, "graph input '%s' is declared twice", name);
  return 0;
}

static int add_inputs_and_weights(Loader *L) {
  const Onnx__GraphProto *gp = L->gp;
  for (size_t i = 0; i < gp->n_initializer; i++) {
    char what[512];
    const char *nm = S(gp->initializer[i]->name);
    snprintf(what, sizeof what, "initializer '%.400s'", nm);
    Tensor *t = tensor_from_proto(L, gp->initializer[i], what);
    if (!t)
      return -1;
    graph_add_const(L->g, nm, t); /* names were checked unique by index_names */
  }
  bool *dim_used = calloc((size_t)L->opt->ndims + 1, sizeof *dim_used);
  if (!dim_used)
    return model_error(L, "out of memory");
  int rc = 0;
  for (size_t i = 0; i < gp->n_input && !rc; i++) {
    const char *nm = S(gp->input[i]->name);
    Value *v = graph_find_value(L->g, nm);
    if (v && v->kind == VK_CONST) {
      if (find_binding(L->opt->shapes, L->opt->nshapes, nm))
        rc = model_error(L, "--shape %s=...: '%s' has an initializer, so it is a constant, not "
                         "an input", nm, nm);
      continue; /* an input with a default initializer: a constant here */
    }
    rc = add_input(L, gp->input[i], dim_used);
  }
  for (int k = 0; k < L->opt->ndims && !rc; k++)
    if (!dim_used[k])
      rc = model_error(L, "--dim %s=%s: no input of the model has a dim named '%s'",
                       L->opt->dims[k].name, L->opt->dims[k].value, L->opt->dims[k].name);
  for (int k = 0; k < L->opt->nshapes && !rc; k++) {
    const Value *v = graph_find_value(L->g, L->opt->shapes[k].name);
    if (!v || v->kind != VK_INPUT)
      rc = model_error(L, "--shape %s=%s: the model has no input named '%s'",
                       L->opt->shapes[k].name, L->opt->shapes[k].value, L->opt->shapes[k].name);
  }
  free(dim_used);
  return rc;
}

/* ---------------------------------------------------------------- the whole load */

static void loader_free(Loader *L) {
  if (L->model)
    onnx__model_proto__free_unpacked(L->model, NULL);
  map_free(&L->producers);
  map_free(&L->uses);
  free(L->dir);
}

static int loader_open(Loader *L, const void *data, size_t len, const char *name,
                       const char *dir, const OnnxOptions *opt, Diag *d) {
  static const OnnxOptions no_options;
  memset(L, 0, sizeof *L);
  L->path = name ? name : "<memory>";
  L->opt = opt ? opt : &no_options;
  L->d = d;
  L->cur = -1;
  L->model_bytes = len;
  L->dir = dir ? strdup(dir) : NULL;
  /* The default limit: the model's own size, times 8 because a packed varint field can
   * decode to 8 bytes per byte (int64 zeros), plus the external data it names. */
  L->weight_limit = L->opt->max_weight_bytes > 0 ? (uint64_t)L->opt->max_weight_bytes
                                                 : (uint64_t)len * 8;
  return read_model(L, data, len);
}

static Graph *load(Loader *L) {
  const Onnx__GraphProto *gp = L->gp;
  char why[512];
  if (index_names(L))
    return NULL;
  for (size_t i = 0; i < gp->n_node; i++)
    if (unsupported(L, gp->node[i], why, sizeof why)) {
      node_error(L, (int)i, "%s", why);
      return NULL;
    }
  int *order = calloc(gp->n_node + 1, sizeof *order);
  if (!order) {
    model_error(L, "out of memory");
    return NULL;
  }
  const char *gname = gp->name && *gp->name ? gp->name : "main";
  L->g = graph_new(gname);
  int rc = sort_nodes(L, order);
  if (!rc)
    rc = add_inputs_and_weights(L);
  for (size_t k = 0; k < gp->n_node && !rc; k++) {
    int i = order[k];
    const Onnx__NodeProto *np = gp->node[i];
    char lb[300];
    L->cur = i;
    L->origin = arena_strdup(L->g->arena, node_label(np, i, lb, sizeof lb));
    const OnnxOp *e = find_op(S(np->op_type));
    rc = e->build(L, np, e);
  }
  L->cur = -1;
  for (size_t i = 0; i < gp->n_output && !rc; i++) {
    const char *nm = S(gp->output[i]->name);
    Value *v = graph_find_value(L->g, nm);
    if (!v)
      rc = model_error(L, "graph output '%s' is not defined by any node, initializer or input",
                       nm);
    else
      graph_add_output(L->g, v);
  }
  if (!rc && !gp->n_output)
    rc = model_error(L, "the graph has no outputs");
  free(order);
  if (!rc) {
    Diag vd = {0};
    if (ir_verify(L->g, &vd))
      rc = model_error(L, "the graph gpucc built does not verify: %s", bare_message(&vd));
  }
  if (rc) {
    graph_free(L->g);
    return NULL;
  }
  return L->g;
}

Graph *onnx_load_bytes(const void *data, size_t len, const char *name, const OnnxOptions *opt,
                       Diag *d) {
  Loader L;
  Graph *g = NULL;
  if (!loader_open(&L, data, len, name, opt ? opt->base_dir : NULL, opt, d))
    g = load(&L);
  loader_free(&L);
  return g;
}

/* Reads the whole file; *dir receives its folder (caller frees both). */
static void *read_file(const char *path, size_t *len, char **dir, Diag *d) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  void *buf = NULL;
  *dir = NULL;
  if (!f || fstat(fileno(f), &st) != 0) {
    diag_error(d, (SrcLoc){.file = path}, "cannot open: %s", strerror(errno));
    goto fail;
  }
  if (!S_ISREG(st.st_mode)) {
    diag_error(d, (SrcLoc){.file = path}, "not a regular file: not an ONNX model");
    goto fail;
  }
  if ((uint64_t)st.st_size > MODEL_MAX_BYTES) {
    diag_error(d, (SrcLoc){.file = path}, "the file has %lld bytes, more than the 2 GiB a "
               "protobuf may have: not an ONNX model", (long long)st.st_size);
    goto fail;
  }
  *len = (size_t)st.st_size;
  buf = malloc(*len + 1);
  if (!buf || fread(buf, 1, *len, f) != *len) {
    diag_error(d, (SrcLoc){.file = path}, "cannot read: %s", buf ? strerror(errno) : "out of memory");
    goto fail;
  }
  fclose(f);
  const char *slash = strrchr(path, '/');
  *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
  if (!*dir) {
    free(buf);
    diag_error(d, (SrcLoc){.file = path}, "out of memory");
    return NULL;
  }
  return buf;
fail:
  if (f)
    fclose(f);
  free(buf);
  return NULL;
}

Graph *onnx_load(const char *path, const OnnxOptions *opt, Diag *d) {
  size_t len;
  char *dir;
  void *buf = read_file(path, &len, &dir, d);
  if (!buf)
    return NULL;
  OnnxOptions o = opt ? *opt : (OnnxOptions){0};
  o.base_dir = dir;
  Graph *g = onnx_load_bytes(buf, len, path, &o, d);
  free(buf);
  free(dir);
  return g;
}

int onnx_check_ops(const char *path, const OnnxOptions *opt, char **report, Diag *d) {
  size_t len;
  char *dir;
  *report = NULL;
  void *buf = read_file(path, &len, &dir, d);
  if (!buf)
    return -1;
  Loader L;
  int count = -1;
  if (loader_open(&L, buf, len, path, dir, opt, d) || index_names(&L))
    goto out;
  /* One line per distinct reason, in the order first met, with its count. */
  size_t n = L.gp->n_node;
  char **reasons = calloc(n + 1, sizeof *reasons);
  int *counts = calloc(n + 1, sizeof *counts), *firsts = calloc(n + 1, sizeof *firsts);
  size_t cap = 256, at = 0;
  char *out = malloc(cap);
  if (!reasons || !counts || !firsts || !out) {
    model_error(&L, "out of memory");
    goto done;
  }
  out[0] = 0;
  int nr = 0;
  for (size_t i = 0; i < n; i++) {
    char why[512];
    if (!unsupported(&L, L.gp->node[i], why, sizeof why))
      continue;
    int k = 0;
    while (k < nr && strcmp(reasons[k], why) != 0)
      k++;
    if (k == nr) {
      if (!(reasons[nr] = strdup(why)))
        break;
      firsts[nr++] = (int)i;
    }
    counts[k]++;
  }
  for (int k = 0; k < nr; k++) {
    char lb[300], line[1024];
    int m = snprintf(line, sizeof line, "%s (opset %" PRId64 "): %d node%s, first '%s' (#%d)\n",
                     reasons[k], L.opset, counts[k], counts[k] == 1 ? "" : "s",
                     node_label(L.gp->node[firsts[k]], firsts[k], lb, sizeof lb), firsts[k]);
    size_t ml = m > 0 ? (size_t)m : 0;
    if (ml >= sizeof line)
      ml = sizeof line - 1;
    if (at + ml + 1 > cap) {
      char *p = realloc(out, 2 * (at + ml + 1));
      if (!p)
        break;
      out = p;
      cap = 2 * (at + ml + 1);
    }
    memcpy(out + at, line, ml);
    at += ml;
    out[at] = 0;
  }
  *report = out;
  out = NULL;
  count = nr;
done:
  for (int k = 0; reasons && k < (int)n && reasons[k]; k++)
    free(reasons[k]);
  free(reasons);
  free(counts);
  free(firsts);
  free(out);
out:
  loader_free(&L);
  free(buf);
  free(dir);
  return count;
}
