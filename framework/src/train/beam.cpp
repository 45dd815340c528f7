// Batched beam search (fairseq's finishing rule, GNMT length penalty); see beam.hpp.
#include <attnlab/train/beam.hpp>

#include <attnlab/error.hpp>

#include "train/step_decoder.hpp"

#include <torch/utils.h>

#include <cmath>
#include <limits>

namespace attnlab::train {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct Hypothesis {
  std::vector<int64_t> tokens;  // generated tokens, without <eos>
  bool ended = false;           // finished by <eos> (else cut at max_steps)
  double log_prob = 0.0;        // including <eos> when ended
  double score = 0.0;           // log_prob / lp
};

}  // namespace

double gnmt_length_penalty(int64_t length, double alpha) {
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

BeamOutput beam_search(nn::EncoderDecoder& model, const torch::Tensor& src, const torch::Tensor& src_valid_lens,
                       int64_t bos_id, int64_t eos_id, const BeamOptions& options) {
  return beam_search(std::vector<nn::EncoderDecoder>{model}, src, src_valid_lens, bos_id, eos_id, options);
}

BeamOutput beam_search(const std::vector<nn::EncoderDecoder>& models, const torch::Tensor& src,
                       const torch::Tensor& src_valid_lens, int64_t bos_id, int64_t eos_id,
                       const BeamOptions& options) {
  ATTNLAB_CHECK(options.beam_size >= 1 && options.max_steps >= 1, ConfigError,
                "beam search: beam_size and max_steps must be >= 1, found {} and {}", options.beam_size,
                options.max_steps);
  TORCH_CHECK(src.dim() >= 2, "beam_search: expected src [B, S], found ", src.sizes());
  torch::InferenceMode guard;
  nn::RecordingScope paused(nullptr);  // rows follow the surviving hypotheses: nothing is recorded
  const int64_t batch = src.size(0), k = options.beam_size, rows = batch * k;
  const auto device = src.device();
  const auto long_opts = torch::TensorOptions(torch::kLong).device(device);

  StepDecoder decoder(models, src, src_valid_lens);  // eval mode; each model's encoder output and state
  decoder.reorder(torch::arange(batch, long_opts).repeat_interleave(k));  // every cache now [B * k, ...]

  auto tokens = torch::full({rows, 1}, bos_id, long_opts);  // [B * k, 1] the tokens fed next
  // Only beam 0 of each row is live at the start, so the first step does not pick k copies.
  std::vector<double> cum(static_cast<size_t>(rows), kNegInf);  // summed log P per slot
  for (int64_t b = 0; b < batch; ++b) cum[static_cast<size_t>(b * k)] = 0.0;
  std::vector<std::vector<int64_t>> history(static_cast<size_t>(rows));  // tokens per slot
  std::vector<std::vector<Hypothesis>> finished(static_cast<size_t>(batch));
  std::vector<bool> done(static_cast<size_t>(batch), false);

  for (int64_t t = 0; t < options.max_steps; ++t) {
    auto logp = decoder.log_probs(tokens);  // [B * k, V]
    const int64_t vocab = logp.size(1);
    auto cum_t = torch::tensor(cum, torch::TensorOptions(torch::kDouble)).to(device);  // [B * k]
    auto cand = (cum_t.unsqueeze(1) + logp).view({batch, k * vocab});                 // [B, k * V]
    const int64_t n = std::min(2 * k, k * vocab);
    auto [top_vals, top_idx] = cand.topk(n, 1);  // [B, n] best first
    auto vals = top_vals.cpu().contiguous();
    auto idx = top_idx.cpu().contiguous();
    const double* v = vals.data_ptr<double>();
    const int64_t* ix = idx.data_ptr<int64_t>();
    const bool last = t + 1 == options.max_steps;

    std::vector<int64_t> next_slot(static_cast<size_t>(rows)), next_tok(static_cast<size_t>(rows), eos_id);
    std::vector<double> next_cum(static_cast<size_t>(rows), kNegInf);
    std::vector<std::vector<int64_t>> next_history(static_cast<size_t>(rows));
    bool all_done = true;
    for (int64_t b = 0; b < batch; ++b) {
      int64_t live = 0;
      if (!done[static_cast<size_t>(b)]) {
        auto& fin = finished[static_cast<size_t>(b)];
        for (int64_t j = 0; j < n && live < k; ++j) {
          const double value = v[b * n + j];
          if (!std::isfinite(value)) break;  // continuations of dead slots (first step, tiny vocabularies)
          const int64_t slot = b * k + ix[b * n + j] / vocab, token = ix[b * n + j] % vocab;
          const auto& prefix = history[static_cast<size_t>(slot)];
          if (token == eos_id) {
            if (j < k) {  // fairseq: an <eos> among the best k finishes a hypothesis
              const auto len = static_cast<int64_t>(prefix.size()) + 1;
              fin.push_back({prefix, true, value, value / gnmt_length_penalty(len, options.length_penalty)});
            }
            continue;
          }
          const auto dst = static_cast<size_t>(b * k + live);
          next_slot[dst] = slot;
          next_tok[dst] = token;
          next_cum[dst] = value;
          next_history[dst] = prefix;
          next_history[dst].push_back(token);
          ++live;
        }
        if (last) {  // out of steps: the live hypotheses end as they are
          for (int64_t s = 0; s < live; ++s) {
            const auto& h = next_history[static_cast<size_t>(b * k + s)];
            const double value = next_cum[static_cast<size_t>(b * k + s)];
            fin.push_back({h, false, value,
                           value / gnmt_length_penalty(static_cast<int64_t>(h.size()), options.length_penalty)});
          }
        }
        if (static_cast<int64_t>(fin.size()) >= k || live == 0) done[static_cast<size_t>(b)] = true;
      }
      for (int64_t s = live; s < k; ++s) next_slot[static_cast<size_t>(b * k + s)] = b * k;  // dead slots
      all_done = all_done && done[static_cast<size_t>(b)];
    }
    if (all_done || last) break;
    decoder.reorder(torch::tensor(next_slot, torch::kLong).to(device));
    tokens = torch::tensor(next_tok, torch::kLong).to(device).view({rows, 1});  // [B * k, 1]
    cum = std::move(next_cum);
    history = std::move(next_history);
  }

  BeamOutput result;
  result.ids = torch::full({batch, options.max_steps}, eos_id, torch::kLong);  // [B, max_steps]
  result.lengths = torch::zeros({batch}, torch::kLong);
  result.log_prob = torch::full({batch}, kNegInf, torch::kDouble);
  result.score = torch::full({batch}, kNegInf, torch::kDouble);
  auto ids = result.ids.accessor<int64_t, 2>();
  for (int64_t b = 0; b < batch; ++b) {
    const auto& fin = finished[static_cast<size_t>(b)];
    if (fin.empty()) continue;
    const Hypothesis* best = &fin.front();
    for (const auto& h : fin) {
      if (h.score > best->score) best = &h;
    }
    for (size_t i = 0; i < best->tokens.size(); ++i) ids[b][static_cast<int64_t>(i)] = best->tokens[i];
    result.lengths[b] = static_cast<int64_t>(best->tokens.size());
    result.log_prob[b] = best->log_prob;
    result.score[b] = best->score;
  }
  result.ids = result.ids.to(device);
  return result;
}

}  // namespace attnlab::train
