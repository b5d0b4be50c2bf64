#include "schedules/loops.h"

#include <algorithm>
#include <optional>

#include "schedules/cost_model.h"
#include "schedules/tiling.h"
#include "tbex/errors.h"

namespace tbex::sched {

using namespace Halide;

void stage_root(Func f, const Var& lanes, int width, const std::vector<Var>& outer,
                const std::vector<std::string>& names) {
  f.compute_root();
  if (width > 0) f.vectorize(lanes, width);
  else f.vectorize(lanes);
  Var fused = outer.at(0);
  for (size_t i = 1; i < outer.size(); ++i) {
    const Var next(names.at(i - 1));
    f.fuse(fused, outer[i], next);
    fused = next;
  }
  f.parallel(fused);
}

void partition_only(const Func& out, const std::vector<Func>& whole, PartitionedLoops loops) {
  for (const auto& [name, fn] : Internal::find_transitive_calls(out.function())) {
    if (std::any_of(whole.begin(), whole.end(), [&](const Func& w) { return w.name() == name; }))
      continue;
    Func f(fn);
    f.never_partition_all();
    for (int i = 0; i < f.num_update_definitions(); ++i) f.update(i).never_partition_all();
  }
  for (auto& [stage, loop] : loops) stage.partition(loop, Partition::Auto);
}

void stage_dx_weights(const ops::DxAlgorithm& a, const Problem& p, int ct) {
  Func wz = a.wz;  // a handle to the same Func
  stage_root(wz, a.c0, 0, {a.kd, a.g}, {"t1"});
  if (ct < p.group.cin1_g) wz.reorder_storage(a.c0, a.n, a.kw, a.kh, a.kd, a.c1g, a.g);
}

void use_out_lanes(ops::DxAlgorithm& a, const Problem& p, const std::string& schedule) {
  internal_check(a.out_lanes.defined() && a.cin_valid == cin_valid(p),
                 schedule + ": the algorithm defines no out_lanes for this problem");
  a.out = a.out_lanes;
}

void register_tile(Func acc, Func owner, const VarOrRVar& at, const Var& c0, const Var& pos,
                   const Var& blk, const std::vector<RVar>& r, bool pairs, RowTaps row_taps,
                   bool unroll_pairs) {
  acc.compute_at(LoopLevel(owner, at)).vectorize(c0).unroll(pos).unroll(blk);
  // The order of the update's loops, innermost first: the tile, then r in its order (pairs: the
  // pair index inside the tile, vectorized; row taps: kw inside the tile's positions, or just
  // outside the tile, before the rest of r).
  const bool taps = row_taps != RowTaps::kNone;
  std::vector<VarOrRVar> order;
  if (pairs) order.push_back(r.at(0));
  if (row_taps == RowTaps::kTapsInner)
    order.insert(order.end(), {c0, r.at(1), blk, pos});
  else
    order.insert(order.end(), {c0, pos, blk});
  if (row_taps == RowTaps::kTapsOuter) order.push_back(r.at(1));
  for (size_t i = pairs ? 1 : 0; i < r.size(); ++i)
    if (!(taps && i == 1)) order.push_back(r[i]);
  Stage s = acc.update();
  s.reorder(order);
  if (pairs) s.atomic().vectorize(r[0]);
  s.vectorize(c0).unroll(pos).unroll(blk);
  if (taps) s.unroll(r[1]);
  else if (pairs && unroll_pairs) s.unroll(r[1]);
}

std::vector<RVar> rvars(const RDom& r) {
  std::vector<RVar> v;
  for (int i = 0; i < r.dimensions(); ++i) v.push_back(r[i]);
  return v;
}

RVar scatter_tiles(ops::DxAlgorithm& a, int qt, int ct) {
  const RDom rs = a.use_scatter();
  RVar rwo("rwo"), rwi("rwi");
  Var c1o("c1o"), c1i("c1i");
  a.out.update()
      .split(rs[0], rwo, rwi, qt, TailStrategy::GuardWithIf)
      .split(a.c1, c1o, c1i, ct)
      .reorder(a.c0, rwi, c1i, rwo, rs[1], rs[2], rs[3], c1o, rs[4], rs[5], a.b)
      .vectorize(a.c0)
      .unroll(rwi)
      .unroll(c1i)
      .allow_race_conditions()  // no race: see DxAlgorithm::use_scatter
      .parallel(a.b)
      .parallel(rs[4]);
  return rwo;
}

ops::ReductionParts dw_reduction_parts(const Problem& p, int parts, int64_t batch) {
  ops::ReductionParts r;
  if (parts < 2) return r;
  if (batch == 0) batch = p.geo.n;
  // Over batch when it has enough entries (or more than depth), else depth; `per` entries of
  // that extent a part.
  r.by_batch = batch >= parts || batch >= p.geo.out[0];
  const int64_t extent = r.by_batch ? batch : p.geo.out[0];
  r.per = (int)((extent + parts - 1) / parts);
  r.count = (int)((extent + r.per - 1) / r.per);
  return r;
}

int dw_parts(const Problem& p, int want, int64_t batch) {
  return dw_reduction_parts(p, want, batch).count;
}

int64_t dw_depth_extent(const Problem& p, int parts, int64_t batch) {
  const ops::ReductionParts r = dw_reduction_parts(p, parts, batch);
  return r.count > 1 && !r.by_batch ? r.per : p.geo.out[0];
}

int dw_parts_of_variant(const Problem& p, const TileSpace& space, const std::string& variant,
                        int requested, int64_t batch) {
  const int parts = dw_parts(p, requested, batch);
  space.require(parts == requested, variant,
                "parts=" + std::to_string(requested) + " gives " + std::to_string(parts) +
                    " parts of batch " + std::to_string(batch ? batch : p.geo.n) + " (or depth " +
                    std::to_string(p.geo.out[0]) + "): give a count the split yields");
  return parts;
}

int dw_pair_of(const Problem& p, const Target& target, const TileSpace& space,
               const std::string& variant) {
  const VariantFields asked = space.parse(variant);
  const int pair = asked.count("pair") ? asked.at("pair")
                                       : dw_pairs_apply(p) && bf16_dots_pay(target) ? kDwRowPairs : 1;
  space.require(pair == 1 || (pair == kDwRowPairs && dw_pairs_apply(p)), variant,
                "pair must be 1, or 2 for bf16 inputs whose x rows are staged");
  return pair;
}

int dw_pair_or_batch_pair_of(const Problem& p, const Target& target, const TileSpace& space,
                             const std::string& variant) {
  const VariantFields asked = space.parse(variant);
  if (asked.count("pair") && asked.at("pair") == kDwBatchPairs) {
    space.require(dw_batch_pairs_apply(p), variant,
                  "pair=3 (batch pairs) needs bf16 inputs whose x rows are staged and an even "
                  "batch (N " + std::to_string(p.geo.n) + ")");
    return kDwBatchPairs;
  }
  const int pair = dw_pair_of(p, target, space, variant);
  const bool own = !asked.count("pair") && pair == kDwRowPairs && dw_batch_pairs_apply(p) &&
                   !ops::pairs_staged_by_output_row(p);
  return own ? kDwBatchPairs : pair;
}

bool dw_other_pair_offered(const Problem& p, const Target& target, int own_pair) {
  return dw_pairs_apply(p) && (own_pair != 1 || bf16_dots_pay(target));
}

DwReduction split_dw_reduction(Func acc, const RDom& r, const Problem& p, int parts, int ch) {
  DwReduction red;
  red.mid = r[2], red.outer = r[3];
  red.body = acc;
  if (parts > 1) {
    RVar so("so"), si("si");
    // The batch the reduction walks: r's (its pairs in the batch pair form).
    const std::optional<int64_t> batch = Internal::as_const_int(r[3].extent());
    const ops::ReductionParts s = dw_reduction_parts(p, parts, batch.value_or(0));
    red.body = acc.update()
                   .split(s.by_batch ? r[3] : r[2], so, si, s.per, TailStrategy::GuardWithIf)
                   .rfactor(so, red.part);
    (s.by_batch ? red.outer : red.mid) = si;
  }
  Var u("u"), v("v"), bb("bb");
  red.intm = red.body.update()
                 .split(r[1], red.chunk, red.rows, ch)
                 .rfactor({{red.chunk, u}, {red.mid, v}, {red.outer, bb}});
  return red;
}

DwReduction tiled_dw_reduction(const ops::DwAlgorithm& a, const Problem& p, int parts, int ch) {
  DwReduction red = split_dw_reduction(a.acc, a.r, p, parts, ch);
  if (parts > 1) {
    Func acc = a.acc;
    acc.compute_root().vectorize(a.c0);
    acc.update().vectorize(a.c0);
  }
  red.body.compute_root().vectorize(a.c0);
  return red;
}

void stage_dy_pairs(const ops::DwAlgorithm& a, const DwReduction& red) {
  Func dys = a.dys;  // a handle to the same Func
  Var ni("ni"), no("no");
  dys.compute_at(red.body, red.chunk).split(a.n, no, ni, 16).reorder(ni, a.e, no).vectorize(ni).unroll(a.e);
}

Var spread_tiles(Stage s, const std::vector<VarOrRVar>& dims, int64_t tiles, int threads,
                 const DwReduction& red, int parts, std::vector<VarOrRVar> inner,
                 const std::vector<VarOrRVar>& after) {
  Var tile("tile"), tgo("tgo"), tgi(kChunkTiles);
  VarOrRVar fused = dims.at(0);
  for (size_t i = 1; i < dims.size(); ++i) {
    const Var next(i + 1 == dims.size() ? "tile" : "t" + std::to_string(i));
    s.fuse(fused, dims[i], next);
    fused = next;
  }
  const int groups = parts > 1 ? 1 : (int)std::min<int64_t>(threads, tiles);
  s.split(tile, tgo, tgi, (int)((tiles + groups - 1) / groups), TailStrategy::GuardWithIf);
  inner.push_back(tgi);
  inner.insert(inner.end(), after.begin(), after.end());
  for (const VarOrRVar& v : {VarOrRVar(red.chunk), VarOrRVar(red.mid), VarOrRVar(red.outer), VarOrRVar(tgo)})
    inner.push_back(v);
  // The parts outermost: each thread stages and streams only its own share of the reduction.
  // (rfactor's new pure var is otherwise placed innermost of the pure vars: inside the tile
  // loop, so both parts were computed per tile, a fork per tile visit.)
  if (parts > 1) inner.push_back(red.part);
  s.reorder(inner);
  if (parts > 1) s.parallel(red.part);
  else s.parallel(tgo);
  return tgi;
}

double tile_stagers(int64_t tiles, int threads, int parts, int64_t real_g) {
  if (parts > 1) return 1.0;
  const int64_t groups = std::max<int64_t>(1, std::min<int64_t>(threads, tiles));
  return double(groups * ceil_div(real_g, groups)) / double(real_g);
}

}  // namespace tbex::sched
