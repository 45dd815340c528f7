#pragma once
// The rows of the lm_tasks dataset's tasks, in Batch's decoder-only layout: tgt_in a row's
// inputs, tgt_out the next token of each ('<pad>' where a label is not scored), lens the count of
// scored labels of a row. Each generator draws from the at::Generator it is given, in a fixed
// order, so a seed gives the same rows on every run. Tasks:
//
// - repeated: [<bos>] r r, r of half_len tokens drawn uniformly from the ordinary tokens, the
//   setting in which induction heads form (Elhage et al. 2021, Olsson et al. 2022). Scored: the
//   tokens of the second copy (loss_on: second_half; its first token can only be known from its
//   position), or every label (loss_on: all). With min_half_len, r's length is drawn per row from
//   [min_half_len, half_len] and rows are right-padded: with one length for all rows, the answer
//   always stands half_len - 1 tokens back, and one layer learns that offset (no induction).
// - mqar: multi-query associative recall as Zoology draws it (Arora, Eyuboglu et al. 2023;
//   HazyResearch/zoology, data/associative_recall.py, _mqar): num_kv_pairs keys drawn without
//   replacement from [1, V/2) and values from [V/2, V), interleaved at the start (k v k v ...);
//   then each key queried once, at 2 kv + 2 gap, the gaps drawn without replacement from
//   [0, (L - 2 kv) / 2) with probability proportional to a i^(a - 1) (i = gap + 1, a = power_a);
//   the label at a query is its key's value, no other label is scored. Other positions are token
//   0, or uniform over [0, V) with random_non_queries. Token ids are Zoology's (0 .. V-1), '<pad>'
//   is the extra id V.
// - copy, reverse, sort: x <sep> f(x) <eos>, x of a length drawn from train_len (test_len for the
//   test split, for length generalisation), f the identity, reversal or sorting by id; scored:
//   f(x) and <eos>; rows right-padded with <pad>.
//
// The generators take their parameters as given: the plugin (lm_tasks.cpp) checks its options
// and picks the token ids. Used by that plugin alone; tests/lm_tasks_test.cpp tests it through it.
#include <ATen/core/Generator.h>
#include <torch/types.h>

#include <cstdint>

namespace attnlab::datasets::lm_tasks {

enum class Task { Repeated, Mqar, Copy, Reverse, Sort };

/// The task's name as the option `task` spells it ("repeated").
const char* task_name(Task t);

/// copy, reverse or sort: x <sep> f(x) <eos>.
bool transduction(Task t);

/// One split's rows: tgt_in and tgt_out [N, T], scored labels [N].
struct Rows {
  torch::Tensor in, out, lens;
};

/// x lengths of copy, reverse, sort: [min, max], both included.
struct Lengths {
  int64_t min = 1, max = 1;
};

/// A generator seed from two numbers (distinct streams for the splits and the fresh epochs).
uint64_t mix(uint64_t a, uint64_t b);

/// [n, k] ids of [lo, hi), distinct within a row, in a uniformly random order (k <= hi - lo):
/// Floyd's algorithm draws the set, a Fisher-Yates shuffle orders it. O(n k^2), whatever the pool.
torch::Tensor sample_distinct(int64_t n, int64_t k, int64_t lo, int64_t hi, at::Generator& gen);

/// repeated: [<bos>] r r.
struct RepeatedParams {
  int64_t low = 0, high = 0;  // ordinary ids [low, high), r's tokens
  int64_t half_len = 1;       // most tokens of r
  int64_t min_half_len = 1;   // fewest tokens of r (half_len: every r as long)
  int64_t pad = 0, bos = -1;  // bos -1: no <bos>
  bool loss_on_all = false;   // score every label, not only the second copy's
  /// Inputs per row: the longest row, [<bos>] r r, less its last token.
  int64_t steps() const { return 2 * half_len + (bos >= 0 ? 1 : 0) - 1; }
};

/// [<bos>] r r, right-padded to steps() inputs: tgt_in the row less its last token, tgt_out the
/// row less its first.
Rows repeated(int64_t n, const RepeatedParams& p, at::Generator& gen);

/// mqar: Zoology's ids 0 .. vocab_size - 1, then <pad>.
struct MqarParams {
  int64_t vocab_size = 0;          // V: keys from [1, V/2), values from [V/2, V)
  int64_t seq_len = 0;             // L: tokens per row (even)
  int64_t num_kv_pairs = 1;        // kv: 4 kv <= L, each key queried once
  double power_a = 0.01;           // a > 0: the gaps' probabilities are a i^(a-1)
  bool random_non_queries = true;  // uniform tokens of [0, V) where no pair or query stands
  int64_t pad = 0;                 // <pad>: V
};

/// Zoology's _mqar: k v k v ... then the queries at 2 kv + 2 gap, their values the labels there.
Rows mqar(int64_t n, const MqarParams& p, at::Generator& gen);

/// copy, reverse, sort: x <sep> f(x) <eos>.
struct TransducedParams {
  Task task = Task::Copy;     // f: Copy, Reverse or Sort
  int64_t low = 0, high = 0;  // ordinary ids [low, high), x's tokens
  Lengths lengths;            // x's length, drawn per row
  int64_t pad = 0, sep = 0, eos = 0;
  /// Inputs per row: the longest row, x <sep> f(x) <eos>, less its last token.
  int64_t steps() const { return 2 * lengths.max + 1; }
};

/// x <sep> f(x) <eos>, right-padded to steps() inputs; labels from <sep> on.
Rows transduced(int64_t n, const TransducedParams& p, at::Generator& gen);

}  // namespace attnlab::datasets::lm_tasks
