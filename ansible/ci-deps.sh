#!/usr/bin/env bash
# What the Ansible test (tests/ansible.rs) and `ansible-lint` need: sshd and
# ssh-keygen (Debian's openssh-server and openssh-client), setpriv
# (util-linux), and ansible-core and ansible-lint from PyPI, pinned, in a
# virtual environment of their own (ansible-core 2.21 needs Python 3.12 or
# newer on the control node): SCHEDLAB_ANSIBLE_VENV, default
# /opt/schedlab-ansible, where the test looks when they are not in PATH.
# .ci/run calls it; run it once by hand (as root) before the test.
set -euo pipefail

ANSIBLE_CORE=2.21.5
ANSIBLE_LINT=26.10.1
venv=${SCHEDLAB_ANSIBLE_VENV:-/opt/schedlab-ansible}

need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
if [ ${#need[@]} -gt 0 ]; then
    echo "== installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Debian starts the sshd it installs; the test starts its own on
# 127.0.0.2 and 127.0.0.3 and needs no other.

# A Python 3.12 or newer: python3 itself, else python3.13 / python3.12.
python=
for p in python3 python3.14 python3.13 python3.12; do
    if command -v "$p" >/dev/null 2>&1 &&
        "$p" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
        python=$(command -v "$p")
        break
    fi
done
if [ -z "$python" ] && command -v pyenv >/dev/null 2>&1; then
    for v in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.(1[2-9])' | sort -rV); do
        python=$(pyenv root)/versions/$v/bin/python3
        [ -x "$python" ] && break
        python=
    done
fi
if [ -z "$python" ]; then
    echo "ci-deps.sh: no Python 3.12 or newer for ansible-core $ANSIBLE_CORE" >&2
    exit 1
fi

# The versions installed, asked of the package metadata (running the tools
# would write their caches under ~).
have=$("$venv/bin/python" -c 'import importlib.metadata as m
print(m.version("ansible-core"), m.version("ansible-lint"))' 2>/dev/null || true)
if [ "$have" != "$ANSIBLE_CORE $ANSIBLE_LINT" ]; then
    echo "== installing ansible-core $ANSIBLE_CORE and ansible-lint $ANSIBLE_LINT in $venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "ansible-core==$ANSIBLE_CORE" "ansible-lint==$ANSIBLE_LINT"
fi
