// Which sysfs trees (sysfs_tree.hpp) are in use. A program holds its tree with a shared flock(2)
// on the tree's lock file through a descriptor that softrdma run leaves open across exec, so the
// program and every child it forks hold it until the last of them ends. A tree nobody holds is
// removed by the next softrdma run, which keeps the runtime directory from filling with the
// trees of every address a user ever ran on.
#pragma once

#include <filesystem>

namespace softrdma::run {

// Creates ROOT's lock file and holds it: the descriptor, or -1 with errno set.
int create_and_hold_tree(const std::filesystem::path& root);
// Holds the tree at ROOT: the descriptor, or -1 when ROOT has no lock file, or when it was
// removed while this waited for a remover to finish (then ROOT must be written again).
int hold_tree(const std::filesystem::path& root);
// Removes every tree in DIR (sysfs-*) that no process holds.
void remove_unheld_trees(const std::filesystem::path& dir);

}  // namespace softrdma::run
