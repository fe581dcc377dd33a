"""Helpers shared by the scripts/bench_*.py benchmarks."""
from __future__ import annotations

import ctypes
import subprocess


def driver_version() -> str:
    """The NVIDIA driver version (nvidia-smi), else the CUDA driver API version, else 'unknown'."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        v = ctypes.c_int()
        ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v))
        return f"CUDA driver API {v.value // 1000}.{v.value % 1000 // 10}"
    except OSError:
        return "unknown"
