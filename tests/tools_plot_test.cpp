// `runner plot` on a small real corner run and on a kernel-regression layout written here:
// files are produced, non-empty, PNGs have the expected pixel size, mistakes are clear errors.
#include <attnlab/results/results.hpp>
#include <attnlab/results/tensor.hpp>

#include "testing/png.hpp"
#include "testing/runner.hpp"
#include "testing/testing.hpp"

#include <cairo.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

namespace {
using namespace attnlab;
namespace fs = std::filesystem;

using testutil::png_size;

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

class Plot : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    runner_ = testutil::env_or("ATTNLAB_RUNNER", "");
    source_ = testutil::env_or("ATTNLAB_SOURCE_DIR", "");
    if (runner_.empty() || source_.empty()) return;
    tmp_ = testutil::temp_dir("attnlab-plot");
    run_ = tmp_ + "/run.h5";
    setup_ = testutil::run_process(runner_, {"experiments/tests/tiny_corners.yaml", "--results", run_, "-q"}, source_, tmp_);
  }
  void SetUp() override {
    ATTNLAB_REQUIRE(!runner_.empty(), "ATTNLAB_RUNNER is not set (run through ctest)");
    ASSERT_EQ(setup_.exit_code, 0) << setup_.out << setup_.err;
  }
  testutil::ProcessResult plot(std::vector<std::string> args) {
    args.insert(args.begin(), "plot");
    return testutil::run_process(runner_, args, source_, tmp_);
  }
  static inline std::string runner_, source_, tmp_, run_;
  static inline testutil::ProcessResult setup_;
};

TEST_F(Plot, EveryFigureOfACornerRun) {
  const auto dir = tmp_ + "/all";
  auto r = plot({run_, "-o", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> want;
  for (const char* f : {"losses", "attention_decoder_cross", "attention_decoder_self", "attention_encoder_self",
                        "predictions"}) {
    want.push_back(dir + "/" + f + ".png");
  }
  auto got = lines(r.out);
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  for (const auto& f : want) {
    ASSERT_TRUE(fs::exists(f)) << f;
    EXPECT_GT(fs::file_size(f), 3000u) << f;
    auto [w, h] = png_size(f);
    EXPECT_GT(w, 150) << f;
    EXPECT_GT(h, 150) << f;
  }
  // 2 x 5 corner panels of 210 plus titles, the legend row and the note ("the first 10 of 32").
  EXPECT_EQ(png_size(dir + "/predictions.png"), (std::pair{5 * 210 + 20, 2 * (210 + 22) + 30 + 18 + 20}));
}

TEST_F(Plot, AttentionHeatmapAtTheRequestedSize) {
  const auto png = tmp_ + "/enc.png";
  auto r = plot({run_, "--attention", "encoder_self", "--sample", "1", "-o", png, "--width", "640", "--height", "480"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(png_size(png), (std::pair{640, 480}));
  EXPECT_GT(fs::file_size(png), 3000u);
  // The default size is the figure's natural one and does not depend on the sample.
  const auto a = tmp_ + "/a.png", b = tmp_ + "/b.png";
  ASSERT_EQ(plot({run_, "--attention", "decoder_cross", "--sample", "0", "-o", a}).exit_code, 0);
  ASSERT_EQ(plot({run_, "--attention", "decoder_cross", "--sample", "1", "-o", b}).exit_code, 0);
  EXPECT_EQ(png_size(a).second, png_size(b).second);
}

TEST_F(Plot, SvgFiles) {
  const auto svg = tmp_ + "/losses.svg";
  auto r = plot({run_, "--losses", "-o", svg});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto text = testutil::read_file(svg);
  EXPECT_NE(text.find("<svg"), std::string::npos);
  EXPECT_GT(text.size(), 3000u);
  auto dir = plot({run_, "--predictions", "--format", "svg", "-o", tmp_ + "/svgs"});
  ASSERT_EQ(dir.exit_code, 0) << dir.err;
  EXPECT_TRUE(fs::exists(tmp_ + "/svgs/predictions.svg"));
}

TEST_F(Plot, MistakesAreClearErrors) {
  auto module = plot({run_, "--attention", "encoder_slef"});
  EXPECT_EQ(module.exit_code, 1);
  EXPECT_NE(module.err.find("--attention 'encoder_slef' was not recorded"), std::string::npos) << module.err;
  EXPECT_NE(module.err.find("encoder_self"), std::string::npos) << module.err;
  auto sample = plot({run_, "--attention", "encoder_self", "--sample", "9"});
  EXPECT_EQ(sample.exit_code, 1);
  EXPECT_NE(sample.err.find("--sample '9' is not a recorded sample"), std::string::npos) << sample.err;
  auto many = plot({run_, "-o", tmp_ + "/one.png"});
  EXPECT_EQ(many.exit_code, 1);
  EXPECT_NE(many.err.find("figures were chosen but -o names one file (" + tmp_ + "/one.png)"), std::string::npos)
      << many.err;  // the file asked for, not the rehearsal's scratch file
  const auto text = tmp_ + "/notes.h5";
  std::ofstream(text) << "hello\n";
  auto bad = plot({text});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("not an attnlab results file: " + text + " (not an HDF5 file)"), std::string::npos)
      << bad.err;
  // -o with an extension plot cannot write made a folder of that name.
  auto jpg = plot({run_, "--losses", "-o", tmp_ + "/l.jpg"});
  EXPECT_EQ(jpg.exit_code, 1);
  EXPECT_EQ(jpg.err, "error: plot: -o " + tmp_ + "/l.jpg: cannot write '.jpg' files; name a .png or .svg file, or a "
                     "folder\n");
  EXPECT_FALSE(fs::exists(tmp_ + "/l.jpg"));
  auto folder = plot({tmp_});
  EXPECT_EQ(folder.exit_code, 1);
  EXPECT_NE(folder.err.find("not an attnlab results file: " + tmp_ + " (it is a directory, not a regular file)"),
            std::string::npos)
      << folder.err;
}

TEST_F(Plot, ARunBeforeItsFirstEpochIsSaidToBeOneNotAFileWithoutSeries) {
  const auto live = tmp_ + "/first_epoch.h5";
  { results::Results w(live, "first_epoch"); }  // status running, no epoch written yet
  auto r = plot({live, "--losses", "-o", tmp_ + "/first_epoch.png"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: plot: " + live + " has no metric series yet: its run is still in its first epoch (the "
                   "file says running); plot it once an epoch has ended\n");
  const auto done = tmp_ + "/no_series.h5";
  {
    results::Results w(done, "no_series");
    w.set_status(results::Status::Completed);
  }
  r = plot({done, "--losses", "-o", tmp_ + "/no_series.png"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: plot: " + done + " has no metric series\n");
}

TEST_F(Plot, NanAndInfiniteAttentionIsDrawnGreyWithTheScaleFromFiniteWeights) {
  // An all-NaN attention tensor made cairo fail with "invalid matrix"; NaN and infinite cells now
  // draw in the "no value" grey (0.80, 0.80, 0.85: 204, 204, 217), the colours span the finite
  // weights.
  const auto path = tmp_ + "/nan.h5";
  {
    results::Results w(path, "nan_attention");
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    w.write_attention("all", "encoder_self", {.weights = results::to_float_array(torch::full({1, 2, 3, 4}, nan))});
    auto part = torch::softmax(torch::randn({2, 2, 5, 5}), -1);  // [layers, heads, queries, keys]
    part[0][0][0][0] = nan;
    part[0][1][2][3] = inf;
    part[1][0][4][4] = -inf;
    w.write_attention("part", "encoder_self", {.weights = results::to_float_array(part)});
    w.write_attention("finite", "encoder_self", {.weights = results::to_float_array(torch::softmax(torch::randn({2, 2, 5, 5}), -1))});
    w.set_status(results::Status::Completed);
  }
  std::map<std::string, int> grey, red;
  for (const char* sample : {"all", "part", "finite"}) {
    const auto png = tmp_ + "/nan_" + sample + ".png";
    auto r = plot({path, "--attention", "encoder_self", "--sample", sample, "-o", png});
    ASSERT_EQ(r.exit_code, 0) << sample << ": " << r.err;
    EXPECT_EQ(r.err, "") << sample;
    grey[sample] = testutil::count_pixels(png, 204, 204, 217, 1);
    red[sample] = testutil::count_pixels(png, 103, 0, 13, 10);  // the darkest red: the largest weight
  }
  // 2 x (3 x 4) cells of 48 units, all grey; 3 of the 100 cells of "part"; none of "finite".
  EXPECT_GT(grey["all"], 15 * 48 * 48) << "grey pixels";
  EXPECT_GT(grey["part"], 2 * 40 * 40) << "grey pixels";
  EXPECT_LT(grey["part"], 8 * 48 * 48) << "grey pixels";
  EXPECT_EQ(grey["finite"], 0);
  // The largest finite weight still gets the top of the scale when others are NaN or infinite.
  EXPECT_GT(red["part"], 20 * 20) << "darkest red pixels";
}

TEST_F(Plot, TokensThatAreNotUtf8AreDrawnAsReplacementCharacters) {
  // A byte-level token, or a damaged file's label, is not valid UTF-8: cairo then stopped drawing
  // and `runner plot` failed with "cairo cannot write it: input string not valid UTF-8", naming a
  // scratch file. Each bad byte is now drawn as U+FFFD: the heatmap is drawn as with those labels.
  const auto path = tmp_ + "/bytes.h5";
  {
    results::Results w(path, "byte_tokens");
    const auto weights = results::to_float_array(torch::softmax(torch::randn({1, 1, 3, 3}), -1));
    w.write_attention("bytes", "encoder_self",
                      {.weights = weights,
                       .query_tokens = {"caf\xc3", "\xff\xfe", "ok"},
                       .key_tokens = {"a", "\xe9t\xe9", "\xc3\xa9"}});
    w.write_attention("clean", "encoder_self",
                      {.weights = weights,
                       .query_tokens = {"caf\uFFFD", "\uFFFD\uFFFD", "ok"},
                       .key_tokens = {"a", "\uFFFDt\uFFFD", "\xc3\xa9"}});
    w.set_status(results::Status::Completed);
  }
  for (const char* sample : {"bytes", "clean"}) {
    const auto png = tmp_ + "/bytes_" + sample + ".png";
    auto r = plot({path, "--attention", "encoder_self", "--sample", sample, "-o", png});
    ASSERT_EQ(r.exit_code, 0) << sample << ": " << r.err;
    EXPECT_EQ(r.err, "") << sample;
    EXPECT_GT(fs::file_size(png), 3000u) << sample;
  }
  EXPECT_EQ(png_size(tmp_ + "/bytes_bytes.png"), png_size(tmp_ + "/bytes_clean.png"));
}

TEST_F(Plot, KernelRegressionLayout) {
  // The layout the nadaraya_watson trainer writes (docs/RESULTS.md): test inputs, prediction,
  // noise-free truth, training points, and the attention matrix [1, 1, n_test, n_train].
  const auto path = tmp_ + "/kernel.h5";
  {
    results::Results w(path, "nadaraya_watson");
    auto x = torch::arange(0, 5, 0.1);                                   // [50]
    auto truth = 2 * torch::sin(x) + torch::pow(x, 0.8);                 // [50]
    auto x_train = std::get<0>(torch::sort(torch::rand({50}) * 5));      // [50]
    auto y_train = 2 * torch::sin(x_train) + torch::pow(x_train, 0.8) + torch::randn({50}) * 0.5;
    auto weights = torch::softmax(-(x.unsqueeze(1) - x_train.unsqueeze(0)).pow(2) / 2, 1);  // [50, 50]
    results::write_tensor(w, "predictions/x", x);
    results::write_tensor(w, "predictions/test", torch::matmul(weights, y_train));
    results::write_tensor(w, "predictions/truth", truth);
    results::write_tensor(w, "data/x_train", x_train);
    results::write_tensor(w, "data/y_train", y_train);
    w.write_attention("test", "attention_pooling", {.weights = results::to_float_array(weights.view({1, 1, 50, 50}))});
    w.append_metric("train", "loss", 1.0);
    w.append_metric("train", "loss", 0.5);
    w.set_status(results::Status::Completed);
  }
  auto r = plot({path, "-o", tmp_ + "/kernel"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* f : {"kernel_regression", "attention_attention_pooling", "losses"}) {
    const auto png = tmp_ + "/kernel/" + f + ".png";
    ASSERT_TRUE(fs::exists(png)) << png << "\n" << r.out;
    EXPECT_GT(png_size(png).first, 300) << png;
  }
  EXPECT_EQ(png_size(tmp_ + "/kernel/kernel_regression.png"), (std::pair{450, 320}));
}

}  // namespace
