"""Study part 4: which predicts the blank-out importance of a source token better, attention
rollout (the encoder-decoder path of `runner rollout`) or raw cross-attention? Abnar & Zuidema
(2020) found rollout and flow correlate better than raw attention with blank-out importance.

For each run (one per seed) and each sentence that `runner ablate --tokens` blanked out and whose
attention it recorded: the Spearman rank correlation, over the sentence's source tokens, of the
blank-out importance (the rise of the reference's loss per target token when the token is
replaced by <unk>) with each token's relevance summed over the target positions, under
  - rollout: /rollout/<sample>/encoder_decoder_rollout (runner rollout --module decoder_cross --write)
  - raw, last layer: decoder_cross attention of the last decoder layer, mean over heads
  - raw, mean of layers: decoder_cross attention averaged over layers and heads
Sentences of fewer than 3 source tokens have no meaningful rank correlation and are left out.

    python rollout_vs_blankout.py results/head_pruning/fra_eng/seed=*.h5
"""
import argparse
import sys

import h5py
import numpy as np
from scipy.stats import spearmanr


def sentence_rows(f):
    g = f["ablation/tokens_val"]
    sentence = g["sentence"][()]
    position = g["position"][()]
    delta = g["delta_loss"][()]
    out = {}
    for s in np.unique(sentence):
        rows = sentence == s
        out[int(s)] = delta[rows][np.argsort(position[rows])]
    return out, g.attrs["samples"]


def correlations(path):
    results = {"rollout": [], "raw, last layer": [], "raw, mean of layers": []}
    with h5py.File(path, "r") as f:
        deltas, samples = sentence_rows(f)
        links = {f["attention"][k].attrs["text"]: k for k in f["attention"]}
        for s, delta in deltas.items():
            text = f"val {s}"
            if len(delta) < 3 or text not in links:
                continue
            link = links[text]
            rollout = f[f"rollout/{link}/encoder_decoder_rollout"][()]  # [target, source]
            cross = f[f"attention/{link}/decoder_cross"][()]             # [layers, heads, target, source]
            n = len(delta)
            relevance = {
                "rollout": rollout[:, :n].sum(0),
                "raw, last layer": cross[-1].mean(0)[:, :n].sum(0),
                "raw, mean of layers": cross.mean((0, 1))[:, :n].sum(0),
            }
            for name, r in relevance.items():
                if np.ptp(r) == 0 or np.ptp(delta) == 0:
                    continue
                results[name].append(spearmanr(delta, r[:n]).statistic)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    per_run = {path: correlations(path) for path in args.runs}
    names = list(next(iter(per_run.values())))
    print("| relevance | Spearman ρ with blank-out importance: mean over sentences, mean ± sd over seeds | "
          "sentences with ρ > 0 |")
    print("|---|---|---|")
    for name in names:
        means = [np.mean(r[name]) for r in per_run.values()]
        positive = [np.mean(np.asarray(r[name]) > 0) for r in per_run.values()]
        count = sum(len(r[name]) for r in per_run.values())
        sd = np.std(means, ddof=1) if len(means) > 1 else float("nan")
        print(f"| {name} | {np.mean(means):.3f} ± {sd:.3f} ({count} sentences in all) | "
              f"{100 * np.mean(positive):.0f}% |")
    # Paired: rollout minus raw (last layer), per sentence, pooled over the seeds.
    diff = np.concatenate([np.asarray(r["rollout"]) - np.asarray(r["raw, last layer"]) for r in per_run.values()
                           if len(r["rollout"]) == len(r["raw, last layer"])])
    print(f"\nRollout minus raw last-layer attention, per sentence: mean {diff.mean():+.3f}, rollout higher in "
          f"{100 * np.mean(diff > 0):.0f}% of {len(diff)} sentences.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
