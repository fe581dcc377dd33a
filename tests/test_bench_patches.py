"""The measurement aids under bench/ still fit the kernel sources, so a later session can rerun
them as they are: the patches (clock stamps for scratch builds, see their readers in scripts/)
apply, and the probes (standalone .cu files built on the kernels' own headers) compile."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATCHES = sorted((ROOT / "bench").glob("*.patch"))
PROBES = sorted((ROOT / "bench").glob("*.cu"))


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name)
def test_measurement_patch_applies(patch):
    done = subprocess.run(["git", "apply", "--check", str(patch)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, f"{patch.name} no longer applies; refresh it against the kernel:\n{done.stderr}"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA toolkit)")
@pytest.mark.parametrize("probe", PROBES, ids=lambda p: p.name)
def test_probe_compiles(probe, tmp_path):
    cmd = ["nvcc", "-std=c++17", "--expt-relaxed-constexpr", "-O3", "-gencode", "arch=compute_90a,code=sm_90a",
           f"-I{ROOT}", "-cubin", "-o", str(tmp_path / "probe.cubin"), str(probe)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, f"{probe.name} no longer compiles against the kernel headers:\n{done.stderr[-4000:]}"
