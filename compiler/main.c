/* main.c: the gpucc command. It is the only place that prints to the user and picks exit
 * codes: library calls hand back a Diag, and this file prints it and exits 1 (bad input)
 * or 2 (bad usage). Two modes share the front half (parse the file, run the passes):
 *   gpucc FILE [options]        compile: print the IR (--emit=ir) or a summary
 *   gpucc run FILE [options]    evaluate the graph with the reference executor
 * Output files are written to a temporary name and renamed, so a failed run leaves
 * nothing behind. docs/ir.md describes the input language; README.md the options. */
#include "codegen/codegen.h"
#include "compiler/nvrtc.h"
#include "frontends/frontends.h"
#include "passes/passes.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { EXIT_INPUT = 1, EXIT_USAGE = 2, MAX_PASSES = 64 };

typedef enum Mode { MODE_COMPILE, MODE_RUN } Mode;

/* NAME=VALUE of --input and --dim, split at the first '='. */
typedef struct Binding {
  const char *arg; /* the whole argument, for messages */
  char *name;
  const char *value;
} Binding;

typedef struct Options {
  Mode mode;
  const char *file;
  const char *emit; /* NULL, "ir", "cuda" or "cubin" */
  const char *arch; /* --arch for --emit=cubin; NULL: NVRTC_DEFAULT_ARCH */
  const char *out;  /* -o */
  const Pass *passes[MAX_PASSES];
  int npasses;
  bool print_after_all;
  bool report; /* -v, --report */
  const char *dump_dir;
  bool cpu;
  const char *output_dir;
  Binding *inputs;
  int ninputs;
  Binding *dims;
  int ndims;
  /* ONNX models (a FILE ending in .onnx) */
  bool onnx;
  Binding *shapes; /* --shape NAME=AxBxC */
  int nshapes;
  Binding *consts; /* --const NAME=PATH.npy */
  int nconsts;
  bool check_ops;
  int64_t max_weight_bytes; /* 0: the loader's default */
} Options;

/* ---------------------------------------------------------------- messages */

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...) {
  va_list ap;
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
  va_start(ap, fmt);
  fputs("gpucc: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return EXIT_INPUT;
}

/* A Diag's message starts with "file:line:col: error:" when it has a place; one without
 * gets the program's name so every error line says who is talking. */
static int diag_exit(const Diag *d, int code) {
  if (!strncmp(d->msg, "error: ", 7))
    fputs("gpucc: ", stderr);
  fprintf(stderr, "%s\n", d->msg);
  return code;
}

static void print_help(void) {
  printf("usage: gpucc FILE [options]            compile FILE (.gir, .onnx); FILE '-' reads stdin\n"
         "       gpucc run FILE [run options]    evaluate FILE\n"
         "       gpucc --help | --version\n"
         "\n"
         "compile options:\n"
         "  --emit=ir               print the IR after the passes given by --passes (by\n"
         "                          default none: the input in canonical form)\n"
         "  --passes=a,b,...        run exactly these passes ('--passes=' runs none); without\n"
         "                          it the default pipeline runs, except with --emit=ir\n"
         "  --print-after-all       print the IR to stderr before the first pass and after\n"
         "                          each pass\n"
         "  --dump-ir=DIR           write DIR/00-input.gir, DIR/01-<pass>.gir, ...\n"
         "  -v, --report            say what each pass did, and how long it took, on stderr\n"
         "  --emit=cuda             print the generated CUDA C (symbolic dims bound with\n"
         "                          --dim SYM=N; runs the default pipeline first)\n"
         "  --emit=cubin -o F       compile it with NVRTC and write the cubin to F\n"
         "  --arch=sm_XX            target of --emit=cubin: sm_80, sm_86, sm_89, sm_90 (the\n"
         "                          default) or sm_90a\n"
         "  -o OUT                  write the output to OUT (needs --emit for now)\n"
         "\n"
         "ONNX models (FILE ending in .onnx), both modes:\n"
         "  --dim SYM=N             bind symbolic dim SYM to N when loading\n"
         "  --shape NAME=AxBxC      give input NAME this static shape (repeatable)\n"
         "  --const NAME=PATH.npy   make input NAME a constant with this value, for inputs\n"
         "                          that decide shapes (a Reshape's shape); repeatable\n"
         "  --max-weight-bytes=N    refuse models whose weights need more than N bytes\n"
         "  --check-ops             list every unsupported op of the model (exit 0 when\n"
         "                          there is none, 1 otherwise); compiles nothing\n"
         "\n"
         "run options (and --passes, --print-after-all, --dump-ir, --report as above):\n"
         "  --cpu                   use the reference executor (the only one for now)\n"
         "  --input NAME=PATH.npy   the value of input NAME (repeatable); inputs not given\n"
         "                          are random(seed = 1 + input index, scale = 1)\n"
         "  --dim SYM=N             size of symbolic dim SYM for inputs not given\n"
         "                          (default: from the given inputs, else 1)\n"
         "  --output-dir DIR        write each output to DIR/<name>.npy instead of printing\n"
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
  if (!eq || eq == arg)
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
  free(o->consts);
  free(o->inputs);
  free(o->dims);
  free(o->shapes);
}

/* The options only one mode understands, checked once all are read. */
static int check_mode(const Options *o) {
  if (o->mode == MODE_RUN) {
    if (o->emit)
      return usage_error("option '--emit' is not for 'gpucc run'");
    if (o->out)
      return usage_error("option '-o' is not for 'gpucc run' (use --output-dir)");
  } else {
    if (o->cpu)
      return usage_error("option '--cpu' is only for 'gpucc run'");
    if (o->ninputs)
      return usage_error("option '--input' is only for 'gpucc run'");
    bool code = o->emit && (!strcmp(o->emit, "cuda") || !strcmp(o->emit, "cubin"));
    if (o->ndims && !o->onnx && !code)
      return usage_error("option '--dim' is only for 'gpucc run', --emit=cuda/cubin and ONNX "
                         "models");
    if (o->output_dir)
      return usage_error("option '--output-dir' is only for 'gpucc run'");
    if (o->emit && strcmp(o->emit, "ir") != 0 && !code)
      return usage_error("unknown --emit kind '%s' (known: ir, cuda, cubin)", o->emit);
    if (o->emit && !strcmp(o->emit, "cubin") && (!o->out || !strcmp(o->out, "-")))
      return usage_error("--emit=cubin needs -o FILE");
    if (o->arch && !(o->emit && !strcmp(o->emit, "cubin")))
      return usage_error("option '--arch' is for --emit=cubin");
    Diag ad = {0};
    if (o->arch && nvrtc_check_arch(o->arch, &ad))
      return usage_error("%s", ad.msg + (strncmp(ad.msg, "error: ", 7) ? 0 : 7));
    if (o->out && !o->emit)
      return usage_error("code generation is not available yet; use --emit=ir");
  }
  if (!o->file)
    return usage_error("no input file");
  if (!o->onnx && (o->nshapes || o->nconsts || o->check_ops || o->max_weight_bytes))
    return usage_error("options '--shape', '--const', '--check-ops' and '--max-weight-bytes' "
                       "are for ONNX models (FILE.onnx)");
  if (o->check_ops && o->mode == MODE_RUN)
    return usage_error("option '--check-ops' is not for 'gpucc run'");
  for (int i = 0; i < o->ndims; i++) {
    char *end;
    errno = 0;
    long long v = strtoll(o->dims[i].value, &end, 10);
    if (!*o->dims[i].value || *end || errno || v < 0)
      return usage_error("--dim %s: the size must be a non-negative integer", o->dims[i].arg);
  }
  return 0;
}

/* The pass list: --passes if given, else the default pipeline, except that --emit=ir
 * alone prints the input as it is (like mlir-opt). */
static int choose_passes(Options *o, const char *passes_arg) {
  if (passes_arg) {
    Diag d = {0};
    o->npasses = pass_parse_list(passes_arg, o->passes, MAX_PASSES, &d);
    if (o->npasses < 0) {
      /* The message is the library's; the usage hint is ours. */
      diag_exit(&d, EXIT_USAGE);
      fputs("run 'gpucc --help' for usage\n", stderr);
      return EXIT_USAGE;
    }
    return 0;
  }
  o->npasses = 0;
  if (o->mode == MODE_COMPILE && o->emit && !strcmp(o->emit, "ir"))
    return 0;
  for (int i = 0; pass_default_pipeline[i] && i < MAX_PASSES; i++)
    o->passes[o->npasses++] = pass_default_pipeline[i];
  return 0;
}

/* Returns 0 to go on, -1 when --help or --version was answered, or an exit code. */
static int parse_args(int argc, char **argv, Options *o) {
  memset(o, 0, sizeof *o);
  o->inputs = calloc((size_t)argc, sizeof *o->inputs);
  o->dims = calloc((size_t)argc, sizeof *o->dims);
  o->shapes = calloc((size_t)argc, sizeof *o->shapes);
  o->consts = calloc((size_t)argc, sizeof *o->consts);
  if (!o->inputs || !o->dims || !o->shapes || !o->consts)
    return input_error("out of memory");
  int i = 1;
  if (argc > 1 && !strcmp(argv[1], "run")) {
    o->mode = MODE_RUN;
    i = 2;
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
    } else if (!strcmp(a, "-v") || !strcmp(a, "--report")) {
      o->report = true;
    } else if (!strcmp(a, "--cpu")) {
      o->cpu = true;
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
    } else if ((v = option_value(a, "--passes", argc, argv, &i, &missing))) {
      passes_arg = v;
    } else if ((v = option_value(a, "--dump-ir", argc, argv, &i, &missing))) {
      o->dump_dir = v;
    } else if ((v = option_value(a, "--output-dir", argc, argv, &i, &missing))) {
      o->output_dir = v;
    } else if ((v = option_value(a, "--input", argc, argv, &i, &missing))) {
      int rc = add_binding(o->inputs, &o->ninputs, "--input", v);
      if (rc)
        return rc;
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
  size_t flen = o->file ? strlen(o->file) : 0;
  o->onnx = flen > 5 && !strcmp(o->file + flen - 5, ".onnx");
  int rc = check_mode(o);
  return rc ? rc : choose_passes(o, passes_arg);
}

/* ---------------------------------------------------------------- both modes */

/* Parses the file and runs the passes with the printing and dumping asked for. */
/* --dim, --shape and --const for the ONNX loader, which applies them at load. The
 * bindings borrow o's strings and live in *b (free it). */
static int onnx_options(const Options *o, OnnxOptions *opt, OnnxBinding **b, Diag *d) {
  int n = o->ndims + o->nshapes + o->nconsts;
  *b = calloc((size_t)n + 1, sizeof **b);
  if (!*b)
    return diag_error(d, (SrcLoc){0}, "out of memory");
  OnnxBinding *p = *b;
  *opt = (OnnxOptions){.dims = p, .ndims = o->ndims, .shapes = p + o->ndims,
                       .nshapes = o->nshapes, .consts = p + o->ndims + o->nshapes,
                       .nconsts = o->nconsts, .max_weight_bytes = o->max_weight_bytes};
  for (int i = 0; i < o->ndims; i++)
    *p++ = (OnnxBinding){o->dims[i].name, o->dims[i].value};
  for (int i = 0; i < o->nshapes; i++)
    *p++ = (OnnxBinding){o->shapes[i].name, o->shapes[i].value};
  for (int i = 0; i < o->nconsts; i++)
    *p++ = (OnnxBinding){o->consts[i].name, o->consts[i].value};
  return 0;
}

static Graph *load_onnx(const Options *o, Diag *d) {
  OnnxOptions opt;
  OnnxBinding *b;
  if (onnx_options(o, &opt, &b, d))
    return NULL;
  Graph *g = onnx_load(o->file, &opt, d);
  free(b);
  return g;
}

static int load_graph(const Options *o, Graph **out) {
  Diag d = {0};
  Graph *g = o->onnx ? load_onnx(o, &d) : dsl_parse_file(o->file, &d);
  if (!g)
    return diag_exit(&d, EXIT_INPUT);
  PassContext ctx = {.diag = &d,
                     .print_after_all = o->print_after_all ? stderr : NULL,
                     .report = o->report ? stderr : NULL,
                     .dump_dir = o->dump_dir};
  if (pass_run_pipeline(g, o->passes, o->npasses, &ctx)) {
    graph_free(g);
    return diag_exit(&d, EXIT_INPUT);
  }
  *out = g;
  return 0;
}

/* ---------------------------------------------------------------- compile mode */

/* Prints g into OUT as one output file (see OutFile). */
static int write_ir_file(const Graph *g, const char *out) {
  Diag d = {0};
  OutFile o;
  FILE *f = outfile_open(&o, out, &d);
  if (!f)
    return diag_exit(&d, EXIT_INPUT);
  ir_print(g, f);
  if (outfile_commit(&o, &d))
    return diag_exit(&d, EXIT_INPUT);
  return 0;
}

static int emit_ir(const Graph *g, const char *out) {
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
  OnnxOptions opt;
  OnnxBinding *b;
  if (onnx_options(o, &opt, &b, &d))
    return diag_exit(&d, EXIT_INPUT);
  int n = onnx_check_ops(o->file, &opt, &report, &d);
  free(b);
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

/* --emit=cuda and --emit=cubin: codegen after the passes, then NVRTC for a cubin. */
static int emit_code(Graph *g, const Options *o) {
  Diag d = {0};
  if (!o->onnx && o->ndims) {
    const char **names = calloc((size_t)o->ndims, sizeof *names);
    int64_t *sizes = calloc((size_t)o->ndims, sizeof *sizes);
    for (int i = 0; names && sizes && i < o->ndims; i++) {
      names[i] = o->dims[i].name;
      sizes[i] = strtoll(o->dims[i].value, NULL, 10);
    }
    int rc = names && sizes ? codegen_bind_dims(g, names, sizes, o->ndims, &d)
                            : diag_error(&d, (SrcLoc){0}, "out of memory");
    free(names);
    free(sizes);
    if (rc)
      return diag_exit(&d, EXIT_INPUT);
  }
  Program *p = codegen_graph(g, NULL, &d);
  if (!p)
    return diag_exit(&d, EXIT_INPUT);
  int rc;
  if (!strcmp(o->emit, "cuda")) {
    rc = write_bytes(o->out, p->source, p->source_len);
  } else {
    NvrtcOptions opt = {.arch = o->arch};
    NvrtcOutput bin;
    rc = nvrtc_compile(p->source, "kernels.cu", &opt, &bin, &d)
             ? diag_exit(&d, EXIT_INPUT)
             : write_bytes(o->out, bin.cubin, bin.cubin_size);
    nvrtc_output_free(&bin);
  }
  program_free(p);
  return rc;
}

static int cmd_compile(const Options *o) {
  if (o->check_ops)
    return check_ops(o);
  Graph *g = NULL;
  int rc = load_graph(o, &g);
  if (rc)
    return rc;
  if (o->emit && strcmp(o->emit, "ir") != 0)
    rc = emit_code(g, o);
  else if (o->emit)
    rc = emit_ir(g, o->out);
  else
    print_summary(g, o);
  graph_free(g);
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

/* Reads the --input files into in[] (indexed like g->inputs). */
static int load_given_inputs(const Options *o, const Graph *g, Tensor **in) {
  for (int i = 0; i < o->ninputs; i++) {
    const Binding *b = &o->inputs[i];
    int k = find_input(g, b->name);
    if (k < 0) {
      char names[1024];
      list_inputs(g, names, sizeof names);
      return input_error("--input %s: the graph has no input '%%%s' (its inputs: %s)", b->arg,
                         b->name[0] == '%' ? b->name + 1 : b->name, names);
    }
    if (in[k])
      return usage_error("input '%%%s' is given twice", g->inputs[k]->name);
    Diag d = {0};
    in[k] = npy_read(b->value, &d);
    if (!in[k])
      return diag_exit(&d, EXIT_INPUT);
  }
  return 0;
}

/* The size of symbolic dim `sym` for inputs not given: --dim, else what a given input
 * of the same symbol has, else 1. */
static int64_t symbol_size(const Options *o, const Graph *g, Tensor *const *in,
                           const char *sym) {
  for (int i = 0; i < o->ndims; i++)
    if (!strcmp(o->dims[i].name, sym))
      return strtoll(o->dims[i].value, NULL, 10);
  for (int i = 0; i < g->ninputs; i++) {
    const Shape *s = &g->inputs[i]->type.shape;
    if (!in[i] || in[i]->rank != s->rank)
      continue;
    for (int j = 0; j < s->rank; j++)
      if (s->dims[j].sym && !strcmp(s->dims[j].sym, sym))
        return in[i]->dims[j];
  }
  return 1;
}

static bool graph_has_symbol(const Graph *g, const char *sym) {
  for (int i = 0; i < g->ninputs; i++) {
    const Shape *s = &g->inputs[i]->type.shape;
    for (int j = 0; j < s->rank; j++)
      if (s->dims[j].sym && !strcmp(s->dims[j].sym, sym))
        return true;
  }
  return false;
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

static void print_elements(FILE *f, const Tensor *t, int dim, int64_t *at) {
  if (dim == t->rank) {
    const char *p = (const char *)t->data + (size_t)*at * dtype_size(t->dtype);
    if (dtype_is_float(t->dtype))
      fprintf(f, "%.9g", dtype_load_f64(t->dtype, p));
    else
      fprintf(f, "%" PRId64, dtype_load_i64(t->dtype, p));
    ++*at;
    return;
  }
  fputc('[', f);
  for (int64_t i = 0; i < t->dims[dim]; i++) {
    if (i)
      fputs(", ", f);
    print_elements(f, t, dim + 1, at);
  }
  fputc(']', f);
}

static Type tensor_type(const Tensor *t) {
  Type ty = {.dtype = t->dtype, .shape.rank = t->rank};
  for (int i = 0; i < t->rank; i++)
    ty.shape.dims[i] = (Dim){t->dims[i], NULL};
  return ty;
}

static int print_outputs(const Graph *g, Tensor *const *out) {
  for (int i = 0; i < g->noutputs; i++) {
    char ts[256];
    Type t = tensor_type(out[i]);
    ir_print_value_name(stdout, g->outputs[i]->name);
    printf(": %s\n", type_str(&t, ts, sizeof ts));
    int64_t at = 0;
    print_elements(stdout, out[i], 0, &at);
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

/* Writes every output; if one fails, the ones already written are removed again. */
static int write_outputs(const Graph *g, Tensor *const *out, const char *dir) {
  Diag dd = {0};
  int rc = make_dirs(dir, &dd) ? diag_exit(&dd, EXIT_INPUT) : 0;
  if (rc)
    return rc;
  char **written = calloc((size_t)g->noutputs + 1, sizeof *written);
  if (!written)
    return input_error("out of memory");
  int nwritten = 0;
  for (int i = 0; i < g->noutputs && !rc; i++) {
    char *path = output_path(dir, g->outputs[i]->name);
    Diag d = {0};
    if (!path)
      rc = input_error("out of memory");
    else if (npy_write(path, out[i], &d))
      rc = diag_exit(&d, EXIT_INPUT);
    if (rc)
      free(path); /* npy_write leaves nothing behind itself */
    else
      written[nwritten++] = path;
  }
  for (int i = 0; i < nwritten; i++) {
    if (rc)
      unlink(written[i]);
    free(written[i]);
  }
  free(written);
  return rc;
}

/* ---------------------------------------------------------------- run mode */

static int cmd_run(const Options *o) {
  if (!o->cpu)
    fputs("gpucc: note: the GPU backend is not available yet; using the reference executor "
          "(--cpu)\n",
          stderr);
  Graph *g = NULL;
  int rc = load_graph(o, &g);
  if (rc)
    return rc;
  Tensor **in = calloc((size_t)g->ninputs + 1, sizeof *in);
  Tensor **out = calloc((size_t)g->noutputs + 1, sizeof *out);
  if (!in || !out)
    rc = input_error("out of memory");
  if (!rc)
    rc = load_given_inputs(o, g, in);
  if (!rc)
    rc = make_default_inputs(o, g, in);
  if (!rc) {
    Diag d = {0};
    if (ir_eval(g, in, out, &d))
      rc = diag_exit(&d, EXIT_INPUT);
  }
  if (!rc)
    rc = o->output_dir ? write_outputs(g, out, o->output_dir) : print_outputs(g, out);
  for (int i = 0; in && i < g->ninputs; i++)
    tensor_free(in[i]);
  for (int i = 0; out && i < g->noutputs; i++)
    tensor_free(out[i]);
  free(in);
  free(out);
  graph_free(g);
  return rc;
}

int main(int argc, char **argv) {
  Options o;
  int rc = parse_args(argc, argv, &o);
  if (rc == 0)
    rc = o.mode == MODE_RUN ? cmd_run(&o) : cmd_compile(&o);
  else if (rc < 0)
    rc = 0;
  free_options(&o);
  return rc;
}
