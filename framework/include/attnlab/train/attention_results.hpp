#pragma once
// The one writer of recorded attention to the results file.
#include <attnlab/nn/recorder.hpp>
#include <attnlab/results/results.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace attnlab::train {

/// The labels of each side's positions: source tokens, the decoder's inputs, points as text.
using SideLabels = std::map<nn::Side, std::vector<std::string>>;

/// Writes batch row `row` of every module `recorder` holds as /attention/<sample>/<module>:
/// weights [layers, heads, Q, K] with the module's layers and sides and each axis's labels from
/// `labels`. An axis whose side has labels is cut to their number (the steps decoded after
/// <eos>, the source padding); an axis whose side has none is written whole, unlabelled.
void write_attention(results::Results& results, const std::string& sample, const nn::AttentionRecorder& recorder,
                     int64_t row, const SideLabels& labels);

}  // namespace attnlab::train
