"""trt_fastops.runtime.OrtModel on the CUDA execution provider: one CUDA graph per input-shape
signature (gpu_graph_id), replays that see new inputs, the LRU of signatures (evictions and
session recycling), numpy / torch (DLPack) / DeviceTensor inputs returned as the same kind,
fallbacks, threads sharing a model, and two GPUs at once.

Every run gets new random inputs and is compared with a float64 reference (or ORT CPU on the
original model), so a replay that ignored its inputs would fail. Needs onnxruntime-gpu
(fixture ort_cuda) and torch for the DLPack tests.
"""
from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

# The test model, its reference and the feeds live in the CPU test module.
_spec = importlib.util.spec_from_file_location(
    "trt_fastops_test_runtime_cpu", Path(__file__).resolve().parents[1] / "test_runtime.py")
cpu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpu)

from trt_fastops import runtime as R  # noqa: E402

TOL = 1e-4


@pytest.fixture(scope="module")
def model():
    return cpu.skip_norm_model()


@pytest.fixture
def torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


def graph_model(model, **kw):
    m = R.OrtModel(model, "cuda:0", **kw)
    assert m.graphs_enabled, f"CUDA graphs fell back: {m.graph_fallback}"
    return m


def test_graph_per_signature_replays_new_inputs(ort_cuda, model):
    m = graph_model(model)
    for i in range(4):
        feeds = cpu.feeds_for(8, 100 + i)
        out = m.run(feeds)
        assert all(isinstance(v, np.ndarray) for v in out.values())
        cpu.assert_matches(model, feeds, out, TOL)
    s = m.stats()
    assert s["device"] == "cuda:0" and s["cuda_graphs"] is True and s["graph_fallback"] is None
    assert (s["graph_misses"], s["graph_hits"], s["graph_runs"], s["plain_runs"]) == (1, 3, 4, 0)


def test_signature_lru_evicts_and_recycles_the_session(ort_cuda, model):
    m = graph_model(model, graph_cache=2)
    for i, rows in enumerate([4, 8, 12, 4, 12, 12]):
        feeds = cpu.feeds_for(rows, 200 + i)
        cpu.assert_matches(model, feeds, m.run(feeds), TOL)
    s = m.stats()
    # 4, 8: new; 12: evicts 4; 4: evicts 8 -> 2 evictions = capacity -> the session is recycled
    # (entries cleared), then 4 is new; 12: new again (cleared); 12: hit.
    assert (s["graph_misses"], s["graph_hits"], s["graph_evictions"], s["session_recycles"]) == (5, 1, 2, 1)
    assert s["graph_cache_size"] == 2 and s["cuda_graphs"] is True


def test_torch_tensors_in_and_out(ort_cuda, model, torch_cuda):
    torch = torch_cuda
    m = graph_model(model)
    results = []
    for i in range(3):
        feeds = cpu.feeds_for(6, 300 + i)
        out = m.run({k: torch.from_numpy(v).cuda() for k, v in feeds.items()})
        assert all(isinstance(v, torch.Tensor) and v.device == torch.device("cuda:0") for v in out.values())
        assert out["Y"].dtype == torch.float32 and tuple(out["Y"].shape) == (6, cpu.HIDDEN)
        results.append((feeds, out))
    for feeds, out in results:  # copies: earlier outputs are not overwritten by later replays
        cpu.assert_matches(model, feeds, {k: v.cpu().numpy() for k, v in out.items()}, TOL)

    views = graph_model(model, copy_outputs=False)
    a_feeds, b_feeds = cpu.feeds_for(6, 310), cpu.feeds_for(6, 311)
    a = views.run({k: torch.from_numpy(v).cuda() for k, v in a_feeds.items()})
    cpu.assert_matches(model, a_feeds, {k: v.cpu().numpy() for k, v in a.items()}, TOL)
    b = views.run({k: torch.from_numpy(v).cuda() for k, v in b_feeds.items()})
    assert a["Y"].data_ptr() == b["Y"].data_ptr()  # views of the graph's output buffer
    cpu.assert_matches(model, b_feeds, {k: v.cpu().numpy() for k, v in a.items()}, TOL)


def test_torch_inputs_edges_and_views_per_output_kind(ort_cuda, model, torch_cuda):
    """CUDA torch tensors are read from their attributes (no DLPack export); the rest goes the
    DLPack way: a non-contiguous tensor is refused by name, a CPU tensor works. With
    copy_outputs=False the views are made once per output kind: torch inputs get torch views,
    DeviceTensor inputs DeviceTensor views, of the same buffers."""
    torch = torch_cuda
    m = graph_model(model, copy_outputs=False)
    feeds = cpu.feeds_for(6, 320)
    bad = {k: torch.from_numpy(v).cuda() for k, v in feeds.items()}
    bad["X"] = torch.from_numpy(np.ascontiguousarray(feeds["X"].T)).cuda().t()
    with pytest.raises(ValueError, match="input 'X' is not contiguous"):
        m.run(bad)
    dev = {k: torch.from_numpy(v).cuda() for k, v in feeds.items()}
    t = m.run(dev)
    assert isinstance(t["Y"], torch.Tensor)
    cpu.assert_matches(model, feeds, {k: v.cpu().numpy() for k, v in t.items()}, TOL)
    feeds2 = cpu.feeds_for(6, 321)
    dt = m.run({k: R.DeviceTensor(v.data_ptr(), v.shape, "float32", 0)
                for k, v in ((k, torch.from_numpy(a).cuda()) for k, a in feeds2.items())})
    assert isinstance(dt["Y"], R.DeviceTensor) and dt["Y"].ptr == t["Y"].data_ptr()
    cpu.assert_matches(model, feeds2, {k: v.cpu().numpy() for k, v in t.items()}, TOL)  # t views the buffer
    host = m.run({k: torch.from_numpy(v) for k, v in feeds.items()})  # CPU torch tensors: DLPack path
    assert isinstance(host["Y"], torch.Tensor)
    cpu.assert_matches(model, feeds, {k: v.cpu().numpy() for k, v in host.items()}, TOL)
    plain = R.OrtModel(model, "cuda:0", cuda_graph=False)  # plain runs bind fast-path tensors by address
    cpu.assert_matches(model, feeds, {k: v.cpu().numpy() for k, v in plain.run(dev).items()}, TOL)


def test_device_pointers_in_device_tensors_out(ort_cuda, model, torch_cuda):
    torch = torch_cuda
    m = graph_model(model)
    for i in range(2):
        feeds = cpu.feeds_for(5, 400 + i)
        dev = {k: torch.from_numpy(v).cuda() for k, v in feeds.items()}
        ptrs = {k: R.DeviceTensor(t.data_ptr(), t.shape, "float32", 0) for k, t in dev.items()}
        out = m.run(ptrs)
        assert all(isinstance(v, R.DeviceTensor) and v.device == 0 and v.owner is not None for v in out.values())
        cpu.assert_matches(model, feeds, {k: torch.from_dlpack(v).cpu().numpy() for k, v in out.items()}, TOL)


def test_mixed_numpy_and_torch_inputs_follow_the_first(ort_cuda, model, torch_cuda):
    torch = torch_cuda
    m = graph_model(model)
    feeds = cpu.feeds_for(4, 450)
    out = m.run({"X": feeds["X"], "R": torch.from_numpy(feeds["R"]).cuda()})
    assert isinstance(out["Y"], np.ndarray)
    cpu.assert_matches(model, feeds, out, TOL)


def test_plain_mode(ort_cuda, model, torch_cuda):
    torch = torch_cuda
    m = R.OrtModel(model, "cuda:0", cuda_graph=False)
    assert not m.graphs_enabled and m.graph_fallback == "disabled (cuda_graph=False)"
    feeds = cpu.feeds_for(7, 500)
    cpu.assert_matches(model, feeds, m.run(feeds), TOL)
    out = m.run({k: torch.from_numpy(v).cuda() for k, v in feeds.items()})
    assert out["Y"].is_cuda
    cpu.assert_matches(model, feeds, {k: v.cpu().numpy() for k, v in out.items()}, TOL)
    assert m.stats()["plain_runs"] == 2


def test_fallback_when_ort_refuses_graphs(ort_cuda, model, monkeypatch, caplog):
    real = R.OrtModel._make_session

    def refuse(self, graphs):
        if graphs:
            raise RuntimeError("This session cannot use the graph capture feature (test)")
        return real(self, graphs)

    monkeypatch.setattr(R.OrtModel, "_make_session", refuse)
    with caplog.at_level("WARNING", logger="trt_fastops.runtime"):
        m = R.OrtModel(model, "cuda:0")
    assert not m.graphs_enabled
    assert "ONNX Runtime refused CUDA graphs for this model: This session cannot use" in m.graph_fallback
    assert "running without CUDA graphs" in caplog.text
    feeds = cpu.feeds_for(3, 600)
    cpu.assert_matches(model, feeds, m.run(feeds), TOL)


def test_fallback_when_capture_fails(ort_cuda, model, monkeypatch):
    m = graph_model(model)
    feeds = cpu.feeds_for(3, 700)
    cpu.assert_matches(model, feeds, m.run(feeds), TOL)

    def fail(self, key, feeds, kind):
        raise R._CaptureFailed("capturing the CUDA graph failed (test)")

    monkeypatch.setattr(R.OrtModel, "_run_graph", fail)
    feeds = cpu.feeds_for(9, 701)
    cpu.assert_matches(model, feeds, m.run(feeds), TOL)  # re-run without graphs
    assert not m.graphs_enabled and "failed (test)" in m.graph_fallback
    assert m.stats()["plain_runs"] == 1


def test_threads_share_one_model(ort_cuda, model):
    m = graph_model(model)
    errors = []

    def worker(t):
        try:
            for i in range(4):
                feeds = cpu.feeds_for(4 + 4 * ((t + i) % 2), 800 + 10 * t + i)
                cpu.assert_matches(model, feeds, m.run(feeds), TOL)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    s = m.stats()
    assert s["graph_runs"] == 16 and s["cuda_graphs"] is True


def test_two_gpus_at_once(ort_cuda, model, torch_cuda):
    torch = torch_cuda
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    models = {d: graph_model(model) if d == 0 else R.OrtModel(model, f"cuda:{d}") for d in (0, 1)}
    assert models[1].graphs_enabled, models[1].graph_fallback
    errors = []

    def worker(d):
        try:
            for i in range(5):
                feeds = cpu.feeds_for(8, 900 + 10 * d + i)
                out = models[d].run({k: torch.from_numpy(v).to(f"cuda:{d}") for k, v in feeds.items()})
                assert all(v.device == torch.device(f"cuda:{d}") for v in out.values())
                cpu.assert_matches(model, feeds, {k: v.cpu().numpy() for k, v in out.items()}, TOL)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(d,)) for d in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert models[1].stats()["device"] == "cuda:1"
    x = torch.zeros((2, cpu.HIDDEN), device="cuda:0")
    with pytest.raises(ValueError, match="input 'X' is on cuda:0 but the model runs on cuda:1"):
        models[1].run({"X": x, "R": x})


def test_rewritten_bert_with_graphs_matches_the_original(ort_cuda):
    import onnxruntime as ort

    import trt_fastops
    from models import build as B

    orig = B.build("bert_tiny")
    rew = trt_fastops.rewrite(orig, ops=["LayerNorm", "SkipLayerNorm", "RMSNorm"]).model
    m = R.OrtModel(rew, "cuda:0", provider_options={"use_tf32": "0"})
    assert m.graphs_enabled, m.graph_fallback
    ref_sess = ort.InferenceSession(orig.SerializeToString(), providers=["CPUExecutionProvider"])
    for seed in range(3):
        feeds = B.example_inputs(orig, seed=seed)
        (ref,) = ref_sess.run(None, feeds)
        got = m.run(feeds)["last_hidden_state"]
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3)
    assert m.stats()["graph_hits"] == 2
