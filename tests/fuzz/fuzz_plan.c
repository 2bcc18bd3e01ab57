/* fuzz_plan.c: libFuzzer harness for the runtime's plan reader (runtime/plan.c's
 * gpucc_plan_parse, with gpucc_plan_validate behind it), which reads the plan a model.so
 * carries before anything touches the GPU.
 *
 * A plan's header holds its body's length and checksum, which random bytes almost never
 * match. So each input is read twice: as it is (the header's own checks), and with the
 * length and checksum repaired (every check of the body, which is what stands between a
 * hostile plan and the GPU). Beyond "no crash, no hang, no leak": a refused plan says
 * why, and a plan that is read serializes back to the very bytes it was read from (a plan
 * of version 4 or 5: to those bytes in version 6). */
#include "fuzz.h"

#include "runtime/runtime-impl.h"

enum { HEADER_BYTES = 32 }; /* the magic, u32 version, u32 sections, u64 length, u64 sum */

/* The body of a plan of version 4 or 5, read without error, in version 6: its MODULE
 * section (after SIZES) gets a count, 1, or 0 for the old "no module" of two zero
 * lengths. malloc'd, *len bytes. */
static uint8_t *body_v6(const uint8_t *data, size_t size, size_t *len) {
  const uint8_t *body = data + HEADER_BYTES;
  size_t n = size - HEADER_BYTES, at = 16 + (size_t)gpucc_rd64(body + 8);
  size_t old = (size_t)gpucc_rd64(body + at + 8);
  bool none = old == 16 && !gpucc_rd64(body + at + 16) && !gpucc_rd64(body + at + 24);
  size_t mod = none ? 4 : 4 + old;
  *len = n - old + mod;
  uint8_t *out = malloc(*len);
  FUZZ_CHECK(out, "out of memory");
  memcpy(out, body, at + 8);
  gpucc_wr64(out + at + 8, mod);
  gpucc_wr32(out + at + 16, none ? 0 : 1);
  if (!none) memcpy(out + at + 20, body + at + 16, old);
  memcpy(out + at + 16 + mod, body + at + 16 + old, n - at - 16 - old);
  return out;
}

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
  /* a plan of an older version is written back as version 6 */
  uint32_t version = gpucc_rd32(data + 8);
  size_t body_len = size - HEADER_BYTES;
  uint8_t *body = version < GPUCC_PLAN_VERSION ? body_v6(data, size, &body_len) : NULL;
  const uint8_t *o = out;
  FUZZ_CHECK(len == HEADER_BYTES + body_len && gpucc_rd32(o + 8) == GPUCC_PLAN_VERSION &&
                 version >= 4 && version <= GPUCC_PLAN_VERSION && !memcmp(o, data, 8) &&
                 !memcmp(o + 12, data + 12, 4) &&
                 !memcmp(o + HEADER_BYTES, body ? body : data + HEADER_BYTES, body_len),
             "a plan read from %zu bytes serializes to %zu other bytes", size, len);
  free(body);
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
