/* ir.h: the one public header of gpucc's IR layer.
 *
 * The IR is a graph of nodes over values. A graph owns an arena; every node, value,
 * attribute, string and constant tensor of the graph lives in it and is freed with the
 * graph. Values are referred to by pointer everywhere. The op table (ops.def) and the
 * element type table (dtypes.def) drive everything that differs between ops and types.
 *
 * Library code never prints and never exits: functions that can fail return 0 on
 * success and -1 on error, with the message in a Diag.
 *
 * Sections are named after the file that implements them.
 */
#ifndef GPUCC_IR_H
#define GPUCC_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define IR_MAX_RANK 8

/* ---------------------------------------------------------------- ir.c: basics */

typedef struct Arena Arena;
Arena *arena_new(void);
void arena_free(Arena *a);
void *arena_alloc(Arena *a, size_t n);  /* zeroed, 16-byte aligned; aborts only on OOM */
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
void *arena_memdup(Arena *a, const void *p, size_t n);
/* p, malloc'd, is freed with the arena (a constant's data taken over from a reader's
 * buffer instead of copied). */
void arena_adopt(Arena *a, void *p);

/* body(arg, i) for each i in [0, n), on up to nthreads threads (the caller's one of
 * them), each taking the next i in order; returns when all are done. A thread that cannot
 * be started (or no memory for their handles) leaves its share to the others. */
void parallel_for(int n, int nthreads, void (*body)(void *arg, int i), void *arg);

/* Where something came from. `src` is the whole source text (NULL when there is none),
 * so a diagnostic can quote the line and put a caret under `col`. line 0: no position. */
typedef struct SrcLoc {
  const char *file;
  const char *src;
  int line, col; /* 1-based */
} SrcLoc;

/* A diagnostic sink. The first error is kept; later ones are ignored, because the first
 * is the one the user can act on. `msg` holds the fully formatted text:
 *   file:line:col: error: message
 *     the source line
 *         ^
 * (no trailing newline). */
typedef struct Diag {
  bool failed;
  char msg[4096];
} Diag;
int diag_error(Diag *d, SrcLoc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4))); /* returns -1 */
int diag_verror(Diag *d, SrcLoc loc, const char *fmt, va_list ap);
/* Adds "note: ..." lines to an existing error (say, the first definition of a name). */
void diag_note(Diag *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---------------------------------------------------------------- ir.c: element types */

typedef enum DType {
#define DT(id, name, bytes, is_float, is_int, is_signed) DT_##id,
#include "dtypes.def"
#undef DT
  DT_COUNT,
  DT_UNKNOWN = DT_COUNT /* not yet inferred */
} DType;

const char *dtype_name(DType t);           /* "f32"; "?" for DT_UNKNOWN */
int dtype_from_name(const char *s, DType *out); /* 0 or -1 */
size_t dtype_size(DType t);
bool dtype_is_float(DType t);
bool dtype_is_int(DType t);   /* signed or unsigned integer, not bool */
bool dtype_is_signed(DType t);

/* Scalar conversions used by the reference executor, constant data and tensor files.
 * Floats round to nearest even; f8e4m3 (the "fn" variant: no inf) saturates to its
 * largest finite value, 448. Integer stores from double truncate toward zero, saturate
 * to the int64 range (NaN gives 0), then wrap to narrower types like C casts. */
double dtype_load_f64(DType t, const void *p);
int64_t dtype_load_i64(DType t, const void *p);
void dtype_store_f64(DType t, void *p, double v);
void dtype_store_i64(DType t, void *p, int64_t v);
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t h);
uint8_t f32_to_f8e4m3(float f);
float f8e4m3_to_f32(uint8_t b);
uint8_t f32_to_f8e5m2(float f);
float f8e5m2_to_f32(uint8_t b);

/* ---------------------------------------------------------------- ir.c: shapes and types */

/* A dim is static (sym == NULL, n >= 0) or a named symbol such as the batch dim N
 * (sym != NULL, n == -1). Symbols are interned per graph, so equal names are equal
 * pointers only within one graph: compare them with dim_eq. */
typedef struct Dim {
  int64_t n;
  const char *sym;
} Dim;

typedef struct Shape {
  int rank; /* -1: not yet inferred */
  Dim dims[IR_MAX_RANK];
} Shape;

typedef struct Type {
  DType dtype; /* DT_UNKNOWN: not yet inferred */
  Shape shape;
} Type;

Type type_unknown(void);
bool type_is_known(const Type *t);
bool dim_eq(Dim a, Dim b);
bool type_eq(const Type *a, const Type *b);
bool shape_is_static(const Shape *s);
/* Whether shape a broadcasts to shape b (numpy's rules, aligned right; a static 1
 * broadcasts to anything). */
bool shape_broadcasts_to(const Shape *a, const Shape *b);
int64_t shape_numel(const Shape *s); /* -1 if any dim is symbolic */
/* "f32[N, 128]" into buf; returns buf. */
char *type_str(const Type *t, char *buf, size_t n);

/* ---------------------------------------------------------------- ir.c: checked sizes */

/* Every size derived from a model (element and byte counts, strides, offsets, window
 * output lengths) is computed with these, so a hostile file gets an error where plain
 * arithmetic would wrap. No value of the IR may need more than IR_MAX_BYTES bytes: more
 * than any GPU holds, and small enough that index arithmetic over a tensor's elements
 * (a few products of dims and strides added together, even in bytes) cannot overflow
 * int64 anywhere after the check. */
#define IR_MAX_BYTES ((int64_t)1 << 48)

/* a + b and a * b of non-negative counts; false (*r untouched) when an operand is
 * negative or the result does not fit in int64. */
bool size_add(int64_t a, int64_t b, int64_t *r);
bool size_mul(int64_t a, int64_t b, int64_t *r);
/* The element and byte counts of dims with elements of type dt (either pointer may be
 * NULL); false when a dim is negative or the bytes exceed IR_MAX_BYTES. */
bool dims_size(int rank, const int64_t *dims, DType dt, int64_t *numel, int64_t *nbytes);
/* The same for a shape, a symbolic dim counting as 1 (the bound is checked again when
 * the symbol is bound); false also for an unknown rank. */
bool shape_size(const Shape *s, DType dt, int64_t *numel, int64_t *nbytes);
/* The length of a sliding window's output: the positions of a window of k taps spread by
 * dilation dil, moved by stride over in elements with pad (begin + end) added,
 * floor((in + pad - dil (k - 1) - 1) / stride) + 1, rounded up instead with ceil_mode
 * (a last window that starts in the end padding does not count; pad_begin says where
 * that starts). false when k, stride or dil is below 1, in or a pad is negative, or a step
 * overflows; *out is 0 when the window is longer than the padded input. */
bool window_len(int64_t in, int64_t k, int64_t stride, int64_t dil, int64_t pad_begin,
                int64_t pad_end, bool ceil_mode, int64_t *out);
/* The conversion of a double to int64 that C leaves undefined out of range: false for
 * NaN and for values outside [lo, hi] (after truncation toward zero). */
bool double_to_i64(double v, int64_t lo, int64_t hi, int64_t *out);

/* ---------------------------------------------------------------- ir.c: tensors */

/* A dense row-major host tensor. Owned by a graph's arena (constants) or malloc'd by
 * tensor_new (executor values). */
typedef struct Tensor {
  DType dtype;
  int rank;
  int64_t dims[IR_MAX_RANK];
  void *data;
} Tensor;

int64_t tensor_numel(const Tensor *t);
/* t's type: its dtype and its dims, all static. */
Type tensor_type(const Tensor *t);
/* Whether t can be a value of type ty: the same dtype and rank, each static dim of ty
 * equal to t's (a symbolic dim takes any size). */
bool tensor_fits(const Tensor *t, const Type *ty);
size_t tensor_nbytes(const Tensor *t);
/* malloc, zeroed; NULL on OOM and for dims dims_size refuses. */
Tensor *tensor_new(DType dt, int rank, const int64_t *dims);
void tensor_free(Tensor *t);
Tensor *tensor_in_arena(Arena *a, DType dt, int rank, const int64_t *dims);
/* A tensor in a's arena over data: malloc'd, 16-byte aligned, tensor_nbytes long, and
 * freed with the arena (arena_adopt). */
Tensor *tensor_adopt_in_arena(Arena *a, DType dt, int rank, const int64_t *dims, void *data);
/* y = x with its dims in the order perm (y's dim i is x's dim perm[i]); y must have those
 * dims and x's dtype (interp.c). */
void tensor_permute(const Tensor *x, const int64_t *perm, Tensor *y);
/* The transposes between channels first [N, C, spatial...] and channels last
 * [N, spatial..., C] for rank r: to_first = [0, r-1, 1, .., r-2] (channels first's dim j
 * is channels last's dim to_first[j]) and its inverse to_last = [0, 2, .., r-1, 1]. */
void channels_last_perms(int r, int64_t *to_first, int64_t *to_last);
/* The row-major strides (in elements) of dims. */
void contiguous_strides(int rank, const int64_t *dims, int64_t *strides);

/* The documented generator behind `random(seed = S, scale = X)` constants and default
 * inputs, so tests can reproduce it in a few lines of Python:
 *   state = seed; for each element in row-major order:
 *     state += 0x9E3779B97F4A7C15; z = state;
 *     z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
 *     z ^= z >> 31;  u = (z >> 11) * 2^-53          (uniform in [0, 1))
 *     float types: value = (2u - 1) * scale, rounded to the type
 *     integer types: value = floor(u * scale);  bool: u < 0.5 ? 0 : 1 */
void tensor_fill_random(Tensor *t, uint64_t seed, double scale);
void tensor_fill_value(Tensor *t, double v);

/* ---------------------------------------------------------------- ir.c: ops */

typedef enum Op {
#define OP(id, name, min_in, max_in, n_out, flags, attrs) OP_##id,
#include "ops.def"
#undef OP
  OP_COUNT
} Op;

enum {
  OPF_POINTWISE = 1 << 0,
  OPF_COMMUTATIVE = 1 << 1,
  OPF_REDUCTION = 1 << 2,
  OPF_LAYOUT = 1 << 3,
  OPF_BOOL_OUT = 1 << 4,
  OPF_FLOAT_ONLY = 1 << 5,
  OPF_ALIAS = 1 << 6, /* output = the input's bytes (identity, reshape, squeeze, ...) */
};

typedef struct OpInfo {
  const char *name;
  int min_in, max_in; /* max_in -1: variadic */
  int n_out;          /* -1: decided by attributes */
  unsigned flags;
  const char *attrs; /* the schema string of ops.def */
} OpInfo;

extern const OpInfo op_info[OP_COUNT];
int op_from_name(const char *s, Op *out); /* 0 or -1 */

/* ---------------------------------------------------------------- ir.c: attributes */

typedef enum AttrKind { AK_INT, AK_FLOAT, AK_STRING, AK_INTS, AK_FLOATS, AK_TENSOR } AttrKind;

typedef struct Attr {
  const char *name;
  AttrKind kind;
  int n; /* element count for AK_INTS, AK_FLOATS */
  union {
    int64_t i;
    double f;
    const char *s;
    int64_t *ints;
    double *floats;
    Tensor *t;
  };
} Attr;

/* One entry of an op's attribute schema, parsed from ops.def. */
typedef struct AttrSpec {
  const char *name;
  AttrKind kind;
  bool required; /* no default and not optional */
  bool has_default;
  Attr def; /* the default, when has_default */
} AttrSpec;

/* The schema of op `op`: *n specs, in ops.def order. Parsed once, kept for the process. */
const AttrSpec *op_attr_specs(Op op, int *n);
const char *attr_kind_name(AttrKind k); /* "int", "float", "string", "ints", "floats", "tensor" */

/* ---------------------------------------------------------------- ir.c: values, nodes, graphs */

typedef enum ValueKind {
  VK_INPUT, /* a graph input */
  VK_CONST, /* a constant (weight); data in `data` */
  VK_NODE,  /* the output of a node */
} ValueKind;

/* How a constant was written, so the printer writes it back the same way. */
typedef enum ConstInit {
  CI_DATA,   /* explicit elements: printed inline */
  CI_ZEROS,  /* zeros */
  CI_ONES,   /* ones */
  CI_FULL,   /* full(v) */
  CI_RANDOM, /* random(seed = S, scale = X) */
  CI_FILE,   /* load("path") or load("path", "key"): .npy or .safetensors */
} ConstInit;

typedef struct Node Node;

typedef struct Value {
  int id;           /* unique within the graph, never reused */
  const char *name; /* without the '%' */
  ValueKind kind;
  Type type;
  Node *def;      /* VK_NODE: the node that defines it */
  int def_index;  /* VK_NODE: which output of def */
  Tensor *data;   /* VK_CONST: the elements (materialized at creation) */
  ConstInit init; /* VK_CONST */
  double fill;    /* CI_FULL: the value */
  uint64_t seed;  /* CI_RANDOM */
  double scale;   /* CI_RANDOM */
  const char *path, *key; /* CI_FILE: absolute path; key for .safetensors (NULL for .npy) */
  SrcLoc loc;
} Value;

struct Node {
  int id; /* unique within the graph, never reused */
  Op op;
  int nin, nout;
  Value **in;  /* an omitted optional input is NULL only at the end of the list */
  Value **out;
  int nattr;
  Attr *attrs;
  SrcLoc loc;         /* DSL position; line 0 when it came from elsewhere */
  const char *origin; /* where it came from outside the DSL (an ONNX node name); NULL */
};

/* The sizes a symbolic dim may take at run time (docs/dynamic-shapes.md): segments
 * lo..hi, ascending and disjoint, a point being lo == hi; 1 <= lo <= hi <= 2^31. */
enum { IR_MAX_DIM_SEGMENTS = 16 };
#define IR_MAX_DIM_RANGE ((int64_t)1 << 31)
typedef struct DimRange {
  const char *sym; /* interned (graph_intern) */
  int nseg;
  int64_t lo[IR_MAX_DIM_SEGMENTS], hi[IR_MAX_DIM_SEGMENTS];
  SrcLoc loc;
} DimRange;

/* Input `input`'s axis `axis` is symbol sym, bound at size. */
typedef struct DynSeed {
  const char *sym;
  int64_t size;
  int input, axis;
  const Value *value; /* a constant whose shape follows the size instead (NULL: the input) */
} DynSeed;

typedef struct Graph {
  Arena *arena;
  const char *name;
  SrcLoc loc;
  DimRange *ranges; int nranges; /* the symbols given ranges, in declaration order */
  /* the input axes that were symbols until bound (the ONNX loader's --dim, codegen's
   * bind): where the ranged dims of a class start from (docs/dynamic-shapes.md); not
   * part of the text form */
  DynSeed *bound; int nbound;
  Value **inputs;  int ninputs;
  Value **outputs; int noutputs;
  Value **consts;  int nconsts;  /* in declaration order */
  Node **nodes;    int nnodes;   /* in execution (topological) order */
  Value **values;  int nvalues;  /* every value, for lookup by name; includes dead ones */
  int next_value_id, next_node_id;
  int caps_[5];  /* capacities of the five arrays above; private to ir.c */
  void *names_;  /* name -> Value hash table; private to ir.c */
} Graph;

Graph *graph_new(const char *name);
void graph_free(Graph *g);
const char *graph_intern(Graph *g, const char *s); /* symbols: one pointer per name */
/* Gives symbol r->sym the range r (copied, the symbol interned): replaces the range it
 * had. Checks only what the graph needs to hold it; range_check says whether it is
 * valid. */
void graph_set_range(Graph *g, const DimRange *r);
/* The range of symbol sym (any pointer to that name), or NULL. */
const DimRange *graph_range(const Graph *g, const char *sym);
/* Records that input `input`'s axis `axis` was symbol sym (interned here), now bound
 * at size. */
void graph_note_bound(Graph *g, const char *sym, int64_t size, int input, int axis);
/* Whether a dim of one of g's inputs is symbol sym. */
bool graph_has_symbol(const Graph *g, const char *sym);
/* Removes sym's range, if it has one (the symbol bound to a size). */
void graph_drop_range(Graph *g, const char *sym);
/* Whether size lies in one of r's segments. */
bool range_has(const DimRange *r, int64_t size);
/* Reads r's segments from text such as "1..64" or "1,7,128..512" (r->sym and r->loc
 * untouched). 0, or -1 with what is wrong in buf; the segments are then range_check'ed. */
int range_parse(const char *text, DimRange *r, char *buf, size_t n);
/* The shape classes of r (docs/dynamic-shapes.md, section 4): each point, and each
 * segment cut at its end and at the powers of two inside it, each octave split into
 * per_octave geometric steps rounded up, one more from 128 up where per_octave > 1 (2: 1,
 * 2, 3, 4, 6, 8, 12, 16, 23, 32, 46, 64, 92, 128, 168, 208, 256, 336, 416, 512, ...: no
 * size pads by more than 1.44x, nor by more than 1.31x from 128 up), as
 * ascending class bounds into bounds[0..max). A size runs in the class of the smallest
 * bound at or above it. The count, or -1 when there are more than max. */
int range_classes(const DimRange *r, int per_octave, int64_t *bounds, int max);
/* r as text, "1, 7..512", into buf. */
const char *range_str(const DimRange *r, char *buf, size_t n);
/* NULL when r's segments are valid, else what is wrong ("segment 2 (5..3) ends before it
 * starts"), in buf. */
const char *range_check(const DimRange *r, char *buf, size_t n);
/* The largest size r allows (its last segment's hi). */
int64_t range_max(const DimRange *r);

/* The builder. Names are copied; a NULL name gets a fresh numbered one ("0", "1", ...)
 * that does not clash with any existing value. Returns NULL only when the name is
 * already taken (the caller reports it: it knows where the duplicate came from). */
Value *graph_add_input(Graph *g, const char *name, Type t);
/* Adds a constant. `data` is taken as it is (it must live in g->arena or outlive g);
 * the value's type is the tensor's, and init/fill/seed/... are set by the caller. */
Value *graph_add_const(Graph *g, const char *name, Tensor *data);
/* Appends a node with `nout` outputs of unknown type named by out_names (entries may be
 * NULL). Attributes are copied. The node lands at the end of g->nodes. */
Node *graph_add_node(Graph *g, Op op, Value **in, int nin, const Attr *attrs, int nattr,
                     const char *const *out_names, int nout);
void graph_add_output(Graph *g, Value *v);
/* A copy of g's inputs, constants, nodes, outputs, ranges and bound axes (dead values
 * left out). The constants share g's tensors, so the copy must not outlive g. NULL when
 * out of memory. */
Graph *graph_clone(const Graph *g);

/* Turns node output or graph input v into a constant holding data (which must live in
 * g->arena or outlive g), keeping its name, id and type; appends it to g->consts. An input
 * leaves g->inputs; the node that defined an output is the caller's to remove. */
void graph_make_const(Graph *g, Value *v, Tensor *data);
Value *graph_find_value(const Graph *g, const char *name);

/* Convenience for builder users: one node with one output, types inferred at once.
 * Returns the output, or NULL with d set (the node is then removed again). */
Value *graph_op(Graph *g, Diag *d, Op op, Value **in, int nin, const Attr *attrs, int nattr,
                const char *out_name);

/* Attribute helpers. attr_int/attr_float/... return the node's attribute, else the
 * schema default; attr_find returns NULL when absent (no default applied). */
const Attr *attr_find(const Node *n, const char *name);
int64_t attr_int(const Node *n, const char *name);
double attr_float(const Node *n, const char *name);
const char *attr_string(const Node *n, const char *name);
/* ints: the list and its length through *len (NULL, 0 when absent without default). */
const int64_t *attr_ints(const Node *n, const char *name, int *len);
Attr attr_make_int(const char *name, int64_t v);
Attr attr_make_float(const char *name, double v);
Attr attr_make_string(const char *name, const char *s);
Attr attr_make_ints(const char *name, const int64_t *v, int n); /* v must outlive use */
Attr attr_make_floats(const char *name, const double *v, int n); /* v must outlive use */

/* One of the two attributes every op accepts: `fuse = K` (an int, 1 or more) puts the
 * node in fuse group K, whose nodes the GPU runs as one kernel (passes/fuse.c). It changes
 * nothing about what a node computes: the reference executor ignores it. Only a group's
 * last node (its root) may have outputs used outside the group, and its first node when
 * that is not pointwise (an anchor, whose kernel then stores its one output too): by
 * nodes after the root, or as a graph output. */
#define IR_ATTR_FUSE "fuse"
int64_t node_fuse_group(const Node *n); /* K, or 0 when the node has no fuse attribute */
/* The other one: `kind = "gemm"` on a group's root (and on no other node) names the
 * group's kind (group.c), which the verifier checks against what the group's nodes make. */
#define IR_ATTR_KIND "kind"

/* Sets attribute a on n (replacing the one of that name), copied into g's arena; removes
 * n's attribute `name` if it has one (the others keep their order). */
void node_set_attr(Graph *g, Node *n, Attr a);
void node_remove_attr(Node *n, const char *name);
/* The input of two-input node n that is not v (NULL when v is neither input, or both). */
const Value *node_other_input(const Node *n, const Value *v);
/* Rewriting. */
void graph_replace_uses(Graph *g, Value *old, Value *repl); /* node inputs and outputs */
int graph_count_uses(const Graph *g, const Value *v);        /* node inputs + graph outputs */
/* Who reads each value, for passes and codegen that ask it of many values: built in one walk over
 * g, so asking costs the value's readers rather than the whole graph (a pass that asked
 * graph_count_uses of every node would be quadratic). It describes g as it was built:
 * a pass that changes node inputs must build it again, or keep it up to date. */
typedef struct Users {
  int *start; /* by value id: the readers of v are at[start[id] .. start[id + 1]) */
  int *at;    /* positions in g->nodes, ascending; a node once per input it reads v as */
  int *outputs; /* by value id: how often v is a graph output */
  int nid;      /* g->next_value_id when built */
} Users;
int users_build(const Graph *g, Users *u); /* 0, or -1 on out of memory */
void users_free(Users *u);
/* graph_count_uses: the inputs that read v plus the times it is a graph output. */
int users_count(const Users *u, const Value *v);
/* The readers of v and their number (node inputs only). */
const int *users_of(const Users *u, const Value *v, int *n);
/* Drops nodes for which keep[node->id] is false (keep has g->next_node_id entries) and
 * constants for which keep_const[value->id] is false (g->next_value_id entries; NULL:
 * keep all). Order is preserved. */
void graph_retain(Graph *g, const bool *keep_node, const bool *keep_const);

/* ---------------------------------------------------------------- ir.c: files */

/* Opens path for reading when it is a regular file, its size into *size (may be NULL).
 * Anything else a model or a user names where a file belongs (a FIFO, a device, a
 * directory) is refused without blocking: a FIFO would hang the reader and a device could
 * feed it without end. NULL with the reason in why ("No such file or directory", "it is a
 * FIFO, not a regular file"). */
FILE *fopen_regular(const char *path, uint64_t *size, char *why, size_t n);
/* The regular file at path, opened as fopen_regular opens it, mapped read-only: *len
 * bytes (an empty file is a pointer to none); unmap_regular releases it. NULL with the
 * reason in why. The bytes are the file's: one that shrinks while mapped faults. */
const void *map_regular(const char *path, size_t *len, char *why, size_t n);
void unmap_regular(const void *p, size_t len);

/* An output file is written under a temporary name beside its path and renamed into
 * place on success, so no reader ever sees half a file and a failure leaves nothing
 * behind. The file gets mode 0644, like a file most tools make. A symlink to a regular
 * file gets the file it names replaced. Only regular files are replaced: a character
 * device or a FIFO (/dev/null, /dev/stdout, a pipe) is written in place (in_place), and
 * anything else (a directory) is refused, so an output never replaces what is not a
 * file. A FIFO that no process reads is refused rather than waited on. */
typedef struct OutFile {
  FILE *f;
  char *path, *tmp;
  bool in_place; /* written straight into a device or FIFO: tmp is NULL, nothing to remove */
} OutFile;
FILE *outfile_open(OutFile *o, const char *path, Diag *d); /* NULL with d set */
/* Flushes, closes and renames (in place: flushes and closes); on any failure removes the
 * temporary. 0 or -1. */
int outfile_commit(OutFile *o, Diag *d);
void outfile_abort(OutFile *o); /* closes and removes the temporary */
int make_dirs(const char *dir, Diag *d); /* mkdir -p */

/* Adds a note naming a node that has no source position (an ONNX node, a builder node):
 * its op, first output and origin. Nothing for nodes with a position: the error already
 * points at them. */
void ir_note_node(Diag *d, const Node *n);

/* ---------------------------------------------------------------- view.c: strided views */

/* Element (i0, ..., i[rank-1]) of a view is element offset + sum (ik / div[k]) *
 * stride[k] of base's dense row-major buffer (strides and offset in elements; stride 0
 * broadcasts; div 0 or 1 takes ik itself). A div above 1 is a dim merged from two, the
 * inner one a broadcast of div elements: grouped-query attention's heads [kv heads, rep]
 * (stride s, 0) read as one dim of kv heads x rep, stride s, div rep (head h reads kv
 * head h / rep). Only a reader that knows div takes such a view (view_divides). */
typedef struct View {
  const Value *base;
  int rank;
  int64_t dims[IR_MAX_RANK], stride[IR_MAX_RANK], offset;
  int64_t div[IR_MAX_RANK];
} View;

void view_init(View *v, const Value *base); /* base itself (its shape must be static) */
/* The view of output `out` of node n, given the view `in` of n's first input: true when
 * n only renames elements (reshape, squeeze, unsqueeze, flatten, identity, transpose, a
 * split, a gather of one constant index) and the result is a strided view; false
 * otherwise (a reshape that would need a copy, say), leaving *res unspecified. */
bool view_through(const Node *n, int out, const View *in, View *res);
/* view_through, and also an expand (its broadcast dims of stride 0) and a slice of
 * constant bounds (its start an offset, its step a stride; not along a dim of div above
 * 1), which are views only to a kernel that reads its input through them (a loop kernel,
 * attention's operands), not aliases of the input's bytes. Static shapes only. */
bool view_through_reads(const Node *n, int out, const View *in, View *res);
/* Whether some dim of v has a div above 1 (see View). */
bool view_divides(const View *v);
/* Whether v is a matrix of rows: its last dim contiguous (stride 1) and its other dims
 * walked by one stride, *ld elements from row to row (at least the row's length), *rows
 * rows in all: a GEMM operand with a leading dim. */
bool view_rows(const View *v, int64_t *rows, int64_t *ld);
/* The constant of a multiply or a division by one scalar constant (x * c, c * x or
 * x / c, x of the output's type; f32, f16 or bf16), which commutes with views; NULL when
 * n is no such node. */
const Value *view_scale_factor(const Node *n);

/* ---------------------------------------------------------------- infer.c: shape and type inference */

/* Computes the output types of one node from its inputs and attributes into out[]
 * (n->nout entries). Checks attribute values against the input ranks and the input
 * dtypes against the op. Errors name the node's location. */
int ir_infer_node(const Node *n, Type *out, Diag *d);
/* Infers every node in order. A value that already has a known type (written in the
 * source) must agree with the inferred one: "type mismatch" otherwise. */
int ir_infer(Graph *g, Diag *d);

/* ---------------------------------------------------------------- dynaxes.c: ranged axes
 *
 * Where ranged symbols lie in a graph bound at a class's sizes (docs/dynamic-shapes.md,
 * section 2). Axis a of a value carries symbol S with stride c when position p along it
 * is S's index (p / c) % M, M the size S is bound at: p is padding at an actual size s
 * when that index is >= s. */
enum { DYN_MAX_SYMS = 8, DYN_AXIS_SYMS = 2 };
typedef struct DynTag {
  int8_t sym;     /* index into DynAxes.syms; -1: none */
  int64_t stride; /* c */
} DynTag;
typedef struct DynAxis {
  DynTag t[DYN_AXIS_SYMS]; /* used first; rows of batch and sequence carry two */
} DynAxis;
/* What a node that combines elements along a ranged axis needs from the padding. */
typedef enum DynNeed {
  DYN_MASK_ZERO,    /* 0: sums, a matmul's K (both operands), a reversed cumsum */
  DYN_MASK_NEG_INF, /* -inf: max, softmax, log-sum-exp, argmax */
  DYN_MASK_POS_INF, /* +inf: min, argmin */
  DYN_MASK_ONE,     /* 1: products */
  DYN_MEAN,         /* 0, and the sum divided by the actual count */
  DYN_UNSUPPORTED,  /* nothing yet (why says what) */
} DynNeed;
typedef struct DynMix {
  const Node *node;
  int input;     /* the node's input that is combined along a ranged axis */
  const Value *value; /* that input as the analysis saw it (the tags are its) */
  int sym, axis; /* the symbol, and that input's axis */
  DynNeed need;
  const char *why;
} DynMix;
typedef struct DynAxes {
  int nsyms;
  const char *syms[DYN_MAX_SYMS];
  int64_t size[DYN_MAX_SYMS];
  DynAxis *axes; /* value id * IR_MAX_RANK + axis */
  int nvalues;
  DynMix *mix; /* the nodes that combine along ranged axes, in graph order */
  int nmix;
  /* constants whose values were folded from the sizes and that the analysis proved right
   * at every size: a gather's indices that send each real position to the same position
   * of its source (flat indices b * S + s into a flattened mask) */
  const Value **exact;
  int nexact;
} DynAxes;

/* Tags every value of g (bound, shapes inferred) from the seeds. 0, or -1 with d set
 * (a seed that names no input or constant axis of its size, out of memory). */
int dyn_axes(const Graph *g, const DynSeed *seeds, int nseeds, DynAxes *out, Diag *d);
void dyn_axes_free(DynAxes *a);
/* The tags of v's axis; NULL out of range. */
const DynAxis *dyn_axis(const DynAxes *a, const Value *v, int axis);
bool dyn_tagged(const DynAxis *x);
const char *dyn_need_str(DynNeed need); /* "padding as -inf" */
/* red[0..rank): the axes reduction n reduces, from its "axes" list (none: all of them). */
void dyn_reduced_axes(const Node *n, int rank, bool *red);

/* ---------------------------------------------------------------- verify.c: the verifier */

/* Checks every invariant a pass must keep: each value defined once and before use,
 * nodes in topological order (no cycles), inputs/outputs/constants well formed,
 * attributes match the schema, arities match the op table, every type known and equal
 * to what inference computes. */
int ir_verify(const Graph *g, Diag *d);
/* The fuse groups of g by node position: first[i] is the position of the first node of
 * node i's group and next[i] that of the next node of the group after i (-1 at the
 * group's last node, its root); both -1 for a node in no group. Either may be NULL.
 * O(n log n) in the nodes, whatever the group numbers. 0, or -1 on out of memory. */
int ir_fuse_groups(const Graph *g, int *first, int *next);
/* Validates attributes against the op's schema: unknown names, wrong kinds, missing
 * required ones, duplicates. Used by the verifier and by frontends. */
int ir_check_attrs(const Node *n, Diag *d);
/* Reorders g->nodes topologically, keeping source order where it is already valid.
 * Fails naming the values of a cycle. */
int ir_toposort(Graph *g, Diag *d);

/* ---------------------------------------------------------------- group.c: fuse group plans */

/* What a fuse group's one kernel is. The fuse pass writes the kind on the group's root
 * (IR_ATTR_KIND, by the names group_kind_name gives); the verifier runs the recognizer
 * (group_plan) on every group and checks that it finds a plan of that kind; codegen
 * renders the plan. */
typedef enum GroupKind {
  GROUP_NONE,
  GROUP_POINTWISE, /* pointwise nodes: a thread per element of the root's output */
  GROUP_EPILOGUE,  /* an anchor (transpose, slice, gather, layer_norm, softmax or
                      log_softmax along the last dim), then pointwise nodes it applies to
                      each element it stores */
  GROUP_CONV,      /* a convolution: maybe a prologue (a cast from f32 and transposes) it
                      reads its input through, maybe an epilogue */
  GROUP_GEMM,      /* a matmul for cuBLASLt: maybe views its first input is read through
                      as rows, maybe an epilogue cuBLASLt applies (a bias, a residual, a
                      relu; or a bias and a tanh gelu) */
  GROUP_CONCAT,    /* a concat: maybe views its inputs are read through, maybe an
                      epilogue */
  GROUP_ATTENTION, /* matmul, pointwise, softmax, pointwise, matmul, maybe a transpose,
                      its operands read through views and scales */
  GROUP_LOOP,      /* pointwise nodes and nodes that only remap indices (group_remap_node):
                      a thread per element of the root's output, each node's element at an
                      index vector its inputs' elements at remapped ones (a concat picks
                      the one input it reads by a branch) */
  GROUP_KIND_COUNT
} GroupKind;

const char *group_kind_name(GroupKind k); /* "pointwise", "epilogue", ...; "none" */
GroupKind group_kind_from_name(const char *s); /* GROUP_NONE when s names no kind */
/* The kind the IR_ATTR_KIND attribute of n names; GROUP_NONE when it has none. */
GroupKind node_group_kind(const Node *n);

/* What one kernel takes, in one place for the fuse pass and codegen. A group's pointwise
 * nodes (an epilogue, each of attention's two chains) read at most GROUP_MAX_INPUTS
 * values from outside (codegen's index spaces walk those and the output); the fuse pass
 * makes groups of at most GROUP_MAX_NODES nodes (NVRTC's time for one function grows
 * faster than its length past about a thousand ops: a chain of 4,000 takes it 30 s, 256
 * chained ops half a second; the kernel after a group reads its output back, one load
 * per element against hundreds of ops, and NVRTC's time stays linear in the graph); a
 * concat anchor takes at most GROUP_MAX_CONCAT_INPUTS inputs (codegen does not part a
 * concat with an epilogue, and NVRTC's time grows faster than the inputs one kernel
 * picks from: codegen's CODEGEN_PART_OPERANDS); an attention has at most
 * GROUP_MAX_ATTENTION_NODES nodes, heads at most GROUP_MAX_HEAD wide, at most
 * GROUP_MAX_KEYS keys (a row of scores and the tiles in 48 KB of shared memory) and at
 * most GROUP_MAX_SCALES scalar multiplies on an operand. */
enum {
  GROUP_MAX_INPUTS = 7,
  GROUP_MAX_NODES = 256,
  GROUP_MAX_CONCAT_INPUTS = 128,
  GROUP_MAX_ATTENTION_NODES = 64,
  GROUP_MAX_HEAD = 128,
  GROUP_MAX_KEYS = 4096,
  GROUP_MAX_SCALES = 8,
};
/* The limits the recognizer checks: the fuse pass and codegen pass what fits their
 * target (group_limits_default: the ones above); the verifier checks structure only
 * (NULL). */
typedef struct GroupLimits {
  int inputs, nodes, concat_inputs, attention_nodes, head, keys, scales;
} GroupLimits;
extern const GroupLimits group_limits_default;
typedef struct Target Target;
/* The limits a target's kernels take: the defaults, with fewer attention keys where a
 * block has less static shared memory than 48 KiB. */
GroupLimits group_limits_for(const Target *t);

/* An attention operand as its kernel reads it: view of its buffer (view.base), each
 * element multiplied by the constants scale[0..nscale) in turn, or divided by those that
 * divide[] marks (each result rounded to the operand's type), the nodes between the
 * buffer and the matmul (node[0..n), the buffer's side first). */
typedef struct GroupOperand {
  View view;
  const Value **scale;
  bool *divide;
  int nscale;
  const Node **node;
  int n;
} GroupOperand;

/* Why the recognizer found no plan (GroupPlan.fail): the nodes make no such kernel, or
 * one over a limit (a reason the fuse pass's report counts). */
typedef enum GroupFail {
  GROUP_FAIL_SHAPE = 1, GROUP_FAIL_INPUTS, GROUP_FAIL_NODES, GROUP_FAIL_SIZE, GROUP_FAIL_MEMORY
} GroupFail;

/* A group's plan: its nodes by role. Every list is in node order. */
typedef struct GroupPlan {
  GroupKind kind;
  const Node *const *node; /* the members, in node order (the caller's array) */
  int n;
  const Node *root;        /* node[n - 1], whose output leaves the group */
  const Node *anchor;      /* the node whose kernel it is (epilogue, conv, gemm, concat);
                              NULL for pointwise and attention */
  const Node **prologue;   /* conv: the cast and transposes its input comes through */
  int nprologue;
  const Value *prologue_src;            /* what prologue[0] reads, a kernel parameter */
  int64_t prologue_perm[IR_MAX_RANK];   /* the conv input's dim j is the source's dim perm[j] */
  const Node **view;       /* gemm, concat: the view nodes before the anchor */
  int nview;
  View *operand;           /* gemm: the matmul's first input as read (1 of them); concat:
                              each input as read (anchor->nin of them); a view of the
                              value itself where no view node leads to it */
  int noperand;
  const Node **epilogue;   /* pointwise: every node; else the pointwise nodes after the
                              anchor (or after attention's root: none) */
  int nepilogue;
  const Value **in;        /* every value the group reads from outside, once */
  int nin;
  int nepilogue_in;        /* how many distinct values the epilogue reads from outside */
  const Value *out;        /* the root's output */
  const Value *side;       /* the anchor's output, stored too (read outside), or NULL */
  /* gemm's epilogue: the bias add's other input, the residual (each NULL: none), the
   * activation after them */
  const Value *bias, *residual;
  bool relu, gelu;
  /* attention: S = scores(Q, K), pre(S), P = softmax, post(P), O = values(P', V) */
  const Node *scores, *softmax, *values;
  GroupOperand q, k, v;
  const Node **pre, **post;
  int npre, npost;
  GroupFail fail;          /* why not, when group_plan fails */
  void *mem_;              /* private: what group_plan_free frees */
} GroupPlan;

/* The kind a group of these nodes (in node order) can only be, by the ops it holds: the
 * recognizer then says whether it is one. */
GroupKind group_guess_kind(const Node *const *node, int n);
/* The recognizer: the plan of the group of node[0..n) (in node order, its last node the
 * root) as a kernel of kind `kind` (GROUP_NONE: group_guess_kind's, or where that has
 * none and every node is pointwise or remaps indices, a loop), within lim (NULL:
 * none). u says who reads each value of g (the members' outputs must be read inside the
 * group but the root's, and the anchor's in an epilogue that stores it too). 0, or -1
 * with p->fail set and why holding a sentence: "node 12 (add) is no bias add of the
 * matmul's output". Free the plan with group_plan_free either way. */
int group_plan(const Graph *g, const Users *u, const Node *const *node, int n, GroupKind kind,
               const GroupLimits *lim, GroupPlan *p, char *why, size_t nwhy);
void group_plan_free(GroupPlan *p);
/* Whether n can anchor a group: a node whose kernel computes one output element per
 * thread and can apply pointwise nodes to it as it stores it (a conv, a concat of at most
 * lim->concat_inputs, or an epilogue's anchor). */
bool group_is_anchor(const Node *n, const GroupLimits *lim);
/* Whether n only remaps indices, so a loop group (GROUP_LOOP) can compute its element at
 * an index vector from its input's at another: transpose, the aliases (reshape, flatten,
 * squeeze, unsqueeze, identity), slice, split, expand, concat, and a gather of one
 * constant index; static shapes only. */
bool group_remap_node(const Node *n);
/* Whether matmul m can take an epilogue in cuBLASLt: f32, f16, bf16 or e4m3 rows ([.., M,
 * K]) times 2-D weights; e4m3 with weights [N, K] (transpose_b) and a 16-bit output. */
bool group_gemm_matmul(const Node *m);

/* ---------------------------------------------------------------- print.c: the text form */

/* Prints g in the text form that frontends/dsl parses back: print(parse(print(g))) is
 * byte-identical to print(g). */
void ir_print(const Graph *g, FILE *f);
/* Constants of more elements than this are written to a .safetensors file beside a
 * printed file rather than inline (a model's weights would be gigabytes of text). */
#define IR_INLINE_MAX_ELEMENTS 4096
/* Prints g into the file at path (temp + rename). Constants with inline data of more
 * than IR_INLINE_MAX_ELEMENTS elements go to <path without .gir>.safetensors and become
 * load("that file", "name") constants of g from then on (their data stays in memory), so
 * later dumps of the same graph reference the file rather than rewriting it. A failure
 * leaves neither file, and g as it was. Into a device or a FIFO (in place: see OutFile)
 * everything is printed inline, as on standard output. */
int ir_print_file(Graph *g, const char *path, Diag *d);
/* Into a malloc'd string (caller frees); NULL on OOM. */
char *ir_print_str(const Graph *g);
/* Prints a double so it reads back as the same value (the shortest such "%.*g"). */
void ir_print_double(FILE *f, double v);
/* Into buf (64 bytes are enough): the shortest "%.*g" of v that strtod reads back as v
 * rounded to float type t, always with a '.' or an exponent ("1.0", "0.1", "-0.0",
 * "5e-324"), or "inf", "-inf", "nan": a C floating literal when v is finite. */
void ir_format_float(char *buf, size_t n, double v, DType t);
/* "%name", or %"..." with C escapes when the name is not plain: as the parser reads it. */
void ir_print_value_name(FILE *f, const char *name);
void ir_print_float32(FILE *f, float v);

/* ---------------------------------------------------------------- interp.c: the reference executor */

/* Evaluates one node on host tensors: in[] has n->nin entries (NULL for omitted
 * optional inputs), out[] receives n->nout new tensors (caller frees). Floating point is
 * computed in double and rounded to the output type; integers in int64. */
int ir_eval_node(const Node *n, Tensor *const *in, Tensor **out, Diag *d);
/* Evaluates the graph. inputs[] follows g->inputs; outputs[] receives g->noutputs new
 * tensors (caller frees). Symbolic dims are bound from the inputs' shapes; an input whose
 * dtype or shape disagrees with the graph is an error naming it. */
int ir_eval(const Graph *g, Tensor *const *inputs, Tensor **outputs, Diag *d);
/* ir_eval that also shows each graph input and each value a node makes to seen(), once,
 * right after it is made (the tensor is freed later: seen must not keep it). */
typedef void (*IrEvalSeen)(const Value *v, const Tensor *t, void *arg);
int ir_eval_seen(const Graph *g, Tensor *const *inputs, Tensor **outputs, IrEvalSeen seen,
                 void *arg, Diag *d);

/* About how much work ir_eval_node does for n (in the executor's inner steps, a
 * multiply-add or an element visited), from its input types and out[] (n->nout output
 * types; NULL: its outputs' own types); INFINITY when shapes alone do not bound it (roi_align's adaptive sampling) or a
 * shape is symbolic. Folding runs the executor at compile time, so both folders (the
 * ONNX loader and the constfold pass) leave a node whose work passes IR_FOLD_NODE_WORK,
 * or would take the total past IR_FOLD_TOTAL_WORK, as a node: a small hostile model
 * (a convolution of two constant vectors with huge pads) cannot stall the compiler. */
double ir_eval_work(const Node *n, const Type *out);
#define IR_FOLD_NODE_WORK 3e7
#define IR_FOLD_TOTAL_WORK 3e8

/* ---------------------------------------------------------------- target.c: the GPU compiled for
 *
 * Every fact about the GPU that passes and codegen may use, in one struct: an
 * architecture's entry of the table (target_for_arch), whose capacities are those of one
 * GPU of that architecture (Target.gpu names it), overwritten by a device's own figures
 * when compiling for one (compiler/jit.c, gpucc_device_target). No file of passes/ or
 * codegen/ spells a hardware number: they read these fields (tests/hardware_numbers.py
 * holds them to it). Pure data: ir/ asks no device. */

#define TARGET_DEFAULT_ARCH "sm_90"

/* Tensor-core and copy instructions an architecture has (Target.insn). */
enum {
  TARGET_MMA_F16 = 1 << 0,  /* mma.sync on f16 operands (sm_80 on) */
  TARGET_MMA_BF16 = 1 << 1, /* mma.sync on bf16 operands (sm_80 on) */
  TARGET_MMA_TF32 = 1 << 2, /* mma.sync on tf32 operands (sm_80 on) */
  TARGET_MMA_INT8 = 1 << 3, /* mma.sync on s8/u8 operands (sm_80 on) */
  TARGET_MMA_FP8 = 1 << 4,  /* mma.sync on e4m3/e5m2 operands (sm_89 on) */
  TARGET_CP_ASYNC = 1 << 5, /* cp.async, global to shared memory (sm_80 on) */
  TARGET_TMA = 1 << 6,      /* cp.async.bulk.tensor, the tensor memory accelerator (sm_90 on) */
  TARGET_WGMMA = 1 << 7,    /* wgmma.mma_async, warpgroup MMA (sm_90a only) */
};

typedef struct Target {
  char arch[16];        /* NVRTC's --gpu-architecture: "sm_90a" */
  int cc;               /* compute capability times ten: 90 for sm_90 and sm_90a */
  char gpu[64];         /* whose figures: the table's GPU ("H100 SXM5"), or a device's name */
  const char *source;   /* where the figures below come from: "table", "device", or what
                           changed the table's ("--sms over the table"); a static string */
  int sms;              /* streaming multiprocessors */
  int smem_block;       /* bytes of shared memory a block may declare statically */
  int smem_block_optin; /* bytes a block may have with the opt-in attribute (dynamic) */
  int smem_sm;          /* bytes of shared memory an SM has for its resident blocks */
  int regs_sm;          /* 32-bit registers an SM has */
  int regs_thread;      /* most 32-bit registers a thread may have */
  int threads_block;    /* most threads a block may have */
  int threads_sm;       /* most threads resident on an SM */
  int blocks_sm;        /* most blocks resident on an SM */
  bool clusters;        /* thread block clusters (__cluster_dims__, distributed shared memory) */
  int cluster_max;      /* blocks of a cluster, portable (1 without clusters) */
  unsigned insn;        /* TARGET_MMA_F16 | ...: the instructions there are */
  int64_t l2_bytes;     /* L2 cache */
  /* The launch geometry codegen uses by default: `block` threads a block for kernels that
   * walk their work in grid-stride loops, and grids of at most `max_blocks` blocks. */
  int block, max_blocks;
} Target;

/* The architectures gpucc compiles for, NULL-terminated: sm_80, sm_86, sm_89, sm_90, sm_90a. */
extern const char *const target_archs[];
/* arch's table entry into *out (NULL: TARGET_DEFAULT_ARCH); an unknown arch is an error
 * listing the known ones. */
int target_for_arch(const char *arch, Target *out, Diag *d);
/* The default arch's entry, for callers given no target. */
const Target *target_default(void);
/* 0 when t is usable (a Target a caller filled or changed): a known arch, at least one SM,
 * shared memory and registers, a default block of whole warps no larger than a block may
 * be, a grid cap, a cluster size of at least 1; else -1 with d naming the field. */
int target_check(const Target *t, Diag *d);
/* The arch of the table for a device of compute capability cc (times ten): the highest at
 * or below it (a newer GPU runs the PTX of that arch); NULL below the oldest. The
 * arch-specific sm_90a is never chosen: it is asked for by name. */
const char *target_arch_for_cc(int cc);
/* One line for reports: "sm_90, 132 SMs, 227 KiB shared memory a block, clusters of 8
 * (table: H100 SXM5)". */
void target_describe(const Target *t, char *buf, size_t n);

/* ---------------------------------------------------------------- tensorio.c: tensor files */

/* .npy: formats 1.0, 2.0 and 3.0, little-endian, C order only, and the dtypes of
 * dtypes.def that numpy has natively ('<f8' '<f4' '<f2' '<i8' '<i4' '<i2' '|i1' '|u1'
 * '|b1'); bf16 and f8 (numpy has no such types) can be neither read nor written. Shape ()
 * is a scalar (rank 0). Errors name the file. Reads into malloc'd tensors (caller frees
 * with tensor_free). npy_write writes format 1.0 (2.0 if the header needs it). */
Tensor *npy_read(const char *path, Diag *d);
int npy_write(const char *path, const Tensor *t, Diag *d); /* via a temp file + rename */
/* .safetensors: reads the tensor named key. */
Tensor *safetensors_read(const char *path, const char *key, Diag *d);
/* Writes n tensors under the given names (via a temp file + rename). */
int safetensors_write(const char *path, const char *const *names, const Tensor *const *ts,
                      int n, Diag *d);
/* The same into an open stream; path names it in messages. */
int safetensors_fwrite(FILE *f, const char *path, const char *const *names,
                       const Tensor *const *ts, int n, Diag *d);
/* Picks by extension (.npy or .safetensors; key NULL for .npy). */
Tensor *tensor_load(const char *path, const char *key, Diag *d);

#endif
