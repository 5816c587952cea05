#!/usr/bin/env bash
# redis-local.sh: a throwaway local Redis for development and tests.
#
#   scripts/redis-local.sh start [PORT]   ensure a Redis answers on 127.0.0.1:PORT; print its URL last
#   scripts/redis-local.sh stop  [PORT]   stop the one this script started
#   scripts/redis-local.sh url   [PORT]   print the URL without starting anything
#
# PORT defaults to 6379, where the replica tests (cmd/gateway) look. When
# something already answers PING there it is used as it is. Otherwise
# redis-server is started in the background, listening on 127.0.0.1 only,
# without persistence (no RDB snapshots, no AOF): every start is empty, which
# is what tests want. Its pid file and log are kept under ./data/redis. If
# redis-server is missing it is installed with apt-get (root, or passwordless
# sudo). `start` is idempotent and serialised with flock.
set -euo pipefail

DEFAULT_PORT=6379
DIR=./data/redis

die() {
	echo "redis-local: $*" >&2
	exit 1
}

usage() {
	sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

url() {
	echo "redis://127.0.0.1:$1/0"
}

# answers reports whether a Redis answers PING on 127.0.0.1:port, with
# redis-cli when there is one, else over bash's /dev/tcp.
answers() {
	local port=$1
	if command -v redis-cli >/dev/null; then
		[[ $(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]]
		return
	fi
	local reply
	reply=$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && printf 'PING\r\n' >&3 && head -c 5 <&3" 2>/dev/null) || return 1
	[[ $reply == "+PONG" ]]
}

find_server() {
	command -v redis-server 2>/dev/null && return 0
	[[ -x /usr/bin/redis-server ]] && echo /usr/bin/redis-server && return 0
	return 1
}

install_server() {
	local sudo=()
	if [[ $(id -u) -ne 0 ]]; then
		if ! command -v sudo >/dev/null || ! sudo -n true 2>/dev/null; then
			die "no redis-server found and not root: install the redis-server package"
		fi
		sudo=(sudo -n)
	fi
	command -v apt-get >/dev/null || die "no redis-server found and no apt-get: install Redis"
	echo "redis-local: installing redis-server with apt-get" >&2
	# policy-rc.d keeps the package from starting its own service: this
	# script starts the server it wants, on the port it wants.
	local policy=/usr/sbin/policy-rc.d cleanup=0
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
		"${sudo[@]}" chmod +x "$policy"
		cleanup=1
	fi
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends redis-server >&2
	if [[ $cleanup -eq 1 ]]; then
		"${sudo[@]}" rm -f "$policy"
	fi
}

cmd_start() {
	local port=$1
	mkdir -p "$DIR"
	local dir
	dir=$(cd "$DIR" && pwd)
	if command -v flock >/dev/null; then
		exec 9>"$dir/start.lock"
		flock -w 60 9 || die "timed out waiting for the lock on $dir/start.lock"
	fi
	if answers "$port"; then
		url "$port"
		return 0
	fi
	local bin
	bin=$(find_server) || { install_server && bin=$(find_server); } ||
		die "redis-server still not found after installing"
	# 9>&-: the server must not inherit the lock descriptor.
	"$bin" --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
		--dir "$dir" --daemonize yes --pidfile "$dir/redis-$port.pid" \
		--logfile "$dir/redis-$port.log" >&2 9>&- ||
		die "could not start redis-server on port $port"
	for _ in $(seq 100); do
		if answers "$port"; then
			url "$port"
			return 0
		fi
		sleep 0.1
	done
	tail -n 20 "$dir/redis-$port.log" >&2 || true
	die "redis-server started but does not answer on 127.0.0.1:$port (is the port taken?)"
}

cmd_stop() {
	local port=$1 pidfile=$DIR/redis-$1.pid
	if [[ ! -f $pidfile ]]; then
		echo "redis-local: no server started by this script on port $port" >&2
		return 0
	fi
	local pid
	pid=$(cat "$pidfile")
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid"
		for _ in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
	else
		echo "redis-local: not running" >&2
	fi
	rm -f "$pidfile"
}

main() {
	[[ $# -ge 1 ]] || usage
	local cmd=$1
	local port=${2:-$DEFAULT_PORT}
	[[ $port =~ ^[0-9]+$ ]] || die "PORT must be a number, got '$port'"
	case $cmd in
	start) cmd_start "$port" ;;
	stop) cmd_stop "$port" ;;
	url) url "$port" ;;
	*) usage ;;
	esac
}

main "$@"
