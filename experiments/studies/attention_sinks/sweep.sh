#!/usr/bin/env bash
# The attention-sinks study's runs (README.md): the character and the BPE model, seeds 0-2 each
# (6 runs, one thread each), then every StreamingLLM evaluation of every run (measure.sh).
#   experiments/studies/attention_sinks/sweep.sh [OUT-DIR [RUNNER [SWEEP-ARGS...]]]
#   SEEDS=0,1 experiments/studies/attention_sinks/sweep.sh results/attention_sinks build/bin/runner --jobs 2
# A sweep folder that exists is continued (runner sweep DIR --resume).
set -euo pipefail
[ "${1:-}" != -h ] && [ "${1:-}" != --help ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
S=$(cd "$(dirname "$0")" && pwd)
out=${1:-results/attention_sinks}
runner=${2:-build/bin/runner}
shift 2 2>/dev/null || shift $#
seeds=${SEEDS:-0,1,2}
SWEEP_ARGS=("$@")
sweep() {  # sweep NAME FILE AXES...
  local dir=$out/$1 file=$2
  shift 2
  if [ -d "$dir" ]; then "$runner" sweep "$dir" --resume "${SWEEP_ARGS[@]}"; else "$runner" sweep "$file" "$@" "seed=$seeds" -o "$dir" "${SWEEP_ARGS[@]}"; fi
}
sweep char "$S/base.yaml"
sweep bpe "$S/bpe.yaml"
"$S/measure.sh" "$out" "$runner"
