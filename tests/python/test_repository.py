"""The repository stands alone: test data is in tests/data, and no tracked file outside docs/
(and the measurement history in bench/RESULTS.md) points at documents or data outside the
repository. Needs no tbex build."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import oracle as O

REPO = Path(__file__).resolve().parents[2]
# Pieces of text that mean "read this from outside the repository"; split so this file does not
# match itself.
FORBIDDEN = ["../" + "shared", "shared/" + "cases", "SPEC " + "section", "SPEC " + "§"]
ALLOWED = ("docs/", "bench/RESULTS.md")
DATA_FILES = {"tbe_public_cases.json": 23, "tbe_public_error_cases.json": 26}
SKIP_DIRS = {".git", ".venv", "build", "__pycache__", ".pytest_cache", "kernel_meta"}


def _repository_files():
    """git's tracked files; outside a git checkout, every file but builds and environments."""
    if shutil.which("git") and (REPO / ".git").exists():
        out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], check=True,
                             capture_output=True).stdout.decode()
        return [f for f in out.split("\0") if f]
    return [str(p.relative_to(REPO)) for p in REPO.rglob("*")
            if p.is_file() and not SKIP_DIRS.intersection(p.relative_to(REPO).parts)]


def test_no_file_points_outside_the_repository():
    files = _repository_files()
    assert "tests/python/test_repository.py" in files
    hits = []
    for rel in files:
        if rel.startswith(ALLOWED) or not (REPO / rel).is_file():
            continue
        text = (REPO / rel).read_bytes().decode("utf-8", errors="replace")
        for line_no, line in enumerate(text.splitlines(), 1):
            hits += [f"{rel}:{line_no}: {line.strip()}" for s in FORBIDDEN if s in line]
    assert not hits, "point these at docs/ or tests/data/ instead:\n" + "\n".join(hits)


def test_docs_that_files_point_to_exist():
    pointed = set()
    for rel in _repository_files():
        if (REPO / rel).is_file() and not rel.startswith("bench/RESULTS.md"):
            text = (REPO / rel).read_bytes().decode("utf-8", errors="replace")
            pointed |= set(re.findall(r"docs/([A-Za-z_]+\.md)", text))
    assert {"layouts.md", "group_dict.md", "validation.md"} <= pointed
    pages = pointed | {"README.md", "data_flow.md"}
    missing = [p for p in sorted(pages) if not (REPO / "docs" / p).is_file()]
    assert not missing, missing


@pytest.mark.parametrize("name,count", sorted(DATA_FILES.items()))
def test_data_files_are_in_the_repository(name, count):
    path = O.DATA_DIR / name
    assert path.is_file(), path
    assert path.resolve().is_relative_to(REPO), path
    assert f"tests/data/{name}" in _repository_files()
    cases = json.loads(path.read_text())
    assert len(cases) == count
    assert len({c["case_name"] for c in cases}) == count


def test_every_user_error_carries_a_code():
    """A UserError with an empty code is a defect (docs/validation.md): none in the sources."""
    pattern = re.compile(r'UserError\(\s*""|user_check\([^;]*?,\s*""\s*,|raise UserError\([^;]*?,\s*""\s*,')
    bad = []
    for path in _repository_files():
        if not path.endswith((".cpp", ".h", ".py")) or path.startswith(("tests/", "bench/")):
            continue
        text = (REPO / path).read_text(encoding="utf-8")
        for m in pattern.finditer(text):
            bad.append(f"{path}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)[:60]}")
    assert not bad, "\n".join(bad)
