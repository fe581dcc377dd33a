"""Every CUDA kernel we ship sits inside namespace trt_fastops.

scripts/gpu_session.sh runs racecheck on the attention script with `--kernel-name kns=trt_fastops`:
compute-sanitizer then instruments only kernels whose mangled name holds that substring. A kernel
declared outside the namespace would run unchecked while the summary still read 0 hazards, so this
test keeps the filter honest.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [p for p in sorted((ROOT / "plugins").rglob("*")) if p.suffix in {".cu", ".cuh", ".h", ".cc", ".cpp"}]
OPEN = re.compile(r"^namespace trt_fastops(::\w+)* \{", re.M)
CLOSE = re.compile(r"^\}  // namespace trt_fastops(::\w+)*$", re.M)
KERNEL = re.compile(r"^\s*__global__\b", re.M)


def test_kernels_inside_namespace():
    files_with_kernels = 0
    outside = []
    for path in SOURCES:
        text = path.read_text()
        kernels = [m.start() for m in KERNEL.finditer(text)]
        if not kernels:
            continue
        files_with_kernels += 1
        spans = list(zip([m.start() for m in OPEN.finditer(text)], [m.start() for m in CLOSE.finditer(text)]))
        for pos in kernels:
            if not any(a < pos < b for a, b in spans):
                line = text.count("\n", 0, pos) + 1
                outside.append(f"{path.relative_to(ROOT)}:{line}")
    assert files_with_kernels >= 8, "found too few kernel files: the scan no longer sees the sources"
    assert not outside, (
        "kernels outside namespace trt_fastops (gpu_session.sh's racecheck filter, kns=trt_fastops, "
        f"would skip them): {', '.join(outside)}")
