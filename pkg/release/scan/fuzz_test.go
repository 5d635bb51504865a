package scan

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzScanContent feeds arbitrary bytes to the line scanner, whole and
// through a 64-byte buffer. It must never panic; every finding must carry a
// known rule and a line inside the input; no detail may hold a value a rule
// matched; and when no line is longer than the small buffer, reading in
// pieces must find exactly what one block finds.
func FuzzScanContent(f *testing.F) {
	for _, tc := range ruleCases() {
		for _, fl := range tc.files {
			f.Add([]byte(fl.content), true)
			f.Add([]byte(fl.content), false)
		}
	}
	for _, s := range []string{
		"", "\n", "-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN RSA PRIVATE KEY-----\n\n\n",
		"password: changeme\n", "a=b\r\nc: d\r\n", `{"auths": {"x": {"auth": "eA=="}}}`,
		"https://u:p@h https://v:q@i\n", "\"type\": \"service_account\"\n\"private_key\": \"k\"\n",
	} {
		f.Add([]byte(s), true)
	}
	const small, carry = 64, 16
	f.Fuzz(func(t *testing.T, data []byte, config bool) {
		var values [][]byte
		whole := contentScanner{path: "/f", config: config, values: &values}
		whole.scanBytes(data)
		lines := bytes.Count(data, []byte{'\n'}) + 1
		for _, fd := range whole.out {
			if !knownRule(fd.Rule) || fd.Path != "/f" || fd.Line < 1 || fd.Line > lines || fd.Detail == "" {
				t.Fatalf("bad finding %+v (input has %d lines)", fd, lines)
			}
			for _, v := range values {
				if len(v) >= 4 && bytes.Contains([]byte(fd.Detail), v) {
					t.Fatalf("detail %q holds a matched value", fd.Detail)
				}
			}
		}
		var pieces contentScanner
		pieces.path, pieces.config = "/f", config
		n, err := pieces.scan(bytes.NewReader(data), make([]byte, small), carry, false)
		if err != nil || n != int64(len(data)) {
			t.Fatalf("scan: %d bytes, %v", n, err)
		}
		longest := 0
		for _, l := range bytes.SplitAfter(data, []byte{'\n'}) {
			longest = max(longest, len(l))
		}
		if longest <= small && !reflect.DeepEqual(pieces.out, whole.out) {
			t.Fatalf("64-byte reads found %v, one block %v", pieces.out, whole.out)
		}
	})
}
