#ifndef ATTNLAB_SDK_HASH
#error "ATTNLAB_SDK_HASH must be defined (framework/CMakeLists.txt): the registry checks plugins against it"
#endif
#include <attnlab/config/node.hpp>
#include <attnlab/files.hpp>
#include <attnlab/plugin/registry.hpp>

#include <boost/dll/shared_library.hpp>
#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "plugin/candidates.hpp"
#include "plugin/elf.hpp"
#include "plugin/probe.hpp"

namespace attnlab {
extern const char* const kBuildPluginDir;  // defined in libattnlab.so (attnlab.cpp)
}

namespace attnlab::plugin {
namespace fs = std::filesystem;

namespace {

bool is_plugin_file(const fs::path& p) {
  const auto name = p.filename().string();
  return name.starts_with("libattnlab_") && p.extension() == ".so";
}

/// (kind, name) from the conventional file name libattnlab_<kind>_<name>.so.
std::pair<std::string, std::string> kind_and_name_from_file(const fs::path& p) {
  std::string stem = p.filename().string();
  stem = stem.substr(std::strlen("libattnlab_"), stem.size() - std::strlen("libattnlab_") - 3);
  const auto cut = stem.find('_');
  if (cut == std::string::npos) return {stem, ""};
  return {stem.substr(0, cut), stem.substr(cut + 1)};
}

/// A PluginError thrown by load() for a library that could not be used, with what it provides
/// when the descriptor's frozen prefix could be read, and for a kind + name already provided, the
/// library that provides it.
struct LoadFailure : PluginError {
  LoadFailure(std::string msg, std::string k, std::string n, std::string first = {})
      : PluginError(std::move(msg)), kind(std::move(k)), name(std::move(n)), first_path(std::move(first)) {}
  std::string kind, name, first_path;
};

/// What load() does up to its checks of the descriptor, for the probing process (probe.hpp):
/// the same dlopen-s, then the descriptor's kind and name reported, then its schema made.
void rehearse_load(const std::string& path, const probe::Report& report) {
  preload_self_bound(path);
  if (dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) == nullptr) return;  // load() says why
  boost::dll::shared_library lib;
  boost::dll::fs::error_code ec;
  lib.load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, ec);
  if (ec || !lib.has(kDescriptorSymbol)) return;
  const Descriptor* d = lib.get_alias<DescriptorFn>(kDescriptorSymbol)();
  if (d == nullptr) return;
  report(d->kind, d->name);
  if (d->abi_version != kAbiVersion || std::string(d->sdk_hash) != ATTNLAB_SDK_HASH ||
      std::string(d->torch_version) != kTorchVersion) {
    return;
  }
  (void)d->schema();
}

/// <dir of libattnlab.so>/attnlab/plugins when that folder exists: the plugins of an installed
/// attnlab (cmake --install), used instead of the build tree's folder.
std::string installed_plugin_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&installed_plugin_dir), &info) == 0 || info.dli_fname == nullptr) return {};
  std::error_code ec;
  const auto dir = fs::path(info.dli_fname).parent_path() / "attnlab" / "plugins";
  return fs::is_directory(dir, ec) ? dir.string() : std::string();
}

/// A library skipped because an earlier one provides the same kind and name.
struct Duplicate {
  std::string plugin, first_dir, reason;  // "scorer 'x'", where the one used lies, the full reason
};

/// One warning per folder of skipped duplicates (a folder on the path twice under two names, or an
/// old copy of the build's plugins, used to give one line per plugin), the full reason for one.
void warn_about_duplicates(const std::map<std::string, std::vector<Duplicate>>& by_dir) {
  for (const auto& [dir, dups] : by_dir) {
    if (dups.size() == 1) {
      fmt::print(stderr, "warning: skipping plugin library {}\n", dups[0].reason);
      continue;
    }
    std::set<std::string> firsts;
    std::vector<std::string> plugins;
    for (const auto& d : dups) {
      firsts.insert(d.first_dir);
      plugins.push_back(d.plugin);
    }
    fmt::print(stderr,
               "warning: skipping {} plugin libraries in {}: each provides a plugin that an earlier library in {} "
               "already provides (the first one found is used): {}\n",
               dups.size(), dir, fmt::join(firsts, ", "), fmt::join(plugins, ", "));
  }
}

}  // namespace

const char* sdk_hash() { return ATTNLAB_SDK_HASH; }

Registry::Registry() = default;
Registry::~Registry() = default;

void Registry::add_search_dir(const std::string& dir) { dirs_.push_back(dir); }

std::vector<std::string> Registry::search_dirs() const {
  std::vector<std::string> dirs = dirs_;
  if (const char* env = std::getenv("ATTNLAB_PLUGIN_PATH")) {
    for (auto& d : split_path_list(env)) dirs.push_back(d);
  }
  const auto installed = installed_plugin_dir();
  dirs.push_back(installed.empty() ? std::string(kBuildPluginDir) : installed);
  // As messages show them: absolute, without `.` and `..` (a relative --plugin-path names the
  // folder it meant from the working directory), symbolic links left as they are.
  std::error_code ec;
  for (auto& d : dirs) {
    auto absolute = fs::absolute(fs::path(d), ec);
    if (!ec) d = absolute.lexically_normal().string();
    if (d.size() > 1 && d.back() == '/') d.pop_back();
  }
  return dirs;
}

void Registry::discover() {
  std::set<fs::path> seen;
  std::map<std::string, std::vector<Duplicate>> duplicates;  // by the folder of the library skipped
  const auto dirs = search_dirs();
  for (size_t i = 0; i < dirs.size(); ++i) {
    const std::string& dir = dirs[i];
    // A folder given explicitly (--plugin-path) must be one; of ATTNLAB_PLUGIN_PATH's and the
    // runner's own, a missing one is skipped, but a symlink loop or a file there is named.
    if (const auto why = files::problem(dir, files::Want::Directory); !why.empty()) {
      const bool given = i < dirs_.size();
      ATTNLAB_CHECK(!given && why == "no such directory", PluginError, "plugin folder {} ({}): {}", dir,
                    given                 ? "--plugin-path"
                    : i + 1 < dirs.size() ? "ATTNLAB_PLUGIN_PATH"
                                          : "the runner's own",
                    why);
      continue;
    }
    std::error_code ec;
    std::vector<fs::path> libraries;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (is_plugin_file(entry.path())) libraries.push_back(entry.path());
    }
    std::sort(libraries.begin(), libraries.end());
    for (const auto& f : libraries) {
      // A symlink loop or a FIFO under a plugin's name is a broken library (load() says why),
      // not a filesystem_error out of directory_entry::is_regular_file().
      const auto problem = files::problem(f.string(), files::Want::File);
      auto canonical = problem.empty() ? fs::weakly_canonical(f, ec) : f;
      if (!seen.insert(canonical).second) continue;  // same file reached through two dirs
      try {
        load(canonical.string());
      } catch (const PluginError& e) {
        Broken b{canonical.string(), e.what(), "", ""};
        const auto* lf = dynamic_cast<const LoadFailure*>(&e);
        if (lf != nullptr && !lf->kind.empty()) {
          b.kind = lf->kind;
          b.name = lf->name;
        } else {
          std::tie(b.kind, b.name) = kind_and_name_from_file(canonical);
        }
        if (lf != nullptr && !lf->first_path.empty()) {
          duplicates[canonical.parent_path().string()].push_back(Duplicate{
              fmt::format("{} '{}'", b.kind, b.name), fs::path(lf->first_path).parent_path().string(), b.reason});
        } else {
          // stderr, whatever the runner's log goes to: a warning about the installation, not the run.
          fmt::print(stderr, "warning: skipping plugin library {}\n", b.reason);
        }
        broken_.push_back(std::move(b));
      }
    }
  }
  probe::save();  // what this scan learned, in one write of the cache
  warn_about_duplicates(duplicates);
}

const PluginInfo& Registry::load(const std::string& path) {
  if (const auto why = files::problem(path, files::Want::File); !why.empty()) {
    throw PluginError(fmt::format("{}: {}", path, why));  // "skipping plugin library <this>" in discover()
  }
  if (const auto problem = elf_problem(path); !problem.empty()) {
    throw PluginError(fmt::format("{}: {}", path, problem));
  }
  // Loaded first in a forked copy of this process, unless an earlier probe of this very file
  // survived: a static constructor that aborts or crashes then skips this library only.
  const auto probed = probe::check(path, ATTNLAB_SDK_HASH, [&](const probe::Report& r) { rehearse_load(path, r); });
  if (!probed.survived) throw LoadFailure(probed.reason, probed.kind, probed.name);
  // dlopen first, ourselves: RTLD_NOW binds every symbol now, so a library with an unresolved
  // symbol (built against other headers, another fmt) is refused here with the loader's reason
  // rather than dying mid-run; RTLD_NODELETE keeps its code mapped for the life of the process.
  preload_self_bound(path);
  dlerror();
  if (dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) == nullptr) {
    const char* why = dlerror();
    throw PluginError(fmt::format("cannot load plugin library {}: {}", path, why ? why : "unknown dlopen error"));
  }
  auto lib = std::make_shared<boost::dll::shared_library>();
  boost::dll::fs::error_code ec;
  lib->load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, ec);
  ATTNLAB_CHECK(!ec, PluginError, "cannot load plugin library {}: {}", path, ec.message());
  ATTNLAB_CHECK(lib->has(kDescriptorSymbol), PluginError,
                "{} is not an attnlab plugin: it exports no '{}' symbol (define one with ATTNLAB_PLUGIN)", path,
                kDescriptorSymbol);
  const Descriptor* d = lib->get_alias<DescriptorFn>(kDescriptorSymbol)();
  ATTNLAB_CHECK(d != nullptr, PluginError, "{}: plugin descriptor is null", path);
  // Read the ABI version before anything else: the rest of the layout depends on it.
  if (d->abi_version != kAbiVersion) {
    throw LoadFailure(
        fmt::format("{}: plugin {} '{}' was built for ABI {} but this runner supports ABI {}; rebuild the plugin "
                    "against this attnlab",
                    path, d->kind, d->name, d->abi_version, kAbiVersion),
        d->kind, d->name);
  }
  if (std::string(d->sdk_hash) != ATTNLAB_SDK_HASH) {
    throw LoadFailure(fmt::format("{}: plugin {} '{}' was built against other attnlab SDK headers (hash {}, this "
                                  "runner's is {}); rebuild it against this attnlab ({})",
                                  path, d->kind, d->name, d->sdk_hash, ATTNLAB_SDK_HASH, kVersion),
                      d->kind, d->name);
  }
  if (std::string(d->torch_version) != kTorchVersion) {
    throw LoadFailure(fmt::format("{}: plugin {} '{}' was built against torch {} but this runner uses torch {}; "
                                  "rebuild the plugin",
                                  path, d->kind, d->name, d->torch_version, kTorchVersion),
                      d->kind, d->name);
  }
  PluginInfo info;
  info.kind = d->kind;
  info.name = d->name;
  info.description = d->description;
  info.path = path;
  info.attnlab_version = d->attnlab_version;
  info.torch_version = d->torch_version;
  info.abi_version = d->abi_version;
  try {
    info.schema = d->schema();
  } catch (const std::exception& e) {
    throw PluginError(fmt::format("{}: plugin {} '{}' failed to describe its options: {}", path, info.kind,
                                  info.name, e.what()));
  }
  info.descriptor = d;
  info.library = lib;
  auto key = std::make_pair(info.kind, info.name);
  if (auto it = plugins_.find(key); it != plugins_.end()) {
    throw LoadFailure(fmt::format("{}: two plugins claim {} '{}': {} and {} (the first one found is used)", path,
                                  info.kind, info.name, it->second.path, path),
                      info.kind, info.name, it->second.path);
  }
  return plugins_.emplace(key, std::move(info)).first->second;
}

std::vector<const PluginInfo*> Registry::list() const {
  std::vector<const PluginInfo*> out;
  for (const auto& [key, info] : plugins_) out.push_back(&info);
  return out;  // std::map keeps (kind, name) order
}

const PluginInfo& Registry::find(const std::string& kind, const std::string& name) const {
  if (auto it = plugins_.find({kind, name}); it != plugins_.end()) return it->second;
  std::vector<std::string> names;
  for (const auto& [key, info] : plugins_) {
    if (key.first == kind) names.push_back(key.second);
  }
  for (const auto& b : broken_) {
    if (b.kind == kind && b.name == name) {
      throw PluginError(fmt::format("{} plugin '{}' is provided by {}, which could not be loaded: {}", kind, name,
                                    b.path, b.reason));
    }
  }
  std::string msg = fmt::format("no {} plugin named '{}'", kind, name);
  if (auto s = config::did_you_mean(name, names)) msg += fmt::format("; did you mean '{}'?", *s);
  msg += names.empty() ? fmt::format(" (no {} plugins are loaded; searched: {})", kind, fmt::join(search_dirs(), ", "))
                       : fmt::format(" (available: {}; searched: {})", fmt::join(names, ", "),
                                     fmt::join(search_dirs(), ", "));
  msg += skipped_candidates(*this);
  // Out-of-tree plugins live in their own build's plugins/ folder, which no default search covers.
  msg += "; a plugin built elsewhere is found with --plugin-path DIR or ATTNLAB_PLUGIN_PATH=DIR";
  throw PluginError(msg);
}

std::string skipped_candidates(const Registry& registry) {
  std::vector<std::string> unknown;
  const auto loaded = registry.list();
  for (const auto& b : registry.broken()) {
    if (std::none_of(loaded.begin(), loaded.end(),
                     [&](const PluginInfo* p) { return p->kind == b.kind && p->name == b.name; })) {
      unknown.push_back(b.path);
    }
  }
  if (unknown.empty()) return {};
  return fmt::format("; {} plugin librar{} could not be loaded and may provide it (see the warning above): {}{}",
                     unknown.size(), unknown.size() == 1 ? "y" : "ies",
                     fmt::join(unknown.begin(), unknown.begin() + std::min<size_t>(unknown.size(), 3), ", "),
                     unknown.size() > 3 ? ", ..." : "");
}

namespace {

/// A plugin's resolved options with `plugin: name`, at the node's YAML path.
config::Node with_name(const config::Options& options, const config::Node& node) {
  config::Node resolved = options.resolved();
  const config::Node& name_node = node.is_scalar() ? node : node.at("plugin");
  if (!resolved.has("plugin")) resolved.set("plugin", config::Node::scalar(name_node.str(), name_node.location()));
  resolved.repath(node.path());
  return resolved;
}

}  // namespace

Registry::Resolved Registry::resolve(const char* kind, const config::Node& node) {
  Resolved r = resolve_options(kind, node);
  r.index = resolved_.size();
  resolved_.push_back(with_name(*r.options, node));
  return r;
}

void Registry::refresh_resolved(const Resolved& r) {
  if (r.index < resolved_.size()) resolved_[r.index] = with_name(*r.options, r.node);
}

Registry::Resolved Registry::resolve_options(const char* kind, const config::Node& node) const {
  std::string name;
  const config::Node* name_node = &node;
  if (node.is_scalar()) {
    name = node.str();
  } else if (node.is_map()) {
    ATTNLAB_CHECK(node.has("plugin"), ConfigError, "{}: missing key 'plugin' naming the {} to use (at '{}')",
                  node.location().str(), kind, node.path().empty() ? "<root>" : node.path() + ".plugin");
    name_node = &node.at("plugin");
    name = name_node->str();
  } else {
    throw ConfigError(fmt::format("{}: expected a {} plugin name or a map with 'plugin:', found {} (at '{}')",
                                  node.location().str(), kind, node.is_null() ? "nothing" : "a list", node.path()));
  }
  const PluginInfo* info = nullptr;
  try {
    info = &find(kind, name);
  } catch (const PluginError& e) {
    throw ConfigError(fmt::format("{}: {} (at '{}')", name_node->location().str(), e.what(), name_node->path()));
  }
  std::string owner = fmt::format("{} '{}'", info->kind, info->name);
  config::Node opts = node.is_map() ? node : config::Node::map(node.location(), node.path());
  auto options = std::make_shared<config::Options>(opts, info->schema, owner);
  return Resolved{info, std::move(options), 0, node};
}

void Registry::rethrow_from_plugin(const PluginInfo& info) const {
  // Each case throws a new object made here, never the plugin's own: nothing that leaves points
  // at the plugin's code or data. attnlab's errors already name the place and the plugin.
  try {
    throw;
  } catch (const ConfigError& e) {
    throw ConfigError(e.what());
  } catch (const DataError& e) {
    throw DataError(e.what());
  } catch (const ResultsError& e) {
    throw ResultsError(e.what());
  } catch (const Interrupted& e) {
    throw Interrupted(e.what());
  } catch (const PluginError& e) {
    throw PluginError(e.what());
  } catch (const Error& e) {
    throw PluginError(fmt::format("plugin {} '{}' ({}) failed: {}", info.kind, info.name, info.path, e.what()));
  } catch (const c10::Error& e) {
    throw PluginError(
        fmt::format("plugin {} '{}' ({}) failed: {}", info.kind, info.name, info.path, message_without_backtrace(e)));
  } catch (const std::exception& e) {
    throw PluginError(fmt::format("plugin {} '{}' ({}) failed: {}", info.kind, info.name, info.path, e.what()));
  } catch (...) {
    throw PluginError(fmt::format("plugin {} '{}' ({}) threw a non-standard exception", info.kind, info.name,
                                  info.path));
  }
}

void Registry::mark_used(const PluginInfo& info) {
  auto entry = fmt::format("{}/{} {} ({})", info.kind, info.name, info.attnlab_version, info.path);
  if (std::find(used_.begin(), used_.end(), entry) == used_.end()) used_.push_back(entry);
}

std::vector<std::string> Registry::used() const { return used_; }

}  // namespace attnlab::plugin
