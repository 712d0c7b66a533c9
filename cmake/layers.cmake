# One static library per top-level folder of src/ (a "layer"), linked to exactly the layers
# it knows about. moetier_layer(NAME DEPS ...) globs src/NAME/**.cpp into moetier_NAME and
# records NAME:DEPS; moetier_check_layers() then adds a step every layer library depends on
# that fails the build when a file of src/NAME includes a header of a layer not in DEPS, or
# when DEPS names a layer none of its files includes (the table stays exact). The table is
# drawn in docs/architecture.md ("Layers").

# moetier_layer(<name> [DEPS <layer>...] [EXCLUDE_REGEX <regex>])
function(moetier_layer name)
  cmake_parse_arguments(L "" "EXCLUDE_REGEX" "DEPS" ${ARGN})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${name}/*.cpp)
  if(L_EXCLUDE_REGEX)
    list(FILTER sources EXCLUDE REGEX "${L_EXCLUDE_REGEX}")
  endif()
  add_library(moetier_${name} STATIC ${sources})
  target_include_directories(moetier_${name} PUBLIC ${CMAKE_SOURCE_DIR}/src)
  foreach(dep ${L_DEPS})
    target_link_libraries(moetier_${name} PUBLIC moetier_${dep})
  endforeach()
  string(REPLACE ";" "," deps_text "${L_DEPS}")
  set_property(GLOBAL APPEND PROPERTY MOETIER_LAYER_TABLE "${name}=${deps_text}")
  set_property(GLOBAL APPEND PROPERTY MOETIER_LAYERS "${name}")
endfunction()

function(moetier_check_layers)
  get_property(table GLOBAL PROPERTY MOETIER_LAYER_TABLE)
  get_property(layers GLOBAL PROPERTY MOETIER_LAYERS)
  set(table_file "${CMAKE_BINARY_DIR}/generated/layers.txt")
  string(REPLACE ";" "\n" table_text "${table}")
  file(WRITE "${table_file}.tmp" "${table_text}\n")
  file(COPY_FILE "${table_file}.tmp" "${table_file}" ONLY_IF_DIFFERENT)
  file(GLOB_RECURSE headers_and_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/*.h ${CMAKE_SOURCE_DIR}/src/*.cpp)
  set(stamp "${CMAKE_BINARY_DIR}/generated/layers.stamp")
  add_custom_command(OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} "-DTABLE=${table_file}" "-DSRC=${CMAKE_SOURCE_DIR}/src" "-DSTAMP=${stamp}"
            -P ${CMAKE_SOURCE_DIR}/cmake/check_layers.cmake
    DEPENDS ${headers_and_sources} ${table_file} ${CMAKE_SOURCE_DIR}/cmake/check_layers.cmake
    COMMENT "checking that every layer includes only the layers it knows about" VERBATIM)
  add_custom_target(moetier_layering DEPENDS ${stamp})
  foreach(layer ${layers})
    add_dependencies(moetier_${layer} moetier_layering)
  endforeach()
endfunction()
