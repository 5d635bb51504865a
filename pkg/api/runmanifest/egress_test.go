package runmanifest

import "testing"

func TestAddEgressBounded(t *testing.T) {
	m := fullManifest("r-1")
	for range MaxEgress + 5 {
		m.AddEgress(EgressAttempt{Method: "GET", Destination: "10.0.0.1:80", Reason: "on no allow-list entry"})
	}
	if len(m.Egress) != MaxEgress || m.EgressDropped != 5 {
		t.Fatalf("%d kept, %d dropped", len(m.Egress), m.EgressDropped)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	c := m.Clone()
	c.Egress[0].Destination = "changed:1"
	if m.Egress[0].Destination != "10.0.0.1:80" {
		t.Fatal("clone shares its egress list")
	}
}
