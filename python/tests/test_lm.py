"""A decoder-only language model's results file (model gpt, trainer lm, dataset text) through the
package, against h5py: its step-counted history, `runner generate`'s texts, the attention of a
generation, and `runner heads`' scores."""
import h5py
import numpy as np

import attnlab
from conftest import experiment, run_runner


def _lm_run(runner, scratch) -> str:
    path = str(scratch / "tiny_lm.h5")
    run_runner(runner, experiment("tests/tiny_lm.yaml"), "--results", path, "-q")
    run_runner(runner, "generate", path, "--prompt", "I am ", "--tokens", "12", "--temperature", "0",
               "--attention", "--name", "greedy", "-q")
    run_runner(runner, "generate", path, "--prompt", "He ", "--tokens", "8", "--seed", "2", "-q")
    run_runner(runner, "heads", path, "--length", "10", "--sequences", "4", "-q")
    return path


def test_an_lm_run_reads_as_h5py_reads_it(runner, scratch):
    path = _lm_run(runner, scratch)
    run = attnlab.load(path)
    with h5py.File(path, "r") as f:
        steps = f["metrics/train/step"][()]
        ppl = f["metrics/val/perplexity"][()]
        greedy = f["generations/greedy"]
        continuation = greedy.attrs["continuation"]
        ids = greedy["ids"][()]
        scores = f["head_scores"]
        name = next(iter(scores))
        induction = scores[name]["induction"][()]
    assert run.status == "completed"
    np.testing.assert_array_equal(run.history("train/step").to_numpy(), steps)
    assert list(steps) == [10, 20, 25]
    np.testing.assert_array_equal(run.history("val/perplexity").to_numpy(), ppl)

    g = run.generations
    assert list(g.index) == ["generation-1", "greedy"]
    assert g.loc["greedy", "continuation"] == continuation
    assert g.loc["greedy", "text"] == "I am " + continuation
    assert g.loc["greedy", "decoding"] == "greedy" and g.loc["generation-1", "decoding"] == "sampled"
    np.testing.assert_array_equal(g.loc["greedy", "ids"], ids)
    assert len(ids) == 5 + 12

    # The generation's attention: one causal map over prompt and continuation.
    a = run.attention(sample="greedy")
    w = a["decoder_self"]
    assert w.shape == (1, 2, 17, 17)
    assert np.allclose(np.triu(w[0, 0], k=1), 0), "nothing attends to a later token"
    assert np.allclose(w.sum(-1), 1, atol=1e-5)

    h = run.head_scores
    assert list(h.columns[:3]) == ["name", "layer", "head"]
    assert len(h) == 2 and set(h["layer"]) == {1} and list(h["head"]) == [1, 2]
    np.testing.assert_allclose(h.induction.to_numpy(), induction.reshape(-1), rtol=1e-6)
    for score in ("previous_token", "duplicate_token", "induction", "first_token_mass"):
        assert h[score].between(0, 1).all(), score


def test_head_scores_measured_during_training_are_rows_with_their_step(runner, scratch):
    path = str(scratch / "heads_over_training.h5")
    run_runner(runner, experiment("tests/tiny_lm.yaml"), "--results", path, "-q", "trainer.head_scores_every=10",
               "trainer.head_scores_length=8", "trainer.head_scores_sequences=4")
    run_runner(runner, "heads", path, "--length", "8", "--sequences", "4", "-q")
    with h5py.File(path, "r") as f:
        at_20 = f["head_scores/training/step_20/induction"][()]
    h = attnlab.load(path).head_scores
    training = h[h["name"] == "training"]
    assert sorted(set(training["step"])) == [0, 10, 20], "step 0 and every 10 steps of 25"
    assert list(training["step"]) == sorted(training["step"]), "in step order"
    assert len(training) == 3 * 2, "3 measurements x 1 layer x 2 heads"
    np.testing.assert_allclose(training[training["step"] == 20].induction.to_numpy(), at_20.reshape(-1), rtol=1e-6)
    curves = training.pivot_table(index="step", columns=["layer", "head"], values="induction")
    assert curves.shape == (3, 2)
    assert (h[h["name"] == "repeated_random"].shape[0]) == 2, "runner heads' group beside it"
