// A minimal scorer plugin for the loader tests: scores = q . k (no scaling), option `scale`; option
// `throw_at_call` N > 0 makes its Nth score() call throw (an error from a plugin mid-run).
// Compile definitions make the broken variants: TEST_SCORER_THROWS (a std::runtime_error from the
// factory), TEST_SCORER_CONFIG_ERROR (a ConfigError through ATTNLAB_CHECK, as plugins report bad
// options), TEST_SCORER_UNDEFINED (calls a function no library defines), TEST_SCORER_ABORTS (a
// static constructor that calls abort(): loading the library kills the process), TEST_SCORER_NAME.
#include <attnlab/error.hpp>
#include <attnlab/nn/scorer.hpp>

#include <torch/types.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#ifndef TEST_SCORER_NAME
#define TEST_SCORER_NAME "test_scorer"
#endif
#ifdef TEST_SCORER_UNDEFINED
extern "C" double attnlab_test_symbol_nobody_defines();
#endif

namespace {
using namespace attnlab;

#ifdef TEST_SCORER_ABORTS
[[maybe_unused]] const int aborted_at_load = (std::abort(), 0);
#endif

class TestScorer final : public nn::Scorer {
 public:
  explicit TestScorer(double scale, int64_t throw_at_call = 0) : scale_(scale), throw_at_(throw_at_call) {}
  torch::Tensor score(const torch::Tensor& q, const torch::Tensor& k, const nn::Positions&) override {
    if (++calls_ == throw_at_) throw std::runtime_error("deliberate failure in score() call " + std::to_string(calls_));
    return torch::bmm(q, k.transpose(1, 2)) * scale_;  // [B, Q, K]
  }

 private:
  double scale_;
  int64_t throw_at_, calls_ = 0;
};

config::Schema schema() {
  return {config::opt_float("scale", 1.0, "multiplies the scores"),
          config::opt_int("throw_at_call", 0, "score() throws at this call (0 = never)", 0)};
}

std::shared_ptr<nn::Scorer> make(const config::Options& o, const plugin::BuildContext&, const nn::ScorerContext&) {
#ifdef TEST_SCORER_THROWS
  throw std::runtime_error("deliberate failure in the factory");
#endif
#ifdef TEST_SCORER_CONFIG_ERROR
  ATTNLAB_CHECK(o.get_float("scale") < 0, ConfigError, "{}: {} refuses scale {} (deliberate config error)",
                o.resolved().where(), o.owner(), o.get_float("scale"));
#endif
#ifdef TEST_SCORER_UNDEFINED
  return std::make_shared<TestScorer>(attnlab_test_symbol_nobody_defines());
#endif
  return std::make_shared<TestScorer>(o.get_float("scale"), o.get_int("throw_at_call"));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Scorer, TEST_SCORER_NAME, "scorer used by the loader tests", schema, make)
