#!/usr/bin/env bash
# The full-size study (README.md, "Full size"): three seeds of the Multi30K Transformer of
# experiments/transformer_multi30k_de_en_glorot.yaml (20 epochs, patience 5, best.pt by val BLEU),
# trained side by side, then measured side by side on all 1,000 sentences of test2016
# (measure.sh: single-head ablation with gradient importance, importance-order and random-order
# pruning curves).
#   experiments/studies/head_pruning/full.sh OUT-DIR [RUNNER [OVERRIDES...]]
#   experiments/studies/head_pruning/full.sh results/head_pruning/full build/bin/runner device=cuda threads=4
# OVERRIDES (key=value) go to the training sweep and to the measurements. Environment: JOBS (runs
# trained at once, default 3), SPLIT (default test), SENTENCES (default all of the split).
# Then: analyze.py OUT-DIR --split test.
set -euo pipefail
[ $# -ge 1 ] && [ "$1" != -h ] && [ "$1" != --help ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
out=$1
runner=${2:-build/bin/runner}
shift 2 2>/dev/null || shift $#
overrides=("$@")
here=$(dirname "$0")
"$runner" sweep experiments/transformer_multi30k_de_en_glorot.yaml 'seed=range(0,3)' "${overrides[@]}" \
  -o "$out" --jobs "${JOBS:-3}"
args=("${overrides[@]}" --split "${SPLIT:-test}")
[ -z "${SENTENCES:-}" ] || args+=(--sentences "$SENTENCES")
pids=()
for s in 0 1 2; do
  "$here/measure.sh" "$out/seed=$s.h5" "$runner" "${args[@]}" > "$out/seed=$s.measure.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
exit $rc
