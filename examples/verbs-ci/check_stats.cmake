# Reads the counters that `softrdma run --stats FILE` wrote for each side of some verbs_echo
# runs and fails unless they show the traffic, and the faults where a run had them.
#
# usage: cmake -DDIR=STATS_DIR -DCLEAN=RUN,... -DLOSSY=RUN,... -DMIN_PACKETS=N -P check_stats.cmake
#
# For each RUN it reads DIR/RUN.server.json and DIR/RUN.client.json. On every side: at least
# MIN_PACKETS packets sent and received (one a message at least), and no QP gave up
# (retry_exceeded_err 0). A CLEAN run lost nothing to faults; a LOSSY run (summed over its
# two sides) lost packets to its fault plan and recovered them by retransmission.
cmake_minimum_required(VERSION 3.25)

foreach(var DIR MIN_PACKETS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_stats: -D${var}=... is missing")
  endif()
endforeach()

# json_number(OUT JSON KEY...): the number at that path, or a failure naming it.
function(json_number out json file)
  string(JSON value ERROR_VARIABLE error GET "${json}" ${ARGN})
  if(error OR NOT value MATCHES "^[0-9]+$")
    list(JOIN ARGN "." path)
    message(FATAL_ERROR "check_stats: ${file}: no counter ${path} (${error})")
  endif()
  set(${out} ${value} PARENT_SCOPE)
endfunction()

# check_run(RUN LOSSY): checks both sides of one run.
function(check_run run lossy)
  set(run_lost 0)
  set(run_retransmitted 0)
  foreach(side server client)
    set(file "${DIR}/${run}.${side}.json")
    if(NOT EXISTS "${file}")
      message(FATAL_ERROR "check_stats: ${file} is missing: did ${run} pass, and exit normally?")
    endif()
    file(READ "${file}" json)
    string(JSON program ERROR_VARIABLE error GET "${json}" program)
    if(error)
      message(FATAL_ERROR "check_stats: ${file} is not a stats object: ${error}")
    elseif(NOT program STREQUAL "verbs_echo")
      message(FATAL_ERROR "check_stats: ${file} is the counters of '${program}', not of verbs_echo")
    endif()

    json_number(sent "${json}" "${file}" counters sent_pkts)
    json_number(rcvd "${json}" "${file}" counters rcvd_pkts)
    json_number(retransmitted "${json}" "${file}" counters retransmitted_pkts)
    json_number(gave_up "${json}" "${file}" counters retry_exceeded_err)
    json_number(tx_lost "${json}" "${file}" faults tx lost)
    json_number(rx_lost "${json}" "${file}" faults rx lost)
    math(EXPR lost "${tx_lost} + ${rx_lost}")
    message(STATUS "${run} ${side}: sent_pkts ${sent}, rcvd_pkts ${rcvd}, retransmitted_pkts ${retransmitted}, "
                   "retry_exceeded_err ${gave_up}, faults lost ${lost} (tx ${tx_lost}, rx ${rx_lost})")

    if(sent LESS MIN_PACKETS OR rcvd LESS MIN_PACKETS)
      message(FATAL_ERROR "check_stats: ${run} ${side} sent ${sent} and received ${rcvd} packets, "
                          "fewer than the ${MIN_PACKETS} messages")
    endif()
    if(gave_up GREATER 0)
      message(FATAL_ERROR "check_stats: ${run} ${side}: retry_exceeded_err is ${gave_up}")
    endif()
    math(EXPR run_lost "${run_lost} + ${lost}")
    math(EXPR run_retransmitted "${run_retransmitted} + ${retransmitted}")
  endforeach()

  if(lossy AND run_lost EQUAL 0)
    message(FATAL_ERROR "check_stats: ${run} has a fault plan but lost no packet: was it given?")
  endif()
  if(lossy AND run_retransmitted EQUAL 0)
    message(FATAL_ERROR "check_stats: ${run} lost ${run_lost} packets but retransmitted none")
  endif()
  if(NOT lossy AND run_lost GREATER 0)
    message(FATAL_ERROR "check_stats: ${run} has no fault plan but lost ${run_lost} packets to faults")
  endif()
endfunction()

string(REPLACE "," ";" clean_runs "${CLEAN}")
string(REPLACE "," ";" lossy_runs "${LOSSY}")
if(NOT clean_runs AND NOT lossy_runs)
  message(FATAL_ERROR "check_stats: no runs to check: give -DCLEAN=... or -DLOSSY=...")
endif()
foreach(run IN LISTS clean_runs)
  check_run(${run} FALSE)
endforeach()
foreach(run IN LISTS lossy_runs)
  check_run(${run} TRUE)
endforeach()
message(STATUS "check_stats: every counter as expected")
