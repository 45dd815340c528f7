// The one line a failed command prints (framework/src/tools/command_line.hpp, print_error): our
// errors by kind, and the standard library's filesystem errors, which a call with no check of ours
// around it lets out, in our words ("filesystem error: cannot create directories: Permission
// denied [a/b]" was what a user read).
#include <attnlab/error.hpp>

#include "tools/command_line.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <sstream>
#include <system_error>

namespace {
using namespace attnlab;

std::string printed(const std::exception& e, int* rc = nullptr) {
  std::ostringstream err;
  auto* old = std::cerr.rdbuf(err.rdbuf());
  const int code = tools::print_error(e);
  std::cerr.rdbuf(old);
  if (rc != nullptr) *rc = code;
  return err.str();
}

TEST(PrintError, OurErrorsAreOneLineNamedByKind) {
  int rc = 0;
  EXPECT_EQ(printed(ResultsError("cannot read /x.h5"), &rc), "results error: cannot read /x.h5\n");
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(printed(ConfigError("model.hiddens: expected an integer")),
            "config error: model.hiddens: expected an integer\n");
  EXPECT_EQ(printed(std::runtime_error("something")), "error: something\n");
}

TEST(PrintError, AFilesystemErrorSaysWhatWhereAndWhyOnce) {
  namespace fs = std::filesystem;
  int rc = 0;
  const fs::filesystem_error one("cannot create directories", fs::path("/runs/a"),
                                 std::make_error_code(std::errc::permission_denied));
  EXPECT_EQ(printed(one, &rc), "error: cannot create directories /runs/a: Permission denied\n");
  EXPECT_EQ(rc, 1);
  const fs::filesystem_error two("cannot rename", fs::path("/runs/a.h5"), fs::path("/runs/b.h5"),
                                 std::make_error_code(std::errc::no_such_file_or_directory));
  EXPECT_EQ(printed(two), "error: cannot rename /runs/a.h5 -> /runs/b.h5: No such file or directory\n");
  const fs::filesystem_error none("cannot get the current path", std::make_error_code(std::errc::not_a_directory));
  EXPECT_EQ(printed(none), "error: cannot get the current path: Not a directory\n");
}

}  // namespace
