#include "cli/sweep_fork.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

namespace attnlab::cli::sweep {
namespace {

/// All of `n` bytes to `fd`, a signal's interruption retried; false when the other end is gone
/// (no SIGPIPE: MSG_NOSIGNAL on the socket, and pipes are written only by children that then exit).
bool write_all(int fd, const void* data, size_t n, bool socket) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = socket ? ::send(fd, p, n, MSG_NOSIGNAL) : ::write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

/// All of `n` bytes from `fd`, a signal's interruption retried; false at end of file or an error.
bool read_all(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = ::read(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

/// A request: the number of strings, then each as its length and bytes: the log, its header, argv.
bool send_strings(int fd, const std::vector<std::string>& strings) {
  std::string buf;
  const auto put = [&](uint32_t v) { buf.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(static_cast<uint32_t>(strings.size()));
  for (const auto& s : strings) {
    put(static_cast<uint32_t>(s.size()));
    buf += s;
  }
  return write_all(fd, buf.data(), buf.size(), true);
}

bool receive_strings(int fd, std::vector<std::string>& strings) {
  constexpr uint32_t kMaxStrings = 1U << 16, kMaxLength = 1U << 24;
  uint32_t count = 0;
  if (!read_all(fd, &count, sizeof count) || count > kMaxStrings) return false;
  strings.assign(count, {});
  for (auto& s : strings) {
    uint32_t length = 0;
    if (!read_all(fd, &length, sizeof length) || length > kMaxLength) return false;
    s.resize(length);
    if (length > 0 && !read_all(fd, s.data(), length)) return false;
  }
  return true;
}

/// The threads of this process (/proc/self/status), 0 when it cannot be read.
int thread_count() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return 0;
}

/// In the forked run: becomes what spawn() in sweep_local.cpp makes of an exec'd runner, then runs
/// the runner's main and exits with its code, as an exec'd runner would (exit handlers included).
[[noreturn]] void become_run(pid_t sweep, pid_t middle, const std::vector<std::string>& strings,
                             ForkServer::Main main) {
  setpgid(0, 0);
  // The middle process ends at once; until it has, this run is its child. Then it is the sweep's
  // (the sweep is a child subreaper), unless the sweep is gone. The middle's pid comes from the
  // middle itself: read here with getppid(), a middle that had already ended would give the
  // sweep's, and the wait would never end (a busy machine, 2026-11-28).
  // A test hook (e2e_sweep_fork_test.cpp): start late, when the middle is surely gone.
  if (const char* delay = std::getenv("ATTNLAB_SWEEP_FORK_TEST_DELAY_MS")) {
    usleep(static_cast<useconds_t>(std::atoi(delay)) * 1000);
  }
  while (getppid() == middle) usleep(50);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != sweep) _exit(130);
  const int fd = ::open(strings[0].c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0 || !write_all(fd, strings[1].data(), strings[1].size(), false)) _exit(127);
  dup2(fd, STDOUT_FILENO);
  dup2(fd, STDERR_FILENO);
  ::close(fd);
  if (const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC); null >= 0) {
    dup2(null, STDIN_FILENO);
    ::close(null);
  }
  // exec resets caught signals to their default action and keeps ignored ones ignored.
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction sa {};
    if (sigaction(sig, nullptr, &sa) != 0 || sa.sa_handler == SIG_IGN || sa.sa_handler == SIG_DFL) continue;
    std::signal(sig, SIG_DFL);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // spdlog's console logger decided on colours when the sweep made it; the log file gets none.
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("", std::make_shared<spdlog::sinks::stdout_color_sink_mt>()));
  std::vector<std::string> args(strings.begin() + 2, strings.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int code = main(static_cast<int>(args.size()), argv.data());
  std::cout.flush();
  std::cerr.flush();
  std::exit(code);
}

/// The server: one request at a time until the sweep closes its socket (or dies: SIGKILL).
[[noreturn]] void serve(int socket, pid_t sweep, ForkServer::Main main) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != sweep) _exit(0);
  setpgid(0, 0);  // a terminal's ^C is the sweep's to handle
  for (std::vector<std::string> strings; receive_strings(socket, strings);) {
    int32_t reply = -1;
    int channel[2];
    if (strings.size() >= 3 && pipe2(channel, O_CLOEXEC) == 0) {
      const pid_t middle = fork();
      if (middle == 0) {
        ::close(channel[0]);
        const pid_t self = getpid();
        const pid_t run = fork();
        if (run == 0) {
          ::close(channel[1]);
          ::close(socket);
          become_run(sweep, self, strings, main);
        }
        const int32_t pid = run;
        write_all(channel[1], &pid, sizeof pid, false);
        _exit(0);
      }
      ::close(channel[1]);
      if (middle > 0) {
        int32_t pid = -1;
        if (read_all(channel[0], &pid, sizeof pid)) reply = pid;
        while (waitpid(middle, nullptr, 0) < 0 && errno == EINTR) {
        }  // once the middle is gone, the run is the sweep's child
      }
      ::close(channel[0]);
    }
    if (!write_all(socket, &reply, sizeof reply, true)) break;
  }
  _exit(0);
}

}  // namespace

std::unique_ptr<ForkServer> ForkServer::start(Main main) {
  if (const char* e = std::getenv("ATTNLAB_SWEEP_EXEC"); e != nullptr && std::strcmp(e, "1") == 0) return nullptr;
  if (thread_count() != 1) return nullptr;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return nullptr;
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    ::close(sv[0]);
    ::close(sv[1]);
    return nullptr;
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t sweep = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    ::close(sv[0]);
    serve(sv[1], sweep, main);
  }
  ::close(sv[1]);
  if (pid < 0) {
    ::close(sv[0]);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    return nullptr;
  }
  return std::unique_ptr<ForkServer>(new ForkServer(pid, sv[0]));
}

ForkServer::~ForkServer() {
  if (socket_ >= 0) ::close(socket_);
  // Reaped here unless the sweep's own waitpid(-1) already did (then this finds no such child).
  while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

pid_t ForkServer::spawn(const std::vector<std::string>& args, const std::string& log, const std::string& header) {
  if (socket_ < 0) return -1;
  std::vector<std::string> strings{log, header};
  strings.insert(strings.end(), args.begin(), args.end());
  int32_t pid = -1;
  if (!send_strings(socket_, strings) || !read_all(socket_, &pid, sizeof pid)) {
    ::close(socket_);
    socket_ = -1;
    return -1;
  }
  return pid;
}

}  // namespace attnlab::cli::sweep
