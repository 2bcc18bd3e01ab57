/* passes.h: the one public header of gpucc's passes. A pass transforms a graph in place.
 * The pass manager runs a list of them, verifies the graph after each, and prints or
 * dumps it when asked, in the text form the DSL parser reads back. */
#ifndef GPUCC_PASSES_H
#define GPUCC_PASSES_H

#include "ir/ir.h"

/* What the precision pass lowers f32 math to (--precision). fp32 leaves the graph as it
 * is; tf32 marks f32 matmuls for TF32 tensor cores; bf16 and fp16 store the graph's f32
 * tensors in that type (see passes/precision.c); fp8 is bf16 whose linear layers the
 * quantize pass then runs on e4m3 (passes/quantize.c). */
typedef enum Precision {
  PRECISION_FP32, PRECISION_TF32, PRECISION_BF16, PRECISION_FP16, PRECISION_FP8
} Precision;

/* "fp32", "tf32", "bf16", "fp16", "fp8" into *out: 0, or -1 with d naming the known ones. */
int precision_parse(const char *s, Precision *out, Diag *d);
const char *precision_name(Precision p);
/* The documented bound of p's float outputs against the fp32 answer, as relative error by
 * norm ||got - want|| / ||want|| (docs/precision.md): 1e-4 for fp32 ... 1.5e-1 for fp8. */
double precision_rel_bound(Precision p);

typedef struct PassContext {
  Diag *diag;
  /* The GPU compiled for (ir.h): what a pass may assume of it (a fuse group must fit its
   * shared memory, say). NULL: target_default(); read it through pass_target(). */
  const Target *target;
  Precision precision;   /* for the precision pass; PRECISION_FP32 (0) by default */
  /* fp8's calibration inputs by graph input name (--calibrate NAME=FILE.npy): quantize
   * runs the graph on them to choose each activation's scale. */
  const char *const *calib_names;
  Tensor *const *calib_inputs;
  int ncalib;
  FILE *print_after_all; /* non-NULL: print each stage here with a header naming it */
  const char *dump_dir;  /* non-NULL: write DIR/00-input.gir, DIR/01-<pass>.gir, ... */
  FILE *report;          /* non-NULL: one line per pass saying what it did */
  int changes;           /* a pass adds the number of rewrites it made */
  char note[512];        /* a pass may add a remark for its report line (what it skipped);
                            cleared by the pass manager before each pass */
} PassContext;

typedef struct Pass {
  const char *name;    /* command-line name: --passes=dce,constfold */
  const char *summary; /* one line for --help */
  int (*run)(Graph *g, PassContext *ctx); /* 0, or -1 with ctx->diag set */
  bool fusion; /* it only serves kernel fusion: the unfused pipeline (--no-fuse) leaves it
                  out, so that the two can be compared */
} Pass;

static inline const Target *pass_target(const PassContext *ctx) {
  return ctx->target ? ctx->target : target_default();
}

/* Every known pass, NULL-terminated, and the default pipeline (NULL-terminated). */
extern const Pass *const pass_registry[];
extern const Pass *const pass_default_pipeline[];
const Pass *pass_lookup(const char *name);

/* Parses "a,b,c" into at most `max` passes; an unknown name is an error naming it and
 * listing the known ones. Returns the count, or -1. */
int pass_parse_list(const char *list, const Pass **out, int max, Diag *d);

/* 0 when passes[0..n) can give precision p (fp32, or the list has the precision pass,
 * and quantize after it for fp8); else -1 with d saying so. */
int precision_check_passes(Precision p, const Pass *const *passes, int n, Diag *d);

/* Runs the passes in order: verifies the input, then after each pass verifies the graph,
 * prints it (print_after_all) and dumps it (dump_dir, created if missing). The dump of
 * the input is 00-input. A failing pass or verifier stops the pipeline. */
int pass_run_pipeline(Graph *g, const Pass *const *passes, int n, PassContext *ctx);

/* Makes g, bound at a class's sizes (docs/dynamic-shapes.md), give the results of the
 * graph bound at the actual sizes in its outputs' real positions: adds an i64 scalar
 * input %<sym>.size for each of a's symbols (after g's inputs, in a's order) and masks
 * the padding out of every node a lists as combining along a ranged axis (a: dyn_axes of
 * g; passes/pad_mask.c). Not a pipeline pass: it needs a. -1 with d naming the first
 * node it cannot make exact. */
int pass_pad_mask(Graph *g, const DynAxes *a, Diag *d);

/* The passes. */
extern const Pass pass_dce;       /* dead-code elimination */
extern const Pass pass_constfold; /* constant folding through the reference executor */
extern const Pass pass_simplify;  /* nodes that change nothing */
extern const Pass pass_canonicalize; /* written-out norms and activations into their ops */
extern const Pass pass_fold_affine; /* batch norms, scales, shifts into conv/GEMM weights */
extern const Pass pass_concat_gemms; /* matmuls of one input into one (Q, K, V) */
extern const Pass pass_sink_reshapes; /* reshapes below a GEMM's bias, GELU, residual */
extern const Pass pass_clone_masks; /* an attention mask computed in every attention */
extern const Pass pass_precision; /* f32 math lowered to ctx->precision */
extern const Pass pass_layout;    /* convolutions and pools in channels last */
extern const Pass pass_pad;       /* linear layers' widths padded to tensor-core multiples */
extern const Pass pass_quantize;  /* fp8: linear layers on e4m3 with calibrated scales */
extern const Pass pass_fuse;      /* pointwise chains into fuse groups (one kernel each) */

#endif
