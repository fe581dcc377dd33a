"""The `trt-fastops` command line."""
from __future__ import annotations

import argparse
import json
import sys
import textwrap

EXAMPLES = textwrap.dedent("""\
    examples:
      trt-fastops info
      trt-fastops rewrite model.onnx -o model.fast.onnx --report rewrite.json
      trt-fastops rewrite model.onnx -o model.fast.onnx --ops LayerNorm,RMSNorm
      trt-fastops rewrite model.onnx -o model.fast.onnx --ops Attention
      trt-fastops rewrite convnet.onnx -o convnet.fast.onnx --conv fallback
      trt-fastops check model.onnx model.fast.onnx
      trt-fastops check model.onnx model.fast.onnx --device cuda --cuda-graph
      trt-fastops validate model.onnx model.fast.onnx --output-atol logits=1e-3
    """)

ALL_OPS = ("LayerNorm", "SkipLayerNorm", "RMSNorm", "Attention", "Conv", "ConvTranspose")


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


def _parse_ops(text: str | None):
    if not text:
        return None
    ops = [o.strip() for o in text.split(",") if o.strip()]
    bad = [o for o in ops if o not in ALL_OPS]
    if bad:
        raise SystemExit(f"trt-fastops rewrite: unknown op(s) {', '.join(bad)}; choose from {', '.join(ALL_OPS)}")
    return ops


def _cmd_rewrite(args) -> int:
    from .rewriter import RewriteError, rewrite_file

    try:
        result = rewrite_file(args.input, args.output, ops=_parse_ops(args.ops), report_path=args.report,
                              plugin_attributes=args.plugin_attributes, conv=args.conv)
    except RewriteError as e:
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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trt-fastops", description="Fast custom ops for ONNX Runtime and TensorRT.",
                                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("info", help="library paths, versions, CUDA architectures, visible GPUs")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON")
    s.set_defaults(func=_cmd_info)

    s = sub.add_parser("rewrite", help="rewrite an ONNX model to use trt_fastops ops",
                       epilog="example: trt-fastops rewrite bert.onnx -o bert.fast.onnx --report r.json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("input", help="ONNX model to rewrite (external data next to it is kept external)")
    s.add_argument("-o", "--output", required=True, help="where to write the rewritten model")
    s.add_argument("--ops", help=f"comma-separated subset of {','.join(ALL_OPS)} (default: all)")
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
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
