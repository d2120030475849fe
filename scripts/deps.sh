#!/usr/bin/env bash
# Installs, with one apt-get update and one apt-get install, the Debian
# packages that the named groups need and this machine lacks (all groups
# when none is named). Each group is checked by what its tests run, so a
# machine that has them installs nothing.
#
#   scripts/deps.sh [GROUP...]
#
# Groups: browser (chromium, swaks), netns (ip, setpriv, prlimit),
# postgres (the server, for --store postgres and the PostgreSQL image),
# frameworks (what TestFrameworks drives), pytest (for /usr/bin/python3),
# e2e (systemd's tools, docker-compose), imap (mbsync, a real mail client
# syncing the agent's mailbox over IMAP).
#
# One transaction, not one per group: on a fresh machine each apt-get
# update and each install's triggers cost seconds, and make test used to
# pay them up to seven times.
set -euo pipefail

has() { command -v "$1" >/dev/null 2>&1; }

# need GROUP: the packages GROUP lacks on this machine, one line.
need() {
  case $1 in
  browser) has chromium && has swaks || echo chromium swaks ;;
  netns) has ip && has setpriv && has prlimit || echo iproute2 util-linux ;;
  postgres) ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || echo postgresql ;;
  frameworks)
    /usr/bin/python3 -c 'import django' 2>/dev/null && ruby -e 'require "mail"' 2>/dev/null &&
      [ -f /usr/share/php/Symfony/Component/Mailer/autoload.php ] ||
      echo python3-django ruby-mail php-cli php-symfony-mailer
    ;;
  pytest)
    /usr/bin/python3 -c 'import pytest' 2>/dev/null || echo python3-pytest
    # test_webhooks.py checks SendGrid's ECDSA signatures with it.
    /usr/bin/python3 -c 'import cryptography' 2>/dev/null || echo python3-cryptography
    ;;
  e2e)
    has systemd-analyze || echo systemd
    has docker-compose || docker compose version >/dev/null 2>&1 || echo docker-compose
    ;;
  imap) has mbsync || echo isync ;;
  *)
    echo "deps.sh: unknown group $1 (browser, netns, postgres, frameworks, pytest, e2e, imap)" >&2
    exit 2
    ;;
  esac
}

groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(browser netns postgres frameworks pytest e2e imap)
missing=()
for g in "${groups[@]}"; do
  pkgs=$(need "$g") || exit 2
  [ -z "$pkgs" ] || missing+=($pkgs)
done
[ ${#missing[@]} -gt 0 ] || exit 0
echo "installing with apt-get: ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
