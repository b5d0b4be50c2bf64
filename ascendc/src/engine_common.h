#pragma once
/** What the dW and dX engines share: CANN's block walk, the local convolution a single shape is,
 * the kernel cache, fp32/half/bf16 element access and atomic adds. */
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tbex/ascendc/types.h"
#include "tbex/dtype.h"
#include "tbex/errors.h"
#include "tbex/kernel.h"
#include "tbex/problem.h"

namespace tbex::ascendc::detail {

inline int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }
/** Floor division for a possibly negative numerator. */
inline int64_t floor_div64(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

DType to_dtype(Elem e);

/** CANN's Iterate order over the (m, n) blocks of a single shape: blocks grouped stepM x stepN;
 * iterateOrder 1 (ORDER_N): n groups outermost, M innermost; 0 (ORDER_M): m groups outermost, N
 * innermost. */
class BlockWalk {
 public:
  void reset(uint32_t m_iter, uint32_t n_iter, uint32_t step_m, uint32_t step_n, uint32_t order);
  bool done() const { return pos_ >= blocks_.size(); }
  /** Advances; false when the walk is over. */
  bool next() { return ++pos_ < blocks_.size(); }
  uint32_t m() const { return blocks_[pos_].first; }
  uint32_t n() const { return blocks_[pos_].second; }

 private:
  std::vector<std::pair<uint32_t, uint32_t>> blocks_;
  size_t pos_ = 0;
};

/** One spatial axis of a backward-input single shape: output rows [first, first + count) of an
 * axis of size `in` whose forward conv has `out` positions, kernel k, stride s, dilation d and
 * head pad `pad`. The dy positions [o0, o1] are all that reach those rows; rows [start, end) are
 * the ones any of them reaches (the others get no term); pad_head / pad_tail make the local
 * convolution over rows [start, end) and positions [o0, o1] satisfy the output size rule. */
struct AxisWindow {
  bool empty = true;
  int64_t o0 = 0, o1 = -1, start = 0, end = 0, pad_head = 0, pad_tail = 0;
};
AxisWindow dx_axis(int64_t first, int64_t count, int64_t out, int64_t k, int64_t s, int64_t d,
                   int64_t pad);

/** The depth taps of a backward-input slice `din`: the kd = kd0 + j*step (j < count) whose dy
 * plane do_j = (din + pad - kd*d) / s exists; do_j = do_min + (count - 1 - j) * q. Only these taps
 * have terms: the slice's local problem uses them alone (Kd = count, stride 1, pads count - 1),
 * not all Kd taps with most of them reading padding. */
struct DepthTaps {
  int64_t count = 0, kd0 = 0, step = 1, do_min = 0, q = 1;
};
DepthTaps dx_depth(int64_t din, int64_t out, int64_t k, int64_t s, int64_t d, int64_t pad);

/** The rows of x a forward window reads: dy rows [ho_start, ho_start + rows) of an axis of size
 * `in` with kernel k, stride s, dilation d and head pad `pad`. x rows [start, end) exist (the
 * rest is padding); pad_head / pad_tail make the local convolution exact. */
struct FwdWindow {
  int64_t start = 0, end = 0, pad_head = 0, pad_tail = 0;
};
FwdWindow dw_axis(int64_t ho_start, int64_t rows, int64_t in, int64_t k, int64_t s, int64_t d,
                  int64_t pad);

/** tbex kernels of the local problems, compiled once per process (concurrent cores asking for the
 * same problem wait for one compile) and kept by each engine for its own repeats. */
class KernelSet {
 public:
  /** The kernel of make_problem(op, g, in, res); its problem() gives the operand shapes. A repeat
   * costs a map lookup on the geometry's numbers (no validation, no canonical string). */
  std::shared_ptr<const Kernel> get(OpKind op, const ConvGeometry& g, DType in, DType res);

 private:
  std::map<std::vector<int64_t>, std::shared_ptr<const Kernel>> mine_;
};

/** fp32 atomic add (a CAS loop: several logical cores add into the same dW blocks). */
inline void atomic_add(float* p, float v) {
  float old, want;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  do {
    want = old + v;
  } while (!__atomic_compare_exchange(p, &old, &want, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

/** Atomic add in a 2-byte float type (CANN's dX atomic GetTensorC adds in the output type). */
template <class T>
inline void atomic_add16(T* p, float v) {
  uint16_t* u = reinterpret_cast<uint16_t*>(p);
  uint16_t old = __atomic_load_n(u, __ATOMIC_RELAXED);
  uint16_t want;
  do {
    want = T((float)T::from_bits(old) + v).bits;
  } while (!__atomic_compare_exchange_n(u, &old, want, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

/** UserError(code::kValue) naming the API call at fault. */
[[noreturn]] void fail(const char* api_call, const std::string& message);
inline void require(bool cond, const char* api_call, const std::string& message) {
  if (!cond) fail(api_call, message);
}

}  // namespace tbex::ascendc::detail
