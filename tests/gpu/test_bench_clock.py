"""scripts/_bench_common.SmClockSampler on a GPU: nvidia-smi's SM clock, sampled while a spin
kernel keeps the card busy, arrives with timestamps inside the busy stretch and reads a clock
in a GPU's range."""
from __future__ import annotations

import importlib.util
import shutil
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

_spec = importlib.util.spec_from_file_location(
    "bench_common_gpu", Path(__file__).resolve().parents[2] / "scripts" / "_bench_common.py")
bc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bc)


@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="needs nvidia-smi")
def test_clock_sampler_reads_the_clock_under_load():
    sampler = bc.SmClockSampler()
    try:
        t0 = time.time()
        torch.cuda._sleep(1 << 29)  # ~0.3 s of one spinning thread at 1.8 GHz
        torch.cuda.synchronize()
        t1 = time.time()
        mhz = sampler.median([(t0 + 0.05, t1)])
    finally:
        sampler.close()
    assert t1 - t0 > 0.15
    assert mhz is not None and 100.0 < mhz < 2500.0, mhz
