// Scorer plugin "dot_product": scaled dot-product scores q k^T / sqrt(d), fused SDPA when not recording.
#include <attnlab/error.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/plugin/plugin.hpp>

namespace {

using namespace attnlab;

config::Schema schema() { return {}; }

std::shared_ptr<nn::Scorer> make(const config::Options& options, const plugin::BuildContext&,
                                 const nn::ScorerContext& sc) {
  ATTNLAB_CHECK(sc.query_size <= 0 || sc.key_size <= 0 || sc.query_size == sc.key_size, ConfigError,
                "{}: {} needs queries and keys of one size, found query size {} and key size {} "
                "(a scorer with its own projections, such as additive, handles different sizes)",
                options.resolved().where(), options.owner(), sc.query_size, sc.key_size);
  return std::make_shared<nn::DotProductScorerImpl>();
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Scorer, "dot_product", "Scaled dot-product scores q k^T / sqrt(d) (d2l 11.3)", schema,
               make)
