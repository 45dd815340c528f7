// precision: (attnlab/train/precision.hpp).
#include <attnlab/train/precision.hpp>

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <fmt/format.h>

namespace attnlab::train {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::fp32:
      return "fp32";
    case Precision::tf32:
      return "tf32";
    case Precision::bf16:
      return "bf16";
  }
  return "?";
}

Precision parse_precision(const std::string& name) {
  for (auto p : {Precision::fp32, Precision::tf32, Precision::bf16}) {
    if (name == precision_name(p)) return p;
  }
  throw ConfigError(fmt::format("precision: expected one of fp32|tf32|bf16, found '{}'", name));
}

void apply_precision(Precision p) {
  const bool tf32 = p == Precision::tf32;
  at::globalContext().setAllowTF32CuBLAS(tf32);
  at::globalContext().setAllowTF32CuDNN(tf32);
}

AutocastScope::AutocastScope(Precision p, torch::Device device) {
  if (p != Precision::bf16) return;
  type_ = device.type();
  was_enabled_ = at::autocast::is_autocast_enabled(type_);
  was_dtype_ = at::autocast::get_autocast_dtype(type_);
  at::autocast::set_autocast_enabled(type_, true);
  at::autocast::set_autocast_dtype(type_, at::kBFloat16);
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // As torch.autocast's __exit__: the cast weights are dropped when the outermost region ends.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(type_, was_enabled_);
  at::autocast::set_autocast_dtype(type_, was_dtype_);
}

}  // namespace attnlab::train
