#!/usr/bin/env bash
# worker --list_models prints every registry model with its parameter count,
# and ", batch norm" after the models with batch norm (the scripts' --model
# and --bn checks, scripts/lib/cluster.sh's check_model, read it).
set -euo pipefail
out="$(worker/worker --list_models)"
echo "${out}"
for want in "cifar10_tutorial +1,068,298 parameters" \
    "cifar10_linear +17,290 parameters" \
    "resnet20 +272,474 parameters, batch norm" \
    "resnet56 +855,770 parameters, batch norm" \
    "wrn_16_4 +2,748,890 parameters, batch norm" \
    "wrn_28_10 +36,479,194 parameters, batch norm" \
    "cnn10 +1,923,914 parameters, batch norm" \
    "resnet50_cifar +23,520,842 parameters, batch norm"; do
  if ! grep -Eq "^${want}$" <<<"${out}"; then
    echo "list_models_test: no line '${want}'" >&2
    exit 1
  fi
done
