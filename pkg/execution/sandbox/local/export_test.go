package local

// Extractions is how many times b unpacked a template.
func Extractions(b *Backend) int64 { return b.extractions.Load() }

// RecordWrites is how many times b wrote a sandbox.json (each waits for
// the disk twice).
func RecordWrites(b *Backend) int64 { return b.recordWrites.Load() }

// LabelTemplateRefresh is the template label the refresh phase reads.
const LabelTemplateRefresh = labelTemplateRefresh

// WithOwnerInRecord makes a Backend record owner changes by replacing
// sandbox.json, as it does on a file system without user xattrs.
func WithOwnerInRecord() Option {
	return func(o *options) error { o.ownerInRecord = true; return nil }
}

// OwnerInAttr reports whether b records owner changes in an xattr.
func OwnerInAttr(b *Backend) bool { return b.ownerStore == ownerInAttr }
