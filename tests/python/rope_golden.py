"""Golden values for plugins/scorer/rope/tests/rope_test.cpp: the rope scorer plugin (rotary position
embedding, Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", 2021).

References written here, independent of the C++:
  - Hugging Face Llama's formulation, verbatim but for names: inv_freq = 1 / base^(arange(0, d, 2) / d),
    emb = cat(freqs, freqs), q * cos + rotate_half(q) * sin with rotate_half(x) = cat(-x2, x1)
    (the half-split pairing: feature n pairs with n + d/2), in float64;
  - cross-checked against the paper's form, adjacent pairs (2n, 2n+1) rotated by p theta_n as complex
    numbers, on features permuted so that the pairs coincide;
  - multi-head self-attention with RoPE written head by head: x W^T split as [B, T, heads, d] (head h owns
    features h*d..(h+1)*d, as d2l's transpose_qkv), queries and keys rotated, d2l's -1e6 masking,
    softmax, pooling, W_o.
Inputs and weights come from the closed formulas of golden_common.py.
Run:  ~/.cache/attnlab/venv-torch-2.11.0/bin/python tests/python/rope_golden.py [--json]
(C++ blocks to paste, or JSON for tests/python/golden_check.py: ctest golden.rope_golden)
"""
import math

import torch

from golden_common import data, put_tensor, weight
from golden_out import Golden, json_flag


# ------------------------------------------------------------------------------ Llama's rotary embedding
def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def cos_sin(positions, d, base):
    """LlamaRotaryEmbedding for these positions -> cos, sin [T, d]"""
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def apply_rotary(x, offset, base):
    """x [B, T, d], row t at position offset + t -> rotated [B, T, d] (apply_rotary_pos_emb)"""
    cos, sin = cos_sin(torch.arange(offset, offset + x.shape[1]), x.shape[-1], base)
    return x * cos + rotate_half(x) * sin


def rope_scores(q, k, query_offset, key_offset, base=10000.0):
    q64, k64 = q.to(torch.float64), k.to(torch.float64)
    qr, kr = apply_rotary(q64, query_offset, base), apply_rotary(k64, key_offset, base)
    return qr @ kr.transpose(-1, -2) / math.sqrt(q.shape[-1])


# ------------------------------------------------------------------------------ the paper's adjacent pairs
def paper_rotary(x, offset, base):
    """(x_2n + i x_2n+1) e^(i p theta_n), theta_n = base^(-2n/d): RoFormer's eq. (34)"""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    p = torch.arange(offset, offset + x.shape[1], dtype=torch.float64)
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(z * torch.polar(torch.ones_like(p[:, None] * theta), p[:, None] * theta)).flatten(-2)


def check_against_paper(q, k, query_offset, key_offset, base):
    d = q.shape[-1]
    # half-split feature n pairs with n + d/2; interleaving them gives the paper's (2n, 2n+1) pairs
    interleave = torch.stack((torch.arange(d // 2), torch.arange(d // 2) + d // 2), dim=-1).flatten()
    q64, k64 = q.to(torch.float64)[..., interleave], k.to(torch.float64)[..., interleave]
    paper = paper_rotary(q64, query_offset, base) @ paper_rotary(k64, key_offset, base).transpose(-1, -2)
    assert torch.allclose(paper / math.sqrt(d), rope_scores(q, k, query_offset, key_offset, base), atol=1e-12)


def rope_mha(params, x, valid_lens, heads, base=10000.0):
    """Multi-head self-attention with RoPE, bias-free projections, written head by head, at positions 0.."""
    batch, steps, hiddens = x.shape
    d = hiddens // heads

    def split(w):  # [B, T, hiddens] -> [B * heads, T, d]: head h gets features h*d..(h+1)*d
        return (x @ w.T).view(batch, steps, heads, d).transpose(1, 2).reshape(batch * heads, steps, d)

    q, k, v = split(params["W_q.weight"]), split(params["W_k.weight"]), split(params["W_v.weight"])
    scores = rope_scores(q, k, 0, 0, base).view(batch, heads, steps, steps)  # [B, heads, Q, K]
    keep = torch.arange(steps)[None, None, None, :] < valid_lens[:, None, None, None]
    weights = torch.softmax(scores.masked_fill(~keep, -1e6), dim=-1).to(torch.float32)
    out = (weights @ v.view(batch, heads, steps, d)).transpose(1, 2).reshape(batch, steps, hiddens)
    return out @ params["W_o.weight"].T


golden = Golden("rope_golden.py", json_flag())
golden.block("plugins/scorer/rope/tests/rope_test.cpp")

# 2 sequences x 3 heads of size 8; queries at positions 4..6, keys at 1..5.
q, k = data(0.1, (6, 3, 8)), data(0.7, (6, 5, 8))
for base in (10000.0, 100.0):
    check_against_paper(q, k, 4, 1, base)
put_tensor(golden, "kRopeScores", rope_scores(q, k, 4, 1).to(torch.float32))
put_tensor(golden, "kRopeScoresBase100", rope_scores(q, k, 4, 1, 100.0).to(torch.float32))

# Multi-head self-attention, 3 heads of size 4, 5 steps at positions 0..4, valid lengths 5 and 3.
names = sorted(["W_q.weight", "W_k.weight", "W_v.weight", "W_o.weight"])  # as the C++ fill() orders them
params = {name: weight(kk, (12, 12)) for kk, name in enumerate(names)}
x = data(0.5, (2, 5, 12))
put_tensor(golden, "kRopeMha", rope_mha(params, x, torch.tensor([5, 3]), 3))
golden.finish()
