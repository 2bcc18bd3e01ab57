"""The gpucc package on the GPU: a torchvision and a transformers model compiled from Python
and run on torch tensors in place, against PyTorch; numpy inputs; model.so files; the
binding's errors. Each test skips, saying why, without a CUDA device (or without torch)."""
import os
import time

import numpy as np
import pytest

import gpucc

from conftest import NO_GPU

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "models", "data")
pytestmark = pytest.mark.usefixtures("gpu")


def rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


@pytest.fixture(scope="module")
def torch():
    if NO_GPU:
        pytest.skip("GPU test skipped: " + NO_GPU)
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("GPU test skipped: torch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


def export(torch, module, args, path, names):
    torch.onnx.export(module, args, path, input_names=names, output_names=["out"],
                      opset_version=17, dynamo=False)
    return path


@pytest.fixture(scope="module")
def resnet(torch, tmp_path_factory):
    """torchvision's ResNet-18 with random weights, exported and compiled (fp32)."""
    tv = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    m = tv.models.resnet18().eval()
    x = torch.randn(2, 3, 224, 224)
    path = export(torch, m, (x,), str(tmp_path_factory.mktemp("r18") / "r18.onnx"), ["x"])
    with torch.no_grad():
        want = m.cuda()(x.cuda())
    return gpucc.compile(path), x.cuda(), want


def test_torchvision_on_torch_tensors(torch, resnet):
    model, x, want = resnet
    assert [t.name for t in model.inputs] == ["x"] and model.inputs[0].shape == (2, 3, 224, 224)
    y = model(x)
    assert isinstance(y, torch.Tensor) and y.is_cuda and y.shape == want.shape
    torch.cuda.synchronize()
    assert rel_err(y.cpu(), want.cpu()) < 1e-4
    assert model.kernels > 0 and model.time(5) > 0


def test_in_place_pointers(torch, resnet):
    """out= is written in place, the input is read in place: the tensors returned are the
    ones given, at the same device addresses, and the answer is right."""
    model, x, want = resnet
    y = torch.empty_like(want)
    xp, yp = x.data_ptr(), y.data_ptr()
    got = model(x, out=[y])
    assert got is y and y.data_ptr() == yp and x.data_ptr() == xp
    torch.cuda.synchronize()
    assert rel_err(y.cpu(), want.cpu()) < 1e-4
    got = model(x=x, out={"out": y})
    assert got is y


def test_runs_on_torch_stream_without_synchronizing(torch, resnet):
    """On a side stream: the GPU is held by a sleep, then x is written on the stream and
    the model called. The call returns before the sleep ends (nothing synchronized), and
    the answer is right only if the model ran after x's copy, on the same stream."""
    model, x, want = resnet
    s = torch.cuda.Stream()
    xin = torch.zeros_like(x)
    with torch.cuda.stream(s):
        torch.cuda._sleep(int(2e9))  # about a second of the GPU's clock
        xin.copy_(x)
        t0 = time.perf_counter()
        y = model(xin)
        host_s = time.perf_counter() - t0
        done = torch.cuda.Event()
        done.record(s)
    assert not done.query(), "the stream finished during the call: it was synchronized"
    s.synchronize()
    assert host_s < 0.2
    assert rel_err(y.cpu(), want.cpu()) < 1e-4


def test_numpy_inputs(torch, resnet):
    model, x, want = resnet
    y = model(x.cpu().numpy())
    assert isinstance(y, np.ndarray)
    assert rel_err(y, want.cpu().numpy()) < 1e-4


def test_transformers_bf16(torch, tmp_path):
    """A transformers BERT (random weights, 2 layers) in bf16, inputs by name."""
    tr = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = tr.BertConfig(hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=1024, vocab_size=1000)

    class Bert(torch.nn.Module):  # positional inputs, tuple outputs, as ONNX wants them
        def __init__(self):
            super().__init__()
            self.model = tr.BertModel(cfg).eval()

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids, attention_mask=attention_mask, return_dict=False)

    m = Bert().eval()
    ids = torch.randint(0, 1000, (4, 64))
    mask = torch.ones(4, 64, dtype=torch.int64)
    mask[1, 40:] = 0
    path = str(tmp_path / "bert.onnx")
    torch.onnx.export(m, (ids, mask), path, input_names=["input_ids", "attention_mask"],
                      output_names=["last_hidden_state", "pooler_output"], opset_version=17,
                      dynamo=False)
    with torch.no_grad():
        want = m.cuda()(ids.cuda(), mask.cuda())
    model = gpucc.compile(path, precision="bf16")
    assert [t.name for t in model.outputs] == ["last_hidden_state", "pooler_output"]
    hidden, pooled = model(attention_mask=mask.cuda(), input_ids=ids.cuda())
    torch.cuda.synchronize()
    assert rel_err(hidden.cpu(), want[0].cpu()) < 5e-2
    assert rel_err(pooled.cpu(), want[1].cpu()) < 5e-2


def test_model_so_with_a_range_of_batches(torch, tmp_path):
    """gpucc.build to a model.so for batches 1..4 (no GPU needed to build), gpucc.load,
    runs at batch 1 and 3 against PyTorch."""
    tv = pytest.importorskip("torchvision")
    torch.manual_seed(1)
    m = tv.models.resnet18(num_classes=10).eval()
    path = str(tmp_path / "r18.onnx")
    torch.onnx.export(m, (torch.randn(2, 3, 64, 64),), path, input_names=["x"],
                      output_names=["out"], dynamic_axes={"x": {0: "batch"}},
                      opset_version=17, dynamo=False)
    so = gpucc.build(path, tmp_path / "r18.so", dims={"batch": (1, 4)})
    model = gpucc.load(so)
    assert model.inputs[0].ranges[0] == (1, 4)
    m = m.cuda()
    for b in (1, 3):
        x = torch.randn(b, 3, 64, 64, device="cuda")
        y = model(x)
        with torch.no_grad():
            want = m(x)
        torch.cuda.synchronize()
        assert y.shape == (b, 10)
        assert rel_err(y.cpu(), want.cpu()) < 1e-4
    with pytest.raises(gpucc.Error, match="batch"):
        model(torch.randn(5, 3, 64, 64, device="cuda"))


def test_binding_errors(torch, resnet):
    model, x, _ = resnet
    with pytest.raises(gpucc.Error, match="input 'x'"):
        model(x[:1])
    with pytest.raises(gpucc.Error, match="contiguous"):
        model(x.transpose(2, 3))
    with pytest.raises(gpucc.Error, match="no input named 'y'"):
        model(y=x)
    with pytest.raises(gpucc.Error, match="not given"):
        model()
    with pytest.raises(gpucc.Error, match="host"):
        model(x.cpu().numpy(), out=[torch.empty(2, 1000, device="cuda")])
