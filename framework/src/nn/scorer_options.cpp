// The `attention` option of model plugins and the scorers it names, per attention role.
#include <attnlab/config/binding.hpp>
#include <attnlab/nn/scorer_options.hpp>
#include <attnlab/plugin/registry.hpp>

#include <fmt/format.h>

namespace attnlab::nn {
namespace {

bool has_self(AttentionRoles roles) { return roles != AttentionRoles::Cross; }
bool has_cross(AttentionRoles roles) { return roles != AttentionRoles::Self; }

const char* role_name(ScorerContext::Role role) { return role == ScorerContext::Role::Self ? "self" : "cross"; }

/// The `attention` map.
struct AttentionConfig {
  config::Node scorer, self_scorer, cross_scorer;  // the last two: null = `scorer`
};

config::Binding<AttentionConfig> attention_binding(AttentionRoles roles, const std::string& default_scorer) {
  using config::Type;
  auto b = config::Binding<AttentionConfig>().node("scorer", &AttentionConfig::scorer, Type::Any, default_scorer,
                                                   "scorer plugin: a name, or a map {plugin: <name>, ...its options}");
  if (has_self(roles)) {
    b.node("self_scorer", &AttentionConfig::self_scorer, Type::Any, "~",
           "the self-attention's scorer, as `scorer`; ~ (the default) = the `scorer` option");
  }
  if (has_cross(roles)) {
    b.node("cross_scorer", &AttentionConfig::cross_scorer, Type::Any, "~",
           "the cross-attention's scorer (queries from the decoder, keys from the encoder), as `scorer`; ~ (the "
           "default) = the `scorer` option");
  }
  return b;
}

}  // namespace

config::Schema attention_schema(AttentionRoles roles, const std::string& default_scorer) {
  return attention_binding(roles, default_scorer).schema();
}

config::OptionSpec attention_option(AttentionRoles roles, const std::string& default_scorer) {
  auto spec = config::opt_node("attention", config::Type::Map, fmt::format("{{scorer: {}}}", default_scorer),
                               "attention settings: which scorer plugins score the attention modules (below)");
  spec.fields = attention_schema(roles, default_scorer);
  return spec;
}

ScorerFactory registry_scorer_factory(const config::Options& o, const plugin::BuildContext& ctx, AttentionRoles roles,
                                      const std::string& default_scorer) {
  ATTNLAB_CHECK(ctx.registry != nullptr, PluginError, "{}: {} needs a plugin registry to create its scorer",
                o.resolved().where(), o.owner());
  const auto binding = attention_binding(roles, default_scorer);
  const AttentionConfig a =
      binding.read(config::Options(o.node("attention"), binding.schema(), o.owner() + " attention", {}));
  auto pick = [&](const config::Node& given) { return given.is_null() ? a.scorer : given; };
  const config::Node self = has_self(roles) ? pick(a.self_scorer) : config::Node();
  const config::Node cross = has_cross(roles) ? pick(a.cross_scorer) : config::Node();
  const std::string path = o.resolved().path();
  const std::string owner = fmt::format("{} at '{}'", o.owner(), path.empty() ? "<root>" : path);
  return [self, cross, owner, roles, ctx](const ScorerContext& request) {
    const bool is_self = request.role == ScorerContext::Role::Self;
    ATTNLAB_CHECK(is_self ? has_self(roles) : has_cross(roles), PluginError,
                  "{} asked for a {}-attention scorer, but declared no such attention (AttentionRoles)", owner,
                  role_name(request.role));
    ScorerContext context = request;
    if (context.owner.empty()) context.owner = owner;
    return ctx.registry->create<Scorer>(is_self ? self : cross, ctx, context);
  };
}

}  // namespace attnlab::nn
