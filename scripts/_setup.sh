# Shared setup for scripts/test, scripts/demo and the benchmarks (sourced, not run).
PY=${PYTHON:-python3}

setup_venv() {  # $1: extra to install ("" for none)
  if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
  fi
  local target="."
  [ -n "${1:-}" ] && target=".[${1}]"
  local stamp=".venv/.installed-${1:-base}"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    # pip and setuptools chatter goes to a log; it is shown only when the install fails.
    if ! { .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -q -e "$target"; } \
        >.venv/pip.log 2>&1; then
      cat .venv/pip.log >&2
      return 1
    fi
    touch "$stamp"
  fi
}

ensure_sshd() {  # the SSH tests need OpenSSH's sshd, and `ip` (iproute2) for the bastion's network namespaces
  if [ -x /usr/sbin/sshd ] && command -v ssh-keygen >/dev/null && command -v ip >/dev/null; then return 0; fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing openssh-server and iproute2 (needed by the SSH tests)"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server openssh-client procps iproute2 >/dev/null
  else
    echo "warning: no sshd and cannot install it; SSH tests will fail under CI=true, skip otherwise" >&2
  fi
}

ensure_slurm() {  # the Slurm tests start a real munged + slurmctld + slurmd on loopback
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
      && command -v sbatch >/dev/null; then return 0; fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing slurmctld slurmd slurm-client munge (needed by the Slurm tests)"
    apt-get update -qq >/dev/null
    # The packages' postinst would start system-wide daemons; the tests start their own (own config, socket,
    # ports), so forbid that for the install (policy-rc.d exit 101), unless the machine already has a policy.
    local policy=/usr/sbin/policy-rc.d made=""
    if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && made=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null \
      || echo "warning: installing Slurm failed; the Slurm tests cannot run" >&2
    if [ -n "$made" ]; then rm -f "$policy"; fi
  else
    echo "warning: no Slurm and cannot install it; Slurm tests will fail under CI=true, skip otherwise" >&2
  fi
}

ensure_chromium() {  # the HTML report's browser test drives Debian's chromium through chromium-driver
  if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then return 0; fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing chromium and chromium-driver (needed by the browser test of the HTML report)"
    # Not fatal: only the browser test needs it, and it says so (failing under CI=true) when it is missing.
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } \
      >/dev/null || echo "warning: installing chromium failed; the browser test cannot run" >&2
  else
    echo "warning: no chromium and cannot install it; the browser test will fail under CI=true, skip otherwise" >&2
  fi
}
