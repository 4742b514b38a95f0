# events.awk prints the steps of an adversary.pml or deadline.pml trail
# (spin -t): the model's "EV ..." lines, numbered, each with the time when
# it moved, and the violated property after the step that violated it
# (spin reports the assertion before the step's own line).
/EV / {
	sub(/^.*EV /, "")
	if ($0 ~ /^tick/) { ticks = $2; next }
	if (ticks != "") { printf "%3d. (time %s) %s\n", ++n, ticks, $0; ticks = "" } else printf "%3d. %s\n", ++n, $0
	if (bad != "") { print "     VIOLATED: " bad; bad = "" }
	next
}
/assertion violated/ { bad = $0; sub(/^.*Error: /, "", bad) }
END { if (bad != "") print "     VIOLATED: " bad }
