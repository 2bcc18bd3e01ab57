/* fuzz_onnx.c: libFuzzer harness for the ONNX loader and everything a model meets after
 * it on the way to a model.so, short of NVRTC, in the compile pipeline's order
 * (compiler/build.h): load (shape inference and the verifier included), symbolic dims
 * bound, the default pass pipeline, codegen and the memory plan.
 *
 * The weights are capped through the loader's own option (FUZZ_MAX_WEIGHT_BYTES), so a
 * model asking for more is refused by the loader instead of being a legitimate large
 * allocation that libFuzzer would report. The input's size picks the precision the
 * passes lower to (fp32, tf32, bf16 or fp16), so one corpus reaches every lowering.
 *
 * Beyond "no crash, no hang, no leak": a refused model carries a message; a loaded model
 * verifies; every pass keeps it valid (a failing pass or verifier is gpucc's bug, not the
 * model's); and every buffer of the memory plan lies inside its region.
 *
 * First, what `gpucc inspect` and `gpucc run` read before any load: the parsed protobuf
 * (onnx_open_bytes) and its summary, whose op counts must add up to its nodes. */
#include "fuzz.h"

#include "compiler/build.h"
#include "frontends/frontends.h"
#include "passes/passes.h"

#define FUZZ_MAX_WEIGHT_BYTES (1 << 20)
#define FUZZ_DIM 2 /* every symbolic dim, for codegen */

/* Binds every symbolic dim of the inputs to FUZZ_DIM; -1 with d set when inference
 * refuses the bound graph. */
static int bind_dims(Graph *g, Diag *d) {
  const char *names[64];
  int64_t sizes[64];
  int n = 0;
  for (int i = 0; i < g->ninputs; i++) {
    const Shape *s = &g->inputs[i]->type.shape;
    for (int j = 0; j < s->rank; j++) {
      const char *sym = s->dims[j].sym;
      bool seen = !sym;
      for (int k = 0; k < n && !seen; k++)
        seen = !strcmp(names[k], sym);
      if (!seen && n < 64) {
        names[n] = sym;
        sizes[n++] = FUZZ_DIM;
      }
    }
  }
  return n ? codegen_bind_dims(g, names, sizes, n, d) : 0;
}

static void check_memplan(const Graph *g, const Program *p) {
  MemPlan mp;
  Diag d = {0};
  if (memplan_build(g, p, &mp, &d)) {
    FUZZ_CHECK_ERROR(d.msg);
    return;
  }
  for (int id = 0; id < mp.nslots; id++) {
    const MemSlot *s = &mp.slot[id];
    if (!s->v || (s->v->kind == VK_CONST && !mp.weights_used[s->root->id]))
      continue;
    uint64_t end = s->region == GPUCC_REGION_WEIGHTS ? mp.weights_bytes : mp.arena_bytes;
    FUZZ_CHECK(s->offset <= end && s->bytes <= end - s->offset,
               "%%%s: %llu bytes at %llu, outside its region of %llu bytes", s->v->name,
               (unsigned long long)s->bytes, (unsigned long long)s->offset,
               (unsigned long long)end);
  }
  void *weights;
  FUZZ_CHECK(!memplan_weights(g, &mp, &weights, &d), "memplan_weights: %s", d.msg);
  free(weights);
  memplan_free(&mp);
}

static void check_summary(const uint8_t *data, size_t size) {
  Diag d = {0};
  OnnxModel *m = onnx_open_bytes(data, size, "fuzz.onnx", NULL, &d);
  if (!m) {
    FUZZ_CHECK_ERROR(d.msg);
    return;
  }
  OnnxSummary s;
  FUZZ_CHECK(!onnx_summary(m, &s, &d), "onnx_summary: %s", d.msg);
  int64_t nodes = 0;
  for (int k = 0; k < s.nops; k++) {
    FUZZ_CHECK(s.ops[k].name && s.ops[k].count > 0, "op #%d: no name or no count", k);
    nodes += s.ops[k].count;
  }
  FUZZ_CHECK(nodes == s.nnodes, "the op counts add up to %lld, not the %d nodes",
             (long long)nodes, s.nnodes);
  for (int i = 0; i < s.ninputs + s.noutputs; i++) {
    const OnnxValueInfo *v = i < s.ninputs ? &s.inputs[i] : &s.outputs[i - s.ninputs];
    FUZZ_CHECK(v->name && v->type && v->type[0], "value #%d: no name or type", i);
  }
  onnx_summary_free(&s);
  onnx_close(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const Precision precisions[] = {PRECISION_FP32, PRECISION_TF32, PRECISION_BF16,
                                         PRECISION_FP16};
  check_summary(data, size);
  OnnxOptions opt = {.max_weight_bytes = FUZZ_MAX_WEIGHT_BYTES};
  Diag d = {0};
  Graph *g = onnx_load_bytes(data, size, "fuzz.onnx", &opt, &d);
  if (!g) {
    FUZZ_CHECK(d.failed, "onnx_load_bytes returned no graph and no error");
    FUZZ_CHECK_ERROR(d.msg);
    return 0;
  }
  FUZZ_CHECK(!d.failed, "onnx_load_bytes returned a graph and an error: %s", d.msg);
  FUZZ_CHECK(!ir_verify(g, &d), "the loaded graph does not verify: %s", d.msg);

  if (bind_dims(g, &d)) {
    FUZZ_CHECK_ERROR(d.msg);
  } else {
    /* The passes one at a time, as pass_run_pipeline runs them, so a failure names the
     * pass. */
    PassContext ctx = {.diag = &d, .precision = precisions[size % 4]};
    for (int i = 0; pass_default_pipeline[i]; i++) {
      const Pass *pass = pass_default_pipeline[i];
      FUZZ_CHECK(!pass->run(g, &ctx), "pass %s failed on a valid graph: %s", pass->name,
                 d.msg);
      FUZZ_CHECK(!ir_verify(g, &d), "the graph does not verify after pass %s: %s",
                 pass->name, d.msg);
    }
    Program *p = codegen_graph(g, NULL, &d);
    if (p) {
      check_memplan(g, p);
      program_free(p);
    } else {
      FUZZ_CHECK_ERROR(d.msg);
    }
  }
  graph_free(g);
  return 0;
}
