// The fused linear layer (nn/fused_linear.hpp) against torch::linear: forward and every gradient
// on odd shapes, also with its output split into heads and its input merged from heads (against
// transpose_qkv and transpose_output around torch::linear), in the plain loops and in the BLAS path, with and without a
// bias, inputs of one to four dimensions, strided inputs and weights, inputs that need no gradient; finite differences
// and torch's second derivatives (create_graph) in double; what it leaves to torch::linear (autocast, ComposedOnly,
// other dtypes and devices' tensors, wrong sizes); and that the transformer's layers take it unless `fused: false`.
// Also the BLAS GEMM under it (nn/blas.hpp) against at::mm, every transposition.
#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/transformer.hpp>

#include "nn/blas.hpp"
#include "nn/fused_attention.hpp"
#include "nn/fused_linear.hpp"
#include "testing/autograd_graph.hpp"
#include "testing/gradcheck.hpp"
#include "testing/testing.hpp"

#include <ATen/autocast_mode.h>

#include <string>
#include <tuple>
#include <vector>

// A namespace of its own: the file shares a translation unit with its neighbours (tests/CMakeLists.txt).
namespace attnlab::nn::nn_fused_linear_test {
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

/// The fused linear layer's nodes in the autograd graph behind `out`.
int fused_linear_nodes(const Tensor& out) { return testutil::nodes_named(out, {"fused", "Linear"}); }

class FusedLinear : public SeededTest {};

TEST_F(FusedLinear, BlasGemmIsMmForEveryTranspositionAndLeavesMklsThreadsAsTheyWere) {
  // The pinned wheel's BLAS is MKL: small products run on the calling thread alone.
  ASSERT_NE(MKL_Set_Num_Threads_Local, nullptr) << "this torch's BLAS is not MKL";
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    for (const auto& [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{7, 5, 3}, {640, 32, 32}, {300, 200, 100}}) {
      for (const bool ta : {false, true}) {
        for (const bool tb : {false, true}) {
          SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + (ta ? " A^T" : "") +
                       (tb ? " B^T" : ""));
          const auto a = ta ? torch::randn({k, m}, dtype) : torch::randn({m, k}, dtype);
          const auto b = tb ? torch::randn({n, k}, dtype) : torch::randn({k, n}, dtype);
          auto c = torch::randn({m, n}, dtype);
          const auto expected = 0.5 * c + 2 * torch::mm(ta ? a.t() : a, tb ? b.t() : b);
          const int before = MKL_Set_Num_Threads_Local(0);  // 0: the global setting
          AT_DISPATCH_FLOATING_TYPES(dtype, "test", [&] {
            blas::gemm<scalar_t>(ta, tb, m, n, k, 2, a.const_data_ptr<scalar_t>(), a.size(1),
                                 b.const_data_ptr<scalar_t>(), b.size(1), 0.5, c.mutable_data_ptr<scalar_t>(), n);
          });
          EXPECT_EQ(MKL_Set_Num_Threads_Local(before), 0);  // gemm restored it
          EXPECT_ALLCLOSE(c, expected, 1e-4, 1e-4);
        }
      }
    }
  }
}

TEST_F(FusedLinear, ForwardAndGradientsEqualTorchLinear) {
  for (const auto& s : shapes()) {
    for (const bool bias : {true, false}) {
      for (const auto dtype : {torch::kFloat, torch::kDouble}) {  // BLAS: sgemm_ and dgemm_
        SCOPED_TRACE(s.what + (bias ? ", bias" : ", no bias") + (dtype == torch::kDouble ? ", double" : ""));
        const auto in = inputs(s, bias, dtype);
        ASSERT_TRUE(fused::linear_supported(in.x, in.weight, in.bias));
        const auto out = fused::linear(in.x, in.weight, in.bias);
        if (out.numel() > 0) {
          EXPECT_EQ(fused_linear_nodes(out), 1);
        }
        expect_same_forward_and_gradients(out, torch::linear(in.x, in.weight, in.bias), in.leaves());
      }
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

TEST_F(FusedLinear, SplitIntoHeadsAndMergedFromHeadsAreTransposeQkvAndTransposeOutput) {
  struct HeadCase {
    int64_t B, T, in, out, heads;
    std::string what;
  };
  const std::vector<HeadCase> cases{{16, 3, 6, 6, 3, "the corners' heads (loops)"},
                                    {5, 7, 4, 6, 2, "odd sizes (loops)"},
                                    {2, 1, 4, 4, 4, "heads of one feature (loops)"},
                                    {0, 3, 6, 6, 3, "no rows"},
                                    {3, 0, 6, 6, 3, "no steps"},
                                    {64, 10, 32, 32, 4, "d2l 0.17's heads (BLAS)"}};
  for (const auto& c : cases) {
    for (const bool bias : {true, false}) {
      SCOPED_TRACE(c.what + (bias ? ", bias" : ", no bias"));
      const auto in = inputs({{c.B, c.T, c.in}, c.out, ""}, bias);
      for (const bool fold : {true, false}) {
        const auto split = fused::linear_split_heads(in.x, in.weight, in.bias, c.heads, fold);
        // transpose_qkv, with the sizes spelled out (its -1 cannot be inferred with no rows)
        const int64_t d = c.out / c.heads;
        auto expected = torch::linear(in.x, in.weight, in.bias).reshape({c.B, c.T, c.heads, d}).permute({0, 2, 1, 3});
        expected = fold ? expected.reshape({c.B * c.heads, c.T, d}) : expected;
        EXPECT_TRUE(split.is_contiguous());
        expect_same_forward_and_gradients(split, expected, in.leaves());
      }
      // The merge: x [B * heads, T, in / heads] into the layer [out, in].
      auto o = torch::TensorOptions().requires_grad(true);
      const auto heads_x = torch::randn({c.B * c.heads, c.T, c.in / c.heads}, o);
      const auto merged = fused::linear_merge_heads(heads_x, in.weight, in.bias, c.heads);
      std::vector<Tensor> leaves{heads_x, in.weight};
      if (bias) leaves.push_back(in.bias);
      const auto heads_merged =  // transpose_output, sizes spelled out
          heads_x.reshape({c.B, c.heads, c.T, c.in / c.heads}).permute({0, 2, 1, 3}).reshape({c.B, c.T, c.in});
      expect_same_forward_and_gradients(merged, torch::linear(heads_merged, in.weight, in.bias), leaves);
      if (c.B > 0 && c.T > 0) {
        EXPECT_TRUE(torch::equal(heads_merged, transpose_output(heads_x, c.heads)));
      }
      if (merged.numel() > 0) {
        EXPECT_EQ(fused_linear_nodes(merged), 1);
      }
    }
  }
  // Finite differences and second derivatives in double, in the loops.
  auto o = torch::TensorOptions(torch::kDouble).requires_grad(true);
  const auto x = torch::randn({2, 3, 4}, o), heads_x = torch::randn({4, 3, 3}, o);
  const auto w = torch::randn({6, 4}, o), w_merge = torch::randn({5, 6}, o), b = torch::randn({6}, o);
  EXPECT_TRUE(testutil::GradientsMatchFiniteDifferences([&] { return fused::linear_split_heads(x, w, b, 2, false); },
                                                        {x, w, b}));
  EXPECT_TRUE(testutil::GradientsMatchFiniteDifferences(
      [&] { return fused::linear_merge_heads(heads_x, w_merge, {}, 2); }, {heads_x, w_merge}));
  const auto g = torch::autograd::grad({fused::linear_merge_heads(heads_x, w_merge, {}, 2).pow(2).sum()}, {heads_x}, {},
                                       true, true)[0];
  const auto want = torch::autograd::grad({torch::linear(transpose_output(heads_x, 2), w_merge).pow(2).sum()},
                                          {heads_x}, {}, true, true)[0];
  EXPECT_ALLCLOSE(torch::autograd::grad({g.pow(2).sum()}, {w_merge})[0],
                  torch::autograd::grad({want.pow(2).sum()}, {w_merge})[0], 1e-10, 1e-10);
  // What it cannot take runs the composition; shapes that do not fit are one error.
  {
    const fused::ComposedOnly composed;
    const auto y = fused::linear_split_heads(x, w, b, 3, true);
    EXPECT_EQ(fused_linear_nodes(y), 0);
    EXPECT_ALLCLOSE(y, transpose_qkv(torch::linear(x, w, b), 3));
  }
  EXPECT_THROW(fused::linear_split_heads(x, w, b, 4, true), c10::Error);         // 4 heads do not divide 6
  EXPECT_THROW(fused::linear_merge_heads(heads_x, w_merge, {}, 3), c10::Error);  // 3 heads do not divide 4 rows
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
}  // namespace attnlab::nn::nn_fused_linear_test
