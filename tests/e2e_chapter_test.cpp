// End to end: every experiment of the attention chapter through the real runner binary, read back
// from its results file. Translation runs are shortened to 2 epochs; Nadaraya-Watson runs in full
// (5 full-batch epochs on 50 points) to check the parametric kernel learns.
#include <attnlab/results/tensor.hpp>
#include <attnlab/config/node.hpp>
#include <attnlab/results/reader.hpp>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "testing/runner.hpp"
#include "testing/results.hpp"
#include "testing/testing.hpp"

namespace {
using namespace attnlab;
namespace fs = std::filesystem;

/// Mean over rows of -sum p log p; weights [..., K].
double mean_entropy(const torch::Tensor& w) {
  auto p = w.to(torch::kDouble);
  return -(p * torch::log(p.clamp_min(1e-30))).sum(-1).mean().item<double>();
}

class ChapterRunner : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-e2e-chapter"; }

  /// Runs an experiment into tmp/<name>.h5 and returns the path (asserting a clean exit).
  std::string experiment(const std::string& file, std::vector<std::string> overrides = {}) {
    auto path = tmp_ + "/" + fs::path(file).stem().string() + ".h5";
    std::vector<std::string> args{"experiments/" + file, "--results", path, "data_dir=" + data_dir_};
    args.insert(args.end(), overrides.begin(), overrides.end());
    last_ = run(args);
    EXPECT_EQ(last_.exit_code, 0) << last_.out << last_.err;
    return path;
  }

  /// The translation checks every fra-eng experiment shares: 2 epochs, d2l 0.17 loss and the
  /// four samples with BLEU.
  void expect_translation_run(results::ResultsReader& rd) {
    EXPECT_EQ(rd.attr_string("status"), "completed");
    auto loss = rd.metric("train", "loss");
    ASSERT_EQ(loss.size(), 2u);
    EXPECT_LT(loss[1], loss[0]);
    EXPECT_EQ(rd.metric("train", "token_loss").size(), 2u);
    auto samples = rd.samples();
    ASSERT_EQ(samples.size(), 4u);
    EXPECT_EQ(samples[0].source, "go .");
    EXPECT_NE(last_.out.find("mean BLEU"), std::string::npos) << last_.out;
  }

  testutil::ProcessResult last_;
};

TEST_F(ChapterRunner, NadarayaWatsonParametricLossFallsAndItsAttentionIsSharper) {
  auto parametric = experiment("nadaraya_watson.yaml");
  auto nonparametric = experiment("nadaraya_watson_nonparametric.yaml");
  auto average = experiment("nadaraya_watson_average.yaml");
  results::ResultsReader p(parametric), n(nonparametric), a(average);
  for (auto* rd : {&p, &n, &a}) {
    EXPECT_EQ(rd->attr_string("status"), "completed");
    EXPECT_EQ(rd->array("predictions/test").shape, (std::vector<int64_t>{50}));
    EXPECT_EQ(rd->array("predictions/truth").shape, (std::vector<int64_t>{50}));
    EXPECT_EQ(rd->array("data/x_train").shape, (std::vector<int64_t>{50}));
    auto att = testutil::read_attention(*rd, "test", "attention_pooling");
    ASSERT_EQ(att.weights.sizes(), (std::vector<int64_t>{1, 1, 50, 50}));
    EXPECT_ALLCLOSE(att.weights.sum(-1), torch::ones({1, 1, 50}), 1e-4, 1e-4);
    ASSERT_EQ(att.query_tokens.size(), 50u);
    EXPECT_EQ(att.query_tokens[0], "0.00");
    EXPECT_EQ(att.query_tokens[49], "4.90");
    EXPECT_EQ(att.key_tokens.size(), 50u);
    EXPECT_EQ(att.layers, (std::vector<int64_t>{0}));
    EXPECT_EQ(att.query_side, "queries");  // the test inputs
    EXPECT_EQ(att.key_side, "keys");       // the training inputs
  }
  // The same data in all three (one seed, one generator).
  EXPECT_TRUE(torch::equal(results::read_tensor(p, "data/y_train"), results::read_tensor(n, "data/y_train")));

  auto loss = p.metric("train", "loss");
  ASSERT_EQ(loss.size(), 5u);
  for (size_t i = 1; i < loss.size(); ++i) EXPECT_LT(loss[i], loss[i - 1]) << "epoch " << i + 1;
  EXPECT_EQ(p.metric("train", "w").size(), 5u);
  EXPECT_EQ(n.metric("train", "loss").size(), 1u);  // nothing to train: one evaluation
  const double hp = mean_entropy(testutil::read_attention(p, "test", "attention_pooling").weights);
  const double hn = mean_entropy(testutil::read_attention(n, "test", "attention_pooling").weights);
  const double ha = mean_entropy(testutil::read_attention(a, "test", "attention_pooling").weights);
  EXPECT_LT(hp, hn);
  EXPECT_LT(hn, ha);
  EXPECT_NEAR(ha, std::log(50.0), 1e-4);  // uniform
  EXPECT_NEAR(p.attr_double("attention_entropy"), hp, 1e-6);
  // The learned kernel also predicts the truth better than the fixed one and the average.
  EXPECT_LT(p.attr_double("test_mse"), a.attr_double("test_mse"));
  EXPECT_LT(n.attr_double("test_mse"), a.attr_double("test_mse"));
}

TEST_F(ChapterRunner, BahdanauTwoEpochsRecordsCrossAttentionPerStep) {
  REQUIRE_FRA_ENG();
  results::ResultsReader rd(experiment("bahdanau_fra_eng.yaml", {"trainer.max_epochs=2"}));
  expect_translation_run(rd);
  EXPECT_EQ(rd.attention_modules("i'm home ."), (std::vector<std::string>{"decoder_cross"}));
  auto cross = testutil::read_attention(rd, "i'm home .", "decoder_cross");  // [1 layer, 1 head, steps, source]
  ASSERT_EQ(cross.weights.dim(), 4);
  EXPECT_EQ(cross.weights.size(0), 1);
  EXPECT_EQ(cross.weights.size(1), 1);
  EXPECT_EQ(cross.weights.size(3), 10);  // num_steps source tokens, padding included
  EXPECT_EQ(cross.key_tokens.at(0), "i'm");
  EXPECT_EQ(cross.key_tokens.at(3), "<eos>");
  EXPECT_EQ(cross.query_tokens.at(0), "<bos>");
  EXPECT_ALLCLOSE(cross.weights.sum(-1), torch::ones({1, 1, cross.weights.size(2)}), 1e-4, 1e-4);
  // valid length 4: nothing on the padding
  EXPECT_LT(cross.weights.narrow(3, 4, 6).abs().max().item<float>(), 1e-5f);
}

TEST_F(ChapterRunner, GruBaselineTwoEpochs) {
  REQUIRE_FRA_ENG();
  results::ResultsReader rd(experiment("seq2seq_gru_fra_eng.yaml", {"trainer.max_epochs=2"}));
  expect_translation_run(rd);
  EXPECT_TRUE(rd.attention_samples().empty());
}

TEST_F(ChapterRunner, TransformerD2l017TwoEpochs) {
  REQUIRE_FRA_ENG();
  results::ResultsReader rd(experiment("transformer_fra_eng_d2l017.yaml", {"trainer.max_epochs=2"}));
  expect_translation_run(rd);
  auto enc = testutil::read_attention(rd, "i'm home .", "encoder_self");
  EXPECT_EQ(enc.weights.size(0), 2);  // blocks
  EXPECT_EQ(enc.weights.size(1), 4);  // heads
  EXPECT_EQ(testutil::read_attention(rd, "i'm home .", "decoder_cross").weights.size(3), 10);
}

TEST_F(ChapterRunner, TransformerWithAdditiveEncoderScorerRecordsItsWeights) {
  REQUIRE_FRA_ENG();
  // Wiring only: one block, 2 epochs.
  results::ResultsReader rd(
      experiment("transformer_fra_eng_d2l017_additive.yaml",
                 {"trainer.max_epochs=2", "model.encoder.num_blks=1", "model.decoder.num_blks=1"}));
  expect_translation_run(rd);
  EXPECT_NE(rd.config().find("additive"), std::string::npos) << rd.config();
  auto enc = testutil::read_attention(rd, "i'm home .", "encoder_self");
  EXPECT_EQ(enc.weights.sizes(), (std::vector<int64_t>{1, 4, 10, 10}));
  EXPECT_ALLCLOSE(enc.weights.sum(-1), torch::ones({1, 4, 10}), 1e-4, 1e-4);
  EXPECT_LT(enc.weights.narrow(3, 4, 6).abs().max().item<float>(), 1e-5f);  // source padding masked
}

TEST_F(ChapterRunner, TransformerWithAlibiScorersTwoEpochs) {
  REQUIRE_FRA_ENG();
  // attention: {scorer: alibi} in the encoder and the decoder (self- and cross-attention).
  results::ResultsReader rd(experiment(
      "transformer_fra_eng_d2l017.yaml",
      {"trainer.max_epochs=2", "model.encoder.attention={scorer: alibi}", "model.decoder.attention={scorer: alibi}"}));
  expect_translation_run(rd);
  const auto model = config::parse_yaml(rd.config(), "config").at("model");
  for (const char* side : {"encoder", "decoder"}) {
    EXPECT_EQ(model.at(side).at("attention").at("scorer").at("plugin").str(), "alibi") << rd.config();
  }
  EXPECT_EQ(rd.config().find("dot_product"), std::string::npos) << rd.config();
  auto self = testutil::read_attention(rd, "i'm home .", "decoder_self");  // [blocks, heads, steps, steps]
  EXPECT_EQ(self.weights.size(1), 4);
  EXPECT_ALLCLOSE(self.weights.sum(-1), torch::ones({2, 4, self.weights.size(2)}), 1e-4, 1e-4);
}

TEST_F(ChapterRunner, TransformerWithAlibiSelfAndDotProductCrossAttention) {
  REQUIRE_FRA_ENG();
  results::ResultsReader rd(experiment("transformer_fra_eng_d2l017_alibi.yaml", {"trainer.max_epochs=2"}));
  expect_translation_run(rd);
  // The resolved config holds each scorer at its place, with its options.
  const auto attention = config::parse_yaml(rd.config(), "config").at("model").at("decoder").at("attention");
  EXPECT_EQ(attention.at("self_scorer").at("plugin").str(), "alibi") << rd.config();
  EXPECT_EQ(attention.at("self_scorer").at("symmetric").str(), "true") << rd.config();
  EXPECT_EQ(attention.at("cross_scorer").at("plugin").str(), "dot_product") << rd.config();
  std::string plugins;
  for (const auto& p : rd.attr_strings("plugins")) plugins += p + "\n";
  EXPECT_NE(plugins.find("scorer/alibi "), std::string::npos) << plugins;
  EXPECT_NE(plugins.find("scorer/dot_product "), std::string::npos) << plugins;
}

TEST_F(ChapterRunner, PluginsShowsTheAttentionScorerOptions) {
  auto decoder = run({"plugins", "decoder/transformer"});
  ASSERT_EQ(decoder.exit_code, 0) << decoder.err;
  for (const char* option : {"attention.scorer ", "attention.self_scorer ", "attention.cross_scorer "}) {
    EXPECT_NE(decoder.out.find(option), std::string::npos) << option << "\n" << decoder.out;
  }
  EXPECT_NE(decoder.out.find("the cross-attention's scorer"), std::string::npos) << decoder.out;
  auto encoder = run({"plugins", "encoder/transformer"});
  ASSERT_EQ(encoder.exit_code, 0) << encoder.err;
  EXPECT_NE(encoder.out.find("attention.self_scorer "), std::string::npos) << encoder.out;
  EXPECT_EQ(encoder.out.find("attention.cross_scorer"), std::string::npos) << encoder.out;
  auto gru = run({"plugins", "gru_bahdanau"});
  EXPECT_NE(gru.out.find("attention.cross_scorer "), std::string::npos) << gru.out;
  EXPECT_EQ(gru.out.find("attention.self_scorer"), std::string::npos) << gru.out;
  auto alibi = run({"plugins", "scorer/alibi"});
  ASSERT_EQ(alibi.exit_code, 0) << alibi.err;
  EXPECT_NE(alibi.out.find("symmetric"), std::string::npos) << alibi.out;
}

TEST_F(ChapterRunner, PluginsListsTheChapter) {
  auto r = run({"plugins"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* want : {"additive", "alibi", "gaussian_kernel", "average", "dot_product", "gru", "gru_bahdanau",
                           "kernel_regression", "nadaraya_watson", "seq2seq_d2l017"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
}

}  // namespace
