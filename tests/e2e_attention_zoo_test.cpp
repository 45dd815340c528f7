// End to end with the real runner: the attention variants an experiment file switches on in the
// transformer plugins. Grouped-query and multi-query attention (`kv_heads`) train, translate with
// the KV cache and are recorded in the results file; `kv_cache: false` decodes the same tokens by
// recomputation; a kv_heads that does not divide num_heads is one config error at its place,
// before anything is written.
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "testing/runner.hpp"

namespace {
using namespace attnlab;
namespace fs = std::filesystem;

class AttentionZooRun : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-zoo"; }
};

TEST_F(AttentionZooRun, GroupedAndMultiQueryAttentionTrainAndTranslateWithFewerParameters) {
  // tiny_synthetic: 1+1 blocks, width 32, 2 heads of 16, no projection biases. kv_heads 1 halves
  // W_k and W_v ([16, 32] instead of [32, 32]) in each of the 3 attention modules.
  const auto mha = tmp_ + "/mha.h5", mqa = tmp_ + "/mqa.h5";
  auto a = run(testutil::tiny_synthetic(mha, {"trainer.max_epochs=1", "-q"}));
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  auto b = run(testutil::tiny_synthetic(
      mqa, {"model.encoder.kv_heads=1", "model.decoder.kv_heads=1", "-q"}));  // 4 epochs: it copies a little
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  int64_t full = 0, shared = 0;
  {
    results::ResultsReader ra(mha), rb(mqa);
    full = ra.attr_int("num_parameters");
    shared = rb.attr_int("num_parameters");
    EXPECT_EQ(rb.status(), results::Status::Completed);
    EXPECT_NE(rb.config().find("kv_heads: 1"), std::string::npos) << rb.config();
  }
  EXPECT_EQ(full - shared, 3 * 2 * (32 * 32 - 16 * 32));
  // runner eval decodes with the KV cache (kv_heads 1: one key/value head per block).
  auto ev = run({"eval", mqa, "--split", "val", "-q"});
  ASSERT_EQ(ev.exit_code, 0) << ev.out << ev.err;
  EXPECT_GT(results::ResultsReader(mqa).attr_double_at("eval/val", "bleu"), 0.0);
}

TEST_F(AttentionZooRun, RecomputingInsteadOfTheKvCacheTranslatesTheSame) {
  // The same seed trains the same weights (kv_cache only changes decoding); runner eval then
  // translates the val split into the same sentences with either cache.
  const auto cached = tmp_ + "/cached.h5", recomputed = tmp_ + "/recomputed.h5";
  auto a = run(testutil::tiny_synthetic(cached, {"trainer.max_epochs=2", "-q"}));
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  auto b = run(testutil::tiny_synthetic(recomputed, {"trainer.max_epochs=2", "model.decoder.kv_cache=false", "-q"}));
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  for (const auto& path : {cached, recomputed}) {
    auto ev = run({"eval", path, "--split", "val", "-q"});
    ASSERT_EQ(ev.exit_code, 0) << ev.out << ev.err;
  }
  results::ResultsReader ra(cached), rb(recomputed);
  EXPECT_NE(rb.config().find("kv_cache: false"), std::string::npos);
  EXPECT_FALSE(ra.strings("eval/val/hypotheses").empty());
  EXPECT_EQ(ra.strings("eval/val/hypotheses"), rb.strings("eval/val/hypotheses"));
  EXPECT_EQ(ra.attr_double_at("eval/val", "bleu"), rb.attr_double_at("eval/val", "bleu"));
}

TEST_F(AttentionZooRun, KvHeadsThatDoNotDivideTheHeadsIsOneConfigErrorAtItsPlace) {
  const auto path = tmp_ + "/bad.h5";
  auto r = run(testutil::tiny_synthetic(path, {"model.decoder.kv_heads=3"}));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("model.decoder.kv_heads"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("kv_heads 3 does not divide num_heads 2"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path));
  auto zero = run(testutil::tiny_synthetic(path, {"model.encoder.kv_heads=0"}));
  EXPECT_EQ(zero.exit_code, 1);
  EXPECT_NE(zero.err.find("model.encoder.kv_heads"), std::string::npos) << zero.err;
  EXPECT_NE(zero.err.find("expected >= 1, found 0"), std::string::npos) << zero.err;
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
