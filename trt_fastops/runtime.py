"""Run models fast: ONNX Runtime sessions and TensorRT engines with CUDA graphs.

    from trt_fastops.runtime import OrtModel
    model = OrtModel("bert.fast.onnx")                 # cuda:0 when a GPU and onnxruntime-gpu are there, else CPU
    out = model.run({"input_ids": ids, "attention_mask": mask})    # {output name: value}
    model.stats()                                      # graphs on/off (and why), cache hits, captures, ...

    from trt_fastops.runtime import TrtEngine          # needs TensorRT's Python package
    engine = TrtEngine.build("bert.fast.onnx", shapes={"input_ids": ((1, 8), (8, 128), (32, 512))})
    engine.save("bert.engine"); engine = TrtEngine.load("bert.engine")
    out = engine.run({"input_ids": ids})

Inputs are numpy arrays, DLPack tensors (torch, cupy, ...: anything with ``__dlpack__``) or
:class:`DeviceTensor` (a raw device pointer with shape and dtype). Outputs come back as the
kind of the first input: numpy arrays, tensors of the same framework (through its
``from_dlpack``), or DeviceTensor objects that own their memory.

CUDA graphs. OrtModel captures one graph per input-shape signature with the CUDA execution
provider's ``gpu_graph_id`` run option (one id per signature, never reused); inputs are
copied into per-signature device buffers so every replay sees the addresses it captured.
TrtEngine captures ``enqueueV3`` through the native graph cache (``trt_fastops._C.GraphCache``),
which updates the executable graph in place when only addresses change. Both keep a bounded LRU
of signatures: ``TRT_FASTOPS_GRAPH_CACHE`` (environment, default 8) or the ``graph_cache``
argument. Where capture is impossible (CPU execution provider, a node ONNX Runtime cannot
capture, a failed capture) the model runs without graphs and ``stats()["graph_fallback"]`` (and
the ``trt_fastops.runtime`` logger) says why.

Threads. One lock per model: concurrent ``run`` calls on one model are serialised (correct,
not parallel); use one model per thread for parallel work. Models on different GPUs run at
the same time. A run that may capture a graph takes a process-wide lock exclusively (plain
runs and replays of every OrtModel take it shared), because ONNX Runtime captures in
cudaStreamCaptureModeGlobal, where a CUDA allocation or synchronous copy from another thread
would invalidate the capture. ONNX Runtime keeps captured graphs per calling thread: the first
run of a shape on a new thread captures again.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import importlib
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any, Mapping

import numpy as np

__all__ = ["DEFAULT_GRAPH_CACHE", "GRAPH_CACHE_ENV", "DeviceTensor", "OrtModel", "TensorRTUnavailable",
           "TrtEngine", "graph_cache_capacity", "load_trt_plugins"]

log = logging.getLogger("trt_fastops.runtime")

#: Environment variable: how many input-shape signatures (captured graphs) a model keeps.
GRAPH_CACHE_ENV = "TRT_FASTOPS_GRAPH_CACHE"
DEFAULT_GRAPH_CACHE = 8

# dtype name -> (ONNX element type, DLPack type code, bits)
_DTYPES = {
    "float32": (1, 2, 32), "float16": (10, 2, 16), "bfloat16": (16, 4, 16), "float64": (11, 2, 64),
    "int8": (3, 0, 8), "uint8": (2, 1, 8), "int16": (5, 0, 16), "int32": (6, 0, 32), "int64": (7, 0, 64),
    "bool": (9, 6, 8),
}
_ORT_TYPE_NAMES = {"float": "float32", "double": "float64"}  # tensor(float) -> float32, ...
_KDL_CPU, _KDL_CUDA, _KDL_CUDA_HOST = 1, 2, 3


def graph_cache_capacity(value: int | None = None) -> int:
    """The graph-cache capacity: `value` if given, else $TRT_FASTOPS_GRAPH_CACHE, else 8."""
    source = "graph_cache"
    if value is None:
        text = os.environ.get(GRAPH_CACHE_ENV, "").strip()
        if not text:
            return DEFAULT_GRAPH_CACHE
        source = GRAPH_CACHE_ENV
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{GRAPH_CACHE_ENV}={text!r} is not an integer (number of cached graphs, e.g. 8)") \
                from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{source} must be a positive integer (number of cached graphs), got {value!r}")
    return value


def _dtype_name(dtype: Any) -> str:
    """numpy dtype / name / ORT 'tensor(float16)' -> one of _DTYPES."""
    if isinstance(dtype, str):
        text = dtype
        if text.startswith("tensor(") and text.endswith(")"):
            text = _ORT_TYPE_NAMES.get(text[7:-1], text[7:-1])
        if text in _DTYPES:
            return text
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = None
    if name in _DTYPES:
        return name
    raise TypeError(f"unsupported dtype {dtype!r}; supported: {', '.join(_DTYPES)}")


def _native():
    try:
        from . import _C
    except ImportError as e:  # pragma: no cover - depends on the build
        raise ImportError("trt_fastops.runtime needs the native module trt_fastops._C; build the package "
                          "(pip install .)") from e
    return _C


def _onnxruntime():
    try:
        import onnxruntime
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("OrtModel needs onnxruntime (CPU) or onnxruntime-gpu (CUDA): pip install onnxruntime-gpu") \
            from e
    return onnxruntime


# ---------------------------------------------------------------------------
# Tensors


@dataclasses.dataclass(eq=False)
class DeviceTensor:
    """A compact row-major tensor at a raw pointer.

    ptr: device address (int); shape: dims; dtype: float32, float16, bfloat16, float64, int8, uint8,
    int16, int32, int64 or bool (names or numpy dtypes); device: CUDA device index, or -1 for host
    memory. owner: whatever keeps the memory alive (None: the caller does).

    Implements the DLPack protocol, so ``torch.from_dlpack(t)`` / ``cupy.from_dlpack(t)`` view it
    without a copy.
    """

    ptr: int
    shape: tuple
    dtype: str
    device: int = 0
    owner: Any = None

    def __post_init__(self):
        self.ptr = int(self.ptr)
        self.shape = tuple(int(d) for d in self.shape)
        self.dtype = _dtype_name(self.dtype)
        self.device = int(self.device)
        if any(d < 0 for d in self.shape):
            raise ValueError(f"DeviceTensor: negative dimension in shape {self.shape}")
        if self.ptr == 0 and self.nbytes:
            raise ValueError("DeviceTensor: null pointer for a non-empty tensor")

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * _DTYPES[self.dtype][2] // 8

    def __dlpack_device__(self):
        return (_KDL_CUDA, self.device) if self.device >= 0 else (_KDL_CPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        # The data is complete when a runner hands out a DeviceTensor (it synchronised), so the
        # consumer's stream needs no wait.
        if copy:
            raise BufferError("DeviceTensor.__dlpack__: copy=True is not supported (export is zero-copy)")
        _, code, bits = _DTYPES[self.dtype]
        dev_type, dev_id = self.__dlpack_device__()
        return _native().dlpack_capsule(self, self.ptr, list(self.shape), code, bits, dev_type, dev_id)


@dataclasses.dataclass(slots=True)
class _Feed:
    name: str
    kind: str  # "numpy" | "dlpack" | "pointer"
    shape: tuple
    dtype: str
    device: int  # -1: host memory
    ptr: int
    nbytes: int
    keep: Any  # keeps the source memory alive during the run
    ortvalue: Any = None  # zero-copy OrtValue view (numpy / DLPack inputs), when made


def _is_contiguous(x) -> bool:
    check = getattr(x, "is_contiguous", None)  # torch
    if callable(check):
        try:
            return bool(check())
        except Exception:  # noqa: BLE001 - not torch's method after all
            return True
    flags = getattr(x, "flags", None)  # numpy, cupy
    if flags is not None and hasattr(flags, "c_contiguous"):
        return bool(flags.c_contiguous)
    return True


#: torch dtype -> our dtype name (None: not one of ours; the DLPack path then says so)
_TORCH_DTYPES: dict = {}


def _torch_feed(name: str, x: Any) -> _Feed | None:
    """A CUDA torch tensor read from its attributes: no DLPack export (5-20 µs each), which a
    graph replay, copying by pointer, does not need. None where the general path must decide."""
    dtype = _TORCH_DTYPES.get(x.dtype, False)
    if dtype is False:
        dtype = str(x.dtype).removeprefix("torch.")
        dtype = _TORCH_DTYPES[x.dtype] = dtype if dtype in _DTYPES else None
    if dtype is None or not x.is_cuda or not x.is_contiguous():
        return None
    # get_device() / nbytes: one call each (x.device builds a torch.device object)
    return _Feed(name, "dlpack", tuple(x.shape), dtype, x.get_device(), x.data_ptr(), x.nbytes, x)


def _feed(name: str, x: Any, need_ortvalue: bool) -> _Feed:
    if type(x).__module__ == "torch" and not need_ortvalue and hasattr(x, "data_ptr"):
        fast = _torch_feed(name, x)
        if fast is not None:
            return fast
    if isinstance(x, DeviceTensor):
        return _Feed(name, "pointer", x.shape, x.dtype, x.device, x.ptr, x.nbytes, x)
    if isinstance(x, (np.ndarray, np.generic)):
        arr = np.ascontiguousarray(x)
        dtype = _dtype_name(arr.dtype)
        ov = None
        if need_ortvalue:
            ov = _onnxruntime().OrtValue.ortvalue_from_numpy(arr)
        return _Feed(name, "numpy", tuple(arr.shape), dtype, -1, arr.ctypes.data, arr.nbytes, arr, ov)
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        dev_type, dev_id = x.__dlpack_device__()
        dev_type = int(dev_type)
        if dev_type not in (_KDL_CPU, _KDL_CUDA, _KDL_CUDA_HOST):
            raise TypeError(f"input '{name}': DLPack device type {dev_type} is not supported "
                            "(CPU, CUDA or CUDA host memory)")
        if not _is_contiguous(x):
            raise ValueError(f"input '{name}' is not contiguous; pass a contiguous tensor (e.g. x.contiguous())")
        ort = _onnxruntime()
        if not hasattr(ort.OrtValue, "from_dlpack"):
            raise RuntimeError(f"input '{name}': this onnxruntime ({ort.__version__}) cannot import DLPack "
                               "tensors (OrtValue.from_dlpack); upgrade onnxruntime")
        with _exporting_device(x, int(dev_id) if dev_type == _KDL_CUDA else -1):
            ov = ort.OrtValue.from_dlpack(x)
        device = int(dev_id) if dev_type == _KDL_CUDA else -1
        return _Feed(name, "dlpack", tuple(int(d) for d in ov.shape()), _dtype_name(ov.data_type()), device,
                     int(ov.data_ptr()), int(ov.tensor_size_in_bytes()), x, ov)
    raise TypeError(f"input '{name}': expected a numpy array, a DLPack tensor (torch, cupy, ...) or a "
                    f"trt_fastops.runtime.DeviceTensor, got {type(x).__module__}.{type(x).__qualname__}")


@contextlib.contextmanager
def _exporting_device(x: Any, device: int):
    """Makes `device` current while x is exported: torch (and cupy) export a CUDA tensor through
    DLPack only from its own device ("Can't export tensors on a different CUDA device index")."""
    mod = sys.modules.get(type(x).__module__.split(".")[0])
    ctx = None
    if device >= 0 and mod is not None:
        if mod.__name__ == "torch":
            ctx = mod.cuda.device(device)
        elif mod.__name__ == "cupy":
            ctx = mod.cuda.Device(device)
    if ctx is None:
        yield
    else:
        with ctx:
            yield


def _from_dlpack_function(x: Any):
    """The from_dlpack of x's framework (torch.from_dlpack for a torch tensor, ...)."""
    names = [type(x).__module__]
    names.append(names[0].split(".")[0])
    for name in names:
        mod = sys.modules.get(name)
        if mod is None:
            try:
                mod = importlib.import_module(name)
            except ImportError:
                continue
        fn = getattr(mod, "from_dlpack", None)
        if callable(fn):
            return fn
    raise TypeError(f"cannot return outputs as {type(x).__module__}.{type(x).__qualname__}: its module has no "
                    "from_dlpack; pass numpy arrays or DeviceTensor inputs instead")


class _OutputKind:
    """How outputs go back to the caller: numpy, the input's framework, or DeviceTensor."""

    _functions: dict = {}  # type -> its framework's from_dlpack

    def __init__(self, first: _Feed):
        self.kind = first.kind
        self.from_dlpack = None
        if first.kind == "dlpack":
            t = type(first.keep)
            fn = self._functions.get(t)
            if fn is None:
                fn = self._functions[t] = _from_dlpack_function(first.keep)
            self.from_dlpack = fn

    @property
    def key(self) -> tuple:
        return self.kind, self.from_dlpack

    def wants_device(self) -> bool:
        return self.kind != "numpy"

    def convert(self, t: DeviceTensor) -> Any:
        if self.kind == "pointer":
            return t
        return self.from_dlpack(t)


def _normalize_feeds(inputs: Mapping[str, Any], expected: list[str], what: str, need_ortvalue: bool) -> dict:
    if not isinstance(inputs, Mapping):
        raise TypeError(f"{what}: inputs must be a dict {{input name: tensor}}, got {type(inputs).__name__}")
    unknown = [k for k in inputs if k not in expected]
    missing = [k for k in expected if k not in inputs]
    if unknown or missing:
        parts = []
        if missing:
            parts.append(f"missing input(s) {missing}")
        if unknown:
            parts.append(f"unknown input(s) {unknown}")
        raise ValueError(f"{what}: {' and '.join(parts)}; the model's inputs are {expected}")
    if not expected:
        raise ValueError(f"{what}: the model has no inputs")
    return {name: _feed(name, inputs[name], need_ortvalue) for name in expected}


# ---------------------------------------------------------------------------
# Process-wide capture lock: exclusive for runs that may capture, shared otherwise.


class _SharedExclusiveLock:
    def __init__(self):
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting_exclusive = 0
        self._held: dict = {}

    def acquire(self, exclusive: bool) -> None:
        with self._cond:
            if exclusive:
                self._waiting_exclusive += 1
                while self._exclusive or self._shared:
                    self._cond.wait()
                self._waiting_exclusive -= 1
                self._exclusive = True
            else:
                # Waiting captures go first, so a stream of replays cannot starve them.
                while self._exclusive or self._waiting_exclusive:
                    self._cond.wait()
                self._shared += 1

    def release(self, exclusive: bool) -> None:
        with self._cond:
            if exclusive:
                self._exclusive = False
            else:
                self._shared -= 1
            self._cond.notify_all()

    def hold(self, exclusive: bool) -> "_Held":
        """A context manager holding the lock shared or exclusively (made once per mode: a class
        made per call cost ~20 µs, a graph replay's budget)."""
        held = self._held.get(exclusive)
        if held is None:
            held = self._held[exclusive] = _Held(self, exclusive)
        return held


class _Held:
    __slots__ = ("lock", "exclusive")

    def __init__(self, lock: _SharedExclusiveLock, exclusive: bool):
        self.lock, self.exclusive = lock, exclusive

    def __enter__(self):
        self.lock.acquire(self.exclusive)

    def __exit__(self, *exc):
        self.lock.release(self.exclusive)


_CAPTURE_LOCK = _SharedExclusiveLock()


class _CaptureFailed(RuntimeError):
    pass


# ---------------------------------------------------------------------------
# OrtModel


def _parse_device(device: Any, what: str) -> int:
    """'cpu' -> -1, 'cuda' -> 0, 'cuda:N' / N -> N."""
    if isinstance(device, bool):
        raise ValueError(f"{what}: device must be 'auto', 'cpu', 'cuda', 'cuda:N' or an int, got {device!r}")
    if isinstance(device, int):
        if device < -1:
            raise ValueError(f"{what}: device index {device} is negative")
        return device
    text = str(device).strip().lower()
    if text == "cpu":
        return -1
    if text == "cuda":
        return 0
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    raise ValueError(f"{what}: device must be 'auto', 'cpu', 'cuda', 'cuda:N' or an int, got {device!r}")


@dataclasses.dataclass
class _GraphEntry:
    graph_id: int
    inputs: dict  # name -> device OrtValue (fixed addresses for the graph)
    outputs: dict  # name -> device OrtValue
    binding: Any
    threads: set = dataclasses.field(default_factory=set)  # threads that captured it (ORT keeps graphs per thread)
    input_ptrs: dict = dataclasses.field(default_factory=dict)  # name -> device address of inputs[name]
    run_options: Any = None  # RunOptions with this entry's gpu_graph_id
    views: dict = dataclasses.field(default_factory=dict)  # output kind key -> {name: view} (copy_outputs=False)


class OrtModel:
    """An ONNX Runtime session with the trt_fastops ops, device-resident I/O and CUDA graphs.

    model: path, onnx.ModelProto or serialized bytes. device: 'auto' (cuda:0 when the CUDA
    execution provider and a GPU are there, else CPU), 'cpu', 'cuda', 'cuda:N' or N.
    cuda_graph: capture one CUDA graph per input-shape signature (CUDA only; falls back to plain
    runs with a logged reason when capture is impossible). graph_cache: signatures kept (default
    $TRT_FASTOPS_GRAPH_CACHE or 8); evicted graphs' ORT executables are released when the
    session is recycled after that many evictions. warmup_runs (>= 1): plain runs of a new
    signature before its capturing run (lazy initialisation -- cuDNN plans, workspaces --
    happens outside the capture). copy_outputs: device outputs are fresh tensors (default); False
    returns views of the graph's output buffers, valid until the next run of that signature (made
    once per signature and output kind: every replay returns the same view objects).
    provider_options: extra CUDA execution provider options. session_options: an
    onnxruntime.SessionOptions (the custom-op library is registered into it).

    ``run(inputs)`` / ``model(inputs)`` -> {output name: value}; see the module docstring for the
    accepted input kinds and thread safety.
    """

    def __init__(self, model: Any, device: Any = "auto", *, cuda_graph: bool = True, graph_cache: int | None = None,
                 warmup_runs: int = 1, copy_outputs: bool = True, provider_options: Mapping[str, Any] | None = None,
                 session_options: Any = None):
        ort = _onnxruntime()
        from . import ort as ort_helpers

        self._ort = ort
        self._helpers = ort_helpers
        if isinstance(model, (str, os.PathLike)) and not Path(model).exists():
            raise FileNotFoundError(f"OrtModel: model file {model} does not exist")
        self._model = model
        self._session_options = session_options
        self._provider_options = {str(k): str(v) for k, v in (provider_options or {}).items()}
        if not isinstance(warmup_runs, int) or warmup_runs < 1:
            raise ValueError(f"OrtModel: warmup_runs must be an int >= 1 (the first run learns the output shapes), "
                             f"got {warmup_runs!r}")
        self.warmup_runs = warmup_runs
        self.copy_outputs = bool(copy_outputs)
        self.capacity = graph_cache_capacity(graph_cache)
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._next_graph_id = 1  # 0 is ORT's default id, -1 means "don't capture"
        self._retired = 0
        self._counters = collections.Counter()

        cuda_ok = "CUDAExecutionProvider" in ort.get_available_providers() and _gpu_count() > 0
        if device == "auto":
            self.device = 0 if cuda_ok else -1
        else:
            self.device = _parse_device(device, "OrtModel")
        if self.device >= 0:
            if not cuda_ok:
                raise RuntimeError(
                    f"OrtModel: device cuda:{self.device} needs onnxruntime-gpu's CUDAExecutionProvider and a visible "
                    f"GPU (providers: {ort.get_available_providers()}, GPUs: {_gpu_count()}); use device='cpu'")
            if self.device >= _gpu_count():
                raise ValueError(f"OrtModel: device cuda:{self.device} does not exist ({_gpu_count()} GPU(s) visible)")

        self.graph_fallback: str | None = None
        if self.device < 0:
            self.graph_fallback = "the model runs on the CPU execution provider (CUDA graphs need CUDA)"
            if cuda_graph:
                log.info("OrtModel: no CUDA graphs: %s", self.graph_fallback)
            self._session = self._make_session(graphs=False)
        elif not cuda_graph:
            self.graph_fallback = "disabled (cuda_graph=False)"
            self._session = self._make_session(graphs=False)
        else:
            try:
                self._session = self._make_session(graphs=True)
            except Exception as e:  # noqa: BLE001 - ORT raises its own exception types
                self._fall_back(f"ONNX Runtime refused CUDA graphs for this model: {_first_line(e)}")
                self._session = self._make_session(graphs=False)
        self.input_names = [i.name for i in self._session.get_inputs()]
        self.output_names = [o.name for o in self._session.get_outputs()]

    # -- public ---------------------------------------------------------------

    @property
    def graphs_enabled(self) -> bool:
        return self.graph_fallback is None

    def run(self, inputs: Mapping[str, Any]) -> dict:
        """Runs the model; returns {output name: value} of the first input's kind."""
        feeds = _normalize_feeds(inputs, self.input_names, "OrtModel.run", need_ortvalue=False)
        kind = _OutputKind(next(iter(feeds.values())))
        for f in feeds.values():
            if f.device >= 0 and self.device < 0:
                raise ValueError(f"OrtModel.run: input '{f.name}' is on cuda:{f.device} but the model runs on the CPU")
            if f.device >= 0 and f.device != self.device:
                raise ValueError(f"OrtModel.run: input '{f.name}' is on cuda:{f.device} but the model runs on "
                                 f"cuda:{self.device}; move it there first")
        with self._lock:
            if self.device < 0:
                return self._run_plain(feeds, kind)
            signature = tuple((f.name, f.shape, f.dtype) for f in feeds.values())
            key = (self.device, signature)
            capturing = self.graphs_enabled and (key not in self._entries or
                                                 threading.get_ident() not in self._entries[key].threads)
            with _CAPTURE_LOCK.hold(exclusive=capturing):
                if self.graphs_enabled:
                    try:
                        return self._run_graph(key, feeds, kind)
                    except _CaptureFailed as e:
                        self._fall_back(str(e))
                        self._entries.clear()
                        self._session = self._make_session(graphs=False)
                return self._run_plain(feeds, kind)

    __call__ = run

    def stats(self) -> dict:
        with self._lock:
            c = self._counters
            return {
                "device": "cpu" if self.device < 0 else f"cuda:{self.device}",
                "cuda_graphs": self.graphs_enabled,
                "graph_fallback": self.graph_fallback,
                "graph_cache_size": len(self._entries),
                "graph_cache_capacity": self.capacity,
                "graph_hits": c["hits"],
                "graph_misses": c["misses"],
                "graph_evictions": c["evictions"],
                "session_recycles": c["recycles"],
                "graph_runs": c["graph_runs"],
                "plain_runs": c["plain_runs"],
            }

    # -- internals ------------------------------------------------------------

    def _make_session(self, graphs: bool):
        providers: list = ["CPUExecutionProvider"]
        if self.device >= 0:
            opts = {"device_id": str(self.device), **self._provider_options}
            providers = [("CUDAExecutionProvider", opts), "CPUExecutionProvider"]
        return self._helpers.make_session(self._model, providers, cuda_graph=graphs,
                                          session_options=self._session_options)

    def _fall_back(self, reason: str) -> None:
        self.graph_fallback = reason
        log.warning("OrtModel (cuda:%d): running without CUDA graphs: %s", self.device, reason)

    def _run_plain(self, feeds: dict, kind: _OutputKind) -> dict:
        self._counters["plain_runs"] += 1
        if all(f.kind == "numpy" for f in feeds.values()):
            values = self._session.run(self.output_names, {f.name: f.keep for f in feeds.values()})
            return dict(zip(self.output_names, values))
        ort = self._ort
        binding = self._session.io_binding()
        synced = set()
        for f in feeds.values():
            if f.device >= 0 and f.device not in synced:
                _native().device_synchronize(f.device)  # the producer's stream may still be writing it
                synced.add(f.device)
            if f.kind == "pointer" or (f.kind == "dlpack" and f.ortvalue is None):  # by address (torch fast path)
                binding.bind_input(f.name, "cuda" if f.device >= 0 else "cpu", max(f.device, 0), _DTYPES[f.dtype][0],
                                   list(f.shape), f.ptr)
            elif f.kind == "numpy":
                binding.bind_cpu_input(f.name, f.keep)
            else:
                binding.bind_ortvalue_input(f.name, f.ortvalue if f.ortvalue is not None else
                                            ort.OrtValue.from_dlpack(f.keep))
        device_type = "cuda" if self.device >= 0 and kind.wants_device() else "cpu"
        for name in self.output_names:
            binding.bind_output(name, device_type, max(self.device, 0))
        self._session.run_with_iobinding(binding)
        values = binding.get_outputs()
        return {name: self._deliver(ov, kind, copy=False) for name, ov in zip(self.output_names, values)}

    def _deliver(self, ov, kind: _OutputKind, copy: bool) -> Any:
        """One output OrtValue -> the caller's kind."""
        if kind.kind == "numpy":
            return ov.numpy()
        device = self.device if ov.device_name().lower() in ("cuda", "gpu") else -1
        shape, dtype = [int(d) for d in ov.shape()], _dtype_name(ov.data_type())
        if copy and device >= 0:
            fresh = self._ort.OrtValue.ortvalue_from_shape_and_type(shape, _DTYPES[dtype][0], "cuda", device)
            _native().copy_bytes(fresh.data_ptr(), ov.data_ptr(), ov.tensor_size_in_bytes(), device=device)
            ov = fresh
        return kind.convert(DeviceTensor(ov.data_ptr(), shape, dtype, device, owner=ov))

    def _run_graph(self, key, feeds: dict, kind: _OutputKind) -> dict:
        entry = self._entries.get(key)
        if entry is None:
            self._counters["misses"] += 1
            entry = self._new_entry(key, feeds)
        else:
            self._counters["hits"] += 1
            self._entries.move_to_end(key)
            self._stage_inputs(entry, feeds)
        thread = threading.get_ident()
        try:
            self._session.run_with_iobinding(entry.binding, entry.run_options)
        except Exception as e:  # noqa: BLE001
            if thread in entry.threads:
                raise  # a replay failed: not a capture problem
            shapes = {f.name: list(f.shape) for f in feeds.values()}
            raise _CaptureFailed(f"capturing the CUDA graph for input shapes {shapes} failed: {_first_line(e)}") \
                from e
        entry.threads.add(thread)
        self._counters["graph_runs"] += 1
        if self.copy_outputs or kind.kind == "numpy":
            return {name: self._deliver(entry.outputs[name], kind, copy=self.copy_outputs)
                    for name in self.output_names}
        # Views of the same buffers every replay: made once per output kind.
        views = entry.views.get(kind.key)
        if views is None:
            views = entry.views[kind.key] = {name: self._deliver(entry.outputs[name], kind, copy=False)
                                             for name in self.output_names}
        return dict(views)

    def _stage_inputs(self, entry: _GraphEntry, feeds: dict) -> None:
        # One native call: wait for the device (the producer's stream may still be writing the
        # inputs), copy every input into the graph's buffer (one kernel for those on this device),
        # wait for the copies.
        _native().stage_copies(self.device, [(entry.input_ptrs[f.name], f.ptr, f.nbytes, f.device)
                                             for f in feeds.values()])

    def _new_entry(self, key, feeds: dict) -> _GraphEntry:
        ort = self._ort
        if len(self._entries) >= self.capacity:
            self._evict()
        binding = self._session.io_binding()
        inputs = {}
        for f in feeds.values():
            ov = ort.OrtValue.ortvalue_from_shape_and_type(list(f.shape), _DTYPES[f.dtype][0], "cuda", self.device)
            inputs[f.name] = ov
            binding.bind_ortvalue_input(f.name, ov)
        entry = _GraphEntry(self._next_graph_id, inputs, {}, binding)
        entry.input_ptrs = {name: ov.data_ptr() for name, ov in inputs.items()}
        entry.run_options = ort.RunOptions()
        entry.run_options.add_run_config_entry("gpu_graph_id", str(entry.graph_id))
        self._next_graph_id += 1
        self._stage_inputs(entry, feeds)
        # Warm-up: plain runs (graph id -1 = no capture). The first one allocates the outputs,
        # which then stay bound so the graph writes to fixed addresses.
        skip = ort.RunOptions()
        skip.add_run_config_entry("gpu_graph_id", "-1")
        for name in self.output_names:
            binding.bind_output(name, "cuda", self.device)
        # A failure here is the model's or the inputs' (nothing is captured yet): it propagates.
        self._session.run_with_iobinding(binding, skip)
        outputs = dict(zip(self.output_names, binding.get_outputs()))
        binding.clear_binding_outputs()
        for name, ov in outputs.items():
            binding.bind_ortvalue_output(name, ov)
        for _ in range(self.warmup_runs - 1):
            self._session.run_with_iobinding(binding, skip)
        entry.outputs = outputs
        self._entries[key] = entry
        return entry

    def _evict(self) -> None:
        self._entries.popitem(last=False)
        self._counters["evictions"] += 1
        self._retired += 1
        if self._retired >= self.capacity:
            # ORT has no call to drop one graph id: release the retired graphs with the session.
            self._session = self._make_session(graphs=True)
            self._entries.clear()
            self._retired = 0
            self._counters["recycles"] += 1


def _gpu_count() -> int:
    try:
        return _native().cuda_device_count()
    except ImportError:
        return 0


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0] if len(text) < 2000 else text[:2000]


# ---------------------------------------------------------------------------
# TensorRT


class TensorRTUnavailable(ImportError):
    """TensorRT's Python package (or a piece TrtEngine needs) is not installed."""


def _tensorrt():
    try:
        import tensorrt
    except ImportError as e:
        raise TensorRTUnavailable(
            "TrtEngine needs TensorRT's Python package: pip install tensorrt (10.x or 11.x, the major the "
            "trt_fastops TensorRT plugins were built for); ONNX Runtime users can use OrtModel instead") from e
    return tensorrt


_plugins_lock = threading.Lock()
_plugins_loaded: dict = {}


def load_trt_plugins(trt=None):
    """Registers the trt_fastops TensorRT plugins (libtrt_fastops_trt.so) once per process."""
    trt = trt or _tensorrt()
    with _plugins_lock:
        if "handle" in _plugins_loaded:
            return _plugins_loaded["handle"]
        from . import library_path

        registry = trt.get_plugin_registry()
        if _trt_plugins_registered(registry):  # already (autoload library, LD_PRELOAD, polygraphy --plugins)
            _plugins_loaded["handle"] = None
            return None
        if hasattr(registry, "load_library"):
            path = library_path("trt")
            handle = registry.load_library(path)
        else:  # bindings without IPluginRegistry::loadLibrary: the self-registering library
            import ctypes

            path = library_path("trt_autoload")
            handle = ctypes.CDLL(path)
        if handle is None:
            raise RuntimeError(f"TensorRT did not register the plugins of {path} (see TensorRT's log: a TensorRT "
                               "major other than the one the library was built for?)")
        _plugins_loaded["handle"] = handle
        return handle


def _trt_plugins_registered(registry) -> bool:
    """Best effort: True when a creator in namespace trt_fastops is registered already."""
    try:
        creators = getattr(registry, "all_creators", None)
        if creators is None:
            creators = getattr(registry, "plugin_creator_list", None) or []
        return any(getattr(c, "plugin_namespace", None) == "trt_fastops" for c in creators)
    except Exception:  # noqa: BLE001 - bindings differ between TensorRT versions: then just load
        return False


def _trt_dtype_name(trt, dt) -> str:
    table = {}
    for attr, name in (("float32", "float32"), ("float16", "float16"), ("bfloat16", "bfloat16"),
                       ("int8", "int8"), ("uint8", "uint8"), ("int32", "int32"), ("int64", "int64"), ("bool", "bool")):
        if hasattr(trt, attr):
            table[getattr(trt, attr)] = name
    if dt not in table:
        raise TypeError(f"TrtEngine: TensorRT data type {dt} is not supported for inputs/outputs")
    return table[dt]


class _TrtLogger:
    _instance = None

    @classmethod
    def get(cls, trt):
        if cls._instance is None:
            cls._instance = trt.Logger(trt.Logger.WARNING)
        return cls._instance


class TrtEngine:
    """A TensorRT engine with the trt_fastops plugins, run through the native CUDA-graph cache.

    Build one with ``TrtEngine.build(onnx, shapes=...)`` (the ONNX should come from
    ``trt-fastops rewrite --plugin-attributes``), or load a saved engine with ``TrtEngine.load``.
    ``run(inputs)`` takes the same input kinds as OrtModel; device inputs are used in place (a
    change of address updates the captured graph instead of copying), numpy inputs go through
    per-signature device buffers. cuda_graph=False runs enqueueV3 directly. One lock per engine
    serialises runs. Raises TensorRTUnavailable (an ImportError) without TensorRT.
    """

    def __init__(self, engine_bytes: bytes, *, device: int = 0, cuda_graph: bool = True,
                 graph_cache: int | None = None, copy_outputs: bool = True):
        trt = _tensorrt()
        _C = _native()
        self._trt = trt
        self.device = _parse_device(device, "TrtEngine")
        if self.device < 0:
            raise ValueError("TrtEngine: TensorRT runs on a CUDA device, not the CPU")
        if self.device >= _C.cuda_device_count():
            raise ValueError(f"TrtEngine: device cuda:{self.device} does not exist "
                             f"({_C.cuda_device_count()} GPU(s) visible)")
        load_trt_plugins(trt)
        self.capacity = graph_cache_capacity(graph_cache)
        self.copy_outputs = bool(copy_outputs)
        self._lock = threading.Lock()
        self._stream = _C.CudaStream(self.device)
        self._cache = _C.GraphCache(self.capacity)
        self._buffers: collections.OrderedDict = collections.OrderedDict()  # signature -> {name: DeviceBuffer}
        self._counters = collections.Counter()
        self._last_enqueued = None  # input signature of the last enqueueV3 (plain or captured)
        self.graph_fallback: str | None = None if cuda_graph else "disabled (cuda_graph=False)"
        self._engine_bytes = bytes(engine_bytes)
        runtime = trt.Runtime(_TrtLogger.get(trt))
        self._engine = runtime.deserialize_cuda_engine(self._engine_bytes)
        if self._engine is None:
            raise RuntimeError("TrtEngine: TensorRT could not deserialize the engine (built by another TensorRT "
                               "version, or for another GPU?)")
        self._context = self._engine.create_execution_context()
        if self._context is None:
            raise RuntimeError("TrtEngine: TensorRT could not create an execution context")
        self.input_names, self.output_names = [], []
        for i in range(self._engine.num_io_tensors):
            name = self._engine.get_tensor_name(i)
            mode = self._engine.get_tensor_mode(name)
            (self.input_names if mode == trt.TensorIOMode.INPUT else self.output_names).append(name)

    # -- construction ---------------------------------------------------------

    @classmethod
    def build(cls, onnx_model: Any, shapes: Mapping[str, tuple] | None = None, *, fp16: bool = False,
              device: int = 0, save: str | os.PathLike | None = None, config_kwargs: Mapping[str, Any] | None = None,
              **kwargs) -> "TrtEngine":
        """Builds an engine from an ONNX file / ModelProto / bytes with the trt_fastops plugins.

        shapes: {input name: (min, opt, max)} for inputs with dynamic dims (one optimisation
        profile). fp16: allow float16 kernels. config_kwargs: more polygraphy CreateConfig
        arguments. save: also write the engine there. kwargs go to TrtEngine().
        """
        trt = _tensorrt()
        try:
            from polygraphy.backend.trt import (CreateConfig, EngineBytesFromNetwork, NetworkFromOnnxBytes,
                                                NetworkFromOnnxPath, Profile)
        except ImportError as e:
            raise TensorRTUnavailable("TrtEngine.build needs polygraphy: pip install polygraphy") from e
        load_trt_plugins(trt)
        profiles = None
        if shapes:
            profile = Profile()
            for name, triple in shapes.items():
                if len(triple) != 3:
                    raise ValueError(f"TrtEngine.build: shapes['{name}'] must be (min, opt, max), got {triple!r}")
                mn, opt, mx = (tuple(int(d) for d in s) for s in triple)
                profile.add(name, min=mn, opt=opt, max=mx)
            profiles = [profile]
        if isinstance(onnx_model, (str, os.PathLike)):
            if not Path(onnx_model).exists():
                raise FileNotFoundError(f"TrtEngine.build: {onnx_model} does not exist")
            network = NetworkFromOnnxPath(str(onnx_model))
        else:
            data = onnx_model if isinstance(onnx_model, (bytes, bytearray)) else onnx_model.SerializeToString()
            network = NetworkFromOnnxBytes(bytes(data))
        config = CreateConfig(fp16=fp16, profiles=profiles, **dict(config_kwargs or {}))
        engine_bytes = EngineBytesFromNetwork(network, config=config)()
        if engine_bytes is None:
            raise RuntimeError("TrtEngine.build: TensorRT failed to build the engine (see its log above)")
        engine = cls(bytes(engine_bytes), device=device, **kwargs)
        if save is not None:
            engine.save(save)
        return engine

    @classmethod
    def load(cls, path: str | os.PathLike, **kwargs) -> "TrtEngine":
        return cls(Path(path).read_bytes(), **kwargs)

    def save(self, path: str | os.PathLike) -> None:
        Path(path).write_bytes(self._engine_bytes)

    # -- running --------------------------------------------------------------

    @property
    def graphs_enabled(self) -> bool:
        return self.graph_fallback is None

    def stats(self) -> dict:
        with self._lock:
            out = {"device": f"cuda:{self.device}", "cuda_graphs": self.graphs_enabled,
                   "graph_fallback": self.graph_fallback, **{f"graph_{k}": v for k, v in self._cache.stats().items()},
                   "graph_runs": self._counters["graph_runs"], "plain_runs": self._counters["plain_runs"]}
            return out

    def run(self, inputs: Mapping[str, Any]) -> dict:
        feeds = _normalize_feeds(inputs, self.input_names, "TrtEngine.run", need_ortvalue=False)
        kind = _OutputKind(next(iter(feeds.values())))
        _C = _native()
        trt = self._trt
        with self._lock:
            ctx = self._context
            for f in feeds.values():
                expected = _trt_dtype_name(trt, self._engine.get_tensor_dtype(f.name))
                if f.dtype != expected:
                    raise TypeError(f"TrtEngine.run: input '{f.name}' is {f.dtype}, the engine expects {expected}")
                if f.device >= 0 and f.device != self.device:
                    raise ValueError(f"TrtEngine.run: input '{f.name}' is on cuda:{f.device}, the engine runs on "
                                     f"cuda:{self.device}")
                if not ctx.set_input_shape(f.name, f.shape):
                    raise ValueError(f"TrtEngine.run: input '{f.name}' shape {list(f.shape)} is outside the engine's "
                                     "optimisation profile")
            signature = tuple((f.name, f.shape) for f in feeds.values())
            bufs = self._signature_buffers(signature, feeds)
            synced = False
            addresses = []
            for f in feeds.values():
                if f.device >= 0:
                    if not synced:
                        _C.device_synchronize(self.device)  # the producer's stream may still be writing
                        synced = True
                    ptr = f.ptr
                else:
                    ptr = bufs[f.name].ptr
                    _C.copy_bytes(ptr, f.ptr, f.nbytes, device=self.device)
                ctx.set_tensor_address(f.name, ptr)
                addresses.append(ptr)
            out_shapes = {}
            for name in self.output_names:
                ctx.set_tensor_address(name, bufs[name].ptr)
                addresses.append(bufs[name].ptr)
                out_shapes[name] = tuple(int(d) for d in ctx.get_tensor_shape(name))
            stream = self._stream.handle
            if self.graphs_enabled:
                shapes = [list(f.shape) for f in feeds.values()]
                if signature != self._last_enqueued and not self._cache.would_replay(self.device, shapes, addresses):
                    # TensorRT wants one plain enqueueV3 after a shape change before a capture: its
                    # shape-dependent setup may allocate or synchronise, which a capture forbids.
                    self._enqueue(stream)
                    self._last_enqueued = signature
                try:
                    how = self._cache.run(self.device, shapes, addresses, self._enqueue, stream)
                    if how != "replayed":
                        self._last_enqueued = signature
                    self._counters["graph_runs"] += 1
                except RuntimeError as e:
                    self.graph_fallback = f"capturing enqueueV3 failed: {_first_line(e)}"
                    log.warning("TrtEngine (cuda:%d): running without CUDA graphs: %s", self.device,
                                self.graph_fallback)
                    self._enqueue(stream)
                    self._last_enqueued = signature
                    self._counters["plain_runs"] += 1
            else:
                self._enqueue(stream)
                self._last_enqueued = signature
                self._counters["plain_runs"] += 1
            self._stream.synchronize()
            return {name: self._deliver(bufs[name], out_shapes[name], name, kind) for name in self.output_names}

    __call__ = run

    def _enqueue(self, stream: int) -> None:
        if not self._context.execute_async_v3(stream):
            raise RuntimeError("TensorRT enqueueV3 failed (see TensorRT's log)")

    def _signature_buffers(self, signature, feeds) -> dict:
        _C = _native()
        bufs = self._buffers.get(signature)
        if bufs is not None:
            self._buffers.move_to_end(signature)
        else:
            bufs = self._output_buffers()
            self._buffers[signature] = bufs
            while len(self._buffers) > self.capacity:
                self._buffers.popitem(last=False)
        for f in feeds.values():  # host inputs go through a device buffer (once per signature)
            if f.device < 0 and f.name not in bufs:
                bufs[f.name] = _C.DeviceBuffer(self.device, max(f.nbytes, 1))
        return bufs

    def _output_buffers(self) -> dict:
        _C = _native()
        ctx = self._context
        bufs = {}
        for name in self.output_names:
            shape = tuple(int(d) for d in ctx.get_tensor_shape(name))
            if any(d < 0 for d in shape):
                raise RuntimeError(f"TrtEngine.run: output '{name}' has a data-dependent shape {list(shape)}; "
                                   "not supported")
            dtype = _trt_dtype_name(self._trt, self._engine.get_tensor_dtype(name))
            nbytes = int(np.prod(shape, dtype=np.int64)) * _DTYPES[dtype][2] // 8
            bufs[name] = _C.DeviceBuffer(self.device, max(nbytes, 1))
        return bufs

    def _deliver(self, buf, shape, name, kind: _OutputKind) -> Any:
        _C = _native()
        dtype = _trt_dtype_name(self._trt, self._engine.get_tensor_dtype(name))
        nbytes = int(np.prod(shape, dtype=np.int64)) * _DTYPES[dtype][2] // 8
        if kind.kind == "numpy":
            if dtype == "bfloat16":
                raise TypeError(f"TrtEngine.run: output '{name}' is bfloat16, which numpy has no dtype for; pass "
                                "device tensors (torch) instead")
            out = np.empty(shape, dtype=np.dtype(dtype))
            _C.copy_bytes(out.ctypes.data, buf.ptr, nbytes, device=self.device)
            return out
        if self.copy_outputs:
            fresh = _C.DeviceBuffer(self.device, max(nbytes, 1))
            _C.copy_bytes(fresh.ptr, buf.ptr, nbytes, device=self.device)
            buf = fresh
        return kind.convert(DeviceTensor(buf.ptr, shape, dtype, self.device, owner=buf))
