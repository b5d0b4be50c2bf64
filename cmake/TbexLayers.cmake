# tbex's compiler is one static library per layer, in one direction (docs/data_flow.md):
#   runtime -> support -> frontend -> ops -> schedules -> lower -> codegen -> tune -> api
# Each layer links the one below it and compiles against an include directory of its own in the
# build tree that holds only its own and lower layers' directories and public headers (symbolic
# links), so an include that points upward does not compile. scripts/check_layers.py (make test)
# names such a line before the build does.

# Layer name -> the directory its sources and private headers live in.
set(TBEX_LAYER_support   compiler/src/support)
set(TBEX_LAYER_frontend  compiler/src/frontend)
set(TBEX_LAYER_ops       compiler/src/ops)
set(TBEX_LAYER_schedules schedules)
set(TBEX_LAYER_lower     compiler/src/lower)
set(TBEX_LAYER_codegen   compiler/src/codegen)
set(TBEX_LAYER_tune      compiler/src/tune)
set(TBEX_LAYER_api       compiler/src/api)
# Public headers (compiler/include/tbex) by the layer that implements them.
set(TBEX_PUBLIC_frontend problem.h)
set(TBEX_PUBLIC_lower    select.h)
set(TBEX_PUBLIC_codegen  kernel.h cache.h aot.h)
set(TBEX_PUBLIC_tune     tune.h)
set(TBEX_PUBLIC_api      conv_backward.h tbex.h)

set(TBEX_LAYERS_BELOW "")

# tbex_layer(NAME SOURCES <files...> [LIBS <private link libraries...>])
# Adds static library tbex_NAME over the previous layer (tbex_runtime for the first).
function(tbex_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;LIBS" ${ARGN})
  set(farm "${CMAKE_CURRENT_BINARY_DIR}/layers/${name}")
  file(REMOVE_RECURSE "${farm}")
  file(MAKE_DIRECTORY "${farm}/tbex")
  foreach(l IN LISTS TBEX_LAYERS_BELOW ITEMS ${name})
    get_filename_component(leaf "${TBEX_LAYER_${l}}" NAME)
    file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${TBEX_LAYER_${l}}" "${farm}/${leaf}" SYMBOLIC)
    foreach(h IN LISTS TBEX_PUBLIC_${l})
      file(CREATE_LINK "${PROJECT_SOURCE_DIR}/compiler/include/tbex/${h}" "${farm}/tbex/${h}" SYMBOLIC)
    endforeach()
  endforeach()
  add_library(tbex_${name} STATIC ${L_SOURCES})
  target_include_directories(tbex_${name} PRIVATE "${farm}")
  list(LENGTH TBEX_LAYERS_BELOW n)
  if(n EQUAL 0)
    target_link_libraries(tbex_${name} PUBLIC tbex::runtime)
  else()
    list(GET TBEX_LAYERS_BELOW -1 below)
    target_link_libraries(tbex_${name} PUBLIC tbex_${below})
  endif()
  if(L_LIBS)
    target_link_libraries(tbex_${name} PRIVATE ${L_LIBS})
  endif()
  target_compile_options(tbex_${name} PRIVATE -Wall -Wextra)
  set_target_properties(tbex_${name} PROPERTIES EXPORT_NAME layer_${name})
  set(TBEX_LAYERS_BELOW ${TBEX_LAYERS_BELOW} ${name} PARENT_SCOPE)
  set(TBEX_LAYER_TARGETS ${TBEX_LAYER_TARGETS} tbex_${name} PARENT_SCOPE)
endfunction()
