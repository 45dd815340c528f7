// End to end: the real runner binary on small configs, read back from its results files.
#include <attnlab/results/tensor.hpp>
#include <attnlab/config/node.hpp>
#include <attnlab/data/dataset.hpp>
#include <attnlab/plugin/registry.hpp>
#include <attnlab/results/reader.hpp>

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <tuple>

#include "testing/runner.hpp"
#include "testing/results.hpp"
#include "testing/testing.hpp"

namespace {
using namespace attnlab;
using testutil::contains;
namespace fs = std::filesystem;

class RunnerTest : public testutil::RunnerFixture {
 protected:
  void SetUp() override {
    RunnerFixture::SetUp();
    if (!HasFatalFailure()) {
      REQUIRE_FRA_ENG();
    }
  }
  std::string scratch_prefix() const override { return "attnlab-e2e"; }

  std::vector<std::string> tiny(const std::string& results, std::vector<std::string> extra = {}) {
    std::vector<std::string> a{"experiments/tests/tiny_fra_eng.yaml", "--results", results, "data_dir=" + data_dir_};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
};

TEST_F(RunnerTest, TwoEpochRunWritesACompleteResultsFile) {
  auto path = tmp_ + "/tiny.h5";
  auto r = run(tiny(path));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("epoch 2/2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("go . => "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mean BLEU"), std::string::npos) << r.out;

  results::ResultsReader rd(path);
  EXPECT_EQ(rd.attr_string("status"), "completed");
  EXPECT_EQ(rd.attr_string("experiment"), "tiny_fra_eng");
  EXPECT_EQ(rd.attr_string("device"), "cpu");
  EXPECT_EQ(rd.attr_int("seed"), 1);  // the base experiment's seed
  EXPECT_FALSE(rd.attr_string("finished").empty());
  EXPECT_FALSE(rd.attr_strings("plugins").empty());
  EXPECT_NE(rd.config().find("num_hiddens: 32"), std::string::npos) << rd.config();
  auto loss = rd.metric("train", "loss");
  ASSERT_EQ(loss.size(), 2u);
  EXPECT_LT(loss[1], loss[0]);  // two epochs of Adam on this data always lower the loss
  EXPECT_EQ(rd.metric("val", "loss").size(), 2u);
  EXPECT_EQ(rd.metric("train", "tokens_per_s").size(), 2u);
  auto samples = rd.samples();
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[3].source, "i'm home .");
  EXPECT_EQ(samples[3].reference, "je suis chez moi .");
  // Attention for "i'm home .": encoder [1 block, 2 heads, 9, 9] with the padded source as labels.
  auto enc = testutil::read_attention(rd, "i'm home .", "encoder_self");
  ASSERT_EQ(enc.weights.dim(), 4);
  EXPECT_EQ(enc.weights.size(0), 1);
  EXPECT_EQ(enc.weights.size(1), 2);
  EXPECT_EQ(enc.weights.size(2), 9);
  ASSERT_EQ(enc.key_tokens.size(), 9u);
  EXPECT_EQ(enc.key_tokens[0], "i'm");
  EXPECT_EQ(enc.key_tokens[3], "<eos>");
  // Rows over valid keys sum to 1.
  EXPECT_ALLCLOSE(enc.weights.sum(-1), torch::ones({1, 2, 9}), 1e-4, 1e-4);
  auto cross = testutil::read_attention(rd, "i'm home .", "decoder_cross");
  EXPECT_EQ(cross.weights.size(3), 9);
  EXPECT_EQ(cross.query_tokens.at(0), "<bos>");
  auto self = testutil::read_attention(rd, "i'm home .", "decoder_self");
  EXPECT_EQ(self.weights.size(2), self.weights.size(3));
  // Each map says what it is: its layers, heads and the tokens on each axis.
  for (const auto& [module, queries, keys] :
       {std::tuple{"encoder_self", "source", "source"}, std::tuple{"decoder_self", "target", "target"},
        std::tuple{"decoder_cross", "target", "source"}}) {
    const auto att = testutil::read_attention(rd, "i'm home .", module);
    EXPECT_EQ(att.layers, (std::vector<int64_t>{0})) << module;
    EXPECT_EQ(att.query_side, queries) << module;
    EXPECT_EQ(att.key_side, keys) << module;
    EXPECT_EQ(rd.attr_double_at(std::string("attention/i'm home ./") + module, "heads"), 2.0) << module;
  }
}

TEST_F(RunnerTest, EvalTranslatesAFraEngSplitAndStoresItsScores) {
  auto path = tmp_ + "/eval.h5";
  auto r = run(tiny(path));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto e = run({"eval", path, "data_dir=" + data_dir_, "--split", "val", "-q"});
  ASSERT_EQ(e.exit_code, 0) << e.out << e.err;
  EXPECT_NE(e.out.find("val greedy: BLEU = "), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("129 sentences"), std::string::npos) << e.out;  // d2l's 128 + 1 validation pairs
  results::ResultsReader rd(path);
  EXPECT_EQ(rd.attr_string("status"), "completed");  // an evaluation leaves the run's status alone
  const auto refs = rd.strings("eval/val/references"), hyps = rd.strings("eval/val/hypotheses");
  ASSERT_EQ(refs.size(), 129u);
  ASSERT_EQ(hyps.size(), 129u);
  EXPECT_EQ(rd.strings("eval/val/sources").front().find('\t'), std::string::npos);
  EXPECT_FALSE(refs.front().empty());
  const double bleu = rd.attr_double_at("eval/val", "bleu");
  EXPECT_GE(bleu, 0.0);
  EXPECT_LE(bleu, 100.0);
  // fra-eng has no test split: refused, naming it.
  auto bad = run({"eval", path, "data_dir=" + data_dir_, "--split", "test"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("no 'test' split"), std::string::npos) << bad.err;
}

// `runner eval --source F --reference F`: the user's own parallel text, plain or gzipped, scored
// as a split is. The validation split written out as files gives the split's own hypotheses.
TEST_F(RunnerTest, EvalScoresAParallelTextPairGivenAsFiles) {
  auto path = tmp_ + "/files.h5";
  auto r = run(tiny(path));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto e = run({"eval", path, "data_dir=" + data_dir_, "--split", "val", "-q"});
  ASSERT_EQ(e.exit_code, 0) << e.out << e.err;
  std::vector<std::string> sources, references, hypotheses;
  {
    results::ResultsReader rd(path);
    sources = rd.strings("eval/val/sources");
    references = rd.strings("eval/val/references");
    hypotheses = rd.strings("eval/val/hypotheses");
  }
  auto write = [&](const std::string& file, const std::vector<std::string>& lines, const char* eol) {
    std::ofstream out(file, std::ios::binary);
    for (const auto& l : lines) out << l << eol;
  };
  write(tmp_ + "/val.en", sources, "\n");
  write(tmp_ + "/val.fr", references, "\r\n");  // Windows line ends are read as well
  ASSERT_EQ(std::system(fmt::format("gzip -kf {}/val.fr", tmp_).c_str()), 0);
  auto f = run({"eval", path, "data_dir=" + data_dir_, "--source", tmp_ + "/val.en", "--reference", tmp_ + "/val.fr.gz",
                "--batch-size", "50"});
  ASSERT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_TRUE(contains(f.out, "val greedy: BLEU = ")) << f.out;  // named after the file: val.en -> "val"
  EXPECT_TRUE(contains(f.out, "129 sentences")) << f.out;
  {
    // The second evaluation went to /eval/val again (same name): same sentences, same outputs.
    results::ResultsReader rd(path);
    EXPECT_EQ(rd.strings("eval/val/hypotheses"), hypotheses);
    EXPECT_EQ(rd.strings("eval/val/references"), references);
    EXPECT_EQ(rd.attr_string_at("eval/val", "split"), "file");
    EXPECT_TRUE(rd.attr_string_at("eval/val", "reference_file").ends_with("/val.fr.gz"));
  }
  // Beam search over a file, under a name of its own.
  auto b = run({"eval", path, "data_dir=" + data_dir_, "--source", tmp_ + "/val.en", "--reference", tmp_ + "/val.fr",
                "--beam", "3", "--name", "mine", "-q"});
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  {
    results::ResultsReader rd(path);
    EXPECT_EQ(rd.strings("eval/mine/hypotheses").size(), 129u);
    EXPECT_EQ(rd.attr_double_at("eval/mine", "beam_size"), 3.0);
  }
  // Files that do not pair up, or an empty or missing one: one error naming them, nothing written.
  write(tmp_ + "/short.fr", std::vector<std::string>(references.begin(), references.end() - 1), "\n");
  auto bad = run({"eval", path, "data_dir=" + data_dir_, "--source", tmp_ + "/val.en", "--reference",
                  tmp_ + "/short.fr", "--name", "bad"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(contains(bad.err, "--source " + tmp_ + "/val.en has 129 lines but --reference " + tmp_ +
                                    "/short.fr has 128: a parallel pair needs one sentence per line"))
      << bad.err;
  write(tmp_ + "/empty.fr", {}, "\n");
  bad = run({"eval", path, "data_dir=" + data_dir_, "--source", tmp_ + "/val.en", "--reference", tmp_ + "/empty.fr",
             "--name", "bad"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(contains(bad.err, "--reference " + tmp_ + "/empty.fr is empty")) << bad.err;
  bad = run({"eval", path, "data_dir=" + data_dir_, "--source", tmp_ + "/nope.en", "--reference", tmp_ + "/val.fr",
             "--name", "bad"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(contains(bad.err, tmp_ + "/nope.en")) << bad.err;
  bad = run({"eval", path, "--source", tmp_ + "/val.en"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_TRUE(contains(bad.err, "--reference")) << bad.err;
  bad = run({"eval", path, "--source", tmp_ + "/val.en", "--reference", tmp_ + "/val.fr", "--split", "val"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_TRUE(contains(bad.err, "--split")) << bad.err;
  // A NUL byte is no text: refused with its line and column, not translated cut short.
  {
    std::ofstream out(tmp_ + "/nul.en", std::ios::binary);
    out << sources[0] << "\n" << sources[1].substr(0, 2) << '\0' << sources[1].substr(2) << "\n";
    for (size_t i = 2; i < sources.size(); ++i) out << sources[i] << "\n";
  }
  bad = run({"eval", path, "data_dir=" + data_dir_, "--source", tmp_ + "/nul.en", "--reference", tmp_ + "/val.fr",
             "--name", "bad"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(contains(bad.err, "data error: --source " + tmp_ + "/nul.en:2: a NUL byte at column 3")) << bad.err;
  EXPECT_FALSE(results::ResultsReader(path).has("eval/bad"));
  // --name is one name under /eval: "a/b" would be a nested group that compare and report miss.
  for (const char* name : {"a/b", ".hidden", "a b"}) {
    bad = run({"eval", path, "data_dir=" + data_dir_, "--split", "val", "--name", name});
    EXPECT_EQ(bad.exit_code, 1) << name;
    EXPECT_TRUE(contains(bad.err, fmt::format("config error: --name '{}': expected", name))) << bad.err;
  }
  EXPECT_FALSE(results::ResultsReader(path).has("eval/a"));
}

TEST_F(RunnerTest, BatchesExportsWhatTheTrainerDraws) {
  auto path = tmp_ + "/batches.h5";
  auto r =
      run({"batches", "experiments/tests/tiny_fra_eng.yaml", "data_dir=" + data_dir_, "--epochs", "2", "-o", path});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("512 training rows, 4 batches per epoch"), std::string::npos) << r.out;
  results::ResultsReader rd(path);
  EXPECT_EQ(rd.attr_int("seed"), 1);
  EXPECT_EQ(rd.attr_int("batches_per_epoch"), 4);
  EXPECT_EQ(rd.attr_int("pad_id"), 5);
  // The fra_eng plugin itself, as the seq2seq trainer calls it: batches(train, shuffle, seed + epoch).
  plugin::Registry registry;
  registry.discover();
  plugin::BuildContext ctx;
  ctx.registry = &registry;
  auto ds = registry.create<data::Dataset>(
      config::parse_yaml("{plugin: fra_eng, batch_size: 128, num_steps: 9, num_train: 512, num_val: 128}", "t.yaml"),
      ctx);
  ds->prepare(data_dir_);
  for (int64_t e = 1; e <= 2; ++e) {
    const auto expected = ds->batches(data::Split::Train, true, 1 + static_cast<uint64_t>(e));
    ASSERT_EQ(expected.size(), 4u);
    for (size_t i = 0; i < expected.size(); ++i) {
      const auto at = "epoch_" + std::to_string(e) + "/" + std::to_string(i) + "/";
      EXPECT_TRUE(torch::equal(results::read_tensor(rd, at + "src").to(torch::kLong), expected[i].src)) << at;
      EXPECT_TRUE(torch::equal(results::read_tensor(rd, at + "tgt_in").to(torch::kLong), expected[i].tgt_in)) << at;
      EXPECT_TRUE(torch::equal(results::read_tensor(rd, at + "tgt_out").to(torch::kLong), expected[i].tgt_out)) << at;
      EXPECT_TRUE(torch::equal(results::read_tensor(rd, at + "tgt_valid_lens").to(torch::kLong), expected[i].tgt_valid_lens)) << at;
    }
  }
  // An existing -o file (a results file, perhaps) is replaced only when asked (on a copy: `rd` holds
  // the export open).
  const auto kept = tmp_ + "/kept.h5";
  std::filesystem::copy_file(path, kept);
  const auto before = testutil::read_file(kept);
  r = run({"batches", "experiments/tests/tiny_fra_eng.yaml", "data_dir=" + data_dir_, "-o", kept});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: batches: -o " + kept + " already exists; replace it with --overwrite, or name another file\n");
  EXPECT_EQ(testutil::read_file(kept), before);
  r = run({"batches", "experiments/tests/tiny_fra_eng.yaml", "data_dir=" + data_dir_, "-o", kept, "--overwrite"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(results::ResultsReader(kept).attr_int("epochs"), 1);
  EXPECT_FALSE(torch::equal(results::read_tensor(rd, "epoch_1/0/src"), results::read_tensor(rd, "epoch_2/0/src")));  // reshuffled
}

TEST_F(RunnerTest, ResultsFileReadsWithH5py) {
  auto python = testutil::env_or("ATTNLAB_PYTHON", "");
  ATTNLAB_REQUIRE(!python.empty() && fs::exists(python), "the venv's python (ATTNLAB_PYTHON='" << python << "')");
  auto path = tmp_ + "/h5py.h5";
  auto r = run(tiny(path, {"trainer.max_epochs=1"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto cmd = fmt::format("'{}' '{}/tests/python/check_results.py' '{}'", python, source_, path);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST_F(RunnerTest, SigintLeavesAnInterruptedReadableFile) {
  auto path = tmp_ + "/interrupted.h5";
  auto r = run(tiny(path, {"trainer.max_epochs=500"}), [&](pid_t pid, const std::string& out) {
    // Wait for the first epoch line, then interrupt.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (std::chrono::steady_clock::now() < deadline &&
           testutil::read_file(out).find("epoch   1/500") == std::string::npos) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(pid, SIGINT);
  });
  EXPECT_EQ(r.exit_code, 130) << r.out << r.err;
  results::ResultsReader rd(path);
  EXPECT_EQ(rd.attr_string("status"), "interrupted");
  auto loss = rd.metric("train", "loss");
  EXPECT_GE(loss.size(), 1u);
  EXPECT_LT(loss.size(), 500u);
}

TEST_F(RunnerTest, LabelSmoothingTrainsTheSmoothedLossAndValidatesThePlainOne) {
  auto plain_path = tmp_ + "/plain.h5", smooth_path = tmp_ + "/smooth.h5";
  auto plain = run(tiny(plain_path, {"trainer.max_epochs=1"}));
  ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  auto smooth = run(tiny(smooth_path, {"trainer.max_epochs=1", "trainer.label_smoothing=0.1"}));
  ASSERT_EQ(smooth.exit_code, 0) << smooth.out << smooth.err;
  results::ResultsReader a(plain_path), b(smooth_path);
  EXPECT_FALSE(a.has("metrics/val/smoothed_loss"));
  ASSERT_EQ(b.metric("val", "smoothed_loss").size(), 1u);
  ASSERT_EQ(b.metric("val", "loss").size(), 1u);
  // The same seed draws the same first batch and weights: the first step's smoothed objective
  // differs from the plain one, so the runs part after it.
  EXPECT_NE(a.metric("train", "loss")[0], b.metric("train", "loss")[0]);
  EXPECT_NE(b.metric("val", "smoothed_loss")[0], b.metric("val", "loss")[0]);
  EXPECT_NE(b.config().find("label_smoothing: 0.1"), std::string::npos) << b.config();

  auto bad = run(tiny(tmp_ + "/never.h5", {"trainer.label_smoothing=1"}));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("trainer.label_smoothing"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(tmp_ + "/never.h5"));
}

TEST_F(RunnerTest, RDropRunsEachBatchTwiceAndPullsThePassesTogether) {
  // Without dropout the two passes are one: R-Drop's objective is the plain loss and the run the
  // plain run (up to the doubled batch's rounding). With the file's dropout 0.2 the passes differ,
  // the KL term counts, and the runs part.
  const std::vector<std::string> no_dropout{"trainer.max_epochs=1", "model.encoder.dropout=0", "model.decoder.dropout=0"};
  auto with = [](std::vector<std::string> a, const std::string& more) {
    a.push_back(more);
    return a;
  };
  struct Run {
    std::string path;
    std::vector<std::string> overrides;
  };
  const std::vector<Run> runs{{tmp_ + "/plain0.h5", no_dropout},
                              {tmp_ + "/rdrop0.h5", with(no_dropout, "trainer.rdrop_alpha=5")},
                              {tmp_ + "/plain.h5", {"trainer.max_epochs=1"}},
                              {tmp_ + "/rdrop.h5", {"trainer.max_epochs=1", "trainer.rdrop_alpha=5"}}};
  std::vector<double> train, val;
  for (const auto& r : runs) {
    auto out = run(tiny(r.path, r.overrides));
    ASSERT_EQ(out.exit_code, 0) << out.out << out.err;
    results::ResultsReader rd(r.path);
    train.push_back(rd.metric("train", "loss").at(0));
    val.push_back(rd.metric("val", "loss").at(0));
  }
  EXPECT_NEAR(train[1], train[0], 1e-4 * train[0]);
  EXPECT_NEAR(val[1], val[0], 1e-4 * val[0]);
  EXPECT_NE(train[3], train[2]);
  EXPECT_NE(val[3], val[2]);
  EXPECT_TRUE(std::isfinite(train[3]) && std::isfinite(val[3]));
  EXPECT_NE(results::ResultsReader(runs[3].path).config().find("rdrop_alpha: 5"), std::string::npos);

  auto bad = run(tiny(tmp_ + "/never.h5", {"trainer.rdrop_alpha=-1"}));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("trainer.rdrop_alpha"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(tmp_ + "/never.h5"));
}

TEST_F(RunnerTest, AdamBetasReachTheOptimizer) {
  auto a_path = tmp_ + "/default.h5", b_path = tmp_ + "/beta2.h5";
  auto a = run(tiny(a_path, {"trainer.max_epochs=1"}));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  auto b = run(tiny(b_path, {"trainer.max_epochs=1", "trainer.adam_beta2=0.98"}));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  results::ResultsReader ra(a_path), rb(b_path);
  // The same seed, data and first step (Adam's first update is sign(g) * lr whatever beta2 is);
  // the later steps differ.
  EXPECT_NE(ra.metric("train", "loss")[0], rb.metric("train", "loss")[0]);
  EXPECT_NE(rb.config().find("adam_beta2: 0.98"), std::string::npos) << rb.config();
  auto bad = run(tiny(tmp_ + "/never.h5", {"trainer.adam_beta2=1"}));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("trainer.adam_beta2"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(tmp_ + "/never.h5"));
}

TEST_F(RunnerTest, UnknownOverrideKeyIsOneClearError) {
  auto path = tmp_ + "/never.h5";
  auto r = run(tiny(path, {"model.encoder.num_hiden=3"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("config error"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("model.encoder.num_hiden"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean 'num_hiddens'"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path));  // nothing is recorded for a run that never started
}

TEST_F(RunnerTest, ImpossibleValueNamesFileLineAndPath) {
  // 3 heads cannot divide 32 hidden units; the error points into the experiment file.
  auto r = run(tiny(tmp_ + "/never.h5", {"model.encoder.num_heads=3"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("model.encoder.num_heads"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("divide"), std::string::npos) << r.err;
}

TEST_F(RunnerTest, PluginsListsEveryKindAndShowsOptions) {
  auto r = run({"plugins"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* want :
       {"scorer", "dot_product", "encoder", "decoder", "transformer", "dataset", "fra_eng", "trainer", "seq2seq"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
  auto one = run({"plugins", "encoder/transformer"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("num_hiddens"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("first|last"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("\n  fused "), std::string::npos) << one.out;  // shared by the transformer plugins
  // One line per option: a string default ends its cell, not the line (it used to carry YAML's
  // line break, and the description went to the next line).
  std::istringstream lines(one.out);
  int seen = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("  norm ") || line.starts_with("  positional_encoding ")) {
      ++seen;
      EXPECT_TRUE(testutil::contains(line, "string") &&
                  testutil::contains(line, "[first|last]") != testutil::contains(line, "[auto|sinusoidal|learned|none]"))
          << line;
    }
  }
  EXPECT_EQ(seen, 2) << one.out;
  auto bad = run({"plugins", "transfomer"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("did you mean 'transformer'"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("found with --plugin-path DIR or ATTNLAB_PLUGIN_PATH=DIR"), std::string::npos) << bad.err;
}

}  // namespace
