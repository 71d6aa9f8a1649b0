#!/usr/bin/env bash
# Build a Lambda deployment directory: the example's handler and every dependency
# (langgraph-s3 from this checkout with its `encryption` extra, LangGraph) as Linux wheels for the target
# runtime, whatever machine this runs on.
#
#   examples/lambda/build.sh                      # build/ for template.yaml (x86_64, 3.12)
#   LAMBDA_ARCH=arm64 LAMBDA_PYTHON=3.11 BUILD_DIR=/tmp/gc-build examples/lambda/build.sh
#   (cd /tmp/gc-build && zip -qr ../collector.zip .)   # the package infra/gc.yaml expects
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"
arch="${LAMBDA_ARCH:-x86_64}"
pyver="${LAMBDA_PYTHON:-3.12}"
out="${BUILD_DIR:-$here/build}"
case "$arch" in
  x86_64) platform=manylinux2014_x86_64 ;;
  arm64) platform=manylinux2014_aarch64 ;;
  *) echo "LAMBDA_ARCH must be x86_64 or arm64, not $arch" >&2; exit 2 ;;
esac

rm -rf "$out" "$here/.wheels"
"$python" -m pip wheel --no-deps --wheel-dir "$here/.wheels" "$root"
wheels=("$here"/.wheels/langgraph_s3-*.whl)
wheel="${wheels[0]}"
# With the `encryption` extra (cryptography): CHECKPOINT_KMS_KEY, and the collector
# built from this directory for sealed threads, need it (without it: MissingDependencyError).
# Binary wheels only: cryptography, zstandard, ormsgpack, pyfastcdc and pydantic-core
# are compiled, and must match Lambda's Linux, CPU architecture and Python version.
"$python" -m pip install --target "$out" \
  --platform "$platform" --implementation cp --python-version "$pyver" \
  --only-binary=:all: \
  "$wheel[encryption]" -r "$here/requirements.txt"
cp "$here/handler.py" "$here/approval_agent.py" "$out/"
echo "built $out for python$pyver $arch ($(du -sh "$out" | cut -f1))"
