"""The C libraries under the package: libgpucc.so (the JIT API, compiler/gpucc.h) and the
runtime's calls (runtime/runtime.h), which libgpucc and every model.so export alike.

Where they are: beside this file in an installed package; GPUCC_LIBRARY and GPUCC_COMMAND
name others (a build tree's build/libgpucc.so and build/gpucc, which the tests use).
"""
from __future__ import annotations

import ctypes
import os
import threading
from ctypes import (POINTER, c_char, c_char_p, c_float, c_int, c_int64, c_size_t, c_void_p)

_HERE = os.path.dirname(os.path.abspath(__file__))

# runtime.h's GpuccDType, by number (the numbers are the plan format's), as
# (name, numpy dtype name or None, bytes).
DTYPES = {
    1: ("f32", "float32", 4),
    2: ("f16", "float16", 2),
    3: ("bf16", None, 2),
    4: ("f64", "float64", 8),
    5: ("i64", "int64", 8),
    6: ("i32", "int32", 4),
    7: ("i16", "int16", 2),
    8: ("i8", "int8", 1),
    9: ("u8", "uint8", 1),
    10: ("bool", "bool", 1),
    11: ("f8e4m3", None, 1),
    12: ("f8e5m2", None, 1),
}


class Diag(ctypes.Structure):
    """ir.h's Diag: a message, and whether it is an error."""
    _fields_ = [("failed", ctypes.c_bool), ("msg", c_char * 4096)]


def command() -> str:
    """The gpucc command: GPUCC_COMMAND, else the one installed in the package."""
    path = os.environ.get("GPUCC_COMMAND") or os.path.join(_HERE, "gpucc")
    if not os.path.isfile(path):
        from . import Error
        raise Error("gpucc: the gpucc command is not at %s (set GPUCC_COMMAND, or install "
                    "the package with pip)" % path)
    return path


def declare_runtime(lib: ctypes.CDLL) -> ctypes.CDLL:
    """The runtime.h calls the binding makes, on lib (libgpucc or a model.so)."""
    i64p = POINTER(c_int64)
    protos = {
        "gpucc_last_error": (c_char_p, []),
        "gpucc_status_name": (c_char_p, [c_int]),
        "gpucc_model_destroy": (None, [c_void_p]),
        "gpucc_model_kernels": (c_int, [c_void_p]),
        "gpucc_model_num_inputs": (c_int, [c_void_p]),
        "gpucc_model_num_outputs": (c_int, [c_void_p]),
        "gpucc_model_input_name": (c_char_p, [c_void_p, c_int]),
        "gpucc_model_input_dtype": (c_int, [c_void_p, c_int]),
        "gpucc_model_input_rank": (c_int, [c_void_p, c_int]),
        "gpucc_model_input_dims": (i64p, [c_void_p, c_int]),
        "gpucc_model_output_name": (c_char_p, [c_void_p, c_int]),
        "gpucc_model_output_dtype": (c_int, [c_void_p, c_int]),
        "gpucc_model_output_rank": (c_int, [c_void_p, c_int]),
        "gpucc_model_output_dims": (i64p, [c_void_p, c_int]),
        "gpucc_model_num_symbols": (c_int, [c_void_p]),
        "gpucc_model_input_range": (c_int, [c_void_p, c_int, c_int, i64p, i64p]),
        "gpucc_model_check_input": (c_int, [c_void_p, c_int, c_int, c_int, i64p]),
        "gpucc_model_run": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p]),
        "gpucc_model_run_host": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p]),
        "gpucc_model_output_dims_for": (c_int, [c_void_p, c_void_p, c_void_p]),
        "gpucc_model_run_dims": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p,
                                         c_void_p]),
        "gpucc_model_run_dims_host": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p,
                                              c_void_p, c_void_p]),
        "gpucc_model_time": (c_int, [c_void_p, c_int, c_int, c_void_p, POINTER(c_float)]),
        "gpucc_device_compute_capability": (c_int, [c_int, POINTER(c_int), POINTER(c_int)]),
    }
    for name, (restype, argtypes) in protos.items():
        f = getattr(lib, name)
        f.restype = restype
        f.argtypes = argtypes
    return lib


_lock = threading.Lock()
_libgpucc: ctypes.CDLL | None = None


def libgpucc() -> ctypes.CDLL:
    """libgpucc.so, loaded once: GPUCC_LIBRARY, else the package's own."""
    global _libgpucc
    with _lock:
        if _libgpucc is None:
            path = os.environ.get("GPUCC_LIBRARY") or os.path.join(_HERE, "libgpucc.so")
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                from . import Error
                raise Error("gpucc: cannot load libgpucc (%s); set GPUCC_LIBRARY, or install "
                            "the package with pip" % e) from None
            declare_runtime(lib)
            lib.gpucc_compile_flags.restype = c_int
            lib.gpucc_compile_flags.argtypes = [c_void_p, c_size_t, c_char_p,
                                                POINTER(c_char_p), c_int, c_int,
                                                POINTER(c_void_p), POINTER(Diag)]
            # frontends.h's ModelFormat: 0 unknown (text), 1 DSL, 2 ONNX, 3 ELF
            lib.model_format.restype = c_int
            lib.model_format.argtypes = [c_char_p, c_size_t]
            _libgpucc = lib
        return _libgpucc


__all__ = ["DTYPES", "Diag", "command", "declare_runtime", "libgpucc"]
