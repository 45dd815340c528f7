// The fused linear layer (nn/fused_linear.hpp) against torch::linear: forward and every gradient
// on odd shapes, in the plain loops and in the BLAS path, with and without a bias, inputs of one to
// four dimensions, strided inputs and weights, inputs that need no gradient; finite differences and
// torch's second derivatives (create_graph) in double; what it leaves to torch::linear (autocast,
// ComposedOnly, other dtypes and devices' tensors, wrong sizes); and that the transformer's layers
// take it unless `fused: false`.
#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/transformer.hpp>

#include "nn/fused_attention.hpp"
#include "nn/fused_linear.hpp"
#include "testing/gradcheck.hpp"
#include "testing/testing.hpp"

#include <ATen/autocast_mode.h>

#include <string>
#include <vector>

namespace attnlab::nn {
namespace {

using testutil::SeededTest;
using torch::Tensor;

struct Shape {
  std::vector<int64_t> x;  // [..., in]
  int64_t out;
  std::string what;
};

/// Loops (rows x in x out <= kLoopMacs) and BLAS (above), odd sizes, one to four dimensions.
std::vector<Shape> shapes() {
  return {
      {{16, 3, 6}, 6, "the corners' projections (loops)"},
      {{16, 3, 6}, 10, "the corners' FFN (loops)"},
      {{5}, 3, "one dimension (loops)"},
      {{7, 1}, 1, "one feature, one output (loops)"},
      {{2, 3, 4, 5}, 7, "four dimensions (loops)"},
      {{0, 3, 4}, 5, "no rows"},
      {{9, 13, 17}, 29, "odd sizes (BLAS)"},
      {{64, 10, 32}, 32, "d2l 0.17's projections (BLAS)"},
  };
}

/// x [..., in], weight [out, in] and bias [out] (undefined without), leaves that require grad.
struct Inputs {
  Tensor x, weight, bias;
  std::vector<Tensor> leaves() const {
    std::vector<Tensor> all{x, weight};
    if (bias.defined()) all.push_back(bias);
    return all;
  }
};

Inputs inputs(const Shape& s, bool bias, torch::Dtype dtype = torch::kFloat) {
  auto o = torch::TensorOptions(dtype).requires_grad(true);
  return {torch::randn(s.x, o), torch::randn({s.out, s.x.back()}, o), bias ? torch::randn({s.out}, o) : Tensor()};
}

/// out and expected equal, and their gradients by every leaf for one random probe.
void expect_same_forward_and_gradients(const Tensor& out, const Tensor& expected, const std::vector<Tensor>& leaves) {
  ASSERT_EQ(out.sizes(), expected.sizes());
  EXPECT_ALLCLOSE(out, expected, 1e-5, 1e-5);
  if (out.numel() == 0) return;
  const auto probe = torch::randn_like(out);
  const auto got = torch::autograd::grad({out}, leaves, {probe}, true, false, true);
  const auto want = torch::autograd::grad({expected}, leaves, {probe}, true, false, true);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_ALLCLOSE(got[i], want[i], 1e-5, 1e-5) << "leaf " << i;
}

/// Whether the autograd graph behind `out` holds the fused linear layer's node.
int fused_linear_nodes(const Tensor& out) {
  std::vector<torch::autograd::Node*> todo{out.grad_fn().get()};
  std::vector<torch::autograd::Node*> seen;
  int found = 0;
  while (!todo.empty()) {
    auto* node = todo.back();
    todo.pop_back();
    if (node == nullptr || std::find(seen.begin(), seen.end(), node) != seen.end()) continue;
    seen.push_back(node);
    if (node->name().find("fused") != std::string::npos && node->name().find("Linear") != std::string::npos) ++found;
    for (const auto& edge : node->next_edges()) todo.push_back(edge.function.get());
  }
  return found;
}

class FusedLinear : public SeededTest {};

TEST_F(FusedLinear, ForwardAndGradientsEqualTorchLinear) {
  for (const auto& s : shapes()) {
    for (const bool bias : {true, false}) {
      SCOPED_TRACE(s.what + (bias ? ", bias" : ", no bias"));
      const auto in = inputs(s, bias);
      ASSERT_TRUE(fused::linear_supported(in.x, in.weight, in.bias));
      const auto out = fused::linear(in.x, in.weight, in.bias);
      if (out.numel() > 0) {
        EXPECT_EQ(fused_linear_nodes(out), 1);
      }
      expect_same_forward_and_gradients(out, torch::linear(in.x, in.weight, in.bias), in.leaves());
    }
  }
}

TEST_F(FusedLinear, StridedInputsAndInputsThatNeedNoGradient) {
  // x transposed (not contiguous), the weight a transposed view, x a constant (the first layer).
  const auto base = torch::randn({6, 16, 3}, torch::requires_grad());
  const auto x = base.transpose(0, 2);  // [3, 16, 6]
  const auto wt = torch::randn({6, 5}, torch::requires_grad());
  const auto w = wt.t();  // [5, 6]
  const auto b = torch::randn({5}, torch::requires_grad());
  expect_same_forward_and_gradients(fused::linear(x, w, b), torch::linear(x, w, b), {base, wt, b});

  const auto constant = torch::randn({4, 3, 6});
  const auto out = fused::linear(constant, w, b);
  const auto probe = torch::randn_like(out);
  const auto got = torch::autograd::grad({out}, {wt, b}, {probe});
  const auto want = torch::autograd::grad({torch::linear(constant, w, b)}, {wt, b}, {probe});
  EXPECT_ALLCLOSE(got[0], want[0], 1e-5, 1e-5);
  EXPECT_ALLCLOSE(got[1], want[1], 1e-5, 1e-5);

  torch::NoGradGuard no_grad;  // eval: no node, the same numbers
  const auto eval = fused::linear(constant, w, b);
  EXPECT_FALSE(eval.requires_grad());
  EXPECT_ALLCLOSE(eval, torch::linear(constant, w, b), 1e-5, 1e-5);
}

TEST_F(FusedLinear, GradientsMatchFiniteDifferencesInDouble) {
  for (const auto& s : {Shape{{3, 4, 5}, 6, "loops"}, Shape{{40, 30, 20}, 25, "BLAS"}}) {
    SCOPED_TRACE(s.what);
    const auto in = inputs(s, true, torch::kDouble);
    if (s.what == "BLAS") {  // 24,000 elements of x: check the weight and bias, x on a slice below
      EXPECT_TRUE(testutil::GradientsMatchFiniteDifferences([&] { return fused::linear(in.x, in.weight, in.bias); },
                                                            {in.weight, in.bias}));
    } else {
      EXPECT_TRUE(testutil::GradientsMatchFiniteDifferences([&] { return fused::linear(in.x, in.weight, in.bias); },
                                                            in.leaves()));
    }
  }
}

TEST_F(FusedLinear, SecondDerivativesAreTorchs) {
  // A double backward (create_graph) runs torch's differentiable ops: gradients of gradients agree.
  for (const auto& s : {Shape{{3, 4, 5}, 6, "loops"}, Shape{{9, 13, 17}, 29, "BLAS"}}) {
    SCOPED_TRACE(s.what);
    const auto in = inputs(s, true, torch::kDouble);
    auto second = [&](const Tensor& out) {
      const auto g = torch::autograd::grad({(out * out).sum()}, {in.x, in.weight}, {}, true, true);
      return torch::autograd::grad({g[0].pow(2).sum() + g[1].pow(2).sum()}, in.leaves());
    };
    const auto got = second(fused::linear(in.x, in.weight, in.bias));
    const auto want = second(torch::linear(in.x, in.weight, in.bias));
    for (size_t i = 0; i < got.size(); ++i) EXPECT_ALLCLOSE(got[i], want[i], 1e-10, 1e-10) << "leaf " << i;
  }
}

TEST_F(FusedLinear, LeavesToTorchWhatItDoesNotTake) {
  const auto x = torch::randn({4, 3, 6}), w = torch::randn({5, 6}), b = torch::randn({5});
  EXPECT_FALSE(fused::linear_supported(x.to(torch::kBFloat16), w.to(torch::kBFloat16), {}));
  EXPECT_FALSE(fused::linear_supported(x.to(torch::kDouble), w, b));  // mixed dtypes
  EXPECT_FALSE(fused::linear_supported(x, w, b.to(torch::kDouble)));
  EXPECT_FALSE(fused::linear_supported(x, w.narrow(1, 0, 5), b));                        // in does not match
  EXPECT_FALSE(fused::linear_supported(x, w, torch::randn({4})));                        // bias of the wrong size
  EXPECT_FALSE(fused::linear_supported(x, w.unsqueeze(0), b));                           // weight not 2-D
  EXPECT_FALSE(fused::linear_supported(torch::randn({4, 0}), torch::randn({5, 0}), b));  // in = 0
  EXPECT_FALSE(fused::linear_supported(torch::tensor(1.0f), torch::randn({5, 1}), b));   // a scalar
  EXPECT_THROW(fused::linear(x, w.narrow(1, 0, 5), b), c10::Error);                      // torch::linear's own error
  {
    const fused::ComposedOnly composed;
    EXPECT_FALSE(fused::linear_supported(x, w, b));
    EXPECT_EQ(fused_linear_nodes(fused::linear(x.requires_grad_(), w, b)), 0);
    x.requires_grad_(false);
  }
  {
    // precision: bf16 autocasts the CPU: the layer must be torch's, which autocast casts.
    at::autocast::set_autocast_enabled(at::kCPU, true);
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
    const bool supported = fused::linear_supported(x, w, b);
    const auto out = fused::linear(x, w, b);
    at::autocast::set_autocast_enabled(at::kCPU, false);
    at::autocast::clear_cache();
    EXPECT_FALSE(supported);
    EXPECT_EQ(out.scalar_type(), torch::kBFloat16);
  }
  EXPECT_TRUE(fused::linear_supported(x, w, b));
}

TEST_F(FusedLinear, TheTransformerTakesItUnlessFusedIsFalse) {
  for (const bool fused_option : {true, false}) {
    SCOPED_TRACE(fused_option ? "fused: true" : "fused: false");
    auto options = TransformerBlockOptions(6, 10, 3).dropout(0.1).fused(fused_option);
    const ScorerFactory dot = [](const ScorerContext&) { return std::make_shared<DotProductScorerImpl>(); };
    TransformerEncoderBlock block(options, dot, 0);
    block->train();
    const auto x = torch::randn({4, 3, 6}, torch::requires_grad());
    // W_q, W_k, W_v, W_o and the FFN's two layers
    EXPECT_EQ(fused_linear_nodes(block->forward(x, torch::tensor({3, 1, 2, 0}))), fused_option ? 6 : 0);
  }
}

}  // namespace
}  // namespace attnlab::nn
