/* payload.c: the bytes a model.so carries after its ELF image (format in runtime.h), and
 * the writer the compiler calls to make one. Pure C, no CUDA.
 *
 * The trailer is read from a file anyone can hand us, so every range is checked against
 * the file's size, and a checksum over the trailer's fields catches a damaged one before
 * its offsets are trusted.
 */
/* realpath() is X/Open, beyond the POSIX level the build asks for. */
#define _XOPEN_SOURCE 700

#include "runtime/runtime-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TRAILER_VERSION 2u
#define TRAILER_V1_BYTES 80
#define MAX_INFO (1u << 20) /* the build info's bytes at most */
#define PAYLOAD_ALIGN 64 /* plan and weights start at multiples of this in the file */

static GpuccStatus no_payload(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static GpuccStatus no_payload(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gpucc_vfail(GPUCC_ERR_BAD_PLAN, fmt, ap);
  va_end(ap);
  return GPUCC_ERR_BAD_PLAN;
}

/* Whether the file holds this code: its marker, which every copy of the runtime has in
 * its read-only data (strip keeps that; it removes only what follows the ELF image). */
static const char runtime_marker[] = "gpucc runtime: a model's plan and weights follow the ELF image";

static bool has_runtime(const unsigned char *f, size_t n) {
  size_t m = sizeof runtime_marker - 1;
  for (size_t i = 0; i + m <= n; i++) {
    const unsigned char *p = memchr(f + i, runtime_marker[0], n - m + 1 - i);
    if (!p)
      return false;
    i = (size_t)(p - f);
    if (!memcmp(p, runtime_marker, m))
      return true;
  }
  return false;
}

static bool in_file(uint64_t off, uint64_t len, uint64_t end) {
  return off <= end && len <= end - off;
}

/* A bare file name: no directory part, nothing that climbs out of the .so's folder. */
static bool bare_name_ok(const char *s, size_t n) {
  if (n == 0 || n > GPUCC_MAX_WEIGHTS_FILE || memchr(s, 0, n) || memchr(s, '/', n)) return false;
  return !(n == 1 && s[0] == '.') && !(n == 2 && s[0] == '.' && s[1] == '.');
}

GpuccStatus gpucc_trailer_parse(const void *file, size_t file_len, GpuccTrailer *out) {
  if (!file || !out) return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_trailer_parse: NULL argument");
  memset(out, 0, sizeof *out);
  const unsigned char *f = file;
  /* version 2, else version 1 (80 bytes: no build info) */
  size_t size = GPUCC_TRAILER_BYTES;
  const unsigned char *t1 = file_len >= TRAILER_V1_BYTES ? f + file_len - TRAILER_V1_BYTES : NULL;
  if (t1 && !memcmp(t1, "GPUCCMDL", 8) && gpucc_rd32(t1 + 8) == 1 &&
      !memcmp(t1 + 72, "GPUCCEND", 8) && gpucc_rd64(t1 + 64) == gpucc_fnv1a64(t1, 64))
    size = TRAILER_V1_BYTES;
  if (file_len < size)
    return no_payload("no model payload: the file is shorter than a gpucc trailer");
  const unsigned char *t = f + file_len - size;
  size_t sum_at = size - 16;
  if (memcmp(t, "GPUCCMDL", 8) || memcmp(t + size - 8, "GPUCCEND", 8))
    return has_runtime(f, file_len)
               ? no_payload("no model payload: the file holds gpucc's runtime but not the plan "
                            "and weights that follow it in a model.so; `strip` removes them "
                            "(it keeps only the ELF image): build the model.so again and ship "
                            "it unstripped")
               : no_payload("no model payload: the file does not end with a gpucc trailer "
                            "(not a gpucc model.so, or a damaged one)");
  if (gpucc_rd64(t + sum_at) != gpucc_fnv1a64(t, sum_at))
    return no_payload("model payload trailer is damaged (checksum mismatch)");
  uint32_t version = gpucc_rd32(t + 8), flags = gpucc_rd32(t + 12);
  if (version != (size == TRAILER_V1_BYTES ? 1 : TRAILER_VERSION))
    return no_payload("model payload version %u; this runtime reads versions 1 and %u", version,
                      TRAILER_VERSION);
  if (flags & ~GPUCC_TRAILER_EXTERNAL_WEIGHTS) return no_payload("model payload flags 0x%x", flags);
  uint64_t end = file_len - size;
  uint64_t plan_off = gpucc_rd64(t + 16), plan_len = gpucc_rd64(t + 24);
  uint64_t w_off = gpucc_rd64(t + 32), w_len = gpucc_rd64(t + 40);
  uint64_t name_off = gpucc_rd64(t + 48), name_len = gpucc_rd64(t + 56);
  uint64_t info_off = size == TRAILER_V1_BYTES ? 0 : gpucc_rd64(t + 64);
  uint64_t info_len = size == TRAILER_V1_BYTES ? 0 : gpucc_rd64(t + 72);
  if (!plan_len || !in_file(plan_off, plan_len, end))
    return no_payload("model payload: plan at %llu (+%llu bytes) is outside the file",
                      (unsigned long long)plan_off, (unsigned long long)plan_len);
  if ((info_len || info_off) &&
      (!in_file(info_off, info_len, end) || info_len > MAX_INFO ||
       memchr(f + info_off, 0, (size_t)info_len)))
    return no_payload("model payload: bad build info at %llu (+%llu bytes)",
                      (unsigned long long)info_off, (unsigned long long)info_len);
  bool external = flags & GPUCC_TRAILER_EXTERNAL_WEIGHTS;
  if (external) {
    if (w_off || !in_file(name_off, name_len, end) ||
        !bare_name_ok((const char *)f + name_off, (size_t)name_len))
      return no_payload("model payload: bad name for the weights file");
    memcpy(out->weights_file, f + name_off, (size_t)name_len);
  } else if (name_len || name_off || !in_file(w_off, w_len, end)) {
    return no_payload("model payload: weights at %llu (+%llu bytes) are outside the file",
                      (unsigned long long)w_off, (unsigned long long)w_len);
  }
  out->info_offset = info_off;
  out->info_len = info_len;
  out->flags = flags;
  out->plan_offset = plan_off;
  out->plan_len = plan_len;
  out->weights_offset = w_off;
  out->weights_len = w_len;
  return GPUCC_OK;
}

/* ---------------------------------------------------------------- writing */

typedef struct Out {
  FILE *f;
  const char *path; /* where the bytes end up: the path given, or real */
  char *real, *tmp; /* real: the file a symlink names */
  bool in_place;    /* a device or FIFO written as it is: no temporary */
  uint64_t pos;
} Out;

static GpuccStatus io_fail(const char *what, const char *path) {
  return gpucc_fail(GPUCC_ERR_IO, "%s %s: %s", what, path, strerror(errno));
}

/* As compiler outputs are written (ir.h, outfile_open): a temporary beside path, renamed
 * over it by out_commit, where path is a regular file or nothing; through a symlink, the
 * file it names. A character device or a FIFO (/dev/null, a pipe) is written in place,
 * since renaming a file over it would replace it; anything else is refused. */
static GpuccStatus out_open(Out *o, const char *path, mode_t mode) {
  memset(o, 0, sizeof *o);
  struct stat st, lst;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
      return gpucc_fail(GPUCC_ERR_IO, "cannot write %s: it is %s, not a regular file", path,
                        S_ISDIR(st.st_mode) ? "a directory" : "neither a device nor a FIFO");
    /* O_NONBLOCK: a FIFO that nothing reads is an error, not a hang. */
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY), fl;
    if (fd < 0 && errno == ENXIO)
      return gpucc_fail(GPUCC_ERR_IO, "cannot write %s: it is a FIFO that no process reads from",
                        path);
    if (fd < 0) return io_fail("cannot open", path);
    if ((fl = fcntl(fd, F_GETFL)) == -1 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1 ||
        !(o->f = fdopen(fd, "wb"))) {
      GpuccStatus st2 = io_fail("cannot open", path);
      close(fd);
      return st2;
    }
    o->path = path;
    o->in_place = true;
    return GPUCC_OK;
  }
  if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode) && stat(path, &st) == 0 &&
      !(o->real = realpath(path, NULL)))
    return io_fail("cannot resolve", path);
  o->path = o->real ? o->real : path;
  size_t n = strlen(o->path);
  if (!(o->tmp = malloc(n + 16))) {
    free(o->real);
    o->real = NULL;
    return gpucc_fail(GPUCC_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  snprintf(o->tmp, n + 16, "%s.tmpXXXXXX", o->path);
  int fd = mkstemp(o->tmp);
  if (fd < 0) {
    GpuccStatus st2 = io_fail("cannot create a temporary file for", path);
    free(o->tmp);
    free(o->real);
    memset(o, 0, sizeof *o);
    return st2;
  }
  if (fchmod(fd, mode) || !(o->f = fdopen(fd, "wb"))) {
    GpuccStatus st2 = io_fail("cannot open", o->tmp);
    close(fd);
    unlink(o->tmp);
    free(o->tmp);
    free(o->real);
    memset(o, 0, sizeof *o);
    return st2;
  }
  return GPUCC_OK;
}

static void out_abort(Out *o) {
  if (o->f) fclose(o->f);
  if (o->tmp) {
    unlink(o->tmp);
    free(o->tmp);
  }
  free(o->real);
  memset(o, 0, sizeof *o);
}

static GpuccStatus out_write(Out *o, const void *p, size_t n) {
  if (n && fwrite(p, 1, n, o->f) != n) return io_fail("cannot write", o->tmp ? o->tmp : o->path);
  o->pos += n;
  return GPUCC_OK;
}

static GpuccStatus out_pad(Out *o) {
  static const unsigned char zeros[PAYLOAD_ALIGN];
  return out_write(o, zeros, (size_t)((PAYLOAD_ALIGN - o->pos % PAYLOAD_ALIGN) % PAYLOAD_ALIGN));
}

static GpuccStatus out_commit(Out *o) {
  int bad = fflush(o->f) != 0 || ferror(o->f);
  bad |= fclose(o->f) != 0;
  o->f = NULL;
  GpuccStatus st = GPUCC_OK;
  if (bad) st = io_fail("cannot write", o->tmp ? o->tmp : o->path);
  else if (o->tmp && rename(o->tmp, o->path))
    st = io_fail("cannot rename the temporary to", o->path);
  if (st && o->tmp) unlink(o->tmp);
  free(o->tmp);
  free(o->real);
  memset(o, 0, sizeof *o);
  return st;
}

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* *made: the file was created or replaced (not written in place), so it is ours to
 * remove if the model.so that names it cannot be written. */
static GpuccStatus write_weights_file(const char *path, const void *w, size_t n, bool *made) {
  Out o;
  GpuccStatus st = out_open(&o, path, 0644);
  if (st) return st;
  if ((st = out_write(&o, w, n))) {
    out_abort(&o);
    return st;
  }
  bool in_place = o.in_place;
  if (!(st = out_commit(&o))) *made = !in_place;
  return st;
}

static GpuccStatus write_so(const char *out_path, const unsigned char *stub, size_t stub_len,
                            const void *plan, size_t plan_len, const void *weights,
                            size_t weights_len, const char *info, const char *weights_name) {
  Out o;
  GpuccStatus st = out_open(&o, out_path, 0755);
  if (st) return st;
  unsigned char t[GPUCC_TRAILER_BYTES] = {0};
  bool external = weights_name != NULL;
  if ((st = out_write(&o, stub, stub_len)) || (st = out_pad(&o))) goto fail;
  gpucc_wr64(t + 16, o.pos);
  gpucc_wr64(t + 24, plan_len);
  if ((st = out_write(&o, plan, plan_len)) || (st = out_pad(&o))) goto fail;
  gpucc_wr64(t + 40, weights_len);
  if (external) {
    size_t n = strlen(weights_name);
    gpucc_wr64(t + 48, o.pos);
    gpucc_wr64(t + 56, n);
    if ((st = out_write(&o, weights_name, n))) goto fail;
  } else {
    gpucc_wr64(t + 32, o.pos);
    if ((st = out_write(&o, weights, weights_len))) goto fail;
  }
  if (info && *info) {
    gpucc_wr64(t + 64, o.pos);
    gpucc_wr64(t + 72, strlen(info));
    if ((st = out_write(&o, info, strlen(info)))) goto fail;
  }
  memcpy(t, "GPUCCMDL", 8);
  gpucc_wr32(t + 8, TRAILER_VERSION);
  gpucc_wr32(t + 12, external ? GPUCC_TRAILER_EXTERNAL_WEIGHTS : 0);
  gpucc_wr64(t + 80, gpucc_fnv1a64(t, 80));
  memcpy(t + 88, "GPUCCEND", 8);
  if ((st = out_write(&o, t, sizeof t))) goto fail;
  return out_commit(&o);
fail:
  out_abort(&o);
  return st;
}

static GpuccStatus write_model_so(const unsigned char *stub, size_t stub_len,
                                  const char *out_path, const void *plan, size_t plan_len,
                                  const void *weights, size_t weights_len, const char *info,
                                  size_t threshold) {
  if (!stub || !out_path || !plan || !plan_len || (weights_len && !weights))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_write_model_so: NULL or empty argument");
  if (info && strlen(info) > MAX_INFO)
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "gpucc_write_model_so: build info over %u bytes",
                      MAX_INFO);
  GpuccTrailer tr;
  if (stub_len < 64 || memcmp(stub, "\177ELF", 4))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "the model stub is not a shared library (no ELF header)");
  if (!memcmp(stub + stub_len - 8, "GPUCCEND", 8) && !gpucc_trailer_parse(stub, stub_len, &tr))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT,
                      "the model stub already carries a model: give the libgpucc_model.so stub");
  GpuccStatus st = GPUCC_OK;
  char *wpath = NULL;
  bool made = false;
  struct stat ost;
  if (weights_len > threshold && stat(out_path, &ost) == 0 && !S_ISREG(ost.st_mode))
    return gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "%s: the weights go to a file beside the "
                      "model.so, and this is not a regular file", out_path);
  if (weights_len > threshold) {
    /* Through a symlink, the model.so replaces the file it names (out_open), and its
     * weights go beside that file, where the loader looks for them. */
    char *real = NULL;
    struct stat lst;
    if (lstat(out_path, &lst) == 0 && S_ISLNK(lst.st_mode) && stat(out_path, &ost) == 0)
      real = realpath(out_path, NULL);
    const char *at = real ? real : out_path;
    size_t n = strlen(at) + sizeof ".weights";
    if (!(wpath = malloc(n))) st = gpucc_fail(GPUCC_ERR_OUT_OF_MEMORY, "out of host memory");
    else snprintf(wpath, n, "%s.weights", at);
    free(real);
    if (!st && strlen(base_name(wpath)) > GPUCC_MAX_WEIGHTS_FILE)
      st = gpucc_fail(GPUCC_ERR_INVALID_ARGUMENT, "%s: file name too long", wpath);
    /* The weights first: a model.so must never name a file that does not exist. */
    if (!st) st = write_weights_file(wpath, weights, weights_len, &made);
  }
  if (!st)
    st = write_so(out_path, stub, stub_len, plan, plan_len, weights, weights_len, info,
                  wpath ? base_name(wpath) : NULL);
  if (st && made) unlink(wpath); /* no weights file without its model.so */
  free(wpath);
  return st;
}

GpuccStatus gpucc_write_model_so(const void *stub, size_t stub_len, const char *out_path,
                                 const void *plan, size_t plan_len, const void *weights,
                                 size_t weights_len, const char *info,
                                 size_t external_weights_threshold, char *err, size_t err_len) {
  GpuccStatus st = write_model_so(stub, stub_len, out_path, plan, plan_len, weights, weights_len,
                                  info, external_weights_threshold);
  if (st && err && err_len) snprintf(err, err_len, "%s", gpucc_last_error());
  return st;
}
