#!/bin/sh
# Installs the system packages oslens needs, and only those that are missing,
# so that a fresh Debian/Ubuntu machine needs nothing done by hand.
set -eu

missing=""
need() {  # need CHECK-COMMAND PACKAGE
    sh -c "$1" >/dev/null 2>&1 || missing="$missing $2"
}
need "command -v cc"                                   gcc
need "command -v make"                                 make
need "test -e /usr/include/stdio.h"                    libc6-dev
need "gcc -print-file-name=libc.a | grep -q /"         libc6-dev
need "command -v python3"                              python3
need "python3 -c 'import venv, ensurepip'"             python3-venv
need "command -v strace"                               strace
need "command -v ipcs"                                 util-linux

[ -z "$missing" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "oslens: missing system packages:$missing (no apt-get here; install them by hand)" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "oslens: missing system packages:$missing (run as root to install them)" >&2
    exit 1
fi
echo "oslens: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
