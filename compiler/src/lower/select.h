#pragma once
/** select(): the one place that decides which schedule and tile variant a problem compiles with
 * (tbex/select.h says the order). JIT, AOT, the tuner and rank all call it. */
#include <string>
#include <utility>
#include <vector>

#include "Halide.h"
#include "tbex/problem.h"
#include "tbex/select.h"

namespace tbex::lower {

/** The host CPU with what every tbex kernel needs (large buffers). */
Halide::Target host_target();

/** A request checked and resolved (schedule, variant, source): what lower() applies. */
using Decision = Selection;

/** Decides for `request` at `threads` worker threads on `target` (vector widths, tuning key).
 * UserError for an unknown schedule, one that does not apply, a variant the schedule does not
 * have, or a variant with "auto". Logged under TBEX_LOG=dispatch. */
Decision select(const Problem& p, const CompileOptions& request, int threads,
                const Halide::Target& target);

/** The tile variants of schedule `name` worth timing for `p` ("" first), empty when it has none;
 * UserError if `name` is unknown or does not apply. */
std::vector<std::string> candidates(const Problem& p, const std::string& name, int threads,
                                    const Halide::Target& target);

/** The schedules "auto" may pick for `p` with each tile variant, ranked by the cost model, best
 * first; the reference last. */
std::vector<RankedChoice> rank(const Problem& p, int threads, const Halide::Target& target);

/** (name, "" or why it does not apply), in registry order. */
std::vector<std::pair<std::string, std::string>> explain(const Problem& p);

}  // namespace tbex::lower
