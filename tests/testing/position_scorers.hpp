#pragma once
// What the tests of the position-dependent scorer plugins (plugins/scorer/alibi, rope, t5_bias)
// share: a fixture that makes a scorer for a given ScorerContext, the fused path against the
// explicit one, step-by-step decoding against the full causal forward (a whole encoder-decoder,
// and a decoder block with and without its query offsets), and a short real run of the runner on
// an experiment whose self-attentions use the scorer.
#include <attnlab/config/node.hpp>
#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/transformer.hpp>
#include <attnlab/results/reader.hpp>

#include "testing/golden.hpp"
#include "testing/plugins.hpp"
#include "testing/results.hpp"
#include "testing/runner.hpp"
#include "testing/testing.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace attnlab::testutil {

/// A RegistryTest for scorer plugins: vocabularies of 11 and 13 tokens for the models it makes.
class ScorerPluginTest : public RegistryTest {
 protected:
  void SetUp() override {
    RegistryTest::SetUp();
    ctx.data.src_vocab_size = 11;
    ctx.data.tgt_vocab_size = 13;
  }
  /// What a multi-head attention module of `heads` heads of size d tells its scorer.
  static nn::ScorerContext context(int64_t heads, int64_t d,
                                   nn::ScorerContext::Role role = nn::ScorerContext::Role::Self, bool causal = false) {
    nn::ScorerContext c;
    c.query_size = c.key_size = d;
    c.num_heads = heads;
    c.role = role;
    c.causal = causal;
    return c;
  }
  /// The scorer the YAML value `text` names ("alibi", "{plugin: rope, base: 100}"), made for `c`.
  std::shared_ptr<nn::Scorer> scorer(const std::string& text, const nn::ScorerContext& c) {
    return registry.create<nn::Scorer>(yaml(text), ctx, c);
  }
};

/// Attention with `scorer` (3 heads' rows of size 8 and more, 6 rows in all), fused and explicit
/// (recorded), in training and eval mode, without, with [B] and with [B, Q] valid lengths (a row
/// of length 0 too), queries at positions 2..: equal outputs, and equal gradients of the queries,
/// keys, values and the scorer's own parameters.
inline void expect_fused_equals_explicit(const std::shared_ptr<nn::Scorer>& scorer) {
  std::vector<torch::Tensor> params = scorer->parameters();
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "train" : "eval");
    for (const auto& lens :
         {torch::Tensor(), torch::tensor({3, 0, 6, 1, 2, 5}), torch::tensor({{1, 2, 3, 4}}).repeat({6, 1})}) {
      nn::Attention attention(scorer, 0.0);
      attention->train(training);
      auto q = torch::randn({6, 4, 8}, torch::requires_grad()), k = torch::randn({6, 6, 8}, torch::requires_grad());
      auto v = torch::randn({6, 6, 5}, torch::requires_grad());
      std::vector<torch::Tensor> inputs{q, k, v};
      inputs.insert(inputs.end(), params.begin(), params.end());
      auto fused = attention->forward(q, k, v, lens, {2, 0});  // [6, 4, 5]
      auto g = torch::autograd::grad({(fused * fused).sum()}, inputs);
      nn::AttentionRecorder recorder;
      nn::RecordingScope scope(&recorder);  // the explicit path
      auto explicit_out = attention->forward(q, k, v, lens, {2, 0});
      auto h = torch::autograd::grad({(explicit_out * explicit_out).sum()}, inputs);
      EXPECT_ALLCLOSE(fused, explicit_out, 1e-5, 1e-5);
      for (size_t i = 0; i < g.size(); ++i) EXPECT_ALLCLOSE(g[i], h[i], 1e-4, 1e-5);
    }
  }
}

/// Logits of the whole target at once (teacher forcing, causal) and step by step with the cache,
/// one token per call, then two per call: equal when every step is scored at its position.
inline void expect_incremental_equals_full(nn::Encoder& encoder, nn::Decoder& decoder) {
  torch::NoGradGuard no_grad;
  encoder.eval();
  decoder.eval();
  auto src = torch::randint(0, 11, {2, 5}), tgt = torch::randint(0, 13, {2, 6});
  auto enc = encoder.forward(src, torch::tensor({5, 3}));
  auto full_state = decoder.init_state(enc, /*incremental=*/false);
  auto full = decoder.forward(tgt, *full_state);  // [2, 6, 13]
  for (int64_t chunk : {1, 2}) {
    SCOPED_TRACE("tokens per call: " + std::to_string(chunk));
    auto state = decoder.init_state(enc, /*incremental=*/true);
    std::vector<torch::Tensor> steps;
    for (int64_t t = 0; t < tgt.size(1); t += chunk) steps.push_back(decoder.forward(tgt.narrow(1, t, chunk), *state));
    EXPECT_ALLCLOSE(torch::cat(steps, 1), full, 1e-4, 1e-5);
  }
}

/// A decoder block alone (width 16, 4 heads, no positional encoding) with the scorers `scorers`
/// makes, its parameters filled (golden::fill) when `fill_weights`: whether decoding it step by
/// step equals the causal full pass, {when each step's query offset is the number of steps before
/// it (what TransformerDecoder::forward does), when every step stands at offset 0}.
inline std::pair<bool, bool> block_steps_equal_full(const nn::ScorerFactory& scorers, bool fill_weights = false) {
  nn::TransformerDecoderBlock block(nn::TransformerBlockOptions(16, 32, 4), scorers, 0);
  if (fill_weights) golden::fill(*block);
  block->eval();
  torch::NoGradGuard no_grad;
  auto x = torch::randn({2, 5, 16});
  nn::TransformerDecoderState state;
  state.encoder.states = torch::randn({2, 4, 16});
  state.caches.resize(1);
  auto full = block->forward(x, state);  // [2, 5, 16]
  bool equal[2] = {false, false};
  for (bool count_steps : {true, false}) {
    state.incremental = true;
    state.caches[0] = torch::Tensor();
    state.self_kv.clear();  // the KV cache's slots (the block makes them again)
    state.cross_kv.clear();
    state.steps = 0;
    std::vector<torch::Tensor> steps;
    for (int64_t t = 0; t < 5; ++t) {
      steps.push_back(block->forward(x.narrow(1, t, 1), state));
      if (count_steps) state.steps += 1;
    }
    equal[count_steps ? 0 : 1] = static_cast<bool>(AllClose(torch::cat(steps, 1), full, 1e-4, 1e-5));
  }
  return {equal[0], equal[1]};
}

/// The real runner on a d2l 0.17 fra-eng experiment whose encoder and decoder self-attentions use
/// one scorer and whose cross-attention uses dot_product, shortened to 2 epochs on one thread.
class ScorerExperimentRun : public RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-scorer-run"; }

  /// Runs experiments/<file>; checks it completes with a falling loss, that the resolved config
  /// holds `scorer` in both self-attentions and dot_product in the cross-attention, and that the
  /// attention of every module (2 blocks x 4 heads) is recorded, its rows summing to 1.
  /// -> the results file
  std::string expect_self_attention_run(const std::string& file, const std::string& scorer) {
    const auto path = tmp_ + "/run.h5";
    auto r =
        run({"experiments/" + file, "--results", path, "data_dir=" + data_dir_, "trainer.max_epochs=2", "threads=1"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    if (r.exit_code != 0) return path;
    results::ResultsReader rd(path);
    EXPECT_EQ(rd.attr_string("status"), "completed");
    auto loss = rd.metric("train", "loss");
    EXPECT_EQ(loss.size(), 2u);
    EXPECT_TRUE(loss.size() == 2 && loss[1] < loss[0]) << "loss by epoch does not fall";
    const auto model = config::parse_yaml(rd.config(), "config").at("model");
    EXPECT_EQ(model.at("encoder").at("attention").at("scorer").at("plugin").str(), scorer) << rd.config();
    const auto& decoder = model.at("decoder").at("attention");
    EXPECT_EQ(decoder.at("self_scorer").at("plugin").str(), scorer) << rd.config();
    EXPECT_EQ(decoder.at("cross_scorer").at("plugin").str(), "dot_product") << rd.config();
    for (const char* module : {"encoder_self", "decoder_self", "decoder_cross"}) {
      SCOPED_TRACE(module);
      auto a = read_attention(rd, "i'm home .", module);  // [blocks, heads, queries, keys]
      EXPECT_EQ(a.weights.size(0), 2);
      EXPECT_EQ(a.weights.size(1), 4);
      EXPECT_ALLCLOSE(a.weights.sum(-1), torch::ones({2, 4, a.weights.size(2)}), 1e-4, 1e-4);
    }
    return path;
  }
};

}  // namespace attnlab::testutil
