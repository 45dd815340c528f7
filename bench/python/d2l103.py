"""d2l 1.0.3's Transformer (sections 11.3-11.7) and its Seq2Seq + Trainer loop, eager PyTorch.

The modules are the book's code with the lazy layers made explicit (same shapes, bias=False
attention projections). Training is d2l's Trainer.fit_epoch: forward, CE ignoring <pad>, Adam,
gradient clipping to global norm 1; validation loss once per epoch (not timed)."""
import math
import time

import torch
from torch import nn
from torch.nn import functional as F


def sequence_mask(X, valid_len, value=0.0):
    """d2l: X [N, K], valid_len [N] -> X with positions >= valid_len set to value (in place)."""
    maxlen = X.size(1)
    mask = torch.arange(maxlen, dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens):
    """d2l: softmax over the last axis of X [B, Q, K], keys >= valid_lens ([B] or [B, Q]) masked."""
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return F.softmax(X.reshape(shape), dim=-1)


class DotProductAttention(nn.Module):
    """d2l's scaled dot-product attention. fused=True uses F.scaled_dot_product_attention with the
    same mask (the path attnlab takes when weights are not recorded)."""

    def __init__(self, dropout, fused=False):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.fused = fused

    def forward(self, queries, keys, values, valid_lens=None):  # [B, Q, D], [B, K, D], [B, K, Dv]
        if self.fused and valid_lens is not None:
            lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(-1, queries.shape[1])
            keep = torch.arange(keys.shape[1], device=keys.device)[None, None, :] < lens[..., None]  # [B, Q, K]
            return F.scaled_dot_product_attention(queries, keys, values, keep,
                                                  self.dropout.p if self.training else 0.0)
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)  # [B, Q, K]
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)  # [B, Q, Dv]


def transpose_qkv(X, num_heads):  # [B, T, H] -> [B * heads, T, H / heads]
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def transpose_output(X, num_heads):  # [B * heads, T, H / heads] -> [B, T, H]
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


class MultiHeadAttention(nn.Module):
    def __init__(self, num_hiddens, num_heads, dropout, bias=False, fused=False):
        super().__init__()
        self.num_heads = num_heads
        self.attention = DotProductAttention(dropout, fused)
        self.W_q = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_k = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_v = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens):
        queries = transpose_qkv(self.W_q(queries), self.num_heads)
        keys = transpose_qkv(self.W_k(keys), self.num_heads)
        values = transpose_qkv(self.W_v(values), self.num_heads)
        if valid_lens is not None:
            valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)
        output = self.attention(queries, keys, values, valid_lens)
        return self.W_o(transpose_output(output, self.num_heads))


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
    def __init__(self, num_hiddens, ffn_num_hiddens, ffn_num_outputs):
        super().__init__()
        self.dense1 = nn.Linear(num_hiddens, ffn_num_hiddens)
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
    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias=False, fused=False):
        super().__init__()
        self.attention = MultiHeadAttention(num_hiddens, num_heads, dropout, use_bias, fused)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(num_hiddens, ffn_num_hiddens, num_hiddens)
        self.addnorm2 = AddNorm(num_hiddens, dropout)

    def forward(self, X, valid_lens):
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))
        return self.addnorm2(Y, self.ffn(Y))


class TransformerEncoder(nn.Module):
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout,
                 use_bias=False, fused=False):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout)
        self.blks = nn.Sequential()
        for i in range(num_blks):
            self.blks.add_module("block" + str(i), TransformerEncoderBlock(
                num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias, fused))

    def forward(self, X, valid_lens):
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))
        for blk in self.blks:
            X = blk(X, valid_lens)
        return X


class TransformerDecoderBlock(nn.Module):
    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, i, use_bias=False, fused=False):
        super().__init__()
        self.i = i
        self.attention1 = MultiHeadAttention(num_hiddens, num_heads, dropout, use_bias, fused)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.attention2 = MultiHeadAttention(num_hiddens, num_heads, dropout, use_bias, fused)
        self.addnorm2 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(num_hiddens, ffn_num_hiddens, num_hiddens)
        self.addnorm3 = AddNorm(num_hiddens, dropout)

    def forward(self, X, state):
        enc_outputs, enc_valid_lens = state[0], state[1]
        key_values = X if state[2][self.i] is None else torch.cat((state[2][self.i], X), dim=1)
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
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout,
                 use_bias=False, fused=False):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.num_blks = num_blks
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout)
        self.blks = nn.Sequential()
        for i in range(num_blks):
            self.blks.add_module("block" + str(i), TransformerDecoderBlock(
                num_hiddens, ffn_num_hiddens, num_heads, dropout, i, use_bias, fused))
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs, enc_valid_lens):
        return [enc_outputs, enc_valid_lens, [None] * self.num_blks]

    def forward(self, X, state):
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))
        for blk in self.blks:
            X, state = blk(X, state)
        return self.dense(X), state


class Seq2Seq(nn.Module):
    """d2l's EncoderDecoder: forward(enc_X, dec_X, enc_valid_len) -> logits [B, T, V]."""

    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def forward(self, enc_X, dec_X, *args):
        enc_outputs = self.encoder(enc_X, *args)
        dec_state = self.decoder.init_state(enc_outputs, *args)
        return self.decoder(dec_X, dec_state)[0]


def build(cfg, data, fused=False):
    """The experiment's model: {encoder: {plugin: transformer, ...}, decoder: same}."""
    def stack(kind, section, vocab):
        o = cfg["model"][section]
        assert o.get("norm", "last") == "last", "the d2l 1.0.3 peer is norm-last only"
        return kind(vocab, o.get("num_hiddens", 256), o.get("ffn_num_hiddens", 64), o.get("num_heads", 4),
                    o.get("num_blks", 2), o.get("dropout", 0.2), o.get("bias", False), fused)
    return Seq2Seq(stack(TransformerEncoder, "encoder", len(data.src_vocab)),
                   stack(TransformerDecoder, "decoder", len(data.tgt_vocab)))


def fit(model, data, cfg, epochs, seed, on_epoch):
    """d2l 1.0.3 Trainer.fit with Seq2Seq.loss; on_epoch(dict) after each epoch."""
    t = cfg["trainer"]
    clip = t.get("gradient_clip", 1.0)
    opt = torch.optim.Adam(model.parameters(), lr=t.get("lr", 0.001))
    pad = data.pad_id
    device = next(model.parameters()).device
    for epoch in range(1, epochs + 1):
        start, cpu_start = time.perf_counter(), time.process_time()
        model.train()
        # sums stay on the device and are read once per epoch (no host sync per step)
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        tokens = torch.zeros((), dtype=torch.long, device=device)
        steps = 0
        for src, src_len, tgt_in, tgt_out, tgt_len in data.batches("train", seed + epoch):
            steps += 1
            Y_hat = model(src, tgt_in, src_len)  # [B, T, V]
            l = F.cross_entropy(Y_hat.reshape(-1, Y_hat.shape[-1]), tgt_out.reshape(-1), reduction="none")
            mask = (tgt_out.reshape(-1) != pad).type(torch.float32)
            loss = (l * mask).sum() / mask.sum()  # d2l's Seq2Seq.loss
            opt.zero_grad()
            loss.backward()
            if clip > 0:
                nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            n = tgt_len.sum()
            loss_sum += loss.detach().double() * n
            tokens += n
        train_loss, tokens = loss_sum.item(), int(tokens)  # waits for the device
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        report = {"epoch": epoch, "train_seconds": seconds, "train_cpu_seconds": cpu,
                  "train_loss": train_loss / max(tokens, 1), "tokens": tokens, "steps": steps}
        if data.has_val and t.get("validate", True):
            report["val_loss"] = validation_loss(model, data)
        on_epoch(report)


@torch.no_grad()
def validation_loss(model, data):
    model.eval()
    total, tokens = 0.0, 0
    for src, src_len, tgt_in, tgt_out, tgt_len in data.batches("val", 0):
        Y_hat = model(src, tgt_in, src_len)
        total += F.cross_entropy(Y_hat.reshape(-1, Y_hat.shape[-1]), tgt_out.reshape(-1),
                                 ignore_index=data.pad_id, reduction="sum").item()
        tokens += int(tgt_len.sum())
    model.train()
    return total / max(tokens, 1)
