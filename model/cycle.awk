# cycle.awk turns the events progress.pml prints (printf "EV ...") while
# spin replays an acceptance-cycle trail (spin -t) into numbered, readable
# steps, and marks where the cycle that repeats forever begins.
function cl(i) { return substr("AB", i + 1, 1) }
function tok(t) {
	if (t == 0) return "none"
	if (t == 1 || t == 2) return cl(t - 1)
	if (t == 3 || t == 4) return "place-" cl(t - 3)
	return "stale"
}
function kind(k) { return k == 1 ? "acquire" : k == 4 ? "release" : k == 5 ? "clean-up release" : k == 7 ? "rehold" : k == 8 ? "leave (give back)" : "call " k }
# Steps before the cycle are held back: a long run-up is shortened to its
# first 10 steps, its faults and its last 30 steps (gaps marked "...").
function say(s) {
	line = sprintf("%2d. %s", ++step, s)
	if (incycle) print line
	else { pre[step] = line; fault[step] = s ~ /down for good|crashes|is lost|faults stop|ends early/ }
}
function flush(   i, gap) {
	gap = 0
	for (i = 1; i <= step; i++) {
		if (step <= 60 || i <= 10 || i > step - 30 || fault[i]) { if (gap) print "    ..."; gap = 0; print pre[i] }
		else gap = 1
	}
	if (gap) print "    ..."
	delete pre; delete fault
}
BEGIN { step = 0; incycle = 0 }
/START OF CYCLE/ { flush(); incycle = 1; print "    -- the cycle: from here the steps repeat forever --"; next }
END { if (!incycle) flush() }
$1 == "EV" {
	e = $2
	if (e == "attempt") say("client " cl($3) " starts an attempt: acquire sent to every node" ($4 ? " (bringing ticket " $4 ")" : ""))
	else if (e == "deliver") {
		n = $3; who = cl($4); k = $5; r1 = $8; rv = $9; rp = $10; lk = $11
		d = "node " n " runs " kind(k) "(" tok($6) ") from client " who ": "
		if (k == 1) d = d (r1 == 1 ? "granted" : r1 == 2 ? "handed over to its place" : "refused" (rv ? ", place with ticket " rv : ""))
		else if (k == 7) d = d (r1 ? "yes" : "no")
		else d = d "done"
		d = d "; lock now " tok(lk) (rp ? "" : " (the reply is lost)")
		say(d)
	}
	else if (e == "tally") say("client " cl($3) " tallies: " $4 " grants, " $5 " hand-overs" ($6 ? "" : ", validity over"))
	else if (e == "tryho") say("client " cl($3) " counts " $4 " hand-overs to its place")
	else if (e == "valid") say("client " cl($3) " holds a lease" ($4 ? " (from hand-overs)" : ""))
	else if (e == "giveback") say("client " cl($3) " gives back its " $4 " hand-over(s) (a minority, and a node refused): its old place leaves every node; it waits in a new place with its ticket")
	else if (e == "cleanup") say("client " cl($3) "'s attempt failed: clean-up release sent")
	else if (e == "release") say("client " cl($3) " releases its lease " tok($4) " and calls Acquire again")
	else if (e == "crash") say("client " cl($3) " crashes")
	else if (e == "lost") say("the clean-up release to node " $3 " from client " cl($4) " is lost")
	else if (e == "expire") say("node " $3 ": the lock key of " tok($4) " expires")
	else if (e == "tick") say("time passes: client " cl($3) "'s validity window ends")
	else if (e == "tickh") say("time passes: client " cl($3) "'s hand-over window ends (its places may lapse)")
	else if (e == "lapse") say("node " $3 ": client " cl($4) "'s place lapses")
	else if (e == "holost") say("the hand-over message from node " $3 " to client " cl($4) " is lost")
	else if (e == "down") say("node " $3 " goes down for good")
	else if (e == "calm") say("the faults stop")
	next
}
/text of failed assertion/ { sub(/^.*text of failed assertion: /, ""); print "    VIOLATED: " $0 }
