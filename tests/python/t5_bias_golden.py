"""Golden values for plugins/scorer/t5_bias/tests/t5_bias_test.cpp: the t5_bias scorer plugin (T5's relative
position bias, Raffel et al., "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
Transformer", JMLR 2020).

References written here, independent of the C++:
  - the buckets by T5's _relative_position_bucket, verbatim but for names (Hugging Face's
    transformers/models/t5/modeling_t5.py, T5Attention; Mesh TensorFlow's
    transformer/attention.py), with relative_position = key position - query position; bidirectional
    (an encoder) and unidirectional (a decoder, is_decoder=True);
  - cross-checked against a plain-Python loop of the same rule (exact below max_exact, log-spaced to
    max_distance, the last bucket beyond);
  - scaled dot-product scores plus table[bucket(j - i), h], computed per sequence and head ([B, heads, Q, K]).
Inputs and weights come from the closed formulas of golden_common.py.
Run:  ~/.cache/attnlab/venv-torch-2.11.0/bin/python tests/python/t5_bias_golden.py [--json]
(C++ blocks to paste, or JSON for tests/python/golden_check.py: ctest golden.t5_bias_golden)
"""
import math

import torch

from golden_common import data, put_tensor, weight
from golden_out import Golden, json_flag


# ------------------------------------------------------------------------------ T5's buckets
def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """T5Attention._relative_position_bucket, verbatim but for the comments."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
    )
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


def bucket_loop(r, bidirectional, num_buckets, max_distance):
    """The same rule, one relative position at a time, in double."""
    offset = 0
    if bidirectional:
        num_buckets //= 2
        offset = num_buckets if r > 0 else 0
        n = abs(r)
    else:
        n = max(-r, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return offset + n
    large = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return offset + min(large, num_buckets - 1)


def t5_scores(q, k, table, query_offset, key_offset, bidirectional, num_buckets, max_distance):
    """q [B * heads, Q, d], k [B * heads, K, d] (row b * heads + h: sequence b, head h) -> [B * heads, Q, K]"""
    heads = table.shape[1]
    rows, n_q, d = q.shape
    n_k = k.shape[1]
    i = torch.arange(query_offset, query_offset + n_q)[:, None]
    j = torch.arange(key_offset, key_offset + n_k)[None, :]
    buckets = relative_position_bucket(j - i, bidirectional, num_buckets, max_distance)  # [Q, K]
    bias = table[buckets].permute(2, 0, 1)  # [heads, Q, K], as T5's compute_bias
    q4, k4 = q.view(rows // heads, heads, n_q, d), k.view(rows // heads, heads, n_k, d)
    scores = q4 @ k4.transpose(-1, -2) / math.sqrt(d) + bias[None]  # [B, heads, Q, K]
    return scores.reshape(rows, n_q, n_k)


golden = Golden("t5_bias_golden.py", json_flag())
golden.block("plugins/scorer/t5_bias/tests/t5_bias_test.cpp")

# Buckets of relative positions (key minus query): every one in -20..20 and some farther around the
# log-spaced edges and max_distance, for T5's defaults (32 buckets, distance 128) and a small table
# (8 buckets, distance 20), bidirectional and unidirectional.
far = [16, 17, 23, 24, 31, 32, 33, 45, 46, 63, 64, 65, 90, 91, 127, 128, 129, 160]
relative = torch.tensor(sorted(set([-r for r in far] + list(range(-20, 21)) + far)))
golden.const("std::vector<int64_t>", "kT5Relative", relative.tolist(),
             comment="kT5Relative: relative positions j - i; kT5Buckets<num_buckets>x<max_distance><direction>: theirs")
for num_buckets, max_distance in ((32, 128), (8, 20)):
    for direction, bidirectional in (("Bidirectional", True), ("Unidirectional", False)):
        b = relative_position_bucket(relative, bidirectional, num_buckets, max_distance)
        assert b.tolist() == [bucket_loop(r, bidirectional, num_buckets, max_distance) for r in relative.tolist()]
        golden.const("std::vector<int64_t>", f"kT5Buckets{num_buckets}x{max_distance}{direction}", b.tolist())

# Scores of 2 sequences x 4 heads of size 4, 3 queries at positions 4..6, 5 keys at 1..5; the table
# [8 buckets, 4 heads] filled with weight(0), 20 the max distance.
q, k = data(0.1, (8, 3, 4)), data(0.7, (8, 5, 4))
table = weight(0, (8, 4))
put_tensor(golden, "kT5ScoresBidirectional", t5_scores(q, k, table, 4, 1, True, 8, 20))
put_tensor(golden, "kT5ScoresUnidirectional", t5_scores(q, k, table, 4, 1, False, 8, 20))
golden.finish()
