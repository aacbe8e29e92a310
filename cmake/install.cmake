# `cmake --install`: the libraries, headers and the kvlanes command, with exported targets and a
# kvlanesConfig.cmake, so a policy can be built in its own repository (docs/policies.md,
# "Out-of-tree policies"; examples/out_of_tree_policy/):
#   find_package(kvlanes 0.3 REQUIRED)
#   add_executable(my_kvlanes my_policy.cpp)              # registers with kvlanes::PolicyRegistrar
#   target_link_libraries(my_kvlanes PRIVATE kvlanes::main)  # every kvlanes command, plus main
# Targets: kvlanes::plan (the config, the plan header and reader), kvlanes::sim (the policy
# interface sim/cache/policy.h, the engine, the replay driver sim/engine/replay_driver.h), kvlanes::policies (policies/registry.h and the shipped policies),
# kvlanes::driver (replay inputs, grids, regress runs: what the commands and the Python module
# share), kvlanes::cli (the replay options), kvlanes::commands (kvlanes::cli::Main),
# kvlanes::main (main itself), and the kvlanes executable.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KVLANES_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kvlanes)
set(KVLANES_EXPORTED
    kvlanes_io kvlanes_traces kvlanes_plan kvlanes_sim kvlanes_methods kvlanes_policies kvlanes_regress kvlanes_compare kvlanes_kernels
    kvlanes_exec kvlanes_exec_bench kvlanes_driver kvlanes_cli kvlanes_commands kvlanes_main)
if(KVLANES_WITH_CUDA)
  list(APPEND KVLANES_EXPORTED kvlanes_kernels_bench)
endif()
# Every folder names the source tree as its include directory; installed, it is include/kvlanes
# (headers keep their paths: #include "sim/cache/policy.h").
foreach(t IN LISTS KVLANES_EXPORTED)
  set_property(TARGET ${t} PROPERTY INTERFACE_INCLUDE_DIRECTORIES
               "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>"
               "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/kvlanes>")
  string(REPLACE "kvlanes_" "" short ${t})
  set_property(TARGET ${t} PROPERTY EXPORT_NAME ${short})
endforeach()

# Two components. `cli` is what a user runs (tools/setup.sh install): the kvlanes command and the
# sweep plot script it starts, the Python module, the shipped configs and profiles; `dev` is what an
# out-of-tree policy builds against (libraries, headers, the CMake package). A plain
# `cmake --install` installs both.
install(TARGETS ${KVLANES_EXPORTED} EXPORT kvlanesTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(TARGETS kvlanes EXPORT kvlanesTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
install(DIRECTORY io base traces sim methods policies driver tools exec kernels
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvlanes COMPONENT dev
        FILES_MATCHING PATTERN "*.h")
# `sweep --plot` finds its script beside the command (tools/cmd_sweep.cpp).
install(PROGRAMS tools/plot_sweep.py DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
# config/default.yaml names its profile relative to itself: the folder keeps its layout.
install(DIRECTORY config/ DESTINATION ${CMAKE_INSTALL_DATADIR}/kvlanes/config COMPONENT cli)
if(KVLANES_PYTHON)
  # Relative to the install prefix; tools/setup.sh install sets it to the folder of the prefix
  # that the user's python3 searches (sys.path).
  set(KVLANES_INSTALL_PYTHONDIR
      "lib/python${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}/site-packages"
      CACHE STRING "where `cmake --install` puts the kvlanes Python module, under the prefix")
  install(TARGETS kvlanes_python LIBRARY DESTINATION ${KVLANES_INSTALL_PYTHONDIR} COMPONENT cli)
endif()
install(EXPORT kvlanesTargets NAMESPACE kvlanes:: DESTINATION ${KVLANES_INSTALL_CMAKEDIR}
        COMPONENT dev)
configure_package_config_file(cmake/kvlanesConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/kvlanesConfig.cmake
                              INSTALL_DESTINATION ${KVLANES_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/kvlanesConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kvlanesConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/kvlanesConfigVersion.cmake
        DESTINATION ${KVLANES_INSTALL_CMAKEDIR})
