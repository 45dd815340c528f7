#pragma once
// What the in-tree position scorers (rope, t5_bias, sliding_window) check when they are made:
// that they serve self-attention, and that queries and keys have one size. Header-only, included
// by relative path (plugins/scorer/common has no CMakeLists.txt, so it is not a plugin of its own).
#include <attnlab/config/schema.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/scorer.hpp>

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace attnlab::scorer_checks {

/// Who uses the scorer, for messages: the owner the ScorerContext names, or "its module".
inline std::string user(const nn::ScorerContext& sc) { return sc.owner.empty() ? std::string("its module") : sc.owner; }

/// ConfigError unless `sc` is self-attention: "<where>: <plugin> serves self-attention (<why>), but
/// <user> uses it for cross-attention, where the keys come from another sequence; use
/// `attention.cross_scorer: dot_product` there".
inline void require_self_attention(const config::Options& options, const nn::ScorerContext& sc, std::string_view why) {
  ATTNLAB_CHECK(sc.role == nn::ScorerContext::Role::Self, ConfigError,
                "{}: {} serves self-attention ({}), but {} uses it for cross-attention, where the keys come from "
                "another sequence; use `attention.cross_scorer: dot_product` there",
                options.resolved().where(), options.owner(), why, user(sc));
}

/// ConfigError unless queries and keys have one size (when the context knows both).
inline void require_equal_sizes(const config::Options& options, const nn::ScorerContext& sc) {
  ATTNLAB_CHECK(sc.query_size <= 0 || sc.key_size <= 0 || sc.query_size == sc.key_size, ConfigError,
                "{}: {} scores dot products, so queries and keys need one size, found query size {} and key size {}",
                options.resolved().where(), options.owner(), sc.query_size, sc.key_size);
}

}  // namespace attnlab::scorer_checks
