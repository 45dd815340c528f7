// Scorer plugin "gaussian_kernel": Nadaraya-Watson scores -((q - k) w)^2 / 2, fixed or learnable w.
#include "gaussian_kernel_scorer.hpp"

#include <attnlab/config/binding.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/plugin.hpp>

namespace {

using namespace attnlab;

struct Config {
  bool learnable = false;
  double w = 1.0;
};

const config::Binding<Config>& binding() {
  static const auto b =
      config::Binding<Config>()
          .option("learnable", &Config::learnable,
                  "false: fixed w, the nonparametric estimator; true: w is one trainable parameter")
          .option("w", &Config::w, "the kernel's w (its initial value when learnable); 1 = the Gaussian kernel");
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<nn::Scorer> make(const config::Options& options, const plugin::BuildContext&,
                                 const nn::ScorerContext& sc) {
  ATTNLAB_CHECK(sc.query_size <= 0 || sc.key_size <= 0 || sc.query_size == sc.key_size, ConfigError,
                "{}: {} compares queries with keys, so they need one size, found query size {} and key size {}",
                options.resolved().where(), options.owner(), sc.query_size, sc.key_size);
  const Config c = binding().read(options);
  return std::make_shared<scorers::gaussian_kernel::GaussianKernelScorerImpl>(c.w, c.learnable);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Scorer, "gaussian_kernel",
               "Gaussian kernel scores -((q - k) w)^2 / 2 (Nadaraya-Watson; learnable w: d2l 10.2.4)", schema, make)
