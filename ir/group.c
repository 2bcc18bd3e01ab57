/* group.c: the recognizer of fuse groups. A fuse group (IR_ATTR_FUSE) is one kernel; its
 * plan says which kernel (GroupKind) and what each node is in it: the anchor whose kernel
 * it is, the prologue or views its inputs are read through, the pointwise epilogue it
 * applies as it stores, the values it reads and writes, attention's roles. One function
 * computes plans, so the fuse pass (which keeps a merge only where one exists), the
 * verifier (which checks the kind the group's root names) and codegen (which renders the
 * plan) agree on what a group can be. It only reads the graph: the members are given. */
#include "ir/ir.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[GROUP_KIND_COUNT] = {
    [GROUP_NONE] = "none",         [GROUP_POINTWISE] = "pointwise", [GROUP_EPILOGUE] = "epilogue",
    [GROUP_CONV] = "conv",         [GROUP_GEMM] = "gemm",           [GROUP_CONCAT] = "concat",
    [GROUP_ATTENTION] = "attention", [GROUP_LOOP] = "loop"};

const GroupLimits group_limits_default = {
    .inputs = GROUP_MAX_INPUTS,
    .nodes = GROUP_MAX_NODES,
    .concat_inputs = GROUP_MAX_CONCAT_INPUTS,
    .attention_nodes = GROUP_MAX_ATTENTION_NODES,
    .head = GROUP_MAX_HEAD,
    .keys = GROUP_MAX_KEYS,
    .scales = GROUP_MAX_SCALES,
};

/* The attention kernel keeps a row of scores and its tiles in a block's static shared
 * memory: GROUP_MAX_KEYS keys in 48 KiB, fewer (by powers of two) in less. */
GroupLimits group_limits_for(const Target *t) {
  GroupLimits l = group_limits_default;
  while (l.keys > 64 && (int64_t)l.keys * 48 * 1024 > (int64_t)GROUP_MAX_KEYS * t->smem_block)
    l.keys /= 2;
  return l;
}

const char *group_kind_name(GroupKind k) {
  return (unsigned)k < GROUP_KIND_COUNT ? kind_names[k] : "none";
}

GroupKind group_kind_from_name(const char *s) {
  for (int k = GROUP_NONE + 1; s && k < GROUP_KIND_COUNT; k++)
    if (!strcmp(s, kind_names[k]))
      return (GroupKind)k;
  return GROUP_NONE;
}

GroupKind node_group_kind(const Node *n) {
  const Attr *a = attr_find(n, IR_ATTR_KIND);
  return a && a->kind == AK_STRING ? group_kind_from_name(a->s) : GROUP_NONE;
}

/* What each member is, while the recognizer works. */
enum {
  ROLE_NONE, ROLE_PROLOGUE, ROLE_VIEW, ROLE_ANCHOR, ROLE_EPILOGUE, ROLE_Q, ROLE_K, ROLE_V,
  ROLE_SCORES, ROLE_SOFTMAX, ROLE_VALUES, ROLE_PRE, ROLE_POST, ROLE_TRANSPOSE
};

typedef struct IdAt {
  int id, at;
} IdAt;

typedef struct Rec {
  const Graph *g;
  const Users *u;
  const GroupLimits *lim;
  GroupPlan *p;
  char *why;
  size_t nwhy;
  IdAt *by_id;          /* the members' ids, sorted, and their indices */
  unsigned char *role;  /* by member index */
} Rec;

typedef struct Block {
  struct Block *next;
  max_align_t data[];
} Block;

/* n zeroed bytes that group_plan_free frees; NULL on out of memory. */
static void *take(Rec *r, size_t n) {
  Block *b = calloc(1, sizeof *b + n + 1);
  if (!b)
    return NULL;
  b->next = r->p->mem_;
  r->p->mem_ = b;
  return b->data;
}

void group_plan_free(GroupPlan *p) {
  for (Block *b = p->mem_, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  p->mem_ = NULL;
}

static int fail(Rec *r, GroupFail f, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(Rec *r, GroupFail f, const char *fmt, ...) {
  r->p->fail = f;
  if (r->why && r->nwhy) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, r->nwhy, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static int oom(Rec *r) { return fail(r, GROUP_FAIL_MEMORY, "out of memory"); }

static int by_id(const void *pa, const void *pb) {
  const IdAt *a = pa, *b = pb;
  return (a->id > b->id) - (a->id < b->id);
}

/* The index of member n, or -1. */
static int member(const Rec *r, const Node *n) {
  int lo = 0, hi = r->p->n;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (r->by_id[mid].id < n->id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < r->p->n && r->p->node[r->by_id[lo].at] == n ? r->by_id[lo].at : -1;
}

/* The index of the member that makes v, or -1. */
static int maker(const Rec *r, const Value *v) {
  return v && v->kind == VK_NODE ? member(r, v->def) : -1;
}

/* Whether only members read v (it is no graph output either). */
static bool read_inside(const Rec *r, const Value *v) {
  if (r->u->outputs[v->id])
    return false;
  int n;
  const int *at = users_of(r->u, v, &n);
  for (int j = 0; j < n; j++)
    if (member(r, r->g->nodes[at[j]]) < 0)
      return false;
  return true;
}

/* Whether v's one use is as input k of node by. */
static bool read_once_as(const Rec *r, const Value *v, const Node *by, int k) {
  int n;
  const int *at = users_of(r->u, v, &n);
  return !r->u->outputs[v->id] && n == 1 && r->g->nodes[at[0]] == by && k < by->nin &&
         by->in[k] == v;
}

static bool same_dims(const Value *a, const Value *b) {
  const Shape *x = &a->type.shape, *y = &b->type.shape;
  if (x->rank != y->rank)
    return false;
  for (int i = 0; i < x->rank; i++)
    if (!dim_eq(x->dims[i], y->dims[i]))
      return false;
  return true;
}

static bool pointwise(const Node *n) {
  return (op_info[n->op].flags & OPF_POINTWISE) && n->nout == 1;
}

/* Keeps the first of each value of v[0..n) in order; the count left. */
static int distinct(Rec *r, const Value **v, int n) {
  if (n < 2)
    return n;
  if (n <= 32) {
    int m = 0;
    for (int i = 0; i < n; i++) {
      bool dup = false;
      for (int j = 0; j < m && !dup; j++)
        dup = v[j] == v[i];
      if (!dup)
        v[m++] = v[i];
    }
    return m;
  }
  IdAt *s = take(r, sizeof *s * (size_t)n);
  if (!s)
    return -1;
  for (int i = 0; i < n; i++)
    s[i] = (IdAt){v[i]->id, i};
  qsort(s, (size_t)n, sizeof *s, by_id); /* by id: each id's least position is its first */
  for (int i = 0, j = 0; i < n; i = j) {
    int first = s[i].at;
    for (j = i + 1; j < n && s[j].id == s[i].id; j++)
      first = s[j].at < first ? s[j].at : first;
    for (int q = i; q < j; q++)
      if (s[q].at != first)
        v[s[q].at] = NULL;
  }
  int m = 0;
  for (int i = 0; i < n; i++)
    if (v[i])
      v[m++] = v[i];
  return m;
}

/* The pointwise nodes list[0..cnt) (role `role`, in node order) applied to the elements
 * of anchor's output (NULL: none) up to the value out: each pointwise, its output
 * broadcasting to out's shape, its inputs made by the chain, anchor's output or outside
 * the group. The distinct values from outside into *next; at most lim->inputs. */
static int chain(Rec *r, const Node **list, int cnt, int role, const Node *anchor,
                 const Value *out, int *next) {
  int total = 0;
  for (int j = 0; j < cnt; j++)
    total += list[j]->nin;
  const Value **ext = take(r, sizeof *ext * (size_t)(total + 1));
  if (!ext)
    return oom(r);
  int ne = 0;
  for (int j = 0; j < cnt; j++) {
    const Node *n = list[j];
    if (!pointwise(n))
      return fail(r, GROUP_FAIL_SHAPE, "node %d (%s) is not pointwise", n->id,
                  op_info[n->op].name);
    if (!shape_broadcasts_to(&n->out[0]->type.shape, &out->type.shape))
      return fail(r, GROUP_FAIL_SHAPE, "%%%s (node %d) does not broadcast to %%%s",
                  n->out[0]->name, n->id, out->name);
    for (int k = 0; k < n->nin; k++) {
      const Value *v = n->in[k];
      int m = maker(r, v);
      if (!v || (anchor && v == anchor->out[0]) || (m >= 0 && r->role[m] == role))
        continue;
      if (m >= 0)
        return fail(r, GROUP_FAIL_SHAPE, "node %d (%s) reads %%%s, which node %d makes inside "
                    "the group without storing it", n->id, op_info[n->op].name, v->name,
                    v->def->id);
      ext[ne++] = v;
    }
  }
  ne = distinct(r, ext, ne);
  if (ne < 0)
    return oom(r);
  if (r->lim && ne > r->lim->inputs)
    return fail(r, GROUP_FAIL_INPUTS, "its pointwise nodes read %d values from outside; a "
                "kernel takes at most %d", ne, r->lim->inputs);
  *next = ne;
  return 0;
}

/* The members of role `role`, in node order, into a new list. */
static const Node **with_role(Rec *r, int role, int *cnt) {
  const Node **l = take(r, sizeof *l * (size_t)(r->p->n + 1));
  *cnt = 0;
  for (int i = 0; l && i < r->p->n; i++)
    if (r->role[i] == role)
      l[(*cnt)++] = r->p->node[i];
  return l;
}

/* The anchor at index a, the pointwise nodes after it its epilogue: its shape is the
 * root's, and the epilogue has at most lim->nodes nodes with the anchor. */
static int epilogue_after(Rec *r, int a) {
  GroupPlan *p = r->p;
  const Node *an = p->node[a];
  p->anchor = an;
  r->role[a] = ROLE_ANCHOR;
  for (int i = a + 1; i < p->n; i++)
    r->role[i] = ROLE_EPILOGUE;
  if (an->nout != 1 || !same_dims(an->out[0], p->out))
    return fail(r, GROUP_FAIL_SHAPE, "the anchor, node %d (%s), has not one output of the "
                "group's shape (%%%s's)", an->id, op_info[an->op].name, p->out->name);
  if (r->lim && p->n - a > r->lim->nodes)
    return fail(r, GROUP_FAIL_NODES, "%d nodes; a kernel computes at most %d", p->n - a,
                r->lim->nodes);
  if (!(p->epilogue = with_role(r, ROLE_EPILOGUE, &p->nepilogue)))
    return oom(r);
  return chain(r, p->epilogue, p->nepilogue, ROLE_EPILOGUE, an, p->out, &p->nepilogue_in);
}

static int plan_pointwise(Rec *r) {
  GroupPlan *p = r->p;
  for (int i = 0; i < p->n; i++)
    r->role[i] = ROLE_EPILOGUE;
  if (r->lim && p->n > r->lim->nodes)
    return fail(r, GROUP_FAIL_NODES, "%d nodes; a kernel computes at most %d", p->n,
                r->lim->nodes);
  if (!(p->epilogue = with_role(r, ROLE_EPILOGUE, &p->nepilogue)))
    return oom(r);
  return chain(r, p->epilogue, p->nepilogue, ROLE_EPILOGUE, NULL, p->out, &p->nepilogue_in);
}

/* Ops whose kernel computes one output element per thread and can apply pointwise nodes
 * to it as it stores it, besides conv, concat and matmul, which have kinds of their own. */
static bool epilogue_anchor(const Node *n) {
  if (n->op == OP_SOFTMAX || n->op == OP_LOG_SOFTMAX) {
    /* a row per block or warp: only along the last dim */
    int64_t axis = attr_int(n, "axis"), rank = n->in[0]->type.shape.rank;
    return axis == -1 || axis == rank - 1;
  }
  return n->op == OP_TRANSPOSE || n->op == OP_SLICE || n->op == OP_GATHER ||
         n->op == OP_LAYER_NORM || n->op == OP_RMS_NORM;
}

bool group_is_anchor(const Node *n, const GroupLimits *lim) {
  if (n->nout != 1)
    return false;
  return epilogue_anchor(n) || n->op == OP_CONV ||
         (n->op == OP_CONCAT && (!lim || n->nin <= lim->concat_inputs));
}

static int plan_epilogue(Rec *r) {
  const Node *a = r->p->node[0];
  if (!epilogue_anchor(a))
    return fail(r, GROUP_FAIL_SHAPE, "node %d (%s) anchors no epilogue (a transpose, slice, "
                "gather, layer_norm, rms_norm, or softmax along the last dim does)", a->id,
                op_info[a->op].name);
  if (r->p->n < 2)
    return fail(r, GROUP_FAIL_SHAPE, "an anchor alone has no epilogue");
  return epilogue_after(r, 0);
}

/* The one member of op `op`: its index, or -1 with *count the number there are. */
static int only(const Rec *r, Op op, int *count) {
  int at = -1;
  *count = 0;
  for (int i = 0; i < r->p->n; i++)
    if (r->p->node[i]->op == op) {
      at = i;
      ++*count;
    }
  return *count == 1 ? at : -1;
}

static int plan_conv(Rec *r) {
  GroupPlan *p = r->p;
  int cnt, c = only(r, OP_CONV, &cnt);
  if (c < 0)
    return fail(r, GROUP_FAIL_SHAPE, "it holds %d convolutions, not one", cnt);
  const Node *conv = p->node[c];
  if (c > 2)
    return fail(r, GROUP_FAIL_SHAPE, "%d nodes before the convolution; its prologue is at "
                "most a cast and a transpose", c);
  DType t = conv->out[0]->type.dtype;
  bool cast = false;
  for (int j = 0; j < c; j++) {
    const Node *d = p->node[j], *next = j + 1 < c ? p->node[j + 1] : conv;
    r->role[j] = ROLE_PROLOGUE;
    bool ok = d->op == OP_TRANSPOSE ? shape_is_static(&d->in[0]->type.shape)
              : d->op == OP_CAST && !cast && d->in[0]->type.dtype == DT_F32 &&
                    (t == DT_BF16 || t == DT_F16) && d->out[0]->type.dtype == t;
    if (!ok)
      return fail(r, GROUP_FAIL_SHAPE, "node %d (%s) is no prologue of the convolution (a "
                  "cast from f32 to its type, a transpose)", d->id, op_info[d->op].name);
    cast = cast || d->op == OP_CAST;
    if (d->nout != 1 || !read_once_as(r, d->out[0], next, 0))
      return fail(r, GROUP_FAIL_SHAPE, "%%%s (node %d) is not read once, as the input of node "
                  "%d", d->out[0]->name, d->id, next->id);
  }
  p->nprologue = c;
  if (c) {
    if (!(p->prologue = with_role(r, ROLE_PROLOGUE, &cnt)))
      return oom(r);
    int rank = p->node[0]->in[0]->type.shape.rank;
    p->prologue_src = p->node[0]->in[0];
    for (int j = 0; j < rank; j++)
      p->prologue_perm[j] = j;
    for (int j = 0; j < c; j++) {
      if (p->node[j]->op != OP_TRANSPOSE)
        continue;
      int len;
      const int64_t *perm = attr_ints(p->node[j], "perm", &len);
      int64_t before[IR_MAX_RANK];
      memcpy(before, p->prologue_perm, sizeof before);
      for (int i = 0; i < rank; i++) /* no perm: the dims reversed */
        p->prologue_perm[i] = before[perm ? (perm[i] + rank) % rank : rank - 1 - i];
    }
  }
  if (c == 0 && p->n < 2)
    return fail(r, GROUP_FAIL_SHAPE, "a convolution alone has neither prologue nor epilogue");
  return epilogue_after(r, c);
}

/* The view v (the value of node chain[0]'s first input) through chain[0..len), each
 * node's output read only by the next (the last's by `by`, as its input k). */
static int compose(Rec *r, const Node **list, int len, const Node *by, int k, View *v,
                   const char *what) {
  for (int j = 0; j < len; j++)
    if (list[j]->nin < 1)
      return fail(r, GROUP_FAIL_SHAPE, "node %d (%s) is no view on the way to %s",
                  list[j]->id, op_info[list[j]->op].name, what);
  const Value *base = list[0]->in[0];
  if (!shape_is_static(&base->type.shape))
    return fail(r, GROUP_FAIL_SHAPE, "%%%s has a symbolic shape; %s read through views need "
                "static ones", base->name, what);
  view_init(v, base);
  for (int j = 0; j < len; j++) {
    const Node *d = list[j], *next = j + 1 < len ? list[j + 1] : by;
    View out;
    if (d->nout != 1 || !view_through(d, 0, v, &out))
      return fail(r, GROUP_FAIL_SHAPE, "node %d (%s) is no strided view on the way to %s",
                  d->id, op_info[d->op].name, what);
    if (!read_once_as(r, d->out[0], next, j + 1 < len ? 0 : k))
      return fail(r, GROUP_FAIL_SHAPE, "%%%s (node %d) is not read once, by node %d",
                  d->out[0]->name, d->id, next->id);
    *v = out;
  }
  return 0;
}

static bool gemm_dtype(DType t) {
  return t == DT_F32 || t == DT_F16 || t == DT_BF16 || t == DT_F8E4M3;
}

bool group_gemm_matmul(const Node *m) {
  DType t = m->in[0]->type.dtype;
  return m->op == OP_MATMUL && m->nout == 1 && gemm_dtype(t) &&
         !(t == DT_F8E4M3 && (m->out[0]->type.dtype == DT_F32 || !attr_int(m, "transpose_b"))) &&
         m->in[1]->type.shape.rank == 2 && m->in[0]->type.shape.rank >= 2;
}

/* Whether v is a bias of y's last dim: [N], [1, N], ... of y's type, N y's last dim. */
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

/* The operand of add node a that is not v (NULL when a is no add of v). */
static const Value *other_addend(const Node *a, const Value *v) {
  return a && a->op == OP_ADD ? node_other_input(a, v) : NULL;
}

/* cuBLASLt's epilogue of matmul m: an add of a bias along the last dim, then maybe an add
 * of a residual of the output's shape and type (C, beta 1), then maybe a relu of the sum
 * (RELU_BIAS); or the bias add and a tanh gelu of it (GELU_BIAS); or, for a linear layer
 * without a bias (Llama's and T5's projections), the residual add alone. */
static int gemm_epilogue(Rec *r, const Node *m) {
  GroupPlan *p = r->p;
  const Node *const *e = p->epilogue;
  int ne = p->nepilogue;
  const Value *y = m->out[0], *b = other_addend(e[0], y);
  if (!group_gemm_matmul(m))
    return fail(r, GROUP_FAIL_SHAPE, "matmul node %d takes no cuBLASLt epilogue (f32, f16, "
                "bf16 or e4m3 rows times 2-D weights)", m->id);
  if (ne > 3)
    return fail(r, GROUP_FAIL_SHAPE, "%d nodes follow the matmul; cuBLASLt's epilogue is at "
                "most 3", ne);
  if (!b || b == y)
    return fail(r, GROUP_FAIL_SHAPE, "node %d (%s) is no add to the matmul's output",
                e[0]->id, op_info[e[0]->op].name);
  const Value *v = y;
  int at = 0;
  if (bias_of(b, y)) {
    p->bias = b;
    v = e[at++]->out[0];
    if (ne == 2 && e[1]->op == OP_GELU && e[1]->in[0] == v &&
        !strcmp(attr_string(e[1], "approximate"), "tanh")) {
      p->gelu = true;
      return 0;
    }
  }
  const Value *res = at < ne ? other_addend(e[at], v) : NULL;
  if (res && res != v && same_dims(res, y) && res->type.dtype == y->type.dtype) {
    p->residual = res;
    v = e[at++]->out[0];
  }
  if (at == 0)
    return fail(r, GROUP_FAIL_SHAPE, "node %d (add) adds neither a bias along the last dim "
                "nor a residual of the matmul's shape and type", e[0]->id);
  if (p->bias && at < ne && e[at]->op == OP_RELU && e[at]->in[0] == v) {
    p->relu = true;
    at++;
  }
  if (at < ne)
    return fail(r, GROUP_FAIL_SHAPE, "node %d (%s) is none of cuBLASLt's epilogue (a "
                "residual add and a relu, or a gelu with approximate = \"tanh\", after the "
                "bias add)", e[at]->id, op_info[e[at]->op].name);
  return 0;
}

static int plan_gemm(Rec *r) {
  GroupPlan *p = r->p;
  int cnt, j = only(r, OP_MATMUL, &cnt);
  if (j < 0)
    return fail(r, GROUP_FAIL_SHAPE, "it holds %d matmuls, not one", cnt);
  const Node *m = p->node[j];
  if (m->nout != 1 || p->n < 2)
    return fail(r, GROUP_FAIL_SHAPE, "a matmul alone has neither views nor an epilogue");
  for (int k = 0; k < j; k++)
    r->role[k] = ROLE_VIEW;
  if (j) {
    DType t = m->in[0]->type.dtype;
    if ((t != DT_F32 && t != DT_F16 && t != DT_BF16) || m->in[1]->type.shape.rank != 2)
      return fail(r, GROUP_FAIL_SHAPE, "matmul node %d reads its first input through views "
                  "only as an f32, f16 or bf16 GEMM with 2-D weights", m->id);
    if (!(p->view = with_role(r, ROLE_VIEW, &p->nview)) ||
        !(p->operand = take(r, sizeof *p->operand)))
      return oom(r);
    p->noperand = 1;
    if (compose(r, p->view, p->nview, m, 0, p->operand, "the matmul's first input"))
      return -1;
    int64_t rows, ld;
    if (!view_rows(p->operand, &rows, &ld))
      return fail(r, GROUP_FAIL_SHAPE, "the matmul's first input, read through the views, is "
                  "no matrix of rows (a leading dim and an offset)");
  }
  if (epilogue_after(r, j))
    return -1;
  return p->nepilogue ? gemm_epilogue(r, m) : 0;
}

static int plan_concat(Rec *r) {
  GroupPlan *p = r->p;
  int cnt, c = only(r, OP_CONCAT, &cnt);
  if (c < 0)
    return fail(r, GROUP_FAIL_SHAPE, "it holds %d concats, not one", cnt);
  const Node *cat = p->node[c];
  if (r->lim && cat->nin > r->lim->concat_inputs)
    return fail(r, GROUP_FAIL_INPUTS, "the concat has %d inputs; its kernel takes at most %d",
                cat->nin, r->lim->concat_inputs);
  if (!(p->operand = take(r, sizeof *p->operand * (size_t)cat->nin)))
    return oom(r);
  p->noperand = cat->nin;
  const Node **list = take(r, sizeof *list * (size_t)(c + 1));
  if (!list)
    return oom(r);
  for (int k = 0; k < cat->nin; k++) {
    /* back from input k along the members before the concat, then forward as a view */
    int len = 0;
    for (const Value *v = cat->in[k]; maker(r, v) >= 0 && maker(r, v) < c;) {
      int m = maker(r, v);
      if (r->role[m] != ROLE_NONE)
        return fail(r, GROUP_FAIL_SHAPE, "node %d (%s) leads to two inputs of the concat",
                    v->def->id, op_info[v->def->op].name);
      const Node *d = v->def;
      if (d->op != OP_TRANSPOSE && !(op_info[d->op].flags & OPF_ALIAS))
        return fail(r, GROUP_FAIL_SHAPE, "node %d (%s) before the concat is no transpose or "
                    "reshape", d->id, op_info[d->op].name);
      r->role[m] = ROLE_VIEW;
      list[len++] = d;
      v = d->in[0];
    }
    for (int a = 0, b = len - 1; a < b; a++, b--) {
      const Node *t = list[a];
      list[a] = list[b];
      list[b] = t;
    }
    if (!len)
      view_init(&p->operand[k], cat->in[k]);
    else if (compose(r, list, len, cat, k, &p->operand[k], "the concat's input"))
      return -1;
  }
  for (int i = 0; i < c; i++)
    if (r->role[i] != ROLE_VIEW)
      return fail(r, GROUP_FAIL_SHAPE, "node %d (%s) leads to no input of the concat",
                  p->node[i]->id, op_info[p->node[i]->op].name);
  if (!(p->view = with_role(r, ROLE_VIEW, &p->nview)))
    return oom(r);
  if (c == 0 && p->n < 2)
    return fail(r, GROUP_FAIL_SHAPE, "a concat alone has neither views nor an epilogue");
  return epilogue_after(r, c);
}

/* Attention's operand v of a matmul: the members it comes through (views and scalar
 * multiplies, role `role`), back to the buffer, read forward as a view. */
static int operand(Rec *r, const Value *v, int role, GroupOperand *o, const char *what) {
  const Node **chain = take(r, sizeof *chain * (size_t)(r->p->n + 1));
  const Value **at = take(r, sizeof *at * (size_t)(r->p->n + 1));
  o->scale = take(r, sizeof *o->scale * (size_t)(r->p->n + 1));
  o->divide = take(r, sizeof *o->divide * (size_t)(r->p->n + 1));
  if (!chain || !at || !o->scale || !o->divide)
    return oom(r);
  int len = 0;
  /* a node may lead to several operands (a split of Q, K and V) */
  for (int m = maker(r, v); m >= 0 && v->def->nin >= 1 &&
                            (r->role[m] == ROLE_NONE || r->role[m] == ROLE_Q ||
                             r->role[m] == ROLE_K || r->role[m] == ROLE_V);
       m = maker(r, v)) {
    const Node *d = v->def;
    if (r->role[m] == ROLE_NONE)
      r->role[m] = (unsigned char)role;
    at[len] = v;
    chain[len++] = d;
    const Value *c = view_scale_factor(d);
    v = c ? node_other_input(d, c) : d->in[0];
  }
  if (!shape_is_static(&v->type.shape))
    return fail(r, GROUP_FAIL_SHAPE, "%%%s has a symbolic shape", v->name);
  view_init(&o->view, v);
  o->node = chain;
  o->n = len;
  for (int a = 0, b = len - 1; a < b; a++, b--) {
    const Node *t = chain[a];
    chain[a] = chain[b];
    chain[b] = t;
    const Value *u = at[a];
    at[a] = at[b];
    at[b] = u;
  }
  for (int i = 0; i < len; i++) {
    const Node *d = chain[i];
    const Value *c = view_scale_factor(d);
    if (c) {
      if (r->lim && o->nscale == r->lim->scales)
        return fail(r, GROUP_FAIL_SHAPE, "more than %d scales of the %s", r->lim->scales, what);
      o->divide[o->nscale] = d->op == OP_DIV;
      o->scale[o->nscale++] = c;
      continue;
    }
    View next;
    if (!view_through_reads(d, at[i]->def_index, &o->view, &next))
      return fail(r, GROUP_FAIL_SHAPE, "%%%s (node %d) is no strided view of %%%s; the "
                  "attention kernel reads its %s through strides", at[i]->name, d->id,
                  o->view.base->name, what);
    o->view = next;
  }
  /* a div (the kv head of a query head) only among the batch dims, which the kernel
   * decomposes its head index into */
  const View *w = &o->view;
  if (w->rank >= 2 && (w->div[w->rank - 1] > 1 || w->div[w->rank - 2] > 1))
    return fail(r, GROUP_FAIL_SHAPE, "the %s %%%s repeat along a row or a column; the "
                "attention kernel repeats whole heads", what, o->view.base->name);
  DType t = o->view.base->type.dtype;
  if (t != DT_F32 && t != DT_F16 && t != DT_BF16)
    return fail(r, GROUP_FAIL_SHAPE, "the %s %%%s is %s; the attention kernel reads f32, f16 "
                "and bf16", what, o->view.base->name, dtype_name(t));
  return 0;
}

static int plan_attention(Rec *r) {
  GroupPlan *p = r->p;
  int cnt, s = only(r, OP_SOFTMAX, &cnt);
  if (s < 0)
    return fail(r, GROUP_FAIL_SHAPE, "it holds %d softmaxes, not one", cnt);
  if (r->lim && p->n > r->lim->attention_nodes)
    return fail(r, GROUP_FAIL_NODES, "%d nodes; an attention has at most %d", p->n,
                r->lim->attention_nodes);
  const Node *sm = p->node[s], *m1 = NULL, *m2 = NULL, *root = p->root;
  const Value *sc = sm->out[0];
  int rank = sc->type.shape.rank;
  if (!gemm_dtype(sc->type.dtype) || rank < 2 || !shape_is_static(&sc->type.shape) ||
      (attr_int(sm, "axis") != -1 && attr_int(sm, "axis") != rank - 1))
    return fail(r, GROUP_FAIL_SHAPE, "the softmax is not along the last dim of static f32, "
                "f16 or bf16 scores of rank 2 or more");
  /* the first matmul feeds the softmax through pointwise members of the scores' size */
  const Value *v = sm->in[0];
  while (maker(r, v) >= 0 && v->def->op != OP_MATMUL) {
    const Node *d = v->def;
    const Value *next = NULL;
    for (int k = 0; k < d->nin && !next; k++)
      if (maker(r, d->in[k]) >= 0 && shape_numel(&d->in[k]->type.shape) == shape_numel(&sm->in[0]->type.shape))
        next = d->in[k];
    if (!next)
      break;
    v = next;
  }
  if (maker(r, v) >= 0 && v->def->op == OP_MATMUL)
    m1 = v->def;
  for (int i = 0; i < p->n; i++)
    if (p->node[i]->op == OP_MATMUL && p->node[i] != m1) {
      if (m2)
        return fail(r, GROUP_FAIL_SHAPE, "it holds more than two matmuls");
      m2 = p->node[i];
    }
  if (!m1 || !m2 || (root != m2 && (root->op != OP_TRANSPOSE || root->in[0] != m2->out[0])))
    return fail(r, GROUP_FAIL_SHAPE, "it is no matmul, pointwise nodes, softmax, pointwise "
                "nodes, matmul and maybe a transpose");
  p->scores = m1;
  p->softmax = sm;
  p->values = m2;
  r->role[member(r, m1)] = ROLE_SCORES;
  r->role[s] = ROLE_SOFTMAX;
  r->role[member(r, m2)] = ROLE_VALUES;
  if (root != m2)
    r->role[p->n - 1] = ROLE_TRANSPOSE;
  if (operand(r, m1->in[0], ROLE_Q, &p->q, "queries") ||
      operand(r, m1->in[1], ROLE_K, &p->k, "keys") ||
      operand(r, m2->in[1], ROLE_V, &p->v, "values"))
    return -1;
  /* the pre and post nodes: the pointwise members off the operands */
  for (int i = 0; i < p->n; i++)
    if (r->role[i] == ROLE_NONE)
      r->role[i] = i < s ? ROLE_PRE : ROLE_POST;
  if (!(p->pre = with_role(r, ROLE_PRE, &p->npre)) ||
      !(p->post = with_role(r, ROLE_POST, &p->npost)))
    return oom(r);
  if ((p->npre && p->pre[p->npre - 1]->out[0] != sm->in[0]) ||
      (!p->npre && sm->in[0] != m1->out[0]) ||
      (p->npost && p->post[p->npost - 1]->out[0] != m2->in[0]) ||
      (!p->npost && m2->in[0] != sm->out[0]))
    return fail(r, GROUP_FAIL_SHAPE, "the nodes around the softmax do not lead from the "
                "first matmul to the second");
  int next;
  if (chain(r, p->pre, p->npre, ROLE_PRE, m1, sm->in[0], &next) ||
      chain(r, p->post, p->npost, ROLE_POST, sm, m2->in[0], &next))
    return -1;
  /* the sizes the kernel takes */
  const Value *o = m2->out[0], *vv = m2->in[1];
  const Shape *os = &o->type.shape, *vs = &vv->type.shape, *qs = &m1->in[0]->type.shape;
  int64_t sk = sc->type.shape.dims[rank - 1].n, d = qs->dims[qs->rank - 1].n;
  int64_t dv = vs->rank >= 2 ? vs->dims[vs->rank - 1].n : 0;
  if (m1->in[0]->type.dtype != sc->type.dtype || vv->type.dtype != sc->type.dtype ||
      vv == m2->in[0] || os->rank != rank || !shape_is_static(os) || vs->rank < 2 ||
      m1->in[1]->type.shape.rank < 2)
    return fail(r, GROUP_FAIL_SHAPE, "its matmuls' types and ranks are no attention's");
  for (int i = 0; i < rank - 2; i++)
    if (os->dims[i].n != sc->type.shape.dims[i].n)
      return fail(r, GROUP_FAIL_SHAPE, "the values broadcast the batch wider than the scores");
  if (d < 1 || dv < 1 || (r->lim && (d > r->lim->head || dv > r->lim->head || sk > r->lim->keys)))
    return fail(r, GROUP_FAIL_SIZE, "heads of %lld and %lld, %lld keys; the attention kernel "
                "takes heads of 1 to %d, at most %d keys", (long long)d, (long long)dv,
                (long long)sk, r->lim ? r->lim->head : 0, r->lim ? r->lim->keys : 0);
  return 0;
}

/* The single element of integer constant v, if it is one. */
static bool const_index(const Value *v, int64_t *out) {
  if (!v || v->kind != VK_CONST || !v->data || tensor_numel(v->data) != 1 ||
      !dtype_is_int(v->data->dtype))
    return false;
  *out = dtype_load_i64(v->data->dtype, v->data->data);
  return true;
}

bool group_remap_node(const Node *n) {
  if (n->nin < 1 || !n->in[0] || !shape_is_static(&n->in[0]->type.shape))
    return false;
  for (int k = 0; k < n->nout; k++)
    if (!shape_is_static(&n->out[k]->type.shape))
      return false;
  switch (n->op) {
  case OP_TRANSPOSE: case OP_RESHAPE: case OP_FLATTEN: case OP_SQUEEZE: case OP_UNSQUEEZE:
  case OP_IDENTITY: case OP_SLICE: case OP_SPLIT: case OP_EXPAND:
    return n->op == OP_SPLIT || n->nout == 1;
  case OP_CONCAT:
    for (int k = 1; k < n->nin; k++)
      if (!n->in[k] || !shape_is_static(&n->in[k]->type.shape))
        return false;
    return n->nout == 1;
  case OP_GATHER: {
    /* one constant index in range: the output is the input at one position of the axis */
    int64_t idx, axis = attr_int(n, "axis"), rank = n->in[0]->type.shape.rank;
    if (n->nout != 1 || !const_index(n->in[1], &idx) || n->in[1]->type.shape.rank > 1)
      return false;
    if (axis < 0)
      axis += rank;
    if (axis < 0 || axis >= rank)
      return false;
    int64_t dim = n->in[0]->type.shape.dims[axis].n;
    return idx >= -dim && idx < dim;
  }
  default:
    return false;
  }
}

/* Whether input k of n is data a loop group reads (a gather's constant index is no
 * read: the kernel has it as a literal). */
static bool loop_reads(const Node *n, int k) { return !(n->op == OP_GATHER && k == 1); }

static int plan_loop(Rec *r) {
  GroupPlan *p = r->p;
  for (int i = 0; i < p->n; i++) {
    const Node *n = p->node[i];
    r->role[i] = ROLE_EPILOGUE;
    if (!pointwise(n) && !group_remap_node(n))
      return fail(r, GROUP_FAIL_SHAPE, "node %d (%s) is neither pointwise nor a remapping of "
                  "indices of static shapes", n->id, op_info[n->op].name);
  }
  if (p->root->nout != 1)
    return fail(r, GROUP_FAIL_SHAPE, "its root, node %d (%s), has %d outputs; a loop stores "
                "one", p->root->id, op_info[p->root->op].name, p->root->nout);
  if (r->lim && p->n > r->lim->nodes)
    return fail(r, GROUP_FAIL_NODES, "%d nodes; a kernel computes at most %d", p->n,
                r->lim->nodes);
  if (!(p->epilogue = with_role(r, ROLE_EPILOGUE, &p->nepilogue)))
    return oom(r);
  int total = 0;
  for (int i = 0; i < p->n; i++)
    total += p->node[i]->nin;
  const Value **ext = take(r, sizeof *ext * (size_t)(total + 1));
  if (!ext)
    return oom(r);
  int ne = 0;
  for (int i = 0; i < p->n; i++)
    for (int k = 0; k < p->node[i]->nin; k++) {
      const Value *v = p->node[i]->in[k];
      if (v && loop_reads(p->node[i], k) && maker(r, v) < 0)
        ext[ne++] = v;
    }
  if ((ne = distinct(r, ext, ne)) < 0)
    return oom(r);
  if (r->lim && ne > r->lim->inputs)
    return fail(r, GROUP_FAIL_INPUTS, "it reads %d values from outside; a kernel takes at "
                "most %d", ne, r->lim->inputs);
  p->nepilogue_in = ne;
  return 0;
}

GroupKind group_guess_kind(const Node *const *node, int n) {
  int mm = 0, sm = 0, conv = 0, cat = 0;
  for (int i = 0; i < n; i++) {
    mm += node[i]->op == OP_MATMUL;
    sm += node[i]->op == OP_SOFTMAX;
    conv += node[i]->op == OP_CONV;
    cat += node[i]->op == OP_CONCAT;
  }
  if (mm == 2 && sm == 1)
    return GROUP_ATTENTION;
  if (mm)
    return GROUP_GEMM;
  if (conv)
    return GROUP_CONV;
  if (cat)
    return GROUP_CONCAT;
  return n && pointwise(node[0]) ? GROUP_POINTWISE : GROUP_EPILOGUE;
}

static int plan_as(const Graph *g, const Users *u, const Node *const *node, int n,
                   GroupKind kind, const GroupLimits *lim, GroupPlan *p, char *why,
                   size_t nwhy) {
  *p = (GroupPlan){.node = node, .n = n};
  Rec r = {.g = g, .u = u, .lim = lim, .p = p, .why = why, .nwhy = nwhy};
  if (why && nwhy)
    why[0] = 0;
  if (n < 1)
    return fail(&r, GROUP_FAIL_SHAPE, "it has no nodes");
  p->root = node[n - 1];
  if (p->root->nout < 1)
    return fail(&r, GROUP_FAIL_SHAPE, "its last node has no output");
  p->out = p->root->out[0];
  p->kind = kind ? kind : group_guess_kind(node, n);
  r.by_id = take(&r, sizeof *r.by_id * (size_t)n);
  r.role = take(&r, (size_t)n);
  if (!r.by_id || !r.role)
    return oom(&r);
  for (int i = 0; i < n; i++)
    r.by_id[i] = (IdAt){node[i]->id, i};
  qsort(r.by_id, (size_t)n, sizeof *r.by_id, by_id);
  int rc;
  switch (p->kind) {
  case GROUP_POINTWISE: rc = plan_pointwise(&r); break;
  case GROUP_EPILOGUE: rc = plan_epilogue(&r); break;
  case GROUP_CONV: rc = plan_conv(&r); break;
  case GROUP_GEMM: rc = plan_gemm(&r); break;
  case GROUP_CONCAT: rc = plan_concat(&r); break;
  case GROUP_ATTENTION: rc = plan_attention(&r); break;
  case GROUP_LOOP: rc = plan_loop(&r); break;
  default: rc = fail(&r, GROUP_FAIL_SHAPE, "it has no kind"); break;
  }
  if (rc)
    return -1;
  /* what it writes: the root's output, and an anchor's that is read outside when the
   * anchor leads (an epilogue's kernel stores both); no other value leaves */
  bool may_side = p->anchor && p->anchor == node[0] &&
                  (p->kind == GROUP_EPILOGUE || p->kind == GROUP_CONV || p->kind == GROUP_CONCAT);
  for (int i = 0; i + 1 < n; i++)
    for (int k = 0; k < node[i]->nout; k++) {
      const Value *v = node[i]->out[k];
      if (read_inside(&r, v))
        continue;
      if (may_side && i == 0 && k == 0) {
        p->side = v;
        continue;
      }
      return fail(&r, GROUP_FAIL_SHAPE, "%%%s (node %d) is read outside the group; a %s "
                  "group writes only %s", v->name, node[i]->id, group_kind_name(p->kind),
                  may_side ? "its root's output and its anchor's" : "its root's output");
    }
  /* what it reads */
  int total = 0;
  for (int i = 0; i < n; i++)
    total += node[i]->nin;
  if (!(p->in = take(&r, sizeof *p->in * (size_t)(total + 1))))
    return oom(&r);
  for (int i = 0; i < n; i++)
    for (int k = 0; k < node[i]->nin; k++)
      if (node[i]->in[k] && maker(&r, node[i]->in[k]) < 0)
        p->in[p->nin++] = node[i]->in[k];
  if ((p->nin = distinct(&r, p->in, p->nin)) < 0)
    return oom(&r);
  return 0;
}

/* A group of pointwise and remapping nodes whose guessed kind has no plan of that shape
 * (a transpose that is no epilogue's anchor, a concat whose inputs come through more
 * than views) may still be a loop. Where it is none either, the guess says why not. */
int group_plan(const Graph *g, const Users *u, const Node *const *node, int n, GroupKind kind,
               const GroupLimits *lim, GroupPlan *p, char *why, size_t nwhy) {
  if (!plan_as(g, u, node, n, kind, lim, p, why, nwhy) || kind || p->kind == GROUP_LOOP ||
      p->fail != GROUP_FAIL_SHAPE)
    return p->fail ? -1 : 0;
  GroupKind guess = p->kind;
  bool loop = n > 0;
  for (int i = 0; i < n && loop; i++)
    loop = pointwise(node[i]) || group_remap_node(node[i]);
  if (!loop)
    return -1;
  group_plan_free(p);
  if (!plan_as(g, u, node, n, GROUP_LOOP, lim, p, NULL, 0))
    return 0;
  group_plan_free(p);
  plan_as(g, u, node, n, guess, lim, p, why, nwhy);
  return -1;
}
