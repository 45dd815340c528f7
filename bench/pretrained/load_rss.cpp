// What opening a pretrained model costs in memory (bench/pretrained/run): the gpt plugin built with
// `pretrained: DIR` (config.json + safetensors), as `runner` builds it, in a process that has
// already loaded LibTorch and the plugins, then one forward pass of 16 tokens. Prints one markdown
// row: resident memory before, the peak after loading and after the forward pass (VmHWM, reset just
// before the load), its growth, the anonymous and file-backed parts at the end, the parameters'
// bytes, and the load's seconds.
//   attnlab_pretrained_bench DIR VOCAB_SIZE LABEL
#include <attnlab/config/node.hpp>
#include <attnlab/nn/language_model.hpp>
#include <attnlab/nn/model.hpp>
#include <attnlab/plugin/context.hpp>
#include <attnlab/plugin/registry.hpp>

#include <fmt/format.h>
#include <torch/torch.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

namespace {

/// /proc/self/status's memory lines in MiB (VmRSS, VmHWM, RssAnon, RssFile).
std::map<std::string, double> memory() {
  std::map<std::string, double> out;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    const auto colon = line.find(':');
    const auto key = line.substr(0, colon);
    if (key == "VmRSS" || key == "VmHWM" || key == "RssAnon" || key == "RssFile") {
      out[key] = std::stod(line.substr(colon + 1)) / 1024.0;  // kB
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: attnlab_pretrained_bench DIR VOCAB_SIZE LABEL\n";
    return 2;
  }
  using namespace attnlab;
  torch::set_num_threads(1);
  plugin::Registry registry;
  registry.discover();
  plugin::BuildContext ctx;
  ctx.registry = &registry;
  ctx.data.tgt_vocab_size = std::stoll(argv[2]);
  const auto node = config::parse_yaml(fmt::format("m: {{plugin: gpt, pretrained: '{}', dropout: 0}}", argv[1]),
                                       "bench").at("m");
  (void)torch::ones({8}).sum().item<float>();  // LibTorch's own start-up allocations before the baseline
  std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS
  const auto before = memory();
  const auto start = std::chrono::steady_clock::now();
  const auto model = registry.create<nn::Model>(node, ctx);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto after = memory();
  {  // one forward pass: every weight used once (a lazily mapped peer's pages come in only now)
    torch::NoGradGuard no_grad;
    auto lm = std::dynamic_pointer_cast<nn::LanguageModel>(model);
    lm->eval();
    (void)lm->forward(torch::zeros({1, 16}, torch::kLong)).sum().item<float>();
  }
  const auto used = memory();
  int64_t bytes = 0;
  for (const auto& p : model->parameters()) bytes += p.numel() * static_cast<int64_t>(p.element_size());
  const double weights = static_cast<double>(bytes) / (1024.0 * 1024.0);
  const double grow = used.at("VmHWM") - before.at("VmRSS");
  std::cout << fmt::format("| {} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {:.0f} ({:.2f}x the weights) | {:.0f} / {:.0f} | {:.2f} |\n",
                           argv[3], weights, before.at("VmRSS"), after.at("VmHWM"), used.at("VmHWM"), grow,
                           grow / weights, used.at("RssAnon"), used.at("RssFile"), seconds);
  return 0;
}
