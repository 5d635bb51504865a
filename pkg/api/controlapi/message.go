package controlapi

import "time"

// Message is the body delivered for one event: filtered text, an audit
// reference to the original event and, when the text was cut, a link to
// the whole (cleaned, redacted) text as an artifact of the job.
type Message struct {
	// ID is the idempotency key (also the Idempotency-Key header).
	ID          string    `json:"id"`
	Tenant      string    `json:"tenant"`
	Destination string    `json:"destination"`
	Job         string    `json:"job"`
	Seq         int64     `json:"seq"`
	Kind        EventKind `json:"kind"`
	At          time.Time `json:"at"`
	Text        string    `json:"text"`
	// Result is the final outcome (result events only).
	Result *MessageResult `json:"result,omitempty"`
	// Truncated says what was cut and where the whole text is.
	Truncated *MessageTruncation `json:"truncated,omitempty"`
	// Redacted lists the credentials replaced (rule and line, never values).
	Redacted []Redaction  `json:"redacted,omitempty"`
	Audit    MessageAudit `json:"audit"`
}

// MessageResult is a result event's outcome.
type MessageResult struct {
	State    State  `json:"state"`
	Reason   string `json:"reason,omitempty"`
	ExitCode *int   `json:"exitCode,omitempty"`
}

// MessageTruncation says how much of the text was cut.
type MessageTruncation struct {
	DroppedBytes int    `json:"droppedBytes"`
	DroppedLines int    `json:"droppedLines"`
	Artifact     string `json:"artifact"`
}

// MessageAudit points at the original event.
type MessageAudit struct {
	Job    string `json:"job"`
	Seq    int64  `json:"seq"`
	Events string `json:"events"`
}

// Redaction is one credential replaced in a message's text: the rule that
// found it and its line, never its value.
type Redaction struct {
	Rule string `json:"rule"`
	Line int    `json:"line"`
}
