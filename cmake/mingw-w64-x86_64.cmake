# Cross-compiling moetier.exe for 64-bit Windows on Debian with MinGW-w64 GCC (packages
# g++-mingw-w64-x86-64-posix, mingw-w64-tools): scripts/build-windows.sh passes this file as
# CMAKE_TOOLCHAIN_FILE. The "posix" flavour of the compiler is the one whose libstdc++ has
# std::thread and std::mutex (on winpthreads).
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(MOETIER_MINGW_TRIPLE x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${MOETIER_MINGW_TRIPLE}-gcc-posix)
set(CMAKE_CXX_COMPILER ${MOETIER_MINGW_TRIPLE}-g++-posix)
set(CMAKE_RC_COMPILER ${MOETIER_MINGW_TRIPLE}-windres)

# Libraries and headers only from the MinGW sysroot and the folders the build script adds
# (CMAKE_FIND_ROOT_PATH on the command line: its cross-built dependencies); programs
# (glslc, sh) from the build machine.
list(APPEND CMAKE_FIND_ROOT_PATH /usr/${MOETIER_MINGW_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# GCC's Windows target does not keep the stack 32-byte aligned for AVX spills (GCC bug
# 54412): it still emits aligned moves (vmovaps/vmovdqa) for 32- and 64-byte stack slots,
# which fault at random because Windows places the stack at a random phase. The assembler
# option turns every such aligned vector move into its unaligned form, which costs nothing
# on aligned data; set for all code (not only the ISA units) so that no AVX code inlined
# elsewhere is missed.
set(CMAKE_C_FLAGS_INIT "-Wa,-muse-unaligned-vector-move")
set(CMAKE_CXX_FLAGS_INIT "-Wa,-muse-unaligned-vector-move")

# Self-contained executables: libstdc++, libgcc and winpthreads linked in statically, so
# moetier.exe needs no DLL beyond Windows' own.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
