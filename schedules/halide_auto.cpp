/** Halide's own autoschedulers (Mullapudi2016, Adams2019, Li2018) as registry entries, so their
 * schedules of tbex's algorithms can be compared with tbex's. They are used only when requested
 * by name, never by "auto".
 *
 * The plugins are the shared libraries the Halide wheel ships next to libHalide.so; each is
 * loaded once, on first use, and registers its autoscheduler with Halide. The algorithm's Funcs
 * are left unscheduled (ops/ define no schedule); shapes are constant, so the estimates the
 * autoschedulers need are the constrained bounds of the inputs and the output. */
#include <dlfcn.h>
#include <sys/stat.h>

#include <map>
#include <mutex>

#include "schedules/registry.h"
#include "tbex/errors.h"

namespace tbex::sched {
namespace {

struct Plugin {
  const char* entry;  ///< registry name
  const char* name;   ///< Halide's name of the autoscheduler
  const char* file;   ///< shared library next to libHalide.so
};

constexpr Plugin kPlugins[] = {
    {"halide_mullapudi2016", "Mullapudi2016", "libautoschedule_mullapudi2016.so"},
    {"halide_adams2019", "Adams2019", "libautoschedule_adams2019.so"},
    {"halide_li2018", "Li2018", "libautoschedule_li2018.so"},
};

/** Directory of the libHalide.so this process uses: the wheel ships the plugins beside it. */
std::string halide_lib_dir() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&Halide::load_plugin), &info) || !info.dli_fname) return "";
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string plugin_path(const Plugin& pl) {
  static const std::string dir = halide_lib_dir();
  return dir.empty() ? "" : dir + "/" + pl.file;
}

/** Loads the plugin once per process: "" when its autoscheduler is registered, else why not. */
std::string load(const Plugin& pl) {
  static std::mutex mu;
  static std::map<std::string, std::string> loaded;  // name -> "" or the error
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded.find(pl.name);
  if (it != loaded.end()) return it->second;
  std::string err;
  const std::string path = plugin_path(pl);
  struct stat st {};
  if (path.empty()) {
    err = "cannot locate libHalide.so (dladdr failed), so not the " + std::string(pl.file) + " plugin";
  } else if (stat(path.c_str(), &st) != 0) {
    err = "the installed Halide does not ship the " + std::string(pl.name) +
          " autoscheduler (no " + path + ")";
  } else {
    try {
      Halide::load_plugin(path);
    } catch (const Halide::Error& e) {
      err = "loading " + path + " failed: " + e.what();
    }
  }
  loaded.emplace(pl.name, err);
  return err;
}

/** The constant box an input or output buffer is constrained to (ops::constrain_shape). */
Halide::Region constrained_box(const Halide::OutputImageParam& ip) {
  Halide::Region box;
  const Halide::Parameter param = ip.parameter();
  for (int i = 0; i < ip.dimensions(); ++i) {
    auto mn = Halide::Internal::as_const_int(param.min_constraint(i));
    auto ex = Halide::Internal::as_const_int(param.extent_constraint(i));
    internal_check(mn && ex, "halide_auto: " + ip.name() + " has no constant shape");
    box.emplace_back((int)*mn, (int)*ex);
  }
  return box;
}

std::vector<Halide::ImageParam> inputs(const ops::DwAlgorithm& a, const Problem&) {
  return {a.x, a.dy};
}
std::vector<Halide::ImageParam> inputs(const ops::DxAlgorithm& a, const Problem& p) {
  if (p.has_bias) return {a.filter, a.dy, a.bias};
  return {a.filter, a.dy};
}
std::vector<Halide::ImageParam> inputs(const ops::FwdAlgorithm& a, const Problem&) {
  return {a.x, a.filter};
}

template <class Algorithm>
class HalideAuto final : public Schedule<Algorithm> {
 public:
  explicit HalideAuto(const Plugin& pl) : pl_(pl) {}
  std::string name() const override { return pl_.entry; }
  bool by_name_only() const override { return true; }
  std::string why_not(const Problem&) const override { return load(pl_); }
  std::string describe(const Problem&, const Context& ctx) const override {
    return "Halide's " + std::string(pl_.name) + " autoscheduler (" + plugin_path(pl_) +
           "), parallelism " + std::to_string(ctx.threads) +
           (std::string(pl_.name) == "Adams2019" ? ", beam 1" : "") + ": for comparison only";
  }
  /** Their schedules come out of their own search; tbex's model does not price them (they are
   * never picked by "auto"). */
  Estimate estimate(const Problem&, const Context&) const override { return unmodeled(); }
  void apply(Algorithm& a, const Problem& p, const Context& ctx) const override {
    const std::string err = load(pl_);
    if (!err.empty()) throw UserError(code::kValue, "schedule", name() + ": " + err);
    for (Halide::ImageParam& ip : inputs(a, p)) ip.set_estimates(constrained_box(ip));
    a.out.set_estimates(constrained_box(a.out.output_buffer()));
    Halide::AutoschedulerParams params{pl_.name, {{"parallelism", std::to_string(ctx.threads)}}};
    // Adams2019's default beam search takes minutes and gigabytes even on a small grouped dW:
    // greedy search (beam 1) keeps its cost model but compiles in seconds.
    if (std::string(pl_.name) == "Adams2019") params.extra["beam_size"] = "1";
    Halide::Pipeline(a.out).apply_autoscheduler(ctx.target, params);
  }

 private:
  const Plugin& pl_;
};

template <class Algorithm>
const Schedule<Algorithm>* entry(HalideAutoscheduler which) {
  static const HalideAuto<Algorithm> all[] = {HalideAuto<Algorithm>(kPlugins[0]),
                                              HalideAuto<Algorithm>(kPlugins[1]),
                                              HalideAuto<Algorithm>(kPlugins[2])};
  return &all[(int)which];
}

}  // namespace

const DwSchedule* dw_halide_auto_schedule(HalideAutoscheduler which) {
  return entry<ops::DwAlgorithm>(which);
}
const DxSchedule* dx_halide_auto_schedule(HalideAutoscheduler which) {
  return entry<ops::DxAlgorithm>(which);
}
const FwdSchedule* fwd_halide_auto_schedule(HalideAutoscheduler which) {
  return entry<ops::FwdAlgorithm>(which);
}

}  // namespace tbex::sched
