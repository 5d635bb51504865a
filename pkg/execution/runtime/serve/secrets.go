package serve

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/slipway-dev/slipway/internal/secretfile"
	"github.com/slipway-dev/slipway/internal/startup"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
)

// secretFiles waits, behind gate, for the files of Secrets c names (the
// API token's, the database DSN's): a Secret created after the pod is
// found without a restart, and while it is not there the log has one line
// naming it. It returns c with Token and DB read from them.
func secretFiles(ctx context.Context, c Config, gate *startup.Gate) (Config, error) {
	if c.TokenFile != "" {
		tok, err := startup.Wait(ctx, gate, "API token file", "is missing", startup.DefaultBackoff, func(context.Context) (string, error) {
			tok, err := c.Mounts.Read(c.TokenFile)
			switch {
			case err != nil && !errors.Is(err, secretfile.ErrMissing):
				return "", startup.Permanent(err)
			case err == nil && strings.ContainsAny(tok, " \t\r\n"):
				return "", startup.Permanent(fmt.Errorf("file %s: a token is one line without spaces", c.TokenFile))
			}
			return tok, err
		})
		if err != nil {
			return c, err
		}
		c.Token = tok
	}
	if c.DBFile != "" {
		// A DSN that is not one is waited for too: its Secret can be
		// fixed, and a process that exits on it would crash-loop.
		dsn, err := startup.Wait(ctx, gate, "database DSN file", "is missing or not a DSN", startup.DefaultBackoff, func(context.Context) (string, error) {
			dsn, err := readDSN(c)
			if err != nil && !errors.Is(err, secretfile.ErrMissing) && !errors.Is(err, runs.ErrInvalid) {
				return "", startup.Permanent(err) // a file that cannot be read
			}
			return dsn, err
		})
		if err != nil {
			return c, err
		}
		c.DB = dsn
	}
	return c, nil
}

// readDSN reads c.DBFile: one line, a postgres:// DSN.
func readDSN(c Config) (string, error) {
	dsn, err := c.Mounts.Read(c.DBFile)
	if err != nil {
		return "", err
	}
	if strings.Contains(dsn, "\n") || !(strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")) {
		return "", fmt.Errorf("%w: runtime: file %s: want one line, a postgres:// DSN", runs.ErrInvalid, c.DBFile)
	}
	return dsn, nil
}
