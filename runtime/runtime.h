/* runtime.h: the one public header of gpucc's runtime layer.
 *
 * The runtime runs a compiled model. It depends on nothing of gpucc: not the IR, not the
 * compiler, not NVRTC. It loads libcuda.so.1 and libcublasLt with dlopen, so a program
 * that links it (gpucc itself, for its JIT API) still starts on a machine with no driver;
 * "no CUDA driver" and "no device" are then ordinary errors. This header includes no CUDA
 * header: device pointers and streams are void *.
 *
 * Sections:
 *   errors        status codes and the thread-local message of the last failure
 *   plan          what codegen hands the runtime: a versioned byte blob, its in-memory
 *                 form, the builder the compiler links (pure C) and the validating reader
 *   model         what model.so exports and the JIT API reuses: create, query, run, destroy
 *   model.so      the payload appended to libgpucc_model.so, and the writer the compiler
 *                 calls to make a model.so
 *
 * Every function that can fail returns a GpuccStatus; on failure gpucc_last_error()
 * holds one message saying what failed (naming the CUDA or cuBLASLt call, the step, the
 * kernel, the input). Nothing here prints or exits.
 */
#ifndef GPUCC_RUNTIME_H
#define GPUCC_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The runtime is built with -fvisibility=hidden; only these symbols leave a model.so. */
#define GPUCC_API __attribute__((visibility("default")))

/* ---------------------------------------------------------------- errors (error.c) */

typedef enum GpuccStatus {
  GPUCC_OK = 0,
  GPUCC_ERR_INVALID_ARGUMENT, /* NULL, index out of range, wrong input count/name/shape */
  GPUCC_ERR_BAD_PLAN,         /* a plan or a model.so payload that fails validation */
  GPUCC_ERR_NO_DRIVER,        /* libcuda.so.1 (or libcublasLt) cannot be loaded */
  GPUCC_ERR_NO_DEVICE,        /* the driver sees no device, or not that one */
  GPUCC_ERR_OUT_OF_MEMORY,    /* device or pinned host memory */
  GPUCC_ERR_CUDA,             /* any other CUDA driver error */
  GPUCC_ERR_CUBLAS,           /* a cuBLASLt error, or no algorithm for a GEMM */
  GPUCC_ERR_IO,               /* reading or writing a file */
} GpuccStatus;

GPUCC_API const char *gpucc_status_name(GpuccStatus s); /* "bad plan" */
/* The message of the last failing call on this thread ("" if none). Successful calls
 * leave it alone, like errno. Valid until the thread's next failing call. */
GPUCC_API const char *gpucc_last_error(void);

/* ---------------------------------------------------------------- element types (plan.c) */

/* The runtime's own element types; the numbers are part of the plan format. */
typedef enum GpuccDType {
  GPUCC_DT_INVALID = 0,
  GPUCC_DT_F32 = 1,
  GPUCC_DT_F16 = 2,
  GPUCC_DT_BF16 = 3,
  GPUCC_DT_F64 = 4,
  GPUCC_DT_I64 = 5,
  GPUCC_DT_I32 = 6,
  GPUCC_DT_I16 = 7,
  GPUCC_DT_I8 = 8,
  GPUCC_DT_U8 = 9,
  GPUCC_DT_BOOL = 10,  /* one byte, 0 or 1 */
  GPUCC_DT_F8E4M3 = 11,
  GPUCC_DT_F8E5M2 = 12,
  GPUCC_DT_COUNT
} GpuccDType;

GPUCC_API const char *gpucc_dtype_name(GpuccDType t); /* "f32", as gpucc's IR spells it; "?" */
GPUCC_API size_t gpucc_dtype_size(GpuccDType t);      /* bytes; 0 for an invalid type */

/* ---------------------------------------------------------------- plan (plan.c)
 *
 * A plan says everything the runtime does, decided at compile time. Memory is three
 * device regions: the arena (inputs, outputs and every intermediate live at fixed byte
 * offsets in it), the weights (uploaded once at create, never written), and the cuBLASLt
 * workspace. The steps run in order and are captured as one CUDA graph.
 *
 * Shape classes (version 5). A ranged plan serves every size of its symbols in their
 * declared sizes (batch = 1..64, seq = 1..512): an input or output axis may be a symbol
 * rather than a fixed dim. It holds one program per shape class, each compiled with every
 * symbol bound at one size (batch at 1, 2, 4, ..., 64), all sharing the modules, the
 * weights and the arena (each class uses the arena's start: classes never run at once).
 * A run takes the smallest class that holds the actual sizes. Its inputs go to the start
 * of each ranged axis of their class slots, the rest of each slot zeroed (padding); each
 * symbol's actual size is written as an i64 where the class's kernels read it; the
 * class's steps run; the real part of each output is copied out. A plan without symbols
 * is a fixed plan: its top-level steps, its tensors at their offsets.
 *
 * A symbol may be rows (GPUCC_SYMBOL_ROWS): no op combines elements along it, so a run
 * may cut its size into chunks, each run by a class on a slice of the inputs, with no
 * padding along it (batch 9 as 8 rows in the batch-8 class, then 1 in the batch-1 class;
 * see the model section).
 *
 * Modules (version 6). The kernels are CUDA C compiled as one or more translation units
 * (so that a compiler can compile them in parallel), each a module: a cubin, its PTX, or
 * both. A kernel's name is unique across the modules; a kernel step names only the
 * kernel, and create finds it in the first module that has it.
 *
 * Byte format, version 6, every integer little-endian:
 *   header   "GPUCCPLN"  u32 version  u32 nsections  u64 body_len  u64 fnv1a64(body)
 *   body     nsections times, in the order of their tags: u32 tag  u32 0  u64 len  then
 *            len bytes
 *   tags     1 SIZES    u64 arena_bytes  u64 weights_bytes  u64 workspace_bytes
 *            2 MODULE   u32 n, n times: u64 cubin_len, cubin  u64 ptx_len, ptx (no NUL
 *                       in it), one of the two not empty
 *            3 INPUTS   u32 n, n tensors: str name  u32 dtype  u32 rank  i64 dims[rank]
 *            4 OUTPUTS      u64 arena_offset           (same for both)
 *            5 STEPS    u32 n, n times: u32 kind, then the step's fields in the order of
 *                       the structs below; a ptr is u32 region  u32 0  u64 offset, a
 *                       double is its IEEE bits as u64; a choice is str label
 *                       u32 nvariants  u32 count[nvariants]
 *            6 SYMBOLS  u32 n, n times: str name  u32 flags  u32 npieces, npieces
 *                       times i64 lo  i64 hi; then for each input in order, rank times
 *                       i32 sym; then for each output the same
 *            7 CLASSES  u32 n, n times: i64 bound[nsyms]  u64 arena_bytes
 *                       u64 input_offset[ninputs]  u64 output_offset[noutputs]
 *                       u64 size_offset[nsyms]  u32 nsteps, the steps as in STEPS
 *   str      u32 len, len bytes, one NUL
 * A fixed plan has sections 1 to 5, a ranged plan all seven. Each section appears
 * exactly once, each is read to its last byte, and nothing follows the last one. The
 * checksum makes a damaged file an error; the reader still checks every field on its
 * own, so a well-formed but wrong plan is an error too, never a crash. The reader also
 * takes versions 4 and 5, whose MODULE is one module without the count (both lengths 0:
 * none), and whose other sections are version 6's (version 4: fixed plans only).
 */

#define GPUCC_PLAN_MAGIC "GPUCCPLN"
/* 2: the GEMM bias epilogue; 3: its GELU form; 4: choices; 5: shape classes; 6: several
 * modules */
#define GPUCC_PLAN_VERSION 6u
#define GPUCC_MAX_RANK 8
#define GPUCC_MAX_NAME 4096        /* bytes in a tensor or kernel name */
#define GPUCC_MAX_KERNEL_ARGS 1024 /* CUDA allows 32 KiB of parameters: 4096 of 8 bytes */
#define GPUCC_MAX_MODULES 1024     /* translation units: far more than a compiler makes */
/* Codegen places arena buffers at multiples of this: kernels use 128-bit accesses and
 * cuBLASLt its fastest algorithms on such addresses. */
#define GPUCC_ARENA_ALIGN 256

typedef enum GpuccRegion { GPUCC_REGION_ARENA = 0, GPUCC_REGION_WEIGHTS = 1 } GpuccRegion;

/* A device address: a byte offset into a region. */
typedef struct GpuccPtr {
  GpuccRegion region;
  uint64_t offset;
} GpuccPtr;

typedef enum GpuccArgKind { GPUCC_ARG_PTR = 0, GPUCC_ARG_SCALAR = 1 } GpuccArgKind;

/* One kernel parameter. A scalar is passed as 8 bytes, so the kernel's parameter must be
 * a 64-bit type (long long, unsigned long long, double: codegen puts the bits here). */
typedef struct GpuccArg {
  GpuccArgKind kind;
  GpuccPtr ptr;    /* GPUCC_ARG_PTR */
  uint64_t scalar; /* GPUCC_ARG_SCALAR */
} GpuccArg;

#define GPUCC_MAX_SYMBOLS 8
#define GPUCC_MAX_PIECES 16       /* points and ranges one symbol lists */
#define GPUCC_MAX_CLASSES 256
#define GPUCC_MAX_SIZE (INT64_C(1) << 31) /* the largest size a symbol may take */
#define GPUCC_NO_OFFSET UINT64_MAX  /* a class's size_offset for a symbol it does not read */

/* A model input or output: a dense row-major tensor at an arena offset. */
typedef struct GpuccTensorInfo {
  char *name;
  GpuccDType dtype;
  int rank;
  int64_t dims[GPUCC_MAX_RANK]; /* a ranged axis: its symbol's largest size */
  int8_t sym[GPUCC_MAX_RANK];   /* per axis: the symbol it is; -1: a fixed dim */
  uint64_t offset; /* in the arena; a ranged plan's classes have their own (0 here) */
} GpuccTensorInfo;

/* A symbol's flags. ROWS: no op combines elements along this symbol's axes, and it is
 * exactly one axis of every output and at most one of each input: a run may split its
 * size into chunks, each run by a class on a slice of the inputs and written to a slice
 * of the outputs. The compiler promises the first part (the runtime cannot see it); the
 * validation checks the axes. */
#define GPUCC_SYMBOL_ROWS 1u

/* A symbolic dim and the sizes it takes: pieces lo..hi, ascending and disjoint, a point
 * being lo == hi; 1 <= lo <= hi <= GPUCC_MAX_SIZE. */
typedef struct GpuccSymbol {
  char *name; /* "batch" */
  uint32_t flags; /* GPUCC_SYMBOL_ROWS or 0 */
  int npieces;
  int64_t lo[GPUCC_MAX_PIECES], hi[GPUCC_MAX_PIECES];
} GpuccSymbol;

typedef enum GpuccStepKind {
  GPUCC_STEP_KERNEL = 1,
  GPUCC_STEP_GEMM = 2,
  GPUCC_STEP_COPY = 3,
  GPUCC_STEP_MEMSET = 4,
  GPUCC_STEP_CHOICE = 5,
} GpuccStepKind;

/* One compiled translation unit. */
typedef struct GpuccModule {
  unsigned char *cubin; /* may be NULL: then the PTX is JIT-compiled by the driver */
  size_t cubin_len;
  char *ptx; /* NUL-terminated, ptx_len bytes before the NUL; may be NULL (not both) */
  size_t ptx_len;
} GpuccModule;

/* name<<<grid, block, shared_bytes>>>(args...): an extern "C" kernel of one of the
 * modules. */
typedef struct GpuccKernel {
  char *name;
  uint32_t grid[3], block[3];
  uint32_t shared_bytes; /* dynamic; above 48 KiB the runtime raises the kernel's limit */
  int nargs;
  GpuccArg *args;
} GpuccKernel;

typedef enum GpuccCompute {
  GPUCC_COMPUTE_32F = 1,           /* f32 accumulation, TF32 off: the fp32 reference */
  GPUCC_COMPUTE_32F_FAST_TF32 = 2, /* f32 data through TF32 tensor cores */
  GPUCC_COMPUTE_64F = 3,
} GpuccCompute;

/* What cuBLASLt applies to each GEMM result before storing it. */
typedef enum GpuccEpilogue {
  GPUCC_EPILOGUE_NONE = 0,
  GPUCC_EPILOGUE_BIAS = 1,      /* + bias */
  GPUCC_EPILOGUE_GELU_BIAS = 2, /* GELU(... + bias), GELU's tanh approximation */
  GPUCC_EPILOGUE_RELU_BIAS = 3, /* max(... + bias, 0) */
  GPUCC_EPILOGUE_LAST = GPUCC_EPILOGUE_RELU_BIAS
} GpuccEpilogue;

/* One cuBLASLt matmul, in its column-major terms:
 *   for each i < batch:  D_i = epilogue(alpha * op(A_i) op(B_i) + beta * C_i)
 * op(X) is X or X^T; op(A) is m x k, op(B) k x n, C and D m x n. X_i starts stride_x
 * elements after X_{i-1} (0 broadcasts one matrix to every batch; D may not be 0 when
 * batch > 1). Leading dims are in elements. Types (a, b, cd): all f64 with COMPUTE_64F;
 * f32 with either 32F compute; (f16, f16, f16|f32) or (bf16, bf16, bf16|f32) with 32F. */
typedef struct GpuccGemm {
  GpuccPtr a, b, c, d;
  GpuccDType a_type, b_type, cd_type;
  GpuccCompute compute;
  int trans_a, trans_b; /* 0 or 1 */
  int64_t m, n, k, lda, ldb, ldc, ldd;
  int64_t batch, stride_a, stride_b, stride_c, stride_d;
  double alpha, beta;
  /* A bias epilogue adds bias[r] (m elements of cd_type) to every element of row r of
   * each D_i, the row-major output's bias per feature; bias is unused with none. */
  GpuccEpilogue epilogue;
  GpuccPtr bias;
} GpuccGemm;

typedef struct GpuccCopy {
  GpuccPtr dst, src; /* dst in the arena; the two ranges may not overlap */
  uint64_t bytes;
} GpuccCopy;

typedef struct GpuccMemset {
  GpuccPtr dst; /* in the arena */
  uint64_t bytes;
  uint8_t value; /* every byte */
} GpuccMemset;

/* Variants of one piece of work, of which the runtime runs one: the steps after the
 * choice hold count[0] steps of variant 0, then count[1] of variant 1, and so on. Each
 * variant computes the same values (a GEMM or a convolution with another tile shape or K
 * split, cuBLASLt against a kernel of the modules); create times them on the GPU and keeps
 * the fastest (see the model section). Variant 0 is the default, taken untimed with
 * GPUCC_TUNE=0. A variant's steps are kernels or GEMMs; a choice holds no choice. */
#define GPUCC_MAX_VARIANTS 16
typedef struct GpuccChoice {
  char *label; /* what varies, for logs: "k12_matmul 128x768x3072" */
  int nvariants;                      /* 1 to GPUCC_MAX_VARIANTS */
  uint32_t count[GPUCC_MAX_VARIANTS]; /* steps of each variant, 1 or more */
} GpuccChoice;

typedef struct GpuccStep {
  GpuccStepKind kind;
  union {
    GpuccKernel kernel;
    GpuccGemm gemm;
    GpuccCopy copy;
    GpuccMemset fill;
    GpuccChoice choice;
  };
} GpuccStep;

/* One shape class of a ranged plan: its program, compiled with each symbol at bound[]. A
 * tensor's slot holds it dense row-major at the class's dims: each ranged axis at its
 * symbol's bound. */
typedef struct GpuccClass {
  int64_t bound[GPUCC_MAX_SYMBOLS]; /* per symbol: a size its sizes hold */
  uint64_t arena_bytes;             /* the part of the model's arena (its start) it uses */
  uint64_t *input_offset, *output_offset; /* per model input / output: its slot */
  /* Per symbol: where a run writes the actual size (an i64, 8-aligned) before the steps;
   * GPUCC_NO_OFFSET when the class reads none. */
  uint64_t size_offset[GPUCC_MAX_SYMBOLS];
  GpuccStep *steps; /* as the plan's steps, within the class's arena_bytes */
  int nsteps;
  int cap_steps_; /* private */
} GpuccClass;

/* The in-memory plan. Everything it points to is owned by it (gpucc_plan_free). A fixed
 * plan has no symbols and no classes; a ranged plan has symbols, one class or more, and no
 * top-level steps, and its arena_bytes is at least every class's. */
typedef struct GpuccPlan {
  uint64_t arena_bytes, weights_bytes, workspace_bytes;
  GpuccModule *modules; /* at least one when there are kernel steps */
  int nmodules;
  GpuccTensorInfo *inputs, *outputs;
  int ninputs, noutputs;
  GpuccStep *steps;
  int nsteps;
  GpuccSymbol *syms;
  int nsyms;
  GpuccClass *classes;
  int nclasses;
  int cap_modules_, cap_inputs_, cap_outputs_, cap_steps_, cap_syms_, cap_classes_; /* private */
} GpuccPlan;

/* Builder. gpucc_plan_new returns NULL only when out of memory. The add functions copy
 * what they are given and check only what they must to copy it (name length, rank,
 * nargs, counts, order); the whole plan is validated by serialize.
 *
 * A ranged plan is built in this order: inputs, outputs and symbols (in any order among
 * them, a symbol before an axis names it), the axes' symbols, then each class followed by
 * its steps. */
GPUCC_API GpuccPlan *gpucc_plan_new(uint64_t arena_bytes, uint64_t weights_bytes,
                                    uint64_t workspace_bytes);
/* The plan's one module: replaces every module with this one (with neither cubin nor PTX,
 * the plan has none). */
GPUCC_API GpuccStatus gpucc_plan_set_module(GpuccPlan *p, const void *cubin, size_t cubin_len,
                                            const char *ptx /* NUL-terminated or NULL */);
/* Appends a module, which must have a cubin or a PTX; at most GPUCC_MAX_MODULES. */
GPUCC_API GpuccStatus gpucc_plan_add_module(GpuccPlan *p, const void *cubin, size_t cubin_len,
                                            const char *ptx /* NUL-terminated or NULL */);
GPUCC_API GpuccStatus gpucc_plan_add_input(GpuccPlan *p, const char *name, GpuccDType dtype,
                                           int rank, const int64_t *dims, uint64_t offset);
GPUCC_API GpuccStatus gpucc_plan_add_output(GpuccPlan *p, const char *name, GpuccDType dtype,
                                            int rank, const int64_t *dims, uint64_t offset);
GPUCC_API GpuccStatus gpucc_plan_add_kernel(GpuccPlan *p, const char *name,
                                            const uint32_t grid[3], const uint32_t block[3],
                                            uint32_t shared_bytes, const GpuccArg *args,
                                            int nargs);
GPUCC_API GpuccStatus gpucc_plan_add_gemm(GpuccPlan *p, const GpuccGemm *g);
GPUCC_API GpuccStatus gpucc_plan_add_copy(GpuccPlan *p, GpuccPtr dst, GpuccPtr src,
                                          uint64_t bytes);
GPUCC_API GpuccStatus gpucc_plan_add_memset(GpuccPlan *p, GpuccPtr dst, uint64_t bytes,
                                            uint8_t value);
/* A choice among nvariants variants, whose steps the caller adds next, in order. */
GPUCC_API GpuccStatus gpucc_plan_add_choice(GpuccPlan *p, const char *label, int nvariants,
                                            const uint32_t *count);
/* A symbol and its sizes: pieces lo[k]..hi[k], k < npieces. Symbol k is the k-th added. */
GPUCC_API GpuccStatus gpucc_plan_add_symbol(GpuccPlan *p, const char *name, int npieces,
                                            const int64_t *lo, const int64_t *hi);
/* Sets symbol sym's flags (GPUCC_SYMBOL_ROWS); 0 as add_symbol leaves them. Any time after
 * the symbol is added; serialize checks them against the axes. */
GPUCC_API GpuccStatus gpucc_plan_set_symbol_flags(GpuccPlan *p, int sym, uint32_t flags);
/* Makes axis `axis` of input i (of output i when output != 0) symbol sym (-1: fixed). Its
 * dims[] entry stays what add_input gave: the symbol's largest size. */
GPUCC_API GpuccStatus gpucc_plan_set_axis_symbol(GpuccPlan *p, int output, int i, int axis,
                                                 int sym);
/* Starts a class: the steps added after it (add_kernel, add_gemm, add_copy, add_memset,
 * add_choice) are its, up to the next class. bound[p->nsyms], input_offset[p->ninputs],
 * output_offset[p->noutputs], size_offset[p->nsyms] are copied, so inputs, outputs and
 * symbols cannot be added after the first class. */
GPUCC_API GpuccStatus gpucc_plan_add_class(GpuccPlan *p, const int64_t *bound,
                                           uint64_t arena_bytes, const uint64_t *input_offset,
                                           const uint64_t *output_offset,
                                           const uint64_t *size_offset);

/* Checks every field: types, ranks, dims, counts, names, symbols (a rows symbol's axes)
 * and classes, and that every byte a step or a tensor touches lies inside its region (a
 * class's steps and slots inside the class's part of the arena). The message names the
 * symbol, class, step or tensor: "plan: class 3 (batch=4, seq=128): step 17 (kernel
 * 'k12_matmul') ...". */
GPUCC_API GpuccStatus gpucc_plan_validate(const GpuccPlan *p);
/* Validates, then writes the byte form into *out (malloc'd; the caller frees it). */
GPUCC_API GpuccStatus gpucc_plan_serialize(const GpuccPlan *p, void **out, size_t *out_len);
/* Reads and validates a byte form; a damaged or inconsistent plan is GPUCC_ERR_BAD_PLAN. */
GPUCC_API GpuccStatus gpucc_plan_parse(const void *bytes, size_t len, GpuccPlan **out);
GPUCC_API void gpucc_plan_free(GpuccPlan *p);

static inline GpuccPtr gpucc_arena_ptr(uint64_t offset) {
  GpuccPtr p = {GPUCC_REGION_ARENA, offset};
  return p;
}
static inline GpuccPtr gpucc_weights_ptr(uint64_t offset) {
  GpuccPtr p = {GPUCC_REGION_WEIGHTS, offset};
  return p;
}
static inline GpuccArg gpucc_ptr_arg(GpuccPtr ptr) {
  GpuccArg a = {GPUCC_ARG_PTR, ptr, 0};
  return a;
}
static inline GpuccArg gpucc_scalar_arg(uint64_t bits) {
  GpuccArg a = {GPUCC_ARG_SCALAR, {GPUCC_REGION_ARENA, 0}, bits};
  return a;
}

/* ---------------------------------------------------------------- model (runtime.c)
 *
 * create does all the expensive work once: one device allocation each for the arena,
 * the weights and the cuBLASLt workspace, the weights uploaded, every module loaded (its
 * cubin; its PTX when the driver says the cubin does not fit this GPU), each kernel found
 * in the first module that has it, one cuBLASLt
 * algorithm chosen per GEMM (the fastest of the heuristic's best eight, timed on this
 * GPU), pinned staging buffers for run_host, and every step captured into one CUDA graph
 * and instantiated. run only enqueues on the caller's stream: copies
 * of the inputs into their arena slots, the graph launch, copies of the outputs out.
 *
 * A ranged model (a plan with shape classes) does all of that for every class at create:
 * one arena, the weights and the modules once, and each class's steps prepared, tuned,
 * captured and instantiated as its own CUDA graph. No run pays a capture, and the number
 * of graphs is fixed. A class's GEMMs and choices are timed with its sizes at its bounds;
 * the tuning cache holds the whole plan's decisions under one key. run_dims takes the inputs' actual dims and runs the smallest class
 * that holds them (of the classes whose bound is at least each symbol's size, the one
 * whose bounds have the least product; the first of equals): on the caller's stream, each
 * size the class reads written into the arena (two 32-bit memsets: no host memory, no
 * synchronization), each input copied into its slot (one copy when its dims are the
 * class's; else the slot zeroed and the input copied to the start of each ranged axis by
 * strided copies), the class's graph launched, and the real part of each output copied
 * out the same way. run and run_host on a ranged model run at the largest dims, the dims
 * gpucc_model_input_dims gives ("the fixed shape"): the largest class (or, with a rows
 * symbol, chunks where they cost less: below). A fixed model is one class without symbols.
 *
 * Chunks. When the plan has a rows symbol (GPUCC_SYMBOL_ROWS; the first, if several),
 * run_dims may run its size b as chunks rather than pad it up to a class bound: batch 9 as
 * 8 rows in the batch-8 class, then 1 row in the batch-1 class, one graph launch after
 * the other on the caller's stream, with no padding along the rows. The candidates are the
 * classes that differ from the one run_dims would take (above) only in the rows symbol's
 * bound r_c (in a grid of classes: the rows classes at the other symbols' class bounds).
 * A dynamic program over n = 0 .. b finds the chunks of least total cost:
 *   cost[0] = 0,  cost[n] = min over candidates c of cost_c + cost[max(0, n - r_c)]
 * ties to fewer chunks, then to the earlier class. The chunks run largest class first,
 * each taking min(r_c, the rows left), so only the last may be padded. A chunk on rows
 * [r0, r0 + len) runs as above: each input's slice along its rows axis (an input without
 * one: the whole input) into its class slot (the rest zeroed), the sizes written with the
 * rows symbol's as len, the class's graph, each output's real box copied to rows
 * [r0, r0 + len) of the caller's output. The class run_dims would take is a candidate, so
 * b is never more than the largest r_c, a chunked run never costs more than that class
 * (by the costs below), and a run of one chunk in it is the run above. For b above 4096
 * the program counts rows in units of ceil(b / 4096), a class credited with the whole
 * units it holds, so that its table stays at 4096 entries: the best cover in whole units,
 * which may cost a little more than the best in rows.
 *
 * The cost of a class (gpucc_model_class_ms): create times each class's graph after it is
 * captured, its sizes at its bounds, 2 replays to warm up then the median of 5. With
 * GPUCC_TUNE=0, and with GPUCC_RUNTIME_DEBUG (no graphs), nothing is timed: a class's cost
 * is the product of its bounds (its padded work), so every load chooses the same chunks.
 * Timed costs vary between loads, and so may the chunks: a row's results may then differ
 * in the last bits between loads, since another chunking runs its GEMMs at other shapes
 * (as timing GEMM algorithms already may). Chunks leave out the copies each one adds
 * (a few microseconds of async copies and memsets per chunk): the cost is the graph's.
 *
 * A model has one arena, so runs of one model must not overlap: issue them on one stream
 * (or synchronize between them). Create one model per concurrent stream.
 *
 * GPUCC_RUNTIME_DEBUG=1 in the environment at create: no graph; run executes the steps one
 * by one with a synchronization after each, so a failing kernel is named.
 * GPUCC_GEMM_TUNE=0: each GEMM keeps cuBLASLt's first heuristic choice, untimed, so two
 * loads of one model choose alike (timed choices may differ between loads, and with them
 * the order of a GEMM's sums: results may differ in the last bits);
 * GPUCC_GEMM_TUNE=fewest: each GEMM takes the fastest of the candidates that run as the
 * fewest kernels (a candidate that splits K is also timed with K whole), rather than the
 * fastest: one kernel a GEMM, slower for f32 GEMMs of few rows.
 * GPUCC_GEMM_TUNE=log: each GEMM's candidates (time and kernels per call) and the choice
 * are printed to stderr.
 *
 * Choices (GPUCC_STEP_CHOICE): create times each variant on this GPU, as it times GEMM
 * algorithms, and keeps the fastest (one within 3% that runs fewer kernels wins; of equals
 * the first). What timing decided, GEMM algorithms included, is cached on disk in
 * $GPUCC_CACHE_DIR/tune (else $XDG_CACHE_HOME/gpucc/tune, else ~/.cache/gpucc/tune),
 * keyed by the plan's bytes, the GPU's name, compute capability and SM count, the driver
 * and cuBLASLt versions and the GEMM policy: a second create of the same model on the same
 * kind of GPU times nothing and decides the same. A cache file that does not hold up (a
 * damaged line, a variant the choice lacks, an algorithm cuBLASLt refuses) is timed anew
 * and rewritten. GPUCC_TUNE at create:
 *   1 (or unset)  the cache, else timing;
 *   0             no timing and no cache: variant 0 of every choice, cuBLASLt's first
 *                 heuristic choice for every GEMM, and a class's cost the product of its
 *                 bounds (deterministic);
 *   log           as 1, with each decision printed to stderr (or where it came from);
 *   fresh         timing whatever the cache holds, and the cache rewritten;
 * anything else is an error.
 */

typedef struct GpuccModel GpuccModel;

/* plan: the byte form. weights: weights_len bytes that must equal the plan's
 * weights_bytes; copied to the device, so the caller may free them after create.
 * device: a CUDA device ordinal. On failure everything allocated so far is freed. */
GPUCC_API GpuccStatus gpucc_model_create(const void *plan, size_t plan_len,
                                         const void *weights, size_t weights_len, int device,
                                         GpuccModel **out);
/* Waits for the model's work on the device to finish, then frees everything. NULL is a
 * no-op. */
GPUCC_API void gpucc_model_destroy(GpuccModel *m);

/* Kernels one inference launches: the kernel nodes of the model's CUDA graph, cuBLASLt's
 * own included (a split-K reduction, an epilogue its main kernel lacks); -1 for NULL and
 * without a graph (GPUCC_RUNTIME_DEBUG). A ranged model's: its largest class's. */
GPUCC_API int gpucc_model_kernels(const GpuccModel *m);
GPUCC_API int gpucc_model_num_inputs(const GpuccModel *m);
GPUCC_API int gpucc_model_num_outputs(const GpuccModel *m);
/* Out-of-range i gives NULL / GPUCC_DT_INVALID / -1 / 0. */
GPUCC_API const char *gpucc_model_input_name(const GpuccModel *m, int i);
GPUCC_API GpuccDType gpucc_model_input_dtype(const GpuccModel *m, int i);
GPUCC_API int gpucc_model_input_rank(const GpuccModel *m, int i);
GPUCC_API const int64_t *gpucc_model_input_dims(const GpuccModel *m, int i);
GPUCC_API size_t gpucc_model_input_bytes(const GpuccModel *m, int i);
GPUCC_API const char *gpucc_model_output_name(const GpuccModel *m, int i);
GPUCC_API GpuccDType gpucc_model_output_dtype(const GpuccModel *m, int i);
GPUCC_API int gpucc_model_output_rank(const GpuccModel *m, int i);
GPUCC_API const int64_t *gpucc_model_output_dims(const GpuccModel *m, int i);
GPUCC_API size_t gpucc_model_output_bytes(const GpuccModel *m, int i);

/* Shape classes. A fixed model has no symbols and one class. */
GPUCC_API int gpucc_model_num_symbols(const GpuccModel *m); /* 0: a fixed model (or NULL) */
GPUCC_API const char *gpucc_model_symbol_name(const GpuccModel *m, int k); /* NULL: no k */
GPUCC_API int gpucc_model_num_classes(const GpuccModel *m);                /* 0 for NULL */
/* Class c's bound of each symbol into bound[0 .. num_symbols). */
GPUCC_API GpuccStatus gpucc_model_class_bounds(const GpuccModel *m, int c, int64_t *bound);
/* The kernels of class c's graph, as gpucc_model_kernels; -1 for no class c. */
GPUCC_API int gpucc_model_class_kernels(const GpuccModel *m, int c);
/* The sizes axis `axis` of input i takes: a fixed axis its dim twice, a ranged axis its
 * symbol's smallest and largest size (a symbol of several pieces takes only the sizes in
 * them: gpucc_model_check_input says whether a size is one). */
GPUCC_API GpuccStatus gpucc_model_input_range(const GpuccModel *m, int i, int axis,
                                              int64_t *lo, int64_t *hi);

/* Checks for callers that hold typed tensors (gpucc run, bindings): each fails with
 * GPUCC_ERR_INVALID_ARGUMENT and a message naming expected and actual, e.g.
 *   input 'x': expected f32[1, 3, 224, 224], got f32[1, 3, 224]
 * Run them before run: run itself takes bare pointers and cannot check. On a ranged model
 * check_input takes any dims within the ranges, with run_dims' messages for those
 * outside (below); a dtype or rank that does not match is named with the ranges,
 *   input 'ids': expected i64[batch=1..64, seq=1..512], got i32[4, 9]
 * (a symbol of several pieces: seq={1, 7, 128..512}). */
GPUCC_API GpuccStatus gpucc_model_check_num_inputs(const GpuccModel *m, int n);
/* The index of the input called name, or -1 with the message listing the inputs. */
GPUCC_API int gpucc_model_find_input(const GpuccModel *m, const char *name);
GPUCC_API GpuccStatus gpucc_model_check_input(const GpuccModel *m, int i, GpuccDType dtype,
                                              int rank, const int64_t *dims);

/* inputs[i] and outputs[i] are device pointers to dense buffers of the input's and
 * output's bytes, in declaration order; cuda_stream is a CUstream / cudaStream_t (NULL:
 * the legacy default stream). Returns once the work is enqueued. A ranged model runs at
 * the dims gpucc_model_input_dims and gpucc_model_output_dims give: its largest class, or
 * chunks of rows where they cost less. */
GPUCC_API GpuccStatus gpucc_model_run(GpuccModel *m, const void *const *inputs,
                                      void *const *outputs, void *cuda_stream);
/* The same with host buffers, staged through pinned memory with async copies. It
 * synchronizes the stream before returning, because it returns host data. */
GPUCC_API GpuccStatus gpucc_model_run_host(GpuccModel *m, const void *const *inputs,
                                           void *const *outputs, void *cuda_stream);

/* Each output's dims when the inputs have dims input_dims[i] (input i's rank entries),
 * into output_dims[j] (output j's rank entries; a NULL entry is skipped). The input dims
 * are checked as run_dims checks them. No GPU work. */
GPUCC_API GpuccStatus gpucc_model_output_dims_for(const GpuccModel *m,
                                                  const int64_t *const *input_dims,
                                                  int64_t *const *output_dims);
/* Runs at the given input dims: inputs[i] is dense at input_dims[i], outputs[j] receives
 * output j dense at its dims, which are written to output_dims[j] when output_dims is not
 * NULL (a NULL entry is skipped). Device pointers; everything is enqueued on cuda_stream,
 * nothing synchronizes. Before anything is enqueued the dims are checked, failing with
 * GPUCC_ERR_INVALID_ARGUMENT and a message naming the input, the axis, its symbol, its
 * range and what was given:
 *   input 'ids': dim 1 ('seq') is 600, outside its range 1..512
 *   input 'mask': dim 0 ('batch') is 3, but input 'ids' has 4
 *   input 'x': dim 2 is 7, expected 8
 * On a fixed model only the fixed dims pass. A plan with a rows symbol may run as chunks
 * (above). gpucc_model_time then times the graphs this run launched. */
GPUCC_API GpuccStatus gpucc_model_run_dims(GpuccModel *m, const void *const *inputs,
                                           const int64_t *const *input_dims,
                                           void *const *outputs, int64_t *const *output_dims,
                                           void *cuda_stream);
/* The same with host buffers, staged through pinned memory (sized for the largest dims);
 * synchronizes before it returns. */
GPUCC_API GpuccStatus gpucc_model_run_dims_host(GpuccModel *m, const void *const *inputs,
                                                const int64_t *const *input_dims,
                                                void *const *outputs,
                                                int64_t *const *output_dims,
                                                void *cuda_stream);

/* Times the model's graph on cuda_stream: `warmup` untimed replays, then `iters` replays
 * (1 or more), each between two CUDA events and waited for, so each is one replay's GPU
 * time. *median_ms gets the median. The replays read whatever the arena holds (the
 * inputs of the last run: run once first) and copy nothing in or out. Synchronizes. A
 * ranged model's replay is what the last run launched (before any run, the largest
 * class's graph): its class's graph, or each of its chunks' graphs in order, each after
 * the chunk's sizes are written (the classes share the arena, so one may overwrite where
 * the next reads its sizes). */
GPUCC_API GpuccStatus gpucc_model_time(GpuccModel *m, int warmup, int iters, void *cuda_stream,
                                       float *median_ms);

/* The classes the last run launched, in order, into classes[0 .. max): one for a run of
 * one class, more for a chunked run (before any run: the largest class). Returns how many
 * there were (0 for NULL), whatever max is. */
GPUCC_API int gpucc_model_last_chunks(const GpuccModel *m, int *classes, int max);
/* Class c's measured cost in milliseconds: the median replay of its graph at create; -1
 * when it was not measured (GPUCC_TUNE=0, GPUCC_RUNTIME_DEBUG, a fixed model, no class
 * c). A class without steps measures 0. */
GPUCC_API float gpucc_model_class_ms(const GpuccModel *m, int c);

/* The compute capability of CUDA device `device` (9.0 for an H100), for a compiler that
 * targets the device it runs on. GPUCC_ERR_NO_DRIVER / GPUCC_ERR_NO_DEVICE when there is
 * none: also the cheap way to ask whether a GPU is there at all. */
GPUCC_API GpuccStatus gpucc_device_compute_capability(int device, int *major, int *minor);

/* What a compiler that targets CUDA device `device` needs of it, as the driver reports it
 * (cuDeviceGetAttribute): the compiler puts these over its table's figures for the
 * device's architecture (ir.h's Target). */
typedef struct GpuccDeviceProperties {
  char name[256];         /* "NVIDIA H100 80GB HBM3" */
  int cc_major, cc_minor; /* compute capability: 9 and 0 for an H100 */
  int sms;                /* multiprocessors */
  int smem_block;         /* bytes of shared memory a block may have without opting in */
  int smem_block_optin;   /* ... and with the opt-in attribute */
  int smem_sm;            /* bytes of shared memory a multiprocessor has */
  int regs_sm;            /* 32-bit registers a multiprocessor has */
  int threads_block;      /* most threads a block may have */
  int threads_sm;         /* most threads resident on a multiprocessor */
  int blocks_sm;          /* most blocks resident on a multiprocessor */
  int l2_bytes;           /* L2 cache */
  int cluster_launch;     /* 1: thread block clusters can be launched */
} GpuccDeviceProperties;
GPUCC_API GpuccStatus gpucc_device_properties(int device, GpuccDeviceProperties *out);

/* ---------------------------------------------------------------- model.so (payload.c, embedded.c)
 *
 * A model.so is libgpucc_model.so (the runtime plus embedded.c) with a payload appended:
 * the plan, the weights (or the name of a file beside the .so holding them), how it was
 * built (text, `gpucc inspect`), and a 96-byte trailer at the very end of the file:
 *    0 "GPUCCMDL"  8 u32 version (2)  12 u32 flags (1: weights in a file beside)
 *   16 u64 plan_offset  24 u64 plan_len  32 u64 weights_offset  40 u64 weights_len
 *   48 u64 name_offset  56 u64 name_len  64 u64 info_offset  72 u64 info_len
 *   80 u64 fnv1a64(bytes 0..79)  88 "GPUCCEND"
 * Offsets are from the start of the file; info is lines "key: value\n" without a NUL, at
 * most a MiB (both 0: none). Version 1 is the 80 bytes before info_offset with the
 * checksum (of bytes 0..63) at 64 and "GPUCCEND" at 72, and is read too. The dynamic
 * loader ignores bytes after the ELF image, so the file is still an ordinary shared
 * library (`strip` would remove them).
 */

#define GPUCC_TRAILER_BYTES 96
#define GPUCC_TRAILER_EXTERNAL_WEIGHTS 1u
#define GPUCC_MAX_WEIGHTS_FILE 255

typedef struct GpuccTrailer {
  uint32_t flags;
  uint64_t plan_offset, plan_len;
  uint64_t weights_offset, weights_len; /* weights_offset is 0 when external */
  uint64_t info_offset, info_len;       /* the build info; both 0 when there is none */
  char weights_file[GPUCC_MAX_WEIGHTS_FILE + 1]; /* a bare file name; "" when embedded */
} GpuccTrailer;

/* Exported by model.so only: finds the payload appended to its own file and creates the
 * model from it on device. */
GPUCC_API GpuccStatus gpucc_model_load(int device, GpuccModel **out);

/* Reads the trailer at the end of file[0 .. file_len) and checks every range against the
 * file. GPUCC_ERR_BAD_PLAN with a message if there is no trailer or it is damaged. */
GPUCC_API GpuccStatus gpucc_trailer_parse(const void *file, size_t file_len, GpuccTrailer *out);

/* Writes out_path as the stub's bytes (a copy of libgpucc_model.so: gpucc carries one
 * inside itself) followed by the payload; info (NULL: none) is how it was built, text.
 * Weights longer than external_weights_threshold bytes go to "<out_path>.weights" beside
 * it instead (SIZE_MAX: always embed). Files are written to a temporary and renamed, so
 * a failure leaves no partial output. On failure the message is also copied to err. */
GPUCC_API GpuccStatus gpucc_write_model_so(const void *stub, size_t stub_len,
                                           const char *out_path, const void *plan, size_t plan_len,
                                           const void *weights, size_t weights_len,
                                           const char *info, size_t external_weights_threshold,
                                           char *err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif
