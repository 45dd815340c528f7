// Scorer plugin "luong_general": Luong et al. (2015)'s "general" score, score(q, k) = q^T W k, with a
// learnable W of [query size, key size]. Built outside the attnlab tree against the installed SDK.
#include <attnlab/config/binding.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/scorer.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <torch/types.h>

#include <cmath>

namespace {
using namespace attnlab;

class LuongGeneral final : public nn::Scorer {
 public:
  LuongGeneral(int64_t query_size, int64_t key_size, bool scale)
      : scale_(scale ? 1.0 / std::sqrt(static_cast<double>(key_size)) : 1.0) {
    // Glorot-uniform W, as Keras' Luong attention layers do.
    const double bound = std::sqrt(6.0 / static_cast<double>(query_size + key_size));
    w_ = register_parameter("W", torch::empty({query_size, key_size}).uniform_(-bound, bound));
  }

  /// queries [B, Q, Dq], keys [B, K, Dk] -> [B, Q, K] (the same at every position)
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys, const nn::Positions&) override {
    return torch::matmul(torch::matmul(queries, w_), keys.transpose(1, 2)) * scale_;
  }

 private:
  double scale_;
  torch::Tensor w_;
};

// Its options: each a field of a struct, named once in the binding (the default is the field's).
struct Config {
  bool scale = false;
};

const config::Binding<Config>& binding() {
  static const auto b = config::Binding<Config>().option(
      "scale", &Config::scale, "divide the scores by sqrt(key size), as scaled dot-product does");
  return b;
}

config::Schema schema() { return binding().schema(); }

// sc: what the attention module that uses it will call it with (sizes per head, heads, role).
std::shared_ptr<nn::Scorer> make(const config::Options& options, const plugin::BuildContext&,
                                 const nn::ScorerContext& sc) {
  ATTNLAB_CHECK(sc.query_size > 0 && sc.key_size > 0, ConfigError,
                "{}: {} needs the query and key sizes from the module that uses it, found {} and {} (use it as "
                "the scorer of an attention module)",
                options.resolved().where(), options.owner(), sc.query_size, sc.key_size);
  const Config c = binding().read(options);
  return std::make_shared<LuongGeneral>(sc.query_size, sc.key_size, c.scale);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Scorer, "luong_general", "Luong's general score q^T W k with a learnable W", schema, make)
