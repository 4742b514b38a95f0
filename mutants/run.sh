#!/usr/bin/env bash
# run.sh is make mutants: every safety mutant of this directory (a patch to
# a script or to the Go core, mutants/README.md) is applied to a fresh copy
# of the tree, and the tests its header names are run there. A mutant is
# killed when every one of its tests fails; it survived when one passes.
# A patch that no longer applies, or a mutant that does not build, is an
# error (the list must be fixed), never a kill. Prints one line per mutant
# and the kill rate; exits 0 only when every mutant is killed.
#
# Usage: mutants/run.sh [name...]   (default: every mutants/*.patch)
# MUTANTS_FLAGS: extra go test flags (default -count=1 -timeout 5m).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
GO=${GO:-go}
flags=${MUTANTS_FLAGS:--count=1 -timeout 5m}
# -trimpath: the build cache does not depend on where the copy lies, so
# only the mutated package and those above it are compiled again.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"
command -v patch >/dev/null || { echo "mutants: patch is not installed"; exit 2; }

if [ $# -gt 0 ]; then
	list=()
	for n in "$@"; do list+=("mutants/${n%.patch}.patch"); done
else
	list=(mutants/*.patch)
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The tree as it is now (uncommitted changes included), without .git.
tar --exclude=./.git --exclude=./mutants -cf "$work/tree.tar" .

total=0 killed=0 survived=0 errors=0
for p in "${list[@]}"; do
	name=$(basename "$p" .patch)
	total=$((total + 1))
	t0=$(date +%s)
	dir=$work/tree
	rm -rf "$dir"; mkdir -p "$dir"
	tar -xf "$work/tree.tar" -C "$dir"
	# A patch may hold alternatives, separated by a line "# or:" (the same
	# mutant of the code before and after a refactoring): the first that
	# applies is used.
	rm -rf "$work/alt"; mkdir -p "$work/alt"
	awk -v d="$work/alt" 'BEGIN {n = 0} /^# or:/ {n++; next} {print > (d "/" n ".patch")}' "$p"
	applied=
	for a in $(ls "$work/alt" | sort -n); do
		if patch -p1 -s -F3 --dry-run -d "$dir" <"$work/alt/$a" >/dev/null 2>&1; then
			patch -p1 -s -F3 -d "$dir" <"$work/alt/$a" >"$dir/.patch.log" 2>&1 && applied=$a && break
		fi
	done
	if [ -z "$applied" ]; then
		printf '%-28s ERROR     the patch does not apply any more (no alternative applies)\n' "$name"
		errors=$((errors + 1)); rm -rf "$dir"; continue
	fi
	env=()
	if grep -q '^# needs: redis-server' "$p"; then
		env=(REDLOCK_REQUIRE_REDIS=1)
	fi
	verdict=killed
	notes=()
	while read -r _ _ pkg re; do
		[ -n "$pkg" ] || continue
		# It must build (and vet) first: a compile error is not a kill.
		if ! (cd "$dir" && $GO test -count=1 -run '^$' "$pkg" >"$dir/.build.log" 2>&1); then
			verdict=error
			notes+=("does not build in $pkg: $(grep -m1 -E '\.go:[0-9]+' "$dir/.build.log")")
			break
		fi
		if (cd "$dir" && env "${env[@]}" $GO test $flags -run "$re" "$pkg" >"$dir/.test.log" 2>&1); then
			verdict=survived
			notes+=("$pkg $re passed")
		elif grep -q '^ok\|no tests to run' "$dir/.test.log" && ! grep -q -- '--- FAIL' "$dir/.test.log"; then
			verdict=error
			notes+=("$pkg $re: failed without a failing test (see the log)")
		else
			notes+=("$pkg $(grep -m1 -o -- '--- FAIL: [^ ]*' "$dir/.test.log" | sed 's/--- FAIL: //') failed")
		fi
	done < <(grep '^# test: ' "$p")
	secs=$(($(date +%s) - t0))
	case $verdict in
	killed) killed=$((killed + 1)) ;;
	survived) survived=$((survived + 1)) ;;
	*) errors=$((errors + 1)) ;;
	esac
	printf '%-28s %-9s %4ss  %s\n' "$name" "$(echo "$verdict" | tr a-z A-Z)" "$secs" "$(IFS=';'; echo "${notes[*]}")"
	rm -rf "$dir"
done
rate=0
[ "$total" -gt 0 ] && rate=$((100 * killed / total))
echo "mutants: $killed killed, $survived survived, $errors errors of $total: kill rate $rate%"
[ "$killed" = "$total" ]
