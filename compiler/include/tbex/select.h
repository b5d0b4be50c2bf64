#pragma once
/** Which schedule and tile variant a problem compiles with: the one decision every path (JIT,
 * AOT, the tuner, rank) takes through tbex::lower::select():
 *   a named schedule (checked: known, applies, variant one of its own), else
 *   the tuning database's entry for (problem, threads, target, tbex version), if still valid, else
 *   the cost model's best ranked schedule and variant (the reference only when nothing else applies).
 * TBEX_LOG=dispatch prints the decision and why. No Halide or LLVM type appears here. */
#include <string>
#include <utility>
#include <vector>

#include "tbex/problem.h"

namespace tbex {

/** What a caller asks for. */
struct CompileOptions {
  /** "auto" (select: tuning database, else cost model) or a name from schedule_names(). */
  std::string schedule = "auto";
  /** A tile variant of the named schedule, one of schedule_candidates() (e.g. "nt=4,kwt=3,ch=8"
   * for dw_tiled, "qt=4,ct=4" for dx_tiled / fwd_tiled); "" = the schedule's own choice. An
   * explicit variant wins over the TBEX_DW_TILE / TBEX_DX_TILE / TBEX_FWD_TILE experiments. */
  std::string variant;
};

/** One candidate of the analytic cost model's ranking. */
struct RankedChoice {
  std::string schedule, variant;  ///< variant "" = the schedule's own choice
  double ms = 0;                  ///< predicted run time (no compilation, no measurement)
  std::string detail;             ///< the estimate's terms (compute, memory level, passes, ...)
};

/** Names of the schedules for an op in registry order (the order ties and explanations use):
 * tbex's own, then Halide's autoschedulers (halide_mullapudi2016, halide_adams2019,
 * halide_li2018: by name only, for comparison; "auto" never picks them), reference last. */
std::vector<std::string> schedule_names(OpKind op);

/** Same without Halide's autoschedulers: the schedules "auto" chooses from, reference last. */
std::vector<std::string> own_schedule_names(OpKind op);

/** The tile variants of schedule `name` worth timing for `problem` at num_threads(), "" (its
 * own choice) first; empty when the schedule has none. UserError if it is unknown or does not
 * apply. */
std::vector<std::string> schedule_candidates(const Problem& problem, const std::string& name);

/** Why each schedule does or does not apply to `problem`, in registry order. */
std::vector<std::pair<std::string, std::string>> explain_schedules(const Problem& problem);

/** Every schedule and tile variant "auto" may pick for `problem` at num_threads() on the host,
 * ranked by the cost model, best first: what "auto" compiles when the tuning database has no
 * entry, and the order the tuner times candidates in. */
std::vector<RankedChoice> rank_schedules(const Problem& problem);

/** The decision select() takes for `request` at num_threads() on the host, without compiling:
 * (schedule, variant, why). */
struct Selection {
  std::string schedule, variant;
  /** "requested", "tuning database" or "cost model". */
  std::string source;
};
Selection select_schedule(const Problem& problem, const CompileOptions& request = {});

/** A tuning database entry (written by tbex::tune, tbex/tune.h; read by select()). */
struct TuningEntry {
  std::string schedule, variant;
  double ms = 0;
  std::string date;  ///< UTC, ISO 8601
  int threads = 0;
  std::string target;
};

/** TBEX_TUNING_DB, else <cache_dir()>/tuning.json. */
std::string tuning_db_path();

}  // namespace tbex
