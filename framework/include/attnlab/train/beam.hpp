#pragma once
// Batched beam search over any encoder + decoder whose DecoderState implements reorder().
//
// Each source row keeps `beam_size` live hypotheses. Every step scores all beam_size * V
// continuations by their summed log-probability (double precision), takes the best 2 * beam_size,
// moves those that end in <eos> among the first beam_size into the row's finished list (fairseq's
// rule), and keeps the best beam_size others live. A row is done once it has beam_size finished
// hypotheses; at max_steps every live hypothesis is finished as it is (without <eos>). The answer
// is the finished hypothesis with the highest length-normalised score (GNMT, Wu et al. 2016):
//
//     score(Y) = log P(Y | X) / lp(Y),   lp(Y) = ((5 + |Y|) / 6) ^ length_penalty
//
// where |Y| counts the generated tokens including <eos>. length_penalty 0 ranks by log P alone;
// larger values favour longer outputs. The normalisation only picks among finished hypotheses:
// pruning always uses the raw log P, so beam_size 1 is exactly greedy decoding (until <eos>).
#include <attnlab/nn/encoder_decoder.hpp>

#include <cstdint>
#include <vector>

namespace attnlab::train {

struct BeamOptions {
  int64_t beam_size = 4;
  double length_penalty = 0.0;  // GNMT alpha (0 = none; 0.6 in GNMT; fairseq's lenpen differs, see above)
  int64_t max_steps = 0;        // tokens generated at most (required, >= 1)
};

struct BeamOutput {
  torch::Tensor ids;       // [B, max_steps] best hypothesis per row, <eos> where it ended, then <eos> padding
  torch::Tensor lengths;   // [B] tokens of the best hypothesis before <eos>
  torch::Tensor log_prob;  // [B] double: log P(best hypothesis) including its <eos> when it has one
  torch::Tensor score;     // [B] double: log_prob / lp (what picked it)
};

/// src [B, S] ids, src_valid_lens [B]. Runs in eval mode under InferenceMode (restores the
/// module's mode), recording no attention (an active recorder is paused: its rows would follow
/// the beams, not the sentences). PluginError when the decoder's state cannot reorder (no beam
/// support).
BeamOutput beam_search(nn::EncoderDecoder& model, const torch::Tensor& src, const torch::Tensor& src_valid_lens,
                       int64_t bos_id, int64_t eos_id, const BeamOptions& options);

/// The same with an ensemble (`runner eval --ensemble`): every model of `models` encodes `src`
/// and keeps its own state, and each step scores continuations by the log of the mean of the
/// models' next-token probabilities (fairseq's ensemble). One model is exactly the overload above.
/// The models must share the target vocabulary (PluginError naming the sizes when they differ).
BeamOutput beam_search(const std::vector<nn::EncoderDecoder>& models, const torch::Tensor& src,
                       const torch::Tensor& src_valid_lens, int64_t bos_id, int64_t eos_id,
                       const BeamOptions& options);

/// GNMT length penalty ((5 + length) / 6) ^ alpha.
double gnmt_length_penalty(int64_t length, double alpha);

}  // namespace attnlab::train
