#pragma once
// Learning-rate schedules for trainers, as the `schedule:` option of a trainer:
//   schedule: {type: constant}                                        lr_t = lr
//   schedule: {type: linear_warmup, warmup_steps: W}                  lr_t = lr * min(1, t / W)
//   schedule: {type: inverse_sqrt, warmup_steps: W}                   lr_t = lr * sqrt(W) * min(t^-0.5, t * W^-1.5)
//   schedule: {type: inverse_sqrt, warmup_steps: W, d_model: D, factor: F}
//                                                                     lr_t = F * D^-0.5 * min(t^-0.5, t * W^-1.5)
// t is the 1-based optimizer step. inverse_sqrt without d_model is fairseq's inverse_sqrt (linear
// warmup to the trainer's lr at step W, then lr * sqrt(W / t)); with d_model it is Vaswani et al.
// (2017), eq. 3 ("Noam"), scaled by factor (the trainer's lr is then unused).
#include <attnlab/config/node.hpp>
#include <attnlab/config/schema.hpp>

#include <cstdint>
#include <string>

namespace attnlab::train {

struct LrSchedule {
  enum class Type { Constant, LinearWarmup, InverseSqrt };
  Type type = Type::Constant;
  double lr = 1e-3;           // the trainer's base learning rate
  int64_t warmup_steps = 4000;  // W (>= 1; linear_warmup and inverse_sqrt)
  int64_t d_model = 0;        // > 0: Vaswani's d_model^-0.5 scale instead of lr * sqrt(W)
  double factor = 1.0;        // multiplies the Vaswani scale

  /// Learning rate for optimizer step `step` (1-based).
  double at(int64_t step) const;
};

/// Options of the `schedule:` map: type, warmup_steps, d_model and factor, declared once as the
/// fields above (config::Binding; the lr is the trainer's).
config::Schema schedule_schema();

/// Validates `node` (a map; null = constant) against schedule_schema(); ConfigErrors point into
/// the experiment file (e.g. warmup_steps 0 for inverse_sqrt).
LrSchedule parse_schedule(const config::Node& node, double lr, const std::string& owner);

}  // namespace attnlab::train
