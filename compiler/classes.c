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
#include <unistd.h>

/* The actual size of ranged symbol r in the inputs (the first input axis that has it),
 * and its class's bound. -1 with d set when the inputs disagree or it lies outside r. */
static int class_of(const Graph *g, Tensor *const *in, const DimRange *r, int per_octave,
                    int64_t *size, int64_t *bound, Diag *d) {
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
  int64_t b[GPUCC_MAX_CLASSES];
  int n = range_classes(r, per_octave, b, GPUCC_MAX_CLASSES);
  if (n < 0)
    return diag_error(d, g->loc, "ranged dim '%s' has more than %d classes", r->sym,
                      GPUCC_MAX_CLASSES);
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

/* Whether x and y hold the same values where both have elements: the box of the smaller
 * extent of each axis, at the start of both, compared a row (the innermost axis) at a
 * time, or at once where the shapes are equal (a weight, loaded the same at any size). */
static bool agree_at_start(const Tensor *x, const Tensor *y) {
  if (x->dtype != y->dtype || x->rank != y->rank)
    return false;
  Tensor box = {.dtype = x->dtype, .rank = x->rank};
  for (int j = 0; j < x->rank; j++)
    box.dims[j] = x->dims[j] < y->dims[j] ? x->dims[j] : y->dims[j];
  size_t es = dtype_size(x->dtype);
  int64_t row = x->rank ? box.dims[x->rank - 1] : 1;
  if (tensor_numel(&box) == 0)
    return true;
  if (!memcmp(x->dims, y->dims, (size_t)x->rank * sizeof *x->dims))
    return !memcmp(x->data, y->data, (size_t)tensor_numel(x) * es);
  for (int64_t i = 0, n = tensor_numel(&box); i < n; i += row)
    if (memcmp((const char *)x->data + (size_t)offset_in(&box, x->dims, i) * es,
               (const char *)y->data + (size_t)offset_in(&box, y->dims, i) * es,
               (size_t)row * es))
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
  for (int k = 0; k < g->nbound + (other ? g->nconsts * IR_MAX_RANK : 0); k++) {
    DynSeed s;
    if (k < g->nbound) {
      s = g->bound[k];
    } else {
      int i = (k - g->nbound) / IR_MAX_RANK, j = (k - g->nbound) % IR_MAX_RANK;
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
 * size (a position table cut to the sequence) is fine where the two agree on the
 * positions both have, and so are indices that both analyses proved send each position
 * to itself. */
static int check_constants(const Graph *a, const DynAxes *ta, const Graph *b, const DynAxes *tb,
                           Diag *d) {
  for (int i = 0; i < a->nconsts; i++) {
    const Value *v = a->consts[i];
    const Value *w = graph_find_value(b, v->name);
    if (!w || w->kind != VK_CONST || !v->data || !w->data || !graph_count_uses(a, v))
      continue;
    if (!agree_at_start(v->data, w->data) && !(exact_in(ta, v->name) && exact_in(tb, v->name)))
      return diag_error(d, v->loc.line ? v->loc : a->loc, "constant %%%s is computed from the "
                        "size of a ranged dim (its values differ between sizes), which is "
                        "not supported yet: bind the dim with --dim NAME=SIZE", v->name);
  }
  return 0;
}

/* The smallest size of r (cut per_octave) that runs in the class of bound (the sizes
 * above the class below it). */
static int64_t class_floor(const DimRange *r, int per_octave, int64_t bound) {
  int64_t b[GPUCC_MAX_CLASSES], prev = 0;
  int n = range_classes(r, per_octave, b, GPUCC_MAX_CLASSES);
  for (int k = 0; k < n && b[k] < bound; k++)
    prev = b[k];
  for (int k = 0; k < r->nseg; k++)
    if (r->hi[k] > prev)
      return r->lo[k] > prev ? r->lo[k] : prev + 1;
  return bound;
}

/* The graph of one class, with its tags in *a: the model loaded at sizes (load), else src
 * cloned and bound at them. With a loader (an ONNX model, which folds its Shape chains at
 * load), the model is loaded at other sizes too, to tell the constants folded from the
 * sizes (check_constants): each ranged dim at the top of its range where the class is
 * below it, else at the bottom. top, when not NULL, is the model loaded at the top of
 * every range, which most classes compare with: it is used instead of loading it again.
 * NULL with d set. */
static Graph *class_graph(const Graph *src, const DimRange *ranges, int nr,
                          const char *const *names, const int64_t *sizes, int nb,
                          ClassLoad load, void *arg, const Graph *top, DynAxes *a, Diag *d) {
  Graph *g = load ? load(arg, names, sizes, nb, d) : graph_clone(src);
  if (!g) {
    if (!load)
      diag_error(d, src->loc, "out of memory");
    return NULL;
  }
  if (!load && codegen_bind_dims(g, names, sizes, nb, d)) {
    graph_free(g);
    return NULL;
  }
  if (g->ninputs != src->ninputs || g->noutputs != src->noutputs) {
    graph_free(g);
    diag_error(d, src->loc, "the model loaded at its class's sizes has other inputs or outputs");
    return NULL;
  }
  Graph *loaded = NULL;
  const Graph *other = NULL;
  if (load) {
    int64_t at[DYN_MAX_SYMS + IR_MAX_RANK * 8];
    bool differs = false, at_top = true;
    memcpy(at, sizes, (size_t)nb * sizeof *at);
    for (int k = 0; k < nr; k++) {
      at[k] = sizes[k] == range_max(&ranges[k]) ? ranges[k].lo[0] : range_max(&ranges[k]);
      differs = differs || at[k] != sizes[k];
      at_top = at_top && at[k] == range_max(&ranges[k]);
    }
    if (differs && at_top && top)
      other = top;
    else if (differs && !(other = loaded = load(arg, names, at, nb, d))) {
      graph_free(g);
      return NULL;
    }
  }
  DynAxes b = {0};
  int rc = analyse(g, other, ranges, nr, a, d);
  if (!rc && other)
    rc = analyse(other, g, ranges, nr, &b, d) || check_constants(g, a, other, &b, d);
  dyn_axes_free(&b);
  graph_free(loaded);
  if (rc) {
    dyn_axes_free(a);
    graph_free(g);
    return NULL;
  }
  return g;
}

/* a's mixes less those of symbols whose class (at bounds b, cut cuts[r] times an
 * octave) serves one size only: such a class has no padding, so nothing is masked for
 * them (and an op that cannot be masked along them is fine). */
static void drop_unpadded(DynAxes *a, const DimRange *ranges, const int *cuts, int nr,
                          const int64_t *b) {
  int keep = 0;
  for (int k = 0; k < a->nmix; k++) {
    bool padded = true;
    for (int r = 0; r < nr; r++)
      if (!strcmp(a->syms[a->mix[k].sym], ranges[r].sym))
        padded = class_floor(&ranges[r], cuts[r], b[r]) < b[r];
    if (padded)
      a->mix[keep++] = a->mix[k];
  }
  a->nmix = keep;
}

/* names[0..nr): the ranged symbols; then every other symbolic input dim of g with its
 * size from given[] (the inputs' tensors; NULL: --dim's in opt, which must bind it). The
 * count, or -1 with d set. */
static int other_symbols(const Graph *g, const Tensor *const *given, const GpuccCompileOptions *opt,
                         const char **names, int64_t *sizes, int nb, int cap, Diag *d) {
  for (int i = 0; i < g->ninputs; i++)
    for (int j = 0; j < g->inputs[i]->type.shape.rank && (!given || j < given[i]->rank); j++) {
      const char *sym = g->inputs[i]->type.shape.dims[j].sym;
      bool seen = !sym;
      for (int k = 0; k < nb && !seen; k++)
        seen = !strcmp(names[k], sym);
      if (seen)
        continue;
      int64_t size = -1;
      for (int k = 0; !given && opt && k < opt->ndims; k++)
        if (!strcmp(opt->dim_names[k], sym))
          size = opt->dim_sizes[k];
      if (given)
        size = given[i]->dims[j];
      if (size < 0)
        return diag_error(d, g->inputs[i]->loc.line ? g->inputs[i]->loc : g->loc,
                          "input %%%s: dim %d is '%s', which has neither a size nor a range: "
                          "give one with --dim %s=SIZE or --dim %s=LO..HI", g->inputs[i]->name,
                          j, sym, sym, sym);
      if (nb == cap)
        return diag_error(d, g->loc, "more than %d symbolic dims", nb);
      names[nb] = sym;
      sizes[nb++] = size;
    }
  return nb;
}

/* The symbol output j's axis i is in the plan (-1: none) from its tags t in class
 * bounds b, or -1 with d set where the axis cannot be an output's: the runtime copies
 * the real part of an output as the box at the start of each ranged axis, so a ranged
 * axis must be one symbol, unmerged, at its class's bound. */
static int output_axis(const Graph *g, int j, int i, const DynAxes *a, const DynAxis *t,
                       const DimRange *ranges, int nr, const int64_t *b, int *sym, Diag *d) {
  const Value *v = g->outputs[j];
  *sym = -1;
  if (!dyn_tagged(t))
    return 0;
  for (int r = 0; r < nr; r++)
    if (!strcmp(ranges[r].sym, a->syms[t->t[0].sym]))
      *sym = r;
  if (t->t[1].sym >= 0 || t->t[0].stride != 1 || *sym < 0 ||
      v->type.shape.dims[i].n != b[*sym])
    return diag_error(d, v->loc.line ? v->loc : g->loc, "output %%%s: its axis %d holds the "
                      "ranged dim '%s' merged with another axis; an output's ranged axes must "
                      "be the dims themselves, which is not supported otherwise yet", v->name,
                      i, a->syms[t->t[0].sym]);
  return 0;
}

/* Whether ranged symbol r is rows (GPUCC_SYMBOL_ROWS): no node combines elements along
 * it (in the largest class, whose tags hold every smaller class's), it is exactly one axis
 * of every output (out_sym) and at most one of each input of g. A run may then split its
 * size into chunks, each run by a class on a slice of the rows, with no padding. */
static bool rows_symbol(const Graph *g, const DynAxes *a, const DimRange *ranges, int r,
                        const int *out_sym) {
  for (int k = 0; k < a->nmix; k++)
    if (!strcmp(a->syms[a->mix[k].sym], ranges[r].sym))
      return false;
  for (int j = 0; j < g->noutputs; j++) {
    int n = 0;
    for (int i = 0; i < g->outputs[j]->type.shape.rank; i++)
      n += out_sym[j * IR_MAX_RANK + i] == r;
    if (n != 1)
      return false;
  }
  for (int i = 0; i < g->ninputs; i++) {
    int n = 0;
    for (int j = 0; j < g->inputs[i]->type.shape.rank; j++)
      n += g->inputs[i]->type.shape.dims[j].sym &&
           !strcmp(g->inputs[i]->type.shape.dims[j].sym, ranges[r].sym);
    if (n > 1)
      return false;
  }
  return true;
}

/* The cuts an octave of each ranged symbol (range_classes): two, so that no size runs
 * more than 1.44 times its work in a class (a padded dim), or in more chunks than it
 * must (a rows dim: each chunk a pass over the weights and the launches; docs/
 * dynamic-shapes.md, section 7). When that makes more than GPUCC_MAX_CLASSES classes, one
 * for the rows symbols; then one for all. *total gets the count of classes; -1 with d set
 * when even that is too many. */
static int choose_cuts(const Graph *g, const DimRange *ranges, int nr, const bool *rows,
                       int *cuts, int *total, Diag *d) {
  for (int level = 2; level >= 0; level--) {
    int64_t n = 1;
    int64_t b[GPUCC_MAX_CLASSES];
    for (int r = 0; r < nr && n <= GPUCC_MAX_CLASSES; r++) {
      cuts[r] = level > (rows[r] ? 1 : 0) ? 2 : 1;
      int k = range_classes(&ranges[r], cuts[r], b, GPUCC_MAX_CLASSES);
      n = k < 0 ? GPUCC_MAX_CLASSES + 1 : n * k;
    }
    if (n <= GPUCC_MAX_CLASSES) {
      *total = (int)n;
      return 0;
    }
  }
  return diag_error(d, g->loc, "the ranges make more than %d shape classes; list the sizes "
                    "to serve instead (--dim %s=1,8,64..128)", GPUCC_MAX_CLASSES,
                    nr ? ranges[nr - 1].sym : "N");
}

/* Which ranged symbols are rows (rows_symbol), from src loaded (class_graph) at the top
 * of every range: sizes[0..nr) are set to those. */
static int top_rows(const Graph *src, const DimRange *ranges, int nr, const char *const *names,
                    int64_t *sizes, int nb, ClassLoad load, void *arg, bool *rows, Diag *d) {
  for (int r = 0; r < nr; r++)
    sizes[r] = range_max(&ranges[r]);
  DynAxes a = {0};
  Graph *g = class_graph(src, ranges, nr, names, sizes, nb, load, arg, NULL, &a, d);
  int *out_sym = calloc((size_t)src->noutputs * IR_MAX_RANK + 1, sizeof *out_sym);
  int rc = g && out_sym ? 0 : -1;
  if (g && !out_sym)
    diag_error(d, src->loc, "out of memory");
  for (int j = 0; j < src->noutputs && !rc; j++)
    for (int i = 0; i < g->outputs[j]->type.shape.rank && !rc; i++)
      rc = output_axis(g, j, i, &a, dyn_axis(&a, g->outputs[j], i), ranges, nr, sizes,
                       &out_sym[j * IR_MAX_RANK + i], d);
  for (int r = 0; r < nr && !rc; r++)
    rows[r] = rows_symbol(g, &a, ranges, r, out_sym);
  free(out_sym);
  dyn_axes_free(&a);
  graph_free(g);
  return rc;
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
  for (int k = 0; k < nr; k++)
    names[nb++] = ranges[k].sym;
  nb = other_symbols(g, (const Tensor *const *)in, NULL, names, sizes, nb,
                     (int)(sizeof sizes / sizeof *sizes), d);
  /* the class the model.so has for these sizes: its cuts follow which dims are rows */
  bool rows[DYN_MAX_SYMS] = {0};
  int cuts[DYN_MAX_SYMS], total;
  if (nb < 0 || top_rows(g, ranges, nr, names, sizes, nb, load, arg, rows, d) ||
      choose_cuts(g, ranges, nr, rows, cuts, &total, d))
    return -1;
  for (int k = 0; k < nr; k++)
    if (class_of(g, in, &ranges[k], cuts[k], &actual[k], &sizes[k], d))
      return -1;
  DynAxes a = {0};
  Graph *src = g;
  if (!(g = class_graph(src, ranges, nr, names, sizes, nb, load, arg, NULL, &a, d)))
    return -1;
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
  drop_unpadded(&a, ranges, cuts, nr, sizes);
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
  graph_free(g);
  return rc;
}

/* ---------------------------------------------------------------- a model.so of classes */

/* The weights of every class in one blob, each constant's bytes once
 * (docs/dynamic-shapes.md, section 5): a class's weights are the model's, and the small
 * tables pad_mask adds repeat between classes of equal bounds. */
typedef struct BlobItem {
  uint64_t hash, offset, bytes;
} BlobItem;
typedef struct Blob {
  unsigned char *data;
  uint64_t len, cap;
  BlobItem *items;
  int nitems, cap_items;
} Blob;

/* FNV-1a a word at a time: every class hands the blob every weight again (440 MB for
 * BERT-base, times the classes), and the hash only picks what memcmp then compares. */
static uint64_t hash_bytes(const unsigned char *p, uint64_t n) {
  uint64_t h = 0xcbf29ce484222325ull ^ n;
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
  }
  for (; i < n; i++)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* Where bytes[0..n) lie in the blob: an equal earlier constant's place, else a new one at
 * the end, aligned like the memory plan's. -1 when out of memory. */
static int blob_put(Blob *b, const void *bytes, uint64_t n, uint64_t *offset) {
  uint64_t h = hash_bytes(bytes, n);
  for (int i = 0; i < b->nitems; i++)
    if (b->items[i].hash == h && b->items[i].bytes == n &&
        !memcmp(b->data + b->items[i].offset, bytes, (size_t)n)) {
      *offset = b->items[i].offset;
      return 0;
    }
  uint64_t at = (b->len + GPUCC_ARENA_ALIGN - 1) / GPUCC_ARENA_ALIGN * GPUCC_ARENA_ALIGN;
  if (at + n > b->cap) {
    uint64_t cap = b->cap ? b->cap : 1 << 20;
    while (cap < at + n)
      cap *= 2;
    unsigned char *p = realloc(b->data, (size_t)cap);
    if (!p)
      return -1;
    memset(p + b->cap, 0, (size_t)(cap - b->cap));
    b->data = p;
    b->cap = cap;
  }
  if (b->nitems == b->cap_items) {
    int cap = b->cap_items ? 2 * b->cap_items : 64;
    BlobItem *p = realloc(b->items, (size_t)cap * sizeof *p);
    if (!p)
      return -1;
    b->items = p;
    b->cap_items = cap;
  }
  memcpy(b->data + at, bytes, (size_t)n);
  b->items[b->nitems++] = (BlobItem){h, at, n};
  b->len = at + n;
  *offset = at;
  return 0;
}

/* mp's constants moved into the blob: each used one to its place there, and every alias
 * of one after it. */
static int share_weights(Blob *b, MemPlan *mp, Diag *d) {
  for (int id = 0; id < mp->nslots; id++) {
    MemSlot *s = &mp->slot[id];
    if (mp->weights_used[id] && s->v && s->root == s->v && s->v->data &&
        blob_put(b, s->v->data->data, s->bytes, &s->offset))
      return diag_error(d, (SrcLoc){0}, "out of memory for the weights");
  }
  for (int id = 0; id < mp->nslots; id++) {
    MemSlot *s = &mp->slot[id];
    if (s->v && s->root != s->v && s->region == GPUCC_REGION_WEIGHTS)
      s->offset = mp->slot[s->root->id].offset;
  }
  return 0;
}

/* The module's source: every class's, in order. */
typedef struct Text {
  char *s;
  size_t len, cap;
} Text;

static int text_add(Text *t, const char *s, size_t n) {
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 1 << 16;
    while (cap < t->len + n + 1)
      cap *= 2;
    char *p = realloc(t->s, cap);
    if (!p)
      return -1;
    t->s = p;
    t->cap = cap;
  }
  memcpy(t->s + t->len, s, n);
  t->len += n;
  t->s[t->len] = 0;
  return 0;
}

/* The translation units of the module: whole classes' sources in order, a unit closed
 * once it holds UNIT_BYTES, each after the preamble (the first class's source begins
 * with it). NVRTC spends seconds on each unit before its size counts (the preamble's
 * templates at the types and tiles the kernels use), so a unit holds a few classes of a
 * transformer (430 KB each for BERT-base: 5.4 s alone, 9.4 s four together, on this
 * machine's CPUs), and a small model's classes share one. */
#define UNIT_BYTES ((size_t)1 << 20)

/* src's units (ends[c]: where class c's source ends in it) compiled in parallel, each
 * module added to plan, and kept in out->units. */
static int compile_units(const Text *src, const size_t *ends, int nclasses, const char *name,
                         const NvrtcOptions *nopt, GpuccPlan *plan, ClassesBuilt *out,
                         Diag *d) {
  int rc = nvrtc_compile_split(src->s, ends, nclasses, UNIT_BYTES, name, nopt, &out->units,
                               &out->nunits, d);
  for (int i = 0; i < out->nunits && !rc; i++)
    if (gpucc_plan_add_module(plan, out->units[i].cubin, out->units[i].cubin_size,
                              out->units[i].ptx))
      rc = diag_error(d, (SrcLoc){0}, "internal error: plan module: %s", gpucc_last_error());
  return rc;
}

/* "batch=4, seq=128" */
static const char *bounds_str(const DimRange *ranges, int nr, const int64_t *b, char *buf,
                              size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (int k = 0; k < nr && at < n; k++) {
    int w = snprintf(buf + at, n - at, "%s%s=%" PRId64, k ? ", " : "", ranges[k].sym, b[k]);
    at += w > 0 ? (size_t)w : 0;
  }
  return buf;
}

/* ---------------------------------------------------------------- the classes' front halves
 *
 * A class's graph is loaded, masked and through the passes on its own (its front half),
 * so the classes after the first do that in parallel threads (parallel_for), a window of
 * them at a time (each holds its own copy of the weights until its back half, in class
 * order, has put them in the blob). Codegen, which shares kernels with the earlier classes, and the rest
 * run one class after the other, so the output does not depend on the threads. */

typedef struct ClassFront {
  int c;
  int64_t b[GPUCC_MAX_SYMBOLS]; /* the class's bounds */
  Graph *g;                     /* after the passes (NULL: rc) */
  DynAxes a;                    /* its tags */
  int rc;
  Diag d;
} ClassFront;

typedef struct Fronts {
  const Graph *src;
  const DimRange *ranges;
  int nr;
  const char *const *names;
  const int64_t *sizes; /* the other symbols' sizes after the ranged ones' */
  int nb;
  ClassLoad load;
  void *arg;
  Graph *top;         /* with load, the model at the top of every range (class_graph) */
  const GpuccCompileOptions *first, *later; /* the passes' options for class 0, the rest */
  int *cuts, *total;  /* class 0 sets them (choose_cuts) */
  bool *rows;         /* ... and these */
  int *out_sym;       /* each output axis: its symbol (-1: none) ... */
  int64_t *out_dims;  /* ... and its extent, in class 0, which the others must agree with */
  ClassFront *jobs;   /* the window's, taken in order by the threads */
  int njobs;
} Fronts;

/* Class j->c's front half (j->b set): its graph, its output axes checked (class 0: read,
 * and from them the rows and the cuts), pad_mask and the passes. */
static void class_front(Fronts *f, ClassFront *j) {
  const DimRange *ranges = f->ranges;
  int nr = f->nr, nout = f->src->noutputs;
  Diag *d = &j->d;
  int64_t sizes[DYN_MAX_SYMS + IR_MAX_RANK * 8];
  memcpy(sizes, f->sizes, (size_t)f->nb * sizeof *sizes);
  memcpy(sizes, j->b, (size_t)nr * sizeof *sizes);
  char at[256];
  bounds_str(ranges, nr, j->b, at, sizeof at);
  Graph *g = class_graph(f->src, ranges, nr, f->names, sizes, f->nb, f->load, f->arg, f->top,
                         &j->a, d);
  int rc = !g;
  /* the outputs' ranged axes, before the passes replace the output values */
  for (int o = 0; o < nout && !rc; o++)
    for (int i = 0; i < g->outputs[o]->type.shape.rank && !rc; i++) {
      int sym, k = o * IR_MAX_RANK + i;
      int64_t ext = g->outputs[o]->type.shape.dims[i].n;
      rc = output_axis(g, o, i, &j->a, dyn_axis(&j->a, g->outputs[o], i), ranges, nr, j->b, &sym, d);
      if (!rc && j->c == 0) {
        f->out_sym[k] = sym;
        f->out_dims[k] = ext;
      } else if (!rc && (sym >= 0 ? sym != f->out_sym[k]
                         : f->out_sym[k] >= 0 ? ext != j->b[f->out_sym[k]] : ext != f->out_dims[k])) {
        rc = diag_error(d, f->src->loc, "output %%%s: its axis %d is %" PRId64 " in class (%s), "
                        "which the ranged dims do not explain; not supported yet",
                        f->src->outputs[o]->name, i, ext, at);
      }
    }
  for (int r = 0; r < nr && !rc && j->c == 0; r++)
    f->rows[r] = rows_symbol(g, &j->a, ranges, r, f->out_sym);
  if (!rc && j->c == 0)
    rc = choose_cuts(f->src, ranges, nr, f->rows, f->cuts, f->total, d);
  if (!rc) {
    drop_unpadded(&j->a, ranges, f->cuts, nr, j->b);
    rc = pass_pad_mask(g, &j->a, d);
  }
  Compiled passed;
  if (!rc) {
    rc = pipeline_run(g, j->c ? f->later : f->first, STAGE_PASSES, &passed, d);
    compiled_free(&passed);
  }
  if (rc) {
    graph_free(g);
    g = NULL;
  }
  j->g = g;
  j->rc = rc ? -1 : 0;
}

/* parallel_for's body: the front half of f->jobs[i]. */
static void front_one(void *arg, int i) {
  Fronts *f = arg;
  class_front(f, &f->jobs[i]);
}

/* How many classes' front halves run at once: a thread per CPU, but no more than the
 * memory available holds, each class's graph taken as three times the weights of the
 * first (its copy, and the passes' copies of what they transform). */
static int front_threads(uint64_t weights_bytes) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN), pages = sysconf(_SC_AVPHYS_PAGES),
       page = sysconf(_SC_PAGESIZE);
  int64_t n = cpus < 1 ? 1 : cpus;
  if (pages > 0 && page > 0 && weights_bytes > 0) {
    uint64_t fit = (uint64_t)pages * (uint64_t)page / 3 / weights_bytes;
    if ((uint64_t)n > fit)
      n = fit < 1 ? 1 : (int64_t)fit;
  }
  return (int)n;
}

int classes_build(Graph *g, const GpuccCompileOptions *opt, ClassLoad load, void *arg,
                  Stage last, FILE *plan_text, ClassesBuilt *out, Diag *d) {
  static const GpuccCompileOptions none;
  memset(out, 0, sizeof *out);
  if (!opt)
    opt = &none;
  int nr = g->nranges, nin = g->ninputs, nout = g->noutputs;
  if (nr > GPUCC_MAX_SYMBOLS)
    return diag_error(d, g->loc, "%d ranged dims; a model takes at most %d", nr, GPUCC_MAX_SYMBOLS);
  DimRange ranges[GPUCC_MAX_SYMBOLS];
  memcpy(ranges, g->ranges, (size_t)nr * sizeof *ranges);
  /* the classes: the cross product of each symbol's, the largest first; cut once an
   * octave until the first class (the top of every range, whatever the cuts) says which
   * dims are rows */
  int64_t bounds[GPUCC_MAX_SYMBOLS][GPUCC_MAX_CLASSES];
  int count[GPUCC_MAX_SYMBOLS], cuts[GPUCC_MAX_SYMBOLS], total;
  bool rows[GPUCC_MAX_SYMBOLS] = {0};
  char text[512];
  for (int r = 0; r < nr; r++)
    rows[r] = true;
  if (choose_cuts(g, ranges, nr, rows, cuts, &total, d))
    return -1;
  for (int r = 0; r < nr; r++)
    count[r] = range_classes(&ranges[r], cuts[r], bounds[r], GPUCC_MAX_CLASSES);
  const char *names[DYN_MAX_SYMS + IR_MAX_RANK * 8];
  int64_t sizes[DYN_MAX_SYMS + IR_MAX_RANK * 8];
  for (int r = 0; r < nr; r++)
    names[r] = ranges[r].sym;
  int nb = other_symbols(g, NULL, opt, names, sizes, nr, (int)(sizeof sizes / sizeof *sizes), d);
  if (nb < 0)
    return -1;
  /* the passes' options; their dumps for the first class only, in DIR/class0 beside the
   * input's, DIR/00-input.gir */
  GpuccCompileOptions first = *opt, later;
  first.ndims = 0;
  first.nranges = 0;
  first.report = NULL;
  first.progress = NULL; /* the classes report their own */
  later = first;
  later.print_after_all = NULL;
  later.dump_dir = NULL;
  char dump[4096];
  if (opt->dump_dir) {
    int n = snprintf(dump, sizeof dump, "%s/00-input.gir", opt->dump_dir);
    if (n < 0 || (size_t)n >= sizeof dump)
      return diag_error(d, g->loc, "path too long: '%s'", opt->dump_dir);
    if (make_dirs(opt->dump_dir, d) || ir_print_file(g, dump, d))
      return -1;
    snprintf(dump, sizeof dump, "%s/class0", opt->dump_dir);
    first.dump_dir = dump;
  }
  GpuccPlan *plan = gpucc_plan_new(0, 0, 0);
  CodegenShared *shared = codegen_shared_new();
  Blob blob = {0};
  Text src = {0};
  /* each output axis: the symbol it is (-1: none) and its extent, from the largest class */
  int *out_sym = calloc((size_t)nout * IR_MAX_RANK + 1, sizeof *out_sym);
  int64_t *out_dims = calloc((size_t)nout * IR_MAX_RANK + 1, sizeof *out_dims);
  uint64_t *offsets = calloc((size_t)(nin + nout) + 1, sizeof *offsets);
  size_t ends[GPUCC_MAX_CLASSES];
  uint64_t class_weights = 0;
  bool gemms = false;
  int rc = plan && shared && out_sym && out_dims && offsets ? 0
                                                           : diag_error(d, g->loc, "out of memory");
  Fronts f = {g, ranges, nr, names, sizes, nb, load, arg, NULL, &first, &later, cuts, &total, rows,
              out_sym, out_dims, NULL, 0};
  ClassFront *jobs = NULL;
  int window = 1, from = 0; /* jobs[k] is class from + k */
  for (int c = 0; c < total && !rc; c++) {
    if (c == 0 || c - from >= f.njobs) {
      /* the next window's front halves: class 0 alone (it sets the cuts), then as many
       * at once as front_threads allows */
      for (int k = 0; k < f.njobs; k++)
        graph_free(jobs[k].g), dyn_axes_free(&jobs[k].a);
      free(jobs);
      from = c;
      f.njobs = c == 0 ? 1 : total - c < window ? total - c : window;
      if (!(f.jobs = jobs = calloc((size_t)f.njobs, sizeof *jobs))) {
        f.njobs = 0;
        rc = diag_error(d, g->loc, "out of memory");
        break;
      }
      for (int k = 0; k < f.njobs; k++) {
        jobs[k].c = c + k;
        for (int r = nr - 1, i = c + k; r >= 0; r--) {
          jobs[k].b[r] = bounds[r][count[r] - 1 - i % count[r]];
          i /= count[r];
        }
      }
      parallel_for(f.njobs, c == 0 ? 1 : window, front_one, &f);
      if (c == 0)
        for (int r = 0; r < nr; r++)
          count[r] = range_classes(&ranges[r], cuts[r], bounds[r], GPUCC_MAX_CLASSES);
      if (c == 0 && !jobs[0].rc && load && total > 1) {
        int64_t at[DYN_MAX_SYMS + IR_MAX_RANK * 8];
        memcpy(at, sizes, (size_t)nb * sizeof *at);
        memcpy(at, jobs[0].b, (size_t)nr * sizeof *at);
        if (!(f.top = load(arg, names, at, nb, d))) {
          rc = -1;
          break;
        }
      }
    }
    ClassFront *job = &jobs[c - from];
    if (job->rc) {
      *d = job->d;
      rc = -1;
      break;
    }
    const int64_t *b = job->b;
    Graph *cg = job->g;
    Compiled part = {0};
    char prefix[16], at[256];
    snprintf(prefix, sizeof prefix, "c%d_", c);
    bounds_str(ranges, nr, b, at, sizeof at);
    rc = pipeline_run_part(cg, c ? &later : &first, STAGE_CODEGEN, STAGE_MEMPLAN, shared,
                           prefix, &part, d);
    if (!rc && c == 0)
      window = front_threads(part.memplan.weights_bytes);
    if (!rc && c == 0) {
      /* the model's inputs and outputs, at the largest sizes, and their ranged axes */
      snprintf(out->build.arch, sizeof out->build.arch, "%s", part.build.arch);
      out->build.target = part.build.target;
      for (int r = 0; r < nr && !rc; r++)
        if (gpucc_plan_add_symbol(plan, ranges[r].sym, ranges[r].nseg, ranges[r].lo, ranges[r].hi) ||
            (rows[r] && gpucc_plan_set_symbol_flags(plan, r, GPUCC_SYMBOL_ROWS)))
          rc = diag_error(d, g->loc, "internal error: plan symbol: %s", gpucc_last_error());
      for (int i = 0; i < nin + nout && !rc; i++) {
        const Value *v = i < nin ? cg->inputs[i] : cg->outputs[i - nin];
        int64_t dims[GPUCC_MAX_RANK];
        for (int j = 0; j < v->type.shape.rank; j++)
          dims[j] = v->type.shape.dims[j].n;
        GpuccDType t = rt_dtype(v->type.dtype);
        if (i < nin ? gpucc_plan_add_input(plan, v->name, t, v->type.shape.rank, dims, 0)
                    : gpucc_plan_add_output(plan, v->name, t, v->type.shape.rank, dims, 0))
          rc = diag_error(d, g->loc, "internal error: plan tensor: %s", gpucc_last_error());
        for (int j = 0; j < v->type.shape.rank && !rc; j++) {
          int sym = -1;
          if (i < nin && g->inputs[i]->type.shape.dims[j].sym)
            for (int r = 0; r < nr; r++)
              if (!strcmp(g->inputs[i]->type.shape.dims[j].sym, ranges[r].sym))
                sym = r;
          if (i >= nin)
            sym = out_sym[(i - nin) * IR_MAX_RANK + j];
          if (sym >= 0 && gpucc_plan_set_axis_symbol(plan, i >= nin, i < nin ? i : i - nin, j, sym))
            rc = diag_error(d, g->loc, "internal error: plan axis: %s", gpucc_last_error());
        }
      }
    }
    if (!rc) {
      class_weights += part.memplan.weights_bytes;
      rc = share_weights(&blob, &part.memplan, d);
    }
    if (!rc) {
      /* the class: its slots, where the actual sizes go, its steps */
      const MemPlan *mp = &part.memplan;
      uint64_t size_at[GPUCC_MAX_SYMBOLS];
      for (int r = 0; r < nr; r++) {
        size_at[r] = GPUCC_NO_OFFSET;
        for (int m = 0; m < job->a.nsyms; m++)
          if (!strcmp(job->a.syms[m], ranges[r].sym))
            size_at[r] = mp->slot[cg->inputs[nin + m]->id].offset;
      }
      for (int i = 0; i < nin; i++)
        offsets[i] = mp->slot[cg->inputs[i]->id].offset;
      for (int j = 0; j < nout; j++)
        offsets[nin + j] = mp->output_offset[j];
      int kernels = 0;
      if (gpucc_plan_add_class(plan, b, mp->arena_bytes, offsets, offsets + nin, size_at))
        rc = diag_error(d, g->loc, "internal error: plan class: %s", gpucc_last_error());
      if (!rc)
        rc = plan_add_program(plan, cg, part.program, mp, &kernels, d);
      if (!rc && c == 0)
        out->build.nkernels = kernels;
      if (plan->arena_bytes < mp->arena_bytes)
        plan->arena_bytes = mp->arena_bytes;
      for (int i = 0; i < part.program->nsteps; i++)
        gemms = gemms || part.program->steps[i].kind == STEP_GEMM;
      if (text_add(&src, part.program->source, part.program->source_len))
        rc = diag_error(d, g->loc, "out of memory");
      ends[c] = src.len;
      if (opt->report)
        fprintf(opt->report, "gpucc: class %d (%s): %d kernels, arena %" PRIu64 " bytes\n", c,
                at, kernels, mp->arena_bytes);
      if (plan_text) {
        fprintf(plan_text, "class %d (%s):\n", c, at);
        memplan_print(cg, part.program, mp, plan_text);
      }
    }
    out->nclasses += !rc;
    if (!rc && opt->progress)
      opt->progress(opt->progress_arg, "classes", c + 1, total);
    compiled_free(&part);
    graph_free(cg);
    job->g = NULL;
  }
  for (int k = 0; k < f.njobs; k++)
    graph_free(jobs[k].g), dyn_axes_free(&jobs[k].a);
  free(jobs);
  graph_free(f.top);
  /* NVRTC: the whole source as one unit for --emit=cubin, else in units in parallel */
  NvrtcOptions nopt = {.arch = out->build.arch, .no_cache = opt->no_cache,
                       .cache_dir = opt->cache_dir, .progress = opt->progress,
                       .progress_arg = opt->progress_arg};
  const char *name = g->name && *g->name ? g->name : "model";
  if (!rc && last == STAGE_NVRTC && src.len) {
    snprintf(text, sizeof text, "%s.cu", name);
    rc = nvrtc_compile(src.s, text, &nopt, &out->binary, d) != 0;
  } else if (!rc && last >= STAGE_PLAN && src.len) {
    rc = compile_units(&src, ends, out->nclasses, name, &nopt, plan, out, d);
  }
  if (!rc && last >= STAGE_PLAN) {
    plan->weights_bytes = blob.len;
    plan->workspace_bytes = gemms ? GPUCC_GEMM_WORKSPACE : 0;
    if (gpucc_plan_serialize(plan, &out->build.plan, &out->build.plan_len))
      rc = diag_error(d, g->loc, "internal error: the plan does not validate: %s",
                      gpucc_last_error());
    out->build.weights = blob.data;
    out->build.weights_len = (size_t)blob.len;
    blob.data = NULL;
    out->build.arena_bytes = plan->arena_bytes;
  }
  if (!rc && opt->report)
    fprintf(opt->report, "gpucc: %d shape classes, one module; weights %" PRIu64 " bytes "
            "shared (the classes' own would be %" PRIu64 ")\n", out->nclasses, blob.len,
            class_weights);
  for (int r = 0; r < nr && !rc && opt->report; r++)
    if (rows[r])
      fprintf(opt->report, "gpucc: no node combines along '%s': a run splits it into chunks "
              "that classes run unpadded\n", ranges[r].sym);
  out->source = src.s;
  out->source_len = src.len;
  free(blob.data);
  free(blob.items);
  free(out_sym);
  free(out_dims);
  free(offsets);
  codegen_shared_free(shared);
  gpucc_plan_free(plan);
  if (rc)
    classes_built_free(out);
  return rc ? -1 : 0;
}

void classes_built_free(ClassesBuilt *c) {
  gpucc_build_free(&c->build);
  nvrtc_output_free(&c->binary);
  for (int i = 0; i < c->nunits; i++)
    nvrtc_output_free(&c->units[i]);
  free(c->units);
  free(c->source);
  memset(c, 0, sizeof *c);
}
