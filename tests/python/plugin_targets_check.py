"""scripts/plugin-targets against what the runner really loads.

scripts/run builds only `runner` and the plugins scripts/plugin-targets selects for an experiment
before it starts the run. Here the real runner runs each experiment below (one short epoch), the
results file's `plugins` attribute says which plugins the run used (kind/name), and every one of
them must be among the selected targets. The main job's selection must also leave most plugins
out (else scripts/run would gain nothing).

    python plugin_targets_check.py --runner build/bin/runner --source-dir .
"""
import argparse
import os
import pathlib
import subprocess
import sys
import tempfile

import h5py

# Experiments that train in a few seconds, with what makes them short.
CASES = [
    ("experiments/transformer_fra_eng.yaml", ["trainer.max_epochs=1"]),
    ("experiments/transformer_fra_eng_d2l017_rope.yaml", ["trainer.max_epochs=1"]),
    ("experiments/bahdanau_fra_eng.yaml", ["trainer.max_epochs=1"]),
    ("experiments/tests/tiny_corners.yaml", []),
    ("experiments/tests/tiny_synthetic.yaml", []),
    ("experiments/nadaraya_watson.yaml", ["trainer.max_epochs=1"]),
]


def selected(source, experiment, overrides):
    out = subprocess.run([sys.executable, str(source / "scripts" / "plugin-targets"), experiment, *overrides],
                         cwd=source, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"scripts/plugin-targets {experiment} exited {out.returncode}: {out.stderr.strip()}")
    return set(out.stdout.split())


def used(runner, source, experiment, overrides, results):
    run = subprocess.run([runner, experiment, *overrides, "--results", str(results)], cwd=source,
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"runner {experiment} {' '.join(overrides)} exited {run.returncode}:\n{run.stderr[-3000:]}")
    with h5py.File(results, "r") as f:
        entries = f.attrs["plugins"]
        entries = [e.decode() if isinstance(e, bytes) else str(e) for e in entries]
    # "kind/name version (path)"
    return {"plugin_" + e.split(" ", 1)[0].replace("/", "_") for e in entries}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", required=True)
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()
    source = pathlib.Path(args.source_dir).resolve()
    all_plugins = {f"plugin_{p.parent.parent.name}_{p.parent.name}" for p in source.glob("plugins/*/*/CMakeLists.txt")}
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (experiment, overrides) in enumerate(CASES):
            sel = selected(source, experiment, overrides)
            if "runner" not in sel:
                failures.append(f"{experiment}: the selection has no `runner`: {sorted(sel)}")
            loaded = used(args.runner, source, experiment, overrides, pathlib.Path(tmp) / f"{i}.h5")
            if not loaded:
                failures.append(f"{experiment}: the results file names no plugin")
            missing = loaded - sel
            if missing:
                failures.append(f"{experiment}: the run used {sorted(missing)}, which scripts/plugin-targets "
                                f"did not select ({sorted(sel)})")
            print(f"{experiment}: used {len(loaded)}, selected {len(sel) - 1} of {len(all_plugins)} plugins")
    main_job = selected(source, "experiments/transformer_fra_eng.yaml", [])
    if len(main_job) - 1 > len(all_plugins) // 2:
        failures.append(f"the main job selects {len(main_job) - 1} of {len(all_plugins)} plugins: "
                        f"scripts/run would build nearly everything first")
    if "plugin_scorer_rope" in main_job:
        failures.append("the main job (dot-product attention) selects the rope scorer")
    # An override that names a plugin selects it.
    with_rope = selected(source, "experiments/transformer_fra_eng.yaml", ["model.encoder.attention.scorer=rope"])
    if "plugin_scorer_rope" not in with_rope:
        failures.append("an override naming the rope scorer does not select it")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(CASES) + 3 - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
