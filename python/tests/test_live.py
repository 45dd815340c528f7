"""Reading a run while the runner trains it (docs/RESULTS.md, "Reading a live run")."""
import os
import subprocess
import time

import attnlab
from conftest import experiment

EPOCHS = 60


def test_a_live_run_reads_whole_epochs(runner, tmp_path):
    path = str(tmp_path / "live.h5")
    proc = subprocess.Popen([runner, experiment("transformer_fra_eng_d2l017.yaml"), f"trainer.max_epochs={EPOCHS}",
                             "threads=1", "--results", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    seen = set()
    reads = 0
    deadline = time.monotonic() + 240
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if not os.path.exists(path):
                time.sleep(0.05)
                continue
            try:
                run = attnlab.load(path)
            except attnlab.ResultsError as e:
                # Only while the runner creates the file: it exists before its first write.
                assert seen == set(), f"after epochs {sorted(seen)}: {e}"
                assert ("not an HDF5 file" in str(e) or "no root attribute" in str(e)
                        or "cannot be read yet" in str(e)), str(e)
                time.sleep(0.05)
                continue
            metrics = run.metrics
            counts = {s: int((metrics.series == s).sum()) for s in ("train/loss", "epoch/index")}
            assert len(set(counts.values())) == 1, f"a read saw part of an epoch: {counts}"
            if run.attrs["status"] == "running":
                assert run.live, "a running file whose runner is alive"
                seen.add(counts["train/loss"])
                if counts["train/loss"]:
                    h = run.history("train/loss")
                    assert list(h.index) == list(range(1, len(h) + 1))  # whole epochs, numbered from 1
            reads += 1
            time.sleep(0.1)
        assert proc.wait(timeout=240) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    running = sorted(n for n in seen if n > 0)
    assert len(running) >= 3, f"saw the run running at {sorted(seen)} epochs in {reads} reads"
    assert reads >= 10, reads
    final = attnlab.load(path)
    assert final.status == "completed" and final.epochs_done == EPOCHS and not final.live


def test_a_dead_running_file_is_not_live(runner, tmp_path):
    """A run killed outright leaves `running` and no writer: live is False."""
    path = str(tmp_path / "killed.h5")
    proc = subprocess.Popen([runner, experiment("transformer_fra_eng_d2l017.yaml"), "trainer.max_epochs=2000",
                             "threads=1", "--results", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if attnlab.load(path).epochs_done >= 2:
                    break
            except attnlab.ResultsError:
                pass
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()
    run = attnlab.load(path)
    assert run.status == "running" and not run.live and run.epochs_done >= 2
