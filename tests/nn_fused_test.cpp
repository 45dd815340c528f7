// Fused residual add + dropout (+ layer norm) against the composition of torch ops: forward and
// gradients on odd shapes, with dropout through the same mask, finite differences in double, the
// mask's rate and its independence of the thread count, eval, p == 1 and the fallbacks.
#include <attnlab/nn/fused.hpp>
#include <attnlab/nn/layers.hpp>

#include "testing/gradcheck.hpp"
#include "testing/testing.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/core/PhiloxRNGEngine.h>

#include <cmath>

#include <cstdio>
#include <ctime>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

// A namespace of its own: the file shares a translation unit with its neighbours (tests/CMakeLists.txt).
namespace attnlab::nn::nn_fused_test {
namespace {

using testutil::AllClose;
using testutil::SeededTest;
using torch::Tensor;
using Sizes = std::vector<int64_t>;

/// The shapes every comparison runs on: widths below, at and above a vector's length, width 1,
/// one row, no rows.
const std::vector<Sizes> kShapes = {{3, 7, 6}, {1, 1, 5},  {5, 13, 33}, {2, 0, 8},
                                    {4, 3, 1}, {2, 9, 16}, {3, 300},    {2, 5, 256}};

using attnlab::testutil::ScopedThreads;

/// x, y [shape]; w, b [H]; all requiring gradients.
struct Inputs {
  Tensor x, y, w, b;
  std::vector<Tensor> all() const { return {x, y, w, b}; }
};

Inputs make_inputs(const Sizes& shape, torch::Dtype dtype = torch::kFloat) {
  const auto o = torch::TensorOptions().dtype(dtype);
  const int64_t H = shape.back();
  return {torch::randn(shape, o).requires_grad_(), torch::randn(shape, o).mul(2).requires_grad_(),
          torch::randn({H}, o).add(1).requires_grad_(), torch::randn({H}, o).requires_grad_()};
}

/// y's contribution: y * keep / (1 - p) as torch::dropout computes it (keep undefined: y).
Tensor dropped(const Tensor& y, const Tensor& keep, double p) {
  if (!keep.defined()) return y;
  return y * (keep.to(y.scalar_type()) * (1.0 / (1.0 - p)));
}

Tensor reference_last(const Inputs& in, const Tensor& keep, double p, double eps = 1e-5) {
  return torch::layer_norm(in.x + dropped(in.y, keep, p), {in.x.size(-1)}, in.w, in.b, eps);
}

Tensor reference_first(const Inputs& in, const Tensor& keep, double p) { return in.x + dropped(in.y, keep, p); }

/// Gradients of sum(out * probe) for x, y, w, b (undefined for one out does not depend on).
std::vector<Tensor> grads(const Tensor& out, const Inputs& in, const Tensor& probe) {
  auto g = torch::autograd::grad({out}, in.all(), {probe}, /*retain_graph=*/false, /*create_graph=*/false,
                                 /*allow_unused=*/true);
  for (auto& t : g) {
    if (t.defined()) t = t.detach();
  }
  return g;
}

/// Fused against reference: outputs and all four gradients within `tol`.
void expect_same(const Tensor& fused, const Tensor& reference, const Inputs& in, double tol, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_TRUE(AllClose(fused, reference, tol, tol));
  const auto probe = torch::randn_like(reference);
  const auto gf = grads(fused, in, probe), gr = grads(reference, in, probe);
  const char* names[] = {"dx", "dy", "dw", "db"};
  for (size_t i = 0; i < gf.size(); ++i) {
    SCOPED_TRACE(names[i]);
    ASSERT_EQ(gf[i].defined(), gr[i].defined());
    if (gf[i].defined()) {
      EXPECT_TRUE(AllClose(gf[i], gr[i], tol, tol));
    }
  }
}

std::string name(const Sizes& shape, double p) { return c10::str(c10::IntArrayRef(shape), " p=", p); }

class NnFused : public SeededTest {};

TEST_F(NnFused, NormLastMatchesTheComposition) {
  for (const auto& shape : kShapes) {
    for (double p : {0.0, 0.3}) {
      const auto in = make_inputs(shape);
      Tensor keep;
      const auto out = fused::add_dropout_layer_norm(in.x, in.y, in.w, in.b, p, true, 1e-5, &keep);
      EXPECT_EQ(keep.defined(), p > 0) << name(shape, p);
      if (keep.defined()) {
        EXPECT_EQ(keep.sizes(), in.y.sizes());
      }
      // Width 1: z - mean(z) is 0, so the output is b and only b has a gradient. The composition
      // gets there with a rounding residue times 1 / sqrt(eps) (~3e-5); compare with the exact result.
      const auto reference = shape.back() == 1 ? (in.x + in.y) * 0 + in.w * 0 + in.b : reference_last(in, keep, p);
      expect_same(out, reference, in, 1e-5, name(shape, p));
    }
  }
}

TEST_F(NnFused, NormFirstMatchesTheComposition) {
  for (const auto& shape : kShapes) {
    for (double p : {0.0, 0.3}) {
      const auto in = make_inputs(shape);
      Tensor keep;
      const auto out = fused::add_dropout(in.x, in.y, p, true, &keep);
      EXPECT_EQ(keep.defined(), p > 0) << name(shape, p);
      expect_same(out, reference_first(in, keep, p), in, 1e-6, name(shape, p));
    }
  }
}

TEST_F(NnFused, OtherEpsAndNonContiguousInputs) {
  auto in = make_inputs({4, 6, 20});
  // x as the transpose of a contiguous [20, 6, 4]: the kernels take a contiguous copy.
  in.x = torch::randn({20, 6, 4}).permute({2, 1, 0}).requires_grad_();
  in.x.retain_grad();
  ASSERT_FALSE(in.x.is_contiguous());
  Tensor keep;
  const auto out = fused::add_dropout_layer_norm(in.x, in.y, in.w, in.b, 0.25, true, 1e-3, &keep);
  expect_same(out, reference_last(in, keep, 0.25, 1e-3), in, 1e-5, "eps 1e-3, x permuted");
}

TEST_F(NnFused, KeepRateIsOneMinusP) {
  for (double p : {0.1, 0.5, 0.9}) {
    const auto x = torch::zeros({512, 1024}), y = torch::ones({512, 1024});
    Tensor keep;
    const auto out = fused::add_dropout(x, y, p, true, &keep);
    // 524288 draws: the rate's standard deviation is below 7e-4.
    EXPECT_NEAR(keep.to(torch::kDouble).mean().item<double>(), 1 - p, 4e-3) << "p=" << p;
    // Kept elements are y / (1 - p), the others 0.
    EXPECT_TRUE(AllClose(out, torch::where(keep, torch::full({}, 1 / (1 - p)), torch::zeros({}))));
  }
}

TEST_F(NnFused, MasksDifferBetweenCalls) {
  const auto x = torch::zeros({8, 64}), y = torch::ones({8, 64});
  Tensor a, b;
  fused::add_dropout(x, y, 0.5, true, &a);
  fused::add_dropout(x, y, 0.5, true, &b);
  EXPECT_FALSE(torch::equal(a, b));
}

/// One training step's outputs, mask and gradients under a seed and a thread count.
struct Step {
  Tensor out, keep;
  std::vector<Tensor> grads;
};

Step step(const Inputs& in, bool norm_last, int threads, uint64_t seed) {
  ScopedThreads scoped(threads);
  torch::manual_seed(seed);
  Step s;
  s.out = norm_last ? fused::add_dropout_layer_norm(in.x, in.y, in.w, in.b, 0.3, true, 1e-5, &s.keep)
                    : fused::add_dropout(in.x, in.y, 0.3, true, &s.keep);
  torch::manual_seed(seed + 1);
  s.grads = grads(s.out, in, torch::randn_like(s.out));
  return s;
}

TEST_F(NnFused, BitIdenticalForOneAndTwoThreads) {
  // Large enough that every kernel splits over 2 threads; the weight/bias sums take 20 chunks.
  const auto in = make_inputs({64, 40, 256});
  for (bool norm_last : {true, false}) {
    SCOPED_TRACE(norm_last ? "norm last" : "norm first");
    const auto one = step(in, norm_last, 1, 11), two = step(in, norm_last, 2, 11);
    EXPECT_TRUE(torch::equal(one.keep, two.keep));
    EXPECT_TRUE(torch::equal(one.out, two.out));
    for (size_t i = 0; i < one.grads.size(); ++i) {
      ASSERT_EQ(one.grads[i].defined(), two.grads[i].defined()) << i;
      if (one.grads[i].defined()) {
        EXPECT_TRUE(torch::equal(one.grads[i], two.grads[i])) << i;
      }
    }
  }
}

TEST_F(NnFused, ConsumesOneDrawOfTheDefaultGenerator) {
  const auto in = make_inputs({3, 7, 6});
  for (const auto& shape : {Sizes{3, 7, 6}, Sizes{64, 40, 256}, Sizes{2, 0, 8}}) {
    const auto x = torch::randn(shape), y = torch::randn(shape);
    torch::manual_seed(5);
    fused::add_dropout_layer_norm(x, y, torch::ones({shape.back()}), torch::zeros({shape.back()}), 0.2, true, 1e-5);
    const auto after_fused = torch::rand({4});
    torch::manual_seed(5);
    {
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.get<at::CPUGeneratorImpl>()->random64();
    }
    EXPECT_TRUE(torch::equal(after_fused, torch::rand({4}))) << c10::IntArrayRef(shape);
  }
  // Eval and p == 0 draw nothing.
  torch::manual_seed(5);
  fused::add_dropout_layer_norm(in.x, in.y, in.w, in.b, 0.2, false, 1e-5);
  fused::add_dropout_layer_norm(in.x, in.y, in.w, in.b, 0.0, true, 1e-5);
  fused::add_dropout(in.x, in.y, 0.2, false);
  const auto after = torch::rand({4});
  torch::manual_seed(5);
  EXPECT_TRUE(torch::equal(after, torch::rand({4})));
}

TEST_F(NnFused, RestoredGeneratorStateGivesTheSameMask) {
  const auto x = torch::randn({5, 13, 33}), y = torch::randn({5, 13, 33});
  const auto state = at::detail::getDefaultCPUGenerator().get_state();
  Tensor a, b;
  const auto out_a = fused::add_dropout(x, y, 0.4, true, &a);
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  gen.set_state(state);
  const auto out_b = fused::add_dropout(x, y, 0.4, true, &b);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_TRUE(torch::equal(out_a, out_b));
}

TEST_F(NnFused, MaskIsPhiloxUnderOneDrawOfTheGenerator) {
  // The mask fused.hpp promises: element e kept iff the e-th word of at::Philox4_32(seed) is >=
  // floor(p * 2^32), seed being one random64() of the default generator.
  const double p = 0.3;
  const auto threshold = static_cast<uint32_t>(std::ldexp(p, 32));
  for (const auto& shape : {Sizes{3, 7, 6}, Sizes{5, 13, 33}, Sizes{64, 40, 256}}) {
    const auto x = torch::randn(shape), y = torch::randn(shape);
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    const auto state = gen.get_state();
    uint64_t seed = 0;
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      seed = gen.get<at::CPUGeneratorImpl>()->random64();
    }
    auto expected = torch::empty(shape, torch::kBool);
    at::Philox4_32 rng(seed);
    auto* e = expected.data_ptr<bool>();
    for (int64_t i = 0; i < expected.numel(); ++i) e[i] = rng() >= threshold;
    Tensor last, first;
    gen.set_state(state);
    fused::add_dropout_layer_norm(x, y, torch::ones({shape.back()}), torch::zeros({shape.back()}), p, true, 1e-5,
                                  &last);
    gen.set_state(state);
    fused::add_dropout(x, y, p, true, &first);
    EXPECT_TRUE(torch::equal(last, expected)) << c10::IntArrayRef(shape);
    EXPECT_TRUE(torch::equal(first, expected)) << c10::IntArrayRef(shape);
  }
}

/// The check itself fails on a wrong gradient: detach() hides 2x from autograd, not from the
/// differences.
TEST(GradientCheck, FailsWhenBackwardMissesATerm) {
  auto x = torch::randn({3, 2}, torch::TensorOptions().dtype(torch::kDouble).requires_grad(true));
  EXPECT_TRUE(testutil::GradientsMatchFiniteDifferences([&] { return x * x + x; }, {x}));
  const auto wrong = testutil::GradientsMatchFiniteDifferences([&] { return x * x.detach() + x; }, {x});
  EXPECT_FALSE(wrong);
  EXPECT_NE(std::string(wrong.message()).find("input 0"), std::string::npos) << wrong.message();
}

TEST_F(NnFused, GradientsMatchFiniteDifferencesInDouble) {
  using testutil::GradientsMatchFiniteDifferences;
  for (const auto& shape : {Sizes{2, 3, 5}, Sizes{4, 9}, Sizes{3, 1}}) {
    for (double p : {0.0, 0.4}) {
      const auto in = make_inputs(shape, torch::kDouble);
      // The same mask in every evaluation: each starts from the same generator state.
      EXPECT_TRUE(GradientsMatchFiniteDifferences(
          [&] {
            torch::manual_seed(3);
            return fused::add_dropout_layer_norm(in.x, in.y, in.w, in.b, p, true, 1e-5);
          },
          in.all()))
          << "norm last " << name(shape, p);
      EXPECT_TRUE(GradientsMatchFiniteDifferences(
          [&] {
            torch::manual_seed(3);
            return fused::add_dropout(in.x, in.y, p, true);
          },
          {in.x, in.y}))
          << "norm first " << name(shape, p);
    }
  }
}

TEST_F(NnFused, EvalIsTorchsLayerNorm) {
  const auto in = make_inputs({5, 13, 33});
  Tensor keep;
  const auto out = fused::add_dropout_layer_norm(in.x, in.y, in.w, in.b, 0.5, false, 1e-5, &keep);
  EXPECT_FALSE(keep.defined());
  EXPECT_TRUE(torch::equal(out, torch::layer_norm(in.y + in.x, {33}, in.w, in.b, 1e-5)));
  EXPECT_TRUE(torch::equal(fused::add_dropout(in.x, in.y, 0.5, false), in.x + in.y));
}

TEST_F(NnFused, PEqualOneDropsEverything) {
  const auto in = make_inputs({3, 7, 6});
  Tensor keep;
  const auto last = fused::add_dropout_layer_norm(in.x, in.y, in.w, in.b, 1.0, true, 1e-5, &keep);
  ASSERT_TRUE(keep.defined());
  EXPECT_FALSE(keep.any().item<bool>());
  expect_same(last, torch::layer_norm(in.x + 0 * in.y, {6}, in.w, in.b, 1e-5), in, 1e-6, "norm last");
  const auto first = fused::add_dropout(in.x, in.y, 1.0, true, &keep);
  EXPECT_FALSE(keep.any().item<bool>());
  EXPECT_TRUE(torch::equal(first, in.x));
  EXPECT_THROW(fused::add_dropout(in.x, in.y, 1.5, true), c10::Error);
  EXPECT_THROW(fused::add_dropout_layer_norm(in.x, in.y, in.w, in.b, -0.1, true, 1e-5), c10::Error);
}

TEST_F(NnFused, WhatTheKernelsDoNotTakeIsTheComposition) {
  const auto in = make_inputs({2, 3, 8});
  EXPECT_TRUE(fused::supported(in.x, in.y, in.w, in.b));
  // bfloat16, a broadcast y, integer tensors, a weight of another width: torch's ops, torch's dropout.
  const auto xb = in.x.detach().to(torch::kBFloat16), yb = in.y.detach().to(torch::kBFloat16);
  EXPECT_FALSE(fused::supported(xb, yb));
  Tensor keep;
  EXPECT_TRUE(torch::equal(fused::add_dropout_layer_norm(xb, yb, {}, {}, 0.0, true, 1e-5, &keep),
                           torch::layer_norm(yb + xb, {8})));
  EXPECT_FALSE(keep.defined());
  const auto row = torch::randn({8});
  EXPECT_FALSE(fused::supported(in.x, row));
  EXPECT_TRUE(AllClose(fused::add_dropout(in.x, row, 0.0, true), in.x + row));
  EXPECT_FALSE(fused::supported(in.x.to(torch::kLong), in.y.to(torch::kLong)));
  EXPECT_FALSE(fused::supported(in.x, in.y, torch::ones({7})));
  EXPECT_FALSE(fused::supported(in.x, in.y, torch::ones({8}, torch::kDouble)));
  // A layer norm without affine weights is torch's.
  EXPECT_TRUE(torch::equal(fused::add_dropout_layer_norm(in.x, in.y, {}, {}, 0.0, true, 1e-5),
                           torch::layer_norm(in.y + in.x, {8})));
  // Undefined weight with dropout: torch's dropout inside, a mask it keeps to itself.
  torch::manual_seed(1);
  const auto out = fused::add_dropout_layer_norm(in.x, in.y, {}, {}, 0.5, true, 1e-5, &keep);
  EXPECT_FALSE(keep.defined());
  torch::manual_seed(1);
  EXPECT_TRUE(torch::equal(out, torch::layer_norm(torch::dropout(in.y, 0.5, true) + in.x, {8})));
}

// ------------------------------------------------------------------- AddNorm

TEST_F(NnFused, AddNormFusedAndReferenceAgree) {
  for (auto placement : {NormPlacement::Last, NormPlacement::First}) {
    SCOPED_TRACE(placement == NormPlacement::Last ? "norm last" : "norm first");
    AddNorm fused(6, 0.0, placement), reference(6, 0.0, placement, 1e-5, /*fused=*/false);
    EXPECT_TRUE(fused->fused);
    EXPECT_FALSE(reference->fused);
    // The same parameters under the same names: checkpoints load either way.
    EXPECT_EQ(fused->named_parameters().keys(), (std::vector<std::string>{"ln.weight", "ln.bias"}));
    EXPECT_EQ(reference->named_parameters().keys(), fused->named_parameters().keys());
    {
      torch::NoGradGuard no_grad;
      fused->ln->weight.copy_(torch::randn({6}));
      fused->ln->bias.copy_(torch::randn({6}));
      reference->ln->weight.copy_(fused->ln->weight);
      reference->ln->bias.copy_(fused->ln->bias);
    }
    const auto x = torch::randn({3, 7, 6}).requires_grad_(), y = torch::randn({3, 7, 6}).requires_grad_();
    const auto probe = torch::randn({3, 7, 6});
    auto grads_of = [&](AddNorm& m) {
      const auto out = m->post(x, y);
      auto g = torch::autograd::grad({out}, {x, y, m->ln->weight, m->ln->bias}, {probe}, false, false, true);
      g.insert(g.begin(), out.detach());
      return g;
    };
    const auto f = grads_of(fused), r = grads_of(reference);
    for (size_t i = 0; i < f.size(); ++i) {
      ASSERT_EQ(f[i].defined(), r[i].defined()) << i;
      if (f[i].defined()) {
        EXPECT_TRUE(AllClose(f[i], r[i], 1e-5, 1e-5)) << i;
      }
    }
  }
}

TEST_F(NnFused, AddNormInEvalIsExactlyTheComposition) {
  for (auto placement : {NormPlacement::Last, NormPlacement::First}) {
    AddNorm fused(33, 0.5, placement), reference(33, 0.5, placement, 1e-5, false);
    fused->eval();
    reference->eval();
    const auto x = torch::randn({5, 13, 33}), y = torch::randn({5, 13, 33});
    EXPECT_TRUE(torch::equal(fused->post(x, y), reference->post(x, y)));
  }
}

TEST_F(NnFused, AddNormReferenceKeepsTorchsDropout) {
  AddNorm last(8, 0.5, NormPlacement::Last, 1e-5, false), first(8, 0.5, NormPlacement::First, 1e-5, false);
  const auto x = torch::randn({4, 3, 8}), y = torch::randn({4, 3, 8});
  torch::manual_seed(2);
  const auto out_last = last->post(x, y), out_first = first->post(x, y);
  torch::manual_seed(2);
  const auto dropped_last = torch::dropout(y, 0.5, true), dropped_first = torch::dropout(y, 0.5, true);
  EXPECT_TRUE(torch::equal(out_last, torch::layer_norm(dropped_last + x, {8}, last->ln->weight, last->ln->bias)));
  EXPECT_TRUE(torch::equal(out_first, x + dropped_first));
}

// ------------------------------------------------------------------- microbenchmark
// Not a test: forward + backward of the fused functions against the compositions AddNorm had, at 1
// and 2 threads, microseconds per call. Run with
//   OMP_WAIT_POLICY=passive build/tests/nn_tests --gtest_also_run_disabled_tests --gtest_filter='NnFused.*Benchmark'

/// Microseconds per call of f: wall clock, and CPU time of all the process's threads (which a
/// machine that other work keeps busy disturbs less, and which counts threads spinning for work).
struct Timing {
  double wall;
  double cpu;
};

Timing time_per_call(const std::function<void()>& f) {
  auto clock = [](clockid_t id) {
    timespec t{};
    clock_gettime(id, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
  };
  for (int i = 0; i < 20; ++i) f();
  int n = 0;
  const double wall0 = clock(CLOCK_MONOTONIC), cpu0 = clock(CLOCK_PROCESS_CPUTIME_ID);
  double wall = wall0;
  do {
    for (int i = 0; i < 20; ++i) f();
    n += 20;
    wall = clock(CLOCK_MONOTONIC);
  } while (wall - wall0 < 5e5);
  return {(wall - wall0) / n, (clock(CLOCK_PROCESS_CPUTIME_ID) - cpu0) / n};
}

TEST_F(NnFused, DISABLED_Benchmark) {
  const std::vector<std::pair<std::string, Sizes>> shapes = {
      {"d2l 0.17", {64, 10, 32}}, {"corners", {16, 4, 6}}, {"seed 000", {128, 9, 256}}};
  std::printf("%-9s %-13s %3s %-5s %4s | %9s %9s %6s | %9s %9s %6s\n", "model", "shape", "thr", "norm", "p", "fused",
              "eager", "ratio", "fused cpu", "eager cpu", "ratio");
  for (const auto& [model, shape] : shapes) {
    for (int threads : {1, 2}) {
      ScopedThreads scoped(threads);
      for (bool norm_last : {true, false}) {
        for (double p : {0.0, 0.1}) {
          const auto in = make_inputs(shape);
          const auto probe = torch::randn(shape);
          const int64_t H = shape.back();
          auto run = [&](bool fused) {
            Tensor out;
            if (norm_last) {
              out = fused ? fused::add_dropout_layer_norm(in.x, in.y, in.w, in.b, p, true, 1e-5)
                          : torch::layer_norm(torch::dropout(in.y, p, true) + in.x, {H}, in.w, in.b, 1e-5);
            } else {
              out = fused ? fused::add_dropout(in.x, in.y, p, true) : in.x + torch::dropout(in.y, p, true);
            }
            torch::autograd::grad({out}, in.all(), {probe}, false, false, true);
          };
          const auto f = time_per_call([&] { run(true); });
          const auto e = time_per_call([&] { run(false); });
          std::printf("%-9s %-13s %3d %-5s %4.1f | %9.1f %9.1f %6.2f | %9.1f %9.1f %6.2f\n", model.c_str(),
                      c10::str(c10::IntArrayRef(shape)).c_str(), threads, norm_last ? "last" : "first", p, f.wall,
                      e.wall, e.wall / f.wall, f.cpu, e.cpu, e.cpu / f.cpu);
        }
      }
    }
  }
}

}  // namespace
}  // namespace attnlab::nn::nn_fused_test
