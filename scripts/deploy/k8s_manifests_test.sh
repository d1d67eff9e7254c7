#!/usr/bin/env bash
# Runs scripts/deploy/k8s_manifests_test.py with Debian's python3.
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/k8s_manifests_test.py"
