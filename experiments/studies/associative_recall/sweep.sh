#!/usr/bin/env bash
# The associative-recall study's runs (README.md): MQAR at lengths 64 / 128 / 256 (4 / 8 / 16
# pairs, batches of 64 / 32 / 16 rows: 4,096 tokens a step), widths 32 / 64 / 128, four mixers
# (mixer_*.yaml), seeds 0 and 1: one `runner sweep` over the seeds per (length, width, mixer),
# into OUT/L<length>_w<width>/<mixer>/, ordered length, then width, then mixer, so that a grid cut
# short by time still has every mixer at the lengths and widths it reached.
#   experiments/studies/associative_recall/sweep.sh [OUT [RUNNER]]
#   LENGTHS="64 128" WIDTHS="32 64" MIXERS="softmax linear" SEEDS=0,1 experiments/studies/associative_recall/sweep.sh
# STEPS (default 1000, base.yaml's) trains longer, into OUT/L<length>_w<width>_steps<STEPS>/.
# ROWS gives every step that many rows at every length (Zoology's 512) instead of 4,096 tokens'
# worth, into OUT/L<length>_w<width>[_steps<STEPS>]_rows<ROWS>/. OVERRIDES: more key=value
# overrides for every run (e.g. "trainer.eval_every=100").
# More runner sweep arguments in SWEEP_ARGS (default "--jobs 1"); each run has one thread
# (base.yaml). A folder that exists is continued (runner sweep DIR --resume).
set -euo pipefail
[ "${1:-}" != -h ] && [ "${1:-}" != --help ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
S=$(cd "$(dirname "$0")" && pwd)
out=${1:-results/associative_recall}
runner=${2:-build/bin/runner}
seeds=${SEEDS:-0,1}
steps=${STEPS:-1000}
extra=() suffix=
if [ "$steps" != 1000 ]; then extra=("trainer.max_steps=$steps") suffix=_steps$steps; fi
if [ -n "${ROWS:-}" ]; then suffix=${suffix}_rows$ROWS; fi
read -r -a more <<< "${OVERRIDES:-}"
extra+=("${more[@]}")
status=0
for L in ${LENGTHS:-64 128 256}; do
  kv=$((L / 16)) batch=${ROWS:-$((4096 / L))}
  for W in ${WIDTHS:-32 64 128}; do
    for mixer in ${MIXERS:-softmax_learned linear sliding_window softmax}; do
      dir=$out/L${L}_w${W}$suffix/$mixer
      if [ -f "$dir/sweep.yaml" ]; then
        "$runner" sweep "$dir" --resume ${SWEEP_ARGS:---jobs 1} || status=1
      else
        "$runner" sweep "$S/mixer_$mixer.yaml" "dataset.seq_len=$L" "dataset.num_kv_pairs=$kv" \
          "dataset.batch_size=$batch" "model.num_hiddens=$W" "${extra[@]}" "seed=$seeds" -o "$dir" ${SWEEP_ARGS:---jobs 1} || status=1
      fi
    done
  done
done
exit $status
