/* Unit tests of ir/tensorio.c: .npy round trips for every dtype numpy has, files numpy
 * would write (built byte by byte here, from the format's definition), malformed and
 * hostile files that must fail with an error naming the file, .safetensors files
 * written by hand, and what is not a regular file (FIFOs, directories, devices) where a
 * file is read or written. Everything goes to a fresh folder under /tmp. */
#include "ir/ir.h"
#include "tests/unit/check.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];


static const char *tmp_path(const char *name) {
  static char buf[8][256];
  static int k;
  char *p = buf[k++ % 8];
  snprintf(p, 256, "%s/%s", dir, name);
  return p;
}

static void write_bytes(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(1);
  }
  fclose(f);
}

/* A .npy file: magic, version, header (padded to 64 bytes as numpy does), data. */
static size_t make_npy(unsigned char *buf, int major, const char *dict, const void *data,
                       size_t nd) {
  size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
  size_t total = (pre + dl + 1 + 63) / 64 * 64, hlen = total - pre;
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (unsigned char)major;
  buf[7] = 0;
  buf[8] = (unsigned char)hlen;
  buf[9] = (unsigned char)(hlen >> 8);
  if (major != 1)
    buf[10] = buf[11] = 0;
  memcpy(buf + pre, dict, dl);
  memset(buf + pre + dl, ' ', hlen - dl - 1);
  buf[total - 1] = '\n';
  memcpy(buf + total, data, nd);
  return total + nd;
}

/* The error must be set and name the file. */
static void expect_npy_error(const char *name, const void *bytes, size_t n) {
  const char *path = tmp_path(name);
  write_bytes(path, bytes, n);
  Diag d = {0};
  Tensor *t = npy_read(path, &d);
  CHECK(t == NULL);
  CHECK(d.failed && strstr(d.msg, path));
  if (getenv("VERBOSE"))
    fprintf(stderr, "%s\n", d.msg);
  if (t || !d.failed)
    fprintf(stderr, "  (%s was accepted)\n", name);
  tensor_free(t);
}

static void test_npy_round_trip(void) {
  DType types[] = {DT_F64, DT_F32, DT_F16, DT_I64, DT_I32, DT_I16, DT_I8, DT_U8, DT_BOOL};
  for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
    int64_t dims[3] = {2, 3, 4};
    Tensor *t = tensor_new(types[k], 3, dims);
    tensor_fill_random(t, 7 + k, types[k] == DT_U8 ? 255 : 100);
    char name[32];
    snprintf(name, sizeof name, "rt_%s.npy", dtype_name(types[k]));
    const char *path = tmp_path(name);
    Diag d = {0};
    CHECK(npy_write(path, t, &d) == 0);
    Tensor *r = npy_read(path, &d);
    CHECK(r && !d.failed);
    if (r) {
      CHECK(r->dtype == t->dtype && r->rank == 3);
      CHECK(r->dims[0] == 2 && r->dims[1] == 3 && r->dims[2] == 4);
      CHECK(!memcmp(r->data, t->data, tensor_nbytes(t)));
    }
    tensor_free(r);
    tensor_free(t);
  }
  /* a scalar, a 1-D tensor (its shape is "(5,)") and an empty one */
  int64_t five = 5, zero[2] = {0, 3};
  Tensor *s = tensor_new(DT_F32, 0, NULL), *v = tensor_new(DT_I32, 1, &five),
         *e = tensor_new(DT_F32, 2, zero);
  tensor_fill_value(s, 2.5);
  tensor_fill_value(v, -3);
  Tensor *in[3] = {s, v, e};
  for (int k = 0; k < 3; k++) {
    const char *path = tmp_path("shape.npy");
    Diag d = {0};
    CHECK(npy_write(path, in[k], &d) == 0);
    Tensor *r = npy_read(path, &d);
    CHECK(r && r->rank == in[k]->rank && r->dtype == in[k]->dtype);
    if (r) {
      for (int i = 0; i < r->rank; i++)
        CHECK(r->dims[i] == in[k]->dims[i]);
      CHECK(!memcmp(r->data, in[k]->data, tensor_nbytes(in[k])));
    }
    tensor_free(r);
  }
  tensor_free(s), tensor_free(v), tensor_free(e);
  /* bf16 and f8 have no numpy type */
  Tensor *b = tensor_new(DT_BF16, 1, &five);
  Diag d = {0};
  CHECK(npy_write(tmp_path("bf16.npy"), b, &d) == -1 && strstr(d.msg, "bf16"));
  CHECK(access(tmp_path("bf16.npy"), F_OK) != 0);
  tensor_free(b);
  /* writing into a folder that does not exist fails and leaves nothing behind */
  Tensor *x = tensor_new(DT_F32, 1, &five);
  Diag d2 = {0};
  CHECK(npy_write(tmp_path("missing/x.npy"), x, &d2) == -1 && d2.failed);
  tensor_free(x);
}

static void test_npy_variants(void) {
  unsigned char buf[512];
  float f[2] = {1.5f, -2.0f};
  /* version 2.0 and 3.0 headers, '=' byte order, double quotes, no trailing comma */
  const char *dicts[] = {
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
      "{\"descr\": \"=f4\", \"fortran_order\": False, \"shape\": (2,)}",
      "{'shape': (1, 2), 'fortran_order': False, 'descr': '<f4'}",
  };
  int versions[] = {2, 3, 1};
  for (int k = 0; k < 3; k++) {
    size_t n = make_npy(buf, versions[k], dicts[k], f, sizeof f);
    const char *path = tmp_path("variant.npy");
    write_bytes(path, buf, n);
    Diag d = {0};
    Tensor *t = npy_read(path, &d);
    CHECK(t && t->dtype == DT_F32 && tensor_numel(t) == 2);
    if (t)
      CHECK(((float *)t->data)[0] == 1.5f && ((float *)t->data)[1] == -2.0f);
    if (!t)
      fprintf(stderr, "  %s\n", d.msg);
    tensor_free(t);
  }
  unsigned char one = 1;
  size_t n = make_npy(buf, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (), }",
                      &one, 1);
  write_bytes(tmp_path("b.npy"), buf, n);
  Diag d = {0};
  Tensor *t = npy_read(tmp_path("b.npy"), &d);
  CHECK(t && t->dtype == DT_BOOL && t->rank == 0 && *(unsigned char *)t->data == 1);
  tensor_free(t);
}

static void test_npy_malformed(void) {
  unsigned char buf[1024];
  float f[6] = {0};
  size_t n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                      f, sizeof f);
  expect_npy_error("truncated_data.npy", buf, n - 1);
  expect_npy_error("truncated_header.npy", buf, 30);
  expect_npy_error("tiny.npy", buf, 5);
  expect_npy_error("empty.npy", buf, 0);
  unsigned char longer[1024];
  memcpy(longer, buf, n);
  longer[n] = 0;
  expect_npy_error("long.npy", longer, n + 1);
  unsigned char bad[1024];
  memcpy(bad, buf, n);
  bad[1] = 'X';
  expect_npy_error("magic.npy", bad, n);
  memcpy(bad, buf, n);
  bad[6] = 4;
  expect_npy_error("version.npy", bad, n);
  memcpy(bad, buf, n);
  bad[8] = 0xFF, bad[9] = 0xFF; /* header length past the end */
  expect_npy_error("hlen.npy", bad, n);

  const char *dicts[] = {
      "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
      "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }",
      "{'descr': '<u4', 'fortran_order': False, 'shape': (2, 3), }",
      "{'descr': '|f4', 'fortran_order': False, 'shape': (2, 3), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775807, 3), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 3), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, -3), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,6), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (6), }",
      "{'descr': '<f4', 'fortran_order': False, }",
      "{'descr': '<f4', 'shape': (2, 3), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1, }",
      "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } junk",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3",
      "['descr', '<f4']",
      "",
  };
  for (size_t k = 0; k < sizeof dicts / sizeof dicts[0]; k++) {
    n = make_npy(buf, 1, dicts[k], f, sizeof f);
    char name[32];
    snprintf(name, sizeof name, "bad%zu.npy", k);
    expect_npy_error(name, buf, n);
  }
  Diag d = {0};
  CHECK(npy_read(tmp_path("does_not_exist.npy"), &d) == NULL && d.failed);
}

/* ---------------------------------------------------------------- safetensors */

static size_t make_st(unsigned char *buf, const char *json, const void *data, size_t nd) {
  size_t hl = strlen(json);
  for (int i = 0; i < 8; i++)
    buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
  memcpy(buf + 8, json, hl);
  memcpy(buf + 8 + hl, data, nd);
  return 8 + hl + nd;
}

static void expect_st_error(const char *json, const void *data, size_t nd, const char *key,
                            const char *needle) {
  unsigned char buf[4096];
  size_t n = make_st(buf, json, data, nd);
  const char *path = tmp_path("bad.safetensors");
  write_bytes(path, buf, n);
  Diag d = {0};
  Tensor *t = safetensors_read(path, key, &d);
  CHECK(t == NULL && d.failed && strstr(d.msg, path));
  if (getenv("VERBOSE"))
    fprintf(stderr, "%s\n", d.msg);
  if (needle && !strstr(d.msg, needle)) {
    fprintf(stderr, "  expected \"%s\" in: %s\n", needle, d.msg);
    failures++;
  }
  if (t)
    fprintf(stderr, "  accepted: %s\n", json);
  tensor_free(t);
}

static void test_safetensors(void) {
  /* data: a f32[2, 2] at 0..16, an i64[3] at 16..40, a bf16 scalar at 40..42 */
  unsigned char data[42];
  float w[4] = {1, 2, 3, 4.5f};
  int64_t ix[3] = {-1, 0, 1LL << 40};
  uint16_t h = f32_to_bf16(-0.5f);
  memcpy(data, w, 16);
  memcpy(data + 16, ix, 24);
  memcpy(data + 40, &h, 2);
  const char *json =
      "{\"__metadata__\": {\"format\": \"pt\", \"nested\": {\"a\": [1, 2.5e3, true, null]}},"
      " \"fc.weight\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [0, 16]},"
      " \"ids\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[16,40]},"
      " \"sc\\u00e9\\\"\": {\"dtype\": \"BF16\", \"shape\": [], \"data_offsets\": [40, 42]}"
      "}   ";
  unsigned char buf[4096];
  size_t n = make_st(buf, json, data, sizeof data);
  const char *path = tmp_path("good.safetensors");
  write_bytes(path, buf, n);
  Diag d = {0};
  Tensor *t = safetensors_read(path, "fc.weight", &d);
  CHECK(t && t->dtype == DT_F32 && t->rank == 2 && t->dims[0] == 2 && t->dims[1] == 2);
  if (t)
    CHECK(!memcmp(t->data, w, 16));
  if (!t)
    fprintf(stderr, "  %s\n", d.msg);
  tensor_free(t);
  t = tensor_load(path, "ids", &d);
  CHECK(t && t->dtype == DT_I64 && t->rank == 1 && t->dims[0] == 3);
  if (t)
    CHECK(!memcmp(t->data, ix, 24));
  tensor_free(t);
  t = safetensors_read(path, "sc\xc3\xa9\"", &d); /* the escaped key, decoded */
  CHECK(t && t->dtype == DT_BF16 && t->rank == 0 &&
        dtype_load_f64(DT_BF16, t->data) == -0.5);
  tensor_free(t);
  CHECK(!d.failed);

  Diag d2 = {0};
  CHECK(safetensors_read(path, "nope", &d2) == NULL);
  char want[512];
  snprintf(want, sizeof want, "no tensor 'nope' in %s", path);
  CHECK(strstr(d2.msg, want) != NULL);
  Diag d3 = {0};
  CHECK(safetensors_read(path, "__metadata__", &d3) == NULL && d3.failed);

  float four[4] = {0};
  expect_st_error("{\"a\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [0, 20]}}",
                  four, 16, "a", "past the end");
  expect_st_error("{\"a\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [0, 12]}}",
                  four, 16, "a", "needs 16");
  expect_st_error("{\"a\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [8, 4]}}",
                  four, 16, "a", NULL);
  expect_st_error("{\"a\": {\"dtype\": \"F32\", \"shape\": [-2, 2], \"data_offsets\": [0, 16]}}",
                  four, 16, "a", NULL);
  expect_st_error("{\"a\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296, 4], "
                  "\"data_offsets\": [0, 16]}}", four, 16, "a", NULL);
  expect_st_error("{\"a\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 16]}}",
                  four, 16, "a", NULL);
  expect_st_error("{\"a\": {\"dtype\": \"C64\", \"shape\": [2, 2], \"data_offsets\": [0, 16]}}",
                  four, 16, "a", "C64");
  expect_st_error("{\"a\": {\"dtype\": \"F32\", \"shape\": [2, 2]}}", four, 16, "a", NULL);
  expect_st_error("{\"a\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [0, 16],}}",
                  four, 16, "a", "malformed");
  expect_st_error("{\"a\": {\"dtype\": \"F32\" \"shape\": [2, 2]}}", four, 16, "a", NULL);
  expect_st_error("{\"a\": {\"dtype\": \"F32\", \"shape\": [01], \"data_offsets\": [0, 4]}}",
                  four, 16, "a", NULL);
  expect_st_error("{\"a\": {\"dtype\": \"F\\q32\"}}", four, 16, "a", NULL);
  expect_st_error("{\"a\": {\"dtype\": \"F32", four, 16, "a", NULL);
  expect_st_error("[1, 2]", four, 16, "a", NULL);
  expect_st_error("{\"__metadata__\": 3}", four, 16, "a", NULL);
  expect_st_error("{\"a\": 1} x", four, 16, "a", NULL);
  /* nesting deeper than any header needs */
  char deep[400];
  memset(deep, '[', 200);
  memset(deep + 200, ']', 199);
  deep[399] = 0;
  char deep_json[512];
  snprintf(deep_json, sizeof deep_json, "{\"m\": %s]}", deep);
  expect_st_error(deep_json, four, 0, "a", "deep");

  /* a header length past the end of the file */
  unsigned char hdr[16] = {0xFF, 0xFF, 0, 0, 0, 0, 0, 0, '{', '}'};
  write_bytes(tmp_path("hlen.safetensors"), hdr, 10);
  Diag d4 = {0};
  CHECK(safetensors_read(tmp_path("hlen.safetensors"), "a", &d4) == NULL && d4.failed);
  write_bytes(tmp_path("short.safetensors"), hdr, 5);
  Diag d5 = {0};
  CHECK(safetensors_read(tmp_path("short.safetensors"), "a", &d5) == NULL && d5.failed);

  Diag d6 = {0};
  CHECK(tensor_load(tmp_path("x.bin"), NULL, &d6) == NULL && strstr(d6.msg, "extension"));
  Diag d7 = {0};
  CHECK(tensor_load(path, NULL, &d7) == NULL && d7.failed);
}

/* Whether any temporary (NAME.tmpXXXXXX) is left in the folder. */
static bool temporaries_left(void) {
  DIR *dp = opendir(dir);
  bool found = false;
  for (struct dirent *e; dp && (e = readdir(dp));)
    found |= strstr(e->d_name, ".tmp") != NULL;
  if (dp)
    closedir(dp);
  return found;
}

static bool is_kind(const char *path, mode_t kind, bool follow) {
  struct stat st;
  return (follow ? stat(path, &st) : lstat(path, &st)) == 0 && (st.st_mode & S_IFMT) == kind;
}

/* A FIFO or a directory where a file is read is refused without blocking; where one is
 * written, a FIFO or a device is written in place and a directory refused, and neither is
 * ever replaced by a regular file. SIGALRM ends a run that would hang instead. */
static void test_not_regular_files(void) {
  alarm(60);
  int64_t dims[1] = {3};
  Tensor *x = tensor_new(DT_F32, 1, dims);
  const char *fifo = tmp_path("fifo.npy"), *sub = tmp_path("sub.npy");
  CHECK(mkfifo(fifo, 0600) == 0 && mkdir(sub, 0700) == 0);

  Diag d1 = {0}, d2 = {0}, d3 = {0};
  CHECK(npy_read(fifo, &d1) == NULL && strstr(d1.msg, "it is a FIFO, not a regular file"));
  CHECK(safetensors_read(sub, "k", &d2) == NULL && strstr(d2.msg, "it is a directory"));
  char why[256];
  CHECK(fopen_regular(fifo, NULL, why, sizeof why) == NULL && strstr(why, "FIFO"));
  CHECK(fopen_regular(sub, NULL, why, sizeof why) == NULL && strstr(why, "directory"));

  /* No reader: an error; the FIFO stays. */
  CHECK(npy_write(fifo, x, &d3) == -1 && strstr(d3.msg, "no process reads from"));
  CHECK(is_kind(fifo, S_IFIFO, false));
  /* A reader: the bytes go through it, and it stays a FIFO. */
  int r = open(fifo, O_RDONLY | O_NONBLOCK);
  Diag d4 = {0};
  CHECK(r >= 0 && npy_write(fifo, x, &d4) == 0);
  unsigned char got[256];
  ssize_t n = r >= 0 ? read(r, got, sizeof got) : -1;
  CHECK(n == 128 + 12 && !memcmp(got, "\x93NUMPY", 6)); /* header 128, 3 x f32 */
  if (r >= 0)
    close(r);
  CHECK(is_kind(fifo, S_IFIFO, false));
  /* A directory: refused, untouched. */
  Diag d5 = {0};
  CHECK(npy_write(sub, x, &d5) == -1 && strstr(d5.msg, "it is a directory"));
  CHECK(is_kind(sub, S_IFDIR, false));
  /* A symlink to a device: written in place, the link stays a link. /dev/zero discards
   * what is written to it as /dev/null does, and /dev/full fails every write; /dev/null
   * itself is left alone, since an older gpucc run as root may have replaced it. */
  const char *zero = tmp_path("zero.npy"), *full = tmp_path("full.npy");
  Diag d6 = {0}, d6f = {0};
  CHECK(symlink("/dev/zero", zero) == 0 && npy_write(zero, x, &d6) == 0);
  CHECK(is_kind(zero, S_IFLNK, false) && is_kind(zero, S_IFCHR, true));
  CHECK(symlink("/dev/full", full) == 0 && npy_write(full, x, &d6f) == -1);
  CHECK(strstr(d6f.msg, "full.npy: error: cannot write") && is_kind(full, S_IFLNK, false));
  /* A symlink to a file: the file is replaced, the link stays. */
  const char *file = tmp_path("target.npy"), *link = tmp_path("link.npy");
  write_bytes(file, "old", 3);
  Diag d7 = {0}, d8 = {0};
  CHECK(symlink("target.npy", link) == 0 && npy_write(link, x, &d7) == 0);
  CHECK(is_kind(link, S_IFLNK, false));
  Tensor *back = npy_read(file, &d8);
  CHECK(back && back->rank == 1 && back->dims[0] == 3);
  tensor_free(back);
  CHECK(!temporaries_left());

  /* A printed graph whose big constants go to a .safetensors beside it: when the .gir
   * cannot be written (here a directory), the .safetensors is not left behind either. */
  Graph *g = graph_new("big");
  int64_t big = IR_INLINE_MAX_ELEMENTS + 1;
  Value *c = graph_add_const(g, "c", tensor_in_arena(g->arena, DT_F32, 1, &big));
  graph_add_output(g, c);
  const char *gdir = tmp_path("out.gir"), *side = tmp_path("out.safetensors");
  Diag d9 = {0};
  CHECK(mkdir(gdir, 0700) == 0 && ir_print_file(g, gdir, &d9) == -1);
  CHECK(access(side, F_OK) != 0 && !temporaries_left());
  CHECK(c->init == CI_DATA && !c->path); /* nothing refers to a file that is not there */
  Diag d10 = {0};
  const char *gir = tmp_path("ok.gir");
  CHECK(ir_print_file(g, gir, &d10) == 0 && access(tmp_path("ok.safetensors"), F_OK) == 0);
  CHECK(c->init == CI_FILE && c->path && strstr(c->path, "/ok.safetensors"));
  graph_free(g);
  tensor_free(x);
  alarm(0);
}

/* Removes the temp folder (its files all have known, flat names). */
static void cleanup(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "warning: could not remove %s\n", dir);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/gpucc_tensorio_XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_npy_round_trip();
  test_npy_variants();
  test_npy_malformed();
  test_safetensors();
  test_not_regular_files();
  cleanup();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("test_tensorio: ok\n");
  return 0;
}
