"""Many runs as one table: a sweep folder, any folder of results files, or a list of files.

    runs = attnlab.runs("results/norm-sweep")
    runs.groupby("model.encoder.norm")["val/loss"].agg(["mean", "std"])
    runs.differing                       # the config keys that differ between the runs
    runs.histories("train/loss")         # every run's curve, tidy, with the differing keys
    runs.run(0)                          # row 0 as an attnlab.Run

One row per run: path, name, experiment, status, started, wall_seconds, num_parameters, the
flattened config (one column per key, as `runner compare` flattens it), each series' final value
("val/loss") and each registered section's summary columns ("eval/test/bleu"). A sweep folder's
manifest (sweep.json; sweep.yaml from older runners) adds the runs it lists that have no file yet (pending, failed before
writing) and its own columns: sweep_status, exit_code, attempts, seconds.

A file that cannot be read (damaged, truncated, not a results file) is a row too: status
"unreadable" and the one-line reason in the `error` column, with a warning; the other runs are all
there. `strict=True` raises the first such file's ResultsError instead.
"""
from __future__ import annotations

import glob
import html
import os
import warnings

import pandas as pd

from . import _check, _config
from .errors import ResultsError
from .results import Run, flatten

__all__ = ["Runs", "runs"]

# Keys that always differ between experiments or machines, left out of `differing` (as in
# runner compare).
_ALWAYS_DIFFERENT = {"experiment", "description", "results.path", "data_dir"}
_RUN_COLUMNS = ["path", "name", "experiment", "status", "error", "started", "wall_seconds", "num_parameters"]
_SWEEP_COLUMNS = ("sweep_status", "exit_code", "attempts", "seconds")


class Runs(pd.DataFrame):
    """A pandas DataFrame with a row per run, plus the folder it came from (`path`), the sweep's
    manifest when there is one (`manifest`) and the keys that differ between the runs
    (`differing`, worked out from the rows there are: a filtered table's own)."""

    _metadata = ["path", "manifest"]

    @property
    def differing(self) -> list[str]:
        return _differing(self)

    @property
    def _constructor(self):
        return Runs

    @property
    def config_keys(self) -> list[str]:
        """The config columns (every column that is not a run attribute, metric or section)."""
        return [c for c in self.columns if c not in _RUN_COLUMNS and "/" not in c and c not in _SWEEP_COLUMNS]

    def run(self, row) -> Run:
        """The run of one row (a position, or the row's name) as an attnlab.Run."""
        path = self["path"].iloc[row] if isinstance(row, int) else self.loc[row, "path"]
        if not isinstance(path, str) or not os.path.exists(path):
            raise ResultsError(f"run {row} has no results file yet ({path})")
        return Run(path)  # an unreadable file raises its ResultsError here

    def histories(self, series: str) -> pd.DataFrame:
        """Every run's series, tidy: name, epoch (or step), value, and the differing config keys,
        for plotting curves by group (e.g. mean and spread per norm)."""
        frames = []
        keys = self.differing
        unreadable = self["status"] == "unreadable" if "status" in self.columns else [False] * len(self)
        for i in range(len(self)):
            path = self["path"].iloc[i]
            if not isinstance(path, str) or not os.path.exists(path) or unreadable[i]:
                continue
            h = Run(path).history(series)
            frame = pd.DataFrame({"name": self["name"].iloc[i], h.index.name: h.index, "value": h.to_numpy()})
            for k in keys:
                frame[k] = self[k].iloc[i]
            frames.append(frame)
        if not frames:
            raise ResultsError(f"no run here has the series '{series}'")
        return pd.concat(frames, ignore_index=True)

    def _repr_html_(self) -> str:
        keys = [k for k in self.differing if k in self.columns]
        metrics = [c for c in self.columns if "/" in c and not c.startswith(("epoch/",))]
        shown = [c for c in ["name", "status", "error"] + keys + metrics + ["wall_seconds"] if c in self.columns]
        head = f"<b>{len(self)} runs</b>" + (f" in {html.escape(str(self.path))}" if getattr(self, "path", None) else "")
        return head + pd.DataFrame(self[shown]).to_html(index=False, float_format=lambda v: f"{v:.4g}", na_rep="")


def _hashable(v):
    """Lists and mappings as text, so that every config column can be grouped by."""
    if isinstance(v, list):
        return "[" + ", ".join(str(_hashable(x)) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_hashable(x)}" for k, x in v.items()) + "}"
    return v


def _row(run: Run) -> dict:
    row = run.summary()
    row["name"] = os.path.splitext(os.path.basename(run.path))[0]
    for k, v in flatten(run.config).items():
        row.setdefault(k, _hashable(v))
    return row


def _unreadable_row(path: str, error: ResultsError) -> dict:
    return {"path": path, "name": os.path.splitext(os.path.basename(path))[0], "status": "unreadable",
            "error": str(error)}


def runs(source, *, pattern: str = "*.h5", strict: bool = False) -> Runs:
    """A Runs table of a folder (a sweep folder, or any folder: its `pattern` files, not its
    subfolders), one results file, or a list of files and folders. A file that cannot be read is a
    row with status "unreadable" and its reason in `error` (strict=True: its ResultsError)."""
    if isinstance(source, (str, os.PathLike)):
        sources = [source]
    elif isinstance(source, (list, tuple)) and all(isinstance(s, (str, os.PathLike)) for s in source):
        sources = list(source)
    else:
        raise TypeError(f"source must be a folder or results file (str or os.PathLike), or a list of them; "
                        f"got {type(source).__name__} {source!r}")
    paths: list[str] = []
    manifests: dict[str, dict] = {}
    folder = None
    for s in sources:
        s = os.fspath(s)
        if os.path.isdir(s):
            folder = s if len(sources) == 1 else None
            if os.path.exists(os.path.join(s, "sweep.yaml")) or os.path.exists(os.path.join(s, "sweep.json")):
                manifests[s] = _read_manifest(s)
            found = sorted(glob.glob(os.path.join(glob.escape(s), pattern)))
            paths += found
            if not found and s not in manifests:
                raise ResultsError(f"{s} holds no results files ({pattern}) and no sweep manifest (sweep.yaml)")
        elif os.path.exists(s):
            paths.append(s)
        else:
            raise ResultsError(f"not an attnlab results file: {s} (no such file)")
    # One checking process for the whole folder, not one per file.
    if paths:
        _check.check(paths)
    rows = []
    for p in paths:
        try:
            rows.append(_row(Run(p)))
        except ResultsError as e:
            if strict:
                raise
            rows.append(_unreadable_row(p, e))
    bad = [r for r in rows if r.get("status") == "unreadable"]
    if bad:
        warnings.warn(f"{len(bad)} of {len(paths)} results files could not be read (status 'unreadable'; "
                      f"the reason is in the 'error' column): {', '.join(r['path'] for r in bad[:3])}"
                      f"{', ...' if len(bad) > 3 else ''}", stacklevel=2)
    by_path = {os.path.realpath(r["path"]): r for r in rows}
    for dirname, manifest in manifests.items():
        for entry in manifest.get("runs", []) or []:
            results = entry.get("results")
            path = os.path.join(dirname, results) if results else None
            row = by_path.get(os.path.realpath(path)) if path else None
            if row is None:
                # A run the sweep lists with no file yet: its config is the sweep's overrides.
                row = {"path": path, "name": entry.get("name"), "status": entry.get("status")}
                for o in entry.get("overrides", []) or []:
                    k, _, v = str(o).partition("=")
                    row[k] = _hashable(_config.scalar(v))
                rows.append(row)
            row["sweep_status"] = entry.get("status")
            for k in ("exit_code", "attempts", "seconds"):
                if k in entry:
                    row[k] = entry[k]
    table = Runs(pd.DataFrame(rows))
    front = [c for c in _RUN_COLUMNS if c in table.columns]
    table = Runs(table[front + [c for c in table.columns if c not in front]])
    table.path = folder
    table.manifest = manifests.get(folder) if folder else None
    return table


def _differing(table: pd.DataFrame) -> list[str]:
    out = []
    for c in table.columns:
        if c in _RUN_COLUMNS or c in _ALWAYS_DIFFERENT or "/" in c or c in _SWEEP_COLUMNS:
            continue
        values = table[c].map(lambda v: "<absent>" if v is None or (isinstance(v, float) and v != v) else str(v))
        if values.nunique() > 1:
            out.append(c)
    return sorted(out)


def _read_manifest(folder: str) -> dict:
    try:
        manifest = _config.read_manifest(folder)
    except _config.ConfigFormatError as e:
        raise ResultsError(f"sweep manifest {e}") from None
    if not isinstance(manifest, dict) or "runs" not in manifest:
        raise ResultsError(f"{os.path.join(folder, 'sweep.yaml')} is not a sweep manifest (no 'runs' list)")
    return manifest
