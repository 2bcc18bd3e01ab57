#!/usr/bin/env python3
"""ONNX conformance: gpucc's reference executor against ONNX's own backend test data.

Debian's libonnx-testdata installs ONNX's backend test suite under
/usr/share/libonnx-testdata/data/<suite>/<case>/: model.onnx plus test_data_set_*/
input_*.pb and output_*.pb (TensorProto). For each case:
  1. the model's graph inputs and outputs must be tensors of a type gpucc's .npy files
     carry (f64 f32 f16 i64 i32 i16 i8 u8 bool), else the case is unsupported;
  2. `gpucc MODEL --check-ops`: exit 1 means unsupported (the ops it names are recorded);
  3. otherwise, for every data set: the inputs are written as .npy named by the graph's
     input names, `gpucc run MODEL --cpu --input NAME=PATH ... --output-dir DIR` runs, and
     every output is compared: dtype and shape exact, values like ONNX's own runner
     (numpy assert_allclose with rtol 1e-3, atol 1e-7, NaN equal to NaN), ints and bools
     exact.
tests/onnx/expected_unsupported.txt lists the cases expected to be unsupported, one per
line as "suite/case  # reason". The run fails when a case whose ops are all supported
fails, when an unsupported case is not listed, when a listed case passes or no longer
exists: the list must stay true. `--update-expected` rewrites it from this run.

Prints per-suite counts, the unsupported ops with the number of cases each blocks, the
failures, and last "N passed, M failed". Exits 0 when nothing failed, 1 otherwise, and 77
(ctest's SKIP_RETURN_CODE) when the test data is not installed.

usage: conformance.py --gpucc PATH [--data DIR] [--tmp DIR] [--jobs N] [--timeout S]
                      [--suite NAME]... [--filter REGEX] [--expected FILE]
                      [--update-expected] [--keep] [--gpu] [-v]
"""

import argparse
import collections
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = "/usr/share/libonnx-testdata/data"
SKIP = 77
RTOL, ATOL = 1e-3, 1e-7
# --gpu: the GPU's fp32 (TF32 off) against the reference executor's fp32 with fp64 sums.
GPU_RTOL, GPU_ATOL = 1e-4, 1e-5

# ONNX TensorProto.DataType values whose tensors travel as .npy between us and gpucc
# (ir/tensorio.c reads and writes exactly these numpy dtypes).
NPY_TYPES = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64",
             9: "bool", 10: "float16", 11: "float64"}
ONNX_TYPE_NAMES = {0: "undefined", 1: "float32", 2: "uint8", 3: "int8", 4: "uint16",
                   5: "int16", 6: "int32", 7: "int64", 8: "string", 9: "bool",
                   10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
                   14: "complex64", 15: "complex128", 16: "bfloat16",
                   17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2",
                   20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1"}

HEADER = """\
# Cases of /usr/share/libonnx-testdata/data that gpucc does not support yet, one per line:
# "suite/case  # reason". tests/onnx/conformance.py fails when a listed case passes (take
# it out) and when an unsupported case is missing here. Regenerate after widening the op
# coverage with:  tests/onnx/conformance.py --gpucc BUILD/gpucc --update-expected
"""


class Result:
    """One case's outcome: status is passed, failed, unsupported or skipped; blockers
    names what makes an unsupported case unsupported (ops, or <pseudo-ops> such as
    '<dtype bfloat16>'), reason says it in one line."""

    def __init__(self, name, status, reason="", blockers=()):
        self.name = name
        self.status = status
        self.reason = reason
        self.blockers = list(blockers)

    @property
    def suite(self):
        return self.name.split("/", 1)[0]


class Runner:
    def __init__(self, args, onnx, numpy_helper):
        self.args = args
        self.onnx = onnx
        self.numpy_helper = numpy_helper
        self.lock = threading.Lock()
        self.done = 0
        self.gpu_runs = 0  # --gpu: data sets that ran on the GPU and matched
        # gpucc before its ONNX frontend landed: every case is unsupported for that one
        # reason, rather than failing on an unknown option.
        rc, out = self.gpucc(["--help"])
        self.no_frontend = rc is not None and "--check-ops" not in out

    # ------------------------------------------------------------------ gpucc calls

    def gpucc(self, argv):
        """(returncode, merged output); returncode None on timeout."""
        try:
            p = subprocess.run([self.args.gpucc] + argv, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=self.args.timeout,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return None, "timed out after %g s" % self.args.timeout
        return p.returncode, p.stdout.decode("utf-8", "replace")

    # ------------------------------------------------------------------ one case

    def run_case(self, name, folder):
        try:
            r = self.run_case_unguarded(name, folder)
        except Exception as e:  # a runner bug must show as this case's failure, not a hang
            r = Result(name, "failed", "runner: %s: %s" % (type(e).__name__, e))
        with self.lock:
            self.done += 1
            if self.args.verbose:
                print("%-11s %s%s" % (r.status, name, ": " + r.reason if r.reason else ""),
                      flush=True)
        return r

    def run_case_unguarded(self, name, folder):
        model_path = os.path.join(folder, "model.onnx")
        if not os.path.isfile(model_path):
            return Result(name, "skipped", "no model.onnx (the package ships only a "
                          "download address for it)")
        if self.no_frontend:
            return Result(name, "unsupported", "gpucc has no ONNX frontend yet (its --help "
                          "names no --check-ops)", ["<no ONNX frontend>"])
        model = self.onnx.load(model_path)
        graph = model.graph
        inits = {t.name for t in graph.initializer}
        inputs = [v for v in graph.input if v.name not in inits]

        blockers, details = [], []
        for kind, values in (("input", inputs), ("output", graph.output)):
            for v in values:
                b = value_blocker(v)
                if b:
                    blockers.append(b)
                    details.append("%s '%s' is %s" % (kind, v.name, b.strip("<>")))

        sets = sorted(d for d in os.listdir(folder) if d.startswith("test_data_set_"))
        rc, out = self.gpucc([model_path, "--check-ops"])
        # An AOT compiler with static shapes needs the inputs that decide shapes (a
        # Reshape's shape, TopK's K, Resize's scales...) at compile time: the runner fixes
        # the graph inputs that --check-ops asks for with --const, as a user would.
        frozen = []
        if rc == 1 and "must be a constant" in out and sets:
            wanted = set(re.findall(r"--const (\S+?)=FILE\.npy", out))
            frozen = [i for i, v in enumerate(inputs) if v.name in wanted]
            if frozen:
                work = os.path.join(self.args.tmp, name, "check")
                os.makedirs(work, exist_ok=True)
                given = self.read_tensors(os.path.join(folder, sets[0]), "input")
                argv = [model_path, "--check-ops"]
                for i in frozen:
                    path = os.path.join(work, "input_%d.npy" % i)
                    np.save(path, np.array(given[i], order="C"), allow_pickle=False)
                    argv += ["--const", "%s=%s" % (inputs[i].name, path)]
                rc, out = self.gpucc(argv)
        if rc is None or rc not in (0, 1):
            return Result(name, "failed", "--check-ops: %s" % exit_text(rc, out))
        if rc == 1:
            ops = ops_named(out.replace(model_path, "model.onnx"), model_op_types(graph))
            if ops:
                blockers += [op for op, _ in ops]
                details[:0] = [line for _, line in ops]
            else:
                line = first_line(out.replace(model_path, "model.onnx"), True)
                line = re.sub(r"^(gpucc|model\.onnx):\s*(error:\s*)?", "", line) or \
                    "exit 1 without a message"
                blockers.append("<load error: %s>" % line)
                details.insert(0, "load error: " + line)
        if blockers:
            return Result(name, "unsupported", "; ".join(details), dedup(blockers))

        if not sets:
            return Result(name, "failed", "runner: no test_data_set_* folder")
        work = os.path.join(self.args.tmp, name)
        for s in sets:
            why = self.run_data_set(model_path, inputs, graph.output,
                                    os.path.join(folder, s), os.path.join(work, s), frozen)
            if why and frozen and rc == 0 and UNSUPPORTED_VALUE.search(why):
                # a value given with --const that gpucc refuses (Dropout's training_mode
                # true): --check-ops could not see it, the compile says so
                op = re.search(r"\(#\d+, (\w+), opset", why)
                return Result(name, "unsupported", why, [op.group(1) if op else "<value>"])
            if why:
                label = s if len(sets) > 1 else ""
                return Result(name, "failed", (label + ": " if label else "") + why)
        if not self.args.keep:
            shutil.rmtree(work, ignore_errors=True)
        return Result(name, "passed")

    def run_data_set(self, model_path, inputs, outputs, data_dir, work, frozen):
        """None when gpucc's outputs match, else why not (one line)."""
        in_dir = os.path.join(work, "inputs")
        out_dir = os.path.join(work, "outputs")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(in_dir)

        given = self.read_tensors(data_dir, "input")
        if len(given) != len(inputs):
            return ("runner: %d input files for the %d graph inputs"
                    % (len(given), len(inputs)))
        argv = ["run", model_path, "--cpu"]
        for i, (v, arr) in enumerate(zip(inputs, given)):
            path = os.path.join(in_dir, "input_%d.npy" % i)
            np.save(path, np.array(arr, order="C"), allow_pickle=False)  # keeps 0-d shapes
            argv += ["--const" if i in frozen else "--input", "%s=%s" % (v.name, path)]
        argv += ["--output-dir", out_dir]
        rc, out = self.gpucc(argv)
        if rc != 0:
            return "gpucc run: " + exit_text(rc, out.replace(model_path, "model.onnx"))
        if self.args.gpu:
            why = self.run_on_gpu(model_path, argv, outputs, work, out_dir)
            if why:
                return why

        expected = self.read_tensors(data_dir, "output")
        if len(expected) != len(outputs):
            return ("runner: %d output files for the %d graph outputs"
                    % (len(expected), len(outputs)))
        for v, want in zip(outputs, expected):
            path = os.path.join(out_dir, escape_name(v.name) + ".npy")
            if not os.path.isfile(path):
                return "output '%s': gpucc wrote no %s" % (v.name, os.path.basename(path))
            try:
                got = np.load(path, allow_pickle=False)
            except Exception as e:
                return "output '%s': unreadable .npy: %s" % (v.name, e)
            why = compare(got, want)
            if why:
                return "output '%s': %s" % (v.name, why)
        return None

    def run_on_gpu(self, model_path, cpu_argv, outputs, work, cpu_dir):
        """--gpu: the case compiled to a model.so (its --const inputs frozen), run on the
        GPU with the same inputs, and compared with the reference executor's outputs
        (GPU_RTOL, GPU_ATOL). None when they match, else why not."""
        so = os.path.join(work, "model.so")
        gpu_dir = os.path.join(work, "gpu")
        consts = [a for i, a in enumerate(cpu_argv[1:]) if cpu_argv[i] == "--const"]
        inputs = [a for i, a in enumerate(cpu_argv[1:]) if cpu_argv[i] == "--input"]
        argv = [model_path, "-o", so]
        for c in consts:
            argv += ["--const", c]
        rc, out = self.gpucc(argv)
        if rc != 0:
            return "gpu: compiling the model.so: " + exit_text(rc, out.replace(model_path, "model.onnx"))
        argv = ["run", so, "--output-dir", gpu_dir]
        for i in inputs:
            argv += ["--input", i]
        rc, out = self.gpucc(argv)
        if rc != 0:
            return "gpu: gpucc run model.so: " + exit_text(rc, out.replace(so, "model.so"))
        for v in outputs:
            stem = escape_name(v.name) + ".npy"
            want = np.load(os.path.join(cpu_dir, stem), allow_pickle=False)
            path = os.path.join(gpu_dir, stem)
            if not os.path.isfile(path):
                return "gpu: output '%s': gpucc wrote no %s" % (v.name, stem)
            why = compare(np.load(path, allow_pickle=False), want, GPU_RTOL, GPU_ATOL)
            if why:
                return "gpu: output '%s' against the reference executor: %s" % (v.name, why)
        with self.lock:
            self.gpu_runs += 1
        return None

    def read_tensors(self, data_dir, prefix):
        """input_0.pb, input_1.pb, ... in numeric order, as numpy arrays."""
        pat = re.compile(r"^%s_(\d+)\.pb$" % prefix)
        found = sorted((int(m.group(1)), f) for f in os.listdir(data_dir)
                       for m in [pat.match(f)] if m)
        arrays = []
        for _, f in found:
            t = self.onnx.TensorProto()
            with open(os.path.join(data_dir, f), "rb") as fh:
                t.ParseFromString(fh.read())
            arrays.append(self.numpy_helper.to_array(t))
        return arrays


# ---------------------------------------------------------------------- helpers


# How gpucc refuses an input value it was given with --const.
UNSUPPORTED_VALUE = re.compile(r"exit 1: .*=\S+ is not supported")


def value_blocker(v):
    """None when v is a tensor whose type gpucc can be handed as .npy, else a pseudo-op
    naming why not."""
    t = v.type
    kind = t.WhichOneof("value")
    if kind != "tensor_type":
        return "<%s %s>" % ({"sequence_type": "sequence", "optional_type": "optional",
                             "map_type": "map", "sparse_tensor_type": "sparse tensor"}
                            .get(kind, str(kind)), "value")
    et = t.tensor_type.elem_type
    if et not in NPY_TYPES:
        return "<dtype %s>" % ONNX_TYPE_NAMES.get(et, str(et))
    return None


def model_op_types(graph):
    """Every op type in the graph and its subgraphs (If/Loop/Scan bodies)."""
    ops = set()
    for node in graph.node:
        ops.add(node.op_type)
        for a in node.attribute:
            if a.HasField("g"):
                ops |= model_op_types(a.g)
            for g in a.graphs:
                ops |= model_op_types(g)
    return ops


def ops_named(text, op_types):
    """[(op, line)] for the op types that --check-ops names, one per line of its output.
    Its wording is the driver's business; what we rely on is one line per op type with
    the op's name in it. Each line contributes the first of the model's op types it
    mentions, looking first after the word 'op', then in quotes, then anywhere (prose
    such as 'Not supported' could read as an op)."""
    found = []
    for line in text.splitlines():
        after_op = re.findall(r"\bop\s+['\"`]?([A-Za-z_][A-Za-z0-9_]*)", line)
        quoted = [q.rsplit(".", 1)[-1] for q in
                  re.findall(r"['\"`]([A-Za-z_][A-Za-z0-9_.]*)['\"`]", line)]
        words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", line)
        for cands in (after_op, quoted, words):
            hit = next((w for w in cands if w in op_types), None)
            if hit:
                if hit not in [op for op, _ in found]:
                    # the file name, node count and first node are noise in a reason
                    why = re.sub(r"^\S+\.onnx:\s*", "", line.strip())
                    found.append((hit, re.sub(r":\s*\d+ nodes?\b.*$", "", why)))
                break
    return found


def escape_name(name):
    """Output file stem as gpucc writes it: bytes outside [A-Za-z0-9_.-] become _xNN."""
    out = []
    for b in name.encode("utf-8"):
        c = chr(b)
        out.append(c if (c.isascii() and c.isalnum()) or c in "_.-" else "_x%02x" % b)
    return "".join(out)


def compare(got, want, rtol=RTOL, atol=ATOL):
    """None when got matches want like ONNX's runner would accept, else why not."""
    if got.dtype != want.dtype:
        return "dtype %s, expected %s" % (got.dtype, want.dtype)
    if got.shape != want.shape:
        return "shape %s, expected %s" % (list(got.shape), list(want.shape))
    if want.dtype.kind == "f":
        g = got.astype(np.float64)
        w = want.astype(np.float64)
        ok = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    else:
        g, w = got, want
        ok = g == w
    ok = np.asarray(ok)
    if ok.all():
        return None
    bad = np.argwhere(~ok) if ok.ndim else [()]
    first = tuple(int(i) for i in bad[0])
    msg = "%d of %d elements differ; first at %s: got %s, expected %s" % (
        int((~ok).sum()), ok.size, list(first), g[first], w[first])
    if want.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            diff = np.abs(g - w)[~ok]
        diff = diff[np.isfinite(diff)]
        if diff.size:
            msg += "; max abs diff %.3g" % diff.max()
    return msg


def exit_text(rc, out):
    line = first_line(out, prefer_error=True)
    if rc is None:
        return out
    status = "exit %d" % rc if rc >= 0 else "killed by signal %d" % -rc
    return "%s%s" % (status, ": " + line if line else "")


def first_line(text, prefer_error=False):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    if prefer_error:
        for l in lines:
            if "error" in l.lower() or "ERROR" in l:
                return l
    return lines[0] if lines else ""


def dedup(xs):
    return list(dict.fromkeys(xs))


def read_expected(path):
    """{case: reason} from the expected-unsupported list; exits on a malformed line."""
    listed = collections.OrderedDict()
    if not os.path.exists(path):
        return listed
    with open(path) as f:
        for n, line in enumerate(f, 1):
            text = line.split("#", 1)
            name = text[0].strip()
            if not name:
                continue
            if " " in name or "/" not in name:
                sys.exit("%s:%d: expected 'suite/case  # reason', got %r" % (path, n, line))
            listed[name] = text[1].strip() if len(text) > 1 else ""
    return listed


def write_expected(path, results, in_scope):
    """Rewrites the list: this run's unsupported cases, plus the old entries this run did
    not cover (a --suite or --filter run updates only its own part)."""
    keep = {n: why for n, why in read_expected(path).items() if not in_scope(n)}
    keep.update((r.name, r.reason) for r in results if r.status == "unsupported")
    rows = sorted(keep.items())
    width = max([len(n) for n, _ in rows] + [0])
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(HEADER)
        for n, why in rows:
            f.write("%-*s  # %s\n" % (width, n, why))
    os.replace(tmp, path)
    return len(rows)


def discover(data, suites, pattern):
    """[(suite/case, folder)] sorted, restricted to the suites asked for and to names
    matching the pattern."""
    cases = []
    for suite in sorted(os.listdir(data)):
        sdir = os.path.join(data, suite)
        if not os.path.isdir(sdir) or (suites and suite not in suites):
            continue
        for case in sorted(os.listdir(sdir)):
            name = suite + "/" + case
            if os.path.isdir(os.path.join(sdir, case)) and \
               (not pattern or re.search(pattern, name)):
                cases.append((name, os.path.join(sdir, case)))
    return cases


# ---------------------------------------------------------------------- reporting


def check_against_list(results, listed, in_scope):
    """Turns disagreements with the expected-unsupported list into failures, so each case
    keeps one status and the counts add up."""
    out = []
    names = {r.name for r in results}
    for r in results:
        if r.status == "unsupported" and r.name not in listed:
            r = Result(r.name, "failed", "unsupported (%s) but not listed in "
                       "expected_unsupported.txt: add it, or run --update-expected"
                       % r.reason, r.blockers)
        elif r.status == "passed" and r.name in listed:
            r = Result(r.name, "failed", "passes now but is listed in "
                       "expected_unsupported.txt: remove it from the list")
        elif r.status == "failed" and r.name in listed:
            r = Result(r.name, "failed", r.reason + " (listed as expected-unsupported, "
                       "but gpucc claims all its ops)")
        elif r.status == "skipped" and r.name in listed:
            r = Result(r.name, "failed", "listed in expected_unsupported.txt but skipped "
                       "(%s): remove it from the list" % r.reason)
        out.append(r)
    for name in listed:
        if name not in names and in_scope(name):
            out.append(Result(name, "failed", "listed in expected_unsupported.txt but "
                              "there is no such case: remove it from the list"))
    return out


def report(results, elapsed, jobs):
    suites = sorted({r.suite for r in results})
    counts = {s: collections.Counter() for s in suites}
    for r in results:
        counts[r.suite][r.status] += 1
    cols = ("passed", "failed", "unsupported", "skipped")
    print("%-20s %8s %8s %12s %8s" % (("suite",) + cols))
    for s in suites:
        print("%-20s %8d %8d %12d %8d" % ((s,) + tuple(counts[s][c] for c in cols)))
    total = collections.Counter(r.status for r in results)
    print("%-20s %8d %8d %12d %8d" % (("total",) + tuple(total[c] for c in cols)))

    blocked = collections.Counter()
    for r in results:
        if r.status == "unsupported":
            blocked.update(r.blockers)
    if blocked:
        print("\nunsupported ops (number of cases each blocks):")
        for op, n in sorted(blocked.items(), key=lambda kv: (-kv[1], kv[0])):
            print("  %-32s %5d" % (op, n))

    skipped = [r for r in results if r.status == "skipped"]
    if skipped:
        print("\nskipped: %d cases (%s)" % (len(skipped), skipped[0].reason))

    failed = [r for r in results if r.status == "failed"]
    if failed:
        print("\nfailures:")
        for r in failed:
            print("  %s: %s" % (r.name, first_line(r.reason)))

    print("\n%d cases in %.1f s with %d jobs: %d unsupported, %d skipped"
          % (len(results), elapsed, jobs, total["unsupported"], total["skipped"]))
    print("%d passed, %d failed" % (total["passed"], total["failed"]))
    return total["failed"]


class Tee:
    """stdout that also goes to a file."""

    def __init__(self, out, path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.out, self.file = out, open(path, "w")

    def write(self, s):
        self.out.write(s)
        self.file.write(s)

    def flush(self):
        self.out.flush()
        self.file.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpucc", default=os.environ.get("GPUCC"), help="the gpucc binary")
    ap.add_argument("--data", default=DEFAULT_DATA, help="the suites' folder")
    ap.add_argument("--tmp", help="scratch folder (default: a fresh temporary one)")
    ap.add_argument("--jobs", "-j", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60, help="seconds per gpucc call")
    ap.add_argument("--suite", action="append", default=[], help="only this suite")
    ap.add_argument("--filter", help="only cases whose suite/case matches this regex")
    ap.add_argument("--expected", default=os.path.join(HERE, "expected_unsupported.txt"))
    ap.add_argument("--update-expected", action="store_true",
                    help="rewrite the expected-unsupported list from this run")
    ap.add_argument("--summary", help="also write this report to a file (scripts/test.sh "
                    "prints it after the tests)")
    ap.add_argument("--keep", action="store_true", help="keep every case's scratch files")
    ap.add_argument("--gpu", action="store_true",
                    help="also compile every supported case to a model.so, run it on the "
                    "GPU and compare with the reference executor (rtol %g, atol %g)"
                    % (GPU_RTOL, GPU_ATOL))
    ap.add_argument("-v", "--verbose", action="store_true", help="a line per case")
    args = ap.parse_args()
    if args.summary:
        sys.stdout = Tee(sys.stdout, args.summary)

    if not os.path.isdir(args.data):
        print("onnx_conformance: skipped: %s is not there (Debian/Ubuntu: apt-get install "
              "libonnx-testdata; scripts/install-deps.sh does it)" % args.data)
        return SKIP
    if not args.gpucc:
        ap.error("--gpucc PATH is required (or set GPUCC)")
    if args.gpu:
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "gpu"))
        from gpu_models import cuda_device
        why = cuda_device()
        if why:
            print("onnx_conformance --gpu: skipped: %s" % why)
            return SKIP
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        print("onnx_conformance: error: the 'onnx' Python package is missing "
              "(python3 -m pip install onnx; scripts/install-deps.sh does it)",
              file=sys.stderr)
        return 1

    own_tmp = args.tmp is None
    if own_tmp:
        args.tmp = tempfile.mkdtemp(prefix="gpucc-onnx-")
    else:
        shutil.rmtree(args.tmp, ignore_errors=True)
        os.makedirs(args.tmp)

    cases = discover(args.data, set(args.suite), args.filter)
    print("onnx conformance: %d cases from %s, gpucc %s, %d jobs"
          % (len(cases), args.data, args.gpucc, args.jobs), flush=True)
    runner = Runner(args, onnx, numpy_helper)
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda c: runner.run_case(*c), cases))
    elapsed = time.monotonic() - start

    def in_scope(name):
        return (not args.suite or name.split("/", 1)[0] in args.suite) and \
               (not args.filter or re.search(args.filter, name))

    if args.update_expected:
        n = write_expected(args.expected, results, in_scope)
        print("wrote %d cases to %s" % (n, args.expected))
    listed = read_expected(args.expected)

    results = check_against_list(results, listed, in_scope)
    nfailed = report(results, elapsed, args.jobs)
    if args.gpu:
        print("gpu: %d data sets ran as a model.so on the GPU and matched the reference "
              "executor (rtol %g, atol %g)" % (runner.gpu_runs, GPU_RTOL, GPU_ATOL))
    if own_tmp and not args.keep and not nfailed:
        shutil.rmtree(args.tmp, ignore_errors=True)
    elif nfailed:
        print("scratch files of the failed cases: %s" % args.tmp, file=sys.stderr)
    return 1 if nfailed else 0


if __name__ == "__main__":
    sys.exit(main())
