/* fuse.c: pointwise fusion. Chains of pointwise nodes (with broadcasting, casts and
 * constants) become one fuse group (IR_ATTR_FUSE), which codegen turns into one kernel:
 * the values inside a group live in registers and never reach memory. A convolution
 * followed by pointwise nodes (bias, activation, a residual add), a slice (the true width
 * of a padded GEMM's output, see pad.c), a softmax followed by
 * some (the exporters' NaN masking), a layer norm (the cast of a lowered model's output,
 * say), a transpose (attention's scaled Q and K), a concat (ViT's class token, then the
 * position embedding added) or a gather (an embedding lookup, then the other embeddings
 * added) is one group too: its kernel applies them to each output element as it stores
 * it (an epilogue).
 *
 * A matmul of a linear layer joins a group made of its bias add (and a residual add, a
 * ReLU or a tanh GELU after it): cuBLASLt applies them in the GEMM (gemm_epilogues
 * below); two such bias adds never merge (gemm_bias_add), so each GEMM keeps one. The
 * view nodes that pick its input's rows (a gather of one token) join it too: the GEMM
 * reads them in place (gemm_operands).
 *
 * A convolution's input may come through a cast from f32 and a transpose (a lowered
 * image moved to channels last): they join its group too, and its kernel reads their
 * source through strides, rounding as it loads (conv_prologues).
 *
 * The pass proposes merges; the recognizer (ir.h's group_plan) decides: a merge stands
 * only where the merged group is one kernel of a kind codegen renders (pointwise,
 * epilogue, conv, gemm, concat, attention, loop) within what a kernel takes (GroupLimits).
 * At the end it writes each group's kind on its root (IR_ATTR_KIND), from the plan of
 * the group's final nodes. A producer joins its consumer's group when
 *   - the consumer is pointwise with one output, the producer too or a convolution (an
 *     anchor: at most one per group, always its first node), and the producer's output
 *     has the shape of the consumer's (a value broadcast inside a kernel would be
 *     computed again per use), or the producer is a lone cast;
 *   - every use of the producer's output is in the consumer's group, and it is no graph
 *     output (a value needed elsewhere must be written anyway: fusing would compute it
 *     twice); the pass repeats until no group grows (at most FUSE_MAX_ROUNDS times),
 *     so a value read by several nodes joins once they have come together. Except an anchor alone: its kernel can store
 *     its output as well (a side output), when its other readers come after the merged
 *     group's last node (side_output);
 *   - the merged group's pointwise nodes read at most GroupLimits.inputs distinct values
 *     from outside, and it has at most GroupLimits.nodes nodes;
 *   - with an anchor, the recognizer finds the anchor first and the rest its epilogue.
 * A group's last node is its root: the one node whose output leaves the group. Groups of
 * one node get no attribute. The pass renumbers every group 1, 2, ... in the order of
 * their roots, so it can run again on its own output.
 *
 * Cost: each group keeps what a merge asks of it (its size, first and last node, whether
 * it has an anchor or a GEMM's bias add, the values it reads from outside, its members),
 * and each value its readers (Users), so a merge attempt costs about the readers of the
 * value it concerns rather than the graph; a round over the graph is near linear, and
 * the rounds are at most FUSE_MAX_ROUNDS. A merge of two pointwise groups asks the
 * recognizer nothing (the limits are all it could refuse); one with an anchor, or a GEMM,
 * concat, prologue or attention merge, costs the recognizer's time on the merged group,
 * which is at most GroupLimits.nodes of pointwise nodes and their views. Last, groups of
 * pointwise and index-remapping nodes merge into loop groups (loop_groups below). */
#include "passes/passes-impl.h"

#include <stdlib.h>
#include <string.h>

/* A round merges what it can; a value read by several nodes joins a round after they
 * have come together, so a few rounds settle a real model (every test model: 2 or 3, the
 * last one merging nothing). A graph built to make each round enable one more merge stops
 * after FUSE_MAX_ROUNDS, with the groups made so far. What one kernel takes (the inputs
 * its pointwise nodes read, its nodes: NVRTC's time for a function grows faster than its
 * length, so a group stops growing at the limit and the kernel after it reads its output
 * back) are the recognizer's limits (ir.h's GroupLimits), which the target may lower. */
enum { FUSE_MAX_ROUNDS = 16 };

typedef struct Fuse {
  const Graph *g;
  const GroupLimits *lim;
  Users users;
  int *group; /* per node position: the position of its group's representative */
  int *at;    /* per node id: its position in g->nodes */
  const Value **side;   /* per group representative: its anchor's output, which the
                           group's kernel stores too (see side_output), or NULL */
  /* per group representative: */
  int *size, *first, *last; /* its node count, and the positions of its first and last */
  int *head, *tail;         /* its members, a list through next_member (in no order) */
  int *next_member;         /* per position */
  bool *anchored;           /* it has an anchor */
  bool *gemm_bias;          /* it has a GEMM's bias add (gemm_bias_add) */
  /* for loop groups (loop_groups): every member is pointwise or remaps indices; every
   * member is cheap to compute again (loop_cheap); some member's elements are computed
   * more than once (read through an expand or a broadcast); some member is no alias */
  bool *loopy, *cheap, *dup, *real;
  const Value *(*ins)[GROUP_MAX_INPUTS]; /* the distinct values its pointwise nodes read */
  int *nins;                             /* from outside it (while at most the limit) */
  /* per value id: how far users_inside and read_after have seen readers join a group */
  int *inside, *after;
  /* scratch for plan_of: positions and their nodes */
  int *pos;
  const Node **members;
} Fuse;

static int find(Fuse *f, int i) {
  while (f->group[i] != i)
    i = f->group[i] = f->group[f->group[i]];
  return i;
}

static bool fusable(const Node *n) {
  return (op_info[n->op].flags & OPF_POINTWISE) && n->nout == 1;
}

/* Whether computing n again for each element that reads it costs about what loading it
 * would: the remapping nodes, and pointwise arithmetic without a transcendental. */
static bool loop_cheap(const Node *n) {
  if (group_remap_node(n))
    return true;
  if (n->nout != 1)
    return false;
  switch (n->op) {
  case OP_IDENTITY: case OP_NEG: case OP_ABS: case OP_RELU: case OP_CAST: case OP_CLIP:
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_MAX: case OP_MIN: case OP_WHERE:
  case OP_EQUAL: case OP_LESS: case OP_LESS_EQUAL: case OP_GREATER: case OP_GREATER_EQUAL:
  case OP_AND: case OP_OR: case OP_XOR: case OP_NOT:
    return true;
  default:
    return false;
  }
}

/* Whether n can start a group, as its anchor (ir.h's group_is_anchor). */
static bool anchor(const Fuse *f, const Node *n) { return group_is_anchor(n, f->lim); }

static int by_position(const void *pa, const void *pb) {
  int a = *(const int *)pa, b = *(const int *)pb;
  return (a > b) - (a < b);
}

/* The recognizer's word on the group that positions r's and p's groups (p may be -1, or
 * r) and the positions extra[0..nextra) would make together, as a kernel of kind `kind`
 * (GROUP_NONE: whatever it can be): 0 when it has a plan, else why not (GroupFail). */
static int plan_of(Fuse *f, int r, int p, const int *extra, int nextra, GroupKind kind) {
  int n = 0;
  for (int s = 0; s < 2; s++) {
    int grp = s ? p : r;
    if (grp < 0 || (s && p == r))
      continue;
    for (int j = f->head[grp]; j >= 0; j = f->next_member[j])
      f->pos[n++] = j;
  }
  for (int k = 0; k < nextra; k++)
    f->pos[n++] = extra[k];
  qsort(f->pos, (size_t)n, sizeof *f->pos, by_position);
  for (int k = 0; k < n; k++)
    f->members[k] = f->g->nodes[f->pos[k]];
  GroupPlan plan;
  int rc = group_plan(f->g, &f->users, f->members, n, kind, f->lim, &plan, NULL, 0) ? plan.fail : 0;
  group_plan_free(&plan);
  return rc;
}

/* Group `child` (a representative) joins group `parent`, which stays the representative. */
static void unite(Fuse *f, int child, int parent) {
  if (child == parent)
    return;
  f->group[child] = parent;
  f->size[parent] += f->size[child];
  f->first[parent] = f->first[child] < f->first[parent] ? f->first[child] : f->first[parent];
  f->last[parent] = f->last[child] > f->last[parent] ? f->last[child] : f->last[parent];
  f->next_member[f->tail[parent]] = f->head[child];
  f->tail[parent] = f->tail[child];
  f->anchored[parent] = f->anchored[parent] || f->anchored[child];
  f->gemm_bias[parent] = f->gemm_bias[parent] || f->gemm_bias[child];
  f->loopy[parent] = f->loopy[parent] && f->loopy[child];
  f->cheap[parent] = f->cheap[parent] && f->cheap[child];
  f->dup[parent] = f->dup[parent] || f->dup[child];
  f->real[parent] = f->real[parent] || f->real[child];
}

/* Whether v is made by a node of group r or p. */
static bool made_in(Fuse *f, const Value *v, int r, int p) {
  if (v->kind != VK_NODE)
    return false;
  int gd = find(f, f->at[v->def->id]);
  return gd == r || gd == p;
}

/* The distinct values read from outside the group of position r, were position p's group
 * merged into it, into out[] (room for 2 * GROUP_MAX_INPUTS); their count. Anchors' inputs
 * are their own kernel's parameters and count nowhere. */
static int outside_inputs(Fuse *f, int r, int p, const Value **out) {
  int n = 0;
  for (int s = 0; s < 2; s++) {
    int grp = s ? p : r;
    for (int k = 0; k < f->nins[grp]; k++) {
      const Value *v = f->ins[grp][k];
      bool dup = made_in(f, v, r, p);
      for (int j = 0; j < n && !dup; j++)
        dup = out[j] == v;
      if (!dup)
        out[n++] = v;
    }
  }
  return n;
}

/* Whether group p is one cast, whose output v broadcasts to y: computed again for every
 * element it broadcasts to, a cast costs no more than the load of its result would (an
 * attention mask's cast joins the and that widens it). */
static bool lone_cast(Fuse *f, int p, const Value *v, const Value *y) {
  return v->def->op == OP_CAST && shape_broadcasts_to(&v->type.shape, &y->type.shape) &&
         f->size[p] == 1;
}

/* Whether every use of v is by a node of group r (graph outputs are uses outside). The
 * readers before inside[v] are known to share the first reader's group, which they never
 * leave: each reader is looked at once past that, over the whole pass. */
static bool users_inside(Fuse *f, const Value *v, int r) {
  int n;
  const int *u = users_of(&f->users, v, &n);
  if (f->users.outputs[v->id])
    return false;
  if (!n)
    return true;
  int g0 = find(f, u[0]);
  if (g0 != r)
    return false;
  int *seen = &f->inside[v->id];
  while (*seen < n && find(f, u[*seen]) == g0)
    ++*seen;
  return *seen == n;
}

/* Whether position p's group is p alone. */
static bool alone(Fuse *f, int p) { return f->size[find(f, p)] == 1; }

/* Whether every reader of v outside groups r and p comes after the merged group's last
 * node, where its kernel runs. v is made in r or p (an anchor's output, see
 * side_output), so the readers in its maker's group, which they never leave, are skipped
 * for good (after[v]) as they join it. */
static bool read_after(Fuse *f, const Value *v, int r, int p) {
  int root = f->last[r] > f->last[p] ? f->last[r] : f->last[p];
  int n, home = find(f, f->at[v->def->id]);
  const int *u = users_of(&f->users, v, &n);
  int *seen = &f->after[v->id];
  while (*seen < n && find(f, u[*seen]) == home)
    ++*seen;
  for (int j = *seen; j < n && u[j] <= root; j++) {
    int gu = find(f, u[j]);
    if (gu != r && gu != p)
      return false;
  }
  return true;
}

/* A side output: consumer group r may take anchor output v although v is read outside
 * it too, when v's group p is the anchor alone and r has no anchor: the merged kernel
 * stores v besides its own output (the anchor's store, cg_store_out, writes both). v's
 * other readers must come after the merged group's last node. A lowered BERT's last
 * layer norm feeds the pooler and, through a cast to f32, the graph output: one kernel
 * writes both types. */
static bool side_output(Fuse *f, const Value *v, int p, int r) {
  if (!anchor(f, v->def) || p != f->at[v->def->id] || !alone(f, p) || f->side[p] || f->side[r])
    return false;
  return read_after(f, v, r, p);
}

static bool same_shape(const Value *a, const Value *b) {
  return pass_same_shape(&a->type.shape, &b->type.shape);
}

/* Sets (or clears, for k 0) node n's fuse attribute. */
static void set_group(Graph *g, Node *n, int64_t k) {
  if (k)
    node_set_attr(g, n, attr_make_int(IR_ATTR_FUSE, k));
  else
    node_remove_attr(n, IR_ATTR_FUSE);
}

/* The operand of add node a that is not v (NULL when a is no add of v). */
static const Value *other_addend(const Node *a, const Value *v) {
  return a && a->op == OP_ADD ? node_other_input(a, v) : NULL;
}

/* Whether v is a bias of y's last dim: [N], [1, N], ... with N y's last dim. */
static bool bias_of(const Value *v, const Value *y) {
  return v->type.dtype == y->type.dtype && pass_along_last(v, y);
}

/* Whether node a adds a bias to the output of a matmul cuBLASLt can give an epilogue
 * (group_gemm_matmul), its one use: the start of a GEMM
 * epilogue. Two of them in one group (Fuse.gemm_bias) would leave one GEMM without its
 * epilogue (a bottleneck's two 1x1 convolutions summed), so the pointwise merge keeps
 * them apart. */
static bool gemm_bias_add(const Users *u, const Node *a) {
  if (a->op != OP_ADD)
    return false;
  for (int k = 0; k < 2; k++) {
    const Value *y = a->in[k], *b = a->in[1 - k];
    if (y && b && y != b && y->kind == VK_NODE && group_gemm_matmul(y->def) && bias_of(b, y) &&
        users_count(u, y) == 1)
      return true;
  }
  return false;
}

/* GEMM epilogues: a linear layer's bias add, and a residual add, a ReLU or a tanh GELU
 * after it, run inside cuBLASLt's GEMM. A matmul whose only user is an add joins the
 * add's group, as its anchor, where the recognizer finds the two a GEMM with an epilogue
 * cuBLASLt applies. */
static void gemm_epilogues(Fuse *f, const bool *closed) {
  const Graph *g = f->g;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *m = g->nodes[i];
    if (closed[find(f, i)] || !group_gemm_matmul(m))
      continue;
    const Value *y = m->out[0];
    int users;
    const int *u = users_of(&f->users, y, &users);
    const Node *a = users ? g->nodes[u[users - 1]] : NULL;
    if (users != 1 || !other_addend(a, y) || closed[find(f, f->at[a->id])] ||
        !users_inside(f, y, find(f, f->at[a->id])))
      continue;
    int r = find(f, f->at[a->id]);
    if (!plan_of(f, r, find(f, i), NULL, 0, GROUP_GEMM))
      unite(f, find(f, i), r);
  }
}

/* Whether n renames elements without computing (ir/view.c's view_through) and is no
 * mere alias (reshape and the like cost nothing already). */
static bool view_op(const Node *n) {
  return n->op == OP_TRANSPOSE || n->op == OP_GATHER;
}

/* A GEMM's input through views: a linear layer's matmul whose activations come from a
 * gather of one constant index (BERT's pooler and ViT's head take token 0) or a
 * transpose that leaves each row contiguous reads the buffer before them with a leading
 * dim and an offset (cuBLASLt's ldb). Those nodes (and reshapes between them), each of
 * one output used only by the next, join the matmul's group: the longest such chain
 * with a node worth taking in it whose group the recognizer finds a GEMM (its composed
 * view a matrix of rows). */
static void gemm_operands(Fuse *f, const bool *closed) {
  const Graph *g = f->g;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *m = g->nodes[i];
    if (m->op != OP_MATMUL || m->nout != 1 || closed[find(f, i)])
      continue;
    const Node *chain[8];
    int n = 0;
    for (const Value *v = m->in[0]; n < 8 && v->kind == VK_NODE; v = v->def->in[0]) {
      const Node *d = v->def;
      View probe, out;
      int r = find(f, f->at[d->id]);
      if (!shape_is_static(&d->in[0]->type.shape) || closed[r] || r != f->at[d->id] ||
          d->nout != 1 || users_count(&f->users, v) != 1)
        break; /* a value needed elsewhere is written anyway */
      view_init(&probe, d->in[0]);
      if (!view_through(d, v->def_index, &probe, &out))
        break;
      chain[n++] = d;
    }
    /* the longest chain from the matmul's side with a node worth taking in it that
     * makes a GEMM */
    for (; n > 0; n--) {
      bool worth = false;
      int pos[8];
      for (int k = 0; k < n; k++) {
        worth = worth || view_op(chain[k]);
        pos[k] = f->at[chain[k]->id];
      }
      if (worth && !plan_of(f, find(f, i), -1, pos, n, GROUP_GEMM))
        break;
    }
    for (int k = 0; k < n; k++)
      unite(f, find(f, f->at[chain[k]->id]), find(f, i));
  }
}

/* A concat's inputs through transposes: ViT's patches, [B, E, H, W] from the
 * convolution seen as [B, H*W, E], go into the concat's group (with the reshapes around
 * the transpose), whose kernel reads the convolution's output through strides, so the
 * transpose is no kernel. Each node of the chain has one output used only by the next. */
static void concat_operands(Fuse *f, const bool *closed) {
  const Graph *g = f->g;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *c = g->nodes[i];
    if (c->op != OP_CONCAT || c->nin > f->lim->concat_inputs || closed[find(f, i)])
      continue;
    for (int k = 0; k < c->nin; k++) {
      const Node *chain[8];
      int n = 0;
      for (const Value *v = c->in[k]; n < 8 && v->kind == VK_NODE; v = v->def->in[0]) {
        const Node *d = v->def;
        int p = f->at[d->id];
        bool moves = d->op == OP_TRANSPOSE || (op_info[d->op].flags & OPF_ALIAS);
        if (!moves || !shape_is_static(&d->in[0]->type.shape) || closed[find(f, p)] ||
            !alone(f, p) || users_count(&f->users, v) != 1)
          break;
        chain[n++] = d;
      }
      /* the longest prefix from the concat's side with a transpose in it whose group
       * the recognizer finds a concat (the chain composes as a view) */
      for (; n > 0; n--) {
        bool has_transpose = false;
        int pos[8];
        for (int j = 0; j < n; j++) {
          has_transpose = has_transpose || chain[j]->op == OP_TRANSPOSE;
          pos[j] = f->at[chain[j]->id];
        }
        if (has_transpose && !plan_of(f, find(f, i), -1, pos, n, GROUP_CONCAT))
          break;
      }
      for (int j = 0; j < n; j++)
        unite(f, find(f, f->at[chain[j]->id]), find(f, i));
    }
  }
}

/* A convolution's input through a cast and a transpose: the image of a lowered model,
 * cast from f32 to the convolution's 16-bit type and moved to channels last, goes into
 * the convolution's group, whose kernel reads the image through the transpose's strides
 * and rounds each element as it loads it (a prologue): neither is a kernel. At most two
 * such nodes, each alone and read only by the next: the longest such chain whose group
 * the recognizer finds a convolution with a prologue. */
static void conv_prologues(Fuse *f, const bool *closed) {
  const Graph *g = f->g;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *c = g->nodes[i];
    if (c->op != OP_CONV || closed[find(f, i)])
      continue;
    int pos[2], n = 0;
    for (const Value *v = c->in[0]; n < 2 && v->kind == VK_NODE; v = v->def->in[0]) {
      const Node *d = v->def;
      int p = f->at[d->id];
      if ((d->op != OP_TRANSPOSE && d->op != OP_CAST) || closed[find(f, p)] || !alone(f, p) ||
          users_count(&f->users, v) != 1)
        break; /* users_count counts a graph output too */
      pos[n++] = p;
    }
    for (; n > 0; n--)
      if (!plan_of(f, find(f, i), -1, pos, n, GROUP_CONV))
        break;
    for (int j = 0; j < n; j++)
      unite(f, pos[j], find(f, i));
  }
}

/* ---------------------------------------------------------------- loops
 *
 * After the merges above, groups made only of pointwise nodes and nodes that only remap
 * indices (ir.h's group_remap_node: transposes, slices, splits, expands, concats, the
 * aliases, a gather of a constant index) merge further into loop groups, whose kernel
 * computes each output element from its index vector (XLA's loop fusion): RoPE's
 * x * cos + concat(-x[.., d/2:], x[.., :d/2]) * sin from the projection's output through
 * its reshape and transpose is one kernel, and GQA's expand of K or V joins the kernel
 * that makes them. The merges keep what the ones above keep: a value read outside the
 * merged group is written anyway, so every output of the producer must be read inside
 * (a split's too); a producer whose elements the consumer reads more than once (through
 * an expand, or a pointwise node's broadcast), or a group that already does so, takes
 * only producers cheap to compute again (loop_cheap). Aliases cost no kernel: they join
 * only between two members (the producer, the aliases read only by the next, the
 * consumer), never as a group's first or last node. A merge stands where the recognizer
 * finds a plan (the kinds above first, a loop otherwise), so each merge of two kernels'
 * groups makes one kernel of them. A split whose every part goes to a loop group becomes
 * one slice per part (split_slices), and the pass groups the graph again: each group
 * reads its part of the split's input in place. */

/* Whether every reader of v is in group r or p or is the node at position extra (-1:
 * none), and v is no graph output. */
static bool read_in(Fuse *f, const Value *v, int r, int p, int extra) {
  if (f->users.outputs[v->id])
    return false;
  int n;
  const int *u = users_of(&f->users, v, &n);
  for (int j = 0; j < n; j++) {
    int gu = find(f, u[j]);
    if (gu != r && gu != p && u[j] != extra)
      return false;
  }
  return true;
}

/* Whether consumer n reads some element of its input v for several of its own elements
 * (an expand, a pointwise node's broadcast), or v (the producer's output w) is read more
 * than once (a concat of x with x, x * cos beside a split of x: each read computes it at
 * its own index vector). */
static bool loop_dups(Fuse *f, const Node *n, const Value *v, const Value *w) {
  int users, reads = 0;
  const int *u = users_of(&f->users, w, &users);
  for (int j = 0; j < users; j++)
    for (int k = 0; k < f->g->nodes[u[j]]->nin; k++)
      reads += f->g->nodes[u[j]]->in[k] == w;
  return reads > 1 || ((n->op == OP_EXPAND || fusable(n)) &&
                       shape_numel(&n->out[0]->type.shape) > shape_numel(&v->type.shape));
}

static void loop_groups(Fuse *f, const bool *closed) {
  const Graph *g = f->g;
  enum { LOOP_MAX_ALIASES = 8 };
  bool merged = true;
  for (int round = 0; merged && round < FUSE_MAX_ROUNDS; round++) {
    merged = false;
    for (int i = 0; i < g->nnodes; i++) {
      const Node *n = g->nodes[i];
      if ((!fusable(n) && !group_remap_node(n)) || (op_info[n->op].flags & OPF_ALIAS))
        continue;
      for (int k = 0; k < n->nin; k++) {
        const Value *v = n->in[k];
        /* back through the aliases read only by the next */
        int alias[LOOP_MAX_ALIASES], na = 0;
        while (v && v->kind == VK_NODE && (op_info[v->def->op].flags & OPF_ALIAS) &&
               na < LOOP_MAX_ALIASES) {
          int a = f->at[v->def->id];
          if (!alone(f, a) || closed[a] || !group_remap_node(v->def) ||
              users_count(&f->users, v) != 1)
            break;
          alias[na++] = a;
          v = v->def->in[0];
        }
        if (!v || v->kind != VK_NODE || (n->op == OP_GATHER && k == 1))
          continue;
        int p = find(f, f->at[v->def->id]), r = find(f, i);
        if ((p == r && !na) || closed[p] || closed[r] || !f->loopy[p] || !f->loopy[r] ||
            !f->real[p])
          continue;
        /* every output of the producer read inside, and what either group stores besides
         * its root (side_output) */
        const Node *d = v->def;
        bool inside = true;
        for (int o = 0; o < d->nout && inside; o++)
          inside = read_in(f, d->out[o], r, p, na ? alias[na - 1] : -1);
        for (int s = 0; s < 2 && inside; s++) {
          const Value *kept = f->side[s ? p : r];
          inside = !kept || read_in(f, kept, r, p, -1);
        }
        if (!inside || f->size[p] + f->size[r] + na > f->lim->nodes)
          continue;
        bool dup = false;
        for (int o = 0; o < d->nout; o++)
          dup = dup || loop_dups(f, n, n->in[k], d->out[o]);
        if (p != r && (dup || f->dup[r]) && !f->cheap[p])
          continue;
        if (plan_of(f, r, p == r ? -1 : p, alias, na, GROUP_NONE))
          continue;
        for (int a = 0; a < na; a++)
          unite(f, alias[a], r);
        unite(f, p, r);
        f->dup[r] = f->dup[r] || dup;
        f->side[r] = NULL;
        f->nins[r] = f->lim->inputs + 1; /* no pointwise merge counts on it any more */
        merged = true;
      }
    }
  }
}

/* The group that reads v at the end of its aliases (each read once, alone), or -1: v read
 * once, by a node of a loop group of two or more (not closed). */
static int loop_reader(Fuse *f, const Value *v, const bool *closed) {
  for (int hops = 0; hops < 8; hops++) {
    int n;
    const int *u = users_of(&f->users, v, &n);
    if (f->users.outputs[v->id] || n != 1)
      return -1;
    const Node *w = f->g->nodes[u[0]];
    if ((op_info[w->op].flags & OPF_ALIAS) && group_remap_node(w) && alone(f, u[0])) {
      v = w->out[0];
      continue;
    }
    int r = find(f, u[0]);
    return f->size[r] > 1 && f->loopy[r] && !closed[r] && w->in[0] == v ? r : -1;
  }
  return -1;
}

/* Whether v is read once, by a node of an attention (a closed group), which would read
 * a slice in place as it reads the split's part (its operands are views: ir/view.c). */
static bool attention_reader(Fuse *f, const Value *v, const bool *closed) {
  int n;
  const int *u = users_of(&f->users, v, &n);
  return !f->users.outputs[v->id] && n == 1 && closed[find(f, u[0])] &&
         f->g->nodes[u[0]]->in[0] == v;
}

/* A split whose outputs go to different loop groups (a decoder's Q, K and V from one
 * projection) is one kernel that writes each part, which the groups read back: as one
 * slice per output instead, each joins its group, which reads the split's input in
 * place. The splits whose every output (through aliases read once) is read once by a
 * node of a loop group, or by an attention's operand view (grouped-query attention's V,
 * read as the projection's slice, repeated through strides), become slices of the same
 * names with .slice; their count. The caller groups the graph again. */
static int split_slices(Fuse *f, Graph *g, const bool *closed, Diag *d) {
  int found = 0;
  Node **cand = malloc(sizeof *cand * ((size_t)g->nnodes + 1));
  if (!cand)
    return diag_error(d, g->loc, "fuse: out of memory");
  for (int i = 0; i < g->nnodes; i++) {
    Node *s = g->nodes[i];
    if (s->op != OP_SPLIT || s->nout < 2 || !alone(f, i) || closed[i] || !group_remap_node(s))
      continue;
    bool ok = true;
    for (int k = 0; k < s->nout && ok; k++)
      ok = loop_reader(f, s->out[k], closed) >= 0 || attention_reader(f, s->out[k], closed);
    if (ok)
      cand[found++] = s;
  }
  for (int c = 0; c < found; c++) {
    Node *s = cand[c];
    int rank = s->in[0]->type.shape.rank;
    int64_t axis = attr_int(s, "axis"), at = 0;
    if (axis < 0)
      axis += rank;
    for (int k = 0; k < s->nout; k++) {
      int64_t len = s->out[k]->type.shape.dims[axis].n;
      int64_t start[1] = {at}, end[1] = {at + len}, ax[1] = {axis};
      Attr a[3] = {attr_make_ints("starts", start, 1), attr_make_ints("ends", end, 1),
                   attr_make_ints("axes", ax, 1)};
      Value *sl = pass_insert_before(g, s, OP_SLICE, &s->in[0], 1, a, 3, s->out[k]->name,
                                     "slice", d);
      if (!sl) {
        free(cand);
        return -1;
      }
      graph_replace_uses(g, s->out[k], sl);
      at += len;
    }
  }
  bool *keep = found ? malloc(sizeof *keep * ((size_t)g->next_node_id + 1)) : NULL;
  if (found && !keep) {
    free(cand);
    return diag_error(d, g->loc, "fuse: out of memory");
  }
  for (int j = 0; found && j <= g->next_node_id; j++)
    keep[j] = true;
  for (int c = 0; c < found; c++)
    keep[cand[c]->id] = false;
  if (found)
    graph_retain(g, keep, NULL);
  free(cand);
  free(keep);
  return found;
}

/* ---------------------------------------------------------------- attention
 *
 * Attention as the exporters write it: S = matmul(A, B) (A the queries, B the keys
 * transposed, each maybe scaled), pointwise nodes on S (a scale, a mask add), a softmax
 * along the last dim, pointwise nodes on its output (the NaN masking), O = matmul(P, V),
 * and maybe a transpose of O. All of it is one group, whose kernel (codegen/attention.c)
 * keeps a tile of score rows in shared memory: the S x S scores never reach memory.
 * The layout-only nodes (reshape, transpose, split, a constant gather, a slice, an
 * expand: GQA's repeat of K and V) and scalar multiplies between A, B or V and the
 * buffers they come from join it too: the kernel reads those buffers through strides
 * (ir/view.c) and scales as it loads. */

/* The nodes an attention would take, found by walking the graph around a softmax; the
 * recognizer then says whether they are one (its roles, its types and the sizes the
 * kernel takes: ir/group.c). */
enum { ATTN_MAX_NODES = GROUP_MAX_ATTENTION_NODES };

typedef struct AttnSet {
  const Node *node[ATTN_MAX_NODES];
  int n;
} AttnSet;

static bool attn_has(const AttnSet *a, const Node *n) {
  for (int i = 0; i < a->n; i++)
    if (a->node[i] == n)
      return true;
  return false;
}

static bool attn_add(AttnSet *a, const Node *n) {
  if (attn_has(a, n))
    return true;
  if (a->n == ATTN_MAX_NODES)
    return false;
  a->node[a->n++] = n;
  return true;
}

/* Whether every use of v is by a node of a (and v is no graph output). */
static bool attn_users_inside(const Fuse *f, const AttnSet *a, const Value *v) {
  int n;
  const int *u = users_of(&f->users, v, &n);
  if (f->users.outputs[v->id])
    return false;
  for (int j = 0; j < n; j++)
    if (!attn_has(a, f->g->nodes[u[j]]))
      return false;
  return true;
}

/* Follows operand v of an attention matmul back through view nodes (an expand and a
 * slice too: the kernel reads through them) and scalar multiplies, adding them to a, as
 * long as every user of the value is in a and the view composes from the chain's first
 * buffer, repeats (a div: ir/view.c) only whole heads. Returns false only when a is
 * full. */
static bool attn_operand(AttnSet *a, const Value *v) {
  const Node *chain[16];
  const Value *at[16];
  int n = 0;
  while (n < 16 && v->kind == VK_NODE) {
    const Node *d = v->def;
    const Value *c = view_scale_factor(d);
    if (c) {
      at[n] = v;
      chain[n++] = d;
      v = node_other_input(d, c);
      continue;
    }
    View probe, out;
    if (!shape_is_static(&d->in[0]->type.shape))
      break;
    view_init(&probe, d->in[0]);
    if (!view_through_reads(d, v->def_index, &probe, &out))
      break;
    at[n] = v;
    chain[n++] = d;
    v = d->in[0];
  }
  /* from the buffer forward: the longest prefix (from the matmul's side) whose views
   * compose; then cut where a value is used outside */
  View view;
  view_init(&view, v);
  int ok = n;
  for (int i = n - 1; i >= 0; i--) {
    if (view_scale_factor(chain[i]))
      continue;
    View next;
    if (!view_through_reads(chain[i], at[i]->def_index, &view, &next) ||
        (next.rank >= 2 && (next.div[next.rank - 1] > 1 || next.div[next.rank - 2] > 1))) {
      ok = i; /* chain[i] and what lies before it stay kernels of their own */
      view_init(&view, at[i]);
      continue;
    }
    view = next;
  }
  for (int i = 0; i < ok; i++)
    if (!attn_add(a, chain[i]))
      return false;
  return true;
}

/* Drops the operand chain nodes whose outputs are used outside a (a value needed
 * elsewhere is written anyway), with everything behind them on their chain. */
static bool attn_prune(const Fuse *f, AttnSet *a, const Node *keep_from) {
  bool changed = false;
  for (int i = 0; i < a->n; i++) {
    const Node *d = a->node[i];
    if (d == keep_from)
      continue;
    for (int k = 0; k < d->nout; k++)
      if (!attn_users_inside(f, a, d->out[k])) {
        a->node[i--] = a->node[--a->n];
        changed = true;
        break;
      }
  }
  return changed;
}

/* The nodes of the attention around softmax sm, or false: a walk from it to the matmuls
 * on either side, and what leads to them computed for it alone; the recognizer checks the
 * rest. */
static bool attention_at(const Fuse *f, const Node *sm, AttnSet *a) {
  const Graph *g = f->g;
  const Value *p = sm->out[0];
  a->n = 0;
  if (p->type.shape.rank < 2)
    return false;
  attn_add(a, sm);
  /* before the softmax: a path of pointwise nodes of the score's shape to the matmul */
  const Value *v = sm->in[0];
  const Node *m1 = NULL;
  for (int depth = 0; depth < 8 && !m1; depth++) {
    if (v->kind != VK_NODE)
      return false;
    const Node *d = v->def;
    if (d->op == OP_MATMUL) {
      m1 = d;
      break;
    }
    if (!fusable(d) || !same_shape(d->out[0], p) || !attn_add(a, d))
      return false;
    const Value *next = NULL;
    for (int k = 0; k < d->nin && !next; k++) {
      const Value *u = d->in[k];
      if (u->kind == VK_NODE && same_shape(u, p) &&
          (u->def->op == OP_MATMUL || fusable(u->def)))
        next = u;
    }
    if (!next)
      return false;
    v = next;
  }
  if (!m1 || !attn_add(a, m1))
    return false;
  /* after it: pointwise nodes of the same shape reading the softmax or each other, up
   * to the matmul with V. The readers of the nodes taken so far, in node order: a
   * cursor into each one's readers, the least position next. */
  const Node *m2 = NULL;
  const Node *from[ATTN_MAX_NODES];
  int next[ATTN_MAX_NODES], nfrom = 0, last = -1;
  from[nfrom] = sm;
  next[nfrom++] = 0;
  while (!m2) {
    int best = -1, pos = 0;
    for (int c = 0; c < nfrom; c++) {
      int n;
      const int *u = users_of(&f->users, from[c]->out[0], &n);
      if (next[c] < n && (best < 0 || u[next[c]] < pos)) {
        best = c;
        pos = u[next[c]];
      }
    }
    if (best < 0)
      break;
    next[best]++;
    if (pos == last)
      continue; /* read through another input or from another node taken */
    last = pos;
    const Node *m = g->nodes[pos];
    if (m->op == OP_MATMUL)
      m2 = m;
    else if (!fusable(m) || !same_shape(m->out[0], p) || !attn_add(a, m))
      return false;
    else if (nfrom < ATTN_MAX_NODES) {
      from[nfrom] = m;
      next[nfrom++] = 0;
    }
  }
  if (!m2 || m2->in[0]->kind != VK_NODE || !attn_has(a, m2->in[0]->def) || !attn_add(a, m2))
    return false;
  const Value *o = m2->out[0], *vv = m2->in[1];
  /* masks and such computed for this attention alone join too */
  for (bool grew = true; grew;) {
    grew = false;
    for (int i = 0; i < a->n; i++) {
      const Node *m = a->node[i];
      if (m == m1 || m == m2 || !(op_info[m->op].flags & OPF_POINTWISE))
        continue;
      for (int k = 0; k < m->nin; k++) {
        const Value *u = m->in[k];
        if (u->kind != VK_NODE || attn_has(a, u->def) || !fusable(u->def) ||
            !shape_broadcasts_to(&u->type.shape, &p->type.shape) ||
            !attn_users_inside(f, a, u))
          continue;
        if (!attn_add(a, u->def))
          return false;
        grew = true;
      }
    }
  }
  /* the transpose of O that the exporters put before the output projection */
  const Node *root = m2;
  int users;
  const int *ou = users_of(&f->users, o, &users);
  const Node *user = users ? g->nodes[ou[users - 1]] : NULL;
  bool out = f->users.outputs[o->id] > 0;
  if (users == 1 && !out && user->op == OP_TRANSPOSE && attn_add(a, user))
    root = user;
  if (!attn_operand(a, m1->in[0]) || !attn_operand(a, m1->in[1]) ||
      !attn_operand(a, vv))
    return false;
  while (attn_prune(f, a, root))
    ;
  return true;
}

/* Every attention of g becomes one group, marked closed: pointwise fusion leaves it. */
static int attention_groups(Fuse *f, bool *closed) {
  int found = 0;
  for (int i = 0; i < f->g->nnodes; i++) {
    const Node *sm = f->g->nodes[i];
    AttnSet a;
    if (sm->op != OP_SOFTMAX || closed[find(f, i)] || !attention_at(f, sm, &a))
      continue;
    int root = -1, pos[ATTN_MAX_NODES];
    bool taken = false;
    for (int k = 0; k < a.n; k++) {
      pos[k] = f->at[a.node[k]->id];
      root = pos[k] > root ? pos[k] : root;
      taken = taken || closed[find(f, pos[k])];
    }
    if (taken || plan_of(f, -1, -1, pos, a.n, GROUP_ATTENTION))
      continue;
    for (int k = 0; k < a.n; k++)
      unite(f, f->at[a.node[k]->id], root);
    closed[root] = true;
    found++;
  }
  return found;
}

/* Why a pointwise node's producer stayed out of its group, counted over the last round
 * of merges (the refusals that stand) for the report. */
enum { MISSED_BROADCAST, MISSED_ANCHOR, MISSED_SHARED, MISSED_INPUTS, MISSED_SIZE, NMISSED };

/* The report's remark: "9 fuse groups of 31 nodes (4 pointwise, 2 conv, 1 epilogue, 1
 * gemm, 1 attention); not merged: 2 read outside the group (...)", the groups by kind,
 * then the producers a pointwise node could not take, by reason. */
static void describe(const Fuse *f, const int *kinds, int nodes, int64_t ngroups,
                     const int *missed, char *buf, size_t cap) {
  size_t at = (size_t)snprintf(buf, cap, "%lld fuse group%s of %d nodes", (long long)ngroups,
                               ngroups == 1 ? "" : "s", nodes);
  const char *sep = " (";
  for (int k = GROUP_NONE + 1; k < GROUP_KIND_COUNT && at < cap; k++)
    if (kinds[k]) {
      at += (size_t)snprintf(buf + at, cap - at, "%s%d %s", sep, kinds[k],
                             group_kind_name((GroupKind)k));
      sep = ", ";
    }
  if (ngroups && at < cap)
    at += (size_t)snprintf(buf + at, cap - at, ")");
  char inputs[96], size[96];
  snprintf(inputs, sizeof inputs, "over the input limit (a kernel reads at most %d values)",
           f->lim->inputs);
  snprintf(size, sizeof size, "over the size limit (a kernel computes at most %d nodes)",
           f->lim->nodes);
  const char *why[NMISSED] = {
      [MISSED_BROADCAST] = "broadcast (it would be computed again per element)",
      [MISSED_ANCHOR] = "a second anchor (a kernel computes one, first)",
      [MISSED_SHARED] = "read outside the group (fusing would compute it twice)",
      [MISSED_INPUTS] = inputs,
      [MISSED_SIZE] = size};
  sep = "; not merged: ";
  for (int k = 0; k < NMISSED && at < cap; k++)
    if (missed[k]) {
      at += (size_t)snprintf(buf + at, cap - at, "%s%d %s", sep, missed[k], why[k]);
      sep = ", ";
    }
}

/* Writes each group's kind on its root (IR_ATTR_KIND), from the recognizer's plan of
 * its final nodes, and counts the groups by kind and their nodes. */
static int name_kinds(Fuse *f, Graph *g, int *kinds, int *nodes, Diag *d) {
  int *first = malloc(sizeof *first * (size_t)(g->nnodes + 1));
  int *next = malloc(sizeof *next * (size_t)(g->nnodes + 1));
  if (!first || !next || ir_fuse_groups(g, first, next)) {
    free(first);
    free(next);
    return diag_error(d, g->loc, "fuse: out of memory");
  }
  int rc = 0;
  for (int i = 0; i < g->nnodes && !rc; i++) {
    Node *n = g->nodes[i];
    node_remove_attr(n, IR_ATTR_KIND);
    if (first[i] < 0)
      continue;
    ++*nodes;
    if (next[i] >= 0)
      continue;
    int m = 0;
    for (int j = first[i]; j >= 0; j = next[j])
      f->members[m++] = g->nodes[j];
    GroupPlan plan;
    char why[512];
    if (group_plan(g, &f->users, f->members, m, GROUP_NONE, f->lim, &plan, why, sizeof why)) {
      rc = diag_error(d, n->loc, "fuse: internal error: fuse group %lld (root node %d) is no "
                      "kernel: %s", (long long)node_fuse_group(n), n->id, why);
    } else {
      node_set_attr(g, n, attr_make_string(IR_ATTR_KIND, group_kind_name(plan.kind)));
      kinds[plan.kind]++;
    }
    group_plan_free(&plan);
  }
  free(first);
  free(next);
  return rc;
}

static void fuse_free(Fuse *f) {
  users_free(&f->users);
  free(f->group), free(f->at), free(f->side), free(f->size), free(f->first), free(f->last);
  free(f->head), free(f->tail), free(f->next_member), free(f->anchored), free(f->gemm_bias);
  free(f->loopy), free(f->cheap), free(f->dup), free(f->real);
  free(f->ins), free(f->nins), free(f->inside), free(f->after), free(f->pos), free(f->members);
}

/* Every node a group of its own. */
static int fuse_init(Fuse *f, const Graph *g, const GroupLimits *lim) {
  size_t n = (size_t)g->nnodes + 1, nid = (size_t)g->next_value_id + 1;
  *f = (Fuse){.g = g, .lim = lim};
  f->group = malloc(sizeof *f->group * n);
  f->at = malloc(sizeof *f->at * ((size_t)g->next_node_id + 1));
  f->side = calloc(n, sizeof *f->side);
  f->size = malloc(sizeof *f->size * n);
  f->first = malloc(sizeof *f->first * n);
  f->last = malloc(sizeof *f->last * n);
  f->head = malloc(sizeof *f->head * n);
  f->tail = malloc(sizeof *f->tail * n);
  f->next_member = malloc(sizeof *f->next_member * n);
  f->anchored = malloc(sizeof *f->anchored * n);
  f->gemm_bias = malloc(sizeof *f->gemm_bias * n);
  f->loopy = malloc(sizeof *f->loopy * n);
  f->cheap = malloc(sizeof *f->cheap * n);
  f->dup = calloc(n, sizeof *f->dup);
  f->real = malloc(sizeof *f->real * n);
  f->ins = malloc(sizeof *f->ins * n);
  f->nins = malloc(sizeof *f->nins * n);
  f->inside = calloc(nid, sizeof *f->inside);
  f->after = calloc(nid, sizeof *f->after);
  f->pos = malloc(sizeof *f->pos * n);
  f->members = malloc(sizeof *f->members * n);
  if (users_build(g, &f->users) || !f->group || !f->at || !f->side || !f->size || !f->first ||
      !f->last || !f->head || !f->tail || !f->next_member || !f->anchored || !f->gemm_bias ||
      !f->loopy || !f->cheap || !f->dup || !f->real ||
      !f->ins || !f->nins || !f->inside || !f->after || !f->pos || !f->members)
    return -1;
  for (int i = 0; i < g->nnodes; i++) {
    const Node *m = g->nodes[i];
    f->group[i] = f->first[i] = f->last[i] = f->head[i] = f->tail[i] = i;
    f->at[m->id] = i;
    f->size[i] = 1;
    f->next_member[i] = -1;
    f->anchored[i] = anchor(f, m);
    f->gemm_bias[i] = gemm_bias_add(&f->users, m);
    f->loopy[i] = fusable(m) || group_remap_node(m);
    f->cheap[i] = loop_cheap(m);
    f->real[i] = !(op_info[m->op].flags & OPF_ALIAS);
    /* what a pointwise node reads (an anchor's inputs are its kernel's own), as far as a
     * merge can use: a group of more stays out of every merge anyway */
    f->nins[i] = 0;
    for (int k = 0; k < m->nin && !f->anchored[i]; k++) {
      const Value *v = m->in[k];
      bool dup = !v;
      for (int j = 0; j < f->nins[i] && !dup; j++)
        dup = f->ins[i][j] == v;
      if (dup)
        continue;
      if (f->nins[i] == lim->inputs) {
        f->nins[i] = lim->inputs + 1;
        break;
      }
      f->ins[i][f->nins[i]++] = v;
    }
  }
  return 0;
}

/* Groups g's nodes and writes the groups; or, where slices lets it and splits become
 * slices (split_slices), writes nothing and returns 1: the caller groups again. */
static int fuse_once(Graph *g, PassContext *ctx, bool slices) {
  Fuse f;
  int *size = calloc((size_t)g->nnodes + 1, sizeof *size);
  int64_t *id = calloc((size_t)g->nnodes + 1, sizeof *id);
  bool *closed = calloc((size_t)g->nnodes + 1, sizeof *closed);
  /* What one kernel of the target takes. */
  const GroupLimits limits = group_limits_for(pass_target(ctx)), *lim = &limits;
  if (fuse_init(&f, g, lim) || !size || !id || !closed) {
    fuse_free(&f);
    free(size);
    free(id);
    free(closed);
    return diag_error(ctx->diag, g->loc, "fuse: out of memory");
  }
  /* Until nothing changes (or FUSE_MAX_ROUNDS): a value with several users joins once
   * they are all in one group (GELU's x * (1 + erf(x / sqrt 2)) reads x twice). */
  attention_groups(&f, closed);
  int missed[NMISSED] = {0}; /* the last round's refusals: final */
  bool merged = true;
  for (int round = 0; merged && round < FUSE_MAX_ROUNDS; round++) {
    merged = false;
    memset(missed, 0, sizeof missed);
    for (int i = 0; i < g->nnodes; i++) {
      Node *n = g->nodes[i];
      if (!fusable(n))
        continue;
      for (int k = 0; k < n->nin; k++) {
        Value *v = n->in[k];
        if (!v || v->kind != VK_NODE || !(fusable(v->def) || anchor(&f, v->def)))
          continue;
        int p = find(&f, f.at[v->def->id]), r = find(&f, i);
        if (p == r || closed[p] || closed[r])
          continue;
        if (!(same_shape(v, n->out[0]) || lone_cast(&f, p, v, n->out[0]))) {
          missed[MISSED_BROADCAST]++;
          continue;
        }
        bool ap = f.anchored[p], ar = f.anchored[r];
        if ((ap && ar) || (f.gemm_bias[p] && f.gemm_bias[r])) {
          missed[MISSED_ANCHOR]++;
          continue; /* one kernel computes one anchor; a GEMM is one too */
        }
        const Value *side = users_inside(&f, v, r) ? NULL : v;
        /* a group that stores its anchor's output still runs before that output's
         * other readers */
        const Value *kept = f.side[p] ? f.side[p] : f.side[r];
        if ((side && !side_output(&f, v, p, r)) || (kept && !read_after(&f, kept, r, p))) {
          missed[MISSED_SHARED]++;
          continue;
        }
        if (f.size[p] + f.size[r] > lim->nodes) {
          missed[MISSED_SIZE]++;
          continue;
        }
        const Value *ins[2 * (GROUP_MAX_INPUTS + 1)];
        int nins = f.nins[r] > lim->inputs || f.nins[p] > lim->inputs
                       ? lim->inputs + 1
                       : outside_inputs(&f, r, p, ins);
        if (nins > lim->inputs) {
          missed[MISSED_INPUTS]++;
          continue;
        }
        /* Two pointwise groups make one whenever the limits above hold (their nodes are
         * pointwise, of the output's shape or a lone cast, read inside): an anchor's
         * group is one only where the recognizer finds the anchor first and the rest its
         * epilogue. name_kinds has the recognizer check every group at the end. */
        int why = ap || ar ? plan_of(&f, r, p, NULL, 0, GROUP_NONE) : 0;
        if (why) {
          missed[why == GROUP_FAIL_INPUTS  ? MISSED_INPUTS
                 : why == GROUP_FAIL_NODES ? MISSED_SIZE
                                           : MISSED_ANCHOR]++;
          continue;
        }
        unite(&f, p, r);
        memcpy(f.ins[r], ins, sizeof *ins * (size_t)nins);
        f.nins[r] = nins;
        f.side[r] = side ? side : kept;
        merged = true;
      }
    }
  }
  gemm_epilogues(&f, closed);
  gemm_operands(&f, closed);
  concat_operands(&f, closed);
  conv_prologues(&f, closed);
  loop_groups(&f, closed);
  int split = slices ? split_slices(&f, g, closed, ctx->diag) : 0;
  if (split) {
    fuse_free(&f);
    free(closed);
    free(size);
    free(id);
    ctx->changes += split > 0 ? split : 0;
    return split > 0 ? 1 : -1;
  }
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
  int kinds[GROUP_KIND_COUNT] = {0}, nodes = 0, nmissed = 0;
  int rc = name_kinds(&f, g, kinds, &nodes, ctx->diag);
  for (int k = 0; k < NMISSED; k++)
    nmissed += missed[k];
  if (!rc && (next || nmissed))
    describe(&f, kinds, nodes, next, missed, ctx->note, sizeof ctx->note);
  fuse_free(&f);
  free(closed);
  free(size);
  free(id);
  return rc;
}

static int run_fuse(Graph *g, PassContext *ctx) {
  int rc = fuse_once(g, ctx, true);
  return rc == 1 ? fuse_once(g, ctx, false) : rc;
}

const Pass pass_fuse = {
    .name = "fuse",
    .summary = "group chains of pointwise nodes, and convolutions, softmaxes, transposes "
               "and GEMMs with the pointwise nodes after them, into one GPU kernel each "
               "(fuse = K, the root's kind = \"...\")",
    .run = run_fuse,
    .fusion = true,
};
