#pragma once
/** The algorithms of dW, dX and the forward conv as Halide Funcs, with no scheduling.
 *
 * All are defined in the "real group" frame (docs/group_dict.md): 6HD channel block c1 of real group
 * g is block g*cin1_g + c1g, and output channel n of real group g is channel g*cout_g + n (for the
 * forward conv, whose filter packs the transposed weight, the roles swap: its output channels are
 * the packing's cin1_g blocks, its input channels the packing's cout_g). Grouped problems are
 * computed densely per real group; cross-group and padding entries are masked to exactly 0 (dW:
 * in the output stage; dX and forward: in the staged weights).
 *
 * Halide dimension order is innermost first; the comments give it. */
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "Halide.h"
#include "tbex/amx_dx_cols.h"
#include "tbex/problem.h"
#include "ops/pad_taps.h"

namespace tbex::ops {

/** A dW reduction over (wo, ho, do, b) cut into `count` parts, each summed on its own (the
 * parts then added in order): part k takes batches [k*per, (k+1)*per) (by_batch) or output
 * depths [k*per, (k+1)*per) of every batch. One part: dW's sum itself. The schedules choose it
 * from the problem (schedules/loops.h dw_reduction_parts), never from the thread count. */
struct ReductionParts {
  int count = 1;
  bool by_batch = true;
  int per = 1 << 30;
};

struct DwAlgorithm {
  Halide::ImageParam x;   ///< (c0, w, h, c1, d, n)        6HD fmap
  Halide::ImageParam dy;  ///< (c0, wo, ho, co1, do, n)    6HD out_backprop
  Halide::Func xs{"xs"};        ///< (c0, wp, hp, c1g, dp, b, g) fp32, zero-padded by the pads
                                ///< (the diagonal form reads every tap of it)
  /** xs as acc's reduction reads it (the same dims): equal to xs wherever a tap r keeps reads,
   * with zeros only in the dims whose pad taps r keeps (keeps_pad_taps: rarely), so a schedule
   * that inlines it (x read in place) has no padding select in its loops. */
  Halide::Func xr{"xr"};
  Halide::Func dys{"dys"};       ///< (n, wo, ho, do, b, g)       fp32, channels of real group g
  Halide::Func acc{"acc"};       ///< (c0, n, kw, kh, c1g, kd, g) sum over r
  Halide::Func out{"out"};       ///< (c0, n, kw, kh, c1g, kd, g) masked; 7-D view of the 4-D dW
  Halide::RDom r;         ///< (wo, ho, do, b), rows and depth slices whose tap reads x's pads left out
  Halide::Var c0{"c0"}, n{"n"}, kw{"kw"}, kh{"kh"}, c1g{"c1g"}, kd{"kd"}, g{"g"};
  Halide::Var w{"w"}, h{"h"}, d{"d"}, b{"b"};

  /** Diagonal form, defined only when `diag` (one input channel per original group, cin_pg == 1,
   * so cin1_g == 1): input lane c0 pairs only with output channels n = c0*mult + m of its own
   * group, m < mult = cout_pg. The same sums as acc restricted to those entries; a schedule that
   * uses it calls use_diag(), which makes `out` read accd (every other entry exactly 0). */
  bool diag = false;
  int mult = 1;                  ///< cout_pg: output channels per input channel
  Halide::Func dyd{"dyd"};       ///< (c0, m, wo, ho, do, b, g) fp32, channel c0*mult + m of real group g
  Halide::Func accd{"accd"};     ///< (c0, m, kw, kh, kd, g) sum over rd
  Halide::Func outd;             ///< out's definition reading accd (named "out" too)
  Halide::RDom rd;               ///< r's positions, every tap: dw_diag unrolls the taps kh
  Halide::Var m{"m"};
  void use_diag() { out = outd, r = rd; }

  /** Pair form, defined when `pairs` (bf16 inputs): the same sums as acc with the output rows
   * taken two at a time, ho = 2*ho2 + e with e innermost and both operands kept bf16, so a
   * schedule vectorizing (e, c0) gets one dot product of bf16 pairs per fp32 lane (VDPBF16PS
   * where the target has it; docs/validation.md). use_pairs() swaps it in for xs, dys, acc, r
   * and out: the schedules see the same loop structure, r[1] counting row pairs, r[4] = e. */
  bool pairs = false;
  /// (e, c0, wp, hp, c1g, dp, b, g) bf16 xs at rows hp and hp + sh; where pairs_staged_by_output_row
  /// (Kh = 1), hp = ho2 names the row pair output row pair ho2 reads (rows 2 * sh * ho2 + e * sh).
  Halide::Func xsp{"xsp"};
  Halide::Func dysp{"dysp"};  ///< (e, n, wo, ho2, do, b, g) bf16 dy of row 2*ho2 + e (0 past Ho)
  Halide::Func accp{"accp"};  ///< acc's dims, sum over rp
  Halide::Func outp;          ///< out reading accp (named "out" too)
  Halide::RDom rp;            ///< (wo, ho2, do, b, e)
  Halide::Var e{"e"};
  void use_pairs() { xs = xsp, dys = dysp, acc = accp, r = rp, out = outp; }

  /** Batch pair form, defined with the pair form where the batch is even (batch_pairs): the
   * same dot products with the pairs taken along the batch, b = 2*b2 + e, so each x row is
   * staged once per chunk (row pairs at Kh > 1 stage most rows twice, as a pair's first and
   * second row). use_batch_pairs() swaps it in as use_pairs() does: r[1] counts output rows,
   * r[3] batch pairs, r[4] = e. */
  bool batch_pairs = false;
  Halide::Func xsb{"xsb"};    ///< (e, c0, wp, hp, c1g, dp, b2, g) bf16 xs of batch 2*b2 + e
  Halide::Func dysb{"dysb"};  ///< (e, n, wo, ho, do, b2, g) bf16 dy of batch 2*b2 + e
  Halide::Func accb{"accb"};  ///< acc's dims, sum over rb
  Halide::Func outpb;         ///< out reading accb (named "out" too)
  Halide::RDom rb;            ///< (wo, ho, do, b2, e)
  void use_batch_pairs() { xs = xsb, dys = dysb, acc = accb, r = rb, out = outpb; }

  /** Tile form, defined with the pair form: the same sums with the output channel innermost,
   * acct(n, c0, ...), over rt = (k, ho, do, b) where k walks a row's output positions padded to
   * an even count We (dy is 0 past Wo), so a schedule can hand 16 input lanes x 16 output
   * channels x up to 32 positions to one AMX-BF16 tile multiply (TDPBF16PS: products exact in
   * fp32, fp32 sums; only the order differs). Its operands are staged as tile rows: xT is x
   * transposed (a lane's positions back to back) per stride phase along w, so a tap only moves a
   * row's start; dyV is dy as pairs of positions per channel (the layout TDPBF16PS reads), with
   * (position pair, real group, row, depth, batch) as one row index (Halide's tile matcher takes
   * an offset only there; a chunk of output rows is one run of it). A schedule that uses it
   * calls use_tiles(): out then reads acct. */
  int we = 2;                 ///< We: output positions per row, rounded up to even
  Halide::Func xT{"xT"};      ///< (wq, c0, h, c1g, d, b, g, ph) bf16 x at padded-frame w = wq*sw + ph
  Halide::Func xq{"xq"};      ///< (wq, q, h, c1g, d, b, g, ph) lanes 4q..4q+3 of xT as one u64
  Halide::Var q{"q"};
  Halide::Func dyV{"dyV"};    ///< (e, n, row) bf16 dy of channel n at wo = 2*(row % (We/2)) + e
  Halide::Func acct{"acct"};  ///< (n, c0, kw, kh, c1g, kd, g) sum over rt
  Halide::Func outt;          ///< out reading acct (named "out" too)
  Halide::RDom rt;            ///< (k, ho, do, b), k < We
  Halide::Var wq{"wq"}, ph{"ph"}, row{"row"};
  void use_tiles() { out = outt; }

  /** Tap rows, defined with the tile form: the same sums with the taps along w folded into the
   * tile's rows, acctk(n, kr, kh, c1g, kd, g) with kr = kw*cin + c0 (cin: the valid lanes of a
   * block, min(16, mag*cin_pg)). Where a block holds few input channels (the stem's 3 of 16
   * lanes), a tile's 16 rows then carry 16 (kw, channel) pairs instead of 16 lanes mostly
   * padding. xTk copies xT's rows per (kw, channel): rows past Kw*cin repeat the last tap's
   * (computed and dropped). A schedule that uses it calls use_tap_rows(): out then reads acctk. */
  int tap_rows = 1;            ///< Kw * cin: the rows that hold a real (kw, channel)
  Halide::Func xTk{"xTk"};     ///< (k, kr, h, c1g, d, b, g) bf16 x of lane kr % cin at position
                               ///< k*sw + (kr / cin)*dw of the padded frame
  Halide::Func acctk{"acctk"}; ///< (n, kr, kh, c1g, kd, g) sum over rt
  Halide::Func outk;           ///< out reading acctk (named "out" too)
  Halide::Var kr{"kr"};
  void use_tap_rows() { out = outk; }

  /** Blocked tile form, defined with the tile form: acct's sums computed by tbex_amx_dw
   * (tbex/amx_dw.h: 2 x 2 blocks of AMX tiles held over chunks of output rows, a Halide extern
   * stage) from x and dy as the caller holds them (the kernel stages its tiles per chunk), kk
   * positions per tile multiply, the reduction in `parts` (each part's sums the extern's, added
   * in order part 0, 1, ...). A schedule that uses it calls use_blocks(parts), which defines
   * ext and outb; out then reads ext. */
  int kk = 2;                 ///< positions per tile multiply (dw_k_step)
  Halide::Func ext{"ext"};    ///< (c0, n, kw, kh, c1g, kd, g, part) fp32 sums: the extern stage
  Halide::Func outb;          ///< out reading ext (named "out" too)
  Halide::Var part{"part"};
  void use_blocks(const ReductionParts& parts = {});
  /** What use_blocks defines ext and outb from (set with the tile form; out_shape always). */
  std::vector<Halide::ExternFuncArgument> ext_args;  ///< tbex_amx_dw's arguments before the parts'
  Halide::Expr ext_valid, ext_c0;                    ///< out's mask and the lane it reads
  std::vector<int64_t> out_shape;                    ///< constrain_shape's extents for out
};

struct DxAlgorithm {
  Halide::ImageParam filter;  ///< (c0, n0, n1, row)  FRACTAL_Z_3D, row = ((g*Kd+kd)*cin1_g+c1g)*Kh*Kw + kh*Kw + kw
  Halide::ImageParam dy;      ///< (c0, wo, ho, co1, do, n)
  Halide::ImageParam bias;    ///< (c) when the problem has a bias
  Halide::Func wz{"wz"};            ///< (c0, c1g, n, kw, kh, kd, g) fp32, zero outside the group
  Halide::Func dys{"dys"};           ///< (n, ow, oh, od, b, g) fp32, zero outside [0, Do) etc.
  /** dy of channel n of real group g converted to fp32, in dy's own frame (no padding): what
   * dys reads inside the volume. A schedule staging it (16-bit dy) and leaving dys inline has
   * the tiles read a converted copy through dys's padding select, as they read fp32 dy in
   * place. */
  Halide::Func dyc{"dyc"};           ///< (n, ow, oh, od, b, g) fp32, [0, Wo) x [0, Ho) x [0, Do)
  Halide::Func acc{"acc"};           ///< (c0, qw, pw, qh, ph, qd, pd, c1, b) phase frame: w = qw*sw + pw
  Halide::Func dxp{"dxp"};           ///< same dims as acc: acc + bias, cast to res_dtype
  Halide::Func out{"out"};           ///< (c0, w, h, c1, d, b) 6HD view of the (N, D, C1, H*W, 16) output
  /** Defined only when a real group has one input block with fewer than 16 valid lanes
   * (cin1_g == 1, cin_valid < 16): the same output as `out`, but reading dxp (so acc and wz) only
   * at lanes [0, cin_valid) and writing the padding lanes as 0 (which `out` computes as 0 anyway:
   * wz and the bias are 0 there). A schedule computing only the valid lanes makes it the pipeline's
   * output (a.out = a.out_lanes); every other schedule leaves it unused. */
  Halide::Func out_lanes{"out_lanes"};
  int cin_valid = 16;         ///< valid c0 lanes of a real group's block: min(16, mag_factor * cin_pg)
  Halide::RDom r;             ///< (n, jw, jh, jd): the taps of the stride phase (tap = k0 + j*step,
                              ///< phase_tap_extent), predicated on j naming a real tap
  bool strided = false;       ///< any stride > 1: out gathers from dxp; else out reads acc directly
  /** Scatter form of a strided output, defined when `scatter` (every extent of dX a multiple of
   * its stride, so the phase frame covers the volume exactly): `out` becomes an update over
   * rs = (qw, pw, qh, ph, qd, pd) that writes the current dxp (call it after use_diag/use_pairs/
   * use_tiles) to w = qw*sw + pw, h = qh*sh + ph, d = qd*sd + pd. A schedule then stores each
   * register tile straight to its 6HD places while it computes: the gather form reads dxp once
   * per output position, a second pass over dX whose stores stall on memory when they come all
   * at once (no compute left to hide them behind). The returned rs is what the schedule splits;
   * (q, p) -> q*s + p is injective for p < s, so no two of its iterations write one place and any
   * of them may run in parallel. (A ragged frame would need rs predicated on the volume; Halide
   * bounds the written region by rs's box, outside the output buffer.) */
  Halide::RDom use_scatter();
  bool scatter = false;
  std::array<int, 3> in_extent{1, 1, 1};  ///< D, H, W of dX
  std::array<int, 3> stride{1, 1, 1};     ///< sd, sh, sw
  std::vector<int64_t> x_shape;           ///< dX's 6HD shape (the scatter form's output buffer)
  Halide::Var c0{"c0"}, qw{"qw"}, pw{"pw"}, qh{"qh"}, ph{"ph"}, qd{"qd"}, pd{"pd"}, c1{"c1"},
      b{"b"}, n{"n"}, kw{"kw"}, kh{"kh"}, kd{"kd"}, g{"g"}, w{"w"}, h{"h"}, d{"d"}, c1g{"c1g"};

  /** Diagonal form, defined only when `diag` (cin_pg == 1, so cin1_g == 1 and c1 is the real
   * group): input lane c0 receives only output channels n = c0*mult + m, m < mult = cout_pg.
   * The same sum as acc without the terms whose weight is exactly 0 (same order: m, kw, kh, kd
   * with m innermost). A schedule that uses it calls use_diag(): dxp and out then read accd. */
  bool diag = false;
  int mult = 1;                 ///< cout_pg
  Halide::Func wd{"wd"};        ///< (c0, m, kw, kh, kd, g) fp32 weight of channel c0*mult + m, 0 outside the group
  Halide::Func dyd{"dyd"};      ///< (c0, m, w, h, d, b, g) fp32, 0 outside [0, Do) etc.
  Halide::Func accd{"accd"};    ///< same dims as acc
  Halide::Func dxpd{"dxpd"};    ///< dxp reading accd
  Halide::Func outd;            ///< out reading dxpd (named "out" too)
  Halide::RDom rd;              ///< (m, jw, jh, jd), predicated like r
  Halide::Var m{"m"};
  void use_diag() { dxp = dxpd, out = outd; }

  /** Pair form, defined when `pairs` (bf16 inputs, an even cout_g): the same sum as acc with the
   * output channels taken two at a time, n = 2*n2 + e with e innermost and both operands kept
   * bf16, so a schedule vectorizing (e, c0) gets one dot product of bf16 pairs per fp32 lane
   * (VDPBF16PS where the target has it; docs/validation.md). A schedule that uses it calls
   * use_pairs(): dxp and out then read accp. */
  bool pairs = false;
  Halide::Func wzp{"wzp"};    ///< (e, c0, c1g, n2, kw, kh, kd, g) bf16 weight of channel 2*n2+e, 0 outside the group
  Halide::Func dysp{"dysp"};  ///< (e, n2, w, h, d, b, g) bf16 dy of channel 2*n2+e, 0 outside the volume
  Halide::Func accp{"accp"};  ///< same dims as acc
  Halide::Func dxpp{"dxpp"};  ///< dxp reading accp
  Halide::Func outp;          ///< out reading dxpp (named "out" too)
  Halide::RDom rp;            ///< (e, n2, jw, jh, jd), the taps of the phase like r; where
                              ///< dysp_reads_dy(p) (dy's pairs readable in place)
                              ///< (e, j, blk, jw, jh, jd), n2 = blk * 8 + j
  Halide::Var e{"e"}, n2{"n2"};
  void use_pairs() { dxp = dxpp, out = outp; }

  /** Tile form, defined with the pair form: the same sum over one channel index k = 2*n2 + e
   * and the taps, dy read from dysk (a position's channels back to back, what a tile row loads) and the
   * weights from wzp, so a schedule can hand 16 positions x up to 32 channels x 16 lanes to one
   * AMX-BF16 tile multiply (TDPBF16PS: products exact in fp32, fp32 sums, as in acc; only the order differs).
   * A schedule that uses it calls use_tiles(): dxp and out then read acct. */
  Halide::Func dysk{"dysk"};  ///< (n, w, h, d, b, g) bf16 dy of channel n, 0 outside the volume
  Halide::Func wzk{"wzk"};    ///< (e, c0, row) wzp as rows of 16 lane pairs: 6HD block c1 (of its
                              ///< real group), tap and channel pair n2 as one index, row =
                              ///< (c1*taps + (kd*Kh + kh)*Kw + kw)*cout_g/2 + n2 (Halide's tile
                              ///< matcher takes the weights' offset only inside the row index)
  Halide::Func acct{"acct"};  ///< same dims as acc
  Halide::Func dxpt{"dxpt"};  ///< dxp reading acct
  Halide::Func outt;          ///< out reading dxpt (named "out" too)
  Halide::RDom rt;            ///< (k, jw, jh, jd), the taps of the phase, predicated like r
  void use_tiles() { dxp = dxpt, out = outt; }

  /** Blocked tile form, defined when `blocked` (dx_blocks: the pair form): acc's sums computed
   * by tbex_amx_dx (tbex/amx_dx.h: 2 x 2 blocks of AMX tiles, a Halide extern stage) from dy as
   * the caller holds it and wzk, in the output's own frame (each stride phase's taps walked by
   * the kernel). A schedule that uses it calls use_blocks(): out then reads ext (bias, cast), or
   * is ext (blocks_out). */
  bool blocked = false;
  int kk = 2;                 ///< output channels per tile multiply (dx_k_step)
  Halide::Func ext{"ext"};    ///< (c0, w, h, c1, d, b) fp32 sums: the extern stage
  bool blocks_out = false;    ///< ext is the output itself (fp32, no bias: nothing to add or cast)
  Halide::Func outb;          ///< out: ext with the bias added and cast (named "out" too)
  void use_blocks() { out = outb; }

  /** Tap column form, defined when `cols` (dx_cols: the pair form, one real group of one input
   * block with at most 8 valid lanes): dX computed by tbex_amx_dx_cols (tbex/amx_dx_cols.h: AMX
   * tiles whose columns are (kw, input channel) pairs, a Halide extern stage) in the output's
   * own frame (strides and all), from dy as the caller holds it and wzc. A schedule that uses
   * it calls use_cols(): out then reads extc (bias, cast), or is extc (cols_out). */
  bool cols = false;
  Halide::Func wzc{"wzc"};    ///< (e, j, row) bf16 weights as tbex_amx_dx_cols reads them
  Halide::Func extc{"extc"};  ///< (c0, w, h, c1, d, b) fp32 dX: the extern stage
  bool cols_out = false;      ///< extc is the output itself (fp32, no bias)
  Halide::Func outc;          ///< out: extc with the bias added and cast (named "out" too)
  void use_cols() { out = outc; }
};

/** dX's taps per stride phase along one dim (kernel K, stride s, dilation dl): the extent of the
 * reduction's tap index j. A phase's taps are k0 + j*step with step = s / gcd(s, dl), so at most
 * ceil(K / step); a phase with fewer skips the rest by the RDom predicate. */
inline int phase_tap_extent(int64_t K, int64_t s, int64_t dl) {
  int64_t g = s, b = dl;
  while (b) g = std::exchange(b, g % b);
  const int64_t step = s / g;
  return (int)((K + step - 1) / step);
}

/** The forward conv as a GEMM per real group: M = output positions, N = output channels (c0, c1),
 * K = input channels n x taps. */
struct FwdAlgorithm {
  Halide::ImageParam x;       ///< (c0, w, h, c1, d, b)      6HD input
  Halide::ImageParam filter;  ///< (c0, n0, n1, row)  FRACTAL_Z_3D of the transposed weight, row = ((g*Kd+kd)*cin1_g+c1g)*Kh*Kw + kh*Kw + kw
  Halide::Func wz{"wz"};            ///< (c0, c1g, n, kw, kh, kd, g) fp32, zero outside the group
  Halide::Func xs{"xs"};            ///< (n, w, h, d, b, g) fp32 in the padded frame (w = input w + left pad), zero outside x
  Halide::Func acc{"acc"};          ///< (c0, wo, ho, c1, od, b) sum over r
  Halide::Func out{"out"};          ///< (c0, wo, ho, c1, od, b) 6HD y, res_dtype, 0 in padding lanes
  Halide::RDom r;             ///< (n, kw, kh, kd)
  Halide::Var c0{"c0"}, wo{"wo"}, ho{"ho"}, c1{"c1"}, od{"od"}, b{"b"}, n{"n"}, kw{"kw"},
      kh{"kh"}, kd{"kd"}, g{"g"}, w{"w"}, h{"h"}, d{"d"}, c1g{"c1g"};
};

/** Whether dX has its scatter form for `p` (DxAlgorithm::scatter): strided, every extent of dX a
 * multiple of its stride. */
inline bool dx_scatters(const Problem& p) {
  const ConvGeometry& g = p.geo;
  const bool strided = g.stride[0] > 1 || g.stride[1] > 1 || g.stride[2] > 1;
  return strided && g.in[0] % g.stride[0] == 0 && g.in[1] % g.stride[1] == 0 &&
         g.in[2] % g.stride[2] == 0;
}

/** Whether dW's pair form indexes its staged x row pairs by output row pair rather than by
 * first row: kernels one row high (Kh = 1), whose one tap reads one row pair per output pair.
 * By first row, a chunk of c row pairs stages the 2*sh*(c-1) + 1 rows its pairs start at, of
 * which it reads c: the others start between pairs (a third of d dW bf16's staging at 2 row
 * pairs a chunk). Taller kernels read most of the rows between (strided ones some), and their
 * chunk choice was measured by first row. */
inline bool pairs_staged_by_output_row(const Problem& p) { return p.geo.kernel[1] == 1; }

/** Valid input lanes of a real group's first input block: min(16, mag_factor * Cin/groups). */
inline int cin_valid(const Problem& p) {
  return (int)std::min<int64_t>(16, p.group.mag_factor * p.geo.cin_pg());
}

/** Whether dX's pair form can read its bf16 dy pairs from dy in place (DxAlgorithm::dysp, rp):
 * at unit strides, with whole 6HD blocks per group (cout_g a multiple of 16), a position's
 * channel pairs are 4-byte words of dy, 8 to a block, so a tile can broadcast them from dy
 * itself, where the padding select is on the width alone (dy_pads_left_out). */
inline bool dysp_reads_dy(const Problem& p) {
  const ConvGeometry& g = p.geo;
  return g.stride[0] * g.stride[1] * g.stride[2] == 1 && p.group.cout_g % 16 == 0 &&
         dy_pads_left_out(p);
}

/** Whether dX's pair form reads dy as is, with no padding select (dysp_reads_dy where no pair
 * reads a pad at all). */
inline bool dysp_is_dy(const Problem& p) { return dysp_reads_dy(p) && reads_inside(p); }

/** Whether dX has its pair form for `p` (DxAlgorithm::pairs): bf16 inputs, an even cout_g. */
inline bool bf16_pairs(const Problem& p) {
  return p.in_dtype == DType::kBFloat16 && p.group.cout_g % 2 == 0;
}

/** Output channels per AMX tile multiply in dX's tile forms: the most (up to 32, a 64-byte tile
 * row) dividing cout_g, even (the pair form needs an even cout_g). */
inline int dx_k_step(const Problem& p) {
  for (int k = 32; k >= 2; k -= 2)
    if (p.group.cout_g % k == 0) return k;
  return 2;
}

/** A dW row's output positions padded to even (DwAlgorithm::we: the tile form's position pairs),
 * and the positions per dW tile multiply (DwAlgorithm::kk): the largest even divisor of it up to
 * 32 (a tile row's 64 bytes), so the steps tile the row exactly. */
inline int dw_padded_row(const Problem& p) { return (int)(p.geo.out[2] + p.geo.out[2] % 2); }
inline int dw_k_step(const Problem& p) {
  const int we = dw_padded_row(p);
  for (int k = std::min(32, we); k >= 2; --k)
    if (k % 2 == 0 && we % k == 0) return k;
  return 2;
}

/** Whether dX has its blocked tile form for `p` (DxAlgorithm::blocked): the pair form
 * (tbex_amx_dx walks each stride phase's taps). */
inline bool dx_blocks(const Problem& p) { return bf16_pairs(p); }

/** Whether dX has its tap column form for `p` (DxAlgorithm::cols): the pair form, one real group
 * of one input block with at most 8 valid lanes, whose Kw taps' columns fill at most two tiles. */
inline bool dx_cols(const Problem& p) {
  const int valid = cin_valid(p);
  return bf16_pairs(p) && p.group.cin1_g == 1 && p.group.real_g == 1 && valid <= 8 &&
         p.geo.kernel[2] * amx_dx_cols_lanes(valid) <= 32;
}

/** Whether the blocked form's extern stage writes the output itself (DxAlgorithm::blocks_out):
 * an fp32 result without a bias, nothing to add or round. */
inline bool dx_blocks_out(const Problem& p) {
  return p.res_dtype == DType::kFloat32 && !p.has_bias;
}

DwAlgorithm define_backprop_filter(const Problem& p);
DxAlgorithm define_backprop_input(const Problem& p);
FwdAlgorithm define_forward(const Problem& p);

/** fp16/bf16/fp32 -> fp32 and back (round to nearest even); bf16 travels as uint16 bits. */
Halide::Expr to_f32(Halide::Expr v);
Halide::Expr from_f32(Halide::Expr v, Halide::Type t);

/** bf16 bits (uint16) as Halide's bfloat16, for products Halide may lower to bf16 dot products. */
Halide::Expr as_bf16(Halide::Expr bits);

/** Halide element type of a tbex dtype (bf16: UInt(16), its bits). */
Halide::Type halide_type(DType t);

/** Fixes every dimension of `ip` to `shape` (outermost first) with a dense innermost dim, so
 * schedules see constant extents. */
void constrain_shape(Halide::OutputImageParam ip, const std::vector<int64_t>& shape);

}  // namespace tbex::ops
