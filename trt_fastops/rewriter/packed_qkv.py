"""Q, K and V projected from one input by three MatMuls -> one MatMul and Attention(packed_qkv=1).

Only with target="ort": the TensorRT plugin takes packed_qkv too, but TensorRT merges GEMMs that
share an input by itself, and the Dense the packed bias becomes has no plugin. BERT / ViT / GPT-style exports compute Q = X Wq + bq, K = X Wk + bk,
V = X Wv + bv as three MatMul + Add pairs; on the GPU that is three GEMMs of N = hidden where one
of N = 3 * hidden fills the device better, and three bias passes where one does. The packed
output [B, S, (Hq + 2 Hkv) D] goes straight to trt_fastops.Attention, which reads Q, K and V as
strided views of it (no Split copies); the bias Add that is left becomes Dense (dense.py).

pattern: trt_fastops.Attention(Add(MatMul(x, wq), bq), Add(MatMul(x, wk), bk),
Add(MatMul(x, wv), bv) [, attn_mask]), each Add in either order; or the same with bare MatMuls.
Second form (GPT-2's c_attn, timm's qkv): Attention(Split(qkv, axis=-1) [, attn_mask]) of one
projection already packed: the Split's three copies go, Attention reads qkv.

check: the Attention's 3-D form (rank-3 Q, q_num_heads and kv_num_heads given), no past
inputs, only Y in use, not packed already; wq, wk, wv constant 2-D [hidden, Hq D] / [hidden, Hkv D]
/ [hidden, Hkv D] of Q's dtype (V's head dim equal to Q's); biases constant 1-D of matching
lengths; the projections used by this Attention only.

rewrite: W = concat(wq, wk, wv, axis=1) and b = concat(bq, bk, bv) (new initializers),
Add(MatMul(x, W), b) -> Attention(qkv, -, -, attn_mask, packed_qkv=1, the other attributes kept).
"""
from __future__ import annotations

import numpy as np
import onnx_ir as ir
from onnxscript.rewriter._basics import MatchResult

from ._common import DOMAIN, NormRule, Refuse, const_array, describe, dtype_name, either, shape_of

RULE = "packed_qkv"
OP = "Attention"
NAMES = ("Q", "K", "V")


def check_attention(node: ir.Node, mask: bool) -> tuple[int, int]:
    """The Attention node takes packed_qkv: (q_num_heads, kv_num_heads); Refuse otherwise."""
    if len(node.inputs) > (4 if mask else 3):
        raise Refuse(f"{describe(node)} has past_key / past_value inputs; packed_qkv takes none", node)
    for out in node.outputs[1:]:
        if out.uses() or out.is_graph_output():
            raise Refuse(f"{describe(node)} output {describe(out)} is in use; packed_qkv gives Y only", node)
    if node.attributes.get_int("packed_qkv", 0):
        raise Refuse(f"{describe(node)} is packed already", node)
    hq, hkv = node.attributes.get_int("q_num_heads", 0), node.attributes.get_int("kv_num_heads", 0)
    if hq <= 0 or hkv <= 0:
        raise Refuse(f"{describe(node)} is the 4-D form (no q_num_heads / kv_num_heads); packed_qkv needs "
                     "the 3-D form [B, S, H * D]", node)
    return hq, hkv


def packed_attrs(node: ir.Node) -> dict:
    attrs = {name: attr.value for name, attr in node.attributes.items()}
    attrs["packed_qkv"] = 1
    return attrs


class PackedQKV(NormRule):
    RULE = RULE
    OP = OP
    STAGE = 3  # after every Attention rule (they make the node this rule starts from)
    ORT_ONLY = True

    def __init__(self, bias: bool, mask: bool) -> None:
        super().__init__(f"{'bias' if bias else 'no_bias'}{'_mask' if mask else ''}",
                         size=(6 if bias else 3) + 1 + int(mask))
        self.bias, self.mask = bias, mask

    def _projection(self, op, x, w, b):
        mm = op.MatMul(x, w)
        return either(op, "Add", mm, b) if self.bias else mm

    def pattern(self, op, x, wq, wk, wv, bq, bk, bv, attn_mask):
        q = self._projection(op, x, wq, bq)
        k = self._projection(op, x, wk, bk)
        v = self._projection(op, x, wv, bv)
        inputs = (q, k, v, attn_mask) if self.mask else (q, k, v)
        return op.Attention(*inputs, _domain=DOMAIN, _outputs=["y"])

    def check(self, context, x: ir.Value, wq: ir.Value, wk: ir.Value, wv: ir.Value, y: ir.Value,
              bq: ir.Value | None = None, bk: ir.Value | None = None, bv: ir.Value | None = None,
              **_) -> MatchResult:
        node = y.producer()
        hq, hkv = check_attention(node, self.mask)
        xs = shape_of(x)
        if xs is None or len(xs) != 3:
            raise Refuse(f"the projections' input {describe(x)} has shape {xs}; packed_qkv needs 3-D [B, S, hidden]",
                         x)
        dt = x.dtype
        weights = []
        for w, name in zip((wq, wk, wv), NAMES):
            arr = const_array(w)
            if arr is None or arr.ndim != 2:
                raise Refuse(f"the {name} weight {describe(w)} is not a constant 2-D matrix", w)
            if w.dtype != dt:
                raise Refuse(f"the {name} weight {describe(w)} is {dtype_name(w.dtype)}, the input "
                             f"{dtype_name(dt)}", w)
            weights.append(arr)
        hidden = {a.shape[0] for a in weights}
        if len(hidden) != 1:
            raise Refuse(f"the Q / K / V weights have different input widths {[a.shape[0] for a in weights]}", wq)
        nq, nk, nv = (a.shape[1] for a in weights)
        if nq % hq:
            raise Refuse(f"the Q weight's width {nq} is not a multiple of q_num_heads={hq}", wq)
        d = nq // hq
        if nk != hkv * d or nv != hkv * d:
            raise Refuse(f"the K / V weights' widths ({nk}, {nv}) are not kv_num_heads * head_dim = {hkv} * {d} "
                         "(packed_qkv needs V's head dim equal to Q's)", wk)
        biases = []
        if self.bias:
            for b, w, name in zip((bq, bk, bv), weights, NAMES):
                arr = const_array(b)
                if arr is None or arr.ndim != 1 or arr.shape[0] != w.shape[1] or b.dtype != dt:
                    raise Refuse(f"the {name} bias {describe(b)} is not a constant 1-D {dtype_name(dt)} vector of "
                                 f"length {w.shape[1]}", b)
                biases.append(arr)
        self._w = np.concatenate(weights, axis=1)
        self._b = np.concatenate(biases) if biases else None
        self._attrs = packed_attrs(node)
        self._node = node
        self.note(heads=(hq, hkv), head_dim=d, bias=self.bias)
        return MatchResult()

    def rewrite(self, op, x: ir.Value, attn_mask: ir.Value | None = None, **_):
        base = self._node.name or "qkv"
        w = op.initializer(ir.tensor(self._w, name=f"{base}.qkv_weight"))
        qkv = op.MatMul(x, w)
        if self._b is not None:
            qkv = op.Add(qkv, op.initializer(ir.tensor(self._b, name=f"{base}.qkv_bias")))
        inputs = [qkv, None, None] + ([attn_mask] if self.mask else [])
        return self.emit(op, OP, inputs, 1, **self._attrs)


class SplitQKV(NormRule):
    """Attention(Split(qkv)) -> Attention(qkv, packed_qkv=1): the projection is packed already."""

    RULE = RULE
    OP = OP
    STAGE = 3
    ORT_ONLY = True

    def __init__(self, mask: bool) -> None:
        super().__init__(f"split{'_mask' if mask else ''}", size=2 + int(mask))
        self.mask = mask

    def pattern(self, op, qkv, attn_mask):
        q, k, v = op.Split(qkv, _allow_other_inputs=True, _outputs=["q", "k", "v"])
        inputs = (q, k, v, attn_mask) if self.mask else (q, k, v)
        return op.Attention(*inputs, _domain=DOMAIN, _outputs=["y"])

    def check(self, context, qkv: ir.Value, q: ir.Value, y: ir.Value, **_) -> MatchResult:
        node = y.producer()
        hq, hkv = check_attention(node, self.mask)
        split = q.producer()
        qs = shape_of(qkv)
        if qs is None or len(qs) != 3 or not isinstance(qs[-1], int):
            raise Refuse(f"the split input {describe(qkv)} has shape {qs}; packed_qkv needs 3-D [B, S, width] "
                         "with a known width", qkv)
        axis = split.attributes.get_int("axis", 0)
        if axis not in (-1, 2):
            raise Refuse(f"{describe(split)} splits axis {axis}, not the last", split)
        width = qs[-1]
        if width % (hq + 2 * hkv):
            raise Refuse(f"the packed width {width} is not a multiple of q_num_heads + 2 * kv_num_heads = "
                         f"{hq + 2 * hkv}", qkv)
        d = width // (hq + 2 * hkv)
        want = [hq * d, hkv * d, hkv * d]
        sizes = const_array(split.inputs[1]) if len(split.inputs) > 1 and split.inputs[1] is not None else None
        if sizes is None:
            if len(split.inputs) > 1 and split.inputs[1] is not None:
                raise Refuse(f"{describe(split)} takes its sizes from a computed value", split)
            sizes = [width // 3] * 3 if width % 3 == 0 else None  # opset 18 num_outputs: equal parts
        if sizes is None or [int(n) for n in sizes] != want:
            raise Refuse(f"{describe(split)} gives sizes {None if sizes is None else [int(n) for n in sizes]}, "
                         f"expected Q, K, V widths {want}", split)
        self._attrs = packed_attrs(node)
        self.note(heads=(hq, hkv), head_dim=d, bias=None)
        return MatchResult()

    def rewrite(self, op, qkv: ir.Value, attn_mask: ir.Value | None = None, **_):
        inputs = [qkv, None, None] + ([attn_mask] if self.mask else [])
        return self.emit(op, OP, inputs, 1, **self._attrs)


def rules():
    return ([PackedQKV.rule(bias, mask) for bias in (True, False) for mask in (True, False)]
            + [SplitQKV.rule(mask) for mask in (True, False)])
