/* inspect.c: `gpucc inspect FILE`, what a file holds, read without a GPU and without
 * running anything: for a model.so its payload (how it was built, its inputs and
 * outputs, shape classes, kernels, modules and memory), for a graph (.gir) or an ONNX
 * model its inputs, outputs, ops and weights. Text, or JSON with --json.
 *
 * A model.so is mapped, not loaded: its trailer and plan are checked by the runtime's own
 * readers (runtime/payload.c, runtime/plan.c), which treat the file as hostile. */
#include "compiler/build.h"
#include "frontends/frontends.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- output, text or JSON */

typedef struct Out {
  FILE *f;
  bool json;
  int depth;     /* JSON: open objects and arrays */
  bool first[16]; /* JSON: nothing written yet at that depth */
} Out;

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

/* JSON: the separator and key before a member (key NULL inside an array). */
static void member(Out *o, const char *key) {
  if (!o->first[o->depth])
    fputc(',', o->f);
  o->first[o->depth] = false;
  if (key) {
    json_str(o->f, key);
    fputc(':', o->f);
  }
}

static void open_(Out *o, const char *key, char c) {
  member(o, key);
  fputc(c, o->f);
  if (o->depth < 15)
    o->first[++o->depth] = true;
}

static void close_(Out *o, char c) {
  fputc(c, o->f);
  if (o->depth > 0)
    o->depth--;
}

static void field_str(Out *o, const char *key, const char *v) {
  if (o->json) {
    member(o, key);
    json_str(o->f, v);
  } else {
    fprintf(o->f, "%s: %s\n", key, v);
  }
}

static void field_u64(Out *o, const char *key, uint64_t v) {
  if (o->json) {
    member(o, key);
    fprintf(o->f, "%" PRIu64, v);
  } else {
    fprintf(o->f, "%s: %" PRIu64 "\n", key, v);
  }
}

/* A list of named values ("inputs:" then "  x: f32[8, 64]" lines, or a JSON array of
 * {"name", "type"} objects): list_begin, list_value for each, list_end. */
static void list_begin(Out *o, const char *key) {
  if (o->json)
    open_(o, key, '[');
  else
    fprintf(o->f, "%s:\n", key);
}

static void list_value(Out *o, const char *name, const char *type) {
  if (o->json) {
    open_(o, NULL, '{');
    field_str(o, "name", name);
    field_str(o, "type", type);
    close_(o, '}');
  } else {
    fprintf(o->f, "  %s: %s\n", name, type);
  }
}

static void list_end(Out *o) {
  if (o->json)
    close_(o, ']');
}

/* ---------------------------------------------------------------- model.so */

/* A tensor's type as "f32[batch=1..64, 128]" (a ranged axis: its symbol and sizes). */
static void tensor_type_str(const GpuccPlan *p, const GpuccTensorInfo *t, char *buf, size_t n) {
  size_t at = (size_t)snprintf(buf, n, "%s[", gpucc_dtype_name(t->dtype));
  for (int i = 0; i < t->rank && at < n; i++) {
    const char *sep = i ? ", " : "";
    if (t->sym[i] >= 0 && t->sym[i] < p->nsyms) {
      const GpuccSymbol *s = &p->syms[t->sym[i]];
      at += (size_t)snprintf(buf + at, n - at, "%s%s=", sep, s->name);
      for (int k = 0; k < s->npieces && at < n; k++)
        at += (size_t)(s->lo[k] == s->hi[k]
                           ? snprintf(buf + at, n - at, "%s%" PRId64, k ? "," : "", s->lo[k])
                           : snprintf(buf + at, n - at, "%s%" PRId64 "..%" PRId64, k ? "," : "",
                                      s->lo[k], s->hi[k]));
    } else {
      at += (size_t)snprintf(buf + at, n - at, "%s%" PRId64, sep, t->dims[i]);
    }
  }
  if (at < n)
    snprintf(buf + at, n - at, "]");
}

static void tensors(Out *o, const char *key, const GpuccPlan *p, const GpuccTensorInfo *t, int n) {
  char type[1024];
  list_begin(o, key);
  for (int i = 0; i < n; i++) {
    tensor_type_str(p, &t[i], type, sizeof type);
    list_value(o, t[i].name, type);
  }
  list_end(o);
}

/* The kernels steps launch, each name once, in the order of their first launch. -1 when
 * out of memory. */
static int kernels(Out *o, const GpuccStep *steps, int nsteps) {
  const char **names = malloc(((size_t)nsteps + 1) * sizeof *names);
  int *first = malloc(((size_t)nsteps + 1) * sizeof *first), n = 0;
  for (int i = 0; names && i < nsteps; i++)
    if (steps[i].kind == GPUCC_STEP_KERNEL)
      names[n++] = steps[i].kernel.name;
  if (!names || !first || strings_first(names, n, first)) {
    free(names);
    free(first);
    return -1;
  }
  int gemms = 0, choices = 0;
  for (int i = 0; i < nsteps; i++) {
    gemms += steps[i].kind == GPUCC_STEP_GEMM;
    choices += steps[i].kind == GPUCC_STEP_CHOICE;
  }
  field_u64(o, "kernel_launches", (uint64_t)n);
  field_u64(o, "gemms", (uint64_t)gemms);
  field_u64(o, "choices", (uint64_t)choices);
  if (o->json)
    open_(o, "kernels", '[');
  else
    fputs("kernels:\n", o->f);
  for (int k = 0; k < n; k++) {
    if (first[k] != k)
      continue;
    if (o->json) {
      member(o, NULL);
      json_str(o->f, names[k]);
    } else {
      fprintf(o->f, "  %s\n", names[k]);
    }
  }
  if (o->json)
    close_(o, ']');
  free(names);
  free(first);
  return 0;
}

/* The next "key: value" line of a model.so's build info [*s, end) into key and val (cut
 * to their sizes), *s moved past it; lines without a key are skipped. false at the end. */
static bool info_next(const char **s, const char *end, char *key, size_t nkey, char *val,
                      size_t nval) {
  while (*s < end) {
    const char *nl = memchr(*s, '\n', (size_t)(end - *s)), *e = nl ? nl : end, *b = *s;
    const char *colon = memchr(b, ':', (size_t)(e - b));
    *s = e + 1;
    if (colon && colon > b) {
      snprintf(key, nkey, "%.*s", (int)(colon - b), b);
      const char *v = colon + 1 + (colon + 1 < e && colon[1] == ' ');
      snprintf(val, nval, "%.*s", (int)(e - v), v);
      return true;
    }
  }
  return false;
}

static int inspect_so(Out *o, const char *path, const unsigned char *f, size_t len, Diag *d) {
  GpuccTrailer t;
  if (gpucc_trailer_parse(f, len, &t))
    return diag_error(d, (SrcLoc){path, NULL, 0, 0}, "%s", gpucc_last_error());
  GpuccPlan *p = NULL;
  if (gpucc_plan_parse(f + t.plan_offset, (size_t)t.plan_len, &p))
    return diag_error(d, (SrcLoc){path, NULL, 0, 0}, "%s", gpucc_last_error());
  field_str(o, "file", path);
  field_str(o, "format", "model.so");
  field_u64(o, "file_bytes", len);
  /* how it was built: the info's "key: value" lines as they are */
  if (!t.info_len)
    field_str(o, "build", "not recorded (a version 1 trailer, from before model.so files "
                          "recorded how they were built)");
  const char *s = (const char *)f + t.info_offset, *end = s + t.info_len;
  char key[64], val[4096];
  while (info_next(&s, end, key, sizeof key, val, sizeof val))
    field_str(o, key, val);
  tensors(o, "inputs", p, p->inputs, p->ninputs);
  tensors(o, "outputs", p, p->outputs, p->noutputs);
  if (p->nclasses) {
    /* the classes, the largest first, and the kernels of the largest */
    if (o->json)
      open_(o, "classes", '[');
    else
      fprintf(o->f, "classes: %d\n", p->nclasses);
    for (int c = 0; c < p->nclasses; c++) {
      char b[512];
      size_t at = 0;
      b[0] = 0;
      for (int k = 0; k < p->nsyms && at < sizeof b; k++)
        at += (size_t)snprintf(b + at, sizeof b - at, "%s%s=%" PRId64, k ? ", " : "",
                               p->syms[k].name, p->classes[c].bound[k]);
      int launches = 0;
      for (int i = 0; i < p->classes[c].nsteps; i++)
        launches += p->classes[c].steps[i].kind == GPUCC_STEP_KERNEL;
      if (o->json) {
        open_(o, NULL, '{');
        field_str(o, "bounds", b);
        field_u64(o, "kernel_launches", (uint64_t)launches);
        field_u64(o, "arena_bytes", p->classes[c].arena_bytes);
        close_(o, '}');
      } else {
        fprintf(o->f, "  %d (%s): %d kernel launches, arena %" PRIu64 " bytes\n", c, b,
                launches, p->classes[c].arena_bytes);
      }
    }
    if (o->json)
      close_(o, ']');
    if (!o->json)
      fputs("the largest class:\n", o->f);
  }
  if (p->nclasses ? kernels(o, p->classes[0].steps, p->classes[0].nsteps)
                  : kernels(o, p->steps, p->nsteps)) {
    gpucc_plan_free(p);
    return diag_error(d, (SrcLoc){path, NULL, 0, 0}, "out of memory");
  }
  uint64_t cubin = 0, ptx = 0;
  for (int i = 0; i < p->nmodules; i++) {
    cubin += p->modules[i].cubin_len;
    ptx += p->modules[i].ptx_len;
  }
  field_u64(o, "modules", (uint64_t)p->nmodules);
  field_u64(o, "cubin_bytes", cubin);
  field_u64(o, "ptx_bytes", ptx);
  field_u64(o, "arena_bytes", p->arena_bytes);
  field_u64(o, "weights_bytes", p->weights_bytes);
  field_str(o, "weights", t.weights_file[0] ? t.weights_file : "embedded");
  field_u64(o, "workspace_bytes", p->workspace_bytes);
  gpucc_plan_free(p);
  return 0;
}

/* ---------------------------------------------------------------- graphs */

static void graph_values(Out *o, const char *key, Value *const *v, int n) {
  char type[1024];
  list_begin(o, key);
  for (int i = 0; i < n; i++) {
    type_str(&v[i]->type, type, sizeof type);
    list_value(o, v[i]->name, type);
  }
  list_end(o);
}

/* A .gir graph as parsed (symbolic dims stay symbolic; nothing is bound or run). */
static int inspect_gir(Out *o, const char *path, Diag *d) {
  Graph *g = dsl_parse_file(path, d);
  if (!g)
    return -1;
  field_str(o, "file", path);
  field_str(o, "format", "gir");
  field_str(o, "graph", g->name ? g->name : "");
  graph_values(o, "inputs", g->inputs, g->ninputs);
  graph_values(o, "outputs", g->outputs, g->noutputs);
  int count[OP_COUNT] = {0};
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->op >= 0 && g->nodes[i]->op < OP_COUNT)
      count[g->nodes[i]->op]++;
  if (o->json)
    open_(o, "ops", '{');
  else
    fprintf(o->f, "nodes: %d\nops:\n", g->nnodes);
  for (int k = 0; k < OP_COUNT; k++) {
    if (!count[k])
      continue;
    if (o->json)
      field_u64(o, op_info[k].name, (uint64_t)count[k]);
    else
      fprintf(o->f, "  %s: %d\n", op_info[k].name, count[k]);
  }
  if (o->json)
    close_(o, '}');
  uint64_t bytes = 0;
  for (int i = 0; i < g->nconsts; i++)
    if (g->consts[i]->data)
      bytes += tensor_nbytes(g->consts[i]->data);
  field_u64(o, "constants", (uint64_t)g->nconsts);
  field_u64(o, "weights_bytes", bytes);
  graph_free(g);
  return 0;
}

/* An ONNX model as its protobuf says, without loading it into the IR (which needs its
 * symbolic dims bound). */
static int inspect_onnx(Out *o, const char *path, Diag *d) {
  OnnxModel *m = onnx_open(path, d);
  if (!m)
    return -1;
  OnnxSummary s;
  if (onnx_summary(m, &s, d)) {
    onnx_close(m);
    return -1;
  }
  field_str(o, "file", path);
  field_str(o, "format", "onnx");
  field_str(o, "graph", s.graph);
  field_str(o, "producer", s.producer);
  field_u64(o, "ir_version", (uint64_t)s.ir_version);
  field_u64(o, "opset", (uint64_t)s.opset);
  for (int io = 0; io < 2; io++) {
    const OnnxValueInfo *v = io ? s.outputs : s.inputs;
    list_begin(o, io ? "outputs" : "inputs");
    for (int i = 0; i < (io ? s.noutputs : s.ninputs); i++)
      list_value(o, v[i].name, v[i].type);
    list_end(o);
  }
  if (o->json)
    open_(o, "ops", '{');
  else
    fprintf(o->f, "nodes: %d\nops:\n", s.nnodes);
  for (int k = 0; k < s.nops; k++) {
    if (o->json)
      field_u64(o, s.ops[k].name, (uint64_t)s.ops[k].count);
    else
      fprintf(o->f, "  %s: %d\n", s.ops[k].name, s.ops[k].count);
  }
  if (o->json)
    close_(o, '}');
  field_u64(o, "initializers", (uint64_t)s.ninitializers);
  field_u64(o, "weights_bytes", s.weights_bytes);
  onnx_summary_free(&s);
  onnx_close(m);
  return 0;
}

/* ---------------------------------------------------------------- the entry */

/* The regular file at path mapped read-only (map_regular): 0, or -1 with d set. */
static int map_file(const char *path, const unsigned char **map, size_t *len, Diag *d) {
  char why[256];
  if (!(*map = map_regular(path, len, why, sizeof why)))
    return diag_error(d, (SrcLoc){path, NULL, 0, 0}, "cannot open: %s", why);
  return 0;
}

char *model_so_info(const char *path, Diag *d) {
  const unsigned char *map = NULL;
  size_t len = 0;
  if (map_file(path, &map, &len, d))
    return NULL;
  GpuccTrailer t;
  char *info = NULL;
  if (gpucc_trailer_parse(map, len, &t))
    diag_error(d, (SrcLoc){path, NULL, 0, 0}, "%s", gpucc_last_error());
  else if (!(info = strndup((const char *)map + t.info_offset, (size_t)t.info_len)))
    diag_error(d, (SrcLoc){path, NULL, 0, 0}, "out of memory");
  unmap_regular(map, len);
  return info;
}

bool info_value(const char *info, const char *key, char *val, size_t n) {
  const char *s = info, *end = info + strlen(info);
  char k[64];
  while (info_next(&s, end, k, sizeof k, val, n))
    if (!strcmp(k, key))
      return true;
  return false;
}

int inspect_file(const char *path, bool json, FILE *f, Diag *d) {
  const unsigned char *map = NULL;
  size_t len = 0;
  if (map_file(path, &map, &len, d))
    return -1;
  ModelFormat fmt = model_format(map, len < 512 ? len : 512);
  size_t n = strlen(path);
  if (!fmt && n > 5 && !strcmp(path + n - 5, ".onnx"))
    fmt = FORMAT_ONNX;
  if (!fmt && n > 4 && !strcmp(path + n - 4, ".gir"))
    fmt = FORMAT_DSL;
  /* written to memory first, so that a failure prints no half of it */
  char *text = NULL;
  size_t text_len = 0;
  Out o = {open_memstream(&text, &text_len), json, 0, {true}};
  int rc = o.f ? 0 : diag_error(d, (SrcLoc){path, NULL, 0, 0}, "out of memory");
  if (!rc && json)
    fputc('{', o.f);
  if (!rc)
    rc = fmt == FORMAT_ELF    ? inspect_so(&o, path, map, len, d)
         : fmt == FORMAT_ONNX ? inspect_onnx(&o, path, d)
         : fmt == FORMAT_DSL  ? inspect_gir(&o, path, d)
                              : diag_error(d, (SrcLoc){path, NULL, 0, 0}, "neither a model.so, "
                                           "an ONNX model nor a .gir graph");
  if (!rc && json)
    fputs("}\n", o.f);
  if (o.f && fclose(o.f) && !rc)
    rc = diag_error(d, (SrcLoc){path, NULL, 0, 0}, "out of memory");
  if (!rc && fwrite(text, 1, text_len, f) != text_len)
    rc = diag_error(d, (SrcLoc){path, NULL, 0, 0}, "cannot write the output");
  free(text);
  unmap_regular(map, len);
  return rc;
}
