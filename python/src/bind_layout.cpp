/** tbex._C.layout: NCDHW <-> 6HD and OIDHW <-> FRACTAL_Z_3D on numpy arrays. */
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "tbex/errors.h"
#include "tbex/group_dict.h"
#include "tbex/layout.h"

namespace pyb = pybind11;

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + (s.size() == 1 ? ",)" : ")");
}

std::vector<int64_t> shape_of(const pyb::array& a) {
  return std::vector<int64_t>(a.shape(), a.shape() + a.ndim());
}

/** C-contiguous, aligned array with 2- or 4-byte elements and `ndim` dims. */
pyb::array prepare(pyb::array a, pyb::ssize_t ndim, const char* param, const char* layout) {
  const pyb::ssize_t isz = a.itemsize();
  if (isz != 2 && isz != 4) {
    throw tbex::UserError(tbex::code::kValue, param,
                          "element size must be 2 or 4 bytes (float16, bfloat16, float32), got "
                          "dtype " + std::string(pyb::str(a.dtype())) + " with itemsize " +
                              std::to_string(isz));
  }
  if (a.ndim() != ndim) {
    throw tbex::UserError(tbex::code::kRank, param,
                          "expected a " + std::to_string(ndim) + "-d " + layout +
                              " array, got shape " + shape_str(shape_of(a)));
  }
  constexpr int kNeed = pyb::array::c_style | pyb::detail::npy_api::NPY_ARRAY_ALIGNED_;
  if ((a.flags() & kNeed) != kNeed) {
    a = pyb::module_::import("numpy").attr("ascontiguousarray")(a).cast<pyb::array>();
    if ((a.flags() & kNeed) != kNeed) a = pyb::array(a.attr("copy")());  // still unaligned
  }
  return a;
}

tbex::Dims5 to_dims5(const pyb::handle& seq, const char* param) {
  const std::vector<int64_t> v = tbex::py::to_ints(seq, param);
  if (v.size() != 5) {
    throw tbex::UserError(tbex::code::kListLength, param,
                          "should be a 5d list, got " + tbex::list_str(v));
  }
  return {v[0], v[1], v[2], v[3], v[4]};
}

tbex::Dims5 dims5_of(const pyb::array& a) {
  return {a.shape(0), a.shape(1), a.shape(2), a.shape(3), a.shape(4)};
}

pyb::tuple to_tuple(const std::vector<int64_t>& s) {
  pyb::tuple t(s.size());
  for (size_t i = 0; i < s.size(); ++i) t[i] = pyb::int_(s[i]);
  return t;
}

pyb::array np_ncdhw_to_6hd(pyb::array a) {
  a = prepare(a, 5, "a", "NCDHW");
  const tbex::Dims5 dims = dims5_of(a);
  pyb::array out(a.dtype(), tbex::shape_6hd(dims));
  const void* src = a.data();
  void* dst = out.mutable_data();
  const size_t isz = static_cast<size_t>(a.itemsize());
  {
    pyb::gil_scoped_release nogil;
    tbex::ncdhw_to_6hd(src, dst, dims, isz);
  }
  return out;
}

pyb::array np_ncdhw_from_6hd(pyb::array a6, int64_t c) {
  a6 = prepare(a6, 6, "a6", "6HD (N, D, C1, H, W, 16)");
  const std::vector<int64_t> s = shape_of(a6);
  if (s[5] != tbex::kC0) {
    throw tbex::UserError("E62511", "a6",
                          "C0 (last dim) must be 16, got shape " + shape_str(s));
  }
  if (c <= 0 || (c - 1) / tbex::kC0 + 1 != s[2]) {
    throw tbex::UserError(tbex::code::kValue, "c",
                          "channel count c=" + std::to_string(c) + " does not match C1=" +
                              std::to_string(s[2]) + " of 6HD shape " + shape_str(s) +
                              " (need ceil(c/16) == C1)");
  }
  const tbex::Dims5 dims = {s[0], c, s[1], s[3], s[4]};
  tbex::shape_6hd(dims);  // validates before allocating
  pyb::array out(a6.dtype(), std::vector<int64_t>(dims.begin(), dims.end()));
  const void* src = a6.data();
  void* dst = out.mutable_data();
  const size_t isz = static_cast<size_t>(a6.itemsize());
  {
    pyb::gil_scoped_release nogil;
    tbex::ncdhw_from_6hd(src, dst, dims, isz);
  }
  return out;
}

pyb::array np_oidhw_to_fz3d(pyb::array w, int64_t groups) {
  w = prepare(w, 5, "w", "OIDHW [Cout, Cin/groups, Kd, Kh, Kw]");
  const tbex::Dims5 dims = dims5_of(w);
  pyb::array out(w.dtype(), tbex::shape_fz3d(dims, groups));
  const void* src = w.data();
  void* dst = out.mutable_data();
  const size_t isz = static_cast<size_t>(w.itemsize());
  {
    pyb::gil_scoped_release nogil;
    tbex::oidhw_to_fz3d(src, dst, dims, groups, isz);
  }
  return out;
}

pyb::array np_oidhw_from_fz3d(pyb::array fz, const pyb::object& oidhw_shape, int64_t groups) {
  fz = prepare(fz, 4, "fz", "FRACTAL_Z_3D");
  const tbex::Dims5 dims = to_dims5(oidhw_shape, "oidhw_shape");
  const std::vector<int64_t> want = tbex::shape_fz3d(dims, groups);
  const std::vector<int64_t> got = shape_of(fz);
  if (got != want) {
    throw tbex::UserError(tbex::code::kValue, "fz",
                          "shape " + shape_str(got) + " does not match the FRACTAL_Z_3D shape " +
                              shape_str(want) + " of oidhw_shape=" +
                              shape_str({dims.begin(), dims.end()}) +
                              ", groups=" + std::to_string(groups));
  }
  pyb::array out(fz.dtype(), std::vector<int64_t>(dims.begin(), dims.end()));
  const void* src = fz.data();
  void* dst = out.mutable_data();
  const size_t isz = static_cast<size_t>(fz.itemsize());
  {
    pyb::gil_scoped_release nogil;
    tbex::oidhw_from_fz3d(src, dst, dims, groups, isz);
  }
  return out;
}

}  // namespace

namespace tbex::py {

void define_layout(pybind11::module_& m) {
  pyb::module_ l = m.def_submodule(
      "layout", "Converters between NCDHW/OIDHW and TBE's 6HD/FRACTAL_Z_3D layouts.");
  using namespace pybind11::literals;

  l.def("shape_6hd",
        [](const pyb::object& ncdhw) { return to_tuple(tbex::shape_6hd(to_dims5(ncdhw, "ncdhw"))); },
        "ncdhw"_a, "6HD shape (N, D, C1, H, W, 16) of an NCDHW shape.");
  l.def("shape_fz3d",
        [](const pyb::object& oidhw, int64_t groups) {
          return to_tuple(tbex::shape_fz3d(to_dims5(oidhw, "oidhw"), groups));
        },
        "oidhw"_a, "groups"_a = 1,
        "FRACTAL_Z_3D shape (real_g*Kd*cin1_g*Kh*Kw, cout_g/16, 16, 16) of OIDHW weights.");
  l.def("ncdhw_to_6hd", &np_ncdhw_to_6hd, "a"_a,
        "NCDHW array -> new 6HD (N, D, C1, H, W, 16) array of the same dtype; padding lanes 0.");
  l.def("ncdhw_from_6hd", &np_ncdhw_from_6hd, "a6"_a, "c"_a,
        "6HD array -> new NCDHW array with c channels (padding lanes dropped).");
  l.def("oidhw_to_fz3d", &np_oidhw_to_fz3d, "w"_a, "groups"_a = 1,
        "OIDHW weights [Cout, Cin/groups, Kd, Kh, Kw] -> new grouped FRACTAL_Z_3D array.");
  l.def("oidhw_from_fz3d", &np_oidhw_from_fz3d, "fz"_a, "oidhw_shape"_a, "groups"_a = 1,
        "FRACTAL_Z_3D array -> new OIDHW array of shape oidhw_shape.");
}

}  // namespace tbex::py
