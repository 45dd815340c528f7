#!/usr/bin/env bash
# ctest sweep.slurm: `runner sweep --launcher slurm` against a real single-node Slurm on localhost.
#   tests/slurm/slurm_sweep.sh BUILD_DIR SOURCE_DIR PYTHON
# Starts munged, slurmctld and slurmd (Debian's munge, slurmctld, slurmd, slurm-client; scripts/setup
# installs them) in a scratch folder as the current user, on ports of its own, submits a 2x2 tiny
# corners sweep, waits for the array job, checks every run completed and that --resume finds nothing
# to do, runs scripts/slurm/attnlab.sbatch (torchrun through srun, 2 ranks) through it too, then
# stops the daemons it started (by their pids). Fails, naming what is missing, when a
# tool is not installed or a daemon does not start.
set -euo pipefail
build=$1 source=$2
for tool in munged mungekey slurmctld slurmd sbatch squeue sinfo; do
  command -v "$tool" >/dev/null || { echo "sweep.slurm: '$tool' is not installed (scripts/setup installs munge, slurmctld, slurmd, slurm-client)"; exit 1; }
done
S=$(mktemp -d /tmp/attnlab-slurm-XXXXXX)
cleanup() {  # the daemons this script started, by pid; each given 20 s to exit
  for f in "$S/slurmd.pid" "$S/slurmctld.pid" "$S/munge/munged.pid"; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  done
}
trap cleanup EXIT
mkdir -p "$S"/{munge,spool,state,log}
chmod 700 "$S/munge"
mungekey -c -k "$S/munge/munge.key"
munged --socket="$S/munge/munge.sock" --key-file="$S/munge/munge.key" --pid-file="$S/munge/munged.pid" \
  --log-file="$S/munge/munged.log" --seed-file="$S/munge/seed" --force
host=$(hostname -s) user=$(id -un)
port=$((20000 + RANDOM % 20000))
cat > "$S/slurm.conf" <<CONF
ClusterName=attnlabtest
SlurmctldHost=$host(127.0.0.1)
AuthType=auth/munge
AuthInfo=socket=$S/munge/munge.sock
CredType=cred/munge
SlurmUser=$user
SlurmdUser=$user
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$S/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 1 60); do
  sinfo -h -o %T 2>/dev/null | grep -qx idle && break
  sleep 1
done
sinfo -h -o %T | grep -qx idle || { echo "sweep.slurm: the node did not come up"; tail -5 "$S"/log/*.log; exit 1; }

cd "$source"
dir=$S/sweep
"$build/bin/runner" sweep experiments/tests/tiny_corners.yaml model.norm=first,last seed=0,1 trainer.max_epochs=2 \
  --jobs 2 --launcher slurm -o "$dir"
grep -q '^slurm_job: 1$' "$dir/sweep.yaml" || { echo "sweep.slurm: no job id in the manifest"; cat "$dir/sweep.yaml"; exit 1; }
for _ in $(seq 1 240); do
  [ -z "$(squeue -h)" ] && break
  sleep 1
done
[ -z "$(squeue -h)" ] || { echo "sweep.slurm: the job did not finish in 240 s"; squeue; exit 1; }
out=$("$build/bin/runner" sweep "$dir" --resume 2>&1)
echo "$out"
grep -q "0 of 4 runs to run" <<<"$out" || { echo "sweep.slurm: expected every run completed"; tail -n 20 "$dir"/*.log; exit 1; }
[ "$(grep -c 'status: completed' "$dir/sweep.yaml")" = 4 ] || { cat "$dir/sweep.yaml"; exit 1; }
[ "$(ls "$dir"/slurm-1_*.out | wc -l)" = 4 ] || { ls "$dir"; exit 1; }
grep -q "slurm job 1 task 3: model.norm=last_seed=1" "$dir/model.norm=last_seed=1.log"
echo "sweep.slurm: OK (4 runs through sbatch --array on a localhost Slurm)"

# scripts/slurm/attnlab.sbatch through the same Slurm (one node: one torchrun agent, two ranks, the
# rendezvous at the node scontrol names first); the results file must say completed, world size 2.
python=${3:?the venv python (for torchrun and h5py) is the third argument}
run=$S/dist.h5
RUNNER=$build/bin/runner TORCHRUN=$(dirname "$python")/torchrun ATTNLAB_PROCS_PER_NODE=2 \
  ATTNLAB_RDZV_PORT=$((port + 2)) ATTNLAB_DISTRIBUTED_TIMEOUT=60 \
  sbatch --wait --nodes=1 --output="$S/dist-%j.log" scripts/slurm/attnlab.sbatch \
  experiments/tests/tiny_synthetic.yaml --results "$run" trainer.max_epochs=2 dataset.num_train=256 \
  || { echo "sweep.slurm: attnlab.sbatch failed"; cat "$S"/dist-*.log; exit 1; }
"$python" - "$run" <<'PY' || { cat "$S"/dist-*.log; exit 1; }
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    status, world = f.attrs["status"], int(f.attrs["distributed_world_size"])
    status = status.decode() if isinstance(status, bytes) else str(status)
    assert status == "completed" and world == 2, f"status {status}, world size {world}"
PY
echo "sweep.slurm: OK (attnlab.sbatch: torchrun through srun, 2 ranks on the localhost node)"
