"""`runner rollout --write` against a plain numpy reference (docs/COMMANDS.md, "runner rollout"),
on the weights h5py reads from a real translation run (padded source tokens) and a corner run; and
the package's accessor of what it stored (Run.rollout, Run.section("rollout"))."""
import shutil

import h5py
import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

import attnlab
from attnlab.errors import ResultsError
from conftest import run_runner

TOL = 1e-5


def _strs(values):
    return [v.decode() if isinstance(v, bytes) else str(v) for v in values]


def real(tokens, recorded):
    """The real positions: the labels less trailing <pad> ones; all when unlabelled."""
    if len(tokens) == 0:
        return recorded
    n = min(len(tokens), recorded)
    while n > 0 and tokens[n - 1] == "<pad>":
        n -= 1
    return n


def rownorm(a):
    s = a.sum(-1, keepdims=True)
    return np.divide(a, s, out=np.zeros_like(a), where=s != 0)


def layers(d):
    """Head means of one recorded module [layers, heads, Q, K] cut to its real positions, lowest
    layer first, rows normalised; and the positions kept."""
    w = d[()].astype(np.float64)
    q = real(_strs(d.attrs.get("query_tokens", [])), w.shape[2])
    k = real(_strs(d.attrs.get("key_tokens", [])), w.shape[3])
    order = np.argsort(d.attrs["layers"], kind="stable") if "layers" in d.attrs else range(w.shape[0])
    return [rownorm(w[l, :, :q, :k].mean(0)) for l in order], q, k


def residual(a):
    return rownorm(0.5 * a + 0.5 * np.eye(a.shape[0]))


def rollout(mats):
    r = np.eye(mats[0].shape[0])
    for a in mats:
        r = a @ r
    return r


def encoder_decoder(self_means, cross_means, r_enc):
    tt, ts = cross_means[0].shape
    t, s = np.eye(tt), np.zeros((tt, ts))
    for m, c in zip(self_means, cross_means):
        d = residual(m)
        t, s = 0.5 * (d @ t), 0.5 * (d @ s) + 0.5 * c
    return rownorm(s @ r_enc)


def flow(mats, scale=10**6):
    """Abnar & Zuidema's flow with scipy's integer max-flow on capacities scaled by `scale`."""
    n, depth = mats[0].shape[0], len(mats)
    cap = np.zeros(((depth + 1) * n,) * 2, dtype=np.int32)
    for l, a in enumerate(mats, start=1):
        cap[l * n:(l + 1) * n, (l - 1) * n:l * n] = np.rint(a * scale).astype(np.int32)
    graph = csr_matrix(cap)
    out = np.array([[maximum_flow(graph, depth * n + i, j).flow_value for j in range(n)] for i in range(n)],
                   dtype=np.float64)
    return rownorm(out)


def written_copy(runner, source, dest, *args):
    shutil.copyfile(source, dest)
    run_runner(runner, "rollout", str(dest), "--method", "both", "--write", *args)
    return str(dest)


@pytest.fixture(scope="session")
def d2l_rollout(runner, d2l_run, scratch):
    return written_copy(runner, d2l_run, scratch / "d2l017_rollout.h5")


@pytest.fixture(scope="session")
def corners_rollout(runner, corners_run, scratch):
    return written_copy(runner, corners_run, scratch / "corners_rollout.h5", "--sample", "1")


@pytest.mark.parametrize("which", ["d2l_rollout", "corners_rollout"])
def test_rollout_matches_numpy(which, request):
    path = request.getfixturevalue(which)
    with h5py.File(path, "r") as f:
        assert len(f["rollout"]) == 1
        link = next(iter(f["rollout"]))
        stored = f["rollout"][link]
        att = f["attention"][link]
        assert stored.attrs["text"] == att.attrs["text"]
        means = {}
        for module in ("encoder_self", "decoder_self", "decoder_cross"):
            means[module] = layers(att[module])
        for module in ("encoder_self", "decoder_self"):
            mats, q, k = means[module]
            assert q == k
            got = stored[f"{module}_rollout"]
            want = rollout([residual(a) for a in mats])
            np.testing.assert_allclose(got[()], want, atol=TOL, err_msg=f"{which} {module}_rollout")
            assert _strs(got.attrs["query_tokens"]) == _strs(att[module].attrs["query_tokens"])[:q]
            assert got.attrs["method"] == "rollout"
            np.testing.assert_allclose(stored[f"{module}_flow"][()], flow([residual(a) for a in mats]), atol=1e-4,
                                       err_msg=f"{which} {module}_flow")
        enc, _, ts = means["encoder_self"]
        want = encoder_decoder(means["decoder_self"][0], means["decoder_cross"][0], rollout([residual(a) for a in enc]))
        got = stored["encoder_decoder_rollout"]
        assert got.shape == (means["decoder_self"][1], ts)
        np.testing.assert_allclose(got[()], want, atol=TOL, err_msg=f"{which} encoder_decoder_rollout")
        np.testing.assert_allclose(got[()].sum(-1), 1.0, atol=TOL)


def test_padding_is_left_out(d2l_rollout):
    """fra-eng pads the source to num_steps with <pad> labels: the results cover the real tokens."""
    with h5py.File(d2l_rollout, "r") as f:
        link = next(iter(f["rollout"]))
        recorded = _strs(f["attention"][link]["encoder_self"].attrs["key_tokens"])
        kept = _strs(f["rollout"][link]["encoder_self_rollout"].attrs["key_tokens"])
    assert "<pad>" in recorded and "<pad>" not in kept
    assert kept == recorded[:len(kept)] and kept[-1] == "<eos>"


def test_accessor(d2l_rollout):
    run = attnlab.load(d2l_rollout)
    table = run.section("rollout")
    assert sorted(table["name"]) == ["decoder_self_flow", "decoder_self_rollout", "encoder_decoder_rollout",
                                     "encoder_self_flow", "encoder_self_rollout"]
    assert set(table["sample"]) == {"i'm home ."}
    frame = run.rollout("encoder_decoder_rollout")
    assert frame.index[0] == "<bos>" and list(frame.columns)[-1] == "<eos>"
    np.testing.assert_allclose(frame.to_numpy().sum(1), 1.0, atol=TOL)
    assert frame.attrs["method"] == "encoder_decoder"
    assert run.rollout("encoder_self_flow", sample="i'm home .").shape == (len(frame.columns),) * 2
    with pytest.raises(ResultsError, match="no rollout result 'nope'.*encoder_self_rollout"):
        run.rollout("nope")
    with pytest.raises(ResultsError, match="no sample 3"):
        run.rollout(sample=3)


def test_accessor_without_results(corners_run):
    run = attnlab.load(corners_run)
    assert run.section("rollout") is None
    with pytest.raises(ResultsError, match="holds no rollout results"):
        run.rollout()
