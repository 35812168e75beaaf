"""The batch script of a run's Slurm job: the run's environment, a port picked and reserved on the node, the
placement file (node, port, GPUs) the orchestrator waits for, then the server itself (exec'd, so Slurm's
signals reach it and its exit status is the job's)."""

from __future__ import annotations

import posixpath

from orchestrator.errors import LaunchError
from orchestrator.host.launcher import LaunchSpec
from orchestrator.transport.shell import quote

# Picks one of the free candidates, those outside the kernel's ephemeral range (which an outgoing connection
# may take) first; which one turns with the job id, so jobs starting together on a node, or one after the
# other (a port just freed may still be closing), take different ports.
_PICK_PORT_AWK = r"""
function num(hex, i, v) {
  for (i = 1; i <= length(hex); i++) v = v * 16 + index("0123456789ABCDEF", substr(hex, i, 1)) - 1
  return v
}
BEGIN { nh = split(held, h, " "); for (i = 1; i <= nh; i++) busy[h[i]] = 1 }
NR == 1 { lo = $1; hi = $2; next }
$1 ~ /:$/ && $4 != "06" { n = split($2, a, ":"); busy[num(a[n])] = 1 }
END {
  k = split(cands, c, " ")
  for (i = 1; i <= k; i++)
    if (!(c[i] in busy)) { if (c[i] >= lo && c[i] <= hi) late[++nl] = c[i]; else early[++ne] = c[i] }
  if (ne) print early[start % ne + 1]; else if (nl) print late[start % nl + 1]
}
"""


# A job's server binds its port a while after the job picked it: until then only a reservation on the node
# keeps a job starting alongside from picking the same one. Each reservation is the file <port> holding the
# pid that becomes the server (the script execs it), valid while that pid lives; picks are serialised by flock.
_RESERVE_START = [
    'ports_dir="${TMPDIR:-/tmp}/orchestrator-ports-$(id -u)"',
    'mkdir -p "$ports_dir" && exec 9>"$ports_dir/lock" && { ! command -v flock >/dev/null || flock -w 30 9; }',
    'held=""',
    'for f in "$ports_dir"/[0-9]*; do',
    '  [ -f "$f" ] || continue',
    '  p=$(cat "$f" 2>/dev/null)',
    '  if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then held="$held ${f##*/}"; else rm -f "$f"; fi',
    "done",
]


def render_job_sh(spec: LaunchSpec, ports: list[int]) -> str:
    """The batch script: the environment, a free port picked on the node, the placement file, then the server."""
    argv = list(spec.argv)
    # launch_argv ends with `--host 127.0.0.1 --port N`: a job's server must answer the login node, on a
    # port only known on its node.
    if len(argv) < 4 or argv[-4] != "--host" or argv[-2] != "--port":
        raise LaunchError(f"run {spec.run_id}: the launch command does not end with --host H --port P")
    command = " ".join(quote(a) for a in argv[:-4]) + ' --host 0.0.0.0 --port "$ORCH_PORT"'
    placement = posixpath.join(spec.run_dir, "placement")
    lines = [
        "#!/usr/bin/env bash",
        f"# orchestrator run {spec.run_id}: the Slurm job that runs the server (cmd.sh is the server alone).",
        "set -u",
    ]
    for name in spec.secret_names:
        lines.append(f': "${{{name}:?{name} must reach the job through sbatch\'s environment}}"')
    for name, value in sorted(spec.env.items()):
        if name != "CUDA_VISIBLE_DEVICES":  # Slurm's, for the GPUs it gave the job
            lines.append(f"export {name}={quote(value)}")
    lines.append(f"cd {quote(spec.run_dir)} || exit 1")
    tables = (
        "{ cat /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 0 0;"
        " cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; }"
    )
    cands = quote(" ".join(map(str, ports)))
    awk = f'awk -v start="${{SLURM_JOB_ID:-0}}" -v held="$held" -v cands={cands} {quote(_PICK_PORT_AWK)}'
    lines += _RESERVE_START
    lines.append(f"ORCH_PORT=$({tables} | {awk})")
    lines.append('[ -n "$ORCH_PORT" ] && echo $$ > "$ports_dir/$ORCH_PORT"')
    lines.append("exec 9>&-")
    lines.append('[ -n "$ORCH_PORT" ] || { echo "orchestrator job: no free port on $(hostname)" >&2; exit 1; }')
    # Slurm's name of the node (what scontrol reports too), not its hostname: they differ on some clusters.
    node = '"${SLURMD_NODENAME:-$(hostname)}"'
    lines.append(
        f'printf \'%s %s %s\\n\' {node} "$ORCH_PORT" "${{CUDA_VISIBLE_DEVICES:-}}" > {quote(placement)}.tmp'
        f" && mv -f {quote(placement)}.tmp {quote(placement)}"
    )
    lines.append("exec " + command)
    return "\n".join(lines) + "\n"


def parse_placement(text: str) -> tuple[str, int, tuple[int, ...]] | None:
    """(node, port, GPU indices) from a job's placement file, None while it is not written."""
    parts = text.split()
    if len(parts) < 2 or not parts[1].isdigit():
        return None
    gpus = tuple(int(g) for g in parts[2].split(",") if g.isdigit()) if len(parts) > 2 else ()
    return parts[0], int(parts[1]), gpus
