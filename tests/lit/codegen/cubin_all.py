#!/usr/bin/env python3
"""Every generated kernel compiles: NVRTC over every graph of the repository.

The cases: each .gir file under examples/ and tests/ that roundtrip.py treats as a valid
graph (not tests/lit/errors/, not a test that expects gpucc to fail), with the default
pipeline; then the real models of tests/models/data/*.onnx, each also with every lowered
--precision (tf32, bf16, fp16, and fp8 calibrated on the model's recorded inputs).
Symbolic dims are bound to 2 (`--dim N=2`), one by one, as codegen names them.

Two steps, so that NVRTC compiles each distinct kernel once (the same kernels come back
across the cases: a model's TorchScript and dynamo exports, its precisions, the test
graphs of one op):

`sources` runs `gpucc F --emit=cuda` (the module `gpucc F --emit=cubin` would compile)
and `gpucc F --emit=plan` (the limits and the memory plan that run before NVRTC) for
every case. A case with an op or dtype that has no GPU kernel yet is skipped, and listed;
any other failure fails the test, and so does a skipped example or a skipped lowering of
a model whose f32 compiles. Each module is split into its preamble and its kernels (only
comments may lie between them, every kernel's name must be unique in its module), the
kernels are deduplicated by their text (the name aside) and preamble, and written, each
under a name of its own, into files of a few dozen kernels behind their preamble: the
shards' work, balanced by the kernels' bytes (a fair measure of their NVRTC time), in
TMP/shard-K/. Nothing of an earlier run is read: the folder is emptied first.

`compile --shard K/N` compiles shard K's files with tests/lit/codegen/nvrtc_files.c
(gpucc's own NVRTC module and options, for gpucc's default architecture, no cache). A
file that fails is compiled again kernel by kernel, and each failing kernel is reported
with NVRTC's log and the cases it came from.

usage: cubin_all.py sources --gpucc PATH [--tmp DIR] [--shards N] [--jobs J]
       cubin_all.py compile --nvrtc-files PATH [--tmp DIR] --shard K/N
       cubin_all.py all --gpucc PATH --nvrtc-files PATH [--tmp DIR]   (both, by hand)

ctest runs `sources` as the fixture codegen_cubin/sources and the shards as
codegen_cubin/K (tests/CMakeLists.txt).
"""

import argparse
import concurrent.futures
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests"))
from roundtrip import expects_failure, find_graphs  # noqa: E402

UNSUPPORTED = re.compile(r"has no GPU kernel yet|has no GPU support yet")
UNBOUND = re.compile(r"bind (\S+) with --dim")
# a kernel's first line, and the comment that heads the first kernel (where the
# preamble ends); a kernel ends at the first "}" in column 0
KERNEL = re.compile(r'^extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?'
                    r'(?:__cluster_dims__\([^)]*\) )?(\w+)\(', re.M)
FIRST_HEAD = re.compile(r"^/\* (?:node \d+|fuse group \d+ =)", re.M)
COMMENT = re.compile(r"/\*.*?\*/", re.S)
# kernel text (besides the preamble) in one file of a shard
FILE_BYTES = 64 << 10


def cases():
    """(path, extra options) of every case, in order: the graphs, the models in f32,
    then the models' lowerings."""
    models = sorted(glob.glob(os.path.join(REPO_ROOT, "tests", "models", "data", "*.onnx")))
    models = [os.path.relpath(m, REPO_ROOT) for m in models]
    graphs = [g for g in find_graphs() if not expects_failure(g)]
    todo = [(p, ()) for p in graphs + models]
    todo += [(m, ("--precision=" + p,)) for m in models for p in ("tf32", "bf16", "fp16")]
    for m in models:  # fp8, calibrated on the recorded inputs (data/<model>.in.<name>.npy)
        model = os.path.basename(m)[:-5].rsplit("-", 1)[0]
        calib = sorted(glob.glob(os.path.join(os.path.dirname(m), model + ".in.*.npy")))
        todo.append((m, ("--precision=fp8",) + tuple(
            f"--calibrate={os.path.basename(c)[len(model) + 4:-4]}={c}" for c in calib)))
    return todo


def gpucc_run(gpucc, args):
    r = subprocess.run([gpucc] + args, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=600)
    return r.returncode, r.stdout.decode("utf-8", "replace"), \
        r.stderr.decode("utf-8", "replace").strip()


def emit_case(gpucc, path, extra):
    """(status, message, CUDA C): 'ok', 'skip' or 'fail'."""
    dims = []
    for _ in range(16):
        bound = [f"--dim={d}=2" for d in dims] + list(extra)
        rc, src, err = gpucc_run(gpucc, [path, "--emit=cuda"] + bound)
        if rc == 0:
            rc, _, err = gpucc_run(gpucc, [path, "--emit=plan"] + bound)
            if rc:
                return "fail", "--emit=plan: " + err, None
            return "ok", "", src
        m = UNBOUND.search(err)
        if m and m.group(1) not in dims:
            dims.append(m.group(1))
            continue
        if UNSUPPORTED.search(err):
            return "skip", err.splitlines()[0], None
        return "fail", err, None
    return "fail", "too many symbolic dims", None


def split_module(src):
    """(preamble, [(name, kernel text)]), or a string saying why the module does not
    split: anything but comments between the kernels, or a name given twice. The preamble
    ends at the first kernel's comment (or at the kernel, without one)."""
    first = KERNEL.search(src)
    if not first:
        return src, []
    head = FIRST_HEAD.search(src, 0, first.start())
    cut = head.start() if head else first.start()
    starts = list(KERNEL.finditer(src, cut))
    kernels, at = [], cut
    for m in starts:
        end = src.find("\n}\n", m.start())
        if end < 0 or COMMENT.sub("", src[at:m.start()]).strip():
            return f"text that is not a kernel before {m.group(1)}", None
        kernels.append((m.group(1), src[m.start():end + 3]))
        at = end + 3
    if COMMENT.sub("", src[at:]).strip():
        return "text that is not a kernel after the last kernel", None
    names = [n for n, _ in kernels]
    twice = sorted(set(n for n in names if names.count(n) > 1))
    if twice:
        return "kernels named twice: " + ", ".join(twice), None
    return src[:cut], kernels


def sources(args):
    shutil.rmtree(args.tmp, ignore_errors=True)
    os.makedirs(args.tmp)
    todo = cases()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda c: emit_case(args.gpucc, *c), todo))
    counts = {"ok": 0, "skip": 0, "fail": 0}
    supported = set()
    preambles = {}  # text -> index
    distinct = {}   # (preamble, kernel text with its name as KNAME) -> [name, [cases]]
    nkernels = 0
    for (path, extra), (status, msg, src) in zip(todo, results):
        label = path + (" " + extra[0] if extra else "")
        if status == "ok":
            pre, kernels = split_module(src)
            if kernels is None:
                status, msg = "fail", "cannot split the module into kernels: " + pre
        if status == "fail" or (status == "skip" and path.startswith("examples" + os.sep)):
            status = "fail"
        if status == "skip" and path in supported:  # f32 compiles: so must the lowering
            status = "fail"
        if status == "ok":
            if not extra:
                supported.add(path)
            p = preambles.setdefault(pre, len(preambles))
            for name, text in kernels:
                m = KERNEL.match(text)
                key = (p, text[:m.start(1)] + "KNAME" + text[m.end(1):])
                distinct.setdefault(key, [name, []])[1].append(label)
            nkernels += len(kernels)
        counts[status] += 1
        print(f"{status.upper():4} {label}{': ' + msg if msg else ''}")
    print(f"{counts['ok']} cases to CUDA C, {counts['skip']} skipped (no GPU kernel yet), "
          f"{counts['fail']} failed; {nkernels} kernels, {len(distinct)} distinct")

    # the shards: the largest kernels first, each to the shard with the fewest bytes
    shards = [[] for _ in range(args.shards)]
    load = [0] * args.shards
    for key in sorted(distinct, key=lambda k: (-len(k[1]), k)):
        s = load.index(min(load))
        shards[s].append(key)
        load[s] += len(key[1])
    pre_text = {i: t for t, i in preambles.items()}
    for s, keys in enumerate(shards):
        folder = os.path.join(args.tmp, f"shard-{s + 1}")
        os.makedirs(folder)
        files, batch, size = [], [], 0
        for key in sorted(keys) + [None]:
            if batch and (key is None or key[0] != batch[0][0] or
                          size + len(key[1]) > FILE_BYTES):
                files.append(batch)
                batch, size = [], 0
            if key is not None:
                batch.append(key)
                size += len(key[1])
        manifest = []
        for f, batch in enumerate(files):
            entries = []
            for p, text in batch:
                name, where = distinct[(p, text)]
                # a name of its own: the first name codegen gave it, and its hash
                unique = name + "_" + hashlib.sha1(text.encode()).hexdigest()[:10]
                m = KERNEL.match(text)
                entries.append({"name": unique, "cases": where,
                                "text": text[:m.start(1)] + unique + text[m.end(1):]})
            path = os.path.join(folder, f"{f:03}.cu")
            with open(path, "w") as out:
                out.write(pre_text[batch[0][0]] + "".join(e["text"] for e in entries))
            manifest.append({"file": path, "preamble": batch[0][0], "kernels": entries})
        with open(os.path.join(folder, "manifest.json"), "w") as out:
            json.dump({"shards": args.shards, "preambles": pre_text, "files": manifest}, out)
    print(f"{len(preambles)} preamble(s); kernel bytes per shard: {load}")
    return 1 if counts["fail"] or counts["ok"] == 0 else 0


def nvrtc(tool, files):
    """{file: None when it compiled, else NVRTC's message}."""
    r = subprocess.run([tool] + files, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=1200)
    out = "\n" + r.stdout.decode("utf-8", "replace")
    # each file's answer, in order: "ok FILE" or "FAIL FILE: " and NVRTC's message
    got, at = {}, []
    for f in files:
        i = min((j for j in (out.find(f"\nok {f}\n"), out.find(f"\nFAIL {f}: ")) if j >= 0),
                default=-1)
        at.append(i)
    for k, f in enumerate(files):
        i = at[k]
        if i < 0:
            got[f] = f"no answer from nvrtc_files (exit {r.returncode}): " + \
                r.stderr.decode("utf-8", "replace")[-2000:]
        elif out.startswith(f"\nok {f}\n", i):
            got[f] = None
        else:
            ends = [j for j in at[k + 1:] if j > i]
            got[f] = out[i + len(f"\nFAIL {f}: "):min(ends, default=len(out))]
    return got


def compile_shard(args):
    k, n = (int(x) for x in args.shard.split("/"))
    folder = os.path.join(args.tmp, f"shard-{k}")
    try:
        with open(os.path.join(folder, "manifest.json")) as f:
            manifest = json.load(f)
    except OSError as e:
        print(f"FAIL no kernels from `cubin_all.py sources` for shard {k}: {e}")
        return 1
    if manifest["shards"] != n:
        print(f"FAIL `cubin_all.py sources` made {manifest['shards']} shards, not {n}")
        return 1
    files = manifest["files"]
    result = nvrtc(args.nvrtc_files, [f["file"] for f in files]) if files else {}
    failed = 0
    for f in files:
        if result[f["file"]] is None:
            print(f"ok   {os.path.basename(f['file'])}: {len(f['kernels'])} kernels")
            continue
        # which kernels: each alone behind its preamble
        alone = []
        for i, e in enumerate(f["kernels"]):
            path = f"{f['file'][:-3]}-{i:03}.cu"
            with open(path, "w") as out:
                out.write(manifest["preambles"][str(f["preamble"])] + e["text"])
            alone.append(path)
        again = nvrtc(args.nvrtc_files, alone)
        culprits = [(e, again[p]) for e, p in zip(f["kernels"], alone) if again[p] is not None]
        if not culprits:  # only together: say so, with the file's message
            culprits = [({"name": os.path.basename(f["file"]),
                          "cases": sorted(set(c for e in f["kernels"] for c in e["cases"]))},
                         "each kernel alone compiles; together: " + result[f["file"]])]
        for e, msg in culprits:
            failed += 1
            print(f"FAIL {e['name']} (from {', '.join(e['cases'])}):\n{msg.strip()}")
    nk = sum(len(f["kernels"]) for f in files)
    print(f"shard {k}/{n}: {nk - failed} of {nk} distinct kernels compiled "
          f"({len(files)} files)")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=("sources", "compile", "all"))
    ap.add_argument("--gpucc")
    ap.add_argument("--nvrtc-files", help="the nvrtc_files tool (tests/CMakeLists.txt)")
    ap.add_argument("--tmp", default="/tmp/gpucc-cubin-all")
    ap.add_argument("--shards", type=int, default=4, help="sources: how many shards")
    ap.add_argument("--jobs", type=int, default=2, help="sources: gpucc runs at once")
    ap.add_argument("--shard", default="1/1", help="compile: K/N, the Kth of N shards")
    args = ap.parse_args()
    if args.step in ("sources", "all") and not args.gpucc:
        ap.error("sources needs --gpucc")
    if args.step in ("compile", "all") and not args.nvrtc_files:
        ap.error("compile needs --nvrtc-files")
    if args.step == "compile":
        k, n = (int(x) for x in args.shard.split("/"))
        if not 1 <= k <= n:
            ap.error(f"--shard {args.shard}: K must be in 1..N")
        return compile_shard(args)
    if args.step == "sources":
        if args.shards < 1:
            ap.error("--shards must be at least 1")
        return sources(args)
    args.shards = 1
    rc = sources(args)
    args.shard = "1/1"
    return compile_shard(args) or rc


if __name__ == "__main__":
    sys.exit(main())
