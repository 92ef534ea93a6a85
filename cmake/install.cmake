# cmake --install puts libskippy.a, the public headers, a CMake package
# (find_package(skippy) -> skippy::skippy) and skippy.pc under the prefix.
include(CMakePackageConfigHelpers)

install(TARGETS skippy EXPORT skippyTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/skippy DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(EXPORT skippyTargets NAMESPACE skippy:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/skippy)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/skippyConfig.cmake.in
  ${PROJECT_BINARY_DIR}/skippyConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/skippy)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/skippyConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/skippyConfig.cmake ${PROJECT_BINARY_DIR}/skippyConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/skippy)

configure_file(${PROJECT_SOURCE_DIR}/cmake/skippy.pc.in ${PROJECT_BINARY_DIR}/skippy.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/skippy.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
