#!/usr/bin/env python3
"""The generated kernels of small graphs, run on the CPU, against the reference executor.

No GPU in CI, so each case's CUDA C (`gpucc G --emit=cuda --passes=`, or with the fuse pass
for the fused cases: one kernel for a chain of pointwise nodes) is compiled as C++
with a small host shim: a block is as many threads as its kernel's __launch_bounds__
says (fibers taking turns on one OS thread),
__syncthreads a barrier of them,
__shfl_*_sync an exchange through a per-warp slot and barrier, __shared__ a static (blocks
run one after the other), and every kernel is launched on a grid of 3 blocks (the kernels
loop grid-stride, so any grid covers the work). A kernel of thread block clusters
(__cluster_dims__, the implicit GEMM's split K) runs 3 clusters one after another, the
blocks of each together, with a copy of the shared memory per block (GC_BLOCK_SHARED),
its distributed shared memory read through those copies and a barrier of all their
threads for the cluster's. The outputs must match
`gpucc run G --cpu` on random inputs (floats: rtol 1e-4, atol 1e-5; others exactly).

This checks the index arithmetic, the windows, the sorting network, the scans and the
reductions of the kernels; not what only a GPU shows (coalescing, memory model). The f16
and bf16 conversions are PTX; the host has its own (round to nearest even, like cvt.rn).
Cases named bf16_* or fp16_* run the precision pass (--precision=bf16 or fp16) and the
fuse pass, and compare with the reference executor on the same lowered graph: both round
every stored value to the lower type, the kernel from f32 and the reference from f64, so
a value near a rounding tie may land a step apart: rtol two steps of the type there
(2^-7 for bf16, 2^-9 for fp16), and atol a quarter step of the outputs' root mean square (a
sum that cancels, one of its terms a step apart). An attention kernel of one pass (its note
says "online softmax": codegen/attention.c) rounds exp(s - a running max) where the
reference rounds the probability: every probability a step apart at random, each output a
sum of SK such errors, whose standard deviation is about sqrt(2/3) u times the root mean
square of the outputs (u the unit roundoff, half a step: 2^-8 for bf16, 2^-11 for fp16;
the outputs' rms stands for that of the products, the probabilities times the values, as
it is where they do not cancel): atol 4u times the outputs' rms, five standard deviations
(docs/precision.md). A row of few keys averages nothing (a causal mask's first rows): there
the bound itself holds, each output sum_j p_j v_j with sum_j p_j = 1 moved by at most u
max|v| by the probabilities' rounding and as much by the reference's, so atol is at least
2u times the largest input's magnitude (the values among them). tf32_* cases (--precision=tf32) round
every product's inputs to 10-bit mantissas where the reference computes exactly: rtol
2^-9 and atol 2^-9 of the root mean square, about five standard deviations of that error.

A kernel may take a constant as a parameter (a scalar in an attention's chain): the
constants a case writes as literals are loaded like inputs (in bf16_ and fp16_ cases also
as the precision pass converts them), and a kernel that reads a buffer that is no input,
no such constant and no earlier kernel's output fails its case instead of reading zeros.

Each case draws its random inputs from a generator of its own, seeded by the crc32 of its
name (`case("name")`, the first thing its entry evaluates; the inputs shared by several
cases likewise by their own names, `seed(...)`): its data depends only on its name and
shapes, so a case goes where it belongs in the list, and adding one moves no other's.

usage: emulate.py --gpucc PATH [--tmp DIR] [-k SUBSTRING] [--shard K/N]

ctest runs the cases in shards (codegen_emulate/K, `--shard K/N`: every Nth case from the
Kth), so no one test runs for long and the shards share the cores.
"""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import zlib

import numpy as np

HOST = r"""
// _longjmp between stacks is what the fibers do: fortified, it would be __longjmp_chk,
// which takes a jump to another stack for a corrupted one (Ubuntu's g++ fortifies -O1).
#undef _FORTIFY_SOURCE
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>
#include <setjmp.h>
#include <ucontext.h>
using namespace std;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __cluster_dims__(...)
#define __shared__ static
#define __restrict__ __restrict
struct gc_dim3 { unsigned x, y, z; };
static gc_dim3 blockIdx = {0, 0, 0}, threadIdx = {0, 0, 0};
static gc_dim3 blockDim = {256, 1, 1};
static gc_dim3 gridDim = {3, 1, 1};
// The threads of a launch are fibers run one at a time on one OS thread: a barrier that
// is not complete switches to the next fiber. Barriers cost a context switch in user
// space instead of a futex sleep per thread, and a run is deterministic. A fiber starts
// on its own stack with setcontext; after that every switch is a _setjmp/_longjmp pair,
// which keeps the signal mask: swapcontext's two system calls a switch were half of the
// emulator's time.
struct gc_barrier;
struct gc_fiber {
  ucontext_t ctx;  // to start it
  jmp_buf at;      // where it waits
  gc_dim3 block, thread;
  gc_barrier *block_bar;
  bool started, done;
};
enum { GC_STACK = 256 << 10 };
static vector<gc_fiber> gc_fibers;
static vector<char *> gc_stacks;
static size_t gc_cur;
static jmp_buf gc_sched;
static const function<void()> *gc_kernel;
static gc_barrier *gc_block_bar;
static void gc_yield() {
  gc_fiber &f = gc_fibers[gc_cur];
  if (!_setjmp(f.at)) _longjmp(gc_sched, 1);
}
struct gc_barrier {
  unsigned n, arrived = 0, phase = 0;
  explicit gc_barrier(unsigned count) : n(count) {}
  void arrive_and_wait() {
    unsigned p = phase;
    if (++arrived == n) {
      arrived = 0;
      phase++;
      return;
    }
    while (phase == p) gc_yield();
  }
};
// the blocks of a cluster run together, GC_MAX_CLUSTER at most, GC_MAX_WARPS warps in
// all; a warp's slots and barriers are indexed by its block's rank in the cluster and its
// warp in the block
enum { GC_MAX_CLUSTER = 8, GC_MAX_WARPS = 256 };
static unsigned gc_cluster_size = 1;
static gc_barrier *gc_cluster_bar, *gc_warp_bars[GC_MAX_WARPS];
static inline unsigned gc_rank() { return blockIdx.x % gc_cluster_size; }
static inline int gc_warp() { return (int)(gc_rank() * (blockDim.x >> 5) + (threadIdx.x >> 5)); }
static unsigned char gc_slot[GC_MAX_WARPS][32][16];
static inline void __syncthreads() { gc_block_bar->arrive_and_wait(); }
// a kernel's shared memory, a copy per block of a cluster, each declaration an array of
// its own (a kernel may declare several); rank r's copy of p: p moved by r - rank copies
// of the array p lies in
struct gc_shared_array { char *base; size_t copy; };
static vector<gc_shared_array> gc_shared_arrays;
template <class T> T &gc_block_shared(T *all) {
  bool known = false;
  for (const gc_shared_array &a : gc_shared_arrays) known = known || a.base == (char *)all;
  if (!known) gc_shared_arrays.push_back({(char *)all, sizeof(T)});
  return all[gc_rank()];
}
#define GC_BLOCK_SHARED(T, name) static T name##_blocks[GC_MAX_CLUSTER]; T &name = gc_block_shared(name##_blocks)
#define GC_DYN_SHARED(T, name) GC_BLOCK_SHARED(T, name)
template <class T> T *gc_cluster_map(T *p, unsigned r) {
  char *c = (char *)p;
  for (const gc_shared_array &a : gc_shared_arrays)
    if (c >= a.base && c < a.base + GC_MAX_CLUSTER * a.copy)
      return (T *)(c + ((long)r - (long)gc_rank()) * (long)a.copy);
  abort();  // no block's shared memory
}
static inline void gc_cluster_sync() { gc_cluster_bar->arrive_and_wait(); }
template <class T> T gc_exchange(T v, int src) {
  int w = gc_warp(), l = threadIdx.x & 31;
  memcpy(gc_slot[w][l], &v, sizeof v);
  gc_warp_bars[w]->arrive_and_wait();
  T r;
  memcpy(&r, gc_slot[w][src], sizeof r);
  gc_warp_bars[w]->arrive_and_wait();
  return r;
}
template <class T> T __shfl_xor_sync(unsigned, T v, int m) { return gc_exchange(v, (threadIdx.x & 31) ^ m); }
template <class T> T __shfl_up_sync(unsigned, T v, int d) { int l = threadIdx.x & 31; return gc_exchange(v, l >= d ? l - d : l); }
template <class T> T __shfl_sync(unsigned, T v, int s) { return gc_exchange(v, s); }
static inline int __any_sync(unsigned, int p) {
  int w = gc_warp(), l = threadIdx.x & 31, any = 0;
  memcpy(gc_slot[w][l], &p, sizeof p);
  gc_warp_bars[w]->arrive_and_wait();
  for (int k = 0; k < 32; k++) { int v; memcpy(&v, gc_slot[w][k], sizeof v); any |= v != 0; }
  gc_warp_bars[w]->arrive_and_wait();
  return any;
}
static void gc_fiber_main() {
  (*gc_kernel)();
  gc_fibers[gc_cur].done = true;
  _longjmp(gc_sched, 1);  // never returns: its stack is abandoned
}
// three clusters of `cluster` blocks of `threads`, one cluster after another; within a
// cluster the fibers take turns until every one has returned
static void gc_launch(unsigned cluster, unsigned threads, const function<void()> &k) {
  if (threads % 32 || cluster * threads / 32 > GC_MAX_WARPS) abort();
  gc_cluster_size = cluster;
  gridDim = {3 * cluster, 1, 1};
  blockDim = {threads, 1, 1};
  gc_kernel = &k;
  size_t nf = threads * cluster;
  while (gc_stacks.size() < nf) gc_stacks.push_back((char *)malloc(GC_STACK));
  for (unsigned c = 0; c < 3; c++) {
    gc_barrier cb(threads * cluster);
    vector<gc_barrier> bbs(cluster, gc_barrier(threads)), wbs(threads / 32 * cluster, gc_barrier(32));
    gc_cluster_bar = &cb;
    for (unsigned w = 0; w < threads / 32 * cluster; w++) gc_warp_bars[w] = &wbs[w];
    gc_fibers.assign(nf, gc_fiber());
    for (size_t i = 0; i < nf; i++) {
      gc_fiber &f = gc_fibers[i];
      unsigned r = (unsigned)(i / threads);
      f.block = {c * cluster + r, 0, 0};
      f.thread = {(unsigned)(i % threads), 0, 0};
      f.block_bar = &bbs[r];
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = gc_stacks[i];
      f.ctx.uc_stack.ss_size = GC_STACK;
      f.ctx.uc_link = nullptr;
      makecontext(&f.ctx, gc_fiber_main, 0);
    }
    // Each turn walks the fibers in the opposite order of the last, so a read of another
    // thread's write that lacks a barrier between them finds the value missing either way.
    for (size_t left = nf, turn = 0; left; turn++) {
      left = 0;
      for (size_t i = 0; i < nf; i++) {
        gc_cur = turn % 2 ? nf - 1 - i : i;
        gc_fiber &f = gc_fibers[gc_cur];
        if (f.done) continue;
        blockIdx = f.block;
        threadIdx = f.thread;
        gc_block_bar = f.block_bar;
        if (!_setjmp(gc_sched)) {
          if (f.started) _longjmp(f.at, 1);
          f.started = true;
          setcontext(&f.ctx);
        }
        left += !gc_fibers[gc_cur].done;
      }
    }
  }
}
#define __expf(x) expf(x) /* glibc declares its own __expf */
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
// the preamble's gc_smem (a shared-memory address for PTX), which the shims below do not use
static inline size_t __cvta_generic_to_shared(const void *p) { return (size_t)p; }
static inline unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }
// cvt.rna.tf32.f32: to a 10-bit mantissa, to nearest, ties away from zero
static inline unsigned gc_tf32(unsigned x) {
  return (x & 0x7f800000u) == 0x7f800000u ? x : (x + 0x1000u) & 0xffffe000u;
}
static inline double __longlong_as_double(long long i) { double f; memcpy(&f, &i, 8); return f; }
// CUDA's: toward zero, saturating, NaN to INT64_MIN
static inline long long __double2ll_rz(double f) {
  return f != f || f <= -0x1p63 ? (long long)(-0x7fffffffffffffffLL - 1) : f >= 0x1p63 ? 0x7fffffffffffffffLL : (long long)f;
}
static inline long long __float2ll_rz(float f) { return __double2ll_rz(f); }
static inline float __double2float_rz(double d) { return (float)d; }
static inline double __dmul_rn(double a, double b) { return a * b; }
"""

# After gpucc's preamble (which defines the 16-bit types): the conversions its PTX does.
HOST16 = r"""
static inline float gc_h2f(gc_f16 h) { _Float16 x; memcpy(&x, &h.bits, 2); return (float)x; }
static inline gc_f16 gc_f2h(float f) { _Float16 x = (_Float16)f; gc_f16 h; memcpy(&h.bits, &x, 2); return h; }
static inline gc_f16 gc_d2h(double d) { _Float16 x = (_Float16)d; gc_f16 h; memcpy(&h.bits, &x, 2); return h; }
static inline gc_bf16 gc_f2bf(float f) {
  unsigned u = __float_as_uint(f);
  gc_bf16 h;
  h.bits = f != f ? 0x7fc0 : (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  return h;
}
static inline unsigned gc_f2bf2(float lo, float hi) { return gc_f2bf(lo).bits | (unsigned)gc_f2bf(hi).bits << 16; }
static inline unsigned gc_f2h2(float lo, float hi) { return gc_f2h(lo).bits | (unsigned)gc_f2h(hi).bits << 16; }
// mma for one warp: every lane's fragments through a slot; place(s, A, B, g, t) puts lane
// (g, t)'s values where PTX's layout has them, and D += A B over K taps
static unsigned gc_mma_slot[GC_MAX_WARPS][32][6];
template <int K, class Place> static void gc_mma_warp(float *c, const unsigned *a, const unsigned *b, Place place) {
  int w = gc_warp(), l = threadIdx.x & 31;
  memcpy(gc_mma_slot[w][l], a, 16);
  memcpy(gc_mma_slot[w][l] + 4, b, 8);
  gc_warp_bars[w]->arrive_and_wait();
  float A[16][16], B[16][8];
  for (int L = 0; L < 32; L++) place(gc_mma_slot[w][L], A, B, L >> 2, L & 3);
  gc_warp_bars[w]->arrive_and_wait();
  int g = l >> 2, t = l & 3;
  for (int j = 0; j < 4; j++) {
    float sum = 0;
    for (int k = 0; k < K; k++) sum += A[g + (j >> 1) * 8][k] * B[k][2 * t + (j & 1)];
    c[j] += sum;
  }
}
// mma.m16n8k16: A 16x16 and B 16x8 as pairs of bf16 or f16
template <bool F16> static inline float gc_mma_elem(unsigned bits) {
  if (!F16) return __uint_as_float(bits << 16);
  gc_f16 h = {(unsigned short)bits};
  return gc_h2f(h);
}
template <bool F16> static void gc_mma(float *c, const unsigned *a, const unsigned *b) {
  gc_mma_warp<16>(c, a, b, [](const unsigned *s, float (*A)[16], float (*B)[8], int g, int t) {
    for (int j = 0; j < 4; j++) {
      int r = g + (j & 1) * 8, k = 2 * t + (j >> 1) * 8;
      A[r][k] = gc_mma_elem<F16>(s[j] & 0xffff);
      A[r][k + 1] = gc_mma_elem<F16>(s[j] >> 16);
    }
    for (int j = 0; j < 2; j++) {
      B[2 * t + 8 * j][g] = gc_mma_elem<F16>(s[4 + j] & 0xffff);
      B[2 * t + 8 * j + 1][g] = gc_mma_elem<F16>(s[4 + j] >> 16);
    }
  });
}
static inline void gc_mma_bf16(float *c, const unsigned *a, const unsigned *b) { gc_mma<false>(c, a, b); }
static inline void gc_mma_f16(float *c, const unsigned *a, const unsigned *b) { gc_mma<true>(c, a, b); }
// mma.m16n8k8 on TF32: A 16x8, B 8x8, a value a slot (the low 13 bits ignored)
static void gc_mma_tf32(float *c, const unsigned *a, const unsigned *b) {
  gc_mma_warp<8>(c, a, b, [](const unsigned *s, float (*A)[16], float (*B)[8], int g, int t) {
    for (int j = 0; j < 4; j++) A[g + (j & 1) * 8][t + (j >> 1) * 4] = __uint_as_float(s[j] & 0xffffe000u);
    for (int j = 0; j < 2; j++) B[t + 4 * j][g] = __uint_as_float(s[4 + j] & 0xffffe000u);
  });
}
// ldmatrix.x4: every lane's row address through a slot
static const void *gc_ldsm_row[GC_MAX_WARPS][32];
static void gc_ldsm4(unsigned *r, const void *p) {
  int w = gc_warp(), l = threadIdx.x & 31;
  gc_ldsm_row[w][l] = p;
  gc_warp_bars[w]->arrive_and_wait();
  for (int i = 0; i < 4; i++) memcpy(&r[i], (const unsigned char *)gc_ldsm_row[w][8 * i + l / 4] + 4 * (l % 4), 4);
  gc_warp_bars[w]->arrive_and_wait();
}
// the compiler barrier is the identity
template <class T> static inline const T *gc_keep(const T *p) { return p; }
// ex2.approx.ftz: subnormal results flushed to zero
static inline float gc_ex2(float x) { const float r = exp2f(x); return r < 0x1p-126f ? 0.f : r; }
// ldmatrix.x4.trans: two 16-bit elements of a column of each matrix
static void gc_ldsm4t(unsigned *r, const void *p) {
  int w = gc_warp(), l = threadIdx.x & 31;
  gc_ldsm_row[w][l] = p;
  gc_warp_bars[w]->arrive_and_wait();
  for (int i = 0; i < 4; i++) {
    unsigned short lo, hi;
    memcpy(&lo, (const unsigned char *)gc_ldsm_row[w][8 * i + 2 * (l % 4)] + 2 * (l / 4), 2);
    memcpy(&hi, (const unsigned char *)gc_ldsm_row[w][8 * i + 2 * (l % 4) + 1] + 2 * (l / 4), 2);
    r[i] = lo | (unsigned)hi << 16;
  }
  gc_warp_bars[w]->arrive_and_wait();
}
// cp.async: copied at once, so every wait has nothing left to wait for
template <class T, class I> static void gc_cp16(void *dst, const T *base, I at, bool ok) {
  if (ok) memcpy(dst, base + at, 16); else memset(dst, 0, 16);
}
static inline void gc_cp_commit() {}
template <int N> static inline void gc_cp_wait() {}
static inline gc_bf16 gc_d2bf(double d) {
  float f = (float)d;  // to odd, as the preamble's: toward zero, then the sticky bit
  if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.f);
  if ((double)f != d && f == f) f = __uint_as_float(__float_as_uint(f) | 1u);
  return gc_f2bf(f);
}
"""

DTYPES = {"float32": "f32", "float64": "f64", "int64": "i64", "int32": "i32", "int8": "i8",
          "uint8": "u8", "bool": "bool"}


BYTES = {"f32": 4, "f64": 8, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u8": 1, "bool": 1,
         "f16": 2, "bf16": 2}
# a launch: its kernel's comment (the values it reads and writes), then the kernel, or a
# line naming an earlier kernel of the same code that it launches instead (codegen's
# dedup_kernel)
HEAD = re.compile(r"\n/\* (?:node \d+|fuse group \d+ = [^:]*): (?:\w+)?\((.*?)\) -> (.*?)(?: \*/|\n \*)")
SIGNATURE = re.compile(r"__launch_bounds__\((\d+)(?:, \d+)?\) (?:__cluster_dims__\((\d+), 1, 1\) )?(\w+)\(")
SAME = re.compile(r"\*/\n/\* launches (\w+): the same code \*/")


def launches(src):
    """(inputs, outputs, (cluster, threads), kernel) of each launch, in order."""
    heads = list(HEAD.finditer(src))
    geometry = {m.group(3): (m.group(2), m.group(1)) for m in SIGNATURE.finditer(src)}
    out = []
    for i, h in enumerate(heads):
        seg = src[h.start():heads[i + 1].start() if i + 1 < len(heads) else len(src)]
        same, sig = SAME.search(seg), SIGNATURE.search(seg)
        if same and (not sig or same.start() < sig.start()):
            out.append((h.group(1), h.group(2), geometry[same.group(1)], same.group(1)))
        elif sig:
            out.append((h.group(1), h.group(2), (sig.group(2), sig.group(1)), sig.group(3)))
    return out
VALUE = re.compile(r"%([\w.]+): (\w+)\[([0-9, ]*)\]")


def first_kernel(src):
    return re.search(r"\n/\* (node \d+:|fuse group \d+ =)", src).start()


def host_preamble(src):
    """gpucc's preamble without the PTX conversions of f16 and bf16."""
    out, skip = [], False
    for line in src[:first_kernel(src)].splitlines():
        if line.startswith("__device__ __forceinline__ gc_bf16 gc_d2bf"):
            skip = True
        if not skip and not re.search(r"\basm\b", line):
            out.append(line)
        if skip and line.startswith("}"):
            skip = False
    return "\n".join(out) + "\n"


VARIANT = re.compile(r"^(\w+)_v(\d+)$")


def variant_passes(kernels):
    """The kernels of each pass: every variant of a choice (kernels named <base>_v0,
    <base>_v1, ...: codegen's variants of one piece of work) runs in a pass of its own,
    pass j taking variant j of each choice (its last, where a choice has fewer)."""
    count = {}
    for kernel, _, _ in kernels:
        m = VARIANT.match(kernel)
        if m:
            count[m.group(1)] = max(count.get(m.group(1), 0), int(m.group(2)) + 1)
    passes = []
    for j in range(max(count.values(), default=1)):
        passes.append([k for k in kernels
                       if not VARIANT.match(k[0]) or
                       int(VARIANT.match(k[0]).group(2)) == min(j, count[VARIANT.match(k[0]).group(1)] - 1)])
    return passes


def host_main(d, src, inputs, outs, expect, aliases=None):
    """main(): reads the inputs, launches every kernel in order on buffers named after the
    values in each kernel's comment (its parameters in0.., out0.. in that order), writes
    the outputs: out<i>_<pass>.bin, one pass for each variant (variant_passes), the
    buffers that are not inputs cleared before each. aliases: value name -> the value
    whose bytes it is (a reshape's; from --emit=plan), which holds the bytes of both."""
    aliases = aliases or {}

    def base(name):
        while name in aliases:
            name = aliases[name]
        return name
    lines = ["int main() {"]
    sizes = {}
    kernels = []
    written = set(inputs)
    for ins, outv, (cluster, threads), kernel in launches(src):
        names = []
        for out, seg in enumerate((ins, outv)):
            for name, dt, dims in VALUE.findall(seg):
                key = base(name.replace(".", "_dot_"))
                if not out and key not in written:
                    # a constant the kernel takes as a parameter: main() has no bytes for
                    # it, and a buffer of zeros would pass for its value
                    raise ValueError(f"%{name} is read by {kernel} but is no input and no "
                                     "earlier kernel writes it (a constant? give it as an input)")
                if out:
                    written.add(key)
                n = 1
                for x in dims.replace(" ", "").split(","):
                    n *= int(x) if x else 1
                name = name.replace(".", "_dot_")  # a C identifier ("x.bf16": a cast's)
                sizes[base(name)] = max(sizes.get(base(name), 0), n * BYTES[dt])
                names.append(base(name))
        kernels.append((kernel, (int(cluster or 1), int(threads)), names))
    for name, nbytes in sizes.items():  # aligned as the GPU's arena aligns its buffers
        lines.append(f"  alignas(256) static unsigned char b_{name}[{nbytes} + 16];")
    for name, a in inputs.items():
        a = np.ascontiguousarray(a)
        a.tofile(os.path.join(d, f"in_{name}.bin"))
        if name in sizes:
            lines.append(f'  {{ FILE *f = fopen("{d}/in_{name}.bin", "rb"); '
                         f'if (!f || fread(b_{name}, 1, {a.nbytes}, f) != {a.nbytes}) return 2; fclose(f); }}')
    passes = variant_passes(kernels)
    for j, run in enumerate(passes):
        if j:
            for name, nbytes in sizes.items():
                if name not in inputs:
                    lines.append(f"  memset(b_{name}, 0, sizeof b_{name});")
        for kernel, (cluster, threads), names in run:
            params = re.search(r"__launch_bounds__\(\d+(?:, \d+)?\) (?:__cluster_dims__\(\d+, 1, 1\) )?" + kernel + r"\(([^)]*)\)", src).group(1)
            args = []
            for p in params.split(","):
                m = re.match(r"\s*(const )?(\w+) \*(?:__restrict__ )?(in|out)(\d+)", p)
                args.append(f"({m.group(1) or ''}{m.group(2)} *)b_{names[len(args)]}")
            lines.append(f"  gc_launch({cluster}, {threads}, [&] {{ {kernel}({', '.join(args)}); }});")
        for i, (o, e) in enumerate(zip(outs, expect)):
            lines.append(f'  {{ FILE *f = fopen("{d}/out{i}_{j}.bin", "wb"); fwrite(b_{base(o)}, 1, {e.nbytes}, f); fclose(f); }}')
    lines.append("  return 0;\n}\n")
    return "\n".join(lines)


# Every case compiles with these flags. The host shim (HOST) is the same for all of them
# and its C++ headers are most of a case's compile time, so it is compiled once into a
# precompiled header beside the cases (GCC uses HOST_HEADER.gch when the flags match).
CXX = ["g++", "-std=c++20", "-O1", "-w"]
HOST_HEADER = "gc_host.hpp"


def precompile_host(tmp):
    """Writes the host shim and its precompiled header into tmp; (ok, message)."""
    os.makedirs(tmp, exist_ok=True)
    header = os.path.join(tmp, HOST_HEADER)
    with open(header, "w") as f:
        f.write(HOST)
    r = subprocess.run(CXX + ["-x", "c++-header", "-o", header + ".gch", header],
                       capture_output=True, text=True)
    return r.returncode == 0, r.stderr[:4000]


CONST = re.compile(r"^%([\w.]+) = const (\w+)\[([0-9, ]*)\] ([-0-9.e\[\], ]+)$")


def literal_consts(stmt, lowered):
    """The constants the case writes as literals ("%c = const f32[] 0.5"), by buffer name,
    for the kernels that take a constant as a parameter: each as declared and, in a
    bf16_ or fp16_ case, as the precision pass converts it ("c.bf16": rounded to nearest
    even, a finite value beyond the type's range saturating)."""
    out = {}
    for line in stmt.splitlines():
        m = CONST.match(line.strip())
        kind = {"f32": np.float32, "i64": np.int64, "i32": np.int32}.get(m.group(2)) if m else None
        if not kind:
            continue
        shape = [int(x) for x in m.group(3).replace(" ", "").split(",") if x]
        try:
            a = np.array(json.loads(m.group(4)), dtype=np.float64).astype(kind).reshape(shape)
        except ValueError:
            continue
        key = m.group(1).replace(".", "_dot_")
        out[key] = a
        if kind is np.float32 and lowered == "bf16":
            b = a.reshape(-1).view(np.uint32).astype(np.uint64)
            r = ((b + 0x7fff + ((b >> 16) & 1)) >> 16).astype(np.uint16)
            big = ((r & 0x7fff) == 0x7f80) & np.isfinite(a.reshape(-1))
            r[big] = (r[big] & 0x8000) | 0x7f7f
            out[key + "_dot_bf16"] = r.reshape(shape)
        elif kind is np.float32 and lowered == "fp16":
            out[key + "_dot_f16"] = np.clip(a, -65504, 65504).astype(np.float16)
    return out


def run_case(gpucc, tmp, name, inputs, stmt, atol=1e-5, flags=()):
    """(ok, message) for the graph of the statements (lines) over the given inputs; the
    last statement's results are the outputs, or a last line "return %a, %b" names them. A case whose name starts with "fused_" runs
    the fuse pass, so its nodes become one kernel ("fused_simplify_": simplify first,
    "fused_sink_": sink_reshapes first).
    flags: more options for the compile (--sms N: the shapes of a larger GPU's work)."""
    d = os.path.join(tmp, name)
    os.makedirs(d, exist_ok=True)
    sig = ", ".join(f"%{k}: {DTYPES[str(v.dtype)]}[{', '.join(map(str, v.shape))}]"
                    for k, v in inputs.items())
    stmts = stmt.splitlines()
    if stmts[-1].startswith("return "):  # outputs named explicitly
        lhs = stmts.pop()[len("return "):]
        stmt = "\n".join(stmts)
    else:
        lhs = stmts[-1].split(" = ", 1)[0]
    outs = [o.strip()[1:] for o in lhs.split(",")]
    lowered = name.split("_")[0] if name.startswith(("bf16_", "fp16_", "tf32_")) else None
    passes = ("--passes=simplify,fuse" if name.startswith("fused_simplify_")
              else "--passes=sink_reshapes,fuse" if name.startswith("fused_sink_")
              else "--passes=fuse" if name.startswith("fused_") else "--passes=")
    ref = ["--passes="]
    if lowered:
        passes = "--passes=precision,fuse --precision=" + lowered
        ref = ["--passes=precision", "--precision=" + lowered]
    gir = os.path.join(d, "g.gir")
    body = "\n  ".join(stmt.splitlines())
    with open(gir, "w") as f:
        f.write(f"graph g({sig}) {{\n  {body}\n  return {lhs}\n}}\n")
    args = []
    for k, v in inputs.items():
        np.save(os.path.join(d, k + ".npy"), v)
        args += ["--input", f"{k}={os.path.join(d, k + '.npy')}"]
    r = subprocess.run([gpucc, "run", gir, "--cpu", "--output-dir", d] + ref + args,
                       capture_output=True, text=True)
    if r.returncode:
        return False, "reference: " + r.stderr
    expect = [np.load(os.path.join(d, o + ".npy")) for o in outs]
    r = subprocess.run([gpucc, gir, "--emit=cuda"] + passes.split() + list(flags),
                       capture_output=True, text=True)
    if r.returncode:
        return False, "codegen: " + r.stderr
    src = r.stdout
    r = subprocess.run([gpucc, gir, "--emit=plan"] + passes.split() + list(flags),
                       capture_output=True, text=True)
    if r.returncode:
        return False, "plan: " + r.stderr
    aliases = {a.replace(".", "_dot_"): b.replace(".", "_dot_")
               for a, b in re.findall(r"^  %([\w.]+): .*, the bytes of %([\w.]+)$", r.stdout, re.M)}
    kernels = set(m.group(1) for m in re.finditer(r"__launch_bounds__\([^)]*\) (?:__cluster_dims__\(\d+, 1, 1\) )?(\w+)\(", src))
    if name.startswith("fused_") and len(set(VARIANT.sub(r"\1", k) for k in kernels)) != 1:
        return False, "the fuse pass left more than one kernel"
    cpp = os.path.join(d, "k.cpp")
    try:
        main = host_main(d, src, dict(literal_consts(stmt, lowered), **inputs), outs, expect,
                         aliases)
    except ValueError as e:
        return False, str(e)
    with open(cpp, "w") as f:
        f.write(f'#include "{HOST_HEADER}"\n' + host_preamble(src) + HOST16 +
                src[first_kernel(src):] + "\n" + main)
    exe = os.path.join(d, "k")
    r = subprocess.run(CXX + ["-I", tmp, "-o", exe, cpp], capture_output=True, text=True)
    if r.returncode:
        return False, "g++: " + r.stderr[:4000]
    r = subprocess.run([exe], capture_output=True, text=True, timeout=300)
    if r.returncode:
        return False, f"the emulated kernels exited with {r.returncode}: {r.stderr[:2000]}"
    npasses = len(variant_passes([(k, 1, []) for k in kernels]))
    for j, i, (o, e) in ((j, i, oe) for j in range(npasses) for i, oe in enumerate(zip(outs, expect))):
        got = np.fromfile(os.path.join(d, f"out{i}_{j}.bin"), dtype=e.dtype).reshape(e.shape)
        if e.dtype.kind == "f":
            rtol = {"bf16": 2.0 ** -7, "fp16": 2.0 ** -9, "tf32": 2.0 ** -9}.get(lowered, 1e-4)
            if lowered:  # a sum that cancels, a term a step apart: a quarter step of the rms
                fin = e[np.isfinite(e)].astype(np.float64)  # (tf32: every term's inputs rounded)
                part = 1 if lowered == "tf32" else 1 / 4
                bound = 0.0
                if lowered != "tf32" and "online softmax" in src:  # one pass: see the top
                    u = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}[lowered]
                    part = 4 * u / rtol
                    bound = 2 * u * max(float(np.max(np.abs(a[np.isfinite(a)]), initial=0))
                                        for a in inputs.values() if a.dtype.kind == "f")
                atol = max(atol, bound,
                           rtol * float(np.sqrt(np.mean(fin ** 2))) * part if fin.size else 0)
            bad = ~np.isclose(got, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            bad = got != e
        if bad.any():
            at = tuple(np.argwhere(bad)[0])
            which = f" (variant pass {j})" if npasses > 1 else ""
            return False, (f"%{o}{which} differs in {int(bad.sum())} of {e.size} elements; first at "
                           f"{list(at)}: {got[at]} (kernel) vs {e[at]} (reference)")
    return True, ""

# Attention as BERT's exporters write it (heads split from Q, K and V, scaled, masked,
# NaN rows zeroed) and as GPT-2's (one QKV tensor split, a causal where): b batch entries,
# s tokens, h heads of size d.
def attn_masked(b, s, h, d):
    shape = f"[{b}, {s}, {h}, {d}]"
    return (
        f"%q4 = reshape(%q) {{shape = {shape}}}\n%qt = transpose(%q4) {{perm = [0, 2, 1, 3]}}\n"
        f"%k4 = reshape(%k) {{shape = {shape}}}\n%kt = transpose(%k4) {{perm = [0, 2, 3, 1]}}\n"
        f"%v4 = reshape(%v) {{shape = {shape}}}\n%vt = transpose(%v4) {{perm = [0, 2, 1, 3]}}\n"
        "%c = const f32[] 0.59460356\n%qs = mul(%qt, %c)\n%ks = mul(%c, %kt)\n"
        "%s = matmul(%qs, %ks)\n%a = add(%s, %m)\n%p = softmax(%a) {axis = -1}\n"
        "%n = is_nan(%p)\n%w = where(%n, %z, %p)\n"
        "%o = matmul(%w, %vt)\n%y = transpose(%o) {perm = [0, 2, 1, 3]}")


def attn_causal(s, h, d, rest=0):
    """(rest: extra columns after Q, K and V in x, split off and unused)"""
    shape = f"[1, {s}, {h}, {d}]"
    parts = [h * d] * 3 + ([rest] if rest else [])
    outs = "%q, %k, %v" + (", %r" if rest else "")
    return (
        f"{outs} = split(%x) {{axis = 2, split = {parts}}}\n"
        f"%q4 = reshape(%q) {{shape = {shape}}}\n%qt = transpose(%q4) {{perm = [0, 2, 1, 3]}}\n"
        f"%k4 = reshape(%k) {{shape = {shape}}}\n%kt = transpose(%k4) {{perm = [0, 2, 3, 1]}}\n"
        f"%v4 = reshape(%v) {{shape = {shape}}}\n%vt = transpose(%v4) {{perm = [0, 2, 1, 3]}}\n"
        "%s = matmul(%qt, %kt)\n%d = mul(%s, %c)\n%a = where(%t, %d, %lo)\n%p = softmax(%a) {axis = -1}\n"
        "%o = matmul(%p, %vt)\n%y = transpose(%o) {perm = [0, 2, 1, 3]}")


# Grouped-query attention as Llama's exporters write it (transformers' repeat_kv): one
# projection x [b, s, (h + 2 kv) d] cut into Q, K and V, K and V of kv heads repeated
# h / kv times by unsqueeze, expand and reshape (spelling "unsqueeze"; "reshape": the
# [b, kv, 1, s, d] made by a reshape, the expand's shape of rank 5; "tile": the kv heads
# repeated whole, [b, rep, kv, s, d], which stays a kernel of its own), K transposed after
# the repeat (kt_first: before it, as [b, kv, d, s]); the scores scaled by c; a causal
# where with t [1, 1, s, s], or an additive mask m [b, 1, 1, s] and the NaN masking (z).
def attn_gqa(b, s, h, kv, d, causal=True, spelling="unsqueeze", kt_first=False):
    rep = h // kv
    parts = [h * d, kv * d, kv * d]

    def repeat(x, dims):  # x: [b, kv, *dims] -> [b, h, *dims]
        if spelling == "tile":  # head h reads kv head h % kv: no view, a kernel
            return (f"%{x}u = unsqueeze(%{x}) {{axes = [1]}}\n"
                    f"%{x}e = expand(%{x}u) {{shape = [{b}, {rep}, {kv}, {dims[0]}, {dims[1]}]}}\n"
                    f"%{x}r = reshape(%{x}e) {{shape = [{b}, {h}, {dims[0]}, {dims[1]}]}}\n")
        one = f"[{b}, {kv}, 1, {dims[0]}, {dims[1]}]"
        up = (f"%{x}u = unsqueeze(%{x}) {{axes = [2]}}\n" if spelling == "unsqueeze" else
              f"%{x}u = reshape(%{x}) {{shape = {one}}}\n")
        return (up + f"%{x}e = expand(%{x}u) {{shape = [{b}, {kv}, {rep}, {dims[0]}, {dims[1]}]}}\n"
                f"%{x}r = reshape(%{x}e) {{shape = [{b}, {h}, {dims[0]}, {dims[1]}]}}\n")
    stmt = (f"%q, %k, %v = split(%x) {{axis = 2, split = {parts}}}\n"
            f"%q4 = reshape(%q) {{shape = [{b}, {s}, {h}, {d}]}}\n%qt = transpose(%q4) {{perm = [0, 2, 1, 3]}}\n"
            f"%k4 = reshape(%k) {{shape = [{b}, {s}, {kv}, {d}]}}\n%v4 = reshape(%v) {{shape = [{b}, {s}, {kv}, {d}]}}\n"
            "%vt = transpose(%v4) {perm = [0, 2, 1, 3]}\n" + repeat("vt", (s, d)))
    if kt_first:
        stmt += "%kt = transpose(%k4) {perm = [0, 2, 3, 1]}\n" + repeat("kt", (d, s)) + "%kk = identity(%ktr)\n"
    else:
        stmt += ("%kt = transpose(%k4) {perm = [0, 2, 1, 3]}\n" + repeat("kt", (s, d)) +
                 "%kk = transpose(%ktr) {perm = [0, 1, 3, 2]}\n")
    stmt += "%sm = matmul(%qt, %kk)\n%sc = mul(%sm, %c)\n"
    if causal:
        stmt += ("%a = where(%t, %sc, %lo)\n%p = softmax(%a) {axis = -1}\n"
                 "%o = matmul(%p, %vtr)\n")
    else:
        stmt += ("%a = add(%sc, %m)\n%p = softmax(%a) {axis = -1}\n"
                 "%n = is_nan(%p)\n%w = where(%n, %z, %p)\n%o = matmul(%w, %vtr)\n")
    return stmt + "%y = transpose(%o) {perm = [0, 2, 1, 3]}"


# tests/lit/codegen/attention-gqa.gir: K of 2 heads through RoPE (a loop kernel of its
# own), then repeated to 6 as V is, a causal where (its constants c and lo as inputs).
ATTN_GQA_ROPE = "\n".join(
    line.strip() for line in open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                               "attention-gqa.gir"))
    if line.startswith("  %") and " = const " not in line)


ATTN_MASKED = attn_masked(2, 16, 3, 8)
ATTN_CAUSAL = attn_causal(40, 2, 10)


# RoPE on 4 heads of 16 of a [2, 8, 64] projection (c and s: cos and sin, [1, 1, 8, 16]).
LOOP_ROPE = ("%r = reshape(%x) {shape = [2, 8, 4, 16]}\n%t = transpose(%r) {perm = [0, 2, 1, 3]}\n"
             "%m = mul(%t, %c)\n%h0, %h1 = split(%t) {axis = -1, split = [8, 8]}\n%n = neg(%h1)\n"
             "%k = concat(%n, %h0) {axis = -1}\n%ms = mul(%k, %s)\n%y = add(%m, %ms)")


def cases():
    """(name, inputs, statement[, atol[, flags]]) for every case (atol: for floats, 1e-5
    unless given; flags: more options for the compile)."""
    rng = None
    named = []

    def seed(key):  # the generator of what is drawn next, seeded by key alone (crc32: stable)
        nonlocal rng
        rng = np.random.default_rng(zlib.crc32(key.encode()))

    def case(name):  # a case's inputs drawn from its own generator: the first thing it evaluates
        seed(name)
        named.append(name)
        return name

    def f(*s):
        return rng.standard_normal(s).astype(np.float32)

    def ints(lo, hi, shape, dt):
        return rng.integers(lo, hi, shape).astype(dt)

    def inf_nan(x):  # rows 3 and 7 with an inf, row 100 with a NaN
        x[3, 5], x[7, 0], x[100, 10] = np.inf, -np.inf, np.nan
        return x

    def exact_tap5(w):  # tap 5 of every weight row exact in TF32: inf times its cut rest is NaN
        w[:, 5] = 0.5
        return w

    edges = [0.0, -0.0, 2.0 ** -10, 3 * 2.0 ** -10, 5 * 2.0 ** -10, 2.0 ** -9, 7.5 * 2.0 ** -9,
             2.0 ** -6, 1.0625, 1.1875, 1.0, 240.0, 248.0, 440.0, 448.0, 449.0, 464.0, 480.0,
             1e6, np.inf, np.nan]
    parts = [1 + i % 3 for i in range(300)]  # split_parts, concat_parts
    seed("f8_probe")
    f8_probe = np.concatenate([np.array(edges), -np.array(edges),
                               rng.uniform(-500, 500, 80), rng.standard_normal(64) * 0.05,
                               np.exp2(rng.uniform(-12, 9, 54))]).astype(np.float32)

    seed("x, m")
    x, m = f(2, 4, 9, 10), f(5, 7)
    seed("mi, i8")
    mi, i8 = ints(-50, 50, (3, 4, 6), np.int32), ints(-100, 100, (2, 3, 7, 7), np.int8)
    seed("d5")
    d5 = rng.standard_normal((1, 2, 5, 5, 4))
    xn = x.copy()
    xn[0, 1, 2, 3], xn[1, 2, 0, 0] = np.nan, -np.inf
    seed("mt")
    mt = f(6, 300)
    mt[0, 5] = mt[0, 100] = np.nan
    mt[1, 3:9], mt[2, :] = 1.0, 0.0
    seed("mh")
    mh = f(5, 7)
    mh[1, 2], mh[2, :] = np.nan, 1.0
    seed("ix")
    ix = ints(-10, 10, (2, 4, 9, 3), np.int64)
    seed("colnan")
    colnan = f(2, 9, 11, 20)
    colnan[0, 3, 4, 7], colnan[1, 8, 10, 19], colnan[1, 0, 0, 0] = np.nan, np.nan, np.inf
    seed("colnan2")
    colnan2 = f(6, 5, 9, 12)
    colnan2[2, 1, 4, 5], colnan2[0, 3, 0, 11] = np.nan, -np.inf
    seed("gridc")
    gridc = rng.uniform(-1.6, 1.6, (2, 5, 6, 2)).astype(np.float32)
    gridc[0, 0, 0] = [0, 1]  # exact: the border, half-pixel ties
    gridc[0, 0, 1] = [-1, 0.5]
    gridc[1, 2, 3, 0] = np.nan
    rois = np.array([[0, 0, 9, 8], [1.5, 2.2, 7.3, 6.1], [-3, -2, 4, 30], [5, 5, 5.2, 5.1], [8, 1, 2, 7]], np.float32)
    bn = lambda *s: {"s": f(*s), "b": f(*s), "m": f(*s), "v": np.abs(f(*s))}  # noqa: E731
    seed("amask")
    amask = np.where(rng.random((2, 1, 1, 16)) < 0.3, -np.inf, 0).astype(np.float32)
    amask[1] = -np.inf  # the second batch entry's rows: all masked
    cmask = np.tril(np.ones((40, 40), bool)).reshape(1, 1, 40, 40)
    seed("masked_in")
    masked_in = {"q": f(2, 16, 24), "k": f(2, 16, 24), "v": f(2, 16, 24), "m": amask,
                 "z": np.float32(0)}
    seed("causal_in")
    causal_in = {"x": f(1, 40, 3 * 20), "t": cmask, "c": np.float32(0.31622776),
                 "lo": np.float32(-3.4028235e+38)}
    seed("tmask")
    tmask = np.where(rng.random((2, 1, 1, 70)) < 0.3, -np.inf, 0).astype(np.float32)
    tmask[1] = -np.inf
    seed("masked_tc_in")
    masked_tc_in = {"q": f(2, 70, 32), "k": f(2, 70, 32), "v": f(2, 70, 32), "m": tmask,
                    "z": np.float32(0)}
    seed("causal_tc_in")
    causal_tc_in = {"x": f(1, 100, 100), "t": np.tril(np.ones((100, 100), bool)).reshape(1, 1, 100, 100),
                    "c": np.float32(0.25), "lo": np.float32(-3.4028235e+38)}
    seed("lmask")
    lmask = np.where(rng.random((1, 1, 1, 300)) < 0.3, -np.inf, 0).astype(np.float32)
    lmask[..., 290:] = -10000.0  # a padded tail, masked by a finite value
    seed("long_masked_in")
    long_masked_in = {"q": f(1, 300, 32), "k": f(1, 300, 32), "v": f(1, 300, 32), "m": lmask,
                      "z": np.float32(0)}
    seed("omask")
    omask = np.where(rng.random((2, 1, 1100)) < 0.3, -np.inf, 0).astype(np.float32)
    omask[1] = -np.inf  # a fully masked head: the softmax's 0 / 0
    seed("online_in")
    online_in = {"q": f(2, 20, 16), "k": f(2, 16, 1100), "v": f(2, 1100, 32), "m": omask}
    seed("fmask")
    fmask = np.where(rng.random((2, 1, 1100)) < 0.3, -3.3e38, 0).astype(np.float32)
    fmask[1] = -3.3e38  # every key hidden by a finite mask: scores of bf16's -3.29e38, equal
    seed("long_causal_in")
    long_causal_in = {"x": f(1, 300, 96), "t": np.tril(np.ones((300, 300), bool)).reshape(1, 1, 300, 300),
                      "c": np.float32(0.25), "lo": np.float32(-3.4028235e+38)}

    def gqa_causal_in(b, s, h, kv, d):
        return {"x": f(b, s, (h + 2 * kv) * d), "c": np.float32(1 / np.sqrt(d)),
                "t": np.tril(np.ones((s, s), bool)).reshape(1, 1, s, s),
                "lo": np.float32(-3.4028235e+38)}

    def gqa_masked_in(b, s, h, kv, d):
        gm = np.where(rng.random((b, 1, 1, s)) < 0.3, -np.inf, 0).astype(np.float32)
        gm[-1] = -np.inf  # the last batch entry's rows: all masked
        return {"x": f(b, s, (h + 2 * kv) * d), "c": np.float32(1 / np.sqrt(d)), "m": gm,
                "z": np.float32(0)}
    all_cases = [
        # nn.c
        (case("conv"), {"x": x, "w": f(6, 2, 3, 3), "b": f(6)}, "%y = conv(%x, %w, %b) {strides = [2, 3], pads = [1, 0, 2, 1], dilations = [2, 1], group = 2}"),
        (case("conv_depthwise"), {"x": x, "w": f(4, 1, 3, 3)}, "%y = conv(%x, %w) {pads = [1, 1, 1, 1], group = 4}"),
        (case("conv_1d"), {"x": f(2, 4, 11), "w": f(4, 2, 3), "b": f(4)}, "%y = conv(%x, %w, %b) {group = 2, pads = [1, 2], strides = [2]}"),
        (case("conv_3d_f64"), {"x": d5, "w": rng.standard_normal((2, 2, 3, 3, 2))}, "%y = conv(%x, %w) {pads = [1, 0, 1, 1, 0, 1]}"),
        # channels last ([N, H, W, C], w [M, KH, KW, C/group]): the direct kernel, pools
        (case("conv_channels_last"), {"x": f(2, 9, 10, 4), "w": f(6, 3, 3, 2), "b": f(6)},
         "%y = conv(%x, %w, %b) {strides = [2, 3], pads = [1, 0, 2, 1], dilations = [2, 1], group = 2, channels_last = 1}"),
        (case("conv_depthwise_channels_last"), {"x": f(2, 9, 10, 4), "w": f(4, 3, 3, 1)},
         "%y = conv(%x, %w) {pads = [1, 1, 1, 1], group = 4, channels_last = 1}"),
        # depthwise in channels last: a block per 32 channels (a second chunk of 8 live),
        # their taps' weights in shared memory; 1-d too
        (case("conv_depthwise_channels_last_wide"), {"x": f(2, 7, 9, 40), "w": f(40, 5, 3, 1), "b": f(40)},
         "%y = conv(%x, %w, %b) {strides = [2, 1], pads = [2, 1, 2, 1], dilations = [1, 2], group = 40, channels_last = 1}"),
        (case("conv_depthwise_1d_channels_last"), {"x": f(2, 11, 36), "w": f(36, 3, 1)},
         "%y = conv(%x, %w) {pads = [1, 1], group = 36, channels_last = 1}"),
        # grouped in channels last, each group's 8 input channels two 16-byte loads a tap
        (case("conv_grouped_channels_last_vec"), {"x": f(2, 9, 10, 16), "w": f(8, 3, 3, 8), "b": f(8)},
         "%y = conv(%x, %w, %b) {strides = [2, 1], pads = [1, 0, 2, 1], dilations = [1, 2], group = 2, channels_last = 1}"),
        (case("max_pool_channels_last"), {"x": f(2, 9, 10, 4)},
         "%y = max_pool(%x) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], channels_last = 1}"),
        (case("average_pool_channels_last"), {"x": f(2, 9, 10, 4)},
         "%y = average_pool(%x) {kernel_shape = [2, 3], pads = [0, 1, 1, 1], count_include_pad = 1, channels_last = 1}"),
        (case("global_average_pool_channels_last"), {"x": f(2, 9, 10, 4)},
         "%y = global_average_pool(%x) {channels_last = 1}"),
        (case("conv_transpose"), {"x": x, "w": f(4, 3, 3, 3), "b": f(6)}, "%y = conv_transpose(%x, %w, %b) {strides = [2, 1], pads = [0, 1, 1, 0], output_padding = [1, 0], group = 2}"),
        (case("conv_transpose_dil"), {"x": f(1, 2, 4, 5), "w": f(2, 3, 2, 3)}, "%y = conv_transpose(%x, %w) {strides = [3, 2], dilations = [2, 1], pads = [1, 1, 0, 2]}"),
        (case("max_pool_ceil"), {"x": x}, "%y = max_pool(%x) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], ceil_mode = 1}"),
        (case("max_pool_nan"), {"x": xn}, "%y = max_pool(%x) {kernel_shape = [2, 3], dilations = [2, 1]}"),
        (case("max_pool_i8"), {"x": i8}, "%y = max_pool(%x) {kernel_shape = [2, 2], dilations = [2, 1], pads = [1, 0, 0, 1]}"),
        (case("average_pool_include_pad"), {"x": x}, "%y = average_pool(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], count_include_pad = 1}"),
        (case("average_pool_ceil"), {"x": x}, "%y = average_pool(%x) {kernel_shape = [3, 2], strides = [2, 2], pads = [1, 0, 1, 1], ceil_mode = 1}"),
        (case("average_pool_ceil_include_pad"), {"x": x}, "%y = average_pool(%x) {kernel_shape = [3, 2], strides = [2, 2], pads = [1, 0, 1, 1], ceil_mode = 1, count_include_pad = 1}"),
        (case("average_pool_3d"), {"x": d5}, "%y = average_pool(%x) {kernel_shape = [2, 2, 2]}"),
        (case("batch_norm"), {"x": x, **bn(4)}, "%y = batch_norm(%x, %s, %b, %m, %v) {epsilon = 0.001}"),
        (case("batch_norm_vectors"), {"x": f(2, 4, 4, 4), **bn(4)}, "%y = batch_norm(%x, %s, %b, %m, %v)"),
        (case("batch_norm_2d"), {"x": f(3, 4), **bn(4)}, "%y = batch_norm(%x, %s, %b, %m, %v)"),
        (case("lrn"), {"x": x}, "%y = lrn(%x) {size = 3}"),
        (case("lrn_even"), {"x": x}, "%y = lrn(%x) {size = 2, alpha = 0.001, beta = 0.5, bias = 2}"),
        (case("resize_nearest_floor"), {"x": x}, '%y = resize(%x) {sizes = [2, 4, 18, 5], mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"}'),
        (case("resize_nearest"), {"x": x}, '%y = resize(%x) {sizes = [2, 4, 20, 7], mode = "nearest"}'),
        (case("resize_nearest_i8"), {"x": i8}, '%y = resize(%x) {sizes = [2, 3, 3, 11], mode = "nearest", nearest_mode = "round_prefer_ceil", coordinate_transformation_mode = "half_pixel_symmetric"}'),
        (case("resize_nearest_ceil"), {"x": x}, '%y = resize(%x) {sizes = [2, 4, 17, 23], mode = "nearest", nearest_mode = "ceil", coordinate_transformation_mode = "align_corners"}'),
        (case("resize_linear_align"), {"x": x}, '%y = resize(%x) {sizes = [2, 4, 4, 20], mode = "linear", coordinate_transformation_mode = "align_corners"}'),
        (case("resize_linear"), {"x": x}, '%y = resize(%x) {sizes = [2, 4, 13, 25], mode = "linear"}'),
        (case("resize_linear_every_dim"), {"x": x}, '%y = resize(%x) {sizes = [3, 2, 6, 15], mode = "linear"}'),
        (case("resize_cubic_exclude"), {"x": x}, '%y = resize(%x) {sizes = [2, 4, 16, 12], mode = "cubic", exclude_outside = 1}'),
        (case("resize_cubic"), {"x": x}, '%y = resize(%x) {sizes = [2, 4, 5, 7], mode = "cubic", cubic_coeff_a = -0.5, coordinate_transformation_mode = "asymmetric"}'),
        (case("resize_scales"), {"x": x}, '%y = resize(%x) {sizes = [2, 4, 13, 10], scales = [1, 1, 1.5, 1], mode = "linear", coordinate_transformation_mode = "pytorch_half_pixel"}'),
        (case("resize_scales_align"), {"x": x}, '%y = resize(%x) {sizes = [2, 4, 13, 10], scales = [1, 1, 1.5, 1], mode = "linear", coordinate_transformation_mode = "align_corners"}'),
        (case("resize_symmetric"), {"x": x}, '%y = resize(%x) {sizes = [2, 4, 6, 15], mode = "linear", coordinate_transformation_mode = "half_pixel_symmetric"}'),
        (case("grid_sample"), {"x": x, "g": gridc}, "%y = grid_sample(%x, %g)"),
        (case("grid_sample_nearest_border"), {"x": x, "g": gridc}, '%y = grid_sample(%x, %g) {mode = "nearest", padding_mode = "border"}'),
        (case("grid_sample_cubic_reflect_align"), {"x": x, "g": gridc}, '%y = grid_sample(%x, %g) {mode = "bicubic", padding_mode = "reflection", align_corners = 1}'),
        (case("grid_sample_linear_reflect"), {"x": x, "g": gridc}, '%y = grid_sample(%x, %g) {padding_mode = "reflection"}'),
        (case("grid_sample_nearest_i8_reflect"), {"x": i8, "g": gridc}, '%y = grid_sample(%x, %g) {mode = "nearest", padding_mode = "reflection"}'),
        (case("grid_sample_3d"), {"x": d5, "g": rng.uniform(-1.4, 1.4, (1, 2, 3, 2, 3))}, '%y = grid_sample(%x, %g) {mode = "nearest"}'),
        (case("grid_sample_3d_linear_border"), {"x": d5, "g": rng.uniform(-1.4, 1.4, (1, 2, 3, 2, 3))}, '%y = grid_sample(%x, %g) {padding_mode = "border", align_corners = 1}'),
        (case("grid_sample_1d"), {"x": f(2, 3, 7), "g": rng.uniform(-3, 3, (2, 9, 1)).astype(np.float32)}, '%y = grid_sample(%x, %g) {mode = "cubic"}'),
        (case("roi_align"), {"x": x, "r": rois, "b": np.array([0, 1, 1, 0, 1], np.int64)}, "%y = roi_align(%x, %r, %b) {output_height = 3, output_width = 2, spatial_scale = 0.5}"),
        (case("roi_align_max_ratio"), {"x": x, "r": rois, "b": np.array([0, 1, 1, 0, 1], np.int32)}, '%y = roi_align(%x, %r, %b) {mode = "max", output_height = 2, output_width = 4, sampling_ratio = 2, coordinate_transformation_mode = "output_half_pixel"}'),
        (case("roi_align_f64"), {"x": rng.standard_normal((1, 2, 6, 5)), "r": rois.astype(np.float64)[:3], "b": np.array([0, 0, 0], np.int64)}, "%y = roi_align(%x, %r, %b) {output_height = 2, output_width = 2}"),
        # reduce.c
        (case("global_average_pool"), {"x": x}, "%y = global_average_pool(%x)"),
        (case("global_average_pool_block"), {"x": f(2, 3, 50, 50)}, "%y = global_average_pool(%x)"),
        # column reductions (the innermost dim kept) are a family: column vectors and the
        # column split, each variant in a pass. Few outputs of many elements (40 outputs:
        # 10 vectors of 4 on 16 lanes; the split's second block of 32 with 8 live); two
        # passes (log-sum-exp), an argmax's pairs
        (case("global_average_pool_column_split"), {"x": f(1, 20, 30, 40)},
         "%y = global_average_pool(%x) {channels_last = 1}"),
        (case("reduce_log_sum_exp_column_split"), {"x": f(70, 37)},
         "%y = reduce_log_sum_exp(%x) {axes = [0]}"),
        (case("argmax_column_split"), {"x": f(100, 5)}, "%y = argmax(%x) {axis = 0}"),
        # and split further over the blocks of a cluster (sm_90), partials summed in rank
        # order: 2 blocks of 8 lanes a group for the log-sum-exp's 37 columns, 8 of 32
        # lanes, and the column split's 4; the argmax's 2 (the column split's)
        (case("reduce_log_sum_exp_column_cluster"), {"x": f(600, 37)},
         "%y = reduce_log_sum_exp(%x) {axes = [0]}"),
        (case("argmax_column_cluster"), {"x": f(300, 5)}, "%y = argmax(%x) {axis = 0}"),
        # column vectors: 16 bytes of columns a load (8 bf16), 4 lanes a row of 32 channels,
        # a warp on 8 rows, a cluster of 4 blocks on a batch entry's 2080 pixels
        (case("bf16_global_average_pool_vectors"), {"x": f(1, 40, 52, 32)},
         "%y = global_average_pool(%x) {channels_last = 1}"),
        # batch 1: a group's rows over a cluster of 8 leave SMs idle, so fewer lanes a
        # row too (a lane a row of 8 channels: 4 groups, each over a cluster of 5)
        (case("bf16_global_average_pool_vectors_batch1"), {"x": f(1, 100, 100, 32)},
         "%y = global_average_pool(%x) {channels_last = 1}"),
        # 20 channels: 4 halves a load (no multiple of 8), 5 of 8 lanes live; NaN wins
        (case("fp16_global_max_pool_vectors_nan"), {"x": colnan}, "%y = global_max_pool(%x) {channels_last = 1}"),
        # 144 channels: 36 vectors of 4 in groups of 32 lanes (the second 4 live) or of 8 (5
        # groups, the last half live); 35 rows (odd) over the block's slots
        (case("global_average_pool_vectors_groups"), {"x": f(2, 5, 7, 144)},
         "%y = global_average_pool(%x) {channels_last = 1}"),
        (case("global_average_pool_vectors_sm80"), {"x": f(1, 40, 52, 32)},
         "%y = global_average_pool(%x) {channels_last = 1}", 1e-5, ["--arch=sm_80"]),
        # over a non-innermost axis: 30 columns (2 a load), 37 rows; rows and outer
        # positions of two dims each (the kept dims between the reduced ones)
        (case("reduce_sum_columns_odd"), {"x": f(37, 3, 10)}, "%y = reduce_sum(%x) {axes = [0]}"),
        (case("reduce_min_columns_interleaved_nan"), {"x": colnan2}, "%y = reduce_min(%x) {axes = [0, 2]}"),
        (case("reduce_mean_columns_f64"), {"x": rng.standard_normal((40, 2, 6))}, "%y = reduce_mean(%x) {axes = [0]}"),
        (case("reduce_l2_columns"), {"x": f(3, 25, 2, 24)}, "%y = reduce_l2(%x) {axes = [1, 2]}"),
        (case("bf16_reduce_l1_columns"), {"x": f(2, 45, 24)}, "%y = reduce_l1(%x) {axes = [1]}"),
        (case("fp16_reduce_sum_square_columns"), {"x": f(77, 40)}, "%y = reduce_sum_square(%x) {axes = [0]}"),
        # integers, wrapping: 4 i32 a load (accumulated as i64), 2 i64, 1 u8 (33 columns:
        # 32 lanes a row, or 8 in 5 groups)
        (case("reduce_sum_columns_i32"), {"x": ints(-50, 50, (90, 12), np.int32)}, "%y = reduce_sum(%x) {axes = [0]}"),
        (case("reduce_prod_columns_i64"), {"x": ints(-3, 4, (20, 2, 6), np.int64)}, "%y = reduce_prod(%x) {axes = [0, 1]}"),
        (case("reduce_max_columns_u8"), {"x": ints(0, 255, (64, 33), np.uint8)}, "%y = reduce_max(%x) {axes = [0]}"),
        (case("reduce_min_columns_i8"), {"x": ints(-100, 100, (3, 50, 16), np.int8)}, "%y = reduce_min(%x) {axes = [1]}"),
        # argmax's ties go to the first row (the last with select_last_index) across the
        # lanes, warps and blocks that share a column
        (case("argmax_columns_ties"), {"x": ints(0, 3, (70, 2, 8), np.int32).astype(np.float32)}, "%y = argmax(%x) {axis = 0}"),
        (case("argmin_columns_last_i32"), {"x": ints(0, 3, (50, 12), np.int32)}, "%y = argmin(%x) {axis = 0, select_last_index = 1}"),
        (case("bf16_argmax_columns"), {"x": f(2, 30, 24)}, "%y = argmax(%x) {axis = 1}"),
        # log-sum-exp: the max combined over a cluster of 2 and shared back, then the sums
        (case("fp16_reduce_log_sum_exp_columns_cluster"), {"x": f(2100, 16)}, "%y = reduce_log_sum_exp(%x) {axes = [0]}"),
        (case("global_max_pool"), {"x": xn}, "%y = global_max_pool(%x)"),
        (case("global_max_pool_i8"), {"x": i8}, "%y = global_max_pool(%x)"),
        (case("instance_norm"), {"x": x, "s": f(4), "b": f(4)}, "%y = instance_norm(%x, %s, %b)"),
        (case("instance_norm_block"), {"x": f(2, 3, 50, 50), "s": f(3), "b": f(3)}, "%y = instance_norm(%x, %s, %b) {epsilon = 0.01}"),
        (case("hardmax"), {"x": mh}, "%y = hardmax(%x)"),
        (case("hardmax_column"), {"x": f(2, 4, 6)}, "%y = hardmax(%x) {axis = 1}"),
        (case("hardmax_block"), {"x": f(3, 3000)}, "%y = hardmax(%x)"),
        # scan.c
        (case("cumsum_row"), {"x": f(5, 77)}, "%y = cumsum(%x) {axis = 1}"),
        (case("cumsum_row_exclusive_reverse"), {"x": f(3, 70)}, "%y = cumsum(%x) {axis = 1, exclusive = 1, reverse = 1}"),
        (case("cumsum_row_i64_wraps"), {"x": ints(-2**62, 2**62, (4, 45), np.int64)}, "%y = cumsum(%x) {axis = -1, exclusive = 1}"),
        (case("cumsum_row_reverse"), {"x": ints(-99, 99, (20, 33), np.int32)}, "%y = cumsum(%x) {axis = 1, reverse = 1}"),
        (case("cumsum_column"), {"x": mi}, "%y = cumsum(%x) {axis = 1, exclusive = 1, reverse = 1}"),
        (case("cumsum_column_f64"), {"x": d5}, "%y = cumsum(%x) {axis = 2, reverse = 1}"),
        (case("topk"), {"x": m}, "%v, %i = topk(%x) {k = 3}"),
        (case("topk_nan_ties"), {"x": mt}, "%v, %i = topk(%x) {k = 20}"),
        (case("topk_smallest_all"), {"x": mt}, "%v, %i = topk(%x) {k = 300, largest = 0}"),
        (case("topk_i32_axis"), {"x": mi}, "%v, %i = topk(%x) {k = 2, axis = 1, largest = 0}"),
        (case("topk_i64_ties"), {"x": ints(-3, 3, (40, 11), np.int64)}, "%v, %i = topk(%x) {k = 11}"),
        (case("lp_norm_1"), {"x": f(4, 9)}, "%y = lp_norm(%x) {p = 1}"),
        (case("lp_norm_2_column"), {"x": x}, "%y = lp_norm(%x) {axis = 1}"),
        (case("lp_norm_zero"), {"x": np.zeros((3, 5), np.float32)}, "%y = lp_norm(%x)"),
        (case("mean_variance_norm"), {"x": x}, "%y = mean_variance_norm(%x)"),
        (case("mean_variance_norm_axes"), {"x": x}, "%y = mean_variance_norm(%x) {axes = [1]}"),
        (case("mean_variance_norm_all"), {"x": f(3, 700)}, "%y = mean_variance_norm(%x) {axes = []}"),
        # loss.c
        (case("nll_loss_none"), {"x": f(6, 5), "t": np.array([0, 4, 2, 2, 1, 3], np.int64), "w": np.abs(f(5))}, "%y = nll_loss(%x, %t, %w) {reduction = \"none\", ignore_index = 2}"),
        (case("nll_loss_mean"), {"x": f(300, 5), "t": ints(0, 5, (300,), np.int32), "w": np.abs(f(5))}, "%y = nll_loss(%x, %t, %w) {ignore_index = 1}"),
        (case("nll_loss_sum_spatial"), {"x": f(2, 4, 3, 5), "t": ints(0, 4, (2, 3, 5), np.int64)}, "%y = nll_loss(%x, %t) {reduction = \"sum\"}"),
        (case("softmax_cross_entropy"), {"x": f(4, 6, 3), "t": ints(0, 6, (4, 3), np.int64)}, "%l, %p = softmax_cross_entropy(%x, %t)"),
        (case("softmax_cross_entropy_none_f64"), {"x": rng.standard_normal((5, 3)), "t": np.array([0, 2, 1, 1, 0], np.int32), "w": rng.random(3)}, "%l, %p = softmax_cross_entropy(%x, %t, %w) {reduction = \"none\", ignore_index = 0}"),
        # gemm.c
        (case("matmul_i32_batched"), {"a": ints(-9, 9, (3, 2, 5), np.int32), "b": ints(-9, 9, (5, 4), np.int32)}, "%y = matmul(%a, %b)"),
        (case("matmul_i64_broadcast"), {"a": ints(-2**40, 2**40, (2, 1, 3, 4), np.int64), "b": ints(-2**40, 2**40, (3, 4, 2), np.int64)}, "%y = matmul(%a, %b)"),
        (case("matmul_u8_vector"), {"a": ints(0, 255, (6,), np.uint8), "b": ints(0, 255, (2, 6, 3), np.uint8)}, "%y = matmul(%a, %b)"),
        (case("det"), {"x": f(3, 4, 4)}, "%y = det(%x)"),
        (case("det_singular_f64"), {"x": np.array([[[1, 2, 3], [2, 4, 6], [0, 1, 5]], [[0, 1, 0], [1, 0, 0], [0, 0, 2]]], np.float64)}, "%y = det(%x)"),
        # index.c
        (case("trilu"), {"x": m}, "%y = trilu(%x) {k = 1}"),
        (case("trilu_lower"), {"x": mi}, "%y = trilu(%x) {upper = 0, k = -2}"),
        (case("trilu_huge_k"), {"x": mi}, "%y = trilu(%x) {upper = 0, k = -9000000000}"),
        (case("tile"), {"x": f(2, 4, 6)}, "%y = tile(%x) {repeats = [2, 1, 3]}"),
        (case("tile_ones"), {"x": f(1, 3, 2)}, "%y = tile(%x) {repeats = [4, 2, 1]}"),
        (case("gather_elements"), {"x": x, "i": ix}, "%y = gather_elements(%x, %i) {axis = 3}"),
        (case("gather_elements_i32"), {"x": m, "i": ints(-5, 5, (2, 3), np.int32)}, "%y = gather_elements(%x, %i) {axis = 0}"),
        (case("gather_nd"), {"x": x, "i": np.array([[1, -2], [0, 3]], np.int64)}, "%y = gather_nd(%x, %i)"),
        (case("gather_nd_batch"), {"x": mi, "i": np.array([[[1], [3]], [[0], [-1]], [[2], [2]]], np.int32)}, "%y = gather_nd(%x, %i) {batch_dims = 1}"),
        (case("gather_nd_batch_pairs"), {"x": f(2, 3, 4, 5), "i": np.array([[[1, 2], [0, 0]], [[2, 3], [-1, -1]]], np.int64)}, "%y = gather_nd(%x, %i) {batch_dims = 1}"),
        (case("scatter_elements"), {"x": x, "i": ix, "u": f(2, 4, 9, 3)}, "%y = scatter_elements(%x, %i, %u) {axis = 3}"),
        (case("scatter_elements_max"), {"x": x, "i": ix, "u": f(2, 4, 9, 3)}, '%y = scatter_elements(%x, %i, %u) {axis = 3, reduction = "max"}'),
        (case("scatter_elements_add_i32"), {"x": mi, "i": ints(-4, 4, (3, 3, 6), np.int64), "u": ints(-50, 50, (3, 3, 6), np.int32)}, '%y = scatter_elements(%x, %i, %u) {axis = 1, reduction = "add"}'),
        (case("scatter_elements_mul"), {"x": m, "i": ints(-5, 5, (3, 7), np.int32), "u": f(3, 7)}, '%y = scatter_elements(%x, %i, %u) {axis = 0, reduction = "mul"}'),
        (case("scatter_nd"), {"x": x, "i": np.array([[1, 2], [0, 0]], np.int64), "u": f(2, 9, 10)}, "%y = scatter_nd(%x, %i, %u)"),
        (case("scatter_nd_mul"), {"x": x, "i": np.array([[1, 2], [1, 2], [0, -1]], np.int64), "u": f(3, 9, 10)}, '%y = scatter_nd(%x, %i, %u) {reduction = "mul"}'),
        (case("scatter_nd_min"), {"x": mi, "i": np.array([[1, 2, 3], [1, 2, 3], [0, 0, 0], [2, 3, -1]], np.int64), "u": ints(-50, 50, (4,), np.int32)}, '%y = scatter_nd(%x, %i, %u) {reduction = "min"}'),
        (case("cast_nan_to_int"), {"x": np.array([np.nan, -np.inf, np.inf, 3e9, -3e9, 2.7, -2.7], np.float32)}, '%y = cast(%x) {to = "i64"}'),
        (case("one_hot"), {"i": np.array([[0, -1, 4], [7, -6, 2]], np.int64), "v": np.array([-1.5, 2], np.float32)}, "%y = one_hot(%i, %v) {depth = 5}"),
        (case("one_hot_float_index"), {"i": np.array([0.5, -1.7, 2.9, 3.0], np.float32), "v": np.array([3, 9], np.int8)}, "%y = one_hot(%i, %v) {depth = 3, axis = 0}"),
        (case("one_hot_axis"), {"i": ints(-4, 4, (2, 3, 2), np.int32), "v": np.array([0, 1], np.float64)}, "%y = one_hot(%i, %v) {depth = 4, axis = 1}"),
        (case("depth_to_space"), {"x": x}, "%y = depth_to_space(%x) {blocksize = 2}"),
        (case("depth_to_space_crd"), {"x": x}, '%y = depth_to_space(%x) {blocksize = 2, mode = "CRD"}'),
        (case("space_to_depth"), {"x": f(2, 3, 6, 4)}, "%y = space_to_depth(%x) {blocksize = 2}"),
        (case("reverse_sequence"), {"x": f(5, 4, 3), "l": np.array([5, 0, 2, 3], np.int64)}, "%y = reverse_sequence(%x, %l) {batch_axis = 1, time_axis = 0}"),
        (case("max_unpool"), {"x": f(1, 2, 2, 3), "i": np.array([[[[0, 3, 17], [6, 22, 11]], [[24, 31, 39], [40, 47, 44]]]], np.int64)}, "%y = max_unpool(%x, %i) {kernel_shape = [2, 2], strides = [2, 2]}"),
        (case("max_unpool_output_shape"), {"x": f(1, 1, 2, 2), "i": np.array([[[[0, 5], [10, 15]]]], np.int32)}, "%y = max_unpool(%x, %i) {kernel_shape = [2, 2], strides = [2, 2], output_shape = [1, 1, 5, 6]}"),
        (case("reverse_sequence_batch_first"), {"x": mi, "l": np.array([4, 0, 2], np.int32)}, "%y = reverse_sequence(%x, %l) {batch_axis = 0, time_axis = 1}"),
        # fuse groups: one kernel each (run_case checks), broadcast and vector paths
        (case("fused_bias_gelu"), {"x": x, "b": f(10)}, "%t = add(%x, %b)\n%y = gelu(%t)"),
        (case("fused_erf_gelu"), {"x": x, "h": np.array(0.5, np.float32), "r": np.array(1.4142135, np.float32), "o": np.array(1, np.float32)},
         "%d = div(%x, %r)\n%e = erf(%d)\n%a = add(%e, %o)\n%m = mul(%x, %a)\n%y = mul(%m, %h)"),
        # an interior value read twice (the bias add, by div and mul): one register
        (case("fused_bias_erf_gelu"), {"x": x, "b": f(10), "r": np.array(1.4142135, np.float32), "o": np.array(1, np.float32)},
         "%h = add(%x, %b)\n%d = div(%h, %r)\n%e = erf(%d)\n%a = add(%e, %o)\n%y = mul(%h, %a)"),
        (case("fused_vector_chain"), {"x": x, "z": f(2, 4, 9, 10)}, "%a = mul(%x, %z)\n%b = sigmoid(%a)\n%y = sub(%b, %z)"),
        # vectors with broadcasting: a bias along the rows read as vectors, a scalar, a
        # row's value for a whole vector, a middle dim broadcast
        (case("fused_bias_gelu_rows"), {"x": f(6, 32), "b": f(32)}, "%t = add(%x, %b)\n%y = gelu(%t)"),
        (case("bf16_bias_erf_gelu_rows"), {"x": f(6, 64), "b": f(64), "r": np.array(1.4142135, np.float32), "o": np.array(1, np.float32)},
         "%h = add(%x, %b)\n%d = div(%h, %r)\n%e = erf(%d)\n%a = add(%e, %o)\n%y = mul(%h, %a)"),
        (case("fused_column_broadcast"), {"x": f(4, 8), "c": f(4, 1)}, "%a = sub(%x, %c)\n%y = mul(%a, %a)"),
        (case("fused_middle_broadcast"), {"x": f(2, 3, 16), "z": f(2, 1, 16)}, "%a = mul(%x, %z)\n%y = add(%a, %x)"),
        (case("fused_compare_where_cast"), {"x": xn, "z": f(2, 4, 9, 10)}, '%c = greater(%x, %z)\n%w = where(%c, %x, %z)\n%y = cast(%w) {to = "i32"}'),
        (case("fused_int_square"), {"i": mi, "j": ints(-9, 9, (4, 6), np.int32)}, "%a = add(%i, %j)\n%y = mul(%a, %a)"),
        # a convolution with its epilogue: the residual add and the activation in its store
        (case("fused_conv_residual_relu"), {"x": x, "w": f(4, 4, 3, 3), "b": f(4), "r": f(2, 4, 9, 10)},
         "%c = conv(%x, %w, %b) {pads = [1, 1, 1, 1]}\n%a = add(%c, %r)\n%y = relu(%a)"),
        (case("fused_conv_bias_clip"), {"x": x, "w": f(4, 1, 3, 3), "s": f(4, 1, 1)},
         "%c = conv(%x, %w) {pads = [1, 1, 1, 1], group = 4}\n%a = mul(%c, %s)\n%y = clip(%a) {min = 0, max = 6}"),
        # a softmax with the exporters' NaN masking in its store: a warp per row, a block per row
        (case("fused_softmax_nan_mask"), {"x": xn, "z": np.array(0, np.float32)},
         "%p = softmax(%x)\n%n = is_nan(%p)\n%y = where(%n, %z, %p)"),
        (case("fused_softmax_block_scale"), {"x": mt, "s": f(300)}, "%p = softmax(%x)\n%y = mul(%p, %s)"),
        # attention's scaled Q and K^T: transposes with the scale in their store
        (case("fused_transpose_strided_scale"), {"x": x, "s": np.array(0.25, np.float32)},
         "%t = transpose(%x) {perm = [0, 2, 1, 3]}\n%y = mul(%t, %s)"),
        # (a tiled transpose spreads its tiles over grid.y too, which the emulator's grid
        # does not: dims of at most 32 keep it to one tile there)
        (case("fused_transpose_tiled_scale"), {"x": f(2, 3, 30, 20), "s": np.array(0.25, np.float32)},
         "%t = transpose(%x) {perm = [0, 1, 3, 2]}\n%y = mul(%t, %s)"),
        # loop groups (fuse.c's loop_groups): pointwise nodes and nodes that only remap
        # indices, each element computed from its index vector. RoPE as the exporters
        # write it: x * cos + concat(-x[.., d/2:], x[.., :d/2]) * sin, x the heads of a
        # projection's output (a reshape and a transpose), the halves a split
        (case("fused_loop_rope"), {"x": f(2, 8, 64), "c": f(1, 1, 8, 16), "s": f(1, 1, 8, 16)}, LOOP_ROPE),
        # GQA's repeat_kv: 2 key/value heads expanded to 6 and read as heads (the expand
        # joins the kernel that makes its input; the reshape after it is an alias)
        (case("fused_loop_expand_heads"), {"x": f(1, 2, 5, 4)},
         "%a = neg(%x)\n%u = unsqueeze(%a) {axes = [2]}\n"
         "%e = expand(%u) {shape = [1, 2, 3, 5, 4]}\n%y = reshape(%e) {shape = [1, 6, 5, 4]}"),
        # the same read on as heads inside the group: the reshape merges an expanded dim
        (case("fused_loop_expand_reshape"), {"x": f(1, 2, 5, 4), "w": f(4)},
         "%a = neg(%x)\n%u = unsqueeze(%a) {axes = [2]}\n"
         "%e = expand(%u) {shape = [1, 2, 3, 5, 4]}\n%r = reshape(%e) {shape = [1, 6, 5, 4]}\n"
         "%y = mul(%r, %w)"),
        # a concat of three inputs (a branch each): slices with a step of 3 and of -2, and
        # an exp, the last one scaled along the concat's axis
        (case("fused_loop_concat_slices"), {"x": f(4, 12), "z": f(4, 2), "w": f(12)},
         "%a = slice(%x) {starts = [1], ends = [12], axes = [1], steps = [3]}\n"
         "%b = slice(%x) {starts = [-1], ends = [-13], axes = [1], steps = [-2]}\n"
         "%r = relu(%b)\n%c = exp(%z)\n%k = concat(%a, %r, %c) {axis = 1}\n%y = mul(%k, %w)"),
        # a reshape that merges dims, a transpose, one that splits them again, between
        # computed values; a gather of one constant index through a transpose
        (case("fused_loop_reshapes"), {"x": f(2, 3, 4, 5), "z": f(4, 5, 2, 3)},
         "%a = sigmoid(%x)\n%r = reshape(%a) {shape = [6, 20]}\n%t = transpose(%r) {perm = [1, 0]}\n"
         "%r2 = reshape(%t) {shape = [4, 5, 2, 3]}\n%y = mul(%r2, %z)"),
        # SwiGLU's halves of one projection: a pointwise kernel reading both through views
        # (codegen's loop_views), as vectors
        (case("fused_loop_split_halves"), {"x": f(4, 3, 32)},
         "%a, %b = split(%x) {axis = -1, split = [16, 16]}\n%s = silu(%a)\n%y = mul(%s, %b)"),
        # ShuffleNet's channel shuffle after the layout pass: two channels-last branches
        # back to NCHW, concatenated, the channels' two groups swapped by a transpose
        (case("fused_loop_channel_shuffle"), {"a": f(2, 4, 3, 6), "b": f(2, 4, 3, 6)},
         "%ta = transpose(%a) {perm = [0, 3, 1, 2]}\n%tb = transpose(%b) {perm = [0, 3, 1, 2]}\n"
         "%c = concat(%ta, %tb) {axis = 1}\n%r = reshape(%c) {shape = [2, 2, 6, 4, 3]}\n"
         "%y = transpose(%r) {perm = [0, 2, 1, 3, 4]}"),
        (case("fused_loop_gather_transpose"), {"x": f(3, 5, 6), "b": f(6, 3)},
         "%i = const i64[] -2\n%t = transpose(%x) {perm = [2, 0, 1]}\n"
         "%g = gather(%t, %i) {axis = 2}\n%y = add(%g, %b)"),
        # attention: one kernel from the heads' split to the output's transpose, the
        # scores in shared memory (a fully masked row gives NaN, which the where zeroes)
        (case("fused_attention_masked"), masked_in, ATTN_MASKED),
        # (the emulator has no constants: the scale and the mask value come in as inputs)
        (case("fused_attention_split_causal"), causal_in, ATTN_CAUSAL),
        # torchvision's multi-head attention: q, k, v picked from a stack by constant
        # gathers, heads folded into the batch (rank 3)
        (case("fused_attention_stacked_heads"), {"x": f(3, 37, 1, 24)},
         "%i0 = const i64[] 0\n%i1 = const i64[] 1\n%i2 = const i64[] 2\n"
         "%q = gather(%x, %i0) {axis = 0}\n%k = gather(%x, %i1) {axis = 0}\n%v = gather(%x, %i2) {axis = 0}\n"
         "%q3 = reshape(%q) {shape = [37, 3, 8]}\n%qt = transpose(%q3) {perm = [1, 0, 2]}\n"
         "%k3 = reshape(%k) {shape = [37, 3, 8]}\n%kt = transpose(%k3) {perm = [1, 2, 0]}\n"
         "%v3 = reshape(%v) {shape = [37, 3, 8]}\n%vt = transpose(%v3) {perm = [1, 0, 2]}\n"
         "%s = matmul(%qt, %kt)\n%p = softmax(%s) {axis = -1}\n%o = matmul(%p, %vt)\n"
         "%y = transpose(%o) {perm = [1, 0, 2]}"),
        # e4m3 (fp8's quantized GEMM inputs): the preamble's own rounding (to nearest even,
        # saturating at +-448, inf too; the PTX cvt replaces it on sm_89 and newer) and
        # decoding, over subnormals, ties, the range's edge and beyond
        (case("fused_f8e4m3_round_trip"), {"x": f8_probe},
         "%q = cast(%x) {to = \"f8e4m3\"}\n%y = cast(%q) {to = \"f32\"}"),
        # --precision: the lowered kernels read and write f16/bf16 and compute in f32
        (case("bf16_loop_rope"), {"x": f(2, 8, 64), "c": f(1, 1, 8, 16), "s": f(1, 1, 8, 16)}, LOOP_ROPE),
        # a split whose parts go to two loop groups: a slice in each (fuse.c's split_slices)
        (case("bf16_loop_split_parts"), {"p": f(2, 6, 64), "c": f(1, 1, 6, 16)},
         "%q, %k = split(%p) {axis = -1, split = [48, 16]}\n%qr = reshape(%q) {shape = [2, 6, 3, 16]}\n"
         "%qt = transpose(%qr) {perm = [0, 2, 1, 3]}\n%a = mul(%qt, %c)\n"
         "%kr = reshape(%k) {shape = [2, 6, 1, 16]}\n%kt = transpose(%kr) {perm = [0, 2, 1, 3]}\n"
         "%ku = expand(%kt) {shape = [2, 3, 6, 16]}\n%b = neg(%ku)\nreturn %a, %b"),
        (case("bf16_loop_expand_heads"), {"x": f(1, 2, 5, 4), "s": f(1, 2, 1, 5, 4)},
         "%a = mul(%x, %x)\n%u = unsqueeze(%a) {axes = [2]}\n"
         "%e = expand(%u) {shape = [1, 2, 3, 5, 4]}\n%m = add(%e, %s)\n%y = reshape(%m) {shape = [1, 6, 5, 4]}"),
        (case("bf16_attention_masked"), masked_in, ATTN_MASKED),
        (case("fp16_attention_split_causal"), causal_in, ATTN_CAUSAL),
        # attention on tensor cores (16-bit, head sizes a multiple of 16): keys in tiles of
        # 64 (70 and 100: a partial last tile), 16-byte loads where rows allow them (a split
        # at column 100 does not), blocks of 32, 64 and (264 heads) 128 query rows, the
        # scores kept in registers between the passes or (300 keys) computed again
        (case("bf16_attention_tc_masked"), masked_tc_in, attn_masked(2, 70, 2, 16)),
        (case("fp16_attention_tc_split_causal"), causal_tc_in, attn_causal(100, 2, 16, rest=4)),
        (case("bf16_attention_tc_long"), {"q": f(2, 20, 16), "k": f(2, 16, 300), "v": f(2, 300, 32),
                                          "c": np.float32(0.25)},
         "%s = matmul(%q, %k)\n%d = mul(%s, %c)\n%p = softmax(%d) {axis = -1}\n%y = matmul(%p, %v)"),
        # (264 x 70 x 70 scores summed in f32 here, in f64 there: some land on the other side
        # of a bf16 tie, a step apart, and move their row's probabilities and output by about
        # a step of the largest of them times a value: atol 2^-8 x 0.1 x 3)
        (case("bf16_attention_tc_many_heads"), {"q": f(264, 70, 16) / 4, "k": f(264, 16, 70), "v": f(264, 70, 16)},
         "%s = matmul(%q, %k)\n%p = softmax(%s) {axis = -1}\n%y = matmul(%p, %v)", 1.2e-3),
        # long key counts, none a multiple of the tile (a masked tail): several heads,
        # masks (a fully masked key range), a causal triangle, Whisper's 1500 keys of head size
        # 64, head size 128 (tiles of 32 keys); blocks of 32 query rows with four key slices
        # of each tile (few heads for the default target's SMs), 64 rows with two and 128
        # rows with one (as many heads as SMs: --sms)
        (case("bf16_attention_tc_long_masked"), long_masked_in, attn_masked(1, 300, 2, 16)),
        (case("fp16_attention_tc_long_causal"), long_causal_in, attn_causal(300, 2, 16)),
        (case("fp16_attention_tc_1500"), {"q": f(2, 24, 64), "k": f(2, 64, 1500), "v": f(2, 1500, 64),
                                          "c": np.float32(0.125)},
         "%s = matmul(%q, %k)\n%d = mul(%s, %c)\n%p = softmax(%d) {axis = -1}\n%y = matmul(%p, %v)"),
        (case("bf16_attention_tc_1500"), {"q": f(1, 40, 64), "k": f(1, 64, 1500), "v": f(1, 1500, 64),
                                          "c": np.float32(0.125)},
         "%s = matmul(%q, %k)\n%d = mul(%s, %c)\n%p = softmax(%d) {axis = -1}\n%y = matmul(%p, %v)"),
        (case("bf16_attention_tc_head128"), {"q": f(3, 20, 128) / 4, "k": f(3, 128, 200) / 4, "v": f(3, 200, 64)},
         "%s = matmul(%q, %k)\n%p = softmax(%s) {axis = -1}\n%y = matmul(%p, %v)"),
        (case("fp16_attention_tc_two_slices"), {"q": f(4, 70, 16) / 4, "k": f(4, 16, 600), "v": f(4, 600, 16)},
         "%s = matmul(%q, %k)\n%p = softmax(%s) {axis = -1}\n%y = matmul(%p, %v)", 1e-5, ["--sms=8"]),
        # (two scores land on the other side of a bf16 tie, as in many_heads below; the
        # kernel of 2026-11-25 gave the same answer)
        (case("bf16_attention_tc_one_slice"), {"q": f(4, 70, 16) / 4, "k": f(4, 16, 300), "v": f(4, 300, 16)},
         "%s = matmul(%q, %k)\n%p = softmax(%s) {axis = -1}\n%y = matmul(%p, %v)", 1.2e-3, ["--sms=4"]),
        # values through registers (rows of 100 elements), the scores computed again
        (case("fp16_attention_tc_split_one_slice"), dict(long_causal_in, x=f(1, 300, 100)),
         attn_causal(300, 2, 16, rest=4), 1e-5, ["--sms=1"]),
        # 5 keys (a tile of 16), head sizes 48 and 80
        (case("bf16_attention_tc_few_keys"), {"q": f(2, 3, 48), "k": f(2, 48, 5) / 4, "v": f(2, 5, 80)},
         "%s = matmul(%q, %k)\n%p = softmax(%s) {axis = -1}\n%y = matmul(%p, %v)"),
        # one pass (online softmax: 1100 keys, 288 a warp, too many to keep) with a mask and
        # a fully masked head: the exporters' NaN masking by a constant 0 gives its rows 0,
        # without it they are NaN as the reference's are
        (case("bf16_attention_tc_online_nan_mask"), online_in,
         "%z = const f32[] 0\n%s = matmul(%q, %k)\n%a = add(%s, %m)\n%p = softmax(%a) {axis = -1}\n"
         "%n = is_nan(%p)\n%w = where(%n, %z, %p)\n%y = matmul(%w, %v)"),
        (case("fp16_attention_tc_online_masked_nan"), online_in,
         "%s = matmul(%q, %k)\n%a = add(%s, %m)\n%p = softmax(%a) {axis = -1}\n%y = matmul(%p, %v)"),
        # a finite mask near bf16's largest value, a head all hidden by it (its softmax uniform:
        # max times log2(e) would overflow f32), in one pass and (70 keys, kept) in two
        (case("bf16_attention_tc_online_finite_mask"), dict(online_in, m=fmask),
         "%s = matmul(%q, %k)\n%a = add(%s, %m)\n%p = softmax(%a) {axis = -1}\n%y = matmul(%p, %v)"),
        (case("bf16_attention_tc_finite_mask"), {"q": f(2, 20, 16), "k": f(2, 16, 70), "v": f(2, 70, 32),
                                                 "m": fmask[..., :70]},
         "%s = matmul(%q, %k)\n%a = add(%s, %m)\n%p = softmax(%a) {axis = -1}\n%y = matmul(%p, %v)"),
        (case("bf16_layer_norm_gelu"), {"x": f(4, 64), "s": f(64), "b": f(64)},
         "%n = layer_norm(%x, %s, %b)\n%y = gelu(%n)"),
        (case("fp16_softmax_scale"), {"x": f(6, 300), "s": f(300)}, "%p = softmax(%x)\n%y = mul(%p, %s)"),
        (case("bf16_conv_bias_relu"), {"x": x, "w": f(6, 2, 3, 3), "b": f(6)},
         "%c = conv(%x, %w, %b) {pads = [1, 1, 1, 1], group = 2}\n%y = relu(%c)"),
        (case("bf16_conv_depthwise_channels_last"), {"x": f(2, 6, 5, 72), "w": f(72, 7, 7, 1), "b": f(72)},
         "%c = conv(%x, %w, %b) {pads = [3, 3, 3, 3], group = 72, channels_last = 1}\n%y = relu(%c)"),
        # grouped in channels last, bf16: 8 channels a load
        (case("bf16_conv_grouped_channels_last_vec"), {"x": f(1, 7, 9, 32), "w": f(32, 3, 3, 16), "b": f(32)},
         "%c = conv(%x, %w, %b) {pads = [1, 1, 1, 1], strides = [2, 2], group = 2, channels_last = 1}\n%y = relu(%c)"),
        # implicit GEMMs on tensor cores: several tiles, K and the channels not multiples
        # of a tile, the f32 input's cast in the kernel (a prologue), epilogues
        (case("bf16_conv_implicit_gemm"), {"x": f(2, 12, 13, 11), "w": f(70, 12, 3, 3), "b": f(70)},
         "%c = conv(%x, %w, %b) {pads = [1, 2, 1, 0], dilations = [1, 2]}\n%y = relu(%c)"),
        (case("fp16_conv_1d_strided"), {"x": f(3, 5, 40), "w": f(20, 5, 3)},
         "%y = conv(%x, %w) {strides = [2], dilations = [2], pads = [2, 1]}"),
        (case("bf16_conv_wide_tiles"), {"x": f(2, 4, 64, 66), "w": f(200, 4, 1, 1), "b": f(200)},
         "%y = conv(%x, %w, %b)"),
        # channels last on tensor cores: the second convolution loads eight channels at once
        (case("bf16_conv_channels_last_pair"), {"x": f(2, 6, 7, 8), "w": f(16, 3, 3, 8), "v": f(24, 3, 3, 16), "b": f(24)},
         "%c = conv(%x, %w) {pads = [1, 1, 1, 1], channels_last = 1}\n%r = relu(%c)\n"
         "%y = conv(%r, %v, %b) {strides = [2, 2], channels_last = 1}"),
        # channels last: output channels not a multiple of 8 (an element a thread), then a
        # 1x1 convolution whose bias and sigmoid are applied to 8 channels a thread, stored
        # as one vector
        (case("bf16_conv_channels_last_vector_store"), {"x": f(2, 6, 7, 16), "w": f(12, 3, 3, 16), "v": f(24, 1, 1, 12), "b": f(24)},
         "%c = conv(%x, %w) {pads = [1, 1, 1, 1], channels_last = 1}\n%r = relu(%c)\n"
         "%z = conv(%r, %v, %b) {channels_last = 1}\n%y = sigmoid(%z)"),
        # an NCHW image read by a channels-last convolution through the transpose and the
        # cast in its group (a prologue)
        (case("bf16_conv_transposed_input"), {"x": f(2, 3, 11, 12), "w": f(40, 4, 4, 3), "b": f(40)},
         "%t = transpose(%x) {perm = [0, 2, 3, 1]}\n%y = conv(%t, %w, %b) {strides = [4, 4], channels_last = 1}"),
        (case("bf16_conv_1x1_residual"), {"x": f(2, 40, 6, 7), "w": f(40, 40, 1, 1), "r": f(2, 40, 6, 7)},
         "%c = conv(%x, %w)\n%a = add(%c, %r)\n%y = relu(%a)"),
        (case("fp16_reduce_mean_sub"), {"x": f(3, 5, 70)},
         "%m = reduce_mean(%x) {axes = [2]}\n%y = sub(%x, %m)"),
        # an embedding lookup with the other embeddings added in its store; ViT's class
        # token concatenated, the position embedding added in the store
        (case("fused_gather_embedding_adds"), {"t": f(10, 8), "i": ints(-10, 10, (2, 5), np.int64), "p": f(5, 8), "q": f(8)},
         "%e = gather(%t, %i) {axis = 0}\n%a = add(%e, %p)\n%y = add(%a, %q)"),
        (case("fused_concat_add"), {"c": f(2, 1, 8), "x": f(2, 5, 8), "p": f(1, 6, 8)},
         "%k = concat(%c, %x) {axis = 1}\n%y = add(%k, %p)"),
        # ViT's patches: the convolution's [B, E, H, W] read as [B, H*W, E] by the concat
        (case("fused_concat_transposed_add"), {"c": f(2, 1, 8), "x": f(2, 8, 2, 3), "p": f(1, 7, 8)},
         "%r = reshape(%x) {shape = [2, 8, 6]}\n%t = transpose(%r) {perm = [0, 2, 1]}\n"
         "%k = concat(%c, %t) {axis = 1}\n%y = add(%k, %p)"),
        # an attention mask: the cast computed again for every element the and widens it to
        (case("fused_cast_broadcast_and"), {"m": ints(0, 2, (2, 1, 1, 6), np.int64), "c": rng.random((1, 1, 6, 1)) < 0.7},
         '%b = cast(%m) {to = "bool"}\n%y = and(%c, %b)'),
        # a mask made in the attention kernel from the i64 attention_mask (clone_masks
        # gives every attention its own): cast, and with the causal triangle, where
        (case("fused_attention_mask_cast_and"), {"q": f(1, 2, 16, 8), "k": f(1, 2, 8, 16), "v": f(1, 2, 16, 8),
                                                 "m": ints(0, 2, (1, 1, 1, 16), np.int64),
                                                 "c": np.tril(np.ones((16, 16), bool)).reshape(1, 1, 16, 16),
                                                 "z": np.float32(0), "lo": np.float32(-1e9)},
         '%mb = cast(%m) {to = "bool"}\n%mk = and(%c, %mb)\n%w = where(%mk, %z, %lo)\n'
         "%s = matmul(%q, %k)\n%a = add(%s, %w)\n%p = softmax(%a) {axis = -1}\n%y = matmul(%p, %v)"),
        # the same at batch 2, as simplify writes it: the heads split from the batch
        # before the transpose, so every dim is one stride of the stack
        (case("fused_attention_stacked_heads_batch"), {"x": f(3, 37, 2, 24)},
         "%i0 = const i64[] 0\n%i1 = const i64[] 1\n%i2 = const i64[] 2\n"
         "%q = gather(%x, %i0) {axis = 0}\n%k = gather(%x, %i1) {axis = 0}\n%v = gather(%x, %i2) {axis = 0}\n"
         "%q4 = reshape(%q) {shape = [37, 2, 3, 8]}\n%q5 = transpose(%q4) {perm = [1, 2, 0, 3]}\n%qt = reshape(%q5) {shape = [6, 37, 8]}\n"
         "%k4 = reshape(%k) {shape = [37, 2, 3, 8]}\n%k5 = transpose(%k4) {perm = [1, 2, 3, 0]}\n%kt = reshape(%k5) {shape = [6, 8, 37]}\n"
         "%v4 = reshape(%v) {shape = [37, 2, 3, 8]}\n%v5 = transpose(%v4) {perm = [1, 2, 0, 3]}\n%vt = reshape(%v5) {shape = [6, 37, 8]}\n"
         "%s = matmul(%qt, %kt)\n%p = softmax(%s) {axis = -1}\n%o = matmul(%p, %vt)\n"
         "%y = transpose(%o) {perm = [1, 0, 2]}"),
        # K divided by the scale (DeBERTa's): a division the kernel applies as it loads
        # K, on CUDA cores in f32 and through the tensor cores' scaler in bf16
        (case("fused_attention_k_div"), {"q": f(2, 3, 16, 8), "k": f(2, 3, 16, 8), "v": f(2, 3, 16, 8)},
         "%c = const f32[] 2.828427\n%kt = transpose(%k) {perm = [0, 1, 3, 2]}\n%ks = div(%kt, %c)\n"
         "%s = matmul(%q, %ks)\n%p = softmax(%s) {axis = -1}\n%y = matmul(%p, %v)"),
        (case("bf16_attention_tc_k_div"), {"q": f(2, 3, 16, 16), "k": f(2, 3, 16, 16), "v": f(2, 3, 16, 16)},
         "%c = const f32[] 3\n%kt = transpose(%k) {perm = [0, 1, 3, 2]}\n%ks = div(%kt, %c)\n"
         "%s = matmul(%q, %ks)\n%p = softmax(%s) {axis = -1}\n%y = matmul(%p, %v)"),
        # Swin's shifted windows: the scores of [B*W, H, N, N] plus their position bias,
        # reshaped to [B, W, H, N, N] for the windows' mask and back for the softmax;
        # sink_reshapes moves the split up into the first matmul and the merge below the
        # second, and the attention computes [B, W, H, ...] with both chains at coordinates
        (case("fused_sink_attention_windows"), {"q": f(4, 2, 16, 8), "k": f(4, 2, 8, 16), "v": f(4, 2, 16, 8),
                                               "pb": f(1, 2, 16, 16), "m": f(1, 2, 1, 16, 16)},
         "%s = matmul(%q, %k)\n%sb = add(%s, %pb)\n%s5 = reshape(%sb) {shape = [2, 2, 2, 16, 16]}\n"
         "%sm = add(%s5, %m)\n%s4 = reshape(%sm) {shape = [4, 2, 16, 16]}\n"
         "%p = softmax(%s4) {axis = -1}\n%y = matmul(%p, %v)"),
        # DeBERTa's: heads flattened into the batch for 3-D bmms, the scores split back
        # for the mask and the probabilities flattened again
        (case("fused_sink_attention_flat_heads"), {"q": f(2, 3, 16, 8), "k": f(2, 3, 8, 16), "v": f(2, 3, 16, 8),
                                                  "keep": rng.random((2, 1, 1, 16)) < 0.8,
                                                  "big": np.float32(-1e9)},
         "%q3 = reshape(%q) {shape = [6, 16, 8]}\n%k3 = reshape(%k) {shape = [6, 8, 16]}\n"
         "%s3 = matmul(%q3, %k3)\n%s = reshape(%s3) {shape = [2, 3, 16, 16]}\n%w = where(%keep, %s, %big)\n"
         "%p = softmax(%w) {axis = -1}\n%p3 = reshape(%p) {shape = [6, 16, 16]}\n"
         "%v3 = reshape(%v) {shape = [6, 16, 8]}\n%o3 = matmul(%p3, %v3)\n%y = reshape(%o3) {shape = [2, 3, 16, 8]}"),
        # torchvision's chain as exported, at batch 2, from the QKV GEMM's [B, S, 3E]
        # output (the transpose to [S, B, 3E] sunk below the GEMM): simplify splits the
        # heads from the batch, and the attention reads all of it through one view
        (case("fused_simplify_attention_torchvision_batch"), {"x": f(2, 37, 72)},
         "%i0 = const i64[] 0\n%i1 = const i64[] 1\n%i2 = const i64[] 2\n"
         "%t = transpose(%x) {perm = [1, 0, 2]}\n%u = reshape(%t) {shape = [1, 37, 2, 3, 24]}\n"
         "%w = transpose(%u) {perm = [3, 1, 2, 0, 4]}\n%sq = squeeze(%w) {axes = [3]}\n"
         "%q = gather(%sq, %i0) {axis = 0}\n%k = gather(%sq, %i1) {axis = 0}\n%v = gather(%sq, %i2) {axis = 0}\n"
         "%q3 = reshape(%q) {shape = [37, 6, 8]}\n%qt = transpose(%q3) {perm = [1, 0, 2]}\n%q4 = reshape(%qt) {shape = [2, 3, 37, 8]}\n"
         "%k3 = reshape(%k) {shape = [37, 6, 8]}\n%kt = transpose(%k3) {perm = [1, 0, 2]}\n%k4 = reshape(%kt) {shape = [2, 3, 37, 8]}\n"
         "%k5 = transpose(%k4) {perm = [0, 1, 3, 2]}\n"
         "%v3 = reshape(%v) {shape = [37, 6, 8]}\n%vt = transpose(%v3) {perm = [1, 0, 2]}\n%v4 = reshape(%vt) {shape = [2, 3, 37, 8]}\n"
         "%s = matmul(%q4, %k5)\n%p = softmax(%s) {axis = -1}\n%o = matmul(%p, %v4)\n"
         "%y = transpose(%o) {perm = [2, 0, 1, 3]}"),
        # a layer norm's epilogue: a scale by a full-shape value and a cast in its store
        (case("fused_layer_norm_mul_cast"), {"x": f(6, 96), "s": f(96), "b": f(96), "w": f(6, 96)},
         '%n = layer_norm(%x, %s, %b)\n%m = mul(%n, %w)\n%y = cast(%m) {to = "f64"}'),
        # the layer norm's kernel stores its output too (a side output): %k is returned
        (case("fused_layer_norm_side"), {"x": f(6, 96), "s": f(96), "b": f(96)},
         "%k = layer_norm(%x, %s, %b)\n%r = relu(%k)\nreturn %r, %k"),
        # rms_norm: the layer norm's kernel without the mean, with or without a scale
        (case("fused_rms_norm_silu"), {"x": f(6, 96), "s": f(96)},
         "%n = rms_norm(%x, %s) {epsilon = 0.001}\n%y = silu(%n)"),
        (case("rms_norm_rows"), {"x": f(3, 4, 700)}, "%y = rms_norm(%x) {axis = 1}"),
        (case("bf16_rms_norm"), {"x": f(4, 64), "s": f(64)}, "%y = rms_norm(%x, %s)"),
        # rows in registers (reduce.c's norm_rows), each variant in a pass: GPT-2's rows
        # of 768 (96 vectors of 8) on 32, 64, 16 (two rows a block, 41 rows: the last
        # block's second row idle) and 96 threads a row
        (case("bf16_layer_norm_rows"), {"x": f(41, 768), "s": f(768), "b": f(768)},
         "%y = layer_norm(%x, %s, %b)"),
        # short rows (12 vectors), several a warp: 4 threads a row, 8 rows a warp; with
        # few SMs, rows of 64 threads' blocks, grid-stride over the rest; an epilogue
        # adding a residual and its side output
        (case("fp16_layer_norm_short_rows"), {"x": f(300, 96), "s": f(96), "b": f(96)},
         "%y = layer_norm(%x, %s, %b)"),
        (case("fp16_layer_norm_short_rows_few_sms"), {"x": f(300, 96), "s": f(96), "b": f(96)},
         "%y = layer_norm(%x, %s, %b)", 1e-5, ["--sms=2"]),
        (case("bf16_layer_norm_residual_side"), {"x": f(37, 256), "s": f(256), "b": f(256), "r": f(37, 256)},
         "%k = layer_norm(%x, %s, %b)\n%y = add(%k, %r)\nreturn %y, %k"),
        # f32 (4 a vector) over the last two dims: the scale along the row as vectors, the
        # bias [6, 1] one value for each vector
        (case("layer_norm_f32_broadcast"), {"x": f(5, 6, 40), "s": f(40), "b": f(6, 1)},
         "%y = layer_norm(%x, %s, %b) {axis = 1}"),
        # rows of 6 x 4: the scale and bias [4, 1] change inside a vector, read by element
        (case("layer_norm_f32_broadcast_elements"), {"x": f(9, 4, 6), "s": f(6), "b": f(4, 1)},
         "%y = layer_norm(%x, %s, %b) {axis = 1}"),
        # rows no multiple of 16 bytes: 100 f16 in vectors of 4 (25 on 8 threads, the
        # last vectors idle), one scale for all; 333 bf16 an element a load
        (case("fp16_rms_norm_narrow_vectors"), {"x": f(7, 100), "s": f(1)},
         "%y = rms_norm(%x, %s) {epsilon = 0.001}"),
        (case("bf16_layer_norm_odd_rows"), {"x": f(5, 333), "s": f(333), "b": f(333)},
         "%y = layer_norm(%x, %s, %b)"),
        # long rows: a block a row (1000 vectors on 256 threads, 4 each; on 1024, one);
        # longer than 1024 threads hold at 8 vectors each: the earlier kernel
        (case("rms_norm_block_rows"), {"x": f(3, 4000)}, "%y = rms_norm(%x)"),
        (case("rms_norm_longer_than_registers"), {"x": f(2, 33000), "s": f(33000)}, "%y = rms_norm(%x, %s)"),
        (case("fused_rms_norm_mul"), {"x": f(50, 128), "s": f(128), "w": f(50, 128)},
         "%n = rms_norm(%x, %s)\n%y = mul(%n, %w)"),
        (case("layer_norm_f64"), {"x": rng.standard_normal((6, 40)), "s": rng.standard_normal(40)},
         "%y = layer_norm(%x, %s)"),
        # the output tail (the relu after the last convolution) computes in f32
        (case("bf16_conv_tail"), {"x": x, "w": f(6, 4, 3, 3), "b": f(6), "v": f(4, 6, 1, 1)},
         "%y = conv(%x, %w, %b)\n%r = relu(%y)\n%z = conv(%r, %v)\n%t = relu(%z)"),
        (case("fused_f64_residual"), {"x": d5, "r": rng.standard_normal((1, 2, 5, 5, 4))}, "%a = relu(%x)\n%y = add(%a, %r)"),
        # f32 convolutions on tensor cores: 3xTF32 (f32's tolerance), NCHW and channels last
        # (four channels a load), two column tiles with the second partial, 1-d; TF32 itself
        (case("conv_3xtf32"), {"x": f(2, 5, 13, 11), "w": f(70, 5, 3, 3), "b": f(70)},
         "%y = conv(%x, %w, %b) {strides = [2, 1], pads = [1, 2, 1, 0], dilations = [1, 2]}"),
        (case("fused_conv_3xtf32_channels_last"), {"x": f(2, 9, 10, 8), "w": f(40, 3, 3, 8), "b": f(40), "r": f(2, 4, 4, 40)},
         "%c = conv(%x, %w, %b) {strides = [2, 2], channels_last = 1}\n%a = add(%c, %r)\n%y = relu(%a)"),
        (case("conv_3xtf32_1d"), {"x": f(3, 6, 40), "w": f(20, 6, 5)}, "%y = conv(%x, %w) {strides = [2], pads = [2, 2]}"),
        (case("tf32_conv_bias_relu"), {"x": f(2, 12, 9, 10), "w": f(70, 12, 3, 3), "b": f(70)},
         "%c = conv(%x, %w, %b) {pads = [1, 1, 1, 1]}\n%y = relu(%c)"),
        # the weights as 16-byte vectors (K a multiple of 8), two column tiles, the second partial
        (case("bf16_conv_weight_vectors"), {"x": f(2, 7, 6, 16), "w": f(72, 3, 3, 16), "b": f(72)},
         "%y = conv(%x, %w, %b) {pads = [1, 1, 1, 1], channels_last = 1}"),
        # K split over the blocks of a cluster (few tiles, many taps), summed in shared
        # memory: 3 blocks, the last one's share ends inside a step; 2 blocks of the
        # pipelined kernel (9 steps of 64 taps) with the epilogue applied to the sum
        (case("conv_3xtf32_split_k"), {"x": f(1, 40, 7, 7), "w": f(36, 40, 3, 3), "b": f(36)},
         "%y = conv(%x, %w, %b) {pads = [1, 1, 1, 1]}"),
        (case("bf16_conv_split_k"), {"x": f(1, 6, 6, 64), "w": f(24, 3, 3, 64), "r": f(1, 6, 6, 24)},
         "%c = conv(%x, %w) {pads = [1, 1, 1, 1], channels_last = 1}\n%a = add(%c, %r)\n%y = relu(%a)"),
        # the implicit GEMM's family of variants (nn.c's mma_family), each kernel run in a
        # pass of its own: 100 x 48 x 576 takes the default 64 x 32 tiles with K split 4
        # ways, and 3, 2 and not, and 128 x 64 split and not; 81 x 24 x 576 (at most 32
        # channels) 64 x 32 and 128 x 32, split and not; 64 x 48 x 288 (64 pixels) 64 x 32
        # and 64 x 64, split 2 ways and not
        (case("bf16_conv_variants"), {"x": f(1, 64, 10, 10), "w": f(48, 64, 3, 3), "b": f(48)},
         "%c = conv(%x, %w, %b) {pads = [1, 1, 1, 1]}\n%y = relu(%c)"),
        (case("bf16_conv_variants_narrow"), {"x": f(1, 9, 9, 64), "w": f(24, 3, 3, 64)},
         "%y = conv(%x, %w) {pads = [1, 1, 1, 1], channels_last = 1}"),
        (case("fused_conv_3xtf32_variants"), {"x": f(1, 10, 10, 64), "w": f(48, 3, 3, 64), "r": f(1, 10, 10, 48)},
         "%c = conv(%x, %w) {pads = [1, 1, 1, 1], channels_last = 1}\n%y = add(%c, %r)"),
        (case("tf32_conv_variants_narrow"), {"x": f(1, 64, 9, 9), "w": f(24, 64, 3, 3)},
         "%y = conv(%x, %w) {pads = [1, 1, 1, 1]}"),
        (case("conv_3xtf32_variants_narrow"), {"x": f(1, 9, 9, 64), "w": f(24, 3, 3, 64)},
         "%y = conv(%x, %w) {pads = [1, 1, 1, 1], channels_last = 1}"),
        (case("bf16_conv_variants_square"), {"x": f(1, 8, 8, 32), "w": f(48, 3, 3, 32), "b": f(48)},
         "%y = conv(%x, %w, %b) {pads = [1, 1, 1, 1], channels_last = 1}"),
        # the pipelined kernel (channels last, 8-channel chunks by cp.async): 136 channels
        # in tiles of 128 and 64 (a partial one), 9 steps of K through 3 and 4 stages, K
        # split over a cluster; in 1-d, K = 72 one partial step, strided and dilated
        # grouped on tensor cores (a tap a K step, a block's whole groups): groups of 16
        # in and 32 out channels, 3 groups in a tile of 128 columns (one partial), strided
        # and dilated with a bias; 1-d groups of 32 in and 16 out channels
        (case("bf16_conv_grouped_tc"), {"x": f(2, 9, 7, 48), "w": f(96, 3, 3, 16), "b": f(96)},
         "%c = conv(%x, %w, %b) {strides = [2, 1], pads = [1, 0, 2, 1], dilations = [1, 2], group = 3, channels_last = 1}\n%y = relu(%c)"),
        (case("fp16_conv_grouped_tc_1d"), {"x": f(2, 21, 64), "w": f(32, 5, 32)},
         "%y = conv(%x, %w) {pads = [2, 2], group = 2, channels_last = 1}"),
        (case("bf16_conv_async_wide"), {"x": f(2, 10, 10, 64), "w": f(136, 3, 3, 64), "b": f(136)},
         "%c = conv(%x, %w, %b) {pads = [1, 1, 1, 1], channels_last = 1}\n%y = relu(%c)"),
        (case("fp16_conv_async_1d"), {"x": f(2, 30, 24), "w": f(40, 3, 24)},
         "%y = conv(%x, %w) {strides = [2], dilations = [2], pads = [2, 1], channels_last = 1}"),
        # f32 linear layers (weights [N, K]) on tensor cores, 3xTF32: partial row and column
        # tiles, K split over 2 blocks of a cluster, the second's last step partial; 4 blocks
        # with the group's epilogue (bias, residual, ReLU) applied to their sum; one block,
        # with an inf and a NaN among the inputs (those rows' sums again in f32)
        (case("gemm_3xtf32"), {"x": f(3, 70, 200), "w": f(72, 200)}, "%y = matmul(%x, %w) {transpose_b = 1}"),
        (case("fused_gemm_3xtf32_split_k"), {"x": f(2, 33, 512), "w": f(40, 512), "b": f(40), "r": f(2, 33, 40)},
         "%m = matmul(%x, %w) {transpose_b = 1}\n%a = add(%m, %b)\n%s = add(%a, %r)\n%y = relu(%s)"),
        # token 3 of each sequence, read where it is (rows 108 floats apart, 12 in)
        (case("fused_gemm_3xtf32_view"), {"x": f(5, 9, 12), "w": f(20, 12)},
         "%t = const i64[] 3\n%g = gather(%x, %t) {axis = 1}\n%y = matmul(%g, %w) {transpose_b = 1}"),
        (case("gemm_3xtf32_inf"), {"x": inf_nan(f(130, 64)), "w": exact_tap5(f(200, 64))}, "%y = matmul(%x, %w) {transpose_b = 1, scale = 0.5}"),
        # the family's 32 x 32 tile alone (the output's sides at most 32), K split 4 ways
        # (13 steps: the last block's 1, itself partial) and not split
        (case("gemm_3xtf32_small_split_k"), {"x": f(20, 400), "w": f(24, 400)}, "%y = matmul(%x, %w) {transpose_b = 1}"),
        # two nodes of one code: the second launches the first's kernel on its own buffers
        (case("same_code_twice"), {"a": f(4, 9), "b": f(4, 9)}, "%p = sigmoid(%a)\n%q = sigmoid(%b)\nreturn %p, %q"),
        # a split into more outputs than one kernel takes (codegen's CODEGEN_PART_OPERANDS,
        # 128): a kernel per part, over the slab of the axis its outputs fill; a concat of
        # more inputs likewise (sizes 1 to 3 along the middle axis)
        # grouped-query attention: K and V of fewer heads read in place, each query head
        # h reading kv head h / rep (no kernel for the repeat), on tensor cores (head size
        # 16, 32) and on CUDA cores (10, 12), rep 2 and 3, causal or masked, batch 2
        (case("bf16_attention_gqa_rep3_causal"), gqa_causal_in(2, 40, 6, 2, 16), attn_gqa(2, 40, 6, 2, 16)),
        (case("fp16_attention_gqa_rep3_causal"), gqa_causal_in(2, 40, 6, 2, 16),
         attn_gqa(2, 40, 6, 2, 16, spelling="reshape")),
        (case("bf16_attention_gqa_rep2_masked"), gqa_masked_in(2, 70, 4, 2, 32),
         attn_gqa(2, 70, 4, 2, 32, causal=False, kt_first=True)),
        (case("fp16_attention_gqa_rep2_masked"), gqa_masked_in(2, 70, 4, 2, 32),
         attn_gqa(2, 70, 4, 2, 32, causal=False)),
        (case("bf16_attention_gqa_rep2_causal_kt_first"), gqa_causal_in(3, 33, 4, 2, 16),
         attn_gqa(3, 33, 4, 2, 16, spelling="reshape", kt_first=True)),
        (case("fp16_attention_gqa_rep3_masked_odd_head"), gqa_masked_in(2, 20, 3, 1, 12),
         attn_gqa(2, 20, 3, 1, 12, causal=False)),
        (case("bf16_attention_gqa_rope"), {"x": f(2, 40, 160), "cs": f(1, 1, 40, 16), "sn": f(1, 1, 40, 16),
                                           "t": np.tril(np.ones((40, 40), bool)).reshape(1, 1, 40, 40),
                                           "c": np.float32(0.25), "lo": np.float32(-3.4028235e+38)},
         ATTN_GQA_ROPE),
        (case("fp16_attention_gqa_rope"), {"x": f(2, 40, 160), "cs": f(1, 1, 40, 16), "sn": f(1, 1, 40, 16),
                                           "t": np.tril(np.ones((40, 40), bool)).reshape(1, 1, 40, 40),
                                           "c": np.float32(0.25), "lo": np.float32(-3.4028235e+38)},
         ATTN_GQA_ROPE),
        (case("bf16_attention_gqa_tile_causal"), gqa_causal_in(2, 40, 6, 2, 16),
         attn_gqa(2, 40, 6, 2, 16, spelling="tile")),
        (case("fused_attention_gqa_rep3_causal"), gqa_causal_in(2, 24, 6, 2, 10), attn_gqa(2, 24, 6, 2, 10)),
        (case("fused_attention_gqa_rep2_masked_kt_first"), gqa_masked_in(2, 17, 4, 2, 8),
         attn_gqa(2, 17, 4, 2, 8, causal=False, kt_first=True, spelling="reshape")),
        (case("split_parts"), {"x": f(2, sum(parts), 3)},
         "%s = split(%%x) {axis = 1, split = [%s]}" % (
             ", ".join("%%p%d" % i for i in range(len(parts))), ", ".join(map(str, parts)))),
        (case("concat_parts"), {"x%d" % i: f(2, k, 3) for i, k in enumerate(parts)},
         "%%y = concat(%s) {axis = 1}" % ", ".join("%%x%d" % i for i in range(len(parts)))),
        # a concat whose inputs' rows are whole 16-byte vectors copies a vector a thread
        # (along the last axis, and along one with 4 floats inside; bf16 rows of 8)
        (case("concat_vectors"), {"a": f(2, 3, 8), "b": f(2, 3, 4), "c": f(2, 3, 12)}, "%y = concat(%a, %b, %c) {axis = 2}"),
        (case("concat_vectors_inner"), {"a": f(2, 2, 3, 4), "b": f(2, 1, 3, 4)}, "%y = concat(%a, %b) {axis = 1}"),
        (case("bf16_concat_channels_last"), {"x": f(2, 5, 6, 16), "w": f(8, 1, 1, 16), "v": f(16, 3, 3, 16), "u": f(8, 3, 3, 24)},
         "%a = conv(%x, %w) {channels_last = 1}\n%b = conv(%x, %v) {pads = [1, 1, 1, 1], channels_last = 1}\n"
         "%c = concat(%a, %b) {axis = 3}\n%y = conv(%c, %u) {channels_last = 1}"),
        # depthwise in channels last on 16-bit data as stored (x doubled in bf16 first: a
        # cast would be the conv's prologue), so the tiled kernel runs among the strips:
        # 7 x 7 with partial tiles along both dims and a partial chunk of channels (40 of
        # 24-channel chunks), bias and ReLU; 3 x 3 and 5 x 5 of stride 2 (one dilated), a
        # residual added in the epilogue; 1-d, strided, and of 8 channels a thread with a
        # sigmoid. The shapes and --sms (the waves the tiles are chosen by) give partial
        # tiles
        (case("bf16_conv_depthwise_tiled_7x7"), {"x": f(2, 37, 33, 40), "w": f(40, 7, 7, 1), "b": f(40)},
         "%d = add(%x, %x)\n%c = conv(%d, %w, %b) {pads = [3, 3, 3, 3], group = 40, channels_last = 1}\n%y = relu(%c)",
         1e-5, ["--sms=8"]),
        (case("bf16_conv_depthwise_tiled_3x3_stride2"), {"x": f(3, 47, 53, 48), "w": f(48, 3, 3, 1), "r": f(3, 24, 27, 48)},
         "%d = add(%x, %x)\n%c = conv(%d, %w) {pads = [1, 1, 1, 1], strides = [2, 2], group = 48, channels_last = 1}\n"
         "%y = add(%c, %r)", 1e-5, ["--sms=16"]),
        (case("fp16_conv_depthwise_tiled_5x5_stride2"), {"x": f(2, 37, 33, 24), "w": f(24, 5, 5, 1), "b": f(24)},
         "%d = add(%x, %x)\n%y = conv(%d, %w, %b) {pads = [2, 2, 2, 2], strides = [2, 2], group = 24, channels_last = 1}",
         1e-5, ["--sms=8"]),
        (case("bf16_conv_depthwise_tiled_dilated"), {"x": f(2, 37, 33, 16), "w": f(16, 3, 5, 1)},
         "%d = add(%x, %x)\n%y = conv(%d, %w) {pads = [2, 4, 2, 4], strides = [1, 2], dilations = [2, 2], group = 16, channels_last = 1}",
         1e-5, ["--sms=4"]),
        (case("fp16_conv_depthwise_tiled_1d"), {"x": f(3, 61, 32), "w": f(32, 5, 1), "b": f(32)},
         "%d = add(%x, %x)\n%y = conv(%d, %w, %b) {pads = [2, 1], strides = [2], group = 32, channels_last = 1}",
         1e-5, ["--sms=1"]),
        (case("bf16_conv_depthwise_tiled_1d_wide"), {"x": f(2, 45, 144), "w": f(144, 3, 1)},
         "%d = add(%x, %x)\n%c = conv(%d, %w) {pads = [1, 1], group = 144, channels_last = 1}\n%y = sigmoid(%c)",
         1e-5, ["--sms=1"]),
        # attention with two fragments of 16 rows a warp (256 rows a block, one pass): rows
        # past the last in the second block, a partial last key tile, bf16 scores rounded
        # a pair at a time
        (case("bf16_attention_tc_two_row_fragments"), {"q": f(2, 300, 64) / 4, "k": f(2, 64, 200), "v": f(2, 200, 64)},
         "%s = matmul(%q, %k)\n%p = softmax(%s) {axis = -1}\n%y = matmul(%p, %v)"),
        # the register kernel's taps through a table, two buffers: a stem (an f32 NCHW image
        # of 3 channels cast and transposed as loaded, 7x7 stride 2: K = 147 in 5 steps, 264
        # pixels and 70 channels in partial tiles, a bias and a ReLU), in the tiles of a
        # GPU of one SM and of the default one;
        # a 1-d convolution over 80 f32 channels read through its transpose (Whisper's
        # first, K = 240 in 8 steps), a GELU; bf16 of 12 channels read as stored (pairs of
        # 16-bit values), strided and dilated
        (case("bf16_conv_stem_prologue"), {"x": f(2, 3, 23, 21), "w": f(70, 7, 7, 3), "b": f(70)},
         "%t = transpose(%x) {perm = [0, 2, 3, 1]}\n"
         "%c = conv(%t, %w, %b) {strides = [2, 2], pads = [3, 3, 3, 3], channels_last = 1}\n%y = relu(%c)",
         1e-5, ["--sms=1"]),
        (case("fp16_conv_stem_prologue"), {"x": f(2, 3, 23, 21), "w": f(70, 7, 7, 3), "b": f(70)},
         "%t = transpose(%x) {perm = [0, 2, 3, 1]}\n"
         "%c = conv(%t, %w, %b) {strides = [2, 2], pads = [3, 3, 3, 3], channels_last = 1}\n%y = relu(%c)"),
        (case("fp16_conv_1d_prologue"), {"x": f(2, 80, 50), "w": f(40, 3, 80), "b": f(40)},
         "%t = transpose(%x) {perm = [0, 2, 1]}\n%c = conv(%t, %w, %b) {pads = [1, 1], channels_last = 1}\n%y = gelu(%c)"),
        (case("bf16_conv_channels_odd_pair"), {"x": f(2, 9, 10, 5), "w": f(12, 3, 3, 5), "v": f(20, 3, 3, 12)},
         "%c = conv(%x, %w) {pads = [1, 1, 1, 1], channels_last = 1}\n%r = relu(%c)\n"
         "%y = conv(%r, %v) {strides = [2, 1], dilations = [1, 2], pads = [1, 2, 1, 2], channels_last = 1}"),
        # f32 (3xTF32) in tiles of 128 x 64, whose two buffers would pass a block's static
        # shared memory: one buffer between two barriers, the taps through the table
        (case("conv_3xtf32_stem_one_buffer"), {"x": f(2, 3, 11, 10), "w": f(40, 3, 3, 3), "b": f(40)},
         "%y = conv(%x, %w, %b) {pads = [1, 1, 1, 1]}", 1e-5, ["--sms=1"]),
        # the register kernel's 64 x 128 tile beside the others (taps one at a time, 136
        # channels: a partial column tile), in bf16 through the cast and in 3xTF32
        (case("bf16_conv_wide_n_variants"), {"x": f(2, 20, 9, 8), "w": f(136, 20, 3, 3), "b": f(136)},
         "%c = conv(%x, %w, %b) {pads = [1, 1, 1, 1]}\n%y = relu(%c)", 1e-5, ["--sms=1"]),
        (case("conv_3xtf32_wide_n_variants"), {"x": f(2, 5, 9, 8), "w": f(136, 5, 3, 3)},
         "%y = conv(%x, %w) {pads = [1, 1, 1, 1]}", 1e-5, ["--sms=1"]),
    ]
    # every case named through case(), once: else it would draw from the case before it
    assert [c[0] for c in all_cases] == named and len(set(named)) == len(named)
    return all_cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpucc", required=True)
    ap.add_argument("--tmp", default="/tmp/gpucc-emulate")
    ap.add_argument("-k", default="", help="only the cases whose name has this substring")
    ap.add_argument("--shard", default="1/1", help="K/N: only every Nth case from the Kth")
    args = ap.parse_args()
    k, n = (int(x) for x in args.shard.split("/"))
    if not 1 <= k <= n:
        ap.error(f"--shard {args.shard}: K must be in 1..N")
    todo = [c for i, c in enumerate(cases()) if args.k in c[0] and i % n == k - 1]
    failed = 0
    ok, msg = precompile_host(args.tmp)
    if not ok:
        print("FAIL the host shim does not compile: " + msg)
        return 1
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        runs = [pool.submit(run_case, args.gpucc, args.tmp, *c) for c in todo]
        for c, r in zip(todo, runs):
            ok, msg = r.result()
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {c[0]}{': ' + msg if msg else ''}")
    print(f"{len(todo) - failed} of {len(todo)} cases match the reference executor")
    return 1 if failed or not todo else 0


if __name__ == "__main__":
    sys.exit(main())
