// Fuzz target: the experiment loader with overrides (config::load_experiment), as `runner` calls it.
//
// Input: the text of experiment.yaml, optionally followed by sections that each start with a line
// "%%% NAME":
//   %%% base.yaml          another file in the same folder (NAME: 1-32 of [A-Za-z0-9_.-]), so
//                          `defaults: [base.yaml]` includes, cycles and nesting are reachable
//   %%% overrides          one "a.b.c=value" override per line, applied after loading
// Refusals must be attnlab::Error; a loaded tree must be consistent and round-trip through
// to_yaml/parse_yaml (config_check.hpp).
#include <attnlab/config/load.hpp>
#include <attnlab/error.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "common.hpp"
#include "config_check.hpp"

namespace {

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 32 || name == "." || name == "..") return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto& scratch = fuzz::scratch();
  scratch.clear();
  const std::string input(reinterpret_cast<const char*>(data), size);

  // Sections: "experiment.yaml" first, then each "%%% NAME" line opens the next one.
  std::string name = "experiment.yaml", text;
  std::vector<std::string> overrides;
  bool main_written = false;
  auto flush = [&]() {
    if (name == "overrides") {
      for (auto& line : fuzz::split(text, '\n'))
        if (!line.empty()) overrides.push_back(line);
    } else if (valid_name(name) && (name != "experiment.yaml" || !main_written)) {
      scratch.write(name, text);
      main_written = main_written || name == "experiment.yaml";
    }
    text.clear();
  };
  for (const auto& line : fuzz::split(input, '\n')) {
    if (line.rfind("%%% ", 0) == 0) {
      flush();
      name = line.substr(4);
    } else {
      text += line;
      text += '\n';
    }
  }
  flush();

  try {
    attnlab::config::Node root = attnlab::config::load_experiment(scratch.dir() + "/experiment.yaml", overrides);
    fuzz::check_tree(root);
  } catch (const attnlab::Error&) {
    // A refused experiment: a ConfigError with a message is the documented outcome.
  }
  return 0;
}
