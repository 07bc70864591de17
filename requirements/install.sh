#!/usr/bin/env bash
# Installs the locked environment into .venv (or the folder given as $1): exact versions with
# sha256 hashes from requirements/lock.txt (Linux x86-64, Python 3.11) and torch's CPU build from
# requirements/torch-cpu.txt, then this package itself (editable, no dependencies), then checks
# with `pip check` that the set is consistent. Used by both README commands and by .ci/run.
#   bash requirements/install.sh            # -> .venv
#   PYTHON=python3.11 bash requirements/install.sh /path/to/venv
# Refresh the lock with `pip install uv && bash requirements/refresh.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv}"
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
  echo "error: the lock is for Python 3.11 and '$PY' is $("$PY" --version 2>&1 || echo missing)." >&2
  echo "       Point PYTHON at a Python 3.11 interpreter, e.g. PYTHON=python3.11 bash requirements/install.sh" >&2
  exit 2
fi
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "error: the lock is for Linux x86-64, this is $(uname -s)-$(uname -m); use envs/labeldp.yaml (conda) instead" >&2
  exit 2
fi
"$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip)
"${PIP[@]}" install --no-deps --require-hashes -r requirements/lock.txt
"${PIP[@]}" install --no-deps --require-hashes -r requirements/torch-cpu.txt
"${PIP[@]}" install --no-deps --no-build-isolation -e .
"${PIP[@]}" check
