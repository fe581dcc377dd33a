"""float64 numpy references for the trt_fastops ops, for onnx.reference.

Lets tests (and anyone without the native library) execute a rewritten graph:

    from models.reference import run_reference
    outputs = run_reference(rewritten_model, feeds)   # list, in graph-output order

The math follows the team contract (plugins/norm/norm.h): per row of the
normalised shape X.shape[axis:], s = X + Skip + Bias, then layer or RMS
normalisation computed in float64 here, Y rounded once to X's dtype.
"""
from __future__ import annotations

import numpy as np
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

DOMAIN = "trt_fastops"


def _rows(x: np.ndarray, axis: int) -> tuple[np.ndarray, int]:
    axis = axis + x.ndim if axis < 0 else axis
    return x.astype(np.float64), axis


def _broadcast_param(p, x_shape, axis):
    # Scale/B/Bias: one element, or the normalised shape (leading 1s dropped).
    if p is None:
        return None
    p = np.asarray(p, dtype=np.float64)
    if p.size == 1:
        return p.reshape(())
    return p.reshape(tuple(x_shape[axis:]))


def norm_reference(x, scale, bias=None, skip=None, add_bias=None, *, axis=-1, epsilon=1e-5,
                   rms=False, outputs=("Y",)):
    """Returns {name: array} for the requested output names (Y, Mean, InvStdDev, Sum)."""
    xf, ax = _rows(np.asarray(x), axis)
    s = xf
    if skip is not None:
        s = s + np.asarray(skip, dtype=np.float64)  # broadcast over leading dims
    if add_bias is not None:
        s = s + _broadcast_param(add_bias, x.shape, ax)
    red = tuple(range(ax, x.ndim))
    mean = np.zeros(s.shape[:ax] + (1,) * (x.ndim - ax)) if rms else s.mean(axis=red, keepdims=True)
    d = s - mean
    inv = 1.0 / np.sqrt((d * d).mean(axis=red, keepdims=True) + epsilon)
    y = d * inv * _broadcast_param(scale, x.shape, ax)
    if bias is not None:
        y = y + _broadcast_param(bias, x.shape, ax)
    res = {"Y": y.astype(x.dtype), "Mean": mean.astype(np.float32), "InvStdDev": inv.astype(np.float32),
           "Sum": s.astype(x.dtype)}
    return {k: res[k] for k in outputs}


def _outputs(op: OpRun, names):
    # Return exactly as many results as the node declares (optional ones may be "").
    return tuple(names[: len(op.output)])


class LayerNorm(OpRun):
    op_domain = DOMAIN

    def _run(self, X, Scale, B=None, axis=-1, epsilon=1e-5, stash_type=1, **_):
        names = _outputs(self, ("Y", "Mean", "InvStdDev"))
        r = norm_reference(X, Scale, B, axis=axis, epsilon=epsilon, outputs=names)
        return tuple(r[n] for n in names)


class SkipLayerNorm(OpRun):
    op_domain = DOMAIN

    def _run(self, X, Skip, Scale, B=None, Bias=None, axis=-1, epsilon=1e-5, **_):
        names = _outputs(self, ("Y", "Mean", "InvStdDev", "Sum"))
        r = norm_reference(X, Scale, B, Skip, Bias, axis=axis, epsilon=epsilon, outputs=names)
        return tuple(r[n] for n in names)


class RMSNorm(OpRun):
    op_domain = DOMAIN

    def _run(self, X, Scale, Skip=None, Bias=None, axis=-1, epsilon=1e-5, stash_type=1, **_):
        names = _outputs(self, ("Y", "Sum"))
        r = norm_reference(X, Scale, None, Skip, Bias, axis=axis, epsilon=epsilon, rms=True, outputs=names)
        return tuple(r[n] for n in names)


OPS = (LayerNorm, SkipLayerNorm, RMSNorm)


def run_reference(model, feeds: dict) -> list[np.ndarray]:
    """Run `model` (ModelProto) with onnx.reference, our ops included."""
    return ReferenceEvaluator(model, new_ops=list(OPS)).run(None, feeds)
