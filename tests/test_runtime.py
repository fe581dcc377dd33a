"""trt_fastops.runtime without a GPU: OrtModel on the CPU execution provider (the API CI can
test), DeviceTensor's DLPack export, the graph-cache bindings' errors, TrtEngine's message
without TensorRT. The CUDA-graph paths are in tests/gpu/test_runtime_cuda.py and
tests/gpu/test_graph_cache.py."""
from __future__ import annotations

import gc
import sys
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import trt_fastops
from trt_fastops import runtime as R

ort = pytest.importorskip("onnxruntime")

HIDDEN = 64


def skip_norm_model(hidden: int = HIDDEN, dtype: str = "float32") -> onnx.ModelProto:
    """X, R: [N, hidden] (N symbolic) -> Y = SkipLayerNorm(X, R, Scale, B), Z = X * 2."""
    elem = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}[dtype]
    rng = np.random.default_rng(11)
    scale = (1.0 + 0.1 * rng.standard_normal(hidden)).astype(dtype)
    bias = (0.1 * rng.standard_normal(hidden)).astype(dtype)
    two = np.array(2.0, dtype=dtype)
    nodes = [
        helper.make_node("SkipLayerNorm", ["X", "R", "Scale", "B"], ["Y"], domain=trt_fastops.DOMAIN,
                         name="sln", epsilon=1e-5),
        helper.make_node("Mul", ["X", "two"], ["Z"], name="mul"),
    ]
    graph = helper.make_graph(
        nodes, "skip_norm",
        [helper.make_tensor_value_info("X", elem, ["N", hidden]), helper.make_tensor_value_info("R", elem, ["N", hidden])],
        [helper.make_tensor_value_info("Y", elem, ["N", hidden]), helper.make_tensor_value_info("Z", elem, ["N", hidden])],
        [numpy_helper.from_array(scale, "Scale"), numpy_helper.from_array(bias, "B"),
         numpy_helper.from_array(two, "two")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(trt_fastops.DOMAIN, 1)])
    model.ir_version = 10
    return model


def skip_norm_reference(model: onnx.ModelProto, x: np.ndarray, r: np.ndarray) -> dict:
    init = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    s = x.astype(np.float64) + r.astype(np.float64)
    mean = s.mean(-1, keepdims=True)
    var = ((s - mean) ** 2).mean(-1, keepdims=True)
    y = (s - mean) / np.sqrt(var + 1e-5) * init["Scale"] + init["B"]
    return {"Y": y, "Z": x.astype(np.float64) * 2.0}


def feeds_for(rows: int, seed: int, dtype: str = "float32") -> dict:
    rng = np.random.default_rng(seed)
    return {"X": rng.standard_normal((rows, HIDDEN)).astype(dtype),
            "R": rng.standard_normal((rows, HIDDEN)).astype(dtype)}


def assert_matches(model, feeds, out, tol=1e-4):
    ref = skip_norm_reference(model, feeds["X"], feeds["R"])
    assert list(out) == ["Y", "Z"]
    for k in ("Y", "Z"):
        got = np.asarray(out[k])
        assert got.shape == ref[k].shape, k
        np.testing.assert_allclose(got.astype(np.float64), ref[k], rtol=tol, atol=tol, err_msg=k)


# A stand-in framework for the DLPack path: a tensor type whose module has from_dlpack.
class FrameworkTensor:
    def __init__(self, array: np.ndarray):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def from_dlpack(x) -> FrameworkTensor:  # found by OrtModel through FrameworkTensor's module
    return FrameworkTensor(np.from_dlpack(x))


@pytest.fixture(scope="module")
def model():
    return skip_norm_model()


@pytest.fixture(scope="module")
def cpu_model(model):
    return R.OrtModel(model, "cpu")


# -- graph cache capacity -----------------------------------------------------------------


def test_graph_cache_capacity(monkeypatch):
    monkeypatch.delenv(R.GRAPH_CACHE_ENV, raising=False)
    assert R.graph_cache_capacity() == R.DEFAULT_GRAPH_CACHE == 8
    assert R.graph_cache_capacity(3) == 3
    monkeypatch.setenv(R.GRAPH_CACHE_ENV, "5")
    assert R.graph_cache_capacity() == 5
    assert R.graph_cache_capacity(2) == 2  # the argument wins
    monkeypatch.setenv(R.GRAPH_CACHE_ENV, "lots")
    with pytest.raises(ValueError, match="TRT_FASTOPS_GRAPH_CACHE='lots' is not an integer"):
        R.graph_cache_capacity()
    monkeypatch.setenv(R.GRAPH_CACHE_ENV, "0")
    with pytest.raises(ValueError, match="TRT_FASTOPS_GRAPH_CACHE must be a positive integer"):
        R.graph_cache_capacity()
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="graph_cache must be a positive integer"):
            R.graph_cache_capacity(bad)


def test_model_reads_capacity_from_environment(monkeypatch, model):
    monkeypatch.setenv(R.GRAPH_CACHE_ENV, "3")
    assert R.OrtModel(model, "cpu").stats()["graph_cache_capacity"] == 3
    assert R.OrtModel(model, "cpu", graph_cache=5).stats()["graph_cache_capacity"] == 5


# -- DeviceTensor ---------------------------------------------------------------------------


def test_device_tensor_fields():
    t = R.DeviceTensor(0x1000, [2, 3], np.float16, device=1)
    assert (t.shape, t.dtype, t.device, t.nbytes) == ((2, 3), "float16", 1, 12)
    assert t.__dlpack_device__() == (2, 1)
    assert R.DeviceTensor(0x1000, (4,), "bfloat16").nbytes == 8
    assert R.DeviceTensor(0, (0, 5), "bool").nbytes == 0  # empty tensors may have no memory
    with pytest.raises(TypeError, match="unsupported dtype 'complex64'"):
        R.DeviceTensor(0x1000, (2,), "complex64")
    with pytest.raises(ValueError, match="negative dimension"):
        R.DeviceTensor(0x1000, (2, -1), "float32")
    with pytest.raises(ValueError, match="null pointer"):
        R.DeviceTensor(0, (2,), "float32")


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "int8", "uint8", "bool", "float64"])
def test_device_tensor_dlpack_export_is_zero_copy(dtype):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((3, 5)) * 10).astype(dtype)
    t = R.DeviceTensor(a.ctypes.data, a.shape, a.dtype, device=-1, owner=a)
    before = sys.getrefcount(t)
    b = np.from_dlpack(t)
    assert b.dtype == a.dtype and b.shape == a.shape
    np.testing.assert_array_equal(b, a)
    assert np.shares_memory(a, b)
    assert sys.getrefcount(t) == before + 1  # the capsule keeps the DeviceTensor (and its owner) alive
    del b
    gc.collect()
    assert sys.getrefcount(t) == before  # released when the consumer is done


def test_unconsumed_capsule_releases_owner():
    a = np.zeros(4, np.float32)
    t = R.DeviceTensor(a.ctypes.data, a.shape, "float32", device=-1, owner=a)
    before = sys.getrefcount(t)
    cap = t.__dlpack__()
    assert sys.getrefcount(t) == before + 1
    del cap
    gc.collect()
    assert sys.getrefcount(t) == before


# -- OrtModel on the CPU execution provider -----------------------------------------------


def test_cpu_model_numpy(model, cpu_model):
    for rows, seed in ((4, 0), (4, 1), (7, 2)):
        feeds = feeds_for(rows, seed)
        out = cpu_model.run(feeds)
        assert all(isinstance(v, np.ndarray) for v in out.values())
        assert_matches(model, feeds, out)
    s = cpu_model.stats()
    assert s["device"] == "cpu" and s["cuda_graphs"] is False
    assert "CPU execution provider" in s["graph_fallback"]
    assert s["graph_runs"] == 0 and s["plain_runs"] >= 3
    assert cpu_model(feeds_for(2, 5)).keys() == {"Y", "Z"}  # __call__ = run


def test_cpu_model_sources(tmp_path, model):
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    feeds = feeds_for(3, 4)
    for src in (str(path), path, model.SerializeToString()):
        assert_matches(model, feeds, R.OrtModel(src, "cpu").run(feeds))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        R.OrtModel(tmp_path / "missing.onnx", "cpu")


def test_cpu_model_dlpack_inputs_return_the_same_framework(model, cpu_model):
    feeds = feeds_for(5, 6)
    out = cpu_model.run({k: FrameworkTensor(v) for k, v in feeds.items()})
    assert all(isinstance(v, FrameworkTensor) for v in out.values())
    assert_matches(model, feeds, {k: v.array for k, v in out.items()})


def test_cpu_model_host_pointer_inputs_return_device_tensors(model, cpu_model):
    feeds = feeds_for(3, 7)
    ptrs = {k: R.DeviceTensor(v.ctypes.data, v.shape, v.dtype, device=-1, owner=v) for k, v in feeds.items()}
    out = cpu_model.run(ptrs)
    assert all(isinstance(v, R.DeviceTensor) and v.device == -1 for v in out.values())
    assert_matches(model, feeds, {k: np.from_dlpack(v) for k, v in out.items()})


def test_cpu_model_float16(tmp_path):
    m16 = skip_norm_model(dtype="float16")
    feeds = feeds_for(6, 8, "float16")
    out = R.OrtModel(m16, "cpu").run(feeds)
    assert out["Y"].dtype == np.float16
    assert_matches(m16, feeds, out, tol=2e-2)


def test_cpu_model_errors(model, cpu_model):
    feeds = feeds_for(2, 9)
    with pytest.raises(ValueError, match=r"missing input\(s\) \['R'\]; the model's inputs are \['X', 'R'\]"):
        cpu_model.run({"X": feeds["X"]})
    with pytest.raises(ValueError, match=r"unknown input\(s\) \['Q'\]"):
        cpu_model.run({**feeds, "Q": feeds["X"]})
    with pytest.raises(TypeError, match="input 'X': expected a numpy array, a DLPack tensor"):
        cpu_model.run({"X": [[1.0] * HIDDEN], "R": feeds["R"]})
    with pytest.raises(TypeError, match="inputs must be a dict"):
        cpu_model.run([feeds["X"], feeds["R"]])
    on_gpu = R.DeviceTensor(0x1000, feeds["X"].shape, "float32", device=0)
    with pytest.raises(ValueError, match="input 'X' is on cuda:0 but the model runs on the CPU"):
        cpu_model.run({"X": on_gpu, "R": feeds["R"]})
    with pytest.raises(ValueError, match="warmup_runs must be an int >= 1"):
        R.OrtModel(model, "cpu", warmup_runs=0)
    with pytest.raises(ValueError, match="device must be 'auto', 'cpu', 'cuda', 'cuda:N' or an int"):
        R.OrtModel(model, "tpu")
    # An ORT failure (wrong width) comes through as ORT's own error, and the model keeps working.
    with pytest.raises(Exception):
        cpu_model.run({"X": np.zeros((2, 3), np.float32), "R": np.zeros((2, 3), np.float32)})
    assert_matches(model, feeds, cpu_model.run(feeds))


def test_cuda_device_without_gpu_is_a_clear_error(model):
    from trt_fastops import _C

    if _C.cuda_device_count() > 0 and "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("a GPU with onnxruntime-gpu is present")
    with pytest.raises(RuntimeError, match="needs onnxruntime-gpu's CUDAExecutionProvider"):
        R.OrtModel(model, "cuda:0")
    assert R.OrtModel(model).stats()["device"] == "cpu"  # auto picks the CPU here


def test_cpu_model_threads_share_one_model(model, cpu_model):
    errors = []

    def worker(seed):
        try:
            for i in range(5):
                feeds = feeds_for(3 + (seed + i) % 3, 100 * seed + i)
                assert_matches(model, feeds, cpu_model.run(feeds))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_shared_exclusive_lock_orders_captures():
    lock = R._SharedExclusiveLock()
    log = []
    lock.acquire(exclusive=False)
    got_exclusive = threading.Event()

    def capture():
        with lock.hold(exclusive=True):
            log.append("exclusive")
            got_exclusive.set()

    t = threading.Thread(target=capture)
    t.start()
    assert not got_exclusive.wait(0.1)  # a shared holder blocks the exclusive one
    log.append("shared done")
    lock.release(exclusive=False)
    t.join(5)
    assert got_exclusive.is_set() and log == ["shared done", "exclusive"]


# -- native bindings without a GPU --------------------------------------------------------


def test_graph_cache_binding_basics():
    from trt_fastops import _C

    cache = _C.GraphCache(3)
    assert len(cache) == 0 and cache.capacity == 3
    cache.capacity = 5
    assert cache.capacity == 5
    assert not cache.contains(0, [[2, 3]])
    assert not cache.would_replay(0, [[2, 3]], [1, 2])
    assert cache.stats() == {"size": 0, "capacity": 5, "hits": 0, "misses": 0, "evictions": 0, "captures": 0,
                             "replays": 0, "updates": 0, "update_refusals": 0, "cluster_reinstantiations": 0,
                             "launches": 0}
    with pytest.raises(RuntimeError, match=r"stream 0 \(the legacy default stream\) cannot be captured"):
        cache.run(0, [[2, 3]], [1], lambda s: None, 0)


def test_cuda_helpers_fail_cleanly_without_gpu():
    from trt_fastops import _C

    if _C.cuda_device_count() > 0:
        pytest.skip("a GPU is present (tests/gpu/ covers these)")
    with pytest.raises(RuntimeError, match="cuda"):
        _C.GraphCache(2).run(0, [[4]], [1], lambda s: None, 1234)
    for make in (lambda: _C.DeviceBuffer(0, 16), lambda: _C.CudaStream(0), lambda: _C.device_synchronize(0),
                 lambda: _C.copy_bytes(1, 2, 3)):
        with pytest.raises(RuntimeError, match="cuda"):
            make()
    with pytest.raises(RuntimeError, match=r"launch_affine_probe\(n=10, cluster=1\) failed: cudaErrorInvalidValue"):
        _C.graph_probe(0, 0, 10)


# -- TrtEngine without TensorRT ------------------------------------------------------------


def test_trt_engine_without_tensorrt_says_what_to_install(model):
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("TensorRT is installed (tests/gpu/test_trt_engine.py covers it)")
    with pytest.raises(R.TensorRTUnavailable, match="pip install tensorrt") as e:
        R.TrtEngine(b"engine")
    assert isinstance(e.value, ImportError)
    with pytest.raises(ImportError, match="TrtEngine needs TensorRT's Python package"):
        R.TrtEngine.build(model, shapes={"X": ((1, HIDDEN), (4, HIDDEN), (8, HIDDEN))})
