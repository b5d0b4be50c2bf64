// Problems the cost model's tests rank and price: dW and dX problems of a few geometries (a
// small dense layer, a strided one, the video stem, a large layer) built as the TBE calls build
// them, with no tuning database in the way.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tbex/tbex.h"

namespace tbex {
namespace {

// "auto" must not find tuning database entries of other runs.
const bool kNoDb = (setenv("TBEX_TUNING_DB",
                           (::testing::TempDir() + "tbex_cost_model_none_" +
                            std::to_string(::getpid()) + ".json").c_str(), 1),
                    true);

struct Conv {
  int64_t n, cin, d, h, w, cout, k[3], s[3], pad;
  int64_t groups = 1;
};

inline int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t pad) { return (in + 2 * pad - k) / s + 1; }

inline ParaDict para_of(const Conv& c, bool dx) {
  ParaDict para;
  para.strides = dx ? std::vector<int64_t>{1, c.s[0], c.s[1], c.s[2], 1}
                    : std::vector<int64_t>{c.s[0], c.s[1], c.s[2]};
  para.pads = std::vector<int64_t>(6, c.pad);
  para.dilations = std::vector<int64_t>{1, 1, 1, 1, 1};
  para.groups = c.groups;
  return para;
}

inline std::vector<int64_t> dy_shape(const Conv& c) {
  return {c.n, out_dim(c.d, c.k[0], c.s[0], c.pad), (c.cout + 15) / 16,
          out_dim(c.h, c.k[1], c.s[1], c.pad), out_dim(c.w, c.k[2], c.s[2], c.pad), 16};
}

inline Problem dw_problem(const Conv& c, DType dtype = DType::kFloat32) {
  return make_backprop_filter_problem({c.n, c.d, (c.cin + 15) / 16, c.h, c.w, 16}, dtype,
                                      dy_shape(c), dtype,
                                      {c.cout, c.k[0], c.cin / c.groups, c.k[1], c.k[2]},
                                      para_of(c, false));
}

inline Problem dx_problem(const Conv& c, DType dtype = DType::kFloat32) {
  const std::vector<int64_t> fs{c.cout, c.cin / c.groups, c.k[0], c.k[1], c.k[2]};
  return make_backprop_input_problem(shape_fz3d({fs[0], fs[1], fs[2], fs[3], fs[4]}, c.groups),
                                     dtype, dy_shape(c), dtype,
                                     fs, {c.n, c.d, c.h, c.w, c.cin},
                                     para_of(c, true));
}

const Conv kSmall{2, 32, 4, 12, 12, 32, {3, 3, 3}, {1, 1, 1}, 1};
const Conv kStrided{2, 16, 6, 14, 14, 32, {2, 3, 3}, {2, 2, 2}, 1};
const Conv kStem{1, 3, 4, 32, 32, 64, {3, 7, 7}, {1, 2, 2}, 3};
const Conv kLarge{2, 64, 16, 56, 56, 128, {3, 3, 3}, {1, 1, 1}, 1};

/** The stem's dX with rows of 112 positions (phase rows of 56) and `cout` output channels. */
inline Problem wide_stem_dx(int64_t cout = kStem.cout) {
  Conv wide = kStem;
  wide.w = 112;
  wide.cout = cout;
  return dx_problem(wide);
}

}  // namespace
}  // namespace tbex
