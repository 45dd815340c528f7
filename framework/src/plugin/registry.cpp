#include <attnlab/config/node.hpp>
#include <attnlab/plugin/registry.hpp>

#include <boost/dll/shared_library.hpp>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

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

std::vector<std::string> split_path_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(':', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

Registry::Registry() = default;
Registry::~Registry() = default;

void Registry::add_search_dir(const std::string& dir) { dirs_.push_back(dir); }

std::vector<std::string> Registry::search_dirs() const {
  std::vector<std::string> dirs = dirs_;
  if (const char* env = std::getenv("ATTNLAB_PLUGIN_PATH")) {
    for (auto& d : split_path_list(env)) dirs.push_back(d);
  }
  dirs.emplace_back(kBuildPluginDir);
  return dirs;
}

void Registry::discover() {
  std::set<fs::path> seen;
  for (const auto& dir : search_dirs()) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.is_regular_file() && is_plugin_file(entry.path())) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      auto canonical = fs::weakly_canonical(f, ec);
      if (!seen.insert(canonical).second) continue;  // same file reached through two dirs
      load(canonical.string());
    }
  }
}

const PluginInfo& Registry::load(const std::string& path) {
  ATTNLAB_CHECK(fs::exists(path), PluginError, "plugin library not found: {}", path);
  auto lib = std::make_shared<boost::dll::shared_library>();
  boost::dll::fs::error_code ec;
  lib->load(path, boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local, ec);
  ATTNLAB_CHECK(!ec, PluginError, "cannot load plugin library {}: {}", path, ec.message());
  ATTNLAB_CHECK(lib->has(kDescriptorSymbol), PluginError,
                "{} is not an attnlab plugin: it exports no '{}' symbol (define one with ATTNLAB_PLUGIN)", path,
                kDescriptorSymbol);
  const Descriptor* d = lib->get_alias<DescriptorFn>(kDescriptorSymbol)();
  ATTNLAB_CHECK(d != nullptr, PluginError, "{}: plugin descriptor is null", path);
  // Read the ABI version before anything else: the rest of the layout depends on it.
  ATTNLAB_CHECK(d->abi_version == kAbiVersion, PluginError,
                "{}: plugin ABI version mismatch: this runner supports ABI {} but the plugin was built for ABI {}; "
                "rebuild the plugin against this attnlab",
                path, kAbiVersion, d->abi_version);
  ATTNLAB_CHECK(std::string(d->torch_version) == kTorchVersion, PluginError,
                "{}: plugin '{}' was built against torch {} but this runner uses torch {}; rebuild the plugin", path,
                d->name, d->torch_version, kTorchVersion);
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
    throw PluginError(fmt::format("two plugins claim {} '{}': {} and {}", info.kind, info.name, it->second.path,
                                  path));
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
  std::string msg = fmt::format("no {} plugin named '{}'", kind, name);
  if (auto s = config::did_you_mean(name, names)) msg += fmt::format("; did you mean '{}'?", *s);
  msg += names.empty() ? fmt::format(" (no {} plugins are loaded; searched: {})", kind, fmt::join(search_dirs(), ", "))
                       : fmt::format(" (available: {})", fmt::join(names, ", "));
  throw PluginError(msg);
}

Registry::Resolved Registry::resolve(const char* kind, const config::Node& node) {
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
  config::Node resolved = options->resolved();
  if (!resolved.has("plugin")) resolved.set("plugin", config::Node::scalar(name, name_node->location()));
  resolved.repath(node.path());
  resolved_.push_back(std::move(resolved));
  return Resolved{info, std::move(options)};
}

void Registry::rethrow_from_plugin(const PluginInfo& info) const {
  try {
    throw;
  } catch (const ConfigError&) {
    throw;  // already names the place and the plugin
  } catch (const PluginError&) {
    throw;
  } catch (const c10::Error& e) {
    throw PluginError(fmt::format("plugin {} '{}' ({}) failed: {}", info.kind, info.name, info.path,
                                  e.what_without_backtrace()));
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
