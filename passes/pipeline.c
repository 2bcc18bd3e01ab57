/* pipeline.c: the pass manager. It knows every pass by name, parses pass lists, and runs
 * a list of passes with the verifier between them, so a broken pass is caught right after
 * it runs rather than three passes later. Each stage can be printed (--print-after-all)
 * and dumped to a file (--dump-ir) in the text form the DSL parser reads back. */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

const Pass *const pass_registry[] = {&pass_constfold,     &pass_simplify,    &pass_canonicalize,
                                     &pass_fold_affine,   &pass_dce,
                                     &pass_concat_gemms,  &pass_sink_reshapes,
                                     &pass_clone_masks,   &pass_precision,   &pass_layout,
                                     &pass_pad,           &pass_quantize,    &pass_fuse,
                                     NULL};
/* simplify leaves dead nodes to dce; canonicalize after simplify (which drops the casts
 * to f32 of f32 values around exported RMS norms), fold_affine after constfold and
 * simplify (which make constants of the weights that reach a convolution or GEMM through
 * transposes and identities); simplify, canonicalize and fold_affine rewrite what the
 * graph computes into fewer, canonical nodes for any backend, not for fusion alone, so
 * --no-fuse keeps them (it compares fusion alone, on the same canonical graph); dce runs
 * before the passes that count users;
 * precision runs after the passes that match f32 patterns, before fuse; layout after
 * precision (its GEMMs keep the convolutions' tf32 marks), and so does pad (it pads for the
 * GEMMs' types); quantize after both (layout's 1x1 convolutions are GEMMs it takes, and
 * it reads the widths pad made). */
const Pass *const pass_default_pipeline[] = {&pass_constfold,     &pass_simplify,
                                             &pass_canonicalize,  &pass_fold_affine,
                                             &pass_dce,
                                             &pass_concat_gemms,  &pass_sink_reshapes,
                                             &pass_clone_masks,   &pass_precision,   &pass_layout,
                                             &pass_pad,           &pass_quantize,    &pass_fuse,
                                             NULL};

const Pass *pass_lookup(const char *name) {
  for (int i = 0; pass_registry[i]; i++)
    if (!strcmp(pass_registry[i]->name, name))
      return pass_registry[i];
  return NULL;
}

/* "constfold, dce": for messages that tell the user what exists. */
static void known_passes(char *buf, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; pass_registry[i] && at < n; i++) {
    int k = snprintf(buf + at, n - at, "%s%s", i ? ", " : "", pass_registry[i]->name);
    if (k < 0)
      break;
    at += (size_t)k;
  }
}

int pass_parse_list(const char *list, const Pass **out, int max, Diag *d) {
  int count = 0;
  const char *p = list;
  if (!*p)
    return 0;
  for (;;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char name[64];
    const Pass *pass = NULL;
    if (len < sizeof name) {
      memcpy(name, p, len);
      name[len] = 0;
      pass = pass_lookup(name);
    }
    if (!pass) {
      char known[512];
      known_passes(known, sizeof known);
      if (!len)
        return diag_error(d, (SrcLoc){0}, "empty pass name in '%s' (known passes: %s)",
                          list, known);
      return diag_error(d, (SrcLoc){0}, "unknown pass '%.*s' (known passes: %s)",
                        (int)(len > 200 ? 200 : len), p, known);
    }
    if (count == max)
      return diag_error(d, (SrcLoc){0}, "too many passes in '%s' (at most %d)", list, max);
    out[count++] = pass;
    if (!end)
      return count;
    p = end + 1;
  }
}

/* Writes one stage to DIR/NN-NAME.gir (big constants to DIR/NN-NAME.safetensors, the
 * first time a stage has them: see ir_print_file). */
static int dump_stage(Graph *g, const char *dir, int index, const char *name,
                      Diag *d) {
  char path[4096];
  int k = snprintf(path, sizeof path, "%s/%02d-%s.%s", dir, index, name, "gir");
  if (k < 0 || (size_t)k >= sizeof path)
    return diag_error(d, (SrcLoc){0}, "path too long: '%s'", dir);
  return ir_print_file(g, path, d);
}

/* Prints and dumps one stage, as asked by ctx. */
static int emit_stage(Graph *g, PassContext *ctx, int index, const char *name) {
  if (ctx->print_after_all) {
    if (index == 0)
      fputs("// -----// IR Dump Input //----- //\n", ctx->print_after_all);
    else
      fprintf(ctx->print_after_all, "// -----// IR Dump After %s //----- //\n", name);
    ir_print(g, ctx->print_after_all);
    fflush(ctx->print_after_all);
  }
  if (ctx->dump_dir)
    return dump_stage(g, ctx->dump_dir, index, name, ctx->diag);
  return 0;
}

/* Verifies after a pass; on failure the verifier's message is kept whole (location,
 * source line, caret), with "after pass 'X': " put in front of its text so the user knows
 * which pass broke the graph. */
static int verify_after(const Graph *g, const Pass *p, Diag *d) {
  Diag v = {0};
  if (ir_verify(g, &v) == 0)
    return 0;
  if (!d || d->failed)
    return -1;
  const char *tag = "error: ";
  const char *at = strstr(v.msg, tag);
  size_t head = at ? (size_t)(at - v.msg) + strlen(tag) : 0;
  char buf[2 * sizeof d->msg];
  snprintf(buf, sizeof buf, "%.*s%safter pass '%s': %s", (int)head, v.msg,
           at ? "" : "error: ", p->name, v.msg + head);
  d->failed = true;
  memcpy(d->msg, buf, sizeof d->msg - 1);
  d->msg[sizeof d->msg - 1] = 0;
  return -1;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The kernels g would launch, as the report counts them: one per fuse group and one per
 * other node that computes (reshape-like nodes are aliases of their input). codegen's
 * count (gpucc -v) can be higher: a matmul whose batch dims no single stride walks is
 * several GEMMs, and a few ops take two kernels. -1 on out of memory. */
static int count_kernels(const Graph *g) {
  int *next = malloc(sizeof *next * (size_t)(g->nnodes + 1)), k = 0;
  if (!next || ir_fuse_groups(g, NULL, next)) {
    free(next);
    return -1;
  }
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    bool grouped = node_fuse_group(n) != 0;
    k += grouped ? next[i] < 0 : !(op_info[n->op].flags & OPF_ALIAS);
  }
  free(next);
  return k;
}

int pass_run_pipeline(Graph *g, const Pass *const *passes, int n, PassContext *ctx) {
  if (ir_verify(g, ctx->diag))
    return -1;
  if (ctx->dump_dir && make_dirs(ctx->dump_dir, ctx->diag))
    return -1;
  if (emit_stage(g, ctx, 0, "input"))
    return -1;
  int kernels = ctx->report ? count_kernels(g) : 0; /* before the next pass */
  if (kernels < 0)
    return diag_error(ctx->diag, g->loc, "out of memory");
  for (int i = 0; i < n; i++) {
    const Pass *p = passes[i];
    int before = ctx->changes;
    ctx->note[0] = 0;
    double t0 = now_ms();
    if (p->run(g, ctx))
      return -1;
    double ms = now_ms() - t0;
    if (verify_after(g, p, ctx->diag))
      return -1;
    if (ctx->report) {
      int after = count_kernels(g);
      if (after < 0)
        return diag_error(ctx->diag, g->loc, "out of memory");
      fprintf(ctx->report, "%s: %d changes, %.3f ms, kernels %d -> %d%s%s\n", p->name,
              ctx->changes - before, ms, kernels, after, ctx->note[0] ? "; " : "", ctx->note);
      fflush(ctx->report);
      kernels = after;
    }
    if (emit_stage(g, ctx, i + 1, p->name))
      return -1;
  }
  return 0;
}
