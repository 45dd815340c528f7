"""The runner's own training batches (`runner batches`), for the peers whose data pipeline
(SentencePiece, length bucketing, a language model's block sampling) is not re-implemented in
Python: the same rows in the same order by construction. Exporting happens before training and is
not timed."""
import os
import subprocess
import tempfile

import torch

NAMES = ("src", "src_valid_lens", "tgt_in", "tgt_out", "tgt_valid_lens")


class ExportedBatches:
    """Epoch e (1-based) of the export holds the dataset's batches(train, shuffle, seed + e) as
    tuples of `parts` (a decoder-only dataset has no src). `epochs` defaults to --epochs or
    trainer.max_epochs; `max_batches` reads only the first ones (over the epochs in turn)."""

    def __init__(self, cfg, args, epochs=None, parts=NAMES, max_batches=None):
        import h5py
        epochs = epochs or args.epochs or cfg["trainer"].get("max_epochs", 1)
        path = os.path.join(tempfile.mkdtemp(prefix="attnlab-peer-"), "batches.h5")
        overrides = list(args.overrides) + ([f"seed={args.seed}"] if args.seed is not None else [])
        subprocess.run([args.runner, "batches", args.experiment, *overrides, "--epochs", str(epochs), "-o", path],
                       check=True, stdout=subprocess.DEVNULL)
        with h5py.File(path, "r") as f:
            a = f.attrs
            self.seed, self.pad_id = int(a["seed"]), int(a["pad_id"])
            self.src_vocab_size, self.tgt_vocab_size = int(a["src_vocab_size"]), int(a["tgt_vocab_size"])
            self.src_vocab, self.tgt_vocab = range(self.src_vocab_size), range(self.tgt_vocab_size)
            self.batches_per_epoch = int(a["batches_per_epoch"])
            self.epochs, left = {}, max_batches
            for e in range(1, epochs + 1):
                n = self.batches_per_epoch if left is None else min(left, self.batches_per_epoch)
                self.epochs[e] = [tuple(torch.from_numpy(f[f"epoch_{e}/{i}/{p}"][()]) for p in parts) for i in range(n)]
                if left is not None:
                    left -= n
        os.remove(path)
        self.has_val = False

    def batches(self, split, seed):
        assert split == "train", "exported batches are the training split's"
        return self.epochs[seed - self.seed]
