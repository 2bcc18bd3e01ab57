/* verify.c: the verifier, the attribute checker and the topological sort. The verifier
 * is the contract between passes: it runs after every pass and checks each invariant the
 * rest of the compiler takes for granted, naming the value or node that breaks it, so a
 * buggy pass is caught where it ran rather than three passes later. */
#include "ir/ir.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum { TSTR = 256 };

/* ---------------------------------------------------------------- attributes */

int ir_check_attrs(const Node *n, Diag *d) {
  if ((unsigned)n->op >= OP_COUNT)
    return diag_error(d, n->loc, "unknown op %d", (int)n->op);
  const char *op = op_info[n->op].name;
  int ns;
  const AttrSpec *sp = op_attr_specs(n->op, &ns);
  for (int i = 0; i < n->nattr; i++) {
    const Attr *a = &n->attrs[i];
    if (!a->name)
      return diag_error(d, n->loc, "attribute %d of %s has no name", i, op);
    if (!strcmp(a->name, IR_ATTR_FUSE)) {
      if (a->kind != AK_INT || a->i < 1)
        return diag_error(d, n->loc, "attribute '" IR_ATTR_FUSE "' of %s must be an int of 1 "
                          "or more (a fuse group)", op);
      for (int j = 0; j < i; j++)
        if (!strcmp(n->attrs[j].name, a->name))
          return diag_error(d, n->loc, "attribute '%s' of %s is given twice", a->name, op);
      continue;
    }
    if (!strcmp(a->name, IR_ATTR_KIND)) {
      if (a->kind != AK_STRING || !a->s || group_kind_from_name(a->s) == GROUP_NONE)
        return diag_error(d, n->loc, "attribute '" IR_ATTR_KIND "' of %s must name a kind of "
                          "fuse group: \"pointwise\", \"epilogue\", \"conv\", \"gemm\", "
                          "\"concat\" or \"attention\"", op);
      for (int j = 0; j < i; j++)
        if (!strcmp(n->attrs[j].name, a->name))
          return diag_error(d, n->loc, "attribute '%s' of %s is given twice", a->name, op);
      continue;
    }
    int k = 0;
    while (k < ns && strcmp(sp[k].name, a->name))
      k++;
    if (k == ns) {
      char have[256] = "none";
      size_t at = 0;
      for (int j = 0; j < ns && at < sizeof have; j++)
        at += (size_t)snprintf(have + at, sizeof have - at, "%s%s", j ? ", " : "", sp[j].name);
      return diag_error(d, n->loc, "%s has no attribute '%s' (it has: %s)", op, a->name, have);
    }
    for (int j = 0; j < i; j++)
      if (!strcmp(n->attrs[j].name, a->name))
        return diag_error(d, n->loc, "attribute '%s' of %s is given twice", a->name, op);
    if (a->kind != sp[k].kind)
      return diag_error(d, n->loc, "attribute '%s' of %s must be %s, got %s", a->name, op,
                        attr_kind_name(sp[k].kind), attr_kind_name(a->kind));
    bool bad = false;
    switch (a->kind) {
    case AK_STRING: bad = !a->s; break;
    case AK_INTS: bad = a->n < 0 || (a->n > 0 && !a->ints); break;
    case AK_FLOATS: bad = a->n < 0 || (a->n > 0 && !a->floats); break;
    case AK_TENSOR: bad = !a->t; break;
    default: break;
    }
    if (bad)
      return diag_error(d, n->loc, "attribute '%s' of %s has no value", a->name, op);
  }
  for (int k = 0; k < ns; k++)
    if (sp[k].required && !attr_find(n, sp[k].name))
      return diag_error(d, n->loc, "%s needs attribute '%s'", op, sp[k].name);
  return 0;
}

/* ---------------------------------------------------------------- topological sort */

/* A min-heap of node positions: Kahn's algorithm always takes the earliest ready node,
 * so an order that is already valid comes out unchanged. */
typedef struct Heap {
  int *a;
  int n;
} Heap;

static void heap_push(Heap *h, int x) {
  int i = h->n++;
  while (i > 0 && h->a[(i - 1) / 2] > x) {
    h->a[i] = h->a[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->a[i] = x;
}

static int heap_pop(Heap *h) {
  int top = h->a[0], x = h->a[--h->n], i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= h->n)
      break;
    if (c + 1 < h->n && h->a[c + 1] < h->a[c])
      c++;
    if (h->a[c] >= x)
      break;
    h->a[i] = h->a[c];
    i = c;
  }
  if (h->n)
    h->a[i] = x;
  return top;
}

/* The position in g->nodes of the node defining v, or -1 when no node of g defines it. */
static int def_pos(const Graph *g, const int *pos, const Value *v) {
  if (!v || v->kind != VK_NODE || !v->def || v->def->id < 0 || v->def->id >= g->next_node_id)
    return -1;
  int p = pos[v->def->id];
  return p >= 0 && g->nodes[p] == v->def ? p : -1;
}

/* Names the values around a cycle among the nodes not yet sorted (indeg > 0). Walking
 * from such a node to an unsorted producer always finds one, so the walk must close. */
static int report_cycle(const Graph *g, const int *pos, const int *indeg, Diag *d) {
  int n = g->nnodes;
  int *step = malloc(sizeof(int) * (size_t)n), *seq = malloc(sizeof(int) * (size_t)n);
  if (!step || !seq) {
    free(step);
    free(seq);
    return diag_error(d, g->loc, "out of memory");
  }
  for (int i = 0; i < n; i++)
    step[i] = -1;
  int cur = 0;
  while (indeg[cur] == 0)
    cur++;
  int len = 0;
  while (step[cur] < 0) {
    step[cur] = len;
    seq[len++] = cur;
    const Node *nd = g->nodes[cur];
    int next = -1;
    for (int j = 0; j < nd->nin && next < 0; j++) {
      int p = def_pos(g, pos, nd->in[j]);
      if (p >= 0 && indeg[p] > 0)
        next = p;
    }
    cur = next; /* never -1: an unsorted node waits on an unsorted producer */
  }
  /* seq[step[cur]..len) walks against the data flow; start the message at the earliest
   * node of the cycle so it does not depend on where the walk began. */
  int from = step[cur], k = len - from, first = from;
  for (int i = from; i < len; i++)
    if (seq[i] < seq[first])
      first = i;
  char msg[2048];
  size_t at = (size_t)snprintf(msg, sizeof msg, "cycle: ");
  const char *first_name = NULL;
  for (int t = 0; t < k; t++) {
    /* Forward order: producer seq[i], consumer seq[i-1] (wrapping inside the cycle). */
    int i = from + ((first - from) - t + k) % k;
    int consumer = i == from ? len - 1 : i - 1;
    const Node *prod = g->nodes[seq[i]], *cons = g->nodes[seq[consumer]];
    const char *name = "?";
    for (int j = 0; j < cons->nin; j++)
      if (cons->in[j] && cons->in[j]->kind == VK_NODE && cons->in[j]->def == prod) {
        name = cons->in[j]->name;
        break;
      }
    if (!first_name)
      first_name = name;
    if (at < sizeof msg)
      at += (size_t)snprintf(msg + at, sizeof msg - at, "%%%s -> ", name);
  }
  if (at < sizeof msg)
    snprintf(msg + at, sizeof msg - at, "%%%s", first_name ? first_name : "?");
  const Node *where = g->nodes[seq[first]];
  free(step);
  free(seq);
  return diag_error(d, where->loc, "%s", msg);
}

int ir_toposort(Graph *g, Diag *d) {
  int n = g->nnodes, rc = 0;
  if (n == 0)
    return 0;
  int nid = g->next_node_id > 0 ? g->next_node_id : 1;
  int *pos = malloc(sizeof(int) * (size_t)nid);
  int *indeg = calloc((size_t)n, sizeof(int));
  int *start = calloc((size_t)n + 1, sizeof(int));
  int *heap = malloc(sizeof(int) * (size_t)n);
  Node **order = malloc(sizeof(Node *) * (size_t)n);
  int *edges = NULL;
  if (!pos || !indeg || !start || !heap || !order) {
    rc = diag_error(d, g->loc, "out of memory");
    goto done;
  }
  for (int i = 0; i < nid; i++)
    pos[i] = -1;
  for (int i = 0; i < n; i++)
    if (g->nodes[i]->id >= 0 && g->nodes[i]->id < nid)
      pos[g->nodes[i]->id] = i;
  /* Edges producer -> consumer in CSR form, one per input use (a node using a value
   * twice waits on it twice and is released twice). */
  int nedges = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < g->nodes[i]->nin; j++) {
      int p = def_pos(g, pos, g->nodes[i]->in[j]);
      if (p >= 0) {
        start[p + 1]++;
        indeg[i]++;
        nedges++;
      }
    }
  for (int i = 0; i < n; i++)
    start[i + 1] += start[i];
  edges = malloc(sizeof(int) * (size_t)(nedges ? nedges : 1));
  if (!edges) {
    rc = diag_error(d, g->loc, "out of memory");
    goto done;
  }
  {
    int *fill = heap; /* borrowed as the per-producer fill cursor before the heap is used */
    for (int i = 0; i < n; i++)
      fill[i] = start[i];
    for (int i = 0; i < n; i++)
      for (int j = 0; j < g->nodes[i]->nin; j++) {
        int p = def_pos(g, pos, g->nodes[i]->in[j]);
        if (p >= 0)
          edges[fill[p]++] = i;
      }
  }
  Heap h = {heap, 0};
  for (int i = 0; i < n; i++)
    if (indeg[i] == 0)
      heap_push(&h, i);
  int done_n = 0;
  while (h.n) {
    int i = heap_pop(&h);
    order[done_n++] = g->nodes[i];
    for (int e = start[i]; e < start[i + 1]; e++)
      if (--indeg[edges[e]] == 0)
        heap_push(&h, edges[e]);
  }
  if (done_n < n) {
    rc = report_cycle(g, pos, indeg, d);
    goto done;
  }
  memcpy(g->nodes, order, sizeof(Node *) * (size_t)n);
done:
  free(pos);
  free(indeg);
  free(start);
  free(heap);
  free(order);
  free(edges);
  return rc;
}

/* ---------------------------------------------------------------- the verifier */

/* An error at loc; when it concerns node n (non-NULL) that has no DSL position, the
 * message names the node instead. */
static int at_error(Diag *d, const Node *n, SrcLoc loc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int at_error(Diag *d, const Node *n, SrcLoc loc, const char *fmt, ...) {
  char buf[2048], who[512] = "";
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n && n->loc.line <= 0) {
    const char *out = n->nout > 0 && n->out && n->out[0] ? n->out[0]->name : NULL;
    snprintf(who, sizeof who, " (in node %s%s%s%s%s%s)", op_info[n->op].name,
             out ? " -> %" : "", out ? out : "", n->origin ? " from \"" : "",
             n->origin ? n->origin : "", n->origin ? "\"" : "");
  }
  return diag_error(d, n ? n->loc : loc, "%s%s", buf, who);
}

#define node_error(d, n, ...) at_error(d, n, (SrcLoc){0}, __VA_ARGS__)


static bool type_valid(const Type *t) {
  if (!type_is_known(t) || t->shape.rank > IR_MAX_RANK)
    return false;
  for (int i = 0; i < t->shape.rank; i++) {
    Dim dm = t->shape.dims[i];
    if (dm.sym ? (dm.n != -1 || !dm.sym[0]) : dm.n < 0)
      return false;
  }
  return true;
}

enum { ST_NONE, ST_INPUT, ST_CONST, ST_NODE };

typedef struct VState {
  unsigned char *state; /* by value id: how the value is defined so far */
  int *node_at;         /* by value id: position of its defining node in g->nodes, or -1 */
  int nid;
} VState;

/* A value must come from this graph: its id in range and its name leading to it. */
static bool belongs(const Graph *g, const VState *s, const Value *v) {
  return v->id >= 0 && v->id < s->nid && v->name && graph_find_value(g, v->name) == v;
}

/* A value's own definition: from this graph, of the kind it is listed as, defined once,
 * with a well-formed known type. n is the defining node for node outputs, else NULL. */
static int check_value_def(const Graph *g, VState *s, const Value *v, ValueKind kind,
                           const Node *n, Diag *d) {
  static const char *const what[] = {"input", "constant", "node output"};
  const char *name = v->name ? v->name : "?";
  if (!belongs(g, s, v))
    return at_error(d, n, v->loc, "%s %%%s does not belong to graph %s", what[kind], name,
                    g->name);
  if (v->kind != kind)
    return at_error(d, n, v->loc, "%%%s is listed as a graph %s but is a %s", name,
                    what[kind], (unsigned)v->kind <= VK_NODE ? what[v->kind] : "?");
  if (s->state[v->id] != ST_NONE)
    return at_error(d, n, v->loc, "%%%s is defined more than once", name);
  if (!type_is_known(&v->type))
    return at_error(d, n, v->loc, "%%%s has no type", name);
  if (!type_valid(&v->type)) {
    char b[TSTR];
    return at_error(d, n, v->loc, "%%%s has a malformed type %s", name,
                    type_str(&v->type, b, sizeof b));
  }
  if (!shape_size(&v->type.shape, v->type.dtype, NULL, NULL)) {
    char b[TSTR];
    return at_error(d, n, v->loc, "%%%s of type %s is too large (more than 2^48 bytes)", name,
                    type_str(&v->type, b, sizeof b));
  }
  return 0;
}

static int check_const_data(const Value *v, Diag *d) {
  const Tensor *t = v->data;
  char b[TSTR];
  if (!t)
    return diag_error(d, v->loc, "constant %%%s has no data", v->name);
  bool ok = t->dtype == v->type.dtype && t->rank == v->type.shape.rank &&
            shape_is_static(&v->type.shape) && (t->data || tensor_numel(t) == 0);
  for (int i = 0; ok && i < t->rank; i++)
    ok = t->dims[i] == v->type.shape.dims[i].n;
  if (!ok) {
    Type dt = {.dtype = t->dtype, .shape = {.rank = t->rank}};
    for (int i = 0; i < t->rank && i < IR_MAX_RANK; i++)
      dt.shape.dims[i] = (Dim){t->dims[i], NULL};
    char bt[TSTR];
    return diag_error(d, v->loc, "constant %%%s has type %s but its data is %s%s", v->name,
                      type_str(&v->type, b, sizeof b), type_str(&dt, bt, sizeof bt),
                      t->data ? "" : " (no elements)");
  }
  return 0;
}

static int verify_node(const Graph *g, VState *s, int at, Type *tmp, Diag *d) {
  const Node *n = g->nodes[at];
  if ((unsigned)n->op >= OP_COUNT)
    return diag_error(d, n->loc, "node %d has an unknown op %d", n->id, (int)n->op);
  const char *op = op_info[n->op].name;
  if ((n->nin > 0 && !n->in) || (n->nout > 0 && !n->out) || n->nin < 0 || n->nout < 0)
    return node_error(d, n, "%s node has malformed input or output lists", op);
  for (int j = 0; j < n->nin; j++) {
    const Value *v = n->in[j];
    if (!v) {
      bool trailing = j >= op_info[n->op].min_in;
      for (int k = j + 1; trailing && k < n->nin; k++)
        trailing = !n->in[k];
      if (!trailing)
        return node_error(d, n, "input %d of %s is missing", j, op);
      continue;
    }
    if (!belongs(g, s, v))
      return node_error(d, n, "%%%s, used by %s, does not belong to graph %s",
                        v->name ? v->name : "?", op, g->name);
    if (s->state[v->id] != ST_NONE)
      continue;
    if (v->kind == VK_NODE && s->node_at[v->id] >= at)
      return node_error(d, n, "%%%s is used by %s before it is defined (nodes are not in "
                        "topological order)", v->name, op);
    return node_error(d, n, "%%%s, used by %s, is not defined in the graph", v->name, op);
  }
  if (ir_check_attrs(n, d) || ir_infer_node(n, tmp, d)) {
    ir_note_node(d, n);
    return -1;
  }
  for (int k = 0; k < n->nout; k++) {
    const Value *v = n->out[k];
    if (!v)
      return node_error(d, n, "output %d of %s is missing", k, op);
    if (check_value_def(g, s, v, VK_NODE, n, d))
      return -1;
    if (v->def != n || v->def_index != k)
      return node_error(d, n, "%%%s does not record %s output %d as its definition", v->name,
                        op, k);
    if (!type_eq(&v->type, &tmp[k])) {
      char br[TSTR], bi[TSTR];
      return node_error(d, n, "type of %%%s is recorded as %s but %s gives %s", v->name,
                        type_str(&v->type, br, sizeof br), op,
                        type_str(&tmp[k], bi, sizeof bi));
    }
    s->state[v->id] = ST_NODE;
  }
  return 0;
}

/* ---------------------------------------------------------------- fuse groups */

typedef struct GroupAt {
  int64_t group;
  int at;
} GroupAt;

static int by_group_then_at(const void *pa, const void *pb) {
  const GroupAt *a = pa, *b = pb;
  if (a->group != b->group)
    return a->group < b->group ? -1 : 1;
  return (a->at > b->at) - (a->at < b->at);
}

int ir_fuse_groups(const Graph *g, int *first, int *next) {
  /* Sorted by group, then position, each group's nodes are one run in node order. */
  GroupAt *ga = malloc(sizeof *ga * (size_t)(g->nnodes + 1));
  if (!ga)
    return -1;
  int n = 0;
  for (int i = 0; i < g->nnodes; i++) {
    int64_t k = node_fuse_group(g->nodes[i]);
    if (first)
      first[i] = -1;
    if (next)
      next[i] = -1;
    if (k)
      ga[n++] = (GroupAt){k, i};
  }
  qsort(ga, (size_t)n, sizeof *ga, by_group_then_at);
  for (int j = 0, run = 0; j < n; j++) {
    if (j > 0 && ga[j].group != ga[j - 1].group)
      run = j;
    if (first)
      first[ga[j].at] = ga[run].at;
    if (next && j + 1 < n && ga[j + 1].group == ga[j].group)
      next[ga[j].at] = ga[j + 1].at;
  }
  free(ga);
  return 0;
}

/* Each fuse group's root names its kind (IR_ATTR_KIND), and the recognizer finds a plan
 * of that kind for the group's nodes; no other node names one. Structure only: the
 * limits of a kernel are the target's, which the fuse pass and codegen check. */
static int check_group_plans(const Graph *g, Diag *d) {
  int *first = malloc(sizeof *first * (size_t)(g->nnodes + 1));
  int *next = malloc(sizeof *next * (size_t)(g->nnodes + 1));
  const Node **members = malloc(sizeof *members * (size_t)(g->nnodes + 1));
  Users u = {0};
  bool any = false;
  for (int i = 0; i < g->nnodes; i++)
    any = any || node_fuse_group(g->nodes[i]) || attr_find(g->nodes[i], IR_ATTR_KIND);
  if (!first || !next || !members || (any && (ir_fuse_groups(g, first, next) ||
                                                users_build(g, &u)))) {
    free(first);
    free(next);
    free(members);
    users_free(&u);
    return diag_error(d, g->loc, "out of memory");
  }
  int rc = 0;
  for (int i = 0; any && i < g->nnodes && !rc; i++) {
    const Node *n = g->nodes[i];
    int64_t k = node_fuse_group(n);
    const Attr *a = attr_find(n, IR_ATTR_KIND);
    if (!k || next[i] >= 0) {
      if (a && k)
        rc = node_error(d, n, "'" IR_ATTR_KIND "' names the kind of fuse group %lld on its last "
                        "node, not on node %d", (long long)k, n->id);
      else if (a)
        rc = node_error(d, n, "'" IR_ATTR_KIND "' names the kind of a fuse group, but node %d "
                        "is in none (it has no '" IR_ATTR_FUSE "')", n->id);
      continue;
    }
    int m = 0;
    for (int j = first[i]; j >= 0; j = next[j])
      members[m++] = g->nodes[j];
    GroupKind kind = node_group_kind(n);
    char why[512];
    GroupPlan p;
    if (!kind) {
      GroupKind guess = group_guess_kind(members, m);
      bool ok = !group_plan(g, &u, members, m, GROUP_NONE, NULL, &p, why, sizeof why);
      rc = node_error(d, n, "fuse group %lld (root node %d, %%%s) names no kind: its last node "
                      "needs " IR_ATTR_KIND " = \"%s\"%s%s", (long long)k, n->id,
                      n->out[0]->name, group_kind_name(guess), ok ? "" : ", but ",
                      ok ? "" : why);
    } else if (group_plan(g, &u, members, m, kind, NULL, &p, why, sizeof why)) {
      rc = node_error(d, n, "fuse group %lld (root node %d, %%%s): kind %s, but %s",
                      (long long)k, n->id, n->out[0]->name, group_kind_name(kind), why);
    }
    group_plan_free(&p);
  }
  free(first);
  free(next);
  free(members);
  users_free(&u);
  return rc;
}

/* Fuse groups (IR_ATTR_FUSE): a value defined in a group by a node other than the
 * group's last one is used only inside the group, and is no graph output; except the
 * output of a group's first node that is not pointwise (its anchor), which the group's
 * kernel stores too: it may be a graph output and be read by nodes after the group's
 * last node. */
static int check_fuse_groups(const Graph *g, Diag *d) {
  int *first = malloc(sizeof *first * (size_t)(g->nnodes + 1));
  int *root = malloc(sizeof *root * (size_t)(g->nnodes + 1));
  int *at = malloc(sizeof *at * (size_t)(g->next_node_id + 1));
  if (!first || !root || !at || ir_fuse_groups(g, first, root)) {
    free(first);
    free(root);
    free(at);
    return diag_error(d, g->loc, "out of memory");
  }
  for (int i = 0; i < g->nnodes; i++)
    at[g->nodes[i]->id] = i;
  /* root[i]: from the next node of i's group to the position of its last one */
  for (int i = g->nnodes - 1; i >= 0; i--)
    root[i] = root[i] < 0 ? i : root[root[i]];
  int rc = 0;
  for (int i = 0; i < g->nnodes + g->noutputs && !rc; i++) {
    const Node *user = i < g->nnodes ? g->nodes[i] : NULL;
    int nin = user ? user->nin : 1;
    for (int k = 0; k < nin && !rc; k++) {
      const Value *v = user ? user->in[k] : g->outputs[i - g->nnodes];
      if (!v || v->kind != VK_NODE)
        continue;
      int p = at[v->def->id];
      int64_t grp = node_fuse_group(v->def);
      if (!grp || root[p] == p || (user && node_fuse_group(user) == grp))
        continue;
      if (first[p] == p && !(op_info[v->def->op].flags & OPF_POINTWISE) && v->def->nout == 1 &&
          (!user || i > root[p]))
        continue; /* the anchor's side output */
      const Node *r = g->nodes[root[p]];
      if (user)
        rc = node_error(d, user, "%%%s is inside fuse group %lld (its last node defines %%%s) "
                        "but used outside it", v->name, (long long)grp, r->out[0]->name);
      else
        rc = diag_error(d, g->loc, "graph output %%%s is inside fuse group %lld (its last node "
                        "defines %%%s): only the last node's outputs may leave a group",
                        v->name, (long long)grp, r->out[0]->name);
    }
  }
  free(first);
  free(root);
  free(at);
  return rc ? rc : check_group_plans(g, d);
}

/* Each range valid and of a symbol some input's dims use. */
static int verify_ranges(const Graph *g, Diag *d) {
  for (int i = 0; i < g->nranges; i++) {
    const DimRange *r = &g->ranges[i];
    SrcLoc at = r->loc.line ? r->loc : g->loc;
    char buf[160];
    if (range_check(r, buf, sizeof buf))
      return diag_error(d, at, "range of '%s': %s", r->sym, buf);
    if (!graph_has_symbol(g, r->sym))
      return diag_error(d, at, "range of '%s': no input of graph %s has a dim named '%s'",
                        r->sym, g->name, r->sym);
  }
  return 0;
}

int ir_verify(const Graph *g, Diag *d) {
  if (verify_ranges(g, d))
    return -1;
  int nid = g->next_value_id > 0 ? g->next_value_id : 1, rc = -1, maxout = 1;
  VState s = {calloc((size_t)nid, 1), malloc(sizeof(int) * (size_t)nid), nid};
  Type *tmp = NULL;
  bool *seen_node = calloc((size_t)(g->next_node_id > 0 ? g->next_node_id : 1), 1);
  if (!s.state || !s.node_at || !seen_node)
    goto oom;
  for (int i = 0; i < nid; i++)
    s.node_at[i] = -1;
  /* Where each node output is defined, so a use before its definition can say so. */
  for (int i = 0; i < g->nnodes; i++) {
    const Node *n = g->nodes[i];
    if (!n) {
      diag_error(d, g->loc, "node %d of graph %s is NULL", i, g->name);
      goto out;
    }
    /* Node ids index side tables (toposort, passes): they must be unique and in range. */
    if (n->id < 0 || n->id >= g->next_node_id) {
      node_error(d, n, "node id %d is outside graph %s's range", n->id, g->name);
      goto out;
    }
    if (seen_node[n->id]) {
      node_error(d, n, "node id %d appears twice in graph %s", n->id, g->name);
      goto out;
    }
    seen_node[n->id] = true;
    if (n->nout > maxout)
      maxout = n->nout;
    for (int k = 0; n->out && k < n->nout; k++)
      if (n->out[k] && n->out[k]->id >= 0 && n->out[k]->id < nid && s.node_at[n->out[k]->id] < 0)
        s.node_at[n->out[k]->id] = i;
  }
  tmp = malloc(sizeof *tmp * (size_t)maxout);
  if (!tmp)
    goto oom;
  for (int i = 0; i < g->ninputs; i++) {
    const Value *v = g->inputs[i];
    if (!v) {
      diag_error(d, g->loc, "input %d of graph %s is NULL", i, g->name);
      goto out;
    }
    if (check_value_def(g, &s, v, VK_INPUT, NULL, d))
      goto out;
    s.state[v->id] = ST_INPUT;
  }
  for (int i = 0; i < g->nconsts; i++) {
    const Value *v = g->consts[i];
    if (!v) {
      diag_error(d, g->loc, "constant %d of graph %s is NULL", i, g->name);
      goto out;
    }
    if (check_value_def(g, &s, v, VK_CONST, NULL, d) || check_const_data(v, d))
      goto out;
    s.state[v->id] = ST_CONST;
  }
  for (int i = 0; i < g->nnodes; i++)
    if (verify_node(g, &s, i, tmp, d))
      goto out;
  for (int i = 0; i < g->noutputs; i++) {
    const Value *v = g->outputs[i];
    if (!v) {
      diag_error(d, g->loc, "output %d of graph %s is NULL", i, g->name);
      goto out;
    }
    if (!belongs(g, &s, v) || s.state[v->id] == ST_NONE) {
      diag_error(d, g->loc, "graph output %%%s is not defined in graph %s",
                 v->name ? v->name : "?", g->name);
      goto out;
    }
  }
  rc = check_fuse_groups(g, d);
  goto out;
oom:
  diag_error(d, g->loc, "out of memory");
out:
  free(s.state);
  free(s.node_at);
  free(seen_node);
  free(tmp);
  return rc;
}
