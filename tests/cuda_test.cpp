// CUDA: the same models give the same numbers on the GPU as on the CPU (same weights -> same
// logits, gradients and decoded tokens), checkpoints move between devices, batches reach the GPU
// through pinned memory, the runner trains with `device: cuda` / `auto`, and a data-parallel run
// uses NCCL (issue 14). CUDA graphs, bf16 and the fused additive kernel: cuda_graphs_test.cpp.
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
#include <attnlab/train/optim.hpp>

#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "testing/cuda.hpp"
#include "testing/plugins.hpp"
#include "testing/runner.hpp"
#include "testing/results.hpp"
#include "testing/testing.hpp"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using namespace cudatest;

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

/// Beam 3 (length penalty 0.6, up to max_steps) gives the same hypotheses and scores on both.
void expect_same_beam(nn::EncoderDecoder& cpu, nn::EncoderDecoder& gpu, const torch::Tensor& src,
                      const torch::Tensor& valid, int64_t max_steps) {
  train::BeamOptions beam;
  beam.beam_size = 3;
  beam.length_penalty = 0.6;
  beam.max_steps = max_steps;
  auto c = train::beam_search(cpu, src, valid, 1, 2, beam);
  auto d = train::beam_search(gpu, src.to(kGpu), valid.to(kGpu), 1, 2, beam);
  EXPECT_TRUE(torch::equal(d.ids.cpu(), c.ids)) << c.ids << d.ids.cpu();
  EXPECT_ALLCLOSE(d.score.cpu(), c.score, 1e-4, 1e-5);
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

    expect_same_beam(cpu, gpu, src, valid, 7);
  }
}

// Issue 41: the KV cache and grouped-query attention on the GPU. The cached decoder on the GPU
// (MHA, GQA with 2 kv heads, MQA) gives the tokens of the same weights decoded on the CPU by
// recomputation (kv_cache false, d2l's cache of block inputs): greedy, and beam 3, which reorders
// the cache rows at every step.
TEST_F(Cuda, CachedDecodingOnTheGpuGivesTheRecomputedCpuTokens) {
  for (int64_t kv_heads : {0, 2, 1}) {
    SCOPED_TRACE(fmt::format("kv_heads {}", kv_heads));
    auto make = [&](bool cache) {
      auto options = nn::TransformerOptions(13, 16, 32, 4, 2).dropout(0.0).kv_heads(kv_heads).kv_cache(cache);
      return nn::EncoderDecoder(nn::TransformerEncoder(options, dot).ptr(), nn::TransformerDecoder(options, dot).ptr());
    };
    torch::manual_seed(7);
    nn::EncoderDecoder cpu = make(false);
    torch::manual_seed(7);
    nn::EncoderDecoder gpu = make(true);
    gpu->to(kGpu);
    cpu->eval();
    gpu->eval();
    auto src = torch::randint(3, 13, {4, 6});
    auto valid = torch::tensor({6, 3, 5, 1});
    auto a = train::greedy_decode(cpu, src, valid, 1, 9);
    auto b = train::greedy_decode(gpu, src.to(kGpu), valid.to(kGpu), 1, 9);
    ASSERT_TRUE(b.is_cuda());
    EXPECT_TRUE(torch::equal(b.cpu(), a)) << a << b.cpu();

    expect_same_beam(cpu, gpu, src, valid, 9);
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

// ------------------------------------------------------------- NCCL (issue 14)

TEST_F(Cuda, NcclGroupBroadcastsAndReducesGradientsOnTheGpu) {
  // One rank: NCCL still runs its communicator, broadcast and all-reduce kernels, through the
  // same process group (Gloo for CPU tensors, NCCL for CUDA ones) a torchrun run builds.
  train::DistributedEnv env;
  env.master_addr = "127.0.0.1";
  env.master_port = testutil::free_port();
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
  auto enc = testutil::read_attention(gpu, "i'm home .", "encoder_self");
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

// Issue 40's instruments on the GPU: `runner ablate` and `runner prune` of a GPU-trained run,
// measured with `device=cuda`, give the CPU's tables (the same heads, losses within float
// reassociation, the same greedy BLEU up to a rare near-tie).
TEST_F(RunnerDevice, AblateAndPruneOnTheGpuGiveTheCpuTables) {
  SKIP_WITHOUT_CUDA();
  const auto path = tmp_ + "/ablate.h5";
  auto t = tiny(path, {"device=cuda", "model.encoder.dropout=0", "model.decoder.dropout=0"});
  ASSERT_EQ(t.exit_code, 0) << t.out << t.err;
  for (const char* device : {"cpu", "cuda"}) {
    const std::string name = device;
    auto a = run({"ablate", path, std::string("device=") + device, "data_dir=" + data_dir_, "--name", name, "-q"});
    ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
    auto p = run({"prune", path, std::string("device=") + device, "data_dir=" + data_dir_, "--name", name,
                  "--step", "25%", "--no-bleu", "-q"});
    ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  }
  results::ResultsReader rd(path);
  EXPECT_EQ(rd.strings("ablation/cpu/module"), rd.strings("ablation/cuda/module"));
  EXPECT_NEAR(rd.attr_double_at("ablation/cuda", "base_loss"), rd.attr_double_at("ablation/cpu", "base_loss"), 1e-4);
  for (const char* column : {"loss", "importance_normalized"}) {
    auto x = rd.array(std::string("ablation/cpu/") + column), y = rd.array(std::string("ablation/cuda/") + column);
    ASSERT_EQ(x.values.size(), y.values.size()) << column;
    ASSERT_FALSE(x.values.empty());
    for (size_t i = 0; i < x.values.size(); ++i) EXPECT_NEAR(y.values[i], x.values[i], 1e-3) << column << " row " << i;
  }
  auto x = rd.array("ablation/cpu/bleu").values, y = rd.array("ablation/cuda/bleu").values;
  ASSERT_EQ(x.size(), y.size());
  size_t same = 0;
  for (size_t i = 0; i < x.size(); ++i) same += std::abs(x[i] - y[i]) < 1e-3;
  EXPECT_GE(same, x.size() - 1) << "greedy BLEU differs between devices for more than one head";
  auto lx = rd.array("pruning/cpu/loss").values, ly = rd.array("pruning/cuda/loss").values;
  ASSERT_EQ(lx.size(), ly.size());
  for (size_t i = 0; i < lx.size(); ++i) EXPECT_NEAR(ly[i], lx[i], 1e-3) << "pruning step " << i;
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
