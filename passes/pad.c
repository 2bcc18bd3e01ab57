/* pad.c: GEMM dims padded to tensor-core multiples.
 *
 * Tensor cores read 16 bytes at a time: a GEMM whose leading dims are no multiple of 8
 * 16-bit elements (4 for TF32) runs on cuBLASLt's slower kernels for unaligned data. A
 * linear layer's output width N is its weights' leading dim and its output's, so a
 * linear layer of N not such a multiple (GPT-2's vocabulary of 50257 tokens) gets
 * weights padded with zero columns to N', made here once:
 *
 *   y = matmul(x, w) [.., N]   ->   y = slice(matmul(x, w') [.., N'])
 *
 * When the output feeds the next linear layer through pointwise nodes whose other
 * operands are constants along the last dim (a bias, padded with zeros too) or single
 * elements, each the one user of the one before, the output stays padded: those nodes
 * compute on it padded and the next matmul reads it against weights padded with zero
 * rows; no slice is left, the padded columns meet only zeros (the nodes between must
 * keep them finite). Otherwise the slice comes right after the GEMM and fuse makes it
 * the anchor of the pointwise nodes after it (a bias add, the cast of a lowered model's
 * output): it takes the place of their kernel.
 *
 * Padding pays where the GEMM is large: at least PAD_MIN_WEIGHTS weights. K is padded
 * only with such an N before it; an odd K of a model's own input would need a copy. */
#include "passes/passes-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PAD_MIN_WEIGHTS = 1 << 16 };

/* The multiple that a GEMM's dims want: 8 for 16-bit data, 16 for the bf16 GEMMs that
 * quantize will make fp8, 4 for f32 on TF32 tensor cores, 0 where padding buys nothing
 * (plain f32, f64, integers). */
static int64_t tc_multiple(const Node *m, Precision p) {
  DType t = m->in[0]->type.dtype;
  if (t == DT_BF16 || t == DT_F16)
    return p == PRECISION_FP8 ? 16 : 8;
  return t == DT_F32 && attr_int(m, "tf32") ? 4 : 0;
}

static int64_t round_up(int64_t n, int64_t k) { return (n + k - 1) / k * k; }

typedef struct Padder {
  Graph *g;
  PassContext *ctx;
  Edit e;
  Made made[IR_MAX_RANK]; /* by the dim padded */
  int gemms;           /* linear layers padded */
  int kept;            /* of them, the ones whose consumer took the padded value */
  int64_t weight_bytes, value_bytes;
} Padder;

/* Constant c with its dim `axis` grown to `to`, the new elements zero, as a new constant
 * named <c>.pad (the one made before, when c was padded so already). weight_bytes grows
 * by the bytes added. */
static Value *padded_const(Padder *pd, const Value *c, int axis, int64_t to) {
  Graph *g = pd->g;
  Value *made = pass_made_get(&pd->made[axis], c);
  if (made && made->type.shape.dims[axis].n == to)
    return made;
  const Tensor *t = c->data;
  int64_t dims[IR_MAX_RANK], outer = 1, inner = 1;
  for (int j = 0; j < t->rank; j++) {
    dims[j] = t->dims[j];
    outer *= j < axis ? t->dims[j] : 1;
    inner *= j > axis ? t->dims[j] : 1;
  }
  dims[axis] = to;
  Tensor *p = tensor_in_arena(g->arena, t->dtype, t->rank, dims);
  size_t es = dtype_size(t->dtype), from = (size_t)(t->dims[axis] * inner) * es,
         row = (size_t)(to * inner) * es;
  memset(p->data, 0, tensor_nbytes(p));
  for (int64_t o = 0; o < outer; o++)
    memcpy((char *)p->data + (size_t)o * row, (const char *)t->data + (size_t)o * from, from);
  pd->weight_bytes += (int64_t)(tensor_nbytes(p) - tensor_nbytes(t));
  return pass_made_put(&pd->made[axis], c, pass_add_const(g, c->name, "pad", p));
}

/* Pointwise ops that keep finite inputs finite: the padded columns they compute on
 * (zeros, a bias's zeros added) stay finite, so zero weight rows cancel them. */
static bool keeps_finite(Op op) {
  switch (op) {
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_RELU: case OP_GELU: case OP_TANH:
  case OP_SIGMOID: case OP_ERF: case OP_NEG: case OP_CAST: case OP_CLIP: case OP_MAX:
  case OP_MIN: case OP_LEAKY_RELU: case OP_HARD_SIGMOID: case OP_HARD_SWISH:
    return true;
  default:
    return false;
  }
}

/* Whether pointwise node u, the one user of v, can compute on v padded: of v's shape,
 * its other operands single elements or constants along the last dim. */
static bool pads_through(const Node *u, const Value *v) {
  if (!(op_info[u->op].flags & OPF_POINTWISE) || u->nout != 1 || u->nin > 8 ||
      !pass_same_shape(&u->out[0]->type.shape, &v->type.shape))
    return false;
  for (int k = 0; k < u->nin; k++) {
    const Value *o = u->in[k];
    if (o && o != v && !pass_single_element(o) &&
        !(o->kind == VK_CONST && pass_along_last(o, v)))
      return false;
  }
  return true;
}

/* The linear layer that reads the output of m through the pointwise chain after it,
 * each node keeping padded columns finite (so zero weight rows cancel them), or NULL.
 * *chain gets the chain's nodes, at most 8. */
static Node *next_gemm(Edit *e, const Node *m, Node **chain, int *len) {
  const Value *v = m->out[0];
  Node *u;
  *len = 0;
  while ((u = pass_edit_sole_user(e, v)) && *len < 8 && pads_through(u, v)) {
    if (!keeps_finite(u->op))
      return NULL;
    chain[(*len)++] = u;
    v = u->out[0];
  }
  bool gemm = u && pass_linear_layer(u) && u->in[0] == v && u->in[1] != v;
  return gemm ? u : NULL;
}

/* Pads the linear layer m (weights [K, N], N to n2); see the file's comment. */
static int pad_gemm(Padder *p, Node *m, int64_t n2) {
  int64_t n = m->in[1]->type.shape.dims[1].n;
  Node *chain[8];
  int len;
  Node *next = next_gemm(&p->e, m, chain, &len);
  Value *in[8] = {m->in[0], padded_const(p, m->in[1], 1, n2)};
  Value *wide = pass_edit_insert_before(&p->e, m, OP_MATMUL, in, 2, m->attrs, m->nattr,
                                        m->out[0]->name, "pad", p->ctx->diag);
  if (!wide)
    return -1;
  int64_t rows = shape_numel(&wide->type.shape) / n2;
  p->gemms++;
  p->value_bytes += rows * (n2 - n) * (int64_t)dtype_size(wide->type.dtype);
  if (!next) {
    /* the true width right away: the nodes after it (a bias add, the cast of an output)
     * become the slice's epilogue in fuse */
    int64_t start = 0, end = n, axis = wide->type.shape.rank - 1;
    Attr a[3] = {attr_make_ints("starts", &start, 1), attr_make_ints("ends", &end, 1),
                 attr_make_ints("axes", &axis, 1)};
    pass_edit_rewrite(&p->e, m, OP_SLICE, &wide, 1, a, 3);
    return 0;
  }
  /* the chain on the padded value, and the next linear layer reading it against zero
   * weight rows */
  const Value *v = m->out[0];
  for (int c = 0; c < len; c++) {
    Node *u = chain[c];
    for (int k = 0; k < u->nin; k++) {
      Value *o = u->in[k];
      in[k] = o == v ? wide
              : o && !pass_single_element(o) ? padded_const(p, o, o->type.shape.rank - 1, n2)
                                             : o;
    }
    v = u->out[0];
    if (!(wide = pass_edit_insert_before(&p->e, u, u->op, in, u->nin, u->attrs, u->nattr,
                                         v->name, "pad", p->ctx->diag)))
      return -1;
    p->value_bytes += rows * (n2 - n) * (int64_t)dtype_size(wide->type.dtype);
  }
  Value *ins[2] = {wide, padded_const(p, next->in[1], 0, n2)};
  pass_edit_rewrite(&p->e, next, OP_MATMUL, ins, 2, next->attrs, next->nattr);
  p->kept++;
  return 0;
}

static int run_pad(Graph *g, PassContext *ctx) {
  Padder p = {.g = g, .ctx = ctx};
  /* the matmuls as they are now: padding adds nodes (placed when the edit ends) and
   * leaves the old ones to dce */
  Node **mms = malloc(sizeof *mms * (size_t)(g->nnodes + 1));
  int nmm = 0, rc = 0;
  if (!mms)
    return diag_error(ctx->diag, g->loc, "pad: out of memory");
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->op == OP_MATMUL)
      mms[nmm++] = g->nodes[i];
  pass_edit_begin(&p.e, g);
  for (int i = 0; i < nmm && !rc; i++) {
    Node *m = mms[i];
    int64_t mult;
    if (!pass_linear_layer(m) || m->in[0]->type.shape.rank < 2 ||
        !shape_is_static(&m->in[0]->type.shape) || !(mult = tc_multiple(m, ctx->precision)))
      continue;
    const Tensor *w = m->in[1]->data;
    int64_t k = w->dims[0], n = w->dims[1];
    if (n % mult == 0 || k % mult || k * n < PAD_MIN_WEIGHTS)
      continue;
    rc = pad_gemm(&p, m, round_up(n, mult));
  }
  pass_edit_end(&p.e);
  free(mms);
  for (int a = 0; a < IR_MAX_RANK; a++)
    pass_made_free(&p.made[a]);
  if (rc)
    return -1;
  if (!p.gemms)
    return 0;
  if (pass_dce.run(g, ctx))
    return -1;
  ctx->changes += p.gemms;
  snprintf(ctx->note, sizeof ctx->note, "%d GEMMs padded to tensor-core widths (%d read on "
           "padded by the next GEMM); %lld bytes padded: %lld of weights, %lld of values",
           p.gemms, p.kept, (long long)(p.weight_bytes + p.value_bytes),
           (long long)p.weight_bytes, (long long)p.value_bytes);
  return 0;
}

const Pass pass_pad = {
    .name = "pad",
    .summary = "linear layers whose width is no multiple of 8 (16-bit) or 4 (tf32) get zero-"
               "padded weights; their outputs stay padded until a node needs the true shape",
    .run = run_pad,
};
