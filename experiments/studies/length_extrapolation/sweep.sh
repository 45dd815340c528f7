#!/usr/bin/env bash
# The study's runs: one `runner sweep` per position scheme over task x seed, then the val split
# decoded too (in-distribution exact match, lengths 1..16; the test split, 17..32, is decoded at
# the end of each run by base.yaml's evaluate block). From the repository root:
#   experiments/studies/length_extrapolation/sweep.sh                     # the full grid: 6 x 3 x 3 = 54 runs
#   experiments/studies/length_extrapolation/sweep.sh copy 0 results/length_extrapolation/pilot   # the pilot
# Arguments: TASKS (default copy,reverse,sort), SEEDS (default 'range(0,3)'), OUT (default
# results/length_extrapolation); more runner sweep arguments in SWEEP_ARGS (e.g. "--jobs 2"); the
# schemes in SCHEMES (default "sinusoidal learned rope t5_bias alibi nope", in that order).
# A sweep that stopped is continued by the same command (runner sweep OUT/<scheme> --resume).
set -euo pipefail
study=$(dirname "$0")
runner=${RUNNER:-build/bin/runner}
tasks=${1:-copy,reverse,sort}
seeds=${2:-range(0,3)}
out=${3:-results/length_extrapolation}
status=0
for scheme in ${SCHEMES:-sinusoidal learned rope t5_bias alibi nope}; do
  if [ -f "$out/$scheme/sweep.yaml" ]; then
    "$runner" sweep "$out/$scheme" --resume ${SWEEP_ARGS:-} || status=1
  else
    "$runner" sweep "$study/scheme_$scheme.yaml" "dataset.task=$tasks" "seed=$seeds" -o "$out/$scheme" \
      ${SWEEP_ARGS:-} || status=1
  fi
  for run in "$out/$scheme"/*.h5; do
    "$runner" eval "$run" --split val -q || status=1
  done
done
exit $status
