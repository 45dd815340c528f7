#include <attnlab/train/trainer.hpp>

namespace attnlab::train {

int64_t Trainer::num_parameters(const TrainContext& ctx) const {
  if (ctx.model) return nn::count_parameters(*ctx.model);
  if (ctx.custom) return nn::count_parameters(*ctx.custom);
  return 0;
}

}  // namespace attnlab::train
