"""The layering check (scripts/check_layers.py) that `make test` runs: the repository passes, and
an include pointing upward fails it, naming the file, the line and both layers."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHECK = REPO / "scripts" / "check_layers.py"


def run(repo):
    return subprocess.run([sys.executable, str(CHECK), str(repo)], capture_output=True, text=True,
                          timeout=120)


def test_repository_has_no_upward_include():
    r = run(REPO)
    assert r.returncode == 0, r.stdout + r.stderr


def _tree(tmp_path, files):
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_upward_include_fails(tmp_path):
    repo = _tree(tmp_path, {
        "compiler/src/codegen/jit.h": "#pragma once\n",
        "compiler/src/ops/ops.h": "#pragma once\n",
        "compiler/src/ops/conv.cpp": '#include "ops/ops.h"\n\n#include "codegen/jit.h"\n',
        "compiler/include/tbex/kernel.h": "#pragma once\n",
        "schedules/registry.cpp": '#include "ops/ops.h"\n#include "tbex/kernel.h"\n',
        "compiler/src/lower/select.cpp": '#include "Halide.h"\n#include "ops/ops.h"\n',
    })
    r = run(repo)
    assert r.returncode == 1
    lines = [l for l in r.stdout.splitlines() if "includes" in l]
    assert len(lines) == 2, r.stdout
    assert lines[0].startswith("compiler/src/ops/conv.cpp:3: ops includes \"codegen/jit.h\"")
    assert "layer codegen" in lines[0]
    assert lines[1].startswith("schedules/registry.cpp:2: schedules includes \"tbex/kernel.h\"")


def test_downward_and_same_layer_includes_pass(tmp_path):
    repo = _tree(tmp_path, {
        "runtime/include/tbex/errors.h": "#pragma once\n",
        "compiler/include/tbex/problem.h": '#include "tbex/errors.h"\n',
        "compiler/src/lower/select.h": '#include "tbex/problem.h"\n',
        "compiler/src/lower/select.cpp": '#include "lower/select.h"\n#include "select.h"\n',
        "compiler/src/codegen/jit.cpp": '#include "lower/select.h"\n',
    })
    r = run(repo)
    assert r.returncode == 0, r.stdout
