package gitops

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
)

// Environment variables read for credentials when no WithAuth is given.
const (
	// EnvToken is an HTTPS token (sent as basic auth, user EnvUsername or
	// "slipway"), as forges accept for git over HTTPS.
	EnvToken = "SLIPWAY_GIT_TOKEN"
	// EnvTokenFile is a file holding such a token (a mounted Secret),
	// read again before each fetch and push: a token replaced in the file
	// is used without a restart. A file that does not exist or is empty
	// means no credentials (a public repository needs none); a refusal
	// then says so. EnvToken wins when both are set.
	EnvTokenFile = "SLIPWAY_GIT_TOKEN_FILE"
	// EnvUsername and EnvPassword are HTTPS basic auth.
	EnvUsername = "SLIPWAY_GIT_USERNAME"
	EnvPassword = "SLIPWAY_GIT_PASSWORD"
	// EnvSSHKey is a private key file for ssh:// (default: the SSH agent).
	EnvSSHKey = "SLIPWAY_GIT_SSH_KEY"
)

// tokenFileFromEnv is EnvTokenFile and the user to send its token as,
// when u is http(s) without user info and EnvToken is unset.
func tokenFileFromEnv(u string) (file, user string) {
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return "", ""
	}
	if pu, err := url.Parse(u); err != nil || pu.User != nil || os.Getenv(EnvToken) != "" {
		return "", ""
	}
	if user = os.Getenv(EnvUsername); user == "" {
		user = "slipway"
	}
	return os.Getenv(EnvTokenFile), user
}

// auth is the credentials of one fetch or push: those of Open, or the
// token EnvTokenFile holds now (none while it is missing or empty).
func (r *Repo) auth() transport.AuthMethod {
	if r.o.tokenFile == "" {
		return r.o.auth
	}
	b, err := os.ReadFile(r.o.tokenFile)
	if tok := strings.TrimSpace(string(b)); err == nil && tok != "" {
		return &githttp.BasicAuth{Username: r.o.tokenUser, Password: tok}
	}
	return nil
}

// authNote is what a refusal adds when the token file gave no token.
func (r *Repo) authNote(err error) string {
	if r.o.tokenFile == "" || r.auth() != nil ||
		!(errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed)) {
		return ""
	}
	return " (no token was sent: $" + EnvTokenFile + " " + r.o.tokenFile + " does not exist or is empty)"
}

// authFromEnv picks credentials for u from the environment: user info in
// an http(s) URL, then the token or basic-auth variables; for ssh, a key
// file or the SSH agent. file:// needs none.
func authFromEnv(u string) (transport.AuthMethod, error) {
	switch {
	case strings.HasPrefix(u, "http://"), strings.HasPrefix(u, "https://"):
		pu, err := url.Parse(u)
		if err != nil {
			return nil, fmt.Errorf("gitops: repository URL: %w", redact(err, u))
		}
		if pu.User != nil {
			pw, _ := pu.User.Password()
			return &githttp.BasicAuth{Username: pu.User.Username(), Password: pw}, nil
		}
		if tok := os.Getenv(EnvToken); tok != "" {
			user := os.Getenv(EnvUsername)
			if user == "" {
				user = "slipway"
			}
			return &githttp.BasicAuth{Username: user, Password: tok}, nil
		}
		if user := os.Getenv(EnvUsername); user != "" {
			return &githttp.BasicAuth{Username: user, Password: os.Getenv(EnvPassword)}, nil
		}
		return nil, nil
	case strings.HasPrefix(u, "ssh://"), isSCPLike(u):
		user := "git"
		if pu, err := url.Parse(u); err == nil && pu.User != nil {
			user = pu.User.Username()
		} else if at := strings.Index(u, "@"); at > 0 && !strings.Contains(u, "://") {
			user = u[:at]
		}
		if key := os.Getenv(EnvSSHKey); key != "" {
			a, err := gitssh.NewPublicKeysFromFile(user, key, os.Getenv("SLIPWAY_GIT_SSH_KEY_PASSWORD"))
			if err != nil {
				return nil, fmt.Errorf("gitops: ssh key %s: %w", key, err)
			}
			return a, nil
		}
		a, err := gitssh.NewSSHAgentAuth(user)
		if err != nil {
			return nil, fmt.Errorf("gitops: ssh: no %s and no SSH agent: %w", EnvSSHKey, err)
		}
		return a, nil
	default:
		return nil, nil
	}
}
