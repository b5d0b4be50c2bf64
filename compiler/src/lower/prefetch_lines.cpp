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

/** Puts an even share of the lines of prefetch loop `pf` (under the lets `lets` of its offset) at
 * the top of each iteration of the first serial loop of var `over` with a constant extent. */
class Spread : public IRMutator {
 public:
  Spread(const For* pf, std::vector<const LetStmt*> lets, const std::string& over)
      : pf_(pf), lets_(std::move(lets)), over_(over) {}
  bool done = false;

 private:
  using IRMutator::visit;
  const For* pf_;
  std::vector<const LetStmt*> lets_;
  const std::string& over_;

  Stmt visit(const For* op) override {
    if (done) return op;
    const std::optional<int64_t> iterations = as_const_int(op->extent);
    const std::optional<int64_t> lines = as_const_int(pf_->extent);
    if (!is_loop_of(op->name, over_) || op->for_type != ForType::Serial || !iterations ||
        !lines || *iterations < 2 || !is_const_zero(pf_->min))
      return IRMutator::visit(op);
    done = true;
    const int per = (int)((*lines + *iterations - 1) / *iterations);
    const Expr first = (Variable::make(Int(32), op->name) - op->min) * per;
    const Expr count = clamp(make_const(Int(32), *lines) - first, 0, per);
    Stmt share = For::make(pf_->name, first, count, ForType::Serial, pf_->partition_policy,
                           pf_->device_api, pf_->body);
    for (auto l = lets_.rbegin(); l != lets_.rend(); ++l)
      share = LetStmt::make((*l)->name, (*l)->value, share);
    return For::make(op->name, op->min, op->extent, op->for_type, op->partition_policy,
                     op->device_api, Block::make(share, op->body));
  }
};

class MendPrefetches : public IRMutator {
 public:
  explicit MendPrefetches(const std::string& over) : over_(over) {}

 private:
  using IRMutator::visit;
  const std::string& over_;

  Stmt visit(const For* op) override {
    if (!is_prefetch_loop(op)) return IRMutator::visit(op);
    Stmt s = step_by_lines(op);
    return s.defined() ? s : op;
  }

  Stmt visit(const Block* op) override {
    // The prefetch loop may sit under the lets of its offset: Block(LetStmt(.., For), rest).
    std::vector<const LetStmt*> lets;
    Stmt first = op->first;
    while (const LetStmt* l = first.as<LetStmt>()) lets.push_back(l), first = l->body;
    const For* pf = first.as<For>();
    if (over_.empty() || !is_prefetch_loop(pf)) return IRMutator::visit(op);
    const Stmt stepped = step_by_lines(pf);
    if (!stepped.defined()) return IRMutator::visit(op);
    Spread spread(stepped.as<For>(), std::move(lets), over_);
    const Stmt rest = spread.mutate(op->rest);
    return spread.done ? mutate(rest) : IRMutator::visit(op);
  }
};

/** The custom lowering pass (Halide owns it once added): only the Stmt is mended. */
class MendPass : public IRMutator {
 public:
  explicit MendPass(std::string over) : over_(std::move(over)) {}
  using IRMutator::mutate;
  Stmt mutate(const Stmt& s) override { return MendPrefetches(over_).mutate(s); }

 private:
  std::string over_;
};

}  // namespace

void mend_prefetches(Halide::Pipeline& pipeline, const Halide::Target& target,
                     const std::string& spread_over) {
  if (target.arch == Halide::Target::X86) pipeline.add_custom_lowering_pass(new MendPass(spread_over));
}

}  // namespace tbex::lower
