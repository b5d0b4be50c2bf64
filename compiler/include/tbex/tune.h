#pragma once
/** Measured tuning: time the schedules and tile variants that apply to a problem on this machine
 * and remember the fastest in the tuning database, which compile(problem) with schedule "auto"
 * consults first.
 *
 * The database is one JSON file, TBEX_TUNING_DB, else <cache_dir()>/tuning.json; an entry is
 * keyed by (canonical problem, thread count, target string, tbex version). Knobs: TBEX_TUNE=1
 * (every "auto" compile without an entry tunes first), TBEX_LOG=tune (every timed candidate). */
#include <string>
#include <vector>

#include "tbex/problem.h"
#include "tbex/select.h"  // TuningEntry, tuning_db_path()

namespace tbex {

struct TuneOptions {
  int max_candidates = 8;  ///< tile variants timed per schedule (the best ranked)
  double seconds = 0.25;   ///< timing budget per candidate (at least 3 runs after a warm-up)
  bool store = true;       ///< write the winner to the tuning database
  /** Only these registry entries ("" = every applicable one; reference only for small problems). */
  std::vector<std::string> schedules;
};

struct TuneCandidate {
  std::string schedule, variant;
  double ms = -1;     ///< median run time; -1 when it failed to compile or run
  std::string error;  ///< why it failed
};

struct TuneResult {
  std::string schedule, variant;  ///< the fastest candidate
  double ms = 0;                  ///< its median time
  double default_ms = -1;         ///< the untuned "auto" choice's median time (-1 if not timed)
  std::vector<TuneCandidate> candidates;  ///< every candidate, in timing order
};

/** Compiles (JIT), runs on random data in the TBE layouts and times every candidate: the cost
 * model's ranking (rank_schedules(): each applicable schedule "auto" may pick with its tile
 * variants, best predicted first; reference only for small problems), or the schedules listed
 * in options.schedules with their variants.
 * The fastest is timed again against the first candidate (the untuned choice) and must beat it
 * by 3%, else the untuned choice wins (noise on a shared machine). The threads are
 * num_threads(). UserError if no candidate runs. */
TuneResult tune(const Problem& problem, const TuneOptions& options = {});

/** The entry for `problem` at num_threads() on the host target, if any. A missing or corrupt
 * file holds no entries (a corrupt one is logged under TBEX_LOG=tune and rewritten by the next
 * tune()). */
bool find_tuning(const Problem& problem, TuningEntry& entry);

}  // namespace tbex
