#!/usr/bin/env bash
# The study's measurements of one trained run (README.md): single-head ablation with gradient
# importance, the iterative importance pruning curve and three random orders.
#   experiments/studies/head_pruning/measure.sh RUN.h5 [RUNNER [ARGS...]]
# ARGS go to each of the three commands; without them, the pilot's: the first 250 val sentences,
# one thread (two runs are measured side by side on the 2-core CPU). full.sh passes the full
# study's (all of test2016, the device).
set -euo pipefail
[ $# -ge 1 ] && [ "$1" != -h ] && [ "$1" != --help ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
run=$1
runner=${2:-build/bin/runner}
shift 2 2>/dev/null || shift $#
common=("$@")
[ ${#common[@]} -gt 0 ] || common=(threads=1 --split val --sentences 250)
common+=(-q)
"$runner" ablate "$run" "${common[@]}"
"$runner" prune "$run" "${common[@]}" --order importance --step 10%
"$runner" prune "$run" "${common[@]}" --order random --repeats 3 --seed 0 --step 10%
