"""attnlab.run, sweep and report start the real runner."""
import _thread
import os
import threading

import h5py
import pytest

import attnlab
from conftest import experiment


def test_run_returns_the_run(runner, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_RUNNER", runner)
    run = attnlab.run(experiment("tests/tiny_corners.yaml"), {"trainer.max_epochs": 2, "threads": 1},
                      results=tmp_path / "r.h5")
    assert run.status == "completed" and run.epochs_done == 2
    out = capsys.readouterr().out
    assert "epoch 1/2" in out and "epoch 2/2" in out  # plain progress lines outside Jupyter
    assert "completed; results in" in out            # the runner's log, streamed


def test_default_results_path_under_cwd(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLAB_RUNNER", runner)
    run = attnlab.run(experiment("tests/tiny_corners.yaml"), ["trainer.max_epochs=1", "threads=1"],
                      cwd=tmp_path, progress=False, log=False)
    assert os.path.dirname(os.path.abspath(run.path)) == str(tmp_path / "results")
    assert os.path.basename(run.path).startswith("tiny_corners-")


def test_config_error_is_the_runners_message(runner, monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNLAB_RUNNER", runner)
    with pytest.raises(attnlab.ConfigError) as e:
        attnlab.run(experiment("tests/tiny_corners.yaml"), {"trainer.max_epochz": 2}, results=tmp_path / "x.h5",
                    log=False)
    msg = str(e.value)
    assert msg.startswith("config error: ") and "max_epochz" in msg and "did you mean 'max_epochs'" in msg
    assert "\n" not in msg
    assert not (tmp_path / "x.h5").exists()
    with pytest.raises(attnlab.ConfigError, match="config error: .*nope.yaml"):
        attnlab.run(str(tmp_path / "nope.yaml"), log=False)


def test_missing_runner(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNLAB_RUNNER", str(tmp_path / "runner"))
    with pytest.raises(attnlab.RunnerNotFound, match=r"ATTNLAB_RUNNER=.*runner is not an executable file"):
        attnlab.run("x.yaml")


def test_keyboard_interrupt_stops_the_runner_cleanly(runner, tmp_path, monkeypatch):
    """The notebook's stop button: a KeyboardInterrupt while the runner trains."""
    monkeypatch.setenv("ATTNLAB_RUNNER", runner)
    path = tmp_path / "stopped.h5"
    started = threading.Event()

    def interrupt_when_training():
        import time
        for _ in range(600):
            if path.exists():
                try:
                    with h5py.File(path, "r") as f:
                        if "metrics/train/loss" in f and f["metrics/train/loss"].shape[0] >= 1:
                            break
                except OSError:
                    pass
            time.sleep(0.1)
        started.set()
        _thread.interrupt_main()

    threading.Thread(target=interrupt_when_training, daemon=True).start()
    with pytest.raises(attnlab.RunInterrupted) as e:
        attnlab.run(experiment("transformer_fra_eng_d2l017.yaml"), {"trainer.max_epochs": 2000, "threads": 1},
                    results=path, progress=False, log=False)
    assert started.is_set()
    assert isinstance(e.value, KeyboardInterrupt)
    run = e.value.run
    assert run is not None and run.status == "interrupted"
    assert "interrupted" in (run.error or "") or run.attrs.get("interrupted_during")
    assert 1 <= run.epochs_done < 2000
    assert not os.path.exists(str(path) + ".lock")  # the runner let go of the file


def test_sweep_and_report(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLAB_RUNNER", runner)
    runs = attnlab.sweep(experiment("tests/tiny_corners.yaml"), axes={"model.norm": ["first", "last"]},
                         overrides={"trainer.max_epochs": 1}, output=tmp_path / "sw", jobs=2)
    assert len(runs) == 2 and sorted(runs["model.norm"]) == ["first", "last"]
    rep = attnlab.report(runs.path, group_by=["model.norm"])
    assert rep.path == os.path.join(str(tmp_path / "sw"), "report.html") and os.path.getsize(rep.path) > 10000
    assert rep._repr_html_().startswith("<iframe srcdoc=")
    with pytest.raises(attnlab.ConfigError, match="config error: "):
        attnlab.sweep(experiment("tests/tiny_corners.yaml"), axes={"model.nrm": ["first", "last"]},
                      output=tmp_path / "bad")
