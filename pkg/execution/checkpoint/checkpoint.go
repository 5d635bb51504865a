package checkpoint

import (
	"errors"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media and predicate types of a checkpoint.
const (
	// ArtifactType is the checkpoint manifest's artifactType (and its
	// config's media type is ConfigMediaType): no runtime mistakes a
	// checkpoint for an image to run.
	ArtifactType = "application/vnd.slipway.checkpoint.v1"
	// ConfigMediaType is the media type of the checkpoint's config blob,
	// which holds its Predicate.
	ConfigMediaType types.MediaType = "application/vnd.slipway.checkpoint.config.v1+json"
	// PredicateType is the in-toto predicate type of a checkpoint's
	// attestation.
	PredicateType = "https://slipway.dev/checkpoint/v1"
	// EnvelopeMediaType is the media type of the signed attestation (a DSSE
	// envelope) stored beside the checkpoint.
	EnvelopeMediaType types.MediaType = "application/vnd.dsse.envelope.v1+json"
	// AnnotationSubject names, on an envelope's descriptor in the store's
	// index, the checkpoint digest it attests.
	AnnotationSubject = "dev.slipway.checkpoint.subject"
	// AnnotationRun names, on a checkpoint's descriptor, its run.
	AnnotationRun = "dev.slipway.checkpoint.run"
	// LayerMediaType is the media type of the layers Create writes: the
	// tar as it is, uncompressed. A checkpoint is taken while its sandbox
	// is frozen and is read back by the next resume; gzip took most of the
	// copy's time (B14). Restore and Pull take gzip layers
	// (types.OCILayer) as well.
	LayerMediaType = types.OCIUncompressedLayer
	// DefaultMaxLayers bounds a checkpoint's chain of diff layers: a
	// checkpoint that would have more is written whole.
	DefaultMaxLayers = 32
)

// Error families: one errors.Is covers a class.
var (
	// ErrInput: a Meta, directory or option that Create or Restore refuses;
	// the message names the field.
	ErrInput = errors.New("checkpoint: invalid input")
	// ErrNotFound: the store holds no checkpoint of that digest.
	ErrNotFound = errors.New("checkpoint: not found")
	// ErrRefused: Restore refused a checkpoint before writing anything:
	// its signature, its attestation, its tenant or its generation does not
	// hold; the message says which and why.
	ErrRefused = errors.New("checkpoint: refused")
)

// Meta is what a checkpoint is of: the attestation names all of it.
type Meta struct {
	Tenant     string `json:"tenant"`
	Pool       string `json:"pool"`
	RunID      string `json:"runId"`
	SandboxID  string `json:"sandboxId"`
	Generation string `json:"generation"`
	// TemplateID is the digest of the workspace template the sandbox was
	// made from (the run manifest's workspace_template_id).
	TemplateID string `json:"templateId"`
	// EventSeq is the job's event sequence at the checkpoint (0 for a run
	// with no job), as the one who asked for the checkpoint knew it.
	EventSeq int64 `json:"eventSeq"`
	// EventSeqUnknown says the taker did not know the job's event
	// sequence, and EventSeq (0) says nothing: a rollout's drain has the
	// runtime checkpoint every open run of a generation, and only the
	// control plane numbers a job's events.
	EventSeqUnknown bool `json:"eventSeqUnknown,omitempty"`
}

// Predicate is the attestation's predicate, and the checkpoint's config
// blob.
type Predicate struct {
	Meta
	// Created is when the sandbox was frozen for the copy.
	Created time.Time `json:"created"`
	// Parent is the checkpoint whose layers this one reuses ("" for a full
	// one).
	Parent string `json:"parent,omitempty"`
	// Layers is how many layers the checkpoint has; Reused how many of
	// them are its parent's.
	Layers int `json:"layers"`
	Reused int `json:"reused"`
	// Entries and Bytes are what the layer written for this checkpoint
	// holds (tar entries, uncompressed bytes).
	Entries int   `json:"entries"`
	Bytes   int64 `json:"bytes"`
}

// Checkpoint is one checkpoint as Create wrote it or Restore read it.
type Checkpoint struct {
	// Digest is the checkpoint manifest's digest: the run manifest's
	// workspace_checkpoint_id.
	Digest    string    `json:"digest"`
	Predicate Predicate `json:"predicate"`
	// Written is the bytes of new blobs Create stored (a reused layer
	// costs none).
	Written int64 `json:"written,omitempty"`
	// Frozen is how long the sandbox stayed frozen for Create.
	Frozen time.Duration `json:"frozen,omitempty"`
}
