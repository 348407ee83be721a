#pragma once
// The repository's root, for the test data under tests/. Defined in main.cpp, the one test file
// compiled with the path, so that every other file compiles to the same command in any clone and
// ccache serves a second clone (CI's) the first one's objects.
namespace llmctl::test {
const char* source_dir();
}  // namespace llmctl::test
