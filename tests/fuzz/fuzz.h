/* fuzz.h: what the libFuzzer harnesses of tests/fuzz share.
 *
 * A harness is one LLVMFuzzerTestOneInput. Sanitizer reports, hangs and leaks are found
 * by libFuzzer itself; FUZZ_CHECK adds the project's own promises about bad input (one
 * clear error, no half-made result), and a harness dies on a broken one so that libFuzzer
 * keeps the input. The same entry point runs under replay.c in the normal build.
 *
 * Include it first: it asks for _GNU_SOURCE (memfd_create) before any system header. */
#ifndef GPUCC_TESTS_FUZZ_H
#define GPUCC_TESTS_FUZZ_H

#define _GNU_SOURCE

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond, ...)                                                      \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                \
      fputc('\n', stderr);                                                         \
      abort();                                                                     \
    }                                                                              \
  } while (0)

/* A refused input says why: a message with "error: " in it (every Diag message has). */
#define FUZZ_CHECK_ERROR(msg)                                                      \
  FUZZ_CHECK((msg)[0] && strstr((msg), "error: "), "refused without a message: '%s'", \
             (msg))

/* The input as a file, for readers that take a path: an anonymous memory file
 * (memfd_create), named /proc/self/fd/N in path[], so that no fuzzing run writes to the
 * file system. Returns the descriptor, for the caller to close. */
static inline int fuzz_memfd(const uint8_t *data, size_t size, char *path, size_t cap) {
  int fd = memfd_create("gpucc-fuzz", MFD_CLOEXEC);
  FUZZ_CHECK(fd >= 0, "memfd_create failed");
  for (size_t done = 0; done < size;) {
    ssize_t k = write(fd, data + done, size - done);
    FUZZ_CHECK(k > 0, "cannot write the memory file");
    done += (size_t)k;
  }
  snprintf(path, cap, "/proc/self/fd/%d", fd);
  return fd;
}

#endif
