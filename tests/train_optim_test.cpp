// FusedAdam against torch::optim::Adam (same updates, same state, checkpoints interchangeable) and
// clip_grad_norm against torch::nn::utils::clip_grad_norm_.
#include <attnlab/train/optim.hpp>

#include <ATen/record_function.h>
#include <torch/optim/adam.h>
#include <torch/optim/optimizer.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/serialize.h>
#include <torch/utils.h>

#include <algorithm>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "testing/testing.hpp"

namespace attnlab::train {
namespace {

using testutil::SeededTest;

/// Parameters of different shapes, one above the CPU's parallel grain (updated apart from the
/// small ones), and a loss over them.
struct Params {
  std::vector<torch::Tensor> p;
  explicit Params(torch::ScalarType second = torch::kFloat32) {
    torch::manual_seed(3);
    p = {torch::randn({5, 4}), torch::randn({4}), torch::randn({3, 2, 2}).to(second), torch::randn({1}),
         torch::randn({200, 180})};
    for (auto& t : p) t.requires_grad_(true);
  }
  void backward(int64_t step) {
    torch::Tensor loss = torch::zeros({}, torch::kFloat64);
    for (size_t i = 0; i < p.size(); ++i) {
      loss = loss + (p[i].to(torch::kFloat64) * std::cos(0.3 * static_cast<double>(step + i))).pow(2).sum();
    }
    loss.backward();
  }
};

/// Steps [from, to) of the same loss on two copies, each with its optimizer.
void take_steps(Params& a, torch::optim::Optimizer& opt_a, Params& b, torch::optim::Optimizer& opt_b, int64_t from,
                int64_t to) {
  for (int64_t step = from; step < to; ++step) {
    opt_a.zero_grad();
    opt_b.zero_grad();
    a.backward(step);
    b.backward(step);
    opt_a.step();
    opt_b.step();
  }
}

void expect_same(const Params& a, const Params& b, double rtol = 1e-5, double atol = 1e-6) {
  for (size_t i = 0; i < a.p.size(); ++i) EXPECT_ALLCLOSE(a.p[i], b.p[i], rtol, atol) << "parameter " << i;
}

class Optim : public SeededTest {};

TEST_F(Optim, FusedAdamTakesTorchAdamsSteps) {
  for (double wd : {0.0, 0.01}) {
    for (bool amsgrad : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "weight_decay " << wd << " amsgrad " << amsgrad);
      Params a, b;
      auto options = torch::optim::AdamOptions(0.05).weight_decay(wd).amsgrad(amsgrad).betas({0.8, 0.95});
      torch::optim::Adam reference(a.p, options);
      FusedAdam fused(b.p, options);
      take_steps(a, reference, b, fused, 0, 6);
      expect_same(a, b);
      EXPECT_FALSE(torch::allclose(a.p[0], Params().p[0]));  // the parameters did move
    }
  }
}

TEST_F(Optim, FusedAdamStateIsTorchAdamsState) {
  // Three fused steps, saved; loaded into torch's Adam and both take two more steps.
  Params a;
  FusedAdam fused(a.p, torch::optim::AdamOptions(0.05));
  for (int64_t step = 0; step < 3; ++step) {
    fused.zero_grad();
    a.backward(step);
    fused.step();
  }
  std::stringstream buffer;
  {
    torch::serialize::OutputArchive out;
    fused.save(out);
    out.save_to(buffer);
  }
  Params b;
  {
    torch::NoGradGuard g;
    for (size_t i = 0; i < a.p.size(); ++i) b.p[i].copy_(a.p[i]);
  }
  torch::optim::Adam reference(b.p, torch::optim::AdamOptions(0.05));
  torch::serialize::InputArchive in;
  in.load_from(buffer);
  reference.load(in);
  take_steps(a, fused, b, reference, 3, 5);
  expect_same(a, b);
  for (auto* p : {&a.p[0], &a.p[3]}) {
    auto& s = static_cast<torch::optim::AdamParamState&>(*fused.state().at(p->unsafeGetTensorImpl()));
    EXPECT_EQ(s.step(), 5);
  }
}

TEST_F(Optim, ParametersWithoutAGradientAreLeftAlone) {
  Params a;
  FusedAdam fused(a.p, torch::optim::AdamOptions(0.05));
  auto before = a.p[1].detach().clone();
  a.p[0].pow(2).sum().backward();  // only p[0] gets a gradient
  fused.step();
  EXPECT_TRUE(torch::equal(a.p[1], before));
  EXPECT_EQ(fused.state().count(a.p[1].unsafeGetTensorImpl()), 0u);
  EXPECT_EQ(static_cast<torch::optim::AdamParamState&>(*fused.state().at(a.p[0].unsafeGetTensorImpl())).step(), 1);
}

TEST_F(Optim, ATiedWeightListedTwiceIsUpdatedOnce) {
  Params a, b;
  torch::optim::Adam reference(a.p, torch::optim::AdamOptions(0.05));
  auto twice = b.p;
  twice.push_back(b.p[0]);  // as Module::parameters() lists a weight shared by two modules
  FusedAdam fused(twice, torch::optim::AdamOptions(0.05));
  take_steps(a, reference, b, fused, 0, 3);
  expect_same(a, b);
  EXPECT_EQ(static_cast<torch::optim::AdamParamState&>(*fused.state().at(b.p[0].unsafeGetTensorImpl())).step(), 3);
}

thread_local std::vector<std::string> t_ops;  // the ATen ops this thread dispatched, while recorded

/// Runs f with this thread's ATen ops recorded into t_ops (cleared first).
void record_ops(const std::function<void()>& f) {
  t_ops.clear();
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        t_ops.emplace_back(fn.name());
        return nullptr;
      }).scopes({at::RecordScope::FUNCTION}));
  f();
  at::removeCallback(handle);
}

TEST_F(Optim, SmallCpuTensorsAreUpdatedWithoutAnOpEach) {
  Params a;
  FusedAdam fused(a.p, torch::optim::AdamOptions(0.05));
  for (int64_t step = 0; step < 2; ++step) {  // the first step also creates the state
    fused.zero_grad();
    a.backward(step);
    const auto version = a.p[0]._version();
    record_ops([&] { fused.step(); });
    EXPECT_GT(a.p[0]._version(), version);  // updated in place, as torch's kernel would say
  }
  // Four tensors below the grain take the loop; the [200, 180] one is torch's kernel, which reads
  // its step tensor once.
  const auto count = [](const char* name) { return std::count(t_ops.begin(), t_ops.end(), name); };
  EXPECT_EQ(count("aten::_fused_adam_"), 1);
  EXPECT_EQ(count("aten::item"), 1);
  EXPECT_LE(t_ops.size(), 8u) << "the second step dispatched " << t_ops.size() << " ops";
}

TEST_F(Optim, GroupsMixingDtypesFallBackToTorchAdam) {
  Params a(torch::kFloat64), b(torch::kFloat64);
  torch::optim::Adam reference(a.p, torch::optim::AdamOptions(0.05));
  FusedAdam fused(b.p, torch::optim::AdamOptions(0.05));
  take_steps(a, reference, b, fused, 0, 3);
  expect_same(a, b, 0.0, 0.0);  // the same implementation: bit-equal
}

TEST_F(Optim, ClipGradNormEqualsTorchs) {
  for (double max_norm : {0.5, 1e3}) {  // clipping, and not
    SCOPED_TRACE(max_norm);
    Params a, b;
    a.backward(1);
    b.backward(1);
    const double expected = torch::nn::utils::clip_grad_norm_(a.p, max_norm);
    auto norm = clip_grad_norm(b.p, max_norm);
    EXPECT_EQ(norm.dim(), 0);
    EXPECT_NEAR(norm.item<double>(), expected, 1e-5 * expected);
    for (size_t i = 0; i < a.p.size(); ++i) EXPECT_ALLCLOSE(b.p[i].grad(), a.p[i].grad()) << i;
  }
  Params a, b;  // a tensor listed twice counts (and is scaled) once
  a.backward(1);
  b.backward(1);
  const double expected = torch::nn::utils::clip_grad_norm_(a.p, 0.5);
  auto twice = b.p;
  twice.push_back(b.p[2]);
  EXPECT_NEAR(clip_grad_norm(twice, 0.5).item<double>(), expected, 1e-5 * expected);
  for (size_t i = 0; i < a.p.size(); ++i) EXPECT_ALLCLOSE(b.p[i].grad(), a.p[i].grad()) << i;
  std::vector<torch::Tensor> no_grads{torch::zeros({2}, torch::requires_grad())};
  EXPECT_EQ(clip_grad_norm(no_grads, 1.0).item<double>(), 0.0);
}

TEST_F(Optim, ClipGradNormLoopsOverSmallGradientsAndUsesForeachOpsAboveTheLimit) {
  // Small models' gradients (up to 2^18 elements in all) take plain loops: no op per tensor. A
  // non-contiguous gradient, or more elements, take torch's foreach ops; both equal torch's clip.
  const auto count_ops = [](const std::vector<torch::Tensor>& p, double max_norm) {
    double norm = 0;
    record_ops([&] { norm = clip_grad_norm(p, max_norm).item<double>(); });
    return std::make_pair(norm, std::count(t_ops.begin(), t_ops.end(), "aten::linalg_vector_norm"));
  };
  const auto make = [](std::vector<int64_t> big, bool transposed) {
    torch::manual_seed(4);
    std::vector<torch::Tensor> p{torch::randn({7, 3}), torch::randn(big), torch::randn({5})};
    for (auto& t : p) {
      t.requires_grad_(true);
      auto g = torch::randn(t.sizes());
      t.mutable_grad() = transposed && t.dim() == 2 ? g.t().contiguous().t() : g;
    }
    return p;
  };
  struct Case {
    std::vector<int64_t> big;
    bool transposed;
    bool loops;
  };
  for (const auto& c : {Case{{200, 180}, false, true}, Case{{600, 500}, false, false}, Case{{20, 18}, true, false}}) {
    SCOPED_TRACE(::testing::Message() << c10::IntArrayRef(c.big) << (c.transposed ? " transposed" : ""));
    auto a = make(c.big, c.transposed), b = make(c.big, c.transposed);
    const double expected = torch::nn::utils::clip_grad_norm_(a, 1.0);
    const auto [norm, norm_ops] = count_ops(b, 1.0);
    EXPECT_NEAR(norm, expected, 1e-5 * expected);
    EXPECT_EQ(norm_ops == 0, c.loops) << norm_ops << " norm ops";
    for (size_t i = 0; i < a.size(); ++i) EXPECT_ALLCLOSE(b[i].grad(), a[i].grad()) << i;
  }
}

}  // namespace
}  // namespace attnlab::train
