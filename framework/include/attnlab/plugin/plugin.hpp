#pragma once
// The plugin SDK: what a plugin .so exports and the one macro that exports it.
//
//   #include <attnlab/plugin/plugin.hpp>
//   namespace {
//   config::Schema schema() { return {config::opt_int("hidden", 8, "width", 1)}; }
//   std::shared_ptr<attnlab::nn::Scorer> make(const config::Options& o, const plugin::BuildContext& c,
//                                             const attnlab::nn::ScorerContext& sc) {...}
//   }
//   ATTNLAB_PLUGIN(attnlab::nn::Scorer, "additive", "Bahdanau additive scorer", schema, make)
//
// The factory's signature is the kind's (FactorySignature<Interface>): options and BuildContext,
// then whatever that kind alone needs (a scorer: nn::ScorerContext).
//
// The descriptor is plain data; the loader reads abi_version first and refuses a mismatch
// before touching anything else, then compares sdk_hash: the hash of every public SDK header
// the plugin was compiled against (ATTNLAB_SDK_HASH, defined by attnlab_add_plugin()). Any change
// to an interface changes it, so a plugin built against other headers is refused, never called
// through a stale vtable.
#include <attnlab/config/schema.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/context.hpp>
#include <attnlab/version.hpp>

#include <boost/config.hpp>
#include <boost/dll/alias.hpp>

#include <memory>
#include <string>
#include <utility>

namespace attnlab::plugin {

/// Maps an SDK interface to its plugin kind; specialised next to each interface.
template <class Interface>
struct KindOf;

/// The function type of a kind's factory: options and BuildContext, plus, for a kind that needs
/// more, its own arguments (specialised next to the interface; a scorer gets nn::ScorerContext).
template <class Interface>
struct FactorySignature {
  using type = std::shared_ptr<Interface>(const config::Options&, const BuildContext&);
};

template <class Interface>
using Factory = typename FactorySignature<Interface>::type*;

/// Base of the interfaces whose methods the framework calls during a run (nn::Scorer,
/// nn::Encoder, nn::Decoder). Registry::create records here which plugin made the object, so that
/// an exception from its score() or forward() can name it (rethrow_naming).
class Made {
 public:
  /// "scorer 'alibi' (<its library>) at 'model.encoder.attention.scorer'"; empty for an object no
  /// registry made (built directly, as tests do).
  const std::string& made_by() const { return made_by_; }
  void set_made_by(std::string who) { made_by_ = std::move(who); }

 private:
  std::string made_by_;
};

/// Called in a catch block around a call into `object` (`method`: "score()", "forward()", ...):
/// rethrows the exception in flight, as it is when the object was made by no registry, when it is
/// an Interrupted or a PluginError (already naming a plugin, e.g. a scorer inside an encoder);
/// else as a new error made here naming the plugin: ConfigError, DataError and ResultsError keep
/// their type, anything else becomes a PluginError
/// "plugin scorer 'alibi' (…) at '…' failed in score(): <message without torch's backtrace>".
[[noreturn]] ATTNLAB_API void rethrow_naming(const Made& object, const char* method);

struct Descriptor {
  // The first six fields are frozen across ABI versions: the loader reads them from any plugin,
  // so a plugin built for another ABI can still be named (kind, name) when it is refused.
  int abi_version;              // kAbiVersion the plugin was built against
  const char* attnlab_version;  // kVersion
  const char* torch_version;    // TORCH_VERSION the plugin was built against
  const char* kind;             // "scorer", "encoder", "decoder", "dataset", "trainer", ...
  const char* name;             // unique within its kind
  const char* sdk_hash;         // ATTNLAB_SDK_HASH of the headers it was compiled against
  // From here on the layout belongs to abi_version.
  const char* description;      // one line
  config::Schema (*schema)();   // options with types/defaults/descriptions
  // Factory<Interface> for the kind's interface. Its signature (FactorySignature) is part of the
  // SDK headers, not of this layout: changing it changes the SDK hash, which refuses plugins built
  // against the old one, so it needs no kAbiVersion bump.
  void* factory;
};

/// The SDK hash of this libattnlab (what every plugin's sdk_hash must equal).
ATTNLAB_API const char* sdk_hash();

/// Symbol every plugin exports (through BOOST_DLL_ALIAS).
inline constexpr const char* kDescriptorSymbol = "attnlab_plugin";
using DescriptorFn = const Descriptor*();

}  // namespace attnlab::plugin

#ifndef ATTNLAB_PLUGIN_ABI
#define ATTNLAB_PLUGIN_ABI ::attnlab::kAbiVersion
#endif
#ifndef ATTNLAB_SDK_HASH
#define ATTNLAB_SDK_HASH "none (not built with attnlab_add_plugin)"
#endif

#define ATTNLAB_PLUGIN(Interface, NAME, DESCRIPTION, SCHEMA_FN, FACTORY_FN)                          \
  namespace attnlab_plugin_export {                                                                  \
  const ::attnlab::plugin::Descriptor* descriptor() {                                                \
    static const ::attnlab::plugin::Factory<Interface> factory = &FACTORY_FN;                        \
    static const ::attnlab::plugin::Descriptor d{                                                    \
        ATTNLAB_PLUGIN_ABI, ::attnlab::kVersion, ::attnlab::kTorchVersion,                           \
        ::attnlab::plugin::KindOf<Interface>::value, NAME, ATTNLAB_SDK_HASH, DESCRIPTION, &SCHEMA_FN, \
        reinterpret_cast<void*>(factory)};                                                           \
    return &d;                                                                                       \
  }                                                                                                  \
  }                                                                                                  \
  BOOST_DLL_ALIAS(attnlab_plugin_export::descriptor, attnlab_plugin)
