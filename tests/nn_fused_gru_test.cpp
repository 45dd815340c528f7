// The fused CPU GRU (nn/fused_gru.hpp) against torch::nn::GRU with the same weights: outputs, final
// state and every gradient on odd shapes, a finite-difference gradient check in double, threads,
// dropout, the fallbacks, parameters and checkpoints. A microbenchmark runs on request
// (--gtest_also_run_disabled_tests --gtest_filter='*Microbenchmark*').
#include <attnlab/nn/fused_gru.hpp>

#include "testing/autograd_graph.hpp"
#include "testing/gradcheck.hpp"
#include "testing/testing.hpp"

#include <torch/cuda.h>
#include <torch/nn/modules/rnn.h>
#include <torch/serialize.h>
#include <torch/utils.h>

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace attnlab::nn {
namespace {

using testutil::AllClose;
using torch::Tensor;

// SameResultsOnOneAndTwoThreads' wide case runs GEMMs above blas::gemm's one-thread limit in MKL,
// on as many threads as ATen has. MKL promises the same bits for any thread count only in its
// strict conditional-numerical-reproducibility mode: on an Intel Xeon (AVX-512) 1 and 2 threads
// gave gradients apart in their last bits without it (the AMD machines before did not). Set
// before MKL's first call, as a user who needs that reproducibility sets it; a value already in
// the environment is kept.
const bool kMklStrictReproducibility = [] { return setenv("MKL_CBWR", "AUTO,STRICT", 0) == 0; }();

torch::nn::GRU torch_gru(int64_t in, int64_t hidden, int64_t layers, bool batch_first, double dropout = 0.0) {
  return torch::nn::GRU(torch::nn::GRUOptions(in, hidden).num_layers(layers).batch_first(batch_first).dropout(dropout));
}

/// A FusedGru with `ref`'s options and a copy of its weights.
FusedGru fused_like(const torch::nn::GRU& ref, bool fused = true) {
  const auto& o = ref->options;
  FusedGru gru(FusedGruOptions(o.input_size(), o.hidden_size())
                   .num_layers(o.num_layers())
                   .batch_first(o.batch_first())
                   .dropout(o.dropout())
                   .fused(fused));
  torch::NoGradGuard no_grad;
  auto from = ref->named_parameters();
  for (auto& p : gru->named_parameters()) p.value().copy_(from[p.key()]);
  return gru;
}

/// What forward_backward observed: outputs and the gradient of every leaf, by name.
struct Observed {
  Tensor output, h_n;
  std::map<std::string, Tensor> grads;  // "input", "h0", then the parameters'
};

/// Runs module on copies of x and h0 and backpropagates sum(output ⊙ g_out) + sum(h_n ⊙ g_h), a
/// term left out where its weight is undefined. seed: reseeds the generator first (dropout).
template <class Module>
Observed forward_backward(Module& module, const Tensor& x, const Tensor& h0, const Tensor& g_out, const Tensor& g_h,
                          int64_t seed = 0) {
  auto xi = x.detach().clone().requires_grad_(x.requires_grad());
  auto hi = h0.detach().clone().requires_grad_(h0.requires_grad());
  module->zero_grad();
  torch::manual_seed(seed);
  auto [out, h_n] = module->forward(xi, hi);
  Tensor loss = torch::zeros({}, x.options());
  if (g_out.defined()) loss = loss + (out * g_out).sum();
  if (g_h.defined()) loss = loss + (h_n * g_h).sum();
  loss.backward();
  Observed r{out.detach(), h_n.detach(), {}};
  if (xi.requires_grad()) r.grads["input"] = xi.grad();
  if (hi.requires_grad()) r.grads["h0"] = hi.grad();
  for (auto& p : module->named_parameters()) {
    if (p.value().requires_grad()) r.grads[p.key()] = p.value().grad();
  }
  return r;
}

void expect_close(const Observed& actual, const Observed& expected, double tol) {
  EXPECT_TRUE(AllClose(actual.output, expected.output, tol, tol)) << "output";
  EXPECT_TRUE(AllClose(actual.h_n, expected.h_n, tol, tol)) << "h_n";
  ASSERT_EQ(actual.grads.size(), expected.grads.size());
  for (const auto& [name, grad] : expected.grads) {
    ASSERT_TRUE(actual.grads.count(name) && actual.grads.at(name).defined()) << name;
    EXPECT_TRUE(AllClose(actual.grads.at(name), grad, tol, tol)) << "gradient of " << name;
  }
}

void expect_equal(const Observed& a, const Observed& b) {
  EXPECT_TRUE(torch::equal(a.output, b.output));
  EXPECT_TRUE(torch::equal(a.h_n, b.h_n));
  for (const auto& [name, grad] : b.grads) EXPECT_TRUE(torch::equal(a.grads.at(name), grad)) << name;
}

/// x [B, T, I] or [T, B, I] and h0 [L, B, H], both requiring grad, and the loss weights.
struct Inputs {
  Tensor x, h0, g_out, g_h;
};
Inputs inputs(int64_t batch, int64_t steps, int64_t in, int64_t hidden, int64_t layers, bool batch_first,
              torch::Dtype dtype = torch::kFloat) {
  auto o = torch::TensorOptions().dtype(dtype);
  auto seq = [&](int64_t c) {
    return batch_first ? std::vector<int64_t>{batch, steps, c} : std::vector{steps, batch, c};
  };
  return {torch::randn(seq(in), o).requires_grad_(), torch::randn({layers, batch, hidden}, o).requires_grad_(),
          torch::randn(seq(hidden), o), torch::randn({layers, batch, hidden}, o)};
}

// ---------------------------------------------------------------------------------------------
// Against torch::nn::GRU, float, tolerance 1e-5 (relative and absolute), on odd shapes.

class FusedGruShapes : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t>> {};

TEST_P(FusedGruShapes, MatchesTorchGruOutputsAndEveryGradient) {
  const auto [batch, steps, hidden] = GetParam();
  constexpr int64_t kIn = 3;
  for (int64_t layers : {1, 2}) {
    for (bool batch_first : {true, false}) {
      SCOPED_TRACE(testing::Message() << "layers " << layers << ", batch_first " << batch_first);
      torch::manual_seed(0);
      auto ref = torch_gru(kIn, hidden, layers, batch_first);
      auto fused = fused_like(ref);
      auto in = inputs(batch, steps, kIn, hidden, layers, batch_first);
      ASSERT_TRUE(fused->runs_fused(in.x, in.h0));
      expect_close(forward_backward(fused, in.x, in.h0, in.g_out, in.g_h),
                   forward_backward(ref, in.x, in.h0, in.g_out, in.g_h), 1e-5);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BatchStepsHidden, FusedGruShapes,
                         ::testing::Combine(::testing::Values(1, 3, 5), ::testing::Values(1, 2, 7),
                                            ::testing::Values(1, 5, 33)));

TEST(FusedGru, GradientsOfWhatIsUsedAndWhatRequiresIt) {
  torch::manual_seed(0);
  auto ref = torch_gru(4, 6, 2, true);
  auto fused = fused_like(ref);
  auto in = inputs(3, 5, 4, 6, 2, true);
  {
    SCOPED_TRACE("outputs only (no gradient reaches h_n)");
    expect_close(forward_backward(fused, in.x, in.h0, in.g_out, {}), forward_backward(ref, in.x, in.h0, in.g_out, {}),
                 1e-5);
  }
  {
    SCOPED_TRACE("h_n only");
    expect_close(forward_backward(fused, in.x, in.h0, {}, in.g_h), forward_backward(ref, in.x, in.h0, {}, in.g_h),
                 1e-5);
  }
  {
    SCOPED_TRACE("input and h0 without grad, layer 0's weights frozen");
    for (auto* m : std::vector<torch::nn::Module*>{ref.get(), fused.get()}) {
      m->named_parameters()["weight_ih_l0"].requires_grad_(false);
      m->named_parameters()["bias_hh_l0"].requires_grad_(false);
    }
    auto x = in.x.detach(), h0 = in.h0.detach();
    expect_close(forward_backward(fused, x, h0, in.g_out, in.g_h), forward_backward(ref, x, h0, in.g_out, in.g_h),
                 1e-5);
  }
}

// The Bahdanau decoder calls its GRU once per target step with T = 1, the state carried over.
TEST(FusedGru, StepByStepLikeTheBahdanauDecoder) {
  torch::manual_seed(0);
  auto ref = torch_gru(9, 5, 2, true);
  auto fused = fused_like(ref);
  auto x = torch::randn({3, 6, 9});
  auto h0 = torch::randn({2, 3, 5}).requires_grad_();
  auto run = [&](auto& gru) {
    gru->zero_grad();
    auto h0i = h0.detach().clone().requires_grad_();
    Tensor hidden = h0i, loss = torch::zeros({});
    for (int64_t t = 0; t < x.size(1); ++t) {
      auto [out, next] = gru->forward(x.narrow(1, t, 1), hidden);  // [3, 1, 5], [2, 3, 5]
      loss = loss + (out * out).sum() * double(t + 1);
      hidden = next;
    }
    loss.backward();
    std::vector<Tensor> got{loss.detach(), h0i.grad()};
    for (auto& p : gru->parameters()) got.push_back(p.grad());
    return got;
  };
  auto expected = run(ref), actual = run(fused);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) EXPECT_TRUE(AllClose(actual[i], expected[i], 1e-5, 1e-5)) << i;
}

// ---------------------------------------------------------------------------------------------
// Finite differences in double.

TEST(FusedGru, FiniteDifferenceGradientCheckInDouble) {
  for (bool batch_first : {true, false}) {
    for (double dropout : {0.0, 0.4}) {
      SCOPED_TRACE(testing::Message() << "batch_first " << batch_first << ", dropout " << dropout);
      torch::manual_seed(0);
      FusedGru gru(FusedGruOptions(3, 4).num_layers(dropout > 0 ? 3 : 2).batch_first(batch_first).dropout(dropout));
      gru->to(torch::kDouble);
      auto in = inputs(2, 3, 3, 4, gru->options.num_layers(), batch_first, torch::kDouble);
      auto x = in.x.detach().requires_grad_(), h0 = in.h0.detach().requires_grad_();
      ASSERT_TRUE(gru->runs_fused(x, h0));
      auto f = [&] {
        torch::manual_seed(7);  // the same dropout masks every time
        auto [out, h_n] = gru->forward(x, h0);
        return (out * in.g_out).sum() + (h_n * in.g_h).sum();
      };
      std::vector<Tensor> wrt{x, h0};
      for (auto& p : gru->parameters()) wrt.push_back(p);
      EXPECT_TRUE(attnlab::testutil::GradientsMatchFiniteDifferences(f, wrt));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Threads, dropout, autograd graph.

using attnlab::testutil::ScopedThreads;

TEST(FusedGru, SameResultsOnOneAndTwoThreads) {
  // The d2l models' shape (the kernels stay on one thread) and a wide one (B·H = 32768: they fork).
  for (auto [batch, steps, in, hidden] : {std::tuple{64, 10, 32, 32}, std::tuple{64, 3, 16, 512}}) {
    SCOPED_TRACE(testing::Message() << "B " << batch << ", H " << hidden);
    torch::manual_seed(0);
    FusedGru gru(FusedGruOptions(in, hidden).num_layers(2).batch_first(true));
    auto x = inputs(batch, steps, in, hidden, 2, true);
    Observed one, two;
    {
      ScopedThreads threads(1);
      one = forward_backward(gru, x.x, x.h0, x.g_out, x.g_h);
    }
    {
      ScopedThreads threads(2);
      two = forward_backward(gru, x.x, x.h0, x.g_out, x.g_h);
    }
    expect_equal(two, one);
  }
}

TEST(FusedGru, DropoutBetweenLayersIsTorchsFromTheSameGeneratorState) {
  torch::manual_seed(0);
  auto ref = torch_gru(4, 6, 3, true, 0.5);
  auto fused = fused_like(ref);
  auto in = inputs(5, 7, 4, 6, 3, true);
  auto a = forward_backward(fused, in.x, in.h0, in.g_out, in.g_h, /*seed=*/3);
  auto b = forward_backward(fused, in.x, in.h0, in.g_out, in.g_h, /*seed=*/3);
  expect_equal(a, b);
  // The same masks as torch's, drawn in the same order.
  expect_close(a, forward_backward(ref, in.x, in.h0, in.g_out, in.g_h, /*seed=*/3), 1e-5);
  auto c = forward_backward(fused, in.x, in.h0, in.g_out, in.g_h, /*seed=*/4);
  EXPECT_FALSE(torch::allclose(c.output, a.output));
  // No dropout in eval mode: torch's without dropout.
  fused->eval();
  ref->eval();
  expect_close(forward_backward(fused, in.x, in.h0, in.g_out, in.g_h, 3),
               forward_backward(ref, in.x, in.h0, in.g_out, in.g_h, 4), 1e-5);
}

/// Autograd nodes reachable from t.
size_t graph_nodes(const Tensor& t) { return testutil::graph_nodes(t).size(); }

TEST(FusedGru, OneAutogradNodePerLayerWhateverTheLength) {
  torch::manual_seed(0);
  auto ref = torch_gru(4, 6, 2, true);
  auto fused = fused_like(ref);
  auto nodes = [](auto& gru, int64_t steps) {
    auto x = torch::randn({3, steps, 4}).requires_grad_();
    auto [out, h_n] = gru->forward(x);
    return graph_nodes(out + h_n.sum());
  };
  EXPECT_EQ(nodes(fused, 9), nodes(fused, 1));
  EXPECT_LE(nodes(fused, 9), 20u);          // the layers, 9 leaves, a few ops around them
  EXPECT_GT(nodes(ref, 9), nodes(ref, 1));  // ATen's records every step's ops
}

TEST(FusedGru, NoGradForwardGivesTheSameAndRecordsNothing) {
  torch::manual_seed(0);
  FusedGru gru(FusedGruOptions(4, 6).num_layers(2));
  auto x = torch::randn({5, 3, 4});
  auto [out, h_n] = gru->forward(x);
  torch::NoGradGuard no_grad;
  auto [out2, h_n2] = gru->forward(x);
  EXPECT_FALSE(out2.requires_grad());
  EXPECT_TRUE(torch::equal(out2, out.detach()));
  EXPECT_TRUE(torch::equal(h_n2, h_n.detach()));
}

TEST(FusedGru, DoubleBackwardThrows) {
  FusedGru gru(FusedGruOptions(2, 3));
  auto x = torch::randn({2, 2, 2}).requires_grad_();
  auto [out, h_n] = gru->forward(x);
  EXPECT_THROW(torch::autograd::grad({out.sum()}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true), c10::Error);
}

// ---------------------------------------------------------------------------------------------
// Fallbacks, parameters, checkpoints, errors.

TEST(FusedGru, FusedFalseRunsTorchsKernel) {
  torch::manual_seed(0);
  auto ref = torch_gru(4, 6, 2, false, 0.3);
  auto gru = fused_like(ref, /*fused=*/false);
  auto in = inputs(3, 4, 4, 6, 2, false);
  EXPECT_FALSE(gru->runs_fused(in.x, in.h0));
  expect_equal(forward_backward(gru, in.x, in.h0, in.g_out, in.g_h, 5),
               forward_backward(ref, in.x, in.h0, in.g_out, in.g_h, 5));
}

TEST(FusedGru, OtherDtypesRunTorchsKernel) {
  torch::manual_seed(0);
  auto ref = torch_gru(4, 6, 2, true);
  auto gru = fused_like(ref);
  ref->to(torch::kBFloat16);
  gru->to(torch::kBFloat16);
  auto x = torch::randn({3, 4, 4}, torch::kBFloat16);
  EXPECT_FALSE(gru->runs_fused(x, torch::zeros({2, 3, 6}, torch::kBFloat16)));
  auto [out, h_n] = gru->forward(x);
  auto [ref_out, ref_h_n] = ref->forward(x);
  EXPECT_TRUE(torch::equal(out, ref_out));
  EXPECT_TRUE(torch::equal(h_n, ref_h_n));
}

TEST(FusedGru, CudaRunsTorchsKernel) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  torch::manual_seed(0);
  auto ref = torch_gru(4, 6, 2, true);
  auto gru = fused_like(ref);
  ref->to(torch::kCUDA);
  gru->to(torch::kCUDA);
  auto x = torch::randn({3, 4, 4}, torch::kCUDA);
  EXPECT_FALSE(gru->runs_fused(x, torch::zeros({2, 3, 6}, torch::kCUDA)));
  EXPECT_TRUE(AllClose(std::get<0>(gru->forward(x)), std::get<0>(ref->forward(x)), 1e-5, 1e-5));
}

TEST(FusedGru, TorchGrusParametersNamesShapesOrderAndInit) {
  torch::manual_seed(11);
  auto ref = torch_gru(4, 6, 3, true);
  torch::manual_seed(11);
  FusedGru gru(FusedGruOptions(4, 6).num_layers(3).batch_first(true));
  auto expected = ref->named_parameters(), actual = gru->named_parameters();
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_EQ(actual[i].key(), expected[i].key());
    EXPECT_TRUE(torch::equal(actual[i].value(), expected[i].value())) << expected[i].key();
  }
}

TEST(FusedGru, LoadsTorchGruCheckpointsAndClones) {
  torch::manual_seed(0);
  auto ref = torch_gru(4, 6, 2, true);
  std::stringstream stream;
  torch::save(ref, stream);
  FusedGru gru(FusedGruOptions(4, 6).num_layers(2).batch_first(true));
  torch::load(gru, stream);
  auto x = torch::randn({3, 5, 4});
  EXPECT_TRUE(AllClose(std::get<0>(gru->forward(x)), std::get<0>(ref->forward(x)), 1e-5, 1e-5));
  auto copy = std::dynamic_pointer_cast<FusedGruImpl>(gru->clone());
  ASSERT_TRUE(copy);
  EXPECT_TRUE(torch::equal(std::get<0>(copy->forward(x)), std::get<0>(gru->forward(x))));
  EXPECT_NE(copy->parameters()[0].data_ptr(), gru->parameters()[0].data_ptr());
}

TEST(FusedGru, TorchGrusErrors) {
  FusedGru gru(FusedGruOptions(4, 6).num_layers(2).batch_first(true));
  using testutil::contains;
  using testutil::message_of;
  EXPECT_TRUE(contains(message_of<c10::Error>([&] {
                         gru->forward(torch::randn({3, 4}));
                       }),
                       "input must have 3 dimensions, got 2"));
  EXPECT_TRUE(contains(message_of<c10::Error>([&] {
                         gru->forward(torch::randn({3, 5, 7}));
                       }),
                       "input.size(-1) must be equal to input_size. Expected 4, got 7"));
  EXPECT_TRUE(contains(message_of<c10::Error>([&] {
                         gru->forward(torch::randn({3, 5, 4}), torch::zeros({2, 5, 6}));
                       }),
                       "Expected hidden size [2, 3, 6], got [2, 5, 6]"));
  EXPECT_TRUE(contains(message_of<c10::Error>([] { FusedGru bad(FusedGruOptions(4, 0)); }), "greater than zero"));
}

// ---------------------------------------------------------------------------------------------
// Microbenchmark (disabled: timings, no assertion). d2l 0.17's sizes: B 64, E 32, H 32, 2 layers;
// the encoder over T = 10 steps, the Bahdanau decoder 10 calls of T = 1 with input H + E.

double median_ms(const std::function<void()>& f, int reps) {
  std::vector<double> ms;
  for (int i = 0; i < reps + 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  ms.erase(ms.begin(), ms.begin() + 3);  // warm-up
  std::nth_element(ms.begin(), ms.begin() + reps / 2, ms.end());
  return ms[reps / 2];
}

TEST(FusedGru, DISABLED_Microbenchmark) {
  for (int threads : {1, 2}) {
    ScopedThreads scoped(threads);
    for (bool decoder : {false, true}) {
      torch::manual_seed(0);
      const int64_t in = decoder ? 64 : 32;
      auto ref = torch_gru(in, 32, 2, true, 0.1);
      auto fused = fused_like(ref);
      auto x = torch::randn({64, 10, in}).requires_grad_();
      auto h0 = torch::randn({2, 64, 32}).requires_grad_();
      auto step = [&](auto& gru) {
        gru->zero_grad();
        Tensor loss;
        if (decoder) {
          Tensor hidden = h0;
          std::vector<Tensor> outs;
          for (int64_t t = 0; t < 10; ++t) {
            auto [out, next] = gru->forward(x.narrow(1, t, 1), hidden);
            hidden = next;
            outs.push_back(out);
          }
          loss = torch::cat(outs, 1).sum() + hidden.sum();
        } else {
          auto [out, h_n] = gru->forward(x, h0);
          loss = out.sum() + h_n.sum();
        }
        loss.backward();
      };
      const double t_ref = median_ms([&] { step(ref); }, 50), t_fused = median_ms([&] { step(fused); }, 50);
      std::printf("threads %d, %-32s torch::nn::GRU %.3f ms, fused %.3f ms (x%.2f)\n", threads,
                  decoder ? "decoder: 10 calls of T=1, I=64" : "encoder: T=10, I=32", t_ref, t_fused, t_ref / t_fused);
    }
  }
}

}  // namespace
}  // namespace attnlab::nn
