// The dot-product scorer (the framework's; the attention chapter's other scorers are tested in
// their plugins' tests/ folders) on the book's toy and inside multi-head attention.
#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/dot_product.hpp>

#include "testing/scorer_toys.hpp"

namespace attnlab::nn {
namespace {

class Scorers : public testutil::ScorerToys {};

TEST_F(Scorers, BookToyDotProductWithTwoDimensionalQueries) {
  auto queries = torch::normal(0, 1, {2, 1, 2});  // [2, 1, 2]
  Attention attention(std::make_shared<DotProductScorerImpl>(), 0.5);
  attention->eval();
  EXPECT_ALLCLOSE(attention->forward(queries, toy_keys, toy_values, toy_valid), toy_expected, 1e-5, 1e-5);
  AttentionRecorder recorder;
  RecordingScope scope(&recorder);  // the explicit (non-SDPA) path gives the same
  EXPECT_ALLCLOSE(attention->forward(queries, toy_keys, toy_values, toy_valid), toy_expected, 1e-5, 1e-5);
}

TEST_F(Scorers, BookToyMultiHeadAttentionWithDotProduct) {
  expect_multi_head_toy(std::make_shared<DotProductScorerImpl>());
}

}  // namespace
}  // namespace attnlab::nn
