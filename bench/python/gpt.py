"""A character GPT in eager PyTorch, nanoGPT-shaped (Karpathy's model.py), as the peer of attnlab's
`gpt` model plugin trained by the `lm` trainer (experiments/gpt_char.yaml).

The model is nanoGPT's: a token embedding plus positions (dropout on the sum), blocks of
`x + attn(ln_1(x))` and `x + mlp(ln_2(x))` with causal self-attention through
F.scaled_dot_product_attention(is_causal=True) (attention dropout inside it, residual dropout
after c_proj), one fused c_attn projection for q, k and v, an MLP c_fc -> GELU -> c_proj, a final
LayerNorm and the output layer tied to the token embedding. At the settings attnlab's plugin
resolves gpt_char.yaml to, which differ from nanoGPT's defaults here and there:
  - positions: `positional_encoding: auto` with the dot_product scorer is the sinusoidal encoding
    (Vaswani et al.; framework/src/nn/layers.cpp's formula in float32), not a learned table;
  - GELU exact (erf; the plugin's `activation: gelu`), biases in every Linear and LayerNorm;
  - GPT-2's initialisation as attnlab draws it (nn::TransformerInit::Gpt2): every module built in
    attnlab's order with PyTorch's default init first, then normal(0, 0.02) on the embedding and
    each Linear in module order (biases zero), then normal(0, 0.02 / sqrt(2 L)) on every c_proj;
    with the same seed both sides start from the same weights (c_attn's rows are attnlab's W_q, W_k,
    W_v drawn one after another: the same numbers). nanoGPT's extra lm_head Linear, which it ties
    and initialises again, is not made (attnlab has none);
  - Adam (not AdamW, no weight decay), betas (0.9, trainer.adam_beta2 = 0.99), eps 1e-8, with
    PyTorch's fused CPU kernel (`fused=True`, the kernel attnlab's FusedAdam calls); the learning
    rate of step t (1-based) from attnlab's cosine schedule with warmup and min_lr
    (framework/src/train/schedule.cpp), set before each step; gradients clipped to global norm
    trainer.gradient_clip (1.0) with torch.nn.utils.clip_grad_norm_.
Training follows the lm trainer's step mode: trainer.max_steps steps reported every
trainer.eval_every steps (one report = one "epoch" line); step s is batch s of the training batches
`runner batches` exports (the dataset's own rows and order: its epoch e, drawn with seed + e, is
the lm trainer's training epoch e - 1, drawn with seed + 1 + (e - 1)). The loss is the mean
cross-entropy over the batch's tokens (<pad> never occurs in a text dataset's targets); the report's
loss is the token-weighted mean over its steps, summed on the device and read once per report.

What differs from attnlab: the dropout masks. attnlab's fused CPU kernels draw their own stream
(framework/src/nn/fused_add_norm.cpp), so with dropout 0.1 the losses agree statistically, and with
`model.dropout=0` step for step (bench/README.md has both)."""
import math
import time

import torch
from torch import nn
from torch.nn import functional as F

from exported import ExportedBatches


# ------------------------------------------------------------------------------------------- model
def sinusoidal(max_len, hiddens):
    """[max_len, H] as framework/src/nn/layers.cpp computes it (float32)."""
    x = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
        10000, torch.arange(0, hiddens, 2, dtype=torch.float32) / hiddens)
    p = torch.zeros(max_len, hiddens)
    p[:, 0::2] = torch.sin(x)
    p[:, 1::2] = torch.cos(x[:, : hiddens // 2])
    return p


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_head, self.dropout = c["num_heads"], c["dropout"]
        H = c["num_hiddens"]
        self.c_attn = nn.Linear(H, 3 * H, bias=c["bias"])  # attnlab's W_q, W_k, W_v stacked
        self.c_proj = nn.Linear(H, H, bias=c["bias"])      # W_o
        self.resid_dropout = nn.Dropout(c["dropout"])

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # [B, heads, T, d]
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, Fh = c["num_hiddens"], c["ffn_num_hiddens"]
        self.c_fc = nn.Linear(H, Fh)  # attnlab's FFN dense1 / dense2 always have biases
        self.gelu = nn.GELU(approximate="tanh" if c["activation"] == "gelu_tanh" else "none")
        self.c_proj = nn.Linear(Fh, H)
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        eps = c["layer_norm_eps"]
        # attnlab's order (attention1, addnorm1, ffn, addnorm3): LayerNorms draw nothing, the order
        # of the Linears is what the initialisation follows
        self.attn = CausalSelfAttention(c)
        self.ln_1 = nn.LayerNorm(c["num_hiddens"], eps=eps)
        self.mlp = MLP(c)
        self.ln_2 = nn.LayerNorm(c["num_hiddens"], eps=eps)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c, vocab_size):
        super().__init__()
        H = c["num_hiddens"]
        self.wte = nn.Embedding(vocab_size, H)
        self.register_buffer("P", sinusoidal(c["max_len"], H), persistent=False)
        self.drop = nn.Dropout(c["dropout"])
        self.h = nn.ModuleList(Block(c) for _ in range(c["num_blks"]))
        self.ln_f = nn.LayerNorm(H, eps=c["layer_norm_eps"])
        self.init_gpt2(c["num_blks"])

    @torch.no_grad()
    def init_gpt2(self, num_blks):
        """attnlab's nn::TransformerInit::Gpt2 (framework/src/nn/transformer.cpp), in its order."""
        for m in self.modules():
            if isinstance(m, nn.Linear):
                m.weight.normal_(0.0, 0.02)
                if m.bias is not None:
                    m.bias.zero_()
            elif isinstance(m, nn.Embedding):
                m.weight.normal_(0.0, 0.02)
        residual = 0.02 / math.sqrt(2.0 * max(num_blks, 1))
        for block in self.h:
            block.attn.c_proj.weight.normal_(0.0, residual)
            block.mlp.c_proj.weight.normal_(0.0, residual)

    def forward(self, idx):  # [B, T] -> logits [B, T, V]
        x = self.drop(self.wte(idx) + self.P[: idx.shape[1]])
        for block in self.h:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied output layer, no bias


def options(cfg):
    """The gpt plugin's options at their defaults (plugins/model/gpt/gpt.cpp), the file's over them;
    what the peer does not implement is an error, not a silent difference."""
    m = cfg["model"]
    assert m.get("plugin") == "gpt", "the gpt peer trains model: {plugin: gpt}"
    c = {"num_hiddens": 128, "ffn_num_hiddens": 512, "num_heads": 4, "num_blks": 4, "dropout": 0.1, "bias": True,
         "norm": "first", "max_len": 1024, "positional_encoding": "auto", "init": "gpt2", "activation": "gelu",
         "tie_embeddings": True, "layer_norm_eps": 1e-5, "scale_embeddings": False, "attention_only": False,
         "ffn_dropout": 0.0, "attention_dropout": None, "kv_heads": None, "attention": {"scorer": "dot_product"}}
    c.update(m)
    scorer = c["attention"]["scorer"] if isinstance(c["attention"], dict) else c["attention"]
    scorer = scorer["plugin"] if isinstance(scorer, dict) else scorer
    checks = {"norm": c["norm"] == "first", "init": c["init"] == "gpt2", "tie_embeddings": c["tie_embeddings"],
              "scale_embeddings": not c["scale_embeddings"], "attention_only": not c["attention_only"],
              "ffn_dropout": not c["ffn_dropout"], "kv_heads": c["kv_heads"] in (None, c["num_heads"]),
              "attention_dropout": c["attention_dropout"] in (None, c["dropout"]),
              "activation": c["activation"] in ("gelu", "gelu_tanh"),
              "attention.scorer": scorer == "dot_product",
              "positional_encoding": c["positional_encoding"] in ("auto", "sinusoidal")}
    bad = [k for k, ok in checks.items() if not ok]
    what = ", ".join(f"{k}: {c[k.split('.')[0]]}" for k in bad)
    assert not bad, f"the gpt peer does not implement model {what}"
    return c


def build(cfg, data):
    return GPT(options(cfg), data.vocab_size)


# -------------------------------------------------------------------------------------------- data
class LmBatches:
    """The training batches of the lm trainer's steps, exported by `runner batches` (not timed):
    step s (0-based) is batch s of the dataset's training epochs in turn."""

    def __init__(self, cfg, args):
        t = cfg["trainer"]
        steps = t.get("max_steps", 0) or None
        epochs = 1 if steps else (args.epochs or t.get("max_epochs", 10))
        data = ExportedBatches(cfg, args, epochs=epochs, parts=("tgt_in", "tgt_out", "tgt_valid_lens"),
                               max_batches=steps)
        if steps and data.batches_per_epoch * epochs < steps:  # more than one dataset epoch of steps
            epochs = -(-steps // data.batches_per_epoch)
            data = ExportedBatches(cfg, args, epochs=epochs, parts=("tgt_in", "tgt_out", "tgt_valid_lens"),
                                   max_batches=steps)
        self.data, self.vocab_size, self.pad_id = data, data.tgt_vocab_size, data.pad_id
        self.batches_per_epoch, self.has_val = data.batches_per_epoch, False

    def epoch(self, e):
        """Dataset epoch e (1-based, drawn with seed + e): [(tgt_in, tgt_out, tgt_valid_lens)]."""
        return self.data.epochs[e]

    def steps(self, begin, end):
        """The batches of steps begin..end - 1 (0-based) in step mode."""
        flat = [b for e in sorted(self.data.epochs) for b in self.data.epochs[e]]
        assert end <= len(flat), f"exported {len(flat)} batches, steps up to {end} asked for"
        return flat[begin:end]


def data(cfg, args):
    return LmBatches(cfg, args)


# --------------------------------------------------------------------------------------- training
def schedule(cfg, total_default):
    """attnlab's LrSchedule::at for the lm trainer's `schedule:` (constant, linear_warmup, cosine)."""
    t = cfg["trainer"]
    lr = t.get("lr", 1e-3)
    s = t.get("schedule") or {"type": "constant"}
    kind, w = s.get("type", "constant"), max(s.get("warmup_steps", 4000), 1)
    total, min_lr = s.get("total_steps", 0) or total_default, s.get("min_lr", 0.0)

    def at(step):
        t_ = float(max(step, 1))
        if kind == "constant":
            return lr
        if kind == "linear_warmup":
            return lr * min(1.0, t_ / w)
        if kind == "cosine":
            if t_ <= w:
                return lr * t_ / w
            progress = min(1.0, (t_ - w) / float(max(total - w, 1)))
            return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * progress))
        raise ValueError(f"the gpt peer has no schedule '{kind}'")
    return at


def fit(model, data, cfg, epochs, seed, on_epoch):
    """The lm trainer's loop (plugins/trainer/lm/lm.cpp, framework/src/train/epoch_loop.cpp): step
    mode with max_steps, else whole dataset epochs; on_epoch(dict) after each report."""
    t = cfg["trainer"]
    max_steps, every = t.get("max_steps", 0), t.get("eval_every", 100)
    if max_steps:
        intervals = [(k, (k - 1) * every, min(k * every, max_steps)) for k in range(1, -(-max_steps // every) + 1)]
        total = max_steps
    else:
        intervals = [(e, None, None) for e in range(1, epochs + 1)]
        total = max(data.batches_per_epoch * epochs, (t.get("schedule") or {}).get("warmup_steps", 0) + 1)
    lr_at = schedule(cfg, total)
    clip = t.get("gradient_clip", 1.0)
    params = list(model.parameters())  # the tied embedding once
    device = params[0].device
    opt = torch.optim.Adam(params, lr=lr_at(1), betas=(t.get("adam_beta1", 0.9), t.get("adam_beta2", 0.99)),
                           fused=True)
    step = 0
    for k, begin, end in intervals:
        start, cpu_start = time.perf_counter(), time.process_time()
        model.train()
        batches = data.steps(begin, end) if max_steps else data.epoch(k)
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)  # on the device, read once
        tokens = 0
        for tgt_in, tgt_out, tgt_len in batches:
            if device.type != "cpu":
                tgt_in, tgt_out = tgt_in.to(device, non_blocking=True), tgt_out.to(device, non_blocking=True)
            step += 1
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            opt.zero_grad()
            logits = model(tgt_in)  # [B, T, V]
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=data.pad_id)
            loss.backward()
            if clip > 0:
                nn.utils.clip_grad_norm_(params, clip)
            opt.step()
            n = int(tgt_len.sum())  # a CPU tensor: no device sync
            loss_sum += loss.detach().double() * n
            tokens += n
        train_loss = loss_sum.item() / max(tokens, 1)  # waits for the device
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        on_epoch({"epoch": k, "train_seconds": seconds, "train_cpu_seconds": cpu, "train_loss": train_loss,
                  "tokens": tokens, "steps": len(batches), "lr": lr_at(step)})
