#include "testing/testing.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>

namespace attnlab::testutil {

::testing::AssertionResult AllClose(const torch::Tensor& actual, const torch::Tensor& expected, double rtol,
                                    double atol) {
  if (actual.sizes() != expected.sizes()) {
    std::ostringstream os;
    os << "shape mismatch: actual " << actual.sizes() << " vs expected " << expected.sizes();
    return ::testing::AssertionFailure() << os.str();
  }
  auto a = actual.detach().to(torch::kCPU, torch::kDouble).contiguous().flatten();
  auto b = expected.detach().to(torch::kCPU, torch::kDouble).contiguous().flatten();
  auto bad = ((a - b).abs() > (atol + rtol * b.abs())) | (a.isnan() != b.isnan());
  auto idx = bad.nonzero();
  if (idx.size(0) == 0) return ::testing::AssertionSuccess();
  int64_t flat = idx[0][0].item<int64_t>();
  // Unravel the flat index into the original shape.
  std::vector<int64_t> coords(actual.dim());
  int64_t rest = flat;
  for (int64_t d = actual.dim() - 1; d >= 0; --d) {
    coords[d] = rest % actual.size(d);
    rest /= actual.size(d);
  }
  return ::testing::AssertionFailure() << fmt::format(
             "{} of {} elements differ; first at [{}]: actual {} vs expected {} (rtol {}, atol {})", idx.size(0),
             a.numel(), fmt::join(coords, ", "), a[flat].item<double>(), b[flat].item<double>(), rtol, atol);
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string temp_dir(const std::string& prefix) {
  std::random_device rd;
  auto dir = std::filesystem::temp_directory_path() / fmt::format("{}-{:x}", prefix, rd());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string run_python_fixture(const std::string& script, const std::string& out) {
  const std::string python = env_or("ATTNLAB_PYTHON", ""), source = env_or("ATTNLAB_SOURCE_DIR", "");
  if (python.empty() || source.empty()) return "ATTNLAB_PYTHON / ATTNLAB_SOURCE_DIR is not set (run through ctest)";
  std::filesystem::create_directories(out);
  const std::string cmd =
      fmt::format("'{}' '{}/tests/python/{}' '{}' > '{}/log.txt' 2>&1", python, source, script, out, out);
  if (std::system(cmd.c_str()) == 0) return "";
  return fmt::format("tests/python/{} failed (its packages come from scripts/setup); its output: {}/log.txt", script,
                     out);
}

}  // namespace attnlab::testutil
