#pragma once
// The runner's subcommands.
#include <string>
#include <vector>

namespace attnlab::cli {

struct Common {
  std::vector<std::string> plugin_dirs;
};

/// `runner plugins [name]`: list plugins, or one plugin's options.
int cmd_plugins(const Common& common, const std::string& name);

}  // namespace attnlab::cli
