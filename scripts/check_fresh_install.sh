#!/usr/bin/env bash
# Does `pip install ".[workbook]"` run the whole workbook? Too slow for CI (a fresh venv with torch
# and JupyterLab, then every investigation notebook): run it before a release.
#
#   scripts/check_fresh_install.sh [WORKDIR]      # default: a new temporary folder, removed after
#
# Makes WORKDIR/venv, installs this checkout with the workbook extra, then from WORKDIR (outside
# the clone) runs `perfkit init wb` and, inside wb/, `perfkit run`, `perfkit log` and
# `jupyter lab --version`. Exits non-zero unless every notebook ran ("N ok, 0 failed").
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${1:-$(mktemp -d)}"
[ $# -ge 1 ] || trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK"
python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q "$ROOT[workbook]" 2>&1 | grep -v "^WARNING: Location" || true
cd "$WORK"
"$WORK/venv/bin/perfkit" init wb
cd wb
"$WORK/venv/bin/jupyter" lab --version
"$WORK/venv/bin/perfkit" run --no-progress | tee run.txt
"$WORK/venv/bin/perfkit" log | tail -5
tail -1 run.txt | grep -q " 0 failed" || { echo "FAILED: a notebook failed in the fresh install" >&2; exit 1; }
echo "fresh install: the whole workbook ran"
