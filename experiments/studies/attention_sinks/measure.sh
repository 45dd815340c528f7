#!/usr/bin/env bash
# The attention-sinks study's evaluations (README.md), on every run under OUT-DIR/{char,bpe,...}:
# the text (make_text.py: 50,000 characters of fra-eng's English side from its validation part)
# read in rows of 8 training lengths (1024 characters, 512 BPE tokens) with
#   full attention within the training length (rows of block_size: StreamingLLM's (c));
#   full attention over the whole row (past the training length, as their "dense attention");
#   window attention of W = the training length (their (a));
#   W - k recent tokens and the first k kept, k = 1, 2, 4 (their (b), attention sinks: the same
#   cache size);
#   the window of W recomputed afresh for every token (their "sliding window with re-computation").
#   experiments/studies/attention_sinks/measure.sh [OUT-DIR [RUNNER [RUN.h5 ...]]]   (default: every run)
# An evaluation a run already holds is measured again (runner eval replaces its group).
set -euo pipefail
[ "${1:-}" != -h ] && [ "${1:-}" != --help ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
S=$(cd "$(dirname "$0")" && pwd)
out=${1:-results/attention_sinks}
runner=${2:-build/bin/runner}
shift 2 2>/dev/null || shift $#
python=${PYTHON:-$HOME/.cache/attnlab/venv-torch-2.11.0/bin/python}
text=$out/fra_eng_en_tail.txt
[ -f "$text" ] || "$python" "$S/make_text.py" -o "$text" --chars 50000
(($#)) || set -- "$out"/*/*.h5
for run in "$@"; do
  block=$("$python" -c "import attnlab, sys; print(attnlab.load(sys.argv[1]).config['dataset']['block_size'])" "$run")
  context=$((8 * block))
  ev() { OMP_NUM_THREADS=1 "$runner" eval "$run" --text "$text" -q "$@"; }
  ev --name dense_block
  ev --context "$context"
  ev --context "$context" --window "$block"
  for sinks in 1 2 4; do ev --context "$context" --window $((block - sinks)) --sinks "$sinks"; done
  ev --context "$context" --window "$block" --recompute
done
