#!/usr/bin/env bash
echo "bazel coverage is not supported in this offline workspace (third_party/remote_coverage_tools is a stand-in)" >&2
exit 1
