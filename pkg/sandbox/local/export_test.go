package local

// Extractions is how many times b unpacked a template.
func Extractions(b *Backend) int64 { return b.extractions.Load() }

// LabelTemplateRefresh is the template label the refresh phase reads.
const LabelTemplateRefresh = labelTemplateRefresh

// WithOwnerInRecord makes a Backend record owner changes by replacing
// sandbox.json, as it does on a file system without user xattrs.
func WithOwnerInRecord() Option {
	return func(o *options) error { o.ownerInRecord = true; return nil }
}

// OwnerInAttr reports whether b records owner changes in an xattr.
func OwnerInAttr(b *Backend) bool { return b.ownerStore == ownerInAttr }
