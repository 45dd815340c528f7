"""d2l 0.17's fra-eng models and train_seq2seq (sections 9.7, 10.4, 10.7), eager PyTorch.

- Transformer (10.7): the same computation as d2l 1.0.3's (d2l103.py): bias-free projections,
  norm-last AddNorm; only the trainer differs.
- Bahdanau (10.4): GRU encoder (time-major, as the book), Seq2SeqAttentionDecoder stepping one
  target position at a time with AdditiveAttention.
- train_seq2seq: Xavier init of Linear and GRU weights, MaskedSoftmaxCELoss (per-sequence mean over
  num_steps), l.sum().backward(), clip to global norm 1, Adam. Reported loss = sum(l) / tokens."""
import time

import torch
from torch import nn
from torch.nn import functional as F

import d2l103
from d2l103 import masked_softmax, sequence_mask


class AdditiveAttention(nn.Module):
    def __init__(self, key_size, query_size, num_hiddens, dropout):
        super().__init__()
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens):  # [B, Q, Dq], [B, K, Dk], [B, K, Dv]
        queries, keys = self.W_q(queries), self.W_k(keys)
        features = torch.tanh(queries.unsqueeze(2) + keys.unsqueeze(1))  # [B, Q, K, H]
        scores = self.w_v(features).squeeze(-1)                           # [B, Q, K]
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)    # [B, Q, Dv]


class Seq2SeqEncoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens, num_layers, dropout=dropout)

    def forward(self, X, *args):
        X = self.embedding(X).permute(1, 0, 2)  # [S, B, E]
        output, state = self.rnn(X)             # [S, B, H], [L, B, H]
        return output, state


class Seq2SeqAttentionDecoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
        super().__init__()
        self.attention = AdditiveAttention(num_hiddens, num_hiddens, num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout)
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs, enc_valid_lens, *args):
        outputs, hidden_state = enc_outputs
        return (outputs.permute(1, 0, 2), hidden_state, enc_valid_lens)

    def forward(self, X, state):
        enc_outputs, hidden_state, enc_valid_lens = state  # [B, S, H], [L, B, H], [B]
        X = self.embedding(X).permute(1, 0, 2)             # [T, B, E]
        outputs, self._attention_weights = [], []
        for x in X:
            query = torch.unsqueeze(hidden_state[-1], dim=1)                              # [B, 1, H]
            context = self.attention(query, enc_outputs, enc_outputs, enc_valid_lens)     # [B, 1, H]
            x = torch.cat((context, torch.unsqueeze(x, dim=1)), dim=-1)                   # [B, 1, H + E]
            out, hidden_state = self.rnn(x.permute(1, 0, 2), hidden_state)
            outputs.append(out)
            self._attention_weights.append(self.attention.attention_weights)
        outputs = self.dense(torch.cat(outputs, dim=0))  # [T, B, V]
        return outputs.permute(1, 0, 2), [enc_outputs, hidden_state, enc_valid_lens]


def build_bahdanau(cfg, data):
    e, d = cfg["model"]["encoder"], cfg["model"]["decoder"]
    assert e["plugin"] == "gru" and d["plugin"] == "gru_bahdanau", "the Bahdanau peer needs gru + gru_bahdanau"
    encoder = Seq2SeqEncoder(len(data.src_vocab), e["embed_size"], e["num_hiddens"], e["num_layers"],
                             e.get("dropout", 0.0))
    decoder = Seq2SeqAttentionDecoder(len(data.tgt_vocab), d["embed_size"], d["num_hiddens"], d["num_layers"],
                                      d.get("dropout", 0.0))
    return d2l103.Seq2Seq(encoder, decoder)


def build_transformer(cfg, data, fused=False):
    return d2l103.build(cfg, data, fused)


def xavier_init_weights(m):
    if type(m) == nn.Linear:
        nn.init.xavier_uniform_(m.weight)
    if type(m) == nn.GRU:
        for param in m._flat_weights_names:
            if "weight" in param:
                nn.init.xavier_uniform_(m._parameters[param])


class MaskedSoftmaxCELoss(nn.CrossEntropyLoss):
    """pred [B, T, V], label [B, T], valid_len [B] -> per-sequence loss [B]."""

    def forward(self, pred, label, valid_len):
        weights = sequence_mask(torch.ones_like(label), valid_len)
        self.reduction = "none"
        unweighted_loss = super().forward(pred.permute(0, 2, 1), label)
        return (unweighted_loss * weights).mean(dim=1)


def fit(model, data, cfg, epochs, seed, on_epoch):
    """d2l 0.17's train_seq2seq; on_epoch(dict) after each epoch."""
    t = cfg["trainer"]
    if t.get("init", "xavier") == "xavier":
        model.apply(xavier_init_weights)
    clip = t.get("gradient_clip", 1.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=t.get("lr", 0.005))
    loss = MaskedSoftmaxCELoss()
    model.train()
    device = next(model.parameters()).device
    for epoch in range(1, epochs + 1):
        start, cpu_start = time.perf_counter(), time.process_time()
        # sums stay on the device and are read once per epoch (no host sync per step)
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        tokens = torch.zeros((), dtype=torch.long, device=device)
        steps = 0
        for X, X_valid_len, dec_input, Y, Y_valid_len in data.batches("train", seed + epoch):
            steps += 1
            optimizer.zero_grad()
            Y_hat = model(X, dec_input, X_valid_len)  # dec_input = [<bos>] + Y[:, :-1]
            l = loss(Y_hat, Y, Y_valid_len)
            l.sum().backward()
            if clip > 0:
                nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            loss_sum += l.detach().sum().double()
            tokens += Y_valid_len.sum()
        train_loss, tokens = loss_sum.item(), int(tokens)  # waits for the device
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        on_epoch({"epoch": epoch, "train_seconds": seconds, "train_cpu_seconds": cpu,
                  "train_loss": train_loss / max(tokens, 1), "tokens": tokens, "steps": steps})
