"""tbex: Huawei TBE's conv3d backprop DSL, compiled for CPUs.

    from tbex import tvm, dsl
    dedw = dsl.conv3d_backprop_filter(x, out_backprop, filter_size, para_dict)
"""
from .errors import CacheWarning, PerformanceWarning, UserError
from . import _C

_C._set_user_error_type(UserError)
_C._set_warning_types(CacheWarning, PerformanceWarning)  # C++ warnings: `warnings` entries
_C._check_log()  # a TBEX_LOG with an unknown topic (or "help") is answered at import

from . import aot, ascendc, dsl, knobs, layout, tvm  # noqa: E402
from .knobs import num_threads, set_num_threads  # noqa: E402
from .conv import convolution_backward  # noqa: E402

import os as _os  # noqa: E402

__version__ = "0.1.0"
#: The prefix holding tbex's CMake package (``find_package(tbex)``: tbex::runtime,
#: tbex::compiler, tbex::aclnn, tbex::tbexc, tbex_add_kernel), its headers and libraries:
#: ``cmake -DCMAKE_PREFIX_PATH=$(python -c "import tbex; print(tbex.cmake_prefix_path)")``.
cmake_prefix_path = _os.path.dirname(_os.path.abspath(__file__))
__all__ = ["tvm", "dsl", "layout", "knobs", "aot", "ascendc", "UserError", "CacheWarning", "PerformanceWarning", "set_num_threads", "num_threads",
           "convolution_backward"]
