// `runner eval` on a decoder-only language model (cli/lm_eval.hpp).
#include "cli/lm_eval.hpp"

#include <attnlab/data/dataset.hpp>
#include <attnlab/data/language_model.hpp>
#include <attnlab/data/text.hpp>
#include <attnlab/error.hpp>
#include <attnlab/files.hpp>
#include <attnlab/nn/head_mask.hpp>
#include <attnlab/results/results.hpp>
#include <attnlab/results/tensor.hpp>
#include <attnlab/train/eval_scope.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <limits>

#include "cli/commands.hpp"
#include "cli/run_loading.hpp"
#include "train/streaming.hpp"

namespace attnlab::cli {
namespace {

/// Summed loss, scored labels and correct argmaxes at each position, over a split's batches, and
/// each row's scored and correct labels.
struct PositionSums {
  torch::Tensor loss, tokens, correct;  // [T] float64 on the CPU
  torch::Tensor row_scored, row_correct;  // [N] int64 on the CPU, the split's rows in order
};

/// Logits [B, T, V] of a batch's tgt_in [B, T].
using Forward = std::function<torch::Tensor(const torch::Tensor&)>;

PositionSums measure(nn::LanguageModel& lm, const std::vector<data::Batch>& batches, int64_t pad,
                     torch::Device device, const Forward& forward) {
  const train::EvalScope eval(lm);
  const torch::NoGradGuard no_grad;
  int64_t T = 0;
  for (const auto& b : batches) T = std::max(T, b.tgt_out.size(1));
  const auto on = torch::dtype(torch::kDouble).device(device);
  PositionSums s{torch::zeros({T}, on), torch::zeros({T}, on), torch::zeros({T}, on), {}, {}};
  std::vector<torch::Tensor> scored_rows, correct_rows;
  for (const auto& cpu : batches) {
    const auto b = cpu.to(device, true);
    const auto logits = forward(b.tgt_in);  // [B, t, V]
    const int64_t t = logits.size(1);
    const auto scored = b.tgt_out.ne(pad);  // [B, t]
    const auto ce = torch::nn::functional::cross_entropy(
                        logits.flatten(0, 1).to(torch::kFloat), b.tgt_out.flatten(),
                        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone).ignore_index(pad))
                        .view({-1, t});  // [B, t]: 0 where not scored
    s.loss.narrow(0, 0, t) += ce.to(torch::kDouble).sum(0);
    s.tokens.narrow(0, 0, t) += scored.to(torch::kDouble).sum(0);
    const auto correct = logits.argmax(-1).eq(b.tgt_out) & scored;  // [B, t]
    s.correct.narrow(0, 0, t) += correct.to(torch::kDouble).sum(0);
    scored_rows.push_back(scored.sum(1).cpu());
    correct_rows.push_back(correct.sum(1).cpu());
  }
  return {s.loss.cpu(), s.tokens.cpu(), s.correct.cpu(), torch::cat(scored_rows), torch::cat(correct_rows)};
}

/// A text file as the run's dataset tokenizes a prompt, cut into windows of T + 1 tokens at stride
/// T (each token a label once, as the dataset's own val split), in batches; T is `context`, or the
/// dataset's block_size when 0.
std::vector<data::Batch> text_batches(const data::Dataset& dataset, const std::string& path, const std::string& run,
                                      int64_t context, int64_t rows_per_batch) {
  const auto* lm_data = dynamic_cast<const data::LanguageModelData*>(&dataset);
  ATTNLAB_CHECK(lm_data != nullptr, ConfigError,
                "--text: run {}'s dataset cannot turn text into tokens (it does not implement data::LanguageModelData)",
                run);
  std::string text;
  if (auto why = files::read_whole(path, 1ull << 30, "--text", text); !why.empty()) {
    throw DataError(fmt::format("--text {}: {}", path, why));
  }
  data::require_utf8(text, path);
  std::vector<int64_t> ids;
  try {
    ids = lm_data->encode_prompt(text);
  } catch (const DataError& e) {
    throw DataError(fmt::format("--text {}: {}", path, e.what()));
  }
  const int64_t T = context > 0 ? context : dataset.info().num_steps;
  const auto n = static_cast<int64_t>(ids.size());
  ATTNLAB_CHECK(n >= T + 1, DataError, "--text {}: {} tokens, fewer than one row of {} {} + 1; give a longer text{}",
                path, n, context > 0 ? "--context" : "the run's block_size", T,
                context > 0 ? " or a shorter --context" : "");
  const auto all = torch::tensor(ids, torch::kLong);
  const auto windows = all.unfold(0, T + 1, T);  // [W, T + 1]
  std::vector<data::Batch> out;
  for (int64_t start = 0; start < windows.size(0); start += rows_per_batch) {
    const auto block = windows.narrow(0, start, std::min(rows_per_batch, windows.size(0) - start));
    data::Batch b;
    b.tgt_in = block.narrow(1, 0, T).contiguous();
    b.tgt_out = block.narrow(1, 1, T).contiguous();
    b.tgt_valid_lens = torch::full({block.size(0)}, T, torch::kLong);
    out.push_back(std::move(b));
  }
  return out;
}

/// ", window 64 + the first 4 tokens" as the printed line names the attention; "" for all of it.
std::string attention_seen(const LmEvalOptions& o) {
  if (o.window == 0) return "";
  if (o.recompute) return fmt::format(", window {} recomputed for every token", o.window);
  return fmt::format(", window {}{}", o.window,
                     o.sinks == 0 ? std::string() : fmt::format(" + the first {} token{}", o.sinks, o.sinks == 1 ? "" : "s"));
}

}  // namespace

int eval_language_model(run::Setup& setup, nn::LanguageModel& lm, const LmEvalOptions& o) {
  auto& dataset = *setup.dataset;
  const auto split = o.text.empty() ? parse_split(o.split_name) : data::Split::Val;
  ATTNLAB_CHECK(!o.text.empty() || dataset.has_split(split), ConfigError,
                "run {}: its dataset ({}) has no {} split; it has {}: give --split with one of them", o.run,
                setup.dataset_name, o.split_name, splits_of(dataset));
  const auto device = setup.ctx.device;
  run::HeadMaskSpec all_off = o.trained;
  all_off.items.insert(all_off.items.end(), o.asked.items.begin(), o.asked.items.end());
  run::ResolvedHeadMask mask;
  if (!all_off.empty()) {
    mask = run::resolve_head_mask(all_off, nn::attention_sites(lm), device);
    if (!o.quiet) spdlog::info("head mask {}: {} of {} heads off", mask.text, mask.heads_off, mask.heads_total);
  }
  const nn::HeadMaskScope scope(all_off.empty() ? nullptr : &mask.mask);

  const auto start = std::chrono::steady_clock::now();
  const int64_t rows_per_batch = o.window > 0 ? 32 : 8;  // the window takes a step per token: wide batches
  const auto batches = o.text.empty() ? dataset.batches(split, false, 0)
                                      : text_batches(dataset, o.text, o.run, o.context, rows_per_batch);
  const std::string measured = (o.text.empty() ? o.split_name : "text " + o.text) + attention_seen(o);
  ATTNLAB_CHECK(!batches.empty(), DataError, "run {}: the {} split has no batches", o.run, o.split_name);
  int64_t longest = 0;  // the farthest position a query stands at
  for (const auto& b : batches) longest = std::max(longest, b.tgt_in.size(1));
  if (o.window > 0) longest = std::min(longest, o.window + o.sinks);
  ATTNLAB_CHECK(lm.max_positions() == 0 || longest <= lm.max_positions(), ConfigError,
                "run {}: rows of {} positions are beyond the {} of the model's absolute positional encoding; give "
                "{} {} at most{}",
                o.run, longest, lm.max_positions(),
                o.recompute ? "--window" : o.window > 0 ? "--window + --sinks" : "--context",
                lm.max_positions(), o.window > 0 ? "" : ", or --window to keep a query's positions within it");
  const Forward forward = [&](const torch::Tensor& tokens) {
    if (o.window == 0) return lm.forward(tokens);
    return o.recompute ? train::recomputed_window_logits(lm, tokens, o.window)
                       : train::streaming_logits(lm, tokens, o.window, o.sinks, "--window: run " + o.run);
  };
  const auto sums = measure(lm, batches, dataset.info().pad_id, device, forward);
  const double tokens = sums.tokens.sum().item<double>();
  ATTNLAB_CHECK(tokens > 0, DataError, "run {}: the {} split scores no label (every target is <pad>)", o.run,
                o.split_name);
  const double loss = sums.loss.sum().item<double>() / tokens;
  const double accuracy = sums.correct.sum().item<double>() / tokens;
  // The mean loss at each position (NaN where no row scores a label there).
  const auto nan = torch::full_like(sums.loss, std::numeric_limits<double>::quiet_NaN());
  const auto position_loss = torch::where(sums.tokens > 0, sums.loss / sums.tokens.clamp_min(1), nan);
  // The share of rows whose scored labels are all the argmax.
  const double exact = (sums.row_correct == sums.row_scored).to(torch::kDouble).mean().item<double>();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  {
    results::Results out(o.run, results::Results::Open::Existing);
    const std::string at = "eval/" + o.name;
    out.remove(at);
    out.write_array(at + "/position_loss", results::to_float_array(position_loss.to(torch::kFloat)));
    out.set_attr_at(at + "/position_loss", "definition",
                    std::string("the mean next-token loss (nats) of the labels scored at each position, from 0"));
    out.write_array(at + "/position_tokens", results::to_int_array(sums.tokens.to(torch::kLong)));
    // Per row: a row whose scored labels are all the argmax is one greedy decoding gets exactly
    // right (teacher forcing and greedy decoding agree while every step is right).
    out.write_array(at + "/row_scored", results::to_int_array(sums.row_scored.to(torch::kLong)));
    out.write_array(at + "/row_correct", results::to_int_array(sums.row_correct.to(torch::kLong)));
    out.set_attr_at(at, "exact_match", exact);
    out.set_attr_at(at, "kind", std::string("language_model"));
    if (o.text.empty()) {
      out.set_attr_at(at, "split", o.split_name);
    } else {
      out.set_attr_at(at, "text", o.text);
    }
    out.set_attr_at(at, "context", batches.front().tgt_in.size(1));
    out.set_attr_at(at, "window", o.window);  // 0: every earlier token
    out.set_attr_at(at, "sinks", o.sinks);
    out.set_attr_at(at, "recompute", int64_t{o.recompute ? 1 : 0});  // 1: every window run afresh from position 0
    out.set_attr_at(at, "checkpoint", o.checkpoint);
    out.set_attr_at(at, "loss", loss);
    out.set_attr_at(at, "perplexity", std::exp(std::min(loss, 700.0)));
    out.set_attr_at(at, "accuracy", accuracy);
    out.set_attr_at(at, "tokens", static_cast<int64_t>(tokens));
    out.set_attr_at(at, "seconds", seconds);
    out.set_attr_at(at, "device", device.str());
    if (!all_off.empty()) {
      out.set_attr_at(at, "head_mask", mask.text);
      out.set_attr_at(at, "heads_off", mask.heads_off);
      out.set_attr_at(at, "heads_total", mask.heads_total);
    }
    out.flush();
  }
  std::cout << fmt::format("{}{}: loss {:.4f}, perplexity {:.3f}, accuracy {:.4f} over {} tokens, rows exactly right "
                           "{:.4f} of {} ({} checkpoint) in {:.1f}s -> /eval/{}\n",
                           measured, all_off.empty() ? std::string() : fmt::format(" (head mask {})", mask.text),
                           loss, std::exp(std::min(loss, 700.0)), accuracy, static_cast<int64_t>(tokens), exact,
                           sums.row_scored.size(0), o.checkpoint, seconds, o.name);
  return 0;
}

}  // namespace attnlab::cli
