/* cg-impl.h: what the files of codegen/ share and nobody else sees: the text buffer the
 * translation unit grows in, the generation context, and the helpers that turn dtypes
 * into CUDA C types and conversions. */
#ifndef GPUCC_CG_IMPL_H
#define GPUCC_CG_IMPL_H

#include "codegen/codegen.h"

/* A growing NUL-terminated string. Out of memory aborts, like arena_alloc. */
typedef struct Buf {
  char *s;
  size_t len, cap;
} Buf;
void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_puts(Buf *b, const char *s);

typedef struct PwKernel PwKernel; /* pointwise.c */

typedef struct Cg {
  const Graph *g;
  Arena *arena; /* the Program's */
  Buf src;
  Step *steps;
  int nsteps, cap;
  Diag *d;
  PwKernel *epi; /* while an anchor's kernel is generated: its fuse group's epilogue */
  uint64_t inplace; /* the next kernel's KernelStep.inplace: its signature drops
                       __restrict__ from those inputs and the output; cleared by its step */
  const Node *viewed;  /* while a concat's kernel is generated: the concat, whose input k */
  const View *views;   /* it reads through views[k] (its base a kernel parameter) */
  const GroupPlan *pro; /* while a convolution's kernel is generated, the plan of its group
                           when it has a prologue (the cast and transposes its input is
                           read through: the kernel reads their source, prologue_src, a
                           parameter, through the transposes' strides, rounding as the
                           cast does); else NULL */
  const GroupPlan *plan; /* while a fuse group's kernel is generated: its plan */
  GroupLimits lim; /* what one kernel takes (ir.h) */
  int min_blocks; /* the next kernel's blocks per SM for __launch_bounds__ (0: none said),
                     which caps its registers; cleared by its signature */
  int cluster;    /* the next kernel's blocks per thread block cluster (0, 1: none); cleared
                     by its signature */
  int threads;    /* the next kernel's threads a block for __launch_bounds__, when its code is
                     written for a number of warps (0: the target's block); cleared by its
                     signature */
  unsigned shared_bytes; /* the next kernel step's dynamic shared memory (GC_DYN_SHARED), 0
                            for none; cleared by its step */
  const Target *target; /* CodegenOptions.target: every machine fact codegen uses */
  int variants;      /* CodegenOptions.variants: a choice's variants at most (2 to
                        CODEGEN_MAX_VARIANTS), or 1: no choices */
  int variant;       /* while a choice's variant is generated: its number, which its
                        kernels' names end in (_v<k>); -1 otherwise */
  int variant_first; /* the step its steps start at */
  size_t variant_src; /* the byte of the source its kernels start at */
  /* The kernel being written (kernel_begin): its name and where its signature starts in
   * src; and every kernel's code so far, its name made "@", to launch an earlier kernel
   * of the same code instead of compiling another (cg_kernel_step_values) */
  const char *open_name;
  size_t open_at;
  struct CgCode *codes; /* CodegenOptions.shared's, while this program is written */
  int ncodes, codes_cap;
  const char *prefix; /* CodegenOptions.prefix */
  /* by node position: the first node of its fuse group and the next one after it
   * (ir_fuse_groups) */
  int *group_first, *group_next;
  Users users; /* who reads each value (ir.h) */
  bool failed; /* a step was refused (cg_kernel_step_values): cg->d says why */
} Cg;

/* The domain an op computes in: f32 for f32/f16/bf16, f64 for f64, int64 for integers
 * and bool (wrapping arithmetic, like the reference executor). */
typedef enum Dom { DOM_F32, DOM_F64, DOM_I64 } Dom;

Dom cg_dom(DType t);
const char *cg_dom_type(Dom d); /* "float", "double", "long long" */
const char *cg_ctype(DType t);  /* the storage type of the preamble: "gc_f16", "float", ... */
/* C expressions, allocated in the program's arena: the stored value e (of type t) read
 * into domain dom, and the domain value v written as type t (the reference executor's
 * conversions: float to integer truncates and saturates, NaN gives 0; integer to float
 * goes through double). */
const char *cg_load(Cg *cg, DType t, Dom dom, const char *e);
const char *cg_store(Cg *cg, DType t, Dom dom, const char *v);
/* A literal of domain dom that always parses and holds exactly v rounded to it:
 * "((float)0.5)", "((double)-1.0)", "((float)-GC_INF)", "(-3LL)". */
const char *cg_lit(Cg *cg, double v, Dom dom);
/* The value v stored as t by dtype_store_f64, as a C expression of type cg_ctype(t):
 * the exact bits the reference executor would hold. */
const char *cg_const_of(Cg *cg, DType t, double v);
char *cg_fmt(Cg *cg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int cg_error(Cg *cg, const Node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Index arithmetic: "int" when every offset fits in 31 bits with room for a grid-stride
 * step, else "long long". */
const char *cg_idx_type(const Cg *cg, int64_t n);
/* Blocks for n threads' (or rows') worth of work at per_block each, at most the target's
 * grid cap (Target.max_blocks). */
unsigned cg_blocks(const Cg *cg, int64_t n, int64_t per_block);
/* The blocks of a thread block cluster that share a tile's `steps` K steps, from the
 * `want` of a generator's policy: at most `most`, the target's cluster size and
 * steps / min_steps; 1 on a target without clusters or below 2; then as few as give each
 * block the same number of steps. */
int64_t cg_cluster_split(const Cg *cg, int64_t want, int64_t most, int64_t steps,
                         int64_t min_steps);

/* Kernels: cg_kernel_begin writes the comment and the signature (reads are const
 * __restrict__ pointers in0.., writes out0..) and returns the kernel's name; the caller
 * writes the body and closing brace, then records the launch with cg_kernel_step. */
const char *cg_kernel_begin(Cg *cg, const Node *n, const char *note);
/* The same for one of several kernels of a node: its name ends in _<stage>. */
const char *cg_kernel_begin_part(Cg *cg, const Node *n, const char *stage, const char *note);
void cg_kernel_step(Cg *cg, const Node *n, const char *name, unsigned grid, unsigned block);
/* The same for a kernel whose operands are not one node's (a fuse group's): named
 * k<n's id>_<ops>_<n's first output>, its comment `head: (inputs) -> outputs`, its
 * parameters in0.. for in[] and out0.. for out[]. */
const char *cg_kernel_begin_values(Cg *cg, const Node *n, const char *ops, const char *head,
                                   const Value *const *in, int nin, const Value *const *out,
                                   int nout, const char *note);
void cg_kernel_step_values(Cg *cg, const Node *n, const char *name, unsigned grid,
                           unsigned block, const Value *const *in, int nin,
                           const Value *const *out, int nout);
Step *cg_add_step(Cg *cg, StepKind kind, const Node *n);
/* Variants (codegen.h's ChoiceStep): a generator that can do a node's work several ways
 * opens a choice (the index of its step), generates each variant's kernels and GEMMs as
 * usual between cg_variant_begin and cg_variant_end, and closes it. Open one only for two
 * variants or more. cg_choice_end clears the in-place flags of the variants' kernels:
 * the memory plan serves them all. */
int cg_choice_begin(Cg *cg, const Node *n, const char *label);
void cg_variant_begin(Cg *cg, int choice);
void cg_variant_end(Cg *cg, int choice);
void cg_choice_end(Cg *cg, int choice);
/* The grid-stride loop "for (idx_t i ...; i < count; ...) {" with idx_t sized for count
 * and for every operand of n (cg_max_numel), and its end: closes the loop and the
 * kernel, and records the launch. */
int64_t cg_max_numel(const Node *n);
void cg_loop_begin(Cg *cg, const Node *n, int64_t count);
void cg_loop_end(Cg *cg, const Node *n, const char *name, int64_t count);

/* Sizes, strides and offsets in codegen are plain int64 arithmetic: codegen_graph runs
 * the verifier first, which holds every value to IR_MAX_BYTES (2^48) bytes with every dim
 * included, so a product of a value's dims, or of a coordinate and a stride, and the sum
 * of a few such cannot overflow. What divides by a dim must still check for 0: empty
 * values are valid. */
static inline int64_t cg_numel(const Value *v) { return shape_numel(&v->type.shape); }
static inline int64_t cg_dim(const Value *v, int i) { return v->type.shape.dims[i].n; }

/* An index space walked in row-major order, with per-operand strides in elements (0:
 * broadcast; negative: reversed) and base offsets: a kernel's pointwise nodes' inputs
 * from outside (ir.h's GROUP_MAX_INPUTS) and its output. */
enum { CG_MAX_OPS = GROUP_MAX_INPUTS + 1 };
typedef struct Space {
  int rank, nops;
  int64_t dims[IR_MAX_RANK];
  int64_t stride[CG_MAX_OPS][IR_MAX_RANK];
  int64_t base[CG_MAX_OPS];
} Space;
void space_init(Space *s, int rank, const int64_t *dims);
int space_add_strides(Space *s, const int64_t *strides, int64_t base);
int space_add_bcast(Space *s, const Shape *shape); /* numpy broadcasting to s's dims */
/* Merges adjacent dims that every operand walks as one, and drops dims of size 1. */
void space_coalesce(Space *s);
bool space_is_identity(const Space *s, int op); /* operand op is offset i itself */
/* Writes "idx_t <p>K = ...;" (the element offset of operand K) for every operand, from
 * the flat index variable `i`; temporaries are <p>_r and <p>_c. */
void space_emit_offsets(Cg *cg, const Space *s, const char *i, const char *p,
                        const char *indent);

/* Epilogues (pointwise.c): a fuse group with an anchor (a conv) is that node's kernel, the
 * group's pointwise nodes after it (the plan's epilogue) applied to each output element
 * before the store. cg_epilogue_begin plans it; while it is active the anchor's
 * cg_kernel_begin and cg_kernel_step take the epilogue's inputs (parameters after the
 * anchor's own) and the group's output as out0 (and the anchor's output as out1 when the
 * plan stores it too), and its generator writes each output element with
 * cg_store_out(cg, n, "i", value) (plain `out0[i] = value;` when no epilogue is active).
 * cg_epilogue_end fails if the generator never called it. */
int cg_epilogue_begin(Cg *cg, const GroupPlan *p);
int cg_epilogue_end(Cg *cg);
const PwKernel *cg_epilogue_of(const Cg *cg, const Node *n); /* NULL: none for n */
void cg_epilogue_operands(const PwKernel *k, const Value *const **ext, int *next,
                          const Value *const **out, const Node *const **nodes, int *n);
/* The outputs: the group's (out0), then the anchor's when it is read outside the group
 * (out1, stored by cg_store_out beside the epilogue's result): 1 or 2. */
int cg_epilogue_nout(const PwKernel *k);
void cg_store_out(Cg *cg, const Node *n, const char *idx, const char *val, const char *indent);
/* The same, out0's element idx assigned to the lvalue dst instead (a vector's element that
 * the kernel then stores with its neighbours), of the type cg_out_dtype says. */
void cg_store_out_to(Cg *cg, const Node *n, const char *idx, const char *val, const char *dst,
                     const char *indent);
DType cg_out_dtype(const Cg *cg, const Node *n);
/* A chain of pointwise nodes (in node order, the last one's output the chain's) applied
 * inside another kernel to each element that kernel computes of anchor's output (the
 * attention kernel's scores and probabilities). The values it reads from outside are
 * parameters in<base>... (cg_epilogue_operands lists them); pre prefixes its variables.
 * cg_chain_emit writes the statements for the anchor's element val at flat index idx of
 * the chain's output shape, the result stored to the lvalue dst. */
const PwKernel *cg_chain_plan(Cg *cg, const Node *anchor, const Node *const *nodes, int n,
                              int base, const char *pre);
void cg_chain_emit(Cg *cg, const PwKernel *k, const char *idx, const char *val,
                   const char *dst, const char *indent);
/* The same at coordinates instead of a flat index, for a kernel that knows them (the
 * attention kernel's head, query and key): coord[d] is a C expression of coordinate d of
 * the chain's output. Each input's offset is the sum of the coordinates times its
 * strides, no division, so that the compiler shares a load among the elements that read
 * one element (a key's mask across rows) and hoists the outer dims' terms:
 * cg_chain_bases writes them once, "idx_t <pre>b<e>" for dims [0, lead), and
 * cg_chain_emit_coords adds the inner dims' for each element. A chain that also stores
 * its anchor's output (an epilogue's side output) needs the flat index:
 * cg_chain_coords_ok is false for it. */
bool cg_chain_coords_ok(const PwKernel *k);
void cg_chain_bases(Cg *cg, const PwKernel *k, int lead, const char *const *coord,
                    const char *indent);
void cg_chain_emit_coords(Cg *cg, const PwKernel *k, int lead, const char *const *coord,
                          const char *val, const char *dst, const char *indent);
/* A matmul's epilogue, which cuBLASLt applies (the plan's bias, residual and relu or
 * gelu, which the recognizer checked): sets g's bias, c (the residual; NULL when absent),
 * beta, gelu, relu and d (the group's output). */
void cg_gemm_epilogue(Cg *cg, const Node *mm, GemmStep *g);

/* The op families, one file each. */
int cg_pointwise(Cg *cg, const Node *n);
/* One kernel for nodes[0..n) of a fuse group, in node order; the last is the root. */
int cg_pointwise_group(Cg *cg, const Node *const *nodes, int n);
/* A loop group (pointwise nodes and nodes that only remap indices): a thread per element
 * of the root's output, each member's element computed at the index vector that reads it. */
int cg_loop_group(Cg *cg, const GroupPlan *p);
/* attention.c: an attention group (two matmuls with a softmax between them). */
int cg_attention(Cg *cg, const GroupPlan *p);
int cg_layout(Cg *cg, const Node *n); /* transpose expand slice concat split gather pad */
/* layout.c: a concat group: view nodes (transposes, reshapes) that make inputs of a
 * concat, the concat, and maybe its epilogue: one kernel reading the buffers before the
 * views through strides (the plan's operands). */
int cg_concat_group(Cg *cg, const GroupPlan *p);
int cg_reduce(Cg *cg, const Node *n); /* reduce_*, argmax, argmin */
int cg_softmax(Cg *cg, const Node *n); /* softmax, log_softmax */
int cg_layer_norm(Cg *cg, const Node *n);
int cg_matmul(Cg *cg, const Node *n);
/* gemm.c: a gemm group: maybe view nodes (transpose, gather of one constant index,
 * reshape) that make the matmul's first input, the matmul, and maybe its epilogue: one
 * GEMM reading the first view node's input with a leading dim and an offset (the plan's
 * operand). */
int cg_gemm_group(Cg *cg, const GroupPlan *p);
int cg_det(Cg *cg, const Node *n); /* gemm.c */
int cg_global_pool(Cg *cg, const Node *n); /* reduce.c: a reduction over the spatial dims */
int cg_instance_norm(Cg *cg, const Node *n);
int cg_hardmax(Cg *cg, const Node *n);
int cg_lp_norm(Cg *cg, const Node *n);
int cg_mean_variance_norm(Cg *cg, const Node *n);
int cg_nn(Cg *cg, const Node *n);    /* nn.c: conv, conv_transpose, pools, batch_norm, lrn, resize */
int cg_index(Cg *cg, const Node *n); /* index.c: tile, trilu, gathers, scatters, range, ... */
int cg_scan(Cg *cg, const Node *n);  /* scan.c: cumsum, topk */
int cg_loss(Cg *cg, const Node *n);  /* loss.c: nll_loss, softmax_cross_entropy */

#endif
