// Decoding speed of the Transformer decoder with the KV cache and with d2l's recomputation, and
// what the cache holds per token for multi-head, grouped-query and multi-query attention; for each
// scorer asked for (--scorers): dot_product (the framework's) and linear (the plugin, made by the
// registry as the runner makes it), whose decoder keeps a fixed-size recurrent state instead of
// keys and values.
// bench/decode runs it; see bench/README.md ("Decoding: the KV cache"). Random weights of the
// Multi30K model's shape (3+3 blocks, width 256, FFN 512, 8 heads, 8000 tokens): the time of a
// step does not depend on the values. Every row decodes exactly `length` steps greedily (no
// <eos> stop), so tokens/s = batch * length / seconds.
// --suite gpt: text generation with a decoder-only language model (nn::TransformerLM as the gpt
// plugin builds it, random GPT-2-initialised weights) through train::generate, what `runner
// generate` calls: with the KV cache, and with --no-cache's recomputation of the whole sequence at
// every step; batch 1, greedy, `length` new tokens after a random prompt of each --prompts length.
#include <attnlab/config/node.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/transformer.hpp>
#include <attnlab/nn/transformer_lm.hpp>
#include <attnlab/plugin/registry.hpp>
#include <attnlab/train/decode.hpp>
#include <attnlab/train/generate.hpp>

#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace attnlab;

std::vector<std::string> name_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

std::vector<int64_t> int_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

struct Args {
  std::string suite = "seq2seq";  // seq2seq (the Transformer decoder's caches) or gpt (runner generate's)
  bool lengths_given = false;
  std::vector<int64_t> prompts{16};  // gpt: prompt lengths
  std::vector<int64_t> lengths{16, 32, 64, 128, 256};
  std::vector<int64_t> batches{1, 32};
  std::vector<int64_t> kv_heads{8, 2, 1};
  std::vector<std::string> scorers{"dot_product", "linear"};
  int64_t source_length = 24, reps = 3, threads = 1;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--lengths") {
      a.lengths = int_list(value);
      a.lengths_given = true;
    } else if (flag == "--suite") {
      a.suite = value;
    } else if (flag == "--prompts") {
      a.prompts = int_list(value);
    } else if (flag == "--batches") {
      a.batches = int_list(value);
    } else if (flag == "--kv-heads") {
      a.kv_heads = int_list(value);
    } else if (flag == "--scorers") {
      a.scorers = name_list(value);
    } else if (flag == "--source-length") {
      a.source_length = std::stoll(value);
    } else if (flag == "--reps") {
      a.reps = std::stoll(value);
    } else if (flag == "--threads") {
      a.threads = std::stoll(value);
    } else {
      std::fprintf(stderr, "decode_bench: unknown option %s\n", flag.c_str());
      std::exit(2);
    }
  }
  if (argc % 2 == 0 || (a.suite != "seq2seq" && a.suite != "gpt")) {
    std::fprintf(stderr,
                 "usage: decode_bench [--suite seq2seq|gpt] [--lengths 16,32] [--batches 1,32] [--kv-heads 8,2,1] "
                 "[--scorers dot_product,linear] [--source-length 24] [--prompts 16,256] [--reps 3] [--threads 1]\n");
    std::exit(2);
  }
  if (a.suite == "gpt" && !a.lengths_given) a.lengths = {16, 64, 256};
  return a;
}

/// The scorer `name` for every attention module: dot_product is the framework's; any other is a
/// plugin, made by the registry (ATTNLAB_PLUGIN_PATH, which bench/decode/run points at the build).
nn::ScorerFactory scorer_factory(const std::string& name) {
  if (name == "dot_product") {
    return [](const nn::ScorerContext&) { return std::make_shared<nn::DotProductScorerImpl>(); };
  }
  static plugin::Registry* registry = [] {
    auto* r = new plugin::Registry();  // kept to the end: the plugins' code must outlive their objects
    r->discover();
    return r;
  }();
  const auto node = config::parse_yaml("scorer: " + name, "--scorers").at("scorer");
  return [node](const nn::ScorerContext& sc) {
    plugin::BuildContext ctx;
    ctx.registry = registry;
    return registry->create<nn::Scorer>(node, ctx, sc);
  };
}

nn::EncoderDecoder model(const std::string& scorer, bool kv_cache, int64_t kv_heads, int64_t max_len) {
  torch::manual_seed(0);
  const auto make = scorer_factory(scorer);
  auto o = nn::TransformerOptions(8000, 256, 512, 8, 3)
               .kv_heads(kv_heads)
               .kv_cache(kv_cache)
               .max_len(max_len)
               .init(nn::TransformerInit::GlorotUniform);
  auto m = nn::EncoderDecoder(std::make_shared<nn::TransformerEncoderImpl>(o, make),
                              std::make_shared<nn::TransformerDecoderImpl>(o, make));
  m->eval();
  return m;
}

/// Median seconds of `reps` greedy decodings of `length` steps.
double seconds(nn::EncoderDecoder& m, const torch::Tensor& src, const torch::Tensor& lens, int64_t length,
               int64_t reps) {
  std::vector<double> times;
  train::greedy_decode(m, src, lens, /*bos_id=*/1, std::min<int64_t>(length, 4));  // warm-up
  for (int64_t r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    train::greedy_decode(m, src, lens, /*bos_id=*/1, length);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// Bytes the decoder's caches hold after `steps` steps of a batch of one: (self, cross).
std::pair<int64_t, int64_t> cache_bytes(nn::EncoderDecoder& m, int64_t source_length, int64_t steps) {
  torch::InferenceMode guard;
  auto src = torch::randint(3, 8000, {1, source_length}, torch::kLong);
  auto enc = m->encode(src, torch::tensor({source_length}));
  auto state = m->init_state(enc, true);
  auto tok = torch::ones({1, 1}, torch::kLong);
  m->decode(tok, *state);
  const int64_t after_one = dynamic_cast<nn::TransformerDecoderState&>(*state).cache_bytes();
  for (int64_t t = 1; t < steps; ++t) m->decode(tok, *state);
  const int64_t after = dynamic_cast<nn::TransformerDecoderState&>(*state).cache_bytes();
  const int64_t per_token = (after - after_one) / (steps - 1);
  return {per_token, after - per_token * steps};
}

/// A decoder-only model's shape; the rest is the gpt plugin's defaults (experiments/gpt_char.yaml).
struct LmShape {
  const char* name;
  int64_t vocab, hiddens, ffn, heads, blocks;
};

/// gpt_char's model, and nanoGPT's shakespeare_char shape (6 blocks of width 384, 6 heads) on the
/// same 92-character vocabulary.
const LmShape kLmShapes[] = {{"gpt_char (4 x 128, 4 heads, FFN 512)", 92, 128, 512, 4, 4},
                             {"6 x 384, 6 heads, FFN 1536 (nanoGPT shakespeare_char's shape)", 92, 384, 1536, 6, 6}};

/// nn::TransformerLM as plugins/model/gpt builds it at its defaults: norm-first, biases, GELU,
/// GPT-2's initialisation, the output layer tied to the embedding, sinusoidal positions
/// (positional_encoding auto with dot_product), max_len 1024, dot-product attention.
nn::TransformerLM lm_model(const LmShape& s) {
  torch::manual_seed(0);
  auto o = nn::TransformerOptions(s.vocab, s.hiddens, s.ffn, s.heads, s.blocks)
               .dropout(0.1)
               .bias(true)
               .norm(nn::NormPlacement::First)
               .max_len(1024)
               .positional_encoding(nn::AbsolutePositions::Auto)
               .init(nn::TransformerInit::Gpt2)
               .activation(nn::Activation::GELU)
               .tie_embeddings(true)
               .scale_embeddings(false)
               .output_bias(false);
  nn::TransformerLM m(o, [](const nn::ScorerContext&) { return std::make_shared<nn::DotProductScorerImpl>(); });
  m->eval();
  return m;
}

struct Timed {
  double seconds = 0;          // median over the repetitions
  int64_t cache_bytes = 0;     // what the state held at the end
  std::vector<int64_t> ids;    // the prompt and the tokens generated
};

/// Median train::generate over `reps` runs: seconds (the prompt's pass included, as runner
/// generate times it), the cache's bytes at the end and the tokens.
Timed generate_seconds(nn::TransformerLM& m, const std::vector<int64_t>& prompt, int64_t tokens, bool cache,
                       int64_t reps) {
  train::GenerateOptions o;
  o.temperature = 0;  // greedy: no sampling cost beyond the argmax
  o.cache = cache;
  o.tokens = std::min<int64_t>(tokens, 4);
  train::generate(*m, prompt, o, torch::kCPU);  // warm-up
  o.tokens = tokens;
  std::vector<double> times;
  Timed out;
  for (int64_t r = 0; r < reps; ++r) {
    auto g = train::generate(*m, prompt, o, torch::kCPU);
    times.push_back(g.seconds);
    out.cache_bytes = g.cache_bytes;
    out.ids = std::move(g.ids);
  }
  std::sort(times.begin(), times.end());
  out.seconds = times[times.size() / 2];
  return out;
}

int gpt_suite(const Args& a) {
  std::printf("- models: nn::TransformerLM as the gpt plugin builds it (norm-first, biases, GELU, GPT-2 init, tied "
              "output layer, sinusoidal positions, dot-product attention), random weights (seed 0); train::generate "
              "as `runner generate` calls it, greedy, batch 1; a random prompt (seed 1) of each length\n\n");
  std::printf("## Generation, tokens/s with the KV cache and without (runner generate --no-cache: the whole sequence "
              "again at every step); threads %lld, median of %lld, the prompt's pass included\n\n",
              static_cast<long long>(a.threads), static_cast<long long>(a.reps));
  std::printf("| model | parameters | prompt | new tokens | KV cache tok/s | no cache tok/s | speed-up | KV cache bytes "
              "at the end | same tokens |\n|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
  for (const auto& shape : kLmShapes) {
    auto m = lm_model(shape);
    int64_t params = 0;
    for (const auto& p : m->parameters()) params += p.numel();
    for (int64_t prompt_length : a.prompts) {
      torch::manual_seed(1);
      const auto ids = torch::randint(2, shape.vocab, {prompt_length}, torch::kLong);
      const std::vector<int64_t> prompt(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + prompt_length);
      for (int64_t length : a.lengths) {
        const auto cached = generate_seconds(m, prompt, length, true, a.reps);
        const auto recomputed = generate_seconds(m, prompt, length, false, a.reps);
        const double tokens = static_cast<double>(length), c = cached.seconds, r = recomputed.seconds;
        std::printf("| %s | %lld | %lld | %lld | %.0f | %.0f | %.2fx | %lld | %s |\n", shape.name,
                    static_cast<long long>(params), static_cast<long long>(prompt_length),
                    static_cast<long long>(length), tokens / c, tokens / r, r / c,
                    static_cast<long long>(cached.cache_bytes), cached.ids == recomputed.ids ? "yes" : "NO");
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  torch::set_num_threads(static_cast<int>(a.threads));
  if (a.suite == "gpt") return gpt_suite(a);
  std::printf("- model: random weights of the Multi30K Transformer's shape (3+3 blocks, width 256, FFN 512, 8 heads of "
              "32, 8000 tokens), each scorer in every attention module, greedy decoding of exactly N steps\n\n");
  const int64_t longest = *std::max_element(a.lengths.begin(), a.lengths.end());
  std::printf("## Greedy decoding, tokens/s (threads %lld, source length %lld, median of %lld)\n\n",
              static_cast<long long>(a.threads), static_cast<long long>(a.source_length),
              static_cast<long long>(a.reps));
  std::printf("| scorer | kv_heads | batch | steps | cached tok/s | recomputation tok/s | speed-up |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& scorer : a.scorers) {
    for (int64_t kv : a.kv_heads) {
      const int64_t positions = std::max(longest, a.source_length) + 1;
      auto cached = model(scorer, true, kv, positions), recomputed = model(scorer, false, kv, positions);
      for (int64_t batch : a.batches) {
        torch::manual_seed(1);
        auto src = torch::randint(3, 8000, {batch, a.source_length}, torch::kLong);
        auto lens = torch::full({batch}, a.source_length, torch::kLong);
        for (int64_t length : a.lengths) {
          const double c = seconds(cached, src, lens, length, a.reps);
          const double r = seconds(recomputed, src, lens, length, a.reps);
          const double tokens = static_cast<double>(batch * length);
          std::printf("| %s | %lld | %lld | %lld | %.0f | %.0f | %.2fx |\n", scorer.c_str(), static_cast<long long>(kv),
                      static_cast<long long>(batch), static_cast<long long>(length), tokens / c, tokens / r, r / c);
          std::fflush(stdout);
        }
      }
    }
  }
  // What the decoder keeps per sequence: dot_product's KV cache grows by a constant per target
  // token; linear attention's recurrent state (S, z) does not grow, so its "per token" is 0 and
  // its fixed part holds the state.
  std::printf("\n## Cache bytes per sequence (fp32, 3 blocks)\n\n");
  std::printf(
      "| scorer | kv_heads | cached: bytes per target token | cached: fixed bytes after 8 steps (cross-attention "
      "and any recurrent state) | recomputation: bytes per target token |\n|---|---:|---:|---:|---:|\n");
  for (const auto& scorer : a.scorers) {
    for (int64_t kv : a.kv_heads) {
      auto cached = model(scorer, true, kv, a.source_length + 9);
      auto recomputed = model(scorer, false, kv, a.source_length + 9);
      const auto [self, fixed] = cache_bytes(cached, a.source_length, 8);
      const auto [inputs, none] = cache_bytes(recomputed, a.source_length, 8);
      std::printf("| %s | %lld | %lld | %lld | %lld |\n", scorer.c_str(), static_cast<long long>(kv),
                  static_cast<long long>(self), static_cast<long long>(fixed), static_cast<long long>(inputs));
    }
  }
  return 0;
}
