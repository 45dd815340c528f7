#pragma once
// The attention chapter's toys, shared by the scorer tests (tests/nn_dot_product_test.cpp and the
// scorer plugins' tests/ folders): d2l 0.17 10.3's values and keys, and 10.5's multi-head check.
#include <attnlab/nn/attention.hpp>

#include "testing/testing.hpp"

#include <memory>
#include <vector>

namespace attnlab::testutil {

class ScorerToys : public SeededTest {
 protected:
  // The book's toy (d2l 0.17 10.3): values arange(40).reshape(1, 10, 4).repeat(2, 1, 1), every
  // key ones(2): with all keys equal, every scorer gives the same score to all keys of a query,
  // so the masked softmax is uniform over the first valid_len keys whatever the (random, normal)
  // queries are, and the output is the mean of those value rows: rows 0-1 -> [2, 3, 4, 5],
  // rows 0-5 -> [10, 11, 12, 13].
  torch::Tensor toy_keys = torch::ones({2, 10, 2});                                                   // [2, 10, 2]
  torch::Tensor toy_values = torch::arange(40, torch::kFloat).reshape({1, 10, 4}).repeat({2, 1, 1});  // [2, 10, 4]
  torch::Tensor toy_valid = torch::tensor({2, 6});
  torch::Tensor toy_expected = torch::tensor({2.f, 3.f, 4.f, 5.f, 10.f, 11.f, 12.f, 13.f}).view({2, 1, 4});

  /// Attention(scorer) on the toy with queries [2, 1, query_size] gives toy_expected (eval mode).
  void expect_toy_means(std::shared_ptr<nn::Scorer> scorer, int64_t query_size, double dropout = 0.0) {
    auto queries = torch::normal(0, 1, {2, 1, query_size});
    nn::Attention attention(std::move(scorer), dropout);
    attention->eval();
    EXPECT_ALLCLOSE(attention->forward(queries, toy_keys, toy_values, toy_valid), toy_expected, 1e-5, 1e-5);
  }

  // d2l 0.17 10.5: 100 hidden units, 5 heads, 4 queries, 6 key-value pairs, valid lens [3, 2].
  static constexpr int64_t kHiddens = 100, kHeads = 5, kHead = kHiddens / kHeads;

  /// The book's multi-head attention with `scorer` (built for kHead-wide queries and keys): output
  /// [2, 4, 100], weights [2, 5, 4, 6] summing to 1 and 0 past the valid length.
  void expect_multi_head_toy(std::shared_ptr<nn::Scorer> scorer) {
    auto X = torch::ones({2, 4, kHiddens}), Y = torch::ones({2, 6, kHiddens});
    nn::MultiHeadAttention mha(nn::MultiHeadAttentionOptions(kHiddens, kHeads).dropout(0.5), std::move(scorer));
    mha->eval();
    nn::AttentionRecorder recorder;
    nn::RecordingScope scope(&recorder);
    EXPECT_EQ(mha->forward(X, Y, Y, torch::tensor({3, 2})).sizes(), (std::vector<int64_t>{2, 4, kHiddens}));
    auto w = recorder.module("attention").weights[0];  // [2, heads, 4, 6]
    EXPECT_EQ(w.sizes(), (std::vector<int64_t>{2, kHeads, 4, 6}));
    EXPECT_ALLCLOSE(w.sum(-1), torch::ones({2, kHeads, 4}), 1e-5, 1e-5);
    EXPECT_EQ(w.narrow(3, 3, 3).abs().max().item<float>(), 0.0f);  // masked past valid length 3
  }
};

}  // namespace attnlab::testutil
