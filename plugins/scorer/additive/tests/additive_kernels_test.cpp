// The fused additive scores (additive_kernels.hpp) against d2l's composition of torch ops: scores,
// attention outputs and every gradient on odd shapes, masks and empty rows, in both ISA copies;
// finite differences in double; the same bits for any thread count; the fallbacks. The same for
// fused_attend, the whole attention (scores to pooled values) as one node.
#include "additive_kernels.hpp"
#include "additive_scorer.hpp"

#include "testing/gradcheck.hpp"
#include "testing/testing.hpp"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <attnlab/nn/attention.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace attnlab::scorers::additive {
namespace {

using testutil::AllClose;
using torch::Tensor;

struct Shape {
  int64_t B, Q, K, Dq, Dk, H;
  std::string name() const {
    return "B" + std::to_string(B) + " Q" + std::to_string(Q) + " K" + std::to_string(K) + " H" + std::to_string(H);
  }
};

// Widths below, at and above a vector's length (8 floats, 4 doubles with AVX2), width 1,
// Bahdanau's decoder step, and no batch rows, queries or keys.
const std::vector<Shape> kShapes = {{3, 5, 7, 6, 4, 13},     {1, 1, 1, 1, 1, 1}, {2, 4, 9, 5, 5, 33},
                                    {64, 1, 10, 32, 32, 32}, {2, 3, 4, 8, 8, 8}, {0, 2, 3, 4, 4, 5},
                                    {2, 0, 3, 4, 4, 5},      {2, 3, 0, 4, 4, 5}};

/// The ISA copies this machine runs; restores Auto when it goes.
class AdditiveKernels : public testutil::SeededTest {
 protected:
  void TearDown() override { kernels::set_isa(kernels::Isa::Auto); }
  static std::vector<kernels::Isa> isas() {
    std::vector<kernels::Isa> all = {kernels::Isa::Baseline};
    if (kernels::avx2_available()) all.push_back(kernels::Isa::Avx2);
    return all;
  }
  static std::string isa_name(kernels::Isa isa) { return isa == kernels::Isa::Avx2 ? "avx2" : "baseline"; }
};

/// A fused and an unfused scorer with the same weights.
std::pair<std::shared_ptr<AdditiveScorerImpl>, std::shared_ptr<AdditiveScorerImpl>> twins(const Shape& s,
                                                                                          torch::Dtype dtype) {
  auto fused = std::make_shared<AdditiveScorerImpl>(s.Dq, s.Dk, s.H, true);
  auto plain = std::make_shared<AdditiveScorerImpl>(s.Dq, s.Dk, s.H, false);
  fused->to(dtype);
  plain->to(dtype);
  torch::NoGradGuard no_grad;
  for (const auto& p : fused->named_parameters()) {
    p.value().uniform_(-0.8, 0.8);
    plain->named_parameters()[p.key()].copy_(p.value());
  }
  return {fused, plain};
}

/// Valid lengths [B] with a 0 (an empty row: the masked softmax gives every key the same weight and
/// passes no gradient to any score) and, for B >= 2, K itself.
Tensor valid_lens(const Shape& s) {
  auto v = torch::randint(0, s.K + 1, {s.B}, torch::kLong);
  if (s.B > 0) v[0] = 0;
  if (s.B > 1) v[1] = s.K;
  return v;
}

TEST_F(AdditiveKernels, ScoresAndGradientsEqualTheComposition) {
  for (const auto isa : isas()) {
    kernels::set_isa(isa);
    for (const auto& s : kShapes) {
      SCOPED_TRACE(isa_name(isa) + " " + s.name());
      auto [fused, plain] = twins(s, torch::kFloat);
      const auto queries = torch::randn({s.B, s.Q, s.Dq}, torch::requires_grad());
      const auto keys = torch::randn({s.B, s.K, s.Dk}, torch::requires_grad());
      const auto probe = torch::randn({s.B, s.Q, s.K});
      const auto expected = plain->score(queries, keys, {});
      const auto actual = fused->score(queries, keys, {});
      EXPECT_ALLCLOSE(actual, expected, 1e-5, 1e-5);
      if (s.B * s.Q * s.K > 0) {
        EXPECT_NE(actual.grad_fn()->name(), expected.grad_fn()->name());  // one node, not d2l's
      }
      const auto inputs_grads = [&](const Tensor& out, AdditiveScorerImpl& m) {
        std::vector<Tensor> xs = {queries, keys};
        for (const auto& p : m.parameters()) xs.push_back(p);
        auto g = torch::autograd::grad({out}, xs, {probe}, true, false, true);
        for (size_t i = 0; i < g.size(); ++i) {
          if (!g[i].defined()) g[i] = torch::zeros_like(xs[i]);  // no path at all: zero
        }
        return g;
      };
      const auto want = inputs_grads(expected, *plain), got = inputs_grads(actual, *fused);
      for (size_t i = 0; i < want.size(); ++i) EXPECT_ALLCLOSE(got[i], want[i], 1e-5, 1e-5) << "gradient " << i;
    }
  }
}

TEST_F(AdditiveKernels, MaskedAttentionEqualsTheComposition) {
  // Inside the framework's Attention: masked softmax over [B] and [B, Q] lengths, empty rows.
  for (const auto isa : isas()) {
    kernels::set_isa(isa);
    for (const auto& s : kShapes) {
      if (s.B * s.Q * s.K == 0) continue;
      SCOPED_TRACE(isa_name(isa) + " " + s.name());
      auto [fused_scorer, plain_scorer] = twins(s, torch::kFloat);
      nn::Attention fused(fused_scorer, 0.0), plain(plain_scorer, 0.0);
      const auto queries = torch::randn({s.B, s.Q, s.Dq}, torch::requires_grad());
      const auto keys = torch::randn({s.B, s.K, s.Dk}, torch::requires_grad());
      const auto values = torch::randn({s.B, s.K, 3}, torch::requires_grad());
      for (const auto& lens : {valid_lens(s), valid_lens(s).unsqueeze(1).repeat({1, s.Q})}) {
        const auto probe = torch::randn({s.B, s.Q, 3});
        const auto grads = [&](nn::Attention& a) {
          const auto out = a->forward(queries, keys, values, lens);
          std::vector<Tensor> xs = {queries, keys, values};
          for (const auto& p : a->parameters()) xs.push_back(p);
          auto g = torch::autograd::grad({out}, xs, {probe}, false, false, true);
          g.insert(g.begin(), out.detach());
          return g;
        };
        const auto want = grads(plain), got = grads(fused);
        for (size_t i = 0; i < want.size(); ++i)
          EXPECT_ALLCLOSE(got[i], want[i], 1e-5, 1e-5) << "output/gradient " << i;
      }
    }
  }
}

TEST_F(AdditiveKernels, AttendIsOneNodeAndDrawsAtDropoutsMasks) {
  // In training with dropout: the same generator state gives the composition's mask (at::dropout
  // on the CPU: bernoulli(1 - p) / (1 - p) over the weights), so the same outputs and gradients.
  for (const auto isa : isas()) {
    kernels::set_isa(isa);
    const Shape s{64, 1, 10, 32, 32, 32};  // Bahdanau's decoder step
    SCOPED_TRACE(isa_name(isa));
    auto [fused_scorer, plain_scorer] = twins(s, torch::kFloat);
    nn::Attention fused(fused_scorer, 0.3), plain(plain_scorer, 0.3);
    const auto queries = torch::randn({s.B, s.Q, s.Dq}, torch::requires_grad());
    const auto keys = torch::randn({s.B, s.K, s.Dk}, torch::requires_grad());
    const auto lens = valid_lens(s);
    const auto probe = torch::randn({s.B, s.Q, s.Dk});
    const auto grads = [&](nn::Attention& a) {
      torch::manual_seed(11);
      const auto out = a->forward(queries, keys, keys, lens);
      std::vector<Tensor> xs = {queries, keys};
      for (const auto& p : a->parameters()) xs.push_back(p);
      auto g = torch::autograd::grad({out}, xs, {probe}, false, false, true);
      g.insert(g.begin(), out.detach());
      return std::make_pair(g, out.grad_fn() ? out.grad_fn()->name() : std::string());
    };
    const auto [want, plain_node] = grads(plain);
    const auto [got, fused_node] = grads(fused);
    EXPECT_NE(fused_node.find("AttendFunction"), std::string::npos) << fused_node;
    EXPECT_EQ(plain_node, "BmmBackward0");
    for (size_t i = 0; i < want.size(); ++i) EXPECT_ALLCLOSE(got[i], want[i], 1e-5, 1e-5) << "output/gradient " << i;
    // Some weights were dropped: the output differs from eval mode's.
    fused->eval();
    EXPECT_FALSE(AllClose(fused->forward(queries, keys, keys, lens), want[0], 1e-3, 1e-3));
  }
}

TEST_F(AdditiveKernels, AttendTakesOnlyWhatItComputesAsTheComposition) {
  const Shape s{2, 3, 4, 5, 6, 7};
  auto [fused, plain] = twins(s, torch::kFloat);
  const auto q = torch::randn({s.B, s.Q, s.Dq}), k = torch::randn({s.B, s.K, s.Dk}), v = torch::randn({s.B, s.K, 2});
  const auto lens = torch::tensor({2, 4});
  EXPECT_TRUE(fused->attend(q, k, v, lens, {}, 0.5, true).has_value());
  EXPECT_TRUE(fused->attend(q, k, v, lens.to(torch::kFloat), {}, 0.0, false).has_value());  // d2l's float lengths
  EXPECT_TRUE(fused->attend(q, k, v, {}, {}, 0.0, false).has_value());
  EXPECT_FALSE(plain->attend(q, k, v, lens, {}, 0.0, false).has_value());  // fused: false
  EXPECT_FALSE(fused->attend(q, k, v, lens, {}, 1.0, true).has_value());   // p = 1 zeroes every weight
  EXPECT_FALSE(fused->attend(q, k, v.to(torch::kDouble), lens, {}, 0.0, false).has_value());
  EXPECT_FALSE(fused->attend(q, k, v, torch::tensor({1, 2, 3}), {}, 0.0, false).has_value());  // lengths of 3 rows
  EXPECT_FALSE(fused->attend(q, k.narrow(1, 0, 0), v.narrow(1, 0, 0), {}, {}, 0.0, false).has_value());
  {
    at::autocast::set_autocast_enabled(at::kCPU, true);
    EXPECT_FALSE(fused->attend(q, k, v, lens, {}, 0.0, false).has_value());
    at::autocast::set_autocast_enabled(at::kCPU, false);
  }
  auto [b16, b16_plain] = twins(s, torch::kBFloat16);
  EXPECT_FALSE(b16->attend(q.to(torch::kBFloat16), k.to(torch::kBFloat16), v.to(torch::kBFloat16), lens, {}, 0.0, false)
                   .has_value());
  // The float lengths' cut is the composition's (arange(K) < 2.5: keys 0, 1, 2).
  nn::Attention a(fused, 0.0), b(plain, 0.0);
  const auto half = torch::tensor({2.5f, 0.5f});
  EXPECT_ALLCLOSE(a->forward(q, k, v, half), b->forward(q, k, v, half), 1e-5, 1e-6);
  EXPECT_THROW(fused_attend(q, k, torch::randn({7}), v, torch::tensor({1, 2, 3}), {}), c10::Error);
}

TEST_F(AdditiveKernels, GradientsMatchFiniteDifferencesInDouble) {
  // fused_scores, and fused_attend with row lengths [B, Q] (an empty row) and a dropout mask.
  for (const auto isa : isas()) {
    kernels::set_isa(isa);
    for (const auto& s : {Shape{2, 3, 5, 0, 0, 7}, Shape{1, 1, 4, 0, 0, 1}, Shape{3, 2, 2, 0, 0, 9}}) {
      SCOPED_TRACE(isa_name(isa) + " " + s.name());
      const auto opts = torch::TensorOptions().dtype(torch::kDouble).requires_grad(true);
      const std::vector<Tensor> inputs = {torch::randn({s.B, s.Q, s.H}, opts), torch::randn({s.B, s.K, s.H}, opts),
                                          torch::randn({1, s.H}, opts), torch::randn({s.B, s.K, 3}, opts)};
      EXPECT_TRUE(testutil::GradientsMatchFiniteDifferences(
          [&] { return fused_scores(inputs[0], inputs[1], inputs[2]); }, {inputs[0], inputs[1], inputs[2]}));
      auto lens = torch::randint(1, s.K + 1, {s.B, s.Q}, torch::kLong);
      lens[0][0] = 0;
      const auto noise = torch::bernoulli(torch::full({s.B, s.Q, s.K}, 0.7, torch::kDouble)) / 0.7;
      EXPECT_TRUE(testutil::GradientsMatchFiniteDifferences(
          [&] { return fused_attend(inputs[0], inputs[1], inputs[2], inputs[3], lens, noise); }, inputs));
    }
  }
}

TEST_F(AdditiveKernels, TanhSaturatesAndKeepsNaN) {
  // The kernels' tanh is 1 - 2 / (exp(2x) + 1) on a fast exp: inputs where exp overflows or
  // underflows give exactly ±1, small ones stay within float rounding, NaN stays NaN.
  for (const auto isa : isas()) {
    kernels::set_isa(isa);
    SCOPED_TRACE(isa_name(isa));
    const auto x =
        torch::tensor({-1e4f, -90.f, -44.f, -9.f, -1.f, -1e-3f, -1e-7f, 0.f, 1e-7f, 1e-3f, 0.5f, 9.f, 44.f, 90.f, 1e4f,
                       std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()});
    const int64_t n = x.numel();
    // One query, n keys, H 1: score j = w tanh(0 + x_j) with w = 1.
    const auto s = fused_scores(torch::zeros({1, 1, 1}), x.view({1, n, 1}), torch::ones({1, 1})).view({n});
    EXPECT_ALLCLOSE(s, torch::tanh(x), 0, 2e-7);
    EXPECT_EQ(s[0].item<float>(), -1.0f);
    EXPECT_EQ(s[n - 3].item<float>(), 1.0f);
    const auto nan = fused_scores(torch::zeros({1, 1, 1}), torch::full({1, 1, 1}, NAN), torch::ones({1, 1}));
    EXPECT_TRUE(std::isnan(nan.item<float>()));
  }
}

TEST_F(AdditiveKernels, SameBitsForAnyThreadCount) {
  // Large enough to be split over threads (forward rows and backward batch rows).
  const Shape s{48, 6, 12, 0, 0, 64};
  const auto q = torch::randn({s.B, s.Q, s.H}, torch::requires_grad());
  const auto k = torch::randn({s.B, s.K, s.H}, torch::requires_grad());
  const auto w = torch::randn({1, s.H}, torch::requires_grad());
  const auto probe = torch::randn({s.B, s.Q, s.K});
  const auto v = torch::randn({s.B, s.K, 5}, torch::requires_grad());
  const auto lens = torch::randint(0, s.K + 1, {s.B}, torch::kLong);
  const auto probe_out = torch::randn({s.B, s.Q, 5});
  const auto run = [&](int threads) {
    at::set_num_threads(threads);
    const auto out = fused_scores(q, k, w);
    auto g = torch::autograd::grad({out}, {q, k, w}, {probe});
    g.push_back(out.detach());
    const auto attended = fused_attend(q, k, w, v, lens, {});
    for (auto& d : torch::autograd::grad({attended}, {q, k, w, v}, {probe_out})) g.push_back(d);
    g.push_back(attended.detach());
    return g;
  };
  const int before = at::get_num_threads();
  const auto one = run(1), two = run(2), four = run(4);
  at::set_num_threads(before);
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_TRUE(torch::equal(one[i], two[i])) << i;
    EXPECT_TRUE(torch::equal(one[i], four[i])) << i;
  }
}

TEST_F(AdditiveKernels, OtherDtypesAndTheOptionTakeTheComposition) {
  const Shape s{2, 3, 4, 5, 6, 7};
  auto [fused, plain] = twins(s, torch::kBFloat16);
  const auto q = torch::randn({s.B, s.Q, s.Dq}).to(torch::kBFloat16);
  const auto k = torch::randn({s.B, s.K, s.Dk}).to(torch::kBFloat16);
  EXPECT_FALSE(fused_scores_supported(q, k, fused->w_v->weight));
  EXPECT_TRUE(torch::equal(fused->score(q, k, {}), plain->score(q, k, {})));
  // fused = false is d2l's code exactly: the features node is there.
  auto [f32, p32] = twins(s, torch::kFloat);
  const auto qq = torch::randn({s.B, s.Q, s.Dq}, torch::requires_grad());
  EXPECT_EQ(p32->score(qq, torch::randn({s.B, s.K, s.Dk}), {}).grad_fn()->name(), "SqueezeBackward1");
  EXPECT_THROW(fused_scores(torch::randn({2, 3, 4}), torch::randn({2, 5, 3}), torch::randn({4})), c10::Error);
  EXPECT_THROW(fused_scores(torch::randn({2, 3, 4}), torch::randn({2, 5, 4}).to(torch::kDouble), torch::randn({4})),
               c10::Error);
}

}  // namespace
}  // namespace attnlab::scorers::additive
