#pragma once
// d2l 0.17's GRU example (sections 9.7 and 10.4), shared by the GRU decoder plugins' tests:
// vocab 10, embed 8, hidden 16, 2 layers (batch 4, 7 steps in the tests).
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/rnn.hpp>

#include "testing/golden.hpp"
#include "testing/plugins.hpp"
#include "testing/testing.hpp"

#include <memory>
#include <string>

namespace attnlab::testutil {

class GruBook : public SeededTest {
 protected:
  const nn::GruOptions kBook = nn::GruOptions(10, 8, 16, 2);

  /// The book's encoder, from the encoder plugin "gru" (its class lives there).
  static std::shared_ptr<nn::Encoder> book_encoder(double dropout = 0.0) {
    return make_plugin<nn::Encoder>(
        "{plugin: gru, embed_size: 8, num_hiddens: 16, num_layers: 2, dropout: " + std::to_string(dropout) + "}", 10,
        10);
  }

  /// Every parameter from the golden scripts' closed formula (golden::fill), eval mode.
  static void fill_for_golden(torch::nn::Module& encoder, torch::nn::Module& decoder) {
    golden::fill(encoder);
    golden::fill(decoder);
    encoder.eval();
    decoder.eval();
  }

  /// What a transformer encoder gives: states [4, 7, 16] and valid lengths, no final state.
  static nn::EncoderOutput states_without_hidden() {
    nn::EncoderOutput out;
    out.states = torch::randn({4, 7, 16});
    out.valid_lens = torch::tensor({7, 5, 3, 2});
    return out;
  }
};

}  // namespace attnlab::testutil
