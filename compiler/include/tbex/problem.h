#pragma once
/** Typed conv3d problems (dW, dX and the forward conv): what the frontend produces from TBE
 * arguments and what every later stage (ops, schedules, codegen) consumes. Nothing past the
 * frontend sees a para_dict. */
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tbex/dtype.h"
#include "tbex/group_dict.h"

namespace tbex {

/** kForward is the forward conv y = conv(x, W): the gradient w.r.t. the input of a transposed
 * convolution. */
enum class OpKind { kBackpropFilter, kBackpropInput, kForward };
const char* op_name(OpKind op);  ///< "conv3d_backprop_filter" | "conv3d_backprop_input" | "conv3d"

/** The convolution, in NCDHW terms, independent of which gradient is computed. */
struct ConvGeometry {
  int64_t n = 1, cin = 1, cout = 1, groups = 1;
  std::array<int64_t, 3> in{1, 1, 1};      ///< D, H, W of the forward input (fmap / dx)
  std::array<int64_t, 3> out{1, 1, 1};     ///< Do, Ho, Wo of the forward output (dy)
  std::array<int64_t, 3> kernel{1, 1, 1};  ///< Kd, Kh, Kw
  std::array<int64_t, 3> stride{1, 1, 1};
  std::array<int64_t, 3> dilation{1, 1, 1};
  std::array<int64_t, 6> pads{0, 0, 0, 0, 0, 0};  ///< front, back, top, bottom, left, right

  int64_t cin1() const { return ceil_div(cin, kC0); }
  int64_t cout1() const { return ceil_div(cout, kC0); }
  int64_t cin_pg() const { return cin / groups; }
  int64_t cout_pg() const { return cout / groups; }
  /** Multiply-adds of one pass times two: 2*N*Cout*Do*Ho*Wo*(Cin/groups)*Kd*Kh*Kw. */
  double flops() const;
};

struct Problem {
  OpKind op = OpKind::kBackpropFilter;
  ConvGeometry geo;
  /** The filter packing's group_dict: derive_group_dict(Cin, Cout, groups) for dW and dX; for
   * kForward derive_group_dict(Cout, Cin, groups), because its filter is the FRACTAL_Z_3D of the
   * per-group transposed weight (see make_problem). */
  GroupDict group;
  DType in_dtype = DType::kFloat32;   ///< x and dy (dW), filter and dy (dX), x and filter (forward)
  DType res_dtype = DType::kFloat32;  ///< output element type
  bool has_bias = false;              ///< dX only: tensor_bias (Cin values, float32 or in_dtype)
  DType bias_dtype = DType::kFloat32;
  std::string kernel_name;

  /** Shapes of the operands in TBE layouts (outermost first). */
  std::vector<int64_t> x_shape() const;       ///< 6HD (N, D, C1, H, W, 16)
  std::vector<int64_t> dy_shape() const;      ///< 6HD (N, Do, Co1, Ho, Wo, 16); also forward's y
  std::vector<int64_t> filter_shape() const;  ///< FRACTAL_Z_3D (real_g*Kd*cin1_g*Kh*Kw, cout_g/16, 16, 16) of `group`
  std::vector<int64_t> dw_shape() const;      ///< (real_g, Kd*cin1_g*Kh*Kw, cout_g, 16)
  std::vector<int64_t> dx_shape() const;      ///< (N, D, C1, H*W, 16)
  std::vector<int64_t> bias_shape() const;    ///< (Cin,)

  /** Operand shapes in kernel argument order (inputs then output). */
  std::vector<std::vector<int64_t>> input_shapes() const;
  std::vector<DType> input_dtypes() const;
  /** TBE names of the inputs, for error messages: x, out_backprop / filter, out_backprop[,
   * tensor_bias] / x, filter. */
  std::vector<std::string> input_names() const;
  std::vector<int64_t> output_shape() const;

  /** benchdnn-style canonical string; equal strings mean identical kernels. */
  std::string canonical() const;
};

/** TBE's para_dict, parsed from the caller's dict but not yet validated. */
struct ParaDict {
  std::optional<std::vector<int64_t>> strides;
  std::optional<std::vector<int64_t>> pads;
  std::optional<std::vector<int64_t>> dilations;
  std::optional<std::string> res_dtype;
  std::string kernel_name;
  std::optional<std::map<std::string, int64_t>> group_dict;
  /** tbex extension: the group count. Without it, groups come from group_dict (cin_ori over the
   * filter's Cin/groups), else 1. */
  std::optional<int64_t> groups;
};

/** TBE's own para_dict keys for `op` (kBackpropFilter / kBackpropInput): those tbex reads and the
 * framework attributes TBE passes through without effect on the math. */
const std::vector<std::string>& para_dict_keys(OpKind op);

/** UserError(code::kValue) for a para_dict key that is not one of para_dict_keys(op), with the
 * closest known key as a suggestion ("stride": did you mean 'strides'?). */
void check_para_dict_key(const std::string& key, OpKind op);

/** The TBE frontends: parse the operands' shapes and para_dict into a ConvGeometry, check what
 * only TBE's arguments can get wrong (C0, C1 blocks, batch, para_dict lengths and N/C positions,
 * group_dict keys), then call make_problem.
 *
 * dsl.conv3d_backprop_filter: x and out_backprop are 6HD, filter_size is [Cout, Kd, Cin/groups, Kh, Kw]. */
Problem make_backprop_filter_problem(const std::vector<int64_t>& x_shape, DType x_dtype,
                                     const std::vector<int64_t>& dy_shape, DType dy_dtype,
                                     const std::vector<int64_t>& filter_size, const ParaDict& para);

/** dsl.conv3d_backprop_input: filter is FRACTAL_Z_3D, out_backprop 6HD, filter_size is
 * [Cout, Cin/groups, Kd, Kh, Kw], input_size is [N, D, H, W, Cin] (NDHWC).
 * bias_shape: empty for no tensor_bias. */
Problem make_backprop_input_problem(const std::vector<int64_t>& filter_shape, DType filter_dtype,
                                    const std::vector<int64_t>& dy_shape, DType dy_dtype,
                                    const std::vector<int64_t>& filter_size,
                                    const std::vector<int64_t>& input_size, const ParaDict& para,
                                    const std::vector<int64_t>& bias_shape = {},
                                    DType bias_dtype = DType::kFloat32);

/** The one builder of a Problem: the TBE frontends above (after parsing shapes and para_dict
 * into a ConvGeometry) and convolution_backward (from framework arguments) both end here, so one
 * geometry with one set of dtypes gives one Problem whichever way it came in. Checks (UserError,
 * codes in docs/validation.md): sizes, strides, dilations > 0 and pads >= 0; groups divide Cin and
 * Cout (E60038); per spatial dim the dilated kernel fits the padded input (E60014 / E60015 /
 * E62507) and out follows the output size rule (E60024 / E60025 / E62508), naming filter_size /
 * out_backprop for dW and dX and the ConvGeometry fields kernel / out for the forward conv; the
 * op's dtypes: dW's res_dtype is float32, a tensor_bias (dX only) is float32 or in_dtype.
 *
 * kForward operands, in kernel argument order:
 *  - x: 6HD (N, D, C1, H, W, 16), in_dtype;
 *  - filter: in_dtype, the FRACTAL_Z_3D packing of the per-group transposed weight
 *    T[g*cin_pg + i, o, k] = W[g*cout_pg + o, i, k], T = [Cin, Cout/groups, Kd, Kh, Kw]: exactly
 *    oidhw_to_fz3d(T, {Cin, Cout/groups, Kd, Kh, Kw}, groups) (runtime/include/tbex/layout.h),
 *    shape shape_fz3d of the same; output channels sit in the 16 innermost lanes;
 *  - y (output): 6HD (N, Do, Co1, Ho, Wo, 16), res_dtype; lanes of channels >= Cout are 0.
 * y[n, co, o] = sum over ci in co's group and taps k of x[n, ci, o*s + k*dil - pad_head] *
 * W[co, ci - g*cin_pg, k], x zero outside its volume; fp32 accumulation. */
Problem make_problem(OpKind op, const ConvGeometry& geo, DType in_dtype, DType res_dtype,
                     const std::string& kernel_name = "",
                     std::optional<DType> bias_dtype = std::nullopt);

/** make_problem for OpKind::kForward (kept as a name: tests and tools build forward problems
 * directly from a geometry). */
inline Problem make_forward_problem(const ConvGeometry& geo, DType in_dtype, DType res_dtype,
                                    const std::string& kernel_name = "") {
  return make_problem(OpKind::kForward, geo, in_dtype, res_dtype, kernel_name);
}

/** Re-checks a built problem: geometry, spatial rules, group_dict in sync, sizes (what
 * make_problem ends with). */
void validate(const Problem& p);

}  // namespace tbex
