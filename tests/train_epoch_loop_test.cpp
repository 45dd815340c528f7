// The epoch loop (attnlab/train/epoch_loop.hpp) on a toy regression, without the runner: one
// process takes the trainer's own steps bit for bit, a data-parallel rank gets its rows and
// scale, stopping, divergence, patience, checkpoints and resume.
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>
#include <attnlab/train/checkpoint.hpp>
#include <attnlab/train/distributed.hpp>
#include <attnlab/train/epoch_loop.hpp>

#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "testing/testing.hpp"

namespace {
using namespace attnlab;

/// y = 2x + 1 with noise: `batches` batches of `rows` rows, src [rows, 1], tgt_out [rows, 1].
std::vector<data::Batch> line_batches(int64_t batches, int64_t rows) {
  torch::manual_seed(7);
  std::vector<data::Batch> out;
  for (int64_t i = 0; i < batches; ++i) {
    data::Batch b;
    b.src = torch::randn({rows, 1});
    b.tgt_out = 2 * b.src + 1 + 0.1 * torch::randn({rows, 1});
    out.push_back(b);
  }
  return out;
}

/// A linear model fitted by the mean squared error, as the hooks of a trainer. Records what the
/// loop hands it.
class LineHooks : public train::EpochHooks {
 public:
  explicit LineHooks(std::vector<data::Batch> batches) : batches_(std::move(batches)) {}

  torch::nn::Module& module() override { return *linear; }
  std::vector<data::Batch> batches(const train::TrainContext&, int64_t) override { return batches_; }
  void begin_epoch(int64_t epoch) override {
    EpochHooks::begin_epoch(epoch);
    sum_ = torch::zeros({}, torch::kDouble);
    steps_ = 0;
  }
  double normalizer(const data::Batch& global) const override { return static_cast<double>(global.tgt_out.numel()); }
  std::vector<torch::Tensor> inputs(const data::Batch& rows, const train::StepShare& share, bool) override {
    shares.push_back(share);
    return {rows.src, rows.tgt_out};
  }
  std::vector<torch::Tensor> loss(const std::vector<torch::Tensor>& in, bool summed) override {
    grad_mode_in_loss = torch::GradMode::is_enabled();
    auto se = (linear->forward(in[0]) - in[1]).pow(2);  // [B, 1]
    return {summed ? se.sum() : se.mean()};
  }
  void after_step(const std::vector<torch::Tensor>& outs, const data::Batch&, const train::StepShare&) override {
    sum_ += outs[0].to(torch::kDouble);
    ++steps_;
    ++after_steps;
  }
  void end_epoch(train::EpochReport& r, const train::EpochEnd& end) override {
    r.train["loss"] = end.sum({sum_.item<double>()})[0] / static_cast<double>(std::max<int64_t>(steps_, 1));
    if (epoch_loss) r.train["loss"] = epoch_loss(r.epoch);
    if (selected) r.val["loss"] = selected(r.epoch);
  }
  train::Selection selection(const train::EpochReport& r) const override {
    auto s = EpochHooks::selection(r);
    s.higher_is_better = higher_is_better;
    return s;
  }

  torch::nn::Linear linear{1, 1};
  std::vector<train::StepShare> shares;
  int64_t after_steps = 0;
  bool grad_mode_in_loss = true;
  bool higher_is_better = false;
  std::function<double(int64_t)> epoch_loss, selected;  // overrides of the reported numbers

 private:
  std::vector<data::Batch> batches_;
  torch::Tensor sum_;
  int64_t steps_ = 0;
};

/// Rank `rank` of a data-parallel run of `world` processes in which the others take no part: sums
/// and maxima are this rank's own, and every step's hooks are counted.
class LoneRank final : public train::Distributed {
 public:
  LoneRank(int rank, int world) : rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend() const override { return "none"; }
  void attach(const std::vector<torch::Tensor>& parameters, const std::vector<torch::Tensor>&) override {
    attached = static_cast<int64_t>(parameters.size());
  }
  void prepare_for_backward() override { ++prepared; }
  std::vector<double> sum(const std::vector<double>& v) override { return v; }
  std::vector<double> max(const std::vector<double>& v) override { return v; }
  std::string share(const std::string& v) override { return v; }
  bool should_stop(bool stop_here) override { return stop_here; }
  void barrier() override {}
  train::AllReduceStats all_reduce_stats() override { return {}; }

  int64_t attached = -1, prepared = 0;

 private:
  int rank_, world_;
};

train::LoopOptions options(int64_t epochs, double lr = 0.1) {
  return {.who = "line", .max_epochs = epochs, .schedule = {.lr = lr}};
}

class EpochLoop : public testutil::SeededTest {
 protected:
  void SetUp() override {
    SeededTest::SetUp();
    dir_ = testutil::temp_dir("attnlab-epoch-loop");
    ctx_.on_epoch = [this](const train::EpochReport& r) { reports_.push_back(r); };
  }
  std::string dir_;
  train::TrainContext ctx_;
  std::vector<train::EpochReport> reports_;
};

TEST_F(EpochLoop, OneProcessTakesTheTrainersOwnStepsBitForBit) {
  const auto batches = line_batches(3, 8);
  LineHooks hooks(batches);
  torch::optim::SGD sgd(hooks.linear->parameters(), torch::optim::SGDOptions(0.1));
  torch::nn::Linear by_hand{1, 1};
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < 2; ++i) by_hand->parameters()[i].copy_(hooks.linear->parameters()[i]);
  }
  torch::optim::SGD sgd_by_hand(by_hand->parameters(), torch::optim::SGDOptions(0.1));
  ASSERT_EQ(train::run_epochs(ctx_, hooks, &sgd, options(2)), train::FitResult::Completed);
  std::vector<double> losses;
  for (int epoch = 0; epoch < 2; ++epoch) {
    double sum = 0;
    for (const auto& b : batches) {
      sgd_by_hand.zero_grad();
      auto loss = (by_hand->forward(b.src) - b.tgt_out).pow(2).mean();
      loss.backward();
      sgd_by_hand.step();
      sum += loss.item<double>();
    }
    losses.push_back(sum / 3);
  }
  ASSERT_EQ(reports_.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(reports_[i].epoch, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(reports_[i].train.at("loss"), losses[i]) << "epoch " << i + 1;
  }
  for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(torch::equal(hooks.linear->parameters()[i], by_hand->parameters()[i]));
  for (const auto& s : hooks.shares) {
    EXPECT_TRUE(s.whole);
    EXPECT_EQ(s.begin, 0);
    EXPECT_EQ(s.end, 8);
    EXPECT_EQ(s.scale, 1.0);
  }
}

TEST_F(EpochLoop, ADataParallelRankTakesItsRowsScaledAndAStandInCountsNothing) {
  // Three ranks: of a batch of 6 rows rank 2 takes rows 4 and 5, and its summed loss is scaled by
  // 3 / 6 values; of a batch of 2 rows it has none, steps with a stand-in row of scale 0, and its
  // outputs are not added.
  std::vector<data::Batch> batches = line_batches(1, 6);
  batches.push_back(line_batches(1, 2)[0]);
  LineHooks hooks(batches);
  LoneRank rank(2, 3);
  ctx_.distributed = &rank;
  torch::optim::SGD sgd(hooks.linear->parameters(), torch::optim::SGDOptions(0.1));
  torch::nn::Linear by_hand{1, 1};
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < 2; ++i) by_hand->parameters()[i].copy_(hooks.linear->parameters()[i]);
  }
  ASSERT_EQ(train::run_epochs(ctx_, hooks, &sgd, options(1)), train::FitResult::Completed);
  EXPECT_EQ(rank.attached, 2);  // weight and bias
  EXPECT_EQ(rank.prepared, 2);  // before each backward
  ASSERT_EQ(hooks.shares.size(), 2u);
  const auto& mine = hooks.shares[0];
  EXPECT_FALSE(mine.whole);
  EXPECT_EQ(mine.begin, 4);
  EXPECT_EQ(mine.end, 6);
  EXPECT_EQ(mine.normalizer, 6.0);
  EXPECT_EQ(mine.scale, 0.5);
  EXPECT_TRUE(mine.counts);
  const auto& stand_in = hooks.shares[1];
  EXPECT_FALSE(stand_in.counts);
  EXPECT_EQ(stand_in.scale, 0.0);
  EXPECT_EQ(stand_in.end - stand_in.begin, 1);
  EXPECT_EQ(hooks.after_steps, 1);
  // The first step differentiated 0.5 x the squared errors of rows 4 and 5; the stand-in's zero
  // gradient left SGD where it was.
  torch::optim::SGD sgd_by_hand(by_hand->parameters(), torch::optim::SGDOptions(0.1));
  const auto& b = batches[0];
  const auto x = b.src.slice(0, 4, 6), y = b.tgt_out.slice(0, 4, 6);  // [2, 1]
  sgd_by_hand.zero_grad();
  const auto sse = (by_hand->forward(x) - y).pow(2).sum();  // before the step
  (sse * 0.5).backward();
  sgd_by_hand.step();
  for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(torch::equal(hooks.linear->parameters()[i], by_hand->parameters()[i]));
  // after_step saw the rows' summed loss, unscaled (the others take no part here: the sums are
  // this rank's).
  ASSERT_EQ(reports_.size(), 1u);
  EXPECT_EQ(reports_[0].train.at("loss"), sse.item<double>());
}

TEST_F(EpochLoop, AStopRequestEndsTheFitBeforeTheNextStep) {
  LineHooks hooks(line_batches(2, 4));
  std::atomic<bool> stop{true};
  ctx_.stop = &stop;
  torch::optim::SGD sgd(hooks.linear->parameters(), torch::optim::SGDOptions(0.1));
  EXPECT_EQ(train::run_epochs(ctx_, hooks, &sgd, options(3)), train::FitResult::Interrupted);
  EXPECT_TRUE(hooks.shares.empty());
  EXPECT_TRUE(reports_.empty());
}

TEST_F(EpochLoop, ANonFiniteTrainLossEndsTheFitDivergedAfterItsReport) {
  LineHooks hooks(line_batches(2, 4));
  hooks.epoch_loss = [](int64_t epoch) { return epoch == 2 ? std::nan("") : 1.0; };
  torch::optim::SGD sgd(hooks.linear->parameters(), torch::optim::SGDOptions(0.1));
  EXPECT_EQ(train::run_epochs(ctx_, hooks, &sgd, options(5)), train::FitResult::Diverged);
  EXPECT_EQ(reports_.size(), 2u);
}

TEST_F(EpochLoop, WithoutAnOptimizerTheLossRunsAloneWithoutGradients) {
  LineHooks hooks(line_batches(2, 4));
  const auto weight = hooks.linear->weight.detach().clone();
  EXPECT_EQ(train::run_epochs(ctx_, hooks, nullptr, options(2)), train::FitResult::Completed);
  EXPECT_FALSE(hooks.grad_mode_in_loss);
  EXPECT_TRUE(torch::equal(hooks.linear->weight, weight));
  EXPECT_FALSE(hooks.linear->weight.grad().defined());
  EXPECT_EQ(reports_.size(), 2u);
  EXPECT_EQ(hooks.after_steps, 4);
}

TEST_F(EpochLoop, PatienceStopsAtTheSelectionsBestAndCheckpointsFollowIt) {
  // val/loss 3, 2, 2.5, 2.6, ...: the best is epoch 2, and patience 2 stops after epoch 4.
  const auto path = dir_ + "/run.h5";
  auto res = std::make_unique<results::Results>(path, "line");
  ctx_.results = res.get();
  ctx_.checkpoint_dir = train::checkpoint_dir(path);
  LineHooks hooks(line_batches(2, 4));
  hooks.selected = [](int64_t epoch) { return epoch == 1 ? 3.0 : epoch == 2 ? 2.0 : 2.0 + 0.1 * epoch; };
  torch::optim::SGD sgd(hooks.linear->parameters(), torch::optim::SGDOptions(0.1));
  auto o = options(10);
  o.loop = {.checkpoints = true, .keep_checkpoints = 2, .patience = 2};
  ASSERT_EQ(train::run_epochs(ctx_, hooks, &sgd, o), train::FitResult::Completed);
  EXPECT_EQ(reports_.size(), 4u);
  ctx_.results = nullptr;
  res.reset();
  EXPECT_EQ(results::ResultsReader(path).attr_int("stopped_early_after_epoch"), 4);
  const auto best = train::read_training_state(ctx_.checkpoint_dir + "/best.pt");
  const auto last = train::read_training_state(ctx_.checkpoint_dir + "/last.pt");
  EXPECT_EQ(best.epoch, 2);
  EXPECT_EQ(best.best_metric, 2.0);
  EXPECT_EQ(last.epoch, 4);
  EXPECT_EQ(last.best_epoch, 2);
  std::vector<int64_t> kept;
  for (const auto& k : train::kept_checkpoints(ctx_.checkpoint_dir)) kept.push_back(k.epoch);
  EXPECT_EQ(kept, (std::vector<int64_t>{3, 4}));
}

TEST_F(EpochLoop, AHigherIsBetterSelectionIsStoredNegated) {
  ctx_.checkpoint_dir = dir_ + "/bleu.ckpt";
  LineHooks hooks(line_batches(1, 4));
  hooks.higher_is_better = true;
  hooks.selected = [](int64_t epoch) { return epoch == 2 ? 30.0 : 20.0; };  // a BLEU
  torch::optim::SGD sgd(hooks.linear->parameters(), torch::optim::SGDOptions(0.1));
  auto o = options(3);
  o.loop.checkpoints = true;
  ASSERT_EQ(train::run_epochs(ctx_, hooks, &sgd, o), train::FitResult::Completed);
  const auto best = train::read_training_state(ctx_.checkpoint_dir + "/best.pt");
  EXPECT_EQ(best.epoch, 2);
  EXPECT_EQ(best.best_metric, -30.0);
}

TEST_F(EpochLoop, AResumedFitEqualsOneThatRanThrough) {
  // Adam, so that the optimizer's state must come back too; 2 epochs, then a new model and
  // optimizer resumed to 4, against 4 at once.
  const auto batches = line_batches(3, 4);
  const auto fit = [&](LineHooks& hooks, int64_t epochs, const std::string& dir, bool resume) {
    torch::optim::Adam adam(hooks.linear->parameters(), torch::optim::AdamOptions(0.05));
    ctx_.checkpoint_dir = dir;
    ctx_.resume = resume;
    auto o = options(epochs, 0.05);
    o.loop.checkpoints = true;
    return train::run_epochs(ctx_, hooks, &adam, o);
  };
  torch::manual_seed(1);
  LineHooks whole(batches);
  torch::manual_seed(1);
  LineHooks first(batches), second(batches);
  ASSERT_EQ(fit(whole, 4, dir_ + "/whole", false), train::FitResult::Completed);
  const auto through = reports_;
  reports_.clear();
  ASSERT_EQ(fit(first, 2, dir_ + "/parts", false), train::FitResult::Completed);
  ASSERT_EQ(fit(second, 4, dir_ + "/parts", true), train::FitResult::Completed);
  ASSERT_EQ(reports_.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(reports_[i].train.at("loss"), through[i].train.at("loss")) << i;
  for (size_t i = 0; i < 2; ++i)
    EXPECT_TRUE(torch::equal(second.linear->parameters()[i], whole.linear->parameters()[i]));
}

}  // namespace
