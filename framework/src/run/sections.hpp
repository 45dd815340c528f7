#pragma once
// The experiment file's own sections, each option declared once as a field bound with
// config::Binding (as the plugins declare theirs): the top level (what `runner plugins experiment`
// prints), `results:`, and the encoder + decoder form of `model:`. `evaluate:` is declared in
// run/evaluate.cpp, a trainer's `schedule:` in train/schedule.cpp.
#include <attnlab/config/binding.hpp>
#include <attnlab/config/node.hpp>
#include <attnlab/config/schema.hpp>
#include <attnlab/train/precision.hpp>

#include <cstdint>
#include <string>

namespace attnlab::run {

/// `data_dir`'s default: $ATTNLAB_DATA_DIR when set (one folder for every run, wherever it starts:
/// the Python package sets it for runs outside the repository, docs/PYTHON.md), else "datasets"
/// under the current folder.
std::string default_data_dir();

/// The experiment file's top level.
struct ExperimentConfig {
  std::string experiment;  // required: the results file's prefix
  std::string description;
  int64_t seed = 0;
  std::string device = "cpu";  // cpu | cuda | auto
  train::Precision precision = train::Precision::fp32;
  std::string threads = "0";  // N, 0 (torch's default) or auto
  std::string data_dir = default_data_dir();
  config::Node dataset, model, trainer, evaluate, results;  // dataset and trainer required
  config::Node interventions;  // run/interventions.hpp
};

const config::Binding<ExperimentConfig>& experiment_binding();

/// The top level of validated experiment options (`top`, made with experiment_schema()).
inline ExperimentConfig experiment_config(const config::Options& top) { return experiment_binding().read(top); }

/// `results:`.
struct ResultsConfig {
  std::string path;  // "" = results/<experiment>-<time>.h5
};

const config::Binding<ResultsConfig>& results_binding();

/// `model:` as an encoder + decoder pair (the other form, {plugin: <model>}, is a plugin's own).
struct ModelPairConfig {
  config::Node encoder, decoder;  // required
  bool share_embeddings = false;
};

const config::Binding<ModelPairConfig>& model_pair_binding();

}  // namespace attnlab::run
