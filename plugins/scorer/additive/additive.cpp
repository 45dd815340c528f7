// Scorer plugin "additive": Bahdanau's w_v^T tanh(W_q q + W_k k) (d2l AdditiveAttention's scores).
#include "additive_scorer.hpp"

#include <attnlab/config/binding.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/plugin.hpp>

namespace {

using namespace attnlab;

struct Config {
  int64_t num_hiddens = 0;  // 0: the key size
  bool fused = true;
};

const config::Binding<Config>& binding() {
  static const auto b = config::Binding<Config>()
                            .option("num_hiddens", &Config::num_hiddens,
                                    "width of the tanh layer (0 = the key size: per-head size inside multi-head "
                                    "attention, the hidden size in Bahdanau's decoder)",
                                    {.min = 0, .max = 65536})
                            .option("fused", &Config::fused,
                                    "score in one CPU pass without the [B, Q, K, H] tanh features (tanh "
                                    "recomputed in the backward); false: d2l's composition of torch ops. Same "
                                    "parameters, results equal up to float rounding; CUDA always composes");
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<nn::Scorer> make(const config::Options& options, const plugin::BuildContext&,
                                 const nn::ScorerContext& sc) {
  ATTNLAB_CHECK(sc.query_size > 0 && sc.key_size > 0, ConfigError,
                "{}: {} needs the query and key sizes from the module that uses it, found query size {} and key "
                "size {} (use it as the scorer of an attention module)",
                options.resolved().where(), options.owner(), sc.query_size, sc.key_size);
  const Config c = binding().read(options);
  const int64_t hiddens = c.num_hiddens > 0 ? c.num_hiddens : sc.key_size;
  return std::make_shared<scorers::additive::AdditiveScorerImpl>(sc.query_size, sc.key_size, hiddens, c.fused);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Scorer, "additive",
               "Additive (Bahdanau) scores w_v^T tanh(W_q q + W_k k); query and key sizes may differ (d2l 10.3.2)",
               schema, make)
