/*
 * deadline.pml: a call that arrives after its caller's deadline (issue 30
 * case 5, Safety v4 rule 5; docs/model.md, "The adversary model").
 * One attempt's acquire call to one node waits in the connection's
 * pipeline (a batch); it is written before its deadline or not; the
 * deadline passes, the attempt fails and cleans up. The node runs its
 * connections' commands in order, each connection's in the order written.
 *
 * Safety v4 (client side): no call is written after its deadline (a call
 * still in the pipeline is dropped), and the clean-up of a call that may
 * still run is queued behind it on the same connection. Property: once
 * every call has run, no lock of the failed attempt stands on the node
 * (else the node holds it for nobody for the whole lease).
 *
 * Mutant LATEWRITE (today): the pipeline carries the call past its
 * deadline (it runs under the latest deadline of its batch), and the
 * clean-up goes out on another connection, unordered with it.
 */
#define ACQ 1
#define CLN 2

chan conn = [2] of { byte };    /* the connection the call was queued on */
chan other = [1] of { byte };   /* another connection to the same node */
byte lock;                      /* 1: the failed attempt's lock stands */
bit written, done;

inline apply(x) {
  /* step: acquire (ACQ: the lock is free, granted) and release (CLN) */
  if
  :: x == ACQ -> lock = 1; printf("EV node runs acquire: granted\n")
  :: x == CLN -> lock = 0; printf("EV node runs clean-up release\n")
  fi
}

active proctype node() {
  byte x;
end:
  do
  :: conn?x -> apply(x)
  :: other?x -> apply(x)
  od
}

active proctype client() {
  /* the call waits in the pipeline; it may be written before the
   * deadline */
  if
  :: conn!ACQ; written = 1; printf("EV acquire written before the deadline\n")
  :: skip
  fi;
  printf("EV deadline: the attempt fails\n");
#ifdef LATEWRITE
  /* TODAY: the clean-up on another connection; the pipeline writes the
   * call later, under a later call's deadline */
  other!CLN; printf("EV clean-up sent on another connection\n");
  if
  :: !written -> conn!ACQ; written = 1; printf("EV acquire written after its deadline (pipeline)\n")
  :: else -> skip
  fi;
#else
  /* v4: an unwritten call is dropped; a written one is followed by its
   * clean-up on the same connection */
  if
  :: written -> conn!CLN; printf("EV clean-up queued behind the call\n")
  :: else -> printf("EV the unwritten call is dropped\n")
  fi;
#endif
  done = 1
}

/* once every call has run: nothing of the failed attempt is left */
active proctype monitor() {
  atomic { done && empty(conn) && empty(other) && timeout ->
    assert(lock == 0) }
}
