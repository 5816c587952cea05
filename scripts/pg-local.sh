#!/usr/bin/env bash
# pg-local.sh: a throwaway local Postgres cluster for development and tests.
#
#   scripts/pg-local.sh start [DIR] [PORT]   ensure a cluster in DIR runs; print its DSN last
#   scripts/pg-local.sh stop  [DIR]          stop it (fast shutdown)
#   scripts/pg-local.sh url   [DIR] [PORT]   print the DSN without starting anything
#
# DIR defaults to ./data/pg and PORT to 25432: below the kernel's ephemeral range
# (32768-60999), where a busy machine's outgoing connections could hold the port.
# The cluster uses trust auth, listens on 127.0.0.1 only, and keeps its unix
# socket inside DIR, so it never collides with a system Postgres. Server
# binaries come from /usr/lib/postgresql/*/bin or PATH; if none exist they are
# installed with apt-get (root, or passwordless sudo).
# As root, initdb and the server run as the `postgres` user. `start` is idempotent
# and serialised with flock, so concurrent test processes can all call it.
set -euo pipefail

DEFAULT_DIR=./data/pg
DEFAULT_PORT=25432

die() {
	echo "pg-local: $*" >&2
	exit 1
}

usage() {
	sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

# find_bindir prints the directory holding initdb and pg_ctl, newest version first.
find_bindir() {
	local d
	# The glob sorts lexically (10 before 9), so order by version explicitly.
	while IFS= read -r d; do
		if [[ -x $d/initdb && -x $d/pg_ctl ]]; then
			echo "$d"
			return 0
		fi
	done < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -t/ -k5,5 -rn)
	local initdb
	if initdb=$(command -v initdb) && command -v pg_ctl >/dev/null; then
		dirname "$(readlink -f "$initdb")"
		return 0
	fi
	return 1
}

install_server() {
	local sudo=()
	if [[ $(id -u) -ne 0 ]]; then
		if ! command -v sudo >/dev/null || ! sudo -n true 2>/dev/null; then
			die "no Postgres server binaries found and not root: install the postgresql package"
		fi
		sudo=(sudo -n)
	fi
	command -v apt-get >/dev/null ||
		die "no Postgres server binaries found and no apt-get: install Postgres (initdb, pg_ctl)"
	echo "pg-local: installing postgresql with apt-get" >&2
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql >&2
}

# as_owner runs a command as the cluster owner: the postgres user when we are
# root (the server refuses to run as root), else ourselves.
as_owner() {
	if [[ $(id -u) -eq 0 ]]; then
		if command -v runuser >/dev/null; then
			runuser -u postgres -- "$@"
		else
			su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
		fi
	else
		"$@"
	fi
}

dsn() {
	echo "postgres://postgres@127.0.0.1:$1/postgres?sslmode=disable"
}

# configured_port prints the port recorded in the cluster's config, if any.
configured_port() {
	local conf=$1/gateway-local.conf
	if [[ -f $conf ]]; then
		sed -n "s/^port = \([0-9]*\)$/\1/p" "$conf" | tail -n1
	fi
}

write_config() {
	local dir=$1 port=$2
	# Rewritten on every start, so a new PORT takes effect on a stopped cluster.
	cat >"$dir/gateway-local.conf" <<EOF
# written by scripts/pg-local.sh
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 200
EOF
	grep -q "^include_if_exists = 'gateway-local.conf'" "$dir/postgresql.conf" ||
		echo "include_if_exists = 'gateway-local.conf'" >>"$dir/postgresql.conf"
	if [[ $(id -u) -eq 0 ]]; then
		chown postgres: "$dir/gateway-local.conf"
	fi
}

is_running() {
	as_owner "$BINDIR/pg_ctl" -D "$1" status >/dev/null 2>&1
}

cmd_start() {
	local dir=$1 port=$2
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)

	# Serialise concurrent starts (parallel `go test` packages) on one cluster.
	if command -v flock >/dev/null; then
		exec 9>"$dir.lock"
		flock -w 120 9 || die "timed out waiting for the lock on $dir.lock"
	fi

	BINDIR=$(find_bindir) || { install_server && BINDIR=$(find_bindir); } ||
		die "Postgres server binaries still not found after installing"

	if [[ $(id -u) -eq 0 ]]; then
		id postgres >/dev/null 2>&1 || die "running as root but there is no postgres user to run the server as"
		chown postgres: "$dir"
		as_owner test -x "$dir" ||
			die "user postgres cannot reach $dir (a parent directory is not searchable); pick another DIR"
	fi
	chmod 700 "$dir"

	if [[ ! -f $dir/PG_VERSION ]]; then
		[[ -z $(ls -A "$dir") ]] || die "$dir exists, is not empty and holds no cluster"
		echo "pg-local: initdb in $dir" >&2
		as_owner "$BINDIR/initdb" -D "$dir" -U postgres --auth=trust --encoding=UTF8 \
			--locale=C --no-instructions >&2
	fi

	if is_running "$dir"; then
		local running
		running=$(configured_port "$dir")
		if [[ -n $running && $running != "$port" ]]; then
			echo "pg-local: already running on port $running (not $port)" >&2
		fi
		dsn "${running:-$port}"
		return 0
	fi

	write_config "$dir" "$port"
	# 9>&-: the server must not inherit the lock descriptor, or it would hold the
	# lock for its whole life and every later start would wait for it.
	if ! as_owner "$BINDIR/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start >&2 9>&-; then
		tail -n 20 "$dir/server.log" >&2 || true
		die "could not start Postgres in $dir on port $port (is the port taken?)"
	fi
	dsn "$port"
}

cmd_stop() {
	local dir=$1
	[[ -f $dir/PG_VERSION ]] || { echo "pg-local: no cluster in $dir" >&2; return 0; }
	dir=$(cd "$dir" && pwd)
	BINDIR=$(find_bindir) || die "Postgres server binaries not found"
	if is_running "$dir"; then
		as_owner "$BINDIR/pg_ctl" -D "$dir" -m fast -w stop >&2
	else
		echo "pg-local: not running" >&2
	fi
}

cmd_url() {
	local dir=$1 port=$2
	local configured=""
	if [[ -d $dir ]]; then
		configured=$(configured_port "$dir")
	fi
	dsn "${configured:-$port}"
}

main() {
	[[ $# -ge 1 ]] || usage
	local cmd=$1
	local dir=${2:-$DEFAULT_DIR}
	local port=${3:-$DEFAULT_PORT}
	[[ $port =~ ^[0-9]+$ ]] || die "PORT must be a number, got '$port'"
	case $cmd in
	start) cmd_start "$dir" "$port" ;;
	stop) cmd_stop "$dir" ;;
	url) cmd_url "$dir" "$port" ;;
	*) usage ;;
	esac
}

main "$@"
