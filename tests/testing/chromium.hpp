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

/// What a test's harness script starts with: it records errors (window errors, unhandled
/// rejections, console.error), defines done(r) (r with the errors, and whether window.__pwned was
/// set, as JSON into <pre id="harness">), count(selector), texts(selector) and whenReady(then),
/// which calls then({ready: "1"}) once the page has drawn (body[data-ready]) or ends with
/// done({ready}) when it failed or did not draw within 15 s. The test's script follows it and
/// kHarnessEnd closes it.
inline constexpr const char* kHarnessStart = R"js(<script>
(function () {
  var errors = [];
  window.addEventListener("error", function (e) { errors.push("error: " + e.message); });
  window.addEventListener("unhandledrejection", function (e) { errors.push("unhandled rejection: " + e.reason); });
  var original = console.error;
  console.error = function () {
    errors.push("console.error: " + Array.prototype.join.call(arguments, " "));
    original.apply(console, arguments);
  };
  function done(r) {
    r.errors = errors;
    r.pwned = !!window.__pwned;
    var pre = document.createElement("pre");
    pre.id = "harness";
    pre.textContent = JSON.stringify(r);
    document.body.appendChild(pre);
  }
  function count(selector) { return document.querySelectorAll(selector).length; }
  function texts(selector) {
    return Array.prototype.map.call(document.querySelectorAll(selector), function (t) { return t.textContent; });
  }
  function whenReady(then) {
    var tries = 0;
    function wait() {
      var ready = document.body.getAttribute("data-ready");
      if (ready !== "1") {
        if (ready !== "error" && ++tries < 150) return setTimeout(wait, 100);
        return done({ ready: ready });
      }
      then({ ready: ready });
    }
    window.addEventListener("load", function () { setTimeout(wait, 50); });
  }
)js";
inline constexpr const char* kHarnessEnd = "})();\n</script>\n";

/// The first integer after "key": in the harness JSON; -1 when absent.
inline long harness_field(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\":\"?(-?[0-9]+)"))) return -1;
  return std::stol(m[1]);
}

/// Opens a copy of `page` with a harness script and returns what the harness wrote ("" when nothing).
/// The harness is kHarnessStart + `script` + kHarnessEnd.
inline std::string browse(const std::string& page, const std::string& script, const std::string& tmp) {
  const std::string harness = std::string(kHarnessStart) + script + kHarnessEnd;
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
