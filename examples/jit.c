/* jit: compiles a model in-process with gpucc's JIT API and runs it once on the GPU.
 *
 *   jit MODEL.gir|MODEL.onnx [--dim SYM=N]... [--precision P] [--calibrate NAME=F.npy]...
 *       [--output-dir DIR] [input.npy ...]
 *
 * The same steps as `gpucc MODEL -o model.so` followed by run_model, without a file in
 * between: gpucc_compile_dsl / gpucc_compile_onnx give a GpuccModel on device 0, which
 * runs with the runtime's own calls (runtime/runtime.h). Inputs come from .npy files in
 * the model's input order; without them every input is random(seed = 1 + its index),
 * the generator `gpucc run` uses, so the outputs can be compared with `gpucc run --cpu`.
 * --precision is gpucc's (fp32, tf32, bf16, fp16, fp8), and so is --calibrate (fp8's
 * calibration input of graph input NAME). Prints each output's first values;
 * --output-dir writes DIR/<output>.npy.
 */
#include "compiler/gpucc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  if (!fseek(f, 0, SEEK_END)) {
    long n = ftell(f);
    if (n >= 0 && !fseek(f, 0, SEEK_SET) && (buf = malloc((size_t)n + 1))) {
      *len = fread(buf, 1, (size_t)n, f);
      buf[*len] = 0;
    }
  }
  fclose(f);
  return buf;
}

static DType ir_dtype(GpuccDType t) {
  DType d = DT_F32;
  dtype_from_name(gpucc_dtype_name(t), &d);
  return d;
}

/* Input i of the model: the .npy file when given (checked against the model), else the
 * documented random generator. NULL with a message on stderr. */
static Tensor *make_input(GpuccModel *m, int i, const char *npy) {
  Tensor *t;
  if (npy) {
    Diag d = {0};
    if (!(t = npy_read(npy, &d))) {
      fprintf(stderr, "jit: %s\n", d.msg);
      return NULL;
    }
    GpuccDType dt = GPUCC_DT_INVALID;
    for (int k = GPUCC_DT_INVALID + 1; k < GPUCC_DT_COUNT; k++)
      if (ir_dtype((GpuccDType)k) == t->dtype) dt = (GpuccDType)k;
    if (gpucc_model_check_input(m, i, dt, t->rank, t->dims)) {
      fprintf(stderr, "jit: %s: %s\n", npy, gpucc_last_error());
      tensor_free(t);
      return NULL;
    }
    return t;
  }
  t = tensor_new(ir_dtype(gpucc_model_input_dtype(m, i)), gpucc_model_input_rank(m, i),
                 gpucc_model_input_dims(m, i));
  if (t) tensor_fill_random(t, 1 + (uint64_t)i, 1);
  return t;
}

int main(int argc, char **argv) {
  const char *model = NULL, *out_dir = NULL, *precision = NULL;
  const char *names[16], *npys[64], *calib_names[16];
  Tensor *calib[16];
  int64_t sizes[16];
  int ndims = 0, nnpy = 0, ncalib = 0, rc = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--dim") && i + 1 < argc && ndims < 16) {
      char *eq = strchr(argv[++i], '=');
      if (!eq) break;
      *eq = 0;
      names[ndims] = argv[i];
      sizes[ndims++] = strtoll(eq + 1, NULL, 10);
    } else if (!strcmp(argv[i], "--output-dir") && i + 1 < argc) {
      out_dir = argv[++i];
    } else if (!strcmp(argv[i], "--precision") && i + 1 < argc) {
      precision = argv[++i];
    } else if (!strcmp(argv[i], "--calibrate") && i + 1 < argc && ncalib < 16) {
      char *eq = strchr(argv[++i], '=');
      Diag d = {0};
      if (!eq) break;
      *eq = 0;
      calib_names[ncalib] = argv[i];
      if (!(calib[ncalib++] = npy_read(eq + 1, &d))) {
        fprintf(stderr, "jit: %s\n", d.msg);
        ncalib--;
        rc = 1;
      }
    } else if (!model) {
      model = argv[i];
    } else if (nnpy < 64) {
      npys[nnpy++] = argv[i];
    }
  }
  size_t len = 0;
  char *bytes = model && !rc ? read_all(model, &len) : NULL;
  if (!model)
    fprintf(stderr, "usage: jit MODEL.gir|MODEL.onnx [--dim SYM=N]... [--precision P] "
                    "[--calibrate NAME=F.npy]... [--output-dir DIR] [input.npy ...]\n");
  else if (!bytes && !rc)
    fprintf(stderr, "jit: cannot read %s\n", model);
  if (!bytes) {
    for (int i = 0; i < ncalib; i++) tensor_free(calib[i]);
    return model ? 1 : 2;
  }

  GpuccCompileOptions opt = {.dim_names = names, .dim_sizes = sizes, .ndims = ndims,
                             .precision = precision, .calib_names = calib_names,
                             .calib_inputs = calib, .ncalib = ncalib};
  size_t n = strlen(model);
  bool onnx = n > 5 && !strcmp(model + n - 5, ".onnx");
  Diag d = {0};
  GpuccModel *m = NULL;
  GpuccStatus st = onnx ? gpucc_compile_onnx(bytes, len, model, &opt, 0, &m, &d)
                        : gpucc_compile_dsl(bytes, len, model, &opt, 0, &m, &d);
  free(bytes);
  for (int i = 0; i < ncalib; i++) tensor_free(calib[i]);
  if (st) {
    fprintf(stderr, "jit: %s\n", d.msg);
    return 1;
  }

  int nin = gpucc_model_num_inputs(m), nout = gpucc_model_num_outputs(m);
  if (nnpy && nnpy != nin) {
    fprintf(stderr, "jit: the model takes %d inputs, %d .npy files given\n", nin, nnpy);
    rc = 1;
  }
  Tensor **in = calloc((size_t)nin + 1, sizeof *in), **out = calloc((size_t)nout + 1, sizeof *out);
  const void **in_data = calloc((size_t)nin + 1, sizeof *in_data);
  void **out_data = calloc((size_t)nout + 1, sizeof *out_data);
  for (int i = 0; i < nin && !rc; i++) {
    if (!(in[i] = make_input(m, i, nnpy ? npys[i] : NULL))) rc = 1;
    else in_data[i] = in[i]->data;
  }
  for (int i = 0; i < nout && !rc; i++) {
    out[i] = tensor_new(ir_dtype(gpucc_model_output_dtype(m, i)), gpucc_model_output_rank(m, i),
                        gpucc_model_output_dims(m, i));
    if (!out[i]) rc = 1;
    else out_data[i] = out[i]->data;
  }
  if (!rc && gpucc_model_run_host(m, in_data, out_data, NULL)) {
    fprintf(stderr, "jit: %s\n", gpucc_last_error());
    rc = 1;
  }
  for (int i = 0; i < nout && !rc; i++) {
    const char *name = gpucc_model_output_name(m, i);
    printf("%s:", name);
    int64_t numel = tensor_numel(out[i]);
    for (int64_t k = 0; k < numel && k < 8; k++)
      printf(" %g", dtype_load_f64(out[i]->dtype, (char *)out[i]->data + k * dtype_size(out[i]->dtype)));
    printf("%s\n", numel > 8 ? " ..." : "");
    if (out_dir) {
      /* The file name as gpucc run writes it: bytes outside [A-Za-z0-9_.-] as _xNN. */
      char path[4096];
      size_t at = (size_t)snprintf(path, sizeof path, "%s/", out_dir);
      for (const unsigned char *c = (const unsigned char *)name; *c && at + 8 < sizeof path; c++) {
        bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                     (*c >= '0' && *c <= '9') || *c == '_' || *c == '.' || *c == '-';
        at += (size_t)snprintf(path + at, sizeof path - at, plain ? "%c" : "_x%02x", *c);
      }
      snprintf(path + at, sizeof path - at, ".npy");
      if (npy_write(path, out[i], &d)) {
        fprintf(stderr, "jit: %s\n", d.msg);
        rc = 1;
      }
    }
  }
  for (int i = 0; i < nin; i++) tensor_free(in[i]);
  for (int i = 0; i < nout; i++) tensor_free(out[i]);
  free(in);
  free(out);
  free(in_data);
  free(out_data);
  gpucc_model_destroy(m);
  return rc;
}
