#include "lower/dot_operands.h"

namespace tbex::lower {
namespace {

using namespace Halide;
using namespace Halide::Internal;

/** A 32-lane bf16 vector that repeats one pair: what a 32-bit embedded broadcast loads. Seen
 * through a reinterpret of 16-bit lanes: a pair read in place from dy's uint16 bits. */
bool repeats_one_pair(const Expr& e) {
  if (const Reinterpret* r = e.as<Reinterpret>())
    return r->value.type().bits() == 16 && r->value.type().lanes() == e.type().lanes() &&
           repeats_one_pair(r->value);
  if (const Broadcast* b = e.as<Broadcast>()) return b->value.type().lanes() <= 2;
  const Shuffle* s = e.as<Shuffle>();
  if (s == nullptr || s->vectors.size() != 1 || s->vectors[0].type().lanes() != 2) return false;
  for (size_t i = 0; i < s->indices.size(); ++i)
    if (s->indices[i] != int(i % 2)) return false;
  return true;
}

class BroadcastLast : public IRMutator {
  using IRMutator::visit;

  /** dpbf16ps(init, vector, pair) for a pairwise sum of 32 bf16 products with one factor a
   * repeated pair; undefined where Halide's own matching serves as well. */
  Expr dot(const VectorReduce* r, const Expr& init) {
    const Type out = Float(32, 16);
    if (r == nullptr || r->op != VectorReduce::Add || r->type != out) return Expr();
    const Mul* m = r->value.as<Mul>();
    if (m == nullptr || m->type != Float(32, 32)) return Expr();
    Expr a = lossless_cast(BFloat(16, 32), m->a), b = lossless_cast(BFloat(16, 32), m->b);
    if (!a.defined() || !b.defined()) return Expr();
    if (repeats_one_pair(a) && !repeats_one_pair(b)) std::swap(a, b);
    if (!repeats_one_pair(b) || repeats_one_pair(a)) return Expr();
    return Call::make(out, "dpbf16ps",
                      {init.defined() ? mutate(init) : make_zero(out), mutate(a), mutate(b)},
                      Call::PureExtern);
  }

  Expr visit(const Add* op) override {
    if (Expr d = dot(op->a.as<VectorReduce>(), op->b); d.defined()) return d;
    if (Expr d = dot(op->b.as<VectorReduce>(), op->a); d.defined()) return d;
    return IRMutator::visit(op);
  }

  Expr visit(const VectorReduce* op) override {
    if (Expr d = dot(op, Expr()); d.defined()) return d;
    return IRMutator::visit(op);
  }
};

}  // namespace

void put_dot_broadcasts_last(Halide::Pipeline& pipeline) {
  pipeline.add_custom_lowering_pass(new BroadcastLast);
}

}  // namespace tbex::lower
