/* dsl.c: the text form's front door and its lowering. dsl_parse runs the grammar
 * (parser.y over lexer.l) into a syntax tree, then lowers the tree into a Graph: inputs,
 * constants with their data materialized, and one node per call or operator, with every
 * use of a value resolved only once all definitions are known (so values may be used
 * before the line that defines them). The graph is then sorted, inferred and verified by
 * the IR layer, so what comes out is as trustworthy as what a pass hands on.
 *
 * Nothing here recurses over the input's structure: expressions are lowered in the order
 * the grammar created their nodes, and literals are walked only as deep as a type's rank. */
/* realpath() is XSI. */
#define _XOPEN_SOURCE 700

#include "frontends/frontends.h"

#include "dsl-impl.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Constants are materialized at parse time; past this a typo in a shape (an extra
 * zero) would take the machine down instead of giving an error. The bound holds for
 * each constant, and for all the ones a file makes from a few words (zeros, ones,
 * full, random) together; data written out or loaded from a file is bounded by that. */
#define DSL_MAX_CONST_BYTES ((int64_t)1 << 32)

/* ---------------------------------------------------------------- helpers for the grammar */

SrcLoc dsl_loc(const DslCtx *ctx, int line, int col) {
  return (SrcLoc){ctx->file, ctx->src, line, col};
}

DslExpr *dsl_new_expr(DslCtx *ctx, DslExprKind kind, SrcLoc loc) {
  DslExpr *e = arena_alloc(ctx->ast, sizeof *e);
  e->kind = kind;
  e->loc = loc;
  if (ctx->exprs_tail)
    ctx->exprs_tail->created = e;
  else
    ctx->exprs = e;
  ctx->exprs_tail = e;
  return e;
}

int dsl_check_int64(DslCtx *ctx, const DslNum *n, int64_t *out) {
  *out = 0;
  if (!n->is_int)
    return diag_error(ctx->d, n->loc, "expected an integer");
  if (!n->neg && n->mag <= (uint64_t)INT64_MAX)
    *out = (int64_t)n->mag;
  else if (n->neg && n->mag <= (uint64_t)INT64_MAX)
    *out = -(int64_t)n->mag;
  else if (n->neg && n->mag == (uint64_t)INT64_MAX + 1)
    *out = INT64_MIN;
  else
    return diag_error(ctx->d, n->loc, "integer literal out of range");
  return 0;
}

int dsl_make_type(DslCtx *ctx, const char *dtype, SrcLoc loc, DslType *out) {
  if (dtype_from_name(dtype, &out->t.dtype))
    return diag_error(ctx->d, loc, "unknown dtype '%s'", dtype);
  out->loc = loc;
  return 0;
}

int dsl_add_dim(DslCtx *ctx, DslType *t, const DslDim *dim) {
  Shape *s = &t->t.shape;
  if (s->rank >= IR_MAX_RANK)
    return diag_error(ctx->d, dim->loc, "too many dims: the rank is at most %d", IR_MAX_RANK);
  Dim d = {0, NULL};
  if (dim->sym) {
    if (!*dim->sym)
      return diag_error(ctx->d, dim->loc, "a symbolic dim needs a name");
    d = (Dim){-1, dim->sym};
  } else {
    int64_t n;
    if (dsl_check_int64(ctx, &dim->num, &n))
      return -1;
    if (n < 0)
      return diag_error(ctx->d, dim->loc, "negative dim %" PRId64, n);
    /* Elements counted as bytes: the bound on a value's bytes, which the verifier checks
     * again with the dtype, already holds for its elements. */
    int64_t dims[IR_MAX_RANK];
    int k = 0;
    for (int i = 0; i < s->rank; i++)
      if (!s->dims[i].sym)
        dims[k++] = s->dims[i].n;
    dims[k++] = n;
    if (n > IR_MAX_BYTES)
      return diag_error(ctx->d, dim->loc, "dim %" PRId64 " is larger than 2^48", n);
    if (!dims_size(k, dims, DT_U8, NULL, NULL))
      return diag_error(ctx->d, dim->loc, "the shape has more than 2^48 elements");
    d.n = n;
  }
  s->dims[s->rank++] = d;
  return 0;
}

static const char *const init_forms =
    "zeros, ones, full(v), random(seed = S, scale = X), load(\"path\") or a literal";

int dsl_make_init(DslCtx *ctx, const char *name, SrcLoc loc, DslInitArg *args, bool call,
                  DslInit *out) {
  memset(out, 0, sizeof *out);
  out->loc = loc;
  int nargs = 0;
  for (DslInitArg *a = args; a; a = a->next)
    nargs++;
  if (!strcmp(name, "zeros") || !strcmp(name, "ones")) {
    if (call)
      return diag_error(ctx->d, loc, "'%s' takes no arguments", name);
    out->kind = name[0] == 'z' ? CI_ZEROS : CI_ONES;
    return 0;
  }
  bool known = !strcmp(name, "full") || !strcmp(name, "random") || !strcmp(name, "load");
  if (!known)
    return diag_error(ctx->d, loc, "unknown initializer '%s': expected %s", name, init_forms);
  if (!call)
    return diag_error(ctx->d, loc, "expected '(' after '%s'", name);
  if (!strcmp(name, "full")) {
    if (nargs != 1 || args->is_string || args->name)
      return diag_error(ctx->d, loc, "full takes one number: full(v)");
    out->kind = CI_FULL;
    out->fill = args->num.f;
    return 0;
  }
  if (!strcmp(name, "random")) {
    out->kind = CI_RANDOM;
    out->scale = 1.0;
    bool seen_seed = false, seen_scale = false;
    for (DslInitArg *a = args; a; a = a->next) {
      if (a->name && !strcmp(a->name, "seed") && !seen_seed && !seen_scale) {
        if (!a->num.is_int || a->num.neg)
          return diag_error(ctx->d, a->loc, "the seed is a non-negative integer");
        out->seed = a->num.mag;
        seen_seed = true;
      } else if (a->name && !strcmp(a->name, "scale") && seen_seed && !seen_scale) {
        out->scale = a->num.f;
        seen_scale = true;
      } else {
        return diag_error(ctx->d, a->loc, "random takes (seed = S) or (seed = S, scale = X)");
      }
    }
    if (!seen_seed)
      return diag_error(ctx->d, loc, "random needs a seed: random(seed = S, scale = X)");
    return 0;
  }
  /* load */
  if (nargs < 1 || nargs > 2 || !args->is_string || (nargs == 2 && !args->next->is_string))
    return diag_error(ctx->d, loc, "load takes a path and, for .safetensors, a key: "
                                   "load(\"file.safetensors\", \"key\")");
  out->kind = CI_FILE;
  out->path = args->str;
  out->key = nargs == 2 ? args->next->str : NULL;
  return 0;
}

/* ---------------------------------------------------------------- lowering */

typedef struct Lower {
  DslCtx *ctx;
  Graph *g;
  Diag *d;
  char *dir;         /* where load() paths are relative to */
  long *reserved;    /* numeric names the source defines, sorted: not for intermediates */
  int nreserved;
  int64_t made_bytes; /* constants made from a few words so far */
  int64_t max_made_bytes; /* their bound: DslOptions, or DSL_MAX_CONST_BYTES */
} Lower;

static int cmp_long(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return (x > y) - (x < y);
}

/* "12" (as the graph's own fresh names are written) -> 12; anything else -> -1. */
static long numeric_name(const char *s) {
  if (!*s || (s[0] == '0' && s[1]) || strlen(s) > 9)
    return -1;
  long v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9')
      return -1;
    v = v * 10 + (*s - '0');
  }
  return v;
}

static void collect_reserved(Lower *L) {
  int cap = 0;
  for (DslResult *r = L->ctx->params; r; r = r->next)
    cap++;
  for (DslStmt *s = L->ctx->stmts; s; s = s->next)
    cap += s->nresults;
  L->reserved = malloc(sizeof(long) * (size_t)(cap ? cap : 1));
  if (!L->reserved)
    abort();
  for (DslResult *r = L->ctx->params; r; r = r->next)
    if (numeric_name(r->name) >= 0)
      L->reserved[L->nreserved++] = numeric_name(r->name);
  for (DslStmt *s = L->ctx->stmts; s; s = s->next)
    for (DslResult *r = s->results; r; r = r->next)
      if (numeric_name(r->name) >= 0)
        L->reserved[L->nreserved++] = numeric_name(r->name);
  qsort(L->reserved, (size_t)L->nreserved, sizeof(long), cmp_long);
}

/* A fresh name for an intermediate: the graph's own rule (the value count, bumped past
 * taken names), also skipping numeric names that a later line of the source defines. */
static const char *fresh_name(Lower *L, char *buf, size_t n) {
  for (long k = L->g->nvalues;; k++) {
    snprintf(buf, n, "%ld", k);
    if (!graph_find_value(L->g, buf) &&
        !bsearch(&k, L->reserved, (size_t)L->nreserved, sizeof(long), cmp_long))
      return buf;
  }
}

static Type lower_type(Lower *L, const DslType *t) {
  Type r = t->t;
  for (int i = 0; i < r.shape.rank; i++)
    if (r.shape.dims[i].sym)
      r.shape.dims[i].sym = graph_intern(L->g, r.shape.dims[i].sym);
  return r;
}

static int name_is_free(Lower *L, const char *name, SrcLoc loc) {
  Value *old = graph_find_value(L->g, name);
  if (!old)
    return 0;
  diag_error(L->d, loc, "value '%%%s' is defined twice", name);
  diag_note(L->d, old->loc, "'%%%s' is first defined here", name);
  return -1;
}

static int static_type(Lower *L, const DslType *t, const char *what) {
  for (int i = 0; i < t->t.shape.rank; i++)
    if (t->t.shape.dims[i].sym)
      return diag_error(L->d, t->loc, "%s must have a static type, but dim '%s' is symbolic",
                        what, t->t.shape.dims[i].sym);
  return 0;
}

/* One literal number into element p of type t, checking that it fits. */
static int store_number(Lower *L, DType t, void *p, const DslNum *n) {
  if (dtype_is_float(t)) {
    dtype_store_f64(t, p, n->f);
    return 0;
  }
  if (!n->is_int)
    return diag_error(L->d, n->loc, "%s elements must be integers", dtype_name(t));
  int64_t v;
  if (dsl_check_int64(L->ctx, n, &v))
    return -1;
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  switch (t) {
  case DT_I32: lo = INT32_MIN; hi = INT32_MAX; break;
  case DT_I16: lo = INT16_MIN; hi = INT16_MAX; break;
  case DT_I8: lo = INT8_MIN; hi = INT8_MAX; break;
  case DT_U8: lo = 0; hi = UINT8_MAX; break;
  case DT_BOOL: lo = 0; hi = 1; break;
  default: break;
  }
  if (v < lo || v > hi)
    return diag_error(L->d, n->loc, "%" PRId64 " is out of range for %s", v, dtype_name(t));
  dtype_store_i64(t, p, v);
  return 0;
}

/* Checks one level of a literal against the shape and stores its elements in row-major
 * order. Recursion stops at the type's rank (at most IR_MAX_RANK). */
static int fill_level(Lower *L, const DslLit *lit, const DslType *ty, int level, Tensor *t,
                      int64_t *at) {
  char ts[128];
  const Shape *s = &ty->t.shape;
  if (level == s->rank) {
    if (lit->is_list)
      return diag_error(L->d, lit->loc, "a list where %s has a number",
                        type_str(&ty->t, ts, sizeof ts));
    char *p = (char *)t->data + (size_t)*at * dtype_size(t->dtype);
    ++*at;
    return store_number(L, t->dtype, p, &lit->num);
  }
  if (!lit->is_list || lit->n != s->dims[level].n)
    return diag_error(L->d, lit->loc, "expected a list of %" PRId64 " for dim %d of %s",
                      s->dims[level].n, level, type_str(&ty->t, ts, sizeof ts));
  for (const DslLit *c = lit->first; c; c = c->next)
    if (fill_level(L, c, ty, level + 1, t, at))
      return -1;
  return 0;
}

static int fill_literal(Lower *L, const DslLit *lit, const DslType *ty, Tensor *t) {
  int64_t numel = tensor_numel(t);
  if (lit->count != numel) {
    char ts[128];
    return diag_error(L->d, lit->loc, "expected %" PRId64 " element%s for %s, got %" PRId64,
                      numel, numel == 1 ? "" : "s", type_str(&ty->t, ts, sizeof ts),
                      lit->count);
  }
  int64_t at = 0;
  return fill_level(L, lit, ty, 0, t, &at);
}

static int check_size(Lower *L, const DslType *ty) {
  int64_t numel = shape_numel(&ty->t.shape);
  if (numel > DSL_MAX_CONST_BYTES / (int64_t)dtype_size(ty->t.dtype))
    return diag_error(L->d, ty->loc, "constant too large: more than %" PRId64 " bytes",
                      DSL_MAX_CONST_BYTES);
  return 0;
}

/* load("path"): relative to the file that names it; the absolute path is kept so that
 * a dump read from another folder finds the same file. */
static Tensor *load_file(Lower *L, const DslInit *in, const DslType *ty, const char **abs_out) {
  const char *path = in->path;
  size_t n = strlen(L->dir) + strlen(path) + 2;
  char *joined = malloc(n);
  if (!joined)
    abort();
  if (path[0] == '/')
    snprintf(joined, n, "%s", path);
  else
    snprintf(joined, n, "%s/%s", L->dir, path);
  char *abs = realpath(joined, NULL);
  int err = errno;
  free(joined);
  if (!abs) {
    diag_error(L->d, in->loc, "cannot open '%s': %s", path, strerror(err));
    return NULL;
  }
  Diag ld = {0};
  Tensor *file = tensor_load(abs, in->key, &ld);
  if (!file) {
    /* Keep the loader's words but put them at the load( of the source. */
    const char *why = strstr(ld.msg, "error: ");
    why = why ? why + 7 : ld.msg;
    size_t len = strcspn(why, "\n");
    diag_error(L->d, in->loc, "cannot load '%s': %.*s", path, (int)len, why);
    free(abs);
    return NULL;
  }
  bool same = file->dtype == ty->t.dtype && file->rank == ty->t.shape.rank;
  for (int i = 0; same && i < file->rank; i++)
    same = file->dims[i] == ty->t.shape.dims[i].n;
  if (!same) {
    Type ft = {file->dtype, {file->rank, {{0, NULL}}}};
    for (int i = 0; i < file->rank; i++)
      ft.shape.dims[i] = (Dim){file->dims[i], NULL};
    char a[128], b[128];
    diag_error(L->d, in->loc, "'%s' holds %s, but the constant is declared %s", path,
               type_str(&ft, a, sizeof a), type_str(&ty->t, b, sizeof b));
    tensor_free(file);
    free(abs);
    return NULL;
  }
  Tensor *t = tensor_in_arena(L->g->arena, file->dtype, file->rank, file->dims);
  memcpy(t->data, file->data, tensor_nbytes(file));
  tensor_free(file);
  *abs_out = arena_strdup(L->g->arena, abs);
  free(abs);
  return t;
}

static int lower_const(Lower *L, const DslStmt *s) {
  const DslResult *r = s->results;
  const DslType *ty = &s->ctype;
  if (static_type(L, ty, "a constant") || check_size(L, ty))
    return -1;
  if (r->has_type && !type_eq(&r->type.t, &ty->t)) {
    char a[128], b[128];
    return diag_error(L->d, r->type.loc, "type mismatch: '%%%s' is declared %s but its constant is %s",
                      r->name, type_str(&r->type.t, a, sizeof a), type_str(&ty->t, b, sizeof b));
  }
  if (name_is_free(L, r->name, r->loc))
    return -1;
  const DslInit *in = &s->init;
  int64_t dims[IR_MAX_RANK];
  for (int i = 0; i < ty->t.shape.rank; i++)
    dims[i] = ty->t.shape.dims[i].n;
  Tensor *t = NULL;
  const char *abs = NULL;
  if (in->kind != CI_FILE && in->kind != CI_DATA) {
    int64_t bytes;
    shape_size(&ty->t.shape, ty->t.dtype, NULL, &bytes); /* check_size passed */
    if (bytes > L->max_made_bytes - L->made_bytes)
      return diag_error(L->d, s->init.loc, "constants made by zeros, ones, full or random "
                        "total more than %" PRId64 " bytes; load() big ones from a file",
                        L->max_made_bytes);
    L->made_bytes += bytes;
  }
  if (in->kind == CI_FILE) {
    t = load_file(L, in, ty, &abs);
    if (!t)
      return -1;
  } else {
    t = tensor_in_arena(L->g->arena, ty->t.dtype, ty->t.shape.rank, dims);
    switch (in->kind) {
    case CI_ZEROS: break; /* the arena hands out zeroed memory */
    case CI_ONES: tensor_fill_value(t, 1.0); break;
    case CI_FULL: tensor_fill_value(t, in->fill); break;
    case CI_RANDOM: tensor_fill_random(t, in->seed, in->scale); break;
    case CI_DATA:
      if (fill_literal(L, in->lit, ty, t))
        return -1;
      break;
    case CI_FILE: break;
    }
  }
  Value *v = graph_add_const(L->g, r->name, t);
  v->init = in->kind;
  v->fill = in->fill;
  v->seed = in->seed;
  v->scale = in->scale;
  v->path = abs;
  v->key = in->key ? arena_strdup(L->g->arena, in->key) : NULL;
  v->loc = r->loc;
  return 0;
}

/* The schema entry of `name`, or NULL. */
static const AttrSpec *find_spec(Op op, const char *name) {
  int n;
  const AttrSpec *sp = op_attr_specs(op, &n);
  for (int i = 0; i < n; i++)
    if (!strcmp(sp[i].name, name))
      return &sp[i];
  return NULL;
}

/* Attributes as written, coerced toward the schema: an int where a float is wanted is
 * that float, and a list takes the schema's kind when its numbers allow. Whatever still
 * disagrees is left for ir_check_attrs to name. */
static int lower_attr(Lower *L, const DslExpr *e, const DslAttr *a, Attr *x) {
  const AttrSpec *sp = find_spec(e->op, a->name);
  AttrKind want = sp ? sp->kind : AK_INT;
  memset(x, 0, sizeof *x);
  x->name = a->name;
  switch (a->kind) {
  case DA_NUM:
    if (a->num.is_int && want != AK_FLOAT) {
      x->kind = AK_INT;
      if (dsl_check_int64(L->ctx, &a->num, &x->i))
        return -1;
    } else {
      x->kind = AK_FLOAT;
      x->f = a->num.f;
    }
    return 0;
  case DA_STRING:
    x->kind = AK_STRING;
    x->s = a->str;
    if (e->op == OP_CAST && !strcmp(a->name, "to")) {
      DType dt;
      if (dtype_from_name(a->str, &dt))
        return diag_error(L->d, a->loc, "unknown dtype '%s'", a->str);
    }
    return 0;
  case DA_LIST: {
    bool all_int = true;
    for (const DslNumList *l = a->list; l; l = l->next)
      all_int = all_int && l->num.is_int;
    x->n = a->nlist;
    if (all_int && want != AK_FLOATS) {
      x->kind = AK_INTS;
      x->ints = arena_alloc(L->ctx->ast, sizeof(int64_t) * (size_t)(a->nlist ? a->nlist : 1));
      int i = 0;
      for (const DslNumList *l = a->list; l; l = l->next)
        if (dsl_check_int64(L->ctx, &l->num, &x->ints[i++]))
          return -1;
    } else {
      x->kind = AK_FLOATS;
      x->floats = arena_alloc(L->ctx->ast, sizeof(double) * (size_t)(a->nlist ? a->nlist : 1));
      int i = 0;
      for (const DslNumList *l = a->list; l; l = l->next)
        x->floats[i++] = l->num.f;
    }
    return 0;
  }
  case DA_TENSOR: {
    if (static_type(L, &a->type, "a tensor attribute") || check_size(L, &a->type))
      return -1;
    int64_t dims[IR_MAX_RANK];
    for (int i = 0; i < a->type.t.shape.rank; i++)
      dims[i] = a->type.t.shape.dims[i].n;
    Tensor *t = tensor_in_arena(L->ctx->ast, a->type.t.dtype, a->type.t.shape.rank, dims);
    if (fill_literal(L, a->lit, &a->type, t))
      return -1;
    x->kind = AK_TENSOR;
    x->t = t;
    return 0;
  }
  }
  return 0;
}

/* One node for expression e. The root of a statement takes the statement's results;
 * anything below it gets a fresh name. Inputs that name values are left NULL here and
 * filled in by resolve_uses once every definition exists. */
static int lower_expr(Lower *L, DslExpr *e, const DslStmt *s) {
  bool root = e == s->root;
  Op op = e->kind == DE_VALUE ? OP_IDENTITY : e->op;
  const OpInfo *oi = &op_info[op];
  int nout;
  if (root) {
    if (s->nresults > 1 && e->kind == DE_VALUE)
      return diag_error(L->d, s->loc, "only a call may have several results");
    nout = oi->n_out >= 0 ? oi->n_out : s->nresults;
    if (nout != s->nresults)
      return diag_error(L->d, s->loc, "op '%s' has %d result%s, but %d %s named", oi->name,
                        nout, nout == 1 ? "" : "s", s->nresults, s->nresults == 1 ? "is" : "are");
  } else {
    if (oi->n_out != 1)
      return diag_error(L->d, e->loc,
                        "op '%s' has several results and cannot be nested in an expression",
                        oi->name);
    nout = 1;
  }

  const char **names = arena_alloc(L->ctx->ast, sizeof(char *) * (size_t)nout);
  char fresh[32];
  if (root) {
    int i = 0;
    for (const DslResult *r = s->results; r; r = r->next, i++) {
      if (name_is_free(L, r->name, r->loc))
        return -1;
      for (const DslResult *q = s->results; q != r; q = q->next)
        if (!strcmp(q->name, r->name)) {
          diag_error(L->d, r->loc, "value '%%%s' is defined twice", r->name);
          diag_note(L->d, q->loc, "'%%%s' is first defined here", q->name);
          return -1;
        }
      names[i] = r->name;
    }
  } else {
    names[0] = fresh_name(L, fresh, sizeof fresh);
  }

  int nin = e->kind == DE_VALUE ? 1 : e->nargs;
  Value **ins = arena_alloc(L->ctx->ast, sizeof(Value *) * (size_t)(nin ? nin : 1));
  for (int i = 0; e->kind == DE_OP && i < nin; i++)
    ins[i] = e->args[i]->kind == DE_OP ? e->args[i]->val : NULL;

  Attr *attrs = arena_alloc(L->ctx->ast, sizeof(Attr) * (size_t)(e->nattrs ? e->nattrs : 1));
  int k = 0;
  for (const DslAttr *a = e->attrs; a; a = a->next)
    if (lower_attr(L, e, a, &attrs[k++]))
      return -1;

  Node *n = graph_add_node(L->g, op, ins, nin, attrs, e->nattrs, names, nout);
  if (!n)
    return diag_error(L->d, e->loc, "cannot add node '%s'", oi->name);
  n->loc = e->loc;
  if (e->origin)
    n->origin = arena_strdup(L->g->arena, e->origin);
  if (root) {
    int i = 0;
    for (const DslResult *r = s->results; r; r = r->next, i++) {
      n->out[i]->loc = r->loc;
      if (r->has_type)
        n->out[i]->type = lower_type(L, &r->type);
    }
  } else {
    n->out[0]->loc = e->loc;
  }
  if (e->kind == DE_VALUE) {
    e->use_node = n;
    e->use_index = 0;
  }
  for (int i = 0; e->kind == DE_OP && i < nin; i++)
    if (e->args[i]->kind == DE_VALUE) {
      e->args[i]->use_node = n;
      e->args[i]->use_index = i;
    }
  e->val = n->out[0];
  return 0;
}

static int lower_node_stmt(Lower *L, const DslStmt *s) {
  for (DslExpr *e = s->first;; e = e->created) {
    /* A value leaf is a node only when it is the whole right-hand side (identity). */
    if ((e->kind == DE_OP || e == s->root) && lower_expr(L, e, s))
      return -1;
    if (e == s->root)
      return 0;
  }
}

/* Every value leaf now names a defined value, or the source has an error. */
static int resolve_uses(Lower *L) {
  for (DslExpr *e = L->ctx->exprs; e; e = e->created) {
    if (e->kind != DE_VALUE)
      continue;
    Value *v = graph_find_value(L->g, e->name);
    if (!v)
      return diag_error(L->d, e->loc, "use of undefined value '%%%s'", e->name);
    e->use_node->in[e->use_index] = v;
  }
  return 0;
}

static int lower(Lower *L) {
  DslCtx *ctx = L->ctx;
  Graph *g = L->g;
  g->name = arena_strdup(g->arena, ctx->gname);
  g->loc = ctx->gloc;
  collect_reserved(L);

  for (DslResult *p = ctx->params; p; p = p->next) {
    if (name_is_free(L, p->name, p->loc))
      return -1;
    Value *v = graph_add_input(g, p->name, lower_type(L, &p->type));
    v->loc = p->loc;
  }
  for (const DslRange *r = ctx->ranges; r; r = r->next) {
    if (graph_range(g, r->r.sym))
      return diag_error(L->d, r->r.loc, "the range of '%s' is given twice", r->r.sym);
    graph_set_range(g, &r->r);
  }

  const DslStmt *ret = NULL;
  for (DslStmt *s = ctx->stmts; s; s = s->next) {
    if (ret)
      return diag_error(L->d, ret->loc, "'return' must be the last statement");
    switch (s->kind) {
    case DS_CONST:
      if (lower_const(L, s))
        return -1;
      break;
    case DS_NODE:
      if (lower_node_stmt(L, s))
        return -1;
      break;
    case DS_RETURN: ret = s; break;
    }
  }
  if (resolve_uses(L))
    return -1;
  if (!ret)
    return diag_error(L->d, ctx->end_loc, "missing 'return' at the end of graph '%s'", g->name);
  for (const DslRef *r = ret->rets; r; r = r->next) {
    Value *v = graph_find_value(g, r->name);
    if (!v)
      return diag_error(L->d, r->loc, "use of undefined value '%%%s'", r->name);
    graph_add_output(g, v);
  }
  return 0;
}

/* The IR layer's checks, in the order that gives the most useful first error:
 * attribute schemas, then cycles, then types, then everything else. */
static int check_graph(Graph *g, Diag *d) {
  for (int i = 0; i < g->nnodes; i++)
    if (ir_check_attrs(g->nodes[i], d))
      return -1;
  return ir_toposort(g, d) || ir_infer(g, d) || ir_verify(g, d) ? -1 : 0;
}

/* ---------------------------------------------------------------- entry points */

static char *dir_of(const char *file) {
  const char *slash = strrchr(file, '/');
  if (!slash)
    return strdup(".");
  if (slash == file)
    return strdup("/");
  return strndup(file, (size_t)(slash - file));
}

Graph *dsl_parse(const char *file, const char *text, size_t len, Diag *d) {
  return dsl_parse_with(file, text, len, NULL, d);
}

Graph *dsl_parse_with(const char *file, const char *text, size_t len, const DslOptions *opt,
                      Diag *d) {
  Diag local = {0};
  if (!file)
    file = "<input>";
  if (!text)
    text = "";
  Graph *g = graph_new("main");
  DslCtx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.d = &local;
  ctx.file = arena_strdup(g->arena, file);
  ctx.src = arena_strndup(g->arena, text, len);
  ctx.len = len;
  ctx.ast = arena_new();
  Lower L = {.ctx = &ctx, .g = g, .d = &local, .max_made_bytes = DSL_MAX_CONST_BYTES};
  if (opt && opt->max_made_bytes > 0 && opt->max_made_bytes < DSL_MAX_CONST_BYTES)
    L.max_made_bytes = opt->max_made_bytes;

  int rc = -1;
  const char *nul = memchr(text, 0, len);
  if (nul) {
    int line = 1, col = 1;
    for (const char *p = text; p < nul; p++) {
      line += *p == '\n';
      col = *p == '\n' ? 1 : col + 1;
    }
    diag_error(&local, dsl_loc(&ctx, line, col), "NUL byte in source");
  } else if (dsl_run_parser(&ctx) == 0) {
    L.dir = dir_of(file);
    if (!L.dir)
      abort();
    rc = lower(&L) || check_graph(g, &local) ? -1 : 0;
  }
  free(L.dir);
  free(L.reserved);
  arena_free(ctx.ast);
  if (rc) {
    if (d && !d->failed)
      *d = local;
    graph_free(g);
    return NULL;
  }
  return g;
}

Graph *dsl_parse_file(const char *path, Diag *d) {
  bool is_stdin = !strcmp(path, "-");
  char why[256];
  FILE *f = is_stdin ? stdin : fopen_regular(path, NULL, why, sizeof why);
  if (!f) {
    diag_error(d, (SrcLoc){0}, "cannot open '%s': %s", path, why);
    return NULL;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  if (!buf)
    abort();
  for (;;) {
    if (len == cap) {
      /* The parser takes at most INT_MAX / 2 bytes: no reason to read on (standard input
       * may be endless, /dev/zero say) until the allocation fails. */
      if (len > (size_t)INT_MAX / 2) {
        if (!is_stdin)
          fclose(f);
        free(buf);
        diag_error(d, (SrcLoc){.file = is_stdin ? "<stdin>" : path}, "file too large");
        return NULL;
      }
      cap *= 2;
      char *nb = realloc(buf, cap);
      if (!nb)
        abort();
      buf = nb;
    }
    size_t k = fread(buf + len, 1, cap - len, f);
    len += k;
    if (k == 0)
      break;
  }
  int err = ferror(f) ? errno : 0;
  if (!is_stdin)
    fclose(f);
  if (err) {
    free(buf);
    diag_error(d, (SrcLoc){0}, "cannot read '%s': %s", is_stdin ? "<stdin>" : path,
               strerror(err));
    return NULL;
  }
  Graph *g = dsl_parse(is_stdin ? "<stdin>" : path, buf, len, d);
  free(buf);
  return g;
}

/* ---------------------------------------------------------------- formats */

ModelFormat model_format(const void *head, size_t n) {
  const unsigned char *b = head;
  if (n >= 4 && !memcmp(b, "\177ELF", 4))
    return FORMAT_ELF;
  /* the first word after blanks and comments */
  size_t i = 0;
  while (i < n) {
    if (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
      i++;
    } else if (i + 1 < n && b[i] == '/' && b[i + 1] == '/') {
      while (i < n && b[i] != '\n')
        i++;
    } else if (i + 1 < n && b[i] == '/' && b[i + 1] == '*') {
      size_t j = i + 2;
      while (j + 1 < n && !(b[j] == '*' && b[j + 1] == '/'))
        j++;
      i = j + 2;
    } else {
      break;
    }
  }
  if (i + 5 <= n && !memcmp(b + i, "graph", 5) &&
      (i + 5 == n || (!isalnum(b[i + 5]) && b[i + 5] != '_' && b[i + 5] != '.')))
    return FORMAT_DSL;
  /* not text (a control byte; names and strings may hold UTF-8): a protobuf */
  for (size_t k = 0; k < n; k++)
    if (b[k] < 0x20 && b[k] != '\n' && b[k] != '\r' && b[k] != '\t')
      return FORMAT_ONNX;
  return FORMAT_UNKNOWN;
}
