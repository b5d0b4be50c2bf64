/** Measured tuning and the tuning database (tbex/tune.h), as dicts. */
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "tbex/kernel.h"
#include "tbex/tune.h"

namespace pyb = pybind11;

namespace tbex::py {

void define_tune(pyb::module_& m) {
  m.def(
      "tune",
      [](const Problem& p, int max_candidates, double seconds, bool store,
         const std::vector<std::string>& schedules) {
        TuneResult r;
        {
          pyb::gil_scoped_release nogil;
          r = tune(p, TuneOptions{max_candidates, seconds, store, schedules});
        }
        pyb::list cands;
        for (const auto& c : r.candidates)
          cands.append(pyb::dict(pyb::arg("schedule") = c.schedule, pyb::arg("variant") = c.variant,
                                 pyb::arg("ms") = c.ms, pyb::arg("error") = c.error));
        return pyb::dict(pyb::arg("schedule") = r.schedule, pyb::arg("variant") = r.variant,
                         pyb::arg("ms") = r.ms, pyb::arg("default_ms") = r.default_ms,
                         pyb::arg("candidates") = cands);
      },
      pyb::arg("problem"), pyb::arg("max_candidates") = TuneOptions{}.max_candidates,
      pyb::arg("seconds") = TuneOptions{}.seconds, pyb::arg("store") = true,
      pyb::arg("schedules") = std::vector<std::string>{});
  m.def("find_tuning", [](const Problem& p) -> pyb::object {
    TuningEntry e;
    if (!find_tuning(p, e)) return pyb::none();
    return pyb::dict(pyb::arg("schedule") = e.schedule, pyb::arg("variant") = e.variant,
                     pyb::arg("ms") = e.ms, pyb::arg("date") = e.date,
                     pyb::arg("threads") = e.threads, pyb::arg("target") = e.target);
  });
  m.def("tuning_db_path", &tuning_db_path);
  m.def("schedule_candidates", &schedule_candidates, pyb::arg("problem"), pyb::arg("schedule"));
  m.def(
      "rank_schedules",
      [](const Problem& p) {
        pyb::list out;
        for (const RankedChoice& r : rank_schedules(p))
          out.append(pyb::dict(pyb::arg("schedule") = r.schedule, pyb::arg("variant") = r.variant,
                               pyb::arg("predicted_ms") = r.ms, pyb::arg("detail") = r.detail));
        return out;
      },
      pyb::arg("problem"));
}

}  // namespace tbex::py
