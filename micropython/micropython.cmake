# micropython.cmake - the user C modules in this folder, for MicroPython's CMake ports (esp32,
# rp2), as its examples/usercmodule does (docs/micropython.md):
#
#   make -C ports/esp32 BOARD=ESP32_GENERIC USER_C_MODULES=/path/to/tinyprop/micropython/micropython.cmake
include(${CMAKE_CURRENT_LIST_DIR}/tinyprop/micropython.cmake)
