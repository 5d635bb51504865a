package incidentreport

import "time"

// Report is an incident report: per incident kind, the jobs or runs that
// show it.
type Report struct {
	Kinds []Kind `json:"kinds"`
	// Open counts the incidents whose outcome is not confirmed.
	Open int `json:"open"`
}

// Kind is one kind's incidents, newest first.
type Kind struct {
	Kind  string `json:"kind"`
	Title string `json:"title"`
	// Sourced says a source that covers this kind was read: an empty list
	// is "none" only then, "not looked at" otherwise.
	Sourced   bool       `json:"sourced"`
	Incidents []Incident `json:"incidents"`
}

// Incident is one job or run that shows a kind, with its evidence.
type Incident struct {
	Kind   string `json:"kind"`
	Job    string `json:"job,omitempty"`
	Run    string `json:"run,omitempty"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Terminal says the outcome is confirmed; otherwise Owner must act by
	// Deadline.
	Terminal bool       `json:"terminal"`
	Owner    string     `json:"owner,omitempty"`
	Deadline *time.Time `json:"deadline,omitempty"`
	Attempts int        `json:"attempts,omitempty"`
	Evidence []Fact     `json:"evidence,omitempty"`
	Receipts []string   `json:"receipts,omitempty"`
	// Next is the next action, and whose.
	Next string    `json:"next,omitempty"`
	At   time.Time `json:"at,omitzero"`
}

// Fact is one named piece of evidence.
type Fact struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}
