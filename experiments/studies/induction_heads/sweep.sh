#!/usr/bin/env bash
# The induction-heads study's runs (README.md): on repeated random tokens, 1-layer and 2-layer
# attention-only models and 2-layer models with MLPs; on text, 1-layer and 2-layer attention-only
# models; seeds 0-2 each (15 runs), then the causal check on every repeated-token run (analyze.py).
#   experiments/studies/induction_heads/sweep.sh [OUT-DIR [RUNNER [SWEEP-ARGS...]]]
#   SEEDS=0,1 experiments/studies/induction_heads/sweep.sh results/induction_heads build/bin/runner --jobs 2
# A sweep folder that exists is continued (runner sweep DIR --resume).
set -euo pipefail
[ "${1:-}" != -h ] && [ "${1:-}" != --help ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
S=$(cd "$(dirname "$0")" && pwd)
out=${1:-results/induction_heads}
runner=${2:-build/bin/runner}
shift 2 2>/dev/null || shift $#
seeds=${SEEDS:-0,1,2}
sweep() {  # sweep NAME FILE AXES...
  local dir=$out/$1 file=$2
  shift 2
  if [ -d "$dir" ]; then "$runner" sweep "$dir" --resume "${SWEEP_ARGS[@]}"; else "$runner" sweep "$file" "$@" "seed=$seeds" -o "$dir" "${SWEEP_ARGS[@]}"; fi
}
SWEEP_ARGS=("$@")
sweep repeated "$S/repeated.yaml" model.num_blks=1,2
sweep repeated_mlp "$S/repeated.yaml" model.attention_only=false model.ffn_num_hiddens=256
sweep text "$S/text.yaml" model.num_blks=1,2
