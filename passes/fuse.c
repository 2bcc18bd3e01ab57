/* fuse.c: pointwise fusion. Chains of pointwise nodes (with broadcasting, casts and
 * constants) become one fuse group (IR_ATTR_FUSE), which codegen turns into one kernel:
 * the values inside a group live in registers and never reach memory. A convolution
 * followed by pointwise nodes (bias, activation, a residual add), a softmax followed by
 * some (the exporters' NaN masking), or a transpose (attention's scaled Q and K) is one
 * group too: its kernel applies them to each output element as it stores it (an
 * epilogue).
 *
 * A matmul of a linear layer joins a group made of its bias add (and a residual add
 * after it): cuBLASLt adds both in the GEMM (gemm_epilogues below).
 *
 * A producer joins its consumer's group when
 *   - the consumer is pointwise with one output, the producer too or a convolution (an
 *     anchor: at most one per group, always its first node), and the producer's output
 *     has the shape of the consumer's (a value broadcast inside a kernel would be
 *     computed again per use);
 *   - every use of the producer's output is in the consumer's group, and it is no graph
 *     output (a value needed elsewhere must be written anyway: fusing would compute it
 *     twice); the pass repeats until no group grows, so a value read by several nodes
 *     joins once they have come together;
 *   - the merged group reads at most FUSE_MAX_INPUTS distinct values from outside.
 * A group's last node is its root: the one node whose output leaves the group. Groups of
 * one node get no attribute. The pass renumbers every group 1, 2, ... in the order of
 * their roots, so it can run again on its own output. Each merge looks over the whole
 * graph (quadratic in the nodes: fine for the few thousand of a transformer). */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

/* codegen's kernels take at most 8 operands: the inputs and the one output. */
enum { FUSE_MAX_INPUTS = 7 };

typedef struct Fuse {
  const Graph *g;
  int *group; /* per node position: the position of its group's representative */
  int *at;    /* per node id: its position in g->nodes */
} Fuse;

static int find(Fuse *f, int i) {
  while (f->group[i] != i)
    i = f->group[i] = f->group[f->group[i]];
  return i;
}

static bool fusable(const Node *n) {
  return (op_info[n->op].flags & OPF_POINTWISE) && n->nout == 1;
}

/* Ops whose GPU kernel computes one output element per thread and can apply the
 * pointwise nodes after it before storing it (codegen's cg_store_out): such a node can
 * start a group, as its anchor. */
static bool anchor(const Node *n) {
  if (n->nout != 1)
    return false;
  if (n->op == OP_SOFTMAX || n->op == OP_LOG_SOFTMAX) {
    /* a row per block or warp: only along the last dim */
    int64_t axis = attr_int(n, "axis"), rank = n->in[0]->type.shape.rank;
    return axis == -1 || axis == rank - 1;
  }
  return n->op == OP_CONV || n->op == OP_TRANSPOSE;
}

/* Distinct values read from outside the group of position r, were position p's group
 * merged into it. */
static int outside_inputs(Fuse *f, int r, int p) {
  const Value *seen[FUSE_MAX_INPUTS + 2];
  int n = 0;
  for (int i = 0; i < f->g->nnodes && n <= FUSE_MAX_INPUTS; i++) {
    int gi = find(f, i);
    if (gi != r && gi != p)
      continue;
    const Node *m = f->g->nodes[i];
    if (anchor(m))
      continue; /* its inputs are its own kernel's parameters */
    for (int k = 0; k < m->nin && n <= FUSE_MAX_INPUTS; k++) {
      const Value *v = m->in[k];
      if (!v)
        continue;
      if (v->kind == VK_NODE) {
        int gd = find(f, f->at[v->def->id]);
        if (gd == r || gd == p)
          continue;
      }
      bool dup = false;
      for (int j = 0; j < n && !dup; j++)
        dup = seen[j] == v;
      if (!dup)
        seen[n++] = v;
    }
  }
  return n;
}

static bool has_anchor(Fuse *f, int r) {
  for (int i = 0; i < f->g->nnodes; i++)
    if (find(f, i) == r && anchor(f->g->nodes[i]))
      return true;
  return false;
}

/* Whether every use of v is by a node of group r (graph outputs are uses outside). */
static bool users_inside(Fuse *f, const Value *v, int r) {
  const Graph *g = f->g;
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i] == v)
      return false;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *m = g->nodes[i];
    for (int k = 0; k < m->nin; k++)
      if (m->in[k] == v && find(f, i) != r)
        return false;
  }
  return true;
}

static bool same_shape(const Value *a, const Value *b) {
  if (a->type.shape.rank != b->type.shape.rank)
    return false;
  for (int i = 0; i < a->type.shape.rank; i++)
    if (!dim_eq(a->type.shape.dims[i], b->type.shape.dims[i]))
      return false;
  return true;
}

/* Sets (or clears, for k 0) node n's fuse attribute. */
static void set_group(Graph *g, Node *n, int64_t k) {
  int at = -1;
  for (int i = 0; i < n->nattr; i++)
    if (!strcmp(n->attrs[i].name, IR_ATTR_FUSE))
      at = i;
  if (at >= 0 && k) {
    n->attrs[at].i = k;
  } else if (at >= 0) {
    n->attrs[at] = n->attrs[--n->nattr];
  } else if (k) {
    Attr *a = arena_alloc(g->arena, sizeof *a * (size_t)(n->nattr + 1));
    memcpy(a, n->attrs, sizeof *a * (size_t)n->nattr);
    a[n->nattr++] = attr_make_int(IR_ATTR_FUSE, k);
    n->attrs = a;
  }
}

/* The operand of add node a that is not v (NULL when a is no add of v). */
static const Value *other_addend(const Node *a, const Value *v) {
  if (a->op != OP_ADD || a->nin != 2)
    return NULL;
  return a->in[0] == v ? a->in[1] : a->in[1] == v ? a->in[0] : NULL;
}

/* Whether v is a bias of y's last dim: [N], [1, N], ... with N y's last dim. */
static bool bias_of(const Value *v, const Value *y) {
  const Shape *b = &v->type.shape, *s = &y->type.shape;
  if (v->type.dtype != y->type.dtype || b->rank < 1 || b->rank > s->rank ||
      !dim_eq(b->dims[b->rank - 1], s->dims[s->rank - 1]))
    return false;
  for (int i = 0; i < b->rank - 1; i++)
    if (b->dims[i].sym || b->dims[i].n != 1)
      return false;
  return true;
}

/* GEMM epilogues: a linear layer's bias add, and a residual add after it, run inside
 * cuBLASLt's GEMM (a bias epilogue, and the residual as C with beta 1). A matmul of f32
 * with 2-D weights whose only user is such an add, alone or in a group of exactly that
 * add and the residual add, joins the group as its anchor. */
static void gemm_epilogues(Fuse *f) {
  const Graph *g = f->g;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *m = g->nodes[i];
    if (m->op != OP_MATMUL || m->nout != 1 || m->in[0]->type.dtype != DT_F32 ||
        m->in[1]->type.shape.rank != 2 || m->in[0]->type.shape.rank < 2)
      continue;
    const Value *y = m->out[0];
    const Node *a = NULL;
    int users = 0;
    for (int j = i + 1; j < g->nnodes; j++)
      for (int k = 0; k < g->nodes[j]->nin; k++)
        if (g->nodes[j]->in[k] == y) {
          users++;
          a = g->nodes[j];
        }
    const Value *b = users == 1 ? other_addend(a, y) : NULL;
    if (!b || b == y || !bias_of(b, y) || !users_inside(f, y, find(f, f->at[a->id])))
      continue;
    int r = find(f, f->at[a->id]), size = 0;
    const Node *last = NULL;
    for (int j = 0; j < g->nnodes; j++)
      if (find(f, j) == r) {
        size++;
        last = g->nodes[j];
      }
    const Value *res = size == 2 ? other_addend(last, a->out[0]) : NULL;
    if (size == 1 || (res && res != a->out[0] && same_shape(res, a->out[0]) &&
                      res->type.dtype == y->type.dtype))
      f->group[find(f, i)] = r;
  }
}

/* The report's remark: "9 fuse groups of 31 nodes (4 pointwise, 2 conv, 1 softmax, 1
 * transpose, 1 matmul)", by each group's first node. */
static void describe(Fuse *f, const int *size, int64_t ngroups, bool limited, char *buf,
                     size_t cap) {
  static const Op kinds[] = {OP_CONV, OP_SOFTMAX, OP_TRANSPOSE, OP_MATMUL};
  int count[5] = {0}, nodes = 0;
  for (int i = 0; i < f->g->nnodes; i++) {
    int r = find(f, i);
    if (size[r] < 2)
      continue;
    nodes++;
    bool first = true;
    for (int j = 0; j < i && first; j++)
      first = find(f, j) != r;
    if (!first)
      continue;
    Op op = f->g->nodes[i]->op == OP_LOG_SOFTMAX ? OP_SOFTMAX : f->g->nodes[i]->op;
    int k = 0;
    while (k < 4 && kinds[k] != op)
      k++;
    count[k == 4 ? 4 : k]++; /* 4: pointwise */
  }
  size_t at = (size_t)snprintf(buf, cap, "%lld fuse groups of %d nodes (%d pointwise",
                               (long long)ngroups, nodes, count[4]);
  for (int k = 0; k < 4 && at < cap; k++)
    if (count[k])
      at += (size_t)snprintf(buf + at, cap - at, ", %d %s", count[k], op_info[kinds[k]].name);
  if (at < cap)
    snprintf(buf + at, cap - at, ")%s",
             limited ? "; some merges left out: a kernel reads at most 7 inputs" : "");
}

static int run_fuse(Graph *g, PassContext *ctx) {
  Fuse f = {g, malloc(sizeof(int) * (size_t)(g->nnodes + 1)),
            malloc(sizeof(int) * (size_t)(g->next_node_id + 1))};
  int *size = calloc((size_t)g->nnodes + 1, sizeof *size);
  int64_t *id = calloc((size_t)g->nnodes + 1, sizeof *id);
  if (!f.group || !f.at || !size || !id) {
    free(f.group);
    free(f.at);
    free(size);
    free(id);
    return diag_error(ctx->diag, g->loc, "fuse: out of memory");
  }
  for (int i = 0; i < g->nnodes; i++) {
    f.group[i] = i;
    f.at[g->nodes[i]->id] = i;
  }
  /* Until nothing changes: a value with several users joins once they are all in one
   * group (GELU's x * (1 + erf(x / sqrt 2)) reads x twice). */
  bool limited = false, merged = true;
  while (merged) {
    merged = false;
    for (int i = 0; i < g->nnodes; i++) {
      Node *n = g->nodes[i];
      if (!fusable(n))
        continue;
      for (int k = 0; k < n->nin; k++) {
        Value *v = n->in[k];
        if (!v || v->kind != VK_NODE || !(fusable(v->def) || anchor(v->def)))
          continue;
        int p = find(&f, f.at[v->def->id]), r = find(&f, i);
        if (p == r || !same_shape(v, n->out[0]) || !users_inside(&f, v, r))
          continue;
        if (has_anchor(&f, p) && has_anchor(&f, r))
          continue; /* one kernel computes one anchor */
        if (outside_inputs(&f, r, p) > FUSE_MAX_INPUTS) {
          limited = true;
          continue;
        }
        f.group[p] = r;
        merged = true;
      }
    }
  }
  gemm_epilogues(&f);
  /* Groups of two or more, numbered in the order of their last node (root). */
  for (int i = 0; i < g->nnodes; i++)
    size[find(&f, i)]++;
  for (int i = g->nnodes - 1; i >= 0; i--) {
    int r = find(&f, i);
    if (size[r] > 1 && !id[r])
      id[r] = -(int64_t)i - 1; /* the root's position, numbered below */
  }
  int64_t next = 0;
  int fused = 0;
  for (int i = 0; i < g->nnodes; i++) {
    int r = find(&f, i);
    if (id[r] == -(int64_t)i - 1)
      id[r] = ++next;
  }
  for (int i = 0; i < g->nnodes; i++) {
    int r = find(&f, i);
    int64_t k = size[r] > 1 ? id[r] : 0;
    if (node_fuse_group(g->nodes[i]) != k)
      fused++;
    set_group(g, g->nodes[i], k);
  }
  ctx->changes += fused;
  if (next || limited)
    describe(&f, size, next, limited, ctx->note, sizeof ctx->note);
  free(f.group);
  free(f.at);
  free(size);
  free(id);
  return 0;
}

const Pass pass_fuse = {
    .name = "fuse",
    .summary = "group chains of pointwise nodes, and convolutions, softmaxes, transposes "
               "and GEMMs with the pointwise nodes after them, into one GPU kernel each "
               "(fuse = K)",
    .run = run_fuse,
};
