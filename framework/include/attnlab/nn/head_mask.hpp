#pragma once
// Head masks (Michel et al. 2019, "Are Sixteen Heads Really Better than One?"): while a mask is
// active, each head h of a masked attention module has its output multiplied by xi_h before the
// heads are joined and projected (W_o), in the forward pass of training, validation and decoding
// alike. xi_h = 0 switches the head off, 1 leaves it bit for bit as it was, and a xi that requires
// grad gives dL/dxi_h, Michel's head importance. The framework's Attention module
// (nn/attention.hpp) applies it, so every scorer, in-tree or out of tree, is masked without code
// of its own; a model's sites are found by attention_sites().
#include <attnlab/nn/recorder.hpp>

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace attnlab::nn {

/// One attention module's layer that a head mask reaches: what its weights are recorded as.
struct AttentionSite {
  std::string module;  // RecordAs::module: kEncoderSelf, kDecoderSelf, kDecoderCross or a plugin's name
  int64_t layer = 0;   // RecordAs::layer, from 0 (users see layer + 1, as runner plot labels it)
  int64_t heads = 1;   // the module's heads (1 for plain attention pooling, e.g. Bahdanau's)
};

/// The framework Attention modules in `model`'s tree (itself included), one per (module, layer),
/// modules in the order first met, layers ascending within each.
std::vector<AttentionSite> attention_sites(const torch::nn::Module& model);

/// Per-head multipliers xi of the masked (module, layer) sites; the others are left alone.
class HeadMask {
 public:
  /// xi: [heads], floating point, on the model's device (a CUDA graph captures it there).
  void set(const std::string& module, int64_t layer, torch::Tensor xi);
  /// The site's multipliers, or an undefined tensor when the mask leaves it alone.
  torch::Tensor get(const std::string& module, int64_t layer) const;
  bool empty() const { return xi_.empty(); }
  const std::map<std::pair<std::string, int64_t>, torch::Tensor>& entries() const { return xi_; }

 private:
  std::map<std::pair<std::string, int64_t>, torch::Tensor> xi_;
};

/// The mask attention modules apply now (one per process); nullptr while none is active.
const HeadMask* active_head_mask();

/// Makes `mask` the active one for the scope's lifetime and restores the previous one after; a
/// null mask switches masking off inside the scope. The mask must outlive the scope.
class HeadMaskScope {
 public:
  explicit HeadMaskScope(const HeadMask* mask);
  ~HeadMaskScope();
  HeadMaskScope(const HeadMaskScope&) = delete;
  HeadMaskScope& operator=(const HeadMaskScope&) = delete;

 private:
  const HeadMask* previous_;
};

/// out [B * heads, Q, D] (MultiHeadAttention's layout, head fastest) with head h multiplied by
/// the active mask's xi_h for `site`; `out` itself when no mask is active or it leaves the site alone.
torch::Tensor apply_head_mask(const torch::Tensor& out, const RecordAs& site, int64_t heads);

}  // namespace attnlab::nn
