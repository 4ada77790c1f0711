# Fails the build when the partially linked runtime object has code in a
# section other than .text: the preemption handler knows the runtime's code
# as the one range between gmp__text_begin and gmp__text_end.
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
