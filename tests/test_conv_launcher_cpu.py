"""The conv launcher's Python bindings on a machine without a GPU: they import, report
their state and fail cleanly (no crash) when asked to run."""
from __future__ import annotations

import pytest

_C = pytest.importorskip("trt_fastops._C")
if not hasattr(_C, "conv_plan"):
    pytest.skip("trt_fastops._C has no conv bindings yet (register_conv_bindings not in module.cc)",
                allow_module_level=True)


def test_cache_stats_keys():
    s = _C.conv_cache_stats()
    for key in ("hits", "misses", "insertions", "replacements", "evictions", "size", "capacity", "cudnn_plans",
                "fallback_plans", "exec_failures", "capture_misses", "graph_launches", "graph_captures",
                "graph_failures", "capturing_executions", "fallback_graph_launches", "fallback_graph_captures",
                "fallback_graph_failures", "cudnn_compiled", "cudnn_available", "cudnn_version",
                "cudnn_status"):
        assert key in s, key
    assert s["capacity"] >= 1
    assert s["cudnn_available"] == (s["cudnn_status"] == "ok")


def test_capacity_and_clear():
    old = _C.conv_cache_stats()["capacity"]
    try:
        _C.conv_cache_set_capacity(3)
        assert _C.conv_cache_stats()["capacity"] == 3
        _C.conv_cache_set_capacity(0)  # clamps to 1
        assert _C.conv_cache_stats()["capacity"] == 1
        _C.conv_cache_clear()
        _C.conv_cache_reset_stats()
        assert _C.conv_cache_stats()["size"] == 0 and _C.conv_cache_stats()["hits"] == 0
        assert _C.conv_cache_stats()["graph_launches"] == 0
        assert _C.conv_cache_stats()["fallback_graph_launches"] == 0
    finally:
        _C.conv_cache_set_capacity(old)


def test_argument_errors_are_value_errors():
    with pytest.raises(ValueError, match="one entry per spatial dim"):
        _C.conv_plan("float16", 1, 1, 1, 1, 4, 4, [8, 8], [8, 8], [3])
    with pytest.raises(ValueError, match="dtype"):
        _C.conv_plan("float64", 1, 1, 1, 1, 4, 4, [8, 8], [6, 6], [3, 3])
    with pytest.raises(ValueError, match="activation"):
        _C.conv_plan("float16", 1, 1, 1, 1, 4, 4, [8, 8], [6, 6], [3, 3], activation="tanh")
    with pytest.raises(ValueError, match="backend"):
        _C.conv_plan("float16", 1, 1, 1, 1, 4, 4, [8, 8], [6, 6], [3, 3], backend="nope")


def test_without_gpu_planning_fails_cleanly():
    if _C.cuda_device_count() > 0:
        pytest.skip("a GPU is visible: tests/gpu/test_conv_cuda.py covers planning")
    with pytest.raises(RuntimeError, match="cudaGetDevice"):
        _C.conv_plan("float16", 16, 16, 16, 1, 4, 4, [8, 8], [6, 6], [3, 3])
