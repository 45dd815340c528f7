#!/usr/bin/env python3
"""Check `runner compare DIR --group-by KEY --format csv` against numpy and scipy on the same files.

    python tests/python/group_check.py --runner build/bin/runner --source-dir .

Runs a small real sweep (tiny corners, model.norm first/last x seeds 0-2, 3 epochs, two jobs),
adds an /eval/test score to each file with h5py (corner runs translate nothing; synthetic sacreBLEU
and d2l scores, so the evaluation rows are checked too), then reads every file itself and
computes, per group, n, mean, sample sd (ddof=1), min and max of each metric's final and best
value, of the scores and of each head's mean attention entropy and largest weight; and for the two
groups Welch's t-test (scipy.stats.ttest_ind(equal_var=False): t, df, two-sided p) and Hedges' g
(numpy, pooled sd, J = 1 - 3 / (4 (na + nb) - 9)). Every row the runner prints must match one
computed here within a relative 1e-9, and the other way round. Prints OK and exits 0, or the
mismatches and exits 1. Run by ctest as python.group_check with the venv's python.
"""
import argparse
import csv
import io
import math
import os
import subprocess
import sys
import tempfile
import warnings

import h5py
import numpy as np
import yaml
from scipy import stats

HIGHER = ("bleu", "acc", "per_s", "f1", "precision", "recall")  # runs.cpp higher_is_better
REL = 1e-9


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def add_eval(path, seed_value):
    """A synthetic, deterministic /eval/test in the layout runner eval writes (docs/RESULTS.md)."""
    rng = np.random.default_rng(seed_value)
    with h5py.File(path, "r+") as f:
        g = f.require_group("eval").create_group("test")
        g.create_dataset("hypotheses", data=np.array(["a", "b"], dtype=h5py.string_dtype()))
        g.attrs["bleu"] = float(rng.uniform(20, 30))
        g.attrs["d2l_mean_bleu"] = float(rng.uniform(0.4, 0.9))
        for k, v in (("split", "test"), ("decoding", "greedy"), ("checkpoint", "best")):
            g.attrs[k] = v
        g.attrs["beam_size"] = 1.0
        g.attrs["sentences"] = 2.0


def quantities(path):
    """(section, quantity, value) -> number for one results file, as compare defines them."""
    out = {}
    with h5py.File(path, "r") as f:
        config = yaml.safe_load(f["config"][()].decode() if isinstance(f["config"][()], bytes) else f["config"][()])
        for group in f["metrics"]:
            for name in f["metrics"][group]:
                metric = f"{group}/{name}"
                if group == "epoch" or name == "seconds":
                    continue
                v = np.asarray(f["metrics"][group][name][:], dtype=np.float64)
                v = v[np.isfinite(v)]
                if v.size == 0:
                    continue
                higher = any(w in metric for w in HIGHER)
                out[("metric", metric, "final")] = v[-1]
                out[("metric", metric, "best (max)" if higher else "best (min)")] = v.max() if higher else v.min()
        for name, g in f.get("eval", {}).items():
            out[("eval", name, "sacrebleu")] = float(g.attrs["bleu"])
            out[("eval", name, "d2l_mean_bleu")] = float(g.attrs["d2l_mean_bleu"])
        heads = {}
        for sample in f.get("attention", {}).values():
            for module, ds in sample.items():
                w = np.asarray(ds[:], dtype=np.float64)  # [layers, heads, queries, keys]
                entropy = -(w * np.log(np.clip(w, 1e-30, None))).sum(-1).mean(-1)
                peak = w.max(axis=(2, 3))
                for l in range(w.shape[0]):
                    for h in range(w.shape[1]):
                        e = heads.setdefault((module, l, h), [0.0, 0.0, 0])
                        e[0] += entropy[l, h]
                        e[1] = max(e[1], peak[l, h])
                        e[2] += 1
        for (module, l, h), (e, m, n) in heads.items():
            q = f"{module} layer {l + 1} head {h + 1}"
            out[("attention", q, "entropy")] = e / n
            out[("attention", q, "max_weight")] = m
    return config, out


def close(a, b):
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return abs(a - b) <= REL * abs(b) + 1e-300


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", required=True)
    ap.add_argument("--source-dir", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="attnlab-group-check-")
    sweep = os.path.join(tmp, "sweep")
    run([a.runner, "sweep", "experiments/tests/tiny_corners.yaml", "model.norm=first,last", "seed=0,1,2",
         "--jobs", "2", "-o", sweep], cwd=a.source_dir)
    files = sorted(os.path.join(sweep, f) for f in os.listdir(sweep) if f.endswith(".h5"))
    for i, path in enumerate(files):
        add_eval(path, i)
    text = run([a.runner, "compare", sweep, "--group-by", "model.norm", "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(text)))

    groups = {}
    for path in files:
        config, q = quantities(path)
        groups.setdefault(str(config["model"]["norm"]), []).append(q)
    names = sorted(groups)
    assert names == ["first", "last"], names
    warnings.simplefilter("ignore", RuntimeWarning)  # scipy on heads whose largest weight is 1 in every run
    keys = set.intersection(*(set(q) for qs in groups.values() for q in qs))
    errors = []
    expected = {}
    for key in keys:
        samples = [np.array([q[key] for q in groups[n]]) for n in names]
        t = stats.ttest_ind(samples[0], samples[1], equal_var=False)
        na, nb = len(samples[0]), len(samples[1])
        pooled = math.sqrt(((na - 1) * samples[0].var(ddof=1) + (nb - 1) * samples[1].var(ddof=1)) / (na + nb - 2))
        g = (samples[0].mean() - samples[1].mean()) / pooled * (1 - 3 / (4 * (na + nb) - 9)) if pooled > 0 else math.nan
        p = float(t.pvalue) if np.isfinite(t.statistic) else math.nan
        for n, s in zip(names, samples):
            expected[(n,) + key] = {"n": len(s), "mean": s.mean(), "sd": s.std(ddof=1), "min": s.min(), "max": s.max(),
                                    "t": float(t.statistic) if p == p else math.nan, "df": float(t.df) if p == p else math.nan,
                                    "p_welch": p, "hedges_g": g}
    seen = set()
    for row in rows:
        k = (row["model.norm"], row["section"], row["quantity"], row["value"])
        seen.add(k)
        if k not in expected:
            errors.append(f"the runner prints {k}, which the files do not give every run")
            continue
        for field, want in expected[k].items():
            got = float(row[field])
            if not close(got, float(want)):
                errors.append(f"{k} {field}: runner {got!r}, numpy/scipy {float(want)!r}")
    for k in sorted(set(expected) - seen):
        errors.append(f"the runner does not print {k}")
    sections = {k[1] for k in expected}
    if sections != {"metric", "eval", "attention"}:
        errors.append(f"expected metric, eval and attention rows, found {sorted(sections)}")
    if errors:
        print("\n".join(errors))
        print(f"group check FAILED: {len(errors)} problem(s) (files in {tmp})")
        return 1
    print(f"OK: {len(rows)} rows ({len(expected) // 2} quantities x 2 groups of 3 runs) equal numpy's and scipy's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
