"""Shared planning for the skip fusions: which addends become X, Skip and Bias.

The pattern matched s = Add(a, b) feeding a norm. One of a/b may itself be an
Add with a 1-D bias constant ("Add(bias, MatMul)" of a Linear layer before the
residual Add, or a bias added after it); that inner Add is absorbed when nothing
else uses its result. Of the two remaining addends, X must have the full shape
of s; Skip must equal it or broadcast over leading dims only.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from ._common import (Refuse, const_array, describe, drop_leading_ones, fmt_shape, has_other_uses, producer_of,
                      same_dim, same_shape, shape_of)


@dataclasses.dataclass
class SkipPlan:
    x: ir.Value
    skip: ir.Value
    bias: ir.Value | None = None
    absorbed: ir.Node | None = None
    #: X and Skip have dynamic dims that could not be proven equal (see _assumed_pair)
    assumed: bool = False


def _full(v: ir.Value, x_shape) -> bool:
    s = shape_of(v)
    return s is not None and same_shape(s, x_shape)


def skip_problem(skip: ir.Value, x_shape, axis: int) -> str | None:
    """Why `skip` cannot be the Skip of an X of shape x_shape (None if it can)."""
    s = shape_of(skip)
    if s is None:
        return f"the shape of {describe(skip)} is unknown"
    t = drop_leading_ones(s)
    rank = len(x_shape)
    if len(t) > rank or len(t) < rank - axis or not same_shape(t, x_shape[rank - len(t):]):
        return (f"{describe(skip)} has shape {fmt_shape(s)}; Skip must equal X's shape {fmt_shape(x_shape)} "
                f"or broadcast over leading dims only (covering the normalized dims [{axis}, {rank}))")
    return None


def _pair(u: ir.Value, v: ir.Value, x_shape, axis: int) -> tuple[SkipPlan | None, str]:
    """X = the full-shaped one of (u, v), Skip = the other; or why neither works."""
    problems = []
    for x, skip in ((u, v), (v, u)):
        if _full(x, x_shape):
            problem = skip_problem(skip, x_shape, axis)
            if problem is None:
                return SkipPlan(x, skip), ""
            problems.append(problem)
    if problems:
        return None, problems[0]
    plan = _assumed_pair(u, v, len(x_shape), axis)
    if plan is not None:
        return plan, ""
    return None, (f"neither {describe(u)} ({fmt_shape(shape_of(u))}) nor {describe(v)} "
                  f"({fmt_shape(shape_of(v))}) has the full shape {fmt_shape(x_shape)} of the sum, "
                  "so neither can be X")


def _assumed_pair(u: ir.Value, v: ir.Value, rank: int, axis: int) -> SkipPlan | None:
    """Dynamic shapes: shape inference often cannot prove that two residual-stream tensors of
    shape [batch, seq, H] have equal dims. Accept X=u, Skip=v when both have the sum's rank,
    equal normalized dims, and no leading dim that is statically 1 on one side only (a real
    broadcast). Should the dims differ at run time, the op reports a shape error."""
    su, sv = shape_of(u), shape_of(v)
    if su is None or sv is None or len(su) != rank or len(sv) != rank:
        return None
    for i, (a, b) in enumerate(zip(su, sv)):
        if i >= axis:
            if not (isinstance(a, int) and same_dim(a, b)):
                return None
        elif (a == 1) != (b == 1):
            return None
    return SkipPlan(u, v, assumed=True)


def _is_bias(c: ir.Value, x_shape, axis: int) -> bool:
    """A 1-D tensor of the (single) normalized dim: a Linear layer's bias."""
    s = shape_of(c)
    norm = drop_leading_ones(x_shape[axis:])
    if s is None or len(s) != 1 or len(norm) != 1 or not same_shape(s, norm):
        return False
    return const_array(c) is not None or c.is_initializer() or c.is_graph_input()


def plan_skip(add: ir.Node, x_shape, axis: int) -> SkipPlan:
    """Choose X, Skip and (absorbed) Bias for s = add(a, b); raise Refuse if nothing fits."""
    a, b = add.inputs[0], add.inputs[1]
    if x_shape is None:
        raise Refuse(f"the rank of {describe(add.outputs[0])} is unknown; cannot check Skip broadcasting", add)
    for inner_val, other in ((a, b), (b, a)):
        inner = producer_of(inner_val, "Add")
        if inner is None or has_other_uses(inner_val, add):
            continue
        u, v = inner.inputs[0], inner.inputs[1]
        # bias added before the residual: Add(Add(m, bias), other)
        for m, c in ((u, v), (v, u)):
            if _is_bias(c, x_shape, axis):
                plan, _ = _pair(m, other, x_shape, axis)
                if plan is not None:
                    return dataclasses.replace(plan, bias=c, absorbed=inner)
        # bias added after the residual: Add(Add(u, v), bias)
        if _is_bias(other, x_shape, axis):
            plan, _ = _pair(u, v, x_shape, axis)
            if plan is not None:
                return dataclasses.replace(plan, bias=other, absorbed=inner)
    plan, reason = _pair(a, b, x_shape, axis)
    if plan is None:
        raise Refuse(reason, add)
    return plan


def numel(shape) -> int:
    return int(np.prod([d for d in shape], dtype=np.int64))
