/* fuzz_npy.c: libFuzzer harness for the .npy reader (ir/tensorio.c's npy_read), the file
 * behind --input, --calibrate and load("x.npy").
 *
 * Beyond "no crash, no hang, no leak": a refused file carries a message, and a tensor that
 * is read holds exactly the file's last bytes (the header accounts for every other one). */
#include "fuzz.h"

#include "ir/ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64];
  int fd = fuzz_memfd(data, size, path, sizeof path);
  Diag d = {0};
  Tensor *t = npy_read(path, &d);
  close(fd);
  if (!t) {
    FUZZ_CHECK(d.failed, "npy_read returned no tensor and no error");
    FUZZ_CHECK_ERROR(d.msg);
    return 0;
  }
  FUZZ_CHECK(!d.failed, "npy_read returned a tensor and an error: %s", d.msg);
  size_t n = tensor_nbytes(t);
  FUZZ_CHECK(n < size, "a tensor of %zu bytes from a file of %zu", n, size);
  FUZZ_CHECK(!n || !memcmp(t->data, data + size - n, n), "the data is not the file's end");
  tensor_free(t);
  return 0;
}
