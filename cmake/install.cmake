# `cmake --install`: the libraries, headers and the kvlanes command, with exported targets and a
# kvlanesConfig.cmake, so a policy can be built in its own repository (docs/policies.md,
# "Out-of-tree policies"; examples/out_of_tree_policy/):
#   find_package(kvlanes 0.3 REQUIRED)
#   add_executable(my_kvlanes my_policy.cpp)              # registers with kvlanes::PolicyRegistrar
#   target_link_libraries(my_kvlanes PRIVATE kvlanes::main)  # every kvlanes command, plus main
# Targets: kvlanes::plan (the config, the plan header and reader), kvlanes::sim (the policy
# interface sim/cache/policy.h, the engine, the replay driver sim/engine/replay_driver.h), kvlanes::policies (policies/registry.h and the shipped policies),
# kvlanes::cli (replay setup, grids, regress), kvlanes::commands (kvlanes::cli::Main),
# kvlanes::main (main itself), and the kvlanes executable.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KVLANES_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kvlanes)
set(KVLANES_EXPORTED
    kvlanes_traces kvlanes_plan kvlanes_sim kvlanes_policies kvlanes_regress kvlanes_compare kvlanes_kernels
    kvlanes_exec kvlanes_exec_bench kvlanes_cli kvlanes_commands kvlanes_main)
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

install(TARGETS ${KVLANES_EXPORTED} kvlanes EXPORT kvlanesTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY traces sim policies tools exec kernels
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvlanes
        FILES_MATCHING PATTERN "*.h")
install(FILES tools/plot_sweep.py DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT kvlanesTargets NAMESPACE kvlanes:: DESTINATION ${KVLANES_INSTALL_CMAKEDIR})
configure_package_config_file(cmake/kvlanesConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/kvlanesConfig.cmake
                              INSTALL_DESTINATION ${KVLANES_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/kvlanesConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kvlanesConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/kvlanesConfigVersion.cmake
        DESTINATION ${KVLANES_INSTALL_CMAKEDIR})
