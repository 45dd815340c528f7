#pragma once
// Incremental decoding with one model or an ensemble of several (`runner eval --ensemble`): what
// greedy decoding and beam search share.
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/train/eval_scope.hpp>

#include <list>
#include <memory>
#include <vector>

namespace attnlab::train {

/// Encodes a batch with every model of `models` (one, or an ensemble's members), keeps each
/// model's incremental DecoderState, and gives each step's next-token log-probabilities: a lone
/// model's own (log_softmax of its logits, or the log of its probabilities when the decoder
/// outputs probabilities), an ensemble's the log of the mean of its members' probabilities
/// (fairseq's and Marian's ensemble: an equal-weight mixture, not a product of experts). The
/// models stay in eval mode for the object's lifetime. ConfigError when `models` is empty;
/// PluginError naming the members when their vocabularies differ in size.
class StepDecoder {
 public:
  StepDecoder(const std::vector<nn::EncoderDecoder>& models, const torch::Tensor& src,
              const torch::Tensor& src_valid_lens);

  /// tokens [R, 1] fed to every model -> log P(next token) [R, V], double.
  torch::Tensor log_probs(const torch::Tensor& tokens);
  /// DecoderState::reorder on every model's state: keep or repeat rows `indices` [N].
  void reorder(const torch::Tensor& indices);

 private:
  std::vector<nn::EncoderDecoder> models_;
  std::list<EvalScope> eval_;  // one per model (EvalScope does not move)
  std::vector<std::unique_ptr<nn::DecoderState>> states_;
};

}  // namespace attnlab::train
