"""The attention-sinks study's tables and plot from its runs' results files (README.md).

Per run (read through the attnlab package), for each model (a folder of OUT: char, bpe, ...):
- the sink over training: every head's first-token mass on validation rows, which the lm trainer
  measured every 100 steps (/head_scores/training/step_<s>/val_first_token_mass): Gu et al.'s
  share of heads above 0.3, the largest head's mass, and the mean, against the mass uniform causal
  attention gives (the mean over queries i >= 1 of 1 / (i + 1)); and the same on repeated random
  tokens (first_token_mass, runner heads' sequences);
- StreamingLLM's test (measure.sh's `runner eval --text` groups): the mean next-token loss in
  nats over position buckets of rows 8 training lengths long, for full attention within the
  training length (c), full attention over the row, window attention (a), the window recomputed
  afresh for every token (a', StreamingLLM's "sliding window with re-computation") and the window
  with the first k tokens kept (b).
Markdown on stdout (mean ± sd over seeds, then every run), curves as a PNG:

    ~/.cache/attnlab/venv-torch-2.11.0/bin/python experiments/studies/attention_sinks/analyze.py \\
        results/attention_sinks --plot experiments/studies/attention_sinks/sinks.png \\
        > experiments/studies/attention_sinks/results.md
"""
import argparse
import builtins
import functools
import glob
import io
import os
import re
import sys

import numpy as np

import attnlab

THRESHOLD = 0.3  # Gu et al. 2024: a head "has a sink" when its first-token mass exceeds this


def mean_sd(values, fmt="{:.3f}"):
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if len(v) == 0:
        return "–"
    if len(v) == 1:
        return fmt.format(v[0])
    return f"{fmt.format(v.mean())} ± {fmt.format(v.std(ddof=1))}"


def uniform_mass(T):
    """First-token mass of uniform causal attention over T positions: mean_{i=1..T-1} 1 / (i + 1)."""
    return float(np.mean([1.0 / (i + 1) for i in range(1, T)]))


def sink_curve(run):
    """step -> (share of heads above THRESHOLD, largest head, mean) on validation rows, and the
    same three on repeated random tokens."""
    h = run.head_scores
    h = h[h["name"] == "training"]
    out = {}
    for step, g in h.groupby("step"):
        v, r = g["val_first_token_mass"].to_numpy(), g["first_token_mass"].to_numpy()
        out[int(step)] = ((v > THRESHOLD).mean(), v.max(), v.mean(), (r > THRESHOLD).mean(), r.max(), r.mean())
    return out


def layer_means(run):
    """The final step's validation first-token mass, mean over each layer's heads."""
    h = run.head_scores
    h = h[h["name"] == "training"]
    last = h[h["step"] == h["step"].max()]
    return last.groupby("layer")["val_first_token_mass"].mean().to_dict()


def streaming(run, block):
    """kind -> (mean loss over positions [0, block), [block, 2 block), [2 block, end), and overall)."""
    rows = {}
    ev = run.evals
    for name, e in ev.iterrows():
        if str(e.get("kind", "")) != "language_model":
            continue
        loss = run.array(f"eval/{name}/position_loss").astype(float)
        n = run.array(f"eval/{name}/position_tokens").astype(float)
        window, sinks, context = int(e["window"]), int(e["sinks"]), int(e["context"])
        recompute = e.get("recompute") == 1  # NaN in evaluations made before --recompute existed

        def bucket(lo, hi):
            hi = min(hi, len(loss))
            if lo >= hi:
                return None
            return float((loss[lo:hi] * n[lo:hi]).sum() / n[lo:hi].sum())

        if window == 0 and context == block:
            kind = "(c) full attention, rows of the training length"
        elif window == 0:
            kind = f"full attention over rows of {context}"
        elif recompute:
            kind = f"(a') window of {window}, recomputed for every token"
        elif sinks == 0:
            kind = f"(a) window of {window}"
        else:
            kind = f"(b) {sinks} sink{'s' if sinks > 1 else ''} + window of {window}"
        rows[kind] = (bucket(0, block), bucket(block, 2 * block), bucket(2 * block, context), e["loss"],
                      (window, sinks, context))
    return rows


def order(kind):
    rank = {"(c)": 0, "full": 1, "(a)": 2, "(a')": 3}
    return (next((v for k, v in sorted(rank.items(), key=lambda x: -len(x[0])) if kind.startswith(k)), 4), kind)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="the study's results folder (results/attention_sinks)")
    p.add_argument("--plot", help="write the curves to this PNG")
    a = p.parse_args()
    models = {}
    for folder in sorted(glob.glob(os.path.join(a.out, "*/"))):
        files = sorted(glob.glob(os.path.join(folder, "*.h5")))
        runs = [attnlab.load(f) for f in files]
        runs = [r for r in runs if r.status == "completed"]
        if runs:
            models[os.path.basename(folder.rstrip("/"))] = runs
    if not models:
        sys.exit(f"{a.out}: no completed runs under its folders")

    body = io.StringIO()
    sink_rows, stream_rows = [], []
    curves = {}
    for model, runs in models.items():
        print = functools.partial(builtins.print, file=body)
        cfg = runs[0].config
        block = int(cfg["dataset"]["block_size"])
        tok = cfg["dataset"].get("tokenizer", "chars")
        tok = tok if isinstance(tok, str) else f"{tok.get('plugin')} {tok.get('model_type', '')} {tok.get('vocab_size', '')}"
        scorer = cfg["model"].get("attention", {}).get("scorer", "dot_product")
        scorer = scorer if isinstance(scorer, str) else scorer.get("plugin")
        seeds = [int(r.config.get("seed", 0)) for r in runs]
        print(f"## {model}: {tok}, {block}-token blocks, {cfg['model']['num_blks']} layers x "
              f"{cfg['model']['num_heads']} heads, {scorer}; seeds {', '.join(map(str, seeds))}\n")
        val = [r.final().get("val/loss") for r in runs]
        print(f"Final val loss {mean_sd(val)} nats. Uniform causal attention's first-token mass over "
              f"{block} positions: {uniform_mass(block):.3f}.\n")
        per_run = [sink_curve(r) for r in runs]
        curves[model] = (per_run, block)
        steps = sorted(set.intersection(*[set(c) for c in per_run]))
        shown = [s for s in steps if s in (0, 100, 200, 500, 1000, 1500) or s == steps[-1]]
        end = max(steps)
        sink_rows.append(f"| {model} | {len(runs)} | {mean_sd(val)} | {mean_sd([c[0][1] for c in per_run])} | "
                         f"{mean_sd([c[end][1] for c in per_run])} | {mean_sd([c[end][2] for c in per_run])} | "
                         f"{mean_sd([c[end][0] for c in per_run])} |")
        print("### The sink over training (first-token mass per head)\n")
        print("| step | heads > 0.3 (val rows) | largest head (val rows) | mean (val rows) "
              "| heads > 0.3 (repeated tokens) | largest head (repeated tokens) |")
        print("|---:|---:|---:|---:|---:|---:|")
        for s in shown:
            col = lambda i: mean_sd([c[s][i] for c in per_run])
            print(f"| {s} | {col(0)} | {col(1)} | {col(2)} | {col(3)} | {col(4)} |")
        print()
        layers = [layer_means(r) for r in runs]
        print("Final mean first-token mass on validation rows per layer: " + ", ".join(
            f"layer {l}: {mean_sd([x[l] for x in layers])}" for l in sorted(layers[0])) + ".\n")

        print("### StreamingLLM: loss (nats) by position, rows of 8 training lengths\n")
        print(f"| attention | positions 0–{block - 1} | {block}–{2 * block - 1} | {2 * block}–{8 * block - 1} | all |")
        print("|---|---:|---:|---:|---:|")
        tables = [streaming(r, block) for r in runs]
        kinds = sorted(set.intersection(*[set(t) for t in tables]), key=order)
        for kind in kinds:
            cells = [mean_sd([t[kind][i] for t in tables]) for i in range(4)]
            print(f"| {kind} | " + " | ".join(cells) + " |")
        def late(kind):
            return mean_sd([t[kind][2] if t[kind][2] is not None else t[kind][3] for t in tables]) if kind in kinds else "–"
        def first(prefix):
            return late(next(k for k in kinds if k.startswith(prefix))) if any(k.startswith(prefix) for k in kinds) else "–"
        cells = [first(p) for p in ("(c)", "full", "(a)", "(a')")] + [first(f"(b) {k} sink") for k in (1, 2, 4)]
        stream_rows.append(f"| {model} | " + " | ".join(cells) + " |")
        print()
        print(f"Every run (loss over positions {2 * block}–{8 * block - 1}, after the first tokens left the window; "
              "(c): over all its positions):\n")
        print("| run | seed | val loss | heads > 0.3 at the end | largest head | " +
              " | ".join(k.split(",")[0] for k in kinds) + " |")
        print("|---|---:|---:|---:|---:|" + "---:|" * len(kinds))
        for r, c, t in zip(runs, per_run, tables):
            last = c[max(c)]
            print(f"| {os.path.basename(r.path)} | {r.config.get('seed', 0)} | {r.final().get('val/loss', float('nan')):.4f} "
                  f"| {last[0]:.3f} | {last[1]:.3f} | " + " | ".join(
                      f"{t[k][2] if t[k][2] is not None else t[k][3]:.4f}" for k in kinds) + " |")
        print()

    print = builtins.print
    print("# Attention sinks: results\n")
    print(f"Made by analyze.py from the results files under `{a.out}` (mean ± sd over seeds).\n")
    print("## Summary\n")
    print("The first-token mass on validation rows (Gu et al.'s sink measure), per head:\n")
    print("| model | seeds | final val loss | largest head, step 0 | largest head, end | mean head, end | heads > 0.3, end |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print("\n".join(sink_rows) + "\n")
    print("StreamingLLM's test: mean loss (nats) over positions 2T to 8T - 1 of rows 8T long (T: the training "
          "length), after the window dropped the first tokens; (c) over all positions of rows of T:\n")
    print("| model | (c) full attention, rows of T | full attention, rows of 8T | (a) window of T "
          "| (a') window of T, recomputed | (b) 1 sink + window of T - 1 | (b) 2 sinks + T - 2 | (b) 4 sinks + T - 4 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(stream_rows) + "\n")
    print(body.getvalue(), end="")

    if a.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 1 + len(models), figsize=(5 * (1 + len(models)), 4))
        ax = axes[0]
        for model, (per_run, block) in curves.items():
            steps = sorted(set.intersection(*[set(c) for c in per_run]))
            top = np.array([[c[s][1] for s in steps] for c in per_run])
            ax.plot(steps, top.mean(0), label=f"{model}: largest head")
            ax.fill_between(steps, top.min(0), top.max(0), alpha=0.2)
            ax.axhline(uniform_mass(block), ls=":", lw=1, color=ax.lines[-1].get_color())
        ax.axhline(THRESHOLD, ls="--", color="grey", lw=1, label="Gu et al.'s 0.3")
        ax.set_xlabel("step")
        ax.set_ylabel("first-token mass (val rows)")
        ax.set_title("The sink over training (dotted: uniform)")
        ax.legend(fontsize=8)
        for ax, (model, runs) in zip(axes[1:], models.items()):
            block = int(runs[0].config["dataset"]["block_size"])
            names = {}
            for name, e in runs[0].evals.iterrows():
                if int(e["context"]) == 8 * block:
                    names[name] = ("dense" if int(e["window"]) == 0 else
                               f"window {int(e['window'])} recomputed" if e.get("recompute") == 1 else
                               f"window {int(e['window'])}" + (f" + {int(e['sinks'])} sinks" if int(e["sinks"]) else ""))
            for name, label in sorted(names.items(), key=lambda x: x[1]):
                curves_ = np.array([r.array(f"eval/{name}/position_loss") for r in runs if name in r.evals.index])
                xs = np.arange(curves_.shape[1])
                # 32-position means: one position of a few rows is noisy.
                k = 32
                ys = curves_.mean(0)[: len(xs) // k * k].reshape(-1, k).mean(1)
                ax.plot(xs[: len(xs) // k * k].reshape(-1, k).mean(1), ys, label=label)
            ax.axvline(block, ls=":", color="grey", lw=1)
            ax.set_ylim(top=min(ax.get_ylim()[1], 4.0))
            ax.set_xlabel("position in the row")
            ax.set_ylabel("loss (nats), seed mean")
            ax.set_title(f"{model}: StreamingLLM (dotted: training length)")
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(a.plot, dpi=110)


if __name__ == "__main__":
    main()
