#pragma once
// An optional interface a dataset implements next to data::Dataset when each sequence carries
// one integer label (the corner dataset's directions). Trainers find it with
// dynamic_cast<const data::SequenceLabels*>(dataset) and write the labels next to predictions.
#include <attnlab/data/dataset.hpp>

#include <torch/types.h>

#include <string>
#include <vector>

namespace attnlab::data {

class SequenceLabels {
 public:
  virtual ~SequenceLabels();  // defined in libattnlab: one typeinfo for every plugin
  /// What the labels are, as a results path component ("directions").
  virtual std::string label_name() const = 0;
  /// Names of the label values, index = label ({"counter-clockwise", "clockwise"}).
  virtual std::vector<std::string> label_values() const = 0;
  /// [N] int64, row i = row i of the unshuffled batches(split, false, seed) concatenated.
  virtual torch::Tensor labels(Split split) const = 0;
};

}  // namespace attnlab::data
