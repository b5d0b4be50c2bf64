/** The tbexc command line (also `python -m tbex aot`): a TBE call described by a JSON file and/or
 * flags -> the frontend's make_*_problem -> emit_aot. */
#include <fstream>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>

#include "support/json.h"
#include "tbex/aot.h"
#include "tbex/errors.h"

namespace tbex {
namespace {

const char kUsage[] =
    "usage: tbexc --op conv3d_backprop_filter|conv3d_backprop_input --name NAME --out DIR\n"
    "             [--emit static_library,object,header,cpp] [--target host|<halide target>]\n"
    "             [--schedule auto|NAME [--variant V]] [--json FILE]\n"
    "             [--x SHAPE:DTYPE | --filter SHAPE:DTYPE] --out-backprop SHAPE:DTYPE\n"
    "             --filter-size A,B,.. [--input-size N,D,H,W,C] [--strides ..] [--pads ..]\n"
    "             [--dilations ..] [--res-dtype DTYPE] [--groups G] [--group-dict k=v,..]\n"
    "             [--kernel-name NAME] [--tensor-bias SHAPE:DTYPE]\n"
    "       tbexc --runtime-only --name NAME --out DIR [--target ...]\n"
    "The JSON file holds the arguments of the dsl call: {\"op\", \"x\" | \"filter\": {\"shape\",\n"
    "\"dtype\"}, \"out_backprop\", \"filter_size\", \"input_size\", \"para_dict\", \"tensor_bias\"};\n"
    "flags override it. SHAPE is comma-separated, e.g. --x 16,8,1,72,72,16:float16.\n";

struct TensorSpec {
  std::vector<int64_t> shape;
  std::string dtype;
};

/** Everything a dsl call takes, gathered from the JSON file and the flags. */
struct CallSpec {
  std::string op;
  std::optional<TensorSpec> x, filter, dy, bias;
  std::optional<std::vector<int64_t>> filter_size, input_size;
  ParaDict para;
};

std::vector<int64_t> parse_ints(const std::string& s, const std::string& param) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::out_of_range&) {
      throw UserError(code::kRange, param, "must be in range [-2^63, 2^63-1], got " + item);
    } catch (const std::exception&) {
      used = 0;
    }
    user_check(used == item.size() && !item.empty(), code::kType, param.c_str(),
               "expected comma-separated integers, got '" + s + "'");
    out.push_back(v);
  }
  user_check(!out.empty(), code::kType, param.c_str(), "expected comma-separated integers, got '" + s + "'");
  return out;
}

TensorSpec parse_tensor(const std::string& s, const std::string& param) {
  const size_t colon = s.rfind(':');
  user_check(colon != std::string::npos, code::kValue, param.c_str(),
             "expected SHAPE:DTYPE such as 16,8,1,72,72,16:float16, got '" + s + "'");
  return {parse_ints(s.substr(0, colon), param), s.substr(colon + 1)};
}

TensorSpec tensor_from_json(const json::Value& v, const std::string& param) {
  user_check(v.is_object(), code::kType, param.c_str(), "expected {\"shape\": [...], \"dtype\": \"...\"}");
  const auto dtype = v.find("dtype");
  return {json::as_ints(json::member(v, "shape", param), param),
          dtype != v.end() ? json::as_string(*dtype, param) : std::string("float16")};
}

void para_from_json(const json::Value& d, CallSpec& c) {
  user_check(d.is_object(), code::kType, "para_dict", "expected an object");
  for (const auto& [key, v] : d.items()) {
    // Keys of either op: tensor_bias on dW is refused with the op's other operands below.
    check_para_dict_key(key, OpKind::kBackpropInput);
    if (v.is_null()) continue;
    if (key == "strides") c.para.strides = json::as_ints(v, "strides");
    else if (key == "pads") c.para.pads = json::as_ints(v, "pads");
    else if (key == "dilations") c.para.dilations = json::as_ints(v, "dilations");
    else if (key == "res_dtype") c.para.res_dtype = json::as_string(v, "res_dtype");
    else if (key == "kernel_name") c.para.kernel_name = json::as_string(v, "kernel_name");
    else if (key == "groups") c.para.groups = json::as_int(v, "groups");
    else if (key == "tensor_bias") c.bias = tensor_from_json(v, "tensor_bias");
    else if (key == "group_dict") {
      user_check(v.is_object(), code::kType, "group_dict", "expected an object");
      std::map<std::string, int64_t> gd;
      for (const auto& [gk, gv] : v.items()) gd[gk] = json::as_int(gv, "group_dict['" + gk + "']");
      c.para.group_dict = gd;
    }
    // The rest are TBE's pass-through attributes (para_dict_keys): no effect on the math.
  }
}

void call_from_json(const std::string& path, CallSpec& c) {
  std::ifstream f(path);
  user_check(f.good(), code::kValue, "json", "cannot read '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  const json::Value doc = json::parse(ss.str(), "json");
  user_check(doc.is_object(), code::kValue, "json", "expected an object");
  for (const auto& [key, v] : doc.items()) {
    if (key == "op") c.op = json::as_string(v, "op");
    else if (key == "x") c.x = tensor_from_json(v, "x");
    else if (key == "filter") c.filter = tensor_from_json(v, "filter");
    else if (key == "out_backprop") c.dy = tensor_from_json(v, "out_backprop");
    else if (key == "tensor_bias") c.bias = tensor_from_json(v, "tensor_bias");
    else if (key == "filter_size") c.filter_size = json::as_ints(v, "filter_size");
    else if (key == "input_size") c.input_size = json::as_ints(v, "input_size");
    else if (key == "para_dict") para_from_json(v, c);
    else throw UserError(code::kValue, "json", "unknown key '" + key + "'");
  }
}

std::map<std::string, int64_t> parse_group_dict(const std::string& s) {
  std::map<std::string, int64_t> gd;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t eq = item.find('=');
    user_check(eq != std::string::npos, code::kValue, "group_dict", "expected key=value,..., got '" + s + "'");
    const std::string key = item.substr(0, eq);
    gd[key] = parse_ints(item.substr(eq + 1), "group_dict['" + key + "']")[0];
  }
  return gd;
}

template <class T>
const T& required(const std::optional<T>& v, const char* param, const std::string& op) {
  user_check(v.has_value(), code::kValue, param, std::string("is required for ") + op);
  return *v;
}

Problem make_problem(const CallSpec& c) {
  user_check(c.op == "conv3d_backprop_filter" || c.op == "conv3d_backprop_input", code::kValue, "op",
             "unknown op '" + c.op + "' (known: conv3d_backprop_filter, conv3d_backprop_input)");
  const TensorSpec& dy = required(c.dy, "out_backprop", c.op);
  if (c.op == "conv3d_backprop_filter") {
    user_check(!c.filter && !c.input_size && !c.bias, code::kValue, "op",
               "conv3d_backprop_filter takes x, out_backprop and filter_size (not filter, "
               "input_size or tensor_bias)");
    const TensorSpec& x = required(c.x, "x", c.op);
    return make_backprop_filter_problem(x.shape, parse_dtype(x.dtype, "x"), dy.shape,
                                        parse_dtype(dy.dtype, "out_backprop"),
                                        required(c.filter_size, "filter_size", c.op), c.para);
  }
  user_check(!c.x, code::kValue, "op", "conv3d_backprop_input takes filter, not x");
  const TensorSpec& f = required(c.filter, "filter", c.op);
  return make_backprop_input_problem(
      f.shape, parse_dtype(f.dtype, "filter"), dy.shape, parse_dtype(dy.dtype, "out_backprop"),
      required(c.filter_size, "filter_size", c.op), required(c.input_size, "input_size", c.op),
      c.para, c.bias ? c.bias->shape : std::vector<int64_t>{},
      c.bias ? parse_dtype(c.bias->dtype, "tensor_bias") : DType::kFloat32);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

int run(const std::vector<std::string>& args, std::ostream& out) {
  AotOptions opt;
  CallSpec c;
  std::optional<std::string> json_file;
  std::map<std::string, std::string> flags;  // problem flags, applied after the JSON file
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i], value;
    if (a == "-h" || a == "--help") {
      out << kUsage;
      return 0;
    }
    user_check(a.rfind("--", 0) == 0, code::kValue, "argv", "unexpected argument '" + a + "'\n" + kUsage);
    a = a.substr(2);
    if (a == "runtime-only") {
      opt.runtime_only = true;
      continue;
    }
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else {
      user_check(i + 1 < args.size(), code::kValue, a.c_str(), "--" + a + " needs a value");
      value = args[++i];
    }
    if (a == "name") opt.name = value;
    else if (a == "out") opt.out_dir = value;
    else if (a == "emit") opt.emit = split(value);
    else if (a == "target") opt.target = value;
    else if (a == "schedule") opt.schedule = value;
    else if (a == "variant") opt.variant = value;
    else if (a == "json") json_file = value;
    else flags[a] = value;
  }
  if (opt.runtime_only) {
    user_check(flags.empty() && !json_file, code::kValue, "runtime-only",
               "--runtime-only takes only --name, --out and --target");
    for (const std::string& f : emit_aot_runtime(opt)) out << f << "\n";
    return 0;
  }
  if (json_file) call_from_json(*json_file, c);
  for (const auto& [k, v] : flags) {
    if (k == "op") c.op = v;
    else if (k == "x") c.x = parse_tensor(v, "x");
    else if (k == "filter") c.filter = parse_tensor(v, "filter");
    else if (k == "out-backprop") c.dy = parse_tensor(v, "out_backprop");
    else if (k == "tensor-bias") c.bias = parse_tensor(v, "tensor_bias");
    else if (k == "filter-size") c.filter_size = parse_ints(v, "filter_size");
    else if (k == "input-size") c.input_size = parse_ints(v, "input_size");
    else if (k == "strides") c.para.strides = parse_ints(v, "strides");
    else if (k == "pads") c.para.pads = parse_ints(v, "pads");
    else if (k == "dilations") c.para.dilations = parse_ints(v, "dilations");
    else if (k == "res-dtype") c.para.res_dtype = v;
    else if (k == "groups") c.para.groups = parse_ints(v, "groups")[0];
    else if (k == "group-dict") c.para.group_dict = parse_group_dict(v);
    else if (k == "kernel-name") c.para.kernel_name = v;
    else throw UserError(code::kValue, k, "unknown option --" + k + "\n" + kUsage);
  }
  user_check(!c.op.empty(), code::kValue, "op", "--op (or \"op\" in --json) is required");
  if (opt.name.empty()) opt.name = c.para.kernel_name;
  user_check(!opt.name.empty(), code::kValue, "name", "--name (or para_dict kernel_name) is required");
  if (c.para.kernel_name.empty()) c.para.kernel_name = opt.name;
  user_check(!opt.out_dir.empty(), code::kValue, "out", "--out DIR is required");
  const Problem p = make_problem(c);
  for (const std::string& f : emit_aot(p, opt)) out << f << "\n";
  return 0;
}

}  // namespace

int aot_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
             const std::string& prog) {
  // The usage text names the command the user typed (tbexc, python -m tbex aot).
  auto named = [&](std::string text) {
    for (size_t at = text.find("tbexc"); at != std::string::npos; at = text.find("tbexc", at + prog.size()))
      text.replace(at, 5, prog);
    return text;
  };
  std::ostringstream o;
  try {
    const int rc = run(args, o);
    out << named(o.str());
    return rc;
  } catch (const UserError& e) {
    out << o.str();
    err << prog << ": error: " << named(e.what()) << "\n";
    return 2;
  } catch (const std::exception& e) {
    out << o.str();
    err << prog << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace tbex
