"""Shared machinery of the rewrite rules.

Every rule is a `NormRule` (an onnxscript `RewriteRuleClassBase`) with
`pattern` / `check` / `rewrite`. `NormRule.rule()` wraps `check` and `rewrite`
so that, while a rewrite runs, every refusal (the pattern matched, `check` said
no and why) and every rewrite is recorded in the active `Recorder`.

Rules run with remove_nodes=False: the onnxscript matcher then does not silently
skip matches whose intermediate values are used elsewhere; `NormRule` checks that
itself, so the report can say which value blocks the fusion. The replaced nodes
become dead and the driver removes them after each stage.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
from typing import Any, Iterator, Sequence

import numpy as np
import onnx_ir as ir
from onnxscript.rewriter import pattern as orp
from onnxscript.rewriter._basics import MatchFailureError, MatchResult

DOMAIN = "trt_fastops"
#: ONNX Runtime's contrib-op domain (rules emit its ops only for target="ort")
ORT_DOMAIN = "com.microsoft"
FLOAT_TYPES = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


class Refuse(MatchFailureError):
    """Raised by check helpers: the match is refused, with a reason for the report."""


class NotMine(MatchFailureError):
    """Raised when a match belongs to another rule; refused without a report entry."""


# ---------------------------------------------------------------------------
# recording
# ---------------------------------------------------------------------------
@dataclasses.dataclass
class RewriteEvent:
    rule: str
    variant: str
    op: str
    node: ir.Node            # the new node
    replaced: list[ir.Node]  # matched (and absorbed) nodes
    details: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class RefusalEvent:
    rule: str
    variant: str
    op: str
    nodes: list[ir.Node]
    reason: str


class Recorder:
    """Collects events of one rewrite() call; also hands out unique node names."""

    def __init__(self, graph: ir.Graph) -> None:
        self.rewrites: list[RewriteEvent] = []
        self.refusals: list[RefusalEvent] = []
        self._names = {n.name for n in graph if n.name}
        self.generated: dict[str, str] = {}  # generated name -> the base it was made from

    def unique_name(self, base: str) -> str:
        name, i = base, 0
        while name in self._names:
            i += 1
            name = f"{base}_{i}"
        self._names.add(name)
        self.generated[name] = base
        return name


_ACTIVE: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar("trt_fastops_recorder", default=None)


@contextlib.contextmanager
def recording(recorder: Recorder) -> Iterator[Recorder]:
    token = _ACTIVE.set(recorder)
    try:
        yield recorder
    finally:
        _ACTIVE.reset(token)


def _recorder() -> Recorder:
    rec = _ACTIVE.get()
    if rec is None:  # rules used outside trt_fastops.rewriter.rewrite(): record into a throwaway
        rec = Recorder(ir.Graph([], [], nodes=[]))
        _ACTIVE.set(rec)
    return rec


# ---------------------------------------------------------------------------
# the rule base class
# ---------------------------------------------------------------------------
class NormRule(orp.RewriteRuleClassBase):
    #: module-level rule id used in the report ("layer_norm_decomposed")
    RULE = ""
    #: the trt_fastops op the rule produces
    OP = ""
    #: stage of the driver: 0 = norms, 1 = skip fusions (they look for our norm ops)
    STAGE = 0

    def __init__(self, variant: str = "", *, size: int = 0) -> None:
        super().__init__(name=f"{self.RULE}[{variant}]" if variant else self.RULE, remove_nodes=False)
        self.variant = variant
        # Larger patterns run in earlier passes, so a pattern that ends in Mul(scale)
        # never fuses before the one ending in Add(bias) had its chance.
        self.size = size
        self._context = None
        self._absorbed: list[ir.Node] = []
        self._details: dict = {}

    @classmethod
    def rule(cls, *args, **kwargs) -> orp.RewriteRule:
        inst = cls(*args, **kwargs)
        rule = orp.RewriteRule(inst.pattern, inst._rewrite_and_record, inst._check_and_record,
                               name=inst.name, remove_nodes=False)
        rule.trt_fastops_rule = inst  # the driver reads RULE/OP/STAGE/size from here
        return rule

    # -- wrappers -----------------------------------------------------------
    def _check_and_record(self, context, **bindings) -> MatchResult:
        self._context = None
        self._absorbed = []
        self._details = {}
        try:
            result = self.check(context, **bindings)
            if result:
                check_intermediates(context)
        except NotMine as e:
            return MatchResult().fail(e.reason)
        except MatchFailureError as e:
            result = MatchResult().fail(e.reason, list(e.failure_sources))
        if not result:
            rec = _recorder()
            rec.refusals.append(RefusalEvent(self.RULE, self.variant, self.OP, list(context.nodes),
                                             result.reason or "check failed"))
            return result
        self._context = context
        return result

    def _rewrite_and_record(self, op, **bindings):
        outputs = self.rewrite(op, **bindings)
        context = self._context
        new_nodes = [n for n in op.nodes if n.domain in (DOMAIN, ORT_DOMAIN)]
        if context is not None and new_nodes:
            replaced = list(context.nodes) + [n for n in self._absorbed if n not in context.nodes]
            _recorder().rewrites.append(RewriteEvent(self.RULE, self.variant, self.OP, new_nodes[0], replaced,
                                                     dict(self._details)))
        return outputs

    # -- helpers for subclasses -----------------------------------------------
    def new_name(self) -> str | None:
        """A name for the new node, next to the node it replaces."""
        if self._context is None:
            return None
        root = self._context.root.name or ""
        kind = self.emitted_op()
        base = (root.rsplit("/", 1)[0] + "/" + kind) if "/" in root else (f"{root}_{kind}" if root else kind)
        return _recorder().unique_name(base)

    def emit(self, op, op_type: str, inputs: Sequence[ir.Value | None], num_outputs: int, *,
             domain: str = DOMAIN, **attrs):
        """Create our node (or an ORT contrib node, domain=ORT_DOMAIN); trailing absent inputs are dropped."""
        inputs = list(inputs)
        while inputs and inputs[-1] is None:
            inputs.pop()
        return op.op(op_type, *inputs, _domain=domain, _outputs=num_outputs, _name=self.new_name(), **attrs)

    def emitted_op(self) -> str:
        """The op type of the node this match becomes (OP unless a rule picks per match)."""
        return self.OP

    def note(self, **details) -> None:
        """Facts about this rewrite for the report (e.g. sum_output=True)."""
        self._details.update(details)

    def absorb(self, *nodes: ir.Node) -> None:
        """Nodes outside the pattern that the rewrite makes dead (reported as replaced)."""
        self._absorbed.extend(nodes)


# ---------------------------------------------------------------------------
# pattern helpers
# ---------------------------------------------------------------------------
def either(op, op_type: str, a, b, *, name: str | None = None):
    """Commutative binary op inside a pattern: op(a, b) or op(b, a)."""
    f = getattr(op, op_type)
    return orp.OrValue([f(a, b), f(b, a)], name=name)


def binop(op, op_type: str, a, b, *, swap: bool, outputs=None):
    """A commutative op at the root of a pattern (roots cannot be OrValue): one order per rule."""
    f = getattr(op, op_type)
    kw = {"_outputs": outputs} if outputs else {}
    return f(b, a, **kw) if swap else f(a, b, **kw)


def inverse_sqrt(op, std, one):
    """1 / std as exporters write it: Reciprocal(std) or Div(1, std)."""
    return orp.OrValue([op.Reciprocal(std), op.Div(one, std)])


def normalized(op, d, std, one, *, root: str | None = None):
    """d / std: Div(d, std) or d * inverse_sqrt(std) in either order.

    root: None inside a pattern; "div", "mul" or "mul_swapped" when it is the root.
    """
    if root is None:
        inv = inverse_sqrt(op, std, one)
        return orp.OrValue([op.Div(d, std), op.Mul(d, inv), op.Mul(inv, d)])
    if root == "div":
        return op.Div(d, std)
    return binop(op, "Mul", d, inverse_sqrt(op, std, one), swap=root == "mul_swapped")


# ---------------------------------------------------------------------------
# check helpers (raise Refuse with a reason)
# ---------------------------------------------------------------------------
def describe(v: ir.Value | ir.Node | None) -> str:
    if v is None:
        return "<none>"
    if isinstance(v, ir.Node):
        return f"{v.op_type} '{v.name}'"
    return f"'{v.name}'"


def check_intermediates(context) -> None:
    """Values computed inside the match, other than its outputs, must not be used outside it."""
    nodes = list(context.nodes)
    inside = set(nodes)
    outputs = set(context.output_values)
    for node in nodes:
        for v in node.outputs:
            if v in outputs:
                continue
            if v.is_graph_output():
                raise Refuse(f"intermediate value {describe(v)} of {describe(node)} is a graph output; "
                             "fusing would drop it", node)
            for user, _ in v.uses():
                if user not in inside:
                    raise Refuse(f"intermediate value {describe(v)} of {describe(node)} is also used by "
                                 f"{describe(user)} outside the pattern; fusing would need it recomputed", node)


def other_uses(v: ir.Value, *allowed: ir.Node) -> list[ir.Node]:
    users = [u for u, _ in v.uses() if u not in allowed]
    return users


def has_other_uses(v: ir.Value, *allowed: ir.Node) -> bool:
    return bool(other_uses(v, *allowed)) or v.is_graph_output()


def const_array(v: ir.Value | None) -> np.ndarray | None:
    if v is None:
        return None
    try:
        t = ir.convenience.get_const_tensor(v)
    except ValueError:
        return None
    if t is None:
        return None
    try:
        return t.numpy()
    except Exception:  # external data that cannot be read
        return None


def const_scalar(v: ir.Value | None, what: str) -> float:
    arr = const_array(v)
    if arr is None:
        source = "a graph input" if (v is not None and v.is_graph_input()) else "computed at runtime"
        raise Refuse(f"{what} {describe(v)} is not a constant ({source})", v)
    if arr.size != 1:
        raise Refuse(f"{what} {describe(v)} has shape {list(arr.shape)}, expected a scalar", v)
    return float(arr.reshape(()).astype(np.float64))


def const_rtol(dtype: np.dtype) -> float:
    """How far (relative) a constant stored in `dtype` may sit from the exact value it stands
    for: its dtype's rounding (float16 keeps 11 significant bits, so sqrt(2) is 1.4140625,
    1.1e-4 off; bfloat16 keeps 8). Integers must be exact."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer) or dtype == np.bool_:
        return 0.0
    return {np.dtype(np.float64): 1e-9, np.dtype(np.float32): 1e-6, np.dtype(np.float16): 1e-3}.get(dtype, 8e-3)


def const_near(v: ir.Value | None, want: float, what: str) -> tuple[float, bool]:
    """(the scalar constant v, whether it is `want` up to the rounding of its dtype);
    Refuse when v is not a constant scalar."""
    got = const_scalar(v, what)
    return got, math.isclose(got, want, rel_tol=const_rtol(const_array(v).dtype))


def require_const_value(v: ir.Value | None, expected: float, what: str) -> None:
    got = const_scalar(v, what)
    if not math.isclose(got, expected, rel_tol=0, abs_tol=0):
        raise Refuse(f"{what} is {got:g}, expected {expected:g}", v)


Dim = Any  # int | str | None


def shape_of(v: ir.Value | None) -> tuple | None:
    """Dims as ints, symbolic names (str) or None (unknown); None when the rank is unknown."""
    if v is None or v.shape is None:
        return None
    dims = []
    for d in v.shape:
        if isinstance(d, int):
            dims.append(d)
        else:
            dims.append(getattr(d, "value", None))
    return tuple(dims)


def check_cast_pair(x_cast: ir.Value, y_cast: ir.Value, dtype: ir.DataType) -> tuple[str, ir.Node] | None:
    """The torch `x.float()` form: X is cast to float32 and the result back to X's dtype.
    Returns (why it does not fit, the offending Cast), or None."""
    to_in = x_cast.producer().attributes.get_int("to", 0)
    to_out = y_cast.producer().attributes.get_int("to", 0)
    if to_in != ir.DataType.FLOAT:
        return (f"{describe(x_cast.producer())} casts to {ir.DataType(to_in).name}, expected float32",
                x_cast.producer())
    if to_out != dtype:
        return (f"{describe(y_cast.producer())} casts to {ir.DataType(to_out).name}, "
                f"not back to X's dtype {dtype.name}", y_cast.producer())
    return None


def rank_of(v: ir.Value, what: str) -> int:
    s = shape_of(v)
    if s is None:
        raise Refuse(f"the rank of {what} {describe(v)} is unknown (run shape inference or give the "
                     "graph inputs static ranks)", v)
    return len(s)


def same_dim(a: Dim, b: Dim) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return isinstance(a, str) and a == b


def same_shape(a: Sequence[Dim], b: Sequence[Dim]) -> bool:
    return len(a) == len(b) and all(same_dim(x, y) for x, y in zip(a, b))


def drop_leading_ones(s: Sequence[Dim]) -> tuple:
    s = tuple(s)
    i = 0
    while i < len(s) and s[i] == 1:
        i += 1
    return s[i:]


def fmt_shape(s: Sequence[Dim] | None) -> str:
    if s is None:
        return "unknown"
    return "[" + ", ".join("?" if d is None else str(d) for d in s) + "]"


def dtype_name(dt: ir.DataType | None) -> str:
    if dt is None:
        return "unknown"
    return {ir.DataType.FLOAT: "float32", ir.DataType.DOUBLE: "float64"}.get(dt, dt.name.lower())


def require_float_dtype(v: ir.Value, what: str) -> ir.DataType:
    dt = v.dtype
    if dt is None:
        raise Refuse(f"the dtype of {what} {describe(v)} is unknown", v)
    if dt not in FLOAT_TYPES:
        raise Refuse(f"{what} {describe(v)} is {dtype_name(dt)}; the trt_fastops ops take float32, "
                     "float16 or bfloat16", v)
    return dt


def require_same_dtype(v: ir.Value, dt: ir.DataType, what: str) -> None:
    if v.dtype is not None and v.dtype != dt:
        raise Refuse(f"{what} {describe(v)} is {dtype_name(v.dtype)}, expected {dtype_name(dt)} (the dtype of X)", v)


def require_param_shape(v: ir.Value, x_shape: Sequence[Dim], axis: int, what: str) -> None:
    """Scale/B/Bias: one element, or the normalised shape X.shape[axis:] (leading 1s dropped)."""
    s = shape_of(v)
    normalized = tuple(x_shape[axis:])
    if s is None:
        raise Refuse(f"the shape of {what} {describe(v)} is unknown; cannot check it against the "
                     f"normalized shape {fmt_shape(normalized)}", v)
    if len(s) > len(x_shape):
        raise Refuse(f"{what} {describe(v)} has rank {len(s)} > rank {len(x_shape)} of X; it would broadcast X", v)
    if all(isinstance(d, int) for d in s) and int(np.prod(s, dtype=np.int64)) == 1:
        return
    if not same_shape(drop_leading_ones(s), drop_leading_ones(normalized)):
        raise Refuse(f"{what} {describe(v)} has shape {fmt_shape(s)}, expected the normalized shape "
                     f"{fmt_shape(normalized)} of X (dims [{axis}, {len(x_shape)})) or a single element", v)


def reduce_axes(node: ir.Node, rank: int, what: str) -> list[int]:
    """Normalised, sorted axes of a ReduceMean with keepdims=1 (attribute or input form)."""
    keepdims = node.attributes.get_int("keepdims", 1)
    if keepdims != 1:
        raise Refuse(f"{what} {describe(node)} has keepdims={keepdims}; the normalization needs keepdims=1", node)
    if "axes" in node.attributes:
        axes = list(node.attributes.get_ints("axes"))
    elif len(node.inputs) > 1 and node.inputs[1] is not None:
        arr = const_array(node.inputs[1])
        if arr is None:
            raise Refuse(f"the axes of {what} {describe(node)} are not a constant", node)
        axes = [int(a) for a in arr.reshape(-1)]
    else:
        axes = []
    if not axes:
        if node.attributes.get_int("noop_with_empty_axes", 0):
            raise Refuse(f"{what} {describe(node)} has no axes and noop_with_empty_axes=1 (an identity)", node)
        axes = list(range(rank))
    out = sorted(a + rank if a < 0 else a for a in axes)
    if any(a < 0 or a >= rank for a in out):
        raise Refuse(f"{what} {describe(node)} has axes {axes} out of range for rank {rank}", node)
    return out


def trailing_axis(axes: list[int], rank: int, what: str, node: ir.Node) -> int:
    """The first normalized axis, if `axes` are the trailing dims [a, rank); else refuse."""
    if not axes or axes != list(range(axes[0], rank)):
        raise Refuse(f"{what} {describe(node)} reduces over axes {axes}, not the trailing axes ending at "
                     f"the last dim (rank {rank})", node)
    return axes[0]


def norm_node_axis(node: ir.Node, rank: int, op_name: str) -> int:
    """Checks a norm node's stash_type (float32 statistics only) and axis; returns the axis in
    [0, rank). `op_name` is the trt_fastops op it becomes, for the refusal message."""
    stash = attr_int(node, "stash_type", 1)
    if stash != 1:
        raise Refuse(f"{describe(node)} has stash_type={stash}; trt_fastops.{op_name} computes in "
                     "float32 (stash_type=1) only", node)
    axis = attr_int(node, "axis", -1)
    if not -rank <= axis < rank:
        raise Refuse(f"{describe(node)} has axis={axis}, out of range for rank {rank}", node)
    return axis + rank if axis < 0 else axis


def attr_int(node: ir.Node, name: str, default: int) -> int:
    return node.attributes.get_int(name, default)


def attr_float(node: ir.Node, name: str, default: float) -> float:
    return node.attributes.get_float(name, default)


def ones_like_param(op, dtype: ir.DataType):
    """A one-element Scale of 1 (our ops broadcast a single-element Scale)."""
    return op.Constant(value=ir.tensor(np.ones((1,), dtype=dtype.numpy())))


def producer_of(v: ir.Value | None, op_type: str, domain: str = "") -> ir.Node | None:
    if v is None:
        return None
    p = v.producer()
    if p is not None and p.op_type == op_type and p.domain == domain:
        return p
    return None
