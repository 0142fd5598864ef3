#!/bin/sh
# The on-host part of `gpuws health` on a real GPU host: runs the very script gpuws sends over SSH
# (SCRIPT in gpuws/core/health/collect.py, read without importing gpuws) with --dcgm, keeps its raw
# output, and judges it where gpuws imports. Usage: sh scripts/device-health-check.sh [OUT_DIR]
# (default $OUT/health, else ./device-health-out). Run from the repository root.
set -u
out=${1:-${OUT:+$OUT/health}}
out=${out:-./device-health-out}
mkdir -p "$out"
py=$(command -v python3) || { echo "no python3" >&2; exit 1; }
"$py" -c 'import ast; t = ast.parse(open("gpuws/core/health/collect.py").read()); print(next(n.value.value for n in t.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "SCRIPT"))' > "$out/health-script.sh" || exit 1
start=$(date +%s)
sh "$out/health-script.sh" 1 > "$out/health-raw.txt" 2> "$out/health-raw.err"
echo "rc=$? seconds=$(( $(date +%s) - start )) user=$(id -un) groups=$(id -Gn)" > "$out/health-run.txt"
nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER,POWER,PERFORMANCE > "$out/nvidia-smi-q-health.txt" 2>&1
# Judged by gpuws itself when its dependencies (defusedxml) import here; the raw output suffices otherwise.
PYTHONPATH=. "$py" -c 'import json, sys
from gpuws.core.health.collect import evaluate, provider_report
h = evaluate("device", open(sys.argv[1]).read(), cuda="12.4")
print(json.dumps(h.to_json(), indent=1)); print(provider_report(h), file=sys.stderr)' "$out/health-raw.txt" \
  > "$out/health.json" 2> "$out/health-report.txt" || echo "gpuws did not import here: raw output only" >> "$out/health-run.txt"
cat "$out/health-run.txt"
