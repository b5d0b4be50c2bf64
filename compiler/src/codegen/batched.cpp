/** Operands past 2^31 elements: kernels index an operand with 32-bit offsets where its extents are
 * compile-time constants, so a problem whose batched operands exceed that runs as a kernel
 * compiled for a slice of the batch, once per slice. dX and the forward conv write their slice of
 * the output; dW sums the slices' results in fp32 (the batch is part of its reduction: a different
 * summation order than one pass, fixed by the problem). docs/validation.md, "Size limits". */
#include "codegen/batched.h"

#include <algorithm>
#include <cstring>

#include "codegen/jit.h"
#include "tbex/errors.h"
#include "tbex/knobs.h"
#include "tbex/pack.h"

namespace tbex::codegen {
namespace {

int64_t max_elements() {
  return std::min<long long>(knobs::get_int("TBEX_KERNEL_MAX_ELEMENTS"), (int64_t(1) << 31) - 1);
}

int64_t elements(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

/** Which inputs carry the batch (their dim 0 is N), and whether the output does. */
std::vector<bool> batched_inputs(const Problem& p) {
  if (p.op == OpKind::kBackpropFilter) return {true, true};  // x, dy
  if (p.op == OpKind::kForward) return {true, false};        // x, filter
  std::vector<bool> b{false, true};                          // filter, dy (, bias)
  if (p.has_bias) b.push_back(false);
  return b;
}

/** The problem with a batch of n. */
Problem with_batch(const Problem& p, int64_t n) {
  ConvGeometry g = p.geo;
  g.n = n;
  return make_problem(p.op, g, p.in_dtype, p.res_dtype, p.kernel_name,
                      p.has_bias ? std::optional<DType>(p.bias_dtype) : std::nullopt);
}

}  // namespace

bool fits_one_kernel(const Problem& p) {
  const int64_t limit = max_elements();
  for (const auto& s : p.input_shapes())
    if (elements(s) > limit) return false;
  return elements(p.output_shape()) <= limit;
}

namespace {

/** Batch slice [n0, n0 + n) of t (dim 0). */
TensorArg slice(const TensorArg& t, int64_t n0, int64_t n) {
  TensorArg s = t;
  if (s.strides.empty()) s.strides = dense_strides(t.shape);
  s.data = static_cast<const char*>(t.data) + n0 * s.strides[0] * int64_t(dtype_size(t.dtype));
  s.shape[0] = n;
  return s;
}

class BatchedKernel final : public Kernel {
 public:
  BatchedKernel(Problem whole, std::shared_ptr<const Kernel> part, int64_t n)
      : whole_(std::move(whole)), part_(std::move(part)), n_(n) {}

  const Problem& problem() const override { return whole_; }
  const std::string& schedule_name() const override { return part_->schedule_name(); }
  const std::string& variant() const override { return part_->variant(); }
  int threads() const override { return part_->threads(); }

  void run(const std::vector<TensorArg>& inputs, const TensorArg& output) const override {
    const auto shapes = whole_.input_shapes();
    user_check(inputs.size() == shapes.size(), code::kListLength, "inputs",
               "expected " + std::to_string(shapes.size()) + " inputs, got " + std::to_string(inputs.size()));
    user_check(output.shape == whole_.output_shape() && output.dtype == whole_.res_dtype,
               code::kValue, "out", "shape " + list_str(output.shape) + " / dtype " +
                                        dtype_name(output.dtype) + " do not match the kernel's " +
                                        list_str(whole_.output_shape()));
    const std::vector<bool> batched = batched_inputs(whole_);
    const bool dw = whole_.op == OpKind::kBackpropFilter;
    // dW: the first slice writes the output, the others a dense scratch added into it.
    std::vector<float> part;
    const std::vector<int64_t> out_shape = whole_.output_shape();
    const std::vector<int64_t> out_strides =
        output.strides.empty() ? dense_strides(out_shape) : output.strides;
    for (int64_t n0 = 0; n0 < whole_.geo.n; n0 += n_) {
      std::vector<TensorArg> in;
      for (size_t i = 0; i < inputs.size(); ++i)
        in.push_back(batched[i] ? slice(inputs[i], n0, n_) : inputs[i]);
      if (!dw) {
        part_->run(in, slice(output, n0, n_));
        continue;
      }
      if (n0 == 0) {
        part_->run(in, output);
        continue;
      }
      part.resize(size_t(elements(out_shape)));
      part_->run(in, TensorArg{part.data(), out_shape, {}, DType::kFloat32});
      add_into(output, out_strides, part);
    }
  }

 private:
  /** output += part over dW's 4-D (real_g, rows, cout_g, 16) output. */
  void add_into(const TensorArg& output, const std::vector<int64_t>& st, const std::vector<float>& part) const {
    const auto& s = whole_.output_shape();
    float* out = static_cast<float*>(const_cast<void*>(output.data));
    const float* p = part.data();
    parallel_range(s[0] * s[1], [&](int64_t ab) {
      const int64_t a = ab / s[1], b = ab % s[1];
      for (int64_t c = 0; c < s[2]; ++c)
        for (int64_t d = 0; d < s[3]; ++d)
          out[a * st[0] + b * st[1] + c * st[2] + d * st[3]] += p[((ab * s[2]) + c) * s[3] + d];
    });
  }

  Problem whole_;
  std::shared_ptr<const Kernel> part_;
  int64_t n_;
};

}  // namespace

std::shared_ptr<const Kernel> compile_batched(const Problem& p, const CompileOptions& request) {
  if (fits_one_kernel(p)) return nullptr;
  // The largest batch slice that divides N and fits (validate() has checked one sample fits).
  for (int64_t n = p.geo.n / 2; n >= 1; --n) {
    if (p.geo.n % n != 0) continue;
    Problem part = with_batch(p, n);
    if (fits_one_kernel(part))
      return std::make_shared<BatchedKernel>(p, jit_compile(part, request), n);
  }
  throw UserError(code::kRange, "shape",
                  "no batch slice of " + p.canonical() + " fits " + std::to_string(max_elements()) +
                      " elements per operand (TBEX_KERNEL_MAX_ELEMENTS)");
}

}  // namespace tbex::codegen
