// _psgd: the pybind11 binding of worker/session/external_worker.h, imported by
// the psgd package (python/psgd/__init__.py), which gives it its Pythonic
// face. Arrays cross without copies through the buffer protocol: float32,
// C-contiguous (numpy arrays; CPU torch tensors through .numpy()); the
// weight buffers given to join() are kept alive and written in place by
// every pull. The GIL is released during every call that waits on the
// network, and the calls that may wait long (for the servers to start or
// come back, for the other workers) run Python's signal handlers while
// they wait (PyWorker::Interruptible): a signal ends the wait. A Status becomes
// a Python exception in one place (the translator below), by its code and, for
// a model mismatch, its payload.
//
// Thread-safety: as ExternalWorker's (one Python thread per Worker;
// add_part may come from autograd's thread while the caller waits).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>  // NOLINT: Interruptible's call thread
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster_config.h"
#include "common/mutex.h"
#include "common/tensor.h"
#include "ps/client/remote_client.h"
#include "worker/paths.h"
#include "worker/session/external_worker.h"
#include "worker/session/model_check.h"
#include "worker/session/session_config.h"
#include "worker/session/step_outcome.h"

namespace py = pybind11;

namespace psgd {
namespace {

// A non-OK Status on its way to Python.
class StatusError : public std::exception {
 public:
  explicit StatusError(absl::Status status)
      : status_(std::move(status)), what_(status_.ToString()) {}
  const absl::Status& status() const { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  absl::Status status_;
  std::string what_;
};

void ThrowIfError(absl::Status status) {
  if (!status.ok()) throw StatusError(std::move(status));
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> v) {
  if (!v.ok()) throw StatusError(v.status());
  return *std::move(v);
}

// A float32, C-contiguous buffer of `obj`, kept while this lives.
struct Buffer {
  std::string name;
  py::buffer_info info;
  Shape shape;
};

std::unique_ptr<Buffer> RequestBuffer(const std::string& name, py::handle obj,
                                      bool writable, const char* what) {
  if (!PyObject_CheckBuffer(obj.ptr())) {
    throw StatusError(absl::InvalidArgumentError(absl::StrCat(
        what, " '", name, "' is a ", std::string(py::str(obj.get_type())),
        ", not an array (numpy, or a CPU torch tensor through .numpy())")));
  }
  auto b = std::make_unique<Buffer>();
  b->name = name;
  b->info = py::reinterpret_borrow<py::buffer>(obj).request(writable);
  const std::string& f = b->info.format;
  if (b->info.itemsize != 4 || (f != "f" && f != "<f" && f != "=f")) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat(what, " '", name, "' has dtype format '", f, "' (",
                     b->info.itemsize, " bytes), expected float32")));
  }
  py::ssize_t expected = b->info.itemsize;
  for (int i = static_cast<int>(b->info.ndim) - 1; i >= 0; --i) {
    if (b->info.shape[i] > 1 && b->info.strides[i] != expected) {
      throw StatusError(absl::InvalidArgumentError(absl::StrCat(
          what, " '", name,
          "' is not contiguous (a view, a transpose or a slice): pass "
          ".contiguous() / np.ascontiguousarray")));
    }
    expected *= b->info.shape[i];
  }
  b->shape.assign(b->info.shape.begin(), b->info.shape.end());
  return b;
}

// A step's state with overlap (worker/session/step_overlap.h) as the
// Python side names it; an error as its exception.
std::string StateName(absl::StatusOr<StepOverlap::State> state) {
  ThrowIfError(state.status());
  switch (*state) {
    case StepOverlap::State::kCompute:
      return "compute";
    case StepOverlap::State::kStop:
      return "stop";
    case StepOverlap::State::kRedo:
      return "redo";
  }
  return "compute";
}

using NamedArrays = std::vector<std::pair<std::string, py::object>>;

// The gradients of a push, viewed in place.
struct Gradients {
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<ps::NamedConstTensorView> views;
};

// Variable shapes by name (the weights given to Join).
using Shapes = absl::flat_hash_map<std::string, Shape>;

// One gradient: a buffer viewed in place, or None for "no gradient in this
// step" (a frozen or unused parameter: ps::NoGradient(), nothing sent).
ps::NamedConstTensorView ViewGradient(const std::string& name,
                                      const py::object& obj,
                                      const Shapes& shapes,
                                      std::unique_ptr<Buffer>* buffer) {
  if (obj.is_none()) {
    auto it = shapes.find(name);
    if (it == shapes.end()) {
      throw py::value_error("gradient '" + name +
                            "' is None and is not a variable of the model");
    }
    return {name, ConstTensorView(ps::NoGradient(), it->second)};
  }
  *buffer = RequestBuffer(name, obj, /*writable=*/false, "gradient");
  return {name, ConstTensorView(static_cast<const float*>((*buffer)->info.ptr),
                                (*buffer)->shape)};
}

Gradients ViewGradients(const NamedArrays& arrays, const Shapes& shapes) {
  Gradients g;
  for (const auto& [name, obj] : arrays) {
    std::unique_ptr<Buffer> b;
    g.views.push_back(ViewGradient(name, obj, shapes, &b));
    if (b != nullptr) g.buffers.push_back(std::move(b));
  }
  return g;
}

py::tuple OutcomeTuple(const PushOutcome& o) {
  return py::make_tuple(std::string(StepOutcomeName(o.outcome)), o.staleness,
                        o.generation);
}

absl::Time FromUnixSeconds(double s) {
  return absl::FromUnixNanos(static_cast<int64_t>(s * 1e9));
}

// A shard's status as psgd.Session.status() and psgd.cluster_status() give
// it: a dict of the step, generation, live workers and counters.
py::dict ShardStatusDict(const ps::ShardStatus& s) {
  py::dict d;
  d["shard"] = s.shard_index;
  d["step"] = s.step;
  d["generation"] = s.generation;
  d["initialized"] = s.initialized;
  d["live_workers"] = s.live_workers;
  d["applied"] = s.counters.applied;
  d["aggregated"] = s.counters.aggregated;
  d["dropped_stale"] = s.counters.dropped_stale;
  d["dropped_surplus"] = s.counters.dropped_surplus;
  d["refused"] = s.counters.refused;
  d["refused_too_stale"] = s.counters.refused_too_stale;
  d["completed_by_leave"] = s.counters.completed_by_leave;
  d["staleness_histogram"] = s.staleness_histogram;
  d["num_parameters"] = s.num_parameters;
  d["pulls_waiting"] = s.pulls_waiting;
  if (s.data_queue) {
    py::dict data;
    data["epoch"] = s.data_epoch;
    data["chunks_done"] = s.data_chunks_done;
    data["chunks_per_epoch"] = s.data_chunks_per_epoch;
    data["chunks_out"] = s.data_chunks_out;
    data["chunks_queued"] = s.data_chunks_queued;
    data["leased"] = s.data_counters.leased;
    data["done"] = s.data_counters.done;
    data["returned"] = s.data_counters.returned;
    data["epochs_completed"] = s.data_counters.epochs_completed;
    d["data"] = data;
  }
  return d;
}

// psgd.cluster_status(config, timeout_s) (`psgd status`): each parameter
// server of the config asked for its Status on its own, without joining
// (worker -1), with the config's cluster name, token and TLS. A list of one
// dict per ps task: "task", "address", and either the shard's status
// (ShardStatusDict) or "error" (the call's status: unreachable, refused).
py::list ClusterStatus(const std::string& config_path, double timeout_s) {
  if (!(timeout_s > 0)) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat("timeout_s must be positive, not ", timeout_s)));
  }
  const ClusterConfig config =
      ValueOrThrow(LoadClusterConfig(ResolveUserPath(config_path)));
  if (config.worker_size() == 0) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat(config_path, " has no worker task")));
  }
  const SessionTaskConfig settings =
      ValueOrThrow(SessionTaskFromConfig(config, 0));
  py::list out;
  for (int i = 0; i < config.ps_size(); ++i) {
    ps::RemoteClientOptions o = settings.client;
    o.addresses = {settings.client.addresses.at(i)};
    o.worker_id = -1;
    // The placement needs a variable; a Status call sends none.
    o.variables = {VariableSpec("status", Shape{1})};
    o.rpc_timeout = absl::Seconds(timeout_s);
    o.shared_memory = false;
    o.ucx = false;
    absl::StatusOr<std::vector<ps::ShardStatus>> status;
    {
      py::gil_scoped_release release;
      absl::StatusOr<std::unique_ptr<ps::RemotePsClient>> client =
          ps::RemotePsClient::Create(o);
      status =
          client.ok()
              ? (*client)->Status()
              : absl::StatusOr<std::vector<ps::ShardStatus>>(client.status());
    }
    py::dict d;
    if (status.ok() && status->size() == 1) {
      d = ShardStatusDict(status->front());
    } else {
      d["error"] = status.ok() ? std::string("no status in the answer")
                               : status.status().ToString();
    }
    d["task"] = absl::StrCat("ps:", i);
    d["address"] = config.ps(i).address();
    out.append(d);
  }
  return out;
}

// A call's status, whether it returns one or a value.
const absl::Status& StatusOf(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

// The status of a call that Interruptible ended (psgd.Interrupted).
inline constexpr absl::string_view kInterruptedPayload = "psgd.interrupted";
absl::Status InterruptedStatus() {
  absl::Status s = absl::CancelledError(
      "interrupted: a signal ended the wait for the servers");
  s.SetPayload(kInterruptedPayload, absl::Cord("1"));
  return s;
}

// How often a call that waits for the servers looks at Python's signals.
constexpr absl::Duration kSignalLook = absl::Milliseconds(100);

// The Python object behind psgd.Session: the worker, the weight buffers
// it writes into and the gradient parts it sends from.
class PyWorker {
 public:
  PyWorker(const std::string& config, const std::string& task,
           const std::string& cluster_from, const std::string& run_dir,
           int64_t log_every, int slurm_port_base) {
    ExternalWorkerOptions o;
    o.config_path = config;
    o.task = task;
    o.cluster_from = cluster_from;
    o.run_dir = run_dir;
    o.log_every = log_every;
    o.slurm_port_base = slurm_port_base;
    worker_ = ValueOrThrow(ExternalWorker::Create(o));
  }

  // Leaving the live set waits on the network: without the GIL. The
  // buffers are released after, with it.
  ~PyWorker() {
    py::gil_scoped_release release;
    worker_.reset();  // its Leave, if any, is tried once
  }
  PyWorker(const PyWorker&) = delete;
  PyWorker& operator=(const PyWorker&) = delete;

  ExternalWorker& w() { return *worker_; }

  // Session.set_interrupt: asked, with the GIL, while a call waits.
  void SetInterruptCheck(py::object check) {
    interrupt_check_ = std::move(check);
  }

  // Whether a call that waits (a sync pull waits for the step, which may
  // take as long as the slowest worker) should end: Python's signal
  // handlers run (PyErr_CheckSignals: on the main thread only) and the
  // interrupt check is asked. Called with the GIL. *raised when a handler
  // or the check raised (its exception set).
  bool ShouldInterrupt(bool* raised) {
    if (PyErr_CheckSignals() != 0) {
      *raised = true;
      return true;
    }
    if (interrupt_check_.is_none()) return false;
    try {
      return py::cast<bool>(interrupt_check_());
    } catch (py::error_already_set& e) {
      e.restore();
      *raised = true;
      return true;
    }
  }

  // Runs `call`, which may wait for the servers, on a thread of its own
  // while the caller's (with the GIL released) asks ShouldInterrupt every
  // kSignalLook. A signal's exception (a KeyboardInterrupt) or the check's
  // true interrupts the worker (ExternalWorker::Interrupt: the pulls under
  // way, unless !pulls, and every wait for servers that do not answer, for
  // good): the call ends, and with it the wait, with the handler's
  // exception, or with psgd.Interrupted when the call was cut short
  // (CANCELLED). A Python handler that only notes the signal (psgd.torch's)
  // thus ends the wait too, through the check. The call must not touch
  // Python.
  template <typename F>
  auto Interruptible(F call, bool pulls = true) -> decltype(call()) {
    using Result = decltype(call());
    std::optional<Result> result;
    Notification done;
    bool raised = false;
    bool interrupted = false;
    {
      py::gil_scoped_release release;
      std::thread thread([&] {
        result.emplace(call());
        done.Notify();
      });
      while (!done.WaitForNotificationWithDeadline(absl::Now() + kSignalLook)) {
        if (interrupted) continue;  // until the cut-short call returns
        py::gil_scoped_acquire acquire;
        if (ShouldInterrupt(&raised)) {
          interrupted = true;
          if (pulls) {
            worker_->Interrupt();
          } else {
            worker_->StopWaiting();
          }
        }
      }
      thread.join();
      if (interrupted && pulls) worker_->ResumePulls();
    }
    if (raised) throw py::error_already_set();
    if (interrupted && absl::IsCancelled(StatusOf(*result))) {
      throw StatusError(InterruptedStatus());
    }
    return *std::move(result);
  }

  py::dict Settings() const {
    const SessionTaskConfig& s = worker_->settings();
    const ClusterConfig& c = worker_->config();
    const config::TrainingConfig& t = c.training();
    py::dict d;
    d["task"] = worker_->task().ToString();
    d["worker_index"] = worker_->task().index;
    d["num_workers"] = c.worker_size();
    // worker { threads }: a Python worker gives it to torch (psgd.torch).
    d["threads"] = WorkerTaskOf(c, worker_->task().index).threads();
    d["threads_set"] = WorkerTaskOf(c, worker_->task().index).has_threads();
    d["chief"] = s.chief;
    d["sync"] = s.session.sync;
    d["overlap"] = s.session.overlap;
    d["max_steps"] = s.max_steps;
    d["max_seconds"] = absl::ToDoubleSeconds(s.max_time);
    d["epochs"] = t.has_epochs() ? t.epochs() : 0;
    d["batch_size"] = t.batch_size();
    d["seed"] = t.seed();
    d["eval_every"] = s.chief_options.eval_every;
    d["eval_examples"] = s.eval_examples;
    d["model"] = c.model().name();
    d["batch_norm_statistics"] =
        c.model().batch_norm_statistics() == config::ModelConfig::LOCAL
            ? "local"
            : "server";
    d["cluster"] = c.name();
    d["replicas_to_aggregate"] = t.replicas_to_aggregate();
    d["total_num_replicas"] = t.total_num_replicas();
    d["synthetic"] = c.data().source() == config::DataConfig::SYNTHETIC;
    d["data_dir"] = c.data().dir();
    d["synthetic_train_size"] = c.data().synthetic_train_size();
    d["synthetic_test_size"] = c.data().synthetic_test_size();
    d["data_from_servers"] = c.data().sharding() == config::DataConfig::SERVERS;
    d["num_samples"] = TrainingSamples(c);
    d["record_samples"] = c.data().record_samples();
    return d;
  }

  void Join(const NamedArrays& weights, int64_t total_batches,
            const std::vector<std::string>& statistics) {
    std::vector<ps::NamedTensorView> views;
    for (const auto& [name, obj] : weights) {
      weights_.push_back(RequestBuffer(name, obj, /*writable=*/true, "weight"));
      objects_.push_back(obj);
      const Buffer& b = *weights_.back();
      views.push_back(
          {name, TensorView(static_cast<float*>(b.info.ptr), b.shape)});
      shapes_[name] = b.shape;
    }
    // Waits for the servers to start and for the chief's initialisation:
    // a signal ends it (psgd.Interrupted).
    ThrowIfError(Interruptible([&] {
      return worker_->Join(std::move(views), total_batches, statistics);
    }));
  }

  py::tuple Push(int64_t step, const NamedArrays& gradients) {
    Gradients g = ViewGradients(gradients, shapes_);
    // Retries while no server answers: a signal ends them.
    const PushOutcome o = ValueOrThrow(
        Interruptible([&] { return worker_->Push(step, g.views); }));
    return OutcomeTuple(o);
  }

  void AddPart(const std::string& name, py::object gradient) {
    std::unique_ptr<Buffer> b;
    ps::NamedConstTensorView view = ViewGradient(name, gradient, shapes_, &b);
    // Kept until FinishParts: the sender thread reads it.
    if (b != nullptr) parts_.push_back(std::move(b));
    part_objects_.push_back(std::move(gradient));
    py::gil_scoped_release release;
    ThrowIfError(worker_->AddPart(std::move(view)));
  }

  py::tuple FinishParts(int64_t step, const NamedArrays& gradients) {
    Gradients g = ViewGradients(gradients, shapes_);
    absl::StatusOr<PushOutcome> r;
    try {
      r = Interruptible([&] { return worker_->FinishParts(step, g.views); });
    } catch (...) {
      parts_.clear();
      part_objects_.clear();
      throw;
    }
    parts_.clear();
    part_objects_.clear();
    return OutcomeTuple(ValueOrThrow(std::move(r)));
  }

  py::tuple RecordStep(int64_t global_step, int64_t epoch, int64_t batch_size,
                       double loss, double accuracy, int64_t batches_done,
                       const std::vector<double>& times) {
    if (times.size() != 5) {
      throw StatusError(absl::InvalidArgumentError(
          "times: (begin, batch_ready, computed, pushed, pulled) in unix "
          "seconds"));
    }
    ExternalWorker::StepStats s;
    s.global_step = global_step;
    s.epoch = epoch;
    s.batch_size = batch_size;
    s.loss = loss;
    s.train_accuracy = accuracy;
    s.batches_done = batches_done;
    StepTimings t;
    t.begin = FromUnixSeconds(times[0]);
    t.batch_ready = FromUnixSeconds(times[1]);
    t.computed = FromUnixSeconds(times[2]);
    t.pushed = FromUnixSeconds(times[3]);
    t.pulled = FromUnixSeconds(times[4]);
    ThrowIfError(worker_->RecordStep(s, t));
    return py::make_tuple(worker_->result().local_steps);
  }

  void RecordEval(int64_t global_step, double accuracy, double loss,
                  int64_t examples, double eval_s, bool final) {
    EvalRecord e;
    e.global_step = global_step;
    e.test_accuracy = accuracy;
    e.test_loss = loss;
    e.examples = examples;
    e.eval_s = eval_s;
    e.final = final;
    ThrowIfError(worker_->RecordEval(e));
  }

  py::list Status() {
    const std::vector<ps::ShardStatus> status =
        ValueOrThrow(Interruptible([&] { return worker_->Status(); }));
    py::list shards;
    for (const ps::ShardStatus& s : status) shards.append(ShardStatusDict(s));
    return shards;
  }

  py::dict Finish(const std::string& reason) {
    // The chief's shutdown retries while no server answers: a signal ends
    // the retries (the pulls are not interrupted: none is under way).
    ThrowIfError(Interruptible([&] { return worker_->Finish(reason); },
                               /*pulls=*/false));
    const ClusterWorkerResult& r = worker_->result();
    py::dict d;
    d["local_steps"] = r.local_steps;
    d["final_global_step"] = r.final_global_step;
    d["seconds"] = r.seconds;
    d["end_reason"] = r.end_reason;
    py::dict outcomes;
    for (const auto& [o, n] : r.outcomes) {
      outcomes[py::str(std::string(StepOutcomeName(o)))] = n;
    }
    d["outcomes"] = outcomes;
    return d;
  }

 private:
  // The arrays the worker reads and writes, released after it: members are
  // destroyed in reverse order, so worker_ (declared last) leaves and joins
  // its pulls first.
  std::vector<py::object> objects_;
  std::vector<std::unique_ptr<Buffer>> weights_;
  Shapes shapes_;
  std::vector<py::object> part_objects_;
  std::vector<std::unique_ptr<Buffer>> parts_;
  py::object interrupt_check_ = py::none();
  std::unique_ptr<ExternalWorker> worker_;
};

}  // namespace
}  // namespace psgd

PYBIND11_MODULE(_psgd, m) {
  using psgd::PyWorker;
  m.doc() =
      "psgd's worker session (worker/session/external_worker.h); use psgd.";

  // The exceptions, by absl status code (and the model-mismatch payload).
  static py::exception<psgd::StatusError> error(m, "Error", PyExc_Exception);
  // Handles, never released: the classes live as long as the module.
  auto sub = [&](const char* name, PyObject* also) -> py::handle {
    py::tuple bases = also == nullptr ? py::make_tuple(error)
                                      : py::make_tuple(error, py::handle(also));
    py::object cls = py::reinterpret_steal<py::object>(PyErr_NewException(
        (std::string("psgd._psgd.") + name).c_str(), bases.ptr(), nullptr));
    m.attr(name) = cls;
    return cls.release();
  };
  static py::handle invalid = sub("InvalidArgumentError", PyExc_ValueError);
  static py::handle precondition = sub("FailedPreconditionError", nullptr);
  static py::handle not_found = sub("NotFoundError", PyExc_FileNotFoundError);
  static py::handle deadline = sub("DeadlineExceededError", PyExc_TimeoutError);
  static py::handle unavailable =
      sub("UnavailableError", PyExc_ConnectionError);
  static py::handle unauthenticated =
      sub("UnauthenticatedError", PyExc_PermissionError);
  static py::handle cancelled = sub("CancelledError", nullptr);
  // A wait for the servers ended by a signal or the interrupt check.
  static py::handle interrupted = sub("Interrupted", nullptr);
  // The data ended (the servers hand out the data).
  static py::handle out_of_range = sub("OutOfRangeError", nullptr);
  static py::handle mismatch = [&] {
    py::object cls = py::reinterpret_steal<py::object>(PyErr_NewException(
        "psgd._psgd.ModelMismatchError", precondition.ptr(), nullptr));
    m.attr("ModelMismatchError") = cls;
    return cls.release();
  }();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const psgd::StatusError& e) {
      const absl::Status& s = e.status();
      py::handle cls = error;
      switch (s.code()) {
        case absl::StatusCode::kInvalidArgument:
          cls = invalid;
          break;
        case absl::StatusCode::kFailedPrecondition:
          cls = s.GetPayload(psgd::kModelMismatchPayload).has_value()
                    ? mismatch
                    : precondition;
          break;
        case absl::StatusCode::kNotFound:
          cls = not_found;
          break;
        case absl::StatusCode::kOutOfRange:
          cls = out_of_range;
          break;
        case absl::StatusCode::kDeadlineExceeded:
          cls = deadline;
          break;
        case absl::StatusCode::kUnavailable:
          cls = unavailable;
          break;
        case absl::StatusCode::kUnauthenticated:
          cls = unauthenticated;
          break;
        case absl::StatusCode::kCancelled:
          cls = s.GetPayload(psgd::kInterruptedPayload).has_value()
                    ? interrupted
                    : cancelled;
          break;
        default:
          break;
      }
      PyErr_SetString(cls.ptr(), std::string(s.message()).c_str());
    }
  });

  py::list outcomes;
  for (psgd::StepOutcome o : psgd::kAllStepOutcomes) {
    outcomes.append(std::string(psgd::StepOutcomeName(o)));
  }
  m.attr("STEP_OUTCOMES") = outcomes;
  m.def("cluster_status", &psgd::ClusterStatus, py::arg("config"),
        py::arg("timeout_s") = 5.0);

  using Release = py::call_guard<py::gil_scoped_release>;
  py::class_<PyWorker>(m, "Worker")
      .def(py::init<const std::string&, const std::string&, const std::string&,
                    const std::string&, int64_t, int>(),
           py::arg("config"), py::arg("task"), py::arg("cluster_from"),
           py::arg("run_dir"), py::arg("log_every"), py::arg("slurm_port_base"))
      .def_property_readonly("settings", &PyWorker::Settings)
      .def_property_readonly("run_dir",
                             [](PyWorker& p) { return p.w().run_dir(); })
      .def_property_readonly("step", [](PyWorker& p) { return p.w().step(); })
      .def_property_readonly("generation",
                             [](PyWorker& p) { return p.w().generation(); })
      .def_property_readonly("learning_rate",
                             [](PyWorker& p) { return p.w().learning_rate(); })
      .def_property_readonly(
          "pulls_in_flight",
          [](PyWorker& p) { return p.w().pulls_in_flight(); })
      .def("stop_reason", [](PyWorker& p) { return p.w().StopReason(); })
      .def("join", &PyWorker::Join, py::arg("weights"),
           py::arg("total_batches"), py::arg("statistics"))
      .def("push", &PyWorker::Push)
      .def("add_part", &PyWorker::AddPart)
      .def("finish_parts", &PyWorker::FinishParts)
      .def("set_interrupt_check", &PyWorker::SetInterruptCheck)
      // Never blocks: a signal handler may call it.
      .def("stop_waiting", [](PyWorker& p) { p.w().StopWaiting(); })
      // The calls that may wait for the other workers' step: interruptible.
      .def("pull",
           [](PyWorker& p) {
             psgd::ThrowIfError(p.Interruptible([&] { return p.w().Pull(); }));
           })
      .def("begin_step",
           [](PyWorker& p) {
             return psgd::StateName(
                 p.Interruptible([&] { return p.w().BeginStep(); }));
           })
      .def("await_weights",
           [](PyWorker& p, int v) {
             return psgd::StateName(
                 p.Interruptible([&] { return p.w().AwaitWeights(v); }));
           })
      .def("forward_done",
           [](PyWorker& p) {
             return psgd::StateName(
                 p.Interruptible([&] { return p.w().ForwardDone(); }));
           })
      .def("settle_pulls",
           [](PyWorker& p) {
             psgd::ThrowIfError(
                 p.Interruptible([&] { return p.w().SettlePulls(); }));
           })
      .def("before_step",
           [](PyWorker& p) {
             absl::StatusOr<psgd::TaskRun::Next> next =
                 p.Interruptible([&] { return p.w().BeforeStep(); });
             psgd::ThrowIfError(next.status());
             return py::make_tuple(next->stop, next->evaluate);
           })
      .def("lease_data",
           [](PyWorker& p) {
             absl::StatusOr<psgd::ps::DataChunk> chunk;
             // While the lease waits for the last epoch's chunks, Python's
             // signal handlers and the interrupt check run between its
             // pauses; a handler that raises (a second Ctrl-C) ends the
             // wait with its exception, the check with psgd.Interrupted.
             bool raised = false;
             bool interrupted = false;
             {
               py::gil_scoped_release release;
               chunk = p.w().LeaseData([&] {
                 py::gil_scoped_acquire acquire;
                 interrupted = p.ShouldInterrupt(&raised);
                 return !interrupted;
               });
             }
             if (raised) throw py::error_already_set();
             if (interrupted && absl::IsCancelled(chunk.status())) {
               throw psgd::StatusError(psgd::InterruptedStatus());
             }
             psgd::ThrowIfError(chunk.status());
             return py::make_tuple(chunk->epoch, chunk->index, chunk->lease,
                                   chunk->samples);
           })
      .def("set_samples",
           [](PyWorker& p, std::vector<int64_t> samples) {
             p.w().SetSamples(std::move(samples));
           })
      .def("use_chunk",
           [](PyWorker& p, int64_t epoch, int64_t index, uint64_t lease) {
             psgd::ThrowIfError(
                 p.w().UseChunk(psgd::ps::DataChunkRef{epoch, index, lease}));
           })
      .def("eval_due", [](PyWorker& p) { return p.w().EvalDue(); })
      .def("evaluated", [](PyWorker& p) { p.w().Evaluated(); })
      .def("maybe_request_checkpoint",
           [](PyWorker& p) {
             psgd::ThrowIfError(p.Interruptible(
                 [&] { return p.w().MaybeRequestCheckpoint(); }));
           })
      .def("record_step", &PyWorker::RecordStep)
      .def("record_eval", &PyWorker::RecordEval)
      .def("status", &PyWorker::Status)
      .def(
          "keep_lease",
          [](PyWorker& p, bool on) { psgd::ThrowIfError(p.w().KeepLease(on)); },
          py::arg("on"), Release())
      // A signal ends the leave's waits (for servers that do not answer,
      // the chief's for the others to leave); the pulls go on (the chief's
      // pull of the final weights).
      .def(
          "leave",
          [](PyWorker& p, bool wait_for_others) {
            psgd::ThrowIfError(
                p.Interruptible([&] { return p.w().Leave(wait_for_others); },
                                /*pulls=*/false));
          },
          py::arg("wait_for_others") = true)
      .def("finish", &PyWorker::Finish);
}
