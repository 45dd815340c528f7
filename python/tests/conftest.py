"""Fixtures: real results files written by the real runner (ATTNLAB_RUNNER, set by ctest
python.attnlab). A missing runner or data mirror fails the tests; nothing here skips."""
import os
import subprocess

import pytest

SOURCE = os.environ.get("ATTNLAB_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def experiment(name: str) -> str:
    return os.path.join(SOURCE, "experiments", name)


@pytest.fixture(scope="session", autouse=True)
def _scratch_cwd(tmp_path_factory):
    """The runs' relative paths (results/) land in a scratch folder, never in the folder pytest was
    started from (a checkout's python/tests/ once got the fra-eng corpus that way)."""
    before = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    # One data folder for the session's runs (the runner's data_dir default; attnlab.run passes it
    # on), not the user's cache (docs/PYTHON.md, "Working outside the repository").
    data = os.environ.get("ATTNLAB_DATA_DIR")
    os.environ["ATTNLAB_DATA_DIR"] = data or str(tmp_path_factory.mktemp("data"))
    yield
    if data is None:
        del os.environ["ATTNLAB_DATA_DIR"]
    os.chdir(before)


@pytest.fixture(scope="session")
def runner() -> str:
    path = os.environ.get("ATTNLAB_RUNNER")
    assert path and os.access(path, os.X_OK), \
        "ATTNLAB_RUNNER must name the built runner (ctest python.attnlab sets it; scripts/test builds it)"
    assert os.environ.get("ATTNLAB_DATA_MIRROR"), "ATTNLAB_DATA_MIRROR must name the corpora (scripts/test sets it)"
    return path


def run_runner(runner: str, *args: str, cwd=None, check=True) -> subprocess.CompletedProcess:
    done = subprocess.run([runner, *args], capture_output=True, text=True, cwd=cwd)
    if check:
        assert done.returncode == 0, f"runner {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="session")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("attnlab-py")


@pytest.fixture(scope="session")
def d2l_run(runner, scratch) -> str:
    """d2l 0.17's Transformer for 4 epochs with checkpoints, then `runner eval` on train (d2l 0.17 trains on all 600 pairs; greedy) and
    with beam 2: a translation run with /samples, /attention and /eval."""
    path = str(scratch / "d2l017.h5")
    run_runner(runner, experiment("transformer_fra_eng_d2l017.yaml"), "trainer.max_epochs=4",
               "trainer.checkpoints=true", "threads=1", "--results", path)
    run_runner(runner, "eval", path, "--split", "train")
    run_runner(runner, "eval", path, "--split", "train", "--beam", "2")
    return path


@pytest.fixture(scope="session")
def corners_run(runner, scratch) -> str:
    """The tiny corner-sequence run: a regression run with declared figures and /predictions."""
    path = str(scratch / "corners.h5")
    run_runner(runner, experiment("tests/tiny_corners.yaml"), "threads=1", "--results", path)
    return path


@pytest.fixture(scope="session")
def sweep_dir(runner, scratch) -> str:
    """A 2 x 2 sweep (encoder norm first/last, seeds 0 and 1) of d2l 0.17's Transformer, 3 epochs."""
    out = str(scratch / "sweep")
    run_runner(runner, "sweep", experiment("transformer_fra_eng_d2l017.yaml"), "model.encoder.norm=first,last",
               "seed=0,1", "trainer.max_epochs=3", "-o", out, "--jobs", "2")
    return out
