/* frontends.h: the one public header of gpucc's frontends. Each frontend turns a file
 * into an IR graph and knows nothing of passes or codegen. */
#ifndef GPUCC_FRONTENDS_H
#define GPUCC_FRONTENDS_H

#include "ir/ir.h"

/* The text form (the DSL): parses `len` bytes of `text` read from `file` (used in
 * messages and to resolve relative paths in load(...)). The result is verified: names
 * resolved, nodes in topological order, types inferred and checked. NULL with d set on
 * error; the message is "file:line:col: error: ..." with the source line and a caret. */
Graph *dsl_parse(const char *file, const char *text, size_t len, Diag *d);
typedef struct DslOptions {
  /* the most bytes of constants made from a few words (zeros, ones, full, random),
   * together; 0: 4 GiB (tests/fuzz sets less, so that every input runs in seconds) */
  int64_t max_made_bytes;
} DslOptions;
/* dsl_parse with options (opt NULL: the defaults). */
Graph *dsl_parse_with(const char *file, const char *text, size_t len, const DslOptions *opt,
                      Diag *d);
/* Reads the file ("-" is standard input) and parses it. */
Graph *dsl_parse_file(const char *path, Diag *d);

/* What a model file holds, told from its first bytes, not its name (a model.ONNX, a
 * model.bin): a model.so (an ELF image), the DSL (text whose first word, after blanks and
 * comments, is "graph"), or else an ONNX protobuf when the bytes are not text. Text that
 * does not begin with "graph" is FORMAT_UNKNOWN: the caller falls back to the name. */
typedef enum { FORMAT_UNKNOWN, FORMAT_DSL, FORMAT_ONNX, FORMAT_ELF } ModelFormat;
ModelFormat model_format(const void *head, size_t n);

/* ONNX (frontends/onnx): a ModelProto read with protobuf-c. docs/onnx.md lists what is
 * supported. Errors name the model and, for a node, its name, index, op and opset:
 *   model.onnx: error: node 'conv1' (#12, Conv, opset 17): op Conv is not supported */
typedef struct OnnxBinding {
  const char *name;
  const char *value;
} OnnxBinding;

typedef struct OnnxOptions {
  const OnnxBinding *dims;   /* --dim SYM=N: symbolic dim SYM becomes N at load */
  int ndims;
  const OnnxBinding *shapes; /* --shape NAME=1x3x224x224 ("scalar" for rank 0) */
  int nshapes;
  const OnnxBinding *consts; /* --const NAME=FILE.npy: input NAME becomes that constant */
  int nconsts;
  int64_t max_weight_bytes;  /* 0: the model's size x 8 plus its external data */
  const char *base_dir;      /* onnx_load_bytes: folder of external data (NULL: none) */
} OnnxOptions;

/* Loads and verifies a model. opt may be NULL. Nodes need not be sorted (they are
 * sorted here; a cycle is an error). NULL with d set on error. */
Graph *onnx_load(const char *path, const OnnxOptions *opt, Diag *d);
/* The same from memory; `name` names the model in messages ("<memory>" when NULL). */
Graph *onnx_load_bytes(const void *data, size_t len, const char *name, const OnnxOptions *opt,
                       Diag *d);
/* A model read and parsed once, to be loaded many times (a model with ranged dims, at
 * each shape class's sizes): onnx_open reads the file, onnx_open_bytes takes it from
 * memory (base_dir: the folder of its external data, NULL: none); `name` or `path` must
 * outlive the OnnxModel, as messages name the model by it. NULL with d set on error.
 * onnx_model_load(m, opt) is onnx_load of the same model with opt (whose base_dir is
 * not used: the model's is). */
typedef struct OnnxModel OnnxModel;
OnnxModel *onnx_open(const char *path, Diag *d);
OnnxModel *onnx_open_bytes(const void *data, size_t len, const char *name, const char *base_dir,
                           Diag *d);
Graph *onnx_model_load(const OnnxModel *m, const OnnxOptions *opt, Diag *d);
void onnx_close(OnnxModel *m);
/* What an ONNX model's protobuf says of itself, without loading it into the IR (`gpucc
 * inspect`): the graph's inputs that are not initializers and its outputs, each with
 * its type as text ("f32[batch, 128]", "?" for what the model leaves out), the count of
 * each op type of the main graph in the order they first appear (other domains'
 * qualified, "com.microsoft.Attention"), and the initializers' bytes (from their
 * shapes, external data included). */
typedef struct OnnxValueInfo {
  char *name, *type;
} OnnxValueInfo;
typedef struct OnnxOpCount {
  char *name;
  int count;
} OnnxOpCount;
typedef struct OnnxSummary {
  char *graph, *producer;
  int64_t ir_version, opset; /* opset: the default domain's; 0 when none */
  OnnxValueInfo *inputs, *outputs;
  int ninputs, noutputs;
  OnnxOpCount *ops;
  int nops, nnodes;
  int ninitializers;
  uint64_t weights_bytes;
} OnnxSummary;
int onnx_summary(const OnnxModel *m, OnnxSummary *s, Diag *d); /* 0, or -1 with d set */
void onnx_summary_free(OnnxSummary *s);
/* A tensor from an ONNX TensorProto file (a model folder's test_data_set_N/input_0.pb);
 * *name (malloc'd, or NULL: the proto has none) gets the name it holds when name is
 * given. NULL with d set on error, naming the file. */
Tensor *onnx_read_tensor(const char *path, char **name, Diag *d);
/* The value of --shape NAME=VALUE: "1x3x224x224" into dims (at most IR_MAX_RANK
 * non-negative sizes), or "scalar" for rank 0. Returns the rank, or -1 when VALUE is not
 * of that form. */
int onnx_parse_shape(const char *s, int64_t *dims);
/* Lists every unsupported op of a model: *report (malloc'd, caller frees) gets one line
 * per distinct reason with its node count and first node. Returns the number of lines
 * (0: every op is supported), or -1 with d set when the model cannot be read. */
int onnx_check_ops(const char *path, const OnnxOptions *opt, char **report, Diag *d);

/* The extension of the text form, used for dumps: "gir". */
#define DSL_EXT "gir"

#endif
