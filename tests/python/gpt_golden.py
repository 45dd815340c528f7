"""Golden values for tests/nn_transformer_lm_test.cpp: the decoder-only transformer language model
(nn::TransformerLM, a GPT: issue 60) against a reference written here in plain PyTorch.

The reference is nanoGPT's model (Karpathy, model.py: token embedding + positions, blocks of
`x + attn(ln_1(x))` and `x + mlp(ln_2(x))`, a final LayerNorm, the output layer tied to the
embedding) with the variants the C++ model has, written from their definitions, not from the C++:
  - norm-last blocks (Vaswani et al. 2017, d2l's AddNorm): `ln(x + attn(x))`, `ln(y + mlp(y))`, no
    final LayerNorm;
  - positions: a learned table (GPT-2), the sinusoidal encoding (Vaswani et al.; the formula of
    framework/src/nn/layers.cpp, evaluated in float32 as there) or none (NoPE);
  - token embeddings scaled by sqrt(H) (d2l) or not (GPT-2);
  - the MLP's activation: ReLU or GELU with the tanh approximation (GPT-2);
  - attention-only blocks, no MLP (Elhage et al. 2021);
  - the output layer tied to the embedding (logits = h E^T) or its own Linear, with or without bias.
Causal multi-head self-attention: x W^T split as [B, T, heads, d] (head h owns features h*d..(h+1)*d),
F.scaled_dot_product_attention(is_causal=True), merged, W_o; checked here against an explicit
masked softmax. Every module carries the C++ parameter name (decoder.blks.0.attention1.W_q.weight,
...), so golden_common.fill gives both sides the same weights (weight k by sorted name). The model
runs in float64 on those float32 weights; the values are rounded to float32.
Recorded per configuration: the logits of token ids golden_common.ids((2, 6), 11), the mean
cross-entropy of each position's logits against the next token, and the gradients of that loss with
respect to the embedding, one W_q and one FFN dense1 (or, attention-only, the output layer).
Run:  ~/.cache/attnlab/venv-torch-2.11.0/bin/python tests/python/gpt_golden.py [--json]
(C++ blocks to paste, or JSON for tests/python/golden_check.py: ctest golden.gpt_golden)
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from golden_common import fill, ids, put_tensor
from golden_out import Golden, json_flag

VOCAB, HIDDENS, HEADS, BLOCKS, FFN, STEPS, BATCH, MAX_LEN, EPS = 11, 8, 2, 2, 16, 6, 2, 16, 1e-5


def sinusoidal(max_len, hiddens):
    """Vaswani et al.'s encoding [max_len, H], as framework/src/nn/layers.cpp computes it (float32):
    P[t, 2i] = sin(t / 10000^(2i / H)), P[t, 2i + 1] = cos(t / 10000^(2i / H))."""
    x = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
        10000, torch.arange(0, hiddens, 2, dtype=torch.float32) / hiddens)
    p = torch.zeros(max_len, hiddens)
    p[:, 0::2] = torch.sin(x)
    p[:, 1::2] = torch.cos(x[:, : hiddens // 2])
    return p


class Norm(nn.Module):
    """The C++ AddNorm's parameters: a LayerNorm named `ln`."""

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(HIDDENS, eps=EPS)


class CausalSelfAttention(nn.Module):
    def __init__(self, bias):
        super().__init__()
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(HIDDENS, HIDDENS, bias=bias) for _ in range(4))

    def heads(self, t):  # [B, T, H] -> [B, heads, T, d]
        b, steps, _ = t.shape
        return t.view(b, steps, HEADS, HIDDENS // HEADS).transpose(1, 2)

    def forward(self, x):
        q, k, v = self.heads(self.W_q(x)), self.heads(self.W_k(x)), self.heads(self.W_v(x))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [B, heads, T, d]
        # the same by hand: scores / sqrt(d), the future masked out, softmax
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        future = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
        explicit = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v
        assert torch.allclose(y, explicit, rtol=1e-12, atol=1e-12)
        return self.W_o(y.transpose(1, 2).reshape(x.shape))  # [B, T, H]


class MLP(nn.Module):
    def __init__(self, activation):
        super().__init__()
        self.dense1, self.dense2 = nn.Linear(HIDDENS, FFN), nn.Linear(FFN, HIDDENS)
        self.activation = activation

    def forward(self, x):
        h = self.dense1(x)
        h = F.relu(h) if self.activation == "relu" else F.gelu(h, approximate="tanh")
        return self.dense2(h)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm_first = c["norm_first"]
        self.attention1, self.addnorm1 = CausalSelfAttention(c["bias"]), Norm()
        self.ffn = MLP(c["activation"]) if c["ffn"] else None
        self.addnorm3 = Norm() if c["ffn"] else None

    def forward(self, x):
        if self.norm_first:  # nanoGPT
            x = x + self.attention1(self.addnorm1.ln(x))
            return x + self.ffn(self.addnorm3.ln(x)) if self.ffn else x
        y = self.addnorm1.ln(x + self.attention1(x))  # Vaswani et al., d2l
        return self.addnorm3.ln(y + self.ffn(y)) if self.ffn else y


class Positions(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        if kind == "learned":
            self.table = nn.Parameter(torch.zeros(MAX_LEN, HIDDENS))
        self.register_buffer("P", sinusoidal(MAX_LEN, HIDDENS))

    def forward(self, x):
        if self.kind == "learned":
            return x + self.table[: x.shape[1]]
        if self.kind == "sinusoidal":
            return x + self.P[: x.shape[1]].to(x.dtype)
        return x


class Decoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embedding = nn.Embedding(VOCAB, HIDDENS)
        self.pos_encoding = Positions(c["positions"])
        self.blks = nn.ModuleList(Block(c) for _ in range(BLOCKS))
        self.final_ln = nn.LayerNorm(HIDDENS, eps=EPS) if c["norm_first"] else None
        self.dense = None if c["tied"] else nn.Linear(HIDDENS, VOCAB, bias=c["output_bias"])

    def forward(self, tokens):
        x = self.embedding(tokens)
        if self.c["scale_embeddings"]:
            x = x * math.sqrt(HIDDENS)
        x = self.pos_encoding(x)
        for blk in self.blks:
            x = blk(x)
        if self.final_ln is not None:
            x = self.final_ln(x)
        return self.dense(x) if self.dense is not None else x @ self.embedding.weight.T  # [B, T, V]


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.decoder = Decoder(c)


CONFIGS = {
    # nanoGPT / GPT-2: norm-first, learned positions, GELU (tanh), tied output, biases
    "NormFirst": dict(norm_first=True, positions="learned", scale_embeddings=False, activation="gelu_tanh",
                      tied=True, output_bias=False, bias=True, ffn=True),
    # d2l-like: norm-last, sinusoidal positions, scaled embeddings, ReLU, untied output with bias
    "NormLast": dict(norm_first=False, positions="sinusoidal", scale_embeddings=True, activation="relu",
                     tied=False, output_bias=True, bias=False, ffn=True),
    # attention-only, norm-first, no positions, untied output without bias
    "AttnOnly": dict(norm_first=True, positions="none", scale_embeddings=False, activation="gelu",
                     tied=False, output_bias=False, bias=True, ffn=False),
}

golden = Golden("gpt_golden.py", json_flag())
golden.block("tests/nn_transformer_lm_test.cpp")
tokens = ids((BATCH, STEPS), VOCAB)
for name, c in CONFIGS.items():
    model = GPT(c)
    fill(model)
    model = model.double()
    logits = model.decoder(tokens)  # [B, T, V]
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
    loss.backward()
    params = dict(model.named_parameters())
    put_tensor(golden, f"kGpt{name}Logits", logits.float(), step=2)
    put_tensor(golden, f"kGpt{name}Loss", loss.float())
    put_tensor(golden, f"kGpt{name}EmbeddingGrad", params["decoder.embedding.weight"].grad.float())
    put_tensor(golden, f"kGpt{name}WqGrad", params["decoder.blks.0.attention1.W_q.weight"].grad.float())
    if c["ffn"]:
        put_tensor(golden, f"kGpt{name}Dense1Grad", params["decoder.blks.1.ffn.dense1.weight"].grad.float(), step=2)
    else:
        put_tensor(golden, f"kGpt{name}DenseGrad", params["decoder.dense.weight"].grad.float(), step=2)
    if c["positions"] == "learned":
        put_tensor(golden, f"kGpt{name}TableGrad", params["decoder.pos_encoding.table"].grad[:STEPS].float())
golden.finish()
