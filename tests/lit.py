#!/usr/bin/env python3
"""A small lit-style test runner for gpucc's FileCheck tests (standard library only).

A test is a .gir file whose `// RUN:` lines are shell commands. Each line runs with
`bash -o pipefail -c` from the repository root after these substitutions:

  %gpucc  the gpucc binary          %s  the test file       %S, %p  its folder
  %t      a scratch path of this test (its folder is emptied before the run)
  %%      a literal %
  FileCheck, not   as the first word of a command (at the start, after |, &&, ||, ;
                   or a `not`): the paths given on the command line

A line ending in `\\` continues on the next RUN line. The first failing line fails the
test, printing the command with its stdout and stderr. A file without RUN lines is an
error, so a typo in `RUN:` cannot make a test pass by running nothing. So is an option
through which gpucc writes (-o, --output-dir, --dump-ir) naming anything but a path
under %t or "-": a test run as root must not replace /dev/null or any other file outside
its scratch folder.

`// REQUIRES: onnxruntime` (features, comma-separated) skips the test where a feature is
missing: it prints "SKIP: ... (why)" and exits 77, which ctest counts as skipped. The
features: onnxruntime (python3 imports it), onnx-testdata (Debian's libonnx-testdata,
which scripts/install-deps.sh installs, is in /usr/share/libonnx-testdata/data).

usage: lit.py --gpucc PATH --filecheck PATH --not PATH [--tmp DIR] TESTFILE
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_run_lines(path):
    """The RUN commands of a test, continuation lines joined."""
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", errors="replace")
    commands, pending = [], None
    for line in text.splitlines():
        m = re.search(r"//\s*RUN:(.*)$", line)
        if not m:
            if pending is not None:
                raise SystemExit(f"{path}: a RUN line ends in '\\' but the next line is not a RUN line")
            continue
        part = m.group(1).strip()
        if pending is not None:
            part = pending + " " + part
            pending = None
        if part.endswith("\\"):
            pending = part[:-1].rstrip()
            continue
        commands.append(part)
    if pending is not None:
        raise SystemExit(f"{path}: the last RUN line ends in '\\'")
    return commands


# Options that name a file or folder gpucc writes. A test writes only inside its scratch
# folder (%t...), or to standard output ("-"): never to /dev/null or any path of the
# machine, which a test run as root (as CI runs) could replace.
WRITES = re.compile(r"(?:^|\s)(-o|--output-dir|--dump-ir)(?:=|\s+)(?!\d*[<>|])(\S*)")


def outside_scratch(cmd):
    """The first option of cmd that writes outside the scratch folder, or None."""
    for m in WRITES.finditer(cmd):
        value = m.group(2).strip("'\"")
        if value != "-" and not value.startswith("%t"):
            return f"{m.group(1)} {m.group(2)}"
    return None


SKIP = 77
TESTDATA = "/usr/share/libonnx-testdata/data"


def python3_lacks(module):
    """Why python3 (the one on PATH, which the RUN lines and gpucc start) cannot import
    module, or None when it can."""
    r = subprocess.run(["python3", "-c", "import " + module], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return None if r.returncode == 0 else f"python3 cannot import {module}"


# What a REQUIRES line may name: each gives None when it is there, else why not.
FEATURES = {
    "onnxruntime": lambda: python3_lacks("onnxruntime"),
    "onnx-testdata": lambda: None if os.path.isdir(TESTDATA) else
    f"{TESTDATA} is not there (scripts/install-deps.sh installs it)",
}


def missing_feature(path):
    """(feature, why) for the first feature a REQUIRES line names that is missing, or
    None. An unknown feature is an error, not a skip."""
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", errors="replace")
    for m in re.finditer(r"//\s*REQUIRES:(.*)$", text, re.M):
        for feature in (x.strip() for x in m.group(1).split(",")):
            if feature not in FEATURES:
                raise SystemExit(f"{path}: unknown REQUIRES feature '{feature}' "
                                 f"(known: {', '.join(sorted(FEATURES))})")
            why = FEATURES[feature]()
            if why:
                return feature, why
    return None


def substitute_percent(cmd, subst):
    def repl(m):
        return subst[m.group(1)]
    # Longest names first so that %gpucc is not read as %g followed by "pucc".
    return re.sub(r"%(gpucc|%|s|S|t|p)", repl, cmd)


def substitute_tools(cmd, tools):
    """Replaces FileCheck/not where a shell would look them up as a command name.

    Scans with quote tracking so that a `|` inside a quoted argument (say, a python3 -c
    program) does not start a new command."""
    out, i, n = [], 0, len(cmd)
    at_command = True
    quote = None
    while i < n:
        c = cmd[i]
        if quote:
            out.append(c)
            if c == "\\" and quote == '"' and i + 1 < n:
                out.append(cmd[i + 1])
                i += 2
                continue
            if c == quote:
                quote = None
            i += 1
            continue
        if at_command:
            if c in " \t":
                out.append(c)
                i += 1
                continue
            m = re.match(r"(FileCheck|not)(?=\s|$)", cmd[i:])
            if m:
                word = m.group(1)
                out.append(tools[word])
                i += len(word)
                at_command = word == "not"  # `not FileCheck ...`
                continue
            at_command = False
        if c in "'\"":
            quote = c
            out.append(c)
            i += 1
            continue
        if c in "|;&(":
            out.append(c)
            i += 1
            # `&&` and `||`: the second character too.
            if i < n and cmd[i] == c and c in "|&":
                out.append(cmd[i])
                i += 1
            at_command = True
            continue
        out.append(c)
        i += 1
    return "".join(out)


def main():
    ap = argparse.ArgumentParser(description="Runs the RUN lines of one lit-style test.")
    ap.add_argument("--gpucc", required=True)
    ap.add_argument("--filecheck", required=True)
    ap.add_argument("--not", dest="not_", required=True)
    ap.add_argument("--tmp", help="folder for %%t (default: lit-tmp beside gpucc)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per RUN line")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each command")
    ap.add_argument("test")
    args = ap.parse_args()

    test = os.path.abspath(args.test)
    if not os.path.isfile(test):
        print(f"lit.py: error: no such test file: {args.test}", file=sys.stderr)
        return 2
    commands = read_run_lines(test)
    if not commands:
        print(f"lit.py: error: {args.test} has no RUN line", file=sys.stderr)
        return 2

    missing = missing_feature(test)
    if missing:
        print(f"SKIP: {args.test}: needs {missing[0]} ({missing[1]})")
        return SKIP

    for raw in commands:
        bad = outside_scratch(raw)
        if bad:
            print(f"lit.py: error: {args.test}: '{bad}' writes outside the test's scratch "
                  f"folder; write under %t (or to '-')", file=sys.stderr)
            return 2

    # Scratch space per test, named after its path inside the repository, so tests
    # can run in parallel without touching each other's files.
    tmp_root = os.path.abspath(args.tmp or os.path.join(os.path.dirname(os.path.abspath(args.gpucc)), "lit-tmp"))
    rel = os.path.relpath(test, REPO_ROOT)
    if rel.startswith(".."):
        rel = os.path.basename(test)
    scratch = os.path.join(tmp_root, rel + ".dir")
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch, exist_ok=True)

    folder = os.path.dirname(test)
    subst = {
        "gpucc": os.path.abspath(args.gpucc),
        "s": test,
        "S": folder,
        "p": folder,
        "t": os.path.join(scratch, "t"),
        "%": "%",
    }
    tools = {"FileCheck": os.path.abspath(args.filecheck), "not": os.path.abspath(args.not_)}

    for k, raw in enumerate(commands, 1):
        cmd = substitute_tools(substitute_percent(raw, subst), tools)
        if args.verbose:
            print(f"RUN {k}: {cmd}")
        try:
            r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=REPO_ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=args.timeout)
            rc, so, se = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired as e:
            rc, so, se = f"timeout after {args.timeout:g}s", e.stdout or b"", e.stderr or b""
        if rc != 0:
            print(f"FAIL: {rel}: RUN line {k} exited with {rc}")
            print(f"command: {cmd}")
            print("--- stdout ---")
            print(so.decode("utf-8", errors="replace"), end="")
            print("--- stderr ---")
            print(se.decode("utf-8", errors="replace"), end="")
            sys.stdout.flush()
            return 1
    print(f"PASS: {rel} ({len(commands)} RUN line{'s' if len(commands) != 1 else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
