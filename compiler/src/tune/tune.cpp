/** Measured tuning (tbex/tune.h): every applicable schedule and tile variant is compiled, run on
 * random data and timed; the fastest goes to the tuning database. */
#include "tbex/tune.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <ctime>
#include <random>

#include "codegen/jit.h"
#include "lower/select.h"
#include "lower/tuning_db.h"
#include "tbex/errors.h"
#include "tbex/kernel.h"
#include "tbex/log.h"
#include "tbex/thread_pool.h"

namespace tbex {
namespace {

using Clock = std::chrono::steady_clock;

/** Above this many flops the scalar serial reference is not worth timing. */
constexpr double kReferenceMaxFlops = 5e7;

std::string fmt(double ms) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f ms", ms);
  return b;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

/** Random operands of `p` in its TBE layouts (values in [-1, 1]) and its output buffer. */
struct Operands {
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<uint8_t> output;

  explicit Operands(const Problem& p) {
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    const auto shapes = p.input_shapes();
    const auto dtypes = p.input_dtypes();
    for (size_t i = 0; i < shapes.size(); ++i) {
      int64_t n = 1;
      for (int64_t s : shapes[i]) n *= s;
      std::vector<uint8_t> b(n * dtype_size(dtypes[i]));
      for (int64_t k = 0; k < n; ++k) {
        const float v = d(rng);
        if (dtypes[i] == DType::kFloat32) {
          std::memcpy(&b[k * 4], &v, 4);
        } else {
          const uint16_t h = dtypes[i] == DType::kFloat16 ? float_to_half(v) : float_to_bf16(v);
          std::memcpy(&b[k * 2], &h, 2);
        }
      }
      inputs.push_back(std::move(b));
    }
    int64_t n = 1;
    for (int64_t s : p.output_shape()) n *= s;
    output.resize(n * dtype_size(p.res_dtype));
  }
};

/** Median ms of `k` over at least 3 runs after a warm-up, for about `seconds`. A warm-up
 * slower than 3x `best_ms` (the fastest so far) ends the timing: the candidate cannot win. */
double time_kernel(const Kernel& k, Operands& ops, double seconds, double best_ms) {
  std::vector<const void*> in;
  for (const auto& b : ops.inputs) in.push_back(b.data());
  auto run = [&] {
    const auto t0 = Clock::now();
    k.run_dense(in, ops.output.data());
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  const double warm = run();
  if (best_ms > 0 && warm > 3 * best_ms) return warm;
  std::vector<double> ms;
  const auto start = Clock::now();
  while (ms.size() < 3 ||
         (ms.size() < 200 &&
          std::chrono::duration<double>(Clock::now() - start).count() < seconds))
    ms.push_back(run());
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

std::string label(const TuneCandidate& c) {
  return c.schedule + (c.variant.empty() ? " (own choice)" : " [" + c.variant + "]");
}

/** (schedule, variant) pairs to time. Without a schedule list: the cost model's ranking, best
 * first (the first is the untuned auto choice), at most max_candidates per schedule; with one:
 * the listed schedules in registry order, each with its variants. */
std::vector<TuneCandidate> candidate_list(const Problem& p, int threads, const TuneOptions& o) {
  const int max_variants = o.max_candidates;
  std::vector<TuneCandidate> list;
  if (o.schedules.empty()) {
    std::map<std::string, int> per_schedule;
    for (const RankedChoice& r : lower::rank(p, threads, lower::host_target())) {
      if (r.schedule == "reference" && p.geo.flops() > kReferenceMaxFlops) continue;
      if (++per_schedule[r.schedule] > std::max(1, max_variants)) continue;
      list.push_back(TuneCandidate{r.schedule, r.variant, -1, ""});
    }
    return list;
  }
  for (const auto& [name, why] : lower::explain(p)) {
    if (!why.empty() ||
        std::find(o.schedules.begin(), o.schedules.end(), name) == o.schedules.end())
      continue;
    std::vector<std::string> vars = lower::candidates(p, name, threads, lower::host_target());
    if (vars.empty()) vars = {""};
    vars.resize(std::min<size_t>(vars.size(), std::max(1, max_variants)));
    for (const auto& v : vars) list.push_back(TuneCandidate{name, v, -1, ""});
  }
  return list;
}

/** On a shared machine one pass of timings is noisy: the winner and the first candidate (the
 * untuned choice) are timed again, alternately, and the winner must stay at least
 * kMinGain faster than the untuned choice, else that one is kept. */
constexpr double kMinGain = 0.03;

void confirm_winner(const Problem& p, Operands& ops, const TuneOptions& o, TuneResult& r) {
  const TuneCandidate& first = r.candidates[0];
  if (first.ms < 0 || (r.schedule == first.schedule && r.variant == first.variant)) return;
  auto win = codegen::jit_compile(p, CompileOptions{r.schedule, r.variant});
  auto base = codegen::jit_compile(p, CompileOptions{first.schedule, first.variant});
  double win_ms = r.ms, base_ms = first.ms;
  for (int round = 0; round < 2; ++round) {
    base_ms = std::min(base_ms, time_kernel(*base, ops, o.seconds, -1));
    win_ms = std::min(win_ms, time_kernel(*win, ops, o.seconds, -1));
  }
  const bool keep = win_ms < (1 - kMinGain) * base_ms;
  if (log::enabled("tune"))
    log::print("tune", "  again: " + label(TuneCandidate{r.schedule, r.variant, win_ms, ""}) + " " +
                           fmt(win_ms) + " vs " + label(first) + " " + fmt(base_ms) +
                           (keep ? "" : ": not " + std::to_string((int)(kMinGain * 100)) +
                                            "% faster, the untuned choice stays"));
  if (r.default_ms >= 0) r.default_ms = base_ms;
  if (keep) {
    r.ms = win_ms;
  } else {
    r.schedule = first.schedule, r.variant = first.variant, r.ms = base_ms;
  }
}

}  // namespace

TuneResult tune(const Problem& problem, const TuneOptions& options) {
  validate(problem);
  const int threads = num_threads();
  const bool log_tune = log::enabled("tune");
  if (log_tune)
    log::print("tune", "tuning " + problem.canonical() + " at " + std::to_string(threads) +
                           " threads");
  Operands ops(problem);
  TuneResult result;
  result.candidates = candidate_list(problem, threads, options);
  double best = -1;
  const bool progress = log::progress_enabled();
  for (size_t i = 0; i < result.candidates.size(); ++i) {
    TuneCandidate& c = result.candidates[i];
    if (progress)
      std::fprintf(stderr, "tbex: tuning %s: candidate %zu of %zu: %s\n", problem.canonical().c_str(),
                   i + 1, result.candidates.size(), label(c).c_str());
    try {
      auto k = codegen::jit_compile(problem, CompileOptions{c.schedule, c.variant});
      c.ms = time_kernel(*k, ops, options.seconds, best);
    } catch (const std::exception& e) {
      c.error = e.what();
    }
    if (log_tune)
      log::print("tune", "  " + label(c) + ": " + (c.ms >= 0 ? fmt(c.ms) : "failed: " + c.error));
    if (c.ms >= 0 && (best < 0 || c.ms < best)) {
      best = c.ms;
      result.schedule = c.schedule, result.variant = c.variant, result.ms = c.ms;
    }
    if (i == 0 && options.schedules.empty()) result.default_ms = c.ms;
  }
  user_check(best >= 0, code::kValue, "problem", "no candidate schedule ran for " + problem.canonical());
  confirm_winner(problem, ops, options, result);
  if (log_tune)
    log::print("tune", "  fastest: " + result.schedule +
                           (result.variant.empty() ? "" : " [" + result.variant + "]") + " " +
                           fmt(result.ms) + " (untuned " + fmt(result.default_ms) + ")");
  if (options.store) {
    const tuning::Key key = tuning::key_of(problem, threads, lower::host_target().to_string());
    const TuningEntry entry{result.schedule, result.variant, result.ms, utc_now(), threads, key.target};
    const std::string path = tuning_db_path();
    const std::string err = tuning::store(path, key, entry, result.default_ms);
    if (log_tune)
      log::print("tune", err.empty() ? "  stored in " + path : "  not stored: " + err);
    if (!err.empty())
      log::warn_once("tuning-db", "the tuning result for " + problem.canonical() + " cannot be stored (" +
                                      err + "): later processes will not use it. Set TBEX_TUNING_DB or "
                                      "TBEX_CACHE_DIR to a writable location.");
  }
  return result;
}

bool find_tuning(const Problem& problem, TuningEntry& entry) {
  return tuning::lookup(tuning_db_path(), tuning::key_of(problem, num_threads(), lower::host_target().to_string()), entry);
}

}  // namespace tbex
