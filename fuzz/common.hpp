#pragma once
// Shared by the fuzz targets: a private scratch folder for inputs that the code under test reads
// from files, and the one way a harness reports a broken property (abort, which libFuzzer records
// as a crash with the input that caused it).
//
// The contract every target checks: an input the code refuses must raise an attnlab::Error
// (ConfigError, DataError, ResultsError, ...) with a message; any other exception escaping, a
// crash, a sanitizer report, a leak, a timeout or a huge allocation is a finding.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace fuzz {

/// Print what broke and abort: libFuzzer saves the input as crash-<sha1>.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "\nFUZZ PROPERTY BROKEN: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// A folder of this process's own under $TMPDIR (or /tmp), made once; POSIX calls only (libtorch
/// exports ABI-incompatible copies of std::filesystem's functions).
class Scratch {
 public:
  Scratch() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/attnlab-fuzz.XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) fail("cannot create a scratch folder under " + tmpl);
    dir_ = buf.data();
  }
  ~Scratch() {
    clear();
    ::rmdir(dir_.c_str());
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  const std::string& dir() const { return dir_; }

  /// Write `size` bytes as <dir>/<name> (replacing it) and return its path.
  std::string write(const std::string& name, const void* data, size_t size) {
    const std::string path = dir_ + "/" + name;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) fail("cannot create " + path);
    const auto* p = static_cast<const char*>(data);
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd, p + done, size - done);
      if (n <= 0) fail("cannot write " + path);
      done += static_cast<size_t>(n);
    }
    ::close(fd);
    written_.push_back(path);
    return path;
  }
  std::string write(const std::string& name, const std::string& text) { return write(name, text.data(), text.size()); }

  /// Remove every file written so far (each input starts from an empty folder).
  void clear() {
    for (const auto& p : written_) ::unlink(p.c_str());
    written_.clear();
  }

 private:
  std::string dir_;
  std::vector<std::string> written_;
};

/// The process's scratch folder (removed at exit).
inline Scratch& scratch() {
  static Scratch s;
  return s;
}

/// Split on a separator byte (empty pieces kept).
inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) break;
    start = at + 1;
  }
  return out;
}

}  // namespace fuzz
