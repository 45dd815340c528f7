// The one precompiled header every torch-using target reuses: tensors, autograd and torch::nn's
// Module, which nearly every file needs, and nothing more. A file that needs more of LibTorch
// (an nn module's header, the optimizers, torch::nn::functional) includes that header itself.
// Each translation unit pays for this header's pending template instantiations (GCC performs them
// at the end of every file that uses the PCH, not once when it builds it): torch/torch.h here cost
// 7.2 s a file before its own first line, this set 2.7 s (docs/ARCHITECTURE.md, "Where the time
// goes, and what keeps it short").
#pragma once
#include <torch/types.h>
#include <torch/autograd.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
