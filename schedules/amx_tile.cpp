#include "schedules/amx_tile.h"

#include <algorithm>

#include "schedules/tiling.h"

namespace tbex::sched {

using namespace Halide;

std::string amx_offsets_why_not(double bytes) {
  if (bytes < 2147483648.0) return "";
  return "a buffer of " + std::to_string(int64_t(bytes)) +
         " bytes: Halide lowers AMX tiles with 32-bit offsets only (2 GiB)";
}

std::string amx_dx_pairs_why_not(const Problem& p) {
  if (p.in_dtype != DType::kBFloat16) return "bf16 inputs only (AMX-BF16 tiles multiply bf16)";
  if (!ops::bf16_pairs(p))
    return "cout_g " + std::to_string(p.group.cout_g) + " is odd: tile rows hold channel pairs";
  return "";
}

std::string amx_dw_why_not(const Problem& p) {
  if (p.in_dtype != DType::kBFloat16) return "bf16 inputs only (AMX-BF16 tiles multiply bf16)";
  if (p.group.cout_g % 16 != 0)
    return "cout_g " + std::to_string(p.group.cout_g) + " is not a multiple of 16 (whole tiles)";
  if (const std::string why = dw_accumulator_why_not(p); !why.empty()) return why;
  // Halide 21 lowers no tile multiply of so few positions (Wo = 2 was rejected), and such
  // rows would leave the unit mostly idle.
  if (ops::dw_k_step(p) < 6)
    return "rows of " + std::to_string(p.geo.out[2]) +
           " output positions: a tile multiply would take fewer than 6";
  return amx_offsets_why_not(2 * std::max(padded_x_elems(p), dy_elems(p)));
}

void price_one_accumulator(LoopNest& n, const Machine& m, bool drains) {
  n.tile.unit_cycles = 2 * kBlockMultiplyCost * m.tile_multiply_cycles;
  n.visit_cycles = drains ? kBlockDrainCost / 4 * m.tile_multiply_cycles : 0;
}

RegisterTile amx_step(int a_rows, int kk, const Machine& m) {
  RegisterTile t;
  t.fmas = 0;
  t.loads = a_rows + kk / 2.0;
  t.accumulators = 1, t.operands = 0;
  t.unit_cycles = m.tile_multiply_cycles;  // one accumulator: the chain's latency
  return t;
}

double amx_lane_use(const Problem& p, const LoopNest& n, int rows, int kk) {
  const double executed = n.visits * n.steps_per_visit * 16.0 * rows * kk;
  return std::min(1.0, p.geo.flops() / 2 / executed);
}

void amx_tile(Func acc, Func owner, const VarOrRVar& at, const Var& j, const Var& i, const RVar& k,
              int kk, const std::vector<VarOrRVar>& outer) {
  Func back = acc.in();
  back.compute_at(LoopLevel(owner, at)).bound_extent(i, 16).align_storage(j, 32).vectorize(j).vectorize(i);
  acc.compute_at(LoopLevel(owner, at)).bound_extent(i, 16).store_in(MemoryType::AMXTile).vectorize(j).vectorize(i);
  RVar ko("ko"), ki("ki");
  std::vector<VarOrRVar> order{ki, j, i, ko};
  order.insert(order.end(), outer.begin(), outer.end());
  acc.update().split(k, ko, ki, kk).reorder(order).atomic().vectorize(ki).vectorize(j).vectorize(i);
}

void stage_tile_weights(Func w) {
  const std::vector<Var> args = w.args();  // (e, lane, row)
  Var ro("ro"), ri("ri");
  w.compute_root()
      .split(args[2], ro, ri, 64, TailStrategy::GuardWithIf)
      .vectorize(args[1])
      .vectorize(args[0])
      .parallel(ro);
}

}  // namespace tbex::sched
