// The gpt model plugin: every causal scorer decodes step by step (KV cache or recurrent state) as
// the full forward computes, the model is causal, GPT-2's initialisation, attention-only and tied
// layouts, and its configuration errors.
#include <attnlab/error.hpp>
#include <attnlab/nn/transformer_lm.hpp>

#include "testing/plugins.hpp"
#include "testing/testing.hpp"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace attnlab::models::gpt {
namespace {

constexpr int64_t kVocab = 17;

class Gpt : public testutil::RegistryTest {
 protected:
  void SetUp() override {
    RegistryTest::SetUp();
    ctx.data.tgt_vocab_size = kVocab;
  }
  /// The gpt model the YAML map's body `options` configures (`num_hiddens: 16, ...`) over small
  /// defaults (H 16, 2 heads, 2 blocks, dropout 0).
  std::shared_ptr<nn::LanguageModel> make(const std::string& options) {
    std::string body = options;
    for (const std::string kv : {"num_hiddens: 16", "ffn_num_hiddens: 32", "num_heads: 2", "num_blks: 2", "dropout: 0"}) {
      const auto key = kv.substr(0, kv.find(':') + 1);
      const auto at = options.find(key);
      if (at == std::string::npos || (at > 0 && options[at - 1] != ' ' && options[at - 1] != '{')) {
        body += (body.empty() ? "" : ", ") + kv;
      }
    }
    auto model = registry.create<nn::Model>(yaml("{plugin: gpt, " + body + "}"), ctx);
    auto lm = std::dynamic_pointer_cast<nn::LanguageModel>(model);
    EXPECT_NE(lm, nullptr);
    return lm;
  }
  static std::vector<std::string> names(const torch::nn::Module& m) {
    std::vector<std::string> out;
    for (const auto& p : m.named_parameters()) out.push_back(p.key());
    return out;
  }
  static bool has(const std::vector<std::string>& names, const std::string& part) {
    for (const auto& n : names) {
      if (n.find(part) != std::string::npos) return true;
    }
    return false;
  }
};

TEST_F(Gpt, EveryCausalScorerDecodesStepByStepAsTheFullForward) {
  const std::vector<std::string> configs = {
      "attention: {scorer: dot_product}",
      "attention: {scorer: dot_product}, positional_encoding: none",  // NoPE
      "attention: {scorer: dot_product}, positional_encoding: learned",
      "attention: {scorer: rope}",
      "attention: {scorer: alibi}",
      "attention: {scorer: t5_bias}",
      "attention: {scorer: shaw}",
      "attention: {scorer: {plugin: sliding_window, window: 3}}",
      "attention: {scorer: linear}",
      "attention: {scorer: dot_product}, kv_heads: 1",
      "attention: {scorer: dot_product}, attention_only: true, norm: last",
  };
  const auto tokens = torch::randint(kVocab, {3, 9}, torch::kLong);  // [B, T]
  for (const auto& config : configs) {
    SCOPED_TRACE(config);
    auto lm = make(config);
    lm->eval();
    torch::NoGradGuard no_grad;
    const auto full = lm->forward(tokens);  // [B, T, V]
    ASSERT_EQ(full.sizes(), (torch::IntArrayRef{3, 9, kVocab}));
    auto state = lm->init_state();
    std::vector<torch::Tensor> pieces;
    pieces.push_back(lm->step(tokens.narrow(1, 0, 4), *state));  // a prompt of 4
    for (int64_t t = 4; t < 9; ++t) pieces.push_back(lm->step(tokens.narrow(1, t, 1), *state));
    EXPECT_TRUE(testutil::AllClose(torch::cat(pieces, 1), full, 1e-4, 1e-5));
    EXPECT_NO_THROW(nn::check_causal(*lm, torch::kCPU, "gpt"));
  }
}

TEST_F(Gpt, TheOutputAtATokenDoesNotDependOnLaterTokens) {
  for (const std::string scorer : {"dot_product", "rope", "alibi", "linear"}) {
    SCOPED_TRACE(scorer);
    auto lm = make("attention: {scorer: " + scorer + "}");
    auto lm_impl = std::dynamic_pointer_cast<nn::TransformerLMImpl>(lm);
    ASSERT_NE(lm_impl, nullptr);
    // The gradient of position 3's logits with respect to every input embedding: zero after 3.
    auto emb = lm_impl->decoder->embedding->forward(torch::randint(kVocab, {1, 8}, torch::kLong)).detach();
    emb.requires_grad_(true);
    auto state = lm_impl->decoder->init_state({}, false);
    auto h = lm_impl->decoder->forward_embedded(emb, static_cast<nn::TransformerDecoderState&>(*state));  // [1, 8, H]
    h.index({0, 3}).sum().backward();
    const auto g = emb.grad().abs().sum(-1).squeeze(0);  // [8]
    EXPECT_GT(g.narrow(0, 0, 4).min().item<double>(), 0.0);
    EXPECT_EQ(g.narrow(0, 4, 4).max().item<double>(), 0.0);
  }
}

TEST_F(Gpt, HasGpt2sLayoutAndInitialisation) {
  auto lm = make("num_blks: 8, num_hiddens: 64, ffn_num_hiddens: 256, positional_encoding: learned");
  const auto n = names(*lm);
  EXPECT_TRUE(has(n, "decoder.blks.0.attention1.W_q.weight"));
  EXPECT_FALSE(has(n, "attention2")) << "no cross-attention";
  EXPECT_FALSE(has(n, "decoder.dense")) << "the output layer is tied by default";
  EXPECT_TRUE(has(n, "decoder.final_ln"));
  EXPECT_TRUE(has(n, "decoder.pos_encoding.table"));
  const auto params = lm->named_parameters();
  const auto std_of = [&](const std::string& name) { return params[name].std().item<double>(); };
  EXPECT_NEAR(std_of("decoder.embedding.weight"), 0.02, 0.002);
  EXPECT_NEAR(std_of("decoder.blks.0.attention1.W_q.weight"), 0.02, 0.002);
  EXPECT_NEAR(std_of("decoder.blks.0.ffn.dense1.weight"), 0.02, 0.002);
  const double residual = 0.02 / std::sqrt(16.0);  // 2 N residual additions, N = 8
  EXPECT_NEAR(std_of("decoder.blks.3.attention1.W_o.weight"), residual, residual / 8);
  EXPECT_NEAR(std_of("decoder.blks.3.ffn.dense2.weight"), residual, residual / 8);
  EXPECT_EQ(params["decoder.blks.0.attention1.W_q.bias"].abs().max().item<double>(), 0.0);
  EXPECT_EQ(params["decoder.blks.0.addnorm1.ln.weight"].min().item<double>(), 1.0);
  EXPECT_EQ(lm->max_positions(), 1024);
  EXPECT_EQ(lm->vocab_size(), kVocab);
}

TEST_F(Gpt, AttentionOnlyAndUntiedLayouts) {
  const auto n = names(*make("attention_only: true, tie_embeddings: false"));
  EXPECT_FALSE(has(n, "ffn")) << "attention-only blocks have no MLP";
  EXPECT_FALSE(has(n, "addnorm3"));
  EXPECT_TRUE(has(n, "decoder.dense.weight"));
  EXPECT_FALSE(has(n, "decoder.dense.bias")) << "nanoGPT's lm_head has no bias";
  EXPECT_TRUE(has(names(*make("tie_embeddings: false, output_bias: true")), "decoder.dense.bias"));
  // A relative scorer bounds no positions; NoPE neither.
  EXPECT_EQ(make("attention: {scorer: rope}")->max_positions(), 0);
  EXPECT_EQ(make("positional_encoding: none")->max_positions(), 0);
}

TEST_F(Gpt, TheActivationIsTheOneAsked) {
  // One block, attention switched off by a zero W_o: the output is the MLP's.
  for (const auto& [name, fn] : std::vector<std::pair<std::string, torch::Tensor (*)(const torch::Tensor&)>>{
           {"relu", [](const torch::Tensor& x) { return torch::relu(x); }},
           {"gelu", [](const torch::Tensor& x) { return torch::gelu(x); }},
           {"gelu_tanh", [](const torch::Tensor& x) { return torch::gelu(x, "tanh"); }}}) {
    SCOPED_TRACE(name);
    auto lm = std::dynamic_pointer_cast<nn::TransformerLMImpl>(make("num_blks: 1, activation: " + name));
    auto& blk = lm->decoder->blocks[0];
    torch::NoGradGuard no_grad;
    blk->attention1->W_o->weight.zero_();
    blk->attention1->W_o->bias.zero_();
    auto x = torch::randn({1, 5, 16});
    auto state = lm->decoder->init_state({}, false);
    auto out = blk->forward(x, static_cast<nn::TransformerDecoderState&>(*state));
    auto& ffn = blk->ffn;
    auto h = blk->addnorm3->pre(x);
    auto expected = x + torch::linear(fn(torch::linear(h, ffn->dense1->weight, ffn->dense1->bias)),
                                      ffn->dense2->weight, ffn->dense2->bias);
    EXPECT_TRUE(testutil::AllClose(out, expected, 1e-5, 1e-6));
  }
}

TEST_F(Gpt, RefusesWhatItCannotBuild) {
  const auto message = [&](const std::string& options) -> std::string {
    try {
      make(options);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message("num_heads: 3").find("num_heads"), std::string::npos) << message("num_heads: 3");
  EXPECT_NE(message("output: softmax").find("output"), std::string::npos);
  EXPECT_NE(message("attention: {scorer: nonesuch}").find("nonesuch"), std::string::npos)
      << message("attention: {scorer: nonesuch}");
  ctx.data.tgt_vocab_size = 0;
  EXPECT_NE(message("").find("no vocabulary"), std::string::npos) << message("");
}

/// A "language model" that reads the sequence backwards: position t sees the tokens after it.
class Backwards final : public nn::LanguageModel {
 public:
  torch::Tensor forward(const torch::Tensor& tokens) override {
    return torch::one_hot(tokens.flip(1), kVocab).to(torch::kFloat);  // [B, T, V]
  }
  std::unique_ptr<nn::DecoderState> init_state() override { return std::make_unique<nn::DecoderState>(); }
  torch::Tensor step(const torch::Tensor& tokens, nn::DecoderState&) override { return forward(tokens); }
  int64_t vocab_size() const override { return kVocab; }
  int64_t max_positions() const override { return 0; }
};

TEST(GptCausality, AModelThatSeesTheFutureIsRefusedByName) {
  Backwards model;
  try {
    nn::check_causal(model, torch::kCPU, "model 'backwards'");
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model 'backwards': the model is not causal"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnlab::models::gpt
