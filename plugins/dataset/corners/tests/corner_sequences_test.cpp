// The corner-sequence generator: shapes, value ranges, walk direction, seeding, variable lengths.
#include "corner_sequences.hpp"

#include <attnlab/error.hpp>

#include "testing/testing.hpp"

namespace {
using namespace attnlab;
namespace cs = attnlab::datasets::corners;
using Sizes = std::vector<int64_t>;

/// Index of the nearest square corner for each point: points [..., 2] -> [...]
torch::Tensor nearest_corner(const torch::Tensor& points) {
  auto d = (points.unsqueeze(-2) - cs::square_corners()).pow(2).sum(-1);  // [..., 4]
  return d.argmin(-1);
}

TEST(CornerSequences, ShapesAndLabels) {
  auto s = cs::generate_corners(128, 13);
  EXPECT_EQ(s.points.sizes(), (Sizes{128, 4, 2}));
  EXPECT_EQ(s.points.scalar_type(), torch::kFloat32);
  EXPECT_EQ(s.lengths.sizes(), (Sizes{128}));
  EXPECT_TRUE(s.lengths.eq(4).all().item<bool>());
  EXPECT_EQ(s.directions.sizes(), (Sizes{128}));
  EXPECT_TRUE(((s.directions == 0) | (s.directions == 1)).all().item<bool>());
  EXPECT_TRUE(((s.starts >= 0) & (s.starts < 4)).all().item<bool>());
  // Both directions and every start corner occur.
  EXPECT_GT(s.directions.sum().item<int64_t>(), 30);
  EXPECT_LT(s.directions.sum().item<int64_t>(), 98);
  for (int64_t c = 0; c < 4; ++c) EXPECT_GT(s.starts.eq(c).sum().item<int64_t>(), 10) << "corner " << c;
}

TEST(CornerSequences, PointsAreCornersPlusSmallNoise) {
  auto s = cs::generate_corners(2000, 13);
  auto corners = cs::square_corners().index_select(0, nearest_corner(s.points).reshape(-1)).reshape({2000, 4, 2});
  auto noise = s.points - corners;  // [n, 4, 2]
  EXPECT_LT(noise.abs().max().item<float>(), 0.6f);  // 6 standard deviations
  EXPECT_NEAR(noise.std().item<float>(), 0.1, 0.005);
  EXPECT_NEAR(noise.mean().item<float>(), 0.0, 0.005);
  // Without noise the points are exactly the corners.
  auto exact = cs::generate_corners(50, 3, false, 0.0);
  EXPECT_TRUE(exact.points.abs().eq(1).all().item<bool>());
}

TEST(CornerSequences, WalkClockwiseOrCounterClockwise) {
  auto s = cs::generate_corners(256, 13);
  auto idx = nearest_corner(s.points);  // [n, 4] corner indices in the clockwise list
  EXPECT_TRUE(idx.select(1, 0).eq(s.starts).all().item<bool>());
  auto step = torch::remainder(idx.narrow(1, 1, 3) - idx.narrow(1, 0, 3), 4);  // [n, 3]: 1 cw, 3 ccw
  auto want = torch::where(s.directions.unsqueeze(1) == 1, torch::ones_like(step), torch::full_like(step, 3));
  EXPECT_TRUE(step.eq(want).all().item<bool>());
  // Geometrically: clockwise turns right (negative cross product with y up), counter-clockwise left.
  auto e1 = s.points.select(1, 1) - s.points.select(1, 0), e2 = s.points.select(1, 2) - s.points.select(1, 1);
  auto cross = e1.select(1, 0) * e2.select(1, 1) - e1.select(1, 1) * e2.select(1, 0);  // [n]
  EXPECT_TRUE(torch::where(s.directions == 1, cross < 0, cross > 0).all().item<bool>());
  // The helper the dataset documents.
  EXPECT_TRUE(cs::corner_order(2, true).equal(torch::tensor({2, 3, 0, 1}, torch::kLong)));
  EXPECT_TRUE(cs::corner_order(2, false).equal(torch::tensor({1, 0, 3, 2}, torch::kLong)));
}

TEST(CornerSequences, SeedingIsPrivateAndReproducible) {
  auto a = cs::generate_corners(64, 13), b = cs::generate_corners(64, 13), c = cs::generate_corners(64, 17);
  EXPECT_TRUE(a.points.equal(b.points));
  EXPECT_TRUE(a.directions.equal(b.directions));
  EXPECT_FALSE(a.points.equal(c.points));
  // The global torch generator is not touched.
  torch::manual_seed(5);
  auto before = torch::rand({3});
  torch::manual_seed(5);
  cs::generate_corners(64, 13);
  EXPECT_TRUE(torch::rand({3}).equal(before));
}

TEST(CornerSequences, VariableLengths) {
  auto s = cs::generate_corners(300, 13, true);
  for (int64_t len : {2, 3, 4}) EXPECT_GT(s.lengths.eq(len).sum().item<int64_t>(), 50) << "length " << len;
  EXPECT_TRUE(((s.lengths >= 2) & (s.lengths <= 4)).all().item<bool>());
  auto steps = torch::arange(4).unsqueeze(0);                          // [1, 4]
  auto padded = (steps >= s.lengths.unsqueeze(1)).unsqueeze(2);        // [n, 4, 1]
  EXPECT_TRUE(s.points.masked_select(padded.expand_as(s.points)).eq(0).all().item<bool>());
  EXPECT_TRUE(s.points.masked_select((~padded).expand_as(s.points)).abs().gt(0.3).all().item<bool>());
}

TEST(CornerSequences, BadArgumentsAreDataErrors) {
  EXPECT_THROW(cs::generate_corners(0, 1), DataError);
  EXPECT_THROW(cs::generate_corners(4, 1, false, -1.0), DataError);
}

}  // namespace
