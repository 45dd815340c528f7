// Head masks (nn/head_mask.hpp): Michel et al.'s xi_h on each head's output before W_o, applied by
// the framework's Attention module to every scorer, on its fused and its recorded path.
#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/head_mask.hpp>
#include <attnlab/nn/recorder.hpp>

#include <gtest/gtest.h>
#include <torch/utils.h>

using namespace attnlab::nn;

namespace {

constexpr int64_t kHeads = 4, kHidden = 16;

MultiHeadAttention make_mha(torch::Dtype dtype = torch::kFloat) {
  torch::manual_seed(3);
  MultiHeadAttention mha(MultiHeadAttentionOptions(kHidden, kHeads).bias(true).record_as(
                             RecordAs{.module = kEncoderSelf, .layer = 1, .queries = Side::Source, .keys = Side::Source}),
                         std::make_shared<DotProductScorerImpl>());
  mha->to(dtype);
  mha->eval();
  return mha;
}

struct Inputs {
  torch::Tensor x, lens;
};

Inputs inputs(torch::Dtype dtype = torch::kFloat) {
  torch::manual_seed(5);
  return {torch::randn({3, 5, kHidden}, torch::dtype(dtype)), torch::tensor({5, 3, 2}, torch::kLong)};
}

torch::Tensor run(MultiHeadAttention& mha, const Inputs& in) { return mha->forward(in.x, in.x, in.x, in.lens); }

/// The same forward on the recorded (explicit scores) path instead of the fused attend().
torch::Tensor run_recorded(MultiHeadAttention& mha, const Inputs& in) {
  AttentionRecorder recorder;
  RecordingScope scope(&recorder);
  return run(mha, in);
}

HeadMask mask_of(const torch::Tensor& xi, const std::string& module = kEncoderSelf, int64_t layer = 1) {
  HeadMask m;
  m.set(module, layer, xi);
  return m;
}

}  // namespace

TEST(HeadMask, OnesLeaveTheOutputBitForBit) {
  auto mha = make_mha();
  const auto in = inputs();
  const auto plain = run(mha, in), plain_recorded = run_recorded(mha, in);
  const auto ones = mask_of(torch::ones({kHeads}));
  HeadMaskScope scope(&ones);
  EXPECT_TRUE(torch::equal(run(mha, in), plain));
  EXPECT_TRUE(torch::equal(run_recorded(mha, in), plain_recorded));
}

TEST(HeadMask, ZeroEqualsTheHeadsSliceOfWoZeroedByHand) {
  for (const int64_t head : {0, 2, 3}) {
    for (const bool recorded : {false, true}) {
      auto mha = make_mha();
      const auto in = inputs();
      auto xi = torch::ones({kHeads});
      xi[head] = 0.0f;
      const auto mask = mask_of(xi);
      torch::Tensor masked;
      {
        HeadMaskScope scope(&mask);
        masked = recorded ? run_recorded(mha, in) : run(mha, in);
      }
      // By hand: the head's output never reaches W_o when W_o's columns for it are zero.
      const int64_t d = kHidden / kHeads;
      {
        torch::NoGradGuard no_grad;
        mha->W_o->weight.slice(1, head * d, (head + 1) * d).zero_();
      }
      const auto by_hand = recorded ? run_recorded(mha, in) : run(mha, in);
      EXPECT_TRUE(torch::allclose(masked, by_hand, 1e-6, 1e-6)) << "head " << head << (recorded ? " recorded" : "");
      auto unmasked = make_mha();
      EXPECT_FALSE(torch::allclose(masked, run_recorded(unmasked, in), 1e-3, 1e-3)) << "the mask changed nothing";
    }
  }
}

TEST(HeadMask, EveryHeadOffLeavesOnlyTheOutputBias) {
  auto mha = make_mha();
  const auto in = inputs();
  const auto zeros = mask_of(torch::zeros({kHeads}));
  HeadMaskScope scope(&zeros);
  const auto out = run(mha, in);  // [B, Q, H]
  EXPECT_TRUE(torch::allclose(out, mha->W_o->bias.view({1, 1, kHidden}).expand_as(out)));
}

TEST(HeadMask, OtherSitesAndNoScopeAreLeftAlone) {
  auto mha = make_mha();
  const auto in = inputs();
  const auto plain = run(mha, in);
  const auto other_layer = mask_of(torch::zeros({kHeads}), kEncoderSelf, 0);
  const auto other_module = mask_of(torch::zeros({kHeads}), kDecoderSelf, 1);
  {
    HeadMaskScope a(&other_layer);
    EXPECT_TRUE(torch::equal(run(mha, in), plain));
    HeadMaskScope b(&other_module);
    EXPECT_TRUE(torch::equal(run(mha, in), plain));
    HeadMaskScope off(nullptr);
    EXPECT_TRUE(torch::equal(run(mha, in), plain));
  }
  EXPECT_EQ(active_head_mask(), nullptr);
}

TEST(HeadMask, WrongLengthIsAnErrorNamingTheSite) {
  auto mha = make_mha();
  const auto in = inputs();
  const auto wrong = mask_of(torch::ones({kHeads + 1}));
  HeadMaskScope scope(&wrong);
  try {
    run(mha, in);
    FAIL() << "a mask of 5 values on 4 heads ran";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("encoder_self layer 2 has 5 values, the module 4 heads"), std::string::npos)
        << e.what();
  }
}

TEST(HeadMask, GradientEqualsFiniteDifferencesInDouble) {
  auto mha = make_mha(torch::kDouble);
  const auto in = inputs(torch::kDouble);
  torch::manual_seed(11);
  const auto weights = torch::randn({3, 5, kHidden}, torch::kDouble);
  const auto loss_at = [&](const torch::Tensor& xi) {
    const auto mask = mask_of(xi);
    HeadMaskScope scope(&mask);
    return (run(mha, in) * weights).sum();
  };
  const auto base = torch::tensor({1.0, 0.5, 0.0, 1.5}, torch::kDouble);
  auto xi = base.clone().requires_grad_(true);
  loss_at(xi).backward();
  const double eps = 1e-6;
  for (int64_t h = 0; h < kHeads; ++h) {
    torch::NoGradGuard no_grad;
    auto up = base.clone(), down = base.clone();
    up[h] += eps;
    down[h] -= eps;
    const double fd = (loss_at(up).item<double>() - loss_at(down).item<double>()) / (2 * eps);
    EXPECT_NEAR(xi.grad()[h].item<double>(), fd, 1e-7 * std::max(1.0, std::abs(fd))) << "head " << h;
  }
}

TEST(HeadMask, SitesAreFoundInAModelTree) {
  auto mha = make_mha();
  const auto sites = attention_sites(*mha);
  ASSERT_EQ(sites.size(), 1u);
  EXPECT_EQ(sites[0].module, kEncoderSelf);
  EXPECT_EQ(sites[0].layer, 1);
  EXPECT_EQ(sites[0].heads, kHeads);
  Attention plain(std::make_shared<DotProductScorerImpl>(), 0.0, RecordAs{.module = "pooling"});
  const auto one = attention_sites(*plain);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].module, "pooling");
  EXPECT_EQ(one[0].heads, 1);
}
