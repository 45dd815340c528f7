// A trainer plugin for the lifecycle tests: it trains nothing and reports, every epoch, a finite
// train loss and the validation loss given by its `val_loss` option (nan, inf, or a number). The
// runner must call the run diverged from any non-finite *loss a trainer reports, not only from
// the seq2seq trainer's own check, and stop the trainer through TrainContext::stop. With
// `fail_at_epoch: N` it throws a torch error (whose what() carries a C++ backtrace) at epoch N.
#include <attnlab/train/trainer.hpp>

#include <torch/types.h>

namespace {
using namespace attnlab;

class ReportingTrainer final : public train::Trainer {
 public:
  explicit ReportingTrainer(const config::Options& o)
      : epochs_(o.get_int("max_epochs")), fail_at_(o.get_int("fail_at_epoch")), val_loss_(o.get_float("val_loss")) {}

  train::FitResult fit(train::TrainContext& ctx) override {
    for (int64_t epoch = 1; epoch <= epochs_; ++epoch) {
      if (ctx.stopped()) return train::FitResult::Interrupted;
      TORCH_CHECK(epoch != fail_at_, "deliberate failure at epoch ", epoch);
      train::EpochReport r;
      r.epoch = epoch;
      r.train["loss"] = 1.0 / static_cast<double>(epoch);
      r.val["loss"] = val_loss_;
      ctx.on_epoch(r);
    }
    return train::FitResult::Completed;
  }
  int64_t max_epochs() const override { return epochs_; }

 private:
  int64_t epochs_;
  int64_t fail_at_;
  double val_loss_;
};

config::Schema schema() {
  using namespace config;
  auto val_loss = opt_float("val_loss", 0.5, "the validation loss reported every epoch (.nan and .inf allowed)");
  val_loss.allow_non_finite = true;
  return {opt_int("max_epochs", 5, "epochs to report", 1), val_loss,
          opt_int("fail_at_epoch", 0, "throw a torch error at this epoch (0 = never)", 0)};
}

std::shared_ptr<train::Trainer> make(const config::Options& o, const plugin::BuildContext&) {
  return std::make_shared<ReportingTrainer>(o);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::train::Trainer, "test_reporting", "reports fixed losses (lifecycle tests)", schema, make)
