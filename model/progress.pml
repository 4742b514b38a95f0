/*
 * progress.pml: the liveness model of redlock's fair queue (docs/model.md,
 * "Progress"). 3 nodes, 2 clients that call the fair Acquire forever:
 * attempt, tally, take a lease from grants or from hand-overs (rehold),
 * hold it, release it (handing the lock over to the head of the queue),
 * and call again. Checked: under weak fairness, while a live client waits
 * for the lock, some client eventually holds a lease (ltl progress below),
 * after any finite number of faults.
 *
 * The nodes' steps are those of redlock.pml and the scripts, each one
 * atomic step (d_step): acquire with the queue (q_scan, q_join, the purge
 * of lapsed places), release with the hand-over (q_give, l_holds), the
 * clean-up release, rehold. Fence counters are left out (they decide a
 * token, never whether a lease is granted; see docs/model.md).
 *
 * Faults, all in the first phase of a run, which ends at a moment the
 * process stop picks (fair: it does end): calls and replies lost (not a
 * lease's release, not a leave), a client's timeout before its answers
 * came, a validity window ending early, a live waiter's place lapsing, a
 * hand-over message lost, one node down for good (node 2: the nodes are
 * symmetric; it answers at once with an error, or with SILENT not at
 * all), one client crashed for good. In both phases: time passes (a
 * call's hand-over window ends; after the faults only with HWEND, the
 * default; a call renews its hand-overs once its window ended), a
 * crashed client's windows end, lock keys that no open window pins
 * expire (after the faults, a key under a place token not while its
 * owner's attempt is under way), and places of clients that no longer
 * renew them lapse. A waiter whose hand-overs cannot make a majority,
 * with some node refusing, gives them back (leave) and waits in a new
 * place with its ticket (docs/design.md 11.2).
 *
 * Switches (-D): NOSKIP (mutant: a place that lapsed is never skipped nor
 * removed: it stays the head), NOBRING (mutant: a waiter does not bring
 * its highest ticket to the other nodes, rule 2 of docs/design.md 11.1),
 * NOGIVEBACK (mutant: a minority of hand-overs is kept), OVERLAP (no
 * separation of attempts after the faults: the split-vote livelock of
 * docs/model.md), APART1 (attempts apart in the first phase too),
 * FAULTS=<mask> (the fault kinds of the first phase: 1 messages lost, 2
 * a client crash, 4 node 2 down, 8 windows ending early; 15 by default),
 * MAXF=<k> (at most k losses and early window ends in all), SILENT (the
 * node down never answers), NOPR (no arrival-time proposals: a
 * newcomer's ticket is one above the last place's), HWEND=0 (no live
 * client's hand-over window ends after the faults), MIDEXP (a key may
 * expire in the middle of its owner's attempt after the faults).
 * model/run.sh lists the configurations make model checks
 * (docs/model.md, "Progress").
 */

#define N 3
#define C 2
#define Q 2

/* tokens: one attempt token and one place token per client (see
 * docs/model.md on why one of each suffices here); STALE is a key that
 * no current call owns (a clean-up release that was lost left it) */
#define AT(c) (1 + (c))
#define PT(c) (3 + (c))
#define STALE 5
#define ISPT(t) ((t) == 3 || (t) == 4)
#define OWNER(t) (ISPT(t) -> (t) - 3 : (t) - 1)

/* call kinds */
#define ACQ 1
#define REL 4   /* a lease's release: hands over */
#define CLN 5   /* an attempt's clean-up release: hands nothing over */
#define REHOLD 7
#define LEAVE 8 /* a place leaves, giving back a lock handed over to it */

/* one call in flight per client and node: kind (0: none), token, and the
 * ticket an acquire brings */
#define S(c,n) ((c)*N + (n))
byte rk[C*N];
byte rt[C*N];
byte ra[C*N];

/* ---- nodes ---- */
byte lock[N];     /* token whose lock key stands, 0: none */
#define P(n,c) ((n)*C + (c))
byte pl[N*C];     /* place: 0 none, 1 live, 2 lapsed (not yet removed) */
byte tk[N*C];     /* its ticket */
bit dead[N];      /* down for good (node 2 only) */

/* ---- clients ---- */
#define ATT 0        /* starts an attempt */
#define TALLY 2      /* counts its answers */
#define HOLD 4       /* holds a lease */
#define REHOLDING 6  /* moves its grants under its place's token */
#define CRASHED 9    /* takes no step any more */
byte cpc[C];
byte cur[C];      /* token of the current attempt or lease, 0: none */
bit vt[C];        /* its validity window is open */
bit hw[C];        /* the call's hand-over window is open */
bit held[C];      /* believes it holds a lease */
bit hol[C];       /* that lease rests on hand-overs (place token) */
bit hom[N*C];     /* node n handed the lock over to c's place (as c knows) */
byte gm[C];       /* nodes (bit mask) that granted the current attempt */
byte km[C];       /* nodes that said yes to the rehold round */
byte ans[C];      /* nodes that answered the current round */
byte mt[C];       /* the highest ticket the call was given */
byte pr[C];       /* the call's proposal (its arrival time) */
bit fdone;        /* the faults have stopped */
bit crash1;       /* a client has crashed (at most one does) */
bit turn;         /* after the faults: whose attempt goes next after a failed one */

/* the fault kinds of the first phase (all by default; FAULTS=... picks) */
#ifndef FAULTS
#define FAULTS 15
#endif
/* MAXF=k: at most k message losses and early window ends in all (the
 * budget; none by default: any number before the faults stop) */
#ifdef MAXF
byte nf;          /* losses and early ends so far */
#define BUDGET (nf < MAXF)
#define SPEND nf++
#else
#define BUDGET true
#define SPEND skip
#endif
#define LOSS (!fdone && (FAULTS & 1) && BUDGET)   /* replies, clean-ups, hand-over messages lost */
#define CRASH (!fdone && (FAULTS & 2))  /* a client crashes */
#define DOWN (!fdone && (FAULTS & 4))   /* node 2 goes down */
#define TIME (!fdone && (FAULTS & 8))   /* a live client's windows end early (its places lapse) */
#define TIMEF (TIME && BUDGET)          /* one such end */
#ifndef HWEND
#define HWEND 1
#endif

#define POP(m) (((m) & 1) + (((m) >> 1) & 1) + (((m) >> 2) & 1))
#define BIT(n) (1 << (n))
#define NOPEND(c) (rk[S(c,0)] == 0 && rk[S(c,1)] == 0 && rk[S(c,2)] == 0)
#define LEAVING(c) (rk[S(c,0)] == LEAVE || rk[S(c,1)] == LEAVE || rk[S(c,2)] == LEAVE)
#define HM(c) (hom[P(0,c)] + 2*hom[P(1,c)] + 4*hom[P(2,c)])
#define DM (dead[0] + 2*dead[1] + 4*dead[2])
#define LIVE(c) (cpc[c] != CRASHED)

/* the property's propositions: a live client waits for the lock (is in
 * an Acquire call), some client holds a lease */
#define WAITS(c) (cpc[c] != HOLD && cpc[c] != CRASHED)
#define waiting (WAITS(0) || WAITS(1))
#define granted (held[0] || held[1])
ltl progress { [] (waiting -> <> granted) }

#define VALID(c) (held[c] && (hol[c] -> hw[c] : vt[c]))

/* a lock key is pinned (may not expire) while the window it was set to
 * outlive is open: an attempt's key while that attempt or its lease is
 * current and its window open, a key under a place token while the
 * call's hand-over window is open (as in redlock.pml), or once a
 * renewal round confirmed it (rehold after the window ended) */
#define PROT(n) (lock[n] != STALE && (ISPT(lock[n]) -> (hw[OWNER(lock[n])] || \
                   (cpc[OWNER(lock[n])] == REHOLDING && (km[OWNER(lock[n])] & BIT(n)))) : \
                 (cur[OWNER(lock[n])] == lock[n] && vt[OWNER(lock[n])])))

/* Tickets are only compared, maxed and raised by one, so what matters of
 * the tickets in the state (places, each call's highest ticket and
 * proposal, tickets in flight) is their order and which differ by exactly
 * one. norm() keeps that and nothing more: the least becomes 1 and a gap
 * of more than 2 between neighbours becomes 2. This keeps the state space
 * finite (arrival times grow without end) and changes no step's outcome. */
#define LOWER(v) if :: v >= m -> v = v - d :: else -> skip fi
#define ABOVE(v) if :: v > t && v < m -> m = v :: else -> skip fi
inline norm() {
  t = 0;
  do
  :: true ->
     m = 255; j = 0;
     do
     :: j < N*C -> ABOVE(tk[j]); j++
     :: else -> break
     od;
     j = 0;
     do
     :: j < C*N -> if :: rk[j] == ACQ -> ABOVE(ra[j]) :: else -> skip fi; j++
     :: else -> break
     od;
     ABOVE(mt[0]); ABOVE(mt[1]); ABOVE(pr[0]); ABOVE(pr[1]);
     if
     :: m == 255 -> break
     :: else ->
        d = m - t;
        if :: t == 0 -> d = d - 1 :: else -> d = d - 2 fi;
        if
        :: d > 0 && d < 255 ->
           j = 0;
           do
           :: j < N*C -> LOWER(tk[j]); j++
           :: else -> break
           od;
           j = 0;
           do
           :: j < C*N -> if :: rk[j] == ACQ -> LOWER(ra[j]) :: else -> skip fi; j++
           :: else -> break
           od;
           LOWER(mt[0]); LOWER(mt[1]); LOWER(pr[0]); LOWER(pr[1]);
           m = m - d
        :: else -> skip
        fi;
        t = m
     fi
  od;
  t = 0; j = 0; m = 0; d = 0
}

/* q_scan: the head of node n's live queue, passing over client sk (C:
 * none); h = C when it has none */
inline scan(n, sk) {
  h = C; j = 0;
  do
  :: j < C ->
     if
#ifdef NOSKIP
     /* MUTANT: a lapsed place counts as live */
     :: pl[P(n,j)] != 0 && j != sk &&
#else
     :: pl[P(n,j)] == 1 && j != sk &&
#endif
        (h == C || tk[P(n,j)] < tk[P(n,h)] || (tk[P(n,j)] == tk[P(n,h)] && j < h)) -> h = j
     :: else -> skip
     fi;
     j++
  :: else -> break
  od;
  j = 0
}

/* the purge after q_scan: lapsed places are removed */
inline purge(n) {
#ifndef NOSKIP
  j = 0;
  do
  :: j < C -> if :: pl[P(n,j)] == 2 -> pl[P(n,j)] = 0; tk[P(n,j)] = 0 :: else -> skip fi; j++
  :: else -> break
  od;
  j = 0
#else
  skip
#endif
}

/* q_join: client c takes (or keeps) its place on node n, bringing ticket
 * b (0: none yet, a newcomer proposing pr): a place keeps the higher of
 * its ticket and b; a newcomer gets pr but never less than one above the
 * last place's (lapsed ones included, as ZRANGE sees them) */
inline join(n, c, b) {
  if
  :: pl[P(n,c)] != 0 ->
     if :: b > tk[P(n,c)] -> tk[P(n,c)] = b :: else -> skip fi
  :: else ->
     if
     :: b > 0 -> tk[P(n,c)] = b
     :: else ->
        t = 0; j = 0;
        do
        :: j < C -> if :: pl[P(n,j)] != 0 && tk[P(n,j)] > t -> t = tk[P(n,j)] :: else -> skip fi; j++
        :: else -> break
        od;
        if :: pr[c] > t -> tk[P(n,c)] = pr[c] :: else -> tk[P(n,c)] = t + 1 fi
     fi
  fi;
  pl[P(n,c)] = 1; t = 0; j = 0
}

/* node n runs client c's call in flight (rp: its reply reaches the
 * client; a reply is counted only in the round it answers) */
inline deliver(c, n, rp) {
  r = rk[S(c,n)]; t0 = rt[S(c,n)]; r1 = 0; rv = 0;
  if
  :: dead[n] -> rp = 0   /* a node down for good answers nothing */
  :: else ->
     if
     :: r == ACQ ->
        /* step: acquire */
        if
        :: lock[n] == t0 -> r1 = 1   /* a retry */
        :: lock[n] == PT(c) -> r1 = 2   /* handed over to its place */
        :: lock[n] != 0 && lock[n] != t0 && lock[n] != PT(c) ->
           /* step: q_join (busy: the caller queues), then q_scan */
           join(n, c, ra[S(c,n)]); rv = tk[P(n,c)]; purge(n)
        :: lock[n] == 0 ->
           /* step: q_scan (free: granted to the head, or to anyone when
            * the queue has no live place) */
           scan(n, C);
           if
           :: h != C && h != c ->
              join(n, c, ra[S(c,n)]); rv = tk[P(n,c)]; purge(n); scan(n, C)
           :: else -> skip
           fi;
           if
           :: h == C || h == c ->
              lock[n] = t0; pl[P(n,c)] = 0; tk[P(n,c)] = 0; purge(n); r1 = 1; rv = 0
           :: else -> skip
           fi
        fi
     :: r == CLN ->
        /* step: release (an attempt's clean-up: deletes its own grant) */
        if :: lock[n] == t0 -> lock[n] = 0 :: else -> skip fi
     :: r == REL ->
        /* step: release; step: l_holds (the token, or its place's) */
        if
        :: lock[n] != 0 && (lock[n] == t0 || lock[n] == PT(c)) ->
           /* step: q_give: to the head, the caller's own place passed over */
           scan(n, c);
           if
           :: h != C ->
              lock[n] = PT(h); pl[P(n,h)] = 0; tk[P(n,h)] = 0;
              /* its message names the place: a waiter that gave that
               * place back (its leave still on the way) has a new one
               * and does not hear it */
              if :: !LEAVING(h) -> hom[P(n,h)] = 1 :: else -> skip fi
           :: else -> lock[n] = 0
           fi;
           purge(n)
        :: else -> skip
        fi;
        pl[P(n,c)] = 0; tk[P(n,c)] = 0   /* the caller's own place goes */
     :: r == REHOLD ->
        /* step: rehold (a grant moved under the place's token) */
        if :: lock[n] == t0 -> lock[n] = PT(c); r1 = 1 :: else -> skip fi
     :: r == LEAVE ->
        /* step: leave (with give: a lock the place's token holds is
         * given up, deleted, never handed on) */
        if :: lock[n] == t0 -> lock[n] = 0 :: else -> skip fi;
        pl[P(n,c)] = 0; tk[P(n,c)] = 0
     fi
  fi;
  if
  :: rp && r == ACQ && cpc[c] == TALLY && t0 == cur[c] ->
     ans[c] = ans[c] | BIT(n);
     if
     :: r1 == 1 ->
        /* a grant: the lock there is no hand-over (any more) */
        gm[c] = gm[c] | BIT(n); hom[P(n,c)] = 0
     :: r1 == 2 -> hom[P(n,c)] = 1
     :: r1 == 0 ->
        /* a refusal shows that a hand-over there is gone; it brings the
         * place's ticket */
        hom[P(n,c)] = 0;
#ifndef NOBRING
        if :: rv > mt[c] -> mt[c] = rv :: else -> skip fi
#endif
     fi
  :: rp && r == REHOLD && cpc[c] == REHOLDING ->
     ans[c] = ans[c] | BIT(n);
     if
     :: r1 -> km[c] = km[c] | BIT(n); hom[P(n,c)] = 1
     :: !r1 && t0 == PT(c) -> hom[P(n,c)] = 0   /* the hand-over is gone */
     :: else -> skip
     fi
  :: else -> skip
  fi;
  printf("EV deliver %d %d %d %d %d %d %d %d %d\n", n, c, r, t0, ra[S(c,n)], r1, rv, rp, lock[n]);
  rk[S(c,n)] = 0; rt[S(c,n)] = 0; ra[S(c,n)] = 0;
  norm();
  r = 0; t0 = 0; r1 = 0; rv = 0; h = 0; rp = 0
}

/* send a call (kind k, token tt, argument a) to node n: a call still in
 * flight there is replaced (lost); a node down for good is not called */
inline send(c, n, k, tt, a) {
  if
  :: !dead[n] -> rk[S(c,n)] = k; rt[S(c,n)] = tt; ra[S(c,n)] = a
  :: else -> skip
  fi
}

/* a failed attempt's clean-up: a release (no hand-over) wherever it was
 * granted or got no answer */
inline cleanup(c) {
  printf("EV cleanup %d\n", c);
  n = 0;
  do
  :: n < N -> if :: (gm[c] & BIT(n)) || !(ans[c] & BIT(n)) -> send(c, n, CLN, AT(c), 0) :: else -> skip fi; n++
  :: else -> break
  od;
  n = 0; gm[c] = 0; km[c] = 0; ans[c] = 0; cur[c] = 0; vt[c] = 0; cpc[c] = ATT;
  if :: fdone -> turn = 1 - c :: else -> skip fi   /* the other goes next */
}

/* the lease becomes valid: no other client believes it holds a valid one
 * (mutual exclusion, checked fully in redlock.pml; here a check that this
 * model is no looser than that one) */
inline valid_now(c) {
  printf("EV valid %d %d\n", c, hol[c]);
  assert(!VALID(1 - c));
  /* progress: a lease granted */
  held[c] = 1; cpc[c] = HOLD
}

/* a new Acquire call: a new place token window, a proposal above every
 * ticket there is (its arrival comes after theirs) */
inline newcall(c) {
  hw[c] = 1; mt[c] = 0; pr[c] = 0;
#ifndef NOPR
  t = 0; j = 0;
  do
  :: j < N*C -> if :: tk[j] > t -> t = tk[j] :: else -> skip fi; j++
  :: else -> break
  od;
  if :: mt[1 - c] > t -> t = mt[1 - c] :: else -> skip fi;
  if :: pr[1 - c] > t -> t = pr[1 - c] :: else -> skip fi;
  pr[c] = t + 1;
#endif
  hom[P(0,c)] = 0; hom[P(1,c)] = 0; hom[P(2,c)] = 0;
  norm();
  cpc[c] = ATT
}

/* take a lease from the hand-overs, in the step that decided to (the
 * answers are in: no time passes between them and the decision); the
 * attempt's own grants that were not moved are cleaned up */
inline tryho(c) {
  h = POP(hom[P(0,c)] + 2*hom[P(1,c)] + 4*hom[P(2,c)]);
  printf("EV tryho %d %d %d\n", c, h, hw[c]);
  if
  :: h >= Q && hw[c] ->
     hol[c] = 1; valid_now(c);
     n = 0;
     do
     :: n < N -> if :: (gm[c] & BIT(n)) && !(km[c] & BIT(n)) -> send(c, n, CLN, AT(c), 0) :: else -> skip fi; n++
     :: else -> break
     od;
     n = 0; gm[c] = 0; km[c] = 0; ans[c] = 0; cur[c] = PT(c); vt[c] = 0
  :: else -> cleanup(c)
  fi;
  h = 0
}

#define DELIVER(nn) \
  :: d_step { rk[S(c,nn)] != 0 -> rp = 1; deliver(c, nn, rp) } \
  :: d_step { LOSS && (rk[S(c,nn)] == ACQ || rk[S(c,nn)] == REHOLD) -> SPEND; rp = 0; deliver(c, nn, rp) } \
  :: d_step { LOSS && rk[S(c,nn)] == CLN -> SPEND; \
       printf("EV lost %d %d %d\n", nn, c, rk[S(c,nn)]); \
       if :: lock[nn] == rt[S(c,nn)] -> lock[nn] = STALE :: else -> skip fi; \
       rk[S(c,nn)] = 0; rt[S(c,nn)] = 0; ra[S(c,nn)] = 0 }

/* once the faults have stopped, an attempt begins only when the other
 * client has no attempt under way and no call in flight: the random
 * pause after a split vote (docs/design.md 11) is assumed to have
 * separated the attempts (docs/model.md, "Progress"; without it, the
 * split-vote livelock of -DOVERLAP) */
#define INATT(c) (cpc[c] == TALLY || cpc[c] == REHOLDING)
#ifdef OVERLAP
#define APART(c) true
#elif defined(APART1)
#define APART(c) (!INATT(1 - (c)) && NOPEND(1 - (c)) && \
                   (!fdone || turn != 1 - (c) || cpc[1 - (c)] != ATT))
#else
#define APART(c) (!fdone || (!INATT(1 - (c)) && NOPEND(1 - (c)) && \
                   (turn != 1 - (c) || cpc[1 - (c)] != ATT)))
#endif

/* ready to decide: every answer is in (a lost one counts as in: the
 * client's timeout for it) */
#define READY(c) NOPEND(c)

proctype client(byte c) {
  byte n, g, h, j, t, m, d, r, t0, r1, rv;
  bit rp;
end:
  do
  /* the network: the client's calls in flight reach their nodes, in any
   * order; before the faults stop a call or its reply may be lost (a
   * lease's release is not lost: docs/model.md) */
  DELIVER(0)
  DELIVER(1)
  DELIVER(2)
  :: d_step { cpc[c] == ATT && NOPEND(c) && APART(c) ->
       /* a new attempt: its window opens; acquire sent to every node,
        * bringing the highest ticket the call was given */
       cur[c] = AT(c); vt[c] = 1; gm[c] = 0; km[c] = 0; ans[c] = 0;
       /* a call that has a ticket never uses its proposal again (mt is
        * at least it): forgotten, which merges states */
       if :: mt[c] > 0 -> pr[c] = 0 :: else -> skip fi;
#ifdef NOBRING
       printf("EV attempt %d 0\n", c);
       n = 0; do :: n < N -> send(c, n, ACQ, AT(c), 0); n++ :: else -> break od;
#else
       printf("EV attempt %d %d\n", c, mt[c]);
       n = 0; do :: n < N -> send(c, n, ACQ, AT(c), mt[c]); n++ :: else -> break od;
#endif
#ifndef SILENT
       /* a node down answers at once, with an error (connection refused) */
       ans[c] = DM;
#endif
       n = 0; cpc[c] = TALLY }
  :: d_step { cpc[c] == TALLY && READY(c) ->
       g = POP(gm[c]); h = POP(hom[P(0,c)] + 2*hom[P(1,c)] + 4*hom[P(2,c)]);
       printf("EV tally %d %d %d %d\n", c, g, h, vt[c]);
       if
       :: g >= Q && vt[c] ->
          /* a majority granted: the lease (the fence round that settles
           * its token is left out, as are the counters) */
          valid_now(c); gm[c] = 0; ans[c] = 0
       :: g < Q && h > 0 && g + h >= Q && (g > 0 || !hw[c]) ->
          /* grants and hand-overs make a majority: the grants move under
           * the place's token; once the call's hand-over window has
           * ended, the hand-overs are renewed under it too (the same
           * script), and a majority that confirms opens a new window */
          km[c] = 0; ans[c] = 0; n = 0;
          do
          :: n < N ->
             if
             :: gm[c] & BIT(n) -> send(c, n, REHOLD, AT(c), PT(c))
             :: !(gm[c] & BIT(n)) && !hw[c] && hom[P(n,c)] -> send(c, n, REHOLD, PT(c), PT(c))
             :: else -> skip
             fi;
             n++
          :: else -> break
          od;
          n = 0; cpc[c] = REHOLDING
       :: g == 0 && h >= Q && hw[c] -> tryho(c)
#ifndef NOGIVEBACK
       :: h > 0 && g + h + (N - POP(ans[c])) < Q && (ans[c] & ~gm[c] & ~HM(c) & ~DM) != 0 ->
          /* the nodes handed over to the place, the grants and the
           * nodes that did not answer cannot make a majority, and some
           * node refused: the place gives its hand-overs back (leave, to
           * every node) and the waiter takes a new place with the same
           * ticket; what it knew of the old place's hand-overs goes
           * (docs/design.md 11.2). With 3 nodes this means no grant and
           * every node answered: the failed attempt has nothing to clean
           * up, so the leave goes at once (the code sends it once the
           * clean-up is done). The next attempt waits for the leave
           * (NOPEND; docs/model.md). */
          printf("EV giveback %d %d\n", c, h);
          cleanup(c); assert(NOPEND(c));
          n = 0; do :: n < N -> send(c, n, LEAVE, PT(c), 0); n++ :: else -> break od; n = 0;
          hom[P(0,c)] = 0; hom[P(1,c)] = 0; hom[P(2,c)] = 0
#endif
       :: else -> cleanup(c)
       fi;
       g = 0; h = 0 }
  :: d_step { cpc[c] == REHOLDING && READY(c) ->
       if :: !hw[c] && POP(km[c]) >= Q -> hw[c] = 1 :: else -> skip fi;
       tryho(c) }
  :: d_step { cpc[c] == HOLD && NOPEND(c) ->
       /* release: the lease ends, release sent to every node; a new call */
       printf("EV release %d %d\n", c, cur[c]);
       n = 0; do :: n < N -> send(c, n, REL, cur[c], 0); n++ :: else -> break od; n = 0;
       held[c] = 0; hol[c] = 0; cur[c] = 0; vt[c] = 0; hw[c] = 0;
       newcall(c) }
  :: d_step { LIVE(c) && CRASH && !crash1 ->
       /* a crash: the client takes no step any more (its calls in flight
        * may still arrive; its windows end later) */
       printf("EV crash %d\n", c);
       crash1 = 1; cpc[c] = CRASHED; held[c] = 0; hol[c] = 0;
       gm[c] = 0; km[c] = 0; ans[c] = 0; mt[c] = 0; pr[c] = 0;
       hom[P(0,c)] = 0; hom[P(1,c)] = 0; hom[P(2,c)] = 0; norm() }
  od
}

/* time and the faults of the nodes; the faults (!fdone) stop once stop
 * has run */
#define ENVC(c) \
  :: d_step { hw[c] && (cpc[c] == CRASHED || TIMEF || (fdone && HWEND)) -> \
       if :: cpc[c] != CRASHED && !fdone -> SPEND :: else -> skip fi; \
       printf("EV tickh %d\n", c); hw[c] = 0 } \
  :: d_step { vt[c] && (cpc[c] == CRASHED || TIMEF) -> \
       if :: cpc[c] != CRASHED -> SPEND :: else -> skip fi; \
       printf("EV tick %d\n", c); vt[c] = 0 }
#define LAPSE(n, c) \
  :: d_step { pl[P(n,c)] == 1 && !hw[c] && (cpc[c] == CRASHED || TIME) -> \
       printf("EV lapse %d %d\n", n, c); pl[P(n,c)] = 2 }
#define LOSEHO(n, c) \
  :: d_step { LOSS && hom[P(n,c)] -> SPEND; printf("EV holost %d %d\n", n, c); hom[P(n,c)] = 0 }

active proctype env() {
  byte t, j, m, d;
end:
  do
  ENVC(0)
  ENVC(1)
  LAPSE(0,0) LAPSE(0,1) LAPSE(1,0) LAPSE(1,1) LAPSE(2,0) LAPSE(2,1)
  LOSEHO(0,0) LOSEHO(0,1) LOSEHO(1,0) LOSEHO(1,1) LOSEHO(2,0) LOSEHO(2,1)
  :: d_step { DOWN && !dead[2] ->
       /* node 2 goes down for good (a minority): its state no longer matters */
       printf("EV down 2\n"); dead[2] = 1; lock[2] = 0;
       pl[P(2,0)] = 0; tk[P(2,0)] = 0; pl[P(2,1)] = 0; tk[P(2,1)] = 0;
       hom[P(2,0)] = 0; hom[P(2,1)] = 0;
       rk[S(0,2)] = 0; rt[S(0,2)] = 0; ra[S(0,2)] = 0;
       rk[S(1,2)] = 0; rt[S(1,2)] = 0; ra[S(1,2)] = 0; norm() }
  od
}

/* a lock key expires once no open window pins it: one process per node,
 * so that weak fairness makes each node's key expire, whatever happens
 * on the others */
#ifdef MIDEXP
#define MIDATT(n) false
#else
#define MIDATT(n) (fdone && ISPT(lock[n]) && (INATT(OWNER(lock[n])) || !NOPEND(OWNER(lock[n]))))
#endif
proctype expiry(byte n) {
end:
  do
  :: d_step { lock[n] != 0 && !PROT(n) && !MIDATT(n) -> printf("EV expire %d %d\n", n, lock[n]); lock[n] = 0 }
  od
}

/* the faults stop at some moment (weak fairness runs it) */
active proctype stop() {
  d_step {
    printf("EV calm\n"); fdone = 1
#ifdef MAXF
    ; nf = 0   /* no longer read: forgotten, which merges states */
#endif
  }
}

init {
  byte t, j, m, d;
  atomic {
    d_step { newcall(0); newcall(1) };
    run client(0);
    run client(1);
    run expiry(0);
    run expiry(1);
    run expiry(2)
  }
}
