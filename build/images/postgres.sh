#!/usr/bin/env bash
# Builds mailplane/postgres:TAG (build/images/postgres.Dockerfile) from this
# machine's PostgreSQL server (Debian's postgresql package) and pg-entry,
# without pulling anything:
#
#   build/images/postgres.sh TAG PG_ENTRY
#
# rootfs.tar holds the server binary, the libraries ldd lists for it and for
# the two modules initdb's catalog loads (PL/pgSQL, Snowball), the loader,
# the share files, the UTC zone, passwd/group for uid 10005, and /initdb:
# a cluster made here by initdb (as nobody, C locale, UTF-8), owned by 10005.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 TAG PG_ENTRY" >&2
  exit 2
fi
tag=$1 entry=$2
here=$(cd "$(dirname "$0")" && pwd)
shopt -s nullglob
bins=(/usr/lib/postgresql/*/bin/postgres)
if [ ${#bins[@]} -ne 1 ]; then
  echo "want one PostgreSQL server in /usr/lib/postgresql, found ${#bins[@]} (apt-get install postgresql)" >&2
  exit 1
fi
pgbin=${bins[0]}
v=$(basename "$(dirname "$(dirname "$pgbin")")")
lib=/usr/lib/postgresql/$v/lib
uid=10005

work=$(mktemp -d "${TMPDIR:-/tmp}/mailplane-postgres.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work"
root=$work/root ctx=$work/ctx
mkdir -p "$root" "$ctx/skel"

# The binary, its modules, and every library the loader would map for them.
elves=("$pgbin" "$lib/plpgsql.so" "$lib/dict_snowball.so")
files=("${elves[@]}")
for f in "${elves[@]}"; do
  while read -r path; do files+=("$path"); done < <(
    ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
done
# What the server and single-user mode read at run time (initdb's inputs,
# postgres.bki and the like, stay out: the cluster is made here).
files+=(/usr/share/postgresql/"$v"/timezonesets /usr/share/postgresql/"$v"/tsearch_data
  /usr/share/postgresql/"$v"/extension/plpgsql.control /usr/share/postgresql/"$v"/extension/plpgsql--1.0.sql
  /usr/share/zoneinfo/UTC /usr/share/zoneinfo/Etc/UTC /usr/share/zoneinfo/GMT)
printf '%s\n' "${files[@]}" | sort -u | while read -r f; do
  cp -rL --parents "$f" "$root/"
done
mkdir -p "$root/etc"
echo "postgres:x:$uid:$uid:PostgreSQL:/var/lib/postgresql:/nonexistent" > "$root/etc/passwd"
echo "postgres:x:$uid:" > "$root/etc/group"

# The initial cluster: initdb refuses root, and needs a user it can name.
install -d -o nobody "$work/initdb"
(cd / && runuser -u nobody -- "$(dirname "$pgbin")/initdb" -D "$work/initdb" -U postgres \
  --encoding=UTF8 --locale=C --auth=reject --no-instructions >/dev/null)
rm -f "$work/initdb/pg_hba.conf" # pg-entry writes its own

tar -cf "$ctx/rootfs.tar" --numeric-owner --owner 0 --group 0 --mtime @0 -C "$root" .
tar -rf "$ctx/rootfs.tar" --numeric-owner --owner $uid --group $uid --mtime @0 -C "$work" ./initdb
# The declared directories, with their owners and modes (as build.sh does).
tar -cf "$ctx/dirs.tar" --files-from /dev/null
while read -r _ _ path owner mode _; do
  mkdir -p "$ctx/skel/$path"
  tar --append --file "$ctx/dirs.tar" --directory "$ctx/skel" --no-recursion \
    --numeric-owner --owner "${owner%%:*}" --group "${owner##*:}" --mode "$mode" \
    --mtime @0 "$path"
done < <(grep '^# dir ' "$here/postgres.Dockerfile")
cp "$entry" "$ctx/pg-entry"
cp "$here/postgres.Dockerfile" "$ctx/Dockerfile"
docker build --quiet --tag "mailplane/postgres:$tag" "$ctx" >/dev/null
echo "built mailplane/postgres:$tag (PostgreSQL $v)"
docker image prune --force --filter label=org.websitebench.mailplane.image >/dev/null
