cmake_minimum_required(VERSION 3.22)
# Fails (FATAL_ERROR, listing file:line) when a file under ROOT/sim/ outside the front ends
# includes a front end's header: sim/cli/ and sim/server/ are the front ends (docs/design.md),
# sim/emulate/ is the OpenAI-compatible emulator's front end. Run as
#   cmake -DROOT=<checkout> -P tests/layering_check.cmake
# Library code that needs something a front end has moves it into the library (sim/scenario/).
if(NOT ROOT)
  message(FATAL_ERROR "layering_check.cmake: give -DROOT=<checkout>")
endif()
set(front_ends cli server emulate)
file(GLOB_RECURSE sources RELATIVE ${ROOT} ${ROOT}/sim/*.h ${ROOT}/sim/*.cc)
set(violations "")
foreach(f ${sources})
  string(REGEX MATCH "^sim/([^/]+)/" _ ${f})
  if(CMAKE_MATCH_1 IN_LIST front_ends)
    continue()
  endif()
  file(STRINGS ${ROOT}/${f} lines)
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*[\"<](sim/(cli|server|emulate)/[^\">]*)[\">]")
      string(APPEND violations "\n  ${f}:${n}: includes \"${CMAKE_MATCH_1}\"")
    endif()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "layering: library files include a front end's header (move what they need "
                      "into sim/scenario/ or another library folder):${violations}")
endif()
list(LENGTH sources count)
message(STATUS "layering: ${count} files under sim/ checked, none outside the front ends includes sim/cli/, sim/server/ or sim/emulate/")
