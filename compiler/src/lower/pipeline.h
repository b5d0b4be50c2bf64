#pragma once
/** The one ordered stage list from a Problem to a scheduled Halide pipeline:
 * define (ops) -> choose schedule (registry) -> apply schedule -> pipeline. Each stage is timed
 * and logged under TBEX_LOG=lower; the choice and the reasons under TBEX_LOG=dispatch. */
#include <string>
#include <vector>

#include "Halide.h"
#include "tbex/kernel.h"
#include "tbex/problem.h"

namespace tbex::lower {

struct Lowered {
  Halide::Pipeline pipeline;
  std::vector<Halide::Argument> args;  ///< kernel inputs in API order (the output follows them in a call)
  std::string schedule;
  std::string variant;  ///< the tile variant applied ("" = the schedule's own choice)
  std::string schedule_detail;
};

Halide::Target host_target();

/** schedule: "auto" or a registry name; threads: the thread count schedules plan for; target:
 * what schedules plan vector widths for (AOT kernels may target another CPU than the host);
 * variant: a tile variant of the named schedule (one of its candidates(), or "" for its own). */
Lowered lower(const Problem& p, const std::string& schedule, int threads,
              const Halide::Target& target = host_target(), const std::string& variant = "");

/** The tile variants of schedule `name` worth timing for `p` ("" first), empty when it has none;
 * UserError if `name` is unknown or does not apply. */
std::vector<std::string> candidates(const Problem& p, const std::string& name, int threads,
                                    const Halide::Target& target = host_target());

/** The schedules "auto" may pick for `p` with each tile variant, ranked by the cost model, best
 * first (what "auto" applies, unless the tuning database says otherwise). */
std::vector<RankedChoice> rank(const Problem& p, int threads,
                               const Halide::Target& target = host_target());

/** (name, "" or why it does not apply), in registry order. */
std::vector<std::pair<std::string, std::string>> explain(const Problem& p);

}  // namespace tbex::lower
