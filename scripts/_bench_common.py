"""Helpers shared by the scripts/bench_*.py benchmarks."""
from __future__ import annotations

import atexit
import ctypes
import datetime as _dt
import json
import re
import subprocess
from pathlib import Path


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


def ort_torch_header(benchmark: str) -> dict:
    """A results document's header (name, GPU 0, UTC date, versions) for scripts running ONNX Runtime
    and torch on the GPU."""
    import onnxruntime
    import torch

    return {"benchmark": benchmark, "gpu": torch.cuda.get_device_name(0),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "versions": {"onnxruntime": onnxruntime.__version__, "torch": torch.__version__,
                         "cuda": torch.version.cuda, "driver": driver_version()}}


def attention_kernel_name(native, dtype: str, q, k, v, out, **kw) -> str:
    """The attention kernel the native module would launch for [B, H, S, D] views q, k, v, out
    (self-attention, one head count) under its current path settings; launches nothing. kw: the
    other attention_forward arguments (scale, causal, mask ones)."""
    b, h, s, d = q.shape
    return native.attention_forward(
        dtype, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), b, h, h, s, s, d, d,
        q_strides=q.stride()[:3], k_strides=k.stride()[:3], v_strides=v.stride()[:3],
        out_strides=out.stride()[:3], dry_run=True, **kw)


# The clock-stamp readers' grids, (head dim, batch, heads, seqlen, causal): bench_attention's
# shapes (16k tokens).
CLOCK_CASES = [(64, 32, 32, 512, False), (64, 16, 32, 1024, False), (64, 4, 32, 4096, False),
               (128, 32, 16, 512, False), (128, 16, 16, 1024, False), (128, 4, 16, 4096, False),
               (64, 16, 32, 1024, True), (128, 16, 16, 1024, True)]


def stamp_cycles(a: float, b: float) -> float:
    """Cycles from stamp a to stamp b: the patches store clock64's low 24 bits (exact in a float)."""
    return (b - a) % (1 << 24)


class SmClockSampler:
    """The SM clock as nvidia-smi reports it every `period_ms`, read in a background thread, so a
    timed block's clock can be taken while the load runs (under the power limit a change can gain
    work per clock and lose it in clocks: bench/NOTES-attention-log.md item 104). A clock read by
    spin kernels after the block reads the card ramping up once the load stops (up to 2.6 GHz
    for an H200 that tops at 1.98). Samples carry nvidia-smi's own timestamps (wall clock, ms),
    so output buffering does not shift them; `median(windows)` pools the samples inside any of the
    (t0, t1) windows (time.time() values), after waiting up to `wait_s` for one past the last.
    power=True also reads the board's power draw: `median(windows, column=2)` gives its watts."""

    def __init__(self, period_ms: int = 20, lines=None, power: bool = False):
        import shutil
        import threading

        self.samples: list[tuple[float, float]] = []
        self._lock = threading.Lock()
        self._proc = None
        if lines is None:
            query = "timestamp,clocks.sm" + (",power.draw" if power else "")
            cmd = ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits",
                   "-lms", str(period_ms)]
            if shutil.which("stdbuf"):
                cmd = ["stdbuf", "-oL", *cmd]
            self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            atexit.register(self.close)  # an exception in the caller must not leave nvidia-smi looping
            lines = self._proc.stdout
        self._thread = threading.Thread(target=self._read, args=(lines,), daemon=True)
        self._thread.start()

    @staticmethod
    def parse(line: str):
        """(wall-clock seconds, MHz[, W]) from a `timestamp, clocks.sm[, power.draw]` line, or None."""
        stamp, *values = (x.strip() for x in line.split(","))
        if not values:
            return None
        try:
            return (_dt.datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp(), *map(float, values))
        except ValueError:
            return None

    def _read(self, lines) -> None:
        for line in lines:
            sample = self.parse(line)
            if sample is not None:
                with self._lock:
                    self.samples.append(sample)

    def median(self, windows, wait_s: float = 5.0, column: int = 1):
        """Median MHz (column 2: W) of the samples inside the (t0, t1) windows, or None if there are none."""
        import statistics
        import time

        if not windows:
            return None
        t1 = max(w[1] for w in windows)
        deadline = time.time() + wait_s
        while time.time() < deadline and self._thread.is_alive():
            with self._lock:
                if self.samples and self.samples[-1][0] > t1:
                    break
            time.sleep(0.01)
        with self._lock:
            inside = [x[column] for x in self.samples if len(x) > column and any(a <= x[0] <= b for a, b in windows)]
        return statistics.median(inside) if inside else None

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait()


def clock_stamp_run(torch, ops, d: int, b: int, h: int, s: int, causal: bool):
    """Runs attention on random fp16 [b, h, s, d] inputs through a build with one of the
    bench/*_clocks.patch measurement patches, which write clock stamps into the lse output.
    Returns (kernel name, consumer warpgroups per tile, query tiles per head, the lse output as a
    flat float64 CPU tensor)."""
    g = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", generator=g).half() for _ in range(3))
    out = torch.empty_like(q)
    for _ in range(5):
        _, lse = ops.attention(q, k, v, causal=causal, out=out, return_lse=True)
    torch.cuda.synchronize()
    name = attention_kernel_name(ops._native(), "float16", q, k, v, out, scale=d ** -0.5, causal=causal)
    rows = int(re.search(r",m(\d+),", name).group(1))
    return name, rows // 64, -(-s // rows), lse.flatten().double().cpu()


def gpu_setup(name: str, want_ort: bool):
    """(torch, _C, onnxruntime-with-CUDA-EP or None, device index, stream) for a GPU benchmark,
    or an exit status 2 after saying why it cannot run. The stream is a fresh one made current:
    the legacy default stream's handle is 0, which ONNX Runtime reads as "no user stream" and
    then runs on a stream of its own that the timing events never see."""
    import sys

    try:
        import torch
        from trt_fastops import _C
    except ImportError as e:
        print(f"{name}: cannot run: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print(f"{name}: cannot run: no CUDA device visible to torch", file=sys.stderr)
        return 2
    ort = None
    if want_ort:
        try:
            import onnxruntime

            if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
                ort = onnxruntime
        except ImportError:
            pass
    device_index = torch.cuda.current_device()
    stream = torch.cuda.Stream(device=device_index)
    torch.cuda.set_stream(stream)
    assert stream.cuda_stream != 0
    return torch, _C, ort, device_index, stream


def write_results(path: Path, doc: dict, errors: list, table_text: str) -> int:
    """Writes a benchmark's JSON document, prints its errors and table; the exit status (1 on errors)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {path}")
    for e in errors:
        print(f"ERROR {e}")
    print(table_text)
    return 1 if errors else 0
