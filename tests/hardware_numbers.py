#!/usr/bin/env python3
"""hardware_numbers.py: no file of codegen/ or passes/ spells a hardware number.

Every fact about the GPU lives in the target table (ir/target.c, ir.h's Target): codegen
and the passes read cg->target / pass_target(ctx). This check fails naming file:line for
each number that should have come from there. What counts as a hardware number:

  sm count       a bare literal of a data-center GPU's SM count or twice it (78, 108,
                 114, 132, 216, 264), or any literal given to a name of SMs (TC_SMS = ...)
  shared memory  a size in KiB (N * 1024, N << 10; any X * 1024 is taken for one, or for
                 a block's most threads), a byte count of a GPU's shared memory (49152 =
                 48 KiB static a block, 98304, 101376, 102400, 166912, 167936, 232448,
                 233472), 65536 or 32768 beside the words shared/smem, or a literal given
                 to a name of shared memory (SMEM_..., ..._SHARED)
  registers      255 (a thread's most), 64 * 1024 (an SM's), or a literal given to a name
                 of registers (..._REGS, REGISTERS)
  block sizes    a literal given to a name of threads or blocks (MMA_THREADS = 256,
                 CODEGEN_BLOCK = 256, ..._MAX_BLOCKS = 4096, BLOCK_SIZE), a literal block
                 argument of cg_kernel_step / cg_kernel_step_values, a literal in
                 __launch_bounds__( or .block = , and in generated code a thread stride
                 spelled as a number (`e = tid; ...; e += 256`, `tid + rank * 256`)
  arch tests     sm / cc compared with a compute capability (`cg->sm >= 90`): ask the
                 target for the feature (clusters, an instruction) instead

What does not count: the warp size (32: CUDA's programming model on every GPU, which
every warp-level kernel is written around: lane & 31, __shfl_xor_sync); a kernel's own
structure (a tile of 64 rows, a kernel written for 8 warps that names MMA_WARPS = 8 and
derives its threads from it); limits of the compiler's own making (FUSE_MAX_NODES = 256,
FOLD_MAX_ELEMENTS = 65536: element and node counts); CUDA's limit on kernel parameter
bytes (codegen.h: the toolkit's, the same on every GPU); and `#if __CUDA_ARCH__ >= 890`
inside the generated CUDA, which NVRTC evaluates for the arch it compiles. A line that
truly needs a number the patterns take for hardware says why in a comment holding
"hardware-ok:"; there are none today.

Run with --self-test to check the patterns against lines that were hardware numbers
before the target table (they must be caught) and ordinary constants (they must not).
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ("codegen", "passes")

SM_COUNTS = r"\b(78|108|114|132|216|264)\b"
SMEM_BYTES = r"\b(49152|98304|101376|102400|166912|167936|232448|233472)\b"
# a name of a hardware quantity given a plain number (enum member, #define, variable)
HW_NAME = (r"\b(\w*(_SMS|SM_COUNT|SMEM\w*|_SHARED|SHARED_\w*|_REGS|REGISTERS\w*|_THREADS|"
           r"_BLOCK|_BLOCKS|BLOCK_SIZE|WARP_SIZE)|SMS|THREADS|BLOCK)\s*=\s*\(?\s*\d[\d\s*+<>/()x]*[,;}\n]")
PLAIN = [
    ("an SM count", re.compile(SM_COUNTS)),
    ("a shared-memory size", re.compile(SMEM_BYTES)),
    ("a size in KiB or a block's most threads", re.compile(r"\*\s*1024\b|\b\d+\s*<<\s*10\b")),
    ("a shared-memory size", re.compile(r"(?i)(shared|smem)\w*\W[^;]*\b(65536|32768)\b|\b(65536|32768)\b[^;]*(shared|smem)")),
    ("a register count", re.compile(r"\b255\b|\b[Rr][Ee][Gg][Ss]?\w*\W[^;]*\b65536\b")),
    ("a hardware quantity", re.compile(HW_NAME)),
    ("a launch bound", re.compile(r"__launch_bounds__\(\s*\d|\.block\s*=\s*\d|blockDim\s*=\s*\{\s*\d")),
    ("an arch test", re.compile(r"\b(sm|cc|arch|->sm|\.sm)\s*(>=|<=|>|<|==|!=)\s*\d{2,3}\b")),
]
# in the text of generated CUDA (string literals): a thread stride written as a number
STRIDE = re.compile(r"\b(tid|threadIdx\.x)\b[^\"]*?(\+=|\+|\*)\s*(64|128|256|512|1024)\b"
                    r"|\+=\s*(128|256|512|1024)\s*\)")


def strip(src):
    """The source with comments blanked (newlines kept), and the string literals apart:
    (code, strings), each the same length as src."""
    code, strs = [], []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank = re.sub(r"[^\n]", " ", src[i:j])
            code.append(blank)
            strs.append(blank)
            i = j
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            code.append(" " * (j - i))
            strs.append(" " * (j - i))
            i = j
        elif c == '"' or c == "'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            text = src[i:j]
            code.append(c + " " * (len(text) - 2) + c if len(text) >= 2 else text)
            strs.append(text)
            i = j
        else:
            code.append(c)
            strs.append(" " if c != "\n" else "\n")
            i += 1
    return "".join(code), "".join(strs)


def call_args(code, start):
    """The top-level arguments of the call whose '(' is at start, and where it ends."""
    depth, args, cur, i = 0, [], [], start
    while i < len(code):
        c = code[i]
        if c == "(":
            depth += 1
            if depth == 1:
                i += 1
                continue
        elif c == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip())
                return args, i
        elif c == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    return args, i


def findings(src):
    """(line, what, text) for each hardware number in one file's source."""
    code, strs = strip(src)
    lines = src.split("\n")
    allowed = {k + 1 for k, l in enumerate(lines) if "hardware-ok:" in l}
    out = []

    def add(pos, what):
        line = src.count("\n", 0, pos) + 1
        if line not in allowed:
            out.append((line, what, lines[line - 1].strip()))

    for what, rx in PLAIN:
        for m in rx.finditer(code):
            add(m.start(), what)
    for m in STRIDE.finditer(strs):
        add(m.start(), "a thread stride in generated code")
    for m in re.finditer(r"__launch_bounds__\(\s*\d", strs):
        add(m.start(), "a launch bound")
    for m in re.finditer(r"\bcg_kernel_step(_values)?\s*\(", code):
        args, _ = call_args(code, m.end() - 1)
        if len(args) > 4 and re.fullmatch(r"\(?\s*(unsigned)?\s*\)?\s*\d+[uU]?", args[4]):
            add(m.start(), "a literal block size")
    seen, uniq = set(), []
    for f in sorted(out):
        if (f[0], f[1]) not in seen:
            seen.add((f[0], f[1]))
            uniq.append(f)
    return uniq


# Lines of codegen/ before the target table (all must be caught), and ordinary constants
# of the same files (none may be).
CAUGHT = [
    "enum { TC_TILE = 64, TC_BK = 32, TC_SMS = 132, TC_MAX_SPLIT = 4 };",
    "enum { MMA_BK = 32, MMA_THREADS = 256, MMA_SMS = 132, MMA_MAX_SPLIT = 8 };",
    "  SMEM_FLOATS = 48 * 1024 / 4, /* static shared memory */",
    "enum { CODEGEN_BLOCK = 256, CODEGEN_MAX_BLOCKS = 4096 };",
    "enum { WARPS = CODEGEN_BLOCK / 32, TOPK_SHARED = 32768 };",
    "  MMA_SMS = 132, /* the tiles that fill an H100 twice over */",
    "    if (batch * ((sq + c - 1) / c) >= 264 || c == 4)",
    "  if (cg->sm < 90 || s < 2)",
    "  cg_kernel_step_values(cg, a->root, name, cg_blocks(tiles, 1), 256, a->in, a->nin, &a->y, 1);",
    '  buf_printf(b, "%sfor (int e = tid; e < %" PRId64 "; e += 256) {\\n", ind, n);',
    '      "        const int e = tid + 256 * q, r = e >> 3, c = e & 7;\\n"',
    '      "    for (int e = tid + rank * 256; e < 64 * 16; e += %" PRId64 ") {\\n"',
    '  buf_printf(b, " */\\nextern \\"C\\" __global__ void __launch_bounds__(256");',
    "  return n + (int64_t)4096 * 1024 < INT32_MAX;",
    "  return n + (int64_t)CODEGEN_MAX_BLOCKS * 1024 < INT32_MAX ? \"int\" : \"long long\";",
    "  int smem = 227 << 10;",
    "  if (bytes > 49152)",
    "  int regs_per_sm = 65536;",
    "  cg->maxrregcount = 255;",
]
PASSED = [
    "enum { FUSE_MAX_NODES = 256 };",
    "enum { FOLD_MAX_ELEMENTS = 65536 };",
    "enum { ROW_BLOCK_MIN = 2048 };",
    "  char msg[1024];",
    "enum { PAD_MIN_WEIGHTS = 1 << 16 };",
    "  MMA_WARPS = 8, /* a block's warps: the kernel is written for 8 */",
    "  MMA_THREADS = MMA_WARPS * 32,",
    "  char buf[256];",
    "  char name[512];",
    '  buf_puts(b, "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\\n");',
    '      "  typedef union alignas(128) { struct { float a[64][32]; } st[3]; } gc_smem;\\n"',
    "  cg_kernel_step(cg, n, name, 1, cg->target->block);",
    "  cg_kernel_step(cg, n, name, cg_blocks(cg, rows, 1), (unsigned)cg->target->block);",
    '    "#if __CUDA_ARCH__ >= 890\\n"',
    "  int64_t slots = 2 * cg->target->sms * TC_TILE, work = M * NT;",
    "  enum { FUSE_MAX_CONCAT_INPUTS = 128 };",
    "  /* CODEGEN_BLOCK = 256 in a comment is no code */",
]


def self_test():
    bad = 0
    for line in CAUGHT:
        if not findings(line + "\n"):
            print(f"self-test: not caught: {line}")
            bad += 1
    for line in PASSED:
        for f in findings(line + "\n"):
            print(f"self-test: false positive ({f[1]}): {line}")
            bad += 1
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--self-test", action="store_true", help="check the patterns too")
    args = ap.parse_args()
    bad = self_test() if args.self_test else 0
    for folder in FOLDERS:
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(folder, name)
            with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                for line, what, text in findings(f.read()):
                    print(f"{path}:{line}: {what} (take it from the target, ir.h): {text}")
                    bad += 1
    if bad:
        print(f"hardware_numbers: {bad} problem(s)", file=sys.stderr)
        return 1
    print("hardware_numbers: no hardware number in codegen/ or passes/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
