/* classes.c: a graph with ranged dims run on the reference executor the way a model.so
 * will run it (docs/dynamic-shapes.md): the inputs' sizes pick a shape class, the graph is
 * bound at the class's bounds, pad_mask makes the padding harmless, the passes run, and
 * the executor runs it on the inputs padded with zeros plus the actual sizes; the
 * outputs' real positions are what comes back. So `gpucc run --cpu` of a ranged graph
 * checks the masks at every size it is given, against the same graph bound exactly. */
#include "compiler/build.h"
#include "passes/passes.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The actual size of ranged symbol r in the inputs (the first input axis that has it),
 * and its class's bound. -1 with d set when the inputs disagree or it lies outside r. */
static int class_of(const Graph *g, Tensor *const *in, const DimRange *r, int64_t *size,
                    int64_t *bound, Diag *d) {
  *size = -1;
  for (int i = 0; i < g->ninputs; i++) {
    const Shape *s = &g->inputs[i]->type.shape;
    for (int j = 0; j < s->rank && j < in[i]->rank; j++) {
      if (!s->dims[j].sym || strcmp(s->dims[j].sym, r->sym))
        continue;
      char rs[256];
      if (*size >= 0 && in[i]->dims[j] != *size)
        return diag_error(d, g->inputs[i]->loc, "input %%%s: dim %d ('%s') is %" PRId64
                          ", but another input has %" PRId64, g->inputs[i]->name, j, r->sym,
                          in[i]->dims[j], *size);
      if (!range_has(r, in[i]->dims[j]))
        return diag_error(d, g->inputs[i]->loc, "input %%%s: dim %d ('%s') is %" PRId64
                          ", outside its range %s", g->inputs[i]->name, j, r->sym,
                          in[i]->dims[j], range_str(r, rs, sizeof rs));
      *size = in[i]->dims[j];
    }
  }
  if (*size < 0)
    return diag_error(d, g->loc, "ranged dim '%s': no input has it", r->sym);
  int64_t b[64];
  int n = range_classes(r, b, 64);
  if (n < 0)
    return diag_error(d, g->loc, "ranged dim '%s' has more than 64 classes", r->sym);
  for (int k = 0; k < n; k++)
    if (b[k] >= *size) {
      *bound = b[k];
      return 0;
    }
  return diag_error(d, g->loc, "ranged dim '%s': no class holds %" PRId64, r->sym, *size);
}

/* Whether element i of a tensor of dims[rank] with tags t[rank] is real at sizes s[]. */
static bool real_element(const DynAxes *a, const DynAxis *t, int rank, const int64_t *dims,
                         int64_t i, const int64_t *s) {
  for (int j = rank - 1; j >= 0; j--) {
    int64_t p = i % dims[j];
    i /= dims[j];
    for (int k = 0; k < DYN_AXIS_SYMS && t[j].t[k].sym >= 0; k++)
      if (p / t[j].t[k].stride % a->size[t[j].t[k].sym] >= s[t[j].t[k].sym])
        return false;
  }
  return true;
}

/* Where element i of x lies in a tensor of dims[] (each at least x's) that holds x at
 * its start. */
static int64_t offset_in(const Tensor *x, const int64_t *dims, int64_t i) {
  int64_t at = 0, stride = 1;
  for (int j = x->rank - 1; j >= 0; j--) {
    at += i % x->dims[j] * stride;
    i /= x->dims[j];
    stride *= dims[j];
  }
  return at;
}

/* x placed at the start of each of its ranged axes in a zeroed tensor of dims[]. */
static Tensor *pad_input(const Tensor *x, const int64_t *dims) {
  Tensor *t = tensor_new(x->dtype, x->rank, dims);
  if (!t)
    return NULL;
  size_t es = dtype_size(x->dtype);
  for (int64_t i = 0, n = tensor_numel(x); i < n; i++)
    memcpy((char *)t->data + (size_t)offset_in(x, dims, i) * es,
           (const char *)x->data + (size_t)i * es, es);
  return t;
}

/* The real elements of y (tags t) in order, as a tensor of the exact shape. */
static Tensor *real_part(const DynAxes *a, const DynAxis *t, const Tensor *y, const int64_t *s) {
  int64_t dims[IR_MAX_RANK];
  for (int j = 0; j < y->rank; j++) {
    dims[j] = y->dims[j];
    for (int k = 0; k < DYN_AXIS_SYMS && t[j].t[k].sym >= 0; k++)
      dims[j] = dims[j] / a->size[t[j].t[k].sym] * s[t[j].t[k].sym];
  }
  Tensor *r = tensor_new(y->dtype, y->rank, dims);
  if (!r)
    return NULL;
  size_t es = dtype_size(y->dtype);
  int64_t n = tensor_numel(y), k = 0;
  for (int64_t i = 0; i < n; i++)
    if (real_element(a, t, y->rank, y->dims, i, s))
      memcpy((char *)r->data + (size_t)(k++) * es, (const char *)y->data + (size_t)i * es, es);
  return r;
}

/* Whether the smaller of x and y (each dim at most the other's) is the other's start. */
static bool prefix_of(const Tensor *x, const Tensor *y) {
  if (x->dtype != y->dtype || x->rank != y->rank)
    return false;
  const Tensor *s = x, *l = y;
  for (int j = 0; j < x->rank; j++)
    if (x->dims[j] > y->dims[j])
      s = y, l = x;
  for (int j = 0; j < x->rank; j++)
    if (s->dims[j] > l->dims[j])
      return false;
  size_t es = dtype_size(s->dtype);
  for (int64_t i = 0, n = tensor_numel(s); i < n; i++)
    if (memcmp((const char *)s->data + (size_t)i * es,
               (const char *)l->data + (size_t)offset_in(s, l->dims, i) * es, es))
      return false;
  return true;
}

/* The size ranged dim r is bound at in g (its first bound input axis); 0 if none. */
static int64_t bound_size(const Graph *g, const char *sym) {
  for (int k = 0; k < g->nbound; k++)
    if (!strcmp(g->bound[k].sym, sym))
      return g->bound[k].size;
  return 0;
}

/* The tags of g, a model loaded at its class's sizes, from the ranged symbols' input axes,
 * and, when the model loaded at other sizes is given, from the axes of g's constants whose
 * extent is one ranged symbol's size in each (a position table cut to the sequence, a
 * mask's indices). */
static int analyse(const Graph *g, const Graph *other, const DimRange *ranges, int nr,
                   DynAxes *a, Diag *d) {
  DynSeed *seeds = NULL;
  int ns = 0, cap = 0;
  for (int k = 0; k <= g->nbound + (other ? g->nconsts * IR_MAX_RANK : 0); k++) {
    DynSeed s;
    if (k < g->nbound) {
      s = g->bound[k];
    } else {
      int i = (k - g->nbound) / IR_MAX_RANK, j = (k - g->nbound) % IR_MAX_RANK;
      if (i >= g->nconsts)
        break;
      const Value *v = g->consts[i], *w = graph_find_value(other, v->name);
      if (!w || w->kind != VK_CONST || j >= v->type.shape.rank || w->type.shape.rank != v->type.shape.rank ||
          v->type.shape.dims[j].n == w->type.shape.dims[j].n)
        continue;
      int which = -1, count = 0;
      for (int r = 0; r < nr; r++)
        if (v->type.shape.dims[j].n == bound_size(g, ranges[r].sym) &&
            w->type.shape.dims[j].n == bound_size(other, ranges[r].sym))
          which = r, count++;
      if (count != 1)
        continue;
      s = (DynSeed){ranges[which].sym, v->type.shape.dims[j].n, -1, j, v};
    }
    bool ranged = false;
    for (int r = 0; r < nr; r++)
      ranged = ranged || !strcmp(s.sym, ranges[r].sym);
    if (!ranged)
      continue;
    if (ns == cap) {
      DynSeed *p = realloc(seeds, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *p);
      if (!p) {
        free(seeds);
        return diag_error(d, g->loc, "out of memory");
      }
      seeds = p;
    }
    seeds[ns++] = s;
  }
  int rc = dyn_axes(g, seeds, ns, a, d);
  free(seeds);
  return rc;
}

static bool exact_in(const DynAxes *a, const char *name) {
  for (int k = 0; k < a->nexact; k++)
    if (!strcmp(a->exact[k]->name, name))
      return true;
  return false;
}

/* a and b: one model loaded at two sizes of its ranged dims, with their tags. A constant
 * folded from those sizes (a Shape chain's arithmetic: a count to divide by) would hold
 * the class's size, not the actual one, so it is refused; one whose shape follows the
 * size (a position table cut to the sequence) is fine where the smaller is the larger's
 * start, and so are indices that both analyses proved send each position to itself. */
static int check_constants(const Graph *a, const DynAxes *ta, const Graph *b, const DynAxes *tb,
                           Diag *d) {
  for (int i = 0; i < a->nconsts; i++) {
    const Value *v = a->consts[i];
    const Value *w = graph_find_value(b, v->name);
    if (!w || w->kind != VK_CONST || !v->data || !w->data || !graph_count_uses(a, v))
      continue;
    if (!prefix_of(v->data, w->data) && !(exact_in(ta, v->name) && exact_in(tb, v->name)))
      return diag_error(d, v->loc.line ? v->loc : a->loc, "constant %%%s is computed from the "
                        "size of a ranged dim (its values differ between sizes), which is "
                        "not supported yet: bind the dim with --dim NAME=SIZE", v->name);
  }
  return 0;
}

int classes_run_cpu(Graph *g, const GpuccCompileOptions *opt, ClassLoad load, void *arg,
                    Tensor *const *in, Tensor **out, Diag *d) {
  int nin = g->ninputs, nout = g->noutputs, rc = -1;
  const char *names[DYN_MAX_SYMS + IR_MAX_RANK * 8];
  int64_t sizes[DYN_MAX_SYMS + IR_MAX_RANK * 8], actual[DYN_MAX_SYMS];
  int nb = 0;
  DimRange ranges[DYN_MAX_SYMS];
  int nr = g->nranges;
  if (nr > DYN_MAX_SYMS)
    return diag_error(d, g->loc, "more than %d ranged dims", DYN_MAX_SYMS);
  memcpy(ranges, g->ranges, (size_t)nr * sizeof *ranges);
  for (int k = 0; k < nr; k++) {
    names[nb] = ranges[k].sym;
    if (class_of(g, in, &ranges[k], &actual[k], &sizes[nb], d))
      return -1;
    nb++;
  }
  /* the other symbols at the inputs' sizes */
  for (int i = 0; i < nin; i++)
    for (int j = 0; j < g->inputs[i]->type.shape.rank && j < in[i]->rank; j++) {
      const char *sym = g->inputs[i]->type.shape.dims[j].sym;
      bool seen = !sym;
      for (int k = 0; k < nb && !seen; k++)
        seen = !strcmp(names[k], sym);
      if (seen)
        continue;
      if (nb == (int)(sizeof sizes / sizeof *sizes))
        return diag_error(d, g->loc, "more than %d symbolic dims", nb);
      names[nb] = sym;
      sizes[nb++] = in[i]->dims[j];
    }
  /* the class's graph: g bound in place, or the model loaded again at these sizes, and
   * beside it the model at other sizes, to tell the constants folded from the sizes:
   * each ranged dim at the top of its range where the class is below it, else at the
   * bottom (src has its ranged input axes symbolic again) */
  Graph *src = g, *other = NULL;
  DynAxes a = {0}, b = {0};
  if (load) {
    if (!(g = load(arg, names, sizes, nb, d)))
      return -1;
    if (g->ninputs != nin || g->noutputs != nout) {
      graph_free(g);
      return diag_error(d, src->loc, "the model loaded at its class's sizes has other inputs "
                        "or outputs");
    }
    int64_t at[DYN_MAX_SYMS + IR_MAX_RANK * 8];
    bool differs = false;
    memcpy(at, sizes, (size_t)nb * sizeof *at);
    for (int k = 0; k < nr; k++) {
      at[k] = sizes[k] == range_max(&ranges[k]) ? ranges[k].lo[0] : range_max(&ranges[k]);
      differs = differs || at[k] != sizes[k];
    }
    if (differs && !(other = load(arg, names, at, nb, d))) {
      graph_free(g);
      return -1;
    }
  } else if (codegen_bind_dims(g, names, sizes, nb, d)) {
    return -1;
  }
  int arc = analyse(g, other, ranges, nr, &a, d);
  if (!arc && other)
    arc = analyse(other, g, ranges, nr, &b, d) || check_constants(g, &a, other, &b, d);
  dyn_axes_free(&b);
  graph_free(other);
  if (arc) {
    dyn_axes_free(&a);
    if (g != src)
      graph_free(g);
    return -1;
  }
  /* the outputs' tags now: the passes may replace the output values */
  DynAxis *otags = calloc((size_t)nout * IR_MAX_RANK + 1, sizeof *otags);
  int64_t s[DYN_MAX_SYMS] = {0};
  Tensor **pin = calloc((size_t)nin + DYN_MAX_SYMS + 1, sizeof *pin), **got = calloc((size_t)nout + 1, sizeof *got);
  if (!otags || !pin || !got) {
    diag_error(d, g->loc, "out of memory");
    goto done;
  }
  for (int k = 0; k < nout; k++)
    for (int j = 0; j < g->outputs[k]->type.shape.rank; j++)
      otags[k * IR_MAX_RANK + j] = *dyn_axis(&a, g->outputs[k], j);
  for (int m = 0; m < a.nsyms; m++)
    for (int r = 0; r < nr; r++)
      if (!strcmp(a.syms[m], ranges[r].sym))
        s[m] = actual[r];
  if (pass_pad_mask(g, &a, d))
    goto done;
  GpuccCompileOptions rest = opt ? *opt : (GpuccCompileOptions){0};
  rest.ndims = 0;
  rest.nranges = 0;
  Compiled c;
  int prc = pipeline_run(g, &rest, STAGE_PASSES, &c, d);
  compiled_free(&c);
  if (prc)
    goto done;
  for (int i = 0; i < nin; i++) {
    int64_t dims[IR_MAX_RANK];
    for (int j = 0; j < in[i]->rank; j++)
      dims[j] = g->inputs[i]->type.shape.dims[j].n;
    if (!(pin[i] = pad_input(in[i], dims))) {
      diag_error(d, g->loc, "out of memory");
      goto done;
    }
  }
  for (int m = 0; m < a.nsyms; m++) {
    int64_t none[1] = {0};
    if (!(pin[nin + m] = tensor_new(DT_I64, 0, none))) {
      diag_error(d, g->loc, "out of memory");
      goto done;
    }
    ((int64_t *)pin[nin + m]->data)[0] = s[m];
  }
  if (ir_eval(g, pin, got, d))
    goto done;
  rc = 0;
  for (int k = 0; k < nout && !rc; k++)
    if (!(out[k] = real_part(&a, &otags[k * IR_MAX_RANK], got[k], s)))
      rc = diag_error(d, g->loc, "out of memory");
done:
  for (int i = 0; pin && i < nin + a.nsyms; i++)
    tensor_free(pin[i]);
  for (int k = 0; got && k < nout; k++)
    tensor_free(got[k]);
  free(pin);
  free(got);
  free(otags);
  dyn_axes_free(&a);
  if (g != src)
    graph_free(g);
  return rc;
}
