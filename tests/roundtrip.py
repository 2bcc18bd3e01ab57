#!/usr/bin/env python3
"""Round-trip check of the text form over every valid graph in the repository.

For each .gir file F under examples/ and tests/ (except tests/lit/errors/, tests/fuzz/
and files whose RUN lines expect gpucc to fail, `not %gpucc`):
  1. `gpucc F --dump-ir=DIR` runs the default pipeline and writes one file per stage;
     every stage S must reproduce itself: `gpucc S --emit=ir` is byte-identical to S.
  2. print(parse(print(F))) == print(F): A = `gpucc F --emit=ir`, then
     `gpucc A --emit=ir` must equal A, and so must the dump of the input stage.
Prints one line per file and "N passed, M failed"; exits 1 on any failure.

usage: roundtrip.py --gpucc PATH [--tmp DIR] [FILE...]
"""

import argparse
import difflib
import os
import shutil
import subprocess
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_graphs():
    found = []
    for top in ("examples", "tests"):
        for folder, dirs, files in os.walk(os.path.join(REPO_ROOT, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            rel_folder = os.path.relpath(folder, REPO_ROOT)
            # bad inputs on purpose: the error tests and the fuzzers' inputs
            if any(rel_folder == skip or rel_folder.startswith(skip + os.sep)
                   for skip in (os.path.join("tests", "lit", "errors"),
                                os.path.join("tests", "fuzz"))):
                continue
            for name in sorted(files):
                if name.endswith(".gir"):
                    found.append(os.path.join(rel_folder, name))
    return found


def expects_failure(path):
    """A test whose RUN lines run `not %gpucc` is about a bad input."""
    with open(os.path.join(REPO_ROOT, path), "rb") as f:
        for line in f.read().decode("utf-8", errors="replace").splitlines():
            if "RUN:" in line and "not %gpucc" in line:
                return True
    return False


def run(gpucc, args):
    r = subprocess.run([gpucc] + args, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    return r.returncode, r.stdout, r.stderr


def first_difference(want, got, want_name, got_name):
    lines = list(difflib.unified_diff(want.decode("utf-8", "replace").splitlines(),
                                      got.decode("utf-8", "replace").splitlines(),
                                      want_name, got_name, lineterm="", n=1))
    if not lines:  # same lines, different bytes: a trailing newline or \r
        return f"    {want_name} and {got_name} differ in line endings"
    return "\n".join("    " + line for line in lines[:20])


def check_file(gpucc, path, work):
    """Returns None when F round-trips, else a message saying where it does not."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    dump = os.path.join(work, "dump")

    rc, _, err = run(gpucc, [path, f"--dump-ir={dump}"])
    if rc != 0:
        return f"`gpucc {path} --dump-ir` exited with {rc}:\n{err.decode('utf-8', 'replace').rstrip()}"
    stages = sorted(s for s in os.listdir(dump) if s.endswith(".gir")) if os.path.isdir(dump) else []
    if not stages:
        return f"`gpucc {path} --dump-ir` wrote no stage file"
    # a stage with the bytes of one already parsed back (a pass that changed nothing) is
    # not parsed again: gpucc would print the same bytes
    checked = set()
    for s in stages:
        sp = os.path.join(dump, s)
        with open(sp, "rb") as f:
            want = f.read()
        if want in checked:
            continue
        checked.add(want)
        rc, got, err = run(gpucc, [sp, "--emit=ir"])
        if rc != 0:
            return f"stage {s} does not parse back (exit {rc}):\n{err.decode('utf-8', 'replace').rstrip()}"
        if got != want:
            return f"stage {s} does not reproduce itself:\n" + first_difference(want, got, s, "reprinted")

    rc, printed, err = run(gpucc, [path, "--emit=ir"])
    if rc != 0:
        return f"`gpucc {path} --emit=ir` exited with {rc}:\n{err.decode('utf-8', 'replace').rstrip()}"
    canon = os.path.join(work, "printed.gir")
    with open(canon, "wb") as f:
        f.write(printed)
    rc, again, err = (0, printed, b"") if printed in checked else run(gpucc, [canon, "--emit=ir"])
    if rc != 0:
        return f"the printed form does not parse back (exit {rc}):\n{err.decode('utf-8', 'replace').rstrip()}"
    if again != printed:
        return "print(parse(print(F))) != print(F):\n" + first_difference(printed, again, "print", "reprint")
    with open(os.path.join(dump, stages[0]), "rb") as f:
        first = f.read()
    if first != printed:
        return f"the dump of the input ({stages[0]}) differs from --emit=ir:\n" + \
            first_difference(printed, first, "--emit=ir", stages[0])
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpucc", required=True)
    ap.add_argument("--tmp", help="scratch folder (default: a fresh temporary one)")
    ap.add_argument("files", nargs="*", help="graphs to check (default: all)")
    args = ap.parse_args()
    gpucc = os.path.abspath(args.gpucc)

    tmp = os.path.abspath(args.tmp) if args.tmp else tempfile.mkdtemp(prefix="gpucc-roundtrip-")
    files = [os.path.abspath(f) for f in args.files] or find_graphs()
    passed = failed = skipped = 0
    for path in files:
        if not os.path.isfile(os.path.join(REPO_ROOT, path)):
            failed += 1
            print(f"FAIL {path}: no such file")
            continue
        if expects_failure(path):
            skipped += 1
            continue
        work = os.path.join(tmp, os.path.relpath(path, REPO_ROOT).replace(os.sep, "__").replace("..", "_"))
        try:
            problem = check_file(gpucc, path, work)
        except subprocess.TimeoutExpired as e:
            problem = f"timed out: {' '.join(e.cmd)}"
        if problem is None:
            passed += 1
            print(f"PASS {path}")
        else:
            failed += 1
            print(f"FAIL {path}: {problem}")
        sys.stdout.flush()
    if skipped:
        print(f"({skipped} files that expect an error were skipped)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
