package local

import (
	"fmt"
	"os"
	"syscall"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// exeDigest is the sha256 of the file a running process executes (path is
// /proc/<pid>/exe), hashed once per version of the file: every sandbox runs
// the same read-only runner copy, and hashing its megabytes for each
// start cost more CPU than the rest of the start. A version is the file's
// device, inode, size, modification and change times; the change time
// moves with any write and cannot be set back from user space, so a
// changed file is hashed again.
func (b *Backend) exeDigest(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return runner.FileDigest(path)
	}
	key := fmt.Sprintf("%d:%d:%d:%d.%d:%d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
	if d, ok := b.exeDigests.Load(key); ok {
		return d.(string), nil
	}
	d, err := runner.FileDigest(path)
	if err != nil {
		return "", err
	}
	b.exeDigests.Store(key, d)
	return d, nil
}
