"""Golden values for tests/data_text_test.cpp, tests/metrics_bleu_test.cpp and plugins/dataset/fra_eng/tests/fra_eng_test.cpp.

Carries copies of d2l 1.0.3's code (MTFraEng._preprocess/_tokenize/_build_arrays, Vocab, bleu)
without importing d2l. Run with the project's venv:

    ~/.cache/attnlab/venv-torch-2.11.0/bin/python tests/python/data_golden.py [--json] [path/to/fra-eng.zip]

prints the C++ blocks to paste, or with --json the values for tests/python/golden_check.py (ctest
golden.data_golden). The zip defaults to $ATTNLAB_DATA_MIRROR/fra-eng/fra-eng.zip; without either,
the fra-eng block is left out (a note on stderr), and --json refuses to run.
"""
import argparse
import collections
import functools
import hashlib
import math
import os
import sys
import zipfile

import torch

from golden_out import Golden


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


@functools.lru_cache(maxsize=None)  # the whole corpus is preprocessed once, not per configuration
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


# Inputs of d2l_preprocess: a tab, U+202F and U+00A0, upper case beyond ASCII, a mark already
# preceded by a space ('Wait ?'), a mark at position 0 that never gets one ('.Hi'), a final sigma.
PREPROCESS = ['Go.\tVa !', 'Hi.\u202fHello!', 'Ça alors\xa0!', 'ÉTÉ, À Noël?', 'Wait ?', '.Hi', 'Ой, ΣΟΦΟΣ.', '']
# Inputs of utf8_lower: Latin-1, Latin Extended-A, İ (Python expands it to i + U+0307), Greek with
# final sigmas, Cyrillic, and characters lower() leaves alone.
LOWER = ['ÀÉÎÕÜ×ÞŸ', 'ŁĄŒŽ', 'İ', 'ΟΔΟΣ ΣΑΣ Σ', 'ЁЖИК Ѣ', 'ß 日本 €']
VOCAB_CORPUS = [s.split(' ') for s in ['the cat sat', 'the dog sat', 'a cat', 'zebra été', 'été Été']]
VOCAB_QUERY = 'the été zebra dog ?'.split(' ')
BLEU = [('il est <unk> .', 'il est calme .', 2), ('va !', 'va !', 2), ('je suis <unk> .', 'je suis chez moi .', 2),
        ('il court .', 'il court très vite .', 2), ('il court .', 'il court très vite .', 4),
        ('a b a b a', 'a b', 1),  # clipped unigram counts
        ('a b c d', 'd c b a', 1),
        ('a  b', 'a b', 1),  # split(' ') keeps the empty token
        ('a b c', 'a b c d e f', 3),  # brevity penalty exp(1 - 6/3)
        ('the cat the cat on the mat', 'the cat is on the mat', 3), ('le chat le chat', 'le chat', 2),
        ('x', 'y', 2), ('', 'a b', 2)]
# d2l's build(): new sentences encoded with the trained vocabularies (d2l 1.0 defaults).
BUILD_ENG = ['go .', "i lost .", "he's calm .", "i'm home .", 'Hello, World!']
BUILD_FRA = ['va !', "j'ai perdu .", 'il est calme .', 'je suis chez moi .', 'x']


def text_block(golden):
    golden.block('tests/data_text_test.cpp')
    golden.comment('MTFraEng._preprocess: {text, result}')
    golden.const('std::pair<const char*, const char*>[]', 'kPreprocessed', [(t, preprocess(t)) for t in PREPROCESS])
    golden.comment("Python's str.lower: {text, result}")
    golden.const('std::pair<const char*, const char*>[]', 'kLowered', [(t, t.lower()) for t in LOWER])
    # Python's lower() of every code point in the blocks utf8_lower covers, one at a time.
    blocks = [(0, 0x180), (0x370, 0x530)]
    joined = ''.join(chr(c).lower() for lo, hi in blocks for c in range(lo, hi))
    golden.comment('sha256 of the per-code-point lower() of U+0000..U+017F and U+0370..U+052F, concatenated')
    golden.const('char* const', 'kLowerBlocksSha256', sha256(joined))
    golden.comment('d2l.Vocab(kVocabCorpus, min_freq, reserved): its tokens, and the ids of kVocabQuery')
    golden.const('std::vector<Tokens>', 'kVocabCorpus', VOCAB_CORPUS)
    golden.const('Tokens', 'kVocabQuery', VOCAB_QUERY)
    cases = []
    for min_freq, reserved in [(1, []), (2, []), (2, ['<pad>', '<bos>', '<eos>'])]:
        v = Vocab(VOCAB_CORPUS, min_freq=min_freq, reserved_tokens=reserved)
        cases.append({'min_freq': min_freq, 'reserved': reserved, 'tokens': v.idx_to_token, 'ids': v[VOCAB_QUERY]})
    golden.const('VocabCase[]', 'kVocabCases', cases)


def bleu_block(golden):
    golden.block('tests/metrics_bleu_test.cpp')
    golden.comment('d2l.bleu(pred, label, k): {pred, label, k, bleu}')
    golden.const('BleuCase[]', 'kBleuCases', [(p, l, k, bleu(p, l, k)) for p, l, k in BLEU])


def corpus_block(golden, zip_path):
    golden.block('plugins/dataset/fra_eng/tests/fra_eng_test.cpp', f'from {os.path.basename(zip_path)}')
    with zipfile.ZipFile(zip_path) as z:
        raw = z.read('fra-eng/fra.txt').decode('utf-8')
    for num_steps, max_examples, name in [(9, 512 + 128, 'kFraEngD2l10'), (10, 600, 'kFraEngD2l017')]:
        (src, tgt_in, src_len, tgt_out), sv, tv = build_arrays(raw, num_steps, max_examples)
        tgt_len = (tgt_out != tv['<pad>']).type(torch.int32).sum(1)
        golden.const('FraEngGolden', name, {
            'num_steps': num_steps, 'max_examples': max_examples,
            'pairs': src.shape[0], 'src_vocab_size': len(sv), 'tgt_vocab_size': len(tv),
            'tgt_pad': tv['<pad>'], 'tgt_bos': tv['<bos>'], 'tgt_eos': tv['<eos>'], 'tgt_unk': tv.unk,
            'src_pad': sv['<pad>'], 'src_eos': sv['<eos>'], 'src_unk': sv.unk,
            'src_sum': weighted_sum(src), 'tgt_in_sum': weighted_sum(tgt_in), 'tgt_out_sum': weighted_sum(tgt_out),
            'src_len_sum': weighted_sum(src_len), 'tgt_len_sum': weighted_sum(tgt_len),
            'src0': src[0].tolist(), 'tgt_in0': tgt_in[0].tolist(), 'tgt_out0': tgt_out[0].tolist(),
            'src_len0': int(src_len[0]), 'tgt_len0': int(tgt_len[0]),
            'src_vocab_first12': sv.idx_to_token[:12], 'tgt_vocab_last5': tv.idx_to_token[-5:]})
        if name == 'kFraEngD2l10':
            (bsrc, _, blen, _), _, _ = build_arrays('\n'.join(e + '\t' + f for e, f in zip(BUILD_ENG, BUILD_FRA)),
                                                     num_steps, max_examples, sv, tv)
            golden.comment("d2l's build(kBuildSentences) with the vocabularies of kFraEngD2l10: src rows, valid lengths")
            golden.const('Tokens', 'kBuildSentences', BUILD_ENG)
            golden.const('std::vector<std::vector<int64_t>>', 'kBuildSrc', bsrc.tolist())
            golden.const('std::vector<int64_t>', 'kBuildValidLens', blen.tolist())
    golden.comment('sha256 of MTFraEng._preprocess(fra.txt)')
    golden.const('char* const', 'kPreprocessedSha256', sha256(preprocess(raw)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--json', action='store_true')
    p.add_argument('zip', nargs='?')
    args = p.parse_args()
    zip_path = args.zip
    if zip_path is None and os.environ.get('ATTNLAB_DATA_MIRROR'):
        zip_path = os.path.join(os.environ['ATTNLAB_DATA_MIRROR'].removeprefix('file://'), 'fra-eng', 'fra-eng.zip')
    if zip_path is None and args.json:
        sys.exit('data_golden.py: the fra-eng values need the corpus: set ATTNLAB_DATA_MIRROR or name the zip')
    golden = Golden('data_golden.py', args.json)
    text_block(golden)
    bleu_block(golden)
    if zip_path:
        corpus_block(golden, zip_path)
    else:
        print('data_golden.py: no fra-eng.zip (ATTNLAB_DATA_MIRROR unset): the fra-eng block is left out',
              file=sys.stderr)
    golden.finish()


if __name__ == '__main__':
    main()
