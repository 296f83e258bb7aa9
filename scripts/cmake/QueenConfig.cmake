# find_package(Queen) for a tree installed by Queen's `make install`. The
# targets, each with its include directory and link dependencies:
#   Queen::client    libqueenclient (include/queen_client.h), the C client
#   Queen::client++  libqueenclient++ (include/queen_client.hpp), the C++17 client
#   Queen::queen     libqueen (include/queen.h), the embedded broker
# Paths are found from this file's place (PREFIX/lib/cmake/Queen), so an
# installed tree may be moved as a whole (DESTDIR, a copied prefix).
include(CMakeFindDependencyMacro)
find_dependency(Threads)

get_filename_component(_queen_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)

if(NOT TARGET Queen::client)
  add_library(Queen::client SHARED IMPORTED)
  set_target_properties(Queen::client PROPERTIES
    IMPORTED_LOCATION "${_queen_prefix}/lib/libqueenclient.so"
    INTERFACE_INCLUDE_DIRECTORIES "${_queen_prefix}/include"
    INTERFACE_LINK_LIBRARIES Threads::Threads)

  add_library(Queen::client++ STATIC IMPORTED)
  set_target_properties(Queen::client++ PROPERTIES
    IMPORTED_LOCATION "${_queen_prefix}/lib/libqueenclient++.a"
    IMPORTED_LINK_INTERFACE_LANGUAGES CXX
    INTERFACE_INCLUDE_DIRECTORIES "${_queen_prefix}/include"
    INTERFACE_COMPILE_FEATURES cxx_std_17
    INTERFACE_LINK_LIBRARIES Queen::client)

  add_library(Queen::queen SHARED IMPORTED)
  set_target_properties(Queen::queen PROPERTIES
    IMPORTED_LOCATION "${_queen_prefix}/lib/libqueen.so"
    INTERFACE_INCLUDE_DIRECTORIES "${_queen_prefix}/include")
endif()

unset(_queen_prefix)
