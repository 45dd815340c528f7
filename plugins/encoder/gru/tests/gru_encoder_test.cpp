// The GRU encoder (d2l 0.17 9.7): the book's shapes, the final state of every layer, gradients.
#include "gru_encoder.hpp"

#include "testing/testing.hpp"

#include <vector>

namespace attnlab::encoders::gru {
namespace {

using Sizes = std::vector<int64_t>;

class Rnn : public testutil::SeededTest {};

TEST_F(Rnn, BookEncoderShapes) {
  GruEncoder encoder(nn::GruOptions(10, 8, 16, 2).dropout(0.1));  // the book's sizes
  encoder->eval();
  auto X = torch::zeros({4, 7}, torch::kLong);  // [batch 4, 7 steps]
  auto valid = torch::tensor({7, 5, 3, 2});
  auto enc = encoder->forward(X, valid);
  EXPECT_EQ(enc.states.sizes(), (Sizes{4, 7, 16}));  // d2l: torch.Size([4, 7, 16])
  EXPECT_EQ(enc.hidden.sizes(), (Sizes{2, 4, 16}));  // d2l: torch.Size([2, 4, 16])
  EXPECT_TRUE(enc.valid_lens.equal(valid));          // passed through for the decoder's masking
  // The last layer's final state is the last step of the states.
  EXPECT_ALLCLOSE(enc.hidden[1], enc.states.select(1, 6));
  EXPECT_EQ(encoder->output_size(), 16);
}

TEST_F(Rnn, EncoderChecksItsSizesAndInput) {
  EXPECT_THROW(GruEncoder(nn::GruOptions(10, 0, 16, 2)), c10::Error);
  GruEncoder encoder(nn::GruOptions(10, 8, 16, 2));
  EXPECT_THROW(encoder->forward(torch::zeros({4, 7, 2}), {}), c10::Error);  // ids [B, S], not features
}

}  // namespace
}  // namespace attnlab::encoders::gru
