/* fuzz_tensorpb.c: libFuzzer harness for ONNX TensorProto files (frontends/onnx's
 * onnx_read_tensor), the files behind `gpucc run --input NAME=file.pb` and a model
 * folder's test_data_set_N/.
 *
 * Beyond "no crash, no hang, no leak": a refused file carries a message, and a tensor that
 * is read is no larger than the file can encode: its elements come from raw bytes, or
 * from packed fields of at least a byte an element, each at most 8 bytes wide (external
 * data cannot be read here: the memory file's folder is /proc/self/fd, and every name
 * there resolves outside it). */
#include "fuzz.h"

#include "frontends/frontends.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64];
  int fd = fuzz_memfd(data, size, path, sizeof path);
  Diag d = {0};
  char *name = NULL;
  Tensor *t = onnx_read_tensor(path, &name, &d);
  close(fd);
  if (!t) {
    FUZZ_CHECK(d.failed, "onnx_read_tensor returned no tensor and no error");
    FUZZ_CHECK_ERROR(d.msg);
    FUZZ_CHECK(!name, "a refused file gave a name");
    return 0;
  }
  FUZZ_CHECK(!d.failed, "onnx_read_tensor returned a tensor and an error: %s", d.msg);
  size_t n = tensor_nbytes(t);
  FUZZ_CHECK(n <= 8 * size, "a tensor of %zu bytes from a file of %zu", n, size);
  FUZZ_CHECK(!name || name[0], "an empty name given as a name");
  free(name);
  tensor_free(t);
  return 0;
}
