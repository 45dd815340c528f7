#pragma once
// What the dataset plugins share about the corpora they fetch: where each file comes from and the
// checksums it must have (one copy of datasets/manifest.tsv's values; fra_eng's and multi30k's
// tests check them against it), and how a file is read into text or lines. fra_eng and multi30k
// read these corpora as translation pairs, `text` reads one side of them as a character stream:
// the same files, the same cache folder under the data dir, no second download. Header-only,
// included by relative path (plugins/dataset/common has no CMakeLists.txt, so it is not a plugin
// of its own).
#include <attnlab/data/dataset.hpp>
#include <attnlab/data/fetch.hpp>
#include <attnlab/data/text.hpp>
#include <attnlab/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace attnlab::datasets {

/// A text file's lines: split on '\n' (a final newline ends the last line; a '\r' before a '\n'
/// dropped, so CRLF files read as LF ones).
inline std::vector<std::string> text_lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    size_t stop = end;
    if (stop > start && text[stop - 1] == '\r') --stop;
    out.emplace_back(text, start, stop - start);
    start = end + 1;
  }
  return out;
}

namespace fra_eng {

inline constexpr const char* kRelPath = "fra-eng/fra-eng.zip";
/// The sources, in the order tried: d2l's stable copy, then manythings.org (changes over time).
inline constexpr const char* kD2lUrl = "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip";
inline constexpr const char* kManythingsUrl = "https://www.manythings.org/anki/fra-eng.zip";
/// The accepted packagings: d2l's zip (the SHA-1 d2l checks) and the 2019 snapshot in the mirror.
inline constexpr const char* kD2lSha1 = "94646ad1522d915e7b0f9296181140edcf86a4f5";
inline constexpr const char* kSha256 = "161c93f18da3a7e6df611ed961426613260de8af06ccf8c79c977afe5135ac44";
inline constexpr const char* kMember = "fra-eng/fra.txt";

/// The zip member holding the pairs: fra-eng/fra.txt, else any "*fra.txt" outside __MACOSX/.
inline std::string pairs_member(const std::string& zip_path) {
  const auto names = data::list_zip_members(zip_path);
  if (std::find(names.begin(), names.end(), kMember) != names.end()) return kMember;
  for (const auto& n : names) {
    const bool mac = n.rfind("__MACOSX/", 0) == 0;
    if (!mac && n.size() >= 7 && n.compare(n.size() - 7, 7, "fra.txt") == 0) return n;
  }
  throw DataError(fmt::format("zip archive {} has no fra.txt member (outside __MACOSX/); it holds: {}", zip_path,
                              fmt::join(names, ", ")));
}

/// The text of the pairs member of the zip at `zip_path`, checked to be UTF-8 (a DataError naming
/// "<zip>:<member>:<line>" otherwise).
inline std::string read_pairs(const std::string& zip_path) {
  const std::string member = pairs_member(zip_path);
  std::string text = data::read_zip_member(zip_path, member);
  data::require_utf8(text, zip_path + ":" + member);  // "fra-eng.zip:fra-eng/fra.txt:17: invalid UTF-8 ..."
  return text;
}

/// One column of fra-eng's tab-separated pairs (0 English, 1 French), one line a pair; lines
/// without a tab are no pair.
inline std::vector<std::string> pairs_column(const std::string& pairs_text, size_t column) {
  std::vector<std::string> out;
  for (const auto& line : text_lines(pairs_text)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    if (column == 0) {
      out.push_back(line.substr(0, tab));
    } else {
      const size_t end = line.find('\t', tab + 1);
      out.push_back(line.substr(tab + 1, end == std::string::npos ? std::string::npos : end - tab - 1));
    }
  }
  return out;
}

}  // namespace fra_eng

namespace multi30k {

/// Upstream folders, in the order tried: GitHub's raw view, then the raw.githubusercontent.com host it
/// redirects to (the same files, verified by the same pinned SHA-256 sums).
inline constexpr const char* kUrlBase = "https://github.com/multi30k/dataset/raw/master/data/task1/raw";
inline constexpr const char* kUrlBase2 = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw";
inline constexpr const char* kFolder = "multi30k";

/// File stem of a split: "train", "val", "test_2016_flickr".
inline const char* file_stem(data::Split split) {
  switch (split) {
    case data::Split::Train:
      return "train";
    case data::Split::Val:
      return "val";
    case data::Split::Test:
      return "test_2016_flickr";
  }
  return "unknown";
}

/// Pinned SHA-256 of multi30k/<stem>.<lang>.gz (datasets/manifest.tsv); DataError for an unknown file.
inline std::string sha256_of(const std::string& file_name) {
  static const std::map<std::string, std::string> sums = {
      {"test_2016_flickr.de.gz", "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8"},
      {"test_2016_flickr.en.gz", "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9"},
      {"test_2016_flickr.fr.gz", "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90"},
      {"train.de.gz", "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6"},
      {"train.en.gz", "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f"},
      {"train.fr.gz", "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c"},
      {"val.de.gz", "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a"},
      {"val.en.gz", "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28"},
      {"val.fr.gz", "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9"},
  };
  auto it = sums.find(file_name);
  ATTNLAB_CHECK(it != sums.end(), DataError, "multi30k: no pinned checksum for {} (languages: de, en, fr)",
                file_name);
  return it->second;
}

/// The lines of multi30k/<stem of split>.<lang>.gz under `data_dir`, fetched when missing (the
/// mirror, then each of `url_bases`), checked against its pinned SHA-256 when `verify`, and checked
/// to be UTF-8 ("<dir>/multi30k/val.en.gz:17: invalid UTF-8 ..."). `path` is set to where it was read.
inline std::vector<std::string> read_lines(data::Split split, const std::string& lang, const std::string& data_dir,
                                           const std::vector<std::string>& url_bases, bool verify,
                                           std::string& path) {
  const std::string name = fmt::format("{}.{}.gz", file_stem(split), lang);
  const std::string sha = sha256_of(name);
  std::vector<std::string> urls;
  for (const auto& base : url_bases) urls.push_back(fmt::format("{}/{}", base, name));
  path = data::ensure_file(
      {fmt::format("{}/{}", kFolder, name), urls, verify ? std::vector{sha} : std::vector<std::string>{}}, data_dir);
  const std::string text = data::read_text_file(path);
  data::require_utf8(text, path);
  return text_lines(text);
}

}  // namespace multi30k

}  // namespace attnlab::datasets
