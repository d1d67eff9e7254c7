// The main() shared by every Catch2 test of the project.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
