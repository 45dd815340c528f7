// `runner sweep`'s expansion (framework/src/cli/sweep_spec.cpp): axes from key=a,b and range(),
// quoting, the cartesian product and its names, sweep files, and every error before anything runs.
#include <attnlab/error.hpp>

#include "cli/sweep_spec.hpp"
#include "testing/testing.hpp"

#include <gtest/gtest.h>

#include <fstream>

namespace {
using namespace attnlab;
using namespace attnlab::cli::sweep;
using Strings = std::vector<std::string>;
using testutil::contains;
using testutil::message_of;

Spec parse(const Strings& args) {
  Spec s;
  s.experiment = "x.yaml";
  add_arguments(s, args);
  return s;
}

std::string error_of(const Strings& args) {
  return message_of<ConfigError>([&] { parse(args); });
}

std::string write(const std::string& name, const std::string& text) {
  const auto path = testutil::temp_dir("attnlab-sweep-spec") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(SweepSpec, CommaListsAreAxesAndSingleValuesPlainOverrides) {
  auto s = parse({"model.norm=first,last", "trainer.max_epochs=5", "seed=1, 2 ,3"});
  ASSERT_EQ(s.axes.size(), 2u);
  EXPECT_EQ(s.axes[0].key, "model.norm");
  EXPECT_EQ(s.axes[0].values, (Strings{"first", "last"}));
  EXPECT_EQ(s.axes[1].values, (Strings{"1", "2", "3"}));
  EXPECT_EQ(s.overrides, (Strings{"trainer.max_epochs=5"}));
}

TEST(SweepSpec, RangesAsPython) {
  EXPECT_EQ(split_values("seed", "range(0,4)"), (Strings{"0", "1", "2", "3"}));
  EXPECT_EQ(split_values("seed", "range(1, 10, 4)"), (Strings{"1", "5", "9"}));
  EXPECT_EQ(split_values("seed", "range(3,0,-1)"), (Strings{"3", "2", "1"}));
  EXPECT_EQ(split_values("seed", "range(0,2),10"), (Strings{"0", "1", "10"}));
  // One range is an axis even when it has a single value.
  auto s = parse({"seed=range(5,6)"});
  ASSERT_EQ(s.axes.size(), 1u);
  EXPECT_EQ(s.axes[0].values, (Strings{"5"}));
}

TEST(SweepSpec, QuotesAndBracketsKeepOneValue) {
  auto s = parse({"dataset.name='a,b'", "model.sizes=[1,2]", "model.x={a: 1, b: 2}"});
  EXPECT_TRUE(s.axes.empty());
  EXPECT_EQ(s.overrides, (Strings{"dataset.name='a,b'", "model.sizes=[1,2]", "model.x={a: 1, b: 2}"}));
  EXPECT_EQ(split_values("k", "[1,2],[3,4]"), (Strings{"[1,2]", "[3,4]"}));
  EXPECT_EQ(split_values("k", "\"a,b\",c"), (Strings{"\"a,b\"", "c"}));
}

TEST(SweepSpec, ProductLastAxisFastestWithSafeNames) {
  auto runs = expand(parse({"model.norm=first,last", "seed=range(0,3)", "trainer.lr=0.1"}));
  ASSERT_EQ(runs.size(), 6u);
  EXPECT_EQ(runs[0].overrides, (Strings{"model.norm=first", "seed=0"}));
  EXPECT_EQ(runs[1].overrides, (Strings{"model.norm=first", "seed=1"}));
  EXPECT_EQ(runs[3].overrides, (Strings{"model.norm=last", "seed=0"}));
  EXPECT_EQ(runs[5].name, "model.norm=last_seed=2");
  EXPECT_EQ(expand(parse({"trainer.lr=0.1"})).at(0).name, "run");
  EXPECT_EQ(file_stem({"k=a/b c", "x=[1, 2]"}), "k=a_b_c_x=_1__2_");
  EXPECT_EQ(file_stem({".k=1"}), "_k=1");
  // Values that sanitise alike still get files of their own.
  auto alike = expand(parse({"k=a/b,a_b"}));
  EXPECT_EQ(alike[0].name, "k=a_b");
  EXPECT_EQ(alike[1].name, "k=a_b-2");
  const auto longer = file_stem({"k=" + std::string(300, 'x')});
  EXPECT_EQ(longer.size(), 200u);
  EXPECT_NE(longer, file_stem({"k=" + std::string(301, 'x')}));
}

TEST(SweepSpec, ErrorsNameTheMistake) {
  EXPECT_TRUE(contains(error_of({"seed=1,,2"}), "axis 'seed=1,,2' has an empty value"));
  EXPECT_TRUE(contains(error_of({"seed=1,"}), "has an empty value"));
  EXPECT_TRUE(contains(error_of({"seed=range(3,3)"}), "'range(3,3)' is empty"));
  EXPECT_TRUE(contains(error_of({"seed=range(0,3,0)"}), "step 0"));
  EXPECT_TRUE(contains(error_of({"seed=range(0,x)"}), "'x' is not an integer"));
  EXPECT_TRUE(contains(error_of({"seed=range(5)"}), "has 1 arguments"));
  EXPECT_TRUE(contains(error_of({"seed=range(0,1000001000)"}), "more than 100000 values"));
  // The product's size is checked by expand().
  EXPECT_TRUE(contains(message_of<ConfigError>([] { expand(parse({"a=1,2", "b=range(0,1000)", "c=range(0,1000)"})); }),
                       "more than 100000 runs"));
  EXPECT_TRUE(contains(error_of({"seed=1,2,1"}), "has the value '1' twice"));
  EXPECT_TRUE(contains(error_of({"seed=1,2", "seed=3"}), "'seed' is given twice"));
  EXPECT_TRUE(contains(error_of({"model=x", "model.norm=first,last"}), "'model' and 'model.norm' conflict"));
  EXPECT_TRUE(contains(error_of({"model.norm"}), "is not key=value"));
  EXPECT_TRUE(contains(error_of({"=3"}), "is not key=value"));
  EXPECT_TRUE(contains(error_of({"k=[1,2"}), "unclosed bracket"));
  EXPECT_TRUE(contains(error_of({"k='a,b"}), "unclosed quote"));
  // Keys that only share a prefix do not conflict.
  EXPECT_NO_THROW(parse({"model.norm=first", "model.norm_eps=1,2"}));
}

TEST(SweepSpec, SweepFileAxesOverridesAndOutput) {
  const auto path = write("norm.yaml",
                          "sweep:\n"
                          "  experiment: ../experiments/corners_norm_first.yaml\n"
                          "  axes:\n"
                          "    model.norm: [first, last]\n"
                          "    seed: range(0,2)\n"
                          "    model.sizes: [[1, 2], 'a,b']\n"
                          "  overrides: {trainer.max_epochs: 5}\n"
                          "  output: results/norm\n");
  ASSERT_TRUE(is_sweep_file(path));
  auto s = read_sweep_file(path);
  EXPECT_TRUE(s.experiment.ends_with("experiments/corners_norm_first.yaml")) << s.experiment;
  EXPECT_FALSE(contains(s.experiment, "..")) << s.experiment;
  ASSERT_EQ(s.axes.size(), 3u);
  EXPECT_EQ(s.axes[0].values, (Strings{"first", "last"}));
  EXPECT_EQ(s.axes[1].values, (Strings{"0", "1"}));
  EXPECT_EQ(s.axes[2].values, (Strings{"[1, 2]", "a,b"}));  // list items are never split
  EXPECT_EQ(s.overrides, (Strings{"trainer.max_epochs=5"}));
  EXPECT_EQ(s.output, "results/norm");
  EXPECT_EQ(expand(s).size(), 8u);
  // Command-line arguments add to it, with the same checks.
  EXPECT_TRUE(contains(message_of<ConfigError>([&] { add_arguments(s, {"seed=4"}); }), "'seed' is given twice"));
}

TEST(SweepSpec, SweepFileErrors) {
  EXPECT_FALSE(is_sweep_file(write("exp.yaml", "experiment: x\nseed: 1\n")));
  EXPECT_FALSE(is_sweep_file("/nonexistent/sweep.yaml"));
  auto err = [](const std::string& text) {
    const auto p = write("bad.yaml", text);
    return message_of<ConfigError>([&] { read_sweep_file(p); });
  };
  EXPECT_TRUE(contains(err("sweep:\n  experiment: x.yaml\n  axis: {seed: [1]}\n"), "did you mean 'axes'"));
  EXPECT_TRUE(contains(err("sweep:\n  axes: {seed: [1]}\n"), "experiment"));
  EXPECT_TRUE(contains(err("sweep:\n  experiment: x.yaml\n  axes: {seed: []}\n"), "axis 'seed' has no values"));
  EXPECT_TRUE(contains(err("sweep:\n  experiment: x.yaml\n  axes: {seed: [1, 1]}\n"), "the value '1' twice"));
  EXPECT_TRUE(contains(err("sweep:\n  experiment: x.yaml\n  axes: {seed: {a: 1}}\n"), "expected a list of values"));
  EXPECT_TRUE(contains(err("sweep:\n  experiment: x.yaml\n  axes: {seed: [1, 2]}\n  overrides: [seed=3]\n"),
                       "'seed' is given twice"));
  EXPECT_TRUE(contains(err("sweep:\n  experiment: x.yaml\n  overrides: [nokey]\n"), "expected 'key=value'"));
}

}  // namespace
