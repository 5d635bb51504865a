package runmanifest

import "time"

// Step is one step of a run's lifecycle: from the stamp before it that
// was recorded to its own.
type Step struct {
	Name string        `json:"name"`
	At   time.Time     `json:"at"`
	Took time.Duration `json:"took_ns"`
	// Earlier: the stamp is before a previous step's (a warm member was
	// ready before the claim that took it); it took no time of the run.
	Earlier bool `json:"earlier,omitempty"`
}

// Steps lists the recorded stamps in order, each with the time since the
// latest stamp before it (the first: 0; a stamp earlier than that one
// took none and is marked Earlier). Unrecorded stamps are left out.
func (l Lifecycle) Steps() []Step {
	all := []Step{{Name: "request_received", At: l.RequestReceived}, {Name: "admission_accepted", At: l.AdmissionAccepted},
		{Name: "claim_created", At: l.ClaimCreated}, {Name: "sandbox_assigned", At: l.SandboxAssigned}, {Name: "ready", At: l.Ready},
		{Name: "credential_ready", At: l.CredentialReady}, {Name: "runner_awakened", At: l.RunnerAwakened},
		{Name: "payload_fetched", At: l.PayloadFetched}, {Name: "model_request_started", At: l.ModelRequestStarted},
		{Name: "first_output", At: l.FirstOutput}, {Name: "post_hook_complete", At: l.PostHookComplete},
		{Name: "result_published", At: l.ResultPublished}, {Name: "resources_released", At: l.ResourcesReleased}}
	var out []Step
	var latest time.Time
	for _, s := range all {
		if s.At.IsZero() {
			continue
		}
		switch {
		case len(out) == 0:
		case s.At.Before(latest):
			s.Earlier = true
		default:
			s.Took = s.At.Sub(latest)
		}
		if s.At.After(latest) {
			latest = s.At
		}
		out = append(out, s)
	}
	return out
}

// Start says how the run's sandbox started: "warm hit", "cold start" or
// "cold start on a new node".
func (m *Manifest) Start() string {
	switch {
	case m.LaunchType == "new-node":
		return "cold start on a new node"
	case m.LaunchType == "warm" || (m.LaunchType == "" && m.Warm):
		return "warm hit"
	default:
		return "cold start"
	}
}
