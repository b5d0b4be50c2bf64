/** AOT: lower a Problem for a chosen Halide target and write a kernel a program links without
 * tbex's compiler, Halide or LLVM.
 *
 * The Halide kernel NAME_halide is compiled without the Halide runtime; tbex's dense wrapper
 * (NAME_wrapper.c, compiled by the system C compiler) joins it in NAME.a / NAME.o. */
#include "tbex/aot.h"

#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "Halide.h"
#include "codegen/aot_files.h"
#include "codegen/batched.h"
#include "codegen/objects.h"
#include "codegen/cpp_source.h"
#include "lower/pipeline.h"
#include "support/compilers.h"
#include "support/files.h"
#include "support/process.h"
#include "tbex/errors.h"
#include "tbex/knobs.h"
#include "tbex/thread_pool.h"

#ifndef TBEX_HALIDE_INCLUDE_DIR
#error "TBEX_HALIDE_INCLUDE_DIR is defined by CMake (where HalideRuntime.h is)"
#endif

namespace fs = std::filesystem;

namespace tbex {
namespace {

using support::read_text;
using support::write_text;

const std::set<std::string> kEmitKinds{"static_library", "object", "header", "cpp"};

bool is_c_identifier(const std::string& s) {
  if (s.empty() || std::isdigit((unsigned char)s[0])) return false;
  for (char c : s)
    if (!std::isalnum((unsigned char)c) && c != '_') return false;
  return true;
}

Halide::Target parse_target(const std::string& s) {
  if (s == "host") return lower::host_target();
  user_check(Halide::Target::validate_target_string(s), code::kValue, "target",
             "'" + s + "' is not a Halide target (examples: host, x86-64-linux-avx2-fma-f16c)");
  return Halide::Target(s).with_feature(Halide::Target::LargeBuffers);
}

void check_options(const AotOptions& o) {
  user_check(is_c_identifier(o.name), code::kValue, "name",
             "'" + o.name + "' is not a C identifier (it names the kernel's function and files)");
  user_check(!o.out_dir.empty(), code::kValue, "out_dir", "no output directory given");
  for (const std::string& e : o.emit)
    user_check(kEmitKinds.count(e) > 0, code::kValue, "emit",
               "unknown output '" + e + "' (known: static_library, object, header, cpp)");
  if (std::string why = support::make_dirs(o.out_dir); !why.empty())
    throw UserError(code::kValue, "out_dir", why);
}

/** Runs the host C compiler (its output is quoted in the error). */
void run_cc(const std::vector<std::string>& args) {
  std::vector<std::string> argv = support::c_compiler();
  argv.insert(argv.end(), args.begin(), args.end());
  support::run_tool(argv, "CC", "building the kernel wrapper needs a C compiler: set TBEX_CC or CC");
}

std::string halide_include_dir() {
  if (std::string d = knobs::get_string("TBEX_HALIDE_INCLUDE_DIR"); !d.empty()) return d;
  return TBEX_HALIDE_INCLUDE_DIR;
}

bool wants(const AotOptions& o, const char* kind) {
  for (const std::string& e : o.emit)
    if (e == kind) return true;
  return false;
}

/** A private scratch directory inside out_dir, removed on scope exit. */
struct ScratchDir {
  std::string path;
  explicit ScratchDir(const std::string& out_dir, const std::string& name)
      : path(out_dir + "/." + name + ".tmp." + std::to_string(getpid())) {
    if (std::string why = support::make_dirs(path); !why.empty())
      throw UserError(code::kValue, "out_dir", why);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

/** Kernel object + wrapper object -> NAME.a and/or NAME.o. */
void build_objects(const lower::Lowered& l, const AotOptions& o,
                   const Halide::Target& kt, const std::string& wrapper_c,
                   std::vector<std::string>& files) {
  const Halide::Target host = Halide::get_host_target();
  user_check(kt.os == host.os && kt.arch == host.arch && kt.bits == host.bits, code::kValue, "target",
             "static_library and object outputs link a wrapper built by the host C compiler, so "
             "the target must be for this machine's OS and architecture (" + kt.to_string() +
                 " is not); emit header,cpp instead");
  ScratchDir tmp(o.out_dir, o.name);
  const std::string kernel_o = tmp.path + "/" + o.name + "_halide.o";
  const std::string wrapper_o = tmp.path + "/" + o.name + "_wrapper.o";
  Halide::Pipeline pipe = l.pipeline;
  codegen::write_object(kernel_o, codegen::object_bytes(pipe.compile_to_module(
                                      l.args, o.name + "_halide", l.target.with_feature(Halide::Target::NoRuntime))));
  run_cc({"-std=c99", "-O2", "-fPIC", "-I" + halide_include_dir(), "-c", wrapper_c, "-o", wrapper_o});
  if (wants(o, "static_library")) {
    const std::string a = o.out_dir + "/" + o.name + ".a";
    codegen::write_static_library({kernel_o, wrapper_o}, kt, a);
    files.push_back(a);
  }
  if (wants(o, "object")) {
    const std::string obj = o.out_dir + "/" + o.name + ".o";
    run_cc({"-r", "-nostdlib", kernel_o, wrapper_o, "-o", obj});
    files.push_back(obj);
  }
}

/** The outputs written so far, removed unless the whole set was written: a failed emit (a full
 * disk) leaves no partial kernel behind. */
struct OutputsOrNone {
  const std::vector<std::string>& files;
  bool complete = false;
  ~OutputsOrNone() {
    if (complete) return;
    for (const std::string& f : files) ::unlink(f.c_str());
  }
};

std::string manifest_path(const AotOptions& o) { return o.out_dir + "/" + o.name + ".manifest.json"; }

}  // namespace

std::vector<std::string> emit_aot(const Problem& problem, const AotOptions& o) {
  if (o.runtime_only) return emit_aot_runtime(o);
  check_options(o);
  user_check(!o.emit.empty(), code::kValue, "emit", "nothing to emit (give static_library, object, header or cpp)");
  const Halide::Target t = parse_target(o.target);
  const Halide::Target kt = t.with_feature(Halide::Target::NoRuntime);
  validate(problem);
  user_check(codegen::fits_one_kernel(problem), code::kRange, "shape",
             "an operand of " + problem.canonical() + " has more than 2^31-1 elements: the JIT "
             "runs such problems per batch slice, an AOT kernel cannot (emit a kernel for a "
             "slice of the batch instead)");
  codegen::AotBuildInfo info;
  info.name = o.name;
  info.target = kt.to_string();
  info.threads = num_threads();
  std::vector<std::string>& files = info.files;
  OutputsOrNone outputs{files};
  try {
    // The same decision the JIT takes for this request, threads and target (tuning database
    // entries included), so an AOT kernel is the kernel a JIT compile would have run.
    // With C++ source among the outputs, one decision serves it and the objects: the form
    // Halide's C backend can express (cpp_source_target).
    const Halide::Target ts = wants(o, "cpp") ? codegen::cpp_source_target(t) : t;
    const lower::Decision d =
        lower::select(problem, CompileOptions{o.schedule, o.variant}, info.threads, ts);
    lower::Lowered l = lower::lower(problem, d, info.threads, ts);
    const bool dots = l.variant.find("pair=2") != std::string::npos ||
                      l.variant.find("pair=3") != std::string::npos;
    user_check(!wants(o, "cpp") || !dots, code::kValue, "variant",
               "variant '" + l.variant + "' (bf16 dot products) cannot be emitted as C++ source: "
               "Halide's C backend has no bf16 type; use pair=1");
    info.schedule = l.schedule;
    info.variant = l.variant;
    info.selected_by = d.source;
    info.schedule_detail = l.schedule_detail;
    info.amx_tiles = l.amx_tiles;
    const bool objects = wants(o, "static_library") || wants(o, "object");
    std::string wrapper_c;
    if (objects || wants(o, "cpp")) {
      wrapper_c = o.out_dir + "/" + o.name + "_wrapper.c";
      write_text(wrapper_c, codegen::aot_wrapper_source(problem, info));
      files.push_back(wrapper_c);
    }
    if (objects) build_objects(l, o, kt, wrapper_c, files);
    if (wants(o, "header")) {
      const std::string h = o.out_dir + "/" + o.name + ".h";
      write_text(h, codegen::aot_header(problem, info));
      files.push_back(h);
    }
    if (wants(o, "cpp")) {
      for (const std::string& f : codegen::emit_cpp_source(l, o.name + "_halide", kt, o.out_dir, o.name))
        files.push_back(f);
      // The wrapper includes HalideRuntime.h (the runtime's C API, a plain header): ship it, so
      // the sources build where no Halide is installed.
      const std::string rt_h = o.out_dir + "/HalideRuntime.h";
      write_text(rt_h, read_text(halide_include_dir() + "/HalideRuntime.h"));
      files.push_back(rt_h);
    }
  } catch (const Halide::CompileError& e) {
    throw InternalError("Halide rejected the pipeline for " + problem.canonical() + ": " + e.what());
  } catch (const Halide::Error& e) {
    throw InternalError("Halide failed on " + problem.canonical() + ": " + e.what());
  }
  files.push_back(manifest_path(o));
  write_text(manifest_path(o), codegen::aot_manifest(&problem, info));
  outputs.complete = true;
  return files;
}

std::vector<std::string> emit_aot_runtime(const AotOptions& o) {
  check_options(o);
  const Halide::Target t = parse_target(o.target);
  codegen::AotBuildInfo info;
  info.name = o.name;
  info.target = t.to_string();
  const std::string a = o.out_dir + "/" + o.name + ".a", obj = o.out_dir + "/" + o.name + ".o";
  info.files = {a, obj, manifest_path(o)};
  OutputsOrNone outputs{info.files};
  try {
    codegen::write_object(obj, codegen::runtime_object_bytes(t));
    codegen::write_static_library({obj}, t, a);
  } catch (const Halide::Error& e) {
    throw InternalError("Halide failed to build its runtime for " + info.target + ": " + e.what());
  }
  write_text(manifest_path(o), codegen::aot_manifest(nullptr, info));
  outputs.complete = true;
  return info.files;
}

}  // namespace tbex
