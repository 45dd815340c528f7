"""Golden values for tests/metrics_sacrebleu_test.cpp, computed with the installed sacreBLEU.

Two modes, run with the project's venv python:

    ~/.cache/attnlab/venv-torch-2.11.0/bin/python tests/python/sacrebleu_golden.py [--json]
        prints the C++ block pasted into tests/metrics_sacrebleu_test.cpp (cases and 13a
        tokenizations), or with --json its values for tests/python/golden_check.py (ctest
        golden.sacrebleu_golden);

    .../python tests/python/sacrebleu_golden.py --hyps H --refs R [--refs R2 ...] [--tok-out T]
        [--smooth exp|none|floor|add-k] [--tokenize 13a|none] [--effective-order]
        scores the files (one segment per '\\n'-terminated line, UTF-8) and prints
        `key=value` lines (score, counts, totals, precisions, bp, sys_len, ref_len, signature);
        with --tok-out, writes sacreBLEU's 13a tokenization of each hypothesis line to T
        (the live comparison in the C++ test, enabled by ATTNLAB_PYTHON).
"""
import argparse
import sys

import sacrebleu
from sacrebleu.metrics import BLEU
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from golden_out import Golden

REALISTIC_HYPS = [
    "A man in an orange hat looking at something.",
    "A Boston terrier runs on green grass in front of a white fence.",
    "A girl in a karate uniform breaks a stick with a kick.",
    "Five people in winter jackets and helmets are standing in the snow with snowmobiles behind them.",
    "People repair the roof of a house.",
    "A man in light clothes photographs a group of men in dark suits and hats around a woman in a strapless dress.",
    "A group of people is standing in front of an igloo.",
    "A guy is working on a building.",
]
REALISTIC_REFS = [
    "A man in an orange hat starring at something.",
    "A Boston Terrier is running on lush green grass in front of a white fence.",
    "A girl in karate uniform breaking a stick with a front kick.",
    "Five people wearing winter jackets and helmets stand in the snow, with snowmobiles in the background.",
    "People are fixing the roof of a house.",
    "A man in light colored clothing photographs a group of men wearing dark suits and hats standing around a "
    "woman dressed in a strapless gown.",
    "A group of people standing in front of an igloo.",
    "A guy works on a building.",
]
# What a d2l-style word tokenizer emits: lowercased, spaces before punctuation.
D2L_HYPS = [
    "a man in an orange hat looking at something .",
    "a boston terrier runs on green grass in front of a white fence .",
    "people repair the roof of a house .",
]
D2L_REFS = [REALISTIC_REFS[0], REALISTIC_REFS[1], REALISTIC_REFS[4]]
SMOOTH_HYPS = ["the cat is on a red mat", "a dog barks"]
SMOOTH_REFS = ["the cat sat on the mat", "the dog barks"]

CASES = [
    ("realistic", REALISTIC_HYPS, [REALISTIC_REFS], {}),
    ("d2l_style_lowercased", D2L_HYPS, [D2L_REFS], {}),
    ("perfect", REALISTIC_REFS[:3], [REALISTIC_REFS[:3]], {}),
    ("empty_hypothesis", ["", "A dog runs through the grass.", "Two men play soccer."],
     [["A man sleeps on a bench.", "A dog runs across the grass.", "Two men are playing soccer."]], {}),
    ("all_empty", ["", ""], [["A b c.", "d"]], {}),
    ("empty_reference", ["A cat.", "A dog is running."], [["", "A dog is running fast."]], {}),
    ("no_matches", ["foo bar baz qux"], [["alpha beta gamma delta"]], {}),
    ("no_four_grams", ["the cat sat"], [["the cat sat on"]], {}),
    ("html_entities",
     ["&quot;Hello&quot; said the man &amp; his dog &lt;3 &gt; you", "Tom &amp;amp; Jerry <skipped> ran.",
      "AT&T's price: 5 &lt; 6"],
     [["\"Hello\" said the man & his dog <3 > you", "Tom &amp; Jerry ran.", "AT&T's price: 5 < 6"]], {}),
    ("numbers_punctuation",
     ["It costs $5,000.50 in 2019-2020, i.e. a lot...", "e.g. U.S.A., etc.", "(see [1]) {x} ~y~ `z` @home #1 50%!",
      "well-known 3-4 pm -- end.-\nnext line", "He said: \"no\"; she said 'yes'?"],
     [["It costs $5,000.50 in 2019 - 2020, i.e. a lot ...", "e.g. U.S.A. , etc .", "(see [1]) {x} ~y~ `z` @home #1 50%!",
       "well-known 3 - 4 pm - end. next line", "He said: \"no\" ; she said 'yes' ?"]], {}),
    ("unicode",
     ["Ein Mann läuft über die Straße.", "Café — naïve façade, «très» beau.", "Zwei\u00a0Hunde\u3000spielen\u2009im Schnee.",
      "东京 是 日本的首都。", "Ωμέγα, Привет, мир!"],
     [["Ein Mann läuft über die Straße.", "Café – naïve façade, « très » beau.", "Zwei Hunde spielen im Schnee.",
       "东京是日本的首都。", "Ωμέγα, привет, мир!"]], {}),
    ("multi_reference", REALISTIC_HYPS[:4], [REALISTIC_REFS[:4],
                                             ["A man wearing an orange hat looks at something.",
                                              "A Boston terrier runs on the green grass in front of a white fence.",
                                              "A girl wearing a karate uniform breaks a stick with a kick.",
                                              "Five people in winter jackets and helmets stand in snow."]], {}),
    # 3- and 4-gram counts are zero while their totals are not: the smoothing methods differ.
    ("smooth_exp", SMOOTH_HYPS, [SMOOTH_REFS], {}),
    ("smooth_floor", SMOOTH_HYPS, [SMOOTH_REFS], {"smooth_method": "floor"}),
    ("smooth_add_k", SMOOTH_HYPS, [SMOOTH_REFS], {"smooth_method": "add-k"}),
    ("smooth_none", SMOOTH_HYPS, [SMOOTH_REFS], {"smooth_method": "none"}),
    ("all_orders_matched_floor", ["the cat sat on a mat", "a dog"], [["the cat sat on the mat", "the dog"]],
     {"smooth_method": "floor"}),
    ("effective_order", ["the cat sat"], [["the cat sat on"]], {"effective_order": True}),
    ("tokenize_none", ["Hello, world!", "A man runs."], [["Hello , world !", "A man runs."]], {"tokenize": "none"}),
    # sacreBLEU -lc, the lenient score the pytorch-seq2seq anchor is closest to (docs/EXPERIMENTS.md).
    ("lowercase", REALISTIC_HYPS, [REALISTIC_REFS], {"lowercase": True}),
    ("lowercase_unicode",
     ["EIN MANN läuft über DIE Straße.", "CAFÉ — Naïve Façade, «TRÈS» beau.", "ΩΜΈΓΑ, ПРИВЕТ, мир!"],
     [["Ein Mann läuft über die Straße.", "Café – naïve façade, « très » beau.", "Ωμέγα, привет, мир!"]],
     {"lowercase": True}),
]

TOKENIZE = [
    "Hello, world!",
    "It costs $5,000.50 in 2019-2020.",
    "e.g. U.S.A., etc...",
    "&quot;a&quot; &amp;amp; &lt;b&gt; <skipped>",
    "well-known 3-4 pm -- end.-\nnext",
    "  leading and   trailing  \t",
    "Zwei\u00a0Hunde\u3000spielen\u2009im\u202fSchnee\u0085.",
    "Straße, Café. «très» — 東京。",
    "a.b,c 1.2,3 .5 ,6 x. y, 7. 8,",
    "..,,..1..2,,3",
    "ab.,cd",
    "{x}[y](z)<w>|v|\\u^t_s`r~q",
    "",
]


def bleu(hyps, ref_streams, opts):
    metric = BLEU(**opts)
    score = metric.corpus_score(hyps, ref_streams)
    return score, str(metric.get_signature())


def print_golden(json_mode):
    golden = Golden("sacrebleu_golden.py", json_mode)
    golden.block("tests/metrics_sacrebleu_test.cpp", f"sacrebleu {sacrebleu.__version__}")
    golden.comment("{name, hyps, refs, options, score, counts, totals, precisions, bp, sys_len, ref_len, signature,")
    golden.comment(" formatted}")
    cases = []
    for name, hyps, refs, opts in CASES:
        s, sig = bleu(hyps, refs, opts)
        options = {k: opts[k] for k in ("tokenize", "smooth_method", "effective_order", "lowercase")
                   if k in opts}  # BleuOptions' order
        cases.append((name, hyps, refs, options, s.score, [float(c) for c in s.counts], [float(t) for t in s.totals],
                      [float(p) for p in s.precisions], s.bp, s.sys_len, s.ref_len, sig, str(s)))
    golden.const("GoldenCase[]", "kCases", cases)
    tok = Tokenizer13a()
    golden.comment("{line, its 13a tokenization}")
    golden.const("std::pair<const char*, const char*>[]", "kTokenized", [(line, tok(line)) for line in TOKENIZE])
    golden.finish()


def read_lines(path):
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def score_files(args):
    hyps = read_lines(args.hyps)
    refs = [read_lines(r) for r in args.refs]
    opts = {"smooth_method": args.smooth, "tokenize": args.tokenize, "effective_order": args.effective_order}
    s, sig = bleu(hyps, refs, opts)
    print(f"score={s.score!r}")
    print("counts=" + " ".join(repr(float(c)) for c in s.counts))
    print("totals=" + " ".join(repr(float(t)) for t in s.totals))
    print("precisions=" + " ".join(repr(float(p)) for p in s.precisions))
    print(f"bp={s.bp!r}")
    print(f"sys_len={s.sys_len}")
    print(f"ref_len={s.ref_len}")
    print(f"signature={sig}")
    if args.tok_out:
        tok = Tokenizer13a()
        with open(args.tok_out, "w", encoding="utf-8", newline="") as f:
            for h in hyps:
                f.write(tok(h.rstrip()) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hyps")
    p.add_argument("--refs", action="append", default=[])
    p.add_argument("--tok-out")
    p.add_argument("--smooth", default="exp")
    p.add_argument("--tokenize", default="13a")
    p.add_argument("--effective-order", action="store_true")
    p.add_argument("--json", action="store_true", help="the golden values as JSON (without --hyps)")
    args = p.parse_args()
    if args.hyps:
        if not args.refs:
            sys.exit("--hyps needs at least one --refs")
        score_files(args)
    else:
        print_golden(args.json)


if __name__ == "__main__":
    main()
