"""Analytic FLOPs of a d2l Transformer training step (see bench/README.md for the formula).

Counted: every GEMM / batched GEMM as 2*m*n*k, over all positions (padding included, as the
kernels compute them); training = 3 x forward (the backward pass computes the input and weight
gradients: two GEMMs of the forward's size each). Not counted: embeddings (lookups), softmax,
layer norm, dropout, element-wise ops, the optimizer (all O(tokens x H) or O(parameters))."""


def transformer_forward_flops(B, S, T, H, F, L_enc, L_dec, V):
    """Forward FLOPs for one batch: B rows, S source / T target positions, width H, FFN width F,
    L_enc / L_dec blocks, target vocabulary V."""
    enc_block = (8 * B * S * H * H      # W_q, W_k, W_v, W_o on S positions
                 + 4 * B * S * S * H    # Q K^T and weights x V over all heads
                 + 4 * B * S * H * F)   # FFN: H -> F -> H
    dec_block = (8 * B * T * H * H      # self-attention projections
                 + 4 * B * T * T * H    # self-attention scores and mixing
                 + 4 * B * T * H * H    # cross-attention W_q, W_o on T positions
                 + 4 * B * S * H * H    # cross-attention W_k, W_v on the S encoder states
                 + 4 * B * T * S * H    # cross-attention scores and mixing
                 + 4 * B * T * H * F)   # FFN
    return L_enc * enc_block + L_dec * dec_block + 2 * B * T * H * V  # + the output layer


def transformer_epoch_flops(batch_rows, S, T, H, F, L_enc, L_dec, V):
    """Training FLOPs of one epoch whose batches have the given row counts."""
    return sum(3 * transformer_forward_flops(b, S, T, H, F, L_enc, L_dec, V) for b in batch_rows)


def for_experiment(cfg, data):
    """(FLOPs per training epoch, per step of a full batch) for an encoder/decoder transformer
    experiment on fra_eng, or None when the model is not one."""
    m = cfg.get("model", {})
    enc, dec = m.get("encoder", {}), m.get("decoder", {})
    if enc.get("plugin") != "transformer" or dec.get("plugin") != "transformer":
        return None
    H, F = enc.get("num_hiddens", 256), enc.get("ffn_num_hiddens", 64)
    S = T = data.num_steps
    V = len(data.tgt_vocab)
    rows = [min(data.batch_size, data.train_rows - b) for b in range(0, data.train_rows, data.batch_size)]
    args = (S, T, H, F, enc.get("num_blks", 2), dec.get("num_blks", 2), V)
    return transformer_epoch_flops(rows, *args), 3 * transformer_forward_flops(data.batch_size, *args)


def gpt_forward_flops(B, T, H, F, L, V):
    """Forward FLOPs of a decoder-only transformer (gpt) on B rows of T tokens: L blocks of causal
    self-attention (the scores over all T x T pairs, as the kernels compute them, future included)
    and an FFN, then the tied output layer."""
    block = (8 * B * T * H * H     # W_q, W_k, W_v, W_o
             + 4 * B * T * T * H   # Q K^T and weights x V over all heads
             + 4 * B * T * H * F)  # FFN: H -> F -> H
    return L * block + 2 * B * T * H * V


def for_gpt(cfg, steps, vocab=None):
    """(training FLOPs of `steps` full-batch steps, of one step) for a gpt experiment on a text
    dataset; without `vocab`, only for the English characters of fra-eng (gpt_char's 92 tokens:
    <pad>, <unk> and 90 characters), else None."""
    m, d = cfg["model"], cfg["dataset"]
    if vocab is None and (d.get("plugin"), d.get("source"), d.get("max_chars", 0)) != ("text", "fra_eng.en", 0):
        return None
    args = (d.get("batch_size", 32), d.get("block_size", 128), m.get("num_hiddens", 128),
            m.get("ffn_num_hiddens", 512), m.get("num_blks", 4), vocab or 92)
    step = 3 * gpt_forward_flops(*args)
    return steps * step, step
