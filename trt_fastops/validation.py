"""Validate a rewritten model against its original through Polygraphy's comparator.

    import trt_fastops
    report = trt_fastops.validate("model.onnx", "model.fast.onnx")          # seeded random inputs
    print(report.to_text()); assert report.ok

Runners (Polygraphy ``OnnxrtRunner``s over sessions we build, because Polygraphy's own ONNX
Runtime loader cannot register a custom-op library):
  * reference: ONNX Runtime on the original model (CPU, or CUDA with reference_device="cuda");
  * trt_fastops: ONNX Runtime on the rewritten model with our ops (CPU or CUDA);
  * tensorrt (when TensorRT's Python package is there, or tensorrt=True): a TensorRT engine of the
    rewritten model with our plugins (one optimisation profile at the input shapes).
Each is compared with the reference, output by output, by Polygraphy's element-wise check: an
element passes when |ours - ref| <= atol or |ours - ref| / |ref| <= rtol. Default tolerances
depend on the output dtype (float32 1e-4 / 1e-3, float16 2e-2 / 2e-2); atol / rtol set them
for every output, output_atol / output_rtol per output.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import onnx

from .check import DEFAULT_TOLERANCES, CheckError, random_inputs

__all__ = ["ComparisonResult", "OutputResult", "ValidationError", "ValidationReport", "validate"]


class ValidationError(CheckError):
    """The models could not be compared (bad file, missing runtime, bad inputs or options)."""


@dataclasses.dataclass
class OutputResult:
    name: str
    shape: tuple
    dtype: str
    max_abs: float
    max_rel: float
    mean_abs: float
    atol: float
    rtol: float
    passed: bool

    def line(self) -> str:
        return (f"  {self.name:24s} {str(self.shape):16s} {self.dtype:8s} {self.max_abs:11.3e} {self.max_rel:11.3e} "
                f"{self.mean_abs:11.3e}  {self.atol:<8g} {self.rtol:<8g} {'ok' if self.passed else 'MISMATCH'}")


@dataclasses.dataclass
class ComparisonResult:
    runner: str  # e.g. "trt_fastops (ONNX Runtime CPU)"
    reference: str  # e.g. "original (ONNX Runtime CPU)"
    outputs: list

    @property
    def ok(self) -> bool:
        return all(o.passed for o in self.outputs)


@dataclasses.dataclass
class ValidationReport:
    comparisons: list
    skipped: list  # [(runner, reason)]
    inputs: str  # where the inputs came from

    @property
    def ok(self) -> bool:
        return bool(self.comparisons) and all(c.ok for c in self.comparisons)

    def to_text(self) -> str:
        lines = [f"inputs: {self.inputs}"]
        head = (f"  {'output':24s} {'shape':16s} {'dtype':8s} {'max|diff|':>11s} {'max rel':>11s} "
                f"{'mean|diff|':>11s}  {'atol':8s} {'rtol':8s} verdict")
        for c in self.comparisons:
            lines.append(f"{c.runner} vs {c.reference}: {'ok' if c.ok else 'MISMATCH'}")
            lines.append(head)
            lines.extend(o.line() for o in c.outputs)
        for runner, reason in self.skipped:
            lines.append(f"{runner}: not run ({reason})")
        lines.append("PASSED: every output within tolerance" if self.ok else
                     "FAILED: outputs differ beyond tolerance (an element passes when |diff| <= atol or "
                     "|diff| / |ref| <= rtol)")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "inputs": self.inputs,
                "comparisons": [{"runner": c.runner, "reference": c.reference, "ok": c.ok,
                                 "outputs": [dataclasses.asdict(o) for o in c.outputs]} for c in self.comparisons],
                "skipped": [{"runner": r, "reason": why} for r, why in self.skipped]}


def _load(model: Any, what: str) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    path = Path(model)
    if not path.exists():
        raise ValidationError(f"{what} model file {path} does not exist")
    try:
        return onnx.load(str(path))
    except Exception as e:  # onnx raises DecodeError and friends
        raise ValidationError(f"{path} is not a readable ONNX model: {e}") from e


def _polygraphy():
    try:
        from polygraphy.backend.onnxrt import OnnxrtRunner
        from polygraphy.comparator import Comparator, CompareFunc
        from polygraphy.logger import G_LOGGER
    except ImportError as e:
        raise ValidationError("trt-fastops validate needs Polygraphy: pip install polygraphy") from e
    import polygraphy.comparator as comparator

    simple = getattr(comparator, "SimpleCompareFunc", None) or CompareFunc.simple
    return OnnxrtRunner, Comparator, simple, G_LOGGER


def _providers(device: str) -> list:
    if device == "cuda":
        # TF32 off: differences should come from the rewritten ops, not from MatMul precision.
        return [("CUDAExecutionProvider", {"use_tf32": "0"}), "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def _check_device(device: str, what: str) -> None:
    if device not in ("cpu", "cuda"):
        raise ValidationError(f"{what} must be 'cpu' or 'cuda', got {device!r}")
    if device == "cuda":
        import onnxruntime as ort

        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise ValidationError(f"{what}='cuda' needs onnxruntime-gpu's CUDAExecutionProvider "
                                  f"(available: {ort.get_available_providers()})")


def _trt_runner(rewritten: onnx.ModelProto, feeds: Mapping[str, np.ndarray], name: str):
    from polygraphy.backend.trt import CreateConfig, EngineFromNetwork, NetworkFromOnnxBytes, Profile, TrtRunner

    from .runtime import load_trt_plugins

    load_trt_plugins()
    profile = Profile()
    for k, v in feeds.items():
        profile.add(k, min=v.shape, opt=v.shape, max=v.shape)
    network = NetworkFromOnnxBytes(rewritten.SerializeToString())
    engine = EngineFromNetwork(network, config=CreateConfig(profiles=[profile]))
    return TrtRunner(engine, name=name)


def validate(original: Any, rewritten: Any, *, inputs: Mapping[str, np.ndarray] | None = None, seed: int = 0,
             dims: Mapping[str, int] | None = None, device: str = "cpu", reference_device: str = "cpu",
             tensorrt: bool | str = "auto", atol: float | None = None, rtol: float | None = None,
             output_atol: Mapping[str, float] | None = None, output_rtol: Mapping[str, float] | None = None,
             verbose: bool = False) -> ValidationReport:
    """Compares `rewritten` with `original` (paths or onnx.ModelProto) through Polygraphy.

    inputs: feeds (default: seeded random, symbolic dims from `dims`, else 1). device: where our
    ORT session runs ('cpu' or 'cuda'); reference_device: where ORT runs the original.
    tensorrt: 'auto' (run TensorRT when importable), True (required) or False. atol / rtol: for
    every output (default by dtype); output_atol / output_rtol: {output name: tolerance}.
    verbose: let Polygraphy log. Raises ValidationError when the models cannot be compared.
    """
    try:
        import onnxruntime as ort
    except ImportError as e:
        raise ValidationError("onnxruntime is not installed: pip install onnxruntime (or onnxruntime-gpu)") from e
    OnnxrtRunner, Comparator, simple_compare, G_LOGGER = _polygraphy()
    _check_device(device, "device")
    _check_device(reference_device, "reference_device")
    if tensorrt not in (True, False, "auto"):
        raise ValidationError(f"tensorrt must be True, False or 'auto', got {tensorrt!r}")
    orig, rew = _load(original, "original"), _load(rewritten, "rewritten")
    if inputs is None:
        try:
            feeds = random_inputs(orig, seed=seed, dims=dims)
        except CheckError as e:
            raise ValidationError(str(e)) from e
        source = f"seeded random (seed {seed})"
    else:
        feeds = {k: np.asarray(v) for k, v in inputs.items()}
        source = "given"
    init = {t.name for t in orig.graph.initializer}
    expected = [i.name for i in orig.graph.input if i.name not in init]
    missing = [n for n in expected if n not in feeds]
    if missing:
        raise ValidationError(f"inputs lack {missing}; the model's inputs are {expected}")
    extra = [n for n in feeds if n not in expected]
    if extra:
        raise ValidationError(f"unknown input(s) {extra}; the model's inputs are {expected}")
    source += ": " + ", ".join(f"{k} {list(v.shape)} {v.dtype}" for k, v in feeds.items())

    from . import ort as ort_helpers

    def label(dev):
        return "ONNX Runtime " + ("CUDA" if dev == "cuda" else "CPU")

    ref_name = f"original ({label(reference_device)})"
    ours_name = f"trt_fastops ({label(device)})"
    try:
        ref_sess = ort.InferenceSession(orig.SerializeToString(), providers=_providers(reference_device))
        ours_sess = ort_helpers.make_session(rew, _providers(device))
    except Exception as e:  # noqa: BLE001 - ORT raises its own exception types
        raise ValidationError(f"ONNX Runtime could not load a model: {e}") from e
    ref_outputs = [o.name for o in ref_sess.get_outputs()]
    ours_outputs = [o.name for o in ours_sess.get_outputs()]
    lost = [n for n in ref_outputs if n not in ours_outputs]
    if lost:
        raise ValidationError(f"the rewritten model has no output(s) {lost} (its outputs: {ours_outputs})")

    runners = [OnnxrtRunner(ref_sess, name=ref_name), OnnxrtRunner(ours_sess, name=ours_name)]
    skipped = []
    trt_name = "TensorRT (trt_fastops plugins)"
    if tensorrt is False:
        skipped.append((trt_name, "tensorrt=False"))
    else:
        try:
            import tensorrt as _trt  # noqa: F401
        except ImportError:
            if tensorrt is True:
                raise ValidationError("tensorrt=True but TensorRT's Python package is not installed "
                                      "(pip install tensorrt)") from None
            skipped.append((trt_name, "TensorRT's Python package is not installed"))
        else:
            runners.append(_trt_runner(rew, feeds, trt_name))

    import contextlib

    quiet = contextlib.nullcontext() if verbose else G_LOGGER.verbosity(G_LOGGER.CRITICAL)
    try:
        with quiet:
            results = Comparator.run(runners, data_loader=[feeds])
    except Exception as e:  # noqa: BLE001 - Polygraphy wraps runner failures in its own exception
        raise ValidationError(f"running the models failed: {e}") from e

    ref_iter = results[0][1][0]
    atols, rtols = {}, {}
    for name in ref_outputs:
        a_def, r_def = DEFAULT_TOLERANCES.get(np.dtype(ref_iter[name].dtype), (0.0, 0.0))
        atols[name] = float((output_atol or {}).get(name, atol if atol is not None else a_def))
        rtols[name] = float((output_rtol or {}).get(name, rtol if rtol is not None else r_def))
    for opt, given in (("output_atol", output_atol), ("output_rtol", output_rtol)):
        unknown = [n for n in (given or {}) if n not in ref_outputs]
        if unknown:
            raise ValidationError(f"{opt} names unknown output(s) {unknown}; outputs: {ref_outputs}")

    compare = simple_compare(atol=atols, rtol=rtols, check_error_stat="elemwise",
                             find_output_func=lambda name, index, result: [name] if name in ref_outputs else None)
    # Polygraphy's relative error divides by the second runner's output: put the reference second.
    pairs = [(i, 0) for i in range(1, len(runners))]
    with quiet:
        accuracy = Comparator.compare_accuracy(results, comparisons=pairs, compare_func=compare)
    comparisons = []
    for i, _ in pairs:
        runner_name = runners[i].name
        pair_results = _pair_results(accuracy, runner_name, ref_name)
        ours_iter = results[i][1][0]
        outs = []
        for name in ref_outputs:
            ref = ref_iter[name]
            got = ours_iter[name] if name in ours_iter else None
            res = pair_results.get(name)
            if got is None or res is None:
                outs.append(OutputResult(name, tuple(ref.shape), str(ref.dtype), float("inf"), float("inf"),
                                         float("inf"), atols[name], rtols[name], False))
                continue
            got = np.asarray(got)
            same_layout = got.shape == ref.shape and got.dtype == ref.dtype
            mean_abs = getattr(res, "mean_absdiff", None)
            outs.append(OutputResult(name, tuple(got.shape), str(got.dtype), _as_float(res.max_absdiff),
                                     _as_float(res.max_reldiff), _as_float(mean_abs), atols[name], rtols[name],
                                     bool(res) and same_layout))
        comparisons.append(ComparisonResult(runner_name, ref_name, outs))
    return ValidationReport(comparisons, skipped, source)


def _pair_results(accuracy, runner: str, reference: str) -> dict:
    """{output name: OutputCompareResult} of the first iteration of (runner, reference)."""
    # Newer Polygraphy returns AccuracyResults (a list of AccuracyResult, one per compare
    # function), older ones a single AccuracyResult; an AccuracyResult maps (runner, reference)
    # to per-iteration {output: result} dicts. Neither is a dict subclass: go by contents.
    items = list(accuracy)
    candidates = [accuracy] if items and all(isinstance(i, tuple) for i in items) else items
    merged: dict = {}
    for acc in candidates:
        try:
            iterations = acc[(runner, reference)]
        except (KeyError, TypeError, IndexError):
            continue
        if iterations:
            merged.update(iterations[0])
    return merged


def _as_float(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def parse_output_tolerances(items: Sequence[str] | None, what: str) -> dict:
    """["name=0.01", ...] -> {"name": 0.01} (for the CLI)."""
    out = {}
    for item in items or []:
        name, sep, value = item.rpartition("=")
        try:
            out[name] = float(value)
        except ValueError:
            name = ""
        if not sep or not name:
            raise ValidationError(f"{what} expects OUTPUT=VALUE, got {item!r}")
    return out
