#!/usr/bin/env bash
# Create (or reuse) the Python virtualenv holding the external validators:
# cfn-lint, checkov, kubernetes-validate, moto server, ShellCheck, jsonschema and PyYAML.
#
#   tests/tools/install-validators.sh
#
# The venv lives at ${HYPERFORGE_VENV:-<repo>/.venv-validators}. A stamp file inside it
# records the requirement set it was built from; when it matches, pip is not run at all.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
requirements="$repo_root/tests/tools/requirements-validators.txt"
venv="${HYPERFORGE_VENV:-$repo_root/.venv-validators}"
stamp="$venv/.hyperforge-requirements.sha256"
python="${PYTHON:-python3}"
tools=(cfn-lint checkov kubernetes-validate moto_server shellcheck)

log() { printf 'install-validators: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v "$python" >/dev/null 2>&1 || die "$python not found; install Python 3.9+ with the venv module"
[[ -f "$requirements" ]] || die "missing $requirements"

# The stamp covers the requirement file and the interpreter version, so a Python upgrade
# or an edited pin both force a reinstall.
want="$( { cat "$requirements"; "$python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)"

tools_present() {
    local t
    for t in "${tools[@]}"; do
        [[ -x "$venv/bin/$t" ]] || return 1
    done
    "$venv/bin/python" -c 'import jsonschema, yaml' >/dev/null 2>&1
}

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && tools_present; then
    log "up to date: $venv"
    exit 0
fi

if [[ -d "$venv" ]] && ! "$venv/bin/python" -c 'import sys' >/dev/null 2>&1; then
    log "removing broken virtualenv at $venv"
    rm -rf "$venv"
fi

if [[ ! -d "$venv" ]]; then
    log "creating virtualenv at $venv"
    "$python" -m venv "$venv" || die "'$python -m venv' failed (on Debian/Ubuntu: apt-get install python3-venv)"
fi

rm -f "$stamp"
log "installing pinned validators from ${requirements#"$repo_root"/} (takes about a minute on a cold cache)"
start=$SECONDS
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements" \
    || die "pip install failed; see the messages above"
"$venv/bin/python" -m pip check || die "pip check found conflicting dependencies in $venv"
tools_present || die "a validator executable is missing from $venv/bin after install (expected: ${tools[*]})"

echo "$want" >"$stamp"
log "installed in $((SECONDS - start)) s: $("$venv/bin/cfn-lint" --version 2>&1 | head -n1), checkov $("$venv/bin/checkov" --version 2>/dev/null | head -n1)"
