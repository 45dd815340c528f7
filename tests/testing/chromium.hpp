#pragma once
// Headless Chromium for the tests of runner report's page: find it, run it, and open a copy of a
// page with a test-owned harness script injected after <main id="report"></main>; the harness
// writes what it found as JSON into <pre id="harness">, which --dump-dom gives back. Chromium is
// required: the tests fail, never skip, without it.
#include "testing/runner.hpp"
#include "testing/testing.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace attnlab::testutil {

/// Chromium: $ATTNLAB_CHROMIUM, else chromium or chromium-browser on PATH; "" when none.
inline std::string find_chromium() {
  if (const char* env = std::getenv("ATTNLAB_CHROMIUM"); env && *env) return env;
  const std::string path = env_or("PATH", "/usr/bin:/bin");
  size_t start = 0;
  while (start <= path.size()) {
    const auto end = path.find(':', start);
    const auto dir = path.substr(start, end == std::string::npos ? std::string::npos : end - start);
    for (const char* name : {"chromium", "chromium-browser"}) {
      const auto p = dir + "/" + name;
      if (!dir.empty() && ::access(p.c_str(), X_OK) == 0) return p;
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}

/// Chromium with `args` (headless, its profile in `tmp`); fails the test (never skips) when it is
/// missing or does not start.
inline ProcessResult chromium(std::vector<std::string> args, const std::string& tmp) {
  const auto exe = find_chromium();
  EXPECT_FALSE(exe.empty()) << "Chromium is needed to test runner report's page: install the Debian package "
                               "chromium (scripts/setup does) or set ATTNLAB_CHROMIUM";
  if (exe.empty()) return {};
  EXPECT_EQ(::access(exe.c_str(), X_OK), 0) << "Chromium " << exe << " is not an executable file (ATTNLAB_CHROMIUM?)";
  args.insert(args.begin(), {"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                             "--user-data-dir=" + tmp + "/chromium-profile", "--virtual-time-budget=20000"});
  auto r = run_process(exe, args, tmp, tmp);
  EXPECT_EQ(r.exit_code, 0) << "Chromium (" << exe << ") did not run: " << r.err;
  return r;
}

/// Opens a copy of `page` with `harness` (a <script> element) and returns what the harness wrote
/// ("" when nothing).
inline std::string browse(const std::string& page, const std::string& harness, const std::string& tmp) {
  auto html = read_file(page);
  const std::string anchor = "<main id=\"report\"></main>";
  const auto at = html.find(anchor);
  EXPECT_NE(at, std::string::npos) << page << " lacks " << anchor;
  if (at == std::string::npos) return "";
  html.insert(at + anchor.size(), "\n" + harness);
  const auto copy = page + ".harness.html";
  std::ofstream(copy) << html;
  const auto r = chromium({"--dump-dom", "file://" + copy}, tmp);
  std::smatch m;
  if (!std::regex_search(r.out, m, std::regex("<pre id=\"harness\">([^<]*)</pre>"))) {
    ADD_FAILURE() << "the harness wrote nothing into the page; Chromium said:\n" << r.err.substr(0, 4000);
    return "";
  }
  return m[1];
}

}  // namespace attnlab::testutil
