"""Builds and runs the host-only C++ unit tests under tests/cpp (no GPU):

- conv_host_test.cc: the conv plan cache's LruCache and the kernels' FastDiv. With CUDA's
  headers (found next to nvcc or under CUDA_HOME / /usr/local/cuda; nothing is linked) it also
  times our part of a plan-cache hit (make_conv_key + LRU lookup) and prints it.
- attention_schedule_test.cc: the attention launcher's schedule model
  (plugins/attention/attention_schedule.h): the causal grid's cost against a tile-by-tile walk
  of the kernels' order, the K/V budget, the section sizes it picks for bench_attention's
  grids and for small ones, and the causal tail table (against its first, plain form on random
  grids). It prints what costing a causal grid at its first launch takes the host.

Each prints "N passed, M failed" (tests/cpp/host_check.h)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def build_and_run(tmp_path: Path, name: str, extra: list[str] = ()) -> str:
    """Compiles tests/cpp/<name>.cc with warnings as errors, runs it, returns its output."""
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    exe = tmp_path / name
    build = subprocess.run([cxx, "-std=c++17", "-O2", "-pthread", "-Wall", "-Wextra", "-Werror", f"-I{REPO}",
                            *extra, str(REPO / "tests" / "cpp" / f"{name}.cc"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert " 0 failed" in out.stdout, out.stdout
    return out.stdout


def test_conv_host_units(tmp_path):
    cuda_inc = [f"-I{d}" for d in cuda_include_dirs()[:1]]
    stdout = build_and_run(tmp_path, "conv_host_test", cuda_inc)
    hit = [line for line in stdout.splitlines() if line.startswith("hit_path_ns")]
    assert bool(hit) == bool(cuda_inc), stdout
    if hit:
        print(f"conv plan-cache hit, our part (key + LRU get): {hit[0].split()[1]} ns per call")


def test_attention_schedule_model(tmp_path):
    stdout = build_and_run(tmp_path, "attention_schedule_test")
    cost = [line for line in stdout.splitlines() if line.startswith("first_launch_us")]
    assert cost, stdout
    print(f"causal grid's first launch, host: {cost[0]}")


def cuda_include_dirs() -> list[Path]:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.insert(0, str(Path(nvcc).resolve().parent.parent))
    return [Path(r) / "include" for r in roots if r and (Path(r) / "include" / "cuda_runtime_api.h").is_file()]
