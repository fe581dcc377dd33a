"""trt_fastops: fast, verified custom ops for ONNX Runtime and TensorRT.

    import trt_fastops
    trt_fastops.library_path("ort")      # -> .../trt_fastops/lib/libtrt_fastops_ort.so
    trt_fastops.rewrite(model)           # ONNX graph -> graph using trt_fastops ops
"""
from __future__ import annotations

import os
from pathlib import Path

__version__ = "0.1.0"

#: ONNX domain of every op this package provides.
DOMAIN = "trt_fastops"
#: Op-set version of DOMAIN.
OPSET_VERSION = 1

_LIB_NAMES = {
    "ort": "libtrt_fastops_ort.so",
    "kernels": "libtrt_fastops_kernels.so",
    "trt": "libtrt_fastops_trt.so",
    # Registers the TensorRT plugins when dlopen()ed (trtexec --staticPlugins, polygraphy --plugins, Triton).
    "trt_autoload": "libtrt_fastops_trt_autoload.so",
}


def _lib_dir() -> Path:
    # TRT_FASTOPS_LIBRARY_DIR lets a developer point at a build tree.
    override = os.environ.get("TRT_FASTOPS_LIBRARY_DIR")
    return Path(override) if override else Path(__file__).resolve().parent / "lib"


def library_path(kind: str = "ort") -> str:
    """Absolute path of one of the installed native libraries.

    kind: "ort" (ONNX Runtime custom ops), "kernels" (the CUDA kernel library),
    "trt" (TensorRT plugins, for IPluginRegistry::loadLibrary / --dynamicPlugins) or
    "trt_autoload" (the same plugins, registering themselves when loaded). Raises FileNotFoundError, saying why, when the
    library is not there.
    """
    if kind not in _LIB_NAMES:
        raise ValueError(f"library_path: unknown kind {kind!r}; expected one of {sorted(_LIB_NAMES)}")
    path = _lib_dir() / _LIB_NAMES[kind]
    if not path.exists():
        hint = ("the TensorRT plugin library is built only when TensorRT headers are found "
                "(see README, 'TensorRT')" if kind == "trt" or kind == "trt_autoload" else
                "reinstall the package (pip install .) so the native libraries are built")
        raise FileNotFoundError(f"trt_fastops: {path} does not exist; {hint}")
    return str(path)


def rewrite(model, **kwargs):
    """Rewrite an ONNX model (ModelProto, onnx_ir.Model or path) to use trt_fastops ops.

    See trt_fastops.rewriter.rewrite for the arguments.
    """
    from .rewriter import rewrite as _rewrite

    return _rewrite(model, **kwargs)


def validate(original, rewritten, **kwargs):
    """Compare a rewritten model with its original through Polygraphy (ONNX Runtime with our
    ops, and TensorRT when installed); returns a report with .ok and .to_text().

    See trt_fastops.validation.validate for the arguments.
    """
    from .validation import validate as _validate

    return _validate(original, rewritten, **kwargs)


__all__ = ["DOMAIN", "OPSET_VERSION", "__version__", "library_path", "rewrite", "validate"]
