// TF-lab transformer variants (seed 004): Conv1d(k=1) FFN == linear FFN, per-head projection
// weights == the fused layout, tied output embedding shares storage, softmax output, Glorot init,
// LayerNorm epsilon.
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/transformer.hpp>

#include "testing/testing.hpp"

#include <cmath>
#include <string>
#include <vector>

// A namespace of its own: the file shares a translation unit with its neighbours (tests/CMakeLists.txt).
namespace attnlab::nn::nn_transformer_variants_test {
namespace {

using attnlab::testutil::SeededTest;

std::shared_ptr<Scorer> dot(const ScorerContext&) { return std::make_shared<DotProductScorerImpl>(); }

/// Copies every parameter of `from` into the same-named one of `to`, converting fused projection
/// weights [H, in] / biases [H] to per-head [heads, in, d_k] / [heads, d_k] where shapes differ.
void copy_params(torch::nn::Module& from, torch::nn::Module& to, int64_t heads) {
  torch::NoGradGuard g;
  auto dst = to.named_parameters();
  for (const auto& p : from.named_parameters()) {
    auto* target = dst.find(p.key());
    ASSERT_NE(target, nullptr) << p.key();
    const auto& w = p.value();
    if (target->sizes() == w.sizes()) {
      target->copy_(w);
    } else if (w.dim() == 2) {  // fused [heads * d, in] -> [heads, in, d]
      target->copy_(w.view({heads, -1, w.size(1)}).transpose(1, 2));
    } else {  // fused bias [heads * d] -> [heads, d]
      target->copy_(w.view({heads, -1}));
    }
  }
}

class Variants : public SeededTest {};

TEST_F(Variants, Conv1dFfnEqualsLinearWithTheSameWeights) {
  PositionWiseFFN linear(8, 16, 6);
  PositionWiseFFN conv(8, 16, 6, 0.0, /*conv1d=*/true);
  ASSERT_FALSE(conv->dense1);
  EXPECT_EQ(conv->conv1->weight.sizes(), (std::vector<int64_t>{16, 8, 1}));
  {
    torch::NoGradGuard g;
    conv->conv1->weight.copy_(linear->dense1->weight.unsqueeze(-1));
    conv->conv1->bias.copy_(linear->dense1->bias);
    conv->conv2->weight.copy_(linear->dense2->weight.unsqueeze(-1));
    conv->conv2->bias.copy_(linear->dense2->bias);
  }
  auto x = torch::randn({3, 5, 8});
  EXPECT_ALLCLOSE(conv->forward(x), linear->forward(x), 1e-5, 1e-6);
}

TEST_F(Variants, PerHeadProjectionsEqualTheFusedLayout) {
  for (bool bias : {false, true}) {
    MultiHeadAttention fused(MultiHeadAttentionOptions(12, 3).bias(bias), dot({}));
    MultiHeadAttention split(MultiHeadAttentionOptions(12, 3).bias(bias).per_head_projections(true), dot({}));
    EXPECT_FALSE(split->W_q);
    EXPECT_EQ(split->W_q_heads->weight.sizes(), (std::vector<int64_t>{3, 12, 4}));  // [heads, d_model, d_k]
    EXPECT_EQ(split->named_parameters().find("W_q.weight")->sizes(), (std::vector<int64_t>{3, 12, 4}));
    split->W_q_heads->copy_from_fused(fused->W_q->weight, bias ? fused->W_q->bias : torch::Tensor());
    split->W_k_heads->copy_from_fused(fused->W_k->weight, bias ? fused->W_k->bias : torch::Tensor());
    split->W_v_heads->copy_from_fused(fused->W_v->weight, bias ? fused->W_v->bias : torch::Tensor());
    {
      torch::NoGradGuard g;
      split->W_o->weight.copy_(fused->W_o->weight);
      if (bias) split->W_o->bias.copy_(fused->W_o->bias);
    }
    auto q = torch::randn({2, 4, 12}), kv = torch::randn({2, 6, 12});
    auto lens = torch::tensor({3, 6});
    EXPECT_ALLCLOSE(split->forward(q, kv, kv, lens), fused->forward(q, kv, kv, lens), 1e-5, 1e-6) << "bias " << bias;
  }
}

TEST_F(Variants, PerHeadEncoderDecoderEqualFusedOnes) {
  auto base = TransformerOptions(11, 12, 16, 3, 2).bias(true);
  auto split_opts = base;
  split_opts.per_head_projections(true);
  TransformerEncoder enc(base, dot), enc_split(split_opts, dot);
  TransformerDecoder dec(base, dot), dec_split(split_opts, dot);
  copy_params(*enc, *enc_split, 3);
  copy_params(*dec, *dec_split, 3);
  for (auto* m : std::vector<torch::nn::Module*>{enc.get(), enc_split.get(), dec.get(), dec_split.get()}) m->eval();
  auto src = torch::randint(0, 11, {2, 5}), lens = torch::tensor({5, 3});
  auto a = enc->forward(src, lens), b = enc_split->forward(src, lens);
  EXPECT_ALLCLOSE(b.states, a.states, 1e-5, 1e-5);
  auto tgt = torch::randint(0, 11, {2, 4});
  auto sa = dec->init_state(a, false), sb = dec_split->init_state(b, false);
  EXPECT_ALLCLOSE(dec_split->forward(tgt, *sb), dec->forward(tgt, *sa), 1e-4, 1e-5);
}

TEST_F(Variants, TiedEmbeddingsShareStorageAndDropTheOutputLayer) {
  auto opts = TransformerOptions(17, 8, 16, 2, 1);
  TransformerDecoder untied(opts, dot);
  opts.tie_embeddings(true);
  TransformerDecoder tied(opts, dot);
  EXPECT_FALSE(tied->dense);
  EXPECT_EQ(tied->output_weight().data_ptr(), tied->embedding->weight.data_ptr());
  for (const auto& p : tied->named_parameters()) EXPECT_NE(p.key().rfind("dense.", 0), 0u) << p.key();
  auto count = [](torch::nn::Module& m) {
    int64_t n = 0;
    for (const auto& p : m.parameters()) n += p.numel();
    return n;
  };
  EXPECT_EQ(count(*untied) - count(*tied), 17 * 8 + 17);  // dense weight and bias
  // Changing the embedding changes the output projection: one tensor, not a copy.
  tied->eval();
  EncoderOutput enc{torch::randn({1, 3, 8}), torch::tensor({3})};
  auto tgt = torch::tensor({{1, 2}});
  auto st = tied->init_state(enc, false);
  auto before = tied->forward(tgt, *st);
  {
    torch::NoGradGuard g;
    tied->embedding->weight[5].mul_(3.0);  // (adding a constant would vanish: h is layer-normed)
  }
  EXPECT_EQ(tied->output_weight()[5][0].item<float>(), tied->embedding->weight[5][0].item<float>());
  auto after = tied->forward(tgt, *tied->init_state(enc, false));
  EXPECT_FALSE(torch::allclose(before.select(2, 5), after.select(2, 5)));
}

TEST_F(Variants, SoftmaxOutputIsTheSoftmaxOfTheLogits) {
  auto opts = TransformerOptions(9, 8, 16, 2, 1);
  TransformerDecoder logits(opts, dot);
  opts.output_softmax(true);
  TransformerDecoder probs(opts, dot);
  copy_params(*logits, *probs, 2);
  logits->eval();
  probs->eval();
  EXPECT_FALSE(logits->outputs_probabilities());
  EXPECT_TRUE(probs->outputs_probabilities());
  EncoderOutput enc{torch::randn({2, 3, 8}), torch::tensor({3, 2})};
  auto tgt = torch::tensor({{1, 2, 3}, {4, 5, 6}});
  auto p = probs->forward(tgt, *probs->init_state(enc, false));  // [2, 3, 9]
  auto l = logits->forward(tgt, *logits->init_state(enc, false));
  EXPECT_ALLCLOSE(p, torch::softmax(l, -1), 1e-5, 1e-7);
  EXPECT_ALLCLOSE(p.sum(-1), torch::ones({2, 3}), 1e-5, 1e-6);
}

TEST_F(Variants, GlorotUniformFollowsKerasDefaults) {
  auto opts = TransformerOptions(29, 16, 64, 4, 1)
                  .bias(true)
                  .init(TransformerInit::GlorotUniform)
                  .ffn_conv1d(true)
                  .per_head_projections(true)
                  .layer_norm_eps(1e-6);
  TransformerDecoder dec(opts.tie_embeddings(true), dot);
  const auto& blk = dec->blocks.at(0);
  auto within = [](const torch::Tensor& w, double bound) { return w.abs().max().item<double>() <= bound + 1e-7; };
  // Each head's [16, 4] kernel: bound sqrt(6 / (16 + 4)).
  EXPECT_TRUE(within(blk->attention1->W_q_heads->weight, std::sqrt(6.0 / 20)));
  EXPECT_GT(blk->attention1->W_q_heads->weight.abs().max().item<double>(), 0.5 * std::sqrt(6.0 / 20));
  EXPECT_EQ(blk->attention1->W_q_heads->bias.abs().sum().item<double>(), 0.0);
  EXPECT_TRUE(within(blk->attention1->W_o->weight, std::sqrt(6.0 / 32)));
  EXPECT_TRUE(within(blk->ffn->conv1->weight, std::sqrt(6.0 / 80)));  // Conv1D(64) on 16 channels
  EXPECT_EQ(blk->ffn->conv1->bias.abs().sum().item<double>(), 0.0);
  EXPECT_TRUE(within(dec->embedding->weight, 0.05));
  EXPECT_TRUE(torch::equal(blk->addnorm1->ln->weight, torch::ones({16})));
  EXPECT_DOUBLE_EQ(blk->addnorm1->ln->options.eps(), 1e-6);
  EXPECT_DOUBLE_EQ(blk->addnorm3->ln->options.eps(), 1e-6);
}

TEST_F(Variants, FairseqInitGivesUnitScaleTokenVectors) {
  // 64 hiddens: the default N(0, 1) embeddings, scaled by sqrt(64), are 8 times the positional
  // encoding's scale; fairseq's N(0, 64^-1/2) ones are of its scale.
  auto opts = TransformerOptions(4000, 64, 128, 4, 1).bias(true).init(TransformerInit::Fairseq);
  TransformerDecoder dec(opts, dot);
  const auto scaled = dec->embedding->weight * std::sqrt(64.0);
  EXPECT_NEAR(scaled.std().item<double>(), 1.0, 0.02);
  EXPECT_NEAR(scaled.mean().item<double>(), 0.0, 0.01);
  const auto& blk = dec->blocks.at(0);
  auto glorot = [](const torch::Tensor& w, double bound) {
    const double max = w.abs().max().item<double>();
    return max <= bound + 1e-7 && max > 0.9 * bound;
  };
  EXPECT_TRUE(glorot(blk->attention1->W_o->weight, std::sqrt(6.0 / 128)));
  EXPECT_TRUE(glorot(dec->dense->weight, std::sqrt(6.0 / (64 + 4000))));
  EXPECT_EQ(dec->dense->bias.abs().sum().item<double>(), 0.0);
  TransformerDecoder plain(TransformerOptions(4000, 64, 128, 4, 1), dot);
  EXPECT_NEAR((plain->embedding->weight * std::sqrt(64.0)).std().item<double>(), 8.0, 0.2);
}

TEST_F(Variants, GlorotUniformKeepsPositionsVisibleAtMulti30KWidth) {
  // transformer_multi30k_de_en_glorot.yaml's reason (issue 17): at d_model 256 the default N(0, 1)
  // embeddings, scaled by sqrt(256), have an RMS of 16, 23 times the sinusoidal positional
  // encoding's (1/sqrt(2)), so the first block sees which words but hardly where; glorot_uniform's
  // U(-0.05, 0.05) ones, scaled, have an RMS of 0.05 / sqrt(3) * 16 = 0.46, below the encoding's.
  const int64_t h = 256;
  const double pe_rms = 1.0 / std::sqrt(2.0);
  PositionalEncoding pe(h, 0.0, 64);
  pe->eval();
  const auto encoding = pe->forward(torch::zeros({1, 64, h}));  // [1, 64, H]: the encoding alone
  EXPECT_NEAR(encoding.pow(2).mean().sqrt().item<double>(), pe_rms, 0.01);
  auto rms_of_scaled_embedding = [&](TransformerInit init) {
    TransformerEncoder enc(TransformerOptions(8000, h, 512, 8, 1).init(init), dot);
    return (enc->embedding->weight * std::sqrt(static_cast<double>(h))).pow(2).mean().sqrt().item<double>();
  };
  EXPECT_NEAR(rms_of_scaled_embedding(TransformerInit::Default) / pe_rms, 16.0 * std::sqrt(2.0), 0.3);
  const double glorot = rms_of_scaled_embedding(TransformerInit::GlorotUniform);
  EXPECT_NEAR(glorot, 0.05 / std::sqrt(3.0) * 16.0, 0.01);
  EXPECT_LT(glorot, pe_rms);
}

}  // namespace
}  // namespace attnlab::nn::nn_transformer_variants_test
