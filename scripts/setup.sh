#!/usr/bin/env bash
# Installs every dependency listed in deps/pins.txt that is missing: Debian packages with apt-get,
# Python packages into .venv at the repo root. Idempotent; quiet when nothing is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pins="$root/deps/pins.txt"
venv="$root/.venv"

apt_missing=()
pip_wanted=()
while read -r reg pkg ver _; do
  case "$reg" in
    apt)
      have=$(dpkg-query -W -f='${Status} ${Version}' "$pkg" 2>/dev/null || true)
      [[ "$have" == "install ok installed $ver" ]] || apt_missing+=("$pkg=$ver")
      ;;
    pypi) pip_wanted+=("$pkg==$ver") ;;
  esac
done < <(grep -vE '^\s*(#|$)' "$pins")

if ((${#apt_missing[@]})); then
  echo "setup: apt-get install ${apt_missing[*]}"
  sudo_cmd=""
  [[ $(id -u) -eq 0 ]] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends \
    "${apt_missing[@]}" >/dev/null
fi

if [[ ! -x "$venv/bin/python" ]]; then
  echo "setup: creating $venv"
  python3 -m venv "$venv"
fi
# torch==2.13.0 resolves to the local CPU wheel (pip's find-links); anything unpinned would pull CUDA.
if ! "$venv/bin/python" - "${pip_wanted[@]}" <<'PY'
import sys
from importlib.metadata import version, PackageNotFoundError
bad = []
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        have = None
    if have is None or have.split("+")[0] != want:
        bad.append(spec)
print(" ".join(bad)) if bad else None
sys.exit(1 if bad else 0)
PY
then
  echo "setup: pip install ${pip_wanted[*]}"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${pip_wanted[@]}"
fi
