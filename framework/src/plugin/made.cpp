// Errors from a plugin object's methods mid-run (score(), forward()), named after the plugin.
#include <attnlab/error.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <fmt/format.h>

#include <exception>

namespace attnlab::plugin {

void rethrow_naming(const Made& object, const char* method) {
  if (object.made_by().empty()) throw;  // not a plugin's object: nothing to add
  // Each case throws a new object made here (in libattnlab), as Registry::rethrow_from_plugin does.
  const auto named = [&](const std::exception& e) {
    return fmt::format("plugin {} failed in {}: {}", object.made_by(), method, message_without_backtrace(e));
  };
  try {
    throw;
  } catch (const Interrupted&) {
    throw;
  } catch (const PluginError&) {
    throw;  // names a plugin already (a scorer's, inside this encoder or decoder)
  } catch (const ConfigError& e) {
    throw ConfigError(named(e));
  } catch (const DataError& e) {
    throw DataError(named(e));
  } catch (const ResultsError& e) {
    throw ResultsError(named(e));
  } catch (const std::exception& e) {
    throw PluginError(named(e));
  } catch (...) {
    throw PluginError(fmt::format("plugin {} threw a non-standard exception in {}", object.made_by(), method));
  }
}

}  // namespace attnlab::plugin
