// Shard 0's decisions between proto/ps.proto's Decision (a oneof of its
// kinds) and the core's Decision (ps/state/types.h): the one place they are
// converted (wire.h declares these). A field a kind does not carry keeps the
// core's default on the way back (a Left's lr_scale is 1, its push id 0), as
// shard 0 makes the decisions of that kind.
#include "absl/strings/str_cat.h"
#include "ps/wire/wire.h"

namespace psgd {
namespace ps {
namespace {

using ProtoReason = wire::Decision::Dropped::Reason;

ProtoReason DroppedReasonToProto(Decision::Dropped reason) {
  switch (reason) {
    case Decision::Dropped::kStale:
      return wire::Decision::Dropped::STALE;
    case Decision::Dropped::kSurplus:
      return wire::Decision::Dropped::SURPLUS;
    case Decision::Dropped::kRefused:
      return wire::Decision::Dropped::REFUSED;
    case Decision::Dropped::kRefusedTooStale:
      return wire::Decision::Dropped::REFUSED_TOO_STALE;
  }
  return wire::Decision::Dropped::REASON_UNSPECIFIED;  // not reached
}

absl::StatusOr<Decision::Dropped> DroppedReasonFromProto(
    const wire::Decision& p) {
  switch (p.dropped().reason()) {
    case wire::Decision::Dropped::STALE:
      return Decision::Dropped::kStale;
    case wire::Decision::Dropped::SURPLUS:
      return Decision::Dropped::kSurplus;
    case wire::Decision::Dropped::REFUSED:
      return Decision::Dropped::kRefused;
    case wire::Decision::Dropped::REFUSED_TOO_STALE:
      return Decision::Dropped::kRefusedTooStale;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "decision ", p.seq(), " (dropped, step ", p.dropped().step(),
          "): reason ", static_cast<int>(p.dropped().reason()),
          " is unspecified or unknown"));
  }
}

void DecidedChunkToProto(const DecidedChunk& c, wire::DecidedChunk* out) {
  out->set_worker(c.worker);
  DataChunkRefToProto(c.chunk, out->mutable_chunk());
  out->mutable_samples()->Add(c.samples.begin(), c.samples.end());
  out->set_ledger_generation(c.ledger_generation);
}

DecidedChunk DecidedChunkFromProto(const wire::DecidedChunk& c) {
  DecidedChunk out;
  out.worker = c.worker();
  out.chunk = DataChunkRefFromProto(c.chunk());
  out.samples.assign(c.samples().begin(), c.samples().end());
  out.ledger_generation = c.ledger_generation();
  return out;
}

// The one push a decision of a kind other than kSyncStep names (shard 0
// makes each with one; a decision without is sent as worker 0, push 0).
int FirstWorker(const Decision& d) {
  return d.workers.empty() ? 0 : d.workers[0];
}
uint64_t FirstPushId(const Decision& d) {
  return d.push_ids.empty() ? 0 : d.push_ids[0];
}

}  // namespace

void DecisionToProto(const Decision& d, wire::Decision* out) {
  out->set_seq(d.seq);
  switch (d.kind) {
    case Decision::Kind::kSyncStep: {
      wire::Decision::SyncStep* p = out->mutable_sync_step();
      p->set_step(d.step);
      p->mutable_workers()->Add(d.workers.begin(), d.workers.end());
      p->mutable_push_ids()->Add(d.push_ids.begin(), d.push_ids.end());
      p->set_lr_scale(d.lr_scale);
      p->set_replicas_next(d.replicas_next);
      for (const DecidedChunk& c : d.chunks) {
        DecidedChunkToProto(c, p->add_chunks());
      }
      return;
    }
    case Decision::Kind::kAsyncPush: {
      wire::Decision::AsyncPush* p = out->mutable_async_push();
      p->set_step(d.step);
      p->set_worker(FirstWorker(d));
      p->set_push_id(FirstPushId(d));
      p->set_lr_scale(d.lr_scale);
      p->set_staleness(d.staleness);
      // One push trains on one chunk at most.
      if (!d.chunks.empty())
        DecidedChunkToProto(d.chunks[0], p->mutable_chunk());
      return;
    }
    case Decision::Kind::kLeft: {
      wire::Decision::Left* p = out->mutable_left();
      p->set_step(d.step);
      p->set_worker(FirstWorker(d));
      return;
    }
    case Decision::Kind::kDropped: {
      wire::Decision::Dropped* p = out->mutable_dropped();
      p->set_step(d.step);
      p->set_worker(FirstWorker(d));
      p->set_push_id(FirstPushId(d));
      p->set_reason(DroppedReasonToProto(d.dropped));
      return;
    }
  }
}

absl::StatusOr<Decision> DecisionFromProto(const wire::Decision& p) {
  Decision d;
  d.seq = p.seq();
  switch (p.kind_case()) {
    case wire::Decision::kSyncStep: {
      const wire::Decision::SyncStep& s = p.sync_step();
      d.kind = Decision::Kind::kSyncStep;
      d.step = s.step();
      d.workers.assign(s.workers().begin(), s.workers().end());
      d.push_ids.assign(s.push_ids().begin(), s.push_ids().end());
      d.lr_scale = s.lr_scale();
      d.replicas_next = s.replicas_next();
      for (const wire::DecidedChunk& c : s.chunks()) {
        d.chunks.push_back(DecidedChunkFromProto(c));
      }
      return d;
    }
    case wire::Decision::kAsyncPush: {
      const wire::Decision::AsyncPush& a = p.async_push();
      d.kind = Decision::Kind::kAsyncPush;
      d.step = a.step();
      d.workers = {a.worker()};
      d.push_ids = {a.push_id()};
      d.lr_scale = a.lr_scale();
      d.staleness = a.staleness();
      if (a.has_chunk()) d.chunks.push_back(DecidedChunkFromProto(a.chunk()));
      return d;
    }
    case wire::Decision::kLeft:
      d.kind = Decision::Kind::kLeft;
      d.step = p.left().step();
      d.workers = {p.left().worker()};
      d.push_ids = {0};
      return d;
    case wire::Decision::kDropped: {
      const wire::Decision::Dropped& r = p.dropped();
      d.kind = Decision::Kind::kDropped;
      d.step = r.step();
      d.workers = {r.worker()};
      d.push_ids = {r.push_id()};
      auto reason = DroppedReasonFromProto(p);
      if (!reason.ok()) return reason.status();
      d.dropped = *reason;
      return d;
    }
    case wire::Decision::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "decision ", p.seq(),
      " has no kind this build knows (sync_step, async_push, left or "
      "dropped): its kind is unset"));
}

}  // namespace ps
}  // namespace psgd
