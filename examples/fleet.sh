#!/usr/bin/env bash
# Run one schedlab spec on many machines, then merge and report.
#
#   examples/fleet.sh start SPEC.toml host-a host-b user@host-c ...
#   examples/fleet.sh collect host-a host-b user@host-c ...
#
# start: for each host, over ssh, copy the schedlab binary and the spec and
# start the campaign there under nohup (it outlives the ssh session), then
# disconnect. Every run measures only its own machine, and nothing crosses
# the network while campaigns run: no polling, no open session.
#
# collect (later; `schedlab plan SPEC.toml` estimates how much later): for
# each host whose campaign has ended, fetch its database; a host still
# running is named and left for the next collect. Then `schedlab merge`
# puts every fetched host's campaign into fleet.db (merging again adds only
# new runs), and `schedlab report --by host` and a Parquet export are
# written next to it.
#
# Environment: SCHEDLAB (the binary to ship; default target/release/schedlab,
# built for the hosts' architecture; a static or same-distribution build),
# REMOTE_DIR (default schedlab-fleet, under the remote home), OUT (default
# fleet-results), SSH_OPTS (extra ssh/scp options, e.g. "-o BatchMode=yes").
#
# Starting again on a host resumes its campaign from its own database
# (finished runs are kept); a host whose campaign is still running refuses
# a second one (schedlab's database lock).
set -euo pipefail

usage() { sed -n '4,5p' "$0" | sed 's/^# *//' >&2; exit 2; }
die() { echo "fleet.sh: $*" >&2; exit 2; }
# A host goes to ssh and scp after `--`, and names a local file: only the
# characters of user@host[:port] names and ssh aliases, never a leading
# dash (which ssh would take as an option such as -oProxyCommand=...).
check_host() {
    case $1 in
    -*) die "host '$1' starts with '-': not a host name" ;;
    *[!A-Za-z0-9._@:%\[\]-]*) die "host '$1' has characters a host name does not" ;;
    esac
}
[ $# -ge 2 ] || usage
cmd=$1
shift
SCHEDLAB=${SCHEDLAB:-target/release/schedlab}
REMOTE_DIR=${REMOTE_DIR:-schedlab-fleet}
OUT=${OUT:-fleet-results}
read -r -a ssh_opts <<<"${SSH_OPTS:-}"
[ -x "$SCHEDLAB" ] || { echo "no schedlab binary at $SCHEDLAB (cargo build --release)" >&2; exit 2; }
# REMOTE_DIR is part of every remote command line: a plain relative or
# absolute path only, so that no user text is ever read as shell there.
case $REMOTE_DIR in
'' | -*) die "REMOTE_DIR '$REMOTE_DIR' must be a path not starting with '-'" ;;
*[!A-Za-z0-9._/+-]*) die "REMOTE_DIR '$REMOTE_DIR' may hold only letters, digits and . _ / + -" ;;
esac
hosts=("$@")
[ "$cmd" = start ] && hosts=("${@:2}") # after the spec
for host in "${hosts[@]}"; do
    check_host "$host"
done

case $cmd in
start)
    spec=$1
    shift
    [ $# -ge 1 ] || usage
    [ -f "$spec" ] || die "no spec file at $spec"
    for host in "$@"; do
        echo "== $host: starting $(basename -- "$spec")"
        ssh "${ssh_opts[@]}" -- "$host" "mkdir -p -- $REMOTE_DIR"
        # The spec travels as spec.toml: its file name is never part of a
        # remote command (the campaign is named inside it).
        scp -q "${ssh_opts[@]}" -- "$SCHEDLAB" "$host:$REMOTE_DIR/schedlab"
        scp -q "${ssh_opts[@]}" -- "$spec" "$host:$REMOTE_DIR/spec.toml"
        # `echo $?` after the campaign: collect tells finished from running.
        ssh "${ssh_opts[@]}" -- "$host" "cd -- $REMOTE_DIR && rm -f exit-code && \
            nohup sh -c './schedlab run spec.toml --db results.db --quiet; echo \$? > exit-code' \
            > run.log 2>&1 < /dev/null &"
    done
    echo "started on $# hosts; later: $0 collect $*"
    ;;
collect)
    mkdir -p "$OUT"
    fetched=()
    for host in "$@"; do
        name=${host##*@}
        code=$(ssh "${ssh_opts[@]}" -- "$host" "cat -- $REMOTE_DIR/exit-code 2>/dev/null" || true)
        if [ -z "$code" ]; then
            echo "== $host: still running (or never started); collect it later" >&2
            continue
        fi
        # 0: every run ok; 3: some runs failed or timed out (stored with
        # their reasons, in the report); other: see run.log.
        echo "== $host: campaign ended with exit code $code"
        [ "$code" = 0 ] || ssh "${ssh_opts[@]}" -- "$host" "tail -n 5 -- $REMOTE_DIR/run.log" >&2 || true
        if scp -q "${ssh_opts[@]}" -- "$host:$REMOTE_DIR/results.db" "$OUT/$name.db"; then
            fetched+=("$OUT/$name.db")
        else
            echo "== $host: no database to fetch; left out" >&2
        fi
    done
    [ ${#fetched[@]} -gt 0 ] || { echo "no host has finished yet" >&2; exit 1; }
    "$SCHEDLAB" merge "${fetched[@]}" -o "$OUT/fleet.db"
    "$SCHEDLAB" report --db "$OUT/fleet.db" --by host -o "$OUT/report.html"
    "$SCHEDLAB" report --db "$OUT/fleet.db" --by host --format md > "$OUT/report.md"
    "$SCHEDLAB" export --db "$OUT/fleet.db" --format parquet -o "$OUT/runs.parquet"
    for db in "${fetched[@]}"; do
        "$SCHEDLAB" export --db "$db" --format parquet -o "${db%.db}.parquet"
    done
    echo "== $OUT: fleet.db, report.html, report.md, runs.parquet, one <host>.parquet per host"
    ;;
*) usage ;;
esac
