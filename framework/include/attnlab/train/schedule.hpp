#pragma once
// Learning-rate schedules for trainers, as the `schedule:` option of a trainer:
//   schedule: {type: constant}                                        lr_t = lr
//   schedule: {type: linear_warmup, warmup_steps: W}                  lr_t = lr * min(1, t / W)
//   schedule: {type: inverse_sqrt, warmup_steps: W}                   lr_t = lr * sqrt(W) * min(t^-0.5, t * W^-1.5)
//   schedule: {type: inverse_sqrt, warmup_steps: W, d_model: D, factor: F}
//                                                                     lr_t = F * D^-0.5 * min(t^-0.5, t * W^-1.5)
//   schedule: {type: cosine, warmup_steps: W, total_steps: T, min_lr: m}
//                                   lr_t = lr * t / W for t <= W, then m + (lr - m) (1 + cos(pi (t - W) / (T - W))) / 2,
//                                   m after T (GPT-2, nanoGPT, Chinchilla); T null: the trainer's whole run
// t is the 1-based optimizer step. inverse_sqrt without d_model is fairseq's inverse_sqrt (linear
// warmup to the trainer's lr at step W, then lr * sqrt(W / t)); with d_model it is Vaswani et al.
// (2017), eq. 3 ("Noam"), scaled by factor (the trainer's lr is then unused).
#include <attnlab/config/node.hpp>
#include <attnlab/config/schema.hpp>

#include <cstdint>
#include <string>

namespace attnlab::train {

struct LrSchedule {
  enum class Type { Constant, LinearWarmup, InverseSqrt, Cosine };
  Type type = Type::Constant;
  double lr = 1e-3;           // the trainer's base learning rate
  int64_t warmup_steps = 4000;  // W (>= 1; linear_warmup and inverse_sqrt)
  int64_t d_model = 0;        // > 0: Vaswani's d_model^-0.5 scale instead of lr * sqrt(W)
  double factor = 1.0;        // multiplies the Vaswani scale
  int64_t total_steps = 0;    // cosine: T, the step where lr reaches min_lr (0: set by the trainer)
  double min_lr = 0.0;        // cosine: the floor

  /// Learning rate for optimizer step `step` (1-based).
  double at(int64_t step) const;
};

/// Options of the `schedule:` map: type, warmup_steps, d_model and factor, declared once as the
/// fields above (config::Binding; the lr is the trainer's).
config::Schema schedule_schema();

/// Validates `node` (a map; null = constant) against schedule_schema(); ConfigErrors point into
/// the experiment file (e.g. warmup_steps 0 for inverse_sqrt). `total_steps`: the steps of the
/// whole run when the trainer knows them now (a cosine schedule without total_steps ends there),
/// 0 when it does not: a cosine schedule must then say its total_steps, or -1: the trainer sets
/// them before training (fill_total_steps).
LrSchedule parse_schedule(const config::Node& node, double lr, const std::string& owner, int64_t total_steps = 0);

/// A cosine schedule without total_steps gets `total_steps` (the run's); ConfigError-free: a run
/// shorter than the warmup keeps warming up.
void fill_total_steps(LrSchedule& schedule, int64_t total_steps);

}  // namespace attnlab::train
