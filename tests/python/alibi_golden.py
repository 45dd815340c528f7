"""Golden values for plugins/scorer/alibi/tests/alibi_test.cpp: the alibi scorer plugin (ALiBi,
Press, Smith and Lewis, "Train Short, Test Long: Attention with Linear Biases", ICLR 2022).

References written here, independent of the C++:
  - the slopes as the paper's authors compute them (get_slopes in ofirpress/attention_with_linear_biases,
    fairseq/models/transformer.py), checked against Hugging Face's build_alibi_tensor formula;
  - scaled dot-product scores plus -m_h |i - j| (symmetric) or -m_h (i - j) (the paper's causal form),
    i and j absolute positions, computed per sequence and head ([B, heads, Q, K]);
  - multi-head attention with ALiBi written head by head: x W^T split as [B, T, heads, d] (head h
    owns features h*d..(h+1)*d, as d2l's transpose_qkv), the bias added per head, d2l's -1e6
    masking, softmax, pooling, W_o.
Inputs and weights come from the closed formulas of golden_common.py (weight(k) for the k-th
parameter in sorted-name order, data(phase)).
Run:  ~/.cache/attnlab/venv-torch-2.11.0/bin/python tests/python/alibi_golden.py [--json]
(C++ blocks to paste, or JSON for tests/python/golden_check.py: ctest golden.alibi_golden)
"""
import math

import torch

from golden_common import data, put_tensor, weight
from golden_out import Golden, json_flag


# ------------------------------------------------------------------------------------- slopes
def get_slopes(n):
    """The authors' get_slopes, verbatim but for names."""
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return get_slopes_power_of_2(closest_power_of_2) + get_slopes(2 * closest_power_of_2)[0::2][:n - closest_power_of_2]


def hf_slopes(n):
    """Hugging Face's build_alibi_tensor (BLOOM) slopes, for a cross-check."""
    closest = 2 ** math.floor(math.log2(n))
    base = 2 ** (-(2 ** -(math.log2(closest) - 3)))
    slopes = [base ** p for p in range(1, closest + 1)]
    if closest != n:
        extra_base = 2 ** (-(2 ** -(math.log2(2 * closest) - 3)))
        slopes += [extra_base ** p for p in range(1, 1 + 2 * min(closest, n - closest), 2)]
    return slopes


# ------------------------------------------------------------------------------------- scores
def alibi_bias(slopes, queries, keys, query_offset, key_offset, symmetric):
    """-m_h |i - j| or -m_h (i - j) -> [heads, Q, K]"""
    i = torch.arange(query_offset, query_offset + queries, dtype=torch.float32)[:, None]
    j = torch.arange(key_offset, key_offset + keys, dtype=torch.float32)[None, :]
    distance = (i - j).abs() if symmetric else (i - j)
    return -torch.tensor(slopes, dtype=torch.float32)[:, None, None] * distance[None]


def alibi_scores(q, k, heads, query_offset, key_offset, symmetric):
    """q [B * heads, Q, d], k [B * heads, K, d] (row b * heads + h: sequence b, head h) -> [B * heads, Q, K]"""
    rows, n_q, d = q.shape
    n_k = k.shape[1]
    q4, k4 = q.view(rows // heads, heads, n_q, d), k.view(rows // heads, heads, n_k, d)
    scores = q4 @ k4.transpose(-1, -2) / math.sqrt(d)  # [B, heads, Q, K]
    scores = scores + alibi_bias(get_slopes(heads), n_q, n_k, query_offset, key_offset, symmetric)[None]
    return scores.reshape(rows, n_q, n_k)


def alibi_mha(params, queries, keys, values, valid_lens, heads, query_offset, key_offset):
    """Multi-head attention with symmetric ALiBi, bias-free projections, written head by head."""
    batch, n_q, hiddens = queries.shape
    n_k, d = keys.shape[1], hiddens // heads

    def split(x, w):  # [B, T, hiddens] -> [B, heads, T, d]: head h gets features h*d..(h+1)*d
        return (x @ w.T).view(batch, x.shape[1], heads, d).transpose(1, 2)

    q, k = split(queries, params["W_q.weight"]), split(keys, params["W_k.weight"])
    v = split(values, params["W_v.weight"])
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)  # [B, heads, Q, K]
    scores = scores + alibi_bias(get_slopes(heads), n_q, n_k, query_offset, key_offset, True)[None]
    keep = torch.arange(n_k)[None, None, None, :] < valid_lens[:, None, None, None]  # [B, 1, 1, K]
    weights = torch.softmax(scores.masked_fill(~keep, -1e6), dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, n_q, hiddens)  # [B, Q, hiddens]
    return out @ params["W_o.weight"].T


golden = Golden("alibi_golden.py", json_flag())
golden.block("plugins/scorer/alibi/tests/alibi_test.cpp")

heads_list = [1, 2, 3, 4, 6, 8, 12, 16]
for n in heads_list:
    assert all(math.isclose(a, b, rel_tol=1e-15) for a, b in zip(get_slopes(n), hf_slopes(n))), n
golden.const("std::vector<int64_t>", "kAlibiSlopeHeads", heads_list)
golden.const("std::vector<std::vector<float>>", "kAlibiSlopes", [get_slopes(n) for n in heads_list], float32=True,
             comment="kAlibiSlopes[n]: the slopes m_1..m_h of kAlibiSlopeHeads[n] heads (the authors' get_slopes)")

# Scores of 2 sequences x 4 heads, 3 queries at positions 4..6, 5 keys at 1..5, d = 4.
q, k = data(0.1, (8, 3, 4)), data(0.7, (8, 5, 4))
put_tensor(golden, "kAlibiScoresSymmetric", alibi_scores(q, k, 4, 4, 1, True))
put_tensor(golden, "kAlibiScoresCausalForm", alibi_scores(q, k, 4, 4, 1, False))

# Multi-head attention, 3 heads (slopes 1/16, 1/256, 1/4: not sorted, so a head given another's
# slope shows), width 12, 3 queries at positions 6..8 over 7 keys at 0..6, valid lengths 7 and 4.
names = sorted(["W_q.weight", "W_k.weight", "W_v.weight", "W_o.weight"])  # as the C++ fill() orders them
params = {name: weight(kk, (12, 12)) for kk, name in enumerate(names)}
queries, kv = data(0.5, (2, 3, 12)), data(1.5, (2, 7, 12))
put_tensor(golden, "kAlibiMha", alibi_mha(params, queries, kv, kv, torch.tensor([7, 4]), 3, 6, 0))
golden.finish()
