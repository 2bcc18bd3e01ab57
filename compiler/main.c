/* main.c: the gpucc command. It is the only place that prints to the user and picks exit
 * codes: library calls hand back a Diag, and this file prints it and exits 1 (bad input)
 * or 2 (bad usage). Two modes share the front half (parse the file, then the pipeline
 * of compiler/build.h, the JIT API's, as far as the mode needs):
 *   gpucc FILE [options]        compile: print the IR (--emit=ir), the CUDA C, a cubin,
 *                               the memory plan, a model.so (-o OUT), or a summary
 *   gpucc run FILE [options]    run a model.so, or the graph, on the GPU (--cpu, or no
 *                               GPU: with the reference executor)
 *   gpucc inspect FILE          what a model.so, .gir or .onnx holds (compiler/inspect.c)
 * Output files are written to a temporary name and renamed, so a failed run leaves
 * nothing behind. docs/ir.md describes the input language; README.md the options. */
#include "codegen/codegen.h"
#include "compiler/build.h"
#include "compiler/gpucc.h"
#include "compiler/nvrtc.h"
#include "frontends/frontends.h"
#include "passes/passes.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_INPUT = 1, EXIT_USAGE = 2, MAX_PASSES = 64 };

/* The libgpucc_model.so stub every model.so is a copy of (bin2c, at build time). */
extern const unsigned char gpucc_model_stub[];
extern const unsigned long long gpucc_model_stub_len;

/* A model.so embeds weights up to this size; larger ones go to OUT.weights beside it. */
#define EMBED_WEIGHTS_MAX ((size_t)1 << 30)

typedef enum Mode { MODE_COMPILE, MODE_RUN, MODE_INSPECT } Mode;

/* run: --compare, what gpucc's outputs are held against */
typedef enum Compare { COMPARE_NONE, COMPARE_ONNXRUNTIME, COMPARE_REFERENCE } Compare;

/* NAME=VALUE of --input and --dim, split at the first '='. */
typedef struct Binding {
  const char *arg; /* the whole argument, for messages */
  char *name;
  const char *value;
} Binding;

typedef struct Options {
  Mode mode;
  int argc;   /* the command line, which a model.so records */
  char **argv;
  bool json;  /* inspect: --json */
  const char *file;
  const char *emit; /* NULL, "ir", "cuda" or "cubin"; NULL with -o: a model.so */
  const char *arch; /* --arch for --emit=cuda/cubin/plan and model.so; NULL: the default */
  int sms;          /* --sms N: the target's SM count instead of the table's (0: the table's) */
  int variants;     /* --variants N: a group's kernel variants at most (0: codegen's own) */
  Target target;    /* compile mode: --arch's entry of the target table, --sms over it */
  const char *out;  /* -o */
  int iters;        /* run: --iters N, timed graph replays (0: none) */
  int device;       /* run: --device N */
  const Pass *passes[MAX_PASSES]; /* what the pipeline will run, for the summary */
  int npasses;
  const char *passes_arg; /* --passes, NULL when not given */
  bool no_fuse;      /* --no-fuse: leave the passes that serve fusion out */
  Precision precision; /* --precision */
  bool precision_given;
  Binding *calib; /* --calibrate NAME=FILE.npy */
  int ncalib;
  bool print_after_all;
  bool report; /* -v, --report */
  bool quiet;  /* -q, --quiet: no progress line */
  const char *dump_dir;
  bool cpu;
  bool so; /* FILE is a compiled model (ends in .so) */
  const char *output_dir;
  bool print_all; /* run: print every element of an output, not numpy's summary */
  Compare compare;  /* run: --compare */
  double rtol, atol; /* --rtol, --atol: negative when not given */
  const char *model_source; /* --model-source: a model.so's .onnx or .gir */
  Binding *inputs;
  int ninputs;
  Binding *dims;
  int ndims;
  /* an ONNX model (file_format: by its bytes, else a FILE ending in .onnx) */
  bool onnx;
  Binding *shapes; /* --shape NAME=AxBxC */
  int nshapes;
  Binding *consts; /* --const NAME=PATH.npy */
  int nconsts;
  bool check_ops;
  int64_t max_weight_bytes; /* 0: the loader's default */
} Options;

/* ---------------------------------------------------------------- progress
 *
 * A compile that has taken 2 s shows how it goes on stderr: on a terminal one line
 * rewritten in place ("gpucc: classes 37/240 [#####     ] 12 s"), else a plain line
 * when the stage changes, a tenth of it is done or 10 s have passed. -q, and -v (whose
 * report says more), show none. */

static struct {
  bool on, tty, shown;
  struct timespec t0;
  char what[16];
  int tenth;
  double printed;
} progress_state;

static double since_start(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - progress_state.t0.tv_sec) +
         (double)(t.tv_nsec - progress_state.t0.tv_nsec) / 1e9;
}

static void progress(void *arg, const char *what, int done, int total) {
  (void)arg;
  double t = since_start();
  if (!progress_state.on || t < 2.0 || total <= 0)
    return;
  int tenth = done * 10 / total;
  if (progress_state.tty) {
    char bar[21];
    int full = done * 20 / total;
    for (int i = 0; i < 20; i++)
      bar[i] = i < full ? '#' : ' ';
    bar[20] = 0;
    fprintf(stderr, "\rgpucc: %-8s %d/%d [%s] %.0f s\033[K", what, done, total, bar, t);
    progress_state.shown = true;
  } else if (strcmp(what, progress_state.what) || tenth != progress_state.tenth ||
             t - progress_state.printed >= 10) {
    fprintf(stderr, "gpucc: %s %d/%d (%.0f s)\n", what, done, total, t);
    progress_state.printed = t;
  }
  fflush(stderr);
  snprintf(progress_state.what, sizeof progress_state.what, "%s", what);
  progress_state.tenth = tenth;
}

static void progress_start(const Options *o) {
  progress_state.on = !o->quiet && !o->report;
  progress_state.tty = isatty(STDERR_FILENO);
  clock_gettime(CLOCK_MONOTONIC, &progress_state.t0);
}

/* Ends the line a terminal's progress left open. */
static void progress_end(void) {
  if (progress_state.shown)
    fputc('\n', stderr);
  progress_state.shown = false;
}

/* ---------------------------------------------------------------- messages */

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...) {
  va_list ap;
  progress_end();
  va_start(ap, fmt);
  fputs("gpucc: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs("\nrun 'gpucc --help' for usage\n", stderr);
  return EXIT_USAGE;
}

static int input_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int input_error(const char *fmt, ...) {
  va_list ap;
  progress_end();
  va_start(ap, fmt);
  fputs("gpucc: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return EXIT_INPUT;
}

/* A library's message (its Diag) as a usage error: the same words, exit 2. */
static int usage_diag(const Diag *d) {
  return usage_error("%s", d->msg + (strncmp(d->msg, "error: ", 7) ? 0 : 7));
}

/* A Diag's message starts with "file:line:col: error:" when it has a place; one without
 * gets the program's name so every error line says who is talking. */
static int diag_exit(const Diag *d, int code) {
  progress_end();
  if (!strncmp(d->msg, "error: ", 7))
    fputs("gpucc: ", stderr);
  fprintf(stderr, "%s\n", d->msg);
  return code;
}

static void print_help(void) {
  printf("usage: gpucc FILE [options]            compile FILE (.gir, .onnx); FILE '-' reads stdin\n"
         "       gpucc run FILE [run options]    run FILE (a model.so, .gir or .onnx) on the GPU\n"
         "       gpucc inspect FILE [--json]     what FILE holds: a model.so's build, inputs,\n"
         "                                       outputs, classes, kernels and memory (no GPU\n"
         "                                       needed); a .gir's or .onnx's ops and weights\n"
         "       gpucc --help | --version\n"
         "\n"
         "compile options:\n"
         "  --emit=ir               print the IR after the passes given by --passes (by\n"
         "                          default none: the input in canonical form)\n"
         "  --passes=a,b,...        run exactly these passes ('--passes=' runs none); without\n"
         "                          it the default pipeline runs, except with --emit=ir\n"
         "  --no-fuse               the default pipeline without the passes that serve\n"
         "                          fusion (concat_gemms, sink_reshapes, clone_masks,\n"
         "                          fuse): one kernel or GEMM per node\n"
         "  --precision=P           fp32 (the default), tf32 (f32 matmuls and convolutions\n"
         "                          on TF32 tensor cores), bf16 or fp16 (f32 tensors stored\n"
         "                          in that type, sums in f32; inputs and outputs keep\n"
         "                          their types), or fp8 (bf16, and linear layers on e4m3\n"
         "                          tensor cores)\n"
         "  --calibrate NAME=F.npy  fp8: a value of input NAME to calibrate the scales of\n"
         "                          the fp8 GEMMs' inputs on (one per input; repeatable)\n"
         "  --print-after-all       print the IR to stderr before the first pass and after\n"
         "                          each pass\n"
         "  --dump-ir=DIR           write DIR/00-input.gir, DIR/01-<pass>.gir, ...\n"
         "  -v, --report            say what each pass did, how long it took and the kernels\n"
         "                          before and after it, on stderr\n"
         "  -q, --quiet             no progress line (a compile past 2 s shows one on\n"
         "                          stderr: the classes and NVRTC's units done)\n"
         "  --emit=cuda             print the generated CUDA C (symbolic dims bound with\n"
         "                          --dim SYM=N; runs the default pipeline first)\n"
         "  --emit=cubin -o F       compile it with NVRTC and write the cubin to F\n"
         "  --emit=plan             print the memory plan: every buffer's arena offset, size\n"
         "                          and lifetime, and the arena against its lower bound\n"
         "  -o OUT.so               without --emit: compile a model.so, a shared library\n"
         "                          that runs the model (runtime/runtime.h declares its C\n"
         "                          API); weights over 1 GiB go to OUT.so.weights beside it\n"
         "  --arch=sm_XX            target of --emit=cuda/cubin/plan and model.so: sm_80,\n"
         "                          sm_86, sm_89, sm_90 (the default) or sm_90a, with the\n"
         "                          SM count and cache of one GPU of it (-v says which)\n"
         "  --sms=N                 the target's SM count instead (codegen fills N SMs)\n"
         "  --variants=N            kernel variants a GEMM or convolution carries at most,\n"
         "                          timed on the GPU at create (1: only the default of\n"
         "                          each, the shortest NVRTC time; default: all, up to 8)\n"
         "  --dim SYM=N             bind symbolic dim SYM to N before the passes\n"
         "  --dim SYM=LO..HI        give SYM a range of sizes (also 1,8,32..64); a range\n"
         "                          does not compile to a model.so yet: bind a size\n");
  printf("\n"
         "ONNX models (FILE told by its bytes, whatever its name), both modes:\n"
         "  --dim SYM=N             bind symbolic dim SYM to N when loading (SYM=LO..HI:\n"
         "                          a range, which 'gpucc run --cpu' runs by shape class)\n"
         "  --shape NAME=AxBxC      give input NAME this static shape (repeatable)\n"
         "  --const NAME=PATH.npy   make input NAME a constant with this value, for inputs\n"
         "                          that decide shapes (a Reshape's shape); repeatable\n"
         "  --max-weight-bytes=N    refuse models whose weights need more than N bytes\n"
         "  --check-ops             list every unsupported op of the model (exit 0 when\n"
         "                          there is none, 1 otherwise); compiles nothing\n"
         "\n"
         "run options (and --passes, --print-after-all, --dump-ir, --report as above):\n"
         "  FILE.so                 a model.so from 'gpucc X -o FILE.so' runs on the GPU\n"
         "  --cpu                   use the reference executor instead of the GPU (the\n"
         "                          default where there is no GPU, with a note saying so)\n"
         "  --device N              the CUDA device to run on (default 0)\n"
         "  --iters N               after the run, time N replays of the model's CUDA graph\n"
         "                          and print the median and the kernels per inference\n"
         "                          (GPU only)\n"
         "  --input NAME=PATH       the value of input NAME (repeatable): a .npy or an ONNX\n"
         "                          TensorProto (.pb) file; inputs not given are\n"
         "                          random(seed = 1 + input index, scale = 1)\n"
         "  --input DIR             DIR/input_0.pb, input_1.pb, ... (an ONNX model folder's\n"
         "                          test_data_set_N/): each for the input it names, else by\n"
         "                          position\n"
         "  --dim SYM=N             size of symbolic dim SYM for inputs not given\n"
         "                          (default: from the given inputs, else the lowest\n"
         "                          size of its range, else 1); SYM=LO..HI: its range\n"
         "  --output-dir DIR        write each output to DIR/<name>.npy instead of printing\n"
         "  --print-all             print every element (an output of more than 1000 is\n"
         "                          summarized as numpy does: 3 at each end of each axis)\n"
         "  --compare=onnxruntime   run the ONNX model (FILE, or the model.so's source) with\n"
         "                          onnxruntime (CPU, through python3 or $GPUCC_PYTHON) on\n"
         "                          the same inputs and compare: per output the largest\n"
         "                          absolute error, where, and the relative error by norm\n"
         "                          ||got - want|| / ||want||; exit 1 beyond the tolerance\n"
         "  --compare=reference     the same against the reference executor on FILE's graph\n"
         "                          (a model.so's source); gpucc's run is the GPU's\n"
         "  --model-source PATH     the .onnx or .gir a model.so was built from (default:\n"
         "                          the source it records, if that file is unchanged)\n"
         "  --rtol X                largest relative error by norm (default: 1e-4, or the\n"
         "                          bound of --precision's mode in docs/precision.md)\n"
         "  --atol X                largest absolute error (default: not checked)\n"
         "\n"
         "passes:\n");
  for (int i = 0; pass_registry[i]; i++)
    printf("  %-22s  %s\n", pass_registry[i]->name, pass_registry[i]->summary);
  printf("default pipeline: ");
  for (int i = 0; pass_default_pipeline[i]; i++)
    printf("%s%s", i ? "," : "", pass_default_pipeline[i]->name);
  printf("\n");
}

/* ---------------------------------------------------------------- command line */

/* Matches `arg` against an option taking a value: "--name=V", or "--name V" / "-o V"
 * (consuming the next argument). Returns the value, or NULL when arg is another option;
 * *missing is set when the option is there but its value is not. */
static const char *option_value(const char *arg, const char *name, int argc, char **argv,
                                int *i, bool *missing) {
  size_t len = strlen(name);
  if (strncmp(arg, name, len) != 0)
    return NULL;
  if (arg[len] == '=' && name[1] == '-')
    return arg + len + 1;
  if (arg[len] != 0)
    return NULL;
  if (*i + 1 >= argc) {
    *missing = true;
    return NULL;
  }
  return argv[++*i];
}


static int add_binding(Binding *list, int *n, const char *opt, const char *arg) {
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg || !eq[1])
    return usage_error("%s expects NAME=VALUE, got '%s'", opt, arg);
  Binding *b = &list[(*n)++];
  b->arg = arg;
  b->name = strndup(arg, (size_t)(eq - arg));
  b->value = eq + 1;
  if (!b->name) {
    (*n)--;
    return input_error("out of memory");
  }
  return 0;
}

static void free_options(Options *o) {
  for (int i = 0; i < o->ninputs; i++)
    free(o->inputs[i].name);
  for (int i = 0; i < o->ndims; i++)
    free(o->dims[i].name);
  for (int i = 0; i < o->nshapes; i++)
    free(o->shapes[i].name);
  for (int i = 0; i < o->nconsts; i++)
    free(o->consts[i].name);
  for (int i = 0; i < o->ncalib; i++)
    free(o->calib[i].name);
  free(o->calib);
  free(o->consts);
  free(o->inputs);
  free(o->dims);
  free(o->shapes);
}

/* Up to n of path's first bytes into buf; how many, or -1 for a file that cannot be read
 * here (reading it later says why). */
static long file_head(const char *path, char *buf, size_t n) {
  char why[256];
  FILE *f = fopen_regular(path, NULL, why, sizeof why);
  if (!f)
    return -1;
  long got = (long)fread(buf, 1, n, f);
  fclose(f);
  return got;
}

/* path's format from its first bytes (frontends.h's model_format): a model.so, an ONNX
 * model or the DSL, whatever its name; by its extension where the bytes do not say (text
 * that does not begin with "graph", a file that cannot be read here: reading it later
 * says why); FORMAT_UNKNOWN (the DSL) for standard input and anything else. */
static ModelFormat format_of(const char *path) {
  size_t flen = path ? strlen(path) : 0;
  char head[512];
  long got = path && strcmp(path, "-") ? file_head(path, head, sizeof head) : -1;
  ModelFormat f = got < 0 ? FORMAT_UNKNOWN : model_format(head, (size_t)got);
  /* bytes that are not text are ONNX's, unless the name says DSL (whose parser then
   * names the first byte that is not text) */
  if (f == FORMAT_ONNX && flen > 4 && !strcmp(path + flen - 4, ".gir"))
    f = FORMAT_DSL;
  if (!f && flen > 5 && !strcmp(path + flen - 5, ".onnx"))
    f = FORMAT_ONNX;
  if (!f && flen > 3 && !strcmp(path + flen - 3, ".so"))
    f = FORMAT_ELF;
  return f;
}

static void file_format(Options *o) {
  ModelFormat f = format_of(o->file);
  o->onnx = f == FORMAT_ONNX;
  o->so = f == FORMAT_ELF;
}

/* --compare and the options that go with it (run mode). */
static int check_compare(const Options *o) {
  if (!o->compare)
    return o->rtol >= 0 || o->atol >= 0 || o->model_source
               ? usage_error("options '--rtol', '--atol' and '--model-source' go with "
                             "'--compare'")
               : 0;
  if (o->compare == COMPARE_REFERENCE && o->cpu)
    return usage_error("--compare=reference holds the GPU's run to the reference executor; "
                       "with '--cpu' both would be the reference executor");
  if (o->output_dir || o->print_all)
    return usage_error("option '%s' prints or writes the outputs; with '--compare' the "
                       "comparison is printed instead",
                       o->output_dir ? "--output-dir" : "--print-all");
  if (o->file && !strcmp(o->file, "-"))
    return usage_error("--compare reads FILE again for the comparison: give a file, not "
                       "standard input");
  if (o->model_source && !o->so)
    return usage_error("--model-source names the .onnx or .gir a model.so was built from; "
                       "%s is not a model.so", o->file ? o->file : "FILE");
  if (o->compare == COMPARE_ONNXRUNTIME && o->file && !o->so && !o->onnx)
    return usage_error("--compare=onnxruntime runs ONNX models, and %s is a .gir graph (use "
                       "--compare=reference)", o->file);
  return 0;
}

/* The options only one mode understands, checked once all are read. */
static int check_mode(const Options *o) {
  if (o->mode == MODE_RUN) {
    if (o->emit)
      return usage_error("option '--emit' is not for 'gpucc run'");
    if (o->out)
      return usage_error("option '-o' is not for 'gpucc run' (use --output-dir)");
    if (o->arch || o->sms)
      return usage_error("option '%s' is not for 'gpucc run' (it compiles for the GPU it "
                         "runs on)", o->arch ? "--arch" : "--sms");
    if (o->iters && o->cpu)
      return usage_error("option '--iters' times the GPU; it does not go with '--cpu'");
    if (o->so && o->cpu)
      return usage_error("a model.so runs only on the GPU; '--cpu' needs the model's .gir "
                         "or .onnx file");
    if (o->so && (o->passes_arg || o->print_after_all || o->dump_dir || o->ndims ||
                  o->precision_given || o->ncalib || o->variants))
      return usage_error("a model.so is compiled already: '--passes', '--precision', "
                         "'--calibrate', '--variants', '--print-after-all', '--dump-ir' and "
                         "'--dim' are for .gir and .onnx files");
    int rc = check_compare(o);
    if (rc)
      return rc;
  } else {
    if (o->iters || o->device)
      return usage_error("options '--iters' and '--device' are only for 'gpucc run'");
    if (o->so)
      return usage_error("%s is a compiled model; run it with 'gpucc run %s'", o->file, o->file);
    if (o->cpu)
      return usage_error("option '--cpu' is only for 'gpucc run'");
    if (o->ninputs)
      return usage_error("option '--input' is only for 'gpucc run'");
    bool code = (o->emit && (!strcmp(o->emit, "cuda") || !strcmp(o->emit, "cubin") ||
                             !strcmp(o->emit, "plan"))) ||
                (!o->emit && o->out);
    if (o->output_dir || o->print_all || o->compare || o->model_source)
      return usage_error("option '%s' is only for 'gpucc run'",
                         o->output_dir ? "--output-dir" : o->print_all ? "--print-all"
                         : o->compare ? "--compare" : "--model-source");
    if (o->rtol >= 0 || o->atol >= 0)
      return usage_error("options '--rtol' and '--atol' are for 'gpucc run --compare'");
    if (o->emit && strcmp(o->emit, "ir") != 0 && !code)
      return usage_error("unknown --emit kind '%s' (known: ir, cuda, cubin, plan)", o->emit);
    if (o->emit && !strcmp(o->emit, "cubin") && (!o->out || !strcmp(o->out, "-")))
      return usage_error("--emit=cubin needs -o FILE");
    if ((o->arch || o->sms) && !((o->emit && strcmp(o->emit, "ir") != 0) || (!o->emit && o->out)))
      return usage_error("option '%s' is for --emit=cuda/cubin/plan and model.so (-o)",
                         o->arch ? "--arch" : "--sms");
    Diag ad = {0};
    if (o->arch && nvrtc_check_arch(o->arch, &ad))
      return usage_diag(&ad);
    if (o->out && !o->emit && !strcmp(o->out, "-"))
      return usage_error("a model.so cannot go to standard output: give -o FILE.so");
  }
  if (!o->file)
    return usage_error("no input file");
  if (o->ncalib && o->precision != PRECISION_FP8)
    return usage_error("--calibrate sets the input scales of fp8 GEMMs; it goes with "
                       "--precision=fp8");
  if (!o->onnx && (o->nshapes || o->nconsts || o->check_ops || o->max_weight_bytes))
    return usage_error("options '--shape', '--const', '--check-ops' and '--max-weight-bytes' "
                       "are for ONNX models (FILE.onnx)");
  if (o->check_ops && o->mode == MODE_RUN)
    return usage_error("option '--check-ops' is not for 'gpucc run'");
  for (int i = 0; i < o->nshapes; i++) {
    int64_t dims[IR_MAX_RANK];
    if (onnx_parse_shape(o->shapes[i].value, dims) < 0)
      return usage_error("--shape %s: expected sizes like 1x3x224x224 (at most %d), or 'scalar'",
                         o->shapes[i].arg, IR_MAX_RANK);
  }
  for (int i = 0; i < o->ndims; i++) {
    char why[160];
    int64_t size;
    DimRange r;
    if (dim_value_parse(o->dims[i].value, &size, &r, why, sizeof why) < 0)
      return usage_error("--dim %s: %s", o->dims[i].arg, why);
  }
  return 0;
}

/* The pass list: --passes if given, else the default pipeline, except that --emit=ir
 * alone prints the input as it is (like mlir-opt). */
static int choose_passes(Options *o, const char *passes_arg) {
  if (passes_arg && o->no_fuse)
    return usage_error("--no-fuse leaves fuse out of the default pipeline; with --passes, "
                       "name the passes you want");
  if (passes_arg) {
    Diag d = {0};
    o->npasses = pass_parse_list(passes_arg, o->passes, MAX_PASSES, &d);
    if (o->npasses < 0) {
      /* The message is the library's; the usage hint is ours. */
      diag_exit(&d, EXIT_USAGE);
      fputs("run 'gpucc --help' for usage\n", stderr);
      return EXIT_USAGE;
    }
    return precision_check_passes(o->precision, o->passes, o->npasses, &d) ? usage_diag(&d)
                                                                              : 0;
  }
  o->npasses = 0;
  if (o->mode == MODE_COMPILE && o->emit && !strcmp(o->emit, "ir"))
    return o->precision == PRECISION_FP32
               ? 0
               : usage_error("--emit=ir runs only the passes --passes names; add "
                             "--passes=precision (or the whole list) for --precision=%s",
                             precision_name(o->precision));
  for (int i = 0; pass_default_pipeline[i] && i < MAX_PASSES; i++)
    if (!(o->no_fuse && pass_default_pipeline[i]->fusion))
      o->passes[o->npasses++] = pass_default_pipeline[i];
  return 0;
}

/* Returns 0 to go on, -1 when --help or --version was answered, or an exit code. */
static int parse_args(int argc, char **argv, Options *o) {
  memset(o, 0, sizeof *o);
  o->rtol = o->atol = -1;
  o->inputs = calloc((size_t)argc, sizeof *o->inputs);
  o->dims = calloc((size_t)argc, sizeof *o->dims);
  o->shapes = calloc((size_t)argc, sizeof *o->shapes);
  o->consts = calloc((size_t)argc, sizeof *o->consts);
  o->calib = calloc((size_t)argc, sizeof *o->calib);
  if (!o->inputs || !o->dims || !o->shapes || !o->consts || !o->calib)
    return input_error("out of memory");
  o->argc = argc;
  o->argv = argv;
  int i = 1;
  if (argc > 1 && !strcmp(argv[1], "run")) {
    o->mode = MODE_RUN;
    i = 2;
  } else if (argc > 1 && !strcmp(argv[1], "inspect")) {
    o->mode = MODE_INSPECT;
    for (i = 2; i < argc; i++) {
      if (!strcmp(argv[i], "--json"))
        o->json = true;
      else if (argv[i][0] == '-' && argv[i][1])
        return usage_error("unknown option '%s' for 'gpucc inspect' (it takes --json)", argv[i]);
      else if (o->file)
        return usage_error("'gpucc inspect' takes one file");
      else
        o->file = argv[i];
    }
    return o->file ? 0 : usage_error("'gpucc inspect' needs a file");
  }
  const char *passes_arg = NULL;
  bool only_files = false;
  for (; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    bool missing = false;
    if (only_files || a[0] != '-' || !strcmp(a, "-")) {
      if (o->file)
        return usage_error("unexpected argument '%s' (only one input file)", a);
      o->file = a;
    } else if (!strcmp(a, "--")) {
      only_files = true;
    } else if (!strcmp(a, "--help")) {
      print_help();
      return -1;
    } else if (!strcmp(a, "--version")) {
      printf("gpucc %s\n", GPUCC_VERSION);
      return -1;
    } else if (!strcmp(a, "--print-after-all")) {
      o->print_after_all = true;
    } else if (!strcmp(a, "--print-all")) {
      o->print_all = true;
    } else if (!strcmp(a, "-v") || !strcmp(a, "--report")) {
      o->report = true;
    } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
      o->quiet = true;
    } else if (!strcmp(a, "--cpu")) {
      o->cpu = true;
    } else if (!strcmp(a, "--no-fuse")) {
      o->no_fuse = true;
    } else if (!strcmp(a, "--check-ops")) {
      o->check_ops = true;
    } else if ((v = option_value(a, "--shape", argc, argv, &i, &missing))) {
      int rc = add_binding(o->shapes, &o->nshapes, "--shape", v);
      if (rc)
        return rc;
    } else if ((v = option_value(a, "--const", argc, argv, &i, &missing))) {
      int rc = add_binding(o->consts, &o->nconsts, "--const", v);
      if (rc)
        return rc;
    } else if ((v = option_value(a, "--max-weight-bytes", argc, argv, &i, &missing))) {
      char *end;
      errno = 0;
      long long n = strtoll(v, &end, 10);
      if (!*v || *end || errno || n <= 0)
        return usage_error("--max-weight-bytes expects a positive byte count, got '%s'", v);
      o->max_weight_bytes = n;
    } else if ((v = option_value(a, "--emit", argc, argv, &i, &missing))) {
      o->emit = v;
    } else if ((v = option_value(a, "--arch", argc, argv, &i, &missing))) {
      o->arch = v;
    } else if ((v = option_value(a, "-o", argc, argv, &i, &missing))) {
      o->out = v;
    } else if ((v = option_value(a, "--precision", argc, argv, &i, &missing))) {
      Diag d = {0};
      if (precision_parse(v, &o->precision, &d))
        return usage_diag(&d);
      o->precision_given = true;
    } else if ((v = option_value(a, "--calibrate", argc, argv, &i, &missing))) {
      int rc = add_binding(o->calib, &o->ncalib, "--calibrate", v);
      if (rc)
        return rc;
    } else if ((v = option_value(a, "--passes", argc, argv, &i, &missing))) {
      passes_arg = v;
    } else if ((v = option_value(a, "--dump-ir", argc, argv, &i, &missing))) {
      o->dump_dir = v;
    } else if ((v = option_value(a, "--output-dir", argc, argv, &i, &missing))) {
      o->output_dir = v;
    } else if ((v = option_value(a, "--compare", argc, argv, &i, &missing))) {
      o->compare = !strcmp(v, "onnxruntime") ? COMPARE_ONNXRUNTIME
                   : !strcmp(v, "reference") ? COMPARE_REFERENCE
                                             : COMPARE_NONE;
      if (!o->compare && *v)
        return usage_error("unknown --compare '%s' (known: onnxruntime, reference)", v);
    } else if ((v = option_value(a, "--model-source", argc, argv, &i, &missing))) {
      o->model_source = v;
    } else if ((v = option_value(a, "--rtol", argc, argv, &i, &missing)) ||
               (v = option_value(a, "--atol", argc, argv, &i, &missing))) {
      char *end;
      errno = 0;
      double x = strtod(v, &end);
      if (!*v || *end || errno || !isfinite(x) || x < 0)
        return usage_error("%s expects a non-negative number, got '%s'",
                           a[2] == 'r' ? "--rtol" : "--atol", v);
      *(a[2] == 'r' ? &o->rtol : &o->atol) = x;
    } else if ((v = option_value(a, "--input", argc, argv, &i, &missing))) {
      /* a folder alone: its input_0.pb, input_1.pb, ... (an ONNX test_data_set_N/) */
      struct stat st;
      bool folder = !strchr(v, '=') && stat(v, &st) == 0 && S_ISDIR(st.st_mode);
      int rc = folder ? (o->inputs[o->ninputs++] = (Binding){v, NULL, v}, 0)
               : strchr(v, '=') ? add_binding(o->inputs, &o->ninputs, "--input", v)
                                : usage_error("--input expects NAME=VALUE or a folder, got '%s'", v);
      if (rc)
        return rc;
    } else if ((v = option_value(a, "--iters", argc, argv, &i, &missing)) ||
               (v = option_value(a, "--device", argc, argv, &i, &missing)) ||
               (v = option_value(a, "--sms", argc, argv, &i, &missing)) ||
               (v = option_value(a, "--variants", argc, argv, &i, &missing))) {
      bool dev = a[2] == 'd';
      const char *opt = dev ? "--device" : a[2] == 'i' ? "--iters" : a[2] == 'v' ? "--variants" : "--sms";
      char *end;
      errno = 0;
      long n = strtol(v, &end, 10);
      if (!*v || *end || errno || n < (dev ? 0 : 1) || n > 1000000)
        return usage_error("%s expects a %s number, got '%s'", opt,
                           dev ? "non-negative" : "positive", v);
      *(dev ? &o->device : a[2] == 'i' ? &o->iters : a[2] == 'v' ? &o->variants : &o->sms) = (int)n;
    } else if ((v = option_value(a, "--dim", argc, argv, &i, &missing))) {
      int rc = add_binding(o->dims, &o->ndims, "--dim", v);
      if (rc)
        return rc;
    } else if (missing) {
      return usage_error("option '%s' needs an argument", a);
    } else {
      return usage_error("unknown option '%s'", a);
    }
    /* An empty value ("--dump-ir=") is as missing as no value at all, except for
     * --passes, where it means "no passes". */
    if (v && !*v && strncmp(a, "--passes", 8) != 0)
      return usage_error("option '%s' needs an argument", a);
  }
  file_format(o);
  o->passes_arg = passes_arg;
  int rc = check_mode(o);
  if (!rc) {
    Diag d = {0};
    target_for_arch(o->arch, &o->target, &d); /* check_mode checked the arch */
    if (o->sms) {
      o->target.sms = o->sms;
      o->target.source = "--sms over the table";
    }
  }
  return rc ? rc : choose_passes(o, passes_arg);
}

/* ---------------------------------------------------------------- both modes */

/* The command line's options as the pipeline's (compiler/build.h, the JIT API's), with
 * what they point into: --dim's sizes, the --calibrate files read, ONNX's --shape,
 * --const and --max-weight-bytes. opt points into the struct itself: not to be copied. */
typedef struct Compile {
  GpuccCompileOptions opt;
  OnnxOptions onnx;
  OnnxBinding *bindings; /* onnx's shapes, then its consts (borrowing o's strings) */
  const char **dim_names, **calib_names;
  int64_t *dim_sizes;
  DimRange *ranges; /* --dim SYM=LO..HI */
  int nsizes;       /* --dim SYM=N: dim_names[0..nsizes), kept after an ONNX load */
  Tensor **calib;
  int ncalib;
  OnnxModel *model; /* an ONNX model with ranged dims, parsed once for its classes' loads */
} Compile;

static void compile_free(Compile *c) {
  for (int i = 0; c->calib && i < c->ncalib; i++)
    tensor_free(c->calib[i]);
  free(c->calib);
  free(c->calib_names);
  free(c->dim_names);
  free(c->dim_sizes);
  free(c->ranges);
  free(c->bindings);
  onnx_close(c->model);
  memset(c, 0, sizeof *c);
}

/* c from o, the --calibrate files not read yet. The passes: --passes, else the default
 * pipeline (less the fusion passes with --no-fuse), except that --emit=ir alone runs
 * none (choose_passes made the same list, for the summary). */
static int compile_options(const Options *o, Compile *c, Diag *d) {
  memset(c, 0, sizeof *c);
  c->bindings = calloc((size_t)(o->nshapes + o->nconsts) + 1, sizeof *c->bindings);
  c->dim_names = calloc((size_t)o->ndims + 1, sizeof *c->dim_names);
  c->dim_sizes = calloc((size_t)o->ndims + 1, sizeof *c->dim_sizes);
  c->calib_names = calloc((size_t)o->ncalib + 1, sizeof *c->calib_names);
  c->calib = calloc((size_t)o->ncalib + 1, sizeof *c->calib);
  c->ranges = calloc((size_t)o->ndims + 1, sizeof *c->ranges);
  if (!c->bindings || !c->dim_names || !c->dim_sizes || !c->calib_names || !c->calib ||
      !c->ranges)
    return diag_error(d, (SrcLoc){0}, "out of memory");
  c->ncalib = o->ncalib;
  OnnxBinding *p = c->bindings;
  for (int i = 0; i < o->nshapes; i++)
    *p++ = (OnnxBinding){o->shapes[i].name, o->shapes[i].value};
  for (int i = 0; i < o->nconsts; i++)
    *p++ = (OnnxBinding){o->consts[i].name, o->consts[i].value};
  c->onnx = (OnnxOptions){.shapes = c->bindings, .nshapes = o->nshapes,
                          .consts = c->bindings + o->nshapes, .nconsts = o->nconsts,
                          .max_weight_bytes = o->max_weight_bytes};
  int ndims = 0, nranges = 0;
  for (int i = 0; i < o->ndims; i++) { /* each checked by check_mode */
    char why[160];
    if (dim_value_parse(o->dims[i].value, &c->dim_sizes[ndims], &c->ranges[nranges], why,
                        sizeof why)) {
      c->ranges[nranges++].sym = o->dims[i].name;
      continue;
    }
    c->dim_names[ndims++] = o->dims[i].name;
  }
  c->nsizes = ndims;
  for (int i = 0; i < o->ncalib; i++)
    c->calib_names[i] = o->calib[i].name;
  /* compile mode: --arch's target; run mode: the device's (the JIT API asks it), or on the
   * reference executor the default */
  c->opt = (GpuccCompileOptions){
      .arch = o->arch, .target = o->mode == MODE_COMPILE ? &o->target : NULL, .dim_names = c->dim_names, .dim_sizes = c->dim_sizes,
      .ndims = ndims, .ranges = c->ranges, .nranges = nranges, .passes = o->passes_arg, .no_fuse = o->no_fuse, .variants = o->variants,
      .precision = precision_name(o->precision), .calib_names = c->calib_names,
      .calib_inputs = c->calib, .ncalib = o->ncalib, .onnx = &c->onnx,
      .print_after_all = o->print_after_all ? stderr : NULL, .dump_dir = o->dump_dir,
      .report = o->report ? stderr : NULL, .progress = progress};
  if (!o->passes_arg && o->mode == MODE_COMPILE && o->emit && !strcmp(o->emit, "ir"))
    c->opt.passes = "";
  return 0;
}

/* c's options with its --dim sizes, which an ONNX model binds at each load (c->opt has
 * none left after the first). */
static GpuccCompileOptions load_options(const Compile *c) {
  GpuccCompileOptions opt = c->opt;
  opt.dim_names = c->dim_names;
  opt.dim_sizes = c->dim_sizes;
  opt.ndims = c->nsizes;
  return opt;
}

/* The class loader of an ONNX model with ranged dims (ClassLoad): c->model, parsed once,
 * at a class's sizes. */
typedef struct OnnxClass {
  const Compile *c;
} OnnxClass;

static Graph *load_onnx_class(void *arg, const char *const *names, const int64_t *sizes, int n,
                              Diag *d) {
  const OnnxClass *k = arg;
  GpuccCompileOptions opt = load_options(k->c);
  return pipeline_load_onnx(k->c->model, &opt, names, sizes, n, d);
}

/* Parses the file into *out and fills c (compile_options), reading the --calibrate files.
 * An ONNX model binds --dim at load, as the JIT's gpucc_build_onnx does
 * (pipeline_onnx_options), and then c's options have no dims left. On failure c is
 * freed and the exit code returned. */
static int load_graph(const Options *o, Compile *c, Graph **out) {
  Diag d = {0};
  Graph *g = NULL;
  int rc = compile_options(o, c, &d);
  if (!rc && o->onnx && c->opt.nranges) {
    GpuccCompileOptions opt = load_options(c);
    if (!(c->model = onnx_open(o->file, &d)) ||
        !(g = pipeline_load_onnx_ranged(c->model, &opt, &d)))
      rc = -1;
    c->opt.ndims = 0; /* bound at load */
  } else if (!rc && o->onnx) {
    OnnxOptions lo;
    GpuccCompileOptions rest;
    void *mem = NULL;
    rc = pipeline_onnx_options(&c->opt, &lo, &rest, &mem, &d);
    if (!rc && !(g = onnx_load(o->file, &lo, &d)))
      rc = -1;
    free(mem);
    c->opt = rest;
  } else if (!rc && !(g = dsl_parse_file(o->file, &d))) {
    rc = -1;
  }
  for (int i = 0; !rc && i < o->ncalib; i++)
    if (!(c->calib[i] = npy_read(o->calib[i].value, &d)))
      rc = -1;
  if (rc) {
    graph_free(g);
    compile_free(c);
    return diag_exit(&d, EXIT_INPUT);
  }
  *out = g;
  return 0;
}

/* ---------------------------------------------------------------- compile mode */

/* Prints g into OUT (big constants beside it: see ir_print_file). */
static int write_ir_file(Graph *g, const char *out) {
  Diag d = {0};
  return ir_print_file(g, out, &d) ? diag_exit(&d, EXIT_INPUT) : 0;
}

static int emit_ir(Graph *g, const char *out) {
  if (out && strcmp(out, "-") != 0)
    return write_ir_file(g, out);
  ir_print(g, stdout);
  if (fflush(stdout) != 0 || ferror(stdout))
    return input_error("cannot write to standard output: %s", strerror(errno));
  return 0;
}

/* "gpucc: mlp: 7 nodes, 4 constants after constfold,dce" */
static void print_summary(const Graph *g, const Options *o) {
  fprintf(stderr, "gpucc: %s: %d nodes, %d constants after ", g->name, g->nnodes, g->nconsts);
  if (!o->npasses)
    fputs("no passes", stderr);
  for (int i = 0; i < o->npasses; i++)
    fprintf(stderr, "%s%s", i ? "," : "", o->passes[i]->name);
  fputc('\n', stderr);
}

/* --check-ops: every unsupported op at once, one line each. */
static int check_ops(const Options *o) {
  Diag d = {0};
  char *report = NULL;
  Compile c;
  OnnxOptions lo;
  GpuccCompileOptions rest;
  void *mem = NULL;
  int n = compile_options(o, &c, &d) || pipeline_onnx_options(&c.opt, &lo, &rest, &mem, &d)
              ? -1
              : onnx_check_ops(o->file, &lo, &report, &d);
  free(mem);
  compile_free(&c);
  if (n < 0)
    return diag_exit(&d, EXIT_INPUT);
  if (n == 0)
    printf("%s: every op is supported\n", o->file);
  else
    fputs(report, stdout);
  free(report);
  return n ? EXIT_INPUT : 0;
}

/* Writes n bytes to OUT (standard output for NULL or "-") as one output file. */
static int write_bytes(const char *out, const void *data, size_t n) {
  if (!out || !strcmp(out, "-")) {
    if (fwrite(data, 1, n, stdout) != n || fflush(stdout) != 0)
      return input_error("cannot write to standard output: %s", strerror(errno));
    return 0;
  }
  Diag d = {0};
  OutFile f;
  if (!outfile_open(&f, out, &d))
    return diag_exit(&d, EXIT_INPUT);
  if (fwrite(data, 1, n, f.f) != n) {
    outfile_abort(&f);
    return input_error("cannot write '%s': %s", out, strerror(errno));
  }
  return outfile_commit(&f, &d) ? diag_exit(&d, EXIT_INPUT) : 0;
}

/* --emit=plan: the memory plan of the program, as text. */
static int emit_plan(const Graph *g, const Compiled *c, const char *out) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  int rc = f ? 0 : input_error("out of memory");
  if (f) {
    memplan_print(g, c->program, &c->memplan, f);
    rc = fclose(f) ? input_error("out of memory") : write_bytes(out, text, len);
  }
  free(text);
  return rc;
}

/* The SHA-256 of the file at path as 64 hex digits into hex; -1 when it cannot be read. */
static int file_sha256(const char *path, char hex[65]) {
  FILE *f = fopen(path, "rb");
  EVP_MD_CTX *c = EVP_MD_CTX_new();
  int ok = f && c && EVP_DigestInit_ex(c, EVP_sha256(), NULL);
  unsigned char buf[1 << 16];
  size_t n;
  while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0)
    ok = EVP_DigestUpdate(c, buf, n);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  ok = ok && !ferror(f) && EVP_DigestFinal_ex(c, md, &len) && len == 32;
  for (unsigned i = 0; ok && i < len; i++)
    snprintf(hex + 2 * i, 3, "%02x", md[i]);
  EVP_MD_CTX_free(c);
  if (f)
    fclose(f);
  return ok ? 0 : -1;
}

/* The SHA-256 a model.so records of its source, computed on a thread of its own while the
 * model compiles: a BERT-base's 440 MB take a core a quarter of a second, which the
 * passes, one thread, leave free. */
static struct {
  pthread_t thread;
  bool started;
  const char *path;
  int rc;
  char hex[65];
} source_hash;

static void *source_hash_main(void *arg) {
  (void)arg;
  source_hash.rc = file_sha256(source_hash.path, source_hash.hex);
  return NULL;
}

static void source_hash_start(const char *path) {
  source_hash.path = path;
  source_hash.started = !pthread_create(&source_hash.thread, NULL, source_hash_main, NULL);
}

/* The thread ended, whatever the compile did: exit's handlers (OpenSSL's cleanup) must not
 * run under it. */
static void source_hash_wait(void) {
  if (source_hash.started)
    pthread_join(source_hash.thread, NULL);
  source_hash.started = false;
}

/* The source's hash (NULL when it cannot be read): the thread's, else computed now. */
static const char *source_hash_of(const char *path) {
  if (source_hash.started && !strcmp(source_hash.path, path)) {
    source_hash_wait();
  } else {
    source_hash.path = path;
    source_hash.rc = file_sha256(path, source_hash.hex);
  }
  return source_hash.rc ? NULL : source_hash.hex;
}

/* arg to f as a shell would read it back: bare when it holds only safe characters,
 * else in single quotes. */
static void shell_quote(FILE *f, const char *arg) {
  bool bare = *arg != 0;
  for (const char *p = arg; *p && bare; p++)
    bare = isalnum((unsigned char)*p) || strchr("%+,-./:=@_", *p);
  if (bare) {
    fputs(arg, f);
    return;
  }
  fputc('\'', f);
  for (const char *p = arg; *p; p++) {
    if (*p == '\'')
      fputs("'\\''", f);
    else if (*p == '\n')
      fputs("'$'\\n''", f);
    else
      fputc(*p, f);
  }
  fputc('\'', f);
}

/* How a model.so was built, as it records it (`gpucc inspect`): gpucc's version, the
 * command line, the source and its SHA-256, the target. No time or host: two builds of
 * the same model with the same command write the same bytes. NULL when out of memory. */
static char *build_info(const Options *o, const GpuccBuild *b) {
  char *s = NULL;
  const char *hex;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  if (!f)
    return NULL;
  fputs("gpucc: " GPUCC_VERSION "\ncommand: gpucc", f);
  for (int i = 1; i < o->argc; i++) {
    fputc(' ', f);
    shell_quote(f, o->argv[i]);
  }
  fprintf(f, "\nsource: %s\n", strcmp(o->file, "-") ? o->file : "<stdin>");
  if (strcmp(o->file, "-") && (hex = source_hash_of(o->file)))
    fprintf(f, "source_sha256: %s\n", hex);
  fprintf(f, "precision: %s\narch: %s\n", precision_name(o->precision), b->arch);
  if (fclose(f)) {
    free(s);
    return NULL;
  }
  return s;
}

/* -o OUT without --emit: the model.so of the plan the pipeline built. */
static int emit_model_so(const Graph *g, const Options *o, const GpuccBuild *b, int nclasses) {
  char err[1024];
  char *info = build_info(o, b);
  if (!info)
    return input_error("out of memory");
  GpuccStatus st = gpucc_write_model_so(gpucc_model_stub, (size_t)gpucc_model_stub_len, o->out,
                                        b->plan, b->plan_len, b->weights, b->weights_len, info,
                                        EMBED_WEIGHTS_MAX, err, sizeof err);
  free(info);
  if (st)
    return input_error("%s", err);
  if (o->report && nclasses)
    fprintf(stderr, "gpucc: %s: %s for %s: %d shape classes, %d kernel launches in the largest; "
            "arena %" PRIu64 " bytes, weights %zu bytes%s\n", o->out, g->name, b->arch, nclasses,
            b->nkernels, b->arena_bytes, b->weights_len,
            b->weights_len > EMBED_WEIGHTS_MAX ? " (in a .weights file beside it)" : "");
  else if (o->report)
    fprintf(stderr,
            "gpucc: %s: %s for %s: %d kernel launches, %d steps; arena %" PRIu64
            " bytes (lower bound %" PRIu64 ", +%.1f%%; with no reuse %" PRIu64
            "; %d kernels in place), weights %zu bytes%s\n",
            o->out, g->name, b->arch, b->nkernels, b->nsteps, b->arena_bytes,
            b->arena_lower_bound,
            b->arena_lower_bound ? 100.0 * ((double)b->arena_bytes / (double)b->arena_lower_bound - 1) : 0.0,
            b->arena_naive_bytes, b->in_place, b->weights_len,
            b->weights_len > EMBED_WEIGHTS_MAX ? " (in a .weights file beside it)" : "");
  return 0;
}

/* How far the pipeline goes for what was asked: the graph (--emit=ir, the summary), the
 * CUDA C, the memory plan, the cubin, or everything (a model.so). */
static Stage stage_of(const Options *o) {
  if (!o->emit)
    return o->out ? STAGE_PLAN : STAGE_PASSES;
  return !strcmp(o->emit, "cuda")    ? STAGE_CODEGEN
         : !strcmp(o->emit, "plan")  ? STAGE_MEMPLAN
         : !strcmp(o->emit, "cubin") ? STAGE_NVRTC
                                     : STAGE_PASSES;
}

/* A graph with ranged dims, compiled into one plan of shape classes (compiler/classes.c):
 * the model.so, or the classes' CUDA C, memory plans or cubin. */
static int compile_classes(const Options *o, const Compile *c, Graph *g) {
  Diag d = {0};
  GpuccCompileOptions ro = {.ranges = c->opt.ranges, .nranges = c->opt.nranges};
  if (pipeline_bind_dims(g, &ro, &d))
    return diag_exit(&d, EXIT_INPUT);
  OnnxClass k = {c};
  ClassesBuilt cb;
  char *text = NULL;
  size_t len = 0;
  bool plan = o->emit && !strcmp(o->emit, "plan");
  FILE *pt = plan ? open_memstream(&text, &len) : NULL;
  if (plan && !pt)
    return input_error("out of memory");
  int rc = classes_build(g, &c->opt, o->onnx ? load_onnx_class : NULL, &k, stage_of(o), pt, &cb,
                         &d) ? diag_exit(&d, EXIT_INPUT) : 0;
  progress_end();
  if (pt && fclose(pt) && !rc)
    rc = input_error("out of memory");
  if (!rc && !o->emit && o->out)
    rc = emit_model_so(g, o, &cb.build, cb.nclasses);
  else if (!rc && !o->emit)
    fprintf(stderr, "gpucc: %s: %d shape classes\n", g->name, cb.nclasses);
  else if (!rc && !strcmp(o->emit, "cuda"))
    rc = write_bytes(o->out, cb.source, cb.source_len);
  else if (!rc && plan)
    rc = write_bytes(o->out, text, len);
  else if (!rc)
    rc = write_bytes(o->out, cb.binary.cubin, cb.binary.cubin_size);
  free(text);
  classes_built_free(&cb);
  return rc;
}

static int cmd_inspect(const Options *o) {
  Diag d = {0};
  return inspect_file(o->file, o->json, stdout, &d) ? diag_exit(&d, EXIT_INPUT) : 0;
}

static int compile_file(const Options *o) {
  Compile c;
  Graph *g = NULL;
  int rc = load_graph(o, &c, &g);
  if (rc)
    return rc;
  if ((c.opt.nranges || g->nranges) && (!o->emit || strcmp(o->emit, "ir"))) {
    rc = compile_classes(o, &c, g);
    compile_free(&c);
    graph_free(g);
    return rc;
  }
  Diag d = {0};
  Compiled out;
  int prc = pipeline_run(g, &c.opt, stage_of(o), &out, &d);
  progress_end();
  if (prc)
    rc = diag_exit(&d, EXIT_INPUT);
  else if (!o->emit && o->out)
    rc = emit_model_so(g, o, &out.build, 0);
  else if (!o->emit)
    print_summary(g, o);
  else if (!strcmp(o->emit, "ir"))
    rc = emit_ir(g, o->out);
  else if (!strcmp(o->emit, "cuda"))
    rc = write_bytes(o->out, out.program->source, out.program->source_len);
  else if (!strcmp(o->emit, "plan"))
    rc = emit_plan(g, &out, o->out);
  else
    rc = write_bytes(o->out, out.binary.cubin, out.binary.cubin_size);
  compiled_free(&out);
  compile_free(&c);
  graph_free(g);
  return rc;
}

static int cmd_compile(const Options *o) {
  if (o->check_ops)
    return check_ops(o);
  if (!o->emit && o->out && strcmp(o->file, "-"))
    source_hash_start(o->file);
  int rc = compile_file(o);
  source_hash_wait();
  return rc;
}

/* ---------------------------------------------------------------- run mode: inputs */

static int find_input(const Graph *g, const char *name) {
  if (name[0] == '%')
    name++;
  for (int i = 0; i < g->ninputs; i++)
    if (!strcmp(g->inputs[i]->name, name))
      return i;
  return -1;
}

static void list_inputs(const Graph *g, char *buf, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < g->ninputs && at < n; i++) {
    int k = snprintf(buf + at, n - at, "%s%%%s", i ? ", " : "", g->inputs[i]->name);
    if (k < 0)
      break;
    at += (size_t)k;
  }
  if (!g->ninputs)
    snprintf(buf, n, "none");
}

/* A tensor file, told by its bytes: a .npy (numpy's magic), else an ONNX TensorProto
 * (*name: the name it holds, or NULL). */
static Tensor *read_tensor_file(const char *path, char **name, Diag *d) {
  char head[6];
  long got = file_head(path, head, sizeof head);
  *name = NULL;
  /* a file not read here goes to npy_read, which says why */
  bool npy = got < 0 || (got == (long)sizeof head && !memcmp(head, "\x93NUMPY", 6));
  return npy ? npy_read(path, d) : onnx_read_tensor(path, name, d);
}

/* One input given: a NAME=FILE binding, or the file input_<position>.pb of a folder. */
typedef struct Given {
  const char *arg; /* for messages */
  bool named;      /* NAME=FILE: name is the binding's; else the TensorProto's, or NULL */
  char *name;
  int position;
  Tensor *t;
} Given;

static void givens_free(Given *gv, int n) {
  for (int i = 0; i < n; i++) {
    free(gv[i].name);
    tensor_free(gv[i].t);
  }
  free(gv);
}

/* Reads path (the file of binding b, at position in its folder) into gv[*n], growing gv
 * (*cap entries). 0, or an exit code. */
static int add_given(Given **gv, int *n, int *cap, const Binding *b, const char *path,
                     int position) {
  if (*n == *cap) {
    Given *p = realloc(*gv, (size_t)(*cap *= 2) * sizeof **gv);
    if (!p)
      return input_error("out of memory");
    *gv = p;
  }
  Diag d = {0};
  char *held = NULL;
  Given *g = &(*gv)[*n];
  *g = (Given){b->arg, b->name != NULL, NULL, position, read_tensor_file(path, &held, &d)};
  if (!g->t) {
    free(held);
    return diag_exit(&d, EXIT_INPUT);
  }
  ++*n;
  if (!b->name) {
    g->name = held;
    return 0;
  }
  free(held);
  g->name = strdup(b->name[0] == '%' ? b->name + 1 : b->name);
  return g->name ? 0 : input_error("out of memory");
}

/* Reads every --input: NAME=FILE (.npy or TensorProto), or a folder's input_0.pb,
 * input_1.pb, ... up to the first missing. *out gets them; their count, or -1 (an exit
 * code in *rc). */
static int read_givens(const Options *o, Given **out, int *rc) {
  int n = 0, cap = o->ninputs + 1;
  Given *gv = calloc((size_t)cap, sizeof *gv);
  *rc = gv ? 0 : input_error("out of memory");
  for (int i = 0; i < o->ninputs && !*rc; i++) {
    const Binding *b = &o->inputs[i];
    if (b->name)
      *rc = add_given(&gv, &n, &cap, b, b->value, 0);
    for (int k = 0; !b->name && !*rc; k++) {
      char path[4096];
      struct stat st;
      if (snprintf(path, sizeof path, "%s/input_%d.pb", b->value, k) >= (int)sizeof path)
        *rc = input_error("--input %s: path too long", b->arg);
      else if (k > 0 && stat(path, &st) != 0)
        break; /* the folder's last input */
      else
        *rc = add_given(&gv, &n, &cap, b, path, k);
    }
  }
  if (*rc) {
    givens_free(gv, n);
    return -1;
  }
  *out = gv;
  return n;
}

/* The input a given tensor is for, of n (find: the index of a name, or -1): a NAME=FILE's
 * by its name; a folder's file by the name its TensorProto holds where that is an
 * input's, else by its position. -1 with the exit code in *rc. */
static int given_index(const Given *gv, int n, int (*find)(const void *, const char *),
                       const void *model, const char *what, const char *inputs, int *rc) {
  int k = gv->name ? find(model, gv->name) : -1;
  if (k < 0 && !gv->named && gv->position < n)
    k = gv->position;
  if (k >= 0)
    return k;
  *rc = gv->named ? input_error("--input %s: the %s has no input '%%%s' (its inputs: %s)",
                                gv->arg, what, gv->name, inputs)
                  : input_error("--input %s: input_%d.pb is beyond the %s's %d inputs (%s)",
                                gv->arg, gv->position, what, n, inputs);
  return -1;
}

static int graph_find(const void *g, const char *name) { return find_input(g, name); }

/* Reads the --input files into in[] (indexed like g->inputs). */
static int load_given_inputs(const Options *o, const Graph *g, Tensor **in) {
  Given *gv = NULL;
  int rc, n = read_givens(o, &gv, &rc);
  char names[1024];
  list_inputs(g, names, sizeof names);
  for (int i = 0; i < n && !rc; i++) {
    int k = given_index(&gv[i], g->ninputs, graph_find, g, "graph", names, &rc);
    if (k >= 0 && in[k])
      rc = usage_error("input '%%%s' is given twice", g->inputs[k]->name);
    if (k >= 0 && !rc) {
      in[k] = gv[i].t;
      gv[i].t = NULL;
    }
  }
  if (n >= 0)
    givens_free(gv, n);
  return rc;
}

/* The size of symbolic dim `sym` for inputs not given: --dim (its range's lowest size),
 * else what a given input of the same symbol has, else the lowest size of the graph's
 * range for it, else 1. */
static int64_t symbol_size(const Options *o, const Graph *g, Tensor *const *in,
                           const char *sym) {
  for (int i = 0; i < o->ndims; i++)
    if (!strcmp(o->dims[i].name, sym)) {
      DimRange r;
      char why[160];
      int64_t size;
      int kind = dim_value_parse(o->dims[i].value, &size, &r, why, sizeof why);
      if (kind >= 0)
        return kind ? r.lo[0] : size;
    }
  for (int i = 0; i < g->ninputs; i++) {
    const Shape *s = &g->inputs[i]->type.shape;
    if (!in[i] || in[i]->rank != s->rank)
      continue;
    for (int j = 0; j < s->rank; j++)
      if (s->dims[j].sym && !strcmp(s->dims[j].sym, sym))
        return in[i]->dims[j];
  }
  const DimRange *r = graph_range(g, sym);
  return r ? r->lo[0] : 1;
}

/* Fills the inputs not given with the documented generator, saying so on stderr. */
static int make_default_inputs(const Options *o, const Graph *g, Tensor **in) {
  /* The ONNX loader has bound --dim already (and checked the names). */
  for (int i = 0; i < o->ndims && !o->onnx; i++)
    if (!graph_has_symbol(g, o->dims[i].name))
      return input_error("--dim %s: no input of the graph has a dim named '%s'", o->dims[i].arg,
                         o->dims[i].name);
  for (int i = 0; i < g->ninputs; i++) {
    if (in[i])
      continue;
    const Value *v = g->inputs[i];
    int64_t dims[IR_MAX_RANK];
    Type t = v->type;
    for (int j = 0; j < t.shape.rank; j++) {
      Dim *dm = &t.shape.dims[j];
      dims[j] = dm->sym ? symbol_size(o, g, in, dm->sym) : dm->n;
      *dm = (Dim){dims[j], NULL};
    }
    /* --dim is unchecked user input: refuse sizes whose byte count would overflow. */
    int64_t numel = 1;
    for (int j = 0; j < t.shape.rank; j++) {
      if (dims[j] && numel > INT64_MAX / 16 / dims[j]) {
        char ts[256];
        return input_error("input %%%s: %s is too large", v->name, type_str(&t, ts, sizeof ts));
      }
      numel *= dims[j];
    }
    in[i] = tensor_new(t.dtype, t.shape.rank, dims);
    if (!in[i])
      return input_error("out of memory for input '%%%s'", v->name);
    tensor_fill_random(in[i], 1 + (uint64_t)i, 1);
    char ts[256];
    fprintf(stderr, "gpucc: note: input %%%s not given: using random(seed = %d, scale = 1) as %s\n",
            v->name, 1 + i, type_str(&t, ts, sizeof ts));
  }
  return 0;
}

/* ---------------------------------------------------------------- run mode: outputs */

/* numpy's summary: an output of more than SUMMARY_OVER elements prints SUMMARY_EDGE
 * entries at each end of each axis longer than twice that, "..." between. */
enum { SUMMARY_OVER = 1000, SUMMARY_EDGE = 3 };

/* The elements of t's subarray at element `at` along axes dim and after. */
static void print_elements(FILE *f, const Tensor *t, int dim, int64_t at, bool summary) {
  if (dim == t->rank) {
    const char *p = (const char *)t->data + (size_t)at * dtype_size(t->dtype);
    if (dtype_is_float(t->dtype))
      fprintf(f, "%.9g", dtype_load_f64(t->dtype, p));
    else
      fprintf(f, "%" PRId64, dtype_load_i64(t->dtype, p));
    return;
  }
  int64_t stride = 1, n = t->dims[dim];
  for (int k = dim + 1; k < t->rank; k++)
    stride *= t->dims[k];
  bool cut = summary && n > 2 * SUMMARY_EDGE;
  fputc('[', f);
  for (int64_t i = 0; i < n; i++) {
    if (cut && i == SUMMARY_EDGE) {
      fputs(", ...", f);
      i = n - SUMMARY_EDGE;
    }
    if (i)
      fputs(", ", f);
    print_elements(f, t, dim + 1, at + i * stride, summary);
  }
  fputc(']', f);
}

static int print_outputs(const char *const *names, int n, Tensor *const *out, bool all) {
  for (int i = 0; i < n; i++) {
    char ts[256];
    Type t = tensor_type(out[i]);
    ir_print_value_name(stdout, names[i]);
    printf(": %s\n", type_str(&t, ts, sizeof ts));
    print_elements(stdout, out[i], 0, 0, !all && tensor_numel(out[i]) > SUMMARY_OVER);
    putchar('\n');
  }
  if (fflush(stdout) != 0 || ferror(stdout))
    return input_error("cannot write to standard output: %s", strerror(errno));
  return 0;
}

static bool file_name_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '.' || c == '-';
}

/* DIR/<name>.npy, with bytes outside [A-Za-z0-9_.-] written as _xNN. */
static char *output_path(const char *dir, const char *name) {
  size_t n = strlen(dir) + 4 * strlen(name) + 8;
  char *path = malloc(n);
  if (!path)
    return NULL;
  size_t at = (size_t)snprintf(path, n, "%s/", dir);
  for (const unsigned char *p = (const unsigned char *)name; *p; p++)
    at += (size_t)snprintf(path + at, n - at, file_name_char(*p) ? "%c" : "_x%02x", *p);
  snprintf(path + at, n - at, ".npy");
  return path;
}

/* Two outputs whose names escape to one file name would overwrite each other: an error
 * naming both, before anything is written. An output listed twice (one value returned
 * twice) is written once: skip[i] for the repeats. */
static int check_output_paths(const char *const *names, int n, char *const *paths, bool *skip) {
  int *first = malloc(((size_t)n + 1) * sizeof *first);
  if (!first || strings_first((const char *const *)paths, n, first)) {
    free(first);
    return input_error("out of memory");
  }
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    int a = first[i];
    if (a == i)
      continue;
    if (!strcmp(names[a], names[i]))
      skip[i] = true;
    else
      rc = input_error("--output-dir: outputs '%%%s' and '%%%s' would both be written to '%s' "
                       "(their names differ only in bytes that file names escape)",
                       names[a], names[i], paths[a]);
  }
  free(first);
  return rc;
}

/* Writes every output; if one fails, the ones already written are removed again (files
 * only: a device or FIFO already there was written in place, and a symlink stays). */
static int write_outputs(const char *const *names, int n, Tensor *const *out, const char *dir) {
  Diag dd = {0};
  int rc = 0;
  char **paths = calloc((size_t)n + 1, sizeof *paths);
  bool *skip = calloc((size_t)n + 1, sizeof *skip), *made = calloc((size_t)n + 1, sizeof *made);
  if (!paths || !skip || !made)
    rc = input_error("out of memory");
  for (int i = 0; i < n && !rc; i++)
    if (!(paths[i] = output_path(dir, names[i])))
      rc = input_error("out of memory");
  if (!rc)
    rc = check_output_paths(names, n, paths, skip);
  if (!rc && make_dirs(dir, &dd))
    rc = diag_exit(&dd, EXIT_INPUT);
  for (int i = 0; i < n && !rc; i++) {
    if (skip[i])
      continue;
    struct stat st;
    bool file = lstat(paths[i], &st) != 0 || S_ISREG(st.st_mode);
    Diag d = {0};
    if (npy_write(paths[i], out[i], &d))
      rc = diag_exit(&d, EXIT_INPUT); /* npy_write leaves nothing behind itself */
    else
      made[i] = file;
  }
  for (int i = 0; paths && i < n; i++) {
    if (rc && made && made[i])
      unlink(paths[i]);
    free(paths[i]);
  }
  free(paths);
  free(skip);
  free(made);
  return rc;
}

/* ---------------------------------------------------------------- run mode: the GPU
 *
 * A .gir or .onnx file is compiled in-process (the JIT API) into the runtime linked into
 * gpucc; a model.so is opened with dlopen and runs on its own copy of the runtime, the
 * one its users get. Both are driven through one table of the runtime's calls. */

#define MODEL_API(X)                                                                         \
  X(load, model_load) X(destroy, model_destroy) X(last_error, last_error)                    \
  X(num_inputs, model_num_inputs) X(num_outputs, model_num_outputs)                          \
  X(input_name, model_input_name) X(output_name, model_output_name)                          \
  X(input_dtype, model_input_dtype) X(output_dtype, model_output_dtype)                      \
  X(input_rank, model_input_rank) X(output_rank, model_output_rank)                          \
  X(input_dims, model_input_dims) X(output_dims, model_output_dims)                          \
  X(find_input, model_find_input) X(check_input, model_check_input)                          \
  X(run_host, model_run_host) X(time, model_time) X(kernels, model_kernels)
/* Shape classes: a model.so from before them lacks these, and is a fixed model. */
#define MODEL_API_RANGED(X)                                                                  \
  X(num_symbols, model_num_symbols) X(output_dims_for, model_output_dims_for)                \
  X(run_dims_host, model_run_dims_host) X(input_range, model_input_range)

typedef struct ModelApi {
  GpuccStatus (*load)(int, GpuccModel **); /* a model.so's only */
  void (*destroy)(GpuccModel *);
  const char *(*last_error)(void);
  int (*num_inputs)(const GpuccModel *), (*num_outputs)(const GpuccModel *);
  const char *(*input_name)(const GpuccModel *, int), *(*output_name)(const GpuccModel *, int);
  GpuccDType (*input_dtype)(const GpuccModel *, int), (*output_dtype)(const GpuccModel *, int);
  int (*input_rank)(const GpuccModel *, int), (*output_rank)(const GpuccModel *, int);
  const int64_t *(*input_dims)(const GpuccModel *, int), *(*output_dims)(const GpuccModel *, int);
  int (*find_input)(const GpuccModel *, const char *);
  GpuccStatus (*check_input)(const GpuccModel *, int, GpuccDType, int, const int64_t *);
  GpuccStatus (*run_host)(GpuccModel *, const void *const *, void *const *, void *);
  GpuccStatus (*time)(GpuccModel *, int, int, void *, float *);
  int (*kernels)(const GpuccModel *);
  int (*num_symbols)(const GpuccModel *);
  GpuccStatus (*output_dims_for)(const GpuccModel *, const int64_t *const *, int64_t *const *);
  GpuccStatus (*run_dims_host)(GpuccModel *, const void *const *, const int64_t *const *,
                               void *const *, int64_t *const *, void *);
  GpuccStatus (*input_range)(const GpuccModel *, int, int, int64_t *, int64_t *);
} ModelApi;

/* The runtime linked into gpucc, for JIT-compiled models (it has no model_load). */
static GpuccStatus no_load(int device, GpuccModel **out) {
  (void)device;
  *out = NULL;
  return GPUCC_ERR_INVALID_ARGUMENT;
}
#define LINKED(field, name) .field = gpucc_##name,
#define gpucc_model_load no_load
static const ModelApi linked_api = {MODEL_API(LINKED) MODEL_API_RANGED(LINKED)};
#undef gpucc_model_load
#undef LINKED

/* The shape-class calls of a model.so from before them: it is a fixed model. */
static int fixed_num_symbols(const GpuccModel *m) {
  (void)m;
  return 0;
}
static GpuccStatus fixed_output_dims_for(const GpuccModel *m, const int64_t *const *in,
                                         int64_t *const *out) {
  (void)m, (void)in, (void)out;
  return GPUCC_ERR_INVALID_ARGUMENT;
}
static GpuccStatus fixed_run_dims_host(GpuccModel *m, const void *const *in,
                                       const int64_t *const *dims, void *const *out,
                                       int64_t *const *odims, void *stream) {
  (void)m, (void)in, (void)dims, (void)out, (void)odims, (void)stream;
  return GPUCC_ERR_INVALID_ARGUMENT;
}
static GpuccStatus fixed_input_range(const GpuccModel *m, int i, int axis, int64_t *lo,
                                     int64_t *hi) {
  (void)m, (void)i, (void)axis, (void)lo, (void)hi;
  return GPUCC_ERR_INVALID_ARGUMENT; /* the caller takes the input's fixed dims */
}

/* Binds api to the model.so at path (kept open: *lib). */
static int open_model_so(const char *path, ModelApi *api, void **lib) {
  /* dlopen would block on a FIFO as any open does: only a regular file is loaded. */
  char why[256];
  FILE *so = fopen_regular(path, NULL, why, sizeof why);
  if (!so)
    return input_error("%s: cannot load: %s", path, why);
  fclose(so);
  /* dlopen searches the library path for a name without a slash. */
  char *p = malloc(strlen(path) + 3);
  if (!p)
    return input_error("out of memory");
  sprintf(p, "%s%s", strchr(path, '/') ? "" : "./", path);
  *lib = dlopen(p, RTLD_NOW | RTLD_LOCAL);
  free(p);
  if (!*lib)
    return input_error("%s: cannot load: %s", path, dlerror());
#define BIND(field, name)                                                                    \
  {                                                                                          \
    void *f = dlsym(*lib, "gpucc_" #name);                                                   \
    if (!f)                                                                                  \
      return input_error("%s: not a gpucc model.so (it has no gpucc_%s)", path, #name);      \
    memcpy(&api->field, &f, sizeof f);                                                       \
  }
  MODEL_API(BIND)
#undef BIND
#define BIND_RANGED(field, name)                                                             \
  {                                                                                          \
    void *f = dlsym(*lib, "gpucc_" #name);                                                   \
    if (f)                                                                                   \
      memcpy(&api->field, &f, sizeof f);                                                     \
    else                                                                                     \
      api->field = fixed_##field;                                                            \
  }
  MODEL_API_RANGED(BIND_RANGED)
#undef BIND_RANGED
  return 0;
}

/* given_index's lookup in a model.so. */
typedef struct ModelFind {
  const ModelApi *api;
  GpuccModel *m;
} ModelFind;

static int model_find(const void *ctx, const char *name) {
  const ModelFind *f = ctx;
  return f->api->find_input(f->m, name[0] == '%' ? name + 1 : name);
}

/* Fills in[] for a model.so (which has no graph): --input files by the model's input
 * names, the rest from the same generator as a graph's inputs. */
static int model_inputs(const Options *o, const ModelApi *api, GpuccModel *m, Tensor **in) {
  int n = api->num_inputs(m);
  Given *gv = NULL;
  int rc, ng = read_givens(o, &gv, &rc);
  ModelFind mf = {api, m};
  char names[1024];
  size_t at = 0;
  names[0] = 0;
  for (int i = 0; i < n && at < sizeof names; i++) {
    int w = snprintf(names + at, sizeof names - at, "%s%%%s", i ? ", " : "", api->input_name(m, i));
    at += w > 0 ? (size_t)w : 0;
  }
  for (int i = 0; i < ng && !rc; i++) {
    int k = given_index(&gv[i], n, model_find, &mf, "model", names, &rc);
    if (k >= 0 && in[k])
      rc = usage_error("input '%%%s' is given twice", api->input_name(m, k));
    if (k >= 0 && !rc) {
      in[k] = gv[i].t;
      gv[i].t = NULL;
    }
  }
  if (ng >= 0)
    givens_free(gv, ng);
  if (rc)
    return rc;
  for (int i = 0; i < n; i++) {
    if (in[i])
      continue;
    /* a ranged axis at the lowest size of its range, as `gpucc run F --cpu` takes it */
    int64_t dims[GPUCC_MAX_RANK], hi;
    for (int j = 0; j < api->input_rank(m, i) && j < GPUCC_MAX_RANK; j++)
      if (api->input_range(m, i, j, &dims[j], &hi))
        dims[j] = api->input_dims(m, i)[j];
    in[i] = tensor_new(ir_dtype(api->input_dtype(m, i)), api->input_rank(m, i), dims);
    if (!in[i])
      return input_error("out of memory for input '%%%s'", api->input_name(m, i));
    tensor_fill_random(in[i], 1 + (uint64_t)i, 1);
    char ts[256];
    Type t = tensor_type(in[i]);
    fprintf(stderr, "gpucc: note: input %%%s not given: using random(seed = %d, scale = 1) as %s\n",
            api->input_name(m, i), 1 + i, type_str(&t, ts, sizeof ts));
  }
  return 0;
}

/* Checks every input against the model (naming expected and actual), runs it once on
 * host buffers, then times --iters replays. out[] gets the outputs. */
static int run_model(const Options *o, const ModelApi *api, GpuccModel *m, Tensor **in,
                     Tensor **out) {
  int nin = api->num_inputs(m), nout = api->num_outputs(m);
  bool ranged = api->num_symbols(m) > 0; /* the inputs' dims pick a shape class */
  const void **ip = calloc((size_t)nin + 1, sizeof *ip);
  void **op = calloc((size_t)nout + 1, sizeof *op);
  const int64_t **idims = calloc((size_t)nin + 1, sizeof *idims);
  int64_t (*odims)[GPUCC_MAX_RANK] = calloc((size_t)nout + 1, sizeof *odims);
  int64_t **odp = calloc((size_t)nout + 1, sizeof *odp);
  int rc = ip && op && idims && odims && odp ? 0 : input_error("out of memory");
  for (int i = 0; i < nin && !rc; i++) {
    if (api->check_input(m, i, rt_dtype(in[i]->dtype), in[i]->rank, in[i]->dims))
      rc = input_error("%s", api->last_error());
    ip[i] = in[i]->data;
    idims[i] = in[i]->dims;
  }
  for (int i = 0; i < nout; i++)
    odp[i] = odims[i];
  if (!rc && ranged && api->output_dims_for(m, idims, odp))
    rc = input_error("%s", api->last_error());
  for (int i = 0; i < nout && !rc; i++) {
    out[i] = tensor_new(ir_dtype(api->output_dtype(m, i)), api->output_rank(m, i),
                        ranged ? odims[i] : api->output_dims(m, i));
    if (!out[i])
      rc = input_error("out of memory for output '%%%s'", api->output_name(m, i));
    else
      op[i] = out[i]->data;
  }
  if (!rc && (ranged ? api->run_dims_host(m, ip, idims, op, NULL, NULL)
                     : api->run_host(m, ip, op, NULL)))
    rc = input_error("%s", api->last_error());
  float ms = 0;
  int warmup = o->iters / 10 < 10 ? 10 : o->iters / 10;
  if (!rc && o->iters && api->time(m, warmup, o->iters, NULL, &ms))
    rc = input_error("%s", api->last_error());
  else if (!rc && o->iters)
    fprintf(stderr, "gpucc: median latency %.4f ms over %d replays of the CUDA graph (after %d "
                    "warm-up replays)\n", ms, o->iters, warmup);
  int kernels = api->kernels(m);
  if (!rc && o->iters && kernels >= 0)
    fprintf(stderr, "gpucc: %d kernels per inference (the CUDA graph's kernel nodes)\n",
            kernels);
  free(ip);
  free(op);
  free(idims);
  free(odims);
  free(odp);
  return rc;
}

/* The pipeline's dims for a run: each symbolic dim of g's inputs bound to the size the
 * inputs have there (the first input that has it; an input that disagrees is then
 * refused against the bound type). */
static int run_dims(const Graph *g, Tensor *const *in, Compile *c) {
  size_t n = (size_t)g->ninputs * IR_MAX_RANK + 1;
  const char **names = calloc(n, sizeof *names);
  int64_t *sizes = calloc(n, sizeof *sizes);
  if (!names || !sizes) {
    free(names);
    free(sizes);
    return input_error("out of memory");
  }
  int k = 0;
  for (int i = 0; i < g->ninputs; i++) {
    const Shape *s = &g->inputs[i]->type.shape;
    for (int j = 0; j < s->rank && j < in[i]->rank; j++) {
      bool seen = false;
      for (int m = 0; s->dims[j].sym && m < k && !seen; m++)
        seen = !strcmp(names[m], s->dims[j].sym);
      if (s->dims[j].sym && !seen) {
        names[k] = s->dims[j].sym;
        sizes[k++] = in[i]->dims[j];
      }
    }
  }
  free(c->dim_names);
  free(c->dim_sizes);
  c->dim_names = names;
  c->dim_sizes = sizes;
  c->opt.dim_names = names;
  c->opt.dim_sizes = sizes;
  c->opt.ndims = k;
  return 0;
}

/* Compiles g for device o->device with c's options (the JIT API) and runs it. */
static int run_graph_gpu(const Options *o, const Compile *c, Graph *g, Tensor **in,
                         Tensor **out) {
  Diag d = {0};
  GpuccModel *m = NULL;
  int rc = gpucc_compile_graph(g, &c->opt, o->device, &m, &d) ? diag_exit(&d, EXIT_INPUT) : 0;
  if (!rc)
    rc = run_model(o, &linked_api, m, in, out);
  gpucc_model_destroy(m);
  return rc;
}

/* The passes of the pipeline with c's options, then the reference executor. */
static int run_graph_cpu(const Compile *c, Graph *g, Tensor **in, Tensor **out) {
  Diag d = {0};
  Compiled p;
  int rc = pipeline_run(g, &c->opt, STAGE_PASSES, &p, &d) || ir_eval(g, in, out, &d)
               ? diag_exit(&d, EXIT_INPUT)
               : 0;
  compiled_free(&p);
  return rc;
}

/* A graph with ranged dims through its shape class, as a model.so will run it
 * (compiler/classes.c); the outputs are those of the graph bound at the inputs' sizes. */
static int run_classes_cpu(const Options *o, const Compile *c, Graph *g, Tensor **in,
                           Tensor **out) {
  Diag d = {0};
  OnnxClass k = {c};
  return classes_run_cpu(g, &c->opt, o->onnx ? load_onnx_class : NULL, &k, in, out, &d)
             ? diag_exit(&d, EXIT_INPUT)
             : 0;
}

/* A graph with ranged dims on the GPU: its shape classes compiled for the device, created,
 * and run at the inputs' dims, as its model.so would run. */
static int run_classes_gpu(const Options *o, const Compile *c, Graph *g, Tensor **in,
                           Tensor **out) {
  Diag d = {0};
  GpuccCompileOptions opt = c->opt;
  Target t;
  if (!opt.target && gpucc_device_target(o->device, opt.arch, &t, &d))
    return diag_exit(&d, EXIT_INPUT);
  opt.target = opt.target ? opt.target : &t;
  OnnxClass k = {c};
  ClassesBuilt cb;
  if (classes_build(g, &opt, o->onnx ? load_onnx_class : NULL, &k, STAGE_PLAN, NULL, &cb, &d))
    return diag_exit(&d, EXIT_INPUT);
  GpuccModel *m = NULL;
  int rc = gpucc_model_create(cb.build.plan, cb.build.plan_len, cb.build.weights,
                              cb.build.weights_len, o->device, &m)
               ? input_error("%s", gpucc_last_error())
               : run_model(o, &linked_api, m, in, out);
  gpucc_model_destroy(m);
  classes_built_free(&cb);
  return rc;
}

/* Whether there is a GPU to run on; when there is none, why (for the note). */
static bool have_gpu(const Options *o, char *why, size_t n) {
  int major, minor;
  if (!gpucc_device_compute_capability(o->device, &major, &minor))
    return true;
  snprintf(why, n, "%s", gpucc_last_error());
  return false;
}

/* Prints or writes the outputs; the names are the graph's or the model's. */
static int emit_outputs(const Options *o, const char *const *names, int n, Tensor *const *out) {
  return o->output_dir ? write_outputs(names, n, out, o->output_dir)
                       : print_outputs(names, n, out, o->print_all);
}

/* ---------------------------------------------------------------- run mode: --compare
 *
 * gpucc's run (the GPU's, or the reference executor's with --cpu) against another on the
 * same inputs: onnxruntime's of the ONNX model, or the reference executor's of the graph
 * as the file has it (no passes, fp32). For a model.so, which holds no graph, that is
 * the model it was built from: --model-source, else the source it records, when that
 * file is still there with the same SHA-256. */

/* What the other run runs, and what gpucc's was: its precision picks the default rtol. */
typedef struct Source {
  const char *path;
  bool onnx;
  Precision precision;
  char *owned; /* path, when it came from a model.so's build info */
} Source;

/* The source of model.so o->file, and the precision it records. 0 or an exit code. */
static int so_source(const Options *o, Source *src) {
  Diag d = {0};
  char *info = model_so_info(o->file, &d);
  if (!info)
    return diag_exit(&d, EXIT_INPUT);
  char path[4096], sha[128], prec[64], hex[65], why[256];
  bool has_path = info_value(info, "source", path, sizeof path);
  bool has_sha = info_value(info, "source_sha256", sha, sizeof sha);
  bool has_prec = info_value(info, "precision", prec, sizeof prec);
  free(info);
  *src = (Source){.precision = PRECISION_FP32};
  if (has_prec && precision_parse(prec, &src->precision, &d) && o->rtol < 0)
    return input_error("%s records precision '%s', which this gpucc does not know: give "
                       "--rtol", o->file, prec);
  const char *give = "give the .onnx or .gir it was built from with --model-source PATH";
  if (!o->model_source && (!has_path || !strcmp(path, "<stdin>")))
    return usage_error("%s records no source file (%s): %s", o->file,
                       has_path ? "it was built from standard input"
                                : "built by a gpucc from before model.so files recorded it",
                       give);
  src->path = o->model_source ? o->model_source : path;
  FILE *f = fopen_regular(src->path, NULL, why, sizeof why);
  if (!f && o->model_source)
    return input_error("%s: cannot open: %s", src->path, why);
  if (!f)
    return usage_error("%s was built from %s, which cannot be read here (%s): %s", o->file,
                       path, why, give);
  fclose(f);
  bool same = has_sha && !file_sha256(src->path, hex) && !strcmp(hex, sha);
  if (!o->model_source && !same)
    return usage_error(has_sha ? "%s was built from %s, which has changed since (its SHA-256 "
                                 "is not the one recorded): %s"
                               : "%s records no SHA-256 of its source %s to know it by: %s",
                       o->file, path, give);
  ModelFormat fmt = format_of(src->path);
  if (fmt == FORMAT_ELF)
    return usage_error("%s is a model.so; the comparison needs the .onnx or .gir %s was built "
                       "from", src->path, o->file);
  src->onnx = fmt == FORMAT_ONNX;
  if (o->compare == COMPARE_ONNXRUNTIME && !src->onnx)
    return usage_error("--compare=onnxruntime runs ONNX models, and %s was built from %s, a "
                       ".gir graph (use --compare=reference)", o->file, src->path);
  if (!o->model_source && !(src->path = src->owned = strdup(path)))
    return input_error("out of memory");
  if (!same && has_sha)
    fprintf(stderr, "gpucc: note: %s is not the file %s was built from (its SHA-256 differs "
            "from the one recorded); comparing with it anyway\n", src->path, o->file);
  else if (!o->model_source)
    fprintf(stderr, "gpucc: note: comparing with %s's source, %s (its SHA-256 matches)\n",
            o->file, src->path);
  return 0;
}

/* The reference executor's outputs on in[0..nin) (the inputs names[i]): src's graph
 * loaded again, an ONNX model with each input's shape as given (and FILE's --const
 * inputs), and run with no passes. */
static int reference_outputs(const Options *o, const Source *src, const char *const *names,
                             Tensor *const *in, int nin, NamedTensors *want) {
  Diag d = {0};
  Graph *g = NULL;
  OnnxBinding *bind = calloc((size_t)(nin + o->nconsts) + 1, sizeof *bind);
  char(*shape)[IR_MAX_RANK * 21 + 8] = calloc((size_t)nin + 1, sizeof *shape);
  int rc = bind && shape ? 0 : input_error("out of memory");
  for (int i = 0; i < nin && !rc; i++) {
    size_t at = 0;
    for (int k = 0; k < in[i]->rank; k++)
      at += (size_t)snprintf(shape[i] + at, sizeof shape[i] - at, "%s%" PRId64, k ? "x" : "",
                             in[i]->dims[k]);
    if (!in[i]->rank)
      snprintf(shape[i], sizeof shape[i], "scalar");
    bind[i] = (OnnxBinding){names[i], shape[i]};
  }
  for (int i = 0; i < o->nconsts; i++)
    bind[nin + i] = (OnnxBinding){o->consts[i].name, o->consts[i].value};
  OnnxOptions lo = {.shapes = bind, .nshapes = nin, .consts = bind + nin,
                    .nconsts = o->nconsts, .max_weight_bytes = o->max_weight_bytes};
  if (!rc && !(g = src->onnx ? onnx_load(src->path, &lo, &d) : dsl_parse_file(src->path, &d)))
    rc = diag_exit(&d, EXIT_INPUT);
  Tensor **rin = g ? calloc((size_t)g->ninputs + 1, sizeof *rin) : NULL;
  if (!rc && g) {
    want->n = g->noutputs;
    want->names = calloc((size_t)g->noutputs + 1, sizeof *want->names);
    want->t = calloc((size_t)g->noutputs + 1, sizeof *want->t);
  }
  if (!rc && (!rin || !want->names || !want->t))
    rc = input_error("out of memory");
  for (int j = 0; g && j < g->ninputs && !rc; j++) {
    for (int i = 0; i < nin && !rin[j]; i++)
      if (!strcmp(names[i], g->inputs[j]->name))
        rin[j] = in[i];
    if (!rin[j])
      rc = input_error("%s: the reference's input '%%%s' is not an input of gpucc's run",
                       src->path, g->inputs[j]->name);
  }
  if (!rc && ir_eval(g, rin, want->t, &d))
    rc = diag_exit(&d, EXIT_INPUT);
  for (int k = 0; !rc && k < want->n; k++)
    if (!(want->names[k] = strdup(g->outputs[k]->name)))
      rc = input_error("out of memory");
  free(rin);
  free(bind);
  free(shape);
  graph_free(g);
  return rc;
}

/* onnxruntime's outputs on in[0..nin) (the inputs names[i]) and FILE's --const inputs. */
static int onnxruntime_outputs(const Options *o, const Source *src, const char *const *names,
                               Tensor *const *in, int nin, NamedTensors *want) {
  Diag d = {0};
  int n = nin + o->nconsts;
  const char **all_names = calloc((size_t)n + 1, sizeof *all_names);
  Tensor **all = calloc((size_t)n + 1, sizeof *all);
  int rc = all_names && all ? 0 : input_error("out of memory");
  for (int i = 0; i < n && !rc; i++) {
    all_names[i] = i < nin ? names[i] : o->consts[i - nin].name;
    all[i] = i < nin ? in[i] : npy_read(o->consts[i - nin].value, &d);
    if (!all[i])
      rc = diag_exit(&d, EXIT_INPUT);
  }
  const char *python = getenv("GPUCC_PYTHON");
  int r = rc ? 0 : onnxruntime_run(python && *python ? python : "python3", src->path,
                                   all_names, all, n, want, &d);
  if (r)
    rc = diag_exit(&d, r == ONNXRUNTIME_MISSING ? EXIT_USAGE : EXIT_INPUT);
  for (int i = nin; all && i < n; i++)
    tensor_free(all[i]);
  free(all);
  free(all_names);
  return rc;
}

/* gpucc's outputs out[0..nout) (named out_names[i]) from the inputs in[0..nin) against
 * the comparator's on the same inputs: exit 0 when all are within the tolerance, 1 when
 * one is not. */
static int compare_run(const Options *o, const Source *src, const char *const *in_names,
                       Tensor *const *in, int nin, const char *const *out_names,
                       Tensor *const *out, int nout) {
  NamedTensors want = {0};
  bool ort = o->compare == COMPARE_ONNXRUNTIME;
  int rc = ort ? onnxruntime_outputs(o, src, in_names, in, nin, &want)
               : reference_outputs(o, src, in_names, in, nin, &want);
  Diag d = {0};
  double rtol = o->rtol >= 0 ? o->rtol : precision_rel_bound(src->precision);
  int beyond = rc ? 0 : compare_outputs(out_names, out, nout, &want, ort ? "onnxruntime"
                                        : "the reference executor", rtol, o->atol, stdout, &d);
  if (!rc && beyond < 0)
    rc = diag_exit(&d, EXIT_INPUT);
  else if (!rc && (fflush(stdout) != 0 || ferror(stdout)))
    rc = input_error("cannot write to standard output: %s", strerror(errno));
  else if (!rc && beyond)
    rc = EXIT_INPUT;
  named_tensors_free(&want);
  return rc;
}

/* The end of a run: the outputs printed or written, or compared. */
static int finish_run(const Options *o, const Source *src, const char *const *in_names,
                      Tensor *const *in, int nin, const char *const *names, Tensor *const *out,
                      int nout) {
  return o->compare ? compare_run(o, src, in_names, in, nin, names, out, nout)
                    : emit_outputs(o, names, nout, out);
}

static int cmd_run_so(const Options *o) {
  char why[512];
  struct stat st;
  /* what is wrong with the file first: a missing one is that, GPU or not */
  if (stat(o->file, &st))
    return input_error("%s: cannot open: %s", o->file, strerror(errno));
  if (!S_ISREG(st.st_mode))
    return input_error("%s: not a regular file", o->file);
  /* a file without a model's payload (a stripped model.so), before the GPU too */
  Diag d = {0};
  char *info = model_so_info(o->file, &d);
  if (!info)
    return diag_exit(&d, EXIT_INPUT);
  free(info);
  /* what --compare needs of the file, before the GPU: it is the same without one */
  Source src = {0};
  int rc = o->compare ? so_source(o, &src) : 0;
  if (!rc && !have_gpu(o, why, sizeof why))
    rc = input_error("%s: a model.so runs only on a GPU: %s", o->file, why);
  if (rc) {
    free(src.owned);
    return rc;
  }
  ModelApi api;
  void *lib = NULL;
  rc = open_model_so(o->file, &api, &lib);
  GpuccModel *m = NULL;
  if (!rc && api.load(o->device, &m))
    rc = input_error("%s: %s", o->file, api.last_error());
  int nin = m ? api.num_inputs(m) : 0, nout = m ? api.num_outputs(m) : 0;
  Tensor **in = calloc((size_t)nin + 1, sizeof *in), **out = calloc((size_t)nout + 1, sizeof *out);
  const char **names = calloc((size_t)nout + 1, sizeof *names);
  const char **in_names = calloc((size_t)nin + 1, sizeof *in_names);
  if (!rc && (!in || !out || !names || !in_names))
    rc = input_error("out of memory");
  if (!rc)
    rc = model_inputs(o, &api, m, in);
  if (!rc)
    rc = run_model(o, &api, m, in, out);
  for (int i = 0; !rc && i < nout; i++)
    names[i] = api.output_name(m, i);
  for (int i = 0; !rc && i < nin; i++)
    in_names[i] = api.input_name(m, i);
  if (!rc)
    rc = finish_run(o, &src, in_names, in, nin, names, out, nout);
  for (int i = 0; in && i < nin; i++)
    tensor_free(in[i]);
  for (int i = 0; out && i < nout; i++)
    tensor_free(out[i]);
  free(in);
  free(out);
  free(names);
  free(in_names);
  free(src.owned);
  if (m)
    api.destroy(m);
  if (lib)
    dlclose(lib);
  return rc;
}

/* ---------------------------------------------------------------- run mode */

static int summary_find(const OnnxSummary *s, const char *name) {
  for (int i = 0; i < s->ninputs; i++)
    if (!strcmp(s->inputs[i].name, name))
      return i;
  return -1;
}

static bool dim_bound(const Options *o, const Binding *extra, int nextra, const char *sym) {
  for (int i = 0; i < o->ndims; i++)
    if (!strcmp(o->dims[i].name, sym))
      return true;
  for (int i = 0; i < nextra; i++)
    if (!strcmp(extra[i].name, sym))
      return true;
  return false;
}

/* An ONNX model's symbolic input dims that no --dim binds, bound from the --input files'
 * shapes (as a .gir's are): the loader needs every size before it reads a node, since
 * Shape chains fold at load. *extra (malloc'd names and values) gets the new bindings;
 * their count, or -1 with the exit code in *rc. An axis whose entry in the model is not a
 * plain name (what onnx_summary prints) is left to the loader's message. */
static int onnx_dims_from_inputs(const Options *o, Binding **extra, int *rc) {
  Diag d = {0};
  OnnxSummary s = {0};
  Given *gv = NULL;
  int n = 0, ngiven = 0;
  *extra = NULL;
  *rc = 0;
  OnnxModel *m = onnx_open(o->file, &d);
  if (!m || onnx_summary(m, &s, &d)) {
    onnx_close(m);
    *rc = diag_exit(&d, EXIT_INPUT);
    return -1;
  }
  onnx_close(m);
  ngiven = read_givens(o, &gv, rc);
  Binding *b = ngiven > 0 ? calloc((size_t)ngiven * IR_MAX_RANK + 1, sizeof *b) : NULL;
  if (ngiven > 0 && !b)
    *rc = input_error("out of memory");
  for (int i = 0; i < ngiven && !*rc; i++) {
    int k = gv[i].name ? summary_find(&s, gv[i].name) : -1;
    if (k < 0 && !gv[i].named && gv[i].position < s.ninputs)
      k = gv[i].position;
    /* the type as onnx_summary prints it: "f32[batch, 128]" */
    const char *p = k >= 0 ? strchr(s.inputs[k].type, '[') : NULL;
    for (int axis = 0; p && axis < gv[i].t->rank && !*rc; axis++) {
      for (p++; *p == ' '; p++)
        ;
      const char *end = p;
      while (*end && *end != ',' && *end != ']')
        end++;
      size_t len = (size_t)(end - p);
      bool name = len && len < 128 && (isalpha((unsigned char)*p) || *p == '_');
      for (size_t j = 0; name && j < len; j++)
        name = isalnum((unsigned char)p[j]) || strchr("_.:-", p[j]);
      char sym[128], value[32];
      if (name) {
        memcpy(sym, p, len);
        sym[len] = 0;
      }
      if (name && !dim_bound(o, b, n, sym)) {
        snprintf(value, sizeof value, "%" PRId64, gv[i].t->dims[axis]);
        b[n] = (Binding){gv[i].arg, strdup(sym), strdup(value)};
        if (!b[n++].name || !b[n - 1].value)
          *rc = input_error("out of memory");
      }
      p = *end == ',' ? end : NULL;
    }
  }
  givens_free(gv, ngiven > 0 ? ngiven : 0);
  onnx_summary_free(&s);
  if (*rc) {
    for (int i = 0; i < n; i++) {
      free(b[i].name);
      free((char *)b[i].value);
    }
    free(b);
    return -1;
  }
  if (!n)
    free(b);
  *extra = n ? b : NULL;
  return n;
}

static int run_file(const Options *o);

static int cmd_run(const Options *o) {
  if (o->so || !o->onnx || !o->ninputs)
    return run_file(o);
  /* an ONNX model's symbolic dims from the given inputs, as --dim SYM=SIZE after any */
  Binding *extra;
  int rc, n = onnx_dims_from_inputs(o, &extra, &rc);
  if (n < 0)
    return rc;
  if (n == 0)
    return run_file(o);
  Options o2 = *o;
  Binding *dims = calloc((size_t)(o->ndims + n) + 1, sizeof *dims);
  if (!dims)
    rc = input_error("out of memory");
  else {
    memcpy(dims, o->dims, (size_t)o->ndims * sizeof *dims);
    memcpy(dims + o->ndims, extra, (size_t)n * sizeof *dims);
    o2.dims = dims;
    o2.ndims = o->ndims + n;
    rc = run_file(&o2);
  }
  for (int i = 0; i < n; i++) {
    free(extra[i].name);
    free((char *)extra[i].value);
  }
  free(extra);
  free(dims);
  return rc;
}

static int run_file(const Options *o) {
  if (o->so)
    return cmd_run_so(o);
  char why[512];
  bool gpu = !o->cpu && have_gpu(o, why, sizeof why);
  if (!o->cpu && !gpu) {
    if (o->iters)
      return input_error("--iters times the GPU, and there is none: %s", why);
    if (o->compare == COMPARE_REFERENCE)
      return input_error("--compare=reference holds the GPU's run to the reference executor, "
                         "and there is no GPU: %s", why);
    fprintf(stderr, "gpucc: note: no GPU (%s); using the reference executor (--cpu)\n", why);
  }
  Compile c;
  Graph *g = NULL;
  int rc = load_graph(o, &c, &g);
  if (rc)
    return rc;
  int nin = g->ninputs; /* the class path adds the actual sizes as inputs */
  Tensor **in = calloc((size_t)nin + 1, sizeof *in);
  Tensor **out = calloc((size_t)g->noutputs + 1, sizeof *out);
  const char **names = calloc((size_t)g->noutputs + 1, sizeof *names);
  const char **in_names = calloc((size_t)nin + 1, sizeof *in_names);
  if (!in || !out || !names || !in_names)
    rc = input_error("out of memory");
  for (int i = 0; !rc && i < nin; i++)
    in_names[i] = g->inputs[i]->name; /* the graph's arena keeps them */
  if (!rc && c.opt.nranges) { /* --dim SYM=LO..HI, on the graph now: it picks the path */
    Diag d = {0};
    GpuccCompileOptions ro = {.ranges = c.opt.ranges, .nranges = c.opt.nranges};
    if (pipeline_bind_dims(g, &ro, &d))
      rc = diag_exit(&d, EXIT_INPUT);
  }
  if (!rc)
    rc = load_given_inputs(o, g, in);
  if (!rc)
    rc = make_default_inputs(o, g, in);
  if (!rc && g->nranges)
    rc = gpu ? run_classes_gpu(o, &c, g, in, out) : run_classes_cpu(o, &c, g, in, out);
  else if (!rc && !(rc = run_dims(g, in, &c)))
    rc = gpu ? run_graph_gpu(o, &c, g, in, out) : run_graph_cpu(&c, g, in, out);
  for (int i = 0; !rc && i < g->noutputs; i++)
    names[i] = g->outputs[i]->name; /* after the passes, as the model has them */
  Source src = {o->file, o->onnx, o->precision, NULL};
  if (!rc)
    rc = finish_run(o, &src, in_names, in, nin, names, out, g->noutputs);
  for (int i = 0; in && i < nin; i++)
    tensor_free(in[i]);
  for (int i = 0; out && i < g->noutputs; i++)
    tensor_free(out[i]);
  free(in);
  free(out);
  free(names);
  free(in_names);
  compile_free(&c);
  graph_free(g);
  return rc;
}

int main(int argc, char **argv) {
  Options o;
  int rc = parse_args(argc, argv, &o);
  progress_start(&o);
  if (rc == 0)
    rc = o.mode == MODE_RUN ? cmd_run(&o) : o.mode == MODE_INSPECT ? cmd_inspect(&o) : cmd_compile(&o);
  else if (rc < 0)
    rc = 0;
  progress_end();
  free_options(&o);
  return rc;
}
