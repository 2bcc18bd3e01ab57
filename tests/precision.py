"""The documented tolerances of gpucc's --precision modes (docs/precision.md), shared by
the tests that hold models to them (tests/models/test_models.py on the reference
executor, tests/gpu/gpu_models.py on the GPU).

A model compiled with --precision=P must give float outputs within REL_BY_NORM[P] of its
fp32 answer (PyTorch's recorded outputs, or the reference executor's), measured as the
relative error by norm ||got - want|| / ||want|| over each output. Integer and bool
outputs must match exactly in every mode.
"""

REL_BY_NORM = {
    "fp32": 1e-4,  # fp32 rounding only (issue 3's bound)
    "tf32": 1e-2,  # products of 10-bit mantissas, sums in f32
    "fp16": 1e-2,  # 10-bit mantissas stored, f32 math and sums
    "bf16": 5e-2,  # 7-bit mantissas stored, f32 math and sums
    "fp8": 1.5e-1,  # e4m3 GEMM operands (3-bit mantissas, ~4% each), bf16 elsewhere
}
