# Sourced by scripts/demo and scripts/test: make .venv and install tenure into it
# (again only when pyproject.toml changed). $1 is the extras to install.
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "tenure needs Python 3.11 or newer; set PYTHON=/path/to/python3.11" >&2
    exit 2
fi
if [ ! -x .venv/bin/python ]; then
    echo "==> creating .venv" >&2
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.tenure-installed-$1
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "==> installing tenure${1:+[$1]} into .venv" >&2
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".${1:+[$1]}"
    echo "$want" > "$stamp"
fi
