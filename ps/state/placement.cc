#include "ps/state/placement.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psgd {
namespace ps {

// A row slice of a split variable: "<variable>/part_<j>".
// A split variable's slices are named "<variable>/part_<j>": written here
// only; nothing reads it back (a slice carries SliceOf).
constexpr char kPartSuffix[] = "/part_";
namespace {

constexpr int64_t kBytesPerElement = sizeof(float);

// Number of row slices for a variable of `rows` rows and `bytes` bytes.
int NumParts(int64_t rows, int64_t bytes, int num_shards,
             int64_t split_threshold_bytes) {
  if (bytes <= split_threshold_bytes || num_shards < 2 || rows < 2) return 1;
  const int64_t wanted =
      (bytes + split_threshold_bytes - 1) / split_threshold_bytes;
  return static_cast<int>(
      std::min<int64_t>({wanted, rows, static_cast<int64_t>(num_shards)}));
}

}  // namespace

std::vector<VariableSpec> Placement::ShardVariables(int shard) const {
  std::vector<VariableSpec> out;
  for (int s : shard_slices[shard]) {
    const Slice& slice = slices[s];
    const VariableSpec& variable = variables[slice.variable];
    VariableSpec spec{slice.name, slice.shape, variable.init, variable.kind};
    if (variable_slices[slice.variable].size() > 1) {
      spec.slice_of = SliceOf{variable.name, slice.part, slice.row_begin};
    }
    out.push_back(std::move(spec));
  }
  return out;
}

namespace {

// 1. Cut: each variable into its row slices (NumParts of them, rows spread
// evenly), in variable order; fills p.slices, p.variable_slices and
// p.variable_index.
void CutVariables(Placement& p) {
  for (int v = 0; v < static_cast<int>(p.variables.size()); ++v) {
    const Shape& shape = p.variables[v].shape;
    p.variable_index[p.variables[v].name] = v;
    const int64_t elements = NumElements(shape);
    const int64_t rows = shape.empty() ? 1 : shape[0];
    const int64_t row_elements = shape.empty() ? 1 : elements / rows;
    const int parts = NumParts(rows, elements * kBytesPerElement, p.num_shards,
                               p.split_threshold_bytes);
    int64_t row = 0;
    for (int j = 0; j < parts; ++j) {
      const int64_t n = rows / parts + (j < rows % parts ? 1 : 0);
      Slice slice;
      slice.name = parts == 1
                       ? p.variables[v].name
                       : absl::StrCat(p.variables[v].name, kPartSuffix, j);
      slice.variable = v;
      slice.part = j;
      slice.row_begin = row;
      slice.row_end = row + n;
      slice.shape = shape;
      if (!shape.empty()) slice.shape[0] = n;
      slice.offset = row * row_elements;
      slice.num_elements = n * row_elements;
      row += n;
      p.variable_slices[v].push_back(static_cast<int>(p.slices.size()));
      p.slices.push_back(std::move(slice));
    }
  }
}

// p.slice_index; INVALID_ARGUMENT when a slice's name is another's (a
// variable named like another's part).
absl::Status IndexSlices(Placement& p) {
  for (int i = 0; i < static_cast<int>(p.slices.size()); ++i) {
    const Slice& s = p.slices[i];
    if (!p.slice_index.emplace(s.name, i).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "placement: slice name '", s.name, "' of variable '",
          p.variables[s.variable].name, "' collides with variable '",
          p.variables[p.slices[p.slice_index[s.name]].variable].name, "'"));
    }
  }
  return absl::OkStatus();
}

// 2. Place, largest first: each slice on the least loaded shard that holds
// no other slice of its variable; fills shard and p.shard_bytes,
// p.shard_slices.
void PlaceSlices(Placement& p) {
  std::vector<int> order(p.slices.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&p](int a, int b) {
    return p.slices[a].num_elements > p.slices[b].num_elements;
  });
  std::vector<bool> placed(p.slices.size(), false);
  for (int s : order) {
    Slice& slice = p.slices[s];
    int best = -1;
    for (int shard = 0; shard < p.num_shards; ++shard) {
      bool holds_sibling = false;
      for (int other : p.variable_slices[slice.variable]) {
        holds_sibling |= placed[other] && p.slices[other].shard == shard;
      }
      if (holds_sibling) continue;
      if (best < 0 || p.shard_bytes[shard] < p.shard_bytes[best]) best = shard;
    }
    // NumParts keeps parts <= num_shards, so a shard is always free.
    slice.shard = best;
    placed[s] = true;
    p.shard_bytes[best] += slice.num_elements * kBytesPerElement;
  }
  for (int s = 0; s < static_cast<int>(p.slices.size()); ++s) {
    p.shard_slices[p.slices[s].shard].push_back(s);
  }
}

}  // namespace

absl::StatusOr<Placement> PlaceVariables(
    const std::vector<VariableSpec>& variables, int num_shards,
    int64_t split_threshold_bytes) {
  if (absl::Status s = ValidateVariableSpecs(variables); !s.ok()) return s;
  if (num_shards < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement: num_shards=", num_shards, " must be >= 1"));
  }
  if (split_threshold_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement: split_threshold_bytes=", split_threshold_bytes,
                     " must be >= 1"));
  }
  Placement p;
  p.num_shards = num_shards;
  p.split_threshold_bytes = split_threshold_bytes;
  p.variables = variables;
  p.variable_slices.resize(variables.size());
  p.shard_slices.resize(num_shards);
  p.shard_bytes.assign(num_shards, 0);

  CutVariables(p);
  if (absl::Status s = IndexSlices(p); !s.ok()) return s;
  PlaceSlices(p);
  return p;
}

absl::StatusOr<std::vector<VariableSpec>> VariablesOfSlices(
    const std::vector<VariableSpec>& slices) {
  // variable -> part (-1: whole) -> its slice; variables in the order first
  // seen.
  std::map<std::string, std::map<int, const VariableSpec*>> parts;
  std::vector<std::string> order;
  for (const VariableSpec& slice : slices) {
    const std::string& name = slice.variable();
    const int part = slice.slice_of.has_value() ? slice.slice_of->part : -1;
    if (parts.find(name) == parts.end()) order.push_back(name);
    if (!parts[name].emplace(part, &slice).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable '", name, "' has slice '", slice.name, "' twice"));
    }
  }
  std::vector<VariableSpec> out;
  for (const std::string& name : order) {
    const std::map<int, const VariableSpec*>& p = parts[name];
    const VariableSpec& first = *p.begin()->second;
    Shape shape = first.shape;
    if (p.begin()->first >= 0) {  // a split variable: its rows add up
      int expected = 0;
      int64_t rows = 0;
      for (const auto& [part, s] : p) {
        Shape rest = s->shape, head = shape;
        if (!rest.empty()) rest[0] = 0;
        if (!head.empty()) head[0] = 0;
        if (part != expected++ || s->shape.empty() || rest != head ||
            s->slice_of->row_begin != rows || s->kind != first.kind) {
          return absl::InvalidArgumentError(absl::StrCat(
              "the slices of variable '", name, "' do not fit together"));
        }
        rows += s->shape[0];
      }
      shape[0] = rows;
    } else if (p.size() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable '", name, "' is stored whole and in slices"));
    }
    out.push_back({name, std::move(shape), Initializer(), first.kind});
  }
  return out;
}

std::string PlacementToString(const Placement& p) {
  std::string out = absl::StrFormat("%-28s %-22s %5s %12s %10s\n", "slice",
                                    "shape", "shard", "rows", "bytes");
  for (const Slice& s : p.slices) {
    absl::StrAppendFormat(&out, "%-28s %-22s %5d %12s %10d\n", s.name,
                          ShapeToString(s.shape), s.shard,
                          absl::StrCat("[", s.row_begin, ", ", s.row_end, ")"),
                          s.num_elements * kBytesPerElement);
  }
  for (int shard = 0; shard < p.num_shards; ++shard) {
    absl::StrAppendFormat(&out, "shard %d: %d bytes in %d slices\n", shard,
                          p.shard_bytes[shard], p.shard_slices[shard].size());
  }
  return out;
}

}  // namespace ps
}  // namespace psgd
