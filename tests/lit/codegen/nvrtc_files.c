/* nvrtc_files.c: CUDA C files compiled by gpucc's own NVRTC module (compiler/nvrtc.c: the
 * same options, default architecture and error messages as `gpucc --emit=cubin`), for
 * tests/lit/codegen/cubin_all.py, which gathers the distinct kernels of every test graph
 * and model into a few files. Nothing is read from or written to NVRTC's cache: every
 * file is compiled, whatever an earlier run left.
 *
 * usage: nvrtc_files [--arch=sm_XX] FILE.cu...
 * Prints "ok FILE" or "FAIL FILE: <NVRTC's log around the error>" for each; exits 1 when
 * any failed, 2 on a usage error or a file it cannot read. */
#include "compiler/nvrtc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_text(const char *path) {
  char why[256];
  uint64_t size = 0;
  FILE *f = fopen_regular(path, &size, why, sizeof why);
  if (!f) {
    fprintf(stderr, "nvrtc_files: %s: %s\n", path, why);
    return NULL;
  }
  char *text = size < ((uint64_t)1 << 30) ? malloc((size_t)size + 1) : NULL;
  if (text && fread(text, 1, (size_t)size, f) == (size_t)size) {
    text[size] = 0;
  } else {
    fprintf(stderr, "nvrtc_files: %s: cannot read it\n", path);
    free(text);
    text = NULL;
  }
  fclose(f);
  return text;
}

int main(int argc, char **argv) {
  NvrtcOptions opt = {.no_cache = true};
  int first = 1, failed = 0;
  if (argc > 1 && !strncmp(argv[1], "--arch=", 7))
    opt.arch = argv[first++] + 7;
  if (first >= argc) {
    fprintf(stderr, "usage: nvrtc_files [--arch=sm_XX] FILE.cu...\n");
    return 2;
  }
  for (int i = first; i < argc; i++) {
    char *src = read_text(argv[i]);
    if (!src)
      return 2;
    const char *base = strrchr(argv[i], '/');
    Diag d = {0};
    NvrtcOutput out;
    if (nvrtc_compile(src, base ? base + 1 : argv[i], &opt, &out, &d) == 0 &&
        out.cubin_size > 4 && !memcmp(out.cubin, "\177ELF", 4)) {
      printf("ok %s\n", argv[i]);
    } else {
      printf("FAIL %s: %s\n", argv[i], d.msg[0] ? d.msg : "no cubin");
      failed++;
    }
    fflush(stdout);
    nvrtc_output_free(&out);
    free(src);
  }
  return failed ? 1 : 0;
}
