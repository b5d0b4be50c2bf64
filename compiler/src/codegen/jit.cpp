/** JIT: lower a select() decision, compile it with LLVM, and run it on caller memory.
 *
 * A kernel is a shared object from the on-disk cache (codegen/disk_cache: compiled once, reused
 * across processes), or a Halide::Callable in memory when the disk cache is off or unusable.
 * Compiled kernels are also kept in the in-process kernel cache (bounded, least recently used
 * first out), keyed by what determines the code: canonical problem, decided schedule and variant,
 * threads and the knobs that change code generation. Parallel loops run on tbex's own pool
 * (runtime/thread_pool), which keeps thread control identical for JIT and AOT kernels. */
#include "codegen/jit.h"

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>

#include "HalideRuntime.h"
#include "codegen/batched.h"
#include "codegen/disk_cache.h"
#include "codegen/objects.h"
#include "lower/pipeline.h"
#include "support/files.h"
#include "support/lru_cache.h"
#include "tbex/errors.h"
#include "tbex/knobs.h"
#include "tbex/log.h"
#include "tbex/scratch.h"

namespace tbex {
namespace {

/** Per-call context: Halide reports runtime errors through it. */
struct CallContext : Halide::JITUserContext {
  std::string error;
};

void on_error(Halide::JITUserContext* ctx, const char* msg) {
  static_cast<CallContext*>(ctx)->error += msg;
}

/** Intermediate buffers come from tbex's scratch cache (no page faults per call). */
void* jit_malloc(Halide::JITUserContext*, size_t bytes) { return scratch_alloc(bytes); }
void jit_free(Halide::JITUserContext*, void* p) { scratch_free(p); }
void* so_malloc(void*, size_t bytes) { return scratch_alloc(bytes); }
void so_free(void*, void* p) { scratch_free(p); }

int do_par_for(Halide::JITUserContext* ctx, int (*f)(Halide::JITUserContext*, int, uint8_t*),
               int min, int extent, uint8_t* closure) {
  return parallel_for(ctx, reinterpret_cast<int (*)(void*, int, uint8_t*)>(f), min, extent,
                      closure);
}

/** Per-call context of a cached .so (compiled with Target::UserContext): its runtime passes the
 * pointer to the handlers below, and the tasks of a parallel loop receive it back. */
struct SoCallContext {
  std::string error;
};

void so_on_error(void* ctx, const char* msg) {
  if (ctx) static_cast<SoCallContext*>(ctx)->error += msg;
}

int so_do_par_for(void* ctx, int (*f)(void*, int, uint8_t*), int min, int extent, uint8_t* closure) {
  return parallel_for(ctx, f, min, extent, closure);
}

/** The target of cached .so kernels: the JIT's, plus a per-call user context. */
Halide::Target so_target() { return lower::host_target().with_feature(Halide::Target::UserContext); }

/** The runtime those kernels link (codegen::runtime_target: the same for every CPU): its name
 * and its object file. */
std::string so_runtime_id() { return codegen::runtime_target(so_target()).to_string(); }
std::string so_runtime_object() {
  return codegen::runtime_object_bytes(codegen::runtime_target(so_target()));
}

halide_type_t buffer_type(DType t) {
  switch (t) {
    case DType::kFloat16: return halide_type_t(halide_type_float, 16);
    case DType::kBFloat16: return halide_type_t(halide_type_uint, 16);  // bits, as in ops/
    case DType::kFloat32: return halide_type_t(halide_type_float, 32);
  }
  throw InternalError("unknown DType");
}

std::string shape_str(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

void check_input_count(size_t want, size_t got) {
  user_check(got == want, code::kListLength, "inputs",
             "expected " + std::to_string(want) + " inputs, got " + std::to_string(got));
}

/** Copies the strided tensor `t` into `dense` (C order); strides in elements. A contiguous
 * innermost dim is copied a row at a time. */
void copy_dense(const TensorArg& t, const std::vector<int64_t>& strides, std::vector<uint8_t>& dense) {
  const int64_t esize = (int64_t)dtype_size(t.dtype);
  const int rank = (int)t.shape.size();
  int64_t count = 1;
  for (int64_t e : t.shape) count *= e;
  dense.resize(size_t(count * esize));
  if (count == 0) return;
  // One run: the innermost row where it is contiguous, else one element.
  const bool rows = strides.back() == 1;
  const int64_t run = rows ? t.shape.back() : 1;
  const int outer = rows ? rank - 1 : rank;  // dims walked element by element
  const auto* src = static_cast<const uint8_t*>(t.data);
  std::vector<int64_t> idx(outer, 0);
  for (int64_t i = 0; i < count / run; ++i) {
    int64_t off = 0;
    for (int d = 0; d < outer; ++d) off += idx[d] * strides[d];
    std::memcpy(dense.data() + i * run * esize, src + off * esize, size_t(run * esize));
    for (int d = outer - 1; d >= 0 && ++idx[d] == t.shape[d]; --d) idx[d] = 0;
  }
}

/** A halide_buffer_t over caller memory; dims innermost first. An input that is not
 * C-contiguous is copied first (the kernels read dense inputs: ops input_param). */
struct BufferView {
  halide_buffer_t buf{};
  std::vector<halide_dimension_t> dims;
  std::vector<uint8_t> dense;  ///< the dense copy of a strided input, else empty

  BufferView(const TensorArg& t, const char* name, const std::vector<int64_t>& want_shape,
             DType want_dtype, bool input) {
    user_check(t.data != nullptr, code::kValue, name, "data pointer is null");
    user_check(t.shape == want_shape, code::kValue, name,
               "shape " + shape_str(t.shape) + " does not match the kernel's " + shape_str(want_shape));
    user_check(t.dtype == want_dtype, code::kValue, name,
               std::string("dtype ") + dtype_name(t.dtype) + " does not match the kernel's " +
                   dtype_name(want_dtype));
    const std::vector<int64_t> dense_st = codegen::dense_strides(t.shape);
    std::vector<int64_t> strides = t.strides.empty() ? dense_st : t.strides;
    user_check(strides.size() == t.shape.size(), code::kRank, name, "strides and shape differ in rank");
    const void* host = t.data;
    if (input && strides != dense_st) {
      for (int64_t st : strides)
        user_check(st >= 0, code::kRange, name, "stride " + std::to_string(st) + " is negative");
      log::warn_once(std::string("strided-input-") + name,
                     std::string("input ") + name +
                         " is not C-contiguous: the kernel copies it to dense memory first "
                         "(pass C-contiguous arrays to skip the copy)",
                     log::WarningKind::kPerformance);
      copy_dense(t, strides, dense);
      strides = dense_st;
      host = dense.data();
    }
    user_check(strides.back() == 1, code::kValue, name,
               "the innermost dimension must be contiguous (stride 1), got stride " +
                   std::to_string(strides.back()));
    const int rank = (int)t.shape.size();
    for (int i = rank - 1; i >= 0; --i) {
      user_check(strides[i] >= 0 && strides[i] <= INT32_MAX, code::kRange, name,
                 "stride " + std::to_string(strides[i]) + " is out of range");
      dims.push_back(halide_dimension_t(0, (int32_t)t.shape[i], (int32_t)strides[i]));
    }
    buf.host = static_cast<uint8_t*>(const_cast<void*>(host));
    buf.type = buffer_type(t.dtype);
    buf.dimensions = rank;
    buf.dim = dims.data();
  }

  /** Presents dimension `i` (outermost-first index) as several, `extents` outermost first:
   * dX's (N, D, C1, H*W, 16) output as 6HD, dW's (real_g, Kd*cin1_g*Kh*Kw, cout_g, 16) as 7-D. */
  void split_dim(int i, const std::vector<int64_t>& extents) {
    const int pos = (int)dims.size() - 1 - i;  // dims are innermost first
    const int32_t stride = dims[pos].stride;
    std::vector<halide_dimension_t> parts;
    int64_t s = stride;
    for (int k = (int)extents.size() - 1; k >= 0; --k) {
      parts.push_back(halide_dimension_t(0, (int32_t)extents[k], (int32_t)s));
      s *= extents[k];
    }
    dims.erase(dims.begin() + pos);
    dims.insert(dims.begin() + pos, parts.begin(), parts.end());
    buf.dimensions = (int)dims.size();
    buf.dim = dims.data();
  }
};

void dump_stmt(const Problem& p, lower::Lowered& lowered) {
  if (const std::string dir = knobs::get_string("TBEX_DUMP_DIR"); !dir.empty()) {
    // The lowered loop nest, for reading what a schedule did.
    lowered.pipeline.compile_to_lowered_stmt(dir + "/" + p.canonical() + "." +
                                                 lowered.schedule + ".stmt",
                                             lowered.args, Halide::StmtOutputFormat::Text,
                                             lowered.target);
  }
}

class JitKernel final : public Kernel {
 public:
  /** In memory: a Halide::Callable. `requested`: what compile() was asked for; `threads`: the
   * thread count the schedule was planned for. */
  JitKernel(Problem p, lower::Lowered& lowered, CompileOptions requested, int threads)
      : problem_(std::move(p)), schedule_(lowered.schedule), variant_(lowered.variant),
        requested_(std::move(requested)), threads_(threads) {
    lowered.pipeline.set_jit_externs(codegen::jit_externs());
    callable_ = lowered.pipeline.compile_to_callable(lowered.args, lowered.target);
  }
  /** From the disk cache: a loaded .so; its runtime's handlers are pointed at tbex's. */
  JitKernel(Problem p, const lower::Lowered& lowered, CompileOptions requested, int threads,
            std::shared_ptr<disk::Library> lib)
      : problem_(std::move(p)), schedule_(lowered.schedule), variant_(lowered.variant),
        requested_(std::move(requested)), threads_(threads), lib_(std::move(lib)) {
    lib_->set_do_par_for(reinterpret_cast<void*>(&so_do_par_for));
    lib_->set_error_handler(reinterpret_cast<void*>(&so_on_error));
    lib_->set_malloc(reinterpret_cast<void*>(&so_malloc));
    lib_->set_free(reinterpret_cast<void*>(&so_free));
  }

  const Problem& problem() const override { return problem_; }
  const std::string& schedule_name() const override { return schedule_; }
  const std::string& variant() const override { return variant_; }
  int threads() const override { return threads_; }

  void run(const std::vector<TensorArg>& inputs, const TensorArg& output) const override {
    // Planned for another thread count than the pool has now (set_num_threads after compile):
    // run the kernel planned for this one (compiled on first use, then cached), so a kernel
    // always runs as tiled for the threads it gets (a 2-thread dW split run on 1 thread staged
    // its inputs twice).
    if (const int now = num_threads(); now != threads_) {
      std::shared_ptr<const Kernel> other;
      {
        std::lock_guard<std::mutex> l(replan_mu_);
        auto& k = replanned_[now];
        other = k.lock();
        if (!other) k = other = codegen::jit_compile(problem_, requested_);  // once per count
      }
      other->run(inputs, output);
      return;
    }
    const auto shapes = problem_.input_shapes();
    const auto dtypes = problem_.input_dtypes();
    const auto names = problem_.input_names();
    check_input_count(shapes.size(), inputs.size());
    std::vector<BufferView> views;
    views.reserve(inputs.size() + 1);
    for (size_t i = 0; i < inputs.size(); ++i)
      views.emplace_back(inputs[i], names[i].c_str(), shapes[i], dtypes[i], true);
    views.emplace_back(output, "out", problem_.output_shape(), problem_.res_dtype, false);
    const ConvGeometry& g = problem_.geo;
    // dX and dW outputs as the kernel sees them; the forward's 6HD y needs no reshaping.
    if (problem_.op == OpKind::kBackpropInput)
      views.back().split_dim(3, {g.in[1], g.in[2]});
    else if (problem_.op == OpKind::kBackpropFilter)
      views.back().split_dim(1, {g.kernel[0], problem_.group.cin1_g, g.kernel[1], g.kernel[2]});

    int rc;
    std::string error;
    if (lib_) {
      SoCallContext ctx;
      void* ctx_ptr = &ctx;
      std::vector<void*> argv{&ctx_ptr};
      for (auto& v : views) argv.push_back(&v.buf);
      rc = lib_->argv(argv.data());
      error = ctx.error;
    } else {
      CallContext ctx;
      ctx.handlers.custom_error = on_error;
      ctx.handlers.custom_do_par_for = do_par_for;
      ctx.handlers.custom_malloc = jit_malloc;
      ctx.handlers.custom_free = jit_free;
      Halide::JITUserContext* ctx_ptr = &ctx;
      std::vector<const void*> argv{&ctx_ptr};
      for (auto& v : views) argv.push_back(&v.buf);
      rc = callable_.call_argv_fast(argv.size(), argv.data());
      error = ctx.error;
    }
    internal_check(rc == 0, "kernel " + problem_.canonical() + " failed (" + std::to_string(rc) +
                                "): " + error);
  }

 private:
  Problem problem_;
  std::string schedule_;
  std::string variant_;
  CompileOptions requested_;
  int threads_ = 1;
  mutable std::mutex replan_mu_;
  /** The same request planned for other thread counts, by count (weak: the kernel cache owns
   * them, and two kernels must not keep each other alive). */
  mutable std::map<int, std::weak_ptr<const Kernel>> replanned_;
  Halide::Callable callable_;
  std::shared_ptr<disk::Library> lib_;
};

/** The disk-cache key fields of a lowered kernel. */
disk::Fields key_fields(const Problem& p, const lower::Lowered& l, int threads) {
  disk::Fields f = disk::base_fields();
  f.emplace_back("target", so_target().to_string());
  f.emplace_back("problem", p.canonical());
  f.emplace_back("schedule", l.schedule);
  f.emplace_back("variant", l.variant);
  f.emplace_back("schedule_detail", l.schedule_detail);
  f.emplace_back("threads", std::to_string(threads));
  f.emplace_back("knobs", knobs::codegen_key());
  return f;
}

std::shared_ptr<const Kernel> build_kernel(const Problem& problem, const lower::Decision& d,
                                           int threads, const CompileOptions& requested) {
  lower::Lowered lowered = lower::lower(problem, d, threads, lower::host_target());
  dump_stmt(problem, lowered);
  const std::string what = problem.canonical() + " [" + lowered.schedule + "]";
  disk::Emitters emit;
  emit.kernel = [&](const std::string& fn) {
    return codegen::object_bytes(lowered.pipeline.compile_to_module(
        lowered.args, fn,
        lowered.target.with_feature(Halide::Target::UserContext).with_feature(Halide::Target::NoRuntime)));
  };
  emit.runtime = so_runtime_object;
  emit.runtime_id = so_runtime_id();
  emit.kernels = codegen::kernels_object_bytes;
  auto lib = disk::load_or_build(key_fields(problem, lowered, threads), what, emit);
  if (lib) return std::make_shared<JitKernel>(problem, lowered, requested, threads, std::move(lib));
  return std::make_shared<JitKernel>(problem, lowered, requested, threads);
}

support::LruCache<const Kernel>& kernel_cache() {
  static support::LruCache<const Kernel> cache(
      [] { return knobs::get_int("TBEX_KERNEL_CACHE_CAPACITY"); });
  return cache;
}

}  // namespace

void Kernel::run_dense(const std::vector<const void*>& inputs, void* output) const {
  const Problem& p = problem();
  const auto shapes = p.input_shapes();
  const auto dtypes = p.input_dtypes();
  check_input_count(shapes.size(), inputs.size());
  std::vector<TensorArg> args;
  for (size_t i = 0; i < inputs.size(); ++i) args.push_back(TensorArg{inputs[i], shapes[i], {}, dtypes[i]});
  run(args, TensorArg{output, p.output_shape(), {}, p.res_dtype});
}

namespace codegen {

std::shared_ptr<const Kernel> jit_compile(const Problem& problem, const CompileOptions& request) {
  if (auto k = compile_batched(problem, request)) return k;
  const int threads = num_threads();
  const lower::Decision d = lower::select(problem, request, threads, lower::host_target());
  const std::string key = problem.canonical() + "|" + d.schedule + "|" + d.variant + "|" +
                          std::to_string(threads) + "|" + knobs::codegen_key();
  if (auto k = kernel_cache().find(key)) return k;
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<const Kernel> k;
  try {
    log::SlowNotice notice("compiling " + std::string(op_name(problem.op)) + " " +
                           problem.canonical() + " (" + d.schedule + ") ...");
    k = build_kernel(problem, d, threads, request);
  } catch (const Halide::CompileError& e) {
    throw InternalError(std::string("Halide rejected the pipeline for ") + problem.canonical() +
                        ": " + e.what());
  } catch (const Halide::Error& e) {
    throw InternalError(std::string("Halide failed on ") + problem.canonical() + ": " + e.what());
  }
  if (log::enabled("lower"))
    log::print("lower", "compiled " + problem.canonical() + " with " + k->schedule_name() + " in " +
                            std::to_string(std::chrono::duration<double, std::milli>(
                                               std::chrono::steady_clock::now() - t0)
                                               .count()) +
                            " ms");
  int64_t evicted = 0;
  k = kernel_cache().insert(key, k, &evicted);
  if (evicted && log::enabled("cache"))
    log::print("cache", "in-process kernel cache: evicted " + std::to_string(evicted) +
                            " least recently used kernel(s) (capacity " +
                            std::to_string(kernel_cache().stats().capacity) + ")");
  return k;
}

std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (int i = (int)shape.size() - 2; i >= 0; --i) st[i] = st[i + 1] * shape[i + 1];
  return st;
}

std::string write_prebuilt_runtime(const std::string& dir) {
  const std::string path = dir + "/" + disk::prebuilt_runtime_name(so_runtime_id());
  std::string why = support::make_dirs(dir);
  if (why.empty())
    why = support::write_atomic(path, so_runtime_object());
  user_check(why.empty(), code::kValue, "dir", "cannot write " + path + ": " + why);
  return path;
}

}  // namespace codegen

KernelCacheStats kernel_cache_stats() {
  const support::LruStats s = kernel_cache().stats();
  return KernelCacheStats{s.hits, s.misses, s.evictions, s.size, s.capacity};
}

void clear_kernel_cache() { kernel_cache().clear(); }

}  // namespace tbex
