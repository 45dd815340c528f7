// The one precompiled header: torch and the other heavy headers every target includes.
#pragma once
#include <torch/torch.h>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
