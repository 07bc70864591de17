#!/usr/bin/env bash
# Refreshes the lock files from pyproject.toml: exact versions and sha256 hashes for Linux x86-64,
# Python 3.11, with the CPU-only torch build. One line, from the repository root:
#   pip install uv && bash requirements/refresh.sh
# Writes requirements/lock.txt (everything but torch; extras test and slurm) and
# requirements/torch-cpu.txt (torch's CPU wheel, from PyTorch's CPU index). Where pip is set up
# with a local folder of wheels that carries the CPU torch wheel (PIP_FIND_LINKS, as on the
# project's CI machines), that folder is used instead of PyTorch's index. envs/labeldp.yaml pins
# the same versions (tests/test_lockfile.py checks it): update its pins after a refresh.
set -euo pipefail
cd "$(dirname "$0")/.."
UV="${UV:-uv}"
if [ -n "${PIP_FIND_LINKS:-}" ]; then
  torch_source=(--find-links "$PIP_FIND_LINKS")
else
  torch_source=(--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match)
fi
common=(--python-version 3.11 --python-platform x86_64-manylinux_2_28 --generate-hashes --quiet)
"$UV" pip compile pyproject.toml --extra test --extra slurm --no-emit-package torch \
  "${common[@]}" "${torch_source[@]}" --custom-compile-command "bash requirements/refresh.sh" \
  -o requirements/lock.txt.tmp
version="$(sed -n 's/^ *"torch==\([^"]*\)".*/\1/p' pyproject.toml)"
if [ -n "${PIP_FIND_LINKS:-}" ]; then
  # uv hashes no local wheel: hash the folder's CPU wheels of this version here
  { echo "torch==${version}+cpu \\"
    for wheel in "$PIP_FIND_LINKS"/torch-"${version}"+cpu-*.whl; do
      [ -f "$wheel" ] || { echo "error: no torch ${version}+cpu wheel in $PIP_FIND_LINKS" >&2; exit 1; }
      echo "    --hash=sha256:$(sha256sum "$wheel" | cut -d' ' -f1) \\"
    done | sed '$ s/ \\$//'; } > requirements/torch-cpu.txt.tmp
else
  echo "torch==${version}+cpu" > requirements/torch-cpu.in
  "$UV" pip compile requirements/torch-cpu.in --no-deps "${common[@]}" "${torch_source[@]}" \
    --custom-compile-command "bash requirements/refresh.sh" -o requirements/torch-cpu.txt.tmp
  rm requirements/torch-cpu.in
fi
{ echo "# torch's CPU-only build, installed with --no-deps (its dependencies are in lock.txt)."
  echo "--index-url https://download.pytorch.org/whl/cpu"
  cat requirements/torch-cpu.txt.tmp; } > requirements/torch-cpu.txt.tmp2
mv requirements/torch-cpu.txt.tmp2 requirements/torch-cpu.txt
rm requirements/torch-cpu.txt.tmp
mv requirements/lock.txt.tmp requirements/lock.txt
echo "wrote requirements/lock.txt and requirements/torch-cpu.txt"
