/* test_plan.c: the runtime's plan format and model.so payload, on the CPU.
 *
 * Plans built with the builder, a fixed one and a ranged one (shape classes), are
 * serialized, read back and compared field by field; every truncation and every
 * single-bit flip of a valid plan must be rejected with a message, and random damage
 * with the checksum repaired (so the structural checks are what stands between the bytes
 * and the runtime) must be rejected or read back to a plan that serializes to the very
 * same bytes. A plan of several modules round-trips too, and plans of versions 4 and 5
 * (one module, the old MODULE layout) still read. Wrong plans are rejected naming what
 * is wrong. The payload writer is checked by reading its output
 * back with the trailer parser; the dlopen side is tests/gpu/test_model_so.c.
 */
#include "runtime/runtime-impl.h" /* the tuning cache (tunecache.c) */
#include "check.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* ---------------------------------------------------------------- a plan with everything */

static const unsigned char cubin[] = {0x7f, 'E', 'L', 'F', 1, 2, 3, 0, 0xff};
static const char ptx[] = ".version 8.0\n.target sm_90\n// k0_scale\n";

static GpuccGemm sample_gemm(void) {
  /* C[2x4] = A[2x3] @ B[3x4] row-major, batch 2, B broadcast: cuBLASLt's A is B^T. */
  GpuccGemm g = {0};
  g.a = gpucc_weights_ptr(64);
  g.b = gpucc_arena_ptr(256);
  g.c = g.d = gpucc_arena_ptr(512);
  g.a_type = g.b_type = g.cd_type = GPUCC_DT_F32;
  g.compute = GPUCC_COMPUTE_32F;
  g.m = 4, g.n = 2, g.k = 3;
  g.lda = 4, g.ldb = 3, g.ldc = 4, g.ldd = 4;
  g.batch = 2, g.stride_a = 0, g.stride_b = 6, g.stride_c = 8, g.stride_d = 8;
  g.alpha = 1.5, g.beta = -0.25;
  g.epilogue = GPUCC_EPILOGUE_GELU_BIAS, g.bias = gpucc_weights_ptr(128); /* 4 floats: one per row of D */
  return g;
}

static GpuccPlan *sample_plan(void) {
  GpuccPlan *p = gpucc_plan_new(4096, 1024, 1 << 20);
  CHECK(p != NULL);
  CHECK(gpucc_plan_set_module(p, cubin, sizeof cubin, ptx) == GPUCC_OK);
  int64_t xdims[] = {2, 3}, ydims[] = {2, 2, 4};
  CHECK(gpucc_plan_add_input(p, "x", GPUCC_DT_F32, 2, xdims, 0) == GPUCC_OK);
  CHECK(gpucc_plan_add_input(p, "ids", GPUCC_DT_I64, 0, NULL, 1024) == GPUCC_OK);
  CHECK(gpucc_plan_add_output(p, "y", GPUCC_DT_F32, 3, ydims, 512) == GPUCC_OK);
  GpuccArg args[] = {gpucc_ptr_arg(gpucc_arena_ptr(0)), gpucc_ptr_arg(gpucc_weights_ptr(1024)),
                     gpucc_scalar_arg(0xfedcba9876543210ull)};
  uint32_t grid[3] = {7, 2, 1}, block[3] = {256, 1, 1};
  CHECK(gpucc_plan_add_kernel(p, "k0_scale", grid, block, 64, args, 3) == GPUCC_OK);
  GpuccGemm g = sample_gemm();
  CHECK(gpucc_plan_add_gemm(p, &g) == GPUCC_OK);
  CHECK(gpucc_plan_add_copy(p, gpucc_arena_ptr(2048), gpucc_weights_ptr(0), 128) == GPUCC_OK);
  CHECK(gpucc_plan_add_memset(p, gpucc_arena_ptr(3000), 96, 0xab) == GPUCC_OK);
  /* Two variants of one GEMM: a kernel, or cuBLASLt. */
  uint32_t count[2] = {1, 1};
  CHECK(gpucc_plan_add_choice(p, "k0_scale or cublaslt", 2, count) == GPUCC_OK);
  CHECK(gpucc_plan_add_kernel(p, "k0_scale", grid, block, 0, args, 3) == GPUCC_OK);
  CHECK(gpucc_plan_add_gemm(p, &g) == GPUCC_OK);
  return p;
}

/* A ranged plan: batch = 1..4 (rows: GPUCC_SYMBOL_ROWS) and seq = 1, 8..16 (a point and a
 * range); inputs ids i64[batch, seq] and x f32[batch, 3], output y f32[batch, seq, 2]; classes at (1, 1),
 * (2, 16) and (4, 16), the first reading no batch size, each with steps of its own: a
 * kernel; a GEMM, a copy and a choice; a memset. Slots at a class's dims:
 *   class    ids       x        y         batch  seq   arena
 *   (1, 1)   8 @0      12 @256  8 @512    -      768   1024
 *   (2, 16)  256 @0    24 @256  256 @512  768    776   1024
 *   (4, 16)  512 @0    48 @512  512 @1024 1536   1544  2048 */
static GpuccPlan *ranged_plan(void) {
  GpuccPlan *p = gpucc_plan_new(4096, 1024, 1 << 20);
  CHECK(p != NULL);
  CHECK(gpucc_plan_set_module(p, cubin, sizeof cubin, ptx) == GPUCC_OK);
  int64_t ids[] = {4, 16}, x[] = {4, 3}, y[] = {4, 16, 2};
  CHECK(gpucc_plan_add_input(p, "ids", GPUCC_DT_I64, 2, ids, 0) == GPUCC_OK);
  CHECK(gpucc_plan_add_input(p, "x", GPUCC_DT_F32, 2, x, 0) == GPUCC_OK);
  CHECK(gpucc_plan_add_output(p, "y", GPUCC_DT_F32, 3, y, 0) == GPUCC_OK);
  int64_t blo[] = {1}, bhi[] = {4}, slo[] = {1, 8}, shi[] = {1, 16};
  CHECK(gpucc_plan_add_symbol(p, "batch", 1, blo, bhi) == GPUCC_OK);
  CHECK(gpucc_plan_add_symbol(p, "seq", 2, slo, shi) == GPUCC_OK);
  CHECK(gpucc_plan_set_symbol_flags(p, 0, GPUCC_SYMBOL_ROWS) == GPUCC_OK);
  CHECK(gpucc_plan_set_axis_symbol(p, 0, 0, 0, 0) == GPUCC_OK);
  CHECK(gpucc_plan_set_axis_symbol(p, 0, 0, 1, 1) == GPUCC_OK);
  CHECK(gpucc_plan_set_axis_symbol(p, 0, 1, 0, 0) == GPUCC_OK);
  CHECK(gpucc_plan_set_axis_symbol(p, 1, 0, 0, 0) == GPUCC_OK);
  CHECK(gpucc_plan_set_axis_symbol(p, 1, 0, 1, 1) == GPUCC_OK);

  GpuccArg args[] = {gpucc_ptr_arg(gpucc_arena_ptr(0)), gpucc_ptr_arg(gpucc_arena_ptr(768)),
                     gpucc_scalar_arg(7)};
  uint32_t grid[3] = {1, 1, 1}, block[3] = {64, 1, 1}, count[2] = {1, 1};
  int64_t b0[] = {1, 1}, b1[] = {2, 16}, b2[] = {4, 16};
  uint64_t in0[] = {0, 256}, out0[] = {512}, size0[] = {GPUCC_NO_OFFSET, 768};
  uint64_t in1[] = {0, 256}, out1[] = {512}, size1[] = {768, 776};
  uint64_t in2[] = {0, 512}, out2[] = {1024}, size2[] = {1536, 1544};
  CHECK(gpucc_plan_add_class(p, b0, 1024, in0, out0, size0) == GPUCC_OK);
  CHECK(gpucc_plan_add_kernel(p, "k0_scale", grid, block, 0, args, 3) == GPUCC_OK);
  CHECK(gpucc_plan_add_class(p, b1, 1024, in1, out1, size1) == GPUCC_OK);
  GpuccGemm g = sample_gemm();
  CHECK(gpucc_plan_add_gemm(p, &g) == GPUCC_OK);
  CHECK(gpucc_plan_add_copy(p, gpucc_arena_ptr(512), gpucc_arena_ptr(0), 256) == GPUCC_OK);
  CHECK(gpucc_plan_add_choice(p, "k0_scale or cublaslt", 2, count) == GPUCC_OK);
  CHECK(gpucc_plan_add_kernel(p, "k0_scale", grid, block, 0, args, 3) == GPUCC_OK);
  CHECK(gpucc_plan_add_gemm(p, &g) == GPUCC_OK);
  CHECK(gpucc_plan_add_class(p, b2, 2048, in2, out2, size2) == GPUCC_OK);
  CHECK(gpucc_plan_add_memset(p, gpucc_arena_ptr(1024), 512, 0) == GPUCC_OK);
  return p;
}

static bool same_ptr(GpuccPtr a, GpuccPtr b) { return a.region == b.region && a.offset == b.offset; }

static void check_same_tensor(const GpuccTensorInfo *a, const GpuccTensorInfo *b) {
  CHECK(!strcmp(a->name, b->name));
  CHECK(a->dtype == b->dtype && a->rank == b->rank && a->offset == b->offset);
  for (int i = 0; i < a->rank; i++) CHECK(a->dims[i] == b->dims[i] && a->sym[i] == b->sym[i]);
}

static void check_same_steps(const GpuccStep *as, int na, const GpuccStep *bs, int nb) {
  CHECK(na == nb);
  for (int i = 0; i < na && i < nb; i++) {
    const GpuccStep *s = &as[i], *t = &bs[i];
    CHECK(s->kind == t->kind);
    if (s->kind != t->kind) continue;
    switch (s->kind) {
    case GPUCC_STEP_KERNEL:
      CHECK(!strcmp(s->kernel.name, t->kernel.name));
      CHECK(!memcmp(s->kernel.grid, t->kernel.grid, sizeof s->kernel.grid));
      CHECK(!memcmp(s->kernel.block, t->kernel.block, sizeof s->kernel.block));
      CHECK(s->kernel.shared_bytes == t->kernel.shared_bytes && s->kernel.nargs == t->kernel.nargs);
      for (int j = 0; j < s->kernel.nargs && j < t->kernel.nargs; j++) {
        const GpuccArg *x = &s->kernel.args[j], *y = &t->kernel.args[j];
        CHECK(x->kind == y->kind);
        if (x->kind == GPUCC_ARG_PTR) CHECK(same_ptr(x->ptr, y->ptr));
        else CHECK(x->scalar == y->scalar);
      }
      break;
    case GPUCC_STEP_GEMM: {
      const GpuccGemm *g = &s->gemm, *h = &t->gemm;
      CHECK(same_ptr(g->a, h->a) && same_ptr(g->b, h->b) && same_ptr(g->c, h->c) &&
            same_ptr(g->d, h->d));
      CHECK(g->a_type == h->a_type && g->b_type == h->b_type && g->cd_type == h->cd_type);
      CHECK(g->compute == h->compute && g->trans_a == h->trans_a && g->trans_b == h->trans_b);
      CHECK(g->m == h->m && g->n == h->n && g->k == h->k);
      CHECK(g->epilogue == h->epilogue && same_ptr(g->bias, h->bias));
      CHECK(g->lda == h->lda && g->ldb == h->ldb && g->ldc == h->ldc && g->ldd == h->ldd);
      CHECK(g->batch == h->batch && g->stride_a == h->stride_a && g->stride_b == h->stride_b &&
            g->stride_c == h->stride_c && g->stride_d == h->stride_d);
      CHECK(g->alpha == h->alpha && g->beta == h->beta);
      break;
    }
    case GPUCC_STEP_COPY:
      CHECK(same_ptr(s->copy.dst, t->copy.dst) && same_ptr(s->copy.src, t->copy.src) &&
            s->copy.bytes == t->copy.bytes);
      break;
    case GPUCC_STEP_MEMSET:
      CHECK(same_ptr(s->fill.dst, t->fill.dst) && s->fill.bytes == t->fill.bytes &&
            s->fill.value == t->fill.value);
      break;
    case GPUCC_STEP_CHOICE:
      CHECK(!strcmp(s->choice.label, t->choice.label));
      CHECK(s->choice.nvariants == t->choice.nvariants);
      for (int v = 0; v < s->choice.nvariants && v < t->choice.nvariants; v++)
        CHECK(s->choice.count[v] == t->choice.count[v]);
      break;
    }
  }
}

static void check_same_plan(const GpuccPlan *a, const GpuccPlan *b) {
  CHECK(a->arena_bytes == b->arena_bytes && a->weights_bytes == b->weights_bytes &&
        a->workspace_bytes == b->workspace_bytes);
  CHECK(a->nmodules == b->nmodules);
  for (int i = 0; i < a->nmodules && i < b->nmodules; i++) {
    const GpuccModule *x = &a->modules[i], *y = &b->modules[i];
    CHECK(x->cubin_len == y->cubin_len && (!x->cubin) == (!y->cubin));
    CHECK(!x->cubin_len || !memcmp(x->cubin, y->cubin, x->cubin_len));
    CHECK(x->ptx_len == y->ptx_len && (!x->ptx) == (!y->ptx) && (!x->ptx || !strcmp(x->ptx, y->ptx)));
  }
  CHECK(a->ninputs == b->ninputs && a->noutputs == b->noutputs);
  for (int i = 0; i < a->ninputs && i < b->ninputs; i++) check_same_tensor(&a->inputs[i], &b->inputs[i]);
  for (int i = 0; i < a->noutputs && i < b->noutputs; i++) check_same_tensor(&a->outputs[i], &b->outputs[i]);
  check_same_steps(a->steps, a->nsteps, b->steps, b->nsteps);
  CHECK(a->nsyms == b->nsyms && a->nclasses == b->nclasses);
  for (int k = 0; k < a->nsyms && k < b->nsyms; k++) {
    const GpuccSymbol *s = &a->syms[k], *t = &b->syms[k];
    CHECK(!strcmp(s->name, t->name) && s->flags == t->flags && s->npieces == t->npieces);
    for (int i = 0; i < s->npieces && i < t->npieces; i++)
      CHECK(s->lo[i] == t->lo[i] && s->hi[i] == t->hi[i]);
  }
  for (int c = 0; c < a->nclasses && c < b->nclasses && a->nsyms == b->nsyms; c++) {
    const GpuccClass *x = &a->classes[c], *y = &b->classes[c];
    CHECK(x->arena_bytes == y->arena_bytes);
    for (int k = 0; k < a->nsyms; k++)
      CHECK(x->bound[k] == y->bound[k] && x->size_offset[k] == y->size_offset[k]);
    for (int i = 0; i < a->ninputs && a->ninputs == b->ninputs; i++)
      CHECK(x->input_offset[i] == y->input_offset[i]);
    for (int i = 0; i < a->noutputs && a->noutputs == b->noutputs; i++)
      CHECK(x->output_offset[i] == y->output_offset[i]);
    check_same_steps(x->steps, x->nsteps, y->steps, y->nsteps);
  }
}

/* ---------------------------------------------------------------- round trip */

static uint64_t rd64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static void wr64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* FNV-1a 64 written out again here, checked against the published vectors below, so the
 * test does not trust the runtime's own. */
static uint64_t fnv(const unsigned char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* Makes a damaged plan's header agree with its body again. */
static void fix_header(unsigned char *b, size_t len) {
  wr64(b + 16, len - 32);
  wr64(b + 24, fnv(b + 32, len - 32));
}

/* The first byte of section `tag`'s payload in a serialized plan. */
static size_t section_at(const unsigned char *b, uint32_t tag) {
  size_t pos = 32;
  for (uint32_t t = 1; t < tag; t++) pos += 16 + (size_t)rd64(b + pos + 8);
  return pos + 16;
}

/* Plan b with its MODULE section's payload replaced by the n bytes at mod, the section's
 * length and the header made to agree: malloc'd, *out_len bytes. */
static unsigned char *with_module_section(const unsigned char *b, size_t len,
                                          const unsigned char *mod, size_t n, size_t *out_len) {
  size_t at = section_at(b, 2), old = (size_t)rd64(b + at - 8);
  *out_len = len - old + n;
  unsigned char *out = malloc(*out_len);
  memcpy(out, b, at);
  memcpy(out + at, mod, n);
  memcpy(out + at + n, b + at + old, len - at - old);
  wr64(out + at - 8, n);
  fix_header(out, *out_len);
  return out;
}

/* Version 6 bytes of a plan of one module or none as version 4 or 5 writes them: MODULE
 * without its count, both lengths 0 for no module. */
static unsigned char *as_old_version(const unsigned char *b, size_t len, unsigned char version,
                                     size_t *out_len) {
  size_t at = section_at(b, 2);
  static const unsigned char none[16] = {0};
  unsigned char *out = b[at] == 0 ? with_module_section(b, len, none, sizeof none, out_len)
                                  : with_module_section(b, len, b + at + 4,
                                                        (size_t)rd64(b + at - 8) - 4, out_len);
  CHECK(b[at] <= 1 && !b[at + 1] && !b[at + 2] && !b[at + 3]);
  out[8] = version;
  return out;
}

static void test_round_trip(void) {
  CHECK(fnv((const unsigned char *)"", 0) == 0xcbf29ce484222325ull);
  CHECK(fnv((const unsigned char *)"a", 1) == 0xaf63dc4c8601ec8cull);

  GpuccPlan *p = sample_plan();
  void *bytes = NULL;
  size_t len = 0;
  CHECK(gpucc_plan_serialize(p, &bytes, &len) == GPUCC_OK);
  const unsigned char *b = bytes;
  CHECK(len > 32 && !memcmp(b, "GPUCCPLN", 8));
  CHECK(b[8] == 6 && b[9] == 0 && b[10] == 0 && b[11] == 0); /* version 6, little-endian */
  CHECK(b[12] == 5);                                          /* five sections: fixed */
  CHECK(rd64(b + 16) == len - 32 && rd64(b + 24) == fnv(b + 32, len - 32));

  GpuccPlan *q = NULL;
  CHECK(gpucc_plan_parse(bytes, len, &q) == GPUCC_OK);
  if (q) {
    check_same_plan(p, q);
    void *again = NULL;
    size_t again_len = 0;
    CHECK(gpucc_plan_serialize(q, &again, &again_len) == GPUCC_OK);
    CHECK(again_len == len && !memcmp(again, bytes, len));
    free(again);
  }
  /* Spot checks against the values written above, not against p. */
  if (q) {
    CHECK(q->inputs[1].rank == 0 && q->inputs[1].dtype == GPUCC_DT_I64);
    CHECK(q->steps[0].kernel.args[2].scalar == 0xfedcba9876543210ull);
    CHECK(q->steps[1].gemm.alpha == 1.5 && q->steps[1].gemm.stride_a == 0);
    CHECK(q->steps[3].fill.value == 0xab);
    CHECK(q->nsteps == 7 && q->steps[4].choice.nvariants == 2 && q->steps[4].choice.count[1] == 1);
  }
  gpucc_plan_free(q);
  gpucc_plan_free(p);
  free(bytes);

  /* An empty plan is valid too. */
  p = gpucc_plan_new(0, 0, 0);
  CHECK(gpucc_plan_serialize(p, &bytes, &len) == GPUCC_OK);
  CHECK(gpucc_plan_parse(bytes, len, &q) == GPUCC_OK);
  CHECK(q && q->nsteps == 0 && q->ninputs == 0 && q->nmodules == 0);
  gpucc_plan_free(q);
  gpucc_plan_free(p);
  free(bytes);
}

/* Serializes p (freeing it) into *len bytes. */
static unsigned char *bytes_of(GpuccPlan *p, size_t *len) {
  void *bytes = NULL;
  GpuccStatus st = gpucc_plan_serialize(p, &bytes, len);
  if (st) fprintf(stderr, "serialize: %s\n", gpucc_last_error());
  CHECK(st == GPUCC_OK);
  gpucc_plan_free(p);
  return bytes;
}

static void test_ranged_round_trip(void) {
  GpuccPlan *p = ranged_plan();
  void *bytes = NULL;
  size_t len = 0;
  CHECK(gpucc_plan_serialize(p, &bytes, &len) == GPUCC_OK);
  const unsigned char *b = bytes;
  CHECK(len > 32 && b[8] == 6 && b[12] == 7); /* version 6, seven sections */
  GpuccPlan *q = NULL;
  CHECK(gpucc_plan_parse(bytes, len, &q) == GPUCC_OK);
  if (q) {
    check_same_plan(p, q);
    size_t again_len = 0;
    unsigned char *again = bytes_of(q, &again_len);
    CHECK(again_len == len && !memcmp(again, bytes, len));
    free(again);
  }
  /* Spot checks against the values written in ranged_plan, not against p. */
  CHECK(gpucc_plan_parse(bytes, len, &q) == GPUCC_OK);
  if (q) {
    CHECK(q->nsyms == 2 && !strcmp(q->syms[1].name, "seq") && q->syms[1].npieces == 2);
    CHECK(q->syms[1].lo[1] == 8 && q->syms[1].hi[1] == 16);
    CHECK(q->syms[0].flags == GPUCC_SYMBOL_ROWS && q->syms[1].flags == 0);
    CHECK(q->inputs[0].sym[0] == 0 && q->inputs[0].sym[1] == 1 && q->inputs[1].sym[1] == -1);
    CHECK(q->outputs[0].sym[1] == 1 && q->outputs[0].sym[2] == -1);
    CHECK(q->nsteps == 0 && q->nclasses == 3);
    CHECK(q->classes[0].size_offset[0] == GPUCC_NO_OFFSET && q->classes[0].size_offset[1] == 768);
    CHECK(q->classes[1].bound[1] == 16 && q->classes[1].nsteps == 5);
    CHECK(q->classes[1].steps[1].kind == GPUCC_STEP_COPY && q->classes[1].steps[1].copy.bytes == 256);
    CHECK(q->classes[2].output_offset[0] == 1024 && q->classes[2].arena_bytes == 2048);
    CHECK(q->classes[2].nsteps == 1 && q->classes[2].steps[0].kind == GPUCC_STEP_MEMSET);
  }
  gpucc_plan_free(q);
  gpucc_plan_free(p);
  free(bytes);
}

/* ---------------------------------------------------------------- damage */

static void expect_rejected(const void *b, size_t len, const char *what, size_t at) {
  GpuccPlan *q = (GpuccPlan *)1;
  GpuccStatus st = gpucc_plan_parse(b, len, &q);
  if (st != GPUCC_ERR_BAD_PLAN || q != NULL || !gpucc_last_error()[0])
    fprintf(stderr, "%s at %zu: status %d, last error '%s'\n", what, at, (int)st, gpucc_last_error());
  CHECK(st == GPUCC_ERR_BAD_PLAN && q == NULL && gpucc_last_error()[0]);
}

static void test_damage(GpuccPlan *p) {
  size_t len = 0;
  unsigned char *bytes = bytes_of(p, &len);
  unsigned char *copy = malloc(len);

  /* Every truncation, as is and with the header repaired to match. */
  for (size_t n = 0; n < len; n++) {
    memcpy(copy, bytes, n);
    expect_rejected(copy, n, "truncated", n);
    if (n >= 32) {
      fix_header(copy, n);
      expect_rejected(copy, n, "truncated, header repaired", n);
    }
  }
  /* Every single-bit flip: the checksum or the header catches each one. The version is
   * outside the checksum, but a flip of 6 gives 7, 4 or 2: unknown, or version 4 (a
   * ranged plan's seven sections, or a MODULE section without the old layout). */
  for (size_t i = 0; i < len * 8; i++) {
    memcpy(copy, bytes, len);
    copy[i / 8] ^= (unsigned char)(1u << (i % 8));
    expect_rejected(copy, len, "bit flip", i);
  }
  /* Random damage with the checksum repaired: rejected, or a valid plan that reads back to
   * the same bytes. Either way no crash (ASan is watching). */
  uint64_t seed = 12345;
  int accepted = 0;
  for (int trial = 0; trial < 20000; trial++) {
    memcpy(copy, bytes, len);
    int flips = 1 + trial % 4;
    for (int f = 0; f < flips; f++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      size_t bit = (size_t)(seed >> 33) % ((len - 32) * 8);
      copy[32 + bit / 8] ^= (unsigned char)(1u << (bit % 8));
    }
    fix_header(copy, len);
    GpuccPlan *q = NULL;
    if (gpucc_plan_parse(copy, len, &q) == GPUCC_OK) {
      accepted++;
      void *again = NULL;
      size_t again_len = 0;
      CHECK(gpucc_plan_serialize(q, &again, &again_len) == GPUCC_OK);
      CHECK(again_len == len && !memcmp(again, copy, len));
      free(again);
      gpucc_plan_free(q);
    } else {
      CHECK(q == NULL && gpucc_last_error()[0]);
    }
  }
  /* Flips in the cubin and the PTX comment stay valid; most others must not. */
  CHECK(accepted > 0 && accepted < 20000 / 2);

  /* Sections out of order: the second one's tag made the third's. */
  memcpy(copy, bytes, len);
  size_t second = 32 + 16 + (size_t)rd64(copy + 32 + 8);
  copy[second] = 3;
  fix_header(copy, len);
  expect_rejected(copy, len, "sections out of order", 0);
  CHECK(strstr(gpucc_last_error(), "section 1 has tag 3, not 2 (MODULE)") != NULL);

  /* A plan of another version (1: before the GEMM bias), and trailing bytes. */
  memcpy(copy, bytes, len);
  copy[8] = 1;
  expect_rejected(copy, len, "version 1", 0);
  CHECK(strstr(gpucc_last_error(), "version 1") != NULL);
  unsigned char *longer = malloc(len + 8);
  memcpy(longer, bytes, len);
  memset(longer + len, 0, 8);
  fix_header(longer, len + 8);
  expect_rejected(longer, len + 8, "trailing bytes", len);
  CHECK(strstr(gpucc_last_error(), "after the last section") != NULL);
  free(longer);
  free(copy);
  free(bytes);
}

/* ---------------------------------------------------------------- wrong plans */

/* Serializing p must fail with BAD_PLAN and a message containing want. */
static void expect_invalid(GpuccPlan *p, const char *want, int line) {
  void *bytes = NULL;
  size_t len = 0;
  GpuccStatus st = gpucc_plan_serialize(p, &bytes, &len);
  if (st != GPUCC_ERR_BAD_PLAN || !strstr(gpucc_last_error(), want)) {
    fprintf(stderr, "line %d: status %d, message '%s', wanted '%s'\n", line, (int)st,
            gpucc_last_error(), want);
    failures++;
  }
  CHECK(bytes == NULL);
  free(bytes);
  gpucc_plan_free(p);
}
#define EXPECT_INVALID(p, want) expect_invalid(p, want, __LINE__)

static GpuccPlan *with_gemm(GpuccGemm g) {
  GpuccPlan *p = gpucc_plan_new(4096, 1024, 0);
  gpucc_plan_add_gemm(p, &g);
  return p;
}

static void test_invalid(void) {
  int64_t dims[] = {1000, 2};
  GpuccPlan *p = gpucc_plan_new(4096, 0, 0);
  gpucc_plan_add_input(p, "x", GPUCC_DT_F32, 2, dims, 0); /* 8000 bytes in 4096 */
  EXPECT_INVALID(p, "input 'x': 8000 bytes at arena offset 0 run past the arena (4096 bytes)");

  p = gpucc_plan_new(4096, 0, 0);
  int64_t small[] = {4};
  gpucc_plan_add_output(p, "y", GPUCC_DT_F32, 1, small, 4096 - 8);
  EXPECT_INVALID(p, "output 'y': 16 bytes at arena offset 4088");

  p = gpucc_plan_new(4096, 0, 0);
  gpucc_plan_add_input(p, "x", GPUCC_DT_F32, 1, small, 0);
  gpucc_plan_add_input(p, "x", GPUCC_DT_F32, 1, small, 64);
  EXPECT_INVALID(p, "two inputs named 'x'");

  /* among many outputs (the names are checked by sorting them), far apart */
  p = gpucc_plan_new(4096, 0, 0);
  char name[32];
  for (int i = 0; i < 20000; i++) {
    snprintf(name, sizeof name, "y%d", i == 19999 ? 17 : i);
    gpucc_plan_add_output(p, name, GPUCC_DT_F32, 1, small, 64);
  }
  EXPECT_INVALID(p, "two outputs named 'y17'");

  p = gpucc_plan_new(4096, 0, 0);
  gpucc_plan_add_input(p, "x", GPUCC_DT_F32, 1, small, 2);
  EXPECT_INVALID(p, "not a multiple of 4");

  int64_t neg[] = {-1};
  p = gpucc_plan_new(4096, 0, 0);
  gpucc_plan_add_input(p, "x", GPUCC_DT_F32, 1, neg, 0);
  EXPECT_INVALID(p, "negative dim");

  p = gpucc_plan_new(4096, 0, 0);
  gpucc_plan_add_input(p, "x", (GpuccDType)99, 1, small, 0);
  EXPECT_INVALID(p, "bad dtype 99");

  uint32_t grid[3] = {1, 1, 1}, block[3] = {128, 1, 1};
  GpuccArg past = gpucc_ptr_arg(gpucc_weights_ptr(1025));
  p = gpucc_plan_new(4096, 1024, 0);
  gpucc_plan_set_module(p, NULL, 0, ptx);
  gpucc_plan_add_kernel(p, "k", grid, block, 0, &past, 1);
  EXPECT_INVALID(p, "step 0 (kernel 'k') argument 0: 0 bytes at weights offset 1025");

  p = gpucc_plan_new(4096, 0, 0);
  gpucc_plan_add_kernel(p, "k", grid, block, 0, NULL, 0);
  EXPECT_INVALID(p, "kernel steps but no module");

  p = gpucc_plan_new(4096, 0, 0);
  gpucc_plan_set_module(p, NULL, 0, ptx);
  gpucc_plan_add_kernel(p, "k-1", grid, block, 0, NULL, 0);
  EXPECT_INVALID(p, "not a C identifier");

  uint32_t big[3] = {2048, 1, 1};
  p = gpucc_plan_new(4096, 0, 0);
  gpucc_plan_set_module(p, NULL, 0, ptx);
  gpucc_plan_add_kernel(p, "k", grid, big, 0, NULL, 0);
  EXPECT_INVALID(p, "block (2048,1,1) out of range");

  uint32_t zero[3] = {0, 1, 1};
  p = gpucc_plan_new(4096, 0, 0);
  gpucc_plan_set_module(p, NULL, 0, ptx);
  gpucc_plan_add_kernel(p, "k", zero, block, 0, NULL, 0);
  EXPECT_INVALID(p, "grid (0,1,1) out of range");

  /* GEMM extents: the sample GEMM fits exactly; one more element of anything does not. */
  GpuccGemm g = sample_gemm();
  GpuccPlan *ok = with_gemm(g);
  void *bytes = NULL;
  size_t len = 0;
  CHECK(gpucc_plan_serialize(ok, &bytes, &len) == GPUCC_OK);
  free(bytes);
  gpucc_plan_free(ok);

  g = sample_gemm();
  g.a = gpucc_weights_ptr(1024 - 4 * 3 * 4 + 4); /* A is 4x3 f32 = 48 bytes */
  EXPECT_INVALID(with_gemm(g), "A [4x3, ld 4, batch 2, stride 0]: 48 bytes at weights offset 980 run past the weights (1024 bytes)");
  g = sample_gemm();
  g.b = gpucc_arena_ptr(4096 - (6 + 6) * 4 + 4); /* two 3x2 batches, 6 apart */
  EXPECT_INVALID(with_gemm(g), "B [3x2, ld 3, batch 2, stride 6]: 48 bytes at arena offset 4052");
  g = sample_gemm();
  g.lda = 3;
  EXPECT_INVALID(with_gemm(g), "lda 3 is less than its 4 rows");
  g = sample_gemm();
  g.trans_a = 1; /* A stored 3x4 now: lda 4 >= 3 rows, fine; ldb still fine */
  CHECK(gpucc_plan_serialize((ok = with_gemm(g)), &bytes, &len) == GPUCC_OK);
  free(bytes);
  gpucc_plan_free(ok);
  g = sample_gemm();
  g.stride_d = 4;
  EXPECT_INVALID(with_gemm(g), "stride_d 4 makes D's batches overlap");
  g = sample_gemm();
  g.bias = gpucc_weights_ptr(1016); /* 16 bytes from 1016: past the 1024 of the weights */
  EXPECT_INVALID(with_gemm(g), "bias [4]: 16 bytes at weights offset 1016 run past the weights");
  g = sample_gemm();
  g.epilogue = (GpuccEpilogue)(GPUCC_EPILOGUE_LAST + 1);
  EXPECT_INVALID(with_gemm(g), "epilogue must be 0 to 3");
  g = sample_gemm();
  g.d = gpucc_weights_ptr(0);
  EXPECT_INVALID(with_gemm(g), "D must be in the arena");
  g = sample_gemm();
  g.cd_type = GPUCC_DT_F16;
  EXPECT_INVALID(with_gemm(g), "unsupported types a=f32 b=f32 c/d=f16");
  g = sample_gemm();
  g.a_type = g.b_type = GPUCC_DT_BF16; /* bf16 in, f32 out is a cuBLASLt combination */
  CHECK(gpucc_plan_serialize((ok = with_gemm(g)), &bytes, &len) == GPUCC_OK);
  free(bytes);
  gpucc_plan_free(ok);
  g = sample_gemm();
  g.k = 0;
  EXPECT_INVALID(with_gemm(g), "m=4 n=2 k=0");
  g = sample_gemm();
  g.stride_b = INT64_MAX / 2;
  EXPECT_INVALID(with_gemm(g), "extent overflows");

  p = gpucc_plan_new(4096, 1024, 0);
  gpucc_plan_add_copy(p, gpucc_arena_ptr(0), gpucc_arena_ptr(100), 200);
  EXPECT_INVALID(p, "step 0 (copy): source and destination overlap");
  p = gpucc_plan_new(4096, 1024, 0);
  gpucc_plan_add_copy(p, gpucc_arena_ptr(0), gpucc_weights_ptr(1000), 100);
  EXPECT_INVALID(p, "step 0 (copy) source: 100 bytes at weights offset 1000");
  p = gpucc_plan_new(4096, 1024, 0);
  gpucc_plan_add_copy(p, gpucc_weights_ptr(0), gpucc_arena_ptr(0), 16);
  EXPECT_INVALID(p, "destination is not in the arena");
  p = gpucc_plan_new(4096, 1024, 0);
  gpucc_plan_add_memset(p, gpucc_arena_ptr(4000), 97, 0);
  EXPECT_INVALID(p, "step 0 (memset): 97 bytes at arena offset 4000");
  p = gpucc_plan_new(UINT64_MAX, 0, 0);
  gpucc_plan_add_memset(p, gpucc_arena_ptr(UINT64_MAX), 2, 0); /* offset + bytes wraps */
  EXPECT_INVALID(p, "run past the arena");

  /* Choices: their variants must follow them, hold steps, and be kernels or GEMMs. */
  uint32_t one[GPUCC_MAX_VARIANTS] = {1, 1, 1}, none[2] = {1, 0};
  p = gpucc_plan_new(4096, 1024, 0);
  gpucc_plan_set_module(p, NULL, 0, ptx);
  gpucc_plan_add_choice(p, "c", 2, one);
  gpucc_plan_add_kernel(p, "k", grid, block, 0, NULL, 0);
  EXPECT_INVALID(p, "step 0 (choice 'c'): its variants hold 2 steps, 1 follow it");
  p = gpucc_plan_new(4096, 1024, 0);
  gpucc_plan_set_module(p, NULL, 0, ptx);
  gpucc_plan_add_choice(p, "c", 2, none);
  gpucc_plan_add_kernel(p, "k", grid, block, 0, NULL, 0);
  EXPECT_INVALID(p, "variant 1 has no steps");
  p = gpucc_plan_new(4096, 1024, 0);
  gpucc_plan_set_module(p, NULL, 0, ptx);
  gpucc_plan_add_choice(p, "c", 2, one);
  gpucc_plan_add_kernel(p, "k", grid, block, 0, NULL, 0);
  gpucc_plan_add_memset(p, gpucc_arena_ptr(0), 16, 0);
  EXPECT_INVALID(p, "step 2 of its variants is not a kernel or a GEMM");
  p = gpucc_plan_new(4096, 1024, 0);
  gpucc_plan_set_module(p, NULL, 0, ptx);
  gpucc_plan_add_choice(p, "outer", 2, one);
  gpucc_plan_add_choice(p, "inner", 1, one);
  gpucc_plan_add_kernel(p, "k", grid, block, 0, NULL, 0);
  EXPECT_INVALID(p, "step 1 of its variants is not a kernel or a GEMM");
  p = gpucc_plan_new(0, 0, 0);
  CHECK(gpucc_plan_add_choice(p, "c", GPUCC_MAX_VARIANTS + 1, one) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(gpucc_plan_add_choice(p, "c", 0, one) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(gpucc_plan_add_choice(p, "", 1, one) == GPUCC_ERR_INVALID_ARGUMENT);
  gpucc_plan_free(p);

  /* Builder-level refusals. */
  CHECK(gpucc_plan_add_input(NULL, "x", GPUCC_DT_F32, 0, NULL, 0) == GPUCC_ERR_INVALID_ARGUMENT);
  p = gpucc_plan_new(0, 0, 0);
  CHECK(gpucc_plan_add_input(p, "", GPUCC_DT_F32, 0, NULL, 0) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(gpucc_plan_add_input(p, "x", GPUCC_DT_F32, 9, dims, 0) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(gpucc_plan_add_kernel(p, "k", grid, block, 0, NULL, GPUCC_MAX_KERNEL_ARGS + 1) ==
        GPUCC_ERR_INVALID_ARGUMENT);
  gpucc_plan_free(p);
  CHECK(gpucc_plan_parse("GPUCCPLN", 8, &p) == GPUCC_ERR_BAD_PLAN && p == NULL);
  CHECK(gpucc_dtype_size(GPUCC_DT_BF16) == 2 && !strcmp(gpucc_dtype_name(GPUCC_DT_F8E4M3), "f8e4m3"));
  CHECK(gpucc_dtype_size((GpuccDType)0) == 0 && !strcmp(gpucc_dtype_name((GpuccDType)77), "?"));
}

/* Each rule about symbols and classes, broken on its own in the in-memory plan, where
 * the builder would not break it. */
static void test_invalid_ranged(void) {
  size_t len = 0;
  free(bytes_of(ranged_plan(), &len)); /* valid as built */
  GpuccPlan *p = ranged_plan();
  free(p->syms[1].name);
  p->syms[1].name = strdup("batch");
  EXPECT_INVALID(p, "plan: two symbols named 'batch'");
  p = ranged_plan();
  p->syms[1].lo[1] = 1; /* 1..1 then 1..16 */
  EXPECT_INVALID(p, "plan: symbol 'seq': piece 1 is 1..16 (pieces ascend, disjoint, within 1..2147483648)");
  p = ranged_plan();
  p->syms[1].lo[1] = 20;
  EXPECT_INVALID(p, "plan: symbol 'seq': piece 1 is 20..16");
  p = ranged_plan();
  p->syms[0].lo[0] = 0;
  EXPECT_INVALID(p, "plan: symbol 'batch': piece 0 is 0..4");
  p = ranged_plan();
  p->syms[1].hi[1] = GPUCC_MAX_SIZE + 1;
  EXPECT_INVALID(p, "plan: symbol 'seq': piece 1 is 8..2147483649");
  p = ranged_plan();
  p->syms[0].npieces = 0;
  EXPECT_INVALID(p, "plan: symbol 'batch': 0 pieces (1 to 16)");

  /* Flags: only GPUCC_SYMBOL_ROWS; a rows symbol is exactly one axis of every output and
   * at most one of each input. seq may be rows too: it is one axis of y and of ids. */
  p = ranged_plan();
  p->syms[1].flags = 2;
  EXPECT_INVALID(p, "plan: symbol 'seq': flags 0x2 (the one flag is GPUCC_SYMBOL_ROWS, 0x1)");
  p = ranged_plan();
  p->syms[1].flags = GPUCC_SYMBOL_ROWS;
  free(bytes_of(p, &len));
  p = ranged_plan();
  p->outputs[0].sym[0] = -1; /* y's dim 0 a fixed 4 */
  EXPECT_INVALID(p, "plan: rows symbol 'batch' is no axis of output 'y' (a rows symbol is exactly one axis of every output)");
  p = ranged_plan();
  p->outputs[0].sym[2] = 0;
  p->outputs[0].dims[2] = 4;
  EXPECT_INVALID(p, "plan: rows symbol 'batch' is axes 0 and 2 of output 'y' (a rows symbol is exactly one axis of every output)");
  p = ranged_plan();
  p->inputs[1].sym[1] = 0;
  p->inputs[1].dims[1] = 4;
  EXPECT_INVALID(p, "plan: rows symbol 'batch' is axes 0 and 1 of input 'x' (a rows symbol is at most one axis of each input)");
  p = ranged_plan();
  p->syms[0].flags = 0; /* then batch may be what it likes */
  p->inputs[1].sym[1] = 0;
  p->inputs[1].dims[1] = 4;
  free(bytes_of(p, &len));
  p = ranged_plan();
  CHECK(gpucc_plan_set_symbol_flags(p, 2, GPUCC_SYMBOL_ROWS) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(strstr(gpucc_last_error(), "plan: flags of symbol 2 (the plan has 2)") != NULL);
  CHECK(gpucc_plan_set_symbol_flags(p, -1, 0) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(gpucc_plan_set_symbol_flags(NULL, 0, 0) == GPUCC_ERR_INVALID_ARGUMENT);
  gpucc_plan_free(p);

  /* Axes: a symbol the plan has, at its largest size; every symbol an input's axis. */
  p = ranged_plan();
  p->inputs[1].sym[1] = 2;
  EXPECT_INVALID(p, "plan: input 'x': axis 1 is symbol 2; the plan has 2");
  p = ranged_plan();
  p->inputs[1].dims[0] = 3;
  EXPECT_INVALID(p, "plan: input 'x': dim 0 is 3, not the largest size of its symbol 'batch' (4)");
  p = ranged_plan();
  p->inputs[0].sym[1] = -1; /* seq is now an output's axis only */
  EXPECT_INVALID(p, "plan: symbol 'seq' is no axis of any input");
  p = ranged_plan();
  p->outputs[0].offset = 64;
  EXPECT_INVALID(p, "plan: output 'y': arena offset 64 in a ranged plan");
  p = ranged_plan();
  p->steps = calloc(1, sizeof *p->steps);
  p->steps[0] = (GpuccStep){.kind = GPUCC_STEP_MEMSET, .fill = {gpucc_arena_ptr(0), 8, 0}};
  p->nsteps = 1;
  EXPECT_INVALID(p, "plan: 1 top-level step in a ranged plan (its classes hold the steps)");

  /* Classes: bounds, their part of the arena, slots, sizes and steps within it. */
  p = ranged_plan();
  p->classes[1].bound[1] = 5;
  EXPECT_INVALID(p, "plan: class 1 (batch=2, seq=5): 'seq' bound at 5, not one of its sizes 1, 8..16");
  p = ranged_plan();
  p->classes[1].bound[0] = p->classes[1].bound[1] = 1;
  EXPECT_INVALID(p, "plan: class 1 (batch=1, seq=1): the same bounds as class 0");
  p = ranged_plan();
  p->classes[2].bound[0] = 3;
  EXPECT_INVALID(p, "plan: no class has every symbol at its largest size");
  p = ranged_plan();
  p->classes[2].arena_bytes = 5000;
  EXPECT_INVALID(p, "plan: class 2 (batch=4, seq=16): an arena of 5000 bytes, more than the plan's 4096");
  p = ranged_plan();
  p->classes[1].input_offset[0] = 800;
  EXPECT_INVALID(p, "plan: class 1 (batch=2, seq=16): input 'ids': 256 bytes at arena offset 800 run past the arena (1024 bytes)");
  p = ranged_plan();
  p->classes[0].output_offset[0] = 514;
  EXPECT_INVALID(p, "plan: class 0 (batch=1, seq=1): output 'y': arena offset 514 is not a multiple of 4");
  p = ranged_plan();
  p->classes[1].size_offset[1] = 780;
  EXPECT_INVALID(p, "plan: class 1 (batch=2, seq=16): size of 'seq': arena offset 780 is not a multiple of 8");
  p = ranged_plan();
  p->classes[1].size_offset[0] = 1024;
  EXPECT_INVALID(p, "plan: class 1 (batch=2, seq=16): size of 'batch': 8 bytes at arena offset 1024 run past the arena (1024 bytes)");
  p = ranged_plan();
  p->classes[2].steps[0].fill.bytes = 1025;
  EXPECT_INVALID(p, "plan: class 2 (batch=4, seq=16): step 0 (memset): 1025 bytes at arena offset 1024 run past the arena (2048 bytes)");
  p = ranged_plan();
  p->classes[0].steps[0].kernel.args[1].ptr.offset = 1025;
  EXPECT_INVALID(p, "plan: class 0 (batch=1, seq=1): step 0 (kernel 'k0_scale') argument 1: 0 bytes at arena offset 1025 run past the arena (1024 bytes)");
  p = ranged_plan();
  p->classes[1].steps[0].gemm.lda = 3;
  EXPECT_INVALID(p, "plan: class 1 (batch=2, seq=16): step 0 (gemm): lda 3 is less than its 4 rows");
  p = ranged_plan();
  p->classes[1].steps[2].choice.count[1] = 2;
  EXPECT_INVALID(p, "plan: class 1 (batch=2, seq=16): step 2 (choice 'k0_scale or cublaslt'): its variants hold 3 steps, 2 follow it");
  p = ranged_plan();
  gpucc_plan_set_module(p, NULL, 0, NULL);
  EXPECT_INVALID(p, "kernel steps but no module");

  /* How many classes: one at least, 256 at most. */
  int64_t top[] = {300}, one[] = {1};
  uint64_t zero[] = {0}, none[] = {GPUCC_NO_OFFSET};
  p = gpucc_plan_new(4096, 0, 0);
  gpucc_plan_add_input(p, "x", GPUCC_DT_F32, 1, top, 0);
  gpucc_plan_add_symbol(p, "n", 1, one, top);
  gpucc_plan_set_axis_symbol(p, 0, 0, 0, 0);
  EXPECT_INVALID(p, "plan: 0 classes (1 to 256 in a plan with symbols)");
  p = gpucc_plan_new(4096, 0, 0);
  gpucc_plan_add_input(p, "x", GPUCC_DT_F32, 1, top, 0);
  gpucc_plan_add_symbol(p, "n", 1, one, top);
  gpucc_plan_set_axis_symbol(p, 0, 0, 0, 0);
  for (int64_t b = 44; b <= 300; b++) CHECK(gpucc_plan_add_class(p, &b, 4096, zero, NULL, none) == GPUCC_OK);
  EXPECT_INVALID(p, "plan: 257 classes (1 to 256 in a plan with symbols)");

  /* The builder's order: classes copy per input, output and symbol, so those come first;
   * a class needs a symbol; a symbol holds at most GPUCC_MAX_PIECES pieces. */
  p = ranged_plan();
  CHECK(gpucc_plan_add_input(p, "z", GPUCC_DT_F32, 1, one, 0) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(strstr(gpucc_last_error(), "input added after a class") != NULL);
  CHECK(gpucc_plan_add_output(p, "z", GPUCC_DT_F32, 1, one, 0) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(gpucc_plan_add_symbol(p, "z", 1, one, one) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(gpucc_plan_set_axis_symbol(p, 0, 1, 1, 2) == GPUCC_ERR_INVALID_ARGUMENT); /* symbol 2 of 2 */
  CHECK(gpucc_plan_set_axis_symbol(p, 0, 1, 2, 0) == GPUCC_ERR_INVALID_ARGUMENT); /* axis 2 of rank 2 */
  CHECK(gpucc_plan_set_axis_symbol(p, 1, 1, 0, 0) == GPUCC_ERR_INVALID_ARGUMENT); /* output 1 of 1 */
  CHECK(gpucc_plan_add_class(p, NULL, 0, zero, zero, none) == GPUCC_ERR_INVALID_ARGUMENT);
  gpucc_plan_free(p);
  p = gpucc_plan_new(0, 0, 0);
  CHECK(gpucc_plan_add_class(p, one, 0, NULL, NULL, none) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(strstr(gpucc_last_error(), "a class in a plan without symbols") != NULL);
  int64_t lo[GPUCC_MAX_PIECES + 1] = {0}, hi[GPUCC_MAX_PIECES + 1] = {0};
  CHECK(gpucc_plan_add_symbol(p, "s", 0, lo, hi) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(gpucc_plan_add_symbol(p, "s", GPUCC_MAX_PIECES + 1, lo, hi) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(gpucc_plan_add_symbol(p, "", 1, one, one) == GPUCC_ERR_INVALID_ARGUMENT);
  for (int k = 0; k < GPUCC_MAX_SYMBOLS; k++) {
    char name[8];
    snprintf(name, sizeof name, "s%d", k);
    CHECK(gpucc_plan_add_symbol(p, name, 1, one, one) == GPUCC_OK);
  }
  CHECK(gpucc_plan_add_symbol(p, "s9", 1, one, one) == GPUCC_ERR_INVALID_ARGUMENT);
  gpucc_plan_free(p);

  /* The reader refuses what the builder would: here, a symbol count out of range, and
   * flags it does not know (batch's: u32 n, then "batch" as u32 5 and 6 bytes). */
  unsigned char *b = bytes_of(ranged_plan(), &len);
  b[section_at(b, 6)] = GPUCC_MAX_SYMBOLS + 1;
  fix_header(b, len);
  expect_rejected(b, len, "nine symbols", 0);
  CHECK(strstr(gpucc_last_error(), "section SYMBOLS at byte 4: 9 symbols (1 to 8)") != NULL);
  free(b);
  b = bytes_of(ranged_plan(), &len);
  size_t flags = section_at(b, 6) + 4 + 4 + 6;
  CHECK(b[flags] == GPUCC_SYMBOL_ROWS && b[flags + 1] == 0 && b[flags + 2] == 0 && b[flags + 3] == 0);
  b[flags + 3] = 0x80;
  fix_header(b, len);
  expect_rejected(b, len, "unknown flags", flags);
  CHECK(strstr(gpucc_last_error(), "plan: symbol 'batch': flags 0x80000001") != NULL);
  b[flags] = b[flags + 3] = 0; /* no flags: the same plan but for its rows */
  fix_header(b, len);
  GpuccPlan *q = NULL;
  CHECK(gpucc_plan_parse(b, len, &q) == GPUCC_OK && q && q->syms[0].flags == 0);
  gpucc_plan_free(q);
  free(b);
}

/* ---------------------------------------------------------------- old versions, modules */

/* Versions 4 and 5 hold one module without a count (both lengths 0: none); the rest of
 * their bytes is version 6's, but version 4 has no shape classes. Each reads as the plan
 * it is and is written back as version 6. A version 4 header on a ranged plan (seven
 * sections), a version 6 header on the old MODULE, and a version this runtime does not
 * know are refused. */
static void test_old_versions(void) {
  size_t len = 0, old_len = 0, again_len = 0;
  unsigned char *v6 = bytes_of(sample_plan(), &len);
  GpuccPlan *p = sample_plan(), *q = NULL;
  for (unsigned char version = 4; version <= 5; version++) {
    unsigned char *old = as_old_version(v6, len, version, &old_len);
    CHECK(old_len == len - 4);
    CHECK(gpucc_plan_parse(old, old_len, &q) == GPUCC_OK);
    if (q) {
      check_same_plan(p, q);
      unsigned char *again = bytes_of(q, &again_len);
      CHECK(again_len == len && !memcmp(again, v6, len));
      free(again);
    }
    old[8] = 6;
    expect_rejected(old, old_len, "version 6 with the old MODULE", 0);
    free(old);
  }
  gpucc_plan_free(p);
  v6[8] = 7;
  CHECK(gpucc_plan_parse(v6, len, &q) == GPUCC_ERR_BAD_PLAN && q == NULL);
  CHECK(strstr(gpucc_last_error(), "format version 7; this runtime reads versions 4 to 6"));
  free(v6);

  /* A version 5 plan without a module: both lengths 0. */
  p = gpucc_plan_new(256, 0, 0);
  CHECK(gpucc_plan_add_memset(p, gpucc_arena_ptr(0), 16, 1) == GPUCC_OK);
  v6 = bytes_of(p, &len);
  unsigned char *old = as_old_version(v6, len, 5, &old_len);
  CHECK(old_len == len + 12);
  CHECK(gpucc_plan_parse(old, old_len, &q) == GPUCC_OK && q && q->nmodules == 0);
  if (q) {
    unsigned char *again = bytes_of(q, &again_len);
    CHECK(again_len == len && !memcmp(again, v6, len));
    free(again);
  }
  free(old);
  free(v6);

  /* Ranged: version 5 reads, version 4 does not. */
  v6 = bytes_of(ranged_plan(), &len);
  old = as_old_version(v6, len, 5, &old_len);
  CHECK(gpucc_plan_parse(old, old_len, &q) == GPUCC_OK && q && q->nclasses == 3);
  p = ranged_plan();
  if (q) check_same_plan(p, q);
  gpucc_plan_free(p);
  gpucc_plan_free(q);
  old[8] = 4;
  CHECK(gpucc_plan_parse(old, old_len, &q) == GPUCC_ERR_BAD_PLAN && q == NULL);
  CHECK(strstr(gpucc_last_error(), "plan: 7 sections; version 4 has 5") != NULL);
  free(old);
  free(v6);
}

static const unsigned char cubin2[] = {0x7f, 'E', 'L', 'F', 9, 8, 7};
static const char ptx2[] = ".version 8.0\n.target sm_90\n// k1_add\n";

/* sample_plan with three modules: a cubin, a PTX, and both. */
static GpuccPlan *three_module_plan(void) {
  GpuccPlan *p = sample_plan();
  CHECK(gpucc_plan_set_module(p, cubin, sizeof cubin, NULL) == GPUCC_OK);
  CHECK(gpucc_plan_add_module(p, NULL, 0, ptx) == GPUCC_OK);
  CHECK(gpucc_plan_add_module(p, cubin2, sizeof cubin2, ptx2) == GPUCC_OK);
  return p;
}

/* Whether MODULE at b + at holds, after its count, the n bytes of data as a u64 length
 * and those bytes; *at moves past them. */
static bool holds(const unsigned char *b, size_t *at, const void *data, size_t n) {
  bool ok = rd64(b + *at) == n && (!n || !memcmp(b + *at + 8, data, n));
  *at += 8 + n;
  return ok;
}

static void test_modules(void) {
  size_t len = 0, again_len = 0;
  GpuccPlan *p = three_module_plan();
  CHECK(p->nmodules == 3 && !p->modules[1].cubin && !p->modules[0].ptx);
  void *bytes = NULL;
  CHECK(gpucc_plan_serialize(p, &bytes, &len) == GPUCC_OK);
  /* The MODULE section, byte by byte: u32 3, then each module's two lengths and bytes. */
  const unsigned char *b = bytes;
  size_t at = section_at(b, 2), end = at + (size_t)rd64(b + at - 8);
  CHECK(b[at] == 3 && !b[at + 1] && !b[at + 2] && !b[at + 3]);
  at += 4;
  CHECK(holds(b, &at, cubin, sizeof cubin) && holds(b, &at, NULL, 0));
  CHECK(holds(b, &at, NULL, 0) && holds(b, &at, ptx, strlen(ptx)));
  CHECK(holds(b, &at, cubin2, sizeof cubin2) && holds(b, &at, ptx2, strlen(ptx2)));
  CHECK(at == end);
  GpuccPlan *q = NULL;
  CHECK(gpucc_plan_parse(bytes, len, &q) == GPUCC_OK);
  if (q) {
    check_same_plan(p, q);
    CHECK(q->modules[2].ptx_len == strlen(ptx2) && q->modules[1].cubin_len == 0);
    unsigned char *again = bytes_of(q, &again_len);
    CHECK(again_len == len && !memcmp(again, bytes, len));
    free(again);
  }

  /* set_module makes the three one again: sample_plan's very bytes. */
  CHECK(gpucc_plan_set_module(p, cubin, sizeof cubin, ptx) == GPUCC_OK && p->nmodules == 1);
  size_t one_len = 0;
  unsigned char *one = bytes_of(p, &len), *sample = bytes_of(sample_plan(), &one_len);
  CHECK(len == one_len && !memcmp(one, sample, len));
  free(one);
  free(sample);
  p = three_module_plan();
  CHECK(gpucc_plan_set_module(p, NULL, 0, NULL) == GPUCC_OK && p->nmodules == 0);
  EXPECT_INVALID(p, "plan: kernel steps but no module (neither cubin nor PTX)");

  /* A module with neither is refused by the builder, the validation and the reader. */
  p = gpucc_plan_new(0, 0, 0);
  CHECK(gpucc_plan_add_module(p, NULL, 0, NULL) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(strstr(gpucc_last_error(), "plan: module 0 has neither cubin nor PTX") != NULL);
  CHECK(gpucc_plan_add_module(p, NULL, 0, "") == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(gpucc_plan_add_module(p, NULL, 4, ptx) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(gpucc_plan_add_module(NULL, cubin, sizeof cubin, NULL) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(p->nmodules == 0);
  gpucc_plan_free(p);
  p = three_module_plan();
  free(p->modules[1].ptx);
  p->modules[1].ptx = NULL;
  p->modules[1].ptx_len = 0;
  EXPECT_INVALID(p, "plan: module 1 has neither cubin nor PTX");
  p = three_module_plan();
  p->modules[2].ptx_len++;
  EXPECT_INVALID(p, "plan: module 2: inconsistent cubin or PTX length");
  /* u32 2, a module of two zero lengths, one of a 2-byte PTX (enough bytes for the count
   * of two, so that the empty module is what the reader refuses) */
  static const unsigned char empty[4 + 16 + 18] = {2, [28] = 2, [36] = 'x', 'y'};
  size_t bad_len = 0;
  unsigned char *bad = with_module_section(bytes, len, empty, sizeof empty, &bad_len);
  expect_rejected(bad, bad_len, "an empty module", 0);
  CHECK(strstr(gpucc_last_error(), "section MODULE at byte 20: module 0 has neither cubin nor PTX"));
  free(bad);
  free(bytes);

  /* At most GPUCC_MAX_MODULES, in the builder and in the reader. */
  p = gpucc_plan_new(0, 0, 0);
  for (int i = 0; i < GPUCC_MAX_MODULES; i++) CHECK(gpucc_plan_add_module(p, NULL, 0, "x") == GPUCC_OK);
  CHECK(gpucc_plan_add_module(p, NULL, 0, "x") == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(strstr(gpucc_last_error(), "plan: more than 1024 modules") != NULL);
  CHECK(p->nmodules == GPUCC_MAX_MODULES);
  unsigned char *most = bytes_of(p, &len);
  at = section_at(most, 2);
  size_t n = (size_t)rd64(most + at - 8), more_len = 0; /* u32 1024, 17 bytes each */
  CHECK(n == 4 + 17 * GPUCC_MAX_MODULES);
  unsigned char *mod = malloc(n + 17);
  memcpy(mod, most + at, n);
  memcpy(mod + n, most + at + 4, 17); /* one module more */
  mod[0] = 1, mod[1] = 4;             /* 1025 */
  unsigned char *more = with_module_section(most, len, mod, n + 17, &more_len);
  expect_rejected(more, more_len, "1025 modules", 0);
  CHECK(strstr(gpucc_last_error(), "1025 modules (0 to 1024)") != NULL);
  CHECK(gpucc_plan_parse(most, len, &q) == GPUCC_OK && q && q->nmodules == GPUCC_MAX_MODULES);
  gpucc_plan_free(q);
  free(more);
  free(mod);
  free(most);
}

/* ---------------------------------------------------------------- model.so payload */

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)n + 1);
  if (fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
  fclose(f);
  *len = (size_t)n;
  return b;
}

static void test_payload(void) {
  char dir[] = "/tmp/gpucc-test-plan-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char so[256], so2[256], wfile[256];
  snprintf(so, sizeof so, "%s/model.so", dir);
  snprintf(so2, sizeof so2, "%s/big.so", dir);
  snprintf(wfile, sizeof wfile, "%s/big.so.weights", dir);

  /* A stand-in stub: an ELF magic and some bytes (the trailer parser never looks inside). */
  unsigned char fake[333];
  for (size_t i = 0; i < sizeof fake; i++) fake[i] = (unsigned char)(i * 7);
  memcpy(fake, "\177ELF", 4);

  GpuccPlan *p = sample_plan();
  void *plan = NULL;
  size_t plan_len = 0;
  CHECK(gpucc_plan_serialize(p, &plan, &plan_len) == GPUCC_OK);
  gpucc_plan_free(p);
  unsigned char weights[1024];
  for (size_t i = 0; i < sizeof weights; i++) weights[i] = (unsigned char)(i ^ 0x5a);

  /* Embedded weights. */
  char err[512] = "";
  const char *info = "gpucc: 0.1.0\ncommand: gpucc m.onnx -o m.so\n";
  CHECK(gpucc_write_model_so(fake, sizeof fake, so, plan, plan_len, weights, sizeof weights, info,
                             SIZE_MAX, err, sizeof err) == GPUCC_OK);
  size_t len = 0;
  unsigned char *f = slurp(so, &len);
  CHECK(f && len > sizeof fake + plan_len + sizeof weights + GPUCC_TRAILER_BYTES - 1);
  GpuccTrailer t;
  if (f) {
    CHECK(!memcmp(f, fake, sizeof fake)); /* the stub, unchanged, first */
    CHECK(gpucc_trailer_parse(f, len, &t) == GPUCC_OK);
    CHECK(t.flags == 0 && t.plan_len == plan_len && t.weights_len == sizeof weights);
    CHECK(t.plan_offset % 64 == 0 && t.plan_offset >= sizeof fake);
    CHECK(!memcmp(f + t.plan_offset, plan, plan_len));
    CHECK(!memcmp(f + t.weights_offset, weights, sizeof weights));
    CHECK(t.weights_file[0] == 0);
    CHECK(t.info_len == strlen(info) && !memcmp(f + t.info_offset, info, strlen(info)));
    CHECK(!memcmp(f + len - 8, "GPUCCEND", 8) && !memcmp(f + len - 96, "GPUCCMDL", 8));

    /* Every damaged trailer byte and every truncation is refused. */
    for (size_t i = len - GPUCC_TRAILER_BYTES; i < len; i++) {
      f[i] ^= 0x10;
      CHECK(gpucc_trailer_parse(f, len, &t) == GPUCC_ERR_BAD_PLAN);
      f[i] ^= 0x10;
    }
    for (size_t n = 0; n < len; n += (n < 200 ? 1 : 97))
      CHECK(gpucc_trailer_parse(f, n, &t) == GPUCC_ERR_BAD_PLAN);
    /* A trailer with a valid checksum but a range past the file, or info with a NUL. */
    unsigned char *tr = f + len - GPUCC_TRAILER_BYTES;
    uint64_t info_at = rd64(tr + 64);
    f[info_at + 3] = 0;
    CHECK(gpucc_trailer_parse(f, len, &t) == GPUCC_ERR_BAD_PLAN);
    CHECK(strstr(gpucc_last_error(), "bad build info") != NULL);
    f[info_at + 3] = info[3];
    wr64(tr + 72, len); /* info_len */
    wr64(tr + 80, fnv(tr, 80));
    CHECK(gpucc_trailer_parse(f, len, &t) == GPUCC_ERR_BAD_PLAN);
    wr64(tr + 72, strlen(info));
    wr64(tr + 24, len); /* plan_len */
    wr64(tr + 80, fnv(tr, 80));
    CHECK(gpucc_trailer_parse(f, len, &t) == GPUCC_ERR_BAD_PLAN);
    CHECK(strstr(gpucc_last_error(), "outside the file") != NULL);
    /* Version 1: the same payload with an 80-byte trailer and no info still reads. */
    wr64(tr + 24, plan_len);
    unsigned char v1[80];
    memcpy(v1, tr, 64);
    v1[8] = 1;
    wr64(v1 + 64, fnv(v1, 64));
    memcpy(v1 + 72, "GPUCCEND", 8);
    memcpy(f + len - 80, v1, 80);
    CHECK(gpucc_trailer_parse(f, len, &t) == GPUCC_OK);
    CHECK(t.plan_len == plan_len && t.info_len == 0 && t.info_offset == 0);
  }
  free(f);
  CHECK(gpucc_trailer_parse(fake, sizeof fake, &t) == GPUCC_ERR_BAD_PLAN);
  CHECK(strstr(gpucc_last_error(), "does not end with a gpucc trailer") != NULL);

  /* External weights: above the threshold they go beside the .so. */
  CHECK(gpucc_write_model_so(fake, sizeof fake, so2, plan, plan_len, weights, sizeof weights, NULL,
                             100, err, sizeof err) == GPUCC_OK);
  f = slurp(so2, &len);
  size_t wlen = 0;
  unsigned char *w = slurp(wfile, &wlen);
  CHECK(w && wlen == sizeof weights && !memcmp(w, weights, wlen));
  CHECK(f && gpucc_trailer_parse(f, len, &t) == GPUCC_OK);
  CHECK(t.flags == GPUCC_TRAILER_EXTERNAL_WEIGHTS && t.weights_len == sizeof weights);
  CHECK(!strcmp(t.weights_file, "big.so.weights") && t.weights_offset == 0);
  CHECK(len < sizeof fake + plan_len + sizeof weights); /* the weights are not inside */
  if (f) {
    /* A name with a slash must not pass, whatever the checksum says. */
    unsigned char *tr = f + len - GPUCC_TRAILER_BYTES;
    uint64_t name_off = rd64(tr + 48);
    f[name_off + 3] = '/';
    CHECK(gpucc_trailer_parse(f, len, &t) == GPUCC_ERR_BAD_PLAN);
  }
  free(f);
  free(w);

  /* Through a symlink in another folder, the model.so replaces the file the link names
   * and its weights go beside that file, not beside the link. */
  char sub[300], link[320], target[320], twfile[340], lwfile[340];
  snprintf(sub, sizeof sub, "%s/sub", dir);
  snprintf(link, sizeof link, "%s/link.so", dir);
  snprintf(target, sizeof target, "%s/real.so", sub);
  snprintf(twfile, sizeof twfile, "%s/real.so.weights", sub);
  snprintf(lwfile, sizeof lwfile, "%s/link.so.weights", dir);
  CHECK(mkdir(sub, 0755) == 0);
  FILE *tf = fopen(target, "wb");
  CHECK(tf && fclose(tf) == 0);
  CHECK(symlink(target, link) == 0);
  CHECK(gpucc_write_model_so(fake, sizeof fake, link, plan, plan_len, weights, sizeof weights, NULL,
                             100, err, sizeof err) == GPUCC_OK);
  struct stat lst;
  CHECK(lstat(link, &lst) == 0 && S_ISLNK(lst.st_mode));
  CHECK(access(twfile, F_OK) == 0 && access(lwfile, F_OK) != 0);
  f = slurp(target, &len);
  CHECK(f && gpucc_trailer_parse(f, len, &t) == GPUCC_OK &&
        !strcmp(t.weights_file, "real.so.weights"));
  free(f);
  unlink(link);
  unlink(target);
  unlink(twfile);
  CHECK(rmdir(sub) == 0);

  /* Refusals: a stub that already carries a model, a stub that is not ELF, an output
   * folder that does not exist. Each leaves no file behind. */
  size_t so_len = 0;
  unsigned char *so_bytes = slurp(so, &so_len);
  CHECK(so_bytes && gpucc_write_model_so(so_bytes, so_len, so2, plan, plan_len, weights,
                                         sizeof weights, NULL, SIZE_MAX, err,
                                         sizeof err) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err, "already carries a model") != NULL);
  free(so_bytes);
  static const char notelf_bytes[] =
      "hello, world, this is not an ELF file at all; it is long enough though.....";
  CHECK(gpucc_write_model_so(notelf_bytes, sizeof notelf_bytes, so2, plan, plan_len, NULL, 0, NULL,
                             SIZE_MAX, err, sizeof err) == GPUCC_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err, "not a shared library") != NULL);
  char missing[300];
  snprintf(missing, sizeof missing, "%s/nope/model.so", dir);
  CHECK(gpucc_write_model_so(fake, sizeof fake, missing, plan, plan_len, NULL, 0, NULL, SIZE_MAX, err,
                             sizeof err) == GPUCC_ERR_IO);
  CHECK(strstr(err, "nope/model.so") != NULL);

  free(plan);
  unlink(so);
  unlink(so2);
  unlink(wfile);
  CHECK(rmdir(dir) == 0); /* fails if a temporary was left behind */
}

/* ---------------------------------------------------------------- the tuning cache */

static void write_bytes(const char *path, const char *text, size_t n) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (f) {
    CHECK(fwrite(text, 1, n, f) == n);
    fclose(f);
  }
}

/* gpucc_tune_read of the file at path holding the n bytes of text, for a plan of nsteps
 * steps. */
static bool reads_n(const char *path, const char *text, size_t n, int nsteps) {
  write_bytes(path, text, n);
  GpuccTuneEntry e[8];
  bool ok = gpucc_tune_read(path, "k", e, nsteps);
  for (int i = 0; !ok && i < nsteps; i++) CHECK(e[i].nwords == 0);
  return ok;
}
static bool reads(const char *path, const char *text, int nsteps) {
  return reads_n(path, text, strlen(text), nsteps);
}

static void test_tune_cache(void) {
  char dir[] = "/tmp/gpucc-test-tune-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  setenv("GPUCC_CACHE_DIR", dir, 1);
  char *path = gpucc_tune_path("plan 1 gpu X");
  CHECK(path && !strncmp(path, dir, strlen(dir)) && strstr(path, "/tune/"));
  char *other = gpucc_tune_path("plan 2 gpu X");
  CHECK(other && strcmp(path, other)); /* each key its own file */
  free(other);

  /* Written (making the folder), then read back; another key or a plan of fewer steps
   * finds nothing. */
  GpuccTuneEntry e[5] = {{0}}, r[5];
  e[1] = (GpuccTuneEntry){1, {3}};
  e[3] = (GpuccTuneEntry){9, {1, 2, 3, UINT64_MAX, 0, 5, 6, 7, 4096}};
  CHECK(gpucc_tune_write(path, "plan 1 gpu X", e, 5));
  CHECK(gpucc_tune_read(path, "plan 1 gpu X", r, 5));
  CHECK(r[0].nwords == 0 && r[2].nwords == 0 && r[4].nwords == 0);
  CHECK(r[1].nwords == 1 && r[1].w[0] == 3);
  CHECK(r[3].nwords == 9 && r[3].w[3] == UINT64_MAX && r[3].w[8] == 4096);
  CHECK(!gpucc_tune_read(path, "plan 1 gpu Y", r, 5));
  CHECK(!gpucc_tune_read(path, "plan 1 gpu", r, 5)); /* a prefix of the key is not the key */
  CHECK(!gpucc_tune_read(path, "plan 1 gpu X", r, 3)); /* step 3 of a 3-step plan */

  /* Damage of every kind is a miss, never a crash or a half-read file. */
  char bad[512];
  snprintf(bad, sizeof bad, "%s/bad.txt", dir);
  CHECK(reads(bad, "gpucc-tune 1\nkey k\n1 3\n", 2));
  CHECK(reads(bad, "gpucc-tune 1\nkey k\n", 2));          /* nothing decided */
  CHECK(!reads(bad, "gpucc-tune 2\nkey k\n1 3\n", 2));   /* another format */
  CHECK(!reads(bad, "gpucc-tune 1\nkey k\n1 zz\n", 2));
  CHECK(!reads(bad, "gpucc-tune 1\nkey k\n1 3\n1 3\n", 2)); /* a step twice */
  CHECK(!reads(bad, "gpucc-tune 1\nkey k\n1\n", 2));      /* no words */
  CHECK(!reads(bad, "gpucc-tune 1\nkey k\n1 3", 2));       /* no end of line */
  CHECK(!reads(bad, "gpucc-tune 1\nkey k\n1 12345678901234567\n", 2)); /* 17 digits */
  CHECK(!reads(bad, "gpucc-tune 1\nkey k\n1 1 2 3 4 5 6 7 8 9 a\n", 2)); /* 10 words */
  CHECK(!reads(bad, "gpucc-tune 1\nkey k\n1  3\n", 2));   /* an empty word */
  CHECK(!reads(bad, "gpucc-tune 1\nkey k\n-1 3\n", 2));
  static const char nul[] = "gpucc-tune 1\nkey k\n1 3\n\0junk\n";
  CHECK(!reads_n(bad, nul, sizeof nul - 1, 2)); /* a NUL does not end the file early */
  char big[8192];
  memset(big, '1', sizeof big - 1);
  big[sizeof big - 1] = 0;
  CHECK(!reads(bad, big, 2)); /* larger than any file of a 2-step plan */

  /* Not a regular file: a FIFO nobody writes (must not block) and a folder. */
  char fifo[512];
  snprintf(fifo, sizeof fifo, "%s/fifo.txt", dir);
  CHECK(mkfifo(fifo, 0600) == 0);
  CHECK(!gpucc_tune_read(fifo, "k", r, 5));
  CHECK(!gpucc_tune_read(dir, "k", r, 5));
  unlink(fifo);
  unlink(bad);

  /* A folder that cannot be made: no file, no crash. */
  CHECK(!gpucc_tune_write("/proc/gpucc-no-such/tune/x.txt", "k", e, 5));

  unlink(path);
  free(path);
  char sub[512];
  snprintf(sub, sizeof sub, "%s/tune", dir);
  rmdir(sub);
  rmdir(dir);
  unsetenv("GPUCC_CACHE_DIR");
}

int main(void) {
  test_tune_cache();
  test_round_trip();
  test_ranged_round_trip();
  test_old_versions();
  test_modules();
  test_damage(sample_plan());
  test_damage(ranged_plan());
  test_invalid();
  test_invalid_ranged();
  test_payload();
  if (failures) fprintf(stderr, "test_plan: %d checks failed\n", failures);
  return failures ? 1 : 0;
}
