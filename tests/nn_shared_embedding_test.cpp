// model.share_embeddings: EncoderDecoderImpl::share_token_embeddings and the Encoder/Decoder hooks
// it calls (token_embedding, use_token_embedding). One table embeds both sides, is one parameter
// of the model, and gets the gradients of both uses; what cannot share says why.
#include <attnlab/error.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/transformer.hpp>

#include "testing/testing.hpp"

#include <gtest/gtest.h>
#include <torch/nn/modules/embedding.h>
#include <torch/utils.h>

#include <memory>
#include <string>

// A namespace of its own: the file shares a translation unit with its neighbours (tests/CMakeLists.txt).
namespace attnlab::nn::nn_shared_embedding_test {
namespace {

std::shared_ptr<Scorer> dot(const ScorerContext&) { return std::make_shared<DotProductScorerImpl>(); }

class SharedEmbedding : public testutil::SeededTest {};

struct Pair {
  std::shared_ptr<TransformerEncoderImpl> encoder;
  std::shared_ptr<TransformerDecoderImpl> decoder;
  EncoderDecoder model{nullptr};
};

Pair transformer_pair(const TransformerOptions& enc, const TransformerOptions& dec) {
  Pair p;
  p.encoder = std::make_shared<TransformerEncoderImpl>(enc, dot);
  p.decoder = std::make_shared<TransformerDecoderImpl>(dec, dot);
  p.model = EncoderDecoder(p.encoder, p.decoder);
  return p;
}

bool has_parameter(const torch::nn::Module& m, const std::string& name) {
  return m.named_parameters().find(name) != nullptr;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST_F(SharedEmbedding, OneTableIsOneParameterOfTheModel) {
  const auto options = TransformerOptions(17, 8, 16, 2, 2);
  auto p = transformer_pair(options, options);
  const int64_t before = p.model->num_parameters();
  ASSERT_TRUE(has_parameter(*p.model, "decoder.embedding.weight"));
  p.model->share_token_embeddings();
  EXPECT_EQ(p.model->num_parameters(), before - 17 * 8);
  EXPECT_TRUE(has_parameter(*p.model, "encoder.embedding.weight"));
  EXPECT_FALSE(has_parameter(*p.model, "decoder.embedding.weight"));
  EXPECT_EQ(p.decoder->token_embedding().get(), p.encoder->token_embedding().get());
  EXPECT_TRUE(p.decoder->embedding->weight.is_same(p.encoder->embedding->weight));
  p.model->share_token_embeddings();  // again: nothing changes
  EXPECT_EQ(p.model->num_parameters(), before - 17 * 8);
  // Moving the model moves the one table the decoder uses.
  p.model->to(torch::kDouble);
  EXPECT_EQ(p.decoder->embedding->weight.scalar_type(), torch::kDouble);
}

TEST_F(SharedEmbedding, TheSharedGradientIsTheSumOfBothSidesUses) {
  const auto options = TransformerOptions(13, 8, 16, 2, 2);
  auto shared = transformer_pair(options, options);
  shared.model->share_token_embeddings();
  // The same weights unshared: the decoder's table a copy of the encoder's.
  auto apart = transformer_pair(options, options);
  {
    torch::NoGradGuard no_grad;
    const auto from = shared.model->named_parameters();
    for (auto& q : apart.model->named_parameters()) {
      const std::string name = q.key() == "decoder.embedding.weight" ? "encoder.embedding.weight" : q.key();
      q.value().copy_(from[name]);
    }
  }
  shared.model->eval();
  apart.model->eval();
  const auto src = torch::tensor({{4, 5, 6, 1, 2}, {7, 8, 1, 2, 2}}, torch::kLong);  // [2, 5]
  const auto lens = torch::tensor({4, 3}, torch::kLong);                             // [2]
  const auto tgt = torch::tensor({{0, 9, 10, 11}, {0, 12, 4, 2}}, torch::kLong);     // [2, 4]
  const auto weights = torch::randn({2, 4, 13});                                     // [2, 4, V]
  const auto y_shared = shared.model->forward(src, lens, tgt);
  const auto y_apart = apart.model->forward(src, lens, tgt);
  ASSERT_TRUE(torch::allclose(y_shared, y_apart, 1e-6, 1e-6));
  (y_shared * weights).sum().backward();
  (y_apart * weights).sum().backward();
  const auto g = shared.encoder->embedding->weight.grad();
  const auto g_enc = apart.encoder->embedding->weight.grad(), g_dec = apart.decoder->embedding->weight.grad();
  ASSERT_TRUE(g.defined() && g_enc.defined() && g_dec.defined());
  EXPECT_GT(g_enc.abs().sum().item<double>(), 0);
  EXPECT_GT(g_dec.abs().sum().item<double>(), 0);
  EXPECT_TRUE(torch::allclose(g, g_enc + g_dec, 1e-5, 1e-6)) << (g - g_enc - g_dec).abs().max();
}

TEST_F(SharedEmbedding, ATiedOutputProjectionUsesTheSharedTable) {
  const auto options = TransformerOptions(11, 8, 16, 2, 1);
  auto p = transformer_pair(options, TransformerOptions(options).tie_embeddings(true));
  const int64_t before = p.model->num_parameters();
  p.model->share_token_embeddings();
  EXPECT_EQ(p.model->num_parameters(), before - 11 * 8);  // one table: source, target and output
  EXPECT_TRUE(p.decoder->output_weight().is_same(p.encoder->embedding->weight));
}

TEST_F(SharedEmbedding, TablesOfOtherShapesAreAConfigErrorNamingBoth) {
  auto p = transformer_pair(TransformerOptions(17, 8, 16, 2, 1), TransformerOptions(19, 8, 16, 2, 1));
  const std::string what = error_of([&] { p.model->share_token_embeddings(); });
  EXPECT_NE(what.find("[17, 8]"), std::string::npos) << what;
  EXPECT_NE(what.find("[19, 8]"), std::string::npos) << what;
  EXPECT_THROW(p.model->share_token_embeddings(), ConfigError);
  EXPECT_TRUE(has_parameter(*p.model, "decoder.embedding.weight"));  // nothing half done
}

/// A decoder plugin that embeds target ids but never heard of sharing.
class TableDecoder : public Decoder {
 public:
  TableDecoder(int64_t vocab, int64_t width) {
    table = register_module("embedding", torch::nn::Embedding(vocab, width));
  }
  std::unique_ptr<DecoderState> init_state(const EncoderOutput& enc, bool incremental) override {
    auto s = std::make_unique<DecoderState>();
    s->encoder = enc;
    s->incremental = incremental;
    return s;
  }
  torch::Tensor forward(const torch::Tensor& tgt, DecoderState&) override { return table->forward(tgt); }
  torch::nn::Embedding token_embedding() const override { return table; }
  torch::nn::Embedding table{nullptr};
};

/// One that adopts the shared table but registers it a second time.
class CarelessDecoder : public TableDecoder {
 public:
  using TableDecoder::TableDecoder;
  void use_token_embedding(const torch::nn::Embedding& shared) override { table = register_module("shared", shared); }
};

/// One without a table at all.
class TablelessDecoder : public TableDecoder {
 public:
  using TableDecoder::TableDecoder;
  torch::nn::Embedding token_embedding() const override { return nullptr; }
};

TEST_F(SharedEmbedding, WhatCannotShareSaysWhy) {
  auto encoder = std::make_shared<TransformerEncoderImpl>(TransformerOptions(17, 8, 16, 2, 1), dot);
  EncoderDecoder no_hook(encoder, std::make_shared<TableDecoder>(17, 8));
  std::string what = error_of([&] { no_hook->share_token_embeddings(); });
  EXPECT_NE(what.find("cannot share its embedding"), std::string::npos) << what;
  EXPECT_NE(what.find("TableDecoder"), std::string::npos) << what;
  EXPECT_THROW(no_hook->share_token_embeddings(), PluginError);

  EncoderDecoder careless(encoder, std::make_shared<CarelessDecoder>(17, 8));
  what = error_of([&] { careless->share_token_embeddings(); });
  EXPECT_NE(what.find("registers one parameter tensor twice"), std::string::npos) << what;
  EXPECT_NE(what.find("encoder.embedding.weight"), std::string::npos) << what;
  EXPECT_NE(what.find("decoder.shared.weight"), std::string::npos) << what;

  EncoderDecoder tableless(encoder, std::make_shared<TablelessDecoder>(17, 8));
  what = error_of([&] { tableless->share_token_embeddings(); });
  EXPECT_NE(what.find("the decoder"), std::string::npos) << what;
  EXPECT_NE(what.find("has none to share"), std::string::npos) << what;
  EXPECT_THROW(tableless->share_token_embeddings(), ConfigError);
}

TEST_F(SharedEmbedding, AModelRegisteringOneTensorTwiceIsRefusedWhenBuilt) {
  auto encoder = std::make_shared<TransformerEncoderImpl>(TransformerOptions(17, 8, 16, 2, 1), dot);
  auto decoder = std::make_shared<TableDecoder>(17, 8);
  decoder->replace_module("embedding", encoder->embedding);  // registered by both
  decoder->table = encoder->embedding;
  const std::string what = error_of([&] { EncoderDecoder(encoder, decoder); });
  EXPECT_NE(what.find("registers one parameter tensor twice"), std::string::npos) << what;
}

}  // namespace
}  // namespace attnlab::nn::nn_shared_embedding_test
