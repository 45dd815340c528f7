#pragma once
// What the epoch-loop hooks of the token trainers (seq2seq, lm) share, header-only as
// plugins/scorer/common: the epoch's summed token loss kept on the device and read once at its
// end, the scored tokens counted on the host, a global batch's normalizer (its scored tokens, for a
// mean token loss), and each step's rows padded to bucket shapes under CUDA graphs.
#include <attnlab/data/dataset.hpp>
#include <attnlab/train/epoch_loop.hpp>
#include <attnlab/train/trainer.hpp>

#include <torch/types.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace attnlab::trainers {

class TokenHooks : public train::EpochHooks {
 public:
  void begin_epoch(int64_t epoch) override {
    EpochHooks::begin_epoch(epoch);
    loss_sum_ = torch::zeros({}, torch::dtype(torch::kDouble).device(ctx_.device));  // on device, read once
    tokens_ = 0;
  }

  double normalizer(const data::Batch& global) const override {
    return static_cast<double>(global.tgt_valid_lens.sum().item<int64_t>());  // a mean over the scored tokens
  }

  void after_step(const std::vector<torch::Tensor>& outs, const data::Batch& rows,
                  const train::StepShare& share) override {
    const int64_t n = rows.tgt_valid_lens.sum().item<int64_t>();  // CPU tensor: no device sync
    // One process: the mean over the batch's tokens; a data-parallel run: this rank's sum.
    loss_sum_ += share.whole ? outs[0].to(torch::kDouble) * static_cast<double>(n) : outs[0].to(torch::kDouble);
    tokens_ += n;
  }

 protected:
  TokenHooks(train::TrainContext& ctx, int64_t pad_id, int64_t graph_pad)
      : ctx_(ctx), pad_id_(pad_id), graph_pad_(graph_pad) {}

  /// The step's rows on the device; `graphed`: padded to the most rows seen and to lengths of a
  /// few multiples, so that a captured step sees few shapes.
  data::Batch on_device(const data::Batch& rows, bool graphed) {
    data::Batch shaped = rows;
    if (graphed) {
      bucket_rows_ = std::max(bucket_rows_, rows.size());
      shaped = data::pad_to_bucket(rows, bucket_rows_, graph_pad_, pad_id_);
    }
    return shaped.to(ctx_.device, true);
  }

  struct TrainSums {
    double loss = 0;     // mean token loss of the epoch (over every rank)
    double tokens = 0;   // scored tokens (over every rank)
    double seconds = 0;  // since the epoch began, the device's work included
  };
  /// The one read of the epoch's sums; it waits for the device, so the time includes its work.
  TrainSums train_sums(const train::EpochEnd& end) const {
    const auto all = end.sum({loss_sum_.item<double>(), static_cast<double>(tokens_)});
    return {all[0] / std::max(all[1], 1.0), all[1], end.seconds()};
  }

  train::TrainContext& ctx_;

 private:
  int64_t pad_id_, graph_pad_;
  torch::Tensor loss_sum_;
  int64_t tokens_ = 0;
  int64_t bucket_rows_ = 0;
};

}  // namespace attnlab::trainers
