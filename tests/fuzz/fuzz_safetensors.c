/* fuzz_safetensors.c: libFuzzer harness for the .safetensors reader (ir/tensorio.c's
 * safetensors_read), the file behind load("w.safetensors", "key") and the weights of
 * --emit=ir dumps. It asks for the keys of tests/data/small.safetensors, the seed, so
 * mutations of that file reach the tensor's own checks.
 *
 * Beyond "no crash, no hang, no leak": a refused file carries a message, and a tensor that
 * is read fits in the file. */
#include "fuzz.h"

#include "ir/ir.h"

static void read_key(const char *path, const char *key, size_t size) {
  Diag d = {0};
  Tensor *t = safetensors_read(path, key, &d);
  if (!t) {
    FUZZ_CHECK(d.failed, "safetensors_read returned no tensor and no error");
    FUZZ_CHECK_ERROR(d.msg);
    return;
  }
  FUZZ_CHECK(!d.failed, "safetensors_read returned a tensor and an error: %s", d.msg);
  size_t n = tensor_nbytes(t);
  FUZZ_CHECK(n <= size - 8, "a tensor of %zu bytes from a file of %zu", n, size);
  tensor_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64];
  int fd = fuzz_memfd(data, size, path, sizeof path);
  read_key(path, "fc.weight", size);
  read_key(path, "fc.bias", size);
  close(fd);
  return 0;
}
