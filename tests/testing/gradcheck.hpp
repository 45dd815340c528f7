#pragma once
// A finite-difference gradient check for hand-written backward passes (the fused kernels' tests).
#include "testing/testing.hpp"

#include <torch/utils.h>

#include <fmt/format.h>

#include <functional>
#include <vector>

namespace attnlab::testutil {

/// Central differences (step `h`, in double) of sum(f() * probe), for one random probe of f()'s
/// shape, by every element of each of `inputs` (double leaves that require grad), against the
/// gradients autograd gives: AllClose(analytic, numeric, rtol, atol) per input, naming the input
/// that fails. An input f() does not use must get a zero numeric gradient. f() must give the same
/// result each call (reseed a dropout mask inside it).
inline ::testing::AssertionResult GradientsMatchFiniteDifferences(const std::function<torch::Tensor()>& f,
                                                                  const std::vector<torch::Tensor>& inputs,
                                                                  double h = 1e-6, double rtol = 1e-6,
                                                                  double atol = 1e-7) {
  const auto out = f();
  const auto probe = torch::randn_like(out);
  const auto analytic = torch::autograd::grad({out}, inputs, {probe}, false, false, /*allow_unused=*/true);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto flat = inputs[i].view({-1});  // shares the leaf's storage
    auto numeric = torch::zeros_like(flat);
    for (int64_t k = 0; k < flat.numel(); ++k) {
      const double v = flat[k].item<double>();
      flat[k] = v + h;
      const double up = (f() * probe).sum().item<double>();
      flat[k] = v - h;
      const double down = (f() * probe).sum().item<double>();
      flat[k] = v;
      numeric[k] = (up - down) / (2 * h);
    }
    const auto a = analytic[i].defined() ? analytic[i] : torch::zeros_like(inputs[i]);
    if (auto same = AllClose(a, numeric.view_as(a), rtol, atol); !same) {
      return ::testing::AssertionFailure() << fmt::format("input {} (analytic vs numeric): ", i) << same.message();
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace attnlab::testutil
