// The dataset as the runner sees it: loaded from its library by the registry, built from options.
// ATTNLAB_PLUGIN_FILE is the plugin library's path (set by attnlab_add_plugin's TESTS).
#include <attnlab/config/node.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/plugin/registry.hpp>
#include <attnlab/results/figure.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/results/tensor.hpp>

#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numbers>

namespace {
using namespace attnlab;

std::shared_ptr<data::Dataset> make(plugin::Registry& r, const std::string& yaml) {
  plugin::BuildContext ctx;
  ctx.seed = 3;
  auto ds = r.create<data::Dataset>(config::parse_yaml(yaml, "test.yaml"), ctx);
  ds->prepare("unused");
  return ds;
}

TEST(NoisySine, SamplesASineWithTheNoiseAskedFor) {
  plugin::Registry r;
  r.load(ATTNLAB_PLUGIN_FILE);
  auto ds = make(r, "{plugin: noisy_sine, n_train: 4000, noise: 0.5, periods: 2, amplitude: 1.5}");
  const auto train = ds->batches(data::Split::Train, false, 0);
  ASSERT_EQ(train.size(), 1u);
  const auto x = train[0].src.flatten(), y = train[0].tgt_out.flatten();  // [4000]
  ASSERT_EQ(x.size(0), 4000);
  EXPECT_GE(x.min().item<double>(), 0.0);
  EXPECT_LT(x.max().item<double>(), 4 * std::numbers::pi);
  const auto residual = y - 1.5 * torch::sin(x);
  EXPECT_NEAR(residual.mean().item<double>(), 0.0, 0.05);
  EXPECT_NEAR(residual.std().item<double>(), 0.5, 0.03);
  const auto test = ds->batches(data::Split::Test, false, 0);
  EXPECT_TRUE(torch::allclose(test[0].tgt_out.flatten(), 1.5 * torch::sin(test[0].src.flatten()), 1e-5, 1e-6));
  EXPECT_FALSE(ds->has_split(data::Split::Val));
  // Its metadata gives the axes' ranges its figures and the trainer's use.
  const auto& meta = ds->info().meta;
  EXPECT_DOUBLE_EQ(meta.range("x.range")->second, 4 * std::numbers::pi);
  EXPECT_DOUBLE_EQ(meta.range("y.range")->second, 1.5 + 3 * 0.5);
}

TEST(NoisySine, KeepsItsDataAndDeclaresItsFiguresInTheResultsFile) {
  plugin::Registry r;
  r.load(ATTNLAB_PLUGIN_FILE);
  auto ds = make(r, "{plugin: noisy_sine, n_train: 30}");
  const auto path = (std::filesystem::temp_directory_path() / "noisy_sine_test.h5").string();
  {
    results::Results res(path, "noisy_sine_test");
    ds->write_results(res);
  }
  results::ResultsReader in(path);
  const auto figures = results::declared_figures(in);
  ASSERT_EQ(figures.size(), 2u);
  EXPECT_EQ(figures[0].name, "noisy_sine");
  EXPECT_EQ(figures[0].kind, results::FigureKind::curve);
  EXPECT_EQ(figures[0].declared_by, "dataset 'noisy_sine'");
  EXPECT_EQ(figures[1].kind, results::FigureKind::table);
  for (const auto& f : figures) {
    for (const auto& l : f.layers) {
      for (const auto& p : {l.x, l.y, l.data}) {
        if (!p.empty()) EXPECT_TRUE(in.has(p)) << f.name << " draws " << p << ", which is not in the file";
      }
    }
  }
  // The training samples in the file are the ones its batches hand out.
  const auto x = results::read_tensor(in, "data/noisy_sine/x_train");
  EXPECT_TRUE(torch::equal(x, ds->batches(data::Split::Train, false, 0)[0].src.flatten()));
  EXPECT_EQ(results::read_tensor(in, "data/noisy_sine/first/noise").size(0), 12);
  std::filesystem::remove(path);
}

}  // namespace
