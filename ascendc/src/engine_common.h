#pragma once
/** What the dW and dX engines share: CANN's block walk, the local convolution a single shape is,
 * the kernel cache, fp32/half/bf16 element access and atomic adds. */
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tbex/ascendc/engine.h"
#include "tbex/ascendc/types.h"
#include "tbex/dtype.h"
#include "tbex/errors.h"
#include "tbex/group_dict.h"
#include "tbex/kernel.h"
#include "tbex/problem.h"

namespace tbex::ascendc::detail {

/** Floor division for a possibly negative numerator. */
inline int64_t floor_div64(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

DType to_dtype(Elem e);

/** The blocks of a single shape and CANN's Iterate order over them: M by baseM and N by baseN
 * (tails last), grouped stepM x stepN; iterateOrder 1 (ORDER_N): n groups outermost, M innermost;
 * 0 (ORDER_M): m groups outermost, N innermost. */
class BlockWalk {
 public:
  void plan(int64_t m, int64_t n, uint32_t base_m, uint32_t base_n);
  /** One Iterate: the first block (first) or the next; sets ctx's block counters; false when the
   * walk is over (the counters then keep the last block). */
  bool iterate(IterCounters& ctx, bool first, uint32_t step_m, uint32_t step_n, uint32_t order);
  bool done() const { return pos_ >= blocks_.size(); }

 private:
  std::vector<std::pair<uint32_t, uint32_t>> blocks_;
  size_t pos_ = 0;
  uint32_t m_iter_ = 0, n_iter_ = 0, tail_m_ = 0, tail_n_ = 0, base_m_ = 0, base_n_ = 0;
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

/** The tbex kernel of make_problem(op, g, in, res), compiled once per process (concurrent cores
 * asking for the same problem wait for one compile); its problem() gives the operand shapes. A
 * repeat, in any launch, costs a map lookup on the geometry's numbers. */
std::shared_ptr<const Kernel> local_kernel(OpKind op, const ConvGeometry& g, DType in, DType res);

/** The lock guarding the 4 KiB page of global memory at `p`: atomic GetTensorC adds take it for
 * each page they touch, so adds from several cores into the same elements never interleave, and
 * each page's run is a plain (vectorized) loop instead of a CAS per element. */
std::mutex& page_lock(const void* p);

/** dst[i] += src[i] for i < n, atomically per element with respect to other such calls. T: float,
 * half or bfloat16_t (added in float, rounded once to T: CANN adds in the output type). */
template <class T>
void atomic_add_run(T* dst, const T* src, int64_t n) {
  constexpr uintptr_t kPage = 4096;
  while (n > 0) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(dst);
    const int64_t in_page = (int64_t)((kPage - (a % kPage)) / sizeof(T));
    const int64_t m = in_page < n ? in_page : n;
    {
      std::lock_guard<std::mutex> l(page_lock(dst));
      for (int64_t i = 0; i < m; ++i) dst[i] = T((float)dst[i] + (float)src[i]);
    }
    dst += m;
    src += m;
    n -= m;
  }
}

/** UserError(code::kValue) naming the API call at fault. */
[[noreturn]] void fail(const char* api_call, const std::string& message);
inline void require(bool cond, const char* api_call, const std::string& message) {
  if (!cond) fail(api_call, message);
}

}  // namespace tbex::ascendc::detail
