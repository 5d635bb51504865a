package controlapi

import (
	"fmt"
	"time"
)

// Acceptance of a job whose tenant has destinations that require the
// result: validated delivery, never plain success before the receipts.
const (
	// AcceptPublished: every required destination returned its receipt of
	// the result.
	AcceptPublished = "result published"
	// AcceptFailed: a required destination's budget for the result was
	// spent.
	AcceptFailed = "notification failed"
)

// AcceptPending is "result <state>, notification pending".
func AcceptPending(st State) string { return fmt.Sprintf("result %s, notification pending", st) }

// DeliveryStatus is how a job's deliveries stand.
type DeliveryStatus struct {
	// Acceptance is set once the job is terminal and some destination
	// requires its result: AcceptPublished, AcceptPending(state) or
	// AcceptFailed.
	Acceptance   string              `json:"acceptance,omitempty"`
	Destinations []DestinationStatus `json:"destinations"`
}

// DestinationStatus is one destination's deliveries of a job.
type DestinationStatus struct {
	Name           string `json:"name"`
	RequiresResult bool   `json:"requiresResult,omitempty"`
	Delivered      int    `json:"delivered"`
	Failed         int    `json:"failed,omitempty"`
	Collapsed      int    `json:"collapsed,omitempty"`
	// Retrying is the event being retried: its sequence, attempts so far,
	// the next try and the last error.
	Retrying *Retrying `json:"retrying,omitempty"`
	// Result is the receipt of the result event.
	Result *Receipt `json:"result,omitempty"`
}

// Retrying is an event a destination has not taken yet.
type Retrying struct {
	Seq       int64     `json:"seq"`
	Attempts  int       `json:"attempts"`
	NextTry   time.Time `json:"nextTry"`
	LastError string    `json:"lastError"`
}

// Receipt outcomes.
const (
	ReceiptDelivered = "delivered"
	ReceiptFailed    = "failed"
	// ReceiptCollapsed: a status update superseded by the next event,
	// itself a status update, and not sent.
	ReceiptCollapsed = "collapsed"
)

// Receipt is what became of one event at one destination.
type Receipt struct {
	Destination string    `json:"destination"`
	Seq         int64     `json:"seq"`
	Kind        EventKind `json:"kind"`
	Outcome     string    `json:"outcome"`
	HTTPStatus  int       `json:"httpStatus,omitempty"`
	// RemoteID is the id the destination returned for the message.
	RemoteID string `json:"remoteId,omitempty"`
	Attempts int    `json:"attempts"`
	// Key is the idempotency key every attempt carried.
	Key    string    `json:"key"`
	Detail string    `json:"detail,omitempty"`
	At     time.Time `json:"at"`
}
