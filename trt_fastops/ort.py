"""ONNX Runtime sessions with the trt_fastops custom ops registered.

    from trt_fastops.ort import make_session
    sess = make_session(model)                                   # CPU (reference kernels)
    sess = make_session(model, ("CUDAExecutionProvider",))       # CUDA kernels
    sess = make_session(model, ("CUDAExecutionProvider",), cuda_graph=True)

The ops live in the ONNX domain ``trt_fastops`` (see trt_fastops.DOMAIN) and
are registered for CPUExecutionProvider and CUDAExecutionProvider.
"""
from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path
from typing import Any, Sequence

from . import library_path

CPU_EP = "CPUExecutionProvider"
CUDA_EP = "CUDAExecutionProvider"


def _onnxruntime():
    try:
        import onnxruntime
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "trt_fastops.ort needs onnxruntime: pip install onnxruntime (CPU) or "
            "onnxruntime-gpu (CUDA)"
        ) from e
    return onnxruntime


# SessionOptions that already carry the library: registering it twice into one
# SessionOptions makes session creation fail ("Domain already set in registry").
_registered = weakref.WeakSet()
_registered_lock = threading.Lock()


def session_options(so=None):
    """Return `so` (or a new onnxruntime.SessionOptions) with the trt_fastops
    custom-op library registered (once, however often this is called on it)."""
    ort = _onnxruntime()
    if so is None:
        so = ort.SessionOptions()
    with _registered_lock:
        if so not in _registered:
            so.register_custom_ops_library(library_path("ort"))
            _registered.add(so)
    return so


_session_options = session_options  # make_session's keyword argument shadows the name


def _provider_name(p: Any) -> str:
    return p[0] if isinstance(p, (tuple, list)) else p


def _model_arg(model: Any):
    """ModelProto -> serialized bytes; bytes stay; str/Path -> path string."""
    if isinstance(model, (bytes, bytearray)):
        return bytes(model)
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.exists():
            raise FileNotFoundError(f"trt_fastops.ort.make_session: model file {path} does not exist")
        return str(path)
    serialize = getattr(model, "SerializeToString", None)
    if serialize is None:
        raise TypeError(
            "trt_fastops.ort.make_session: model must be an onnx.ModelProto, bytes, str or "
            f"pathlib.Path, got {type(model).__name__}"
        )
    return serialize()


def make_session(
    model: Any,
    providers: Sequence[Any] = (CPU_EP,),
    *,
    cuda_graph: bool = False,
    session_options=None,
):
    """An onnxruntime.InferenceSession for `model` with the trt_fastops ops.

    model: onnx.ModelProto, serialized bytes, or a path (str / Path).
    providers: execution providers in priority order; entries may be names or
        (name, options) pairs as onnxruntime accepts them.
    cuda_graph: capture and replay the run as a CUDA graph (sets the CUDA EP's
        enable_cuda_graph option; needs CUDAExecutionProvider and IO binding
        with device buffers, see the onnxruntime docs).
    session_options: an onnxruntime.SessionOptions to use (the library is
        registered into it); a new one by default.
    """
    ort = _onnxruntime()
    providers = list(providers)
    if not providers:
        raise ValueError("trt_fastops.ort.make_session: providers is empty")
    names = [_provider_name(p) for p in providers]
    available = ort.get_available_providers()
    missing = [n for n in names if n not in available]
    if missing:
        hint = (" (CUDAExecutionProvider comes with onnxruntime-gpu, which needs a CUDA GPU and "
                "matching CUDA/cuDNN libraries)" if CUDA_EP in missing else "")
        raise RuntimeError(
            f"trt_fastops.ort.make_session: execution provider(s) {missing} not available in "
            f"onnxruntime {ort.__version__}; available: {available}{hint}"
        )
    if cuda_graph:
        if CUDA_EP not in names:
            raise ValueError("trt_fastops.ort.make_session: cuda_graph=True needs CUDAExecutionProvider in providers")
        i = names.index(CUDA_EP)
        opts = dict(providers[i][1]) if isinstance(providers[i], (tuple, list)) else {}
        opts["enable_cuda_graph"] = "1"
        providers[i] = (CUDA_EP, opts)
    so = _session_options(session_options)
    return ort.InferenceSession(_model_arg(model), sess_options=so, providers=providers)


__all__ = ["CPU_EP", "CUDA_EP", "make_session", "session_options"]
