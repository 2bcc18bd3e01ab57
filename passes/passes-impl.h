/* passes-impl.h: what the files of passes/ share and nobody else sees: small rewriting
 * helpers for passes that change nodes in place. */
#ifndef GPUCC_PASSES_IMPL_H
#define GPUCC_PASSES_IMPL_H

#include "passes/passes.h"

bool pass_is_output(const Graph *g, const Value *v); /* v is one of g's outputs */
bool pass_same_shape(const Shape *a, const Shape *b);
/* Whether v runs along y's last dim: [N], [1, N], [1, 1, N], ... of at most y's rank,
 * N y's last dim (a bias of a linear layer's output). */
bool pass_along_last(const Value *v, const Value *y);
/* Whether v holds one element (a static shape of element count 1). */
bool pass_single_element(const Value *v);
/* Whether v is a float constant whose every element is exactly 1. */
bool pass_all_ones(const Value *v);
/* Whether n is a matmul of numpy's meaning alone: no transpose_b, scale 1 (the passes
 * that move or rewrite matmuls before quantize handle no other). */
bool pass_plain_matmul(const Node *n);
/* Whether n is a linear layer: a plain matmul by constant 2-D weights [K, N]. */
bool pass_linear_layer(const Node *n);
/* The one node that reads v (maybe as several of its inputs), or NULL: none, several,
 * or v is one of g's outputs. */
Node *pass_sole_user(const Graph *g, const Value *v);

/* An editor for passes that rewrite many nodes: it keeps how often each value is used and
 * by which nodes, so asking costs about the answer rather than the graph, and it places
 * the nodes it adds when the edit ends, so adding one shifts no nodes. From
 * pass_edit_begin to pass_edit_end every change to node inputs goes through it, and
 * g->nodes holds the nodes of the start in their order, then the added ones in the order
 * they came (no topological order: nothing may walk g->nodes for that meanwhile). Its
 * tables grow as nodes and values are added; out of memory aborts, like arena_alloc. */
typedef struct EditUse EditUse;
typedef struct Edit {
  Graph *g;
  int norig;          /* g->nnodes at the start */
  int nval, nnode;    /* the capacities of the tables below */
  int *uses, *outs;   /* by value id: graph_count_uses, and the graph outputs among it */
  int *head;          /* by value id: its readers, a list through use[] (entries go stale
                         when an input changes, and are dropped when met) */
  EditUse *use;
  int nuse, capuse;
  int *kid, *last_kid, *sibling; /* by node id: the nodes added just before it, in order */
} Edit;
void pass_edit_begin(Edit *e, Graph *g);
/* A rule-based pass's rounds: each offers rule every node of the round's start through an
 * Edit (the nodes a rewrite adds are placed when the round ends and met the next one),
 * then, when a rule rewrote a node, removes what is left dead (the rules count uses);
 * until a round rewrites nothing or max_rounds have run. rule returns 1 for a rewrite, 0,
 * or -1 with d set. The rewrites made, or -1. */
int pass_rewrite_rounds(Graph *g, PassContext *ctx, int max_rounds,
                        int (*rule)(Edit *e, Node *n, Diag *d));
/* Puts every added node just before the node it was added before (after the ones added
 * there earlier, each with the ones added before it in front), and frees e. */
void pass_edit_end(Edit *e);
int pass_edit_count(const Edit *e, const Value *v); /* graph_count_uses */
bool pass_edit_is_output(const Edit *e, const Value *v);
/* The readers of v, in no order, a node once per input that reads v: *cursor starts at
 * -1; NULL at the end. */
Node *pass_edit_next_user(Edit *e, const Value *v, int *cursor);
/* pass_sole_user: the one node reading v, or NULL (none, several, or a graph output). */
Node *pass_edit_sole_user(Edit *e, const Value *v);
void pass_edit_replace_uses(Edit *e, Value *old, Value *repl); /* graph_replace_uses */
void pass_edit_set_input(Edit *e, Node *n, int k, Value *v);
void pass_edit_rewrite(Edit *e, Node *n, Op op, Value *const *in, int nin, const Attr *attrs,
                       int nattr); /* pass_rewrite */
/* pass_insert_before, the node placed when the edit ends. */
Value *pass_edit_insert_before(Edit *e, const Node *before, Op op, Value **in, int nin,
                               const Attr *attrs, int nattr, const char *like,
                               const char *suffix, Diag *d);

/* The same for a node of nout outputs, named <like>.<suffix>0, 1, ... (a fresh name where
 * one is taken): the node, or NULL with d set (it is then placed all the same, unused). */
Node *pass_edit_insert_node_before(Edit *e, const Node *before, Op op, Value **in, int nin,
                                   const Attr *attrs, int nattr, int nout, const char *like,
                                   const char *suffix, Diag *d);

/* The constants a pass makes from others (permuted, padded), by the id of their source,
 * so that a constant several nodes read (tied weights) is made into one, not one per
 * node: each copy would cost its bytes, and a search for a free name. One table per
 * kind of copy; growing it aborts on out of memory, like arena_alloc. */
typedef struct Made {
  Value **by_source;
  int n;
} Made;
Value *pass_made_get(const Made *m, const Value *src); /* NULL: none made yet */
Value *pass_made_put(Made *m, const Value *src, Value *made); /* returns made */
void pass_made_free(Made *m);

/* Turns n into op(in[0..nin)) with these attributes (copied into g's arena), keeping its
 * output values, location and origin. */
void pass_rewrite(Graph *g, Node *n, Op op, Value *const *in, int nin, const Attr *attrs,
                  int nattr);
/* A new node op(in[0..nin)) with one output named <like>.<suffix> (a fresh number if
 * that is taken), its type inferred, at the end of g->nodes: the caller moves it where
 * it belongs. NULL with d set when inference fails (the node is then left there). */
Value *pass_add_node(Graph *g, Op op, Value **in, int nin, const Attr *attrs, int nattr,
                     const char *like, const char *suffix, Diag *d);
/* The same node placed just before node `before` (whose inputs are defined earlier).
 * It finds and shifts the nodes after it: a pass that adds many should place them
 * itself, once, at the end. */
Value *pass_insert_before(Graph *g, const Node *before, Op op, Value **in, int nin,
                          const Attr *attrs, int nattr, const char *like, const char *suffix,
                          Diag *d);
/* A new constant of data t named <like>.<suffix>, or <like>.<suffix>N with the first N
 * that is free. */
Value *pass_add_const(Graph *g, const char *like, const char *suffix, Tensor *t);
/* The shape attribute of a reshape of x to type `to` (same dtype and element count):
 * static dims as they are, a symbolic dim as 0 where x has it at the same position, else
 * -1. False when no attribute gives back exactly `to` (two symbolic dims that move). */
bool pass_reshape_attr(const Value *x, const Type *to, int64_t *shape);

#endif
