package generation

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
)

// IDPrefix starts every generation id.
const IDPrefix = "g-"

// content is exactly what a generation's id covers.
type content struct {
	Pool          string        `json:"pool"`
	Pins          map[Kind]Pin  `json:"pins"`
	Compatibility Compatibility `json:"compatibility"`
}

// Canonical returns the bytes a generation's id is the hash of: the RFC 8785
// (JCS) canonical JSON of {pool, pins, compatibility}. The shape is in the
// package documentation.
func Canonical(g *Generation) ([]byte, error) {
	if err := checkUTF8(g); err != nil {
		return nil, err
	}
	pins := map[Kind]Pin(g.Pins)
	if pins == nil {
		pins = map[Kind]Pin{}
	}
	b, err := json.Marshal(content{Pool: g.Pool, Pins: pins, Compatibility: g.Compatibility})
	if err != nil {
		return nil, fmt.Errorf("generation: canonical encoding: %w", err)
	}
	c, err := jsoncanonicalizer.Transform(b)
	if err != nil {
		return nil, fmt.Errorf("generation: canonical encoding: %w", err)
	}
	return c, nil
}

// ComputeID returns g's id: "g-" + the lower-case hex sha256 of
// Canonical(g). The same pool, pins and compatibility always give the same
// id; any change to them, a human tag or label included, gives another.
// Sequence, Verification and the ID field itself are not covered.
func ComputeID(g *Generation) (string, error) {
	c, err := Canonical(g)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return IDPrefix + hex.EncodeToString(sum[:]), nil
}

// checkUTF8 refuses strings JSON would silently replace (invalid UTF-8
// becomes U+FFFD), so two different contents never share an encoding.
func checkUTF8(g *Generation) error {
	strs := []string{g.Pool}
	for k, p := range g.Pins {
		strs = append(strs, string(k), p.Image, p.ID, p.Name, p.Tag)
		if p.Git != nil {
			strs = append(strs, p.Git.Repo, p.Git.Commit, p.Git.Ref)
		}
	}
	for _, s := range strs {
		if !utf8.ValidString(s) {
			return fmt.Errorf("generation: %w: %q is not UTF-8", ErrInvalid, s)
		}
	}
	return nil
}

// ValidID reports whether id is a whole generation id: g- and 64
// lower-case hex digits.
func ValidID(id string) bool { return idPattern.MatchString(id) }
