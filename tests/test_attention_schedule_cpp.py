"""Builds and runs tests/cpp/attention_schedule_test.cc: the attention launcher's schedule model
(plugins/attention/attention_schedule.h) on the host, no GPU and no CUDA headers: the causal
grid's cost against a tile-by-tile walk of the kernels' order, and the section sizes it picks
for bench_attention's grids."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_attention_schedule_model(tmp_path):
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    exe = tmp_path / "attention_schedule_test"
    build = subprocess.run([cxx, "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{REPO}",
                            str(REPO / "tests" / "cpp" / "attention_schedule_test.cc"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert " 0 failed" in out.stdout, out.stdout
