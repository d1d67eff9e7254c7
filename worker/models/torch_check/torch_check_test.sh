#!/usr/bin/env bash
# One training step of a model in C++ (dump_step) against PyTorch
# (torch_check.py). Usage: torch_check_test.sh MODEL BATCH FIRST_SEED [BACKEND]
# (BACKEND: dump_step's --backend, cpu by default).
#
# A batch that comes within float32 rounding of a ReLU kink or a max-pooling
# tie is not a fair test (torch_check.py exits 3); the next seed is drawn, up
# to 10. The seeds are deterministic, so BUILD names a first seed that is
# known to be fair and the loop only matters when the networks change.
set -euo pipefail
model="$1"
batch="$2"
seed="$3"
backend="${4:-cpu}"
here=worker/models/torch_check
if ! python3 -c 'import torch' 2>/dev/null; then
  echo "torch_check_test: python3 has no torch; run scripts/setup.sh" >&2
  exit 1
fi
dir="${TEST_TMPDIR:-$(mktemp -d)}/${model}"
mkdir -p "${dir}"
for attempt in $(seq 1 10); do
  "${here}/dump_step" --model="${model}" --batch="${batch}" --seed="${seed}" \
    --out_dir="${dir}" --backend="${backend}"
  rc=0
  python3 "${here}/torch_check.py" --model="${model}" --dir="${dir}" || rc=$?
  if [ "${rc}" -ne 3 ]; then
    echo "torch_check_test: ${model} batch ${batch} seed ${seed} backend ${backend}"
    exit "${rc}"
  fi
  seed=$((seed + 1))
done
echo "torch_check_test: no fair batch in 10 seeds" >&2
exit 1
