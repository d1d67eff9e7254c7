#!/usr/bin/env bash
# worker --list_models prints every registry model with its parameter count,
# the memory a step plans per image for the layer-graph networks, and
# ", batch norm" after the models with batch norm (the scripts' --model
# and --bn checks, scripts/lib/cluster.sh's check_model, read it).
set -euo pipefail
out="$(worker/worker --list_models)"
echo "${out}"
for want in "cifar10_tutorial +1,068,298 parameters" \
    "cifar10_linear +17,290 parameters" \
    "resnet20 +272,474 parameters, [0-9]+\.[0-9]{2} MB a step per image, batch norm" \
    "resnet56 +855,770 parameters, [0-9]+\.[0-9]{2} MB a step per image, batch norm" \
    "wrn_16_4 +2,748,890 parameters, [0-9]+\.[0-9]{2} MB a step per image, batch norm" \
    "wrn_28_10 +36,479,194 parameters, [0-9]+\.[0-9]{2} MB a step per image, batch norm" \
    "cnn10 +1,923,914 parameters, [0-9]+\.[0-9]{2} MB a step per image, batch norm" \
    "resnet50_cifar +23,520,842 parameters, [0-9]+\.[0-9]{2} MB a step per image, batch norm"; do
  if ! grep -Eq "^${want}$" <<<"${out}"; then
    echo "list_models_test: no line '${want}'" >&2
    exit 1
  fi
done
