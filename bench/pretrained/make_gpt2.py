"""Random GPT-2-sized models for bench/pretrained/run, as Hugging Face saves them, and the peer's
figure: the peak memory of transformers' own from_pretrained on the same folder.

    make_gpt2.py OUT              writes OUT/fp32 and OUT/fp16 (GPT-2 small's config: 124M parameters)
    make_gpt2.py --peer DIR LABEL prints the markdown row of GPT2LMHeadModel.from_pretrained(DIR)
"""
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) / 1024.0
    return out


def make(out):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config())  # n_embd 768, 12 layers, 12 heads, vocab 50257, 1024 positions
    print(f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters", file=sys.stderr)
    model.save_pretrained(os.path.join(out, "fp32"))
    model.half().save_pretrained(os.path.join(out, "fp16"))


def peer(folder, label):
    import torch
    from transformers import GPT2LMHeadModel
    torch.set_num_threads(1)
    torch.ones(8).sum().item()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status()
    start = time.perf_counter()
    model = GPT2LMHeadModel.from_pretrained(folder, dtype=torch.float32)
    seconds = time.perf_counter() - start
    after = status()
    with torch.no_grad():  # every weight used once: a lazily mapped tensor's pages come in now
        model.eval()(torch.zeros(1, 16, dtype=torch.long)).logits.sum().item()
    used = status()
    weights = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
    grow = used["VmHWM"] - before["VmRSS"]
    print(f"| {label} | {weights:.0f} | {before['VmRSS']:.0f} | {after['VmHWM']:.0f} | {used['VmHWM']:.0f} | {grow:.0f} "
          f"({grow / weights:.2f}x the weights) | {used['RssAnon']:.0f} / {used['RssFile']:.0f} | {seconds:.2f} |")


if __name__ == "__main__":
    if len(sys.argv) == 2:
        make(sys.argv[1])
    elif len(sys.argv) == 4 and sys.argv[1] == "--peer":
        peer(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
