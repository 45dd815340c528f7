#!/usr/bin/env bash
# Multi-query and grouped-query attention on Multi30K (README.md): the Transformer of
# experiments/transformer_multi30k_de_en_glorot.yaml with kv_heads 8 (multi-head, the file as it
# is), 2 (grouped-query) and 1 (multi-query) in both encoder and decoder, seeds 0 and 1, all six
# trained side by side, then each best.pt translated greedily on test2016 (`runner eval`).
#   experiments/studies/kv_heads/run.sh OUT-DIR [RUNNER [OVERRIDES...]]
#   experiments/studies/kv_heads/run.sh results/kv_heads build/bin/runner device=cuda threads=2
# Then: runner compare OUT-DIR/*.h5 --group-by model.encoder.kv_heads
set -euo pipefail
[ $# -ge 1 ] && [ "$1" != -h ] && [ "$1" != --help ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
out=$1
runner=${2:-build/bin/runner}
shift 2 2>/dev/null || shift $#
mkdir -p "$out"
pids=()
for k in 8 2 1; do
  for s in 0 1; do
    n=kv$k-seed$s
    ( "$runner" experiments/transformer_multi30k_de_en_glorot.yaml --results "$out/$n.h5" seed=$s "$@" \
        model.encoder.kv_heads=$k model.decoder.kv_heads=$k > "$out/$n.log" 2>&1 &&
      "$runner" eval "$out/$n.h5" --split test "$@" > "$out/$n.eval.log" 2>&1 ) &
    pids+=($!)
  done
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
exit $rc
