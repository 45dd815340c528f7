"""Golden values for tests/nn_attention_test.cpp and tests/nn_transformer_test.cpp.

A reference of d2l 1.0.3's attention and transformer code (d2l/torch.py: masked_softmax,
DotProductAttention, MultiHeadAttention, PositionalEncoding, PositionWiseFFN, AddNorm,
TransformerEncoderBlock/Encoder, TransformerDecoderBlock/Decoder), written with nn.Linear of
explicit sizes instead of LazyLinear and with the C++ module names, so parameters match by name.
Inputs and weights come from closed formulas both sides compute (no files):
  weight(k, shape) = 0.5 * sin(0.7 * arange(n) + k + 1), k = index in sorted parameter names
  data(phase, shape) = cos(0.3 * arange(n) + phase)
Run:  ~/.cache/attnlab/venv-torch-2.11.0/bin/python tests/python/nn_golden.py [--json]
(C++ blocks to paste, or JSON for tests/python/golden_check.py: ctest golden.nn_golden)
"""
import math

import torch
from torch import nn

from golden_common import data, fill, ids, put_tensor, weight  # noqa: F401  (shared with the C++ tests)
from golden_out import Golden, json_flag


# ----------------------------------------------------------------------------------- d2l 1.0.3
def masked_softmax(X, valid_lens):
    def _sequence_mask(X, valid_len, value=0):
        maxlen = X.size(1)
        mask = torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
        X[~mask] = value
        return X

    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = _sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return nn.functional.softmax(X.reshape(shape), dim=-1)


class DotProductAttention(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


class MultiHeadAttention(nn.Module):
    def __init__(self, num_hiddens, num_heads, dropout, bias=False, in_size=None):
        super().__init__()
        in_size = in_size or num_hiddens
        self.num_heads = num_heads
        self.attention = DotProductAttention(dropout)
        self.W_q = nn.Linear(in_size, num_hiddens, bias=bias)
        self.W_k = nn.Linear(in_size, num_hiddens, bias=bias)
        self.W_v = nn.Linear(in_size, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens):
        queries = self.transpose_qkv(self.W_q(queries))
        keys = self.transpose_qkv(self.W_k(keys))
        values = self.transpose_qkv(self.W_v(values))
        if valid_lens is not None:
            valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)
        output = self.attention(queries, keys, values, valid_lens)
        return self.W_o(self.transpose_output(output))

    def transpose_qkv(self, X):
        X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1)
        X = X.permute(0, 2, 1, 3)
        return X.reshape(-1, X.shape[2], X.shape[3])

    def transpose_output(self, X):
        X = X.reshape(-1, self.num_heads, X.shape[1], X.shape[2])
        X = X.permute(0, 2, 1, 3)
        return X.reshape(X.shape[0], X.shape[1], -1)


class PositionalEncoding(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = torch.zeros((1, max_len, num_hiddens))
        X = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
            10000, torch.arange(0, num_hiddens, 2, dtype=torch.float32) / num_hiddens)
        self.P[:, :, 0::2] = torch.sin(X)
        self.P[:, :, 1::2] = torch.cos(X)

    def forward(self, X):
        X = X + self.P[:, :X.shape[1], :].to(X.device)
        return self.dropout(X)


class PositionWiseFFN(nn.Module):
    def __init__(self, in_size, ffn_num_hiddens, ffn_num_outputs):
        super().__init__()
        self.dense1 = nn.Linear(in_size, ffn_num_hiddens)
        self.relu = nn.ReLU()
        self.dense2 = nn.Linear(ffn_num_hiddens, ffn_num_outputs)

    def forward(self, X):
        return self.dense2(self.relu(self.dense1(X)))


class AddNorm(nn.Module):
    def __init__(self, norm_shape, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm(norm_shape)

    def forward(self, X, Y):
        return self.ln(self.dropout(Y) + X)


class TransformerEncoderBlock(nn.Module):
    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias=False):
        super().__init__()
        self.attention = MultiHeadAttention(num_hiddens, num_heads, dropout, use_bias)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(num_hiddens, ffn_num_hiddens, num_hiddens)
        self.addnorm2 = AddNorm(num_hiddens, dropout)

    def forward(self, X, valid_lens):
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))
        return self.addnorm2(Y, self.ffn(Y))


class TransformerEncoder(nn.Module):
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout, use_bias=False):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout)
        self.blks = nn.ModuleList([TransformerEncoderBlock(num_hiddens, ffn_num_hiddens, num_heads, dropout,
                                                           use_bias) for _ in range(num_blks)])

    def forward(self, X, valid_lens):
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))
        for blk in self.blks:
            X = blk(X, valid_lens)
        return X


class TransformerDecoderBlock(nn.Module):
    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, i):
        super().__init__()
        self.i = i
        self.attention1 = MultiHeadAttention(num_hiddens, num_heads, dropout)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.attention2 = MultiHeadAttention(num_hiddens, num_heads, dropout)
        self.addnorm2 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(num_hiddens, ffn_num_hiddens, num_hiddens)
        self.addnorm3 = AddNorm(num_hiddens, dropout)

    def forward(self, X, state):
        enc_outputs, enc_valid_lens = state[0], state[1]
        if state[2][self.i] is None:
            key_values = X
        else:
            key_values = torch.cat((state[2][self.i], X), dim=1)
        state[2][self.i] = key_values
        if self.training:
            batch_size, num_steps, _ = X.shape
            dec_valid_lens = torch.arange(1, num_steps + 1, device=X.device).repeat(batch_size, 1)
        else:
            dec_valid_lens = None
        X2 = self.attention1(X, key_values, key_values, dec_valid_lens)
        Y = self.addnorm1(X, X2)
        Y2 = self.attention2(Y, enc_outputs, enc_outputs, enc_valid_lens)
        Z = self.addnorm2(Y, Y2)
        return self.addnorm3(Z, self.ffn(Z)), state


class TransformerDecoder(nn.Module):
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.num_blks = num_blks
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout)
        self.blks = nn.ModuleList([TransformerDecoderBlock(num_hiddens, ffn_num_hiddens, num_heads, dropout, i)
                                   for i in range(num_blks)])
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs, enc_valid_lens):
        return [enc_outputs, enc_valid_lens, [None] * self.num_blks]

    def forward(self, X, state):
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))
        for blk in self.blks:
            X, state = blk(X, state)
        return self.dense(X), state


golden = Golden("nn_golden.py", json_flag())
golden.block("tests/nn_attention_test.cpp")

scores = data(0.0, (2, 2, 4))
put_tensor(golden, "kMaskedSoftmax1d", masked_softmax(scores.clone(), torch.tensor([2, 3])))
put_tensor(golden, "kMaskedSoftmax2d", masked_softmax(scores.clone(), torch.tensor([[1, 3], [2, 4]])))

for bias in (False, True):
    mha = MultiHeadAttention(8, 2, 0.0, bias=bias)
    fill(mha)
    q, kv = data(0.5, (2, 3, 8)), data(1.5, (2, 4, 8))
    put_tensor(golden, f"kMha{'Bias' if bias else 'NoBias'}", mha(q, kv, kv, torch.tensor([3, 2])))

pe = PositionalEncoding(6, 0.0)
put_tensor(golden, "kPosEncodingRows0to3", pe.P[0, :4, :])
put_tensor(golden, "kPosEncodingRow60", pe.P[0, 60, :])

golden.block("tests/nn_transformer_test.cpp")
enc_blk = TransformerEncoderBlock(8, 16, 2, 0.0, use_bias=True)
fill(enc_blk)
put_tensor(golden, "kEncoderBlock", enc_blk(data(0.2, (2, 5, 8)), torch.tensor([3, 5])), step=3)

dec_blk = TransformerDecoderBlock(8, 16, 2, 0.0, 0)
fill(dec_blk)
enc_out = data(0.9, (2, 5, 8))
dec_blk.train()  # d2l: causal mask in training mode
put_tensor(golden, "kDecoderBlock", dec_blk(data(0.4, (2, 4, 8)), [enc_out, torch.tensor([3, 5]), [None]])[0], step=3)

encoder = TransformerEncoder(11, 8, 16, 2, 2, 0.0, use_bias=False)
fill(encoder)
src, src_valid = ids((2, 5), 11), torch.tensor([4, 2])
enc_states = encoder(src, src_valid)
put_tensor(golden, "kEncoder", enc_states, step=3)

decoder = TransformerDecoder(13, 8, 16, 2, 2, 0.0)
fill(decoder)
decoder.train()
logits, _ = decoder(ids((2, 4), 13, mult=5, add=1), decoder.init_state(enc_states, src_valid))
put_tensor(golden, "kDecoderLogits", logits, step=4)
golden.finish()
