#!/usr/bin/env bash
# Create (or reuse) the directory holding the external validators: a Python virtualenv with
# cfn-lint, checkov, kubernetes-validate, moto server, ShellCheck, jsonschema and PyYAML, and
# beside it (in cdk-nag/) the npm packages of cdk-nag's AwsSolutions pack, from the lock file
# tests/tools/cdk-nag/package-lock.json, and (in mdbook/) mdBook from crates.io, which builds
# the book in docs/book/.
#
#   tests/tools/install-validators.sh
#
# It lives at ${HYPERFORGE_VENV:-<repo>/.venv-validators}. A stamp file for each part records
# what it was built from; when it matches, pip (or npm) is not run at all.
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

# --- cdk-nag (npm) ------------------------------------------------------------------------
nag_source="$repo_root/tests/tools/cdk-nag"
nag_dir="$venv/cdk-nag"
nag_stamp="$nag_dir/.hyperforge-lock.sha256"

install_cdk_nag() {
    command -v node >/dev/null 2>&1 || die "node not found; install Node.js 18+ (cdk-nag runs on it)"
    command -v npm >/dev/null 2>&1 || die "npm not found; install it with Node.js"
    node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' \
        || die "Node.js $(node --version) is too old; cdk-nag needs 18.12 or later"
    local want_nag
    want_nag="$( { cat "$nag_source/package.json" "$nag_source/package-lock.json"; node --version; } | sha256sum | cut -d' ' -f1)"
    if [[ -f "$nag_stamp" && "$(cat "$nag_stamp")" == "$want_nag" && -f "$nag_dir/node_modules/cdk-nag/package.json" && -f "$nag_dir/node_modules/cdk-nag-v2/package.json" ]]; then
        log "up to date: $nag_dir"
        return
    fi
    log "installing cdk-nag from ${nag_source#"$repo_root"/}/package-lock.json (npm ci)"
    rm -rf "$nag_dir"
    mkdir -p "$nag_dir"
    cp "$nag_source/package.json" "$nag_source/package-lock.json" "$nag_dir/"
    (cd "$nag_dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error) \
        || die "npm ci failed in $nag_dir; see the messages above"
    echo "$want_nag" >"$nag_stamp"
}

# --- mdBook (crates.io) -------------------------------------------------------------------
mdbook_version="0.5.4"
mdbook_dir="$venv/mdbook"

install_mdbook() {
    if [[ "$("$mdbook_dir/bin/mdbook" --version 2>/dev/null)" == "mdbook v$mdbook_version" ]]; then
        log "up to date: $mdbook_dir (mdbook $mdbook_version)"
        return
    fi
    command -v cargo >/dev/null 2>&1 || die "cargo not found; mdBook is installed with it"
    log "installing mdbook $mdbook_version from crates.io into $mdbook_dir (cargo install; about 3 minutes on 2 cores)"
    cargo install mdbook --version "$mdbook_version" --locked --no-default-features \
        --root "$mdbook_dir" --quiet \
        || die "cargo install mdbook failed; see the messages above"
}

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && tools_present; then
    log "up to date: $venv"
    install_cdk_nag
    install_mdbook
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

install_cdk_nag
install_mdbook
