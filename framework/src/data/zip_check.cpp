#include "data/zip_check.hpp"

#include <fmt/format.h>
#include <zip.h>

#include <memory>
#include <vector>

namespace attnlab::data {

std::string zip_damage(const std::string& path) {
  int err = 0;
  std::unique_ptr<zip_t, void (*)(zip_t*)> z(zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &err),
                                             [](zip_t* p) { zip_discard(p); });
  if (z == nullptr) {
    zip_error_t error;
    zip_error_init_with_code(&error, err);
    std::string why = fmt::format("not a consistent zip archive ({})", zip_error_strerror(&error));
    zip_error_fini(&error);
    return why;
  }
  std::vector<char> buf(size_t{1} << 20);
  const zip_int64_t n = zip_get_num_entries(z.get(), 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    const auto index = static_cast<zip_uint64_t>(i);
    const char* name = zip_get_name(z.get(), index, 0);
    const std::string member = name != nullptr ? name : fmt::format("#{}", i);
    std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> f(zip_fopen_index(z.get(), index, 0), &zip_fclose);
    if (f == nullptr) return fmt::format("its member '{}' cannot be opened ({})", member, zip_strerror(z.get()));
    zip_int64_t got = 0;
    while ((got = zip_fread(f.get(), buf.data(), buf.size())) > 0) {
    }
    if (got < 0) {
      const int code = zip_error_code_zip(zip_file_get_error(f.get()));
      return code == ZIP_ER_CRC
                 ? fmt::format("its member '{}' does not match its checksum: bytes changed after it was written",
                               member)
                 : fmt::format("its member '{}' cannot be read ({})", member, zip_file_strerror(f.get()));
    }
  }
  return "";
}

}  // namespace attnlab::data
