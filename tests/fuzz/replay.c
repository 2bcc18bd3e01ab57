/* replay.c: runs a fuzz harness's LLVMFuzzerTestOneInput over saved inputs, without
 * libFuzzer, so the normal (gcc, sanitized) build replays every committed corpus input and
 * every regression input as an ordinary test (ctest's fuzz/replay_<harness>).
 *
 *   replay_<harness> PATH...   each PATH a file, or a folder whose files are read in name
 *                              order (not recursively; dot files and README.md skipped)
 *
 * A harness reports a bad input by dying (a sanitizer or its own abort); the name of the
 * input goes to stderr first, so the log says which one. A folder that does not exist is
 * said and counts as empty (regressions/<harness>/ exists only once one was found); no
 * input at all is a failure, so the test never passes by finding nothing. */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
    return -1;
  }
  size_t cap = 4096, len = 0;
  uint8_t *buf = malloc(cap);
  size_t k;
  while (buf && (k = fread(buf + len, 1, cap - len, f)) > 0) {
    len += k;
    if (len == cap) {
      uint8_t *grown = realloc(buf, cap *= 2);
      if (!grown)
        free(buf);
      buf = grown;
    }
  }
  int bad = !buf || ferror(f);
  fclose(f);
  if (bad) {
    fprintf(stderr, "replay: cannot read %s\n", path);
    free(buf);
    return -1;
  }
  /* An exact-size copy, so that a read past the end is caught as libFuzzer would. */
  uint8_t *data = malloc(len ? len : 1);
  if (!data) {
    free(buf);
    return -1;
  }
  memcpy(data, buf, len);
  free(buf);
  fprintf(stderr, "replay: %s\n", path);
  LLVMFuzzerTestOneInput(data, len);
  free(data);
  return 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The files of folder dir in name order; -1 on an error, else how many ran. */
static int run_dir(const char *dir) {
  DIR *dp = opendir(dir);
  if (!dp) {
    fprintf(stderr, "replay: cannot open %s: %s\n", dir, strerror(errno));
    return -1;
  }
  char **names = NULL;
  int n = 0, cap = 0, rc = 0;
  struct dirent *e;
  while ((e = readdir(dp))) {
    if (e->d_name[0] == '.' || !strcmp(e->d_name, "README.md"))
      continue;
    if (n == cap) {
      char **grown = realloc(names, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *names);
      if (!grown) {
        rc = -1;
        break;
      }
      names = grown;
    }
    if (!(names[n] = strdup(e->d_name))) {
      rc = -1;
      break;
    }
    n++;
  }
  closedir(dp);
  if (n)
    qsort(names, (size_t)n, sizeof *names, by_name);
  for (int i = 0; i < n && !rc; i++) {
    size_t len = strlen(dir) + strlen(names[i]) + 2;
    char *path = malloc(len);
    if (!path) {
      rc = -1;
      break;
    }
    snprintf(path, len, "%s/%s", dir, names[i]);
    struct stat st;
    if (stat(path, &st) || !S_ISREG(st.st_mode)) {
      fprintf(stderr, "replay: %s is not a regular file\n", path);
      rc = -1;
    } else {
      rc = run_file(path);
    }
    free(path);
  }
  for (int i = 0; i < n; i++)
    free(names[i]);
  free(names);
  return rc ? -1 : n;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE-OR-FOLDER...\n", argv[0]);
    return 2;
  }
  int total = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    int n;
    if (stat(argv[i], &st)) {
      if (errno != ENOENT) {
        fprintf(stderr, "replay: cannot read %s: %s\n", argv[i], strerror(errno));
        return 1;
      }
      printf("%s: no such folder, 0 inputs\n", argv[i]);
      continue;
    }
    n = S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i]) ? -1 : 1;
    if (n < 0)
      return 1;
    printf("%s: %d input%s\n", argv[i], n, n == 1 ? "" : "s");
    total += n;
  }
  if (!total) {
    fprintf(stderr, "replay: no inputs at all\n");
    return 1;
  }
  printf("replayed %d input%s\n", total, total == 1 ? "" : "s");
  return 0;
}
