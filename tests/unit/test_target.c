/* Unit tests of ir/target.c: the target table. Expected figures are the CUDA C++
 * Programming Guide's table of compute capabilities and NVIDIA's data sheets of the GPUs
 * whose SM counts the table takes, written out here, never read back from the table. */
#include "compiler/nvrtc.h"
#include "ir/ir.h"
#include "tests/unit/check.h"

#include <string.h>

enum { KIB = 1024 };

/* Every arch the command line accepts has an entry, and no other name does. */
static void test_archs(void) {
  static const char *const accepted[] = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"};
  int n = 0;
  for (; target_archs[n]; n++)
    ;
  CHECK(n == 5);
  for (int i = 0; i < 5; i++) {
    Diag d = {0};
    Target t;
    CHECK(target_for_arch(accepted[i], &t, &d) == 0 && !d.failed);
    CHECK(!strcmp(t.arch, accepted[i]));
    CHECK(!strcmp(target_archs[i], accepted[i]));
    CHECK(nvrtc_check_arch(accepted[i], &d) == 0);
  }
  static const char *const refused[] = {"sm_70", "sm_75", "sm_87", "sm_100", "sm_90b",
                                        "SM_90", "sm_9", "", "compute_90"};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    Diag d = {0}, d2 = {0};
    Target t;
    CHECK(target_for_arch(refused[i], &t, &d) == -1 && d.failed);
    CHECK(strstr(d.msg, "unknown --arch") &&
          strstr(d.msg, "(known: sm_80, sm_86, sm_89, sm_90, sm_90a)"));
    CHECK(nvrtc_check_arch(refused[i], &d2) == -1);
  }
  /* NULL is the default, sm_90; target_default() is the same entry */
  Diag d = {0};
  Target t;
  CHECK(target_for_arch(NULL, &t, &d) == 0 && !strcmp(t.arch, TARGET_DEFAULT_ARCH));
  CHECK(!strcmp(TARGET_DEFAULT_ARCH, "sm_90"));
  CHECK(!memcmp(&t, target_default(), sizeof t));
}

/* The Programming Guide's per-compute-capability limits and the reference GPUs. */
static void test_figures(void) {
  static const struct {
    const char *arch;
    int cc, sms, smem_sm_kib, threads_sm, blocks_sm;
    bool clusters, fp8, tma, wgmma;
    int64_t l2_mib;
  } want[] = {
      {"sm_80", 80, 108, 164, 2048, 32, false, false, false, false, 40}, /* A100 SXM4 */
      {"sm_86", 86, 72, 100, 1536, 16, false, false, false, false, 6},   /* A10 */
      {"sm_89", 89, 58, 100, 1536, 24, false, true, false, false, 48},   /* L4 */
      {"sm_90", 90, 132, 228, 2048, 32, true, true, true, false, 50},    /* H100 SXM5 */
      {"sm_90a", 90, 132, 228, 2048, 32, true, true, true, true, 50},
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    Diag d = {0};
    Target t;
    CHECK(target_for_arch(want[i].arch, &t, &d) == 0);
    CHECK(t.cc == want[i].cc);
    CHECK(t.sms == want[i].sms);
    CHECK(t.smem_sm == want[i].smem_sm_kib * KIB);
    /* the driver keeps 1 KiB of an SM's shared memory per block */
    CHECK(t.smem_block_optin == (want[i].smem_sm_kib - 1) * KIB);
    CHECK(t.smem_block == 48 * KIB);
    CHECK(t.regs_sm == 64 * KIB && t.regs_thread == 255);
    CHECK(t.threads_block == 1024);
    CHECK(t.threads_sm == want[i].threads_sm && t.blocks_sm == want[i].blocks_sm);
    CHECK(t.clusters == want[i].clusters);
    CHECK(t.cluster_max == (want[i].clusters ? 8 : 1));
    unsigned ampere = TARGET_MMA_F16 | TARGET_MMA_BF16 | TARGET_MMA_TF32 | TARGET_MMA_INT8 |
                      TARGET_CP_ASYNC;
    CHECK((t.insn & ampere) == ampere);
    CHECK(!!(t.insn & TARGET_MMA_FP8) == want[i].fp8);
    CHECK(!!(t.insn & TARGET_TMA) == want[i].tma);
    CHECK(!!(t.insn & TARGET_WGMMA) == want[i].wgmma);
    CHECK(t.l2_bytes == want[i].l2_mib * KIB * KIB);
    CHECK(!strcmp(t.source, "table") && t.gpu[0]);
    /* the launch defaults fit every entry: whole warps, whole blocks an SM */
    CHECK(t.block == 256 && t.max_blocks == 4096);
    CHECK(t.block % 32 == 0 && t.block <= t.threads_block && t.threads_sm % t.block == 0);
  }
}

/* A device's compute capability picks the highest entry at or below it, never sm_90a. */
static void test_arch_for_cc(void) {
  CHECK(!strcmp(target_arch_for_cc(80), "sm_80"));
  CHECK(!strcmp(target_arch_for_cc(86), "sm_86"));
  CHECK(!strcmp(target_arch_for_cc(87), "sm_86")); /* Jetson Orin */
  CHECK(!strcmp(target_arch_for_cc(89), "sm_89"));
  CHECK(!strcmp(target_arch_for_cc(90), "sm_90"));
  CHECK(!strcmp(target_arch_for_cc(100), "sm_90")); /* newer GPUs run sm_90's PTX */
  CHECK(!strcmp(target_arch_for_cc(120), "sm_90"));
  CHECK(target_arch_for_cc(75) == NULL);
  CHECK(target_arch_for_cc(0) == NULL);
}

static void test_describe(void) {
  char line[256];
  target_describe(target_default(), line, sizeof line);
  CHECK(!strcmp(line, "sm_90, 132 SMs, 227 KiB shared memory a block, clusters of 8 "
                      "(table: H100 SXM5)"));
  Target t;
  Diag d = {0};
  CHECK(target_for_arch("sm_86", &t, &d) == 0);
  t.sms = 84;
  t.source = "device";
  strcpy(t.gpu, "NVIDIA A40");
  target_describe(&t, line, sizeof line);
  CHECK(!strcmp(line, "sm_86, 84 SMs, 99 KiB shared memory a block, no clusters "
                      "(device: NVIDIA A40)"));
  char small[8];
  target_describe(&t, small, sizeof small); /* truncates, NUL-terminated */
  CHECK(strlen(small) == sizeof small - 1);
}

/* Every entry passes target_check; a caller's target with a field out of range does not,
 * and the message names the field. */
static void test_check(void) {
  for (int i = 0; target_archs[i]; i++) {
    Diag d = {0};
    Target t;
    CHECK(target_for_arch(target_archs[i], &t, &d) == 0 && target_check(&t, &d) == 0);
  }
  static const struct {
    const char *field;
    int value;
  } bad[] = {{"sms", 0}, {"block", 0}, {"block", 100}, {"block", 2048}, {"max_blocks", 0},
             {"cluster_max", 0}, {"smem_block", 0}, {"threads_block", 16}, {"arch", 0}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    Diag d = {0};
    Target t = *target_default();
    const char *f = bad[i].field;
    int v = bad[i].value;
    if (!strcmp(f, "sms")) t.sms = v;
    if (!strcmp(f, "block")) t.block = v;
    if (!strcmp(f, "max_blocks")) t.max_blocks = v;
    if (!strcmp(f, "cluster_max")) t.cluster_max = v;
    if (!strcmp(f, "smem_block")) t.smem_block = v;
    if (!strcmp(f, "threads_block")) t.threads_block = v;
    if (!strcmp(f, "arch")) strcpy(t.arch, "sm_70");
    CHECK(target_check(&t, &d) == -1);
    CHECK(strstr(d.msg, !strcmp(f, "arch") ? "unknown --arch 'sm_70'" : f) != NULL);
  }
}

int main(void) {
  test_archs();
  test_figures();
  test_arch_for_cc();
  test_describe();
  test_check();
  if (failures) {
    fprintf(stderr, "test_target: %d checks failed\n", failures);
    return 1;
  }
  return 0;
}
