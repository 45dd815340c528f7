"""One run's results file (docs/RESULTS.md), read with h5py after the read check (_check.py).

    run = attnlab.load("results/run.h5")
    run.status, run.config, run.metrics, run.history("val/loss"), run.translations, run.evals
    run.attention(sample="i'm home .").show("encoder_self", layer=2)

Every access opens the file, reads what it needs and closes it again: a live run's writer waits
for readers that keep the file open (docs/RESULTS.md, "Reading a live run"), and a reader that
reopens sees the epochs written since.
"""
from __future__ import annotations

import contextlib
import errno
import html
import os
import time
from typing import Callable

import h5py
import numpy as np
import pandas as pd

from . import _check, _config
from .errors import ResultsError

__all__ = ["Run", "load", "register_section", "flatten"]

STATUSES = ("running", "completed", "interrupted", "failed", "diverged")


def _text(value) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray) and value.shape == ():
        return _text(value[()])
    return str(value)


def _attr(value):
    """An HDF5 attribute as plain Python: str, int, float, or a list of them."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "OSU":
            return [_text(v) for v in value.tolist()]
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _strings(dataset) -> list[str]:
    return [str(s) for s in dataset.asstr()[()].tolist()] if dataset.shape else []


def flatten(tree, prefix: str = "") -> dict:
    """{"model": {"norm": "first"}} -> {"model.norm": "first"}; a list's items as "key[0]", an empty
    mapping or list as its own value, as `runner compare` flattens configs."""
    out: dict = {}
    if isinstance(tree, dict):
        if not tree and prefix:
            out[prefix] = {}
        for k, v in tree.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(tree, list):
        if all(not isinstance(v, (dict, list)) for v in tree):
            out[prefix] = tree  # a list of scalars stays one value: [2, 4]
        else:
            for i, v in enumerate(tree):
                out.update(flatten(v, f"{prefix}[{i}]"))
    else:
        out[prefix] = tree
    return out


# -- sections: the groups of a results file beyond the run's own ------------------------------
# Each reads one kind of group (/eval, /checkpoints, ...) into a DataFrame. A new kind of group
# (ablation tables, pruning curves) is one more register_section call: Run.section(name) reads it,
# and attnlab.runs() adds its `summary` values as columns.
_SECTIONS: dict[str, tuple[Callable, Callable | None]] = {}


def register_section(name: str, summary: Callable | None = None):
    """Decorator: `reader(h5file) -> DataFrame or None` reads section `name`; `summary(frame) ->
    {column: value}` gives the columns it adds to a runs table."""
    def wrap(reader):
        _SECTIONS[name] = (reader, summary)
        return reader
    return wrap


def _group_attrs(group) -> dict:
    return {k: _attr(v) for k, v in group.attrs.items()}


def _groups_table(f, name: str):
    """/<name>/<child>: one row per child group, its attributes as columns (None when absent)."""
    if name not in f:
        return None
    rows = {child: _group_attrs(g) for child, g in f[name].items() if isinstance(g, h5py.Group)}
    return pd.DataFrame.from_dict(rows, orient="index") if rows else None


@register_section("evals", summary=lambda df: {f"eval/{name}/bleu": row["bleu"]
                                               for name, row in df.iterrows() if "bleu" in row})
def _read_evals(f):
    """/eval/<name>: one row per `runner eval` result, its attributes as columns."""
    return _groups_table(f, "eval")


@register_section("stale_evals")
def _read_stale_evals(f):
    """/eval_stale/<name>: evaluations a --resume set aside (their checkpoint was replaced)."""
    return _groups_table(f, "eval_stale")


@register_section("checkpoints")
def _read_checkpoints(f):
    """/checkpoints/<name>: the averaged checkpoints `runner average` wrote."""
    return _groups_table(f, "checkpoints")


def _with_attrs(frame, group):
    """`frame` with one column per scalar attribute of `group` (its value on every row)."""
    for key, value in _group_attrs(group).items():
        if not isinstance(value, list):
            frame[key] = value
    return frame


def _pick_sample(samples: list, sample, has: str, lacks: str) -> str:
    """`sample` (a text, an index, or None for the first) among `samples`; ResultsError "<has> N
    samples; there is no sample i" or "<lacks> sample 'x' (it has: ...)" otherwise."""
    if sample is None:
        sample = 0
    if isinstance(sample, int):
        if not -len(samples) <= sample < len(samples):
            raise ResultsError(f"{has} {len(samples)} samples; there is no sample {sample}")
        sample = samples[sample]
    if sample not in samples:
        raise ResultsError(f"{lacks} sample {sample!r} (it has: {', '.join(repr(s) for s in samples)})")
    return sample


def _read_ablation(f):
    """/ablation/<name>: `runner ablate`'s tables, one row per name x module x layer x head (layers
    and heads from 1), with the group's attributes (split, checkpoint, base_loss, base_bleu, ...)."""
    if "ablation" not in f:
        return None
    frames = []
    for name, g in f["ablation"].items():
        if not isinstance(g, h5py.Group) or ("module" not in g and "token" not in g):
            continue
        if "token" in g:  # runner ablate --tokens: one row per blanked source token
            columns = {"name": name, "token": _strings(g["token"])}
            keys = ("sentence", "position", "target_tokens", "loss", "delta_loss")
        else:
            columns = {"name": name, "module": _strings(g["module"])}
            keys = ("layer", "head", "loss", "delta_loss", "bleu", "delta_bleu", "importance",
                    "importance_normalized")
        for key in keys:
            if key in g:
                columns[key] = np.asarray(g[key][()])
        frames.append(_with_attrs(pd.DataFrame(columns), g))
    return pd.concat(frames, ignore_index=True) if frames else None


register_section("ablation", summary=lambda df: {
    f"ablation/{name}/{key}": float(rows[key].max())
    for name, rows in df.groupby("name") if "module" in rows and rows["module"].notna().any()
    for key in ("delta_loss", "importance_normalized") if key in rows
})(_read_ablation)


def _read_pruning(f):
    """/pruning/<name>: `runner prune`'s curves, one row per name x repeat x point: heads_off,
    fraction, loss, bleu (when measured), with the group's attributes (split, order, reestimate, ...)."""
    if "pruning" not in f:
        return None
    frames = []
    for name, g in f["pruning"].items():
        if not isinstance(g, h5py.Group) or "loss" not in g:
            continue
        loss = np.asarray(g["loss"][()])
        bleu = np.asarray(g["bleu"][()]) if "bleu" in g else None
        heads_off = np.asarray(g["heads_off"][()])
        fraction = np.asarray(g["fraction"][()])
        for r in range(loss.shape[0]):
            columns = {"name": name, "repeat": r, "heads_off": heads_off, "fraction": fraction, "loss": loss[r]}
            if bleu is not None:
                columns["bleu"] = bleu[r]
            frames.append(_with_attrs(pd.DataFrame(columns), g))
    return pd.concat(frames, ignore_index=True) if frames else None


register_section("pruning")(_read_pruning)


@register_section("head_mask")
def _read_head_mask(f):
    """/interventions/head_mask: the heads a run trained and evaluated with switched off, one row per
    module x layer x head (from 1), xi = 1 on and 0 off."""
    if "interventions" not in f or "head_mask" not in f["interventions"]:
        return None
    g = f["interventions/head_mask"]
    rows = []
    for module, d in g.items():
        xi = np.asarray(d[()])
        for layer in range(xi.shape[0]):
            for head in range(xi.shape[1]):
                rows.append({"module": module, "layer": layer + 1, "head": head + 1, "xi": float(xi[layer, head])})
    frame = pd.DataFrame(rows)
    frame.attrs["text"] = _attr(g.attrs.get("text", ""))
    return frame


@register_section("rollout")
def _read_rollout(f):
    """/rollout/<sample>/<name>: what `runner rollout --write` stored, one row per result: sample,
    name, module, method, layers, heads, queries, keys, definition, positions."""
    if "rollout" not in f:
        return None
    rows = []
    for link, g in f["rollout"].items():
        for name, d in g.items():
            a = _group_attrs(d)
            rows.append({"sample": _text(g.attrs.get("text", link)), "name": name, "module": a.get("module"),
                         "method": a.get("method"), "layers": a.get("layers"), "heads": a.get("heads"),
                         "queries": d.shape[0], "keys": d.shape[1], "definition": a.get("definition"),
                         "positions": a.get("positions")})
    return pd.DataFrame(rows) if rows else None


@register_section("generations")
def _read_generations(f):
    """/generations/<name>: `runner generate`'s texts, one row per name with prompt, continuation,
    text (the two together), temperature, top_k, top_p, seed, checkpoint, cache, tokens_per_s, ...
    and ids (the prompt's and the generated token ids)."""
    frame = _groups_table(f, "generations")
    if frame is None:
        return None
    if "text" not in frame:  # files before the text attribute: characters run together
        frame["text"] = frame["prompt"].fillna("") + frame["continuation"].fillna("")
    frame["ids"] = [np.asarray(f["generations"][name]["ids"][()]) if "ids" in f["generations"][name] else None
                    for name in frame.index]
    frame.index.name = "name"
    return frame


@register_section("head_scores")
def _read_head_scores(f):
    """/head_scores/<name>/<score>: `runner heads`' scores, one row per name x layer x head (from 1)
    with a column per score (previous_token, duplicate_token, induction, first_token_mass) and the
    group's attributes (module, sequences, length, seed, checkpoint, ...). The scores the lm trainer
    measured during training (trainer.head_scores_every: /head_scores/training/step_<s>) are rows
    named "training" with their `step`, in step order."""
    if "head_scores" not in f:
        return None

    def frame(name, g):
        scores = {key: np.asarray(d[()]) for key, d in g.items() if isinstance(d, h5py.Dataset) and d.ndim == 2}
        if not scores:
            return None
        layers, heads = next(iter(scores.values())).shape
        columns = {"name": name,
                   "layer": np.repeat(np.arange(1, layers + 1), heads),
                   "head": np.tile(np.arange(1, heads + 1), layers)}
        for key, values in scores.items():
            columns[key] = values.reshape(-1).astype(float)
        return _with_attrs(pd.DataFrame(columns), g)

    frames = []
    for name, g in f["head_scores"].items():
        if not isinstance(g, h5py.Group):
            continue
        if name == "training":
            points = [(int(_attr(p.attrs["step"])), p) for p in g.values()
                      if isinstance(p, h5py.Group) and "step" in p.attrs]
            for step, p in sorted(points, key=lambda x: x[0]):
                one = frame(name, p)
                if one is not None:
                    frames.append(one.assign(step=step))
            continue
        one = frame(name, g)
        if one is not None:
            frames.append(one)
    return pd.concat(frames, ignore_index=True) if frames else None


@register_section("figures")
def _read_figures(f):
    """/figures/<name>: the figures the run's plugins declared, in declaration order."""
    if "figures" not in f:
        return None
    rows = {}
    for name, g in f["figures"].items():
        a = _group_attrs(g)
        a["layers"] = [g[k].attrs.get("label", k) for k in sorted(g) if k.startswith("layer_")]
        a["layers"] = [_text(x) for x in a["layers"]]
        rows[name] = a
    frame = pd.DataFrame.from_dict(rows, orient="index")
    return frame.sort_values("order") if "order" in frame else frame


class Run:
    """A results file. Cheap to make: it reads the root attributes and the config; metrics,
    translations and attention are read when asked for, each time from the file as it is then."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        with self._open() as f:
            self.attrs = {k: _attr(v) for k, v in f.attrs.items()}
            self._config_text = _text(f["config"][()]) if "config" in f else ""
            # The same config as JSON (runners since /config_json: a one-string dataset); None before.
            js = f.get("config_json")
            self._config_json = (_text(js[()] if js.shape == () else js[0])
                                 if isinstance(js, h5py.Dataset) and js.shape in ((), (1,)) else None)
        self._config = None

    # -- opening -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _open(self):
        """The file open for reading, checked first; closed on leaving."""
        f = open_checked(self.path)
        try:
            yield f
        finally:
            f.close()

    # -- the run ---------------------------------------------------------------------------------
    @property
    def experiment(self) -> str:
        return str(self.attrs.get("experiment", ""))

    @property
    def status(self) -> str:
        """running, completed, interrupted, failed or diverged, as the file says now."""
        with self._open() as f:
            return _text(f.attrs.get("status", ""))

    @property
    def live(self) -> bool:
        """True when the file says `running` and the run writing it is alive (its lock file names a
        live process). A `running` file without one is a run that died without saying so."""
        return self.attrs.get("status") == "running" and _check.writer_pid(self.path) is not None

    @property
    def error(self) -> str | None:
        """Why the run did not complete: `error`, `interrupted_during` or `diverged`."""
        for k in ("error", "interrupted_during", "diverged"):
            if k in self.attrs:
                return str(self.attrs[k])
        return None

    @property
    def config_text(self) -> str:
        """The fully resolved YAML the run ran with."""
        return self._config_text

    @property
    def config(self) -> dict:
        """The resolved config as nested dicts and lists: /config_json, or /config (YAML, read with
        PyYAML by YAML 1.2's core schema) in a file from before /config_json."""
        if self._config is None:
            try:
                if self._config_json is not None:
                    self._config = _config.load_json(self._config_json, f"{self.path}:/config_json") or {}
                else:
                    self._config = _config.load_yaml(self._config_text, f"{self.path}:/config") or {}
            except _config.ConfigFormatError as e:
                raise ResultsError(f"results file {e}") from None
        return self._config

    @property
    def flat_config(self) -> dict:
        """The config flattened to "model.encoder.norm" -> "first" (runner compare's keys)."""
        return flatten(self.config)

    # -- metrics ---------------------------------------------------------------------------------
    def series(self) -> list[str]:
        """Every metric series, "group/name", sorted."""
        with self._open() as f:
            return _series_names(f)

    @property
    def metrics(self) -> pd.DataFrame:
        """Every metric row, tidy: columns series ("train/loss"), epoch (per-epoch series; a one-row
        series such as test/loss at the last epoch), step (step/* series), value."""
        frames = []
        with self._open() as f:
            epochs = _epochs(f)
            for s in _series_names(f):
                values = np.asarray(f["metrics/" + s][()], dtype=float)
                frames.append(_tidy(s, values, epochs))
        if not frames:
            return pd.DataFrame({"series": pd.Series(dtype=str), "epoch": pd.Series(dtype="Int64"),
                                 "step": pd.Series(dtype="Int64"), "value": pd.Series(dtype=float)})
        return pd.concat(frames, ignore_index=True)

    def history(self, series: str | None = None) -> pd.Series | pd.DataFrame:
        """One series as a pandas Series indexed by epoch (or optimizer step for step/*):
        `run.history("val/loss").plot()`. Without a series: every per-epoch series as one wide
        DataFrame, a row per epoch and a column per series (`run.history()[["train/loss",
        "val/loss"]].plot()`); the step/* series, indexed by step, are left out."""
        if series is None:
            frame = self.metrics
            frame = frame[~frame["series"].str.startswith("step/")]
            if frame.empty:
                return pd.DataFrame(index=pd.Index([], name="epoch", dtype="Int64"))
            wide = frame.pivot_table(index="epoch", columns="series", values="value", aggfunc="last", sort=True)
            wide.columns.name = None
            return wide
        if not isinstance(series, str):
            raise TypeError(f"series must be a series name such as 'val/loss'; got {type(series).__name__} {series!r}")
        with self._open() as f:
            names = _series_names(f)
            if series not in names:
                matches = [n for n in names if n.split("/", 1)[1] == series]
                if len(matches) != 1:
                    raise ResultsError(f"results file {self.path} has no metric series '{series}'"
                                       f" (it has: {', '.join(names) or 'none'})")
                series = matches[0]
            values = np.asarray(f["metrics/" + series][()], dtype=float)
            frame = _tidy(series, values, _epochs(f))
        axis = "step" if series.startswith("step/") else "epoch"
        return pd.Series(frame["value"].to_numpy(), index=pd.Index(frame[axis].to_numpy(), name=axis), name=series)

    def final(self) -> dict:
        """Each series' last value: {"train/loss": 0.03, ...} (bookkeeping series left out)."""
        with self._open() as f:
            return _finals(f)

    @property
    def epochs_done(self) -> int:
        """Whole epochs in the file (rows of /metrics/epoch/index, else of train/loss)."""
        with self._open() as f:
            for s in ("metrics/epoch/index", "metrics/train/loss"):
                if s in f:
                    return int(f[s].shape[0])
        return 0

    # -- translations ----------------------------------------------------------------------------
    @property
    def translations(self) -> pd.DataFrame:
        """The experiment's sample sentences translated after training (/samples): source,
        reference, hypothesis, bleu (d2l's sentence BLEU)."""
        with self._open() as f:
            if "samples" not in f:
                return pd.DataFrame(columns=["source", "reference", "hypothesis", "bleu"])
            g = f["samples"]
            return pd.DataFrame({"source": _strings(g["source"]), "reference": _strings(g["reference"]),
                                 "hypothesis": _strings(g["hypothesis"]),
                                 "bleu": np.asarray(g["bleu"][()], dtype=float)})

    @property
    def evals(self) -> pd.DataFrame:
        """One row per `runner eval` result (/eval/<name>): bleu, bleu_lowercase, split, decoding,
        beam_size, checkpoint, ... Empty when the run was never evaluated."""
        frame = self.section("evals")
        return frame if frame is not None else pd.DataFrame()

    @property
    def ablation(self) -> pd.DataFrame:
        """`runner ablate`'s tables (/ablation/<name>): one row per name x module x layer x head
        (from 1) with loss, delta_loss, bleu, delta_bleu, importance, importance_normalized (those
        the ablation measured) and its split, checkpoint, base_loss, base_bleu. Empty when none."""
        frame = self.section("ablation")
        return frame if frame is not None else pd.DataFrame()

    @property
    def generations(self) -> pd.DataFrame:
        """`runner generate`'s texts (/generations/<name>), one row per name (the index): prompt,
        continuation, text, temperature, top_k, top_p, seed, decoding, checkpoint, cache,
        tokens_per_s, ids. Empty when none."""
        frame = self.section("generations")
        return frame if frame is not None else pd.DataFrame()

    @property
    def head_scores(self) -> pd.DataFrame:
        """`runner heads`' scores (/head_scores/<name>): one row per name x layer x head (from 1)
        with previous_token, duplicate_token, induction and first_token_mass (TransformerLens's
        head_detector, "mul") and the measurement's module, sequences, length, seed, checkpoint.
        `run.head_scores.pivot(index="layer", columns="head", values="induction")` is a grid. Rows
        named "training" (with a `step`) are the scores trainer.head_scores_every measured while the
        model trained: `.query("name == 'training'").pivot_table(index="step", columns=["layer",
        "head"], values="induction")` is every head's curve. Empty when none."""
        frame = self.section("head_scores")
        return frame if frame is not None else pd.DataFrame()

    @property
    def pruning(self) -> pd.DataFrame:
        """`runner prune`'s curves (/pruning/<name>): one row per name x repeat x point with
        heads_off, fraction, loss, bleu (when measured) and the curve's split, order, reestimate,
        base_loss, base_bleu. `run.pruning.groupby(["name", "fraction"]).bleu.agg(["mean", "min",
        "max"])` gives the curve over random orders. Empty when none."""
        frame = self.section("pruning")
        return frame if frame is not None else pd.DataFrame()

    @property
    def head_mask(self) -> pd.DataFrame:
        """The heads this run trained with switched off (`interventions.head_mask`): one row per
        module x layer x head (from 1), xi 0 = off, 1 = on; `.attrs["text"]` the mask as written.
        Empty when it had none."""
        frame = self.section("head_mask")
        return frame if frame is not None else pd.DataFrame()

    def eval(self, name: str) -> pd.DataFrame:
        """The sentences of one evaluation: source, reference, hypothesis."""
        with self._open() as f:
            if f"eval/{name}" not in f:
                have = sorted(f["eval"]) if "eval" in f else []
                raise ResultsError(f"results file {self.path} has no evaluation '{name}'"
                                   f" (it has: {', '.join(have) or 'none; run `runner eval`'})")
            g = f[f"eval/{name}"]
            return pd.DataFrame({"source": _strings(g["sources"]), "reference": _strings(g["references"]),
                                 "hypothesis": _strings(g["hypotheses"])})

    def section(self, name: str):
        """A registered section (evals, stale_evals, checkpoints, figures, ...) as a DataFrame, or
        None when the file has none."""
        if name not in _SECTIONS:
            raise ResultsError(f"no section '{name}' (known: {', '.join(sorted(_SECTIONS))})")
        with self._open() as f:
            return _SECTIONS[name][0](f)

    def array(self, path: str) -> np.ndarray:
        """Any dataset of the file as numpy (e.g. "predictions/test/prediction")."""
        with self._open() as f:
            if path.strip("/") not in f or not isinstance(f[path.strip("/")], h5py.Dataset):
                raise ResultsError(f"results file {self.path} has no dataset /{path.strip('/')}")
            d = f[path.strip("/")]
            return d.asstr()[()] if h5py.check_string_dtype(d.dtype) is not None else d[()]

    # -- attention -------------------------------------------------------------------------------
    @property
    def samples(self) -> list[str]:
        """The sentences (or sequences) whose attention the run recorded, as given."""
        with self._open() as f:
            if "attention" not in f:
                return []
            return [_text(g.attrs.get("text", name)) for name, g in f["attention"].items()]

    def attention(self, sample: str | int | None = None):
        """The recorded attention of one sample: its text, or its index in `samples` (default the
        first). Returns an attnlab.Attention."""
        from .attention import Attention
        samples = self.samples
        if not samples:
            raise ResultsError(f"results file {self.path} recorded no attention (the experiment's "
                               f"evaluate.attention lists the sentences to record)")
        sample = _pick_sample(samples, sample, f"results file {self.path} recorded attention for",
                              f"results file {self.path} recorded no attention for")
        with self._open() as f:
            return Attention._read(f, sample, self.path)

    def rollout(self, name: str = "encoder_self_rollout", sample: str | int | None = None) -> pd.DataFrame:
        """One result `runner rollout --write` stored (/rollout/<sample>/<name>: encoder_self_rollout,
        decoder_self_flow, encoder_decoder_rollout, ...) as a DataFrame: rows the query tokens,
        columns the key tokens. `sample`: its text or its index among the samples with results
        (default the first). `section("rollout")` lists what the file holds."""
        with self._open() as f:
            groups = f["rollout"] if "rollout" in f else {}
            texts = {_text(g.attrs.get("text", link)): link for link, g in groups.items()}
            if not texts:
                raise ResultsError(f"results file {self.path} holds no rollout results (run `runner rollout "
                                   f"{self.path} --write`)")
            sample = _pick_sample(list(texts), sample, f"results file {self.path} holds rollout results for",
                                  f"results file {self.path} holds no rollout results for")
            g = groups[texts[sample]]
            if name not in g:
                raise ResultsError(f"results file {self.path} holds no rollout result {name!r} for sample "
                                   f"{sample!r} (it has: {', '.join(sorted(g))})")
            d = g[name]
            a = _group_attrs(d)
            frame = pd.DataFrame(np.asarray(d[()], dtype=np.float64), index=a.get("query_tokens"),
                                 columns=a.get("key_tokens"))
            frame.attrs.update({"sample": sample, "name": name, "method": a.get("method"),
                                "module": a.get("module"), "definition": a.get("definition")})
            return frame

    # -- display ---------------------------------------------------------------------------------
    def summary(self) -> dict:
        """What a runs table holds for this run: experiment, status, times, parameters, the final
        value of every series and each section's summary columns."""
        a = self.attrs
        out = {"path": self.path, "experiment": self.experiment, "status": a.get("status"),
               "started": a.get("started"), "wall_seconds": a.get("wall_seconds"),
               "num_parameters": a.get("num_parameters")}
        with self._open() as f:
            out.update(_finals(f))
            if "samples/bleu" in f and f["samples/bleu"].shape and f["samples/bleu"].shape[0]:
                out["samples/mean_bleu"] = float(np.mean(f["samples/bleu"][()]))  # d2l's mean BLEU
            for name, (reader, summary) in _SECTIONS.items():
                if summary is None:
                    continue
                frame = reader(f)
                if frame is not None:
                    out.update(summary(frame))
        return out

    def __repr__(self) -> str:
        return f"<attnlab.Run {self.experiment!r} {self.attrs.get('status')} {self.path}>"

    def _repr_html_(self) -> str:
        s = self.summary()
        rows = [("file", s["path"]), ("experiment", s["experiment"]), ("status", s["status"])]
        if self.error:
            rows.append(("why", self.error))
        rows += [("started", s["started"])]
        if s.get("wall_seconds") is not None:
            rows.append(("wall", f"{float(s['wall_seconds']):.1f} s"))
        if s.get("num_parameters") is not None:
            rows.append(("parameters", f"{int(s['num_parameters']):,}"))
        rows.append(("epochs", str(self.epochs_done)))
        for k, v in s.items():
            if "/" in k and isinstance(v, float):
                rows.append((k, f"{v:.4g}"))
        samples = self.samples
        if samples:
            rows.append(("attention", ", ".join(samples[:4]) + (" ..." if len(samples) > 4 else "")))
        cells = "".join(f"<tr><th style='text-align:left'>{html.escape(str(k))}</th>"
                        f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>" for k, v in rows)
        return f"<table class='attnlab-run'>{cells}</table>"


def _series_names(f) -> list[str]:
    if "metrics" not in f:
        return []
    out = []
    for g, group in f["metrics"].items():
        if isinstance(group, h5py.Group):
            out += [f"{g}/{n}" for n, d in group.items() if isinstance(d, h5py.Dataset)]
    return sorted(out)


def _finals(f) -> dict:
    """Each series' last value, bookkeeping series (epoch/*, */seconds) left out."""
    out = {}
    for s in _series_names(f):
        if s.startswith("epoch/") or s.endswith("/seconds"):
            continue
        d = f["metrics/" + s]
        if d.shape and d.shape[0]:
            out[s] = float(d[-1])
    return out


def _epochs(f) -> np.ndarray | None:
    return np.asarray(f["metrics/epoch/index"][()], dtype=np.int64) if "metrics/epoch/index" in f else None


def _tidy(series: str, values: np.ndarray, epochs: np.ndarray | None) -> pd.DataFrame:
    n = len(values)
    if series.startswith("step/"):
        epoch = pd.array([pd.NA] * n, dtype="Int64")
        step = pd.array(np.arange(1, n + 1), dtype="Int64")
    else:
        if epochs is not None and len(epochs) >= n and n > 1:
            e = epochs[:n]
        elif epochs is not None and n == 1 and len(epochs) > 1:
            e = epochs[-1:]  # a one-row series (test/loss) belongs to the last epoch
        elif epochs is not None and len(epochs) == n:
            e = epochs
        else:
            e = np.arange(1, n + 1)
        epoch = pd.array(e, dtype="Int64")
        step = pd.array([pd.NA] * n, dtype="Int64")
    return pd.DataFrame({"series": series, "epoch": epoch, "step": step, "value": values})


def open_checked(path: str, wait_seconds: float | None = None) -> h5py.File:
    """h5py.File(path, "r") after the read check, waiting out a live run's write (errno 11)."""
    if not os.path.exists(path):
        raise ResultsError(f"not an attnlab results file: {path} (no such file)")
    if os.path.isdir(path):
        raise ResultsError(f"not an attnlab results file: {path} (it is a directory, not a regular file)")
    if not os.path.isfile(path):
        raise ResultsError(f"not an attnlab results file: {path} (not a regular file)")
    if not os.access(path, os.R_OK):
        raise ResultsError(f"cannot read results file {path}: Permission denied")
    with open(path, "rb") as raw:
        head = raw.read(8)
    if head != b"\x89HDF\r\n\x1a\n" and not _hdf5_signature_later(path):
        raise ResultsError(f"not an attnlab results file: {path} (not an HDF5 file)")
    why = _check.check([path])[path]
    if why is not None and _check.writer_pid(path) is not None:
        from .errors import ResultsBusy
        raise ResultsBusy(f"results file {path} is being written by a running run (pid {_check.writer_pid(path)}) "
                          f"and cannot be read yet: {why}")
    if why is not None:
        if why.startswith("h5py cannot read it: ") and "file signature not found" in why:
            raise ResultsError(f"not an attnlab results file: {path} (not an HDF5 file)")
        raise ResultsError(f"results file {path} is damaged: {why} (in a separate checking process; "
                           f"nothing was read from it here)")
    deadline = time.monotonic() + (wait_seconds if wait_seconds is not None else _check._busy_wait_seconds())
    while True:
        try:
            f = h5py.File(path, "r")
            break
        except OSError as e:
            busy = getattr(e, "errno", None) == errno.EAGAIN or "unable to lock file" in str(e)
            if not busy:
                raise ResultsError(f"not an attnlab results file: {path} (HDF5 cannot open it: {e})") from e
            if time.monotonic() > deadline:
                raise _check.busy_error(path) from e
            time.sleep(0.05)
    missing = [k for k in ("experiment", "status") if k not in f.attrs]
    if missing:
        f.close()
        raise ResultsError(f"not an attnlab results file: {path} (no root attribute '{missing[0]}')")
    return f


def _hdf5_signature_later(path: str) -> bool:
    """HDF5 also looks for its signature at 512, 1024, 2048, ... (a user block before it)."""
    size = os.path.getsize(path)
    with open(path, "rb") as raw:
        offset = 512
        while offset + 8 <= size:
            raw.seek(offset)
            if raw.read(8) == b"\x89HDF\r\n\x1a\n":
                return True
            offset *= 2
    return False


def load(path: str | os.PathLike) -> Run:
    """A results file as an attnlab.Run; ResultsError naming the file when it is not one."""
    return Run(path)
