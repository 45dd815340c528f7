"""attnlab.load on real results files, against h5py reading the same files directly."""
import io

import h5py
import numpy as np
import pandas as pd
import pytest

import attnlab
from conftest import run_runner


def test_run_reads_what_h5py_reads(d2l_run):
    run = attnlab.load(d2l_run)
    with h5py.File(d2l_run, "r") as f:
        assert run.experiment == f.attrs["experiment"] == "transformer_fra_eng_d2l017"
        assert run.status == f.attrs["status"] == "completed"
        assert run.config_text == f["config"].asstr()[()]
        loss = f["metrics/train/loss"][()]
        sources = list(f["samples/source"].asstr()[()])
        hyps = list(f["samples/hypothesis"].asstr()[()])
    assert not run.live
    assert run.epochs_done == 4
    np.testing.assert_array_equal(run.history("train/loss").to_numpy(), loss)
    assert list(run.history("train/loss").index) == [1, 2, 3, 4]
    assert run.history("loss").name == "train/loss"  # a bare name that one group has
    m = run.metrics
    assert list(m.columns) == ["series", "epoch", "step", "value"]
    np.testing.assert_array_equal(m[m.series == "train/loss"]["value"].to_numpy(), loss)
    assert run.final()["train/loss"] == loss[-1]
    t = run.translations
    assert list(t.columns) == ["source", "reference", "hypothesis", "bleu"]
    assert list(t.source) == sources == ["go .", "i lost .", "he's calm .", "i'm home ."]
    assert list(t.hypothesis) == hyps


def test_config_is_the_resolved_yaml(d2l_run):
    run = attnlab.load(d2l_run)
    assert run.config["trainer"]["max_epochs"] == 4
    assert run.config["model"]["encoder"]["num_heads"] == 4
    flat = run.flat_config
    assert flat["model.decoder.norm"] == "last" and flat["trainer.checkpoints"] is True
    assert flat["evaluate.samples[3].src"] == "i'm home ."


def test_evals_are_the_runner_eval_groups(d2l_run):
    run = attnlab.load(d2l_run)
    ev = run.evals
    assert sorted(ev.index) == ["train", "train_beam2"]
    with h5py.File(d2l_run, "r") as f:
        assert ev.loc["train", "bleu"] == f["eval/train"].attrs["bleu"]
        assert ev.loc["train_beam2", "beam_size"] == 2
        refs = list(f["eval/train/references"].asstr()[()])
        n = int(f["eval/train"].attrs["sentences"])
    sentences = run.eval("train")
    assert list(sentences.columns) == ["source", "reference", "hypothesis"]
    assert list(sentences.reference) == refs and len(refs) == n > 100
    with pytest.raises(attnlab.ResultsError, match="no evaluation 'test'.*train, train_beam2"):
        run.eval("test")
    assert run.summary()["eval/train/bleu"] == ev.loc["train", "bleu"]


def test_attention_has_named_axes_and_tokens(d2l_run):
    run = attnlab.load(d2l_run)
    assert run.samples == ["i'm home ."]
    att = run.attention(sample="i'm home .")
    assert att.modules == ["decoder_cross", "decoder_self", "encoder_self"]
    with h5py.File(d2l_run, "r") as f:
        group = next(g for g in f["attention"].values() if g.attrs["text"] == "i'm home .")
        stored = group["decoder_cross"][()]
        keys = list(group["decoder_cross"].attrs["key_tokens"])
        queries = list(group["decoder_cross"].attrs["query_tokens"])
    np.testing.assert_array_equal(att["decoder_cross"], stored)
    m = att.weights("decoder_cross", layer=2)
    assert m.layer == 2 and m.heads == 4 and m.weights.shape == stored.shape[1:]
    np.testing.assert_array_equal(m.weights, stored[1])
    assert m.key_tokens == keys and m.query_tokens == queries and keys[:3] == ["i'm", "home", "."]
    assert (m.query_side, m.key_side) == ("target", "source")
    np.testing.assert_allclose(m.weights.sum(axis=-1), 1.0, rtol=1e-5)  # softmax rows
    frame = m.frame(1)
    assert isinstance(frame, pd.DataFrame) and frame.shape == stored.shape[2:]
    assert att.layers("encoder_self") == [1, 2]
    with pytest.raises(attnlab.ResultsError, match=r"layers \[1, 2\].*no layer 3"):
        att.weights("encoder_self", layer=3)
    with pytest.raises(attnlab.ResultsError, match="no module 'encoder'.*decoder_cross"):
        att.weights("encoder", layer=1)
    with pytest.raises(attnlab.ResultsError, match="no attention for sample 'go .'"):
        run.attention(sample="go .")
    assert run.attention(0).sample == "i'm home ."


def test_show_can_leave_the_padding_out(d2l_run):
    import matplotlib
    matplotlib.use("Agg")
    att = attnlab.load(d2l_run).attention()
    m = att.weights("encoder_self", layer=1)
    real = [t for t in m.key_tokens if t != "<pad>"]
    assert "<pad>" in m.key_tokens and real  # the sentence is shorter than num_steps
    whole = [a for a in att.show("encoder_self", layer=1).axes if a.images][0]
    cut = [a for a in att.show("encoder_self", layer=1, pad=False).axes if a.images][0]
    assert whole.images[0].get_array().shape == (len(m.query_tokens), len(m.key_tokens))
    assert cut.images[0].get_array().shape == (len(real), len(real))  # self-attention: queries are keys
    assert [t.get_text() for t in cut.get_xticklabels()] == real
    kept = [i for i, t in enumerate(m.key_tokens) if t != "<pad>"]
    np.testing.assert_array_equal(np.asarray(cut.images[0].get_array()), m.head(1)[np.ix_(kept, kept)])


def test_history_without_a_series_is_a_wide_table(d2l_run):
    run = attnlab.load(d2l_run)
    wide = run.history()
    assert wide.index.name == "epoch" and list(wide.index) == list(range(1, run.epochs_done + 1))
    assert "train/loss" in wide.columns and not any(c.startswith("step/") for c in wide.columns)
    np.testing.assert_array_equal(wide["train/loss"].to_numpy(), run.history("train/loss").to_numpy())
    with pytest.raises(TypeError, match=r"series must be a series name such as 'val/loss'; got int 3"):
        run.history(3)


def test_show_draws_a_heatmap_per_head(d2l_run):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    att = attnlab.load(d2l_run).attention()
    open_before = len(plt.get_fignums())
    fig = att.show("encoder_self", layer=2)
    # Returned closed: Jupyter shows it once, as the cell's value, and the inline backend not again.
    assert len(plt.get_fignums()) == open_before
    images = [a for a in fig.axes if a.images]
    assert len(images) == 4
    assert [a.get_title() for a in images] == ["head 1", "head 2", "head 3", "head 4"]
    assert images[0].images[0].get_cmap().name == "Reds"
    fig_all = att.show("decoder_cross")  # every layer a row
    assert len([a for a in fig_all.axes if a.images]) == 8


def test_regression_run_arrays_and_declared_figures(corners_run):
    run = attnlab.load(corners_run)
    figures = run.section("figures")
    assert "predictions" in figures.index and figures.loc["predictions", "kind"] == "sequences"
    with h5py.File(corners_run, "r") as f:
        np.testing.assert_array_equal(run.array("predictions/test/prediction"), f["predictions/test/prediction"][()])
    assert run.samples[:2] == ["test 0 (counter-clockwise)", "test 1 (clockwise)"] or len(run.samples) == 2
    att = run.attention(1)
    assert att["encoder_self"].shape[2:] == (2, 2)
    m = run.metrics
    one_row = m[m.series == "test/loss"]
    assert len(one_row) == 1 and int(one_row.epoch.iloc[0]) == 3  # drawn at the last epoch
    with pytest.raises(attnlab.ResultsError, match="no dataset /predictions/nope"):
        run.array("predictions/nope")


def test_html_summary(d2l_run):
    html = attnlab.load(d2l_run)._repr_html_()
    assert "completed" in html and "transformer_fra_eng_d2l017" in html and "train/loss" in html
    assert "i&#x27;m home ." in html or "i'm home ." in html


def test_config_keys_match_runner_compare(runner, sweep_dir):
    """The keys that differ, as runner compare finds them from the same files."""
    runs = attnlab.runs(sweep_dir)
    done = run_runner(runner, "compare", sweep_dir, "--format", "csv")
    table = pd.read_csv(io.StringIO(done.stdout))
    assert runs.differing == ["model.encoder.norm", "seed"]
    for _, row in runs.iterrows():
        differs = table[table["file"] == row["path"]]["differs"].iloc[0]
        assert differs == ", ".join(f"{k}={row[k]}" for k in runs.differing)


def test_the_earliest_layouts_read():
    """Files of the first results layout (fuzz/corpus/results_reader: no layers, heads or sides on
    attention, no /figures), as the C++ reader reads them."""
    import os
    from conftest import SOURCE
    folder = os.path.join(SOURCE, "fuzz", "corpus", "results_reader")
    for name in ("earliest_full.h5", "v18_full.h5"):
        run = attnlab.load(os.path.join(folder, name))
        assert run.status == "completed" and run.series() == ["train/loss"]
        assert len(run.history("train/loss")) == 2 and len(run.translations) == 1
        att = run.attention("go .")
        m = att.weights("decoder")
        assert m.layer == 1 and m.weights.shape == (1, 2, 2) and (m.query_side, m.key_side) == ("", "")
        assert run.section("figures") is None
    chunked = attnlab.load(os.path.join(folder, "earliest_chunked.h5"))
    assert chunked.samples == [] and chunked.translations.empty
    with pytest.raises(attnlab.ResultsError, match="recorded no attention"):
        chunked.attention()
