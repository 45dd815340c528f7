"""Golden values for plugins/scorer/additive/tests/additive_scorer_test.cpp,
plugins/decoder/gru_bahdanau/tests/gru_bahdanau_decoder_test.cpp and
plugins/decoder/gru/tests/gru_decoder_test.cpp.

A reference of d2l 0.17's attention-chapter code (d2l/torch.py of d2l-en v0.17.6: masked_softmax,
AdditiveAttention, Seq2SeqEncoder, Seq2SeqDecoder, Seq2SeqAttentionDecoder), written out here
with batch-first tensors where the C++ is batch-first (the computation is the same). Parameter
names sort in the same order as the C++ modules' names, so the closed-form weights below land on
the same tensors on both sides:
  weight(k, shape) = 0.5 * sin(0.7 * arange(n) + k + 1), k = index in sorted parameter names
  data(phase, shape) = cos(0.3 * arange(n) + phase)
  ids(shape, vocab, mult, add) = (arange(n) * mult + add) % vocab
Run:  ~/.cache/attnlab/venv-torch-2.11.0/bin/python tests/python/chapter_golden.py [--json]
(C++ blocks to paste, or JSON for tests/python/golden_check.py: ctest golden.chapter_golden)
"""
import torch
from torch import nn

from golden_common import data, fill, ids, put_tensor, weight  # noqa: F401  (shared with the C++ tests)
from golden_out import Golden, json_flag


# ----------------------------------------------------------------------------------- d2l 0.17
def sequence_mask(X, valid_len, value=0):
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return nn.functional.softmax(X.reshape(shape), dim=-1)


class AdditiveAttention(nn.Module):
    def __init__(self, key_size, query_size, num_hiddens, dropout):
        super().__init__()
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens):
        queries, keys = self.W_q(queries), self.W_k(keys)
        features = torch.tanh(queries.unsqueeze(2) + keys.unsqueeze(1))
        scores = self.w_v(features).squeeze(-1)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


class Seq2SeqEncoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens, num_layers, dropout=dropout)

    def forward(self, X):
        X = self.embedding(X).permute(1, 0, 2)  # [T, B, E]
        output, state = self.rnn(X)
        return output, state  # [T, B, H], [L, B, H]


class Seq2SeqDecoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout)
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def forward(self, X, state):
        # d2l 0.17 takes the context from the state it is given; in a full-sequence forward that
        # is the encoder's final state, as in the C++ decoder.
        X = self.embedding(X).permute(1, 0, 2)
        context = state[-1].repeat(X.shape[0], 1, 1)
        output, state = self.rnn(torch.cat((X, context), 2), state)
        return self.dense(output).permute(1, 0, 2), state


class Seq2SeqAttentionDecoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0):
        super().__init__()
        self.attention = AdditiveAttention(num_hiddens, num_hiddens, num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout)
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs, enc_valid_lens):
        outputs, hidden_state = enc_outputs
        return (outputs.permute(1, 0, 2), hidden_state, enc_valid_lens)

    def forward(self, X, state):
        enc_outputs, hidden_state, enc_valid_lens = state
        X = self.embedding(X).permute(1, 0, 2)
        outputs, self.attention_weights = [], []
        for x in X:
            query = torch.unsqueeze(hidden_state[-1], dim=1)
            context = self.attention(query, enc_outputs, enc_outputs, enc_valid_lens)
            x = torch.cat((context, torch.unsqueeze(x, dim=1)), dim=-1)
            out, hidden_state = self.rnn(x.permute(1, 0, 2), hidden_state)
            outputs.append(out)
            self.attention_weights.append(self.attention.attention_weights)
        outputs = self.dense(torch.cat(outputs, dim=0))
        return outputs.permute(1, 0, 2), [enc_outputs, hidden_state, enc_valid_lens]


golden = Golden("chapter_golden.py", json_flag())
golden.block("plugins/scorer/additive/tests/additive_scorer_test.cpp")

# Additive attention with different query (5) and key (3) sizes, 4 hidden units.
att = AdditiveAttention(key_size=3, query_size=5, num_hiddens=4, dropout=0.0).eval()
fill(att)
q, k, v = data(0.1, (2, 2, 5)), data(0.5, (2, 4, 3)), data(0.9, (2, 4, 2))
put_tensor(golden, "kAdditiveOut", att(q, k, v, torch.tensor([2, 3])))
put_tensor(golden, "kAdditiveWeights", att.attention_weights)
att(q, k, v, torch.tensor([[1, 3], [2, 4]]))
put_tensor(golden, "kAdditiveWeights2d", att.attention_weights)

golden.block("plugins/decoder/gru_bahdanau/tests/gru_bahdanau_decoder_test.cpp")
# The book's Bahdanau example sizes: vocab 10, embed 8, hidden 16, 2 layers, batch 4, 7 steps.
enc = Seq2SeqEncoder(10, 8, 16, 2).eval()
dec = Seq2SeqAttentionDecoder(10, 8, 16, 2).eval()
fill(enc)
fill(dec)
X, Y = ids((4, 7), 10), ids((4, 7), 10, mult=3, add=1)
valid = torch.tensor([7, 5, 3, 2])
with torch.no_grad():
    state = dec.init_state(enc(X), valid)
    out, state = dec(Y, state)
put_tensor(golden, "kBahdanauLogits", out, step=7)
put_tensor(golden, "kBahdanauWeights", torch.cat(dec.attention_weights, dim=1), step=5)  # [B, T, S]
put_tensor(golden, "kBahdanauHidden", state[1], step=4)

golden.block("plugins/decoder/gru/tests/gru_decoder_test.cpp")
plain = Seq2SeqDecoder(10, 8, 16, 2).eval()
fill(plain)
with torch.no_grad():
    out, _ = plain(Y, enc(X)[1])
put_tensor(golden, "kGruDecoderLogits", out, step=7)
golden.finish()
