/* print.c: the text form of a graph, as docs/ir.md defines it and frontends/dsl parses
 * it back. The output is canonical (inputs, then constants, then nodes, then one
 * return; every named thing in its stored order), so print(parse(print(g))) is
 * byte-identical to print(g) and dumps can be diffed and FileChecked.
 *
 * Numbers are the delicate part: each one is written as the shortest "%.*g" that reads
 * back as the same value of its element type, and floats that are not constant elements
 * always carry a '.', an exponent, inf or nan so that the parser keeps their kind. */
/* realpath() is X/Open, beyond the POSIX level the build asks for. */
#define _XOPEN_SOURCE 700

#include "ir/ir.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- numbers */

/* Whether the text `s` reads back (through strtod, then rounding to t, exactly as the
 * parser stores it) as the same bits as v rounded to t. */
static bool reads_back(const char *s, double v, DType t) {
  double r = strtod(s, NULL);
  if (t == DT_F64)
    return r == v && signbit(r) == signbit(v);
  unsigned char a[8] = {0}, b[8] = {0};
  dtype_store_f64(t, a, r);
  dtype_store_f64(t, b, v);
  return !memcmp(a, b, sizeof a);
}

/* The shortest "%.*g" of v (the fewest significant digits) that reads back as v in
 * type t, e.g. 0.1 for the f32 nearest 0.1 and 6.55e+04 for the f16 65504. */
static void fmt_real(char *buf, size_t n, double v, DType t) {
  if (isnan(v)) {
    snprintf(buf, n, "%s", signbit(v) ? "-nan" : "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(buf, n, "%s", v < 0 ? "-inf" : "inf");
    return;
  }
  int p = 1;
  for (; p < 17; p++) {
    snprintf(buf, n, "%.*g", p, v);
    if (reads_back(buf, v, t))
      break;
  }
  if (p == 17)
    snprintf(buf, n, "%.17g", v);
  /* "1e+01" is exactly 10: an integer below 1e16 that the digits give exactly reads
   * better without the exponent, as Python writes it. "6.55e+04" for the f16 65504 is
   * not exact, so it keeps the fewest digits. */
  const char *e = strstr(buf, "e+");
  if (e && atoi(e + 2) < 16 && strtod(buf, NULL) == v)
    snprintf(buf, n, "%.*g", atoi(e + 2) + 1, v);
}

/* A float that must stay a float when parsed back: "1" becomes "1.0". */
void ir_format_float(char *buf, size_t n, double v, DType t) {
  fmt_real(buf, n, v, t);
  if (!strpbrk(buf, ".en")) /* 'n': inf and nan */
    strncat(buf, ".0", n - strlen(buf) - 1);
}

void ir_print_double(FILE *f, double v) {
  char buf[64];
  ir_format_float(buf, sizeof buf, v, DT_F64);
  fputs(buf, f);
}

void ir_print_float32(FILE *f, float v) {
  char buf[64];
  ir_format_float(buf, sizeof buf, v, DT_F32);
  fputs(buf, f);
}

/* ---------------------------------------------------------------- names and strings */

static bool is_plain_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '.';
}

static void put_quoted(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '"': fputs("\\\"", f); break;
    case '\\': fputs("\\\\", f); break;
    case '\n': fputs("\\n", f); break;
    case '\t': fputs("\\t", f); break;
    default:
      if (*p < 0x20 || *p >= 0x7f)
        fprintf(f, "\\x%02x", *p);
      else
        fputc(*p, f);
    }
  }
  fputc('"', f);
}

/* A value name after its '%': bare when the lexer reads it back as one token. */
void ir_print_value_name(FILE *f, const char *name) {
  bool plain = *name != 0;
  for (const char *p = name; *p && plain; p++)
    plain = is_plain_char((unsigned char)*p);
  fputc('%', f);
  if (plain)
    fputs(name, f);
  else
    put_quoted(f, name);
}

/* A bare word (graph name, symbolic dim) must also lex as an identifier: no leading
 * digit, and not one of the words that lex as numbers. */
static bool is_identifier(const char *s) {
  if (!*s || (*s >= '0' && *s <= '9') || *s == '.')
    return false;
  for (const char *p = s; *p; p++)
    if (!is_plain_char((unsigned char)*p))
      return false;
  return strcmp(s, "inf") != 0 && strcmp(s, "nan") != 0;
}

static void put_word(FILE *f, const char *s) {
  if (is_identifier(s))
    fputs(s, f);
  else
    put_quoted(f, s);
}

/* ---------------------------------------------------------------- types and data */

static void put_type(FILE *f, const Type *t) {
  fprintf(f, "%s[", dtype_name(t->dtype));
  for (int i = 0; i < t->shape.rank; i++) {
    const Dim *d = &t->shape.dims[i];
    if (i)
      fputs(", ", f);
    if (d->sym)
      put_word(f, d->sym);
    else
      fprintf(f, "%" PRId64, d->n);
  }
  fputc(']', f);
}

static void put_tensor_type(FILE *f, const Tensor *t) {
  fprintf(f, "%s[", dtype_name(t->dtype));
  for (int i = 0; i < t->rank; i++)
    fprintf(f, "%s%" PRId64, i ? ", " : "", t->dims[i]);
  fputc(']', f);
}

static void put_element(FILE *f, DType t, const void *p) {
  if (dtype_is_float(t)) {
    char buf[64];
    fmt_real(buf, sizeof buf, dtype_load_f64(t, p), t);
    fputs(buf, f);
  } else {
    fprintf(f, "%" PRId64, dtype_load_i64(t, p));
  }
}

/* Nested lists like numpy, one level per dim; recursion is bounded by IR_MAX_RANK.
 * *at is the running row-major element index. */
static void put_data_level(FILE *f, const Tensor *t, int level, int64_t *at) {
  if (level == t->rank) {
    put_element(f, t->dtype, (const char *)t->data + (size_t)*at * dtype_size(t->dtype));
    ++*at;
    return;
  }
  fputc('[', f);
  for (int64_t i = 0; i < t->dims[level]; i++) {
    if (i)
      fputs(", ", f);
    put_data_level(f, t, level + 1, at);
  }
  fputc(']', f);
}

static void put_data(FILE *f, const Tensor *t) {
  int64_t at = 0;
  put_data_level(f, t, 0, &at);
}

/* ---------------------------------------------------------------- attributes, values, nodes */

static void put_attr(FILE *f, const Attr *a) {
  fprintf(f, "%s = ", a->name);
  switch (a->kind) {
  case AK_INT: fprintf(f, "%" PRId64, a->i); break;
  case AK_FLOAT: ir_print_double(f, a->f); break;
  case AK_STRING: put_quoted(f, a->s); break;
  case AK_INTS:
    fputc('[', f);
    for (int i = 0; i < a->n; i++)
      fprintf(f, "%s%" PRId64, i ? ", " : "", a->ints[i]);
    fputc(']', f);
    break;
  case AK_FLOATS:
    fputc('[', f);
    for (int i = 0; i < a->n; i++) {
      if (i)
        fputs(", ", f);
      ir_print_double(f, a->floats[i]);
    }
    fputc(']', f);
    break;
  case AK_TENSOR:
    put_tensor_type(f, a->t);
    fputc(' ', f);
    put_data(f, a->t);
    break;
  }
}

/* "%x" or "%x: f32[N]": a value not inferred yet prints without its type. */
static void put_value_decl(FILE *f, const Value *v) {
  ir_print_value_name(f, v->name);
  if (type_is_known(&v->type)) {
    fputs(": ", f);
    put_type(f, &v->type);
  }
}

static void put_const(FILE *f, const Value *v) {
  fputs("  ", f);
  ir_print_value_name(f, v->name);
  fputs(" = const ", f);
  put_type(f, &v->type);
  fputc(' ', f);
  switch (v->init) {
  case CI_ZEROS: fputs("zeros", f); break;
  case CI_ONES: fputs("ones", f); break;
  case CI_FULL:
    fputs("full(", f);
    ir_print_double(f, v->fill);
    fputc(')', f);
    break;
  case CI_RANDOM:
    fprintf(f, "random(seed = %" PRIu64 ", scale = ", v->seed);
    ir_print_double(f, v->scale);
    fputc(')', f);
    break;
  case CI_FILE:
    fputs("load(", f);
    put_quoted(f, v->path ? v->path : "");
    if (v->key) {
      fputs(", ", f);
      put_quoted(f, v->key);
    }
    fputc(')', f);
    break;
  case CI_DATA:
    if (v->data)
      put_data(f, v->data);
    else
      fputs("zeros", f); /* no data at all: not a state the builder produces */
    break;
  }
  fputc('\n', f);
}

static void put_node(FILE *f, const Node *n) {
  fputs("  ", f);
  for (int i = 0; i < n->nout; i++) {
    if (i)
      fputs(", ", f);
    put_value_decl(f, n->out[i]);
  }
  fprintf(f, " = %s(", op_info[n->op].name);
  for (int i = 0; i < n->nin && n->in[i]; i++) {
    if (i)
      fputs(", ", f);
    ir_print_value_name(f, n->in[i]->name);
  }
  fputc(')', f);
  if (n->nattr) {
    fputs(" {", f);
    for (int i = 0; i < n->nattr; i++) {
      if (i)
        fputs(", ", f);
      put_attr(f, &n->attrs[i]);
    }
    fputc('}', f);
  }
  if (n->origin) {
    fputs(" @", f);
    put_quoted(f, n->origin);
  }
  fputc('\n', f);
}

void ir_print(const Graph *g, FILE *f) {
  fputs("graph ", f);
  put_word(f, g->name ? g->name : "main");
  fputc('(', f);
  for (int i = 0; i < g->ninputs; i++) {
    if (i)
      fputs(", ", f);
    put_value_decl(f, g->inputs[i]);
  }
  fputc(')', f);
  for (int i = 0; i < g->nranges; i++) {
    const DimRange *r = &g->ranges[i];
    fputs(i ? ", " : " dims(", f);
    put_word(f, r->sym);
    fputs(" = ", f);
    for (int k = 0; k < r->nseg; k++) {
      fprintf(f, "%s%" PRId64, k ? ", " : "", r->lo[k]);
      if (r->hi[k] != r->lo[k])
        fprintf(f, "..%" PRId64, r->hi[k]);
    }
    if (i == g->nranges - 1)
      fputc(')', f);
  }
  fputs(" {\n", f);
  for (int i = 0; i < g->nconsts; i++)
    put_const(f, g->consts[i]);
  for (int i = 0; i < g->nnodes; i++)
    put_node(f, g->nodes[i]);
  fputs("  return", f);
  for (int i = 0; i < g->noutputs; i++) {
    fputs(i ? ", " : " ", f);
    ir_print_value_name(f, g->outputs[i]->name);
  }
  fputs("\n}\n", f);
}

char *ir_print_str(const Graph *g) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    return NULL;
  ir_print(g, f);
  if (fclose(f) != 0) {
    free(buf);
    return NULL;
  }
  return buf;
}

/* ---------------------------------------------------------------- files */

static bool big_inline(const Value *v) {
  return v->kind == VK_CONST && v->init == CI_DATA && v->data &&
         tensor_numel(v->data) > IR_INLINE_MAX_ELEMENTS;
}

/* The absolute form of path, a file that need not exist yet: its folder resolved. */
static char *absolute_path(const char *path, Diag *d) {
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
  char *real = dir ? realpath(dir, NULL) : NULL;
  const char *base = slash ? slash + 1 : path;
  char *abs = real ? malloc(strlen(real) + strlen(base) + 2) : NULL;
  if (abs)
    sprintf(abs, "%s/%s", strcmp(real, "/") ? real : "", base);
  else
    diag_error(d, (SrcLoc){.file = path}, "cannot resolve the path: %s",
               dir ? strerror(errno) : "out of memory");
  free(dir);
  free(real);
  return abs;
}

/* Both files are written to temporaries first and renamed only when both are whole; if
 * the second rename fails, the first file is removed again, so a failure leaves neither.
 * Into a device or a FIFO (-o /dev/stdout) there is no folder to put a side file in:
 * everything is printed inline there, as on standard output. */
int ir_print_file(Graph *g, const char *path, Diag *d) {
  OutFile o, so = {0};
  FILE *f = outfile_open(&o, path, d);
  if (!f)
    return -1;
  int nbig = 0;
  for (int i = 0; i < g->nconsts; i++)
    nbig += big_inline(g->consts[i]);
  if (!nbig || o.in_place) {
    ir_print(g, f);
    return outfile_commit(&o, d);
  }
  /* The side file: the path without its extension, then ".safetensors", absolute so the
   * printed load(...) finds it from anywhere (as the printer writes every load path). */
  size_t n = strlen(o.path);
  const char *dot = strrchr(o.path, '.'), *slash = strrchr(o.path, '/');
  size_t stem = dot && (!slash || dot > slash) ? (size_t)(dot - o.path) : n;
  char *side = malloc(stem + 16), *abs = NULL;
  const char **names = malloc(sizeof *names * (size_t)nbig);
  const Tensor **ts = malloc(sizeof *ts * (size_t)nbig);
  Value **moved = malloc(sizeof *moved * (size_t)nbig);
  int rc = -1, k = 0;
  if (!side || !names || !ts || !moved) {
    diag_error(d, (SrcLoc){.file = path}, "out of memory");
    goto out;
  }
  memcpy(side, o.path, stem);
  strcpy(side + stem, ".safetensors");
  if (!outfile_open(&so, side, d))
    goto out;
  if (so.in_place) {
    diag_error(d, (SrcLoc){.file = side}, "cannot write the large constants there: it is not "
                                          "a regular file");
    goto out;
  }
  if (!(abs = absolute_path(so.path, d)))
    goto out;
  for (int i = 0; i < g->nconsts; i++)
    if (big_inline(g->consts[i])) {
      names[k] = g->consts[i]->name;
      ts[k] = g->consts[i]->data;
      moved[k++] = g->consts[i];
    }
  if (safetensors_fwrite(so.f, side, names, ts, nbig, d))
    goto out;
  const char *p = graph_intern(g, abs);
  for (int i = 0; i < k; i++) {
    moved[i]->init = CI_FILE;
    moved[i]->path = p;
    moved[i]->key = moved[i]->name;
  }
  ir_print(g, f);
  char *side_real = strdup(so.path);
  if (!side_real || outfile_commit(&so, d)) {
    if (!side_real)
      diag_error(d, (SrcLoc){.file = path}, "out of memory");
  } else if (outfile_commit(&o, d)) {
    unlink(side_real);
  } else {
    rc = 0;
  }
  free(side_real);
out:
  if (rc)
    for (int i = 0; i < k; i++) { /* the graph as it was: nothing was written */
      moved[i]->init = CI_DATA;
      moved[i]->path = moved[i]->key = NULL;
    }
  if (rc && so.f)
    outfile_abort(&so);
  if (rc && o.f)
    outfile_abort(&o);
  free(side), free(abs), free(names), free(ts), free(moved);
  return rc;
}
