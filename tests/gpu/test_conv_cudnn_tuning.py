"""GPU tests of the cuDNN conv path's plan choice and CUDA-graph replay (plugins/conv/conv_cudnn.h).

- Graph replay: a plan-cache hit whose pointers (x, w, bias, y, workspace) were seen before
  replays a CUDA graph of cuDNN's execution (+ our bias/activation kernel when it is separate)
  instead of calling cudnnBackendExecute. Its outputs must be bitwise identical to the direct
  execution (TRT_FASTOPS_CONV_GRAPH_REPLAY=0) of the same engine, over more pointer sets than the
  plan's 8 variant-pack slots, with new data behind the same addresses.
- A caller's stream under capture (torch.cuda.graph, global mode) always gets the direct execute,
  also when a graph exists for those pointers, and when a new pointer set replaces a slot that
  holds a graph during the capture.
- Plan choice: with bias / activation both the fused graph and the plain one (+ our kernel) are
  timed; the description reports each variant's best time and the chosen one must be the faster.
- cuDNN vs our kernel: with autotuning (backend 'auto'), cuDNN's chosen plan and trt_fastops'
  fallback are timed with the same harness; the plan info reports both times (cudnn_us,
  fallback_us) and the plan must be the faster one (a tie keeps cuDNN).
  TRT_FASTOPS_CONV_TIME_FALLBACK=0 turns that off. The other tests set it to 0 so that they keep
  testing cuDNN's own choice.

Every output is NaN-poisoned before its run and checked against a float64 reference. Environment
variables are read when a signature is planned, so each test clears the plan cache first.
"""
from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
_C = pytest.importorskip("trt_fastops._C")
if not hasattr(_C, "conv_forward"):
    pytest.skip("trt_fastops._C has no conv bindings", allow_module_level=True)

sys.path.append(str(Path(__file__).resolve().parents[2]))  # the installed trt_fastops wins
from scripts._conv_torch import (ConvCase, Workspaces, conv_kwargs, make_inputs, max_error_ratio,  # noqa: E402
                                 point_at_cudnn, reference)

point_at_cudnn()

C = ConvCase
PACK_SLOTS = 8  # CudnnPlan's variant-pack slots (conv_cudnn.cc kPackSlots)

# Plans that cannot take the direct path (so never replay) skip the replay checks;
# test_some_plans_replay requires that some of these do.
REPLAY_CASES = [
    C("replay_3x3_relu", 4, 64, 64, (14, 14), (3, 3), pads_begin=(1, 1), pads_end=(1, 1), activation="relu"),
    C("replay_1x1_bias", 4, 64, 128, (14, 14), (1, 1)),
    C("replay_dw3x3_silu", 2, 96, 96, (14, 14), (3, 3), group=96, pads_begin=(1, 1), pads_end=(1, 1),
      activation="silu"),
    C("replay_nobias_s2", 2, 32, 64, (15, 15), (3, 3), stride=(2, 2), pads_begin=(1, 1), pads_end=(1, 1),
      bias=False),
    # dgrad + bias + relu: cuDNN fuses no epilogue into dgrad, so the graph holds our kernel too
    C("replay_convT_bias_relu", 2, 64, 32, (7, 7), (4, 4), stride=(2, 2), pads_begin=(1, 1), pads_end=(1, 1),
      transpose=True, activation="relu"),
]


def _cuda_ok():
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")


def _fresh(monkeypatch, autotune: str, replay: str, candidates: str = "4", time_fallback: str = "0"):
    monkeypatch.setenv("TRT_FASTOPS_CONV_AUTOTUNE", autotune)
    monkeypatch.setenv("TRT_FASTOPS_CONV_AUTOTUNE_CANDIDATES", candidates)
    monkeypatch.setenv("TRT_FASTOPS_CONV_GRAPH_REPLAY", replay)
    monkeypatch.setenv("TRT_FASTOPS_CONV_TIME_FALLBACK", time_fallback)
    monkeypatch.delenv("TRT_FASTOPS_CONV_FORCE_FALLBACK", raising=False)
    _C.conv_cache_clear()
    _C.conv_cache_reset_stats()


def _stats():
    s = _C.conv_cache_stats()
    return {k: s[k] for k in ("graph_launches", "graph_captures", "graph_failures", "capturing_executions",
                              "exec_failures")}


def _delta(after, before):
    return {k: after[k] - before[k] for k in after}


class Runner:
    """One signature on one stream: x, w, b fixed tensors (contents may change), y chosen per call."""

    def __init__(self, case, dtype, seed=0, backend="auto", stream=None):
        _cuda_ok()  # skips the test without CUDA
        self.stream = stream if stream is not None else torch.cuda.Stream()
        self.case, self.dtype, self.backend = case, dtype, backend
        self.x, self.w, self.b = make_inputs(torch, case, dtype, seed=seed)
        self.ws = Workspaces(torch)
        self.buf = None

    def new_y(self):
        return torch.empty(self.case.y_shape(), dtype=getattr(torch, self.dtype), device="cuda")

    def kwargs(self, y):
        return conv_kwargs(self.case, self.dtype, self.x, self.w, self.b, y, stream=self.stream.cuda_stream,
                           backend=self.backend)

    def plan(self, y):
        info = _C.conv_plan(**self.kwargs(y))
        self.buf = self.ws.get(info["workspace_bytes"], self.stream.cuda_stream)
        return info

    def forward(self, y):
        """Poison y, run (plan-cache hit) on the stream, wait; returns conv_forward's dict."""
        self.stream.wait_stream(torch.cuda.current_stream())  # x / contents written on the default stream
        with torch.cuda.stream(self.stream):
            y.fill_(float("nan"))
            info = _C.conv_forward(**self.kwargs(y), workspace=self.buf.data_ptr(), workspace_bytes=self.buf.numel())
        self.stream.synchronize()
        return info

    def check(self, y, what):
        ref = reference(torch, self.case, self.x, self.w, self.b)
        ref_abs = reference(torch, self.case, self.x, self.w, self.b, absolute=True)
        ratio = max_error_ratio(torch, y, ref, ref_abs, self.dtype)
        assert ratio <= 1.0, f"{self.case.name} {self.dtype} {what}: error {ratio:.3g} x the bound"


def _bits(t):
    return t.contiguous().view(torch.int16 if t.element_size() == 2 else torch.int32).clone()


def _contents(runner, k):
    """k different random contents for x (same shape/dtype), never zero-filled."""
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    return [(torch.randn(runner.x.shape, generator=gen, device="cuda") * (1 + i)).to(runner.x.dtype) for i in range(k)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", REPLAY_CASES, ids=[c.name for c in REPLAY_CASES])
def test_graph_replay_bitwise_equals_direct(case, dtype, monkeypatch):
    r = Runner(case, dtype, seed=5)
    contents = _contents(r, 3)
    ys = [r.new_y() for _ in range(2)]          # alternated: each gets a graph on its 2nd use
    many = [r.new_y() for _ in range(PACK_SLOTS + 2)]  # cycled: more pointer sets than slots

    # Direct execution (replay off), one output per x content: the bitwise baseline. An engine
    # whose direct runs differ among themselves (atomics) is only checked against float64.
    _fresh(monkeypatch, autotune="0", replay="0")
    direct_info = r.plan(ys[0])
    if not direct_info["cudnn"]:
        pytest.skip(f"cuDNN did not take {case.name}: {direct_info['cudnn_refusal']}")
    assert not direct_info["graph_replay"], direct_info
    before = _stats()
    direct, deterministic = [], True
    for i, c in enumerate(contents):
        r.x.copy_(c)
        runs = []
        for _ in range(3):  # repeated hits with the same pointers stay direct when replay is off
            r.forward(ys[i % 2])
            runs.append(_bits(ys[i % 2]))
        r.check(ys[i % 2], "direct (TRT_FASTOPS_CONV_GRAPH_REPLAY=0)")
        deterministic &= all(torch.equal(runs[0], b) for b in runs[1:])
        direct.append(runs[0])
    d = _delta(_stats(), before)
    assert d["graph_launches"] == 0 and d["graph_captures"] == 0, d

    # Replay on: same engine (heuristics' first plan, untimed), same inputs.
    _fresh(monkeypatch, autotune="0", replay="1")
    info = r.plan(ys[0])
    assert info["cudnn"], info
    assert info["description"] == direct_info["description"], (info, direct_info)
    if not info["graph_replay"]:
        pytest.skip(f"{case.name}: plan without the direct path, no graph replay ({info['description']})")

    def run_and_compare(y, k, what):
        r.x.copy_(contents[k])  # new data behind the same address
        r.forward(y)
        if deterministic:
            assert torch.equal(_bits(y), direct[k]), (
                f"{case.name} {dtype} {what}: graph replay differs from the direct execution ({info['description']})")
        else:
            r.check(y, what + " (engine not bitwise reproducible: float64 check only)")

    def alternate(n, phase):
        for i in range(n):
            run_and_compare(ys[i % 2], i % len(contents), f"{phase} call {i}")

    before = _stats()
    n_alt = 2 * PACK_SLOTS + 3
    alternate(n_alt, "alternating")
    d = _delta(_stats(), before)
    # Each of the 2 buffers: 1st use direct, 2nd captured + launched, then launched.
    assert d == {"graph_launches": n_alt - 2, "graph_captures": 2, "graph_failures": 0, "capturing_executions": 0,
                 "exec_failures": 0}, d

    # More pointer sets than slots, cyclically: every use misses (least recently used slot
    # replaced, the two graphs above destroyed with their slots): all direct, all correct.
    before = _stats()
    for rep in range(2):
        for j, y in enumerate(many):
            run_and_compare(y, (j + rep) % len(contents), f"cycled buffer {j} rep {rep}")
    d = _delta(_stats(), before)
    assert d["graph_launches"] == 0 and d["graph_captures"] == 0 and d["graph_failures"] == 0, d

    # Back to the two buffers: captured again after their slots were replaced.
    before = _stats()
    alternate(6, "after eviction")
    d = _delta(_stats(), before)
    assert d["graph_captures"] == 2 and d["graph_launches"] == 4 and d["graph_failures"] == 0, d
    if not deterministic:
        print(f"{case.name} {dtype}: direct runs not bitwise reproducible ({info['description']})")


def _replay_case(monkeypatch, dtype="float16"):
    """(case, Runner) of the first REPLAY_CASES plan that takes graph replay, with replay on and the
    cache fresh; skips when none does (test_some_plans_replay fails then)."""
    for case in REPLAY_CASES:
        _fresh(monkeypatch, autotune="0", replay="1")
        r = Runner(case, dtype, seed=9)
        info = r.plan(r.new_y())
        if info["cudnn"] and info["graph_replay"]:
            _fresh(monkeypatch, autotune="0", replay="1")
            return case, r
    pytest.skip("no REPLAY_CASES plan takes the direct path (see test_some_plans_replay)")


def test_some_plans_replay(monkeypatch):
    _cuda_ok()
    infos = {}
    for case in REPLAY_CASES:
        _fresh(monkeypatch, autotune="0", replay="1")
        r = Runner(case, "float16", seed=1)
        infos[case.name] = r.plan(r.new_y())
    replaying = [n for n, i in infos.items() if i["cudnn"] and i["graph_replay"]]
    print({n: (i["description"], i["graph_replay"]) for n, i in infos.items()})
    assert replaying, f"no cuDNN plan takes the direct path / graph replay: {infos}"


def test_graph_replay_disabled_by_environment(monkeypatch):
    _cuda_ok()
    case, r = _replay_case(monkeypatch)  # a plan that would replay
    _fresh(monkeypatch, autotune="0", replay="0")
    y = r.new_y()
    info = r.plan(y)
    assert info["cudnn"] and not info["graph_replay"], info
    before = _stats()
    for i in range(5):
        r.x.copy_(torch.randn_like(r.x, dtype=torch.float32).to(r.x.dtype))
        r.forward(y)
        r.check(y, f"replay disabled, call {i}")
    d = _delta(_stats(), before)
    assert d["graph_launches"] == 0 and d["graph_captures"] == 0 and d["capturing_executions"] == 0, d


def test_capture_executes_directly_into_the_callers_graph(monkeypatch):
    """torch.cuda.graph (global capture mode) around a hit whose pointers already have a graph of
    their own, and around a new pointer set that replaces a slot holding a graph."""
    _cuda_ok()
    case, r = _replay_case(monkeypatch)
    stream = r.stream
    ys = [r.new_y() for _ in range(PACK_SLOTS)]
    info = r.plan(ys[0])
    assert info["cudnn"] and info["graph_replay"], info
    for y in ys:  # every slot ends up holding a graph
        for _ in range(3):
            r.forward(y)
    s = _stats()
    assert s["graph_captures"] == PACK_SLOTS and s["graph_failures"] == 0, s

    # (1) Known pointers under capture: executed directly, recorded in torch's graph.
    before = _stats()
    g1 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g1, stream=stream):
        _C.conv_forward(**r.kwargs(ys[0]), workspace=r.buf.data_ptr(), workspace_bytes=r.buf.numel())
    d = _delta(_stats(), before)
    assert d["capturing_executions"] == 1 and d["graph_launches"] == 0 and d["graph_captures"] == 0, d

    # (2) A new pointer set under capture: replaces the least recently used slot (its graph is
    # retired, not destroyed inside the capture).
    y_new = r.new_y()
    g2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g2, stream=stream):
        _C.conv_forward(**r.kwargs(y_new), workspace=r.buf.data_ptr(), workspace_bytes=r.buf.numel())
    d = _delta(_stats(), before)
    assert d["capturing_executions"] == 2 and d["graph_launches"] == 0 and d["graph_failures"] == 0, d

    for g, y in ((g1, ys[0]), (g2, y_new)):
        r.x.copy_(torch.randn_like(r.x, dtype=torch.float32).to(r.x.dtype))
        y.fill_(float("nan"))
        torch.cuda.synchronize()
        g.replay()
        torch.cuda.synchronize()
        r.check(y, "torch CUDA graph replay")

    # Outside capture again: the retired graph is destroyed, replay goes on and stays correct.
    before = _stats()
    for y in (ys[0], y_new, y_new, ys[0]):
        r.x.copy_(torch.randn_like(r.x, dtype=torch.float32).to(r.x.dtype))
        r.forward(y)
        r.check(y, "after the capture")
    d = _delta(_stats(), before)
    assert d["graph_failures"] == 0 and d["graph_launches"] >= 2, d
    del g1, g2


# Cases with bias / activation where both graph variants usually build.
TUNING_CASES = [
    C("tune_1x1_bias", 8, 64, 64, (28, 28), (1, 1)),
    C("tune_3x3_relu", 4, 64, 64, (14, 14), (3, 3), pads_begin=(1, 1), pads_end=(1, 1), activation="relu"),
    C("tune_dw3x3_bias", 8, 144, 144, (28, 28), (3, 3), group=144, pads_begin=(1, 1), pads_end=(1, 1)),
    C("tune_grouped_silu", 4, 96, 96, (14, 14), (3, 3), group=4, pads_begin=(1, 1), pads_end=(1, 1),
      activation="silu"),
]
_TIMES = re.compile(r"\(fastest of (\d+) fused \+ (\d+) plain; fused (-|[\d.]+ us), plain (-|[\d.]+ us)\)")


def _us(text):
    return None if text == "-" else float(text.split()[0])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", TUNING_CASES, ids=[c.name for c in TUNING_CASES])
def test_autotune_picks_faster_of_fused_and_plain(case, dtype, monkeypatch):
    r = Runner(case, dtype, seed=3)
    _fresh(monkeypatch, autotune="1", replay="1", candidates="4")
    y = r.new_y()
    info = r.plan(y)
    if not info["cudnn"]:
        pytest.skip(f"cuDNN did not take {case.name}: {info['cudnn_refusal']}")
    desc = info["description"]
    print(f"{case.name} {dtype}: {desc}")
    assert ("by trt_fastops kernel" in desc) == info["separate_epilogue"], info
    m = _TIMES.search(desc)
    if m is None:
        # Only one plan built in all: nothing was timed (no parentheses) -- allowed, but say so.
        assert "fastest of" not in desc, desc
        pytest.skip(f"one candidate only: {desc}")
    n_fused, n_plain = int(m.group(1)), int(m.group(2))
    fused_us, plain_us = _us(m.group(3)), _us(m.group(4))
    assert n_fused + n_plain >= 2 and n_fused <= 4 and n_plain <= 4, desc
    chosen, other = (plain_us, fused_us) if info["separate_epilogue"] else (fused_us, plain_us)
    assert chosen is not None, desc
    if other is not None:
        assert chosen <= other, f"chose the slower variant: {desc}"
    for i in range(4):  # hits (the last ones replayed from a graph when the plan allows it)
        r.x.copy_(torch.randn_like(r.x, dtype=torch.float32).to(r.x.dtype))
        r.forward(y)
        r.check(y, f"autotuned plan, call {i}")


@pytest.mark.parametrize("candidates", ["0", "1"])
def test_candidates_zero_or_one_means_heuristics_first(candidates, monkeypatch):
    case = TUNING_CASES[1]
    r = Runner(case, "float16", seed=4)
    _fresh(monkeypatch, autotune="1", replay="1", candidates=candidates)
    y = r.new_y()
    info = r.plan(y)
    if not info["cudnn"]:
        pytest.skip(f"cuDNN did not take the case: {info['cudnn_refusal']}")
    assert "fastest of" not in info["description"], info  # nothing timed
    r.forward(y)
    r.check(y, f"TRT_FASTOPS_CONV_AUTOTUNE_CANDIDATES={candidates}")


# cuDNN's best plan raced against trt_fastops' kernel. The stem is ResNet-50's 7x7 stride-2 conv on
# 3 channels at batch 32, where the H100 run had the fallback ahead in float16 (206 vs 341 us).
RACE_CASES = [
    C("race_stem_7x7s2", 32, 3, 64, (224, 224), (7, 7), stride=(2, 2), pads_begin=(3, 3), pads_end=(3, 3)),
    C("race_3x3_relu", 4, 64, 64, (14, 14), (3, 3), pads_begin=(1, 1), pads_end=(1, 1), activation="relu"),
    C("race_1x1_bias", 8, 64, 64, (28, 28), (1, 1)),
    C("race_dw3x3_bias", 8, 144, 144, (28, 28), (3, 3), group=144, pads_begin=(1, 1), pads_end=(1, 1)),
]


def _fallback_workspace(r, y, kernel):
    """workspace_bytes of the same signature on the fallback kernel `kernel` (its own choice, or the
    NCHW-gather GEMM that backs a cuDNN plan up when the own choice needs more workspace), or None
    for a pipelined GEMM: autotuning times its tile widths and split-K factors, so planning the
    signature again may pick another variant (another workspace); then only the family is checked."""
    backend = "gather" if kernel.startswith("gemm_mma<") else "fallback"
    kw = conv_kwargs(r.case, r.dtype, r.x, r.w, r.b, y, stream=r.stream.cuda_stream, backend=backend)
    info = _C.conv_plan(**kw)
    if kernel.startswith(("gemm_nhwc<", "gemm_pointwise<")):
        family = kernel.split(",")[0]
        assert info["fallback_kernel"].startswith(family + ","), (info, kernel)
        return None
    assert info["fallback_kernel"] == kernel, (info, kernel)
    return info["workspace_bytes"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", RACE_CASES, ids=[c.name for c in RACE_CASES])
def test_autotune_keeps_the_faster_of_cudnn_and_fallback(case, dtype, monkeypatch):
    r = Runner(case, dtype, seed=6)
    _fresh(monkeypatch, autotune="1", replay="1", candidates="4", time_fallback="1")
    y = r.new_y()
    info = r.plan(y)
    desc = info["description"]
    print(f"{case.name} {dtype}: cudnn {info['cudnn_us']:.1f} us, fallback {info['fallback_us']:.1f} us: {desc}")
    if not info["cudnn"] and info["cudnn_us"] == 0:
        pytest.skip(f"cuDNN did not take {case.name}: {info['cudnn_refusal']}")
    assert info["cudnn_us"] > 0 and info["fallback_us"] > 0, info
    # The fallback must be strictly faster to replace cuDNN.
    assert info["cudnn"] == (info["cudnn_us"] <= info["fallback_us"]), info
    fallback_ws = _fallback_workspace(r, y, info["fallback_kernel"])
    if info["cudnn"]:
        # "; fallback KERNEL T us", and "(backup: KERNEL2)" when the timed kernel needs more workspace
        assert desc.startswith("cudnn ") and "; fallback " in desc and info["fallback_kernel"] in desc, info
        assert info["cudnn_refusal"] == "", info
        assert fallback_ws is None or info["workspace_bytes"] >= fallback_ws, (info, fallback_ws)  # room to fall back in
    else:
        won = re.match(re.escape(f"fallback {info['fallback_kernel']} (faster than cuDNN's best: ") +
                       r"[\d.]+ us vs [\d.]+ us(, best of \d+ variants)?, cudnn .+\)$", desc)
        assert won is not None, info
        assert info["cudnn_refusal"].startswith("slower than trt_fastops' kernel"), info
        assert not info["separate_epilogue"] and not info["graph_replay"], info
        assert fallback_ws is None or info["workspace_bytes"] == fallback_ws, (info, fallback_ws)
    for i in range(3):  # hits: the chosen backend (replayed from a graph when cuDNN's plan allows it)
        r.x.copy_(torch.randn_like(r.x, dtype=torch.float32).to(r.x.dtype))
        r.forward(y)
        r.check(y, f"{'cudnn' if info['cudnn'] else 'fallback'} chosen by timing, call {i}")


def test_time_fallback_disabled_by_environment(monkeypatch):
    case = RACE_CASES[1]
    r = Runner(case, "float16", seed=7)
    _fresh(monkeypatch, autotune="1", replay="1", candidates="4", time_fallback="0")
    y = r.new_y()
    info = r.plan(y)
    if not info["cudnn"]:
        pytest.skip(f"cuDNN did not take {case.name}: {info['cudnn_refusal']}")
    assert info["fallback_us"] == 0, info
    assert "; fallback " not in info["description"], info
    # cuDNN's own time is reported when it timed several candidates.
    assert (info["cudnn_us"] > 0) == ("fastest of" in info["description"]), info
    r.forward(y)
    r.check(y, "TRT_FASTOPS_CONV_TIME_FALLBACK=0")

    # Without autotuning nothing is timed, whatever TRT_FASTOPS_CONV_TIME_FALLBACK says.
    _fresh(monkeypatch, autotune="0", replay="1", time_fallback="1")
    info = r.plan(y)
    assert info["cudnn"] and info["cudnn_us"] == 0 and info["fallback_us"] == 0, info


def test_forced_cudnn_backend_never_races_the_fallback(monkeypatch):
    case = RACE_CASES[0]
    r = Runner(case, "float16", seed=8, backend="cudnn")
    _fresh(monkeypatch, autotune="1", replay="1", candidates="4", time_fallback="1")
    y = r.new_y()
    info = r.plan(y)
    assert info["cudnn"] and info["fallback_us"] == 0 and info["description"].startswith("cudnn "), info
    r.forward(y)
    r.check(y, "backend 'cudnn' with autotuning")


@pytest.mark.parametrize("candidates", ["0", "1"])
def test_sole_candidate_is_timed_against_the_fallback(candidates, monkeypatch):
    case = TUNING_CASES[1]
    r = Runner(case, "float16", seed=4)
    _fresh(monkeypatch, autotune="1", replay="1", candidates=candidates, time_fallback="1")
    y = r.new_y()
    info = r.plan(y)
    if not info["cudnn"] and info["cudnn_us"] == 0:
        pytest.skip(f"cuDNN did not take the case: {info['cudnn_refusal']}")
    assert "fastest of" not in info["description"], info  # one cuDNN plan: not tuned, only timed
    assert info["cudnn_us"] > 0 and info["fallback_us"] > 0, info
    assert info["cudnn"] == (info["cudnn_us"] <= info["fallback_us"]), info
    r.forward(y)
    r.check(y, f"TRT_FASTOPS_CONV_AUTOTUNE_CANDIDATES={candidates}, timed against the fallback")


# ---------------------------------------------------------------------------
# The fallback's graph replay (conv_replay.h): trt_fastops' own kernels (packing, channels-last
# copy, GEMM, split-K finalize / depthwise / direct) captured per pointer set on its 2nd use.
REPLAY_SLOTS = 8  # LaunchReplay::kSlots
FALLBACK_REPLAY_CASES = [
    # (case, backend): channels-last GEMM with split-K, pointwise GEMM reading w in place,
    # the NCHW-gather GEMM, depthwise, direct (ConvTranspose)
    (C("fb_replay_split_3x3", 1, 256, 72, (6, 6), (3, 3), pads_begin=(1, 1), pads_end=(1, 1),
       activation="relu"), "gemm"),
    (C("fb_replay_pointwise", 2, 64, 128, (8, 8), (1, 1), activation="silu"), "gemm"),
    (C("fb_replay_gather", 2, 24, 40, (9, 10), (3, 3), pads_begin=(1, 0), pads_end=(0, 1)), "gather"),
    (C("fb_replay_dw", 2, 32, 32, (14, 14), (3, 3), group=32, stride=(2, 2), pads_begin=(1, 1),
       pads_end=(1, 1)), "depthwise"),
    (C("fb_replay_direct_T", 1, 8, 8, (6, 7), (3, 3), group=8, stride=(2, 3), pads_begin=(1, 0),
       pads_end=(0, 1), transpose=True), "direct"),
]


def _fb_stats():
    s = _C.conv_cache_stats()
    return {k: s["fallback_" + k] for k in ("graph_launches", "graph_captures", "graph_failures")}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("case,backend", FALLBACK_REPLAY_CASES, ids=[c.name for c, _ in FALLBACK_REPLAY_CASES])
def test_fallback_graph_replay_bitwise_equals_direct(case, backend, dtype, monkeypatch):
    r = Runner(case, dtype, seed=11, backend=backend)
    contents = _contents(r, 3)
    ys = [r.new_y() for _ in range(2)]
    many = [r.new_y() for _ in range(REPLAY_SLOTS + 2)]

    _fresh(monkeypatch, autotune="0", replay="0")
    direct_info = r.plan(ys[0])
    assert not direct_info["cudnn"], direct_info
    before = _fb_stats()
    direct = []
    for i, c in enumerate(contents):
        r.x.copy_(c)
        r.forward(ys[i % 2])
        r.check(ys[i % 2], "direct (TRT_FASTOPS_CONV_GRAPH_REPLAY=0)")
        direct.append(_bits(ys[i % 2]))
    assert _delta(_fb_stats(), before) == {"graph_launches": 0, "graph_captures": 0, "graph_failures": 0}

    _fresh(monkeypatch, autotune="0", replay="1")
    info = r.plan(ys[0])
    assert info["fallback_kernel"] == direct_info["fallback_kernel"], (info, direct_info)

    def run_and_compare(y, k, what):
        r.x.copy_(contents[k])  # new data behind the same address
        r.forward(y)
        assert torch.equal(_bits(y), direct[k]), f"{case.name} {dtype} {what}: replay differs from direct"

    before = _fb_stats()
    n_alt = 2 * REPLAY_SLOTS + 3
    for i in range(n_alt):
        run_and_compare(ys[i % 2], i % len(contents), f"alternating call {i}")
    # Each buffer: 1st use direct, 2nd captured + launched, then launched.
    assert _delta(_fb_stats(), before) == {"graph_launches": n_alt - 2, "graph_captures": 2, "graph_failures": 0}

    # More pointer sets than slots, cyclically: every use misses, all direct, all correct.
    before = _fb_stats()
    for rep in range(2):
        for j, y in enumerate(many):
            run_and_compare(y, (j + rep) % len(contents), f"cycled buffer {j} rep {rep}")
    assert _delta(_fb_stats(), before) == {"graph_launches": 0, "graph_captures": 0, "graph_failures": 0}


def test_fallback_replay_under_callers_capture(monkeypatch):
    """torch.cuda.graph around fallback hits (pointers with and without a graph of their own): the
    launches go into torch's graph directly; LaunchReplay's slots are left alone."""
    case, backend = FALLBACK_REPLAY_CASES[0]
    r = Runner(case, "float16", seed=12, backend=backend)
    _fresh(monkeypatch, autotune="0", replay="1")
    y = r.new_y()
    r.plan(y)
    for _ in range(3):
        r.forward(y)
    assert _fb_stats()["graph_captures"] == 1
    y_new = r.new_y()
    graphs = []
    before = _fb_stats()
    for target in (y, y_new):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=r.stream):
            _C.conv_forward(**r.kwargs(target), workspace=r.buf.data_ptr(), workspace_bytes=r.buf.numel())
        graphs.append((g, target))
    assert _delta(_fb_stats(), before) == {"graph_launches": 0, "graph_captures": 0, "graph_failures": 0}
    for g, target in graphs:
        r.x.copy_(torch.randn_like(r.x, dtype=torch.float32).to(r.x.dtype))
        target.fill_(float("nan"))
        torch.cuda.synchronize()
        g.replay()
        torch.cuda.synchronize()
        r.check(target, "torch CUDA graph replay of a fallback call")
    r.forward(y)  # outside capture again: its own graph
    r.check(y, "after the capture")
    assert _delta(_fb_stats(), before)["graph_launches"] == 1


TUNED_FALLBACK_CASES = [
    (C("fb_tune_3x3", 2, 128, 128, (14, 14), (3, 3), pads_begin=(1, 1), pads_end=(1, 1)),
     r"gemm_nhwc<float16,bn(64|128)(,split\d)?>"),
    # staged depthwise: smaller tiles and the register path are its variants
    (C("fb_tune_dw3x3s2", 8, 48, 48, (28, 28), (3, 3), group=48, stride=(2, 2), pads_begin=(1, 1),
       pads_end=(1, 1)), r"depthwise<float16,k3s2(,staged)?>"),
]


@pytest.mark.parametrize("case,kernel", TUNED_FALLBACK_CASES, ids=[c.name for c, _ in TUNED_FALLBACK_CASES])
def test_autotuned_fallback_reports_its_variants(case, kernel, monkeypatch):
    """Backend 'fallback' with autotuning times the kernel's variants (the pipelined GEMM's tile
    widths / split-K factors, the depthwise kernel's staged tile sizes) and keeps the fastest (the
    description says how many); forced kernels ('gemm', 'depthwise') are never tuned."""
    r = Runner(case, "float16", seed=13, backend="fallback")
    _fresh(monkeypatch, autotune="1", replay="1")
    y = r.new_y()
    info = r.plan(y)
    print(info["description"])
    assert re.match("fallback " + kernel + r" \(best of \d+ variants\) [\d.]+ us$", info["description"]), info
    assert info["fallback_us"] > 0, info
    for i in range(3):
        r.x.copy_(torch.randn_like(r.x, dtype=torch.float32).to(r.x.dtype))
        r.forward(y)
        r.check(y, f"tuned fallback, call {i}")
    forced = Runner(case, "float16", seed=13, backend="gemm" if kernel.startswith("gemm") else "depthwise")
    finfo = forced.plan(y)
    assert finfo["fallback_us"] == 0 and "best of" not in finfo["description"], finfo


GUARD = 64  # elements of y's buffer on each side of it (256 bytes at float32)
BOUNDS_CASES = [
    # The TensorRT contract test's ConvTranspose in which compute-sanitizer caught cuDNN's FFT
    # engine writing past y while autotuning timed it (unequal begin / end padding).
    C("convT_g2_pads_0110", 1, 4, 6, (3, 4), (2, 2), group=2, stride=(1, 2), pads_begin=(0, 1), pads_end=(1, 0),
      transpose=True, activation="relu"),
    C("convT_s2_op", 2, 16, 8, (7, 9), (3, 3), stride=(2, 2), pads_begin=(1, 1), pads_end=(0, 1),
      output_padding=(1, 0), transpose=True),
    C("conv_5x5_pads_2112", 2, 8, 16, (13, 17), (5, 5), pads_begin=(2, 1), pads_end=(1, 2)),
    C("conv_5x5_pads_2222", 2, 8, 16, (13, 17), (5, 5), pads_begin=(2, 2), pads_end=(2, 2)),
    C("convT_4x4_s2_pads_1111", 2, 16, 8, (7, 7), (4, 4), stride=(2, 2), pads_begin=(1, 1), pads_end=(1, 1),
      transpose=True),
]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("case", BOUNDS_CASES, ids=[c.name for c in BOUNDS_CASES])
def test_autotune_candidates_write_only_y(case, dtype, monkeypatch):
    """Planning times every candidate engine on the caller's y (up to 64 per graph variant here),
    so none may write outside it: y sits between two guard bands of a sentinel that must survive
    the plan and a run (ORT's and TensorRT's arenas put other tensors there)."""
    r = Runner(case, dtype, seed=21)
    _fresh(monkeypatch, autotune="1", replay="0", candidates="64")
    n = math.prod(case.y_shape())
    sentinel = -777.0
    buf = torch.full((n + 2 * GUARD,), sentinel, dtype=getattr(torch, dtype), device="cuda")
    y = buf[GUARD:GUARD + n].view(case.y_shape())
    torch.cuda.synchronize()  # the bands are filled before planning writes on r.stream
    info = r.plan(y)
    r.stream.synchronize()
    r.forward(y)
    r.check(y, "after autotuning into a guarded y")
    for name, band in (("before", buf[:GUARD]), ("after", buf[GUARD + n:])):
        changed = int((band != sentinel).sum())
        assert changed == 0, f"{case.name} {dtype}: {changed} elements {name} y written ({info['description']})"
