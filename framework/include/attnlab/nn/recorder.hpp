#pragma once
// Attention recording: one recorder that attention modules write their weights to. Evaluation
// code makes a recorder active with a RecordingScope; while none is active (training) nothing is
// recorded and attention takes its fused path. Each entry says what it is (module, layer, heads,
// and which tokens its query and key axes index), so readers never parse module names.
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attnlab::nn {

/// What a query or key axis of recorded attention indexes.
enum class Side {
  Source,   // the encoder's input positions (source tokens, source points)
  Target,   // the decoder's input positions (<bos> then each prediction, or the target points fed)
  Queries,  // stand-alone attention pooling's queries (e.g. Nadaraya-Watson's test inputs)
  Keys,     // stand-alone attention pooling's keys (e.g. Nadaraya-Watson's training inputs)
};

/// "source", "target", "queries", "keys": the results file's query_side / key_side attributes.
const char* side_name(Side side);

/// The module names of the framework's encoder-decoder models (the results file's dataset names).
inline constexpr const char* kEncoderSelf = "encoder_self";    // Source x Source
inline constexpr const char* kDecoderSelf = "decoder_self";    // Target x Target (causal)
inline constexpr const char* kDecoderCross = "decoder_cross";  // Target x Source

/// Under what an attention module's weights are recorded.
struct RecordAs {
  std::string module = "attention";  // kEncoderSelf, kDecoderSelf, kDecoderCross or a plugin's own name
  int64_t layer = 0;                 // the block's index in its stack
  Side queries = Side::Queries;      // what the query axis indexes
  Side keys = Side::Keys;            // what the key axis indexes
};

/// One module's recorded layers.
struct RecordedModule {
  std::string module;
  Side queries = Side::Queries, keys = Side::Keys;
  std::vector<int64_t> layers;  // ascending: the layer of each row of weights
  torch::Tensor weights;        // [layers, B, heads, Q, K] (detached, on the model's device)
};

class AttentionRecorder {
 public:
  /// Weights [B, heads, Q, K] of one module's layer whose query rows stand at positions
  /// query_offset.. of their sequence. They replace the layer's rows from query_offset on: a
  /// forward over a whole sequence (offset 0) starts the layer afresh, the next step of
  /// incremental decoding (offset = the rows so far) appends to it. Rows that would not continue
  /// the recorded ones (offset past them: nothing was recorded in between) start it afresh too.
  /// Steps with fewer keys than the widest (decoder self-attention sees one more key per step)
  /// are zero-filled on the right. c10::Error when an appended step's B or heads differ from the
  /// layer's, or when a module's layers disagree on their sides.
  void record(const RecordAs& as, const torch::Tensor& weights, int64_t query_offset = 0);

  /// Every recorded module in first-recorded order.
  std::vector<RecordedModule> modules() const;
  /// One recorded module; c10::Error naming the recorded ones when it was not recorded.
  RecordedModule module(const std::string& name) const;
  bool empty() const { return layers_.empty(); }
  void clear() { layers_.clear(); }

 private:
  struct Layer {
    RecordAs as;
    std::vector<torch::Tensor> steps;  // each [B, heads, q, k], query rows in order
    int64_t rows = 0;                  // query rows of all steps
  };
  /// [B, heads, rows, widest k]
  static torch::Tensor weights_of(const Layer& layer);
  /// Module names in first-recorded order.
  std::vector<std::string> names() const;
  /// A recorded module's layers, stacked.
  RecordedModule collect(const std::string& name) const;

  std::vector<Layer> layers_;  // in first-recorded order
};

/// The recorder attention modules on this thread write to; nullptr while none is active.
AttentionRecorder* active_recorder();

/// Makes `recorder` the active one on this thread for the scope's lifetime and restores the
/// previous one after; a null recorder pauses recording (beam search).
class RecordingScope {
 public:
  explicit RecordingScope(AttentionRecorder* recorder);
  ~RecordingScope();
  RecordingScope(const RecordingScope&) = delete;
  RecordingScope& operator=(const RecordingScope&) = delete;

 private:
  AttentionRecorder* previous_;
};

}  // namespace attnlab::nn
