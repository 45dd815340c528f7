#pragma once
// Small dataset files for tests: zip archives (libzip), gzip files (zlib) and fra.txt text in manythings.org's format.
#include <gtest/gtest.h>
#include <zip.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <system_error>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace attnlab::testutil {

/// Writes `content` to `path`, creating its folder.
inline void write_file(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
}

/// Whether `dir` holds a partial download (data::ensure_file's `<name>.part-XXXXXXXX`).
inline bool has_part_files(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().filename().string().find(".part-") != std::string::npos) return true;
  }
  return false;
}

/// Writes a zip archive holding `members` (name, content), creating its folder.
inline void write_zip(const std::filesystem::path& path, const std::vector<std::pair<std::string, std::string>>& members) {
  std::filesystem::create_directories(path.parent_path());
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  ASSERT_NE(z, nullptr) << "zip_open error " << err;
  for (const auto& [name, content] : members) {
    zip_source_t* src = zip_source_buffer(z, content.data(), content.size(), 0);
    ASSERT_NE(src, nullptr);
    ASSERT_GE(zip_file_add(z, name.c_str(), src, ZIP_FL_ENC_UTF_8), 0) << zip_strerror(z);
  }
  ASSERT_EQ(zip_close(z), 0);
}

/// Writes `content` gzip-compressed to `path`, creating its folder.
inline void write_gzip(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, content.data(), static_cast<unsigned>(content.size())), static_cast<int>(content.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
}

/// A fra.txt of `lines` English<TAB>French lines, the first "Go.<TAB>Va !" as in every packaging;
/// with `attribution`, each line has the third column of newer manythings.org files.
inline std::string fra_text(int lines, bool attribution) {
  static const char* const pairs[] = {"Go.\tVa !", "Hi.\tSalut !", "Run!\tCours !", "Who?\tQui ?",
                                      "Wow!\tÇa alors !", "I'm home.\tJe suis chez moi.", "I won!\tJ'ai gagné !"};
  std::string text;
  for (int i = 0; i < lines; ++i) {
    text += pairs[i % 7];
    if (attribution) text += fmt::format("\tCC-BY 2.0 (France) Attribution: tatoeba.org #{} (CM) & #{} (sacredceltic)", i, i + 1);
    text += '\n';
  }
  return text;
}

}  // namespace attnlab::testutil
