"""The `trt-fastops` command line."""
from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap

EXAMPLES = textwrap.dedent("""\
    examples:
      trt-fastops info
      trt-fastops rewrite model.onnx -o model.fast.onnx --report rewrite.json
      trt-fastops rewrite model.onnx -o model.fast.onnx --ops LayerNorm,RMSNorm
      trt-fastops rewrite model.onnx -o model.fast.onnx --ops Attention
      trt-fastops rewrite convnet.onnx -o convnet.fast.onnx --conv fallback
      trt-fastops rewrite vit.onnx -o vit.ort.onnx --target ort      # ONNX Runtime only: + BiasGelu
      trt-fastops check model.onnx model.fast.onnx
      trt-fastops check model.onnx model.fast.onnx --device cuda --cuda-graph
      trt-fastops validate model.onnx model.fast.onnx --output-atol logits=1e-3
      trt-fastops run model.fast.onnx --dim batch=8 --dim sequence=128 --iterations 200
      trt-fastops bench model.onnx model.fast.onnx --dim batch=1 --dim sequence=128
      trt-fastops build-engine model.trt.onnx -o model.engine --fp16 --shape input_ids=1x8:8x128:32x512
    """)

ALL_OPS = ("LayerNorm", "SkipLayerNorm", "RMSNorm", "Attention", "Conv", "ConvTranspose")
#: ops only --target ort emits: ONNX Runtime contrib ops (com.microsoft; one rule makes both
#: BiasGelu for the erf GELU and FastGelu for the tanh one, so either name selects it) and our
#: Dense (MatMul + bias in one GEMM) and EmbedLayerNorm (BERT's embedding lookups + their layer
#: norm in one kernel), which have no TensorRT plugin
ORT_OPS = ("BiasGelu", "FastGelu", "Dense", "EmbedLayerNorm")
TARGETS = ("portable", "ort")
TARGET_HELP = ("portable (default): standard ONNX + trt_fastops ops only, so the file runs in ONNX Runtime "
               "and TensorRT; ort: ONNX Runtime only, may also use its contrib ops (Linear bias + GELU -> "
               "com.microsoft.BiasGelu / FastGelu), Dense (MatMul + bias in one GEMM), EmbedLayerNorm (BERT's "
               "embedding in one kernel) and packed Q/K/V projections, the faster choice for ONNX Runtime")


def _cmd_info(args) -> int:
    import trt_fastops

    info: dict = {"trt_fastops": trt_fastops.__version__, "libraries": {}}
    for kind in ("kernels", "ort", "trt", "trt_autoload"):
        try:
            info["libraries"][kind] = trt_fastops.library_path(kind)
        except FileNotFoundError:
            info["libraries"][kind] = None
    try:
        from trt_fastops import _C

        info["build"] = _C.build_info()
        info["gpus"] = _C.devices()
    except ImportError as e:
        info["build"] = f"native module not importable: {e}"
        info["gpus"] = []
    for mod in ("onnx", "onnxruntime", "onnxscript", "onnx_ir", "numpy"):
        try:
            info[mod] = __import__(mod).__version__
        except ImportError:
            info[mod] = None
    try:
        import onnxruntime as ort

        info["onnxruntime_providers"] = ort.get_available_providers()
    except ImportError:
        info["onnxruntime_providers"] = []
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"trt_fastops {info['trt_fastops']}")
    for kind, path in info["libraries"].items():
        note = "" if path else ("  (not built: needs TensorRT headers)" if kind.startswith("trt") else "  (missing)")
        print(f"  library {kind:8s} {path or '-'}{note}")
    build = info["build"]
    if isinstance(build, dict):
        print(f"  CUDA architectures: {build['cuda_archs']} (nvcc {build['cuda_compiler']})")
        print(f"  headers: onnxruntime C API {build['ort_api_version']}, cuDNN {build['cudnn_headers']}, "
              f"cudnn-frontend {build['cudnn_frontend_headers']}, CUTLASS {build['cutlass_headers']}")
    else:
        print(f"  {build}")
    print("  python: " + ", ".join(f"{m} {info[m] or '-'}" for m in ("onnx", "onnxruntime", "onnxscript",
                                                                       "onnx_ir", "numpy")))
    print(f"  onnxruntime providers: {', '.join(info['onnxruntime_providers']) or '-'}")
    if info["gpus"]:
        for g in info["gpus"]:
            print(f"  GPU {g['index']}: {g['name']} (sm_{g['capability'].replace('.', '')}, "
                  f"{g['memory_bytes'] / 2**30:.0f} GiB, {g['multiprocessors']} SMs)")
    else:
        print("  GPU: none visible (CPU custom ops only)")
    return 0


def _parse_ops(text: str | None, target: str | None = None, plugin_attributes: bool = False):
    if target == "ort" and plugin_attributes:
        raise _UsageError("--plugin-attributes makes a file for TensorRT, which cannot read the "
                          "ONNX Runtime contrib ops of --target ort; use --target portable (the default)")
    if not text:
        return None
    ops = [o.strip() for o in text.split(",") if o.strip()]
    bad = [o for o in ops if o not in ALL_OPS + ORT_OPS]
    if bad:
        raise _UsageError(f"unknown op(s) {', '.join(bad)}; choose from {', '.join(ALL_OPS + ORT_OPS)}")
    contrib = [o for o in ops if o in ORT_OPS]
    if contrib and target != "ort":
        raise _UsageError(f"--ops {','.join(contrib)} names ONNX Runtime-only ops; add "
                          "--target ort (the file then runs in ONNX Runtime only)")
    return ops


def _cmd_rewrite(args) -> int:
    from .rewriter import RewriteError, rewrite_file

    try:
        ops = _parse_ops(args.ops, args.target, args.plugin_attributes)
        result = rewrite_file(args.input, args.output, ops=ops, report_path=args.report,
                              plugin_attributes=args.plugin_attributes, conv=args.conv, target=args.target)
    except (RewriteError, _UsageError) as e:
        print(f"trt-fastops rewrite: {e}", file=sys.stderr)
        return 2
    print(result.report.to_text())
    print(f"wrote {args.output}" + (f" and {args.report}" if args.report else ""))
    return 0


def _cmd_check(args) -> int:
    from .check import CheckError, compare_models, cuda_available

    device = args.device
    if device == "auto":
        device = "cuda" if cuda_available() else "cpu"
    dims = {}
    for item in args.dim or []:
        name, _, value = item.partition("=")
        if not value.isdigit():
            raise SystemExit(f"trt-fastops check: --dim expects NAME=INT, got {item!r}")
        dims[name] = int(value)
    inputs = None
    if args.inputs:
        import numpy as np

        with np.load(args.inputs) as f:
            inputs = {k: f[k] for k in f.files}
    try:
        report = compare_models(args.original, args.rewritten, device=device, cuda_graph=args.cuda_graph,
                                inputs=inputs, seed=args.seed, dims=dims, atol=args.atol, rtol=args.rtol,
                                tf32=args.tf32)
    except CheckError as e:
        print(f"trt-fastops check: {e}", file=sys.stderr)
        return 2
    print(report.to_text())
    return 0 if report.ok else 1


def _cmd_validate(args) -> int:
    from .check import CheckError, cuda_available
    from .validation import ValidationError, parse_output_tolerances, validate

    device = args.device
    if device == "auto":
        device = "cuda" if cuda_available() else "cpu"
    try:
        dims = {}
        for item in args.dim or []:
            name, _, value = item.partition("=")
            if not name or not value.isdigit():
                raise ValidationError(f"--dim expects NAME=INT, got {item!r}")
            dims[name] = int(value)
        inputs = None
        if args.inputs:
            import numpy as np

            try:
                with np.load(args.inputs) as f:
                    inputs = {k: f[k] for k in f.files}
            except (OSError, ValueError) as e:
                raise ValidationError(f"cannot read inputs from {args.inputs}: {e}") from e
        report = validate(args.original, args.rewritten, inputs=inputs, seed=args.seed, dims=dims, device=device,
                          reference_device=args.reference_device,
                          tensorrt={"auto": "auto", "on": True, "off": False}[args.tensorrt],
                          atol=args.atol, rtol=args.rtol,
                          output_atol=parse_output_tolerances(args.output_atol, "--output-atol"),
                          output_rtol=parse_output_tolerances(args.output_rtol, "--output-rtol"),
                          verbose=args.verbose)
    except CheckError as e:  # ValidationError included
        print(f"trt-fastops validate: {e}", file=sys.stderr)
        return 2
    print(report.to_text())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report.to_dict(), f, indent=2)
    return 0 if report.ok else 1


# ---------------------------------------------------------------------------
# run / bench / build-engine: thin layers over trt_fastops.runtime


class _UsageError(Exception):
    """A problem with the command's arguments or environment; the message says what to do."""


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _parse_dims(items) -> dict:
    dims = {}
    for item in items or []:
        name, _, value = item.partition("=")
        if not name or not value.isdigit():
            raise _UsageError(f"--dim expects NAME=INT (a symbolic input dim, e.g. --dim batch=8), got {item!r}")
        dims[name] = int(value)
    return dims


def _feeds(path: str, args) -> dict:
    """numpy inputs: --inputs NPZ, else seeded random (symbolic dims from --dim, else 1)."""
    import numpy as np
    import onnx

    from .check import CheckError, random_inputs

    if args.inputs:
        try:
            with np.load(args.inputs) as f:
                return {k: f[k] for k in f.files}
        except (OSError, ValueError) as e:
            raise _UsageError(f"cannot read inputs from {args.inputs}: {e} (expected an .npz of input name -> "
                              "array, e.g. np.savez('feeds.npz', input_ids=ids))") from e
    if not os.path.exists(path):
        raise _UsageError(f"model file {path} does not exist")
    try:
        model = onnx.load(path, load_external_data=False)  # the graph inputs are enough
    except Exception as e:  # onnx raises DecodeError and friends
        raise _UsageError(f"{path} is not a readable ONNX model: {e}") from e
    try:
        return random_inputs(model, seed=args.seed, dims=_parse_dims(args.dim))
    except CheckError as e:
        raise _UsageError(str(e)) from e


def _resolve_device(text: str) -> str:
    if text != "auto":
        return text
    from .check import cuda_available

    return "cuda:0" if cuda_available() else "cpu"


def _open_model(model, device: str, graphs: bool):
    from .runtime import OrtModel

    try:
        return OrtModel(model, device, cuda_graph=graphs, copy_outputs=False)
    except (RuntimeError, ValueError, FileNotFoundError) as e:
        raise _UsageError(f"{e}") from e


def _staged(feeds: dict, device: int) -> dict:
    """Inputs in device memory (DeviceTensor) so runs time the model, not host copies."""
    if device < 0:
        return feeds
    import numpy as np

    from . import _C
    from .runtime import DeviceTensor

    out = {}
    for name, arr in feeds.items():
        arr = np.ascontiguousarray(arr)
        buf = _C.DeviceBuffer(device, max(arr.nbytes, 1))
        _C.copy_bytes(buf.ptr, arr.ctypes.data, arr.nbytes, device=device)
        out[name] = DeviceTensor(buf.ptr, arr.shape, arr.dtype, device, owner=buf)
    return out


def _to_host(value):
    import numpy as np

    from .runtime import DeviceTensor

    if isinstance(value, DeviceTensor):
        from . import _C

        if value.dtype == "bfloat16":
            raise _UsageError("a bfloat16 output cannot be saved with numpy")
        out = np.empty(value.shape, dtype=np.dtype(value.dtype))
        _C.copy_bytes(out.ctypes.data, value.ptr, value.nbytes, device=value.device)
        return out
    return np.asarray(value)


def _time_runs(model, inputs: dict, warmup: int, iterations: int) -> dict:
    """Latency percentiles (ms) of `iterations` runs after `warmup` runs."""
    import time

    import numpy as np

    def once():
        model.run(inputs)
        if model.device >= 0:
            from . import _C

            _C.device_synchronize(model.device)

    for _ in range(warmup):
        once()
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        once()
        times.append((time.perf_counter() - t0) * 1e3)
    t = np.asarray(times)
    return {"iterations": iterations, "mean_ms": float(t.mean()), "min_ms": float(t.min()),
            "p50_ms": float(np.percentile(t, 50)), "p90_ms": float(np.percentile(t, 90)),
            "p99_ms": float(np.percentile(t, 99)), "max_ms": float(t.max())}


def _check_counts(args) -> None:
    if args.warmup < 1 or args.iterations < 1:
        raise _UsageError("--warmup and --iterations must be >= 1 (the first run of a shape captures its CUDA graph)")


def _cmd_run(args) -> int:
    try:
        _check_counts(args)
        feeds = _feeds(args.model, args)
        device = _resolve_device(args.device)
        _progress(f"loading {args.model} on {device} ...")
        model = _open_model(args.model, device, not args.no_cuda_graph)
        inputs = _staged(feeds, model.device)
        _progress(f"{args.warmup} warm-up run(s) (the first captures the CUDA graph), then {args.iterations} timed ...")
        lat = _time_runs(model, inputs, args.warmup, args.iterations)
        outputs = model.run(inputs)
        host = {k: _to_host(v) for k, v in outputs.items()}
    except _UsageError as e:
        print(f"trt-fastops run: {e}", file=sys.stderr)
        return 2
    stats = model.stats()
    mode = "CUDA graphs" if stats["cuda_graphs"] else f"no CUDA graphs ({stats['graph_fallback']})"
    print(f"{args.model} on {stats['device']}, {mode}")
    print("  inputs:  " + ", ".join(f"{k} {list(v.shape)} {v.dtype}" for k, v in feeds.items()))
    print("  outputs: " + ", ".join(f"{k} {list(v.shape)} {v.dtype}" for k, v in host.items()))
    print(f"  latency over {lat['iterations']} runs (ms): p50 {lat['p50_ms']:.3f}  p90 {lat['p90_ms']:.3f}  "
          f"p99 {lat['p99_ms']:.3f}  mean {lat['mean_ms']:.3f}  min {lat['min_ms']:.3f}  max {lat['max_ms']:.3f}")
    if model.device >= 0:
        print("  (inputs staged on the device once; outputs stay there: host copies are not timed)")
    if args.output:
        import numpy as np

        np.savez(args.output, **host)
        print(f"wrote {args.output}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "inputs": {k: list(v.shape) for k, v in feeds.items()},
                       "latency": lat, "stats": stats}, f, indent=2)
    return 0


def _cmd_bench(args) -> int:
    import numpy as np

    try:
        _check_counts(args)
        if args.target is not None and not args.rewrite:
            raise _UsageError("--target applies to the in-memory rewrite: add --rewrite")
        feeds = _feeds(args.models[0], args)
        device = _resolve_device(args.device)
        variants = []
        suffix = " (rewritten)" if args.target in (None, "portable") else f" (rewritten, target {args.target})"
        for path in args.models:
            variants.append((path, path))
            if args.rewrite:
                from .rewriter import RewriteError, rewrite

                _progress(f"rewriting {path} ...")
                try:
                    variants.append((f"{path}{suffix}", rewrite(path, conv=args.conv, target=args.target).model))
                except RewriteError as e:
                    raise _UsageError(str(e)) from e
        modes = [False] if device == "cpu" or args.no_cuda_graph else [False, True]
        rows, ref = [], None
        for label, model in variants:
            for graphs in modes:
                _progress(f"{label}{' + CUDA graphs' if graphs else ''}: loading, {args.warmup} warm-up, "
                          f"{args.iterations} timed runs ...")
                m = _open_model(model, device, graphs)
                if set(m.input_names) != set(feeds):
                    raise _UsageError(f"{label} has inputs {m.input_names}, the first model {sorted(feeds)}: bench "
                                      "compares models with the same inputs")
                inputs = _staged(feeds, m.device)
                lat = _time_runs(m, inputs, args.warmup, args.iterations)
                out = {k: _to_host(v) for k, v in m.run(inputs).items()}
                if ref is None:
                    ref, diff = out, 0.0
                else:
                    diff = max((float(np.max(np.abs(out[k].astype(np.float64) - r) / (1 + np.abs(r))))
                                if k in out and out[k].shape == r.shape and r.size else float("inf"))
                               for k, r in ref.items())
                st = m.stats()
                rows.append({"model": label, "cuda_graphs": st["cuda_graphs"], "graph_fallback": st["graph_fallback"],
                             "device": st["device"], "max_scaled_diff_vs_first": diff, **lat})
                m = None
    except _UsageError as e:
        print(f"trt-fastops bench: {e}", file=sys.stderr)
        return 2
    width = max(len(r["model"]) for r in rows) + 8
    print(f"{'model':{width}s} {'p50 ms':>9s} {'p90 ms':>9s} {'speedup':>8s} {'max diff':>9s}")
    base = rows[0]["p50_ms"]
    for r in rows:
        label = r["model"] + (" +graphs" if r["cuda_graphs"] else "")
        print(f"{label:{width}s} {r['p50_ms']:9.3f} {r['p90_ms']:9.3f} {base / r['p50_ms']:7.2f}x "
              f"{r['max_scaled_diff_vs_first']:9.2e}")
    print("inputs: " + ", ".join(f"{k} {list(v.shape)} {v.dtype}" for k, v in feeds.items()) +
          "; speedup = first row's p50 / p50; max diff = max |a - b| / (1 + |b|) against the first row")
    if args.json:
        with open(args.json, "w") as f:
            doc = {"inputs": {k: list(v.shape) for k, v in feeds.items()}, "rows": rows}
            if args.rewrite:
                doc["rewrite"] = {"conv": args.conv or "off", "target": args.target or "portable"}
            json.dump(doc, f, indent=2)
    return 0


def _parse_shapes(items) -> dict:
    def dims(text, item):
        try:
            out = tuple(int(d) for d in text.lower().split("x"))
        except ValueError:
            out = ()
        if not out or any(d < 0 for d in out):
            raise _UsageError(f"--shape expects NAME=MIN:OPT:MAX with dims like 1x128, got {item!r}")
        return out

    shapes = {}
    for item in items or []:
        name, _, spec = item.partition("=")
        parts = spec.split(":")
        if not name or len(parts) != 3:
            raise _UsageError(f"--shape expects NAME=MIN:OPT:MAX (e.g. input_ids=1x8:8x128:32x512), got {item!r}")
        shapes[name] = tuple(dims(p, item) for p in parts)
    return shapes


def _cmd_build_engine(args) -> int:
    from .runtime import TensorRTUnavailable, TrtEngine

    try:
        shapes = _parse_shapes(args.shape)
        if not os.path.exists(args.model):
            raise _UsageError(f"model file {args.model} does not exist")
        _progress(f"building a TensorRT engine from {args.model} (this can take minutes) ...")
        try:
            TrtEngine.build(args.model, shapes=shapes or None, fp16=args.fp16, device=args.device, save=args.output)
        except TensorRTUnavailable as e:
            raise _UsageError(f"{e}") from e
        except FileNotFoundError as e:  # the TensorRT plugin library was not built
            raise _UsageError(f"{e}") from e
    except _UsageError as e:
        print(f"trt-fastops build-engine: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}")
    return 0


def _add_run_options(s) -> None:
    s.add_argument("--inputs", help=".npz file with the inputs (default: seeded random)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--dim", action="append", metavar="NAME=INT", help="value of a symbolic input dim (default 1)")
    s.add_argument("--device", default="auto", help="auto (cuda:0 when available), cpu, cuda or cuda:N")
    s.add_argument("--no-cuda-graph", action="store_true", help="plain runs (default: one CUDA graph per input shape)")
    s.add_argument("--warmup", type=int, default=3, help="untimed runs first (the first captures the graph)")
    s.add_argument("--iterations", type=int, default=50, help="timed runs")
    s.add_argument("--json", metavar="PATH", help="also write the results as JSON")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trt-fastops", description="Fast custom ops for ONNX Runtime and TensorRT.",
                                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("info", help="library paths, versions, CUDA architectures, visible GPUs")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON")
    s.set_defaults(func=_cmd_info)

    s = sub.add_parser("rewrite", help="rewrite an ONNX model to use trt_fastops ops",
                       epilog=textwrap.dedent("""\
                           examples:
                             trt-fastops rewrite bert.onnx -o bert.fast.onnx --report r.json
                             trt-fastops rewrite vit.onnx -o vit.ort.onnx --target ort
                             trt-fastops rewrite bert.onnx -o bert.trt.onnx --plugin-attributes

                           --target portable (the default) writes standard ONNX + trt_fastops ops: the file runs
                           in ONNX Runtime with our library and in TensorRT with our plugins. --target ort also
                           emits ONNX Runtime contrib ops where trt_fastops has none (Linear bias + GELU ->
                           com.microsoft.BiasGelu / FastGelu, which ONNX Runtime's own fusions miss after it
                           turns MatMul + bias into Gemm), trt_fastops.Dense for the other MatMul + bias pairs
                           and one packed Q/K/V MatMul per attention: faster in ONNX Runtime, not loadable by
                           TensorRT.
                           """),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("input", help="ONNX model to rewrite (external data next to it is kept external)")
    s.add_argument("-o", "--output", required=True, help="where to write the rewritten model")
    s.add_argument("--ops", help=f"comma-separated subset of {','.join(ALL_OPS)} (default: all), and with "
                                 f"--target ort {','.join(ORT_OPS)} (default on for ort; BiasGelu and FastGelu "
                                 "are one rule)")
    s.add_argument("--target", choices=TARGETS, help=TARGET_HELP)
    s.add_argument("--conv", choices=("off", "fallback", "all"),
                   help="which Conv/ConvTranspose to rewrite: off (default, unless --ops names a conv op), "
                        "fallback (only those cuDNN runs poorly: dilated 3-D, odd grouped, asymmetric pads, ...), "
                        "all")
    s.add_argument("--report", help="also write the rewrite report (every rewrite and refusal) as JSON")
    s.add_argument("--plugin-attributes", action="store_true",
                   help="add TensorRT plugin fields to every trt_fastops node: plugin_version/namespace, "
                        "and the inputs/outputs slot bitmasks where a node needs them (norm and Attention "
                        "nodes with a dropped middle input or more outputs than Y); the file still runs in "
                        "ONNX Runtime")
    s.set_defaults(func=_cmd_rewrite)

    s = sub.add_parser("check", help="compare a rewritten model with its original on ONNX Runtime",
                       epilog="exit status: 0 all outputs match, 1 a mismatch, 2 could not compare")
    s.add_argument("original")
    s.add_argument("rewritten")
    s.add_argument("--device", choices=("auto", "cpu", "cuda"), default="cpu",
                   help="where the rewritten model runs (the original always runs on ORT CPU); "
                        "auto = cuda when a GPU and onnxruntime-gpu are present")
    s.add_argument("--cuda-graph", action="store_true", help="run the rewritten model with CUDA graphs")
    s.add_argument("--inputs", help=".npz file with the inputs (default: seeded random)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--dim", action="append", metavar="NAME=INT", help="value of a symbolic input dim")
    s.add_argument("--tf32", action="store_true",
                   help="let the CUDA EP use TF32 for float32 MatMul/Conv (off by default: it adds ~1e-3 error)")
    s.add_argument("--atol", type=float)
    s.add_argument("--rtol", type=float)
    s.set_defaults(func=_cmd_check)

    s = sub.add_parser("validate", help="compare a rewritten model with its original through Polygraphy "
                                        "(ONNX Runtime with our ops, and TensorRT when installed)",
                       epilog=textwrap.dedent("""\
                           examples:
                             trt-fastops validate bert.onnx bert.fast.onnx
                             trt-fastops validate bert.onnx bert.fast.onnx --inputs feeds.npz --atol 1e-3
                             trt-fastops validate bert.onnx bert.fast.onnx --device cuda --output-rtol logits=1e-2

                           An element passes when |diff| <= atol or |diff| / |reference| <= rtol (Polygraphy's
                           element-wise check). exit status: 0 all outputs match, 1 a mismatch, 2 could not compare
                           """),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("original", help="the model before rewriting")
    s.add_argument("rewritten", help="the model after trt-fastops rewrite")
    s.add_argument("--inputs", help=".npz file with the inputs (default: seeded random)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--dim", action="append", metavar="NAME=INT", help="value of a symbolic input dim (default 1)")
    s.add_argument("--device", choices=("auto", "cpu", "cuda"), default="cpu",
                   help="where ONNX Runtime runs the rewritten model with our ops")
    s.add_argument("--reference-device", choices=("cpu", "cuda"), default="cpu",
                   help="where ONNX Runtime runs the original model")
    s.add_argument("--tensorrt", choices=("auto", "on", "off"), default="auto",
                   help="also compare a TensorRT engine with our plugins: auto = when TensorRT is installed")
    s.add_argument("--atol", type=float, help="absolute tolerance for every output (default by dtype)")
    s.add_argument("--rtol", type=float, help="relative tolerance for every output (default by dtype)")
    s.add_argument("--output-atol", action="append", metavar="OUTPUT=VALUE", help="absolute tolerance of one output")
    s.add_argument("--output-rtol", action="append", metavar="OUTPUT=VALUE", help="relative tolerance of one output")
    s.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    s.add_argument("--verbose", action="store_true", help="show Polygraphy's own log")
    s.set_defaults(func=_cmd_validate)

    s = sub.add_parser("run", help="time a model on ONNX Runtime with our ops (latency percentiles)",
                       epilog=textwrap.dedent("""\
                           examples:
                             trt-fastops run model.fast.onnx
                             trt-fastops run model.fast.onnx --dim batch=8 --dim sequence=128 --iterations 200
                             trt-fastops run model.fast.onnx --inputs feeds.npz --output outputs.npz --no-cuda-graph

                           Runs through trt_fastops.runtime.OrtModel: CUDA execution provider with one CUDA graph
                           per input shape (plain runs on the CPU). On a GPU the inputs are copied to the device
                           once and the outputs stay there, so the latency is the model's. exit status: 0 ok,
                           2 could not run (the message says why)
                           """),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("model", help="ONNX model (rewritten or not)")
    _add_run_options(s)
    s.add_argument("--output", metavar="NPZ", help="save the outputs of the last run")
    s.set_defaults(func=_cmd_run)

    s = sub.add_parser("bench", help="time models side by side (with and without CUDA graphs) on the same inputs",
                       epilog=textwrap.dedent("""\
                           examples:
                             trt-fastops bench model.onnx model.fast.onnx --dim batch=1 --dim sequence=128
                             trt-fastops bench model.onnx --rewrite            # the original and its rewrite
                             trt-fastops bench convnet.onnx --rewrite --conv all --device cuda:1
                             trt-fastops bench vit.onnx --rewrite --target ort   # + ONNX Runtime contrib ops

                           Every model gets the first model's inputs; each row reports p50 / p90 latency, the
                           speedup over the first row and the largest output difference from it. For the model
                           zoo at realistic sizes against onnxruntime's optimizer see scripts/bench_models.py.
                           """),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("models", nargs="+", help="ONNX models with the same inputs; the first is the baseline")
    s.add_argument("--rewrite", action="store_true", help="also time each model after trt-fastops rewrite (in memory)")
    s.add_argument("--conv", choices=("off", "fallback", "all"), help="conv policy for --rewrite (default off)")
    s.add_argument("--target", choices=TARGETS, help="rewrite target for --rewrite: " + TARGET_HELP)
    _add_run_options(s)
    s.set_defaults(func=_cmd_bench)

    s = sub.add_parser("build-engine", help="build a TensorRT engine with the trt_fastops plugins (needs TensorRT)",
                       epilog=textwrap.dedent("""\
                           examples:
                             trt-fastops rewrite model.onnx -o model.trt.onnx --plugin-attributes
                             trt-fastops build-engine model.trt.onnx -o model.engine --fp16
                             trt-fastops build-engine model.trt.onnx -o model.engine \\
                                 --shape input_ids=1x8:8x128:32x512 --shape attention_mask=1x8:8x128:32x512

                           Needs TensorRT's Python package (pip install tensorrt) and the plugin library
                           (built when TensorRT headers are found, see README 'TensorRT'); load the engine
                           with trt_fastops.runtime.TrtEngine.load. exit status: 0 ok, 2 could not build
                           """),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("model", help="ONNX model, rewritten with --plugin-attributes")
    s.add_argument("-o", "--output", required=True, help="where to write the serialized engine")
    s.add_argument("--shape", action="append", metavar="NAME=MIN:OPT:MAX",
                   help="optimisation profile of an input with dynamic dims, dims like 1x128")
    s.add_argument("--fp16", action="store_true", help="allow float16 kernels")
    s.add_argument("--device", type=int, default=0, help="CUDA device index")
    s.set_defaults(func=_cmd_build_engine)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
