# cmake --install puts libskippy.so (with SKIPPY_SHARED, the default) and
# libskippy.a, the public headers (cmake/public-headers.cmake, each by name),
# a CMake package (find_package(skippy) -> skippy::skippy, the shared library
# when there is one, and skippy::skippy_static) and skippy.pc under the prefix.
include(CMakePackageConfigHelpers)

if(TARGET skippy_shared)
  set_target_properties(skippy_shared PROPERTIES EXPORT_NAME skippy)
  set_target_properties(skippy PROPERTIES EXPORT_NAME skippy_static)
  install(TARGETS skippy_shared EXPORT skippyTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()
install(TARGETS skippy EXPORT skippyTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
include(${PROJECT_SOURCE_DIR}/cmake/public-headers.cmake)
list(TRANSFORM SKIPPY_PUBLIC_HEADERS PREPEND ${PROJECT_SOURCE_DIR}/include/skippy/ OUTPUT_VARIABLE skippy_headers)
install(FILES ${skippy_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/skippy)
install(EXPORT skippyTargets NAMESPACE skippy:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/skippy)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/skippyConfig.cmake.in
  ${PROJECT_BINARY_DIR}/skippyConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/skippy)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/skippyConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/skippyConfig.cmake ${PROJECT_BINARY_DIR}/skippyConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/skippy)

configure_file(${PROJECT_SOURCE_DIR}/cmake/skippy.pc.in ${PROJECT_BINARY_DIR}/skippy.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/skippy-cxx.pc.in ${PROJECT_BINARY_DIR}/skippy-cxx.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/skippy.pc ${PROJECT_BINARY_DIR}/skippy-cxx.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
