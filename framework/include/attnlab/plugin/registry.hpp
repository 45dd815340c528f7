#pragma once
// Finds plugin libraries, checks their descriptors, and creates components from config nodes.
// Every object it creates keeps its library loaded (shared ownership, Boost.DLL tutorial 8).
#include <attnlab/config/schema.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace attnlab::plugin {

struct PluginInfo {
  std::string kind, name, description;
  std::string path;                 // the .so it came from
  std::string attnlab_version, torch_version;
  int abi_version = 0;
  config::Schema schema;
  const Descriptor* descriptor = nullptr;
  std::shared_ptr<void> library;    // boost::dll::shared_library, type-erased
};

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  /// Directories searched by discover(), in order: explicit ones, then ATTNLAB_PLUGIN_PATH
  /// (colon-separated), then attnlab's own plugins: <libdir>/attnlab/plugins beside an installed
  /// libattnlab.so, else the plugin folder of the build that made it.
  void add_search_dir(const std::string& dir);
  std::vector<std::string> search_dirs() const;
  /// Load every libattnlab_*.so in the search dirs. A library that cannot be used (not an ELF
  /// shared object or truncated, unresolved symbols, not a plugin, another ABI or torch, a kind +
  /// name already provided by an earlier folder) is skipped with one warning on stderr and kept
  /// in broken(): it breaks only an experiment that asks for a plugin it provides, and find()
  /// then names the library and the reason.
  void discover();
  /// Load one library. PluginError naming the path: missing file, not a valid shared object
  /// (checked before dlopen, so a truncated file cannot crash the process), unresolved symbols
  /// (bound at load, RTLD_NOW, with the loader's own reason), not a plugin, ABI/torch mismatch
  /// (expected vs found), or a kind+name already registered (naming both files).
  /// A loaded library is never unloaded (RTLD_NODELETE): nothing a plugin made — an exception in
  /// flight, a tensor's deleter, a static — can outlive its code.
  const PluginInfo& load(const std::string& path);

  /// A library discover() skipped: its path, why, and what it says it provides when that could
  /// be read (else kind/name guessed from the file name libattnlab_<kind>_<name>.so).
  struct Broken {
    std::string path, reason, kind, name;
  };
  const std::vector<Broken>& broken() const { return broken_; }

  std::vector<const PluginInfo*> list() const;  // sorted by kind, name
  /// PluginError with did-you-mean among that kind's names when absent.
  const PluginInfo& find(const std::string& kind, const std::string& name) const;

  /// Create a component of Interface's kind from `node`: either a scalar plugin name or a map
  /// with `plugin: <name>` plus that plugin's options (validated against its schema). `extra` are
  /// the kind's own factory arguments after the BuildContext (FactorySignature<Interface>; a
  /// scorer: its nn::ScorerContext). Exceptions from plugin code are re-created here, in
  /// libattnlab, before they leave: attnlab's error types keep their type and message, anything
  /// else becomes a PluginError naming the plugin and its library. An object of an interface
  /// deriving from Made is told which plugin made it (kind, name, library, YAML path).
  template <class Interface, class... Extra>
  std::shared_ptr<Interface> create(const config::Node& node, const BuildContext& ctx, const Extra&... extra);

  /// Check `node` as create() would (plugin found, options valid against its schema) without
  /// creating anything: the runner validates every section before fetching data.
  template <class Interface>
  void validate(const config::Node& node) const {
    resolve_options(KindOf<Interface>::value, node);
  }

  /// "kind/name version (path)" for each plugin created so far (results attribute).
  std::vector<std::string> used() const;
  /// The options each created plugin ran with (given values + defaults, with `plugin: name`),
  /// in creation order; each node's path() is where it sits in the experiment file.
  const std::vector<config::Node>& resolved() const { return resolved_; }

 private:
  struct Resolved {
    const PluginInfo* info;
    std::shared_ptr<config::Options> options;
    size_t index = 0;   // its entry in resolved_
    config::Node node;  // the config node it was made from
  };
  /// The entry `r` placed in resolved_, again after the plugin was made (Options::record may have
  /// completed it).
  void refresh_resolved(const Resolved& r);
  Resolved resolve(const char* kind, const config::Node& node);
  Resolved resolve_options(const char* kind, const config::Node& node) const;
  [[noreturn]] void rethrow_from_plugin(const PluginInfo& info) const;
  void mark_used(const PluginInfo& info);

  std::vector<std::string> dirs_;
  std::map<std::pair<std::string, std::string>, PluginInfo> plugins_;
  std::vector<std::string> used_;
  std::vector<config::Node> resolved_;
  std::vector<Broken> broken_;
};

/// Returns a pointer to obj that also owns `library`; obj is destroyed before the library.
template <class T>
std::shared_ptr<T> keep_library_alive(std::shared_ptr<T> obj, std::shared_ptr<void> library) {
  struct Holder {
    std::shared_ptr<void> library;  // destroyed last
    std::shared_ptr<T> object;
  };
  T* raw = obj.get();
  auto holder = std::make_shared<Holder>(Holder{std::move(library), std::move(obj)});
  return std::shared_ptr<T>(holder, raw);
}

template <class Interface, class... Extra>
std::shared_ptr<Interface> Registry::create(const config::Node& node, const BuildContext& ctx, const Extra&... extra) {
  static_assert(
      std::is_same_v<typename FactorySignature<Interface>::type,
                     std::shared_ptr<Interface>(const config::Options&, const BuildContext&, const Extra&...)>,
      "create<Interface>(node, ctx, extra...): the extra arguments must be the ones "
      "FactorySignature<Interface> lists after the BuildContext");
  Resolved r = resolve(KindOf<Interface>::value, node);
  auto factory = reinterpret_cast<Factory<Interface>>(r.info->descriptor->factory);
  std::shared_ptr<Interface> obj;
  try {
    obj = factory(*r.options, ctx, extra...);
  } catch (...) {
    rethrow_from_plugin(*r.info);
  }
  ATTNLAB_CHECK(obj != nullptr, PluginError, "plugin {} '{}' ({}) returned no object", r.info->kind,
                r.info->name, r.info->path);
  if constexpr (std::is_base_of_v<Made, Interface>) {
    obj->set_made_by(fmt::format("{} '{}' ({}) at '{}'", r.info->kind, r.info->name, r.info->path,
                                 node.path().empty() ? std::string("<root>") : node.path()));
  }
  mark_used(*r.info);
  refresh_resolved(r);
  return keep_library_alive(std::move(obj), r.info->library);
}

}  // namespace attnlab::plugin
