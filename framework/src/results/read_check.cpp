// The crash-isolating read check behind ResultsReader (see reader.hpp, check_readable).
//
// Debian's HDF5 1.10.8 crashes, loops forever or allocates gigabytes on some damaged files
// (fuzz/README.md lists the kinds: H5HG_read's wild reads of variable-length strings, a global
// heap whose free-space object has size 0, H5T__conv_vlen's claimed multi-GiB lengths). None of
// it can be caught in the process that hits it. So before a file is read for real, a forked child
// reads every object of it the way any reader could: every link of every group, every attribute
// of every object and every dataset whole, each in its own stored type (variable-length strings
// included), after reading it through ResultsReader as the commands do, under an alarm and an
// address-space limit. The child's end says whether HDF5
// survived; what HDF5 refuses cleanly is left to the reader, which names it better.
#include <fmt/format.h>
#include <hdf5.h>
#include <attnlab/error.hpp>
#include <attnlab/results/figure.hpp>
#include <attnlab/results/reader.hpp>

#include <optional>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.hpp"
#include "core/forked.hpp"
#include "results/hdf5.hpp"
#include "results/lock.hpp"

namespace attnlab::results {

namespace {

void (*g_forked_child_setup)() = nullptr;  // set_forked_read_setup

// The child's exit codes; any other end (a signal, or an exit status a library chose, as a
// sanitizer's report does) means HDF5 did not survive the file.
constexpr int kWalked = 0;
constexpr int kOutOfMemory = 3;  // a read claimed more than the memory allowance
constexpr int kParentGone = 4;   // the process that forked it ended before it started
constexpr int kThrew = 5;        // the rehearsed read threw: its error is in the pipe

constexpr int kMaxDepth = 64;             // nested groups followed (a results file has 4)
constexpr int64_t kMaxObjects = 1 << 20;  // links visited before the walk stops

struct Walk {
  uint64_t memory_bytes = 0;  // the largest buffer one read may claim
  int64_t objects = 0;
  bool out_of_memory = false;
};

herr_t note_allocation_failure(unsigned, const H5E_error2_t* e, void* data) {
  if (e->min_num == H5E_CANTALLOC || e->min_num == H5E_NOSPACE) static_cast<Walk*>(data)->out_of_memory = true;
  return 0;
}

/// After a failed HDF5 call: whether it failed for memory, then forget the error.
void after_failure(Walk& walk) {
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, note_allocation_failure, &walk);
  H5Eclear2(H5E_DEFAULT);
}

/// Read the elements of an attribute or dataset (`read`) into memory of its native type, then free
/// what variable-length types allocated. Skipped, as the reader refuses it (hdf5.cpp,
/// stored_elements) and HDF5 overruns its buffers reading it: an object whose shape claims more
/// elements than it stores bytes for.
template <class Read>
void read_elements(hid_t file_type, hid_t space, hsize_t stored_bytes, Walk& walk, Read&& read) {
  const hssize_t claimed = H5Sget_select_npoints(space);
  if (claimed < 0) return after_failure(walk);
  if (static_cast<hsize_t>(claimed) > stored_bytes / std::max<size_t>(1, H5Tget_size(file_type))) return;
  const hid_t mem = H5Tget_native_type(file_type, H5T_DIR_ASCEND);
  if (mem < 0) return after_failure(walk);
  const size_t size = H5Tget_size(mem);
  if (size > 0) {
    // Sized by what the file claims: a claim past the memory allowance counts as running out.
    const uint64_t elements = static_cast<uint64_t>(std::max<hssize_t>(claimed, 1));
    std::vector<unsigned char> buffer;
    try {
      if (elements > walk.memory_bytes / size) throw std::bad_alloc();
      buffer.resize(elements * size);
    } catch (const std::exception&) {
      walk.out_of_memory = true;
    }
    if (!buffer.empty()) {
      // Reclaim frees what variable-length parts the read allocated (nothing for fixed types).
      if (read(mem, buffer.data()) < 0)
        after_failure(walk);
      else
        H5Dvlen_reclaim(mem, space, H5P_DEFAULT, buffer.data());
    }
  } else {
    after_failure(walk);
  }
  H5Tclose(mem);
}

herr_t read_attribute(hid_t obj, const char* name, const H5A_info_t*, void* data) {
  auto& walk = *static_cast<Walk*>(data);
  const hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
  if (attr < 0) return after_failure(walk), 0;
  const hid_t type = H5Aget_type(attr), space = H5Aget_space(attr);
  if (type >= 0 && space >= 0) {
    read_elements(type, space, H5Aget_storage_size(attr), walk,
                  [&](hid_t mem, void* buf) { return H5Aread(attr, mem, buf); });
  } else {
    after_failure(walk);
  }
  if (type >= 0) H5Tclose(type);
  if (space >= 0) H5Sclose(space);
  H5Aclose(attr);
  return 0;
}

void read_object(hid_t obj, Walk& walk, int depth);

struct Level {
  Walk* walk;
  int depth;
};

herr_t visit_link(hid_t group, const char* name, const H5L_info_t*, void* data) {
  auto& level = *static_cast<Level*>(data);
  if (++level.walk->objects > kMaxObjects) return 1;
  const hid_t obj = H5Oopen(group, name, H5P_DEFAULT);
  if (obj < 0) return after_failure(*level.walk), 0;
  read_object(obj, *level.walk, level.depth + 1);
  H5Oclose(obj);
  return 0;
}

void read_object(hid_t obj, Walk& walk, int depth) {
  hsize_t index = 0;
  if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &index, read_attribute, &walk) < 0) after_failure(walk);
  switch (H5Iget_type(obj)) {
    case H5I_GROUP: {
      if (depth >= kMaxDepth) return;
      Level level{&walk, depth};
      if (H5Literate(obj, H5_INDEX_NAME, H5_ITER_INC, nullptr, visit_link, &level) < 0) after_failure(walk);
      return;
    }
    case H5I_DATASET: {
      const hid_t type = H5Dget_type(obj), space = H5Dget_space(obj);
      if (type >= 0 && space >= 0) {
        read_elements(type, space, H5Dget_storage_size(obj), walk,
                      [&](hid_t mem, void* buf) { return H5Dread(obj, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf); });
      } else {
        after_failure(walk);
      }
      if (type >= 0) H5Tclose(type);
      if (space >= 0) H5Sclose(space);
      return;
    }
    default:
      return;
  }
}

/// Run one read; a documented refusal (attnlab::Error) ends that read only.
template <class F>
void attempt(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
}

void read_children(const ResultsReader& in, const std::string& path, int depth, int& budget) {
  std::vector<std::string> names;
  attempt([&] { names = in.children(path); });
  for (const auto& name : names) {
    if (--budget < 0) return;
    const std::string at = path.empty() ? name : path + "/" + name;
    attempt([&] { (void)in.has(at); });
    attempt([&] { (void)in.array(at); });
    attempt([&] { (void)in.strings(at); });
    attempt([&] { (void)in.holds_strings(at); });
    for (const char* attr : {"text", "split", "bleu", "query_tokens", "label_names", "xlim"}) {
      attempt([&] { (void)in.attr_strings_at(at, attr); });
      attempt([&] { (void)in.attr_doubles_at(at, attr); });
      attempt([&] { (void)in.attr_string_at(at, attr); });
      attempt([&] { (void)in.attr_double_at(at, attr); });
    }
    if (depth < 4) read_children(in, at, depth + 1, budget);
  }
}

/// The address space this process maps now, in bytes (0 when unknown).
uint64_t mapped_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  if (!(statm >> pages)) return 0;
  return pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

/// Whether an exception from a read says that memory ran out (LibTorch's allocator, in a read of a
/// process that has it, throws its own).
bool out_of_memory(const std::exception& e) {
  return dynamic_cast<const std::bad_alloc*>(&e) != nullptr ||
         std::string_view(e.what()).find("can't allocate memory") != std::string_view::npos;
}

/// The walk, on a file opened as the reader opens it: no file lock, then (a writer in this
/// process) with one; closed at the end, since closing frees what the metadata cache read, which
/// HDF5 can also get wrong. Whether a read claimed more than `memory_bytes`.
bool walk_file(const std::string& path, uint64_t memory_bytes) {
  Walk walk;
  walk.memory_bytes = memory_bytes > 0 ? memory_bytes : UINT64_MAX;
  hid_t file = -1;
  for (bool lock : {false, true}) {
    const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) break;  // left to the reader
    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(fapl, lock, true);
#endif
    file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (file >= 0) break;
    after_failure(walk);
  }
  if (file >= 0) {
    const hid_t root = H5Oopen(file, "/", H5P_DEFAULT);
    if (root >= 0) {
      read_object(root, walk, 0);
      H5Oclose(root);
    } else {
      after_failure(walk);
    }
    if (H5Fclose(file) < 0) after_failure(walk);
  }
  return walk.out_of_memory;
}

/// The child: quiet, limited, `read` (true when memory ran out), then _exit with how it went
/// (never returns, never runs destructors or atexit handlers of the parent's state).
[[noreturn]] void child(const ReadCheckLimits& limits, const std::function<bool()>& read, pid_t parent, int error_fd) {
  forked::isolate_child(parent, kParentGone);
  if (const uint64_t mapped = mapped_bytes(); mapped > 0 && limits.memory_bytes > 0) {
    const rlimit as{mapped + limits.memory_bytes, mapped + limits.memory_bytes};
    ::setrlimit(RLIMIT_AS, &as);
  }
  ::alarm(static_cast<unsigned>(limits.seconds));
  if (g_forked_child_setup != nullptr) g_forked_child_setup();
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  bool out_of_memory_seen = false;
  try {
    out_of_memory_seen = read();
  } catch (const std::exception& e) {
    out_of_memory_seen = out_of_memory(e);
    if (!out_of_memory_seen && error_fd >= 0) {
      // The error's kind and message, for the parent to throw without reading (a pipe holds 64 KiB).
      // Its own kind, so that the parent's one line says "config error", "plugin error", ... as the
      // same error thrown in the process would, and never "results error: " for what is not one.
      const char kind = dynamic_cast<const ConfigError*>(&e) != nullptr   ? 'C'
                        : dynamic_cast<const DataError*>(&e) != nullptr   ? 'D'
                        : dynamic_cast<const PluginError*>(&e) != nullptr ? 'P'
                        : dynamic_cast<const ResultsError*>(&e) != nullptr ? 'R'
                                                                           : 'E';
      std::string record = std::string(1, kind) + std::string(e.what()).substr(0, 60000);
      for (size_t off = 0; off < record.size();) {
        const ssize_t n = ::write(error_fd, record.data() + off, record.size() - off);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      ::_exit(kThrew);
    }
  } catch (...) {
  }
  ::_exit(out_of_memory_seen ? kOutOfMemory : kWalked);
}

std::string signal_text(int sig) {
  const char* name = sigabbrev_np(sig);
  return name != nullptr ? fmt::format("signal {}, SIG{}", sig, name) : fmt::format("signal {}", sig);
}

std::string bytes_text(uint64_t bytes) {
  if (bytes >= (1ULL << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ULL << 30));
  if (bytes >= (1ULL << 20)) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} KiB", bytes >> 10);
}

}  // namespace

void set_forked_read_setup(void (*setup)()) { g_forked_child_setup = setup; }

void read_all(const ResultsReader& in) {
  attempt([&] { (void)in.attr_string("experiment"); });
  attempt([&] { (void)in.status(); });
  attempt([&] {
    for (const auto& name : in.attr_names()) {
      attempt([&] { (void)in.attr_strings(name); });
      attempt([&] { (void)in.attr_int(name); });
      attempt([&] { (void)in.attr_double(name); });
    }
  });
  attempt([&] { (void)in.config(); });
  attempt([&] {
    for (const auto& group : in.metric_groups())
      for (const auto& name : in.metric_names(group)) attempt([&] { (void)in.metric(group, name); });
  });
  attempt([&] { (void)in.samples(); });
  attempt([&] {
    for (const auto& sample : in.attention_samples())
      attempt([&] {
        for (const auto& module : in.attention_modules(sample)) attempt([&] { (void)in.attention(sample, module); });
      });
  });
  attempt([&] { (void)declared_figures(in); });  // /figures, or the figures of an older layout
  int budget = 256;
  read_children(in, "", 0, budget);
}

ReadCheckLimits ReadCheckLimits::for_file(const std::string& path) {
  ReadCheckLimits limits;
  struct stat st {};
  const uint64_t size = ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  // A healthy file reads at disk speed with a few times its size in memory; the allowance is
  // generous so that a loaded machine never calls a good file damaged.
  limits.seconds = 60 + static_cast<int>(size / (8ULL << 20));
  limits.memory_bytes = (1ULL << 30) + 16 * size;
  if (const auto s = env::seconds("ATTNLAB_READ_CHECK_SECONDS", 1, 86400, /*whole=*/true)) {
    limits.seconds = static_cast<int>(*s);
  }
  return limits;
}

namespace {

/// This process's address-space limit (`ulimit -v`, the hard limit: the copy may raise its soft
/// one up to it) when it is below what the copy is allowed: a copy that runs out of memory or dies
/// under it says nothing about the file.
std::optional<uint64_t> cap_below_allowance(const ReadCheckLimits& limits) {
  rlimit as{};
  if (limits.memory_bytes == 0 || ::getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_max == RLIM_INFINITY) return std::nullopt;
  if (static_cast<uint64_t>(as.rlim_max) >= mapped_bytes() + limits.memory_bytes) return std::nullopt;
  return static_cast<uint64_t>(as.rlim_max);
}

/// `read` in a forked copy of this process, ended as check_readable describes. With `rethrow`, an
/// exception that ends `read` in the copy is thrown here again (same kind and message).
void in_child(const std::string& path, const ReadCheckLimits& limits, const std::function<bool()>& read,
              bool rethrow = false) {
  int fds[2] = {-1, -1};
  if (rethrow) {
    ATTNLAB_CHECK(::pipe2(fds, O_CLOEXEC) == 0, ResultsError,
                  "cannot check results file {} before reading it: pipe failed: {}", path, std::strerror(errno));
  }
  // Flushed so that the child's copy of the parent's stdio buffers cannot be written twice.
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    if (rethrow) ::close(fds[0]), ::close(fds[1]);
    throw ResultsError(
        fmt::format("cannot check results file {} before reading it: fork failed: {}", path, std::strerror(err)));
  }
  if (pid == 0) {
    if (rethrow) ::close(fds[0]);
    child(limits, read, parent, fds[1]);
  }
  if (rethrow) ::close(fds[1]);

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      const int err = errno;
      if (rethrow) ::close(fds[0]);
      throw ResultsError(
          fmt::format("cannot check results file {} before reading it: waitpid: {}", path, std::strerror(err)));
    }
  }
  std::string record;
  if (rethrow) record = forked::read_to_end(fds[0]);
  std::string what;
  if (WIFEXITED(status) && WEXITSTATUS(status) == kWalked) return;
  if (WIFEXITED(status) && WEXITSTATUS(status) == kThrew && !record.empty()) {
    // The read failed cleanly in the copy: the same error here, without reading again, since what
    // HDF5 does on a damaged file can differ between two processes (test
    // ResultsReadCheck.AReadThatFailedInTheCopyIsNotMadeHere).
    const std::string message = record.substr(1);
    if (record[0] == 'C') throw ConfigError(message);
    if (record[0] == 'D') throw DataError(message);
    if (record[0] == 'P') throw PluginError(message);
    if (record[0] == 'E') throw Error(message);
    throw ResultsError(message);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kOutOfMemory) {
    what = fmt::format("needed more than {} of memory to read it", bytes_text(limits.memory_bytes));
  } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
    what = fmt::format("did not finish reading it within {} s", limits.seconds);
  } else if (WIFSIGNALED(status)) {
    what = fmt::format("crashed reading it ({})", signal_text(WTERMSIG(status)));
  } else {
    what = fmt::format("crashed reading it (exit status {})", WEXITSTATUS(status));
  }
  if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)) {
    if (const auto cap = cap_below_allowance(limits)) {
      throw ResultsError(fmt::format(
          "results file {} could not be read within this process's memory limit (ulimit -v: {}, below what it "
          "maps plus the {} the read is allowed): HDF5 {} in a separate checking process. The file is not known to be damaged: "
          "raise the limit and read it again",
          path, bytes_text(*cap), bytes_text(limits.memory_bytes), what));
    }
  }
  if (const auto writer = WriterLock::holder(path)) {
    throw ResultsError(fmt::format(
        "results file {} is being written by a running run ({}) and its last flush cannot be read: HDF5 {} (in a "
        "separate checking process; try again after the next epoch)",
        path, WriterLock::who(writer), what));
  }
  throw ResultsError(fmt::format(
      "results file {} is damaged: HDF5 {} (in a separate checking process; nothing was read from it)", path, what));
}

}  // namespace

void check_readable(const std::string& path, const ReadCheckLimits& limits) {
  in_child(path, limits, [&] {
    // HDF5's failures depend on what it read before (its metadata cache): the commands' own
    // reads first, in their order, then the walk reaches what they did not.
    try {
      read_all(ResultsReader(path, ReadCheck::none));
    } catch (const std::exception& e) {
      if (out_of_memory(e)) return true;
    }
    return walk_file(path, limits.memory_bytes);
  });
}

void rehearse_read(const std::string& path, const std::function<void()>& read) {
  // An exception that ends the read in the child is thrown here (kind and message) and the read
  // is not made; a failed allocation is reported as the memory limit.
  in_child(
      path, ReadCheckLimits::for_file(path),
      [&] {
        read();
        return false;
      },
      /*rethrow=*/true);
}

}  // namespace attnlab::results
