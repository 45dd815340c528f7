#include "cli/report/page.hpp"

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

#include "cli/report/assets.hpp"

namespace attnlab::cli::report {
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
  out.reserve(data.size() + assets::vega_bundle().size() + assets::page_script().size() + 4096);
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

void write_atomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp-XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  ATTNLAB_CHECK(fd >= 0, Error, "report: cannot create a temporary file beside {}: {}", path, std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(fmt::format("report: cannot write {}: {}", tmp, why));
    }
    done += static_cast<size_t>(n);
  }
  // mkstemp makes the file 0600; a page is for reading as any other output file is.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  const bool ok = ::fchmod(fd, 0666 & ~mask) == 0 && ::fsync(fd) == 0;
  const std::string why = ok ? "" : std::strerror(errno);
  if (::close(fd) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = why.empty() ? std::strerror(errno) : why;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("report: cannot write {}: {}", path, reason));
  }
}

}  // namespace attnlab::cli::report
