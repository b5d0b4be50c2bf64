#pragma once
/** The stages from a Problem and a select() decision to a scheduled Halide pipeline:
 * define (ops) -> apply the decided schedule (schedules) -> pipeline. Timed under
 * TBEX_LOG=lower. */
#include <string>
#include <vector>

#include "Halide.h"
#include "lower/select.h"
#include "tbex/problem.h"

namespace tbex::lower {

struct Lowered {
  Halide::Pipeline pipeline;
  std::vector<Halide::Argument> args;  ///< kernel inputs in API order (the output follows them in a call)
  std::string schedule;
  std::string variant;  ///< the tile variant applied ("" = the schedule's own choice)
  std::string schedule_detail;
  /** The target the kernel compiles for: the selection's, without LargeBuffers for a schedule
   * of AMX tiles (Halide 21 recognizes tile operations only in 32-bit index arithmetic; such
   * schedules apply only where every buffer fits it). */
  Halide::Target target;
  bool amx_tiles = false;  ///< the kernel runs AMX tile instructions (tbex/amx.h)
};

/** Applies `d` (from select() with the same threads and target) to p's algorithm. */
Lowered lower(const Problem& p, const Decision& d, int threads, const Halide::Target& target);

}  // namespace tbex::lower
