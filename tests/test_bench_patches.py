"""The measurement patches under bench/ (clock stamps for scratch builds, see their readers in
scripts/) still apply to the kernel sources, so a later session can rebuild them as they are."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATCHES = sorted((ROOT / "bench").glob("*.patch"))


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name)
def test_measurement_patch_applies(patch):
    done = subprocess.run(["git", "apply", "--check", str(patch)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, f"{patch.name} no longer applies; refresh it against the kernel:\n{done.stderr}"
