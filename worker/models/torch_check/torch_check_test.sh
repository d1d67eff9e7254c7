#!/usr/bin/env bash
# One training step of a model in C++ (dump_step) against PyTorch
# (torch_check.py). Usage:
#   torch_check_test.sh MODEL BATCH FIRST_SEED [BACKEND [CHECK_FLAGS]]
# (BACKEND: dump_step's --backend, cpu by default; CHECK_FLAGS: more flags
# for torch_check.py, --bf16 for a backend with compute=bf16). A bfloat16
# backend on a CPU without AVX-512 BF16 is refused by dump_step; the test
# then says so and passes (there is nothing of ours to check there).
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
check_flags="${5:-}"
here=worker/models/torch_check
if ! python3 -c 'import torch' 2>/dev/null; then
  echo "torch_check_test: python3 has no torch; run scripts/setup.sh" >&2
  exit 1
fi
dir="${TEST_TMPDIR:-$(mktemp -d)}/${model}"
mkdir -p "${dir}"
for attempt in $(seq 1 10); do
  rc=0
  "${here}/dump_step" --model="${model}" --batch="${batch}" --seed="${seed}" \
    --out_dir="${dir}" --backend="${backend}" 2>"${dir}/dump_step.err" || rc=$?
  if [ "${rc}" -ne 0 ]; then
    cat "${dir}/dump_step.err" >&2
    if grep -q 'needs a CPU with AVX-512 BF16' "${dir}/dump_step.err"; then
      echo "torch_check_test: SKIP ${model} on ${backend}: no AVX-512 BF16 here"
      exit 0
    fi
    exit "${rc}"
  fi
  # shellcheck disable=SC2086  # CHECK_FLAGS: words of their own
  python3 "${here}/torch_check.py" --model="${model}" --dir="${dir}" \
    ${check_flags} || rc=$?
  if [ "${rc}" -ne 3 ]; then
    echo "torch_check_test: ${model} batch ${batch} seed ${seed} backend ${backend}"
    exit "${rc}"
  fi
  seed=$((seed + 1))
done
echo "torch_check_test: no fair batch in 10 seeds" >&2
exit 1
