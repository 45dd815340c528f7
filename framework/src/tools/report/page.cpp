#include "tools/report/page.hpp"

#include <attnlab/error.hpp>
#include <attnlab/files.hpp>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "tools/report/assets.hpp"

namespace attnlab::tools::report {
namespace {

std::string folder_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string page_html(const std::string& title, const std::string& data) {
  std::string out;
  out.reserve(data.size() + assets::vega_bundle().size() + assets::page_script().size() + assets::heads_script().size() +
              4096);
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<meta name=\"generator\" content=\"attnlab runner report\">\n";
  out += fmt::format("<meta name=\"vega-version\" content=\"{}\">\n", html_escape(std::string(assets::vega_version())));
  out += "<title>" + html_escape(title) + "</title>\n<style>\n";
  out += assets::page_style();
  out +=
      "</style>\n</head>\n<body>\n<noscript>This page draws its charts with JavaScript; please enable it.</noscript>\n";
  out += "<main id=\"report\"></main>\n<script type=\"application/json\" id=\"attnlab-data\">";
  out += data;
  out += "</script>\n<script>\n";
  out += assets::vega_bundle();
  out += "\n</script>\n<script>\n";
  out += assets::heads_script();  // in the page script's element, before it: it registers what page.js calls
  out += "\n";
  out += assets::page_script();
  out += "\n</script>\n</body>\n</html>\n";
  return out;
}

std::string output_problem(const std::string& path) {
  if (path.empty()) return "the path is empty";
  if (auto why = files::problem(path, files::Want::FileToWrite); !why.empty()) return why;
  // `-o run.h5` (a slip for `-o run.html`) must not replace a results file with the page.
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    char head[8] = {};
    const bool hdf5 =
        std::fread(head, 1, sizeof head, f) == sizeof head && std::memcmp(head, "\x89HDF\r\n\x1a\n", 8) == 0;
    std::fclose(f);
    if (hdf5) return "it is an HDF5 file (a results file?), which the page would replace; give an .html path";
  }
  const auto dir = folder_of(path);
  if (auto why = files::problem(dir, files::Want::Directory); !why.empty()) return fmt::format("{}: {}", dir, why);
  if (::access(dir.c_str(), W_OK) != 0) return fmt::format("cannot write into {}: {}", dir, std::strerror(errno));
  return "";
}

namespace {

/// Writes all of `text` to `fd`; 0, or the errno of the write that failed.
int write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

/// Gives the unnamed file `fd` (O_TMPFILE) a fresh name beside `path`, which it returns. linkat
/// cannot replace a file, so the page is then renamed over the old one.
std::string name_unnamed(int fd, const std::string& path) {
  const std::string proc = fmt::format("/proc/self/fd/{}", fd);
  for (int i = 0;; ++i) {
    std::string name = fmt::format("{}.tmp-{}-{}", path, ::getpid(), i);
    if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) return name;
    if (errno != EEXIST || i == 100) {
      throw Error(
          fmt::format("report: cannot write {}: cannot name the finished page: {}", path, std::strerror(errno)));
    }
  }
}

}  // namespace

void write_atomically(const std::string& path, const std::string& text) {
  // The page is written into an unnamed file in the folder (O_TMPFILE), which gets a name only
  // once it is complete: a process killed while writing leaves nothing behind. A filesystem
  // without O_TMPFILE gets mkstemp's named temporary instead, removed on every error.
  std::string tmp;
  int fd = ::open(folder_of(path).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);  // the umask applies
  const bool unnamed = fd >= 0;
  if (!unnamed && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    tmp = path + ".tmp-XXXXXX";
    fd = ::mkstemp(tmp.data());
  }
  ATTNLAB_CHECK(fd >= 0, Error, "report: cannot create a temporary file beside {}: {}", path, std::strerror(errno));
  const auto fail = [&](const std::string& what, int err) {
    ::close(fd);
    if (!tmp.empty()) ::unlink(tmp.c_str());
    throw Error(fmt::format("report: cannot write {}: {}", what, std::strerror(err)));
  };
  if (const int err = write_all(fd, text)) fail(unnamed ? path : tmp, err);
  if (!unnamed) {
    // mkstemp makes the file 0600; a page is for reading as any other output file is.
    const mode_t mask = ::umask(0);
    ::umask(mask);
    if (::fchmod(fd, 0666 & ~mask) != 0) fail(path, errno);
  }
  if (::fsync(fd) != 0) fail(path, errno);
  if (unnamed) {
    try {
      tmp = name_unnamed(fd, path);
    } catch (...) {
      ::close(fd);
      throw;
    }
  }
  if (::close(fd) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("report: cannot write {}: {}", path, std::strerror(err)));
  }
}

}  // namespace attnlab::tools::report
