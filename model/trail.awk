# trail.awk turns the events that redlock.pml prints (printf "EV ...")
# while spin replays a counterexample trail (spin -t) into numbered,
# readable steps. Variables: maxa (MAXA), c (C) as the model was built.
# Lines that are not events are dropped, except spin's own report of the
# violated assertion.
function cl(i) { return substr("ABC", i + 1, 1) }
function tok(t,   o, k) {
	if (t == 0) return "none"
	if (t > c * maxa) return "place-" cl(t - 1 - c * maxa)
	o = int((t - 1) / maxa); k = (t - 1) % maxa
	return cl(o) (k + 1)
}
function kind(k) {
	return k == 1 ? "acquire" : k == 2 ? "fence" : k == 4 ? "release" : k == 5 ? "clean-up release" : k == 6 ? "leave" : k == 7 ? "rehold" : "call " k
}
function say(s) { printf "%2d. %s\n", ++step, s }
BEGIN { step = 0 }
$1 == "EV" {
	e = $2
	if (e == "attempt") say("client " cl($3) " starts attempt " tok($4) ($5 ? " (fair Acquire, with its place)" : "") ": acquire sent to every node")
	else if (e == "deliver") {
		n = $3; who = cl($4); k = $5; t = $6; arg = $7; r1 = $8; rv = $9; late = $10; lk = $11; fc = $12
		d = "node " n " runs " kind(k) "(" tok(t)
		if (k == 2) d = d ", " arg
		if (k == 7) d = d " -> " tok(arg)
		d = d ") from client " who (late ? " (a late call: the client no longer waits for it)" : "") ": "
		if (k == 1) d = d (r1 == 1 ? "granted, counter " rv : r1 == 2 ? "already handed over to the place, counter " rv : "refused" (rv ? ", place with ticket " rv : ""))
		else if (k == 2 || k == 7) d = d (r1 ? "yes" : "no (not its lock)")
		else if (k == 4 && r1) d = d "released"
		else if (k == 4) d = d "not its lock, nothing released"
		else d = d "done"
		d = d "; lock now " tok(lk) ", counter " fc
		say(d)
	}
	else if (e == "tally") say("client " cl($3) " tallies: " $4 " grants, largest counter " $5 ", " $6 " of them at it")
	else if (e == "fenced") say("client " cl($3) " counts " $4 " fence acknowledgements for token " $5)
	else if (e == "tryho") say("client " cl($3) " counts " $4 " hand-overs to its place, largest counter " $5 ($7 ? "" : "; its place's ticket has lapsed (hand-over window over)"))
	else if (e == "valid") say("client " cl($3) " now holds a valid lease" ($5 ? " (from hand-overs)" : "") " with fencing token " $4 " (the previous lease's token: " $6 ")")
	else if (e == "elapsed") say("client " cl($3) ": validity elapsed during the attempt")
	else if (e == "cleanup") say("client " cl($3) "'s attempt " tok($4) " failed: clean-up release sent where it may hold the lock")
	else if (e == "release") say("client " cl($3) " ends its lease " tok($4) ($5 ? "" : " (lost)") ": release sent to every node")
	else if (e == "renew") say("client " cl($3) (($4) ? " renews its lease on a majority" : " fails to renew: lease lost"))
	else if (e == "leave") say("client " cl($3) " gives up: leave sent to every node")
	else if (e == "expire") say("node " $3 ": the lock key of " tok($4) " expires")
	else if (e == "tick") say("time passes: client " cl($3) "'s validity window ends")
	else if (e == "tickh") say("time passes: client " cl($3) "'s hand-over window ends (its places may lapse)")
	else if (e == "restart") say("node " $3 " restarts empty" ($4 ? " (counter floor " $4 ", sits out for the rejoin delay)" : ""))
	else if (e == "rejoin") say("node " $3 " rejoins after the rejoin delay")
	else if (e == "lapse") say("node " $3 ": client " cl($4) "'s place lapses")
	else if (e == "holost") say("the hand-over message from node " $3 " to client " cl($4) " is lost")
	else if (e == "qexpire") say("node " $3 ": the queue keys expire")
	next
}
/text of failed assertion/ { sub(/^.*text of failed assertion: /, ""); print "    VIOLATED: " $0 }
