"""fra-eng as d2l 1.0.3's MTFraEng builds it (and attnlab's fra_eng plugin, which mirrors it):
_preprocess, _tokenize (max_examples + 1 lines, d2l's off-by-one), pad/trim to num_steps, '<bos>'
prepended to targets, Vocab(min_freq=2) over the padded sentences, then pre-tensorised arrays.

Batches are index slices of those arrays in the order of torch.randperm(n, generator seeded with
seed + epoch), the order attnlab's plugin uses."""
import collections
import io
import os
import zipfile

import torch

MEMBER = "fra-eng/fra.txt"
REL_PATH = "fra-eng/fra-eng.zip"


def find_zip(data_dir):
    """The corpus: $ATTNLAB_DATA_MIRROR first (a folder or file:// URL), then `data_dir`."""
    candidates = []
    mirror = os.environ.get("ATTNLAB_DATA_MIRROR", "")
    if mirror:
        candidates.append(os.path.join(mirror.removeprefix("file://"), REL_PATH))
    candidates.append(os.path.join(data_dir, REL_PATH))
    for c in candidates:
        if os.path.isfile(c):
            return c
    raise FileNotFoundError(f"fra-eng zip not found; looked in {candidates} (set ATTNLAB_DATA_MIRROR)")


def read_text(zip_path):
    with zipfile.ZipFile(zip_path) as z:
        names = z.namelist()
        member = MEMBER if MEMBER in names else next(
            n for n in names if n.endswith("fra.txt") and not n.startswith("__MACOSX/"))
        # Text mode with universal newlines, as d2l's open(..., encoding='utf-8').
        with io.TextIOWrapper(z.open(member), encoding="utf-8") as f:
            return f.read()


def preprocess(text):
    """d2l's MTFraEng._preprocess, verbatim."""
    text = text.replace("\u202f", " ").replace("\xa0", " ")

    def no_space(char, prev_char):
        return char in ",.!?" and prev_char != " "

    out = [" " + char if i > 0 and no_space(char, text[i - 1]) else char
           for i, char in enumerate(text.lower())]
    return "".join(out)


def tokenize(text, max_examples):
    """d2l's MTFraEng._tokenize: note `i > max_examples`, so max_examples + 1 lines are read."""
    src, tgt = [], []
    for i, line in enumerate(text.split("\n")):
        if max_examples and i > max_examples:
            break
        parts = line.split("\t")
        if len(parts) == 2:
            src.append([t for t in f"{parts[0]} <eos>".split(" ") if t])
            tgt.append([t for t in f"{parts[1]} <eos>".split(" ") if t])
    return src, tgt


class Vocab:
    """d2l 1.0.3's Vocab: ids are the sorted set of '<unk>' + tokens with freq >= min_freq."""

    def __init__(self, sentences, min_freq):
        counter = collections.Counter(t for s in sentences for t in s)
        self.idx_to_token = sorted({"<unk>"} | {t for t, f in counter.items() if f >= min_freq})
        self.token_to_idx = {t: i for i, t in enumerate(self.idx_to_token)}

    def __len__(self):
        return len(self.idx_to_token)

    def __getitem__(self, token):
        return self.token_to_idx.get(token, self.token_to_idx["<unk>"])


class FraEng:
    """The arrays and batches of one experiment's `dataset:` section."""

    def __init__(self, options, data_dir):
        self.batch_size = options.get("batch_size", 128)
        self.num_steps = options.get("num_steps", 9)
        num_train = options.get("num_train", 512)
        num_val = options.get("num_val", 128)
        num_examples = options.get("num_examples", 0)  # > 0: d2l 0.17 mode, every pair trains
        min_freq = options.get("min_freq", 2)
        max_examples = num_examples if num_examples > 0 else num_train + num_val
        raw = read_text(find_zip(options.get("data_dir") or data_dir))
        # Only the first max_examples + 1 lines are used; preprocessing is per character and never
        # joins lines, so cutting the text first gives the same pairs (and saves ~10 s of Python).
        raw = "\n".join(raw.split("\n", max_examples + 2)[: max_examples + 2])
        src, tgt = tokenize(preprocess(raw), max_examples)
        pad = lambda s: (s + ["<pad>"] * self.num_steps)[: self.num_steps]
        src = [pad(s) for s in src]
        tgt = [["<bos>"] + pad(t) for t in tgt]
        self.src_vocab, self.tgt_vocab = Vocab(src, min_freq), Vocab(tgt, min_freq)
        src_ids = torch.tensor([[self.src_vocab[t] for t in s] for s in src])  # [N, num_steps]
        tgt_ids = torch.tensor([[self.tgt_vocab[t] for t in s] for s in tgt])  # [N, num_steps + 1]
        self.pad_id, self.bos_id = self.tgt_vocab["<pad>"], self.tgt_vocab["<bos>"]
        self.src = src_ids
        self.src_valid_len = (src_ids != self.src_vocab["<pad>"]).sum(1)  # [N]
        self.tgt_in = tgt_ids[:, :-1].contiguous()                           # [N, num_steps]
        self.tgt_out = tgt_ids[:, 1:].contiguous()                           # [N, num_steps]
        self.tgt_valid_len = (self.tgt_out != self.pad_id).sum(1)            # [N]
        n = src_ids.shape[0]
        self.train_rows = n if num_examples > 0 else min(num_train, n)
        self.has_val = num_examples == 0 and self.train_rows < n

    def batches(self, split, seed):
        """[(src, src_valid_len, tgt_in, tgt_out, tgt_valid_len)]; train is shuffled by seed."""
        if split == "train":
            order = torch.randperm(self.train_rows, generator=torch.Generator().manual_seed(seed))
        else:
            order = torch.arange(self.train_rows, self.src.shape[0])
        out = []
        for b in range(0, order.numel(), self.batch_size):
            idx = order[b: b + self.batch_size]
            out.append((self.src[idx], self.src_valid_len[idx], self.tgt_in[idx], self.tgt_out[idx],
                        self.tgt_valid_len[idx]))
        return out
