/* layout.c: convolution networks in channels last (NHWC).
 *
 * A convolution runs as an implicit GEMM on tensor cores (codegen/nn.c); with its
 * channels as the innermost dim, the taps of one pixel are contiguous and a thread loads
 * 16 bytes of channels at once, and a 1x1 convolution is a plain GEMM. So every f32,
 * bf16 and f16 conv and pool over [N, C, spatial...] becomes its channels_last twin
 * between two transposes:
 *
 *   y = conv(x, w)   ->   y = transpose(conv(transpose(x), w') {channels_last = 1})
 *
 * w' = w with its channels last, a constant made here once. Then the transposes move
 * towards the graph's outputs: a pointwise node whose inputs are all such transposes of
 * the same perm (or single elements, which any perm leaves alone, or constants of one
 * value per channel, a batch norm's scale and shift, which become the [C] that
 * broadcasts along channels last) computes on their sources instead, and its result is
 * transposed; a concat along the channels of such transposes alone (Inception's
 * branches) concatenates their sources along the last axis, and is transposed. A
 * transpose of a transpose is one transpose, or nothing when they cancel: between two convolutions (a ReLU, a residual
 * add between them) no transpose is left. What remains is at the graph's edges: the image
 * moved to channels last (read by the first convolution's kernel through strides, see
 * fuse's conv_prologues) and a transpose back where a value leaves the convolutional
 * part; a transpose that only moves dims of size 1 (after a global pool) is a reshape.
 * Then the 1x1 convolutions whose epilogue cuBLASLt applies become matmuls, at every
 * precision and size: codegen times its GEMM kernels (K split or not) against cuBLASLt's
 * for each, at create. (An f32 rule that kept those of at most 1024 pixels convolutions
 * came from before the GEMM kernels; measured again, the matmuls are 7 to 28% faster on
 * the zoo's f32 CNNs at batch 1, docs/perf.md.)
 * A patch convolution (kernel = stride, ViT's and ConvNeXt's stems) on the image becomes
 * a GEMM too, over its patches: one transpose of the image (patch_conv).
 * f64 graphs keep their layout: their convolutions are direct kernels either way.
 *
 * Last, every f32 linear layer of f32 accuracy gets its weights stored [N, K]
 * (transpose_b = 1; the 1x1 convolutions' as stored): codegen runs those on its own GEMM
 * on tensor cores (3xTF32, codegen/gemm.c), which reads both operands along K. */
#include "passes/passes-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the pass keeps while it runs: the uses and readers of values (Edit, while one is
 * open), and the constants it made from others (Made): a weight that several nodes read
 * (tied weights) is permuted once, not once per node. */
typedef struct Layout {
  Graph *g;
  PassContext *ctx;
  Edit e;
  Made nhwc, nk, gemm[2], chan;
} Layout;

/* the types whose convolutions run on tensor cores (their pools go along) */
static bool tensor_core(DType t) { return t == DT_F32 || t == DT_BF16 || t == DT_F16; }

static bool spatial_op(const Node *n) {
  switch (n->op) {
  case OP_CONV: case OP_MAX_POOL: case OP_AVERAGE_POOL: case OP_GLOBAL_AVERAGE_POOL:
  case OP_GLOBAL_MAX_POOL:
    return n->nout == 1 && n->in[0]->type.shape.rank >= 3 && tensor_core(n->out[0]->type.dtype) &&
           !attr_int(n, "channels_last");
  default:
    return false;
  }
}

/* Constant w with its dims in the order perm, as a new constant named <w>.<suffix> (the
 * one made before from w, when there is one in made). */
static Value *permuted_const(Graph *g, Made *made, const Value *w, const int64_t *perm,
                             const char *suffix) {
  if (pass_made_get(made, w))
    return pass_made_get(made, w);
  const Tensor *t = w->data;
  int64_t dims[IR_MAX_RANK];
  for (int j = 0; j < t->rank; j++)
    dims[j] = t->dims[perm[j]];
  Tensor *p = tensor_in_arena(g->arena, t->dtype, t->rank, dims);
  tensor_permute(t, perm, p);
  return pass_made_put(made, w, pass_add_const(g, w->name, suffix, p));
}

/* n (a spatial op) as transpose(its channels_last twin over transposed operands). */
static int to_channels_last(Layout *L, Node *n) {
  Graph *g = L->g;
  Value *x = n->in[0], *y = n->out[0];
  int r = x->type.shape.rank;
  int64_t last[IR_MAX_RANK], first[IR_MAX_RANK];
  channels_last_perms(r, first, last);
  Attr pl = attr_make_ints("perm", last, r), pf = attr_make_ints("perm", first, r);
  Value *in[3];
  in[0] = pass_edit_insert_before(&L->e, n, OP_TRANSPOSE, &x, 1, &pl, 1, x->name, "t",
                                  L->ctx->diag);
  if (!in[0])
    return -1;
  for (int k = 1; k < n->nin; k++)
    in[k] = n->in[k];
  if (n->op == OP_CONV) {
    Value *w = n->in[1];
    in[1] = w->kind == VK_CONST ? permuted_const(g, &L->nhwc, w, last, "nhwc")
                                : pass_edit_insert_before(&L->e, n, OP_TRANSPOSE, &w, 1, &pl, 1,
                                                          w->name, "nhwc", L->ctx->diag);
    if (!in[1])
      return -1;
  }
  Attr attrs[16];
  int na = 0;
  for (int k = 0; k < n->nattr && na < 15; k++)
    attrs[na++] = n->attrs[k];
  attrs[na++] = attr_make_int("channels_last", 1);
  Value *yl = pass_edit_insert_before(&L->e, n, n->op, in, n->nin, attrs, na, y->name, "nhwc",
                                      L->ctx->diag);
  if (!yl)
    return -1;
  pass_edit_rewrite(&L->e, n, OP_TRANSPOSE, &yl, 1, &pf, 1);
  return 0;
}

static bool is_perm(const Node *n, const int64_t *p, int r) {
  int len;
  const int64_t *q = attr_ints(n, "perm", &len);
  if (n->op != OP_TRANSPOSE || !q || len != r)
    return false;
  for (int j = 0; j < r; j++)
    if (q[j] != p[j])
      return false;
  return true;
}

/* Whether constant v holds one value per channel of a channels-first value of rank r
 * (a batch norm's scale and shift, fold_affine's): its dims aligned right are 1 but dim
 * 1's, which is more. */
static bool channel_const(const Value *v, int r) {
  const Shape *s = &v->type.shape;
  if (v->kind != VK_CONST || !v->data || s->rank > r || s->rank < r - 1)
    return false;
  for (int i = 0; i < s->rank; i++) {
    int j = r - s->rank + i;
    if (s->dims[i].sym || (j != 1 && s->dims[i].n != 1) || (j == 1 && s->dims[i].n < 2))
      return false;
  }
  return true;
}

/* Channel constant v as the [C] that broadcasts along channels last (made once). */
static Value *channel_last_const(Layout *L, const Value *v) {
  if (pass_made_get(&L->chan, v))
    return pass_made_get(&L->chan, v);
  int64_t c = tensor_numel(v->data);
  Tensor *t = tensor_in_arena(L->g->arena, v->data->dtype, 1, &c);
  memcpy(t->data, v->data->data, tensor_nbytes(t));
  return pass_made_put(&L->chan, v, pass_add_const(L->g, v->name, "nhwc", t));
}

/* Whether v, of rank r, holds its elements in the same order in channels last: its dims
 * other than 1 keep their order under the perm last (an SE block's scale [N, C, 1, 1]
 * is [N, 1, 1, C] in channels last: a reshape, no copy). */
static bool order_kept(const Value *v, const int64_t *last, int r) {
  const Shape *s = &v->type.shape;
  int64_t prev = -1;
  if (s->rank != r)
    return false;
  for (int j = 0; j < r; j++) {
    const Dim *d = &s->dims[last[j]];
    if (!d->sym && d->n == 1)
      continue;
    if (last[j] < prev)
      return false;
    prev = last[j];
  }
  return true;
}

/* A pointwise node over transposes back to channels first (and single elements,
 * constants of one value per channel, and values whose order channels last keeps)
 * computes on their sources; its result is transposed instead. */
/* A concat of values that are all transposes back to channels first (Inception's
 * branches, each a convolution's output in channels last) as the transpose of the concat
 * of their sources along the axis that perm moved: the transposes after it then cancel
 * those of the convolutions that read it, which read the channels-last concat directly. */
static int sink_concat(Layout *L, Node *n, bool *changed) {
  int r = n->out[0]->type.shape.rank;
  int64_t first[IR_MAX_RANK], last[IR_MAX_RANK];
  if (r < 3 || n->nout != 1 || n->nin < 1)
    return 0;
  channels_last_perms(r, first, last);
  Value **in = arena_alloc(L->g->arena, sizeof *in * (size_t)n->nin);
  for (int k = 0; k < n->nin; k++) {
    Value *v = n->in[k];
    if (!v || v->kind != VK_NODE || v->type.shape.rank != r || !is_perm(v->def, first, r))
      return 0;
    in[k] = v->def->in[0];
  }
  int64_t axis = attr_int(n, "axis");
  axis = axis < 0 ? axis + r : axis;
  if (axis < 0 || axis >= r)
    return 0;
  Attr a = attr_make_int("axis", first[axis]);
  Value *yl = pass_edit_insert_before(&L->e, n, OP_CONCAT, in, n->nin, &a, 1, n->out[0]->name,
                                      "nhwc", L->ctx->diag);
  if (!yl)
    return -1;
  Attr pf = attr_make_ints("perm", first, r);
  pass_edit_rewrite(&L->e, n, OP_TRANSPOSE, &yl, 1, &pf, 1);
  *changed = true;
  return 0;
}

static int sink_through(Layout *L, Node *n, bool *changed) {
  if (n->op == OP_CONCAT)
    return sink_concat(L, n, changed);
  if (!(op_info[n->op].flags & OPF_POINTWISE) || n->nout != 1)
    return 0;
  int r = n->out[0]->type.shape.rank, moved = 0;
  int64_t first[IR_MAX_RANK], last[IR_MAX_RANK];
  channels_last_perms(r, first, last);
  Value *in[8];
  bool reorder[8] = {false};
  if (r < 3 || n->nin > 8)
    return 0;
  for (int k = 0; k < n->nin; k++) {
    Value *v = n->in[k];
    in[k] = v;
    if (!v)
      continue;
    if (v->kind == VK_NODE && v->type.shape.rank == r && is_perm(v->def, first, r)) {
      in[k] = v->def->in[0];
      moved++;
    } else if (channel_const(v, r)) {
      in[k] = NULL; /* made below, once the node is known to move */
    } else if (pass_single_element(v)) {
      continue;
    } else if (order_kept(v, last, r)) {
      reorder[k] = true; /* transposed below: fold_transpose makes it a reshape */
    } else {
      return 0;
    }
  }
  if (!moved)
    return 0;
  Attr pl = attr_make_ints("perm", last, r);
  for (int k = 0; k < n->nin; k++) {
    if (n->in[k] && !in[k])
      in[k] = channel_last_const(L, n->in[k]);
    if (reorder[k] && !(in[k] = pass_edit_insert_before(&L->e, n, OP_TRANSPOSE, &n->in[k], 1,
                                                         &pl, 1, n->in[k]->name, "nhwc",
                                                         L->ctx->diag)))
      return -1;
  }
  Value *yl = pass_edit_insert_before(&L->e, n, n->op, in, n->nin, n->attrs, n->nattr,
                                      n->out[0]->name, "nhwc", L->ctx->diag);
  if (!yl)
    return -1;
  Attr pf = attr_make_ints("perm", first, r);
  pass_edit_rewrite(&L->e, n, OP_TRANSPOSE, &yl, 1, &pf, 1);
  *changed = true;
  return 0;
}

/* transpose(transpose(u)) as one transpose of u, or u itself when they cancel; a
 * transpose that keeps the order of the dims that are not 1 as a reshape. */
static void fold_transpose(Layout *L, Node *n, bool *changed) {
  int r = n->out[0]->type.shape.rank, len, ilen;
  const int64_t *p = attr_ints(n, "perm", &len);
  if (n->op != OP_TRANSPOSE || !p || len != r)
    return;
  Value *v = n->in[0];
  const int64_t *q = v->kind == VK_NODE && v->def->op == OP_TRANSPOSE
                         ? attr_ints(v->def, "perm", &ilen) : NULL;
  if (q && ilen == r) {
    int64_t c[IR_MAX_RANK];
    bool identity = true;
    for (int j = 0; j < r; j++) {
      c[j] = q[p[j]];
      identity = identity && c[j] == j;
    }
    if (identity) {
      pass_edit_replace_uses(&L->e, n->out[0], v->def->in[0]);
    } else {
      Attr a = attr_make_ints("perm", c, r);
      pass_edit_rewrite(&L->e, n, OP_TRANSPOSE, &v->def->in[0], 1, &a, 1);
    }
    *changed = true;
    return;
  }
  int64_t prev = -1, shape[IR_MAX_RANK];
  for (int j = 0; j < r; j++) {
    if (v->type.shape.dims[p[j]].n == 1 && !v->type.shape.dims[p[j]].sym)
      continue;
    if (p[j] < prev)
      return;
    prev = p[j];
  }
  if (!pass_reshape_attr(v, &n->out[0]->type, shape))
    return;
  Attr a = attr_make_ints("shape", shape, r);
  pass_edit_rewrite(&L->e, n, OP_RESHAPE, &v, 1, &a, 1);
  *changed = true;
}

/* Whether n is a channels-last convolution that is a plain GEMM: a 1x1 kernel, stride 1,
 * no padding, one group, its weights a constant. Its input [N, H, W, C] is then a matrix
 * of N*H*W rows of C, the output [N, H, W, M] one of rows of M. */
static bool gemm_conv(const Node *n) {
  if (n->op != OP_CONV || !attr_int(n, "channels_last") || attr_int(n, "group") != 1 ||
      n->in[1]->kind != VK_CONST || !shape_is_static(&n->in[0]->type.shape))
    return false;
  const Tensor *w = n->in[1]->data;
  for (int j = 1; j < w->rank - 1; j++)
    if (w->dims[j] != 1)
      return false;
  static const char *const ones[] = {"strides", "dilations"};
  for (int a = 0; a < 2; a++) {
    int len;
    const int64_t *v = attr_ints(n, ones[a], &len);
    for (int j = 0; v && j < len; j++)
      if (v[j] != 1)
        return false;
  }
  int len;
  const int64_t *pads = attr_ints(n, "pads", &len);
  for (int j = 0; pads && j < len; j++)
    if (pads[j])
      return false;
  return true;
}

static bool pointwise(const Node *n) { return op_info[n->op].flags & OPF_POINTWISE; }

/* Whether the GEMM convolution of output y pays as a GEMM: whether the pointwise nodes
 * after it are what cuBLASLt's epilogue applies, a residual add, then a ReLU, each
 * optional (the bias is the GEMM's own). A convolution kernel takes any pointwise chain
 * after it; a GEMM whose chain goes on (MobileNet's ReLU6 clip) would leave that chain a
 * kernel of its own: it stays a convolution. So does one whose input comes through a
 * transpose or a cast, which its kernel would read through (the image's). */
static bool gemm_epilogue_fits(Layout *L, const Value *y) {
  const Value *x = y->def->in[0];
  if (x->kind == VK_NODE && (x->def->op == OP_TRANSPOSE || x->def->op == OP_CAST))
    return false; /* the convolution's kernel reads it in place (fuse's conv_prologues) */
  Node *u = pass_edit_sole_user(&L->e, y);
  if (u && u->op == OP_ADD) {
    const Value *r = node_other_input(u, y);
    if (!r || r == y || r->type.dtype != y->type.dtype ||
        !pass_same_shape(&r->type.shape, &y->type.shape))
      return false;
    u = pass_edit_sole_user(&L->e, u->out[0]);
  }
  if (u && u->op == OP_RELU)
    u = pass_edit_sole_user(&L->e, u->out[0]);
  return !u || !pointwise(u);
}

/* Whether a GEMM of type t over K taps, tf32 its mark, wants its weights stored [N, K]
 * (transpose_b = 1): f32 at f32 accuracy, which codegen runs on its own GEMM on tensor
 * cores (3xTF32, codegen/gemm.c); it reads both operands along K, 16 bytes at a time (K a
 * multiple of 4). cuBLASLt's f32 GEMMs run on CUDA cores, and with few rows split K into
 * a second kernel. */
static bool weights_nk(DType t, bool tf32, int64_t K) {
  return t == DT_F32 && !tf32 && K > 0 && K % 4 == 0;
}

/* Whether n is a patch convolution read through the transpose that moved its input to
 * channels last (the image, at a network's edge: ViT's and ConvNeXt's stems): a kernel
 * as large as its stride, no padding or dilation, one group, constant weights, each
 * spatial dim a whole number of patches, the kernel larger than 1x1 (whose patches are
 * its input, read in place). Its implicit GEMM would read the source with the channels,
 * K's innermost taps, far apart: each tap a load of its own, neighbouring pixels a patch
 * apart. But its patches [N, OH, OW, KH * KW * C] are a permutation of its input, one
 * transpose of the source (with the cast before it, one kernel), and then it is a GEMM
 * of K = KH * KW * C over rows of whole patches. */
static bool patch_conv(const Node *n) {
  if (n->op != OP_CONV || !attr_int(n, "channels_last") || attr_int(n, "group") != 1 ||
      n->in[1]->kind != VK_CONST || !shape_is_static(&n->in[0]->type.shape))
    return false;
  const Value *x = n->in[0];
  const Tensor *w = n->in[1]->data;
  int r = x->type.shape.rank, k = r - 2;
  if (k < 1 || 2 + 2 * k > IR_MAX_RANK || x->kind != VK_NODE || x->def->op != OP_TRANSPOSE)
    return false;
  int64_t first[IR_MAX_RANK], last[IR_MAX_RANK];
  channels_last_perms(r, first, last);
  int len;
  const int64_t *perm = attr_ints(x->def, "perm", &len);
  if (!perm || len != r || memcmp(perm, last, (size_t)r * sizeof *perm))
    return false;
  int ls, lp, ld;
  const int64_t *st = attr_ints(n, "strides", &ls), *pads = attr_ints(n, "pads", &lp),
                *dil = attr_ints(n, "dilations", &ld);
  if (!st || ls != k)
    return false;
  bool window = false; /* a 1x1 kernel's patches are its input: its kernel reads them */
  for (int j = 0; j < k; j++) {
    int64_t kj = w->dims[1 + j], xj = x->type.shape.dims[1 + j].n;
    if (st[j] != kj || kj < 1 || xj % kj || (dil && ld == k && dil[j] != 1))
      return false;
    window = window || kj > 1;
  }
  if (!window)
    return false;
  for (int j = 0; pads && j < lp; j++)
    if (pads[j])
      return false;
  return true;
}

/* The patches of patch_conv n, [N, O1, ..., Ok, K1 * ... * Kk * C], from the transpose's
 * source [N, C, S1, ..., Sk]: split into [N, C, O1, K1, ..., Ok, Kk], the patch's dims
 * moved after the pixel's, then rows of K. NULL with the diagnostic set. */
static Value *patches(Layout *L, Node *n) {
  Value *src = n->in[0]->def->in[0];
  const Tensor *w = n->in[1]->data;
  const Shape *xs = &src->type.shape;
  int k = xs->rank - 2;
  int64_t split[IR_MAX_RANK], perm[IR_MAX_RANK], rows[IR_MAX_RANK], kk = xs->dims[1].n;
  split[0] = rows[0] = xs->dims[0].n;
  split[1] = kk;
  perm[0] = 0;
  perm[1 + 2 * k] = 1;
  for (int j = 0; j < k; j++) {
    int64_t kj = w->dims[1 + j], oj = xs->dims[2 + j].n / kj;
    split[2 + 2 * j] = rows[1 + j] = oj;
    split[3 + 2 * j] = kj;
    perm[1 + j] = 2 + 2 * j;     /* the pixel's dims, */
    perm[1 + k + j] = 3 + 2 * j; /* then the patch's, then the channels */
    kk *= kj;
  }
  rows[1 + k] = kk;
  Diag *d = L->ctx->diag;
  Attr a = attr_make_ints("shape", split, 2 + 2 * k);
  Value *v = pass_edit_insert_before(&L->e, n, OP_RESHAPE, &src, 1, &a, 1, n->out[0]->name,
                                     "patch", d);
  if (v) {
    a = attr_make_ints("perm", perm, 2 + 2 * k);
    v = pass_edit_insert_before(&L->e, n, OP_TRANSPOSE, &v, 1, &a, 1, n->out[0]->name,
                                "patches", d);
  }
  if (v) {
    a = attr_make_ints("shape", rows, 2 + k);
    v = pass_edit_insert_before(&L->e, n, OP_RESHAPE, &v, 1, &a, 1, n->out[0]->name, "rows", d);
  }
  return v;
}

/* A GEMM convolution as matmul(x, w^T) + bias: [N, H, W, C] @ [C, M], or with the
 * weights as stored, [M, C] (transpose_b = 1), where weights_nk wants them so; x its
 * input or, for a patch convolution, its patches [N, OH, OW, K] (w as stored is then
 * the [M, K] of K = KH * KW * C). The fuse pass gives the matmul its bias, residual and
 * ReLU as epilogues. */
static int conv_as_gemm(Layout *L, Node *n, Value *x) {
  Graph *g = L->g;
  const Tensor *w = n->in[1]->data;
  int64_t m = w->dims[0], c = tensor_numel(w) / (m ? m : 1), perm[2] = {1, 0};
  bool tf32 = attr_int(n, "tf32") != 0, nk = weights_nk(w->dtype, tf32, c);
  Value *wg = pass_made_get(&L->gemm[nk], n->in[1]);
  if (!wg) {
    Tensor rows = {.dtype = w->dtype, .rank = 2, .dims = {m, c}, .data = w->data};
    Tensor *t = tensor_in_arena(g->arena, w->dtype, 2, nk ? rows.dims : (int64_t[]){c, m});
    if (nk)
      tensor_permute(&rows, (int64_t[]){0, 1}, t); /* a copy */
    else
      tensor_permute(&rows, perm, t);
    wg = pass_made_put(&L->gemm[nk], n->in[1], pass_add_const(g, n->in[1]->name, "gemm", t));
  }
  Value *in[2] = {x, wg};
  Attr attrs[2];
  int na = 0;
  if (tf32)
    attrs[na++] = attr_make_int("tf32", 1);
  if (nk)
    attrs[na++] = attr_make_int("transpose_b", 1);
  if (n->nin < 3 || !n->in[2]) {
    pass_edit_rewrite(&L->e, n, OP_MATMUL, in, 2, attrs, na);
    return 0;
  }
  Value *bias = n->in[2];
  Value *mm = pass_edit_insert_before(&L->e, n, OP_MATMUL, in, 2, attrs, na, n->out[0]->name,
                                      "gemm", L->ctx->diag);
  if (!mm)
    return -1;
  Value *sum[2] = {mm, bias};
  pass_edit_rewrite(&L->e, n, OP_ADD, sum, 2, NULL, 0);
  return 0;
}

/* Whether n is an f32 linear layer of rows whose weights weights_nk wants as [N, K]. */
static bool f32_linear(const Node *n) {
  if (!pass_linear_layer(n) || n->out[0]->type.dtype != DT_F32 ||
      n->in[0]->type.shape.rank < 2)
    return false;
  const Tensor *w = n->in[1]->data;
  return weights_nk(n->in[0]->type.dtype, attr_int(n, "tf32") != 0, w->dims[0]) &&
         w->dims[1] > 0;
}

/* The f32 linear layers' weights as [N, K]; the count. */
static int f32_linears_nk(Layout *L) {
  static const int64_t swap[2] = {1, 0};
  Graph *g = L->g;
  int count = 0;
  for (int i = 0; i < g->nnodes; i++) {
    Node *n = g->nodes[i];
    if (!f32_linear(n))
      continue;
    n->in[1] = permuted_const(g, &L->nk, n->in[1], swap, "nk");
    node_set_attr(g, n, attr_make_int("transpose_b", 1));
    count++;
  }
  return count && pass_dce.run(g, L->ctx) ? -1 : count;
}

/* The convolutions and pools in channels last, the transposes between them cancelled, the
 * 1x1 convolutions as GEMMs; their counts and the transposes left in note. Each loop
 * looks at the nodes of its start, in order, through an edit: the nodes it adds go in
 * front of the node they were made for when it ends (the next round looks at them). */
static int channels_last(Layout *L, char *note, size_t size) {
  Graph *g = L->g;
  PassContext *ctx = L->ctx;
  int converted = 0, rc = 0;
  pass_edit_begin(&L->e, g);
  for (int i = 0; i < L->e.norig && !rc; i++) {
    Node *n = g->nodes[i];
    if (!spatial_op(n))
      continue;
    rc = to_channels_last(L, n);
    converted++;
  }
  pass_edit_end(&L->e);
  if (rc)
    return -1;
  if (!converted)
    return 0;
  bool changed = true;
  while (changed) {
    changed = false;
    pass_edit_begin(&L->e, g);
    for (int i = 0; i < L->e.norig && !rc; i++) {
      Node *n = g->nodes[i];
      rc = sink_through(L, n, &changed);
      if (!rc)
        fold_transpose(L, n, &changed);
    }
    pass_edit_end(&L->e);
    if (rc || (changed && pass_dce.run(g, ctx)))
      return -1;
  }
  int left = 0, gemms = 0, npatch = 0;
  pass_edit_begin(&L->e, g);
  for (int i = 0; i < L->e.norig && !rc; i++) {
    Node *n = g->nodes[i];
    left += n->op == OP_TRANSPOSE;
    if (gemm_conv(n) && gemm_epilogue_fits(L, n->out[0])) {
      rc = conv_as_gemm(L, n, n->in[0]);
      gemms++;
    } else if (patch_conv(n)) {
      Value *x = patches(L, n);
      rc = x ? conv_as_gemm(L, n, x) : -1;
      npatch++;
    }
  }
  pass_edit_end(&L->e);
  if (rc || (npatch && pass_dce.run(g, ctx))) /* the transposes the patches replaced */
    return -1;
  ctx->changes += converted;
  snprintf(note, size, "%d convolutions and pools in channels last, %d of them 1x1 "
           "convolutions and %d patch convolutions as GEMMs; %d transposes left; ",
           converted, gemms, npatch, left);
  return 0;
}

static int run_layout(Graph *g, PassContext *ctx) {
  char note[256] = "";
  Layout L = {.g = g, .ctx = ctx};
  int nk = channels_last(&L, note, sizeof note) ? -1 : f32_linears_nk(&L);
  pass_made_free(&L.nhwc), pass_made_free(&L.nk), pass_made_free(&L.gemm[0]);
  pass_made_free(&L.gemm[1]), pass_made_free(&L.chan);
  if (nk < 0)
    return -1;
  ctx->changes += nk;
  snprintf(ctx->note, sizeof ctx->note, "%s%d f32 linear layers' weights as [N, K]", note, nk);
  return 0;
}

const Pass pass_layout = {
    .name = "layout",
    .summary = "run convolutions and pools in channels last (NHWC), the transposes between "
               "them cancelled, 1x1 and patch convolutions as GEMMs; f32 linear layers' "
               "weights as [N, K]",
    .run = run_layout,
};
