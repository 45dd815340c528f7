#include <attnlab/train/decode.hpp>

#include <attnlab/train/eval_scope.hpp>

#include "train/step_decoder.hpp"

#include <torch/utils.h>

namespace attnlab::train {

torch::Tensor greedy_decode(nn::EncoderDecoder& model, const torch::Tensor& src, const torch::Tensor& src_valid_lens,
                            int64_t bos_id, int64_t num_steps, int64_t stop_at_eos) {
  EvalScope eval(*model);
  torch::InferenceMode guard;
  auto enc = model->encode(src, src_valid_lens);  // states [B, S, H]
  auto state = model->init_state(enc, /*incremental=*/true);
  const int64_t batch = src.size(0);
  auto step_in = torch::full({batch, 1}, bos_id, torch::dtype(torch::kLong).device(src.device()));  // [B, 1]
  std::vector<torch::Tensor> outputs;                                                               // each [B, 1]
  const bool early_stop = stop_at_eos >= 0 && nn::active_recorder() == nullptr;
  auto ended = torch::zeros({batch, 1}, torch::dtype(torch::kBool).device(src.device()));  // [B, 1]
  for (int64_t t = 0; t < num_steps; ++t) {
    auto logits = model->decode(step_in, *state);  // [B, 1, V]; step t's attention appended to the recorder
    step_in = logits.argmax(2);                    // [B, 1]
    outputs.push_back(step_in);
    if (early_stop) {
      ended.logical_or_(step_in == stop_at_eos);
      if (ended.all().item<bool>()) break;
    }
  }
  return torch::cat(outputs, 1);  // [B, num_steps]
}

torch::Tensor greedy_decode(const std::vector<nn::EncoderDecoder>& models, const torch::Tensor& src,
                            const torch::Tensor& src_valid_lens, int64_t bos_id, int64_t num_steps,
                            int64_t stop_at_eos) {
  if (models.size() == 1) {
    auto model = models.front();
    return greedy_decode(model, src, src_valid_lens, bos_id, num_steps, stop_at_eos);
  }
  torch::InferenceMode guard;
  nn::RecordingScope paused(nullptr);  // several models' maps for one sentence: none is recorded
  StepDecoder decoder(models, src, src_valid_lens);
  const int64_t batch = src.size(0);
  auto step_in = torch::full({batch, 1}, bos_id, torch::dtype(torch::kLong).device(src.device()));  // [B, 1]
  std::vector<torch::Tensor> outputs;                                                               // each [B, 1]
  auto ended = torch::zeros({batch, 1}, torch::dtype(torch::kBool).device(src.device()));  // [B, 1]
  for (int64_t t = 0; t < num_steps; ++t) {
    step_in = decoder.log_probs(step_in).argmax(1, /*keepdim=*/true);  // [B, 1]
    outputs.push_back(step_in);
    if (stop_at_eos >= 0) {
      ended.logical_or_(step_in == stop_at_eos);
      if (ended.all().item<bool>()) break;
    }
  }
  return torch::cat(outputs, 1);  // [B, steps]
}

std::vector<int64_t> until_eos(const torch::Tensor& row, int64_t eos_id) {
  auto cpu = row.to(torch::kCPU, torch::kLong).contiguous();
  std::vector<int64_t> ids;
  const int64_t* p = cpu.data_ptr<int64_t>();
  for (int64_t i = 0; i < cpu.numel() && p[i] != eos_id; ++i) ids.push_back(p[i]);
  return ids;
}

}  // namespace attnlab::train
