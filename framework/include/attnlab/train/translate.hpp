#pragma once
// Translating a whole split with greedy decoding or beam search, scoring it with sacreBLEU-exact
// corpus BLEU (and d2l's mean sentence BLEU), and recording it under /eval/<name> of a results
// file (`runner eval`, docs/RESULTS.md).
#include <attnlab/data/dataset.hpp>
#include <attnlab/metrics/sacrebleu.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/results/results.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace attnlab::train {

struct TranslateOptions {
  int64_t beam_size = 1;        // 1 = greedy decoding (identical to beam search with one beam)
  double length_penalty = 0.6;  // GNMT alpha (beam.hpp); unused by greedy decoding
  int64_t max_steps = 0;        // tokens per output; 0 = the dataset's num_steps, else 2 * S + 10
  /// Checked before each batch: when set, translate_split throws Interrupted.
  const std::atomic<bool>* stop = nullptr;
  /// More models decoding together with `model` (`runner eval --ensemble`): each step takes the
  /// mean of all their next-token probabilities (beam.hpp). They must share the dataset's
  /// vocabulary and sit on the model's device. Empty: `model` alone.
  std::vector<nn::EncoderDecoder> ensemble = {};
};

struct Translation {
  std::vector<std::string> sources, references, hypotheses;  // raw sources / targets, detokenized outputs
  double seconds = 0.0;                                      // decoding time
};

/// Every sentence of `split` in corpus order (the unshuffled batches), translated on the model's
/// device. DataError when the dataset has no such split or no raw text for it.
Translation translate_split(nn::EncoderDecoder& model, const data::Dataset& dataset, data::Split split,
                            const TranslateOptions& options);

/// `sources` (raw sentences, as a user writes them) translated in batches of `batch_size` rows
/// through the dataset's own preprocessing and tokenizer (Dataset::encode_sources), with
/// `references` kept alongside for scoring (`runner eval --source F --reference F`). DataError
/// when the counts differ or the dataset cannot encode text.
Translation translate_sentences(nn::EncoderDecoder& model, const data::Dataset& dataset,
                                std::vector<std::string> sources, std::vector<std::string> references,
                                const TranslateOptions& options, int64_t batch_size = 128);

struct EvalScores {
  metrics::BleuScore bleu;            // sacreBLEU 13a corpus BLEU
  metrics::BleuScore bleu_lowercase;  // the same, lowercased (sacreBLEU -lc)
  double d2l_mean_bleu = 0.0;         // mean over sentences of d2l's BLEU (k = 4) on the raw strings
};

EvalScores score_translation(const Translation& t);

/// /eval/<name>/{sources, references, hypotheses} and attributes on /eval/<name>: bleu, bleu_signature,
/// bleu_lowercase (sacreBLEU -lc),
/// bleu_text (sacreBLEU's line), d2l_mean_bleu, seconds, sentences, split, decoding ("greedy" or
/// "beam"), beam_size, length_penalty, max_steps, checkpoint, ensemble_size (1 + options.ensemble's).
/// Flushes.
void write_eval(results::Results& results, const std::string& name, const Translation& t, const EvalScores& s,
                const std::string& split, const TranslateOptions& options, const std::string& checkpoint);

/// For a resumed run: every /eval/<name> scored a checkpoint that training is about to replace
/// (best.pt, the last K epochs), so each moves to /eval_stale/<name>, replacing an older one of
/// that name, with attributes stale_since (UTC) and stale_reason. `runner compare` and the report
/// read /eval only. Returns the names moved; flushes.
std::vector<std::string> set_aside_evals(results::Results& results);

}  // namespace attnlab::train
