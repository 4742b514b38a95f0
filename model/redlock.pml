/*
 * redlock.pml: a SPIN model of redlock's protocol (docs/model.md).
 *
 * N nodes run the scripts of scripts/*.lua, each as one atomic step
 * (d_step), on one resource. C clients fan calls out to them, tally the
 * replies, settle the fencing token (fence-confirm), renew, release and,
 * with -DQUEUE, wait in the fair queue, take hand-overs, rehold and leave.
 * Every call is a request record that the network process may deliver at
 * any later point or never; a client may stop waiting for it at any point
 * (its timeout), and its reply is then ignored. Faults (process faults):
 * lock keys expire, places lapse, queue keys expire, nodes restart empty
 * and rejoin, the clock ends validity windows.
 *
 * Time is not modelled; validity windows are bits (vt, hw) that the clock
 * may end at any moment, and a key may expire only once the window it was
 * set to outlive has ended (see docs/model.md, "Time").
 *
 * Each script is marked with a comment "step: <name>"; the Lua file that
 * implements it names the step in its "-- model:" line (model_test.go
 * checks that the two lists agree).
 *
 * Switches (-D): N, C, MAXA (attempts per client), MAXR (node restarts),
 * QUEUE (fair queue and hand-over), and the mutants NOCONFIRM (token is
 * the plain maximum of the grants' counters), NORELCHECK (release does
 * not check the releasing token), NOREJOIN (a node restarts empty and
 * grants at once, counters not floored), LATEHO (a waiter takes a lease
 * from hand-overs after its place's ticket lapsed).
 */

#ifndef N
#define N 3
#endif
#ifndef C
#define C 2
#endif
#ifndef MAXA
#define MAXA 2   /* attempts of client 0 (and the token space per client) */
#endif
#ifndef MAXB
#define MAXB 1   /* attempts of every other client */
#endif
#define BUDGET(c) ((c) == 0 -> MAXA : MAXB)
#ifndef MAXR
#define MAXR 1
#endif
#define Q (N/2+1)

/* tokens: attempt k of client c is TOK(c,k); the place token of client c's
 * fair Acquire call is PT(c). 0 is "no token". */
#define TOK(c,k) (1 + (c)*MAXA + (k))
#define PT(c) (1 + C*MAXA + (c))
#define ISPT(t) ((t) > C*MAXA)
#define OWNER(t) (ISPT(t) -> ((t) - 1 - C*MAXA) : (((t) - 1) / MAXA))

/* request kinds */
#define ACQ 1
#define FEN 2
#define REL 4   /* a lease's release (hands over with QUEUE) */
#define CLN 5   /* an attempt's clean-up release: hands nothing over */
#define LEAVE 6
#define REHOLD 7

#define NOQ 255  /* an acquire's argument: a TryAcquire, which takes no place */

/* request states */
#define EMPTY 0
#define PEND 1

typedef Req {
  byte st;    /* EMPTY, or PEND: in flight */
  byte kind;
  byte tok;   /* the token the call carries */
  byte arg;   /* F for fence; the new token for rehold; the ticket an
               * acquire brings (NOQ: a TryAcquire, which takes no place) */
};

/* Two request records per client and node: [0] the client's current call,
 * [1] one earlier call still in flight (a late call, whose reply nobody
 * reads). A third call in flight replaces the late one: that one is lost.
 * The reply to a current call is added to the client's tally of the
 * round when the node runs the script (gm, fm, am, km below); a reply
 * that arrives after the client's tally is simply not counted. */
#define NS (C*N*2)
#define S0(c,n) (((c)*N + (n))*2)
#define S1(c,n) (((c)*N + (n))*2 + 1)
Req rq[NS];

/* ---- node state ---- */
byte lock[N];   /* token whose lock key stands here, 0: none */
bit pin[N];     /* the key outlives the window of its token's owner */
byte fence[N];  /* fence counter (0: no counter yet) */
byte fl[N];     /* rejoin floor: a counter below it is raised to it */
bit down[N];    /* restarted and sitting out (rejoin rule) */
byte cov[N];    /* attempt windows (bit per client) open when the node
                 * restarted */
byte covh[N];   /* call windows (hw) open when it restarted */
byte nrestart;  /* restarts so far (at most MAXR) */

#ifdef QUEUE
/* the wait queue: per node and client, the client's place (0 none,
 * 1 live, 2 lapsed but not yet removed) and its ticket */
#define P(n,c) ((n)*C + (c))
byte pl[N*C];
byte tk[N*C];
/* hand-over messages on the head's inbox: the counter, 0 none */
byte hom[N*C];
bit hw[C];      /* the call's hand-over window: S + min(T, QueueTTL) - drift */
#endif

/* ---- the current round's replies, per client ---- */
byte gm[C];     /* nodes (bit mask) that granted the current attempt */
byte fm[C];     /* the largest counter among those grants */
byte am[C];     /* the granting nodes whose counter is fm */
byte km[C];     /* nodes that said yes to the current fence or rehold
                 * round */
#ifdef QUEUE
byte mt[C];     /* the highest ticket the client was given */
#endif
#define POP(m) (((m) & 1) + (((m) >> 1) & 1) + (((m) >> 2) & 1) + (((m) >> 3) & 1) + (((m) >> 4) & 1))
#define BIT(n) (1 << (n))

/* ---- client state seen by the properties and the faults ---- */
byte cpc[C];    /* the client's program counter (ATT ... DONE, below) */
byte cur[C];    /* token of the client's current attempt or lease */
bit vt[C];      /* the current attempt's or lease's validity window is open */
bit held[C];    /* the client believes it holds a lease */
bit hol[C];     /* that lease rests on the place token (hand-overs) */

/* ---- property monitors ---- */
byte last;      /* token of the latest lease that became valid, which is
                 * the highest token the fenced resource accepted */

#define VALID(c) (held[c] && (hol[c] -> HW(c) : vt[c]))
#ifdef QUEUE
#define HW(c) hw[c]
#else
#define HW(c) 0
#endif

/* A lock key may expire unless it is pinned to a window that is open:
 * an attempt's key to that attempt's window (vt) while the attempt or
 * its lease is current; a key under a place token to the call's
 * hand-over window (hw). */
#define PROT(n) (pin[n] && (ISPT(lock[n]) -> HW(OWNER(lock[n])) : \
                 (cur[OWNER(lock[n])] == lock[n] && vt[OWNER(lock[n])])))

/* count a new holder on node n's fence counter (counter.lua c_count):
 * raised to the rejoin floor first */
inline count(n) {
  /* step: c_count */
  if
  :: fence[n] < fl[n] -> fence[n] = fl[n]
  :: else -> skip
  fi;
  fence[n]++
}

#ifdef QUEUE
/* q_scan: the head of node n's live queue, skipping client sk (C: none);
 * lapsed places are removed (q_purge) */
inline scan(n, sk, h) {
  h = C; j = 0;
  do
  :: j < C ->
     if
     :: pl[P(n,j)] == 2 -> pl[P(n,j)] = 0; tk[P(n,j)] = 0
     :: pl[P(n,j)] == 1 && j != sk && (h == C || tk[P(n,j)] < tk[P(n,h)] ||
          (tk[P(n,j)] == tk[P(n,h)] && j < h)) -> h = j
     :: else -> skip
     fi;
     j++
  :: else -> break
  od
}

/* q_join: client c takes (or keeps) its place on node n, bringing ticket
 * b (0: a newcomer, proposing pr); the place's ticket is the result */
inline join(n, c, b, pr) {
  if
  :: pl[P(n,c)] != 0 ->
     if
     :: b > tk[P(n,c)] -> tk[P(n,c)] = b
     :: else -> skip
     fi
  :: else ->
     if
     :: b > 0 -> tk[P(n,c)] = b
     :: else ->
        t = 0; j = 0;
        do
        :: j < C -> if :: pl[P(n,j)] != 0 && tk[P(n,j)] > t -> t = tk[P(n,j)] :: else -> skip fi; j++
        :: else -> break
        od;
        if :: pr > t -> tk[P(n,c)] = pr :: else -> tk[P(n,c)] = t + 1 fi
     fi
  fi;
  pl[P(n,c)] = 1
}
#endif

/* client program counters */
#define ATT 0        /* starts an attempt */
#define TALLY 2      /* counts its answers */
#define FENCING 3    /* fence-confirm round */
#define HOLD 4       /* holds a lease */
#define REHOLDING 6  /* moves its grants under its place's token */
#define TRYHO 7      /* takes a lease from hand-overs */
#define HOFENCING 8  /* fence-confirm round of that lease */
#define DONE 9

/* A call in flight whose delivery can no longer change anything is
 * dropped (it would be a no-op whenever it arrived): a release, clean-up
 * or leave where the caller's lock and place are gone and no acquire of
 * the same token is still in flight to put them back, a fence nobody
 * waits for that would change nothing. This only merges states that
 * differ in dead messages. */
#define ACQFLIGHT(c, n, t) ((rq[S0(c,n)].st == PEND && rq[S0(c,n)].kind == ACQ && rq[S0(c,n)].tok == (t)) || \
        (rq[S1(c,n)].st == PEND && rq[S1(c,n)].kind == ACQ && rq[S1(c,n)].tok == (t)))
#ifdef QUEUE
#define PLACED(c, n) (lock[n] == PT(c) || pl[P(n,c)] != 0 || ACQFLIGHT(c, n, rq[S0(c,n)].tok) || ACQFLIGHT(c, n, rq[S1(c,n)].tok))
#else
#define PLACED(c, n) false
#endif
#ifdef NORELCHECK
#define RELDEAD(s, c, n) false
#else
#define RELDEAD(s, c, n) (rq[s].kind == REL && lock[n] != rq[s].tok && !PLACED(c, n) && !ACQFLIGHT(c, n, rq[s].tok))
#endif
#define DEAD(s, c, n) (rq[s].st == PEND && ( \
        (rq[s].kind == CLN && lock[n] != rq[s].tok && !ACQFLIGHT(c, n, rq[s].tok)) || RELDEAD(s, c, n) || \
        (rq[s].kind == FEN && ((s) % 2 == 1 || (cpc[c] != FENCING && cpc[c] != HOFENCING)) && \
         (lock[n] != rq[s].tok || fence[n] >= rq[s].arg) && !ACQFLIGHT(c, n, rq[s].tok))))
#define GC1(s, c, n) if :: DEAD(s, c, n) -> rq[s].st = EMPTY; rq[s].kind = 0; rq[s].tok = 0; rq[s].arg = 0 :: else -> skip fi;
#define GCN(c, n) GC1(S0(c,n), c, n) GC1(S1(c,n), c, n)
#if N == 3
#define GCC(c) GCN(c,0) GCN(c,1) GCN(c,2)
#else
#define GCC(c) GCN(c,0) GCN(c,1) GCN(c,2) GCN(c,3) GCN(c,4)
#endif
#if C == 2
#define GC GCC(0) GCC(1) skip
#else
#define GC GCC(0) GCC(1) GCC(2) skip
#endif

/* deliver request s (client c, node n): the node runs the script; the
 * reply is r1 (0 refused or no, 1 granted or yes, 2 handed over) and rv */
inline deliver(s, c, n) {
  r = rq[s].kind; t0 = rq[s].tok; r1 = 0; rv = 0;
  if
  :: r == ACQ ->
     /* step: acquire */
     if
     :: down[n] -> skip  /* sitting out after a restart: no grant */
     :: lock[n] == t0 -> r1 = 1; rv = fence[n]  /* a retry */
#ifdef QUEUE
     :: lock[n] != 0 && lock[n] == PT(c) -> r1 = 2; rv = fence[n]
     :: lock[n] != 0 && lock[n] != PT(c) && lock[n] != t0 ->
        if
        :: rq[s].arg != NOQ ->
           /* step: q_join */
           join(n, c, rq[s].arg, c + 1); rv = tk[P(n,c)]
        :: else -> skip
        fi
     :: lock[n] == 0 ->
        /* step: q_scan */
        scan(n, C, h);
        if
        :: h != C && h != c ->
           if :: rq[s].arg != NOQ -> join(n, c, rq[s].arg, c + 1); rv = tk[P(n,c)] :: else -> skip fi
        :: else ->
           count(n); lock[n] = t0; pin[n] = 1;
           pl[P(n,c)] = 0; tk[P(n,c)] = 0;
           r1 = 1; rv = fence[n]
        fi
#else
     :: lock[n] != 0 && lock[n] != t0 -> skip
     :: lock[n] == 0 ->
        count(n); lock[n] = t0; pin[n] = 1;
        r1 = 1; rv = fence[n]
#endif
     fi
  :: r == FEN ->
     /* step: fence */
     if
     :: lock[n] == t0 ->
        if :: fence[n] < rq[s].arg -> fence[n] = rq[s].arg :: else -> skip fi;
        r1 = 1
     :: else -> skip
     fi
  :: r == CLN ->
     /* step: release (an attempt's clean-up: deletes its own grant) */
     if :: lock[n] == t0 -> lock[n] = 0; pin[n] = 0 :: else -> skip fi
  :: r == REL ->
     /* step: release */
#ifdef NORELCHECK
     if :: lock[n] != 0 -> r1 = 1 :: else -> skip fi;  /* MUTANT: no token check */
#else
     /* step: l_holds */
     if :: lock[n] != 0 && (lock[n] == t0 || lock[n] == PT(c)) -> r1 = 1 :: else -> skip fi;
#endif
#ifdef QUEUE
     if
     :: r1 == 1 ->
        /* step: q_give: hand over to the head (the caller's own place
         * passed over), never on a node that is sitting out */
        scan(n, c, h);
        if
        :: h != C && !down[n] ->
           lock[n] = PT(h); pin[n] = 1; pl[P(n,h)] = 0; tk[P(n,h)] = 0;
           count(n); hom[P(n,h)] = fence[n]
        :: else -> lock[n] = 0; pin[n] = 0
        fi
     :: else -> skip
     fi;
     pl[P(n,c)] = 0; tk[P(n,c)] = 0  /* the caller's own place goes */
#else
     if :: r1 == 1 -> lock[n] = 0; pin[n] = 0 :: else -> skip fi
#endif
#ifdef QUEUE
  :: r == LEAVE ->
     /* step: leave (giving back a lock handed over to the place) */
     pl[P(n,c)] = 0; tk[P(n,c)] = 0;
     if :: lock[n] == PT(c) -> lock[n] = 0; pin[n] = 0 :: else -> skip fi
  :: r == REHOLD ->
     /* step: rehold (a grant moved under the place's token, for T) */
     if
     :: lock[n] != 0 && lock[n] == t0 -> lock[n] = rq[s].arg; pin[n] = 1; r1 = 1; rv = fence[n]
     :: else -> skip
     fi
#endif
  fi;
  /* the reply, to a current call the client still waits for: into
   * the client's tally */
  if
  :: (s) % 2 == 0 && r == ACQ && cpc[c] == TALLY ->
     if
     :: r1 == 1 ->
        gm[c] = gm[c] | BIT(n);
        if
        :: rv > fm[c] -> fm[c] = rv; am[c] = BIT(n)
        :: rv == fm[c] -> am[c] = am[c] | BIT(n)
        :: else -> skip
        fi
#ifdef QUEUE
     :: r1 == 2 -> hom[P(n,c)] = rv
     :: r1 == 0 && rq[s].arg != NOQ ->
        /* a refusal shows that a hand-over there is gone; it brings the
         * place's ticket */
        hom[P(n,c)] = 0;
        if :: rv > mt[c] -> mt[c] = rv :: else -> skip fi
#endif
     :: else -> skip
     fi
  :: (s) % 2 == 0 && (r == FEN || r == REHOLD) && r1 == 1 &&
     (cpc[c] == FENCING || cpc[c] == HOFENCING || cpc[c] == REHOLDING) ->
     km[c] = km[c] | BIT(n);
#ifdef QUEUE
     if :: r == REHOLD -> hom[P(n,c)] = rv :: else -> skip fi
#endif
  :: else -> skip
  fi;
  printf("EV deliver %d %d %d %d %d %d %d %d %d %d\n", n, c, r, t0, rq[s].arg, r1, rv, (s) % 2, lock[n], fence[n]);
  rq[s].st = EMPTY; rq[s].kind = 0; rq[s].tok = 0; rq[s].arg = 0;
  t0 = 0; r = 0; h = 0; j = 0; t = 0; r1 = 0; rv = 0
}

/* the network: delivers any request in flight, at any time, in any order */
#define DEL(s, c, n) :: d_step { rq[s].st == PEND -> deliver(s, c, n); GC }
#define DELN(c, n) DEL(S0(c,n), c, n) DEL(S1(c,n), c, n)
#if N == 3
#define DELC(c) DELN(c,0) DELN(c,1) DELN(c,2)
#else
#define DELC(c) DELN(c,0) DELN(c,1) DELN(c,2) DELN(c,3) DELN(c,4)
#endif

active proctype network() {
  byte r, t0, h, j, t, r1, rv;
end:
  do
  DELC(0)
  DELC(1)
#if C > 2
  DELC(2)
#endif
  od
}

/* a client's attempt or lease window ends: by the clock, or because the
 * client is done with it (released, failed: its keys then may expire at
 * any time, which in the real system they do only later) */
inline endwin(c) {
  vt[c] = 0; j = 0;
  do :: j < N -> cov[j] = cov[j] & ~(1 << c); j++ :: else -> break od;
  j = 0
}
#ifdef QUEUE
/* a call's hand-over window ends (it never opens again: one call per
 * client) */
inline endcall(c) {
  hw[c] = 0; j = 0;
  do :: j < N -> covh[j] = covh[j] & ~(1 << c); j++ :: else -> break od;
  j = 0
}
#endif

/* one alternative per node, per client, per (node, client) */
#if N == 3
#define FORN(M) M(0) M(1) M(2)
#else
#define FORN(M) M(0) M(1) M(2) M(3) M(4)
#endif
#if C == 2
#define FORC(M) M(0) M(1)
#define FORNC(M) M(0,0) M(0,1) M(1,0) M(1,1) M(2,0) M(2,1)
#else
#define FORC(M) M(0) M(1) M(2)
#define FORNC(M) M(0,0) M(0,1) M(0,2) M(1,0) M(1,1) M(1,2) M(2,0) M(2,1) M(2,2)
#endif

/* a lock key expires: never while it is pinned to an open window */
#ifdef NOEXPIRE
#define EXPIRE(n)
#else
#define EXPIRE(n) :: d_step { lock[n] != 0 && !PROT(n) -> printf("EV expire %d %d\n", n, lock[n]); lock[n] = 0; pin[n] = 0; GC }
#endif
/* the clock ends a client's window (a call's hand-over window ends
 * first: it is never longer than an attempt's) */
#ifdef QUEUE
#define TICK(c) :: d_step { vt[c] && !hw[c] -> printf("EV tick %d\n", c); endwin(c) } \
        :: d_step { hw[c] -> printf("EV tickh %d\n", c); endcall(c) }
#else
#define TICK(c) :: d_step { vt[c] -> printf("EV tick %d\n", c); endwin(c) }
#endif
/* a node restarts empty; with the rejoin rule it sits out until every
 * window open at the restart has ended, and floors its counter. The same
 * event stands for every way a node loses its keys (a FLUSHALL, an
 * eviction, a failover to a replica that missed writes): the marker key
 * makes the node notice the loss and sit out as after a restart. */
/* step: t_trust */
#ifdef NOREJOIN
#define RESTART(n) :: d_step { nrestart < MAXR -> nrestart++; printf("EV restart %d 0\n", n); \
        lock[n] = 0; pin[n] = 0; fence[n] = 0; QCLEAR(n); GC }
#else
#define RESTART(n) :: d_step { nrestart < MAXR -> nrestart++; \
        fl[n] = fence[0]; c = 1; do :: c < N -> if :: fence[c] > fl[n] -> fl[n] = fence[c] :: else -> skip fi; c++ \
        :: else -> break od; printf("EV restart %d %d\n", n, fl[n]); \
        lock[n] = 0; pin[n] = 0; fence[n] = 0; down[n] = 1; \
        c = 0; do :: c < C -> if :: vt[c] -> cov[n] = cov[n] | (1 << c) :: else -> skip fi; \
        HWCOV(n, c); c++ \
        :: else -> break od; c = 0; QCLEAR(n); GC }
#endif
#define REJOIN(n) :: d_step { down[n] && cov[n] == 0 && covh[n] == 0 -> printf("EV rejoin %d\n", n); down[n] = 0 }
#ifdef QUEUE
#define HWCOV(n, c) if :: hw[c] -> covh[n] = covh[n] | (1 << c) :: else -> skip fi
#else
#define HWCOV(n, c) skip
#endif
#ifdef QUEUE
#define QCLEAR(n) c = 0; do :: c < C -> pl[P(n,c)] = 0; tk[P(n,c)] = 0; c++ :: else -> break od; c = 0
/* a place lapses: its ticket was set by an attempt of the call, at least
 * QueueTTL after the call began, so not before the call's hand-over
 * window has ended */
#define LAPSE(n,c) :: d_step { pl[P(n,c)] == 1 && !hw[c] -> printf("EV lapse %d %d\n", n, c); pl[P(n,c)] = 2 }
/* a hand-over message is lost */
#define LOSEHO(n,c) :: d_step { hom[P(n,c)] != 0 -> printf("EV holost %d %d\n", n, c); hom[P(n,c)] = 0 }
/* the queue keys expire: they outlive every place */
#define QEXPIRE(n) :: d_step { (pl[P(n,0)] != 1 && pl[P(n,1)] != 1 QTHIRD(n)) && \
        (pl[P(n,0)] + pl[P(n,1)] QTHIRDS(n)) != 0 -> printf("EV qexpire %d\n", n); QCLEAR(n) }
#if C > 2
#define QTHIRD(n) && pl[P(n,2)] != 1
#define QTHIRDS(n) + pl[P(n,2)]
#else
#define QTHIRD(n)
#define QTHIRDS(n)
#endif
#else
#define QCLEAR(n) skip
#endif

active proctype faults() {
  byte n, c, j;
end:
  do
  FORN(EXPIRE)
  FORC(TICK)
  /* the nodes are symmetric (every client treats them alike), so with
   * MAXR = 1 restarting node 0 stands for restarting any node */
  RESTART(0)
  REJOIN(0)
#ifdef QUEUE
  FORNC(LAPSE)
  FORNC(LOSEHO)
  FORN(QEXPIRE)
#endif
  od
}

/* send a call of kind k with token tk0 and argument a to node n */
inline send(c, n, k, tk0, a) {
  if
#ifdef NOLATE
  :: false ->
#else
  :: rq[S0(c,n)].st == PEND ->
#endif
     rq[S1(c,n)].st = PEND; rq[S1(c,n)].kind = rq[S0(c,n)].kind;
     rq[S1(c,n)].tok = rq[S0(c,n)].tok; rq[S1(c,n)].arg = rq[S0(c,n)].arg
  :: else -> skip
  fi;
  rq[S0(c,n)].st = PEND; rq[S0(c,n)].kind = k; rq[S0(c,n)].tok = tk0;
  rq[S0(c,n)].arg = a
}


/* a new round: the client's tally starts empty */
inline forget(c) {
  gm[c] = 0; fm[c] = 0; am[c] = 0; km[c] = 0
}

/* the lease of client c becomes valid with token fv: the properties */
inline valid_now(c, fv) {
  printf("EV valid %d %d %d %d\n", c, fv, hol[c], last);
  /* step: inspect: at that moment no other client's token stands on a
   * majority of the nodes (an inspection would not name another holder) */
  n = 0;
  do
  :: n < C ->
     if
     :: n != c ->
        g = 0; j = 0;
        do
        :: j < N -> if :: lock[j] != 0 && OWNER(lock[j]) == n && (lock[j] == cur[n] || ISPT(lock[j])) -> g++ :: else -> skip fi; j++
        :: else -> break
        od;
        assert(g < Q);
        /* mutual exclusion: no other client believes it holds a valid lease */
        assert(!VALID(n))
     :: else -> skip
     fi;
     n++
  :: else -> break
  od;
  /* step: fenced_write: the new holder writes to the fenced resource,
   * which accepts it only above the highest token it accepted (last):
   * the token is strictly above that of every earlier lease */
  assert(fv > last);
  last = fv; held[c] = 1; n = 0; g = 0; j = 0
}

/* an attempt that failed removes its grants: release (without hand-over)
 * where it was granted or the outcome is unknown (an acquire in flight) */
inline cleanup(c) {
  printf("EV cleanup %d %d\n", c, tkn);
  n = 0;
  do
  :: n < N ->
     if
     :: (gm[c] & BIT(n)) || (rq[S0(c,n)].st == PEND && rq[S0(c,n)].kind == ACQ) ->
        send(c, n, CLN, tkn, 0)
     :: else -> skip
     fi;
     n++
  :: else -> break
  od;
  forget(c); cur[c] = 0; endwin(c); n = 0; f = 0; a = 0
}

#ifdef QUEUE
/* hand-overs the client knows of: count h, largest counter f, and a, how
 * many of them have f */
inline handovers(c) {
  h = 0; f = 0; n = 0;
  do
  :: n < N -> if :: hom[P(n,c)] != 0 -> h++; if :: hom[P(n,c)] > f -> f = hom[P(n,c)] :: else -> skip fi :: else -> skip fi; n++
  :: else -> break
  od;
  a = 0; n = 0;
  do
  :: n < N -> if :: hom[P(n,c)] != 0 && hom[P(n,c)] == f -> a++ :: else -> skip fi; n++
  :: else -> break
  od;
  n = 0
}
#endif


/* renewal: one of the token's pinned keys is left unpinned */
#if N == 3
#define UNPIN(t) if :: lock[0] == t && pin[0] -> pin[0] = 0 :: lock[1] == t && pin[1] -> pin[1] = 0 \
        :: lock[2] == t && pin[2] -> pin[2] = 0 fi; a--
#else
#define UNPIN(t) if :: lock[0] == t && pin[0] -> pin[0] = 0 :: lock[1] == t && pin[1] -> pin[1] = 0 \
        :: lock[2] == t && pin[2] -> pin[2] = 0 :: lock[3] == t && pin[3] -> pin[3] = 0 \
        :: lock[4] == t && pin[4] -> pin[4] = 0 fi; a--
#endif

/* the lease is won with token f if the attempt's window is still open */
inline win(c) {
  if
  :: vt[c] ->
     valid_now(c, f); f = 0; a = 0; forget(c);
#ifdef QUEUE
     fair = 0;
#endif
     cpc[c] = HOLD
  :: else -> printf("EV elapsed %d\n", c); cleanup(c); cpc[c] = ATT  /* the validity elapsed meanwhile */
  fi
}

#ifdef QUEUE
/* a lease from hand-overs (token f) */
inline hown(c) {
#ifdef LATEHO
  /* MUTANT: a hand-over taken after the place's ticket lapsed counts
   * like a grant of the current attempt */
  hol[c] = hw[c];
#else
  hol[c] = 1;
#endif
  valid_now(c, f);
  /* the attempt's own grants are no part of it: cleaned up */
  n = 0;
  do
  :: n < N -> hom[P(n,c)] = 0;
     if :: (gm[c] & BIT(n)) || (rq[S0(c,n)].st == PEND && rq[S0(c,n)].kind == ACQ) -> send(c, n, CLN, tkn, 0) :: else -> skip fi; n++
  :: else -> break
  od;
  forget(c);
  tkn = PT(c); cur[c] = tkn; rn = 1; fair = 0; n = 0; f = 0; a = 0; h = 0;
  cpc[c] = HOLD
}
#endif

proctype client(byte c) {
  byte k, n, g, f, a, j, tkn;
  bit rn;
#ifdef QUEUE
  byte h;
  bit fair = 1;   /* in its fair Acquire call (one per client) */
#endif
end:
  do
  :: d_step { cpc[c] == ATT && k >= BUDGET(c) ->
#ifdef QUEUE
       /* an Acquire that ends without the lock leaves the queue, giving
        * back what was handed over to its place */
       if
       :: fair -> fair = 0; forget(c); printf("EV leave %d\n", c);
          n = 0; do :: n < N -> send(c, n, LEAVE, PT(c), 0); n++ :: else -> break od; n = 0
       :: else -> skip
       fi;
#endif
       forget(c); cur[c] = 0; endwin(c);
#ifdef QUEUE
       endcall(c);
#endif
       cpc[c] = DONE; GC }
  :: d_step { cpc[c] == ATT && k < BUDGET(c) ->
       /* a new attempt: a fresh token, and its validity window opens */
       tkn = TOK(c, k); k++; forget(c);
       cur[c] = tkn; vt[c] = 1;
#ifdef QUEUE
       printf("EV attempt %d %d %d\n", c, tkn, fair);
#else
       printf("EV attempt %d %d 0\n", c, tkn);
#endif
       n = 0; do :: n < N -> cov[n] = cov[n] & ~(1 << c); n++ :: else -> break od;
       n = 0;
       do
       :: n < N ->
#ifdef QUEUE
          if :: fair -> send(c, n, ACQ, tkn, mt[c]) :: else -> send(c, n, ACQ, tkn, NOQ) fi;
#else
          send(c, n, ACQ, tkn, 0);
#endif
          n++
       :: else -> break
       od;
       n = 0; cpc[c] = TALLY }
  :: d_step { cpc[c] == TALLY ->
       /* the tally, at any point: enough answers, or the timeout */
       g = POP(gm[c]); f = fm[c]; a = POP(am[c]);
       printf("EV tally %d %d %d %d\n", c, g, f, a);
#ifdef QUEUE
       h = 0; n = 0;
       do :: n < N -> if :: hom[P(n,c)] != 0 -> h++ :: else -> skip fi; n++ :: else -> break od;
       n = 0;
#endif
       if
       :: g >= Q && a >= Q -> win(c)        /* a majority agrees: token f */
#ifdef NOCONFIRM
       :: g >= Q && a < Q -> win(c)         /* MUTANT: the plain maximum */
#else
       :: g >= Q && a < Q ->
          /* fence-confirm: raise the granting nodes' counters to f */
          km[c] = 0;
          do
          :: n < N -> if :: gm[c] & BIT(n) -> send(c, n, FEN, tkn, f) :: else -> skip fi; n++
          :: else -> break
          od;
          n = 0; g = 0; a = 0; cpc[c] = FENCING
#endif
#ifdef QUEUE
       :: g < Q && fair && g > 0 && h > 0 && g + h >= Q ->
          /* its grants and the hand-overs make a majority: the grants
           * move under the place's token */
          km[c] = 0;
          do
          :: n < N -> if :: gm[c] & BIT(n) -> send(c, n, REHOLD, tkn, PT(c)) :: else -> skip fi; n++
          :: else -> break
          od;
          n = 0; h = 0; g = 0; a = 0; f = 0; cpc[c] = REHOLDING
       :: g == 0 && fair && h >= Q -> h = 0; a = 0; f = 0; cpc[c] = TRYHO
#endif
       :: else -> g = 0; cleanup(c); cpc[c] = ATT
       fi;
#ifdef QUEUE
       h = 0;
#endif
       g = 0; GC }
  :: d_step { cpc[c] == FENCING ->
       a = POP(km[c]); printf("EV fenced %d %d %d\n", c, a, f);
       if
       :: a >= Q -> win(c)
       :: else -> cleanup(c); cpc[c] = ATT
       fi; GC }
#ifdef QUEUE
  :: d_step { cpc[c] == REHOLDING -> cpc[c] = TRYHO }
  :: d_step { cpc[c] == TRYHO ->
       /* a lease from the locks handed over to its place */
       handovers(c); printf("EV tryho %d %d %d %d %d\n", c, h, f, a, hw[c]);
       if
#ifdef LATEHO
       :: h >= Q && !hw[c] && vt[c] -> hown(c)  /* MUTANT: taken after the lapse */
#endif
       :: h >= Q && hw[c] && a >= Q -> hown(c)
       :: h >= Q && hw[c] && a < Q ->
          km[c] = 0; n = 0;
          do
          :: n < N -> if :: hom[P(n,c)] != 0 -> send(c, n, FEN, PT(c), f) :: else -> skip fi; n++
          :: else -> break
          od;
          n = 0; a = 0; h = 0; cpc[c] = HOFENCING
       :: else -> h = 0; cleanup(c); cpc[c] = ATT
       fi; GC }
  :: d_step { cpc[c] == HOFENCING ->
       a = POP(km[c]); printf("EV fenced %d %d %d\n", c, a, f);
       if
       :: a >= Q && hw[c] -> hown(c)
       :: else -> h = 0; cleanup(c); cpc[c] = ATT
       fi; GC }
#endif
#ifndef NORENEW
  :: atomic { cpc[c] == HOLD && held[c] && !rn && vt[c] ->
       /* step: renew: a renewal round while the window is open. The
        * calls are not modelled one by one: a late or lost renew call
        * only leaves a key with less time, and the model lets every key
        * that it does not pin expire at any time. The round succeeds when
        * a majority still holds the token; its new window is then pinned
        * on exactly Q of those nodes, any Q (fewer pins: more expiries, a
        * superset of the real runs, where at least Q said yes) */
       a = 0; n = 0;
       do
       :: n < N -> if :: lock[n] == tkn -> a++; pin[n] = 1 :: else -> skip fi; n++
       :: else -> break
       od;
       n = 0;
       if
       :: a >= Q ->
          do
          :: a > Q -> UNPIN(tkn)
          :: a == Q -> break
          od;
          printf("EV renew %d 1\n", c)
       :: else -> printf("EV renew %d 0\n", c); held[c] = 0  /* lost: released below */
       fi;
       a = 0 }
#endif
  :: d_step { cpc[c] == HOLD ->
       /* release: the lease ends (no longer believed), then the calls */
       printf("EV release %d %d %d\n", c, tkn, held[c]);
       held[c] = 0; hol[c] = 0; rn = 0; forget(c);
       n = 0; do :: n < N -> send(c, n, REL, tkn, 0); n++ :: else -> break od; n = 0;
       cur[c] = 0; endwin(c);
#ifdef QUEUE
       endcall(c);
#endif
       cpc[c] = ATT; GC }
  od
}

init {
  atomic {
#ifdef QUEUE
    /* every client's fair Acquire call begins: its hand-over windows
     * open; a newcomer proposes its arrival order as its ticket (client
     * 0 first) */
    hw[0] = 1; hw[1] = 1;
#if C > 2
    hw[2] = 1;
#endif
#endif
    run client(0);
    run client(1);
#if C > 2
    run client(2);
#endif
  }
}
