# Fails the build when the partially linked runtime object could run code
# outside its own range while the runtime is mid-operation. The preemption
# handler (src/preempt.c) knows the runtime's code as the one range
# between gmp__text_begin and gmp__text_end, and libc and the other system
# libraries by their mappings; a signal landing anywhere else, called from
# the runtime, would preempt it holding a lock. So:
#   - all of its code is in .text (nothing moved or split out of it);
#   - it calls nothing in the compiler's runtime library (libgcc's outline
#     atomics, division helpers, ...), which is linked into the program
#     outside that range;
#   - it calls the system libraries through the GOT, straight into them
#     (-fno-plt), never through a PLT stub, which the program or the
#     shared library holds, also outside that range.
# Usage: cmake -DOBJDUMP=<objdump> -DOBJ=<object> [-DRTLIB=<libgcc.a>]
#              [-DNM=<nm>] [-DPLT_OK=1] -P check_text.cmake
cmake_policy(SET CMP0057 NEW)   # IN_LIST

# objdump's output for OBJ with option opt, as a list of lines in var.
function(objdump_lines opt var)
  execute_process(COMMAND ${OBJDUMP} ${opt} ${OBJ}
    OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "objdump ${opt} ${OBJ} failed")
  endif()
  string(REPLACE "\n" ";" out "${out}")
  set(${var} "${out}" PARENT_SCOPE)
endfunction()

# objdump -h prints each section on one line and its flags on the next.
objdump_lines(-h lines)
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

# The symbols it takes from elsewhere.
objdump_lines(-t lines)
set(undefined "")
foreach(line IN LISTS lines)
  if(line MATCHES "\\*UND\\*[ \t]+[0-9a-fA-F]+[ \t]+(.+)$")
    list(APPEND undefined "${CMAKE_MATCH_1}")
  endif()
endforeach()

if(RTLIB AND NM AND EXISTS "${RTLIB}")
  execute_process(COMMAND ${NM} -g --defined-only ${RTLIB}
    OUTPUT_VARIABLE rtsyms ERROR_QUIET)
  string(REPLACE "\n" ";" lines "${rtsyms}")
  foreach(line IN LISTS lines)
    if(line MATCHES " [TtWi] ([^ ]+)$" AND CMAKE_MATCH_1 IN_LIST undefined)
      set(sym "${CMAKE_MATCH_1}")
      set(fix "write the operation without it")
      if(sym MATCHES "^__aarch64_")     # an outline atomic
        set(fix "build with -mno-outline-atomics")
      endif()
      message(FATAL_ERROR
        "gmprt: ${OBJ} calls ${sym}, from the compiler's runtime library "
        "(${RTLIB}), which is linked outside the runtime's code range; "
        "${fix}")
    endif()
  endforeach()
endif()

# A direct call to a symbol it does not define goes through a PLT stub.
# Not checked with PLT_OK set: builds in which asynchronous preemption is
# always off (TSan, or a sanitizer runtime clang links into the program;
# src/preempt.c), where the sanitizer's instrumentation calls through the
# PLT whatever -fno-plt says.
if(PLT_OK)
  return()
endif()
objdump_lines(-r lines)
foreach(line IN LISTS lines)
  if(line MATCHES "(R_X86_64_PLT32|R_X86_64_PC32|R_AARCH64_CALL26|R_AARCH64_JUMP26|R_RISCV_CALL_PLT|R_RISCV_CALL|R_RISCV_JAL)[ \t]+([A-Za-z0-9_.@]+)")
    set(sym "${CMAKE_MATCH_2}")
    if(sym IN_LIST undefined)
      message(FATAL_ERROR
        "gmprt: ${OBJ} calls ${sym} through a PLT stub, outside the "
        "runtime's code range; build with -fno-plt")
    endif()
  endif()
endforeach()
