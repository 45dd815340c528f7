"""attnlab.run, sweep and report start the real runner."""
import _thread
import os
import re
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
    # The runner's own name, as at a terminal: the experiment's name and the UTC time to the second.
    assert re.fullmatch(r"tiny_corners-\d{8}-\d{6}(-\d+)?\.h5", os.path.basename(run.path)), run.path
    again = attnlab.run(experiment("tests/tiny_corners.yaml"), ["trainer.max_epochs=1", "threads=1"],
                        cwd=tmp_path, progress=False, log=False)
    assert again.path != run.path and os.path.exists(run.path)  # a second run never takes the first's name


def test_an_existing_results_file_is_kept_unless_asked(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLAB_RUNNER", runner)
    exp = experiment("tests/tiny_corners.yaml")
    path = tmp_path / "r.h5"
    opts = {"trainer.max_epochs": 1, "threads": 1, "trainer.checkpoints": True}
    quiet = {"progress": False, "log": False}
    assert attnlab.run(exp, opts, results=path, **quiet).status == "completed"
    before = path.read_bytes()
    with pytest.raises(FileExistsError, match=r"results file .*r\.h5 already exists: pass if_exists='resume' to "
                                              r"continue that run, if_exists='overwrite' to replace it"):
        attnlab.run(exp, opts, results=path, **quiet)
    assert path.read_bytes() == before
    for bad in ("replace", 1, None):
        with pytest.raises(ValueError, match="if_exists must be one of 'error', 'overwrite', 'resume'"):
            attnlab.run(exp, opts, results=path, if_exists=bad, **quiet)
    assert path.read_bytes() == before
    # "resume" continues the run in that file (here to 2 epochs); "overwrite" starts a new one.
    resumed = attnlab.run(exp, {**opts, "trainer.max_epochs": 2}, results=path, if_exists="resume", **quiet)
    assert resumed.status == "completed" and resumed.epochs_done == 2
    assert "resume_command_line" in resumed.attrs
    again = attnlab.run(exp, {**opts, "seed": 5}, results=path, if_exists="overwrite", **quiet)
    assert again.status == "completed" and again.epochs_done == 1 and again.attrs["seed"] == 5
    assert "resume_command_line" not in again.attrs
    # A checkpoint folder alone (its results file deleted) is an earlier run's too.
    path.unlink()
    with pytest.raises(FileExistsError, match=r"checkpoint folder .*r\.h5\.ckpt already exists"):
        attnlab.run(exp, opts, results=path, if_exists="resume", **quiet)


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


def test_keyboard_interrupt_names_the_file_the_runner_chose(runner, tmp_path, monkeypatch):
    """Without results=, the runner names the file; an interrupt still returns it as .run."""
    monkeypatch.setenv("ATTNLAB_RUNNER", runner)
    folder = tmp_path / "results"

    def interrupt_when_training():
        import time
        for _ in range(600):
            for p in (folder.glob("*.h5") if folder.exists() else []):
                try:
                    with h5py.File(p, "r") as f:
                        if "metrics/train/loss" in f and f["metrics/train/loss"].shape[0] >= 1:
                            _thread.interrupt_main()
                            return
                except OSError:
                    pass
            time.sleep(0.1)
        _thread.interrupt_main()

    threading.Thread(target=interrupt_when_training, daemon=True).start()
    with pytest.raises(attnlab.RunInterrupted) as e:
        attnlab.run(experiment("transformer_fra_eng_d2l017.yaml"), {"trainer.max_epochs": 2000, "threads": 1},
                    cwd=tmp_path, progress=False, log=False)
    run = e.value.run
    assert run is not None and run.status == "interrupted"
    assert os.path.dirname(run.path) == str(folder)
    assert re.fullmatch(r"transformer_fra_eng_d2l017-\d{8}-\d{6}(-\d+)?\.h5", os.path.basename(run.path)), run.path


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


def test_the_progress_bar_counts_its_unit_and_leaves_its_last_state_as_text(monkeypatch, capsys):
    """In Jupyter the bar is a widget, whose state a saved notebook loses: its last state is printed
    when it closes. A sweep's bar counts runs, a run's epochs."""
    import sys
    import types
    from attnlab import runner as r
    made = []

    class FakeBar:
        def __init__(self, total, desc, unit):
            self.total, self.desc, self.unit, self.n = total, desc, unit, 0
            made.append(self)

        def reset(self, total):
            self.total = total

        def set_postfix_str(self, text, refresh):
            self.postfix = text

        def refresh(self):
            pass

        def close(self):
            self.closed = True

    fake = types.ModuleType("tqdm.notebook")
    fake.tqdm = FakeBar
    monkeypatch.setitem(sys.modules, "tqdm.notebook", fake)
    monkeypatch.setattr(r, "_in_notebook", lambda: True)
    sweep = r._Progress(True, "sweep", "run")
    sweep.update(3, 4, "1 running", "sweep: 3/4 done, 1 running")
    sweep.close()
    run = r._Progress(True, "tiny_corners.yaml")
    run.update(2, 2, "loss 0.31", "epoch 2/2 loss 0.31")
    run.close()
    assert [(b.unit, b.total, b.n, b.closed) for b in made] == [("run", 4, 3, True), ("epoch", 2, 2, True)]
    assert capsys.readouterr().out == "sweep: 3/4 runs, 1 running\ntiny_corners.yaml: 2/2 epochs, loss 0.31\n"
