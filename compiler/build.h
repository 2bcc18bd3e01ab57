/* build.h: the pipeline driver and the memory plan (internal to compiler/; the command
 * line and the unit tests use them).
 *
 * Every value a step touches gets a place: constants a weights offset, everything else
 * an arena offset (multiples of GPUCC_ARENA_ALIGN), aliases their source's. Graph
 * inputs and outputs own slots that nothing else uses, placed first; intermediates share
 * space with buffers whose lifetimes do not overlap theirs (greedy by size, best fit), and a
 * pointwise kernel's output may take the buffer of an input that dies there (in place). A graph
 * output that is a constant or an input (or an alias of one) gets a slot of its own and a
 * copy into it after the last step. */
#ifndef GPUCC_BUILD_H
#define GPUCC_BUILD_H

#include "codegen/codegen.h"
#include "compiler/gpucc.h"
#include "compiler/nvrtc.h"
#include "runtime/runtime.h"

#include <stdio.h>

typedef struct MemSlot {
  const Value *v;    /* NULL: no step, input or output uses the value */
  const Value *root; /* the value whose buffer it is (itself unless an alias) */
  GpuccRegion region;
  uint64_t offset, bytes;
  int first, last; /* steps (Program indices) in which the root's buffer is in use */
  bool dedicated;  /* a graph input's, or a graph output's: never reused */
} MemSlot;

typedef struct MemPlan {
  MemSlot *slot;           /* indexed by Value id: g->next_value_id entries */
  int nslots;
  uint64_t *output_offset; /* per graph output: where its bytes are at the end */
  bool *output_copy;       /* per graph output: copied there from its root's slot */
  uint64_t arena_bytes, weights_bytes;
  /* The arena's lower bound: the dedicated slots plus the most bytes of intermediates
   * live at any one step; and what it would take with no reuse at all. */
  uint64_t lower_bound, naive_bytes;
  bool *weights_used;      /* per Value id: a constant that goes into the weights blob */
  int in_place;            /* kernels whose output took a dying input's buffer */
  uint64_t in_place_bytes; /* what their outputs would take of their own */
} MemPlan;

int memplan_build(const Graph *g, const Program *p, MemPlan *mp, Diag *d);
/* One line per buffer (value, type, region, offset, bytes, steps it lives over), then the
 * arena's size against its lower bound and the no-reuse sum, then each fuse group's plan:
 * its kind, its nodes by role, what it writes and reads. */
void memplan_print(const Graph *g, const Program *p, const MemPlan *mp, FILE *f);
/* The weights blob (weights_bytes, malloc'd; NULL when there are none). -1 on OOM. */
int memplan_weights(const Graph *g, const MemPlan *mp, void **out, Diag *d);
void memplan_free(MemPlan *mp);

/* ---------------------------------------------------------------- the pipeline
 *
 * The one driver of a compile, which the command line (every --emit and the model.so)
 * and the JIT API (gpucc_build) both call, so both make the same program of the same
 * graph and options. Its stages, in order; pipeline_run stops after `last`:
 *   bind dims   opt's symbolic dims become sizes (pipeline_bind_dims), so the passes
 *               see concrete shapes (ONNX binds at load instead: pipeline_onnx_options)
 *   passes      opt's list, with its report, print-after-all and dump hooks
 *   codegen     the program: CUDA C and steps
 *   memory plan the plan format's and cuBLASLt's limits checked, then every buffer placed
 *   NVRTC       the cubin and PTX (nothing when the program has no kernel)
 *   plan        the plan's bytes and the weights blob, as gpucc_build hands them back */
typedef enum Stage { STAGE_PASSES, STAGE_CODEGEN, STAGE_MEMPLAN, STAGE_NVRTC, STAGE_PLAN } Stage;

/* What the pipeline made, up to the stage it stopped after. It owns everything in it (the
 * program refers to the graph's values, so it lives no longer than the graph), and
 * nothing is global: a graph compiled several times (copies bound to different sizes)
 * gives one of these each. */
typedef struct Compiled {
  Program *program;   /* codegen */
  MemPlan memplan;    /* memory plan */
  NvrtcOutput binary; /* NVRTC to STAGE_NVRTC: the whole source as one unit (--emit=cubin) */
  NvrtcOutput *units; /* NVRTC for a plan: the modules of the program's units (or &binary) */
  int nunits;
  GpuccBuild build;   /* plan: the bytes and their numbers (arch is set from the start) */
} Compiled;

/* The source of a program cut into translation units (nvrtc_compile_split): a unit is
 * closed at the first cut past this many bytes of it, so that a model's NVRTC runs on
 * several CPUs and the same program is always cut the same way (the module does not
 * depend on the machine). NVRTC's time is close to proportional to a unit's kernels (the
 * preamble alone compiles in 0.06 s): BERT-base's 448 KB take 4.5 s of CPU as one unit,
 * 5.1 s as 7, which 2 CPUs finish in 2.6 s. Smaller units than this only add overhead. */
#define FIXED_UNIT_BYTES ((size_t)64 << 10)

/* src (a program's source, or the classes' concatenated) cut at cuts[0..ncuts) (ascending,
 * the last its end) into units of unit_bytes or more, each after the preamble (src begins
 * with it), compiled by NVRTC in parallel threads (nvrtc_compile_units): *outs gets the
 * *nouts modules, in order. 0, or -1 with d set. */
int nvrtc_compile_split(const char *src, const size_t *cuts, int ncuts, size_t unit_bytes,
                        const char *name, const NvrtcOptions *nopt, NvrtcOutput **outs,
                        int *nouts, Diag *d);

/* Runs the pipeline on g (modified in place: dims bound, passes run) up to `last`.
 * opt may be NULL. 0, or -1 with d set (and *out empty). */
int pipeline_run(Graph *g, const GpuccCompileOptions *opt, Stage last, Compiled *out, Diag *d);
/* The same from stage `first` (STAGE_CODEGEN: g has been through pipeline_run to
 * STAGE_PASSES with the same opt), for one of several programs that go into one module
 * (the shape classes of a ranged model): codegen names g's kernels with prefix and shares
 * kernels with the group's earlier programs (CodegenShared). Stop before NVRTC: the
 * module is compiled once, of every program's source. */
int pipeline_run_part(Graph *g, const GpuccCompileOptions *opt, Stage first, Stage last,
                      CodegenShared *shared, const char *prefix, Compiled *out, Diag *d);
void compiled_free(Compiled *c);

/* The steps of program p (of graph g, placed by mp) appended to plan: its kernels, GEMMs
 * and choices, then the copies of outputs that are constants or inputs into their slots.
 * *nkernels grows by the launches per inference. 0, or -1 with d set. */
int plan_add_program(GpuccPlan *plan, const Graph *g, const Program *p, const MemPlan *mp,
                     int *nkernels, Diag *d);

/* The first stage alone: opt's dims bound in g and every node inferred again. */
int pipeline_bind_dims(Graph *g, const GpuccCompileOptions *opt, Diag *d);
/* The value of `--dim SYM=VALUE` (and gpucc_compile_flags' dim=): one size ("8": 0, with
 * *size set) or sizes and ranges ("1..64", "1,8,32..64": 1, with *r set but its sym left
 * to the caller); -1 with why (n bytes) saying what is wrong otherwise. */
int dim_value_parse(const char *v, int64_t *size, DimRange *r, char *why, size_t n);

/* first[i] = the least j whose s[j] equals s[i] (i itself at each string's first place),
 * found by sorting: n may be a hostile file's millions. 0, or -1 when out of memory. */
int strings_first(const char *const *s, int n, int *first);

/* An ONNX model binds its symbolic dims at load, since its nodes' shapes follow from
 * them: *lo becomes opt->onnx's loader options plus opt's dims, and *rest opt without
 * the dims (for the pipeline after the load). *lo borrows opt's strings and *mem, which
 * the caller frees after the load. -1 with d set on out of memory. */
int pipeline_onnx_options(const GpuccCompileOptions *opt, OnnxOptions *lo,
                          GpuccCompileOptions *rest, void **mem, Diag *d);
/* m (parsed once) loaded with opt's dims and names[0..n) at sizes too: a shape class's
 * load (ClassLoad). NULL with d set. */
Graph *pipeline_load_onnx(const OnnxModel *m, const GpuccCompileOptions *opt,
                          const char *const *names, const int64_t *sizes, int n, Diag *d);
/* m loaded with each of opt's ranged dims at the top of its range (its Shape chains need
 * sizes), those input axes then symbolic again with their ranges: the graph whose
 * classes classes_build and classes_run_cpu load. NULL with d set. */
Graph *pipeline_load_onnx_ranged(const OnnxModel *m, const GpuccCompileOptions *opt, Diag *d);

/* A graph with ranged dims (g->ranges) run on the reference executor as a model.so will
 * run it (compiler/classes.c): the inputs' sizes pick each ranged dim's class, g is
 * bound at the classes' bounds (the other symbols at the inputs' sizes; with load, the
 * model is loaded again at them instead, as an ONNX model binds at load), pad_mask and
 * opt's passes run, and the executor runs g on the inputs padded with zeros and the
 * actual sizes; out[] receives the outputs' real positions, the shapes of g bound at the
 * inputs' sizes. g is modified. 0, or -1 with d set (a size outside its range names the
 * input, its range and the size; a node pad_mask cannot make exact names it). */
typedef Graph *(*ClassLoad)(void *arg, const char *const *names, const int64_t *sizes, int n,
                            Diag *d);
int classes_run_cpu(Graph *g, const GpuccCompileOptions *opt, ClassLoad load, void *arg,
                    Tensor *const *in, Tensor **out, Diag *d);

/* A graph with ranged dims (g->ranges; an ONNX model's ranged input axes symbolic, its
 * other dims bound) compiled into one plan of shape classes (compiler/classes.c,
 * docs/dynamic-shapes.md): for each class, the largest first, the graph at the class's
 * bounds (load, as for classes_run_cpu, else g cloned and bound; opt's --dim sizes bind
 * the other symbols), masked by pad_mask, through opt's passes, codegen (one module:
 * kernels shared between classes) and memory plan; the weights of all classes in one
 * blob, each constant once; then NVRTC (last == STAGE_NVRTC: the whole source as one
 * unit; last >= STAGE_PLAN: units of whole classes compiled in parallel, a module each)
 * and the plan (last >= STAGE_PLAN). With opt->report, a line per class; with plan_text, each class's
 * memory plan. 0, or -1 with d set (*out empty). */
typedef struct ClassesBuilt {
  GpuccBuild build;   /* the plan and the weights; nkernels and arena_bytes: the largest class's */
  char *source;       /* the module's CUDA C, NUL-terminated */
  size_t source_len;
  NvrtcOutput binary;   /* last == STAGE_NVRTC: the whole source as one unit */
  NvrtcOutput *units;   /* last >= STAGE_PLAN: the modules of the plan */
  int nunits;
  int nclasses;
} ClassesBuilt;
int classes_build(Graph *g, const GpuccCompileOptions *opt, ClassLoad load, void *arg,
                  Stage last, FILE *plan_text, ClassesBuilt *out, Diag *d);
void classes_built_free(ClassesBuilt *c);

/* `gpucc inspect`: what the file at path holds (a model.so's payload, a .gir graph or an
 * ONNX model; compiler/inspect.c), as text or JSON to f, written only when all of it is
 * known. Needs no GPU. 0, or -1 with d set. */
int inspect_file(const char *path, bool json, FILE *f, Diag *d);
/* The build info a model.so records ("key: value" lines: gpucc, command, source,
 * source_sha256, precision, arch), malloc'd and NUL-terminated; "" for a model.so from
 * before it recorded any (a version 1 trailer). NULL with d set when path is not a
 * model.so. info_value finds key's value in it (cut to n bytes): false when it has none. */
char *model_so_info(const char *path, Diag *d);
bool info_value(const char *info, const char *key, char *val, size_t n);

/* ---------------------------------------------------------------- compare.c
 *
 * `gpucc run --compare`: another run's outputs (onnxruntime's, the reference executor's)
 * against gpucc's. */

/* Tensors with their names, each owned. */
typedef struct NamedTensors {
  int n;
  char **names;
  Tensor **t;
} NamedTensors;
void named_tensors_free(NamedTensors *nt);

/* The ONNX model at `model` run by onnxruntime's CPUExecutionProvider on in[0..nin) (the
 * inputs names[i]), through `python` (started with an argv, no shell) and .npy files in a
 * private temporary folder, which is removed on every path: the terminal's SIGINT,
 * SIGQUIT and SIGHUP, held by the calling thread meanwhile, end the process only once it
 * is gone. *out gets the model's outputs
 * in its order. 0; ONNXRUNTIME_MISSING with d set when python cannot be started or lacks
 * numpy or onnxruntime; -1 with d set when the model does not load or run there. */
enum { ONNXRUNTIME_MISSING = -2 };
int onnxruntime_run(const char *python, const char *model, const char *const *names,
                    Tensor *const *in, int nin, NamedTensors *out, Diag *d);

/* gpucc's outputs got[0..n) (named names[i]) against want (the run of `who`), matched by
 * name, one line each to f, aligned:
 *   logits  [1,1000]  f32  max abs 3.1e-06 at [0,417] (got 1.2345, want 1.2345)  rel 4.2e-07  ok
 * floats by the largest absolute error (its element and both values) and the relative
 * error by norm ||got - want|| / ||want|| over the elements finite on both sides (the
 * largest absolute error where ||want|| is 0; an element finite on one side only, or two
 * different non-finite values, makes both infinite); within when rel <= rtol and, for
 * atol >= 0, max abs <= atol. Integers and bools exactly (the mismatches, and the first).
 * Then "2 outputs within rtol 1e-04", or "1 of 2 outputs beyond rtol 1e-04". Returns how
 * many are beyond, or -1 with d naming an output on one side only or whose dtype or
 * shape differs (nothing written then). */
int compare_outputs(const char *const *names, Tensor *const *got, int n,
                    const NamedTensors *want, const char *who, double rtol, double atol,
                    FILE *f, Diag *d);

/* g, loaded with its ranged dims at some sizes, with those input axes symbolic again (the
 * loader recorded them in g->bound), for classes_build to load each class. */
void graph_unbind_ranged(Graph *g, const DimRange *ranges, int nr);

/* The runtime's element type of an IR one and back, by name (GPUCC_DT_INVALID and
 * DT_UNKNOWN when the other layer has no such type). */
GpuccDType rt_dtype(DType t);
DType ir_dtype(GpuccDType t);

/* The values step s touches: step_value(s, 0 .. step_nvalues(s)). */
int step_nvalues(const Step *s);
const Value *step_value(const Step *s, int i);

#endif
