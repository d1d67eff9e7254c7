#!/usr/bin/env bash
# worker --list_models prints every registry model with its parameter count.
set -euo pipefail
out="$(worker/worker --list_models)"
echo "${out}"
for want in "cifar10_tutorial +1,068,298" "resnet20 +272,474" \
    "resnet56 +855,770" "wrn_16_4 +2,748,890" "wrn_28_10 +36,479,194" \
    "cnn10 +1,923,914" "resnet50_cifar +23,520,842"; do
  if ! grep -Eq "^${want} parameters$" <<<"${out}"; then
    echo "list_models_test: no line '${want} parameters'" >&2
    exit 1
  fi
done
