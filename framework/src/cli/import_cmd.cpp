// `runner import hf DIR [-o FILE.yaml] [--text FILE | --source CORPUS] [--block-size N] [--force]`:
// an experiment file for a model someone else trained, from its Hugging Face folder (config.json,
// model.safetensors, the tokenizer's files). Running it (`runner FILE.yaml`) measures the model on
// the dataset and trains nothing (trainer.max_epochs 0); the run's results file is then what every
// command opens: runner heads, generate, eval (--text), ablate, prune (docs/PRETRAINED.md).
#include "cli/commands.hpp"

#include <attnlab/error.hpp>
#include <attnlab/files.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>

namespace attnlab::cli {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

/// DIR/config.json, parsed; DataError naming it when it is missing, not JSON or not a model attnlab runs.
json read_config(const std::string& dir) {
  const std::string file = dir + "/config.json";
  std::string text;
  if (auto why = files::read_whole(file, 1u << 20, "a model's config.json", text); !why.empty()) {
    throw DataError(fmt::format("{}: {} (runner import hf reads a Hugging Face model folder: config.json, "
                                "model.safetensors, tokenizer.json or vocab.json + merges.txt)",
                                file, why));
  }
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw DataError(fmt::format("{}: not JSON: {}", file, e.what()));
  }
  ATTNLAB_CHECK(j.is_object() && j.contains("model_type") && j["model_type"].is_string(), DataError,
                "{}: has no \"model_type\" string", file);
  const auto type = j["model_type"].get<std::string>();
  ATTNLAB_CHECK(type == "gpt2" || type == "llama" || type == "mistral", DataError,
                "{}: model_type \"{}\" is not an architecture attnlab runs (it runs gpt2, llama and mistral)", file,
                type);
  return j;  // the rest is the gpt plugin's to check when the experiment runs
}

/// config.json's integer `gpt2_key` (GPT-2's name) or `key` (Llama's), 0 when neither.
int64_t size_of(const json& j, const char* gpt2_key, const char* key) {
  for (const char* k : {gpt2_key, key}) {
    if (j.contains(k) && j[k].is_number_integer()) return j[k].get<int64_t>();
  }
  return 0;
}

bool exists(const std::string& path) { return files::problem(path, files::Want::File).empty(); }

}  // namespace

int cmd_import(int argc, char** argv) {
  CLI::App app{"write an experiment file for a Hugging Face model folder (GPT-2, Llama): measure it, study its heads"};
  std::string format, dir, out, text, source = "fra_eng.en";
  int64_t block_size = 256;
  bool force = false;
  app.add_option("format", format, "hf: a Hugging Face folder")->required()->check(CLI::IsMember({"hf"}));
  app.add_option("folder", dir, "the model's folder: config.json, model.safetensors, the tokenizer's files")
      ->required();
  app.add_option("-o,--output", out, "the experiment file to write (default experiments/<folder name>.yaml)");
  auto* text_opt = app.add_option("--text", text, "the dataset: a UTF-8 text file (default: --source)");
  auto* source_opt = app.add_option("--source", source,
                                    "the dataset: a corpus the text dataset fetches (fra_eng.en, fra_eng.fr, "
                                    "multi30k.en, multi30k.de)")
                         ->capture_default_str();
  app.add_option("--block-size", block_size, "tokens per sequence (at most the model's n_positions)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_flag("--force", force, "replace the experiment file if it exists");
  app.footer(
      "Example (a GPT-2 folder as Hugging Face writes it):\n"
      "  runner import hf models/gpt2 -o gpt2_small.yaml\n"
      "  runner gpt2_small.yaml --results results/gpt2_small.h5   # val loss; trains nothing\n"
      "  runner heads results/gpt2_small.h5\n"
      "  runner generate results/gpt2_small.h5 --prompt 'The capital of France is'\n"
      "  runner eval results/gpt2_small.h5 --text some.txt\n"
      "  runner ablate results/gpt2_small.h5");
  if (auto code = parse_command_line(app, argc, argv, "runner import")) return *code;
  ATTNLAB_CHECK(text_opt->count() == 0 || source_opt->count() == 0, ConfigError,
                "--text and --source: the dataset is a text file or a corpus, not both");
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (auto why = files::problem(dir, files::Want::Directory); !why.empty()) {
    throw DataError(fmt::format("{}: {} (runner import hf reads a Hugging Face model folder)", dir, why));
  }
  const json config = read_config(dir);
  const bool sharded = exists(dir + "/model.safetensors.index.json");
  ATTNLAB_CHECK(exists(dir + "/model.safetensors") || sharded, DataError,
                "{}: has no model.safetensors (nor model.safetensors.index.json); attnlab reads safetensors weights, "
                "not pytorch_model.bin",
                dir);
  ATTNLAB_CHECK(exists(dir + "/tokenizer.json") || (exists(dir + "/vocab.json") && exists(dir + "/merges.txt")),
                DataError, "{}: has neither tokenizer.json nor vocab.json + merges.txt, the byte-level BPE it was "
                "trained with", dir);
  const int64_t positions = size_of(config, "n_positions", "max_position_embeddings");
  ATTNLAB_CHECK(positions <= 0 || block_size <= positions, ConfigError,
                "--block-size {}: the model has {} positions (config.json n_positions / max_position_embeddings)",
                block_size, positions);
  if (!text.empty() && !exists(text)) {
    throw DataError(fmt::format("--text {}: {}", text, files::problem(text, files::Want::File)));
  }
  const std::string name = fs::path(dir).filename().string();
  if (out.empty()) out = "experiments/" + name + ".yaml";
  ATTNLAB_CHECK(force || !fs::exists(out), ResultsError, "{} exists: name another file with -o, or replace it with --force",
                out);
  std::string experiment = fs::path(out).stem().string();
  for (char& c : experiment) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') c = '_';
  }
  const std::string abs_dir = fs::absolute(dir).lexically_normal().string();
  const std::string dataset =
      text.empty() ? fmt::format("  source: {}\n", source)
                   : fmt::format("  source: file\n  path: {}\n", fs::absolute(text).lexically_normal().string());
  const std::string yaml = fmt::format(
      "# {model} from {dir} ({layers} blocks of {heads} heads, width {width}, {vocab} tokens), written by\n"
      "# `runner import hf`. `runner {out} --results results/{exp}.h5` measures it on the dataset below\n"
      "# (validation loss and perplexity) and trains nothing (trainer.max_epochs 0): its weights are the\n"
      "# folder's (model.pretrained), so the run keeps no checkpoint. Then:\n"
      "#   runner heads results/{exp}.h5                       previous-token, induction, first-token scores\n"
      "#   runner generate results/{exp}.h5 --prompt 'Hello'\n"
      "#   runner eval results/{exp}.h5 --text some.txt        perplexity on a text\n"
      "#   runner ablate results/{exp}.h5                      the loss with each head off\n"
      "# Fine-tune it instead: trainer.max_epochs=1 (or trainer.max_steps=N) and a small trainer.lr.\n"
      "experiment: {exp}\n"
      "seed: 0\n"
      "device: auto\n\n"
      "dataset:\n"
      "  plugin: text\n"
      "{dataset}"
      "  tokenizer: {{plugin: byte_bpe, path: {dir}}}\n"
      "  block_size: {block}\n"
      "  batch_size: 8\n\n"
      "model:\n"
      "  plugin: gpt\n"
      "  pretrained: {dir}   # shape and weights from config.json and the safetensors\n"
      "  dropout: 0.0\n\n"
      "trainer:\n"
      "  plugin: lm\n"
      "  max_epochs: 0       # measure only\n"
      "  eval_batches: 20\n"
      "  lr: 0.0001\n",
      fmt::arg("model", config.value("model_type", std::string("gpt2"))), fmt::arg("dir", abs_dir),
      fmt::arg("layers", size_of(config, "n_layer", "num_hidden_layers")),
      fmt::arg("heads", size_of(config, "n_head", "num_attention_heads")),
      fmt::arg("width", size_of(config, "n_embd", "hidden_size")), fmt::arg("vocab", size_of(config, "vocab_size", "vocab_size")),
      fmt::arg("out", out), fmt::arg("exp", experiment), fmt::arg("dataset", dataset), fmt::arg("block", block_size));
  if (const auto parent = fs::path(out).parent_path(); !parent.empty()) fs::create_directories(parent);
  {
    std::ofstream f(out + ".tmp", std::ios::trunc);
    f << yaml;
    ATTNLAB_CHECK(f.good(), ResultsError, "cannot write {}", out);
  }
  fs::rename(out + ".tmp", out);
  std::cout << fmt::format("wrote {}: run it with `runner {} --results results/{}.h5`\n", out, out, experiment);
  return 0;
}

}  // namespace attnlab::cli
