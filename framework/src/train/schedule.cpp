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
                   {"inverse_sqrt", S::Type::InverseSqrt}},
                  "learning-rate schedule: constant, linear_warmup (then constant) or inverse_sqrt (warmup, then "
                  "1/sqrt(step))")
          .option("warmup_steps", &S::warmup_steps, "warmup length in optimizer steps (linear_warmup, inverse_sqrt)",
                  {.min = 1})
          .option("d_model", &S::d_model,
                  "inverse_sqrt: > 0 uses Vaswani's factor * d_model^-0.5 scale instead of the lr", {.min = 0})
          .option("factor", &S::factor, "inverse_sqrt with d_model: multiplies d_model^-0.5", {.min = 0.0});
  return b;
}

}  // namespace

config::Schema schedule_schema() { return schedule_binding().schema(); }

LrSchedule parse_schedule(const config::Node& node, double lr, const std::string& owner) {
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
  return s;
}

}  // namespace attnlab::train
