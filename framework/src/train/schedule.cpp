// Learning-rate schedules: constant, linear warmup, inverse square root (fairseq / Vaswani).
#include <attnlab/train/schedule.hpp>

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

config::Schema schedule_schema() {
  using namespace config;
  return {opt_enum("type", "constant", {"constant", "linear_warmup", "inverse_sqrt"},
                   "learning-rate schedule: constant, linear_warmup (then constant) or inverse_sqrt (warmup, then "
                   "1/sqrt(step))"),
          opt_int("warmup_steps", 4000, "warmup length in optimizer steps (linear_warmup, inverse_sqrt)", 1),
          opt_int("d_model", 0, "inverse_sqrt: > 0 uses Vaswani's factor * d_model^-0.5 scale instead of the lr", 0),
          opt_float("factor", 1.0, "inverse_sqrt with d_model: multiplies d_model^-0.5", 0.0)};
}

LrSchedule parse_schedule(const config::Node& node, double lr, const std::string& owner) {
  config::Options o(node, schedule_schema(), owner + " schedule", {});
  LrSchedule s;
  const auto type = o.get_string("type");
  s.type = type == "linear_warmup" ? LrSchedule::Type::LinearWarmup
           : type == "inverse_sqrt" ? LrSchedule::Type::InverseSqrt
                                    : LrSchedule::Type::Constant;
  s.lr = lr;
  s.warmup_steps = o.get_int("warmup_steps");
  s.d_model = o.get_int("d_model");
  s.factor = o.get_float("factor");
  if (s.type != LrSchedule::Type::InverseSqrt && (o.given("d_model") || o.given("factor"))) {
    o.fail(o.given("d_model") ? "d_model" : "factor", "only the inverse_sqrt schedule takes d_model and factor");
  }
  return s;
}

}  // namespace attnlab::train
