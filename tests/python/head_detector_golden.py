"""Golden values for tests/train_head_scores_test.cpp: the head scores of train/head_scores.hpp
(TransformerLens's head detector, transformer_lens/head_detector.py).

References written here, independent of the C++:
  - a numpy port of TransformerLens's detection patterns, step for step:
    get_previous_token_head_detection_pattern (an identity of size T - 1 put below the diagonal,
    tril), get_duplicate_token_head_detection_pattern (the tokens repeated as rows compared with
    their transpose, the diagonal zeroed, tril) and get_induction_head_detection_pattern (the
    duplicate pattern rolled one column right, column 0 replaced by zeros, tril);
  - compute_head_attention_similarity_score with error_measure="mul", exclude_bos and
    exclude_current_token false: sum(A * P) / sum(A), and detect_head's mean over a list of
    sequences (one score per sequence, then the mean);
  - the first token's mass (not in TransformerLens): the mean of A[i, 0] over the queries i >= 1.
The attention: causal softmax of golden_common.data scores, float32 as torch makes it, scored in
float64 by numpy.
Run:  ~/.cache/attnlab/venv-torch-2.11.0/bin/python tests/python/head_detector_golden.py [--json]
(C++ blocks to paste, or JSON for tests/python/golden_check.py: ctest golden.head_detector_golden)
"""
import numpy as np
import torch

from golden_common import data
from golden_out import Golden, json_flag


# ------------------------------------------------------------------------------ TL's patterns, in numpy
def previous_token_pattern(tokens):
    """tokens [T] -> [T, T]: get_previous_token_head_detection_pattern."""
    n = tokens.shape[-1]
    pattern = np.zeros((n, n))
    pattern[1:, :-1] = np.eye(n - 1)
    return np.tril(pattern)


def duplicate_token_pattern(tokens):
    """tokens [T] -> [T, T]: get_duplicate_token_head_detection_pattern."""
    rows = np.tile(tokens, (tokens.shape[-1], 1))  # row i: the tokens; [i][j] = tok[j]
    same = np.equal(rows, rows.T).astype(int)       # [i][j]: tok[j] == tok[i]
    np.fill_diagonal(same, 0)                       # a token is its own duplicate: left out
    return np.tril(same.astype(float))


def induction_pattern(tokens):
    """tokens [T] -> [T, T]: get_induction_head_detection_pattern."""
    duplicate = duplicate_token_pattern(tokens)
    shifted = np.roll(duplicate, 1, axis=1)  # column j <- column j - 1; the last wraps to column 0
    result = np.concatenate((np.zeros((duplicate.shape[0], 1)), shifted[:, 1:]), axis=1)
    return np.tril(result)


def mul_score(attention, pattern):
    """compute_head_attention_similarity_score, error_measure "mul", nothing excluded."""
    return (attention * pattern).sum() / attention.sum()


def detect(attention, tokens, make_pattern):
    """attention [B, heads, T, T], tokens [B, T] -> [heads]: per sequence, then the mean (detect_head
    over a list of sequences)."""
    per_sequence = [[mul_score(attention[b, h], make_pattern(tokens[b])) for h in range(attention.shape[1])]
                    for b in range(attention.shape[0])]
    return np.mean(np.array(per_sequence), axis=0)


def first_token_mass(attention):
    """attention [B, heads, T, T] -> [heads]: the mean of A[i, 0] over the sequences and queries i >= 1."""
    return attention[:, :, 1:, 0].mean(axis=(0, 2))


def check_ours_equal_tl(tokens):
    """The closed forms train/head_scores.hpp documents give TL's patterns."""
    n = len(tokens)
    for i in range(n):
        for j in range(n):
            assert previous_token_pattern(tokens)[i, j] == (j == i - 1)
            assert duplicate_token_pattern(tokens)[i, j] == (j < i and tokens[j] == tokens[i])
            assert induction_pattern(tokens)[i, j] == (1 <= j <= i and tokens[j - 1] == tokens[i])


golden = Golden("head_detector_golden.py", json_flag())
golden.block("tests/train_head_scores_test.cpp")

# Two sequences of 10 tokens: repeats near and far, a token repeating its predecessor (the induction
# pattern's diagonal), and the second one r r (a repeated random half).
tokens = np.array([[5, 3, 3, 7, 5, 3, 9, 9, 9, 3],
                   [4, 8, 2, 6, 1, 4, 8, 2, 6, 1]])
for row in tokens:
    check_ours_equal_tl(row)
rows = "std::vector<std::vector<int64_t>>"
golden.const(rows, "kHeadTokens", tokens.tolist(), comment="kHeadTokens: [2, 10]; TL's patterns of each, [T, T]")
golden.const(rows, "kPreviousTokenPattern", previous_token_pattern(tokens[0]).astype(int).tolist())
for b in range(2):
    golden.const(rows, f"kDuplicateTokenPattern{b}", duplicate_token_pattern(tokens[b]).astype(int).tolist())
    golden.const(rows, f"kInductionPattern{b}", induction_pattern(tokens[b]).astype(int).tolist())

# Attention [B = 2, heads = 3, T, T]: a causal softmax of data(0.4) scores times 3.
T = tokens.shape[1]
scores = data(0.4, (2, 3, T, T)) * 3
causal = torch.ones(T, T, dtype=torch.bool).tril()
attention = scores.masked_fill(~causal, float("-inf")).softmax(-1).numpy().astype(np.float64)
golden.const("std::vector<float>", "kMulPreviousToken", detect(attention, tokens, previous_token_pattern).tolist(),
             float32=True, comment="TL's mul scores of the 3 heads of A = causal softmax(3 data(0.4, [2, 3, 10, 10])); "
             "A's first token mass")
golden.const("std::vector<float>", "kMulDuplicateToken", detect(attention, tokens, duplicate_token_pattern).tolist(),
             float32=True)
golden.const("std::vector<float>", "kMulInduction", detect(attention, tokens, induction_pattern).tolist(), float32=True)
golden.const("std::vector<float>", "kFirstTokenMass", first_token_mass(attention).tolist(), float32=True)
golden.finish()
