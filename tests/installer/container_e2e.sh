#!/usr/bin/env bash
# Runs inside a throwaway systemd-nspawn container booted from this machine's
# own root file system (tests/installer/test_in_container.py), as a oneshot
# unit under a real systemd: installs gpufleet with installer/install.sh, checks
# the running unit, runs workloads as a local user's transient units
# (tests/installer/container_workloads.py), upgrades, uninstalls; then the
# Debian package: installs, upgrades, removes and purges it. Writes `RESULT name value` lines to
# /gf/results and everything else to /gf/log. /gf is the test's directory,
# holding wheels/ (an offline package index), fakenvml/, deb/ and the checkout path.
set -uo pipefail
exec >/gf/log 2>&1
trap 'systemctl poweroff --no-block' EXIT
result() { echo "RESULT $1 $2" | tee -a /gf/results; }
result booted yes
set -x

checkout="$(cat /gf/checkout)"
unit=gpufleet-daemon.service
export PIP_NO_INDEX=1 PIP_FIND_LINKS=/gf/wheels PIP_DISABLE_PIP_VERSION_CHECK=1

main_pid() { systemctl show -p MainPID --value "$unit"; }
status_field() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$(main_pid)/status"; }

# gRPC answers (its health may say NOT_SERVING: no NVML on this machine).
wait_serving() {
  local _
  for _ in $(seq 50); do
    /opt/gpufleet/venv/bin/python - <<'PY' && return 0
import sys, grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
try:
    with grpc.insecure_channel("127.0.0.1:50051") as channel:
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
except grpc.RpcError:
    sys.exit(1)
PY
    sleep 0.2
  done
  return 1
}

# --- install into / with systemd running ---------------------------------------
"$checkout/installer/install.sh"
result install_rc $?
result active "$(systemctl is-active "$unit")"
result enabled "$(systemctl is-enabled "$unit")"
wait_serving && result answering yes
result user "$(stat -c %U "/proc/$(main_pid)")"
result cap_eff "$(status_field CapEff)"
result no_new_privs "$(status_field NoNewPrivs)"
result seccomp "$(status_field Seccomp)"
result state_dir "$(stat -c '%U %a' /var/lib/gpufleet)"
result journal "$(test -s /var/lib/gpufleet/journal.sqlite3 && echo yes)"
result config_mode "$(stat -c '%U:%G %a' /etc/gpufleet/daemon.toml)"
result exposure "$(systemd-analyze security "$unit" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')"

# --- NVML (the fake library) under the sandbox, reading another user's /proc ----
sleep 600 &
sleeper=$!
printf 'gpu_count = 2\ngpu.0.process.a = %s 1073741824 compute\n' "$sleeper" >/gf/nvml_state.txt
mkdir -p "/etc/systemd/system/$unit.d"
printf '[Service]\nEnvironment=LD_LIBRARY_PATH=/gf/fakenvml FAKE_NVML_STATE=/gf/nvml_state.txt\n' \
  >"/etc/systemd/system/$unit.d/50-fake-nvml.conf"
sed -i 's/^backend = "nvml"$/backend = "nvml"\nmetrics_listen = "127.0.0.1:9401"/' /etc/gpufleet/daemon.toml
systemctl daemon-reload
systemctl restart "$unit"
wait_serving && result nvml_answering yes
/opt/gpufleet/venv/bin/python - "$sleeper" <<'PY' | tee -a /gf/results
import sys, grpc
from gpufleet.v1 import node_pb2 as pb, node_pb2_grpc as pb_grpc
with grpc.insecure_channel("127.0.0.1:50051") as channel:
    stub = pb_grpc.NodeServiceStub(channel)
    print("RESULT gpus", len(stub.GetInventory(pb.GetInventoryRequest(), timeout=5).gpus))
    for batch in stub.StreamSamples(pb.StreamSamplesRequest(), timeout=20):
        found = [p for g in batch.gpus for p in g.processes if p.pid == int(sys.argv[1])]
        if found:
            print("RESULT process_user", found[0].user)
            break
PY
/opt/gpufleet/venv/bin/python -c 'import urllib.request
print(urllib.request.urlopen("http://127.0.0.1:9401/metrics", timeout=5).read().decode())' \
  >/gf/metrics.txt
grep -q '^DCGM_FI_DEV_GPU_TEMP{gpu="0"' /gf/metrics.txt && result metrics yes

# --- workloads: a transient unit each, as their owner, outside the sandbox -------
result polkit_rule "$(stat -c '%U %a' /etc/polkit-1/rules.d/50-gpufleet-workloads.rules)"
journalctl -u "$unit" -b --no-pager | grep -q 'workloads start as transient systemd units' &&
  result launcher systemd
groupadd gfteam
useradd --create-home --user-group --groups gfteam --shell /bin/bash gfalice
install -o gfalice -g gfalice -m 0600 /dev/null /home/gfalice/note
echo secret-note >/home/gfalice/note
/opt/gpufleet/venv/bin/python "$checkout/tests/installer/container_workloads.py" gfalice |
  tee -a /gf/results
# The rule grants the daemon its workload units, not other units.
systemd-run --quiet --unit=gf-victim.service sleep 600
setpriv --reuid=gpufleet --regid=gpufleet --clear-groups \
  systemctl --no-ask-password stop gf-victim.service || result other_unit_refused yes
result victim_active "$(systemctl is-active gf-victim.service)"
systemctl stop gf-victim.service
wait_serving && result answering_after_workloads yes

# --- a process in the unit's cgroup outlives a restart (KillMode=process) -------
setpriv --reuid=gpufleet --regid=gpufleet --clear-groups sleep 600 &
child=$!
cgroup="$(awk -F: '$1 == "0" || $2 == "name=systemd" {print $3; exit}' "/proc/$(main_pid)/cgroup")"
for procs in /sys/fs/cgroup{,/unified,/systemd}"$cgroup"/cgroup.procs; do
  [ -w "$procs" ] && echo "$child" >"$procs"
done
systemctl restart "$unit"
sleep 1
kill -0 "$child" && result child_survives_restart yes

# --- upgrade keeps the edited config; uninstall; purge ----------------------------
"$checkout/installer/install.sh"
result upgrade_rc $?
result config_kept "$(grep -c '^metrics_listen' /etc/gpufleet/daemon.toml)"
result active_after_upgrade "$(systemctl is-active "$unit")"
"$checkout/installer/uninstall.sh"
result uninstall_rc $?
result venv_removed "$(test -e /opt/gpufleet || echo yes)"
result config_left "$(test -e /etc/gpufleet/daemon.toml && echo yes)"
"$checkout/installer/uninstall.sh" --purge
result purge_with_workload_rc $?
kill "$child" "$sleeper"
sleep 0.5
"$checkout/installer/uninstall.sh" --purge
result purge_rc $?
result user_removed "$(getent passwd gpufleet >/dev/null || echo yes)"
result state_removed "$(test -e /var/lib/gpufleet || echo yes)"

# --- the Debian package: install, upgrade, remove, purge ------------------------
# /gf/deb/first.deb as build-deb.sh made it; next.deb: the same, one version later.
apt_get() { DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Use-Pty=0 "$@"; }
journal_rows() {
  /opt/gpufleet/venv/bin/python -c 'import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
print(*db.execute("SELECT count(*), min(rowid) FROM events").fetchone())' \
    /var/lib/gpufleet/journal.sqlite3
}
# This machine's root may be a Docker image's, whose policy-rc.d forbids starting
# services from maintainer scripts (deb-systemd-invoke asks it, as every Debian
# package does); a server has none. The overlay's copy goes, the host's stays.
rm -f /usr/sbin/policy-rc.d
started=$(date +%s%N)
apt_get install /gf/deb/first.deb
result deb_install_rc $?
result deb_install_ms $(( ($(date +%s%N) - started) / 1000000 ))
result deb_active "$(systemctl is-active "$unit")"
result deb_enabled "$(systemctl is-enabled "$unit")"
wait_serving && result deb_answering yes
result deb_user "$(stat -c %U "/proc/$(main_pid)")"
result deb_cap_eff "$(status_field CapEff)"
result deb_no_new_privs "$(status_field NoNewPrivs)"
result deb_seccomp "$(status_field Seccomp)"
result deb_state_dir "$(stat -c '%U %a' /var/lib/gpufleet)"
result deb_config_mode "$(stat -c '%U:%G %a' /etc/gpufleet/daemon.toml)"
result deb_polkit_rule "$(stat -c '%U %a' /usr/share/polkit-1/rules.d/50-gpufleet-workloads.rules)"
result deb_exposure "$(systemd-analyze security "$unit" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')"
echo '# edited by the operator' >>/etc/gpufleet/daemon.toml
before="$(journal_rows)"
old_pid="$(main_pid)"
apt_get install /gf/deb/next.deb
result deb_upgrade_rc $?
result deb_version "$(dpkg-query -W -f '${Version}' gpufleet-daemon)"
[ "$(systemctl is-active "$unit")" = active ] && [ "$(main_pid)" != "$old_pid" ] &&
  result deb_restarted yes
wait_serving && result deb_answering_after_upgrade yes
result deb_config_kept "$(grep -c '^# edited by the operator' /etc/gpufleet/daemon.toml)"
after="$(journal_rows)"
# Every row the journal held is still there (the restart may add some): same first row.
[ "${before#* }" = "${after#* }" ] && [ "${after% *}" -ge "${before% *}" ] &&
  [ "${before% *}" -gt 0 ] && result deb_records_kept yes
apt_get remove gpufleet-daemon
result deb_remove_rc $?
systemctl is-active --quiet "$unit" || result deb_stopped yes
result deb_venv_removed "$(test -e /opt/gpufleet/venv || echo yes)"
result deb_config_left "$(test -e /etc/gpufleet/daemon.toml && echo yes)"
result deb_state_left "$(test -s /var/lib/gpufleet/journal.sqlite3 && echo yes)"
result deb_user_left "$(getent passwd gpufleet >/dev/null && echo yes)"
apt_get purge gpufleet-daemon
result deb_purge_rc $?
result deb_config_removed "$(test -e /etc/gpufleet || echo yes)"
result deb_state_removed "$(test -e /var/lib/gpufleet || echo yes)"
result deb_user_removed "$(getent passwd gpufleet >/dev/null || echo yes)"
result deb_opt_removed "$(test -e /opt/gpufleet || echo yes)"
result finished yes
