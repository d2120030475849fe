#!/usr/bin/env bash
# Builds one FROM-scratch image per Dockerfile from host-built static
# binaries: no base image is pulled, nothing is compiled inside Docker.
#
#   build/images/build.sh TAG BIN_DIR DOCKERFILE...
#
# For build/images/mail-plane.Dockerfile the image is mailplane/mail-plane:TAG
# and its context holds BIN_DIR/mail-plane, the Dockerfile, and dirs.tar: the
# directories its "# dir PATH UID:GID MODE" lines declare, with exactly those
# numeric owners and modes (a scratch image has no shell to chown with, and
# COPY does not keep a directory's own mode). Superseded builds of our images
# (dangling, with our label) are removed, so rebuilding leaves nothing behind.
set -euo pipefail

if [ $# -lt 3 ]; then
  echo "usage: $0 TAG BIN_DIR DOCKERFILE..." >&2
  exit 2
fi
tag=$1 bin=$2
shift 2
work=$(mktemp -d "${TMPDIR:-/tmp}/mailplane-images.XXXXXX")
trap 'rm -rf "$work"' EXIT

for df in "$@"; do
  name=$(basename "$df" .Dockerfile)
  ctx=$work/$name
  mkdir -p "$ctx/skel"
  if [ ! -x "$bin/$name" ]; then
    echo "$name: no binary at $bin/$name (make build writes bin/)" >&2
    exit 1
  fi
  cp "$bin/$name" "$df" "$ctx/"
  mv "$ctx/$(basename "$df")" "$ctx/Dockerfile"
  # An empty archive for images that declare no directory.
  tar -cf "$ctx/dirs.tar" --files-from /dev/null
  while read -r _ _ path owner mode _; do
    mkdir -p "$ctx/skel/$path"
    tar --append --file "$ctx/dirs.tar" --directory "$ctx/skel" --no-recursion \
      --numeric-owner --owner "${owner%%:*}" --group "${owner##*:}" --mode "$mode" \
      --mtime @0 "$path"
  done < <(grep '^# dir ' "$df" || true)
  docker build --quiet --tag "mailplane/$name:$tag" "$ctx" >/dev/null
  echo "built mailplane/$name:$tag"
done
docker image prune --force --filter label=org.websitebench.mailplane.image >/dev/null
