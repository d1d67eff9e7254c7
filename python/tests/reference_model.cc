// _psgd_reference: the C++ workers' models on the CPU backend, for the
// tests that compare psgd.models' PyTorch networks with them (test only;
// copies its arrays). gradients(model, weights, images, labels) ->
// (loss, cross_entropy, {name: gradient}).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "worker/cpu/cpu_backend.h"
#include "worker/models/registry.h"

namespace py = pybind11;

namespace psgd {
namespace {

template <typename T>
T OrThrow(absl::StatusOr<T> v) {
  if (!v.ok()) throw std::invalid_argument(v.status().ToString());
  return *std::move(v);
}

using Floats = py::array_t<float, py::array::c_style | py::array::forcecast>;

py::tuple Gradients(
    const std::string& name, const std::map<std::string, Floats>& weights,
    const Floats& images,
    const py::array_t<int32_t, py::array::c_style | py::array::forcecast>&
        labels) {
  CpuBackendOptions options;
  options.threads = 1;
  std::unique_ptr<Backend> backend = OrThrow(CreateCpuBackend(options));
  std::unique_ptr<Model> model = OrThrow(CreateModel(name, backend.get()));
  NamedConstViews w;
  for (const auto& [n, a] : weights) {
    w[n] = ConstTensorView(a.data(), Shape(a.shape(), a.shape() + a.ndim()));
  }
  ConstTensorView x(images.data(),
                    Shape(images.shape(), images.shape() + images.ndim()));
  NamedTensors grads;
  const StepResult r = OrThrow(model->ComputeGradients(
      w, x, absl::MakeConstSpan(labels.data(), labels.size()), &grads));
  py::dict out;
  for (const auto& [n, g] : grads) {
    Floats a(std::vector<py::ssize_t>(g.shape().begin(), g.shape().end()));
    std::copy(g.data(), g.data() + g.size(), a.mutable_data());
    out[py::str(n)] = a;
  }
  return py::make_tuple(r.loss, r.cross_entropy, out);
}

}  // namespace
}  // namespace psgd

PYBIND11_MODULE(_psgd_reference, m) {
  m.def("gradients", &psgd::Gradients, py::arg("model"), py::arg("weights"),
        py::arg("images"), py::arg("labels"));
}
