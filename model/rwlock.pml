/*
 * rwlock.pml: a read-write lock (docs/design.md §14, docs/model.md).
 * C clients on N = 3 nodes each take the lock once: with C = 3 one a
 * writer, one a reader, the third either; with C = 2 a writer and one
 * either (make model runs C = 2; docs/model.md has both), by a majority of grants within
 * their window, then release it. A node records a writer's lock (wl),
 * the readers index (rd: a reader's entry, live until its end passes),
 * each reader's own key (rkey: what the fence step finds), and one fence
 * counter that every grant raises (fc). Calls are delivered at any later
 * point, keys and index entries lapse once no open window pins them
 * (rw_sweep removes lapsed entries; to the writer a lapsed entry and a
 * removed one are alike), windows end at any time. An eviction (a
 * volatile-* policy) may take a reader's key at any time, since it has a
 * TTL, but not the index, which has none. Properties, each time a lease
 * becomes valid: a writer has no other valid holder, a reader no valid
 * writer; and its token exceeds the token of every lease that became
 * valid before its attempt began (so a writer's exceeds every earlier
 * token, and a reader's every earlier writer's). The mutants must be
 * refuted: NOREADERCHECK (a writer granted over recorded readers) and
 * INDEXTTL (the index with a TTL: evictable while a reader is live).
 */
#define N 3
#define Q 2
#ifndef C
#define C 3
#endif

byte wl[N];        /* the token (client + 1) holding the writer's lock, 0 none */
byte rd[N];        /* the readers index on the node: bit c for client c */
byte rkey[N];       /* the readers' own keys on the node: bit c */
byte fc[N];        /* the node's fence counter */
bit vt[C];         /* the client's window is open */
bit held[C];       /* it believes it holds a valid lease */
bit wr[C];         /* it is a writer */
byte cur[C];       /* its current token (client + 1), 0 when it is done */
byte gm[C];        /* nodes that granted its attempt */
byte cn[C*N];      /* the counter each granting node answered */
byte before[C];    /* the highest token valid before its attempt began */
byte top;          /* the highest token of a lease that became valid */
bit listen[C];
byte rk[C*N];      /* a request in flight: 1 */

#define VALID(c) (held[c] && vt[c])

inline deliver(c, n) {
  if
#ifdef NOREADERCHECK
  :: rk[c*N+n] == 1 && wr[c] && wl[n] == 0 ->
#else
  :: rk[c*N+n] == 1 && wr[c] && wl[n] == 0 && rd[n] == 0 ->
#endif
     /* step: rw_write (granted only where no writer holds the lock and) */
     /* step: rw_readers (no live reader is recorded) */
     wl[n] = c + 1; fc[n]++;
     if :: listen[c] -> gm[c] = gm[c] | (1 << n); cn[c*N+n] = fc[n] :: else -> skip fi
  :: rk[c*N+n] == 1 && !wr[c] && wl[n] == 0 ->
     /* step: rw_read (granted where no writer holds the lock) */
     rd[n] = rd[n] | (1 << c); rkey[n] = rkey[n] | (1 << c); fc[n]++;
     if :: listen[c] -> gm[c] = gm[c] | (1 << n); cn[c*N+n] = fc[n] :: else -> skip fi
  :: rk[c*N+n] == 1 && !wr[c] ->
     /* step: rw_intent: a live writer's intent refuses a reader; intents
      * decide nothing else, so any reader call may be refused */
     /* step: rw_withdraw: taking an intent back changes no state here */
     skip
  :: else -> skip
  fi;
  rk[c*N+n] = 0
}

#define DEL(c, n) :: d_step { rk[c*N+n] != 0 -> deliver(c, n) }
active proctype network() {
end:
  do
  DEL(0,0) DEL(0,1) DEL(0,2) DEL(1,0) DEL(1,1) DEL(1,2)
#if C == 3
  DEL(2,0) DEL(2,1) DEL(2,2)
#endif
  od
}

/* a key expires unless its holder's attempt is current and its window
 * open: a key set by a call of an attempt outlives that attempt's window */
#define PINNED(c) (cur[c] != 0 && vt[c])
#define WEXP(n) :: d_step { wl[n] != 0 && !PINNED(wl[n] - 1) -> wl[n] = 0 }
/* step: rw_sweep: a reader's entry lapses (and is swept) once its end
 * passes: with its key, which never outlives it */
#define REXP(c, n) :: d_step { (rd[n] & (1 << c)) && !PINNED(c) -> rd[n] = rd[n] & ~(1 << c); rkey[n] = rkey[n] & ~(1 << c) }
/* a reader's key has a TTL: an eviction may take it at any time */
#define KEVICT(c, n) :: d_step { rkey[n] & (1 << c) -> rkey[n] = rkey[n] & ~(1 << c) }
#ifdef INDEXTTL
/* the mutant: an index with a TTL may be evicted at any time */
#define IEVICT(n) :: d_step { rd[n] != 0 -> rd[n] = 0 }
#else
#define IEVICT(n)
#endif
#define TICK(c) :: d_step { vt[c] -> vt[c] = 0 }
active proctype faults() {
end:
  do
  WEXP(0) WEXP(1) WEXP(2)
  REXP(0,0) REXP(0,1) REXP(0,2) REXP(1,0) REXP(1,1) REXP(1,2)
  KEVICT(1,0) KEVICT(1,1) KEVICT(1,2)
  IEVICT(0) IEVICT(1) IEVICT(2)
  TICK(0) TICK(1)
#if C == 3
  REXP(2,0) REXP(2,1) REXP(2,2) KEVICT(2,0) KEVICT(2,1) KEVICT(2,2) TICK(2)
#endif
  od
}


proctype client(byte c) {
  byte n, v, f;
  /* client 0 writes; with C = 3, client 1 reads; the last does either */
  if
  :: c == 0 -> wr[c] = 1
  :: c == C - 1 -> if :: wr[c] = 1 :: wr[c] = 0 fi
  :: else -> wr[c] = 0
  fi;
  d_step {
    cur[c] = c + 1; vt[c] = 1; listen[c] = 1; before[c] = top;
    n = 0;
    do :: n < N -> rk[c*N+n] = 1; n++ :: else -> break od;
    n = 0
  };
  d_step {
    rk[c*N] == 0 && rk[c*N+1] == 0 && rk[c*N+2] == 0 ->
    listen[c] = 0;
    if
    :: ((gm[c] & 1) + ((gm[c] >> 1) & 1) + ((gm[c] >> 2) & 1)) >= Q && vt[c] ->
       /* the token: the largest counter of the granting nodes, confirmed
        * (the fence step, fence.lua, in one step here) on a majority of
        * nodes where the lease's key still stands */
       f = 0; n = 0;
       do
       :: n < N -> if :: gm[c] & (1 << n) -> f = (cn[c*N+n] > f -> cn[c*N+n] : f) :: else -> skip fi; n++
       :: else -> break
       od;
       v = 0; n = 0;
       do
       :: n < N ->
          if
          :: (gm[c] & (1 << n)) && ((wr[c] && wl[n] == c + 1) || (!wr[c] && (rkey[n] & (1 << c)))) ->
             if :: fc[n] < f -> fc[n] = f :: else -> skip fi; v++
          :: else -> skip
          fi; n++
       :: else -> break
       od;
       if
       :: v >= Q ->
          /* step: rw_inspect: at this moment, no holder that excludes it
           * is valid, and its token is above every earlier one */
          n = 0;
          do
          :: n < C ->
             if :: n != c && VALID(n) -> assert(!wr[c] && !wr[n]) :: else -> skip fi; n++
          :: else -> break
          od;
          assert(f > before[c]);
          held[c] = 1;
          if :: f > top -> top = f :: else -> skip fi
       :: else -> skip
       fi;
       v = 0; n = 0; f = 0
    :: else -> skip
    fi
  };
  /* release (or clean-up): the lease ends, then its keys go; a release
   * that does not arrive leaves keys that expire at any time (above) */
  d_step {
    held[c] = 0; cur[c] = 0; vt[c] = 0;
    n = 0;
    do
    :: n < N ->
       if :: wl[n] == c + 1 -> wl[n] = 0 :: else -> skip fi;
       rd[n] = rd[n] & ~(1 << c); rkey[n] = rkey[n] & ~(1 << c); rk[c*N+n] = 0; n++
    :: else -> break
    od;
    n = 0
  }
}

init {
  atomic {
    run client(0); run client(1);
#if C == 3
    run client(2)
#endif
  }
}
