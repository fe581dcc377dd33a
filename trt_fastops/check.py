"""Check a rewritten model against its original with ONNX Runtime.

The original runs on ONNX Runtime's CPU execution provider (the reference);
the rewritten model runs with our custom-op library on the CPU or CUDA
execution provider, optionally with CUDA graphs. Both get the same seeded
random (or user-given) inputs, and every output is compared.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import onnx

# Tolerances by output dtype: the rewritten ops accumulate in float32 like the
# reference, but in a different order, and 16-bit outputs round once more.
DEFAULT_TOLERANCES = {
    np.dtype(np.float32): (1e-4, 1e-3),  # (atol, rtol)
    np.dtype(np.float16): (2e-2, 2e-2),
    np.dtype(np.float64): (1e-8, 1e-6),
}


class CheckError(RuntimeError):
    """The models could not be compared (bad file, missing runtime, bad inputs)."""


@dataclasses.dataclass
class OutputDiff:
    name: str
    shape: tuple
    dtype: str
    max_abs: float
    max_rel: float
    atol: float
    rtol: float
    ok: bool

    def line(self) -> str:
        verdict = "ok" if self.ok else "MISMATCH"
        return (f"  {self.name:24s} {str(self.shape):18s} {self.dtype:8s} "
                f"max|diff| {self.max_abs:.3e}  max rel {self.max_rel:.3e}  "
                f"(atol {self.atol:g}, rtol {self.rtol:g})  {verdict}")


@dataclasses.dataclass
class CheckReport:
    device: str
    cuda_graph: bool
    outputs: list[OutputDiff]

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    def to_text(self) -> str:
        mode = self.device + (" + CUDA graphs" if self.cuda_graph else "")
        head = f"rewritten ({mode}) vs original (ONNX Runtime CPU):"
        tail = "all outputs match" if self.ok else "outputs DIFFER beyond tolerance"
        return "\n".join([head, *(o.line() for o in self.outputs), tail])


def _load(model) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    path = Path(model)
    if not path.exists():
        raise CheckError(f"model file {path} does not exist")
    try:
        return onnx.load(str(path))
    except Exception as e:  # onnx raises DecodeError and friends
        raise CheckError(f"{path} is not a readable ONNX model: {e}") from e


_NP_TYPES = {
    onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.DOUBLE: np.float64, onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.INT32: np.int32, onnx.TensorProto.BOOL: np.bool_,
}


def random_inputs(model: onnx.ModelProto, *, seed: int = 0,
                  dims: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
    """Seeded random inputs for every graph input (initializers excluded).

    Symbolic dims take their value from `dims` (default 1). Float inputs are
    standard normal, integer inputs 0 or 1 (masks, ids), bool inputs random.
    """
    dims = dict(dims or {})
    rng = np.random.default_rng(seed)
    init_names = {t.name for t in model.graph.initializer}
    feeds = {}
    for inp in model.graph.input:
        if inp.name in init_names:
            continue
        tt = inp.type.tensor_type
        if tt.elem_type not in _NP_TYPES:
            raise CheckError(f"input '{inp.name}': element type "
                             f"{onnx.TensorProto.DataType.Name(tt.elem_type)} has no random generator; "
                             "pass the inputs yourself")
        shape = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                shape.append(d.dim_value)
            else:
                shape.append(int(dims.get(d.dim_param, 1)))
        dtype = np.dtype(_NP_TYPES[tt.elem_type])
        if dtype.kind == "f":
            feeds[inp.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[inp.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            feeds[inp.name] = rng.integers(0, 2, shape).astype(dtype)
    return feeds


def _run_reference(model: onnx.ModelProto, feeds) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def _run_rewritten(model: onnx.ModelProto, feeds, device: str, cuda_graph: bool,
                   tf32: bool) -> dict[str, np.ndarray]:
    from . import ort as ort_helpers

    # The CUDA EP runs float32 MatMul/Conv in TF32 by default (~1e-3 relative error), which would
    # hide what this check is about: our ops against the original graph. Off unless asked for.
    cuda = ("CUDAExecutionProvider", {"use_tf32": "1" if tf32 else "0"})
    providers = [cuda, "CPUExecutionProvider"] if device == "cuda" else ["CPUExecutionProvider"]
    sess = ort_helpers.make_session(model, providers=providers, cuda_graph=cuda_graph)
    names = [o.name for o in sess.get_outputs()]
    if not cuda_graph:
        return dict(zip(names, sess.run(names, feeds)))
    # CUDA graphs need inputs and outputs at fixed device addresses: bind OrtValues on the GPU.
    import onnxruntime as ort

    binding = sess.io_binding()
    dev_inputs = {k: ort.OrtValue.ortvalue_from_numpy(v, "cuda", 0) for k, v in feeds.items()}
    for k, v in dev_inputs.items():
        binding.bind_ortvalue_input(k, v)
    for n in names:
        binding.bind_output(n, "cuda", 0)
    sess.run_with_iobinding(binding)  # warm-up + capture
    sess.run_with_iobinding(binding)  # replay
    return dict(zip(names, (v.numpy() for v in binding.get_outputs())))


def compare_models(original, rewritten, *, device: str = "cpu", cuda_graph: bool = False,
                   inputs: Mapping[str, np.ndarray] | None = None, seed: int = 0,
                   dims: Mapping[str, int] | None = None,
                   atol: float | None = None, rtol: float | None = None, tf32: bool = False) -> CheckReport:
    """Run both models on the same inputs and compare every output of the original.

    tf32: let the CUDA EP use TF32 for float32 MatMul/Conv (its default; off here so
    that differences come from the rewritten ops, not from the other nodes' precision).
    """
    try:
        import onnxruntime  # noqa: F401
    except ImportError as e:
        raise CheckError("onnxruntime is not installed: pip install onnxruntime (or onnxruntime-gpu)") from e
    if device not in ("cpu", "cuda"):
        raise CheckError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if cuda_graph and device != "cuda":
        raise CheckError("CUDA graphs need --device cuda")
    orig, rew = _load(original), _load(rewritten)
    feeds = dict(inputs) if inputs is not None else random_inputs(orig, seed=seed, dims=dims)
    ref = _run_reference(orig, feeds)
    got = _run_rewritten(rew, feeds, device, cuda_graph, tf32)
    diffs = []
    for name, r in ref.items():
        if name not in got:
            raise CheckError(f"the rewritten model has no output '{name}' (outputs: {sorted(got)})")
        g = got[name]
        a_def, r_def = DEFAULT_TOLERANCES.get(np.dtype(r.dtype), (0.0, 0.0))
        a, rt = (atol if atol is not None else a_def), (rtol if rtol is not None else r_def)
        if g.shape != r.shape or g.dtype != r.dtype:
            diffs.append(OutputDiff(name, tuple(g.shape), str(g.dtype), float("inf"), float("inf"), a, rt, False))
            continue
        if r.dtype.kind in "fc":
            r64, g64 = r.astype(np.float64), g.astype(np.float64)
            err = np.abs(g64 - r64)
            max_abs = float(err.max()) if err.size else 0.0
            max_rel = float((err / np.maximum(np.abs(r64), 1e-12)).max()) if err.size else 0.0
            ok = bool(np.all(np.isfinite(g64) == np.isfinite(r64))) and bool(np.all(err <= a + rt * np.abs(r64)))
        else:
            max_abs = float(np.abs(g.astype(np.int64) - r.astype(np.int64)).max()) if r.size else 0.0
            max_rel, ok = max_abs, max_abs == 0
        diffs.append(OutputDiff(name, tuple(r.shape), str(r.dtype), max_abs, max_rel, a, rt, ok))
    return CheckReport(device, cuda_graph, diffs)


def cuda_available() -> bool:
    """A GPU is visible and onnxruntime has its CUDA execution provider."""
    try:
        import onnxruntime as ort

        from . import _C
    except ImportError:
        return False
    return _C.cuda_device_count() > 0 and "CUDAExecutionProvider" in ort.get_available_providers()


__all__: Sequence[str] = ["CheckError", "CheckReport", "OutputDiff", "compare_models", "cuda_available",
                          "random_inputs"]
