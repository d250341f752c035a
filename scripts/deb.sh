#!/usr/bin/env bash
# Builds a Debian package of retry from this repository with dpkg-deb alone:
#
#   scripts/deb.sh [OUTDIR]     (default: target/debian)
#
# It installs /usr/bin/retry, the man page, and the bash, zsh and fish completions where those
# shells look for them, and replaces Debian's own `retry` package (a different program with the
# same name, whose options differ). Prints the path of the .deb it made. With
# RETRY_DEB_BINARY=FILE it packages FILE as the binary instead of building one, as the tests
# do to check the package without a release build.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-target/debian}
name=retry-wrapper
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)

binary=${RETRY_DEB_BINARY:-}
if [ -z "$binary" ]; then
  cargo build --release --locked --quiet
  binary=target/release/retry
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/${name}_${version}_${arch}"
install -D -m 0755 "$binary" "$root/usr/bin/retry"
install -d "$root/usr/share/man/man1"
gzip -9n < man/retry.1 > "$root/usr/share/man/man1/retry.1.gz"
chmod 0644 "$root/usr/share/man/man1/retry.1.gz"
install -D -m 0644 completions/retry.bash "$root/usr/share/bash-completion/completions/retry"
install -D -m 0644 completions/_retry "$root/usr/share/zsh/vendor-completions/_retry"
install -D -m 0644 completions/retry.fish "$root/usr/share/fish/vendor_completions.d/retry.fish"
doc="$root/usr/share/doc/$name"
install -d "$doc"
{
  echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
  echo "Upstream-Name: $name"
  echo
  echo "Files: *"
  echo "Copyright: 2026 The retry developers"
  echo "License: MIT or Apache-2.0"
  echo
  echo "License: MIT"
  sed 's/^$/./; s/^/ /' LICENSE-MIT
  echo
  echo "License: Apache-2.0"
  echo " On Debian systems, the full text of the Apache License 2.0 is in"
  echo " /usr/share/common-licenses/Apache-2.0."
} > "$doc/copyright"
chmod 0644 "$doc/copyright"
# The reference of the JSON log, and of the files retry keeps, which the manual points to.
install -m 0644 docs/json-log.md "$doc/json-log.md"

# The binary is linked statically on Linux with glibc (.cargo/config.toml): it depends on no
# shared library. Otherwise, say which libc it needs.
depends="Depends: libc6"
case "$(ldd "$binary" 2>&1 || true)" in
  *"not a dynamic executable"* | *"statically linked"*) depends="" ;;
esac
size=$(du -sk "$root/usr" | cut -f1)
install -d "$root/DEBIAN"
{
  echo "Package: $name"
  echo "Version: $version"
  echo "Architecture: $arch"
  echo "Maintainer: The retry developers <retry@invalid>"
  echo "Installed-Size: $size"
  [ -n "$depends" ] && echo "$depends"
  # Not `Provides: retry`: what depends on Debian's retry expects its options, which differ.
  echo "Conflicts: retry"
  echo "Replaces: retry"
  echo "Section: utils"
  echo "Priority: optional"
  echo "Description: run a command again when it fails, with backoff and timeouts"
  echo " retry runs a command; when a try fails for a reason that may pass, it runs it"
  echo " again after a wait that grows exponentially, is capped and randomised, until a"
  echo " try succeeds, a failure is permanent, the tries run out or the time budget is"
  echo " spent. Each try can have a timeout that stops its whole process tree. It logs"
  echo " what it did and why; --dry-run prints the schedule without running anything."
  echo " ."
  echo " This is a different program from the retry of Debian's own retry package,"
  echo " which it conflicts with and replaces, and its options differ. Here -t is the"
  echo " timeout of each try and -n the number of tries; in Debian's retry, -t (--times)"
  echo " is the number of tries. Here -d is one duration (a list of waits is"
  echo " --delays 1s,2s,4s), -m is the longest wait rather than a message, -v is"
  echo " verbose rather than the version, and --until and --while are --success-on,"
  echo " --retry-on and --repeat. retry says so when it is given Debian's spellings."
} > "$root/DEBIAN/control"

mkdir -p "$out"
deb="$out/${name}_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
