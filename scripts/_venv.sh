# Sourced by scripts/demo and scripts/test: make the virtualenv and install tenure into
# it (again only when pyproject.toml changed). $1 is the extras to install. PYTHON picks
# the interpreter and VENV the directory (default .venv), so one checkout can hold one
# virtualenv per Python: `PYTHON=python3.13 VENV=.venv-3.13 scripts/test`.
# Two runs at once (a test run and the demo, say) wait for each other here rather
# than both building the same .venv; a failed install leaves no "installed" stamp.
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "tenure needs Python 3.11 or newer; set PYTHON=/path/to/python3.11" >&2
    exit 2
fi
if command -v flock >/dev/null 2>&1; then
    exec 9>"$VENV.lock"
    flock 9
fi
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    echo "==> creating $VENV" >&2
    if ! "$PYTHON" -m venv --clear "$VENV"; then
        echo "could not create $VENV with $PYTHON (on Debian/Ubuntu: apt install python3-venv)" >&2
        exit 2
    fi
fi
stamp=$VENV/.tenure-installed-$1
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "==> installing tenure${1:+[$1]} into $VENV" >&2
    rm -f "$stamp"
    if ! { "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip &&
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e ".${1:+[$1]}"; }; then
        echo "installing tenure${1:+[$1]} into $VENV failed (see pip's message above)" >&2
        exit 2
    fi
    echo "$want" > "$stamp"
fi
if command -v flock >/dev/null 2>&1; then
    exec 9>&-
fi
