// Checkpoints: model, Adam state, training state and the RNG round-trip exactly; a checkpoint
// that does not fit, or is missing, is a DataError naming the file.
#include <attnlab/error.hpp>
#include <attnlab/train/checkpoint.hpp>

#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/utils.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "testing/testing.hpp"

namespace attnlab::train {
namespace fs = std::filesystem;
namespace {

struct NetImpl : torch::nn::Module {
  explicit NetImpl(int64_t width) {
    inner = register_module("inner", torch::nn::Linear(4, width));
    out = register_module("out", torch::nn::Linear(width, 1));
    register_buffer("running", torch::arange(3.0));
  }
  torch::Tensor forward(const torch::Tensor& x) { return out->forward(torch::dropout(inner->forward(x), 0.5, is_training())); }
  torch::nn::Linear inner{nullptr}, out{nullptr};
};
TORCH_MODULE(Net);

/// One Adam step on a fixed batch; dropout draws from the global generator.
void step(Net& net, torch::optim::Adam& opt) {
  auto x = torch::ones({8, 4});
  opt.zero_grad();
  net->forward(x).pow(2).mean().backward();
  opt.step();
}

class Checkpoint : public testutil::SeededTest {
 protected:
  void SetUp() override {
    SeededTest::SetUp();
    dir_ = testutil::temp_dir("attnlab-ckpt");
  }
  std::string dir_;
};

TEST_F(Checkpoint, ResumingGivesTheSameNextStepsAsGoingOn) {
  Net a(6);
  torch::optim::Adam opt_a(a->parameters(), torch::optim::AdamOptions(0.01));
  for (int i = 0; i < 3; ++i) step(a, opt_a);
  TrainingState st;
  st.epoch = 3;
  st.step = 30;
  st.best_metric = 0.25;
  st.best_epoch = 2;
  st.metric_rows = {{"train/loss", 3}, {"step/lr", 30}};
  const auto path = checkpoint_dir(dir_ + "/run.h5") + "/last.pt";
  save_checkpoint(path, *a, &opt_a, st);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  for (int i = 0; i < 2; ++i) step(a, opt_a);  // going on

  torch::manual_seed(123);  // a different RNG, model and optimizer
  Net b(6);
  torch::optim::Adam opt_b(b->parameters(), torch::optim::AdamOptions(0.01));
  auto loaded = load_checkpoint(path, *b, &opt_b);
  EXPECT_EQ(loaded.epoch, 3);
  EXPECT_EQ(loaded.step, 30);
  EXPECT_EQ(loaded.best_metric, 0.25);
  EXPECT_EQ(loaded.best_epoch, 2);
  EXPECT_EQ(loaded.metric_rows, st.metric_rows);
  for (int i = 0; i < 2; ++i) step(b, opt_b);  // resumed
  auto pa = a->named_parameters(), pb = b->named_parameters();
  for (const auto& p : pa) EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
}

TEST_F(Checkpoint, TensorsStateAndBestCopy) {
  Net a(3);
  const auto last = dir_ + "/c/last.pt", best = dir_ + "/c/best.pt";
  TrainingState st;
  st.epoch = 1;
  save_checkpoint(last, *a, nullptr, st);
  copy_checkpoint(last, best);
  auto t = checkpoint_tensors(best);
  ASSERT_EQ(t.size(), 5u);  // inner.weight, inner.bias, out.weight, out.bias, running
  EXPECT_TRUE(torch::equal(t.at("inner.weight"), a->inner->weight));
  EXPECT_TRUE(torch::equal(t.at("running"), torch::arange(3.0)));
  EXPECT_EQ(read_training_state(best).epoch, 1);
  Net b(3);
  load_model_weights(best, *b);
  EXPECT_TRUE(torch::equal(b->out->weight, a->out->weight));
}

TEST_F(Checkpoint, MismatchAndMissingAreDataErrors) {
  Net a(3);
  const auto path = dir_ + "/x.pt";
  save_checkpoint(path, *a, nullptr, {});
  Net wider(5);
  try {
    load_model_weights(path, *wider);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_model_weights(dir_ + "/absent.pt", *a), DataError);
  torch::optim::Adam opt(a->parameters());
  EXPECT_THROW(load_checkpoint(path, *a, &opt), DataError);  // saved without an optimizer
}

// Issue 42: a damaged checkpoint is one line in our words, not miniz's or LibTorch's ("This is an
// internal miniz error", "[enforce fail at inline_container.cc:...]").
TEST_F(Checkpoint, ADamagedCheckpointIsOneLineInOurWords) {
  Net a(3);
  const auto path = dir_ + "/damaged.pt";
  save_checkpoint(path, *a, nullptr, {});
  auto message = [&] { return testutil::message_of<DataError>([&] { load_model_weights(path, *a); }); };
  fs::resize_file(path, 3000);  // cut short, as by a full disk or a killed copy
  auto cut = message();
  EXPECT_EQ(cut, "checkpoint " + path + " cannot be read: it is damaged or not a checkpoint (not a whole zip archive: "
                 "failed finding central directory)");
  std::ofstream(path, std::ios::trunc) << "PK\x03\x04 garbage";
  EXPECT_EQ(message(), "checkpoint " + path + " cannot be read: it is damaged or not a checkpoint (not a whole zip "
                       "archive: not a ZIP archive)");
  std::ofstream(path, std::ios::trunc).close();
  EXPECT_EQ(message(), "checkpoint " + path + " cannot be read: it is empty (written by a run that was killed?)");
}

// LibTorch's reader does not check the archive's CRC-32s: a weight changed on disk after it was
// written loaded as the changed weight. The checkpoint is now refused, naming the member.
TEST_F(Checkpoint, AWeightChangedOnDiskIsRefusedNotLoaded) {
  Net a(16);
  const auto path = dir_ + "/changed.pt";
  save_checkpoint(path, *a, nullptr, {});
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto weight = a->inner->weight.detach().contiguous();
  const std::string raw(static_cast<const char*>(weight.data_ptr()), weight.numel() * sizeof(float));
  const auto at = bytes.find(raw);
  ASSERT_NE(at, std::string::npos) << "the weight's bytes are not stored as they are";
  bytes[at + 5] = static_cast<char>(bytes[at + 5] ^ 0x40);  // one bit of one float
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  Net b(16);
  const auto message = testutil::message_of<DataError>([&] { load_model_weights(path, *b); });
  EXPECT_TRUE(testutil::contains(message, "checkpoint " + path + " is damaged: its member '")) << message;
  EXPECT_TRUE(testutil::contains(message, "' does not match its checksum: bytes changed after it was written"))
      << message;
}

}  // namespace
}  // namespace attnlab::train
