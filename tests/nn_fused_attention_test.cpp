// The fused attention core (nn/fused_attention.hpp) against the composition it replaces,
// bmm(dropout(masked_softmax(q k^T * scale + bias, valid_lens)), v): forward and gradients on odd
// shapes, every kind of valid lengths (none, per row, per query, zero, float, beyond K, NaN, inf),
// no bias, a bias per row and one broadcast over the batch, dropout through the same mask, finite
// differences in double, the mask's rate and its independence of the thread count, and that the
// transformer takes it, in training and in eval, unless `fused: false`.
#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/transformer.hpp>

#include "nn/fused_attention.hpp"
#include "testing/autograd_graph.hpp"
#include "testing/gradcheck.hpp"
#include "testing/testing.hpp"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace attnlab::nn {
namespace {

using testutil::AllClose;
using testutil::ScopedThreads;
using testutil::SeededTest;
using torch::Tensor;

struct Case {
  int64_t B, Q, K, D, Dv;
  std::function<Tensor()> valid_lens;  // undefined: no mask
  std::string what;
};

/// Odd sizes, below and above a vector's width, and the valid lengths d2l's masked softmax takes;
/// the last case's products exceed the loops' limit (kLoopMacs), so they run as bmm.
std::vector<Case> cases() {
  return {
      {3, 5, 7, 3, 4, [] { return Tensor(); }, "no mask"},
      {4, 5, 7, 3, 4, [] { return torch::tensor({7, 3, 1, 5}); }, "one length per row"},
      {2, 3, 19, 5, 2, [] { return torch::tensor({{1, 19, 4}, {8, 2, 19}}); }, "one length per query"},
      {3, 2, 6, 2, 3, [] { return torch::tensor({0, 6, 2}); }, "a row with no valid key"},
      {2, 2, 5, 4, 4, [] { return torch::tensor({{0, 0}, {3, 0}}); }, "queries with no valid key"},
      {2, 3, 9, 3, 3, [] { return torch::tensor({2.5, 40.0}); }, "float lengths, one beyond K"},
      {3, 2, 4, 3, 2, [] { return torch::tensor({NAN, INFINITY, -INFINITY}); }, "NaN and infinite lengths"},
      {2, 1, 1, 1, 1, [] { return torch::tensor({1, 1}); }, "one key"},
      {1, 0, 4, 3, 2, [] { return torch::tensor({3}); }, "no queries"},
      {3, 37, 41, 19, 21, [] { return torch::tensor({41, 17, 0}); }, "bmm, not loops"},
  };
}

/// What the fused core replaces, in torch ops (the -1e6 of d2l's masked_softmax).
Tensor composed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& valid_lens, const Tensor& bias,
                double scale, const Tensor& keep = {}, double p = 0.0) {
  auto scores = torch::bmm(q, k.transpose(1, 2)) * scale;  // [B, Q, K]
  if (bias.defined()) scores = scores + bias;
  auto w = masked_softmax(scores, valid_lens);  // [B, Q, K]
  if (keep.defined()) w = w * keep.to(w.dtype()) / (1.0 - p);
  return torch::bmm(w, v);
}

/// None, one bias per row [B, Q, K], or one for the whole batch [Q, K] (broadcast).
enum class Bias { None, PerRow, Shared };
const char* name(Bias b) { return b == Bias::None ? "no bias" : b == Bias::PerRow ? "bias per row" : "shared bias"; }

struct Inputs {
  Tensor q, k, v, bias;  // bias undefined: none
  std::vector<Tensor> leaves() const {
    std::vector<Tensor> all{q, k, v};
    if (bias.defined()) all.push_back(bias);
    return all;
  }
};

Inputs inputs(const Case& c, Bias bias = Bias::None, torch::Dtype dtype = torch::kFloat) {
  auto o = torch::TensorOptions(dtype).requires_grad(true);
  Inputs in{torch::randn({c.B, c.Q, c.D}, o), torch::randn({c.B, c.K, c.D}, o), torch::randn({c.B, c.K, c.Dv}, o), {}};
  if (bias == Bias::PerRow) in.bias = torch::randn({c.B, c.Q, c.K}, o);
  if (bias == Bias::Shared) in.bias = torch::randn({c.Q, c.K}, o);
  return in;
}

/// out and expected equal, and their gradients by every input for one random probe.
void expect_same_forward_and_gradients(const Tensor& out, const Tensor& expected, const Inputs& in) {
  EXPECT_ALLCLOSE(out, expected, 1e-5, 1e-6);
  const auto probe = torch::randn_like(out);
  const auto got = torch::autograd::grad({out}, in.leaves(), {probe});
  const auto want = torch::autograd::grad({expected}, in.leaves(), {probe});
  for (size_t i = 0; i < got.size(); ++i) EXPECT_ALLCLOSE(got[i], want[i], 1e-5, 1e-5) << "input " << i;
}

class FusedAttention : public SeededTest {};

TEST_F(FusedAttention, ForwardAndGradientsEqualTheComposition) {
  for (const auto& c : cases()) {
    for (const Bias b : {Bias::None, Bias::PerRow, Bias::Shared}) {
      SCOPED_TRACE(c.what + ", " + name(b));
      const auto lens = c.valid_lens();
      const auto in = inputs(c, b);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
      ASSERT_TRUE(fused::attention_supported(in.q, in.k, in.v, lens, in.bias));
      expect_same_forward_and_gradients(fused::attention(in.q, in.k, in.v, lens, in.bias, 0.0, scale),
                                        composed(in.q, in.k, in.v, lens, in.bias, scale), in);
    }
  }
}

TEST_F(FusedAttention, DropoutIsTheCompositionThroughTheSameMask) {
  const double p = 0.3;
  for (const auto& c : cases()) {
    for (const Bias b : {Bias::None, Bias::PerRow}) {
      SCOPED_TRACE(c.what + ", " + name(b));
      const auto lens = c.valid_lens();
      const auto in = inputs(c, b);
      Tensor keep;
      auto out = fused::attention(in.q, in.k, in.v, lens, in.bias, p, 0.7, &keep);
      ASSERT_TRUE(keep.defined());
      ASSERT_EQ(keep.sizes(), torch::IntArrayRef({c.B, c.Q, c.K}));
      expect_same_forward_and_gradients(out, composed(in.q, in.k, in.v, lens, in.bias, 0.7, keep, p), in);
    }
  }
}

TEST_F(FusedAttention, GradientsMatchFiniteDifferencesInDouble) {
  for (const double p : {0.0, 0.25}) {
    for (const auto& c : cases()) {
      const Bias b = p > 0 ? Bias::Shared : Bias::None;
      SCOPED_TRACE(c.what + ", " + name(b) + (p > 0 ? ", dropout" : ""));
      const auto lens = c.valid_lens();
      const auto in = inputs(c, b, torch::kDouble);
      const auto f = [&] {
        torch::manual_seed(5);  // the same mask at every evaluation
        return fused::attention(in.q, in.k, in.v, lens, in.bias, p, 0.6);
      };
      EXPECT_TRUE(testutil::GradientsMatchFiniteDifferences(f, in.leaves()));
    }
  }
}

TEST_F(FusedAttention, TheMaskKeepsOneMinusPAndDependsOnTheGeneratorAloneNotTheThreads) {
  // 64 * 160 rows of 8 keys: several tasks of at::parallel_for on two threads.
  const auto q = torch::randn({64, 160, 4}), k = torch::randn({64, 8, 4}), v = torch::randn({64, 8, 4});
  Tensor one, two, again;
  {
    ScopedThreads threads(1);
    torch::manual_seed(11);
    fused::attention(q, k, v, {}, {}, 0.2, 0.5, &one);
  }
  {
    ScopedThreads threads(2);
    torch::manual_seed(11);
    fused::attention(q, k, v, {}, {}, 0.2, 0.5, &two);
    fused::attention(q, k, v, {}, {}, 0.2, 0.5, &again);
  }
  EXPECT_TRUE(torch::equal(one, two));
  EXPECT_FALSE(torch::equal(two, again));  // each call draws its own mask
  const double n = static_cast<double>(one.numel());
  const double kept = one.sum().item<double>() / n;
  EXPECT_NEAR(kept, 0.8, 4.0 * std::sqrt(0.2 * 0.8 / n));
}

TEST_F(FusedAttention, TakesOnlyWhatItCanCompute) {
  const auto q = torch::randn({2, 3, 4}), k = torch::randn({2, 5, 4}), v = torch::randn({2, 5, 6});
  EXPECT_TRUE(fused::attention_supported(q, k, v, torch::tensor({1, 2})));
  EXPECT_TRUE(fused::attention_supported(q, k, v, torch::ones({2, 3})));
  EXPECT_FALSE(fused::attention_supported(q.to(torch::kBFloat16), k, v, {}));
  EXPECT_FALSE(fused::attention_supported(q, k.narrow(1, 0, 0), v.narrow(1, 0, 0), {}));  // no keys
  EXPECT_FALSE(fused::attention_supported(q, k, v, torch::tensor({1, 2, 3})));           // lengths of 3 rows
  EXPECT_FALSE(fused::attention_supported(q, k, v, torch::tensor({true, false})));
  EXPECT_FALSE(fused::attention_supported(q, k, v.narrow(2, 0, 3).unsqueeze(0), {}));
  EXPECT_TRUE(fused::attention_supported(q, k, v, {}, torch::randn({3, 1}, torch::kDouble)));  // broadcasts
  EXPECT_FALSE(fused::attention_supported(q, k, v, {}, torch::randn({3, 4})));                 // K is 5
  EXPECT_FALSE(fused::attention_supported(q, k, v, {}, torch::ones({2, 3, 5}, torch::kLong)));
  EXPECT_FALSE(fused::attention_supported(q, k, v, {}, torch::randn({1, 2, 3, 5})));
  {
    fused::ComposedOnly composed;
    EXPECT_FALSE(fused::attention_supported(q, k, v, {}));
    fused::ComposedOnly not_more(false);
    EXPECT_FALSE(fused::attention_supported(q, k, v, {}));
  }
  EXPECT_TRUE(fused::attention_supported(q, k, v, {}));
  EXPECT_THROW(fused::attention(q, k, v, {}, {}, 1.0, 0.5), c10::Error);
}

/// Whether the autograd graph behind `out` holds the fused core's node.
bool graph_has_fused_attention(const Tensor& out) { return testutil::nodes_named(out, {"fused", "Attention"}) > 0; }

TEST_F(FusedAttention, TheTransformerTakesItUnlessFusedIsFalse) {
  for (const bool fused_option : {true, false}) {
    SCOPED_TRACE(fused_option ? "fused: true" : "fused: false");
    auto options = TransformerBlockOptions(8, 16, 2).dropout(0.1).fused(fused_option);
    const ScorerFactory dot = [](const ScorerContext&) { return std::make_shared<DotProductScorerImpl>(); };
    TransformerEncoderBlock block(options, dot, 0);
    const auto x = torch::randn({3, 5, 8}, torch::requires_grad());
    const auto lens = torch::tensor({5, 2, 0});
    block->train();
    EXPECT_EQ(graph_has_fused_attention(block->forward(x, lens)), fused_option);
    block->eval();  // no dropout: still the fused core (faster than SDPA's own CPU kernel)
    EXPECT_EQ(graph_has_fused_attention(block->forward(x, lens)), fused_option);
    const fused::ComposedOnly composed;  // what the blocks open for fused: false
    EXPECT_FALSE(graph_has_fused_attention(block->attention->forward(x, x, x, lens)));
  }
}

}  // namespace
}  // namespace attnlab::nn
