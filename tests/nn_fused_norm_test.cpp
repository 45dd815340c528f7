// The fused layer norm (nn/fused_norm.hpp) against torch::layer_norm: forward and the three
// gradients on odd widths (below, at and above a vector's length, width 1, one row), other eps,
// non-contiguous inputs, finite differences in double, one and two threads alike; what it does not
// take is torch's own; and the norm-first transformer takes it for every norm unless `fused: false`.
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/transformer.hpp>

#include "nn/fused_attention.hpp"
#include "nn/fused_norm.hpp"
#include "testing/autograd_graph.hpp"
#include "testing/gradcheck.hpp"
#include "testing/testing.hpp"

#include <string>
#include <vector>

// A namespace of its own: the file shares a translation unit with its neighbours (tests/CMakeLists.txt).
namespace attnlab::nn::nn_fused_norm_test {
namespace {

using testutil::AllClose;
using testutil::ScopedThreads;
using testutil::SeededTest;
using torch::Tensor;
using Sizes = std::vector<int64_t>;

/// x [shape], w and b [H], all requiring gradients.
struct Inputs {
  Tensor x, w, b;
  std::vector<Tensor> all() const { return {x, w, b}; }
};

Inputs make_inputs(const Sizes& shape, torch::Dtype dtype = torch::kFloat) {
  const auto o = torch::TensorOptions().dtype(dtype);
  const int64_t H = shape.back();
  return {torch::randn(shape, o).mul(3).add(1).requires_grad_(), torch::randn({H}, o).add(1).requires_grad_(),
          torch::randn({H}, o).requires_grad_()};
}

/// out and expected equal, and the gradients of sum(out * probe) by x, w and b, within atol (and
/// rtol 1e-5).
void expect_same(const Tensor& out, const Tensor& expected, const std::vector<Tensor>& leaves, double atol = 1e-5) {
  EXPECT_TRUE(AllClose(out, expected, 1e-5, atol));
  const auto probe = torch::randn_like(expected);
  const auto got = torch::autograd::grad({out}, leaves, {probe});
  const auto want = torch::autograd::grad({expected}, leaves, {probe});
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(AllClose(got[i], want[i], 1e-5, atol)) << "input " << i;
}

bool graph_has_fused_norm(const Tensor& out) { return testutil::nodes_named(out, {"fused", "LayerNorm"}) > 0; }

class FusedNorm : public SeededTest {};

TEST_F(FusedNorm, ForwardAndGradientsEqualTorchsLayerNorm) {
  for (const auto& shape : {Sizes{3, 7, 6}, Sizes{1, 1, 5}, Sizes{5, 13, 33}, Sizes{4, 3, 1}, Sizes{2, 9, 16},
                            Sizes{3, 300}, Sizes{2, 5, 256}, Sizes{7}}) {
    for (const double eps : {1e-5, 1e-6}) {
      SCOPED_TRACE(c10::str(c10::IntArrayRef(shape), " eps ", eps));
      const auto in = make_inputs(shape);
      const auto out = fused::layer_norm(in.x, in.w, in.b, eps);
      EXPECT_TRUE(graph_has_fused_norm(out));
      // Width 1: x - mean is exactly 0, and so is the fused dw; torch's mean rounds, leaving
      // gradients of order 1e-5 there.
      expect_same(out, torch::layer_norm(in.x, {shape.back()}, in.w, in.b, eps), in.all(),
                  shape.back() == 1 ? 1e-4 : 1e-5);
    }
  }
}

TEST_F(FusedNorm, NonContiguousInputs) {
  const auto base = torch::randn({6, 4, 9}, torch::requires_grad());
  const auto x = base.transpose(0, 1);  // [4, 6, 9], not contiguous
  const auto w = torch::randn({9}, torch::requires_grad()), b = torch::randn({9}, torch::requires_grad());
  ASSERT_FALSE(x.is_contiguous());
  expect_same(fused::layer_norm(x, w, b, 1e-5), torch::layer_norm(x, {9}, w, b, 1e-5), {base, w, b});
}

TEST_F(FusedNorm, GradientsMatchFiniteDifferencesInDouble) {
  for (const auto& shape : {Sizes{2, 3, 5}, Sizes{4, 9}, Sizes{3, 1}}) {
    const auto in = make_inputs(shape, torch::kDouble);
    EXPECT_TRUE(
        testutil::GradientsMatchFiniteDifferences([&] { return fused::layer_norm(in.x, in.w, in.b, 1e-5); }, in.all()))
        << c10::IntArrayRef(shape);
  }
}

TEST_F(FusedNorm, OneAndTwoThreadsGiveTheSameBits) {
  const auto in = make_inputs({64, 40, 24});  // rows over several tasks of at::parallel_for
  const auto probe = torch::randn({64, 40, 24});
  std::vector<std::vector<Tensor>> runs;
  for (const int threads : {1, 2}) {
    ScopedThreads scoped(threads);
    const auto out = fused::layer_norm(in.x, in.w, in.b, 1e-5);
    auto g = torch::autograd::grad({out}, in.all(), {probe});
    g.insert(g.begin(), out.detach());
    runs.push_back(g);
  }
  for (size_t i = 0; i < runs[0].size(); ++i) EXPECT_TRUE(torch::equal(runs[0][i], runs[1][i])) << i;
}

TEST_F(FusedNorm, WhatItDoesNotTakeIsTorchsLayerNorm) {
  const auto in = make_inputs({3, 4, 8});
  const auto torchs = [&](const Tensor& x, const Tensor& w, const Tensor& b) {
    const auto out = fused::layer_norm(x, w, b, 1e-5);
    EXPECT_FALSE(graph_has_fused_norm(out));
    EXPECT_TRUE(torch::equal(out, torch::layer_norm(x, {x.size(-1)}, w, b, 1e-5)));
  };
  torchs(in.x.to(torch::kBFloat16), in.w.to(torch::kBFloat16), in.b.to(torch::kBFloat16));  // not float/double
  torchs(in.x, in.w, Tensor());                                                             // no bias
  torchs(in.x.narrow(1, 0, 0), in.w, in.b);                                                 // no rows
  {
    const fused::ComposedOnly composed;  // fused: false
    torchs(in.x, in.w, in.b);
  }
  EXPECT_THROW(fused::layer_norm(in.x, torch::ones({5}), in.b, 1e-5), c10::Error);  // torch's own error
}

TEST_F(FusedNorm, TheNormFirstTransformerTakesItForEveryNormUnlessFusedIsFalse) {
  const ScorerFactory dot = [](const ScorerContext&) { return std::make_shared<DotProductScorerImpl>(); };
  for (const bool fused_option : {true, false}) {
    SCOPED_TRACE(fused_option ? "fused: true" : "fused: false");
    const auto options =
        TransformerOptions(11, 8, 16, 2, 2).dropout(0.0).norm(NormPlacement::First).fused(fused_option);
    TransformerEncoder encoder(options, dot);
    const auto out = encoder->forward(torch::randint(11, {3, 5}), torch::tensor({5, 2, 4})).states;
    // Two blocks of two norms each, and the stack's final norm.
    EXPECT_EQ(testutil::nodes_named(out, {"fused", "LayerNorm"}), fused_option ? 5 : 0);
    EXPECT_EQ(testutil::nodes_named(out, {"NativeLayerNormBackward"}), fused_option ? 0 : 5);
  }
}

}  // namespace
}  // namespace attnlab::nn::nn_fused_norm_test
