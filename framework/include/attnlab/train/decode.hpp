#pragma once
// Greedy decoding over any encoder + decoder (d2l's predict_step).
#include <attnlab/nn/encoder_decoder.hpp>

#include <cstdint>
#include <vector>

namespace attnlab::train {

/// src [B, S] ids, src_valid_lens [B]; runs num_steps decoder steps starting from <bos>, feeding
/// back the argmax, in eval mode under InferenceMode (restores the previous train/eval mode).
/// -> ids [B, num_steps] (every step, as d2l).
/// With stop_at_eos >= 0 it stops once every row has produced that id (one host read per step),
/// so ids may have fewer than num_steps columns; the tokens up to each row's <eos> are the same
/// either way. While a recorder is active (nn::RecordingScope) it runs every step, and the
/// recorder ends up with kEncoderSelf [layers, B, heads, S, S], kDecoderSelf
/// [layers, B, heads, steps, steps] (keys zero-filled past each step, as d2l) and kDecoderCross
/// [layers, B, heads, steps, S], one query row per step.
torch::Tensor greedy_decode(nn::EncoderDecoder& model, const torch::Tensor& src, const torch::Tensor& src_valid_lens,
                            int64_t bos_id, int64_t num_steps, int64_t stop_at_eos = -1);

/// Greedy decoding with an ensemble (`runner eval --ensemble`): each step feeds back the argmax of
/// the mean of the models' next-token probabilities (see beam_search's ensemble overload). One
/// model is exactly the overload above; an ensemble records no attention (an active recorder is
/// paused: whose maps would they be?). ids [B, steps] as above.
torch::Tensor greedy_decode(const std::vector<nn::EncoderDecoder>& models, const torch::Tensor& src,
                            const torch::Tensor& src_valid_lens, int64_t bos_id, int64_t num_steps,
                            int64_t stop_at_eos = -1);

/// Ids of one row up to (not including) eos.
std::vector<int64_t> until_eos(const torch::Tensor& row, int64_t eos_id);

}  // namespace attnlab::train
