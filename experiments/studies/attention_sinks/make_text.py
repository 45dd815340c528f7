"""The text the attention-sinks study measures its models on: the English column of fra-eng
(the corpus the models train on), its lines joined with newlines as the text dataset joins them,
from the first line boundary after the first 91% of its characters (the dataset's val split is the
last 10%: this is inside it, clear of the training 90%), less the lines holding a character the
training 90% lacks (the character model has no unknown token), cut to its first N characters
(whole lines).

    python make_text.py [FRA_ENG_ZIP] [-o OUT] [--chars N]
FRA_ENG_ZIP defaults to $ATTNLAB_DATA_MIRROR/fra-eng/fra-eng.zip; OUT to results/attention_sinks/fra_eng_en_tail.txt.
"""
import argparse
import os
import zipfile


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mirror = os.environ.get("ATTNLAB_DATA_MIRROR", "")
    p.add_argument("zip", nargs="?", default=os.path.join(mirror, "fra-eng", "fra-eng.zip"))
    p.add_argument("-o", "--out", default="results/attention_sinks/fra_eng_en_tail.txt")
    p.add_argument("--chars", type=int, default=100000, help="at most this many characters (0: all)")
    a = p.parse_args()
    with zipfile.ZipFile(a.zip) as z:
        name = next(n for n in z.namelist() if n.endswith("fra.txt") and not n.startswith("__MACOSX"))
        lines = z.read(name).decode("utf-8").splitlines()
    text = "\n".join(line.split("\t")[0] for line in lines if "\t" in line)
    known = set(text[:int(len(text) * 0.9)])
    start = text.index("\n", int(len(text) * 0.91)) + 1
    tail = text[start:].split("\n")
    kept = "\n".join(line for line in tail if set(line) <= known)
    if a.chars > 0 and len(kept) > a.chars:
        kept = kept[:kept.rindex("\n", 0, a.chars)]
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(kept)
    print(f"{a.out}: {len(kept)} characters, {kept.count(chr(10)) + 1} of the last {len(tail)} lines of {len(text)} "
          "characters")


if __name__ == "__main__":
    main()
