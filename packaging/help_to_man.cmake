# Writes a man page from a program's own --help (and each subcommand's), so that the page and
# the program can never disagree: the texts go in verbatim (.nf), escaped for roff.
#
# cmake -DPROGRAM=path -DNAME=softrdma -DSECTION=1 -DSUMMARY="..." -DVERSION=x.y.z
#       [-DSUBCOMMANDS=run,stats] -DOUT=file -P help_to_man.cmake

function(help_text argv out)
  execute_process(COMMAND ${argv} OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "help_to_man: '${argv}' exited ${rc}")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# roff reads a backslash as an escape and a leading '.' or '\'' as a request.
function(roff_verbatim text out)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out} ".nf\n${text}.fi\n" PARENT_SCOPE)
endfunction()

string(TOUPPER "${NAME}" title)
string(TIMESTAMP today "%Y-%m-%d" UTC)
set(page ".TH ${title} ${SECTION} \"${today}\" \"${NAME} ${VERSION}\" \"softrdma\"\n")
string(APPEND page ".SH NAME\n${NAME} \\- ${SUMMARY}\n.SH DESCRIPTION\n")
help_text("${PROGRAM};--help" text)
roff_verbatim("${text}" body)
string(APPEND page "${body}")
string(REPLACE "," ";" SUBCOMMANDS "${SUBCOMMANDS}")
foreach(command IN LISTS SUBCOMMANDS)
  string(TOUPPER "${command}" heading)
  help_text("${PROGRAM};${command};--help" text)
  roff_verbatim("${text}" body)
  string(APPEND page ".SH \"${title} ${heading}\"\n${body}")
endforeach()
string(APPEND page ".SH \"SEE ALSO\"\nREADME.md and docs/ in /usr/share/doc/softrdma\n")
file(WRITE "${OUT}" "${page}")
