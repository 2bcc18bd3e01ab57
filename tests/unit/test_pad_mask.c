/* Unit tests of passes/pad_mask.c on the reference executor: a graph bound at a class's
 * size M = 8 of a ranged symbol S, with pad_mask, run on inputs whose first s positions
 * along S are real and the rest NaN, must give in its outputs' real positions exactly
 * what the graph bound at s gives (docs/dynamic-shapes.md, section 3), for every s from 1
 * to M. Exactly means the same bits: padding enters sums as 0 and softmax as exp(-inf) =
 * 0, which change no partial sum; a mean, a sum divided by the count of real positions,
 * may round differently from the executor's own mean, so it gets a relative 1e-6. */
#include "frontends/frontends.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { M = 8 };

/* A transformer's attention over S (the batch 2 fixed), the scores' softmax over the
 * keys, and reductions and a prefix sum along S. */
static Graph *graph_at(int s) {
  char text[2048];
  snprintf(text, sizeof text,
           "graph g(%%x: f32[2, %d, 8], %%w: f32[8, 8], %%ids: i64[2, %d], %%t: f32[10, 8]) {\n"
           "  %%r = reshape(%%x) {shape = [%d, 8]}\n"
           "  %%p = matmul(%%r, %%w)\n"
           "  %%h = reshape(%%p) {shape = [2, %d, 2, 4]}\n"
           "  %%q = transpose(%%h) {perm = [0, 2, 1, 3]}\n"
           "  %%k = transpose(%%h) {perm = [0, 2, 3, 1]}\n"
           "  %%sc = matmul(%%q, %%k)\n"
           "  %%a = softmax(%%sc) {axis = -1}\n"
           "  %%o = matmul(%%a, %%q)\n"
           "  %%e = gather(%%t, %%ids) {axis = 0}\n"
           "  %%xe = add(%%x, %%e)\n"
           "  %%m = reduce_mean(%%xe) {axes = [1], keepdims = 0}\n"
           "  %%mx = reduce_max(%%x) {axes = [1], keepdims = 1}\n"
           "  %%cs = cumsum(%%x) {axis = 1}\n"
           "  return %%o, %%m, %%mx, %%cs\n"
           "}\n",
           s, s, 2 * s, s);
  Diag d = {0};
  Graph *g = dsl_parse("t.gir", text, strlen(text), &d);
  if (!g)
    fprintf(stderr, "%s\n", d.msg);
  CHECK(g != NULL);
  return g;
}

/* x at the class's size: along axis `axis`, positions < s from real, the rest `fill`. */
static Tensor *padded(const Tensor *real, int axis, double fill) {
  int64_t dims[IR_MAX_RANK];
  memcpy(dims, real->dims, sizeof dims);
  dims[axis] = M;
  Tensor *t = tensor_new(real->dtype, real->rank, dims);
  tensor_fill_value(t, fill);
  int64_t outer = 1, inner = 1, s = real->dims[axis];
  for (int j = 0; j < axis; j++)
    outer *= dims[j];
  for (int j = axis + 1; j < real->rank; j++)
    inner *= dims[j];
  size_t es = tensor_nbytes(real) / (size_t)tensor_numel(real);
  for (int64_t o = 0; o < outer; o++)
    memcpy((char *)t->data + (size_t)(o * M * inner) * es,
           (const char *)real->data + (size_t)(o * s * inner) * es, (size_t)(s * inner) * es);
  return t;
}

/* Whether element i of y (the class's output) is real: every tag of every axis in range. */
static bool real_element(const DynAxes *a, const Value *y, int64_t i, int s) {
  const Shape *sh = &y->type.shape;
  for (int j = sh->rank - 1; j >= 0; j--) {
    int64_t p = i % sh->dims[j].n;
    i /= sh->dims[j].n;
    const DynAxis *t = dyn_axis(a, y, j);
    for (int k = 0; t && k < DYN_AXIS_SYMS && t->t[k].sym >= 0; k++)
      if (p / t->t[k].stride % a->size[t->t[k].sym] >= s)
        return false;
  }
  return true;
}

static void test_every_size(void) {
  Graph *g = graph_at(M);
  if (!g)
    return;
  DynSeed seeds[] = {{"S", M, 0, 1, NULL}, {"S", M, 2, 1, NULL}};
  DynAxes a;
  Diag d = {0};
  CHECK(dyn_axes(g, seeds, 2, &a, &d) == 0);
  const Value *outs[4];
  for (int k = 0; k < 4; k++)
    outs[k] = g->outputs[k];
  CHECK(pass_pad_mask(g, &a, &d) == 0);
  if (d.msg[0])
    fprintf(stderr, "%s\n", d.msg);
  CHECK(ir_verify(g, &d) == 0);
  CHECK(g->ninputs == 5 && !strcmp(g->inputs[4]->name, "S.size"));
  /* the attention's probabilities reach the second matmul unmasked (their padding is
   * exactly 0 after the masked softmax); its values %q are masked */
  const Node *pv = outs[0]->def;
  CHECK(pv && pv->op == OP_MATMUL && !strcmp(pv->in[0]->name, "a"));
  CHECK(pv && pv->in[1]->def && pv->in[1]->def->op == OP_WHERE);
  for (int s = 1; s <= M && g->ninputs == 5; s++) {
    Graph *h = graph_at(s);
    if (!h)
      break;
    Tensor *in[5] = {0}, *pin[5] = {0}, *want[4] = {0}, *got[4] = {0};
    for (int i = 0; i < 4; i++) {
      Type t = h->inputs[i]->type;
      int64_t dims[IR_MAX_RANK];
      for (int j = 0; j < t.shape.rank; j++)
        dims[j] = t.shape.dims[j].n;
      in[i] = tensor_new(t.dtype, t.shape.rank, dims);
      tensor_fill_random(in[i], 10 + (uint64_t)i, t.dtype == DT_I64 ? 10 : 1);
    }
    /* %x's padding NaN, which a missing mask would spread; the ids' 0, a row of %t.
     * %w and %t are not ranged: the same tensors */
    pin[0] = padded(in[0], 1, NAN);
    pin[2] = padded(in[2], 1, 0);
    int64_t none[1] = {0};
    pin[4] = tensor_new(DT_I64, 0, none);
    ((int64_t *)pin[4]->data)[0] = s;
    Tensor *args[5] = {pin[0], in[1], pin[2], in[3], pin[4]};
    CHECK(ir_eval(h, in, want, &d) == 0);
    CHECK(ir_eval(g, args, got, &d) == 0);
    for (int k = 0; k < 4 && want[k] && got[k]; k++) {
      const float *w = want[k]->data, *y = got[k]->data;
      int64_t n = tensor_numel(got[k]), j = 0, bad = 0;
      for (int64_t i = 0; i < n; i++) {
        if (!real_element(&a, outs[k], i, s))
          continue;
        bool same = k == 1 ? fabsf(y[i] - w[j]) <= 1e-6f * fabsf(w[j])
                           : memcmp(&y[i], &w[j], sizeof *y) == 0;
        if (!same && bad++ < 3)
          fprintf(stderr, "s = %d, output %s: element %lld is %.9g, at size s %.9g\n", s,
                  outs[k]->name, (long long)i, y[i], w[j]);
        j++;
      }
      CHECK(bad == 0);
      CHECK(j == tensor_numel(want[k])); /* as many real positions as the exact output has */
    }
    for (int i = 0; i < 5; i++) {
      tensor_free(in[i]);
      tensor_free(pin[i]);
    }
    for (int k = 0; k < 4; k++) {
      tensor_free(want[k]);
      tensor_free(got[k]);
    }
    graph_free(h);
  }
  dyn_axes_free(&a);
  graph_free(g);
}

/* A concat along the ranged dim cannot be made exact: the error names the node. */
static void test_unsupported(void) {
  const char *text = "graph g(%x: f32[8, 4]) {\n"
                     "  %c = concat(%x, %x) {axis = 0}\n"
                     "  return %c\n"
                     "}\n";
  Diag d = {0};
  Graph *g = dsl_parse("t.gir", text, strlen(text), &d);
  DynSeed seed = {"S", M, 0, 0, NULL};
  DynAxes a;
  CHECK(g && dyn_axes(g, &seed, 1, &a, &d) == 0);
  CHECK(pass_pad_mask(g, &a, &d) != 0);
  CHECK(strstr(d.msg, "ranged dim 'S': node %c (concat)") != NULL);
  dyn_axes_free(&a);
  graph_free(g);
}

int main(void) {
  test_every_size();
  test_unsupported();
  if (failures)
    fprintf(stderr, "test_pad_mask: %d failed\n", failures);
  return failures != 0;
}
