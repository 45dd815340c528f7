// Text generation with a decoder-only language model.
#include <attnlab/train/generate.hpp>

#include <attnlab/nn/transformer.hpp>
#include <attnlab/results/tensor.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <limits>

namespace attnlab::train {

int64_t pick_token(const torch::Tensor& logits, const GenerateOptions& o, at::Generator& gen) {
  TORCH_CHECK(logits.dim() == 1 && logits.size(0) >= 1, "generate: expected logits [V], found ", logits.sizes());
  auto l = logits.to(torch::kCPU, torch::kDouble);  // [V]
  if (o.temperature <= 0) return l.argmax().item<int64_t>();
  l = l / o.temperature;
  const int64_t vocab = l.size(0);
  if (o.top_k > 0 && o.top_k < vocab) {
    const auto kth = std::get<0>(l.topk(o.top_k)).min();  // the k-th largest logit
    l = l.masked_fill(l < kth, -std::numeric_limits<double>::infinity());
  }
  if (o.top_p < 1.0) {
    auto [sorted, order] = l.sort(/*dim=*/0, /*descending=*/true);  // [V]
    const auto cumulative = sorted.softmax(0).cumsum(0);            // [V]
    // Drop a token when the ones before it already reach p: the most likely one always stays.
    auto drop = (cumulative - sorted.softmax(0)) >= o.top_p;  // [V] in sorted order
    l = l.index_fill(0, order.masked_select(drop), -std::numeric_limits<double>::infinity());
  }
  const auto probs = l.softmax(0);  // [V]
  return torch::multinomial(probs, 1, /*replacement=*/false, gen).item<int64_t>();
}

Generation generate(nn::LanguageModel& model, const std::vector<int64_t>& prompt, const GenerateOptions& o,
                    torch::Device device) {
  TORCH_CHECK(!prompt.empty(), "generate: the prompt has no tokens");
  TORCH_CHECK(o.tokens >= 1, "generate: tokens must be >= 1, found ", o.tokens);
  const bool training = model.is_training();
  model.eval();
  torch::InferenceMode inference;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  Generation g;
  g.ids = prompt;
  g.prompt_tokens = static_cast<int64_t>(prompt.size());
  const auto start = std::chrono::steady_clock::now();
  const auto as_tensor = [&](const std::vector<int64_t>& ids) {
    return torch::tensor(ids, torch::kLong).reshape({1, -1}).to(device);  // [1, T]
  };
  std::unique_ptr<nn::DecoderState> state;
  torch::Tensor logits;  // [1, T, V] of the last pass
  if (o.cache) {
    state = model.init_state();
    logits = model.step(as_tensor(prompt), *state);
  } else {
    logits = model.forward(as_tensor(prompt));
  }
  for (int64_t i = 0; i < o.tokens; ++i) {
    const int64_t next = pick_token(logits[0][logits.size(1) - 1], o, gen);
    g.ids.push_back(next);
    if (i + 1 == o.tokens) break;
    logits = o.cache ? model.step(as_tensor({next}), *state) : model.forward(as_tensor(g.ids));
  }
  g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  g.cache = "none";
  if (auto* st = dynamic_cast<nn::TransformerDecoderState*>(state.get())) {
    g.cache_bytes = st->cache_bytes();
    const bool recurrent =
        std::any_of(st->self_kv.begin(), st->self_kv.end(), [](const nn::KeyValues& kv) { return !kv.recurrent.empty(); });
    g.cache = recurrent ? "recurrent" : (st->kv_cache ? "kv" : "inputs");
  } else if (state) {
    g.cache = "model";
  }
  model.train(training);
  return g;
}

void write_generation(results::Results& out, const std::string& name, const Generation& g, const GenerateOptions& o,
                      const GenerationTexts& texts, const std::string& checkpoint, torch::Device device) {
  const std::string at = "generations/" + name;
  out.remove(at);
  const std::vector<int64_t> prompt_ids(g.ids.begin(), g.ids.begin() + g.prompt_tokens);
  out.write_array(at + "/prompt_ids", results::to_int_array(torch::tensor(prompt_ids, torch::kLong)));
  out.write_array(at + "/ids", results::to_int_array(torch::tensor(g.ids, torch::kLong)));
  out.set_attr_at(at, "prompt", texts.prompt);
  out.set_attr_at(at, "continuation", texts.continuation);
  out.set_attr_at(at, "text", texts.text);
  out.set_attr_at(at, "tokens", o.tokens);
  out.set_attr_at(at, "temperature", o.temperature);
  out.set_attr_at(at, "decoding", std::string(o.temperature == 0 ? "greedy" : "sampled"));
  out.set_attr_at(at, "top_k", o.top_k);
  out.set_attr_at(at, "top_p", o.top_p);
  out.set_attr_at(at, "seed", static_cast<int64_t>(o.seed));
  out.set_attr_at(at, "checkpoint", checkpoint);
  out.set_attr_at(at, "cache", g.cache);
  out.set_attr_at(at, "cache_bytes", g.cache_bytes);
  out.set_attr_at(at, "seconds", g.seconds);
  out.set_attr_at(at, "tokens_per_s", static_cast<double>(o.tokens) / std::max(g.seconds, 1e-9));
  out.set_attr_at(at, "device", device.str());
}

}  // namespace attnlab::train
