"""bench/RESULTS.md keeps one part per machine, and bench/goals.py reports issue 11's goals from a
run's raw results (no benchmark is run here: the scripts' bookkeeping only)."""
import json
import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

bench = pytest.importorskip("bench")
goals = pytest.importorskip("goals")


def parts(text):
    return [l for l in text.splitlines() if l.startswith(bench.PART)]


def test_machine_label_names_cpu_and_isa():
    label = bench.machine_label()
    assert bench.cpu_model() in label and "cores" in label
    assert bench.amd_generation(25, 17) == "Zen 4" and bench.amd_generation(26, 2) == "Zen 5"
    assert bench.amd_generation(25, 1) == "Zen 3" and bench.amd_generation(23, 0x31) == "Zen 2"
    assert bench.amd_generation(23, 1) == "Zen" and bench.amd_generation(23, 8) == "Zen+"


def test_a_run_on_another_machine_keeps_the_first_machines_part(tmp_path):
    out = tmp_path / "RESULTS.md"
    bench.write_section(out, "## Table", "## Table\n\nmachine A, first run", machine="A")
    bench.write_section(out, "## Goals", "## Goals\n\nA goals", machine="A")
    bench.write_section(out, "## Table", "## Table\n\nmachine B", machine="B")
    bench.write_section(out, "## Table", "## Table\n\nmachine A, second run", machine="A")
    text = out.read_text()
    assert parts(text) == [bench.PART + "A", bench.PART + "B"]
    a = text[text.index(bench.PART + "A"):text.index(bench.PART + "B")]
    assert "second run" in a and "first run" not in a and "A goals" in a
    assert "machine B" in text[text.index(bench.PART + "B"):]
    assert text.startswith("# tbex benchmark results")


def row(w, p, dtype, n, tbex_ms, onednn_ms, flops=1e9, peak=100.0):
    return {"workload": w, "pass": p, "dtype": dtype, "threads": n, "flops": flops, "peak": peak,
            "tbex": {"ms": tbex_ms, "compile_ms": 300.0}, "onednn": {"ms": onednn_ms}}


def test_goals_report_misses_from_the_run():
    run = {"command": ["bench.py"], "date": "now", "machine": "CPU: X (avx512f avx512_bf16)",
           "rows": [row("b_c3d", "dw", "f32", 1, 10.0, 12.0), row("b_c3d", "dw", "f32", 2, 6.0, 5.0),
                    row("b_c3d", "dw", "f16", 1, 10.0, None),
                    row("b_c3d", "dw", "bf16", 1, 10.0, 5.0)]}
    text = goals.render(run)
    assert text.startswith(goals.SECTION)
    assert "b dw f32 2t 0.83x" in text  # 5 / 6, below 1.0 and below the 0.9 floor
    assert "b dw f16 1t 1.20x" not in text and "| 2 of 3 |" in text  # f16 against oneDNN f32
    assert "1.67x (no)" in text  # 10 ms -> 6 ms from 1 to 2 threads
    assert ">= 1x oneDNN bf16 (the CPU has AVX512_BF16" in text and "b dw 1t 0.50x" in text
    run["machine"] = "CPU: X (avx512f)"
    assert ">= 3x oneDNN bf16 (no AVX512_BF16" in goals.render(run)


def test_goals_of_a_partial_run_leave_a_fuller_runs_section(tmp_path, monkeypatch, capsys):
    out, res = tmp_path / "RESULTS.md", tmp_path / "run.json"
    full = {"command": ["bench.py", "--dtypes", "f32,bf16"], "date": "then", "machine": "CPU: X",
            "machine_label": "M", "rows": [row("b_c3d", "dw", "f32", 1, 10.0, 12.0),
                                           row("b_c3d", "dw", "bf16", 1, 10.0, 5.0)]}
    bf16 = dict(full, command=["bench.py", "--dtypes", "bf16"], date="now", rows=full["rows"][1:])
    for run, extra, kept in ((full, [], "then"), (bf16, [], "then"), (bf16, ["--replace"], "now")):
        res.write_text(json.dumps(run))
        monkeypatch.setattr(sys, "argv", ["goals.py", "--json", str(res), "--out", str(out)] + extra)
        goals.main()
        assert "(%s)" % kept in bench.read_section(out, goals.SECTION, "M")
    assert "left as it is: its run measured f32" in capsys.readouterr().err


def test_rounds_keep_the_faster_median_and_every_rounds_time():
    a = {"ms": 3.0, "min_ms": 2.9, "k": 10, "impl_info": "first"}
    b = {"ms": 2.5, "min_ms": 2.4, "k": 12, "impl_info": "second"}
    r = bench.faster_round(a, b)
    assert r["ms"] == 2.5 and r["impl_info"] == "second" and r["rounds_ms"] == [3.0, 2.5]
    r = bench.faster_round(r, {"ms": 2.8})
    assert r["ms"] == 2.5 and r["rounds_ms"] == [3.0, 2.5, 2.8]
    # A round that failed keeps the earlier result.
    r = bench.faster_round(a, {"error": "RuntimeError: boom"})
    assert r["ms"] == 3.0 and r["rounds_ms"] == [3.0]


def test_time_fn_runs_until_its_budget_after_a_warm_up(monkeypatch):
    monkeypatch.setattr(bench, "WARMUP_S", 0.0)
    calls = []
    t = bench.time_fn(lambda: calls.append(1), 0.01, min_k=3, max_k=7)
    assert t["k"] == 7 and len(calls) == 8  # a warm-up, then max_k: each run is far below budget
    assert 0 <= t["min_ms"] <= t["ms"]


def test_time_fn_warms_up_for_its_warm_up_seconds(monkeypatch):
    # Untimed runs until WARMUP_S is spent (bench.py --warmup-sec), then the timed ones.
    monkeypatch.setattr(bench, "WARMUP_S", 0.03)
    calls = []

    def run():
        calls.append(1)
        time.sleep(0.005)

    t = bench.time_fn(run, 0.01, min_k=3, max_k=7)
    assert t["k"] == 3  # each timed run is half the budget: min_k of them
    assert len(calls) - t["k"] >= 3  # more than the one warm-up run a zero budget gives


class FakeProbe:
    """peak -q stand-in: n threads' GFLOP/s from a list of shares of n full 100-GFLOP/s cores."""

    def __init__(self, shares):
        self.shares, self.calls = list(shares), []

    def __call__(self, n):
        self.calls.append(n)
        share = self.shares.pop(0) if len(self.shares) > 1 else self.shares[0]
        return share * n * 100.0


def test_a_measurement_on_shared_cores_is_flagged(monkeypatch):
    # The host placed both vCPUs on one core after the probe before the measurement: /proc/stat
    # shows nothing, the probe after it reads half the FMA rate, and the row says so.
    monkeypatch.setattr(bench.Availability, "PROBE_AGE", 0.0)
    probe = FakeProbe([1.0, 0.5])
    a = bench.Availability(max_wait=0.0, budget=0.0, probe=probe, peak1=100.0)
    monkeypatch.setattr(a, "avail", lambda n, o: 1.0)  # whatever else runs on this machine
    d = a.measure(2, lambda: {"ms": 1.0})
    assert d["cores"] == 0.5 and d["avail"] == 0.5
    assert bench.ms_cell(d).endswith("!")
    # One thread is probed against the 1-thread peak.
    d1 = a.measure(1, lambda: {"ms": 1.0})
    assert d1["cores"] == 0.5 and probe.calls[-1] == 1


def test_a_measurement_on_a_shared_memory_path_is_flagged(monkeypatch):
    # The FMA probe reads whole cores while a neighbour streams memory: the memory probe after
    # the measurement reads 60% of the reference and flags the row; a reading within MEM_FULL
    # of the reference counts as the whole path.
    monkeypatch.setattr(bench.Availability, "PROBE_AGE", 0.0)
    ref = {1: 10.0, 2: 20.0}
    readings = [1.0 * ref[1], 0.6 * ref[1], 0.9 * ref[2], 0.95 * ref[2]]
    calls = []

    def mem_probe(n):
        calls.append(n)
        return readings.pop(0)

    a = bench.Availability(max_wait=0.0, budget=0.0, probe=FakeProbe([1.0]), peak1=100.0,
                           mem_probe=mem_probe, mem_ref=ref)
    monkeypatch.setattr(a, "avail", lambda n, o: 1.0)  # whatever else runs on this machine
    d = a.measure(1, lambda: {"ms": 1.0})
    assert d["cores"] == 1.0
    assert d["mem"] == round(0.6 / bench.Availability.MEM_FULL, 3) and d["avail"] == d["mem"]
    assert bench.ms_cell(d).endswith("!")
    d2 = a.measure(2, lambda: {"ms": 1.0})
    assert calls == [1, 1, 2, 2]
    assert d2["mem"] == 1.0 and d2["avail"] == 1.0
    assert not bench.ms_cell(d2).endswith("!")
    # A reading past the reference raises it (the run's start fell in a slow phase), and the
    # reading after the measurement is judged against the raised one.
    readings[:] = [15.0, 10.0]
    d3 = a.measure(1, lambda: {"ms": 1.0})
    assert a.mem_ref[1] == 15.0
    assert d3["mem"] == round(10.0 / (bench.Availability.MEM_FULL * 15.0), 3)
    assert bench.ms_cell(d3).endswith("!")


def test_the_memory_reference_keeps_the_best_reading_of_earlier_runs(monkeypatch, tmp_path):
    # A run in a slow phase is judged against what the memory path gave earlier runs here.
    store = tmp_path / "mem_ref.json"
    readings = [10.0, 11.0, 9.0, 20.0, 21.0, 19.0]
    monkeypatch.setattr(bench, "probe_memory", lambda n: readings.pop(0))
    assert bench.measure_memory([1, 2], store=store) == {1: 11.0, 2: 21.0}
    readings[:] = [7.0, 8.0, 7.5, 30.0, 29.0, 28.0]
    assert bench.measure_memory([1, 2], store=store) == {1: 11.0, 2: 30.0}
    # An unwritable store: this run's readings only, and a message.
    readings[:] = [5.0, 5.0, 5.0]
    assert bench.measure_memory([1], store=tmp_path / "mem_ref.json" / "x") == {1: 5.0}


def test_the_memory_path_is_watched_only_where_the_probe_passes_the_last_level_cache(monkeypatch):
    # The probe streams 64 MB a thread: past a 32 MB L3 (a Zen 3) it reads memory; inside a
    # 260 MB one (an Intel guest) it reads that cache, whose share of a busy host it does not
    # report, and an unknown cache size is not taken for a small one.
    assert bench.memory_probe_reaches_memory(32 << 20)
    assert not bench.memory_probe_reaches_memory(260 << 20)
    assert not bench.memory_probe_reaches_memory(0)
    measured = []
    monkeypatch.setattr(bench, "measure_peak", lambda threads: ({1: 100.0}, {1: 100.0}))
    monkeypatch.setattr(bench, "measure_memory", lambda threads: measured.append(threads) or {1: 10.0})
    monkeypatch.setattr(bench.Availability, "wait_free", lambda self, n: None)
    for l3, watched in ((32 << 20, True), (260 << 20, False)):
        monkeypatch.setattr(bench, "l3_bytes", lambda l3=l3: l3)
        avail, _, _, mem_ref = bench.watched_availability([1])
        assert (mem_ref == {1: 10.0}) == watched
        assert (avail.mem_probe is not None) == watched
    assert measured == [[1]]


def test_the_last_level_cache_size_is_read():
    # This machine's: a positive size where sysfs or sysconf tells one.
    if not any(p.joinpath("level").read_text().strip() == "3"
               for p in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        pytest.skip("no level-3 cache listed in sysfs here")
    assert bench.l3_bytes() >= 1 << 20


def test_the_memory_probe_reads_bandwidth():
    # bench/build/peak, when build.sh has built it: a positive reading per thread count.
    if not (bench.BUILD / "peak").exists():
        pytest.skip("bench/build/peak not built (bench/build.sh)")
    assert bench.probe_memory(1) > 0.0


def test_waits_for_full_cores_within_its_budget(monkeypatch):
    monkeypatch.setattr(bench.Availability, "PROBE_AGE", 0.0)
    monkeypatch.setattr(bench.time, "sleep", lambda s: None)
    probe = FakeProbe([0.5, 0.5, 1.0])
    a = bench.Availability(max_wait=60.0, budget=60.0, probe=probe, peak1=100.0)
    monkeypatch.setattr(a, "avail", lambda n, o: 1.0)  # whatever else runs on this machine
    d = a.measure(2, lambda: {"ms": 1.0})
    assert d["cores"] == 1.0 and d["avail"] == 1.0
    assert len(probe.calls) >= 3  # probed until the cores came back, and once after
    # With no budget left it measures at once, and flags the result.
    probe = FakeProbe([0.5])
    a = bench.Availability(max_wait=60.0, budget=0.0, probe=probe, peak1=100.0)
    monkeypatch.setattr(a, "avail", lambda n, o: 1.0)
    assert a.measure(2, lambda: {"ms": 1.0})["avail"] == 0.5


def test_goals_mark_figures_from_flagged_measurements():
    run = {"command": ["bench.py"], "date": "now", "machine": "CPU: X (avx2)",
           "rows": [row("g_strided_s2", "dw", "f32", 1, 10.0, 12.0),
                    row("g_strided_s2", "dw", "f32", 2, 9.0, 6.0)]}
    run["rows"][1]["tbex"]["avail"] = 0.5
    text = goals.render(run)
    assert "g dw f32 2t 0.67x!" in text and "g dw f32 1t" not in text  # 1t is at 1.2x
    assert "g dw 1.11x! (no)" in text  # the scaling uses the flagged 2-thread time
    assert "`!` marks" in text


def test_a_compile_on_a_shared_core_is_flagged(monkeypatch):
    # The compile ran while the host gave our vCPU half a core: goals marks its time.
    monkeypatch.setattr(bench.Availability, "PROBE_AGE", 0.0)
    a = bench.Availability(max_wait=0.0, budget=0.0, probe=FakeProbe([1.0, 0.5]), peak1=100.0)
    res, share = a.single_core(lambda: "kernel")
    assert res == "kernel" and share == 0.5
    run = {"command": ["bench.py"], "date": "now", "machine": "CPU: X (avx2)",
           "rows": [row("g_strided_s2", "dx", "f32", 1, 10.0, 12.0)]}
    run["rows"][0]["tbex"].update(compile_ms=1400.0, compile_avail=share)
    text = goals.render(run)
    assert "max 1400 ms! (g_strided_s2 dx f32)" in text and "g_strided_s2 dx f32 1400 ms!" in text
    # Without a probe nothing is flagged.
    assert bench.Availability(enabled=False).single_core(lambda: 1) == (1, None)
    # Whole cores, but the memory path at 60% of its reference after the compile.
    mem = [10.0, 6.0]
    a = bench.Availability(max_wait=0.0, budget=0.0, probe=FakeProbe([1.0]), peak1=100.0,
                           mem_probe=lambda n: mem.pop(0), mem_ref={1: 10.0})
    _, share = a.single_core(lambda: None)
    assert share == 6.0 / (bench.Availability.MEM_FULL * 10.0)


@pytest.fixture
def bench_model(monkeypatch):
    # bench_model points tbex at an empty tuning database when imported; keep that out of the
    # other tests.
    import os
    monkeypatch.setitem(os.environ, "TBEX_TUNING_DB", os.environ.get("TBEX_TUNING_DB", ""))
    mod = pytest.importorskip("bench_model")
    return mod


def test_bench_model_keeps_a_candidates_fastest_clean_time(bench_model):
    r = {}
    bench_model.keep(r, {"ms": 9.0, "avail": 0.5})  # only a flagged time: kept for now
    assert r == {"ms": 9.0, "flagged": True}
    bench_model.keep(r, {"ms": 12.0, "avail": 1.0})  # a clean time replaces it, though slower
    assert r == {"ms": 12.0, "flagged": False}
    bench_model.keep(r, {"ms": 5.0, "avail": 0.6})  # a faster flagged one does not
    assert r == {"ms": 12.0, "flagged": False}
    bench_model.keep(r, {"ms": 11.0})  # a faster clean one does
    assert r == {"ms": 11.0, "flagged": False}


def test_bench_model_leaves_flagged_rows_out_of_its_count(bench_model):
    def row(pick, best, flagged):
        return {"workload": "w", "pass": "dw", "threads": 1, "n": 3, "pick": "a", "pick_ms": pick,
                "best": "b", "best_ms": best, "pre_ms": pick, "predicted_ms": pick,
                "spearman": 1.0, "rank_ms": 0.1, "flagged": flagged}

    text = bench_model.render([row(10.0, 10.0, False), row(13.0, 10.0, True),
                               row(11.0, 10.0, False)], [], "machine", 2)
    assert "| 1.30! |" in text
    assert "on 1 of 2 rows" in text and "1 row(s) flagged `!` left out" in text


def test_bench_model_names_each_rows_dtype_and_counts_per_dtype(bench_model):
    def row(dtype, pick, best):
        return {"workload": "w", "pass": "dx", "dtype": dtype, "threads": 2, "n": 4, "pick": "a",
                "pick_ms": pick, "best": "b", "best_ms": best, "pre_ms": pick,
                "predicted_ms": pick, "spearman": 0.5, "rank_ms": 0.1, "flagged": False}

    text = bench_model.render([row("f32", 10.0, 10.0), row("bf16", 12.0, 10.0),
                               row("bf16", 10.2, 10.0)], [], "machine", 2)
    assert "| w | dx | bf16 | 2 | 4 | a | 12.00 |" in text
    assert "on 2 of 3 rows" in text
    assert "By dtype: bf16 1 of 2; f32 1 of 1." in text
    # One dtype: no per-dtype line.
    assert "By dtype" not in bench_model.render([row("f32", 10.0, 10.0)], [], "machine", 2)
