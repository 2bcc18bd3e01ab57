/* Unit tests of the memory plan (compiler/build.c) on every example and real test model:
 * buffers whose lifetimes overlap never share a byte, graph inputs and outputs share
 * with nothing, every offset is aligned, and the arena stays within 5% of its lower bound
 * (the most bytes live at any step), below the no-reuse sum. Also one plan worked out by
 * hand. */
#include "codegen/codegen.h"
#include "compiler/build.h"
#include "frontends/frontends.h"
#include "passes/passes.h"
#include "tests/unit/check.h"

#include <glob.h>
#include <stdlib.h>
#include <string.h>

static bool lives_overlap(const MemSlot *a, const MemSlot *b) {
  if (a->dedicated || b->dedicated)
    return true; /* an input or output is live throughout */
  return a->first <= b->last && b->first <= a->last;
}

static bool bytes_overlap(const MemSlot *a, const MemSlot *b) {
  return a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
}

/* The invariants of a plan; returns the arena's excess over its lower bound. */
static double check_plan(const char *what, const MemPlan *mp) {
  int bad = 0;
  for (int i = 0; i < mp->nslots; i++) {
    const MemSlot *a = &mp->slot[i];
    if (!a->v || a->root != a->v || a->region != GPUCC_REGION_ARENA || !a->bytes)
      continue;
    if (a->offset % GPUCC_ARENA_ALIGN || a->offset + a->bytes > mp->arena_bytes)
      bad++;
    for (int j = i + 1; j < mp->nslots; j++) {
      const MemSlot *b = &mp->slot[j];
      if (!b->v || b->root != b->v || b->region != GPUCC_REGION_ARENA || !b->bytes)
        continue;
      if (lives_overlap(a, b) && bytes_overlap(a, b)) {
        fprintf(stderr, "%s: %%%s and %%%s overlap\n", what, a->v->name, b->v->name);
        bad++;
      }
    }
  }
  CHECK(bad == 0);
  CHECK(mp->lower_bound <= mp->arena_bytes && mp->arena_bytes <= mp->naive_bytes);
  return (double)mp->arena_bytes / (double)mp->lower_bound - 1;
}

static void check_file(const char *path) {
  Diag d = {0};
  size_t n = strlen(path);
  Graph *g = n > 5 && !strcmp(path + n - 5, ".onnx") ? onnx_load(path, NULL, &d)
                                                     : dsl_parse_file(path, &d);
  const char *names[] = {"N"};
  int64_t sizes[] = {3};
  PassContext ctx = {.diag = &d};
  CHECK(g != NULL);
  if (!g) {
    fprintf(stderr, "%s\n", d.msg);
    return;
  }
  if (g->ninputs && g->inputs[0]->type.shape.rank && g->inputs[0]->type.shape.dims[0].sym)
    CHECK(codegen_bind_dims(g, names, sizes, 1, &d) == 0);
  CHECK(pass_run_pipeline(g, pass_default_pipeline, 3, &ctx) == 0);
  Program *p = codegen_graph(g, NULL, &d);
  CHECK(p != NULL);
  MemPlan mp;
  if (p && memplan_build(g, p, &mp, &d) == 0) {
    double over = check_plan(path, &mp);
    printf("%-48s arena %8llu bytes, lower bound %8llu (+%.2f%%), no reuse %9llu\n", path,
           (unsigned long long)mp.arena_bytes, (unsigned long long)mp.lower_bound, 100 * over,
           (unsigned long long)mp.naive_bytes);
    CHECK(over <= 0.05);
    memplan_free(&mp);
  } else {
    fprintf(stderr, "%s: %s\n", path, d.msg);
    CHECK(false);
  }
  program_free(p);
  graph_free(g);
}

/* Parses src, generates its program and plans it: true when all three worked (*g and
 * *p are the caller's to free either way; *mp only on success). */
static bool plan_of(const char *src, Graph **g, Program **p, MemPlan *mp) {
  Diag d = {0};
  *p = NULL;
  *g = dsl_parse("by-hand.gir", src, strlen(src), &d);
  if (*g)
    *p = codegen_graph(*g, NULL, &d);
  bool ok = *p && memplan_build(*g, *p, mp, &d) == 0;
  if (!ok)
    fprintf(stderr, "%s\n", d.msg);
  return ok;
}

/* The slot of the value named name. */
static const MemSlot *slot_named(const Graph *g, const MemPlan *mp, const char *name) {
  return &mp->slot[graph_find_value(g, name)->id];
}

/* a (1 KB) dies at step 1, where b (2 KB) is made; c (1 KB) is made at step 2 when b is
 * still live: c takes a's place, below b. */
static void check_by_hand(void) {
  const char *src = "graph h(%x: f32[256]) {\n"
                    "  %a = exp(%x)\n"
                    "  %b = concat(%a, %a) {axis = 0}\n"
                    "  %c = slice(%b) {starts = [0], ends = [256]}\n"
                    "  %y = add(%c, %x)\n"
                    "  return %y\n"
                    "}\n";
  Graph *g;
  Program *p;
  MemPlan mp;
  bool ok = plan_of(src, &g, &p, &mp);
  CHECK(ok);
  if (ok) {
    const MemSlot *x = slot_named(g, &mp, "x"), *y = slot_named(g, &mp, "y");
    const MemSlot *a = slot_named(g, &mp, "a"), *b = slot_named(g, &mp, "b");
    const MemSlot *c = slot_named(g, &mp, "c");
    CHECK(x->offset == 0 && y->offset == 1024); /* input, output: their own slots first */
    CHECK(b->offset == 2048);                   /* the largest intermediate, first placed */
    CHECK(a->offset == 4096 && c->offset == 4096); /* a and c never live at once */
    CHECK(mp.arena_bytes == 5120 && mp.lower_bound == 5120);
    check_plan("by hand", &mp);
    memplan_free(&mp);
  }
  program_free(p);
  graph_free(g);
}

/* In place: sin(a) cannot take a's buffer (add reads a later); add(a, b) can, as a dies
 * there, and relu(c) takes it on; the graph output (its own slot) never does. */
static void check_in_place(void) {
  const char *src = "graph ip(%x: f32[256]) {\n"
                    "  %a = exp(%x)\n"
                    "  %b = sin(%a)\n"
                    "  %c = add(%a, %b)\n"
                    "  %e = relu(%c)\n"
                    "  %y = neg(%e)\n"
                    "  return %y\n"
                    "}\n";
  Graph *g;
  Program *p;
  MemPlan mp;
  bool ok = plan_of(src, &g, &p, &mp);
  CHECK(ok);
  if (ok) {
    const MemSlot *a = slot_named(g, &mp, "a"), *b = slot_named(g, &mp, "b");
    const MemSlot *c = slot_named(g, &mp, "c"), *e = slot_named(g, &mp, "e");
    const MemSlot *y = slot_named(g, &mp, "y");
    CHECK(b->root == b->v);                       /* a is read again by c */
    CHECK(c->root == a->v && c->offset == a->offset); /* a dies at c: c takes it */
    CHECK(e->root == a->v && e->offset == a->offset); /* and e after c */
    CHECK(y->dedicated && y->offset != a->offset);    /* the output keeps its slot */
    CHECK(mp.in_place == 2);
    check_plan("in place", &mp);
    memplan_free(&mp);
  }
  program_free(p);
  graph_free(g);
}

int main(void) {
  check_by_hand();
  check_in_place();
  glob_t gl;
  const char *patterns[] = {"examples/*.gir", "tests/models/data/*.onnx"};
  for (int k = 0; k < 2; k++) {
    CHECK(glob(patterns[k], 0, NULL, &gl) == 0);
    for (size_t i = 0; i < gl.gl_pathc; i++)
      check_file(gl.gl_pathv[i]);
    globfree(&gl);
  }
  if (failures) fprintf(stderr, "test_memplan: %d checks failed\n", failures);
  return failures ? 1 : 0;
}
