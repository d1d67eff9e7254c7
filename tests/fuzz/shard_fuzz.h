// The shard fuzzer: one input (tests/fuzz/fuzz_input.h) is a fresh
// ParameterShard with options from its header and a sequence of requests,
// parsed as proto/ps.proto messages and passed through ShardRequestHandler
// (the gRPC adapter's own checks and conversions, ps/server/request_handler.h),
// plus ExpireWorkers and the withdrawal of waiting pulls. The header may
// turn on 16-bit wire dtypes, the servers' data queue and a checkpoint
// directory (a fresh one per input), so that LeaseData, Checkpoint,
// ListCheckpoints and Rollback run for real; pushes may come through a
// fake shared memory segment. Two ops fuzz decoders outside the shard: the
// client's decoding of a pull into its model (DecodePullResponse and
// ShardAssembler) and the checkpoint files' (DecodeShardCheckpoint,
// DecodeCheckpointManifest). After every request the harness checks what
// the shard promises (ps/shard/shard.h, docs/PS.md) and aborts on a
// violation:
//
//   * a refused request changes nothing but the refusal counters, and is
//     refused with a documented code;
//   * an accepted one changes what its outcome says and nothing else (a push
//     told AGGREGATED adds one pending gradient, APPLIED advances the step by
//     one, a drop changes no weight; Join and Leave change the live set);
//   * the step never decreases; weights and optimizer slots stay finite;
//     the step equals the updates counted; a sync aggregate stays below the
//     gradients a step needs;
//   * every pull is answered at most once, with weights of at least its
//     step; no pull is left waiting for a step the shard has reached; after
//     Shutdown every waiting pull has ended with CANCELLED and only Status,
//     ListCheckpoints and Shutdown succeed;
//   * a lease hands out one chunk of at most chunk_size samples to a live
//     worker, and moves only the queue's counters;
//   * a checkpoint request changes nothing the shard shows; the listed
//     checkpoints are ones the harness saw saved (label, step,
//     generation); a rollback to one installs exactly the step, weights
//     and slots saved under that label, in the new generation, records
//     itself, keeps the live set and ends waiting pulls with ABORTED;
//   * the decoders return a documented error or a value (a decoded pull
//     holds what the generated parser reads; a decoded checkpoint encodes
//     and decodes back to itself).
//
// Pulls never block: a pull whose step has not come stays registered until
// a later request satisfies it, the input withdraws it, or Shutdown ends it.
//
// Built as a libFuzzer target with `bazel build --config=fuzz
// //tests/fuzz:shard_fuzzer` (scripts/bench/fuzz.sh runs it), and replayed over
// the seed corpus by //tests/fuzz:shard_fuzz_test in every build.
//
// Thread-safety: each call is independent; the shard it makes is used from
// the calling thread only.
#ifndef PSGD_TESTS_FUZZ_SHARD_FUZZ_H_
#define PSGD_TESTS_FUZZ_SHARD_FUZZ_H_

#include <cstddef>
#include <cstdint>

namespace psgd {
namespace fuzz {

void RunShardFuzzInput(const uint8_t* data, size_t size);

}  // namespace fuzz
}  // namespace psgd

// libFuzzer's entry point: RunShardFuzzInput; returns 0.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#endif  // PSGD_TESTS_FUZZ_SHARD_FUZZ_H_
