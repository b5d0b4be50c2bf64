#include "lower/prefetch_lines.h"

#include <optional>
#include <utility>
#include <vector>

namespace tbex::lower {
namespace {

using namespace Halide;
using namespace Halide::Internal;

/** The line Halide's x86 lowering prefetches per call (its max_byte_size there). */
constexpr int kLineBytes = 64;

bool is_prefetch_loop(const For* f) {
  return f != nullptr && f->name.rfind("prefetch_split_", 0) == 0;
}

/** Whether loop `name` is the loop var `var` of some stage ("<func>.s<k>.<...>.<var>"). */
bool is_loop_of(const std::string& name, const std::string& var) {
  return !var.empty() && name.size() > var.size() &&
         name.compare(name.size() - var.size(), var.size(), var) == 0 &&
         name[name.size() - var.size() - 1] == '.';
}

/** The prefetch loop `f` stepping one line per iteration, or undefined when it is not the form
 * Halide's SplitPrefetch leaves (one prefetch per iteration, its element offset linear in the
 * loop variable with a step of 64 elements). A loop stepped already steps 64 / size elements,
 * which is 64 only for bytes, whose step it leaves as it is: mending twice changes nothing. */
Stmt step_by_lines(const For* f) {
  const Evaluate* e = f->body.as<Evaluate>();
  const Call* c = e != nullptr ? e->value.as<Call>() : nullptr;
  if (c == nullptr || !c->is_intrinsic(Call::prefetch) || c->args.size() != 4) return Stmt();
  const int bytes = c->type.bytes();
  if (bytes <= 0 || kLineBytes % bytes != 0) return Stmt();
  const Expr at0 = simplify(substitute(f->name, make_zero(Int(32)), c->args[1]));
  const Expr at1 = simplify(substitute(f->name, make_one(Int(32)), c->args[1]));
  const std::optional<int64_t> step = as_const_int(simplify(at1 - at0));
  if (!step || *step != kLineBytes) return Stmt();
  std::vector<Expr> args = c->args;
  args[1] = simplify(at0 + cast(at0.type(), Variable::make(Int(32), f->name)) * (kLineBytes / bytes));
  return For::make(f->name, f->min, f->extent, f->for_type, f->partition_policy, f->device_api,
                   Evaluate::make(Call::make(c->type, Call::prefetch, args, Call::Intrinsic)));
}

/** The prefetch nest `s` (Halide's "prefetch_reduce_*" loops over the region's outer dims around
 * one "prefetch_split_*" loop over lines, possibly under lets of their offsets) with its line
 * loop replaced by `line(loop)`; undefined when `s` is not such a nest or `line` gives nothing. */
template <class Line>
Stmt with_line_loop(const Stmt& s, const Line& line) {
  if (const LetStmt* l = s.as<LetStmt>()) {
    const Stmt body = with_line_loop(l->body, line);
    return body.defined() ? LetStmt::make(l->name, l->value, body) : Stmt();
  }
  const For* f = s.as<For>();
  if (f == nullptr || f->name.rfind("prefetch_", 0) != 0) return Stmt();
  if (is_prefetch_loop(f)) return line(f);
  const Stmt body = with_line_loop(f->body, line);
  return body.defined() ? For::make(f->name, f->min, f->extent, f->for_type, f->partition_policy,
                                    f->device_api, body)
                        : Stmt();
}

/** The nest `s` with its line loop narrowed to share `slot` of `slots` (an even share of its
 * lines, the last ones possibly fewer or none); the outer prefetch loops stay whole. */
Stmt share_of(const Stmt& s, const Expr& slot, const Expr& slots) {
  return with_line_loop(s, [&](const For* f) {
    const Expr per = simplify((f->extent + slots - 1) / slots);
    const Expr first = simplify(slot * per);
    return For::make(f->name, simplify(f->min + first), simplify(clamp(f->extent - first, 0, per)),
                     ForType::Serial, f->partition_policy, f->device_api, f->body);
  });
}

/** Shares the prefetch nest `pf` (under the lets `lets` of its offset) out over the iterations
 * of a nest of serial loops, `path` outermost first: the first loop of path[0] with a constant
 * extent, within its body the first of path[1], and so on. Each iteration of the innermost loop
 * found prefetches its share at the top of its body. */
class Spread : public IRMutator {
 public:
  Spread(Stmt pf, std::vector<const LetStmt*> lets, const std::vector<std::string>& path)
      : pf_(std::move(pf)), lets_(std::move(lets)), path_(path) {}
  bool done = false;

 private:
  using IRMutator::visit;
  Stmt pf_;
  std::vector<const LetStmt*> lets_;
  const std::vector<std::string>& path_;
  size_t level_ = 0;
  Expr slot_ = 0, slots_ = 1;  ///< the share of the levels entered so far

  Stmt visit(const For* op) override {
    if (done || level_ >= path_.size()) return IRMutator::visit(op);
    const std::optional<int64_t> iterations = as_const_int(op->extent);
    // The outermost level must run a known count (>= 2); inner ones may run any.
    if (!is_loop_of(op->name, path_[level_]) || op->for_type != ForType::Serial ||
        (level_ == 0 && (!iterations || *iterations < 2)))
      return IRMutator::visit(op);
    const Expr outer_slot = slot_, outer_slots = slots_;
    slot_ = simplify(slot_ * op->extent + (Variable::make(Int(32), op->name) - op->min));
    slots_ = simplify(slots_ * op->extent);
    ++level_;
    Stmt body = level_ < path_.size() ? mutate(op->body) : op->body;
    --level_;
    if (!done) {
      // The deepest level found: its iterations prefetch the shares.
      done = true;
      Stmt share = share_of(pf_, slot_, slots_);
      for (auto l = lets_.rbegin(); l != lets_.rend(); ++l)
        share = LetStmt::make((*l)->name, (*l)->value, share);
      body = Block::make(share, body);
    }
    slot_ = outer_slot, slots_ = outer_slots;
    return For::make(op->name, op->min, op->extent, op->for_type, op->partition_policy,
                     op->device_api, body);
  }
};

class MendPrefetches : public IRMutator {
 public:
  explicit MendPrefetches(const std::vector<std::vector<std::string>>& over) : over_(over) {}

 private:
  using IRMutator::visit;
  const std::vector<std::vector<std::string>>& over_;

  Stmt visit(const For* op) override {
    if (!is_prefetch_loop(op)) return IRMutator::visit(op);
    Stmt s = step_by_lines(op);
    return s.defined() ? s : op;
  }

  Stmt visit(const Block* op) override {
    // The prefetch nest may sit under the lets of its offset: Block(LetStmt(.., For), rest).
    std::vector<const LetStmt*> lets;
    Stmt first = op->first;
    while (const LetStmt* l = first.as<LetStmt>()) lets.push_back(l), first = l->body;
    if (over_.empty()) return IRMutator::visit(op);
    const Stmt stepped = with_line_loop(first, step_by_lines);
    if (!stepped.defined()) return IRMutator::visit(op);
    for (const std::vector<std::string>& path : over_) {
      Spread spread(stepped, lets, path);
      const Stmt rest = spread.mutate(op->rest);
      if (spread.done) return mutate(rest);
    }
    return IRMutator::visit(op);
  }
};

/** The custom lowering pass (Halide owns it once added): only the Stmt is mended. */
class MendPass : public IRMutator {
 public:
  explicit MendPass(std::vector<std::vector<std::string>> over) : over_(std::move(over)) {}
  using IRMutator::mutate;
  Stmt mutate(const Stmt& s) override { return MendPrefetches(over_).mutate(s); }

 private:
  std::vector<std::vector<std::string>> over_;
};

}  // namespace

void mend_prefetches(Halide::Pipeline& pipeline, const Halide::Target& target,
                     const std::vector<std::vector<std::string>>& spread_over) {
  if (target.arch == Halide::Target::X86) pipeline.add_custom_lowering_pass(new MendPass(spread_over));
}

}  // namespace tbex::lower
