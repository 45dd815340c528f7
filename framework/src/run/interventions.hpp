#pragma once
// Interventions on a model's attention: head masks (nn/head_mask.hpp) as an experiment writes
// them (`interventions: {head_mask: {encoder_self: {2: [1, 4]}}}`) and as the command line does
// (`--head-mask 'decoder_cross:1:[1,3],encoder_self:*:5'`), checked against the model's attention
// sites and recorded in the results file. Layers and heads are numbered from 1, as runner plot,
// report and the Python package label them.
#include <attnlab/config/binding.hpp>
#include <attnlab/config/node.hpp>
#include <attnlab/nn/head_mask.hpp>
#include <attnlab/results/results.hpp>

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnlab::run {

/// The experiment's `interventions:` section.
struct InterventionsConfig {
  config::Node head_mask;  // {module: {layer: heads}}; {} = none
};

const config::Binding<InterventionsConfig>& interventions_binding();

/// A head mask as written, before it meets a model.
struct HeadMaskSpec {
  struct Item {
    std::string module;
    std::optional<int64_t> layer;  // from 1; nullopt = every layer ('*')
    std::vector<int64_t> heads;    // from 1; empty = every head ('*')
    std::string where;             // for messages: "file:line:col (at 'interventions.head_mask.x.2')" or "--head-mask 'x:2:1'"
  };
  std::vector<Item> items;
  bool empty() const { return items.empty(); }
};

/// `interventions.head_mask`: a map {module: {layer: heads}} where module is a recorded module's
/// name, layer a number from 1 or '*' (every layer), heads a number, a list of numbers or '*'
/// (every head); `module: '*'` switches off every head of every layer of the module.
/// ConfigError naming the place for any other shape.
HeadMaskSpec head_mask_from_node(const config::Node& node);

/// The command line's form: items "module:layer:heads" separated by commas, layer a number or
/// '*', heads a number, '[a,b,...]' or '*'; "module:layer" and "module" mean every head of that
/// layer / of every layer. A text starting with '{' is read as the experiment's YAML map instead.
/// `option` names the flag in messages ("--head-mask").
HeadMaskSpec head_mask_from_text(const std::string& text, const std::string& option);

/// A spec resolved against a model's sites.
struct ResolvedHeadMask {
  nn::HeadMask mask;               // xi = 0 for the heads switched off, 1 for the rest of a masked site
  std::string text;                // canonical: "decoder_cross:1:[1,3],encoder_self:2:*"
  int64_t heads_off = 0, heads_total = 0;
  std::vector<std::string> whole_layers;  // "encoder_self layer 2": every head of the layer is off
};

/// ConfigError naming the item and the valid range when a module, layer or head does not exist;
/// ConfigError when the model has no site a mask reaches. The multipliers are float on `device`.
ResolvedHeadMask resolve_head_mask(const HeadMaskSpec& spec, const std::vector<nn::AttentionSite>& sites,
                                   const torch::Device& device);

/// "encoder_self layers 1-2 x 4 heads, decoder_self ..., decoder_cross ..." for messages.
std::string describe_sites(const std::vector<nn::AttentionSite>& sites);

/// Writes the mask under `at` (e.g. "interventions/head_mask"): one float32 [layers, heads]
/// dataset of xi per module that has sites (1 = on, 0 = off; every site of the model, masked or
/// not), with attrs text, heads_off and heads_total on the group.
void write_head_mask(results::Results& results, const std::string& at, const ResolvedHeadMask& mask,
                     const std::vector<nn::AttentionSite>& sites);

}  // namespace attnlab::run
