// Fuzz target: the dataset file readers (data::read_text_file for .gz and plain files,
// data::list_zip_members and data::read_zip_member for .zip), as fetch/dataset code calls them.
//
// Input: the bytes of a file, written as in.gz, in.zip and in.txt and read by each reader.
// Properties: a corrupt, truncated or foreign archive is a DataError naming the file; a plain
// file reads back byte for byte; every listed zip member can be asked for by name.
#include <attnlab/data/fetch.hpp>
#include <attnlab/error.hpp>

#include <cstdint>
#include <string>

#include "common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto& scratch = fuzz::scratch();
  scratch.clear();

  const std::string gz = scratch.write("in.gz", data, size);
  try {
    (void)attnlab::data::read_text_file(gz);
  } catch (const attnlab::DataError&) {
  }

  const std::string txt = scratch.write("in.txt", data, size);
  if (attnlab::data::read_text_file(txt) != std::string(reinterpret_cast<const char*>(data), size))
    fuzz::fail("read_text_file did not read a plain file back as written");

  const std::string zip = scratch.write("in.zip", data, size);
  try {
    const auto members = attnlab::data::list_zip_members(zip);
    for (size_t i = 0; i < members.size() && i < 16; ++i) {
      try {
        (void)attnlab::data::read_zip_member(zip, members[i]);
      } catch (const attnlab::DataError&) {
        // a member whose data is corrupt or truncated
      }
    }
    bool listed = false;
    for (const auto& m : members) listed = listed || m == "no such member";
    if (!listed) {
      (void)attnlab::data::read_zip_member(zip, "no such member");
      fuzz::fail("read_zip_member found a member that is not in the archive");
    }
  } catch (const attnlab::DataError&) {
  }
  return 0;
}
