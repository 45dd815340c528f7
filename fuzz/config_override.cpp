// Fuzz target: the override parser (config::apply_override), on a copy of a real experiment tree.
//
// Input: overrides separated by NUL bytes ("a.b[1].c=value"; the value is YAML and may span
// lines), applied in order; a refused one is skipped and the next applied to the same tree.
// Refusals must be attnlab::Error; the tree must stay consistent and round-trip through
// to_yaml/parse_yaml after every override (config_check.hpp).
#include <attnlab/config/load.hpp>
#include <attnlab/config/node.hpp>
#include <attnlab/error.hpp>

#include <cstdint>
#include <string>

#include "common.hpp"
#include "config_check.hpp"

namespace {

// A cut-down experiments/transformer_fra_eng.yaml: maps, lists, a list of maps, nulls, numbers.
const char* const kBase = R"(name: transformer_fra_eng
seed: 0
data:
  dataset: fra_eng
  num_steps: 10
  splits: [train, valid]
  filters: ~
model:
  encoder: {type: transformer, num_layers: 2, num_heads: 4}
  decoder:
    type: transformer
    num_layers: 2
    dropout: 0.2
train:
  epochs: 30
  lr: 0.005
  schedule:
    - {epoch: 0, lr: 0.005}
    - {epoch: 10, lr: 0.001}
record:
  samples: ["go .", "i lost .", "he's calm ."]
  attention: true
)";

const attnlab::config::Node& base() {
  static const attnlab::config::Node node = attnlab::config::parse_yaml(kBase, "base.yaml");
  return node;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  attnlab::config::Node root = base();
  for (const auto& assignment : fuzz::split(input, '\0')) {
    try {
      attnlab::config::apply_override(root, assignment);
    } catch (const attnlab::Error&) {
      continue;  // a malformed or inapplicable override: a ConfigError naming it
    }
    fuzz::check_tree(root);
  }
  return 0;
}
