// End to end: the corner-sequence experiments through the real runner (regression trainer,
// both model plugins), read back from their results files.
#include <attnlab/results/tensor.hpp>
#include <attnlab/results/reader.hpp>

#include "testing/runner.hpp"
#include "testing/results.hpp"
#include "testing/testing.hpp"

#include <filesystem>

namespace {
using namespace attnlab;
namespace fs = std::filesystem;
using Sizes = std::vector<int64_t>;

class CornersRunner : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-corners"; }
  testutil::ProcessResult run(std::vector<std::string> args) {
    args.push_back("-q");
    return RunnerFixture::run(args);
  }
  /// corners_torch_transformer.yaml on 64 + 32 sequences for `epochs` epochs, with these overrides.
  testutil::ProcessResult torch_transformer(const std::string& results, int epochs, std::vector<std::string> extra) {
    std::vector<std::string> a{"experiments/corners_torch_transformer.yaml", "--results", results,
                               "trainer.max_epochs=" + std::to_string(epochs), "dataset.n=64", "dataset.test_n=32"};
    a.insert(a.end(), extra.begin(), extra.end());
    return run(a);
  }
};

TEST_F(CornersRunner, NormFirstRunRecordsLossesPredictionsAndAttention) {
  const auto path = tmp_ + "/first.h5";
  auto r = run({"experiments/tests/tiny_corners.yaml", "--results", path});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  results::ResultsReader in(path);
  EXPECT_EQ(in.attr_string("status"), "completed");
  EXPECT_EQ(in.attr_int("num_parameters"), 1728);
  auto train = in.metric("train", "loss");
  ASSERT_EQ(train.size(), 3u);
  EXPECT_LT(train.back(), train.front());
  for (const char* m : {"loss", "batch_loss_train_mode", "batch_loss_eval_mode"}) {
    EXPECT_EQ(in.metric("val", m).size(), 3u) << m;
  }
  EXPECT_EQ(in.metric("test", "loss").size(), 1u);
  EXPECT_EQ(results::read_tensor(in, "predictions/test/source").sizes(), (Sizes{32, 2, 2}));
  EXPECT_EQ(results::read_tensor(in, "predictions/test/target").sizes(), (Sizes{32, 2, 2}));
  EXPECT_EQ(results::read_tensor(in, "predictions/test/prediction").sizes(), (Sizes{32, 2, 2}));
  auto dirs = results::read_tensor(in, "predictions/test/directions");
  EXPECT_EQ(dirs.sizes(), (Sizes{32}));
  EXPECT_TRUE(((dirs == 0) | (dirs == 1)).all().item<bool>());
  EXPECT_EQ(in.attr_strings("directions_values"), (std::vector<std::string>{"counter-clockwise", "clockwise"}));
  // Attention of 2 test sequences, 3 modules, [2 layers, 3 heads, 2, 2], points as labels.
  auto samples = in.attention_samples();
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].rfind("test 0 (", 0), 0u) << samples[0];
  EXPECT_EQ(in.attention_modules(samples[0]), (std::vector<std::string>{"decoder_cross", "decoder_self", "encoder_self"}));
  auto enc = testutil::read_attention(in, samples[0], "encoder_self");
  EXPECT_EQ(enc.weights.sizes(), (Sizes{2, 3, 2, 2}));
  ASSERT_EQ(enc.key_tokens.size(), 2u);
  EXPECT_EQ(enc.key_tokens[0].front(), '(');
  auto cross = testutil::read_attention(in, samples[0], "decoder_cross");
  EXPECT_EQ(cross.key_tokens, enc.key_tokens);                         // keys: the source points
  EXPECT_EQ(cross.query_tokens.at(0), enc.key_tokens.at(1));           // first decoder input: last source point
  EXPECT_ALLCLOSE(cross.weights.sum(-1), torch::ones({2, 3, 2}), 1e-5, 1e-5);
  EXPECT_EQ(cross.layers, (Sizes{0, 1}));
  EXPECT_EQ(cross.query_side, "target");  // the points the decoder was fed
  EXPECT_EQ(cross.key_side, "source");
  EXPECT_EQ(enc.query_side, "source");
  EXPECT_EQ(testutil::read_attention(in, samples[0], "decoder_self").key_side, "target");
}

TEST_F(CornersRunner, TorchTransformerRuns) {
  const auto path = tmp_ + "/torch.h5";
  auto r = torch_transformer(path, 3, {"trainer.attention_samples=1"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  results::ResultsReader in(path);
  EXPECT_EQ(in.attr_int("num_parameters"), 1164);
  EXPECT_EQ(in.metric("train", "loss").size(), 3u);
  auto enc = testutil::read_attention(in, in.attention_samples().at(0), "encoder_self");
  EXPECT_EQ(enc.weights.sizes(), (Sizes{1, 3, 2, 2}));
}

// Issue 40: LibTorch's Transformer trains with heads off too, and the mask is recorded; a head that
// does not exist is one config error naming the valid range, before anything is written.
TEST_F(CornersRunner, TorchTransformerTrainsWithAHeadMask) {
  const auto path = tmp_ + "/masked.h5";
  auto r = torch_transformer(path, 2, {"interventions.head_mask={encoder_self: {1: [2]}, decoder_cross: {1: [1, 3]}}"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  results::ResultsReader in(path);
  EXPECT_EQ(in.attr_string("status"), "completed");
  EXPECT_EQ(in.array("interventions/head_mask/encoder_self").values, (std::vector<float>{1.0f, 0.0f, 1.0f}));
  EXPECT_EQ(in.array("interventions/head_mask/decoder_self").values, (std::vector<float>{1.0f, 1.0f, 1.0f}));
  EXPECT_EQ(in.array("interventions/head_mask/decoder_cross").values, (std::vector<float>{0.0f, 1.0f, 0.0f}));
  EXPECT_EQ(in.attr_double_at("interventions/head_mask", "heads_off"), 3.0);

  const auto bad = tmp_ + "/bad.h5";
  auto b = run({"experiments/corners_torch_transformer.yaml", "--results", bad, "interventions.head_mask={decoder_self: {1: [4]}}"});
  EXPECT_NE(b.exit_code, 0) << b.out << b.err;
  EXPECT_TRUE(testutil::contains(b.err, "interventions.head_mask.decoder_self.1")) << b.err;
  EXPECT_TRUE(testutil::contains(b.err, "head 4")) << b.err;
  EXPECT_FALSE(std::filesystem::exists(bad));
}

TEST_F(CornersRunner, BaseFileAloneIsAClearError) {
  auto r = run({"experiments/corners_base.yaml", "--results", tmp_ + "/never.h5"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("config error"), std::string::npos) << r.err;
}

}  // namespace
