#!/usr/bin/env bash
# Builds and runs a crate that depends on this checkout the way a library user does:
#
#   tests/tools/user-crate.sh
#
# The crate lives in a temporary directory outside the repository, so this repository's
# `.cargo/config.toml` (which selects a Kubernetes version for k8s-openapi) does not apply; it
# depends on hyperforge by path with `default-features = false` and the minimal feature set
# documented in README.md ("Using it as a library"), and its `main.rs` is that section's
# example. The run fails if the out-of-the-box build breaks (k8s-openapi without a version, a
# dependency the minimal set no longer covers) or the example's output changes.
#
# The build reuses `${CARGO_TARGET_DIR:-target}/user-crate` and this repository's Cargo.lock,
# so after the first run only hyperforge and the crate are recompiled.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo_root="$(pwd)"
target_dir="${CARGO_TARGET_DIR:-$repo_root/target}/user-crate"

die() { printf 'user-crate: error: %s\n' "$*" >&2; exit 1; }

# The README's library example: the first ```rust block after the heading.
example="$(awk '
    /^### Using it as a library/ { section = 1; next }
    section && /^#/ { exit }
    section && /^```rust$/ { inside = 1; next }
    inside && /^```$/ { exit }
    inside { print }
' README.md)"
[[ -n "$example" ]] || die "no \`\`\`rust block under \"### Using it as a library\" in README.md"
# The dependency line of the same section's ```toml block.
dependency="$(awk '
    /^### Using it as a library/ { section = 1; next }
    section && /^#/ { exit }
    section && /^```toml$/ { inside = 1; next }
    inside && /^```$/ { exit }
    inside && /^hyperforge = / { print }
' README.md)"
[[ -n "$dependency" ]] || die "no \`hyperforge = ...\` line under \"### Using it as a library\" in README.md"
# Point the documented dependency at this checkout.
dependency="$(sed -E "s#path = \"[^\"]*\"#path = \"$repo_root\"#" <<<"$dependency")"
grep -q "path = \"$repo_root\"" <<<"$dependency" || die "the README dependency line has no path: $dependency"

crate="$(mktemp -d "${TMPDIR:-/tmp}/hyperforge-user-crate.XXXXXX")"
trap 'rm -rf "$crate"' EXIT
case "$crate" in
    "$repo_root"/*) die "the temporary crate $crate is inside the repository" ;;
esac
mkdir -p "$crate/src"
cat >"$crate/Cargo.toml" <<TOML
[package]
name = "hyperforge-user"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
$dependency

[workspace]
TOML
printf '%s\n' "$example" >"$crate/src/main.rs"
cp Cargo.lock "$crate/Cargo.lock"

printf 'user-crate: %s\n' "$dependency" >&2
# Nothing of this repository's build environment may leak in.
unset K8S_OPENAPI_ENABLED_VERSION
output="$(cd "$crate" && CARGO_TARGET_DIR="$target_dir" cargo run --quiet)" \
    || die "the user crate did not build or run (dependency: $dependency)"

for expected in demo/01-foundation.template.json demo/04-cluster.template.json; do
    grep -qxF "$expected" <<<"$output" || die "the example did not write $expected; it printed:
$output"
done
if grep -q 'RUNBOOK.md$' <<<"$output"; then
    die "the minimal feature set wrote a runbook (the \`runbook\` feature is off):
$output"
fi
# The minimal feature set compiles none of the optional features' dependencies.
tree="$(cd "$crate" && cargo tree -e normal --prefix none)"
if extra="$(grep -E '^(clap[a-z_]*|similar|handlebars|yaml-rust2|cfn-guard|kube[a-z-]*|aws-[a-z-]+) ' <<<"$tree")"; then
    die "the minimal feature set depends on optional crates:
$extra"
fi
printf 'user-crate: built and ran; %s files\n' "$(wc -l <<<"$output")" >&2
