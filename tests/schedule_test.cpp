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

TEST(Schedule, CosineWarmsUpThenDecaysToItsFloor) {
  auto s = parse("{type: cosine, warmup_steps: 10, total_steps: 110, min_lr: 0.001}");
  EXPECT_DOUBLE_EQ(s.at(5), 0.005);  // linear warmup
  EXPECT_DOUBLE_EQ(s.at(10), 0.01);
  EXPECT_NEAR(s.at(60), 0.001 + 0.5 * 0.009, 1e-15);  // half way: the mean of lr and min_lr
  EXPECT_NEAR(s.at(35), 0.001 + 0.5 * 0.009 * (1 + std::cos(M_PI / 4)), 1e-15);
  EXPECT_DOUBLE_EQ(s.at(110), 0.001);
  EXPECT_DOUBLE_EQ(s.at(5000), 0.001);  // stays at the floor
  // Without total_steps: the trainer's run, given now or later.
  auto given = parse_schedule(config::parse_yaml("{type: cosine, warmup_steps: 10}", "test.yaml"), 0.01, "t", 110);
  EXPECT_EQ(given.total_steps, 110);
  auto later = parse_schedule(config::parse_yaml("{type: cosine, warmup_steps: 10}", "test.yaml"), 0.01, "t", -1);
  EXPECT_EQ(later.total_steps, 0);
  fill_total_steps(later, 110);
  EXPECT_DOUBLE_EQ(later.at(60), 0.005);
  EXPECT_THROW(parse("{type: cosine, warmup_steps: 10, total_steps: 10}"), ConfigError);
  EXPECT_THROW(parse("{type: cosine, warmup_steps: 1, total_steps: 10, min_lr: 0.5}"), ConfigError);
  EXPECT_THROW(parse("{type: linear_warmup, total_steps: 10}"), ConfigError);
}

TEST(Schedule, BadOptionsAreConfigErrors) {
  EXPECT_THROW(parse("{type: cosine}"), ConfigError);
  EXPECT_THROW(parse("{type: inverse_sqrt, warmup_steps: 0}"), ConfigError);
  EXPECT_THROW(parse("{type: constant, d_model: 512}"), ConfigError);
  EXPECT_THROW(parse("{type: inverse_sqrt, warmpu_steps: 3}"), ConfigError);
}

}  // namespace
}  // namespace attnlab::train
