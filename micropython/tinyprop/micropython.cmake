# micropython.cmake - tinyprop as a MicroPython user C module for the CMake ports (esp32, rp2):
# `import tinyprop` (docs/micropython.md). Make-based ports read micropython.mk beside it.
add_library(usermod_tinyprop INTERFACE)

# firmware/sources.mk's globs (make-based builds include that file; tests/test_micropython.py
# keeps the two in step): the core and the protocol.
get_filename_component(TINYPROP_FW ${CMAKE_CURRENT_LIST_DIR}/../../firmware ABSOLUTE)
file(GLOB TINYPROP_LIB_SOURCES
    ${TINYPROP_FW}/core/*.c
    ${TINYPROP_FW}/core/blob/*.c
    ${TINYPROP_FW}/core/kernels/*.c
    ${TINYPROP_FW}/core/kernels/*/*.c
    ${TINYPROP_FW}/proto/*.c
)
list(SORT TINYPROP_LIB_SOURCES)

target_sources(usermod_tinyprop INTERFACE
    ${CMAKE_CURRENT_LIST_DIR}/modtinyprop.c
    ${CMAKE_CURRENT_LIST_DIR}/tp_mpy_link.c
    ${TINYPROP_LIB_SOURCES}
)
target_include_directories(usermod_tinyprop INTERFACE
    ${CMAKE_CURRENT_LIST_DIR}
    ${TINYPROP_FW}/include
    ${TINYPROP_FW}/core
)

# The core's float arithmetic equals the NumPy reference bit for bit only without fused
# multiply-add (the ESP32's FPU has madd.s) and with double constants left double; its loops
# are compiled for speed (TINYPROP_COPT, as in micropython.mk). Per source, so MicroPython's
# own code keeps its flags; this file is included into the directory of the port that
# compiles these sources, so the properties reach that compile.
if(NOT DEFINED TINYPROP_COPT)
    set(TINYPROP_COPT -O2)
endif()
set_source_files_properties(${TINYPROP_LIB_SOURCES} ${CMAKE_CURRENT_LIST_DIR}/tp_mpy_link.c
    PROPERTIES COMPILE_OPTIONS "-ffp-contract=off;-fno-single-precision-constant;${TINYPROP_COPT}"
)

target_link_libraries(usermod INTERFACE usermod_tinyprop)
