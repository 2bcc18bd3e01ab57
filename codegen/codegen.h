/* codegen.h: the one public header of gpucc's codegen layer.
 *
 * codegen turns a verified IR graph whose shapes are all concrete into
 *   - one CUDA C translation unit (a string) holding an `extern "C" __global__` kernel per
 *     node that needs work, with every shape and stride baked in as a constant (a node
 *     whose kernel would have the code of an earlier one, its name aside, launches that
 *     one: its comment stays, saying so), and
 *   - the steps that run the graph, in execution order: a kernel launch, a GEMM for
 *     cuBLASLt, or an alias (a node whose output is its input's bytes: no work).
 *
 * It writes text and structs only: no CUDA runtime or driver call, no NVRTC (the driver
 * compiles the text, see compiler/nvrtc.h). Steps refer to IR values by pointer, so a
 * Program is valid while its graph lives. A runtime plan is built from it by giving every
 * value that is not an alias a buffer (an arena offset) and every alias its source's.
 *
 * Buffers: every value lives in one dense row-major buffer of numel * dtype size bytes.
 * Kernels use 128-bit loads and stores on contiguous operands, so every buffer must
 * start at a 16-byte aligned address (the runtime's arena offsets are multiples of 256).
 * bool is one byte holding 0 or 1; f16 and bf16 are their IEEE / bfloat16 bit patterns.
 */
#ifndef GPUCC_CODEGEN_H
#define GPUCC_CODEGEN_H

#include "ir/ir.h"

/* A kernel's parameters take at most CODEGEN_MAX_PARAM_BYTES: 32,764 bytes from CUDA
 * 12.1 on Volta and newer (every GPU gpucc targets, and the NVRTC and driver a cubin of
 * it needs), 4,096 before. Every parameter of gpucc's kernels is an 8-byte device
 * pointer, so a kernel takes at most CODEGEN_MAX_PARAMS values; one of more is an error
 * naming its node, never NVRTC's. A split or concat of more than CODEGEN_PART_OPERANDS
 * outputs or inputs is several kernels, each of a part of them: NVRTC's time for a kernel
 * grows faster than the operands it picks from (a split into 1,000 outputs as one
 * kernel: 13 s; in parts: under a second). */
enum {
  CODEGEN_MAX_PARAM_BYTES = 32764,
  CODEGEN_MAX_PARAMS = CODEGEN_MAX_PARAM_BYTES / 8,
  CODEGEN_PART_OPERANDS = 128
};

typedef enum StepKind {
  STEP_KERNEL, /* launch a kernel of the translation unit */
  STEP_GEMM,   /* one cuBLASLt matmul; no kernel */
  STEP_ALIAS,  /* out is in's buffer, reinterpreted (reshape, squeeze, ...); no work */
  STEP_CHOICE, /* variants of the work of the steps after it: the runtime runs one */
} StepKind;

/* A kernel launch: name<<<grid, block, shared_bytes>>>(args...). The kernel's parameters
 * are the device pointers of args[] in order: the values it reads (args[0 .. nread)),
 * then the values it writes (args[nread .. nargs)). A value may appear twice. Kernels
 * take no other parameters: sizes are constants in the source. */
typedef struct KernelStep {
  const char *name;
  unsigned grid[3], block[3];
  unsigned shared_bytes; /* dynamic shared memory (GC_DYN_SHARED): the implicit GEMM's stages */
  const Value **args;
  int nargs, nread;
  /* Bit k: the kernel's one output may take the buffer of read args[k] (a pointwise
   * kernel reading that input's element i, and nothing else of it, before it writes
   * output element i; neither parameter is __restrict__). The memory plan decides. */
  uint64_t inplace;
} KernelStep;

/* A GEMM in cuBLASLt's column-major terms:
 *   for each batch i < batch:  D_i = alpha * op(A_i) * op(B_i) + beta * C_i (+ bias)
 * where X_i starts at element offset_x + i * stride_x of X's buffer (a stride of 0
 * broadcasts one matrix over the batch) and C_i is D_i with beta 0, unless a fuse group
 * gave the matmul an epilogue: a bias (added to every row of D, which is every output
 * row-vector of the row-major result) and a residual (C, beta 1), then a ReLU of the
 * sum (cuBLASLt's RELU_BIAS epilogue), each optional; or a bias and then GELU's tanh
 * approximation of the sum (GELU_BIAS).
 * op(A) is m x k, op(B) k x n, D m x n; ld* are the leading dims in elements.
 *
 * gpucc's tensors are row-major, so a row-major matmul Y[M,N] = X[M,K] W[K,N] is written
 * as the column-major Y^T = W^T X^T: cuBLASLt's A is the IR's second input (W), B the
 * first (X), m = N, n = M, lda = N, ldb = K, ldc = N, no transposes. */
typedef struct GemmStep {
  const Value *a, *b, *d; /* cuBLASLt's A, B and D */
  const Value *c;         /* C, laid out like D (a residual added with beta 1); NULL: D */
  const Value *bias;      /* NULL, or the bias epilogue's vector of m elements */
  bool gelu;              /* with bias: GELU (tanh) of the sum; no residual then */
  bool relu;              /* with bias: ReLU of the sum, the residual's included */
  DType dtype;            /* of A and B */
  DType dtype_d;          /* of C and D: dtype, or f32 from f16/bf16 (matmul's to = "f32") */
  DType compute;          /* accumulation: DT_F32 for f32/f16/bf16, DT_F64 */
  bool tf32;              /* f32 products on TF32 tensor cores (the matmul's tf32 = 1) */
  bool trans_a, trans_b;  /* op(X) = X^T; false for a plain matmul */
  int64_t m, n, k, lda, ldb, ldc;
  int64_t batch, stride_a, stride_b, stride_d;
  int64_t offset_a, offset_b, offset_d;
  double alpha, beta;
} GemmStep;

/* out has the same bytes as in: the runtime gives it in's buffer. */
typedef struct AliasStep {
  const Value *in, *out;
} AliasStep;

/* Variants of one piece of work (a GEMM with another tile shape or K split, cuBLASLt or a
 * kernel), of which the runtime runs the one it measures fastest on the actual GPU: the
 * steps after this one are count[0] steps of variant 0 (the default, taken untimed with
 * GPUCC_TUNE=0), then count[1] of variant 1, and so on; kernels and GEMMs only. Every
 * variant reads and writes the same values, and none writes in place, since the memory
 * plan serves them all. */
enum { CODEGEN_MAX_VARIANTS = 16 };
typedef struct ChoiceStep {
  const char *label; /* what varies, for the runtime's log */
  int nvariants;     /* 2 or more */
  int count[CODEGEN_MAX_VARIANTS];
  size_t source_bytes[CODEGEN_MAX_VARIANTS]; /* of Program.source: each variant's kernels */
} ChoiceStep;

typedef struct Step {
  StepKind kind;
  const Node *node; /* the IR node the step implements */
  union {
    KernelStep kernel;
    GemmStep gemm;
    AliasStep alias;
    ChoiceStep choice;
  };
} Step;

typedef struct Program {
  char *source; /* the CUDA C translation unit, NUL-terminated */
  size_t source_len;
  /* Where the source may be cut into translation units of their own (each after the
   * preamble, codegen_preamble_size): the end of each node's code, ascending. A kernel
   * one unit launches and another holds (dedup) is found by name in the other's module. */
  size_t *cuts;
  int ncuts;
  Step *steps;
  int nsteps;
  Arena *arena_; /* owns everything above; private */
} Program;

/* The GPU is opt->target (ir.h): its SM count sizes the tiles of GEMMs, convolutions and
 * attention so that they fill it, its shared memory bounds the kernels that keep rows
 * there, its clusters let implicit GEMMs split K over the blocks of a cluster, and its
 * launch defaults (Target.block threads a block, grids of at most Target.max_blocks
 * blocks with grid-stride loops doing the rest) are every other kernel's geometry. */
/* Programs that go into one module (the shape classes of a ranged model,
 * docs/dynamic-shapes.md): a kernel whose code an earlier program of the group has
 * launches that one, and the preamble goes into the first program's source only, so the
 * programs' sources, concatenated in order, are one translation unit. */
typedef struct CodegenShared CodegenShared;
CodegenShared *codegen_shared_new(void); /* NULL when out of memory */
/* The preamble's length: the first program's source begins with it. Put before the
 * source of later programs, it makes them translation units of their own, which NVRTC
 * compiles in parallel; a kernel that one launches and another unit holds is found in
 * that unit's module by its name. */
size_t codegen_preamble_size(void);
void codegen_shared_free(CodegenShared *s);

typedef struct CodegenOptions {
  const Target *target; /* NULL: target_default() */
  int variants; /* a choice's variants at most; 1: none (each group's default); 0: all */
  const char *prefix;    /* put before every kernel's name ("c3_"); NULL: none */
  CodegenShared *shared; /* NULL: the program is a module of its own */
} CodegenOptions;

/* Generates the program of g, which must verify and have only concrete shapes (a
 * symbolic dim is an error naming the value and the flag that binds it), for a target
 * that passes target_check. An op without a
 * GPU kernel yet is an error naming the op and the node. opt may be NULL. Returns NULL
 * with d set on error. */
Program *codegen_graph(const Graph *g, const CodegenOptions *opt, Diag *d);
void program_free(Program *p);

/* The step's kind as a word ("kernel", "gemm", "alias", "choice"), for listings. */
const char *step_kind_name(StepKind k);

/* Binds symbolic dims by name (`--dim N=8`): rewrites the inputs' types and infers
 * every node again. A name that no input of g uses is an error naming it. */
int codegen_bind_dims(Graph *g, const char *const *names, const int64_t *sizes, int n,
                      Diag *d);

#endif
