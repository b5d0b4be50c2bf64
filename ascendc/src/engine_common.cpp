#include "engine_common.h"

#include <algorithm>
#include <future>
#include <mutex>

#include "tbex/thread_pool.h"

namespace tbex::ascendc::detail {

DType to_dtype(Elem e) {
  switch (e) {
    case Elem::kHalf: return DType::kFloat16;
    case Elem::kBFloat16: return DType::kBFloat16;
    case Elem::kFloat: return DType::kFloat32;
  }
  throw InternalError("unknown ascendc element type");
}

void BlockWalk::plan(int64_t m, int64_t n, uint32_t base_m, uint32_t base_n) {
  base_m_ = base_m;
  base_n_ = base_n;
  m_iter_ = (uint32_t)ceil_div(m, base_m);
  n_iter_ = (uint32_t)ceil_div(n, base_n);
  tail_m_ = (uint32_t)(m - (int64_t)(m_iter_ - 1) * base_m);
  tail_n_ = (uint32_t)(n - (int64_t)(n_iter_ - 1) * base_n);
  blocks_.clear();
  pos_ = 0;
}

bool BlockWalk::iterate(IterCounters& ctx, bool first, uint32_t step_m, uint32_t step_n,
                        uint32_t order) {
  if (first) {
    blocks_.clear();
    pos_ = 0;
    step_m = std::max<uint32_t>(step_m, 1);
    step_n = std::max<uint32_t>(step_n, 1);
    if (order == 1) {  // ORDER_N
      for (uint32_t ng = 0; ng < n_iter_; ng += step_n)
        for (uint32_t mg = 0; mg < m_iter_; mg += step_m)
          for (uint32_t n = ng; n < std::min(ng + step_n, n_iter_); ++n)
            for (uint32_t m = mg; m < std::min(mg + step_m, m_iter_); ++m) blocks_.emplace_back(m, n);
    } else {  // ORDER_M
      for (uint32_t mg = 0; mg < m_iter_; mg += step_m)
        for (uint32_t ng = 0; ng < n_iter_; ng += step_n)
          for (uint32_t m = mg; m < std::min(mg + step_m, m_iter_); ++m)
            for (uint32_t n = ng; n < std::min(ng + step_n, n_iter_); ++n) blocks_.emplace_back(m, n);
    }
  } else if (done() || ++pos_ >= blocks_.size()) {
    pos_ = blocks_.size();
    return false;
  }
  if (done()) return false;
  const auto [m, n] = blocks_[pos_];
  ctx.curML0Idx_ = m;
  ctx.curNL0Idx_ = n;
  ctx.baseUseM_ = m + 1 == m_iter_ ? tail_m_ : base_m_;
  ctx.baseUseN_ = n + 1 == n_iter_ ? tail_n_ : base_n_;
  return true;
}

AxisWindow dx_axis(int64_t first, int64_t count, int64_t out, int64_t k, int64_t s, int64_t d,
                   int64_t pad) {
  AxisWindow w;
  const int64_t reach = (k - 1) * d;  // a dy position covers rows [o*s - pad, o*s - pad + reach]
  w.o0 = std::max<int64_t>(0, -floor_div64(-(first + pad - reach), s));  // ceil, signed
  w.o1 = std::min(out - 1, floor_div64(first + count - 1 + pad, s));
  if (w.o0 > w.o1) return w;
  w.start = std::max(first, w.o0 * s - pad);
  w.end = std::min(first + count, w.o1 * s - pad + reach + 1);
  if (w.start >= w.end) return w;
  // Some row of [start, end) may still fall between taps (stride and dilation gaps): those get
  // zero from the local convolution as from the full one.
  w.empty = false;
  w.pad_head = pad + w.start - w.o0 * s;
  const int64_t rows = w.end - w.start, outs = w.o1 - w.o0 + 1;
  w.pad_tail = std::max<int64_t>(0, (outs - 1) * s + reach + 1 - rows - w.pad_head);
  return w;
}

DepthTaps dx_depth(int64_t din, int64_t out, int64_t k, int64_t s, int64_t d, int64_t pad) {
  DepthTaps t;
  std::vector<std::pair<int64_t, int64_t>> taps;  // (kd, do)
  for (int64_t kd = 0; kd < k; ++kd) {
    const int64_t v = din + pad - kd * d;
    if (v >= 0 && v % s == 0 && v / s < out) taps.emplace_back(kd, v / s);
  }
  t.count = (int64_t)taps.size();
  if (t.count == 0) return t;
  t.kd0 = taps.front().first;
  t.do_min = taps.back().second;
  if (t.count > 1) {
    t.step = taps[1].first - taps[0].first;
    t.q = taps[0].second - taps[1].second;
  }
  return t;
}

FwdWindow dw_axis(int64_t ho_start, int64_t rows, int64_t in, int64_t k, int64_t s, int64_t d,
                  int64_t pad) {
  FwdWindow w;
  const int64_t first = ho_start * s - pad;                      // row of (ho_start, tap 0)
  const int64_t last = first + (rows - 1) * s + (k - 1) * d;      // row of the last tap
  w.start = std::max<int64_t>(first, 0);
  w.end = std::min(last + 1, in);
  if (w.end <= w.start) return w;
  w.pad_head = w.start - first;
  w.pad_tail = (last - first + 1) - (w.end - w.start) - w.pad_head;
  return w;
}

namespace {
std::mutex g_mu;
std::map<std::string, std::shared_future<std::shared_ptr<const Kernel>>> g_compiling;  // in flight
// Local problems seen in this process, by their numbers. A launch's engines are made anew; their
// kernels are not. Bounded: past kMaxKept entries the map starts over (tbex's own caches still
// hold the kernels).
constexpr size_t kMaxKept = 1024;
std::mutex g_kept_mu;
std::map<std::vector<int64_t>, std::shared_ptr<const Kernel>> g_kept;
}  // namespace

std::mutex& page_lock(const void* p) {
  static std::mutex locks[256];
  const uintptr_t page = reinterpret_cast<uintptr_t>(p) >> 12;
  return locks[(page ^ (page >> 8)) % 256];
}

std::shared_ptr<const Kernel> local_kernel(OpKind op, const ConvGeometry& g, DType in, DType res) {
  std::vector<int64_t> id{(int64_t)op, (int64_t)in, (int64_t)res, (int64_t)num_threads(), g.n,
                          g.cin, g.cout, g.groups};
  for (const auto* a : {&g.in, &g.out, &g.kernel, &g.stride, &g.dilation}) id.insert(id.end(), a->begin(), a->end());
  id.insert(id.end(), g.pads.begin(), g.pads.end());
  {
    std::lock_guard<std::mutex> l(g_kept_mu);
    if (auto it = g_kept.find(id); it != g_kept.end()) return it->second;
  }
  const Problem p = make_problem(op, g, in, res);
  const std::string key = p.canonical();
  std::shared_future<std::shared_ptr<const Kernel>> fut;
  bool compile_here = false;
  std::promise<std::shared_ptr<const Kernel>> promise;
  {
    std::lock_guard<std::mutex> l(g_mu);
    auto it = g_compiling.find(key);
    if (it == g_compiling.end()) {
      fut = promise.get_future().share();
      g_compiling.emplace(key, fut);
      compile_here = true;
    } else {
      fut = it->second;
    }
  }
  if (compile_here) {
    // Only compiles in flight are shared here; finished ones live in tbex's own kernel cache.
    try {
      promise.set_value(compile(p));
    } catch (...) {
      promise.set_exception(std::current_exception());
    }
    std::lock_guard<std::mutex> l(g_mu);
    g_compiling.erase(key);
  }
  auto k = fut.get();
  std::lock_guard<std::mutex> l(g_kept_mu);
  if (g_kept.size() >= kMaxKept) g_kept.clear();
  g_kept.emplace(std::move(id), k);
  return k;
}

void fail(const char* api_call, const std::string& message) {
  throw UserError(code::kValue, api_call, message);
}

}  // namespace tbex::ascendc::detail
