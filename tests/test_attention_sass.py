"""What the compiler made of the sm_90a attention kernels (no GPU needed: nvcc, cuobjdump).

Issue 7's build rules, checked on every CI run rather than by hand after a tuning session:
  - no wgmma serialisation: ptxas's C7520 / C7515 notes ("wgmma.mma_async instructions are
    serialized due to ...") mean every matrix product waits for the previous one. A `wgmma` issue
    under a branch triggered C7520 once and cost the d64 tile 25-30%, ordinary writes to
    accumulator registers inside a pipeline stage C7515 and 30% (bench/NOTES-attention-log.md items
    20 and 27);
  - the warp-specialised kernels hold their state in registers: no spills, except the
    general-mask tiles (a mask row per query), whose bound is recorded here;
  - the SASS has HGMMA and no HMMA, TMA loads (UTMALDG) and register reallocation (USETMAXREG).
  - the ping-pong consumers wait for their own P V only after the softmax's row maxima (item 75:
    ptxas otherwise hoists that wait above the whole softmax).
  - in the unmasked d128 ping-pong kernels, row 1's max chain runs beside row 0's exponentials
    (item 77: ptxas otherwise puts both rows' maxima ahead of every exponential).
  - the unmasked d64 kernels sum P's rows in their P V product (m64n72k16), not with FADDs
    (item 78).
  - every sm_90a kernel waits for the grid ahead (griddepcontrol.wait: ACQBULK) before its first
    global load, store or atomic, since the launcher starts them with programmatic stream
    serialization (item 107); the warp-specialised ones let the next grid launch
    (launch_dependents: PREEXIT) only after that.

The translation unit is compiled once (about a minute on two cores) with the build's flags for
sm_90a. Skipped where nvcc is missing; the SASS test also needs cuobjdump and nvdisasm (the CUDA
toolkit's, or PyPI's nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm from the `test` extra).
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "plugins" / "attention" / "attention_hopper.cu"

# HopperWsConfig<D, BLOCK_N, CONSUMERS, STAGES, PINGPONG, CLUSTER_CTAS, PACKED> and the kernel's
# MASKED, KEY_ROW flags, as they appear in the mangled name of flash_fwd_ws_kernel<T, CFG, MASKED,
# KEY_ROW, MASK> (CLUSTER_CTAS and PACKED, defaulted, are spelled out by the mangling).
WS_NAME = re.compile(r"flash_fwd_ws_kernel.*HopperWsConfigILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELb([01])(?:ELi\d+)?"
                     r"(?:ELb[01])?EEELb([01])ELb([01])E")
# General masks (one row per query) keep their per-element mask loads in registers the tile
# does not have: these variants spill, as they did when the bound was recorded (92 and 148 bytes).
GENERAL_MASK_SPILL_BOUND = 160


def _tool(name: str) -> str | None:
    """A CUDA tool from PATH, CUDA_HOME / CUDA_PATH, /usr/local/cuda, or PyPI's nvidia/cu13 wheels."""
    found = shutil.which(name)
    if found:
        return found
    dirs = [Path(os.environ[v]) / "bin" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    dirs.append(Path("/usr/local/cuda/bin"))
    spec = importlib.util.find_spec("nvidia")
    if spec is not None and spec.submodule_search_locations:
        dirs += [Path(p) / "cu13" / "bin" for p in spec.submodule_search_locations]
    for d in dirs:
        if (d / name).is_file() and os.access(d / name, os.X_OK):
            return str(d / name)
    return None


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """(ptxas report, cubin path) of attention_hopper.cu for sm_90a."""
    nvcc = _tool("nvcc")
    if nvcc is None:
        pytest.skip("needs nvcc (CUDA toolkit) to compile the sm_90a attention kernels")
    cubin = tmp_path_factory.mktemp("sass") / "attention_hopper.cubin"
    cmd = [nvcc, "-std=c++17", "--expt-relaxed-constexpr", "-lineinfo", "-O3",
           "-gencode", "arch=compute_90a,code=sm_90a", f"-I{REPO}", '-DTRT_FASTOPS_CUDA_ARCHS="90a"',
           "-Xptxas", "-v", "-cubin", "-o", str(cubin), str(SOURCE)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, f"nvcc failed ({' '.join(cmd)}):\n{r.stderr[-4000:]}"
    return r.stdout + r.stderr, cubin


def ptxas_entries(report: str) -> dict[str, dict]:
    """Per kernel (mangled name): registers, stack frame and spill bytes from `ptxas -v`."""
    out: dict[str, dict] = {}
    cur = None
    for line in report.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            cur = out.setdefault(m.group(1), {})
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            cur.update(stack=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            cur["registers"] = int(m.group(1))
    return out


def ws_flags(name: str):
    """(head dim, consumers, pingpong, masked, key_row) of a flash_fwd_ws_kernel, else None."""
    m = WS_NAME.search(name)
    if not m:
        return None
    d, _, consumers, _, pingpong, masked, key_row = (int(x) for x in m.groups())
    return d, consumers, bool(pingpong), bool(masked), bool(key_row)


def test_report_parsing():
    report = (
        "ptxas info    : Compiling entry function '_ZN11trt_fastops9attention19flash_fwd_ws_kernelI6__halfNS0_14"
        "HopperWsConfigILi64ELi128ELi3ELi2ELb1ELi1EEELb1ELb1EEEvNS0_9FlashArgsENS0_7TmaMapsE' for 'sm_90a'\n"
        "ptxas info    : Function properties for x\n"
        "    16 bytes stack frame, 20 bytes spill stores, 36 bytes spill loads\n"
        "ptxas info    : Used 168 registers, used 16 barriers\n")
    (name, e), = ptxas_entries(report).items()
    assert e == {"stack": 16, "spill_stores": 20, "spill_loads": 36, "registers": 168}
    assert ws_flags(name) == (64, 3, True, True, True)
    assert ws_flags("_ZN11trt_fastops9attention23flash_fwd_hopper_kernelI6__half") is None


def test_no_wgmma_serialization(build):
    report, _ = build
    notes = [line.strip() for line in report.splitlines() if "C7520" in line or "are serialized" in line]
    assert not notes, "ptxas serialised wgmma (every product waits for the previous one):\n" + "\n".join(notes)


def test_warp_specialised_kernels_do_not_spill(build):
    report, _ = build
    entries = ptxas_entries(report)
    ws = {n: e for n, e in entries.items() if ws_flags(n) is not None}
    # Both dtypes of: d64 at 192 / 128 / 64 rows, d128, with and without masks.
    assert len(ws) >= 16, f"expected the warp-specialised instantiations, found {sorted(ws)}"
    bad = []
    for name, e in ws.items():
        d, consumers, pingpong, masked, key_row = ws_flags(name)
        bound = GENERAL_MASK_SPILL_BOUND if masked and not key_row else 0
        if e.get("spill_stores", 0) > bound or e.get("spill_loads", 0) > bound:
            bad.append(f"d{d} consumers={consumers} pingpong={pingpong} masked={masked} key_row={key_row}: "
                       f"{e} (at most {bound} bytes)")
    assert not bad, "warp-specialised kernels spill:\n" + "\n".join(bad)


def sass_bodies(text: str) -> dict[str, str]:
    """Each function's SASS in `cuobjdump -sass` output, by mangled name."""
    parts = re.split(r"\n\s*Function : (\S+)\n", text)
    return dict(zip(parts[1::2], parts[2::2]))


def sass_functions(text: str) -> dict[str, Counter]:
    """Mnemonic counts per function of `cuobjdump -sass` output."""
    return {name: Counter(re.findall(r"\b(HGMMA|HMMA|UTMALDG|USETMAXREG)\b", body))
            for name, body in sass_bodies(text).items()}


@pytest.fixture(scope="module")
def sass(build):
    """`cuobjdump -sass` of the cubin."""
    _, cubin = build
    cuobjdump, nvdisasm = _tool("cuobjdump"), _tool("nvdisasm")
    if cuobjdump is None or nvdisasm is None:
        pytest.skip("needs cuobjdump and nvdisasm (CUDA toolkit, or pip install nvidia-cuda-cuobjdump "
                    "nvidia-cuda-nvdisasm)")
    env = dict(os.environ, NVDISASM_PATH=str(Path(nvdisasm).parent))
    r = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def test_sass_hgmma_tma_setmaxreg(sass):
    funcs = sass_functions(sass)
    wgmma = {n: c for n, c in funcs.items() if "flash_fwd_ws_kernel" in n or "flash_fwd_hopper_kernel" in n}
    assert len(wgmma) >= 20, f"expected the sm_90a attention kernels in the SASS, found {sorted(funcs)}"
    bad = []
    for name, c in wgmma.items():
        want = {"HGMMA": c["HGMMA"] > 0, "no HMMA": c["HMMA"] == 0}
        if "flash_fwd_ws_kernel" in name:  # TMA loads; setmaxreg down in the producer, up in the consumers
            want.update({"UTMALDG": c["UTMALDG"] > 0, "USETMAXREG x2": c["USETMAXREG"] >= 2})
        missing = [k for k, ok in want.items() if not ok]
        if missing:
            bad.append(f"{name}: {', '.join(missing)} ({dict(c)})")
    assert not bad, "\n".join(bad)


def pv_wait_shuffles(body: str) -> list[int]:
    """Per block-loop trip in a function's SASS: the SHFL.BFLY between the S wait
    (`WARPGROUP.DEPBAR.LE gsb0, 0x1`) and the next P V wait (`... gsb0, 0x0`)."""
    out = []
    for m in re.finditer(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x1\b(.*?)WARPGROUP\.DEPBAR\.LE gsb0, 0x0\b", body, re.S):
        out.append(len(re.findall(r"\bSHFL\.BFLY\b", m.group(1))))
    return out


def softmax_spans(body: str) -> list[str]:
    """Per block-loop trip in a function's SASS: from the S wait (`WARPGROUP.DEPBAR.LE gsb0,
    0x1`) to the next HGMMA, the span that holds the block's softmax."""
    return [m.group(1) for m in re.finditer(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x1\b(.*?)(?=HGMMA|\Z)", body, re.S)]


def maxima_after_first_exp(body: str) -> list[int]:
    """Per block-loop trip: the FMNMX between its first MUFU.EX2 and the next HGMMA."""
    out = []
    for seg in softmax_spans(body):
        first = seg.find("MUFU.EX2")
        out.append(len(re.findall(r"\bFMNMX\b", seg[first:])) if first >= 0 else 0)
    return out


def loop_count_failures(sass: str, select, per_trip, least: int, what: str):
    """(kernels checked, failures) over the ws kernels select(*ws_flags) picks: per_trip(body)
    counts `what` in each block-loop trip, and every trip needs at least `least`."""
    checked, bad = 0, []
    for name, body in sass_bodies(sass).items():
        flags = ws_flags(name)
        if flags is None or not select(*flags):
            continue
        trips = per_trip(body)
        checked += 1
        if not trips or min(trips) < least:
            bad.append(f"{name}: {what} per loop {trips}")
    return checked, bad


def test_row_maxima_beside_exponentials(sass):
    """In the d128 unmasked ping-pong kernels, row 1's max chain runs beside row 0's
    exponentials (softmax_update's ROW_CHAIN; NOTES item 77: d128 1.3 % faster), not with row
    0's ahead of every exponential as ptxas orders two independent maxima."""
    checked, bad = loop_count_failures(
        sass, lambda d, _c, pingpong, masked, _k: d == 128 and pingpong and not masked,
        maxima_after_first_exp, 16, "FMNMX after the first exponential")
    assert checked >= 4, "expected the unmasked d128 ping-pong kernels (fp16, bf16; with and without softcap)"
    assert not bad, "\n".join(bad)


def test_pv_wait_after_row_maxima(sass):
    """The ping-pong consumers' wait for their own P V runs after the softmax's row maxima (their
    quad shuffles), not before the whole softmax where ptxas puts an unordered wait (NOTES item 75:
    d128 1.4 % faster). A never-taken arrive ordered after row 0's max holds it there."""
    checked, bad = loop_count_failures(
        sass, lambda _d, _c, pingpong, masked, _k: pingpong and not masked,
        pv_wait_shuffles, 2, "shuffles before the P V wait")
    assert checked >= 6, "expected the unmasked ping-pong kernels (d64 three / four consumers, d128)"
    assert not bad, "\n".join(bad)


def test_row_sums_by_tensor_cores(sass):
    """The unmasked d64 kernels sum P's rows in their P V product: m64n72k16, whose last 8
    columns read a block of ones (SUM_BY_MMA; NOTES item 78: d64 1.2 % faster), so their softmax
    has no FADD (the softcapped builds keep tanhf's)."""
    checked, bad = 0, []
    for name, body in sass_bodies(sass).items():
        flags = ws_flags(name)
        if flags is None or flags[0] != 64 or flags[3]:
            continue
        checked += 1
        if "HGMMA.64x72x16" not in body:
            bad.append(f"{name}: no HGMMA.64x72x16")
        if "Lb1EEEvNS0_9FlashArgs" not in name:  # SOFTCAP false, the kernel's last template flag
            fadds = [len(re.findall(r"\bFADD\b", seg)) for seg in softmax_spans(body)]
            if not fadds or max(fadds) > 0:
                bad.append(f"{name}: FADD per loop {fadds}")
    assert checked >= 10, "expected the unmasked d64 kernels (fp16, bf16; 1, 2, 3 and 4 consumers)"
    assert not bad, "\n".join(bad)


def test_q_descriptors_hoisted(sass):
    """The unmasked d64 kernels without softcap build Q's wgmma descriptors once per CTA
    (`hoist_q`; NOTES item 81: d64 0.6 % faster), so each S product reads a uniform register
    group of its own: four distinct `gdesc` groups over the S products, where a descriptor
    rebuilt in the loop before every product reuses one."""
    checked, bad = 0, []
    for name, body in sass_bodies(sass).items():
        flags = ws_flags(name)
        if flags is None or flags[0] != 64 or flags[3] or "Lb1EEEvNS0_9FlashArgs" in name:
            continue
        checked += 1
        groups = set(re.findall(r"HGMMA\.64x\d+x16\.F32\S*\s+R\d+, gdesc\[(UR\d+)\]", body))
        if len(groups) < 4:
            bad.append(f"{name}: S products read {sorted(groups)}")
    assert checked >= 10, "expected the unmasked d64 kernels without softcap (fp16, bf16; 1-4 consumers)"
    assert not bad, "\n".join(bad)


# Global-memory instructions (generic LD / ST are left out: before the wait they are the d64
# kernels' stores of the row sums' ones into shared memory through a generic pointer).
GLOBAL_ACCESS = re.compile(r"\b(?:LDG|STG|ATOMG|REDG|RED|LDGSTS|UTMALDG|UTMASTG|UTMAPF|UBLKCP)\b")


def test_grid_dependency_wait_first(sass):
    # launch_kernel launches these kernels with programmatic stream serialization: a kernel may
    # start while the one ahead still writes its inputs, so nothing may reach global memory
    # before griddepcontrol.wait (item 107).
    bad, checked = [], 0
    for name, body in sass_bodies(sass).items():
        if "flash_fwd_ws_kernel" not in name and "flash_fwd_hopper_kernel" not in name:
            continue
        checked += 1
        waits = [m.start() for m in re.finditer(r"\bACQBULK\b", body)]
        if len(waits) != 1:
            bad.append(f"{name}: {len(waits)} ACQBULK")
            continue
        early = GLOBAL_ACCESS.findall(body[:waits[0]])
        if early:
            bad.append(f"{name}: {sorted(set(early))} before the wait")
        trigger = body.find("PREEXIT")
        if "flash_fwd_ws_kernel" in name and trigger < waits[0]:
            bad.append(f"{name}: no launch_dependents (PREEXIT) after the wait")
    assert checked >= 20, f"expected the sm_90a attention kernels, found {checked}"
    assert not bad, "\n".join(bad)
