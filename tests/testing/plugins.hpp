#pragma once
// A plugin's object for tests that link libattnlab.so: the scorer classes live in their plugins
// (plugins/scorer/<name>/), so a test that needs one, e.g. Bahdanau's decoder with the additive
// scorer, asks the registry for it as an attention module does.
#include <attnlab/config/node.hpp>
#include <attnlab/nn/scorer.hpp>
#include <attnlab/plugin/registry.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace attnlab::testutil {

/// The scorer plugin `yaml` names ("additive", "{plugin: additive, num_hiddens: 8}") from the
/// built plugins (ATTNLAB_PLUGIN_PATH, set by ctest), made for queries and keys of these sizes.
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
