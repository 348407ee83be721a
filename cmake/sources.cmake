# Every .cpp under a folder belongs to that folder's library; adding a file needs no CMake edit.
function(llmctl_glob out dir)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.cpp)
  set(${out} ${srcs} PARENT_SCOPE)
endfunction()
