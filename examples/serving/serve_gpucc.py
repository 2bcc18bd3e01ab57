"""A gpucc model behind Ray Serve: concurrent HTTP requests, one row each, batched by
@serve.batch into one model call.

With a CUDA device the replica compiles the model for it in-process (gpucc.compile, the
batch dim given a range 1..max_batch_size, so that every batch runs at its own size) or
loads a model.so built with such a range (gpucc.load), and runs each batch on the GPU:
on torch tensors where torch sees the device, else on numpy arrays through gpucc's host
path. Without one it runs the same batches on gpucc's CPU reference executor
(gpucc.reference), which is slow but gives the answers the GPU must give. GET /info says
which it uses.

    pip install 'ray[serve]'            # and gpucc: pip install . in the repository root
    cd examples/serving
    serve run serve_gpucc:app_builder model=../mlp.gir batch_dim=N max_batch_size=32
    curl -s localhost:8000/predict -H 'content-type: application/json' \\
         -d "{\\"x\\": $(python3 -c 'print([0.5] * 64)')}"
    curl -s localhost:8000/info

A request is one row: {"x": [64 numbers]} (each input by name, without the batch dim);
the answer is that row of every output by name, {"probs": [10 numbers], "class": 3} for
examples/mlp.gir.
"""
# No `from __future__ import annotations`: FastAPI reads the routes' annotations, and
# Serve's ingress leaves it unable to resolve them from strings.
import asyncio
import collections
import concurrent.futures
import os
import re
from typing import Any, Dict, List, Optional

import numpy as np
import ray
from fastapi import Body, FastAPI, HTTPException
from ray import serve
from ray.serve import Application

import gpucc

# gpucc's element types as numpy's
NUMPY_TYPES = {"f32": "float32", "f16": "float16", "f64": "float64", "i64": "int64",
               "i32": "int32", "i16": "int16", "i8": "int8", "u8": "uint8", "bool": "bool"}


def is_model_so(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def source_signature(path: str) -> Dict[str, Dict[str, Any]]:
    """A .gir's or ONNX model's inputs and outputs, {name: {"dtype", "shape"}}, from
    gpucc.inspect. Symbolic dims stay names ("N")."""
    info = gpucc.inspect(path)

    def parse(t: Dict[str, str]) -> Dict[str, Any]:
        m = re.fullmatch(r"(\w+)\[(.*)\]", t["type"])
        if not m:
            raise gpucc.Error("%s: cannot read the type of '%s': %s" % (path, t["name"], t["type"]))
        dims = [d.strip() for d in m.group(2).split(",") if d.strip()]
        return {"dtype": m.group(1), "shape": [int(d) if d.isdigit() else d for d in dims]}

    return {k: {t["name"]: parse(t) for t in info[k]} for k in ("inputs", "outputs")}


class Backend:
    """The model and how a batch runs on it: run({input: array [B, ...]}) gives
    {output: array [B, ...]}. Made and called on one worker thread."""

    def __init__(self, model: str, batch_dim: str, max_batch_size: int, precision: str):
        self.path, self.batch_dim, self.max_batch_size = model, batch_dim, max_batch_size
        self.no_gpu = gpucc.no_gpu()
        self.inputs: Dict[str, Dict[str, Any]] = {}
        self.outputs: Dict[str, Dict[str, Any]] = {}
        self.model: Optional[gpucc.Model] = None
        self.torch: Any = None
        if self.no_gpu:
            if is_model_so(model):
                raise gpucc.Error("%s: a model.so runs only on a GPU, and this replica has "
                                  "none (%s); serve the model's .onnx or .gir" % (
                                      model, self.no_gpu))
            self.kind = "reference"
            sig = source_signature(model)
            self.inputs, self.outputs = sig["inputs"], sig["outputs"]
        else:
            self._gpu(model, batch_dim, max_batch_size, precision)
        for name, t in self.inputs.items():
            if t["dtype"] not in NUMPY_TYPES:
                raise gpucc.Error("%s: input '%s' is %s, which JSON numbers cannot be read "
                                  "as here" % (model, name, t["dtype"]))

    def _gpu(self, model: str, batch_dim: str, max_batch_size: int, precision: str) -> None:
        self.kind = "gpu"
        if is_model_so(model):
            self.model = gpucc.load(model)
        else:
            self.model = gpucc.compile(model, precision=precision,
                                       dims={batch_dim: (1, max_batch_size)})
        for t in self.model.inputs:
            lo, hi = t.ranges[0] if t.ranges else (0, 0)
            if lo > 1 or hi < max_batch_size:
                raise gpucc.Error("%s: input '%s' takes batches of %d to %d rows, not 1 to "
                                  "max_batch_size %d" % (model, t.name, lo, hi, max_batch_size))
        self.inputs = {t.name: {"dtype": t.dtype, "shape": [batch_dim] + list(t.shape[1:])}
                       for t in self.model.inputs}
        self.outputs = {t.name: {"dtype": t.dtype, "shape": [batch_dim] + list(t.shape[1:])}
                        for t in self.model.outputs}
        try:
            import torch
            if torch.cuda.is_available():
                self.torch = torch
        except ImportError:
            pass

    def describe(self) -> Dict[str, Any]:
        how = {"gpu": "on the GPU (%s)" % ("torch tensors" if self.torch else "numpy, host path"),
               "reference": "on the CPU reference executor (%s)" % self.no_gpu}[self.kind]
        return {"backend": self.kind, "how": how, "model": self.path,
                "batch_dim": self.batch_dim, "max_batch_size": self.max_batch_size,
                "inputs": self.inputs, "outputs": self.outputs}

    def run(self, inputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        n = len(next(iter(inputs.values())))
        if self.kind == "reference":
            return gpucc.reference(self.path, inputs, dims={self.batch_dim: n})
        assert self.model is not None
        names = [t.name for t in self.model.outputs]
        if self.torch:
            # The rows go to the device once; the model runs on torch's current stream, and
            # .cpu() waits for it there.
            xs = {k: self.torch.from_numpy(v).cuda() for k, v in inputs.items()}
            ys = self.model(**xs)
            ys = ys if isinstance(ys, tuple) else (ys,)
            return {k: y.cpu().numpy() for k, y in zip(names, ys)}
        ys = self.model(**inputs)
        ys = ys if isinstance(ys, tuple) else (ys,)
        return dict(zip(names, ys))


app = FastAPI()


@serve.deployment
@serve.ingress(app)
class GpuccModel:
    def __init__(self, model: str, batch_dim: str = "N", max_batch_size: int = 32,
                 batch_wait_timeout_s: float = 0.01, precision: str = "fp32"):
        # One thread makes the model and runs every batch: the event loop stays free to
        # take requests while a batch runs, and the GPU is used from one thread.
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self.backend = self.pool.submit(Backend, model, batch_dim, max_batch_size,
                                        precision).result()
        self.predict_batch.set_max_batch_size(max_batch_size)
        self.predict_batch.set_batch_wait_timeout_s(batch_wait_timeout_s)
        self.batches: collections.Counter = collections.Counter()  # batch size -> batches

    @app.get("/info")
    def info(self) -> Dict[str, Any]:
        """How the model runs, and the batches run so far ({size: count})."""
        return dict(self.backend.describe(), batches=dict(self.batches))

    @app.post("/predict")
    async def predict(self, row: Dict[str, Any] = Body()) -> Dict[str, Any]:
        """One row: each input without the batch dim. Checked here, so that a bad request
        fails alone rather than its batch."""
        xs = {}
        for name, t in self.backend.inputs.items():
            if name not in row:
                raise HTTPException(400, "input '%s' not given" % name)
            try:
                x = np.asarray(row[name], dtype=NUMPY_TYPES[t["dtype"]])
            except (TypeError, ValueError) as e:
                raise HTTPException(400, "input '%s': %s" % (name, e)) from None
            if list(x.shape) != t["shape"][1:]:
                raise HTTPException(400, "input '%s' has shape %s, not %s" % (
                    name, list(x.shape), t["shape"][1:]))
            xs[name] = x
        unknown = sorted(set(row) - set(xs))
        if unknown:
            raise HTTPException(400, "no input named '%s'" % unknown[0])
        return await self.predict_batch(xs)

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.01)
    async def predict_batch(self, rows: List[Dict[str, np.ndarray]]) -> List[Dict[str, Any]]:
        """The rows that arrived together, as one batch through the model."""
        self.batches[len(rows)] += 1
        batch = {k: np.stack([r[k] for r in rows]) for k in rows[0]}
        loop = asyncio.get_running_loop()
        ys = await loop.run_in_executor(self.pool, self.backend.run, batch)
        return [{k: y[i].tolist() for k, y in ys.items()} for i in range(len(rows))]


def gpucc_app(model: str, batch_dim: str = "N", max_batch_size: int = 32,
              batch_wait_timeout_s: float = 0.01, precision: str = "fp32",
              num_gpus: Optional[float] = None) -> Application:
    """The deployment of model, one replica. num_gpus: what the replica asks Ray for
    (default: 1 where the Ray cluster this process is connected to has a GPU, or, before
    it connects, where this machine has a CUDA device; else 0). The replica itself decides
    how it runs, by whether it sees a CUDA device. Serve gives a replica at most
    max_ongoing_requests requests at once: room is made for two full batches."""
    if num_gpus is None:
        if ray.is_initialized():
            num_gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
        else:
            num_gpus = 0 if gpucc.no_gpu() else 1
    return GpuccModel.options(
        ray_actor_options={"num_gpus": num_gpus},
        max_ongoing_requests=2 * max_batch_size,
    ).bind(os.path.abspath(model), batch_dim, max_batch_size, batch_wait_timeout_s, precision)


def app_builder(args: Dict[str, str]) -> Application:
    """For `serve run serve_gpucc:app_builder model=PATH [batch_dim=N] [max_batch_size=32]
    [batch_wait_timeout_s=0.01] [precision=fp32] [num_gpus=1]`."""
    known = {"model", "batch_dim", "max_batch_size", "batch_wait_timeout_s", "precision",
             "num_gpus"}
    if "model" not in args or set(args) - known:
        raise ValueError("serve_gpucc: arguments are model=PATH and any of %s" %
                         ", ".join(sorted(known - {"model"})))
    return gpucc_app(args["model"], args.get("batch_dim", "N"),
                     int(args.get("max_batch_size", 32)),
                     float(args.get("batch_wait_timeout_s", 0.01)),
                     args.get("precision", "fp32"),
                     float(args["num_gpus"]) if "num_gpus" in args else None)
