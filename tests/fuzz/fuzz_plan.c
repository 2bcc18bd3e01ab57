/* fuzz_plan.c: libFuzzer harness for the runtime's plan reader (runtime/plan.c's
 * gpucc_plan_parse, with gpucc_plan_validate behind it), which reads the plan a model.so
 * carries before anything touches the GPU.
 *
 * A plan's header holds its body's length and checksum, which random bytes almost never
 * match. So each input is read twice: as it is (the header's own checks), and with the
 * length and checksum repaired (every check of the body, which is what stands between a
 * hostile plan and the GPU). Beyond "no crash, no hang, no leak": a refused plan says
 * why, and a plan that is read serializes back to the very bytes it was read from. */
#include "fuzz.h"

#include "runtime/runtime-impl.h"

enum { HEADER_BYTES = 32 }; /* the magic, u32 version, u32 sections, u64 length, u64 sum */

static void parse(const uint8_t *data, size_t size) {
  GpuccPlan *p = NULL;
  if (gpucc_plan_parse(data, size, &p)) {
    FUZZ_CHECK(!p, "a refused plan was handed back");
    FUZZ_CHECK(gpucc_last_error()[0], "a plan was refused without a message");
    return;
  }
  void *out;
  size_t len;
  FUZZ_CHECK(!gpucc_plan_serialize(p, &out, &len), "serialize: %s", gpucc_last_error());
  /* a version 4 plan (a fixed shape) is written back as version 5, its body the same */
  uint32_t version = gpucc_rd32(data + 8);
  FUZZ_CHECK(len == size && gpucc_rd32((const uint8_t *)out + 8) == GPUCC_PLAN_VERSION &&
                 (version == 4 || version == GPUCC_PLAN_VERSION) &&
                 !memcmp(out, data, 8) && !memcmp((const uint8_t *)out + 12, data + 12, size - 12),
             "a plan read from %zu bytes serializes to %zu other bytes", size, len);
  free(out);
  gpucc_plan_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  parse(data, size);
  if (size < HEADER_BYTES)
    return 0;
  uint8_t *fixed = malloc(size);
  FUZZ_CHECK(fixed, "out of memory");
  memcpy(fixed, data, size);
  gpucc_wr64(fixed + 16, size - HEADER_BYTES);
  gpucc_wr64(fixed + 24, gpucc_fnv1a64(fixed + HEADER_BYTES, size - HEADER_BYTES));
  parse(fixed, size);
  free(fixed);
  return 0;
}
