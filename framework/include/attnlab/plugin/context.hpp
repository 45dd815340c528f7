#pragma once
// What every factory gets besides its options: where it runs and what the data looks like. What
// only one kind needs comes as that kind's own factory argument (plugin::FactorySignature), e.g. a
// scorer's nn::ScorerContext.
#include <torch/types.h>

#include <cstdint>
#include <string>

namespace attnlab::plugin {

class Registry;

/// Sizes the dataset reports to model plugins.
struct DataInfo {
  int64_t src_vocab_size = 0;  // 0 when inputs are features, not tokens
  int64_t tgt_vocab_size = 0;
  int64_t num_features = 0;    // > 0 for continuous inputs
  int64_t num_steps = 0;       // padded sequence length (0 = variable)
  int64_t pad_id = -1, bos_id = -1, eos_id = -1;
  bool shared_vocab = false;  // source and target ids index one vocabulary (model.share_embeddings)
};

struct BuildContext {
  Registry* registry = nullptr;  // to create nested plugins (a transformer asks for its scorer)
  torch::Device device = torch::kCPU;
  int64_t seed = 0;
  std::string data_dir;          // where datasets live (datasets/ by default)
  DataInfo data;
};

}  // namespace attnlab::plugin
