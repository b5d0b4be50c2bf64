"""The argument fuzzer's short run (tests/fuzz/fuzz_args.py): about a minute of random
malformed, borderline and valid calls to the DSL ops, convolution_backward and the aclnn C API,
each of which must succeed correctly or fail with a coded error; a crash, a hang, an uncoded
error or a wrong result fails this test. docs/fuzzing.md has the long run."""
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_fuzz_short_run(tmp_path):
    seconds = os.environ.get("TBEX_FUZZ_SECONDS", "45")
    r = subprocess.run([sys.executable, os.path.join(REPO, "tests", "fuzz", "fuzz_args.py"),
                        "--seconds", seconds, "--log-dir", str(tmp_path), "--timeout", "180"],
                       capture_output=True, text=True, timeout=float(seconds) + 600)
    summary = r.stdout.strip().splitlines()
    assert summary, r.stderr[-2000:]
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " 0 findings, 0 crashes, 0 hangs" in summary[0], summary
    cases = int(summary[0].split()[0])
    assert cases >= 100, summary
