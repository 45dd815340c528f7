// The experiment files we ship, and the ones our docs name, as a user meets them: every file under
// experiments/ passes the runner's full check (schema, plugins, every plugin's options) through
// `runner sweep FILE --dry-run`, which needs no data; a plugin option renamed or removed without
// updating the files fails here, not in a user's first run. The defaults-only fragments are named
// and must stay unrunnable, and every experiments/...yaml path the Markdown docs name exists.
//
// The docs' other names are kept true here too: every repo path they name (docs/, scripts/,
// tests/, ...) and every relative link exists, every `runner <subcommand>` in their code is one
// that `runner --help` lists (and docs/COMMANDS.md names them all), and every `FILE.md, "Section"`
// names a heading of that file. Text only, no runs: these take well under a second.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "testing/runner.hpp"

namespace {
using namespace attnlab;
namespace fs = std::filesystem;

// Shared parts pulled in with `defaults:`; by themselves they name no model or no experiment.
const std::set<std::string> kFragments = {"experiments/corners_base.yaml", "experiments/base/fra_eng_d2l017.yaml"};

// Paths in the docs that stand for a user's own file (the example of a config error, docs/COMMANDS.md).
const std::set<std::string> kIllustrations = {"experiments/x.yaml"};

// Where the Markdown docs are: README.md and every .md below these folders.
const char* const kDocFolders[] = {"docs", "experiments", "datasets", "examples", "bench", "plugins", "fuzz"};

/// A doc's text apart: what is outside fenced blocks (`unfenced`), the same with inline code spans
/// blanked (`prose`: where a link is a link), and the code of both kinds, each block or span whole.
struct DocParts {
  std::string unfenced, prose;
  std::vector<std::string> code;
};

DocParts split_code(const std::string& text) {
  DocParts parts;
  std::istringstream in(text);
  std::string line, block;
  bool fenced = false;
  while (std::getline(in, line)) {
    const auto start = line.find_first_not_of(" \t");
    const bool fence =
        start != std::string::npos && (line.compare(start, 3, "```") == 0 || line.compare(start, 3, "~~~") == 0);
    if (fence && fenced) parts.code.push_back(block);
    if (fence) {
      fenced = !fenced;
      block.clear();
    } else {
      (fenced ? block : parts.unfenced) += line + "\n";
    }
  }
  // Inline spans: a run of N backticks up to the next run of exactly N (CommonMark).
  const std::string& u = parts.unfenced;
  for (size_t i = 0; i < u.size();) {
    if (u[i] != '`') {
      parts.prose += u[i++];
      continue;
    }
    const size_t n = std::min(u.find_first_not_of('`', i), u.size()) - i;
    const std::string run(n, '`');
    size_t close = u.find(run, i + n);
    while (close != std::string::npos && close + n < u.size() && u[close + n] == '`') {  // a longer run
      close = u.find(run, u.find_first_not_of('`', close));
    }
    if (close == std::string::npos) {
      parts.prose += u.substr(i, n);
      i += n;
      continue;
    }
    parts.code.push_back(u.substr(i + n, close - i - n));
    parts.prose += ' ';
    i = close + n;
  }
  return parts;
}

/// `text` without shell, YAML and CMake comments (`# ...` to the end of a line): a comment's words
/// are prose ("a runner you built").
std::string without_comments(const std::string& text) {
  static const std::regex comment(R"((^|\s)#.*)");
  return std::regex_replace(text, comment, "$1");
}

class ExperimentFilesTest : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-experiment-files"; }

  /// experiments/**/*.yaml, relative to the source dir, sorted.
  std::vector<std::string> shipped() const {
    std::vector<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(fs::path(source_) / "experiments")) {
      if (e.is_regular_file() && e.path().extension() == ".yaml") {
        files.push_back(fs::relative(e.path(), source_).generic_string());
      }
    }
    std::sort(files.begin(), files.end());
    return files;
  }

  testutil::ProcessResult check(const std::string& file) {
    return run({"sweep", file, "--dry-run", "-o", tmp_ + "/dry"});
  }

  /// The Markdown docs, relative to the source dir.
  std::vector<fs::path> docs() const {
    std::vector<fs::path> found{"README.md"};
    for (const char* dir : kDocFolders) {
      if (!fs::exists(fs::path(source_) / dir)) continue;
      for (const auto& e : fs::recursive_directory_iterator(fs::path(source_) / dir)) {
        if (e.is_regular_file() && e.path().extension() == ".md") found.push_back(fs::relative(e.path(), source_));
      }
    }
    return found;
  }

  std::string text_of(const fs::path& doc) const { return testutil::read_file((fs::path(source_) / doc).string()); }

  /// Whether `path` (relative to the source dir) exists.
  bool exists(const std::string& path) const { return fs::exists(fs::path(source_) / path); }

  /// The folders of every plugin: plugins/<kind>/<name>/ and examples/<name>/.
  std::vector<fs::path> plugin_folders() const {
    std::vector<fs::path> found;
    for (const auto& kind : fs::directory_iterator(fs::path(source_) / "plugins")) {
      if (!kind.is_directory()) continue;
      for (const auto& p : fs::directory_iterator(kind.path())) {
        if (p.is_directory()) found.push_back(p.path());
      }
    }
    for (const auto& p : fs::directory_iterator(fs::path(source_) / "examples")) {
      if (p.is_directory()) found.push_back(p.path());
    }
    return found;
  }
};

TEST_F(ExperimentFilesTest, EveryShippedFileValidates) {
  const auto files = shipped();
  ASSERT_GE(files.size(), 20u) << "experiments/ is read from " << source_;
  int checked = 0;
  for (const auto& file : files) {
    if (kFragments.count(file)) continue;
    SCOPED_TRACE(file);
    auto r = check(file);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("runner "), std::string::npos) << "the dry run prints the command it would run\n" << r.out;
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

TEST_F(ExperimentFilesTest, FragmentsExistAndAreNotRunnable) {
  const auto files = shipped();
  for (const auto& fragment : kFragments) {
    SCOPED_TRACE(fragment);
    ASSERT_TRUE(std::find(files.begin(), files.end(), fragment) != files.end()) << "the list names a removed file";
    auto r = check(fragment);
    EXPECT_EQ(r.exit_code, 1) << "a fragment that runs is an experiment: drop it from kFragments\n" << r.out;
    EXPECT_NE(r.err.find("config error: "), std::string::npos) << r.err;
  }
}

TEST_F(ExperimentFilesTest, EveryFileTheDocsNameExists) {
  // Each component starts with a letter, digit or '_': "experiments/...yaml" in prose is no path.
  const std::regex path_re(R"(experiments/(?:[A-Za-z0-9_][A-Za-z0-9_.-]*/)*[A-Za-z0-9_][A-Za-z0-9_.-]*\.yaml)");
  int named = 0;
  for (const auto& doc : docs()) {
    const std::string text = text_of(doc);
    ASSERT_FALSE(text.empty()) << doc;
    for (std::sregex_iterator it(text.begin(), text.end(), path_re), end; it != end; ++it) {
      const std::string path = it->str();
      if (kIllustrations.count(path)) continue;
      ++named;
      EXPECT_TRUE(fs::exists(fs::path(source_) / path))
          << doc.string() << " names " << path << ", which does not exist";
    }
  }
  EXPECT_GE(named, 10) << "the README's commands name experiment files";
}

// docs/X.md, scripts/NAME, tests/..., plugins/..., framework/...: every path into the source tree
// that a doc names, in prose or code. Not checked: what follows a placeholder (`plugins/<kind>/`,
// `tests/python/*_golden.py`, `framework/src/{core,...}`: only the folder before it) and
// `datasets/<name>/...`, where the dataset plugins download (git ignores it; a clone has none). A
// `tests/...` path that is not in the tree is a plugin's own, as its CMakeLists.txt names it
// (`TESTS tests/x_test.cpp`): it must be in some plugin's folder.
TEST_F(ExperimentFilesTest, EveryPathTheDocsNameExists) {
  const std::regex path_re(
      R"((^|[^A-Za-z0-9_./~$-])((?:docs|scripts|examples|bench|tests|plugins|framework|datasets|python|fuzz|cmake)/)"
      R"((?:[A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.-]*)*/?)?))");
  const auto plugins = plugin_folders();
  int named = 0;
  for (const auto& doc : docs()) {
    const std::string text = text_of(doc);
    for (std::sregex_iterator it(text.begin(), text.end(), path_re), end; it != end; ++it) {
      std::string path = (*it)[2].str();
      const size_t after = it->position() + it->length();
      const unsigned char next = after < text.size() ? text[after] : ' ';
      if (next == '*' || next == '<' || next == '{' || next == '$' || next >= 0x80) {
        path.erase(path.rfind('/') + 1);  // a placeholder: its folder
      }
      while (path.back() == '.' || path.back() == '-') path.pop_back();  // the sentence's full stop
      if (path.rfind("datasets/", 0) == 0 && path.find('/', 9) != std::string::npos) continue;
      ++named;
      bool found = exists(path);
      if (!found && path.rfind("tests/", 0) == 0) {
        found = std::any_of(plugins.begin(), plugins.end(), [&](const fs::path& p) { return fs::exists(p / path); });
      }
      EXPECT_TRUE(found) << doc.string() << " names " << path << ", which does not exist";
    }
  }
  EXPECT_GE(named, 200) << "the docs name the tree's files";
}

// [text](path): relative to the doc's folder, its #anchor dropped; web and mail links not checked.
// Links inside code are no links.
TEST_F(ExperimentFilesTest, EveryLinkInTheDocsResolves) {
  const std::regex link_re(R"(\]\(([^()\s]+)\))");
  int links = 0;
  for (const auto& doc : docs()) {
    const std::string prose = split_code(text_of(doc)).prose;
    for (std::sregex_iterator it(prose.begin(), prose.end(), link_re), end; it != end; ++it) {
      std::string target = (*it)[1].str();
      if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0) continue;
      target = target.substr(0, target.find('#'));
      if (target.empty()) continue;
      ++links;
      const std::string path = (doc.parent_path() / target).lexically_normal().generic_string();
      EXPECT_TRUE(exists(path)) << doc.string() << " links to " << target << " (" << path << "), which does not exist";
    }
  }
  EXPECT_GE(links, 20) << "the README links the docs";
}

// `runner eval`, `build/bin/runner average --last 5`: a word after "runner" in a doc's code is a
// subcommand `runner --help` lists, unless it is an experiment or results path (a '/' or '.'), an
// option (`runner --help`) or a placeholder (`runner EXP`, `runner …`). And docs/COMMANDS.md, the
// commands' reference, names every subcommand the runner has.
TEST_F(ExperimentFilesTest, EveryRunnerSubcommandTheDocsNameIsReal) {
  auto help = run({"--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  std::set<std::string> subcommands;
  const std::regex listed(R"(\n  ([a-z]+) {2,}\S)");
  const auto from = help.out.find("Subcommands");
  ASSERT_NE(from, std::string::npos) << help.out;
  for (std::sregex_iterator it(help.out.begin() + static_cast<long>(from), help.out.end(), listed), end; it != end;
       ++it) {
    subcommands.insert((*it)[1].str());
  }
  ASSERT_GE(subcommands.size(), 5u) << help.out;
  ASSERT_TRUE(subcommands.count("eval")) << help.out;

  // The program: at the start of a span or line, or a path's last part (build/bin/runner); not a
  // message's word ("but this runner is rank 0").
  const std::regex named(R"((?:(?:^|\n)[ \t]*|/)runner\s+([a-z][A-Za-z0-9_-]*)(?=$|[\s`'")|,;:]))");
  std::map<std::string, int> uses;  // subcommand -> times docs/COMMANDS.md names it
  int checked = 0;
  for (const auto& doc : docs()) {
    for (const auto& code : split_code(text_of(doc)).code) {
      const std::string text = without_comments(code);
      for (std::sregex_iterator it(text.begin(), text.end(), named), end; it != end; ++it) {
        const std::string word = (*it)[1].str();
        ++checked;
        EXPECT_TRUE(subcommands.count(word))
            << doc.string() << " names `runner " << word << "`, which is no subcommand of the runner";
        if (doc == "docs/COMMANDS.md") ++uses[word];
      }
    }
  }
  EXPECT_GE(checked, 50) << "the docs show the runner's subcommands";
  for (const auto& name : subcommands) {
    EXPECT_GT(uses[name], 0) << "docs/COMMANDS.md does not show `runner " << name << "`";
  }
}

// `docs/RESULTS.md, "Reading a live run"`, `[ARCHITECTURE](docs/ARCHITECTURE.md), "What lives
// where"`: the file (from the source dir, else the doc's folder) has a heading that starts with the
// quoted words (backticks and line breaks aside).
TEST_F(ExperimentFilesTest, EverySectionTheDocsNameExists) {
  const std::regex ref_re(R"re(([A-Za-z0-9_./-]+\.md)\)?,?\s+"([^"]{1,100})")re");
  const auto one_line = [](std::string s) {
    s.erase(std::remove(s.begin(), s.end(), '`'), s.end());
    return std::regex_replace(s, std::regex(R"(\s+)"), " ");
  };
  int named = 0;
  for (const auto& doc : docs()) {
    const std::string text = split_code(text_of(doc)).unfenced;
    for (std::sregex_iterator it(text.begin(), text.end(), ref_re), end; it != end; ++it) {
      const std::string file = (*it)[1].str(), section = one_line((*it)[2].str());
      fs::path path = fs::path(source_) / file;
      if (!fs::exists(path)) path = fs::path(source_) / doc.parent_path() / file;
      ++named;
      if (!fs::exists(path)) {
        ADD_FAILURE() << doc.string() << " names " << file << ", which does not exist";
        continue;
      }
      bool found = false;
      std::istringstream lines(split_code(testutil::read_file(path.string())).unfenced);
      for (std::string line; std::getline(lines, line) && !found;) {
        const auto title = line.find_first_not_of("# ");
        if (line.rfind('#', 0) != 0 || title == std::string::npos) continue;
        found = one_line(line.substr(title)).rfind(section, 0) == 0;
      }
      EXPECT_TRUE(found) << doc.string() << " names the section \"" << section << "\" of " << file
                         << ", which has no heading that starts so";
    }
  }
  EXPECT_GE(named, 10) << "the docs name each other's sections";
}

}  // namespace
