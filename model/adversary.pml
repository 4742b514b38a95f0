/*
 * adversary.pml: one node's side of the protocol against an operator
 * (issue 30, issue 31; docs/model.md, "The adversary model"). The node runs
 * the Safety v4 rules of the node-side scripts (the identity read in band,
 * the marker with its db, replid, from and seen, the fence counter's
 * `V U` evidence, a node-side step S and life E); an adversary evicts one
 * key, resets statistics, swaps dbs, flips the eviction policy, restarts
 * the server (durable or not), fails back in place from a lagging replica,
 * flushes, steps the node clock back, and lets Lockers with different
 * Configs (lease, rejoin delay, and with -DCFGSTEP their seed step and
 * counter life) call it. A replica of the node (-DREPL) answers calls too.
 *
 * Time is explicit: a global clock `now` (units, no drift: the node clock
 * runs at its rate, minus `back`, how far it stepped back). Keys expire on
 * the node clock, as Redis expires them. A node counts at most one holder
 * per unit of time (a counter grows no faster than the clock: in the real
 * system, at most one grant per microsecond).
 *
 * Properties, node-local, which are what the quorum argument of
 * redlock.pml takes from each node (docs/model.md):
 *  P1 exclusion: the node never grants a token while a lease it granted
 *     to another token may still be valid (its holder's window: from the
 *     grant or the last renewal, T of that Locker's lease);
 *  P2 tokens: every counter value a grant produces exceeds every value the
 *     resource's counter on this node ever had (so the quorum's maximum,
 *     confirmed on a majority, exceeds every earlier holder's token);
 *  P3 a replica never answers "granted".
 *
 * Today's rules (main before Safety v4), each a mutant that SPIN must
 * refute: EVSTAT (no `V U` evidence: eviction seen only through the
 * evicted_keys statistic, and only while the Locker's out-of-band read
 * says the server evicts), NODBMARK (the marker does not name its db),
 * CFGSTEP (the counter's seed step and life come from the caller's Config),
 * DUREXEMPT (a restart is judged from INFO: a durable server rejoins at
 * once and a recorded sit-out is forgotten), RUNID (identity is the
 * run_id, which a failback in place keeps), NOSEEN (a clock that stepped
 * back is not noticed), REPLVOTE (a replica answers "already held by this
 * token" from the replicated lock), NORELCHECK (release without the token
 * check).
 *
 * Adversary switches: A_EVICT (evictions under volatile-*), A_POLICY
 * (policy flips and the Locker's reads of it), A_RESETSTAT, A_SWAP,
 * A_FLUSH, A_RESTART, A_FAILBACK, A_BACK (clock steps back), MIXD (two
 * Lockers with different rejoin delays), MAXADV (adversary actions in
 * all), TMAX (the last time unit).
 */

#ifndef TMAX
#define TMAX 12
#endif
/* Safety v4.1: the marker's high-water (HIFLOOR, counter.lua C6) and the
 * one marker (SWAPDEL, trust.lua T4: a new marker deletes the markers of
 * its name in the other dbs, and a renewal extends a lock only where its
 * db's marker stands) are on; -DNOHI, -DNOSWAPDEL and -DNORENEWMARK are
 * v4's rules without them (mutants).
 * -DDMAXREC (not in the scripts) is a tried amendment for gap-mixdelay:
 * the marker records the largest rejoin delay a caller gave it */
#ifndef NOHI
#define HIFLOOR
#endif
#ifndef NOSWAPDEL
#define SWAPDEL
#endif


#ifndef MAXADV
#define MAXADV 2
#endif
/* node-side constants (Safety v4): seed step S, counter life E, the
 * marker's seen slack SL; DELTA, how far another node's clock (whose
 * counter a fence call brings) may be ahead */
#ifndef S
#define S 2
#endif
#ifndef E
#define E 5
#endif
#ifndef SL
#define SL 1
#endif
#ifndef DELTA
#define DELTA 0
#endif
/* the clock step back */
#ifndef BK
#define BK 4
#endif
#define T0 (BK + 1)        /* the first time unit: node clocks stay positive */
#define NOEXP 32767

/* the Lockers: token 1 and 3 are Locker A's attempts, token 2 Locker B's */
#define NT 3
#define CL(t) (((t) == 2) -> 1 : 0)
#ifndef TA
#define TA 3
#endif
#ifndef TB
#define TB 2   /* Locker B's lease is shorter than A's */
#endif
#ifndef DA
#define DA 3
#endif
#ifdef MIXD
#define DB 1   /* B's RejoinDelay is shorter than A's lease */
#else
#define DB DA
#endif
/* today's (CFGSTEP) seed step per Locker, and life 4 steps */
#ifndef SA
#define SA 6
#endif
#ifndef SB
#define SB 1
#endif
#define TT(t) ((CL(t) == 0) -> TA : TB)
#define DD(t) ((CL(t) == 0) -> DA : DB)
#define SS(t) ((CL(t) == 0) -> SA : SB)

short now = T0;
short back;          /* the node clock is now - back */
#define NC (now - back)
byte nadv;           /* adversary actions so far */
short lastc;         /* the last unit in which the node counted */

/* the node's two dbs, slots 0 and 1; db 0 (ours: the Locker's Node
 * selects it) is slot sw, db 1 (another user of the library with the same
 * prefix) is slot 1 - sw. Per slot: */
bit sw;
#define D0 (sw)
#define D1 (1 - sw)
byte lk[2];          /* the lock key's token, 0: none */
short lx[2];         /* its expiry (node time) */
short cv[2];         /* the fence counter V, 0: none */
short cu[2];         /* U: the live lease runs until (node time), 0: none */
short cx[2];         /* the counter's expiry (node time), NOEXP: no TTL */
bit mk[2];           /* the marker key stands */
bit mdb[2];          /* the db its name says */
byte mrep[2];        /* the identity it vouches for */
short mfrom[2];      /* from: the node may grant from this node time */
short mseen[2];      /* seen: the largest node time it saw */
short mhi[2];        /* (HIFLOOR) the largest counter value issued in the db */
byte mdm[2];         /* (DMAXREC) the largest rejoin delay a caller gave it */
byte mev[2];         /* (today) evicted_keys when it was written */
byte replid = 1;     /* master_replid: new at a restart and a promotion */
byte runid = 1;      /* run_id: new at a restart only */
short rst;           /* (today) node time of the last restart */
byte evk;            /* evicted_keys (INFO stats): RESETSTAT zeroes it */
byte policy = 1;     /* 0 noeviction, 1 volatile-* */
bit eflag = 1;       /* (today) the Locker's last read: the server evicts */
#ifdef DURABLE
bit durable = 1;     /* appendfsync always configured */
#else
bit durable;
#endif
short stepat;        /* the node time the clock stepped back from */
/* the contract's one exclusion: no data loss while the node clock is
 * behind a time it had shown (A_BACKLOSS drops it) */
bit lost;            /* data lost and no granting script has run since */
#ifdef A_BACKLOSS
#define MAYLOSE true
#define MAYSTEP true
#else
#define MAYLOSE (back == 0 || NC >= stepat)
#define MAYSTEP (!lost)
#endif

#ifdef REPL
/* the replica: a copy of db 0 at its last sync, read-only */
byte rlk; short rlx;
#endif
/* a lagging replica's copy for a failback in place (A_FAILBACK) */
byte flk; short flx, fcv, fcu, fcx; bit fmk, fmdb; byte fmrep, fmdm; short fmfrom, fmseen, fmhi; bit fcopy;

/* ghosts (the properties) */
byte gtok;           /* the token of the latest lease the node granted */
short gu;            /* until when (global time) that lease may be valid */
short hi;            /* the largest value the resource's counter had here */

byte t, j;
short from, base, v;
byte dl;             /* the delay a loss is waited: the caller's, or the marker's largest */
bit ref;

#define LOCKED(d) (lk[d] != 0 && NC < lx[d])
#define COUNTED(d) (cv[d] != 0 && (cx[d] == NOEXP || NC < cx[d]))
#define MAX(a, b) (((a) > (b)) -> (a) : (b))
#define FLOOR(x, s) ((x) - (x) % (s))

/* keys past their expiry are gone (keeps the state canonical) */
inline sweep() {
  j = 0;
  do
  :: j < 2 ->
     if :: lk[j] != 0 && NC >= lx[j] -> lk[j] = 0; lx[j] = 0 :: else -> skip fi;
     if :: cv[j] != 0 && cx[j] != NOEXP && NC >= cx[j] -> cv[j] = 0; cu[j] = 0; cx[j] = 0 :: else -> skip fi;
     j++
  :: else -> break
  od;
  j = 0;
  if :: gtok != 0 && now >= gu -> gtok = 0; gu = 0 :: else -> skip fi
}

#ifdef RUNID
#define IDENT runid
#else
#define IDENT replid
#endif

/* the identity read in band and the marker (trust): sets from, writes
 * the marker; ref when the node must refuse (sits out) */
inline gate(tk) {
  /* step: t_trust */
  dl = DD(tk);
#ifdef DMAXREC
  /* the marker's largest delay counts too: no caller shortens a sit-out */
  if :: mk[D0] && mdb[D0] == 0 -> dl = MAX(dl, mdm[D0]) :: else -> skip fi;
#endif
  if
#ifdef NODBMARK
  :: !mk[D0] -> from = NC + dl                       /* TODAY: a marker of any db counts */
#else
  :: !mk[D0] || mdb[D0] != 0 -> from = NC + dl      /* missing (a marker named for db 1: not ours) */
#endif
#ifdef RUNID
  :: mk[D0] && mrep[D0] != runid ->
#else
  :: mk[D0] && mrep[D0] != replid ->
#endif
#ifdef DUREXEMPT
     /* TODAY: judged from INFO: a durable server rejoins from its start,
      * the recorded sit-out forgotten */
     if :: durable -> from = rst :: else -> from = rst + dl fi
#else
     from = MAX(mfrom[D0], NC + dl)                  /* a sit-out is never shortened */
#endif
#ifndef NOSEEN
  :: mk[D0] && mrep[D0] == IDENT && NC < mseen[D0] - SL ->
     from = MAX(mfrom[D0], mseen[D0] + dl)           /* the clock stepped back */
#endif
  :: else -> from = mfrom[D0]
  fi;
#ifdef EVSTAT
  /* TODAY: evictions seen in the statistic, when the Locker reads the
   * server as evicting */
  if :: eflag && mk[D0] && evk != mev[D0] -> from = NC + dl :: else -> skip fi;
  mev[D0] = evk;
#endif
  if
  :: !mk[D0] || mdb[D0] != 0 ->
     /* a new marker: nothing issued under it yet */
     mseen[D0] = NC; mhi[D0] = 0; mdm[D0] = 0;
#ifdef SWAPDEL
     /* its name is in one db only: a copy in another db (this db's data,
      * swapped away) is deleted, so that it vouches for nothing when it
      * is swapped back */
     if :: mk[D1] && mdb[D1] == 0 -> mk[D1] = 0; mdb[D1] = 0; mrep[D1] = 0; mfrom[D1] = 0; mseen[D1] = 0; mhi[D1] = 0; mdm[D1] = 0
        :: else -> skip fi;
#endif
     skip
  :: else -> mseen[D0] = MAX(mseen[D0], NC)   /* (rewritten only past SL: seen lags at most SL) */
  fi;
#ifdef DMAXREC
  mdm[D0] = MAX(mdm[D0], DD(tk));
#endif
  mk[D0] = 1; mdb[D0] = 0; mrep[D0] = IDENT; mfrom[D0] = from; lost = 0;
  ref = (NC < from)
}

/* count a new holder (counter.lua, c_count) */
inline count(tk) {
  /* step: c_count */
  if
  :: COUNTED(D0) -> base = cv[D0]
#ifdef CFGSTEP
  :: else -> base = FLOOR(NC, SS(tk))                /* TODAY: the caller's step */
#else
  :: else -> base = FLOOR(NC, S)
#endif
#ifdef HIFLOOR
     ; base = MAX(base, mhi[D0])                     /* a new counter: never below a value issued here */
#endif
  fi;
  base = MAX(base, from);                            /* never below the marker's from */
  v = base + 1;
  /* P2: tokens never go back on this node */
  assert(v > hi);
  hi = v; lastc = now;
  cv[D0] = v; mhi[D0] = MAX(mhi[D0], v);
#if defined(CFGSTEP) || defined(EVSTAT)
  cu[D0] = 0; cx[D0] = NC + 4 * SS(tk)               /* TODAY: a TTL of the caller's life */
#else
  cu[D0] = NC + TT(tk); cx[D0] = NOEXP               /* V U: no TTL while the lease lives */
#endif
}

/* acquire.lua, one call of token tk */
inline acquire(tk) {
  /* step: acquire */
  gate(tk);
  if
  :: ref -> printf("EV acq %d refused: sits out\n", tk)
  :: !ref && LOCKED(D0) && lk[D0] == tk -> printf("EV acq %d: already held\n", tk)
  :: !ref && LOCKED(D0) && lk[D0] != tk -> printf("EV acq %d refused: held\n", tk)
#if !defined(EVSTAT)
  :: !ref && !LOCKED(D0) && COUNTED(D0) && cu[D0] > NC ->
     printf("EV acq %d refused: lock key lost\n", tk)    /* evicted or deleted */
#endif
  :: else ->
     /* P1: no other token's lease may still be valid */
     assert(gtok == 0 || gtok == tk || now >= gu);
     count(tk);
     lk[D0] = tk; lx[D0] = NC + TT(tk);
     gtok = tk; gu = now + TT(tk);
     printf("EV acq %d granted %d\n", tk, v)
  fi;
  ref = 0; from = 0; base = 0; v = 0; dl = 0
}

inline release(tk) {
  /* step: release */
#ifdef NORELCHECK
  if :: LOCKED(D0) ->                                /* MUTANT: no token check */
#else
  if :: LOCKED(D0) && lk[D0] == tk ->
#endif
     lk[D0] = 0; lx[D0] = 0;
     if :: gtok == tk -> gtok = 0; gu = 0 :: else -> skip fi;
#if !defined(CFGSTEP) && !defined(EVSTAT)
     if :: COUNTED(D0) -> cu[D0] = 0; cx[D0] = NC + E :: else -> skip fi;
#endif
     printf("EV rel %d\n", tk)
  :: else -> skip
  fi
}

inline renew(tk) {
  /* step: renew */
  if
#if defined(SWAPDEL) && !defined(NORENEWMARK)
  /* a lock extends only on the data that carries its db's marker */
  :: LOCKED(D0) && lk[D0] == tk && mk[D0] && mdb[D0] == 0 ->
#else
  :: LOCKED(D0) && lk[D0] == tk ->
#endif
     lx[D0] = NC + TT(tk);
     if :: gtok == tk -> gu = now + TT(tk) :: else -> skip fi;
     if
     :: COUNTED(D0) ->
#if defined(CFGSTEP) || defined(EVSTAT)
        cx[D0] = NC + 4 * SS(tk)
#else
        cu[D0] = NC + TT(tk)
#endif
     :: else -> skip
     fi;
     printf("EV renew %d\n", tk)
  :: else -> skip
  fi
}

/* fence.lua: raise the counter to F (another node's counter: at most
 * DELTA + 1 above this clock) where the caller's lock stands */
inline fence(tk) {
  /* step: fence */
  if
  :: LOCKED(D0) && lk[D0] == tk && COUNTED(D0) && cv[D0] < NC + DELTA + 1 ->
     cv[D0] = NC + DELTA + 1;
     hi = MAX(hi, cv[D0]); mhi[D0] = MAX(mhi[D0], cv[D0]);
#if defined(CFGSTEP) || defined(EVSTAT)
     cx[D0] = NC + 4 * SS(tk);
#endif
     printf("EV fence %d %d\n", tk, cv[D0])
  :: else -> skip
  fi
}

/* one adversary action */
#define ADV(guard, body) :: d_step { nadv < MAXADV && (guard) -> nadv++; sweep(); body }
#define EMPTYDB(d) lk[d] = 0; lx[d] = 0; cv[d] = 0; cu[d] = 0; cx[d] = 0; mk[d] = 0; mdb[d] = 0; mrep[d] = 0; mfrom[d] = 0; mseen[d] = 0; mev[d] = 0; mhi[d] = 0; mdm[d] = 0

active proctype node() {
  d_step {
    /* in service: db 0's marker and db 1's (another user's), both naming
     * this server, neither waiting */
    mk[0] = 1; mdb[0] = 0; mrep[0] = 1; mseen[0] = T0;
    mk[1] = 1; mdb[1] = 1; mrep[1] = 1; mseen[1] = T0
  }
end:
  do
  :: d_step { now < TMAX -> now++; sweep(); printf("EV tick %d\n", now) }
  :: d_step { now > lastc -> sweep(); t = 1; acquire(t); t = 0 }
  :: d_step { now > lastc -> sweep(); t = 2; acquire(t); t = 0 }
  :: d_step { now > lastc -> sweep(); t = 3; acquire(t); t = 0 }
  :: d_step { sweep(); release(1) }
  :: d_step { sweep(); release(2) }
  :: d_step { sweep(); release(3) }
  :: d_step { sweep(); renew(1) }
  :: d_step { sweep(); renew(2) }
  :: d_step { sweep(); fence(1) }
  :: d_step { sweep(); fence(2) }
#ifdef REPL
  /* the replica syncs db 0, and answers an acquire (P3) */
  :: d_step { (rlk != lk[D0] || rlx != lx[D0]) -> sweep(); rlk = lk[D0]; rlx = lx[D0]; printf("EV replica syncs\n") }
  :: d_step { sweep();
       /* the replica (role:slave) */
#ifdef REPLVOTE
       /* TODAY: "already held by this token" answered from the copy */
       printf("EV replica answers acq 1\n");
       assert(!(rlk == 1 && NC < rlx))
#else
       skip  /* role:slave: REPLICA refusal, whatever it holds */
#endif
     }
#endif
#ifdef A_EVICT
  /* eviction under volatile-*: one key with a TTL */
  ADV(policy == 1 && LOCKED(D0), printf("EV evict lock\n"); lk[D0] = 0; lx[D0] = 0; evk++)
#ifdef A_EVICTCTR
  ADV(policy == 1 && COUNTED(D0) && cx[D0] != NOEXP, printf("EV evict counter\n"); cv[D0] = 0; cu[D0] = 0; cx[D0] = 0; evk++)
#endif
#endif
#ifdef A_POLICY
  ADV(true, printf("EV policy %d\n", 1 - policy); policy = 1 - policy)
  :: d_step { eflag != (policy == 1) -> printf("EV locker reads policy %d\n", policy); eflag = (policy == 1) }
#endif
#ifdef A_RESETSTAT
  ADV(evk != 0, printf("EV resetstat\n"); evk = 0)
#endif
#ifdef A_SWAP
  ADV(true, printf("EV swapdb 0 1\n"); sw = 1 - sw)
#endif
#ifdef A_FLUSH
  ADV(MAYLOSE, printf("EV flushall\n"); EMPTYDB(0); EMPTYDB(1); lost = 1)
#endif
#ifdef A_RESTART
  /* a restart: new run_id and replid; without appendfsync always the
   * data is gone; with it configured, it may be kept (or not: an AOF
   * switched on at runtime holds nothing until its rewrite ends) */
  ADV(MAYLOSE, printf("EV restart, data lost\n"); EMPTYDB(0); EMPTYDB(1); lost = 1; runid++; replid++; rst = NC; evk = 0)
  ADV(durable, printf("EV restart, data kept (AOF)\n"); runid++; replid++; rst = NC; evk = 0)
#endif
#ifdef A_RESTARTKEPT
  /* only a restart that keeps the data (marker included) */
  ADV(true, printf("EV restart, data kept (AOF)\n"); runid++; replid++; rst = NC; evk = 0)
#endif
#ifdef A_FAILBACK
  /* a replica that synced earlier keeps a copy; a failback in place
   * (REPLICAOF it, then REPLICAOF NO ONE) brings that copy back: new
   * replid, same run_id */
  :: d_step { !fcopy -> sweep(); fcopy = 1; flk = lk[D0]; flx = lx[D0]; fcv = cv[D0]; fcu = cu[D0]; fcx = cx[D0];
       fmk = mk[D0]; fmdb = mdb[D0]; fmrep = mrep[D0]; fmfrom = mfrom[D0]; fmseen = mseen[D0]; fmhi = mhi[D0]; fmdm = mdm[D0]; printf("EV replica syncs\n") }
  ADV(fcopy, printf("EV failback in place\n"); lk[D0] = flk; lx[D0] = flx; cv[D0] = fcv; cu[D0] = fcu; cx[D0] = fcx;
       mk[D0] = fmk; mdb[D0] = fmdb; mrep[D0] = fmrep; mfrom[D0] = fmfrom; mseen[D0] = fmseen; mhi[D0] = fmhi; mdm[D0] = fmdm; replid++)
#endif
#ifdef A_BACK
  /* the node clock steps back BK; with the data loss excluded by the
   * contract (no loss before the clock has passed again what it showed:
   * A_BACKLOSS drops that exclusion) */
  ADV(back == 0 && MAYSTEP, printf("EV clock steps back %d\n", BK); stepat = NC; back = BK)
#endif
  od
}
