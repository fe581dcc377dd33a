"""The measurement aids under bench/ still fit the kernel sources, so a later session can rerun
them as they are: the patches (clock stamps for scratch builds, see their readers in scripts/)
apply, the probes (standalone .cu files built on the kernels' own headers) compile, and the
Python probes (run on a GPU beside FlashAttention-3) parse and call only what the package has."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATCHES = sorted((ROOT / "bench").glob("*.patch"))
PROBES = sorted((ROOT / "bench").glob("*.cu"))
PY_PROBES = sorted((ROOT / "bench").glob("*.py"))


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


@pytest.mark.parametrize("probe", PY_PROBES, ids=lambda p: p.name)
def test_python_probe_parses(probe):
    import ast

    tree = ast.parse(probe.read_text(), filename=str(probe))
    assert ast.get_docstring(tree), f"{probe.name}: say what it measures and how to run it"
    # ops.<name>(...) calls must name functions trt_fastops.ops still has.
    from trt_fastops import ops

    called = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and isinstance(n.func.value, ast.Name) and n.func.value.id == "ops"}
    missing = sorted(name for name in called if not callable(getattr(ops, name, None)))
    assert not missing, f"{probe.name} calls ops.{', ops.'.join(missing)}, which trt_fastops.ops no longer has"
