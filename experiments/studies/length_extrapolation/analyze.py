"""The length-extrapolation study's tables and plot from its runs' results files: exact-match
accuracy per target length (a hypothesis equal to its reference, word for word) of the test split
(/eval/test, lengths L+1..2L) and, where `runner eval --split val` stored it, of the val split
(/eval/val, the training lengths), mean ± sd over seeds per position scheme and task. The scheme
is read from each run's stored /config (positional encoding and self-attention scorer), the task
from dataset.task. Markdown on stdout, accuracy against length as a PNG. With the project venv:

    ~/.cache/attnlab/venv-torch-2.11.0/bin/python experiments/studies/length_extrapolation/analyze.py \
        results/length_extrapolation --plot experiments/studies/length_extrapolation/accuracy.png > results.md
"""
import argparse
import glob
import os
import sys

import numpy as np
import pandas as pd

import attnlab

# Rows in this order (a scheme without runs gets a row that says so).
SCHEMES = ["sinusoidal", "learned", "nope", "rope", "t5_bias", "alibi"]
POSITION_SCORERS = {"rope", "alibi", "t5_bias", "shaw"}  # Scorer::encodes_positions


def scorer_name(attention: dict, key: str) -> str:
    s = attention.get(key) or attention.get("scorer") or {}
    return s.get("plugin", "") if isinstance(s, dict) else str(s)


def scheme_of(config: dict) -> str:
    """sinusoidal | learned | nope | rope | t5_bias | alibi (or a description of anything else)."""
    enc, dec = config["model"]["encoder"], config["model"]["decoder"]
    enc_scorer = scorer_name(enc.get("attention", {}), "scorer") or "dot_product"
    dec_scorer = scorer_name(dec.get("attention", {}), "self_scorer") or "dot_product"

    def encoding(module: dict, scorer: str) -> str:  # positional_encoding auto resolved as the transformer does
        pe = module.get("positional_encoding", "auto")
        return ("none" if scorer in POSITION_SCORERS else "sinusoidal") if pe == "auto" else pe

    pe = encoding(enc, enc_scorer)
    scorers = {enc_scorer, dec_scorer}
    if pe != encoding(dec, dec_scorer) or len(scorers) != 1:
        return f"mixed ({pe}/{encoding(dec, dec_scorer)}, {'/'.join(sorted(scorers))})"
    scorer = scorers.pop()
    if scorer == "dot_product":
        return {"sinusoidal": "sinusoidal", "none": "nope"}.get(pe, pe)
    return scorer if pe == "none" else f"{scorer}+{pe}"


def exact_match_by_length(run: attnlab.Run, split: str) -> pd.Series:
    """Fraction of hypotheses equal to their reference, per reference length in words."""
    e = run.eval(split)
    length = e.reference.str.split().str.len()
    return (e.hypothesis.str.split().str.join(" ") == e.reference.str.split().str.join(" ")).groupby(length).mean()


def collect(paths: list[str]) -> pd.DataFrame:
    """One row per run x split x length: scheme, task, seed, split, length, accuracy, n (sequences)."""
    rows = []
    for path in paths:
        run = attnlab.Run(path)
        if run.status != "completed":
            print(f"left out (status {run.status}): {path}", file=sys.stderr)
            continue
        c = run.config
        have = set(run.evals.index)  # /eval/<name>
        for split in ("val", "test"):
            if split not in have:
                continue
            acc = exact_match_by_length(run, split)
            for length, a in acc.items():
                rows.append({"scheme": scheme_of(c), "task": c["dataset"]["task"], "seed": c["seed"],
                             "split": split, "length": int(length), "accuracy": float(a), "path": path})
    df = pd.DataFrame(rows)
    if not df.empty:  # one run per scheme x task x seed, or the means would mix settings silently
        runs = df.drop_duplicates("path").groupby(["scheme", "task", "seed"]).path.apply(list)
        twice = runs[runs.str.len() > 1]
        if len(twice):
            (scheme, task, seed), paths = next(iter(twice.items()))
            raise SystemExit(f"error: {len(paths)} runs of scheme {scheme}, task {task}, seed {seed}: "
                             f"{', '.join(paths)}; give the folders of one setting")
    return df


def mean_sd(v: pd.Series) -> str:
    return f"{v.mean():.2f} ± {v.std(ddof=1):.2f}" if len(v) > 1 else f"{v.mean():.2f}"


def tables(df: pd.DataFrame) -> str:
    out = []
    # Per run: mean over lengths of each split (every length weighs the same), then over seeds.
    per_run = df.groupby(["task", "scheme", "seed", "split"]).accuracy.mean().unstack("split")
    for task in sorted(df.task.unique()):
        d = df[df.task == task]
        lengths = sorted(d[d.split == "test"].length.unique())
        bands = [(int(b[0]), int(b[-1])) for b in np.array_split(lengths, min(4, len(lengths)))]
        out.append(f"\n### {task}\n")
        band_names = [f"{a}-{b}" for a, b in bands]
        out.append("| scheme | seeds | val (train lengths) | test (all) | " + " | ".join(band_names) + " |")
        out.append("|---|---|---|---|" + "---|" * len(band_names))
        for scheme in SCHEMES + sorted(set(d.scheme) - set(SCHEMES)):
            if scheme not in set(d.scheme):
                out.append(f"| {scheme} | 0 | not run |" + " |" * (1 + len(band_names)))
                continue
            r = per_run.loc[task, scheme]
            cells = [scheme, str(len(r))]
            cells += [mean_sd(r[split].dropna()) if split in r and r[split].notna().any() else "-"
                      for split in ("val", "test")]
            t = d[(d.scheme == scheme) & (d.split == "test")]
            for a, b in bands:
                cells.append(mean_sd(t[(t.length >= a) & (t.length <= b)].groupby("seed").accuracy.mean()))
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def plot(df: pd.DataFrame, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted(df.task.unique())
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.6), squeeze=False, sharey=True)
    for ax, task in zip(axes[0], tasks):
        d = df[df.task == task]
        for scheme in [s for s in SCHEMES if s in set(d.scheme)] + sorted(set(d.scheme) - set(SCHEMES)):
            s = d[d.scheme == scheme].groupby("length").accuracy
            mean, sd, n = s.mean(), s.std(ddof=1).fillna(0), int(d[d.scheme == scheme].seed.nunique())
            ax.plot(mean.index, mean.values, marker=".", label=f"{scheme} (n={n})")
            ax.fill_between(mean.index, (mean - sd).clip(0, 1), (mean + sd).clip(0, 1), alpha=0.2)
        test = d[d.split == "test"].length
        if len(test):
            ax.axvline(test.min() - 0.5, color="grey", linestyle=":", linewidth=1)
        ax.set_title(task)
        ax.set_xlabel("target length (words)")
        ax.set_ylim(-0.03, 1.03)
    axes[0][0].set_ylabel("exact match")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", help="results files or folders (searched recursively for *.h5)")
    parser.add_argument("--plot", help="write accuracy against length to this PNG")
    parser.add_argument("--csv", help="write the per run x split x length table to this CSV")
    args = parser.parse_args()
    paths = []
    for s in args.sources:
        paths += sorted(glob.glob(os.path.join(s, "**", "*.h5"), recursive=True)) if os.path.isdir(s) else [s]
    df = collect(paths)
    if df.empty:
        print("no completed run with /eval/test or /eval/val in " + ", ".join(args.sources), file=sys.stderr)
        return 1
    print("Exact match (hypothesis = reference), mean over the lengths of each split, then mean ± sd "
          "over seeds; the test columns by bands of target length.")
    print(tables(df))
    if args.csv:
        df.to_csv(args.csv, index=False)
    if args.plot:
        plot(df, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
