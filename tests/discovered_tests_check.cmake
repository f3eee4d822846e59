cmake_minimum_required(VERSION 3.22)
# Every Catch2 test case of capsim_tests is one ctest test, run by its own name: a name with ';'
# (CMake's list separator) or an unmatched '[' or ']' reaches catch_discover_tests cut or merged —
# once 350 test cases became one ctest test that matched nothing. Fails (FATAL_ERROR, naming the
# case) when a name holds a ';', or when the discovered tests' count differs from the test cases
# Catch lists (what an unmatched bracket does; matched ones, "E[A]", are fine). Run as
#   cmake -DBIN=<capsim_tests> -DDISCOVERED_DIR=<its build folder> -P tests/discovered_tests_check.cmake
if(NOT BIN OR NOT DISCOVERED_DIR)
  message(FATAL_ERROR "discovered_tests_check.cmake: give -DBIN=<capsim_tests> -DDISCOVERED_DIR=<folder>")
endif()
# Catch2 v2 exits with the number of names listed (capped), so the exit status says nothing here.
execute_process(COMMAND ${BIN} --list-test-names-only OUTPUT_VARIABLE names)
if(names STREQUAL "")
  message(FATAL_ERROR "${BIN} --list-test-names-only listed nothing")
endif()
# One name per line; the characters are checked on the raw text, before any list is made of it.
string(REGEX MATCHALL "[^\n]*;[^\n]*" bad "${names}")
if(bad)
  string(REPLACE ";" "\\;" shown "${bad}")
  message(FATAL_ERROR "test case names ctest cannot pass back to Catch (a ';' in the name): ${shown}")
endif()
string(REGEX MATCHALL "[^\n]+\n" lines "${names}")
list(LENGTH lines listed)
file(GLOB discovered_files ${DISCOVERED_DIR}/capsim_tests_tests-*.cmake)
if(NOT discovered_files)
  message(FATAL_ERROR "no capsim_tests_tests-*.cmake in ${DISCOVERED_DIR} (catch_discover_tests writes it at build time)")
endif()
set(discovered 0)
foreach(f ${discovered_files})
  file(READ ${f} text)
  string(REGEX MATCHALL "add_test\\(" adds "${text}")
  list(LENGTH adds n)
  math(EXPR discovered "${discovered} + ${n}")
endforeach()
if(NOT discovered EQUAL listed)
  message(FATAL_ERROR "ctest discovered ${discovered} tests from capsim_tests, Catch lists ${listed} test cases")
endif()
message(STATUS "${listed} test cases, each one ctest test")
