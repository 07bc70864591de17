#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, to test workflow/profiles/slurm for real:
#   installs Debian's Slurm (slurmctld, slurmd, slurmdbd), munge and MariaDB if absent, writes a
#   slurm.conf for this machine's cores and memory, starts the daemons, runs the smoke profile's
#   TARGET through `--profile workflow/profiles/slurm` (executor: slurm), checks with sacct that
#   every job ran as a Slurm job and that the target's CSV equals the one a local (non-Slurm) run
#   of the same target gives, and stops the daemons it started.
#
# Usage (root, Debian/Ubuntu, from the repository root; the venv must exist):
#   LABELDP_DATA_MIRROR=../shared/data bash workflow/scripts/slurm_single_node.sh [TARGET] [LOG]
# TARGET defaults to figure5a (the smoke profile's Census stand-in: 9 jobs); LOG to
# slurm_single_node.log. Exit 0 only if every check passes.
set -euo pipefail
TARGET="${1:-figure5a}"
LOG="$(realpath -m "${2:-slurm_single_node.log}")"
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
VENV="${VENV:-$REPO/.venv}"
RUN="$(mktemp -d /tmp/labeldp-slurm.XXXXXX)"
HOST="$(hostname -s)"
CLUSTER=labeldp
exec > >(tee "$LOG") 2>&1
say() { echo "[slurm_single_node $(date -u +%H:%M:%S)] $*"; }
STARTED=()
cleanup() {
  say "stopping the daemons this script started: ${STARTED[*]:-none}"
  for p in "${STARTED[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  sleep 2
  [ -f "$RUN/mysql.pid" ] && kill "$(cat "$RUN/mysql.pid")" 2>/dev/null || true
  for f in slurm.conf slurmdbd.conf; do
    [ -L "/etc/slurm/$f" ] && rm -f "/etc/slurm/$f"
    [ -e "/etc/slurm/$f.labeldp-saved" ] && mv "/etc/slurm/$f.labeldp-saved" "/etc/slurm/$f"
  done
  true
}
trap cleanup EXIT

say "repository $REPO, run directory $RUN, target $TARGET"
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null || ! command -v mariadbd >/dev/null; then
  say "installing Debian's slurmctld slurmd slurmdbd slurm-client munge mariadb-server"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurmdbd slurm-client munge mariadb-server
fi
"$VENV/bin/python" -c "import snakemake_executor_plugin_slurm" 2>/dev/null || "$VENV/bin/pip" install -q -e "$REPO[slurm]"
say "$(slurmctld -V), $(munged --version 2>&1 | head -1), $(mariadbd --version)"

# --- munge ----------------------------------------------------------------------------------
mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
[ -s /etc/munge/munge.key ] || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
chmod 400 /etc/munge/munge.key
if ! munge -n >/dev/null 2>&1; then
  runuser -u munge -- munged
  sleep 1
  STARTED+=("$(pgrep -n munged)")
fi
munge -n | unmunge >/dev/null && say "munge works"

# --- MariaDB for slurmdbd (sacct needs the accounting database) -------------------------------
mkdir -p "$RUN/mysql"
mariadb-install-db --user=root --datadir="$RUN/mysql" --auth-root-authentication-method=normal >/dev/null
mariadbd --user=root --datadir="$RUN/mysql" --socket="$RUN/mysql.sock" --port=13306 --bind-address=127.0.0.1 \
  --pid-file="$RUN/mysql.pid" --log-error="$RUN/mysql.err" &
for _ in $(seq 60); do [ -S "$RUN/mysql.sock" ] && break; sleep 1; done
mariadb --socket="$RUN/mysql.sock" -u root -e \
  "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
say "MariaDB up on 127.0.0.1:13306"

# --- slurm.conf and slurmdbd.conf, for this machine --------------------------------------------
CPUS="$(nproc)"
MEM_MB="$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))"
mkdir -p "$RUN/etc" "$RUN/state" "$RUN/spool" "$RUN/log"
cat > "$RUN/etc/slurm.conf" <<EOF
ClusterName=$CLUSTER
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$RUN/state
SlurmdSpoolDir=$RUN/spool
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$RUN/log/slurmctld.log
SlurmdLogFile=$RUN/log/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=16819
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
cat > "$RUN/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdPort=16819
SlurmUser=root
PidFile=$RUN/slurmdbd.pid
LogFile=$RUN/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=13306
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
chmod 600 "$RUN/etc/slurmdbd.conf"
export SLURM_CONF="$RUN/etc/slurm.conf"
# srun inside a job step reads the default path, not SLURM_CONF: link it there for the test
# (an existing /etc/slurm/slurm.conf is moved aside and put back at the end)
mkdir -p /etc/slurm
for f in slurm.conf slurmdbd.conf; do
  [ -e "/etc/slurm/$f" ] && [ ! -L "/etc/slurm/$f" ] && mv "/etc/slurm/$f" "/etc/slurm/$f.labeldp-saved"
  ln -sfn "$RUN/etc/$f" "/etc/slurm/$f"
done
say "slurm.conf: node $HOST with $CPUS CPUs and $MEM_MB MB"

# --- daemons ---------------------------------------------------------------------------------
slurmdbd -D > "$RUN/log/slurmdbd.out" 2>&1 &
STARTED+=("$!")
for _ in $(seq 60); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 1; done
sacctmgr -i add cluster "$CLUSTER" >/dev/null 2>&1 || true
slurmctld -D > "$RUN/log/slurmctld.out" 2>&1 &
STARTED+=("$!")
sleep 3
slurmd -D > "$RUN/log/slurmd.out" 2>&1 &
STARTED+=("$!")
for _ in $(seq 60); do sinfo -h -o %T 2>/dev/null | grep -q idle && break; sleep 1; done
sinfo
START="$(date -u +%Y-%m-%dT%H:%M:%S)"

# --- the same target, through Slurm and locally ------------------------------------------------
SMK="$VENV/bin/snakemake"
for mode in slurm local; do
  WORK="$RUN/work-$mode"
  mkdir -p "$WORK"
  say "running $TARGET ($mode) in $WORK"
  if [ "$mode" = slurm ]; then
    # this one node has no GPU and $CPUS cores: the profile's gres request and its 4 cores and
    # 16 GB per training job are scaled down to fit; everything else is the profile's
    "$SMK" -s "$REPO/Snakefile" --directory "$WORK" "$TARGET" --profile "$REPO/workflow/profiles/slurm" \
      --configfile "$REPO/workflow/config/smoke.yaml" --jobs 2 --latency-wait 5 \
      --set-resources train:slurm_extra="''" train:mem_mb=3000 train:cpus_per_task=1 prepare:mem_mb=3000 \
      --set-threads train=1 --default-resources mem_mb=2000 runtime=30 slurm_partition=debug
  else
    "$SMK" -s "$REPO/Snakefile" --directory "$WORK" "$TARGET" --profile "$REPO/workflow/profiles/smoke" --cores 2
  fi
done

# --- checks ------------------------------------------------------------------------------------
say "sacct (jobs since $START):"
sacct -X --starttime "$START" --format=JobID,JobName%40,Partition,State,ExitCode,Elapsed | tee "$RUN/sacct.txt"
N_SLURM="$(grep -c COMPLETED "$RUN/sacct.txt" || true)"
N_FAILED="$(grep -Ec 'FAILED|CANCELLED|TIMEOUT|OUT_OF_ME' "$RUN/sacct.txt" || true)"
N_RECORDS="$(find "$RUN/work-slurm/results" -name '*.json' | wc -l)"
say "Slurm jobs COMPLETED: $N_SLURM, failed: $N_FAILED; result records written under Slurm: $N_RECORDS"
CSV=reports/smoke/tables/$TARGET.csv
[ -f "$RUN/work-slurm/$CSV" ] || CSV=reports/smoke/figures/$TARGET.csv
"$VENV/bin/python" - "$RUN/work-slurm/$CSV" "$RUN/work-local/$CSV" <<'PY'
import csv, sys
a, b = (list(csv.DictReader(open(p))) for p in sys.argv[1:3])
skip = {"randomizer_seconds_mean"}  # wall-clock time, not a result
keys = [k for k in a[0] if k not in skip]
diff = [(i, k, ra[k], rb[k]) for i, (ra, rb) in enumerate(zip(a, b)) for k in keys if ra[k] != rb[k]]
print(f"compared {len(a)} rows x {len(keys)} columns of {sys.argv[1].split('/work-slurm/')[1]}: "
      f"{'identical' if not diff and len(a) == len(b) else f'{len(diff)} differences: {diff[:5]}'}")
for r in a:
    print("  ", {k: r[k] for k in ("column", "epsilon", "status", "test_mse_mean", "noisy_label_mse_mean") if k in r})
sys.exit(0 if not diff and len(a) == len(b) else 1)
PY
[ "$N_FAILED" = 0 ] && [ "$N_SLURM" -ge "$N_RECORDS" ] && [ "$N_RECORDS" -gt 0 ]
say "PASS: every job of $TARGET ran as a Slurm job and the table equals the local run's"
