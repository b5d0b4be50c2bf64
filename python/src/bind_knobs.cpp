/** The knob registry (tbex/knobs.h), the log topics and the in-process kernel cache as _C sees
 * them: tbex.knobs builds its table and setters from these. */
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "tbex/conv_backward.h"
#include "tbex/knobs.h"
#include "tbex/log.h"
#include "tbex/version.h"

namespace pyb = pybind11;

namespace tbex::py {

namespace {

const char* kind_name(knobs::Kind k) {
  switch (k) {
    case knobs::Kind::kInt: return "int";
    case knobs::Kind::kBool: return "bool";
    case knobs::Kind::kString: return "str";
    case knobs::Kind::kPath: return "path";
    case knobs::Kind::kList: return "list";
  }
  return "?";
}

pyb::dict stats_dict(const KernelCacheStats& s) {
  return pyb::dict(pyb::arg("hits") = s.hits, pyb::arg("misses") = s.misses,
                   pyb::arg("evictions") = s.evictions, pyb::arg("size") = s.size,
                   pyb::arg("capacity") = s.capacity);
}

}  // namespace

void define_knobs(pyb::module_& m) {
  m.attr("__version__") = TBEX_VERSION_STRING;
  m.def("knobs", [] {
    pyb::list out;
    for (const knobs::Knob& k : knobs::all())
      out.append(pyb::dict(pyb::arg("name") = k.name, pyb::arg("kind") = kind_name(k.kind),
                           pyb::arg("default") = k.default_value, pyb::arg("doc") = k.doc,
                           pyb::arg("setter") = k.setter,
                           pyb::arg("affects_codegen") = k.affects_codegen));
    return out;
  }, "the knob registry, in documentation order");
  m.def("knob_get", &knobs::get_string, pyb::arg("name"),
        "a knob's value as text: override, else environment, else default");
  m.def("knob_is_set", &knobs::is_set, pyb::arg("name"));
  m.def("knob_set", &knobs::set, pyb::arg("name"), pyb::arg("value"),
        "override a knob for this process (wins over the environment)");
  m.def("knob_unset", &knobs::unset, pyb::arg("name"));
  m.def("knobs_codegen_key", &knobs::codegen_key);
  m.def("log_topics", &log::topics);
  m.def("kernel_cache_stats", [] { return stats_dict(kernel_cache_stats()); },
        "the in-process kernel cache: hits, misses, evictions, size, capacity");
  m.def("conv_plan_cache_stats", [] { return stats_dict(ConvBackwardPlan::cache_stats()); },
        "convolution_backward's plan cache (same policy and capacity as the kernel cache)");
  m.def("select_schedule", [](const Problem& p, const std::string& schedule,
                              const std::string& variant) {
    Selection s;
    {
      pyb::gil_scoped_release nogil;
      s = select_schedule(p, CompileOptions{schedule, variant});
    }
    return pyb::dict(pyb::arg("schedule") = s.schedule, pyb::arg("variant") = s.variant,
                     pyb::arg("source") = s.source);
  }, pyb::arg("problem"), pyb::arg("schedule") = "auto", pyb::arg("variant") = "",
     "the schedule and tile variant compile() would use, and why, without compiling");
}

}  // namespace tbex::py
