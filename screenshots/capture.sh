#!/usr/bin/env bash
# Regenerates the screenshots of the real dashboard:
#   screenshots/table.png   the task table, every status at once (`taskdeck demo`)
#   screenshots/inbox.png   the inbox (key 2): every task that waits for an answer
#   screenshots/form.png    the input form of the demo's approve task, filled in
#   screenshots/detail.png  the detail pane of that task once it completed
#   screenshots/detail-failed.png the detail pane of the survey task, a
#                           tool error (✗) once one of its inputs was declined
#   screenshots/help.png    the help screen
#   screenshots/servers.png two demo servers, one of them stopped: unreachable
#   screenshots/servers-view.png the servers view (S) of those two servers
#   screenshots/bulk.png    a bulk cancel's confirmation, listing its targets
#                           (the open tasks of those two servers)
#
# Run it from anywhere: bash screenshots/capture.sh
# Needs Go (go.mod's version; the go command fetches it if older), tmux,
# rsvg-convert and the DejaVu fonts (each installed with apt-get when
# missing). freeze, from the Go module proxy, lays the ANSI capture out as
# SVG; rsvg-convert rasterizes it in DejaVu Sans Mono.
#
# How: build taskdeck, run `taskdeck demo` in a 120×32 tmux pane on a private
# tmux server, drive it with send-keys, capture each state with
# `tmux capture-pane -e` (ANSI colours), normalize the capture for freeze
# (screenshots/ansi.go), and render it with freeze at full resolution (a
# cell is about 9 px wide: a 120-column pane is about 1,060 px).
set -euo pipefail

FREEZE=github.com/charmbracelet/freeze@v0.2.2
WIDTH=120
HEIGHT=32

cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=screenshots

say() { printf 'capture.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

if ! command -v go >/dev/null 2>&1; then
	die "Go is needed: install it from https://go.dev/dl/ (or apt-get install golang-go) and run again"
fi
# install PACKAGE: apt-get install, as root or through sudo.
install() {
	say "$1 is missing; installing it with apt-get"
	if [ "$(id -u)" -eq 0 ]; then
		apt-get update -qq && apt-get install -y -qq "$1"
	elif command -v sudo >/dev/null 2>&1; then
		sudo apt-get update -qq && sudo apt-get install -y -qq "$1"
	else
		die "$1 is needed: install it (apt-get install $1) and run again"
	fi
}
command -v rsvg-convert >/dev/null 2>&1 || install librsvg2-bin
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf ] || install fonts-dejavu-core
command -v tmux >/dev/null 2>&1 || install tmux

work=$(mktemp -d "${TMPDIR:-/tmp}/taskdeck-shots.XXXXXX")
sock="$work/tmux.sock"
tm() { tmux -S "$sock" "$@"; }
pids=()
cleanup() {
	tm kill-server >/dev/null 2>&1 || true
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

say "building taskdeck"
go build -o "$work/taskdeck" .
say "fetching freeze ($FREEZE) and building the helper"
# Build both once, so that the renders below do not wait on the network.
GOBIN="$work/bin" go install "$FREEZE"
go build -o "$work/bin/ansi" screenshots/ansi.go

# escape-time 0: ESC reaches taskdeck at once; remain-on-exit keeps the pane.
printf 'set -g escape-time 0\nset -g remain-on-exit on\nset -g status off\n' >"$work/tmux.conf"
mkdir -p "$work/home"
# env -i: a clean, known environment (no NO_COLOR, COLORTERM or TMUX from outside).
tm -f "$work/tmux.conf" new-session -d -s shot -x "$WIDTH" -y "$HEIGHT" \
	env -i HOME="$work/home" PATH="$PATH" TERM=xterm-256color TMPDIR="$work" LANG=C.UTF-8 \
	"$work/taskdeck" demo

screen() { tm capture-pane -p -t shot; }

# wait_for DESCRIPTION SHELL-TEST: polls the screen (in $s) until the test holds.
wait_for() {
	local what=$1 test=$2 deadline=$((SECONDS + 60))
	local dead
	while :; do
		# Whether the pane had ended before the screen was read: one that
		# ends between the read and the test is tested again.
		dead=$(tm display-message -p -t shot '#{pane_dead}')
		s=$(screen)
		if eval "$test"; then
			return 0
		fi
		if [ "$dead" = 1 ]; then
			printf '%s\n' "$s" >&2
			die "taskdeck ended while waiting for $what"
		fi
		if [ $SECONDS -ge $deadline ]; then
			printf '%s\n' "$s" >&2
			die "gave up waiting for $what"
		fi
		sleep 0.1
	done
}
has() { grep -qF -- "$1" <<<"$s"; }

# The status of the table's row of TOOL ("" if none): a row is ID, symbol,
# status, server, tool, ….
row_status() { awk -v tool="$1" 'f && NF >= 5 && $5 == tool { print $3; exit } /STATUS.*TOOL/ { f = 1 }' <<<"$s"; }
# The status symbol of the table's row of TOOL ("" if none).
row_symbol() { awk -v tool="$1" 'f && NF >= 5 && $5 == tool { print $2; exit } /STATUS.*TOOL/ { f = 1 }' <<<"$s"; }
# The tool of the selected row, from the "N/M" position in the footer.
selected_tool() {
	local n
	n=$(grep -oE '^[0-9]+/[0-9]+' <<<"$s" | tail -n 1 | cut -d/ -f1)
	awk -v n="$n" 'f && NF >= 5 { if (++c == n) { print $5; exit } } /STATUS.*TOOL/ { f = 1 }' <<<"$s"
}
position() { grep -oE '^[0-9]+/[0-9]+' <<<"$s" | tail -n 1; }

# shoot NAME: capture the pane with its colours and render NAME.png.
shoot() {
	local name=$1
	tm capture-pane -e -N -p -t shot >"$work/$name.ansi"
	"$work/bin/ansi" normalize "$work/$name.ansi" "$work/$name.norm"
	# freeze lays out the SVG; rsvg-convert rasterizes it (freeze's own PNG
	# path, a WebAssembly renderer, crashes on some machines).
	(cd "$work" && "$work/bin/freeze" "$name.norm" --language ansi -o "$name.svg" \
		-c full --shadow.blur 0 --shadow.y 0 --margin 0 --font.family "DejaVu Sans Mono" >/dev/null &&
		rsvg-convert "$name.svg" -o "$name.png")
	mv "$work/$name.png" "$out/$name.png"
	say "wrote $out/$name.png"
}

# 1. The table: every status at once, while the long tasks still run.
wait_for "every status in the table" '
	[ "$(row_status pipeline)" = working ] && [ "$(row_status echo)" = completed ] &&
	[ "$(row_status approve)" = input_required ] && has "✗ failed" && has "⊘ cancelled" &&
	has "● working" && grep -q "slept [1-9][0-9]* of 40 s" <<<"$s"'
shoot table

# 2. The inbox: 2 shows who waits for an answer, who waited longest first.
tm send-keys -t shot 2
wait_for "the inbox" 'has "[2 waiting" && has "WAIT" && [ "$(row_status approve)" = input_required ]'
shoot inbox
tm send-keys -t shot 0
wait_for "every task again" 'has "[0 all"'

# 3. The approve task's form: i jumps to the next task waiting for input.
for _ in 1 2 3 4; do
	[ "$(selected_tool)" = approve ] && break
	before=$(position)
	tm send-keys -t shot i
	wait_for "the cursor to move" '[ "$(position)" != "$before" ]'
done
[ "$(selected_tool)" = approve ] || die "i never reached the approve task"
tm send-keys -t shot a
wait_for "the approve form" 'has "Approve deploy to production?" && has "Reason *"'
tm send-keys -t shot y # Yes, and on to the reason
wait_for "the reason field" 'has "┃ Reason *"'
tm send-keys -t shot -l "green on staging, go ahead"
wait_for "the typed reason" 'has "> green on staging, go ahead"'
shoot form

# 4. The detail pane of the approve task, once completed: what was answered, and when.
tm send-keys -t shot Enter
wait_for "the approve task completed" '[ "$(row_status approve)" = completed ]'
[ "$(selected_tool)" = approve ] || die "the cursor left the approve task"
tm send-keys -t shot Enter
wait_for "the detail pane" 'has "→ completed" && has "approved deploy to production" && has "Answered"'
shoot detail

# 5. The detail pane of a failed task with answered inputs: the survey asks
# two questions at once; its contact form declined (ctrl+x, then Decline)
# and its rating answered, it ends as a tool error (✗).
tm send-keys -t shot Escape
wait_for "the table again" 'has "STATUS" && has "MESSAGE" && [ "$(row_status survey)" = input_required ]'
for _ in 1 2 3 4; do
	[ "$(selected_tool)" = survey ] && break
	before=$(position)
	tm send-keys -t shot i
	wait_for "the cursor to move" '[ "$(position)" != "$before" ]'
done
[ "$(selected_tool)" = survey ] || die "i never reached the survey task"
tm send-keys -t shot a
wait_for "the contact form" 'has "How can we reach you" && has "esc back, nothing sent"'
tm send-keys -t shot C-x
wait_for "the decline question" 'has "Decline or cancel" && has "[ No ]"'
tm send-keys -t shot Right
wait_for "Decline chosen" 'has "[ Decline ]"'
tm send-keys -t shot Enter
wait_for "the contact input declined" '! has "Decline or cancel" && has "asks: How would you rate us"'
tm send-keys -t shot a
wait_for "the rating form" 'has "How would you rate us" && has "Score *"'
tm send-keys -t shot -l 9
wait_for "the typed score" 'has "> 9"'
tm send-keys -t shot Enter
wait_for "the survey task ended in a tool error" '[ "$(row_symbol survey)" = ✗ ]'
[ "$(selected_tool)" = survey ] || die "the cursor left the survey task"
tm send-keys -t shot Enter
wait_for "the failed detail pane" 'has "survey declined" && has "Answered"'
shoot detail-failed

# 6. The help screen.
tm send-keys -t shot Escape
wait_for "the table again" 'has "STATUS" && has "MESSAGE"'
tm send-keys -t shot '?'
wait_for "the help screen" 'has "Statuses" && has "any key closes this help"'
shoot help

# Quit (any key closes the help, then q quits).
tm send-keys -t shot q
wait_for "the table again" 'has "STATUS" && has "MESSAGE"'
tm send-keys -t shot q
wait_for "taskdeck to quit" '[ "$(tm display-message -p -t shot "#{pane_dead}")" = 1 ]'
# 8. Servers at a glance: two demo servers, "web" and "build"; build stops
# after its tasks started, and its polls fail.
cleanenv=(env -i HOME="$work/home" PATH="$PATH" TERM=xterm-256color TMPDIR="$work" LANG=C.UTF-8)
for name in web build; do
	"${cleanenv[@]}" "$work/taskdeck" demo-server --addr 127.0.0.1:0 >"$work/$name.url" &
	pids+=($!)
	declare "${name}_pid=$!"
done
for name in web build; do
	deadline=$((SECONDS + 30))
	until [ -s "$work/$name.url" ]; do
		[ $SECONDS -lt $deadline ] || die "the $name demo server printed no URL"
		sleep 0.1
	done
done
printf '{"mcpServers":{"web":{"url":"%s"},"build":{"url":"%s"}}}\n' "$(head -n1 "$work/web.url")" "$(head -n1 "$work/build.url")" >"$work/servers.json"
td() { "${cleanenv[@]}" "$work/taskdeck" --config "$work/servers.json" --data-dir "$work/data" "$@"; }
td call --server web sleep --args '{"seconds":600}' >/dev/null
td call --server web approve --args '{"action":"deploy"}' >/dev/null
td call --server web echo --args '{"text":"hello"}' >/dev/null
td call --server build pipeline --args '{"stages":3}' >/dev/null
td call --server build sleep --args '{"seconds":600}' >/dev/null
kill "$build_pid"
# A new session before the old one goes: the tmux server ends with its last session.
tm new-session -d -s servers -x "$WIDTH" -y "$HEIGHT" \
	"${cleanenv[@]}" "$work/taskdeck" --config "$work/servers.json" --data-dir "$work/data"
tm kill-session -t shot
tm rename-session -t servers shot
wait_for "build unreachable" 'has "✗ build unreachable" && has "✓ web 2 open"'
shoot servers

# 9. A bulk confirmation: ctrl+a marks every row shown, c asks about the
# open ones, listing them; No is chosen until another answer is. Taken
# here, where two 600 s sleeps are still open: by now the demo's own
# tasks have all ended, and the question would have nothing to list.
tm send-keys -t shot C-a
wait_for "every row marked" 'has "marked all"'
tm send-keys -t shot c
wait_for "the bulk question" 'has "on the server?" && has "[ No ]" && has "Yes, cancel"'
shoot bulk
tm send-keys -t shot Escape
wait_for "nothing done" 'has "nothing done"'
tm send-keys -t shot U # unmark all, for the servers view
wait_for "the marks cleared" '! grep -qE "· [0-9]+ marked" <<<"$s"'

# 10. The servers view (S): a row per server, the selected one whole under
# the table; build, the first by name, is selected.
tm send-keys -t shot S
wait_for "the servers view, build selected" 'has "PUSH" && has "BEHIND" && has "last error:"'
shoot servers-view
tm send-keys -t shot q
wait_for "taskdeck to quit" '[ "$(tm display-message -p -t shot "#{pane_dead}")" = 1 ]'
say "done: $out/table.png $out/inbox.png $out/form.png $out/detail.png $out/detail-failed.png $out/help.png $out/bulk.png $out/servers.png $out/servers-view.png"
