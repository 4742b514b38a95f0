#!/usr/bin/env bash
# run.sh is make model: SPIN checks the real model's configurations, which
# must have no error, and each mutant, which must be refuted with a
# counterexample trail (printed as steps, trail.awk). For every run it
# prints the states stored, the search depth reached and the seconds.
# Exits 0 only when every real run passes and every mutant is refuted.
# Needs spin and gcc. docs/model.md explains the runs.
set -uo pipefail
cd "$(dirname "$0")"
for tool in spin gcc awk; do
	command -v "$tool" >/dev/null 2>&1 || { echo "model: $tool is not installed (Debian: apt-get install spin gcc)"; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
jobs=${MODEL_JOBS:-2}  # runs at once (each is one process)
order=()

# run NAME KIND FILE PANFLAGS CCFLAGS [SPIN -D flags...]: KIND is "holds"
# (no error allowed; the search must be exhaustive: no depth limit hit),
# "bounded" (no error within the depth bound given to pan with -m) or
# "refuted" (a mutant: an error and its trail expected).
run() {
	local name=$1 kind=$2 file=$3 panflags=$4 ccflags=$5
	shift 5
	local d=$work/$name
	mkdir -p "$d"
	cp "$file" trail.awk "$d/"
	local src
	src=$(basename "$file")
	# liveness runs (progress.pml) search for acceptance cycles: no -DSAFETY
	local safety=-DSAFETY awkf=trail.awk
	case $src in
	progress.pml) safety=; awkf=cycle.awk ;;
	adversary.pml | deadline.pml) awkf=events.awk ;;
	esac
	cp "$awkf" "$d/"
	if ! (cd "$d" && spin -a "$@" "$src" >spin.out 2>&1 && gcc -O2 -w $safety -DNOBOUNDCHECK $ccflags -o pan pan.c >gcc.out 2>&1); then
		echo "$name: could not build the verifier"; cat "$d/spin.out" "$d/gcc.out" 2>/dev/null | head -20
		touch "$work/bad"; return
	fi
	local t0 t1
	t0=$(date +%s.%N)
	(cd "$d" && ./pan $panflags >pan.out 2>&1)
	# with a named ltl claim (progress.pml) pan writes _<file>.trail, which
	# spin -t reads; the copy is what the checks below look for
	[ -s "$d/_$src.trail" ] && cp "$d/_$src.trail" "$d/$src.trail"
	t1=$(date +%s.%N)
	local errors states depth secs
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$d/pan.out" | tail -n 1)
	states=$(awk '/states, stored/ {print $1; exit}' "$d/pan.out")
	depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$d/pan.out" | tail -n 1)
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
	local verdict
	case $kind in
	holds)
		if [ "${errors:-x}" = 0 ] && ! grep -q 'max search depth too small' "$d/pan.out"; then
			verdict="holds"
		else
			verdict="FAILED"; touch "$work/bad"
		fi ;;
	bounded)
		# no error in any state within the depth bound (-m): not exhaustive
		if [ "${errors:-x}" = 0 ]; then
			verdict="holds(bound)"
		else
			verdict="FAILED"; touch "$work/bad"
		fi ;;
	refuted)
		if [ "${errors:-0}" -ge 1 ] && [ -s "$d/$src.trail" ]; then
			verdict="refuted"
		else
			verdict="NOT REFUTED"; touch "$work/bad"
		fi ;;
	esac
	printf '%-16s %-12s states %10s   depth %6s   %6ss   (%s; pan %s)\n' "$name" "$verdict" "${states:-?}" "${depth:-?}" "$secs" "$*" "$panflags"
	if [ -s "$d/$src.trail" ]; then
		local maxa=2 c=2 f
		for f in "$@"; do
			case $f in -DMAXA=*) maxa=${f#-DMAXA=} ;; -DC=*) c=${f#-DC=} ;; esac
		done
		(cd "$d" && spin -t "$@" "$src" 2>&1 | awk -v maxa="$maxa" -v c="$c" -f "$awkf" | sed 's/^/    /')
		grep -E 'assertion violated|acceptance cycle|non-progress cycle|invalid end state' "$d/pan.out" | head -n 1 | sed 's/^/    pan: /'
	fi
	if [ "$verdict" = FAILED ]; then
		grep -E 'error|violated|too small' "$d/pan.out" | head -5 | sed 's/^/    /'
	fi
}

# start runs one in the background, at most $jobs at once; its report is
# printed in order at the end.
start() {
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
	order+=("$1")
	run "$@" >"$work/$1.report" 2>&1 &
}

EXH="-m100000 -c1"  # exhaustive depth-first search, stop at the first error
COL="-DCOLLAPSE"    # lossless state compression

# Progress (liveness, progress.pml): acceptance cycles of the ltl property
# under weak fairness (pan -a -f); NFAIR=3: more than 6 processes. Every
# progress run has attempts apart in both phases (-DAPART1) and no
# proposals (-DNOPR); docs/model.md, "Progress", says why and what each
# run covers. progress: a client crash and node 2 down (answering errors:
# a minority of hand-overs is given back), both at any point, no window
# of a live client ending after the faults. progress-expiry: node 2 down
# and silent (no give-back: the hand-overs it leaves expire once the
# call's window has ended), time passing after the faults. progress-loss:
# one message lost (a reply, a clean-up release or a hand-over message).
# Stored without compression (progress: about 900 MB): COLLAPSE made it
# 1.6 times slower. Started first: the longest runs. MODEL_PROGRESS=1
# also runs two that hold but take longer: progress-early (one validity
# or hand-over window of a live client ending early) and progress-overlap
# (node 2 down with attempts overlapping in the first phase, so that the
# nodes may hand over to different heads and the give-back is used).
LIVE="-a -f -m100000 -c1"
PROG="-DAPART1 -DNOPR"
start progress holds progress.pml "$LIVE" "-DNFAIR=3" $PROG -DFAULTS=6 -DHWEND=0
start progress-expiry holds progress.pml "$LIVE" "-DNFAIR=3" $PROG -DFAULTS=4 -DSILENT
start progress-loss holds progress.pml "$LIVE" "-DNFAIR=3" $PROG -DFAULTS=1 -DMAXF=1 -DHWEND=0
if [ "${MODEL_PROGRESS:-0}" = 1 ]; then
	start progress-early holds progress.pml "$LIVE" "-DNFAIR=3" $PROG -DFAULTS=8 -DMAXF=1 -DHWEND=0
	start progress-overlap holds progress.pml "$LIVE" "$COL -DNFAIR=3" -DNOPR -DFAULTS=4 -DHWEND=0
fi

# The real model: no error in any reachable state.
start core     holds redlock.pml "$EXH" "$COL" -DMAXA=1 -DMAXB=1 -DMAXR=1
start leases   holds redlock.pml "$EXH" "$COL" -DMAXA=2 -DMAXB=1 -DMAXR=0 -DNOLATE -DNORENEW
start queue    holds redlock.pml "$EXH" "$COL" -DQUEUE -DMAXA=1 -DMAXB=1 -DMAXR=0 -DNOLATE
start fence5   bounded redlock.pml "-m20 -c1" "$COL" -DN=5 -DMAXR=0 -DNOLATE -DNOEXPIRE -DNORENEW
start semaphore holds semaphore.pml "$EXH" "$COL"
start rwlock    holds rwlock.pml "$EXH" "$COL" -DC=2
# rwlock3: two readers and a writer (the index evicted and re-created,
# one reader's release lowering U under another); no reader's key
# evicted and no window ending before its release, or the search does
# not finish in minutes (docs/model.md)
start rwlock3   holds rwlock.pml "$EXH" "$COL" -DC=3 -DNOKEVICT -DNOTICK

# The mutants: each must be refuted. Breadth-first search (BFS) finds
# the shortest counterexample; no-confirm at N = 5 uses a depth-bounded
# depth-first search instead (faster there).
BFS="-DCOLLAPSE -DBFS"
start no-confirm  refuted redlock.pml "-m20 -c1" "$COL" -DN=5 -DNOCONFIRM -DMAXR=0 -DNOLATE -DNOEXPIRE -DNORENEW
start no-relcheck refuted redlock.pml "$EXH" "$BFS" -DNORELCHECK -DMAXA=2 -DMAXB=1 -DMAXR=0 -DNORENEW
start no-rejoin   refuted redlock.pml "$EXH" "$BFS" -DNOREJOIN -DMAXA=1 -DMAXB=1 -DMAXR=1 -DNOLATE -DNORENEW
# The read-write mutants run without the lemma (-DNOLEMMA), so that each
# trail ends in a property; the two that need a second reader run as
# rwlock3 does. rw-nolost, rw-readlost and rw-relguard keep the writer's
# lock from eviction (-DNOWEVICT), so that their trails show the index's;
# rw-keylost is rw-readlost's mutant with the writer's lock evicted.
start rw-nolost    refuted rwlock.pml "$EXH" "$BFS" -DC=2 -DNOLOSTCHECK -DNOLEMMA -DNOWEVICT
start rw-readlost  refuted rwlock.pml "$EXH" "$BFS" -DC=3 -DNOREADLOST -DNOLEMMA -DNOKEVICT -DNOTICK -DNOWEVICT
start rw-relguard  refuted rwlock.pml "$EXH" "$BFS" -DC=3 -DNORELEASEGUARD -DNOLEMMA -DNOKEVICT -DNOTICK -DNOWEVICT
start rw-keylost   refuted rwlock.pml "$EXH" "$BFS" -DC=2 -DNOREADLOST -DNOLEMMA
start no-skip     refuted progress.pml "$LIVE" "$COL -DNFAIR=3" $PROG -DFAULTS=2 -DHWEND=0 -DNOSKIP
start late-ho     refuted redlock.pml "$EXH" "$BFS" -DQUEUE -DLATEHO -DMAXA=2 -DMAXB=1 -DMAXR=0 -DNOLATE -DNORENEW

# The adversary (adversary.pml, deadline.pml; docs/model.md, "The
# adversary model"): one node under an operator, with explicit time. The
# Safety v4 rules hold against each set of actions; today's rules (main
# before v4), each a mutant, are refuted. Safety v4.1 (the default)
# closes three gaps of v4: the marker's high-water, a new counter never
# starts below a value the db issued (adv-clockback*, adv-evictctr hold;
# without it, -DNOHI, refuted in no-hi-*), and one marker per name on the
# server, a new one deleting its copies in the other dbs, with renewals
# only where the marker stands (adv-swap*; without: no-swapdel, and
# without the renewal check: no-renewmark, a lease renewed on the data
# swapped back between two swaps). gap-mixdelay is what is left
# (docs/design.md §6.2, "What it does not cover"): a loss noticed first by
# a Locker whose rejoin delay is shorter than another's lease; the tried
# amendment DMAXREC (the marker records the largest delay) fails when the
# marker is itself an old copy (gap-mixfailback) and, like any record in
# the db, when the loss takes it (gap-mixdelay).
A="adversary.pml"
start adv-evict     holds $A "$EXH" "$COL" -DA_EVICT -DA_POLICY -DA_RESETSTAT
start adv-swapdb    holds $A "$EXH" "$COL" -DA_SWAP -DA_EVICT -DMAXADV=1
start adv-restart   holds $A "$EXH" "$COL" -DA_RESTART -DA_FLUSH -DDURABLE
start adv-failback  holds $A "$EXH" "$COL" -DA_FAILBACK -DMAXADV=1 -DTMAX=10
start adv-configs   holds $A "$EXH" "$COL" -DA_EVICT -DTMAX=14
start adv-replica   holds $A "$EXH" "$COL" -DREPL -DTMAX=10
start adv-deadline  holds deadline.pml "-m1000 -c1" ""
start adv-clockback holds $A "$EXH" "$COL" -DA_BACK -DBK=7 -DMAXADV=2 -DA_FLUSH -DTMAX=18
start adv-clockback1 holds $A "$EXH" "$COL" -DA_BACK -DMAXADV=1 -DTMAX=15
start adv-evictctr  holds $A "$EXH" "$COL" -DA_EVICT -DA_EVICTCTR -DA_POLICY
start adv-swapback  holds $A "$EXH" "$COL" -DA_SWAP -DMAXADV=2
start adv-swapback3 holds $A "$EXH" "$COL" -DA_SWAP -DA_EVICT -DMAXADV=3 -DTMAX=10
start adv-swapback4 holds $A "$EXH" "$COL" -DA_SWAP -DMAXADV=4 -DTMAX=12
start adv-swapflush holds $A "$EXH" "$COL" -DA_SWAP -DA_FLUSH -DA_RESTART -DMAXADV=3 -DTMAX=10
start today-evict-policy    refuted $A "$EXH" "$BFS" -DEVSTAT -DA_EVICT -DA_POLICY
start today-evict-resetstat refuted $A "$EXH" "$BFS" -DEVSTAT -DA_EVICT -DA_RESETSTAT
start today-swapdb          refuted $A "$EXH" "$BFS" -DNODBMARK -DA_SWAP -DMAXADV=1
start today-configs         refuted $A "$EXH" "$BFS" -DCFGSTEP -DNOHI -DTMAX=14
start today-durable         refuted $A "$EXH" "$BFS" -DDUREXEMPT -DA_RESTART -DA_FLUSH -DDURABLE
start today-failback        refuted $A "$EXH" "$BFS" -DRUNID -DA_FAILBACK -DMAXADV=1 -DTMAX=10
start today-replica         refuted $A "$EXH" "$BFS" -DREPLVOTE -DREPL -DTMAX=10
start today-deadline        refuted deadline.pml "-m1000 -c1" "-DBFS" -DLATEWRITE
start no-seen               refuted $A "$EXH" "$BFS" -DNOSEEN -DA_BACK -DBK=7 -DMAXADV=2 -DA_FLUSH -DTMAX=18
start no-relcheck-node      refuted $A "$EXH" "$BFS" -DNORELCHECK -DTMAX=10
start no-hi-clockback refuted $A "$EXH" "$BFS" -DNOHI -DA_BACK -DMAXADV=1 -DTMAX=15
start no-hi-evictctr  refuted $A "$EXH" "$BFS" -DNOHI -DA_EVICT -DA_EVICTCTR
start no-swapdel      refuted $A "$EXH" "$BFS" -DNOSWAPDEL -DA_SWAP -DMAXADV=2
start no-renewmark    refuted $A "$EXH" "$BFS" -DNORENEWMARK -DA_SWAP -DMAXADV=3 -DTMAX=10
start gap-mixdelay    refuted $A "$EXH" "$BFS" -DMIXD -DA_FLUSH -DMAXADV=1
start gap-mixfailback refuted $A "$EXH" "$BFS" -DDMAXREC -DMIXD -DA_FAILBACK -DMAXADV=1 -DTMAX=10

wait
for name in "${order[@]}"; do cat "$work/$name.report"; done
if [ -e "$work/bad" ]; then
	echo "model: FAILED"
	exit 1
fi
echo "model: the real model holds and every mutant is refuted"
