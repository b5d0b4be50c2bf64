/** Which kernels a convolution_backward call runs, and where their packed operands sit in the
 * workspace. The Problems come from make_problem, exactly as the TBE frontend builds them from
 * the same geometry (tests/cpp/test_conv_backward_routes.cpp checks that). */
#include "conv_backward_impl.h"
#include "tbex/errors.h"
#include "support/lru_cache.h"
#include "tbex/knobs.h"

namespace tbex::conv_bwd {
namespace {

/** The dtype operands are packed to (cubeMathType 2: fp16; otherwise the wider input dtype). */
DType compute_dtype(const ConvBackwardArgs& a, DType x, DType y) {
  if (a.cube_math_type == 2) return DType::kFloat16;
  return x == y ? x : DType::kFloat32;
}

/** Bumps `bytes` by one 64-byte-aligned buffer; returns its offset. */
uint64_t reserve(uint64_t& bytes, const std::vector<int64_t>& shape, DType t) {
  uint64_t n = dtype_size(t);
  for (int64_t d : shape) n *= (uint64_t)d;
  const uint64_t off = bytes;
  bytes += (n + 63) / 64 * 64;
  return off;
}

}  // namespace

KernelProblems kernel_problems(const ConvBackwardArgs& a, const Checked& c) {
  KernelProblems k;
  if (c.geo.n == 0) return k;  // empty batch: grad_weight and grad_bias are zeros, nothing to run
  if (a.output_mask[0]) {
    // grad_input reads weight and grad_output: dX of C, or C's forward conv when transposed.
    const DType t = compute_dtype(a, a.weight_dtype, a.grad_output_dtype);
    k.dx = make_problem(a.transposed ? OpKind::kForward : OpKind::kBackpropInput, c.geo, t,
                        c.spec[0].dtype);
  }
  if (a.output_mask[1]) {
    // C's x and dy are input and grad_output (transposed: the other way round); dW is fp32.
    const DType t = compute_dtype(a, a.input_dtype, a.grad_output_dtype);
    k.dw = make_problem(OpKind::kBackpropFilter, c.geo, t, DType::kFloat32);
  }
  return k;
}

Layout workspace_layout(const ConvBackwardArgs& a, const KernelProblems& k) {
  Layout l;
  if (k.dx) {
    const Problem& p = *k.dx;
    const auto ins = p.input_shapes();  // dX: (filter, dy); forward: (x, filter)
    l.dx_w = reserve(l.bytes, ins[a.transposed ? 1 : 0], p.in_dtype);
    l.dx_go = reserve(l.bytes, ins[a.transposed ? 0 : 1], p.in_dtype);
    l.dx_out = reserve(l.bytes, p.output_shape(), p.res_dtype);
  }
  if (k.dw) {
    const Problem& p = *k.dw;
    // grad_output is C's dy (normal) or C's x (transposed); input is the other one. Both
    // kernels read grad_output as the same 6HD tensor, so one pack serves both when their
    // compute dtypes agree.
    l.share_go = k.dx && k.dx->in_dtype == p.in_dtype;
    const auto go_shape = a.transposed ? p.x_shape() : p.dy_shape();
    l.dw_go = l.share_go ? l.dx_go : reserve(l.bytes, go_shape, p.in_dtype);
    l.dw_in = reserve(l.bytes, a.transposed ? p.dy_shape() : p.x_shape(), p.in_dtype);
    l.dw_out = reserve(l.bytes, p.output_shape(), p.res_dtype);
  }
  return l;
}

Plan::Plan(const ConvBackwardArgs& a) : args_(a), checked_(check_args(a)) {
  const KernelProblems k = kernel_problems(args_, checked_);
  if (k.dx) dx_ = compile(*k.dx);
  if (k.dw) dw_ = compile(*k.dw);
  layout_ = workspace_layout(args_, k);
}

std::string Plan::describe() const {
  const bool t = args_.transposed;
  std::string s = t ? "transposed; " : "";
  if (dx_) s += std::string(t ? "grad_input: conv3d " : "grad_input: dX ") + dx_->schedule_name() + "; ";
  if (dw_) s += "grad_weight: dW " + dw_->schedule_name() + "; ";
  if (args_.output_mask[2]) s += "grad_bias: sum; ";
  return s + "workspace " + std::to_string(layout_.bytes) + " bytes";
}

}  // namespace tbex::conv_bwd

namespace tbex {

std::shared_ptr<const ConvBackwardPlan> ConvBackwardPlan::make(const ConvBackwardArgs& args) {
  try {
    return std::make_shared<conv_bwd::Plan>(args);
  } catch (const UserError& e) {
    // A framework caller gets aclnn's status codes: the kernels' own checks (TBE codes) on the
    // geometry these arguments imply are invalid parameters too.
    if (e.code() == code::kAclnnNull || e.code() == code::kAclnnInvalid) throw;
    throw UserError(code::kAclnnInvalid, e.param(), e.message() + " [" + e.code() + "]");
  }
}

namespace {

support::LruCache<const ConvBackwardPlan>& plan_cache() {
  static support::LruCache<const ConvBackwardPlan> cache(
      [] { return knobs::get_int("TBEX_KERNEL_CACHE_CAPACITY"); });
  return cache;
}

std::string key_of(const ConvBackwardArgs& a) {
  std::string k;
  auto ints = [&](const std::vector<int64_t>& v) {
    for (int64_t x : v) k += std::to_string(x) + ",";
    k += ";";
  };
  auto spec = [&](const std::optional<TensorSpec>& s) {
    if (s) ints(s->shape), k += dtype_name(s->dtype);
    k += ";";
  };
  ints(a.grad_output_shape), ints(a.input_shape), ints(a.weight_shape);
  k += std::string(dtype_name(a.grad_output_dtype)) + dtype_name(a.input_dtype) +
       dtype_name(a.weight_dtype) + ";";
  if (a.bias_sizes) ints(*a.bias_sizes);
  k += "|";
  ints(a.stride), ints(a.dilation), ints(a.padding), ints(a.output_padding);
  k += std::to_string(a.transposed) + std::to_string(a.groups) + std::to_string(a.output_mask[0]) +
       std::to_string(a.output_mask[1]) + std::to_string(a.output_mask[2]) +
       std::to_string(a.cube_math_type) + ";";
  spec(a.grad_input), spec(a.grad_weight), spec(a.grad_bias);
  return k + std::to_string(num_threads()) + "|" + knobs::codegen_key();
}

}  // namespace

std::shared_ptr<const ConvBackwardPlan> ConvBackwardPlan::cached(const ConvBackwardArgs& args) {
  const std::string key = key_of(args);
  if (auto p = plan_cache().find(key)) return p;
  return plan_cache().insert(key, make(args));
}

KernelCacheStats ConvBackwardPlan::cache_stats() {
  const support::LruStats s = plan_cache().stats();
  return KernelCacheStats{s.hits, s.misses, s.evictions, s.size, s.capacity};
}

}  // namespace tbex
