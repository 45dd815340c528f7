// Head scores: TransformerLens's head_detector patterns and "mul" score, and the first token's mass.
#include <attnlab/train/head_scores.hpp>

#include <attnlab/results/tensor.hpp>
#include <attnlab/train/eval_scope.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>

namespace attnlab::train {
namespace {

/// Weights [layers, B, heads, T, T] as float64 on the CPU, checked.
torch::Tensor checked_weights(const torch::Tensor& weights, const char* who) {
  TORCH_CHECK(weights.defined() && weights.dim() == 5 && weights.size(3) == weights.size(4), who,
              ": expected recorded weights [layers, B, heads, T, T], found ",
              weights.defined() ? weights.sizes() : c10::IntArrayRef{});
  return weights.detach().to(torch::kCPU, torch::kDouble);
}

}  // namespace

torch::Tensor previous_token_pattern(int64_t T) {
  TORCH_CHECK(T >= 1, "previous_token_pattern: T must be >= 1, found ", T);
  return torch::ones({T - 1}, torch::kFloat).diag(-1);  // [T, T]: ones just below the diagonal
}

torch::Tensor duplicate_token_pattern(const torch::Tensor& tokens) {
  TORCH_CHECK(tokens.dim() >= 1, "duplicate_token_pattern: expected tokens [..., T]");
  const auto same = tokens.unsqueeze(-1) == tokens.unsqueeze(-2);  // [..., i, j]: tok[i] == tok[j]
  return same.to(torch::kFloat).tril(-1);                          // j < i only
}

torch::Tensor induction_pattern(const torch::Tensor& tokens) {
  const auto duplicate = duplicate_token_pattern(tokens);  // [..., T, T]
  const int64_t T = duplicate.size(-1);
  // Column j takes the duplicate pattern's column j - 1; column 0 is zero (TL's roll and zeroed column).
  auto shifted = torch::zeros_like(duplicate);
  shifted.narrow(-1, 1, T - 1).copy_(duplicate.narrow(-1, 0, T - 1));
  return shifted.tril();
}

torch::Tensor pattern_score(const torch::Tensor& weights, const torch::Tensor& pattern) {
  const auto a = checked_weights(weights, "pattern_score");  // [L, B, H, T, T]
  const int64_t B = a.size(1), T = a.size(3);
  TORCH_CHECK(pattern.defined() && (pattern.dim() == 2 || (pattern.dim() == 3 && pattern.size(0) == B)) &&
                  pattern.size(-1) == T && pattern.size(-2) == T,
              "pattern_score: expected a pattern [", T, ", ", T, "] or [", B, ", ", T, ", ", T, "], found ",
              pattern.defined() ? pattern.sizes() : c10::IntArrayRef{});
  auto p = pattern.to(torch::kCPU, torch::kDouble);
  p = (pattern.dim() == 2 ? p.unsqueeze(0) : p).unsqueeze(1);  // [1 or B, 1, T, T] against [L, B, H, T, T]
  const auto matched = (a * p).sum({-2, -1});                  // [L, B, H]
  return (matched / a.sum({-2, -1})).mean(1);                  // [L, H]
}

torch::Tensor first_token_mass(const torch::Tensor& weights) {
  const auto a = checked_weights(weights, "first_token_mass");
  TORCH_CHECK(a.size(3) >= 2, "first_token_mass: needs 2 positions at least, found ", a.size(3));
  const auto sink = a.select(-1, 0).narrow(-1, 1, a.size(3) - 1);  // [L, B, H, T - 1]: A[i, 0], i >= 1
  return sink.mean({1, 3});                                        // [L, H]
}

torch::Tensor repeated_random_tokens(int64_t sequences, int64_t half_len, int64_t low, int64_t high, uint64_t seed) {
  TORCH_CHECK(sequences >= 1 && half_len >= 1, "repeated_random_tokens: sequences and half_len must be >= 1, found ",
              sequences, " and ", half_len);
  TORCH_CHECK(low < high, "repeated_random_tokens: empty id range [", low, ", ", high, ")");
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto half = torch::randint(low, high, {sequences, half_len}, gen, torch::kLong);
  return torch::cat({half, half}, 1);
}

const std::vector<HeadScoreKind>& head_score_kinds() {
  static const std::vector<HeadScoreKind> kinds = {
      {"previous_token",
       "TransformerLens head_detector, error_measure mul: sum(A * P) / sum(A), mean over the sequences, with "
       "P[i, i-1] = 1",
       &HeadScores::previous_token},
      {"duplicate_token",
       "TransformerLens head_detector, error_measure mul: sum(A * P) / sum(A), mean over the sequences, with "
       "P[i, j] = 1 for j < i and tok[j] == tok[i]",
       &HeadScores::duplicate_token},
      {"induction",
       "TransformerLens head_detector, error_measure mul: sum(A * P) / sum(A), mean over the sequences, with "
       "P[i, j] = 1 for 1 <= j <= i and tok[j-1] == tok[i]",
       &HeadScores::induction},
      {"first_token_mass", "the mean over the sequences and the queries i >= 1 of A[i, 0] (the attention sink)",
       &HeadScores::first_token_mass},
  };
  return kinds;
}

HeadScores measure_heads(nn::LanguageModel& model, const torch::Tensor& tokens, torch::Device device,
                         nn::AttentionRecorder* recorder) {
  TORCH_CHECK(tokens.dim() == 2 && tokens.size(0) >= 1 && tokens.size(1) >= 2,
              "measure_heads: expected tokens [N, T] with N >= 1 and T >= 2, found ", tokens.sizes());
  nn::AttentionRecorder own;
  nn::AttentionRecorder& rec = recorder != nullptr ? *recorder : own;
  rec.clear();
  {
    const EvalScope eval(model);
    const torch::NoGradGuard no_grad;
    const nn::RecordingScope scope(&rec);
    model.forward(tokens.to(device, torch::kLong));
  }
  const auto recorded = rec.module(nn::kDecoderSelf);  // [layers, N, heads, T, T]
  const int64_t T = tokens.size(1);
  TORCH_CHECK(
      recorded.weights.size(1) == tokens.size(0) && recorded.weights.size(3) == T && recorded.weights.size(4) == T,
      "measure_heads: expected ", nn::kDecoderSelf, " maps [layers, ", tokens.size(0), ", heads, ", T, ", ", T,
      "], found ", recorded.weights.sizes());
  const auto ids = tokens.to(torch::kCPU, torch::kLong);
  HeadScores s;
  s.module = recorded.module;
  s.layers = recorded.layers;
  s.previous_token = pattern_score(recorded.weights, previous_token_pattern(T));
  s.duplicate_token = pattern_score(recorded.weights, duplicate_token_pattern(ids));
  s.induction = pattern_score(recorded.weights, induction_pattern(ids));
  s.first_token_mass = first_token_mass(recorded.weights);
  return s;
}

TokenRange ordinary_tokens(const data::Dataset& dataset, int64_t vocab_size) {
  TokenRange r{0, vocab_size, {}};
  if (const auto said = dataset.info().meta.range("lm.tokens")) {
    r.low = std::max<int64_t>(0, static_cast<int64_t>(said->first));
    r.high = std::min<int64_t>(vocab_size, static_cast<int64_t>(said->second));
    r.text = fmt::format("ids {} to {} of {} (the dataset's lm.tokens)", r.low, r.high - 1, vocab_size);
    return r;
  }
  std::vector<std::string> reserved;
  if (const auto* vocab = dataset.tgt_vocab()) {
    r.high = std::min(r.high, vocab->size());
    const auto is_reserved = [](const std::string& t) { return t.size() > 2 && t.front() == '<' && t.back() == '>'; };
    while (r.low < r.high && is_reserved(vocab->token(r.low))) reserved.push_back(vocab->token(r.low++));
  }
  r.text = fmt::format("ids {} to {} of {}{}", r.low, r.high - 1, vocab_size,
                       reserved.empty() ? std::string() : fmt::format(" (after {})", fmt::join(reserved, ", ")));
  return r;
}

void blank_heads_off(HeadScores& s, const nn::HeadMask& trained) {
  for (size_t l = 0; l < s.layers.size(); ++l) {
    const auto xi = trained.get(s.module, s.layers[l]);
    if (!xi.defined()) continue;
    const auto off = xi.to(torch::kCPU) == 0;  // [heads]
    for (const auto& kind : head_score_kinds()) {
      (s.*kind.scores)[static_cast<int64_t>(l)].masked_fill_(off, std::numeric_limits<double>::quiet_NaN());
    }
  }
}

void write_head_scores(results::Results& out, const std::string& at, const HeadScores& s, const HeadScoreSetup& setup) {
  out.remove(at);
  for (const auto& kind : head_score_kinds()) {
    const auto path = at + "/" + kind.name;
    out.write_array(path, results::to_float_array(s.*kind.scores));
    out.set_attr_at(path, "definition", std::string(kind.definition));
  }
  out.set_attr_at(at, "module", s.module);
  out.set_attr_at(at, "sequences", setup.sequences);
  out.set_attr_at(at, "length", setup.length);
  out.set_attr_at(at, "seed", static_cast<int64_t>(setup.seed));
  out.set_attr_at(at, "token_low", setup.ids.low);
  out.set_attr_at(at, "token_high", setup.ids.high);
  out.set_attr_at(at, "token_range", setup.ids.text);
  if (!setup.checkpoint.empty()) out.set_attr_at(at, "checkpoint", setup.checkpoint);
  out.set_attr_at(at, "error_measure", std::string("mul"));
  out.set_attr_at(at, "numbering", std::string("[layer, head] from 0: layer 1 head 1 is [0, 0]"));
  out.set_attr_at(at, "device", setup.device);
  if (!setup.trained_head_mask.empty()) out.set_attr_at(at, "trained_head_mask", setup.trained_head_mask);
}

}  // namespace attnlab::train
