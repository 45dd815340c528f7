// Scorer plugin "average": all scores 0, so attention is uniform over the valid keys.
#include "average_scorer.hpp"

#include <attnlab/plugin/plugin.hpp>

namespace {

using namespace attnlab;

config::Schema schema() { return {}; }

std::shared_ptr<nn::Scorer> make(const config::Options&, const plugin::BuildContext&, const nn::ScorerContext&) {
  return std::make_shared<scorers::average::AverageScorerImpl>();
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Scorer, "average",
               "Average pooling: uniform weights over the valid keys, ignoring queries (d2l 10.2.2)", schema, make)
