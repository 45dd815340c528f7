#pragma once
// Text generation with a decoder-only language model (nn::LanguageModel): greedy or sampled (with
// temperature, top-k and nucleus / top-p truncation), seeded, with the model's KV cache (or a
// linear scorer's recurrent state) or by recomputing the whole prefix at every step (the reference
// the cache is tested and benchmarked against).
#include <attnlab/nn/language_model.hpp>
#include <attnlab/results/results.hpp>

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attnlab::train {

struct GenerateOptions {
  int64_t tokens = 100;      // new tokens after the prompt (>= 1)
  double temperature = 1.0;  // 0 = greedy (the argmax); else logits / temperature
  int64_t top_k = 0;         // sample among the k most likely tokens only; 0 = all
  double top_p = 1.0;        // nucleus: the fewest most likely tokens whose probability reaches p; 1 = all
  uint64_t seed = 0;         // the sampler's own CPU generator: the same tokens on every device
  bool cache = true;         // false: every step runs the model on the whole sequence so far
};

struct Generation {
  std::vector<int64_t> ids;  // the prompt, then the generated tokens
  int64_t prompt_tokens = 0;
  double seconds = 0.0;      // generation alone (the prompt's pass included)
  std::string cache;         // "kv", "recurrent" (linear attention) or "none"
  int64_t cache_bytes = 0;   // what the state held at the end (per sequence)
};

/// The next token from the last position's `logits` [V] (any device) with `o`'s sampler; `gen` is
/// the CPU generator the caller keeps across steps.
int64_t pick_token(const torch::Tensor& logits, const GenerateOptions& o, at::Generator& gen);

/// Generates o.tokens tokens after `prompt` (non-empty ids) on `device`, in eval mode without
/// gradients (the model's mode is restored). Stops early at nothing: a language model over a text
/// has no end token.
Generation generate(nn::LanguageModel& model, const std::vector<int64_t>& prompt, const GenerateOptions& o,
                    torch::Device device);

/// The texts a generation is stored with, as the dataset writes them (data::LanguageModelData).
struct GenerationTexts {
  std::string prompt;        // as given
  std::string continuation;  // the generated tokens decoded
  std::string text;          // prompt and continuation decoded together
};

/// Writes /generations/<name> (docs/RESULTS.md), replacing a group of that name: prompt_ids, ids,
/// the texts, the options (tokens, temperature, decoding, top_k, top_p, seed), checkpoint (what
/// weights: "best", ..., or "final" for the weights a trainer holds), cache, cache_bytes, seconds,
/// tokens_per_s and device.
void write_generation(results::Results& out, const std::string& name, const Generation& g, const GenerateOptions& o,
                      const GenerationTexts& texts, const std::string& checkpoint, torch::Device device);

}  // namespace attnlab::train
