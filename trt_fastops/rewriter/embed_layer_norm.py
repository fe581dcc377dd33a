"""BERT's embedding -> trt_fastops.EmbedLayerNorm: three lookups, their sum and its layer norm
in one kernel.

Only with target="ort": EmbedLayerNorm has no TensorRT plugin (the portable file keeps the
Gathers and our SkipLayerNorm, which TensorRT runs). In ONNX Runtime the exported form is six
kernels, one of them a copy node inside a CUDA graph (the positions sliced from an arange
buffer); at BERT-base batch 1 fusing them saved 11-42 µs per replay (scripts/replay_phases.py).

Runs after skip_layer_norm, which has turned LayerNormalization(Add(Add(a, b), c)) into
SkipLayerNorm(Add(a, b), c) (or with X and Skip the other way round).

pattern: SkipLayerNorm(Add(Gather(T1, i1), Gather(T2, i2)), Gather(T3, i3), gamma, beta?), and
with X and Skip swapped.
check:
- the norm has no bias input, axis -1, and only its Y is used;
- every Gather has axis 0 and a 2-D table [rows, H]; the tables, gamma and beta share X's dtype;
  the indices are int32 or int64;
- exactly one Gather looks up positions 0..S-1, the op's default (so the slice and its copy go):
  its indices are a constant arange [1, S] with S the token ids' static length, or
  Slice(C, [0], end, [1] or [-1][, [1]]) of a constant arange C [1, N] with `end` provably the
  sequence length of the token ids (Unsqueeze(Gather(Shape(ids), 1), [0]), Shape(ids, start=1,
  end=2) or Slice(Shape(ids), [1], [2]));
- the other two index tensors are [B, S] with the same (known or symbolic) dims; the larger
  table becomes word_embedding, the other segment_embedding (the sum does not care).
"""
from __future__ import annotations

import numpy as np
import onnx_ir as ir
from onnxscript.rewriter._basics import MatchResult

from ._common import (DOMAIN, FLOAT_TYPES, NormRule, Refuse, attr_float, attr_int, const_array, describe,
                      dtype_name, fmt_shape, has_other_uses, producer_of, same_dim, shape_of)

RULE = "embed_layer_norm"
OP = "EmbedLayerNorm"
INDEX_TYPES = (ir.DataType.INT32, ir.DataType.INT64)


def _ints(v: ir.Value | None) -> list[int] | None:
    a = const_array(v)
    return None if a is None or a.dtype.kind not in "iu" else [int(x) for x in a.reshape(-1)]


def _dim1_source(end: ir.Value) -> ir.Value | None:
    """x when `end` (a 1-D [1] int tensor) is provably x.shape[1], else None."""
    unsq = producer_of(end, "Unsqueeze")
    if unsq is not None:
        axes = _ints(unsq.inputs[1]) if len(unsq.inputs) > 1 else list(unsq.attributes.get_ints("axes", []))
        gather = producer_of(unsq.inputs[0], "Gather")
        if axes != [0] or gather is None or attr_int(gather, "axis", 0) != 0 or _ints(gather.inputs[1]) != [1]:
            return None
        shape = producer_of(gather.inputs[0], "Shape")
        if shape is None or attr_int(shape, "start", 0) != 0:
            return None
        return shape.inputs[0]
    shape = producer_of(end, "Shape")
    if shape is not None:
        return shape.inputs[0] if (attr_int(shape, "start", 0), attr_int(shape, "end", 0)) == (1, 2) else None
    sl = producer_of(end, "Slice")
    if sl is not None:
        shape = producer_of(sl.inputs[0], "Shape")
        axes = _ints(sl.inputs[3]) if len(sl.inputs) > 3 and sl.inputs[3] is not None else [0]
        steps = _ints(sl.inputs[4]) if len(sl.inputs) > 4 and sl.inputs[4] is not None else [1]
        if (shape is not None and attr_int(shape, "start", 0) == 0 and _ints(sl.inputs[1]) == [1]
                and _ints(sl.inputs[2]) == [2] and axes == [0] and steps == [1]):
            return shape.inputs[0]
    return None


def _is_arange_row(c) -> bool:
    return c is not None and c.ndim == 2 and c.shape[0] == 1 and np.array_equal(c[0], np.arange(c.shape[1]))


def _arange_positions(indices: ir.Value) -> tuple[ir.Value | int | None, str]:
    """Whether `indices` are positions 0..L-1: (the tensor whose dim 1 is L, "") for Slice(arange
    [1, N], [0], end, [1] | [-1][, [1]]), (L, "") for a constant arange [1, L] (static exports);
    else (None, why not)."""
    if _is_arange_row(const_array(indices)):
        return int(const_array(indices).shape[1]), ""
    sl = producer_of(indices, "Slice")
    if sl is None:
        return None, f"its indices {describe(indices)} are neither an arange [1, S] nor a Slice of one"
    if not _is_arange_row(const_array(sl.inputs[0])):
        return None, f"{describe(sl)} slices {describe(sl.inputs[0])}, not a constant arange [1, N]"
    axes = _ints(sl.inputs[3]) if len(sl.inputs) > 3 and sl.inputs[3] is not None else None
    steps = _ints(sl.inputs[4]) if len(sl.inputs) > 4 and sl.inputs[4] is not None else [1]
    if _ints(sl.inputs[1]) != [0] or axes not in ([1], [-1]) or steps != [1]:
        return None, f"{describe(sl)} is not [:, 0:end] of the arange"
    source = _dim1_source(sl.inputs[2])
    if source is None:
        return None, (f"the end of {describe(sl)} is not provably the sequence length (Shape(ids)[1]); the positions "
                      "would not be 0..S-1")
    return source, ""


class EmbedLayerNormFusion(NormRule):
    RULE = RULE
    OP = OP
    STAGE = 2  # after skip_layer_norm (stage 1)
    ORT_ONLY = True

    def __init__(self, swap: bool) -> None:
        super().__init__("skip_first" if swap else "", size=5)
        self.swap = swap

    def pattern(self, op, t1, i1, t2, i2, t3, i3, gamma):
        s = op.Add(op.Gather(t1, i1, _outputs=["g1"]), op.Gather(t2, i2, _outputs=["g2"]), _outputs=["s"])
        p = op.Gather(t3, i3, _outputs=["g3"])
        x, skip = (p, s) if self.swap else (s, p)
        return op.SkipLayerNorm(x, skip, gamma, _domain=DOMAIN, _allow_other_inputs=True, _outputs=["y"])

    def check(self, context, y: ir.Value, s: ir.Value, gamma: ir.Value, **b) -> MatchResult:
        norm = y.producer()
        dt = s.dtype
        if len(norm.inputs) > 4 and norm.inputs[4] is not None:
            raise Refuse(f"{describe(norm)} has a bias input; EmbedLayerNorm has none", norm)
        for out in norm.outputs[1:]:
            if has_other_uses(out):
                raise Refuse(f"{describe(norm)}'s output {describe(out)} is used; EmbedLayerNorm gives only Y", norm)
        if attr_int(norm, "axis", -1) not in (-1, 2):
            raise Refuse(f"{describe(norm)} normalises axis {attr_int(norm, 'axis', -1)}, not the hidden axis", norm)
        if dt not in FLOAT_TYPES:
            raise Refuse(f"the embedding sum {describe(s)} is {dtype_name(dt)}", s)
        beta = norm.inputs[3] if len(norm.inputs) > 3 else None
        for v, what in ((gamma, "gamma"), (beta, "beta")):
            if v is not None and v.dtype != dt:
                raise Refuse(f"{what} {describe(v)} is {dtype_name(v.dtype)}, the embeddings {dtype_name(dt)}", v)
        lookups = []
        for k in (1, 2, 3):
            g = b[f"g{k}"].producer()
            table, idx = b[f"t{k}"], b[f"i{k}"]
            ts = shape_of(table)
            if attr_int(g, "axis", 0) != 0:
                raise Refuse(f"{describe(g)} gathers along axis {attr_int(g, 'axis', 0)}, not 0", g)
            if ts is None or len(ts) != 2 or table.dtype != dt:
                raise Refuse(f"{describe(g)} reads {describe(table)} ({fmt_shape(ts)}, {dtype_name(table.dtype)}), "
                             f"not a 2-D {dtype_name(dt)} table", g)
            if idx.dtype not in INDEX_TYPES:
                raise Refuse(f"{describe(g)}'s indices {describe(idx)} are {dtype_name(idx.dtype)}, not int32 or "
                             "int64", g)
            lookups.append((g, table, idx))
        positions, why = [], []
        for g, table, idx in lookups:
            source, reason = _arange_positions(idx)
            if source is not None:
                positions.append((g, table, idx, source))
            else:
                why.append(f"{describe(g)}: {reason}")
        if len(positions) != 1:
            raise Refuse("no position lookup of positions 0..S-1 (" + "; ".join(why) + ")" if not positions else
                         "more than one lookup of positions 0..S-1", norm)
        pos_gather, pos_table, _, source = positions[0]
        (_, t_a, i_a), (_, t_b, i_b) = [lk for lk in lookups if lk[0] is not pos_gather]
        sa, sb = shape_of(i_a), shape_of(i_b)
        src = None if isinstance(source, int) else shape_of(source)

        def same(u, v):
            return u is not None and v is not None and len(u) == len(v) == 2 and all(
                isinstance(d, (int, str)) and same_dim(d, e) for d, e in zip(u, v))

        if not same(sa, sb):
            raise Refuse(f"the token ids {describe(i_a)} {fmt_shape(sa)} and {describe(i_b)} {fmt_shape(sb)} are not "
                         "known to be one [B, S] shape", norm)
        if isinstance(source, int):  # a constant arange [1, L]: L must be the (static) sequence length
            if sa[1] != source:
                raise Refuse(f"the constant positions 0..{source - 1} do not span the token ids' sequence "
                             f"{fmt_shape(sa)}", norm)
        elif source not in (i_a, i_b) and not same(src, sa):
            raise Refuse(f"the positions run to the length of {describe(source)} {fmt_shape(src)}, not known to be "
                         f"the token ids' sequence {fmt_shape(sa)}", norm)
        rows_a, rows_b = shape_of(t_a)[0], shape_of(t_b)[0]
        word_first = not (isinstance(rows_a, int) and isinstance(rows_b, int) and rows_b > rows_a)
        self._word = (t_a, i_a) if word_first else (t_b, i_b)
        self._segment = (t_b, i_b) if word_first else (t_a, i_a)
        self._position = pos_table
        self._gamma, self._beta = gamma, beta
        self._epsilon = attr_float(norm, "epsilon", 1e-5)
        return MatchResult()

    def rewrite(self, op, **_):
        (word, ids), (segment, seg_ids) = self._word, self._segment
        return self.emit(op, OP, [ids, seg_ids, word, self._position, segment, self._gamma, self._beta], 1,
                         epsilon=self._epsilon)


def rules():
    return [EmbedLayerNormFusion.rule(swap) for swap in (False, True)]
