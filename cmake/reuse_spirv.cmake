# One shader variant's SPIR-V: copied from another build's output when that file is newer
# than every input that decides its bytes, else compiled with the command given after "--".
# Called at build time (CMakeLists.txt, when MOETIER_SPIRV_DIR is set):
#   cmake -DPREBUILT=other/shaders/x.spv -DOUTPUT=shaders/x.spv -DINPUTS=a.comp|b.glsl|shaders.cmake
#         -P reuse_spirv.cmake -- glslc ARGS...
# Both builds run the same glslc from the build machine with the same flags (shaders.cmake),
# so an up-to-date file there holds the bytes this build's glslc would write.
set(command "")
set(after_dashes OFF)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_dashes)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after_dashes ON)
  endif()
endforeach()

set(fresh OFF)
if(EXISTS "${PREBUILT}")
  set(fresh ON)
  string(REPLACE "|" ";" inputs "${INPUTS}")
  foreach(input ${inputs})
    # IS_NEWER_THAN is also true when both times are equal: count a tie as stale.
    if("${input}" IS_NEWER_THAN "${PREBUILT}")
      set(fresh OFF)
    endif()
  endforeach()
endif()

if(fresh)
  file(COPY_FILE "${PREBUILT}" "${OUTPUT}")
  file(TOUCH "${OUTPUT}")  # the build tool compares its time with the inputs', not the source's
else()
  execute_process(COMMAND ${command} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "glslc failed (${rc}): ${command}")
  endif()
endif()
