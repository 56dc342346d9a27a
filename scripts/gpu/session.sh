#!/usr/bin/env bash
# Everything perfkit checks on a real GPU, in one call (a lent GPU gives about 15 minutes in all).
# From the repository root:   OUT=/tmp/gpu-out DEADLINE_S=480 scripts/gpu/session.sh
# ONLY="nvml notebooks" runs those steps alone (machine validate record profile nvml notebooks cases tests).
# Wheels for what the GPU image lacks (orjson, msgspec, isal, papermill, nbconvert, ...) are installed
# from .whl/ when it exists. Each step runs under `timeout`, cut to what is left of DEADLINE_S, in
# priority order; its output goes to $OUT/session.log and its files into $OUT/*.tar.gz.
set -u
OUT=${OUT:-/tmp/gpu-out}
DEADLINE_S=${DEADLINE_S:-480}
W=/tmp/perfkit-gpu
mkdir -p "$OUT" "$W"
LOG=$OUT/session.log
START=$(date +%s)
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PERFKIT_HOME=$W
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >>"$LOG" 2>&1
  # --target drops the wheels' data files: nbconvert's HTML templates among them
  python3 -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall("/tmp/wdata", [n for n in zipfile.ZipFile(w).namelist() if ".data/data/share/jupyter/" in n]) for w in sys.argv[1:]]' .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD JUPYTER_PATH=$(ls -d /tmp/wdata/*.data/data/share/jupyter 2>/dev/null | paste -sd:)
else
  export PYTHONPATH=$PWD
fi
step() {  # step NAME LIMIT_S COMMAND...: run under the smaller of LIMIT_S and the time left
  local name=$1 limit=$2; shift 2
  if [[ -n "${ONLY:-}" && " $ONLY " != *" ${name%% *} "* ]]; then return; fi
  local left=$(( DEADLINE_S - ($(date +%s) - START) ))
  (( left < limit )) && limit=$left
  if (( limit < 5 )); then echo "=== $name: skipped, deadline reached" | tee -a "$LOG"; return; fi
  echo "=== $name (limit ${limit} s, at $(( $(date +%s) - START )) s)" | tee -a "$LOG"
  local t0=$(date +%s); timeout "$limit" "$@" >>"$LOG" 2>&1; local rc=$?
  echo "=== $name: rc=$rc in $(( $(date +%s) - t0 )) s" | tee -a "$LOG"
}
PK="python3 -m perfkit"
step machine 30 bash -c 'nvidia-smi --query-gpu=name,driver_version,uuid,pci.bus_id --format=csv; python3 -c "import sys, torch; print(sys.version); print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).uuid)"'
step validate 200 $PK validate --device cuda --out "$W/gpu-validation.md" --json
step record 90 python3 scripts/record_traces.py --device cuda --out "$W/traces/gpu" --max-mb 8
for run in "ppo_train.py item_logging" "ppo_train.py batched_metrics" "mlp_train.py fp32" "mlp_train.py bf16"; do
  set -- $run
  step "profile $1 $2" 45 $PK profile --json --out "$W/profile/$2" "scripts/gpu/$1" -- "$2" 12 cuda
done
step nvml 30 python3 scripts/gpu/nvml_probe.py
step "notebooks" 150 $PK run cpu_bound step_anatomy gpu_kernels htod sync_points compile_ab amp_regression memory_leak -p mode live -p device cuda --out "$W/reports" --no-progress
step "cases" 80 $PK run case_studies -p mode live -p device cuda --out "$W/reports" --no-progress
step "tests" 90 python3 -m pytest -q -p no:cacheprovider tests/test_htod.py tests/test_amp_ab.py tests/test_bench_compare.py tests/test_environment.py tests/test_syncs_runtime.py tests/test_monitor.py tests/test_gpu_match.py tests/test_runner.py
[ -d "$W/traces" ] && tar czf "$OUT/traces.tar.gz" -C "$W" traces profile 2>>"$LOG"
[ -d "$W/reports" ] && tar czf "$OUT/reports.tar.gz" -C "$W" reports $(ls "$W"/gpu-validation.md 2>/dev/null | xargs -r -n1 basename) 2>>"$LOG"
echo "=== done at $(( $(date +%s) - START )) s" | tee -a "$LOG"
