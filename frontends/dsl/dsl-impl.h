/* dsl-impl.h: what the DSL's scanner (lexer.l), grammar (parser.y) and lowering (dsl.c)
 * share: the parse context and the syntax tree. The grammar only builds the tree and
 * checks what it can see locally (op names, arity, dtypes, dims); dsl.c turns the whole
 * tree into a Graph once every name is known, so values may be used before the line
 * that defines them. The tree lives in one arena freed after lowering. */
#ifndef GPUCC_DSL_IMPL_H
#define GPUCC_DSL_IMPL_H

#include "ir/ir.h"

#include <setjmp.h>

/* A number as written: an INT token keeps its magnitude exactly (so INT64_MIN and
 * uint64 seeds survive); every number also has its double value, read with strtod from
 * the text so that float constants round exactly once. */
typedef struct DslNum {
  bool is_int;
  bool neg;
  uint64_t mag; /* is_int: the magnitude */
  double f;     /* the value, sign included */
  SrcLoc loc;
} DslNum;

/* A type as written; symbols point into the tree's arena until lowering interns them. */
typedef struct DslType {
  Type t;
  SrcLoc loc;
} DslType;

/* A constant literal: a number or a list. `count` (leaves below) and `depth` (levels of
 * lists) are computed bottom-up by the grammar, so checking a literal against its type
 * never walks deeper than the type's rank. */
typedef struct DslLit {
  bool is_list;
  DslNum num;
  struct DslLit *first, *last, *next; /* is_list: the entries */
  int64_t n;                          /* is_list: number of entries */
  int64_t count;
  SrcLoc loc;
} DslLit;

/* One dim as written, before it joins its type. */
typedef struct DslDim {
  DslNum num;
  const char *sym; /* a symbolic dim; NULL for a number */
  SrcLoc loc;
} DslDim;

typedef enum DslAttrKind { DA_NUM, DA_STRING, DA_LIST, DA_TENSOR } DslAttrKind;

typedef struct DslNumList {
  DslNum num;
  struct DslNumList *next;
} DslNumList;

typedef struct DslAttr {
  const char *name;
  SrcLoc loc;
  DslAttrKind kind;
  DslNum num;        /* DA_NUM */
  const char *str;   /* DA_STRING */
  DslNumList *list;  /* DA_LIST */
  int nlist;
  DslType type;      /* DA_TENSOR */
  DslLit *lit;       /* DA_TENSOR */
  struct DslAttr *next;
} DslAttr;

typedef enum DslExprKind { DE_VALUE, DE_OP } DslExprKind;

/* An expression node. Nodes are chained in creation order (`created`); the grammar
 * reduces children before parents, so that order is a valid post-order and lowering
 * needs no recursion however long an expression is. */
typedef struct DslExpr {
  DslExprKind kind;
  SrcLoc loc;
  const char *name; /* DE_VALUE: the value's name */
  Op op;            /* DE_OP */
  struct DslExpr **args;
  int nargs;
  DslAttr *attrs;
  int nattrs;
  const char *origin;
  struct DslExpr *created;
  struct DslExpr *next_arg; /* while an argument list is being built */
  /* Lowering state. */
  Value *val;     /* DE_OP: its (first) output */
  Node *use_node; /* DE_VALUE: the node input that refers to it */
  int use_index;
} DslExpr;

typedef struct DslResult {
  const char *name;
  SrcLoc loc;
  bool has_type;
  DslType type;
  struct DslResult *next;
} DslResult;

typedef struct DslInit {
  ConstInit kind;
  SrcLoc loc;
  double fill;
  uint64_t seed;
  double scale;
  const char *path, *key;
  DslLit *lit;
} DslInit;

typedef struct DslInitArg {
  const char *name; /* "seed" in seed = 1; NULL when positional */
  bool is_string;
  const char *str;
  DslNum num;
  SrcLoc loc;
  struct DslInitArg *next;
} DslInitArg;

typedef struct DslRef {
  const char *name;
  SrcLoc loc;
  struct DslRef *next;
} DslRef;

typedef enum DslStmtKind { DS_CONST, DS_NODE, DS_RETURN } DslStmtKind;

typedef struct DslStmt {
  DslStmtKind kind;
  SrcLoc loc;
  DslResult *results; /* DS_CONST: exactly one */
  int nresults;
  DslType ctype;   /* DS_CONST */
  DslInit init;    /* DS_CONST */
  DslExpr *first;  /* DS_NODE: the first expression node the statement created */
  DslExpr *root;   /* DS_NODE */
  DslRef *rets;    /* DS_RETURN */
  struct DslStmt *next;
} DslStmt;

/* A graph's dims(...) clause: one range a symbol, in the order written. */
typedef struct DslRange {
  DimRange r; /* sym in the tree's arena until lowering interns it */
  struct DslRange *next;
} DslRange;

typedef struct DslCtx {
  Diag *d;
  const char *file, *src; /* both live in the graph's arena */
  size_t len;
  Arena *ast;
  jmp_buf fatal; /* the scanner's fatal errors land here instead of exit() */
  /* Scanner position (1-based) and the last token, for "found ..." in messages. */
  int line, col;
  char tok[40];
  char tok_msg[160]; /* a grammar action's message, for FAIL */
  DslExpr *stmt_mark; /* the last expression node of the previous statement */
  /* The tree. */
  const char *gname;
  SrcLoc gloc, end_loc;
  DslResult *params;
  DslRange *ranges, *ranges_tail;
  DslStmt *stmts, *stmts_tail;
  DslExpr *exprs, *exprs_tail;
} DslCtx;

/* lexer.l: runs the grammar over ctx->src; 0, or -1 with ctx->d set. */
int dsl_run_parser(DslCtx *ctx);

/* dsl.c: helpers the grammar's actions use. */
SrcLoc dsl_loc(const DslCtx *ctx, int line, int col);
DslExpr *dsl_new_expr(DslCtx *ctx, DslExprKind kind, SrcLoc loc);
int dsl_make_type(DslCtx *ctx, const char *dtype, SrcLoc loc, DslType *out);
int dsl_add_dim(DslCtx *ctx, DslType *t, const DslDim *dim);
int dsl_check_int64(DslCtx *ctx, const DslNum *n, int64_t *out);
int dsl_make_init(DslCtx *ctx, const char *name, SrcLoc loc, DslInitArg *args, bool call,
                  DslInit *out);

#endif
