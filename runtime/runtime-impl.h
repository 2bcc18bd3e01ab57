/* runtime-impl.h: what the runtime's files share and nobody else needs. Pure C: plan.c
 * and payload.c, which the compiler links, include no CUDA header. */
#ifndef GPUCC_RUNTIME_IMPL_H
#define GPUCC_RUNTIME_IMPL_H

#include "runtime/runtime.h"

#include <stdarg.h>
#include <stdbool.h>

/* Sets gpucc_last_error() to the formatted message and returns s. */
GpuccStatus gpucc_fail(GpuccStatus s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
GpuccStatus gpucc_vfail(GpuccStatus s, const char *fmt, va_list ap);

/* FNV-1a, 64 bits: the plan's and the trailer's checksum. Catches damage, not malice. */
uint64_t gpucc_fnv1a64(const void *p, size_t n);

/* Little-endian loads and stores, whatever the host. */
static inline uint32_t gpucc_rd32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t gpucc_rd64(const unsigned char *p) {
  return (uint64_t)gpucc_rd32(p) | (uint64_t)gpucc_rd32(p + 4) << 32;
}
static inline void gpucc_wr32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void gpucc_wr64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Elements of a tensor, or false if the product does not fit in 63 bits. */
bool gpucc_numel(const int64_t *dims, int rank, uint64_t *out);
/* "f32[1, 3, 224, 224]" into buf; with sym (per axis, -1: fixed) and the plan's symbols,
 * a ranged axis as its symbol and sizes: "f32[batch=1..64, seq={1, 7, 128..512}, 768]". */
void gpucc_format_type(char *buf, size_t n, GpuccDType t, int rank, const int64_t *dims,
                       const int8_t *sym, const GpuccSymbol *syms);
/* A symbol's sizes as its pieces, "1..64" or "1, 7, 128..512", into buf. */
void gpucc_format_sizes(char *buf, size_t n, const GpuccSymbol *s);
/* "class 3 (batch=4, seq=128)" into buf: class c of ranged plan p. */
void gpucc_format_class(char *buf, size_t n, const GpuccPlan *p, int c);
/* Whether size is one of the symbol's sizes. */
bool gpucc_symbol_has(const GpuccSymbol *s, int64_t size);
static inline int64_t gpucc_symbol_largest(const GpuccSymbol *s) { return s->hi[s->npieces - 1]; }
/* t's dims with each ranged axis at its symbol's size[sym]: a class's dims for its bounds,
 * a run's for its actual sizes. */
void gpucc_dims_at(const GpuccTensorInfo *t, const int64_t *size, int64_t *dims);

/* ---------------------------------------------------------------- tunecache.c
 *
 * What create decided by timing, on disk: per plan step, up to GPUCC_TUNE_WORDS words
 * (a choice's variant; a GEMM's cuBLASLt algorithm and workspace). A step with nwords 0
 * has no record. A ranged plan's steps are numbered across its classes, in class order:
 * one file holds the whole plan's decisions. */
enum { GPUCC_TUNE_WORDS = 9 };
typedef struct GpuccTuneEntry {
  int nwords;
  uint64_t w[GPUCC_TUNE_WORDS];
} GpuccTuneEntry;

/* The cache file of key (one line of printable text), malloc'd; NULL when the environment
 * names no cache folder ($GPUCC_CACHE_DIR, $XDG_CACHE_HOME, $HOME) or out of memory. */
char *gpucc_tune_path(const char *key);
/* Fills entries[0 .. nsteps) from the file at path: true when it is a regular file for
 * this key whose every line is well formed and names a step below nsteps once; else
 * false, with every entry empty. */
bool gpucc_tune_read(const char *path, const char *key, GpuccTuneEntry *entries, int nsteps);
/* Writes the file atomically (a temporary renamed into place), making its folders; false
 * when that fails, which costs only the next create's timing. */
bool gpucc_tune_write(const char *path, const char *key, const GpuccTuneEntry *entries,
                      int nsteps);

#endif
