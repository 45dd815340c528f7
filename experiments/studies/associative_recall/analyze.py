"""The associative-recall study's tables and plot from its runs' results files (README.md).

Per run (read through the attnlab package): the mixer (the scorer and the positions of its stored
config), the sequence length and pairs, the width, the seed, the status, the steps, the final
validation accuracy (the argmax at the queries, the only scored positions; 512 rows, the whole
val split) and loss, the best accuracy of any report, the wall time and the runner's commit.
Then mean ± sd over seeds per cell (mixer x width x length), the accuracy grid as Markdown (one
column per length), each mixer's recurrent state per layer, the share of queries a window of 8
(and 2 x 8, two layers) can reach, longer training and the plateau checks (plateau_checks/: a
learning rate or the non-query tokens changed), on stdout; the plot (accuracy against width, one panel per
length, a line per mixer, Zoology's Figure 2) as a PNG:

    ~/.cache/attnlab/venv-torch-2.11.0/bin/python experiments/studies/associative_recall/analyze.py \
        results/associative_recall --plot experiments/studies/associative_recall/accuracy.png \
        > experiments/studies/associative_recall/results.md
"""
import argparse
import glob
import os
import re
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
import attnlab  # noqa: E402

MIXERS = {  # (scorer, positions) -> label, in the tables' order
    ("dot_product", "learned"): "softmax attention",
    ("linear", "learned"): "linear attention",
    ("sliding_window", "learned"): "sliding window (8)",
    ("alibi", "none"): "softmax attention, ALiBi",
}
WINDOW = 8


def mixer_name(model: dict) -> str:
    """The mixer from the stored config: the scorer plugin (a name or {plugin: ...}) and the positions."""
    scorer = model["attention"]["scorer"]
    plugin = scorer["plugin"] if isinstance(scorer, dict) else str(scorer)
    if plugin == "sliding_window" and int(scorer.get("window", 8)) != WINDOW:
        return f"sliding window ({scorer['window']})"
    positions = str(model.get("positional_encoding"))
    if positions == "auto":  # the gpt model's rule: none for a scorer that encodes positions itself
        positions = "none" if plugin in ("alibi", "rope", "t5_bias", "shaw") else "sinusoidal"
    name = MIXERS.get((plugin, positions), f"{plugin}, {positions} positions")
    return name + (", 1 head" if int(model.get("num_heads", 4)) == 1 else "")


def analyse(path: str) -> dict:
    run = attnlab.load(path)
    cfg = run.config
    final = run.final() if run.series() else {}
    acc = run.history("val/accuracy") if "val/accuracy" in run.series() else pd.Series(dtype=float)
    m, d = cfg["model"], cfg["dataset"]
    folder = os.path.basename(os.path.dirname(os.path.dirname(path)))  # L<length>_w<width>[_steps<S>][_rows<R>]
    setting = re.sub(r"^L\d+_w\d+", "", folder)
    return {"file": os.path.relpath(path), "setting": setting, "mixer": mixer_name(cfg["model"]),
            "length": int(d["seq_len"]), "pairs": int(d["num_kv_pairs"]), "width": int(m["num_hiddens"]),
            "heads": int(m["num_heads"]), "seed": int(cfg["seed"]), "lr": float(cfg["trainer"]["lr"]),
            "rows per step": int(d["batch_size"]),
            "non-query tokens": "random" if d.get("random_non_queries", True) else "zeros (token 0)",
            "status": run.status, "max steps": int(cfg["trainer"]["max_steps"]), "steps": final.get("train/step", np.nan),
            "val accuracy": final.get("val/accuracy", np.nan), "best val accuracy": acc.max() if len(acc) else np.nan,
            "val loss": final.get("val/loss", np.nan), "wall (s)": run.attrs.get("wall_seconds", np.nan),
            "commit": run.attrs.get("git_commit", "?"),
            "runner": str(run.attrs.get("command_line", "?")).split(" ")[0]}


def mean_sd(values, digits: int = 3) -> str:
    v = pd.to_numeric(pd.Series(values), errors="coerce").dropna()
    if v.empty:
        return "-"
    return f"{v.mean():.{digits}f} ± {v.std(ddof=1):.{digits}f}" if len(v) > 1 else f"{v.iloc[0]:.{digits}f} (1 seed)"


def state_size(mixer: str, width: int, heads: int, length: int) -> str:
    """What a layer keeps of the past to answer the next query: linear attention's state
    (S: heads x (width/heads)^2, z: width), softmax attention's keys and values (2 x width per
    token so far, at the row's end), the window's keys and values (2 x width x (window + 1))."""
    if mixer.startswith("linear"):
        return f"{heads * (width // heads) ** 2 + width:,}"
    if mixer.startswith("sliding"):
        return f"{2 * width * (WINDOW + 1):,}"
    return f"{2 * width * length:,}"


def reach(length: int, pairs: int, rows: int = 20000, seed: int = 0) -> tuple[float, float]:
    """Zoology's query placement (HazyResearch/zoology, _mqar; plugins/dataset/lm_tasks/tasks.hpp):
    the share of queries whose key is at most WINDOW, and at most 2 WINDOW, positions back."""
    rng = np.random.default_rng(seed)
    n = (length - 2 * pairs) // 2
    i = np.arange(1, n + 1)
    p = 0.01 * i ** (0.01 - 1)
    p /= p.sum()
    d = np.concatenate([2 * pairs + 2 * rng.choice(n, pairs, replace=False, p=p) - 2 * np.arange(pairs)
                        for _ in range(rows)])
    return float((d <= WINDOW).mean()), float((d <= 2 * WINDOW).mean()), float(np.median(d))


def plot(grids: list, out: str):
    """grids: [(title, cells)], a row of panels (one per length) each."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    lengths = sorted(set().union(*[set(c["length"].unique()) for _, c in grids]))
    widths = sorted(set().union(*[set(c["width"].unique()) for _, c in grids]))
    fig, axes = plt.subplots(len(grids), len(lengths), figsize=(4.2 * max(len(lengths), 3), 4.3 * len(grids) + 0.8),
                             sharey=True, squeeze=False)
    for row, (title, cells) in enumerate(grids):
        for ax, length in zip(axes[row], lengths):
            at = cells[cells["length"] == length]
            for k, mixer in enumerate(MIXERS.values()):
                g = at[at["mixer"] == mixer].sort_values("width")
                if g.empty:
                    continue
                ax.errorbar(g["width"], g["mean"], yerr=g["sd"].fillna(0), marker="o", capsize=3, color=f"C{k}",
                            label=mixer)
                for w, accs in zip(g["width"], g["values"]):
                    ax.scatter([w] * len(accs), accs, s=8, color=f"C{k}", alpha=0.5)
            pairs = length // 16
            one, two, _ = reach(length, pairs)
            window = list(MIXERS.values()).index("sliding window (8)")
            ax.axhline(one, ls=":", lw=1, color=f"C{window}", label=f"share of keys within {WINDOW} of their query")
            ax.axhline(two, ls="--", lw=1, color=f"C{window}", label=f"share within {2 * WINDOW} (two windows)")
            ax.axhline(1 / pairs, ls="-", lw=0.8, color="grey", label="1 / pairs (one of the row's values)")
            ax.set_title(f"{title}\nlength {length}, {pairs} pairs", fontsize=9)
            ax.set_xscale("log", base=2)
            ax.set_xlim(widths[0] / 1.25, widths[-1] * 1.25)
            missing = [w for w in widths if w not in set(at["width"])]
            if missing:
                ax.text(0.97, 0.5, "not run: width " + ", ".join(map(str, missing)), transform=ax.transAxes,
                        ha="right", fontsize=8, color="grey")
            ax.set_xticks(widths)
            ax.set_xticklabels([str(w) for w in widths])
            ax.set_xlabel("model width")
            ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
        axes[row][0].set_ylabel("MQAR accuracy (val, at the queries)")
    handles, labels = {}, {}
    for ax in axes.flat:  # every mixer that appears anywhere, once
        for h, l in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(l, h)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle("MQAR, 2 attention-only layers: val accuracy, mean ± sd over seeds (dots: seeds)", fontsize=10)
    fig.tight_layout(rect=(0, 0.13 if len(grids) == 1 else 0.07, 1, 1))
    fig.savefig(out, dpi=110)


ORDER = {m: k for k, m in enumerate(MIXERS.values())}


def cells_of(done: pd.DataFrame) -> pd.DataFrame:
    """Mean ± sd over seeds per (mixer, width, length) of completed runs."""
    cells = []
    for (mixer, width, length), g in done.groupby(["mixer", "width", "length"]):
        v = g["val accuracy"].astype(float)
        cells.append({"mixer": mixer, "width": width, "length": length, "pairs": int(g["pairs"].iloc[0]),
                      "heads": int(g["heads"].iloc[0]), "seeds": len(g), "mean": v.mean(),
                      "sd": v.std(ddof=1) if len(v) > 1 else np.nan, "values": list(v),
                      "text": mean_sd(v), "best": mean_sd(g["best val accuracy"]), "loss": mean_sd(g["val loss"]),
                      "wall": g["wall (s)"].mean()})
    cells = pd.DataFrame(cells)
    cells["order"] = cells["mixer"].map(lambda m: ORDER.get(m, len(ORDER)))
    return cells.sort_values(["order", "width", "length"])


def print_grid(cells: pd.DataFrame):
    """The accuracy grid: a row per mixer and width, a column per length."""
    lengths = sorted(cells["length"].unique())
    grid = cells.pivot_table(index=["order", "mixer", "width"], columns="length", values="text", aggfunc="first")
    grid = grid.reset_index().drop(columns="order")
    grid.columns = ["mixer", "width"] + [f"L = {l} ({l // 16} pairs)" for l in lengths]
    print(grid.fillna("not run").to_markdown(index=False))


def print_cells(cells: pd.DataFrame):
    table = pd.DataFrame({
        "mixer": cells["mixer"], "width": cells["width"], "length": cells["length"], "pairs": cells["pairs"],
        "seeds": cells["seeds"], "state per layer (numbers)": [state_size(r.mixer, r.width, r.heads, r.length)
                                                              for r in cells.itertuples()],
        "val accuracy": cells["text"], "best val accuracy (any report)": cells["best"], "val loss": cells["loss"],
        "wall per run (s)": cells["wall"].map(lambda s: f"{s:.0f}")})
    print(table.to_markdown(index=False))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", help="sweep.sh's OUT (its L<length>_w<width>/<mixer>/ folders)")
    p.add_argument("--plot", help="write the accuracy grid's plot to this PNG")
    a = p.parse_args()
    paths = sorted(glob.glob(os.path.join(a.folder, "L*_w*", "*", "*.h5")))
    if not paths:
        sys.exit(f"analyze.py: no results files under {a.folder}/L*_w*/*/")
    rows = pd.DataFrame([analyse(path) for path in paths])
    done = rows[rows["status"] == "completed"]
    print(f"{len(done)} of {len(rows)} runs completed; wall time of the runs, summed: {rows['wall (s)'].sum() / 60:.1f} "
          f"min; runner: {', '.join(sorted(rows['runner'].unique()))}; the runs' git_commit attribute: "
          f"{', '.join(f'{c} ({n} runs)' for c, n in rows['commit'].value_counts().sort_index().items())} (a runner "
          f"built at 1cbfafc or later records the commit it was built from; an older one recorded the HEAD of the "
          f"folder a run started in: README).\n")
    main_steps = 1000  # the grid's budget (base.yaml)
    settings = sorted(done["setting"].unique())
    # Longer training, completed or stopped on the way (the status says which; its last report counts).
    longer = rows[rows["setting"].isin([x for x in rows["setting"].unique() if x and "_rows" not in x])]
    large = [x for x in settings if "_rows" in x]  # Zoology's rows per step (sweep.sh ROWS)
    cells = cells_of(done[done["setting"] == ""])
    lengths = sorted(cells["length"].unique())

    print(f"## Accuracy grid: final val accuracy after {main_steps:,} steps of 4,096 tokens, mean ± sd over seeds\n")
    print_grid(cells)
    print("\n## Every cell\n")
    print_cells(cells)
    grids = [(f"4,096 tokens a step, {main_steps:,} steps", cells)]
    for setting in large:
        big = cells_of(done[done["setting"] == setting])
        at = done[done["setting"] == setting]
        rows_per_step, steps = int(at["rows per step"].iloc[0]), int(at["max steps"].iloc[0])
        print(f"\n## Large batches: {rows_per_step} rows a step (Zoology's), {steps:,} steps "
              f"(folders L<length>_w<width>{setting}), mean ± sd over seeds\n")
        print_grid(big)
        print()
        print_cells(big)
        grids.append((f"{rows_per_step} rows a step, {steps:,} steps", big))

    print(f"\n## What a window of {WINDOW} can reach (Zoology's query placement, 20,000 rows drawn here)\n")
    reachable = []
    for length in lengths:
        pairs = int(cells[cells["length"] == length]["pairs"].iloc[0])
        one, two, median = reach(length, pairs)
        reachable.append({"length": length, "pairs": pairs, "median query-to-key distance": f"{median:.0f}",
                          f"keys within {WINDOW}": f"{one:.3f}", f"keys within {2 * WINDOW} (two layers)": f"{two:.3f}"})
    print(pd.DataFrame(reachable).to_markdown(index=False))

    if not longer.empty:
        print("\n## Longer training\n")
        same = {(r.mixer, r.width, r.length): r.text for r in cells.itertuples()}
        runs = longer.sort_values(["length", "width", "mixer", "seed"]).copy()
        runs[f"val accuracy at {main_steps:,} steps (grid, mean ± sd)"] = [
            same.get((r.mixer, r.width, r.length), "-") for r in runs.itertuples()]
        for c in ("val accuracy", "best val accuracy", "val loss"):
            runs[c] = runs[c].map(lambda v: f"{v:.3f}")
        runs["steps"] = runs["steps"].map(lambda v: f"{v:.0f}")
        print(runs[["mixer", "length", "width", "seed", "status", "steps", "val accuracy", "best val accuracy", "val loss",
                    f"val accuracy at {main_steps:,} steps (grid, mean ± sd)"]].to_markdown(index=False))

    checks = sorted(glob.glob(os.path.join(a.folder, "plateau_checks", "*", "*", "*.h5")))
    if checks:
        print("\n## Plateau checks: one change at a time (length 64, width 64, seed 0, 1,000 steps)\n")
        print("The mixers with learned positions, one change from the grid's setting in each check "
              "(plateau_checks/<check>/<mixer>/; the grid's own cell for comparison).\n")
        c = pd.DataFrame([analyse(path) | {"check": path.split(os.sep)[-3]} for path in checks])
        c["grid cell (lr 3e-3, random, mean ± sd)"] = [
            next((r.text for r in cells.itertuples() if (r.mixer, r.width, r.length) == (m.replace(", 1 head", ""), w, l)),
                 "-")
            for m, w, l in zip(c["mixer"], c["width"], c["length"])]
        c["steps"] = c["steps"].map(lambda v: f"{v:.0f}")
        c = c.sort_values(["check", "mixer", "lr"])
        print(c[["check", "mixer", "heads", "rows per step", "lr", "non-query tokens", "steps", "val accuracy", "best val accuracy", "val loss",
                 "grid cell (lr 3e-3, random, mean ± sd)"]].to_markdown(index=False, floatfmt=".3f"))

    old = sorted(glob.glob(os.path.join(a.folder, "superseded_sinusoidal", "L*_w*", "*", "*.h5")))
    if old:
        print("\n## Superseded: linear and window mixers with sinusoidal positions (positional_encoding: auto)\n")
        print("The first launch, stopped after these runs (README); every later run has learned positions.\n")
        o = pd.DataFrame([analyse(path) for path in old])
        o["steps"] = o["steps"].map(lambda v: f"{v:.0f}")
        o = o[o["status"] == "completed"]
        print(o[["file", "mixer", "length", "width", "seed", "steps", "val loss", "val accuracy"]]
              .to_markdown(index=False, floatfmt=".3f"))

    print("\n## Every run\n")
    show = rows.drop(columns=["runner", "non-query tokens"]).copy()
    for c in ("val accuracy", "best val accuracy", "val loss"):
        show[c] = show[c].map(lambda v: "-" if pd.isna(v) else f"{v:.3f}")
    for c in ("steps", "wall (s)"):
        show[c] = show[c].map(lambda v: "-" if pd.isna(v) else f"{v:.0f}")
    print(show.to_markdown(index=False))
    if a.plot:
        plot(grids, a.plot)


if __name__ == "__main__":
    main()
