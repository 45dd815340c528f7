// Decoder-only transformer language model, and the causality check of any language model.
#include <attnlab/error.hpp>
#include <attnlab/nn/transformer_lm.hpp>

#include <torch/torch.h>

namespace attnlab::nn {

LanguageModel::~LanguageModel() = default;

void check_causal(LanguageModel& model, torch::Device device, const std::string& who) {
  const int64_t vocab = model.vocab_size();
  const int64_t len = model.max_positions() > 0 ? std::min<int64_t>(model.max_positions(), 6) : 6;
  if (vocab < 2 || len < 2) return;  // nothing to change
  const bool training = model.is_training();
  model.eval();
  torch::Tensor before, after;
  {
    torch::NoGradGuard no_grad;
    auto tokens = torch::arange(len, torch::kLong).remainder(vocab).reshape({1, len}).to(device);  // [1, T]
    before = model.forward(tokens).to(torch::kCPU, torch::kDouble);                              // [1, T, V]
    auto changed = tokens.clone();
    changed.index_put_({0, len - 1}, (tokens.index({0, len - 1}) + 1).remainder(vocab));
    after = model.forward(changed).to(torch::kCPU, torch::kDouble);  // [1, T, V]
  }
  model.train(training);
  const auto earlier = [&](const torch::Tensor& t) { return t.narrow(1, 0, len - 1); };
  const double diff = (earlier(before) - earlier(after)).abs().max().item<double>();
  ATTNLAB_CHECK(diff <= 1e-5 * (1.0 + earlier(before).abs().max().item<double>()), ConfigError,
                "{}: the model is not causal: changing token {} changes the logits of the positions before it "
                "(by up to {:.3g}); its self-attention scorer must honour causal masking (per-query valid lengths)",
                who, len - 1, diff);
}

TransformerLMImpl::TransformerLMImpl(TransformerOptions options, const ScorerFactory& make_scorer) {
  options.cross_attention(false);
  decoder = register_module("decoder", TransformerDecoder(options, make_scorer));
}

torch::Tensor TransformerLMImpl::forward(const torch::Tensor& tokens) {
  TORCH_CHECK(tokens.dim() == 2, "TransformerLM: expected tokens [B, T], found ", tokens.sizes());
  auto state = decoder->init_state(EncoderOutput{}, /*incremental=*/false);
  return decoder->forward(tokens, *state);  // [B, T, V]
}

std::unique_ptr<DecoderState> TransformerLMImpl::init_state() {
  return decoder->init_state(EncoderOutput{}, /*incremental=*/true);
}

torch::Tensor TransformerLMImpl::step(const torch::Tensor& tokens, DecoderState& state) {
  TORCH_CHECK(tokens.dim() == 2, "TransformerLM: expected tokens [B, T], found ", tokens.sizes());
  TORCH_CHECK(state.incremental, "TransformerLM: step needs a state from init_state()");
  return decoder->forward(tokens, state);  // [B, T, V]
}

int64_t TransformerLMImpl::max_positions() const {
  return decoder->pos_encoding->kind() == AbsolutePositions::None ? 0 : decoder->options.max_len();
}

}  // namespace attnlab::nn
