"""scripts/bench_attention.py without a GPU: the interleaved timing (time_interleaved) times
every callable once per trial, rotates the order from trial to trial, settles each before its
block and reports each one's median, with a stand-in for torch's CUDA events and host clock."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

_PATH = Path(__file__).resolve().parents[1] / "scripts" / "bench_attention.py"
_spec = importlib.util.spec_from_file_location("bench_attention_under_test", _PATH)
ba = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = ba
_spec.loader.exec_module(ba)


class FakeClock:
    """CUDA events on a fake device clock: each callable advances it by its own cost (ms)."""

    def __init__(self):
        self.now = 0.0
        self.calls = []

    def event(self, enable_timing=True):
        clock = self

        class Event:
            def record(self):
                self.t = clock.now

            def elapsed_time(self, end):
                return end.t - self.t

        return Event()

    def torch(self):
        return SimpleNamespace(cuda=SimpleNamespace(Event=self.event, synchronize=lambda: None))

    def fn(self, name, cost_ms):
        def call():
            self.calls.append(name)
            self.now += cost_ms
        return call


def test_each_callable_timed_every_trial_in_rotated_order():
    clock = FakeClock()
    fns = {n: clock.fn(n, c) for n, c in (("ours", 0.1), ("flash", 0.2), ("cudnn", 0.3))}
    times = ba.time_interleaved(clock.torch(), fns, reps=2, trials=4)
    assert times == pytest.approx({"ours": 100.0, "flash": 200.0, "cudnn": 300.0})  # us per call
    warmup, timed = clock.calls[:9], clock.calls[9:]
    assert warmup == ["ours"] * 3 + ["flash"] * 3 + ["cudnn"] * 3
    firsts = [timed[i * 6] for i in range(4)]  # each trial: 3 callables x 2 reps
    assert firsts == ["ours", "flash", "cudnn", "ours"]
    assert all(timed.count(n) == 8 for n in fns)


def test_time_fn_is_the_one_callable_case():
    clock = FakeClock()
    assert ba.time_fn(clock.torch(), clock.fn("f", 0.5), reps=4, trials=3) == pytest.approx(500.0)
    assert clock.calls == ["f"] * (3 + 4 * 3)


def test_settle_runs_each_callable_untimed_for_settle_ms_before_its_block():
    clock = FakeClock()
    fns = {n: clock.fn(n, c) for n, c in (("ours", 0.1), ("ort", 0.4))}
    host = lambda: clock.now / 1e3  # seconds; the fake calls finish as they are queued
    times = ba.time_interleaved(clock.torch(), fns, reps=2, trials=2, settle_ms=1.0, host_clock=host)
    assert times == pytest.approx({"ours": 100.0, "ort": 400.0})  # the settle calls are not timed
    timed = clock.calls[6:]  # after 3 warm-up calls each
    # settling queues SETTLE_CHUNK calls at a time until 1 ms has passed: 12 of ours (1.2 ms), 4 of ort
    assert ba.SETTLE_CHUNK == 4  # the sequence below counts in chunks of 4
    assert timed == (["ours"] * 12 + ["ours"] * 2 + ["ort"] * 4 + ["ort"] * 2  # trial 0
                     + ["ort"] * 2 + ["ours"] * 12 + ["ours"] * 2)  # trial 1: ort follows itself, unsettled


def test_one_callable_settles_once():
    clock = FakeClock()
    host = lambda: clock.now / 1e3
    fn = clock.fn("f", 0.5)
    assert ba.time_interleaved(clock.torch(), {"f": fn}, reps=2, trials=3, settle_ms=1.0,
                               host_clock=host)["f"] == pytest.approx(500.0)
    assert clock.calls == ["f"] * (3 + 4 + 2 * 3)


def test_method_names_the_settle_time():
    assert "each block after 1000 ms of untimed back-to-back calls" in ba.method(ba.build_parser().parse_args([]))
    assert "after 250 ms of untimed" in ba.method(ba.build_parser().parse_args(["--settle-ms", "250"]))
    assert "untimed" not in ba.method(ba.build_parser().parse_args(["--settle-ms", "0"]))


def _row(**extra):
    row = dict(dtype="float16", d=64, causal=False, seqlen=512, batch=32, heads=32, ours_tflops=375.0,
               flash_tflops=253.0, x_flash=1.48)
    row.update(extra)
    return row


def test_table_has_fa3_columns_only_when_fa3_ran():
    plain = ba.table([_row()], 679.0)
    assert "fa3" not in plain
    with_fa3 = ba.table([_row(fa3_us=190.0, fa3_tflops=361.7, x_fa3=1.03), _row(fa3_us=None)], 679.0)
    header, first, second = with_fa3.splitlines()[1:4]
    assert "fa3" in header and "xfa3" in header
    assert "361.7" in first and "1.03" in first
    assert len(header.split()) == len(first.split()) == len(second.split())


def _bar_row(dtype, d, causal, seqlen, tflops, x_flash, x_cudnn):
    return dict(dtype=dtype, d=d, causal=causal, seqlen=seqlen, batch=16384 // seqlen, heads=2048 // d,
                key_padding="none", ours_tflops=tflops, x_flash=x_flash, x_cudnn=x_cudnn)


def _bar_run(**changes):
    """Eight cases clearing every bar; changes[(d, causal, seqlen)] = (tflops, x_flash, x_cudnn)."""
    rows = []
    for d, causal, seqlen in [(64, False, 512), (64, False, 1024), (64, False, 4096), (64, True, 1024),
                              (128, False, 1024), (128, False, 4096), (128, True, 512), (128, True, 4096)]:
        tflops, x_flash, x_cudnn = changes.get(f"d{d}_{'c' if causal else 'nc'}_{seqlen}", (600.0, 1.7, 1.05))
        rows.append(_bar_row("float16", d, causal, seqlen, tflops, x_flash, x_cudnn))
    return rows


def test_bars_count_each_bar_and_name_the_cases_below():
    text = ba.bars(_bar_run(d64_nc_512=(390.0, 1.55, 0.9), d64_c_1024=(330.0, 1.59, 1.0),
                            d128_nc_1024=(520.0, 1.62, 0.99), d128_c_4096=(440.0, 1.8, None)))
    head, *rest = text.splitlines()
    # flash over all 8 cases (2 below), and the 6 from 1k (1 below: 512 is out of that scope)
    assert "flash on 6 of 8 cases (5 of 6 from seqlen 1024)" in head
    # cuDNN from 1k only: the 512 row's 0.9 does not count, 1.0 is on the bar, a missing ratio is below
    assert "cuDNN on 4 of 6 from seqlen 1024" in head
    below_flash = next(line for line in rest if "below flash" in line)
    assert "float16 d64 non-causal 512 1.550" in below_flash and "float16 d64 causal 1024 1.590" in below_flash
    below_cudnn = next(line for line in rest if "below cuDNN" in line)
    assert "float16 d128 non-causal 1024 0.990" in below_cudnn
    assert "float16 d128 causal 4096 (not timed)" in below_cudnn
    assert "float16 d64 non-causal 512" not in below_cudnn
    assert any("d128 causal, seqlen >= 4096: >= 450 TFLOP/s MISSED (lowest 440.0)" in line for line in rest)
    assert any("d128 non-causal, seqlen >= 4096: >= 550 TFLOP/s met (lowest 600.0)" in line for line in rest)


def test_bars_leave_out_other_head_dims_and_masked_rows():
    rows = [_bar_row("float16", 256, False, 4096, 700.0, 2.0, 1.1),
            dict(_bar_row("float16", 64, False, 512, 300.0, 1.2, 0.8), key_padding="additive")]
    assert ba.bars(rows) == ""


def test_bars_report_pools_runs_and_names_the_cases_below_in_every_run(tmp_path, capsys):
    import json

    first = _bar_run(d64_nc_512=(390.0, 1.55, 1.1), d64_nc_1024=(430.0, 1.58, 1.1), d128_nc_1024=(520.0, 1.7, 0.98))
    second = _bar_run(d64_nc_512=(395.0, 1.54, 1.1), d64_nc_1024=(450.0, 1.66, 1.1), d128_nc_1024=(530.0, 1.7, 1.01))
    paths = []
    for i, rows in enumerate((first, second)):
        path = tmp_path / f"run{i}.json"
        path.write_text(json.dumps({"gpu": "H200", "date": f"run {i}", "gemm_bf16_tflops": 680.0, "rows": rows}))
        paths.append(path)
    assert ba.main(["--bars", *map(str, paths)]) == 0
    out = capsys.readouterr().out
    assert out.count("issue 7's bars") == 3  # each run, then the medians
    medians = out.split("per-case medians over the 2 runs")[1]
    assert "float16 d64 non-causal 512 1.545" in medians and "float16 d64 non-causal 1024 1.620" not in medians
    assert "below flash in every run that timed it: float16 d64 non-causal 512 (2 of 2)\n" in out
    assert "below cuDNN in every run that timed it: none" in out


def test_bars_report_counts_a_case_below_in_every_run_that_timed_it(tmp_path, capsys):
    import json

    full = _bar_run(d64_nc_512=(390.0, 1.55, 1.1), d64_nc_1024=(430.0, 1.58, 1.1))
    short = [r for r in _bar_run(d64_nc_512=(392.0, 1.56, 1.1), d64_nc_1024=(450.0, 1.66, 1.1))
             if r["d"] == 64 and r["seqlen"] <= 1024]
    other = [r for r in _bar_run() if r["d"] == 128]  # a run without the d64 cases
    paths = []
    for i, rows in enumerate((full, short, other)):
        path = tmp_path / f"run{i}.json"
        path.write_text(json.dumps({"gpu": "H200", "date": f"run {i}", "gemm_bf16_tflops": 680.0, "rows": rows}))
        paths.append(path)
    assert ba.main(["--bars", *map(str, paths)]) == 0
    out = capsys.readouterr().out
    # 512 is below in both runs that timed it; 1k only in one of two.
    assert "below flash in every run that timed it: float16 d64 non-causal 512 (2 of 2)\n" in out
    assert "float16 d64 non-causal 1024 (" not in out


def _saved(tmp_path, name, rows, settle_ms=1000, gpu="H200", date="d", ort="1.31.1", gemm=680.0):
    import json

    path = tmp_path / name
    method = ba.method(ba.build_parser().parse_args(["--settle-ms", str(settle_ms)]))
    path.write_text(json.dumps({"benchmark": "attention", "gpu": gpu, "date": date, "gemm_bf16_tflops": gemm,
                                "versions": {"torch": "2.11", "onnxruntime": ort}, "method": method,
                                "seconds": 100.0, "errors": [], "rows": rows}))
    return path


def test_bars_report_names_each_runs_settle_and_flags_mixed_timing(tmp_path, capsys):
    old = _saved(tmp_path, "old.json", _bar_run(), settle_ms=250)
    new = _saved(tmp_path, "new.json", _bar_run())
    assert ba.main(["--bars", str(new)]) == 0
    out = capsys.readouterr().out
    assert "settle 1000 ms" in out and "timed differently" not in out
    assert ba.main(["--bars", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "settle 250 ms" in out and "(these runs were timed differently: settle 1000 ms, 250 ms)" in out


def _halves():
    rows = _bar_run()
    fp16, bf16 = rows, [dict(r, dtype="bfloat16") for r in rows]
    return fp16, bf16


def test_merge_joins_two_halves_of_a_run(tmp_path, capsys):
    import json

    fp16, bf16 = _halves()
    a = _saved(tmp_path, "a.json", fp16, date="first")
    b = _saved(tmp_path, "b.json", bf16, date="second", gemm=700.0)
    out = tmp_path / "merged.json"
    assert ba.main(["--merge", str(a), str(b), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [r["dtype"] for r in doc["rows"]] == ["float16"] * 8 + ["bfloat16"] * 8
    assert doc["date"] == "first" and doc["seconds"] == 200.0
    assert [p["date"] for p in doc["parts"]] == ["first", "second"]
    # Each row keeps the GEMM ceiling measured in its own part; %gemm is against that one.
    assert [r["gemm_bf16_tflops"] for r in doc["rows"]] == [680.0] * 8 + [700.0] * 8
    out_text = capsys.readouterr().out
    assert "flash on 16 of 16 cases" in out_text  # the bars of the merged rows
    assert "ceiling: 680-700, each row's from its part of the run" in out_text
    rate = doc["rows"][8]["ours_tflops"]
    first_bf16 = [line for line in out_text.splitlines() if line.startswith("bfloat16")][0]
    assert first_bf16.split()[-1] == f"{100 * rate / 700.0:.1f}"


@pytest.mark.parametrize("what", ["overlap", "method", "gpu", "versions"])
def test_merge_refuses_runs_that_do_not_make_one(tmp_path, capsys, what):
    fp16, bf16 = _halves()
    a = _saved(tmp_path, "a.json", fp16)
    b = {"overlap": lambda: _saved(tmp_path, "b.json", fp16),
         "method": lambda: _saved(tmp_path, "b.json", bf16, settle_ms=250),
         "gpu": lambda: _saved(tmp_path, "b.json", bf16, gpu="H100"),
         "versions": lambda: _saved(tmp_path, "b.json", bf16, ort=None)}[what]()
    out = tmp_path / "merged.json"
    assert ba.main(["--merge", str(a), str(b), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "bench_attention --merge: ValueError" in err
    assert {"overlap": "float16 d64 non-causal 512 is also in", "method": "method", "gpu": "gpu 'H100'",
            "versions": "'onnxruntime': None"}[what] in err
    assert not out.exists()


def test_bars_report_refuses_an_unreadable_file(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert ba.main(["--bars", str(bad)]) == 2
    assert "bench_attention --bars: JSONDecodeError" in capsys.readouterr().err
    assert ba.main(["--bars", str(tmp_path / "missing.json")]) == 2


def test_fa3_commit_reads_the_build_stamp(tmp_path):
    lib = tmp_path / "libfa3_bench.so"
    assert ba.fa3_commit(None) is None
    assert ba.fa3_commit(lib) == "unknown"
    (tmp_path / "FA3_COMMIT").write_text("0251105a\n")
    assert ba.fa3_commit(lib) == "0251105a"


def test_build_fa3_refuses_a_folder_without_flashattention3(tmp_path):
    import subprocess

    script = Path(__file__).resolve().parents[1] / "scripts" / "build_fa3.sh"
    r = subprocess.run(["bash", str(script), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2
    assert "no hopper/flash_fwd_launch_template.h" in r.stderr



def _bench_common():
    spec = importlib.util.spec_from_file_location("bench_common_under_test", _PATH.parent / "_bench_common.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_clock_sampler_pools_the_samples_inside_the_windows():
    bc = _bench_common()
    t = bc.SmClockSampler.parse("2026/11/29 13:00:00.000, 1500")[0]
    lines = ["2026/11/29 13:00:00.000, 1500\n", "garbage\n", "2026/11/29 13:00:00.020, 1600\n",
             "2026/11/29 13:00:00.040, 1700\n", "2026/11/29 13:00:00.060, 1900\n",
             "2026/11/29 13:00:00.080, 1650\n", "2026/11/29 13:00:00.100, 1200\n"]
    sampler = bc.SmClockSampler(lines=lines)
    assert sampler.median([(t + 0.015, t + 0.045)], wait_s=1) == 1650.0
    assert sampler.median([(t + 0.015, t + 0.025), (t + 0.075, t + 0.085)], wait_s=1) == 1625.0
    assert sampler.median([(t + 0.2, t + 0.3)], wait_s=0.05) is None
    assert sampler.median([], wait_s=0.05) is None
    assert bc.SmClockSampler.parse("[N/A], 1500") is None


def test_clock_sampler_reads_power_as_a_third_column():
    bc = _bench_common()
    t = bc.SmClockSampler.parse("2026/11/29 13:00:00.000, 1500, 690.5")[0]
    lines = ["2026/11/29 13:00:00.000, 1500, 690.5\n", "2026/11/29 13:00:00.050, 1700, 681.0\n",
             "2026/11/29 13:00:00.100, 1650, [N/A]\n", "2026/11/29 13:00:00.150, 1600, 684.0\n"]
    sampler = bc.SmClockSampler(lines=lines, power=True)
    assert sampler.median([(t, t + 0.2)], wait_s=1) == 1600.0
    assert sampler.median([(t, t + 0.2)], wait_s=1, column=2) == 684.0
    assert sampler.median([(t + 0.04, t + 0.2)], wait_s=1, column=2) == 682.5
    assert bc.SmClockSampler.parse("2026/11/29 13:00:00.000") is None
