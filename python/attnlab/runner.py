"""Starting the C++ runner from Python: one experiment, a sweep, or the HTML report.

    run = attnlab.run("experiments/transformer_fra_eng_d2l017.yaml", {"trainer.max_epochs": 10})
    runs = attnlab.sweep("experiments/transformer_fra_eng_d2l017.yaml",
                         axes={"model.encoder.norm": ["first", "last"], "seed": [0, 1, 2]},
                         overrides={"trainer.max_epochs": 60}, output="results/norm-sweep", jobs=2)
    attnlab.report(runs.path)

The runner is found through ATTNLAB_RUNNER, the repository's build (build/bin/runner in the current
folder or a folder above it, else in the checkout the package was installed from), or PATH; a
relative experiment file not found under the current folder is taken from that repository
(resolve_experiment), and the runs keep their datasets in one place (data_dir()). Its progress lines become a progress bar
in Jupyter (tqdm, when installed) and stay plain lines elsewhere; its other lines are printed as
they come (log=False keeps them in the exception only). Stopping the cell (KeyboardInterrupt)
stops the runner the way Ctrl-C does: the results file says `interrupted`, and RunInterrupted
carries the run.
"""
from __future__ import annotations

import collections
import datetime
import html
import os
import re
import shutil
import signal
import subprocess
import sys

from .errors import ConfigError, RunFailed, RunInterrupted, RunnerNotFound

__all__ = ["find_runner", "repository", "resolve_experiment", "data_dir", "run", "sweep", "report", "command_for"]

_HERE = os.path.dirname(os.path.abspath(__file__))


def _is_repository(folder) -> bool:
    return bool(folder) and os.path.isdir(os.path.join(folder, "experiments")) and \
        os.path.isfile(os.path.join(folder, "python", "pyproject.toml"))


def _package_repository() -> str | None:
    """The attnlab checkout this package came from: the one it lives in (PYTHONPATH, an editable
    install), else the folder `pip install ./python` was given (pip records it in the package's
    direct_url.json), when that checkout is still there."""
    here = os.path.dirname(_HERE)
    if _is_repository(os.path.dirname(here)):
        return os.path.dirname(here)
    try:
        import importlib.metadata
        import json
        import urllib.parse
        import urllib.request
        dist = importlib.metadata.distribution("attnlab")
        if os.path.realpath(str(dist.locate_file("attnlab"))) != os.path.realpath(_HERE):
            return None  # another attnlab installed; this copy is not that one
        url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
    except Exception:  # not installed by pip, or no record: no repository known
        return None
    if not url.startswith("file://"):
        return None
    checkout = os.path.dirname(os.path.normpath(urllib.request.url2pathname(urllib.parse.urlparse(url).path)))
    return checkout if _is_repository(checkout) else None


def _runner_in(folder: str) -> str | None:
    candidate = os.path.join(folder, "build", "bin", "runner")
    return candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None


def find_runner() -> str:
    """The runner executable, looked for in this order: $ATTNLAB_RUNNER; build/bin/runner in the
    current folder or the nearest folder above it that has one (a notebook in examples/notebooks/
    finds the repository's build); build/bin/runner of the checkout this package was installed from
    (`pip install ./python` remembers it); `runner` on PATH. RunnerNotFound lists each place."""
    env = os.environ.get("ATTNLAB_RUNNER")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise RunnerNotFound(f"ATTNLAB_RUNNER={env} is not an executable file")
        return env
    folder = os.path.abspath(os.getcwd())
    while True:
        found = _runner_in(folder)
        if found:
            return found
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    looked = ["$ATTNLAB_RUNNER (unset)", f"build/bin/runner in {os.getcwd()} and the folders above it"]
    repo = _package_repository()
    if repo:
        found = _runner_in(repo)
        if found:
            return found
        looked.append(f"build/bin/runner in {repo}, the checkout this package was installed from (not built "
                      f"yet: scripts/build build runtime there)")
    else:
        looked.append("the checkout this package was installed from (none known: it was not installed from one "
                      "with `pip install ./python`)")
    on_path = shutil.which("runner")
    if on_path:
        return on_path
    looked.append("`runner` on PATH")
    raise RunnerNotFound("no attnlab runner found; looked at " + "; ".join(looked) +
                         ". Set ATTNLAB_RUNNER to the runner (build/bin/runner in the repository)")


def repository() -> str | None:
    """The attnlab checkout runs resolve experiment files and data against: the one whose
    build/bin/runner find_runner() finds, else the one this package was installed from; None when
    neither is known (an installed runner and package)."""
    try:
        runner = os.path.abspath(find_runner())
    except RunnerNotFound:
        runner = None
    for path in (runner, os.path.realpath(runner)) if runner else ():  # as found, then a link followed
        if os.path.basename(os.path.dirname(path)) == "bin":  # <checkout>/<build>/bin/runner
            checkout = os.path.dirname(os.path.dirname(os.path.dirname(path)))
            if _is_repository(checkout):
                return checkout
    return _package_repository()


def _inside(path: str, folder: str) -> bool:
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def resolve_experiment(experiment, cwd=None) -> str:
    """An experiment file as given when it exists (relative to cwd); else, for a relative name, the
    repository's file of that name: `experiments/x.yaml` under the repository, or a bare `x.yaml`
    (or `x`, or `tests/x.yaml`) under its experiments/. FileNotFoundError says where it looked."""
    experiment = _path_arg(experiment, "experiment")
    base = os.getcwd() if cwd is None else os.path.abspath(cwd)
    here = experiment if os.path.isabs(experiment) else os.path.join(base, experiment)
    if os.path.exists(here) or os.path.isabs(experiment):
        return experiment
    looked = [here]
    repo = repository()
    if repo:
        names = [experiment] if os.path.splitext(experiment)[1] else [experiment, experiment + ".yaml"]
        for name in names:
            for candidate in (os.path.join(repo, name), os.path.join(repo, "experiments", name)):
                if os.path.isfile(candidate):
                    return candidate
                if candidate not in looked:
                    looked.append(candidate)
    raise FileNotFoundError(f"experiment file {experiment!r} not found: looked at {', '.join(looked)}"
                            + ("" if repo else " (no attnlab repository known: give the file's path)"))


def data_dir(cwd=None) -> str:
    """Where the runs this package starts keep their datasets (the runner's data_dir default,
    passed as ATTNLAB_DATA_DIR): $ATTNLAB_DATA_DIR; else the repository's datasets/ when the run
    starts inside the repository (where README's commands keep them); else one cache for every
    folder, ${ATTNLAB_CACHE:-~/.cache/attnlab}/data. An experiment's own `data_dir:` wins."""
    env = os.environ.get("ATTNLAB_DATA_DIR")
    if env:
        return env
    base = os.getcwd() if cwd is None else os.path.abspath(cwd)
    repo = repository()
    if repo and _inside(base, repo):
        return os.path.join(repo, "datasets")
    cache = os.environ.get("ATTNLAB_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "attnlab")
    return os.path.join(cache, "data")


def _run_env(env, cwd):
    """The runner's extra environment: the caller's env, and ATTNLAB_DATA_DIR (data_dir())."""
    extra = dict(env or {})
    if "ATTNLAB_DATA_DIR" not in extra:
        extra["ATTNLAB_DATA_DIR"] = data_dir(cwd)
    return extra


def _value(v) -> str:
    """A Python value as the runner's override text (YAML)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_value(x)}" for k, x in v.items()) + "}"
    return str(v)


def _overrides(overrides, name: str = "overrides") -> list[str]:
    if overrides is None:
        return []
    if isinstance(overrides, dict):
        for k in overrides:
            if not isinstance(k, str):
                raise TypeError(f"{name}: a key must be a 'key.path' string; got {k!r}")
        return [f"{k}={_value(v)}" for k, v in overrides.items()]
    if isinstance(overrides, (str, bytes)):
        raise TypeError(f"{name} must be a dict ({{'trainer.max_epochs': 10}}) or a list of 'key=value' strings; "
                        f"got the string {overrides!r} (put it in a list: [{overrides!r}])")
    if not isinstance(overrides, (list, tuple)):
        raise TypeError(f"{name} must be a dict ({{'trainer.max_epochs': 10}}) or a list of 'key=value' strings; "
                        f"got {type(overrides).__name__} {overrides!r}")
    for o in overrides:
        if not isinstance(o, str) or "=" not in o:
            raise TypeError(f"{name}: each item must be a 'key=value' string; got {o!r}")
    return list(overrides)


def _path_arg(value, name: str) -> str:
    """A path argument (str or os.PathLike), as a string; TypeError naming the argument otherwise."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or os.PathLike); got {type(value).__name__} {value!r}")
    return os.fspath(value)


_WRITTEN = re.compile(r"(?:^|\s|; )(?:partial )?results in (.+)$")


def _written_path(lines, cwd) -> str | None:
    """The results file the runner named in its last lines ("completed; results in X", "...;
    partial results in X", "training diverged (...); results in X"), under cwd when relative."""
    for line in reversed(list(lines)):
        m = _WRITTEN.search(line)
        if m:
            found = m.group(1).strip()
            return found if os.path.isabs(found) or cwd is None else os.path.join(cwd, found)
    return None


def command_for(experiment, overrides=None, *, results=None, resume=None, plugin_path=(),
                overwrite: bool = False) -> list[str]:
    """The runner's command line for run()'s arguments."""
    cmd = [find_runner(), resolve_experiment(experiment), *_overrides(overrides)]
    if resume is not None:
        cmd += ["--resume", os.fspath(resume)]
    elif results is not None:
        cmd += ["--results", os.fspath(results)]
        if overwrite:
            cmd.append("--overwrite")
    for p in plugin_path:
        cmd += ["--plugin-path", os.fspath(p)]
    return cmd


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = shell.get_ipython()
    except AttributeError:
        return False
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


class _Progress:
    """A tqdm bar in Jupyter (when tqdm is installed), plain lines elsewhere. The bar counts `unit`s
    (a run's epochs, a sweep's runs). A widget's state is not kept in a saved notebook, so when the
    bar closes its last state is printed as a line of text too."""

    def __init__(self, enabled: bool, desc: str, unit: str = "epoch"):
        self.bar = None
        self.enabled = enabled
        self.desc = desc
        self.unit = unit
        self.last = None
        if enabled and _in_notebook():
            try:
                from tqdm.notebook import tqdm
                self.bar = tqdm(total=None, desc=desc, unit=unit)
            except Exception:  # tqdm or ipywidgets missing: plain lines
                self.bar = None

    def update(self, done: int, total: int, text: str, line: str):
        self.last = (done, total, text)
        if self.bar is not None:
            if self.bar.total != total:
                self.bar.reset(total=total)
            self.bar.n = done
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.refresh()
        elif self.enabled:
            print(line, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()
            if self.last is not None:
                done, total, text = self.last
                print(f"{self.desc}: {done}/{total} {self.unit}s, {text}", flush=True)


_EPOCH = re.compile(r"^epoch\s+(\d+)/(\d+)\s+(.*)$")
_SWEEP = re.compile(r"^sweep: (\d+)/(\d+) done, (.*)$")


def _stream(cmd: list[str], *, progress: bool, log: bool, desc: str, cwd=None, env=None, unit: str = "epoch",
            tail: collections.deque | None = None):
    """Runs cmd, its output through the progress bar and the log; returns (returncode, last lines).
    A KeyboardInterrupt sends SIGINT to the runner, waits for it to mark its files, keeps what it
    printed meanwhile in `tail` (when given), and re-raises."""
    bar = _Progress(progress, desc, unit)
    tail = collections.deque(maxlen=200) if tail is None else tail
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd,
                            env=None if env is None else {**os.environ, **env},
                            start_new_session=True, bufsize=1, text=True, errors="replace")
    try:
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            tail.append(line)
            m = _EPOCH.match(line) or _SWEEP.match(line)
            if m:
                bar.update(int(m.group(1)), int(m.group(2)), m.group(3), line)
            elif log:
                print(line, flush=True)
        return proc.wait(), "\n".join(tail)
    except KeyboardInterrupt:
        _stop(proc)
        try:  # its last lines, which name the file it marked
            tail.extend(proc.stdout.read().splitlines())
        except (OSError, ValueError):
            pass
        raise
    finally:
        bar.close()
        if proc.poll() is None:  # an exception other than KeyboardInterrupt: do not leave it running
            _stop(proc)
        proc.stdout.close()


def _stop(proc: subprocess.Popen):
    """SIGINT, as Ctrl-C at a terminal: the runner marks its results `interrupted` and exits."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGINT)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _config_error(log: str) -> str | None:
    for line in log.splitlines():
        if line.startswith("config error: ") or " config error: " in line:
            return line[line.index("config error: "):]
    return None


def _last_error(log: str) -> str:
    lines = [l for l in log.splitlines() if "error" in l.lower()]
    return lines[-1] if lines else (log.splitlines()[-1] if log else "no output")


_IF_EXISTS = ("error", "overwrite", "resume")


def run(experiment, overrides=None, *, results=None, resume=None, if_exists: str = "error", progress: bool = True,
        log: bool = True, plugin_path=(), cwd=None, env=None):
    """Trains and evaluates an experiment with the runner and returns its attnlab.Run.

    overrides: {"trainer.max_epochs": 10} (or ["trainer.max_epochs=10"]); results: the results file
    (default: the runner's own, results/<experiment>-<UTC time>.h5 under cwd, as at a terminal);
    resume: a results file to continue
    (`runner --resume`). if_exists: what to do when `results` (or its checkpoint folder) already
    exists: "error" (the default: FileExistsError, nothing is touched), "overwrite" (a new run
    replaces it: `runner --overwrite`) or "resume" (continue that run: `runner --resume`).
    ConfigError carries the runner's one-line message; RunFailed a run that failed (its `.run` when
    a file was written); a diverged run is returned (its status says so)."""
    from .results import Run
    experiment = _path_arg(experiment, "experiment")
    _overrides(overrides)  # wrong types are a TypeError here, before anything starts
    if results is not None:
        _path_arg(results, "results")
    if resume is not None:
        _path_arg(resume, "resume")
    if not isinstance(if_exists, str) or if_exists not in _IF_EXISTS:
        raise ValueError(f"if_exists must be one of {', '.join(map(repr, _IF_EXISTS))}; got {if_exists!r}")
    if resume is not None:
        results = os.fspath(resume)
    elif results is not None:
        results = os.fspath(results)
    # No results= : the runner names the file as it does at a terminal (a name it never reuses),
    # and says which in its last lines.
    path = None if results is None else results if os.path.isabs(results) or cwd is None else os.path.join(cwd, results)
    overwrite = False
    if path is not None and resume is None and (os.path.lexists(path) or os.path.lexists(path + ".ckpt")):
        if if_exists == "overwrite":
            overwrite = True
        elif if_exists == "resume" and os.path.lexists(path):
            resume = results
        elif os.path.lexists(path):
            raise FileExistsError(f"results file {path} already exists: pass if_exists='resume' to continue that "
                                  f"run, if_exists='overwrite' to replace it, or another results=")
        else:
            raise FileExistsError(f"checkpoint folder {path}.ckpt already exists (an earlier run's, without its "
                                  f"results file): pass if_exists='overwrite' to replace it, or another results=")
    find_runner()  # a missing runner is what to say first
    cmd = command_for(resolve_experiment(experiment, cwd), overrides, results=results, resume=resume,
                      plugin_path=plugin_path, overwrite=overwrite)
    lines = collections.deque(maxlen=200)
    try:
        code, tail = _stream(cmd, progress=progress, log=log, desc=os.path.basename(os.fspath(experiment)),
                             cwd=cwd, env=_run_env(env, cwd), tail=lines)
    except KeyboardInterrupt:
        path = path or _written_path(lines, cwd)
        if path is None or not os.path.exists(path):
            raise RunInterrupted("stopped before the runner wrote a results file") from None
        raise RunInterrupted(f"stopped: {path} says interrupted", run=Run(path)) from None
    path = path or _written_path(lines, cwd)
    written = Run(path) if path is not None and os.path.exists(path) else None
    if code == 0 or (code == 2 and written is not None and written.attrs.get("status") == "diverged"):
        return written
    if code == 130:
        raise RunInterrupted(f"the runner was interrupted: {path} says interrupted" if written is not None
                             else "the runner was interrupted before it wrote a results file", run=written)
    message = _config_error(tail)
    if message and written is None:
        raise ConfigError(message)
    raise RunFailed(f"runner exited with status {code}: {_last_error(tail)}", run=written, returncode=code, log=tail)


def _same_sweep(folder: str, experiment: str, axes: dict, overrides: list[str]) -> str | None:
    """None when the sweep folder holds this very sweep, else what differs."""
    from .runs import _read_manifest
    spec = _read_manifest(folder).get("sweep", {}) or {}
    if os.path.realpath(str(spec.get("experiment", ""))) != os.path.realpath(experiment):
        return f"its experiment is {spec.get('experiment')}"
    have = {k: [_value(v) for v in (vs if isinstance(vs, list) else [vs])] for k, vs in (spec.get("axes") or {}).items()}
    want = {k: ([vs] if isinstance(vs, str) else [_value(v) for v in vs]) for k, vs in axes.items()}
    if have != want:
        return f"its axes are {have}"
    old = spec.get("overrides") or []
    old = [f"{k}={_value(v)}" for k, v in old.items()] if isinstance(old, dict) else [str(o) for o in old]
    if sorted(old) != sorted(overrides):
        return f"its overrides are {old}"
    return None


def sweep(experiment, axes: dict, overrides=None, *, output=None, jobs: int = 1, progress: bool = True,
          log: bool = False, resume: bool = False, if_exists: str = "error", cwd=None, env=None):
    """Runs `runner sweep` over the axes ({"seed": [0, 1, 2], "model.encoder.norm": ["first", "last"]},
    or a string such as "range(0,5)") and returns attnlab.runs(output). With resume=True, experiment
    is the sweep folder and its missing runs are run again. if_exists="resume": when output already
    holds this same sweep (experiment, axes, overrides), run only what is missing there (nothing
    when it is complete), so that a notebook can be run again; "error" (the default) leaves the
    runner's refusal."""
    from .runs import runs as read_runs
    from .errors import AttnlabError
    if if_exists not in ("error", "resume"):
        raise ValueError(f"if_exists={if_exists!r}: expected 'error' or 'resume'")
    _path_arg(experiment, "experiment")
    if not isinstance(axes, dict):
        raise TypeError(f"axes must be a dict of key -> values ({{'seed': [0, 1, 2]}} or {{'seed': 'range(0,3)'}}); "
                        f"got {type(axes).__name__} {axes!r}")
    for k, values in axes.items():
        if not isinstance(k, str):
            raise TypeError(f"axes: a key must be a 'key.path' string; got {k!r}")
        if not isinstance(values, (str, list, tuple, range)):
            raise TypeError(f"axes[{k!r}] must be a list of values or a string such as 'range(0,3)'; "
                            f"got {type(values).__name__} {values!r}")
    _overrides(overrides)
    if output is not None:
        _path_arg(output, "output")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a whole number of at least 1; got {jobs!r}")
    runner = find_runner()
    if not resume:
        experiment = resolve_experiment(experiment, cwd)
    if not resume and output is not None and if_exists == "resume":
        folder = os.fspath(output) if os.path.isabs(os.fspath(output)) or cwd is None else os.path.join(cwd, output)
        if os.path.exists(os.path.join(folder, "sweep.yaml")):
            differs = _same_sweep(folder, os.fspath(experiment), axes, _overrides(overrides))
            if differs:
                raise AttnlabError(f"{folder} holds another sweep ({differs}); choose another output")
            return sweep(folder, {}, output=output, jobs=jobs, progress=progress, log=log, resume=True, cwd=cwd,
                         env=env)
    if resume:
        output = os.fspath(experiment)
        cmd = [runner, "sweep", output, "--resume", "--jobs", str(jobs)]
    else:
        if output is None:
            stem = os.path.splitext(os.path.basename(os.fspath(experiment)))[0]
            now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            output = os.path.join("results", f"sweep-{stem}-{now}")
        cmd = [runner, "sweep", os.fspath(experiment)]
        for k, values in axes.items():
            if isinstance(values, str):
                cmd.append(f"{k}={values}")
            else:
                cmd.append(f"{k}=" + ",".join(_value(v) for v in values))
        cmd += _overrides(overrides) + ["-o", os.fspath(output), "--jobs", str(jobs)]
    folder = output if os.path.isabs(output) or cwd is None else os.path.join(cwd, output)
    try:
        code, tail = _stream(cmd, progress=progress, log=log, desc="sweep", cwd=cwd, env=_run_env(env, cwd),
                             unit="run")
    except KeyboardInterrupt:
        raise RunInterrupted(f"stopped: the sweep in {folder} marked its running runs interrupted",
                             run=read_runs(folder) if os.path.isdir(folder) else None) from None
    if code == 130:
        raise RunInterrupted(f"the sweep in {folder} was interrupted", run=read_runs(folder))
    if code != 0:
        message = _config_error(tail)
        if message and not os.path.exists(os.path.join(folder, "sweep.yaml")):
            raise ConfigError(message)
        raise RunFailed(f"runner sweep exited with status {code} (some runs failed): {_last_error(tail)}",
                        run=read_runs(folder) if os.path.isdir(folder) else None, returncode=code, log=tail)
    return read_runs(folder)


class Report:
    """The runner's HTML report: a bare `Report` in a cell shows it inline; `.path` is the file."""

    def __init__(self, path: str):
        self.path = path

    def __repr__(self) -> str:
        return f"<attnlab.Report {self.path}>"

    def _repr_html_(self) -> str:
        with open(self.path, encoding="utf-8") as f:
            page = f.read()
        return (f'<iframe srcdoc="{html.escape(page, quote=True)}" style="width:100%;height:720px;border:1px solid #ccc">'
                f"</iframe>")


def report(*sources, output=None, group_by=None, cwd=None) -> Report:
    """`runner report` on results files or folders; returns a Report shown inline in Jupyter."""
    if not sources:
        raise ValueError("report() needs results files or folders")
    srcs = [os.fspath(s) for s in sources if s is not None]
    if not srcs:
        raise ValueError("report() got no results file or folder (a runs table read from files has no path)")
    if output is None:
        base = srcs[0].rstrip("/")
        output = (os.path.join(base, "report.html") if os.path.isdir(base) else os.path.splitext(base)[0] + ".html")
    cmd = [find_runner(), "report", *srcs, "-o", os.fspath(output)]
    if group_by:
        cmd += ["--group-by", ",".join(group_by) if isinstance(group_by, (list, tuple)) else group_by]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if done.returncode != 0:
        from .errors import ResultsError
        raise ResultsError((done.stderr.strip() or done.stdout.strip()).splitlines()[-1])
    return Report(output if os.path.isabs(output) or cwd is None else os.path.join(cwd, output))
