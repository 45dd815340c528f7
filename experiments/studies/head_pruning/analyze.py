"""The head-pruning study's tables and plot, from the runs' results files (runner ablate and
runner prune wrote /ablation and /pruning into each): Markdown on stdout, the pruning curves as
a PNG. Run it with the project venv's python (scripts/setup installs the attnlab package there):

    ~/.cache/attnlab/venv-torch-2.11.0/bin/python experiments/studies/head_pruning/analyze.py \
        results/head_pruning/runs --plot experiments/studies/head_pruning/pruning.png > results.md
    .../analyze.py results/head_pruning/full --split test --title "the full Multi30K Transformer" \
        --plot experiments/studies/head_pruning/pruning_full.png > results_full.md
"""
import argparse
import sys

import numpy as np
import pandas as pd

import attnlab


def mean_sd(values, digits=2) -> str:
    v = np.asarray(list(values), dtype=float)
    sd = v.std(ddof=1) if len(v) > 1 else float("nan")
    return f"{v.mean():.{digits}f} ± {sd:.{digits}f}"


def largest_within(curve: pd.DataFrame, base_bleu: float, tolerance: float = 0.5) -> float:
    """The largest fraction of heads removed such that the mean BLEU (over repeats) of that point
    and of every point before it stays within `tolerance` of the full model."""
    mean = curve.groupby("fraction")["bleu"].mean().sort_index()
    within = 0.0
    for fraction, bleu in mean.items():
        if bleu < base_bleu - tolerance:
            break
        within = fraction
    return within


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="the sweep folder of the study's runs")
    parser.add_argument("--plot", help="write the pruning curves to this PNG")
    parser.add_argument("--split", default="val", help="the split the runs were measured on (runner ablate --split)")
    parser.add_argument("--title", default="the shrunk Multi30K Transformer", help="the model, in the plot's title")
    args = parser.parse_args()

    runs = attnlab.runs(args.folder)
    runs = runs[runs["status"] == "completed"]
    seeds = []
    for i in range(len(runs)):
        run = runs.run(i)
        ablation = run.ablation
        pruning = run.pruning
        if ablation.empty or pruning.empty:
            print(f"{run.path}: no ablation or pruning yet (runner ablate / runner prune)", file=sys.stderr)
            return 1
        seeds.append((int(run.config["seed"]), run, ablation[ablation["name"] == args.split], pruning))
    seeds.sort(key=lambda s: s[0])
    base = np.array([a["base_bleu"].iloc[0] for _, _, a, _ in seeds])
    noise = base.std(ddof=1)

    print(f"Seeds {', '.join(str(s) for s, *_ in seeds)}; the {args.split} split "
          f"({int(seeds[0][2]['sentences'].iloc[0])} sentences), greedy sacreBLEU.\n")
    sp = args.split
    def num(x: float) -> str:
        return "-" if np.isnan(x) else f"{x:.2f}"

    print(f"| seed | epochs | best val BLEU (training) | test BLEU (the run's evaluation) | {sp} BLEU | {sp} loss | "
          "heads | ablation s | pruning s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for seed, run, a, p in seeds:
        val = run.metrics[run.metrics["series"] == "val/bleu"]["value"]
        best = val.max() if len(val) else float("nan")
        evals = run.evals
        test = evals.loc["test", "bleu"] if "test" in evals.index else float("nan")
        print(f"| {seed} | {run.epochs_done} | {num(best)} | {num(test)} | {a['base_bleu'].iloc[0]:.2f} | "
              f"{a['base_loss'].iloc[0]:.4f} | {len(a)} | "
              f"{a['seconds'].iloc[0]:.0f} | {p.groupby('name')['seconds'].first().sum():.0f} |")
    print(f"\nSeed noise: the sd of the full models' {sp} BLEU over the seeds, **{noise:.2f}**.\n")

    print("### 1. One head off at a time\n")
    print("| | mean ± sd over seeds |")
    print("|---|---|")
    rows = {
        f"heads whose removal lowers {sp} BLEU by more than the seed noise":
            [(a["delta_bleu"] < -noise).sum() for *_, a, _ in seeds],
        f"heads whose removal changes {sp} BLEU by more than the seed noise (either way)":
            [(a["delta_bleu"].abs() > noise).sum() for *_, a, _ in seeds],
        f"heads whose removal raises {sp} BLEU": [(a["delta_bleu"] > 0).sum() for *_, a, _ in seeds],
        f"heads whose removal raises {sp} BLEU by more than the seed noise":
            [(a["delta_bleu"] > noise).sum() for *_, a, _ in seeds],
        "largest BLEU drop from one head": [-a["delta_bleu"].min() for *_, a, _ in seeds],
        "largest loss rise from one head": [a["delta_loss"].max() for *_, a, _ in seeds],
    }
    for label, values in rows.items():
        print(f"| {label} | {mean_sd(values)} |")
    print("\nThe heads that matter most (mean ΔBLEU over seeds, the five lowest):\n")
    every = pd.concat([a.assign(seed=s) for s, _, a, _ in seeds])
    by_head = every.groupby(["module", "layer", "head"])[["delta_bleu", "delta_loss"]].mean()
    print("| module | layer | head | ΔBLEU | Δloss |")
    print("|---|---|---|---|---|")
    for (module, layer, head), r in by_head.sort_values("delta_bleu").head(5).iterrows():
        print(f"| {module} | {layer} | {head} | {r.delta_bleu:+.2f} | {r.delta_loss:+.4f} |")

    print("\n### 2. Pruning: importance order against random orders\n")
    print(f"| order | largest fraction of heads off within 0.5 {sp} BLEU of the full model | BLEU at 50% off |")
    print("|---|---|---|")
    for name in sorted(seeds[0][3]["name"].unique()):
        within, half = [], []
        for _, _, a, p in seeds:
            curve = p[p["name"] == name]
            within.append(100 * largest_within(curve, a["base_bleu"].iloc[0]))
            at_half = curve[np.isclose(curve["fraction"], curve["fraction"].iloc[
                (curve["fraction"] - 0.5).abs().argmin()])]
            half.append(at_half["bleu"].mean())
        print(f"| {name} | {mean_sd(within, 0)}% | {mean_sd(half)} |")

    from scipy.stats import spearmanr
    rho_loss = [spearmanr(a["importance_normalized"], a["delta_loss"]).statistic for *_, a, _ in seeds]
    rho_bleu = [spearmanr(a["importance_normalized"], -a["delta_bleu"]).statistic for *_, a, _ in seeds]
    print(f"\nDoes the gradient importance predict what removing a head alone does? Spearman ρ between "
          f"importance_normalized and Δloss: {mean_sd(rho_loss)}; and -ΔBLEU: {mean_sd(rho_bleu)} (mean ± sd "
          f"over seeds, 72 heads each).")

    print("\n### 3. Which module is most sensitive\n")
    print("| module | mean ΔBLEU per head off | mean Δloss per head off | heads lowering BLEU by > noise |")
    print("|---|---|---|---|")
    for module in every["module"].unique():
        per_seed = [a[a["module"] == module] for *_, a, _ in seeds]
        print(f"| {module} | {mean_sd([m['delta_bleu'].mean() for m in per_seed])} | "
              f"{mean_sd([m['delta_loss'].mean() for m in per_seed], 4)} | "
              f"{mean_sd([(m['delta_bleu'] < -noise).sum() for m in per_seed])} |")

    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4.2))
        colours = {f"importance_{sp}": "tab:blue", f"random_{sp}": "tab:orange"}
        for name in sorted(seeds[0][3]["name"].unique()):
            curves = pd.concat([p[p["name"] == name].assign(seed=s) for s, _, _, p in seeds])
            per_seed = curves.groupby(["seed", "fraction"])["bleu"].mean().unstack(0)
            mean = per_seed.mean(axis=1)
            ax.plot(100 * mean.index, mean.values, label=f"{name} (mean of {per_seed.shape[1]} seeds)",
                    color=colours.get(name))
            ax.fill_between(100 * mean.index, per_seed.min(axis=1), per_seed.max(axis=1), alpha=0.2,
                            color=colours.get(name))
        ax.axhline(base.mean() - 0.5, color="grey", linestyle=":", label="full model - 0.5 BLEU")
        ax.set_xlabel("heads switched off (%)")
        ax.set_ylabel(f"{args.split} BLEU (greedy)")
        ax.set_title(f"Pruning heads of {args.title}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
