"""A small random Llama as Hugging Face saves it, and what transformers computes with it: the
fixture of plugins/model/gpt/tests/gpt_llama_test.cpp (the gpt plugin's `pretrained:` folder).

    hf_llama_fixture.py OUT

writes OUT/model (config.json, model.safetensors, the tokenizer's files: hf_gpt2_fixture.py's byte-level
BPE): a LlamaForCausalLM of width 32, 4 heads sharing 2 key/value heads, 2 layers, an MLP of 64,
rope_theta 500000, rms_norm_eps 1e-5, an output layer of its own (untied), its RMSNorm weights away
from 1; OUT/bare: the same weights with the output layer tied to the embedding, saved from the
LlamaModel inside (names without the "model." prefix, no lm_head); OUT/expected.safetensors: ids
[B, T] of a batch of texts, their logits [B, T, V] from the untied model and logits_tied from the
tied one (computed in float64, stored in float32), prompt [1, P] and greedy [1, P + N] from generate(). Needs torch, transformers and
tokenizers (scripts/setup's venv); never downloads anything.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_gpt2_fixture import run, save_expected, save_tokenizer, tokenizer  # noqa: E402 (sets the offline flags)

import torch  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402


def config_of(tok, tied):
    return LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_attention_heads=4,
                       num_key_value_heads=2, num_hidden_layers=2, max_position_embeddings=64, rope_theta=500000.0,
                       rms_norm_eps=1e-5, tie_word_embeddings=tied, bos_token_id=tok.eos_token_id,
                       eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id,
                       initializer_range=0.2)  # larger than 0.02: a greedy continuation that varies


def main(out):
    model_dir, bare_dir = (os.path.join(out, d) for d in ("model", "bare"))
    for d in (model_dir, bare_dir):
        os.makedirs(d, exist_ok=True)
    bpe, tok = tokenizer()
    torch.manual_seed(0)
    model = LlamaForCausalLM(config_of(tok, tied=False)).eval()
    with torch.no_grad():  # RMSNorm weights away from 1, so a swapped or missed one shows
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(model_dir)
    save_tokenizer(bpe, tok, model_dir)
    tied = LlamaForCausalLM(config_of(tok, tied=True)).eval()
    tied.model.load_state_dict(model.model.state_dict())
    tied.model.save_pretrained(bare_dir)
    save_tokenizer(bpe, tok, bare_dir)

    save_expected(out, tok, model, logits_tied=tied)


if __name__ == "__main__":
    run(main, "hf_llama_fixture.py")
