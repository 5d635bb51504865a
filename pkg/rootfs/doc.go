// Package rootfs moves file trees between OCI images and directories: it
// unpacks an image (a go-containerregistry v1.Image) into a directory safely,
// and freezes the change a build step made to a directory back into one
// byte-reproducible layer.
//
// It is shared by the workspace-template build (extract the base, run steps
// under bubblewrap, freeze each change as a layer) and the local sandbox
// backend (unpack a template once per digest).
//
// # Extract
//
// Extract applies layers bottom first into an empty directory, honouring
// whiteouts and opaque whiteouts. Layers are untrusted input: every path is
// reached one component at a time from a descriptor of the target, with
// O_NOFOLLOW on each step, and final names are created exclusively, so no
// entry is ever written through a symlink or outside the target. It refuses,
// with an *EntryError naming the layer and the entry and wrapping
// ErrUnsafeEntry or ErrLimit: absolute names, ".." components, paths through a
// symlink or a non-directory, hardlinks whose target is absolute, has "..",
// is missing or is not a regular file, device nodes, unknown entry types, and
// layers over the byte, entry-count or name-length limits. Symlinks are data:
// they may point anywhere, and are never followed. Named pipes are allowed
// (they grant nothing). Modes keep their setuid, setgid and sticky bits (a
// scanner looks at them later), modification times are kept, and ownership is
// kept when running as root. Extended attributes, file capabilities included,
// are not applied. The target's own mode and owner stay the caller's.
//
// SyncTar is ExtractTar into a directory that holds an earlier copy of the
// same source: it touches only what differs, telling a changed file by its
// bytes, so that a file left as it was keeps its inode and ctime and Diff
// sees it unchanged (incremental checkpoints of a workspace streamed out
// of a pod).
//
// # Snapshot and Diff
//
// Snapshot records the metadata of a tree; Diff writes what changed since as
// one gzip layer (or an uncompressed one, WithMediaType): added and changed
// entries, whiteouts for deleted ones, and their parent directories, sorted
// by path. See Tree for how a change is told without reading content. Layer
// does the same for a whole directory. Diff's report carries the tree as it
// found it, the snapshot for the next Diff without a second walk.
//
// A layer's bytes depend only on the tree and the options: entries sorted,
// times in whole seconds and clamped by WithEpoch (the caller reads
// SOURCE_DATE_EPOCH; this package never reads the environment), no access or
// change times, no user or group names, USTAR headers unless a name or number
// needs PAX, and pgzip with a fixed level and block size, whose output does
// not depend on how many cores compress it. The layer is compressed once into
// a temporary file while both digests are computed (an uncompressed layer
// has one, taken as the tar is written); the returned *FileLayer
// serves it and Close removes the file. Changing the compressor, its level,
// its block size or the klauspost/compress version changes every digest.
//
// # Not for
//
// Pulling images (package resolve and go-containerregistry's remote), running
// the steps (package isolate), or the image config and manifest around a layer
// (go-containerregistry's mutate). It runs on Linux only.
package rootfs
