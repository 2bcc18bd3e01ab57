/* test_onnx.c: the ONNX frontend. Builds small ModelProtos with the protobuf-c structs
 * generated from frontends/onnx/onnx.proto, packs them to bytes, loads them with
 * onnx_load_bytes (or onnx_load for external data) and checks the graph, its values under
 * the reference executor, and every kind of bad input: each must fail with a clear
 * message and no crash under ASan/UBSan. */
#include "check.h"
#include "frontends/frontends.h"
#include "frontends/onnx/onnx-impl.h"
#include "onnx.pb-c.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- model building */

enum { MAXN = 16 };

/* A model under construction: fixed-size pools so tests need no frees. */
typedef struct M {
  Onnx__ModelProto model;
  Onnx__GraphProto graph;
  Onnx__OperatorSetIdProto opset, *opsets[1];
  Onnx__NodeProto nodes[MAXN], *pnodes[MAXN];
  Onnx__AttributeProto attrs[MAXN], *pattrs[MAXN][1];
  Onnx__TensorProto inits[MAXN], *pinits[MAXN];
  Onnx__ValueInfoProto vis[MAXN], *pins[MAXN], *pouts[MAXN];
  Onnx__TypeProto types[MAXN];
  Onnx__TypeProto__Tensor tts[MAXN];
  Onnx__TensorShapeProto shapes[MAXN];
  Onnx__TensorShapeProto__Dimension dims[MAXN][4], *pdims[MAXN][4];
  int nvi;
} M;

static void m_init(M *m, int64_t opset) {
  memset(m, 0, sizeof *m);
  onnx__model_proto__init(&m->model);
  onnx__graph_proto__init(&m->graph);
  onnx__operator_set_id_proto__init(&m->opset);
  m->opset.domain = "";
  m->opset.has_version = 1;
  m->opset.version = opset;
  m->opsets[0] = &m->opset;
  m->model.has_ir_version = 1;
  m->model.ir_version = 8;
  m->model.n_opset_import = 1;
  m->model.opset_import = m->opsets;
  m->model.graph = &m->graph;
  m->graph.name = "t";
  m->graph.node = m->pnodes;
  m->graph.initializer = m->pinits;
  m->graph.input = m->pins;
  m->graph.output = m->pouts;
}

/* A tensor value info; dims: >= 0 static, -1 symbolic "N". */
static Onnx__ValueInfoProto *m_vi(M *m, const char *name, int rank, const int64_t *d) {
  int k = m->nvi++;
  Onnx__ValueInfoProto *vi = &m->vis[k];
  onnx__value_info_proto__init(vi);
  onnx__type_proto__init(&m->types[k]);
  onnx__type_proto__tensor__init(&m->tts[k]);
  onnx__tensor_shape_proto__init(&m->shapes[k]);
  vi->name = (char *)name;
  vi->type = &m->types[k];
  m->types[k].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  m->types[k].tensor_type = &m->tts[k];
  m->tts[k].has_elem_type = 1;
  m->tts[k].elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  m->tts[k].shape = &m->shapes[k];
  m->shapes[k].n_dim = (size_t)rank;
  m->shapes[k].dim = m->pdims[k];
  for (int i = 0; i < rank; i++) {
    Onnx__TensorShapeProto__Dimension *dm = &m->dims[k][i];
    onnx__tensor_shape_proto__dimension__init(dm);
    if (d[i] >= 0) {
      dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      dm->dim_value = d[i];
    } else {
      dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      dm->dim_param = "N";
    }
    m->pdims[k][i] = dm;
  }
  return vi;
}

static void m_input(M *m, const char *name, int rank, const int64_t *d) {
  m->pins[m->graph.n_input++] = m_vi(m, name, rank, d);
}

static void m_output(M *m, const char *name) {
  m->pouts[m->graph.n_output++] = m_vi(m, name, 0, NULL);
}

/* A node with up to 3 inputs and 1 output ("" for none). */
static Onnx__NodeProto *m_node(M *m, const char *op, const char *name, char **in, int nin,
                               char **out, int nout) {
  size_t k = m->graph.n_node++;
  Onnx__NodeProto *n = &m->nodes[k];
  onnx__node_proto__init(n);
  n->op_type = (char *)op;
  n->name = (char *)name;
  n->input = in;
  n->n_input = (size_t)nin;
  n->output = out;
  n->n_output = (size_t)nout;
  m->pnodes[k] = n;
  return n;
}

static Onnx__AttributeProto *m_attr_int(M *m, Onnx__NodeProto *n, const char *name, int64_t v) {
  size_t k = (size_t)(n - m->nodes);
  Onnx__AttributeProto *a = &m->attrs[k];
  onnx__attribute_proto__init(a);
  a->name = (char *)name;
  a->has_type = 1;
  a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  a->has_i = 1;
  a->i = v;
  m->pattrs[k][0] = a;
  n->n_attribute = 1;
  n->attribute = m->pattrs[k];
  return a;
}

/* A float initializer with raw_data of nbytes bytes (data may hold fewer/more floats). */
static Onnx__TensorProto *m_init_f32(M *m, const char *name, int rank, const int64_t *dims,
                                     const float *data, size_t nbytes) {
  size_t k = m->graph.n_initializer++;
  Onnx__TensorProto *t = &m->inits[k];
  onnx__tensor_proto__init(t);
  t->name = (char *)name;
  t->n_dims = (size_t)rank;
  t->dims = (int64_t *)dims;
  t->has_data_type = 1;
  t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  t->has_raw_data = 1;
  t->raw_data.len = nbytes;
  t->raw_data.data = (uint8_t *)data;
  m->pinits[k] = t;
  return t;
}

static uint8_t *pack(const M *m, size_t *len) {
  *len = onnx__model_proto__get_packed_size(&m->model);
  uint8_t *buf = malloc(*len + 1);
  onnx__model_proto__pack(&m->model, buf);
  return buf;
}

static Graph *load_m(const M *m, const OnnxOptions *opt, Diag *d) {
  size_t len;
  uint8_t *buf = pack(m, &len);
  Graph *g = onnx_load_bytes(buf, len, "m.onnx", opt, d);
  free(buf);
  return g;
}

/* Loading must fail with a message containing `want`. */
static void expect_error(int line, const M *m, const OnnxOptions *opt, const char *want) {
  Diag d = {0};
  Graph *g = load_m(m, opt, &d);
  if (g || !strstr(d.msg, want)) {
    fprintf(stderr, "test_onnx.c:%d: expected an error with '%s', got: %s\n", line, want,
            g ? "a graph" : d.msg);
    failures++;
  }
  graph_free(g);
}
#define EXPECT_ERROR(m, opt, want) expect_error(__LINE__, m, opt, want)

/* ---------------------------------------------------------------- the tests */

static char *S_W[] = {"x", "w"}, *S_H[] = {"h"}, *S_HB[] = {"h", "b"},
            *S_Y[] = {"y"};
static const int64_t D23[] = {2, 3}, D3[] = {3}, DN2[] = {-1, 2};
static const float W[] = {1, 2, 3, 4, 5, 6, 7}, B[] = {0.5f, -1, 2};

/* y = relu(x @ w + b): x f32[N, 2] */
static void make_mlp(M *m) {
  m_init(m, 17);
  m_input(m, "x", 2, DN2);
  m_output(m, "y");
  m_init_f32(m, "w", 2, D23, W, 24);
  m_init_f32(m, "b", 1, D3, B, 12);
  m_node(m, "MatMul", "fc", S_W, 2, S_H, 1);
  static char *hb[] = {"hb"};
  m_node(m, "Add", "", S_HB, 2, hb, 1);
  m_node(m, "Relu", "act", hb, 1, S_Y, 1);
}

static void test_mlp(void) {
  M m;
  make_mlp(&m);
  Diag d = {0};
  Graph *g = load_m(&m, NULL, &d);
  CHECK(g);
  if (!g) {
    fprintf(stderr, "%s\n", d.msg);
    return;
  }
  CHECK(g->ninputs == 1 && g->nconsts == 2 && g->nnodes == 3 && g->noutputs == 1);
  CHECK(!strcmp(g->inputs[0]->type.shape.dims[0].sym, "N"));
  CHECK(!strcmp(g->nodes[0]->origin, "fc") && !strcmp(g->nodes[1]->origin, "Add#1"));
  CHECK(!strcmp(g->nodes[0]->loc.file, "m.onnx"));
  /* x = [[1, 0], [0, -1]]: x @ w = [[1, 2, 3], [-4, -5, -6]]; + b; relu */
  int64_t xd[2] = {2, 2};
  Tensor *x = tensor_new(DT_F32, 2, xd), *out[1] = {0};
  float xv[4] = {1, 0, 0, -1};
  memcpy(x->data, xv, sizeof xv);
  CHECK(ir_eval(g, &x, out, &d) == 0);
  float want[6] = {1.5f, 1, 5, 0, 0, 0};
  if (out[0]) {
    CHECK(out[0]->dims[0] == 2 && out[0]->dims[1] == 3);
    for (int i = 0; i < 6; i++)
      CHECK(fabsf(((float *)out[0]->data)[i] - want[i]) < 1e-6f);
  }
  tensor_free(x);
  tensor_free(out[0]);
  graph_free(g);

  /* --dim binds N at load */
  OnnxBinding dim = {"N", "4"};
  OnnxOptions opt = {.dims = &dim, .ndims = 1};
  g = load_m(&m, &opt, &d);
  CHECK(g && g->inputs[0]->type.shape.dims[0].n == 4 && !g->inputs[0]->type.shape.dims[0].sym);
  /* and says where N was: input 0, axis 0 */
  CHECK(g && g->nbound == 1 && !strcmp(g->bound[0].sym, "N") && g->bound[0].size == 4 &&
        g->bound[0].input == 0 && g->bound[0].axis == 0);
  graph_free(g);
}

static void test_gemm_clip(void) {
  /* y = clip(0.5 * x @ w^T + c, min = 0) at opset 13 (min as a constant input) */
  M m;
  m_init(&m, 13);
  static const int64_t d12[] = {1, 2}, d22[] = {2, 2}, d0[] = {0};
  static const float wv[] = {1, 2, 3, 4}, cv[] = {-1, 1}, zero[] = {0};
  m_input(&m, "x", 2, d12);
  m_output(&m, "y");
  m_init_f32(&m, "w", 2, d22, wv, 16);
  m_init_f32(&m, "c", 1, d12 + 1, cv, 8);
  m_init_f32(&m, "lo", 0, d0, zero, 4);
  static char *gin[] = {"x", "w", "c"}, *gout[] = {"g"}, *cin[] = {"g", "lo"};
  Onnx__NodeProto *n = m_node(&m, "Gemm", "gemm", gin, 3, gout, 1);
  Onnx__AttributeProto a[2], *pa[2] = {&a[0], &a[1]};
  onnx__attribute_proto__init(&a[0]);
  onnx__attribute_proto__init(&a[1]);
  a[0].name = "transB";
  a[0].has_type = 1;
  a[0].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  a[0].has_i = 1;
  a[0].i = 1;
  a[1].name = "alpha";
  a[1].has_type = 1;
  a[1].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
  a[1].has_f = 1;
  a[1].f = 0.5f;
  n->n_attribute = 2;
  n->attribute = pa;
  m_node(&m, "Clip", "clip", cin, 2, S_Y, 1);
  Diag d = {0};
  Graph *g = load_m(&m, NULL, &d);
  CHECK(g);
  if (!g) {
    fprintf(stderr, "%s\n", d.msg);
    return;
  }
  /* x = [1, 1]: x @ w^T = [3, 7]; * 0.5 = [1.5, 3.5]; + c = [0.5, 4.5]; clip >= 0 */
  int64_t xd[2] = {1, 2};
  Tensor *x = tensor_new(DT_F32, 2, xd), *out[1] = {0};
  ((float *)x->data)[0] = 1;
  ((float *)x->data)[1] = 1;
  CHECK(ir_eval(g, &x, out, &d) == 0);
  if (out[0]) {
    CHECK(fabsf(((float *)out[0]->data)[0] - 0.5f) < 1e-6f);
    CHECK(fabsf(((float *)out[0]->data)[1] - 4.5f) < 1e-6f);
  }
  tensor_free(x);
  tensor_free(out[0]);
  graph_free(g);
}

static void test_bytes(void) {
  Diag d = {0};
  CHECK(!onnx_load_bytes("", 0, "e.onnx", NULL, &d) && strstr(d.msg, "empty"));
  uint8_t junk[64];
  for (int i = 0; i < 64; i++)
    junk[i] = (uint8_t)(i * 97 + 13);
  d = (Diag){0};
  CHECK(!onnx_load_bytes(junk, sizeof junk, "r.onnx", NULL, &d) &&
        strstr(d.msg, "r.onnx: error: not an ONNX model"));
  M m;
  make_mlp(&m);
  size_t len;
  uint8_t *buf = pack(&m, &len);
  for (size_t cut = 1; cut < len; cut += 7) { /* every truncation fails cleanly */
    d = (Diag){0};
    Graph *g = onnx_load_bytes(buf, cut, "t.onnx", NULL, &d);
    CHECK(!g && strstr(d.msg, "t.onnx: error:"));
    graph_free(g);
  }
  free(buf);
  /* a TensorProto is not a model */
  Onnx__TensorProto t;
  onnx__tensor_proto__init(&t);
  int64_t dims[2] = {2, 2};
  float v[4] = {1, 2, 3, 4};
  t.n_dims = 2;
  t.dims = dims;
  t.has_data_type = 1;
  t.data_type = 1;
  t.n_float_data = 4;
  t.float_data = v;
  len = onnx__tensor_proto__get_packed_size(&t);
  buf = malloc(len);
  onnx__tensor_proto__pack(&t, buf);
  d = (Diag){0};
  CHECK(!onnx_load_bytes(buf, len, "tp.onnx", NULL, &d) && strstr(d.msg, "not an ONNX model"));
  free(buf);
}

static void test_bad_tensors(void) {
  M m;
  make_mlp(&m);
  m.inits[0].raw_data.len = 20;
  EXPECT_ERROR(&m, NULL, "raw_data has 20 bytes, but f32 with 6 elements needs 24");
  m.inits[0].raw_data.len = 28;
  EXPECT_ERROR(&m, NULL, "raw_data has 28 bytes");
  /* typed field with the wrong count */
  make_mlp(&m);
  m.inits[1].has_raw_data = 0;
  m.inits[1].n_float_data = 2;
  m.inits[1].float_data = (float *)B;
  EXPECT_ERROR(&m, NULL, "initializer 'b': float_data has 2 elements, but its dims need 3");
  m.inits[1].n_float_data = 3;
  Diag d = {0};
  Graph *g = load_m(&m, NULL, &d);
  CHECK(g); /* the right count loads */
  graph_free(g);
  static const int64_t neg[] = {2, -3}, big[] = {INT64_MAX / 2, 4};
  make_mlp(&m);
  m.inits[0].dims = (int64_t *)neg;
  EXPECT_ERROR(&m, NULL, "negative dim");
  m.inits[0].dims = (int64_t *)big;
  EXPECT_ERROR(&m, NULL, "is too large: more than 281474976710656 bytes");
  make_mlp(&m);
  m.inits[0].data_type = ONNX__TENSOR_PROTO__DATA_TYPE__STRING;
  EXPECT_ERROR(&m, NULL, "element type STRING");
  /* the weight limit */
  make_mlp(&m);
  OnnxOptions opt = {.max_weight_bytes = 30};
  EXPECT_ERROR(&m, &opt, "past the limit of 30 bytes");
  opt.max_weight_bytes = 36;
  g = load_m(&m, &opt, &d);
  CHECK(g);
  graph_free(g);
}

static void test_bad_graphs(void) {
  M m;
  /* not sorted: loads, sorted */
  make_mlp(&m);
  Onnx__NodeProto tmp = m.nodes[0];
  m.nodes[0] = m.nodes[2];
  m.nodes[2] = tmp;
  Diag d = {0};
  Graph *g = load_m(&m, NULL, &d);
  CHECK(g && g->nodes[0]->op == OP_MATMUL && g->nodes[2]->op == OP_RELU);
  graph_free(g);
  /* a cycle: h = matmul(x, y) ... y = relu(hb) */
  make_mlp(&m);
  static char *cyc[] = {"x", "y"};
  m.nodes[0].input = cyc;
  m.nodes[0].n_input = 2;
  EXPECT_ERROR(&m, NULL, "the graph has a cycle");
  /* an undefined input */
  make_mlp(&m);
  static char *undef[] = {"x", "nope"};
  m.nodes[0].input = undef;
  EXPECT_ERROR(&m, NULL, "node 'fc' (#0, MatMul, opset 17): input 'nope' is not defined");
  /* two nodes defining the same value */
  make_mlp(&m);
  m.nodes[2].output = S_H;
  EXPECT_ERROR(&m, NULL, "output 'h' is already defined by node 'fc' (#0)");
  /* unknown op, unknown domain */
  make_mlp(&m);
  m.nodes[2].op_type = "Relux";
  EXPECT_ERROR(&m, NULL, "node 'act' (#2, Relux, opset 17): op Relux is not supported");
  make_mlp(&m);
  m.nodes[2].domain = "com.microsoft";
  EXPECT_ERROR(&m, NULL, "domain 'com.microsoft'");
  /* an opset gpucc does not read */
  make_mlp(&m);
  m.opset.version = 25;
  EXPECT_ERROR(&m, NULL, "opset 25 of the default domain is not supported (gpucc reads opsets "
                         "1 to 24)");
  m.opset.version = 0;
  EXPECT_ERROR(&m, NULL, "opset 0 of the default domain is not supported");
  /* a missing attribute: Concat without axis */
  make_mlp(&m);
  m.nodes[2].op_type = "Concat";
  EXPECT_ERROR(&m, NULL, "node 'act' (#2, Concat, opset 17): missing attribute 'axis'");
  /* an unsupported attribute value */
  make_mlp(&m);
  m.nodes[2].op_type = "MaxPool";
  m_attr_int(&m, &m.nodes[2], "storage_order", 1);
  EXPECT_ERROR(&m, NULL, "op MaxPool with storage_order=1 is not supported");
  /* the scan comes before any other work: an unknown op late in the model wins over a
   * bad initializer */
  make_mlp(&m);
  m.inits[0].raw_data.len = 3;
  m.nodes[2].op_type = "Unique";
  EXPECT_ERROR(&m, NULL, "op Unique is not supported");
  /* a graph output nobody defines */
  make_mlp(&m);
  m.vis[1].name = "zz";
  EXPECT_ERROR(&m, NULL, "graph output 'zz' is not defined");
  /* --dim and --shape naming nothing */
  make_mlp(&m);
  OnnxBinding b = {"batch", "3"};
  OnnxOptions opt = {.dims = &b, .ndims = 1};
  EXPECT_ERROR(&m, &opt, "no input of the model has a dim named 'batch'");
  OnnxOptions sopt = {.shapes = &b, .nshapes = 1};
  EXPECT_ERROR(&m, &sopt, "the model has no input named 'batch'");
}

/* External data in a scratch folder. */
static void test_external(void) {
  char dir[] = "/tmp/gpucc-onnx-XXXXXX";
  if (!mkdtemp(dir)) {
    CHECK(!"mkdtemp");
    return;
  }
  char sub[128], model[160], data[160], outside[160], link[160];
  snprintf(sub, sizeof sub, "%s/m", dir);
  snprintf(model, sizeof model, "%s/m.onnx", sub);
  snprintf(data, sizeof data, "%s/w.bin", sub);
  snprintf(outside, sizeof outside, "%s/secret.bin", dir);
  snprintf(link, sizeof link, "%s/link.bin", sub);
  CHECK(mkdir(sub, 0755) == 0);
  FILE *f = fopen(data, "wb");
  fwrite("PADDING!", 1, 8, f); /* the weights start at offset 8 */
  fwrite(W, 4, 6, f);
  fclose(f);
  f = fopen(outside, "wb");
  fwrite(W, 4, 6, f);
  fclose(f);
  CHECK(symlink(outside, link) == 0);

  struct {
    const char *loc, *offset, *length, *want; /* want NULL: loads */
  } cases[] = {
      {"w.bin", "8", "24", NULL},
      {"./w.bin", "8", NULL, NULL},
      {"../m/w.bin", "8", "24", "contains '..'"},
      {data, "8", "24", "is an absolute path"},
      {"link.bin", "0", "24", "outside the model's folder"},
      {"w.bin", "16", "24", "goes past its end"},
      {"w.bin", "8", "20", "external data length is 20 bytes"},
      {"nope.bin", "0", "24", "cannot open external data"},
      {"w.bin", "-1", "24", "not a non-negative integer"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    M m;
    make_mlp(&m);
    Onnx__TensorProto *t = &m.inits[0];
    Onnx__StringStringEntryProto e[3], *pe[3];
    const char *keys[3] = {"location", "offset", "length"};
    const char *vals[3] = {cases[i].loc, cases[i].offset, cases[i].length};
    size_t n = 0;
    for (int k = 0; k < 3; k++) {
      if (!vals[k])
        continue;
      onnx__string_string_entry_proto__init(&e[n]);
      e[n].key = (char *)keys[k];
      e[n].value = (char *)vals[k];
      pe[n] = &e[n];
      n++;
    }
    t->has_raw_data = 0;
    t->n_external_data = n;
    t->external_data = pe;
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    size_t len;
    uint8_t *buf = pack(&m, &len);
    f = fopen(model, "wb");
    fwrite(buf, 1, len, f);
    fclose(f);
    free(buf);
    Diag d = {0};
    Graph *g = onnx_load(model, NULL, &d);
    if (!cases[i].want) {
      CHECK(g && !memcmp(g->consts[0]->data->data, W, 24));
      if (!g)
        fprintf(stderr, "case %zu: %s\n", i, d.msg);
    } else if (g || !strstr(d.msg, cases[i].want)) {
      fprintf(stderr, "test_onnx.c: external case %zu: expected '%s', got: %s\n", i,
              cases[i].want, g ? "a graph" : d.msg);
      failures++;
    }
    graph_free(g);
    /* from memory there is no folder: external data is an error */
    if (i == 0) {
      buf = pack(&m, &len);
      d = (Diag){0};
      g = onnx_load_bytes(buf, len, "mem", NULL, &d);
      CHECK(!g && strstr(d.msg, "was not read from a file"));
      graph_free(g);
      free(buf);
    }
  }
  unlink(model);
  unlink(data);
  unlink(link);
  unlink(outside);
  rmdir(sub);
  rmdir(dir);
}

/* Writes m to a fresh file (path: a mkstemp template) for onnx_check_ops. */
static void write_m(const M *m, char *path) {
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  size_t len;
  uint8_t *buf = pack(m, &len);
  CHECK(write(fd, buf, len) == (ssize_t)len);
  close(fd);
  free(buf);
}

/* Every opset from 1 to 24 loads the MLP (MatMul, Add and Relu exist in all of them) and
 * means the same by it; the version a node uses is its op's newest at the model's opset,
 * and ops are refused per node: one that ONNX adds after the model's opset or has
 * deprecated by then, a version gpucc does not implement, an attribute the version does
 * not have, the training modes of the old BatchNormalization and Dropout. */
static void test_opsets(void) {
  M m;
  Diag d = {0};
  int64_t xd[2] = {2, 2};
  float xv[4] = {1, 0, 0, -1}, want[6] = {1.5f, 1, 5, 0, 0, 0};
  for (int64_t opset = 1; opset <= 24; opset++) {
    make_mlp(&m);
    m.opset.version = opset;
    if (opset % 2) /* "ai.onnx" names the default domain too */
      m.opset.domain = "ai.onnx";
    Graph *g = load_m(&m, NULL, &d);
    CHECK(g && g->nnodes == 3);
    if (!g) {
      fprintf(stderr, "opset %lld: %s\n", (long long)opset, d.msg);
      continue;
    }
    Tensor *x = tensor_new(DT_F32, 2, xd), *out[1] = {0};
    memcpy(x->data, xv, sizeof xv);
    CHECK(ir_eval(g, &x, out, &d) == 0);
    for (int i = 0; out[0] && i < 6; i++)
      CHECK(fabsf(((float *)out[0]->data)[i] - want[i]) < 1e-6f);
    tensor_free(x);
    tensor_free(out[0]);
    graph_free(g);
  }
  /* the default domain imported twice, at two opsets */
  make_mlp(&m);
  Onnx__OperatorSetIdProto again = m.opset, *two[2] = {&m.opset, &again};
  again.domain = "ai.onnx";
  again.version = 13;
  m.model.opset_import = two;
  m.model.n_opset_import = 2;
  EXPECT_ERROR(&m, NULL, "the model imports the default domain twice, as opsets 17 and 13");

  /* the op's version at each opset: its newest since_version up to it */
  CHECK(onnx_op_version("Softmax", 12) && onnx_op_version("Softmax", 12)->since == 11);
  CHECK(onnx_op_version("Softmax", 13) && onnx_op_version("Softmax", 13)->since == 13);
  CHECK(onnx_op_version("Reshape", 4) && onnx_op_version("Reshape", 4)->since == 1);
  CHECK(!onnx_op_version("Gelu", 19) && onnx_op_version("Gelu", 24));
  CHECK(!onnx_op_version("Upsample", 10) && onnx_op_version("Upsample", 9)->since == 9);
  CHECK(!onnx_op_version("Frobnicate", 17));

  /* refused per node, naming the node, op, version and opset */
  make_mlp(&m);
  m.opset.version = 19;
  m.nodes[2].op_type = "Gelu";
  EXPECT_ERROR(&m, NULL, "node 'act' (#2, Gelu, opset 19): op Gelu does not exist in opset 19 "
                         "(ONNX added it in opset 20)");
  m.opset.version = 11;
  m.nodes[2].op_type = "Upsample";
  EXPECT_ERROR(&m, NULL, "node 'act' (#2, Upsample, opset 11): op Upsample does not exist in "
                         "opset 11 (ONNX deprecated it in opset 10)");
  m.opset.version = 5;
  EXPECT_ERROR(&m, NULL, "node 'act' (#2, Upsample, opset 5): op Upsample version 1 is not "
                         "supported (gpucc implements versions 7 to 9)");
  make_mlp(&m);
  m.opset.version = 7;
  m_attr_int(&m, &m.nodes[1], "broadcast", 1);
  EXPECT_ERROR(&m, NULL, "node 'Add#1' (#1, Add, opset 7): op Add version 7 has no attribute "
                         "'broadcast'");
  m.opset.version = 6; /* it has there, and a B that fits by suffix loads */
  Graph *g = load_m(&m, NULL, &d);
  CHECK(g);
  graph_free(g);
  make_mlp(&m);
  m.opset.version = 6;
  m.nodes[2].op_type = "Dropout"; /* is_test=0 by default: training */
  EXPECT_ERROR(&m, NULL, "op Dropout in training mode (is_test=0) is not supported");
  m_attr_int(&m, &m.nodes[2], "is_test", 1);
  g = load_m(&m, NULL, &d);
  CHECK(g);
  graph_free(g);
  make_mlp(&m);
  m.opset.version = 9;
  static char *bn_in[] = {"hb", "b", "b", "b", "b"}, *bn_out[] = {"z", "mean"};
  m_node(&m, "BatchNormalization", "bn", bn_in, 5, bn_out, 2);
  EXPECT_ERROR(&m, NULL, "node 'bn' (#3, BatchNormalization, opset 9): op BatchNormalization in "
                         "training mode (outputs beyond Y) is not supported");

  /* --check-ops lists them, one line per reason */
  make_mlp(&m);
  m.opset.version = 5;
  m.nodes[0].op_type = "Upsample";
  m.nodes[2].op_type = "Gelu";
  char path[] = "/tmp/gpucc-onnx-opsets-XXXXXX";
  write_m(&m, path);
  char *report = NULL;
  CHECK(onnx_check_ops(path, NULL, &report, &d) == 2);
  CHECK(report && strstr(report, "op Upsample version 1 is not supported (gpucc implements "
                                 "versions 7 to 9) (opset 5): 1 node, first 'fc' (#0)"));
  CHECK(report && strstr(report, "op Gelu does not exist in opset 5 (ONNX added it in opset "
                                 "20) (opset 5): 1 node, first 'act' (#2)"));
  free(report);
  unlink(path);
}

/* The op table against the version table (onnx-versions.inc): every op gpucc implements
 * is one of the default domain's, its builder declares released versions of it, and those
 * are all of them up to OPSET_MAX but Upsample-1, which was experimental (docs/onnx.md
 * says so: a new version in a regenerated table fails here until it is reviewed). */
static void test_version_table(void) {
  size_t nv, no;
  const OnnxVersion *v = onnx_versions_table(&nv);
  const OnnxOp *ops = onnx_op_table(&no);
  for (size_t i = 1; i < nv; i++) /* sorted for the bisection */
    CHECK(strcmp(v[i - 1].op, v[i].op) < 0 ||
          (!strcmp(v[i - 1].op, v[i].op) && v[i - 1].since < v[i].since));
  for (size_t i = 0; i < no; i++) {
    int first = 0, last = 0;
    for (size_t k = 0; k < nv; k++)
      if (!strcmp(v[k].op, ops[i].name) && v[k].status == VS_RELEASED && v[k].since <= OPSET_MAX) {
        first = first ? first : v[k].since;
        last = v[k].since;
      }
    int want_first = !strcmp(ops[i].name, "Upsample") ? 7 : first;
    CHECK(first && ops[i].first_version == want_first && ops[i].last_version == last);
    if (!first || ops[i].first_version != want_first || ops[i].last_version != last)
      fprintf(stderr, "op %s: the table declares versions %d to %d, ONNX has %d to %d\n",
              ops[i].name, ops[i].first_version, ops[i].last_version, first, last);
  }
}

static void test_check_ops(void) {
  M m;
  make_mlp(&m);
  m.nodes[0].op_type = "Unique";
  m.nodes[2].op_type = "Unique";
  m.nodes[1].op_type = "Frob";
  char path[] = "/tmp/gpucc-onnx-check-XXXXXX";
  write_m(&m, path);
  char *report = NULL;
  Diag d = {0};
  CHECK(onnx_check_ops(path, NULL, &report, &d) == 2);
  CHECK(report && strstr(report, "op Unique is not supported (opset 17): 2 nodes, first 'fc' (#0)"));
  CHECK(report && strstr(report, "op Frob is not supported (opset 17): 1 node, first 'Frob#1'"));
  free(report);
  unlink(path);
}

/* Shape computations fold at load: Reshape(x, Shape(x)) keeps only the reshape, with its
 * shape as an attribute; a symbolic dim must be bound first. */
static void test_shape_folding(void) {
  static char *sin[] = {"x"}, *sout[] = {"s"}, *rin[] = {"x", "s"}, *rout[] = {"r"},
              *yin[] = {"r"};
  static const int64_t dn3[] = {-1, 3};
  M m;
  m_init(&m, 17);
  m_input(&m, "x", 2, dn3);
  m_output(&m, "y");
  m_node(&m, "Shape", "shape", sin, 1, sout, 1);
  m_node(&m, "Reshape", "reshape", rin, 2, rout, 1);
  m_node(&m, "Relu", "relu", yin, 1, S_Y, 1);
  EXPECT_ERROR(&m, NULL, "node 'shape' (#0, Shape, opset 17): the shape of 'x' has symbolic "
                         "dim 0 ('N'): bind it with --dim N=<size>");
  OnnxBinding b = {"N", "2"};
  OnnxOptions opt = {.dims = &b, .ndims = 1};
  Diag d = {0};
  Graph *g = load_m(&m, &opt, &d);
  CHECK(g);
  if (!g) {
    fprintf(stderr, "%s\n", d.msg);
    return;
  }
  CHECK(g->nnodes == 2 && g->nodes[0]->op == OP_RESHAPE && g->nodes[1]->op == OP_RELU);
  int n = 0;
  const int64_t *shape = g->nnodes ? attr_ints(g->nodes[0], "shape", &n) : NULL;
  CHECK(n == 2 && shape && shape[0] == 2 && shape[1] == 3);
  graph_free(g);

  /* parsed once, loaded at several sizes (a ranged model's classes): each load folds the
   * shape of its own size, and an error of a load still names the model */
  size_t len;
  uint8_t *buf = pack(&m, &len);
  OnnxModel *om = onnx_open_bytes(buf, len, "m.onnx", NULL, &d);
  free(buf); /* the OnnxModel keeps nothing of the bytes */
  CHECK(om != NULL);
  for (int size = 1; om && size <= 3; size++) {
    char v[8];
    snprintf(v, sizeof v, "%d", size);
    OnnxBinding bs = {"N", v};
    OnnxOptions os = {.dims = &bs, .ndims = 1};
    g = onnx_model_load(om, &os, &d);
    CHECK(g && g->inputs[0]->type.shape.dims[0].n == size);
    shape = g && g->nnodes ? attr_ints(g->nodes[0], "shape", &n) : NULL;
    CHECK(n == 2 && shape && shape[0] == size && shape[1] == 3);
    graph_free(g);
  }
  Diag d2 = {0};
  CHECK(om && !onnx_model_load(om, NULL, &d2) && strstr(d2.msg, "m.onnx") &&
        strstr(d2.msg, "bind it with --dim N=<size>"));
  onnx_close(om);
  Diag d3 = {0};
  CHECK(!onnx_open_bytes("junk", 4, "j.onnx", NULL, &d3) && strstr(d3.msg, "j.onnx") &&
        strstr(d3.msg, "not an ONNX model"));
  Diag d4 = {0};
  CHECK(!onnx_open("/nonexistent/x.onnx", &d4) && strstr(d4.msg, "/nonexistent/x.onnx"));
}

/* --const: a graph input that decides a shape becomes a constant from a .npy file. */
static void test_const_input(void) {
  static char *rin[] = {"x", "s"};
  static const int64_t d23[] = {2, 3}, d2[] = {2};
  M m;
  m_init(&m, 17);
  m_input(&m, "x", 2, d23);
  m_input(&m, "s", 1, d2);
  m.tts[m.nvi - 1].elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
  m_output(&m, "y");
  m_node(&m, "Reshape", "reshape", rin, 2, S_Y, 1);
  EXPECT_ERROR(&m, NULL, "op Reshape with input 1 computed at run time is not supported (it "
                         "must be a constant: give graph inputs values with --const s=FILE.npy)");
  char dir[] = "/tmp/gpucc-onnx-const-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char good[64], bad[64];
  snprintf(good, sizeof good, "%s/s.npy", dir);
  snprintf(bad, sizeof bad, "%s/f.npy", dir);
  Tensor *s = tensor_new(DT_I64, 1, d2), *f = tensor_new(DT_F32, 1, d2);
  ((int64_t *)s->data)[0] = 3;
  ((int64_t *)s->data)[1] = -1;
  Diag d = {0};
  CHECK(npy_write(good, s, &d) == 0 && npy_write(bad, f, &d) == 0);
  OnnxBinding b = {"s", good};
  OnnxOptions opt = {.consts = &b, .nconsts = 1};
  Graph *g = load_m(&m, &opt, &d);
  CHECK(g && g->ninputs == 1 && g->nnodes == 1);
  int n = 0;
  const int64_t *shape = g && g->nnodes ? attr_ints(g->nodes[0], "shape", &n) : NULL;
  CHECK(n == 2 && shape && shape[0] == 3 && shape[1] == -1);
  CHECK(g && g->nnodes && g->nodes[0]->out[0]->type.shape.dims[0].n == 3);
  graph_free(g);
  b.value = bad;
  EXPECT_ERROR(&m, &opt, "--const s=");
  EXPECT_ERROR(&m, &opt, "the file holds f32, but input 's' is i64");
  OnnxBinding two[2] = {{"s", good}, {"nope", good}};
  OnnxOptions opt2 = {.consts = two, .nconsts = 2};
  EXPECT_ERROR(&m, &opt2, "the model has no input named 'nope'");
  tensor_free(s);
  tensor_free(f);
  unlink(good);
  unlink(bad);
  rmdir(dir);
}

int main(void) {
  test_mlp();
  test_gemm_clip();
  test_bytes();
  test_bad_tensors();
  test_bad_graphs();
  test_external();
  test_check_ops();
  test_opsets();
  test_version_table();
  test_shape_folding();
  test_const_input();
  if (failures)
    fprintf(stderr, "test_onnx: %d failures\n", failures);
  return failures != 0;
}
