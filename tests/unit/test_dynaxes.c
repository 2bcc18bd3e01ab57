/* Unit tests of ir/dynaxes.c: which axes carry a ranged symbol in a graph bound at a
 * class's sizes, and which nodes combine elements along them. The expected tags follow
 * from row-major order by hand (docs/dynamic-shapes.md, section 2). */
#include "frontends/frontends.h"
#include "ir/ir.h"
#include "tests/unit/check.h"

#include <string.h>

static Graph *parse(const char *text) {
  Diag d = {0};
  Graph *g = dsl_parse("t.gir", text, strlen(text), &d);
  if (!g)
    fprintf(stderr, "%s\n", d.msg);
  CHECK(g != NULL);
  return g;
}

static const Value *val(const Graph *g, const char *name) {
  const Value *v = graph_find_value((Graph *)g, name);
  CHECK(v != NULL);
  return v;
}

/* Whether axis `axis` of value `name` carries exactly the tags given: (sym, stride)
 * pairs, sym -1 ending the list. */
static bool tags(const DynAxes *a, const Graph *g, const char *name, int axis, int s0,
                 int64_t c0, int s1, int64_t c1) {
  const DynAxis *t = dyn_axis(a, val(g, name), axis);
  if (!t)
    return false;
  int want[2] = {s0, s1};
  int64_t stride[2] = {c0, c1};
  for (int k = 0; k < DYN_AXIS_SYMS; k++) {
    int s = k < 2 ? want[k] : -1;
    if (t->t[k].sym != s || (s >= 0 && t->t[k].stride != stride[k])) {
      fprintf(stderr, "%%%s axis %d: tag %d is (%d, %lld), expected (%d, %lld)\n", name, axis, k,
              t->t[k].sym, (long long)t->t[k].stride, s, (long long)(k < 2 ? stride[k] : 0));
      return false;
    }
  }
  return true;
}

/* The mix entry of the node that writes `out`, for symbol sym, or NULL. */
static const DynMix *mix_of(const DynAxes *a, const Graph *g, const char *out, int sym) {
  const Value *v = val(g, out);
  for (int i = 0; i < a->nmix; i++)
    if (a->mix[i].node == v->def && a->mix[i].sym == sym)
      return &a->mix[i];
  return NULL;
}

/* A transformer layer's shapes at B = 2, S = 8, 2 heads of 8: rows of batch and sequence
 * through the projection, heads split and transposed, the scores' softmax over the keys
 * and the second matmul's K along them. */
static void test_attention(void) {
  Graph *g = parse(
      "graph g(%x: f32[2, 8, 16], %w: f32[16, 16]) {\n"
      "  %r = reshape(%x) {shape = [16, 16]}\n"
      "  %p = matmul(%r, %w)\n"
      "  %h = reshape(%p) {shape = [2, 8, 2, 8]}\n"
      "  %q = transpose(%h) {perm = [0, 2, 1, 3]}\n"
      "  %k = transpose(%h) {perm = [0, 2, 3, 1]}\n"
      "  %s = matmul(%q, %k)\n"
      "  %a = softmax(%s) {axis = -1}\n"
      "  %o = matmul(%a, %q)\n"
      "  %m = reduce_mean(%x) {axes = [1], keepdims = 0}\n"
      "  return %o, %m\n"
      "}\n");
  if (!g)
    return;
  DynSeed seeds[] = {{"B", 2, 0, 0, NULL}, {"S", 8, 0, 1, NULL}};
  DynAxes a;
  Diag d = {0};
  CHECK(dyn_axes(g, seeds, 2, &a, &d) == 0);
  /* rows: b * 8 + s, so B with stride 8 and S with stride 1 */
  CHECK(tags(&a, g, "r", 0, 0, 8, 1, 1));
  CHECK(tags(&a, g, "r", 1, -1, 0, -1, 0));
  CHECK(tags(&a, g, "p", 0, 0, 8, 1, 1));
  CHECK(tags(&a, g, "h", 0, 0, 1, -1, 0));
  CHECK(tags(&a, g, "h", 1, 1, 1, -1, 0));
  CHECK(tags(&a, g, "h", 2, -1, 0, -1, 0));
  CHECK(tags(&a, g, "q", 2, 1, 1, -1, 0));
  CHECK(tags(&a, g, "k", 3, 1, 1, -1, 0));
  CHECK(tags(&a, g, "s", 0, 0, 1, -1, 0));
  CHECK(tags(&a, g, "s", 2, 1, 1, -1, 0));
  CHECK(tags(&a, g, "s", 3, 1, 1, -1, 0));
  CHECK(tags(&a, g, "o", 2, 1, 1, -1, 0));
  /* the first matmul's K is the hidden dim, the scores' the head dim: neither mixes */
  CHECK(mix_of(&a, g, "p", 1) == NULL && mix_of(&a, g, "s", 1) == NULL);
  const DynMix *sm = mix_of(&a, g, "a", 1), *pv = mix_of(&a, g, "o", 1);
  CHECK(sm && sm->need == DYN_MASK_NEG_INF && sm->axis == 3);
  CHECK(pv && pv->need == DYN_MASK_ZERO);
  const DynMix *mean = mix_of(&a, g, "m", 1);
  CHECK(mean && mean->need == DYN_MEAN && mean->axis == 1);
  CHECK(mix_of(&a, g, "m", 0) == NULL); /* the batch passes through the mean */
  CHECK(tags(&a, g, "m", 0, 0, 1, -1, 0));
  dyn_axes_free(&a);
  graph_free(g);
}

/* [S, H] flattened puts S at stride H; split back it is S at stride 1 again. A window
 * split of S (S = 8 into 2 x 4) cannot be described, nor a concat along S; an embedding
 * gather takes its ids' tags; a forward cumsum needs nothing, a reversed one zeros. */
static void test_reshapes_and_limits(void) {
  Graph *g = parse(
      "graph g(%x: f32[8, 4], %ids: i64[2, 8], %t: f32[100, 4]) {\n"
      "  %f = reshape(%x) {shape = [32]}\n"
      "  %b = reshape(%f) {shape = [8, 4]}\n"
      "  %win = reshape(%x) {shape = [2, 4, 4]}\n"
      "  %c = concat(%x, %x) {axis = 0}\n"
      "  %e = gather(%t, %ids) {axis = 0}\n"
      "  %cs = cumsum(%x) {axis = 0}\n"
      "  %rc = cumsum(%x) {axis = 0, reverse = 1}\n"
      "  return %b, %win, %c, %e, %cs, %rc\n"
      "}\n");
  if (!g)
    return;
  DynSeed seeds[] = {{"S", 8, 0, 0, NULL}, {"S", 8, 1, 1, NULL}};
  DynAxes a;
  Diag d = {0};
  CHECK(dyn_axes(g, seeds, 2, &a, &d) == 0);
  CHECK(a.nsyms == 1);
  CHECK(tags(&a, g, "f", 0, 0, 4, -1, 0));
  CHECK(tags(&a, g, "b", 0, 0, 1, -1, 0));
  CHECK(tags(&a, g, "b", 1, -1, 0, -1, 0));
  const DynMix *w = mix_of(&a, g, "win", 0), *c = mix_of(&a, g, "c", 0);
  CHECK(w && w->need == DYN_UNSUPPORTED);
  CHECK(c && c->need == DYN_UNSUPPORTED);
  CHECK(tags(&a, g, "e", 1, 0, 1, -1, 0));
  CHECK(tags(&a, g, "e", 0, -1, 0, -1, 0));
  CHECK(mix_of(&a, g, "e", 0) == NULL);
  CHECK(mix_of(&a, g, "cs", 0) == NULL);
  const DynMix *rc = mix_of(&a, g, "rc", 0);
  CHECK(rc && rc->need == DYN_MASK_ZERO);
  dyn_axes_free(&a);
  /* a seed must name an input axis of its size */
  DynSeed bad = {"S", 9, 0, 0, NULL};
  CHECK(dyn_axes(g, &bad, 1, &a, &d) != 0);
  graph_free(g);
}

/* A mask [B, S] flattened and gathered at constant indices [B, S] (seeded as a constant
 * whose shape follows the sizes): indices b * S + s send every position to itself and
 * are taken, the constant listed as proved; reversed keys (b * S + S - 1 - s) would read
 * padding into real positions and are not. B = 2, S = 4. */
static void test_gather_in_place(void) {
  Graph *g = parse(
      "graph g(%m: f32[2, 4]) {\n"
      "  %same = const i64[2, 4] [[0, 1, 2, 3], [4, 5, 6, 7]]\n"
      "  %rev = const i64[2, 4] [[3, 2, 1, 0], [7, 6, 5, 4]]\n"
      "  %f = reshape(%m) {shape = [8]}\n"
      "  %a = gather(%f, %same) {axis = 0}\n"
      "  %b = gather(%f, %rev) {axis = 0}\n"
      "  return %a, %b\n"
      "}\n");
  if (!g)
    return;
  const Value *same = val(g, "same"), *rev = val(g, "rev");
  DynSeed seeds[] = {{"B", 2, 0, 0, NULL}, {"S", 4, 0, 1, NULL}, {"B", 2, -1, 0, same},
                     {"S", 4, -1, 1, same}, {"B", 2, -1, 0, rev}, {"S", 4, -1, 1, rev}};
  DynAxes a;
  Diag d = {0};
  CHECK(dyn_axes(g, seeds, 6, &a, &d) == 0);
  CHECK(tags(&a, g, "f", 0, 0, 4, 1, 1));
  CHECK(mix_of(&a, g, "a", 0) == NULL && mix_of(&a, g, "a", 1) == NULL);
  CHECK(tags(&a, g, "a", 0, 0, 1, -1, 0));
  CHECK(tags(&a, g, "a", 1, 1, 1, -1, 0));
  CHECK(a.nexact == 1 && a.exact[0] == same);
  const DynMix *b = mix_of(&a, g, "b", 1);
  CHECK(b && b->need == DYN_UNSUPPORTED);
  dyn_axes_free(&a);
  graph_free(g);
}

/* A concat along S of one input and an empty one (a key cache with no past) is that input;
 * a class of size 1 has no padding, so its axes carry no tag, and a reshape that merges
 * such an axis puts no tag anywhere. */
static void test_empty_concat_and_size_one(void) {
  Graph *g = parse(
      "graph g(%x: f32[1, 8, 4], %past: f32[1, 0, 4]) {\n"
      "  %c = concat(%past, %x) {axis = 1}\n"
      "  %f = reshape(%c) {shape = [32]}\n"
      "  return %f\n"
      "}\n");
  if (!g)
    return;
  DynSeed seeds[] = {{"B", 1, 0, 0, NULL}, {"S", 8, 0, 1, NULL}};
  DynAxes a;
  Diag d = {0};
  CHECK(dyn_axes(g, seeds, 2, &a, &d) == 0);
  CHECK(tags(&a, g, "x", 0, -1, 0, -1, 0));
  CHECK(tags(&a, g, "c", 1, 1, 1, -1, 0));
  CHECK(mix_of(&a, g, "c", 1) == NULL);
  CHECK(tags(&a, g, "f", 0, 1, 4, -1, 0));
  dyn_axes_free(&a);
  graph_free(g);
}

int main(void) {
  test_attention();
  test_empty_concat_and_size_one();
  test_reshapes_and_limits();
  test_gather_in_place();
  if (failures)
    fprintf(stderr, "test_dynaxes: %d failed\n", failures);
  return failures != 0;
}
