"""The induction-heads study's tables and plot from its runs' results files (README.md).

Per run (read through the attnlab package): the model (layers, attention-only or with MLPs), the
data (repeated random tokens or text), the final validation loss and accuracy (on repeated tokens:
copy accuracy on the second r), Olsson et al.'s in-context score on text (val loss at position 120
minus position 12), the head scores the lm trainer measured every 100 steps (/head_scores/training):
the top induction and previous-token heads at the end, and the step at which the top induction
score first reached half its final value (the heads "form"), beside the step of the sharpest drop
of the validation loss (the "bump"). Then the causal check (unless --no-ablation): `runner eval
--split val --head-mask` with the k heads of highest final induction score switched off, and with
k heads drawn at random (3 draws, seeded), k = 2: the copy accuracy with each on repeated tokens,
the in-context score on text (from /eval/<name>/position_loss, over 16 positions around 12 and
around 120, since one position of the whole val split is noisy). Markdown on stdout (mean ± sd
over seeds per model, then every run), curves as a PNG:

    ~/.cache/attnlab/venv-torch-2.11.0/bin/python experiments/studies/induction_heads/analyze.py \
        results/induction_heads --runner build/bin/runner \
        --plot experiments/studies/induction_heads/curves.png > experiments/studies/induction_heads/results.md
"""
import argparse
import glob
import os
import random
import subprocess
import sys

import numpy as np
import pandas as pd

import attnlab

FORMED = 0.5  # the heads form when the top induction score first reaches this share of its final value
K = 2         # heads switched off in the causal check


def model_name(cfg: dict) -> str:
    m = cfg["model"]
    layers = int(m.get("num_blks", 1))
    only = str(m.get("attention_only", False)).lower() == "true"
    return f"{layers} layer{'s' if layers > 1 else ''}, " + ("attention only" if only else "with MLPs")


def data_name(cfg: dict) -> str:
    d = cfg["dataset"]
    return "repeated tokens" if d.get("plugin") == "lm_tasks" else f"text ({d.get('source', 'file')})"


def head_curves(run) -> pd.DataFrame:
    """step x (layer, head) induction and previous-token scores over training."""
    h = run.head_scores
    if h.empty or "step" not in h:
        return pd.DataFrame()
    return h[h["name"] == "training"]


def formation_step(training: pd.DataFrame):
    """The first step where the top induction score reaches FORMED x its final value, and that
    final value; (None, final) when it never rises above 0.1."""
    top = training.groupby("step")["induction"].max().sort_index()
    final = float(top.iloc[-1])
    if final < 0.1:
        return None, final
    reached = top[top >= FORMED * final]
    return int(reached.index[0]), final


def bump_step(run):
    """The step (end of the report interval) whose val loss fell the most since the report before."""
    loss = run.history("val/loss")
    steps = run.history("train/step")
    drops = -loss.diff()
    i = drops.idxmax()
    return int(steps.loc[i]) if pd.notna(i) else None


def top_head(training: pd.DataFrame, score: str):
    last = training[training["step"] == training["step"].max()]
    row = last.loc[last[score].idxmax()]
    return int(row["layer"]), int(row["head"]), float(row[score])


def evaluate(runner: str, path: str, heads, name: str, positions) -> tuple[float, float]:
    """`runner eval --split val` with `heads` [(layer, head), ...] (from 1) switched off (none: the
    full model): the accuracy, and the in-context score from the loss at each position when
    `positions` (early, late; from 1) gives them, else NaN: the mean loss of positions late-8 ..
    late+7 minus that of early-8 .. early+7 (clipped to the context)."""
    args = [runner, "eval", path, "--split", "val", "--name", name, "-q"]
    if heads:
        by_layer = {}
        for layer, head in heads:
            by_layer.setdefault(layer, []).append(head)
        args += ["--head-mask", ",".join(f"decoder_self:{l}:[{','.join(map(str, sorted(hs)))}]"
                                         for l, hs in sorted(by_layer.items()))]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    run = attnlab.load(path)
    score = np.nan
    if positions:  # the mean loss over 16 positions around each (one position alone is noisy)
        loss = run.array(f"eval/{name}/position_loss")
        window = lambda p: loss[max(p - 8, 1) - 1:min(p + 8, len(loss))]
        score = float(np.nanmean(window(positions[1])) - np.nanmean(window(positions[0])))
    return float(run.evals.loc[name, "accuracy"]), score


def analyse(path: str, runner: str | None) -> dict:
    run = attnlab.load(path)
    cfg = run.config
    final = run.final()
    training = head_curves(run)
    row = {"file": os.path.relpath(path), "data": data_name(cfg), "model": model_name(cfg), "seed": int(cfg["seed"]),
           "status": run.status, "steps": int(final.get("train/step", np.nan)),
           "val loss": final.get("val/loss"), "val accuracy": final.get("val/accuracy"),
           "in-context score": final.get("val/in_context_score")}
    if not training.empty:
        formed, top = formation_step(training)
        row["top induction"] = top
        row["induction heads form (step)"] = formed
        row["loss bump (step)"] = bump_step(run)
        l, h, s = top_head(training, "induction")
        row["top induction head"] = f"L{l} H{h}"
        l, h, s = top_head(training, "previous_token")
        row["top previous-token head"] = f"L{l} H{h} ({s:.2f})"
    if runner and run.status == "completed" and not training.empty:
        t = cfg["trainer"]
        positions = (int(t["in_context_early"]), int(t["in_context_late"])) if int(t.get("in_context_late", 0)) else None
        # The score this measures: copy accuracy on repeated tokens, the in-context score on text.
        pick = 0 if positions is None else 1
        what = "accuracy" if positions is None else "in-context score"
        row[f"{what}, best checkpoint"] = evaluate(runner, path, [], "full", positions)[pick]
        last = training[training["step"] == training["step"].max()].sort_values("induction", ascending=False)
        top_k = [(int(r.layer), int(r.head)) for r in last.head(K).itertuples()]
        row[f"{what}, top-2 induction heads off"] = evaluate(runner, path, top_k, "top_induction_off", positions)[pick]
        heads = [(int(r.layer), int(r.head)) for r in last.itertuples()]
        rng = random.Random(int(cfg["seed"]))
        draws = [evaluate(runner, path, rng.sample(heads, K), f"random_off_{d}", positions)[pick] for d in range(3)]
        row[f"{what}, 2 random heads off (mean of 3)"] = float(np.mean(draws))
    return row


def mean_sd(values, digits: int = 3) -> str:
    """"mean ± sd (n)" over the values that are numbers; n counts them when some are missing."""
    all_ = pd.to_numeric(pd.Series(values), errors="coerce")
    v = all_.dropna()
    if v.empty:
        return "-"
    text = f"{v.mean():.{digits}f} ± {v.std(ddof=1):.{digits}f}" if len(v) > 1 else f"{v.iloc[0]:.{digits}f}"
    return text if len(v) == len(all_) else f"{text} ({len(v)} of {len(all_)})"


def plot(runs: list[str], out: str):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex="col")
    colours = {}
    for path in runs:
        run = attnlab.load(path)
        cfg = run.config
        col = 0 if data_name(cfg) == "repeated tokens" else 1
        name = model_name(cfg)
        c = colours.setdefault(name, f"C{len(colours)}")
        training = head_curves(run)
        label = name if int(cfg["seed"]) == 0 else None
        if not training.empty:
            top = training.groupby("step")["induction"].max().sort_index()
            axes[0][col].plot(top.index, top.values, color=c, alpha=0.8, label=label)
        steps = run.history("train/step")
        axes[1][col].plot(steps.values, run.history("val/loss").values, color=c, alpha=0.8, label=label)
    for col, title in enumerate(["repeated random tokens", "text (fra-eng English, characters)"]):
        axes[0][col].set_title(title)
        axes[0][col].set_ylabel("top induction score (TL head_detector)")
        axes[1][col].set_ylabel("val loss (nats)")
        axes[1][col].set_xlabel("optimizer step")
        if axes[0][col].get_legend_handles_labels()[0]:
            axes[0][col].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", help="the sweep folders' parent (sweep.sh's OUT-DIR)")
    p.add_argument("--runner", help="the runner, for the causal check (runner eval --head-mask)")
    p.add_argument("--no-ablation", action="store_true", help="skip the causal check")
    p.add_argument("--plot", help="write the curves to this PNG")
    a = p.parse_args()
    runs = sorted(glob.glob(os.path.join(a.folder, "*", "*.h5")))
    if not runs:
        sys.exit(f"analyze.py: no results files under {a.folder}/*/")
    rows = pd.DataFrame([analyse(r, None if a.no_ablation else a.runner) for r in runs])
    done = rows[rows["status"] == "completed"]
    print(f"{len(done)} of {len(rows)} runs completed.\n")
    numeric = ["val loss", "val accuracy", "in-context score", "top induction", "induction heads form (step)",
               "loss bump (step)"] + [f"{what}, {how}" for what in ("accuracy", "in-context score")
                                      for how in ("best checkpoint", "top-2 induction heads off",
                                                  "2 random heads off (mean of 3)")]
    numeric = [c for c in numeric if c in done and done[c].notna().any()]
    table = []
    for (data, model), g in done.groupby(["data", "model"], sort=True):
        line = {"data": data, "model": model, "seeds": len(g)}
        for c in numeric:
            line[c] = mean_sd(g[c], 0 if c.endswith("(step)") else 3)
        table.append(line)
    print("## Mean ± sd over seeds\n")
    print(pd.DataFrame(table).to_markdown(index=False))
    print("\n## Every run\n")
    show = rows.drop(columns=["status"]).copy()
    for c in show.columns:
        if c.endswith("(step)"):
            show[c] = show[c].map(lambda v: "-" if pd.isna(v) else f"{int(v)}")
        elif show[c].dtype == float:
            show[c] = show[c].map(lambda v: "-" if pd.isna(v) else f"{v:.3f}")
    print(show.to_markdown(index=False))
    if a.plot:
        plot([r for r in runs], a.plot)


if __name__ == "__main__":
    main()
