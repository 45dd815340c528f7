#pragma once
// Command-line parsing shared by both halves of the runner (bin/runner and its LibTorch part,
// framework/src/cli): CLI11 errors as one line and exit 1. Header-only, so each program has its
// own copy without linking the other's libraries.
#include <attnlab/error.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace attnlab::tools {

/// Parses argv into `app`: nullopt when the command goes on, else its exit code. `--help` prints
/// the help and gives 0; a parse error is one line on stderr, "<command>: <what> (see <command>
/// --help)", and gives 1 (not CLI11's own codes, 105-114).
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv, const std::string& command) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help: printed, success
    std::string message = e.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    std::cerr << command << ": " << message << " (see " << command << " --help)" << std::endl;
    return 1;
  }
}

/// Refuses an option-looking value ("-q"), so `--resume -q` is not read as a file named "-q".
inline CLI::Validator not_an_option() {
  return CLI::Validator(
      [](const std::string& value) -> std::string {
        if (value.size() > 1 && value.front() == '-') {
          return "expected a file, found '" + value + "', which looks like an option (write ./" + value +
                 " for a file of that name)";
        }
        return "";
      },
      "FILE");
}

/// `--plugin-path DIR`, repeatable, one folder per occurrence: options and positionals may then
/// come in any order (a greedy vector option swallowed the experiment file after it).
inline CLI::Option* add_plugin_path_option(CLI::App& app, std::vector<std::string>& dirs) {
  return app.add_option("--plugin-path", dirs, "extra plugin folder (repeatable)")->allow_extra_args(false);
}

/// The one line a command that failed prints, by the error's kind ("config error: <what>", "plugin
/// error: ...", "data error: ...", "results error: ...", else "error: ..."); returns the exit code, 1.
inline int print_error(const std::exception& e) {
  if (const auto* fe = dynamic_cast<const std::filesystem::filesystem_error*>(&e)) {
    // The standard library's "filesystem error: cannot create directories: Permission denied
    // [a/b]" (from a call with no place of ours around it) becomes "error: cannot create
    // directories a/b: Permission denied".
    std::string what = fe->what();
    const std::string why = fe->code().message();
    if (what.rfind("filesystem error: ", 0) == 0) what.erase(0, 18);
    if (const auto at = what.find(": " + why); at != std::string::npos) what.erase(at);
    std::string paths = fe->path1().string();
    if (!fe->path2().empty()) paths += " -> " + fe->path2().string();
    std::cerr << "error: " << what << (paths.empty() ? "" : " ") << paths << ": " << why << std::endl;
    return 1;
  }
  const char* kind = dynamic_cast<const ConfigError*>(&e) != nullptr    ? "config error"
                     : dynamic_cast<const PluginError*>(&e) != nullptr  ? "plugin error"
                     : dynamic_cast<const DataError*>(&e) != nullptr    ? "data error"
                     : dynamic_cast<const ResultsError*>(&e) != nullptr ? "results error"
                                                                        : "error";
  std::cerr << kind << ": " << e.what() << std::endl;
  return 1;
}

}  // namespace attnlab::tools
