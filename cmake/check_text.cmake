# Fails the build when the partially linked runtime object has code in a
# section other than .text, or calls libgcc's outline atomics: the
# preemption handler knows the runtime's code as the one range between
# gmp__text_begin and gmp__text_end, and those helpers are linked into the
# program outside it (a signal landing in one, called from the runtime,
# would preempt the runtime mid-operation).
# Usage: cmake -DOBJDUMP=<objdump> -DOBJ=<object> -P check_text.cmake
execute_process(COMMAND ${OBJDUMP} -h ${OBJ}
  OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "objdump -h ${OBJ} failed")
endif()
# objdump -h prints each section on one line and its flags on the next.
string(REPLACE "\n" ";" lines "${out}")
set(name "")
foreach(line IN LISTS lines)
  if(line MATCHES "^ *[0-9]+ ([^ ]+) ")
    set(name "${CMAKE_MATCH_1}")
  elseif(line MATCHES "CODE" AND NOT name STREQUAL ".text")
    message(FATAL_ERROR
      "gmprt: ${OBJ} has code in section ${name}; the runtime's code must "
      "all be in .text (see CMakeLists.txt, the partial link)")
  endif()
endforeach()

execute_process(COMMAND ${OBJDUMP} -t ${OBJ}
  OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "objdump -t ${OBJ} failed")
endif()
if(syms MATCHES "\\*UND\\*[^\n]*(__aarch64_[A-Za-z0-9_]+)")
  message(FATAL_ERROR
    "gmprt: ${OBJ} calls ${CMAKE_MATCH_1}, an outline atomic outside the "
    "runtime's code range; build with -mno-outline-atomics")
endif()
