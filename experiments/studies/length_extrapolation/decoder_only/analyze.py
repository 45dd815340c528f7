"""The decoder-only length-extrapolation table and plot (../README.md, "Decoder-only"), in the same
form as the encoder-decoder grid's (../analyze.py, whose tables and plot it reuses): exact match
per target length, mean over the lengths of each split, then mean ± sd over seeds.

A row is exactly right when every label it scores (f(x) and <eos>) is the model's argmax under
teacher forcing, which is when greedy decoding after "x <sep>" reproduces f(x) <eos> exactly: at
each step the prefix greedy decoding has is the true one. `runner eval --split test` stores each
row's scored and correct labels (/eval/test/row_scored, row_correct); the target length (the
words of f(x)) is the scored labels less <eos>. The scheme is read from each run's /config (the
gpt model's positional_encoding and scorer). With the project venv:

    ~/.cache/attnlab/venv-torch-2.11.0/bin/python experiments/studies/length_extrapolation/decoder_only/analyze.py \\
        results/length_extrapolation_decoder_only --plot experiments/studies/length_extrapolation/decoder_only/accuracy.png \\
        > experiments/studies/length_extrapolation/decoder_only/results.md
"""
import argparse
import glob
import os
import sys

import pandas as pd

import attnlab

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import analyze as encoder_decoder  # noqa: E402  (../analyze.py: tables, plot, SCHEMES)

POSITION_SCORERS = encoder_decoder.POSITION_SCORERS


def scheme_of(config: dict) -> str:
    """sinusoidal | learned | nope | rope | t5_bias | alibi, from the gpt model's settings."""
    m = config["model"]
    a = m.get("attention", {})
    scorer = a.get("scorer", "dot_product") if isinstance(a, dict) else str(a)
    scorer = scorer.get("plugin", "dot_product") if isinstance(scorer, dict) else scorer
    pe = m.get("positional_encoding", "auto")
    if pe == "auto":
        pe = "none" if scorer in POSITION_SCORERS else "sinusoidal"
    if scorer == "dot_product":
        return {"none": "nope"}.get(pe, pe)
    return scorer if pe == "none" else f"{scorer}+{pe}"


def collect(paths: list[str]) -> pd.DataFrame:
    """One row per run x split x length: scheme, task, seed, split, length, accuracy, n, path."""
    rows = []
    for path in paths:
        run = attnlab.Run(path)
        if run.status != "completed":
            print(f"left out (status {run.status}): {path}", file=sys.stderr)
            continue
        c = run.config
        have = set(run.evals.index)
        for split in ("val", "test"):
            if split not in have:
                continue
            scored = run.array(f"eval/{split}/row_scored")
            correct = run.array(f"eval/{split}/row_correct")
            length = pd.Series(scored - 1)  # f(x)'s words: the scored labels less <eos>
            exact = pd.Series(scored == correct)
            for n, a in exact.groupby(length):
                rows.append({"scheme": scheme_of(c), "task": c["dataset"]["task"], "seed": c["seed"],
                             "split": split, "length": int(n), "accuracy": float(a.mean()), "n": int(len(a)),
                             "path": path})
    df = pd.DataFrame(rows)
    if not df.empty:
        runs = df.drop_duplicates("path").groupby(["scheme", "task", "seed"]).path.apply(list)
        twice = runs[runs.str.len() > 1]
        if len(twice):
            (scheme, task, seed), p = next(iter(twice.items()))
            raise SystemExit(f"error: {len(p)} runs of scheme {scheme}, task {task}, seed {seed}: {', '.join(p)}")
    return df


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", help="results files or folders (searched recursively for *.h5)")
    parser.add_argument("--plot", help="write exact match against length to this PNG")
    parser.add_argument("--csv", help="write the per run x split x length table to this CSV")
    args = parser.parse_args()
    paths = []
    for s in args.sources:
        paths += sorted(glob.glob(os.path.join(s, "**", "*.h5"), recursive=True)) if os.path.isdir(s) else [s]
    df = collect(paths)
    if df.empty:
        print("no completed run with /eval/test or /eval/val in " + ", ".join(args.sources), file=sys.stderr)
        return 1
    print("Decoder-only GPT: rows exactly right (every scored label the argmax, as greedy decoding "
          "reproduces them), mean over the lengths of each split, then mean ± sd over seeds; the test "
          "columns by bands of target length.")
    print(encoder_decoder.tables(df))
    if args.csv:
        df.to_csv(args.csv, index=False)
    if args.plot:
        encoder_decoder.plot(df, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
