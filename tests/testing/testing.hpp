#pragma once
// Test helpers: seeding fixture, tensor comparison reporting the first mismatch, paths.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>

namespace attnlab::testutil {

/// Seeds torch (manual_seed(0)) before every test.
class SeededTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::manual_seed(0); }
};

/// Success when shapes match and all |a - b| <= atol + rtol * |b|; otherwise names the first
/// mismatching index, both values and the tolerance.
::testing::AssertionResult AllClose(const torch::Tensor& actual, const torch::Tensor& expected, double rtol = 1e-5,
                                    double atol = 1e-6);

/// Environment variable or fallback.
std::string env_or(const char* name, const std::string& fallback);
/// A fresh empty temporary directory (removed by the OS / left for inspection).
std::string temp_dir(const std::string& prefix);

/// Runs `tests/python/<script> <out>` with the venv's python (ATTNLAB_PYTHON; the sources from
/// ATTNLAB_SOURCE_DIR), its output into <out>/log.txt. "" when it worked, else why: a fixture a test
/// needs fails the test (never a skip) when the python or its packages are missing.
std::string run_python_fixture(const std::string& script, const std::string& out);

/// A TCP port on 127.0.0.1 that nothing listens on now (for a test's own server or rendezvous).
int free_port();

/// Whether `text` contains `part`.
inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
/// Lines of text (a final newline does not start another).
inline size_t count_lines(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n + (!text.empty() && text.back() != '\n');
}

/// Sets the intra-op thread count (at::set_num_threads) for one scope and restores it afterwards.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n) : old_(at::get_num_threads()) { at::set_num_threads(n); }
  ~ScopedThreads() { at::set_num_threads(old_); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int old_;
};

/// Sets (or unsets) an environment variable for one scope and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

/// The message of the E that f throws; a test failure (and "") when it throws none.
template <class E>
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

}  // namespace attnlab::testutil

/// Ends the test with a failure, never a skip, when something it needs (data, a tool, ctest's
/// environment) is missing: a suite that skips what it cannot run passes without testing it. Only
/// tests that need a GPU skip on a machine without one.
#define ATTNLAB_REQUIRE(condition, what) \
  if (!(condition)) GTEST_FAIL() << "missing what this test needs: " << what

#define EXPECT_ALLCLOSE(a, b, ...) EXPECT_TRUE(::attnlab::testutil::AllClose((a), (b), ##__VA_ARGS__))
