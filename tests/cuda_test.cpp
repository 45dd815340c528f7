// CUDA: the same models give the same numbers on the GPU as on the CPU (same weights -> same
// logits, gradients and decoded tokens), checkpoints move between devices, batches reach the GPU
// through pinned memory, and the runner trains with `device: cuda` / `auto`.
// Tests that need a GPU skip without one (CI has none; they run on a lent GPU machine, see
// docs/ARCHITECTURE.md "Devices"); the device-resolution tests run everywhere.
#include <attnlab/data/dataset.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/transformer.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/train/beam.hpp>
#include <attnlab/train/checkpoint.hpp>
#include <attnlab/train/decode.hpp>
#include <attnlab/train/distributed.hpp>
#include <attnlab/train/loss.hpp>
#include <attnlab/train/optim.hpp>
#include <attnlab/train/train_step.hpp>

#include <arpa/inet.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/cuda.h>
#include <torch/optim/adam.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "testing/plugins.hpp"
#include "testing/runner.hpp"
#include "testing/testing.hpp"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using testutil::SeededTest;

bool have_cuda() { return torch::cuda::is_available(); }

#define SKIP_WITHOUT_CUDA() \
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device (these run on a GPU machine)"

const torch::Device kGpu(torch::kCUDA);

std::shared_ptr<nn::Scorer> dot(const nn::ScorerContext&) { return std::make_shared<nn::DotProductScorerImpl>(); }

/// Two copies of one model: built from the same seed, one left on the CPU, one moved to the GPU.
template <typename Make>
std::pair<nn::EncoderDecoder, nn::EncoderDecoder> twins(const Make& make) {
  torch::manual_seed(7);
  nn::EncoderDecoder cpu = make();
  torch::manual_seed(7);
  nn::EncoderDecoder gpu = make();
  gpu->to(kGpu);
  return {cpu, gpu};
}

nn::EncoderDecoder transformer(nn::NormPlacement norm) {
  auto options = nn::TransformerOptions(13, 16, 32, 4, 2).dropout(0.0).norm(norm);
  return nn::EncoderDecoder(nn::TransformerEncoder(options, dot).ptr(), nn::TransformerDecoder(options, dot).ptr());
}

// The GRU classes live in their plugins: the encoder "gru" (vocabulary 11) and the decoder
// "gru_bahdanau" (vocabulary 13) with its default additive scorer, from the registry.
nn::EncoderDecoder bahdanau() {
  const std::string sizes = "embed_size: 8, num_hiddens: 16, num_layers: 2, dropout: 0.0}";
  return nn::EncoderDecoder(testutil::make_plugin<nn::Encoder>("{plugin: gru, " + sizes, 11, 13),
                            testutil::make_plugin<nn::Decoder>("{plugin: gru_bahdanau, " + sizes, 11, 13));
}

/// Teacher-forced logits and every parameter's gradient of sum(logits^2) agree across devices.
void expect_same_forward_and_gradients(nn::EncoderDecoder& cpu, nn::EncoderDecoder& gpu, int64_t src_vocab,
                                       int64_t tgt_vocab) {
  auto src = torch::randint(0, src_vocab, {3, 6});
  auto valid = torch::tensor({6, 2, 4});
  auto tgt = torch::randint(0, tgt_vocab, {3, 5});
  auto a = cpu->forward(src, valid, tgt);
  auto b = gpu->forward(src.to(kGpu), valid.to(kGpu), tgt.to(kGpu));
  ASSERT_TRUE(b.is_cuda());
  EXPECT_ALLCLOSE(b.cpu(), a, 1e-4, 1e-5);
  (a * a).sum().backward();
  (b * b).sum().backward();
  auto gpu_params = gpu->named_parameters();
  for (const auto& p : cpu->named_parameters()) {
    SCOPED_TRACE(p.key());
    const auto* q = gpu_params.find(p.key());
    ASSERT_NE(q, nullptr);
    ASSERT_TRUE(p.value().grad().defined());
    EXPECT_ALLCLOSE(q->grad().cpu(), p.value().grad(), 1e-3, 1e-4);
  }
}

class Cuda : public SeededTest {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_CUDA();
    SeededTest::SetUp();
    // Full fp32 on both sides, so the comparison is about our code and not TF32 rounding.
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }
};

TEST_F(Cuda, TransformerLogitsAndGradientsEqualTheCpu) {
  for (auto norm : {nn::NormPlacement::Last, nn::NormPlacement::First}) {
    SCOPED_TRACE(norm == nn::NormPlacement::Last ? "norm last" : "norm first");
    auto [cpu, gpu] = twins([&] { return transformer(norm); });
    expect_same_forward_and_gradients(cpu, gpu, 13, 13);
  }
}

TEST_F(Cuda, BahdanauGruLogitsAndGradientsEqualTheCpu) {
  auto [cpu, gpu] = twins(bahdanau);  // cuDNN's GRU against ATen's CPU GRU
  expect_same_forward_and_gradients(cpu, gpu, 11, 13);
}

TEST_F(Cuda, SdpaFastPathEqualsExplicitPathOnTheGpu) {
  for (bool training : {true, false}) {
    for (const auto& valid : {torch::Tensor(), torch::tensor({2, 6, 4}), torch::tensor({0, 3, 6})}) {
      nn::Attention attention(dot({}), 0.0);
      attention->train(training);
      attention->to(kGpu);
      auto opts = torch::TensorOptions().device(kGpu).requires_grad(true);
      auto q = torch::randn({3, 4, 8}, opts), k = torch::randn({3, 6, 8}, opts), v = torch::randn({3, 6, 5}, opts);
      auto lens = valid.defined() ? valid.to(kGpu) : valid;
      auto fused = attention->forward(q, k, v, lens);
      auto g = torch::autograd::grad({(fused * fused).sum()}, {q, k, v});
      nn::AttentionRecorder recorder;
      nn::RecordingScope scope(&recorder);  // the explicit path
      auto explicit_out = attention->forward(q, k, v, lens);
      ASSERT_FALSE(recorder.empty());
      auto h = torch::autograd::grad({(explicit_out * explicit_out).sum()}, {q, k, v});
      EXPECT_ALLCLOSE(fused.cpu(), explicit_out.cpu(), 1e-5, 1e-5);
      for (size_t i = 0; i < g.size(); ++i) EXPECT_ALLCLOSE(g[i].cpu(), h[i].cpu(), 1e-4, 1e-5);
    }
  }
}

TEST_F(Cuda, GreedyAndBeamDecodingGiveTheCpuTokens) {
  for (bool gru : {false, true}) {
    SCOPED_TRACE(gru ? "bahdanau" : "transformer");
    auto [cpu, gpu] = gru ? twins(bahdanau) : twins([] { return transformer(nn::NormPlacement::Last); });
    auto src = torch::randint(3, 11, {4, 6});
    auto valid = torch::tensor({6, 3, 5, 1});
    nn::AttentionRecorder on_cpu, on_gpu;
    torch::Tensor a, b;  // [B, 7]
    {
      nn::RecordingScope scope(&on_cpu);
      a = train::greedy_decode(cpu, src, valid, 1, 7);
    }
    {
      nn::RecordingScope scope(&on_gpu);
      b = train::greedy_decode(gpu, src.to(kGpu), valid.to(kGpu), 1, 7);
    }
    ASSERT_TRUE(b.is_cuda());
    EXPECT_TRUE(torch::equal(b.cpu(), a)) << a << b.cpu();
    const auto modules = on_cpu.modules();
    ASSERT_EQ(modules.size(), on_gpu.modules().size());
    for (const auto& m : modules)
      EXPECT_ALLCLOSE(on_gpu.module(m.module).weights.cpu(), m.weights, 1e-4, 1e-5) << m.module;
    if (gru) continue;  // the GRU decoders' state cannot reorder (no beam search)

    train::BeamOptions beam;
    beam.beam_size = 3;
    beam.length_penalty = 0.6;
    beam.max_steps = 7;
    auto c = train::beam_search(cpu, src, valid, 1, 2, beam);
    auto d = train::beam_search(gpu, src.to(kGpu), valid.to(kGpu), 1, 2, beam);
    EXPECT_TRUE(torch::equal(d.ids.cpu(), c.ids)) << c.ids << d.ids.cpu();
    EXPECT_ALLCLOSE(d.score.cpu(), c.score, 1e-4, 1e-5);
  }
}

TEST_F(Cuda, CheckpointWrittenOnTheGpuLoadsOnTheCpuAndBack) {
  auto dir = testutil::temp_dir("attnlab-cuda-ckpt");
  auto [cpu, gpu] = twins([] { return transformer(nn::NormPlacement::First); });
  torch::optim::Adam gpu_opt(gpu->parameters(), torch::optim::AdamOptions(1e-2));
  auto src = torch::randint(0, 13, {2, 5}, torch::TensorOptions(torch::kLong).device(kGpu));
  auto valid = torch::tensor({5, 3}, torch::TensorOptions().device(kGpu));
  gpu->forward(src, valid, src).pow(2).sum().backward();
  gpu_opt.step();  // now the weights differ from the CPU twin's, and Adam has moments on the GPU
  train::TrainingState state;
  state.epoch = 3;
  state.step = 1;
  train::save_checkpoint(dir + "/gpu.pt", *gpu, &gpu_opt, state);

  torch::optim::Adam cpu_opt(cpu->parameters(), torch::optim::AdamOptions(1e-2));
  auto loaded = train::load_checkpoint(dir + "/gpu.pt", *cpu, &cpu_opt);
  EXPECT_EQ(loaded.epoch, 3);
  auto gpu_params = gpu->named_parameters();
  for (const auto& p : cpu->named_parameters()) {
    ASSERT_TRUE(p.value().device().is_cpu()) << p.key();
    EXPECT_TRUE(torch::equal(p.value(), gpu_params[p.key()].cpu())) << p.key();
  }
  // One more identical step on each side: the optimizer state came across too.
  cpu->forward(src.cpu(), valid.cpu(), src.cpu()).pow(2).sum().backward();
  cpu_opt.step();
  gpu_opt.zero_grad();
  gpu->forward(src, valid, src).pow(2).sum().backward();
  gpu_opt.step();
  for (const auto& p : cpu->named_parameters()) {
    EXPECT_ALLCLOSE(gpu_params[p.key()].cpu(), p.value(), 1e-4, 1e-5) << p.key();
  }

  // And back: the CPU checkpoint into a fresh GPU model.
  train::save_checkpoint(dir + "/cpu.pt", *cpu, nullptr, state);
  auto [unused, again] = twins([] { return transformer(nn::NormPlacement::First); });
  train::load_model_weights(dir + "/cpu.pt", *again);
  auto again_params = again->named_parameters();
  for (const auto& p : cpu->named_parameters()) {
    ASSERT_TRUE(again_params[p.key()].is_cuda()) << p.key();
    EXPECT_TRUE(torch::equal(again_params[p.key()].cpu(), p.value())) << p.key();
  }
  fs::remove_all(dir);
}

TEST_F(Cuda, FusedAdamAndClippingOnTheGpuTakeTorchAdamsCpuSteps) {
  auto [cpu, gpu] = twins([] { return transformer(nn::NormPlacement::Last); });
  torch::optim::Adam reference(cpu->parameters(), torch::optim::AdamOptions(1e-2));
  train::FusedAdam fused(gpu->parameters(), torch::optim::AdamOptions(1e-2));
  auto src = torch::randint(0, 13, {3, 6});
  auto valid = torch::tensor({6, 2, 4});
  for (int step = 0; step < 4; ++step) {
    reference.zero_grad();
    fused.zero_grad();
    cpu->forward(src, valid, src).pow(2).mean().backward();
    gpu->forward(src.to(kGpu), valid.to(kGpu), src.to(kGpu)).pow(2).mean().backward();
    const double cpu_norm = torch::nn::utils::clip_grad_norm_(cpu->parameters(), 0.5);
    auto gpu_norm = train::clip_grad_norm(gpu->parameters(), 0.5);
    ASSERT_TRUE(gpu_norm.is_cuda());
    EXPECT_NEAR(gpu_norm.item<double>(), cpu_norm, 1e-4 * cpu_norm);
    reference.step();
    fused.step();
  }
  auto gpu_params = gpu->named_parameters();
  for (const auto& p : cpu->named_parameters()) {
    EXPECT_ALLCLOSE(gpu_params[p.key()].cpu(), p.value(), 1e-4, 1e-5) << p.key();
  }
}

TEST_F(Cuda, BatchesReachTheGpuThroughPinnedMemory) {
  data::Batch b;
  b.src = torch::arange(12).view({3, 4});
  b.src_valid_lens = torch::tensor({4, 2, 1});
  b.tgt_in = torch::arange(15).view({3, 5});
  b.tgt_out = b.tgt_in + 1;
  b.tgt_valid_lens = torch::tensor({5, 5, 3});
  for (bool non_blocking : {false, true}) {
    auto g = b.to(kGpu, non_blocking);
    for (auto [from, to] : {std::pair{b.src, g.src},
                            {b.src_valid_lens, g.src_valid_lens},
                            {b.tgt_in, g.tgt_in},
                            {b.tgt_out, g.tgt_out},
                            {b.tgt_valid_lens, g.tgt_valid_lens}}) {
      ASSERT_TRUE(to.is_cuda());
      EXPECT_TRUE(torch::equal(to.cpu(), from));  // .cpu() waits on the stream
    }
  }
}

// ------------------------------------------------------------- CUDA graphs (issue 18)

/// One model with its optimizer and TrainStep, on the GPU.
struct Stepper {
  nn::EncoderDecoder model{nullptr};
  std::unique_ptr<train::FusedAdam> opt;
  std::unique_ptr<train::TrainStep> step;

  Stepper(train::CudaGraphs graphs, int64_t max_graphs = 32, double dropout = 0.0) {
    torch::manual_seed(11);
    auto options = nn::TransformerOptions(13, 16, 32, 4, 2).dropout(dropout);
    model = nn::EncoderDecoder(nn::TransformerEncoder(options, dot).ptr(), nn::TransformerDecoder(options, dot).ptr());
    model->to(kGpu);
    opt = std::make_unique<train::FusedAdam>(model->parameters(), torch::optim::AdamOptions(1e-2));
    step = std::make_unique<train::TrainStep>(
        train::StepOptions{.graphs = graphs, .max_graphs = max_graphs, .gradient_clip = 0.5}, kGpu, *opt,
        model->parameters(), "test");
  }

  /// One step on a batch of `rows` x `len` tokens (drawn from `seed`): returns the loss.
  double run(int64_t rows, int64_t len, double lr, uint64_t seed) {
    torch::manual_seed(seed);
    auto src = torch::randint(2, 13, {rows, len}).to(kGpu);
    auto lens = torch::randint(1, len + 1, {rows}).to(kGpu);
    auto tgt = torch::randint(2, 13, {rows, len}).to(kGpu);
    const auto outs = step->run({src, lens, tgt, tgt.roll(1, 1)}, lr, [&](const std::vector<torch::Tensor>& in) {
      auto out = model->forward(in[0], in[1], in[2]);
      return std::vector<torch::Tensor>{train::token_loss(out, in[3], train::TokenLoss{.pad = 0})};
    });
    return outs[0].item<double>();
  }
};

/// Two shapes in an irregular order, with a changing learning rate.
const std::vector<std::pair<int64_t, int64_t>> kShapes = {{4, 6}, {4, 6}, {3, 7}, {4, 6}, {3, 7}, {3, 7}, {4, 6}};

TEST_F(Cuda, GraphedStepsEqualEagerSteps) {
  Stepper eager(train::CudaGraphs::Off), graphed(train::CudaGraphs::On);
  ASSERT_TRUE(graphed.step->graphed());
  for (size_t i = 0; i < kShapes.size(); ++i) {
    const double lr = 1e-2 * static_cast<double>(i + 1) / static_cast<double>(kShapes.size());
    const double a = eager.run(kShapes[i].first, kShapes[i].second, lr, 100 + i);
    const double b = graphed.run(kShapes[i].first, kShapes[i].second, lr, 100 + i);
    EXPECT_NEAR(b, a, 1e-6 * std::abs(a)) << "step " << i + 1;
  }
  const auto& s = graphed.step->stats();
  EXPECT_EQ(s.captures, 2);     // two shapes
  EXPECT_EQ(s.eager_steps, 1);  // the warm-up
  EXPECT_EQ(s.replays, 6);
  EXPECT_EQ(graphed.opt->steps_taken(), 7);
  auto pg = graphed.model->named_parameters();
  for (const auto& p : eager.model->named_parameters()) {
    EXPECT_ALLCLOSE(pg[p.key()].cpu(), p.value().cpu(), 1e-5, 1e-6) << p.key();
  }
}

TEST_F(Cuda, AReplayTakesTheLearningRateOfItsStep) {
  Stepper g(train::CudaGraphs::On);
  g.run(4, 6, 1e-2, 1);  // warm-up
  g.run(4, 6, 1e-2, 2);  // capture + replay
  auto before = g.model->parameters()[0].detach().clone();
  g.run(4, 6, 0.0, 3);  // a replay at lr 0 moves nothing
  EXPECT_TRUE(torch::equal(g.model->parameters()[0].detach(), before));
  g.run(4, 6, 1e-2, 4);
  EXPECT_FALSE(torch::equal(g.model->parameters()[0].detach(), before));
  EXPECT_EQ(g.step->stats().replays, 3);
}

TEST_F(Cuda, ShapesBeyondTheLimitRunEagerlyAndAreCounted) {
  Stepper eager(train::CudaGraphs::Off), limited(train::CudaGraphs::On, /*max_graphs=*/1);
  for (size_t i = 0; i < kShapes.size(); ++i) {
    const double a = eager.run(kShapes[i].first, kShapes[i].second, 5e-3, 200 + i);
    const double b = limited.run(kShapes[i].first, kShapes[i].second, 5e-3, 200 + i);
    EXPECT_NEAR(b, a, 1e-6 * std::abs(a)) << "step " << i + 1;
  }
  const auto& s = limited.step->stats();
  // Step 1 (4x6) warms up, step 2 (4x6) is the one graph; the 3x7 steps run eagerly.
  EXPECT_EQ(s.captures, 1);
  EXPECT_EQ(s.odd_shapes, 3);
  EXPECT_EQ(s.replays, 3);
  auto pl = limited.model->named_parameters();
  for (const auto& p : eager.model->named_parameters()) {
    EXPECT_ALLCLOSE(pl[p.key()].cpu(), p.value().cpu(), 1e-5, 1e-6) << p.key();
  }
}

TEST_F(Cuda, ReplaysDrawFreshDropoutMasks) {
  torch::manual_seed(5);
  torch::nn::Sequential net(torch::nn::Linear(16, 16), torch::nn::Dropout(0.5));
  net->to(kGpu);
  train::FusedAdam opt(net->parameters(), torch::optim::AdamOptions(1e-2));
  train::TrainStep step(train::StepOptions{.graphs = train::CudaGraphs::On}, kGpu, opt, net->parameters(), "test");
  const auto x = torch::ones({8, 16}, torch::TensorOptions().device(kGpu));
  std::vector<torch::Tensor> kept;  // which outputs survived dropout, per step
  for (int i = 0; i < 4; ++i) {
    const auto outs = step.run({x}, 0.0, [&](const std::vector<torch::Tensor>& in) {
      auto y = net->forward(in[0]);
      return std::vector<torch::Tensor>{y.pow(2).mean(), (y != 0).to(torch::kFloat)};
    });
    kept.push_back(outs[1].cpu());
  }
  EXPECT_EQ(step.stats().replays, 3);
  for (int i = 1; i < 4; ++i) {
    for (int j = 0; j < i; ++j) EXPECT_FALSE(torch::equal(kept[i], kept[j])) << "steps " << j + 1 << " and " << i + 1;
    EXPECT_NEAR(kept[i].mean().item<double>(), 0.5, 0.1);  // p = 0.5 of 128
  }
}

// ------------------------------------------------------------- fused additive attention (issue 18)

/// The additive scorer plugin, fused (the CUDA kernel) and not (the composition with the
/// [B, Q, K, H] features), with the same weights, on the GPU.
std::pair<std::shared_ptr<nn::Scorer>, std::shared_ptr<nn::Scorer>> additive_twins(int64_t qsize, int64_t ksize,
                                                                                   int64_t hidden, torch::Dtype dtype) {
  const std::string opts = fmt::format("num_hiddens: {}", hidden);
  torch::manual_seed(9);
  auto fused = testutil::make_scorer("{plugin: additive, fused: true, " + opts + "}", qsize, ksize);
  torch::manual_seed(9);
  auto plain = testutil::make_scorer("{plugin: additive, fused: false, " + opts + "}", qsize, ksize);
  fused->to(kGpu, dtype);
  plain->to(kGpu, dtype);
  return {fused, plain};
}

TEST_F(Cuda, FusedAdditiveKernelEqualsTheCompositionAndItsGradients) {
  struct Shape {
    int64_t B, Q, K, H;
  };
  // Bahdanau's decoder step (d2l), ragged tiles, a query/key axis longer than a tile, H of 1.
  for (const auto& sh : {Shape{64, 1, 10, 32}, Shape{3, 5, 7, 33}, Shape{2, 50, 50, 64}, Shape{1, 9, 1, 1}}) {
    for (auto dtype : {torch::kFloat, torch::kDouble}) {
      SCOPED_TRACE(fmt::format("B {} Q {} K {} H {} {}", sh.B, sh.Q, sh.K, sh.H, c10::toString(dtype)));
      auto [fused, plain] = additive_twins(6, 5, sh.H, dtype);
      auto opts = torch::TensorOptions(dtype).device(kGpu).requires_grad(true);
      auto q = torch::randn({sh.B, sh.Q, 6}, opts), k = torch::randn({sh.B, sh.K, 5}, opts);
      auto a = fused->score(q, k, {});
      auto b = plain->score(q, k, {});
      const double tol = dtype == torch::kFloat ? 1e-5 : 1e-12;
      EXPECT_ALLCLOSE(a.cpu(), b.cpu(), tol, tol);
      auto up = torch::randn_like(a);
      std::vector<torch::Tensor> xs{q, k};
      for (const auto& p : fused->parameters()) xs.push_back(p);
      std::vector<torch::Tensor> ys{q, k};
      for (const auto& p : plain->parameters()) ys.push_back(p);
      auto ga = torch::autograd::grad({a}, xs, {up});
      auto gb = torch::autograd::grad({b}, ys, {up});
      for (size_t i = 0; i < ga.size(); ++i) EXPECT_ALLCLOSE(ga[i].cpu(), gb[i].cpu(), 10 * tol, 10 * tol) << i;
    }
  }
  // bf16 projections (autocast) are scored in float: the composition of the same rounded values.
  auto [fused, plain] = additive_twins(6, 5, 32, torch::kFloat);
  auto q = torch::randn({4, 3, 6}, torch::TensorOptions().device(kGpu)), k = torch::randn({4, 8, 5}, q.options());
  torch::Tensor a;
  {
    train::AutocastScope scope(train::Precision::bf16, kGpu);
    a = fused->score(q, k, {});
  }
  EXPECT_EQ(a.scalar_type(), torch::kFloat);
  EXPECT_ALLCLOSE(a.cpu(), plain->score(q, k, {}).cpu(), 5e-2, 5e-2);
}

// The kernel against eager at d2l's shape and GNMT's (B 128, Q = K = 50, H 1024), forward +
// backward of the scorer (its W_q, W_k projections included on both sides), and the peak memory.
// Opt-in: --gtest_also_run_disabled_tests (bench/README.md, "Fused additive attention").
TEST_F(Cuda, DISABLED_FusedAdditiveKernelTimings) {
  struct Shape {
    const char* name;
    int64_t B, Q, K, H;
  };
  for (const auto& sh : {Shape{"d2l 0.17 decoder step", 64, 1, 10, 32}, Shape{"d2l 0.17, all steps", 64, 10, 10, 32},
                         Shape{"GNMT", 128, 50, 50, 1024}}) {
    auto [fused, plain] = additive_twins(sh.H, sh.H, sh.H, torch::kFloat);
    auto opts = torch::TensorOptions().device(kGpu).requires_grad(true);
    auto q = torch::randn({sh.B, sh.Q, sh.H}, opts), k = torch::randn({sh.B, sh.K, sh.H}, opts);
    auto time = [&](nn::Scorer& s, double& peak_mib) {
      auto once = [&] {
        auto out = s.score(q, k, {});
        out.backward(torch::ones_like(out));
      };
      for (int i = 0; i < 3; ++i) once();
      torch::cuda::synchronize();
      c10::cuda::CUDACachingAllocator::resetPeakStats(0);
      const auto base = c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0].current;
      const int reps = sh.H > 100 ? 20 : 200;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) once();
      torch::cuda::synchronize();
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
      peak_mib =
          static_cast<double>(c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0].peak - base) /
          (1 << 20);
      return ms;
    };
    double peak_fused = 0, peak_plain = 0;
    const double tf = time(*fused, peak_fused), te = time(*plain, peak_plain);
    std::printf(
        "additive %-22s B %3ld Q %2ld K %2ld H %4ld: eager %8.3f ms %9.1f MiB | fused %8.3f ms %9.1f MiB | "
        "%.2fx time, %.1fx memory\n",
        sh.name, static_cast<long>(sh.B), static_cast<long>(sh.Q), static_cast<long>(sh.K), static_cast<long>(sh.H), te,
        peak_plain, tf, peak_fused, te / tf, peak_plain / std::max(peak_fused, 1e-9));
  }
}

// The launch floor of issue 18: a step that is one replay and its input copies, the host doing
// nothing else, for the seed-000 Transformer's shapes (vocabulary 214, H 256, FFN 64, 4 heads,
// 2 + 2 blocks, batches of 128 x 9, dropout 0.2); beside the eager step. bench/run --graphs gives
// the runner's whole steps. Opt-in: --gtest_also_run_disabled_tests.
TEST_F(Cuda, DISABLED_GraphedStepTimings) {
  for (bool graphs : {false, true}) {
    torch::manual_seed(1);
    auto options = nn::TransformerOptions(214, 256, 64, 4, 2).dropout(0.2);
    nn::EncoderDecoder model(nn::TransformerEncoder(options, dot).ptr(), nn::TransformerDecoder(options, dot).ptr());
    model->to(kGpu);
    train::FusedAdam opt(model->parameters(), torch::optim::AdamOptions(1e-3));
    train::TrainStep step(
        train::StepOptions{.graphs = graphs ? train::CudaGraphs::On : train::CudaGraphs::Off, .gradient_clip = 1.0},
        kGpu, opt, model->parameters(), "timing");
    auto src = torch::randint(3, 214, {128, 9}).to(kGpu), lens = torch::randint(1, 10, {128}).to(kGpu);
    auto tgt = torch::randint(3, 214, {128, 9}).to(kGpu);
    const train::TrainStep::Body body = [&](const std::vector<torch::Tensor>& in) {
      return std::vector<torch::Tensor>{
          train::token_loss(model->forward(in[0], in[1], in[2]), in[3], train::TokenLoss{.pad = 1})};
    };
    for (int i = 0; i < 10; ++i) step.run({src, lens, tgt, tgt}, 1e-3, body);
    torch::cuda::synchronize();
    const int reps = 200;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) step.run({src, lens, tgt, tgt}, 1e-3, body);
    torch::cuda::synchronize();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
    std::printf("graphed step timing, seed-000 shapes (B 128, T 9, H 256): %s %.3f ms per step\n",
                graphs ? "graphed (the launch floor: one replay and its input copies)" : "eager", ms);
  }
}

// ------------------------------------------------------------- NCCL (issue 14)

int free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST_F(Cuda, NcclGroupBroadcastsAndReducesGradientsOnTheGpu) {
  // One rank: NCCL still runs its communicator, broadcast and all-reduce kernels, through the
  // same process group (Gloo for CPU tensors, NCCL for CUDA ones) a torchrun run builds.
  train::DistributedEnv env;
  env.master_addr = "127.0.0.1";
  env.master_port = free_tcp_port();
  auto dist = train::join_process_group(env, kGpu, 60);
  EXPECT_EQ(dist->backend(), "nccl");
  auto [reference, model] = twins([] { return transformer(nn::NormPlacement::Last); });
  reference->to(kGpu);
  dist->attach(model->parameters(), model->buffers());
  auto src = torch::randint(0, 13, {3, 6}).to(kGpu);
  auto valid = torch::tensor({6, 2, 4}).to(kGpu);
  for (int step = 0; step < 2; ++step) {
    for (auto* m : {&reference, &model}) (*m)->zero_grad();
    reference->forward(src, valid, src).pow(2).mean().backward();
    auto loss = model->forward(src, valid, src).pow(2).mean();
    dist->prepare_for_backward();
    loss.backward();  // the reducer's hooks all-reduce (average) the buckets through NCCL
  }
  auto mp = model->named_parameters();
  for (const auto& p : reference->named_parameters()) {
    ASSERT_TRUE(mp[p.key()].grad().defined()) << p.key();
    EXPECT_ALLCLOSE(mp[p.key()].grad().cpu(), p.value().grad().cpu(), 1e-6, 1e-7) << p.key();
  }
  EXPECT_EQ(dist->sum({1.5, 2.0}), (std::vector<double>{1.5, 2.0}));  // Gloo, CPU
  EXPECT_TRUE(dist->agree(model->parameters()));
  const auto stats = dist->all_reduce_stats();
  EXPECT_GE(stats.buckets, 1);
  dist->barrier();
}

// ------------------------------------------------------------- the runner

/// A completed CUDA run whose train and val losses are those of `reference`, epoch by epoch,
/// within rtol.
void expect_cuda_run_like(const results::ResultsReader& reference, const results::ResultsReader& run, size_t epochs,
                          double rtol) {
  EXPECT_EQ(run.attr_string("status"), "completed");
  EXPECT_EQ(run.attr_string("device"), "cuda");
  for (const char* split : {"train", "val"}) {
    auto x = reference.metric(split, "loss"), y = run.metric(split, "loss");
    ASSERT_EQ(x.size(), epochs);
    ASSERT_EQ(y.size(), epochs);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], rtol * x[i]) << split << " epoch " << i + 1;
  }
}

class RunnerDevice : public testutil::RunnerFixture {
 protected:
  void SetUp() override {
    RunnerFixture::SetUp();
    if (!HasFatalFailure()) {
      REQUIRE_FRA_ENG();
    }
  }
  void TearDown() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }
  std::string scratch_prefix() const override { return "attnlab-device"; }

  /// The tiny fra-eng Transformer (2 epochs) with these overrides.
  testutil::ProcessResult tiny(const std::string& results, std::vector<std::string> overrides) {
    std::vector<std::string> a{"experiments/tests/tiny_fra_eng.yaml", "--results", results, "data_dir=" + data_dir_};
    a.insert(a.end(), overrides.begin(), overrides.end());
    return run(a);
  }
};

TEST_F(RunnerDevice, AutoTrainsOnTheGpuWhenThereIsOne) {
  auto path = tmp_ + "/auto.h5";
  auto r = tiny(path, {"device=auto", "trainer.max_epochs=1"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  results::ResultsReader rd(path);
  EXPECT_EQ(rd.attr_string("status"), "completed");
  EXPECT_EQ(rd.attr_string("device"), have_cuda() ? "cuda" : "cpu");
}

TEST_F(RunnerDevice, CudaWithoutAGpuIsOneClearError) {
  if (have_cuda()) GTEST_SKIP() << "this machine has a GPU";
  auto path = tmp_ + "/cuda.h5";
  auto r = tiny(path, {"device=cuda"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("device"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no CUDA device is available"), std::string::npos) << r.err;
  if (fs::exists(path)) {
    EXPECT_NE(results::ResultsReader(path).attr_string("status"), "completed");
  }
}

TEST_F(RunnerDevice, CudaRunMatchesTheCpuRunAndEvaluatesOnTheCpu) {
  SKIP_WITHOUT_CUDA();
  // No dropout, so both runs draw nothing from the device's generator: same init (made on the
  // CPU, then moved), same batches, and the losses agree up to float reassociation.
  const std::vector<std::string> no_dropout{"model.encoder.dropout=0", "model.decoder.dropout=0"};
  auto cpu_path = tmp_ + "/cpu.h5", gpu_path = tmp_ + "/gpu.h5";
  auto with = [&](std::string device) {
    auto o = no_dropout;
    o.push_back("device=" + device);
    return o;
  };
  auto a = tiny(cpu_path, with("cpu"));
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  auto b = tiny(gpu_path, with("cuda"));
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;

  results::ResultsReader cpu(cpu_path), gpu(gpu_path);
  expect_cuda_run_like(cpu, gpu, 2, 2e-3);
  auto enc = gpu.attention("i'm home .", "encoder_self");
  ASSERT_EQ(enc.weights.dim(), 4);
  EXPECT_TRUE(enc.weights.device().is_cpu());
  EXPECT_ALLCLOSE(enc.weights.sum(-1), torch::ones_like(enc.weights.sum(-1)), 1e-5, 1e-5);

  // The GPU run's checkpoint, evaluated on the CPU.
  auto e = run({"eval", gpu_path, "device=cpu", "data_dir=" + data_dir_, "--split", "val"});
  ASSERT_EQ(e.exit_code, 0) << e.out << e.err;
  EXPECT_NE(e.out.find("BLEU"), std::string::npos) << e.out;
}

TEST_F(RunnerDevice, ResumeOnTheGpuContinuesWithTheSavedGeneratorState) {
  SKIP_WITHOUT_CUDA();
  // Dropout on: epochs 3-4 of the resumed run draw the same masks only if the checkpoint carried
  // the CUDA generator's state. Not bit-exact (some CUDA backward kernels accumulate atomically).
  const auto whole = tmp_ + "/whole.h5", two = tmp_ + "/two.h5";
  auto synthetic = [&](const std::string& path, std::vector<std::string> extra) {
    std::vector<std::string> a{"experiments/tests/tiny_synthetic.yaml", "--results", path, "device=cuda"};
    a.insert(a.end(), extra.begin(), extra.end());
    return run(a);
  };
  auto a = synthetic(whole, {});
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  auto b = synthetic(two, {"trainer.max_epochs=2"});
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  auto c = synthetic(two, {"--resume", two});  // the stored config says 2 epochs; extend to 4
  ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("epoch 3/4"), std::string::npos) << c.out;
  expect_cuda_run_like(results::ResultsReader(whole), results::ResultsReader(two), 4, 1e-3);
}

// ------------------------------------------------------------- graphs, bf16, NCCL through the runner

TEST_F(RunnerDevice, GraphedRunMatchesTheEagerRunAndRecordsItsGraphs) {
  SKIP_WITHOUT_CUDA();
  const std::vector<std::string> common{"device=cuda", "model.encoder.dropout=0", "model.decoder.dropout=0"};
  auto with = [&](std::string graphs) {
    auto o = common;
    if (!graphs.empty()) o.push_back("trainer.cuda_graphs=" + graphs);
    return o;
  };
  const auto eager = tmp_ + "/eager.h5", graphed = tmp_ + "/graphed.h5", automatic = tmp_ + "/auto.h5";
  auto a = tiny(eager, with("off"));
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  auto b = tiny(graphed, with("on"));
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  auto c = tiny(automatic, with(""));
  ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
  results::ResultsReader x(eager), y(graphed), z(automatic);
  expect_cuda_run_like(x, y, 2, 1e-4);
  EXPECT_EQ(x.attr_string("cuda_graphs"), "off");
  EXPECT_EQ(y.attr_string("cuda_graphs"), "on");
  EXPECT_EQ(z.attr_string("cuda_graphs"), "on");  // auto on a GPU
  EXPECT_GE(y.attr_int("cuda_graph_captures"), 1);
  EXPECT_GT(y.attr_int("cuda_graph_replays"), y.attr_int("cuda_graph_captures"));
  EXPECT_EQ(y.attr_int("cuda_graph_odd_shape_steps"), 0);
}

TEST_F(RunnerDevice, MultiHeadAndGruModelsTrainAsGraphs) {
  SKIP_WITHOUT_CUDA();
  // Bahdanau (cuDNN's GRU, the fused additive scorer) and seed 000's transformer with dropout:
  // captured (`on` fails the run if not), and the graphed loss curve follows the eager one.
  struct Case {
    std::string file;
    std::vector<std::string> overrides;
    double rtol;
  };
  const std::vector<Case> cases = {
      {"experiments/bahdanau_fra_eng.yaml",
       {"trainer.max_epochs=6", "model.encoder.dropout=0", "model.decoder.dropout=0"},
       1e-3},
      {"experiments/transformer_fra_eng.yaml", {"trainer.max_epochs=4"}, 2e-2},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    std::vector<std::string> losses_files;
    for (const std::string graphs : {"off", "on"}) {
      const auto path = tmp_ + "/" + graphs + fs::path(c.file).stem().string() + ".h5";
      std::vector<std::string> args{
          c.file, "--results", path, "device=cuda", "data_dir=" + data_dir_, "-q", "trainer.cuda_graphs=" + graphs};
      args.insert(args.end(), c.overrides.begin(), c.overrides.end());
      auto r = run(args);
      ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
      losses_files.push_back(path);
    }
    results::ResultsReader eager(losses_files[0]), graphed(losses_files[1]);
    EXPECT_EQ(graphed.attr_string("cuda_graphs"), "on");
    const auto x = eager.metric("train", "loss"), y = graphed.metric("train", "loss");
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], c.rtol * x[i]) << "epoch " << i + 1;
  }
}

TEST_F(RunnerDevice, Bf16LossCurveOfSeed000IsNearFp32s) {
  SKIP_WITHOUT_CUDA();
  std::vector<std::vector<double>> curves;
  for (const std::string precision : {"fp32", "bf16"}) {
    const auto path = tmp_ + "/seed000-" + precision + ".h5";
    auto r = run({"experiments/transformer_fra_eng.yaml", "--results", path, "device=cuda", "data_dir=" + data_dir_,
                  "-q", "trainer.max_epochs=10", "precision=" + precision});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    results::ResultsReader rd(path);
    EXPECT_EQ(rd.attr_string("precision"), precision);
    EXPECT_EQ(rd.attr_string("cuda_graphs"), "on");
    curves.push_back(rd.metric("train", "loss"));
  }
  ASSERT_EQ(curves[0].size(), 10u);
  ASSERT_EQ(curves[1].size(), 10u);
  EXPECT_NE(curves[1].back(), curves[0].back()) << "bf16 gave fp32's loss: was autocast on?";
  for (size_t i = 0; i < 10; ++i) {
    std::printf("seed 000 epoch %zu: fp32 %.4f bf16 %.4f\n", i + 1, curves[0][i], curves[1][i]);
    EXPECT_NEAR(curves[1][i], curves[0][i], 0.05 * curves[0][i]) << "epoch " << i + 1;
  }
}

class RunnerTorchrun : public RunnerDevice {
 protected:
  /// `python -m torch.distributed.run --standalone --nproc_per_node=N --no-python runner args...`
  testutil::ProcessResult torchrun(int processes, std::vector<std::string> args) {
    const auto python = testutil::env_or("ATTNLAB_PYTHON", "");
    EXPECT_FALSE(python.empty()) << "ATTNLAB_PYTHON is not set";
    std::vector<std::string> a{"-m",
                               "torch.distributed.run",
                               "--standalone",
                               "--nnodes=1",
                               fmt::format("--nproc_per_node={}", processes),
                               "--no-python",
                               runner_};
    a.insert(a.end(), args.begin(), args.end());
    return testutil::run_process(python, a, source_, tmp_);
  }
};

TEST_F(RunnerTorchrun, OneProcessOnTheGpuTrains) {
  SKIP_WITHOUT_CUDA();
  const auto path = tmp_ + "/one.h5";
  auto r = torchrun(1, {"experiments/tests/tiny_fra_eng.yaml", "--results", path, "data_dir=" + data_dir_,
                        "device=cuda", "trainer.max_epochs=1"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  results::ResultsReader rd(path);
  EXPECT_EQ(rd.attr_string("status"), "completed");
  EXPECT_EQ(rd.attr_string("device"), "cuda");  // WORLD_SIZE=1: one process, as without torchrun
}

TEST_F(RunnerTorchrun, MoreRanksThanGpusIsOneClearError) {
  SKIP_WITHOUT_CUDA();
  if (torch::cuda::device_count() != 1) GTEST_SKIP() << "this test wants exactly one GPU";
  const auto path = tmp_ + "/two.h5";
  auto r = torchrun(2, {"experiments/tests/tiny_fra_eng.yaml", "--results", path, "data_dir=" + data_dir_,
                        "device=cuda", "trainer.max_epochs=1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(testutil::contains(r.out + r.err,
                                 "LOCAL_RANK=1 of a data-parallel run, but this machine has 1 CUDA "
                                 "device"))
      << r.out << r.err;
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace attnlab
