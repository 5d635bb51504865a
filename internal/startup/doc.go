// Package startup keeps a server process up and honest while what it needs
// to work (its database, its config repository) is not there yet.
//
// A plane that exits when its database does not answer at start puts its
// pod into a crash loop: the cause scrolls away between restarts and the
// restarts add load to a database that is coming up. Instead, a plane
// listens at once behind a Gate: GET /healthz answers 200 (the process is
// alive, a restart would not help), GET /readyz answers 503 naming each part
// it is waiting for, and every other route answers 503 "starting". Wait
// retries each part with a capped backoff and logs one line per distinct
// error, under an error id the /readyz answer carries; the answer itself
// never holds the detail (hosts, paths, a driver's words). When every part
// is there, the plane builds its handler and Open hands the Gate over to it.
//
// What no retry can fix (a malformed DSN, a missing token file) is not
// waited for: the caller returns it and the process exits with that one
// line.
package startup
