"""The norm kernels called directly on PyTorch CUDA tensors (no ONNX Runtime).

    import torch
    from trt_fastops import ops
    y = ops.layer_norm(x, weight, bias, eps=1e-5)
    y, s = ops.layer_norm(x, weight, bias, skip=residual, return_sum=True)   # s = x + residual
    y = ops.rms_norm(x, weight, eps=1e-6)
    o = ops.attention(q, k, v, causal=True)                  # q [B, Hq, S, D], k/v [B, Hkv, S, D]

Tensors must be CUDA, contiguous, and all of x's dtype (float32, float16 or
bfloat16); math is float32. Outputs are allocated with torch on x's device and
the kernel runs on torch.cuda.current_stream(x.device), so ordering with other
torch work on that stream is as usual. torch is imported lazily: importing this
module does not need it.
"""
from __future__ import annotations

import math
from typing import Any

__all__ = ["layer_norm", "rms_norm", "attention"]

_DTYPE_NAMES = ("float32", "float16", "bfloat16")


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "trt_fastops.ops needs PyTorch with CUDA (pip install torch); "
            "the ONNX Runtime path (trt_fastops.ort) does not") from e
    return torch


def _native():
    try:
        from . import _C
    except ImportError as e:  # pragma: no cover - depends on the build
        raise ImportError(
            "trt_fastops.ops needs the native module trt_fastops._C; build the package "
            "(pip install . or the in-place CMake build)") from e
    return _C


def _shape(t) -> list[int]:
    return [int(d) for d in t.shape]


def _strip_leading_ones(shape) -> list[int]:
    shape = list(shape)
    while shape and shape[0] == 1:
        shape.pop(0)
    return shape


def _dtype_name(torch, t) -> str | None:
    for name in _DTYPE_NAMES:
        if t.dtype == getattr(torch, name):
            return name
    return None


def _check_tensor(torch, op: str, name: str, t, x=None) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{op}: input '{name}' must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_cuda:
        raise ValueError(f"{op}: input '{name}' is on {t.device}, expected a CUDA tensor")
    if x is None:
        if _dtype_name(torch, t) is None:
            raise TypeError(f"{op}: input '{name}' is {t.dtype}, expected float32, float16 or bfloat16")
    else:
        if t.dtype != x.dtype:
            raise TypeError(f"{op}: input '{name}' is {t.dtype}, expected {x.dtype} (the dtype of x)")
        if t.device != x.device:
            raise ValueError(f"{op}: input '{name}' is on {t.device}, expected {x.device} (the device of x)")
    if not t.is_contiguous():
        raise ValueError(f"{op}: input '{name}' is not contiguous (call .contiguous() first)")


def _check_param(op: str, name: str, t, normalized: list[int], cols: int, allow_scalar: bool) -> bool:
    """Validates a per-column parameter; returns True when it is a broadcast scalar."""
    numel = int(t.numel())
    if allow_scalar and numel == 1:
        return True
    if numel == cols and _strip_leading_ones(_shape(t)) == _strip_leading_ones(normalized):
        return False
    expected = f"the normalized shape {normalized} of x" + (" or a single element" if allow_scalar else "")
    raise ValueError(f"{op}: input '{name}' has shape {_shape(t)}, expected {expected}")


def _norm(op: str, kind: str, x, weight, bias, eps: float, skip, skip_bias, normalized_ndim: int,
          return_stats: bool, return_sum: bool) -> Any:
    torch = _torch()
    _C = _native()
    _check_tensor(torch, op, "x", x)
    if not isinstance(normalized_ndim, int) or not 1 <= normalized_ndim <= x.dim():
        raise ValueError(f"{op}: normalized_ndim must be an int in [1, {x.dim()}] (x has {x.dim()} dims), "
                         f"got {normalized_ndim!r}")
    shape = _shape(x)
    normalized = shape[len(shape) - normalized_ndim:]
    cols = math.prod(normalized)
    if cols == 0:
        raise ValueError(f"{op}: x has shape {shape}; the normalized dims {normalized} hold no element")
    rows = int(x.numel()) // cols
    dtype = _dtype_name(torch, x)

    _check_tensor(torch, op, "weight", weight, x)
    gamma_scalar = _check_param(op, "weight", weight, normalized, cols, allow_scalar=True)
    beta_scalar = False
    if bias is not None:
        _check_tensor(torch, op, "bias", bias, x)
        beta_scalar = _check_param(op, "bias", bias, normalized, cols, allow_scalar=True)
    skip_rows = 0
    if skip is not None:
        _check_tensor(torch, op, "skip", skip, x)
        sk = _strip_leading_ones(_shape(skip))
        if len(sk) < normalized_ndim or sk != shape[len(shape) - len(sk):]:
            raise ValueError(f"{op}: input 'skip' has shape {_shape(skip)}, expected x's shape {shape} or a "
                             f"suffix of it covering the normalized dims {normalized} (broadcast over "
                             f"leading dims)")
        skip_rows = int(skip.numel()) // cols
    if skip_bias is not None:
        _check_tensor(torch, op, "skip_bias", skip_bias, x)
        _check_param(op, "skip_bias", skip_bias, normalized, cols, allow_scalar=False)

    y = torch.empty_like(x)
    sum_out = torch.empty_like(x) if return_sum else None
    mean = rstd = None
    if return_stats:
        stats_shape = shape[:len(shape) - normalized_ndim] + [1] * normalized_ndim
        mean = torch.empty(stats_shape, dtype=torch.float32, device=x.device)
        rstd = torch.empty(stats_shape, dtype=torch.float32, device=x.device)

    def ptr(t) -> int:
        return 0 if t is None else int(t.data_ptr())

    with torch.cuda.device(x.device):
        stream = torch.cuda.current_stream(x.device).cuda_stream
        _C.norm_forward(kind, dtype, ptr(x), ptr(weight), ptr(y), rows, cols,
                        skip=ptr(skip), skip_rows=max(skip_rows, 1) if skip is not None else 0,
                        bias=ptr(skip_bias), beta=ptr(bias), gamma_scalar=gamma_scalar,
                        beta_scalar=beta_scalar, sum_out=ptr(sum_out), mean_out=ptr(mean),
                        rstd_out=ptr(rstd), epsilon=float(eps), stream=int(stream))
    out = [y]
    if return_stats:
        out += [mean, rstd]
    if return_sum:
        out.append(sum_out)
    return out[0] if len(out) == 1 else tuple(out)


def layer_norm(x, weight, bias=None, eps: float = 1e-5, *, skip=None, skip_bias=None,
               normalized_ndim: int = 1, return_stats: bool = False, return_sum: bool = False):
    """LayerNorm over the last `normalized_ndim` dims of x, optionally of x + skip + skip_bias.

    weight / bias: the normalized shape (leading 1s ignored) or one element (broadcast).
    skip: x's shape, or a suffix of it covering the normalized dims (broadcast over leading
    dims, as ORT's SkipLayerNormalization). skip_bias: the normalized shape, added with skip.

    Returns y; with return_stats, (y, mean, rstd) where mean / rstd are float32 of shape
    x.shape[:-normalized_ndim] + [1] * normalized_ndim; with return_sum, the sum
    x + skip + skip_bias (x's dtype) is appended last.
    """
    return _norm("layer_norm", "layer", x, weight, bias, eps, skip, skip_bias, normalized_ndim,
                 return_stats, return_sum)


def rms_norm(x, weight, eps: float = 1e-5, *, skip=None, skip_bias=None, normalized_ndim: int = 1,
             return_sum: bool = False):
    """RMSNorm: y = s / sqrt(mean(s^2) + eps) * weight with s = x (+ skip + skip_bias).

    Arguments as layer_norm. Returns y, or (y, sum) with return_sum.
    """
    return _norm("rms_norm", "rms", x, weight, None, eps, skip, skip_bias, normalized_ndim,
                 False, return_sum)


def _view_strides(op: str, name: str, t, layout: str) -> tuple[int, int, int]:
    """(batch, head, seq) element strides of a 4-D tensor in `layout`; the last dim must be dense."""
    if t.dim() != 4:
        raise ValueError(f"{op}: input '{name}' has shape {_shape(t)}, expected 4 dims ({layout})")
    if t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(f"{op}: input '{name}' has stride {t.stride(-1)} in its last dim, expected 1")
    sb, s1, s2 = t.stride(0), t.stride(1), t.stride(2)
    return (sb, s1, s2) if layout == "bhsd" else (sb, s2, s1)


def attention(q, k, v, *, mask=None, causal: bool = False, causal_offset: int = 0, scale: float | None = None,
              softcap: float = 0.0, layout: str = "bhsd", return_lse: bool = False, out=None):
    """Flash-attention forward (the math of ONNX Attention, see plugins/attention/attention.h).

    layout "bhsd": q [B, Hq, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv];
    layout "bshd": q [B, Sq, Hq, D] ... (a [B, S, H * D] tensor viewed as 4-D). Any strides
    with a dense last dim (views of packed QKV work without copies). Hq must be a multiple
    of Hkv (GQA / MQA). float16 or bfloat16; head dims up to 256.
    mask: bool (True = attend) or additive (any float dtype), broadcastable to
    [B, Hq, Sq, Skv']; Skv' <= Skv, keys past it are masked (as ONNX pads a short mask).
    causal: key j visible to query i iff j <= i + causal_offset. scale defaults to 1/sqrt(D);
    softcap > 0 applies softcap * tanh(s / softcap) before the mask. Fully masked rows give 0.
    Returns out (q's layout, last dim Dv), and with return_lse also the float32 log-sum-exp
    [B, Hq, Sq] (natural log; -inf for fully masked rows).
    """
    torch = _torch()
    _C = _native()
    op = "attention"
    if layout not in ("bhsd", "bshd"):
        raise ValueError(f"{op}: layout must be 'bhsd' or 'bshd', got {layout!r}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or not t.is_cuda:
            raise ValueError(f"{op}: input '{name}' must be a CUDA torch.Tensor")
        if t.dtype != q.dtype or t.device != q.device:
            raise TypeError(f"{op}: input '{name}' is {t.dtype} on {t.device}, expected {q.dtype} on {q.device}")
    dtype = _dtype_name(torch, q)
    qs, ks, vs = (_view_strides(op, n, t, layout) for n, t in (("q", q), ("k", k), ("v", v)))
    h_dim, s_dim = (1, 2) if layout == "bhsd" else (2, 1)
    batch, q_heads, q_len, head_dim = q.shape[0], q.shape[h_dim], q.shape[s_dim], q.shape[3]
    kv_heads, kv_len, v_head_dim = k.shape[h_dim], k.shape[s_dim], v.shape[3]
    if k.shape[0] != batch or v.shape[0] != batch or v.shape[h_dim] != kv_heads or v.shape[s_dim] != kv_len \
            or k.shape[3] != head_dim:
        raise ValueError(f"{op}: q {_shape(q)}, k {_shape(k)}, v {_shape(v)} are inconsistent for layout {layout}")
    if kv_heads == 0 or q_heads % kv_heads != 0:
        raise ValueError(f"{op}: q has {q_heads} heads, expected a multiple of k's {kv_heads}")
    out_shape = list(q.shape[:3]) + [v_head_dim]
    if out is None:
        out = torch.empty(out_shape, dtype=q.dtype, device=q.device)
    elif _shape(out) != out_shape or out.dtype != q.dtype:
        raise ValueError(f"{op}: out has shape {_shape(out)} {out.dtype}, expected {out_shape} {q.dtype}")
    os_ = _view_strides(op, "out", out, layout)
    lse = torch.empty((batch, q_heads, q_len), dtype=torch.float32, device=q.device) if return_lse else None

    mask_kind, mask_dtype, mask_ptr, mask_strides, mask_kv_len = "none", "float16", 0, (0, 0, 0, 1), 0
    if mask is not None:
        if mask.dim() > 4 or mask.device != q.device:
            raise ValueError(f"{op}: mask must be a tensor of at most 4 dims on {q.device}, got {_shape(mask)}")
        mask_kv_len = int(mask.shape[-1]) if mask.dim() else 1
        m = mask.reshape([1] * (4 - mask.dim()) + list(mask.shape))
        try:
            m = m.expand(batch, q_heads, q_len, mask_kv_len)
        except RuntimeError as e:
            raise ValueError(f"{op}: mask of shape {_shape(mask)} does not broadcast to "
                             f"[{batch}, {q_heads}, {q_len}, {mask_kv_len}]") from e
        if mask.dtype == torch.bool:
            mask_kind = "bool"
        else:
            mask_kind, mask_dtype = "additive", _dtype_name(torch, mask)
            if mask_dtype is None:
                raise TypeError(f"{op}: mask is {mask.dtype}, expected bool or float32/float16/bfloat16")
        mask_ptr, mask_strides = int(m.data_ptr()), tuple(int(st) for st in m.stride())
    if scale is None:
        scale = 1.0 / math.sqrt(head_dim)

    # The launcher's tile counter (causal inputs), from torch's allocator on this stream.
    ws_bytes = _C.attention_workspace_bytes(dtype, causal=bool(causal)) if dtype else 0
    workspace = torch.empty(ws_bytes, dtype=torch.uint8, device=q.device) if ws_bytes else None
    with torch.cuda.device(q.device):
        stream = torch.cuda.current_stream(q.device).cuda_stream
        _C.attention_forward(dtype or str(q.dtype), int(q.data_ptr()), int(k.data_ptr()), int(v.data_ptr()),
                             int(out.data_ptr()), batch, q_heads, kv_heads, q_len, kv_len, head_dim, v_head_dim,
                             q_strides=qs, k_strides=ks, v_strides=vs, out_strides=os_, scale=float(scale),
                             softcap=float(softcap), causal=bool(causal), causal_offset=int(causal_offset),
                             mask_kind=mask_kind, mask_dtype=mask_dtype, mask=mask_ptr, mask_strides=mask_strides,
                             mask_kv_len=mask_kv_len, lse=0 if lse is None else int(lse.data_ptr()),
                             workspace=0 if workspace is None else int(workspace.data_ptr()),
                             workspace_bytes=ws_bytes, stream=int(stream))
    return (out, lse) if return_lse else out
