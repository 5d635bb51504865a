package incidentreport_test

import (
	"encoding/json"
	"fmt"

	"github.com/slipway-dev/slipway/pkg/api/incidentreport"
)

// A console merges the reports of a control plane and a runtime by kind:
// one shape from both.
func ExampleReport() {
	control := []byte(`{"kinds":[{"kind":"agent_hangs","title":"agent hangs","sourced":true,"incidents":[{"kind":"agent_hangs","job":"j-1","state":"deadline_exceeded","terminal":true}]}],"open":0}`)
	runtime := []byte(`{"kinds":[{"kind":"credential_expires","title":"credential expires","sourced":true,"incidents":[{"kind":"credential_expires","run":"r-7","state":"failed","reason":"expired","terminal":false,"owner":"runtime","evidence":[{"name":"expired","value":"2026-12-06T12:00:02Z"}]}]}],"open":1}`)
	merged := map[string][]incidentreport.Incident{}
	open := 0
	for _, b := range [][]byte{control, runtime} {
		var r incidentreport.Report
		if err := json.Unmarshal(b, &r); err != nil {
			fmt.Println(err)
			return
		}
		open += r.Open
		for _, k := range r.Kinds {
			merged[k.Kind] = append(merged[k.Kind], k.Incidents...)
		}
	}
	fmt.Println("open:", open)
	for _, kind := range []string{"agent_hangs", "credential_expires"} {
		for _, i := range merged[kind] {
			fmt.Println(kind, i.Job+i.Run, i.State, "terminal:", i.Terminal, "evidence:", len(i.Evidence))
		}
	}
	// Output:
	// open: 1
	// agent_hangs j-1 deadline_exceeded terminal: true evidence: 0
	// credential_expires r-7 failed terminal: false evidence: 1
}
