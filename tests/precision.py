"""The documented tolerances of gpucc's --precision modes (docs/precision.md), shared by
the tests that hold models to them (tests/models/test_models.py on the reference
executor, tests/gpu/gpu_models.py on the GPU).

A model compiled with --precision=P must give float outputs within REL_BY_NORM[P] of its
fp32 answer (PyTorch's recorded outputs, or the reference executor's), measured as the
relative error by norm ||got - want|| / ||want|| over each output. Integer and bool
outputs must match exactly in every mode.

The numbers live in one place, the table of passes/precision.c (which `gpucc run
--compare` takes its default --rtol from); this module reads them from there.
"""

import os
import re

_TABLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "passes", "precision.c")


def _read_bounds(path=_TABLE):
    """{mode: bound} from the rows `{"fp32", PRECISION_FP32, 1e-4},` of the C table."""
    with open(path) as f:
        text = f.read()
    rows = re.findall(r'\{"(\w+)",\s*PRECISION_\w+,\s*([0-9.]+(?:[eE][-+]?[0-9]+)?)\s*\}', text)
    bounds = {name: float(v) for name, v in rows}
    if sorted(bounds) != ["bf16", "fp16", "fp32", "fp8", "tf32"]:
        raise ImportError("%s: expected the bounds of fp32, tf32, bf16, fp16 and fp8 in its "
                          "precisions[] table, found %s" % (path, sorted(bounds)))
    return bounds


REL_BY_NORM = _read_bounds()
