/* fuzz_dsl.c: libFuzzer harness for the text form's parser (frontends/dsl), which also
 * resolves names, infers types and verifies the graph it returns.
 *
 * Beyond "no crash, no hang, no leak": a refused input carries a message, and a graph that
 * parses prints to text that parses back and prints to the same bytes (the round trip
 * docs/ir.md promises for every graph). The input is named as a file of tests/data,
 * relative to the repository's root, where scripts/fuzz.sh and ctest run the harness, so
 * that load("small.npy") and load("small.safetensors", "fc.weight") read real tensors. */
#include "fuzz.h"

#include "frontends/frontends.h"

#define FUZZ_FILE "tests/data/input.gir"

/* Constants made from a few words (random ones above all) cost time per byte: 4 GiB of
 * them, the default bound, take a sanitized build a minute to make, and twice that with
 * the round trip. 64 MiB keep every input within seconds; the bound itself is tested by
 * tests/lit/errors/const_total_too_large.gir. */
static const DslOptions fuzz_options = {.max_made_bytes = 64 << 20};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Diag d = {0};
  Graph *g = dsl_parse_with(FUZZ_FILE, (const char *)data, size, &fuzz_options, &d);
  if (!g) {
    FUZZ_CHECK(d.failed, "dsl_parse returned no graph and no error");
    FUZZ_CHECK_ERROR(d.msg);
    return 0;
  }
  FUZZ_CHECK(!d.failed, "dsl_parse returned a graph and an error: %s", d.msg);

  char *text = ir_print_str(g);
  FUZZ_CHECK(text, "ir_print_str: out of memory");
  Diag d2 = {0};
  Graph *g2 = dsl_parse_with(FUZZ_FILE, text, strlen(text), &fuzz_options, &d2);
  FUZZ_CHECK(g2, "the printed graph does not parse back: %s\n--- printed:\n%s", d2.msg, text);
  char *text2 = ir_print_str(g2);
  FUZZ_CHECK(text2, "ir_print_str: out of memory");
  FUZZ_CHECK(!strcmp(text, text2), "print(parse(print(g))) != print(g)\n--- first:\n%s\n"
             "--- second:\n%s", text, text2);
  free(text2);
  graph_free(g2);
  free(text);
  graph_free(g);
  return 0;
}
