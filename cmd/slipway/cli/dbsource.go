package cli

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/pflag"

	"github.com/slipway-dev/slipway/internal/secretfile"
)

// envDB names the environment variable that may hold a database's DSN.
const envDB = "SLIPWAY_DB"

// dbFlags is how a command names its database without a secret in its
// argv (which anyone on the host can read with ps): --db DSN for one that
// holds no password, --db-file FILE for a DSN kept in a file (a mounted
// Secret), or $SLIPWAY_DB. PostgreSQL's own PGPASSWORD and PGPASSFILE
// work too, beside a --db without a password.
type dbFlags struct{ dsn, file string }

func (d *dbFlags) add(fs *pflag.FlagSet, what string) {
	fs.StringVar(&d.dsn, "db", "", what+": sqlite:PATH or postgres://... without a password (or $"+envDB+")")
	fs.StringVar(&d.file, "db-file", "", "a file holding "+what+"'s DSN, for one with a password (a mounted Secret)")
}

// passwordKV finds a password in a key=value DSN ("host=... password=...").
var passwordKV = regexp.MustCompile(`(^|\s)password\s*=`)

// resolveOptional is resolve for a command whose database may be left
// out: "" when no source is given.
func (d *dbFlags) resolveOptional() (string, error) {
	if d.dsn == "" && d.file == "" && os.Getenv(envDB) == "" {
		return "", nil
	}
	return d.resolve()
}

// source is resolve for a server, which reads --db-file itself (again
// until it exists: a Secret created after its pod): the DSN, or the file
// when --db-file is given.
func (d *dbFlags) source() (dsn, file string, err error) {
	if d.file != "" && d.dsn == "" {
		return "", d.file, nil
	}
	dsn, err = d.resolve()
	return dsn, "", err
}

// envSecretMounts names the environment variable that says which Secret
// is mounted at which directory (DIR=SECRET,...), as an install's
// manifests set it: a server's log line about a file that is missing
// names the Secret to create.
const envSecretMounts = "SLIPWAY_SECRET_MOUNTS"

// secretMounts is $SLIPWAY_SECRET_MOUNTS.
func secretMounts() (secretfile.Mounts, error) {
	m, err := secretfile.ParseMounts(os.Getenv(envSecretMounts))
	if err != nil {
		return nil, usage(fmt.Errorf("$%s: %w", envSecretMounts, err))
	}
	return m, nil
}

// resolve returns the DSN from the one source given. Its errors never
// repeat the DSN: it may hold a password.
func (d *dbFlags) resolve() (string, error) {
	env := os.Getenv(envDB)
	n := 0
	for _, s := range []string{d.dsn, d.file, env} {
		if s != "" {
			n++
		}
	}
	switch {
	case n == 0:
		return "", usage(errors.New("--db, --db-file or $" + envDB + " is required"))
	case d.dsn != "" && d.file != "":
		return "", usage(errors.New("--db and --db-file name the database twice: give one"))
	}
	if d.dsn != "" {
		if hasPassword(d.dsn) {
			return "", usage(errors.New("--db holds a password, which every user of this host can read in the process list: put the DSN in a file named by --db-file, in $" + envDB + ", or the password in $PGPASSWORD"))
		}
		return d.dsn, nil
	}
	if d.file != "" {
		b, err := os.ReadFile(d.file)
		if err != nil {
			return "", usage(fmt.Errorf("--db-file: %w", err))
		}
		dsn := strings.TrimSpace(string(b))
		if dsn == "" || strings.ContainsAny(dsn, "\n") {
			return "", usage(fmt.Errorf("--db-file %s: want one line, a DSN", d.file))
		}
		return dsn, nil
	}
	return strings.TrimSpace(env), nil
}

// hasPassword tells whether dsn carries a password, in a URL's user info
// or as a password= key.
func hasPassword(dsn string) bool {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			return true
		}
	}
	return passwordKV.MatchString(dsn)
}
