"""Builds and runs tests/cpp/conv_host_test.cc: the conv plan cache's LruCache and the
kernels' FastDiv, on the host (no GPU, no CUDA headers needed)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_conv_host_units(tmp_path):
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    exe = tmp_path / "conv_host_test"
    build = subprocess.run([cxx, "-std=c++17", "-O2", "-pthread", "-Wall", "-Wextra", f"-I{REPO}",
                            str(REPO / "tests" / "cpp" / "conv_host_test.cc"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert " 0 failed" in out.stdout, out.stdout
