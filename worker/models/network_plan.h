// The step plan's pure parts (the network model's MakePlan uses them),
// with no backend in them: where each of a step's buffers lives in one
// arena.
//
// Thread-safety: plain values and functions.
#ifndef PSGD_WORKER_MODELS_NETWORK_PLAN_H_
#define PSGD_WORKER_MODELS_NETWORK_PLAN_H_

#include <cstdint>
#include <vector>

namespace psgd {

// When a step's buffers are in use. A step runs the forward of layer i at
// time i (the images are copied in at 0), the loss at time `count` (the
// number of layers), and the backward of layer i at 2 * count - i. A
// buffer's life is the times [start, end] from its first write to its last
// read, both included: an op never reads and writes the same buffer unless
// it says so, so lives that touch at one op's time must not share.
struct Life {
  int64_t elements = 0;
  int start = -1;  // -1: no buffer
  int end = -1;
};

// Places lives in one arena, the largest first, each at the lowest offset
// of the smallest gap that fits it between the lives placed so far that it
// meets, else after the last of them (greedy by size, as TensorFlow Lite's
// arena planner): two lives that meet never share memory. Offsets are in
// floats, multiples of 16 (64 bytes). Returns each life's offset (-1 for
// those with start -1); *arena: the floats the arena needs.
std::vector<int64_t> PackLives(const std::vector<Life>& lives, int64_t* arena);

}  // namespace psgd

#endif  // PSGD_WORKER_MODELS_NETWORK_PLAN_H_
