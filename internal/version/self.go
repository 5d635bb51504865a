package version

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"regexp"
	"sync"
)

// ImageEnv names the environment variable through which an install tells a
// Slipway process the image it runs from, by digest (deploy/ sets it to the
// same reference as the container's image, both pinned by slipway pin).
const ImageEnv = "SLIPWAY_IMAGE"

var digestRef = regexp.MustCompile(`^[a-z0-9][a-z0-9._:/-]*@sha256:[0-9a-f]{64}$`)

var exe struct {
	once sync.Once
	sum  string
	err  error
}

// ExecutableSHA256 is the sha256 of the file this process executes, read
// once (from /proc/self/exe on Linux): what the process is, measured, not
// what it was asked to be.
func ExecutableSHA256() (string, error) {
	exe.once.Do(func() {
		path := "/proc/self/exe"
		if _, err := os.Stat(path); err != nil {
			if path, err = os.Executable(); err != nil {
				exe.err = fmt.Errorf("version: own executable: %w", err)
				return
			}
		}
		f, err := os.Open(path)
		if err != nil {
			exe.err = fmt.Errorf("version: own executable: %w", err)
			return
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			exe.err = fmt.Errorf("version: own executable: %w", err)
			return
		}
		exe.sum = hex.EncodeToString(h.Sum(nil))
	})
	return exe.sum, exe.err
}

// Image is the image this process says it runs from ($SLIPWAY_IMAGE, a
// reference by digest), "" when none is declared (a process on a host).
func Image() (string, error) {
	v := os.Getenv(ImageEnv)
	if v == "" {
		return "", nil
	}
	if !digestRef.MatchString(v) {
		return "", fmt.Errorf("version: %s=%q: want an image reference by digest, name@sha256:<64 hex>", ImageEnv, v)
	}
	return v, nil
}
