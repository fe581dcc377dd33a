"""The installed package: native libraries, their exports, build info."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys

import pytest

import trt_fastops
from trt_fastops import _C


def test_library_paths_exist():
    for kind in ("ort", "kernels"):
        path = trt_fastops.library_path(kind)
        assert path.endswith(f"libtrt_fastops_{kind}.so")
        ctypes.CDLL(path)  # loads without a GPU (cudart is static)


def test_library_path_errors():
    with pytest.raises(ValueError, match="unknown kind 'bogus'"):
        trt_fastops.library_path("bogus")


def test_ort_library_exports_only_register_custom_ops():
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) not installed")
    out = subprocess.run([nm, "-D", "--defined-only", trt_fastops.library_path("ort")],
                         capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.split()[-2:-1] in (["T"], ["W"])}
    assert exported == {"RegisterCustomOps"}, exported


def test_ort_library_needs_no_shared_cudart():
    ldd = shutil.which("ldd")
    if ldd is None:
        pytest.skip("ldd not available")
    for kind in ("ort", "kernels"):
        out = subprocess.run([ldd, trt_fastops.library_path(kind)], capture_output=True, text=True).stdout
        assert "libcudart.so" not in out, out
        assert "not found" not in out, out


def test_build_info():
    info = _C.build_info()
    assert info["version"] == trt_fastops.__version__
    assert info["cuda_archs"]
    assert info["ort_api_version"] >= 16
    for key in ("cudnn_headers", "cudnn_frontend_headers", "cutlass_headers"):
        assert info[key].count(".") == 2, (key, info[key])


def test_device_queries_never_fail():
    n = _C.cuda_device_count()
    assert n >= 0
    assert len(_C.devices()) == n


def test_attention_hooks_by_name():
    # The process-wide attention hooks (no GPU needed to set them): each returns the previous
    # setting by name and refuses unknown names listing the valid ones.
    previous = _C.attention_set_path("sm80")
    try:
        assert _C.attention_set_path("wgmma") == "sm80"
        assert _C.attention_set_path("auto") == "wgmma"
        with pytest.raises(ValueError, match=r"attention_set_path: path must be 'auto', 'sm80' or 'wgmma', got 'tma'"):
            _C.attention_set_path("tma")
    finally:
        _C.attention_set_path(previous)
    previous = _C.attention_set_output_store("consumers")
    try:
        assert _C.attention_set_output_store("auto") == "consumers"
        with pytest.raises(ValueError, match=r"store must be 'auto' or 'consumers', got 'tma'"):
            _C.attention_set_output_store("tma")
    finally:
        _C.attention_set_output_store(previous)


def test_attention_dependent_launch_hook():
    # On by default; TRT_FASTOPS_ATTENTION_PDL=0 starts the process with it off.
    previous = _C.attention_set_dependent_launch(False)
    try:
        assert _C.attention_set_dependent_launch(True) is False
        assert _C.attention_set_dependent_launch(True) is True
    finally:
        _C.attention_set_dependent_launch(previous)
    code = "from trt_fastops import _C; print(_C.attention_set_dependent_launch(True))"
    for env, want in (("0", "False"), ("1", "True"), (None, "True")):
        environ = {k: v for k, v in os.environ.items() if k != "TRT_FASTOPS_ATTENTION_PDL"}
        if env is not None:
            environ["TRT_FASTOPS_ATTENTION_PDL"] = env
        got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, check=True)
        assert got.stdout.strip() == want, (env, got.stdout, got.stderr)
