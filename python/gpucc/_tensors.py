"""Tensors of other frameworks, seen as gpucc sees a buffer: a pointer, dims, an element
type and where the memory is. Device tensors are used in place (zero-copy): torch's
directly, others through __cuda_array_interface__ or __dlpack__; host tensors are numpy
arrays. New outputs are made by the framework of the first input (torch, CuPy, numpy).
"""
from __future__ import annotations

import ctypes
import sys
from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

from ._native import DTYPES

# numpy's dtype names to gpucc's numbers, and back
_NP_TO_CODE = {np.dtype(npname): code for code, (_, npname, _) in DTYPES.items() if npname}
# torch's dtype names (str(torch.float32) without "torch.") to gpucc's numbers
_TORCH_TO_CODE = {"float32": 1, "float16": 2, "bfloat16": 3, "float64": 4, "int64": 5,
                  "int32": 6, "int16": 7, "int8": 8, "uint8": 9, "bool": 10,
                  "float8_e4m3fn": 11, "float8_e5m2": 12}


class View(NamedTuple):
    """One tensor as gpucc takes it."""
    ptr: int
    shape: Tuple[int, ...]
    code: int            # gpucc's element type
    device: int          # CUDA device ordinal; -1 for host memory; -2 unknown (a device)
    contiguous: bool
    kind: str            # "torch", "cupy", "cai", "dlpack" or "numpy"


def _torch():
    return sys.modules.get("torch")


def is_torch(x: Any) -> bool:
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


def torch_fast(model: Any) -> Any:
    """What Model._call_torch compares and makes, once per model: the inputs' torch dtypes
    and shapes, the outputs', the model's device, torch's current-stream getter,
    torch.Tensor and torch.empty; False when an input or output has no torch type."""
    t = _torch()
    names = {c: n for n, c in _TORCH_TO_CODE.items()}
    if any(c not in names for c in model._in_codes + model._out_codes):
        return False
    dt = lambda c: getattr(t, names[c], None)  # noqa: E731
    if any(dt(c) is None for c in model._in_codes + model._out_codes):
        return False
    raw = getattr(t._C, "_cuda_getCurrentRawStream", None)
    if raw is None:
        raw = lambda dev: t.cuda.current_stream(dev).cuda_stream  # noqa: E731
    return ([dt(c) for c in model._in_codes], [t.Size(i.shape) for i in model.inputs],
            [dt(c) for c in model._out_codes], [tuple(o.shape) for o in model.outputs],
            t.device("cuda", model.device), raw, t.Tensor, t.empty)


def torch_view(x: Any) -> View:
    code = _TORCH_TO_CODE.get(str(x.dtype)[6:], 0)
    dev = x.device.index if x.is_cuda else (-1 if x.device.type == "cpu" else -3)
    if dev is None:
        dev = -2
    return View(x.data_ptr(), tuple(x.shape), code, dev, x.is_contiguous(), "torch")


def _c_contiguous(shape, strides, itemsize) -> bool:
    if strides is None:
        return True
    want = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != want:
            return False
        want *= n
    return True


def _cai_view(x: Any, cai: dict) -> View:
    dt = np.dtype(cai["typestr"])
    shape = tuple(int(n) for n in cai["shape"])
    mod = type(x).__module__.split(".")[0]
    dev = -2
    if mod == "cupy":
        dev = int(x.device.id)
    return View(int(cai["data"][0] or 0), shape, _NP_TO_CODE.get(dt, 0), dev,
                _c_contiguous(shape, cai.get("strides"), dt.itemsize),
                "cupy" if mod == "cupy" else "cai")


# DLPack's structs (dlpack.h): DLManagedTensor begins with its DLTensor.
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
# (DLPack type code, bits) to gpucc's numbers: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool
_DL_TO_CODE = {(2, 32): 1, (2, 16): 2, (4, 16): 3, (2, 64): 4, (0, 64): 5, (0, 32): 6,
               (0, 16): 7, (0, 8): 8, (1, 8): 9, (6, 8): 10}

_capsule_ptr = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_ptr.restype = ctypes.c_void_p
_capsule_ptr.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _dlpack_view(x: Any, stream: Optional[int]) -> Tuple[View, Any]:
    """x's DLPack view, and the capsule that keeps it alive while it is used."""
    dev_type, _ = x.__dlpack_device__()
    kw = {"stream": stream if stream else 1} if dev_type == _DL_CUDA else {}
    capsule = x.__dlpack__(**kw)
    t = _DLTensor.from_address(_capsule_ptr(capsule, b"dltensor"))
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    itemsize = max(1, t.dtype.bits // 8)
    code = _DL_TO_CODE.get((t.dtype.code, t.dtype.bits), 0) if t.dtype.lanes == 1 else 0
    cuda = t.device.device_type in (_DL_CUDA, _DL_CUDA_MANAGED)
    host = t.device.device_type in (_DL_CPU, _DL_CUDA_HOST)
    dev = t.device.device_id if cuda else (-1 if host else -3)
    return View((t.data or 0) + t.byte_offset, shape, code, dev,
                _c_contiguous(shape, [s * itemsize for s in strides] if strides else None,
                              itemsize), "dlpack"), capsule


def view(x: Any, stream: Optional[int]) -> Tuple[View, Any]:
    """x as gpucc takes it, and what must stay alive while gpucc reads it."""
    if is_torch(x):
        return torch_view(x), None
    cai = getattr(x, "__cuda_array_interface__", None) if not isinstance(x, np.ndarray) else None
    if cai is not None:
        return _cai_view(x, cai), None
    if not isinstance(x, np.ndarray) and hasattr(x, "__dlpack__") and hasattr(
            x, "__dlpack_device__") and x.__dlpack_device__()[0] != _DL_CPU:
        return _dlpack_view(x, stream)
    a = np.ascontiguousarray(x)
    return View(a.ctypes.data, a.shape, _NP_TO_CODE.get(a.dtype, 0), -1, True, "numpy"), a


def default_stream(v: View, x: Any) -> int:
    """The stream a device tensor's framework is working on: torch's and CuPy's current
    stream, else the legacy default stream (0)."""
    if v.kind == "torch":
        t = _torch()
        raw = getattr(t._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            return raw(v.device)
        return t.cuda.current_stream(x.device).cuda_stream
    if v.kind == "cupy":
        return sys.modules["cupy"].cuda.get_current_stream().ptr
    return 0


def stream_handle(stream: Any) -> int:
    """A stream given as an int (a cudaStream_t), a torch.cuda.Stream or a CuPy stream."""
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):
        h = getattr(stream, attr, None)
        if isinstance(h, int):
            return h
    raise TypeError("stream: expected an int (a cudaStream_t), a torch.cuda.Stream or a "
                    "CuPy stream, got %s" % type(stream).__name__)


def empty_like_framework(v: View, x: Any, shape: Tuple[int, ...], code: int) -> Any:
    """A new tensor of shape and gpucc type code from the framework of x, on x's device."""
    if v.kind == "torch":
        t = _torch()
        name = next(k for k, c in _TORCH_TO_CODE.items() if c == code)
        return t.empty(shape, dtype=getattr(t, name), device=x.device)
    npname = DTYPES[code][1]
    if v.kind == "numpy":
        if npname is None:
            raise TypeError("numpy has no %s type" % DTYPES[code][0])
        return np.empty(shape, dtype=npname)
    if v.kind == "cupy" and npname is not None:
        cp = sys.modules["cupy"]
        with cp.cuda.Device(v.device):
            return cp.empty(shape, dtype=npname)
    return None


__all__ = ["View", "default_stream", "empty_like_framework", "is_torch", "stream_handle",
           "torch_view", "view"]
