// End to end with the real runner: head masks (Michel et al. 2019) from the experiment file
// (interventions.head_mask, while training and evaluating) and the command line (runner eval
// --head-mask), and `runner ablate`'s single-head ablation and gradient importance, written to
// /ablation/<name>. Bad masks are one clear error each, before anything is written.
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include "testing/runner.hpp"
#include "testing/testing.hpp"

namespace {
using namespace attnlab;
namespace fs = std::filesystem;

class HeadMaskRun : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-headmask"; }

  /// One tiny synthetic run (1+1 blocks, 2 heads: 6 heads in encoder_self, decoder_self,
  /// decoder_cross), trained once for the suite's tests that only read it.
  std::string trained() {
    const auto path = tmp_ + "/tiny.h5";
    auto r = run(testutil::tiny_synthetic(path, {"trainer.max_epochs=2", "-q"}));
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return path;
  }
};

TEST_F(HeadMaskRun, AblateWritesOneRowPerHeadThatEvalWithTheSameMaskReproduces) {
  const auto path = trained();
  auto ab = run({"ablate", path, "--split", "val"});
  ASSERT_EQ(ab.exit_code, 0) << ab.out << ab.err;
  EXPECT_NE(ab.out.find("6 heads, val split: full model loss"), std::string::npos) << ab.out;
  auto rd_ptr = std::make_unique<results::ResultsReader>(path);  // closed before other processes write
  auto& rd = *rd_ptr;
  const auto modules = rd.strings("ablation/val/module");
  const auto layers = rd.array("ablation/val/layer"), heads = rd.array("ablation/val/head");
  const std::vector<std::string> expect{"encoder_self", "encoder_self", "decoder_self",
                                        "decoder_self", "decoder_cross", "decoder_cross"};
  EXPECT_EQ(modules, expect);
  ASSERT_EQ(heads.numel(), 6);
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(layers.values[i], 1.0f);
    EXPECT_EQ(heads.values[i], static_cast<float>(i % 2 + 1));
  }
  const double base_loss = rd.attr_double_at("ablation/val", "base_loss");
  const double base_bleu = rd.attr_double_at("ablation/val", "base_bleu");
  const auto loss = rd.array("ablation/val/loss"), delta = rd.array("ablation/val/delta_loss");
  const auto bleu = rd.array("ablation/val/bleu"), imp = rd.array("ablation/val/importance");
  const auto norm = rd.array("ablation/val/importance_normalized");
  int64_t changed = 0;
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(delta.values[i], loss.values[i] - base_loss, 1e-5);
    changed += std::abs(delta.values[i]) > 1e-6;
    EXPECT_GT(imp.values[i], 0.0f) << "every head of a trained model moves the loss";
  }
  EXPECT_GT(changed, 3) << "switching a head off changed nothing";
  for (int64_t s = 0; s < 3; ++s) {  // Michel's normalisation: each layer's importances have L2 norm 1
    EXPECT_NEAR(std::hypot(norm.values[2 * s], norm.values[2 * s + 1]), 1.0, 1e-5);
  }
  rd_ptr.reset();
  // The same head switched off by runner eval's --head-mask decodes to the same BLEU.
  auto ev = run({"eval", path, "--split", "val", "--head-mask", "decoder_cross:1:2", "-q"});
  ASSERT_EQ(ev.exit_code, 0) << ev.out << ev.err;
  EXPECT_NE(ev.out.find("(head mask decoder_cross:1:2)"), std::string::npos) << ev.out;
  {
    results::ResultsReader after(path);
    EXPECT_NEAR(after.attr_double_at("eval/val_masked", "bleu"), bleu.values[5], 1e-4);
    EXPECT_EQ(after.attr_string_at("eval/val_masked", "head_mask"), "decoder_cross:1:2");
  }
  auto full = run({"eval", path, "--split", "val", "-q"});
  ASSERT_EQ(full.exit_code, 0) << full.err;
  EXPECT_NEAR(results::ResultsReader(path).attr_double_at("eval/val", "bleu"), base_bleu, 1e-9);

  // The gradient alone, under another name: the first table stays.
  auto grad = run({"ablate", path, "--importance", "gradient", "--name", "grad", "-q"});
  ASSERT_EQ(grad.exit_code, 0) << grad.out << grad.err;
  EXPECT_NE(grad.out.find("the most important head by gradient"), std::string::npos) << grad.out;
  results::ResultsReader both(path);
  const auto again = both.array("ablation/grad/importance");
  for (int64_t i = 0; i < 6; ++i) EXPECT_NEAR(again.values[i], imp.values[i], 1e-6 + 1e-4 * imp.values[i]);
  EXPECT_FALSE(both.has("ablation/grad/loss"));
  EXPECT_TRUE(both.has("ablation/val/loss"));
}

TEST_F(HeadMaskRun, AnExperimentTrainsWithHeadsOffAndRecordsTheMask) {
  const auto path = tmp_ + "/masked.h5";
  auto r = run(testutil::tiny_synthetic(path, {"trainer.max_epochs=1", "interventions.head_mask={encoder_self: {1: 2}, decoder_cross: '*'}"}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("head mask encoder_self:1:2,decoder_cross:*:*: 3 of 6 heads off"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("every head of decoder_cross layer 1 is off"), std::string::npos) << r.out;
  auto rd_ptr = std::make_unique<results::ResultsReader>(path);  // closed before other processes write
  auto& rd = *rd_ptr;
  EXPECT_EQ(rd.status(), results::Status::Completed);
  EXPECT_EQ(rd.array("interventions/head_mask/encoder_self").values, (std::vector<float>{1.0f, 0.0f}));
  EXPECT_EQ(rd.array("interventions/head_mask/decoder_self").values, (std::vector<float>{1.0f, 1.0f}));
  EXPECT_EQ(rd.array("interventions/head_mask/decoder_cross").values, (std::vector<float>{0.0f, 0.0f}));
  EXPECT_EQ(rd.attr_string_at("interventions/head_mask", "text"), "encoder_self:1:2,decoder_cross:*:*");
  EXPECT_EQ(rd.attr_double_at("interventions/head_mask", "heads_off"), 3.0);
  // With no cross-attention the decoder never sees the source: what it learns is the target's own
  // statistics, so its val loss stays far above an unmasked run's.
  auto plain = run(testutil::tiny_synthetic(tmp_ + "/plain.h5", {"trainer.max_epochs=1"}));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto masked_loss = rd.metric("val", "loss"), plain_loss = results::ResultsReader(tmp_ + "/plain.h5").metric("val", "loss");
  ASSERT_FALSE(masked_loss.empty());
  EXPECT_NE(masked_loss.back(), plain_loss.back());

  rd_ptr.reset();
  // Its heads stay off wherever the run is rebuilt: runner eval and runner ablate apply its mask.
  auto ev = run({"eval", path, "--split", "val", "-q"});
  ASSERT_EQ(ev.exit_code, 0) << ev.out << ev.err;
  auto ab = run({"ablate", path, "--no-bleu", "-q"});
  ASSERT_EQ(ab.exit_code, 0) << ab.out << ab.err;
  results::ResultsReader after(path);
  EXPECT_EQ(after.attr_string_at("eval/val", "head_mask"), "encoder_self:1:2,decoder_cross:*:*");
  EXPECT_EQ(after.attr_string_at("ablation/val", "trained_head_mask"), "encoder_self:1:2,decoder_cross:*:*");
  const auto loss = after.array("ablation/val/loss");
  ASSERT_EQ(loss.numel(), 6);
  // encoder_self 1, decoder_self 1 and 2 measured; encoder_self 2 and decoder_cross off in training.
  EXPECT_FALSE(std::isnan(loss.values[0]));
  EXPECT_TRUE(std::isnan(loss.values[1]));
  EXPECT_FALSE(std::isnan(loss.values[2]));
  EXPECT_TRUE(std::isnan(loss.values[4]) && std::isnan(loss.values[5]));
  // With no cross-attention the encoder reaches nothing: switching its last head off changes nothing.
  EXPECT_EQ(after.array("ablation/val/delta_loss").values[0], 0.0f);
  EXPECT_NEAR(after.attr_double_at("ablation/val", "base_loss"), masked_loss.back(), 1e-6);
}

TEST_F(HeadMaskRun, BadMasksAreOneErrorEachAndWriteNothing) {
  const auto path = tmp_ + "/never.h5";
  const std::vector<std::pair<std::string, std::string>> cases{
      {"{encoder_self: {3: 1}}", "encoder_self has no layer 3; it has layers 1-1 (numbered from 1)"},
      {"{encoder_self: {1: [1, 5]}}", "encoder_self layer 1 has no head 5; it has heads 1-2 (numbered from 1)"},
      {"{encoder_slef: {1: 1}}", "the model has no attention module 'encoder_slef' (did you mean 'encoder_self'?)"},
      {"{encoder_self: {0: 1}}", "expected a layer number from 1 or '*', found '0'"},
      {"{encoder_self: [1, 2]}", "expected {layer: heads} (layers from 1 or '*')"},
      {"{encoder_self: {1: ['*']}}", "'*' stands alone (every head), not in a list"},
  };
  for (const auto& [mask, message] : cases) {
    auto r = run(testutil::tiny_synthetic(path, {"interventions.head_mask=" + mask}));
    EXPECT_EQ(r.exit_code, 1) << mask;
    EXPECT_NE(r.err.find(message), std::string::npos) << mask << "\n" << r.err;
    EXPECT_NE(r.err.find("interventions.head_mask"), std::string::npos) << "the error names the option\n" << r.err;
    EXPECT_FALSE(fs::exists(path)) << mask;
  }
  auto unknown = run(testutil::tiny_synthetic(path, {"interventions.head_mask_typo={}"}));
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("head_mask_typo"), std::string::npos) << unknown.err;

  const auto trained_path = trained();
  const std::vector<std::pair<std::string, std::string>> cli{
      {"decoder_cross:1:[1,3]", "--head-mask 'decoder_cross:1:[1,3]': decoder_cross layer 1 has no head 3"},
      {"decoder_cross:1:[1,", "--head-mask 'decoder_cross:1:[1,': a '[' is not closed"},
      {"cross:1:1", "the model has no attention module 'cross'"},
      {"decoder_cross:x:1", "expected a layer number from 1 or '*', found 'x'"},
      {"a:1:1:1", "expected module:layer:heads, found 4 ':'-separated parts"},
  };
  for (const auto& [mask, message] : cli) {
    auto r = run({"eval", trained_path, "--split", "val", "--head-mask", mask});
    EXPECT_EQ(r.exit_code, 1) << mask;
    EXPECT_NE(r.err.find(message), std::string::npos) << mask << "\n" << r.err;
  }
  EXPECT_FALSE(results::ResultsReader(trained_path).has("eval"));
  auto name = run({"ablate", trained_path, "--name", "a/b"});
  EXPECT_EQ(name.exit_code, 1);
  EXPECT_NE(name.err.find("--name 'a/b'"), std::string::npos) << name.err;
  auto no_ckpt = run({"ablate", trained_path, "--checkpoint", "epoch-9"});
  EXPECT_EQ(no_ckpt.exit_code, 1);
  EXPECT_NE(no_ckpt.err.find("no checkpoint"), std::string::npos) << no_ckpt.err;
  EXPECT_FALSE(results::ResultsReader(trained_path).has("ablation"));
  // An override that makes the checkpoint's model another one is refused, whichever command loads it.
  for (const char* cmd : {"ablate", "eval", "prune"}) {
    auto heads = run({cmd, trained_path, "model.encoder.num_heads=4"});
    EXPECT_EQ(heads.exit_code, 1) << cmd;
    EXPECT_EQ(testutil::count_lines(heads.err), 1u) << heads.err;
    EXPECT_NE(heads.err.find("config error: override model.encoder.num_heads=4: run " + trained_path +
                             " was trained with model.encoder.num_heads: 2, and its checkpoint holds that model; "
                             "measuring it as model.encoder.num_heads: 4 would measure a model nobody trained"),
              std::string::npos)
        << cmd << "\n" << heads.err;
  }
  EXPECT_FALSE(results::ResultsReader(trained_path).has("ablation"));
  EXPECT_FALSE(results::ResultsReader(trained_path).has("eval"));
  // Dropout changes nothing in eval mode: allowed.
  auto dropout = run({"eval", trained_path, "--split", "val", "model.encoder.dropout=0.5", "-q"});
  EXPECT_EQ(dropout.exit_code, 0) << dropout.err;
  // What a run lacks is said with its fix: the option that keeps checkpoints, a split it has.
  const auto bare = tmp_ + "/bare.h5";
  ASSERT_EQ(run(testutil::tiny_synthetic(bare, {"trainer.max_epochs=1", "trainer.checkpoints=false", "-q"})).exit_code, 0);
  auto bare_ablate = run({"ablate", bare});
  EXPECT_EQ(bare_ablate.exit_code, 1);
  EXPECT_EQ(testutil::count_lines(bare_ablate.err), 1u) << bare_ablate.err;
  EXPECT_NE(bare_ablate.err.find("the run has no checkpoint folder; trainers that checkpoint"), std::string::npos)
      << bare_ablate.err;
  EXPECT_NE(bare_ablate.err.find("; train the run again with trainer.checkpoints=true to keep them)"),
            std::string::npos)
      << bare_ablate.err;
  const auto no_val = tmp_ + "/no_val.h5";
  ASSERT_EQ(run(testutil::tiny_synthetic(no_val, {"trainer.max_epochs=1", "dataset.num_val=0", "-q"})).exit_code, 0);
  auto split = run({"ablate", no_val, "--split", "val"});
  EXPECT_EQ(split.exit_code, 1);
  EXPECT_NE(split.err.find("its dataset has no val split (it has train, test); choose one with --split test"),
            std::string::npos)
      << split.err;
  EXPECT_FALSE(results::ResultsReader(no_val).has("ablation"));
}

}  // namespace

namespace {

TEST_F(HeadMaskRun, PruneRemovesTheLeastImportantHeadFirstAndRecordsTheCurve) {
  const auto path = trained();
  auto grad = run({"ablate", path, "--importance", "gradient", "-q"});
  ASSERT_EQ(grad.exit_code, 0) << grad.out << grad.err;
  auto it = run({"prune", path, "--step", "1"});
  ASSERT_EQ(it.exit_code, 0) << it.out << it.err;
  EXPECT_NE(it.out.find("6 heads, val split, importance (iterative):"), std::string::npos) << it.out;
  auto rnd = run({"prune", path, "--order", "random", "--repeats", "3", "--step", "34%", "--no-bleu", "-q"});
  ASSERT_EQ(rnd.exit_code, 0) << rnd.out << rnd.err;
  results::ResultsReader rd(path);
  // The first head the iterative pruning removes is the one the gradient ranks lowest.
  const auto norm = rd.array("ablation/val/importance_normalized");
  const auto lowest = std::min_element(norm.values.begin(), norm.values.end()) - norm.values.begin();
  const auto order = rd.array("pruning/importance_val/order");
  ASSERT_EQ(order.shape, (std::vector<int64_t>{1, 6}));
  EXPECT_EQ(order.values[0], static_cast<float>(lowest));
  std::vector<float> sorted = order.values;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<float>{0, 1, 2, 3, 4, 5})) << "every head removed once";
  // The curve: 0..6 heads off, one point per head, the full model first and every head off last.
  EXPECT_EQ(rd.array("pruning/importance_val/heads_off").values, (std::vector<float>{0, 1, 2, 3, 4, 5, 6}));
  const auto fraction = rd.array("pruning/importance_val/fraction").values;
  EXPECT_TRUE(std::is_sorted(fraction.begin(), fraction.end()));
  EXPECT_FLOAT_EQ(fraction.back(), 1.0f);
  const auto loss = rd.array("pruning/importance_val/loss");
  ASSERT_EQ(loss.shape, (std::vector<int64_t>{1, 7}));
  EXPECT_NEAR(loss.values[0], rd.attr_double_at("pruning/importance_val", "base_loss"), 1e-5);
  EXPECT_NEAR(loss.values[0], rd.attr_double_at("ablation/val", "base_loss"), 1e-5);
  EXPECT_EQ(rd.attr_double_at("pruning/importance_val", "reestimate"), 1.0);
  EXPECT_TRUE(rd.has("pruning/importance_val/bleu"));
  // Random orders: 34% of 6 heads is 3 per step (rounded up): 0, 3, 6; three different orders.
  EXPECT_EQ(rd.array("pruning/random_val/heads_off").values, (std::vector<float>{0, 3, 6}));
  const auto orders = rd.array("pruning/random_val/order");
  ASSERT_EQ(orders.shape, (std::vector<int64_t>{3, 6}));
  EXPECT_FALSE(std::equal(orders.values.begin(), orders.values.begin() + 6, orders.values.begin() + 6) &&
               std::equal(orders.values.begin() + 6, orders.values.begin() + 12, orders.values.begin() + 12))
      << "the repeats drew one order";
  const auto rloss = rd.array("pruning/random_val/loss");
  ASSERT_EQ(rloss.shape, (std::vector<int64_t>{3, 3}));
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(rloss.values[r * 3], loss.values[0]) << "every order starts from the full model";
    EXPECT_NEAR(rloss.values[r * 3 + 2], loss.values[6], 1e-5) << "and ends with every head off";
  }
  EXPECT_FALSE(rd.has("pruning/random_val/bleu"));
}

TEST_F(HeadMaskRun, SentencesMeasuresTheSplitsFirstRowsOnly) {
  const auto path = trained();
  auto all = run({"ablate", path, "--importance", "gradient", "-q"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  auto ten = run({"ablate", path, "--sentences", "10", "--name", "ten", "-q"});
  ASSERT_EQ(ten.exit_code, 0) << ten.err;
  auto p = run({"prune", path, "--sentences", "10", "--no-bleu", "--step", "3", "-q"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  results::ResultsReader rd(path);
  EXPECT_EQ(rd.attr_double_at("ablation/ten", "sentences"), 10.0);
  EXPECT_EQ(rd.attr_double_at("ablation/val", "sentences"), 64.0);
  EXPECT_EQ(rd.attr_double_at("pruning/importance_val", "sentences"), 10.0);
  EXPECT_NE(rd.attr_double_at("ablation/ten", "base_loss"), rd.attr_double_at("ablation/val", "base_loss"));
  EXPECT_NEAR(rd.attr_double_at("ablation/ten", "base_loss"), rd.attr_double_at("pruning/importance_val", "base_loss"),
              1e-9);
  EXPECT_TRUE(rd.has("ablation/ten/bleu"));
}

TEST_F(HeadMaskRun, PruneRefusesBadStepsAndOptions) {
  const auto path = trained();
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--step", "0"}, "--step '0': expected a percentage of the heads (10%) or a number of heads (4), above 0"},
           {{"--step", "150%"}, "--step '150%': at most 100%"},
           {{"--step", "1.5"}, "--step '1.5': a number of heads is a whole number"},
           {{"--order", "random", "--one-shot"}, "--one-shot is for --order importance"},
           {{"--name", "../x"}, "--name '../x'"},
           {{"--split", "dev"}, "--split must be train, val or test, found 'dev'"},
       }) {
    std::vector<std::string> a{"prune", path};
    a.insert(a.end(), args.begin(), args.end());
    auto r = run(a);
    EXPECT_EQ(r.exit_code, 1) << args[0];
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
  EXPECT_FALSE(results::ResultsReader(path).has("pruning"));
}

}  // namespace

namespace {

// Blank-out (Abnar & Zuidema 2020): each source token replaced by <unk> in turn; the per-sentence
// losses add up to the split's loss, and the recorded attention is what runner rollout reads.
TEST_F(HeadMaskRun, TokensAreBlankedOutOneAtATimeAndTheirAttentionRecorded) {
  const auto path = trained();
  auto heads = run({"ablate", path, "--importance", "ablation", "--no-bleu", "-q"});
  ASSERT_EQ(heads.exit_code, 0) << heads.err;
  auto tok = run({"ablate", path, "--tokens", "--sentences", "1000"});
  ASSERT_EQ(tok.exit_code, 0) << tok.out << tok.err;
  EXPECT_NE(tok.out.find("64 sentences of the val split"), std::string::npos) << tok.out;
  std::vector<float> position, target_tokens, loss, delta, sentence;
  double base_loss = 0;
  {
    results::ResultsReader rd(path);
    position = rd.array("ablation/tokens_val/position").values;
    sentence = rd.array("ablation/tokens_val/sentence").values;
    target_tokens = rd.array("ablation/tokens_val/target_tokens").values;
    loss = rd.array("ablation/tokens_val/loss").values;
    delta = rd.array("ablation/tokens_val/delta_loss").values;
    base_loss = rd.attr_double_at("ablation/val", "base_loss");
    EXPECT_EQ(rd.attr_string_at("ablation/tokens_val", "blank"), "<unk>");
    EXPECT_EQ(rd.attention_samples().size(), 64u);
    const auto modules = rd.attention_modules("val 0");
    EXPECT_EQ(modules, (std::vector<std::string>{"decoder_cross", "decoder_self", "encoder_self"}));
  }
  // The per-sentence losses (on each sentence's first row), weighted by their target tokens, are
  // the split's loss as ablate measured it batch by batch.
  double sum = 0, tokens = 0;
  int64_t blanked_somewhere = 0;
  for (size_t i = 0; i < position.size(); ++i) {
    if (position[i] == 0) {
      sum += loss[i] * target_tokens[i];
      tokens += target_tokens[i];
    }
    EXPECT_TRUE(std::isfinite(delta[i]));
    blanked_somewhere += std::abs(delta[i]) > 1e-6;
  }
  EXPECT_NEAR(sum / tokens, base_loss, 1e-4);
  EXPECT_GT(blanked_somewhere, static_cast<int64_t>(position.size()) / 2) << "blanking a token changed nothing";
  EXPECT_EQ(sentence.back(), 63.0f);
  // runner rollout reads the recorded sentences.
  auto roll = run({"rollout", path, "--sample", "val 0", "--module", "decoder_cross", "--write"});
  ASSERT_EQ(roll.exit_code, 0) << roll.out << roll.err;
  EXPECT_TRUE(results::ResultsReader(path).has("rollout"));
}

}  // namespace
