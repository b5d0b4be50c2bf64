/** tbex::compile(): the public JIT entry. The decision itself is select()'s (lower/select); this
 * layer only adds TBEX_TUNE=1, which tunes an "auto" request that has no tuning database entry
 * before selecting, so the tuned entry is what select() then finds. */
#include <map>
#include <mutex>

#include "codegen/jit.h"
#include "tbex/errors.h"
#include "tbex/knobs.h"
#include "tbex/log.h"
#include "tbex/tune.h"

namespace tbex {
namespace {

/** With TBEX_TUNE=1: the request to compile for an "auto" request without a database entry,
 * tuned once per (problem, threads) in a process even when the database cannot be written. */
CompileOptions tuned_request(const Problem& problem, const CompileOptions& request) {
  if (request.schedule != "auto" || !request.variant.empty() || !knobs::get_bool("TBEX_TUNE"))
    return request;
  TuningEntry e;
  if (find_tuning(problem, e)) return request;  // select() reads the entry
  static std::mutex mu;
  static std::map<std::string, CompileOptions> tuned;
  std::lock_guard<std::mutex> l(mu);
  const std::string key = problem.canonical() + "|" + std::to_string(num_threads());
  if (auto it = tuned.find(key); it != tuned.end()) return it->second;
  if (log::enabled("dispatch"))
    log::print("dispatch", problem.canonical() + ": no tuning database entry, tuning (TBEX_TUNE=1)");
  const TuneResult r = tune(problem);
  return tuned[key] = CompileOptions{r.schedule, r.variant};
}

}  // namespace

std::shared_ptr<const Kernel> compile(const Problem& problem, const CompileOptions& options) {
  validate(problem);
  return codegen::jit_compile(problem, tuned_request(problem, options));
}

}  // namespace tbex
