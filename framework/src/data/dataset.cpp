// The Dataset base: split names, moving batches to a device, and the text hooks' defaults; the
// key functions of the optional interfaces SequenceLabels and LanguageModelData.
#include <attnlab/data/dataset.hpp>
#include <attnlab/data/labels.hpp>
#include <attnlab/data/language_model.hpp>
#include <attnlab/error.hpp>

namespace attnlab::data {

SequenceLabels::~SequenceLabels() = default;
LanguageModelData::~LanguageModelData() = default;

const char* split_name(Split s) {
  switch (s) {
    case Split::Train:
      return "train";
    case Split::Val:
      return "val";
    case Split::Test:
      return "test";
  }
  return "unknown";
}

namespace {
/// A non-blocking copy from pageable host memory is synchronous for the host; from pinned memory it
/// is queued on the stream, so the host goes on launching kernels (torch's caching host allocator
/// keeps the pinned block alive until the copy has run).
torch::Tensor move(const torch::Tensor& t, torch::Device device, bool non_blocking) {
  if (!t.defined() || t.device() == device) return t;
  if (non_blocking && device.is_cuda() && t.device().is_cpu() && !t.is_pinned()) {
    return t.pin_memory().to(device, /*non_blocking=*/true);
  }
  return t.to(device, non_blocking);
}
}  // namespace

Batch Batch::to(torch::Device device, bool non_blocking) const {
  Batch b;
  b.src = move(src, device, non_blocking);
  b.src_valid_lens = move(src_valid_lens, device, non_blocking);
  b.tgt_in = move(tgt_in, device, non_blocking);
  b.tgt_out = move(tgt_out, device, non_blocking);
  b.tgt_valid_lens = move(tgt_valid_lens, device, non_blocking);
  return b;
}

Batch pad_to_bucket(const Batch& b, int64_t rows, int64_t multiple, int64_t pad_id) {
  ATTNLAB_CHECK(multiple >= 1 && rows >= 0, DataError, "pad_to_bucket: multiple must be >= 1 and rows >= 0");
  const bool decoder_only = !b.src.defined();  // Batch's decoder-only layout: the target side alone
  ATTNLAB_CHECK(b.tgt_in.defined() && b.tgt_in.dim() == 2 && (decoder_only || b.src.dim() == 2), DataError,
                "pad_to_bucket: expects a token batch (src [B, S] or none, tgt [B, T]), found src of {} and tgt_in "
                "of {} dimensions",
                decoder_only ? 0 : b.src.dim(), b.tgt_in.defined() ? b.tgt_in.dim() : 0);
  const auto up = [&](int64_t n) { return (n + multiple - 1) / multiple * multiple; };
  const int64_t B = b.size(), R = std::max(B, rows);
  const int64_t S = decoder_only ? 0 : b.src.size(1), T = b.tgt_in.size(1), S2 = up(S), T2 = up(T);
  if (R == B && S2 == S && T2 == T) return b;
  auto grow = [&](const torch::Tensor& t, int64_t cols) {  // [B, n] -> [R, cols] of pad
    auto out = torch::full({R, cols}, pad_id, t.options());
    out.narrow(0, 0, B).narrow(1, 0, t.size(1)).copy_(t);
    return out;
  };
  auto lengths = [&](const torch::Tensor& t, int64_t extra) {  // [B] -> [R], the new rows `extra`
    auto out = torch::full({R}, extra, t.options());
    out.narrow(0, 0, B).copy_(t);
    return out;
  };
  Batch p;
  if (!decoder_only) {
    p.src = grow(b.src, S2);
    p.src_valid_lens = lengths(b.src_valid_lens, 1);
  }
  p.tgt_in = grow(b.tgt_in, T2);
  p.tgt_out = grow(b.tgt_out, T2);
  p.tgt_valid_lens = lengths(b.tgt_valid_lens, 0);
  return p;
}

Batch Dataset::encode_sources(const std::vector<std::string>& sentences) const {
  throw DataError(fmt::format(
      "dataset does not support text: it cannot encode {} source sentence(s) (only translation datasets can)",
      sentences.size()));
}

std::vector<std::string> Dataset::source_tokens(const std::string& sentence) const {
  throw DataError(fmt::format("dataset does not support text: it cannot tokenize the sentence '{}'", sentence));
}

std::vector<std::string> Dataset::raw_sources(Split split) const {
  throw DataError(
      fmt::format("dataset is not a text dataset: it has no raw source sentences for split '{}'", split_name(split)));
}

std::vector<std::string> Dataset::raw_targets(Split split) const {
  throw DataError(
      fmt::format("dataset is not a text dataset: it has no raw target sentences for split '{}'", split_name(split)));
}

std::string Dataset::decode_target(const std::vector<int64_t>& ids) const {
  // Generic for any dataset with a target vocabulary: tokens up to <eos>, joined with spaces
  // (d2l's translation loop).
  const Vocab* vocab = tgt_vocab();
  ATTNLAB_CHECK(vocab != nullptr, DataError,
                "dataset does not support text: it has no target vocabulary to decode {} id(s) with", ids.size());
  std::string out;
  bool first = true;
  for (int64_t id : ids) {
    const std::string& token = vocab->token(id);
    if (token == "<eos>") break;
    if (!first) out += ' ';
    out += token;
    first = false;
  }
  return out;
}

}  // namespace attnlab::data
