# shellcheck shell=bash
# An emulated Slurm cluster for the tests of tests/cli (sourced, not run; tests/cli/test_lib.sh first): slurmctld and
# 8 slurmd on this host in a scratch folder (the recipe of notes/platform.md), brought up by slurm_up and torn down
# by PID on every exit path (trap), pass or fail, after this controller has cancelled its jobs (scancel), so no step
# task outlives the test. Used by slurm_search.sh and slurm_nightly.sh.
#
#   slurm_require NAME [TOOL...]  exit 77 (ctest SKIP_RETURN_CODE) when slurm-wlm (or a TOOL) is missing or we are
#                           not root (slurmd must be)
#   slurm_up [BUDGET_S]     bring the cluster up in $d (exported SLURM_CONF); steps end BUDGET_S (270) from now
#   run_srun ARGS...        one srun -N 8 -n 8 step, run again on Open MPI's TCP wire-up race (below)
#   leftover_tasks          PIDs of processes this cluster started, other than the daemons and this script
#   slurm_deadline          seconds left before the budget ends
PATH=$PATH:/usr/sbin:/sbin

slurm_require() {
  slurm_name=$1
  local tool
  for tool in slurmctld slurmd srun sinfo "${@:2}"; do
    command -v "$tool" >/dev/null 2>&1 ||
      { echo "# $slurm_name: skipped: '$tool' not found (install slurm-wlm: scripts/install-deps.sh does)"; exit 77; }
  done
  [[ $(id -u) -eq 0 ]] || { echo "# $slurm_name: skipped: the emulated slurmd nodes need root"; exit 77; }
}

d=
pids=()
# leftover_tasks: PIDs of processes this test's Slurm started (their environment names its slurm.conf, which srun
# hands to every task and slurmd to every slurmstepd), other than the daemons and this script.
leftover_tasks() {
  local s p
  for s in /proc/[0-9]*; do
    p=${s#/proc/}
    [[ $p == "$$" || " ${pids[*]} " == *" $p "* ]] && continue
    has_env "$p" "SLURM_CONF=$d/slurm.conf" && echo "$p"
  done
}
slurm_teardown() {
  local rc=$?
  # Never by name: other Slurm daemons (another test, a real cluster) may run on this host. First this test's own
  # controller (SLURM_CONF names it) cancels every job it runs, and slurmd kills their step tasks (slurmstepd runs them
  # outside this script's process tree); whatever still carries this test's slurm.conf in its environment after
  # that (a slurmd that hung) is killed by PID. Then the daemons, by the PIDs recorded when they started.
  if [[ -n "${SLURM_CONF:-}" ]]; then
    timeout 10 scancel --quiet --user="$(id -un)" 2>/dev/null
    local left t=0
    while left=$(leftover_tasks) && [[ -n "$left" ]] && ((t < 100)); do sleep 0.1; t=$((t + 1)); done
    # shellcheck disable=SC2086 # a list of PIDs
    [[ -n "$left" ]] && kill -KILL $left 2>/dev/null
  fi
  ((${#pids[@]})) && kill -TERM "${pids[@]}" 2>/dev/null
  local t=0
  for p in "${pids[@]}"; do while kill -0 "$p" 2>/dev/null && ((t < 100)); do sleep 0.05; t=$((t + 1)); done; done
  ((${#pids[@]})) && kill -KILL "${pids[@]}" 2>/dev/null
  if ((rc != 0 && rc != 77)); then
    echo "# ${slurm_name:-slurm}: failed; daemon logs:"
    tail -n 15 "$d"/log/*.log 2>/dev/null
  fi
  [[ -n $d ]] && rm -rf "$d"
  exit $rc
}

# port_in_use PORT: some socket of this host is bound to PORT (TCP, IPv4 or IPv6; /proc/net/tcp lists ports in hex).
port_in_use() {
  local hex
  hex=$(printf '%04X' "$1")
  awk -v h=":$hex" 'NR > 1 && substr($2, length($2) - 4) == h { f = 1 } END { exit !f }' /proc/net/tcp /proc/net/tcp6 \
    2>/dev/null
}
# free_port_block: the first port of 9 consecutive free ones (slurmctld, 8 slurmd), below the kernel's ephemeral
# range: there the kernel hands ports to outgoing connections and to Open MPI's TCP listeners, and one such port
# taken by a test running beside this one left a slurmd unable to bind (CI, port 37106). The search starts at a
# block chosen from the PID, so two runs on one host (two build trees) start apart.
free_port_block() {
  local lo first n b k ok p
  read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
  first=20000
  ((lo - 10 > first)) || first=10000
  n=$(((lo - 10 - first) / 10))
  for ((k = 0; k < n; k++)); do
    b=$((first + (($$ + k) % n) * 10))
    ok=1
    for p in $(seq "$b" $((b + 8))); do port_in_use "$p" && { ok=0; break; }; done
    ((ok)) && { echo "$b"; return 0; }
  done
  return 1
}

slurm_up() {
  d=$(mktemp -d /tmp/ps-slurm.XXXXXX)
  trap slurm_teardown EXIT
  trap 'exit 3' INT TERM
  local base k t idle
  base=$(free_port_block) || { echo "FAIL: no free block of 9 TCP ports below the ephemeral range"; exit 1; }
  mkdir -p "$d/state" "$d/run" "$d/log" "$d/out"
  for k in 1 2 3 4 5 6 7 8; do mkdir -p "$d/spool/node$k" "$d/tmp/node$k"; done
  cat >"$d/slurm.conf" <<CONF
ClusterName=pstest
SlurmctldHost=localhost
SlurmctldPort=$base
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=pmix
SchedulerType=sched/builtin
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
TmpFS=$d/tmp/%n
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd-%n.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd-%n.log
NodeName=node[1-8] NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((base + 1))-$((base + 8)) CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES OverSubscribe=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$d/slurm.conf

  # -D: stay in the foreground, so $! is the daemon's own PID; -c (controller): no state from an earlier run.
  slurmctld -D -c -f "$SLURM_CONF" >"$d/log/slurmctld.out" 2>&1 &
  pids+=($!)
  for k in 1 2 3 4 5 6 7 8; do
    slurmd -D -N "node$k" -f "$SLURM_CONF" >"$d/log/slurmd-node$k.out" 2>&1 &
    pids+=($!)
  done
  t=0
  while :; do
    idle=$(timeout 5 sinfo -h -N -o '%T' 2>/dev/null | grep -c '^idle')
    [[ $idle -eq 8 ]] && break
    ((t++ > 150)) && { echo "FAIL: only $idle of 8 nodes idle after 30 s"; exit 1; }
    sleep 0.2
  done
  echo "# $slurm_name: 8 nodes idle after $(awk "BEGIN{print $t*0.2}") s"

  # All emulated nodes share one hostname: Open MPI's shared-memory transports would collide across them, both the
  # point-to-point one (btl vader) and the one-sided one (osc sm, which the search's MPI window would otherwise get).
  export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_osc=^sm OMP_NUM_THREADS=1
  # srun does not tell Open MPI that 8 ranks share 2 cores (mpirun --oversubscribe does): without yielding, ranks
  # waiting in a collective spin and starve the rank still working, which on a loaded CI machine ran past the timeout.
  export OMPI_MCA_mpi_yield_when_idle=1
  # --immediate: fail instead of queueing forever if the nodes are not there. Every step ends by the deadline, 30 s
  # before ctest's TIMEOUT, so the teardown runs however slow the steps are: ctest's own kill would skip it.
  deadline=$((SECONDS + ${1:-270}))
}
slurm_deadline() { echo $((deadline - SECONDS)); }

# Open MPI 4.1's TCP transport has a wire-up race (open-mpi/ompi#3035: a connection request that arrives before
# MPI_Init has set up that peer): now and then one rank of 8 on one host dies in MPI_Init on a null function pointer
# (gdb: opal_progress -> mca_btl_tcp -> 0x0, Open MPI prints "Segmentation fault"), and the others wait for it. Such
# a step is cancelled as soon as the crash is printed and run again, up to 3 times, said on stderr; any other
# failure counts. A normal step takes 1-12 s here.
race='Segmentation fault'
srun_once() { # SECONDS-LIMIT command...: one step, its stdout and stderr in $d/step.out and $d/step.err
  # Emptied here, before the step starts: the background job opens its redirections only once it runs, and the watch
  # below would otherwise read the previous try's crash message and cancel this try's job (it did, in CI).
  : >"$d/step.out"
  : >"$d/step.err"
  timeout "$1" srun -N 8 -n 8 --mpi=pmix --immediate=30 "${@:2}" </dev/null >>"$d/step.out" 2>>"$d/step.err" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    if grep -q -- "$race" "$d/step.err"; then
      timeout 10 scancel --quiet --user="$(id -un)" 2>/dev/null # this test's controller: its one running step
      wait "$pid"
      return 139
    fi
    sleep 0.1
  done
  wait "$pid"
}
run_srun() {
  local left rc try
  for try in 1 2 3; do
    left=$((deadline - SECONDS))
    ((left > 90)) && left=90
    ((left > 0)) || { echo "# $slurm_name: no time left for srun $*" >&2; return 124; }
    srun_once "$left" "$@"
    rc=$?
    if ((try < 3 && (rc == 124 || rc >= 128))) && grep -q -- "$race" "$d/step.err"; then
      echo "# $slurm_name: step $try hit Open MPI's TCP wire-up race (exit $rc), running it again: srun $*" >&2
      continue
    fi
    break
  done
  cat "$d/step.out"
  cat "$d/step.err" >&2
  return "$rc"
}
