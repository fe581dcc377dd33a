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


# ---------------------------------------------------------------------------
# Conv / ConvTranspose (plugins/conv/conv_op.h): float64 direct computation,
# pads resolved here independently of the C++ code (auto_pad, output_shape).
# ---------------------------------------------------------------------------
def _act(v: np.ndarray, activation: str) -> np.ndarray:
    if activation in ("", None):
        return v
    if activation == "Relu":
        return np.where(v < 0, 0.0, v)
    if activation == "Silu":
        return v / (1.0 + np.exp(-v))
    if activation == "Gelu":
        import math

        return 0.5 * v * (1.0 + np.vectorize(math.erf, otypes=[np.float64])(v / math.sqrt(2.0)))
    raise ValueError(f"unknown activation {activation!r}")


def resolve_conv(x_shape, w_shape, *, transpose=False, strides=None, dilations=None, pads=None,
                 auto_pad="NOTSET", group=1, output_padding=None, output_shape=None, output_crop=None, **_):
    """(pad_begin, pad_end, out) per spatial dim, as trt_fastops (= ONNX Runtime 1.31) resolves them.
    output_crop (trt_fastops.ConvTranspose only, with explicit pads): added to the pads."""
    sp = len(x_shape) - 2
    s = list(strides or [1] * sp)
    d = list(dilations or [1] * sp)
    p = list(pads or [0] * (2 * sp))
    if output_crop:
        p = [a + b for a, b in zip(p, output_crop)]
    op = list(output_padding or [0] * sp)
    auto_pad = auto_pad or "NOTSET"
    k = list(w_shape[2:])
    pb, pe, out = [], [], []
    for i in range(sp):
        n, dk = x_shape[2 + i], d[i] * (k[i] - 1) + 1
        if not transpose:
            if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                o = -(-n // s[i])
                total = max(0, (o - 1) * s[i] + dk - n)
                b = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
                pb.append(b), pe.append(total - b), out.append(o)
                continue
            b, e = (0, 0) if auto_pad == "VALID" else (p[i], p[i + sp])
            pb.append(b), pe.append(e), out.append((n + b + e - dk) // s[i] + 1)
            continue
        natural = s[i] * (n - 1) + op[i] + dk
        if output_shape:
            want = list(output_shape)[-sp:][i]
            total = natural - want
            if total < 0:
                pb.append(0), pe.append(0)
            else:
                b = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
                pb.append(b), pe.append(total - b)
            out.append(want)
        elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            total = max(0, natural - n * s[i])
            b = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            pb.append(b), pe.append(total - b), out.append(natural - total)
        else:
            b, e = (0, 0) if auto_pad == "VALID" else (p[i], p[i + sp])
            pb.append(b), pe.append(e), out.append(natural - b - e)
    return pb, pe, out


def conv_reference(x, w, b=None, *, transpose=False, activation="", **attrs) -> np.ndarray:
    """float64 Conv / ConvTranspose (+ bias, + activation) with ONNX attributes; Y in X's dtype
    unless X is float64 (then float64)."""
    import itertools

    xf = np.asarray(x, np.float64)
    wf = np.asarray(w, np.float64)
    group = int(attrs.get("group", 1))
    sp = xf.ndim - 2
    s = list(attrs.get("strides") or [1] * sp)
    d = list(attrs.get("dilations") or [1] * sp)
    pb, pe, out = resolve_conv(xf.shape, wf.shape, transpose=transpose, **attrs)
    n, c = xf.shape[:2]
    ks = wf.shape[2:]
    cg = c // group
    if not transpose:
        m = wf.shape[0]
        mg = m // group
        xp = np.pad(xf, [(0, 0), (0, 0)] + [(pb[i], pe[i]) for i in range(sp)])
        y = np.zeros((n, m, *out))
        for g in range(group):
            xg = xp[:, g * cg:(g + 1) * cg]
            for k in itertools.product(*[range(v) for v in ks]):
                sl = tuple(slice(k[i] * d[i], k[i] * d[i] + (out[i] - 1) * s[i] + 1, s[i]) for i in range(sp))
                patch = xg[(slice(None), slice(None)) + sl]
                y[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", patch,
                                                       wf[g * mg:(g + 1) * mg][(slice(None), slice(None)) + k])
    else:
        mg = wf.shape[1]
        m = mg * group
        ins = xf.shape[2:]
        size = [max(s[i] * (ins[i] - 1) + d[i] * (ks[i] - 1) + 1, out[i] + pb[i]) for i in range(sp)]
        canvas = np.zeros((n, m, *size))
        for g in range(group):
            xg = xf[:, g * cg:(g + 1) * cg]
            for k in itertools.product(*[range(v) for v in ks]):
                contrib = np.einsum("nc...,cm->nm...", xg, wf[g * cg:(g + 1) * cg][(slice(None), slice(None)) + k])
                sl = tuple(slice(k[i] * d[i], k[i] * d[i] + (ins[i] - 1) * s[i] + 1, s[i]) for i in range(sp))
                canvas[(slice(None), slice(g * mg, (g + 1) * mg)) + sl] += contrib
        y = canvas[(slice(None), slice(None)) + tuple(slice(pb[i], pb[i] + out[i]) for i in range(sp))]
    if b is not None:
        y = y + np.asarray(b, np.float64).reshape((1, m) + (1,) * sp)
    return _act(y, activation)


class _ConvBase(OpRun):
    op_domain = DOMAIN
    TRANSPOSE = False

    def _run(self, X, W, B=None, **attrs):
        attrs = {k: v for k, v in attrs.items() if v is not None}
        y = conv_reference(X, W, B, transpose=self.TRANSPOSE, **attrs)
        return (y.astype(X.dtype),)


class Conv(_ConvBase):
    def _run(self, X, W, B=None, kernel_shape=None, strides=None, dilations=None, pads=None, auto_pad="NOTSET",
             group=1, activation="", **_):
        return super()._run(X, W, B, strides=strides, dilations=dilations, pads=pads, auto_pad=auto_pad,
                            group=group, activation=activation)


class ConvTranspose(_ConvBase):
    TRANSPOSE = True

    def _run(self, X, W, B=None, kernel_shape=None, strides=None, dilations=None, pads=None, auto_pad="NOTSET",
             group=1, activation="", output_padding=None, output_shape=None, output_crop=None, **_):
        return super()._run(X, W, B, strides=strides, dilations=dilations, pads=pads, auto_pad=auto_pad,
                            group=group, activation=activation, output_padding=output_padding,
                            output_shape=output_shape, output_crop=output_crop)


OPS = OPS + (Conv, ConvTranspose)


# ---------------------------------------------------------------------------
# Attention (plugins/attention/attention_op.h = ONNX Attention, opset 23),
# written out here in float64 (onnx's reference builds the causal frontier from
# the mask's own shape, which is wrong for a [B, 1, 1, S] padding mask).
# ---------------------------------------------------------------------------
def _heads_4d(x: np.ndarray, heads) -> np.ndarray:
    b, s, hd = x.shape
    return x.reshape(b, s, heads, hd // heads).transpose(0, 2, 1, 3)


def attention_reference(q, k, v, attn_mask=None, past_key=None, past_value=None, *, is_causal=0,
                        q_num_heads=None, kv_num_heads=None, scale=None, softcap=0.0, **_):
    """(Y, present_key, present_value) in float64 (ONNX Attention-23 semantics)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    three_d = q.ndim == 3
    if three_d:
        q, k, v = _heads_4d(q, q_num_heads), _heads_4d(k, kv_num_heads), _heads_4d(v, kv_num_heads)
    past = 0
    if past_key is not None:
        past = past_key.shape[2]
        k = np.concatenate([np.asarray(past_key, np.float64), k], axis=2)
        v = np.concatenate([np.asarray(past_value, np.float64), v], axis=2)
    b, hq, sq, d = q.shape
    hkv, total = k.shape[1], k.shape[2]
    scale = 1.0 / np.sqrt(d) if scale is None else float(scale)
    kr, vr = np.repeat(k, hq // hkv, axis=1), np.repeat(v, hq // hkv, axis=1)
    s = scale * (q @ kr.transpose(0, 1, 3, 2))
    if softcap:
        s = softcap * np.tanh(s / softcap)
    bias = np.zeros((sq, total))
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        pad = total - m.shape[-1]
        if pad > 0:  # ONNX pads a short mask with false / -inf
            m = np.concatenate([m, np.full(m.shape[:-1] + (pad,), False if m.dtype == np.bool_ else -np.inf,
                                           dtype=m.dtype)], axis=-1)
        bias = bias + (np.where(m, 0.0, -np.inf) if m.dtype == np.bool_ else m.astype(np.float64))
    if is_causal:
        i, j = np.arange(sq)[:, None], np.arange(total)[None, :]
        bias = bias + np.where(j <= i + past, 0.0, -np.inf)
    s = s + bias
    mx = s.max(axis=-1, keepdims=True)
    dead = np.isneginf(mx)  # fully masked rows give zeros
    e = np.exp(s - np.where(dead, 0.0, mx))
    p = np.where(dead, 0.0, e / np.where(dead, 1.0, e.sum(axis=-1, keepdims=True)))
    y = p @ vr
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(b, sq, -1)
    return y, k, v


def unpack_qkv(qkv: np.ndarray, q_num_heads: int, kv_num_heads: int) -> tuple[np.ndarray, ...]:
    """packed_qkv=1: [B, S, (Hq + 2 Hkv) D] -> the three 3-D inputs Q, K, V."""
    d = qkv.shape[-1] // (q_num_heads + 2 * kv_num_heads)
    q_end, k_end = q_num_heads * d, (q_num_heads + kv_num_heads) * d
    return qkv[..., :q_end], qkv[..., q_end:k_end], qkv[..., k_end:]


class Attention(OpRun):
    op_domain = DOMAIN

    def _run(self, Q, K=None, V=None, attn_mask=None, past_key=None, past_value=None, is_causal=0, q_num_heads=None,
             kv_num_heads=None, scale=None, softcap=0.0, qk_matmul_output_mode=0, softmax_precision=None,
             packed_qkv=0, **_):
        if packed_qkv:
            Q, K, V = unpack_qkv(Q, q_num_heads, kv_num_heads)
        y, pk, pv = attention_reference(Q, K, V, attn_mask, past_key, past_value, is_causal=is_causal,
                                        q_num_heads=q_num_heads, kv_num_heads=kv_num_heads, scale=scale,
                                        softcap=softcap)
        outs = (y.astype(Q.dtype), pk.astype(Q.dtype), pv.astype(Q.dtype))
        return outs[: len(self.output)]


OPS = OPS + (Attention,)


def dense_reference(x, w, bias=None, activation: str = "none") -> np.ndarray:
    """trt_fastops.Dense: MatMul(X, W) + bias, then the activation ("gelu": the exact erf GELU), in
    float64, rounded once to X's dtype."""
    import math

    y = np.asarray(x, np.float64) @ np.asarray(w, np.float64)
    if bias is not None:
        y = y + np.asarray(bias, np.float64)
    if activation == "gelu":
        y = 0.5 * y * (1.0 + np.vectorize(math.erf, otypes=[np.float64])(y / math.sqrt(2.0)))
    elif activation != "none":
        raise ValueError(f"Dense: unknown activation {activation!r}")
    return y.astype(np.asarray(x).dtype)


class Dense(OpRun):
    op_domain = DOMAIN

    def _run(self, X, W, bias=None, activation="none"):
        return (dense_reference(X, W, bias, activation),)


OPS = OPS + (Dense,)


# ---------------------------------------------------------------------------
# ONNX Runtime contrib ops the rewriter emits for target="ort" (trt_fastops/rewriter/bias_gelu.py)
# ---------------------------------------------------------------------------
def bias_gelu_reference(x, bias=None, *, tanh: bool = False) -> np.ndarray:
    """GELU(X + bias) in float64: the erf form (com.microsoft.BiasGelu) or the tanh
    approximation (com.microsoft.FastGelu); rounded once to X's dtype."""
    import math

    v = np.asarray(x, dtype=np.float64)
    if bias is not None:
        v = v + np.asarray(bias, dtype=np.float64)
    if tanh:
        y = 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))
    else:
        y = 0.5 * v * (1.0 + np.vectorize(math.erf, otypes=[np.float64])(v / math.sqrt(2.0)))
    return y.astype(np.asarray(x).dtype)


class BiasGelu(OpRun):
    op_domain = "com.microsoft"

    def _run(self, X, bias):
        return (bias_gelu_reference(X, bias),)


class FastGelu(OpRun):
    op_domain = "com.microsoft"

    def _run(self, X, bias=None):
        return (bias_gelu_reference(X, bias, tanh=True),)


OPS = OPS + (BiasGelu, FastGelu)


# ---------------------------------------------------------------------------
# EmbedLayerNorm (plugins/norm/embed_op.h; the rewriter's embed_layer_norm rule, target="ort")
# ---------------------------------------------------------------------------
def embed_layer_norm_reference(ids, word, position, gamma, segment_ids=None, segment=None, beta=None,
                               position_ids=None, *, epsilon=1e-5) -> np.ndarray:
    """LayerNorm(word[ids] + position[positions] (+ segment[segment_ids])) * gamma (+ beta), float64;
    positions 0..S-1 without position_ids; negative indices count from the end (ONNX Gather)."""
    ids = np.asarray(ids, np.int64)
    seq = ids.shape[1]
    e = np.asarray(word, np.float64)[ids]
    pos = np.broadcast_to(np.arange(seq) if position_ids is None else np.asarray(position_ids, np.int64), ids.shape)
    e = e + np.asarray(position, np.float64)[pos]
    if segment_ids is not None:
        e = e + np.asarray(segment, np.float64)[np.asarray(segment_ids, np.int64)]
    return norm_reference(e, gamma, beta, epsilon=epsilon)["Y"].astype(np.asarray(word).dtype)


class EmbedLayerNorm(OpRun):
    op_domain = DOMAIN

    def _run(self, input_ids, segment_ids=None, word_embedding=None, position_embedding=None,
             segment_embedding=None, gamma=None, beta=None, position_ids=None, epsilon=1e-5):
        return (embed_layer_norm_reference(input_ids, word_embedding, position_embedding, gamma, segment_ids,
                                           segment_embedding, beta, position_ids, epsilon=epsilon),)


OPS = OPS + (EmbedLayerNorm,)
