// libcurl downloads for ensure_file: each attempt appends to the partial file, asking the server
// for the rest (CURLOPT_RESUME_FROM_LARGE); a server that ignores the range restarts it from zero.
#include "data/download.hpp"

#include <attnlab/error.hpp>

#include <curl/curl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

namespace attnlab::data::detail {
namespace fs = std::filesystem;

namespace {

void curl_init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    ATTNLAB_CHECK(rc == CURLE_OK, DataError, "libcurl initialisation failed: {}", curl_easy_strerror(rc));
  });
}

size_t write_to_file(char* data, size_t size, size_t count, void* user) {
  return std::fwrite(data, size, count, static_cast<std::FILE*>(user)) * size;
}

/// "fra-eng/fra-eng.zip: 3.1 of 6.0 MB" on stderr, redrawn per whole percent, for large files.
struct Progress {
  std::string what;
  curl_off_t offset = 0;  // bytes already there before this transfer
  int shown = -1;         // last percent drawn (-1: nothing drawn yet)

  static int callback(void* self, curl_off_t dltotal, curl_off_t dlnow, curl_off_t, curl_off_t) {
    auto* p = static_cast<Progress*>(self);
    const curl_off_t total = p->offset + dltotal, now = p->offset + dlnow;
    if (dltotal <= 0 || total < kProgressMinBytes) return 0;
    const int pct = static_cast<int>(100 * now / total);
    if (pct != p->shown) {
      p->shown = pct;
      std::fprintf(stderr, "\r%s: %.1f of %.1f MB (%d%%)", p->what.c_str(), static_cast<double>(now) / 1e6,
                   static_cast<double>(total) / 1e6, pct);
      std::fflush(stderr);
    }
    return 0;
  }
  ~Progress() {
    if (shown >= 0) std::fputc('\n', stderr);
  }
};

struct Outcome {
  bool ok = false;
  bool retry = false;  // a transient failure: worth another attempt
  std::string why;
};

/// Transient failures: the connection, a dropped or stalled transfer, a server error, a refused range.
bool transient(CURLcode rc, long status) {
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RANGE_ERROR:
      return true;
    case CURLE_HTTP_RETURNED_ERROR:
      return status >= 500 || status == 408 || status == 429;
    default:
      return false;
  }
}

/// One transfer of `url`, appended to `dest` from its current size.
Outcome transfer(const std::string& url, const fs::path& dest, const std::string& what) {
  std::error_code ec;
  const auto have = fs::exists(dest, ec) ? static_cast<curl_off_t>(fs::file_size(dest, ec)) : curl_off_t{0};
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(std::fopen(dest.c_str(), "ab"), &std::fclose);
  ATTNLAB_CHECK(out != nullptr, DataError, "cannot write {} (fetching {}): {}", dest.string(), what,
                std::strerror(errno));
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), &curl_easy_cleanup);
  ATTNLAB_CHECK(curl != nullptr, DataError, "libcurl could not create a handle to fetch {}", what);
  char errbuf[CURL_ERROR_SIZE] = {0};
  Progress progress{what, have};
  CURL* h = curl.get();
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &write_to_file);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, out.get());
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);  // give up after 60 s without data
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(h, CURLOPT_USERAGENT, kUserAgent);
  curl_easy_setopt(h, CURLOPT_RESUME_FROM_LARGE, have);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, &Progress::callback);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &progress);
  const CURLcode rc = curl_easy_perform(h);
  const bool flushed = std::fflush(out.get()) == 0;
  ATTNLAB_CHECK(flushed, DataError, "cannot write {} (fetching {}): {}", dest.string(), what, std::strerror(errno));
  if (rc == CURLE_OK) return {true, false, ""};
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  out.reset();
  if (rc == CURLE_RANGE_ERROR) fs::resize_file(dest, 0, ec);  // the server can't resume: start over
  return {false, transient(rc, status),
          fmt::format("{}{}", errbuf[0] ? errbuf : curl_easy_strerror(rc),
                      status >= 400 ? fmt::format(" (HTTP {})", status) : std::string())};
}

}  // namespace

void download(const std::string& url, const fs::path& dest, const RemoteFile& file) {
  curl_init_once();
  const int attempts = std::max(1, file.attempts);
  for (int attempt = 1;; ++attempt) {
    const Outcome o = transfer(url, dest, file.relpath);
    if (o.ok) return;
    if (!o.retry || attempt >= attempts) {
      throw DataError(fmt::format("download of {} from {} failed{}: {}", file.relpath, url,
                                  attempt > 1 ? fmt::format(" ({} attempts)", attempt) : std::string(), o.why));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(attempt) * file.backoff_ms));
  }
}

}  // namespace attnlab::data::detail
