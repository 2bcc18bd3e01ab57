/* test_model_so.c: a real model.so, made from the libgpucc_model.so stub.
 *
 * On any machine: the stub's ELF file imports nothing beyond libc (and the sanitizer
 * runtimes in a sanitizer build) and exports only gpucc_* symbols; a model.so written
 * from it (weights embedded, and weights in a file beside it) loads with dlopen, and
 * gpucc_model_load gets through its payload to the driver, failing only with "no CUDA
 * driver/device" where there is none; the bare stub says it carries no model.
 * On a GPU: the model runs, from the library itself and through examples/run_model,
 * against values written here by hand.
 *
 *   test_model_so <libgpucc_model.so> <run_model>
 */
#include "runtime/runtime.h"
#include "../unit/check.h"

#include <dlfcn.h>
#include <elf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)n + 1);
  if (fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
  fclose(f);
  *len = (size_t)n;
  return b;
}

/* ---------------------------------------------------------------- the ELF file, read directly */

static bool allowed_import(const char *lib) {
  static const char *const ok[] = {"libc.so.", "libdl.so.", "libpthread.so.", "ld-linux",
                                   "libasan.so.", "libubsan.so."};
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
    if (!strncmp(lib, ok[i], strlen(ok[i]))) return true;
  return false;
}

/* DT_NEEDED entries and exported symbols of a 64-bit little-endian ELF shared library. */
static void check_elf(const char *path) {
  size_t len = 0;
  unsigned char *f = slurp(path, &len);
  CHECK(f && len > sizeof(Elf64_Ehdr) && !memcmp(f, ELFMAG, SELFMAG) && f[EI_CLASS] == ELFCLASS64);
  if (!f || len <= sizeof(Elf64_Ehdr)) return;
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f;
  CHECK(eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) <= len);
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(f + eh->e_shoff);
  int imports = 0, exports = 0;
  bool load = false, create = false, run = false;
  for (int i = 0; i < eh->e_shnum; i++) {
    const Elf64_Shdr *strtab = &sh[sh[i].sh_link];
    const char *str = (const char *)f + strtab->sh_offset;
    if (sh[i].sh_type == SHT_DYNAMIC) {
      const Elf64_Dyn *d = (const Elf64_Dyn *)(f + sh[i].sh_offset);
      for (size_t j = 0; j < sh[i].sh_size / sizeof *d && d[j].d_tag != DT_NULL; j++) {
        if (d[j].d_tag != DT_NEEDED) continue;
        const char *lib = str + d[j].d_un.d_val;
        imports++;
        if (!allowed_import(lib)) fprintf(stderr, "%s needs %s\n", path, lib);
        CHECK(allowed_import(lib));
      }
    }
    if (sh[i].sh_type == SHT_DYNSYM) {
      const Elf64_Sym *s = (const Elf64_Sym *)(f + sh[i].sh_offset);
      for (size_t j = 1; j < sh[i].sh_size / sizeof *s; j++) {
        int bind = ELF64_ST_BIND(s[j].st_info);
        if (s[j].st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK)) continue;
        const char *name = str + s[j].st_name;
        exports++;
        if (strncmp(name, "gpucc_", 6)) fprintf(stderr, "%s exports %s\n", path, name);
        CHECK(!strncmp(name, "gpucc_", 6));
        load |= !strcmp(name, "gpucc_model_load");
        create |= !strcmp(name, "gpucc_model_create");
        run |= !strcmp(name, "gpucc_model_run_host");
      }
    }
  }
  CHECK(imports >= 1 && exports >= 20 && load && create && run);
  free(f);
}

/* ---------------------------------------------------------------- a model with no kernels */

/* y = the weights (a copy from the weights region), ones = eight 1 bytes (a memset),
 * x_again = x (a copy inside the arena). No module: runs without NVRTC and without
 * cuBLASLt. */
static const float weights[4] = {10, 20, 30, 40};

static void *make_plan(size_t *len) {
  GpuccPlan *p = gpucc_plan_new(1024, sizeof weights, 0);
  int64_t d4[] = {4}, d8[] = {8};
  gpucc_plan_add_input(p, "x", GPUCC_DT_F32, 1, d4, 0);
  gpucc_plan_add_output(p, "w", GPUCC_DT_F32, 1, d4, 256);
  gpucc_plan_add_output(p, "ones", GPUCC_DT_U8, 1, d8, 512);
  gpucc_plan_add_output(p, "x_again", GPUCC_DT_F32, 1, d4, 768);
  gpucc_plan_add_copy(p, gpucc_arena_ptr(256), gpucc_weights_ptr(0), sizeof weights);
  gpucc_plan_add_memset(p, gpucc_arena_ptr(512), 8, 1);
  gpucc_plan_add_copy(p, gpucc_arena_ptr(768), gpucc_arena_ptr(0), 16);
  void *bytes = NULL;
  CHECK(gpucc_plan_serialize(p, &bytes, len) == GPUCC_OK);
  gpucc_plan_free(p);
  return bytes;
}

typedef GpuccStatus (*LoadFn)(int, GpuccModel **);
typedef GpuccStatus (*RunHostFn)(GpuccModel *, const void *const *, void *const *, void *);
typedef void (*DestroyFn)(GpuccModel *);
typedef const char *(*ErrorFn)(void);

static void *sym(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  CHECK(p != NULL);
  return p;
}

/* Loads path with dlopen and its model with gpucc_model_load. Returns 1 if it ran and
 * was checked, 0 if there is no driver or device (the error must say so), -1 on error. */
static int load_and_run(const char *path, bool expect_model) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
  CHECK(lib != NULL);
  if (!lib) return -1;
  LoadFn load;
  RunHostFn run_host;
  DestroyFn destroy;
  ErrorFn last_error;
  void *p;
  /* memcpy: ISO C has no cast from dlsym's void * to a function pointer. */
  p = sym(lib, "gpucc_model_load"), memcpy(&load, &p, sizeof p);
  p = sym(lib, "gpucc_model_run_host"), memcpy(&run_host, &p, sizeof p);
  p = sym(lib, "gpucc_model_destroy"), memcpy(&destroy, &p, sizeof p);
  p = sym(lib, "gpucc_last_error"), memcpy(&last_error, &p, sizeof p);
  int result = -1;
  GpuccModel *m = NULL;
  GpuccStatus st = load(0, &m);
  if (!expect_model) {
    /* The bare stub, or a model whose weights file is gone: refused before the driver. */
    if (st == GPUCC_OK) destroy(m);
    CHECK(st == GPUCC_ERR_BAD_PLAN || st == GPUCC_ERR_IO);
    CHECK(strstr(last_error(), "no model payload") || strstr(last_error(), "cannot open"));
    CHECK(strstr(last_error(), path) != NULL); /* the message names the file */
    result = 0;
  } else if (st == GPUCC_ERR_NO_DRIVER || st == GPUCC_ERR_NO_DEVICE) {
    CHECK(strstr(last_error(), "no CUDA") != NULL || strstr(last_error(), "CUDA driver") != NULL);
    result = 0;
  } else {
    if (st) fprintf(stderr, "gpucc_model_load from %s: %s\n", path, last_error());
    CHECK(st == GPUCC_OK);
    if (!st) {
      float x[4] = {1.5f, -2, 0, 1e30f}, w[4] = {0}, xa[4] = {0};
      unsigned char ones[8] = {0};
      const void *in[] = {x};
      void *out[] = {w, ones, xa};
      CHECK(run_host(m, in, out, NULL) == GPUCC_OK);
      CHECK(!memcmp(w, weights, sizeof w) && !memcmp(xa, x, sizeof x));
      for (int i = 0; i < 8; i++) CHECK(ones[i] == 1);
      destroy(m);
      result = 1;
    }
  }
  dlclose(lib);
  return result;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_model_so <libgpucc_model.so> <run_model>\n");
    return 2;
  }
  const char *stub = argv[1], *run_model = argv[2];
  check_elf(stub);

  char dir[] = "/tmp/gpucc-test-model-so-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char so[300], ext[300], wfile[300], cmd[1200];
  snprintf(so, sizeof so, "%s/model.so", dir);
  snprintf(ext, sizeof ext, "%s/ext.so", dir);
  snprintf(wfile, sizeof wfile, "%s/ext.so.weights", dir);
  size_t len = 0;
  void *plan = make_plan(&len);
  char err[512];
  size_t stub_len = 0;
  unsigned char *stub_bytes = slurp(stub, &stub_len);
  CHECK(stub_bytes != NULL);
  CHECK(gpucc_write_model_so(stub_bytes, stub_len, so, plan, len, weights, sizeof weights, NULL,
                             SIZE_MAX, err, sizeof err) == GPUCC_OK);
  CHECK(gpucc_write_model_so(stub_bytes, stub_len, ext, plan, len, weights, sizeof weights, NULL, 0,
                             err, sizeof err) == GPUCC_OK);
  free(stub_bytes);
  free(plan);
  check_elf(so); /* still a library that imports nothing more */

  int ran = load_and_run(so, true);
  CHECK(load_and_run(ext, true) == ran);
  CHECK(load_and_run(stub, false) == 0);

  /* examples/run_model on the same file: on a GPU it prints the outputs; otherwise it
   * fails saying there is no driver or device. */
  snprintf(cmd, sizeof cmd, "%s %s 2>&1", run_model, ext);
  FILE *pipe = popen(cmd, "r");
  char output[8192] = "";
  size_t n = pipe ? fread(output, 1, sizeof output - 1, pipe) : 0;
  output[n] = 0;
  int status = pipe ? pclose(pipe) : -1;
  if (ran == 1) {
    CHECK(status == 0 && strstr(output, "w: f32[4]") && strstr(output, "10 20 30 40"));
  } else {
    CHECK(status != 0 && strstr(output, "CUDA"));
  }
  if ((ran == 1) != (status == 0)) fprintf(stderr, "run_model said:\n%s\n", output);

  /* Without its weights file, the model names the file it cannot open. */
  char moved[320];
  snprintf(moved, sizeof moved, "%s.moved", wfile);
  CHECK(rename(wfile, moved) == 0);
  CHECK(load_and_run(ext, false) == 0);
  unlink(moved);

  unlink(so);
  unlink(ext);
  unlink(wfile);
  CHECK(rmdir(dir) == 0);
  if (ran == 0) printf("test_model_so: no CUDA device, so the models were loaded but not run\n");
  if (failures) fprintf(stderr, "test_model_so: %d checks failed\n", failures);
  return failures ? 1 : 0;
}
