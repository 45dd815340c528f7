#pragma once
// Config side of the scorers a model plugin uses: its `attention` option
// ({scorer, self_scorer, cross_scorer}) and a ScorerFactory that asks the registry for the scorer
// each attention module's role calls for.
#include <attnlab/config/schema.hpp>
#include <attnlab/nn/scorer.hpp>
#include <attnlab/plugin/context.hpp>

#include <string>

namespace attnlab::nn {

/// The attentions a module has: which of attention.self_scorer / cross_scorer it accepts.
enum class AttentionRoles { Self, Cross, SelfAndCross };

/// The `attention` map's schema: scorer (default `default_scorer`), and per role present
/// self_scorer / cross_scorer (default: null = the scorer option).
config::Schema attention_schema(AttentionRoles roles, const std::string& default_scorer);

/// The `attention` option (a map, default {scorer: <default_scorer>}) with attention_schema as
/// its fields, so `runner plugins <name>` lists attention.scorer, attention.self_scorer, ...
config::OptionSpec attention_option(AttentionRoles roles, const std::string& default_scorer);

/// Builds scorers from the `attention` option of `options` through ctx.registry: a request with
/// role Self gets attention.self_scorer (or attention.scorer), role Cross attention.cross_scorer
/// (or attention.scorer). The request's owner, when empty, becomes this module's plugin and YAML
/// path. Validates the attention map now (unknown keys are ConfigErrors with did-you-mean).
ScorerFactory registry_scorer_factory(const config::Options& options, const plugin::BuildContext& ctx,
                                      AttentionRoles roles, const std::string& default_scorer);

}  // namespace attnlab::nn
