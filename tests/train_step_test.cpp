// The parts of issue 18 that run without a GPU: precision (bf16 autocast on the CPU, TF32
// switches), pad_to_bucket, FusedAdam reading its learning rate and step count from tensors, and
// TrainStep's eager paths and refusals. The graphs themselves: tests/cuda_test.cpp.
#include <attnlab/data/dataset.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/transformer.hpp>
#include <attnlab/train/loss.hpp>
#include <attnlab/train/optim.hpp>
#include <attnlab/train/precision.hpp>
#include <attnlab/train/train_step.hpp>

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <torch/optim/adam.h>
#include <torch/utils.h>

#include "testing/testing.hpp"

namespace attnlab {
namespace {

using testutil::contains;
using testutil::SeededTest;

std::shared_ptr<nn::Scorer> dot(const nn::ScorerContext&) { return std::make_shared<nn::DotProductScorerImpl>(); }

nn::EncoderDecoder transformer(double dropout = 0.0) {
  auto options = nn::TransformerOptions(13, 16, 32, 4, 2).dropout(dropout);
  return nn::EncoderDecoder(nn::TransformerEncoder(options, dot).ptr(), nn::TransformerDecoder(options, dot).ptr());
}

TEST(Precision, NamesRoundTripAndAMistakeNamesTheChoices) {
  for (auto p : {train::Precision::fp32, train::Precision::tf32, train::Precision::bf16}) {
    EXPECT_EQ(train::parse_precision(train::precision_name(p)), p);
  }
  const auto message = testutil::message_of<ConfigError>([] { train::parse_precision("fp16"); });
  EXPECT_TRUE(contains(message, "expected one of fp32|tf32|bf16, found 'fp16'")) << message;
}

TEST(Precision, Tf32IsOnlyOnForTf32) {
  train::apply_precision(train::Precision::tf32);
  EXPECT_TRUE(at::globalContext().allowTF32CuBLAS());
  EXPECT_TRUE(at::globalContext().allowTF32CuDNN());
  for (auto p : {train::Precision::fp32, train::Precision::bf16}) {
    train::apply_precision(p);
    EXPECT_FALSE(at::globalContext().allowTF32CuBLAS());
    EXPECT_FALSE(at::globalContext().allowTF32CuDNN());
  }
}

TEST(Precision, Bf16AutocastsMatrixProductsOnTheCpuWhileTheScopeLives) {
  const auto a = torch::randn({4, 8}), b = torch::randn({8, 3});
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
  {
    train::AutocastScope scope(train::Precision::bf16, torch::kCPU);
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
  for (auto p : {train::Precision::fp32, train::Precision::tf32}) {
    train::AutocastScope scope(p, torch::kCPU);
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
  }
}

data::Batch token_batch() {
  data::Batch b;
  b.src = torch::tensor({{5, 6, 7, 1}, {8, 9, 1, 1}, {4, 1, 1, 1}});  // pad 1
  b.src_valid_lens = torch::tensor({3, 2, 1});
  b.tgt_in = torch::tensor({{2, 5, 6}, {2, 7, 1}, {2, 1, 1}});
  b.tgt_out = torch::tensor({{5, 6, 3}, {7, 3, 1}, {3, 1, 1}});
  b.tgt_valid_lens = torch::tensor({3, 2, 1});
  return b;
}

TEST(PadToBucket, RowsAndLengthsGrowWithPadAndTheLossStaysTheSame) {
  const auto b = token_batch();
  const auto p = data::pad_to_bucket(b, 5, 8, 1);
  EXPECT_EQ(p.src.sizes(), (std::vector<int64_t>{5, 8}));
  EXPECT_EQ(p.tgt_in.sizes(), (std::vector<int64_t>{5, 8}));
  EXPECT_EQ(p.tgt_out.sizes(), (std::vector<int64_t>{5, 8}));
  EXPECT_TRUE(torch::equal(p.src.narrow(0, 0, 3).narrow(1, 0, 4), b.src));
  EXPECT_TRUE(torch::equal(p.tgt_out.narrow(0, 0, 3).narrow(1, 0, 3), b.tgt_out));
  EXPECT_TRUE(torch::equal(p.src.narrow(1, 4, 4), torch::ones({5, 4}, torch::kLong)));
  EXPECT_TRUE(torch::equal(p.src_valid_lens, torch::tensor({3, 2, 1, 1, 1})));
  EXPECT_TRUE(torch::equal(p.tgt_valid_lens, torch::tensor({3, 2, 1, 0, 0})));
  EXPECT_TRUE(torch::equal(p.tgt_out.narrow(0, 3, 2), torch::ones({2, 8}, torch::kLong)));
  // Nothing to add: the batch itself.
  const auto same = data::pad_to_bucket(b, 2, 1, 1);
  EXPECT_TRUE(same.src.is_same(b.src));

  // The model's mean loss over the non-pad targets does not see the padding (eval mode, no
  // dropout): the extra columns are masked or <pad> labels, the extra rows have no labels.
  torch::manual_seed(3);
  auto model = transformer();
  model->eval();
  const train::TokenLoss how{.pad = 1};
  const auto plain = train::token_loss(model->forward(b.src, b.src_valid_lens, b.tgt_in), b.tgt_out, how);
  const auto padded = train::token_loss(model->forward(p.src, p.src_valid_lens, p.tgt_in), p.tgt_out, how);
  EXPECT_NEAR(padded.item<double>(), plain.item<double>(), 1e-6);

  EXPECT_THROW(data::pad_to_bucket(b, 3, 0, 1), DataError);
}

class DeviceScalars : public SeededTest {};

TEST_F(DeviceScalars, FusedAdamReadingTensorsTakesTheSameStepsAsWithNumbers) {
  torch::manual_seed(1);
  auto a = transformer();
  torch::manual_seed(1);
  auto b = transformer();
  train::FusedAdam numbers(a->parameters(), torch::optim::AdamOptions(0.01));
  train::FusedAdam tensors(b->parameters(), torch::optim::AdamOptions(0.01));
  auto lr = torch::zeros({}, torch::kFloat), step = torch::zeros({}, torch::kFloat);
  tensors.use_device_scalars(lr, step);
  const auto src = torch::randint(2, 13, {3, 5});
  const auto lens = torch::tensor({5, 3, 2});
  const std::vector<double> rates{0.01, 0.005, 0.02};
  for (size_t i = 0; i < rates.size(); ++i) {
    for (auto* opt : {&numbers, &tensors}) opt->zero_grad();
    a->forward(src, lens, src).pow(2).mean().backward();
    b->forward(src, lens, src).pow(2).mean().backward();
    for (auto& g : numbers.param_groups()) static_cast<torch::optim::AdamOptions&>(g.options()).lr(rates[i]);
    numbers.step();
    lr.fill_(rates[i]);
    step.fill_(static_cast<double>(tensors.steps_taken() + 1));
    tensors.step();
  }
  EXPECT_EQ(tensors.steps_taken(), 3);
  auto pb = b->named_parameters();
  // On the CPU the numbers' small tensors take FusedAdam's plain loop, the tensors' torch's
  // vectorised kernel: the same arithmetic, rounded apart by a few ulps (2e-6 relative seen).
  for (const auto& p : a->named_parameters()) EXPECT_ALLCLOSE(pb[p.key()], p.value(), 1e-5, 1e-7) << p.key();
  tensors.count_replayed_step();
  EXPECT_EQ(tensors.steps_taken(), 4);
  tensors.set_step_count(3);
  EXPECT_EQ(tensors.steps_taken(), 3);
  EXPECT_THROW(tensors.use_device_scalars(torch::zeros({1}), step), c10::Error);
}

TEST_F(DeviceScalars, TrainStepOnTheCpuIsTheEagerStepAndRefusesGraphsOn) {
  torch::manual_seed(2);
  auto a = transformer();
  torch::manual_seed(2);
  auto b = transformer();
  train::FusedAdam oa(a->parameters(), torch::optim::AdamOptions(0.01));
  train::FusedAdam ob(b->parameters(), torch::optim::AdamOptions(0.01));
  train::TrainStep step(train::StepOptions{.graphs = train::CudaGraphs::Auto, .gradient_clip = 0.5}, torch::kCPU, ob,
                        b->parameters(), "test");
  EXPECT_FALSE(step.graphed());
  EXPECT_EQ(step.stats().off_because, "not a CUDA device");
  const auto src = torch::randint(2, 13, {3, 5});
  const auto lens = torch::tensor({5, 3, 2});
  for (double rate : {0.01, 0.003}) {
    oa.zero_grad();
    auto loss = a->forward(src, lens, src).pow(2).mean();
    loss.backward();
    train::clip_grad_norm(a->parameters(), 0.5);
    for (auto& g : oa.param_groups()) static_cast<torch::optim::AdamOptions&>(g.options()).lr(rate);
    oa.step();
    const auto outs = step.run({src, lens}, rate, [&](const std::vector<torch::Tensor>& in) {
      return std::vector<torch::Tensor>{b->forward(in[0], in[1], in[0]).pow(2).mean(), torch::ones({})};
    });
    ASSERT_EQ(outs.size(), 2u);
    EXPECT_FALSE(outs[0].requires_grad());
    EXPECT_NEAR(outs[0].item<double>(), loss.item<double>(), 1e-7);
  }
  auto pb = b->named_parameters();
  for (const auto& p : a->named_parameters()) EXPECT_TRUE(torch::equal(pb[p.key()], p.value())) << p.key();

  // The body must give the loss first.
  const auto bad = testutil::message_of<Error>(
      [&] { step.run({src}, 0.01, [](const std::vector<torch::Tensor>&) { return std::vector<torch::Tensor>{}; }); });
  EXPECT_TRUE(contains(bad, "trainer 'test': the step's body must return the loss")) << bad;

  // on: a ConfigError on the CPU, and in a data-parallel run.
  auto message = testutil::message_of<ConfigError>([&] {
    train::TrainStep s(train::StepOptions{.graphs = train::CudaGraphs::On}, torch::kCPU, ob, b->parameters(), "t");
  });
  EXPECT_TRUE(contains(message, "cuda_graphs: on needs device: cuda, but this run trains on cpu")) << message;
  train::TrainContext ctx;
  train::GraphConfig on;
  on.cuda_graphs = train::CudaGraphs::On;
  EXPECT_THROW(train::check_graph_options(on, ctx), ConfigError);
  on.cuda_graphs = train::CudaGraphs::Auto;
  EXPECT_NO_THROW(train::check_graph_options(on, ctx));
  train::TrainStep off(train::StepOptions{.graphs = train::CudaGraphs::Off}, torch::kCPU, ob, b->parameters(), "t");
  EXPECT_EQ(off.stats().off_because, "cuda_graphs: off");
}

}  // namespace
}  // namespace attnlab
