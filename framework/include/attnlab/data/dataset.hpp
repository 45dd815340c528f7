#pragma once
// Plugin kind "dataset": prepares data once (fetch, read, vocabularies, tensors) and hands out
// batches cut from pre-built tensors (no per-sample work in the training loop).
#include <attnlab/data/vocab.hpp>
#include <attnlab/plugin/plugin.hpp>
#include <attnlab/results/results.hpp>

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attnlab::data {

enum class Split { Train, Val, Test };
const char* split_name(Split s);  // "train", "val", "test"

/// One batch, in one of two layouts.
///
/// Encoder-decoder (translation, sequence regression): every field defined, as below.
///
/// Decoder-only (a language model; the `text` dataset, data::LanguageModelData): `src` and
/// `src_valid_lens` are undefined tensors; `tgt_in` [B, T] holds the input tokens, `tgt_out`
/// [B, T] the next token at each position, or '<pad>' where a position is not scored (a loss
/// ignores '<pad>' labels), and `tgt_valid_lens` [B] the COUNT of scored labels of each row.
struct Batch {
  torch::Tensor src;             // [B, S] ids (or [B, S, F] features); undefined: decoder-only
  torch::Tensor src_valid_lens;  // [B]; undefined: decoder-only
  torch::Tensor tgt_in;          // [B, T] decoder input: <bos> + target[:-1] (teacher forcing)
  torch::Tensor tgt_out;         // [B, T] labels: target ('<pad>' where padded or not scored)
  torch::Tensor tgt_valid_lens;  // [B] non-pad labels (the count of scored positions)
  /// Moves every defined tensor; undefined ones stay undefined.
  Batch to(torch::Device device, bool non_blocking = false) const;
  /// Rows: of `src`, or of `tgt_in` in a decoder-only batch.
  int64_t size() const { return src.defined() ? src.size(0) : tgt_in.size(0); }
};

/// A token batch padded to a bucket shape, so that a graph-captured training step
/// (attnlab/train/train_step.hpp) sees few shapes: at least `rows` rows, and source and target
/// lengths rounded up to a multiple of `multiple`, all with `pad_id`. An added row is one <pad>
/// source token (valid length 1) and no target tokens (valid length 0), so a loss over the non-pad
/// targets is the same; the added columns are masked by the valid lengths and ignored as <pad>
/// labels. A decoder-only batch (`src` undefined) has its target side padded alone, `src` and
/// `src_valid_lens` staying undefined. Returns `b` itself when nothing is added.
Batch pad_to_bucket(const Batch& b, int64_t rows, int64_t multiple, int64_t pad_id);

class Dataset {
 public:
  virtual ~Dataset() = default;
  /// Fetch (honouring the mirror), read, build vocabularies and tensors. Called once.
  virtual void prepare(const std::string& data_dir) = 0;
  virtual plugin::DataInfo info() const = 0;
  /// The split's batches; shuffled by `seed` when shuffle is true (training), in order otherwise.
  virtual std::vector<Batch> batches(Split split, bool shuffle, uint64_t seed) const = 0;
  virtual bool has_split(Split split) const { return split != Split::Test; }
  /// Once the run's results file is open (a new run, or one resumed), after prepare(): write what
  /// the dataset wants kept with the run beside its batches, such as data of its own (a function's
  /// noise-free curve) and the figures that draw it (results::declare_figure,
  /// attnlab/results/figure.hpp); `runner plot` and `runner report` draw them. Nothing by default.
  virtual void write_results(results::Results& results) const {}

  // --- text datasets (translation) ---
  virtual const Vocab* src_vocab() const { return nullptr; }
  virtual const Vocab* tgt_vocab() const { return nullptr; }
  /// Raw sentences -> src [N, S] ids and valid lengths [N], with the dataset's preprocessing.
  virtual Batch encode_sources(const std::vector<std::string>& sentences) const;
  /// Tokens of a raw sentence after preprocessing (labels for attention plots).
  virtual std::vector<std::string> source_tokens(const std::string& sentence) const;
  /// Target ids -> text (joined with spaces, stopping at <eos>).
  virtual std::string decode_target(const std::vector<int64_t>& ids) const;
  /// The split's raw (untokenized) source / target sentences, row i = row i of the unshuffled
  /// batches(split, false, seed); references for sacreBLEU. DataError "not a text dataset" unless
  /// the dataset overrides them.
  virtual std::vector<std::string> raw_sources(Split split) const;
  virtual std::vector<std::string> raw_targets(Split split) const;
};

}  // namespace attnlab::data

template <>
struct attnlab::plugin::KindOf<attnlab::data::Dataset> {
  static constexpr const char* value = "dataset";
};
