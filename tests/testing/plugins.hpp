#pragma once
// Plugins' objects for tests: a plugin's class lives in its plugin (plugins/<kind>/<name>/), so a
// test that needs another plugin's object, e.g. Bahdanau's decoder with the additive scorer or a
// decoder with the gru encoder, asks the registry for it as the runner does.
#include <attnlab/config/node.hpp>
#include <attnlab/nn/scorer.hpp>
#include <attnlab/plugin/registry.hpp>

#include "testing/testing.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace attnlab::testutil {

/// A test that makes plugins as the runner does: the built plugins discovered (ATTNLAB_PLUGIN_PATH,
/// set by ctest), a BuildContext that points at the registry, the seed fixed. A test sets the data
/// sizes its plugins need in ctx.data after calling SetUp().
class RegistryTest : public SeededTest {
 protected:
  void SetUp() override {
    SeededTest::SetUp();
    registry.discover();
    ctx.registry = &registry;
  }
  /// The YAML value `text` ("additive", "{plugin: gru, num_hiddens: 8}") as a config node.
  static config::Node yaml(const std::string& text) {
    return config::parse_yaml("x: " + text, "test.yaml").at("x");
  }

  plugin::Registry registry;
  plugin::BuildContext ctx;
};

#ifdef ATTNLAB_PLUGIN_FILE
/// A plugin's own tests (plugins/<kind>/<name>/tests/, where ATTNLAB_PLUGIN_FILE is the built
/// plugin): the suite loads that one library as the runner loads it, and create<I>() makes the
/// plugin from the entries of a YAML map, placed at `key` in test.yaml.
class PluginFileTest : public SeededTest {
 protected:
  static void SetUpTestSuite() {
    registry_ = new plugin::Registry();
    registry_->load(ATTNLAB_PLUGIN_FILE);
  }
  static void TearDownTestSuite() {
    delete registry_;
    registry_ = nullptr;
  }
  /// The plugin `entries` ("plugin: text, block_size: 8") configure, at `key` ("dataset").
  template <class I>
  static std::shared_ptr<I> create(const std::string& key, const std::string& entries) {
    plugin::BuildContext ctx;
    ctx.registry = registry_;
    return registry_->create<I>(config::parse_yaml(key + ": {" + entries + "}", "test.yaml").at(key), ctx);
  }

  static inline plugin::Registry* registry_ = nullptr;
};
#endif

/// The plugin of interface I (an encoder, a decoder, ...) that `yaml` names ("{plugin: gru,
/// num_hiddens: 16}") from the built plugins (ATTNLAB_PLUGIN_PATH, set by ctest), for a dataset
/// with these vocabulary sizes.
template <class I>
std::shared_ptr<I> make_plugin(const std::string& yaml, int64_t src_vocab_size, int64_t tgt_vocab_size) {
  plugin::Registry registry;
  registry.discover();
  plugin::BuildContext ctx;
  ctx.registry = &registry;
  ctx.data.src_vocab_size = src_vocab_size;
  ctx.data.tgt_vocab_size = tgt_vocab_size;
  return registry.create<I>(config::parse_yaml("plugin: " + yaml, "test.yaml").at("plugin"), ctx);
}

/// The scorer plugin `yaml` names ("additive", "{plugin: additive, num_hiddens: 8}"), made for
/// queries and keys of these sizes.
inline std::shared_ptr<nn::Scorer> make_scorer(const std::string& yaml, int64_t query_size, int64_t key_size) {
  plugin::Registry registry;
  registry.discover();
  plugin::BuildContext ctx;
  ctx.registry = &registry;
  nn::ScorerContext sc;
  sc.query_size = query_size;
  sc.key_size = key_size;
  return registry.create<nn::Scorer>(config::parse_yaml("scorer: " + yaml, "test.yaml").at("scorer"), ctx, sc);
}

}  // namespace attnlab::testutil
