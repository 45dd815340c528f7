// End to end with the real runner: model.share_embeddings gives source and target one token
// embedding, on the synthetic copy task (one vocabulary by construction) and on Multi30K with
// dataset.shared_vocab (one tokenizer and one vocabulary for German and English). The shared run
// trains, checkpoints, averages and evaluates; asking for it without one vocabulary is one clear
// error naming the option's place.
#include <attnlab/results/reader.hpp>
#include <attnlab/train/checkpoint.hpp>

#include <gtest/gtest.h>
#include <torch/types.h>

#include <filesystem>
#include <fstream>

#include "testing/runner.hpp"

namespace {
using namespace attnlab;
namespace fs = std::filesystem;

class SharedEmbeddingRun : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-shared-emb"; }

  int64_t num_parameters(const std::string& path) { return results::ResultsReader(path).attr_int("num_parameters"); }

  /// A small Multi30K experiment file (d2l_words, 256 training pairs, 1 epoch) in the scratch folder.
  std::string multi30k_yaml(bool shared_vocab) {
    const std::string path = tmp_ + (shared_vocab ? "/shared.yaml" : "/apart.yaml");
    std::ofstream(path) << "experiment: m30k_shared\nseed: 0\nthreads: 1\n"
                        << "data_dir: " << data_dir_ << "\n"
                        << "dataset:\n  plugin: multi30k\n  tokenizer: d2l_words\n  num_train: 256\n"
                        << "  batch_size: 64\n  shared_vocab: " << (shared_vocab ? "true" : "false") << "\n"
                        << "model:\n  share_embeddings: true\n"
                        << "  encoder: &t {plugin: transformer, num_hiddens: 16, ffn_num_hiddens: 32, num_heads: 2, "
                           "num_blks: 1}\n"
                        << "  decoder: *t\n"
                        << "trainer: {plugin: seq2seq, max_epochs: 1, lr: 0.005}\n";
    return path;
  }
};

TEST_F(SharedEmbeddingRun, TheCopyTaskTrainsAveragesAndEvaluatesWithOneTable) {
  const auto apart = tmp_ + "/apart.h5", shared = tmp_ + "/shared.h5";
  auto a = run(testutil::tiny_synthetic(apart, {"trainer.max_epochs=2", "-q"}));
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  auto s = run(testutil::tiny_synthetic(
      shared, {"trainer.max_epochs=2", "trainer.keep_checkpoints=2", "model.share_embeddings=true", "-q"}));
  ASSERT_EQ(s.exit_code, 0) << s.out << s.err;
  EXPECT_EQ(num_parameters(shared), num_parameters(apart) - 16 * 32);  // vocab 16, width 32

  const auto dir = train::checkpoint_dir(shared);
  const auto best = train::checkpoint_tensors(dir + "/best.pt");
  EXPECT_TRUE(best.count("encoder.embedding.weight"));
  EXPECT_FALSE(best.count("decoder.embedding.weight"));

  auto avg = run({"average", shared, "--last", "2"});
  ASSERT_EQ(avg.exit_code, 0) << avg.out << avg.err;
  for (const char* checkpoint : {"best", "average"}) {
    auto e = run({"eval", shared, "--split", "test", "--checkpoint", checkpoint, "--name",
                  std::string("test_") + checkpoint, "-q"});
    ASSERT_EQ(e.exit_code, 0) << checkpoint << "\n" << e.out << e.err;
  }
  results::ResultsReader rd(shared);
  EXPECT_TRUE(rd.has("eval/test_best")) << "eval wrote no results";
  EXPECT_TRUE(rd.has("eval/test_average"));

  // Tables of two widths cannot be one: the error names both shapes and the option.
  auto bad =
      run(testutil::tiny_synthetic(tmp_ + "/bad.h5", {"model.share_embeddings=true", "model.decoder.num_hiddens=16"}));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("'model.share_embeddings'"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("the encoder's is [16, 32] but the decoder's is [16, 16]"), std::string::npos) << bad.err;
}

TEST_F(SharedEmbeddingRun, Multi30kWithOneVocabularySharesAndWithTwoIsRefusedNamingTheOption) {
  ATTNLAB_REQUIRE(!testutil::env_or("ATTNLAB_DATA_MIRROR", "").empty() || fs::exists(data_dir_ + "/multi30k"),
                  "multi30k: ATTNLAB_DATA_MIRROR is not set and no Multi30K data is present");
  const auto path = tmp_ + "/m30k.h5";
  auto ok = run({multi30k_yaml(true), "--results", path, "-q"});
  ASSERT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  const auto best = train::checkpoint_tensors(train::checkpoint_dir(path) + "/best.pt");
  ASSERT_TRUE(best.count("encoder.embedding.weight"));
  EXPECT_FALSE(best.count("decoder.embedding.weight"));
  // One row per token of the one German + English vocabulary, and the decoder's output has as many.
  EXPECT_EQ(best.at("encoder.embedding.weight").size(0), best.at("decoder.dense.weight").size(0));

  const auto yaml = multi30k_yaml(false);
  auto bad = run({yaml, "--results", tmp_ + "/bad.h5"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find(yaml + ":12:"), std::string::npos) << bad.err;  // the share_embeddings line
  EXPECT_NE(bad.err.find("share_embeddings"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("dataset 'multi30k' has two"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("shared_vocab: true"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(tmp_ + "/bad.h5")) << "a configuration error is found before a results file is written";
}

}  // namespace
