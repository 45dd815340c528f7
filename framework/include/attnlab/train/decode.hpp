#pragma once
// Greedy decoding over any encoder + decoder (d2l's predict_step), with attention recording.
#include <attnlab/nn/encoder_decoder.hpp>

#include <cstdint>
#include <vector>

namespace attnlab::train {

struct GreedyOutput {
  torch::Tensor ids;  // [B, num_steps] predicted target ids (every step, as d2l)
  /// When recording: "encoder_self" [layers, B, heads, S, S]; "decoder_self"
  /// [layers, B, heads, steps, steps] (keys zero-filled past each step, as d2l); "decoder_cross"
  /// [layers, B, heads, steps, S].
  nn::AttentionMap attention;
};

/// src [B, S] ids, src_valid_lens [B]; runs num_steps decoder steps starting from <bos>, feeding
/// back the argmax, in eval mode under InferenceMode (restores the previous train/eval mode).
/// With stop_at_eos >= 0 (and no attention recorded) it stops once every row has produced that id
/// (one host read per step), so ids may have fewer than num_steps columns; the tokens up to each
/// row's <eos> are the same either way.
GreedyOutput greedy_decode(nn::EncoderDecoder& model, const torch::Tensor& src, const torch::Tensor& src_valid_lens,
                           int64_t bos_id, int64_t num_steps, bool record_attention, int64_t stop_at_eos = -1);

/// Ids of one row up to (not including) eos.
std::vector<int64_t> until_eos(const torch::Tensor& row, int64_t eos_id);

}  // namespace attnlab::train
