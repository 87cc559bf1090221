# ctest driver for the bounded fuzz run: a fresh corpus from the seed files, 20 seconds.
file(REMOVE_RECURSE ${CORPUS})
file(MAKE_DIRECTORY ${CORPUS})
file(GLOB seeds ${SEEDS}/*.kir ${EXTRA_SEEDS}/*.kir)
file(COPY ${seeds} DESTINATION ${CORPUS})
execute_process(
  COMMAND ${FUZZER} -max_total_time=20 -max_len=4096 -timeout=10 -rss_limit_mb=2048 -dict=${DICT}
          -print_final_stats=1 -artifact_prefix=${ARTIFACTS}/ ${CORPUS}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kir_fuzzer failed (exit ${rc}); the input that failed is in ${ARTIFACTS} (crash-*, timeout-*, oom-*)")
endif()
