"""ONNX Conv (+ a following activation) -> trt_fastops.Conv.

Same inputs (X, W, optional B) and attributes (kernel_shape, strides, dilations,
pads, auto_pad, group); an activation that follows the conv and is its only
consumer (Relu, SiLU as Sigmoid*Mul, Gelu, the erf form of GELU; see
conv_activation) is folded into the `activation` attribute. conv_transpose.py
does the same for ConvTranspose (also output_padding, output_shape).

Which convolutions are rewritten is a policy, `conv=` in rewrite():
  "off"       none (the default: the runtime's native convolution is usually
              cuDNN, and good);
  "all"       every conv our ops can take;
  "fallback"  only the convolutions cuDNN typically cannot run well, so that
              they get trt_fastops' own kernel. A conv is selected when the
              first of these holds (the report says which):
    1. 3-D with a dilation > 1 (cuDNN has few, slow engines for dilated 3-D);
    2. a grouped ConvTranspose with a dilation > 1;
    3. depthwise with a channel multiplier (C_in/group == 1, C_out/group > 1);
    4. grouped, not depthwise, with channels per group (in or out) that are not
       a multiple of 8 (no tensor-core engine; e.g. ShuffleNet, ResNeXt 32x4d);
    5. asymmetric padding after auto_pad / output_shape are resolved (cuDNN
       takes one pad per dim; runtimes pad the input in an extra pass).
  Anything else is left to the runtime and listed in the report as a refusal
  "policy fallback: cuDNN runs it well (...)". A rule that needs a shape that
  is unknown (symbolic) is skipped, and the reason says so.

ConvTranspose padding is written so that ONNX Runtime's CUDA EP keeps the node:
that EP moves every node whose op type is "ConvTranspose" (any domain) to the CPU
EP when its `pads` are asymmetric or its auto_pad is SAME_UPPER / SAME_LOWER
(ConvTransposeNeedFallbackToCPU reads only those two attributes). Such padding is
resolved here and written as symmetric `pads` plus our `output_crop` (the rest,
added to the pads: plugins/conv/conv_op.h), same output (see ort_cuda_padding).
SAME_* without output_shape never depends on X's size; SAME_UPPER with
output_shape does, and stays as it is (CPU EP on ORT) when X's spatial dims are
unknown or the kernel size is; the report says so (`padding` detail).

check (all policies): X is float32/float16/bfloat16 with a known rank of 3 to 5,
W and B have X's dtype, attributes are valid for the op (pads together with
auto_pad, an unknown auto_pad, group < 1 are refused: ONNX Runtime refuses them).
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, Sequence

import onnx_ir as ir
from onnxscript.rewriter._basics import MatchResult

from . import conv_activation as act
from ._common import NormRule, NotMine, _recorder, describe, rank_of, require_float_dtype, require_same_dtype, shape_of

RULE = "conv"
OP = "Conv"
POLICIES = ("off", "fallback", "all")

#: Attributes copied verbatim from the ONNX node (the op has the same ones).
CONV_ATTRS = ("kernel_shape", "strides", "dilations", "pads", "auto_pad", "group")
TRANSPOSE_ATTRS = CONV_ATTRS + ("output_padding", "output_shape")

_POLICY: contextvars.ContextVar[str] = contextvars.ContextVar("trt_fastops_conv_policy", default="all")


@contextlib.contextmanager
def policy(value: str) -> Iterator[None]:
    """The conv policy for the rules while the driver runs them."""
    if value not in POLICIES:
        raise ValueError(f"conv policy {value!r}; choose from {', '.join(POLICIES)}")
    token = _POLICY.set(value)
    try:
        yield
    finally:
        _POLICY.reset(token)


def current_policy() -> str:
    return _POLICY.get()


# ---------------------------------------------------------------------------
# the fallback rule
# ---------------------------------------------------------------------------
def _ints(node: ir.Node, name: str) -> list[int] | None:
    a = node.attributes.get(name)
    return list(a.as_ints()) if a is not None else None


def resolved_pads(node: ir.Node, x_shape: Sequence, w_shape: Sequence | None, transpose: bool):
    """(begin, end) pads per spatial dim as the op resolves them, or None where a shape
    they depend on is unknown."""
    sp = len(x_shape) - 2
    pads = _ints(node, "pads")
    auto_pad = node.attributes.get_string("auto_pad", "NOTSET") or "NOTSET"
    output_shape = _ints(node, "output_shape") if transpose else None
    if not output_shape and auto_pad in ("NOTSET", "VALID"):
        if auto_pad == "VALID" or not pads:
            return [(0, 0)] * sp
        return [(pads[i], pads[i + sp]) for i in range(sp)]
    strides = _ints(node, "strides") or [1] * sp
    dil = _ints(node, "dilations") or [1] * sp
    outp = (_ints(node, "output_padding") or [0] * sp) if transpose else [0] * sp
    kernel = list(w_shape[2:]) if w_shape is not None and len(w_shape) == sp + 2 else None
    if kernel is None or not all(isinstance(k, int) for k in kernel):
        kernel = _ints(node, "kernel_shape")
    out = []
    for i in range(sp):
        n = x_shape[2 + i]
        if not isinstance(n, int) or kernel is None:
            out.append(None)
            continue
        dk = dil[i] * (kernel[i] - 1) + 1
        if not transpose:
            o = -(-n // strides[i])
            total = max(0, (o - 1) * strides[i] + dk - n)
        else:
            natural = strides[i] * (n - 1) + outp[i] + dk
            if output_shape:
                total = max(0, natural - output_shape[-sp:][i])
            else:
                total = max(0, natural - n * strides[i])
        # SAME_UPPER puts the odd pad at the end; SAME_LOWER (and NOTSET with output_shape) at the beginning
        b = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        out.append((b, total - b))
    return out


def ort_cuda_padding(attrs: dict, x_shape: Sequence, w_shape: Sequence | None) -> tuple[dict, str | None]:
    """ConvTranspose attributes (as copied from the ONNX node) rewritten so that ONNX Runtime's
    CUDA EP does not send the node to the CPU EP: no asymmetric `pads`, no auto_pad SAME_*
    (module docstring). Returns (attributes, report note or None when nothing changed). The
    resolved pads, output_padding and so Y are exactly those of the original attributes."""
    sp = len(x_shape) - 2
    pads = list(attrs.get("pads") or [])
    auto_pad = attrs.get("auto_pad", "NOTSET") or "NOTSET"
    output_shape = list(attrs.get("output_shape") or [])
    same = auto_pad in ("SAME_UPPER", "SAME_LOWER")
    asymmetric = len(pads) == 2 * sp and pads[:sp] != pads[sp:]
    if not same and not asymmetric:
        return attrs, None
    cpu = "ONNX Runtime's CUDA EP runs this ConvTranspose on the CPU EP"
    out = {k: v for k, v in attrs.items() if k not in ("pads", "auto_pad")}
    if output_shape and auto_pad != "SAME_UPPER":
        # output_shape decides the pads (explicit ones are ignored) and puts the odd pad first
        # unless auto_pad is SAME_UPPER: NOTSET + output_shape resolves the same way.
        return out, f"{'asymmetric pads' if asymmetric else 'auto_pad ' + auto_pad} with output_shape dropped " \
                    "(output_shape decides the pads)"
    strides = list(attrs.get("strides") or [1] * sp)
    dil = list(attrs.get("dilations") or [1] * sp)
    outp = list(attrs.get("output_padding") or [0] * sp)
    if w_shape is not None and len(w_shape) == sp + 2 and all(isinstance(k, int) for k in w_shape[2:]):
        kernel = list(w_shape[2:])
    else:
        kernel = list(attrs.get("kernel_shape") or [])
    if same and len(kernel) != sp:
        return attrs, f"auto_pad {auto_pad} kept (kernel size unknown): {cpu}"
    if output_shape and not all(isinstance(n, int) for n in x_shape[2:]):
        return attrs, f"auto_pad SAME_UPPER with output_shape kept (spatial dims of X unknown): {cpu}"
    resolved, extra = [], [0] * sp
    for i in range(sp):
        if not same:
            resolved.append((pads[i], pads[i + sp]))
            continue
        dk = dil[i] * (kernel[i] - 1) + 1
        if output_shape:  # total = natural - output_shape; beyond the natural size: output_padding
            total = strides[i] * (x_shape[2 + i] - 1) + outp[i] + dk - output_shape[-sp:][i]
            extra[i] = max(0, -total)
        else:  # out = in * stride: total = natural - in * stride, whatever in is
            total = outp[i] + dk - strides[i]
        total = max(0, total)
        begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        resolved.append((begin, total - begin))
    out.pop("output_shape", None)
    if any(extra):
        out["output_padding"] = [o + e for o, e in zip(outp, extra)]
    sym = [min(b, e) for b, e in resolved]
    crop = [b - m for (b, _), m in zip(resolved, sym)] + [e - m for (_, e), m in zip(resolved, sym)]
    if any(sym):
        out["pads"] = sym + sym
    if any(crop):
        out["output_crop"] = crop
    flat = [b for b, _ in resolved] + [e for _, e in resolved]
    source = f"auto_pad {auto_pad}{' with output_shape' if output_shape else ''}" if same else "asymmetric pads"
    return out, (f"{source} (pads {flat}) written as pads {sym + sym}"
                 + (f" + output_crop {crop}" if any(crop) else "")
                 + (f", output_padding {out['output_padding']}" if any(extra) else "")
                 + " (ONNX Runtime's CUDA EP sends ConvTranspose with asymmetric pads or auto_pad SAME_* to the CPU EP)")


def fallback_decision(node: ir.Node, x_shape: Sequence, w_shape: Sequence | None, transpose: bool) -> tuple[bool, str]:
    """(selected, reason) of the conv="fallback" rule for one node (see the module docstring)."""
    sp = len(x_shape) - 2
    group = node.attributes.get_int("group", 1)
    dil = _ints(node, "dilations") or [1] * sp
    unknown = []
    if sp == 3 and any(d > 1 for d in dil):
        return True, f"3-D with dilations {dil}"
    if transpose and group > 1 and any(d > 1 for d in dil):
        return True, f"grouped ConvTranspose (group {group}) with dilations {dil}"
    c_in = x_shape[1] if isinstance(x_shape[1], int) else None
    c_out = None
    if w_shape is not None and len(w_shape) == sp + 2:
        if not transpose and isinstance(w_shape[0], int):
            c_out = w_shape[0]
        elif transpose and isinstance(w_shape[1], int):
            c_out = w_shape[1] * group
    if group > 1:
        if c_in is None or c_out is None:
            unknown.append("channel counts")
        else:
            cin_g, cout_g = c_in // group, c_out // group
            if cin_g == 1 and cout_g > 1:
                return True, f"depthwise with channel multiplier {cout_g} (group {group})"
            if not (cin_g == 1 and cout_g == 1) and (cin_g % 8 or cout_g % 8):
                return True, (f"grouped (group {group}) with {cin_g} input / {cout_g} output channels per group "
                              "(not multiples of 8)")
    pads = resolved_pads(node, x_shape, w_shape, transpose)
    if any(p is not None and p[0] != p[1] for p in pads):
        flat = [p[0] for p in pads] + [p[1] for p in pads]
        return True, f"asymmetric pads {flat} (begin..., end...)"
    if any(p is None for p in pads):
        unknown.append("resolved pads (spatial dims unknown)")
    kind = "depthwise" if group > 1 and c_in == group and c_out == group else f"group {group}"
    reason = f"cuDNN runs it well ({sp}-D, {kind}, symmetric pads)"
    if unknown:
        reason += f"; not decidable: {', '.join(unknown)}"
    return False, reason


# ---------------------------------------------------------------------------
# the rule
# ---------------------------------------------------------------------------
class ConvFusion(NormRule):
    RULE = RULE
    OP = OP
    ONNX_OP = "Conv"
    ATTRS = CONV_ATTRS

    def __init__(self, form: str) -> None:
        activation, tail_nodes = act.FORMS[form]
        super().__init__(form or "plain", size=1 + tail_nodes)
        self.form = form
        self.activation = activation

    @property
    def transpose(self) -> bool:
        return self.ONNX_OP == "ConvTranspose"

    def pattern(self, op, x, w):
        c = getattr(op, self.ONNX_OP)(x, w, _allow_other_inputs=True, _outputs=["conv_out"])
        return act.tail(op, self.form, c)

    def check(self, context, x: ir.Value, w: ir.Value, conv_out: ir.Value, **bindings) -> MatchResult:
        result = MatchResult()
        node = conv_out.producer()
        dt = require_float_dtype(x, "X")
        require_same_dtype(w, dt, "W")
        b = node.inputs[2] if len(node.inputs) > 2 else None
        if b is not None:
            require_same_dtype(b, dt, "B")
        rank = rank_of(x, "X")
        if not 3 <= rank <= 5:
            return result.fail(f"X {describe(x)} has rank {rank}; {self.OP} takes rank 3 to 5 (1-D to 3-D)", x)
        auto_pad = node.attributes.get_string("auto_pad", "NOTSET") or "NOTSET"
        if auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
            return result.fail(f"{describe(node)} has auto_pad='{auto_pad}'", node)
        if auto_pad != "NOTSET" and node.attributes.get("pads") is not None:
            return result.fail(f"{describe(node)} has both pads and auto_pad={auto_pad} (ONNX forbids it)", node)
        if node.attributes.get_int("group", 1) < 1:
            return result.fail(f"{describe(node)} has group={node.attributes.get_int('group', 1)}", node)
        act.check_tail(self.form, list(context.nodes), bindings)

        x_shape = shape_of(x)
        w_shape = shape_of(w)
        mode = current_policy()
        if mode == "off":  # the driver does not run the rules then; kept for direct use
            return result.fail("policy off: convolutions are left to the runtime", node)
        if mode == "fallback":
            selected, reason = fallback_decision(node, x_shape, w_shape, self.transpose)
            if not selected:
                if self.form:  # the plain-conv rule reports it, naming the conv alone
                    raise NotMine(f"policy fallback: {reason}")
                return result.fail(f"policy fallback: {reason}", node)
            self.note(fallback=reason)
        if self.activation:
            self.note(activation=self.activation)
        return result

    def new_name(self) -> str | None:
        """Our node takes the name of the conv it replaces (the activation's name is dropped)."""
        if self._context is None:
            return None
        conv = next((n for n in self._context.nodes if n.op_type == self.ONNX_OP), None)
        if conv is None or not conv.name:
            return super().new_name()
        return _recorder().unique_name(conv.name)

    def rewrite(self, op, x: ir.Value, w: ir.Value, conv_out: ir.Value, **_):
        node = conv_out.producer()
        b = node.inputs[2] if len(node.inputs) > 2 else None
        attrs = {}
        for name in self.ATTRS:
            a = node.attributes.get(name)
            if a is None:
                continue
            value = a.value
            if isinstance(value, (list, tuple)):
                if not value:
                    continue
                value = [int(v) for v in value]
            attrs[name] = value
        if self.transpose:
            attrs, padding = ort_cuda_padding(attrs, shape_of(x), shape_of(w))
            if padding:
                self.note(padding=padding)
        if self.activation:
            attrs["activation"] = self.activation
        return self.emit(op, self.OP, [x, w, b], 1, **attrs)


def rules(fusion=ConvFusion):
    # Longest tails first (the driver orders by size as well).
    forms = sorted(act.FORMS, key=lambda f: -act.FORMS[f][1])
    return [fusion.rule(f) for f in forms]

