// StreamingLLM's evaluation: a KV cache that keeps the first tokens and a window (train/streaming.hpp).
#include "train/streaming.hpp"

#include <attnlab/error.hpp>
#include <attnlab/nn/transformer.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <vector>

namespace attnlab::train {

torch::Tensor streaming_logits(nn::LanguageModel& lm, const torch::Tensor& tokens, int64_t window, int64_t sinks,
                               const std::string& who) {
  TORCH_CHECK(tokens.dim() == 2, "streaming_logits: expected tokens [B, T], found ", tokens.sizes());
  TORCH_CHECK(window >= 1 && sinks >= 0, "streaming_logits: expected window >= 1 and sinks >= 0, found ", window,
              " and ", sinks);
  auto state = lm.init_state();
  auto* st = dynamic_cast<nn::TransformerDecoderState*>(state.get());
  ATTNLAB_CHECK(st != nullptr && st->kv_cache, ConfigError,
                "{}: the model does not decode with the framework's transformer KV cache, whose positions a window "
                "evicts (the gpt model plugin does)",
                who);
  const int64_t T = tokens.size(1), keep = sinks + window, kept = keep - 1;
  // The first `keep` tokens see every earlier one: they go in at once.
  std::vector<torch::Tensor> logits{lm.step(tokens.narrow(1, 0, std::min(keep, T)), *state)};  // [B, t, V]
  const auto evict = [&](const torch::Tensor& t) {  // [B, kv_heads, keep, d] -> [B, kv_heads, keep - 1, d]
    return torch::cat({t.narrow(2, 0, sinks), t.narrow(2, t.size(2) - (window - 1), window - 1)}, 2);
  };
  for (int64_t t = keep; t < T; ++t) {
    for (auto& kv : st->self_kv) {
      ATTNLAB_CHECK(kv.recurrent.empty(), ConfigError,
                    "{}: the model's attention keeps a recurrent state (linear attention), not keys and values a "
                    "window could evict; it sees every earlier token through that state",
                    who);
      if (kv.keys.size(2) > kept) kv = nn::KeyValues{evict(kv.keys), evict(kv.values)};
    }
    st->steps = kept;
    logits.push_back(lm.step(tokens.narrow(1, t, 1), *state));  // [B, 1, V]
  }
  return torch::cat(logits, 1);  // [B, T, V]
}

torch::Tensor recomputed_window_logits(nn::LanguageModel& lm, const torch::Tensor& tokens, int64_t window,
                                       int64_t max_logits) {
  TORCH_CHECK(tokens.dim() == 2, "recomputed_window_logits: expected tokens [B, T], found ", tokens.sizes());
  TORCH_CHECK(window >= 1, "recomputed_window_logits: expected window >= 1, found ", window);
  const int64_t B = tokens.size(0), T = tokens.size(1);
  // Positions 0 ... window - 1 see their whole prefix: one forward of the first window gives them.
  const auto head = lm.forward(tokens.narrow(1, 0, std::min(window, T)));  // [B, min(W, T), V]
  if (T <= window) return head;
  const int64_t V = head.size(2);
  // Position t >= window: the window ending at t, i.e. starting at s = t - window + 1 = 1 ... T - window.
  const auto windows = tokens.unfold(1, window, 1).narrow(1, 1, T - window).reshape({-1, window});  // [B (T-W), W]
  const int64_t rows = windows.size(0), chunk = std::max<int64_t>(1, max_logits / (window * V));
  std::vector<torch::Tensor> last;
  for (int64_t r = 0; r < rows; r += chunk) {
    const auto block = windows.narrow(0, r, std::min(chunk, rows - r)).contiguous();
    last.push_back(lm.forward(block).select(1, window - 1));  // [n, V]: the window's newest token
  }
  return torch::cat({head, torch::cat(last, 0).view({B, T - window, V})}, 1);  // [B, T, V]
}

}  // namespace attnlab::train
