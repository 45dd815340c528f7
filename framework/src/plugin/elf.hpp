#pragma once
// What the registry reads of a plugin library before it dlopens it: whether the file is a whole
// loadable ELF shared object of this machine, and its third-party dependencies, which are loaded
// self-bound first (registry.cpp loads the plugin; probe.cpp tries it in a forked copy).
#include <filesystem>
#include <string>
#include <vector>

namespace attnlab::plugin {

/// The folders of a colon-separated list (ATTNLAB_PLUGIN_PATH, LD_LIBRARY_PATH); empty parts dropped.
std::vector<std::string> split_path_list(const std::string& s);

/// Why `path` is not a loadable ELF shared object of this machine, or "" when it is. Checks that
/// every loadable segment lies inside the file: dlopen maps them, and touching a page past the end
/// of a truncated file is SIGBUS, which no error handling can catch.
std::string elf_problem(const std::filesystem::path& path);

/// Loads the third-party libraries `plugin` needs (those not yet in the process) self-bound
/// (RTLD_DEEPBIND) before the plugin itself (elf.cpp says why).
void preload_self_bound(const std::filesystem::path& plugin);

}  // namespace attnlab::plugin
