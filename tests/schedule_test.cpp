// Learning-rate schedules: constant, linear warmup, inverse square root (fairseq and Vaswani).
#include <attnlab/config/node.hpp>
#include <attnlab/error.hpp>
#include <attnlab/train/schedule.hpp>

#include <gtest/gtest.h>

#include <cmath>

namespace attnlab::train {
namespace {

LrSchedule parse(const std::string& yaml, double lr = 0.01) {
  return parse_schedule(config::parse_yaml(yaml, "test.yaml"), lr, "the trainer");
}

TEST(Schedule, Constant) {
  auto s = parse("{type: constant}");
  EXPECT_DOUBLE_EQ(s.at(1), 0.01);
  EXPECT_DOUBLE_EQ(s.at(100000), 0.01);
  EXPECT_DOUBLE_EQ(parse("{}").at(7), 0.01);
}

TEST(Schedule, LinearWarmupThenConstant) {
  auto s = parse("{type: linear_warmup, warmup_steps: 4}");
  EXPECT_DOUBLE_EQ(s.at(1), 0.0025);
  EXPECT_DOUBLE_EQ(s.at(2), 0.005);
  EXPECT_DOUBLE_EQ(s.at(4), 0.01);
  EXPECT_DOUBLE_EQ(s.at(40), 0.01);
}

TEST(Schedule, InverseSqrtPeaksAtTheLrAfterWarmup) {
  auto s = parse("{type: inverse_sqrt, warmup_steps: 100}");  // fairseq's inverse_sqrt
  EXPECT_DOUBLE_EQ(s.at(100), 0.01);
  EXPECT_NEAR(s.at(50), 0.005, 1e-15);                    // linear warmup
  EXPECT_NEAR(s.at(400), 0.01 * std::sqrt(100.0 / 400.0), 1e-15);  // then lr * sqrt(W / t)
}

TEST(Schedule, VaswaniNoam) {
  auto s = parse("{type: inverse_sqrt, warmup_steps: 4000, d_model: 512, factor: 2}");
  auto noam = [](double t) { return 2.0 * std::pow(512.0, -0.5) * std::min(std::pow(t, -0.5), t * std::pow(4000.0, -1.5)); };
  for (int64_t t : {1, 10, 3999, 4000, 4001, 100000}) EXPECT_NEAR(s.at(t), noam(static_cast<double>(t)), 1e-15) << t;
  EXPECT_NEAR(s.at(4000), 2.0 / std::sqrt(512.0 * 4000.0), 1e-15);
}

TEST(Schedule, BadOptionsAreConfigErrors) {
  EXPECT_THROW(parse("{type: cosine}"), ConfigError);
  EXPECT_THROW(parse("{type: inverse_sqrt, warmup_steps: 0}"), ConfigError);
  EXPECT_THROW(parse("{type: constant, d_model: 512}"), ConfigError);
  EXPECT_THROW(parse("{type: inverse_sqrt, warmpu_steps: 3}"), ConfigError);
}

}  // namespace
}  // namespace attnlab::train
