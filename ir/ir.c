/* ir.c: the IR's data structures: arena, diagnostics, element types and their
 * conversions, shapes, tensors, the op table and attribute schemas, and the graph
 * builder. Everything else in ir/ (inference, verifier, printer, executor) builds on it. */
/* realpath() is X/Open, beyond the POSIX level the build asks for. */
#define _XOPEN_SOURCE 700

#include "ir/ir.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- arena */

typedef struct Chunk {
  struct Chunk *next;
  size_t used, size;
  _Alignas(16) unsigned char data[];
} Chunk;

/* A block malloc'd elsewhere that the arena frees (arena_adopt). */
typedef struct Adopted {
  struct Adopted *next;
  void *p;
} Adopted;

struct Arena {
  Chunk *head;
  Adopted *adopted;
};

enum { CHUNK_SIZE = 64 * 1024 };

/* Out of host memory while building IR: there is no sane way to continue. */
static void *oom_unless(void *p) {
  if (!p) {
    fputs("gpucc: out of memory\n", stderr);
    abort();
  }
  return p;
}

static void *xmalloc(size_t n) { return oom_unless(malloc(n ? n : 1)); }

typedef struct ParallelFor {
  int n, next;
  void (*body)(void *arg, int i);
  void *arg;
  pthread_mutex_t lock;
} ParallelFor;

static void *parallel_worker(void *arg) {
  ParallelFor *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->lock);
    int i = p->next < p->n ? p->next++ : -1;
    pthread_mutex_unlock(&p->lock);
    if (i < 0)
      return NULL;
    p->body(p->arg, i);
  }
}

void parallel_for(int n, int nthreads, void (*body)(void *arg, int i), void *arg) {
  ParallelFor p = {n, 0, body, arg, PTHREAD_MUTEX_INITIALIZER};
  int started = 0, extra = nthreads < n ? nthreads - 1 : n - 1;
  pthread_t *threads = extra > 0 ? calloc((size_t)extra, sizeof *threads) : NULL;
  for (; threads && started < extra; started++)
    if (pthread_create(&threads[started], NULL, parallel_worker, &p))
      break;
  parallel_worker(&p);
  for (int t = 0; t < started; t++)
    pthread_join(threads[t], NULL);
  free(threads);
}

Arena *arena_new(void) {
  Arena *a = xmalloc(sizeof *a);
  a->head = NULL;
  a->adopted = NULL;
  return a;
}

void arena_free(Arena *a) {
  if (!a)
    return;
  for (Chunk *c = a->head, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  for (Adopted *b = a->adopted, *next; b; b = next) {
    next = b->next;
    free(b->p);
    free(b);
  }
  free(a);
}

void arena_adopt(Arena *a, void *p) {
  Adopted *b = xmalloc(sizeof *b);
  b->p = p;
  b->next = a->adopted;
  a->adopted = b;
}

void *arena_alloc(Arena *a, size_t n) {
  if (n > SIZE_MAX / 2) /* no allocation succeeds at that size; the rounding must not wrap */
    oom_unless(NULL);
  n = (n + 15) & ~(size_t)15;
  Chunk *c = a->head;
  if (c && c->size - c->used >= n) {
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
  }
  if (n <= CHUNK_SIZE / 4) {
    c = xmalloc(sizeof(Chunk) + CHUNK_SIZE);
    c->next = a->head;
    c->size = CHUNK_SIZE;
    c->used = n;
    a->head = c;
    memset(c->data, 0, n);
    return c->data;
  }
  /* A big block gets a chunk of its own behind the current one, so the small allocations
   * keep filling the current chunk. It is calloc'd: fresh pages are zero already, so a
   * constant of zeros costs no memory until it is written. */
  c = oom_unless(calloc(1, sizeof(Chunk) + n));
  c->size = c->used = n;
  if (a->head) {
    c->next = a->head->next;
    a->head->next = c;
  } else {
    c->next = NULL;
    a->head = c;
  }
  return c->data;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
  char *p = arena_alloc(a, n + 1);
  if (n) /* an empty protobuf string has no data pointer */
    memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

void *arena_memdup(Arena *a, const void *p, size_t n) {
  void *q = arena_alloc(a, n);
  if (n)
    memcpy(q, p, n);
  return q;
}

/* ---------------------------------------------------------------- diagnostics */

static size_t append(char *buf, size_t at, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static size_t append(char *buf, size_t at, size_t cap, const char *fmt, ...) {
  if (at >= cap)
    return at;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + at, cap - at, fmt, ap);
  va_end(ap);
  if (k < 0)
    return at;
  return at + (size_t)k < cap ? at + (size_t)k : cap - 1;
}

/* Appends "file:line:col: <what>: <message>" and, when the source is known, the line
 * and a caret under the column. */
static void format_at(Diag *d, size_t at, SrcLoc loc, const char *what, const char *fmt,
                      va_list ap) {
  char *buf = d->msg;
  size_t cap = sizeof d->msg;
  if (loc.file && loc.line > 0)
    at = append(buf, at, cap, "%s:%d:%d: ", loc.file, loc.line, loc.col);
  else if (loc.file)
    at = append(buf, at, cap, "%s: ", loc.file);
  at = append(buf, at, cap, "%s: ", what);
  if (at < cap) {
    int k = vsnprintf(buf + at, cap - at, fmt, ap);
    size_t end = k > 0 ? (at + (size_t)k < cap ? at + (size_t)k : cap - 1) : at;
    /* A name from a model may hold any byte: a terminal's escape sequences (ESC, CR) in
     * it must not reach the terminal that shows the message. */
    for (; at < end; at++)
      if (((unsigned char)buf[at] < 0x20 && buf[at] != '\n' && buf[at] != '\t') ||
          buf[at] == 0x7f)
        buf[at] = '?';
  }
  if (!loc.src || loc.line <= 0)
    return;
  const char *p = loc.src;
  for (int l = 1; l < loc.line && *p; p++)
    if (*p == '\n')
      l++;
  const char *e = p;
  while (*e && *e != '\n' && *e != '\r')
    e++;
  if (e - p > 300)
    return; /* a line this long would not help anyone */
  at = append(buf, at, cap, "\n  ");
  for (const char *q = p; q < e; q++)
    at = append(buf, at, cap, "%c", (*q == '\t' || (unsigned char)*q >= 0x20) ? *q : ' ');
  at = append(buf, at, cap, "\n  ");
  for (int c = 1; c < loc.col && p + c - 1 < e; c++)
    at = append(buf, at, cap, "%c", p[c - 1] == '\t' ? '\t' : ' ');
  append(buf, at, cap, "^");
}

int diag_verror(Diag *d, SrcLoc loc, const char *fmt, va_list ap) {
  if (!d || d->failed)
    return -1;
  d->failed = true;
  d->msg[0] = 0;
  format_at(d, 0, loc, "error", fmt, ap);
  return -1;
}

int diag_error(Diag *d, SrcLoc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_verror(d, loc, fmt, ap);
  va_end(ap);
  return -1;
}

void diag_note(Diag *d, SrcLoc loc, const char *fmt, ...) {
  if (!d || !d->failed)
    return;
  size_t at = strlen(d->msg);
  at = append(d->msg, at, sizeof d->msg, "\n");
  va_list ap;
  va_start(ap, fmt);
  format_at(d, at, loc, "note", fmt, ap);
  va_end(ap);
}

/* ---------------------------------------------------------------- element types */

static const struct {
  const char *name;
  size_t bytes;
  bool is_float, is_int, is_signed;
} dtypes[DT_COUNT] = {
#define DT(id, name, bytes, is_float, is_int, is_signed) \
  [DT_##id] = {name, bytes, is_float, is_int, is_signed},
#include "dtypes.def"
#undef DT
};

const char *dtype_name(DType t) { return t < DT_COUNT ? dtypes[t].name : "?"; }
size_t dtype_size(DType t) { return t < DT_COUNT ? dtypes[t].bytes : 0; }
bool dtype_is_float(DType t) { return t < DT_COUNT && dtypes[t].is_float; }
bool dtype_is_int(DType t) { return t < DT_COUNT && dtypes[t].is_int; }
bool dtype_is_signed(DType t) { return t < DT_COUNT && dtypes[t].is_signed; }

int dtype_from_name(const char *s, DType *out) {
  for (int t = 0; t < DT_COUNT; t++)
    if (!strcmp(s, dtypes[t].name)) {
      *out = (DType)t;
      return 0;
    }
  return -1;
}

/* A small float format: `ebits` exponent bits, `mbits` mantissa bits, IEEE-style
 * inf/NaN when `ieee`, otherwise the "fn" convention of f8e4m3 (no inf, all-ones is NaN,
 * saturate at the largest finite value). Encoding rounds to nearest even, straight from
 * double, so there is no double rounding. */
static uint32_t mini_encode(double v, int ebits, int mbits, bool ieee) {
  const uint32_t sign = signbit(v) ? 1u << (ebits + mbits) : 0;
  const int bias = (1 << (ebits - 1)) - 1;
  const uint32_t exp_all = (1u << ebits) - 1;
  const uint32_t max_finite = ieee ? ((exp_all - 1) << mbits) | ((1u << mbits) - 1)
                                   : (exp_all << mbits) | ((1u << mbits) - 2);
  if (isnan(v))
    return sign | (ieee ? (exp_all << mbits) | (1u << (mbits - 1)) : (exp_all << mbits) | ((1u << mbits) - 1));
  double a = fabs(v);
  if (isinf(a))
    return sign | (ieee ? exp_all << mbits : max_finite);
  if (a == 0)
    return sign;
  int ex;
  frexp(a, &ex);
  int e = ex - 1; /* a = 1.f * 2^e */
  const int emin = 1 - bias;
  uint32_t bits;
  if (e < emin) {
    double k = nearbyint(ldexp(a, mbits - emin)); /* subnormal quanta; may round up to normal */
    bits = (uint32_t)k;
  } else {
    double k = nearbyint(ldexp(a, mbits - e)); /* in [2^m, 2^(m+1)] */
    if (k >= ldexp(1, mbits + 1)) {
      k /= 2;
      e++;
    }
    if (e + bias >= (int)exp_all + (ieee ? 0 : 1))
      return sign | (ieee ? exp_all << mbits : max_finite);
    bits = ((uint32_t)(e + bias) << mbits) | ((uint32_t)k - (1u << mbits));
  }
  if (bits > max_finite)
    return sign | (ieee ? exp_all << mbits : max_finite);
  return sign | bits;
}

static double mini_decode(uint32_t b, int ebits, int mbits, bool ieee) {
  const int bias = (1 << (ebits - 1)) - 1;
  const uint32_t exp_all = (1u << ebits) - 1;
  double s = (b >> (ebits + mbits)) & 1 ? -1.0 : 1.0;
  uint32_t e = (b >> mbits) & exp_all, m = b & ((1u << mbits) - 1);
  if (ieee && e == exp_all)
    return m ? NAN : s * INFINITY;
  if (!ieee && e == exp_all && m == (1u << mbits) - 1)
    return NAN;
  if (e == 0)
    return s * ldexp((double)m, 1 - bias - mbits);
  return s * ldexp((double)(m | (1u << mbits)), (int)e - bias - mbits);
}

uint16_t f32_to_f16(float f) { return (uint16_t)mini_encode(f, 5, 10, true); }
float f16_to_f32(uint16_t h) { return (float)mini_decode(h, 5, 10, true); }
/* bf16 is f32's upper half: rounded to nearest even by adding half a step (less one, plus
 * the kept half's lowest bit) and dropping the lower half, which carries into the exponent
 * and on to inf as rounding should; a NaN is the quiet NaN of its sign, as mini_encode
 * gives (tests/unit/test_ir.c checks the two agree). A model's weights go through here. */
uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16 & 0x8000u) | 0x7fc0u);
  return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}
float bf16_to_f32(uint16_t h) { return (float)mini_decode(h, 8, 7, true); }
uint8_t f32_to_f8e4m3(float f) { return (uint8_t)mini_encode(f, 4, 3, false); }
float f8e4m3_to_f32(uint8_t b) { return (float)mini_decode(b, 4, 3, false); }
uint8_t f32_to_f8e5m2(float f) { return (uint8_t)mini_encode(f, 5, 2, true); }
float f8e5m2_to_f32(uint8_t b) { return (float)mini_decode(b, 5, 2, true); }

static int64_t f64_to_i64(double v) {
  if (isnan(v))
    return 0;
  if (v >= 9223372036854775807.0)
    return INT64_MAX;
  if (v <= -9223372036854775808.0)
    return INT64_MIN;
  return (int64_t)v;
}

double dtype_load_f64(DType t, const void *p) {
  switch (t) {
  case DT_F64: { double v; memcpy(&v, p, 8); return v; }
  case DT_F32: { float v; memcpy(&v, p, 4); return v; }
  case DT_F16: { uint16_t v; memcpy(&v, p, 2); return mini_decode(v, 5, 10, true); }
  case DT_BF16: { uint16_t v; memcpy(&v, p, 2); return mini_decode(v, 8, 7, true); }
  case DT_F8E4M3: return mini_decode(*(const uint8_t *)p, 4, 3, false);
  case DT_F8E5M2: return mini_decode(*(const uint8_t *)p, 5, 2, true);
  default: return (double)dtype_load_i64(t, p);
  }
}

int64_t dtype_load_i64(DType t, const void *p) {
  switch (t) {
  case DT_I64: { int64_t v; memcpy(&v, p, 8); return v; }
  case DT_I32: { int32_t v; memcpy(&v, p, 4); return v; }
  case DT_I16: { int16_t v; memcpy(&v, p, 2); return v; }
  case DT_I8: return *(const int8_t *)p;
  case DT_U8: return *(const uint8_t *)p;
  case DT_BOOL: return *(const uint8_t *)p != 0;
  default: return f64_to_i64(dtype_load_f64(t, p));
  }
}

void dtype_store_i64(DType t, void *p, int64_t v) {
  switch (t) {
  case DT_I64: memcpy(p, &v, 8); return;
  case DT_I32: { int32_t x = (int32_t)(uint32_t)v; memcpy(p, &x, 4); return; }
  case DT_I16: { int16_t x = (int16_t)(uint16_t)v; memcpy(p, &x, 2); return; }
  case DT_I8: *(int8_t *)p = (int8_t)(uint8_t)v; return;
  case DT_U8: *(uint8_t *)p = (uint8_t)v; return;
  case DT_BOOL: *(uint8_t *)p = v != 0; return;
  default: dtype_store_f64(t, p, (double)v); return;
  }
}

void dtype_store_f64(DType t, void *p, double v) {
  switch (t) {
  case DT_F64: memcpy(p, &v, 8); return;
  case DT_F32: {
    /* Rounding a double past the float range is undefined in C; do what IEEE does. */
    float x = fabs(v) > FLT_MAX && !isinf(v)
                  ? (float)copysign(fabs(v) >= 0x1.ffffffp127 ? INFINITY : FLT_MAX, v)
                  : (float)v;
    memcpy(p, &x, 4);
    return;
  }
  case DT_F16: { uint16_t x = (uint16_t)mini_encode(v, 5, 10, true); memcpy(p, &x, 2); return; }
  case DT_BF16: { uint16_t x = (uint16_t)mini_encode(v, 8, 7, true); memcpy(p, &x, 2); return; }
  case DT_F8E4M3: *(uint8_t *)p = (uint8_t)mini_encode(v, 4, 3, false); return;
  case DT_F8E5M2: *(uint8_t *)p = (uint8_t)mini_encode(v, 5, 2, true); return;
  case DT_BOOL: *(uint8_t *)p = v != 0; return;
  default: dtype_store_i64(t, p, f64_to_i64(v)); return;
  }
}

/* ---------------------------------------------------------------- shapes and types */

Type type_unknown(void) {
  Type t;
  memset(&t, 0, sizeof t);
  t.dtype = DT_UNKNOWN;
  t.shape.rank = -1;
  return t;
}

bool type_is_known(const Type *t) { return t->dtype != DT_UNKNOWN && t->shape.rank >= 0; }

bool dim_eq(Dim a, Dim b) {
  if (a.sym || b.sym)
    return a.sym && b.sym && !strcmp(a.sym, b.sym);
  return a.n == b.n;
}

bool type_eq(const Type *a, const Type *b) {
  if (a->dtype != b->dtype || a->shape.rank != b->shape.rank)
    return false;
  for (int i = 0; i < a->shape.rank; i++)
    if (!dim_eq(a->shape.dims[i], b->shape.dims[i]))
      return false;
  return true;
}

bool shape_broadcasts_to(const Shape *a, const Shape *b) {
  if (a->rank > b->rank)
    return false;
  for (int i = 1; i <= a->rank; i++) {
    Dim d = a->dims[a->rank - i];
    if (!dim_eq(d, b->dims[b->rank - i]) && !(d.n == 1 && !d.sym))
      return false;
  }
  return true;
}

bool shape_is_static(const Shape *s) {
  if (s->rank < 0)
    return false;
  for (int i = 0; i < s->rank; i++)
    if (s->dims[i].sym)
      return false;
  return true;
}

int64_t shape_numel(const Shape *s) {
  if (!shape_is_static(s))
    return -1;
  /* An empty shape may have huge extents beside its 0 (a Tile of a model's), whose
   * product alone would overflow; a non-empty one fits (shape inference refuses more
   * elements than int64 holds), but saturate anyway. */
  for (int i = 0; i < s->rank; i++)
    if (s->dims[i].n == 0)
      return 0;
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++)
    if (!size_mul(n, s->dims[i].n, &n))
      return INT64_MAX;
  return n;
}

char *type_str(const Type *t, char *buf, size_t n) {
  size_t at = append(buf, 0, n, "%s", dtype_name(t->dtype));
  if (t->shape.rank < 0) {
    append(buf, at, n, "[?]");
    return buf;
  }
  at = append(buf, at, n, "[");
  for (int i = 0; i < t->shape.rank; i++) {
    const Dim *d = &t->shape.dims[i];
    at = append(buf, at, n, i ? ", " : "");
    at = d->sym ? append(buf, at, n, "%s", d->sym) : append(buf, at, n, "%" PRId64, d->n);
  }
  append(buf, at, n, "]");
  return buf;
}

/* ---------------------------------------------------------------- checked sizes */

bool size_add(int64_t a, int64_t b, int64_t *r) {
  if (a < 0 || b < 0 || a > INT64_MAX - b)
    return false;
  *r = a + b;
  return true;
}

bool size_mul(int64_t a, int64_t b, int64_t *r) {
  if (a < 0 || b < 0 || (a != 0 && b > INT64_MAX / a))
    return false;
  *r = a * b;
  return true;
}

bool dims_size(int rank, const int64_t *dims, DType dt, int64_t *numel, int64_t *nbytes) {
  int64_t n = 1, bytes;
  bool any_zero = false;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0)
      return false;
    any_zero |= dims[i] == 0;
  }
  /* A zero dim makes the count 0 whatever the others are, but each dim alone must still
   * be a size: the others may be used as strides or loop bounds. */
  for (int i = 0; i < rank; i++) {
    int64_t d = any_zero && dims[i] != 0 ? 1 : dims[i];
    if (!size_mul(n, d, &n) || n > IR_MAX_BYTES || dims[i] > IR_MAX_BYTES)
      return false;
  }
  if (!size_mul(n, (int64_t)dtype_size(dt < DT_COUNT ? dt : DT_U8), &bytes) ||
      bytes > IR_MAX_BYTES)
    return false;
  if (numel)
    *numel = n;
  if (nbytes)
    *nbytes = bytes;
  return true;
}

bool shape_size(const Shape *s, DType dt, int64_t *numel, int64_t *nbytes) {
  if (s->rank < 0 || s->rank > IR_MAX_RANK)
    return false;
  int64_t dims[IR_MAX_RANK];
  for (int i = 0; i < s->rank; i++)
    dims[i] = s->dims[i].sym ? 1 : s->dims[i].n;
  return dims_size(s->rank, dims, dt, numel, nbytes);
}

bool window_len(int64_t in, int64_t k, int64_t stride, int64_t dil, int64_t pad_begin,
                int64_t pad_end, bool ceil_mode, int64_t *out) {
  int64_t span, padded, o;
  if (k < 1 || stride < 1 || dil < 1 || in < 0 || pad_begin < 0 || pad_end < 0 ||
      !size_mul(dil, k - 1, &span) || !size_add(span, 1, &span) ||
      !size_add(in, pad_begin, &padded) || !size_add(padded, pad_end, &padded))
    return false;
  if (padded < span) {
    *out = 0;
    return true;
  }
  o = (padded - span) / stride + 1;
  /* The extra window starts at o * stride, which must lie before the end padding. */
  int64_t start_max = in + pad_begin - 1; /* no overflow: padded did not */
  if (ceil_mode && (padded - span) % stride != 0 && start_max >= 0 && o <= start_max / stride)
    o++;
  *out = o;
  return true;
}

bool double_to_i64(double v, int64_t lo, int64_t hi, int64_t *out) {
  /* -2^63 and 2^63 are exact doubles; every double in between truncates into int64. */
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
    return false;
  int64_t i = (int64_t)v;
  if (i < lo || i > hi)
    return false;
  *out = i;
  return true;
}

/* ---------------------------------------------------------------- tensors */

Type tensor_type(const Tensor *t) {
  Type ty = {.dtype = t->dtype, .shape.rank = t->rank};
  for (int i = 0; i < t->rank; i++)
    ty.shape.dims[i] = (Dim){t->dims[i], NULL};
  return ty;
}

bool tensor_fits(const Tensor *t, const Type *ty) {
  bool ok = t->dtype == ty->dtype && t->rank == ty->shape.rank;
  for (int i = 0; ok && i < t->rank; i++)
    ok = t->dims[i] >= 0 && (ty->shape.dims[i].sym || ty->shape.dims[i].n == t->dims[i]);
  return ok;
}

int64_t tensor_numel(const Tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++)
    n *= t->dims[i];
  return n;
}

size_t tensor_nbytes(const Tensor *t) { return (size_t)tensor_numel(t) * dtype_size(t->dtype); }

void channels_last_perms(int r, int64_t *to_first, int64_t *to_last) {
  for (int j = 0; j < r; j++) {
    to_first[j] = j == 0 ? 0 : j == 1 ? r - 1 : j - 1;
    to_last[j] = j == 0 ? 0 : j == r - 1 ? 1 : j + 1;
  }
}

void contiguous_strides(int rank, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= dims[i];
  }
}

static void tensor_init(Tensor *t, DType dt, int rank, const int64_t *dims) {
  memset(t, 0, sizeof *t);
  t->dtype = dt;
  t->rank = rank;
  for (int i = 0; i < rank; i++)
    t->dims[i] = dims[i];
}

Tensor *tensor_new(DType dt, int rank, const int64_t *dims) {
  if (rank < 0 || rank > IR_MAX_RANK || !dims_size(rank, dims, dt, NULL, NULL))
    return NULL;
  Tensor *t = malloc(sizeof *t);
  if (!t)
    return NULL;
  tensor_init(t, dt, rank, dims);
  t->data = calloc(1, tensor_nbytes(t) ? tensor_nbytes(t) : 1);
  if (!t->data) {
    free(t);
    return NULL;
  }
  return t;
}

void tensor_free(Tensor *t) {
  if (!t)
    return;
  free(t->data);
  free(t);
}

Tensor *tensor_in_arena(Arena *a, DType dt, int rank, const int64_t *dims) {
  Tensor *t = arena_alloc(a, sizeof *t);
  tensor_init(t, dt, rank, dims);
  t->data = arena_alloc(a, tensor_nbytes(t));
  return t;
}

Tensor *tensor_adopt_in_arena(Arena *a, DType dt, int rank, const int64_t *dims, void *data) {
  Tensor *t = arena_alloc(a, sizeof *t);
  tensor_init(t, dt, rank, dims);
  t->data = data;
  arena_adopt(a, data);
  return t;
}

void tensor_fill_random(Tensor *t, uint64_t seed, double scale) {
  uint64_t state = seed;
  size_t es = dtype_size(t->dtype);
  int64_t n = tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    state += 0x9E3779B97F4A7C15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    double u = (double)(z >> 11) * 0x1.0p-53;
    char *p = (char *)t->data + (size_t)i * es;
    if (dtype_is_float(t->dtype))
      dtype_store_f64(t->dtype, p, (2 * u - 1) * scale);
    else if (t->dtype == DT_BOOL)
      dtype_store_i64(t->dtype, p, u < 0.5 ? 0 : 1);
    else
      dtype_store_f64(t->dtype, p, floor(u * scale));
  }
}

void tensor_fill_value(Tensor *t, double v) {
  size_t bytes = tensor_nbytes(t), done = dtype_size(t->dtype);
  if (!bytes)
    return;
  /* one element converted, then copied over in doubling blocks: a few GiB take a
   * fraction of a second, rather than a conversion per element */
  dtype_store_f64(t->dtype, t->data, v);
  while (done < bytes) {
    size_t n = done < bytes - done ? done : bytes - done;
    memcpy((char *)t->data + done, t->data, n);
    done += n;
  }
}

/* ---------------------------------------------------------------- ops and attribute schemas */

const OpInfo op_info[OP_COUNT] = {
#define OP(id, name, min_in, max_in, n_out, flags, attrs) \
  [OP_##id] = {name, min_in, max_in, n_out, flags, attrs},
#include "ops.def"
#undef OP
};

int op_from_name(const char *s, Op *out) {
  for (int i = 0; i < OP_COUNT; i++)
    if (!strcmp(s, op_info[i].name)) {
      *out = (Op)i;
      return 0;
    }
  return -1;
}

const char *attr_kind_name(AttrKind k) {
  static const char *const names[] = {"int", "float", "string", "ints", "floats", "tensor"};
  return k <= AK_TENSOR ? names[k] : "?";
}

enum { MAX_SPECS = 8 };
static AttrSpec specs[OP_COUNT][MAX_SPECS];
static int nspecs[OP_COUNT];
static pthread_once_t specs_once = PTHREAD_ONCE_INIT;

/* Parses a default literal of the schema: an int, a float (inf allowed), a bare string,
 * or a list "[1,2]". Schemas are ours, so a malformed one is a bug: assert. */
static void parse_default(AttrSpec *s, const char *lit) {
  static int64_t int_pool[64];
  static double float_pool[64];
  static int nint, nfloat;
  s->def.name = s->name;
  s->def.kind = s->kind;
  char *end;
  switch (s->kind) {
  case AK_INT: s->def.i = strtoll(lit, &end, 10); assert(*end == 0); break;
  case AK_FLOAT: s->def.f = strtod(lit, &end); assert(*end == 0); break;
  case AK_STRING: s->def.s = lit; break;
  case AK_INTS:
  case AK_FLOATS: {
    assert(lit[0] == '[');
    const char *p = lit + 1;
    s->def.n = 0;
    if (s->kind == AK_INTS)
      s->def.ints = int_pool + nint;
    else
      s->def.floats = float_pool + nfloat;
    while (*p && *p != ']') {
      if (s->kind == AK_INTS) {
        assert(nint < 64);
        int_pool[nint++] = strtoll(p, &end, 10);
      } else {
        assert(nfloat < 64);
        float_pool[nfloat++] = strtod(p, &end);
      }
      s->def.n++;
      p = end;
      if (*p == ',')
        p++;
    }
    break;
  }
  case AK_TENSOR: assert(!"tensor attributes have no default"); break;
  }
}

static void parse_specs(void) {
  static char pool[4096];
  size_t used = 0;
  for (int op = 0; op < OP_COUNT; op++) {
    const char *s = op_info[op].attrs;
    size_t len = strlen(s);
    assert(used + len + 1 <= sizeof pool);
    char *buf = pool + used;
    memcpy(buf, s, len + 1);
    used += len + 1;
    for (char *item = buf; item && *item;) {
      char *next = strchr(item, ';');
      if (next)
        *next++ = 0;
      assert(nspecs[op] < MAX_SPECS);
      AttrSpec *sp = &specs[op][nspecs[op]++];
      char *colon = strchr(item, ':');
      assert(colon);
      *colon = 0;
      sp->name = item;
      char *kind = colon + 1, *eq = strchr(kind, '=');
      if (eq)
        *eq = 0;
      static const char *const kinds[] = {"i", "f", "s", "is", "fs", "t"};
      int k = 0;
      while (k < 6 && strcmp(kind, kinds[k]))
        k++;
      assert(k < 6);
      sp->kind = (AttrKind)k;
      if (!eq)
        sp->required = true;
      else if (strcmp(eq + 1, "?") != 0) {
        sp->has_default = true;
        parse_default(sp, eq + 1);
      }
      item = next;
    }
  }
}

const AttrSpec *op_attr_specs(Op op, int *n) {
  pthread_once(&specs_once, parse_specs);
  *n = nspecs[op];
  return specs[op];
}

/* ---------------------------------------------------------------- attributes */

const Attr *attr_find(const Node *n, const char *name) {
  for (int i = 0; i < n->nattr; i++)
    if (!strcmp(n->attrs[i].name, name))
      return &n->attrs[i];
  return NULL;
}

int64_t node_fuse_group(const Node *n) {
  const Attr *a = attr_find(n, IR_ATTR_FUSE);
  return a && a->kind == AK_INT ? a->i : 0;
}

/* The node's attribute, else the schema default, else NULL. */
static const Attr *attr_or_default(const Node *n, const char *name) {
  const Attr *a = attr_find(n, name);
  if (a)
    return a;
  int ns;
  const AttrSpec *sp = op_attr_specs(n->op, &ns);
  for (int i = 0; i < ns; i++)
    if (!strcmp(sp[i].name, name))
      return sp[i].has_default ? &sp[i].def : NULL;
  return NULL;
}

int64_t attr_int(const Node *n, const char *name) {
  const Attr *a = attr_or_default(n, name);
  return a && a->kind == AK_INT ? a->i : 0;
}

double attr_float(const Node *n, const char *name) {
  const Attr *a = attr_or_default(n, name);
  if (a && a->kind == AK_FLOAT)
    return a->f;
  return a && a->kind == AK_INT ? (double)a->i : 0;
}

const char *attr_string(const Node *n, const char *name) {
  const Attr *a = attr_or_default(n, name);
  return a && a->kind == AK_STRING ? a->s : NULL;
}

const int64_t *attr_ints(const Node *n, const char *name, int *len) {
  const Attr *a = attr_or_default(n, name);
  if (!a || a->kind != AK_INTS) {
    *len = 0;
    return NULL;
  }
  *len = a->n;
  return a->ints;
}

Attr attr_make_int(const char *name, int64_t v) {
  Attr a = {.name = name, .kind = AK_INT};
  a.i = v;
  return a;
}

Attr attr_make_float(const char *name, double v) {
  Attr a = {.name = name, .kind = AK_FLOAT};
  a.f = v;
  return a;
}

Attr attr_make_string(const char *name, const char *s) {
  Attr a = {.name = name, .kind = AK_STRING};
  a.s = s;
  return a;
}

Attr attr_make_ints(const char *name, const int64_t *v, int n) {
  Attr a = {.name = name, .kind = AK_INTS, .n = n};
  a.ints = (int64_t *)v;
  return a;
}

Attr attr_make_floats(const char *name, const double *v, int n) {
  Attr a = {.name = name, .kind = AK_FLOATS, .n = n};
  a.floats = (double *)v;
  return a;
}

static Attr attr_copy(Arena *ar, const Attr *a) {
  Attr c = *a;
  c.name = arena_strdup(ar, a->name);
  switch (a->kind) {
  case AK_STRING: c.s = arena_strdup(ar, a->s); break;
  case AK_INTS: c.ints = arena_memdup(ar, a->ints, sizeof(int64_t) * (size_t)a->n); break;
  case AK_FLOATS: c.floats = arena_memdup(ar, a->floats, sizeof(double) * (size_t)a->n); break;
  case AK_TENSOR: {
    Tensor *t = arena_memdup(ar, a->t, sizeof *a->t);
    t->data = arena_memdup(ar, a->t->data, tensor_nbytes(a->t));
    c.t = t;
    break;
  }
  default: break;
  }
  return c;
}

/* ---------------------------------------------------------------- graphs */

enum { CAP_IN, CAP_OUT, CAP_CONST, CAP_NODE, CAP_VAL };

/* Name table: open addressing over Value pointers, keyed by name. Values are never
 * removed from a graph's table, so there are no tombstones. */
typedef struct Names {
  Value **slot;
  size_t cap, n;
} Names;

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static Value **names_slot(Names *t, const char *name) {
  size_t i = hash_str(name) & (t->cap - 1);
  while (t->slot[i] && strcmp(t->slot[i]->name, name))
    i = (i + 1) & (t->cap - 1);
  return &t->slot[i];
}

static void names_insert(Names *t, Value *v) {
  if (2 * (t->n + 1) > t->cap) {
    Names bigger = {calloc(t->cap ? 2 * t->cap : 64, sizeof(Value *)), t->cap ? 2 * t->cap : 64, 0};
    if (!bigger.slot)
      oom_unless(NULL);
    for (size_t i = 0; i < t->cap; i++)
      if (t->slot[i]) {
        *names_slot(&bigger, t->slot[i]->name) = t->slot[i];
        bigger.n++;
      }
    free(t->slot);
    *t = bigger;
  }
  *names_slot(t, v->name) = v;
  t->n++;
}

/* Interned symbols live in the same table as values would clash with value names, so
 * they get a small list of their own. */
typedef struct Sym {
  struct Sym *next;
  const char *name;
} Sym;

typedef struct GraphPriv {
  Names names;
  Sym *syms;
} GraphPriv;

static void grow(void *arrp, int *cap, int n, size_t elem) {
  void **arr = arrp;
  if (n < *cap)
    return;
  int nc = *cap ? 2 * *cap : 8;
  void *p = realloc(*arr, (size_t)nc * elem);
  if (!p)
    oom_unless(NULL);
  *arr = p;
  *cap = nc;
}

Graph *graph_new(const char *name) {
  Graph *g = xmalloc(sizeof *g);
  memset(g, 0, sizeof *g);
  g->arena = arena_new();
  g->name = arena_strdup(g->arena, name ? name : "main");
  g->names_ = arena_alloc(g->arena, sizeof(GraphPriv));
  return g;
}

void graph_free(Graph *g) {
  if (!g)
    return;
  GraphPriv *p = g->names_;
  free(p->names.slot);
  free(g->inputs);
  free(g->outputs);
  free(g->consts);
  free(g->nodes);
  free(g->values);
  free(g->ranges);
  free(g->bound);
  arena_free(g->arena);
  free(g);
}

void graph_set_range(Graph *g, const DimRange *r) {
  const char *sym = graph_intern(g, r->sym);
  int i = 0;
  while (i < g->nranges && g->ranges[i].sym != sym)
    i++;
  if (i == g->nranges) {
    DimRange *p = realloc(g->ranges, (size_t)(g->nranges + 1) * sizeof *p);
    if (!p)
      oom_unless(NULL);
    g->ranges = p;
    g->nranges++;
  }
  g->ranges[i] = *r;
  g->ranges[i].sym = sym;
  if (g->ranges[i].nseg < 0 || g->ranges[i].nseg > IR_MAX_DIM_SEGMENTS)
    g->ranges[i].nseg = 0;
}

const DimRange *graph_range(const Graph *g, const char *sym) {
  for (int i = 0; sym && i < g->nranges; i++)
    if (!strcmp(g->ranges[i].sym, sym))
      return &g->ranges[i];
  return NULL;
}

const char *range_check(const DimRange *r, char *buf, size_t n) {
  if (r->nseg < 1 || r->nseg > IR_MAX_DIM_SEGMENTS) {
    snprintf(buf, n, "a range has 1 to %d segments, not %d", IR_MAX_DIM_SEGMENTS, r->nseg);
    return buf;
  }
  for (int i = 0; i < r->nseg; i++) {
    int64_t lo = r->lo[i], hi = r->hi[i];
    if (lo < 1 || hi > IR_MAX_DIM_RANGE)
      snprintf(buf, n, "%" PRId64 "..%" PRId64 " is outside 1..%" PRId64, lo, hi, IR_MAX_DIM_RANGE);
    else if (hi < lo)
      snprintf(buf, n, "%" PRId64 "..%" PRId64 " ends before it starts", lo, hi);
    else if (i && lo <= r->hi[i - 1])
      snprintf(buf, n, "%" PRId64 " does not come after %" PRId64 ": list the sizes ascending, "
               "without overlaps", lo, r->hi[i - 1]);
    else
      continue;
    return buf;
  }
  return NULL;
}

void graph_note_bound(Graph *g, const char *sym, int64_t size, int input, int axis) {
  DynSeed *p = realloc(g->bound, (size_t)(g->nbound + 1) * sizeof *p);
  if (!p)
    oom_unless(NULL);
  g->bound = p;
  g->bound[g->nbound++] = (DynSeed){graph_intern(g, sym), size, input, axis, NULL};
}

bool graph_has_symbol(const Graph *g, const char *sym) {
  for (int i = 0; i < g->ninputs; i++) {
    const Shape *s = &g->inputs[i]->type.shape;
    for (int j = 0; j < s->rank; j++)
      if (s->dims[j].sym && !strcmp(s->dims[j].sym, sym))
        return true;
  }
  return false;
}

void graph_drop_range(Graph *g, const char *sym) {
  for (int i = 0; sym && i < g->nranges; i++)
    if (!strcmp(g->ranges[i].sym, sym)) {
      memmove(&g->ranges[i], &g->ranges[i + 1], (size_t)(g->nranges - i - 1) * sizeof *g->ranges);
      g->nranges--;
      return;
    }
}

bool range_has(const DimRange *r, int64_t size) {
  for (int i = 0; i < r->nseg; i++)
    if (size >= r->lo[i] && size <= r->hi[i])
      return true;
  return false;
}

const char *range_str(const DimRange *r, char *buf, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < r->nseg && at < n; i++) {
    int k = r->lo[i] == r->hi[i]
                ? snprintf(buf + at, n - at, "%s%" PRId64, i ? ", " : "", r->lo[i])
                : snprintf(buf + at, n - at, "%s%" PRId64 "..%" PRId64, i ? ", " : "", r->lo[i],
                           r->hi[i]);
    at += k > 0 ? (size_t)k : 0;
  }
  return buf;
}

/* A size of a range's text at *s (digits only), moved past; -1 when there is none or it
 * exceeds IR_MAX_DIM_RANGE. */
static int64_t range_size(const char **s) {
  int64_t v = 0;
  const char *p = *s;
  if (*p < '0' || *p > '9')
    return -1;
  for (; *p >= '0' && *p <= '9'; p++)
    if ((v = v * 10 + (*p - '0')) > IR_MAX_DIM_RANGE)
      return -1;
  *s = p;
  return v;
}

int range_parse(const char *text, DimRange *r, char *buf, size_t n) {
  const char *s = text;
  r->nseg = 0;
  for (;;) {
    if (r->nseg == IR_MAX_DIM_SEGMENTS) {
      snprintf(buf, n, "more than %d sizes and ranges", IR_MAX_DIM_SEGMENTS);
      return -1;
    }
    int64_t lo = range_size(&s), hi = lo;
    if (lo >= 0 && s[0] == '.' && s[1] == '.') {
      s += 2;
      hi = range_size(&s);
    }
    if (lo < 0 || hi < 0) {
      snprintf(buf, n, "expected sizes and ranges like 1,8,32..64 (each at most 2^31), got '%s'",
               text);
      return -1;
    }
    r->lo[r->nseg] = lo;
    r->hi[r->nseg++] = hi;
    if (!*s)
      return range_check(r, buf, n) ? -1 : 0;
    if (*s++ != ',') {
      snprintf(buf, n, "expected sizes and ranges like 1,8,32..64, got '%s'", text);
      return -1;
    }
  }
}

/* Cut k of per_octave in the octave [p, 2p): p 2^(k / per_octave) rounded up to a
 * multiple of p / 16 (1 below 16), so that cuts in large octaves stay multiples of 8 and
 * more; 0 when that reaches 2p or does not pass cut k - 1. Geometric steps bound the
 * padding by the same ratio at each end of a step (2^(1/2) = 1.41 for two an octave). */
static int64_t octave_cut(int64_t p, int k, int per_octave) {
  if (k == 0)
    return p;
  int64_t q = p >= 16 ? p / 16 : 1;
  int64_t prev = octave_cut(p, k - 1, per_octave);
  double x = (double)p * exp2((double)k / per_octave);
  if (x >= (double)(2 * p))
    return 0;
  int64_t c = (int64_t)ceil(x * (1 - 1e-12));
  c = (c + q - 1) / q * q;
  return c > prev && c < 2 * p ? c : 0;
}

int range_classes(const DimRange *r, int per_octave, int64_t *bounds, int max) {
  int n = 0;
  for (int i = 0; i < r->nseg; i++) {
    /* the cuts in [lo, hi): each power of two p and the octave's steps above it (one
     * more from 128 up, where a size's padding costs more GPU time than a class costs
     * compile time); then hi */
    for (int64_t p = 1; p < r->hi[i]; p *= 2)
      for (int k = 0, steps = per_octave > 1 && p >= 128 ? per_octave + 1 : per_octave;
           k < steps; k++) {
        int64_t cut = octave_cut(p, k, steps);
        if (!cut || cut < r->lo[i] || cut >= r->hi[i] || (n && cut <= bounds[n - 1]))
          continue;
        if (n == max)
          return -1;
        bounds[n++] = cut;
      }
    if (n == max)
      return -1;
    bounds[n++] = r->hi[i];
  }
  return n;
}

int64_t range_max(const DimRange *r) { return r->nseg > 0 ? r->hi[r->nseg - 1] : 0; }

const char *graph_intern(Graph *g, const char *s) {
  GraphPriv *p = g->names_;
  for (Sym *y = p->syms; y; y = y->next)
    if (!strcmp(y->name, s))
      return y->name;
  Sym *y = arena_alloc(g->arena, sizeof *y);
  y->name = arena_strdup(g->arena, s);
  y->next = p->syms;
  p->syms = y;
  return y->name;
}

Value *graph_find_value(const Graph *g, const char *name) {
  GraphPriv *p = g->names_;
  if (!p->names.cap)
    return NULL;
  return *names_slot(&p->names, name);
}

/* A fresh numbered name: the value count, bumped past any name already taken. */
static const char *fresh_name(Graph *g, char *buf, size_t n) {
  for (int k = g->nvalues;; k++) {
    snprintf(buf, n, "%d", k);
    if (!graph_find_value(g, buf))
      return buf;
  }
}

static Value *new_value(Graph *g, const char *name, ValueKind kind) {
  char buf[32];
  if (!name)
    name = fresh_name(g, buf, sizeof buf);
  else if (graph_find_value(g, name))
    return NULL;
  Value *v = arena_alloc(g->arena, sizeof *v);
  v->id = g->next_value_id++;
  v->name = arena_strdup(g->arena, name);
  v->kind = kind;
  v->type = type_unknown();
  grow(&g->values, &g->caps_[CAP_VAL], g->nvalues, sizeof(Value *));
  g->values[g->nvalues++] = v;
  names_insert(&((GraphPriv *)g->names_)->names, v);
  return v;
}

/* Symbols in a type must be interned in the graph that holds the value. */
static Type intern_type(Graph *g, Type t) {
  for (int i = 0; i < t.shape.rank && i < IR_MAX_RANK; i++)
    if (t.shape.dims[i].sym)
      t.shape.dims[i].sym = graph_intern(g, t.shape.dims[i].sym);
  return t;
}

Value *graph_add_input(Graph *g, const char *name, Type t) {
  Value *v = new_value(g, name, VK_INPUT);
  if (!v)
    return NULL;
  v->type = intern_type(g, t);
  grow(&g->inputs, &g->caps_[CAP_IN], g->ninputs, sizeof(Value *));
  g->inputs[g->ninputs++] = v;
  return v;
}

Value *graph_add_const(Graph *g, const char *name, Tensor *data) {
  Value *v = new_value(g, name, VK_CONST);
  if (!v)
    return NULL;
  v->data = data;
  v->init = CI_DATA;
  v->type.dtype = data->dtype;
  v->type.shape.rank = data->rank;
  for (int i = 0; i < data->rank; i++)
    v->type.shape.dims[i] = (Dim){data->dims[i], NULL};
  grow(&g->consts, &g->caps_[CAP_CONST], g->nconsts, sizeof(Value *));
  g->consts[g->nconsts++] = v;
  return v;
}

static bool names_free(Graph *g, const char *const *names, int n) {
  for (int i = 0; names && i < n; i++) {
    if (!names[i])
      continue;
    if (graph_find_value(g, names[i]))
      return false;
    for (int j = 0; j < i; j++)
      if (names[j] && !strcmp(names[i], names[j]))
        return false;
  }
  return true;
}

Node *graph_add_node(Graph *g, Op op, Value **in, int nin, const Attr *attrs, int nattr,
                     const char *const *out_names, int nout) {
  if (!names_free(g, out_names, nout))
    return NULL;
  Node *n = arena_alloc(g->arena, sizeof *n);
  n->id = g->next_node_id++;
  n->op = op;
  n->nin = nin;
  n->nout = nout;
  n->in = arena_alloc(g->arena, sizeof(Value *) * (size_t)(nin ? nin : 1));
  for (int i = 0; i < nin; i++)
    n->in[i] = in[i];
  n->nattr = nattr;
  n->attrs = arena_alloc(g->arena, sizeof(Attr) * (size_t)(nattr ? nattr : 1));
  for (int i = 0; i < nattr; i++)
    n->attrs[i] = attr_copy(g->arena, &attrs[i]);
  n->out = arena_alloc(g->arena, sizeof(Value *) * (size_t)(nout ? nout : 1));
  for (int i = 0; i < nout; i++) {
    Value *v = new_value(g, out_names ? out_names[i] : NULL, VK_NODE);
    v->def = n;
    v->def_index = i;
    n->out[i] = v;
  }
  grow(&g->nodes, &g->caps_[CAP_NODE], g->nnodes, sizeof(Node *));
  g->nodes[g->nnodes++] = n;
  return n;
}

Graph *graph_clone(const Graph *g) {
  Graph *c = graph_new(g->name);
  Value **map = calloc((size_t)g->next_value_id + 1, sizeof *map);
  if (!map) {
    graph_free(c);
    return NULL;
  }
  c->loc = g->loc;
  for (int i = 0; i < g->nranges; i++)
    graph_set_range(c, &g->ranges[i]);
  for (int k = 0; k < g->nbound; k++)
    graph_note_bound(c, g->bound[k].sym, g->bound[k].size, g->bound[k].input, g->bound[k].axis);
  for (int i = 0; i < g->ninputs; i++)
    map[g->inputs[i]->id] = graph_add_input(c, g->inputs[i]->name, g->inputs[i]->type);
  for (int i = 0; i < g->nconsts; i++) {
    const Value *v = g->consts[i];
    Value *w = map[v->id] = graph_add_const(c, v->name, v->data);
    w->init = v->init;
    w->fill = v->fill;
    w->seed = v->seed;
    w->scale = v->scale;
    w->path = v->path ? arena_strdup(c->arena, v->path) : NULL;
    w->key = v->key ? arena_strdup(c->arena, v->key) : NULL;
  }
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    Value **in = arena_alloc(c->arena, sizeof *in * (size_t)(n->nin + 1));
    const char **names = arena_alloc(c->arena, sizeof *names * (size_t)(n->nout + 1));
    for (int k = 0; k < n->nin; k++)
      in[k] = n->in[k] ? map[n->in[k]->id] : NULL;
    for (int k = 0; k < n->nout; k++)
      names[k] = n->out[k]->name;
    Node *m = graph_add_node(c, n->op, in, n->nin, n->attrs, n->nattr, names, n->nout);
    m->loc = n->loc;
    m->origin = n->origin ? arena_strdup(c->arena, n->origin) : NULL;
    for (int k = 0; k < n->nout; k++) {
      map[n->out[k]->id] = m->out[k];
      m->out[k]->type = intern_type(c, n->out[k]->type);
      m->out[k]->loc = n->out[k]->loc;
    }
  }
  for (int i = 0; i < g->nvalues; i++)
    if (map[g->values[i]->id])
      map[g->values[i]->id]->loc = g->values[i]->loc;
  for (int i = 0; i < g->noutputs; i++)
    graph_add_output(c, map[g->outputs[i]->id]);
  free(map);
  return c;
}

void graph_add_output(Graph *g, Value *v) {
  grow(&g->outputs, &g->caps_[CAP_OUT], g->noutputs, sizeof(Value *));
  g->outputs[g->noutputs++] = v;
}

void graph_make_const(Graph *g, Value *v, Tensor *data) {
  if (v->kind == VK_INPUT) {
    int k = 0;
    while (k < g->ninputs && g->inputs[k] != v)
      k++;
    if (k < g->ninputs)
      memmove(&g->inputs[k], &g->inputs[k + 1], sizeof *g->inputs * (size_t)(g->ninputs - k - 1));
    g->ninputs -= k < g->ninputs;
  }
  v->kind = VK_CONST;
  v->def = NULL;
  v->def_index = 0;
  v->data = data;
  v->init = CI_DATA;
  grow(&g->consts, &g->caps_[CAP_CONST], g->nconsts, sizeof(Value *));
  g->consts[g->nconsts++] = v;
}

Value *graph_op(Graph *g, Diag *d, Op op, Value **in, int nin, const Attr *attrs, int nattr,
                const char *out_name) {
  /* Infer on a node that is not in the graph yet, so a failure leaves g untouched. */
  Node probe = {.id = -1, .op = op, .nin = nin, .in = in, .nout = 1,
                .nattr = nattr, .attrs = (Attr *)attrs};
  Type t;
  if (ir_infer_node(&probe, &t, d))
    return NULL;
  const char *names[1] = {out_name};
  Node *n = graph_add_node(g, op, in, nin, attrs, nattr, names, 1);
  if (!n) {
    diag_error(d, (SrcLoc){0}, "value name '%%%s' is already defined", out_name);
    return NULL;
  }
  n->out[0]->type = intern_type(g, t);
  return n->out[0];
}

void graph_replace_uses(Graph *g, Value *old, Value *repl) {
  for (int i = 0; i < g->nnodes; i++)
    for (int j = 0; j < g->nodes[i]->nin; j++)
      if (g->nodes[i]->in[j] == old)
        g->nodes[i]->in[j] = repl;
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i] == old)
      g->outputs[i] = repl;
}

int graph_count_uses(const Graph *g, const Value *v) {
  int uses = 0;
  for (int i = 0; i < g->nnodes; i++)
    for (int j = 0; j < g->nodes[i]->nin; j++)
      uses += g->nodes[i]->in[j] == v;
  for (int i = 0; i < g->noutputs; i++)
    uses += g->outputs[i] == v;
  return uses;
}

int users_build(const Graph *g, Users *u) {
  int nid = g->next_value_id;
  size_t nedges = 0;
  for (int i = 0; i < g->nnodes; i++)
    nedges += (size_t)g->nodes[i]->nin;
  *u = (Users){calloc((size_t)nid + 2, sizeof *u->start), malloc((nedges + 1) * sizeof *u->at),
               calloc((size_t)nid + 1, sizeof *u->outputs), nid};
  if (!u->start || !u->at || !u->outputs) {
    users_free(u);
    return -1;
  }
  /* counts at start[id + 2], prefix sums, then each reader placed at start[id + 1]++ */
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i]->nin; k++)
      if (g->nodes[i]->in[k])
        u->start[g->nodes[i]->in[k]->id + 2]++;
  for (int id = 2; id <= nid + 1; id++)
    u->start[id] += u->start[id - 1];
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i]->nin; k++)
      if (g->nodes[i]->in[k])
        u->at[u->start[g->nodes[i]->in[k]->id + 1]++] = i;
  for (int i = 0; i < g->noutputs; i++)
    u->outputs[g->outputs[i]->id]++;
  return 0;
}

void users_free(Users *u) {
  free(u->start);
  free(u->at);
  free(u->outputs);
  memset(u, 0, sizeof *u);
}

const int *users_of(const Users *u, const Value *v, int *n) {
  *n = u->start[v->id + 1] - u->start[v->id];
  return u->at + u->start[v->id];
}

int users_count(const Users *u, const Value *v) {
  return u->start[v->id + 1] - u->start[v->id] + u->outputs[v->id];
}

void graph_retain(Graph *g, const bool *keep_node, const bool *keep_const) {
  int k = 0;
  for (int i = 0; i < g->nnodes; i++)
    if (keep_node[g->nodes[i]->id])
      g->nodes[k++] = g->nodes[i];
  g->nnodes = k;
  if (!keep_const)
    return;
  k = 0;
  for (int i = 0; i < g->nconsts; i++)
    if (keep_const[g->consts[i]->id])
      g->consts[k++] = g->consts[i];
  g->nconsts = k;
}

void ir_note_node(Diag *d, const Node *n) {
  if (n->loc.line > 0)
    return;
  const char *out = n->nout > 0 && n->out && n->out[0] ? n->out[0]->name : NULL;
  diag_note(d, (SrcLoc){0}, "in node %s%s%s%s%s%s", op_info[n->op].name, out ? " -> %" : "",
            out ? out : "", n->origin ? " (from \"" : "", n->origin ? n->origin : "",
            n->origin ? "\")" : "");
}

/* ---------------------------------------------------------------- files */

static int file_error(Diag *d, const char *path, const char *what, int err) {
  return diag_error(d, (SrcLoc){.file = path}, "%s: %s", what, strerror(err));
}

/* What a file that is not a regular one is, for messages. */
static const char *file_kind(mode_t m) {
  return S_ISDIR(m)    ? "a directory"
         : S_ISFIFO(m) ? "a FIFO"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISSOCK(m) ? "a socket"
                       : "not a regular file";
}

FILE *fopen_regular(const char *path, uint64_t *size, char *why, size_t n) {
  /* stat first, so a device is refused without being opened (opening some has effects);
   * then O_NONBLOCK, so a FIFO put in place between the two cannot block the open, and
   * fstat to see that what was opened is what was checked. */
  struct stat st;
  int fd = -1;
  if (stat(path, &st) != 0) {
    snprintf(why, n, "%s", strerror(errno));
    return NULL;
  }
  if (S_ISREG(st.st_mode))
    fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && S_ISREG(st.st_mode)) {
    snprintf(why, n, "%s", strerror(errno));
    return NULL;
  }
  if (fd >= 0 && fstat(fd, &st) != 0) {
    snprintf(why, n, "%s", strerror(errno));
    close(fd);
    return NULL;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(why, n, "it is %s, not a regular file", file_kind(st.st_mode));
    if (fd >= 0)
      close(fd);
    return NULL;
  }
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    snprintf(why, n, "%s", strerror(errno));
    close(fd);
    return NULL;
  }
  if (size)
    *size = (uint64_t)st.st_size;
  return f;
}

const void *map_regular(const char *path, size_t *len, char *why, size_t n) {
  static const char empty;
  uint64_t size = 0;
  FILE *f = fopen_regular(path, &size, why, n);
  if (!f)
    return NULL;
  if (size > SIZE_MAX) {
    snprintf(why, n, "it has %" PRIu64 " bytes, more than this machine can map", size);
    fclose(f);
    return NULL;
  }
  void *p = size ? mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fileno(f), 0) : (void *)&empty;
  if (p == MAP_FAILED)
    snprintf(why, n, "cannot map: %s", strerror(errno));
  fclose(f);
  if (p == MAP_FAILED)
    return NULL;
  *len = (size_t)size;
  return p;
}

void unmap_regular(const void *p, size_t len) {
  if (p && len)
    munmap((void *)p, len);
}

/* A character device or a FIFO named as an output (/dev/null, /dev/stdout, a pipe) is
 * written as it is: the caller asked for the bytes to go there, and renaming a file over
 * it would replace the device or the FIFO with a regular file. O_NONBLOCK, so a FIFO that
 * nothing reads is an error rather than a hang; the writes themselves block as usual. */
static FILE *open_in_place(OutFile *o, const char *path, const struct stat *st, Diag *d) {
  int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    int e = errno;
    if (e == ENXIO && S_ISFIFO(st->st_mode))
      diag_error(d, (SrcLoc){.file = path}, "cannot write: it is a FIFO that no process "
                                            "reads from");
    else
      file_error(d, path, "cannot write", e);
    return NULL;
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl == -1 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1 || !(o->f = fdopen(fd, "wb"))) {
    int e = errno;
    close(fd);
    file_error(d, path, "cannot write", e);
    return NULL;
  }
  o->in_place = true;
  o->path = strdup(path); /* for messages only; NULL is survivable */
  return o->f;
}

FILE *outfile_open(OutFile *o, const char *path, Diag *d) {
  memset(o, 0, sizeof *o);
  struct stat st, lst;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
      return open_in_place(o, path, &st, d);
    diag_error(d, (SrcLoc){.file = path}, "cannot write: it is %s, not a regular file",
               file_kind(st.st_mode));
    return NULL;
  }
  /* A symlink to a regular file: the file it names is replaced, not the link. */
  char *target = NULL;
  if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode) && stat(path, &st) == 0 &&
      !(target = realpath(path, NULL))) {
    file_error(d, path, "cannot write", errno);
    return NULL;
  }
  const char *real = target ? target : path;
  size_t n = strlen(real);
  o->path = malloc(n + 1);
  o->tmp = malloc(n + 12);
  if (!o->path || !o->tmp) {
    free(target);
    outfile_abort(o);
    file_error(d, path, "cannot write", ENOMEM);
    return NULL;
  }
  memcpy(o->path, real, n + 1);
  memcpy(o->tmp, real, n);
  memcpy(o->tmp + n, ".tmpXXXXXX", 11);
  free(target);
  int fd = mkstemp(o->tmp);
  if (fd < 0) {
    int e = errno;
    free(o->tmp);
    o->tmp = NULL; /* nothing to remove */
    outfile_abort(o);
    file_error(d, path, "cannot write", e);
    return NULL;
  }
  /* mkstemp makes the file private; an output is an ordinary file. */
  (void)fchmod(fd, 0644);
  o->f = fdopen(fd, "wb");
  if (!o->f) {
    int e = errno;
    close(fd);
    outfile_abort(o);
    file_error(d, path, "cannot write", e);
    return NULL;
  }
  return o->f;
}

int outfile_commit(OutFile *o, Diag *d) {
  int e = 0;
  if (fflush(o->f) != 0 || ferror(o->f))
    e = errno ? errno : EIO;
  if (fclose(o->f) != 0 && !e)
    e = errno;
  o->f = NULL;
  if (!e && !o->in_place && rename(o->tmp, o->path) != 0)
    e = errno;
  if (e) {
    file_error(d, o->path ? o->path : "<output>", "cannot write", e);
    outfile_abort(o);
    return -1;
  }
  free(o->tmp);
  free(o->path);
  memset(o, 0, sizeof *o);
  return 0;
}

void outfile_abort(OutFile *o) {
  if (o->f)
    fclose(o->f);
  if (o->tmp)
    unlink(o->tmp);
  free(o->tmp);
  free(o->path);
  memset(o, 0, sizeof *o);
}

int make_dirs(const char *dir, Diag *d) {
  size_t len = strlen(dir);
  char *path = malloc(len + 1);
  if (!path)
    return file_error(d, dir, "cannot create directory", ENOMEM);
  memcpy(path, dir, len + 1);
  int rc = 0;
  for (size_t i = 1; i <= len && !rc; i++) {
    if (path[i] != '/' && path[i] != 0)
      continue;
    char c = path[i];
    path[i] = 0;
    struct stat st;
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
      rc = file_error(d, path, "cannot create directory", errno);
    else if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
      rc = file_error(d, path, "cannot create directory", ENOTDIR);
    path[i] = c;
  }
  free(path);
  return rc;
}

void node_set_attr(Graph *g, Node *n, Attr a) {
  Attr c = attr_copy(g->arena, &a);
  for (int i = 0; i < n->nattr; i++)
    if (!strcmp(n->attrs[i].name, a.name)) {
      n->attrs[i] = c;
      return;
    }
  Attr *at = arena_alloc(g->arena, sizeof *at * (size_t)(n->nattr + 1));
  memcpy(at, n->attrs, sizeof *at * (size_t)n->nattr);
  at[n->nattr++] = c;
  n->attrs = at;
}

void node_remove_attr(Node *n, const char *name) {
  for (int i = 0; i < n->nattr; i++)
    if (!strcmp(n->attrs[i].name, name)) {
      memmove(&n->attrs[i], &n->attrs[i + 1], sizeof *n->attrs * (size_t)(n->nattr - i - 1));
      n->nattr--;
      return;
    }
}

const Value *node_other_input(const Node *n, const Value *v) {
  if (!n || n->nin != 2 || (n->in[0] == v) == (n->in[1] == v))
    return NULL;
  return n->in[0] == v ? n->in[1] : n->in[0];
}
