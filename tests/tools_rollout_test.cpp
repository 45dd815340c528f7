// Attention rollout and flow (framework/src/tools/rollout.hpp): the math on hand examples, then
// `runner rollout` on a small real corner run (text, csv, json, --write read back) and its refusals.
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>

#include "testing/runner.hpp"
#include "testing/testing.hpp"
#include "tools/rollout.hpp"

#include <filesystem>
#include <fstream>
#include <random>

namespace {
using namespace attnlab;
using tools::rollout::Matrix;
namespace fs = std::filesystem;

Matrix matrix(int64_t rows, int64_t cols, std::vector<double> values) {
  Matrix m(rows, cols);
  m.values = std::move(values);
  return m;
}

void expect_near(const Matrix& got, const Matrix& want, double tol = 1e-12) {
  ASSERT_EQ(got.rows, want.rows);
  ASSERT_EQ(got.cols, want.cols);
  for (int64_t i = 0; i < got.rows; ++i) {
    for (int64_t j = 0; j < got.cols; ++j) EXPECT_NEAR(got(i, j), want(i, j), tol) << "at (" << i << ", " << j << ")";
  }
}

void expect_rows_sum_to_one(const Matrix& m) {
  for (int64_t i = 0; i < m.rows; ++i) {
    double sum = 0.0;
    for (int64_t j = 0; j < m.cols; ++j) {
      EXPECT_GE(m(i, j), 0.0);
      sum += m(i, j);
    }
    EXPECT_NEAR(sum, 1.0, 1e-12) << "row " << i;
  }
}

/// Weights [layers, heads, n, n] with rows of random positive numbers summing to 1.
results::FloatArray random_weights(int64_t layers, int64_t heads, int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(0.01f, 1.0f);
  results::FloatArray w;
  w.shape = {layers, heads, n, n};
  for (int64_t r = 0; r < layers * heads * n; ++r) {
    std::vector<float> row(static_cast<size_t>(n));
    float sum = 0;
    for (auto& v : row) sum += (v = u(gen));
    for (auto v : row) w.values.push_back(v / sum);
  }
  return w;
}

std::vector<Matrix> residual_layers(const results::FloatArray& w, int64_t n) {
  std::vector<Matrix> out;
  for (int64_t l = 0; l < w.size(0); ++l) out.push_back(tools::rollout::with_residual(tools::rollout::head_mean(w, l, n, n)));
  return out;
}

TEST(RolloutMath, IdentityAttentionGivesIdentity) {
  results::FloatArray w;
  w.shape = {1, 2, 3, 3};
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) w.values.push_back(i == j ? 1.0f : 0.0f);
    }
  }
  const auto layers = residual_layers(w, 3);
  expect_near(layers[0], tools::rollout::identity(3));
  expect_near(tools::rollout::rollout(layers), tools::rollout::identity(3));
  expect_near(tools::rollout::flow(layers), tools::rollout::identity(3));
}

TEST(RolloutMath, RowsSumToOne) {
  const auto w = random_weights(3, 4, 5, 7);
  const auto layers = residual_layers(w, 5);
  for (const auto& a : layers) expect_rows_sum_to_one(a);
  expect_rows_sum_to_one(tools::rollout::rollout(layers));
  expect_rows_sum_to_one(tools::rollout::flow(layers));
}

TEST(RolloutMath, HeadMeanAndResidualByHand) {
  // Two heads of one layer, 2 x 2: mean [[0.5, 0.5], [0.25, 0.75]]; with the residual
  // 0.5 * mean + 0.5 * I = [[0.75, 0.25], [0.125, 0.875]].
  results::FloatArray w;
  w.shape = {1, 2, 2, 2};
  w.values = {1.0f, 0.0f, 0.5f, 0.5f, 0.0f, 1.0f, 0.0f, 1.0f};
  const auto mean = tools::rollout::head_mean(w, 0, 2, 2);
  expect_near(mean, matrix(2, 2, {0.5, 0.5, 0.25, 0.75}), 1e-7);
  expect_near(tools::rollout::with_residual(mean), matrix(2, 2, {0.75, 0.25, 0.125, 0.875}), 1e-7);
}

TEST(RolloutMath, HeadMeanCutsPaddingAndRenormalises) {
  // One head, 3 x 3, the third position padding: the kept 2 x 2 rows [0.2, 0.6] -> [0.25, 0.75].
  results::FloatArray w;
  w.shape = {1, 1, 3, 3};
  w.values = {0.2f, 0.6f, 0.2f, 0.5f, 0.5f, 0.0f, 0.3f, 0.3f, 0.4f};
  expect_near(tools::rollout::head_mean(w, 0, 2, 2), matrix(2, 2, {0.25, 0.75, 0.5, 0.5}), 1e-7);
}

// Two layers over 2 tokens, already residual-augmented:
//   Â_1 = [[1, 0], [0.5, 0.5]], Â_2 = [[0.5, 0.5], [0, 1]].
// Rollout Â_2 Â_1 = [[0.5 + 0.25, 0.25], [0.5, 0.5]].
// Flow, output node (2,0): to input 0 via (1,0) min(0.5, 1) + via (1,1) min(0.5, 0.5) = 1; to input
// 1 only via (1,1): min(0.5, 0.5) = 0.5; row [1, 0.5] -> [2/3, 1/3]. Output (2,1) reaches only
// (1,1) (capacity 1), which passes 0.5 to each input: [0.5, 0.5].
const std::vector<Matrix> kTwoLayers{matrix(2, 2, {1.0, 0.0, 0.5, 0.5}), matrix(2, 2, {0.5, 0.5, 0.0, 1.0})};

TEST(RolloutMath, RolloutOfTwoLayersByHand) {
  expect_near(tools::rollout::rollout(kTwoLayers), matrix(2, 2, {0.75, 0.25, 0.5, 0.5}));
}

TEST(RolloutMath, FlowOfTwoLayersByHand) {
  expect_near(tools::rollout::flow(kTwoLayers), matrix(2, 2, {2.0 / 3.0, 1.0 / 3.0, 0.5, 0.5}));
}

TEST(RolloutMath, MaxFlowOfAGraphByHand) {
  // 0 -> 1 (3), 0 -> 2 (2), 1 -> 2 (1), 1 -> 3 (1.5), 2 -> 3 (2.5). From 0 to 3: the edges into 3 cut
  // at 4, reached by 0-1-3 (1.5), 0-2-3 (2) and 0-1-2-3 (0.5). From 1 to 3: 1-3 (1.5) + 1-2-3 (1).
  Matrix c(4, 4);
  c(0, 1) = 3.0;
  c(0, 2) = 2.0;
  c(1, 2) = 1.0;
  c(1, 3) = 1.5;
  c(2, 3) = 2.5;
  EXPECT_NEAR(tools::rollout::max_flow(c, 0, 3), 4.0, 1e-12);
  EXPECT_NEAR(tools::rollout::max_flow(c, 3, 0), 0.0, 1e-12);
  EXPECT_NEAR(tools::rollout::max_flow(c, 1, 3), 2.5, 1e-12);
}

// Two decoder layers, 2 targets, 2 sources. D_1 = I, D_2 = [[1, 0], [0.5, 0.5]],
// C_1 = I, C_2 = [[0, 1], [0, 1]], R_enc = [[0.5, 0.5], [0, 1]].
// Layer 1: T = 0.5 I, S = 0.5 C_1. Layer 2: S = 0.5 D_2 (0.5 C_1) + 0.5 C_2
//   = [[0.25, 0.5], [0.125, 0.625]] (rows 0.75: the rest stayed on the target side).
// S R_enc = [[0.125, 0.625], [0.0625, 0.6875]]; rows / 0.75 = [[1/6, 5/6], [1/12, 11/12]].
TEST(RolloutMath, EncoderDecoderPathByHand) {
  const std::vector<Matrix> self{tools::rollout::identity(2), matrix(2, 2, {1.0, 0.0, 0.5, 0.5})};
  const std::vector<Matrix> cross{tools::rollout::identity(2), matrix(2, 2, {0.0, 1.0, 0.0, 1.0})};
  const auto enc = matrix(2, 2, {0.5, 0.5, 0.0, 1.0});
  expect_near(tools::rollout::encoder_decoder(self, cross, enc),
              matrix(2, 2, {1.0 / 6.0, 5.0 / 6.0, 1.0 / 12.0, 11.0 / 12.0}));
}

TEST(RolloutMath, EncoderDecoderPathRefusesMismatchedShapes) {
  const std::vector<Matrix> self{tools::rollout::identity(2)};
  const std::vector<Matrix> cross{Matrix(2, 3)};
  EXPECT_THROW(tools::rollout::encoder_decoder(self, cross, tools::rollout::identity(2)), Error);
  EXPECT_THROW(tools::rollout::encoder_decoder(self, {}, tools::rollout::identity(2)), Error);
}

// ---- runner rollout on a real run ---------------------------------------------------------------

class Rollout : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    runner_ = testutil::env_or("ATTNLAB_RUNNER", "");
    source_ = testutil::env_or("ATTNLAB_SOURCE_DIR", "");
    if (runner_.empty() || source_.empty()) return;
    tmp_ = testutil::temp_dir("attnlab-rollout");
    run_ = tmp_ + "/run.h5";
    setup_ = testutil::train_tiny_corners(runner_, source_, tmp_, run_);
  }
  void SetUp() override {
    ATTNLAB_REQUIRE(!runner_.empty(), "ATTNLAB_RUNNER is not set (run through ctest)");
    ASSERT_EQ(setup_.exit_code, 0) << setup_.out << setup_.err;
  }
  testutil::ProcessResult rollout(std::vector<std::string> args) {
    args.insert(args.begin(), "rollout");
    return testutil::run_process(runner_, args, source_, tmp_);
  }
  /// A copy of the run, so that --write does not change what other tests read.
  std::string copy(const std::string& name) {
    const auto path = tmp_ + "/" + name;
    fs::copy_file(run_, path, fs::copy_options::overwrite_existing);
    return path;
  }
  static inline std::string runner_, source_, tmp_, run_;
  static inline testutil::ProcessResult setup_;
};

TEST_F(Rollout, TextTablesOfEveryModule) {
  auto r = rollout({run_, "--sample", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* part : {"encoder_self_rollout (rollout", "decoder_self_rollout (rollout",
                           "encoder_decoder_rollout (encoder-decoder path", "each row sums to 1"}) {
    EXPECT_TRUE(testutil::contains(r.out, part)) << part << " in\n" << r.out;
  }
  EXPECT_FALSE(testutil::contains(r.out, "_flow")) << r.out;  // --method rollout is the default
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST_F(Rollout, CsvOfBothMethods) {
  auto r = rollout({run_, "--module", "encoder_self", "--method", "both", "--format", "csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), "sample,result,module,method,query,query_token,key,key_token,value");
  // Corner runs record 2 source points: 2 x 2 values for rollout and for flow.
  EXPECT_EQ(testutil::count_lines(r.out), 1u + 4u + 4u) << r.out;
  EXPECT_TRUE(testutil::contains(r.out, ",encoder_self_flow,encoder_self,flow,1,")) << r.out;
}

TEST_F(Rollout, Json) {
  auto r = rollout({run_, "--module", "decoder_cross", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.front(), '{');
  EXPECT_TRUE(testutil::contains(r.out, "\"name\":\"encoder_decoder_rollout\"")) << r.out;
  EXPECT_TRUE(testutil::contains(r.out, "\"values\":[[")) << r.out;
}

TEST_F(Rollout, WriteStoresWhatItPrintsAndReadsBack) {
  const auto file = copy("written.h5");
  for (int i = 0; i < 2; ++i) {  // the second write replaces the first
    auto r = rollout({file, "--sample", "0", "--method", "both", "--write"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(testutil::contains(r.err, "rollout: wrote /rollout/")) << r.err;
  }
  results::ResultsReader in(file);
  const auto sample = in.attention_samples().front();
  const std::string group = "rollout/" + sample;
  EXPECT_EQ(in.attr_string_at(group, "text"), sample);
  EXPECT_EQ(in.children(group),
            (std::vector<std::string>{"decoder_self_flow", "decoder_self_rollout", "encoder_decoder_rollout",
                                      "encoder_self_flow", "encoder_self_rollout"}));
  // What was stored is the math on what the run recorded (corner runs record no padding).
  const auto att = in.attention(sample, "encoder_self");
  const int64_t n = att.weights.size(2);
  const auto want = tools::rollout::rollout(residual_layers(att.weights, n));
  const auto got = in.array(group + "/encoder_self_rollout");
  ASSERT_EQ(got.shape, (std::vector<int64_t>{n, n}));
  for (int64_t k = 0; k < n * n; ++k) EXPECT_NEAR(got.values[static_cast<size_t>(k)], want.values[static_cast<size_t>(k)], 1e-6);
  EXPECT_EQ(in.attr_string_at(group + "/encoder_self_rollout", "method"), "rollout");
  EXPECT_EQ(in.attr_string_at(group + "/encoder_self_flow", "method"), "flow");
  EXPECT_EQ(in.attr_string_at(group + "/encoder_decoder_rollout", "method"), "encoder_decoder");
  EXPECT_TRUE(testutil::contains(in.attr_string_at(group + "/encoder_decoder_rollout", "definition"), "S_L R_enc"));
  EXPECT_EQ(in.attr_strings_at(group + "/encoder_self_rollout", "key_tokens"), att.key_tokens);
  const auto path = in.array(group + "/encoder_decoder_rollout");
  ASSERT_EQ(path.dim(), 2);
  for (int64_t i = 0; i < path.size(0); ++i) {
    double sum = 0;
    for (int64_t j = 0; j < path.size(1); ++j) sum += path.at({i, j});
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
  // The rest of the file is as it was: the attention, the metrics.
  EXPECT_FALSE(in.metric_groups().empty());
  EXPECT_EQ(in.attention_modules(sample), (std::vector<std::string>{"decoder_cross", "decoder_self", "encoder_self"}));
}

TEST_F(Rollout, WriteRefusesAFileAWriterHolds) {
  const auto file = copy("held.h5");
  results::Results held(file, results::Results::Open::Existing);
  auto r = rollout({file, "--write"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(testutil::contains(r.err, "another run is writing")) << r.err;
  EXPECT_EQ(testutil::count_lines(r.err), 1u) << r.err;
}

TEST_F(Rollout, AnUnknownSampleListsTheRecordedOnes) {
  auto r = rollout({run_, "--sample", "no such sentence"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(testutil::contains(r.err, "--sample 'no such sentence' is not a recorded sample")) << r.err;
  EXPECT_TRUE(testutil::contains(r.err, "recorded (text or index): ")) << r.err;
  EXPECT_EQ(testutil::count_lines(r.err), 1u) << r.err;
  r = rollout({run_, "--sample", "999"});
  EXPECT_NE(r.exit_code, 0);
}

TEST_F(Rollout, AModuleNotRecordedIsNamed) {
  auto r = rollout({run_, "--module", "encoder_cross"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(testutil::contains(r.err, "--module 'encoder_cross' was not recorded")) << r.err;
  EXPECT_TRUE(testutil::contains(r.err, "recorded: decoder_cross, decoder_self, encoder_self")) << r.err;
  r = rollout({run_, "--module", "decoder_cross", "--method", "flow"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(testutil::contains(r.err, "the encoder-decoder path is a rollout")) << r.err;
}

TEST_F(Rollout, ARunWithoutAttentionSaysHowToRecordIt) {
  const auto file = tmp_ + "/none.h5";
  { results::Results out(file, "no_attention"); }
  auto r = rollout({file});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(testutil::contains(r.err, "No attention recorded in")) << r.err;
  EXPECT_TRUE(testutil::contains(r.err, "evaluate.attention")) << r.err;
  EXPECT_EQ(testutil::count_lines(r.err), 1u) << r.err;
}

TEST_F(Rollout, ADamagedFileIsOneError) {
  const auto file = tmp_ + "/damaged.h5";
  {
    std::ifstream in(run_, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(file, std::ios::binary);
    out << bytes.substr(0, bytes.size() / 3);
  }
  auto r = rollout({file, "--write"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(testutil::contains(r.err, "results error: ")) << r.err;
  EXPECT_EQ(testutil::count_lines(r.err), 1u) << r.err;
  r = rollout({tmp_ + "/missing.h5"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(testutil::contains(r.err, "no such file")) << r.err;
}

}  // namespace
