#!/usr/bin/env python3
"""Every test graph and test model, compiled to a model.so and run on the GPU, against the
reference executor.

Cases:
  - every valid .gir of the repository (examples/ and tests/, as roundtrip.py finds them),
    symbolic dims bound to 2; inputs are gpucc's documented random inputs, the same for
    both runs; a graph whose matmuls ask for TF32 (tf32 = 1) is held to the tf32 bound
    by norm, as below, since the reference executor computes those in full precision;
  - every export of tests/models/data (or --data DIR: the full-size ones) with its
    recorded inputs.
For each: `gpucc FILE -o case.so`, `gpucc run case.so --output-dir gpu/` (the model.so's
own runtime, through dlopen), `gpucc run FILE --cpu --output-dir cpu/`, and every output
compared: dtype and shape exact; floats within rtol 1e-4 and atol 1e-5 (TF32 is off), with
two widenings: for the ONNX exports atol is 1e-5 times the output's largest magnitude (the
scale of fp32 rounding in a deep network), and f16 outputs may differ by one f16 step
(rtol 2^-10); integers and bools exact. The relative error by norm is reported too.
A graph with an op that has no GPU kernel is listed as unsupported, and a FileCheck graph
that the reference executor cannot run on random inputs (indices out of range, bf16
outputs that .npy cannot hold) as not run: neither fails. For the examples and the models
also: examples/run_model (dlopen of the model.so, no gpucc library) and examples/jit (the
JIT C API, in-process) must give the same outputs as `gpucc run case.so`, all three with
GPUCC_GEMM_TUNE=0 (the runtime's timed GEMM choice may differ from one load to the next).
And `gpucc run case.so --compare=reference` (the source the model.so records, held to
its precision's bound) must exit 0, for the models `--compare=onnxruntime` too where
onnxruntime imports, and the model.so against a copy of its model whose last layer's
weights are negated (`--model-source`) must exit 1, an output "beyond".

--precision P (tf32, fp16, bf16, fp8) compiles the ONNX exports only with --precision=P
(the twins too: examples/jit takes it) and holds their float outputs to the fp32 reference
within that mode's documented bound, relative error by norm (tests/precision.py). fp8
calibrates on other inputs than those it is tested on (calibration_inputs): a float input
drawn anew with the recorded one's mean and spread, an integer input (token ids, masks)
rolled by half its last dim.

Exit 77 (ctest's skip code) with a line saying so when there is no CUDA driver or device.

usage: gpu_models.py --gpucc PATH --run-model PATH --jit PATH [--data DIR] [--tmp DIR]
                     [--jobs N] [--filter REGEX] [--precision P] [--summary FILE]
"""

import argparse
import concurrent.futures
import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests"))
from precision import REL_BY_NORM  # noqa: E402
from roundtrip import expects_failure, find_graphs  # noqa: E402

SKIP = 77
RTOL, ATOL = 1e-4, 1e-5
SAME_RTOL, SAME_ATOL = 1e-6, 1e-7  # one compiled model, three ways of running it
UNSUPPORTED = re.compile(r"has no GPU kernel yet|has no GPU support yet|no GPU kernel for")
UNBOUND = re.compile(r"bind (\S+) with --dim")
NPY_DTYPES = {"f32": "float32", "f16": "float16", "f64": "float64", "i64": "int64",
              "i32": "int32", "i16": "int16", "i8": "int8", "u8": "uint8", "bool": "bool"}


def cuda_device():
    """None when a CUDA device is there, else why not."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return "no CUDA driver (%s)" % e
    if cuda.cuInit(0) != 0:
        return "cuInit failed: no usable CUDA device"
    n = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(n)) != 0 or n.value == 0:
        return "the CUDA driver sees no device"
    return None


def run(argv, timeout=900, env=None):
    """(returncode, stdout+stderr); returncode None on timeout. env: variables to add."""
    try:
        p = subprocess.run(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=timeout,
                           env=dict(os.environ, **env) if env else None)
    except subprocess.TimeoutExpired:
        return None, "timed out after %d s" % timeout
    return p.returncode, p.stdout.decode("utf-8", "replace")


def first_error(out):
    lines = [l for l in out.splitlines() if l.strip()]
    for l in lines:
        if "error" in l:
            return l.strip()
    return lines[0].strip() if lines else "(no output)"


def escape_name(name):
    """Output file stem as gpucc writes it: bytes outside [A-Za-z0-9_.-] become _xNN."""
    return "".join(chr(b) if (chr(b).isascii() and chr(b).isalnum()) or chr(b) in "_.-"
                   else "_x%02x" % b for b in name.encode("utf-8"))


def first_beyond(out):
    """The first line of a --compare run that says what went wrong."""
    for l in out.splitlines():
        if "error" in l or l.rstrip().endswith("beyond"):
            return l.strip()
    return first_error(out)


def negate_last_layer(path, out):
    """A copy of the ONNX model at path, at out, whose weights nearest its first output
    (the float initializers of the first node that has any, walking back from the output
    along first inputs) are negated; False where no such node is found."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    inits = {t.name: t for t in m.graph.initializer}
    producer = {o: n for n in m.graph.node for o in n.output}
    name = m.graph.output[0].name
    while name in producer:
        node = producer[name]
        ws = [inits[i] for i in node.input
              if i in inits and numpy_helper.to_array(inits[i]).dtype.kind == "f"]
        if ws:
            for t in ws:
                t.CopyFrom(numpy_helper.from_array(-numpy_helper.to_array(t), t.name))
            onnx.save(m, out)
            return True
        name = node.input[0] if node.input else None
    return False


def rel_by_norm(g, w):
    """||g - w|| / ||w|| over the elements finite in both (the largest difference when w
    is all zeros)."""
    fin = np.isfinite(w) & np.isfinite(g)
    norm = np.linalg.norm(w[fin])
    return float(np.linalg.norm((g - w)[fin]) / norm) if norm > 0 else float(
        np.abs((g - w)[fin]).max(initial=0))


def compare(got, want, rtol, atol):
    """None when got matches want, else why not; also the largest relative error by norm."""
    if got.dtype != want.dtype:
        return "dtype %s, expected %s" % (got.dtype, want.dtype), 0.0
    if got.shape != want.shape:
        return "shape %s, expected %s" % (list(got.shape), list(want.shape)), 0.0
    if want.dtype.kind != "f":
        bad = got != want
        if bad.any():
            i = tuple(int(k) for k in np.argwhere(bad)[0])
            return "%d of %d elements differ; first at %s: got %s, expected %s" % (
                int(bad.sum()), bad.size, list(i), got[i], want[i]), 0.0
        return None, 0.0
    g, w = got.astype(np.float64), want.astype(np.float64)
    rel = rel_by_norm(g, w)
    ok = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if ok.all():
        return None, rel
    i = tuple(int(k) for k in np.argwhere(~ok)[0])
    return ("%d of %d elements differ; first at %s: got %.9g, expected %.9g; relative error "
            "by norm %.3g" % (int((~ok).sum()), ok.size, list(i), g[i], w[i], rel)), rel


def compare_by_norm(got, want, bound):
    """compare() for a lowered precision: dtypes, shapes and non-float values exact, the
    same elements non-finite, and float outputs within `bound` by norm."""
    if want.dtype.kind != "f" or got.dtype != want.dtype or got.shape != want.shape:
        return compare(got, want, 0.0, 0.0)
    g, w = got.astype(np.float64), want.astype(np.float64)
    odd = np.isfinite(g) != np.isfinite(w)
    if odd.any():
        i = tuple(int(k) for k in np.argwhere(odd)[0])
        return ("%d elements finite on one side only; first at %s: got %.9g, expected %.9g"
                % (int(odd.sum()), list(i), g[i], w[i])), float("inf")
    rel = rel_by_norm(g, w)
    if rel > bound:
        return "relative error by norm %.3g > %g" % (rel, bound), rel
    return None, rel


class Case:
    def __init__(self, name, path, inputs=None, dims=(), twins=False, precision=None):
        self.name, self.path = name, path
        self.precision = precision  # held to REL_BY_NORM[precision] by norm, not exactly
        self.inputs = inputs or []  # [(name, .npy path)] in the model's input order
        self.dims = list(dims)
        self.twins = twins  # also run_model and jit
        self.calibrate = []  # fp8: --calibrate NAME=PATH arguments
        self.status, self.detail, self.rel = "failed", "", 0.0


class Runner:
    def __init__(self, args, ort):
        self.args = args
        self.ort = ort  # onnxruntime imports: --compare=onnxruntime runs

    def gpucc(self, argv):
        return run([self.args.gpucc] + argv)

    def calibration_inputs(self, case, work):
        """fp8's --calibrate arguments: for each recorded input another of its kind."""
        if self.args.precision != "fp8":
            return []
        rng, argv = np.random.default_rng(11), []
        for n, p in case.inputs:
            x = np.load(p)
            if x.dtype.kind == "f":
                c = (rng.standard_normal(x.shape) * x.std() + x.mean()).astype(x.dtype)
            else:
                c = np.roll(x, x.shape[-1] // 2 if x.ndim else 0, axis=-1 if x.ndim else None)
            path = os.path.join(work, "calib.%s.npy" % escape_name(n))
            np.save(path, c)
            argv += ["--calibrate", "%s=%s" % (n, path)]
        return argv

    def bind_dims(self, case, work):
        """Finds the symbolic dims codegen asks for (bound to 2) by compiling the model.so.
        Returns the compile's (rc, output)."""
        so = os.path.join(work, "model.so")
        for _ in range(16):
            rc, out = self.gpucc([case.path, "-o", so, "--precision=" + self.args.precision] +
                                 ["--dim=%s=2" % d for d in case.dims] + case.calibrate)
            m = UNBOUND.search(out)
            if rc == 0 or not m or m.group(1) in case.dims:
                return rc, out
            case.dims.append(m.group(1))
        return rc, out

    def outputs(self, folder):
        return {f[:-4]: np.load(os.path.join(folder, f), allow_pickle=False)
                for f in sorted(os.listdir(folder)) if f.endswith(".npy")}

    def run_case(self, case):
        try:
            self.run_case_unguarded(case)
        except Exception as e:  # a runner bug shows as this case's failure
            case.status, case.detail = "failed", "runner: %s: %s" % (type(e).__name__, e)
        if self.args.verbose:
            print("%-11s %s %s" % (case.status, case.name, case.detail), flush=True)
        return case

    def run_case_unguarded(self, case):
        work = os.path.join(self.args.tmp, re.sub(r"[^A-Za-z0-9_.-]", "_", case.name))
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        so = os.path.join(work, "model.so")
        case.calibrate = self.calibration_inputs(case, work)
        rc, out = self.bind_dims(case, work)
        if rc != 0:
            if UNSUPPORTED.search(out):
                case.status, case.detail = "unsupported", first_error(out)
            else:
                case.detail = "gpucc -o model.so: exit %s: %s" % (rc, first_error(out))
            return
        dims = ["--dim=%s=2" % d for d in case.dims]
        if case.twins and not case.inputs:
            # run_model reads inputs from files only: write random ones for all three.
            why = self.make_inputs(case, work, so)
            if why:
                case.detail = why
                return
        given = []
        for n, p in case.inputs:
            given += ["--input", "%s=%s" % (n, p)]
        cpu, gpu = os.path.join(work, "cpu"), os.path.join(work, "gpu")
        rc, out = self.gpucc(["run", case.path, "--cpu", "--output-dir", cpu] + dims + given)
        if rc != 0 and not case.name.startswith(("models/", "examples/")):
            # A FileCheck graph whose reference run refuses random inputs (indices out of
            # range) or whose outputs .npy cannot hold (bf16): nothing to compare with.
            case.status, case.detail = "not run", "reference: " + first_error(out)
            return
        if rc != 0:
            case.detail = "gpucc run --cpu: exit %s: %s" % (rc, first_error(out))
            return
        rc, out = self.gpucc(["run", so, "--output-dir", gpu] + given)
        if rc != 0:
            case.detail = "gpucc run model.so: exit %s: %s" % (rc, first_error(out))
            return
        want, got = self.outputs(cpu), self.outputs(gpu)
        if sorted(want) != sorted(got):
            case.detail = "outputs %s on the GPU, %s on the CPU" % (sorted(got), sorted(want))
            return
        for k in want:
            # A deep network's outputs carry fp32 rounding at the scale of its largest
            # value (the GPU sums in fp32, the reference in fp64): atol scales with it.
            atol = ATOL
            if case.name.startswith("models/") and want[k].dtype.kind == "f" and want[k].size:
                atol = ATOL * max(1.0, float(np.abs(want[k][np.isfinite(want[k])]).max(initial=0)))
            # An f16 output holds 11 significant bits: the GPU's f32 result and the
            # reference's f64 one may round to neighbouring f16 values.
            rtol = max(RTOL, 2.0 ** -10) if want[k].dtype == np.float16 else RTOL
            precision = case.precision or self.args.precision
            if precision != "fp32":
                why, rel = compare_by_norm(got[k], want[k], REL_BY_NORM[precision])
            else:
                why, rel = compare(got[k], want[k], rtol, atol)
            case.rel = max(case.rel, rel)
            if why:
                case.detail = "output %s: %s" % (k, why)
                return
        if case.twins:
            why = self.twins(case, work, so, given) or self.compare_modes(case, work, so, given)
            if why:
                case.detail = why
                return
        case.status = "passed"
        case.detail = "(relative error by norm %.2g%s)" % (
            case.rel, "; run_model and jit agree" if case.twins else "")
        if not self.args.keep:
            shutil.rmtree(work, ignore_errors=True)

    def make_inputs(self, case, work, so):
        """Random inputs, as files, for the inputs run_model lists ("input  x: f32[2,64]")."""
        rc, out = run([self.args.run_model, so])
        if rc != 0:
            return "run_model: exit %s: %s" % (rc, first_error(out))
        rng = np.random.default_rng(7)
        for m in re.finditer(r"^input  (.+): (\w+)\[([0-9,]*)\]", out, re.M):
            name, dtype = m.group(1), NPY_DTYPES[m.group(2)]
            shape = [int(d) for d in m.group(3).split(",") if d]
            path = os.path.join(work, "in.%s.npy" % escape_name(name))
            if np.dtype(dtype).kind == "f":
                np.save(path, rng.standard_normal(shape).astype(dtype))
            else:
                np.save(path, rng.integers(0, 2, shape).astype(dtype))
            case.inputs.append((name, path))
        return None

    def twins(self, case, work, so, given):
        """examples/run_model and examples/jit against gpucc run's outputs. All three with
        GPUCC_GEMM_TUNE=0: the runtime's timed choice of GEMM algorithms may differ between
        loads (a different summation order), its heuristic's first choice does not."""
        untuned = {"GPUCC_GEMM_TUNE": "0"}
        out_dir = os.path.join(work, "untuned")
        os.makedirs(out_dir, exist_ok=True)
        rc, out = run([self.args.gpucc, "run", so, "--output-dir", out_dir] + given, env=untuned)
        if rc != 0:
            return "gpucc run model.so with GPUCC_GEMM_TUNE=0: exit %s: %s" % (rc, first_error(out))
        got = self.outputs(out_dir)
        files = [p for _, p in case.inputs]
        for tool, argv in (("run_model", [self.args.run_model, so, "--output-dir",
                                          os.path.join(work, "run_model")] + files),
                           ("jit", [self.args.jit, case.path, "--output-dir",
                                    os.path.join(work, "jit"),
                                    "--precision", self.args.precision] + case.calibrate +
                            sum((["--dim", "%s=2" % d] for d in case.dims), []) + files)):
            os.makedirs(argv[argv.index("--output-dir") + 1], exist_ok=True)
            rc, out = run(argv, env=untuned)
            if rc != 0:
                return "%s: exit %s: %s" % (tool, rc, first_error(out))
            theirs = self.outputs(argv[argv.index("--output-dir") + 1])
            for k in got:
                if k not in theirs:
                    return "%s wrote no %s.npy" % (tool, k)
                why, _ = compare(theirs[k], got[k], SAME_RTOL, SAME_ATOL)
                if why:
                    return "%s, output %s, against gpucc run: %s" % (tool, k, why)
        return None

    def compare_modes(self, case, work, so, given):
        """`gpucc run case.so --compare=reference`, and for an ONNX model
        `--compare=onnxruntime` (through this Python), each within the default tolerance;
        then the model.so against a model with its last layer negated, which must not be."""
        onnx_model = case.path.endswith(".onnx")
        modes = ["reference"] + (["onnxruntime"] if self.ort and onnx_model else [])
        env = {"GPUCC_PYTHON": sys.executable}
        for mode in modes:
            rc, out = run([self.args.gpucc, "run", so, "--compare=" + mode] + given, env=env)
            if rc != 0:
                return "gpucc run model.so --compare=%s: exit %s: %s" % (mode, rc,
                                                                          first_beyond(out))
        wrong = os.path.join(work, "wrong.onnx")
        if onnx_model and negate_last_layer(case.path, wrong):
            mode = modes[-1]
            rc, out = run([self.args.gpucc, "run", so, "--compare=" + mode, "--model-source",
                           wrong] + given, env=env)
            if rc != 1 or not re.search(r" beyond$", out, re.M):
                return ("gpucc run model.so --compare=%s against its model with the last "
                        "layer negated: exit %s, not 1 with an output beyond: %s"
                        % (mode, rc, first_beyond(out)))
        return None


def model_cases(data):
    """Each export of data/ with its recorded inputs, in the ONNX graph's input order."""
    import onnx
    cases = []
    for path in sorted(glob.glob(os.path.join(data, "*.onnx"))):
        base = os.path.basename(path)[:-5]
        model = base.rsplit("-", 1)[0]
        g = onnx.load(path, load_external_data=False).graph
        inits = {t.name for t in g.initializer}
        inputs = []
        for v in g.input:
            if v.name in inits:
                continue
            p = os.path.join(data, "%s.in.%s.npy" % (model, v.name))
            if os.path.isfile(p):
                inputs.append((v.name, p))
        cases.append(Case("models/" + base, path, inputs, twins=True))
    return cases


def asks_tf32(path):
    """Whether a graph has matmuls with tf32 = 1: TF32 math, which the reference executor
    does in full precision, so such a graph is held to the tf32 bound."""
    with open(path) as f:
        return any("tf32 = 1" in line.split("//")[0] for line in f)


def graph_cases():
    cases = []
    for path in find_graphs():  # relative to REPO_ROOT, where every command runs
        if not expects_failure(path):
            cases.append(Case(path, path, twins=path.startswith("examples/"),
                              precision="tf32" if asks_tf32(path) else None))
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpucc", required=True)
    ap.add_argument("--run-model", required=True, help="examples/run_model, built")
    ap.add_argument("--jit", required=True, help="examples/jit, built")
    ap.add_argument("--data", default=os.path.join(REPO_ROOT, "tests", "models", "data"),
                    help="the ONNX exports (tests/models/export.py --full for full sizes)")
    ap.add_argument("--no-graphs", action="store_true", help="only the ONNX exports")
    ap.add_argument("--precision", default="fp32", choices=sorted(REL_BY_NORM),
                    help="compile with --precision=P; not fp32 implies --no-graphs")
    ap.add_argument("--tmp", default="/tmp/gpucc-gpu-models")
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--filter", help="only cases whose name matches this regex")
    ap.add_argument("--summary", help="also write the report to this file")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    why = cuda_device()
    if why:
        print("gpu_models: skipped: %s" % why)
        return SKIP
    os.makedirs(args.tmp, exist_ok=True)
    graphs = not args.no_graphs and args.precision == "fp32"
    cases = (graph_cases() if graphs else []) + model_cases(args.data)
    if args.filter:
        cases = [c for c in cases if re.search(args.filter, c.name)]
    start = time.monotonic()
    try:
        import onnxruntime  # noqa: F401
        ort = True
    except ImportError:
        ort = False
        print("gpu_models: onnxruntime: skipped (not installed): no --compare=onnxruntime")
    runner = Runner(args, ort)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        cases = list(pool.map(runner.run_case, cases))
    lines = []
    for c in cases:
        if c.status != "passed" or c.name.startswith("models/") or c.twins:
            lines.append("%-11s %s %s" % (c.status, c.name, c.detail))
    n = {s: sum(c.status == s for c in cases)
         for s in ("passed", "failed", "unsupported", "not run")}
    lines.append("")
    lines.append("gpu_models: %d cases in %.0f s: %d unsupported (an op without a GPU kernel), "
                 "%d not run (the reference cannot run them on random inputs)"
                 % (len(cases), time.monotonic() - start, n["unsupported"], n["not run"]))
    lines.append("%d passed, %d failed" % (n["passed"], n["failed"]))
    text = "\n".join(lines)
    print(text)
    if args.summary:
        os.makedirs(os.path.dirname(os.path.abspath(args.summary)), exist_ok=True)
        with open(args.summary, "w") as f:
            f.write(text + "\n")
    return 1 if n["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
