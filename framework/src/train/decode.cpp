#include <attnlab/train/decode.hpp>

#include <attnlab/train/eval_scope.hpp>

#include <torch/torch.h>

namespace attnlab::train {

GreedyOutput greedy_decode(nn::EncoderDecoder& model, const torch::Tensor& src, const torch::Tensor& src_valid_lens,
                           int64_t bos_id, int64_t num_steps, bool record_attention, int64_t stop_at_eos) {
  EvalScope eval(*model);
  torch::InferenceMode guard;
  model->set_recording(record_attention);
  GreedyOutput out;
  auto enc = model->encode(src, src_valid_lens);  // states [B, S, H]
  if (record_attention) {
    for (auto& [name, w] : model->encoder().attention()) out.attention[name] = w;
  }
  auto state = model->init_state(enc, /*incremental=*/true);
  const int64_t batch = src.size(0);
  auto step_in = torch::full({batch, 1}, bos_id, torch::dtype(torch::kLong).device(src.device()));  // [B, 1]
  std::vector<torch::Tensor> outputs;                      // each [B, 1]
  std::vector<torch::Tensor> self_steps, cross_steps;      // each [layers, B, heads, 1, keys]
  const bool early_stop = stop_at_eos >= 0 && !record_attention;
  auto ended = torch::zeros({batch, 1}, torch::dtype(torch::kBool).device(src.device()));  // [B, 1]
  for (int64_t t = 0; t < num_steps; ++t) {
    auto logits = model->decode(step_in, *state);  // [B, 1, V]
    step_in = logits.argmax(2);                    // [B, 1]
    outputs.push_back(step_in);
    if (early_stop) {
      ended.logical_or_(step_in == stop_at_eos);
      if (ended.all().item<bool>()) break;
    }
    if (record_attention) {
      auto att = model->decoder().attention();
      if (auto it = att.find("decoder_self"); it != att.end()) {
        auto w = it->second;  // [layers, B, heads, 1, t + 1]
        self_steps.push_back(torch::constant_pad_nd(w, {0, num_steps - w.size(-1)}));
      }
      if (auto it = att.find("decoder_cross"); it != att.end()) cross_steps.push_back(it->second);
    }
  }
  model->set_recording(false);
  out.ids = torch::cat(outputs, 1);  // [B, num_steps]
  if (!self_steps.empty()) out.attention["decoder_self"] = torch::cat(self_steps, 3);
  if (!cross_steps.empty()) out.attention["decoder_cross"] = torch::cat(cross_steps, 3);
  return out;
}

std::vector<int64_t> until_eos(const torch::Tensor& row, int64_t eos_id) {
  auto cpu = row.to(torch::kCPU, torch::kLong).contiguous();
  std::vector<int64_t> ids;
  const int64_t* p = cpu.data_ptr<int64_t>();
  for (int64_t i = 0; i < cpu.numel() && p[i] != eos_id; ++i) ids.push_back(p[i]);
  return ids;
}

}  // namespace attnlab::train
