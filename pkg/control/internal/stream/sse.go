package stream

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
)

// AppendEventJSON appends e as json.Marshal writes it, on one line: the
// job and kind marshalled, the data as it is (a JSON object on one line:
// checked and compacted when it was appended), compacted here only if it
// spans lines all the same, which would break the SSE framing.
func AppendEventJSON(b []byte, e controlapi.Event) []byte {
	b = append(b, `{"job":`...)
	b = store.AppendJSONString(b, e.Job)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"at":"`...)
	b = e.At.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","kind":`...)
	b = store.AppendJSONString(b, string(e.Kind))
	b = append(b, `,"data":`...)
	if bytes.ContainsAny(e.Data, "\r\n") {
		var d bytes.Buffer
		if err := json.Compact(&d, e.Data); err != nil {
			b = append(b, store.MustJSON(map[string]string{"error": "event data is not JSON"})...)
		} else {
			b = append(b, d.Bytes()...)
		}
	} else {
		b = append(b, e.Data...)
	}
	return append(b, '}')
}

// WriteSSEEvent writes a stored event: its sequence as the id (appended,
// not formatted into a string).
func WriteSSEEvent(b *bytes.Buffer, seq int64, kind controlapi.EventKind, data []byte) {
	b.WriteString("id: ")
	b.Write(strconv.AppendInt(b.AvailableBuffer(), seq, 10))
	b.WriteByte('\n')
	WriteSSE(b, "", string(kind), data)
}

// WriteSSE writes one Server-Sent Event: its id (when not empty), its
// event name and its data on one line.
func WriteSSE(b *bytes.Buffer, id, event string, data []byte) {
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	b.WriteString("event: " + event + "\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
}
