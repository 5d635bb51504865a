// Package leader runs a runtime's periodic work on one replica at a time:
// the replica holding a Kubernetes Lease (coordination.k8s.io/v1), through
// client-go's own leaderelection package. A candidate takes the Lease when
// its holder stops renewing it for a lease duration (a killed replica), or
// at once when the holder gives it up (a replica that stops cleanly
// releases it after its work has returned); the work of a replica that
// cannot renew in time is stopped before another may take over.
//
// Why a Lease rather than a PostgreSQL lock: it is what the runtime's
// Kubernetes backend already speaks (the cluster is the authority on the
// objects the work sweeps), it needs no database connection held open for
// the lock's life, and it is visible with kubectl (holderIdentity,
// renewTime). It is for the Kubernetes backend only: the local backend is
// one host, one runtime.
//
// It is not the work: callers pass a function that runs while leading and
// returns when its context ends.
package leader
