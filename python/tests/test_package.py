"""The gpucc package without a GPU: the reference executor against PyTorch's outputs, a
model.so built from every kind of source, the tensor views, and the errors."""
import ctypes
import json
import os
import subprocess

import numpy as np
import pytest

import gpucc
from gpucc import _native, _tensors

from conftest import NO_GPU

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "models", "data")
MLP = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "mlp.gir")


def rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def model_inputs(name):
    """A miniature model's inputs (as tests/models/export.py wrote them), by name."""
    pre = name + ".in."
    return {f[len(pre):-4]: np.load(os.path.join(DATA, f))
            for f in sorted(os.listdir(DATA)) if f.startswith(pre)}


@pytest.mark.parametrize("name", ["bert", "resnet50"])
def test_reference_matches_pytorch(name):
    """gpucc.reference runs the ONNX export on the CPU; PyTorch's fp32 outputs are the
    oracle."""
    got = gpucc.reference(os.path.join(DATA, name + "-torchscript.onnx"), model_inputs(name))
    want = np.load(os.path.join(DATA, name + ".out.0.npy"))
    first = next(iter(got.values()))
    assert first.shape == want.shape
    assert rel_err(first, want) < 1e-5


def test_reference_inputs_in_order_and_from_bytes():
    ins = model_inputs("bert")
    with open(os.path.join(DATA, "bert-torchscript.onnx"), "rb") as f:
        data = f.read()
    by_name = gpucc.reference(data, ins)
    info = json.loads(subprocess.run([_native.command(), "inspect",
                                      os.path.join(DATA, "bert-torchscript.onnx"), "--json"],
                                     capture_output=True, text=True, check=True).stdout)
    order = [t["name"] for t in info["inputs"]]
    in_order = gpucc.reference(data, [ins[n] for n in order])
    assert by_name.keys() == in_order.keys()
    for k in by_name:
        np.testing.assert_array_equal(by_name[k], in_order[k])


def test_reference_dsl_text():
    """DSL text as a string: the MLP's probabilities sum to one per row, its class is their
    argmax (a property of softmax and argmax, not gpucc's own numbers)."""
    with open(MLP) as f:
        text = f.read()
    x = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    out = gpucc.reference(text, {"x": x}, dims={"N": 3})
    assert out["probs"].shape == (3, 10)
    np.testing.assert_allclose(out["probs"].sum(axis=1), 1, rtol=1e-5)
    np.testing.assert_array_equal(out["class"], out["probs"].argmax(axis=1))


def test_build_writes_a_model_so(tmp_path):
    """gpucc.build needs no GPU; the model.so says what it was built from."""
    so = tmp_path / "mlp.so"
    assert gpucc.build(MLP, so, precision="bf16", dims={"N": 8}) == str(so)
    info = json.loads(subprocess.run([_native.command(), "inspect", str(so), "--json"],
                                     capture_output=True, text=True, check=True).stdout)
    text = json.dumps(info)
    assert "bf16" in text
    assert [t["name"] for t in info["inputs"]] == ["x"]
    assert "8, 64" in json.dumps(info["inputs"][0]) or "[8, 64]" in text


def test_build_errors(tmp_path):
    with pytest.raises(gpucc.Error, match="N"):  # a symbolic dim left unbound
        gpucc.build(MLP, tmp_path / "m.so")
    with pytest.raises(gpucc.Error, match="precision"):
        gpucc.build(MLP, tmp_path / "m.so", precision="fp7", dims={"N": 1})
    assert not (tmp_path / "m.so").exists()
    with pytest.raises(gpucc.Error, match="nothere.onnx"):
        gpucc.build(tmp_path / "nothere.onnx", tmp_path / "m.so")


def test_compile_flag_errors_come_before_the_device():
    """Options are read before the GPU is asked, so these fail the same anywhere."""
    with pytest.raises(gpucc.Error, match="dim N=abc"):
        gpucc.compile(MLP, dims={"N": "abc"})
    with pytest.raises(gpucc.Error, match="unknown option"):
        lib = _native.libgpucc()
        argv = (ctypes.c_char_p * 1)(b"fast=yes")
        d = _native.Diag()
        m = ctypes.c_void_p()
        data = b"graph g(%x: f32[1]) {\n  return %x\n}\n"
        st = lib.gpucc_compile_flags(data, len(data), b"g", argv, 1, 0, ctypes.byref(m),
                                     ctypes.byref(d))
        assert st != 0 and not m.value
        raise gpucc.Error(d.msg.decode())


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
def test_compile_without_a_gpu_says_so():
    with pytest.raises(gpucc.Error, match="CUDA|driver|device"):
        gpucc.compile(MLP, dims={"N": 2})


def test_load_errors(tmp_path):
    with pytest.raises(gpucc.Error, match="no such file"):
        gpucc.load(tmp_path / "nothere.so")
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"not an ELF file")
    with pytest.raises(gpucc.Error, match="not a gpucc model.so"):
        gpucc.load(bad)


def test_source_errors(tmp_path):
    with pytest.raises(gpucc.Error, match="nothere.gir"):
        gpucc.compile(str(tmp_path / "nothere.gir"))


def test_numpy_view():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v, keep = _tensors.view(a, None)
    assert (v.ptr, v.shape, v.code, v.device, v.contiguous) == (a.ctypes.data, (3, 4), 1, -1,
                                                                True)
    assert keep is a


def test_dlpack_view_reads_the_struct():
    """The DLPack parser on numpy's own capsules: pointer, shape, type and strides."""
    a = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    v, _ = _tensors._dlpack_view(a, None)
    assert (v.ptr, v.shape, v.code, v.device, v.contiguous) == (a.ctypes.data, (2, 3, 4), 5,
                                                                -1, True)
    t = a.transpose(0, 2, 1)
    v, _ = _tensors._dlpack_view(t, None)
    assert v.shape == (2, 4, 3) and not v.contiguous
    s = np.zeros((4, 5), np.float16)[1:]
    v, _ = _tensors._dlpack_view(s, None)
    assert v.ptr == s.ctypes.data and v.code == 2 and v.contiguous


def test_cuda_array_interface_view():
    """An object with __cuda_array_interface__ (as CuPy's arrays and Numba's have)."""
    class Fake:
        __cuda_array_interface__ = {"data": (0x7000, False), "shape": (2, 3),
                                    "typestr": "<f4", "strides": None, "version": 3}
    v, _ = _tensors.view(Fake(), None)
    assert (v.ptr, v.shape, v.code, v.contiguous, v.kind) == (0x7000, (2, 3), 1, True, "cai")
    Fake.__cuda_array_interface__ = dict(Fake.__cuda_array_interface__, strides=(4, 8))
    assert not _tensors.view(Fake(), None)[0].contiguous


def test_stream_handles():
    class TorchLike:
        cuda_stream = 1234

    class CupyLike:
        ptr = 5678
    assert _tensors.stream_handle(7) == 7
    assert _tensors.stream_handle(TorchLike()) == 1234
    assert _tensors.stream_handle(CupyLike()) == 5678
    with pytest.raises(TypeError):
        _tensors.stream_handle("default")


def test_command_entry_point():
    """`python -m gpucc._cli` is the installed `gpucc` command."""
    import sys
    p = subprocess.run([sys.executable, "-m", "gpucc._cli", "--version"], capture_output=True,
                       text=True)
    assert p.returncode == 0 and "gpucc" in p.stdout


def test_inspect():
    """gpucc.inspect on a .gir path and on ONNX bytes: the inputs and outputs by name."""
    info = gpucc.inspect(MLP)
    assert [t["name"] for t in info["inputs"]] == ["x"]
    assert [t["name"] for t in info["outputs"]] == ["probs", "class"]
    with open(os.path.join(DATA, "bert-torchscript.onnx"), "rb") as f:
        onnx_info = gpucc.inspect(f.read())
    assert sorted(t["name"] for t in onnx_info["inputs"]) == sorted(model_inputs("bert"))
    with pytest.raises(gpucc.Error, match="nothere"):
        gpucc.inspect("/nothere.onnx")
