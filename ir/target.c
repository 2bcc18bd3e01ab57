/* target.c: the table of the architectures gpucc compiles for (see ir.h, "target.c").
 *
 * The per-architecture limits are those of the CUDA C++ Programming Guide's table of
 * compute capabilities (the same figures as CCCL's cuda::arch_traits): 64 Ki registers an
 * SM and 255 a thread, 1,024 threads a block, 48 KiB of static shared memory a block;
 * shared memory an SM (and a block opted in, 1 KiB less, which the driver reserves) of
 * 164 KiB on 8.0, 100 KiB on 8.6 and 8.9, 228 KiB on 9.0; 2,048 resident threads an SM on
 * 8.0 and 9.0, 1,536 on 8.6 and 8.9; 32, 16, 24 and 32 resident blocks. Clusters are 9.0's,
 * 8 blocks at most where portable. The instructions are the PTX ISA's: mma.sync on f16,
 * bf16, tf32 and integers and cp.async from sm_80, on e4m3/e5m2 from sm_89;
 * cp.async.bulk.tensor (TMA) from sm_90; wgmma only on the arch-specific sm_90a.
 *
 * SM count and L2 size differ between GPUs of one architecture; the table takes them from
 * one data-center GPU of each (NVIDIA's data sheets): A100 SXM4 (108 SMs, 40 MiB of L2),
 * A10 (72 SMs, 6 MiB), L4 (58 SMs, 48 MiB), H100 SXM5 (132 SMs, 50 MiB). A compile for a
 * device replaces them by the device's own (compiler/jit.c).
 *
 * The launch defaults (256-thread blocks, grids of at most 4,096 blocks) are codegen's
 * choice, the same on every architecture: 256 threads keep 8 blocks resident on an SM of
 * 2,048 threads and 6 on one of 1,536, and grid-stride loops cover any size. */
#include "ir/ir.h"

#include <stdio.h>
#include <string.h>

enum { KIB = 1024 };

/* what every entry shares: the sm_80 instructions, the per-block and per-SM limits that
 * have not changed since, and codegen's launch defaults */
#define AMPERE_INSN \
  (TARGET_MMA_F16 | TARGET_MMA_BF16 | TARGET_MMA_TF32 | TARGET_MMA_INT8 | TARGET_CP_ASYNC)
#define COMMON                                                                            \
  .source = "table", .smem_block = 48 * KIB, .regs_sm = 64 * KIB, .regs_thread = 255,      \
  .threads_block = 1024, .block = 256, .max_blocks = 4096

static const Target table[] = {
    {.arch = "sm_80", .cc = 80, .gpu = "A100 SXM4", COMMON, .sms = 108,
     .smem_block_optin = 163 * KIB, .smem_sm = 164 * KIB, .threads_sm = 2048, .blocks_sm = 32,
     .cluster_max = 1, .insn = AMPERE_INSN, .l2_bytes = 40 * KIB * KIB},
    {.arch = "sm_86", .cc = 86, .gpu = "A10", COMMON, .sms = 72,
     .smem_block_optin = 99 * KIB, .smem_sm = 100 * KIB, .threads_sm = 1536, .blocks_sm = 16,
     .cluster_max = 1, .insn = AMPERE_INSN, .l2_bytes = 6 * KIB * KIB},
    {.arch = "sm_89", .cc = 89, .gpu = "L4", COMMON, .sms = 58,
     .smem_block_optin = 99 * KIB, .smem_sm = 100 * KIB, .threads_sm = 1536, .blocks_sm = 24,
     .cluster_max = 1, .insn = AMPERE_INSN | TARGET_MMA_FP8, .l2_bytes = 48 * KIB * KIB},
    {.arch = "sm_90", .cc = 90, .gpu = "H100 SXM5", COMMON, .sms = 132,
     .smem_block_optin = 227 * KIB, .smem_sm = 228 * KIB, .threads_sm = 2048, .blocks_sm = 32,
     .clusters = true, .cluster_max = 8, .insn = AMPERE_INSN | TARGET_MMA_FP8 | TARGET_TMA,
     .l2_bytes = 50 * KIB * KIB},
    {.arch = "sm_90a", .cc = 90, .gpu = "H100 SXM5", COMMON, .sms = 132,
     .smem_block_optin = 227 * KIB, .smem_sm = 228 * KIB, .threads_sm = 2048, .blocks_sm = 32,
     .clusters = true, .cluster_max = 8,
     .insn = AMPERE_INSN | TARGET_MMA_FP8 | TARGET_TMA | TARGET_WGMMA,
     .l2_bytes = 50 * KIB * KIB},
};
enum { NTARGETS = sizeof table / sizeof table[0] };

const char *const target_archs[] = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", NULL};
_Static_assert(sizeof target_archs / sizeof target_archs[0] == NTARGETS + 1,
               "target_archs lists the table's entries");

static const Target *lookup(const char *arch) {
  for (int i = 0; i < NTARGETS; i++)
    if (!strcmp(table[i].arch, arch))
      return &table[i];
  return NULL;
}

int target_for_arch(const char *arch, Target *out, Diag *d) {
  const Target *t = lookup(arch ? arch : TARGET_DEFAULT_ARCH);
  if (!t) {
    char known[128] = "";
    for (int i = 0; target_archs[i]; i++)
      snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
               target_archs[i]);
    return diag_error(d, (SrcLoc){0}, "unknown --arch '%s' (known: %s)", arch, known);
  }
  *out = *t;
  return 0;
}

const Target *target_default(void) { return lookup(TARGET_DEFAULT_ARCH); }

/* sm_90a: code for that chip alone, whose features do not carry forward */
static bool arch_specific(const Target *t) { return t->arch[strlen(t->arch) - 1] == 'a'; }

int target_check(const Target *t, Diag *d) {
  Target entry;
  if (target_for_arch(t->arch, &entry, d))
    return -1;
  const char *bad = t->sms < 1                                  ? "sms"
                    : t->smem_block < 1                         ? "smem_block"
                    : t->smem_block_optin < t->smem_block       ? "smem_block_optin"
                    : t->smem_sm < t->smem_block_optin          ? "smem_sm"
                    : t->regs_sm < 1                            ? "regs_sm"
                    : t->regs_thread < 1                        ? "regs_thread"
                    : t->threads_block < 32                     ? "threads_block"
                    : t->threads_sm < t->threads_block          ? "threads_sm"
                    : t->blocks_sm < 1                          ? "blocks_sm"
                    : t->cluster_max < 1                        ? "cluster_max"
                    : t->block < 32 || t->block % 32 || t->block > t->threads_block ? "block"
                    : t->max_blocks < 1                         ? "max_blocks"
                                                                : NULL;
  if (bad)
    return diag_error(d, (SrcLoc){0}, "target %s: %s is out of range (%d SMs, a default block "
                      "of %d threads of at most %d, grids of at most %d blocks)", t->arch, bad,
                      t->sms, t->block, t->threads_block, t->max_blocks);
  return 0;
}

const char *target_arch_for_cc(int cc) {
  const char *best = NULL;
  int best_cc = 0;
  for (int i = 0; i < NTARGETS; i++)
    if (table[i].cc <= cc && table[i].cc > best_cc && !arch_specific(&table[i])) {
      best = table[i].arch;
      best_cc = table[i].cc;
    }
  return best;
}

void target_describe(const Target *t, char *buf, size_t n) {
  char cl[32] = "no clusters";
  if (t->clusters)
    snprintf(cl, sizeof cl, "clusters of %d", t->cluster_max);
  snprintf(buf, n, "%s, %d SMs, %d KiB shared memory a block, %s (%s: %s)", t->arch, t->sms,
           t->smem_block_optin / KIB, cl, t->source, t->gpu);
}
