/* fuzz_trailer.c: libFuzzer harness for what a model.so reads of its own file at
 * gpucc_model_load (runtime/embedded.c): the trailer (runtime/payload.c's
 * gpucc_trailer_parse), then the plan it points to, up to where the device comes in.
 *
 * The trailer ends with magic words around a checksum that random bytes almost never
 * match, so each input is read twice: as it is, and with the magic and the checksum
 * repaired (every check of the offsets). Beyond "no crash, no hang, no leak": a refused
 * file says why, and every range of a trailer that is read lies inside the file. */
#include "fuzz.h"

#include "runtime/runtime-impl.h"

static bool inside(uint64_t off, uint64_t len, uint64_t end) {
  return off <= end && len <= end - off;
}

static void load(const uint8_t *file, size_t size) {
  GpuccTrailer t;
  if (gpucc_trailer_parse(file, size, &t)) {
    FUZZ_CHECK(gpucc_last_error()[0], "a trailer was refused without a message");
    return;
  }
  /* a version 1 trailer is 80 bytes: every range lies before those at least */
  uint64_t end = size - 80;
  FUZZ_CHECK(t.plan_len && inside(t.plan_offset, t.plan_len, end),
             "the plan at %llu (+%llu) is outside the %llu bytes before the trailer",
             (unsigned long long)t.plan_offset, (unsigned long long)t.plan_len,
             (unsigned long long)end);
  if (t.flags & GPUCC_TRAILER_EXTERNAL_WEIGHTS) {
    size_t n = strnlen(t.weights_file, sizeof t.weights_file);
    FUZZ_CHECK(n > 0 && n < sizeof t.weights_file && !strchr(t.weights_file, '/') &&
                   strcmp(t.weights_file, ".") && strcmp(t.weights_file, ".."),
               "weights file name '%.*s' is not a bare name", (int)n, t.weights_file);
    FUZZ_CHECK(!t.weights_offset, "external weights at offset %llu",
               (unsigned long long)t.weights_offset);
  } else {
    FUZZ_CHECK(inside(t.weights_offset, t.weights_len, end),
               "the weights at %llu (+%llu) are outside the %llu bytes before the trailer",
               (unsigned long long)t.weights_offset, (unsigned long long)t.weights_len,
               (unsigned long long)end);
    FUZZ_CHECK(!t.weights_file[0], "embedded weights with a file name");
  }
  FUZZ_CHECK((!t.info_len && !t.info_offset) ||
                 (inside(t.info_offset, t.info_len, end) && !memchr(file + t.info_offset, 0, t.info_len)),
             "build info at %llu (+%llu) outside the file or holding a NUL",
             (unsigned long long)t.info_offset, (unsigned long long)t.info_len);
  /* What gpucc_model_create reads before it asks for a device (it then compares the
   * plan's weights_bytes with t.weights_len, which cannot go wrong). */
  GpuccPlan *p = NULL;
  if (gpucc_plan_parse(file + t.plan_offset, (size_t)t.plan_len, &p)) {
    FUZZ_CHECK(!p && gpucc_last_error()[0], "a plan was refused without a message");
    return;
  }
  gpucc_plan_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  load(data, size);
  if (size < GPUCC_TRAILER_BYTES)
    return 0;
  uint8_t *fixed = malloc(size);
  FUZZ_CHECK(fixed, "out of memory");
  memcpy(fixed, data, size);
  uint8_t *t = fixed + size - GPUCC_TRAILER_BYTES;
  memcpy(t, "GPUCCMDL", 8);
  gpucc_wr32(t + 8, 2);
  memcpy(t + 88, "GPUCCEND", 8);
  gpucc_wr64(t + 80, gpucc_fnv1a64(t, 80));
  load(fixed, size);
  free(fixed);
  return 0;
}
