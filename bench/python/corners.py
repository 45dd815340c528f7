"""Step-by-Step ch. 10: predict the last two corners of a square from the first two, with the
book's EncoderDecoderTransf (as attnlab's seq2seq_regression plugin builds it): a linear
projection 2 -> d_model, x * sqrt(d_model) + positional encoding, norm-first (or norm-last)
transformer stacks with a final LayerNorm each (norm-first), dropout inside the FFN, biased
attention projections, a linear layer back to 2 features; Xavier-uniform init; MSE + Adam.

The data are drawn exactly as attnlab's corners dataset draws them (one seeded torch generator:
start corners, directions, noise), so both sides train on the same sequences."""
import math
import time

import torch
from torch import nn

from d2l103 import MultiHeadAttention, PositionalEncoding

SQUARE = torch.tensor([[-1.0, -1.0], [-1.0, 1.0], [1.0, 1.0], [1.0, -1.0]])  # [4, 2]


def generate(n, seed, noise):
    """(points [n, 4, 2], directions [n]) with the fixed-length draw order of attnlab's corners."""
    g = torch.Generator().manual_seed(seed)
    starts = torch.randint(4, (n,), generator=g)
    directions = torch.randint(2, (n,), generator=g)
    jitter = torch.randn((n, 4, 2), generator=g) * noise
    cw = (starts[:, None] + torch.arange(4)[None, :]) % 4  # [n, 4] clockwise walk
    order = torch.where(directions[:, None] == 1, cw, cw.flip(1))
    return SQUARE[order.reshape(-1)].reshape(n, 4, 2) + jitter, directions


class Corners:
    def __init__(self, options):
        assert not options.get("variable_len", False), "the corners peer covers fixed-length squares"
        noise = options.get("noise", 0.1)
        self.batch_size = options.get("batch_size", 16)
        self.train, _ = generate(options.get("n", 128), options.get("seed", 13), noise)
        self.test, _ = generate(options.get("test_n", 128), options.get("test_seed", 17), noise)

    def batches(self, split, seed):
        """[(src [B, 2, 2], tgt_in [B, 2, 2], tgt_out [B, 2, 2])]"""
        points = self.train if split == "train" else self.test
        n = points.shape[0]
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)) if split == "train" \
            else torch.arange(n)
        out = []
        for b in range(0, n, self.batch_size):
            p = points[order[b: b + self.batch_size]]
            src, tgt = p[:, :2], p[:, 2:]
            out.append((src, torch.cat((src[:, -1:], tgt[:, :-1]), 1), tgt))
        return out


class FFN(nn.Module):
    def __init__(self, d_model, ffn_hiddens, dropout):
        super().__init__()
        self.dense1, self.dense2 = nn.Linear(d_model, ffn_hiddens), nn.Linear(ffn_hiddens, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dense2(self.dropout(torch.relu(self.dense1(x))))


class Sublayer(nn.Module):
    """norm first: x + dropout(f(ln(x))); norm last: ln(x + dropout(f(x)))."""

    def __init__(self, d_model, dropout, norm_first):
        super().__init__()
        self.ln, self.dropout, self.norm_first = nn.LayerNorm(d_model), nn.Dropout(dropout), norm_first

    def forward(self, x, f):
        if self.norm_first:
            return x + self.dropout(f(self.ln(x)))
        return self.ln(x + self.dropout(f(x)))


class EncoderLayer(nn.Module):
    def __init__(self, o):
        super().__init__()
        self.attn = MultiHeadAttention(o["d"], o["heads"], o["dropout"], bias=o["bias"])
        self.ffn = FFN(o["d"], o["ffn"], o["ffn_dropout"])
        self.sub1, self.sub2 = (Sublayer(o["d"], o["dropout"], o["norm_first"]) for _ in range(2))

    def forward(self, x):
        x = self.sub1(x, lambda h: self.attn(h, h, h, None))
        return self.sub2(x, self.ffn)


class DecoderLayer(nn.Module):
    def __init__(self, o):
        super().__init__()
        self.self_attn = MultiHeadAttention(o["d"], o["heads"], o["dropout"], bias=o["bias"])
        self.cross_attn = MultiHeadAttention(o["d"], o["heads"], o["dropout"], bias=o["bias"])
        self.ffn = FFN(o["d"], o["ffn"], o["ffn_dropout"])
        self.sub1, self.sub2, self.sub3 = (Sublayer(o["d"], o["dropout"], o["norm_first"]) for _ in range(3))

    def forward(self, x, states, causal):
        x = self.sub1(x, lambda h: self.self_attn(h, h, h, causal))
        x = self.sub2(x, lambda h: self.cross_attn(h, states, states, None))
        return self.sub3(x, self.ffn)


class EncoderDecoderTransf(nn.Module):
    def __init__(self, m):
        super().__init__()
        o = {"d": m.get("num_hiddens", 6), "heads": m.get("num_heads", 3), "ffn": m.get("ffn_num_hiddens", 10),
             "dropout": m.get("dropout", 0.1), "ffn_dropout": m.get("ffn_dropout", 0.1), "bias": m.get("bias", True),
             "norm_first": m.get("norm", "first") == "first"}
        self.scale = math.sqrt(o["d"])
        self.proj = nn.Linear(2, o["d"])
        self.pe = PositionalEncoding(o["d"], m.get("pe_dropout", 0.0), m.get("max_len", 100))
        blks = m.get("num_blks", 2)
        self.encoder = nn.ModuleList(EncoderLayer(o) for _ in range(blks))
        self.decoder = nn.ModuleList(DecoderLayer(o) for _ in range(blks))
        self.enc_ln = nn.LayerNorm(o["d"]) if o["norm_first"] else nn.Identity()
        self.dec_ln = nn.LayerNorm(o["d"]) if o["norm_first"] else nn.Identity()
        self.linear = nn.Linear(o["d"], 2)
        if m.get("init", "xavier_uniform") == "xavier_uniform":
            for p in self.parameters():
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)

    def embed(self, x):
        return self.pe(self.proj(x) * self.scale)

    def encode(self, src):
        h = self.embed(src)
        for layer in self.encoder:
            h = layer(h)
        return self.enc_ln(h)  # [B, S, d]

    def decode(self, states, tgt_in):
        b, t = tgt_in.shape[:2]
        causal = torch.arange(1, t + 1, device=tgt_in.device).repeat(b, 1)  # [B, T]: query i sees keys 0..i
        h = self.embed(tgt_in)
        for layer in self.decoder:
            h = layer(h, states, causal)
        return self.linear(self.dec_ln(h))  # [B, T, 2]

    def forward(self, src, tgt_in):
        return self.decode(self.encode(src), tgt_in)

    def predict(self, src, steps):
        states, inputs = self.encode(src), src[:, -1:]
        for i in range(steps):
            out = self.decode(states, inputs)
            inputs = torch.cat((inputs, out[:, i: i + 1]), 1).detach()
        return inputs[:, 1:]


def build(cfg, data):
    assert cfg["model"].get("plugin") == "seq2seq_regression", "the corners peer mirrors seq2seq_regression"
    return EncoderDecoderTransf(cfg["model"])


def fit(model, data, cfg, epochs, seed, on_epoch):
    """attnlab's 'regression' trainer: MSE, Adam, the book's mean of batch losses (summed on the
    device, read once per epoch); autoregressive validation on the test set after every epoch
    (not timed)."""
    opt = torch.optim.Adam(model.parameters(), lr=cfg["trainer"].get("lr", 0.01))
    mse = nn.MSELoss()
    device = next(model.parameters()).device
    for epoch in range(1, epochs + 1):
        start, cpu_start = time.perf_counter(), time.process_time()
        model.train()
        loss_sum, batches, points = torch.zeros((), dtype=torch.float64, device=device), 0, 0
        for src, tgt_in, tgt_out in data.batches("train", seed + epoch):
            loss = mse(model(src, tgt_in), tgt_out)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += loss.detach().double()
            batches += 1
            points += tgt_out.shape[0] * tgt_out.shape[1]
        train_loss = loss_sum.item() / max(batches, 1)  # waits for the device
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        report = {"epoch": epoch, "train_seconds": seconds, "train_cpu_seconds": cpu,
                  "train_loss": train_loss, "tokens": points, "steps": batches}
        if cfg["trainer"].get("validate", True):
            model.eval()
            with torch.no_grad():
                val = [mse(model.predict(s, t.shape[1]), t).item() for s, _, t in data.batches("test", 0)]
            report["val_loss"] = sum(val) / len(val)
        on_epoch(report)
