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
need "test -x /usr/bin/python3 || command -v python3"       python3
need "$(command -v /usr/bin/python3 python3 | head -n1) -c 'import venv, ensurepip'" python3-venv
need "command -v strace"                               strace
need "command -v ipcs"                                 util-linux

# The engine's BPF attribution (engine/bpf/) is built only if these are
# there; without them the engine builds and says it has no BPF. So they are
# installed where the distribution has them, and their absence is no error.
optional=""
want() {  # want CHECK-COMMAND PACKAGE
    sh -c "$1" >/dev/null 2>&1 || optional="$optional $2"
}
want "command -v clang"                                 clang
want "command -v bpftool || test -x /usr/sbin/bpftool"  bpftool
want "test -e /usr/include/bpf/libbpf.h"                libbpf-dev
want "gcc -print-file-name=libbpf.a | grep -q /"        libbpf-dev
want "gcc -print-file-name=libelf.a | grep -q /"        libelf-dev
want "gcc -print-file-name=libz.a | grep -q /"          zlib1g-dev

# `install-deps.sh cluster` (and `test`, which exercises it): Open MPI, for
# oslens-engine-mpi and `oslens cluster`; without it the single-node
# commands work and `oslens cluster` says what to install.
case " $* " in *" cluster "*|*" test "*)
    want "command -v mpicc"  libopenmpi-dev
    want "command -v mpirun" openmpi-bin
esac

# `install-deps.sh envs` (and `test`): podman, for `--in container` (runc
# beside it: crun, podman's choice elsewhere, refuses v1/hybrid cgroups);
# QEMU and the distribution's kernel, for `--in kvm` (the guest boots that
# kernel from an initramfs oslens makes: no disk image).
case " $* " in *" envs "*|*" test "*)
    want "command -v podman"                          podman
    want "command -v runc || test -x /usr/sbin/runc"  runc
    case "$(uname -m)" in
        x86_64)  want "command -v qemu-system-x86_64"  qemu-system-x86 ;;
        aarch64) want "command -v qemu-system-aarch64" qemu-system-arm ;;
    esac
    arch=$(dpkg --print-architecture 2>/dev/null || echo none)
    want "ls /boot/vmlinuz-* && ls /lib/modules/*/modules.dep" "linux-image-$arch"
esac

# `install-deps.sh servers` (and `test`): the real server software `oslens
# serve` and `study scaleout` drive, each with its load generator, and the
# job they set against them (HPC Challenge, on Open MPI).
case " $* " in *" servers "*|*" test "*)
    want "command -v nginx || test -x /usr/sbin/nginx"                nginx
    want "command -v wrk"                                             wrk
    want "command -v redis-server"                                    redis-server
    want "command -v redis-benchmark && command -v redis-cli"         redis-tools
    want "command -v xapian-tcpsrv"                                   xapian-tools
    want "/usr/bin/python3 -c 'import xapian'"                        python3-xapian
    want "command -v hpcc"                                            hpcc
    want "command -v mpirun"                                          openmpi-bin
esac

# `install-deps.sh studies` (and `test`): what `study kernels` builds with:
# the distribution's Linux source (a tarball in /usr/src) and the tools a
# kernel build runs beside the compiler.
case " $* " in *" studies "*|*" test "*)
    want "ls /usr/src/linux-source-*.tar.*" linux-source
    want "command -v flex"                  flex
    want "command -v bison"                 bison
    want "command -v bc"                    bc
    want "command -v perl"                  perl
esac

# `install-deps.sh bench`: fio, which bench/io.py measures oslens io against,
# and cyclictest (rt-tests), which bench/timerlat.py measures timerlat against.
case " $* " in *" bench "*)
    want "command -v fio" fio
    want "command -v cyclictest" rt-tests
esac

# `install-deps.sh test`: the report tests load each report in headless
# Chromium through its WebDriver; the house rules check C with clang-format.
if [ "${1:-}" = test ]; then
    want "command -v clang-format"                              clang-format
    want "command -v chromium || command -v chromium-browser"  chromium
    want "command -v chromedriver"                              chromium-driver
fi

[ -z "$missing$optional" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" -ne 0 ]; then
    [ -n "$optional" ] && echo "oslens: without$optional the engine has no BPF attribution (or, for tests, no browser, C style check, MPI, container runtime or guest)" >&2
    [ -z "$missing" ] && exit 0
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "oslens: missing system packages:$missing (no apt-get here; install them by hand)" >&2
    else
        echo "oslens: missing system packages:$missing (run as root to install them)" >&2
    fi
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
for p in $(echo "$optional" | tr ' ' '\n' | sort -u); do
    if apt-cache show "$p" >/dev/null 2>&1; then
        missing="$missing $p"
    else
        echo "oslens: no package $p here: the engine will have no BPF attribution (or the tests no browser, C style check, MPI, container runtime or guest)" >&2
    fi
done
[ -z "$missing" ] && exit 0
echo "oslens: installing$missing" >&2
# A server package starts its service when installed (nginx on port 80,
# redis on 6379), open to every local user: oslens starts its servers
# itself, in private network namespaces, and wants none running. A
# policy-rc.d that refuses every start (invoke-rc.d's rule) holds for the
# install only, unless the machine had one already.
policy=/usr/sbin/policy-rc.d
own_policy=
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && own_policy=1
fi
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null || status=$?
[ -n "$own_policy" ] && rm -f "$policy"
# ... nor one started at the next boot: the services these packages enabled are disabled again
for svc in nginx redis-server; do
    case " $missing " in *" $svc "*)
        if [ -d /run/systemd/system ]; then
            systemctl disable --now "$svc" >/dev/null 2>&1 || true
        elif command -v update-rc.d >/dev/null 2>&1; then
            update-rc.d "$svc" disable >/dev/null 2>&1 || true
        fi
    esac
done
exit "${status:-0}"
