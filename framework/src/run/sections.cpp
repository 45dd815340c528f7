// The experiment file's own sections declared once (run/sections.hpp).
#include "run/sections.hpp"

#include <attnlab/run/experiment.hpp>

#include <cstdlib>
#include <utility>
#include <vector>

namespace attnlab::run {

std::string default_data_dir() {
  const char* dir = std::getenv("ATTNLAB_DATA_DIR");
  return dir != nullptr && *dir != '\0' ? std::string(dir) : std::string("datasets");
}

const config::Binding<ExperimentConfig>& experiment_binding() {
  using E = ExperimentConfig;
  using config::Type;
  static const auto b = [] {
    std::vector<std::pair<std::string, train::Precision>> precisions;
    for (const auto p : {train::Precision::fp32, train::Precision::tf32, train::Precision::bf16}) {
      precisions.emplace_back(train::precision_name(p), p);
    }
    return config::Binding<E>()
        .required("experiment", &E::experiment, "experiment name (results file prefix)")
        .option("description", &E::description, "one line about the experiment")
        .option("seed", &E::seed, "seed for torch, data order and dropout", {.min = 0})
        .choice("device", &E::device, {"cpu", "cuda", "auto"},
                "where to train: cpu, cuda, or auto (cuda when available)")
        .choice("precision", &E::precision, precisions,
                "training arithmetic: fp32 (IEEE float32 everywhere), tf32 (float32 matmuls on TF32 tensor cores), "
                "bf16 (autocast to bfloat16 in the forward pass and loss; fp32 weights and Adam); "
                "attnlab/train/precision.hpp")
        .option("threads", &E::threads,
                "intra-op CPU threads: N (capped at the cores), 0 = torch's default (one per core), or auto (one "
                "thread below 250,000 parameters, else one per core; recorded as the threads attribute)")
        .option("data_dir", &E::data_dir,
                "where datasets are fetched to and read from (default: $ATTNLAB_DATA_DIR, else datasets)")
        .node("dataset", &E::dataset, Type::Map, std::nullopt, "dataset plugin and its options ({plugin: name, ...})")
        .node("model", &E::model, Type::Map, "{}",
              "{encoder: {plugin: ...}, decoder: {plugin: ...}}, or {plugin: <model plugin>, ...}, or {} when "
              "the trainer builds its own model")
        .node("trainer", &E::trainer, Type::Map, std::nullopt, "trainer plugin and its options")
        .node("evaluate", &E::evaluate, Type::Map, "{}", "after training: samples to translate, attention to record")
        .node("results", &E::results, Type::Map, "{}", "results file: {path: ...}")
        .node("interventions", &E::interventions, Type::Map, "{}",
              "changes to the model's attention while it trains and evaluates: {head_mask: {module: {layer: "
              "heads}}} (`runner plugins experiment` lists them; docs/EXPERIMENTS.md)");
  }();
  return b;
}

config::Schema experiment_schema() { return experiment_binding().schema(); }

const config::Binding<ResultsConfig>& results_binding() {
  static const auto b = config::Binding<ResultsConfig>().option(
      "path", &ResultsConfig::path, "results file (default results/<experiment>-<time>.h5)");
  return b;
}

const config::Binding<ModelPairConfig>& model_pair_binding() {
  using M = ModelPairConfig;
  static const auto b =
      config::Binding<M>()
          .node("encoder", &M::encoder, config::Type::Map, std::nullopt, "encoder plugin")
          .node("decoder", &M::decoder, config::Type::Map, std::nullopt, "decoder plugin")
          .option("share_embeddings", &M::share_embeddings,
                  "one token embedding for source and target (the decoder adopts the encoder's; needs a dataset "
                  "with one vocabulary, e.g. multi30k's shared_vocab: true)");
  return b;
}

}  // namespace attnlab::run
