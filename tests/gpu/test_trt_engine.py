"""trt_fastops.runtime.TrtEngine: build an engine with our TensorRT plugins, run it through the
native CUDA-graph cache (capture, replay, in-place update for new addresses, new shapes),
save/load. Skipped where TensorRT's Python package or our plugin library is missing (the
README says so: TensorRT was not available where this was written)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

trt = pytest.importorskip("tensorrt", reason="TensorRT's Python package is not installed")
pytest.importorskip("polygraphy", reason="polygraphy is not installed")

import trt_fastops  # noqa: E402
from trt_fastops import runtime as R  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "trt_fastops_test_runtime_cpu", Path(__file__).resolve().parents[1] / "test_runtime.py")
cpu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpu)

TOL = 1e-4


@pytest.fixture(scope="module")
def model():
    try:
        trt_fastops.library_path("trt")
    except FileNotFoundError as e:
        pytest.skip(str(e))
    m = cpu.skip_norm_model()
    node = next(n for n in m.graph.node if n.domain == trt_fastops.DOMAIN)
    # What `rewrite --plugin-attributes` adds, for TensorRT parsers before 10.10.
    from onnx import helper

    node.attribute.extend([helper.make_attribute("plugin_version", "1"),
                           helper.make_attribute("plugin_namespace", trt_fastops.DOMAIN)])
    return m


@pytest.fixture(scope="module")
def engine(model):
    rng = ((1, cpu.HIDDEN), (8, cpu.HIDDEN), (32, cpu.HIDDEN))
    return R.TrtEngine.build(model, shapes={"X": rng, "R": rng})


def test_numpy_capture_then_replay(model, engine):
    assert engine.input_names == ["X", "R"] and engine.output_names == ["Y", "Z"]
    for i in range(3):
        feeds = cpu.feeds_for(8, 10 + i)
        out = engine.run(feeds)
        assert all(isinstance(v, np.ndarray) for v in out.values())
        cpu.assert_matches(model, feeds, out, TOL)
    s = engine.stats()
    assert s["cuda_graphs"] is True, s["graph_fallback"]
    assert s["graph_captures"] >= 1 and s["graph_replays"] >= 2


def test_torch_new_addresses_update_the_graph(model, engine):
    torch = pytest.importorskip("torch")
    before = engine.stats()
    keep = []  # held, so every iteration's inputs live at new addresses
    for i in range(3):
        feeds = cpu.feeds_for(8, 20 + i)
        keep.append({k: torch.from_numpy(v).cuda() for k, v in feeds.items()})
        out = engine.run(keep[-1])
        assert out["Y"].is_cuda
        cpu.assert_matches(model, feeds, {k: v.cpu().numpy() for k, v in out.items()}, TOL)
    after = engine.stats()
    changed = (after["graph_updates"] - before["graph_updates"]) + \
              (after["graph_update_refusals"] - before["graph_update_refusals"]) + \
              (after["graph_cluster_reinstantiations"] - before["graph_cluster_reinstantiations"])
    assert changed >= 2  # every new address set patched (or re-instantiated) the cached graph


def test_new_shape_and_save_load(model, engine, tmp_path):
    feeds = cpu.feeds_for(16, 30)
    cpu.assert_matches(model, feeds, engine.run(feeds), TOL)
    path = tmp_path / "skip_norm.engine"
    engine.save(path)
    loaded = R.TrtEngine.load(path)
    for rows in (1, 32):
        feeds = cpu.feeds_for(rows, 40 + rows)
        cpu.assert_matches(model, feeds, loaded.run(feeds), TOL)
    with pytest.raises(ValueError, match="outside the engine's optimisation profile"):
        loaded.run(cpu.feeds_for(33, 50))


def test_without_graphs(model, engine, tmp_path):
    path = tmp_path / "e.engine"
    engine.save(path)
    plain = R.TrtEngine.load(path, cuda_graph=False)
    feeds = cpu.feeds_for(4, 60)
    cpu.assert_matches(model, feeds, plain.run(feeds), TOL)
    assert plain.stats()["plain_runs"] == 1
