# `cmake --install BUILD [--prefix P]`: the kiln libraries, their headers (include/kiln/<folder>/…,
# the include directory is include/kiln),
# the `kiln` tool and a CMake package, so that another project does
#
#   find_package(kiln REQUIRED)                 # CMAKE_PREFIX_PATH=P
#   target_link_libraries(app PRIVATE kiln::kiln)
#
# kiln::kiln is everything a DSL program uses (frontend, engine, aot, …); the single libraries are
# kiln::kiln_frontend, kiln::kiln_engine, …. examples/embed/ is such a project (built by the tests).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KILN_INSTALL_LIBRARIES kiln_support kiln_ir kiln_kernels kiln_passes kiln_runtime kiln_interp kiln_frontend
    kiln_codegen_cpu kiln_engine kiln_aot)
foreach(lib kiln_runtime_cuda kiln_codegen_cuda kiln_cost)
  if(TARGET ${lib})
    list(APPEND KILN_INSTALL_LIBRARIES ${lib})
  endif()
endforeach()

add_library(kiln_all INTERFACE)
target_link_libraries(kiln_all INTERFACE ${KILN_INSTALL_LIBRARIES})
set_target_properties(kiln_all PROPERTIES EXPORT_NAME kiln)
add_library(kiln::kiln ALIAS kiln_all)

install(TARGETS ${KILN_INSTALL_LIBRARIES} kiln_all EXPORT kilnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS kiln RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(dir support ir kernels passes runtime interp frontend codegen engine aot cost)
  if(EXISTS ${PROJECT_SOURCE_DIR}/${dir})
    install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln/${dir}
            FILES_MATCHING PATTERN "*.h" PATTERN "*.def" PATTERN "test" EXCLUDE)
  endif()
endforeach()
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kilnConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/kilnConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/kilnConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kilnConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/kilnConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
