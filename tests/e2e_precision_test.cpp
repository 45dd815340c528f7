// End to end, issue 18 without a GPU: `precision:` and `cuda_graphs:` reach the trainers from an
// experiment file, are recorded in the results file, and mistakes are one error before anything is
// written. bf16 on the CPU is real autocast (a different loss curve, close to fp32's). The CUDA
// side (graphs, bf16 on the GPU): tests/cuda_test.cpp.
#include <attnlab/results/reader.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "testing/runner.hpp"
#include "testing/testing.hpp"

namespace {
using namespace attnlab;
namespace fs = std::filesystem;
using testutil::contains;

class Precision : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-precision"; }
  testutil::ProcessResult tiny(const std::string& results, std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"-q", "trainer.max_epochs=2", "dataset.num_train=256"});
    return run(testutil::tiny_synthetic(results, std::move(extra)));
  }
};

TEST_F(Precision, Bf16TrainsOnTheCpuUnderAutocastNearTheFp32Curve) {
  const auto fp32 = tmp_ + "/fp32.h5", bf16 = tmp_ + "/bf16.h5";
  auto a = tiny(fp32, {});
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  auto b = tiny(bf16, {"precision=bf16"});
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  results::ResultsReader x(fp32), y(bf16);
  EXPECT_EQ(x.attr_string("precision"), "fp32");
  EXPECT_EQ(y.attr_string("precision"), "bf16");
  EXPECT_EQ(y.attr_string("cuda_graphs"), "off");
  EXPECT_EQ(y.attr_string("cuda_graphs_off_because"), "not a CUDA device");
  const auto lx = x.metric("train", "loss"), ly = y.metric("train", "loss");
  ASSERT_EQ(lx.size(), 2u);
  ASSERT_EQ(ly.size(), 2u);
  for (size_t i = 0; i < lx.size(); ++i) {
    EXPECT_NE(ly[i], lx[i]) << "epoch " << i + 1 << ": bf16 gave fp32's loss: was autocast on?";
    EXPECT_NEAR(ly[i], lx[i], 0.05 * lx[i]) << "epoch " << i + 1;
  }
}

TEST_F(Precision, MistakesAreOneErrorBeforeAnythingIsWritten) {
  struct Case {
    std::vector<std::string> overrides;
    std::string want;
  };
  const std::vector<Case> cases = {
      {{"precision=fp16"}, "fp16"},
      {{"trainer.cuda_graphs=on"},
       "cuda_graphs: on captures the training step as a CUDA graph, which needs "
       "device: cuda, but this run trains on cpu"},
      {{"trainer.cuda_graphs=sometimes"}, "expected one of auto|on|off"},
      {{"trainer.cuda_graph_limit=0"}, "cuda_graph_limit"},
  };
  for (const auto& c : cases) {
    const auto path = tmp_ + "/bad.h5";
    const auto r = tiny(path, c.overrides);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(contains(r.err, c.want)) << r.err;
    EXPECT_EQ(testutil::count_lines(r.err), 1u) << r.err;
    EXPECT_FALSE(fs::exists(path)) << c.want;
  }
}

}  // namespace
