#!/usr/bin/env bash
# The study's measurements of one trained run (README.md): single-head ablation with gradient
# importance, the iterative importance pruning curve and three random orders, on the first 250
# val sentences, one thread (two runs are measured side by side on the 2-core CPU).
#   experiments/studies/head_pruning/measure.sh results/head_pruning/runs/seed=0.h5 [build/bin/runner]
set -euo pipefail
run=$1
runner=${2:-build/bin/runner}
common=(threads=1 --split val --sentences 250 -q)
"$runner" ablate "$run" "${common[@]}"
"$runner" prune "$run" "${common[@]}" --order importance --step 10%
"$runner" prune "$run" "${common[@]}" --order random --repeats 3 --seed 0 --step 10%
