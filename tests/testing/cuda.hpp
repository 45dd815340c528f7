#pragma once
// What the CUDA test files share (tests/cuda_test.cpp, tests/cuda_graphs_test.cpp): the skip
// without a GPU, the fixtures `Cuda` (seeded, TF32 off) and `RunnerDevice` (the real runner, the
// fra-eng mirror), and the check that a CUDA run's losses follow a reference run's.
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/results/reader.hpp>

#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "testing/runner.hpp"
#include "testing/testing.hpp"

namespace attnlab::cudatest {

inline bool have_cuda() { return torch::cuda::is_available(); }

#define SKIP_WITHOUT_CUDA() \
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device (these run on a GPU machine)"

inline const torch::Device kGpu(torch::kCUDA);

inline std::shared_ptr<nn::Scorer> dot(const nn::ScorerContext&) {
  return std::make_shared<nn::DotProductScorerImpl>();
}

class Cuda : public testutil::SeededTest {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_CUDA();
    SeededTest::SetUp();
    // Full fp32 on both sides, so the comparison is about our code and not TF32 rounding.
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }
};

/// A completed CUDA run whose train and val losses are those of `reference`, epoch by epoch,
/// within rtol.
inline void expect_cuda_run_like(const results::ResultsReader& reference, const results::ResultsReader& run,
                                 size_t epochs, double rtol) {
  EXPECT_EQ(run.attr_string("status"), "completed");
  EXPECT_EQ(run.attr_string("device"), "cuda");
  for (const char* split : {"train", "val"}) {
    auto x = reference.metric(split, "loss"), y = run.metric(split, "loss");
    ASSERT_EQ(x.size(), epochs);
    ASSERT_EQ(y.size(), epochs);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], rtol * x[i]) << split << " epoch " << i + 1;
  }
}

class RunnerDevice : public testutil::RunnerFixture {
 protected:
  void SetUp() override {
    RunnerFixture::SetUp();
    if (!HasFatalFailure()) {
      REQUIRE_FRA_ENG();
    }
  }
  void TearDown() override {
    if (!tmp_.empty()) std::filesystem::remove_all(tmp_);
  }
  std::string scratch_prefix() const override { return "attnlab-device"; }

  /// The tiny fra-eng Transformer (2 epochs) with these overrides.
  testutil::ProcessResult tiny(const std::string& results, std::vector<std::string> overrides) {
    std::vector<std::string> a{"experiments/tests/tiny_fra_eng.yaml", "--results", results, "data_dir=" + data_dir_};
    a.insert(a.end(), overrides.begin(), overrides.end());
    return run(a);
  }
};

}  // namespace attnlab::cudatest
