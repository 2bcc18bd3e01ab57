#!/usr/bin/env python3
"""examples/serving on Ray Serve: starts Ray on this machine (its own temporary folder, no
dashboard, the HTTP proxy on a free port of 127.0.0.1), deploys examples/mlp.gir with
@serve.batch, sends concurrent requests over HTTP from threads, checks every answer
against an independent numpy implementation of the MLP (tests/python/test_examples_numpy.py,
not gpucc's), checks that some batch held several requests and that a bad request fails
alone, and shuts Ray down.

With a CUDA device the replica runs the model compiled for the GPU; without one, on the
reference executor; GET /info must say the one this machine calls for. Exits 77 (ctest:
skipped), saying why, where ray[serve] cannot be imported.

usage: test_serving.py [--requests N] [--max-batch-size N]
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.request

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "serving")
MLP = os.path.join(ROOT, "examples", "mlp.gir")
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
sys.path.insert(0, EXAMPLE)

from test_examples_numpy import mlp_forward  # noqa: E402

# The reference executor computes each op in float64 rounded to float32, as the oracle
# does; the GPU computes in float32 (fp32's bound, passes/precision.c).
RTOL = {"reference": 1e-5, "gpu": 1e-4}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url: str, body=None):
    """(status, the JSON answer) of a GET, or of a POST of body as JSON."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        text = e.read().decode(errors="replace")
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, text


def rel_err(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def check(rows, answers, backend):
    """Each answer against the oracle; a list of what is wrong."""
    want = mlp_forward(rows)
    problems = []
    for i, (status, ans) in enumerate(answers):
        if status != 200:
            problems.append("request %d: HTTP %d: %s" % (i, status, ans))
            continue
        probs, cls = np.asarray(ans.get("probs")), ans.get("class")
        if probs.shape != (10,):
            problems.append("request %d: probs of shape %s" % (i, probs.shape))
            continue
        e = rel_err(probs, want["probs"][i])
        if e > RTOL[backend]:
            problems.append("request %d: probs off by %.3g (relative, by norm)" % (i, e))
        # A near tie may go either way in float32: the class must then be one of the tied.
        p = want["probs"][i]
        if cls != int(want["class"][i]) and not (
                isinstance(cls, int) and 0 <= cls < 10 and p[cls] >= p.max() * (1 - RTOL[backend])):
            problems.append("request %d: class %r, want %d" % (i, cls, want["class"][i]))
    return problems


def start_ray(ray, tmp: str) -> None:
    """A local Ray. Its node waits a fixed 30 s for its raylet to register, which a busy
    two-core machine can miss: then once more, after ending the failed start's processes."""
    for attempt in (1, 2):
        try:
            ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=tmp,
                     configure_logging=False)
            return
        except Exception as e:  # Ray raises a bare Exception for it
            if attempt == 2 or "timed out during startup" not in str(e):
                raise
            print("serving: Ray's node did not start within its 30 s; starting it again")
            ray.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--max-batch-size", type=int, default=16)
    args = ap.parse_args()
    try:
        import fastapi  # noqa: F401 (ray[serve] brings it; the example's routes use it)
        import ray
        from ray import serve
    except ImportError as e:
        print("serving: skipped: ray[serve] cannot be imported (%s); "
              "pip install 'ray[serve]' (scripts/install-deps.sh does)" % e)
        return 77
    import gpucc
    import serve_gpucc

    no_gpu = gpucc.no_gpu()
    backend = "reference" if no_gpu else "gpu"
    print("serving: Ray %s, the model on %s" % (
        ray.__version__, "the reference executor (%s)" % no_gpu if no_gpu else "the GPU"))

    start = time.monotonic()
    # Short: Ray's socket paths under it must fit in 107 bytes.
    tmp = tempfile.mkdtemp(prefix="gpucc-ray-")
    # The replica imports serve_gpucc (by name, as the test does) and gpucc: the worker
    # processes get PYTHONPATH from this one.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [EXAMPLE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    problems = []
    try:
        start_ray(ray, tmp)
        print("serving: Ray sees %g GPUs" % ray.cluster_resources().get("GPU", 0))
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(serve_gpucc.gpucc_app(MLP, batch_dim="N", max_batch_size=args.max_batch_size,
                                        batch_wait_timeout_s=0.05),
                  name="mlp", route_prefix="/")
        url = "http://127.0.0.1:%d" % port
        print("serving: deployed in %.1f s" % (time.monotonic() - start))

        status, info = http(url + "/info")
        if status != 200 or info.get("backend") != backend:
            problems.append("/info: HTTP %d, %s; want backend %r" % (status, info, backend))
        else:
            print("serving: /info: %s" % info["how"])

        rows = np.random.default_rng(26).standard_normal((args.requests, 64)).astype(np.float32)
        t = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.requests) as pool:
            answers = list(pool.map(lambda r: http(url + "/predict", {"x": r.tolist()}), rows))
        print("serving: %d concurrent requests answered in %.2f s" % (
            len(rows), time.monotonic() - t))
        problems += check(rows, answers, backend)

        status, info = http(url + "/info")
        batches = {int(k): v for k, v in (info.get("batches", {}) if status == 200 else {}).items()}
        print("serving: batches (size: count): %s" % dict(sorted(batches.items())))
        if sum(k * v for k, v in batches.items()) != len(rows):
            problems.append("the batches hold %d rows, not the %d sent" % (
                sum(k * v for k, v in batches.items()), len(rows)))
        if not any(k > 1 for k in batches):
            problems.append("no batch held more than one request")
        if max(batches, default=0) > args.max_batch_size:
            problems.append("a batch of %d, over max_batch_size %d" % (
                max(batches), args.max_batch_size))

        # A bad row is refused alone, with the reason, beside a good one.
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            bad, good = pool.map(lambda b: http(url + "/predict", b),
                                 [{"x": [1.0, 2.0]}, {"x": rows[0].tolist()}])
        if bad[0] != 400 or "shape" not in json.dumps(bad[1]):
            problems.append("a row of 2 numbers: HTTP %d, %s; want 400 naming its shape" % bad)
        problems += ["beside a bad one: " + p for p in check(rows[:1], [good], backend)]
    finally:
        try:
            if ray.is_initialized():
                serve.shutdown()
        finally:
            ray.shutdown()
            shutil.rmtree(tmp, ignore_errors=True)
    print("serving: %.1f s in all" % (time.monotonic() - start))
    for p in problems:
        print("FAIL: " + p)
    print("serving: %s" % ("%d problems" % len(problems) if problems else
                           "every answer matches the numpy MLP"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
