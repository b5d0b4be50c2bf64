/** The host's machine calibration (schedules/calibrate.h) and the cost model's inputs from it,
 * for `python -m tbex machine`. */
#include <pybind11/pybind11.h>
#include <unistd.h>

#include "bindings.h"
#include "schedules/calibrate.h"
#include "schedules/cost_model.h"
#include "tbex/knobs.h"

namespace pyb = pybind11;

namespace tbex::py {

void define_machine(pyb::module_& m) {
  m.def(
      "machine",
      [](bool remeasure) {
        pyb::dict out;
        const std::string path = sched::calibration_path();
        const bool enabled = knobs::get_bool("TBEX_CALIBRATE");
        out["path"] = path;
        out["enabled"] = enabled;
        out["key"] = sched::host_key();
        if (enabled) {
          // Measured at a busy moment, the stored rates are low: measuring again replaces them.
          // The process's own calibration, so the model's inputs below are of the same suite
          // (one that is not stored would otherwise run again for them).
          bool measured = false;
          const sched::Calibration* c = sched::host_calibration(remeasure, &measured);
          out["measured_now"] = measured;
          out["keeps_calibration"] = sched::keeps_calibration(*c);
          out["calibration"] = json::to_text(sched::to_json(*c));
        }
        const sched::Machine mm = sched::Machine::of(Halide::get_host_target());
        json::Value model = {{"calibrated", mm.calibrated},
                             {"lanes", mm.lanes},
                             {"vregs", mm.vregs},
                             {"ghz", mm.ghz},
                             {"fma_pipes", mm.fma_pipes},
                             {"fma_latency", mm.fma_latency},
                             {"load_pipes", mm.load_pipes},
                             {"l1", mm.l1},
                             {"l2", mm.l2},
                             {"l3", mm.l3},
                             {"l2_bw", mm.l2_bw},
                             {"l3_bw", mm.l3_bw},
                             {"dram_bw", mm.dram_bw},
                             {"l3_bw_mt", mm.l3_bw_mt},
                             {"dram_bw_mt", mm.dram_bw_mt},
                             {"fork_cycles", mm.fork_cycles},
                             {"tile_multiply_cycles", mm.tile_multiply_cycles},
                             {"dot_pipes", mm.dot_pipes},
                             {"dot_latency", mm.dot_latency},
                             {"folded_fma_pipes", mm.folded_fma_pipes},
                             {"register_broadcast_cycles", mm.register_broadcast_cycles},
                             {"dram_run_start", mm.dram_run_start}};
        out["model"] = json::to_text(model);
        return out;
      },
      pyb::arg("remeasure") = false,
      "the host's calibration (measured now when machine.json is missing, corrupt or another "
      "machine's, or remeasure) and the cost model's inputs for the host target; JSON texts under "
      "'calibration' and 'model'");
  m.def(
      "host_cache",
      [](int level) {
        const sched::CacheInfo c = sched::host_cache(level);
        return pyb::make_tuple(c.bytes, c.sharing);
      },
      pyb::arg("level"),
      "(bytes, cpus sharing it) of the host's data cache at `level` as the cost model reads it "
      "(sysfs, else sysconf); bytes 0 where neither tells");
}

}  // namespace tbex::py
