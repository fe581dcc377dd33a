"""A small graph-building helper shared by the model builders.

It names nodes and values the way the PyTorch exporter does
("/encoder/layer.0/attention/MatMul", "/encoder/layer.0/attention/MatMul_output_0"),
creates seeded random weights as initializers and scalar constants as Constant
nodes, and stamps every model with an IR version that matches its opsets (onnx
1.23 would write IR 14 by default, which ONNX Runtime 1.31 cannot read).
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DTYPES = {"float32": np.float32, "float16": np.float16}
ONNX_DTYPE = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
              np.dtype(np.int64): TensorProto.INT64, np.dtype(np.bool_): TensorProto.BOOL}


def numpy_dtype(dtype: str | type | np.dtype) -> np.dtype:
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise ValueError(f"unsupported dtype {dtype!r}; expected one of {sorted(DTYPES)}")
        return np.dtype(DTYPES[dtype])
    return np.dtype(dtype)


def ir_version_for(opset_imports: Sequence[onnx.OperatorSetIdProto]) -> int:
    """The smallest IR version that declares these (standard) opsets."""
    standard = [o for o in opset_imports if o.domain in ("", "ai.onnx")]
    return helper.find_min_ir_version_for(standard) if standard else 8


class GraphBuilder:
    """Accumulates nodes, initializers and graph inputs/outputs."""

    def __init__(self, name: str, *, dtype: str = "float32", seed: int = 0) -> None:
        self.name = name
        self.dtype = numpy_dtype(dtype)
        self.onnx_dtype = ONNX_DTYPE[self.dtype]
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._scope: list[str] = []
        self._used_names: set[str] = set()

    # -- naming ---------------------------------------------------------
    @contextlib.contextmanager
    def scope(self, name: str) -> Iterator[None]:
        self._scope.append(name)
        try:
            yield
        finally:
            self._scope.pop()

    def _unique(self, base: str) -> str:
        name, i = base, 0
        while name in self._used_names:
            i += 1
            name = f"{base}_{i}"
        self._used_names.add(name)
        return name

    def _node_name(self, op_type: str) -> str:
        prefix = "/" + "/".join(self._scope) + "/" if self._scope else "/"
        return self._unique(prefix + op_type)

    # -- graph interface ------------------------------------------------
    def input(self, name: str, elem_type: int, shape: Sequence[int | str]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))
        return name

    def output(self, value: str, name: str, elem_type: int, shape: Sequence[int | str]) -> str:
        """Expose `value` as graph output `name` (through an Identity when the names differ)."""
        if value != name:
            self.node("Identity", [value], outputs=[name])
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))
        return name

    def node(self, op_type: str, inputs: Sequence[str], *, outputs: Sequence[str] | int = 1,
             domain: str = "", **attrs) -> str | list[str]:
        """Append a node; returns its output name (or names when it has several)."""
        name = self._node_name(op_type)
        if isinstance(outputs, int):
            outputs = [self._unique(f"{name}_output_{i}") for i in range(outputs)]
        else:
            for out in outputs:
                if out:
                    self._used_names.add(out)
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), name=name,
                                           domain=domain or None, **attrs))
        return outputs[0] if len(outputs) == 1 else list(outputs)

    def weight(self, name: str, shape: Sequence[int], *, std: float = 0.02, mean: float = 0.0,
               dtype: np.dtype | None = None) -> str:
        """A seeded random initializer (normal(mean, std)) in the model dtype."""
        arr = (mean + std * self.rng.standard_normal(tuple(shape))).astype(dtype or self.dtype)
        return self.tensor(name, arr)

    def tensor(self, name: str, arr: np.ndarray) -> str:
        name = self._unique(name)
        self.initializers.append(numpy_helper.from_array(np.asarray(arr), name=name))
        return name

    def const(self, value, dtype: np.dtype | type | None = None) -> str:
        """A Constant node holding `value` (a scalar or list), as the exporter emits them."""
        arr = np.asarray(value, dtype=dtype if dtype is not None else self.dtype)
        name = self._node_name("Constant")
        out = self._unique(f"{name}_output_0")
        self.nodes.append(helper.make_node("Constant", [], [out], name=name,
                                           value=numpy_helper.from_array(arr)))
        return out

    def ints(self, values: Sequence[int]) -> str:
        return self.const(list(values), dtype=np.int64)

    # -- finishing --------------------------------------------------------
    def model(self, opset: int, *, extra_opsets: Sequence[tuple[str, int]] = (),
              doc: str = "") -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs,
                                  initializer=self.initializers)
        opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
        model = helper.make_model(graph, opset_imports=opsets, producer_name="trt_fastops.models",
                                  doc_string=doc)
        model.ir_version = ir_version_for(opsets)
        return model
