// `runner summary EXPERIMENT.yaml`: build the dataset and the model as a run would, print the module
// tree with parameter counts (Keras's model.summary() style) and the output shape for one batch.
#include "cli/commands.hpp"

#include <attnlab/nn/language_model.hpp>

#include <attnlab/config/load.hpp>
#include <attnlab/run/experiment.hpp>

#include <CLI/CLI.hpp>
#include <c10/util/Type.h>
#include <fmt/format.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <algorithm>
#include <iostream>
#include <unordered_set>

#include "run/setup.hpp"

namespace attnlab::cli {
namespace {

/// "attnlab::nn::TransformerEncoderImpl" -> "TransformerEncoder"; "torch::nn::LinearImpl" -> "Linear".
std::string short_type(const torch::nn::Module& m) {
  std::string n = m.name();
  if (auto colon = n.rfind("::"); colon != std::string::npos) n = n.substr(colon + 2);
  if (n.size() > 4 && n.ends_with("Impl")) n.resize(n.size() - 4);
  return n;
}

/// Thousands separators: 1234567 -> "1,234,567".
std::string grouped(int64_t v) {
  auto s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

/// Distinct parameter tensors (a tied weight counts once).
std::pair<int64_t, int64_t> count(const torch::nn::Module& m) {
  std::unordered_set<const void*> seen;
  int64_t trainable = 0, frozen = 0;
  for (const auto& p : m.parameters()) {
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
    (p.requires_grad() ? trainable : frozen) += p.numel();
  }
  return {trainable, frozen};
}

std::string shape(const torch::Tensor& t) { return fmt::format("[{}]", fmt::join(t.sizes(), ", ")); }

}  // namespace

int cmd_summary(int argc, char** argv) {
  CLI::App app{"print an experiment's model (layers, parameter counts, output shape) without training"};
  std::vector<std::string> positional, plugin_dirs;
  int depth = 3;
  app.add_option("experiment", positional, "experiment YAML file, then key.path=value overrides")->required();
  app.add_option("--depth", depth, "module tree depth to print")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  add_plugin_path_option(app, plugin_dirs);
  app.footer("Example:\n  runner summary experiments/transformer_tf_lab.yaml");
  if (auto code = parse_command_line(app, argc, argv, "runner summary")) return *code;
  std::string experiment;
  run::Setup setup = run::setup_experiment(positional, plugin_dirs, experiment);
  std::shared_ptr<torch::nn::Module> model;
  if (setup.model) model = setup.model.ptr();
  if (setup.custom) model = setup.custom;
  if (!model) {
    std::cout << fmt::format("{}: no model section (the trainer builds its own model)\n", experiment);
    return 0;
  }

  constexpr int kWidth = 88;
  const std::string rule(kWidth, '_'), double_rule(kWidth, '=');
  std::cout << fmt::format("Model: \"{}\" (dataset {})\n{}\n", experiment, setup.dataset_name, rule);
  std::cout << fmt::format(" {:<66}{:>20}\n{}\n", "Layer (type)", "Param #", double_rule);
  for (const auto& item : model->named_modules("", /*include_self=*/false)) {
    const auto& name = item.key();
    const int level = static_cast<int>(std::count(name.begin(), name.end(), '.'));
    if (level >= depth) continue;
    const auto leaf = name.substr(name.rfind('.') == std::string::npos ? 0 : name.rfind('.') + 1);
    auto [trainable, frozen] = count(*item.value());
    auto label = fmt::format("{}{} ({})", std::string(static_cast<size_t>(2 * level), ' '), leaf, short_type(*item.value()));
    std::cout << fmt::format(" {:<66}{:>20}\n", label, grouped(trainable + frozen));
  }
  auto [trainable, frozen] = count(*model);
  std::cout << fmt::format("{}\nTotal params: {}\nTrainable params: {}\nNon-trainable params: {}\n{}\n", double_rule,
                           grouped(trainable + frozen), grouped(trainable), grouped(frozen), rule);

  if (setup.model) {
    auto batches = setup.dataset->batches(data::Split::Train, false, 0);
    if (!batches.empty()) {
      auto b = batches.front().to(setup.ctx.device);
      torch::NoGradGuard no_grad;
      setup.model->eval();
      auto out = setup.model->forward(b.src, b.src_valid_lens, b.tgt_in);  // [B, T, V]
      std::cout << fmt::format("Input: src {}, tgt {}\nOutput: {} ({})\n", shape(b.src), shape(b.tgt_in), shape(out),
                               setup.model->decoder().outputs_probabilities() ? "probabilities" : "logits");
    }
  } else if (auto lm = std::dynamic_pointer_cast<nn::LanguageModel>(setup.custom)) {
    auto batches = setup.dataset->batches(data::Split::Train, false, 0);
    if (!batches.empty()) {
      auto b = batches.front().to(setup.ctx.device);
      torch::NoGradGuard no_grad;
      lm->eval();
      auto out = lm->forward(b.tgt_in);  // [B, T, V]
      std::cout << fmt::format("Input: tokens {}\nOutput: {} (logits; positions up to {})\n", shape(b.tgt_in),
                               shape(out),
                               lm->max_positions() > 0 ? std::to_string(lm->max_positions()) : "any number");
    }
  }
  return 0;
}

}  // namespace attnlab::cli
