// The host-only C++ tests' checks: check() counts, report() prints "N passed, M failed" (what
// tests/test_host_cpp.py looks for) and gives main's exit status.
#pragma once

#include <cstdio>
#include <string>

namespace host_check {

inline int g_passed = 0, g_failed = 0;

inline void check(bool ok, const std::string& what) {
  if (ok) {
    ++g_passed;
  } else {
    ++g_failed;
    std::printf("FAILED: %s\n", what.c_str());
  }
}

inline int report() {
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}

}  // namespace host_check
