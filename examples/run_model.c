/* run_model: loads a gpucc model.so with dlopen and runs it once on the GPU.
 *
 *   run_model model.so [--device N] [--output-dir DIR] [input.npy ...]
 *
 * Prints the model's inputs and outputs, runs it on host buffers (the inputs from .npy
 * files in the model's input order, or zeros when none are given), and prints the first
 * values of each output; --output-dir also writes each output as DIR/<name>.npy. Everything it needs from the model is the C API in
 * runtime/runtime.h, looked up with dlsym: no gpucc library is linked.
 */
#include "runtime/runtime.h"

#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The model API, from the library. */
static struct {
  GpuccStatus (*load)(int, GpuccModel **);
  void (*destroy)(GpuccModel *);
  const char *(*last_error)(void);
  int (*num_inputs)(const GpuccModel *), (*num_outputs)(const GpuccModel *);
  const char *(*input_name)(const GpuccModel *, int), *(*output_name)(const GpuccModel *, int);
  GpuccDType (*input_dtype)(const GpuccModel *, int), (*output_dtype)(const GpuccModel *, int);
  int (*input_rank)(const GpuccModel *, int), (*output_rank)(const GpuccModel *, int);
  const int64_t *(*input_dims)(const GpuccModel *, int), *(*output_dims)(const GpuccModel *, int);
  size_t (*input_bytes)(const GpuccModel *, int), (*output_bytes)(const GpuccModel *, int);
  GpuccStatus (*check_input)(const GpuccModel *, int, GpuccDType, int, const int64_t *);
  GpuccStatus (*run_host)(GpuccModel *, const void *const *, void *const *, void *);
} api;

static int bind(void *lib, const char *name, void *fn) {
  void *p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "run_model: the library has no %s: not a gpucc model.so\n", name);
    return -1;
  }
  memcpy(fn, &p, sizeof p); /* ISO C has no cast from void * to a function pointer */
  return 0;
}

static const char *dtype_name(GpuccDType t) {
  static const char *const names[] = {"?",   "f32", "f16", "bf16", "f64",    "i64",   "i32",
                                      "i16", "i8",  "u8",  "bool", "f8e4m3", "f8e5m2"};
  return (unsigned)t < sizeof names / sizeof *names ? names[t] : "?";
}

static void print_type(GpuccDType t, int rank, const int64_t *dims) {
  printf("%s[", dtype_name(t));
  for (int i = 0; i < rank; i++) printf("%s%lld", i ? "," : "", (long long)dims[i]);
  printf("]");
}

/* ---------------------------------------------------------------- .npy input */

static const struct {
  const char *descr;
  GpuccDType dtype;
} npy_types[] = {{"<f4", GPUCC_DT_F32}, {"<f2", GPUCC_DT_F16}, {"<f8", GPUCC_DT_F64},
                 {"<i8", GPUCC_DT_I64}, {"<i4", GPUCC_DT_I32}, {"<i2", GPUCC_DT_I16},
                 {"|i1", GPUCC_DT_I8},  {"|u1", GPUCC_DT_U8},  {"|b1", GPUCC_DT_BOOL}};

/* Reads a little-endian, C-order .npy file: its dtype, shape and data (malloc'd). */
static void *read_npy(const char *path, GpuccDType *dtype, int *rank, int64_t *dims, size_t *bytes) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "run_model: cannot open %s\n", path);
    return NULL;
  }
  unsigned char pre[12];
  char *header = NULL;
  void *data = NULL;
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6)) goto bad;
  size_t hlen = pre[8] | (size_t)pre[9] << 8;
  if (pre[6] >= 2) { /* version 2 and 3: a 4-byte header length */
    if (fread(pre + 10, 1, 2, f) != 2) goto bad;
    hlen |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
  }
  if (hlen > (1 << 20) || !(header = calloc(1, hlen + 1)) || fread(header, 1, hlen, f) != hlen) goto bad;
  const char *d = strstr(header, "'descr':"), *s = strstr(header, "'shape':");
  if (!d || !s || strstr(header, "'fortran_order': True")) goto bad;
  const char *q = strchr(d + 8, '\''); /* the descr string: '<f4' */
  *dtype = GPUCC_DT_INVALID;
  for (size_t i = 0; q && i < sizeof npy_types / sizeof *npy_types; i++)
    if (!strncmp(q + 1, npy_types[i].descr, 3) && q[4] == '\'') *dtype = npy_types[i].dtype;
  if (!*dtype) goto bad;
  *rank = 0;
  const char *p = strchr(s, '(');
  uint64_t numel = 1;
  while (p && *p && *p != ')') {
    if (*p < '0' || *p > '9') {
      p++;
      continue;
    }
    if (*rank == GPUCC_MAX_RANK) goto bad;
    char *end;
    dims[*rank] = strtoll(p, &end, 10);
    numel *= (uint64_t)dims[(*rank)++];
    p = end;
  }
  size_t esize = *dtype == GPUCC_DT_F64 || *dtype == GPUCC_DT_I64   ? 8
                 : *dtype == GPUCC_DT_F32 || *dtype == GPUCC_DT_I32 ? 4
                 : *dtype == GPUCC_DT_F16 || *dtype == GPUCC_DT_I16 ? 2
                                                                    : 1;
  *bytes = numel * esize;
  if (!(data = malloc(*bytes ? *bytes : 1)) || fread(data, 1, *bytes, f) != *bytes) goto bad;
  free(header);
  fclose(f);
  return data;
bad:
  fprintf(stderr, "run_model: %s: not a little-endian C-order .npy file of a supported type\n", path);
  free(header);
  free(data);
  fclose(f);
  return NULL;
}

/* ---------------------------------------------------------------- output */

static double half_to_double(uint16_t h, bool bf16) {
  if (bf16) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
  }
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? m / 1024.0 / 16384.0 : e == 31 ? (m ? NAN : INFINITY)
                                                     : (1 + m / 1024.0) * (double)(1 << e) / 32768.0;
  return (h >> 15) ? -v : v;
}

static void print_values(GpuccDType t, const unsigned char *p, size_t bytes) {
  size_t esize = t == GPUCC_DT_F64 || t == GPUCC_DT_I64   ? 8
                 : t == GPUCC_DT_F32 || t == GPUCC_DT_I32 ? 4
                 : t == GPUCC_DT_F16 || t == GPUCC_DT_BF16 || t == GPUCC_DT_I16 ? 2
                                                                               : 1;
  size_t n = bytes / esize, shown = n < 8 ? n : 8;
  for (size_t i = 0; i < shown; i++) {
    const unsigned char *e = p + i * esize;
    double v = 0;
    float f;
    double d;
    int64_t i64;
    int32_t i32;
    int16_t i16;
    uint16_t u16;
    switch (t) {
    case GPUCC_DT_F32: memcpy(&f, e, 4), v = f; break;
    case GPUCC_DT_F64: memcpy(&d, e, 8), v = d; break;
    case GPUCC_DT_F16:
    case GPUCC_DT_BF16: memcpy(&u16, e, 2), v = half_to_double(u16, t == GPUCC_DT_BF16); break;
    case GPUCC_DT_I64: memcpy(&i64, e, 8), v = (double)i64; break;
    case GPUCC_DT_I32: memcpy(&i32, e, 4), v = i32; break;
    case GPUCC_DT_I16: memcpy(&i16, e, 2), v = i16; break;
    case GPUCC_DT_I8: v = (int8_t)*e; break;
    default: v = *e; break; /* u8, bool, and fp8 as raw bytes */
    }
    printf("%s%g", i ? " " : "", v);
  }
  printf("%s\n", n > shown ? " ..." : "");
}

/* DIR/<name>.npy: the output's bytes behind a version 1.0 header. */
static int write_npy(const char *dir, const char *name, GpuccDType t, int rank,
                     const int64_t *dims, const void *data, size_t bytes) {
  const char *descr = NULL;
  for (size_t i = 0; i < sizeof npy_types / sizeof *npy_types; i++)
    if (npy_types[i].dtype == t) descr = npy_types[i].descr;
  char path[4096], header[512];
  /* The file name as gpucc run writes it: bytes outside [A-Za-z0-9_.-] as _xNN. */
  size_t at = (size_t)snprintf(path, sizeof path, "%s/", dir);
  for (const unsigned char *c = (const unsigned char *)name; *c && at + 8 < sizeof path; c++) {
    bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                 *c == '_' || *c == '.' || *c == '-';
    at += (size_t)snprintf(path + at, sizeof path - at, plain ? "%c" : "_x%02x", *c);
  }
  snprintf(path + at, sizeof path - at, ".npy");
  if (!descr) {
    fprintf(stderr, "run_model: cannot write output %s as .npy\n", name);
    return -1;
  }
  int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int i = 0; i < rank; i++)
    n += snprintf(header + n, sizeof header - (size_t)n, "%lld%s", (long long)dims[i], rank == 1 ? "," : i + 1 < rank ? ", " : "");
  n += snprintf(header + n, sizeof header - (size_t)n, "), }");
  int total = (10 + n + 1 + 63) / 64 * 64; /* magic, version, length, header, '\n' */
  memset(header + n, ' ', (size_t)(total - 10 - n));
  header[total - 11] = '\n';
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)((total - 10) & 255),
                           (unsigned char)((total - 10) >> 8)};
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, (size_t)(total - 10), f) == (size_t)(total - 10) &&
           fwrite(data, 1, bytes, f) == bytes;
  if (f && fclose(f)) ok = 0;
  if (!ok) fprintf(stderr, "run_model: cannot write %s\n", path);
  return ok ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: run_model model.so [--device N] [--output-dir DIR] [input.npy ...]\n");
    return 2;
  }
  int device = 0, first_input = 2;
  const char *out_dir = NULL;
  while (first_input + 1 < argc && (!strcmp(argv[first_input], "--device") ||
                                    !strcmp(argv[first_input], "--output-dir"))) {
    if (argv[first_input][2] == 'd') device = atoi(argv[first_input + 1]);
    else out_dir = argv[first_input + 1];
    first_input += 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "run_model: %s\n", dlerror());
    return 1;
  }
#define BIND(field, name) bind(lib, "gpucc_" name, &api.field)
  if (BIND(load, "model_load") || BIND(destroy, "model_destroy") ||
      BIND(last_error, "last_error") || BIND(num_inputs, "model_num_inputs") ||
      BIND(num_outputs, "model_num_outputs") || BIND(input_name, "model_input_name") ||
      BIND(output_name, "model_output_name") || BIND(input_dtype, "model_input_dtype") ||
      BIND(output_dtype, "model_output_dtype") || BIND(input_rank, "model_input_rank") ||
      BIND(output_rank, "model_output_rank") || BIND(input_dims, "model_input_dims") ||
      BIND(output_dims, "model_output_dims") || BIND(input_bytes, "model_input_bytes") ||
      BIND(output_bytes, "model_output_bytes") || BIND(check_input, "model_check_input") ||
      BIND(run_host, "model_run_host"))
    return 1;
#undef BIND
  GpuccModel *m = NULL;
  if (api.load(device, &m)) {
    fprintf(stderr, "run_model: %s\n", api.last_error());
    return 1;
  }
  int nin = api.num_inputs(m), nout = api.num_outputs(m), given = argc - first_input;
  if (given && given != nin) {
    fprintf(stderr, "run_model: the model takes %d inputs, %d .npy files given\n", nin, given);
    api.destroy(m);
    return 1;
  }
  void **in = calloc((size_t)nin + 1, sizeof *in), **out = calloc((size_t)nout + 1, sizeof *out);
  int rc = 0;
  for (int i = 0; i < nin && !rc; i++) {
    printf("input  %s: ", api.input_name(m, i));
    print_type(api.input_dtype(m, i), api.input_rank(m, i), api.input_dims(m, i));
    printf("%s\n", given ? "" : " (zeros)");
    if (!given) {
      in[i] = calloc(1, api.input_bytes(m, i) + 1);
      continue;
    }
    GpuccDType t;
    int rank;
    int64_t dims[GPUCC_MAX_RANK];
    size_t bytes;
    if (!(in[i] = read_npy(argv[first_input + i], &t, &rank, dims, &bytes))) rc = 1;
    else if (api.check_input(m, i, t, rank, dims)) {
      fprintf(stderr, "run_model: %s: %s\n", argv[first_input + i], api.last_error());
      rc = 1;
    }
  }
  for (int i = 0; i < nout; i++) out[i] = malloc(api.output_bytes(m, i) + 1);
  if (!rc && api.run_host(m, (const void *const *)in, out, NULL)) {
    fprintf(stderr, "run_model: %s\n", api.last_error());
    rc = 1;
  }
  for (int i = 0; i < nout && !rc; i++) {
    printf("%s: ", api.output_name(m, i));
    print_type(api.output_dtype(m, i), api.output_rank(m, i), api.output_dims(m, i));
    printf(" = ");
    print_values(api.output_dtype(m, i), out[i], api.output_bytes(m, i));
    if (out_dir && write_npy(out_dir, api.output_name(m, i), api.output_dtype(m, i), api.output_rank(m, i),
                             api.output_dims(m, i), out[i], api.output_bytes(m, i)))
      rc = 1;
  }
  for (int i = 0; i < nin; i++) free(in[i]);
  for (int i = 0; i < nout; i++) free(out[i]);
  free(in);
  free(out);
  api.destroy(m);
  return rc;
}
