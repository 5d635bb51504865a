package rootfs

import (
	"fmt"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Extraction limits used unless an option says otherwise.
const (
	DefaultMaxBytes      int64 = 8 << 30   // total bytes of regular-file content over all layers
	DefaultMaxEntries          = 1_000_000 // tar entries over all layers, whiteouts included
	DefaultMaxNameLength       = 4096      // bytes in an entry name or link target (PATH_MAX)
)

// ExtractOption configures Extract.
type ExtractOption func(*extractOptions) error

type extractOptions struct {
	maxBytes   int64
	maxEntries int
	maxName    int
	chown      bool
}

func newExtractOptions(opts []ExtractOption) (*extractOptions, error) {
	o := &extractOptions{
		maxBytes:   DefaultMaxBytes,
		maxEntries: DefaultMaxEntries,
		maxName:    DefaultMaxNameLength,
		chown:      os.Geteuid() == 0,
	}
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// WithMaxBytes limits the total regular-file content over all layers.
func WithMaxBytes(n int64) ExtractOption {
	return func(o *extractOptions) error {
		if n <= 0 {
			return fmt.Errorf("%w: max bytes %d must be positive", ErrOption, n)
		}
		o.maxBytes = n
		return nil
	}
}

// WithMaxEntries limits the number of tar entries over all layers.
func WithMaxEntries(n int) ExtractOption {
	return func(o *extractOptions) error {
		if n <= 0 {
			return fmt.Errorf("%w: max entries %d must be positive", ErrOption, n)
		}
		o.maxEntries = n
		return nil
	}
}

// WithMaxNameLength limits the length in bytes of an entry name or link target.
func WithMaxNameLength(n int) ExtractOption {
	return func(o *extractOptions) error {
		if n <= 0 {
			return fmt.Errorf("%w: max name length %d must be positive", ErrOption, n)
		}
		o.maxName = n
		return nil
	}
}

// WithoutOwnership leaves every extracted entry owned by the calling user
// instead of the uid and gid the layer records. Without it, Extract chowns
// when it runs as root and cannot otherwise.
func WithoutOwnership() ExtractOption {
	return func(o *extractOptions) error {
		o.chown = false
		return nil
	}
}

// LayerOption configures Diff and Layer.
type LayerOption func(*layerOptions) error

type layerOptions struct {
	epoch     time.Time // zero: no clamping
	owner     *[2]int   // forced uid, gid
	tempDir   string
	mediaType types.MediaType
	level     int // gzip level; unexported test hook
	// blocks is how many blocks compress at once; 0: max(4, 2×GOMAXPROCS).
	blocks int
}

// compressionLevel is the gzip level of every layer this package writes: it
// is part of the layer's bytes, so changing it changes every digest.
const compressionLevel = 6

// blockSize is the pgzip block size: the compressed bytes depend on it (each
// block is compressed on its own with the previous block's last 32 KiB as
// dictionary), never on how many blocks run at once.
const blockSize = 1 << 20

func newLayerOptions(opts []LayerOption) (*layerOptions, error) {
	o := &layerOptions{mediaType: types.DockerLayer, level: compressionLevel}
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// WithEpoch clamps modification times: an entry newer than t is written with
// t. The caller reads SOURCE_DATE_EPOCH (or decides otherwise); this package
// never looks at the environment. Times are truncated to whole seconds
// whether or not an epoch is given.
func WithEpoch(t time.Time) LayerOption {
	return func(o *layerOptions) error {
		if t.IsZero() || t.Before(time.Unix(0, 0)) {
			return fmt.Errorf("%w: epoch %v must be at or after 1970-01-01", ErrOption, t)
		}
		o.epoch = t.Truncate(time.Second)
		return nil
	}
}

// WithOwner writes every entry with this uid and gid instead of the file's.
func WithOwner(uid, gid int) LayerOption {
	return func(o *layerOptions) error {
		if uid < 0 || gid < 0 {
			return fmt.Errorf("%w: owner %d:%d must not be negative", ErrOption, uid, gid)
		}
		o.owner = &[2]int{uid, gid}
		return nil
	}
}

// WithTempDir puts the compressed layer file in dir instead of os.TempDir().
func WithTempDir(dir string) LayerOption {
	return func(o *layerOptions) error {
		if dir == "" {
			return fmt.Errorf("%w: empty temp dir", ErrOption)
		}
		o.tempDir = dir
		return nil
	}
}

// WithMediaType sets the layer's media type (default types.DockerLayer, as
// go-containerregistry's tarball package). Both gzip media types describe the
// same bytes, so the digest does not change with it.
// types.OCIUncompressedLayer writes the tar as it is, with no compression
// (the compression options do not apply): its digest and diff id are the
// same sha256, taken once as the tar is written. It costs the bytes the
// tree holds and no compressor's time, for a layer that is written often
// and kept close (a workspace checkpoint).
func WithMediaType(mt types.MediaType) LayerOption {
	return func(o *layerOptions) error {
		if mt != types.DockerLayer && mt != types.OCILayer && mt != types.OCIUncompressedLayer {
			return fmt.Errorf("%w: media type %q is neither a gzip layer type nor %q", ErrOption, mt, types.OCIUncompressedLayer)
		}
		o.mediaType = mt
		return nil
	}
}

// compressed says whether the layer is gzip-compressed.
func (o *layerOptions) compressed() bool { return o.mediaType != types.OCIUncompressedLayer }

// withCompressionLevel is a test hook for benchmarks comparing levels.
func withCompressionLevel(level int) LayerOption { return WithCompressionLevel(level) }

// WithCompressionLevel sets the gzip level (1, fastest, to 9) instead of the
// default 6: a layer of large, poorly compressible binaries (a release's Go
// programs) costs a third of the time at 1 for a slightly larger blob. The
// level is part of the layer's bytes: the same level gives the same digest.
func WithCompressionLevel(level int) LayerOption {
	return func(o *layerOptions) error {
		if level < 1 || level > 9 {
			return fmt.Errorf("%w: gzip level %d is not 1 to 9", ErrOption, level)
		}
		o.level = level
		return nil
	}
}

// WithCompressionConcurrency sets how many blocks of the layer compress at
// once (default max(4, 2×GOMAXPROCS)): 1 keeps the compression to about one
// core, for a layer made in the background beside work that must not wait
// for it. The layer's bytes do not depend on it.
func WithCompressionConcurrency(blocks int) LayerOption {
	return func(o *layerOptions) error {
		if blocks < 1 {
			return fmt.Errorf("%w: compression concurrency %d must be at least 1", ErrOption, blocks)
		}
		o.blocks = blocks
		return nil
	}
}
