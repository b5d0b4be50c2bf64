/** tbex._C AOT entry points: the tbexc command line (python -m tbex aot) and emit_aot for
 * dsl.build(config={"output_dir": ...}). */
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sstream>
#include <tuple>

#include "bindings.h"
#include "tbex/aot.h"

namespace pyb = pybind11;

namespace tbex::py {

void define_aot(pyb::module_& m) {
  m.def(
      "aot_main",
      [](const std::vector<std::string>& args, const std::string& prog) {
        std::ostringstream out, err;
        int rc;
        {
          pyb::gil_scoped_release nogil;
          rc = aot_main(args, out, err, prog);
        }
        return std::make_tuple(rc, out.str(), err.str());
      },
      pyb::arg("args"), pyb::arg("prog") = "tbexc",
      "tbexc's command line: (exit status, stdout, stderr).");
  m.def(
      "emit_aot",
      [](const Problem& p, const std::string& name, const std::string& out_dir,
         const std::vector<std::string>& emit, const std::string& target,
         const std::string& schedule, const std::string& variant) {
        AotOptions o;
        o.name = name;
        o.out_dir = out_dir;
        o.emit = emit;
        o.target = target;
        o.schedule = schedule;
        o.variant = variant;
        pyb::gil_scoped_release nogil;
        return emit_aot(p, o);
      },
      pyb::arg("problem"), pyb::arg("name"), pyb::arg("out_dir"), pyb::arg("emit"),
      pyb::arg("target") = "host", pyb::arg("schedule") = "auto", pyb::arg("variant") = "");
  m.def(
      "emit_aot_runtime",
      [](const std::string& name, const std::string& out_dir, const std::string& target) {
        AotOptions o;
        o.name = name;
        o.out_dir = out_dir;
        o.target = target;
        o.runtime_only = true;
        pyb::gil_scoped_release nogil;
        return emit_aot_runtime(o);
      },
      pyb::arg("name"), pyb::arg("out_dir"), pyb::arg("target") = "host");
}

}  // namespace tbex::py
