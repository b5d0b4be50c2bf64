/** dw_amx_blocked: bf16 dW on AMX-BF16 tiles in 2 x 2 blocks (two x tiles: two taps or input
 * blocks, times two dy tiles: two blocks of 16 output channels; four accumulator tiles held in
 * their registers over a chunk of output rows). Halide 21 lowers one accumulator per
 * allocation, so the blocked loop is tbex's own inner kernel (tbex_amx_dw, runtime/src/amx_dw.cpp),
 * a Halide extern stage called once per thread's share of the output's blocks; Halide stages
 * its operands as dw_amx stages them (x transposed once for all, dy as position pairs) and
 * writes the FRACTAL_Z_3D output (the group mask, c0 innermost) from the extern's fp32 sums.
 *
 * dw_amx's one accumulator loads both 1 KB operands per multiply and reads its tile back per
 * chunk of ~512 positions; c2 dW bf16 on Emerald Rapids ran 15-18 ms there against oneDNN's
 * 12 (bench/RESULTS.md). */
#include <algorithm>
#include <sstream>

#include "schedules/amx_tile.h"
#include "schedules/loops.h"
#include "schedules/tiling.h"
#include "tbex/amx_dw.h"

namespace tbex::sched {
namespace {

using namespace Halide;

/** How the extern's calls share the output between threads: one call per value of the block
 * dims `dims` (of ext's args: 6 real group, 5 kd, 4 input block; outermost first), `calls` of
 * them. Any cut gives the same sums (a tile's sum runs over the rows in order in every call).
 * With threads, about 4 calls each, taken as they come: a host whose cores run unevenly (this
 * one's AMX units are shared with other tenants) balances them; one call per thread ran 1.3-2x
 * slower than one thread (c2, b, c1 dW bf16 on Emerald Rapids with AMX: the slow core's call set
 * the time; 12 calls of c2 then ran 7.4-9 ms a run at 2 threads against 15-17 for 2 calls). */
struct Cut {
  std::vector<int> dims;
  int64_t calls = 1;
};

Cut cut_of(const Problem& p, int threads) {
  Cut c;
  if (threads < 2) return c;
  const std::pair<int, int64_t> dims[] = {{6, p.group.real_g}, {5, p.geo.kernel[0]}, {4, p.group.cin1_g}};
  for (const auto& [dim, extent] : dims) {
    if (c.calls >= 4 * threads) break;
    if (extent > 1) c.dims.push_back(dim), c.calls *= extent;
  }
  return c;
}

/** The (tap, input block) entries one call pairs. */
int64_t entries_per_call(const Problem& p, const Cut& c) {
  const ConvGeometry& g = p.geo;
  return g.kernel[2] * g.kernel[1] * p.group.cin1_g * g.kernel[0] * p.group.real_g / c.calls;
}

class DwAmxBlocked final : public AmxTileSchedule<ops::DwAlgorithm> {
 public:
  std::string name() const override { return "dw_amx_blocked"; }
  std::string why_not(const Problem& p) const override { return amx_dw_why_not(p); }
  std::string describe(const Problem& p, const Context& ctx) const override {
    const Cut c = cut_of(p, ctx.threads);
    static const char* kDims[] = {"n", "c0", "kw", "kh", "c1g", "kd", "g"};
    std::string along;
    for (int d : c.dims) along += std::string(along.empty() ? "" : " x ") + kDims[d];
    std::ostringstream s;
    s << "AMX-BF16 2 x 2 blocks of 16c0 x 16n tiles (tbex_amx_dw), " << ops::dw_k_step(p)
      << " positions per tile multiply, "
      << (c.dims.empty() ? std::string("one call") : std::to_string(c.calls) + " calls along " + along)
      << " over " << ctx.threads << " threads, x staged transposed once, dy as position pairs";
    return s.str();
  }
  void apply(ops::DwAlgorithm& a, const Problem& p, const Context& ctx) const override;
  Estimate estimate(const Problem& p, const Context& ctx) const override;
};

Estimate DwAmxBlocked::estimate(const Problem& p, const Context& ctx) const {
  const ConvGeometry& g = p.geo;
  const GroupDict& gd = p.group;
  const int kk = ops::dw_k_step(p);
  const int we = ops::dw_padded_row(p);
  const Cut c = cut_of(p, ctx.threads);
  const int64_t entries = entries_per_call(p, c), blocks = gd.cout_g / 16;
  const int64_t entry_pairs = ceil_div(entries, 2), block_pairs = ceil_div(blocks, 2);
  const double rows = double(g.n) * g.out[0] * g.out[1];
  const double chunk_rows = std::min(rows, double(amx_dw_chunk_rows(we)));
  const Machine m = Machine::of(ctx.target);
  LoopNest n;
  n.threads = ctx.threads;
  // A step: kk positions of one row, up to 4 tile multiplies on two x and two dy tiles (fewer
  // for an odd entry or output block).
  n.tile.fmas = 0;
  n.tile.loads = 2 * 16 + 2 * (kk / 2.0);
  n.tile.accumulators = 4, n.tile.operands = 0;
  // The operand tiles' loads bound a step (one load per multiply in a 2 x 2 block, the rate
  // kBlockMultiplyCost prices; three per two multiplies with one output block, as e1's groups
  // of 16 channels have).
  const double loads = double(entries) / entry_pairs + double(blocks) / block_pairs;
  n.tile.unit_cycles = loads * kBlockMultiplyCost * m.tile_multiply_cycles;
  n.steps_per_visit = chunk_rows * we / kk;
  n.visits = double(entry_pairs * block_pairs) * c.calls * std::ceil(rows / chunk_rows);
  n.visit_cycles = kBlockDrainCost * m.tile_multiply_cycles;
  // A chunk: its x rows (every tap along h and d, every input block), its dy rows.
  const double x_rows = (chunk_rows * g.stride[1] + (g.kernel[1] - 1) * g.dilation[1]) * g.kernel[0];
  n.visit_footprint = int64_t(chunk_rows * we * 2 * 32 * 2);
  n.chunk_footprint = int64_t(x_rows * padded_w(p) * 32 * gd.cin1_g + chunk_rows * we * 2 * gd.cout_g) * gd.real_g;
  n.units = c.calls;
  // Passes: x transposed and dy as pairs (inputs read, bf16 written), the extern's sums written
  // and read by out, out written.
  const double x_elems = padded_x_elems(p);
  n.pass_bytes = (x_elems + dy_elems(p)) * (input_bytes(p) + 2) + dw_out_elems(p) * 12;
  n.pass_ops = root_stage_ops(p, x_elems, dy_elems(p), m);
  // Every call after the first streams the staged x and dy rows again, from L3, but beside
  // the multiplies: c2 at 2 threads, 12 calls of 0.67-0.75 ms against one call's 7.6 ms for
  // all (10% more), so it is not priced apart.
  const double executed = double(entries) * c.calls * blocks * 256 * rows * we;
  n.lane_use = std::min(1.0, g.flops() / 2 / executed);
  return evaluate(n, m);
}

void DwAmxBlocked::apply(ops::DwAlgorithm& a, const Problem& p, const Context& ctx) const {
  a.use_blocks();
  // The stages' regions are what the extern's bounds query asks for, unknown to Halide when it
  // compiles: their vectorized and unrolled dims are bound to what the query always answers.
  Var db("db"), ro("ro"), ri("ri");
  a.xT.bound(a.c0, 0, 16).compute_root().fuse(a.d, a.b, db).parallel(db);
  schedule_tile_x(a, p);
  Var row = a.row;
  a.dyV.bound(a.e, 0, 2)
      .bound(a.n, 0, (int)p.group.cout_g)
      .compute_root()
      .split(row, ro, ri, 64, TailStrategy::GuardWithIf)
      .vectorize(a.e)
      .vectorize(a.n, 16)
      .parallel(ro);
  // Whole tiles of lanes even where out reads fewer (a block of < 16 valid input channels).
  a.ext.bound(a.c0, 0, 16).compute_root();
  const Cut c = cut_of(p, ctx.threads);
  if (!c.dims.empty()) {
    // The call loops outermost, fused into one parallel loop: Halide calls an extern once per
    // iteration of its real loops, for the box of the dims inside them (which must all be inside).
    std::vector<VarOrRVar> order;
    for (int i = 0; i < (int)a.ext.args().size(); ++i)
      if (std::find(c.dims.begin(), c.dims.end(), i) == c.dims.end()) order.push_back(a.ext.args()[i]);
    for (auto d = c.dims.rbegin(); d != c.dims.rend(); ++d) order.push_back(a.ext.args()[*d]);
    a.ext.reorder(order);
    Var call = a.ext.args()[c.dims[0]];
    for (size_t i = 1; i < c.dims.size(); ++i) {
      Var fused("call" + std::to_string(i));
      a.ext.fuse(a.ext.args()[c.dims[i]], call, fused);
      call = fused;
    }
    a.ext.parallel(call);
  }
  stage_root(a.out, a.c0, 0, {a.kd, a.g}, {"kdg"});
}

}  // namespace

const DwSchedule* dw_amx_blocked_schedule() { return the<DwAmxBlocked>(); }

}  // namespace tbex::sched
