#!/usr/bin/env bash
# The decoder-only half of the length-extrapolation study (../README.md): per position scheme,
# runner sweep scheme_<scheme>.yaml dataset.task=copy,reverse,sort over seeds, into
# OUT/<scheme>/ (a folder that exists is continued with --resume), then `runner eval --split test`
# and `--split val` of every run (rows exactly right by length: analyze.py).
#   experiments/studies/length_extrapolation/decoder_only/sweep.sh [OUT [RUNNER [SWEEP-ARGS...]]]
#   SCHEMES="nope t5_bias" SEEDS=0,1 .../sweep.sh results/length_extrapolation_decoder_only build/bin/runner --jobs 2
set -euo pipefail
[ "${1:-}" != -h ] && [ "${1:-}" != --help ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
S=$(cd "$(dirname "$0")" && pwd)
out=${1:-results/length_extrapolation_decoder_only}
runner=${2:-build/bin/runner}
shift 2 2>/dev/null || shift $#
for scheme in ${SCHEMES:-sinusoidal learned nope rope t5_bias alibi}; do
  dir=$out/$scheme
  if [ -d "$dir" ]; then
    "$runner" sweep "$dir" --resume "$@"
  else
    "$runner" sweep "$S/scheme_$scheme.yaml" dataset.task=copy,reverse,sort "seed=${SEEDS:-0,1,2}" -o "$dir" "$@"
  fi
  for run in "$dir"/*.h5; do
    for split in test val; do "$runner" eval "$run" --split "$split" -q > /dev/null; done
  done
done
