# Shared by the fault-injection scripts (sourced, not run). children_of PID: the PIDs whose parent is PID, read from
# /proc so no procps is needed. Open MPI puts each rank in its own process group, so killing mpiexec's group would
# leave the ranks running: the scripts kill mpiexec and these children by PID.
children_of() {
  local s line rest ppid p
  for s in /proc/[0-9]*/stat; do
    line=$(cat "$s" 2>/dev/null) || continue
    rest=${line##*) }
    read -r _ ppid _ <<<"$rest"
    if [[ "$ppid" == "$1" ]]; then p=${s#/proc/}; echo "${p%/stat}"; fi
  done
}
