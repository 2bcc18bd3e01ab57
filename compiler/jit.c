/* jit.c: the JIT half of gpucc.h: a graph, DSL text or ONNX bytes compiled in-process and
 * created on a device as the runtime's GpuccModel (the same object a model.so loads). */
#include "compiler/build.h"
#include "compiler/gpucc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The runtime's message of its last failure, as this layer's Diag. */
static GpuccStatus runtime_error(GpuccStatus st, Diag *d) {
  diag_error(d, (SrcLoc){0}, "%s", gpucc_last_error());
  return st;
}

/* The table's arch for a device of compute capability major.minor: a newer GPU than
 * the newest entry runs that entry's PTX, which the driver JIT-compiles. */
static GpuccStatus arch_of(int device, int major, int minor, const char **arch, Diag *d) {
  if (!(*arch = target_arch_for_cc(major * 10 + minor))) {
    diag_error(d, (SrcLoc){0},
               "CUDA device %d has compute capability %d.%d; gpucc targets 8.0 and later", device,
               major, minor);
    return GPUCC_ERR_NO_DEVICE;
  }
  return GPUCC_OK;
}

GpuccStatus gpucc_device_arch(int device, char *arch, size_t n, Diag *d) {
  int major = 0, minor = 0;
  const char *a;
  GpuccStatus st = gpucc_device_compute_capability(device, &major, &minor);
  if (st)
    return runtime_error(st, d);
  if ((st = arch_of(device, major, minor, &a, d)))
    return st;
  snprintf(arch, n, "%s", a);
  return GPUCC_OK;
}

static void take(int *field, int v) {
  if (v > 0)
    *field = v;
}

/* What the code may use (instructions, clusters) is the arch's; what there is of it (SMs,
 * memory, registers), the device's. A figure the driver did not give keeps the table's. */
void gpucc_target_over_device(Target *t, const GpuccDeviceProperties *p) {
  snprintf(t->gpu, sizeof t->gpu, "%.*s", (int)sizeof t->gpu - 1, p->name);
  t->source = "device";
  take(&t->sms, p->sms);
  take(&t->smem_block, p->smem_block);
  take(&t->smem_block_optin, p->smem_block_optin);
  take(&t->smem_sm, p->smem_sm);
  take(&t->regs_sm, p->regs_sm);
  take(&t->threads_block, p->threads_block);
  take(&t->threads_sm, p->threads_sm);
  take(&t->blocks_sm, p->blocks_sm);
  if (p->l2_bytes > 0)
    t->l2_bytes = p->l2_bytes;
  if (!p->cluster_launch) {
    t->clusters = false;
    t->cluster_max = 1;
  }
}

GpuccStatus gpucc_device_target(int device, const char *arch, Target *out, Diag *d) {
  GpuccDeviceProperties p;
  GpuccStatus st = gpucc_device_properties(device, &p);
  if (st)
    return runtime_error(st, d);
  if (!arch && (st = arch_of(device, p.cc_major, p.cc_minor, &arch, d)))
    return st;
  if (target_for_arch(arch, out, d))
    return GPUCC_ERR_INVALID_ARGUMENT;
  gpucc_target_over_device(out, &p);
  return GPUCC_OK;
}

/* The options with their target: the device's figures over opt's arch (the device's own
 * arch unless opt names one), unless opt gives a target. Asking the device first also
 * means no compile for a machine without one. */
static GpuccStatus with_target(const GpuccCompileOptions *opt, int device,
                               GpuccCompileOptions *o, Target *t, Diag *d) {
  *o = opt ? *opt : (GpuccCompileOptions){0};
  if (o->target)
    return GPUCC_OK;
  o->target = t;
  return gpucc_device_target(device, o->arch, t, d);
}

/* The built plan and weights as a model on device (b freed). */
static GpuccStatus create(GpuccBuild *b, int device, GpuccModel **out, Diag *d) {
  GpuccStatus st = gpucc_model_create(b->plan, b->plan_len, b->weights, b->weights_len, device, out);
  gpucc_build_free(b);
  return st ? runtime_error(st, d) : GPUCC_OK;
}

GpuccStatus gpucc_compile_graph(Graph *g, const GpuccCompileOptions *opt, int device,
                                GpuccModel **out, Diag *d) {
  *out = NULL;
  GpuccCompileOptions o;
  Target t;
  GpuccStatus st = with_target(opt, device, &o, &t, d);
  if (st)
    return st;
  GpuccBuild b;
  if (gpucc_build(g, &o, &b, d))
    return GPUCC_ERR_INVALID_ARGUMENT;
  return create(&b, device, out, d);
}

GpuccStatus gpucc_compile_dsl(const char *text, size_t len, const char *name,
                              const GpuccCompileOptions *opt, int device, GpuccModel **out,
                              Diag *d) {
  *out = NULL;
  Graph *g = dsl_parse(name ? name : "<memory>", text, len, d);
  if (!g)
    return GPUCC_ERR_INVALID_ARGUMENT;
  GpuccStatus st = gpucc_compile_graph(g, opt, device, out, d);
  graph_free(g);
  return st;
}

/* ONNX binds dims at load (shapes of the nodes depend on them): gpucc_build_onnx. */
GpuccStatus gpucc_compile_onnx(const void *bytes, size_t len, const char *name,
                               const GpuccCompileOptions *opt, int device, GpuccModel **out,
                               Diag *d) {
  *out = NULL;
  GpuccCompileOptions o;
  Target t;
  GpuccStatus st = with_target(opt, device, &o, &t, d);
  if (st)
    return st;
  GpuccBuild b;
  if (gpucc_build_onnx(bytes, len, name, &o, &b, d))
    return GPUCC_ERR_INVALID_ARGUMENT;
  return create(&b, device, out, d);
}

/* ---------------------------------------------------------------- options as flags */

enum { MAX_FLAG_DIMS = 64 };

/* What gpucc_compile_flags reads its flags into (the strings stay the caller's). */
typedef struct Flags {
  GpuccCompileOptions opt;
  OnnxOptions onnx;
  const char *names[MAX_FLAG_DIMS];
  int64_t sizes[MAX_FLAG_DIMS];
  char syms[MAX_FLAG_DIMS][64];
  DimRange ranges[MAX_FLAG_DIMS];
} Flags;

static const char *flag_value(const char *flag, const char *name) {
  size_t n = strlen(name);
  return !strncmp(flag, name, n) && flag[n] == '=' ? flag + n + 1 : NULL;
}

/* "dim=SYM=VALUE": a size, or sizes and ranges (1,8,32..64) as --dim takes them. */
static int flag_dim(Flags *f, const char *arg, Diag *d) {
  const char *eq = strchr(arg, '=');
  size_t n = eq ? (size_t)(eq - arg) : 0;
  if (!n || n >= sizeof f->syms[0] || !eq[1])
    return diag_error(d, (SrcLoc){0}, "dim '%s': expected SYMBOL=SIZE or SYMBOL=LO..HI", arg);
  if (f->opt.ndims + f->opt.nranges == MAX_FLAG_DIMS)
    return diag_error(d, (SrcLoc){0}, "more than %d dims", MAX_FLAG_DIMS);
  char *sym = f->syms[f->opt.ndims + f->opt.nranges];
  memcpy(sym, arg, n);
  sym[n] = 0;
  char why[160];
  int kind = dim_value_parse(eq + 1, &f->sizes[f->opt.ndims], &f->ranges[f->opt.nranges], why,
                             sizeof why);
  if (kind < 0)
    return diag_error(d, (SrcLoc){0}, "dim %s: %s", arg, why);
  if (kind)
    f->ranges[f->opt.nranges++].sym = sym;
  else
    f->names[f->opt.ndims++] = sym;
  return 0;
}

static int read_flags(Flags *f, const char *const *flags, int nflags, Diag *d) {
  memset(f, 0, sizeof *f);
  f->opt.dim_names = f->names;
  f->opt.dim_sizes = f->sizes;
  f->opt.ranges = f->ranges;
  f->opt.onnx = &f->onnx;
  for (int i = 0; i < nflags; i++) {
    const char *s = flags[i], *v;
    if (!s)
      return diag_error(d, (SrcLoc){0}, "option %d is NULL", i);
    if ((v = flag_value(s, "precision")))
      f->opt.precision = v;
    else if ((v = flag_value(s, "arch")))
      f->opt.arch = v;
    else if ((v = flag_value(s, "passes")))
      f->opt.passes = v;
    else if ((v = flag_value(s, "cache-dir")))
      f->opt.cache_dir = v;
    else if ((v = flag_value(s, "base-dir")))
      f->onnx.base_dir = v;
    else if ((v = flag_value(s, "dim"))) {
      if (flag_dim(f, v, d))
        return -1;
    } else if ((v = flag_value(s, "variants"))) {
      char *end;
      long n = strtol(v, &end, 10);
      if (!*v || *end || n < 0 || n > 1000)
        return diag_error(d, (SrcLoc){0}, "variants '%s': expected a count, 0 for all", v);
      f->opt.variants = (int)n;
    } else if (!strcmp(s, "no-fuse"))
      f->opt.no_fuse = true;
    else if (!strcmp(s, "no-cache"))
      f->opt.no_cache = true;
    else
      return diag_error(d, (SrcLoc){0},
                        "unknown option '%s' (known: precision=, arch=, passes=, dim=, "
                        "variants=, cache-dir=, base-dir=, no-fuse, no-cache)",
                        s);
  }
  if (f->opt.passes && f->opt.no_fuse)
    return diag_error(d, (SrcLoc){0}, "no-fuse leaves fuse out of the default pipeline; with "
                                      "passes=, name the passes you want");
  return 0;
}

GpuccStatus gpucc_compile_flags(const void *bytes, size_t len, const char *name,
                                const char *const *flags, int nflags, int device,
                                GpuccModel **out, Diag *d) {
  *out = NULL;
  Flags *f = malloc(sizeof *f);
  if (!f) {
    diag_error(d, (SrcLoc){0}, "out of memory");
    return GPUCC_ERR_OUT_OF_MEMORY;
  }
  GpuccStatus st = GPUCC_ERR_INVALID_ARGUMENT;
  if (read_flags(f, flags, nflags, d))
    goto done;
  /* text that does not begin with 'graph': ONNX by the name's say, else the DSL's parser
   * tells what is wrong with it */
  ModelFormat fmt = model_format(bytes, len);
  size_t n = name ? strlen(name) : 0;
  if (fmt == FORMAT_UNKNOWN)
    fmt = n > 5 && !strcmp(name + n - 5, ".onnx") ? FORMAT_ONNX : FORMAT_DSL;
  if (fmt == FORMAT_ELF)
    diag_error(d, (SrcLoc){0}, "%s is a compiled model (a model.so): load it instead",
               name ? name : "<memory>");
  else if (fmt == FORMAT_DSL)
    st = gpucc_compile_dsl(bytes, len, name, &f->opt, device, out, d);
  else
    st = gpucc_compile_onnx(bytes, len, name, &f->opt, device, out, d);
done:
  free(f);
  return st;
}
