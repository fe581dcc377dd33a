"""com.microsoft MultiHeadAttention (ONNX Runtime contrib op) -> trt_fastops.Attention.

Mapped (3-D form, q_num_heads = kv_num_heads = num_heads):
  query [B, S, D], key [B, L, D], value [B, L, Dv]   -> Q, K, V
  bias [D + D + Dv]                                  -> Slice + Add on Q, K and V
  key_padding_mask [B, T] or [B, S, T] (int32)       -> additive attn_mask
                                                        Where(mask > 0, 0, mask_filter_value)
                                                        as [B, 1, 1, T] / [B, 1, S, T]
  attention_bias [B|1, N|1, S, T]                    -> additive attn_mask (added to the above)
  past_key / past_value [B, N, P, H]                 -> past_key / past_value (same layout)
  present_key / present_value                        -> present_key / present_value
  unidirectional=1                                   -> is_causal=1 (with past: offset P, as ORT)
  scale (0 = 1/sqrt(head size))                      -> scale

Refused, with the reason: packed QKV (query [B, S, N, 3, H]) and packed KV (key
[B, L, N, 2, H]); key / value given as [B, N, L, H] without a 3-D query layout we can
express; key_padding_mask as key lengths [B] or [3B + 2]; past_sequence_length /
cache_indirection (buffer sharing, beam search); the qk output in use; unidirectional
without past when S != L (ORT aligns that mask differently); shapes the checks need
that are unknown.
"""
from __future__ import annotations

import numpy as np
import onnx_ir as ir
from onnxscript.rewriter._basics import MatchResult

from ._common import NormRule, Refuse, _recorder, describe, dtype_name, fmt_shape, require_float_dtype, same_dim, shape_of
from .attention import select_outputs

RULE = "attention_mha"
OP = "Attention"
MS_DOMAIN = "com.microsoft"

Q, K, V, BIAS, KPM, ATTN_BIAS, PAST_K, PAST_V, PAST_LEN, CACHE_IND = range(10)


def _input(node: ir.Node, i: int) -> ir.Value | None:
    return node.inputs[i] if len(node.inputs) > i else None


class MultiHeadAttentionToAttention(NormRule):
    RULE = RULE
    OP = OP

    def __init__(self, num_outputs: int) -> None:
        super().__init__(f"{num_outputs}_outputs", size=num_outputs)
        self.num_outputs = num_outputs

    def pattern(self, op, query):
        names = ["y", "present_key", "present_value", "qk"][: self.num_outputs]
        return op.MultiHeadAttention(query, _allow_other_inputs=True, _domain=MS_DOMAIN, _outputs=names)

    def check(self, context, query: ir.Value, y: ir.Value, **_) -> MatchResult:
        node = y.producer()
        select_outputs(node, self.num_outputs, "qk")
        key, value = _input(node, K), _input(node, V)
        n = node.attributes.get_int("num_heads", 0)
        if n <= 0:
            raise Refuse(f"{describe(node)} has num_heads={n}", node)
        dt = require_float_dtype(query, "query")
        sq = shape_of(query)
        if sq is None:
            raise Refuse(f"the rank of query {describe(query)} is unknown", query)
        if key is None:
            raise Refuse(f"{describe(node)} has packed QKV (query {fmt_shape(sq)}, no key); trt_fastops.Attention "
                         "takes separate Q, K and V", node)
        if value is None:
            raise Refuse(f"{describe(node)} has packed KV (key {fmt_shape(shape_of(key))}, no value); "
                         "trt_fastops.Attention takes separate K and V", node)
        for i, what in ((PAST_LEN, "past_sequence_length (buffer sharing)"),
                        (CACHE_IND, "cache_indirection (beam search)")):
            if _input(node, i) is not None:
                raise Refuse(f"{describe(node)} has the {what} input; trt_fastops.Attention does not take it", node)
        sk, sv = shape_of(key), shape_of(value)
        if len(sq) != 3:
            raise Refuse(f"query {describe(query)} has shape {fmt_shape(sq)}, expected [B, S, D]", query)
        if sk is None or sv is None or len(sk) != 3 or len(sv) != 3:
            raise Refuse(f"key / value have shapes {fmt_shape(sk)} / {fmt_shape(sv)}; only the 3-D [B, L, D] form "
                         "is mapped (not [B, N, L, H] key / value)", node)
        for val, what in ((key, "key"), (value, "value"), (_input(node, PAST_K), "past_key"),
                          (_input(node, PAST_V), "past_value"), (_input(node, BIAS), "bias"),
                          (_input(node, ATTN_BIAS), "attention_bias")):
            if val is not None and val.dtype is not None and val.dtype != dt:
                raise Refuse(f"{what} {describe(val)} is {dtype_name(val.dtype)}, expected {dtype_name(dt)} "
                             "(the dtype of query)", val)
        has_past = [_input(node, i) is not None for i in (PAST_K, PAST_V)]
        if has_past[0] != has_past[1]:
            raise Refuse(f"{describe(node)} has only one of past_key / past_value", node)
        bias = _input(node, BIAS)
        if bias is not None:
            sb = shape_of(bias)
            dims = [sq[2], sk[2], sv[2]]
            if sb is None or len(sb) != 1 or not all(isinstance(d, int) for d in dims + list(sb)) \
                    or sb[0] != sum(dims):
                raise Refuse(f"bias {describe(bias)} has shape {fmt_shape(sb)}; expected [D + D + Dv] with "
                             f"static hidden sizes (query / key / value {dims})", bias)
        kpm = _input(node, KPM)
        if kpm is not None:
            sm = shape_of(kpm)
            if sm is None or len(sm) not in (2, 3):
                raise Refuse(f"key_padding_mask {describe(kpm)} has shape {fmt_shape(sm)}; only [B, T] and "
                             "[B, S, T] masks are mapped (not key lengths [B] or [3B + 2])", kpm)
            if kpm.dtype is not None and kpm.dtype != ir.DataType.INT32:
                raise Refuse(f"key_padding_mask {describe(kpm)} is {dtype_name(kpm.dtype)}, expected int32", kpm)
        if node.attributes.get_int("unidirectional", 0) and not has_past[0] and not same_dim(sq[1], sk[1]):
            raise Refuse(f"{describe(node)} is unidirectional with query length {sq[1]} and key length {sk[1]} "
                         "not provably equal and no past; ONNX Runtime aligns that mask differently", node)
        return MatchResult()

    def _std(self, op, op_type: str, inputs, **attrs):
        base = (self._context.root.name or "mha") if self._context else "mha"
        name = _recorder().unique_name(f"{base}/{op_type}")
        return op.op(op_type, *inputs, _domain="", _name=name, **attrs)

    def _const(self, op, arr: np.ndarray):
        return op.Constant(value=ir.tensor(arr))

    def rewrite(self, op, query: ir.Value, y: ir.Value, **_):
        node = y.producer()
        dt = query.dtype
        q, k, v = query, _input(node, K), _input(node, V)
        bias = _input(node, BIAS)
        if bias is not None:
            d = [shape_of(q)[2], shape_of(k)[2], shape_of(v)[2]]
            starts = [0, d[0], d[0] + d[1]]
            outs = []
            for x, s0, width in zip((q, k, v), starts, d):
                part = self._std(op, "Slice", [bias, self._const(op, np.array([s0], np.int64)),
                                               self._const(op, np.array([s0 + width], np.int64))])
                outs.append(self._std(op, "Add", [x, part]))
            q, k, v = outs
        mask = None
        kpm = _input(node, KPM)
        if kpm is not None:
            fill = node.attributes.get_float("mask_filter_value", -10000.0)
            keep = self._std(op, "Greater", [kpm, self._const(op, np.array(0, np.int32))])
            add = self._std(op, "Where", [keep, self._const(op, np.array(0, dt.numpy())),
                                          self._const(op, np.array(fill, dt.numpy()))])
            axes = [1, 2] if len(shape_of(kpm)) == 2 else [1]
            mask = self._std(op, "Unsqueeze", [add, self._const(op, np.array(axes, np.int64))])
        attn_bias = _input(node, ATTN_BIAS)
        if attn_bias is not None:
            mask = attn_bias if mask is None else self._std(op, "Add", [mask, attn_bias])
        n = node.attributes.get_int("num_heads")
        attrs = {"q_num_heads": n, "kv_num_heads": n}
        if node.attributes.get_int("unidirectional", 0):
            attrs["is_causal"] = 1
        scale = node.attributes.get_float("scale", 0.0)
        if scale:
            attrs["scale"] = scale
        inputs = [q, k, v, mask, _input(node, PAST_K), _input(node, PAST_V)]
        self.note(form="3d")
        return self.emit(op, OP, inputs, min(self.num_outputs, 3), **attrs)


def rules():
    return [MultiHeadAttentionToAttention.rule(n) for n in (4, 3, 2, 1)]
