/* check.h: the one assertion macro of the C unit tests. A failed check prints where and
 * what, counts, and lets the test go on, so one run shows every failure. */
#ifndef GPUCC_TESTS_CHECK_H
#define GPUCC_TESTS_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
      failures++;                                                                \
    }                                                                            \
  } while (0)

#endif
