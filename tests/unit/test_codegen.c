/* Unit tests of codegen/ and compiler/nvrtc.c: the steps a graph becomes (GEMM
 * parameters worked out by hand from the row-major to column-major mapping, aliases,
 * which pointwise kernels are vectorized), the errors for what cannot be compiled, and
 * real NVRTC compiles: generated kernels compile to a cubin whose PTX has 128-bit loads,
 * a broken source gives NVRTC's log with the offending line, and the cache hands back
 * the same bytes. */
#include "codegen/codegen.h"
#include "compiler/nvrtc.h"
#include "frontends/frontends.h"
#include "tests/unit/check.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static Type ty(DType dt, int rank, const int64_t *dims) {
  Type t = {.dtype = dt};
  t.shape.rank = rank;
  for (int i = 0; i < rank; i++)
    t.shape.dims[i] = (Dim){dims[i], NULL};
  return t;
}

/* A graph y = op(inputs of the given types), generated for target t (NULL: the
 * default). NULL on error (in *d). The graph is returned through *gp (the caller frees it
 * after the program). */
static Program *gen1_for(const Target *t, Graph **gp, Op op, int nin, const Type *types,
                         const Attr *attrs, int nattr, Diag *d) {
  Graph *g = graph_new("t");
  Value *in[4];
  for (int k = 0; k < nin; k++) {
    char name[16];
    snprintf(name, sizeof name, "x%d", k);
    in[k] = graph_add_input(g, name, types[k]);
  }
  Value *y = graph_op(g, d, op, in, nin, attrs, nattr, "y");
  *gp = g;
  if (!y)
    return NULL;
  graph_add_output(g, y);
  CodegenOptions co = {.target = t};
  return codegen_graph(g, &co, d);
}

static Program *gen1(Graph **gp, Op op, int nin, const Type *types, const Attr *attrs,
                     int nattr, Diag *d) {
  return gen1_for(NULL, gp, op, nin, types, attrs, nattr, d);
}

static const Step *only_step(const Program *p, StepKind kind) {
  CHECK(p && p->nsteps >= 1);
  if (!p || p->nsteps < 1)
    return NULL;
  CHECK(p->steps[0].kind == kind);
  return p->steps[0].kind == kind ? &p->steps[0] : NULL;
}

/* The default of a piece of work that may be a choice (codegen.h's ChoiceStep): the first
 * step, or when that is a choice, its variant 0's one step. */
static const Step *default_step(const Program *p, StepKind kind) {
  CHECK(p && p->nsteps >= 1);
  if (!p || p->nsteps < 1)
    return NULL;
  if (p->steps[0].kind != STEP_CHOICE)
    return only_step(p, kind);
  const ChoiceStep *c = &p->steps[0].choice;
  CHECK(c->nvariants >= 2 && c->count[0] == 1 && p->nsteps >= 2);
  CHECK(p->nsteps >= 2 && p->steps[1].kind == kind);
  return p->nsteps >= 2 && p->steps[1].kind == kind ? &p->steps[1] : NULL;
}

/* ---------------------------------------------------------------- GEMM steps */

/* Y[4, 16] = X[4, 8] W[8, 16]: column-major Y^T = W^T X^T, so cuBLASLt's A is W (m = 16,
 * lda = 16), B is X (n = 4, ldb = 8), D is Y (ldc = 16). */
static void test_gemm_plain(void) {
  Diag d = {0};
  Graph *g;
  Type t[2] = {ty(DT_F32, 2, (int64_t[]){4, 8}), ty(DT_F32, 2, (int64_t[]){8, 16})};
  Program *p = gen1(&g, OP_MATMUL, 2, t, NULL, 0, &d);
  const Step *s = only_step(p, STEP_GEMM);
  if (s) {
    const GemmStep *m = &s->gemm;
    CHECK(p->nsteps == 1);
    CHECK(m->a == g->inputs[1] && m->b == g->inputs[0] && m->d == g->outputs[0]);
    CHECK(m->m == 16 && m->n == 4 && m->k == 8);
    CHECK(m->lda == 16 && m->ldb == 8 && m->ldc == 16);
    CHECK(m->batch == 1 && !m->trans_a && !m->trans_b);
    CHECK(m->dtype == DT_F32 && m->compute == DT_F32 && m->alpha == 1 && m->beta == 0);
    CHECK(strstr(p->source, "cuBLASLt GEMM step") != NULL);
  }
  program_free(p);
  graph_free(g);
}

/* e4m3 rows [4, 32] times weights [16, 32] (transpose_b = 1, N = 16): cuBLASLt's "TN"
 * fp8 GEMM, A the weights read transposed (lda = K = 32), scale as alpha, D in bf16. An
 * e4m3 matmul without transpose_b has no GEMM (cuBLASLt takes fp8 only as TN). */
static void test_gemm_fp8(void) {
  Diag d = {0};
  Graph *g;
  Type t[2] = {ty(DT_F8E4M3, 2, (int64_t[]){4, 32}), ty(DT_F8E4M3, 2, (int64_t[]){16, 32})};
  Attr a[3] = {attr_make_string("to", "bf16"), attr_make_int("transpose_b", 1),
               attr_make_float("scale", 0.25)};
  Program *p = gen1(&g, OP_MATMUL, 2, t, a, 3, &d);
  const Step *s = only_step(p, STEP_GEMM);
  if (s) {
    const GemmStep *m = &s->gemm;
    CHECK(m->a == g->inputs[1] && m->b == g->inputs[0] && m->trans_a && !m->trans_b);
    CHECK(m->m == 16 && m->n == 4 && m->k == 32);
    CHECK(m->lda == 32 && m->ldb == 32 && m->ldc == 16);
    CHECK(m->dtype == DT_F8E4M3 && m->dtype_d == DT_BF16 && m->compute == DT_F32);
    CHECK(m->alpha == 0.25);
    CHECK(strstr(p->source, "A (f8e4m3 weights [N, K]) transposed, alpha 0.25") != NULL);
  }
  program_free(p);
  graph_free(g);
  Type tn[2] = {ty(DT_F8E4M3, 2, (int64_t[]){4, 32}), ty(DT_F8E4M3, 2, (int64_t[]){32, 16})};
  Diag d2 = {0};
  p = gen1(&g, OP_MATMUL, 2, tn, a, 1, &d2);
  CHECK(!p && strstr(d2.msg, "an f8e4m3 matmul (node 0) runs only as one cuBLASLt GEMM of rows "
                             "times weights [N, K] (transpose_b = 1)"));
  graph_free(g);
}

/* [3, 4, 8] @ [3, 8, 16]: one strided batch of 3; strides are whole matrices. */
static void test_gemm_batched(void) {
  Diag d = {0};
  Graph *g;
  Type t[2] = {ty(DT_F16, 3, (int64_t[]){3, 4, 8}), ty(DT_F16, 3, (int64_t[]){3, 8, 16})};
  Program *p = gen1(&g, OP_MATMUL, 2, t, NULL, 0, &d);
  const Step *s = only_step(p, STEP_GEMM);
  if (s) {
    const GemmStep *m = &s->gemm;
    CHECK(p->nsteps == 1 && m->batch == 3);
    CHECK(m->m == 16 && m->n == 4 && m->k == 8);
    CHECK(m->stride_a == 8 * 16 && m->stride_b == 4 * 8 && m->stride_d == 4 * 16);
    CHECK(m->dtype == DT_F16 && m->compute == DT_F32);
  }
  program_free(p);
  graph_free(g);
}

/* [5, 4, 8] @ [8, 16]: the weight is shared, so the batch folds into 20 rows. */
static void test_gemm_folded(void) {
  Diag d = {0};
  Graph *g;
  Type t[2] = {ty(DT_F32, 3, (int64_t[]){5, 4, 8}), ty(DT_F32, 2, (int64_t[]){8, 16})};
  Program *p = gen1(&g, OP_MATMUL, 2, t, NULL, 0, &d);
  const Step *s = only_step(p, STEP_GEMM);
  if (s)
    CHECK(p->nsteps == 1 && s->gemm.m == 16 && s->gemm.n == 20 && s->gemm.k == 8 &&
          s->gemm.batch == 1 && s->gemm.ldb == 8);
  program_free(p);
  graph_free(g);
}

/* [2, 1, 4, 8] @ [3, 8, 16] -> [2, 3, 4, 16]: X repeats over the 3, W over the 2. No one
 * stride walks both batch dims, so: 2 steps of a batch of 3, with W's stride 128, X's 0
 * (broadcast), Y's 64; step c starts at X offset 32c and Y offset 192c. */
static void test_gemm_broadcast(void) {
  Diag d = {0};
  Graph *g;
  Type t[2] = {ty(DT_F32, 4, (int64_t[]){2, 1, 4, 8}), ty(DT_F32, 3, (int64_t[]){3, 8, 16})};
  Program *p = gen1(&g, OP_MATMUL, 2, t, NULL, 0, &d);
  CHECK(p && p->nsteps == 2);
  for (int c = 0; p && c < p->nsteps && c < 2; c++) {
    const GemmStep *m = &p->steps[c].gemm;
    CHECK(p->steps[c].kind == STEP_GEMM);
    CHECK(m->batch == 3 && m->stride_a == 128 && m->stride_b == 0 && m->stride_d == 64);
    CHECK(m->offset_a == 0 && m->offset_b == 32 * c && m->offset_d == 192 * c);
  }
  program_free(p);
  graph_free(g);
}

/* [8] @ [8, 16]: a row vector, M = 1. */
static void test_gemm_vector(void) {
  Diag d = {0};
  Graph *g;
  Type t[2] = {ty(DT_F64, 1, (int64_t[]){8}), ty(DT_F64, 2, (int64_t[]){8, 16})};
  Program *p = gen1(&g, OP_MATMUL, 2, t, NULL, 0, &d);
  const Step *s = only_step(p, STEP_GEMM);
  if (s)
    CHECK(s->gemm.m == 16 && s->gemm.n == 1 && s->gemm.k == 8 && s->gemm.compute == DT_F64);
  program_free(p);
  graph_free(g);
}

/* ---------------------------------------------------------------- aliases, kernels */

static void test_alias(void) {
  Diag d = {0};
  Graph *g;
  Type t = ty(DT_F32, 2, (int64_t[]){4, 6});
  Attr shape = attr_make_ints("shape", (int64_t[]){3, 8}, 2);
  Program *p = gen1(&g, OP_RESHAPE, 1, &t, &shape, 1, &d);
  const Step *s = only_step(p, STEP_ALIAS);
  if (s)
    CHECK(p->nsteps == 1 && s->alias.in == g->inputs[0] && s->alias.out == g->outputs[0]);
  CHECK(p && !strstr(p->source, "__global__ void __launch_bounds__(256) k0"));
  program_free(p);
  graph_free(g);
}

/* The text of the kernel named `name` in p's source (up to the next comment). */
static char *kernel_text(const Program *p, const char *name) {
  const char *at = strstr(p->source, name);
  if (!at)
    return strdup("");
  const char *end = strstr(at, "\n/* node");
  size_t n = end ? (size_t)(end - at) : strlen(at);
  char *s = malloc(n + 1);
  memcpy(s, at, n);
  s[n] = 0;
  return s;
}

/* integer matmul has no cuBLASLt path: a kernel of ours, a thread per output; the [3]
 * batch of a walks matrices of 2 x 5, b is shared by the batch. */
static void test_int_matmul(void) {
  Diag d = {0};
  Graph *g;
  Type ti[2] = {ty(DT_I32, 3, (int64_t[]){3, 2, 5}), ty(DT_I32, 2, (int64_t[]){5, 4})};
  Program *p = gen1(&g, OP_MATMUL, 2, ti, NULL, 0, &d);
  const Step *s = only_step(p, STEP_KERNEL);
  if (s) {
    CHECK(!strcmp(s->kernel.name, "k0_matmul_y") && s->kernel.nargs == 3);
    char *text = kernel_text(p, "k0_matmul_y");
    CHECK(strstr(text, "i < 24;") && strstr(text, "const idx_t bo0 = bi * 10;") &&
          strstr(text, "const idx_t bo1 = 0;") &&
          strstr(text, "acc = gc_iadd(acc, gc_imul((long long)in0[bo0 + row * 5 + k], (long long)in1[bo1 + k * 4 + col]));"));
    free(text);
  }
  program_free(p);
  graph_free(g);
}

static void test_vectorized(void) {
  Diag d = {0};
  Graph *g;
  Type t = ty(DT_F32, 1, (int64_t[]){4096});
  Program *p = gen1(&g, OP_RELU, 1, &t, NULL, 0, &d);
  const Step *s = only_step(p, STEP_KERNEL);
  if (s) {
    const KernelStep *k = &s->kernel;
    CHECK(!strcmp(k->name, "k0_relu_y"));
    CHECK(k->nargs == 2 && k->nread == 1 && k->args[0] == g->inputs[0] &&
          k->args[1] == g->outputs[0]);
    /* 4096 floats are 1024 float4s: 4 blocks of 256 */
    CHECK(k->grid[0] == 4 && k->grid[1] == 1 && k->block[0] == 256 && k->shared_bytes == 0);
    char *text = kernel_text(p, "k0_relu_y");
    CHECK(strstr(text, "gc_vec<gc_f32, 4>") && strstr(text, "i < 1024;"));
    free(text);
  }
  program_free(p);
  graph_free(g);
}

static void test_broadcast_vectorized(void) {
  Diag d = {0};
  Graph *g;
  /* a bias along the rows: each vector of 4 outputs reads 4 contiguous bias elements */
  Type t[2] = {ty(DT_F32, 2, (int64_t[]){64, 64}), ty(DT_F32, 1, (int64_t[]){64})};
  Program *p = gen1(&g, OP_ADD, 2, t, NULL, 0, &d);
  const Step *s = only_step(p, STEP_KERNEL);
  if (s) {
    CHECK(s->kernel.nargs == 3 && s->kernel.nread == 2);
    CHECK(s->kernel.grid[0] == 4); /* 1024 vectors of 4, one per thread */
    char *text = kernel_text(p, "k0_add_y");
    CHECK(strstr(p->source, "broadcast: 1024 vectors of 4") && strstr(text, "o_r = (i * 4)") &&
          strstr(text, "*(const v1_t *)(in1 + o1)"));
    free(text);
  }
  program_free(p);
  graph_free(g);
  /* a value per row: one element for a whole vector */
  Type col[2] = {ty(DT_F32, 2, (int64_t[]){64, 64}), ty(DT_F32, 2, (int64_t[]){64, 1})};
  p = gen1(&g, OP_MUL, 2, col, NULL, 0, &d);
  CHECK(p && strstr(p->source, "const gc_f32 a1 = in1[o1];"));
  program_free(p);
  graph_free(g);
  /* rows of 63 do not divide into vectors, nor do 4095 elements */
  Type odd2[2] = {ty(DT_F32, 2, (int64_t[]){64, 63}), ty(DT_F32, 1, (int64_t[]){63})};
  p = gen1(&g, OP_ADD, 2, odd2, NULL, 0, &d);
  CHECK(p && !strstr(p->source, "gc_vec<gc_f32") && strstr(p->source, "o1 += o_c * 1;"));
  program_free(p);
  graph_free(g);
  Type odd = ty(DT_F32, 1, (int64_t[]){4095});
  p = gen1(&g, OP_EXP, 1, &odd, NULL, 0, &d);
  CHECK(p && !strstr(p->source, "gc_vec<gc_f32"));
  program_free(p);
  graph_free(g);
}

/* A tiled transpose launches a 3-D grid: tiles of the two moving dims, then the batch. */
static void test_transpose_grid(void) {
  Diag d = {0};
  Graph *g;
  Type t = ty(DT_BF16, 3, (int64_t[]){5, 100, 70});
  Attr perm = attr_make_ints("perm", (int64_t[]){0, 2, 1}, 3);
  Program *p = gen1(&g, OP_TRANSPOSE, 1, &t, &perm, 1, &d);
  const Step *s = only_step(p, STEP_KERNEL);
  if (s)
    CHECK(s->kernel.grid[0] == 4 && s->kernel.grid[1] == 3 && s->kernel.grid[2] == 5);
  program_free(p);
  graph_free(g);
}

/* ---------------------------------------------------------------- the target */

/* Codegen's launch geometry is the target's: with 128-thread blocks and grids of at most
 * 8 blocks, a relu over 2^20 f32 (a thread per 4 of them) is 8 blocks of 128 declared
 * __launch_bounds__(128), the grid-stride loop doing the rest. The implicit GEMM is
 * written for 8 warps and keeps them whatever the target's block. */
static void test_target_geometry(void) {
  Target t;
  Diag d = {0};
  CHECK(target_for_arch("sm_90", &t, &d) == 0);
  t.block = 128;
  t.max_blocks = 8;
  Graph *g;
  Type x = ty(DT_F32, 2, (int64_t[]){1024, 1024});
  Program *p = gen1_for(&t, &g, OP_RELU, 1, &x, NULL, 0, &d);
  const Step *s = only_step(p, STEP_KERNEL);
  if (s) {
    CHECK(s->kernel.grid[0] == 8 && s->kernel.block[0] == 128);
    CHECK(strstr(p->source, "__launch_bounds__(128)") && !strstr(p->source, "__launch_bounds__(256"));
  }
  program_free(p);
  graph_free(g);
  Type c[2] = {ty(DT_F32, 4, (int64_t[]){2, 3, 32, 32}), ty(DT_F32, 4, (int64_t[]){8, 3, 3, 3})};
  p = gen1_for(&t, &g, OP_CONV, 2, c, NULL, 0, &d);
  s = only_step(p, STEP_KERNEL);
  if (s) {
    CHECK(s->kernel.block[0] == 256 && s->kernel.grid[0] == 8);
    CHECK(strstr(p->source, "__launch_bounds__(256, 2)"));
  }
  program_free(p);
  graph_free(g);
}

/* K split over a cluster follows the target: conv f32[1, 64, 8, 8] * w[16, 64, 3, 3],
 * pads 1, is one 64 x 32 tile of 576 taps (18 steps of 32), which sm_90's 132 SMs would
 * leave idle: split over min(264 / 1, 8 (the cluster size), 18 / 4) = 4 blocks of a
 * cluster; over 2 where clusters hold 2; not at all on sm_80 (no clusters), nor where
 * there are few SMs to fill (one: 2 / 1 = 2 blocks). That is the default, variant 0 of
 * the choice among the family's tiles and splits where there are several. */
static void test_target_clusters(void) {
  static const struct {
    const char *arch;
    int cluster_max, sms, split;
  } cases[] = {{"sm_90", 0, 0, 4}, {"sm_90", 2, 0, 2}, {"sm_80", 0, 0, 1}, {"sm_90", 0, 1, 2}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    Target t;
    Diag d = {0};
    CHECK(target_for_arch(cases[i].arch, &t, &d) == 0);
    if (cases[i].cluster_max)
      t.cluster_max = cases[i].cluster_max;
    if (cases[i].sms)
      t.sms = cases[i].sms;
    Graph *g;
    Type c[2] = {ty(DT_F32, 4, (int64_t[]){1, 64, 8, 8}), ty(DT_F32, 4, (int64_t[]){16, 64, 3, 3})};
    Attr pads = attr_make_ints("pads", (int64_t[]){1, 1, 1, 1}, 4);
    Program *p = gen1_for(&t, &g, OP_CONV, 2, c, &pads, 1, &d);
    const Step *s = default_step(p, STEP_KERNEL);
    if (s) {
      char want[64];
      snprintf(want, sizeof want, "__cluster_dims__(%d, 1, 1)", cases[i].split);
      CHECK(s->kernel.grid[0] == (unsigned)cases[i].split);
      CHECK(cases[i].split > 1 ? strstr(p->source, want) != NULL
                               : !strstr(p->source, "__cluster_dims__"));
    }
    program_free(p);
    graph_free(g);
  }
}

/* ---------------------------------------------------------------- nn, index, scan */

/* conv f64[2, 3, 32, 32] * w[8, 3, 3, 3], stride 2, pads 1: (32 + 2 - 3) / 2 + 1 = 16 per
 * side, so 2 * 8 * 16 * 16 = 4096 outputs, a thread each (f64: the direct kernel): 16
 * blocks of 256. */
static void test_conv_step(void) {
  Diag d = {0};
  Graph *g;
  Type t[2] = {ty(DT_F64, 4, (int64_t[]){2, 3, 32, 32}), ty(DT_F64, 4, (int64_t[]){8, 3, 3, 3})};
  Attr a[2] = {attr_make_ints("strides", (int64_t[]){2, 2}, 2),
               attr_make_ints("pads", (int64_t[]){1, 1, 1, 1}, 4)};
  Program *p = gen1(&g, OP_CONV, 2, t, a, 2, &d);
  const Step *s = only_step(p, STEP_KERNEL);
  if (s) {
    const KernelStep *k = &s->kernel;
    CHECK(p->nsteps == 1 && !strcmp(k->name, "k0_conv_y"));
    CHECK(k->nargs == 3 && k->nread == 2 && k->args[1] == g->inputs[1] && k->args[2] == g->outputs[0]);
    CHECK(k->grid[0] == 16 && k->block[0] == 256 && k->shared_bytes == 0);
    char *text = kernel_text(p, "k0_conv_y");
    CHECK(strstr(text, "i < 4096;") && strstr(text, "const idx_t p0 = o0 * 2 - 1 + q0;") &&
          strstr(text, "for (idx_t c = 0; c < 3; c++)") && strstr(text, "double acc = (double)0;"));
    free(text);
  }
  program_free(p);
  graph_free(g);
}

/* The same convolution in f32 is an implicit GEMM on tensor cores: 2 * 16 * 16 = 512
 * pixels by 8 channels over 27 taps, in 64 x 32 tiles: 8 blocks. Without tf32 = 1 every
 * value is split for 3xTF32; with it, rounded to TF32 once as it is stored. */
static void test_conv_tf32_step(void) {
  for (int tf32 = 0; tf32 < 2; tf32++) {
    Diag d = {0};
    Graph *g;
    Type t[2] = {ty(DT_F32, 4, (int64_t[]){2, 3, 32, 32}), ty(DT_F32, 4, (int64_t[]){8, 3, 3, 3})};
    Attr a[3] = {attr_make_ints("strides", (int64_t[]){2, 2}, 2),
                 attr_make_ints("pads", (int64_t[]){1, 1, 1, 1}, 4), attr_make_int("tf32", 1)};
    Program *p = gen1(&g, OP_CONV, 2, t, a, 2 + tf32, &d);
    const Step *s = only_step(p, STEP_KERNEL);
    if (s) {
      const KernelStep *k = &s->kernel;
      CHECK(k->grid[0] == 8 && k->block[0] == 256);
      char *text = kernel_text(p, "k0_conv_y");
      CHECK(strstr(text, tf32 ? "gc_mma_tf32(acc[i][j], fa[i], fb + 2 * j);" : "gc_mma_tf32(p, fa[i], fb + 2 * j);"));
      bool split = strstr(text, "gc_tf32_split(fa[i][e])"), rounded = strstr(text, "{{gc_tf32(ra[4 * q + 0]),");
      CHECK(split == !tf32 && rounded == (bool)tf32);
      CHECK(strstr(p->source, tf32 ? "512 x 8 x 27 in 64 x 32 tiles, TF32 */"
                                    : "512 x 8 x 27 in 64 x 32 tiles, 3xTF32 (f32 accuracy) */"));
      free(text);
    }
    program_free(p);
    graph_free(g);
  }
}

/* max_pool 3x3 stride 2 with ceil_mode over 10: (10 - 3) / 2 + 1 = 4, plus a partial
 * window that starts at 8 < 10, so 5; 2 planes of 25 outputs: one block. A global
 * average pool over planes of 2500 takes a block per plane. */
static void test_pool_steps(void) {
  Diag d = {0};
  Graph *g;
  Type t = ty(DT_F16, 4, (int64_t[]){1, 2, 10, 10});
  Attr a[3] = {attr_make_ints("kernel_shape", (int64_t[]){3, 3}, 2),
               attr_make_ints("strides", (int64_t[]){2, 2}, 2), attr_make_int("ceil_mode", 1)};
  Program *p = gen1(&g, OP_MAX_POOL, 1, &t, a, 3, &d);
  const Step *s = only_step(p, STEP_KERNEL);
  if (s) {
    CHECK(!strcmp(s->kernel.name, "k0_max_pool_y") && s->kernel.grid[0] == 1);
    CHECK(g->outputs[0]->type.shape.dims[2].n == 5);
    char *text = kernel_text(p, "k0_max_pool_y");
    CHECK(strstr(text, "i < 50;") && strstr(text, "if (p1 < 0 || p1 >= 10) continue;") &&
          strstr(text, "gc_h2f(in0[pl * 100 + p0 * 10 + p1])"));
    free(text);
  }
  program_free(p);
  graph_free(g);
  Type tg = ty(DT_F32, 4, (int64_t[]){2, 3, 50, 50});
  p = gen1(&g, OP_GLOBAL_AVERAGE_POOL, 1, &tg, NULL, 0, &d);
  s = only_step(p, STEP_KERNEL);
  if (s) {
    CHECK(!strcmp(s->kernel.name, "k0_global_average_pool_y") && s->kernel.grid[0] == 6);
    CHECK(strstr(p->source, "gc_block_reduce(acc, gc_add(), (float)0)") &&
          strstr(p->source, "acc / (float)2500"));
  }
  program_free(p);
  graph_free(g);
}

/* Two nodes whose kernels have one code (their names aside): the second step launches
 * the first kernel, whose code the source holds once; a third of another shape has its
 * own. */
static void test_same_code(void) {
  static const char text[] =
      "graph t(%a: f32[4, 9], %b: f32[4, 9], %c: f32[5, 9]) {\n"
      "  %p = sigmoid(%a)\n  %q = sigmoid(%b)\n  %r = sigmoid(%c)\n  return %p, %q, %r\n}\n";
  Diag d = {0};
  Graph *g = dsl_parse("t.gir", text, sizeof text - 1, &d);
  Program *p = g ? codegen_graph(g, NULL, &d) : NULL;
  CHECK(p && p->nsteps == 3);
  if (p && p->nsteps == 3) {
    const char *a = p->steps[0].kernel.name, *b = p->steps[1].kernel.name, *c = p->steps[2].kernel.name;
    CHECK(!strcmp(a, "k0_sigmoid_p") && !strcmp(b, a) && strcmp(c, a));
    CHECK(p->steps[1].kernel.args[0] == g->inputs[1] && p->steps[1].kernel.args[1] == g->outputs[1]);
    const char *first = strstr(p->source, "void __launch_bounds__(256) k0_sigmoid_p(");
    CHECK(first && !strstr(first + 40, "k0_sigmoid_p(") && !strstr(p->source, "k1_sigmoid_q("));
    CHECK(strstr(p->source, "/* launches k0_sigmoid_p: the same code */"));
  }
  program_free(p);
  graph_free(g);
}

/* topk over rows of 300: a block per row (100), sorting 512 in shared memory; it reads
 * x and writes the values and the indices. */
static void test_topk_step(void) {
  static const char text[] =
      "graph t(%x: f32[100, 300]) {\n  %v, %i = topk(%x) {k = 5}\n  return %v, %i\n}\n";
  Diag d = {0};
  Graph *g = dsl_parse("t.gir", text, sizeof text - 1, &d);
  Program *p = g ? codegen_graph(g, NULL, &d) : NULL;
  const Step *s = only_step(p, STEP_KERNEL);
  if (s) {
    const KernelStep *ks = &s->kernel;
    CHECK(!strcmp(ks->name, "k0_topk_v") && ks->grid[0] == 100 && ks->block[0] == 256);
    CHECK(ks->nargs == 3 && ks->nread == 1 && ks->args[1] == g->outputs[0] &&
          ks->args[2] == g->outputs[1]);
    CHECK(strstr(p->source, "__shared__ float key[512];"));
  }
  program_free(p);
  graph_free(g);
}

/* A scatter is two kernels of one node: the copy of the data (128 bits at a time), then
 * the updates. */
static void test_scatter_steps(void) {
  Diag d = {0};
  Graph *g;
  Type t[3] = {ty(DT_F32, 2, (int64_t[]){64, 16}), ty(DT_I64, 2, (int64_t[]){5, 1}),
               ty(DT_F32, 2, (int64_t[]){5, 16})};
  Program *p = gen1(&g, OP_SCATTER_ND, 3, t, NULL, 0, &d);
  CHECK(p && p->nsteps == 2);
  if (p && p->nsteps == 2) {
    const KernelStep *c = &p->steps[0].kernel, *u = &p->steps[1].kernel;
    CHECK(!strcmp(c->name, "k0_scatter_nd_y_copy") && !strcmp(u->name, "k0_scatter_nd_y_update"));
    CHECK(p->steps[0].node == p->steps[1].node);
    CHECK(c->nargs == 4 && c->nread == 3 && u->nargs == 4);
    char *text = kernel_text(p, "k0_scatter_nd_y_copy");
    CHECK(strstr(text, "gc_vec<gc_f32, 4>") && strstr(text, "i < 256;"));
    free(text);
    text = kernel_text(p, "k0_scatter_nd_y_update");
    CHECK(strstr(text, "i < 80;") && strstr(text, "if (ok) out0[off * 16 + e] = in2[i];"));
    free(text);
  }
  program_free(p);
  graph_free(g);
}

/* ---------------------------------------------------------------- errors */

static void test_errors(void) {
  Diag d = {0};
  Graph *g = graph_new("t");
  Type t = {.dtype = DT_F32};
  t.shape.rank = 2;
  t.shape.dims[0] = (Dim){-1, graph_intern(g, "B")};
  t.shape.dims[1] = (Dim){4, NULL};
  Value *x = graph_add_input(g, "x", t);
  Value *y = graph_op(g, &d, OP_TANH, &x, 1, NULL, 0, "y");
  graph_add_output(g, y);
  CHECK(!codegen_graph(g, NULL, &d));
  CHECK(strstr(d.msg, "%x has the symbolic shape f32[B, 4]; bind B with --dim B=SIZE"));
  /* once bound, it compiles */
  Diag d2 = {0};
  const char *names[] = {"B"};
  int64_t sizes[] = {3};
  CHECK(codegen_bind_dims(g, names, sizes, 1, &d2) == 0);
  /* the binding is recorded: where B was, at what size */
  CHECK(g->nbound == 1 && !strcmp(g->bound[0].sym, "B") && g->bound[0].size == 3 &&
        g->bound[0].input == 0 && g->bound[0].axis == 0);
  Program *p = codegen_graph(g, NULL, &d2);
  CHECK(p && g->outputs[0]->type.shape.dims[0].n == 3 && strstr(p->source, "f32[3, 4]"));
  program_free(p);
  graph_free(g);
  /* an op past its kernel's limits */
  Diag d5 = {0};
  Type t40 = ty(DT_F32, 2, (int64_t[]){40, 40});
  p = gen1(&g, OP_DET, 1, &t40, NULL, 0, &d5);
  CHECK(!p && strstr(d5.msg, "op det (node 0) of 40 x 40 matrices has no GPU kernel yet: at most 32 x 32"));
  graph_free(g);
  /* f8e5m2 has no GPU support yet (f8e4m3 has: fp8's quantized GEMM inputs) */
  Diag d4 = {0};
  Type t8 = ty(DT_F8E5M2, 1, (int64_t[]){4});
  p = gen1(&g, OP_NEG, 1, &t8, NULL, 0, &d4);
  CHECK(!p && strstr(d4.msg, "f8e5m2, which has no GPU support yet"));
  graph_free(g);
}

/* ---------------------------------------------------------------- NVRTC */

static const char graph_text[] =
    "graph n(%x: f32[32, 64], %b: f32[64], %h: f16[32, 64], %hs: f16[64], %i: i64[32, 64]) {\n"
    "  %y = relu(%x + %b)\n"
    "  %s = softmax(%y) {axis = -1}\n"
    "  %l = layer_norm(%h, %hs) {axis = 1}\n"
    "  %t = transpose(%s)\n"
    "  %r = reduce_sum(%i) {axes = [0]}\n"
    "  %a = argmax(%h) {axis = 1}\n"
    "  %e = exp(%x)\n"
    "  return %t, %l, %r, %a, %e\n"
    "}\n";

static void test_nvrtc(const char *cache) {
  Diag d = {0};
  Graph *g = dsl_parse("n.gir", graph_text, sizeof graph_text - 1, &d);
  Program *p = g ? codegen_graph(g, NULL, &d) : NULL;
  CHECK(p != NULL);
  if (!p) {
    fprintf(stderr, "%s\n", d.msg);
    graph_free(g);
    return;
  }
  NvrtcOptions opt = {.arch = "sm_80", .cache_dir = cache};
  NvrtcOutput out;
  int rc = nvrtc_compile(p->source, "n.cu", &opt, &out, &d);
  CHECK(rc == 0);
  if (rc)
    fprintf(stderr, "%s\n", d.msg);
  if (!rc) {
    /* a real ELF cubin, and PTX with every kernel and 128-bit global loads for %e */
    CHECK(out.cubin_size > 4 && !memcmp(out.cubin, "\177ELF", 4));
    CHECK(out.ptx && strstr(out.ptx, ".target sm_80"));
    for (int i = 0; i < p->nsteps; i++)
      if (p->steps[i].kind == STEP_KERNEL) {
        char entry[128];
        snprintf(entry, sizeof entry, ".entry %s(", p->steps[i].kernel.name);
        CHECK(strstr(out.ptx, entry) != NULL);
      }
    /* (plain ld.global: %e's kernel may write over its input, so nothing is __restrict__
     * and the loads do not take the read-only path) */
    CHECK(strstr(out.ptx, "ld.global.v4.f32") != NULL);
    CHECK(strstr(out.ptx, "shfl.sync.bfly") != NULL);
    CHECK(!out.from_cache);
    /* the second compile comes from the cache, byte for byte */
    NvrtcOutput again;
    CHECK(nvrtc_compile(p->source, "n.cu", &opt, &again, &d) == 0);
    CHECK(again.from_cache && again.cubin_size == out.cubin_size &&
          !memcmp(again.cubin, out.cubin, out.cubin_size) && !strcmp(again.ptx, out.ptx));
    nvrtc_output_free(&again);
    /* another target is another key */
    NvrtcOptions o90 = {.arch = "sm_90a", .cache_dir = cache};
    CHECK(nvrtc_compile(p->source, "n.cu", &o90, &again, &d) == 0);
    CHECK(!again.from_cache && again.ptx && strstr(again.ptx, ".target sm_90"));
    nvrtc_output_free(&again);
  }
  nvrtc_output_free(&out);
  program_free(p);
  graph_free(g);
}

static void test_nvrtc_errors(void) {
  const char *src = "// line 1\n"
                    "extern \"C\" __global__ void k(float *y) {\n"
                    "  y[0] = undefined_thing + 1;\n"
                    "}\n";
  Diag d = {0};
  NvrtcOptions opt = {.no_cache = true};
  NvrtcOutput out;
  CHECK(nvrtc_compile(src, "bad.cu", &opt, &out, &d) == -1);
  CHECK(strstr(d.msg, "NVRTC could not compile the generated CUDA C (sm_90)"));
  CHECK(strstr(d.msg, "bad.cu(3): error: identifier \"undefined_thing\" is undefined"));
  CHECK(strstr(d.msg, ">    3 |   y[0] = undefined_thing + 1;"));
  CHECK(strstr(d.msg, "     2 | extern \"C\""));
  CHECK(out.cubin == NULL && out.ptx == NULL);
  Diag d2 = {0};
  CHECK(nvrtc_check_arch("sm_75", &d2) == -1 && strstr(d2.msg, "unknown --arch 'sm_75'"));
  opt.arch = "sm_100";
  Diag d3 = {0};
  CHECK(nvrtc_compile(src, "bad.cu", &opt, &out, &d3) == -1 && strstr(d3.msg, "unknown --arch"));
}

/* Units compiled in parallel give what each gives compiled alone, in their order; a
 * failing unit is the one reported (the first, when two fail), and nothing comes back. */
static void test_nvrtc_units(void) {
  enum { N = 5 };
  char src[N][160];
  const char *units[N];
  for (int i = 0; i < N; i++) {
    snprintf(src[i], sizeof src[i],
             "extern \"C\" __global__ void k%d(float *y) { y[threadIdx.x] *= %d.0f; }\n", i,
             i + 2);
    units[i] = src[i];
  }
  NvrtcOptions opt = {.no_cache = true};
  NvrtcOutput outs[N];
  Diag d = {0};
  int rc = nvrtc_compile_units(units, N, "u", &opt, outs, &d);
  CHECK(rc == 0);
  if (rc)
    fprintf(stderr, "%s\n", d.msg);
  for (int i = 0; i < N && !rc; i++) {
    NvrtcOutput one;
    char entry[32];
    snprintf(entry, sizeof entry, ".entry k%d(", i);
    CHECK(nvrtc_compile(units[i], "one.cu", &opt, &one, &d) == 0);
    CHECK(outs[i].ptx && strstr(outs[i].ptx, entry));
    CHECK(one.cubin_size == outs[i].cubin_size &&
          !memcmp(one.cubin, outs[i].cubin, one.cubin_size));
    nvrtc_output_free(&one);
    nvrtc_output_free(&outs[i]);
  }
  units[1] = "extern \"C\" __global__ void bad1() { undefined_one; }\n";
  units[3] = "extern \"C\" __global__ void bad3() { undefined_three; }\n";
  Diag d2 = {0};
  CHECK(nvrtc_compile_units(units, N, "u", &opt, outs, &d2) == -1);
  CHECK(strstr(d2.msg, "u.1.cu(1): error") && strstr(d2.msg, "undefined_one") &&
        !strstr(d2.msg, "undefined_three"));
  for (int i = 0; i < N; i++)
    CHECK(outs[i].cubin == NULL && outs[i].ptx == NULL);
}

int main(void) {
  test_gemm_plain();
  test_gemm_fp8();
  test_gemm_batched();
  test_gemm_folded();
  test_gemm_broadcast();
  test_gemm_vector();
  test_alias();
  test_int_matmul();
  test_vectorized();
  test_broadcast_vectorized();
  test_transpose_grid();
  test_target_geometry();
  test_target_clusters();
  test_conv_step();
  test_conv_tf32_step();
  test_pool_steps();
  test_topk_step();
  test_same_code();
  test_scatter_steps();
  test_errors();
  char cache[] = "/tmp/gpucc-test-codegen-XXXXXX";
  if (!mkdtemp(cache)) {
    fprintf(stderr, "cannot make a temporary folder\n");
    return 1;
  }
  test_nvrtc(cache);
  test_nvrtc_errors();
  test_nvrtc_units();
  /* the cache folder holds .cubin and .ptx files only; remove them */
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache);
  if (system(cmd) != 0)
    fprintf(stderr, "note: could not remove %s\n", cache);
  if (failures)
    fprintf(stderr, "%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
