// Writing a file so that a reader sees either the old file or the whole new one, never a
// half-written one: the text goes to a temporary file in the same folder, which is then
// renamed over the target (rename(2) replaces atomically within one file system).
#pragma once

#include <string>
#include <string_view>

namespace softrdma::host {

// Returns empty on success, else one line saying what failed (the temporary file is removed).
std::string write_file_atomically(const std::string& path, std::string_view text);

}  // namespace softrdma::host
