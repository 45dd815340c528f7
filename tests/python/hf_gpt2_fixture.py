"""A small random GPT-2 as Hugging Face saves it, and what transformers computes with it: the
fixture of plugins/model/gpt/tests/gpt_hf_test.cpp (the gpt plugin's `pretrained:` folder).

    hf_gpt2_fixture.py OUT

writes OUT/model (config.json, model.safetensors, the tokenizer's files: a byte-level BPE of 400
tokens learned from English sentences given here), OUT/bare (the same weights saved from the
GPT2Model inside, whose names lack the "transformer." prefix), OUT/fp16 and OUT/bf16 (the model in
float16, in bfloat16) and OUT/expected.safetensors: ids [B, T] of a batch of texts, their logits
[B, T, V] (computed in float64, stored in float32; and logits16, logits_bf16 from the float16 and
bfloat16 models, computed from their rounded weights), prompt [1, P] and greedy [1, P + N] from generate(). Needs torch, transformers and tokenizers (scripts/setup's venv);
never downloads anything.
"""
import copy
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
from safetensors.torch import save_file
from tokenizers import ByteLevelBPETokenizer
from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "I'm going home; we'll see what they've done.",
    "Numbers like 1234 and 3.14159 stay numbers.",
    "She said: \"Hello, world!\" and left.",
    "Tom doesn't know where Mary lives.",
    "Go.\nRun!\nWho?\n",
    "  spaces   and\ttabs  ",
    "Où est la gare ? Je ne sais pas.",
] * 8
TEXTS = ["The quick brown fox jumps over the lazy dog.", "Où est la gare ? Je ne sais pas.",
         "Tom doesn't know where Mary lives."]


def tokenizer():
    """The byte-level BPE of 400 tokens learned from SENTENCES, and it as a GPT2TokenizerFast."""
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(SENTENCES, vocab_size=400, min_frequency=1, special_tokens=["<|endoftext|>"])
    tok = GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|endoftext|>", bos_token="<|endoftext|>",
                            unk_token="<|endoftext|>")
    return bpe, tok


def save_tokenizer(bpe, tok, folder):
    tok.save_pretrained(folder)
    bpe.save_model(folder)  # vocab.json, merges.txt


def batch(tok):
    """ids [B, T] of three texts, cut to the shortest."""
    rows = [tok(t)["input_ids"] for t in TEXTS]
    width = min(len(r) for r in rows)
    return torch.tensor([r[:width] for r in rows])


def continuation(model, tok):
    """prompt [1, P] and generate()'s greedy [1, P + N] (N = 12, fewer when it ends)."""
    prompt = torch.tensor([tok("I'm going")["input_ids"]])
    greedy = model.generate(prompt, max_new_tokens=12, do_sample=False, attention_mask=torch.ones_like(prompt),
                            pad_token_id=tok.eos_token_id)
    return prompt, greedy


def main(out):
    model_dir, bare_dir, half_dir, bf16_dir = (os.path.join(out, d) for d in ("model", "bare", "fp16", "bf16"))
    for d in (model_dir, bare_dir, half_dir, bf16_dir):
        os.makedirs(d, exist_ok=True)
    bpe, tok = tokenizer()
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=32, n_layer=2, n_head=4,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id,
                        initializer_range=0.2)  # larger than 0.02: a greedy continuation that varies
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # biases and LayerNorms away from 0 and 1, so a swapped or missed one shows
        for name, p in model.named_parameters():
            if name.endswith("bias") or ".ln_" in name or name.startswith("transformer.ln_f"):
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(model_dir)
    save_tokenizer(bpe, tok, model_dir)
    model.transformer.save_pretrained(bare_dir)
    tok.save_pretrained(bare_dir)
    half = GPT2LMHeadModel(config).eval()
    half.load_state_dict(model.state_dict())
    half = half.half()
    half.save_pretrained(half_dir)
    tok.save_pretrained(half_dir)
    brain = GPT2LMHeadModel(config).eval()
    brain.load_state_dict(model.state_dict())
    brain = brain.to(torch.bfloat16)
    brain.save_pretrained(bf16_dir)
    tok.save_pretrained(bf16_dir)

    save_expected(out, tok, model, logits16=half.float(), logits_bf16=brain.float())


def save_expected(out, tok, model, **others):
    """OUT/expected.safetensors: ids [B, T], `model`'s logits [B, T, V] (and each of `others`' under its
    name), prompt [1, P] and `model`'s greedy [1, P + N]. The logits are computed in float64 and stored
    in float32: float32's own were not the same from one run to the next (up to 1.2e-4 apart, with
    the threads' share of the work), a reference that moves by more than the tests' tolerance."""
    ids = batch(tok)
    with torch.no_grad():
        tensors = {"ids": ids}
        tensors["prompt"], tensors["greedy"] = continuation(model, tok)
        for name, m in {"logits": model, **others}.items():
            tensors[name] = copy.deepcopy(m).double()(ids).logits.float()
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(out, "expected.safetensors"))
    print(f"vocab {len(tok)}, ids {tuple(ids.shape)}, greedy {tensors['greedy'].tolist()}")


def run(main, script):
    if len(sys.argv) != 2:
        sys.exit(f"usage: {script} OUT")
    main(sys.argv[1])


if __name__ == "__main__":
    run(main, "hf_gpt2_fixture.py")
