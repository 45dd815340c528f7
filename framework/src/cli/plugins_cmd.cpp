#include "cli/commands.hpp"

#include <attnlab/plugin/registry.hpp>
#include <attnlab/run/experiment.hpp>

#include "plugin/candidates.hpp"

#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <utility>

namespace attnlab::cli {

namespace {

/// The schema's options in order, each followed by its fields (a map's own options) as
/// <name>.<field>.
config::Schema flatten(const config::Schema& schema, const std::string& prefix = "") {
  config::Schema out;
  for (const auto& o : schema) {
    out.push_back(o);
    out.back().name = prefix + o.name;
    for (auto& field : flatten(o.fields, prefix + o.name + ".")) out.push_back(std::move(field));
  }
  return out;
}

void print_schema(const config::Schema& nested) {
  if (nested.empty()) {
    std::cout << "  (no options)\n";
    return;
  }
  const config::Schema schema = flatten(nested);
  size_t w = 4;
  for (const auto& o : schema) w = std::max(w, o.name.size());
  std::cout << fmt::format("  {:<{}}  {:<6}  {:<16}  {}\n", "option", w, "type", "default", "description");
  for (const auto& o : schema) {
    std::string def = o.default_value ? (o.default_value->empty() ? "\"\"" : *o.default_value) : "(required)";
    std::string desc = o.description;
    if (!o.choices.empty()) desc += fmt::format(" [{}]", fmt::join(o.choices, "|"));
    if (o.min || o.max) {
      desc += fmt::format(" [{}..{}]", o.min ? fmt::format("{}", *o.min) : "", o.max ? fmt::format("{}", *o.max) : "");
    }
    const std::string type = fmt::format("{}{}", config::type_name(o.type), o.nullable ? "?" : "");
    std::cout << fmt::format("  {:<{}}  {:<6}  {:<16}  {}\n", o.name, w, type, def, desc);
  }
}

}  // namespace

namespace {

int show(const std::vector<std::string>& plugin_dirs, const std::string& name) {
  plugin::Registry registry;
  for (const auto& d : plugin_dirs) registry.add_search_dir(d);
  registry.discover();
  auto plugins = registry.list();
  if (name.empty()) {
    size_t kw = 4, nw = 4;
    for (const auto* p : plugins) {
      kw = std::max(kw, p->kind.size());
      nw = std::max(nw, p->name.size());
    }
    std::cout << fmt::format("{:<{}}  {:<{}}  {}\n", "kind", kw, "name", nw, "description");
    for (const auto* p : plugins)
      std::cout << fmt::format("{:<{}}  {:<{}}  {}\n", p->kind, kw, p->name, nw, p->description);
    std::cout << fmt::format(
        "\n{} plugins from {}\n`runner plugins <name>` shows a plugin's options; "
        "`runner plugins experiment` the experiment file's top level.\n",
        plugins.size(), fmt::join(registry.search_dirs(), ":"));
    return 0;
  }
  if (name == "experiment") {
    std::cout << "experiment file (top level)\n";
    print_schema(run::experiment_schema());
    return 0;
  }
  // A name may be "kind/name" or a bare name (all kinds that have it).
  std::string kind, bare = name;
  if (auto slash = name.find('/'); slash != std::string::npos) {
    kind = name.substr(0, slash);
    bare = name.substr(slash + 1);
  }
  int shown = 0;
  std::vector<std::string> names;
  for (const auto* p : plugins) {
    names.push_back(p->name);
    if (p->name != bare || (!kind.empty() && p->kind != kind)) continue;
    if (shown++) std::cout << "\n";
    std::cout << fmt::format("{} {}: {}\n  file: {}\n  built for attnlab {} (ABI {}), torch {}\n", p->kind, p->name,
                             p->description, p->path, p->attnlab_version, p->abi_version, p->torch_version);
    print_schema(p->schema);
  }
  if (!shown) {
    // A library that was skipped (warned about above) and provides it: the registry says why.
    for (const auto& b : registry.broken()) {
      if (b.name == bare && (kind.empty() || b.kind == kind)) (void)registry.find(b.kind, b.name);
    }
    std::string msg = fmt::format("no plugin named '{}'", name);
    if (auto s = config::did_you_mean(bare, names)) msg += fmt::format("; did you mean '{}'?", *s);
    msg += fmt::format(" (searched: {})", fmt::join(registry.search_dirs(), ", "));
    msg += plugin::skipped_candidates(registry);  // a skipped library under another name may hold it
    msg += "; a plugin built elsewhere is found with --plugin-path DIR or ATTNLAB_PLUGIN_PATH=DIR";
    throw PluginError(msg);
  }
  return 0;
}

}  // namespace

int cmd_plugins(int argc, char** argv) {
  CLI::App app{"List plugins (kind, name, description), or show one plugin's options"};
  std::string name;
  std::vector<std::string> dirs;
  app.add_option("name", name, "plugin name, kind/name, or 'experiment' for the experiment file's top level");
  add_plugin_path_option(app, dirs);
  if (auto code = parse_command_line(app, argc, argv, "runner plugins")) return *code;
  return show(dirs, name);
}

}  // namespace attnlab::cli
