/* onnx-impl.h: what the ONNX frontend's two files share. onnx.c reads the model (the
 * protobuf, weights, names, node order, graph inputs); onnx-ops.c holds the op table that
 * turns each node into IR. Not a public header: frontends/frontends.h is. */
#ifndef GPUCC_ONNX_IMPL_H
#define GPUCC_ONNX_IMPL_H

#include "frontends/frontends.h"
#include "onnx.pb-c.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* The opsets of the default domain gpucc reads: those onnx-versions.inc covers. */
enum { OPSET_MIN = 1, OPSET_MAX = 24 };

#define S(x) ((x) ? (x) : "")

/* An open-addressing map from value names (borrowed from the unpacked model) to ints. */
typedef struct NameMap {
  const char **keys;
  int *vals;
  size_t cap, n;
} NameMap;

int *onnx_map_get(const NameMap *m, const char *k); /* NULL when absent */

typedef struct Loader Loader;
typedef struct OnnxOp OnnxOp;
typedef int (*BuildFn)(Loader *L, const Onnx__NodeProto *np, const OnnxOp *e);

/* One row of the op table: the ONNX op, the IR op it maps to (when one does), the
 * versions of the op its builder implements (since_versions, as onnx-versions.inc lists
 * them: a node whose version is outside is unsupported), its builder and the attributes
 * gpucc understands (any other attribute makes the node unsupported). */
struct OnnxOp {
  const char *name;
  Op op;
  int first_version, last_version;
  BuildFn build;
  const char *attrs; /* comma-separated */
};

/* One version of an op of the default domain (onnx-versions.inc, from ONNX's schemas). */
typedef enum { VS_RELEASED, VS_DEPRECATED, VS_EXPERIMENTAL } VersionStatus;
typedef struct OnnxVersion {
  const char *op;
  int since;            /* the opset it appeared in */
  VersionStatus status; /* VS_DEPRECATED: the op does not exist from `since` on */
  const char *attrs;    /* the attributes its schema declares, comma-separated */
} OnnxVersion;

struct Loader {
  const char *path; /* the model, for messages */
  char *dir;        /* folder of external data; NULL when there is none */
  const OnnxOptions *opt;
  Diag *d;
  Onnx__ModelProto *model;
  bool borrowed; /* model is an OnnxModel's, not the loader's to free */
  Onnx__GraphProto *gp;
  int64_t opset;     /* of the default domain */
  Graph *g;
  size_t model_bytes;
  uint64_t weight_bytes, weight_limit;
  uint64_t memory_bytes; /* the host's memory: no weights beyond it (0: unknown) */
  NameMap external_files; /* "dev:ino" of each external data file credited to the limit */
  uint64_t folded_bytes; /* constants made by folding at load, bounded by weight_limit */
  double folded_work;    /* ir_eval_work of the nodes folded, bounded by IR_FOLD_TOTAL_WORK */
  NameMap producers; /* value name -> index of the node defining it; -1 input, -2 initializer */
  NameMap uses;      /* value name -> uses by nodes and graph outputs */
  bool *const_node;  /* per node: every output is known before run time (folded at load) */
  int cur;           /* the node being built (-1: none), for messages */
  int ver;           /* its op's version (since_version), which its builder keys on */
  const char *origin;
  /* The next suffix tmp_name tries: for node tmp_node's temporaries, and for those of
   * nodes without an output name (all "tmp.K"). */
  const Onnx__NodeProto *tmp_node;
  int tmp_next, tmp_anon;
};

/* Messages: "model.onnx: error: ..." and, for node idx, "node 'name' (#idx, Op, opset
 * N): ...". Both return -1. */
int onnx_model_error(Loader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int onnx_node_error(Loader *L, int idx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Errors while building a node name it; others name only the model. */
#define FAIL(...) (L->cur >= 0 ? onnx_node_error(L, L->cur, __VA_ARGS__) \
                               : onnx_model_error(L, __VA_ARGS__))
/* The node's name, or "Op#idx" for a nameless one (in buf). */
const char *onnx_node_label(const Onnx__NodeProto *np, int idx, char *buf, size_t n);

const char *onnx_type_name(int32_t t); /* "FLOAT", "STRING", ... */
int dtype_from_onnx(int32_t t, DType *out);  /* -1 for types gpucc does not carry */
/* Counts bytes of constant data against the weight limit and the host's memory before
 * they are allocated; an error naming `what` when they do not fit. */
int onnx_charge_weights(Loader *L, const char *what, uint64_t nbytes);
/* Decodes a TensorProto into a tensor in the graph's arena; `what` names it in errors. */
Tensor *onnx_tensor_from_proto(Loader *L, const Onnx__TensorProto *tp, const char *what);

/* Whether value `name` is known at load time (an initializer, an input fixed with
 * --const, an output of a constant node); an absent optional input counts. */
bool onnx_value_is_const(const Loader *L, const char *name);

/* The op table (onnx-ops.c). */
const OnnxOp *onnx_find_op(const char *name);
/* The version of op `op` that a model at `opset` uses: the newest whose since_version is
 * at most opset (ONNX's rule). NULL when the op is not one of the default domain's, has
 * not appeared by that opset, or is deprecated by then. */
const OnnxVersion *onnx_op_version(const char *op, int64_t opset);
/* The whole op table and version table, for tests that check them against each other. */
const OnnxOp *onnx_op_table(size_t *n);
const OnnxVersion *onnx_versions_table(size_t *n);
/* Why node np cannot be compiled, in a few words naming the op; NULL when it can. The
 * text is also the grouping key of onnx_check_ops. Needs L->const_node. */
const char *onnx_unsupported(const Loader *L, const Onnx__NodeProto *np, char *why, size_t n);
/* Whether node np's outputs are all known at load time, given which of its inputs are
 * (in_const[i]); the loader folds such nodes into constants. */
bool onnx_node_foldable(const Loader *L, const Onnx__NodeProto *np, const bool *in_const);

static inline bool is_default_domain(const char *d) {
  return !d || !*d || !strcmp(d, "ai.onnx");
}

static inline const char *output_name(const Onnx__NodeProto *np, size_t i) {
  return i < np->n_output && np->output[i] && *np->output[i] ? np->output[i] : NULL;
}

/* A Diag's message without its "file: error: " or "error: " prefix, for quoting inside
 * a message of the loader's own (which names the model and the node itself). */
static inline const char *bare_message(const Diag *d) {
  if (!strncmp(d->msg, "error: ", 7))
    return d->msg + 7;
  const char *e = strstr(d->msg, ": error: "), *nl = strchr(d->msg, '\n');
  return e && (!nl || e < nl) ? e + 9 : d->msg;
}

#endif
