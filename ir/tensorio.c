/* tensorio.c: reading and writing tensor files (.npy and .safetensors).
 *
 * These files come from users and from the network, so every field is untrusted: header
 * lengths, dims, element counts and offsets are checked against the file's real size
 * before anything is allocated from them, and a file that is longer or shorter than its
 * header says is an error. Errors name the file. Data is copied as it is, which assumes a
 * little-endian host (checked at run time rather than silently byte-swapping).
 */
#include "ir/ir.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A header longer than this is not something numpy or safetensors writes for any sane
 * tensor: refusing it bounds what an untrusted file can make us allocate. */
#define NPY_MAX_HEADER (1 << 20)
#define ST_MAX_HEADER (100 << 20)
#define JSON_MAX_DEPTH 64

static bool host_is_little(void) {
  uint16_t x = 1;
  unsigned char b;
  memcpy(&b, &x, 1);
  return b == 1;
}

static int file_error(Diag *d, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int file_error(Diag *d, const char *path, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_verror(d, (SrcLoc){.file = path}, fmt, ap);
  va_end(ap);
  return -1;
}

/* Opens path, a regular file, and finds its size. */
static FILE *open_sized(const char *path, uint64_t *size, Diag *d) {
  char why[256];
  FILE *f = fopen_regular(path, size, why, sizeof why);
  if (!f)
    file_error(d, path, "cannot open: %s", why);
  return f;
}

/* numel and byte count of dims, refusing anything that overflows. */
static int checked_size(const int64_t *dims, int rank, DType dt, int64_t *numel,
                        uint64_t *nbytes) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0)
      return -1;
    if (dims[i] && n > INT64_MAX / dims[i])
      return -1;
    n *= dims[i];
  }
  uint64_t es = dtype_size(dt);
  if ((uint64_t)n > (uint64_t)INT64_MAX / es || (uint64_t)n * es > SIZE_MAX)
    return -1;
  *numel = n;
  *nbytes = (uint64_t)n * es;
  return 0;
}

/* ---------------------------------------------------------------- .npy */

typedef struct NpyType {
  const char *code; /* kind and size, without the byte order character */
  DType dt;
} NpyType;

static const NpyType npy_types[] = {
    {"f8", DT_F64}, {"f4", DT_F32}, {"f2", DT_F16}, {"i8", DT_I64}, {"i4", DT_I32},
    {"i2", DT_I16}, {"i1", DT_I8},  {"u1", DT_U8},  {"b1", DT_BOOL},
};

/* A numpy dtype string such as "<f4". '|' (not applicable) and '>' only make sense for
 * one-byte types; '=' (native) is little-endian on the hosts we accept. */
static int npy_parse_descr(const char *s, DType *out) {
  if (strlen(s) != 3)
    return -1;
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++) {
    if (strcmp(s + 1, npy_types[i].code))
      continue;
    bool one_byte = dtype_size(npy_types[i].dt) == 1;
    if (s[0] == '<' || s[0] == '=' || (one_byte && (s[0] == '|' || s[0] == '>'))) {
      *out = npy_types[i].dt;
      return 0;
    }
    return -1;
  }
  return -1;
}

/* The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False,
 * 'shape': (2, 3), }. This is a tiny parser for exactly that grammar. */
typedef struct PyLit {
  const char *p, *end;
} PyLit;

static void py_ws(PyLit *L) {
  while (L->p < L->end && (*L->p == ' ' || *L->p == '\t' || *L->p == '\n' || *L->p == '\r'))
    L->p++;
}

static bool py_eat(PyLit *L, char c) {
  py_ws(L);
  if (L->p < L->end && *L->p == c) {
    L->p++;
    return true;
  }
  return false;
}

/* A quoted string without escapes (none of the header's strings has any). */
static int py_string(PyLit *L, char *buf, size_t cap) {
  py_ws(L);
  if (L->p >= L->end || (*L->p != '\'' && *L->p != '"'))
    return -1;
  char q = *L->p++;
  size_t n = 0;
  while (L->p < L->end && *L->p != q) {
    if (*L->p == '\\' || n + 1 >= cap)
      return -1;
    buf[n++] = *L->p++;
  }
  if (L->p >= L->end)
    return -1;
  L->p++;
  buf[n] = 0;
  return 0;
}

static int py_word(PyLit *L, const char *w) {
  py_ws(L);
  size_t n = strlen(w);
  if ((size_t)(L->end - L->p) < n || memcmp(L->p, w, n))
    return -1;
  L->p += n;
  return 0;
}

static int py_int(PyLit *L, int64_t *out) {
  py_ws(L);
  if (L->p >= L->end || *L->p < '0' || *L->p > '9')
    return -1; /* no sign: dims are never negative */
  int64_t v = 0;
  while (L->p < L->end && *L->p >= '0' && *L->p <= '9') {
    int dgt = *L->p++ - '0';
    if (v > (INT64_MAX - dgt) / 10)
      return -1;
    v = v * 10 + dgt;
  }
  /* numpy may write Python 2 longs such as 3L */
  if (L->p < L->end && *L->p == 'L')
    L->p++;
  *out = v;
  return 0;
}

/* (), (3,), (2, 3) */
static int py_shape(PyLit *L, int64_t *dims, int *rank, const char **why) {
  *why = "malformed 'shape'";
  if (!py_eat(L, '('))
    return -1;
  int r = 0;
  while (!py_eat(L, ')')) {
    if (r == IR_MAX_RANK) {
      *why = "too many dims in 'shape' (at most 8)";
      return -1;
    }
    if (py_int(L, &dims[r])) {
      *why = "'shape' dims must be non-negative integers that fit in 64 bits";
      return -1;
    }
    r++;
    if (!py_eat(L, ',')) {
      if (!py_eat(L, ')'))
        return -1;
      /* a one-element tuple needs its comma in Python */
      if (r == 1)
        return -1;
      break;
    }
  }
  *rank = r;
  return 0;
}

static int npy_parse_header(const char *path, const char *h, size_t len, DType *dt,
                            int *rank, int64_t *dims, Diag *d) {
  PyLit L = {h, h + len};
  bool seen_descr = false, seen_order = false, seen_shape = false;
  if (!py_eat(&L, '{'))
    return file_error(d, path, "malformed .npy header: expected a dict");
  while (!py_eat(&L, '}')) {
    char key[32], val[32];
    if (py_string(&L, key, sizeof key) || !py_eat(&L, ':'))
      return file_error(d, path, "malformed .npy header");
    if (!strcmp(key, "descr") && !seen_descr) {
      seen_descr = true;
      if (py_string(&L, val, sizeof val))
        return file_error(d, path, "malformed .npy header: 'descr' must be a string");
      if (npy_parse_descr(val, dt))
        return file_error(d, path, "unsupported .npy dtype '%s' (supported: <f8 <f4 <f2 "
                                   "<i8 <i4 <i2 |i1 |u1 |b1)", val);
    } else if (!strcmp(key, "fortran_order") && !seen_order) {
      seen_order = true;
      if (!py_word(&L, "True"))
        return file_error(d, path, "Fortran-ordered .npy files are not supported");
      if (py_word(&L, "False"))
        return file_error(d, path, "malformed .npy header: bad 'fortran_order'");
    } else if (!strcmp(key, "shape") && !seen_shape) {
      seen_shape = true;
      const char *why;
      if (py_shape(&L, dims, rank, &why))
        return file_error(d, path, "malformed .npy header: %s", why);
    } else {
      return file_error(d, path, "malformed .npy header: unexpected or repeated key '%s'",
                        key);
    }
    if (!py_eat(&L, ',')) {
      if (!py_eat(&L, '}'))
        return file_error(d, path, "malformed .npy header");
      break;
    }
  }
  py_ws(&L);
  if (L.p != L.end)
    return file_error(d, path, "malformed .npy header: trailing characters");
  if (!seen_descr || !seen_order || !seen_shape)
    return file_error(d, path, "malformed .npy header: needs 'descr', 'fortran_order' "
                               "and 'shape'");
  return 0;
}

Tensor *npy_read(const char *path, Diag *d) {
  if (!host_is_little()) {
    file_error(d, path, "reading .npy needs a little-endian host");
    return NULL;
  }
  uint64_t fsize;
  FILE *f = open_sized(path, &fsize, d);
  if (!f)
    return NULL;
  Tensor *t = NULL;
  char *hdr = NULL;
  unsigned char pre[12];
  if (fsize < 10 || fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6)) {
    file_error(d, path, "not a .npy file (bad magic)");
    goto done;
  }
  int major = pre[6];
  uint64_t hlen, off;
  if (major == 1) {
    hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8;
    off = 10;
  } else if (major == 2 || major == 3) {
    if (fsize < 12 || fread(pre + 10, 1, 2, f) != 2) {
      file_error(d, path, "truncated .npy header");
      goto done;
    }
    hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 |
           (uint64_t)pre[11] << 24;
    off = 12;
  } else {
    file_error(d, path, "unsupported .npy format version %d.%d", major, pre[7]);
    goto done;
  }
  if (hlen > NPY_MAX_HEADER || hlen > fsize - off) {
    file_error(d, path, "truncated or oversized .npy header (%llu bytes)",
               (unsigned long long)hlen);
    goto done;
  }
  hdr = malloc(hlen + 1);
  if (!hdr || fread(hdr, 1, hlen, f) != hlen) {
    file_error(d, path, "cannot read the .npy header");
    goto done;
  }
  hdr[hlen] = 0;
  if (memchr(hdr, 0, hlen)) {
    file_error(d, path, "malformed .npy header: NUL byte");
    goto done;
  }
  DType dt = DT_F32;
  int rank = 0;
  int64_t dims[IR_MAX_RANK];
  if (npy_parse_header(path, hdr, hlen, &dt, &rank, dims, d))
    goto done;
  int64_t numel;
  uint64_t nbytes;
  if (checked_size(dims, rank, dt, &numel, &nbytes)) {
    file_error(d, path, "the .npy shape is too large");
    goto done;
  }
  uint64_t have = fsize - off - hlen;
  if (have != nbytes) {
    file_error(d, path, "the .npy data is %llu bytes, but its header says %llu",
               (unsigned long long)have, (unsigned long long)nbytes);
    goto done;
  }
  t = tensor_new(dt, rank, dims);
  if (!t) {
    file_error(d, path, "out of memory");
    goto done;
  }
  if (nbytes && fread(t->data, 1, nbytes, f) != nbytes) {
    file_error(d, path, "cannot read the .npy data");
    tensor_free(t);
    t = NULL;
  }
done:
  free(hdr);
  fclose(f);
  return t;
}

static const char *npy_descr(DType dt) {
  switch (dt) {
  case DT_F64: return "<f8";
  case DT_F32: return "<f4";
  case DT_F16: return "<f2";
  case DT_I64: return "<i8";
  case DT_I32: return "<i4";
  case DT_I16: return "<i2";
  case DT_I8: return "|i1";
  case DT_U8: return "|u1";
  case DT_BOOL: return "|b1";
  default: return NULL;
  }
}

/* Writes two byte runs (header, data) to path as one output file. */
static int write_atomic(const char *path, const void *a, size_t na, const void *b,
                        size_t nb, Diag *d) {
  OutFile out;
  FILE *f = outfile_open(&out, path, d);
  if (!f)
    return -1;
  if ((na && fwrite(a, 1, na, f) != na) || (nb && fwrite(b, 1, nb, f) != nb)) {
    int e = errno;
    outfile_abort(&out);
    return file_error(d, path, "cannot write: %s", strerror(e));
  }
  return outfile_commit(&out, d);
}

int npy_write(const char *path, const Tensor *t, Diag *d) {
  const char *descr = npy_descr(t->dtype);
  if (!descr)
    return file_error(d, path, "%s tensors cannot be written as .npy (numpy has no such "
                               "type)", dtype_name(t->dtype));
  if (!host_is_little())
    return file_error(d, path, "writing .npy needs a little-endian host");
  if (t->rank < 0 || t->rank > IR_MAX_RANK)
    return file_error(d, path, "bad tensor rank %d", t->rank);
  char shape[IR_MAX_RANK * 24 + 8];
  size_t at = 0;
  at += (size_t)snprintf(shape + at, sizeof shape - at, "(");
  for (int i = 0; i < t->rank; i++)
    at += (size_t)snprintf(shape + at, sizeof shape - at, "%s%lld", i ? ", " : "",
                           (long long)t->dims[i]);
  snprintf(shape + at, sizeof shape - at, t->rank == 1 ? ",)" : ")");
  char dict[sizeof shape + 96];
  int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, "
                                       "'shape': %s, }", descr, shape);
  /* Pad with spaces and end with '\n' so the data starts 64-byte aligned, as numpy does. */
  size_t pre = 10;
  size_t total = (pre + (size_t)dl + 1 + 63) / 64 * 64;
  int major = 1;
  if (total - pre > 65535) { /* cannot happen at rank <= 8, but the format allows it */
    pre = 12;
    total = (pre + (size_t)dl + 1 + 63) / 64 * 64;
    major = 2;
  }
  size_t hlen = total - pre;
  unsigned char *head = malloc(total);
  if (!head)
    return file_error(d, path, "out of memory");
  memcpy(head, "\x93NUMPY", 6);
  head[6] = (unsigned char)major;
  head[7] = 0;
  head[8] = (unsigned char)(hlen & 0xFF);
  head[9] = (unsigned char)(hlen >> 8 & 0xFF);
  if (major == 2) {
    head[10] = (unsigned char)(hlen >> 16 & 0xFF);
    head[11] = (unsigned char)(hlen >> 24 & 0xFF);
  }
  memcpy(head + pre, dict, (size_t)dl);
  memset(head + pre + dl, ' ', hlen - (size_t)dl - 1);
  head[total - 1] = '\n';
  int rc = write_atomic(path, head, total, t->data, tensor_nbytes(t), d);
  free(head);
  return rc;
}

/* ---------------------------------------------------------------- a strict JSON reader */

typedef enum JsonKind { JS_NULL, JS_BOOL, JS_NUM, JS_STR, JS_ARR, JS_OBJ } JsonKind;

typedef struct Json Json;
struct Json {
  JsonKind kind;
  bool b;
  bool is_int;  /* JS_NUM written as an integer that fits in int64 */
  int64_t i;
  double num;
  char *s;      /* JS_STR, NUL-terminated (may contain NULs through \u0000; len is exact) */
  size_t len;
  int n;        /* JS_ARR, JS_OBJ */
  Json **items;
  char **keys;  /* JS_OBJ */
};

typedef struct JsonParser {
  Arena *arena;
  const char *p, *end;
  const char *err;
} JsonParser;

static void js_ws(JsonParser *P) {
  while (P->p < P->end && (*P->p == ' ' || *P->p == '\t' || *P->p == '\n' || *P->p == '\r'))
    P->p++;
}

static Json *js_fail(JsonParser *P, const char *why) {
  if (!P->err)
    P->err = why;
  return NULL;
}

static int js_hex4(JsonParser *P, unsigned *out) {
  if (P->end - P->p < 4)
    return -1;
  unsigned v = 0;
  for (int k = 0; k < 4; k++) {
    char c = *P->p++;
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return -1;
  }
  *out = v;
  return 0;
}

/* A string starting at the opening quote; decoded into the arena. */
static char *js_string(JsonParser *P, size_t *len) {
  P->p++;
  /* decoded text is never longer than the source */
  const char *q = P->p;
  while (q < P->end && *q != '"')
    q += *q == '\\' ? 2 : 1;
  if (q >= P->end) {
    js_fail(P, "unterminated string");
    return NULL;
  }
  char *buf = arena_alloc(P->arena, (size_t)(q - P->p) + 1);
  size_t n = 0;
  while (*P->p != '"') {
    unsigned char c = (unsigned char)*P->p++;
    if (c < 0x20) {
      js_fail(P, "control character in string");
      return NULL;
    }
    if (c != '\\') {
      buf[n++] = (char)c;
      continue;
    }
    char e = *P->p++;
    switch (e) {
    case '"': buf[n++] = '"'; break;
    case '\\': buf[n++] = '\\'; break;
    case '/': buf[n++] = '/'; break;
    case 'b': buf[n++] = '\b'; break;
    case 'f': buf[n++] = '\f'; break;
    case 'n': buf[n++] = '\n'; break;
    case 'r': buf[n++] = '\r'; break;
    case 't': buf[n++] = '\t'; break;
    case 'u': {
      unsigned cp, lo;
      if (js_hex4(P, &cp)) {
        js_fail(P, "bad \\u escape");
        return NULL;
      }
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (P->end - P->p < 6 || P->p[0] != '\\' || P->p[1] != 'u') {
          js_fail(P, "unpaired surrogate");
          return NULL;
        }
        P->p += 2;
        if (js_hex4(P, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
          js_fail(P, "unpaired surrogate");
          return NULL;
        }
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
        js_fail(P, "unpaired surrogate");
        return NULL;
      }
      /* a \uXXXX escape takes 6 source bytes and at most 4 encoded ones */
      if (cp < 0x80) {
        buf[n++] = (char)cp;
      } else if (cp < 0x800) {
        buf[n++] = (char)(0xC0 | cp >> 6);
        buf[n++] = (char)(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        buf[n++] = (char)(0xE0 | cp >> 12);
        buf[n++] = (char)(0x80 | (cp >> 6 & 0x3F));
        buf[n++] = (char)(0x80 | (cp & 0x3F));
      } else {
        buf[n++] = (char)(0xF0 | cp >> 18);
        buf[n++] = (char)(0x80 | (cp >> 12 & 0x3F));
        buf[n++] = (char)(0x80 | (cp >> 6 & 0x3F));
        buf[n++] = (char)(0x80 | (cp & 0x3F));
      }
      break;
    }
    default:
      js_fail(P, "bad escape in string");
      return NULL;
    }
  }
  P->p++;
  buf[n] = 0;
  *len = n;
  return buf;
}

static Json *js_number(JsonParser *P, Json *v) {
  const char *s = P->p;
  if (P->p < P->end && *P->p == '-')
    P->p++;
  if (P->p >= P->end || *P->p < '0' || *P->p > '9')
    return js_fail(P, "bad number");
  if (*P->p == '0' && P->p + 1 < P->end && P->p[1] >= '0' && P->p[1] <= '9')
    return js_fail(P, "leading zero in number");
  while (P->p < P->end && *P->p >= '0' && *P->p <= '9')
    P->p++;
  bool frac = false;
  if (P->p < P->end && *P->p == '.') {
    frac = true;
    P->p++;
    if (P->p >= P->end || *P->p < '0' || *P->p > '9')
      return js_fail(P, "bad number");
    while (P->p < P->end && *P->p >= '0' && *P->p <= '9')
      P->p++;
  }
  if (P->p < P->end && (*P->p == 'e' || *P->p == 'E')) {
    frac = true;
    P->p++;
    if (P->p < P->end && (*P->p == '+' || *P->p == '-'))
      P->p++;
    if (P->p >= P->end || *P->p < '0' || *P->p > '9')
      return js_fail(P, "bad number");
    while (P->p < P->end && *P->p >= '0' && *P->p <= '9')
      P->p++;
  }
  char buf[64];
  size_t n = (size_t)(P->p - s);
  if (n >= sizeof buf)
    return js_fail(P, "number too long");
  memcpy(buf, s, n);
  buf[n] = 0;
  v->kind = JS_NUM;
  v->num = strtod(buf, NULL);
  if (!frac) {
    errno = 0;
    long long x = strtoll(buf, NULL, 10);
    if (errno == 0) {
      v->is_int = true;
      v->i = x;
    }
  }
  return v;
}

static Json *js_value(JsonParser *P, int depth);

/* Grows an arena array by doubling (the arena has no realloc; the waste is bounded). */
static void *js_grow(Arena *a, void *old, int n, int *cap, size_t elem) {
  if (n < *cap)
    return old;
  int nc = *cap ? *cap * 2 : 4;
  void *p = arena_alloc(a, (size_t)nc * elem);
  if (n)
    memcpy(p, old, (size_t)n * elem);
  *cap = nc;
  return p;
}

static Json *js_container(JsonParser *P, Json *v, int depth) {
  bool obj = *P->p == '{';
  char close = obj ? '}' : ']';
  P->p++;
  v->kind = obj ? JS_OBJ : JS_ARR;
  int cap = 0, kcap = 0;
  js_ws(P);
  if (P->p < P->end && *P->p == close) {
    P->p++;
    return v;
  }
  for (;;) {
    js_ws(P);
    if (obj) {
      if (P->p >= P->end || *P->p != '"')
        return js_fail(P, "expected a string key");
      size_t klen;
      char *k = js_string(P, &klen);
      if (!k)
        return NULL;
      js_ws(P);
      if (P->p >= P->end || *P->p != ':')
        return js_fail(P, "expected ':'");
      P->p++;
      v->keys = js_grow(P->arena, v->keys, v->n, &kcap, sizeof(char *));
      v->keys[v->n] = k;
    }
    Json *item = js_value(P, depth + 1);
    if (!item)
      return NULL;
    v->items = js_grow(P->arena, v->items, v->n, &cap, sizeof(Json *));
    v->items[v->n++] = item;
    js_ws(P);
    if (P->p < P->end && *P->p == ',') {
      P->p++;
      continue;
    }
    if (P->p < P->end && *P->p == close) {
      P->p++;
      return v;
    }
    return js_fail(P, obj ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static Json *js_value(JsonParser *P, int depth) {
  if (depth > JSON_MAX_DEPTH)
    return js_fail(P, "nested too deeply");
  js_ws(P);
  if (P->p >= P->end)
    return js_fail(P, "unexpected end");
  Json *v = arena_alloc(P->arena, sizeof *v);
  char c = *P->p;
  if (c == '{' || c == '[')
    return js_container(P, v, depth);
  if (c == '"') {
    v->kind = JS_STR;
    v->s = js_string(P, &v->len);
    return v->s ? v : NULL;
  }
  if (c == '-' || (c >= '0' && c <= '9'))
    return js_number(P, v);
  static const struct { const char *w; JsonKind k; bool b; } words[] = {
      {"true", JS_BOOL, true}, {"false", JS_BOOL, false}, {"null", JS_NULL, false}};
  for (size_t i = 0; i < 3; i++) {
    size_t n = strlen(words[i].w);
    if ((size_t)(P->end - P->p) >= n && !memcmp(P->p, words[i].w, n)) {
      P->p += n;
      v->kind = words[i].k;
      v->b = words[i].b;
      return v;
    }
  }
  return js_fail(P, "unexpected character");
}

static const Json *js_get(const Json *obj, const char *key) {
  for (int i = 0; i < obj->n; i++)
    if (!strcmp(obj->keys[i], key))
      return obj->items[i];
  return NULL;
}

/* ---------------------------------------------------------------- .safetensors */

static const struct { const char *name; DType dt; } st_types[] = {
    {"F64", DT_F64},     {"F32", DT_F32},         {"F16", DT_F16},   {"BF16", DT_BF16},
    {"F8_E4M3", DT_F8E4M3}, {"F8_E5M2", DT_F8E5M2}, {"I64", DT_I64},  {"I32", DT_I32},
    {"I16", DT_I16},     {"I8", DT_I8},           {"U8", DT_U8},     {"BOOL", DT_BOOL},
};

static bool js_uint(const Json *v, int64_t *out) {
  if (!v || v->kind != JS_NUM || !v->is_int || v->i < 0)
    return false;
  *out = v->i;
  return true;
}

Tensor *safetensors_read(const char *path, const char *key, Diag *d) {
  if (!host_is_little()) {
    file_error(d, path, "reading .safetensors needs a little-endian host");
    return NULL;
  }
  uint64_t fsize;
  FILE *f = open_sized(path, &fsize, d);
  if (!f)
    return NULL;
  Tensor *t = NULL;
  char *hdr = NULL;
  Arena *arena = NULL;
  unsigned char lenb[8];
  if (fsize < 8 || fread(lenb, 1, 8, f) != 8) {
    file_error(d, path, "not a .safetensors file (shorter than its 8-byte header length)");
    goto done;
  }
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--)
    hlen = hlen << 8 | lenb[i];
  if (hlen > fsize - 8 || hlen > ST_MAX_HEADER) {
    file_error(d, path, "the .safetensors header length %llu is past the end of the file",
               (unsigned long long)hlen);
    goto done;
  }
  hdr = malloc(hlen ? hlen : 1);
  if (!hdr || fread(hdr, 1, hlen, f) != hlen) {
    file_error(d, path, "cannot read the .safetensors header");
    goto done;
  }
  arena = arena_new();
  JsonParser P = {arena, hdr, hdr + hlen, NULL};
  Json *root = js_value(&P, 0);
  if (root) {
    js_ws(&P);
    if (P.p != P.end)
      root = js_fail(&P, "trailing characters");
  }
  if (!root) {
    file_error(d, path, "malformed .safetensors header: %s at byte %lld", P.err,
               (long long)(P.p - hdr));
    goto done;
  }
  if (root->kind != JS_OBJ) {
    file_error(d, path, "malformed .safetensors header: not a JSON object");
    goto done;
  }
  const Json *meta = js_get(root, "__metadata__");
  if (meta && meta->kind != JS_OBJ) {
    file_error(d, path, "malformed .safetensors header: '__metadata__' is not an object");
    goto done;
  }
  const Json *e = strcmp(key, "__metadata__") ? js_get(root, key) : NULL;
  if (!e) {
    file_error(d, path, "no tensor '%s' in %s", key, path);
    goto done;
  }
  const Json *jdt = e->kind == JS_OBJ ? js_get(e, "dtype") : NULL;
  const Json *jshape = e->kind == JS_OBJ ? js_get(e, "shape") : NULL;
  const Json *joff = e->kind == JS_OBJ ? js_get(e, "data_offsets") : NULL;
  if (!jdt || jdt->kind != JS_STR || !jshape || jshape->kind != JS_ARR || !joff ||
      joff->kind != JS_ARR || joff->n != 2) {
    file_error(d, path, "malformed .safetensors entry '%s': needs \"dtype\", \"shape\" and "
                        "\"data_offsets\" [begin, end]", key);
    goto done;
  }
  DType dt = DT_COUNT;
  for (size_t i = 0; i < sizeof st_types / sizeof st_types[0]; i++)
    if (!strcmp(jdt->s, st_types[i].name))
      dt = st_types[i].dt;
  if (dt == DT_COUNT) {
    file_error(d, path, "tensor '%s' has unsupported dtype '%s'", key, jdt->s);
    goto done;
  }
  if (jshape->n > IR_MAX_RANK) {
    file_error(d, path, "tensor '%s' has rank %d (at most %d)", key, jshape->n, IR_MAX_RANK);
    goto done;
  }
  int64_t dims[IR_MAX_RANK];
  for (int i = 0; i < jshape->n; i++)
    if (!js_uint(jshape->items[i], &dims[i])) {
      file_error(d, path, "tensor '%s': shape entries must be non-negative integers", key);
      goto done;
    }
  int64_t begin, end, numel;
  uint64_t nbytes;
  if (!js_uint(joff->items[0], &begin) || !js_uint(joff->items[1], &end) || begin > end) {
    file_error(d, path, "tensor '%s': bad data_offsets", key);
    goto done;
  }
  if (checked_size(dims, jshape->n, dt, &numel, &nbytes)) {
    file_error(d, path, "tensor '%s': shape too large", key);
    goto done;
  }
  uint64_t data_size = fsize - 8 - hlen;
  if ((uint64_t)end > data_size) {
    file_error(d, path, "tensor '%s': data_offsets [%lld, %lld] past the end of the data "
                        "(%llu bytes)", key, (long long)begin, (long long)end,
               (unsigned long long)data_size);
    goto done;
  }
  if ((uint64_t)(end - begin) != nbytes) {
    file_error(d, path, "tensor '%s': data_offsets span %lld bytes, but %s%s needs %llu",
               key, (long long)(end - begin), jdt->s, jshape->n ? " of that shape" : "",
               (unsigned long long)nbytes);
    goto done;
  }
  t = tensor_new(dt, jshape->n, dims);
  if (!t) {
    file_error(d, path, "out of memory");
    goto done;
  }
  if (nbytes && (fseeko(f, (off_t)(8 + hlen + (uint64_t)begin), SEEK_SET) ||
                 fread(t->data, 1, nbytes, f) != nbytes)) {
    file_error(d, path, "cannot read the data of tensor '%s'", key);
    tensor_free(t);
    t = NULL;
  }
done:
  if (arena)
    arena_free(arena);
  free(hdr);
  fclose(f);
  return t;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

Tensor *tensor_load(const char *path, const char *key, Diag *d) {
  if (ends_with(path, ".npy")) {
    if (key) {
      file_error(d, path, "a .npy file holds one tensor: no key '%s' needed", key);
      return NULL;
    }
    return npy_read(path, d);
  }
  if (ends_with(path, ".safetensors")) {
    if (!key) {
      file_error(d, path, "a .safetensors file needs the key of the tensor to load");
      return NULL;
    }
    return safetensors_read(path, key, d);
  }
  file_error(d, path, "unknown tensor file extension (expected .npy or .safetensors)");
  return NULL;
}

/* Appends s to the growing buffer *b as a JSON string. */
static int json_str(char **b, size_t *len, size_t *cap, const char *s) {
  size_t need = *len + 6 * strlen(s) + 3;
  if (need > *cap) {
    size_t nc = *cap * 2 > need ? *cap * 2 : need;
    char *p = realloc(*b, nc);
    if (!p)
      return -1;
    *b = p;
    *cap = nc;
  }
  char *o = *b + *len;
  *o++ = '"';
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') {
      *o++ = '\\';
      *o++ = (char)*c;
    } else if (*c < 0x20) {
      o += sprintf(o, "\\u%04x", *c);
    } else {
      *o++ = (char)*c;
    }
  }
  *o++ = '"';
  *len = (size_t)(o - *b);
  return 0;
}

static int json_printf(char **b, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int json_printf(char **b, size_t *len, size_t *cap, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof tmp)
    return -1;
  if (*len + (size_t)n + 1 > *cap) {
    size_t nc = *cap * 2 > *len + (size_t)n + 1 ? *cap * 2 : *len + (size_t)n + 1;
    char *p = realloc(*b, nc);
    if (!p)
      return -1;
    *b = p;
    *cap = nc;
  }
  memcpy(*b + *len, tmp, (size_t)n + 1);
  *len += (size_t)n;
  return 0;
}

int safetensors_fwrite(FILE *f, const char *path, const char *const *names,
                       const Tensor *const *ts, int n, Diag *d) {
  if (!host_is_little())
    return file_error(d, path, "writing .safetensors needs a little-endian host");
  size_t len = 0, cap = 256;
  char *h = malloc(cap);
  int rc = h ? json_printf(&h, &len, &cap, "{") : -1;
  uint64_t off = 0;
  for (int i = 0; i < n && rc == 0; i++) {
    const char *st = NULL;
    for (size_t k = 0; k < sizeof st_types / sizeof *st_types; k++)
      if (st_types[k].dt == ts[i]->dtype)
        st = st_types[k].name;
    if (!st) {
      free(h);
      return file_error(d, path, "%s tensors have no .safetensors type",
                        dtype_name(ts[i]->dtype));
    }
    uint64_t nb = tensor_nbytes(ts[i]);
    rc = (i ? json_printf(&h, &len, &cap, ",") : 0) || json_str(&h, &len, &cap, names[i]) ||
         json_printf(&h, &len, &cap, ":{\"dtype\":\"%s\",\"shape\":[", st);
    for (int j = 0; j < ts[i]->rank && rc == 0; j++)
      rc = json_printf(&h, &len, &cap, "%s%lld", j ? "," : "", (long long)ts[i]->dims[j]);
    if (rc == 0)
      rc = json_printf(&h, &len, &cap, "],\"data_offsets\":[%llu,%llu]}",
                       (unsigned long long)off, (unsigned long long)(off + nb));
    off += nb;
  }
  /* Pad the header with spaces so the data starts 8-byte aligned, as the format advises. */
  while (rc == 0 && (len + 1) % 8)
    rc = json_printf(&h, &len, &cap, " ");
  if (rc == 0)
    rc = json_printf(&h, &len, &cap, "}");
  if (rc) {
    free(h);
    return file_error(d, path, "out of memory");
  }
  unsigned char lenb[8];
  for (int i = 0; i < 8; i++)
    lenb[i] = (unsigned char)((uint64_t)len >> (8 * i));
  bool ok = fwrite(lenb, 1, 8, f) == 8 && fwrite(h, 1, len, f) == len;
  for (int i = 0; i < n && ok; i++)
    ok = fwrite(ts[i]->data, 1, tensor_nbytes(ts[i]), f) == tensor_nbytes(ts[i]);
  free(h);
  return ok ? 0 : file_error(d, path, "cannot write: %s", strerror(errno));
}

int safetensors_write(const char *path, const char *const *names, const Tensor *const *ts,
                      int n, Diag *d) {
  OutFile o;
  FILE *f = outfile_open(&o, path, d);
  if (!f)
    return -1;
  if (safetensors_fwrite(f, path, names, ts, n, d)) {
    outfile_abort(&o);
    return -1;
  }
  return outfile_commit(&o, d);
}
