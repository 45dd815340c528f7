"""The runner's head studies from Python: ablate, prune and rollout a trained run, as a notebook would
call `runner ablate/prune/rollout` (docs/COMMANDS.md, "Switching heads off"; "Attention rollout").

    table = attnlab.ablate("results/run.h5", split="val")            # a row per head: delta_loss, bleu, ...
    curve = attnlab.prune("results/run.h5", step="10%", bleu=False)   # heads_off, fraction, loss, bleu
    flows = attnlab.rollout("results/run.h5", method="both")         # per module: rollout and flow

Each starts the runner as attnlab.run does (its lines printed as they come, `log=False` keeps them
back; Ctrl-C stops it with SIGINT and waits, and raises attnlab.RunInterrupted), and returns what
the runner wrote into the run's results file as a DataFrame: the table of this call, read back
through attnlab.load (Run.ablation, Run.pruning, Run.rollout).
"""
from __future__ import annotations

import os
import re

import pandas as pd

from .errors import ConfigError, RunFailed, RunInterrupted
from .runner import _config_error, _last_error, _overrides, _path_arg, _stream, find_runner

__all__ = ["ablate", "prune", "rollout"]

_WROTE = re.compile(r"-> /(ablation|pruning)/(\S+)")


def _run_path(run) -> str:
    from .results import Run
    if isinstance(run, Run):
        return run.path
    return _path_arg(run, "run")


def _positive(value, name: str):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number of at least 1; got {value!r}")
    return value


def _split(split) -> str | None:
    if split is not None and split not in ("train", "val", "test"):
        raise ValueError(f"split must be 'train', 'val' or 'test'; got {split!r}")
    return split


def _study(command: str, path: str, args: list[str], overrides, *, progress: bool, log: bool, plugin_path, cwd,
           env) -> str:
    """Runs `runner <command> RUN [overrides] args`; returns the group it wrote (/ablation/<name>)."""
    cmd = [find_runner(), command, path, *_overrides(overrides), *args]
    for p in plugin_path:
        cmd += ["--plugin-path", os.fspath(p)]
    try:
        code, tail = _stream(cmd, progress=progress, log=log, desc=f"{command} {os.path.basename(path)}", cwd=cwd,
                             env=env, unit="step")
    except KeyboardInterrupt:
        raise RunInterrupted(f"stopped: runner {command} {path} wrote nothing") from None
    if code == 130:
        raise RunInterrupted(f"runner {command} was interrupted: {path} holds no new table")
    if code != 0:
        message = _config_error(tail)
        if message:
            raise ConfigError(message)
        raise RunFailed(f"runner {command} exited with status {code}: {_last_error(tail)}", returncode=code, log=tail)
    found = _WROTE.findall(tail)
    if not found:
        raise RunFailed(f"runner {command} ended without naming the table it wrote", returncode=code, log=tail)
    return found[-1][1]


def _measure(command: str, path: str, args: list[str], overrides, *, sentences, bleu, checkpoint, progress, log,
             plugin_path, cwd, env) -> pd.DataFrame:
    """The options ablate and prune share, the run, and the rows of the table it wrote (Run.ablation
    or Run.pruning, the rows of that group)."""
    from .results import load
    if _positive(sentences, "sentences"):
        args += ["--sentences", str(sentences)]
    if not bleu:
        args.append("--no-bleu")
    if checkpoint is not None:
        args += ["--checkpoint", str(checkpoint)]
    group = _study(command, path, args, overrides, progress=progress, log=log, plugin_path=plugin_path, cwd=cwd,
                   env=env)
    run = load(path if os.path.isabs(path) or cwd is None else os.path.join(cwd, path))
    table = run.ablation if command == "ablate" else run.pruning
    return table[table["name"] == group].reset_index(drop=True)


def ablate(run, overrides=None, *, split: str | None = None, importance: str | None = None, name: str | None = None,
           tokens: bool = False, sentences: int | None = None, bleu: bool = True, checkpoint: str | None = None,
           progress: bool = True, log: bool = True, plugin_path=(), cwd=None, env=None) -> pd.DataFrame:
    """`runner ablate RUN`: each head switched off alone (or `importance="gradient"`, or the source
    tokens blanked out one at a time with tokens=True); returns this call's rows of Run.ablation.

    split: train, val or test (the runner's default: val); name: the group under /ablation (default
    the split's name); sentences: the split's first N only; bleu=False measures the loss only;
    checkpoint: best (default), last, epoch-N or an average's name. overrides change the stored
    config for device, threads, data_dir and the like (never the model: the runner refuses)."""
    path = _run_path(run)
    args = ["-q"] if not log else []
    if _split(split):
        args += ["--split", split]
    if importance is not None:
        if importance not in ("ablation", "gradient", "both"):
            raise ValueError(f"importance must be 'ablation', 'gradient' or 'both'; got {importance!r}")
        args += ["--importance", importance]
    if name is not None:
        args += ["--name", str(name)]
    if tokens:
        args.append("--tokens")
    return _measure("ablate", path, args, overrides, sentences=sentences, bleu=bleu, checkpoint=checkpoint,
                    progress=progress, log=log, plugin_path=plugin_path, cwd=cwd, env=env)


def prune(run, overrides=None, *, split: str | None = None, order: str | None = None, step: str | int | None = None,
          one_shot: bool = False, repeats: int | None = None, seed: int | None = None, name: str | None = None,
          sentences: int | None = None, bleu: bool = True, checkpoint: str | None = None, progress: bool = True,
          log: bool = True, plugin_path=(), cwd=None, env=None) -> pd.DataFrame:
    """`runner prune RUN`: heads switched off in order of importance (or `order="random"`, over
    `repeats` orders from `seed`), `step` at a time ("10%" or a number of heads); returns this
    call's curve from Run.pruning (heads_off, fraction, loss, bleu per step and repeat)."""
    path = _run_path(run)
    args = ["-q"] if not log else []
    if _split(split):
        args += ["--split", split]
    if order is not None:
        args += ["--order", str(order)]
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, (str, int)):
            raise TypeError(f"step must be a percentage such as '10%' or a number of heads; got {step!r}")
        args += ["--step", str(step)]
    if one_shot:
        args.append("--one-shot")
    if _positive(repeats, "repeats"):
        args += ["--repeats", str(repeats)]
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a whole number from 0; got {seed!r}")
        args += ["--seed", str(seed)]
    if name is not None:
        args += ["--name", str(name)]
    return _measure("prune", path, args, overrides, sentences=sentences, bleu=bleu, checkpoint=checkpoint,
                    progress=progress, log=log, plugin_path=plugin_path, cwd=cwd, env=env)


def rollout(run, *, sample: str | int | None = None, modules=None, method: str = "rollout",
            write: bool = False, cwd=None, env=None) -> pd.DataFrame:
    """`runner rollout RUN --format csv`: attention rollout (and flow, method="both" or "flow") of
    a recorded sentence, every recorded module or `modules`; returns the runner's table as a
    DataFrame. write=True also stores it in the results file (/rollout, read by Run.rollout)."""
    import io
    import subprocess
    path = _run_path(run)
    if method not in ("rollout", "flow", "both"):
        raise ValueError(f"method must be 'rollout', 'flow' or 'both'; got {method!r}")
    cmd = [find_runner(), "rollout", path, "--format", "csv", "--method", method]
    if sample is not None:
        if isinstance(sample, bool) or not isinstance(sample, (str, int)):
            raise TypeError(f"sample must be a recorded sentence's text or index; got {sample!r}")
        cmd += ["--sample", str(sample)]
    if modules is not None:
        if isinstance(modules, str):
            modules = [modules]
        if not isinstance(modules, (list, tuple)) or not all(isinstance(m, str) for m in modules):
            raise TypeError(f"modules must be a module name or a list of them; got {modules!r}")
        cmd += ["--module", ",".join(modules)]
    if write:
        cmd.append("--write")
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd,
                          env=None if env is None else {**os.environ, **env})
    if done.returncode != 0:
        message = _config_error(done.stderr)
        if message:
            raise ConfigError(message)
        raise RunFailed(f"runner rollout exited with status {done.returncode}: {_last_error(done.stderr)}",
                        returncode=done.returncode, log=done.stderr)
    # Tokens stay text ("nan" and "null" are words too); the values are numbers.
    table = pd.read_csv(io.StringIO(done.stdout), keep_default_na=False, dtype=str)
    for column in ("query", "key"):
        table[column] = table[column].astype(int)
    table["value"] = pd.to_numeric(table["value"])
    return table
