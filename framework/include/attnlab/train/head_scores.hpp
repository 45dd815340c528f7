#pragma once
// Head scores of a decoder-only language model: how much of each head's attention falls where a
// previous-token, duplicate-token or induction head would put it, as TransformerLens's
// head_detector measures it (detect_head with error_measure "mul", exclude_bos and
// exclude_current_token false: score = sum(A * P) / sum(A) over a head's [T, T] pattern A and a
// 0/1 detection pattern P, averaged over the sequences), and the attention sink's mass on token 0.
// The sequences are usually repeated random tokens (r r, r uniform over the ordinary ids): an
// induction head attends from the second r to the token after the first occurrence of its query.
// Unlike TransformerLens no <bos> is prepended: token 0 is the first random token. As in
// TransformerLens, queries that cannot match count in sum(A): a perfect induction head scores 0.5
// on r r (the first half's queries have nothing to match), a perfect previous-token head (T-1)/T.
#include <attnlab/data/dataset.hpp>
#include <attnlab/nn/head_mask.hpp>
#include <attnlab/nn/language_model.hpp>
#include <attnlab/nn/recorder.hpp>
#include <attnlab/results/results.hpp>

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attnlab::train {

/// TL's get_previous_token_head_detection_pattern: [T, T] float, P[i, i - 1] = 1 for i >= 1.
torch::Tensor previous_token_pattern(int64_t T);

/// TL's get_duplicate_token_head_detection_pattern: tokens [..., T] -> [..., T, T] float,
/// P[i, j] = 1 for j < i with tok[j] == tok[i] (the diagonal, a token itself, is left out).
torch::Tensor duplicate_token_pattern(const torch::Tensor& tokens);

/// TL's get_induction_head_detection_pattern: tokens [..., T] -> [..., T, T] float, the duplicate
/// pattern shifted one column right with column 0 zeroed: P[i, j] = 1 for 1 <= j <= i with
/// tok[j - 1] == tok[i] (the diagonal counts when a token repeats its predecessor).
torch::Tensor induction_pattern(const torch::Tensor& tokens);

/// Recorded weights [layers, B, heads, T, T] (nn::RecordedModule::weights) against a detection
/// pattern [T, T] (every row) or [B, T, T] (one per row) -> [layers, heads] float64 on the CPU:
/// the mean over the B rows of sum(A * P) / sum(A) (TL's "mul" score).
torch::Tensor pattern_score(const torch::Tensor& weights, const torch::Tensor& pattern);

/// Recorded weights [layers, B, heads, T, T], T >= 2 -> [layers, heads] float64 on the CPU: the
/// mean over the rows and the queries i >= 1 of A[i, 0], the attention put on the first token.
torch::Tensor first_token_mass(const torch::Tensor& weights);

/// [sequences, 2 * half_len] int64: each row r r with r [half_len] uniform in [low, high), drawn
/// from a CPU generator seeded with `seed` (the same tokens on every machine).
torch::Tensor repeated_random_tokens(int64_t sequences, int64_t half_len, int64_t low, int64_t high, uint64_t seed);

/// Every head's scores, each [layers, heads] float64 on the CPU (layer and head indices from 0).
struct HeadScores {
  std::string module;           // the recorded module (nn::kDecoderSelf)
  std::vector<int64_t> layers;  // the recorded layer of each row
  torch::Tensor previous_token, duplicate_token, induction, first_token_mass;
};

/// One kind of score: its name in the results file, what it measures, where HeadScores keeps it.
struct HeadScoreKind {
  const char* name;
  const char* definition;
  torch::Tensor HeadScores::*scores;
};

/// previous_token, duplicate_token, induction, first_token_mass, in this order.
const std::vector<HeadScoreKind>& head_score_kinds();

/// The model's attention over `tokens` [N, T] (T >= 2, ids < vocab_size()), one forward pass on
/// `device` recorded as nn::kDecoderSelf, in eval mode without gradients (the model's mode is
/// restored), scored for every head. The head mask active on this thread applies. `recorder`,
/// when given, is the one recorded into (for writing the maps afterwards). c10::Error when the
/// model records no kDecoderSelf attention or its maps are not [T, T].
HeadScores measure_heads(nn::LanguageModel& model, const torch::Tensor& tokens, torch::Device device,
                         nn::AttentionRecorder* recorder = nullptr);

/// The ordinary token ids [low, high) random sequences are drawn from.
struct TokenRange {
  int64_t low = 0, high = 0;
  std::string text;  // "ids 2 to 62 of 63 (after <pad>, <unk>)", for the results file and tables
};

/// The ids the dataset says are ordinary tokens (metadata lm.tokens = [low, high), as lm_tasks
/// says them); else the model's vocabulary less the reserved tokens ("<pad>", "<unk>": any "<...>")
/// the dataset's vocabulary starts with; else all of it.
TokenRange ordinary_tokens(const data::Dataset& dataset, int64_t vocab_size);

/// Heads switched off in `trained` (the run trained without them) get NaN scores.
void blank_heads_off(HeadScores& s, const nn::HeadMask& trained);

/// What a measurement was made on: the attributes of its /head_scores group (docs/RESULTS.md).
struct HeadScoreSetup {
  int64_t sequences = 16, length = 50;
  uint64_t seed = 0;
  TokenRange ids;
  std::string checkpoint;         // "best", "last", ... ("" during training)
  std::string device;             // where the forward pass ran
  std::string trained_head_mask;  // the mask the run trained with ("" when none)
};

/// Writes /<at>/<kind> float32 [layers, heads] for every kind with its definition, and the
/// group's attributes (module, sequences, length, seed, token_low, token_high, token_range,
/// error_measure, numbering, device, and checkpoint and trained_head_mask when set). Whatever was
/// at /<at> is replaced.
void write_head_scores(results::Results& out, const std::string& at, const HeadScores& s, const HeadScoreSetup& setup);

}  // namespace attnlab::train
