package shape

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// MachineIDFile is the name of the file the refresh phase writes a
// sandbox's machine id to, in its own directory outside the sandbox; it is
// mounted read-only over /etc/machine-id.
const MachineIDFile = "machine-id"

// NewMachineID is a fresh machine id as machine-id(5) has it: 32
// lowercase hex digits of 128 random bits, and a newline.
func NewMachineID() ([]byte, error) {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	return []byte(hex.EncodeToString(id) + "\n"), nil
}

// ValidMachineID reports whether b is a machine id as NewMachineID makes
// them.
func ValidMachineID(b []byte) bool {
	if len(b) != 33 || b[32] != '\n' {
		return false
	}
	for _, c := range b[:32] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// RefreshPod is the refresh phase of one pod of a rendered SandboxTemplate
// (package render), run by the pod's init container (slipway-runner
// install --refresh DIR) before the workspace container starts: a fresh
// machine id in dir/MachineIDFile (mode 0444), which the workspace
// container mounts read-only over /etc/machine-id. A valid machine id
// already in dir is kept, so an init container run again for the same pod
// leaves the pod its id.
//
// The init container runs the runner image and cannot see the template's
// files, so it does only what needs none of them: no
// /var/lib/dbus/machine-id (the pod has the template's own), no random
// seed and no ssh host keys, whatever the template's refresh list says.
func RefreshPod(dir string) (RefreshResult, error) {
	res := RefreshResult{Kind: RefreshMachineID}
	file := filepath.Join(dir, MachineIDFile)
	if b, err := os.ReadFile(file); err == nil && ValidMachineID(b) {
		res.Done, res.Detail = true, file+" (kept)"
		return res, nil
	}
	id, err := NewMachineID()
	if err != nil {
		return res, err
	}
	tmp, err := os.CreateTemp(dir, ".machine-id-*")
	if err != nil {
		return res, fmt.Errorf("refresh: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(id); err != nil {
		tmp.Close()
		return res, fmt.Errorf("refresh: %w", err)
	}
	if err := tmp.Chmod(0o444); err != nil {
		tmp.Close()
		return res, fmt.Errorf("refresh: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return res, fmt.Errorf("refresh: %w", err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return res, fmt.Errorf("refresh: %w", err)
	}
	res.Done, res.Detail = true, file
	return res, nil
}
