// A minimal scorer plugin for the loader tests: scores = q . k (no scaling), option `scale`.
#include <attnlab/nn/scorer.hpp>

#include <torch/torch.h>

#include <stdexcept>

namespace {
using namespace attnlab;

class TestScorer final : public nn::Scorer {
 public:
  explicit TestScorer(double scale) : scale_(scale) {}
  torch::Tensor score(const torch::Tensor& q, const torch::Tensor& k) override {
    return torch::bmm(q, k.transpose(1, 2)) * scale_;  // [B, Q, K]
  }

 private:
  double scale_;
};

config::Schema schema() { return {config::opt_float("scale", 1.0, "multiplies the scores")}; }

std::shared_ptr<nn::Scorer> make(const config::Options& o, const plugin::BuildContext&) {
#ifdef TEST_SCORER_THROWS
  throw std::runtime_error("deliberate failure in the factory");
#endif
  return std::make_shared<TestScorer>(o.get_float("scale"));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Scorer, "test_scorer", "scorer used by the loader tests", schema, make)
