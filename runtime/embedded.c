/* embedded.c: gpucc_model_load, the entry point of a model.so. The library finds its own
 * file (dladdr on an object inside it), reads the payload the compiler appended (see
 * runtime.h), maps the weights from the file itself or from the weights file beside it,
 * and creates the model. Only built into libgpucc_model.so.
 */
#define _GNU_SOURCE /* dladdr */
#include "runtime/runtime-impl.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Any object of this library: its address tells dladdr which file we were loaded from. */
static const char anchor = 0;

typedef struct Mapping {
  void *p;
  size_t len;
} Mapping;

static GpuccStatus map_file(const char *path, Mapping *m) {
  m->p = NULL;
  m->len = 0;
  /* O_NONBLOCK: a FIFO put where the weights belong must not hang the load. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return gpucc_fail(GPUCC_ERR_IO, "cannot open %s: %s", path, strerror(errno));
  struct stat st;
  GpuccStatus s = GPUCC_OK;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    s = gpucc_fail(GPUCC_ERR_IO, "%s is not a regular file", path);
  } else if (st.st_size > 0) {
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) s = gpucc_fail(GPUCC_ERR_IO, "cannot map %s: %s", path, strerror(errno));
    else m->p = p, m->len = (size_t)st.st_size;
  }
  close(fd);
  return s;
}

static void unmap(Mapping *m) {
  if (m->p) munmap(m->p, m->len);
}

/* Prefixes the current message with the file it is about. */
static GpuccStatus about(GpuccStatus st, const char *path) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", gpucc_last_error());
  return gpucc_fail(st, "%s: %s", path, msg);
}

static GpuccStatus load(const char *so_path, int device, GpuccModel **out) {
  Mapping so, wf = {NULL, 0};
  GpuccStatus st = map_file(so_path, &so);
  if (st) return st;
  GpuccTrailer t;
  const unsigned char *weights = NULL;
  if ((st = gpucc_trailer_parse(so.p, so.len, &t))) {
    st = about(st, so_path);
  } else if (t.flags & GPUCC_TRAILER_EXTERNAL_WEIGHTS) {
    /* The weights lie beside the model.so's own file, wherever a symlink to it is (the
     * writer puts them there too). */
    char *real = realpath(so_path, NULL);
    const char *at = real ? real : so_path, *slash = strrchr(at, '/');
    int dir = slash ? (int)(slash - at + 1) : 0;
    char path[4096 + GPUCC_MAX_WEIGHTS_FILE + 2];
    snprintf(path, sizeof path, "%.*s%s", dir, at, t.weights_file);
    free(real);
    if (!(st = map_file(path, &wf)) && wf.len != t.weights_len)
      st = gpucc_fail(GPUCC_ERR_BAD_PLAN, "%s: %zu bytes, the model wants %llu", path, wf.len,
                      (unsigned long long)t.weights_len);
    weights = wf.p;
  } else {
    weights = (const unsigned char *)so.p + t.weights_offset;
  }
  if (!st) {
    const unsigned char *plan = (const unsigned char *)so.p + t.plan_offset;
    st = gpucc_model_create(plan, (size_t)t.plan_len, t.weights_len ? weights : NULL,
                            (size_t)t.weights_len, device, out);
  }
  unmap(&wf);
  unmap(&so);
  return st;
}

GpuccStatus gpucc_model_load(int device, GpuccModel **out) {
  if (!out) return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_model_load: NULL argument");
  *out = NULL;
  Dl_info info;
  if (!dladdr(&anchor, &info) || !info.dli_fname || !info.dli_fname[0])
    return gpucc_fail(GPUCC_ERR_IO, "gpucc_model_load: cannot find this library's file (dladdr)");
  return load(info.dli_fname, device, out);
}
