#!/usr/bin/env python3
"""Every op of ir/ops.def through `gpucc run --cpu`, against numpy.

For each op: a small .gir graph in a temp folder, its inputs saved as .npy, run with
`$GPUCC run FILE --cpu --input NAME=PATH --output-dir DIR`, and each output compared with
numpy (computed in float64, then cast to the output type): rtol 1e-6 / atol 1e-6 for
floats, exact for integers and bool. The op list is parsed from ops.def, so an op added
there without a case here fails. Prints one line per op and "N passed, M failed".

usage: test_ops_numpy.py [GPUCC]      (or the GPUCC environment variable)
"""
import itertools
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RNG = np.random.default_rng(0)

DTYPES = {np.float64: "f64", np.float32: "f32", np.float16: "f16", np.int64: "i64",
          np.int32: "i32", np.int16: "i16", np.int8: "i8", np.uint8: "u8", np.bool_: "bool"}


def ops_in_table():
    text = open(os.path.join(ROOT, "ir", "ops.def")).read()
    return re.findall(r'^OP\(\s*\w+\s*,\s*"(\w+)"', text, re.M)


def gir_type(a):
    return "%s[%s]" % (DTYPES[a.dtype.type], ", ".join(str(d) for d in a.shape))


def rand(*shape, dtype=np.float32, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


def f64(a):
    return np.asarray(a, dtype=np.float64)


erf = np.vectorize(math.erf, otypes=[np.float64])


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def int_div(a, b):
    """Truncating integer division, 0 where b is 0 (the executor's definition), exact
    through Python ints."""
    a, b = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    q = [0 if y == 0 else abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
         for x, y in zip(a.ravel().tolist(), b.ravel().tolist())]
    return np.array(q, dtype=np.int64).reshape(a.shape)


def layer_norm(x, scale, bias, axis, eps):
    axes = tuple(range(axis, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale + bias


def rms_norm(x, scale, axis, eps):
    axes = tuple(range(axis, x.ndim))
    return x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps) * scale


def onnx_slice(x, starts, ends, axes, steps):
    idx = [slice(None)] * x.ndim
    for s, e, a, k in zip(starts, ends, axes, steps):
        idx[a] = slice(s, e, k)
    return x[tuple(idx)]


def windows(x, kernel, strides, pads, dils, ceil_mode=False, pad_value=0.0):
    """Yields (out_index, window_values, in_input_mask, in_padded_mask) of a sliding window
    over the spatial dims of x [N, C, spatial...], written out with explicit loops."""
    k = x.ndim - 2
    sp = x.shape[2:]
    outs = []
    for i in range(k):
        padded = sp[i] + pads[i] + pads[k + i]
        span = dils[i] * (kernel[i] - 1) + 1
        o = (padded - span) // strides[i] + 1
        if ceil_mode and (padded - span) % strides[i]:
            o += 1
            if (o - 1) * strides[i] >= sp[i] + pads[i]:
                o -= 1
        outs.append(o)
    for oidx in np.ndindex(*outs):
        vals, inside, padded = [], [], []
        for kidx in np.ndindex(*kernel):
            p = [oidx[i] * strides[i] - pads[i] + kidx[i] * dils[i] for i in range(k)]
            ins = all(0 <= p[i] < sp[i] for i in range(k))
            pad = all(-pads[i] <= p[i] < sp[i] + pads[k + i] for i in range(k))
            vals.append(x[(slice(None), slice(None)) + tuple(p)] if ins
                        else np.full(x.shape[:2], pad_value))
            inside.append(ins)
            padded.append(pad)
        yield oidx, outs, np.stack(vals, -1), np.array(inside), np.array(padded)


def np_conv(x, w, b=None, strides=None, pads=None, dils=None, group=1):
    k = x.ndim - 2
    strides = strides or [1] * k
    pads = pads or [0] * 2 * k
    dils = dils or [1] * k
    m, cg = w.shape[0], w.shape[1]
    y = None
    for oidx, outs, vals, _, _ in windows(x, w.shape[2:], strides, pads, dils):
        if y is None:
            y = np.zeros((x.shape[0], m) + tuple(outs))
        # vals: [N, C, K]; per group an einsum over (c, kernel)
        for g in range(group):
            v = vals[:, g * cg:(g + 1) * cg]
            wg = w[g * (m // group):(g + 1) * (m // group)].reshape(m // group, cg, -1)
            y[(slice(None), slice(g * (m // group), (g + 1) * (m // group))) + oidx] = \
                np.einsum("nck,mck->nm", v, wg)
    if b is not None:
        y += b.reshape((1, -1) + (1,) * k)
    return y


def np_conv_transpose(x, w, b=None, strides=None, pads=None, dils=None, group=1,
                      out_pad=None):
    k = x.ndim - 2
    strides = strides or [1] * k
    pads = pads or [0] * 2 * k
    dils = dils or [1] * k
    out_pad = out_pad or [0] * k
    c, mg = w.shape[0], w.shape[1]
    cg = c // group
    full = [(x.shape[2 + i] - 1) * strides[i] + dils[i] * (w.shape[2 + i] - 1) + 1 + out_pad[i]
            for i in range(k)]
    y = np.zeros((x.shape[0], mg * group) + tuple(full))
    for pidx in np.ndindex(*x.shape[2:]):
        for kidx in np.ndindex(*w.shape[2:]):
            o = tuple(pidx[i] * strides[i] + kidx[i] * dils[i] for i in range(k))
            for g in range(group):
                xv = x[(slice(None), slice(g * cg, (g + 1) * cg)) + pidx]     # [N, cg]
                wv = w[(slice(g * cg, (g + 1) * cg), slice(None)) + kidx]     # [cg, mg]
                y[(slice(None), slice(g * mg, (g + 1) * mg)) + o] += xv @ wv
    crop = tuple(slice(pads[i], full[i] - pads[k + i]) for i in range(k))
    y = y[(slice(None), slice(None)) + crop]
    if b is not None:
        y += b.reshape((1, -1) + (1,) * k)
    return y


def np_pool(x, kernel, kind, strides=None, pads=None, dils=None, ceil_mode=False,
            include_pad=False):
    k = x.ndim - 2
    strides = strides or [1] * k
    pads = pads or [0] * 2 * k
    dils = dils or [1] * k
    y = None
    for oidx, outs, vals, inside, padded in windows(x, kernel, strides, pads, dils,
                                                     ceil_mode):
        if y is None:
            y = np.zeros(x.shape[:2] + tuple(outs))
        v = vals[..., inside]
        if kind == "max":
            r = v.max(axis=-1)
        else:
            r = v.sum(axis=-1) / (padded.sum() if include_pad else inside.sum())
        y[(slice(None), slice(None)) + oidx] = r
    return y


def np_lrn(x, size, alpha, beta, bias):
    sq = np.zeros_like(x)
    c = x.shape[1]
    for i in range(c):
        lo, hi = max(0, i - (size - 1) // 2), min(c - 1, i + int(math.ceil((size - 1) / 2)))
        sq[:, i] = (x[:, lo:hi + 1] ** 2).sum(axis=1)
    return x / (bias + alpha / size * sq) ** beta


def np_pad(x, pads, mode="constant", value=0.0):
    r = x.ndim
    # negative pads crop first; then numpy pads the rest
    crop = tuple(slice(max(0, -pads[i]), x.shape[i] - max(0, -pads[r + i])) for i in range(r))
    x = x[crop]
    width = [(max(0, pads[i]), max(0, pads[r + i])) for i in range(r)]
    if mode == "constant":
        return np.pad(x, width, mode="constant", constant_values=value)
    return np.pad(x, width, mode=mode)


def np_resize_1d_coeffs(mode, coord, nearest_mode, a, exclude, in_len, out_len, scale, scaled):
    """A matrix [out_len, in_len] interpolating along one dim, from the ONNX formulas
    (align_corners with given scales uses the unrounded length, like the ONNX reference)."""
    m = np.zeros((out_len, in_len))
    for o in range(out_len):
        if coord == "asymmetric":
            xi = o / scale
        elif coord == "align_corners":
            length = scale * in_len if scaled else out_len
            xi = 0 if length == 1 else o * (in_len - 1) / (length - 1)
        elif coord == "pytorch_half_pixel":
            xi = (o + 0.5) / scale - 0.5 if out_len > 1 else 0
        elif coord == "half_pixel_symmetric":
            adj = out_len / (scale * in_len)
            xi = in_len / 2 * (1 - adj) + (o + 0.5) / scale - 0.5
        else:
            xi = (o + 0.5) / scale - 0.5
        clamp = lambda i: min(max(i, 0), in_len - 1)
        if mode == "nearest":
            if nearest_mode == "floor":
                i = math.floor(xi)
            elif nearest_mode == "ceil":
                i = math.ceil(xi)
            elif xi - math.floor(xi) == 0.5:
                i = math.floor(xi) + (1 if nearest_mode == "round_prefer_ceil" else 0)
            else:
                i = math.floor(xi + 0.5)
            m[o, clamp(i)] = 1
            continue
        f = math.floor(xi)
        t = xi - f
        if mode == "linear":
            taps = [(f, 1 - t), (f + 1, t)]
        else:
            def cc(s):
                s = abs(s)
                if s <= 1:
                    return (a + 2) * s ** 3 - (a + 3) * s ** 2 + 1
                if s < 2:
                    return a * s ** 3 - 5 * a * s ** 2 + 8 * a * s - 4 * a
                return 0
            taps = [(f + q, cc(t - q)) for q in (-1, 0, 1, 2)]
        if exclude:
            taps = [(i, w if 0 <= i < in_len else 0) for i, w in taps]
            tot = sum(w for _, w in taps)
            taps = [(i, w / tot) for i, w in taps]
        for i, w in taps:
            m[o, clamp(i)] += w
    return m


def np_resize(x, sizes, mode="nearest", coord="half_pixel", nearest_mode="round_prefer_floor",
              a=-0.75, exclude=False, scales=None):
    y = x
    for d in range(x.ndim):
        out = x.shape[d] if sizes[d] == -1 else sizes[d]
        scale = scales[d] if scales else out / x.shape[d]
        m = np_resize_1d_coeffs(mode, coord, nearest_mode, a, exclude, x.shape[d], out, scale,
                                bool(scales))
        y = np.moveaxis(np.tensordot(m, np.moveaxis(y, d, 0), axes=(1, 0)), 0, d)
    return y


def np_topk(x, k, axis=-1, largest=True):
    key = -x if largest else x
    order = np.argsort(key, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx


def np_cumsum(x, axis, exclusive=False, reverse=False):
    if reverse:
        x = np.flip(x, axis)
    y = np.cumsum(x, axis=axis)
    if exclusive:
        y = y - x
    return np.flip(y, axis) if reverse else y


def np_scatter_elements(x, idx, upd, axis, reduction="none"):
    y = x.copy()
    for i in np.ndindex(*idx.shape):
        t = list(i)
        t[axis] = int(idx[i]) % x.shape[axis]
        t = tuple(t)
        if reduction == "none":
            y[t] = upd[i]
        elif reduction == "add":
            y[t] += upd[i]
        elif reduction == "mul":
            y[t] *= upd[i]
        elif reduction == "max":
            y[t] = max(y[t], upd[i])
        else:
            y[t] = min(y[t], upd[i])
    return y


def np_log(x):
    with np.errstate(divide="ignore"):
        return np.log(x)


def py_mod(a, b):
    a, b = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    q = [0 if y == 0 else x % y for x, y in zip(a.ravel().tolist(), b.ravel().tolist())]
    return np.array(q, dtype=np.int64).reshape(a.shape)


def c_fmod(a, b):
    a, b = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    q = [0 if y == 0 else int(math.fmod(x, y)) for x, y in zip(a.ravel().tolist(),
                                                               b.ravel().tolist())]
    return np.array(q, dtype=np.int64).reshape(a.shape)


def np_hardmax(x, axis):
    y = np.zeros_like(x)
    np.put_along_axis(y, np.expand_dims(x.argmax(axis=axis), axis), 1, axis=axis)
    return y


def np_depth_to_space(x, b, mode):
    n, c, h, w = x.shape
    if mode == "DCR":
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (b * b), h * b, w * b)


def np_space_to_depth(x, b):
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


def np_one_hot(idx, values, depth, axis=-1):
    """The ONNX OneHot text: a negative index counts from the end, one outside
    [-depth, depth) gives an all-off row."""
    idx = np.nan_to_num(np.trunc(idx), nan=depth)  # NaN names no class
    axis = axis + idx.ndim + 1 if axis < 0 else axis
    out = np.full(idx.shape[:axis] + (depth,) + idx.shape[axis:], values[0])
    for pos in np.ndindex(*idx.shape):
        k = idx[pos]
        if -depth <= k < depth:
            k = int(k) + depth if k < 0 else int(k)
            out[pos[:axis] + (k,) + pos[axis:]] = values[1]
    return out


def np_nll(x, target, weight=None, reduction="mean", ignore_index=None):
    """ONNX NegativeLogLikelihoodLoss: loss = -x[n, t, d...] * weight[t], 0 where t is
    ignore_index; mean is sum(loss) / sum(weight[t]) over the targets not ignored."""
    target = target.astype(np.int64)
    loss = np.zeros(target.shape)
    wsum = 0.0
    for pos in np.ndindex(*target.shape):
        t = target[pos]
        if ignore_index is not None and t == ignore_index:
            continue
        wt = 1.0 if weight is None else weight[t]
        loss[pos] = -x[(pos[0], t) + pos[1:]] * wt
        wsum += wt
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / wsum


def np_log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def np_sce(x, labels, weight=None, reduction="mean", ignore_index=None):
    lp = np_log_softmax(x, 1)
    return np_nll(lp, labels, weight, reduction, ignore_index), lp


def np_gather_nd(x, idx, b=0):
    """ONNX GatherND: each index tuple (last dim of idx) picks an element or slice of x
    within its batch (the first b dims); Python's negative indexing is ONNX's."""
    idx = idx.astype(np.int64)
    k = idx.shape[-1]
    out = np.empty(idx.shape[:-1] + x.shape[b + k:])
    for pos in np.ndindex(*idx.shape[:-1]):
        out[pos] = x[pos[:b] + tuple(int(v) for v in idx[pos])]
    return out


def np_scatter_nd(x, idx, upd, reduction="none"):
    y = x.copy()
    for pos in np.ndindex(*idx.shape[:-1]):
        t = tuple(int(v) for v in idx[pos])
        if reduction == "none":
            y[t] = upd[pos]
        elif reduction == "add":
            y[t] = y[t] + upd[pos]
        elif reduction == "mul":
            y[t] = y[t] * upd[pos]
        elif reduction == "max":
            y[t] = np.maximum(y[t], upd[pos])
        else:
            y[t] = np.minimum(y[t], upd[pos])
    return y


def gs_reflect(v, lo, hi):
    """Folds v into [lo, hi] by mirroring at both ends (period 2 * (hi - lo))."""
    span = hi - lo
    if span == 0:
        return lo
    m = (v - lo) % (2 * span)
    return lo + (m if m <= span else 2 * span - m)


def keys_cubic(s, a=-0.75):
    s = abs(s)
    if s <= 1:
        return (a + 2) * s ** 3 - (a + 3) * s ** 2 + 1
    if s < 2:
        return a * s ** 3 - 5 * a * s ** 2 + 8 * a * s - 4 * a
    return 0.0


def gs_axis(v, size, mode, padding, align, nspatial):
    """(index or None for a zero, weight) pairs of grid_sample along one axis, following
    the ONNX reference: the padding goes to the coordinate, then to each tap."""
    x = (v + 1) / 2 * (size - 1) if align else ((v + 1) * size - 1) / 2
    lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
    if mode == "nearest":
        x = math.copysign(math.floor(abs(x) + 0.5), x) if nspatial == 3 else float(np.rint(x))
    if not lo <= x <= hi:
        if padding == "border":
            x = min(max(x, 0.0), size - 1.0)
        elif padding == "reflection":
            x = gs_reflect(x, lo, hi)

    def tap(i):
        if 0 <= i < size:
            return i
        if padding == "zeros":
            return None
        if padding == "border":
            return min(max(i, 0), size - 1)
        return int(gs_reflect(i, lo, hi))

    if mode == "nearest":
        return [(tap(int(x)), 1.0)]
    f = math.floor(x)
    t = x - f
    if mode == "linear":
        return [(tap(f), 1 - t), (tap(f + 1), t)]
    return [(tap(f + d), keys_cubic(t - d)) for d in (-1, 0, 1, 2)]


def np_grid_sample(x, grid, mode="linear", padding="zeros", align=False):
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    sp = x.shape[2:]
    out = np.zeros(x.shape[:2] + grid.shape[1:-1])
    for b in range(x.shape[0]):
        for pos in np.ndindex(*grid.shape[1:-1]):
            coords = grid[(b,) + pos][::-1]  # the grid lists x (the last dim) first
            axes = [gs_axis(coords[j], sp[j], mode, padding, align, len(sp))
                    for j in range(len(sp))]
            for combo in itertools.product(*axes):
                if any(i is None for i, _ in combo):
                    continue
                w = np.prod([wt for _, wt in combo])
                out[(b, slice(None)) + pos] += w * x[(b, slice(None)) + tuple(i for i, _ in combo)]
    return out


def np_reverse_sequence(x, lens, batch_axis=1, time_axis=0):
    y = x.copy()
    for b, n in enumerate(lens.astype(np.int64)):
        sel = [slice(None)] * x.ndim
        sel[batch_axis] = b
        sel[time_axis] = slice(0, n)
        y[tuple(sel)] = np.flip(x[tuple(sel)], axis=0)  # time is the first axis left
    return y


def np_roi_align(x, rois, bidx, oh, ow, ratio=0, scale=1.0, mode="avg", half_pixel=True):
    """ONNX RoiAlign (as its reference and onnxruntime compute it): bins of bilinear
    samples, each sample 0 beyond one pixel outside and clamped to the edge past it; max
    mode takes the max of the four weighted corners."""
    n_, c_, h, w = x.shape
    out = np.zeros((len(rois), c_, oh, ow))
    for r, (roi, b) in enumerate(zip(rois, bidx.astype(np.int64))):
        x0, y0, x1, y1 = roi * scale - (0.5 if half_pixel else 0.0)
        rw, rh = x1 - x0, y1 - y0
        if not half_pixel:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        gh = ratio if ratio > 0 else int(math.ceil(rh / oh))
        gw = ratio if ratio > 0 else int(math.ceil(rw / ow))
        for ph, pw in np.ndindex(oh, ow):
            vals = []
            for iy, ix in np.ndindex(max(gh, 0), max(gw, 0)):
                sy = y0 + ph * rh / oh + (iy + 0.5) * rh / oh / gh
                sx = x0 + pw * rw / ow + (ix + 0.5) * rw / ow / gw
                if sy < -1 or sy > h or sx < -1 or sx > w:
                    vals.append(np.zeros((4, c_)))
                    continue
                sy, sx = max(sy, 0.0), max(sx, 0.0)
                ya, xa = min(int(sy), h - 1), min(int(sx), w - 1)
                yb, xb = min(ya + 1, h - 1), min(xa + 1, w - 1)
                ly, lx = (sy - ya if ya < h - 1 else 0.0), (sx - xa if xa < w - 1 else 0.0)
                vals.append(np.stack([(1 - ly) * (1 - lx) * x[b, :, ya, xa],
                                      (1 - ly) * lx * x[b, :, ya, xb],
                                      ly * (1 - lx) * x[b, :, yb, xa],
                                      ly * lx * x[b, :, yb, xb]]))
            if not vals:
                continue
            v = np.stack(vals)  # [samples, 4, C]
            out[r, :, ph, pw] = v.max(axis=(0, 1)) if mode == "max" else \
                v.sum(axis=(0, 1)) / max(gh * gw, 1)
    return out


def np_max_pool_indices(x, k):
    """max_pool with kernel = stride = k on [N, C, H, W] and its flat argmax indices over
    the whole tensor (ONNX MaxPool's Indices output)."""
    n_, c_, h, w = x.shape
    vals = np.zeros((n_, c_, h // k, w // k), x.dtype)
    idx = np.zeros(vals.shape, np.int64)
    for pos in np.ndindex(*vals.shape):
        b, c, i, j = pos
        win = x[b, c, i * k:(i + 1) * k, j * k:(j + 1) * k]
        a, e = np.unravel_index(np.argmax(win), win.shape)
        vals[pos] = win[a, e]
        idx[pos] = np.ravel_multi_index((b, c, i * k + a, j * k + e), x.shape)
    return vals, idx


def np_max_unpool(x, idx, shape, out_shape=None):
    """ONNX MaxUnpool: indices flat over the default shape; output_shape pads its end."""
    y = np.zeros(int(np.prod(shape)))
    for v, i in zip(x.ravel(), idx.ravel().astype(np.int64)):
        y[i] = v
    out = np.zeros(out_shape or shape)
    out[tuple(slice(0, s) for s in shape)] = y.reshape(shape)
    return out


def np_lp_norm(x, axis, p):
    norm = np.linalg.norm(x, ord=p, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norm == 0, 0.0, x / norm)


def np_mvn(x, axes):
    """ONNX MeanVarianceNormalization's function body, step by step."""
    mean = x.mean(axis=axes, keepdims=True)
    var = (x ** 2).mean(axis=axes, keepdims=True) - mean ** 2
    return (x - mean) / (np.sqrt(var) + 1e-9)


def as_int(f):
    """A reference over integers: the cases get their inputs as float64."""
    return lambda *a: f(*[v.astype(np.int64) for v in a])


class Case:
    """One graph: a call of `op` on inputs (a dict name -> array), with attrs text.
    ref(*float64 inputs) gives the outputs; out_dtypes their numpy dtypes. consts (a dict
    name -> scalar array) become constants of the graph, passed to the op after the
    inputs (range needs constant operands); ref does not get them."""

    def __init__(self, op, inputs, ref, attrs="", out_dtypes=None, nout=1, name=None,
                 consts=None):
        self.op, self.inputs, self.ref, self.attrs = op, inputs, ref, attrs
        self.consts = consts or {}
        self.nout = nout
        self.out_dtypes = out_dtypes
        self.name = name or op


def unary(op, ref, x=None, attrs="", out=None):
    x = rand(2, 3) if x is None else x
    return Case(op, {"x": x}, ref, attrs, [out or x.dtype.type])


def binary(op, ref, a=None, b=None, out=None):
    a = rand(2, 3) if a is None else a
    b = rand(3) if b is None else b
    return Case(op, {"a": a, "b": b}, ref, "", [out or a.dtype.type])


def cases():
    pos = rand(2, 3, lo=0.1, hi=4.0)
    ints = np.array([[-7, 5, 0], [9, -3, 2]], dtype=np.int32)
    bools = np.array([[True, False, True], [False, False, True]])
    bools_b = np.array([False, True, True])
    halves = np.array([[0.5, 1.5, 2.5], [-0.5, -1.5, 3.7]], dtype=np.float32)
    x234 = rand(2, 3, 4)
    x4 = rand(2, 3, 5, 4)
    ties = np.array([[3, 1, 3, 2, 3], [0, 5, 5, -1, 0]], dtype=np.float32)
    many_ties = RNG.integers(0, 6, size=(3, 37)).astype(np.float32)
    specials = np.array([[np.nan, np.inf, -np.inf], [0, -1.5, 3e38]], dtype=np.float32)
    unit = rand(2, 3, lo=-0.95, hi=0.95)
    u8 = np.array([[0, 1, 127], [128, 200, 255]], dtype=np.uint8)
    u8_b = np.array([3, 255, 9], dtype=np.uint8)
    shifts = np.array([[0, 1, 7], [8, 3, 9]], dtype=np.uint8)
    x5 = rand(3, 5)
    x3d = rand(2, 4, 3, 2)
    lbl = np.array([[[1, 3], [0, 2], [3, 3]], [[2, 0], [1, 1], [0, 3]]], dtype=np.int64)
    selu_a, selu_g = 1.67326319217681884765625, 1.05070102214813232421875
    pooled, pooled_idx = np_max_pool_indices(rand(2, 3, 4, 6), 2)
    c = {
        "tan": [unary("tan", np.tan, x=unit)],
        "asin": [unary("asin", np.arcsin, x=unit)],
        "acos": [unary("acos", np.arccos, x=unit)],
        "atan": [unary("atan", np.arctan)],
        "sinh": [unary("sinh", np.sinh)],
        "cosh": [unary("cosh", np.cosh)],
        "asinh": [unary("asinh", np.arcsinh)],
        "acosh": [unary("acosh", np.arccosh, x=rand(2, 3, lo=1.0, hi=5.0))],
        "atanh": [unary("atanh", np.arctanh, x=unit)],
        "softsign": [unary("softsign", lambda x: x / (1 + np.abs(x)), x=rand(2, 3, lo=-9, hi=9))],
        "mish": [unary("mish", lambda x: x * np.tanh(np.logaddexp(0, x)),
                       x=np.array([[-30, -1, 0], [0.5, 3, 40]], dtype=np.float32))],
        "celu": [unary("celu", lambda x: np.maximum(0, x) + np.minimum(0, 2 * (np.exp(x / 2) - 1)),
                       attrs="{alpha = 2.0}"),
                 unary("celu", lambda x: np.maximum(0, x) + np.minimum(0, np.exp(x) - 1))],
        "selu": [unary("selu", lambda x: selu_g * np.where(x > 0, x, selu_a * (np.exp(x) - 1))),
                 unary("selu", lambda x: 3 * np.where(x > 0, x, 2 * np.exp(x) - 2),
                       attrs="{alpha = 2.0, gamma = 3.0}")],
        "thresholded_relu": [unary("thresholded_relu", lambda x: np.where(x > 0.5, x, 0),
                                   attrs="{alpha = 0.5}"),
                             unary("thresholded_relu", lambda x: np.where(x > 1, x, 0))],
        "shrink": [unary("shrink", lambda x: np.where(x < -0.6, x + 0.3,
                                                      np.where(x > 0.6, x - 0.3, 0)),
                         attrs="{bias = 0.3, lambd = 0.6}"),
                   unary("shrink", lambda x: np.where(x < -1.5, x + 2, np.where(x > 1.5, x - 2, 0)),
                         x=ints, attrs="{bias = 2.0, lambd = 1.5}"),
                   unary("shrink", lambda x: np.where(np.abs(x) > 0.5, x, 0))],
        "bitwise_not": [unary("bitwise_not", as_int(np.invert), x=ints),
                        unary("bitwise_not", lambda x: 255 - x, x=u8)],
        "bitwise_and": [binary("bitwise_and", as_int(np.bitwise_and), a=ints,
                               b=np.array([-1, 6, 0x7fff], dtype=np.int32)),
                        binary("bitwise_and", as_int(np.bitwise_and), a=u8, b=u8_b)],
        "bitwise_or": [binary("bitwise_or", as_int(np.bitwise_or), a=ints,
                              b=np.array([-8, 6, 1], dtype=np.int32)),
                       binary("bitwise_or", as_int(np.bitwise_or), a=u8, b=u8_b)],
        "bitwise_xor": [binary("bitwise_xor", as_int(np.bitwise_xor), a=ints,
                               b=np.array([-1, 6, 3], dtype=np.int32)),
                        binary("bitwise_xor", as_int(np.bitwise_xor), a=u8, b=u8_b)],
        "bit_shift": [Case("bit_shift", {"a": u8, "b": shifts},
                           as_int(lambda a, b: (a << b) & 0xFF), attrs='{direction = "LEFT"}',
                           out_dtypes=[np.uint8]),
                      Case("bit_shift", {"a": u8, "b": shifts[1]},
                           as_int(lambda a, b: a >> b), attrs='{direction = "RIGHT"}',
                           out_dtypes=[np.uint8])],
        "hardmax": [unary("hardmax", lambda x: np_hardmax(x, -1), x=ties),
                    unary("hardmax", lambda x: np_hardmax(x, 1), x=x234, attrs="{axis = 1}"),
                    unary("hardmax", lambda x: np_hardmax(x, 0), x=many_ties[:, :4],
                          attrs="{axis = 0}")],
        "depth_to_space": [unary("depth_to_space", lambda x: np_depth_to_space(x, 2, "DCR"),
                                 x=rand(2, 8, 2, 3), attrs="{blocksize = 2}"),
                           unary("depth_to_space", lambda x: np_depth_to_space(x, 2, "CRD"),
                                 x=rand(1, 8, 3, 2), attrs='{blocksize = 2, mode = "CRD"}'),
                           unary("depth_to_space", lambda x: np_depth_to_space(x, 3, "DCR"),
                                 x=np.arange(18, dtype=np.int32).reshape(1, 9, 1, 2),
                                 attrs="{blocksize = 3}")],
        "space_to_depth": [unary("space_to_depth", lambda x: np_space_to_depth(x, 2),
                                 x=rand(2, 3, 4, 6), attrs="{blocksize = 2}"),
                           unary("space_to_depth", lambda x: np_space_to_depth(x, 3),
                                 x=np.arange(36, dtype=np.int8).reshape(1, 1, 6, 6),
                                 attrs="{blocksize = 3}")],
        "one_hot": [Case("one_hot", {"i": np.array([[1, -1, 5], [0, -4, -5]], dtype=np.int64),
                                     "v": np.array([0.5, 3], dtype=np.float32)},
                         lambda i, v: np_one_hot(i, v, 4), attrs="{depth = 4}",
                         out_dtypes=[np.float32]),
                    Case("one_hot", {"i": np.array([2, 0, -2, 3], dtype=np.int32),
                                     "v": np.array([-1, 7], dtype=np.int32)},
                         lambda i, v: np_one_hot(i, v, 3, axis=0), attrs="{depth = 3, axis = 0}",
                         out_dtypes=[np.int32]),
                    Case("one_hot", {"i": np.array([[1.7, -0.5], [-3.0, 9.0], [-2.2, np.nan]],
                                                   dtype=np.float32),
                                     "v": np.array([0, 1], dtype=np.int64)},
                         lambda i, v: np_one_hot(i, v, 3, axis=1), attrs="{depth = 3, axis = 1}",
                         out_dtypes=[np.int64])],
        "nll_loss": [
            Case("nll_loss", {"x": x5, "t": np.array([4, 0, 2], dtype=np.int64)},
                 lambda x, t: np_nll(x, t), out_dtypes=[np.float32]),
            Case("nll_loss", {"x": x3d, "t": lbl, "w": rand(4, lo=0.1, hi=2)},
                 lambda x, t, w: np_nll(x, t, w, "mean", 3),
                 attrs="{ignore_index = 3}", out_dtypes=[np.float32]),
            Case("nll_loss", {"x": x3d, "t": lbl.astype(np.int32)},
                 lambda x, t: np_nll(x, t, None, "none", 0),
                 attrs='{reduction = "none", ignore_index = 0}', out_dtypes=[np.float32]),
            Case("nll_loss", {"x": x5, "t": np.array([-1, 1, 3], dtype=np.int32),
                              "w": rand(5, lo=0.1, hi=2)},
                 lambda x, t, w: np_nll(x, t, w, "sum", -1),
                 attrs='{reduction = "sum", ignore_index = -1}', out_dtypes=[np.float32]),
            Case("nll_loss", {"x": x5, "t": np.array([2, 2, 1], dtype=np.int64)},
                 lambda x, t: np_nll(x, t, None, "mean", 2),
                 attrs="{ignore_index = 2}", out_dtypes=[np.float32], name="nll_loss_ii")],
        "softmax_cross_entropy": [
            Case("softmax_cross_entropy", {"x": x5 * 5, "t": np.array([4, 0, 2], dtype=np.int64)},
                 lambda x, t: np_sce(x, t), out_dtypes=[np.float32] * 2, nout=2),
            Case("softmax_cross_entropy", {"x": x3d, "t": lbl, "w": rand(4, lo=0.1, hi=2)},
                 lambda x, t, w: np_sce(x, t, w, "mean", 1),
                 attrs="{ignore_index = 1}", out_dtypes=[np.float32] * 2, nout=2),
            Case("softmax_cross_entropy", {"x": x3d, "t": lbl.astype(np.int32)},
                 lambda x, t: np_sce(x, t, None, "none", 3),
                 attrs='{reduction = "none", ignore_index = 3}', out_dtypes=[np.float32] * 2,
                 nout=2),
            Case("softmax_cross_entropy", {"x": x3d, "t": lbl, "w": rand(4, lo=0.1, hi=2)},
                 lambda x, t, w: np_sce(x, t, w, "sum"),
                 attrs='{reduction = "sum"}', out_dtypes=[np.float32] * 2, nout=2)],
        "identity": [unary("identity", lambda x: x)],
        "neg": [unary("neg", lambda x: -x), unary("neg", lambda x: -x, x=ints)],
        "abs": [unary("abs", np.abs), unary("abs", np.abs, x=ints)],
        "sign": [unary("sign", np.sign), unary("sign", np.sign, x=ints)],
        "exp": [unary("exp", np.exp)],
        "log": [unary("log", np.log, x=pos)],
        "sqrt": [unary("sqrt", np.sqrt, x=pos)],
        "rsqrt": [unary("rsqrt", lambda x: 1 / np.sqrt(x), x=pos)],
        "reciprocal": [unary("reciprocal", lambda x: 1 / x, x=pos)],
        "floor": [unary("floor", np.floor)],
        "ceil": [unary("ceil", np.ceil)],
        "round": [unary("round", np.round, x=halves)],
        "sin": [unary("sin", np.sin)],
        "cos": [unary("cos", np.cos)],
        "tanh": [unary("tanh", np.tanh)],
        "erf": [unary("erf", erf)],
        "sigmoid": [unary("sigmoid", sigmoid)],
        "relu": [unary("relu", lambda x: np.maximum(x, 0)),
                 unary("relu", lambda x: np.maximum(x, 0), x=ints)],
        "gelu": [unary("gelu", lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2)))),
                 unary("gelu", lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) *
                                                              (x + 0.044715 * x ** 3))),
                       attrs='{approximate = "tanh"}')],
        "silu": [unary("silu", lambda x: x * sigmoid(x))],
        "softplus": [unary("softplus", lambda x: np.logaddexp(0, x),
                           x=np.array([[-30, -1, 0], [1, 30, 100]], dtype=np.float32))],
        "leaky_relu": [unary("leaky_relu", lambda x: np.where(x < 0, 0.1 * x, x),
                             attrs="{alpha = 0.1}")],
        "elu": [unary("elu", lambda x: np.where(x < 0, 0.5 * (np.exp(x) - 1), x),
                      attrs="{alpha = 0.5}")],
        "hard_sigmoid": [unary("hard_sigmoid", lambda x: np.clip(0.2 * x + 0.5, 0, 1),
                               x=rand(2, 3, lo=-4, hi=4))],
        "hard_swish": [unary("hard_swish", lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
                             x=rand(2, 3, lo=-5, hi=5))],
        "clip": [unary("clip", lambda x: np.clip(x, -0.5, 1.0),
                       attrs="{min = -0.5, max = 1.0}"),
                 unary("clip", lambda x: np.clip(x, -2, 3), x=ints,
                       attrs="{min = -2.5, max = 3.0}")],
        "not": [unary("not", np.logical_not, x=bools)],
        "cast": [unary("cast", lambda x: np.trunc(x), attrs='{to = "i32"}', out=np.int32,
                       x=rand(2, 3, lo=-9, hi=9)),
                 unary("cast", lambda x: x, x=ints, attrs='{to = "f32"}', out=np.float32),
                 unary("cast", lambda x: x != 0, attrs='{to = "bool"}', out=np.bool_,
                       x=np.array([[0, -0.0, 0.25], [1, -3, 0]], dtype=np.float32))],
        "add": [binary("add", np.add),
                binary("add", np.add, a=ints, b=np.array([1, 2, 3], dtype=np.int32))],
        "sub": [binary("sub", np.subtract)],
        "mul": [binary("mul", np.multiply)],
        "div": [binary("div", np.divide, b=rand(3, lo=0.5, hi=2)),
                binary("div", int_div, a=ints, b=np.array([2, -2, 0], dtype=np.int32))],
        "pow": [binary("pow", np.power, a=pos, b=rand(3))],
        "max": [binary("max", np.maximum)],
        "min": [binary("min", np.minimum),
                binary("min", np.minimum, a=ints, b=np.array([0, 1, 2], dtype=np.int32))],
        "equal": [binary("equal", np.equal, a=ints, b=np.array([-7, 3, 2], dtype=np.int32),
                         out=np.bool_)],
        "less": [binary("less", np.less, out=np.bool_)],
        "less_equal": [binary("less_equal", np.less_equal, a=ints,
                              b=np.array([-7, 3, 2], dtype=np.int32), out=np.bool_)],
        "greater": [binary("greater", np.greater, out=np.bool_)],
        "greater_equal": [binary("greater_equal", np.greater_equal, a=ints,
                                 b=np.array([-7, 3, 2], dtype=np.int32), out=np.bool_)],
        "and": [binary("and", np.logical_and, a=bools, b=bools_b)],
        "or": [binary("or", np.logical_or, a=bools, b=bools_b)],
        "xor": [binary("xor", np.logical_xor, a=bools, b=bools_b)],
        "where": [Case("where", {"c": bools, "a": rand(2, 3), "b": rand(3)},
                       lambda c, a, b: np.where(c != 0, a, b), out_dtypes=[np.float32])],
        "matmul": [Case("matmul", {"a": x234, "b": rand(4, 5)}, np.matmul,
                        out_dtypes=[np.float32]),
                   Case("matmul", {"a": rand(4), "b": rand(2, 4, 3)}, np.matmul,
                        out_dtypes=[np.float32]),
                   Case("matmul", {"a": rand(2, 1, 3, 4), "b": rand(3, 4, 2)}, np.matmul,
                        out_dtypes=[np.float32])],
        "reduce_sum": [unary("reduce_sum", lambda x: x.sum(axis=1), x=x234,
                             attrs="{axes = [1], keepdims = 0}"),
                       unary("reduce_sum", lambda x: x.sum(keepdims=True), x=ints)],
        "reduce_mean": [unary("reduce_mean", lambda x: x.mean(axis=(0, 2), keepdims=True),
                              x=x234, attrs="{axes = [0, -1]}")],
        "reduce_max": [unary("reduce_max", lambda x: x.max(axis=2), x=x234,
                             attrs="{axes = [2], keepdims = 0}")],
        "reduce_min": [unary("reduce_min", lambda x: x.min(keepdims=True), x=x234)],
        "reduce_prod": [unary("reduce_prod", lambda x: x.prod(axis=0), x=x234,
                              attrs="{axes = [0], keepdims = 0}")],
        "argmax": [unary("argmax", lambda x: x.argmax(axis=1), x=x234,
                         attrs="{axis = 1, keepdims = 0}", out=np.int64),
                   unary("argmax", lambda x: x.argmax(axis=0)[None], out=np.int64,
                         x=np.array([[1, 5, 2], [1, 5, 7]], dtype=np.int32)),
                   unary("argmax", lambda x: 1 - x[::-1].argmax(axis=0), out=np.int64,
                         x=np.array([[1, 5, 2], [1, 5, 7]], dtype=np.int32),
                         attrs="{keepdims = 0, select_last_index = 1}")],
        "softmax": [unary("softmax", lambda x: np.exp(x - x.max(axis=2, keepdims=True)) /
                          np.exp(x - x.max(axis=2, keepdims=True)).sum(axis=2, keepdims=True),
                          x=x234 * 10)],
        "log_softmax": [unary("log_softmax", lambda x: x - x.max(axis=1, keepdims=True) -
                              np.log(np.exp(x - x.max(axis=1, keepdims=True))
                                     .sum(axis=1, keepdims=True)),
                              x=x234 * 10, attrs="{axis = 1}")],
        "layer_norm": [Case("layer_norm", {"x": x234, "s": rand(4), "b": rand(4)},
                            lambda x, s, b: layer_norm(x, s, b, 2, 1e-5),
                            out_dtypes=[np.float32]),
                       Case("layer_norm", {"x": x234, "s": rand(3, 4)},
                            lambda x, s: layer_norm(x, s, 0, 1, 1e-3),
                            attrs="{axis = 1, epsilon = 0.001}", out_dtypes=[np.float32])],
        "rms_norm": [Case("rms_norm", {"x": x234, "s": rand(4)},
                          lambda x, s: rms_norm(x, s, 2, 1e-5), out_dtypes=[np.float32]),
                     Case("rms_norm", {"x": x234},
                          lambda x: rms_norm(x, 1, 1, 1e-3),
                          attrs="{axis = 1, epsilon = 0.001}", out_dtypes=[np.float32])],
        "reshape": [unary("reshape", lambda x: x.reshape(2, 12), x=x234,
                          attrs="{shape = [0, -1]}")],
        "transpose": [unary("transpose", lambda x: x.transpose(1, 2, 0), x=x234,
                            attrs="{perm = [1, 2, 0]}"),
                      unary("transpose", lambda x: x.T, x=x234)],
        "squeeze": [unary("squeeze", lambda x: x.reshape(2, 3), x=rand(2, 1, 3),
                          attrs="{axes = [1]}")],
        "unsqueeze": [unary("unsqueeze", lambda x: x[None, :, :, None], x=ints,
                            attrs="{axes = [0, 3]}")],
        "flatten": [unary("flatten", lambda x: x.reshape(6, 4), x=x234,
                          attrs="{axis = 2}")],
        "expand": [unary("expand", lambda x: np.broadcast_to(x, (2, 2, 3)), x=rand(2, 1, 3),
                         attrs="{shape = [2, 2, 3]}")],
        "concat": [Case("concat", {"a": x234, "b": rand(2, 1, 4), "c": rand(2, 2, 4)},
                        lambda a, b, c: np.concatenate([a, b, c], axis=1),
                        attrs="{axis = 1}", out_dtypes=[np.float32])],
        "slice": [unary("slice", lambda x: onnx_slice(x, [-1, 1], [-100, 100], [2, 0],
                                                      [-2, 1]),
                        x=x234,
                        attrs="{starts = [-1, 1], ends = [-100, 100], axes = [2, 0], "
                              "steps = [-2, 1]}"),
                  unary("slice", lambda x: x[:, 1:3], x=ints,
                        attrs="{starts = [1], ends = [3], axes = [1]}")],
        "split": [Case("split", {"x": x234}, lambda x: (x[:, :, :1], x[:, :, 1:]),
                       attrs="{axis = 2, split = [1, 3]}", out_dtypes=[np.float32] * 2,
                       nout=2)],
        "gather": [Case("gather", {"x": x234, "i": np.array([[2, -1], [0, 1]], dtype=np.int64)},
                        lambda x, i: np.take(x, i.astype(np.int64), axis=1),
                        attrs="{axis = 1}", out_dtypes=[np.float32]),
                   Case("gather", {"x": ints, "i": np.array([-2, 1, 1], dtype=np.int32)},
                        lambda x, i: np.take(x, i.astype(np.int64), axis=0),
                        out_dtypes=[np.int32])],
        "conv": [Case("conv", {"x": x4, "w": rand(4, 3, 3, 3), "b": rand(4)},
                      lambda x, w, b: np_conv(x, w, b, pads=[1, 1, 1, 1]),
                      attrs="{pads = [1, 1, 1, 1]}", out_dtypes=[np.float32]),
                 Case("conv", {"x": rand(1, 4, 7, 6), "w": rand(6, 2, 2, 3)},
                      lambda x, w: np_conv(x, w, strides=[2, 1], pads=[0, 1, 1, 0],
                                           dils=[2, 1], group=2),
                      attrs="{strides = [2, 1], pads = [0, 1, 1, 0], dilations = [2, 1], "
                            "group = 2}", out_dtypes=[np.float32]),
                 Case("conv", {"x": rand(2, 2, 9), "w": rand(3, 2, 4)},
                      lambda x, w: np_conv(x, w, strides=[3]), attrs="{strides = [3]}",
                      out_dtypes=[np.float32])],
        "conv_transpose": [
            Case("conv_transpose", {"x": rand(2, 4, 3, 4), "w": rand(4, 3, 3, 2), "b": rand(6)},
                 lambda x, w, b: np_conv_transpose(x, w, b, strides=[2, 3], pads=[1, 0, 0, 1],
                                                   group=2, out_pad=[1, 0]),
                 attrs="{strides = [2, 3], pads = [1, 0, 0, 1], group = 2, "
                       "output_padding = [1, 0]}", out_dtypes=[np.float32]),
            Case("conv_transpose", {"x": rand(1, 2, 5), "w": rand(2, 3, 3)},
                 lambda x, w: np_conv_transpose(x, w, dils=[2]), attrs="{dilations = [2]}",
                 out_dtypes=[np.float32])],
        "max_pool": [unary("max_pool", lambda x: np_pool(x, [3, 3], "max", [2, 2], [1, 1, 1, 1]),
                           x=x4, attrs="{kernel_shape = [3, 3], strides = [2, 2], "
                                       "pads = [1, 1, 1, 1]}"),
                     unary("max_pool", lambda x: np_pool(x, [2, 2], "max", [2, 2],
                                                         ceil_mode=True),
                           x=rand(1, 2, 5, 5), attrs="{kernel_shape = [2, 2], "
                                                     "strides = [2, 2], ceil_mode = 1}"),
                     unary("max_pool", lambda x: np_pool(x, [2], "max", dils=[2]),
                           x=np.arange(14, dtype=np.int8).reshape(1, 2, 7) * 3 % 11,
                           attrs="{kernel_shape = [2], dilations = [2]}")],
        "average_pool": [
            unary("average_pool", lambda x: np_pool(x, [3, 3], "avg", [2, 2], [1, 1, 1, 1]),
                  x=x4, attrs="{kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]}"),
            unary("average_pool", lambda x: np_pool(x, [3, 2], "avg", [2, 2], [1, 0, 1, 1],
                                                    ceil_mode=True, include_pad=True),
                  x=rand(1, 2, 6, 5), attrs="{kernel_shape = [3, 2], strides = [2, 2], "
                  "pads = [1, 0, 1, 1], ceil_mode = 1, count_include_pad = 1}")],
        "global_average_pool": [unary("global_average_pool",
                                      lambda x: x.mean(axis=(2, 3), keepdims=True), x=x4)],
        "global_max_pool": [unary("global_max_pool",
                                  lambda x: x.max(axis=2, keepdims=True), x=rand(2, 3, 5))],
        "batch_norm": [Case("batch_norm", {"x": x4, "s": rand(3), "b": rand(3), "m": rand(3),
                                           "v": rand(3, lo=0.5, hi=2)},
                            lambda x, s, b, m, v: (x - m.reshape(3, 1, 1)) /
                            np.sqrt(v.reshape(3, 1, 1) + 1e-3) * s.reshape(3, 1, 1) +
                            b.reshape(3, 1, 1), attrs="{epsilon = 0.001}",
                            out_dtypes=[np.float32])],
        "instance_norm": [Case("instance_norm", {"x": x4, "s": rand(3), "b": rand(3)},
                               lambda x, s, b: (x - x.mean(axis=(2, 3), keepdims=True)) /
                               np.sqrt(x.var(axis=(2, 3), keepdims=True) + 1e-5) *
                               s.reshape(3, 1, 1) + b.reshape(3, 1, 1),
                               out_dtypes=[np.float32])],
        "lrn": [unary("lrn", lambda x: np_lrn(x, 3, 0.01, 0.6, 1.5), x=rand(2, 5, 2, 3),
                      attrs="{size = 3, alpha = 0.01, beta = 0.6, bias = 1.5}"),
                unary("lrn", lambda x: np_lrn(x, 4, 1e-4, 0.75, 1.0), x=rand(1, 6, 3),
                      attrs="{size = 4}")],
        "pad": [unary("pad", lambda x: np_pad(x, [0, 1, -1, 0, 2, 1], value=1.5), x=x234,
                      attrs="{pads = [0, 1, -1, 0, 2, 1], value = 1.5}"),
                unary("pad", lambda x: np_pad(x, [1, 2, 1, 0], "reflect"), x=ints,
                      attrs='{pads = [1, 2, 1, 0], mode = "reflect"}'),
                unary("pad", lambda x: np_pad(x, [0, 3, 2, -1, 2, 0], "edge"), x=x234,
                      attrs='{pads = [0, 3, 2, -1, 2, 0], mode = "edge"}')],
        "resize": [
            unary("resize", lambda x: np_resize(x, [2, 3, 7, 3]), x=x4,
                  attrs="{sizes = [2, 3, 7, 3]}"),
            unary("resize", lambda x: np_resize(x, [2, 3, 8, 10], "linear",
                                                scales=[1, 1, 2, 2]),
                  x=x4, attrs='{sizes = [2, 3, 8, 10], scales = [1, 1, 2, 2], '
                              'mode = "linear"}'),
            unary("resize", lambda x: np_resize(x, [-1, -1, 3, 7], "linear", "align_corners"),
                  x=x4, attrs='{sizes = [-1, -1, 3, 7], mode = "linear", '
                              'coordinate_transformation_mode = "align_corners"}'),
            unary("resize", lambda x: np_resize(x, [2, 3, 3, 2], "linear", "align_corners",
                                                scales=[1, 1, 0.6, 0.6]),
                  x=x4, attrs='{sizes = [2, 3, 3, 2], scales = [1, 1, 0.6, 0.6], '
                              'mode = "linear", coordinate_transformation_mode = "align_corners"}'),
            unary("resize", lambda x: np_resize(x, [2, 3, 9, 4], "cubic", "pytorch_half_pixel"),
                  x=x4, attrs='{sizes = [2, 3, 9, 4], mode = "cubic", '
                              'coordinate_transformation_mode = "pytorch_half_pixel"}'),
            unary("resize", lambda x: np_resize(x, [2, 3, 6, 3], "cubic", a=-0.5, exclude=True,
                                                coord="half_pixel_symmetric"),
                  x=x4, attrs='{sizes = [2, 3, 6, 3], mode = "cubic", cubic_coeff_a = -0.5, '
                              'exclude_outside = 1, '
                              'coordinate_transformation_mode = "half_pixel_symmetric"}'),
            unary("resize", lambda x: np_resize(x, [1, 7, 8], "nearest", "asymmetric",
                                                "ceil", scales=[1, 1.9, 2.5]),
                  x=np.arange(20, dtype=np.int32).reshape(1, 4, 5),
                  attrs='{sizes = [1, 7, 8], scales = [1, 1.9, 2.5], '
                        'coordinate_transformation_mode = "asymmetric", nearest_mode = "ceil"}'),
            unary("resize", lambda x: np_resize(x, [2, 3, 8, 2], "nearest", "half_pixel",
                                                "round_prefer_ceil"),
                  x=x4, attrs='{sizes = [2, 3, 8, 2], nearest_mode = "round_prefer_ceil"}')],
        "prelu": [binary("prelu", lambda x, s: np.where(x < 0, x * s, x), a=x234,
                         b=rand(3, 1)),
                  binary("prelu", lambda x, s: np.where(x < 0, x * s, x), a=x234,
                         b=rand(1))],
        "topk": [Case("topk", {"x": ties}, lambda x: np_topk(x, 3, 1),
                      attrs="{k = 3, axis = 1}", out_dtypes=[np.float32, np.int64], nout=2),
                 Case("topk", {"x": ties}, lambda x: np_topk(x, 2, 0, largest=False),
                      attrs="{k = 2, axis = 0, largest = 0}",
                      out_dtypes=[np.float32, np.int64], nout=2),
                 Case("topk", {"x": many_ties}, lambda x: np_topk(x, 20, 1),
                      attrs="{k = 20, axis = 1}", out_dtypes=[np.float32, np.int64], nout=2,
                      name="topk_long"),
                 Case("topk", {"x": ints}, lambda x: np_topk(x, 2, -1),
                      attrs="{k = 2}", out_dtypes=[np.int32, np.int64], nout=2)],
        "cumsum": [unary("cumsum", lambda x: np_cumsum(x, 1), x=x234, attrs="{axis = 1}"),
                   unary("cumsum", lambda x: np_cumsum(x, -1, True, True), x=ints,
                         attrs="{axis = -1, exclusive = 1, reverse = 1}")],
        "trilu": [unary("trilu", lambda x: np.triu(x, 1), x=x234, attrs="{k = 1}"),
                  unary("trilu", lambda x: np.tril(x, -1), x=ints, attrs="{upper = 0, k = -1}")],
        "tile": [unary("tile", lambda x: np.tile(x, (2, 1, 3)), x=x234,
                       attrs="{repeats = [2, 1, 3]}")],
        "gather_elements": [
            Case("gather_elements", {"x": x234,
                                     "i": np.array([[[0, 2, -1]], [[1, -3, 2]]], dtype=np.int64)},
                 lambda x, i: np.take_along_axis(x[:, :, :3], (i % 3).astype(np.int64), axis=1),
                 attrs="{axis = 1}", out_dtypes=[np.float32]),
            Case("gather_elements", {"x": ints, "i": np.array([[1, 0], [-2, 1]], dtype=np.int32)},
                 lambda x, i: np.take_along_axis(x[:, :2], i.astype(np.int64) % 2, axis=0),
                 out_dtypes=[np.int32])],
        "reduce_l1": [unary("reduce_l1", lambda x: np.abs(x).sum(axis=1), x=x234,
                            attrs="{axes = [1], keepdims = 0}"),
                      unary("reduce_l1", lambda x: np.abs(x).sum(keepdims=True), x=ints)],
        "reduce_l2": [unary("reduce_l2", lambda x: np.sqrt((x ** 2).sum(axis=(0, 2),
                                                                      keepdims=True)),
                            x=x234, attrs="{axes = [0, 2]}")],
        "reduce_sum_square": [unary("reduce_sum_square", lambda x: (x ** 2).sum(axis=2),
                                    x=x234, attrs="{axes = [-1], keepdims = 0}"),
                              unary("reduce_sum_square", lambda x: (x ** 2).sum(keepdims=True),
                                    x=ints)],
        "reduce_log_sum_exp": [
            unary("reduce_log_sum_exp", lambda x: np.log(np.exp(x).sum(axis=1)), x=x234,
                  attrs="{axes = [1], keepdims = 0}"),
            unary("reduce_log_sum_exp",
                  lambda x: np_log(np.exp(x - 1000).sum(axis=1, keepdims=True)) + 1000,
                  x=np.array([[1000, 999, -np.inf], [-np.inf, -np.inf, -np.inf]], np.float64),
                  attrs="{axes = [1]}")],
        "argmin": [unary("argmin", lambda x: x.argmin(axis=1), x=x234,
                         attrs="{axis = 1, keepdims = 0}", out=np.int64),
                   unary("argmin", lambda x: x.argmin(axis=0)[None], out=np.int64,
                         x=np.array([[1, 5, 2], [1, -5, 7]], dtype=np.int32)),
                   unary("argmin", lambda x: 2 - x[:, ::-1].argmin(axis=1), out=np.int64,
                         x=np.array([[1, 5, 1], [3, 3, 3]], dtype=np.float32),
                         attrs="{axis = 1, keepdims = 0, select_last_index = 1}")],
        "mod": [binary("mod", py_mod, a=ints, b=np.array([3, -4, 0], dtype=np.int32)),
                Case("mod", {"a": ints, "b": np.array([3, -4, 0], dtype=np.int32)}, c_fmod,
                     attrs="{fmod = 1}", out_dtypes=[np.int32]),
                Case("mod", {"a": rand(2, 3, lo=-9, hi=9), "b": rand(3, lo=0.5, hi=3)},
                     np.fmod, attrs="{fmod = 1}", out_dtypes=[np.float32]),
                binary("mod", np.mod, a=rand(2, 3, lo=-9, hi=9), b=rand(3, lo=-3, hi=3))],
        "is_nan": [unary("is_nan", np.isnan, x=specials, out=np.bool_)],
        "is_inf": [unary("is_inf", np.isinf, x=specials, out=np.bool_),
                   unary("is_inf", lambda x: np.isposinf(x), x=specials, out=np.bool_,
                         attrs="{detect_negative = 0}")],
        "scatter_elements": [
            Case("scatter_elements", {"x": x234, "i": np.array([[[0, 2, -1]], [[1, -3, 2]]],
                                                               dtype=np.int64),
                                      "u": rand(2, 1, 3)},
                 lambda x, i, u: np_scatter_elements(x, i, u, 1), attrs="{axis = 1}",
                 out_dtypes=[np.float32]),
            Case("scatter_elements", {"x": ints, "i": np.array([[2, 2, 0]], dtype=np.int32),
                                      "u": np.array([[4, -6, 1]], dtype=np.int32)},
                 lambda x, i, u: np_scatter_elements(x, i, u, 1, "add"),
                 attrs='{axis = -1, reduction = "add"}', out_dtypes=[np.int32]),
            Case("scatter_elements", {"x": x234, "i": np.array([[[1], [1]]], dtype=np.int64),
                                      "u": rand(1, 2, 1)},
                 lambda x, i, u: np_scatter_elements(x, i, u, 0, "max"),
                 attrs='{reduction = "max"}', out_dtypes=[np.float32])],
        "gather_nd": [
            Case("gather_nd", {"x": x234, "i": np.array([[1, -1], [0, 2], [-2, 0]], np.int64)},
                 lambda x, i: np_gather_nd(x, i), out_dtypes=[np.float32]),
            Case("gather_nd", {"x": x234, "i": np.array([[[2, 3]], [[-1, 0]]], np.int64)},
                 lambda x, i: np_gather_nd(x, i, 1), attrs="{batch_dims = 1}",
                 out_dtypes=[np.float32]),
            Case("gather_nd", {"x": ints, "i": np.array([[[1, 2], [0, -3]], [[-1, 0], [1, 1]]],
                                                         np.int32)},
                 lambda x, i: np_gather_nd(x, i), out_dtypes=[np.int32]),
            Case("gather_nd", {"x": x4, "i": np.array([[[1], [0]], [[2], [2]]], np.int64)},
                 lambda x, i: np_gather_nd(x, i, 1), attrs="{batch_dims = 1}",
                 out_dtypes=[np.float32])],
        "scatter_nd": [
            Case("scatter_nd", {"x": x234, "i": np.array([[1, 2], [0, -1]], np.int64),
                                "u": rand(2, 4)},
                 lambda x, i, u: np_scatter_nd(x, i, u), out_dtypes=[np.float32]),
            Case("scatter_nd", {"x": ints, "i": np.array([[[0, 1]], [[0, 1]], [[1, -1]]],
                                                         np.int64),
                                "u": np.array([[3], [-4], [6]], np.int32)},
                 lambda x, i, u: np_scatter_nd(x, i, u, "add"), attrs='{reduction = "add"}',
                 out_dtypes=[np.int32]),
            Case("scatter_nd", {"x": x234, "i": np.array([[1], [1], [0]], np.int64),
                                "u": rand(3, 3, 4)},
                 lambda x, i, u: np_scatter_nd(x, i, u, "mul"), attrs='{reduction = "mul"}',
                 out_dtypes=[np.float32]),
            Case("scatter_nd", {"x": x234, "i": np.array([[0, 1, 3], [0, 1, 3], [1, 0, 0]],
                                                         np.int32),
                                "u": rand(3)},
                 lambda x, i, u: np_scatter_nd(x, i, u, "max"), attrs='{reduction = "max"}',
                 out_dtypes=[np.float32]),
            Case("scatter_nd", {"x": x234, "i": np.array([[0, 2], [0, 2]], np.int64),
                                "u": rand(2, 4)},
                 lambda x, i, u: np_scatter_nd(x, i, u, "min"), attrs='{reduction = "min"}',
                 out_dtypes=[np.float32])],
        "grid_sample": [
            Case("grid_sample", {"x": rand(2, 3, 4, 5), "g": rand(2, 3, 4, 2, lo=-1.3, hi=1.3)},
                 lambda x, g: np_grid_sample(x, g), out_dtypes=[np.float32]),
            # -0.5 and 0 land on 0.5 and 1.5 (x) and 1 and 2.5 (y): half to even
            Case("grid_sample", {"x": rand(1, 2, 4, 4),
                                 "g": np.array([[[[-0.5, 0.0], [0.0, 0.25], [-1.2, 1.9],
                                                  [0.6, -0.3]]]], np.float32)},
                 lambda x, g: np_grid_sample(x, g, "nearest", "zeros"),
                 attrs='{mode = "nearest"}', out_dtypes=[np.float32]),
            Case("grid_sample", {"x": rand(2, 2, 3, 5), "g": rand(2, 2, 3, 2, lo=-1.6, hi=1.6)},
                 lambda x, g: np_grid_sample(x, g, "nearest", "border", True),
                 attrs='{mode = "nearest", padding_mode = "border", align_corners = 1}',
                 out_dtypes=[np.float32]),
            Case("grid_sample", {"x": rand(1, 2, 5, 4), "g": rand(1, 4, 3, 2, lo=-3.5, hi=3.5)},
                 lambda x, g: np_grid_sample(x, g, "cubic", "reflection"),
                 attrs='{mode = "cubic", padding_mode = "reflection"}', out_dtypes=[np.float32]),
            Case("grid_sample", {"x": rand(1, 3, 4, 3), "g": rand(1, 3, 3, 2, lo=-2.5, hi=2.5)},
                 lambda x, g: np_grid_sample(x, g, "bilinear", "reflection", True),
                 attrs='{mode = "bilinear", padding_mode = "reflection", align_corners = 1}',
                 out_dtypes=[np.float32]),
            Case("grid_sample", {"x": rand(1, 2, 4, 4), "g": rand(1, 3, 2, 2, lo=-1.4, hi=1.4)},
                 lambda x, g: np_grid_sample(x, g, "bicubic", "border", True),
                 attrs='{mode = "bicubic", padding_mode = "border", align_corners = 1}',
                 out_dtypes=[np.float32]),
            Case("grid_sample", {"x": rand(1, 2, 3, 4, 3), "g": rand(1, 2, 3, 2, 3, lo=-1.2, hi=1.2)},
                 lambda x, g: np_grid_sample(x, g, "linear", "border"),
                 attrs='{padding_mode = "border"}', out_dtypes=[np.float32]),
            Case("grid_sample", {"x": rand(2, 3, 6), "g": rand(2, 4, 1, lo=-1.5, hi=1.5)},
                 lambda x, g: np_grid_sample(x, g, "cubic", "zeros", True),
                 attrs='{mode = "cubic", align_corners = 1}', out_dtypes=[np.float32]),
            # 3-D nearest rounds half away from zero: 0 is 1.5 on 4 and 0.5 on 2
            Case("grid_sample", {"x": np.arange(32, dtype=np.int32).reshape(1, 1, 2, 4, 4),
                                 "g": np.array([[[[[0.0, 0.0, 0.0], [-0.5, 0.5, -0.5],
                                                   [0.9, -2.0, 1.5]]]]], np.float32)},
                 lambda x, g: np_grid_sample(x, g, "nearest", "reflection"),
                 attrs='{mode = "nearest", padding_mode = "reflection"}',
                 out_dtypes=[np.int32])],
        "reverse_sequence": [
            Case("reverse_sequence", {"x": rand(4, 3, 2), "l": np.array([4, 1, 3], np.int64)},
                 lambda x, l: np_reverse_sequence(x, l), out_dtypes=[np.float32]),
            Case("reverse_sequence", {"x": ints, "l": np.array([0, 3], np.int32)},
                 lambda x, l: np_reverse_sequence(x, l, 0, 1),
                 attrs="{batch_axis = 0, time_axis = 1}", out_dtypes=[np.int32])],
        "roi_align": [
            Case("roi_align", {"x": rand(2, 3, 6, 7),
                               "r": np.array([[0.5, 1.0, 4.5, 5.0], [-1.0, 2.2, 3.3, 7.5],
                                              [6.0, 0.0, 8.5, 2.0]], np.float32),
                               "b": np.array([1, 0, 1], np.int64)},
                 lambda x, r, b: np_roi_align(x, r, b, 2, 3, ratio=2),
                 attrs="{output_height = 2, output_width = 3, sampling_ratio = 2}",
                 out_dtypes=[np.float32]),
            Case("roi_align", {"x": rand(1, 2, 8, 8),
                               "r": np.array([[2.0, 3.0, 13.0, 11.0], [4.0, 4.0, 4.5, 5.0]],
                                             np.float32),
                               "b": np.array([0, 0], np.int32)},
                 lambda x, r, b: np_roi_align(x, r, b, 3, 2, scale=0.5, half_pixel=False),
                 attrs='{output_height = 3, output_width = 2, spatial_scale = 0.5, '
                       'coordinate_transformation_mode = "output_half_pixel"}',
                 out_dtypes=[np.float32]),
            Case("roi_align", {"x": rand(1, 2, 5, 5, lo=0.1, hi=3),
                               "r": np.array([[0.0, 0.0, 4.0, 4.0], [1.5, 0.5, 5.5, 3.0]],
                                             np.float32),
                               "b": np.array([0, 0], np.int64)},
                 lambda x, r, b: np_roi_align(x, r, b, 2, 2, mode="max"),
                 attrs='{mode = "max", output_height = 2, output_width = 2}',
                 out_dtypes=[np.float32])],
        "max_unpool": [
            Case("max_unpool", {"x": pooled, "i": pooled_idx},
                 lambda x, i: np_max_unpool(x, i, (2, 3, 4, 6)),
                 attrs="{kernel_shape = [2, 2], strides = [2, 2]}", out_dtypes=[np.float32]),
            Case("max_unpool", {"x": pooled, "i": pooled_idx},
                 lambda x, i: np_max_unpool(x, i, (2, 3, 4, 6), (2, 3, 5, 7)),
                 attrs="{kernel_shape = [2, 2], strides = [2, 2], output_shape = [-1, 3, 5, 7]}",
                 out_dtypes=[np.float32]),
            Case("max_unpool", {"x": np.array([[[5, -2, 7]]], np.int32),
                                "i": np.array([[[1, 2, 5]]], np.int64)},
                 lambda x, i: np_max_unpool(x, i, (1, 1, 6)),
                 attrs="{kernel_shape = [3], strides = [2], pads = [1, 0]}",
                 out_dtypes=[np.int32])],
        "det": [unary("det", np.linalg.det, x=rand(2, 3, 3)),
                unary("det", np.linalg.det, x=np.array([[0, 2, 1], [1, 1, 1], [2, 4, 2]],
                                                        np.float64)),
                unary("det", np.linalg.det, x=rand(4, 4, 4).astype(np.float64)),
                unary("det", np.linalg.det, x=np.array([[1, 2], [2, 4]], np.float32))],
        "lp_norm": [unary("lp_norm", lambda x: np_lp_norm(x, -1, 2), x=x234),
                    unary("lp_norm", lambda x: np_lp_norm(x, 0, 1), x=np.array(
                        [[0, 1, -3], [0, -2, 1]], np.float32), attrs="{axis = 0, p = 1}"),
                    unary("lp_norm", lambda x: np_lp_norm(x, 1, 2), x=x234,
                          attrs="{axis = 1}")],
        "mean_variance_norm": [
            unary("mean_variance_norm", lambda x: np_mvn(x, (0, 2, 3)), x=x4),
            unary("mean_variance_norm", lambda x: np_mvn(x, (1,)), x=x234 * 3 + 1,
                  attrs="{axes = [-2]}"),
            unary("mean_variance_norm", lambda x: np_mvn(x, (0, 1, 2)), x=x234,
                  attrs="{axes = []}")],
        "range": [Case("range", {}, lambda: np.arange(1.5, -2.0, -0.75), out_dtypes=[np.float32],
                       consts={"s": np.array(1.5, np.float32), "l": np.array(-2.0, np.float32),
                               "d": np.array(-0.75, np.float32)}),
                  Case("range", {}, lambda: np.arange(-3, 10, 4), out_dtypes=[np.int64],
                       consts={"s": np.array(-3), "l": np.array(10), "d": np.array(4)})],
    }
    return c


def run_case(gpucc, case, tmp, k):
    folder = os.path.join(tmp, "%s_%d" % (case.name, k))
    os.makedirs(folder)
    params = ", ".join("%%%s: %s" % (n, gir_type(a)) for n, a in case.inputs.items())
    outs = ["y%d" % i for i in range(case.nout)]
    args = ", ".join("%" + n for n in list(case.inputs) + list(case.consts))
    lhs = ", ".join("%" + o for o in outs)
    consts = "".join("  %%%s = const %s %s\n" % (n, gir_type(a), repr(a.item()))
                     for n, a in case.consts.items())
    text = "graph t(%s) {\n%s  %s = %s(%s)%s\n  return %s\n}\n" % (
        params, consts, lhs, case.op, args, " " + case.attrs if case.attrs else "", lhs)
    gir = os.path.join(folder, "t.gir")
    with open(gir, "w") as f:
        f.write(text)
    cmd = [gpucc, "run", gir, "--cpu", "--output-dir", os.path.join(folder, "out")]
    for n, a in case.inputs.items():
        path = os.path.join(folder, n + ".npy")
        np.save(path, a)
        cmd += ["--input", "%s=%s" % (n, path)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        return "gpucc exited %d: %s\n%s" % (p.returncode, p.stderr.strip(), text)
    want = case.ref(*[f64(a) for a in case.inputs.values()])
    if case.nout == 1:
        want = (want,)
    for o, w, dt in zip(outs, want, case.out_dtypes):
        w = np.asarray(w)
        w = (w != 0) if dt is np.bool_ else w.astype(dt)
        got = np.load(os.path.join(folder, "out", o + ".npy"))
        if got.dtype != w.dtype or got.shape != w.shape:
            return "%%%s: got %s%s, expected %s%s\n%s" % (o, got.dtype, list(got.shape),
                                                         w.dtype, list(w.shape), text)
        if np.issubdtype(w.dtype, np.floating):
            ok = np.allclose(got.astype(np.float64), w.astype(np.float64), rtol=1e-6,
                             atol=1e-6, equal_nan=True)
        else:
            ok = np.array_equal(got, w)
        if not ok:
            return "%%%s differs:\ngot\n%s\nexpected\n%s\n%s" % (o, got, w, text)
    return None


def main():
    gpucc = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("GPUCC")
    if not gpucc:
        print("usage: test_ops_numpy.py GPUCC (or set GPUCC)", file=sys.stderr)
        return 2
    table = cases()
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="gpucc_ops_") as tmp:
        for op in ops_in_table():
            errors = []
            if op not in table:
                errors.append("no test case for this op")
            for k, case in enumerate(table.get(op, [])):
                try:
                    err = run_case(gpucc, case, tmp, k)
                except Exception as e:  # a crash in one case must not hide the others
                    err = "%s: %s" % (type(e).__name__, e)
                if err:
                    errors.append("case %d: %s" % (k, err))
            if errors:
                failed += 1
                print("FAIL %s" % op)
                for e in errors:
                    print("  " + e.replace("\n", "\n  "))
            else:
                passed += 1
                print("ok   %s (%d case%s)" % (op, len(table[op]),
                                               "" if len(table[op]) == 1 else "s"))
        for op in sorted(set(table) - set(ops_in_table())):
            failed += 1
            print("FAIL %s: tested here but not in ops.def" % op)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
