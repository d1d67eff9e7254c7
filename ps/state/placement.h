// Where each of a model's variables lives among S parameter-server shards: a
// pure function of (variable list, S, split threshold), so that workers and
// servers compute the same placement independently. docs/SHARDING.md has a
// worked example.
//
//   1. A variable of more than split_threshold_bytes (float32) with at least
//      two rows is cut into k = min(S, rows, ceil(bytes / threshold)) row
//      slices of dimension 0, as even as possible (the first rows % k slices
//      get one row more), named "<variable>/part_<j>". Others stay whole,
//      under their own name.
//   2. The slices are placed largest first (ties: variable order, then part)
//      on the shard with the fewest bytes so far (ties: lowest index) among
//      the shards that hold no other slice of the same variable.
//
// A row slice of a row-major tensor is contiguous: elements
// [offset, offset + num_elements) of the variable.
//
// Thread-safety: plain values and a pure function.
#ifndef PSGD_PS_STATE_PLACEMENT_H_
#define PSGD_PS_STATE_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/model_variables.h"
#include "common/tensor.h"

namespace psgd {
namespace ps {

struct Slice {
  // The name the shard stores it under.
  std::string name;
  int variable = 0;  // index into Placement::variables
  int part = 0;      // j of "/part_<j>"; 0 for a whole variable
  int shard = 0;
  int64_t row_begin = 0;  // rows [row_begin, row_end) of dimension 0
  int64_t row_end = 0;
  Shape shape;         // the slice's own shape
  int64_t offset = 0;  // first element within the variable
  int64_t num_elements = 0;
};

struct Placement {
  int num_shards = 1;
  int64_t split_threshold_bytes = 0;
  std::vector<VariableSpec> variables;
  std::vector<Slice> slices;
  // variable index -> its slice indices, in row order.
  std::vector<std::vector<int>> variable_slices;
  // shard -> its slice indices, in variable order then part.
  std::vector<std::vector<int>> shard_slices;
  // shard -> float32 bytes it holds.
  std::vector<int64_t> shard_bytes;
  // variable name -> index.
  absl::flat_hash_map<std::string, int> variable_index;
  // slice name -> index.
  absl::flat_hash_map<std::string, int> slice_index;

  // The slices shard `shard` holds, as variables: slice name and shape, the
  // whole variable's initializer and kind, and for a slice of a split
  // variable its SliceOf. Requires 0 <= shard < num_shards.
  std::vector<VariableSpec> ShardVariables(int shard) const;
};

// INVALID_ARGUMENT for an invalid variable list (ValidateVariableSpecs),
// num_shards < 1, split_threshold_bytes < 1, or slice names that collide
// with another variable's name.
absl::StatusOr<Placement> PlaceVariables(
    const std::vector<VariableSpec>& variables, int num_shards,
    int64_t split_threshold_bytes);

// The whole variables that shards' stored slices make up: a slice with
// `slice_of` (ShardVariables' specs, as the shards report them back)
// counts its rows towards its variable, in part order; one without is a
// whole variable. `slices`: every shard's, shards in order. Variables come
// in the order first seen, with their kinds and default initializers.
// INVALID_ARGUMENT naming the variable when its parts do not fit together
// (a part missing or repeated, rows that do not follow on, other trailing
// dimensions, kinds that differ).
absl::StatusOr<std::vector<VariableSpec>> VariablesOfSlices(
    const std::vector<VariableSpec>& slices);

// A table of the placement: one line per slice and a line per shard with
// its bytes. For logs and docs/SHARDING.md.
std::string PlacementToString(const Placement& placement);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_STATE_PLACEMENT_H_
