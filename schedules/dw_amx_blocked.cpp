/** dw_amx_blocked: bf16 dW on AMX-BF16 tiles in 2 x 2 blocks (two dy tiles: two blocks of 16
 * output channels, times two x tiles: two taps or input blocks; four accumulator tiles held in
 * their registers over a chunk of output rows). Halide 21 lowers one accumulator per
 * allocation, so the blocked loop is tbex's own inner kernel (tbex_amx_dw, runtime/src/amx_dw.cpp),
 * a Halide extern stage called per share of the output's blocks, which reads x and dy in place
 * and stages each chunk's tiles itself; Halide writes the FRACTAL_Z_3D output (the group mask)
 * from the extern's fp32 sums.
 *
 * dw_amx's one accumulator loads both 1 KB operands per multiply and reads its tile back per
 * chunk of ~512 positions; c2 dW bf16 on Emerald Rapids ran 15-18 ms there against oneDNN's
 * 12 (bench/RESULTS.md). */
#include <algorithm>
#include <sstream>

#include "schedules/amx_tile.h"
#include "schedules/loops.h"
#include "schedules/tile_space.h"
#include "schedules/tiling.h"
#include "tbex/amx_dw.h"

namespace tbex::sched {
namespace {

using namespace Halide;

/** The reduction's parts (a tile variant, "parts"): dw_parts' split of the batch or depth, each
 * part summed on its own by the extern and the parts added in order (ops use_blocks). A fixed
 * count from the problem, whatever the threads: the result depends on it, not on them. The
 * parts give calls that stage only their own rows (cut_of), so threads no longer restage one
 * another's operands: Emerald Rapids with AMX, 2 threads, 4 parts against 1 (paired runs): c1
 * dW bf16 14.0 -> 8.3 ms, g 0.68x, f 0.70x, d 0.76x, c2 0.78x, b 0.87x, the seed 0.88x, at 1
 * thread within 1.5%. Real groups give such calls already: e1's 4 ran 1.08x slower split in 4
 * (the partial sums, 4x the output, read back), 1.03x at 1 thread, so they are not split. */
const TileSpace& space() {
  static const TileSpace s("dw_amx_blocked", {"parts"});
  return s;
}

ops::ReductionParts parts_of(const Problem& p, const Context& ctx) {
  int parts = p.group.real_g >= kDwSplitParts ? 1 : dw_parts(p, kDwSplitParts);
  const VariantFields f = space().resolve(ctx.variant, {});
  if (f.count("parts")) parts = dw_parts_of_variant(p, space(), ctx.variant, f.at("parts"));
  return dw_reduction_parts(p, parts);
}

/** How the extern's calls share the work between threads: one call per value of the dims
 * `dims` (of ext's args: 7 part of the reduction, 6 real group, 1 pairs of output blocks, 5 kd,
 * 4 input block; outermost first), `calls` of them. Any cut gives the same sums (a tile's sum
 * runs over a part's rows in order in every call). Each call stages its own operands: a part or
 * a real group stages only its own share, but a cut along the output blocks stages x again (the
 * cheap, paired operand), one along kd or the input blocks dy again (the transposed one). So the
 * cut goes along the parts and groups first, up to about 4 calls a thread taken as they come (a
 * host whose cores run unevenly balances them: this one's AMX unit is shared between its two
 * vCPUs), then along output blocks, kd and input blocks only until each thread has 2: on
 * Emerald Rapids with AMX, 2 threads ran 1.3-2x slower than 1 with one such call a thread (the
 * slow core's call set the time), and no faster than 1 with 6-12 (c1 dW 19.4 ms against 16.3,
 * every call restaging dy). */
struct Cut {
  struct Part {
    int dim;        // of ext's args
    int64_t parts;  // calls along it, each a run of extent / parts (whole pairs of n's blocks)
  };
  std::vector<Part> dims;  // outermost first
  int64_t calls = 1;
  /** Of dim (its extent `extent`: parts, groups, blocks of 16 channels, taps or input blocks),
   * what one call takes. */
  int64_t per_call(int dim, int64_t extent) const {
    for (const Part& d : dims)
      if (d.dim == dim) return extent / d.parts;
    return extent;
  }
  /** Calls along dim (1 where the cut leaves it whole). */
  int64_t along(int dim) const {
    for (const Part& d : dims)
      if (d.dim == dim) return d.parts;
    return 1;
  }
};

/** Output blocks a call takes at least when the cut goes along them: a pair (the 2 x 2 blocking). */
constexpr int kCallBlocks = 2;

/** How many calls ext's arg `dim` can be cut into: the reduction's parts, its real groups, pairs
 * of output blocks (1 where the blocks do not pair up), taps along d, input blocks. */
int64_t cut_extent(const Problem& p, const ops::ReductionParts& parts, int dim) {
  const int64_t blocks = p.group.cout_g / 16;
  switch (dim) {
    case 7: return parts.count;
    case 6: return p.group.real_g;
    case 1: return blocks % kCallBlocks == 0 ? blocks / kCallBlocks : 1;
    case 5: return p.geo.kernel[0];
    default: return p.group.cin1_g;
  }
}

Cut cut_of(const Problem& p, const ops::ReductionParts& parts, int threads) {
  Cut c;
  if (threads < 2) return c;
  for (int dim : {7, 6, 1, 5, 4}) {
    const int64_t target = (dim >= 6 ? 4 : 2) * threads;  // calls that restage: fewer
    const int64_t extent = cut_extent(p, parts, dim);
    if (c.calls >= target || extent < 2) continue;
    // The fewest parts (a divisor: every call the same share) that reach the target.
    int64_t n = extent;
    for (int64_t k = 2; k < extent; ++k)
      if (extent % k == 0 && c.calls * k >= target) {
        n = k;
        break;
      }
    c.dims.push_back({dim, n});
    c.calls *= n;
  }
  return c;
}

class DwAmxBlocked final : public AmxTileSchedule<ops::DwAlgorithm> {
 public:
  std::string name() const override { return "dw_amx_blocked"; }
  std::string why_not(const Problem& p) const override { return amx_dw_why_not(p); }
  std::string describe(const Problem& p, const Context& ctx) const override {
    const ops::ReductionParts parts = parts_of(p, ctx);
    const Cut c = cut_of(p, parts, ctx.threads);
    static const char* kDims[] = {"c0", "n", "kw", "kh", "c1g", "kd", "g", "part"};
    std::string along;
    for (const Cut::Part& d : c.dims)
      along += std::string(along.empty() ? "" : " x ") + kDims[d.dim] + " " + std::to_string(d.parts);
    std::ostringstream s;
    s << "[" << space().key({{"parts", parts.count}}) << "] AMX-BF16 2 x 2 blocks of 16n x 16c0 tiles (tbex_amx_dw), "
      << ops::dw_k_step(p) << " positions per tile multiply, "
      << (parts.count > 1 ? "reduction split in " + std::to_string(parts.count) + " parts (" +
                                (parts.by_batch ? "batch" : "depth") + "), "
                          : std::string())
      << (c.dims.empty() ? std::string("one call") : std::to_string(c.calls) + " calls (" + along + ")")
      << " over " << ctx.threads << " threads, each chunk's dy staged transposed and x as position pairs";
    return s.str();
  }
  void apply(ops::DwAlgorithm& a, const Problem& p, const Context& ctx) const override;
  Estimate estimate(const Problem& p, const Context& ctx) const override;
  std::vector<std::string> candidates(const Problem& p, const Context& ctx) const override {
    Context own = ctx;
    own.variant = "";
    std::vector<std::string> keys{space().key({{"parts", parts_of(p, own).count}})};
    for (int want : {1, 2, 4, 8}) keys.push_back(space().key({{"parts", dw_parts(p, want)}}));
    return TileSpace::candidates(keys, 8);
  }
};

/** Cycles an element of the kernel's staging costs (AVX-512, per core): x paired (a lane insert
 * and a word shuffle per 32 values), dy transposed (four rounds of two-source word shuffles and
 * a lane insert per 32 values of 512). */
constexpr double kPairCycles = 2.5 / 32, kTransposeCycles = 5.0 / 32;

Estimate DwAmxBlocked::estimate(const Problem& p, const Context& ctx) const {
  const ConvGeometry& g = p.geo;
  const GroupDict& gd = p.group;
  const int kk = ops::dw_k_step(p);
  const int we = ops::dw_padded_row(p);
  const ops::ReductionParts parts = parts_of(p, ctx);
  const Cut c = cut_of(p, parts, ctx.threads);
  // Calls along what the parts do not cut (each stages the chunks of its parts).
  const int64_t others = c.calls / c.along(7);
  const int64_t groups = c.per_call(6, gd.real_g), kd = c.per_call(5, g.kernel[0]),
                c1 = c.per_call(4, gd.cin1_g);
  const int64_t entries = g.kernel[2] * g.kernel[1] * c1 * kd * groups;
  const int64_t blocks = c.per_call(1, gd.cout_g / 16);
  const int64_t entry_pairs = ceil_div(entries, 2), block_pairs = ceil_div(blocks, 2);
  const int Ho = (int)g.out[1];
  const int64_t planes = g.n * g.out[0];
  const double rows = double(planes) * Ho;
  const int64_t part_planes = parts.by_batch ? std::min<int64_t>(g.n, parts.per) * g.out[0]
                                             : g.n * std::min<int64_t>(g.out[0], parts.per);
  const double chunks = double(amx_dw_chunks(we, Ho, part_planes)) * parts.count;  // all parts'
  const double chunk_rows = rows / chunks;
  const Machine m = Machine::of(ctx.target);
  LoopNest n;
  n.threads = ctx.threads;
  // A step: kk positions of one row, up to 4 tile multiplies on two dy and two x tiles (fewer
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
  n.visits = double(entry_pairs * block_pairs) * others * chunks;
  n.visit_cycles = kBlockDrainCost * m.tile_multiply_cycles;
  // A chunk's staged operands (a call's): x rows of every tap along h and d, every input block
  // and phase along w, as position pairs; dy rows transposed.
  const double chunk_planes = std::max(1.0, chunk_rows / Ho);
  const double pair_rows = we / 2 + double(g.kernel[2] - 1) * g.dilation[2] / g.stride[2];
  const double phases = std::min<double>(g.stride[2], g.kernel[2]);
  const double x_staged = chunk_planes * double(groups * kd) * x_rows_of(p, int64_t(std::min<double>(chunk_rows, Ho))) *
                          double(c1) * phases * pair_rows * 32;
  const double dy_staged = chunk_rows * double(groups * blocks) * 16 * (we / kk) * 32;  // a step a line
  n.visit_footprint = int64_t(chunk_rows * we * 2 * 32 * 2);
  n.chunk_footprint = int64_t((x_staged + dy_staged) * 2);
  n.units = c.calls;
  // Passes: the staging inside the calls (every call stages its chunks' operands, reading x and
  // dy where they lie: the seed's x, 21 MB read once per tap along d, bound its staging), out
  // read from the extern's sums (each part's) and written.
  const double times = chunks * others;  // chunks staged in all
  n.pass_bytes = (x_staged + dy_staged) * times * input_bytes(p) + dw_out_elems(p) * (8 + 4 * parts.count);
  n.pass_ops = (x_staged * kPairCycles + dy_staged * kTransposeCycles) * times * m.issue;
  const double executed = double(entries) * others * blocks * 256 * rows * we;
  n.lane_use = std::min(1.0, g.flops() / 2 / executed);
  return evaluate(n, m);
}

void DwAmxBlocked::apply(ops::DwAlgorithm& a, const Problem& p, const Context& ctx) const {
  const ops::ReductionParts parts = parts_of(p, ctx);
  a.use_blocks(parts);
  // Whole tiles of lanes even where out reads fewer (a block of < 16 valid input channels).
  a.ext.bound(a.c0, 0, 16).compute_root();
  const Cut c = cut_of(p, parts, ctx.threads);
  if (!c.dims.empty()) {
    // The call loops outermost, fused into one parallel loop: Halide calls an extern once per
    // iteration of its real loops, for the box of the dims inside them (which must all be inside).
    // A dim cut into fewer calls than its extent is split: its outer var is the call loop.
    std::vector<Var> args = a.ext.args();
    std::vector<Var> calls;
    std::vector<bool> inner_dim(args.size(), true);
    for (const Cut::Part& d : c.dims) {
      if (d.dim != 1 && d.parts == cut_extent(p, parts, d.dim)) {
        calls.push_back(args[d.dim]);
        inner_dim[d.dim] = false;
        continue;
      }
      // n in runs of whole pairs of blocks, the others in runs of taps or blocks.
      const int64_t run = (d.dim == 1 ? p.group.cout_g : cut_extent(p, parts, d.dim)) / d.parts;
      Var outer(args[d.dim].name() + "_call"), inner(args[d.dim].name() + "_in");
      a.ext.split(args[d.dim], outer, inner, (int)run, TailStrategy::RoundUp);
      args[d.dim] = inner;
      calls.push_back(outer);
    }
    std::vector<VarOrRVar> order;
    for (size_t i = 0; i < args.size(); ++i)
      if (inner_dim[i]) order.push_back(args[i]);
    for (auto v = calls.rbegin(); v != calls.rend(); ++v) order.push_back(*v);
    a.ext.reorder(order);
    Var call = calls[0];
    for (size_t i = 1; i < calls.size(); ++i) {
      Var fused("call" + std::to_string(i));
      a.ext.fuse(calls[i], call, fused);
      call = fused;
    }
    a.ext.parallel(call);
  }
  stage_root(a.out, a.c0, 0, {a.kd, a.g}, {"kdg"});
}

}  // namespace

const DwSchedule* dw_amx_blocked_schedule() { return the<DwAmxBlocked>(); }

}  // namespace tbex::sched
