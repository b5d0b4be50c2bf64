"""bench/bench_profile.py: the parsers of perf's and objdump's text on constructed inputs, and one
profile of a small kernel where perf can sample (skipped with the reason elsewhere)."""
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

prof = pytest.importorskip("bench_profile")


def test_report_lines_give_share_space_and_symbol():
    text = "\n".join([
        "# Samples: 9K of event 'cpu-clock'",
        "#",
        "    82.54%  [.] k_halide_par_for_out_lanes__1_s0_c1_t3_par           -      -",
        "     9.32%  [k] clear_page_erms",
        "     4.86%  [.] k_halide_par_for_dys__1_s0_d_t2_t1",
        "     0.19%  [.] __memset_avx512_unaligned_erms",
        "",
    ])
    rows = prof.parse_report(text)
    assert [r[1] for r in rows] == ["user", "kernel", "user", "user"]
    assert rows[0][0] == pytest.approx(82.54) and rows[2][2] == "k_halide_par_for_dys__1_s0_d_t2_t1"
    assert rows[0][2] == "k_halide_par_for_out_lanes__1_s0_c1_t3_par"  # perf's IPC columns dropped


def test_stage_names_come_from_halides_closure_symbols():
    assert prof.stage_of("k_halide_par_for_out_lanes__1_s0_c1_t3_par") == \
        "out_lanes$1 (stage s0, parallel over c1_t3_par)"
    # A parallel loop nested in another: the outer Func's loop names the stage.
    assert prof.stage_of("k_halide_par_for_out__3_s1_b_par_for_out__3_s1_rs__4") == \
        "out$3 (stage s1, parallel over b)"
    assert prof.stage_of("k_halide") == "serial part (k_halide)"
    assert prof.stage_of("memcpy") is None and prof.stage_of("main") is None


def _function(body):
    """objdump text of one function from (mnemonic, operands) rows at 4-byte steps."""
    lines = ["0000000000001000 <f>:"]
    for i, (op, args) in enumerate(body):
        lines.append(f"  {0x1000 + 4 * i:x}:\t{op} {args}".rstrip())
    return "\n".join(lines)


def test_loops_shares_and_body_counts():
    # An outer loop (0x1000-0x1020) around an inner one (0x1004-0x1014).
    body = [
        ("xor", "%eax,%eax"),                         # 1000
        ("vmovaps", "0x40(%rsi,%rax,1),%zmm1"),       # 1004 inner start: a load
        ("vbroadcastss", "-0x40(%rbp,%r10,1),%zmm2"),   # 1008 %rbp: a base register, no stack
        ("vfmadd231ps", "(%rdi){1to16},%zmm2,%zmm3"),  # 100c folded broadcast
        ("vmovaps", "%zmm4,0x80(%rsp,%rax,1)"),        # 1010 spill store (an indexed address)
        ("jne", "1004 <f+0x4>"),                       # 1014 inner back edge
        ("vbroadcastss", "(%rdx),%zmm5"),              # 1018
        ("inc", "%rcx"),                               # 101c
        ("jne", "1000 <f>"),                           # 1020 outer back edge
        ("ret", ""),
    ]
    insns = prof.parse_objdump(_function(body))["f"]
    assert len(insns) == len(body) and insns[2] == (0x1008, "vbroadcastss", "-0x40(%rbp,%r10,1),%zmm2")
    loops = prof.find_loops(insns)
    assert [(L["start"], L["end"], L["depth"]) for L in loops] == [(0x1000, 0x1020, 0),
                                                                  (0x1004, 0x1014, 1)]
    percent = {0x1004: 30.0, 0x1008: 20.0, 0x100c: 10.0, 0x1018: 5.0, 0x1024: 35.0}
    rows = prof.loop_table(insns, percent, symbol_share=50.0)
    outer, inner = rows
    assert inner["share"] == pytest.approx(50.0 * 60.0 / 100) and inner["self"] == inner["share"]
    assert outer["share"] == pytest.approx(50.0 * 65.0 / 100)
    assert outer["self"] == pytest.approx(50.0 * 5.0 / 100)
    assert (inner["instructions"], inner["fmas"], inner["fma_mem"], inner["loads"],
            inner["stores"], inner["stack"], inner["broadcasts"]) == (5, 1, 1, 2, 1, 1, 2)
    assert outer["broadcasts"] == 3 and outer["loads"] == 3


def test_operands_split_outside_addresses():
    assert prof._operands("%ymm0,0x4a0(%rsi,%r10,1)") == ["%ymm0", "0x4a0(%rsi,%r10,1)"]
    assert prof._operands("-0xa200(%rax,%r14,1),%ymm0{%k1}{z}") == ["-0xa200(%rax,%r14,1)",
                                                                   "%ymm0{%k1}{z}"]
    assert prof._operands("") == [""]


def test_annotate_lines_give_address_percentages():
    text = "\n".join([
        " Percent |      Source code & Disassembly of harness for cpu-clock",
        "    9.50 :   6bd8:   vmovaps -0x600(%rsi,%r9,1),%zmm16",
        "    0.00 :   6be0:   vmovaps -0x500(%rsi,%r9,1),%zmm17",
        "    0.53 :   6c17:   vfmadd231ps %zmm12,%zmm17,%zmm10",
    ])
    assert prof.parse_annotate(text) == {0x6bd8: 9.5, 0x6be0: 0.0, 0x6c17: 0.53}


def test_bad_arguments_are_named():
    with pytest.raises(prof.ProfileError, match="workload 'nope' not in the workloads file"):
        prof.workload("nope")
    w = prof.workload("a_tbe_doc")
    with pytest.raises(prof.ProfileError, match="threads 0 must be at least 1"):
        prof.profile(w, "dx", "f32", threads=0)
    with pytest.raises(prof.ProfileError, match="pass 'fw' must be dw or dx"):
        prof.profile(w, "fw", "f32")


def _perf_samples():
    """Why perf cannot sample here, or '' where it can."""
    for tool in ("perf", "objdump", "g++"):
        if not shutil.which(tool):
            return f"{tool} not found"
    r = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-o", "/dev/null", "--", "true"],
                       capture_output=True, text=True)
    return "" if r.returncode == 0 else "perf record fails here: " + (r.stderr or r.stdout)[-200:]


@pytest.mark.skipif(bool(_perf_samples()), reason=_perf_samples() or "perf samples")
def test_profile_of_a_small_kernel(tmp_path):
    # A small dX (the seed's geometry, fewer channels): the AOT kernel's output is checked against
    # the JIT's inside profile(); its hot loop holds the tile's FMAs.
    w = dict(prof.workload("a_tbe_doc"), name="small", N=1, D=4, H=12, W=12, Cin=16, Cout=16)
    r = prof.profile(w, "dx", "f32", threads=1, seconds=0.3, workdir=tmp_path, min_share=0.5)
    assert r["aot"]["calls"] >= 3 and r["aot"]["median_ms"] > 0 and r["jit_ms"] > 0
    assert r["schedule"] and r["stages"], r
    assert all(s["stage"] for s in r["stages"])
    total = sum(s["share"] for s in r["stages"]) + r["other_user"] + r["other_kernel"]
    assert total == pytest.approx(100.0, abs=1.0)
    assert any(L["fmas"] > 0 for L in r["loops"]), r["loops"]
    text = prof.markdown(r, "bench_profile.py small dx f32")
    assert "| stage | share |" in text and r["schedule"] in text
    out = np.frombuffer((tmp_path / "out.bin").read_bytes(), np.float32)
    assert out.size > 0 and np.isfinite(out).all() and np.abs(out).max() > 0
