"""``python -m tbex machine``: the host's calibration (measured once per machine, stored beside
the tuning database) and the cost model inputs it gives."""
import json

from . import _C


def describe(remeasure: bool = False) -> str:
    info = _C.machine(remeasure)
    lines = [f"machine: {info['key']}",
             f"stored in: {info['path']}"]
    if not info["enabled"]:
        lines.append("TBEX_CALIBRATE=0: the cost model uses its built-in constants")
    else:
        c = json.loads(info["calibration"])
        lines.append("measured now" if info["measured_now"] else
                     f"read back (measured in {c['seconds']:.2f} s)")
        lines.append(f"clock (dependent adds): {c['ghz']:.3f} GHz; cycles below are of this clock")
        for name, w in (("AVX2 256-bit", c["avx2_256"]), ("AVX-512 512-bit", c["avx512_512"])):
            if w["fma_per_cycle"] <= 0:
                lines.append(f"{name}: not on this CPU")
                continue
            lines.append(f"{name}: FMA {w['fma_per_cycle']:.2f}/cycle, latency "
                         f"{w['fma_latency']:.2f} cycles, loads {w['loads_per_cycle']:.2f}/cycle, "
                         f"broadcast FMA {w['bcast_fma_per_cycle']:.2f}/cycle, with the broadcast "
                         f"in a register {w['reg_bcast_fma_per_cycle']:.2f}/cycle" +
                         (f", 4-byte loads {w['small_loads_per_cycle']:.2f}/cycle"
                          if w["small_loads_per_cycle"] > 0 else ""))
        one = c["read_bytes_per_cycle_1_thread"]
        many = c["read_bytes_per_cycle_per_core_all_threads"]
        lines.append(f"read bandwidth, bytes/cycle per core (1 thread | {c['threads']} threads):")
        for level in ("L1", "L2", "L3", "DRAM"):
            lines.append(f"  {level:5s} {one[level]:8.2f} | {many[level]:8.2f}")
        lines.append(f"starting a short run (4 KiB) from DRAM: "
                     f"{c['dram_run_start_cycles']:.0f} cycles beyond its bytes")
        lines.append(f"empty parallel-for on {c['threads']} threads: "
                     f"{c['parallel_for_cycles']:.0f} cycles")
        if c["thread_share"] > 0:
            lines.append(f"FMAs per thread with {c['threads']} threads at once: "
                         f"{c['thread_share']:.2f} of one thread's" +
                         ("" if info["keeps_calibration"] else
                          " (the host ran the threads on shared cores: this calibration is not "
                          "stored, the next process measures again)") +
                         (f"; other processes used {c['other_cores']:.2f} cores meanwhile"
                          if c["other_cores"] >= 0.05 else ""))
        dot = c["avx512_bf16_dot_per_cycle"]
        lines.append(f"AVX512_BF16: VDPBF16PS {dot:.2f}/cycle, latency "
                     f"{c['avx512_bf16_dot_latency']:.2f} cycles" if dot > 0 else
                     "AVX512_BF16: not on this CPU")
        amx = c["amx_bf16_tile_multiply_cycles"]
        lines.append(f"AMX-BF16: dependent tile multiplies every {amx:.1f} cycles" if amx > 0 else
                     "AMX-BF16: not measured (no AMX-BF16, or the OS refused the tile state)")
    m = json.loads(info["model"])
    lines.append("cost model inputs for the host target (" +
                 ("calibrated" if m["calibrated"] else "built-in constants") + "):")
    lines.append("  " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                  for k, v in m.items() if k != "calibrated"))
    return "\n".join(lines) + "\n"
