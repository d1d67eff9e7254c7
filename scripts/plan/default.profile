# psgd's default machine profile: the costs of a cluster's parts, from figures
# already recorded in docs/PERFORMANCE.md and docs/EXPERIMENTS.md (cited beside
# each), so that scripts/plan/plan.py works without calibrating. Keys:
# scripts/plan/machine_profile.py. `scripts/plan/calibrate.py` writes one of these from
# a ps_bench run on your machine.
#
# The derivation. ps_bench --only=ps,ucx,tcp --shards=2 --workers=4 (loopback,
# cifar10_tutorial: 4,273,192 bytes pushed and as many pulled per worker step,
# 8.546 MB; sync N = M = 4, Adam), AMD EPYC family 25 model 1, 2026-11-29
# (PERFORMANCE.md, "The servers' loops vectorised", build C): the parameter
# server over gRPC 11.14 ms CPU per worker step, over UCX 12.72 ms, the plain
# TCP echo of the same bytes 3.9 ms. The echo is the kernel's share, both
# ends: 3.9 ms / 8.546 MB = 0.456 ns a byte, half of it (0.228) on the shard.
# The rest, 11.14 - 3.9 = 7.24 ms = 0.847 ns a byte moved, is charged to the
# shards (an upper bound: it includes the clients' gRPC framing, which runs
# on the workers' hosts in a real cluster), split as push 0.35 (check and
# copy) + 0.15 (sum, 0.6 ns per float32 parameter) and pull 0.30, plus Adam
# at 1.2 ns a parameter (a quarter of an update per worker step: 0.32 ms);
# 6.84 + 0.32 = 7.16 ms of the 7.24. The split is an assumption; the sum is
# measured.
server.stage_ns_per_byte.fp32 = 0.35
server.serve_ns_per_byte.fp32 = 0.30
server.sum_ns_per_param = 0.6
# 16-bit wire: ps_bench --shards=2 --workers=4 --wire=bf16, 2026-11-25
# (PERFORMANCE.md, "Parameter server against gRPC and TCP"): CPU ms per
# worker step fp32 6.32, bf16 4.83 for half the wire bytes: 1.53x fp32's
# cost per wire byte. fp16: no CPU figure recorded; assumed as bf16.
server.stage_ns_per_byte.bf16 = 0.535
server.serve_ns_per_byte.bf16 = 0.46
server.stage_ns_per_byte.fp16 = 0.535
server.serve_ns_per_byte.fp16 = 0.46
# Optimizers: Adam as above; SGD and momentum assumed (fewer slots).
server.apply_ns_per_param.adam = 1.2
server.apply_ns_per_param.momentum = 0.8
server.apply_ns_per_param.sgd = 0.5
# Per request on the shard: assumed (no figure isolates it).
server.us_per_message = 10
# Transports. gRPC: the TCP echo's share on the shard (above). UCX (tcp):
# 12.72 - 11.14 = 1.58 ms more per worker step than gRPC, half on the shard:
# 0.228 + 0.092 = 0.32. Shared memory: one copy, assumed 0.1. Latencies and
# per-message CPU are assumed (the straggler study's pushes of 69 KB took
# 1.3 ms at the median on a loaded 2-core machine, an upper bound).
transport.grpc.server_ns_per_byte = 0.228
transport.grpc.us_per_message = 30
transport.grpc.latency_us = 100
transport.ucx.server_ns_per_byte = 0.32
transport.ucx.us_per_message = 20
transport.ucx.latency_us = 50
transport.shm.server_ns_per_byte = 0.1
transport.shm.us_per_message = 10
transport.shm.latency_us = 20
# The workers' own CPU per byte pushed or pulled (charged only when a
# simulation is given the machine's cores): the other half of what the
# shard's transport figure is half of (gRPC, UCX), the copy's for shared
# memory. Assumed equal to the shard's share.
worker.ns_per_byte.grpc = 0.228
worker.ns_per_byte.ucx = 0.32
worker.ns_per_byte.shm = 0.1
# Links carry their rate: the bandwidth study's 1G run moved its bytes in
# 0.98x the byte bound (EXPERIMENTS.md, "Across hosts: 10G and 1G links").
link.efficiency = 1.0
# Overlap (CLUSTER.md, "Overlap"): the push of the last layers goes out
# during the backward (about 2/3 of a step's compute), the next forward
# (1/3) awaits each layer's weights. Assumed fractions.
overlap.backward_fraction = 0.67
overlap.forward_fraction = 0.33
# The registry's models (worker --list_models; sizes as docs/ give them).
model.cifar10_linear.parameters = 17290
model.cifar10_tutorial.parameters = 1068298
model.resnet20.parameters = 272474
model.resnet56.parameters = 855770
model.wrn_16_4.parameters = 2748890
model.wrn_28_10.parameters = 36479194
model.cnn10.parameters = 1923914
model.resnet50_cifar.parameters = 23520842
# Compute per worker step. resnet20 on a GPU: t(b) = 3 ms + 8 us x b, an
# ASSUMPTION (EXPERIMENTS.md, "The network at GPU step times": no GPU was
# lent); the tutorial model on 2 CPU cores shared by six processes: 0.404 s
# at batch 128 (EXPERIMENTS.md, "Sync against async"); cifar10_linear's
# emulated 55 ms (the straggler study).
compute.resnet20.gpu_ms.b128 = 4.024
compute.resnet20.gpu_ms.b32 = 3.256
compute.cifar10_tutorial.cpu_ms.b128 = 404
compute.cifar10_linear.cpu_ms.b128 = 55
