// Command-line parsing shared by runner and its subcommands: CLI11 errors as one line, exit 1.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>

#include "cli/commands.hpp"

namespace attnlab::cli {

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv, const std::string& command) {
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

CLI::Validator not_an_option() {
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

}  // namespace attnlab::cli
