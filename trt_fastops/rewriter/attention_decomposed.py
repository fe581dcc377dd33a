"""Decomposed attention (what PyTorch and Hugging Face exports produce) -> trt_fastops.Attention.

    scores = MatMul(Q', K'^T)           Q' / K' optionally scaled (Mul / Div by a scalar constant,
                                        before or after the transposes: sqrt(scale) on each, or
                                        the whole scale on Q as timm does)
    scores = scores * c | scores / c    optional, scalar constant (the usual 1 / sqrt(D))
    scores = cap * Tanh(scores / cap)   optional softcap (Gemma 2)
    scores = scores + mask              optional additive masks (padding [B, 1, 1, S] from an int
                                        mask by Cast / Sub / Mul, ALiBi / position bias, causal)
    scores = Where(c, scores, fill)     optional boolean masks (GPT-2 causal bias, SDPA), fill a
                                        scalar <= -1e4 or -inf; Where(c, fill, scores) = masked_fill
    p      = Softmax(scores, axis=-1)   optional Cast to float32 before and back after (HF)
    p      = Dropout(p)                 optional, inference mode only
    ctx    = MatMul(p, V')              -> the op's Y in [B, H, S, Dv] (4-D form)
    y      = Reshape(Transpose(ctx, [0, 2, 1, 3]), [B, S, H * Dv])   -> Y in the 3-D form

Heads: Q' = Transpose(Reshape(q, [B, S, H, D]), [0, 2, 1, 3]) (a plain head split) for Q, K and
V together with the merge above give the 3-D form: the op reads q / k / v [B, S, H * D] with
q_num_heads / kv_num_heads, and none of the Reshape / Transpose copies remain. A packed
projection split timm-style also gives the 3-D form:

    qkv = Transpose(Reshape(x, [B, S, n, H, D]), [2, 0, 3, 1, 4])   x [B, S, n * H * D], n = 2 or 3
    q, k, v = Gather(qkv, 0 / 1 / 2, axis=0)                         or Squeeze(Split(qkv, axis=0), 0)

slot j of x is x[..., j*H*D:(j+1)*H*D], so one Split of x on its last axis feeds the op (the op
takes each of Q / K / V as its own tensor, with no offset into a shared one, so a Split it is:
one pass over x, where ONNX Runtime otherwise runs the 5-D Transpose or, after moving it past
the Gathers, three 4-D ones, and one more for the merge). Only when the 5-D Transpose dies with
the rewrite; otherwise the 4-D form reads the Gathers as they are.
Anything else (rotary embeddings, ...) gives the 4-D form: the op reads the 4-D values
(a Transpose is emitted where only a differently laid out one exists). K^T may be one
Transpose [0, 2, 3, 1] of the split K or two. GQA repeat_kv
Reshape(Expand(Unsqueeze(k, 2), [B, Hkv, n_rep, S, D]), [B, Hkv * n_rep, S, D]) on both K and V is
undone: the op takes the Hkv heads and maps query heads to them (no copies). Broadcast MQA (K
with one head) is taken as it is.

Masks: a constant mask that is exactly the lower triangle j <= i over the scores' [S, S]
(bool condition, or additive 0 / <= -1e4) becomes is_causal=1 (ONNX causal is top-left without
past keys; a bottom-right or any other triangle stays a mask). Other masks become attn_mask:
one boolean mask as it is (Not for masked_fill), one additive mask cast to Q's dtype, several
combined into one additive mask (Where(c, 0, -inf) + ...). Masks must broadcast to
[B, H, S_q, S_kv] without broadcasting the keys (ONNX pads a short mask instead).

Semantics kept: a fill of -1e4 / finfo.min is taken as -inf; rows whose every key is masked
give zeros (ONNX Attention) where the decomposed graph averages V uniformly.

Refused with the reason: dropout in training mode, softmax not over the last axis, a runtime
or non-scalar scale on the scores, a scale or softcap applied after an additive mask, masks that
broadcast the scores or the keys, 3-D batched scores ([B*H, S, S]), Q and V of different
dtypes, intermediate values used outside the pattern (e.g. attention probabilities returned).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import onnx_ir as ir
from onnxscript.rewriter._basics import MatchResult

from ._common import (NormRule, NotMine, Refuse, _recorder, const_array, describe, dtype_name, fmt_shape,
                      require_float_dtype, same_dim, shape_of)

RULE = "attention_decomposed"
OP = "Attention"

#: a Where fill or additive mask value at or below this masks the key (exp underflows to 0)
MASKED = -1.0e4
FLOAT_CASTS = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16)
SPLIT_PERM = [0, 2, 1, 3]
#: ops that may sit between the QK^T MatMul and the Softmax
_SCORE_OPS = ("Cast", "Add", "Mul", "Div", "Where", "Tanh")


# ---------------------------------------------------------------------------
# the plan
# ---------------------------------------------------------------------------
@dataclasses.dataclass
class Packed:
    """Slot `slot` of `n` of a packed x [B, S, n * H * D] (timm's fused QKV)."""
    x: ir.Value
    slot: int
    n: int
    nodes: list                     # Reshape, Transpose, Gather / Split + Squeeze: die with the rewrite


@dataclasses.dataclass
class Heads:
    """Q, K or V as the op takes it."""
    base: ir.Value                  # transpose(base, perm) is the 4-D [B, H, S, D] value
    perm: list[int]
    src3: ir.Value | None = None    # the 3-D [B, S, H * D] value when it is a plain head split
    heads3: int | None = None       # H of that split (or of the packed slice)
    repeat: int = 1                 # GQA n_rep undone (1: none)
    packed: Packed | None = None    # a slice of a packed [B, S, n * H * D] projection

    @property
    def identity(self) -> bool:
        return self.perm == list(range(len(self.perm)))


@dataclasses.dataclass
class Mask:
    value: ir.Value
    kind: str            # "additive" or "bool"
    invert: bool = False  # bool: True where the key is masked (masked_fill)
    node: ir.Node | None = None


@dataclasses.dataclass
class Plan:
    q: Heads
    k: Heads
    v: Heads
    scale: float = 1.0
    softcap: float = 0.0
    causal: bool = False
    masks: list = dataclasses.field(default_factory=list)
    dtype: ir.DataType | None = None
    core: list = dataclasses.field(default_factory=list)    # nodes between QK^T and the root
    side: list = dataclasses.field(default_factory=list)    # Q/K/V nodes that may die
    notes: dict = dataclasses.field(default_factory=dict)


# ---------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------
def _producer(v: ir.Value | None, *op_types: str) -> ir.Node | None:
    if v is None:
        return None
    p = v.producer()
    if p is not None and p.domain in ("", "ai.onnx") and p.op_type in op_types:
        return p
    return None


def _perm_of(node: ir.Node, rank: int) -> list[int]:
    a = node.attributes.get("perm")
    perm = [int(x) for x in a.as_ints()] if a is not None else list(reversed(range(rank)))
    return [p + rank if p < 0 else p for p in perm]


def _rank(v: ir.Value) -> int | None:
    s = shape_of(v)
    return None if s is None else len(s)


def _scalar(v: ir.Value | None) -> float | None:
    arr = const_array(v)
    if arr is None or arr.size != 1:
        return None
    return float(arr.reshape(()).astype(np.float64))


def _used_outside(node: ir.Node, allowed: set) -> ir.Value | None:
    for out in node.outputs:
        if out.is_graph_output():
            return out
        for user, _ in out.uses():
            if user not in allowed:
                return out
    return None


def _reaches_matmul(v: ir.Value | None, depth: int = 10) -> bool:
    if v is None or depth == 0:
        return False
    p = v.producer()
    if p is None or p.domain not in ("", "ai.onnx"):
        return False
    if p.op_type == "MatMul":
        return True
    if p.op_type in _SCORE_OPS:
        return any(_reaches_matmul(i, depth - 1) for i in p.inputs)
    return False


def _opset(node: ir.Node) -> int:
    g = node.graph
    if g is not None:
        return g.opset_imports.get("", g.opset_imports.get("ai.onnx", 18))
    return 18


def _int_dims(s) -> bool:
    return s is not None and all(isinstance(d, int) for d in s)


# ---------------------------------------------------------------------------
# Q / K / V: transposes, scales, head splits, repeat_kv
# ---------------------------------------------------------------------------
def _resolve(v: ir.Value, nodes: list, *, scales: bool) -> tuple[ir.Value, list[int], float]:
    """v = transpose(base, perm) * factor through Transposes and scalar constant Mul / Div."""
    rank = _rank(v) or 4
    perm = list(range(rank))
    factor = 1.0
    cur = v
    while True:
        node = _producer(cur, "Transpose", "Mul", "Div")
        if node is None:
            break
        if node.op_type == "Transpose":
            t = _perm_of(node, rank)
            if len(t) != rank:
                break
            perm = [t[i] for i in perm]
            nodes.append(node)
            cur = node.inputs[0]
            continue
        if not scales:
            break
        a, b = node.inputs[0], node.inputs[1]
        ca, cb = _scalar(a), _scalar(b)
        if cb is not None and _rank(a) == rank:
            c, x = cb, a
        elif ca is not None and node.op_type == "Mul" and _rank(b) == rank:
            c, x = ca, b
        else:
            break  # not a scalar constant: part of the tensor itself
        if node.op_type == "Div":
            if c == 0:
                break
            c = 1.0 / c
        factor *= c
        nodes.append(node)
        cur = x
    return cur, perm, factor


def _reshape_target(node: ir.Node) -> list[int] | None:
    arr = const_array(node.inputs[1]) if len(node.inputs) > 1 else None
    return None if arr is None else [int(x) for x in arr.reshape(-1)]


def _reshape_ok(node: ir.Node, in_shape, out_shape, keep: int) -> bool:
    """The Reshape copies the first `keep` dims and only splits / merges the rest: checked on its
    constant target (0 copies, -1 infers) or, for a computed target, on the inferred shapes."""
    rest_in, rest_out = list(in_shape[keep:]), list(out_shape[keep:])
    if not (_int_dims(rest_in) and _int_dims(rest_out) and int(np.prod(rest_in)) == int(np.prod(rest_out))):
        return False
    t = _reshape_target(node)
    if t is None:
        return all(same_dim(in_shape[i], out_shape[i]) for i in range(keep))
    if len(t) != len(out_shape) or t.count(-1) > 1:
        return False
    if node.attributes.get_int("allowzero", 0) and 0 in t:
        return False
    head, tail = t[:keep], t[keep:]
    for i, d in enumerate(head):
        if d == 0 or d == -1:  # copies in[i]; -1 infers in[i] because the tail keeps the rest's size
            continue
        if not (isinstance(in_shape[i], int) and d == in_shape[i]):
            return False
    if -1 in tail:
        if -1 in head:
            return False
        known = int(np.prod([d for d in tail if d != -1]))
        if known <= 0 or int(np.prod(rest_in)) % known:
            return False
        tail = [int(np.prod(rest_in)) // known if d == -1 else d for d in tail]
    return tail == rest_out


def _split3(base: ir.Value, perm: list[int], nodes: list) -> tuple[ir.Value, int] | None:
    """(x3, H) when transpose(base, perm) is the plain head split of a 3-D [B, S, H * D] x3."""
    if perm != SPLIT_PERM:
        return None
    node = _producer(base, "Reshape")
    if node is None:
        return None
    x3 = node.inputs[0]
    s_in, s_out = shape_of(x3), shape_of(base)
    if s_in is None or s_out is None or len(s_in) != 3 or len(s_out) != 4:
        return None
    if not isinstance(s_out[2], int) or not _reshape_ok(node, s_in, s_out, 2):
        return None
    nodes.append(node)
    return x3, s_out[2]


PACKED_PERM = [2, 0, 3, 1, 4]


def _const_ints(node: ir.Node, name: str, index: int) -> list[int] | None:
    """An ints attribute, or (newer opsets) the constant input at `index`."""
    if name in node.attributes:
        return [int(a) for a in node.attributes.get_ints(name)]
    arr = const_array(node.inputs[index]) if len(node.inputs) > index else None
    return None if arr is None else [int(a) for a in arr.reshape(-1)]


def _slot_of(base: ir.Value) -> tuple[ir.Value, int, list] | None:
    """(qkv, j, nodes) when base is slot j along axis 0 of the 5-D qkv: Gather(qkv, j, axis=0) with a
    scalar constant j, or Squeeze(Split(qkv, axis=0) output j, axes=[0]) with parts of one."""
    gather = _producer(base, "Gather")
    if gather is not None:
        idx = const_array(gather.inputs[1])
        if gather.attributes.get_int("axis", 0) != 0 or idx is None or idx.ndim != 0:
            return None
        return gather.inputs[0], int(idx), [gather]
    squeeze = _producer(base, "Squeeze")
    if squeeze is None or _const_ints(squeeze, "axes", 1) not in ([0], [-5]):
        return None
    split = _producer(squeeze.inputs[0], "Split")
    if split is None or split.attributes.get_int("axis", 0) not in (0, -5):
        return None
    parts = [shape_of(o) for o in split.outputs]
    if any(p is None or len(p) != 5 or p[0] != 1 for p in parts):
        return None
    return split.inputs[0], list(split.outputs).index(squeeze.inputs[0]), [squeeze, split]


def _packed(base: ir.Value, perm: list[int]) -> tuple[Packed, int] | None:
    """(slice, H) when transpose(base, perm) is one slot of Transpose(Reshape(x, [B, S, n, H, D]),
    [2, 0, 3, 1, 4]) with a 3-D x [B, S, n * H * D]."""
    if perm != list(range(4)) or _rank(base) != 4:
        return None
    found = _slot_of(base)
    if found is None:
        return None
    qkv, slot, nodes = found
    transpose = _producer(qkv, "Transpose")
    if transpose is None or _perm_of(transpose, 5) != PACKED_PERM:
        return None
    reshape = _producer(transpose.inputs[0], "Reshape")
    if reshape is None:
        return None
    x = reshape.inputs[0]
    s_in, s_out = shape_of(x), shape_of(reshape.outputs[0])
    if s_in is None or s_out is None or len(s_in) != 3 or len(s_out) != 5 or not _int_dims(s_out[2:]):
        return None
    if not _reshape_ok(reshape, s_in, s_out, 2):
        return None
    n, heads = s_out[2], s_out[3]
    if not -n <= slot < n:
        return None
    return Packed(x, slot % n, n, nodes + [transpose, reshape]), heads


def _unrepeat(x: ir.Value, nodes: list) -> tuple[ir.Value, int] | None:
    """(k, n_rep) when x is repeat_kv(k): Reshape(Expand(Unsqueeze(k, 2), [B, Hkv, n_rep, S, D]),
    [B, Hkv * n_rep, S, D]), or Expand(k) of a one-head k (MQA)."""
    sx = shape_of(x)
    if sx is None or len(sx) != 4:
        return None
    reshape = _producer(x, "Reshape")
    if reshape is None:
        expand = _producer(x, "Expand")
        if expand is None:
            return None
        k = expand.inputs[0]
        sk = shape_of(k)
        if sk is None or len(sk) != 4 or sk[1] != 1 or not isinstance(sx[1], int) or sx[1] <= 1:
            return None
        if not all(same_dim(sk[i], sx[i]) for i in (0, 2, 3)):
            return None
        nodes.append(expand)
        return k, sx[1]
    expand = _producer(reshape.inputs[0], "Expand")
    unsq = _producer(expand.inputs[0], "Unsqueeze") if expand is not None else None
    if unsq is None:
        return None
    if "axes" in unsq.attributes:
        axes = list(unsq.attributes.get_ints("axes"))
    else:
        arr = const_array(unsq.inputs[1]) if len(unsq.inputs) > 1 else None
        axes = None if arr is None else [int(a) for a in arr.reshape(-1)]
    if axes not in ([2], [-3]):
        return None
    k = unsq.inputs[0]
    sk, se = shape_of(k), shape_of(expand.outputs[0])
    if sk is None or se is None or len(sk) != 4 or len(se) != 5:
        return None
    kv, rep = sk[1], se[2]
    if not (isinstance(kv, int) and isinstance(rep, int) and isinstance(sx[1], int) and kv * rep == sx[1]):
        return None
    if not (same_dim(se[1], kv) and all(same_dim(sk[i], se[j]) and same_dim(sk[i], sx[i])
                                        for i, j in ((0, 0), (2, 3), (3, 4)))):
        return None
    nodes += [reshape, expand, unsq]
    return k, rep


def _heads(v: ir.Value, nodes: list, *, scales: bool, key: bool = False,
           unrepeat: bool = True) -> tuple[Heads, float]:
    base, perm, factor = _resolve(v, nodes, scales=scales)
    if key:  # v is K^T: K = transpose(base, perm with the last two swapped back)
        perm = [perm[0], perm[1], perm[3], perm[2]] if len(perm) == 4 else perm
    h = Heads(base, perm)
    if h.identity and unrepeat:
        rep = _unrepeat(base, nodes)
        if rep is not None:
            base2, perm2, f2 = _resolve(rep[0], nodes, scales=scales)
            h = Heads(base2, perm2, repeat=rep[1])
            factor *= f2
    split = _split3(h.base, h.perm, nodes)
    if split is not None:
        h.src3, h.heads3 = split
    elif h.repeat == 1:
        packed = _packed(h.base, h.perm)
        if packed is not None:
            h.packed, h.heads3 = packed
            nodes += packed[0].nodes
    return h, factor


# ---------------------------------------------------------------------------
# masks
# ---------------------------------------------------------------------------
def _attend_map(arr: np.ndarray, kind: str, invert: bool) -> np.ndarray | None:
    """Boolean 'key visible' map of a constant mask, or None for additive values that are
    neither 0 nor masked (a real bias)."""
    if kind == "bool":
        a = arr.astype(bool)
        return ~a if invert else a
    f = arr.astype(np.float64)
    if not np.all((f == 0) | (f <= MASKED)):
        return None
    return f == 0


def _is_causal(mask: Mask, q_len, kv_len) -> bool:
    arr = const_array(mask.value)
    if arr is None or arr.ndim < 2 or not isinstance(q_len, int) or not isinstance(kv_len, int):
        return False
    if arr.shape[-2:] != (q_len, kv_len) or arr.ndim > 4:
        return False
    attend = _attend_map(arr, mask.kind, mask.invert)
    if attend is None:
        return False
    tril = np.tril(np.ones((q_len, kv_len), dtype=bool))
    return bool(np.all(attend.reshape(-1, q_len, kv_len) == tril[None]))


def _mask_problem(m: ir.Value, scores) -> tuple[str | None, bool]:
    """(why the mask cannot be attn_mask, dims assumed compatible)."""
    s = shape_of(m)
    if s is None:
        return f"the rank of mask {describe(m)} is unknown", False
    if not 1 <= len(s) <= 4:
        return f"mask {describe(m)} has rank {len(s)}; attn_mask takes rank 1 to 4", False
    assumed = False
    full = scores[4 - len(s):]
    for i, (d, sd) in enumerate(zip(s, full)):
        last = i == len(s) - 1
        if same_dim(d, sd):
            continue
        if isinstance(d, int) and isinstance(sd, int):
            if d == 1 and last:
                return (f"mask {describe(m)} {fmt_shape(s)} broadcasts over the keys (last dim 1, the scores "
                        f"have {sd}); ONNX Attention pads a short mask instead"), False
            if d == 1:
                continue
            return (f"mask {describe(m)} {fmt_shape(s)} does not broadcast to the scores "
                    f"{fmt_shape(scores)} without broadcasting them"), False
        if d == 1 and not last:
            continue
        assumed = True  # a dynamic dim that shape inference could not relate
    return None, assumed


# ---------------------------------------------------------------------------
# the analysis
# ---------------------------------------------------------------------------
def analyze(p: ir.Value, v: ir.Value, root: ir.Node) -> Plan:
    """Walk from the MatMul(p, v) back to Q, K, V; raise NotMine (not attention) or Refuse."""
    core: list[ir.Node] = []
    # p <- [Dropout] <- [Cast] <- Softmax
    cur = p
    softmax = None
    while True:
        node = _producer(cur, "Dropout", "Cast", "Softmax", "Identity")
        if node is None:
            raise NotMine("the MatMul's first input is not a Softmax")
        core.append(node)
        if node.op_type == "Softmax":
            softmax = node
            break
        if node.op_type == "Dropout":
            _check_dropout(node)
        elif node.op_type == "Cast":
            _check_cast(node)
        cur = node.inputs[0]
    scores = softmax.inputs[0]
    plan = _walk_scores(scores, core)
    qk = core[-1]
    s_shape = shape_of(qk.outputs[0])
    if s_shape is None or len(s_shape) != 4:
        raise Refuse(f"the scores {describe(qk.outputs[0])} of {describe(qk)} have shape {fmt_shape(s_shape)}; "
                     "only 4-D [batch, heads, q, kv] scores are fused (3-D batched [B*H, S, S] are not)", qk)
    axis = softmax.attributes.get_int("axis", -1 if _opset(softmax) >= 13 else 1)
    if axis not in (-1, 3):
        raise Refuse(f"{describe(softmax)} has axis={axis}; attention normalizes over the keys (the last axis)",
                     softmax)

    side: list[ir.Node] = []
    q, fq = _heads(qk.inputs[0], side, scales=True)
    k, fk = _heads(qk.inputs[1], side, scales=True, key=True)
    vh, _ = _heads(v, side, scales=False)
    plan.q, plan.k, plan.v = q, k, vh
    plan.scale *= fq * fk
    if not plan.scale > 0 or not math.isfinite(plan.scale):
        raise Refuse(f"the combined scale is {plan.scale:g}; only a positive finite scale keeps the masks", qk)
    if k.repeat != vh.repeat:  # only one of them repeated: the op takes both repeated
        plan.k, _ = _heads(qk.inputs[1], [], scales=True, key=True, unrepeat=False)
        plan.v, _ = _heads(v, [], scales=False, unrepeat=False)
        plan.notes["repeat_kv"] = "K and V are not repeated alike; the repeated heads are used"
    elif k.repeat > 1:
        plan.notes["gqa"] = f"repeat_kv x{k.repeat} undone (the op maps query heads to kv heads)"
    _check_broadcast(qk, v, root)

    # dtypes
    dt = require_float_dtype(qk.inputs[0], "Q")
    if v.dtype is not None and v.dtype != dt:
        raise Refuse(f"V {describe(v)} is {dtype_name(v.dtype)} but Q is {dtype_name(dt)}; the op takes one dtype",
                     root)
    plan.dtype = dt

    # masks
    q_len, kv_len = s_shape[2], s_shape[3]
    kept = []
    for m in plan.masks:
        if _is_causal(m, q_len, kv_len):
            plan.causal = True
            continue
        why, assumed = _mask_problem(m.value, s_shape)
        if why:
            raise Refuse(why, m.node or qk)
        if assumed:
            plan.notes["mask_shapes_assumed"] = True
        if m.kind == "bool" and m.value.dtype not in (None, ir.DataType.BOOL):
            raise Refuse(f"the Where condition {describe(m.value)} is {dtype_name(m.value.dtype)}, expected bool",
                         m.node)
        kept.append(m)
    plan.masks = kept

    # the chain between QK^T and the root must be ours alone
    inside = set(core) | {root}
    for node in core:
        out = _used_outside(node, inside)
        if out is not None:
            what = "a graph output" if out.is_graph_output() else "also used outside the pattern"
            raise Refuse(f"intermediate value {describe(out)} of {describe(node)} is {what}; "
                         "fusing would need it recomputed", node)
    plan.core = core
    plan.side = side
    return plan


def _check_broadcast(qk: ir.Node, v: ir.Value, root: ir.Node) -> None:
    """The MatMuls must not broadcast K or V over the batch (the op needs one batch)."""
    sq = shape_of(qk.inputs[0])
    for val, what in ((qk.inputs[1], "K"), (v, "V")):
        s = shape_of(val)
        if sq is None or s is None or len(s) != 4 or len(sq) != 4:
            continue
        if s[0] == 1 and sq[0] != 1:
            raise Refuse(f"{what} {describe(val)} {fmt_shape(s)} broadcasts over the batch of Q {fmt_shape(sq)}",
                         root)


def _check_dropout(node: ir.Node) -> None:
    if len(node.outputs) > 1 and (node.outputs[1].uses() or node.outputs[1].is_graph_output()):
        raise Refuse(f"the mask output of {describe(node)} is used", node)
    if "is_test" in node.attributes and not node.attributes.get_int("is_test"):
        raise Refuse(f"{describe(node)} has is_test=0 (dropout in training mode)", node)
    mode = node.inputs[2] if len(node.inputs) > 2 else None
    if mode is None:
        return
    arr = const_array(mode)
    if arr is None:
        raise Refuse(f"the training_mode input {describe(mode)} of {describe(node)} is not a constant; "
                     "dropout may run in training mode", node)
    if bool(arr.reshape(-1)[0]):
        raise Refuse(f"{describe(node)} runs in training mode (training_mode=True)", node)


def _check_cast(node: ir.Node) -> None:
    to = node.attributes.get_int("to", 0)
    if to not in FLOAT_CASTS:
        raise Refuse(f"{describe(node)} casts the attention scores to {ir.DataType(to).name}", node)


def _walk_scores(s: ir.Value, core: list) -> Plan:
    """From the Softmax input up to the QK^T MatMul (appended last to `core`)."""
    plan = Plan(q=None, k=None, v=None)  # type: ignore[arg-type]
    seen_scale = seen_softcap = False
    while True:
        node = s.producer()
        if node is None or node.domain not in ("", "ai.onnx") or node.op_type not in ("MatMul",) + _SCORE_OPS:
            raise NotMine("the Softmax input does not come from a MatMul")
        op = node.op_type
        if op == "MatMul":
            core.append(node)
            return plan
        if op == "Cast":
            _check_cast(node)
            core.append(node)
            s = node.inputs[0]
            continue
        if op == "Add":
            a, b = node.inputs[0], node.inputs[1]
            chain, mask = (a, b) if _reaches_matmul(a) else (b, a)
            if not _reaches_matmul(chain):
                raise NotMine("neither operand of the Add comes from a MatMul")
            if seen_scale:
                raise Refuse(f"the additive mask {describe(mask)} is added before the scale (the scale would "
                             "scale the mask too); attention adds the mask to the scaled scores", node)
            if seen_softcap:
                raise Refuse(f"the additive mask {describe(mask)} is added before the softcap", node)
            plan.masks.append(Mask(mask, "additive", node=node))
            core.append(node)
            s = chain
            continue
        if op == "Where":
            c, a, b = node.inputs
            if _reaches_matmul(a):
                chain, fill, invert = a, b, False
            elif _reaches_matmul(b):
                chain, fill, invert = b, a, True
            else:
                raise NotMine("no branch of the Where comes from a MatMul")
            f = _scalar(fill)
            if f is None:
                raise Refuse(f"the Where fill {describe(fill)} is not a scalar constant; only masking with -inf "
                             "or a large negative value fuses", node)
            if not f <= MASKED:
                raise Refuse(f"the Where fill is {f:g}; only -inf or a value <= {MASKED:g} masks a key", node)
            if seen_softcap:
                raise Refuse("the Where mask is applied before the softcap (softcap would make -inf finite)", node)
            plan.masks.append(Mask(c, "bool", invert=invert, node=node))
            core.append(node)
            s = chain
            continue
        if op in ("Mul", "Div"):
            a, b = node.inputs[0], node.inputs[1]
            tanh = _producer(a, "Tanh") or (_producer(b, "Tanh") if op == "Mul" else None)
            if tanh is not None and op == "Mul":
                s = _softcap(node, tanh, plan, core, seen_scale, seen_softcap)
                seen_softcap = True
                continue
            if op == "Div" or _reaches_matmul(a):
                chain, c = a, b
            else:
                chain, c = b, a
            if not _reaches_matmul(chain):
                raise NotMine("no operand of the Mul comes from a MatMul")
            arr = const_array(c)
            if arr is None:
                src = "a graph input" if c.is_graph_input() else "computed at run time"
                raise Refuse(f"the scale {describe(c)} of {describe(node)} is not a constant ({src})", node)
            if arr.size != 1:
                raise Refuse(f"{describe(node)} scales the scores by a tensor of shape {list(arr.shape)}, "
                             "not a scalar", node)
            val = float(arr.reshape(()).astype(np.float64))
            if op == "Div":
                if val == 0:
                    raise Refuse(f"{describe(node)} divides the scores by 0", node)
                val = 1.0 / val
            plan.scale *= val  # upstream of a softcap seen so far: the usual order
            seen_scale = True
            core.append(node)
            s = chain
            continue
        raise NotMine(f"{op} between the MatMul and the Softmax")


def _softcap(mul: ir.Node, tanh: ir.Node, plan: Plan, core: list, seen_scale: bool, seen_softcap: bool) -> ir.Value:
    """cap * Tanh(x / cap) (or x * (1 / cap)); returns x."""
    other = mul.inputs[1] if mul.inputs[0] is tanh.outputs[0] else mul.inputs[0]
    cap = _scalar(other)
    if cap is None or cap <= 0:
        raise Refuse(f"{describe(mul)} multiplies Tanh by {describe(other)}, not a positive scalar constant "
                     "(a softcap)", mul)
    inner = _producer(tanh.inputs[0], "Div", "Mul")
    if inner is None:
        raise Refuse(f"the Tanh input of the softcap at {describe(mul)} is not scores / cap", tanh)
    a, b = inner.inputs[0], inner.inputs[1]
    if inner.op_type == "Div":
        x, c = a, _scalar(b)
        c = None if c in (None, 0) else c
    else:
        x, c = (a, _scalar(b)) if _reaches_matmul(a) else (b, _scalar(a))
        c = None if c in (None, 0) else 1.0 / c
    if c is None or not math.isclose(c, cap, rel_tol=1e-5):
        raise Refuse(f"softcap at {describe(mul)}: Tanh(x / {c}) * {cap:g} does not use one cap", mul)
    if seen_softcap:
        raise Refuse(f"a second softcap at {describe(mul)}", mul)
    if seen_scale:
        raise Refuse(f"the scores are scaled after the softcap at {describe(mul)}; attention scales before it", mul)
    plan.softcap = cap
    core += [mul, tanh, inner]
    return x


# ---------------------------------------------------------------------------
# the rule
# ---------------------------------------------------------------------------
def _merge_ok(reshape: ir.Node, transpose: ir.Node) -> bool:
    """Reshape(Transpose(ctx, [0, 2, 1, 3]), [B, S, H * Dv])."""
    if _perm_of(transpose, 4) != SPLIT_PERM:
        return False
    s_in, s_out = shape_of(transpose.outputs[0]), shape_of(reshape.outputs[0])
    if s_in is None or s_out is None or len(s_in) != 4 or len(s_out) != 3:
        return False
    return _reshape_ok(reshape, s_in, s_out, 2)


class DecomposedAttention(NormRule):
    RULE = RULE
    OP = OP

    def __init__(self, form: str) -> None:
        super().__init__(form, size=3 if form == "3d" else 1)
        self.form = form

    def pattern(self, op, p, v, shape):
        ctx = op.MatMul(p, v, _outputs=["ctx"])
        if self.form == "4d":
            return ctx
        return op.Reshape(op.Transpose(ctx, _outputs=["merged"]), shape, _outputs=["y"])

    def check(self, context, p: ir.Value, v: ir.Value, ctx: ir.Value, merged=None, y=None, **_) -> MatchResult:
        root = ctx.producer()
        plan = analyze(p, v, root)
        if self.form == "3d":
            heads = (plan.q, plan.k, plan.v)
            if not _merge_ok(y.producer(), merged.producer()):
                raise NotMine("the output is not merged by a plain Transpose + Reshape")
            if any(h.src3 is None and h.packed is None for h in heads):
                raise NotMine("Q, K or V is neither a plain head split nor a slice of a packed projection; "
                              "the 4-D form takes it")
            if plan.k.heads3 != plan.v.heads3:
                raise NotMine("K and V split into different head counts")
            if plan.q.heads3 % plan.k.heads3:
                raise Refuse(f"{plan.q.heads3} query heads are not a multiple of {plan.k.heads3} kv heads", root)
        self._plan = plan
        heads = (plan.q, plan.k, plan.v)
        reads = {(h.packed.x if h.packed else h.src3) if self.form == "3d" else h.base for h in heads}
        side = {n for n in plan.side if not any(o in reads for o in n.outputs)}
        dead = _dead(side, set(plan.core) | set(context.nodes))
        packed = [h.packed for h in heads if h.packed is not None] if self.form == "3d" else []
        for pk in packed:
            kept = [n for n in pk.nodes if n not in dead]
            if kept:  # a Split would copy x and the Transpose would stay: the 4-D form reads the slices
                raise NotMine(f"{describe(kept[0])} of the packed projection {describe(pk.x)} is used outside "
                              "this attention; the 4-D form takes it")
        self.absorb(*[n for n in plan.core if n is not root])
        self.absorb(*dead)
        details = {k: v for k, v in plan.notes.items()}
        details["form"] = self.form
        if packed:
            n = {pk.n for pk in packed}
            details["packed"] = (f"packed {'QKV' if n == {3} else 'projection'} "
                                 f"{fmt_shape(shape_of(packed[0].x))} split once on its last axis")
        if plan.causal:
            details["causal"] = True
        self.note(**details)
        return MatchResult()

    def _std(self, op, op_type: str, inputs, **attrs):
        base = (self._context.root.name or "attention").rsplit("/", 1)[0] if self._context else "attention"
        name = _recorder().unique_name(f"{base}/{op_type}")
        return op.op(op_type, *inputs, _domain="", _name=name, **attrs)

    def _four_d(self, op, h: Heads) -> ir.Value:
        if h.identity:
            return h.base
        return self._std(op, "Transpose", [h.base], perm=h.perm)

    def _three_d(self, op, heads) -> list[ir.Value]:
        """The 3-D inputs; one Split on the last axis per packed projection."""
        splits: dict = {}
        out = []
        for h in heads:
            if h.packed is None:
                out.append(h.src3)
                continue
            pk = h.packed
            if pk.x not in splits:
                width = shape_of(pk.x)[2] // pk.n
                sizes = np.full(pk.n, width, dtype=np.int64)
                if self._context is None or _opset(self._context.root) >= 13:
                    sizes_value = self._std(op, "Constant", [], value=ir.tensor(sizes))
                    parts = self._std(op, "Split", [pk.x, sizes_value], axis=2, _outputs=pk.n)
                else:
                    parts = self._std(op, "Split", [pk.x], axis=2, split=[int(d) for d in sizes], _outputs=pk.n)
                splits[pk.x] = list(parts) if isinstance(parts, (list, tuple)) else [parts]
            out.append(splits[pk.x][pk.slot])
        return out

    def _mask(self, op, plan: Plan):
        masks = plan.masks
        if not masks:
            return None
        if len(masks) == 1:
            m = masks[0]
            if m.kind == "bool":
                return self._std(op, "Not", [m.value]) if m.invert else m.value
            if m.value.dtype is not None and m.value.dtype != plan.dtype:
                return self._std(op, "Cast", [m.value], to=plan.dtype)
            return m.value
        zero = op.Constant(value=ir.tensor(np.zeros((), dtype=plan.dtype.numpy())))
        ninf = op.Constant(value=ir.tensor(np.full((), -np.inf, dtype=plan.dtype.numpy())))
        total = None
        for m in masks:
            if m.kind == "bool":
                val = self._std(op, "Where", [m.value, ninf, zero] if m.invert else [m.value, zero, ninf])
            elif m.value.dtype is not None and m.value.dtype != plan.dtype:
                val = self._std(op, "Cast", [m.value], to=plan.dtype)
            else:
                val = m.value
            total = val if total is None else self._std(op, "Add", [total, val])
        return total

    def rewrite(self, op, **_):
        plan = self._plan
        attrs = {"scale": float(plan.scale)}
        if plan.causal:
            attrs["is_causal"] = 1
        if plan.softcap:
            attrs["softcap"] = float(plan.softcap)
        if self.form == "3d":
            inputs = self._three_d(op, (plan.q, plan.k, plan.v))
            attrs["q_num_heads"] = int(plan.q.heads3)
            attrs["kv_num_heads"] = int(plan.k.heads3)
        else:
            inputs = [self._four_d(op, plan.q), self._four_d(op, plan.k), self._four_d(op, plan.v)]
        mask = self._mask(op, plan)
        return self.emit(op, OP, inputs + [mask], 1, **attrs)


def _dead(candidates: set, dying: set) -> list:
    """The candidates whose outputs are only read by dying nodes (transitively)."""
    dead = set(dying)
    changed = True
    out = []
    while changed:
        changed = False
        for node in candidates:
            if node in dead:
                continue
            if _used_outside(node, dead) is None:
                dead.add(node)
                out.append(node)
                changed = True
    return out


def rules():
    return [DecomposedAttention.rule("3d"), DecomposedAttention.rule("4d")]
