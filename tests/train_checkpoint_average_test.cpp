// Checkpoint averaging (framework/src/train/checkpoint_average.hpp, `runner average`): the mean of
// the kept epochs' weights, loadable like best.pt, with the integer buffers of the newest.
#include <attnlab/error.hpp>
#include <attnlab/train/checkpoint.hpp>

#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <filesystem>
#include <fstream>

#include "testing/testing.hpp"
#include "train/checkpoint_average.hpp"

namespace {
using namespace attnlab;
namespace fs = std::filesystem;

struct TinyImpl : torch::nn::Module {
  TinyImpl() {
    inner = register_module("inner", torch::nn::Linear(3, 2));
    scale = register_parameter("scale", torch::ones({2}));
    count = register_buffer("count", torch::zeros({1}, torch::kLong));
  }
  torch::nn::Linear inner{nullptr};
  torch::Tensor scale, count;
};
TORCH_MODULE(Tiny);

class CheckpointAverage : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testutil::temp_dir("attnlab-average"); }
  void TearDown() override { fs::remove_all(dir_); }

  /// epoch-<e>.pt with every float parameter filled with `value` and count = e.
  std::string save(int64_t epoch, double value) {
    Tiny m;
    torch::NoGradGuard g;
    for (auto& p : m->parameters()) p.fill_(value);
    m->count.fill_(epoch);
    train::TrainingState st;
    st.epoch = epoch;
    st.step = epoch * 10;
    st.metric_rows = {{"train/loss", epoch}};
    const auto path = train::epoch_checkpoint_path(dir_, epoch);  // the SDK's name, as trainers write it
    train::save_checkpoint(path, *m, nullptr, st);
    return path;
  }

  std::string dir_;
};

TEST_F(CheckpointAverage, MeanOfFloatsLastOfIntegersLoadableLikeBest) {
  const std::vector<std::string> in{save(3, 1.0), save(4, 2.0), save(5, 6.0)};
  const auto out = dir_ + "/average.pt";
  train::average_checkpoints(in, out);
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  Tiny m;
  train::load_model_weights(out, *m);
  for (const auto& p : m->named_parameters()) {
    EXPECT_TRUE(torch::allclose(p.value(), torch::full_like(p.value(), 3.0))) << p.key();
  }
  EXPECT_EQ(m->count.item<int64_t>(), 5);
  const auto st = train::read_training_state(out);
  EXPECT_EQ(st.epoch, 5);
  EXPECT_EQ(st.step, 50);
  EXPECT_EQ(st.metric_rows.at("train/loss"), 5);
  // The same names as a checkpoint of the model itself.
  auto avg = train::checkpoint_tensors(out), one = train::checkpoint_tensors(in.front());
  ASSERT_EQ(avg.size(), one.size());
  for (const auto& [k, t] : one) {
    ASSERT_TRUE(avg.count(k)) << k;
    EXPECT_EQ(avg.at(k).scalar_type(), t.scalar_type()) << k;
  }
}

TEST_F(CheckpointAverage, OneCheckpointIsItself) {
  const auto in = save(7, 0.25);
  train::average_checkpoints({in}, dir_ + "/one.pt");
  auto a = train::checkpoint_tensors(in), b = train::checkpoint_tensors(dir_ + "/one.pt");
  for (const auto& [k, t] : a) EXPECT_TRUE(torch::equal(t, b.at(k))) << k;
}

TEST_F(CheckpointAverage, KeptCheckpointsAreTheEpochFilesInEpochOrder) {
  for (int64_t e : {10, 9, 2}) save(e, 1.0);
  for (const char* other : {"epoch-x.pt", "epoch-.pt", "epoch-3.pt.tmp", "epoch-4x.pt", "best.pt", "last.pt"}) {
    std::ofstream(dir_ + "/" + other) << "x";
  }
  const auto kept = train::kept_checkpoints(dir_);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0].epoch, 2);
  EXPECT_EQ(kept[1].epoch, 9);
  EXPECT_EQ(kept[2].epoch, 10);  // numeric, not "10" < "2"
  EXPECT_EQ(fs::path(kept[2].path).filename(), "epoch-10.pt");
  EXPECT_EQ(kept[2].path, train::epoch_checkpoint_path(dir_, 10));
  EXPECT_TRUE(train::kept_checkpoints(dir_ + "/nowhere").empty());
}

TEST_F(CheckpointAverage, DifferentModelsAreOneErrorNamingBothFiles) {
  const auto a = save(1, 1.0);
  torch::nn::Linear other(4, 2);
  const auto b = dir_ + "/epoch-2.pt";
  train::save_checkpoint(b, *other, nullptr, {});
  try {
    train::average_checkpoints({a, b}, dir_ + "/average.pt");
    FAIL() << "averaged two different models";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(a), std::string::npos) << what;
    EXPECT_NE(what.find(b), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(dir_ + "/average.pt"));
  EXPECT_THROW(train::average_checkpoints({}, dir_ + "/average.pt"), DataError);
}

}  // namespace
