/*
 * rwlock.pml: a read-write lock (docs/design.md §14, docs/model.md).
 * C clients on N = 3 nodes each take the lock once: with C = 3 one a
 * writer, one a reader, the third either; with C = 2 a writer and one
 * either (make model runs C = 2, and C = 3 without two of the faults:
 * NOKEVICT, NOTICK below; docs/model.md), by a majority of grants
 * within their window, then release it. A node records a writer's lock
 * (wl), the readers index (rd: a reader's entry, live until its end
 * passes), each reader's own key (rkey: what the fence step finds), one
 * fence counter that every grant raises (fc), and the lease end U that
 * the same counter keeps (u: the clients whose end U still covers). A
 * grant raises U to its lease's end (u gains the client); a writer's
 * release where its lock stands drops U; a reader's release where its
 * entry stands removes it and lowers U to the latest end left in the
 * index (here, adversarially, u becomes the index: U covers only the
 * readers still in it); a reader's release whose entry is gone (the
 * index was evicted) leaves U as it is. Calls are delivered at any
 * later point, keys, index entries and U's cover of a client lapse once
 * no open window pins them (rw_sweep removes lapsed entries; to the
 * writer a lapsed entry and a removed one are alike), windows end at any
 * time. An eviction (a volatile-* policy) may take the writer's lock or
 * a reader's key at any time, and the whole index, which has a TTL (its
 * latest entry's end), but not the counter, which has none while a lease
 * is live. The rules:
 * rw_write grants where no writer's lock stands, the index has no live
 * reader and U covers no live lease (after an eviction of the index or
 * of a writer's lock the writer waits until U passes); rw_read grants
 * where no writer's lock stands, unless U is live and not explained by
 * the index (here: the index is empty while U covers a lease: the
 * "key-lost" sit-out, which covers a writer's lock evicted too). The
 * design's argument: an index that stands holds every open reader that
 * U covers (it is re-created only by a reader's grant, which that rule
 * refuses while U is unexplained); the model checks it (lemma, below)
 * at every reader's grant and every reader's release that lowers U,
 * where the rules rely on it. Properties, each time a lease becomes
 * valid: a writer has no other valid holder, a reader no valid writer;
 * and its token exceeds the token of every lease that became valid
 * before its attempt began (so a writer's exceeds every earlier token,
 * and a reader's every earlier writer's). The mutants must be refuted:
 * NOLOSTCHECK (a writer ignores U: granted over an evicted index),
 * NOREADLOST (a reader ignores an unexplained U and re-creates the
 * index) and NORELEASEGUARD (a reader's release lowers U even where its
 * entry is gone). NOREADERCHECK (a writer granted over recorded readers)
 * holds: U covers every open reader in the index, so the writer's check
 * of the index decides only its answer ("readers"), not safety. NOLEMMA
 * leaves the lemma out (the mutant runs: their trails end in a property,
 * not in the lemma).
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
byte u[N];         /* the counter's U: bit c while U covers client c's end */
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
/* a key expires unless its holder's attempt is current and its window
 * open: a key set by a call of an attempt outlives that attempt's window */
#define PINNED(c) (cur[c] != 0 && vt[c])

/* the lemma: where the index stands on node n, it holds every reader
 * whose lease is open and whose end U covers (i is the caller's) */
inline lemma(n, i) {
#ifndef NOLEMMA
  i = 0;
  do
  :: i < C ->
     if
     :: rd[n] != 0 && (u[n] & (1 << i)) && !wr[i] && PINNED(i) -> assert(rd[n] & (1 << i))
     :: else -> skip
     fi; i++
  :: else -> break
  od;
  i = 0
#else
  skip
#endif
}

/* the grants' conditions, and the mutants that drop one */
#ifdef NOREADERCHECK
#define NOREADER(n) 1           /* the mutant: the writer ignores the index */
#else
#define NOREADER(n) (rd[n] == 0)  /* no live reader in the index */
#endif
#ifdef NOLOSTCHECK
#define ULIVE(n) 0              /* the mutant: the writer ignores U */
#else
#define ULIVE(n) u[n]           /* U covers a lease that may be live */
#endif
#ifdef NOREADLOST
#define EXPLAINED(n) 1          /* the mutant: the reader ignores U */
#else
#define EXPLAINED(n) (rd[n] != 0 || u[n] == 0)  /* U not live, or the index stands */
#endif

inline deliver(c, n) {
  if
  :: rk[c*N+n] == 1 && wr[c] && wl[n] == 0 && NOREADER(n) && ULIVE(n) == 0 ->
     /* step: rw_write (granted only where no writer holds the lock,
      * U covers no live lease, and) */
     /* step: rw_readers (no live reader is recorded) */
     wl[n] = c + 1; u[n] = u[n] | (1 << c); fc[n]++;
     if :: listen[c] -> gm[c] = gm[c] | (1 << n); cn[c*N+n] = fc[n] :: else -> skip fi
  :: rk[c*N+n] == 1 && !wr[c] && wl[n] == 0 && EXPLAINED(n) ->
     /* step: rw_read (granted where no writer holds the lock and U is
      * explained: not live, or the index stands) */
     lemma(n, i);
     rd[n] = rd[n] | (1 << c); rkey[n] = rkey[n] | (1 << c); u[n] = u[n] | (1 << c); fc[n]++;
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
  byte i;
end:
  do
  DEL(0,0) DEL(0,1) DEL(0,2) DEL(1,0) DEL(1,1) DEL(1,2)
#if C == 3
  DEL(2,0) DEL(2,1) DEL(2,2)
#endif
  od
}

#define WEXP(n) :: d_step { wl[n] != 0 && !PINNED(wl[n] - 1) -> wl[n] = 0 }
/* step: rw_sweep: a reader's entry lapses (and is swept) once its end
 * passes: with its key, which never outlives it */
#define REXP(c, n) :: d_step { (rd[n] & (1 << c)) && !PINNED(c) -> rd[n] = rd[n] & ~(1 << c); rkey[n] = rkey[n] & ~(1 << c) }
/* U passes a client's end once its lease would lapse */
#define ULAPSE(c, n) :: d_step { (u[n] & (1 << c)) && !PINNED(c) -> u[n] = u[n] & ~(1 << c) }
/* the writer's lock has a TTL: an eviction may take it at any time */
#define WEVICT(n) :: d_step { wl[n] != 0 -> wl[n] = 0 }
/* a reader's key has a TTL: an eviction may take it at any time */
#define KEVICT(c, n) :: d_step { rkey[n] & (1 << c) -> rkey[n] = rkey[n] & ~(1 << c) }
/* so has the index: an eviction may take it whole at any time (its TTL
 * ending is one such case) */
#define IEVICT(n) :: d_step { rd[n] != 0 -> rd[n] = 0 }
#define TICK(c) :: d_step { vt[c] -> vt[c] = 0 }
/* smaller runs, for three clients (rwlock3 and the mutants that need two
 * readers): NOKEVICT, no reader's key evicted; NOTICK, a window ends
 * only with its release; NOWEVICT, no writer's lock evicted (the
 * mutants whose trail is to show the index's eviction) */
#ifdef NOWEVICT
#undef WEVICT
#define WEVICT(n)
#endif
#ifdef NOKEVICT
#undef KEVICT
#define KEVICT(c, n)
#endif
#ifdef NOTICK
#undef TICK
#define TICK(c)
#endif
active proctype faults() {
end:
  do
  WEXP(0) WEXP(1) WEXP(2)
  WEVICT(0) WEVICT(1) WEVICT(2)
  REXP(0,0) REXP(0,1) REXP(0,2) REXP(1,0) REXP(1,1) REXP(1,2)
  ULAPSE(0,0) ULAPSE(0,1) ULAPSE(0,2) ULAPSE(1,0) ULAPSE(1,1) ULAPSE(1,2)
  KEVICT(1,0) KEVICT(1,1) KEVICT(1,2)
  IEVICT(0) IEVICT(1) IEVICT(2)
  TICK(0) TICK(1)
#if C == 3
  REXP(2,0) REXP(2,1) REXP(2,2) ULAPSE(2,0) ULAPSE(2,1) ULAPSE(2,2)
  KEVICT(2,0) KEVICT(2,1) KEVICT(2,2) TICK(2)
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
       /* step: release: a writer's lock that stands is deleted and the
        * counter drops U; a reader's entry that stands is removed and U
        * lowered to the latest end left in the index (here u becomes
        * the index: U keeps covering only the readers still in it); a
        * reader whose entry is gone (the index evicted) leaves U alone */
       if :: wl[n] == c + 1 -> wl[n] = 0; u[n] = 0 :: else -> skip fi;
       if
       :: rd[n] & (1 << c) ->
          lemma(n, v);
          rd[n] = rd[n] & ~(1 << c); u[n] = rd[n]
#ifdef NORELEASEGUARD
       :: !(rd[n] & (1 << c)) && (rkey[n] & (1 << c)) ->
          /* the mutant: its key stands, its entry does not: U lowered all the same */
          u[n] = rd[n]
#endif
       :: else -> skip
       fi;
       rkey[n] = rkey[n] & ~(1 << c); rk[c*N+n] = 0; n++
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
