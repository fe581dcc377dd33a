"""scripts/sanitize_attention.py's case selection without a GPU (--list prints what would run)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "sanitize_attention.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_cases_select_in_table_order():
    every = _run("--list").stdout.split()
    assert len(every) > 20 and "persistent-d64" in every
    picked = _run("--list", "--cases", "persistent-d64,d64").stdout.split()
    assert picked == ["d64", "persistent-d64"]


def test_unknown_case_is_refused_by_name():
    r = _run("--list", "--cases", "d64,no-such-case")
    assert r.returncode == 2
    assert "no-such-case" in r.stderr and "--list" in r.stderr
