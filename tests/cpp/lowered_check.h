#pragma once
// Helpers of the tests that compile a lowered Halide pipeline themselves (for a target other than
// the host's, or to read its assembly): bf16 dX / dW problems of a test case, the pipeline run on
// the case's exact data and checked against the float64 reference, its assembly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "Halide.h"
#include "reference.h"
#include "tbex/tbex.h"
#include "test_util.h"

namespace tbex::test {

inline Problem dx_problem(const Case& c, DType dt) {
  const ConvGeometry g = geometry(c);
  return make_backprop_input_problem(shape_fz3d(w_dims(g), c.groups), dt, shape_6hd(y_dims(g)), dt,
                                     {c.cout, g.cin_pg(), c.k[0], c.k[1], c.k[2]},
                                     {c.n, c.in[0], c.in[1], c.in[2], c.cin}, para_for(c, true));
}

inline Problem dw_problem(const Case& c, DType dt) {
  const ConvGeometry g = geometry(c);
  return make_backprop_filter_problem(shape_6hd(x_dims(g)), dt, shape_6hd(y_dims(g)), dt,
                                      {c.cout, c.k[0], g.cin_pg(), c.k[1], c.k[2]},
                                      para_for(c, false));
}

/** The assembly of `pipeline` (args `args`) for `t`. */
inline std::string assembly(Halide::Pipeline pipeline, const std::vector<Halide::Argument>& args,
                            const Halide::Target& t, const std::string& tag) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("tbex_" + tag + "_" + std::to_string(::getpid()) + ".s");
  pipeline.compile_to_assembly(path.string(), args, "k", t);
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  std::filesystem::remove(path);
  return s.str();
}

/** Halide's dimension order (innermost first) of a shape given outermost first. */
inline std::vector<int> halide_dims(const std::vector<int64_t>& shape) {
  return std::vector<int>(shape.rbegin(), shape.rend());
}

/** A case's exact bf16 operands, as the kernel takes them (`first`: FRACTAL_Z_3D weights for dX,
 * 6HD x for dW; `dy` 6HD) and as the reference does (NCDHW / OIDHW doubles). */
struct Bf16Operands {
  std::vector<uint8_t> first, dy;
  std::vector<double> first_ref, dy_ref;
};

/** dX's operands of case `c`, drawn with seeds `seed` (weights) and `seed + 1` (dy). */
inline Bf16Operands bf16_dx_operands(const Case& c, uint32_t seed) {
  const ConvGeometry g = geometry(c);
  const Dims5 yd = y_dims(g), wd = w_dims(g);
  Bf16Operands o;
  o.first_ref = random_eighths(count({wd.begin(), wd.end()}), seed);
  o.dy_ref = random_eighths(count({yd.begin(), yd.end()}), seed + 1);
  auto wb = encode(o.first_ref, DType::kBFloat16), yb = encode(o.dy_ref, DType::kBFloat16);
  o.first.resize(count(shape_fz3d(wd, c.groups)) * 2);
  o.dy.resize(count(shape_6hd(yd)) * 2);
  oidhw_to_fz3d(wb.data(), o.first.data(), wd, c.groups, 2);
  ncdhw_to_6hd(yb.data(), o.dy.data(), yd, 2);
  return o;
}

/** dW's operands of case `c`, drawn with seeds `seed` (x) and `seed + 1` (dy). */
inline Bf16Operands bf16_dw_operands(const Case& c, uint32_t seed) {
  const ConvGeometry g = geometry(c);
  const Dims5 xd = x_dims(g), yd = y_dims(g);
  Bf16Operands o;
  o.first_ref = random_eighths(count({xd.begin(), xd.end()}), seed);
  o.dy_ref = random_eighths(count({yd.begin(), yd.end()}), seed + 1);
  auto xb = encode(o.first_ref, DType::kBFloat16), yb = encode(o.dy_ref, DType::kBFloat16);
  o.first.resize(count(shape_6hd(xd)) * 2);
  o.dy.resize(count(shape_6hd(yd)) * 2);
  ncdhw_to_6hd(xb.data(), o.first.data(), xd, 2);
  ncdhw_to_6hd(yb.data(), o.dy.data(), yd, 2);
  return o;
}

/** `pipeline` (args: the two operands, then the output of `out_dims`, outermost first) compiled
 * for `t` and run on `o`; the output as the kernel leaves it. */
inline std::vector<float> run_bf16(Halide::Pipeline pipeline, const std::vector<Halide::Argument>& args,
                                   const Halide::Target& t, const Problem& p, Bf16Operands& o,
                                   const std::vector<int64_t>& out_dims) {
  Halide::Buffer<uint16_t> b0(reinterpret_cast<uint16_t*>(o.first.data()), halide_dims(p.input_shapes()[0]));
  Halide::Buffer<uint16_t> b1(reinterpret_cast<uint16_t*>(o.dy.data()), halide_dims(p.input_shapes()[1]));
  std::vector<float> out(count(out_dims), -7.0f);
  Halide::Buffer<float> bo(out.data(), halide_dims(out_dims));
  Halide::Callable k = pipeline.compile_to_callable(args, t);
  EXPECT_EQ(k(b0, b1, bo), 0);
  return out;
}

/** Runs `pipeline` (args: filter, dy; bf16 problem `p` of case `c`) compiled for `t` on the
 * case's operands drawn with `seed` and checks dX against the float64 reference, and its 6HD
 * padding lanes (channels past Cin) for exactly 0. */
inline void check_bf16_dx(const Case& c, const Problem& p, Halide::Pipeline pipeline,
                          const std::vector<Halide::Argument>& args, const Halide::Target& t,
                          uint32_t seed) {
  const ConvGeometry g = geometry(c);
  const Dims5 xd = x_dims(g);
  Bf16Operands o = bf16_dx_operands(c, seed);
  const std::vector<float> out = run_bf16(pipeline, args, t, p, o, p.x_shape());
  std::vector<float> dx(count({xd.begin(), xd.end()}));
  ncdhw_from_6hd(out.data(), dx.data(), xd, 4);
  expect_close(std::vector<double>(dx.begin(), dx.end()), ref_dx(g, o.first_ref, o.dy_ref), 1e-6);
  const std::vector<int64_t> xs = p.x_shape();  // (N, D, C1, H, W, 16)
  const size_t block = size_t(xs[3] * xs[4] * 16);
  size_t nonzero = 0;
  for (size_t i = 0; i < out.size(); ++i)
    if ((i / block) % size_t(xs[2]) * 16 + i % 16 >= size_t(c.cin)) nonzero += out[i] != 0.0f;
  EXPECT_EQ(nonzero, 0u) << c.name << ": padding lanes not 0";
}

/** Runs `pipeline` (args: x, dy; bf16 problem `p` of case `c`) compiled for `t` on the case's
 * operands drawn with `seed` and checks dW against the float64 reference; its cross-group and
 * padding entries must be exactly 0 (packing the weights again reproduces the output). */
inline void check_bf16_dw(const Case& c, const Problem& p, Halide::Pipeline pipeline,
                          const std::vector<Halide::Argument>& args, const Halide::Target& t,
                          uint32_t seed) {
  const ConvGeometry g = geometry(c);
  const Dims5 wd = w_dims(g);
  Bf16Operands o = bf16_dw_operands(c, seed);
  const std::vector<float> out =
      run_bf16(pipeline, args, t, p, o,
               {p.group.real_g, g.kernel[0], p.group.cin1_g, g.kernel[1], g.kernel[2],
                p.group.cout_g, kC0});
  std::vector<float> w(count({wd.begin(), wd.end()}));
  oidhw_from_fz3d(out.data(), w.data(), wd, c.groups, 4);
  expect_close(std::vector<double>(w.begin(), w.end()), ref_dw(g, o.first_ref, o.dy_ref), 1e-6);
  std::vector<float> again(out.size());
  oidhw_to_fz3d(w.data(), again.data(), wd, c.groups, 4);
  EXPECT_EQ(0, std::memcmp(again.data(), out.data(), out.size() * 4));
}

}  // namespace tbex::test
