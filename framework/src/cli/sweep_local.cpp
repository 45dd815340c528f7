#include "cli/runner_commands.hpp"
#include "cli/sweep_local.hpp"

#include <attnlab/error.hpp>
#include <attnlab/train/checkpoint.hpp>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "core/duration.hpp"

namespace attnlab::cli::sweep {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::atomic<int> g_signal{0};
extern "C" void on_sweep_signal(int sig) { g_signal.store(sig); }

/// SIGINT/SIGTERM/SIGHUP set g_signal while the sweep runs; the old handlers come back after.
class SignalScope {
 public:
  SignalScope() {
    g_signal.store(0);
    struct sigaction sa {};
    sa.sa_handler = on_sweep_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~SignalScope() {
    for (size_t i = 0; i < 3; ++i) sigaction(kSignals[i], &old_[i], nullptr);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

 private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old_[3] {};
};

}  // namespace

namespace {

struct Child {
  size_t run;
  Clock::time_point start;
};

/// Starts `args` with stdout and stderr appended to `log` (after a header line), in a process group
/// of its own (a terminal's ^C reaches the sweep alone, which forwards SIGTERM), and with SIGTERM
/// as its parent-death signal (a sweep killed outright takes its runs with it).
/// The run is forked from `server` when there is one (null once it is gone); else `program` is
/// exec'd: this program (the runner's LibTorch part), which is what bin/runner in args[0] would
/// hand the run to anyway, minus bin/runner's own start (about 70 ms a run).
pid_t spawn(ForkServer*& server, const std::string& program, const std::vector<std::string>& args,
            const std::string& log, int attempt) {
  const auto header = [&](const char* how) {
    std::string h = fmt::format("==== {}{} attempt {}:", utc_now(), how, attempt);
    for (const auto& a : args) h += " " + shell_quote(a);
    return h + "\n";
  };
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  ATTNLAB_CHECK(fd >= 0, ResultsError, "cannot open the run's log {}", log);
  if (server != nullptr) {
    if (const pid_t pid = server->spawn(args, log, header(" (forked)")); pid > 0) {
      ::close(fd);
      return pid;
    }
    std::fprintf(stderr, "runner sweep: the fork server is gone; this run and the rest are exec'd\n");
    server = nullptr;
  }
  if (const auto h = header(""); ::write(fd, h.data(), h.size()) < 0) {
    ::close(fd);
    throw ResultsError(fmt::format("cannot write the run's log {}", log));
  }
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(130);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(program.c_str(), argv.data());
    std::fprintf(stderr, "runner sweep: cannot start %s\n", program.c_str());
    _exit(127);
  }
  ::close(fd);
  ATTNLAB_CHECK(pid > 0, Error, "runner sweep: fork failed");
  return pid;
}

/// Failed runs named (with their error) when a sweep ends.
constexpr size_t kFailuresNamed = 5;

/// How long a sweep shows no progress line while its first runs have neither completed nor all
/// ended (run_local).
constexpr auto kQuietStart = std::chrono::seconds(5);
/// A run that fails within this many seconds of its start failed "at once": when every run of the
/// first wave does, with the same error line, the sweep stops there (run_local).
constexpr double kAtOnceSeconds = 60;

/// The line of a run's log that says why it failed: the last line of its last attempt that names an
/// error (the runner ends with one: `config error: ...`, `data error: ...`), else its last line.
std::string last_error_line(const std::string& log) {
  std::ifstream in(log);
  std::string line, last, error;
  while (std::getline(in, line)) {
    if (line.rfind("==== ", 0) == 0) error.clear();  // a new attempt's header
    if (line.empty()) continue;
    last = line;
    if (line.find("error") != std::string::npos || line.find("Error") != std::string::npos) error = line;
  }
  const auto& why = error.empty() ? last : error;
  return why.empty() ? std::string("(its log is empty)") : why.substr(0, 400);
}

/// The runner's exit status -> the run's status. `stopped`: the sweep sent SIGTERM to it.
std::string status_of(int exit_code, bool stopped) {
  if (exit_code == 0) return "completed";
  if (exit_code == 2) return "diverged";
  if (exit_code == 130 || (stopped && exit_code > 128)) return "interrupted";
  return "failed";
}

/// One line "sweep: 3/8 done (1 failed), 2 running, 3 pending, ETA 1m20s"; on a terminal it
/// rewrites itself, elsewhere it is printed when it changes.
class ProgressLine {
 public:
  explicit ProgressLine(int jobs) : jobs_(jobs), tty_(isatty(STDERR_FILENO) != 0) {}
  void show(const Manifest& m, const std::map<pid_t, Child>& running, size_t pending_jobs, bool final_line = false) {
    size_t done = 0, failed = 0, interrupted = 0;
    double seconds = 0;
    size_t timed = 0;
    for (const auto& r : m.runs) {
      if (r.status == "completed" || r.status == "diverged") ++done;
      if (r.status == "failed") ++failed;
      if (r.status == "interrupted") ++interrupted;
      if (r.status == "completed" && r.seconds > 0) {
        seconds += r.seconds;
        ++timed;
      }
    }
    const size_t left = pending_jobs + running.size();
    const double per_run = timed > 0 ? seconds / static_cast<double>(timed) : -1;
    const auto slots = static_cast<double>(std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(jobs_), left)));
    const std::string eta = left == 0 ? std::string("0s")
                            : per_run < 0 ? std::string("?")
                                          : format_seconds(per_run * static_cast<double>(left) / slots);
    auto line = fmt::format("sweep: {}/{} done, {} failed, {} interrupted, {} running, {} pending, ETA {}", done,
                            m.runs.size(), failed, interrupted, running.size(), pending_jobs, eta);
    if (tty_) {
      std::fprintf(stderr, "\r%s\033[K%s", line.c_str(), final_line ? "\n" : "");
    } else if (line.substr(0, line.find(", ETA")) != last_.substr(0, last_.find(", ETA"))) {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fflush(stderr);
    last_ = line;
  }

 private:
  int jobs_;
  bool tty_;
  std::string last_;
};

}  // namespace

std::vector<std::string> run_command(const std::string& runner, const std::string& dir, const Manifest& m,
                                     const Job& job) {
  const auto& r = m.runs[job.run];
  std::vector<std::string> args{runner, m.spec.experiment};
  args.insert(args.end(), m.spec.overrides.begin(), m.spec.overrides.end());
  args.insert(args.end(), r.overrides.begin(), r.overrides.end());
  if (m.threads) args.push_back(fmt::format("threads={}", *m.threads));
  const auto results = (fs::path(dir) / r.results).string();
  args.push_back(job.resume ? "--resume" : "--results");
  args.push_back(results);
  // A run the sweep's --resume starts again from scratch (failed, or interrupted before its first
  // checkpoint) replaces its own earlier attempt; a new sweep's run refuses a file already there.
  std::error_code ec;
  if (job.replace && !job.resume &&
      (fs::exists(results, ec) || fs::exists(attnlab::train::checkpoint_dir(results), ec))) {
    args.push_back("--overwrite");
  }
  for (const auto& d : m.plugin_dirs) {
    args.push_back("--plugin-path");
    args.push_back(d);
  }
  return args;
}

int run_local(const std::string& dir, Manifest& m, const std::vector<Job>& jobs, const LaunchOptions& options) {
  const std::string runner = runner_path();  // what the logs and the manifest name
  const std::string program = fs::read_symlink("/proc/self/exe").string();
  SignalScope signals;
  ForkServer* server = options.server;
  ProgressLine progress(options.jobs);
  std::map<pid_t, Child> running;
  std::map<pid_t, bool> stopped;  // children the sweep sent SIGTERM
  size_t next = 0;
  bool any_failed = false;
  const auto save = [&] { write_manifest(dir, m); };

  const auto reap = [&](pid_t pid, int wstatus) {
    auto it = running.find(pid);
    if (it == running.end()) return;
    auto& r = m.runs[it->second.run];
    const int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    r.exit_code = code;
    r.status = status_of(code, stopped.count(pid) > 0);
    r.finished = utc_now();
    r.seconds = std::chrono::duration<double>(Clock::now() - it->second.start).count();
    any_failed = any_failed || r.status == "failed";
    running.erase(it);
    save();
  };
  const auto stop_all = [&] {
    for (const auto& [pid, child] : running) {
      kill(pid, SIGTERM);
      stopped[pid] = true;
    }
    while (!running.empty()) {
      int wstatus = 0;
      const pid_t pid = waitpid(-1, &wstatus, 0);
      if (pid > 0) reap(pid, wstatus);
      if (pid < 0 && errno == ECHILD) break;
    }
  };

  // The first wave: the first max(2, --jobs) runs. Until it is decided (a run of it completed, or
  // each one ended) or kQuietStart has passed, no progress line is shown; and when each of them
  // failed at once with the same error line (a device the machine lacks, a file every run needs),
  // the sweep starts no other run and ends with that one line.
  const size_t wave = std::min(jobs.size(), std::max<size_t>(2, static_cast<size_t>(options.jobs)));
  std::set<size_t> wave_runs;  // their indices in m.runs
  for (size_t i = 0; i < wave; ++i) wave_runs.insert(jobs[i].run);
  const auto started = Clock::now();
  bool loud = false;
  const auto show = [&](bool final_line = false) {
    if (!loud) {
      size_t ended = 0, succeeded = 0;
      for (size_t i = 0; i < wave; ++i) {
        const auto& status = m.runs[jobs[i].run].status;
        ended += status != "pending" && status != "running";
        succeeded += status == "completed" || status == "diverged";
      }
      const bool decided = succeeded > 0 || (ended == wave && !final_line);
      loud = decided || Clock::now() - started > kQuietStart || g_signal.load() != 0;
    }
    if (loud) progress.show(m, running, jobs.size() - next, final_line);
  };
  std::string same_error;  // set when every run of the first wave failed with this one error line
  const auto wave_failed_alike = [&] {
    if (wave < 2) return false;
    std::string first;
    for (size_t i = 0; i < wave; ++i) {
      const auto& r = m.runs[jobs[i].run];
      if (r.status != "failed" || r.seconds > kAtOnceSeconds) return false;
      const auto line = last_error_line((fs::path(dir) / r.log).string());
      if (i == 0) first = line;
      if (line != first) return false;
    }
    same_error = first;
    return true;
  };

  // While the first wave may still fail alike (every run of it that ended failed at once, and one
  // is still in its first kAtOnceSeconds), no run after it starts: it would be stopped half-begun.
  const auto wave_undecided = [&] {
    if (wave < 2 || next < wave) return false;
    bool young = false;
    for (const auto& [pid, child] : running) {
      if (wave_runs.count(child.run) == 0) continue;
      if (std::chrono::duration<double>(Clock::now() - child.start).count() > kAtOnceSeconds) return false;
      young = true;
    }
    for (const size_t i : wave_runs) {
      const auto& r = m.runs[i];
      if (r.status != "running" && (r.status != "failed" || r.seconds > kAtOnceSeconds)) return false;
    }
    return young;
  };

  auto last_show = Clock::now();
  show();
  while (true) {
    const bool halted = g_signal.load() != 0 || (options.fail_fast && any_failed) || !same_error.empty();
    while (!halted && running.size() < static_cast<size_t>(options.jobs) && next < jobs.size() && !wave_undecided()) {
      const Job& job = jobs[next++];
      auto& r = m.runs[job.run];
      r.status = "running";
      r.exit_code.reset();
      r.started = utc_now();
      r.finished.clear();
      r.seconds = 0;
      ++r.attempts;
      save();  // "running" is on disk before the child exists: a crash here leaves it for --resume
      const pid_t pid =
          spawn(server, program, run_command(runner, dir, m, job), (fs::path(dir) / r.log).string(), r.attempts);
      running[pid] = {job.run, Clock::now()};
      show();
    }
    if (halted) {
      stop_all();
      break;
    }
    if (running.empty() && next >= jobs.size()) break;
    int wstatus = 0;
    const pid_t pid = waitpid(-1, &wstatus, WNOHANG);
    if (pid > 0) {
      reap(pid, wstatus);
      if (!wave_failed_alike()) show();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a signal wakes it early
    if (Clock::now() - last_show > std::chrono::seconds(1)) {
      show();
      last_show = Clock::now();
    }
  }
  show(true);
  save();
  if (!same_error.empty() && g_signal.load() == 0) {
    std::fprintf(stderr,
                 "runner sweep: the first %zu runs all failed at once with the same error, so the sweep ran no more "
                 "(%zu of %zu not run; once it is fixed, runner sweep %s --resume runs them all): %s\n",
                 wave, jobs.size() - wave, jobs.size(), dir.c_str(), same_error.c_str());
    return 1;
  }
  if (const int sig = g_signal.load(); sig != 0) {
    std::fprintf(stderr, "runner sweep: stopped by signal %d; running runs were interrupted. Resume with: "
                         "runner sweep %s --resume\n", sig, dir.c_str());
    return 130;
  }
  size_t failed = 0, not_done = 0;
  for (const auto& r : m.runs) {
    failed += r.status == "failed";
    not_done += r.status != "completed" && r.status != "diverged";
  }
  if (not_done > 0) {
    std::fprintf(stderr, "runner sweep: %zu of %zu runs did not complete (%zu failed); their logs are in %s\n",
                 not_done, m.runs.size(), failed, dir.c_str());
    size_t named = 0;
    for (const auto& r : m.runs) {
      if (r.status != "failed") continue;
      if (++named > kFailuresNamed) {
        std::fprintf(stderr, "  ... and %zu more failed runs\n", failed - kFailuresNamed);
        break;
      }
      // Named by its overrides as given (the file name is a mangled form of them).
      const auto overrides = fmt::format("{}", fmt::join(r.overrides, " "));
      std::fprintf(stderr, "  %s (exit %d): %s\n", overrides.empty() ? r.name.c_str() : overrides.c_str(),
                   r.exit_code.value_or(-1), last_error_line((fs::path(dir) / r.log).string()).c_str());
    }
    return 1;
  }
  return 0;
}

}  // namespace attnlab::cli::sweep
