"""gpucc from Python: compile an ONNX model (or gpucc's DSL) for the GPU and run it on
torch, CuPy or JAX tensors in place, or on numpy arrays.

    import gpucc, torch, torchvision
    m = torchvision.models.resnet50().eval()
    torch.onnx.export(m, torch.randn(1, 3, 224, 224), "r50.onnx")
    model = gpucc.compile("r50.onnx", precision="bf16")
    y = model(torch.randn(1, 3, 224, 224, device="cuda"))   # on torch's current stream

The runtime's C API (runtime/runtime.h) is the contract; this is a thin ctypes binding over
libgpucc (the JIT API, compiler/gpucc.h), each model.so's own runtime, and the gpucc
command for what it does (build a model.so, run the reference executor). Every failure
raises gpucc.Error with gpucc's message; nothing prints.
"""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import tempfile
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native, _tensors

__version__ = "0.1.0"


class Error(Exception):
    """A failure, with gpucc's message."""


class TensorInfo(NamedTuple):
    """A model input or output. shape: the dims it runs at (a ranged model's largest);
    ranges: each axis's smallest and largest size (equal for a fixed axis)."""
    name: str
    dtype: str  # gpucc's name: "f32", "bf16", "i64", ...
    shape: Tuple[int, ...]
    ranges: Tuple[Tuple[int, int], ...]


ModelSource = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, Any]
Dims = Mapping[str, Union[int, str, Tuple[int, int]]]


def _fail(lib: ctypes.CDLL, status: int, what: str) -> Error:
    msg = (lib.gpucc_last_error() or b"").decode(errors="replace")
    name = (lib.gpucc_status_name(status) or b"").decode()
    return Error("%s: %s" % (what, msg or name))


class Model:
    """A compiled model on one GPU: call it on tensors."""

    def __init__(self, lib: ctypes.CDLL, handle: int, name: str, device: int):
        self._lib = lib
        self._m = ctypes.c_void_p(handle)
        self.name = name
        self.device = device
        L, m = lib, self._m
        self._nin = L.gpucc_model_num_inputs(m)
        self._nout = L.gpucc_model_num_outputs(m)
        self._ranged = L.gpucc_model_num_symbols(m) > 0
        self.inputs: List[TensorInfo] = [self._info(i, True) for i in range(self._nin)]
        self._index = {t.name: i for i, t in enumerate(self.inputs)}
        self.outputs: List[TensorInfo] = [self._info(j, False) for j in range(self._nout)]
        self._in_codes = [L.gpucc_model_input_dtype(m, i) for i in range(self._nin)]
        self._out_codes = [L.gpucc_model_output_dtype(m, j) for j in range(self._nout)]
        # _tensors.torch_fast's tuple, made at the first call on torch tensors; False
        # where it cannot be (a ranged model, a type torch lacks)
        self._torch_fast: Any = False if self._ranged else ()
        self._in_ptrs = (ctypes.c_void_p * max(1, self._nin))()
        self._out_ptrs = (ctypes.c_void_p * max(1, self._nout))()
        if self._ranged:
            self.outputs = [t._replace(ranges=r) for t, r in zip(self.outputs, self._out_ranges())]

    def _info(self, i: int, is_input: bool) -> TensorInfo:
        L, m, k = self._lib, self._m, "input" if is_input else "output"
        name = getattr(L, "gpucc_model_%s_name" % k)(m, i).decode(errors="replace")
        code = getattr(L, "gpucc_model_%s_dtype" % k)(m, i)
        rank = getattr(L, "gpucc_model_%s_rank" % k)(m, i)
        dims = getattr(L, "gpucc_model_%s_dims" % k)(m, i)
        shape = tuple(dims[a] for a in range(rank))
        ranges = tuple((n, n) for n in shape)
        if is_input and self._ranged:
            lo, hi, rs = ctypes.c_int64(), ctypes.c_int64(), []
            for a in range(rank):
                L.gpucc_model_input_range(m, i, a, ctypes.byref(lo), ctypes.byref(hi))
                rs.append((lo.value, hi.value))
            ranges = tuple(rs)
        return TensorInfo(name, _native.DTYPES.get(code, ("?",))[0], shape, ranges)

    def _out_ranges(self) -> List[Tuple[Tuple[int, int], ...]]:
        """Each output's dims at the inputs' smallest and at their largest sizes."""
        at = [self._output_dims([tuple(r[e] for r in t.ranges) for t in self.inputs])
              for e in (0, 1)]
        return [tuple(zip(lo, hi)) for lo, hi in zip(*at)]

    def _output_dims(self, shapes: Sequence[Tuple[int, ...]]) -> List[Tuple[int, ...]]:
        ins = [(ctypes.c_int64 * max(1, len(s)))(*s) for s in shapes]
        outs = [(ctypes.c_int64 * max(1, len(t.shape)))() for t in self.outputs]
        in_arr = (ctypes.c_void_p * max(1, len(ins)))(*[ctypes.addressof(a) for a in ins])
        out_arr = (ctypes.c_void_p * max(1, len(outs)))(*[ctypes.addressof(a) for a in outs])
        st = self._lib.gpucc_model_output_dims_for(self._m, in_arr, out_arr)
        if st:
            raise _fail(self._lib, st, self.name)
        return [tuple(o[a] for a in range(len(t.shape))) for o, t in zip(outs, self.outputs)]

    @property
    def kernels(self) -> int:
        """Kernels one inference launches (its CUDA graph's kernel nodes)."""
        return self._lib.gpucc_model_kernels(self._m)

    def close(self) -> None:
        """Frees the model's device memory (waiting for its work first)."""
        if self._m:
            self._lib.gpucc_model_destroy(self._m)
            self._m = ctypes.c_void_p()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        def sig(ts: List[TensorInfo]) -> str:
            return ", ".join("%s: %s%s" % (t.name, t.dtype, list(t.shape)) for t in ts)
        return "<gpucc.Model %s (%s) -> (%s)>" % (self.name, sig(self.inputs), sig(self.outputs))

    def _ordered(self, args: Sequence[Any], named: Mapping[str, Any]) -> List[Any]:
        if len(args) > self._nin:
            raise Error("%s: %d inputs given, the model has %d (%s)" % (
                self.name, len(args), self._nin, ", ".join(t.name for t in self.inputs)))
        xs: List[Any] = list(args) + [None] * (self._nin - len(args))
        for k, v in named.items():
            i = self._index.get(k)
            if i is None:
                raise Error("%s: no input named '%s' (inputs: %s)" % (
                    self.name, k, ", ".join(t.name for t in self.inputs)))
            if xs[i] is not None:
                raise Error("%s: input '%s' given twice" % (self.name, k))
            xs[i] = v
        missing = [self.inputs[i].name for i, x in enumerate(xs) if x is None]
        if missing:
            raise Error("%s: input%s %s not given" % (
                self.name, "s" if len(missing) > 1 else "", ", ".join(missing)))
        return xs

    def _check(self, i: int, v: _tensors.View) -> None:
        t = self.inputs[i]
        if v.code == self._in_codes[i] and (v.shape == t.shape if not self._ranged else
                                             len(v.shape) == len(t.shape)):
            if not self._ranged:
                return
        dims = (ctypes.c_int64 * max(1, len(v.shape)))(*v.shape)
        st = self._lib.gpucc_model_check_input(self._m, i, v.code or 0, len(v.shape), dims)
        if st:
            raise _fail(self._lib, st, self.name)

    def __call__(self, *args: Any, stream: Any = None, out: Any = None, **named: Any) -> Any:
        """Runs the model. Inputs by position or name: device tensors (torch, CuPy, JAX...)
        are read in place on `stream` (default: the framework's current stream; nothing
        synchronizes), numpy arrays through host memory (returns when done). Returns the
        output, or a tuple of them for a model of several, new tensors of the first
        input's framework unless `out` (a sequence, or a dict by name) gives them."""
        if not self._m:
            raise Error("%s: the model was closed" % self.name)
        xs = args if not named and len(args) == self._nin else self._ordered(args, named)
        fast = self._torch_fast  # () before the first call on torch tensors
        if xs and (type(xs[0]) is fast[6] if fast else
                   fast == () and _tensors.is_torch(xs[0])):
            got = self._call_torch(xs, stream, out)
            if got is not None:
                return got
        views, keep = [], []
        handle = None if stream is None else _tensors.stream_handle(stream)
        for i, x in enumerate(xs):
            v, k = _tensors.view(x, handle)
            views.append(v)
            keep.append(k)
            if not v.contiguous:
                raise Error("%s: input '%s' is not contiguous (call .contiguous() on it)" % (
                    self.name, self.inputs[i].name))
            self._check(i, v)
        host = views[0].device == -1
        for i, v in enumerate(views):
            if (v.device == -1) != host:
                raise Error("%s: input '%s' is in %s memory, input '%s' in %s" % (
                    self.name, self.inputs[0].name, "host" if host else "device",
                    self.inputs[i].name, "host" if v.device == -1 else "device"))
            if v.device >= 0 and v.device != self.device:
                raise Error("%s: input '%s' is on CUDA device %d, the model on %d" % (
                    self.name, self.inputs[i].name, v.device, self.device))
            if v.device == -3:
                raise Error("%s: input '%s' is on a device gpucc cannot read" % (
                    self.name, self.inputs[i].name))
        if handle is None:
            handle = 0 if host else _tensors.default_stream(views[0], xs[0])
        shapes = [t.shape for t in self.outputs]
        if self._ranged:
            shapes = self._output_dims([v.shape for v in views])
        outs = self._outputs(out, views[0], xs[0], shapes, host)
        for i, v in enumerate(views):
            self._in_ptrs[i] = v.ptr
        for j, (o, _) in enumerate(outs):
            self._out_ptrs[j] = o.ptr
        L = self._lib
        if self._ranged:
            dims = [(ctypes.c_int64 * max(1, len(v.shape)))(*v.shape) for v in views]
            arr = (ctypes.c_void_p * max(1, len(dims)))(*[ctypes.addressof(a) for a in dims])
            run = L.gpucc_model_run_dims_host if host else L.gpucc_model_run_dims
            st = run(self._m, self._in_ptrs, arr, self._out_ptrs, None, handle)
        else:
            run = L.gpucc_model_run_host if host else L.gpucc_model_run
            st = run(self._m, self._in_ptrs, self._out_ptrs, handle)
        del keep
        if st:
            raise _fail(L, st, self.name)
        results = tuple(x for _, x in outs)
        return results[0] if len(results) == 1 else results

    def _call_torch(self, xs: Sequence[Any], stream: Any, out: Any) -> Any:
        """__call__ for CUDA torch tensors on the model's device that match it exactly, in
        as few Python steps as a call can take (the binding's cost per call is what it
        adds to gpucc_model_run). None for anything else, which the general path takes
        (and names what does not match)."""
        fast = self._torch_fast
        if not fast:
            fast = self._torch_fast = _tensors.torch_fast(self)
            if not fast:
                return None
        in_dtypes, in_shapes, out_dtypes, out_shapes, device, raw_stream, T, empty = fast
        ptrs, dev = self._in_ptrs, self.device
        for i, x in enumerate(xs):
            if (type(x) is not T or x.dtype is not in_dtypes[i] or x.shape != in_shapes[i] or
                    x.get_device() != dev or not x.is_contiguous()):
                return None
            ptrs[i] = x.data_ptr()
        if out is None:
            ys = [empty(s, dtype=d, device=device) for s, d in zip(out_shapes, out_dtypes)]
        elif type(out) is T or isinstance(out, (list, tuple)) and len(out) == self._nout:
            ys = [out] if type(out) is T else out
            if len(ys) != self._nout:
                return None
            for j, y in enumerate(ys):
                if (type(y) is not T or y.dtype is not out_dtypes[j] or y.shape != out_shapes[j]
                        or y.get_device() != dev or not y.is_contiguous()):
                    return None
        else:
            return None
        optrs = self._out_ptrs
        for j, y in enumerate(ys):
            optrs[j] = y.data_ptr()
        h = raw_stream(dev) if stream is None else _tensors.stream_handle(stream)
        st = self._lib.gpucc_model_run(self._m, ptrs, optrs, h)
        if st:
            raise _fail(self._lib, st, self.name)
        return ys[0] if self._nout == 1 else tuple(ys)

    def _outputs(self, out: Any, v0: _tensors.View, x0: Any, shapes: List[Tuple[int, ...]],
                 host: bool) -> List[Tuple[_tensors.View, Any]]:
        """(view, tensor) of each output: out's, checked, or new ones."""
        if out is None:
            res = []
            for j, shape in enumerate(shapes):
                try:
                    y = _tensors.empty_like_framework(v0, x0, shape, self._out_codes[j])
                except TypeError as e:
                    raise Error("%s: output '%s': %s" % (self.name, self.outputs[j].name, e))
                if y is None:
                    raise Error("%s: gpucc cannot make %s tensors for the outputs: pass "
                                "out=" % (self.name, type(x0).__name__))
                res.append((_tensors.view(y, None)[0], y))
            return res
        if isinstance(out, Mapping):
            unknown = set(out) - {t.name for t in self.outputs}
            if unknown:
                raise Error("%s: out names no output %s" % (self.name, sorted(unknown)[0]))
            given = [out.get(t.name) for t in self.outputs]
        else:
            given = list(out) if isinstance(out, (list, tuple)) else [out]
        if len(given) != self._nout or any(g is None for g in given):
            raise Error("%s: out must give all %d outputs (%s)" % (
                self.name, self._nout, ", ".join(t.name for t in self.outputs)))
        res = []
        for j, y in enumerate(given):
            v, _ = _tensors.view(y, None)
            t = self.outputs[j]
            if v.code != self._out_codes[j] or v.shape != tuple(shapes[j]) or not v.contiguous:
                raise Error("%s: out for output '%s' must be a contiguous %s%s" % (
                    self.name, t.name, t.dtype, list(shapes[j])))
            if (v.device == -1) != host:
                raise Error("%s: out for output '%s' is in %s memory, the inputs in %s" % (
                    self.name, t.name, "host" if v.device == -1 else "device",
                    "host" if host else "device"))
            if v.kind == "numpy" and y is not v and not isinstance(y, np.ndarray):
                raise Error("%s: out for output '%s' must be a numpy array" % (self.name, t.name))
            res.append((v, y))
        return res

    def time(self, iters: int = 100, warmup: int = 10, stream: Any = None) -> float:
        """The median GPU time of one replay of the model's CUDA graph, in ms (replays
        read what the last call left in the arena; copies in and out are not included)."""
        ms = ctypes.c_float()
        h = 0 if stream is None else _tensors.stream_handle(stream)
        st = self._lib.gpucc_model_time(self._m, warmup, iters, h, ctypes.byref(ms))
        if st:
            raise _fail(self._lib, st, self.name)
        return ms.value


def no_gpu(device: int = 0) -> str:
    """'' when CUDA device `device` is there to run models on, else why not, in the
    runtime's words ("no CUDA driver: ...", "no CUDA device 1: ..."). Compiles nothing."""
    lib = _native.libgpucc()
    major, minor = ctypes.c_int(), ctypes.c_int()
    st = lib.gpucc_device_compute_capability(device, ctypes.byref(major), ctypes.byref(minor))
    return str(_fail(lib, st, "CUDA device %d" % device)) if st else ""


def _source(model: ModelSource) -> Tuple[bytes, str]:
    """The model's bytes and its name in messages: a path, bytes, an onnx.ModelProto or
    DSL text."""
    if hasattr(model, "SerializeToString"):
        return model.SerializeToString(), "<onnx.ModelProto>"
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), "<bytes>"
    if isinstance(model, str) and "\n" in model:
        return model.encode(), "<text>"
    path = os.fspath(model)
    try:
        with open(path, "rb") as f:
            return f.read(), path
    except OSError as e:
        raise Error("%s: %s" % (path, e.strerror or e)) from None


def _flags(precision: Optional[str], dims: Optional[Dims], arch: Optional[str],
           passes: Optional[Sequence[str]]) -> List[str]:
    flags = ["precision=" + precision] if precision else []
    if arch:
        flags.append("arch=" + arch)
    if passes is not None:
        flags.append("passes=" + (passes if isinstance(passes, str) else ",".join(passes)))
    for sym, v in (dims or {}).items():
        if isinstance(v, tuple):
            v = "%d..%d" % v
        flags.append("dim=%s=%s" % (sym, v))
    return flags


def compile(model: ModelSource, *, precision: str = "fp32", dims: Optional[Dims] = None,
            arch: Optional[str] = None, passes: Optional[Sequence[str]] = None,
            device: int = 0) -> Model:
    """Compiles model in this process (the JIT API) and creates it on CUDA device `device`.
    model: a path (.onnx or .gir, told by content), bytes, an onnx.ModelProto or DSL text.
    dims: symbolic dims bound ({"batch": 8}) or given ranges ({"batch": "1..64"} or
    {"batch": (1, 64)}). passes: None for the default pipeline."""
    data, name = _source(model)
    lib = _native.libgpucc()
    flags = _flags(precision, dims, arch, passes)
    if not name.startswith("<"):
        flags.append("base-dir=" + (os.path.dirname(os.path.abspath(name)) or "."))
    argv = (ctypes.c_char_p * max(1, len(flags)))(*[f.encode() for f in flags])
    handle = ctypes.c_void_p()
    diag = _native.Diag()
    buf = ctypes.create_string_buffer(data, len(data))
    st = lib.gpucc_compile_flags(buf, len(data), name.encode(), argv, len(flags), device,
                                 ctypes.byref(handle), ctypes.byref(diag))
    if st:
        raise Error(diag.msg.decode(errors="replace") or "gpucc: compile failed")
    return Model(lib, handle.value, name, device)


def _with_file(model: ModelSource, tmp: str) -> str:
    """A path to the model: its own, or the bytes written into tmp."""
    if isinstance(model, (str, os.PathLike)) and not (isinstance(model, str) and "\n" in model):
        return os.fspath(model)
    data, _ = _source(model)
    fmt = _native.libgpucc().model_format(data, len(data))
    path = os.path.join(tmp, "model.gir" if fmt in (0, 1) else "model.onnx")
    with open(path, "wb") as f:
        f.write(data)
    return path


def _command(args: List[str]) -> subprocess.CompletedProcess:
    """Runs the gpucc command; its message as an Error when it fails."""
    p = subprocess.run([_native.command()] + args, capture_output=True, text=True)
    if p.returncode:
        raise Error((p.stderr or p.stdout).strip() or "gpucc exited with %d" % p.returncode)
    return p


def _options(precision: Optional[str], dims: Optional[Dims], arch: Optional[str] = None,
             passes: Optional[Sequence[str]] = None) -> List[str]:
    """_flags as the gpucc command's options."""
    out: List[str] = []
    for f in _flags(precision, dims, arch, passes):
        out += ["--dim", f[4:]] if f.startswith("dim=") else ["--" + f]
    return out


def build(model: ModelSource, path: Union[str, "os.PathLike[str]"], *, precision: str = "fp32",
          dims: Optional[Dims] = None, arch: Optional[str] = None,
          passes: Optional[Sequence[str]] = None) -> str:
    """Compiles model into a model.so at path, as `gpucc model.onnx -o model.so` does (no
    GPU needed); returns the path."""
    with tempfile.TemporaryDirectory(prefix="gpucc-") as tmp:
        _command([_with_file(model, tmp), "-o", os.fspath(path), "-q"] +
                 _options(precision, dims, arch, passes))
    return os.fspath(path)


def load(path: Union[str, "os.PathLike[str]"], device: int = 0) -> Model:
    """Loads a model.so and creates it on CUDA device `device`."""
    p = os.path.abspath(os.fspath(path))
    if not os.path.isfile(p):
        raise Error("%s: no such file" % os.fspath(path))
    try:
        lib = _native.declare_runtime(ctypes.CDLL(p))
        load_fn = lib.gpucc_model_load
    except (OSError, AttributeError) as e:
        raise Error("%s: not a gpucc model.so (%s)" % (os.fspath(path), e)) from None
    load_fn.restype = ctypes.c_int
    load_fn.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
    handle = ctypes.c_void_p()
    st = load_fn(device, ctypes.byref(handle))
    if st:
        raise _fail(lib, st, os.fspath(path))
    return Model(lib, handle.value, os.fspath(path), device)


def _escape(name: str) -> str:
    """The file name `gpucc run --output-dir` gives an output of that name."""
    ok = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
    return "".join(chr(b) if b in ok else "_x%02x" % b for b in name.encode())


def inspect(model: ModelSource) -> Dict[str, Any]:
    """What `gpucc inspect --json` says of model (no GPU needed): for a model.so its build
    (version, command, source and SHA-256, precision, arch), inputs and outputs, classes,
    kernels and memory; for a .gir or ONNX model (a path, bytes, an onnx.ModelProto or DSL
    text) its inputs and outputs as "type" strings ("f32[N, 64]"), ops and weight bytes."""
    with tempfile.TemporaryDirectory(prefix="gpucc-") as tmp:
        return json.loads(_command(["inspect", _with_file(model, tmp), "--json"]).stdout)


def reference(model: ModelSource, inputs: Union[Mapping[str, Any], Sequence[Any]], *,
              dims: Optional[Dims] = None) -> Dict[str, np.ndarray]:
    """Runs model on gpucc's reference executor (the CPU, in f32, the graph as written)
    on numpy arrays, inputs by name (a dict) or in order; returns the outputs by name."""
    with tempfile.TemporaryDirectory(prefix="gpucc-") as tmp:
        src = _with_file(model, tmp)
        info = inspect(src)
        names = [t["name"] for t in info.get("inputs", [])]
        given = dict(inputs) if isinstance(inputs, Mapping) else dict(zip(names, inputs))
        if not isinstance(inputs, Mapping) and len(inputs) != len(names):
            raise Error("%s: %d inputs given, the model has %d (%s)" % (
                src, len(inputs), len(names), ", ".join(names)))
        args = ["run", src, "--cpu", "--output-dir", os.path.join(tmp, "out")]
        args += _options(None, dims)
        for k, (name, x) in enumerate(given.items()):
            f = os.path.join(tmp, "in%d.npy" % k)
            np.save(f, np.ascontiguousarray(np.asarray(x)))
            args += ["--input", "%s=%s" % (name, f)]
        _command(args)
        return {t["name"]: np.load(os.path.join(tmp, "out", _escape(t["name"]) + ".npy"))
                for t in info.get("outputs", [])}


__all__ = ["Error", "Model", "TensorInfo", "build", "compile", "inspect", "load", "no_gpu",
           "reference"]
