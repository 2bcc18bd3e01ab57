/* onnx.c: the ONNX frontend. Reads a ModelProto with protobuf-c (the bindings are
 * generated at build time from onnx.proto beside this file) and builds an IR graph:
 *   1. read and unpack the model; check that no name holds a NUL byte (protobuf-c's C
 *      strings would end there); find the opset of the default domain,
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

#include "onnx-impl.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "raw_data is little-endian; this reader copies it as it is"
#endif

/* protobuf messages are limited to 2 GiB; bigger models keep weights in external data. */
#define MODEL_MAX_BYTES ((size_t)INT32_MAX)


/* ---------------------------------------------------------------- name maps */

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

int *onnx_map_get(const NameMap *m, const char *k) {
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

const char *onnx_node_label(const Onnx__NodeProto *np, int idx, char *buf, size_t n) {
  if (np->name && *np->name)
    return np->name;
  snprintf(buf, n, "%s#%d", S(np->op_type), idx);
  return buf;
}

int onnx_model_error(Loader *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_verror(L->d, (SrcLoc){.file = L->path}, fmt, ap);
  va_end(ap);
  return -1;
}

int onnx_node_error(Loader *L, int idx, const char *fmt, ...) {
  char msg[3072], lb[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const Onnx__NodeProto *np = L->gp->node[idx];
  return onnx_model_error(L, "node '%s' (#%d, %s, opset %" PRId64 "): %s",
                     onnx_node_label(np, idx, lb, sizeof lb), idx, S(np->op_type), L->opset, msg);
}


/* ---------------------------------------------------------------- element types */

static const char *const onnx_type_names[] = {
    "UNDEFINED", "FLOAT",     "UINT8",      "INT8",     "UINT16",         "INT16",
    "INT32",     "INT64",     "STRING",     "BOOL",     "FLOAT16",        "DOUBLE",
    "UINT32",    "UINT64",    "COMPLEX64",  "COMPLEX128", "BFLOAT16",     "FLOAT8E4M3FN",
    "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4"};

const char *onnx_type_name(int32_t t) {
  if (t >= 0 && (size_t)t < sizeof onnx_type_names / sizeof *onnx_type_names)
    return onnx_type_names[t];
  return "an unknown type";
}

int dtype_from_onnx(int32_t t, DType *out) {
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

/* Counts bytes of constant data against the limits before they are allocated: the
 * weight limit (--max-weight-bytes, or the default that grows with the external data
 * found), and the host's memory, which no limit can raise. */
int onnx_charge_weights(Loader *L, const char *what, uint64_t nbytes) {
  if (nbytes > L->weight_limit || L->weight_bytes > L->weight_limit - nbytes)
    return FAIL("%s needs %" PRIu64 " bytes, which takes the weights past the limit of %" PRIu64
                " bytes (%s)",
                what, nbytes, L->weight_limit,
                L->opt->max_weight_bytes ? "--max-weight-bytes"
                                         : "by default 8 times the model's size plus its "
                                           "external data files; --max-weight-bytes=N sets it");
  if (L->memory_bytes &&
      (nbytes > L->memory_bytes || L->weight_bytes > L->memory_bytes - nbytes))
    return FAIL("%s needs %" PRIu64 " bytes, which takes the weights past the %" PRIu64
                " bytes of memory this machine has",
                what, nbytes, L->memory_bytes);
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

/* Without --max-weight-bytes the limit grows with the external data, by each file's size
 * the first time the file is met (known by device and inode, so neither a second name
 * nor a hard link counts it twice): tensors that read one region again and again cannot
 * make the loader allocate more than the files hold. */
static int credit_external_file(Loader *L, const struct stat *st) {
  if (L->opt->max_weight_bytes)
    return 0;
  char key[64];
  snprintf(key, sizeof key, "%ju:%ju", (uintmax_t)st->st_dev, (uintmax_t)st->st_ino);
  if (onnx_map_get(&L->external_files, key))
    return 0;
  if (L->external_files.n + 1 >= L->external_files.cap / 2)
    return FAIL("the model names more external data files than it has tensors");
  map_put(&L->external_files, arena_strdup(L->g->arena, key), 0);
  uint64_t size = (uint64_t)st->st_size;
  L->weight_limit = size > UINT64_MAX - L->weight_limit ? UINT64_MAX : L->weight_limit + size;
  return 0;
}

/* Opens the external data of tensor `what` (nbytes long) and checks it, all before
 * anything is allocated for it: the location stays inside the model's folder (no
 * absolute path, no "..", no symlink leading out), names a regular file (a FIFO would
 * hang the read), holds offset + length, and length is what the tensor's type needs;
 * then the bytes are charged to the weights. *f is left at the data. */
static int open_external(Loader *L, const Onnx__TensorProto *tp, const char *what,
                         uint64_t nbytes, FILE **fp) {
  const char *loc = NULL;
  int64_t offset = 0, length = -1;
  *fp = NULL;
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
  char why[256];
  struct stat st;
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
  if (!(f = fopen_regular(real, NULL, why, sizeof why)) || fstat(fileno(f), &st) != 0) {
    FAIL("%s: cannot open external data '%s': %s", what, path, f ? strerror(errno) : why);
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
  if (credit_external_file(L, &st) || onnx_charge_weights(L, what, nbytes))
    goto out;
  if (fseeko(f, (off_t)offset, SEEK_SET) != 0) {
    FAIL("%s: cannot read external data '%s': %s", what, path, strerror(errno));
    goto out;
  }
  *fp = f;
  f = NULL;
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

/* Below this, raw_data is copied rather than taken over (decode_tensor): the arena's
 * chunks hold small constants better than a malloc block each. */
#define TAKE_MIN_BYTES ((uint64_t)64 << 10)

/* Decodes a TensorProto (an initializer or a Constant's value) into a tensor in the
 * graph's arena. `what` names it in messages. Every size the proto states is checked
 * against the data there is (and the weights against their limits) before the tensor is
 * allocated. take: tp's raw_data may become the tensor's data (tp is left without it). */
static Tensor *decode_tensor(Loader *L, Onnx__TensorProto *tp, const char *what, bool take) {
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
  int64_t dims[IR_MAX_RANK];
  for (size_t i = 0; i < tp->n_dims; i++) {
    if (tp->dims[i] < 0) {
      FAIL("%s has a negative dim (%" PRId64 ")", what, tp->dims[i]);
      return NULL;
    }
    dims[i] = tp->dims[i];
  }
  int64_t numel, size;
  if (!dims_size((int)tp->n_dims, dims, dt, &numel, &size)) {
    FAIL("%s is too large: more than %" PRId64 " bytes", what, IR_MAX_BYTES);
    return NULL;
  }
  uint64_t nbytes = (uint64_t)size;
  size_t es = dtype_size(dt);
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
  const char *field = NULL;
  size_t have = 0;
  if (!external && !tp->has_raw_data) {
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
  }
  FILE *f = NULL;
  if (external ? open_external(L, tp, what, nbytes, &f) : onnx_charge_weights(L, what, nbytes))
    return NULL;
  if (take && !external && tp->has_raw_data && nbytes >= TAKE_MIN_BYTES && dt != DT_BOOL &&
      !((uintptr_t)tp->raw_data.data % 16)) {
    /* the bytes protobuf-c unpacked become the constant's (the model is freed after this
     * load, which reads each initializer once): a model's weights are not copied again */
    Tensor *t = tensor_adopt_in_arena(L->g->arena, dt, (int)tp->n_dims, dims, tp->raw_data.data);
    tp->raw_data.data = NULL;
    tp->raw_data.len = 0;
    return t;
  }
  Tensor *t = tensor_in_arena(L->g->arena, dt, (int)tp->n_dims, dims);
  if (external) {
    bool ok = !nbytes || fread(t->data, 1, nbytes, f) == nbytes;
    if (!ok)
      FAIL("%s: cannot read its external data: %s", what,
           ferror(f) ? strerror(errno) : "unexpected end of file");
    fclose(f);
    return ok ? t : NULL;
  }
  if (tp->has_raw_data) {
    if (nbytes)
      memcpy(t->data, tp->raw_data.data, nbytes);
    if (dt == DT_BOOL)
      for (int64_t i = 0; i < numel; i++)
        ((uint8_t *)t->data)[i] = ((uint8_t *)t->data)[i] != 0;
    return t;
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

Tensor *onnx_tensor_from_proto(Loader *L, const Onnx__TensorProto *tp, const char *what) {
  return decode_tensor(L, (Onnx__TensorProto *)tp, what, false); /* left as it is */
}

/* An initializer of a model this load owns (not an OnnxModel's, loaded again and again):
 * its bytes are taken over. */
static Tensor *take_initializer(Loader *L, Onnx__TensorProto *tp, const char *what) {
  return decode_tensor(L, tp, what, !L->borrowed);
}

/* ---------------------------------------------------------------- names, by their length */

/* protobuf strings carry their length, but protobuf-c hands them over as C strings,
 * which end at the first NUL: an initializer named "x\0y" would read as "x" and take the
 * place of graph input x, and a model that passes onnx.checker would compute something
 * else. So the wire bytes of every string gpucc reads (value, node, op, domain and dim
 * names, attribute names and strings, external data entries) are walked with their
 * lengths, and one holding a NUL is refused. Only onnx.proto's messages are entered,
 * never a subgraph, so the walk is no deeper than the schema. It runs after protobuf-c
 * accepted the bytes; whatever it does not understand ends the walk. */

typedef struct Wire {
  const uint8_t *p, *end;
} Wire;

static bool wire_varint(Wire *w, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 64 && w->p < w->end; shift += 7) {
    uint8_t b = *w->p++;
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80))
      return true;
  }
  return false;
}

/* The next field of w: its number and, when it is length-delimited, its bytes in *sub
 * (sub->p NULL otherwise). false at the end. */
static bool wire_field(Wire *w, uint64_t *field, Wire *sub) {
  uint64_t key, v;
  *sub = (Wire){NULL, NULL};
  if (w->p >= w->end || !wire_varint(w, &key))
    return false;
  *field = key >> 3;
  switch (key & 7) {
  case 0: return wire_varint(w, &v);
  case 1: return w->end - w->p >= 8 ? (w->p += 8, true) : false;
  case 5: return w->end - w->p >= 4 ? (w->p += 4, true) : false;
  case 2:
    if (!wire_varint(w, &v) || v > (uint64_t)(w->end - w->p))
      return false;
    *sub = (Wire){w->p, w->p + v};
    w->p += v;
    return true;
  default: return false; /* groups, which protobuf-c refuses */
  }
}

/* what: "initializer #0's name" and so on. */
static int check_string(Loader *L, Wire s, const char *what) {
  size_t n = s.p ? (size_t)(s.end - s.p) : 0;
  if (!n || !memchr(s.p, 0, n))
    return 0;
  char shown[256];
  size_t at = 0;
  for (size_t i = 0; i < n && i < 48; i++) {
    unsigned char c = s.p[i];
    int k = c >= 0x20 && c < 0x7f && c != '"' && c != '\\'
                ? snprintf(shown + at, sizeof shown - at, "%c", c)
                : snprintf(shown + at, sizeof shown - at, "\\x%02x", c);
    at += (size_t)k;
  }
  return onnx_model_error(L, "%s \"%s%s\" contains a NUL byte: a name or string may not", what,
                          shown, n > 48 ? "..." : "");
}

static int walk_tensor(Loader *L, Wire m, const char *owner) {
  char what[256];
  uint64_t f;
  Wire s, e;
  while (wire_field(&m, &f, &s)) {
    if (f == 8) {
      snprintf(what, sizeof what, "%s's name", owner);
      if (check_string(L, s, what))
        return -1;
    } else if (f == 13 && s.p) {
      snprintf(what, sizeof what, "an external data entry of %s", owner);
      for (uint64_t g; wire_field(&s, &g, &e);)
        if ((g == 1 || g == 2) && check_string(L, e, what))
          return -1;
    }
  }
  return 0;
}

/* TypeProto: tensor_type (1) -> shape (2) -> dim (1) -> dim_param (2). */
static int walk_type(Loader *L, Wire type, const char *what) {
  uint64_t f1, f2, f3, f4;
  Wire tt, sh, dm, dp;
  while (wire_field(&type, &f1, &tt)) {
    while (f1 == 1 && tt.p && wire_field(&tt, &f2, &sh)) {
      while (f2 == 2 && sh.p && wire_field(&sh, &f3, &dm)) {
        while (f3 == 1 && dm.p && wire_field(&dm, &f4, &dp))
          if (f4 == 2 && check_string(L, dp, what))
            return -1;
      }
    }
  }
  return 0;
}

static int walk_value_info(Loader *L, Wire m, const char *owner) {
  char what[256];
  uint64_t f;
  Wire s;
  while (wire_field(&m, &f, &s)) {
    if (f == 1) {
      snprintf(what, sizeof what, "%s's name", owner);
      if (check_string(L, s, what))
        return -1;
    } else if (f == 2 && s.p) {
      snprintf(what, sizeof what, "a dim name of %s", owner);
      if (walk_type(L, s, what))
        return -1;
    }
  }
  return 0;
}

static int walk_node(Loader *L, Wire m, size_t idx) {
  char what[128];
  size_t nin = 0, nout = 0;
  uint64_t f;
  Wire s;
  while (wire_field(&m, &f, &s)) {
    int rc = 0;
    switch (f) {
    case 1: snprintf(what, sizeof what, "input #%zu of node #%zu", nin++, idx); break;
    case 2: snprintf(what, sizeof what, "output #%zu of node #%zu", nout++, idx); break;
    case 3: snprintf(what, sizeof what, "node #%zu's name", idx); break;
    case 4: snprintf(what, sizeof what, "node #%zu's op type", idx); break;
    case 7: snprintf(what, sizeof what, "node #%zu's domain", idx); break;
    case 5: /* AttributeProto: name (1), s (4), t (5), strings (9), tensors (10) */
      snprintf(what, sizeof what, "an attribute of node #%zu", idx);
      for (Wire a; s.p && !rc && wire_field(&s, &f, &a);)
        rc = f == 1 || f == 4 || f == 9 ? check_string(L, a, what)
             : (f == 5 || f == 10) && a.p ? walk_tensor(L, a, what)
                                          : 0;
      if (rc)
        return -1;
      continue;
    default: continue;
    }
    if (check_string(L, s, what))
      return -1;
  }
  return 0;
}

/* Counts of the graph's repeated fields, kept across the whole walk: protobuf-c merges a
 * message field given twice, so its lists run on. */
typedef struct GraphCounts {
  size_t node, init, input, output, info;
} GraphCounts;

static int walk_graph(Loader *L, Wire m, GraphCounts *c) {
  char what[128];
  uint64_t f;
  Wire s;
  while (wire_field(&m, &f, &s)) {
    int rc = 0;
    if (!s.p)
      continue;
    if (f == 1) {
      rc = walk_node(L, s, c->node++);
    } else if (f == 2) {
      rc = check_string(L, s, "the graph's name");
    } else if (f == 5) {
      snprintf(what, sizeof what, "initializer #%zu", c->init++);
      rc = walk_tensor(L, s, what);
    } else if (f == 11 || f == 12 || f == 13) {
      size_t k = f == 11 ? c->input++ : f == 12 ? c->output++ : c->info++;
      snprintf(what, sizeof what, "%s #%zu",
               f == 11 ? "graph input" : f == 12 ? "graph output" : "value_info", k);
      rc = walk_value_info(L, s, what);
    }
    if (rc)
      return -1;
  }
  return 0;
}

static int check_names(Loader *L, const void *data, size_t len) {
  Wire m = {data, (const uint8_t *)data + len}, s;
  GraphCounts c = {0};
  size_t nopset = 0;
  uint64_t f;
  while (wire_field(&m, &f, &s)) {
    char what[128];
    if (f == 7 && s.p && walk_graph(L, s, &c))
      return -1;
    if (f != 8 || !s.p)
      continue;
    snprintf(what, sizeof what, "the domain of opset import #%zu", nopset++);
    for (Wire d; wire_field(&s, &f, &d);)
      if (f == 1 && check_string(L, d, what))
        return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------- model and names */

/* The protobuf of a model, parsed once (onnx_open) and loaded as often as asked: a model
 * with ranged dims is loaded at each shape class's sizes, and reading and unpacking its
 * weights each time would cost more than the class's compile. */
struct OnnxModel {
  Onnx__ModelProto *model;
  const char *name; /* the caller's, for messages */
  char *dir;        /* folder of external data; NULL when there is none */
  size_t len;
};

/* Unpacks data into L->model and checks its names; the rest of the checks are the
 * loads'. */
static int parse_model(Loader *L, const void *data, size_t len) {
  if (len == 0)
    return onnx_model_error(L, "the file is empty: not an ONNX model");
  if (len > MODEL_MAX_BYTES)
    return onnx_model_error(L, "the file has %zu bytes, more than the 2 GiB a protobuf may have: "
                       "not an ONNX model", len);
  L->model = onnx__model_proto__unpack(NULL, len, data);
  if (!L->model)
    return onnx_model_error(L, "not an ONNX model (the protobuf does not parse)");
  if (!L->model->graph || !L->model->has_ir_version)
    return onnx_model_error(L, "not an ONNX model (it has no %s)",
                       L->model->graph ? "ir_version" : "graph");
  L->gp = L->model->graph;
  return check_names(L, data, len);
}

/* The opset the model imports, and its nodes; at each load. */
static int check_model(Loader *L) {
  bool found = false;
  for (size_t i = 0; i < L->model->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = L->model->opset_import[i];
    if (!is_default_domain(o->domain))
      continue;
    if (found && o->version != L->opset)
      return onnx_model_error(L, "the model imports the default domain twice, as opsets %" PRId64
                              " and %" PRId64, L->opset, o->version);
    L->opset = o->version;
    found = true;
  }
  if (!found)
    return onnx_model_error(L, "the model imports no opset of the default ONNX domain");
  /* Each node then uses its op's version at this opset (onnx-versions.inc); beyond the
   * newest opset the table knows, an op may have changed in ways gpucc cannot tell. */
  if (L->opset < OPSET_MIN || L->opset > OPSET_MAX)
    return onnx_model_error(L, "opset %" PRId64 " of the default domain is not supported (gpucc "
                       "reads opsets %d to %d)", L->opset, OPSET_MIN, OPSET_MAX);
  for (size_t i = 0; i < L->gp->n_node; i++)
    if (!L->gp->node[i]) /* protobuf-c never leaves holes; be sure anyway */
      return onnx_model_error(L, "node #%zu is empty", i);
  return 0;
}

/* The value names of the model: who defines each (each once) and how often each is used. */
static int index_names(Loader *L) {
  const Onnx__GraphProto *gp = L->gp;
  size_t total = gp->n_input + gp->n_initializer + gp->n_output;
  for (size_t i = 0; i < gp->n_node; i++)
    total += gp->node[i]->n_input + gp->node[i]->n_output;
  if (map_init(&L->producers, total) || map_init(&L->uses, total))
    return onnx_model_error(L, "out of memory");
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const char *nm = S(gp->initializer[i]->name);
    if (!*nm)
      return onnx_model_error(L, "initializer #%zu has no name", i);
    if (onnx_map_get(&L->producers, nm))
      return onnx_model_error(L, "initializer '%s' is defined twice", nm);
    map_put(&L->producers, nm, -2);
  }
  for (size_t i = 0; i < gp->n_input; i++) {
    const char *nm = S(gp->input[i]->name);
    if (!*nm)
      return onnx_model_error(L, "graph input #%zu has no name", i);
    /* An input may have a default initializer of its name (-2 until now); two inputs of
     * one name are two values. */
    int *p = onnx_map_get(&L->producers, nm);
    if (p && *p == -1)
      return onnx_model_error(L, "graph input '%s' is declared twice", nm);
    map_put(&L->producers, nm, -1);
  }
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    for (size_t j = 0; j < np->n_output; j++) {
      const char *o = output_name(np, j);
      if (!o)
        continue;
      int *p = onnx_map_get(&L->producers, o);
      if (p) {
        char lb[300];
        if (*p < 0)
          return onnx_node_error(L, (int)i, "output '%s' is already a graph input or initializer", o);
        const Onnx__NodeProto *first = gp->node[*p];
        return onnx_node_error(L, (int)i, "output '%s' is already defined by node '%s' (#%d)", o,
                          onnx_node_label(first, *p, lb, sizeof lb), *p);
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

/* Whether value `name` is known at load time: an initializer, an input fixed with
 * --const, or an output of a node marked constant. Absent optional inputs count. */
bool onnx_value_is_const(const Loader *L, const char *name) {
  if (!name || !*name)
    return true;
  const int *p = onnx_map_get(&L->producers, name);
  if (!p || *p == -2)
    return true; /* undefined inputs are reported later, with their own message */
  if (*p == -1) {
    for (int k = 0; k < L->opt->nconsts; k++)
      if (!strcmp(L->opt->consts[k].name, name))
        return true;
    return false;
  }
  return L->const_node[*p];
}

/* Marks the nodes whose outputs are known at load time (shape computations that exporters
 * write: Shape, Gather, Concat, ... over constants), which the build folds into constants
 * and which may then feed inputs that must be constant (a Reshape's shape). A worklist
 * rather than a topological sort, so a model with a cycle still gets its op report: each
 * node is looked at once, and again only when a producer of its inputs is marked, so a
 * chain written in reverse order costs no more than one in order. */
static int mark_const_nodes(Loader *L) {
  const Onnx__GraphProto *gp = L->gp;
  size_t n = gp->n_node, most = 1, nedges = 0;
  for (size_t i = 0; i < n; i++) {
    most = gp->node[i]->n_input > most ? gp->node[i]->n_input : most;
    nedges += gp->node[i]->n_input;
  }
  L->const_node = calloc(n + 1, sizeof *L->const_node);
  bool *in_const = malloc(most * sizeof *in_const);
  bool *queued = calloc(n + 1, sizeof *queued);
  size_t *first = calloc(n + 2, sizeof *first); /* CSR: the consumers of each node */
  int *edges = malloc((nedges + 1) * sizeof *edges), *stack = malloc((n + 1) * sizeof *stack);
  int rc = 0;
  if (!L->const_node || !in_const || !queued || !first || !edges || !stack) {
    rc = onnx_model_error(L, "out of memory");
    goto out;
  }
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < n; i++) {
      const Onnx__NodeProto *np = gp->node[i];
      for (size_t j = 0; j < np->n_input; j++) {
        const int *p = np->input[j] && *np->input[j] ? onnx_map_get(&L->producers, np->input[j])
                                                     : NULL;
        if (!p || *p < 0)
          continue;
        if (pass == 0)
          first[*p + 1]++;
        else
          edges[first[*p]++] = (int)i;
      }
    }
    if (pass == 0)
      for (size_t i = 0; i < n; i++)
        first[i + 1] += first[i];
  }
  /* The second pass advanced each start to the next node's: shift back. */
  for (size_t i = n; i > 0; i--)
    first[i] = first[i - 1];
  first[0] = 0;
  size_t top = 0;
  for (size_t i = n; i > 0; i--) { /* popped in the model's order */
    stack[top++] = (int)(i - 1);
    queued[i - 1] = true;
  }
  while (top) {
    int i = stack[--top];
    const Onnx__NodeProto *np = gp->node[i];
    queued[i] = false;
    for (size_t j = 0; j < np->n_input; j++)
      in_const[j] = onnx_value_is_const(L, np->input[j]);
    if (!onnx_node_foldable(L, np, in_const))
      continue;
    L->const_node[i] = true;
    for (size_t k = first[i]; k < first[i + 1]; k++)
      if (!L->const_node[edges[k]] && !queued[edges[k]]) {
        queued[edges[k]] = true;
        stack[top++] = edges[k];
      }
  }
out:
  free(in_const);
  free(queued);
  free(first);
  free(edges);
  free(stack);
  return rc;
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
    onnx_model_error(L, "out of memory");
    goto out;
  }
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < n; i++) {
      const Onnx__NodeProto *np = gp->node[i];
      for (size_t j = 0; j < np->n_input; j++) {
        if (!np->input[j] || !*np->input[j])
          continue;
        const int *p = onnx_map_get(&L->producers, np->input[j]);
        if (!p) {
          onnx_node_error(L, i, "input '%s' is not defined by any node, initializer or graph input",
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
    onnx_model_error(L, "the graph has a cycle: %d nodes wait on each other, through the values %s%s",
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

int onnx_parse_shape(const char *s, int64_t *dims) {
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
    return onnx_model_error(L, "graph input '%s' is not a tensor", name);
  Type t = {.shape.rank = -1};
  const char *bound[IR_MAX_RANK] = {0}; /* the symbol an axis was, where --dim bound it */
  if (!tt->has_elem_type || dtype_from_onnx(tt->elem_type, &t.dtype))
    return onnx_model_error(L, "graph input '%s' has element type %s, which gpucc does not support",
                       name, onnx_type_name(tt->has_elem_type ? tt->elem_type : 0));
  const OnnxBinding *sb = find_binding(L->opt->shapes, L->opt->nshapes, name);
  int64_t given[IR_MAX_RANK];
  int grank = -1;
  if (sb && (grank = onnx_parse_shape(sb->value, given)) < 0)
    return onnx_model_error(L, "--shape %s=%s: expected sizes like 1x3x224x224", sb->name, sb->value);
  if (tt->shape) {
    if (tt->shape->n_dim > IR_MAX_RANK)
      return onnx_model_error(L, "graph input '%s' has rank %zu; gpucc supports at most %d", name,
                         tt->shape->n_dim, IR_MAX_RANK);
    t.shape.rank = (int)tt->shape->n_dim;
    if (sb && grank != t.shape.rank)
      return onnx_model_error(L, "--shape %s=%s has rank %d, but the model's input has rank %d",
                         sb->name, sb->value, grank, t.shape.rank);
    for (int i = 0; i < t.shape.rank; i++) {
      const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[i];
      Dim *o = &t.shape.dims[i];
      if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
        if (dm->dim_value < 0)
          return onnx_model_error(L, "graph input '%s' has a negative dim (%" PRId64 ")", name,
                             dm->dim_value);
        *o = (Dim){dm->dim_value, NULL};
        if (sb && given[i] != dm->dim_value)
          return onnx_model_error(L, "--shape %s=%s: dim %d is %" PRId64 " in the model", sb->name,
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
          return onnx_model_error(L, "--dim %s=%s: the size must be a non-negative integer",
                             L->opt->dims[k].name, L->opt->dims[k].value);
        dim_used[k] = true;
        bound[i] = o->sym;
        *o = (Dim){v, NULL};
      }
    }
  } else if (sb) {
    t.shape.rank = grank;
    for (int i = 0; i < grank; i++)
      t.shape.dims[i] = (Dim){given[i], NULL};
  } else {
    return onnx_model_error(L, "graph input '%s' has no shape; give it with --shape %s=AxBxC", name,
                       name);
  }
  /* Builders read input dims before any node is inferred (Size, EyeLike, Split): they
   * may rely on every input's size being bounded like a value's. */
  if (!shape_size(&t.shape, t.dtype, NULL, NULL)) {
    char ts[256];
    return onnx_model_error(L, "graph input '%s' of type %s is too large (more than 2^48 "
                            "bytes)", name, type_str(&t, ts, sizeof ts));
  }
  if (!graph_add_input(L->g, name, t))
    return onnx_model_error(L, "graph input '%s' is declared twice", name);
  for (int i = 0; i < t.shape.rank; i++)
    if (bound[i])
      graph_note_bound(L->g, bound[i], t.shape.dims[i].n, L->g->ninputs - 1, i);
  return 0;
}

/* Whether `name` is a graph input of the model (not an initializer). */
static bool map_get_input(const Loader *L, const char *name) {
  const int *p = onnx_map_get(&L->producers, name);
  return p && *p == -1;
}

/* --const NAME=FILE.npy: input v becomes a constant holding the file's tensor, whose
 * dtype and shape must fit the input's declared ones. Shapes, axes or sizes that a model
 * takes as inputs are then known when it is compiled. */
static int fix_input(Loader *L, Value *v, const OnnxBinding *b) {
  Diag fd = {0};
  Tensor *t = npy_read(b->value, &fd);
  if (!t)
    return onnx_model_error(L, "--const %s=%s: %s", b->name, b->value, bare_message(&fd));
  const Shape *s = &v->type.shape;
  int rc = 0;
  if (t->dtype != v->type.dtype)
    rc = onnx_model_error(L, "--const %s=%s: the file holds %s, but input '%s' is %s",
                          b->name, b->value, dtype_name(t->dtype), v->name,
                          dtype_name(v->type.dtype));
  else if (t->rank != s->rank)
    rc = onnx_model_error(L, "--const %s=%s: the file's tensor has rank %d, but input '%s' "
                          "has rank %d", b->name, b->value, t->rank, v->name, s->rank);
  for (int i = 0; !rc && i < t->rank; i++)
    if (!s->dims[i].sym && s->dims[i].n != t->dims[i])
      rc = onnx_model_error(L, "--const %s=%s: dim %d is %" PRId64 " in the file but %" PRId64
                            " in the model", b->name, b->value, i, t->dims[i], s->dims[i].n);
  if (!rc) {
    Tensor *c = tensor_in_arena(L->g->arena, t->dtype, t->rank, t->dims);
    memcpy(c->data, t->data, tensor_nbytes(t));
    graph_make_const(L->g, v, c);
    for (int i = 0; i < t->rank; i++)
      v->type.shape.dims[i] = (Dim){t->dims[i], NULL};
  }
  tensor_free(t);
  return rc;
}

static int add_inputs_and_weights(Loader *L) {
  const Onnx__GraphProto *gp = L->gp;
  for (size_t i = 0; i < gp->n_initializer; i++) {
    char what[512];
    const char *nm = S(gp->initializer[i]->name);
    snprintf(what, sizeof what, "initializer '%.400s'", nm);
    Tensor *t = take_initializer(L, gp->initializer[i], what);
    if (!t)
      return -1;
    graph_add_const(L->g, nm, t); /* names were checked unique by index_names */
  }
  bool *dim_used = calloc((size_t)L->opt->ndims + 1, sizeof *dim_used);
  if (!dim_used)
    return onnx_model_error(L, "out of memory");
  int rc = 0;
  for (size_t i = 0; i < gp->n_input && !rc; i++) {
    const char *nm = S(gp->input[i]->name);
    Value *v = graph_find_value(L->g, nm);
    if (v && v->kind == VK_CONST) {
      if (find_binding(L->opt->shapes, L->opt->nshapes, nm))
        rc = onnx_model_error(L, "--shape %s=...: '%s' has an initializer, so it is a constant, not "
                         "an input", nm, nm);
      continue; /* an input with a default initializer: a constant here */
    }
    rc = add_input(L, gp->input[i], dim_used);
    const OnnxBinding *cb = find_binding(L->opt->consts, L->opt->nconsts, nm);
    if (!rc && cb)
      rc = fix_input(L, graph_find_value(L->g, nm), cb);
  }
  for (int k = 0; k < L->opt->ndims && !rc; k++)
    if (!dim_used[k])
      rc = onnx_model_error(L, "--dim %s=%s: no input of the model has a dim named '%s'",
                       L->opt->dims[k].name, L->opt->dims[k].value, L->opt->dims[k].name);
  for (int k = 0; k < L->opt->nconsts && !rc; k++) {
    const Value *v = graph_find_value(L->g, L->opt->consts[k].name);
    if (!v || !map_get_input(L, L->opt->consts[k].name))
      rc = onnx_model_error(L, "--const %s=%s: the model has no input named '%s'",
                            L->opt->consts[k].name, L->opt->consts[k].value,
                            L->opt->consts[k].name);
  }
  for (int k = 0; k < L->opt->nshapes && !rc; k++) {
    const Value *v = graph_find_value(L->g, L->opt->shapes[k].name);
    if (!v || v->kind != VK_INPUT)
      rc = onnx_model_error(L, "--shape %s=%s: the model has no input named '%s'",
                       L->opt->shapes[k].name, L->opt->shapes[k].value, L->opt->shapes[k].name);
  }
  free(dim_used);
  return rc;
}

/* ---------------------------------------------------------------- the whole load */

static void loader_free(Loader *L) {
  if (L->model && !L->borrowed)
    onnx__model_proto__free_unpacked(L->model, NULL);
  map_free(&L->producers);
  map_free(&L->uses);
  map_free(&L->external_files);
  free(L->const_node);
  free(L->dir);
}

/* L's fields that do not depend on a model: for a file of len bytes named name (NULL:
 * "<memory>"), its external data in dir (NULL: none), with opt (NULL: none). */
static int loader_init(Loader *L, const char *name, const char *dir, size_t len,
                       const OnnxOptions *opt, Diag *d) {
  static const OnnxOptions no_options;
  memset(L, 0, sizeof *L);
  L->path = name ? name : "<memory>";
  L->opt = opt ? opt : &no_options;
  L->d = d;
  L->cur = -1;
  L->model_bytes = len;
  L->dir = dir ? strdup(dir) : NULL;
  if (dir && !L->dir)
    return onnx_model_error(L, "out of memory");
  /* The default limit: the model's own size, times 8 because a packed varint field can
   * decode to 8 bytes per byte (int64 zeros), plus the external data it names. */
  L->weight_limit = L->opt->max_weight_bytes > 0 ? (uint64_t)L->opt->max_weight_bytes
                                                 : (uint64_t)len * 8;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && (uint64_t)pages <= UINT64_MAX / (uint64_t)page)
    L->memory_bytes = (uint64_t)pages * (uint64_t)page;
  return 0;
}

/* L for a load of m (NULL: parse data here) with opt. */
static int loader_open(Loader *L, const OnnxModel *m, const void *data, size_t len,
                       const char *name, const char *dir, const OnnxOptions *opt, Diag *d) {
  if (loader_init(L, m ? m->name : name, m ? m->dir : dir, m ? m->len : len, opt, d))
    return -1;
  if (m) {
    L->model = m->model;
    L->gp = m->model->graph;
    L->borrowed = true;
  } else if (parse_model(L, data, len)) {
    return -1;
  }
  if (check_model(L))
    return -1;
  /* Each external data file belongs to a tensor: initializers, or Constant nodes. */
  if (map_init(&L->external_files, L->gp->n_initializer + L->gp->n_node))
    return onnx_model_error(L, "out of memory");
  return 0;
}

static Graph *load(Loader *L) {
  const Onnx__GraphProto *gp = L->gp;
  char why[512];
  if (index_names(L) || mark_const_nodes(L))
    return NULL;
  for (size_t i = 0; i < gp->n_node; i++)
    if (onnx_unsupported(L, gp->node[i], why, sizeof why)) {
      onnx_node_error(L, (int)i, "%s", why);
      return NULL;
    }
  int *order = calloc(gp->n_node + 1, sizeof *order);
  if (!order) {
    onnx_model_error(L, "out of memory");
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
    L->origin = arena_strdup(L->g->arena, onnx_node_label(np, i, lb, sizeof lb));
    const OnnxOp *e = onnx_find_op(S(np->op_type));
    const OnnxVersion *v = onnx_op_version(S(np->op_type), L->opset);
    L->ver = v ? v->since : 0; /* onnx_unsupported has checked it */
    rc = e->build(L, np, e);
  }
  L->cur = -1;
  for (size_t i = 0; i < gp->n_output && !rc; i++) {
    const char *nm = S(gp->output[i]->name);
    Value *v = graph_find_value(L->g, nm);
    if (!v)
      rc = onnx_model_error(L, "graph output '%s' is not defined by any node, initializer or input",
                       nm);
    else
      graph_add_output(L->g, v);
  }
  if (!rc && !gp->n_output)
    rc = onnx_model_error(L, "the graph has no outputs");
  free(order);
  if (!rc) {
    Diag vd = {0};
    if (ir_verify(L->g, &vd))
      rc = onnx_model_error(L, "the graph gpucc built does not verify: %s", bare_message(&vd));
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
  if (!loader_open(&L, NULL, data, len, name, opt ? opt->base_dir : NULL, opt, d))
    g = load(&L);
  loader_free(&L);
  return g;
}

/* The whole file, mapped read-only (no copy: a model's weights are read once, by the
 * protobuf's unpacking, which copies them out); *dir receives its folder. The caller
 * releases both with unmap_regular and free. */
static const void *map_file(const char *path, size_t *len, char **dir, Diag *d) {
  char why[256];
  *dir = NULL;
  const void *buf = map_regular(path, len, why, sizeof why);
  if (!buf) {
    diag_error(d, (SrcLoc){.file = path}, "cannot open: %s", why);
    return NULL;
  }
  if (*len > MODEL_MAX_BYTES) {
    diag_error(d, (SrcLoc){.file = path}, "the file has %zu bytes, more than the 2 GiB a "
               "protobuf may have: not an ONNX model", *len);
    unmap_regular(buf, *len);
    return NULL;
  }
  const char *slash = strrchr(path, '/');
  *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
  if (!*dir) {
    unmap_regular(buf, *len);
    diag_error(d, (SrcLoc){.file = path}, "out of memory");
    return NULL;
  }
  return buf;
}

Graph *onnx_load(const char *path, const OnnxOptions *opt, Diag *d) {
  size_t len;
  char *dir;
  const void *buf = map_file(path, &len, &dir, d);
  if (!buf)
    return NULL;
  OnnxOptions o = opt ? *opt : (OnnxOptions){0};
  o.base_dir = dir;
  Graph *g = onnx_load_bytes(buf, len, path, &o, d);
  unmap_regular(buf, len);
  free(dir);
  return g;
}

OnnxModel *onnx_open_bytes(const void *data, size_t len, const char *name, const char *base_dir,
                           Diag *d) {
  Loader L;
  OnnxModel *m = calloc(1, sizeof *m);
  int rc = loader_init(&L, name, NULL, len, NULL, d);
  if (!rc && !m)
    rc = onnx_model_error(&L, "out of memory");
  if (!rc)
    rc = parse_model(&L, data, len);
  if (!rc && base_dir && !(m->dir = strdup(base_dir)))
    rc = onnx_model_error(&L, "out of memory");
  if (rc) {
    loader_free(&L);
    free(m);
    return NULL;
  }
  m->model = L.model;
  L.model = NULL;
  loader_free(&L);
  m->name = L.path;
  m->len = len;
  return m;
}

OnnxModel *onnx_open(const char *path, Diag *d) {
  size_t len;
  char *dir;
  const void *buf = map_file(path, &len, &dir, d);
  if (!buf)
    return NULL;
  OnnxModel *m = onnx_open_bytes(buf, len, path, dir, d);
  unmap_regular(buf, len);
  free(dir);
  return m;
}

Graph *onnx_model_load(const OnnxModel *m, const OnnxOptions *opt, Diag *d) {
  Loader L;
  Graph *g = NULL;
  if (!loader_open(&L, m, NULL, 0, NULL, NULL, opt, d))
    g = load(&L);
  loader_free(&L);
  return g;
}

/* ---------------------------------------------------------------- onnx_summary */

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

/* "f32[batch, 128]" for a tensor value's type; "?" for what it leaves out. */
static char *value_type_text(const Onnx__ValueInfoProto *v) {
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  if (!f)
    return NULL;
  const Onnx__TypeProto *t = v->type;
  const Onnx__TypeProto__Tensor *tt = t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE
                                          ? t->tensor_type : NULL;
  DType dt;
  if (!tt)
    fputs("?", f);
  else if (tt->has_elem_type && !dtype_from_onnx(tt->elem_type, &dt))
    fputs(dtype_name(dt), f);
  else
    fputs(tt->has_elem_type ? onnx_type_name(tt->elem_type) : "?", f);
  if (tt && tt->shape) {
    fputc('[', f);
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
      const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[i];
      if (i)
        fputs(", ", f);
      if (dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
        fprintf(f, "%" PRId64, dim->dim_value);
      else if (dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
               dim->dim_param && *dim->dim_param)
        fputs(dim->dim_param, f);
      else
        fputc('?', f);
    }
    fputc(']', f);
  }
  if (fclose(f)) {
    free(s);
    return NULL;
  }
  return s;
}

/* The values of v that are not in inits (a map of initializer names, or NULL). */
static int add_values(OnnxValueInfo **out, int *n, Onnx__ValueInfoProto *const *v, size_t nv,
                      const NameMap *inits) {
  *out = calloc(nv + 1, sizeof **out);
  if (!*out)
    return -1;
  for (size_t i = 0; i < nv; i++) {
    if (inits && v[i]->name && onnx_map_get(inits, v[i]->name))
      continue;
    OnnxValueInfo *x = &(*out)[(*n)++];
    if (!(x->name = dup_or_empty(v[i]->name)) || !(x->type = value_type_text(v[i])))
      return -1;
  }
  return 0;
}

/* "domain.Op", or "Op" in the default domain; malloc'd. */
static char *op_name(const Onnx__NodeProto *nd) {
  const char *dom = is_default_domain(nd->domain) ? "" : nd->domain;
  const char *op = nd->op_type ? nd->op_type : "?";
  size_t ld = strlen(dom), lo = strlen(op);
  char *name = malloc(ld + 1 + lo + 1);
  if (name) {
    memcpy(name, dom, ld);
    if (ld)
      name[ld++] = '.';
    memcpy(name + ld, op, lo + 1);
  }
  return name;
}

/* Counts each op type of g into s->ops, in the order they first appear. Names are
 * looked up in a hash map: a hostile model may have a million nodes of distinct types. */
static int count_ops(const Onnx__GraphProto *g, OnnxSummary *s) {
  NameMap seen = {0};
  int rc = !(s->ops = calloc(g->n_node + 1, sizeof *s->ops)) || map_init(&seen, g->n_node);
  for (size_t i = 0; i < g->n_node && !rc; i++) {
    char *name = op_name(g->node[i]);
    if (!name) {
      rc = -1;
      break;
    }
    int *k = onnx_map_get(&seen, name);
    if (k) {
      free(name);
    } else {
      s->ops[s->nops].name = name;
      k = map_put(&seen, name, s->nops++);
    }
    s->ops[*k].count++;
  }
  map_free(&seen);
  return rc;
}

int onnx_summary(const OnnxModel *m, OnnxSummary *s, Diag *d) {
  memset(s, 0, sizeof *s);
  const Onnx__ModelProto *mp = m->model;
  const Onnx__GraphProto *g = mp->graph;
  s->ir_version = mp->ir_version;
  for (size_t i = 0; i < mp->n_opset_import; i++)
    if (is_default_domain(mp->opset_import[i]->domain))
      s->opset = mp->opset_import[i]->version;
  /* the initializers' names, which older exporters also list as inputs */
  NameMap inits;
  int rc = map_init(&inits, g->n_initializer);
  for (size_t i = 0; i < g->n_initializer && !rc; i++)
    if (g->initializer[i]->name)
      map_put(&inits, g->initializer[i]->name, 0);
  rc = rc || !(s->graph = dup_or_empty(g->name)) ||
       !(s->producer = dup_or_empty(mp->producer_name)) ||
       add_values(&s->inputs, &s->ninputs, g->input, g->n_input, &inits) ||
       add_values(&s->outputs, &s->noutputs, g->output, g->n_output, NULL) || count_ops(g, s);
  map_free(&inits);
  s->nnodes = (int)g->n_node;
  s->ninitializers = (int)g->n_initializer;
  for (size_t i = 0; i < g->n_initializer && !rc; i++) {
    const Onnx__TensorProto *t = g->initializer[i];
    DType dt;
    uint64_t numel = 1, size = t->has_data_type && !dtype_from_onnx(t->data_type, &dt)
                                   ? dtype_size(dt) : 0;
    for (size_t k = 0; k < t->n_dims && numel; k++)
      numel = t->dims[k] > 0 && numel <= UINT64_MAX / (uint64_t)t->dims[k]
                  ? numel * (uint64_t)t->dims[k] : 0;
    if (size && numel <= (UINT64_MAX - s->weights_bytes) / size)
      s->weights_bytes += numel * size;
  }
  if (rc) {
    onnx_summary_free(s);
    return diag_error(d, (SrcLoc){m->name, NULL, 0, 0}, "out of memory");
  }
  return 0;
}

void onnx_summary_free(OnnxSummary *s) {
  for (int i = 0; i < s->ninputs; i++)
    free(s->inputs[i].name), free(s->inputs[i].type);
  for (int i = 0; i < s->noutputs; i++)
    free(s->outputs[i].name), free(s->outputs[i].type);
  for (int i = 0; i < s->nops; i++)
    free(s->ops[i].name);
  free(s->inputs);
  free(s->outputs);
  free(s->ops);
  free(s->graph);
  free(s->producer);
  memset(s, 0, sizeof *s);
}

void onnx_close(OnnxModel *m) {
  if (!m)
    return;
  onnx__model_proto__free_unpacked(m->model, NULL);
  free(m->dir);
  free(m);
}

Tensor *onnx_read_tensor(const char *path, char **name, Diag *d) {
  size_t len;
  char *dir;
  if (name)
    *name = NULL;
  const void *buf = map_file(path, &len, &dir, d);
  if (!buf)
    return NULL;
  Loader L;
  Tensor *t = NULL, *in = NULL;
  Onnx__TensorProto *tp = NULL;
  /* external data beside the file */
  if (loader_init(&L, path, dir, len, NULL, d))
    goto done;
  L.g = graph_new("tensor"); /* the tensor is read into its arena, then copied out */
  tp = len ? onnx__tensor_proto__unpack(NULL, len, buf) : NULL;
  if (!tp)
    onnx_model_error(&L, "not an ONNX TensorProto (the protobuf does not parse)");
  else if (!L.g || map_init(&L.external_files, 1))
    onnx_model_error(&L, "out of memory");
  else if ((in = onnx_tensor_from_proto(&L, tp, "the tensor")) &&
           (!(t = tensor_new(in->dtype, in->rank, in->dims)) ||
            (name && tp->name && tp->name[0] && !(*name = strdup(tp->name))))) {
    tensor_free(t);
    t = NULL;
    onnx_model_error(&L, "out of memory");
  }
  if (t && tensor_nbytes(in))
    memcpy(t->data, in->data, tensor_nbytes(in));
done:
  if (tp)
    onnx__tensor_proto__free_unpacked(tp, NULL);
  graph_free(L.g);
  loader_free(&L);
  unmap_regular(buf, len);
  free(dir);
  return t;
}

int onnx_check_ops(const char *path, const OnnxOptions *opt, char **report, Diag *d) {
  size_t len;
  char *dir;
  *report = NULL;
  const void *buf = map_file(path, &len, &dir, d);
  if (!buf)
    return -1;
  Loader L;
  int count = -1;
  if (loader_open(&L, NULL, buf, len, path, dir, opt, d) || index_names(&L) ||
      mark_const_nodes(&L))
    goto out;
  /* One line per distinct reason, in the order first met, with its count (found by name:
   * a model may have as many reasons as nodes). */
  size_t n = L.gp->n_node;
  char **reasons = calloc(n + 1, sizeof *reasons);
  int *counts = calloc(n + 1, sizeof *counts), *firsts = calloc(n + 1, sizeof *firsts);
  NameMap seen = {0};
  size_t cap = 256, at = 0;
  char *out = malloc(cap);
  if (!reasons || !counts || !firsts || !out || map_init(&seen, n)) {
    onnx_model_error(&L, "out of memory");
    goto done;
  }
  out[0] = 0;
  int nr = 0;
  for (size_t i = 0; i < n; i++) {
    char why[512];
    if (!onnx_unsupported(&L, L.gp->node[i], why, sizeof why))
      continue;
    int *k = onnx_map_get(&seen, why);
    if (!k) {
      if (!(reasons[nr] = strdup(why)))
        break;
      firsts[nr] = (int)i;
      k = map_put(&seen, reasons[nr], nr);
      nr++;
    }
    counts[*k]++;
  }
  for (int k = 0; k < nr; k++) {
    char lb[300], line[1024];
    int m = snprintf(line, sizeof line, "%s (opset %" PRId64 "): %d node%s, first '%s' (#%d)\n",
                     reasons[k], L.opset, counts[k], counts[k] == 1 ? "" : "s",
                     onnx_node_label(L.gp->node[firsts[k]], firsts[k], lb, sizeof lb), firsts[k]);
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
  map_free(&seen);
  for (int k = 0; reasons && k < (int)n && reasons[k]; k++)
    free(reasons[k]);
  free(reasons);
  free(counts);
  free(firsts);
  free(out);
out:
  loader_free(&L);
  unmap_regular(buf, len);
  free(dir);
  return count;
}
