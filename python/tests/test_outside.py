"""Working outside the repository (docs/PYTHON.md, "Working outside the repository"): the package,
installed with pip from a checkout, run from a folder of its own with ATTNLAB_RUNNER unset, finds
that checkout's runner and experiments, and keeps the corpus in one cache, never in that folder."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import SOURCE

SCRIPT = r"""
import json, os, sys
import attnlab
out = {"package": attnlab.__file__, "runner": attnlab.find_runner(), "data_dir": attnlab.data_dir(),
       "inside": attnlab.data_dir(cwd=sys.argv[1]),
       "bare": attnlab.resolve_experiment("transformer_fra_eng_d2l017")}
try:
    attnlab.resolve_experiment("experiments/no_such_experiment.yaml")
except FileNotFoundError as e:
    out["missing"] = str(e)
run = attnlab.run("experiments/transformer_fra_eng_d2l017.yaml", {"trainer.max_epochs": 1, "threads": 1},
                  progress=False, log=False)
out.update(status=run.status, path=os.path.abspath(run.path), config_data_dir=run.config["data_dir"])
print(json.dumps(out))
"""

NOT_FOUND = r"""
import attnlab
try:
    attnlab.find_runner()
except attnlab.RunnerNotFound as e:
    print(e)
"""


@pytest.fixture
def outside():
    """A folder in no checkout (pytest's own folders are under the build folder, in this one)."""
    folder = tempfile.mkdtemp(prefix="attnlab-outside-")
    yield pathlib.Path(folder)
    shutil.rmtree(folder, ignore_errors=True)


def _install(tmp_path, source, name):
    site = tmp_path / name
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           "--target", str(site), str(source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return site


def _copy_package(to):
    shutil.copytree(os.path.join(SOURCE, "python"), to,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests"))


def _outside_env(tmp_path, site):
    """A notebook's environment: no ATTNLAB_RUNNER, no data dir, the package from `site` alone."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATTNLAB_RUNNER", "ATTNLAB_DATA_DIR", "ATTNLAB_SOURCE_DIR", "PYTHONPATH")}
    env.update(PYTHONPATH=str(site), ATTNLAB_CACHE=str(tmp_path / "cache"), PATH="/usr/bin:/bin")
    return env


def test_a_run_from_a_folder_outside_the_repository(outside, runner):
    tmp_path = outside
    # A checkout: its python/ (what `pip install ./python` is given), experiments/ and build/bin/runner.
    checkout = tmp_path / "checkout"
    _copy_package(checkout / "python")
    os.symlink(os.path.join(SOURCE, "experiments"), checkout / "experiments")
    (checkout / "build" / "bin").mkdir(parents=True)
    os.symlink(runner, checkout / "build" / "bin" / "runner")
    site = _install(tmp_path, checkout / "python", "site")
    notebook = tmp_path / "notebook"
    notebook.mkdir()
    (checkout / "sub").mkdir()
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(checkout / "sub")], capture_output=True, text=True,
                          cwd=notebook, env=_outside_env(tmp_path, site), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["package"].startswith(str(site)), out
    assert out["runner"] == str(checkout / "build" / "bin" / "runner"), out
    cache = str(tmp_path / "cache" / "data")
    assert out["data_dir"] == cache and out["config_data_dir"] == cache, out
    assert out["inside"] == str(checkout / "datasets"), out  # a run inside the checkout: its datasets/
    assert os.path.samefile(out["bare"], os.path.join(SOURCE, "experiments", "transformer_fra_eng_d2l017.yaml"))
    assert "experiment file 'experiments/no_such_experiment.yaml' not found: looked at " in out["missing"], out
    assert str(checkout / "experiments" / "no_such_experiment.yaml") in out["missing"], out
    assert out["status"] == "completed", out
    assert out["path"].startswith(str(notebook / "results") + os.sep), out
    # The corpus is in the cache, once; the notebook's folder holds the results alone.
    assert (tmp_path / "cache" / "data" / "fra-eng" / "fra-eng.zip").is_file()
    assert sorted(os.listdir(notebook)) == ["results"], os.listdir(notebook)
    assert [f for f in os.listdir(notebook / "results") if not f.endswith(".h5")] == []


def test_find_runner_says_where_it_looked(outside):
    tmp_path = outside
    _copy_package(tmp_path / "src")  # a copy in no checkout: no repository to remember
    site = _install(tmp_path, tmp_path / "src", "site")
    done = subprocess.run([sys.executable, "-c", NOT_FOUND], capture_output=True, text=True, cwd=tmp_path,
                          env=_outside_env(tmp_path, site))
    assert done.returncode == 0, done.stderr
    message = done.stdout.strip()
    assert message.startswith("no attnlab runner found; looked at $ATTNLAB_RUNNER (unset); "
                              f"build/bin/runner in {tmp_path} and the folders above it; "), message
    assert "the checkout this package was installed from (none known" in message, message
    assert message.endswith("`runner` on PATH. Set ATTNLAB_RUNNER to the runner (build/bin/runner in the repository)")
