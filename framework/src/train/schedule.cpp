// Learning-rate schedules: constant, linear warmup, inverse square root (fairseq / Vaswani).
#include <attnlab/train/schedule.hpp>

#include <attnlab/config/binding.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace attnlab::train {

double LrSchedule::at(int64_t step) const {
  const double t = static_cast<double>(std::max<int64_t>(step, 1));
  const double w = static_cast<double>(std::max<int64_t>(warmup_steps, 1));
  switch (type) {
    case Type::Constant: return lr;
    case Type::LinearWarmup: return lr * std::min(1.0, t / w);
    case Type::InverseSqrt: {
      const double shape = std::min(1.0 / std::sqrt(t), t * std::pow(w, -1.5));
      const double scale = d_model > 0 ? factor / std::sqrt(static_cast<double>(d_model)) : lr * std::sqrt(w);
      return scale * shape;
    }
    case Type::Cosine: {
      if (t <= w) return lr * t / w;
      const double span = static_cast<double>(std::max<int64_t>(total_steps - warmup_steps, 1));
      const double progress = std::min(1.0, (t - w) / span);
      return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(M_PI * progress));
    }
  }
  return lr;
}

namespace {

const config::Binding<LrSchedule>& schedule_binding() {
  using S = LrSchedule;
  static const auto b =
      config::Binding<S>()
          .choice("type", &S::type,
                  {{"constant", S::Type::Constant},
                   {"linear_warmup", S::Type::LinearWarmup},
                   {"inverse_sqrt", S::Type::InverseSqrt},
                   {"cosine", S::Type::Cosine}},
                  "learning-rate schedule: constant, linear_warmup (then constant), inverse_sqrt (warmup, then "
                  "1/sqrt(step)) or cosine (warmup, then a half cosine down to min_lr at total_steps)")
          .option("warmup_steps", &S::warmup_steps,
                  "warmup length in optimizer steps (linear_warmup, inverse_sqrt, cosine)", {.min = 1})
          .option("total_steps", &S::total_steps,
                  "cosine: the step where the rate reaches min_lr and stays; 0 = the trainer's whole run", {.min = 0})
          .option("min_lr", &S::min_lr, "cosine: the rate it decays to", {.min = 0.0})
          .option("d_model", &S::d_model,
                  "inverse_sqrt: > 0 uses Vaswani's factor * d_model^-0.5 scale instead of the lr", {.min = 0})
          .option("factor", &S::factor, "inverse_sqrt with d_model: multiplies d_model^-0.5", {.min = 0.0});
  return b;
}

}  // namespace

config::Schema schedule_schema() { return schedule_binding().schema(); }

LrSchedule parse_schedule(const config::Node& node, double lr, const std::string& owner, int64_t total_steps) {
  const auto& b = schedule_binding();
  config::Options o(node, b.schema(), owner + " schedule", {});
  LrSchedule s = b.read(o);
  s.lr = lr;
  const std::string& d_model = b.name_of(&LrSchedule::d_model);
  const std::string& factor = b.name_of(&LrSchedule::factor);
  if (s.type != LrSchedule::Type::InverseSqrt && (o.given(d_model) || o.given(factor))) {
    o.fail(o.given(d_model) ? d_model : factor,
           fmt::format("only the inverse_sqrt schedule takes {} and {}", d_model, factor));
  }
  const std::string& total = b.name_of(&LrSchedule::total_steps);
  const std::string& min_lr = b.name_of(&LrSchedule::min_lr);
  if (s.type != LrSchedule::Type::Cosine && (o.given(total) || o.given(min_lr))) {
    o.fail(o.given(total) ? total : min_lr, fmt::format("only the cosine schedule takes {} and {}", total, min_lr));
  }
  if (s.type == LrSchedule::Type::Cosine) {
    if (s.total_steps == 0 && total_steps > 0) s.total_steps = total_steps;
    if (s.total_steps == 0 && total_steps == 0) {
      o.fail(b.name_of(&LrSchedule::type),
             fmt::format("a cosine schedule needs {}: this trainer does not know its run's steps in advance", total));
    }
    if (s.total_steps > 0 && s.total_steps <= s.warmup_steps) {
      o.fail(o.given(total) ? total : b.name_of(&LrSchedule::warmup_steps),
             fmt::format("the cosine schedule's {} {} must exceed its warmup_steps {}", total, s.total_steps,
                         s.warmup_steps));
    }
    if (s.min_lr > lr) {
      o.fail(min_lr, fmt::format("{} {} is above the trainer's lr {}", min_lr, s.min_lr, lr));
    }
  }
  return s;
}

void fill_total_steps(LrSchedule& schedule, int64_t total_steps) {
  if (schedule.type == LrSchedule::Type::Cosine && schedule.total_steps == 0) schedule.total_steps = total_steps;
}

}  // namespace attnlab::train
