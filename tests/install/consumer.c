/* An out-of-tree C program built against an installed libskippy (through
 * pkg-config --static): loads a stage of a package and prints its parts. */
#include <skippy/skippy.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PACKAGE START END\n", argv[0]);
    return 2;
  }
  skippy_package* pkg = NULL;
  if (skippy_package_open(argv[1], &pkg) != SKIPPY_OK) {
    fprintf(stderr, "open: %s\n", skippy_last_error());
    return 1;
  }
  skippy_stage* stage = NULL;
  if (skippy_stage_select(pkg, (uint32_t)atoi(argv[2]), (uint32_t)atoi(argv[3]), NULL, &stage) != SKIPPY_OK ||
      skippy_stage_verify(stage, 0, NULL) != SKIPPY_OK) {
    fprintf(stderr, "stage: %s\n", skippy_last_error());
    return 1;
  }
  printf("c: %s, %zu parts, abi %s\n", skippy_package_model_id(pkg), skippy_stage_part_count(stage),
         skippy_package_abi_version(pkg));
  skippy_stage_free(stage);
  skippy_package_close(pkg);
  return 0;
}
