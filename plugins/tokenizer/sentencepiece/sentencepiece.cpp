// Tokenizer "sentencepiece": a SentencePiece BPE or unigram model learned from the training split
// (SentencePieceTrainer, default nmt_nfkc normalization), cached in the data dir as
//   <cache_dir>/spm-<model_type>-<vocab_size>-<key>.model
// where <key> is the first 16 hex digits of SHA-256(corpus lines, options), so the same corpus and
// options reuse the model and anything else trains a new one. decode = DecodePieces.
#include <attnlab/config/binding.hpp>
#include <attnlab/config/schema.hpp>
#include <attnlab/data/tokenizer.hpp>
#include <attnlab/error.hpp>
#include <attnlab/files.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <openssl/evp.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

using namespace attnlab;
namespace fs = std::filesystem;

struct SpmOptions {
  std::string model_type = "bpe";
  int64_t vocab_size = 8000;
  double character_coverage = 1.0;
  std::string model;  // a trained .model file to use instead of training ("" = train)
};

/// Incremental SHA-256 (OpenSSL EVP), lowercase hex.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    ATTNLAB_CHECK(ctx_ && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1, DataError,
                  "sentencepiece: OpenSSL could not start a SHA-256 digest");
  }
  void update(const std::string& s) { EVP_DigestUpdate(ctx_.get(), s.data(), s.size()); }
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    ATTNLAB_CHECK(EVP_DigestFinal_ex(ctx_.get(), digest, &len) == 1, DataError,
                  "sentencepiece: OpenSSL could not finish a SHA-256 digest");
    std::string out;
    for (unsigned int i = 0; i < len; ++i) out += fmt::format("{:02x}", digest[i]);
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

/// Feeds the in-memory corpus to SentencePieceTrainer (no temporary text file).
class CorpusIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit CorpusIterator(const std::vector<std::string>& corpus) : corpus_(corpus) {}
  bool done() const override { return i_ >= corpus_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return corpus_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& corpus_;
  size_t i_ = 0;
};

/// The largest model file read (models of a few hundred thousand pieces have tens of MB).
constexpr uint64_t kMaxModelBytes = uint64_t{1} << 30;

/// The model file's bytes: a regular file of at most kMaxModelBytes (`model: /dev/zero` or a FIFO
/// is refused by name, not read until std::bad_alloc or forever).
std::string read_file(const fs::path& path) {
  std::string bytes;
  const std::string why = files::read_whole(path.string(), kMaxModelBytes, "a SentencePiece model", bytes);
  ATTNLAB_CHECK(why.empty(), DataError, "sentencepiece: cannot read the model {}: {}", path.string(), why);
  return bytes;
}

/// Write `bytes` to a temporary name next to `path`, then rename (no partial model under the name).
void write_atomically(const fs::path& path, const std::string& bytes) {
  std::random_device rd;
  fs::path tmp = path;
  tmp += fmt::format(".part-{:08x}", rd());
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    ATTNLAB_CHECK(out.good(), DataError, "sentencepiece: cannot write the model {}: {}", tmp.string(),
                  std::strerror(errno));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw DataError(fmt::format("sentencepiece: cannot move the model into place at {}", path.string()));
  }
}

class SentencePiece final : public data::Tokenizer {
 public:
  /// place: where the options were written, for messages ("file:line:col (at 'dataset.tokenizer')").
  SentencePiece(SpmOptions options, std::string place) : opt_(std::move(options)), place_(std::move(place)) {}

  std::string name() const override { return "sentencepiece"; }

  bool train(const std::vector<std::string>& corpus, const std::string& cache_dir) override {
    if (!opt_.model.empty()) {
      load(read_file(opt_.model), opt_.model);
      return false;
    }
    ATTNLAB_CHECK(!corpus.empty(), DataError, "sentencepiece: cannot train on an empty corpus");
    const fs::path dir = cache_dir.empty() ? fs::path(".") : fs::path(cache_dir);
    const fs::path path = dir / fmt::format("spm-{}-{}-{}.model", opt_.model_type, opt_.vocab_size, cache_key(corpus));
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
      if (try_load(read_file(path), path.string())) return false;
      // An unreadable cached model (e.g. truncated by a crash) is replaced below.
    }
    fs::create_directories(dir, ec);
    ATTNLAB_CHECK(!ec, DataError, "sentencepiece: cannot create the model folder {}: {}", dir.string(), ec.message());
    const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
    const std::unordered_map<std::string, std::string> args{
        {"model_type", opt_.model_type},
        {"vocab_size", std::to_string(opt_.vocab_size)},
        {"character_coverage", fmt::format("{}", opt_.character_coverage)},
        {"num_threads", std::to_string(threads)},
        {"minloglevel", "2"},  // no INFO or WARNING lines on stderr: what goes wrong comes back as a status
    };
    CorpusIterator it(corpus);
    std::string model;
    const auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
    if (!status.ok()) throw_training_failed(status.ToString(), corpus.size());
    write_atomically(path, model);
    load(model, path.string());
    return true;
  }

  std::vector<std::string> encode(const std::string& text) const override {
    require_trained("encode");
    std::vector<std::string> pieces;
    const auto status = sp_.Encode(text, &pieces);
    ATTNLAB_CHECK(status.ok(), DataError, "sentencepiece: cannot encode '{}': {}", text, status.ToString());
    return pieces;
  }

  std::string decode(const std::vector<std::string>& tokens) const override {
    require_trained("decode");
    return sp_.DecodePieces(tokens);
  }

  std::vector<std::string> vocabulary() const override {
    require_trained("vocabulary");
    std::vector<std::string> pieces;
    for (int id = 0; id < sp_.GetPieceSize(); ++id) {
      if (!sp_.IsControl(id) && !sp_.IsUnknown(id) && !sp_.IsUnused(id)) pieces.push_back(sp_.IdToPiece(id));
    }
    return pieces;
  }

  std::string description() const override {
    return fmt::format("sentencepiece(model_type {}, vocab_size {}, character_coverage {}{})", opt_.model_type,
                       opt_.vocab_size, opt_.character_coverage,
                       model_path_.empty() ? std::string() : ", model " + model_path_);
  }

 private:
  /// The cache key: SHA-256 over the corpus lines and the options that change the model.
  std::string cache_key(const std::vector<std::string>& corpus) const {
    Sha256 h;
    h.update(fmt::format("attnlab-spm-v1\nmodel_type={}\nvocab_size={}\ncharacter_coverage={}\n", opt_.model_type,
                         opt_.vocab_size, opt_.character_coverage));
    for (const auto& line : corpus) {
      h.update(line);
      h.update("\n");
    }
    return h.hex().substr(0, 16);
  }

  bool try_load(const std::string& bytes, const std::string& where) {
    if (!sp_.LoadFromSerializedProto(bytes).ok()) return false;
    model_path_ = where;
    trained_ = true;
    return true;
  }

  void load(const std::string& bytes, const std::string& where) {
    ATTNLAB_CHECK(try_load(bytes, where), DataError, "sentencepiece: {} is not a SentencePiece model", where);
  }

  void require_trained(const char* what) const {
    ATTNLAB_CHECK(trained_, DataError, "sentencepiece: {}() called before train() (no model loaded)", what);
  }

  SpmOptions opt_;
  sentencepiece::SentencePieceProcessor sp_;
  bool trained_ = false;
  std::string model_path_;

  /// SentencePiece's status as one line of ours: its source file, line and condition dropped
  /// ("Internal: ./src/trainer_interface.cc(660) [(a) == (b)] Vocabulary size too high (200000).
  /// Please set it to a value <= 61818."), and a vocabulary too large for the corpus as the config
  /// error it is, naming the option and the largest size that works.
  [[noreturn]] void throw_training_failed(const std::string& status, size_t sentences) const {
    static const std::regex internals(R"(^\w+: \S+\.(cc|h)\(\d+\) (\[.*\] )?)");
    const std::string why = std::regex_replace(status, internals, "");
    std::smatch most;
    if (std::regex_search(why, most, std::regex(R"(Vocabulary size too high \((\d+)\).*<= (\d+))"))) {
      throw ConfigError(fmt::format(
          "{}: sentencepiece: vocab_size {} is more than {} training sentences can give a {} model: at most {} "
          "pieces here; lower vocab_size",
          place_, opt_.vocab_size, sentences, opt_.model_type, most[2].str()));
    }
    throw DataError(fmt::format("{}: sentencepiece: training a {} model with vocab_size {} on {} sentences failed: {}",
                                place_, opt_.model_type, opt_.vocab_size, sentences, why));
  }

  std::string place_;
};

const config::Binding<SpmOptions>& binding() {
  static const auto b =
      config::Binding<SpmOptions>()
          .choice("model_type", &SpmOptions::model_type, {"bpe", "unigram"}, "SentencePiece model type")
          .option("vocab_size", &SpmOptions::vocab_size, "pieces in the model (must suit the corpus size)", {.min = 10})
          .option("character_coverage", &SpmOptions::character_coverage, "share of characters covered by the model",
                  {.min = 0.5, .max = 1.0})
          .option("model", &SpmOptions::model,
                  "a trained .model file to use instead of training (\"\" = train and cache)");
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<data::Tokenizer> make(const config::Options& o, const plugin::BuildContext&) {
  return std::make_shared<SentencePiece>(binding().read(o), o.resolved().where());
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::data::Tokenizer, "sentencepiece",
               "SentencePiece BPE/unigram subwords trained on the training split (cached model); decode = DecodePieces",
               schema, make)
