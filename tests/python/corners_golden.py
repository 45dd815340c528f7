"""Reference numbers for the corner-sequence models (Deep Learning with PyTorch Step-by-Step, ch. 10).

The book's EncoderDecoderTransf (norm-first layers, final LayerNorm per stack, dropout inside the
FFN, narrow multi-head attention with biased projections, PE = x * sqrt(d_model) + sin/cos) is
written out below as the book writes it. With every parameter set by a closed formula (the same
one tests/regression_models_test.cpp uses, through the name map below) it prints the eval-mode
outputs of a teacher-forced forward and of the autoregressive predict for fixed inputs, and the
parameter counts of the book's models.

    ~/.cache/attnlab/venv-torch-2.11.0/bin/python tests/python/corners_golden.py [--json]

prints the C++ block to paste, or with --json the values for tests/python/golden_check.py (ctest
golden.corners_golden).
"""
import copy
import math
import warnings

import torch
from torch import nn
from torch.nn import functional as F

from golden_out import Golden, json_flag


class MultiHeadedAttention(nn.Module):
    def __init__(self, n_heads, d_model, dropout=0.1):
        super().__init__()
        self.n_heads, self.d_model, self.d_k = n_heads, d_model, d_model // n_heads
        self.linear_query = nn.Linear(d_model, d_model)
        self.linear_key = nn.Linear(d_model, d_model)
        self.linear_value = nn.Linear(d_model, d_model)
        self.linear_out = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def make_chunks(self, x):
        b, l = x.size(0), x.size(1)
        return x.view(b, l, self.n_heads, self.d_k).transpose(1, 2)

    def init_keys(self, key):
        self.proj_key = self.make_chunks(self.linear_key(key))
        self.proj_value = self.make_chunks(self.linear_value(key))

    def forward(self, query, mask=None):
        proj_query = self.make_chunks(self.linear_query(query))
        scores = torch.matmul(proj_query, self.proj_key.transpose(-2, -1)) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        alphas = self.dropout(F.softmax(scores, dim=-1))
        context = torch.matmul(alphas, self.proj_value).transpose(1, 2).contiguous()
        return self.linear_out(context.view(query.size(0), -1, self.d_model))


def ffn(d_model, ff_units, dropout):
    return nn.Sequential(nn.Linear(d_model, ff_units), nn.ReLU(), nn.Dropout(dropout), nn.Linear(ff_units, d_model))


class EncoderLayer(nn.Module):
    def __init__(self, n_heads, d_model, ff_units, dropout=0.1):
        super().__init__()
        self.self_attn_heads = MultiHeadedAttention(n_heads, d_model, dropout)
        self.ffn = ffn(d_model, ff_units, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, query, mask=None):
        norm_query = self.norm1(query)
        self.self_attn_heads.init_keys(norm_query)
        att = query + self.drop1(self.self_attn_heads(norm_query, mask))
        return att + self.drop2(self.ffn(self.norm2(att)))


class DecoderLayer(nn.Module):
    def __init__(self, n_heads, d_model, ff_units, dropout=0.1):
        super().__init__()
        self.self_attn_heads = MultiHeadedAttention(n_heads, d_model, dropout)
        self.cross_attn_heads = MultiHeadedAttention(n_heads, d_model, dropout)
        self.ffn = ffn(d_model, ff_units, dropout)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop1, self.drop2, self.drop3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def init_keys(self, states):
        self.cross_attn_heads.init_keys(states)

    def forward(self, query, source_mask=None, target_mask=None):
        norm_query = self.norm1(query)
        self.self_attn_heads.init_keys(norm_query)
        att1 = query + self.drop1(self.self_attn_heads(norm_query, target_mask))
        att2 = att1 + self.drop2(self.cross_attn_heads(self.norm2(att1), source_mask))
        return att2 + self.drop3(self.ffn(self.norm3(att2)))


class PositionalEncoding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.d_model = d_model
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).float().unsqueeze(1)
        angular_speed = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * angular_speed)
        pe[:, 1::2] = torch.cos(position * angular_speed)
        self.register_buffer("pe", pe.unsqueeze(0))

    def forward(self, x):
        return x * math.sqrt(self.d_model) + self.pe[:, : x.size(1), :]


class EncoderTransf(nn.Module):
    def __init__(self, encoder_layer, n_layers=1, max_len=100):
        super().__init__()
        self.d_model = encoder_layer.self_attn_heads.d_model
        self.pe = PositionalEncoding(max_len, self.d_model)
        self.norm = nn.LayerNorm(self.d_model)
        self.layers = nn.ModuleList([copy.deepcopy(encoder_layer) for _ in range(n_layers)])

    def forward(self, query, mask=None):
        x = self.pe(query)
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class DecoderTransf(nn.Module):
    def __init__(self, decoder_layer, n_layers=1, max_len=100):
        super().__init__()
        self.d_model = decoder_layer.self_attn_heads.d_model
        self.pe = PositionalEncoding(max_len, self.d_model)
        self.norm = nn.LayerNorm(self.d_model)
        self.layers = nn.ModuleList([copy.deepcopy(decoder_layer) for _ in range(n_layers)])

    def init_keys(self, states):
        for layer in self.layers:
            layer.init_keys(states)

    def forward(self, query, source_mask=None, target_mask=None):
        x = self.pe(query)
        for layer in self.layers:
            x = layer(x, source_mask, target_mask)
        return self.norm(x)


class EncoderDecoderTransf(nn.Module):
    def __init__(self, encoder, decoder, input_len, target_len, n_features):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        self.input_len, self.target_len = input_len, target_len
        self.trg_masks = (1 - torch.triu(torch.ones((1, target_len, target_len)), diagonal=1)).bool()
        self.proj = nn.Linear(n_features, encoder.d_model)
        self.linear = nn.Linear(encoder.d_model, n_features)

    def encode(self, source_seq, source_mask=None):
        self.decoder.init_keys(self.encoder(self.proj(source_seq), source_mask))

    def decode(self, shifted_target_seq, source_mask=None, target_mask=None):
        return self.linear(self.decoder(self.proj(shifted_target_seq), source_mask, target_mask))

    def predict(self, source_seq, source_mask=None):
        inputs = source_seq[:, -1:]
        for i in range(self.target_len):
            out = self.decode(inputs, source_mask, self.trg_masks[:, : i + 1, : i + 1])
            inputs = torch.cat([inputs, out[:, -1:, :]], dim=-2).detach()
        return inputs[:, 1:, :]


class TransformerModel(nn.Module):  # the book's wrapper around nn.Transformer (for the count)
    def __init__(self, transformer, n_features):
        super().__init__()
        self.transf = transformer
        self.proj = nn.Linear(n_features, transformer.d_model)
        self.linear = nn.Linear(transformer.d_model, n_features)
        self.norm = nn.LayerNorm(transformer.d_model)


def ours(book_name):
    """The book's parameter name -> seq2seq_regression's (attnlab) name."""
    n = book_name.replace("encoder.layers.", "encoder.blks.").replace("decoder.layers.", "decoder.blks.")
    n = n.replace("encoder.norm.", "encoder.final_ln.").replace("decoder.norm.", "decoder.final_ln.")
    enc = n.startswith("encoder.")
    for a, b in [("self_attn_heads.", "attention." if enc else "attention1."), ("cross_attn_heads.", "attention2."),
                 ("linear_query", "W_q"), ("linear_key", "W_k"), ("linear_value", "W_v"), ("linear_out", "W_o"),
                 ("ffn.0.", "ffn.dense1."), ("ffn.3.", "ffn.dense2."), ("norm1.", "addnorm1.ln."),
                 ("norm2.", "addnorm2.ln."), ("norm3.", "addnorm3.ln.")]:
        n = n.replace(a, b)
    return n


def closed_form(name, shape):
    """Deterministic values from the attnlab name: cos(0.37 * i + 0.05 * len(name)) * 0.5."""
    i = torch.arange(math.prod(shape), dtype=torch.float64)
    return (torch.cos(0.37 * i + 0.05 * len(name)) * 0.5).reshape(shape).float()


warnings.filterwarnings("ignore", message="enable_nested_tensor")  # 3 heads: odd, harmless
torch.manual_seed(42)
model = EncoderDecoderTransf(EncoderTransf(EncoderLayer(n_heads=3, d_model=6, ff_units=10), n_layers=2),
                             DecoderTransf(DecoderLayer(n_heads=3, d_model=6, ff_units=10), n_layers=2),
                             input_len=2, target_len=2, n_features=2)
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(closed_form(ours(name), tuple(p.shape)))
model.eval()
src = torch.sin(torch.arange(12, dtype=torch.float32) * 0.7).reshape(3, 2, 2)         # [3, 2, 2]
tgt_in = torch.cos(torch.arange(12, dtype=torch.float32) * 0.4).reshape(3, 2, 2)      # [3, 2, 2]
with torch.no_grad():
    model.encode(src)
    forward = model.decode(tgt_in, None, model.trg_masks)                             # [3, 2, 2]
    model.encode(src)
    predict = model.predict(src)                                                      # [3, 2, 2]
ref = TransformerModel(nn.Transformer(d_model=6, nhead=3, num_encoder_layers=1, num_decoder_layers=1,
                                      dim_feedforward=20, dropout=0.1, batch_first=True), n_features=2)
count = lambda m: sum(p.numel() for p in m.parameters() if p.requires_grad)  # noqa: E731
golden = Golden("corners_golden.py", json_flag())
golden.block("tests/regression_models_test.cpp", f"torch {torch.__version__}")
golden.comment("The book's EncoderDecoderTransf (norm first, 2 + 2 layers, d_model 6, 3 heads, FFN 10) with")
golden.comment("closed-form weights, eval mode: a teacher-forced forward and predict, each [3, 2, 2].")
golden.const("std::vector<float>", "kBookForward", forward.flatten().tolist(), float32=True)
golden.const("std::vector<float>", "kBookPredict", predict.flatten().tolist(), float32=True)
golden.comment("Parameter counts: EncoderDecoderTransf, of which the final LayerNorms of its two stacks, and")
golden.comment("the book's TransformerModel around nn.Transformer (1 + 1 layers, FFN 20).")
golden.const("int64_t", "kBookParameters", count(model))
golden.const("int64_t", "kBookFinalNormParameters", 2 * 2 * 6)
golden.const("int64_t", "kTorchTransformerParameters", count(ref))
golden.finish()
