// safetensors files read in place (safetensors.hpp): the header checked whole before any tensor is
// handed out, so a damaged or lying file is one DataError naming it, never a crash or a wrong view.
#include <attnlab/nn/safetensors.hpp>

#include <attnlab/error.hpp>
#include <attnlab/files.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

// The header length and every tensor's bytes are little-endian in the file; a view reinterprets them
// in place, which is only right on a little-endian host.
static_assert(std::endian::native == std::endian::little, "safetensors views need a little-endian host");

namespace attnlab::safetensors {
namespace {

using json = nlohmann::json;

// The Rust reference implementation refuses headers above 100 MB; so do we, before parsing one.
constexpr uint64_t kMaxHeader = 100'000'000;
// An index file is a map of names: far below this.
constexpr uint64_t kMaxIndex = 64u << 20;

struct Dtype {
  const char* name;
  torch::ScalarType type;
  uint64_t size;
};
constexpr Dtype kDtypes[] = {
    {"F64", torch::kFloat64, 8}, {"F32", torch::kFloat32, 4}, {"F16", torch::kFloat16, 2},
    {"BF16", torch::kBFloat16, 2}, {"I64", torch::kInt64, 8}, {"I32", torch::kInt32, 4},
    {"I16", torch::kInt16, 2},   {"I8", torch::kInt8, 1},     {"U8", torch::kUInt8, 1},
    {"BOOL", torch::kBool, 1},
};

const Dtype* dtype_named(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

std::string dtype_list() {
  std::vector<std::string> names;
  for (const auto& d : kDtypes) names.emplace_back(d.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// What a JSON value is, for "... but it is <kind>".
const char* kind_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a fractional number";
    default: return "not a JSON value";
  }
}

/// The parser's message without its "[json.exception.parse_error.101] " tag: "parse error at line
/// 1, column 17: syntax error while parsing value - unexpected end of input; ...".
std::string parser_message(const json::exception& e) {
  std::string what = e.what();
  if (what.rfind("[json.exception.", 0) == 0)
    if (auto end = what.find("] "); end != std::string::npos) what.erase(0, end + 2);
  return what;
}

/// The read-only mapping of a whole file, unmapped when the last File or view holding it goes.
struct Mapping {
  const uint8_t* base = nullptr;
  size_t size = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (base) ::munmap(const_cast<uint8_t*>(base), size);
  }
};

std::shared_ptr<Mapping> map_file(const std::string& path) {
  if (auto why = files::problem(path, files::Want::File); !why.empty())
    throw DataError(fmt::format("{}: cannot read safetensors file: {}", path, why));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(fmt::format("{}: cannot open safetensors file: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw DataError(fmt::format("{}: cannot stat safetensors file: {}", path, std::strerror(err)));
  }
  auto m = std::make_shared<Mapping>();
  m->size = static_cast<size_t>(st.st_size);
  if (m->size < 8) {
    ::close(fd);
    throw DataError(fmt::format("{}: {} bytes, shorter than the 8-byte header length a safetensors file starts with",
                                path, m->size));
  }
  void* p = ::mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) throw DataError(fmt::format("{}: cannot map safetensors file: {}", path, std::strerror(err)));
  m->base = static_cast<const uint8_t*>(p);
  return m;
}

/// The entry's integer field as uint64: a non-negative JSON integer, else DataError saying what.
uint64_t unsigned_of(const json& v, const std::string& where) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() < 0) throw DataError(fmt::format("{} is negative ({})", where, v.dump()));
  if (v.is_number_integer()) return static_cast<uint64_t>(v.get<int64_t>());
  throw DataError(fmt::format("{} must be a non-negative integer, but it is {}", where, kind_of(v)));
}

/// One header entry checked alone (its fields, its dtype, shape and byte count); DataError without
/// the file's name, which the caller adds.
TensorInfo entry_of(const std::string& name, const json& e, uint64_t data_size) {
  const std::string t = fmt::format("tensor '{}'", name);
  if (!e.is_object()) throw DataError(fmt::format("{} must be an object, but it is {}", t, kind_of(e)));
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!e.contains(key)) throw DataError(fmt::format("{} has no \"{}\"", t, key));
  TensorInfo info;
  info.name = name;
  const auto& dtype = e["dtype"];
  if (!dtype.is_string()) throw DataError(fmt::format("{}: \"dtype\" must be a string, but it is {}", t, kind_of(dtype)));
  info.dtype_name = dtype.get<std::string>();
  const Dtype* d = dtype_named(info.dtype_name);
  if (!d)
    throw DataError(fmt::format("{} has dtype '{}', which attnlab does not read (it reads {})", t, info.dtype_name,
                                dtype_list()));
  info.dtype = d->type;

  const auto& shape = e["shape"];
  if (!shape.is_array()) throw DataError(fmt::format("{}: \"shape\" must be an array, but it is {}", t, kind_of(shape)));
  for (size_t i = 0; i < shape.size(); ++i) {
    const auto& dim = shape[i];
    if (dim.is_number_integer() && !dim.is_number_unsigned() && dim.get<int64_t>() < 0)
      throw DataError(fmt::format("{} has a negative dimension: shape {}", t, shape.dump()));
    const uint64_t n = unsigned_of(dim, fmt::format("{}: shape[{}]", t, i));
    if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw DataError(fmt::format("{} has dimension {} = {}, more than a tensor may have", t, i, n));
    info.shape.push_back(static_cast<int64_t>(n));
  }
  // The byte count as the shape and dtype say, checked for overflow: a lying header's huge
  // dimensions must not wrap around to a product that matches its offsets.
  uint64_t bytes = d->size;
  bool overflow = false;
  if (std::find(info.shape.begin(), info.shape.end(), 0) != info.shape.end()) {
    bytes = 0;
  } else {
    for (auto n : info.shape) overflow = overflow || __builtin_mul_overflow(bytes, static_cast<uint64_t>(n), &bytes);
  }

  const auto& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2)
    throw DataError(fmt::format("{}: \"data_offsets\" must be an array of two integers [begin, end], but it is {}",
                                t, off.is_array() ? fmt::format("an array of {}", off.size()) : kind_of(off)));
  info.begin = unsigned_of(off[0], fmt::format("{}: data_offsets[0]", t));
  info.end = unsigned_of(off[1], fmt::format("{}: data_offsets[1]", t));
  if (info.end < info.begin)
    throw DataError(fmt::format("{} has reversed data_offsets [{}, {}] (end before begin)", t, info.begin, info.end));
  if (info.end > data_size)
    throw DataError(fmt::format("{} has data_offsets [{}, {}], past the end of the data section ({} bytes)", t,
                                info.begin, info.end, data_size));
  if (overflow || bytes != info.end - info.begin)
    throw DataError(fmt::format("{} has shape [{}] of {} = {} bytes, but its data_offsets [{}, {}] hold {}", t,
                                fmt::join(info.shape, ", "), info.dtype_name,
                                overflow ? std::string("more than 2^64") : std::to_string(bytes), info.begin,
                                info.end, info.end - info.begin));
  return info;
}

}  // namespace

struct File::Impl {
  std::string path;
  std::shared_ptr<Mapping> map;
  const uint8_t* data = nullptr;  // the data section: map->base + 8 + header length
  std::vector<TensorInfo> tensors;
  std::map<std::string, size_t> index;  // name -> position in tensors
  std::map<std::string, std::string> metadata;

  void parse_header(uint64_t data_size, const json& header);
};

void File::Impl::parse_header(uint64_t data_size, const json& header) {
  if (!header.is_object())
    throw DataError(fmt::format("the header must be a JSON object, but it is {}", kind_of(header)));
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object())
        throw DataError(fmt::format("\"__metadata__\" must be an object of strings, but it is {}", kind_of(value)));
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string())
          throw DataError(fmt::format("\"__metadata__\" must map names to strings, but '{}' is {}", k, kind_of(v)));
        metadata.emplace(k, v.get<std::string>());
      }
      continue;
    }
    tensors.push_back(entry_of(key, value, data_size));
  }
  // In the order of their bytes, which must tile the data section exactly: no overlap, no gap.
  std::sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  uint64_t covered = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    if (t.begin < covered)
      throw DataError(fmt::format("tensor '{}' (data_offsets [{}, {}]) overlaps tensor '{}' (data_offsets [{}, {}])",
                                  t.name, t.begin, t.end, tensors[i - 1].name, tensors[i - 1].begin,
                                  tensors[i - 1].end));
    if (t.begin > covered)
      throw DataError(fmt::format("bytes [{}, {}) of the data section belong to no tensor (the next is '{}')", covered,
                                  t.begin, t.name));
    covered = t.end;
    index.emplace(t.name, i);
  }
  if (covered != data_size)
    throw DataError(fmt::format("bytes [{}, {}) at the end of the data section belong to no tensor", covered,
                                data_size));
}

File::File(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->map = map_file(path);
  const auto& m = *impl_->map;
  uint64_t header_len = 0;
  std::memcpy(&header_len, m.base, 8);  // little-endian, as the host (checked above)
  const uint64_t room = m.size - 8;
  if (header_len > room)
    throw DataError(fmt::format("{}: header length {} runs past the end of the file ({} bytes, so at most {})", path,
                                header_len, m.size, room));
  if (header_len > kMaxHeader)
    throw DataError(fmt::format("{}: header length {} is more than the {} bytes safetensors allows", path, header_len,
                                kMaxHeader));
  const auto* begin = reinterpret_cast<const char*>(m.base + 8);
  json header;
  try {
    header = json::parse(begin, begin + header_len);
  } catch (const json::exception& e) {
    // The parser's message says where in the header it stopped (line and column).
    throw DataError(fmt::format("{}: the header is not JSON: {}", path, parser_message(e)));
  }
  impl_->data = m.base + 8 + header_len;
  try {
    impl_->parse_header(room - header_len, header);
  } catch (const DataError& e) {
    throw DataError(fmt::format("{}: {}", path, e.what()));
  }
}

File::~File() = default;
File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;

const std::string& File::path() const { return impl_->path; }
const std::vector<TensorInfo>& File::tensors() const { return impl_->tensors; }
const std::map<std::string, std::string>& File::metadata() const { return impl_->metadata; }

const TensorInfo* File::find(const std::string& name) const {
  auto it = impl_->index.find(name);
  return it == impl_->index.end() ? nullptr : &impl_->tensors[it->second];
}

torch::Tensor File::view(const std::string& name) const {
  const TensorInfo* t = find(name);
  ATTNLAB_CHECK(t, DataError, "{}: no tensor '{}' (the file has {} tensors)", impl_->path, name,
                impl_->tensors.size());
  const auto options = torch::TensorOptions().dtype(t->dtype);
  if (t->begin == t->end) return torch::empty(t->shape, options);  // nothing to view, and no pointer to check
  auto* ptr = const_cast<uint8_t*>(impl_->data + t->begin);  // from_blob wants void*; never written
  // The tensor holds the mapping, so a view outliving its File stays valid.
  auto keep = impl_->map;
  auto tensor = torch::from_blob(ptr, t->shape, [keep](void*) {}, options);
  // The format aligns nothing: a tensor whose first byte is not on its element's boundary is
  // copied, so no kernel reads misaligned elements.
  if (reinterpret_cast<uintptr_t>(ptr) % tensor.element_size() != 0) return tensor.clone();
  return tensor;
}

void File::release(const std::string& name, int64_t first_row, int64_t rows) const {
  const TensorInfo* t = find(name);
  if (t == nullptr || t->begin == t->end) return;
  uint64_t begin = t->begin, end = t->end;
  if (rows > 0 && !t->shape.empty() && t->shape.front() > 0) {
    const uint64_t row_bytes = (t->end - t->begin) / static_cast<uint64_t>(t->shape.front());
    begin = std::min(t->end, t->begin + static_cast<uint64_t>(std::max<int64_t>(first_row, 0)) * row_bytes);
    end = std::min(t->end, begin + static_cast<uint64_t>(rows) * row_bytes);
  }
  // Whole pages inside those bytes only, so a neighbour's pages stay as they are.
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<uintptr_t>(impl_->data + begin);
  const auto last = reinterpret_cast<uintptr_t>(impl_->data + end);
  const uintptr_t from = (first + page - 1) / page * page, to = last / page * page;
  if (to > from) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);  // advice: failure is harmless
}

Weights::Weights(const std::string& path) : path_(path) {
  std::vector<std::string> shards;  // the files to map, in this order
  std::string index_path;
  if (files::problem(path, files::Want::File).empty()) {
    shards.push_back(path);
  } else if (files::problem(path, files::Want::Directory).empty()) {
    const std::string single = path + "/model.safetensors";
    index_path = path + "/model.safetensors.index.json";
    if (files::problem(single, files::Want::File).empty()) {
      shards.push_back(single);
      index_path.clear();
    } else if (!files::problem(index_path, files::Want::File).empty()) {
      throw DataError(fmt::format("{}: no weights in this folder (neither model.safetensors nor "
                                  "model.safetensors.index.json)",
                                  path));
    }
  } else {
    throw DataError(fmt::format("{}: cannot read weights: {} (weights are a .safetensors file, or a folder with "
                                "model.safetensors or model.safetensors.index.json)",
                                path, files::problem(path, files::Want::File)));
  }

  std::vector<std::pair<std::string, std::string>> listed;  // (tensor, shard) as the index says
  if (!index_path.empty()) {
    std::string text;
    if (auto why = files::read_whole(index_path, kMaxIndex, "a safetensors index", text); !why.empty())
      throw DataError(fmt::format("{}: {}", index_path, why));
    json index;
    try {
      index = json::parse(text);
    } catch (const json::exception& e) {
      throw DataError(fmt::format("{}: not JSON: {}", index_path, parser_message(e)));
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      throw DataError(fmt::format("{}: has no \"weight_map\" object (tensor name -> shard file)", index_path));
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string())
        throw DataError(fmt::format("{}: weight_map['{}'] must be a file name, but it is {}", index_path, name,
                                    kind_of(file)));
      const std::string shard = path + "/" + file.get<std::string>();
      if (std::find(shards.begin(), shards.end(), shard) == shards.end()) {
        if (auto why = files::problem(shard, files::Want::File); !why.empty())
          throw DataError(fmt::format("{}: names shard {} for tensor '{}', but {}: {}", index_path,
                                      file.get<std::string>(), name, shard, why));
        shards.push_back(shard);
      }
      listed.emplace_back(name, shard);
    }
  }

  for (const auto& shard : shards) {
    files_.push_back(std::make_unique<File>(shard));
    for (const auto& t : files_.back()->tensors()) {
      auto [it, fresh] = where_.emplace(t.name, files_.size() - 1);
      ATTNLAB_CHECK(fresh, DataError, "{}: tensor '{}' is in two shards: {} and {}", path, t.name,
                    files_[it->second]->path(), shard);
    }
  }
  for (const auto& [name, shard] : listed) {
    auto it = where_.find(name);
    ATTNLAB_CHECK(it != where_.end() && files_[it->second]->path() == shard, DataError,
                  "{}: names tensor '{}' in {}, which does not hold it", index_path, name, shard);
  }
}

std::vector<std::string> Weights::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, _] : where_) out.push_back(name);
  return out;
}

const TensorInfo* Weights::find(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? nullptr : files_[it->second]->find(name);
}

std::string Weights::file_of(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? std::string() : files_[it->second]->path();
}

torch::Tensor Weights::view(const std::string& name) const {
  auto it = where_.find(name);
  ATTNLAB_CHECK(it != where_.end(), DataError, "{}: no tensor '{}' (the weights have {} tensors)", path_, name,
                where_.size());
  return files_[it->second]->view(name);
}

void Weights::release(const std::string& name, int64_t first_row, int64_t rows) const {
  if (auto it = where_.find(name); it != where_.end()) files_[it->second]->release(name, first_row, rows);
}

uint64_t Weights::bytes() const {
  uint64_t total = 0;
  for (const auto& f : files_)
    for (const auto& t : f->tensors()) total += t.end - t.begin;
  return total;
}

}  // namespace attnlab::safetensors
