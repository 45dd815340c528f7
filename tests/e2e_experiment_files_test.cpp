// The experiment files we ship, and the ones our docs name, as a user meets them: every file under
// experiments/ passes the runner's full check (schema, plugins, every plugin's options) through
// `runner sweep FILE --dry-run`, which needs no data; a plugin option renamed or removed without
// updating the files fails here, not in a user's first run. The defaults-only fragments are named
// and must stay unrunnable, and every experiments/...yaml path the Markdown docs name exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "testing/runner.hpp"

namespace {
using namespace attnlab;
namespace fs = std::filesystem;

// Shared parts pulled in with `defaults:`; by themselves they name no model or no experiment.
const std::set<std::string> kFragments = {"experiments/corners_base.yaml", "experiments/base/fra_eng_d2l017.yaml"};

// Paths in the docs that stand for a user's own file (README's example of a config error).
const std::set<std::string> kIllustrations = {"experiments/x.yaml"};

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
  std::vector<fs::path> docs{fs::path(source_) / "README.md"};
  for (const char* dir : {"docs", "experiments", "datasets", "examples", "bench", "plugins"}) {
    if (!fs::exists(fs::path(source_) / dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(fs::path(source_) / dir)) {
      if (e.is_regular_file() && e.path().extension() == ".md") docs.push_back(e.path());
    }
  }
  // Each component starts with a letter, digit or '_': "experiments/...yaml" in prose is no path.
  const std::regex path_re(R"(experiments/(?:[A-Za-z0-9_][A-Za-z0-9_.-]*/)*[A-Za-z0-9_][A-Za-z0-9_.-]*\.yaml)");
  int named = 0;
  for (const auto& doc : docs) {
    const std::string text = testutil::read_file(doc.string());
    ASSERT_FALSE(text.empty()) << doc;
    for (std::sregex_iterator it(text.begin(), text.end(), path_re), end; it != end; ++it) {
      const std::string path = it->str();
      if (kIllustrations.count(path)) continue;
      ++named;
      EXPECT_TRUE(fs::exists(fs::path(source_) / path))
          << fs::relative(doc, source_).string() << " names " << path << ", which does not exist";
    }
  }
  EXPECT_GE(named, 10) << "the README's commands name experiment files";
}

}  // namespace
