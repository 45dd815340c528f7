"""attnlab.runs: a sweep folder as a DataFrame with its manifest."""
import os
import shutil

import numpy as np
import pytest

import attnlab


def test_sweep_folder_is_one_row_per_run(sweep_dir):
    runs = attnlab.runs(sweep_dir)
    assert isinstance(runs, attnlab.Runs) and len(runs) == 4
    assert runs.path == sweep_dir and runs.manifest["jobs"] == 2
    assert sorted(runs["model.encoder.norm"]) == ["first", "first", "last", "last"]
    assert sorted(runs["seed"]) == [0, 0, 1, 1]
    assert set(runs["status"]) == {"completed"} and set(runs["sweep_status"]) == {"completed"}
    g = runs.groupby("model.encoder.norm")["train/loss"].agg(["mean", "std"])
    for norm in ("first", "last"):
        values = [attnlab.load(p).final()["train/loss"] for p in runs[runs["model.encoder.norm"] == norm]["path"]]
        assert g.loc[norm, "mean"] == pytest.approx(np.mean(values))
        assert g.loc[norm, "std"] == pytest.approx(np.std(values, ddof=1))
    run = runs.run(0)
    assert isinstance(run, attnlab.Run) and run.path == runs["path"].iloc[0]
    h = runs.histories("train/loss")
    assert len(h) == 12 and set(h.columns) >= {"name", "epoch", "value", "model.encoder.norm", "seed"}
    assert "4 runs" in runs._repr_html_()
    # A filtered table's differing keys are its own rows'.
    assert runs.differing == ["model.encoder.norm", "seed"]
    assert runs[runs["seed"] == 0].differing == ["model.encoder.norm"]
    assert runs[runs["model.encoder.norm"] == "first"].differing == ["seed"]


def test_a_pending_run_of_the_manifest_is_a_row_without_a_file(sweep_dir, tmp_path):
    copy = tmp_path / "partial"
    shutil.copytree(sweep_dir, copy)
    victim = sorted(copy.glob("*.h5"))[0]
    victim.unlink()
    runs = attnlab.runs(str(copy))
    assert len(runs) == 4
    missing = runs[runs["path"] == str(victim)]
    assert len(missing) == 1 and missing["status"].iloc[0] == "completed"  # the manifest's word
    assert np.isnan(missing["train/loss"].iloc[0])
    with pytest.raises(attnlab.ResultsError, match="no results file yet"):
        runs.run(int(np.flatnonzero(runs["path"] == str(victim))[0]))


def test_files_and_folders_mixed(d2l_run, corners_run):
    runs = attnlab.runs([d2l_run, corners_run])
    assert len(runs) == 2 and runs.path is None
    assert "experiment" not in runs.differing and "trainer.plugin" in runs.differing


def test_an_empty_folder_is_an_error(tmp_path):
    with pytest.raises(attnlab.ResultsError, match="holds no results files"):
        attnlab.runs(str(tmp_path))
    with pytest.raises(attnlab.ResultsError, match="no such file"):
        attnlab.runs(str(tmp_path / "nope.h5"))
