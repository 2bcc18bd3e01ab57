#!/usr/bin/env python3
"""The real-model test (issue 3, points 6 and 7): gpucc's reference executor on the ONNX
exports of tests/models/data/ against PyTorch's recorded outputs and against onnxruntime.

data/ holds <model>-<exporter>.onnx, the fixed inputs <model>.in.<input name>.npy and
PyTorch's fp32 outputs <model>.out.<k>.npy, k in the order of the model's graph outputs
(tests/models/README.md). For each export:
  1. `gpucc MODEL --check-ops`; exit 1 with ops named makes it "unsupported";
  2. `gpucc MODEL --emit=ir` and `gpucc MODEL --dump-ir=DIR` must succeed, and every file
     they produce must parse back: `gpucc F --emit=ir` reproduces F byte for byte;
  3. `gpucc run MODEL --cpu --input NAME=PATH ... --output-dir DIR`, then each output
     DIR/<escaped name>.npy against PyTorch's: dtype and shape exact, relative error by
     norm ||got - want|| / ||want|| <= 1e-4, and elementwise allclose(rtol 1e-3, atol
     1e-5) as a sanity check;
  4. where onnxruntime imports, the same model and inputs on its CPUExecutionProvider,
     and gpucc's outputs against those with the same bounds, over the elements where
     onnxruntime and PyTorch agree (onnxruntime's fp32 rounding puts single elements of
     full-size models outside the elementwise bound; PyTorch alone judges those).
--skip-text leaves out step 2, for full-size exports (tests/models/README.md).
--precision P (tf32, fp16, bf16, fp8) runs the graph the precision pass lowered (`gpucc run
--cpu --precision=P`: the reference executor rounds where the GPU would) and holds it to
PyTorch's fp32 outputs within that mode's documented bound (tests/precision.py) by norm
alone; steps 2 and 4 are those of fp32 and are left out. fp8 calibrates on the input it
is tested on (--calibrate NAME=the same file): that measures what e4m3 rounding costs,
not how well a calibration input covers others (tests/gpu/gpu_models.py calibrates on one
random draw and tests another).
Output names come from the model (the onnx package) where it imports, else from the
`return` line of `gpucc MODEL --emit=ir`.

tests/models/expected_unsupported.txt lists the exports expected not to load yet, one per
line as "export  # reason". The run fails when a listed export is supported (take it
out), when an unlisted one is unsupported, and when a supported one fails;
`--update-expected` rewrites the list from the run.

Prints one line per export, then the unsupported count, then "N passed, M failed".
Exits 0 when nothing failed, 1 otherwise.

usage: test_models.py --gpucc PATH [--data DIR] [--tmp DIR] [--expected FILE]
                      [--filter REGEX] [--jobs N] [--timeout S] [--update-expected]
                      [--keep] [--skip-text] [--precision P] [--summary FILE]
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

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from precision import REL_BY_NORM  # noqa: E402
REL_BOUND = REL_BY_NORM["fp32"]  # the bound, relative error by norm
RTOL, ATOL = 1e-3, 1e-5     # the elementwise sanity check

HEADER = """\
# Exports of tests/models/data/ that gpucc does not load yet, one per line:
# "export  # reason" (the reason: what `gpucc MODEL --check-ops` reports). The test fails
# when a listed export loads (take it out) and when an unsupported one is missing here.
# Regenerate after widening the op coverage with:
#   tests/models/test_models.py --gpucc BUILD/gpucc --update-expected
"""


def optional_import(name):
    try:
        return __import__(name)
    except Exception:  # a broken install counts as absent: the test says so
        return None


class Result:
    """status: passed, failed or unsupported; detail: the rest of the report line."""

    def __init__(self, name, status, detail=""):
        self.name = name
        self.status = status
        self.detail = detail

    def line(self):
        word = {"passed": "passed", "failed": "FAILED", "unsupported": "unsupported"}
        return "%s: %s%s" % (self.name, word[self.status],
                             (": " if self.status != "passed" else " ") + self.detail
                             if self.detail else "")


class Runner:
    def __init__(self, args, onnx, ort):
        self.args = args
        self.onnx = onnx
        self.ort = ort
        # gpucc before its ONNX frontend landed: every export is unsupported for that one
        # reason, rather than failing on an unknown option.
        rc, out, _ = self.gpucc(["--help"])
        self.no_frontend = rc is not None and "--check-ops" not in out

    def gpucc(self, argv):
        """(returncode, stdout, stderr) as text; returncode None on timeout."""
        try:
            p = subprocess.run([self.args.gpucc] + argv, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=self.args.timeout,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return None, "", "timed out after %g s" % self.args.timeout
        return (p.returncode, p.stdout.decode("utf-8", "replace"),
                p.stderr.decode("utf-8", "replace"))

    def gpucc_bytes(self, argv):
        """(returncode, stdout bytes, stderr text) for the byte-exact round trips."""
        try:
            p = subprocess.run([self.args.gpucc] + argv, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=self.args.timeout,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return None, b"", "timed out after %g s" % self.args.timeout
        return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")

    # ------------------------------------------------------------------ one export

    def run_export(self, name, path):
        try:
            return self.run_export_unguarded(name, path)
        except Exception as e:  # a runner bug shows as this export's failure
            return Result(name, "failed", "runner: %s: %s" % (type(e).__name__, e))

    def run_export_unguarded(self, name, path):
        if self.no_frontend:
            return Result(name, "unsupported", "gpucc has no ONNX frontend yet (its --help "
                          "names no --check-ops)")
        rc, out, err = self.gpucc([path, "--check-ops"])
        if rc == 1:
            ops = unsupported_named(out + "\n" + err)
            if ops:
                return Result(name, "unsupported", ", ".join(ops))
        if rc != 0:
            return Result(name, "failed", "--check-ops: " + exit_text(rc, out + err))

        model = name.rsplit("-", 1)[0]
        work = os.path.join(self.args.tmp, name)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        problems = []

        # The text form: --emit=ir and --dump-ir, each file parsing back to itself (not
        # for full-size exports: their weights would be gigabytes of text). A file with the
        # bytes of one already parsed back (a pass that changed nothing, the input's dump
        # and --emit=ir) is not parsed again: gpucc would print the same bytes.
        checked = set()
        ir_text = None
        lowered = self.args.precision != "fp32"
        skip_text = self.args.skip_text or lowered
        rc, emitted, err = (0, b"", "") if skip_text else \
            self.gpucc_bytes([path, "--emit=ir"])
        if skip_text:
            pass
        elif rc != 0:
            problems.append("--emit=ir: " + exit_text(rc, err))
        else:
            ir_path = os.path.join(work, "emit.gir")
            with open(ir_path, "wb") as f:
                f.write(emitted)
            ir_text = emitted.decode("utf-8", "replace")
            problems += self.reparse(ir_path, "--emit=ir output", checked)
        dump = os.path.join(work, "dump")
        rc, _, err = (0, "", "") if skip_text else \
            self.gpucc([path, "--dump-ir=" + dump])
        if skip_text:
            pass
        elif rc != 0:
            problems.append("--dump-ir: " + exit_text(rc, err))
        else:
            files = sorted(f for f in os.listdir(dump) if f.endswith(".gir")) \
                if os.path.isdir(dump) else []
            if not files:
                problems.append("--dump-ir wrote no .gir file")
            for f in files:
                problems += self.reparse(os.path.join(dump, f), "--dump-ir's " + f, checked)

        # Inputs: <model>.in.<name>.npy, checked against the model's own input list so
        # that none is silently filled with random values.
        inputs = recorded(self.args.data, model + ".in.")
        if not inputs:
            return Result(name, "failed", "runner: no %s.in.*.npy in %s"
                          % (model, self.args.data))
        ir_in, ir_out = ir_signature(ir_text) if ir_text else (None, None)
        onnx_in, onnx_out = self.onnx_signature(path)
        for what, names in (("the model's", onnx_in), ("the IR's", ir_in)):
            if names is not None and sorted(names) != sorted(inputs):
                problems.append("runner: input files %s, %s inputs %s"
                                % (sorted(inputs), what, sorted(names)))
        want = [np.load(p, allow_pickle=False)
                for p in recorded_outputs(self.args.data, model)]
        if not want:
            return Result(name, "failed", "runner: no %s.out.0.npy" % model)

        out_dir = os.path.join(work, "out")
        argv = ["run", path, "--cpu", "--precision=" + self.args.precision]
        for n in sorted(inputs):
            argv += ["--input", "%s=%s" % (n, inputs[n])]
            if self.args.precision == "fp8":  # calibrated on the input it is tested on
                argv += ["--calibrate", "%s=%s" % (n, inputs[n])]
        argv += ["--output-dir", out_dir]
        rc, _, err = self.gpucc(argv)
        if rc != 0:
            problems.append("gpucc run: " + exit_text(rc, err))
            return self.finish(name, work, problems, {})

        got, why = read_outputs(out_dir, len(want), onnx_out, ir_out)
        if why:
            problems.append(why)
            return self.finish(name, work, problems, {})

        worst = {}
        for k, ((oname, g), w) in enumerate(zip(got, want)):
            why, rel = compare(g, w, REL_BY_NORM[self.args.precision], not lowered)
            label = "output %d '%s'" % (k, oname)
            if why:
                problems.append("%s vs pytorch: %s" % (label, why))
            worst["pytorch"] = max(worst.get("pytorch", 0.0), rel)

        notes = []
        if self.ort is not None and not lowered:
            try:
                ref = self.run_ort(path, inputs)
            except Exception as e:
                problems.append("onnxruntime: %s: %s" % (type(e).__name__, first_line(str(e))))
                ref = None
            if ref is not None and len(ref) != len(got):
                problems.append("onnxruntime: %d outputs, gpucc %d" % (len(ref), len(got)))
            elif ref is not None:
                for k, ((oname, g), r, w) in enumerate(zip(got, ref, want)):
                    r = np.asarray(r)
                    # onnxruntime's own fp32 rounding can put single elements of a big
                    # model outside the elementwise tolerance; where it disagrees with
                    # PyTorch that way, PyTorch alone judges the element.
                    g, r, skipped = agreed(g, r, w)
                    why, rel = compare(g, r)
                    if why:
                        problems.append("output %d '%s' vs onnxruntime: %s" % (k, oname, why))
                    worst["onnxruntime"] = max(worst.get("onnxruntime", 0.0), rel)
                    if skipped:
                        notes.append("%d element%s of output %d where onnxruntime and PyTorch "
                                     "disagree judged by PyTorch alone"
                                     % (skipped, "" if skipped == 1 else "s", k))
        return self.finish(name, work, problems, worst, notes)

    def finish(self, name, work, problems, worst, notes=()):
        if problems:
            return Result(name, "failed", "; ".join(problems))
        if not self.args.keep:
            shutil.rmtree(work, ignore_errors=True)
        return Result(name, "passed", "(max rel err %s)" % ", ".join(
            "%.1e vs %s" % (v, k) for k, v in worst.items()) +
            "".join("; " + n for n in notes))

    def reparse(self, path, what, checked):
        """[] when `gpucc PATH --emit=ir` reproduces PATH byte for byte, else why not;
        [] at once for a text in checked (the texts parsed back before), which gets it."""
        with open(path, "rb") as f:
            text = f.read()
        if text in checked:
            return []
        checked.add(text)
        rc, again, err = self.gpucc_bytes([path, "--emit=ir"])
        if rc != 0:
            return ["%s does not parse back: %s" % (what, exit_text(rc, err))]
        if again != text:
            return ["%s does not print back the same (first difference at line %d)"
                    % (what, first_diff_line(text, again))]
        return []

    def onnx_signature(self, path):
        """(input names less initializers, output names) from the model, or (None, None)
        without the onnx package."""
        if self.onnx is None:
            return None, None
        g = self.onnx.load(path, load_external_data=False).graph
        inits = {t.name for t in g.initializer}
        return [v.name for v in g.input if v.name not in inits], [v.name for v in g.output]

    def run_ort(self, path, inputs):
        opts = self.ort.SessionOptions()
        opts.log_severity_level = 3
        # The machines have few cores and ctest runs other tests beside this one.
        opts.intra_op_num_threads = 1
        s = self.ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        feeds = {i.name: np.load(inputs[i.name], allow_pickle=False)
                 for i in s.get_inputs() if i.name in inputs}
        return s.run(None, feeds)


# ---------------------------------------------------------------------- helpers


def recorded(data, prefix):
    """{input name: path} for the files PREFIX<name>.npy."""
    return {f[len(prefix):-4]: os.path.join(data, f) for f in sorted(os.listdir(data))
            if f.startswith(prefix) and f.endswith(".npy")}


def recorded_outputs(data, model):
    """<model>.out.0.npy, .1, ... while they exist."""
    paths = []
    while True:
        p = os.path.join(data, "%s.out.%d.npy" % (model, len(paths)))
        if not os.path.isfile(p):
            return paths
        paths.append(p)


def unsupported_named(text):
    """What --check-ops names as unsupported, one entry per line that says so: the driver
    writes "op NAME[ with ATTR=V] is not supported (opset N): ..."; other wordings count
    by their text before any ':' detail."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        m = re.match(r"op\s+(.+?)\s+is not supported", line)
        if m:
            what = m.group(1)
        elif re.search(r"not supported|unsupported", line, re.I):
            what = re.sub(r"\s*\(opset \d+\).*", "", line.split(": ", 1)[0])
        else:
            continue
        if what not in found:
            found.append(what)
    return found


VALUE = re.compile(r'%(?:"((?:[^"\\]|\\.)*)"|([A-Za-z0-9_.]+))')


def unescape(s):
    """The text form's C escapes: \\" \\\\ \\n \\t \\xNN (bytes, so UTF-8 survives)."""
    out, i, b = bytearray(), 0, s.encode("utf-8")
    while i < len(b):
        if b[i:i + 1] == b"\\" and i + 1 < len(b):
            c = chr(b[i + 1])
            if c == "x":
                out.append(int(b[i + 2:i + 4], 16))
                i += 4
                continue
            out += {"n": b"\n", "t": b"\t"}.get(c, c.encode())
            i += 2
            continue
        out.append(b[i])
        i += 1
    return out.decode("utf-8", "replace")


def values_in(line):
    return [unescape(m.group(1)) if m.group(1) is not None else m.group(2)
            for m in VALUE.finditer(line)]


def ir_signature(text):
    """(input names, output names) of a graph in the text form: the values of its
    `graph NAME(...)` line and of its `return` line."""
    ins = outs = None
    for line in text.splitlines():
        s = line.strip()
        if ins is None and s.startswith("graph"):
            # Types hold no '%', so the values on this line are the parameters.
            ins = values_in(s)
        elif s.startswith("return ") or s == "return":
            outs = values_in(s[len("return"):])
    return ins, outs


def escape_name(name):
    """An output's file stem as gpucc writes it: bytes outside [A-Za-z0-9_.-] as _xNN."""
    return "".join(chr(b) if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "_.-")
                   else "_x%02x" % b for b in name.encode("utf-8"))


def read_outputs(out_dir, count, onnx_names, ir_names):
    """([(name, array)] in the model's output order, None), or (None, why not). The
    names are the model's where the onnx package read them, and the IR's where gpucc's
    files bear those instead (a loader may rename values)."""
    files = sorted(os.listdir(out_dir)) if os.path.isdir(out_dir) else []
    tried = []
    for names in (onnx_names, ir_names):
        if names is None or names in tried:
            continue
        tried.append(names)
        if len(names) != count:
            return None, ("runner: %d recorded outputs, the model has %d (%s)"
                          % (count, len(names), ", ".join(names)))
        paths = [os.path.join(out_dir, escape_name(n) + ".npy") for n in names]
        if all(os.path.isfile(p) for p in paths):
            if len(files) != count:
                return None, "gpucc wrote %d files for %d outputs: %s" % (
                    len(files), count, ", ".join(files))
            try:
                return [(n, np.load(p, allow_pickle=False))
                        for n, p in zip(names, paths)], None
            except Exception as e:
                return None, "unreadable output .npy: %s" % e
    if not tried:
        return None, "runner: neither the onnx package nor --emit=ir named the outputs"
    return None, "gpucc's output files %s are not the outputs %s" % (
        files, " or ".join(str(t) for t in tried))


def agreed(got, ort, torch_out):
    """got and ort restricted to the elements where onnxruntime agrees with PyTorch
    (within the same tolerance), and how many elements were left out."""
    if ort.dtype.kind != "f" or ort.shape != torch_out.shape or got.shape != ort.shape:
        return got, ort, 0
    ok = np.isclose(ort.astype(np.float64), torch_out.astype(np.float64), rtol=RTOL, atol=ATOL,
                    equal_nan=True)
    if ok.all():
        return got, ort, 0
    return got[ok], ort[ok], int(ok.size - ok.sum())


def compare(got, want, bound=REL_BOUND, elementwise=True):
    """(None, rel) when got matches want, else (why, rel); rel is the relative error
    by norm (0 for exact integer matches), within `bound`; floats also elementwise
    allclose when `elementwise`."""
    if got.dtype != want.dtype:
        return "dtype %s, expected %s" % (got.dtype, want.dtype), float("inf")
    if got.shape != want.shape:
        return ("shape %s, expected %s" % (list(got.shape), list(want.shape)),
                float("inf"))
    if want.dtype.kind != "f":
        bad = got != want
        if not bad.any():
            return None, 0.0
        at = [int(i) for i in np.argwhere(bad)[0]]
        return ("%d of %d elements differ, first at %s" % (int(bad.sum()), bad.size, at),
                float("inf"))
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    both_nan = np.isnan(g) & np.isnan(w)
    d = np.where(both_nan, 0.0, g - w)
    wn = np.linalg.norm(np.where(both_nan, 0.0, w))
    dn = np.linalg.norm(d)
    if np.isnan(dn):
        rel = float("nan")
    else:
        rel = float(dn / wn) if wn > 0 else (0.0 if dn == 0 else float("inf"))
    close = np.isclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True) if elementwise else \
        np.ones(g.shape, dtype=bool)
    ok_rel = rel <= bound
    if ok_rel and close.all():
        return None, rel
    parts = []
    if not ok_rel:
        parts.append("rel err %.3g > %g" % (rel, bound))
    if not close.all():
        bad = np.argwhere(~close) if close.ndim else [()]
        at = tuple(int(i) for i in bad[0])
        with np.errstate(invalid="ignore"):
            diff = np.abs(d)[~close]
        diff = diff[np.isfinite(diff)]
        parts.append("%d of %d elements outside allclose(rtol=%g, atol=%g), first at %s: "
                     "got %.9g, expected %.9g%s"
                     % (int((~close).sum()), close.size, RTOL, ATOL, list(at),
                        g[at], w[at], "; max abs diff %.3g" % diff.max() if diff.size else ""))
    return ", ".join(parts), (rel if not np.isnan(rel) else float("inf"))


def first_diff_line(a, b):
    la, lb = a.split(b"\n"), b.split(b"\n")
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return i + 1
    return min(len(la), len(lb)) + 1


def first_line(text, prefer_error=False):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    if prefer_error:
        for l in lines:
            if "error" in l.lower():
                return l
    return lines[0] if lines else ""


def exit_text(rc, out):
    if rc is None:
        return out
    status = "exit %d" % rc if rc >= 0 else "killed by signal %d" % -rc
    line = first_line(out, prefer_error=True)
    return status + (": " + line if line else "")


def read_expected(path):
    """{export: reason}; exits on a malformed line."""
    listed = collections.OrderedDict()
    if not os.path.exists(path):
        return listed
    with open(path) as f:
        for n, line in enumerate(f, 1):
            text = line.split("#", 1)
            name = text[0].strip()
            if not name:
                continue
            if " " in name:
                sys.exit("%s:%d: expected 'export  # reason', got %r" % (path, n, line))
            listed[name] = text[1].strip() if len(text) > 1 else ""
    return listed


def write_expected(path, results, in_scope):
    """Rewrites the list from this run, keeping the entries a --filter run did not
    cover."""
    keep = {n: why for n, why in read_expected(path).items() if not in_scope(n)}
    keep.update((r.name, r.detail) for r in results if r.status == "unsupported")
    rows = sorted(keep.items())
    width = max([len(n) for n, _ in rows] + [0])
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(HEADER)
        for n, why in rows:
            f.write("%-*s  # %s\n" % (width, n, why))
    os.replace(tmp, path)


def check_against_list(results, listed, in_scope):
    """Disagreements with the expected-unsupported list become failures, so each export
    keeps one status and the counts add up; listed exports that no longer exist fail
    too."""
    out = []
    for r in results:
        if r.status == "unsupported" and r.name not in listed:
            r = Result(r.name, "failed", "unsupported (%s) but not listed in "
                       "expected_unsupported.txt: add it, or run --update-expected"
                       % r.detail)
        elif r.status == "passed" and r.name in listed:
            r = Result(r.name, "failed", "passes now but is listed in "
                       "expected_unsupported.txt: remove it from the list %s" % r.detail)
        elif r.status == "failed" and r.name in listed:
            r = Result(r.name, "failed", r.detail + " (listed as expected-unsupported, "
                       "but --check-ops finds every op supported)")
        out.append(r)
    names = {r.name for r in results}
    for n in listed:
        if in_scope(n) and n not in names:
            out.append(Result(n, "failed", "listed in expected_unsupported.txt, but there "
                              "is no such export: remove it from the list"))
    return out


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
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpucc", required=True)
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    ap.add_argument("--tmp", help="work folder (default: a temporary one, removed)")
    ap.add_argument("--expected", default=os.path.join(HERE, "expected_unsupported.txt"))
    ap.add_argument("--filter", help="only the exports whose name matches this regex")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600, help="seconds per gpucc call")
    ap.add_argument("--update-expected", action="store_true")
    ap.add_argument("--summary", help="also write this report to a file (scripts/test.sh "
                    "prints it after the tests)")
    ap.add_argument("--keep", action="store_true", help="keep passing exports' files")
    ap.add_argument("--precision", default="fp32", choices=sorted(REL_BY_NORM),
                    help="compile with --precision=P and hold the outputs to its bound")
    ap.add_argument("--skip-text", action="store_true",
                    help="skip the --emit=ir/--dump-ir round trips (for full-size exports, "
                    "whose weights printed as text would be gigabytes)")
    args = ap.parse_args()
    if args.summary:
        sys.stdout = Tee(sys.stdout, args.summary)

    onnx = optional_import("onnx")
    ort = optional_import("onnxruntime")
    print("onnx: %s" % ("%s (output names from the model)" % onnx.__version__ if onnx
                        else "not installed (output names from --emit=ir)"))
    print("onnxruntime: %s" % ("%s (second oracle)" % ort.__version__ if ort
                               else "skipped (not installed)"))
    sys.stdout.flush()

    exports = sorted((f[:-5], os.path.join(args.data, f)) for f in os.listdir(args.data)
                     if f.endswith(".onnx"))

    def in_scope(n):
        return not args.filter or re.search(args.filter, n) is not None
    exports = [(n, p) for n, p in exports if in_scope(n)]
    if not exports:
        print("no export in %s%s" % (args.data, " matches " + args.filter
                                      if args.filter else ""))
        print("0 passed, 1 failed")
        return 1

    own_tmp = args.tmp is None
    args.tmp = os.path.abspath(args.tmp or tempfile.mkdtemp(prefix="gpucc-models-"))
    os.makedirs(args.tmp, exist_ok=True)
    runner = Runner(args, onnx, ort)
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(pool.map(lambda e: runner.run_export(*e), exports))

    if args.update_expected:
        write_expected(args.expected, results, in_scope)
        print("wrote %s" % os.path.relpath(args.expected))
    results = check_against_list(results, read_expected(args.expected), in_scope)
    for r in results:
        print(r.line())
    counts = collections.Counter(r.status for r in results)
    print("%d unsupported" % counts["unsupported"])
    print("%d passed, %d failed" % (counts["passed"], counts["failed"]))
    if own_tmp and not args.keep and not counts["failed"]:
        shutil.rmtree(args.tmp, ignore_errors=True)
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
