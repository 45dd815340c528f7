#pragma once
// After training: translate the experiment's samples, score them, record their attention.
#include <attnlab/config/node.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/results/results.hpp>

#include <atomic>
#include <optional>
#include <string>
#include <vector>

namespace attnlab::run {

struct EvalSpec {
  struct Pair {
    std::string src, ref;
  };
  std::vector<Pair> samples;
  std::vector<std::string> attention;  // sources whose attention is recorded
  int64_t bleu_k = 2;
  int64_t num_steps = 0;  // 0 = the dataset's num_steps
  /// `split: test`: after training, translate that whole split with the best checkpoint (greedy,
  /// or beam search when beam_size > 1) and record /eval/<split>[_beam<N>] (as `runner eval`);
  /// none by default.
  std::optional<data::Split> split;
  int64_t beam_size = 1;
  double length_penalty = 0.6;
};

/// Validates the `evaluate:` node (unknown keys, types, attention sources that are not samples);
/// its options are declared once, in evaluate.cpp's binding.
EvalSpec parse_evaluate(const config::Node& node);

/// Greedy-translates the samples, writes /samples and /attention, prints d2l-style lines
/// ("go . => va !, bleu,1.000") and the mean BLEU.
void evaluate(const EvalSpec& spec, nn::EncoderDecoder& model, const data::Dataset& dataset,
              results::Results& results, bool quiet);

/// The `split:` part of the spec (nothing when it is empty): loads `checkpoint` into the model
/// when that file exists, translates, scores (sacreBLEU-exact) and writes /eval.
void evaluate_split(const EvalSpec& spec, nn::EncoderDecoder& model, const data::Dataset& dataset,
                    results::Results& results, const std::string& checkpoint, bool quiet,
                    const std::atomic<bool>* stop = nullptr);

}  // namespace attnlab::run
