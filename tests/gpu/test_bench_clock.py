"""scripts/_bench_common.sm_clock_mhz on a GPU: the spin-kernel clock reading lands in a GPU's
clock range and repeats once the card is busy."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

_spec = importlib.util.spec_from_file_location(
    "bench_common_gpu", Path(__file__).resolve().parents[2] / "scripts" / "_bench_common.py")
bc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bc)


def test_sm_clock_mhz_reads_a_plausible_clock():
    torch.cuda._sleep(1 << 26)  # ~40 ms busy: an idle card's clock (~345 MHz) ramps up first
    readings = [bc.sm_clock_mhz(torch) for _ in range(5)]
    assert all(100.0 < r < 3500.0 for r in readings), readings
    assert max(readings[2:]) < 1.1 * min(readings[2:]), readings
