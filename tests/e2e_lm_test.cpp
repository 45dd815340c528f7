// End to end with the real runner: a decoder-only language model (model gpt, trainer lm, dataset
// text) trains for steps reported at intervals, resumes bit-identically, and refuses what it cannot
// train with one clear error.
#include <attnlab/results/reader.hpp>
#include <attnlab/train/checkpoint.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "testing/corpus.hpp"
#include "testing/runner.hpp"
#include "testing/testing.hpp"

namespace e2e_lm_test {
namespace {
using namespace attnlab;
namespace fs = std::filesystem;

class LmRun : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-lm"; }
  void SetUp() override {
    RunnerFixture::SetUp();
    REQUIRE_FRA_ENG();
  }
  testutil::ProcessResult lm(const std::string& results, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"experiments/tests/tiny_lm.yaml", "--results", results, "-q",
                                  "data_dir=" + data_dir_};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  }
};

TEST_F(LmRun, TrainsForStepsReportedEveryEvalEvery) {
  const auto path = tmp_ + "/lm.h5";
  const auto r = lm(path);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  results::ResultsReader res(path);
  EXPECT_EQ(res.attr_string("status"), "completed");
  // 25 steps every 10: three reports, after steps 10, 20 and 25.
  EXPECT_EQ(res.metric("train", "step"), (std::vector<double>{10, 20, 25}));
  EXPECT_EQ(res.metric("epoch", "index").size(), 3u);
  const auto loss = res.metric("train", "loss"), ppl = res.metric("train", "perplexity");
  ASSERT_EQ(loss.size(), 3u);
  for (size_t i = 0; i < loss.size(); ++i) EXPECT_NEAR(ppl[i], std::exp(loss[i]), 1e-9 * ppl[i]);
  const auto val = res.metric("val", "loss"), acc = res.metric("val", "accuracy");
  ASSERT_EQ(val.size(), 3u);
  EXPECT_LT(val.back(), val.front()) << "the model learns something in 25 steps";
  EXPECT_LT(val.front(), std::log(60.0)) << "about the entropy of a character vocabulary at most";
  for (double a : acc) EXPECT_TRUE(a > 0 && a < 1) << a;
  // The learning rate of every step: warmup to 0.003 at step 5, cosine towards 0 at step 30.
  const auto lr = res.metric("step", "lr");
  ASSERT_EQ(lr.size(), 25u);
  EXPECT_NEAR(lr[0], 0.003 / 5, 1e-12);
  EXPECT_NEAR(lr[4], 0.003, 1e-12);
  for (int t = 6; t <= 25; ++t) {
    EXPECT_NEAR(lr[t - 1], 0.0015 * (1 + std::cos(M_PI * (t - 5) / 25.0)), 1e-12) << "step " << t;
  }
}

TEST_F(LmRun, ReportAndPlotDrawTheCurvesAgainstTheOptimizerStep) {
  const auto path = tmp_ + "/curves.h5";
  ASSERT_EQ(lm(path).exit_code, 0);
  const auto r = run({"report", path, "-o", tmp_ + "/curves.html"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto html = testutil::read_file(tmp_ + "/curves.html");
  // Reports after steps 10, 20 and 25: the val curve's x is the step, not the report's number.
  EXPECT_TRUE(testutil::contains(html, R"({"name":"val/loss","per_step":true)")) << html.substr(0, 2000);
  EXPECT_TRUE(testutil::contains(html, R"("x":[10,20,25])")) << html.substr(0, 2000);
  const auto p = run({"plot", path, "-o", tmp_ + "/plots"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_GT(fs::file_size(tmp_ + "/plots/losses.png"), 10000u);
}

TEST_F(LmRun, SummaryPrintsTheModelAndItsOutputShape) {
  const auto r = run({"summary", "experiments/tests/tiny_lm.yaml", "data_dir=" + data_dir_, "--depth", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("decoder (TransformerDecoder)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Output: [8, 16, 67] (logits; positions up to 64)"), std::string::npos) << r.out;
}

TEST_F(LmRun, AStoppedRunResumesBitIdentically) {
  const auto whole = tmp_ + "/whole.h5", two = tmp_ + "/two.h5";
  ASSERT_EQ(lm(whole, {"trainer.max_steps=30"}).exit_code, 0);
  ASSERT_EQ(lm(two, {"trainer.max_steps=20"}).exit_code, 0);
  const auto r = lm(two, {"trainer.max_steps=30", "--resume", two});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  results::ResultsReader a(whole), b(two);
  EXPECT_EQ(b.attr_string("status"), "completed");
  for (const auto& [group, name] : std::vector<std::pair<std::string, std::string>>{
           {"train", "loss"}, {"val", "loss"}, {"train", "step"}, {"step", "lr"}}) {
    EXPECT_EQ(a.metric(group, name), b.metric(group, name)) << group << "/" << name;
  }
  auto ta = train::checkpoint_tensors(train::checkpoint_dir(whole) + "/last.pt");
  auto tb = train::checkpoint_tensors(train::checkpoint_dir(two) + "/last.pt");
  ASSERT_EQ(ta.size(), tb.size());
  for (const auto& [key, t] : ta) EXPECT_TRUE(torch::equal(t, tb.at(key))) << key;
}

TEST_F(LmRun, RefusesWhatItCannotTrainWithOneClearError) {
  const auto expect_error = [&](std::vector<std::string> extra, const std::string& needle) {
    const auto path = tmp_ + "/bad.h5";
    const auto r = lm(path, std::move(extra));
    EXPECT_NE(r.exit_code, 0) << needle;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in:\n" << r.err;
    EXPECT_FALSE(fs::exists(path)) << needle << ": nothing half-written";
  };
  // Sequences longer than the absolute positions the model has.
  expect_error({"dataset.block_size=100"}, "beyond the 64");
  // Both ways of saying how long to train; eval_every without steps.
  expect_error({"trainer.max_epochs=2"}, "not both");
  expect_error({"trainer.max_steps=0"}, "eval_every");
  // Heads that do not divide the width.
  expect_error({"model.num_heads=3"}, "num_heads");
  // An in-context score of one position, or beyond the sequences.
  expect_error({"trainer.in_context_late=15"}, "give both");
  expect_error({"trainer.in_context_early=2", "trainer.in_context_late=17"}, "the dataset's sequences have 16 positions");
}

TEST_F(LmRun, GeneratesFromTheCheckpointAndStoresWhatItMade) {
  const auto path = tmp_ + "/gen.h5";
  ASSERT_EQ(lm(path).exit_code, 0);
  const auto gen = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"generate", path, "data_dir=" + data_dir_, "--prompt", "I am "};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  const auto greedy = gen({"--tokens", "20", "--temperature", "0", "--attention", "--name", "greedy"});
  ASSERT_EQ(greedy.exit_code, 0) << greedy.out << greedy.err;
  const auto recomputed = gen({"--tokens", "20", "--temperature", "0", "--no-cache", "--name", "recomputed", "-q"});
  ASSERT_EQ(recomputed.exit_code, 0) << recomputed.err;
  EXPECT_EQ(greedy.out, recomputed.out) << "the KV cache generates what recomputation does";
  EXPECT_EQ(greedy.out.rfind("I am ", 0), 0u) << greedy.out;
  const auto sampled = gen({"--tokens", "20", "--seed", "3", "--top-k", "5", "-q"});
  const auto again = gen({"--tokens", "20", "--seed", "3", "--top-k", "5", "-q"});
  ASSERT_EQ(sampled.exit_code, 0) << sampled.err;
  EXPECT_EQ(sampled.out, again.out) << "a seed fixes the samples";
  {
    results::ResultsReader res(path);
    EXPECT_EQ(res.children("generations"),
              (std::vector<std::string>{"generation-1", "generation-2", "greedy", "recomputed"}));
    EXPECT_EQ(res.attr_string_at("generations/greedy", "cache"), "kv");
    EXPECT_EQ(res.attr_string_at("generations/recomputed", "cache"), "none");
    EXPECT_EQ(res.attr_string_at("generations/greedy", "prompt") + res.attr_string_at("generations/greedy", "continuation") + "\n",
              greedy.out);
    EXPECT_EQ(res.array("generations/greedy/ids").values.size(), 25u);  // 5 prompt characters + 20
  }
  // The attention over prompt and continuation: runner rollout reads it as any decoder_self map.
  const auto rollout = run({"rollout", path, "--sample", "greedy", "--module", "decoder_self"});
  EXPECT_EQ(rollout.exit_code, 0) << rollout.out << rollout.err;
  EXPECT_NE(rollout.out.find("decoder_self_rollout"), std::string::npos) << rollout.out;
}

TEST_F(LmRun, ACompletedRunContinuesItsSamplePromptsWithItsFinalWeights) {
  const auto path = tmp_ + "/samples.h5";
  auto r = lm(path, {"trainer.sample_prompts=[\"I am \", \"He \"]", "trainer.sample_tokens=20",
                     "trainer.sample_temperature=0"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  {
    results::ResultsReader res(path);
    EXPECT_EQ(res.children("generations"), (std::vector<std::string>{"sample-1", "sample-2"}));
    EXPECT_EQ(res.attr_string_at("generations/sample-1", "prompt"), "I am ");
    EXPECT_EQ(res.attr_string_at("generations/sample-2", "prompt"), "He ");
    EXPECT_EQ(res.attr_string_at("generations/sample-1", "checkpoint"), "final");
    EXPECT_EQ(res.attr_string_at("generations/sample-1", "decoding"), "greedy");
    EXPECT_EQ(res.array("generations/sample-1/ids").values.size(), 5u + 20u);
  }
  // Greedy from the last checkpoint, which holds the final weights: the same text.
  const auto g = run({"generate", path, "data_dir=" + data_dir_, "--prompt", "I am ", "--tokens", "20", "--temperature",
                      "0", "--checkpoint", "last", "-q"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  results::ResultsReader res(path);
  EXPECT_EQ(res.attr_string_at("generations/sample-1", "text") + "\n", g.out);
  // A prompt the vocabulary cannot write is refused before training.
  const auto bad = tmp_ + "/bad_samples.h5";
  r = lm(bad, {"trainer.sample_prompts=[\"I am \xce\xa9\"]"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(testutil::contains(r.err, "(U+03A9)")) << r.err;
  EXPECT_FALSE(fs::exists(bad));
}

TEST_F(LmRun, ABpeModelTrainsOnSentencePiecePiecesAndGeneratesText) {
  const auto path = tmp_ + "/bpe.h5";
  const auto r = lm(path, {"dataset.tokenizer={plugin: sentencepiece, vocab_size: 300}", "dataset.max_chars=200000"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  {
    results::ResultsReader res(path);
    EXPECT_EQ(res.attr_string("status"), "completed");
    const auto val = res.metric("val", "loss");
    ASSERT_EQ(val.size(), 3u);
    EXPECT_LT(val.back(), val.front());
    EXPECT_GT(val.front(), std::log(60.0)) << "a loss per piece: above a character vocabulary's entropy";
  }
  const auto g = run({"generate", path, "data_dir=" + data_dir_, "--prompt", "I am", "--tokens", "8", "--temperature",
                      "0", "--name", "greedy", "-q"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  results::ResultsReader res(path);
  EXPECT_EQ(res.attr_string_at("generations/greedy", "prompt"), "I am");
  const auto ids = res.array("generations/greedy/ids").values;
  EXPECT_EQ(ids.size(), res.array("generations/greedy/prompt_ids").values.size() + 8) << "8 pieces after the prompt's";
  EXPECT_LT(res.array("generations/greedy/prompt_ids").values.size(), 4u) << "\"I am\" in BPE pieces, not characters";
}

TEST_F(LmRun, EvalMeasuresASplitsLossWithAndWithoutHeads) {
  const auto path = tmp_ + "/eval.h5";
  ASSERT_EQ(lm(path, {"trainer.eval_batches=0", "trainer.in_context_early=2", "trainer.in_context_late=15"}).exit_code,
            0);  // val over the whole split, as eval
  auto r = run({"eval", path, "data_dir=" + data_dir_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(testutil::contains(r.out, "val: loss ")) << "val unless told:\n" << r.out;
  r = run({"eval", path, "data_dir=" + data_dir_, "--head-mask", "decoder_self:1:*", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  results::ResultsReader res(path);
  EXPECT_EQ(res.children("eval"), (std::vector<std::string>{"val", "val_masked"}));
  const std::string at = "eval/val";
  EXPECT_EQ(res.attr_string_at(at, "kind"), "language_model");
  EXPECT_EQ(res.attr_string_at(at, "checkpoint"), "best");
  const double loss = res.attr_double_at(at, "loss");
  const auto val = res.metric("val", "loss");
  EXPECT_NEAR(loss, *std::min_element(val.begin(), val.end()), 1e-5) << "the best checkpoint's val loss, as trained";
  EXPECT_NEAR(res.attr_double_at(at, "perplexity"), std::exp(loss), 1e-9 * std::exp(loss));
  // The loss at each position, weighted by its scored labels, is the loss.
  const auto per = res.array(at + "/position_loss").values;
  const auto n = res.array(at + "/position_tokens").values;
  ASSERT_EQ(per.size(), 16u) << "block_size positions";
  double sum = 0, count = 0;
  for (size_t t = 0; t < per.size(); ++t) sum += per[t] * n[t], count += n[t];
  EXPECT_NEAR(sum / count, loss, 1e-4);
  EXPECT_EQ(count, res.attr_double_at(at, "tokens"));
  // Each row's scored and correct labels add up to the split's.
  const auto row_scored = res.array(at + "/row_scored").values, row_correct = res.array(at + "/row_correct").values;
  ASSERT_EQ(row_scored.size(), row_correct.size());
  double scored = 0, correct = 0, exact = 0;
  for (size_t i = 0; i < row_scored.size(); ++i) {
    scored += row_scored[i], correct += row_correct[i], exact += row_scored[i] == row_correct[i];
  }
  EXPECT_EQ(scored, count);
  EXPECT_NEAR(correct / scored, res.attr_double_at(at, "accuracy"), 1e-9);
  EXPECT_NEAR(exact / static_cast<double>(row_scored.size()), res.attr_double_at(at, "exact_match"), 1e-12);
  // The trainer's in-context score at the best report: the loss at position 15 minus position 2's.
  const size_t best = static_cast<size_t>(std::min_element(val.begin(), val.end()) - val.begin());
  const auto early = res.metric("val", "loss_early"), late = res.metric("val", "loss_late");
  const auto score = res.metric("val", "in_context_score");
  ASSERT_EQ(score.size(), val.size());
  EXPECT_NEAR(score[best], late[best] - early[best], 1e-12);
  EXPECT_NEAR(early[best], per[1], 1e-4);
  EXPECT_NEAR(late[best], per[14], 1e-4);
  EXPECT_EQ(res.attr_string_at("eval/val_masked", "head_mask"), "decoder_self:1:*");
  EXPECT_GT(res.attr_double_at("eval/val_masked", "loss"), loss) << "every head off costs loss";
  // What does not apply to a language model, and a split it lacks: one error each.
  for (const auto& [args, needle] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--beam", "2"}, "--beam: run "},
           {{"--split", "test"}, "has no test split; it has train, val"},
           {{"--ensemble", path}, "--ensemble: run "}}) {
    std::vector<std::string> a{"eval", path, "data_dir=" + data_dir_};
    a.insert(a.end(), args.begin(), args.end());
    const auto bad = run(a);
    EXPECT_NE(bad.exit_code, 0) << needle;
    EXPECT_TRUE(testutil::contains(bad.err, needle)) << needle << "\n" << bad.err;
  }
}

TEST_F(LmRun, EvalReadsALongTextThroughAWindowOfTheKvCacheAndItsSinks) {
  // RoPE: relative positions, so rows longer than the training blocks (16) are read as well.
  const auto path = tmp_ + "/stream.h5", text = tmp_ + "/long.txt";
  ASSERT_EQ(lm(path, {"model.attention.scorer=rope"}).exit_code, 0);
  std::string body;
  for (int i = 0; i < 60; ++i) body += "Go.\nHi.\nRun!\nWho?\n";
  testutil::write_file(text, body);
  const auto eval = [&](std::vector<std::string> extra) {
    std::vector<std::string> a{"eval", path, "data_dir=" + data_dir_, "--text", text, "-q"};
    a.insert(a.end(), extra.begin(), extra.end());
    return run(a);
  };
  for (const auto& args : std::vector<std::vector<std::string>>{{"--context", "64"},
                                                                {"--context", "64", "--window", "64"},
                                                                {"--context", "64", "--window", "8", "--sinks", "2"},
                                                                {"--context", "64", "--window", "10"}}) {
    const auto r = eval(args);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  results::ResultsReader res(path);
  EXPECT_EQ(res.children("eval"), (std::vector<std::string>{"long_context64", "long_context64_window10",
                                                            "long_context64_window64", "long_context64_window8_sinks2"}));
  const auto loss_at = [&](const std::string& name) { return res.array("eval/" + name + "/position_loss").values; };
  const auto dense = loss_at("long_context64"), whole = loss_at("long_context64_window64");
  const auto sinks = loss_at("long_context64_window8_sinks2"), window = loss_at("long_context64_window10");
  ASSERT_EQ(dense.size(), 64u) << "--context positions";
  for (size_t t = 0; t < dense.size(); ++t) {
    EXPECT_NEAR(whole[t], dense[t], 1e-4) << "a window of every token is full attention, position " << t;
    if (t < 10) {
      EXPECT_NEAR(sinks[t], dense[t], 1e-4) << "before the cache is full, position " << t;
    }
  }
  EXPECT_NE(std::vector<float>(sinks.begin() + 10, sinks.end()), std::vector<float>(dense.begin() + 10, dense.end()));
  EXPECT_NE(std::vector<float>(sinks.begin() + 10, sinks.end()), std::vector<float>(window.begin() + 10, window.end()))
      << "2 sinks and 8 recent tokens are not the 10 latest";
  const std::string at = "eval/long_context64_window8_sinks2";
  EXPECT_EQ(res.attr_double_at(at, "context"), 64);
  EXPECT_EQ(res.attr_double_at(at, "window"), 8);
  EXPECT_EQ(res.attr_double_at(at, "sinks"), 2);
  EXPECT_EQ(res.attr_double_at("eval/long_context64", "window"), 0);
  EXPECT_EQ(res.attr_double_at(at, "tokens"), res.attr_double_at("eval/long_context64", "tokens"));

  // Bad input: one error each, the file unchanged.
  const auto absolute = tmp_ + "/absolute.h5", linear = tmp_ + "/linear.h5";
  ASSERT_EQ(lm(absolute).exit_code, 0);  // sinusoidal positions, max_len 64
  ASSERT_EQ(lm(linear, {"model.attention.scorer=linear"}).exit_code, 0);
  for (const auto& [file, args, needle] : std::vector<std::tuple<std::string, std::vector<std::string>, std::string>>{
           {path, {"--sinks", "2"}, "--window"},
           {path, {"--context", "100000"}, "fewer than one row of --context 100000 + 1"},
           {path, {"--window", "0"}, "--window"},
           {absolute, {"--context", "100"}, "rows of 100 positions are beyond the 64 of the model's absolute"},
           {absolute, {"--context", "100", "--window", "60", "--sinks", "8"}, "--window + --sinks 64 at most"},
           {linear, {"--context", "64", "--window", "8"}, "recurrent state (linear attention)"}}) {
    const auto before = testutil::read_file(file);
    std::vector<std::string> a{"eval", file, "data_dir=" + data_dir_, "--text", text};
    a.insert(a.end(), args.begin(), args.end());
    const auto bad = run(a);
    EXPECT_NE(bad.exit_code, 0) << needle;
    EXPECT_TRUE(testutil::contains(bad.err, needle)) << needle << "\n" << bad.err;
    EXPECT_EQ(testutil::read_file(file), before) << needle << ": the results file is unchanged";
  }
  const auto no_text = run({"eval", path, "data_dir=" + data_dir_, "--context", "64"});
  EXPECT_NE(no_text.exit_code, 0);
  EXPECT_TRUE(testutil::contains(no_text.err, "--text")) << no_text.err;
}

TEST_F(LmRun, EvalRecomputesEachWindowAfreshAsStreamingLlmsBaseline) {
  // --recompute: every query's window run from scratch at positions 0 ... W - 1, so also a model
  // with absolute positions or linear attention (whose cache cannot be evicted) can be read so.
  const auto rope = tmp_ + "/rope.h5", absolute = tmp_ + "/absolute.h5", linear = tmp_ + "/linear.h5";
  const auto text = tmp_ + "/long.txt";
  ASSERT_EQ(lm(rope, {"model.attention.scorer=rope"}).exit_code, 0);
  ASSERT_EQ(lm(absolute).exit_code, 0);  // sinusoidal positions, max_len 64
  ASSERT_EQ(lm(linear, {"model.attention.scorer=linear"}).exit_code, 0);
  std::string body;
  for (int i = 0; i < 60; ++i) body += "Go.\nHi.\nRun!\nWho?\n";
  testutil::write_file(text, body);
  const auto eval = [&](const std::string& file, std::vector<std::string> extra) {
    std::vector<std::string> a{"eval", file, "data_dir=" + data_dir_, "--text", text, "-q"};
    a.insert(a.end(), extra.begin(), extra.end());
    return run(a);
  };
  for (const auto& args : std::vector<std::vector<std::string>>{{"--context", "64"},
                                                                {"--context", "64", "--window", "10"},
                                                                {"--context", "64", "--window", "10", "--recompute"}}) {
    const auto r = eval(rope, args);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  results::ResultsReader res(rope);
  const std::string at = "eval/long_context64_window10_recompute";
  ASSERT_TRUE(res.has(at)) << "default name";
  EXPECT_EQ(res.attr_double_at(at, "recompute"), 1);
  EXPECT_EQ(res.attr_double_at(at, "window"), 10);
  EXPECT_EQ(res.attr_double_at("eval/long_context64_window10", "recompute"), 0);
  const auto dense = res.array("eval/long_context64/position_loss").values;
  const auto cached = res.array("eval/long_context64_window10/position_loss").values;
  const auto fresh = res.array(at + "/position_loss").values;
  ASSERT_EQ(fresh.size(), 64u);
  for (size_t t = 0; t < 10; ++t) EXPECT_NEAR(fresh[t], dense[t], 1e-4) << "the window holds the prefix, position " << t;
  EXPECT_NE(std::vector<float>(fresh.begin() + 10, fresh.end()), std::vector<float>(cached.begin() + 10, cached.end()))
      << "the cache's kept keys saw older tokens in the layers below; a recomputed window did not";

  // Models the evicting cache refuses: absolute positions past max_len are never reached, and
  // linear attention is run afresh like any other.
  for (const auto& file : {absolute, linear}) {
    const auto r = eval(file, {"--context", "100", "--window", "16", "--recompute"});
    ASSERT_EQ(r.exit_code, 0) << file << "\n" << r.out << r.err;
    EXPECT_TRUE(results::ResultsReader(file).has("eval/long_context100_window16_recompute")) << file;
  }

  // Bad input: one error each, the file unchanged.
  for (const auto& [args, needle] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--recompute"}, "--window"},
           {{"--window", "8", "--sinks", "2", "--recompute"}, "--sinks"},
           {{"--window", "70", "--recompute", "--context", "100"}, "give --window 64 at most"}}) {
    const auto before = testutil::read_file(absolute);
    const auto bad = eval(absolute, args);
    EXPECT_NE(bad.exit_code, 0) << needle;
    EXPECT_TRUE(testutil::contains(bad.err, needle)) << needle << "\n" << bad.err;
    EXPECT_EQ(testutil::read_file(absolute), before) << needle << ": the results file is unchanged";
  }
}

TEST_F(LmRun, HeadsAreSwitchedOffInTrainingAblatedAndPrunedOnTheLoss) {
  const auto path = tmp_ + "/masked.h5";
  const auto r = lm(path, {"interventions.head_mask={decoder_self: {1: [2]}}"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto ablate = run({"ablate", path, "data_dir=" + data_dir_, "-q"});
  ASSERT_EQ(ablate.exit_code, 0) << ablate.out << ablate.err;
  const auto prune = run({"prune", path, "data_dir=" + data_dir_, "--step", "1", "-q"});
  ASSERT_EQ(prune.exit_code, 0) << prune.out << prune.err;
  results::ResultsReader res(path);
  // The head the run trained without stays off: its row is NaN; the other's loss rises when it goes.
  const auto delta = res.array("ablation/val/delta_loss").values;
  ASSERT_EQ(delta.size(), 2u);
  EXPECT_TRUE(std::isfinite(delta[0]));
  EXPECT_TRUE(std::isnan(delta[1]));
  EXPECT_FALSE(res.has("ablation/val/bleu")) << "a language model has no BLEU";
  EXPECT_EQ(res.attr_string_at("ablation/val", "decoding"), "none");
  EXPECT_EQ(res.attr_string_at("ablation/val", "trained_head_mask"), "decoder_self:1:2");
  EXPECT_TRUE(res.has("pruning/importance_val/loss"));
  // Source tokens to blank out: a language model has none.
  const auto tokens = run({"ablate", path, "data_dir=" + data_dir_, "--tokens"});
  EXPECT_NE(tokens.exit_code, 0);
  EXPECT_NE(tokens.err.find("has no source"), std::string::npos) << tokens.err;
}

TEST_F(LmRun, GenerateRefusesBadInputWithoutTouchingTheFile) {
  const auto path = tmp_ + "/bad-gen.h5";
  ASSERT_EQ(lm(path).exit_code, 0);
  const auto before = testutil::read_file(path);
  const auto expect_error = [&](std::vector<std::string> extra, const std::string& needle) {
    std::vector<std::string> args{"generate", path, "data_dir=" + data_dir_};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run(args);
    EXPECT_NE(r.exit_code, 0) << needle;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in:\n" << r.err;
    EXPECT_EQ(testutil::read_file(path), before) << needle << ": the results file is unchanged";
  };
  expect_error({"--prompt", "I am \xce\xa9"}, "'\xce\xa9' (U+03A9) at byte 5 is not in the vocabulary");
  expect_error({"--prompt", "I", "--tokens", "0"}, "--tokens");
  expect_error({"--prompt", "I", "--tokens", "64"}, "beyond the 64");
  expect_error({"--prompt", ""}, "--prompt is empty");
  expect_error({"--prompt", "I", "--top-p", "nan"}, "--top-p");
  expect_error({"--prompt", "I", "--name", "a/b"}, "--name");
  // A decoding option of runner eval names the command that decodes from a language model.
  const auto e = run({"eval", path, "data_dir=" + data_dir_, "--beam", "3"});
  EXPECT_NE(e.exit_code, 0);
  EXPECT_NE(e.err.find("runner generate"), std::string::npos) << e.err;
}

}  // namespace
}  // namespace e2e_lm_test
