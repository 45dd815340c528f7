"""Head masks and `runner ablate` read from Python: Run.ablation and Run.head_mask on files the
real runner wrote, checked against h5py's raw reading."""
import shutil

import h5py
import numpy as np

import attnlab
from conftest import experiment, run_runner


def test_ablation_table_matches_the_file(runner, d2l_run, tmp_path):
    path = str(tmp_path / "ablated.h5")
    shutil.copy(d2l_run, path)  # the session's run stays as the other tests expect it
    shutil.copytree(d2l_run + ".ckpt", path + ".ckpt")
    done = run_runner(runner, "ablate", path, "--split", "train", "--no-bleu", "-q")
    assert "24 heads, train split" in done.stdout, done.stdout
    table = attnlab.load(path).ablation
    assert len(table) == 24
    assert list(table["module"].unique()) == ["encoder_self", "decoder_self", "decoder_cross"]
    assert sorted(table["layer"].unique()) == [1, 2] and sorted(table["head"].unique()) == [1, 2, 3, 4]
    assert (table["name"] == "train").all() and (table["split"] == "train").all()
    with h5py.File(path, "r") as f:
        g = f["ablation/train"]
        np.testing.assert_allclose(table["delta_loss"], g["loss"][()] - g.attrs["base_loss"], atol=1e-5)
        np.testing.assert_allclose(table["importance"], g["importance"][()])
        assert "bleu" not in g
    # Michel et al.'s normalisation: each (module, layer)'s importances have L2 norm 1.
    norms = table.groupby(["module", "layer"])["importance_normalized"].apply(lambda v: float(np.sqrt((v ** 2).sum())))
    np.testing.assert_allclose(norms, 1.0, atol=1e-5)
    summary = attnlab.runs([path])
    assert "ablation/train/delta_loss" in summary.columns

    run_runner(runner, "ablate", path, "--split", "train", "--tokens", "--sentences", "5", "-q")
    tokens = attnlab.load(path).ablation
    tokens = tokens[tokens["name"] == "tokens_train"]
    assert sorted(tokens["sentence"].unique()) == [0, 1, 2, 3, 4]
    assert tokens["token"].notna().all() and np.isfinite(tokens["delta_loss"]).all()
    assert len(attnlab.load(path).ablation.query("name == 'train'")) == 24

    run_runner(runner, "prune", path, "--split", "train", "--no-bleu", "--step", "25%", "-q")
    run_runner(runner, "prune", path, "--split", "train", "--no-bleu", "--step", "50%", "--order", "random",
               "--repeats", "2", "-q")
    curves = attnlab.load(path).pruning
    assert set(curves["name"]) == {"importance_train", "random_train"}
    importance = curves[curves["name"] == "importance_train"]
    assert importance["heads_off"].tolist() == [0, 6, 12, 18, 24]
    assert importance["fraction"].is_monotonic_increasing
    assert abs(importance["loss"].iloc[0] - table["base_loss"].iloc[0]) < 1e-5
    random = curves[curves["name"] == "random_train"]
    assert sorted(random["repeat"].unique()) == [0, 1] and random["heads_off"].tolist() == [0, 12, 24] * 2
    with h5py.File(path, "r") as f:
        np.testing.assert_allclose(random["loss"], f["pruning/random_train/loss"][()].reshape(-1))


def test_head_mask_of_a_run(runner, tmp_path):
    path = str(tmp_path / "masked.h5")
    run_runner(runner, experiment("tests/tiny_synthetic.yaml"), "trainer.max_epochs=1",
               "interventions.head_mask={decoder_cross: {1: [2]}}", "--results", path, "-q")
    run = attnlab.load(path)
    mask = run.head_mask
    assert mask.attrs["text"] == "decoder_cross:1:2"
    off = mask[mask["xi"] == 0]
    assert off[["module", "layer", "head"]].values.tolist() == [["decoder_cross", 1, 2]]
    assert len(mask) == 6
    assert attnlab.load(experiment_free_run(runner, tmp_path)).head_mask.empty


def experiment_free_run(runner, tmp_path) -> str:
    path = str(tmp_path / "plain.h5")
    run_runner(runner, experiment("tests/tiny_synthetic.yaml"), "trainer.max_epochs=1", "--results", path, "-q")
    return path


def test_ablate_prune_and_rollout_from_python(runner, d2l_run, tmp_path, monkeypatch, capsys):
    """attnlab.ablate/prune/rollout start the runner and return the tables it wrote."""
    import pytest
    monkeypatch.setenv("ATTNLAB_RUNNER", runner)
    path = str(tmp_path / "studied.h5")
    shutil.copy(d2l_run, path)
    shutil.copytree(d2l_run + ".ckpt", path + ".ckpt")
    table = attnlab.ablate(path, split="train", bleu=False, name="py")
    assert len(table) == 24 and (table["name"] == "py").all()
    assert "encoder_self layer 1 head 1 off" in capsys.readouterr().out  # the runner's lines, as they come
    with h5py.File(path, "r") as f:
        g = f["ablation/py"]
        np.testing.assert_allclose(table["delta_loss"], g["loss"][()] - g.attrs["base_loss"], atol=1e-5)
    quiet = attnlab.ablate(attnlab.load(path), split="train", bleu=False, importance="gradient", log=False)
    assert (quiet["name"] == "train").all() and capsys.readouterr().out == ""
    curve = attnlab.prune(path, split="train", bleu=False, step="50%", log=False)
    assert curve["heads_off"].tolist() == [0, 12, 24] and (curve["name"] == "importance_train").all()
    flows = attnlab.rollout(path, method="both", modules="encoder_self")
    assert set(flows["method"]) == {"rollout", "flow"} and set(flows["module"]) == {"encoder_self"}
    assert flows["value"].dtype.kind == "f" and flows["query_token"].map(type).eq(str).all()
    with pytest.raises(attnlab.ConfigError, match="its dataset has no val split"):
        attnlab.ablate(path, split="val", bleu=False, log=False)
    with pytest.raises(ValueError, match="split must be 'train', 'val' or 'test'; got 'dev'"):
        attnlab.ablate(path, split="dev")
    with pytest.raises(ValueError, match="sentences must be a whole number of at least 1; got 0"):
        attnlab.prune(path, sentences=0)
    with pytest.raises(attnlab.ConfigError, match="model.encoder.num_heads"):
        attnlab.ablate(path, {"model.encoder.num_heads": 2}, split="train", log=False)
