// A plugin library loaded first in a forked copy of the process (probe.hpp), the pattern of the
// results read check (results/read_check.cpp): fork, an alarm, the answer back through a pipe, a
// death by a signal classified. The child only loads the library, reads its descriptor and
// _exits: it runs no destructor and no atexit handler of the parent's state, and touches no
// LibTorch or CUDA state beyond what the library's own static constructors do.
#include "plugin/probe.hpp"

#include <fmt/format.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

#include "core/env.hpp"
#include "core/forked.hpp"

namespace attnlab::plugin::probe {
namespace fs = std::filesystem;

namespace {

constexpr int kParentGone = 4;           // the process that forked the probe ended before it started
constexpr size_t kMaxCacheLines = 4096;  // oldest dropped beyond this

/// "<size>\t<mtime in ns>" of a file, or "" when it cannot be stat-ed.
std::string file_stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return fmt::format("{}\t{}", st.st_size, static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec);
}

/// This runner, as far as loading a library goes: the SDK hash, and libattnlab.so's path and stamp.
std::string runner_identity(const std::string& sdk_hash) {
  Dl_info info{};
  std::string self = "?";
  if (::dladdr(reinterpret_cast<void*>(&runner_identity), &info) != 0 && info.dli_fname != nullptr) {
    self = info.dli_fname;
  }
  std::string stamp = file_stamp(self);
  std::replace(stamp.begin(), stamp.end(), '\t', ':');
  return fmt::format("{}@{}@{}", sdk_hash, self, stamp);
}

std::string cache_file() {
  if (const char* dir = std::getenv("ATTNLAB_CACHE"); dir != nullptr && *dir != '\0') {
    return (fs::path(dir) / "plugin-probes.tsv").string();
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return (fs::path(home) / ".cache" / "attnlab" / "plugin-probes.tsv").string();
  }
  return {};
}

/// One cached outcome per line: identity, real path, size, mtime, then "ok" or "failed", kind,
/// name, reason (tabs and newlines in them made spaces).
struct Cache {
  std::string file;
  std::map<std::string, Outcome> outcomes;  // by "identity\tpath\tsize\tmtime"

  static std::string clean(std::string s) {
    std::replace_if(
        s.begin(), s.end(), [](char c) { return c == '\t' || c == '\n' || c == '\r'; }, ' ');
    return s;
  }

  void read() {
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) {
      std::vector<std::string> f;
      std::stringstream ss(line);
      for (std::string field; std::getline(ss, field, '\t');) f.push_back(field);
      if (f.size() < 5 || (f[4] != "ok" && f[4] != "failed")) continue;
      f.resize(8);
      outcomes[fmt::format("{}\t{}\t{}\t{}", f[0], f[1], f[2], f[3])] = Outcome{f[4] == "ok", f[7], f[5], f[6]};
    }
  }

  /// The owner of a line or key: its first two fields, the runner's identity and the real path.
  static std::string owner_of(const std::string& line) {
    const auto first = line.find('\t');
    const auto second = first == std::string::npos ? std::string::npos : line.find('\t', first + 1);
    return second == std::string::npos ? line : line.substr(0, second + 1);
  }

  /// Remember `o` under `key`; written by save(), once for a whole scan.
  void remember(const std::string& key, const Outcome& o) {
    outcomes[key] = o;
    learned.push_back(fmt::format("{}\t{}\t{}\t{}\t{}", key, o.survived ? "ok" : "failed", clean(o.kind),
                                  clean(o.name), clean(o.reason)));
  }

  /// Writes what this process learned, merged into the file as it is now (what other processes
  /// wrote since it was read is kept; older stamps of a library it learned again are dropped), as a
  /// temporary renamed over it: a concurrent scan sees the old file or the new one.
  void save() {
    if (learned.empty() || file.empty()) return;
    std::vector<std::string> now;
    {
      std::ifstream in(file);
      for (std::string line; std::getline(in, line);) now.push_back(line);
    }
    std::set<std::string> owners;
    for (const auto& l : learned) owners.insert(owner_of(l));
    std::erase_if(now, [&](const std::string& l) { return owners.contains(owner_of(l)); });
    now.insert(now.end(), learned.begin(), learned.end());
    if (now.size() > kMaxCacheLines) now.erase(now.begin(), now.end() - kMaxCacheLines);
    learned.clear();
    std::error_code ec;
    fs::create_directories(fs::path(file).parent_path(), ec);
    const std::string tmp = fmt::format("{}.{}.tmp", file, ::getpid());
    {
      std::ofstream out(tmp, std::ios::trunc);
      for (const auto& l : now) out << l << '\n';
      if (!out.flush()) {
        fs::remove(tmp, ec);
        return;  // not writable: the next scan probes again
      }
    }
    fs::rename(tmp, file, ec);
    if (ec) fs::remove(tmp, ec);
    ++saves;
  }

  std::vector<std::string> learned;  // lines this process has not written yet
  int saves = 0;                     // files written (ATTNLAB_PLUGIN_PROBE_LOG says, for tests)
};

Cache& cache() {
  static Cache c;
  static std::once_flag once;
  std::call_once(once, [] {
    c.file = cache_file();
    if (!c.file.empty()) c.read();
  });
  return c;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

/// The child: isolated, under an alarm; `rehearse`, then _exit.
[[noreturn]] void child(int fd, pid_t parent, int seconds, const std::function<void(const Report&)>& rehearse) {
  forked::isolate_child(parent, kParentGone);
  ::alarm(static_cast<unsigned>(seconds));
  const Report report = [fd](const std::string& kind, const std::string& name) {
    const std::string record = kind + "\t" + name + "\n";
    [[maybe_unused]] const auto n = ::write(fd, record.data(), record.size());
  };
  try {
    rehearse(report);
  } catch (...) {  // a clean refusal: the load in the parent says why
  }
  ::_exit(0);
}

/// Forks, runs `rehearse` in the child and says how the child ended; nullopt-like `cacheable`
/// false when the end says nothing about the library (a timeout, an interrupt, a failed fork).
Outcome run_probe(const std::string& path, const std::function<void(const Report&)>& rehearse, bool& cacheable) {
  cacheable = false;
  const int seconds = static_cast<int>(env::seconds("ATTNLAB_PLUGIN_PROBE_SECONDS", 1, 86400, true).value_or(60));
  if (const char* log = std::getenv("ATTNLAB_PLUGIN_PROBE_LOG"); log != nullptr && *log != '\0') {
    std::ofstream(log, std::ios::app) << path << '\n';
  }
  int fds[2] = {-1, -1};
  if (::pipe2(fds, O_CLOEXEC) != 0) return {};  // cannot probe: load it as before
  std::fflush(nullptr);                         // the child's copy of stdio buffers is never written twice
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]), ::close(fds[1]);
    return {};
  }
  if (pid == 0) {
    ::close(fds[0]);
    child(fds[1], parent, seconds, rehearse);
  }
  ::close(fds[1]);
  const std::string record = forked::read_to_end(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return {};
  }
  Outcome o;
  if (const auto tab = record.find('\t'); tab != std::string::npos) {
    o.kind = record.substr(0, tab);
    o.name = record.substr(tab + 1, record.find('\n', tab) - tab - 1);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    cacheable = true;
    return o;
  }
  o.survived = false;
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    if (sig == SIGALRM) {
      o.reason = fmt::format(
          "{}: loading it did not finish within {} s in a separate probing process "
          "(ATTNLAB_PLUGIN_PROBE_SECONDS)",
          path, seconds);
      return o;
    }
    // Ended from outside (Ctrl-C, kill, the OOM killer): says nothing about the library.
    cacheable = sig != SIGINT && sig != SIGTERM && sig != SIGHUP && sig != SIGKILL;
    o.reason = fmt::format("{}: loading it {} ({}) in a separate probing process", path,
                           cacheable ? "crashed" : "was ended", signal_name(sig));
    return o;
  }
  if (WEXITSTATUS(status) == kParentGone) return {};
  cacheable = true;
  o.reason = fmt::format("{}: loading it ended the process (exit status {}) in a separate probing process", path,
                         WEXITSTATUS(status));
  return o;
}

}  // namespace

Outcome check(const std::string& path, const std::string& sdk_hash,
              const std::function<void(const Report&)>& rehearse) {
  std::error_code ec;
  const auto real = fs::canonical(path, ec);
  const std::string stamp = file_stamp(path);
  Cache& c = cache();
  const std::string key =
      stamp.empty() || ec ? std::string() : fmt::format("{}\t{}\t{}", runner_identity(sdk_hash), real.string(), stamp);
  if (!key.empty()) {
    if (auto it = c.outcomes.find(key); it != c.outcomes.end()) return it->second;
  }
  bool cacheable = false;
  Outcome o = run_probe(path, rehearse, cacheable);
  // Only a survival is remembered: a library that crashed once (perhaps for a reason of that
  // moment) is probed again at the next scan, never skipped for good.
  if (cacheable && o.survived && !key.empty()) c.remember(key, o);
  return o;
}

void save() {
  Cache& c = cache();
  const int before = c.saves;
  c.save();
  if (const char* log = std::getenv("ATTNLAB_PLUGIN_PROBE_LOG"); log != nullptr && *log != '\0' && c.saves > before) {
    std::ofstream(log, std::ios::app) << "cache written\n";
  }
}

}  // namespace attnlab::plugin::probe
