/*
 * semaphore.pml: a semaphore of K = 2 (docs/model.md). A semaphore is K
 * slot locks, each an ordinary lock on the same N nodes with its own
 * lease (redlock/semaphore.go); the gate that orders the waiters guards
 * nothing and is left out (without it any client may race for any slot:
 * more runs, not fewer). Three clients each take one slot, any slot, by a
 * majority of grants within their window; calls are delivered at any later
 * point, keys expire once no open window pins them, windows end at any
 * time. Property: at no time do more than K clients believe they
 * hold a valid slot lease, and no slot has two.
 */
#define N 3
#define Q 2
#define K 2
#define C 3

byte lk[K*N];      /* the token holding slot s's lock on node n, 0 none */
bit vt[C];         /* the client's window is open */
bit held[C];       /* it believes it holds slot hs[c] */
byte hs[C];        /* the slot it tries or holds */
byte cur[C];       /* its current token (client + 1), 0 when it is done */
byte gm[C];        /* nodes that granted its current attempt */
bit listen[C];     /* it still waits for acquire answers */

/* acquire requests in flight, one per client and node (0 none, 1 in
 * flight); the slot and the token travel with it */
byte rk[C*N];
byte rs[C*N];
byte rt[C*N];

#define L(s, n) ((s)*N + (n))
#define VALID(c) (held[c] && vt[c])

inline deliver(c, n) {
  /* step: acquire (of one slot lock) */
  if
  :: rk[c*N+n] == 1 && lk[L(rs[c*N+n], n)] == 0 ->
     lk[L(rs[c*N+n], n)] = rt[c*N+n];
     if :: listen[c] && cur[c] == rt[c*N+n] -> gm[c] = gm[c] | (1 << n) :: else -> skip fi
  :: else -> skip
  fi;
  rk[c*N+n] = 0; rs[c*N+n] = 0; rt[c*N+n] = 0
}

#define DEL(c, n) :: d_step { rk[c*N+n] != 0 -> deliver(c, n) }
active proctype network() {
end:
  do
  DEL(0,0) DEL(0,1) DEL(0,2) DEL(1,0) DEL(1,1) DEL(1,2) DEL(2,0) DEL(2,1) DEL(2,2)
  od
}

/* a slot's key expires unless its holder's window is open (a key set
 * by a call of an attempt outlives that attempt's window) */
#define PROT(s, n) (lk[L(s,n)] != 0 && cur[lk[L(s,n)] - 1] == lk[L(s,n)] && vt[lk[L(s,n)] - 1])
#define EXP(s, n) :: d_step { lk[L(s,n)] != 0 && !PROT(s,n) -> lk[L(s,n)] = 0 }
#define TICK(c) :: d_step { vt[c] -> vt[c] = 0 }
active proctype faults() {
end:
  do
  EXP(0,0) EXP(0,1) EXP(0,2) EXP(1,0) EXP(1,1) EXP(1,2)
  TICK(0) TICK(1) TICK(2)
  od
}

inline sendall(c, kind) {
  n = 0;
  do
  :: n < N -> rk[c*N+n] = kind; rs[c*N+n] = hs[c]; rt[c*N+n] = c + 1; n++
  :: else -> break
  od;
  n = 0
}

proctype client(byte c) {
  byte n, v;
  /* it picks a slot (the gate would hand them out in order): clients 0
   * and 1 one each, client 2 either */
  if
  :: c < 2 -> hs[c] = c
  :: c == 2 -> if :: hs[c] = 0 :: hs[c] = 1 fi
  fi;
  d_step { cur[c] = c + 1; vt[c] = 1; listen[c] = 1; sendall(c, 1) };
  d_step {
    /* the tally, once every node answered (message faults are checked in
     * redlock.pml; here the slots are the point) */
    rk[c*N] == 0 && rk[c*N+1] == 0 && rk[c*N+2] == 0 ->
    listen[c] = 0;
    if
    :: ((gm[c] & 1) + ((gm[c] >> 1) & 1) + ((gm[c] >> 2) & 1)) >= Q && vt[c] ->
       /* the slot lease is valid: no other holder of the slot, and at
        * most K valid holders in all */
       v = 0; n = 0;
       do
       :: n < C ->
          if :: n != c && VALID(n) -> v++; assert(hs[n] != hs[c]) :: else -> skip fi; n++
       :: else -> break
       od;
       assert(v < K);
       held[c] = 1; v = 0; n = 0
    :: else -> skip
    fi
  };
  /* release (or clean-up): the lease ends, then its locks go. The
   * release calls are not modelled one by one: a release that does not
   * arrive leaves a key that expires (below) at any time, which a late
   * release could only make happen earlier. The lease waits for its
   * acquire calls before it releases (docs/design.md §9), so none is
   * left in flight here (late acquires are checked in redlock.pml) */
  d_step {
    held[c] = 0; gm[c] = 0; cur[c] = 0; vt[c] = 0;
    n = 0;
    do
    :: n < N -> if :: lk[L(hs[c], n)] == c + 1 -> lk[L(hs[c], n)] = 0 :: else -> skip fi;
       rk[c*N+n] = 0; rs[c*N+n] = 0; rt[c*N+n] = 0; n++
    :: else -> break
    od;
    n = 0
  }
}

init {
  atomic { run client(0); run client(1); run client(2) }
}
