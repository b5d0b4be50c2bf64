"""The knob registry: one table in C++ that tbex.knobs reads, that every TBEX_* read in the
product goes through, and whose codegen knobs are part of kernel keys; TBEX_LOG's topics."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tbex
from tbex import _C, knobs

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ["compiler", "schedules", "runtime", "python/tbex", "python/src", "aclnn/src", "ascendc/src", "ascendc/include"]
# Names of the form TBEX_* that are macros, not settings.
MACRO = re.compile(r"^TBEX_(VERSION_\w+|AMX\w*|ACLNN\w*_H_|AOT_\w*|ASCENDC_\w+|PY_FIELD|\w+_H)$")


def product_files():
    for d in PRODUCT:
        for p in (REPO / d).rglob("*"):
            if p.suffix in (".cpp", ".h", ".py", ".in") and p.is_file():
                yield p


def test_python_table_is_the_cpp_registry():
    names = [k["name"] for k in knobs.table()]
    assert names == [k["name"] for k in _C.knobs()]
    assert len(names) == len(set(names))
    text = knobs.describe()
    for k in knobs.table():
        assert k["kind"] in ("int", "bool", "str", "path", "list")
        assert k["doc"], k["name"]
        assert re.search(rf"^{k['name']} \({k['kind']}, default ", text, re.M), k["name"]
    # The codegen knobs are exactly the tile overrides and the batch-slicing limit.
    assert sorted(k["name"] for k in knobs.table() if k["affects_codegen"]) == \
        ["TBEX_DW_TILE", "TBEX_DX_TILE", "TBEX_FWD_TILE", "TBEX_KERNEL_MAX_ELEMENTS"]


def test_every_knob_the_product_names_is_registered():
    registered = {k["name"] for k in knobs.table()}
    seen = set()
    for p in product_files():
        if p.relative_to(REPO).as_posix() == "runtime/src/knobs.cpp":
            continue  # the registry itself
        seen |= {n for n in re.findall(r"\bTBEX_[A-Z0-9_]+\b", p.read_text(errors="replace"))
                 if not MACRO.match(n)}
    assert seen - registered == set(), "named in the product but not registered"
    assert registered - seen == set(), "registered but named nowhere else"


def test_only_the_registry_reads_tbex_environment_variables():
    bad = []
    for p in product_files():
        rel = p.relative_to(REPO).as_posix()
        if rel == "runtime/src/knobs.cpp":
            continue
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            if re.search(r"getenv\(\s*\"TBEX_|environ(\.get)?[\[(]\s*[\"']TBEX_", line):
                bad.append(f"{rel}:{i}: {line.strip()}")
    assert not bad, "\n".join(bad)


def test_override_is_seen_by_cpp_and_restored(monkeypatch):
    monkeypatch.setenv("TBEX_DW_TILE", "4,3,8")
    assert knobs.get("TBEX_DW_TILE") == "4,3,8"
    with knobs.override("TBEX_DW_TILE", "2,1,4"):
        assert _C.knob_get("TBEX_DW_TILE") == "2,1,4"
        assert _C.knobs_codegen_key() == "TBEX_DW_TILE=2,1,4"
    assert _C.knob_get("TBEX_DW_TILE") == "4,3,8"
    monkeypatch.delenv("TBEX_DW_TILE")
    assert _C.knobs_codegen_key() == ""
    with pytest.raises(tbex.UserError) as e:
        knobs.get("TBEX_NOPE")
    assert e.value.param == "name"


def test_bad_knob_value_is_a_typed_error(monkeypatch):
    monkeypatch.setenv("TBEX_KERNEL_CACHE_CAPACITY", "lots")
    with pytest.raises(tbex.UserError) as e:
        knobs.kernel_cache_stats()
    assert e.value.param == "TBEX_KERNEL_CACHE_CAPACITY" and "'lots'" in str(e.value)


CHILD = """
from tbex import dsl, tvm
for n in (1, 2):
    fmap = tvm.placeholder((1, 1, 1, 4, 4, 16), name="x", dtype="float32")
    dedy = tvm.placeholder((1, 1, 1, 4, 4, 16), name="dy", dtype="float32")
    res = dsl.conv3d_backprop_filter(fmap, dedy, [16, 1, 16, n, n],
        {"strides": [1, 1, 1], "pads": [0, 0, 0, n - 1, 0, n - 1], "dilations": [1] * 5,
         "res_dtype": "float32"})
    dsl.build(dsl.auto_schedule(res), {"name": "k"})
"""


def run_child(**env):
    e = dict(os.environ, TBEX_CACHE="0", **env)
    r = subprocess.run([sys.executable, "-c", CHILD], env=e, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stderr


def test_log_help_and_unknown_topic_once():
    err = run_child(TBEX_LOG="help,bogus")
    assert err.count("TBEX_LOG topics") == 1
    for topic, _ in knobs.log_topics():
        assert re.search(rf"\[tbex log\]\s+{topic}\s", err), topic
    assert err.count("unknown TBEX_LOG topic 'bogus'") == 1
    assert "[tbex dispatch]" not in err


def test_bad_thread_count_is_reported():
    err = run_child(TBEX_NUM_THREADS="many")
    assert "TBEX_NUM_THREADS='many' is not an integer" in err
