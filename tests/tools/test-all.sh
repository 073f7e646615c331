#!/usr/bin/env bash
# The project's full test run (what CI runs through .ci/run):
#
#   tests/tools/test-all.sh
#
# 1. formatting and clippy (fast failures), that the library needs no optional dependency
#    without its feature (`cargo tree --no-default-features`) and builds with each feature
#    alone, the docs without warnings, and a crate outside the repository that depends on
#    this checkout (tests/tools/user-crate.sh);
# 2. the external validators' virtualenv (tests/tools/install-validators.sh; a no-op
#    when it is already up to date);
# 3. a moto server on a free loopback port for deploy-path tests, exported as
#    HYPERFORGE_MOTO_ENDPOINT (tests that do not deploy ignore it);
# 4. the book (mdbook build of docs/book/), cargo test for every target, then the doc tests;
# 5. the `deploy` feature (AWS SDK): its unit and doc tests, then tests/deploy_moto.rs
#    against the moto server, one test at a time (they share the server).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo_root="$(pwd)"

# Each step says when it starts, with the time the previous one took and the time so far.
step_started=$SECONDS
step() {
    printf '\n==> %s   (previous step %d s, %d s in all)\n' "$*" "$((SECONDS - step_started))" "$SECONDS" >&2
    step_started=$SECONDS
}
die() { printf 'test-all: error: %s\n' "$*" >&2; exit 1; }

export HYPERFORGE_VENV="${HYPERFORGE_VENV:-$repo_root/.venv-validators}"

step "cargo fmt --all -- --check"
cargo fmt --all -- --check

step "the library without default features has no optional dependencies (cargo tree)"
# Only resolves the graph (no compilation): `clap`, `clap_complete` and `similar` belong to the
# `cli` feature, `handlebars` to `runbook`, `yaml-rust2` to `stackfile`, `cfn-guard` to
# `policy`, so a library user with `default-features = false` does not build them; `kube` is
# no dependency at all.
lib_deps="$(cargo tree -e normal --no-default-features -p hyperforge --prefix none)"
if optional_deps="$(grep -E '^(clap[a-z_]*|similar|handlebars|yaml-rust2|cfn-guard|kube[a-z-]*) ' <<<"$lib_deps")"; then
    die "the library depends on optional crates without their features:
$optional_deps"
fi

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo clippy --all-targets --features deploy -- -D warnings"
cargo clippy --all-targets --features deploy -- -D warnings

# Every feature on its own compiles without warnings (dead code behind a `cfg`, a missing
# gate): checks only, sharing the dependencies' metadata with the clippy runs above. The
# policy module (cfn-guard) builds without the CLI; the default features enable it through
# `cli`, so the workspace tests below evaluate the vendored packs (tests/it/policy.rs).
step "cargo clippy --lib --no-default-features -- -D warnings"
cargo clippy --lib --no-default-features -- -D warnings
for feature in k8s-v1_33 runbook stackfile policy cli deploy; do
    step "cargo clippy --lib --no-default-features --features $feature -- -D warnings"
    cargo clippy --lib --no-default-features --features "$feature" -- -D warnings
done

step "cargo doc --no-deps (RUSTDOCFLAGS=-D warnings)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps

step "a crate outside the repository builds and runs the README's library example"
tests/tools/user-crate.sh

step "installing the external validators into $HYPERFORGE_VENV"
tests/tools/install-validators.sh

# --- moto server (CloudFormation/EC2/IAM emulator for deploy-path tests) ---------------
moto_pid=""
moto_log="$repo_root/target/moto.log"

stop_moto() {
    if [[ -n "$moto_pid" ]] && kill -0 "$moto_pid" 2>/dev/null; then
        kill "$moto_pid" 2>/dev/null || true
        wait "$moto_pid" 2>/dev/null || true
    fi
    moto_pid=""
}
trap stop_moto EXIT

start_moto() {
    local python="$HYPERFORGE_VENV/bin/python" server="$HYPERFORGE_VENV/bin/moto_server" port
    [[ -x "$server" ]] || die "moto_server not found at $server"
    port="$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
    mkdir -p "$(dirname "$moto_log")"
    "$server" -H 127.0.0.1 -p "$port" >"$moto_log" 2>&1 &
    moto_pid=$!
    # Wait up to 30 s for the management API to answer; stop early if moto died.
    if ! "$python" - "$port" "$moto_pid" <<'PY'
import os, sys, time, urllib.request
port, pid = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1).read()
        sys.exit(0)
    except Exception:
        try:
            os.kill(pid, 0)
        except OSError:
            print("moto_server exited during start-up", file=sys.stderr)
            sys.exit(1)
        time.sleep(0.2)
print("moto_server did not answer on /moto-api/ within 30 s", file=sys.stderr)
sys.exit(1)
PY
    then
        printf -- '--- last lines of %s\n' "$moto_log" >&2
        tail -n 30 "$moto_log" >&2 || true
        die "could not start moto_server on 127.0.0.1:$port"
    fi
    export HYPERFORGE_MOTO_ENDPOINT="http://127.0.0.1:$port"
}

step "starting moto_server (log: ${moto_log#"$repo_root"/})"
start_moto
printf 'moto_server pid %s at %s\n' "$moto_pid" "$HYPERFORGE_MOTO_ENDPOINT" >&2

step "mdbook build docs/book (into a temporary directory)"
book_out="$(mktemp -d)"
"$HYPERFORGE_VENV/mdbook/bin/mdbook" build docs/book --dest-dir "$book_out"
rm -rf "$book_out"

step "the README's first set-up command (cargo run --example reference_stacks, into a temporary directory)"
readme_out="$(mktemp -d)"
cargo run --quiet --example reference_stacks -- "$readme_out/hyperforge.out" >/dev/null
[[ -f "$readme_out/hyperforge.out/manifest.json" ]] || die "the reference_stacks example wrote no manifest.json"
rm -rf "$readme_out"

step "cargo test --workspace --all-targets"
cargo test --workspace --all-targets

step "cargo run -p team-deepseek (a crate depending on hyperforge as a user's does)"
# Its output is validated by tests/it/open_model.rs, which compiles the same source; here the
# crate's own binary writes it, as its README says.
cargo run -q -p team-deepseek -- target/team-deepseek.out

step "cargo test --workspace --doc"
cargo test --workspace --doc

step "cargo test --features deploy --lib deploy:: (deploy unit tests)"
cargo test --features deploy --lib deploy::

step "cargo test --features deploy --doc deploy"
cargo test --features deploy --doc deploy

step "cargo test --features deploy --test deploy_moto -- --test-threads=1"
cargo test --features deploy --test deploy_moto -- --test-threads=1

stop_moto
echo "all checks passed in $SECONDS s"
