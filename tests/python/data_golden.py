"""Golden values for tests/data_text_test.cpp, tests/metrics_bleu_test.cpp and tests/fra_eng_test.cpp.

Carries copies of d2l 1.0.3's code (MTFraEng._preprocess/_tokenize/_build_arrays, Vocab, bleu)
without importing d2l. Run with the project's venv:

    ~/.cache/attnlab/venv-torch-2.11.0/bin/python tests/python/data_golden.py [path/to/fra-eng.zip]

The zip defaults to $ATTNLAB_DATA_MIRROR/fra-eng/fra-eng.zip (the corpus section is skipped when
neither is given).
"""
import collections
import hashlib
import math
import os
import sys
import zipfile

import torch


# ---- d2l 1.0.3, verbatim in substance ----------------------------------------------------------
class Vocab:
    """Vocabulary for text (d2l.Vocab)."""

    def __init__(self, tokens=[], min_freq=0, reserved_tokens=[]):
        if tokens and isinstance(tokens[0], list):
            tokens = [token for line in tokens for token in line]
        counter = collections.Counter(tokens)
        self.token_freqs = sorted(counter.items(), key=lambda x: x[1], reverse=True)
        self.idx_to_token = list(sorted(set(['<unk>'] + reserved_tokens + [
            token for token, freq in self.token_freqs if freq >= min_freq])))
        self.token_to_idx = {token: idx for idx, token in enumerate(self.idx_to_token)}

    def __len__(self):
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        if not isinstance(tokens, (list, tuple)):
            return self.token_to_idx.get(tokens, self.unk)
        return [self.__getitem__(token) for token in tokens]

    @property
    def unk(self):
        return self.token_to_idx['<unk>']


def preprocess(text):  # MTFraEng._preprocess
    text = text.replace('\u202f', ' ').replace('\xa0', ' ')
    no_space = lambda char, prev_char: char in ',.!?' and prev_char != ' '
    out = [' ' + char if i > 0 and no_space(char, text[i - 1]) else char
           for i, char in enumerate(text.lower())]
    return ''.join(out)


def tokenize(text, max_examples=None):  # MTFraEng._tokenize
    src, tgt = [], []
    for i, line in enumerate(text.split('\n')):
        if max_examples and i > max_examples:
            break
        parts = line.split('\t')
        if len(parts) == 2:
            src.append([t for t in f'{parts[0]} <eos>'.split(' ') if t])
            tgt.append([t for t in f'{parts[1]} <eos>'.split(' ') if t])
    return src, tgt


def build_arrays(raw_text, num_steps, max_examples, src_vocab=None, tgt_vocab=None):
    def _build_array(sentences, vocab, is_tgt=False):
        pad_or_trim = lambda seq, t: (
            seq[:t] if len(seq) > t else seq + ['<pad>'] * (t - len(seq)))
        sentences = [pad_or_trim(s, num_steps) for s in sentences]
        if is_tgt:
            sentences = [['<bos>'] + s for s in sentences]
        if vocab is None:
            vocab = Vocab(sentences, min_freq=2)
        array = torch.tensor([vocab[s] for s in sentences])
        valid_len = (array != vocab['<pad>']).type(torch.int32).sum(1)
        return array, vocab, valid_len
    src, tgt = tokenize(preprocess(raw_text), max_examples)
    src_array, src_vocab, src_valid_len = _build_array(src, src_vocab)
    tgt_array, tgt_vocab, _ = _build_array(tgt, tgt_vocab, True)
    return ((src_array, tgt_array[:, :-1], src_valid_len, tgt_array[:, 1:]),
            src_vocab, tgt_vocab)


def bleu(pred_seq, label_seq, k):
    """Compute the BLEU (d2l.bleu)."""
    pred_tokens, label_tokens = pred_seq.split(' '), label_seq.split(' ')
    len_pred, len_label = len(pred_tokens), len(label_tokens)
    score = math.exp(min(0, 1 - len_label / len_pred))
    for n in range(1, min(k, len_pred) + 1):
        num_matches, label_subs = 0, collections.defaultdict(int)
        for i in range(len_label - n + 1):
            label_subs[' '.join(label_tokens[i: i + n])] += 1
        for i in range(len_pred - n + 1):
            if label_subs[' '.join(pred_tokens[i: i + n])] > 0:
                num_matches += 1
                label_subs[' '.join(pred_tokens[i: i + n])] -= 1
        score *= math.pow(num_matches / (len_pred - n + 1), math.pow(0.5, n))
    return score
# -------------------------------------------------------------------------------------------------


def sha256(s):
    return hashlib.sha256(s.encode('utf-8')).hexdigest()


def weighted_sum(t):
    """Order-sensitive integer checksum of a tensor: sum(x_i * (i + 1)) over the flattened values."""
    flat = t.flatten().to(torch.int64)
    return int((flat * torch.arange(1, flat.numel() + 1, dtype=torch.int64)).sum())


def text_section():
    print('== text (tests/data_text_test.cpp)')
    for s in ['Go.\tVa !', 'Hi.\u202fHello!', 'Ça alors\xa0!', 'ÉTÉ, À Noël?', 'Wait ?', '.Hi', 'Ой, ΣΟΦΟΣ.']:
        print(f'preprocess({s!r}) = {preprocess(s)!r}')
    # Python's lower() of every code point in the blocks utf8_lower covers, one at a time.
    blocks = [(0, 0x180), (0x370, 0x530)]
    joined = ''.join(chr(c).lower() for lo, hi in blocks for c in range(lo, hi))
    print(f'sha256 of per-code-point lower over U+0000..U+017F, U+0370..U+052F: {sha256(joined)}')
    print(f"lower('ΟΔΟΣ ΣΑΣ Σ') = {'ΟΔΟΣ ΣΑΣ Σ'.lower()!r}")
    corpus = [s.split(' ') for s in ['the cat sat', 'the dog sat', 'a cat', 'zebra été', 'été Été']]
    for min_freq, reserved in [(1, []), (2, []), (2, ['<pad>', '<bos>', '<eos>'])]:
        v = Vocab(corpus, min_freq=min_freq, reserved_tokens=reserved)
        print(f'Vocab(min_freq={min_freq}, reserved={reserved}): {v.idx_to_token}')
        print(f'  ids of "the été zebra dog ?": {v["the été zebra dog ?".split(" ")]}')


def bleu_section():
    print('== bleu (tests/metrics_bleu_test.cpp)')
    cases = [('il est <unk> .', 'il est calme .', 2), ('va !', 'va !', 2), ('je suis <unk> .', 'je suis chez moi .', 2),
             ('il court .', 'il court très vite .', 2), ('il court .', 'il court très vite .', 4),
             ('a b a b a', 'a b', 1), ('a b c d', 'd c b a', 1), ('a  b', 'a b', 1), ('a b c', 'a b c d e f', 3),
             ('the cat the cat on the mat', 'the cat is on the mat', 3), ('le chat le chat', 'le chat', 2),
             ('x', 'y', 2), ('', 'a b', 2)]
    for p, l, k in cases:
        print(f'bleu({p!r}, {l!r}, {k}) = {bleu(p, l, k)!r}')


def corpus_section(zip_path):
    print(f'== fra-eng (tests/fra_eng_test.cpp) from {zip_path}')
    with zipfile.ZipFile(zip_path) as z:
        raw = z.read('fra-eng/fra.txt').decode('utf-8')
    print(f'sha256 of preprocess(fra.txt): {sha256(preprocess(raw))}')
    for num_steps, max_examples, label in [(9, 512 + 128, 'd2l 1.0 defaults'), (10, 600, 'num_examples=600')]:
        (src, tgt_in, src_len, tgt_out), sv, tv = build_arrays(raw, num_steps, max_examples)
        tgt_len = (tgt_out != tv['<pad>']).type(torch.int32).sum(1)
        print(f'-- {label}: num_steps={num_steps}, max_examples={max_examples}')
        print(f'pairs {src.shape[0]}, src vocab {len(sv)}, tgt vocab {len(tv)}')
        print(f"tgt ids: pad {tv['<pad>']}, bos {tv['<bos>']}, eos {tv['<eos>']}, unk {tv.unk};"
              f" src ids: pad {sv['<pad>']}, eos {sv['<eos>']}, unk {sv.unk}")
        print(f'weighted sums: src {weighted_sum(src)}, tgt_in {weighted_sum(tgt_in)}, '
              f'tgt_out {weighted_sum(tgt_out)}, src_len {weighted_sum(src_len)}, tgt_len {weighted_sum(tgt_len)}')
        print(f'src[0] {src[0].tolist()}, tgt_in[0] {tgt_in[0].tolist()}, tgt_out[0] {tgt_out[0].tolist()}')
        print(f'src vocab first 12: {sv.idx_to_token[:12]}')
        print(f'tgt vocab last 5: {tv.idx_to_token[-5:]}')
        if label.startswith('d2l 1.0'):
            # d2l's build(): encode new sentences with the trained vocabularies.
            engs = ['go .', "i lost .", "he's calm .", "i'm home .", 'Hello, World!']
            fras = ['va !', "j'ai perdu .", 'il est calme .', 'je suis chez moi .', 'x']
            (bsrc, _, blen, _), _, _ = build_arrays('\n'.join(e + '\t' + f for e, f in zip(engs, fras)),
                                                     num_steps, max_examples, sv, tv)
            print(f'build(src): {bsrc.tolist()}, valid {blen.tolist()}')


def main():
    text_section()
    bleu_section()
    zip_path = sys.argv[1] if len(sys.argv) > 1 else None
    if zip_path is None and os.environ.get('ATTNLAB_DATA_MIRROR'):
        zip_path = os.path.join(os.environ['ATTNLAB_DATA_MIRROR'].removeprefix('file://'), 'fra-eng', 'fra-eng.zip')
    if zip_path:
        corpus_section(zip_path)


if __name__ == '__main__':
    main()
