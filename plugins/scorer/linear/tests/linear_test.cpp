// The linear scorer plugin (linear attention, Katharopoulos et al. 2020) as the runner loads it:
// the materialised weights are phi(q).phi(k) normalised over the valid keys (phi = elu + 1), the
// linear-time form (key sums per sequence; prefix sums, the recurrent form, in a causal decoder)
// equals them with their gradients, a row with no valid key behaves as the framework's masked
// softmax, step-by-step decoding with the KV cache equals the full causal forward, and the real
// runner trains with it and records its attention.
#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/encoder_decoder.hpp>

#include "testing/golden.hpp"
#include "testing/position_scorers.hpp"
#include "testing/testing.hpp"

#include <memory>
#include <string>
#include <vector>

namespace {

using namespace attnlab;
using testutil::message_of;
using testutil::ScorerExperimentRun;
using Role = nn::ScorerContext::Role;

class Linear : public testutil::ScorerPluginTest {};

torch::Tensor phi(const torch::Tensor& x) { return torch::elu(x) + 1; }

TEST_F(Linear, RecordedWeightsArePhiDotProductsNormalisedOverTheValidKeys) {
  auto q = torch::randn({3, 4, 6}, torch::kDouble), k = torch::randn({3, 5, 6}, torch::kDouble);
  auto v = torch::randn({3, 5, 2}, torch::kDouble);
  const auto lens = torch::tensor({5, 2, 4});
  nn::Attention attention(scorer("linear", context(1, 6)), 0.0);
  nn::AttentionRecorder recorder;
  nn::RecordingScope scope(&recorder);
  auto out = attention->forward(q, k, v, lens);
  auto w = recorder.module("attention").weights.squeeze(0).squeeze(1).to(torch::kDouble);  // [3, 4, 5]
  // Directly from the definition, sequence by sequence.
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t n = lens[b].item<int64_t>();
    auto a = torch::mm(phi(q[b]), phi(k[b].narrow(0, 0, n)).t());  // [4, n]
    auto expected = a / a.sum(-1, true);
    EXPECT_ALLCLOSE(w[b].narrow(-1, 0, n), expected, 1e-5, 1e-6);
    if (n < 5) {
      EXPECT_EQ(w[b].narrow(-1, n, 5 - n).abs().max().item<double>(), 0.0);
    }
    EXPECT_ALLCLOSE(out[b], torch::mm(expected, v[b].narrow(0, 0, n)), 1e-5, 1e-6);
  }
}

TEST_F(Linear, TheLinearTimeFormEqualsTheMaterialisedWeights) {
  // The framework's own check (rows of length 0, [B] and [B, Q] lengths, train and eval) ...
  testutil::expect_fused_equals_explicit(scorer("linear", context(3, 8)));
  // ... and a causal decoder's lengths per query over 30 positions: the prefix sums.
  auto q = torch::randn({4, 30, 8}, torch::requires_grad()), k = torch::randn({4, 30, 8}, torch::requires_grad());
  auto v = torch::randn({4, 30, 3}, torch::requires_grad());
  const auto causal = torch::arange(1, 31).unsqueeze(0).expand({4, 30});
  nn::Attention attention(scorer("linear", context(2, 8)), 0.0);
  auto fast = attention->forward(q, k, v, causal);
  auto g = torch::autograd::grad({(fast * fast).sum()}, {q, k, v});
  nn::AttentionRecorder recorder;
  nn::RecordingScope scope(&recorder);
  auto slow = attention->forward(q, k, v, causal);
  auto h = torch::autograd::grad({(slow * slow).sum()}, {q, k, v});
  EXPECT_ALLCLOSE(fast, slow, 1e-5, 1e-5);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_ALLCLOSE(g[i], h[i], 1e-4, 1e-5);
}

TEST_F(Linear, StepByStepDecodingEqualsTheFullCausalForward) {
  const std::string model = "{plugin: transformer, num_hiddens: 16, ffn_num_hiddens: 32, num_heads: 4, num_blks: 2, ";
  for (const char* attention : {"attention: {scorer: linear}}", "attention: {self_scorer: linear, cross_scorer: dot_product}}"}) {
    SCOPED_TRACE(attention);
    auto encoder = registry.create<nn::Encoder>(yaml(model + "attention: {scorer: linear}}"), ctx);
    auto decoder = registry.create<nn::Decoder>(yaml(model + attention), ctx);
    testutil::expect_incremental_equals_full(*encoder, *decoder);
  }
}

// Decoding keeps (S, z) per sequence and head instead of keys and values: the state's size does
// not grow with the steps, grouped-query heads decode as the full pass, beam search's reordering
// moves the states with their sequences, and while attention is recorded the KV cache is kept.
TEST_F(Linear, DecodingCarriesTheRecurrentStateInsteadOfKeysAndValues) {
  const std::string model = "{plugin: transformer, num_hiddens: 16, ffn_num_hiddens: 32, num_heads: 4, num_blks: 2, "
                            "kv_heads: 2, attention: {self_scorer: linear, cross_scorer: dot_product}}";
  auto encoder = registry.create<nn::Encoder>(yaml("{plugin: transformer, num_hiddens: 16, num_heads: 4}"), ctx);
  auto decoder = registry.create<nn::Decoder>(yaml(model), ctx);
  testutil::expect_incremental_equals_full(*encoder, *decoder);  // grouped-query heads, 1 and 2 tokens a call
  torch::NoGradGuard no_grad;
  encoder->eval();
  decoder->eval();
  auto src = torch::randint(0, 11, {2, 5}), tgt = torch::randint(0, 13, {2, 6});
  auto enc = encoder->forward(src, torch::tensor({5, 3}));
  auto state = decoder->init_state(enc, /*incremental=*/true);
  auto& st = dynamic_cast<nn::TransformerDecoderState&>(*state);
  std::vector<int64_t> bytes;
  for (int64_t t = 0; t < 4; ++t) {
    decoder->forward(tgt.narrow(1, t, 1), *state);
    bytes.push_back(st.cache_bytes());
  }
  ASSERT_EQ(st.self_kv.size(), 2u);
  for (const auto& kv : st.self_kv) {
    EXPECT_FALSE(kv.keys.defined());
    ASSERT_EQ(kv.recurrent.size(), 2u);
    EXPECT_EQ(kv.recurrent[0].sizes(), (std::vector<int64_t>{2, 4, 4, 4}));  // S [B, heads, d, d]
    EXPECT_EQ(kv.recurrent[1].sizes(), (std::vector<int64_t>{2, 4, 4}));     // z [B, heads, d]
    EXPECT_EQ(kv.length(), 4);
  }
  EXPECT_EQ(bytes.front(), bytes.back()) << "the state does not grow with the steps";
  // Beam search's reorder: sequence 1's state, then sequence 0's, continue as the swapped batch.
  st.reorder(torch::tensor({1, 0}));
  auto swapped = tgt.index_select(0, torch::tensor({1, 0}));
  auto next = decoder->forward(swapped.narrow(1, 4, 1), *state);  // [2, 1, 13]
  auto enc_swapped = encoder->forward(src.index_select(0, torch::tensor({1, 0})), torch::tensor({3, 5}));
  auto full = decoder->forward(swapped.narrow(1, 0, 5), *decoder->init_state(enc_swapped, /*incremental=*/false));
  EXPECT_ALLCLOSE(next, full.narrow(1, 4, 1), 1e-4, 1e-5);
  // Recorded: the KV cache and the materialised weights, the same logits.
  nn::AttentionRecorder recorder;
  nn::RecordingScope scope(&recorder);
  auto recorded = decoder->init_state(enc, /*incremental=*/true);
  auto first = decoder->forward(tgt.narrow(1, 0, 1), *recorded);
  EXPECT_TRUE(dynamic_cast<nn::TransformerDecoderState&>(*recorded).self_kv[0].keys.defined());
  EXPECT_ALLCLOSE(first, decoder->forward(tgt.narrow(1, 0, 1), *decoder->init_state(enc, false)), 1e-4, 1e-5);
}

TEST_F(Linear, RefusesOptionsAndMismatchedSizes) {
  auto option = message_of<ConfigError>([&] { scorer("{plugin: linear, feature_map: relu}", context(2, 4)); });
  EXPECT_NE(option.find("feature_map"), std::string::npos) << option;
  nn::ScorerContext c = context(1, 4, Role::Cross);
  c.key_size = 6;
  auto sizes = message_of<ConfigError>([&] { scorer("linear", c); });
  EXPECT_NE(sizes.find("query size 4 and key size 6"), std::string::npos) << sizes;
}

TEST_F(ScorerExperimentRun, LinearTrainsTheFraEngTransformerAndRecordsItsAttention) {
  REQUIRE_FRA_ENG();
  expect_self_attention_run("transformer_fra_eng_d2l017_linear.yaml", "linear");
}

}  // namespace
