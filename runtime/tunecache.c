/* tunecache.c: what create decided by timing (each GEMM's cuBLASLt algorithm, each
 * choice's variant), kept on disk so that creating the same plan again on the same kind
 * of GPU decides the same without timing anything (GPUCC_TUNE in runtime.h). Pure C, no
 * CUDA.
 *
 * One text file per key, named by the key's hash, in $GPUCC_CACHE_DIR/tune, else
 * $XDG_CACHE_HOME/gpucc/tune, else $HOME/.cache/gpucc/tune:
 *   gpucc-tune 1
 *   key <the key>
 *   <step> <word> <word> ...      one line per decided step, words in hex
 * Anyone can edit or damage the file, so the reader checks every line; a file that fails
 * a check counts as absent (create times again and writes it anew), and the runtime checks
 * what a good file says against the plan before using it. A file is written under a
 * temporary name and renamed, so a reader never sees half of one.
 */
#define _XOPEN_SOURCE 700

#include "runtime/runtime-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TUNE_MAGIC "gpucc-tune 1"
/* A line holds a step number and GPUCC_TUNE_WORDS words of 16 hex digits. */
enum { LINE_MAX_BYTES = 16 + GPUCC_TUNE_WORDS * 17 + 2, KEY_MAX_BYTES = 1024 };

/* The folder of the cache files, malloc'd; NULL when the environment names none. */
static char *tune_folder(void) {
  const char *dir = getenv("GPUCC_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"),
             *home = getenv("HOME");
  const char *base = dir && *dir ? dir : xdg && *xdg ? xdg : home && *home ? home : NULL;
  const char *mid = dir && *dir ? "" : xdg && *xdg ? "/gpucc" : "/.cache/gpucc";
  if (!base) return NULL;
  size_t n = strlen(base) + strlen(mid) + sizeof "/tune";
  char *s = malloc(n);
  if (s) snprintf(s, n, "%s%s/tune", base, mid);
  return s;
}

char *gpucc_tune_path(const char *key) {
  char *dir = tune_folder();
  if (!dir) return NULL;
  size_t n = strlen(dir) + 32;
  char *s = malloc(n);
  if (s) snprintf(s, n, "%s/%016" PRIx64 ".txt", dir, gpucc_fnv1a64(key, strlen(key)));
  free(dir);
  return s;
}

/* The whole file at path when it is a regular file of at most max bytes and no NUL,
 * NUL-terminated; NULL otherwise. O_NONBLOCK: a FIFO planted there must not hang create. */
static char *read_small(const char *path, size_t max) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat st;
  char *s = NULL;
  if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size >= 0 && (uint64_t)st.st_size <= max &&
      (s = malloc((size_t)st.st_size + 1))) {
    size_t got = 0;
    while (got < (size_t)st.st_size) {
      ssize_t r = read(fd, s + got, (size_t)st.st_size - got);
      if (r <= 0) break;
      got += (size_t)r;
    }
    if (got != (size_t)st.st_size || memchr(s, 0, got)) { /* text has no NUL */
      free(s);
      s = NULL;
    } else {
      s[got] = 0;
    }
  }
  close(fd);
  return s;
}

/* One hex word of 1 to 16 digits at *p, then a space or the end of the line. */
static bool hex_word(const char **p, uint64_t *out) {
  uint64_t v = 0;
  int digits = 0;
  for (; digits < 17; digits++, (*p)++) {
    char c = **p;
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) break;
    v = v << 4 | (uint64_t)d;
  }
  if (digits < 1 || digits > 16) return false;
  *out = v;
  return true;
}

bool gpucc_tune_read(const char *path, const char *key, GpuccTuneEntry *entries, int nsteps) {
  for (int i = 0; i < nsteps; i++) entries[i].nwords = 0;
  if (nsteps < 0 || strlen(key) > KEY_MAX_BYTES) return false;
  /* The largest file a plan of nsteps steps can have: the header and a line a step. */
  size_t max = sizeof TUNE_MAGIC + KEY_MAX_BYTES + 8 + (size_t)nsteps * LINE_MAX_BYTES;
  char *text = read_small(path, max);
  if (!text) return false;
  bool ok = false;
  size_t klen = strlen(key), mlen = strlen(TUNE_MAGIC);
  const char *p = text;
  if (strncmp(p, TUNE_MAGIC "\n", mlen + 1) || strncmp(p + mlen + 1, "key ", 4) ||
      strncmp(p + mlen + 5, key, klen) || p[mlen + 5 + klen] != '\n')
    goto done;
  p += mlen + 6 + klen;
  while (*p) {
    uint64_t step, w;
    if (!hex_word(&p, &step) || step >= (uint64_t)nsteps || entries[step].nwords) goto done;
    GpuccTuneEntry *e = &entries[step];
    while (*p == ' ') {
      p++;
      if (e->nwords == GPUCC_TUNE_WORDS || !hex_word(&p, &w)) goto done;
      e->w[e->nwords++] = w;
    }
    if (*p++ != '\n' || !e->nwords) goto done;
  }
  ok = true;
done:
  if (!ok)
    for (int i = 0; i < nsteps; i++) entries[i].nwords = 0;
  free(text);
  return ok;
}

/* mkdir -p of path's folder. */
static bool make_folders(const char *path) {
  char *s = strdup(path);
  if (!s) return false;
  bool ok = true;
  for (char *q = strchr(s + 1, '/'); q && ok; q = strchr(q + 1, '/')) {
    *q = 0;
    ok = !mkdir(s, 0755) || errno == EEXIST;
    *q = '/';
  }
  free(s);
  return ok;
}

bool gpucc_tune_write(const char *path, const char *key, const GpuccTuneEntry *entries,
                      int nsteps) {
  if (!make_folders(path)) return false;
  size_t n = strlen(path) + 32;
  char *tmp = malloc(n);
  if (!tmp) return false;
  snprintf(tmp, n, "%s.%ld.tmp", path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
  if (!f) {
    if (fd >= 0) close(fd);
    free(tmp);
    return false;
  }
  fprintf(f, "%s\nkey %s\n", TUNE_MAGIC, key);
  for (int i = 0; i < nsteps; i++) {
    if (!entries[i].nwords) continue;
    fprintf(f, "%x", (unsigned)i);
    for (int k = 0; k < entries[i].nwords; k++) fprintf(f, " %" PRIx64, entries[i].w[k]);
    fputc('\n', f);
  }
  bool ok = !ferror(f);
  ok = !fclose(f) && ok && !rename(tmp, path);
  if (!ok) unlink(tmp);
  free(tmp);
  return ok;
}
