package serve

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// With LogJSON every plain line becomes a JSON record (a leveled line
// keeps its level, a line written in pieces is one record), and the
// structured logger writes records too; a format that is neither is
// refused, naming it.
func TestLogFormatJSON(t *testing.T) {
	var out bytes.Buffer
	l, lines, err := logger(&out, LogJSON)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = lines.Write([]byte("warm pools: 2 created, "))
	_, _ = lines.Write([]byte("0 deleted, errors []\n2026-12-06T10:00:00.000Z ERROR config sync failed (branch main): \"x\"\n"))
	l.Info("claim granted", "run_id", "r-1")
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		got = append(got, rec)
	}
	if len(got) != 3 || got[0]["msg"] != "warm pools: 2 created, 0 deleted, errors []" || got[0]["level"] != "INFO" ||
		got[1]["msg"] != `config sync failed (branch main): "x"` || got[1]["level"] != "ERROR" || got[2]["run_id"] != "r-1" {
		t.Errorf("records: %v", got)
	}
	if _, _, err := logger(&out, "yaml"); err == nil || !strings.Contains(err.Error(), `"yaml"`) {
		t.Errorf("log format yaml: %v", err)
	}
}
