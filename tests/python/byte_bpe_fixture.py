"""Hugging Face tokenizers and their token ids for plugins/tokenizer/byte_bpe/tests/byte_bpe_test.cpp.

Run with the project's venv (transformers and tokenizers):

    ~/.cache/attnlab/venv-torch-2.11.0/bin/python tests/python/byte_bpe_fixture.py OUT_DIR [path/to/fra-eng.zip]

Trains two byte-level BPE tokenizers (vocabulary 2000, special token <|endoftext|>) with `tokenizers`
on the first 20000 lines of fra-eng (both sides; the zip defaults to
$ATTNLAB_DATA_MIRROR/fra-eng/fra-eng.zip) and writes them as Hugging Face files:
- OUT_DIR/gpt2/: GPT-2's layout (ByteLevel pre-tokenizer with its regex), saved by transformers'
  GPT2TokenizerFast.save_pretrained (tokenizer.json), plus vocab.json and merges.txt
  (tokenizers' model.save);
- OUT_DIR/gpt2_files/: the same vocab.json and merges.txt alone;
- OUT_DIR/split/tokenizer.json: Llama 3's layout (Split on Llama 3's regex, then ByteLevel without
  its regex; ignore_merges; special tokens added after the vocabulary).
Then OUT_DIR/cases.jsonl, one JSON object a line: {"text": ..., "gpt2": ids, "gpt2_files": ids,
"split": ids}, the ids Hugging Face gives each text (transformers' tokenizers loaded back from the
saved files, encode(text, add_special_tokens=False)), for fra-eng lines and crafted texts (emoji,
CJK, Arabic, whitespace runs, contractions, numbers, "<|endoftext|>" inside text, unusual Unicode)
and 1000 random strings over the characters where regex engines could differ.
Prints "cases N" on the last line. Exits non-zero, saying why, when anything is missing.
"""
import json
import os
import pathlib
import random
import sys
import zipfile

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GPT2TokenizerFast, PreTrainedTokenizerFast

VOCAB = 2000
EOT = "<|endoftext|>"
TRAIN_LINES = 20000
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]


def fra_eng_pairs(zip_path):
    with zipfile.ZipFile(zip_path) as z:
        text = z.read("fra-eng/fra.txt").decode("utf-8")
    pairs = []
    for line in text.split("\n"):
        parts = line.split("\t")
        if len(parts) >= 2:
            pairs.append((parts[0], parts[1]))
    return pairs


def train_gpt2(corpus):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[EOT], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer=trainer)
    return tok


def train_split(corpus):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.add_special_tokens(LLAMA3_SPECIALS)  # ids after the vocabulary, as Llama 3's
    return tok


def crafted():
    """Texts that probe the regex, the byte map, the merges and the special tokens."""
    out = ["", " ", "  ", "\n", "\n\n", " \n ", "\t", "a\tb", "trailing   ", "   leading", "a  b   c    d",
           "line one\nline two\n", "para\n\npara", "x \n y", "tabs\t\t\tand  spaces \t \n", "\r\n", "a\r\nb",
           "I'm here, you're there, it's his, we've been, I'll go, he'd say, don't", "IT'S HE'S 'S 'T 'RE 'VE 'M 'LL 'D",
           "'s't're've'm'll'd", "''s ''", "O'Neil's dog's bone", "it’s curly", "'ſ ſ 'K",
           "123 4567 89012345 3.14159 -42 1,000,000 ٣٤٥ ²³ ½ Ⅻ", "2024-06-07T12:34:56Z", "v1.2.3-rc4",
           "!!! ??? ... --- *** ((( ))) [[]] {{}} <<>> @@ ## $$ %% ^^ && || ~~ `` \\\\ //",
           "Hello, World! How are you?", "“Quotes” «guillemets» ‹single› „low“",
           "😀 😃😄 👍🏽 👩‍👩‍👧‍👦 🏳️‍🌈 🇫🇷🇬🇧 ❤️ 🫠", "emoji🙂inside", "日本語のテキストです。中文句子。한국어 문장.",
           "مرحبا بالعالم، كيف حالك؟", "שלום עולם", "Привет, мир! Ёжик.", "Γειά σου Κόσμε", "हिन्दी पाठ",
           "e\u0301 a\u0300\u0316 Z\u0351\u0352\u0353", "non\u00a0breaking\u00a0space", "x\u00a0 y", "sep\u2028line\u2029para",
           "zero\u200bwidth\u200djoiner\u200c", "mongolian\u180evowel \u180e x", "ideographic\u3000space",
           "ctrl\x1c\x1d\x1e\x1f chars \x0b\x0c", "next\x85line", "bom\ufeffmark", "private\ue000use", "\U0001d400\U0001d41a",
           EOT, f"before{EOT}after", f"a {EOT} b", f"{EOT}{EOT}", f"<|endoftext|{EOT}|>", "<|endoftext", "endoftext|>",
           f"line\n{EOT}\nline", "<|begin_of_text|>x<|eot_id|>", "a" * 300, " " * 50 + "x", "\n" * 20,
           "ab" * 100, "Supercalifragilisticexpialidocious antidisestablishmentarianism",
           "https://example.com/path?q=1&r=two#frag", "user@example.org", "C++ std::vector<int> x = {1, 2};",
           "def f(x):\n    return x ** 2\n", "café naïve façade coöperate Ångström", "ÀÉÎÕÜ àéîõü ß ẞ"]
    return out


def fuzz(count=1000, seed=20240607):
    """Random strings over the characters where regex engines could differ: whitespace of every kind
    (U+180E, U+0085, U+00A0, U+2028, U+3000, \\x1c-\\x1f, \\r), apostrophes and letters of
    contractions, digits of several scripts, marks, emoji, CJK and pieces of special tokens."""
    rng = random.Random(seed)
    pool = (list(" \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u1680\u180e\u2000\u200a\u200b\u2028\u2029\u202f\u205f\u3000\ufeff")
            + list("'’sStTrReEvVmMlLdDſK") + list("aZéß日本語한ع") + list("0123456789٣²½Ⅻ")
            + list(".,!?-_*()[]<>|/\\\"#") + ["\u0301", "\u0316", "😀", "👍🏽", "👩‍👧", "🇫🇷", "️"]
            + [EOT, "<|", "|>", "<|eot_id|>", "endoftext"])
    return ["".join(rng.choice(pool) for _ in range(rng.randint(1, 24))) for _ in range(count)]


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    out = pathlib.Path(sys.argv[1])
    if len(sys.argv) == 3:
        zip_path = sys.argv[2]
    else:
        mirror = os.environ.get("ATTNLAB_DATA_MIRROR")
        if not mirror:
            sys.exit("byte_bpe_fixture: ATTNLAB_DATA_MIRROR is not set and no fra-eng.zip was given")
        zip_path = os.path.join(mirror, "fra-eng", "fra-eng.zip")
    pairs = fra_eng_pairs(zip_path)
    corpus = [side for pair in pairs[:TRAIN_LINES] for side in pair]

    gpt2 = train_gpt2(corpus)
    (out / "gpt2").mkdir(parents=True, exist_ok=True)
    (out / "gpt2_files").mkdir(parents=True, exist_ok=True)
    (out / "split").mkdir(parents=True, exist_ok=True)
    GPT2TokenizerFast(tokenizer_object=gpt2).save_pretrained(str(out / "gpt2"))
    gpt2.model.save(str(out / "gpt2"))
    gpt2.model.save(str(out / "gpt2_files"))
    train_split(corpus).save(str(out / "split" / "tokenizer.json"))

    hf = {
        "gpt2": GPT2TokenizerFast.from_pretrained(str(out / "gpt2")),
        "gpt2_files": GPT2TokenizerFast.from_pretrained(str(out / "gpt2_files")),
        "split": PreTrainedTokenizerFast(tokenizer_file=str(out / "split" / "tokenizer.json")),
    }
    # Lines from the whole file (they grow longer further in), both sides, some joined by newlines.
    step = max(1, len(pairs) // 1500)
    sample = pairs[::step]
    texts = [side for pair in sample for side in pair]
    texts += ["\n".join(p[0] for p in sample[i:i + 5]) for i in range(0, 500, 5)]
    texts += crafted()
    texts += fuzz()
    with open(out / "cases.jsonl", "w", encoding="utf-8") as f:
        for text in texts:
            case = {"text": text}
            for name, tok in hf.items():
                case[name] = tok.encode(text, add_special_tokens=False)
            f.write(json.dumps(case) + "\n")
    print(f"cases {len(texts)}")


if __name__ == "__main__":
    main()
