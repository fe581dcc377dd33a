"""Single-attention graphs with a switch for each detail the attention rules check.

Used by the rewriter tests for positive and negative cases. Every builder returns a
checked-valid model; `decomposed` takes graph inputs q, k, v ([B, S, H * D] or, with
`layout="4d"`, [B, H, S, D]) plus the inputs its mask needs, and has one output "y".

    decomposed(...)   MatMul / scale / mask / Softmax / MatMul as exporters write it
    packed(...)       timm's fused QKV (Linear -> Reshape -> Transpose -> Gather / Split) around it
    onnx_attention()  one ONNX Attention node (opset 23 / 24 / 25)
    mha()             one com.microsoft MultiHeadAttention node
"""
from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper

from ._graph import GraphBuilder, ir_version_for


def _finish(g: GraphBuilder, y: str, opset: int, extra_outputs=(), extra_opsets=()) -> onnx.ModelProto:
    g.outputs.append(helper.make_tensor_value_info(y, g.onnx_dtype, None))
    model = g.model(opset, extra_opsets=extra_opsets)
    model = onnx.shape_inference.infer_shapes(model)
    infos = {vi.name: vi for vi in model.graph.value_info}
    outs = {o.name: o for o in model.graph.output}
    if y in infos:
        outs[y].CopyFrom(infos[y])
    for name in extra_outputs:
        model.graph.output.append(infos[name])
    del model.graph.value_info[:]
    return model


def _rename(g: GraphBuilder, value: str, name: str) -> str:
    for node in g.nodes:
        node.output[:] = [name if o == value else o for o in node.output]
        node.input[:] = [name if i == value else i for i in node.input]
    return name


def decomposed(*, batch=2, seq=5, kv_seq=None, heads=4, kv_heads=None, head_dim=8, v_head_dim=None,
               dtype="float32", opset=17, layout="3d", kt="one", scale="div", scale_value=None,
               mask=None, mask_fill=-np.inf, mask_shape=None, softmax_axis=-1, softmax_cast=False,
               dropout=None, merge=True, rope=False, repeat_kv=True, softcap=None, expose=None,
               seed=0) -> onnx.ModelProto:
    """One attention block.

    layout: "3d" (inputs [B, S, H*D] split by Reshape + Transpose) or "4d" (inputs [B, H, S, D]).
    kt: "one" (K^T = Transpose(Reshape(k), [0, 2, 3, 1])) or "two" (split, then [0, 1, 3, 2]).
    scale: "div" (scores / sqrt(D)), "mul" (scores * 1/sqrt(D)), "sqrt_split" (SDPA: Mul(Q, sqrt s),
      Mul(K^T, sqrt s)), "q" (timm: Q * s), "none" (no scale: 1.0), "input" (scores * a graph
      input "s"), "tensor" (scores * a [1, H, 1, 1] constant), "after_mask" (the Div after the Add).
    mask: None, "padding" (int64 input "attention_mask" [B, S_kv] -> (1 - m) * -10000 [B,1,1,S_kv]),
      "causal_where" (Where(tril, s, fill)), "causal_add" (Add of a constant 0 / fill triangle),
      "masked_fill" (Where(triu, fill, s)), "bottom_right" (tril with offset S_kv - S), "bool_input"
      (Where(bool input "mask", s, fill)), "additive_input" (Add a float input "mask"),
      "causal_and_padding" (causal_where then padding), "bool_and_additive" (two runtime masks),
      "sdpa_bool" (Add(s, Where(bool input, 0, -inf))); mask_shape: shape of the input masks.
    dropout: None, "eval" (Dropout, no training_mode), "train" (training_mode=True), "runtime"
      (training_mode a graph input).
    rope: rotate-half rotary embedding on Q and K (4-D values: the 4-D form).
    kv_heads: GQA; K / V have kv_heads heads and are repeated (HF repeat_kv) when repeat_kv.
    softcap: cap * tanh(scores / cap) before the mask.
    expose: "probs" or "scores" also a graph output (an extra consumer).
    """
    g = GraphBuilder("attention", dtype=dtype, seed=seed)
    f = g.dtype
    B, S, H, D = batch, seq, heads, head_dim
    L = kv_seq or seq
    Hkv = kv_heads or heads
    Dv = v_head_dim or head_dim
    if layout == "3d":
        q = g.input("q", g.onnx_dtype, [B, S, H * D])
        k = g.input("k", g.onnx_dtype, [B, L, Hkv * D])
        v = g.input("v", g.onnx_dtype, [B, L, Hkv * Dv])

        def split(x, n, d, perm=(0, 2, 1, 3), s=S):
            r = g.node("Reshape", [x, g.ints([B, s, n, d])])
            return g.node("Transpose", [r], perm=list(perm))

        qh = split(q, H, D)
        vh = split(v, Hkv, Dv, s=L)
        if kt == "one" and not rope and Hkv == H:
            kT = split(k, Hkv, D, perm=(0, 2, 3, 1), s=L)
            kh = None
        else:
            kh = split(k, Hkv, D, s=L)
    else:
        qh = g.input("q", g.onnx_dtype, [B, H, S, D])
        kh = g.input("k", g.onnx_dtype, [B, Hkv, L, D])
        vh = g.input("v", g.onnx_dtype, [B, Hkv, L, Dv])
    if rope:
        qh, kh = _rope(g, qh, S, D), _rope(g, kh, L, D)
    if Hkv != H and repeat_kv:
        kh, vh = _repeat_kv(g, kh, B, Hkv, H // Hkv, L, D), _repeat_kv(g, vh, B, Hkv, H // Hkv, L, Dv)
    if kh is not None:
        kT = g.node("Transpose", [kh], perm=[0, 1, 3, 2])

    sc = scale_value if scale_value is not None else 1.0 / math.sqrt(D)
    if scale == "sqrt_split":
        qh = g.node("Mul", [qh, g.const(math.sqrt(sc))])
        kT = g.node("Mul", [kT, g.const(math.sqrt(sc))])
    elif scale == "q":
        qh = g.node("Mul", [qh, g.const(sc)])
    s = g.node("MatMul", [qh, kT])
    if scale == "div":
        s = g.node("Div", [s, g.const(1.0 / sc)])
    elif scale == "mul":
        s = g.node("Mul", [s, g.const(sc)])
    elif scale == "input":
        s = g.node("Mul", [s, g.input("s", g.onnx_dtype, [])])
    elif scale == "tensor":
        s = g.node("Mul", [s, g.tensor("head_scale", np.full((1, H, 1, 1), sc, dtype=f))])
    if softcap:
        t = g.node("Tanh", [g.node("Div", [s, g.const(softcap)])])
        s = g.node("Mul", [t, g.const(softcap)])
    scores = s
    s = _mask(g, s, mask, B, S, L, mask_fill, mask_shape)
    if scale == "after_mask":
        s = g.node("Div", [s, g.const(1.0 / sc)])
    if softmax_cast:
        s = g.node("Cast", [s], to=TensorProto.FLOAT)
    p = g.node("Softmax", [s], axis=softmax_axis)
    if softmax_cast:
        p = g.node("Cast", [p], to=g.onnx_dtype)
    probs = p
    if dropout == "eval":
        p = g.node("Dropout", [p, g.const(0.1)])
    elif dropout == "train":
        p = g.node("Dropout", [p, g.const(0.1), g.const(True, np.bool_)])
    elif dropout == "runtime":
        p = g.node("Dropout", [p, g.const(0.1), g.input("training", TensorProto.BOOL, [])])
    ctx = g.node("MatMul", [p, vh])
    if merge:
        t = g.node("Transpose", [ctx], perm=[0, 2, 1, 3])
        ctx = g.node("Reshape", [t, g.ints([B, S, H * Dv])])
    y = _rename(g, ctx, "y")
    extra = {"probs": [probs], "scores": [scores]}.get(expose, [])
    return _finish(g, y, opset, extra_outputs=extra)


def _rope(g: GraphBuilder, x: str, s: int, d: int) -> str:
    """x * cos + rotate_half(x) * sin with constant cos / sin [1, 1, S, D] (HF Llama)."""
    inv = 1.0 / (10000 ** (np.arange(0, d, 2) / d))
    ang = np.outer(np.arange(s), inv)
    emb = np.concatenate([ang, ang], axis=-1)[None, None]
    cos = g.tensor("rope.cos", np.cos(emb).astype(g.dtype))
    sin = g.tensor("rope.sin", np.sin(emb).astype(g.dtype))
    x1 = g.node("Slice", [x, g.ints([0]), g.ints([d // 2]), g.ints([3])])
    x2 = g.node("Slice", [x, g.ints([d // 2]), g.ints([d]), g.ints([3])])
    rot = g.node("Concat", [g.node("Neg", [x2]), x1], axis=-1)
    return g.node("Add", [g.node("Mul", [x, cos]), g.node("Mul", [rot, sin])])


def _repeat_kv(g: GraphBuilder, x: str, b: int, kv: int, rep: int, s: int, d: int) -> str:
    """HF repeat_kv: x[:, :, None].expand(b, kv, rep, s, d).reshape(b, kv * rep, s, d)."""
    u = g.node("Unsqueeze", [x, g.ints([2])])
    e = g.node("Expand", [u, g.ints([b, kv, rep, s, d])])
    return g.node("Reshape", [e, g.ints([b, kv * rep, s, d])])


def _mask(g: GraphBuilder, s: str, mask, B, S, L, fill, mask_shape) -> str:
    f = g.dtype
    if mask is None:
        return s
    if mask in ("padding", "causal_and_padding"):
        if mask == "causal_and_padding":
            s = _mask(g, s, "causal_where", B, S, L, fill, None)
        m = g.input("attention_mask", TensorProto.INT64, [B, L])
        m = g.node("Cast", [g.node("Unsqueeze", [m, g.ints([1, 2])])], to=g.onnx_dtype)
        add = g.node("Mul", [g.node("Sub", [g.const(1.0), m]), g.const(-10000.0)])
        return g.node("Add", [s, add])
    if mask in ("causal_where", "masked_fill", "bottom_right"):
        tril = np.tril(np.ones((S, L), dtype=bool), k=(L - S) if mask == "bottom_right" else 0)[None, None]
        if mask == "masked_fill":
            cond = g.tensor("causal_mask", ~tril)
            return g.node("Where", [cond, g.const(fill), s])
        return g.node("Where", [g.tensor("causal_mask", tril), s, g.const(fill)])
    if mask == "causal_add":
        tri = np.where(np.tril(np.ones((S, L), dtype=bool)), 0.0, fill).astype(f)[None, None]
        return g.node("Add", [s, g.tensor("causal_mask", tri)])
    shape = list(mask_shape or [B, 1, S, L])
    if mask == "bool_input":
        return g.node("Where", [g.input("mask", TensorProto.BOOL, shape), s, g.const(fill)])
    if mask == "sdpa_bool":
        m = g.input("mask", TensorProto.BOOL, shape)
        return g.node("Add", [s, g.node("Where", [m, g.const(0.0), g.const(-np.inf)])])
    if mask == "additive_input":
        return g.node("Add", [s, g.input("mask", g.onnx_dtype, shape)])
    if mask == "bool_and_additive":
        s = g.node("Where", [g.input("mask", TensorProto.BOOL, shape), s, g.const(fill)])
        return g.node("Add", [s, g.input("bias", g.onnx_dtype, [1, shape[1], S, L])])
    raise ValueError(f"unknown mask {mask!r}")


# ---------------------------------------------------------------------------
# timm-style fused projection: Linear -> Reshape [B, S, n, H, D] -> Transpose (2, 0, 3, 1, 4) -> slots
# ---------------------------------------------------------------------------
def packed(*, batch=2, seq=5, heads=4, head_dim=8, dtype="float32", opset=17, slots="qkv", unbind="gather",
           scale="q", dynamic=False, bias=True, merge="static", extra_use=None, seed=0) -> onnx.ModelProto:
    """One attention block of timm's Attention (qkv = Linear(x); reshape; permute; unbind) from the
    graph input x [B, S, H * D] (symbolic B and S with dynamic=True) to the merged y [B, S, H * D].

    slots: "qkv" (one Linear for all three) or "kv" (q = its own Linear split by Reshape + Transpose,
      k / v from a packed [B, S, 2 * H * D] Linear, as cross-attention blocks write it).
    unbind: "gather" (qkv[0], qkv[1], qkv[2] / torch.onnx Gather), "split" (unbind(0) as Split
      [1, 1, 1] + Squeeze, opset 13+ inputs), "split18" (Split num_outputs, opset 18+).
    scale: "q" (q * D^-0.5, timm), "sqrt_split" (SDPA: sqrt of the scale on q and on k^T), "div"
      (scores / sqrt(D)).
    merge: "static" (Reshape to [B, S, H * D]), "infer" (Reshape to [0, 0, -1]).
    extra_use: None, "qkv" (the 5-D transposed qkv is also a graph output), "k" (the k slot is).
    """
    g = GraphBuilder("packed_attention", dtype=dtype, seed=seed)
    B, S, H, D = batch, seq, heads, head_dim
    C = H * D
    bs = ["batch", "sequence"] if dynamic else [B, S]
    x = g.input("x", g.onnx_dtype, bs + [C])

    def linear(n_out, name):
        y = g.node("MatMul", [x, g.weight(f"{name}.weight", (C, n_out), std=1.0 / math.sqrt(C))])
        return g.node("Add", [y, g.weight(f"{name}.bias", (n_out,), std=0.1)]) if bias else y

    n = 3 if slots == "qkv" else 2
    lead = [0, 0] if dynamic else [B, S]
    qkv = g.node("Transpose", [g.node("Reshape", [linear(n * C, "qkv" if n == 3 else "kv"),
                                                  g.ints(lead + [n, H, D])])], perm=[2, 0, 3, 1, 4])
    if unbind == "gather":
        parts = [g.node("Gather", [qkv, g.const(j, np.int64)], axis=0) for j in range(n)]
    elif unbind in ("split", "split18"):
        if unbind == "split18":
            sp = g.node("Split", [qkv], outputs=n, axis=0, num_outputs=n)
        else:
            sp = g.node("Split", [qkv, g.ints([1] * n)], outputs=n, axis=0)
        parts = [g.node("Squeeze", [p, g.ints([0])]) for p in sp]
    else:
        raise ValueError(f"unknown unbind {unbind!r}")
    if n == 3:
        q, k, v = parts
    else:
        k, v = parts
        q = g.node("Transpose", [g.node("Reshape", [linear(C, "q"), g.ints(lead + [H, D])])], perm=[0, 2, 1, 3])
    kT = g.node("Transpose", [k], perm=[0, 1, 3, 2])
    sc = D ** -0.5
    if scale == "q":
        q = g.node("Mul", [q, g.const(sc)])
    elif scale == "sqrt_split":
        q = g.node("Mul", [q, g.const(math.sqrt(sc))])
        kT = g.node("Mul", [kT, g.const(math.sqrt(sc))])
    s = g.node("MatMul", [q, kT])
    if scale == "div":
        s = g.node("Div", [s, g.const(math.sqrt(D))])
    ctx = g.node("Transpose", [g.node("MatMul", [g.node("Softmax", [s], axis=-1), v])], perm=[0, 2, 1, 3])
    y = _rename(g, g.node("Reshape", [ctx, g.ints(lead + [C] if merge == "static" else [0, 0, -1])]), "y")
    extra = {"qkv": [qkv], "k": [k]}.get(extra_use, [])
    return _finish(g, y, opset, extra_outputs=extra)


# ---------------------------------------------------------------------------
# the ONNX Attention op (opset 23+) and com.microsoft MultiHeadAttention
# ---------------------------------------------------------------------------
def onnx_attention(*, batch=2, seq=5, heads=4, kv_heads=None, head_dim=8, layout="3d", dtype="float32",
                   opset=23, mask=None, past=0, outputs=1, attrs=None, nonpad=False) -> onnx.ModelProto:
    """One ONNX Attention node. mask: None, "bool" [B, 1, S, S+past] or "additive" [1, 1, S, S+past].
    past > 0: past_key / past_value inputs; outputs: 1, 3 (present) or 4 (qk_matmul_output)."""
    g = GraphBuilder("onnx_attention", dtype=dtype)
    B, S, H, D = batch, seq, heads, head_dim
    Hkv = kv_heads or H
    a = dict(attrs or {})
    if layout == "3d":
        ins = [g.input("q", g.onnx_dtype, [B, S, H * D]), g.input("k", g.onnx_dtype, [B, S, Hkv * D]),
               g.input("v", g.onnx_dtype, [B, S, Hkv * D])]
        a.setdefault("q_num_heads", H)
        a.setdefault("kv_num_heads", Hkv)
    else:
        ins = [g.input("q", g.onnx_dtype, [B, H, S, D]), g.input("k", g.onnx_dtype, [B, Hkv, S, D]),
               g.input("v", g.onnx_dtype, [B, Hkv, S, D])]
    total = S + past
    if mask == "bool":
        ins.append(g.input("mask", TensorProto.BOOL, [B, 1, S, total]))
    elif mask == "additive":
        ins.append(g.input("mask", g.onnx_dtype, [1, 1, S, total]))
    elif past or nonpad:
        ins.append("")
    if past:
        ins += [g.input("past_key", g.onnx_dtype, [B, Hkv, past, D]),
                g.input("past_value", g.onnx_dtype, [B, Hkv, past, D])]
    elif nonpad:
        ins += ["", ""]
    if nonpad:
        ins.append(g.input("nonpad_kv_seqlen", TensorProto.INT64, [B]))
    outs = ["y", "present_key", "present_value", "qk"][:outputs]
    g.node("Attention", ins, outputs=outs, **a)
    y_shape = [B, S, H * D] if layout == "3d" else [B, H, S, D]
    shapes = [y_shape, [B, Hkv, total, D], [B, Hkv, total, D], [B, H, S, total]]
    for o, shape in zip(outs, shapes):
        g.outputs.append(helper.make_tensor_value_info(o, g.onnx_dtype, shape))
    return g.model(opset)


def mha(*, batch=2, seq=5, kv_seq=None, heads=4, head_dim=8, dtype="float32", bias=False, key_padding_mask=None,
        attention_bias=False, past=0, unidirectional=0, scale=None, mask_filter_value=None, outputs=1,
        packed=None, kv_layout="3d") -> onnx.ModelProto:
    """One com.microsoft MultiHeadAttention node.

    key_padding_mask: None, "2d" [B, L] int32, "3d" [B, S, L] int32, "lengths" [B] int32.
    packed: None, "qkv" (query [B, S, N, 3, D]) or "kv" (key [B, L, N, 2, D]).
    kv_layout: "3d" or "bnsh" (key / value [B, N, L, D]).
    """
    g = GraphBuilder("mha", dtype=dtype)
    B, S, N, D = batch, seq, heads, head_dim
    L = kv_seq or seq
    if packed == "qkv":
        ins = [g.input("query", g.onnx_dtype, [B, S, N, 3, D]), "", ""]
    elif packed == "kv":
        ins = [g.input("query", g.onnx_dtype, [B, S, N * D]), g.input("key", g.onnx_dtype, [B, L, N, 2, D]), ""]
    elif kv_layout == "bnsh":
        ins = [g.input("query", g.onnx_dtype, [B, S, N * D]), g.input("key", g.onnx_dtype, [B, N, L, D]),
               g.input("value", g.onnx_dtype, [B, N, L, D])]
    else:
        ins = [g.input("query", g.onnx_dtype, [B, S, N * D]), g.input("key", g.onnx_dtype, [B, L, N * D]),
               g.input("value", g.onnx_dtype, [B, L, N * D])]
    ins.append(g.weight("bias", (3 * N * D,), std=0.5) if bias else "")
    total = L + past
    kpm = {"2d": [B, total], "3d": [B, S, total], "lengths": [B]}.get(key_padding_mask)
    ins.append(g.input("key_padding_mask", TensorProto.INT32, kpm) if kpm else "")
    ins.append(g.input("attention_bias", g.onnx_dtype, [1, N, S, total]) if attention_bias else "")
    if past:
        ins += [g.input("past_key", g.onnx_dtype, [B, N, past, D]),
                g.input("past_value", g.onnx_dtype, [B, N, past, D])]
    while ins and ins[-1] == "":
        ins.pop()
    attrs = {"num_heads": N}
    if unidirectional:
        attrs["unidirectional"] = unidirectional
    if scale is not None:
        attrs["scale"] = scale
    if mask_filter_value is not None:
        attrs["mask_filter_value"] = mask_filter_value
    outs = ["y", "present_key", "present_value", "qk"][:outputs]
    g.node("MultiHeadAttention", ins, outputs=outs, domain="com.microsoft", **attrs)
    shapes = [[B, S, N * D], [B, N, total, D], [B, N, total, D], [B, N, S, total]]
    for o, shape in zip(outs, shapes):
        g.outputs.append(helper.make_tensor_value_info(o, g.onnx_dtype, shape))
    model = g.model(17, extra_opsets=[("com.microsoft", 1)])
    model.ir_version = ir_version_for(model.opset_import)
    return model
