"""ONNX Attention (opset 23 / 24 / 25) -> trt_fastops.Attention.

Same inputs (Q, K, V, attn_mask?, past_key?, past_value?), outputs (Y,
present_key?, present_value?) and attributes (is_causal, q_num_heads,
kv_num_heads, scale, softcap, softmax_precision): the op is ONNX Attention-23
(plugins/attention/attention_op.h).

check: Q float32 / float16 / bfloat16 with K, V, past and a float mask of the
same dtype, a bool mask otherwise; ranks 3 or 4. Refused, with the reason:
the qk_matmul_output output in use (our op does not produce it), the
nonpad_kv_seqlen input (opset 24 external KV cache), sliding-window attributes
(left/right_window_size of opset 25) other than -1, softmax_precision double,
attributes the op does not know, present outputs without past inputs where
the pattern cannot return them.
"""
from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter._basics import MatchResult

from ._common import NormRule, NotMine, Refuse, describe, dtype_name, rank_of, require_float_dtype

RULE = "attention"
OP = "Attention"

#: attributes copied as they are (the op has the same names and meanings)
COPIED_INT = ("is_causal", "q_num_heads", "kv_num_heads", "softmax_precision")
COPIED_FLOAT = ("scale", "softcap")
#: opset 25 sliding windows: -1 (the default) means none, which is all we take
WINDOW_ATTRS = ("left_window_size", "right_window_size")
KNOWN_ATTRS = set(COPIED_INT) | set(COPIED_FLOAT) | set(WINDOW_ATTRS) | {"qk_matmul_output_mode"}
#: softmax_precision values our float32 softmax satisfies (float, float16, bfloat16)
SOFTMAX_PRECISIONS = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


def _used(v: ir.Value | None) -> bool:
    return v is not None and (bool(v.uses()) or v.is_graph_output())


def select_outputs(node: ir.Node, num_outputs: int, qk_name: str) -> None:
    """One pattern per node (outputs Y, present_key, present_value, qk): the one whose outputs
    cover every used output; the smaller ones would leave it dangling, the larger ones bind
    unused outputs. Raises NotMine for the others and Refuse for a used qk output."""
    outs = list(node.outputs)
    used = [_used(o) for o in outs] + [False] * (4 - len(outs))
    if used[3]:
        if num_outputs != 4:
            raise NotMine(f"{qk_name} is used; the 4-output pattern refuses it")
        raise Refuse(f"{describe(node)} output {qk_name} is used; trt_fastops.Attention does not produce it", node)
    if len(outs) == 2 and used[1]:
        if num_outputs != 2:
            raise NotMine("present_key alone: the 2-output pattern refuses it")
        raise Refuse(f"{describe(node)} has present_key without present_value; ONNX requires both", node)
    if num_outputs != (3 if used[1] or used[2] else 1):
        raise NotMine("another pattern covers the used outputs of this node")


class OnnxAttentionToAttention(NormRule):
    RULE = RULE
    OP = OP

    def __init__(self, num_outputs: int) -> None:
        super().__init__(f"{num_outputs}_outputs", size=num_outputs)
        self.num_outputs = num_outputs

    def pattern(self, op, q, k, v):
        names = ["y", "present_key", "present_value", "qk_matmul_output"][: self.num_outputs]
        return op.Attention(q, k, v, _allow_other_inputs=True, _outputs=names)

    def check(self, context, q: ir.Value, k: ir.Value, v: ir.Value, y: ir.Value, **_) -> MatchResult:
        result = MatchResult()
        node = y.producer()
        select_outputs(node, self.num_outputs, "qk_matmul_output")
        inputs = list(node.inputs)
        if len(inputs) > 6 and inputs[6] is not None:
            raise Refuse(f"{describe(node)} has the nonpad_kv_seqlen input (an external KV cache with "
                         "per-batch valid lengths); trt_fastops.Attention does not take it", node)
        unknown = sorted(set(node.attributes) - KNOWN_ATTRS)
        if unknown:
            raise Refuse(f"{describe(node)} has attribute(s) {', '.join(unknown)} that trt_fastops.Attention "
                         "does not know", node)
        for name in WINDOW_ATTRS:
            w = node.attributes.get_int(name, -1)
            if w != -1:
                raise Refuse(f"{describe(node)} has {name}={w} (sliding-window attention); "
                             "trt_fastops.Attention takes no window", node)
        if "softmax_precision" in node.attributes:
            prec = node.attributes.get_int("softmax_precision")
            if prec not in SOFTMAX_PRECISIONS:
                try:
                    name = dtype_name(ir.DataType(prec))
                except ValueError:
                    name = str(prec)
                raise Refuse(f"{describe(node)} asks for softmax_precision={prec} ({name}); trt_fastops.Attention "
                             "computes the softmax in float32", node)
        dt = require_float_dtype(q, "Q")
        for value, what in ((k, "K"), (v, "V")) + tuple(
                (inputs[i], n) for i, n in ((4, "past_key"), (5, "past_value")) if len(inputs) > i):
            if value is not None and value.dtype is not None and value.dtype != dt:
                raise Refuse(f"{what} {describe(value)} is {dtype_name(value.dtype)}, expected "
                             f"{dtype_name(dt)} (the dtype of Q)", value)
        mask = inputs[3] if len(inputs) > 3 else None
        if mask is not None and mask.dtype is not None and mask.dtype not in (dt, ir.DataType.BOOL):
            raise Refuse(f"attn_mask {describe(mask)} is {dtype_name(mask.dtype)}, expected bool or "
                         f"{dtype_name(dt)} (the dtype of Q)", mask)
        has_past = [len(inputs) > i and inputs[i] is not None for i in (4, 5)]
        if has_past[0] != has_past[1]:
            raise Refuse(f"{describe(node)} has only one of past_key / past_value; ONNX requires both", node)
        rank = rank_of(q, "Q")
        if rank not in (3, 4):
            raise Refuse(f"Q {describe(q)} has rank {rank}; Attention takes 3-D or 4-D inputs", q)
        return result

    def rewrite(self, op, q: ir.Value, k: ir.Value, v: ir.Value, y: ir.Value, **_):
        node = y.producer()
        inputs = list(node.inputs)[:6]
        attrs = {}
        for name in COPIED_INT:
            if name in node.attributes:
                attrs[name] = node.attributes.get_int(name)
        for name in COPIED_FLOAT:
            if name in node.attributes:
                attrs[name] = node.attributes.get_float(name)
        return self.emit(op, OP, inputs, self.num_outputs, **attrs)


def rules():
    # Most outputs first: a node whose present outputs are used must match a pattern that
    # returns them; the 4-output pattern only exists to refuse a used qk_matmul_output.
    return [OnnxAttentionToAttention.rule(n) for n in (4, 3, 2, 1)]
